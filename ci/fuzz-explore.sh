#!/usr/bin/env bash
# Explores the parser properties with fresh random seeds, as long as asked:
#   ci/fuzz-explore.sh [CASES]        (default 100000 cases per property)
# Not part of the gate (ci/test.sh runs the same properties from a fixed
# seed). A failure found here is saved by proptest in
# harness/tests/fuzz_parsers.proptest-regressions; commit that line with
# the fix, and every later gating run replays it first.
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-100000}"
case "$cases" in
    '' | *[!0-9]*) echo "fuzz-explore: CASES must be a whole number, got '$cases'" >&2; exit 2 ;;
esac
VKEXIT_FUZZ_RANDOM=1 PROPTEST_CASES="$cases" \
    cargo test --release --locked -p vkexit --test fuzz_parsers
