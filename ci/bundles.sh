#!/usr/bin/env bash
# Builds the portable bundles from a clone: vkexit, with the helpers it carries (its build
# script builds them with the same target and linker), for x86_64 and for aarch64, linked
# against glibc 2.31 (Debian 11, Ubuntu 20.04, the Jetson's L4T 35 and 36), each packed and
# checked, helpers included, by `vkexit bundle`:
#
#   ci/bundles.sh [x86_64|aarch64 ...]      # default: both
#
# Writes target/bundles/vkexit-VERSION-ARCH.tar.gz. Needs what `ci/setup.sh --cross` installs:
# cargo-zigbuild and zig (ziglang) in target/cross-tools, and for aarch64 Debian's Rust
# (rustc-web, cargo-web: /usr/bin/rustc, /usr/bin/cargo) with its aarch64 standard library
# (libstd-rust-web-dev:arm64). The aarch64 build uses that compiler because a standard library
# works only with the compiler it was built by; the x86_64 build uses the toolchain on PATH.
#
# Environment:
#   VKEXIT_GLIBC_FLOOR   the glibc to link against and to check (default 2.31)
#   VKEXIT_BUNDLE_OUT    where the tarballs go (default target/bundles)
#   CARGO_TARGET_DIR     where the builds go (default target; aarch64's in its debian-rust/)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

floor="${VKEXIT_GLIBC_FLOOR:-2.31}"
out="${VKEXIT_BUNDLE_OUT:-$repo/target/bundles}"
tools="$repo/target/cross-tools/bin"
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(x86_64 aarch64)

[ -x "$tools/cargo-zigbuild" ] && "$tools/python" -m ziglang version >/dev/null 2>&1 || {
    echo "ci/bundles.sh: cargo-zigbuild or zig is missing from target/cross-tools: run ci/setup.sh --cross" >&2
    exit 2
}
mkdir -p "$out"

# The host's vkexit packs the bundles: it reads every ELF file of them against the floor.
cargo build --release --locked -p vkexit
target="${CARGO_TARGET_DIR:-$repo/target}"
host="$target/release/vkexit"
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-gnu"
    case "$arch" in
        x86_64) path="$tools:$PATH" dir="$target" ;;
        aarch64)
            [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ] && [ -x /usr/bin/cargo ] || {
                echo "ci/bundles.sh: Debian's Rust with its aarch64 standard library is missing: run ci/setup.sh --cross" >&2
                exit 2
            }
            # That compiler's artifacts apart from the default toolchain's.
            path="$tools:/usr/bin:/bin" dir="$target/debian-rust"
            ;;
        *) echo "ci/bundles.sh: unknown architecture $arch (expected x86_64 or aarch64)" >&2; exit 2 ;;
    esac
    echo "bundles: building vkexit for $triple against glibc $floor" >&2
    start=$(date +%s)
    # zig is found as `python -m ziglang` of the tools' venv, first on PATH.
    env PATH="$path" RUSTUP_TOOLCHAIN= CARGO_TARGET_DIR="$dir" cargo zigbuild --release --locked \
        -p vkexit --target "$triple.$floor"
    echo "bundles: $triple built in $(($(date +%s) - start)) s" >&2
    "$host" bundle --strip-debug --target "$triple" --from "$dir/$triple/release" \
        --glibc-floor "$floor" \
        -o "$out/vkexit-$("$host" --version | awk '{print $2}')-$arch.tar.gz"
done
