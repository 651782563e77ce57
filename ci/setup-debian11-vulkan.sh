#!/usr/bin/env bash
# Debian 11's Vulkan stack, unpacked (not installed) into vkexit's cache, for the tests that
# hold vkexit to it on this machine: the validation layer 1.2.162 (one that gives findings to
# an application's own debug messenger instead of its log) and Mesa 20.3.5's lavapipe, a
# Vulkan 1.0 device:
#
#   ~/.cache/vkexit/debian11/layer/VkLayer_khronos_validation.json   (validation_manifest)
#   ~/.cache/vkexit/debian11/lavapipe/lvp_icd.x86_64.json            (--driver)
#   ~/.cache/vkexit/debian11/lib/                                    (LD_LIBRARY_PATH: LLVM 11,
#                                                                     libffi 7, libVkLayer_utils)
#
# Each package pinned by version and SHA-256. Without network it says so and setup goes on
# (the tests then skip).
set -euo pipefail

pool=http://deb.debian.org/debian/pool/main
packages=(
    "v/vulkan-validationlayers/vulkan-validationlayers_1.2.162.0-1_amd64.deb 82e5fcf659aa9530c6f77bf8f89813303e71f222c8b7175f28a0590d644da3fe"
    "m/mesa/mesa-vulkan-drivers_20.3.5-1_amd64.deb 60d981c18bb7cf6ffe1f0dbc30799bf174e5e15f14d708c5a970b693eb48b870"
    "l/llvm-toolchain-11/libllvm11_11.0.1-2_amd64.deb eaff3c8dd6039af90b8b6bdbf33433e35d8c808a7aa195d0e3800ef5e61affff"
    "libf/libffi/libffi7_3.3-6_amd64.deb 30ca89bfddae5fa6e0a2a044f22b6e50cd17c4bc6bc850c579819aeab7101f0f"
)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vkexit"
dir="$cache/debian11"

[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || { echo "setup-debian11-vulkan: not amd64; skipped" >&2; exit 0; }
[ -f "$dir/layer/VkLayer_khronos_validation.json" ] && [ -f "$dir/lavapipe/lvp_icd.x86_64.json" ] && exit 0

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for entry in "${packages[@]}"; do
    read -r path sha256 <<<"$entry"
    deb="$tmp/$(basename "$path")"
    if ! curl -fsSL --retry 3 -o "$deb" "$pool/$path"; then
        echo "setup-debian11-vulkan: cannot fetch $pool/$path; the Debian 11 stack tests will skip" >&2
        exit 0
    fi
    echo "$sha256  $deb" | sha256sum -c --quiet - || { echo "setup-debian11-vulkan: $pool/$path does not match its SHA-256" >&2; exit 1; }
    dpkg-deb -x "$deb" "$tmp/root"
done
libs="$tmp/root/usr/lib/x86_64-linux-gnu"
mkdir -p "$tmp/out/layer" "$tmp/out/lavapipe" "$tmp/out/lib"
cp "$libs/libVkLayer_khronos_validation.so" "$tmp/out/layer/"
cp "$libs/libvulkan_lvp.so" "$tmp/out/lavapipe/"
cp -L "$libs/libLLVM-11.so.1" "$libs/libffi.so.7" "$libs/libVkLayer_utils.so" "$tmp/out/lib/"
# The packaged manifests name their libraries by file name or by /usr/lib path; these name the
# unpacked files by absolute path.
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$dir/layer/libVkLayer_khronos_validation.so\"#" \
    "$tmp/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" > "$tmp/out/layer/VkLayer_khronos_validation.json"
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$dir/lavapipe/libvulkan_lvp.so\"#" \
    "$tmp/root/usr/share/vulkan/icd.d/lvp_icd.x86_64.json" > "$tmp/out/lavapipe/lvp_icd.x86_64.json"
mkdir -p "$cache"
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "setup-debian11-vulkan: validation layer 1.2.162 and Mesa 20.3.5's lavapipe in $dir"
