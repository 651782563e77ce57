#!/usr/bin/env bash
# The gate tests itself, the longer run: every program of ci/matrix/meta.toml (one known-bad
# program per failure class, and known-good ones) RUNS times through vkexit on lavapipe under
# the validation layer, judged by ci/baselines/meta.toml, and every run checked against what
# the program really did. Prints the table of README's "The gate tests itself" (also written
# to target/meta-suite.md) and exits nonzero on any false pass or false failure.
#   ci/meta-suite.sh [RUNS]        # default 100
#   META_DRIVER=nvidia ci/meta-suite.sh 20   # the same programs on another driver than lavapipe
set -euo pipefail
cd "$(dirname "$0")/.."

# lavapipe warns on every run without it; each vkexit run gets its own.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
cargo build --release --workspace
mkdir -p target
META_RUNS="${1:-100}" META_TABLE="${META_TABLE:-$PWD/target/meta-suite.md}" \
    cargo test --release -p vkexit --test meta_suite -- --ignored --nocapture the_longer_run
