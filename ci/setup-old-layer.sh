#!/usr/bin/env bash
# Debian 11's validation layer 1.2.162, unpacked (not installed) into vkexit's cache with a
# manifest of its own, for the tests that hold vkexit to a layer of that age (one that stops
# writing its log once the application has a debug messenger of its own):
#
#   ~/.cache/vkexit/layers/1.2.162/VkLayer_khronos_validation.json
#
# Its library needs libVkLayer_utils.so from the same directory (LD_LIBRARY_PATH). Pinned by
# version and SHA-256; without network it says so and setup goes on (the tests then skip).
set -euo pipefail

version=1.2.162.0-1
sha256=82e5fcf659aa9530c6f77bf8f89813303e71f222c8b7175f28a0590d644da3fe
url="http://deb.debian.org/debian/pool/main/v/vulkan-validationlayers/vulkan-validationlayers_${version}_amd64.deb"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vkexit/layers"
dir="$cache/1.2.162"

[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || { echo "setup-old-layer: not amd64; skipped" >&2; exit 0; }
[ -f "$dir/VkLayer_khronos_validation.json" ] && exit 0

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! curl -fsSL --retry 3 -o "$tmp/layer.deb" "$url"; then
    echo "setup-old-layer: cannot fetch $url; the layer-1.2 tests will skip" >&2
    exit 0
fi
echo "$sha256  $tmp/layer.deb" | sha256sum -c --quiet - || { echo "setup-old-layer: $url does not match its SHA-256" >&2; exit 1; }
dpkg-deb -x "$tmp/layer.deb" "$tmp/root"
mkdir -p "$tmp/layer"
cp "$tmp/root/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so" \
   "$tmp/root/usr/lib/x86_64-linux-gnu/libVkLayer_utils.so" "$tmp/layer/"
# The packaged manifest names the library by file name; this one names it by absolute path.
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$dir/libVkLayer_khronos_validation.so\"#" \
    "$tmp/root/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" > "$tmp/layer/VkLayer_khronos_validation.json"
mkdir -p "$cache"
rm -rf "$dir"
mv "$tmp/layer" "$dir"
echo "setup-old-layer: validation layer 1.2.162 in $dir"
