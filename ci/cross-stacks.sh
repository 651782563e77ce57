#!/usr/bin/env bash
# The portable bundles (ci/bundles.sh: glibc 2.31, x86_64 and aarch64) on the oldest stacks
# they are for, each a Debian root made by ci/stacks.sh from Debian's own packages:
#   bullseye         amd64, glibc 2.31, loader and validation layer 1.2.162, lavapipe 20.3.5
#   bookworm-arm64   arm64 through qemu-user, glibc 2.36, loader and layer 1.3.239
#   bullseye-arm64   arm64 through qemu-user, glibc 2.31, loader and layer 1.2.162
# In each, as a user would run the bundle there:
#   - `vkexit doctor` must say ready;
#   - the built-in matrix against the built-in baseline must be green, plain and with
#     `--emulate tegra` (whose layer, linked by zig, is the one the Jetson gets);
#   - the meta-suite: its checker (harness/tests/meta_suite.rs) runs here, on this machine,
#     with the vkexit it starts being the bundle's, entered into the root; it reads the results
#     and run directories the runs left and counts every false pass and false failure. The
#     mock it runs is not in the bundle: it comes from the build the bundle was made of (the
#     helpers' nested build in ci/bundles.sh's target directory, CARGO_TARGET_DIR or target).
# And the aarch64 wheel (`ci/wheel.sh aarch64`) on arm64 Debian 12 (bookworm-arm64, whose root
# also holds python3-venv): pip installs it offline into a new virtual environment in the root,
# and from there, as for the bundle, `vkexit doctor` must say ready and the built-in matrix
# must be green, plain and with `--emulate tegra`. Without an aarch64 wheel in target/wheels the
# check is SKIPPED, a failure when VKEXIT_TEST_SKIP=fail.
#
#   ci/cross-stacks.sh [--wheel] [STACK...]   # default: bullseye bookworm-arm64 bullseye-arm64,
#                                             # then the wheel; --wheel alone: the wheel alone
#
# Environment: VKEXIT_STACK_CACHE, VKEXIT_STACK_OUT, VKEXIT_STACK_GATE as for ci/stacks.sh;
#   VKEXIT_CROSS_RUNS   runs per cell of the built-in matrix (default 3; 2 under qemu)
#   VKEXIT_CROSS_META   0: leave the meta-suite out (default 1)
#   VKEXIT_CROSS_NCNN_RUNS  runs per cell of ncnn on arm64 (default 2)
#   VKEXIT_BUNDLE_OUT   where ci/bundles.sh left the tarballs (default target/bundles)
# An arm64 stack needs qemu-user-static registered with binfmt_misc (flag F, so that it works
# inside the root); as root this registers it when the kernel allows, else the stack is SKIPPED
# with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

cache="${VKEXIT_STACK_CACHE:-$HOME/.cache/vkexit/stacks}"
out="${VKEXIT_STACK_OUT:-$repo/target/stacks}"
gate="${VKEXIT_STACK_GATE:-1}"
bundles="${VKEXIT_BUNDLE_OUT:-$repo/target/bundles}"
target="${CARGO_TARGET_DIR:-$repo/target}"
meta="${VKEXIT_CROSS_META:-1}"
wheel_stack=bookworm-arm64
wheel=0
stacks=()
for arg in "$@"; do
    case "$arg" in
        --wheel) wheel=1 ;;
        -*) echo "ci/cross-stacks.sh: unknown flag $arg (expected --wheel or stack names)" >&2; exit 2 ;;
        *) stacks+=("$arg") ;;
    esac
done
if [ ${#stacks[@]} -eq 0 ] && [ "$wheel" -eq 0 ]; then
    stacks=(bullseye bookworm-arm64 bullseye-arm64)
    wheel=1
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ci/cross-stacks.sh: needs root (debootstrap builds the roots, bwrap enters them)" >&2
    exit 2
fi

# qemu-aarch64 for arm64 programs, here and inside the roots; the reason when it cannot be.
arm64_unavailable() {
    [ "$(uname -m)" = aarch64 ] && return 1
    command -v update-binfmts >/dev/null && [ -e /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] ||
        { echo "qemu-user-static and binfmt-support are not installed (ci/setup.sh --cross)"; return 0; }
    [ -e /proc/sys/fs/binfmt_misc/status ] ||
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null ||
        { echo "binfmt_misc cannot be mounted here (a container without it)"; return 0; }
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 ||
        { echo "update-binfmts --enable qemu-aarch64 failed"; return 0; }
    grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
        { echo "qemu-aarch64 is registered without the F flag: it cannot run inside a root"; return 0; }
    return 1
}

# Runs a command inside a root as root, as ci/stacks.sh does, with /tmp shared (the
# meta-suite's sandboxes are there, read from here), this checkout and the bundle at their
# own paths.
enter() {
    local root=$1 dir=$2
    shift 2
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/run/user/0}" \
        bwrap --die-with-parent --bind "$root" / --proc /proc --dev /dev --ro-bind /sys /sys --bind /sys/fs/cgroup /sys/fs/cgroup \
        --bind /tmp /tmp --tmpfs /run --perms 0700 --dir /run/user/0 \
        --ro-bind "$repo" "$repo" --bind "$dir" "$dir" --chdir "$dir" "$@"
}

failed=()
summary="$out/cross-summary.md"
mkdir -p "$out"
: >"$summary"
for stack in "${stacks[@]}"; do
    case "$stack" in
        *-arm64) arch=aarch64 runs="${VKEXIT_CROSS_RUNS:-2}" ;;
        *) arch=x86_64 runs="${VKEXIT_CROSS_RUNS:-3}" ;;
    esac
    if [ "$arch" = aarch64 ] && why=$(arm64_unavailable); then
        echo "cross-stacks: $stack SKIPPED: $why" >&2
        printf '## %s\n\nSKIPPED: %s\n\n' "$stack" "$why" >>"$summary"
        continue
    fi
    tarball=$(ls "$bundles"/vkexit-*-"$arch".tar.gz 2>/dev/null | head -n 1)
    [ -f "$tarball" ] || { failed+=("$stack: no $arch bundle in $bundles (run ci/bundles.sh)"); continue; }
    ci/stacks.sh --roots-only "$stack"
    root="$cache/$stack" dir="$out/$stack"
    rm -rf "$dir" && mkdir -p "$dir/bundle" "$dir/xdg"
    tar xzf "$tarball" -C "$dir/bundle"
    vkexit=$(echo "$dir"/bundle/vkexit-*/vkexit)
    versions=$(chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' \
        libc6 libvulkan1 mesa-vulkan-drivers vulkan-validationlayers | tr '\n' ',' | sed 's/,$//; s/,/, /g')
    echo "cross-stacks: $stack ($versions)" >&2
    printf '## %s\n\n%s; %s\n\n' "$stack" "$versions" "$(basename "$tarball")" >>"$summary"
    export XDG_RUNTIME_DIR="$dir/xdg"

    if enter "$root" "$dir" "$vkexit" doctor >"$dir/doctor.txt" 2>&1; then
        echo "- doctor: ready" >>"$summary"
    else
        failed+=("$stack: doctor is not ready")
        echo "- doctor: NOT ready (see $dir/doctor.txt)" >>"$summary"
        cat "$dir/doctor.txt" >&2
    fi

    emulations=(plain tegra)
    # refrt runs on any Vulkan device (Debian 11's lavapipe, Mesa 20.3.5, is Vulkan 1.0: its events
    # use fences there); a stack with no lavapipe device at all has no built-in matrix to run.
    if ! grep -qE '^  lavapipe +device ' "$dir/doctor.txt"; then
        echo "- built-in matrix: SKIPPED: lavapipe shows no device" >>"$summary"
        emulations=()
    fi
    for how in "${emulations[@]}"; do
        flags=() name=builtin
        [ "$how" = plain ] || { flags=(--emulate "$how"); name="builtin-$how"; }
        code=0 start=$(date +%s)
        enter "$root" "$dir" "$vkexit" run --runs "$runs" -j 2 "${flags[@]}" --json "$dir/$name.json" \
            --markdown "$dir/$name.md" --artifacts "$dir/artifacts-$how" >"$dir/$name.txt" 2>&1 || code=$?
        took=$(($(date +%s) - start))
        echo "- built-in matrix ${flags[*]:-plain}, $runs runs a cell, ${took} s: $(tail -n 1 "$dir/$name.txt")" >>"$summary"
        [ "$code" -eq 0 ] || failed+=("$stack: the built-in matrix ${flags[*]:-plain} is red (exit $code)")
    done

    # A real runtime on arm64: ncnn's aarch64 wheel from PyPI (VKEXIT_NCNN_ARCH=aarch64
    # ci/setup-python-runtimes.sh) for the root's Python, its scripts of scenarios/ncnn through the
    # ncnn cases of ci/matrix/real-runtimes.toml, judged by ci/baselines/real-runtimes-ext.toml.
    if [ "$arch" = aarch64 ] && [ "${emulations[*]}" ]; then
        py=$(chroot "$root" python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
        wheel="$repo/target/real-runtimes/ncnn-aarch64/$py"
        if [ ! -d "$wheel/ncnn" ]; then
            echo "- ncnn: SKIPPED: no aarch64 wheel for $py (VKEXIT_NCNN_ARCH=aarch64 ci/setup-python-runtimes.sh)" >>"$summary"
        else
            cases=()
            for c in clean-exit exit-without-destroy buffer-kept-at-exit handler-before-load \
                allocator-freed-after-teardown pool-allocator-reclaimed; do
                cases+=(--case "ncnn-$c")
            done
            code=0 start=$(date +%s)
            # The matrix names the scripts from the checkout's root: runs start there.
            # llvmpipe of Debian 12 arm64 aborts compiling ncnn's fp16 shaders under qemu-user's
            # CPU (docs/findings.md): fp32 shaders, so that each script reaches its exit path.
            enter "$root" "$dir" sh -c 'cd "$0" && exec "$@"' "$repo" env VKEXIT_NCNN_DIR="$wheel" VKEXIT_NCNN_FP16=0 \
                "$vkexit" run --config ci/matrix/real-runtimes.toml --baseline ci/baselines/real-runtimes-ext.toml \
                "${cases[@]}" --runs "${VKEXIT_CROSS_NCNN_RUNS:-2}" -j 2 --json "$dir/ncnn.json" \
                --markdown "$dir/ncnn.md" --artifacts "$dir/artifacts-ncnn" >"$dir/ncnn.txt" 2>&1 || code=$?
            took=$(($(date +%s) - start))
            echo "- ncnn $(cat "$wheel/VERSION") ($py), plain and --emulate tegra, ${VKEXIT_CROSS_NCNN_RUNS:-2} runs a cell, ${took} s: $(grep -E '^[0-9]+ cells?, ' "$dir/ncnn.txt" | tail -n 1)" >>"$summary"
            loader=$(sed -n 's/^loader *Vulkan loader \([0-9.]*\).*/\1/p' "$dir/doctor.txt")
            if dpkg --compare-versions "${loader:-0}" lt 1.3.234; then
                # A loader without VK_LOADER_DRIVERS_SELECT: vkexit selects the driver with the
                # variables ncnn reads itself, ncnn opens the driver, no layer loads
                # (docs/findings.md). Every run must say so as an `error`, never be judged.
                bypass=$(python3 -c 'import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
print(all(c["verdict"] == "error" and "itself, not through the Vulkan loader" in c["reason"] for c in cells) and len(cells))' "$dir/ncnn.json" 2>/dev/null || echo False)
                echo "  - loader $loader: every ncnn run an error, ncnn opening the driver itself: $bypass" >>"$summary"
                [ "$bypass" = 12 ] || failed+=("$stack: ncnn under loader $loader is not an error in every cell ($dir/ncnn.txt)")
            else
                [ "$code" -eq 0 ] || failed+=("$stack: ncnn is red (exit $code; $dir/ncnn.txt)")
            fi
        fi
    fi

    [ "$meta" = 1 ] || continue
    # The checker runs here; the vkexit it starts (CARGO_BIN_EXE_vkexit, read by the test kit) is
    # the bundle's, in the root. Beside it, what the checker looks for there: the mock, the
    # scenarios and refrt of this architecture, as ci/bundles.sh's build of the bundle's vkexit
    # built them (harness/build.rs's nested build; the bundle's vkexit carries the same).
    case "$arch" in
        x86_64) built="$target/$arch-unknown-linux-gnu" ;;
        aarch64) built="$target/debian-rust/$arch-unknown-linux-gnu" ;;
    esac
    built="$built/vkexit-helpers/$arch-unknown-linux-gnu/release"
    shim="$dir/shim"
    mkdir -p "$shim"
    cp "$built/mock" "$built/clean-exit" "$built/libvkexit_refrt.so" "$shim/" || {
        failed+=("$stack: no $arch mock beside the bundle's build in $built (run ci/bundles.sh)")
        continue
    }
    cat >"$shim/vkexit" <<EOF
#!/bin/sh
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    XDG_RUNTIME_DIR="\${XDG_RUNTIME_DIR:-/tmp}" \
    bwrap --die-with-parent --bind "$root" / --proc /proc --dev /dev --ro-bind /sys /sys --bind /sys/fs/cgroup /sys/fs/cgroup \
    --bind /tmp /tmp --tmpfs /run --ro-bind "$repo" "$repo" --bind "$dir" "$dir" \
    --chdir "\$PWD" "$vkexit" "\$@"
EOF
    chmod +x "$shim/vkexit"
    meta_test=$(cargo test --release --locked -p vkexit --test meta_suite --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/meta_suite-[^"]*"' | tail -n 1 | cut -d'"' -f4)
    [ -x "$meta_test" ] || { failed+=("$stack: cannot build the meta_suite checker"); continue; }
    # Under qemu every run costs many times more: a few runs of each program (the longer run's
    # table with META_RUNS); natively the CI batch of ci/stacks.sh.
    # The matrix's 5 s limit is sized for the hanging programs natively; under qemu a program
    # that starts a second instance needs more (META_TIMEOUT).
    if [ "$arch" = aarch64 ] && [ "$(uname -m)" != aarch64 ]; then
        selection=(--ignored --exact the_longer_run)
        export META_TIMEOUT="${VKEXIT_CROSS_META_TIMEOUT:-30}"
        # qemu-user (7.2) answers prctl(PR_SET_CHILD_SUBREAPER) with EINVAL: a detached process
        # re-parents to init, and vkexit cannot see how it died (on arm64 hardware it can).
        export META_UNJUDGEABLE=daemon-segv-with-closed-fds
        export META_UNJUDGEABLE_WHY="qemu-user refuses prctl(PR_SET_CHILD_SUBREAPER), so no death of a detached process can be seen"
    else
        selection=()
        unset META_TIMEOUT META_UNJUDGEABLE META_UNJUDGEABLE_WHY
    fi
    code=0 start=$(date +%s)
    CARGO_BIN_EXE_vkexit="$shim/vkexit" META_RUNS="${VKEXIT_CROSS_META_RUNS:-3}" META_TABLE="$dir/meta-table.md" \
        "$meta_test" --test-threads 1 "${selection[@]}" >"$dir/meta-suite.txt" 2>&1 || code=$?
    took=$(($(date +%s) - start))
    grep -E '^test result' "$dir/meta-suite.txt" | sed "s/^/- meta-suite (${took} s): /" >>"$summary" || true
    [ "$code" -eq 0 ] || failed+=("$stack: the meta-suite found false passes or false failures (exit $code)")
    printf '\n' >>"$summary"
done

# The aarch64 wheel as a Python user on arm64 Debian 12 gets it: a new virtual environment, pip
# install from the file alone, then the vkexit it put on that environment's PATH.
check_wheel() {
    local root="$cache/$wheel_stack" dir="$out/wheel-aarch64" whl code start how flags name
    local runs="${VKEXIT_CROSS_RUNS:-2}"
    printf '## the aarch64 wheel on %s\n\n' "$wheel_stack" >>"$summary"
    if why=$(arm64_unavailable); then
        echo "- SKIPPED: $why" >>"$summary"
        return
    fi
    whl=$(ls -t "$repo"/target/wheels/vkexit-*_aarch64.whl 2>/dev/null | head -n 1)
    if [ -z "$whl" ]; then
        echo "- SKIPPED: no aarch64 wheel in target/wheels (ci/wheel.sh aarch64 builds it)" >>"$summary"
        [ "${VKEXIT_TEST_SKIP:-}" != fail ] || failed+=("wheel: no aarch64 wheel in target/wheels (ci/wheel.sh aarch64)")
        return
    fi
    ci/stacks.sh --roots-only "$wheel_stack"
    rm -rf "$dir" && mkdir -p "$dir/xdg"
    export XDG_RUNTIME_DIR="$dir/xdg"
    echo "cross-stacks: the wheel $(basename "$whl") on $wheel_stack" >&2
    printf '%s\n\n' "$(basename "$whl")" >>"$summary"
    local venv=(env PATH="$dir/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    start=$(date +%s)
    if ! enter "$root" "$dir" sh -c 'python3 -m venv "$0/venv" && "$0/venv/bin/pip" install -q --no-index "$1"' \
        "$dir" "$whl" >"$dir/pip.txt" 2>&1; then
        failed+=("wheel: pip install of the aarch64 wheel failed ($dir/pip.txt)")
        echo "- pip install: FAILED (see $dir/pip.txt)" >>"$summary"
        return
    fi
    echo "- venv and pip install: $(($(date +%s) - start)) s" >>"$summary"
    if enter "$root" "$dir" "${venv[@]}" vkexit doctor >"$dir/doctor.txt" 2>&1; then
        echo "- doctor: ready (helpers: $(sed -n 's/^helpers *//p' "$dir/doctor.txt"))" >>"$summary"
    else
        failed+=("wheel: the aarch64 wheel's doctor is not ready")
        echo "- doctor: NOT ready (see $dir/doctor.txt)" >>"$summary"
        cat "$dir/doctor.txt" >&2
        return
    fi
    for how in plain tegra; do
        flags=() name=builtin
        [ "$how" = plain ] || { flags=(--emulate "$how"); name="builtin-$how"; }
        code=0 start=$(date +%s)
        enter "$root" "$dir" "${venv[@]}" vkexit run --runs "$runs" -j 2 "${flags[@]}" --json "$dir/$name.json" \
            --markdown "$dir/$name.md" --artifacts "$dir/artifacts-$how" >"$dir/$name.txt" 2>&1 || code=$?
        echo "- built-in matrix ${flags[*]:-plain}, $runs runs a cell, $(($(date +%s) - start)) s: $(tail -n 1 "$dir/$name.txt")" >>"$summary"
        [ "$code" -eq 0 ] || failed+=("wheel: the aarch64 wheel's built-in matrix ${flags[*]:-plain} is red (exit $code)")
    done
    printf '\n' >>"$summary"
}
[ "$wheel" -eq 0 ] || check_wheel

cat "$summary"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'cross-stacks: %s\n' "${failed[@]}" >&2
    echo "cross-stacks: every stack's files are in $out" >&2
    [ "$gate" = 0 ] || exit 1
fi
