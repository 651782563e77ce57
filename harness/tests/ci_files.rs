//! The CI files the project ships, run as a CI job would run them on lavapipe: the default
//! matrix against the lavapipe baseline with every report, the same in two shards merged, and
//! the expectations of the teardown fix held against a policy without it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use vkexit_testkit::vkexit::{self as kit, Sandbox};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn run(sb: &Sandbox, args: &[&str]) -> (i32, String) {
    let out = sb.vkexit().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap(), format!("{stdout}\n{stderr}"))
}

fn read(sb: &Sandbox, file: &str) -> Value {
    let text = std::fs::read_to_string(sb.path().join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// (case, runtime, driver, emulation, verdict) of every cell, sorted.
fn cells(results: &Value) -> Vec<[String; 5]> {
    let mut cells: Vec<[String; 5]> = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            ["case", "runtime", "driver", "emulation", "verdict"]
                .map(|k| c[k].as_str().unwrap_or_default().to_string())
        })
        .collect();
    cells.sort();
    cells
}

#[test]
fn the_default_matrix_is_green_on_lavapipe_whole_and_in_two_merged_shards() {
    let sb = Sandbox::new();
    let matrix = repo("ci/matrix/default.toml");
    let baseline = repo("ci/baselines/lavapipe.toml");
    let job = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--config",
            matrix.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
            "--driver",
            "lavapipe",
            "--runs",
            "1",
        ];
        args.extend_from_slice(extra);
        run(&sb, &args)
    };
    let (code, out) = job(&[
        "--junit",
        "j.xml",
        "--markdown",
        "s.md",
        "--html",
        "rep",
        "--json",
        "g.json",
    ]);
    assert_eq!(code, 0, "{out}");
    for report in ["j.xml", "s.md", "rep/index.html"] {
        assert!(sb.path().join(report).is_file(), "{report} missing");
    }
    let whole = read(&sb, "g.json");
    assert_eq!(
        cells(&whole).len(),
        4 * 5 * 2,
        "orderings × policies × emulations"
    );

    for (shard, file) in [("1/2", "s1.json"), ("2/2", "s2.json")] {
        let (code, out) = job(&["--shard", shard, "--json", file]);
        assert_eq!(code, 0, "shard {shard}: {out}");
    }
    let (code, out) = run(&sb, &["merge", "s1.json", "s2.json", "--json", "m.json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(cells(&read(&sb, "m.json")), cells(&whole));
}

#[test]
fn the_teardown_fix_expectations_pass_release_children_and_name_what_guarded_breaks() {
    let sb = Sandbox::new();
    let baseline = repo("ci/baselines/teardown-fixed.toml");
    let job = |runtime: &str| {
        run(
            &sb,
            &[
                "run",
                "--driver",
                "lavapipe",
                "--runs",
                "2",
                "--runtime",
                runtime,
                "--baseline",
                baseline.to_str().unwrap(),
                "--json",
                "r.json",
                "--junit",
                "j.xml",
            ],
        )
    };
    let (code, out) = job("refrt:release-children");
    assert_eq!(code, 0, "{out}");

    let (code, out) = job("refrt:guarded");
    assert_eq!(code, 1, "{out}");
    let results = read(&sb, "r.json");
    let failed: Vec<&Value> = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .collect();
    let mut cases: Vec<&str> = failed.iter().map(|c| c["case"].as_str().unwrap()).collect();
    cases.sort();
    assert_eq!(
        cases,
        [
            "buffer-kept-at-exit",
            "events-freed-after-teardown",
            "handler-before-load"
        ],
        "{out}"
    );
    let junit = std::fs::read_to_string(sb.path().join("j.xml")).unwrap();
    for cell in failed {
        assert!(cell["vuids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "VUID-vkDestroyDevice-device-00378"));
        let dir = cell["artifacts"][0].as_str().unwrap();
        assert!(Path::new(dir).join("validation.log").is_file(), "{dir}");
        assert!(out.contains(cell["case"].as_str().unwrap()));
        assert!(junit.contains(dir), "JUnit names the evidence {dir}");
    }
}

/// The templates name files of the bundle's `share/` (the repository's `ci/`) and flags of
/// vkexit; a renamed file or flag must break this test, not a team's pipeline. The templates
/// for a project's own suite name no file of vkexit's; every template installs or downloads
/// the version this is.
#[test]
fn the_ci_templates_name_files_and_flags_that_exist() {
    let sb = Sandbox::new();
    let path = regex::Regex::new(r"(?:share|ci)/((?:matrix|baselines)/[a-z0-9_-]+\.toml)").unwrap();
    let command =
        regex::Regex::new(r"vkexit (run|merge|bundle|explore|baseline update)\b(.*)").unwrap();
    let flag = regex::Regex::new(r"(?:^|\s)(--[a-z-]+)").unwrap();
    let version = regex::Regex::new(r#"(?m)^\s*VKEXIT_VERSION: "([^"]*)""#).unwrap();
    for (template, min_files) in [
        ("ci/templates/github-actions.yml", 3),
        ("ci/templates/gitlab-ci.yml", 3),
        ("ci/templates/suite-github-actions.yml", 0),
        ("ci/templates/suite-gitlab-ci.yml", 0),
    ] {
        let text = std::fs::read_to_string(repo(template)).unwrap();
        let files: Vec<&str> = path
            .captures_iter(&text)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        assert!(files.len() >= min_files, "{template}: {files:?}");
        for file in files {
            assert!(
                repo("ci").join(file).is_file(),
                "{template} names ci/{file}, which does not exist"
            );
        }
        let mut used = 0;
        let mut commands = std::collections::BTreeSet::new();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(c) = command.captures(line) else {
                continue;
            };
            // A command goes on over lines ending in `\` (shell) or starting with `--` (YAML folding).
            let mut args = c[2].to_string();
            let mut last = *line;
            for next in &lines[i + 1..] {
                if !(last.trim_end().ends_with('\\') || next.trim_start().starts_with("--")) {
                    break;
                }
                args.push(' ');
                args.push_str(next);
                last = next;
            }
            let help = sb
                .vkexit()
                .args(c[1].split(' '))
                .arg("--help")
                .output()
                .unwrap();
            let help = String::from_utf8_lossy(&help.stdout);
            for f in flag.captures_iter(&args) {
                assert!(
                    help.contains(&f[1]),
                    "{template}: `vkexit {}` has no flag {}",
                    &c[1],
                    &f[1]
                );
                used += 1;
            }
            commands.insert(c[1].to_string());
        }
        assert!(used >= 10, "{template}: only {used} flags found");
        if template.contains("suite-") {
            for needed in ["run", "explore"] {
                assert!(
                    commands.contains(needed),
                    "{template}: no `vkexit {needed}`"
                );
            }
        }
        // The release the template installs or downloads (ci/release.sh's files) is this one.
        let pinned: Vec<&str> = version
            .captures_iter(&text)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        assert_eq!(
            pinned,
            [env!("CARGO_PKG_VERSION")],
            "{template}: VKEXIT_VERSION is not this vkexit's version"
        );
    }
}

/// The results files of the two real machines (lavapipe here, the NVIDIA H200 through the
/// bundle) merge into the 80-cell matrix the README shows, judged green again.
#[test]
fn the_committed_lavapipe_and_nvidia_results_merge_into_one_green_matrix() {
    let sb = Sandbox::new();
    let lavapipe = repo("ci/results/lavapipe.json");
    let nvidia = repo("ci/results/nvidia-h200.json");
    let (code, out) = run(
        &sb,
        &[
            "merge",
            lavapipe.to_str().unwrap(),
            nvidia.to_str().unwrap(),
            "--json",
            "m.json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let merged = read(&sb, "m.json");
    let cells = cells(&merged);
    assert_eq!(cells.len(), 80, "{out}");
    let nvidia_crash = |case: &str, runtime: &str| {
        merged["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["case"] == case
                    && c["runtime"] == runtime
                    && c["driver"] == "nvidia"
                    && c["emulation"] == "none"
            })
            .map(|c| c["counts"]["crash"].as_u64().unwrap())
            .unwrap()
    };
    // Where the desktop NVIDIA driver differs from lavapipe without any emulation.
    assert_eq!(nvidia_crash("clean-exit", "refrt:static-destructor"), 20);
    assert_eq!(
        nvidia_crash("events-freed-after-teardown", "refrt:never"),
        20
    );
    assert_eq!(nvidia_crash("clean-exit", "refrt:release-children"), 0);
}

/// The real runtimes on the H200: the committed results judged again by `merge --baseline`
/// against the real-runtime baselines, whose allow-lists take out the old layer's false
/// positives about NVIDIA's newer extensions.
#[test]
fn the_nvidia_real_runtime_results_are_green_against_their_baselines_and_red_without() {
    let sb = Sandbox::new();
    for (results, baseline) in [
        ("nvidia-h200-ggml-halide.json", "real-runtimes.toml"),
        ("nvidia-h200-python-runtimes.json", "real-runtimes-ext.toml"),
        (
            "nvidia-h200-python-runtimes-tegra.json",
            "real-runtimes-ext.toml",
        ),
        (
            "nvidia-h200-python-runtimes-layer-1.4.309.json",
            "real-runtimes-ext.toml",
        ),
        (
            "nvidia-h200-python-runtimes-layer-1.4.309-tegra.json",
            "real-runtimes-ext.toml",
        ),
        // Last: the merged file is read below.
        ("nvidia-h200-ncnn-wgpu.json", "real-runtimes-ext.toml"),
    ] {
        let results = repo(&format!("ci/results/{results}"));
        let baseline = repo(&format!("ci/baselines/{baseline}"));
        let merge = |extra: &[&str]| {
            let mut args = vec!["merge", results.to_str().unwrap(), "--json", "m.json"];
            args.extend_from_slice(extra);
            run(&sb, &args)
        };
        let (code, out) = merge(&[]);
        assert_eq!(code, 1, "unknown failures without the baseline: {out}");
        let (code, out) = merge(&["--baseline", baseline.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}");
    }
    let merged = read(&sb, "m.json");
    let clean = merged["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == "ncnn-clean-exit" && c["emulation"] == "none")
        .unwrap();
    assert_eq!(clean["verdict"], "pass", "{clean:#}");
    assert_eq!(clean["counts"]["pass"], 10);
    assert!(
        kit::strings(&clean["allowed_vuids"])
            .contains(&"VUID-VkDeviceCreateInfo-pNext-pNext".to_string()),
        "{clean:#}"
    );
    assert_eq!(clean["vuids"].as_array().unwrap().len(), 0);
}
