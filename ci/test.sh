#!/usr/bin/env bash
# Sets up, then runs every check of the project: formatting, clippy, and the
# tests (unit tests, and integration tests that start real scenario processes
# on lavapipe under the real validation layer).
set -euo pipefail
cd "$(dirname "$0")/.."

# Cargo reads what `rustc -` says about the target with /dev/null as input. A
# /dev/null that was deleted and came back as a regular file holds whatever was
# "discarded" into it, and every build then fails on that text: repair it.
if [ ! -c /dev/null ] && [ "$(id -u)" -eq 0 ]; then
    echo "ci: /dev/null is not the null device; recreating it" >&2
    rm -f /dev/null && mknod -m 666 /dev/null c 1 3
fi

ci/setup.sh
ci/setup-tests.sh
# lavapipe warns on every run without it; each vkexit run gets its own.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
# A test whose requirement is missing fails here, unless testkit/skip-allowed.txt names it:
# what CI installs, the tests use (VKEXIT_TEST_SKIP=skip runs them as skips elsewhere).
export VKEXIT_TEST_SKIP="${VKEXIT_TEST_SKIP:-fail}"
cargo fmt --all --check
ci/lint-templates.sh
cargo clippy --workspace --all-targets --release --locked -- -D warnings
cargo test --workspace --release --locked
# The same bundle on Debian 13's and sid's own Vulkan stacks, and the wheel installed with pip in a Debian 12 root
# (roots cached; ci/stacks.sh says how).
[ "${VKEXIT_STACKS:-1}" = 0 ] || ci/stacks.sh
# The release set (ci/release.sh: the portable bundles, glibc 2.31, x86_64 and aarch64, their single files and both
# wheels, SHA256SUMS), then the bundles and the aarch64 wheel on Debian 11 and arm64 roots (ci/cross-stacks.sh says
# how): two more builds of the workspace and runs under qemu-user, 65 to 72 minutes more on a 2-core machine, which
# CI's 90 minutes cannot hold (docs/stacks.md, "What emulation costs"); VKEXIT_CROSS=1 runs them, gating
# (VKEXIT_CROSS_GATE=0 only reports). The bundles' layers are checked at unload, and a release file downloaded alone
# is run, before the stacks run.
[ "${VKEXIT_CROSS:-0}" = 0 ] || {
    ci/setup.sh --cross && ci/release.sh &&
        cargo test --release --locked -p vkexit --test exit_handlers_at_unload --test release_files &&
        VKEXIT_STACK_GATE="${VKEXIT_CROSS_GATE:-1}" ci/cross-stacks.sh
}
