#!/usr/bin/env bash
# Puts three Python runtimes with a Vulkan backend into vkexit's runtime cache, from their PyPI
# wheels, with every dependency pinned and nothing installed into any Python:
#
#   $CACHE/iree/cpXY/     iree-base-runtime (IREE's runtime; driver "vulkan"), numpy, ml_dtypes
#   $CACHE/taichi/cpXY/   taichi (arch=ti.vulkan), numpy and taichi's pure-Python dependencies
#   $CACHE/wgpu-py/cpXY/  wgpu (wgpu-py: wgpu-native behind cffi), cffi, pycparser
#
# A wheel is a zip of its modules, so unpacking every pinned wheel into one directory is the whole
# install; the scripts under scenarios/python/ put that directory first on sys.path. One directory
# per Python version: the local /usr/bin/python3's (3.11 on Debian 12) and 3.12 (Ubuntu 24.04 GPU
# machines), so the cache can be carried to a machine without network (`vkexit bundle --runtimes`).
# VKEXIT_PYTHON_VERSIONS="3.11 3.12" names others.
#
# CACHE is $VKEXIT_RUNTIME_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/vkexit/runtimes. Each runtime's
# VERSION file (read by `vkexit doctor`) records the pinned packages and the Python versions present.
# Nothing is downloaded for a Python version already unpacked with the same pins. A runtime that
# cannot be had for a version is reported and skipped, and the script still exits 0.
#
# `--portable DIR [X.Y]` then writes a copy of the cache for one Python version (3.12 if left out)
# into the new directory DIR, cut to what the scripts under scenarios/python/ load, for a GPU
# machine (`vkexit bundle --runtimes DIR`): about 150 MiB instead of 340. It leaves out IREE's
# tracy build and tools, Taichi's C API library and examples, and the packages' tests; strips
# Taichi's core module (the libraries in numpy.libs are left whole: strip breaks them); and keeps
# one numpy, which Taichi's directory links to.
set -uo pipefail

portable_dir=""
portable_version=3.12
no_setup=0
if [ "${1:-}" = --portable ]; then
    if [ -z "${2:-}" ] || [ -e "$2" ]; then
        echo "setup-python-more: --portable needs a directory that does not exist yet (got '${2:-}')" >&2
        exit 2
    fi
    portable_dir=$2
    # Asked for a copy, a machine that cannot set one up is a failure, not a skip.
    no_setup=1
    portable_version=${3:-3.12}
    if ! [[ $portable_version =~ ^[0-9]+\.[0-9]+$ ]]; then
        echo "setup-python-more: --portable $2 $portable_version: expected a Python version such as 3.12" >&2
        exit 2
    fi
elif [ $# -gt 0 ]; then
    echo "setup-python-more: unknown argument '$1' (expected: --portable DIR [X.Y])" >&2
    exit 2
fi

IREE_PINS="iree-base-runtime==3.13.0 numpy==2.4.6 ml_dtypes==0.6.0"
TAICHI_PINS="taichi==1.7.4 numpy==2.4.6 colorama==0.4.6 dill==0.4.1 rich==15.0.0 markdown-it-py==4.3.0 pygments==2.21.0 mdurl==0.1.2"
WGPU_PY_PINS="wgpu==0.32.0 cffi==2.1.1 pycparser==3.12"

python=${PYTHON:-/usr/bin/python3}
cache="${VKEXIT_RUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkexit/runtimes}"

say() { echo "setup-python-more: $*"; }

if ! [ -x "$python" ]; then
    say "$python not found (install python3); no Python runtime set up"
    exit "$no_setup"
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
    say "no pip for $python (apt-get install python3-pip); no Python runtime set up"
    exit "$no_setup"
fi
mkdir -p "$cache" || { say "cannot create $cache"; exit "$no_setup"; }

case "$(uname -m)" in
    x86_64 | aarch64) arch=$(uname -m) ;;
    *) say "no wheels for $(uname -m); no Python runtime set up"; exit "$no_setup" ;;
esac

local_version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
default_versions="$local_version 3.12"
# shellcheck disable=SC2086 # lists of words, one version each
versions=$(printf '%s\n' ${VKEXIT_PYTHON_VERSIONS:-$default_versions} ${portable_dir:+$portable_version} | sort -u)

# Downloads the pinned wheels (no dependency resolution: the pins are the whole set) for one
# Python version into $2. Every manylinux tag a wheel of these packages uses is accepted.
download() {
    local version=$1 into=$2 pins=$3 tag=cp${1/./} platforms=()
    local p
    for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014; do
        platforms+=(--platform "${p}_$arch")
    done
    # shellcheck disable=SC2086 # the pins are words
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version "$version" --implementation cp --abi "$tag" --abi abi3 --abi none \
        "${platforms[@]}" --dest "$into" $pins
}

# setup_runtime NAME PINS SOURCE: one cache directory, one subdirectory per Python version.
setup_runtime() {
    local name=$1 pins=$2 source=$3 dest="$cache/$1" version tag work wheel have=()
    mkdir -p "$dest" || { say "$name: cannot create $dest"; return 0; }
    for version in $versions; do
        tag=cp${version/./}
        if [ "$(cat "$dest/$tag/PINS" 2>/dev/null)" = "$pins" ]; then
            say "$name: already in $dest/$tag for Python $version"
            have+=("$version")
            continue
        fi
        work=$(mktemp -d) || return 0
        if ! download "$version" "$work" "$pins" >"$work/log" 2>&1; then
            say "$name: cannot download $pins for Python $version; not set up for it:"
            grep ERROR "$work/log" | grep -v 'Ignored the following' | head -n 2 | cut -c1-160 | sed 's/^/    /'
            rm -rf "$work"
            continue
        fi
        rm -rf "$dest/$tag.new"
        for wheel in "$work"/*.whl; do
            "$python" -m zipfile -e "$wheel" "$dest/$tag.new" || { say "$name: cannot unpack $wheel"; rm -rf "$work" "$dest/$tag.new"; continue 2; }
        done
        echo "$pins" >"$dest/$tag.new/PINS"
        rm -rf "$dest/$tag" && mv "$dest/$tag.new" "$dest/$tag"
        rm -rf "$work"
        say "$name: set up in $dest/$tag for Python $version"
        have+=("$version")
    done
    if ((${#have[@]} == 0)); then
        rm -f "$dest/VERSION"
        rmdir "$dest" 2>/dev/null
        return 0
    fi
    # The runtime's own version is the first pin; the dependencies follow it.
    local all present=()
    for all in "$dest"/cp*/PINS; do
        [ "$(cat "$all")" = "$pins" ] && present+=("$(basename "$(dirname "$all")")")
    done
    {
        echo "runtime: $name"
        echo "version: $(sed 's/==/ /' <<<"${pins%% *}") for ${present[*]}"
        echo "package: ${pins%% *}"
        echo "dependencies: ${pins#* }"
        echo "source: $source"
    } >"$dest/VERSION"
}

setup_runtime iree "$IREE_PINS" https://pypi.org/project/iree-base-runtime/
setup_runtime taichi "$TAICHI_PINS" https://pypi.org/project/taichi/
setup_runtime wgpu-py "$WGPU_PY_PINS" https://pypi.org/project/wgpu/

# portable DIR VERSION: the trimmed copy described at the top.
portable() {
    local into=$1 tag=cp${2/./} name f
    for name in iree taichi wgpu-py; do
        if ! [ -f "$cache/$name/$tag/PINS" ]; then
            say "$name is not in $cache for Python $2; no portable copy written"
            return 1
        fi
    done
    for name in iree taichi wgpu-py; do
        mkdir -p "$into/$name" && cp -a "$cache/$name/$tag" "$into/$name/" || return 1
        sed "s/^\(version: .*\) for .*/\1 for $tag/" "$cache/$name/VERSION" >"$into/$name/VERSION"
    done
    rm -rf "$into/iree/$tag/iree/_runtime_libs_tracy" "$into/iree/$tag/iree/_runtime_libs"/iree-* \
        "$into/taichi/$tag/taichi/_lib/c_api" "$into/taichi/$tag/taichi/examples" \
        "$into"/*/"$tag"/numpy/f2py
    find "$into" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
    strip --strip-unneeded "$into/taichi/$tag/taichi/_lib/core"/*.so || return 1
    # Both pin the same numpy: Taichi's directory points at IREE's copy.
    for f in "$into/iree/$tag"/numpy*; do
        f=$(basename "$f")
        diff -rq "$into/iree/$tag/$f" "$into/taichi/$tag/$f" >/dev/null || continue
        rm -rf "${into:?}/taichi/$tag/$f" && ln -s "../../iree/$tag/$f" "$into/taichi/$tag/$f"
    done
    say "portable copy for Python $2 in $into ($(du -sh "$into" | cut -f1))"
}

if [ -n "$portable_dir" ]; then
    portable "$portable_dir" "$portable_version" || exit 1
fi
exit 0
