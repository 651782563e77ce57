#!/usr/bin/env bash
# Installs what vkexit's main job needs on Debian/Ubuntu (the Vulkan loader, Mesa's lavapipe
# CPU driver, the Khronos validation layer, glslc for refrt's shaders, the CA certificates cargo
# fetches crates with), then builds vkexit in release mode: one executable,
# target/release/vkexit, that carries its scenarios, refrt, layers and preload. Without cargo
# on PATH it installs Debian's Rust (rustc-web and cargo-web: 1.96 in Debian 12's
# bookworm-security), so a fresh machine needs only Debian's archive and crates.io, no rustup.
# Safe to run again: it installs only what is missing. What only the tests need is
# ci/setup-tests.sh's (ci/test.sh runs both).
#
#   ci/setup.sh            # the above
#   ci/setup.sh --cross    # only what ci/bundles.sh needs to build the portable bundles
#                          # (x86_64 and aarch64, glibc 2.31), and qemu-user to run arm64
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --cross ]; then
    exec ci/setup-cross.sh
elif [ $# -gt 0 ]; then
    echo "ci/setup.sh: unknown argument $1 (expected --cross or nothing)" >&2
    exit 2
fi

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc ca-certificates)
command -v cargo >/dev/null || packages+=(rustc-web cargo-web)

ci/install-packages.sh setup "${packages[@]}"

# The workspace's rust-version (Cargo.toml).
if ! cargo --version 2>/dev/null | grep -qE '^cargo 1\.(9[0-9]|[1-9][0-9]{2,})\.'; then
    echo "setup: cargo is $(cargo --version 2>&1): install a Rust toolchain (1.90 or newer): on Debian 12," \
        "Debian's rustc-web and cargo-web from bookworm-security (apt-get install rustc-web cargo-web), or rustup" >&2
    exit 1
fi

# vkexit alone (the default member): its build script builds the helpers it carries, in
# target/vkexit-helpers, so that `cargo run --release` after this builds nothing again.
cargo build --release --locked
