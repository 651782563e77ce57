//! A gate that ran nothing is not green; reports go where they are asked to without
//! replacing what is there, and are never lost; an artifacts directory has one owner and
//! every cell an evidence directory of its own. Real runs on lavapipe, of the mock and of
//! small shell programs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use vkexit_testkit::vkexit::*;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("vkexit exits normally")
}

/// `vkexit run --driver lavapipe --runs 1 ARGS` in the sandbox.
fn run(sb: &Sandbox, args: &[&str]) -> Output {
    sb.vkexit()
        .args(["run", "--driver", "lavapipe", "--runs", "1"])
        .args(args)
        .output()
        .expect("vkexit starts")
}

/// Every `artifacts` path of a results file is there.
fn assert_evidence_exists(results: &serde_json::Value, from: &Path) {
    for cell in results["cells"].as_array().expect("cells") {
        for dir in strings(&cell["artifacts"]) {
            let dir = from.join(dir);
            assert!(
                dir.join("result.json").is_file(),
                "{} has no evidence: {cell:#}",
                dir.display()
            );
        }
    }
}

#[test]
fn a_gate_in_which_no_run_started_is_an_error_unless_allowed() {
    let sb = Sandbox::new();
    let mock = mock();
    // One cell: one of two shards holds it, the other nothing.
    let mut codes = Vec::new();
    for shard in ["1/2", "2/2"] {
        let json = sb.path().join(format!("r-{}.json", &shard[..1]));
        let out = run(
            &sb,
            &[
                "--shard",
                shard,
                "--json",
                json.to_str().unwrap(),
                "--",
                mock.to_str().unwrap(),
            ],
        );
        codes.push(code(&out));
        if code(&out) == 2 {
            let err = stderr(&out);
            assert!(
                err.contains(&format!(
                    "no run started: the selection has no cell in shard {shard}"
                )),
                "{err}"
            );
            // The results say what there was: nothing.
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            assert_eq!(r["cells"].as_array().unwrap().len(), 0, "{r:#}");
            let allowed = run(
                &sb,
                &[
                    "--shard",
                    shard,
                    "--allow-no-runs",
                    "--",
                    mock.to_str().unwrap(),
                ],
            );
            assert_eq!(code(&allowed), 0, "{}", stderr(&allowed));
        }
    }
    codes.sort();
    assert_eq!(codes, [0, 2]);

    // A driver the matrix names that shows no device here: every cell skipped.
    let matrix = sb.path().join("m.toml");
    std::fs::write(
        &matrix,
        "drivers = [\"radv\"]\ncases = [\"clean-exit\"]\nruntimes = [\"refrt:guarded\"]\n",
    )
    .unwrap();
    let skipped = |extra: &str| {
        if !extra.is_empty() {
            std::fs::write(
                &matrix,
                format!("{extra}\ndrivers = [\"radv\"]\ncases = [\"clean-exit\"]\nruntimes = [\"refrt:guarded\"]\n"),
            )
            .unwrap();
        }
        sb.vkexit()
            .args([
                "run", "--runs", "1", "--config", "m.toml", "--json", "s.json",
            ])
            .output()
            .unwrap()
    };
    let out = skipped("");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("s.json")).unwrap()).unwrap();
    if only_cell(&r)["verdict"] == "skipped" {
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("no run started: the one cell was left out: driver radv shows no device"),
            "{err}"
        );
        // A results file of skipped cells only merges into no gate either.
        let merged = sb
            .vkexit()
            .args(["merge", "s.json", "--json", "m.json"])
            .output()
            .unwrap();
        assert_eq!(code(&merged), 2, "{}", stderr(&merged));
        assert!(
            stderr(&merged).contains("no run started"),
            "{}",
            stderr(&merged)
        );
        let merged = sb
            .vkexit()
            .args(["merge", "s.json", "--json", "m.json", "--allow-no-runs"])
            .output()
            .unwrap();
        assert_eq!(code(&merged), 0, "{}", stderr(&merged));
        // The matrix says so itself.
        let out = skipped("allow_no_runs = true");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
}

#[test]
fn reports_go_through_symlinks_and_into_fifos_and_devices() {
    let sb = Sandbox::new();
    let real = sb.path().join("real.json");
    std::fs::write(&real, "old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::symlink("real.json", sb.path().join("link.json")).unwrap();
    let fifo = sb.path().join("junit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = run(
        &sb,
        &[
            "--no-validation",
            "--json",
            "link.json",
            "--junit",
            fifo.to_str().unwrap(),
            // vkexit's stdout, a pipe here. (Not `/dev/stdout`: a vkexit that renamed over
            // it, as root, would replace the machine's.)
            "--markdown",
            "/dev/fd/1",
            "--",
            "true",
        ],
    );
    // Whatever happened, the reader is let go.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let junit = reader.join().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let link = std::fs::symlink_metadata(sb.path().join("link.json")).unwrap();
    assert!(link.file_type().is_symlink(), "the link was replaced");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(only_cell(&results)["verdict"], "no-vulkan");
    let mode = std::fs::metadata(&real).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640, "the target keeps its mode");
    assert!(junit.contains("<testsuites"), "{junit}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("## vkexit: gate green"), "{stdout}");
}

use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

#[test]
fn reports_that_would_replace_a_file_they_should_not_are_refused_before_any_run() {
    let sb = Sandbox::new();
    std::fs::write(sb.path().join("ro.json"), "keep").unwrap();
    std::fs::set_permissions(
        sb.path().join("ro.json"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    std::fs::write(sb.path().join("b.toml"), "").unwrap();
    std::fs::write(sb.path().join("m.toml"), "runs = 1\n").unwrap();
    std::os::unix::fs::symlink("b.toml", sb.path().join("b-link.toml")).unwrap();
    let refused: [(&[&str], &str); 5] = [
        (
            &["--json", "ro.json"],
            "ro.json: cannot write the results file: it is read-only (mode 444)",
        ),
        (
            &["--json", "x.json", "--junit", "./x.json"],
            "./x.json: --json and --junit name one file",
        ),
        (
            &["--baseline", "b.toml", "--markdown", "b-link.toml"],
            "b-link.toml: --markdown would overwrite --baseline b.toml",
        ),
        (
            &["--config", "m.toml", "--json", "m.toml"],
            "m.toml: --json would overwrite --config m.toml",
        ),
        (
            &["--json", "gone/r.json"],
            "gone/r.json: cannot write the results file: its directory",
        ),
    ];
    for (args, message) in refused {
        let mut all = args.to_vec();
        all.extend(["--", "true"]);
        let out = run(&sb, &all);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        // Refused before the run: nothing ran, nothing was written.
        assert!(!sb.path().join("vkexit-artifacts").exists(), "{args:?}");
    }
    assert_eq!(
        std::fs::read_to_string(sb.path().join("ro.json")).unwrap(),
        "keep"
    );
    assert_eq!(
        std::fs::read_to_string(sb.path().join("b.toml")).unwrap(),
        ""
    );

    // `baseline update` keeps a read-only baseline as it is.
    let (_, _) = sb.run(&["--runs", "1", "--no-validation", "--", "true"]);
    let update = |baseline: &str| {
        sb.vkexit()
            .args([
                "baseline",
                "update",
                "--results",
                "r.json",
                "--baseline",
                baseline,
            ])
            .output()
            .unwrap()
    };
    let out = update("ro.json");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("read-only"), "{}", stderr(&out));
    let meta = std::fs::metadata(sb.path().join("ro.json")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o444);
    assert_eq!(
        std::fs::read_to_string(sb.path().join("ro.json")).unwrap(),
        "keep"
    );
    let out = update("r.json");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--baseline would overwrite --results"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn results_whose_path_went_during_the_run_are_kept_in_the_artifacts_directory() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.path().join("out")).unwrap();
    // The run itself removes the directory the results were to go to.
    let out = run(
        &sb,
        &[
            "--no-validation",
            "--json",
            "out/r.json",
            "--",
            "sh",
            "-c",
            "rm -r out",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let kept = sb.path().join("vkexit-artifacts/results.json");
    assert!(
        stderr(&out).contains("cannot write the results file out/r.json")
            && stderr(&out).contains("kept it in vkexit-artifacts/results.json"),
        "{}",
        stderr(&out)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(kept).unwrap()).unwrap();
    assert_eq!(only_cell(&r)["verdict"], "no-vulkan");
}

#[test]
fn a_second_vkexit_on_the_same_artifacts_directory_is_refused_naming_the_first() {
    let sb = Sandbox::new();
    let vkexit = vkexit_program();
    // The run's program is a second vkexit given the first one's directory.
    let inner = format!(
        "{} run --runs 1 --no-validation --artifacts shared -- true 2>inner.err; echo $? >inner.code",
        vkexit.display()
    );
    let out = run(
        &sb,
        &[
            "--no-validation",
            "--artifacts",
            "shared",
            "--",
            "sh",
            "-c",
            &inner,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let inner_code = std::fs::read_to_string(sb.path().join("inner.code")).unwrap();
    assert_eq!(inner_code.trim(), "2");
    let err = std::fs::read_to_string(sb.path().join("inner.err")).unwrap();
    assert!(
        err.contains("shared: the artifacts directory is in use by vkexit pid ")
            && err.contains("--artifacts shared -- sh -c"),
        "{err}"
    );
    // `repro` takes the same lock: here held by flock(1), as another vkexit would hold it.
    std::fs::create_dir_all(sb.path().join("held")).unwrap();
    let repro = std::process::Command::new("flock")
        .arg(sb.path().join("held/.lock"))
        .arg(&vkexit)
        .args([
            "repro",
            "--no-validation",
            "--max-rate",
            "99%",
            "--artifacts",
            "held",
        ])
        .args(["--", "true"])
        .current_dir(sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    let repro_err = stderr(&repro);
    assert_eq!(code(&repro), 2, "{repro_err}");
    assert!(
        repro_err.contains("held: the artifacts directory is in use by another vkexit"),
        "{repro_err}"
    );
    // Once the first has ended, the directory is free.
    let out = run(
        &sb,
        &["--no-validation", "--artifacts", "shared", "--", "true"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn every_cell_keeps_its_evidence_where_the_results_say() {
    let sb = Sandbox::new();
    let long = "l".repeat(300);
    let matrix = format!(
        r#"
[[external]]
name = "a/b"
argv = ["sh", "-c", "echo I am a/b; exit 3"]

[[external]]
name = "a-b"
argv = ["sh", "-c", "echo I am a-b; exit 4"]

[[external]]
name = "{long}"
argv = ["sh", "-c", "echo I am long; exit 5"]
"#
    );
    std::fs::write(sb.path().join("m.toml"), matrix).unwrap();
    let (code, r) = sb.run(&["--runs", "2", "--no-validation", "--config", "m.toml"]);
    assert_eq!(code, 1, "{r:#}");
    assert_evidence_exists(&r, sb.path());
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    let mut dirs = std::collections::BTreeSet::new();
    for cell in cells {
        let name = match cell["case"].as_str().unwrap() {
            n if n.len() > 100 => "long",
            n => n,
        };
        assert_eq!(count(cell, "exit"), 2, "{cell:#}");
        for run in strings(&cell["artifacts"]) {
            let stdout = std::fs::read_to_string(sb.path().join(&run).join("stdout.txt")).unwrap();
            assert!(stdout.contains(&format!("I am {name}")), "{run}: {stdout}");
            let slug = Path::new(&run).parent().unwrap().file_name().unwrap();
            assert!(slug.len() <= 255, "{run}");
            dirs.insert(run);
        }
    }
    assert_eq!(dirs.len(), 6, "{dirs:?}");
}

#[test]
fn merge_refuses_a_cell_whose_verdict_its_counts_deny() {
    let sb = Sandbox::new();
    let mock = mock();
    let (code, _) = sb.run(&[
        "--runs",
        "2",
        "--",
        mock.to_str().unwrap(),
        "--exit-code",
        "3",
    ]);
    assert_eq!(code, 1);
    let text = std::fs::read_to_string(sb.results()).unwrap();
    assert!(text.contains("\"verdict\": \"fail\""), "{text}");
    std::fs::write(
        sb.path().join("forged.json"),
        text.replace("\"verdict\": \"fail\"", "\"verdict\": \"pass\""),
    )
    .unwrap();
    let out = sb
        .vkexit()
        .args(["merge", "forged.json", "--json", "m.json"])
        .output()
        .unwrap();
    assert_eq!(self::code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("forged.json: cell mock × external × lavapipe (validation, emulation none): its verdict `pass` contradicts its counts: 0 of 2 runs passed"),
        "{err}"
    );
    assert!(!sb.path().join("m.json").exists());
    // The file as vkexit wrote it merges.
    let out = sb
        .vkexit()
        .args(["merge", "r.json", "--json", "m.json"])
        .output()
        .unwrap();
    assert_eq!(self::code(&out), 1, "{}", stderr(&out));
}
