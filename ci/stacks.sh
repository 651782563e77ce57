#!/usr/bin/env bash
# vkexit on other Vulkan stacks: Debian 13 (trixie) and Debian sid root filesystems made from
# Debian's own packages (loader, Mesa's lavapipe, the validation layer), each built once and
# cached, and the release bundle run inside each as a new user would run it:
#   - `vkexit doctor` must say ready;
#   - the built-in matrix against the built-in baseline (`vkexit run --runs N`) must be green;
#   - the meta-suite (ci/matrix/meta.toml judged by ci/baselines/meta.toml, every run checked
#     against what the program really did) must give no false pass and no false failure.
#
#   ci/stacks.sh [--roots-only] [SUITE...]      # default suites: trixie sid
#
# Environment:
#   VKEXIT_STACK_CACHE   where the roots live (default ~/.cache/vkexit/stacks)
#   VKEXIT_STACK_RUNS    runs per cell of the built-in matrix (default 3)
#   VKEXIT_STACK_META    runs per meta-suite program (default 5)
#   VKEXIT_STACK_OUT     where each stack's results, run dirs and logs go (default target/stacks)
#   VKEXIT_STACK_GATE    0: report every stack's results but exit 0 (default 1: any failure fails)
#
# Needs root (debootstrap, and bwrap to enter the roots); installs debootstrap and bubblewrap
# with apt-get when missing. A root takes about a minute to build, then seconds to reuse.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

cache="${VKEXIT_STACK_CACHE:-$HOME/.cache/vkexit/stacks}"
runs="${VKEXIT_STACK_RUNS:-3}"
meta_runs="${VKEXIT_STACK_META:-5}"
out="${VKEXIT_STACK_OUT:-$repo/target/stacks}"
gate="${VKEXIT_STACK_GATE:-1}"
mirror="${VKEXIT_STACK_MIRROR:-http://deb.debian.org/debian}"
packages="libvulkan1,mesa-vulkan-drivers,vulkan-validationlayers,python3"

roots_only=0
suites=()
for arg in "$@"; do
    case "$arg" in
        --roots-only) roots_only=1 ;;
        -*) echo "ci/stacks.sh: unknown flag $arg (expected --roots-only or suite names)" >&2; exit 2 ;;
        *) suites+=("$arg") ;;
    esac
done
[ ${#suites[@]} -gt 0 ] || suites=(trixie sid)

if [ "$(id -u)" -ne 0 ]; then
    echo "ci/stacks.sh: needs root (debootstrap builds the roots, bwrap enters them)" >&2
    exit 2
fi
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# One root per suite, rebuilt only when the package list changes. A root that was being built
# when the script stopped is thrown away, never reused half-made.
build_root() {
    local suite=$1 root="$cache/$1"
    if [ -f "$root/.vkexit-stack" ] && [ "$(cat "$root/.vkexit-stack")" = "$packages" ]; then
        return
    fi
    echo "stacks: building the $suite root in $root (debootstrap, about a minute)" >&2
    mkdir -p "$cache"
    rm -rf "$root" "$root.partial"
    debootstrap --variant=minbase --include="$packages" "$suite" "$root.partial" "$mirror" \
        >"$cache/$suite.debootstrap.log" 2>&1 || {
        echo "stacks: debootstrap $suite failed; the end of $cache/$suite.debootstrap.log:" >&2
        tail -n 20 "$cache/$suite.debootstrap.log" >&2
        return 1
    }
    rm -rf "$root.partial/var/cache/apt/archives"/*.deb
    echo "$packages" >"$root.partial/.vkexit-stack"
    mv "$root.partial" "$root"
}

for suite in "${suites[@]}"; do
    build_root "$suite"
done
[ "$roots_only" -eq 0 ] || exit 0
