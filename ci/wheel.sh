#!/usr/bin/env bash
# Builds vkexit's wheel: the one executable (it carries its scenarios, refrt, layers and
# preload) in a Python wheel made by maturin (bindings "bin", harness/pyproject.toml), linked
# with zig against glibc 2.31 and tagged manylinux_2_31, into target/wheels/:
#
#   ci/wheel.sh [x86_64|aarch64]     # default: this machine's architecture
#
# Then: pip install target/wheels/vkexit-*.whl puts vkexit on the PATH of that environment.
# maturin and zig (ziglang) come from PyPI into target/wheel-tools. The x86_64 wheel is built by
# the toolchain on PATH. The aarch64 one (the Jetson's L4T 35 and 36) needs the Rust standard
# library for that target, which only the compiler it was built by can use: on a machine that
# is not aarch64 it is built by Debian's Rust (rustc-web, cargo-web) with Debian's aarch64
# standard library (libstd-rust-web-dev:arm64), as ci/bundles.sh builds the aarch64 bundle;
# `ci/setup.sh --cross` installs them. That build goes into target/debian-rust, the bundle's.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tools="$repo/target/wheel-tools"
arch="${1:-$(uname -m)}"
case "$arch" in
    x86_64 | aarch64) ;;
    *) echo "ci/wheel.sh: unknown architecture $arch (expected x86_64 or aarch64)" >&2; exit 2 ;;
esac

if [ ! -x "$tools/bin/maturin" ] || ! "$tools/bin/python" -m ziglang version >/dev/null 2>&1; then
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q maturin ziglang || {
        echo "ci/wheel.sh: maturin and ziglang could not be installed from PyPI into $tools" >&2
        exit 2
    }
fi
# zig is found as `python3 -m ziglang` of the tools' venv, first on PATH.
path="$tools/bin:$PATH"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
if [ "$arch" = aarch64 ] && [ "$(uname -m)" != aarch64 ] &&
    ! rustc --print target-libdir --target aarch64-unknown-linux-gnu 2>/dev/null | xargs -r test -d; then
    [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ] && [ -x /usr/bin/cargo ] || {
        echo "ci/wheel.sh: no Rust standard library for aarch64: run ci/setup.sh --cross" \
            "(Debian's rustc-web, cargo-web and libstd-rust-web-dev:arm64)" >&2
        exit 2
    }
    # Debian's compiler first; its artifacts apart from the default toolchain's.
    path="$tools/bin:/usr/bin:/bin"
    target_dir="$target_dir/debian-rust"
fi
env PATH="$path" RUSTUP_TOOLCHAIN= CARGO_TARGET_DIR="$target_dir" maturin build --release --locked --zig \
    -m harness/Cargo.toml --target "$arch-unknown-linux-gnu" -o "$repo/target/wheels"
