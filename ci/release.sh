#!/usr/bin/env bash
# Makes the release files, the set a CI job or a user downloads instead of building, into
# target/release-files/:
#   vkexit-VERSION-ARCH                the one executable (it carries its helpers), alone
#   vkexit-VERSION-ARCH.tar.gz         the bundle (ci/bundles.sh): the same executable with the
#                                      CI files (matrices, baselines)
#   vkexit-VERSION-py3-none-manylinux_2_31_ARCH.whl   the wheel (ci/wheel.sh)
#   SHA256SUMS                         each file's SHA-256, for `sha256sum --check`
# for x86_64 and aarch64, each linked with zig against glibc 2.31 (Debian 11, Ubuntu 20.04, the
# Jetson's L4T 35 and 36). Every single file and every wheel's executable is checked against
# that floor here, itself (its highest GLIBC_ symbol version) and the helpers it carries
# (`vkexit bundle`, which reads them from the file): a file that needs more fails the set,
# named.
#
#   ci/release.sh [x86_64|aarch64|all]     # default: all
#
# Needs what `ci/setup.sh --cross` installs (cargo-zigbuild, zig, Debian's Rust with its
# aarch64 standard library); maturin comes from PyPI (ci/wheel.sh).
#
# Environment:
#   VKEXIT_GLIBC_FLOOR   the glibc to link against and to check (default 2.31)
#   VKEXIT_RELEASE_OUT   where the set goes (default target/release-files; emptied first)
#   VKEXIT_BUNDLE_OUT, CARGO_TARGET_DIR as for ci/bundles.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

floor="${VKEXIT_GLIBC_FLOOR:-2.31}"
out="${VKEXIT_RELEASE_OUT:-$repo/target/release-files}"
bundles="${VKEXIT_BUNDLE_OUT:-$repo/target/bundles}"
target="${CARGO_TARGET_DIR:-$repo/target}"
case "${1:-all}" in
    all) arches=(x86_64 aarch64) ;;
    x86_64 | aarch64) arches=("$1") ;;
    *) echo "ci/release.sh: unknown architecture $1 (expected x86_64, aarch64 or all)" >&2; exit 2 ;;
esac
command -v readelf >/dev/null || { echo "ci/release.sh: readelf is missing (apt-get install binutils)" >&2; exit 2; }

# The highest GLIBC_ symbol version a file needs, or nothing when it needs none.
glibc_needed() {
    readelf -W --dyn-syms --version-info "$1" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' |
        sed 's/^GLIBC_//' | sort -uV | tail -n 1
}

# Fails, naming the file (NAME, else FILE), when it or a helper it carries needs a glibc newer
# than the floor.
check_floor() {
    local file=$1 triple=$2 named=${3:-$1} needed dir
    needed=$(glibc_needed "$file")
    [ -n "$needed" ] || { echo "release: $named needs no glibc at all: not a vkexit of this set" >&2; exit 1; }
    if [ "$(printf '%s\n%s\n' "$needed" "$floor" | sort -V | tail -n 1)" != "$floor" ]; then
        echo "release: $named needs GLIBC_$needed, newer than the floor $floor" >&2
        exit 1
    fi
    dir=$(mktemp -d)
    cp "$file" "$dir/vkexit"
    "$host" bundle --target "$triple" --from "$dir" --glibc-floor "$floor" -o "$dir/check.tar.gz" >"$dir/log" 2>&1 || {
        echo "release: $named, or a helper it carries, fails the glibc $floor floor:" >&2
        cat "$dir/log" >&2
        exit 1
    }
    rm -rf "$dir"
    echo "release: $(basename "$named"): GLIBC_$needed at most, helpers included (floor $floor)" >&2
}

VKEXIT_GLIBC_FLOOR="$floor" ci/bundles.sh "${arches[@]}"
host="$target/release/vkexit"
version=$("$host" --version | awk '{print $2}')
rm -rf "$out"
mkdir -p "$out"
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-gnu"
    name="vkexit-$version-$arch"
    cp "$bundles/$name.tar.gz" "$out/"
    # The bundle's executable (stripped of DWARF, symbol tables kept) is the single file.
    tar xzf "$bundles/$name.tar.gz" -C "$out" --strip-components=2 "$name/bin/vkexit"
    mv "$out/vkexit" "$out/$name"
    chmod 755 "$out/$name"
    check_floor "$out/$name" "$triple"

    rm -f "$repo"/target/wheels/vkexit-"$version"-*_"$arch".whl
    ci/wheel.sh "$arch"
    wheel=$(ls "$repo"/target/wheels/vkexit-"$version"-*manylinux_2_31_"$arch".whl)
    cp "$wheel" "$out/"
    dir=$(mktemp -d)
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read(next(n for n in z.namelist() if n.endswith("/scripts/vkexit"))))' \
        "$wheel" "$dir/vkexit"
    check_floor "$dir/vkexit" "$triple" "$wheel"
    rm -rf "$dir"
done
(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "release: $out" >&2
(cd "$out" && ls -l -- * && cat SHA256SUMS)
