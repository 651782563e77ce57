#!/usr/bin/env bash
# The README's first command on a fresh Debian 12 machine, timed: a bookworm root made by
# debootstrap (minbase: no Rust, no compiler, no CA certificates, no git), with Debian 12's
# sources (bookworm, bookworm-updates, bookworm-security), this checkout's last commit copied in;
# then, in that root, as root, with the network (Debian's archive, crates.io and PyPI only):
#
#   ci/setup.sh && cargo run --release -- run       (ci/fresh-machine.sh)
#   ci/test.sh                                       (ci/fresh-machine.sh --tests)
#
# Every line it prints is written to the log with the seconds since it started; the summary
# says when the packages were in, when the build was done, and when the first table came (with
# --tests: when the tests' setup, the build, the tests and the stacks began, and how it ended).
#
# Environment:
#   VKEXIT_STACK_CACHE   where the pristine root is kept, made once (default ~/.cache/vkexit/stacks)
#   VKEXIT_FRESH_OUT     where the root's copy and the log go (default target/fresh-machine)
#   VKEXIT_STACK_MIRROR  Debian's archive (default http://deb.debian.org/debian)
#   VKEXIT_FRESH_CA      a CA bundle the network needs besides Debian's (a proxy that inspects TLS):
#                        given to cargo, pip and curl in the root; default none
#
# Needs root (debootstrap, bwrap), as ci/stacks.sh does. The root keeps root's capabilities and device
# nodes (--cap-add ALL, --dev-bind): the test command's ci/stacks.sh runs debootstrap inside it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

cache="${VKEXIT_STACK_CACHE:-$HOME/.cache/vkexit/stacks}"
out="${VKEXIT_FRESH_OUT:-$repo/target/fresh-machine}"
mirror="${VKEXIT_STACK_MIRROR:-http://deb.debian.org/debian}"
pristine="$cache/bookworm-minbase"

command='ci/setup.sh && cargo run --release -- run'
case "${1:-}" in
    "") ;;
    --tests) command='ci/test.sh' ;;
    *) echo "ci/fresh-machine.sh: unknown argument $1 (expected nothing, or --tests)" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
    echo "ci/fresh-machine.sh: needs root (debootstrap builds the root, bwrap enters it)" >&2
    exit 2
fi
ci/install-packages.sh fresh-machine debootstrap bubblewrap

if [ ! -f "$pristine/.vkexit-stack" ]; then
    echo "fresh-machine: building the pristine Debian 12 root in $pristine (debootstrap)" >&2
    mkdir -p "$cache"
    rm -rf "$pristine" "$pristine.partial"
    debootstrap --variant=minbase bookworm "$pristine.partial" "$mirror" >"$cache/bookworm-minbase.debootstrap.log" 2>&1 || {
        tail -n 20 "$cache/bookworm-minbase.debootstrap.log" >&2
        exit 1
    }
    rm -f "$pristine.partial/etc/apt/sources.list" "$pristine.partial/var/cache/apt/archives"/*.deb
    cat >"$pristine.partial/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: ${mirror}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror}-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    echo minbase >"$pristine.partial/.vkexit-stack"
    mv "$pristine.partial" "$pristine"
fi

# A copy of the pristine root for this run, and the checkout's last commit in it.
rm -rf "$out" && mkdir -p "$out"
root="$out/root"
cp -a "$pristine" "$root"
mkdir -p "$root/root/vkexit"
git archive --format=tar HEAD | tar -x -C "$root/root/vkexit"
! chroot "$root" sh -c 'command -v cargo || command -v rustc || command -v cc' >/dev/null ||
    { echo "fresh-machine: the root is not fresh: it has a Rust toolchain or a compiler" >&2; exit 1; }

ca=()
[ -z "${VKEXIT_FRESH_CA:-}" ] ||
    ca=(--ro-bind "$VKEXIT_FRESH_CA" /run/network-ca.crt --setenv CARGO_HTTP_CAINFO /run/network-ca.crt
        --setenv PIP_CERT /run/network-ca.crt --setenv SSL_CERT_FILE /run/network-ca.crt
        --setenv CURL_CA_BUNDLE /run/network-ca.crt)
log="$out/log.txt"
start=$SECONDS
code=0
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 XDG_RUNTIME_DIR=/run/user/0 TERM=dumb \
    bwrap --die-with-parent --cap-add ALL --dev-bind "$root" / --proc /proc --dev /dev --ro-bind /sys /sys \
    --bind /sys/fs/cgroup /sys/fs/cgroup --ro-bind /etc/resolv.conf /etc/resolv.conf \
    --perms 1777 --tmpfs /tmp --tmpfs /run --perms 0700 --dir /run/user/0 "${ca[@]}" --chdir /root/vkexit \
    bash -c "$command"'; code=$?; times >/tmp/times; echo "cpu: $(tail -n 1 /tmp/times)"; exit $code' 2>&1 |
    while IFS= read -r line; do printf '%4d s  %s\n' $((SECONDS - start)) "$line"; done >"$log" || code=$?
took=$((SECONDS - start))

# When each part ended: the packages (cargo's first line), the build, the table's first cell.
at() { grep -E "$1" "$log" | head -n 1 | awk '{print $1 " s"}'; }
last_at() { grep -E "$1" "$log" | tail -n 1 | awk '{print $1 " s"}'; }
summary="$out/summary.md"
if [ "$command" = ci/test.sh ]; then
    {
        echo "## The README's test command on a fresh Debian 12 root"
        echo
        echo "- ci/setup.sh done (packages, vkexit built), ci/setup-tests.sh began: $(at '  *Finished `release`')"
        echo "- the workspace's test build done: $(last_at '  *Finished `release`')"
        echo "- the first test binary ran: $(at '  *Running (unittests|tests/)')"
        echo "- the stacks began (ci/stacks.sh): $(at '  stacks: ')"
        echo "- the whole command: $took s, exit $code; failing tests: $(grep -cE '  test .* \.\.\. FAILED' "$log" || true)"
        echo "- CPU time of the command (user, system): $(sed -n 's/^ *[0-9]* s  cpu: //p' "$log")"
        echo "- log: $log"
        echo "- $(nproc) cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >"$summary"
else
    {
        echo "## The README's first command on a fresh Debian 12 root"
        echo
        echo "- packages installed, build started: $(at '  (Compiling|Downloaded|Updating) ')"
        echo "- build done: $(at '  *Finished `release`')"
        echo "- first table: $(at '  (pass|expected-fail|unexpected-pass|fail|flaky|error|skipped) +[0-9]+ runs ')"
        echo "- the whole command: $took s, exit $code: $(grep -E '  [0-9]+ cells, ' "$log" | tail -n 1 | cut -c9-)"
        echo "- CPU time of the command (user, system): $(sed -n 's/^ *[0-9]* s  cpu: //p' "$log")"
        echo "- log: $log"
        echo "- $(nproc) cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    } >"$summary"
fi
cat "$summary"
[ "$code" -eq 0 ]
