#!/usr/bin/env bash
# Sets up, then runs every check of the project: formatting, clippy, and the
# tests (unit tests, and integration tests that start real scenario processes
# on lavapipe under the real validation layer).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
# lavapipe warns on every run without it; each vkexit run gets its own.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# Cargo caches what `rustc -` told it about the target in target/.rustc_info.json,
# failures included. On this kind of machine that probe has been seen, rarely, to
# read stray text instead of an empty input and fail; the cached failure then
# fails every later step. Such a step is retried once without the cache.
cargo_step() {
    local log rc=0
    log=$(mktemp)
    "$@" 2>"$log" || rc=$?
    cat "$log" >&2
    if [ "$rc" -ne 0 ] && grep -q "to learn about target-specific information" "$log"; then
        echo "ci: cargo's rustc probe failed; retrying once without its cache" >&2
        rm -f target/.rustc_info.json
        rc=0
        "$@" || rc=$?
    fi
    rm -f "$log"
    return "$rc"
}

cargo fmt --all --check
cargo_step cargo clippy --workspace --all-targets --release --locked -- -D warnings
cargo_step cargo test --workspace --release --locked
