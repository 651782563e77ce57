//! Every command the docs show works as written.
//!
//! The commands are the lines of the ```` ```sh ```` blocks of README.md and docs/*.md: a line
//! ending in `\` is joined to the next, `#` comments are dropped, and `a && b` is two commands.
//! Each one is either run here, for real (lavapipe, the real validation layer, a private
//! folder holding copies of `ci/matrix`, `ci/baselines` and `ci/results`, the built vkexit
//! first in `PATH`), or found in a list that names the test or CI script that runs it, or, for
//! the few that need a machine no test here has, says why. A command that is neither fails
//! with its file and line, and so does a list entry the docs no longer show. Every other
//! fenced block must say what it holds (`text`, `toml`, `json`), so no command hides in an
//! untagged one.
//!
//! The `vkexit …` commands written inline in the prose are checked against today's command
//! line (subcommands, flags, values, required flags), and the synopsis of docs/reference.md
//! against `vkexit SUB --help`, flag by flag.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vkexit_testkit::installed::Installed;
use vkexit_testkit::vkexit::*;

/// Commands run by the tests of this file: (command as the docs show it, the test that runs it).
const RUN_HERE: &[(&str, &str)] = &[
    (
        README_MAIN_JOB,
        "readme_the_main_job_gives_the_lavapipe_table",
    ),
    (README_OWN_PROGRAM, "readme_your_own_program_is_one_case"),
    (
        README_INSTALL,
        "readme_cargo_install_puts_a_whole_vkexit_on_path",
    ),
    (
        README_REGISTRY_INSTALL,
        "readme_cargo_install_from_the_registry_puts_a_whole_vkexit_on_path",
    ),
    (GUIDE_SHARD_1, "guide_two_shards_merge_into_one_report"),
    (GUIDE_SHARD_2, "guide_two_shards_merge_into_one_report"),
    (GUIDE_MERGE_SHARDS, "guide_two_shards_merge_into_one_report"),
    (GUIDE_BUNDLE, "guide_a_bundle_unpacks_anywhere_and_is_ready"),
    (GUIDE_UNPACK, "guide_a_bundle_unpacks_anywhere_and_is_ready"),
    (
        GUIDE_BUNDLE_DOCTOR,
        "guide_a_bundle_unpacks_anywhere_and_is_ready",
    ),
    (
        GUIDE_LAVAPIPE,
        "guide_lavapipe_and_the_committed_nvidia_results_merge_green",
    ),
    (
        GUIDE_MERGE_MACHINES,
        "guide_lavapipe_and_the_committed_nvidia_results_merge_green",
    ),
    (
        PYTHON_WGPU_LEAK,
        "python_runtimes_wgpu_py_leaves_its_instance_alive",
    ),
];

/// Commands another test or a CI script runs: (command, the file that runs it, what that file
/// holds to run it, how).
const RUN_ELSEWHERE: &[(&str, &str, &str, &str)] = &[
    (
        "vkexit explore --shard 1/2 --json explore-1.json",
        "harness/tests/explore.rs",
        "\"--shard\",",
        "each shard of part of the built-in cells, then their merge",
    ),
    (
        "vkexit explore --shard 2/2 --json explore-2.json",
        "harness/tests/explore.rs",
        "let shard = format!(\"{k}/2\");",
        "each shard of part of the built-in cells, then their merge",
    ),
    (
        "vkexit merge explore-1.json explore-2.json --json explore.json --html explore-html",
        "harness/tests/explore.rs",
        ".arg(\"merge\")",
        "the two shards merged, with --json, --html and --junit",
    ),
    (
        "ci/setup.sh",
        "ci/test.sh",
        "ci/setup.sh",
        "the first step of CI; it installs packages with apt-get, as root",
    ),

    (
        "ci/wheel.sh",
        "ci/setup-tests.sh",
        "ci/wheel.sh",
        "a step of ci/setup-tests.sh, for harness/tests/wheel.rs",
    ),
    (
        "pip install target/wheels/vkexit-*.whl",
        "harness/tests/wheel.rs",
        "\"--no-index\"",
        "into a virtual environment of the test's own, then `vkexit doctor` from it",
    ),
    (
        "sha256sum --check --ignore-missing SHA256SUMS",
        "harness/tests/release_files.rs",
        "[\"--check\", \"--ignore-missing\", \"--strict\", \"SHA256SUMS\"]",
        "the x86_64 single file of ci/release.sh's set, copied alone with SHA256SUMS into an empty directory",
    ),
    (
        "chmod +x vkexit-0.1.0-x86_64",
        "harness/tests/release_files.rs",
        "set_mode(&mut mode, 0o755)",
        "the downloaded single file made executable",
    ),
    (
        "./vkexit-0.1.0-x86_64 doctor",
        "harness/tests/release_files.rs",
        "installed.assert_ready()",
        "doctor must be ready with every helper; then a built-in case passes",
    ),
    (
        "ci/setup-python-runtimes.sh",
        "ci/setup-tests.sh",
        "setup-python-runtimes.sh",
        "a step of ci/setup-tests.sh",
    ),
    (
        "ci/setup-python-more.sh",
        "ci/setup-tests.sh",
        "setup-python-more.sh",
        "a step of ci/setup-tests.sh",
    ),
    (
        "vkexit run --config ci/matrix/real-runtimes.toml --baseline ci/baselines/real-runtimes-ext.toml",
        "harness/tests/ncnn_wgpu.rs",
        "real_runtimes::assert_green(",
        "its ncnn and wgpu cases, one run a cell; the Python runtimes' cases are python_runtimes.rs's",
    ),
    (
        "vkexit run --config ci/matrix/real-runtimes.toml --baseline ci/baselines/real-runtimes-ext.toml \
         --driver lavapipe --trace --runs 10 --case iree-clean-exit --case …",
        "harness/tests/python_runtimes.rs",
        "real_runtimes::assert_green(",
        "every iree-, taichi- and wgpu-py- case of the matrix, one run a cell",
    ),
    (
        "ci/stacks.sh",
        "ci/test.sh",
        "|| ci/stacks.sh",
        "the last step of CI, both stacks",
    ),
    (
        "ci/stacks.sh trixie",
        "ci/test.sh",
        "|| ci/stacks.sh",
        "CI runs trixie and sid; the argument picks one",
    ),
    (
        "ci/stacks.sh --wheel",
        "ci/test.sh",
        "|| ci/stacks.sh",
        "CI runs the wheel's check after the stacks; --wheel runs it alone",
    ),
    (
        "VKEXIT_STACK_RUNS=20 ci/stacks.sh",
        "ci/test.sh",
        "|| ci/stacks.sh",
        "CI runs it with the default 3 runs a cell",
    ),
    (
        "ci/setup.sh --cross",
        "ci/test.sh",
        "ci/setup.sh --cross",
        "a step of CI before the portable bundles; it installs packages with apt-get, as root",
    ),
    (
        "ci/bundles.sh",
        "ci/release.sh",
        "ci/bundles.sh \"${arches[@]}\"",
        "CI makes the release set (ci/release.sh, a step of ci/test.sh), which builds both portable bundles; \
         ci/cross-stacks.sh runs them",
    ),
    (
        "ci/cross-stacks.sh",
        "ci/test.sh",
        "ci/cross-stacks.sh",
        "the last step of CI: the portable bundles on Debian 11 and arm64 roots",
    ),
    (
        "suites/build.sh",
        "harness/tests/suites.rs",
        "suites/build.sh",
        "it builds the fixture suites once per test process",
    ),
    (
        "vkexit run --ctest target/suites/cmake --ctest-args \"-R teardown\" --runs 20",
        "harness/tests/suites.rs",
        "vkexit run --ctest target/suites/cmake --ctest-args \\\"-R teardown\\\" --runs 20",
        "ctest_teardown_tests_get_the_verdict_their_programs_deserve, 3 runs a test",
    ),
    (
        "vkexit run --gtest target/suites/cmake/teardown-gtest --runs 20",
        "harness/tests/suites.rs",
        "vkexit run --gtest target/suites/cmake/teardown-gtest --runs 20",
        "gtest_runs_each_test_alone_by_its_full_name, 2 runs a test",
    ),
    (
        "vkexit run --libtest target/suites/teardown-tests --runs 20",
        "harness/tests/suites.rs",
        "vkexit run --libtest target/suites/teardown-tests --runs 20",
        "libtest_runs_each_test_alone_by_its_exact_name, 2 runs a test",
    ),
    (
        "vkexit run --pytest suites/pytest --python /usr/bin/python3 --emulate tegra --runs 20",
        "harness/tests/suites.rs",
        "vkexit run --pytest suites/pytest --python /usr/bin/python3 --emulate tegra --runs 20",
        "pytest_runs_each_node_in_its_own_interpreter, 2 runs a test",
    ),
    (
        "vkexit run --config ci/matrix/suites.toml --baseline ci/baselines/suites.toml",
        "harness/tests/suites.rs",
        "vkexit run --config ci/matrix/suites.toml --baseline ci/baselines/suites.toml",
        "a_matrix_of_suites_is_judged_by_its_baseline_and_lists_each_suite_once, 1 run a cell",
    ),
    (
        "ci/meta-suite.sh",
        "harness/tests/meta_suite.rs",
        "ci/meta-suite.sh",
        "the script runs that file's ignored longer run; the gate runs the same suite at 20 runs a program",
    ),
    (
        "cmake -B build \"-DCMAKE_TEST_LAUNCHER=vkexit;exec;--\"",
        "harness/tests/exec.rs",
        "-DCMAKE_TEST_LAUNCHER=",
        "ctest_runs_each_test_through_the_launcher, with --driver lavapipe and a CMake from PyPI",
    ),
    (
        "cmake --build build",
        "harness/tests/exec.rs",
        "\"--build\"",
        "ctest_runs_each_test_through_the_launcher",
    ),
    (
        "ctest --test-dir build -j 8 --output-on-failure",
        "harness/tests/exec.rs",
        "\"--output-on-failure\"",
        "ctest_runs_each_test_through_the_launcher, in the build directory, one test at a time",
    ),
    (
        "meson setup build",
        "harness/tests/exec.rs",
        ".arg(\"setup\")",
        "meson_test_runs_each_test_through_the_wrapper",
    ),
    (
        "meson test -C build --wrapper \"vkexit exec --\"",
        "harness/tests/exec.rs",
        "\"--wrapper\"",
        "meson_test_runs_each_test_through_the_wrapper, in the build directory, with --driver lavapipe",
    ),
    (
        "vkexit exec -- python3 -m pytest tests/",
        "harness/tests/exec.rs",
        "[\"-m\", \"pytest\"",
        "pytest_runs_under_exec, one test file",
    ),
];

/// Commands no test here can run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "sudo apt-get install vulkan-validationlayers",
        "on the Jetson (Ubuntu's layer); ci/cross-stacks.sh runs the aarch64 bundle under qemu-user",
    ),
    (
        "tar xzf vkexit-0.1.0-aarch64.tar.gz",
        "on the Jetson; ci/cross-stacks.sh unpacks the same tarball into arm64 roots",
    ),
    (
        "cd vkexit-0.1.0-aarch64",
        "on the Jetson, into the unpacked bundle",
    ),
    (
        "./vkexit doctor",
        "on the Jetson; ci/cross-stacks.sh runs the bundle's doctor in each arm64 root",
    ),
    (
        "./vkexit run --driver nvidia --runs 20 --json jetson.json",
        "it needs a Jetson's Tegra driver; ci/cross-stacks.sh runs the built-in matrix on arm64 lavapipe",
    ),
    (
        "./vkexit run --driver nvidia --runs 20 -- ./build/tests/my_vulkan_test --gtest_filter=Compute.*",
        "it needs a Jetson and a program of the user's",
    ),
    (
        "ci/test.sh",
        "it is CI itself: formatting, clippy and every test, this one included",
    ),
    (
        "ci/fresh-machine.sh",
        "a whole build from nothing in a new Debian 12 root, 3 to 24 minutes on 2 cores: run by hand, timed in docs/stacks.md",
    ),
    (
        "ci/fresh-machine.sh --tests",
        "the README's test command in a new Debian 12 root: every check of the project from nothing, about an hour \
         on 2 cores: run by hand, timed in docs/stacks.md",
    ),
    (
        "./vkexit run --config share/matrix/default.toml --driver \
         /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json --runs 20 -j 14 --json nvidia-h200.json",
        "it needs the NVIDIA H200; its results are ci/results/nvidia-h200.json, which \
         guide_lavapipe_and_the_committed_nvidia_results_merge_green merges",
    ),
    (
        "vkexit run --config ci/matrix/real-runtimes.toml --baseline ci/baselines/real-runtimes-ext.toml \
         --driver /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json --trace --runs 10 -j 12 \
         --emulate none --case iree-clean-exit --case …",
        "it needs the NVIDIA H200; its results are ci/results/nvidia-h200-python-runtimes*.json, \
         which ci_files.rs judges again against the same baseline",
    ),
    (
        "vkexit run --driver /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json --no-validation --runs 20 \
         -- $PWD/scenarios/python/iree/daemon-thread-holds-device.py",
        "it needs the NVIDIA H200 (on lavapipe the case passes)",
    ),
    (
        "vkexit repro --driver /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json --max-runs 100 \
         -- $PWD/scenarios/python/iree/worker-releases-at-exit.py",
        "it needs the NVIDIA H200 (on lavapipe the case passes)",
    ),
    (
        "cmake -S ggml -B build -DGGML_VULKAN=ON -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF \
         -DGGML_NATIVE=OFF -DCMAKE_BUILD_TYPE=Release -DVulkan_INCLUDE_DIR=$PWD/trixie-vk/usr/include \
         -DCMAKE_PREFIX_PATH=$PWD/trixie-vk/usr",
        "it needs a checkout of ggml and Debian 13's Vulkan headers, outside the repository; \
         harness/tests/suites.rs runs --ctest on the repository's own CMake project",
    ),
    (
        "cmake --build build -j 2",
        "ggml's build: 20 to 40 minutes on 2 shared cores",
    ),
    (
        "GGML_VK_VISIBLE_DEVICES=0 vkexit run --ctest build --runs 2 --timeout 120 --json results.json \
         --markdown summary.md",
        "it needs ggml's build (above)",
    ),
    (
        "vkexit repro --driver lavapipe --max-runs 1000 -- $PWD/scenarios/python/taichi/version-check-at-exit.py",
        "a crash in 1 run of 160, each run about 12 s: hours of runs",
    ),
];

const README_MAIN_JOB: &str = "cargo run --release -- run";
const README_OWN_PROGRAM: &str = "vkexit run --runs 20 -- ./my-test --some-arg";
const README_INSTALL: &str = "cargo install --locked --path harness";
const README_REGISTRY_INSTALL: &str = "cargo install --locked vkexit";
const GUIDE_SHARD_1: &str = "vkexit run --shard 1/2 --json shard-1.json";
const GUIDE_SHARD_2: &str = "vkexit run --shard 2/2 --json shard-2.json";
const GUIDE_MERGE_SHARDS: &str =
    "vkexit merge shard-*.json --json all.json --junit junit.xml --markdown summary.md --html report";
const GUIDE_BUNDLE: &str =
    "vkexit bundle --with-vulkan --strip-debug --glibc-floor 2.36 -o vkexit-bundle.tar.gz";
const GUIDE_UNPACK: &str = "tar xzf vkexit-bundle.tar.gz";
const GUIDE_BUNDLE_DOCTOR: &str = "vkexit-0.1.0-x86_64/vkexit doctor";
const GUIDE_LAVAPIPE: &str = "vkexit run --config ci/matrix/default.toml --baseline \
     ci/baselines/lavapipe.toml --runs 20 --json lavapipe.json";
const GUIDE_MERGE_MACHINES: &str =
    "vkexit merge lavapipe.json nvidia-h200.json --json matrix.json --markdown matrix.md --html matrix";

const PYTHON_WGPU_LEAK: &str = "vkexit run --driver lavapipe --runs 10 --fail-on-leak -- \
     $PWD/scenarios/python/wgpu-py/clean-exit.py";

const VUID_00378: &str = "VUID-vkDestroyDevice-device-00378";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness is in the workspace")
        .to_path_buf()
}

/// README.md and docs/*.md, as paths relative to the repository.
fn doc_files() -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    files.sort();
    files.insert(0, "README.md".to_string());
    files
}

fn read_doc(file: &str) -> String {
    fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// One fenced block: where its opening fence is, what it says it holds, its lines (numbered).
struct Block {
    file: String,
    line: usize,
    ticks: usize,
    info: String,
    body: Vec<(usize, String)>,
}

/// The fenced blocks of a document, and the lines outside them (blanked inside).
fn blocks(file: &str, text: &str) -> (Vec<Block>, String) {
    let mut found = Vec::new();
    let mut prose = String::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        // A fence is three backticks or more at the start of a line; an opening one's info
        // string holds no backtick (else it is a code span), a closing one nothing else.
        let trimmed = line.trim();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        let info = &trimmed[ticks..];
        let fence = match &open {
            None => ticks >= 3 && !info.contains('`'),
            Some(block) => ticks >= block.ticks && info.is_empty(),
        };
        if fence {
            match open.take() {
                Some(block) => found.push(block),
                None => {
                    open = Some(Block {
                        file: file.to_string(),
                        line: n,
                        ticks,
                        info: info.trim().to_string(),
                        body: Vec::new(),
                    })
                }
            }
            prose.push('\n');
            continue;
        }
        match open.as_mut() {
            Some(block) => {
                block.body.push((n, line.to_string()));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    if let Some(block) = open {
        panic!("{file}:{}: a fenced block that is never closed", block.line);
    }
    (found, prose)
}

/// A line without its `#` comment: a `#` that starts a word, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// A command shown in the docs, and where.
#[derive(Debug, Clone)]
struct Shown {
    at: String,
    text: String,
}

fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The commands of one `sh` block.
fn commands_of(block: &Block) -> Vec<Shown> {
    let mut found = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, raw) in &block.body {
        let line = strip_comment(raw).trim();
        let (start, joined) = match pending.take() {
            Some((start, head)) => (start, format!("{head} {line}")),
            None => (*n, line.to_string()),
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, head.to_string()));
            continue;
        }
        for part in joined.split("&&") {
            let text = normalized(part);
            if !text.is_empty() {
                found.push(Shown {
                    at: format!("{}:{start}", block.file),
                    text,
                });
            }
        }
    }
    if let Some((start, head)) = pending {
        found.push(Shown {
            at: format!("{}:{start}", block.file),
            text: normalized(&head),
        });
    }
    found
}

/// Every command of every `sh` block of the docs.
fn shown_commands() -> Vec<Shown> {
    let mut all = Vec::new();
    for file in doc_files() {
        let (found, _) = blocks(&file, &read_doc(&file));
        for block in found.iter().filter(|b| b.info == "sh") {
            all.extend(commands_of(block));
        }
    }
    all
}

/// The command the docs show, looked up so that a test cannot run a command the docs dropped.
fn shown(command: &str) -> Shown {
    let command = normalized(command);
    shown_commands()
        .into_iter()
        .find(|s| s.text == command)
        .unwrap_or_else(|| {
            panic!("the docs no longer show `{command}`: update RUN_HERE and the test that runs it")
        })
}

/// The command with `from` replaced by `to`, to bound what it costs; `from` must be in it.
fn bounded(shown: &Shown, from: &str, to: &str) -> String {
    assert!(
        shown.text.contains(from),
        "{}: `{}` no longer holds `{from}`",
        shown.at,
        shown.text
    );
    shown.text.replace(from, to)
}

/// A private folder as a user's working copy has it: the CI files, the scenarios.
fn folder() -> Sandbox {
    let sb = Sandbox::new();
    for dir in ["ci/matrix", "ci/baselines", "ci/results"] {
        let to = sb.path().join(dir);
        fs::create_dir_all(&to).unwrap();
        for entry in fs::read_dir(repo().join(dir)).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    std::os::unix::fs::symlink(repo().join("scenarios"), sb.path().join("scenarios")).unwrap();
    sb
}

/// Runs a shell command line in the folder, with the built vkexit first in `PATH`.
fn sh(sb: &Sandbox, at: &str, command: &str) -> (i32, String) {
    let xdg = sb.path().join("xdg");
    fs::create_dir_all(&xdg).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out: Output = Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(sb.path())
        .env("PATH", path)
        .env("XDG_RUNTIME_DIR", xdg)
        // The table as a wide terminal shows it: every row with its whole evidence.
        .env("COLUMNS", "1000")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or_else(|| {
        panic!("{at}: `{command}` was killed: {:?}", out.status);
    });
    let all = format!(
        "{at}: `{command}` exited {code}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{at}: `{command}`: exit {code}");
    (code, all)
}

/// One row of the cell table `run` and `merge` print.
#[derive(Debug)]
struct Row {
    case: String,
    runtime: String,
    driver: String,
    emulate: String,
    runs: u64,
    pass: u64,
    crash: u64,
    vuid: u64,
    leak: u64,
    verdict: String,
    evidence: String,
}

fn rows(output: &str) -> Vec<Row> {
    let mut found = Vec::new();
    for line in output.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() < 13 {
            continue;
        }
        let numbers: Option<Vec<u64>> = words[4..12].iter().map(|w| w.parse().ok()).collect();
        let Some(n) = numbers else {
            continue;
        };
        found.push(Row {
            case: words[0].to_string(),
            runtime: words[1].to_string(),
            driver: words[2].to_string(),
            emulate: words[3].to_string(),
            runs: n[0],
            pass: n[1],
            crash: n[2],
            vuid: n[4],
            leak: n[7],
            verdict: words[12].to_string(),
            evidence: words[13..].join(" "),
        });
    }
    found
}

/// The ordering × policy table under `heading` in `file`: (case, policy, what the cell says).
fn doc_table(file: &str, heading: &str) -> Vec<(String, String, String)> {
    table(&read_doc(file), heading, file)
}

/// The ordering × policy table under the line that starts with `heading`.
fn table(text: &str, heading: &str, file: &str) -> Vec<(String, String, String)> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    let cols = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace(['`', '*'], ""))
            .collect()
    };
    let header = cols(
        lines
            .next()
            .unwrap_or_else(|| panic!("{file}: no table under {heading}")),
    );
    let mut cells = Vec::new();
    for line in lines.skip(1) {
        let row = cols(line);
        for (policy, claim) in header[1..].iter().zip(&row[1..]) {
            cells.push((row[0].clone(), policy.clone(), claim.clone()));
        }
    }
    assert_eq!(cells.len(), 20, "{file}: the table under {heading}");
    cells
}

/// Whether a row shows what a table cell says: every run passed, logged VUIDs, or crashed with
/// the signal named, and 00378 in its evidence exactly when the cell names it.
fn assert_claim(claim: &str, row: &Row, what: &str) {
    let all = match claim.split_whitespace().next().unwrap_or_default() {
        "pass" => row.pass == row.runs && row.verdict == "pass",
        "vuid" => row.vuid == row.runs && row.verdict == "expected-fail",
        signal @ "SIGSEGV" => {
            row.crash == row.runs && row.evidence.contains(signal) && row.verdict == "expected-fail"
        }
        other => panic!("{what}: a cell of the docs says `{other}`, which this test cannot read"),
    };
    assert!(all, "{what}: the docs say `{claim}`, the run gave {row:?}");
    assert_eq!(
        row.evidence.contains(VUID_00378),
        claim.contains("00378"),
        "{what}: the docs say `{claim}`, the run gave {row:?}"
    );
}

/// A table of the docs, taken with 20 runs a cell, is the table a summary printed with `runs`
/// ("5/5") a cell, cell by cell.
fn assert_same_table(
    doc: &[(String, String, String)],
    got: &[(String, String, String)],
    runs: &str,
    what: &str,
) {
    let want: Vec<(String, String, String)> = doc
        .iter()
        .map(|(case, policy, claim)| {
            let claim = claim.replace("20/20", runs).replace(" (leak unseen)", "");
            (case.clone(), policy.clone(), claim)
        })
        .collect();
    for (want, got) in want.iter().zip(got) {
        assert_eq!(want, got, "{what}");
    }
}

fn row<'a>(rows: &'a [Row], case: &str, policy: &str, driver: &str) -> &'a Row {
    let runtime = format!("refrt:{policy}");
    rows.iter()
        .find(|r| {
            r.case == case && r.runtime == runtime && r.driver == driver && r.emulate == "none"
        })
        .unwrap_or_else(|| panic!("no row for {case} × {runtime} on {driver}"))
}

#[test]
fn readme_the_main_job_gives_the_lavapipe_table() {
    let sb = folder();
    let s = shown(README_MAIN_JOB);
    // `cargo run --release --` builds vkexit and runs it; the test runs what it built.
    let (code, out) = sh(&sb, &s.at, &bounded(&s, "cargo run --release --", "vkexit"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("20 cells, 100 runs: 11 pass, 9 expected-fail"),
        "{out}"
    );
    // The README's table, taken with 20 runs a cell; the default is 5.
    let rows = rows(&out);
    for (case, policy, claim) in doc_table("README.md", "### lavapipe, `vkexit run --runs 20`") {
        let what = format!("README.md, {case} × {policy}");
        assert_claim(&claim, row(&rows, &case, &policy, "lavapipe"), &what);
    }
}

#[test]
fn readme_your_own_program_is_one_case() {
    let sb = folder();
    // A program that leaves a VkBuffer alive at vkDestroyDevice, as the README says of it.
    let program = sb.path().join("my-test");
    fs::write(
        &program,
        format!("#!/bin/sh\nexec '{}' --vuid\n", mock().display()),
    )
    .unwrap();
    let mut perms = fs::metadata(&program).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&program, perms).unwrap();

    let s = shown(README_OWN_PROGRAM);
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 1, "{out}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 1, "{out}");
    let r = &rows[0];
    assert_eq!(
        (r.case.as_str(), r.runtime.as_str(), r.verdict.as_str()),
        ("my-test", "external", "fail"),
        "{out}"
    );
    assert_eq!((r.runs, r.vuid), (20, 20), "{out}");
    assert!(r.evidence.contains(VUID_00378), "{out}");
}

/// The README's `cargo install` puts one whole vkexit on `PATH`: with nothing of the build in
/// its environment, from another directory, `doctor` is ready and a built-in case runs.
/// Installed into a root of the test's own, built in the tests' own target directory (what
/// changed since their build is built again; the helpers are not).
#[test]
fn readme_cargo_install_puts_a_whole_vkexit_on_path() {
    let sb = folder();
    let root = sb.path().join("root");
    let s = shown(README_INSTALL);
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{} --root {}", s.text, root.display()))
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: `{}`: {out:?}", s.at, s.text);
    assert_whole_vkexit_installed(&sb, &root);
}

/// The README's `cargo install` from the crate registry, as a user without a clone runs it:
/// ci/package.sh packages every crate of the workspace (each verified by a build from its
/// package alone), the packages and the registry's crates they lock become a directory source
/// that replaces crates.io in a `CARGO_HOME` of the test's own, and the command runs in an
/// empty directory, with no workspace anywhere near it. The installed vkexit carries helpers
/// built from the sources its package carries, and is as whole as one installed from a clone.
#[test]
fn readme_cargo_install_from_the_registry_puts_a_whole_vkexit_on_path() {
    let sb = folder();
    let target = target_dir();
    let out = Command::new(repo().join("ci/package.sh"))
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "ci/package.sh: {out:?}");
    let packages = crate_files(&target.join("package"));
    let members = workspace_members();
    for member in &members {
        assert!(
            packages
                .iter()
                .any(|p| p.ends_with(format!("{member}-0.1.0.crate"))),
            "ci/package.sh packaged no {member}: {packages:?}"
        );
    }
    let cargo_home = sb.path().join("cargo-home");
    let vendor = sb.path().join("registry");
    directory_source(&packages, &vendor);
    assert_carries_just_the_helpers(&vendor.join("vkexit-0.1.0").join("packaged"));
    fs::create_dir_all(&cargo_home).unwrap();
    fs::write(
        cargo_home.join("config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"packaged\"\n\n[source.packaged]\ndirectory = {:?}\n",
            vendor.display().to_string()
        ),
    )
    .unwrap();

    let s = shown(README_REGISTRY_INSTALL);
    let (root, empty) = (sb.path().join("root"), sb.path().join("empty"));
    fs::create_dir_all(&empty).unwrap();
    // Its own target directory, kept between runs for the registry's crates. A registry
    // package's build is fresh for cargo while its version stays, whatever its files now say:
    // the vkexit packages are built again every time.
    let build = target.join("registry-install");
    for fingerprint in ["release/.fingerprint", "release/build"] {
        let Ok(entries) = fs::read_dir(build.join(fingerprint)) else {
            continue;
        };
        for entry in entries.map(Result::unwrap) {
            if entry.file_name().to_string_lossy().starts_with("vkexit") {
                fs::remove_dir_all(entry.path()).unwrap();
            }
        }
    }
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{} --root {}", s.text, root.display()))
        .current_dir(&empty)
        .env("CARGO_HOME", &cargo_home)
        .env("CARGO_TARGET_DIR", &build)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("RUSTC_WRAPPER")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: `{}`: {out:?}", s.at, s.text);
    let said = String::from_utf8_lossy(&out.stderr);
    // From a path, cargo names it: `Installing vkexit v0.1.0 (/path/to/harness)`.
    assert!(
        said.lines().any(|l| l.trim() == "Installing vkexit v0.1.0"),
        "not from the registry: {said}"
    );
    assert_whole_vkexit_installed(&sb, &root);
}

/// The vkexit package's `packaged/` holds the parts of the helpers' crates that
/// harness/build.rs names (CRATES, CRATE_PARTS), each manifest as `Cargo.toml.in`, the
/// workspace's manifest and lock, and the results file's schema: nothing more, and nothing
/// twice.
fn assert_carries_just_the_helpers(packaged: &Path) {
    let build_rs = fs::read_to_string(repo().join("harness/build.rs")).unwrap();
    let relative = |file: &Path, base: &Path| {
        file.strip_prefix(base)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    let mut expected: Vec<String> = ["Cargo.toml.in", "Cargo.lock", "docs/results.schema.json"]
        .map(String::from)
        .to_vec();
    for krate in string_list(&build_rs, "CRATES") {
        for part in string_list(&build_rs, "CRATE_PARTS") {
            let path = repo().join(&krate).join(&part);
            if path.is_dir() {
                expected.extend(files_under(&path).iter().map(|f| relative(f, &repo())));
            } else if path.is_file() {
                let name = if part == "Cargo.toml" {
                    "Cargo.toml.in"
                } else {
                    &part
                };
                expected.push(format!("{krate}/{name}"));
            }
        }
    }
    expected.sort();
    let mut carried: Vec<String> = files_under(packaged)
        .iter()
        .map(|f| relative(f, packaged))
        .collect();
    carried.sort();
    let extra: Vec<_> = carried.iter().filter(|f| !expected.contains(f)).collect();
    let missing: Vec<_> = expected.iter().filter(|f| !carried.contains(f)).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{}: carried but not a helper's part: {extra:?}; a part not carried: {missing:?}",
        packaged.display()
    );
}

/// The strings of `const NAME: [&str; N] = [...];` in a Rust source, on one line or several.
fn string_list(source: &str, name: &str) -> Vec<String> {
    let head = format!("\nconst {name}:");
    let at = source.find(&head).unwrap_or_else(|| panic!("no {head:?}"));
    let body = &source[at + head.len()..];
    let body = &body[body.find("= [").expect("= [")..body.find("];").expect("];")];
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// The tests' own target directory (CARGO_TARGET_DIR or the workspace's `target`).
fn target_dir() -> PathBuf {
    vkexit_testkit::paths::build_dir()
        .parent()
        .expect("target/<profile>")
        .to_path_buf()
}

/// The names of the workspace's members, from `cargo metadata`.
fn workspace_members() -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {out:?}");
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

/// The `.crate` files in a folder.
fn crate_files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "crate"))
        .collect();
    found.sort();
    found
}

/// A directory source, as `cargo vendor` writes one: the registry's crates the workspace locks
/// (`cargo vendor`, from the registry cache), then each package unpacked beside them with its
/// `.cargo-checksum.json` (the `.crate` file's SHA-256, which the packages' lock files hold,
/// and each file's).
fn directory_source(packages: &[PathBuf], vendor: &Path) {
    let out = Command::new(env!("CARGO"))
        .args(["vendor", "--locked", "--offline", "--versioned-dirs"])
        .arg(vendor)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo vendor: {out:?}");
    for package in packages {
        let out = Command::new("tar")
            .arg("xzf")
            .arg(package)
            .arg("-C")
            .arg(vendor)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tar xzf {}: {out:?}",
            package.display()
        );
        let name = package.file_stem().unwrap().to_str().unwrap();
        let dir = vendor.join(name);
        let mut files = serde_json::Map::new();
        for file in files_under(&dir) {
            let relative = file
                .strip_prefix(&dir)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            files.insert(relative, sha256(&fs::read(&file).unwrap()).into());
        }
        let checksum = serde_json::json!({
            "files": files,
            "package": sha256(&fs::read(package).unwrap()),
        });
        fs::write(dir.join(".cargo-checksum.json"), checksum.to_string()).unwrap();
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap().map(Result::unwrap) {
        match entry.file_type().unwrap().is_dir() {
            true => found.extend(files_under(&entry.path())),
            false => found.push(entry.path()),
        }
    }
    found
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            use std::fmt::Write as _;
            write!(s, "{b:02x}").expect("a String grows");
            s
        })
}

/// `ROOT/bin` holds one file, vkexit, and with nothing of the build in its environment, from
/// another directory, `doctor` is ready with every helper and a built-in case passes.
fn assert_whole_vkexit_installed(sb: &Sandbox, root: &Path) {
    let installed: Vec<_> = fs::read_dir(root.join("bin")).unwrap().collect();
    assert_eq!(installed.len(), 1, "one file: {installed:?}");
    let installed = Installed::new(Path::new("vkexit"), Some(&root.join("bin")), sb.path());
    installed.assert_ready();
    installed.assert_built_in_case_passes("refrt:never", 1);
}

#[test]
fn guide_two_shards_merge_into_one_report() {
    let sb = folder();
    for (command, shard) in [(GUIDE_SHARD_1, "1/2"), (GUIDE_SHARD_2, "2/2")] {
        let s = shown(command);
        let (code, out) = sh(&sb, &s.at, &s.text);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("shard {shard}: ")), "{out}");
    }
    let s = shown(GUIDE_MERGE_SHARDS);
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("20 cells, 100 runs: 11 pass, 9 expected-fail"),
        "{out}"
    );
    let junit = fs::read_to_string(sb.path().join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 20, "{junit}");
    // The summary's matrix is the README's table, at 5 runs a cell where the README's took 20.
    let summary = fs::read_to_string(sb.path().join("summary.md")).unwrap();
    let merged = table(&summary, "### lavapipe, emulation none", "summary.md");
    let readme = doc_table("README.md", "### lavapipe, `vkexit run --runs 20`");
    assert_same_table(&readme, &merged, "5/5", "README.md");
    assert!(sb.path().join("report/index.html").is_file());
    let all: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(sb.path().join("all.json")).unwrap()).unwrap();
    assert_eq!(all["cells"].as_array().unwrap().len(), 20);
}

#[test]
fn guide_a_bundle_unpacks_anywhere_and_is_ready() {
    let sb = folder();
    let s = shown(GUIDE_BUNDLE);
    // `--with-vulkan` fetches Debian's loader and layer with `apt-get download`.
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sysroot/: vulkan-validationlayers"), "{out}");
    let s = shown(GUIDE_UNPACK);
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 0, "{out}");
    let s = shown(GUIDE_BUNDLE_DOCTOR);
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("status      ready"), "{out}");
    // The validation layer doctor found is the one the bundle carries.
    let carried = sb
        .path()
        .join("vkexit-0.1.0-x86_64/sysroot/usr/share/vulkan/explicit_layer.d");
    assert!(out.contains(carried.to_str().unwrap()), "{out}");
}

#[test]
fn guide_lavapipe_and_the_committed_nvidia_results_merge_green() {
    let sb = folder();
    let s = shown(GUIDE_LAVAPIPE);
    // The guide's figures were taken with 20 runs a cell.
    let (code, out) = sh(&sb, &s.at, &bounded(&s, "--runs 20", "--runs 2"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("40 cells, 80 runs: "), "{out}");
    // The H200's run of the command NOT_RUN lists, as committed.
    fs::copy(
        sb.path().join("ci/results/nvidia-h200.json"),
        sb.path().join("nvidia-h200.json"),
    )
    .unwrap();
    let s = shown(GUIDE_MERGE_MACHINES);
    let (code, out) = sh(&sb, &s.at, &s.text);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("80 cells, "), "{out}");
    assert!(out.contains(": 31 pass, 49 expected-fail"), "{out}");
    assert!(sb.path().join("matrix/index.html").is_file());
    // The merged summary's matrices are the tables of the guide and of docs/findings.md: NVIDIA's
    // as committed (20 runs a cell), lavapipe's at the 2 runs a cell the test took.
    let summary = fs::read_to_string(sb.path().join("matrix.md")).unwrap();
    let merged = |heading: &str| table(&summary, heading, "matrix.md");
    let lavapipe = merged("### lavapipe, emulation none");
    let nvidia = merged("### nvidia, emulation none");
    let guide = doc_table("docs/guide.md", "## One matrix from two machines");
    // A cell reads lavapipe · NVIDIA where they differ.
    let side = |n: usize| -> Vec<(String, String, String)> {
        guide
            .iter()
            .map(|(case, policy, claim)| {
                let parts: Vec<&str> = claim.split(" · ").collect();
                let part = parts.get(n).unwrap_or(&parts[0]);
                (case.clone(), policy.clone(), part.to_string())
            })
            .collect()
    };
    assert_same_table(&side(0), &lavapipe, "2/2", "docs/guide.md, lavapipe");
    assert_same_table(&side(1), &nvidia, "20/20", "docs/guide.md, NVIDIA");
    let findings = [
        (
            "### NVIDIA H200, driver 580",
            "### nvidia, emulation none",
            "20/20",
        ),
        (
            "### lavapipe with the Jetson's",
            "### nvidia, emulation tegra",
            "20/20",
        ),
        (
            "### lavapipe with the Jetson's",
            "### lavapipe, emulation tegra",
            "2/2",
        ),
    ];
    for (heading, section, runs) in findings {
        let doc = doc_table("docs/findings.md", heading);
        let what = format!("docs/findings.md {heading} against {section}");
        assert_same_table(&doc, &merged(section), runs, &what);
    }
}

/// The flags `vkexit PATH --help` lists: long name → (short name, whether it takes a value);
/// the required flags of its usage line; the subcommands it lists.
struct Help {
    flags: BTreeMap<String, (Option<String>, bool)>,
    required: Vec<String>,
    subcommands: Vec<String>,
}

fn help(path: &[&str]) -> Help {
    try_help(path).unwrap_or_else(|why| panic!("vkexit {path:?} --help: {why}"))
}

fn try_help(path: &[&str]) -> Result<Help, String> {
    let out = Sandbox::new()
        .vkexit()
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut flags = BTreeMap::new();
    let mut subcommands = Vec::new();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match section {
            "Commands:" if !words.is_empty() && words[0] != "help" => {
                subcommands.push(words[0].to_string())
            }
            "Options:" => {
                let (short, rest) = match words.first() {
                    Some(w) if w.len() == 3 && w.ends_with(',') => {
                        (Some(w.trim_end_matches(',').to_string()), &words[1..])
                    }
                    _ => (None, &words[..]),
                };
                if let Some(long) = rest.first().filter(|w| w.starts_with("--")) {
                    let takes_value = rest.get(1).is_some_and(|v| v.starts_with('<'));
                    flags.insert(long.to_string(), (short, takes_value));
                }
            }
            _ => {}
        }
    }
    let usage = text
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .unwrap_or_default();
    // Brackets hold what may be left out; a flag outside them is required.
    let mut depth = 0;
    let mut required = Vec::new();
    for word in usage.split_whitespace() {
        if depth == 0 && word.starts_with("--") {
            required.push(word.to_string());
        }
        depth += word.matches('[').count() as i32 - word.matches(']').count() as i32;
    }
    Ok(Help {
        flags,
        required,
        subcommands,
    })
}

/// The subcommand path a command line starts with (`baseline update`, `run`), and the rest.
fn subcommand<'a>(words: &'a [&'a str]) -> (Vec<&'a str>, &'a [&'a str]) {
    let is_name = |w: &&str| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    match words {
        [first, second, rest @ ..] if *first == "baseline" && is_name(second) => {
            (vec![*first, *second], rest)
        }
        [first, rest @ ..] if is_name(first) => (vec![*first], rest),
        _ => (Vec::new(), words),
    }
}

/// A word that stands for a value the reader picks: `FILE`, `RUN_DIR`, `K/N`.
fn placeholder(word: &str) -> bool {
    word.chars().filter(|c| c.is_ascii_uppercase()).count() >= 2
        && !word.chars().any(|c| c.is_ascii_lowercase())
}

#[test]
fn every_vkexit_command_in_the_prose_parses_with_todays_command_line() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        let (_, prose) = blocks(&file, &read_doc(&file));
        let mut rest = prose.as_str();
        let mut offset = 0;
        // Code spans: a run of backticks up to the next run of as many.
        while let Some(open) = rest.find('`') {
            let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
            let fence = "`".repeat(ticks);
            let body_start = open + ticks;
            let Some(len) = rest[body_start..].find(&fence) else {
                break;
            };
            let span = normalized(&rest[body_start..body_start + len]);
            let line = prose[..offset + open].matches('\n').count() + 1;
            offset += body_start + len + ticks;
            rest = &prose[offset..];
            let Some(command) = span.strip_prefix("vkexit ") else {
                continue;
            };
            // What a shell would hand vkexit: up to a redirection, a pipe or a comment.
            let words = shell_words(command);
            let words: Vec<&str> = words
                .iter()
                .map(String::as_str)
                .take_while(|w| !matches!(*w, ">" | "|" | "&&" | "#"))
                .collect();
            checked += 1;
            if let Err(why) = check_inline(&words) {
                failures.push(format!("{file}:{line}: `{span}`: {why}"));
            }
        }
    }
    assert!(checked > 30, "only {checked} inline vkexit commands found");
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The words a shell makes of a command: split at spaces, a double-quoted part kept whole
/// (`--ctest-args "-R teardown"`).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quoted, mut any) = (String::new(), false, false);
    for c in command.chars() {
        match c {
            '"' => (quoted, any) = (!quoted, true),
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// A whole command (`vkexit merge a.json --json m.json`) must parse and name every required
/// flag. A mention (`vkexit explain`, `vkexit merge --baseline`, `vkexit completions SHELL`)
/// must name a subcommand and flags that exist.
fn check_inline(words: &[&str]) -> Result<(), String> {
    // `vkexit --help`, or vkexit with a subcommand the reader picks (`vkexit SUB --help`).
    if words
        .first()
        .is_none_or(|w| *w == "--help" || *w == "…" || placeholder(w))
    {
        return Ok(());
    }
    let (path, args) = subcommand(words);
    if path.is_empty() {
        return Err("no subcommand".into());
    }
    let h = try_help(&path)?;
    let before_program = args.split(|w| *w == "--").next().unwrap_or_default();
    let takes_value = |w: &str| h.flags.get(w).is_some_and(|(_, value)| *value);
    // A flag's value may start with `-` itself (`--ctest-args "-R teardown"`).
    let values: Vec<bool> = std::iter::once(false)
        .chain(before_program.iter().map(|w| takes_value(w)))
        .collect();
    let flags = before_program
        .iter()
        .zip(&values)
        .filter(|(_, is_value)| !**is_value);
    for flag in flags.map(|(w, _)| w).filter(|w| w.starts_with('-')) {
        let known = h
            .flags
            .iter()
            .any(|(long, (short, _))| long == flag || short.as_deref() == Some(flag));
        if !known {
            return Err(format!("vkexit {} has no flag {flag}", path.join(" ")));
        }
    }
    let trailing_flag = before_program
        .last()
        .is_some_and(|w| h.flags.get(*w).is_some_and(|(_, value)| *value));
    let mention = args.is_empty() || trailing_flag || args.iter().any(|w| placeholder(w));
    if mention {
        return Ok(());
    }
    for flag in &h.required {
        if !args.contains(&flag.as_str()) {
            return Err(format!("vkexit {} needs {flag}", path.join(" ")));
        }
    }
    // vkexit parses every argument before `--help` and stops there: no run starts.
    let mut line: Vec<&str> = path.clone();
    line.extend(before_program);
    line.push("--help");
    let out = Sandbox::new().vkexit().args(&line).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[test]
fn the_reference_synopsis_names_every_subcommand_and_flag() {
    let (found, _) = blocks("docs/reference.md", &read_doc("docs/reference.md"));
    let synopsis = found
        .iter()
        .find(|b| {
            b.info == "text"
                && b.body
                    .first()
                    .is_some_and(|(_, l)| l.starts_with("vkexit run "))
        })
        .expect("docs/reference.md: a text block that starts with `vkexit run `");
    // Entries: a line that starts with `vkexit`, and the indented lines after it.
    let mut entries: Vec<(usize, String)> = Vec::new();
    for (n, line) in &synopsis.body {
        let text = strip_comment(line).trim();
        if line.starts_with("vkexit ") {
            entries.push((*n, text.to_string()));
        } else if let Some(last) = entries.last_mut() {
            last.1.push(' ');
            last.1.push_str(text);
        }
    }
    let flags_of = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| c.is_whitespace() || c == '[' || c == ']' || c == '|')
            .filter(|w| w.starts_with('-') && *w != "--")
            .map(|w| w.trim_end_matches("...").to_string())
            .collect()
    };
    let mut failures = Vec::new();
    let mut named = BTreeSet::new();
    let run_flags = entries
        .iter()
        .find(|(_, t)| t.starts_with("vkexit run "))
        .map(|(_, t)| flags_of(t))
        .unwrap_or_default();
    for (n, text) in &entries {
        let words: Vec<&str> = text.split_whitespace().skip(1).collect();
        let (path, _) = subcommand(&words);
        let at = format!("docs/reference.md:{n}");
        if path.is_empty() {
            failures.push(format!("{at}: `{text}` names no subcommand"));
            continue;
        }
        named.insert(path[0].to_string());
        let h = help(&path);
        let mut shown = flags_of(text);
        for flag in &shown {
            let known = h
                .flags
                .iter()
                .any(|(long, (short, _))| long == flag || short.as_deref() == Some(flag));
            if !known {
                failures.push(format!("{at}: vkexit {} has no {flag}", path.join(" ")));
            }
        }
        if text.contains("[selection flags of run]") {
            shown.extend(run_flags.iter().cloned());
        }
        for (long, (short, _)) in &h.flags {
            let listed = shown.contains(long) || short.as_ref().is_some_and(|s| shown.contains(s));
            if long != "--help" && long != "--version" && !listed {
                failures.push(format!("{at}: vkexit {} {long} is missing", path.join(" ")));
            }
        }
    }
    for sub in help(&[]).subcommands {
        if !named.contains(&sub) {
            failures.push(format!("docs/reference.md: no synopsis of vkexit {sub}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_command_shown_is_run_here_or_listed() {
    let mut failures = Vec::new();
    // Every fenced block says what it holds, so a command cannot hide in an untagged one.
    for file in doc_files() {
        let (found, _) = blocks(&file, &read_doc(&file));
        for b in &found {
            if !["sh", "text", "toml", "json"].contains(&b.info.as_str()) {
                failures.push(format!(
                    "{}:{}: a fenced block tagged `{}`: tag it sh (commands, which this test runs \
                     or lists), text (output), toml or json",
                    b.file, b.line, b.info
                ));
            }
        }
    }
    let commands = shown_commands();
    let here: Vec<String> = RUN_HERE.iter().map(|(c, _)| normalized(c)).collect();
    let elsewhere: Vec<String> = RUN_ELSEWHERE.iter().map(|e| normalized(e.0)).collect();
    let not_run: Vec<String> = NOT_RUN.iter().map(|(c, _)| normalized(c)).collect();
    for s in &commands {
        let lists = [&here, &elsewhere, &not_run]
            .iter()
            .filter(|list| list.contains(&s.text))
            .count();
        match lists {
            1 => {}
            0 => failures.push(format!(
                "{}: `{}` is neither run by tests/docs_commands.rs nor listed in its RUN_ELSEWHERE \
                 or NOT_RUN",
                s.at, s.text
            )),
            _ => failures.push(format!("{}: `{}` is listed twice", s.at, s.text)),
        }
    }
    for listed in here.iter().chain(&elsewhere).chain(&not_run) {
        if !commands.iter().any(|s| &s.text == listed) {
            failures.push(format!("`{listed}` is listed, but no doc shows it"));
        }
    }
    let source = include_str!("docs_commands.rs");
    for (command, test) in RUN_HERE {
        if !source.contains(&format!("\nfn {test}() {{")) {
            failures.push(format!("`{command}`: no test {test} runs it"));
        }
    }
    for (command, runner, holds, _) in RUN_ELSEWHERE {
        match fs::read_to_string(repo().join(runner)) {
            Ok(text) if text.contains(holds) => {}
            Ok(_) => failures.push(format!("`{command}`: {runner} no longer holds `{holds}`")),
            Err(e) => failures.push(format!("`{command}`: {runner}: {e}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn python_runtimes_wgpu_py_leaves_its_instance_alive() {
    // wgpu-py's wheels are what ci/setup-python-more.sh puts into the runtime cache; without
    // them python_runtimes.rs skips too, saying why.
    let cache = vkexit::support::env::Environment::get()
        .runtime_cache
        .clone()
        .map(|c| c.join("wgpu-py"));
    if !cache.as_ref().is_some_and(|c| c.is_dir()) {
        vkexit_testkit::skip!(
            "wgpu-py is not in the runtime cache ({cache:?}): ci/setup-python-more.sh"
        );
    }
    let sb = folder();
    let s = shown(PYTHON_WGPU_LEAK);
    // Each run takes seconds; the docs say so of this one ("2 runs here").
    let (code, out) = sh(&sb, &s.at, &bounded(&s, "--runs 10", "--runs 2"));
    assert_eq!(code, 1, "{out}");
    let rows = rows(&out);
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!((rows[0].runs, rows[0].leak), (2, 2), "{out}");
    assert_eq!(rows[0].verdict, "fail", "{out}");
    assert!(rows[0].evidence.contains("VkInstance"), "{out}");
}
