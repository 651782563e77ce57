#!/usr/bin/env bash
# Packages every crate of the workspace as the crate registry would get it (`cargo package
# --workspace`), into target/package/*.crate, each package verified by building it from the
# packaged files alone, against the other packages (Cargo's temporary registry overlay).
#
#   ci/package.sh [cargo package flags...]
#
# vkexit's build script builds the helpers it carries (the scenarios, refrt, the layers, the
# preload) from crates beside harness/; a package has nothing beside it. So first this copies
# the helpers' sources into harness/packaged/ (ignored by git, carried by the vkexit package's
# `include`): the crates and their parts that harness/build.rs names (CRATES, CRATE_PARTS),
# without their dev-dependencies (their tests stay home), a workspace of just them with the
# workspace's settings and profiles, its Cargo.lock cut down to what they use (the same locked
# versions), and the results file's schema that `vkexit schema` prints. Each manifest there is
# named Cargo.toml.in, because cargo leaves out of a package any folder with a Cargo.toml of its
# own; harness/build.rs copies the tree into OUT_DIR under the real names and builds it there.
#
# Offline once the registry cache holds every crate the workspace locks (`cargo fetch` fills
# it first where it does not).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
packaged=harness/packaged

# One list, harness/build.rs's: `const CRATES: [&str; N] = [ "a", "b", ... ];`, on one line or
# on several: from the line that opens it to the first that closes it, that line included.
list_of() {
    awk -v head="const $1:" 'index($0, head) == 1 { on = 1 } on { print } on && /\];/ { exit }' \
        harness/build.rs | grep -o '"[^"]*"' | tr -d '"'
}
mapfile -t crates < <(list_of CRATES)
mapfile -t parts < <(list_of CRATE_PARTS)
nonempty() { for item in "$@"; do [ -n "$item" ] || return 1; done; }
[ ${#crates[@]} -gt 0 ] && [ ${#parts[@]} -gt 0 ] && nonempty "${crates[@]}" "${parts[@]}" || {
    echo "ci/package.sh: cannot read CRATES and CRATE_PARTS from harness/build.rs" >&2
    exit 2
}

rm -rf "$packaged"
mkdir -p "$packaged/docs"
for crate in "${crates[@]}"; do
    mkdir -p "$packaged/$crate"
    for part in "${parts[@]}"; do
        [ ! -e "$crate/$part" ] || cp -R "$crate/$part" "$packaged/$crate/"
    done
    # Without [dev-dependencies] (the tests and the test kit stay in the workspace).
    awk '/^\[/ { skip = ($0 == "[dev-dependencies]") } !skip' "$crate/Cargo.toml" >"$packaged/$crate/Cargo.toml"
done
# The workspace's settings, dependencies, lints and profiles; its members the helpers' crates.
members=$(printf '"%s", ' "${crates[@]}")
awk -v members="members = [${members%, }]" '
    /^members = / { print members; next }
    /^default-members = / { next }
    { print }' Cargo.toml >"$packaged/Cargo.toml"
cp Cargo.lock "$packaged/Cargo.lock"
cp docs/results.schema.json "$packaged/docs/"
# Every crate the workspace locks, for every platform, into the registry cache (from crates.io
# only where the cache lacks one): from here on, nothing needs the network.
cargo fetch --locked --offline >/dev/null 2>&1 || cargo fetch --locked
# Resolving the smaller workspace drops from its lock what it does not use and keeps every
# version that stays.
cargo metadata --offline --format-version 1 --manifest-path "$packaged/Cargo.toml" >/dev/null
find "$packaged" -name Cargo.toml -exec sh -c 'mv "$1" "$1.in"' _ {} \;

# --allow-dirty: what is checked is that the packages build from their files alone; a
# working copy with changes not yet committed is packaged as it is (each package's
# .cargo_vcs_info.json says so).
cargo package --workspace --locked --allow-dirty --offline "$@"
ls -l "${CARGO_TARGET_DIR:-$repo/target}"/package/*.crate
