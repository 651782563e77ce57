#!/usr/bin/env bash
# Installs what vkexit's main job needs on Debian/Ubuntu (the Vulkan loader, Mesa's lavapipe
# CPU driver, the Khronos validation layer, glslc for refrt's shaders), then builds vkexit in
# release mode: one executable, target/release/vkexit, that carries its scenarios, refrt,
# layers and preload. Safe to run again: it installs only what is missing. What only the tests
# need is ci/setup-tests.sh's (ci/test.sh runs both).
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

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc)

ci/install-packages.sh setup "${packages[@]}"

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found: install a Rust toolchain (1.90 or newer) first" >&2
    exit 1
fi

# vkexit alone (the default member): its build script builds the helpers it carries, in
# target/vkexit-helpers, so that `cargo run --release` after this builds nothing again.
cargo build --release --locked
