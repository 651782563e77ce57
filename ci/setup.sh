#!/usr/bin/env bash
# Installs what vkexit needs on Debian/Ubuntu (the Vulkan loader, Mesa's
# lavapipe CPU driver, the Khronos validation layer, glslc), then builds the
# whole workspace in release mode. Safe to run again: it installs only what
# is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libvulkan1 libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools glslc gcc cmake chromium)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
        sudo="sudo"
    fi
    echo "setup: installing ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found: install a Rust toolchain (1.88 or newer) first" >&2
    exit 1
fi

cargo build --release --workspace --locked

ci/setup-runtimes.sh   # the real runtimes (ggml, Halide) into vkexit's runtime cache; never fails setup
ci/setup-python-runtimes.sh || echo "setup: ncnn wheel not unpacked; the ncnn cases exit 3 until it is" >&2
ci/setup-python-more.sh   # IREE, Taichi and wgpu-py wheels into the runtime cache; never fails setup
