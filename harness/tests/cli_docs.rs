//! What vkexit generates from its own command line: shell completion
//! scripts and the man page. Each is checked by the tool that reads it, where
//! this machine has that tool (bash, groff), and names every subcommand.

use std::process::{Command, Stdio};
use vkexit_testkit::vkexit::*;

const SUBCOMMANDS: [&str; 11] = [
    "run",
    "list",
    "doctor",
    "merge",
    "repro",
    "baseline",
    "explain",
    "bundle",
    "bench",
    "schema",
    "completions",
];

fn generated(args: &[&str]) -> String {
    let out = Sandbox::new().vkexit().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_bash_completion_script_parses_and_completes_subcommands_and_flags() {
    let script = generated(&["completions", "bash"]);
    for name in SUBCOMMANDS {
        assert!(script.contains(name), "no {name} in the bash completion");
    }
    assert!(script.contains("--timeout") && script.contains("--baseline"));
    let sb = Sandbox::new();
    let path = sb.path().join("vkexit.bash");
    std::fs::write(&path, &script).unwrap();
    // Loaded into a real bash, completing `vkexit ru` offers `run`.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && COMP_WORDS=(vkexit ru) && COMP_CWORD=1 && COMP_LINE='vkexit ru' && COMP_POINT=9 \
             && _vkexit vkexit ru vkexit && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(offered.lines().collect::<Vec<_>>(), ["run"], "{out:?}");
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    let zsh = generated(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef vkexit"), "{zsh}");
    let fish = generated(&["completions", "fish"]);
    assert!(fish.contains("complete -c vkexit"), "{fish}");
    for name in SUBCOMMANDS {
        assert!(zsh.contains(name), "no {name} in the zsh completion");
        assert!(fish.contains(name), "no {name} in the fish completion");
    }
    let sb = Sandbox::new();
    sb.vkexit()
        .args(["completions", "tcsh"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bash"));
}

#[test]
fn the_man_page_renders_with_groff_and_lists_every_subcommand() {
    let page = generated(&["man"]);
    assert!(page.contains(".TH vkexit 1"), "{page}");
    let out = Command::new("groff")
        // Plain text, no overstriking, to read it back.
        .args(["-man", "-Tutf8", "-ww", "-P-cbou"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(page.as_bytes())?;
            child.wait_with_output()
        })
        .expect("groff is installed (Debian's groff-base)");
    let text = String::from_utf8_lossy(&out.stdout);
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && warnings.is_empty(), "{warnings}");
    assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{text}");
    for name in SUBCOMMANDS {
        assert!(
            text.contains(&format!("vkexit-{name}(1)")),
            "no {name} in the man page:\n{text}"
        );
    }
}
