#!/bin/sh
# Builds the fixture suites into OUT (default target/suites): the CMake project of
# suites/cmake (its CTest tests drive the scenario programs in BIN, default target/release,
# and its GoogleTest program is built where libgtest-dev is installed) and the Rust test
# program of suites/libtest. vkexit's tests (harness/tests/suites.rs) and
# ci/matrix/suites.toml use what it builds.
#   suites/build.sh [OUT [BIN]]
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/target/suites}
bin=${2:-${CARGO_TARGET_DIR:-$repo/target}/release}
mkdir -p "$out"
cmake -S "$repo/suites/cmake" -B "$out/cmake" -DVKEXIT_BIN="$bin" >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log" >&2; exit 1; }
cmake --build "$out/cmake" -j 2 >>"$out/cmake.log" 2>&1 || { cat "$out/cmake.log" >&2; exit 1; }
rustc --edition 2021 --test -O "$repo/suites/libtest/teardown.rs" -o "$out/teardown-tests"
