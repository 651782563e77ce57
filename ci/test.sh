#!/usr/bin/env bash
# Sets up, then runs every check of the project: formatting, clippy, and the
# tests (unit tests, and integration tests that run real scenario processes
# on lavapipe under the real validation layer).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
# lavapipe warns on every run without it; each vkexit run gets its own.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
cargo fmt --all --check
cargo clippy --workspace --all-targets --release --locked -- -D warnings
cargo test --workspace --release --locked
