#!/usr/bin/env bash
# Unpacks the ncnn Python wheel (Vulkan enabled) into target/real-runtimes/ncnn/cpXY, one
# directory per Python version, where the scripts under scenarios/ncnn/ look for it.
# Nothing is installed into any Python: a wheel is a zip of the module, so unpacking it is
# the whole install, and pip is only used to download it (with --no-deps: the scripts do not
# need numpy or the model zoo's other dependencies).
#
# It fetches the wheel for /usr/bin/python3 (the scripts' interpreter) and for Python 3.12,
# the python3 of Ubuntu 24.04 GPU machines, so target/real-runtimes/ncnn can be copied to a
# machine without network. VKEXIT_NCNN_PYTHONS="3.11 3.12" names other versions.
# VKEXIT_NCNN_ARCH=aarch64 fetches the wheels of another architecture into
# target/real-runtimes/ncnn-aarch64 (for ci/cross-stacks.sh's arm64 roots: Python 3.11 in
# Debian 12, 3.9 in Debian 11); the scripts find them through VKEXIT_NCNN_DIR.
# Safe to run again: a version already unpacked at the pinned ncnn version is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

NCNN_VERSION=1.0.20261020
python=${PYTHON:-/usr/bin/python3}
arch=${VKEXIT_NCNN_ARCH:-$(uname -m)}
cache=target/real-runtimes/ncnn
[ "$arch" = "$(uname -m)" ] || cache=target/real-runtimes/ncnn-$arch

if ! [ -x "$python" ]; then
    echo "setup-python-runtimes: $python not found: install python3 and python3-pip" >&2
    exit 1
fi
local_version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
versions=${VKEXIT_NCNN_PYTHONS:-"$local_version 3.12"}

case "$arch" in
    x86_64) platform=manylinux_2_28_x86_64 ;;
    aarch64) platform=manylinux_2_28_aarch64 ;;
    *) echo "setup-python-runtimes: no ncnn wheel for $arch" >&2; exit 1 ;;
esac

pip_download() {
    if "$python" -m pip --version >/dev/null 2>&1; then
        "$python" -m pip download --quiet --disable-pip-version-check "$@"
    elif command -v pip3 >/dev/null; then
        pip3 download --quiet --disable-pip-version-check "$@"
    else
        echo "setup-python-runtimes: pip not found: install python3-pip" >&2
        return 1
    fi
}

for version in $(printf '%s\n' $versions | sort -u); do
    tag=cp${version/./}
    dest=$cache/$tag
    if [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$NCNN_VERSION" ]; then
        echo "setup-python-runtimes: ncnn $NCNN_VERSION for Python $version already in $dest"
        continue
    fi
    wheels=$cache/wheels
    mkdir -p "$wheels"
    pip_download "ncnn==$NCNN_VERSION" --no-deps --only-binary=:all: \
        --python-version "$version" --implementation cp --abi "$tag" --platform "$platform" \
        --dest "$wheels"
    wheel=$(ls "$wheels"/ncnn-"$NCNN_VERSION"-"$tag"-"$tag"-*.whl | head -n 1)
    rm -rf "$dest.tmp"
    "$python" -m zipfile -e "$wheel" "$dest.tmp"
    echo "$NCNN_VERSION" >"$dest.tmp/VERSION"
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
    echo "setup-python-runtimes: ncnn $NCNN_VERSION for Python $version unpacked in $dest"
done
