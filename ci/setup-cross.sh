#!/usr/bin/env bash
# `ci/setup.sh --cross`: what ci/bundles.sh needs on a Debian 12 machine, from Debian's archive,
# PyPI and crates.io only (no rustup server):
#   - zig (PyPI `ziglang`) and cargo-zigbuild (crates.io) in target/cross-tools: they link
#     against glibc 2.31's symbol versions whatever glibc this machine has;
#   - Debian's Rust 1.96 (bookworm-security `rustc-web`, `cargo-web`) with its aarch64
#     standard library (`libstd-rust-web-dev:arm64`), and gcc-aarch64-linux-gnu for C;
#   - qemu-user-static and binfmt-support, to run the aarch64 bundle (ci/cross-stacks.sh).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup --cross: need root or sudo for apt-get" >&2; exit 1; }
    sudo="sudo"
fi
packages=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    qemu-user-static binfmt-support debootstrap bubblewrap python3-venv)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
    echo "setup --cross: installing ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# rustc-web is 1.96 from bookworm-security; bookworm's own 1.85 has no cargo-zigbuild and a
# different standard library.
/usr/bin/rustc --version | grep -q '^rustc 1\.9[6-9]' || {
    echo "setup --cross: /usr/bin/rustc is $(/usr/bin/rustc --version); need rustc-web 1.96 (bookworm-security)" >&2
    exit 1
}

tools=target/cross-tools
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/python" -m ziglang version >/dev/null 2>&1 || "$tools/bin/pip" install -q 'ziglang==0.17.1'
# cargo-zigbuild needs Rust 1.88 or newer: the toolchain on PATH if it is, else Debian's 1.96.
if [ ! -x "$tools/bin/cargo-zigbuild" ]; then
    cargo=cargo
    cargo --version 2>/dev/null | grep -qE '^cargo 1\.(8[89]|9[0-9]|[1-9][0-9]{2})' || cargo=/usr/bin/cargo
    # In a directory of its own: a tool, not the workspace's build (nor its lock).
    env -u CARGO_TARGET_DIR "$cargo" install --locked --root "$tools" cargo-zigbuild@0.24.1
fi
echo "setup --cross: ready ($("$tools/bin/cargo-zigbuild" --version), zig $("$tools/bin/python" -m ziglang version), $(/usr/bin/rustc --version))"
