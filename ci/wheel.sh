#!/usr/bin/env bash
# Builds vkexit's wheel: the one executable (it carries its scenarios, refrt, layers and
# preload) in a Python wheel made by maturin (bindings "bin", harness/pyproject.toml), linked
# with zig against glibc 2.31 and tagged manylinux_2_31, into target/wheels/:
#
#   ci/wheel.sh [x86_64|aarch64]     # default: this machine's architecture
#
# Then: pip install target/wheels/vkexit-*.whl puts vkexit on the PATH of that environment.
# maturin and zig (ziglang) come from PyPI into target/wheel-tools. aarch64 needs the Rust
# standard library for that target (rustup target add aarch64-unknown-linux-gnu).
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
PATH="$tools/bin:$PATH" maturin build --release --locked --zig \
    -m harness/Cargo.toml --target "$arch-unknown-linux-gnu" -o "$repo/target/wheels"
