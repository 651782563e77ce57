#!/usr/bin/env bash
# vkexit on other Vulkan stacks: Debian 13 (trixie) and Debian sid root filesystems made from
# Debian's own packages (loader, Mesa's lavapipe, the validation layer), each built once and
# cached, and the release bundle run inside each as a new user would run it:
#   - `vkexit doctor` must say ready;
#   - the built-in matrix against the built-in baseline (`vkexit run --runs N`) must be green;
#   - the meta-suite (ci/matrix/meta.toml judged by ci/baselines/meta.toml, every run checked
#     against what the program really did) must give no false pass and no false failure;
#   - where the root's glibc runs Debian sid's ggml (2.43: sid) and the runtime cache holds it
#     (ci/setup-runtimes.sh), ci/matrix/ggml-sid.toml on ggml 0.27 must be green against
#     ci/baselines/real-runtimes.toml.
# And the wheel on Debian 12: in a bookworm root that holds Debian's loader, lavapipe, the
# validation layer and python3-venv (no Rust, nothing of the build), the wheel ci/wheel.sh left in
# target/wheels is installed with pip into a new virtual environment, offline; from there
# `vkexit doctor` must say ready and the built-in matrix must be green against the built-in
# baseline.
#
#   ci/stacks.sh [--roots-only] [--wheel] [SUITE...]
#
# With no suite and no --wheel: trixie and sid, then the wheel; --wheel alone: the wheel alone.
# Without a wheel in target/wheels the wheel's check is SKIPPED, a failure when VKEXIT_TEST_SKIP=fail
# (as ci/test.sh runs it, after ci/setup-tests.sh built the wheel).
#
# Environment:
#   VKEXIT_STACK_CACHE   where the roots live (default ~/.cache/vkexit/stacks)
#   VKEXIT_STACK_RUNS    runs per cell of the built-in matrix (default 3)
#   VKEXIT_STACK_META    runs per meta-suite program (default 5)
#   VKEXIT_STACK_OUT     where each stack's results, run dirs and logs go (default target/stacks)
#   VKEXIT_STACK_GATE    0: report every stack's results but exit 0 (default 1: any failure fails)
#   VKEXIT_RUNTIME_CACHE the runtime cache (default ${XDG_CACHE_HOME:-~/.cache}/vkexit/runtimes),
#                        seen read-only inside the roots
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
runtimes="${VKEXIT_RUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkexit/runtimes}"
# The glibc that Debian sid's ggml 0.27 needs (its libraries' GLIBC_2.43 symbol versions).
ggml_debian_glibc=2.43
mirror="${VKEXIT_STACK_MIRROR:-http://deb.debian.org/debian}"
packages="libvulkan1,mesa-vulkan-drivers,vulkan-validationlayers,python3"
# The root the wheel is installed in: Debian 12 with what a Python user has, python3-venv.
wheel_suite=bookworm

roots_only=0
wheel=0
suites=()
for arg in "$@"; do
    case "$arg" in
        --roots-only) roots_only=1 ;;
        --wheel) wheel=1 ;;
        -*) echo "ci/stacks.sh: unknown flag $arg (expected --roots-only, --wheel or suite names)" >&2; exit 2 ;;
        *) suites+=("$arg") ;;
    esac
done
if [ ${#suites[@]} -eq 0 ] && [ "$wheel" -eq 0 ]; then
    suites=(trixie sid)
    wheel=1
fi

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

# What a root holds: Debian's Vulkan stack and Python; the wheels' (bookworm, and bookworm-arm64
# for the aarch64 wheel of ci/cross-stacks.sh) also python3-venv.
packages_of() {
    case "$1" in
        "$wheel_suite" | "$wheel_suite-arm64") echo "$packages,python3-venv" ;;
        *) echo "$packages" ;;
    esac
}

# One root per suite, rebuilt only when the package list changes. A root that was being built
# when the script stopped is thrown away, never reused half-made.
# A suite name may end in an architecture (`bullseye-arm64`): that root is debootstrapped for it
# and its programs run through qemu-user (binfmt_misc; ci/cross-stacks.sh registers it).
build_root() {
    local suite=${1%-arm64} root="$cache/$1" arch=() want
    want=$(packages_of "$1")
    [ "$1" = "$suite" ] || arch=(--arch=arm64)
    if [ -f "$root/.vkexit-stack" ] && [ "$(cat "$root/.vkexit-stack")" = "$want" ]; then
        return
    fi
    echo "stacks: building the $1 root in $root (debootstrap, about a minute)" >&2
    mkdir -p "$cache"
    rm -rf "$root" "$root.partial"
    debootstrap "${arch[@]}" --variant=minbase --include="$want" "$suite" "$root.partial" "$mirror" \
        >"$cache/$1.debootstrap.log" 2>&1 || {
        echo "stacks: debootstrap $1 failed; the end of $cache/$1.debootstrap.log:" >&2
        tail -n 20 "$cache/$1.debootstrap.log" >&2
        return 1
    }
    rm -rf "$root.partial/var/cache/apt/archives"/*.deb
    echo "$want" >"$root.partial/.vkexit-stack"
    mv "$root.partial" "$root"
}

for suite in "${suites[@]}"; do
    build_root "$suite"
done
[ "$wheel" -eq 0 ] || build_root "$wheel_suite"
[ "$roots_only" -eq 0 ] || exit 0

# Runs a command inside a root as root, with /proc, /dev and /sys, a private /tmp, and no
# variable of this environment (the host's Vulkan settings must not leak in), DIR at /out; the
# array `mounts` adds what the command needs of this machine. The cgroup file system stays
# writable, as on a machine of that distribution: vkexit gives each run a cgroup of its own
# there, which is how it ties a dead detached process to its run.
mounts=()
enter() {
    local root=$1 dir=$2
    shift 2
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 XDG_RUNTIME_DIR=/run/user/0 \
        bwrap --die-with-parent --bind "$root" / --proc /proc --dev /dev --ro-bind /sys /sys --bind /sys/fs/cgroup /sys/fs/cgroup \
        --tmpfs /tmp --tmpfs /run --perms 0700 --dir /run/user/0 --bind "$dir" /out "${mounts[@]}" \
        --chdir /out "$@"
}

# What each stack versions: the packages of its Vulkan stack.
versions_of() {
    chroot "$1" dpkg-query -W -f '${Package} ${Version}\n' \
        libc6 libvulkan1 mesa-vulkan-drivers vulkan-validationlayers | tr '\n' ',' | sed 's/,$//; s/,/, /g'
}

failed=()
mkdir -p "$out"
summary="$out/summary.md"
: >"$summary"

# Milliseconds since the epoch, for the wheel's figures.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
seconds_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f s", (b - a) / 1000 }'; }

# The wheel as a Python user on Debian 12 gets it: pip, a new virtual environment, then vkexit.
check_wheel() {
    local root="$cache/$wheel_suite" dir="$out/wheel" whl code start
    whl=$(ls -t "$repo"/target/wheels/vkexit-*_"$(uname -m)".whl 2>/dev/null | head -n 1)
    printf '## the wheel on Debian 12 (%s)\n\n' "$wheel_suite" >>"$summary"
    if [ -z "$whl" ]; then
        echo "- SKIPPED: no $(uname -m) wheel in target/wheels (ci/wheel.sh builds it)" >>"$summary"
        [ "${VKEXIT_TEST_SKIP:-}" != fail ] || failed+=("wheel: no wheel in target/wheels (ci/wheel.sh)")
        return
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    printf '%s; %s\n\n' "$(versions_of "$root")" "$(basename "$whl")" >>"$summary"
    echo "stacks: the wheel $(basename "$whl") on $wheel_suite" >&2
    local mounts=(--ro-bind "$(dirname "$whl")" /opt/wheels)
    local venv=(env PATH=/out/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin)
    start=$(now_ms)
    if ! enter "$root" "$dir" sh -c 'python3 -m venv /out/venv && /out/venv/bin/pip install -q --no-index "$0"' \
        "/opt/wheels/$(basename "$whl")" >"$dir/pip.txt" 2>&1; then
        failed+=("wheel: pip install failed ($dir/pip.txt)")
        echo "- pip install: FAILED (see $dir/pip.txt)" >>"$summary"
        return
    fi
    echo "- venv and pip install: $(seconds_since "$start")" >>"$summary"
    start=$(now_ms)
    if enter "$root" "$dir" "${venv[@]}" vkexit doctor >"$dir/doctor.txt" 2>&1; then
        echo "- doctor: ready, $(seconds_since "$start") (helpers: $(sed -n 's/^helpers *//p' "$dir/doctor.txt"))" >>"$summary"
    else
        failed+=("wheel: doctor is not ready")
        echo "- doctor: NOT ready (see $dir/doctor.txt)" >>"$summary"
        cat "$dir/doctor.txt" >&2
    fi
    code=0 start=$(now_ms)
    enter "$root" "$dir" "${venv[@]}" vkexit run --runs "$runs" -j 2 --json /out/builtin.json \
        --markdown /out/builtin.md --artifacts /out/artifacts >"$dir/builtin.txt" 2>&1 || code=$?
    echo "- built-in matrix, $runs runs a cell, $(seconds_since "$start"): $(tail -n 1 "$dir/builtin.txt")" >>"$summary"
    [ "$code" -eq 0 ] || failed+=("wheel: the built-in matrix is red (exit $code; $dir/builtin.txt)")
    printf '\n' >>"$summary"
}

finish() {
    cat "$summary"
    if [ ${#failed[@]} -gt 0 ]; then
        printf 'stacks: %s\n' "${failed[@]}" >&2
        echo "stacks: every stack's files are in $out" >&2
        [ "$gate" = 0 ] || exit 1
    fi
    exit 0
}

if [ ${#suites[@]} -eq 0 ]; then
    check_wheel
    finish
fi

# What a new user gets: the release bundle, unpacked; and the meta-suite's test program, which
# judges every run against what the program really did (it finds the repository and the built
# programs by this checkout's absolute path, so the checkout is mounted at the same path).
# The same cargo invocations as ci/setup.sh and ci/test.sh, so that after them nothing rebuilds.
cargo build --release --locked --workspace
# Where cargo put it (CARGO_TARGET_DIR may be outside the checkout): the meta-suite's checker and
# the programs it runs are read from there inside the roots too.
target_dir=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
# Built here, against this machine's glibc: the floor it is held to (ci/bundles.sh makes the
# portable ones, for glibc 2.31, and ci/cross-stacks.sh runs them).
"${CARGO_TARGET_DIR:-target}/release/vkexit" bundle --strip-debug --glibc-floor "$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)" \
    -o "$out/vkexit-bundle.tar.gz" >&2
rm -rf "$out/bundle" && mkdir -p "$out/bundle"
tar xzf "$out/vkexit-bundle.tar.gz" -C "$out/bundle"
vkexit=$(cd "$out/bundle" && echo vkexit-*/vkexit)
meta_test=$(cargo test --workspace --release --locked --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*/meta_suite-[^"]*"' | tail -n 1 | cut -d'"' -f4)
[ -x "$meta_test" ] || { echo "stacks: cannot find the meta_suite test program" >&2; exit 1; }

# The bundle, this checkout and the build at their own paths, and the runtime cache, read-only.
mounts=(--ro-bind "$out/bundle" /opt/vkexit --ro-bind "$repo" "$repo" --ro-bind "$target_dir" "$target_dir")
[ ! -d "$runtimes" ] || mounts+=(--ro-bind "$runtimes" /opt/vkexit-runtimes)
for suite in "${suites[@]}"; do
    root="$cache/$suite" dir="$out/$suite"
    rm -rf "$dir" && mkdir -p "$dir/explain"
    versions=$(versions_of "$root")
    echo "stacks: $suite ($versions)" >&2
    printf '## %s\n\n%s\n\n' "$suite" "$versions" >>"$summary"

    if enter "$root" "$dir" env VKEXIT_RUNTIME_CACHE=/opt/vkexit-runtimes "/opt/vkexit/$vkexit" doctor >"$dir/doctor.txt" 2>&1; then
        echo "- doctor: ready" >>"$summary"
    else
        failed+=("$suite: doctor is not ready")
        echo "- doctor: NOT ready (see $dir/doctor.txt)" >>"$summary"
        cat "$dir/doctor.txt" >&2
    fi

    code=0
    enter "$root" "$dir" "/opt/vkexit/$vkexit" run --runs "$runs" -j 2 --json /out/builtin.json \
        --markdown /out/builtin.md --artifacts /out/artifacts >"$dir/builtin.txt" 2>&1 || code=$?
    tail -n 1 "$dir/builtin.txt" | sed 's/^/- built-in matrix: /' >>"$summary"
    [ "$code" -eq 0 ] || failed+=("$suite: the built-in matrix is red (exit $code)")
    # One failing run of each cell, told as a story: where the pc lay, what ran last.
    for cell in "$dir"/artifacts/*/; do
        run=$(ls -d "$cell"run-* 2>/dev/null | head -n 1) || continue
        [ -n "$run" ] || continue
        enter "$root" "$dir" "/opt/vkexit/$vkexit" explain "/out/${run#"$dir"/}" \
            >"$dir/explain/$(basename "$cell").txt" 2>&1 || true
    done

    # ggml as sid's users get it (Debian's GGML_BACKEND_DL module), from the runtime cache's
    # unpacked copy (which carries the libgomp1 it needs), a few runs a cell. The 0.20 wheel
    # needs libgomp.so.1 from the system, which this minimal root lacks, so it is not run here.
    glibc=$(chroot "$root" dpkg-query -W -f '${Version}' libc6)
    if [ ! -f "$runtimes/ggml-debian/VERSION" ]; then
        echo "- ggml 0.27: not run, Debian's ggml is not in the runtime cache (ci/setup-runtimes.sh)" >>"$summary"
    elif dpkg --compare-versions "$glibc" lt "$ggml_debian_glibc"; then
        echo "- ggml 0.27: not run, it needs glibc $ggml_debian_glibc and this root has $glibc" >>"$summary"
    else
        code=0
        enter "$root" "$dir" env VKEXIT_RUNTIME_CACHE=/opt/vkexit-runtimes \
            "/opt/vkexit/$vkexit" run --config "/opt/vkexit/${vkexit%/vkexit}/share/matrix/ggml-sid.toml" \
            --baseline "/opt/vkexit/${vkexit%/vkexit}/share/baselines/real-runtimes.toml" \
            --runtime ggml:/opt/vkexit-runtimes/ggml-debian/usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so \
            -j 2 --json /out/ggml.json --markdown /out/ggml.md --artifacts /out/ggml-artifacts >"$dir/ggml.txt" 2>&1 || code=$?
        tail -n 2 "$dir/ggml.txt" | head -n 1 | sed 's/^/- ggml 0.27: /' >>"$summary"
        [ "$code" -eq 0 ] || failed+=("$suite: ggml 0.27 is red (exit $code; $dir/ggml.txt)")
    fi

    code=0
    enter "$root" "$dir" "$meta_test" --test-threads 1 >"$dir/meta-suite.txt" 2>&1 || code=$?
    grep -E '^test result' "$dir/meta-suite.txt" | sed 's/^/- meta-suite: /' >>"$summary" || true
    [ "$code" -eq 0 ] || failed+=("$suite: the meta-suite found false passes or false failures (exit $code)")
    printf '\n' >>"$summary"
done

[ "$wheel" -eq 0 ] || check_wheel
finish
