//! `replay.sh`, written beside `command.txt` in every kept run's directory: the run again,
//! by hand, as vkexit ran it. It goes to the run's working directory, makes exactly the
//! run's changes to the environment (the variables vkexit unset, the ones it set), gives the
//! validation layer the run's own settings and runs the command, so validation is active as
//! it was. Every path that pointed into the run's directory points into the replay's own
//! output directory instead: the replay writes a fresh validation log (each instance's in
//! `validation.d/`, all of them in `validation.log` once the command ends), crash report and
//! timeline there, and the kept evidence is never overwritten. It exits with the command's
//! status as the shell reports it (128 + N for a death by signal N).

use super::unix::CommandSpec;
use std::path::Path;

/// The script's file name in a kept run's directory.
pub(crate) const FILE: &str = "replay.sh";

/// The shell variable that holds the replay's output directory.
const OUT: &str = "\"$out\"";

/// Writes `replay.sh` into `dir`, the kept run's directory, for `spec` as it runs from
/// there; the run was made in `slot`, which its settings file still names.
pub(crate) fn write(dir: &Path, slot: &Path, spec: &CommandSpec) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let settings = std::fs::read_to_string(dir.join(vkexit_evidence::files::LAYER_SETTINGS))
        .ok()
        .map(|text| {
            let (slot, dir) = (slot.display(), dir.display());
            text.replace(&format!("{slot}/"), &format!("{dir}/"))
        });
    let path = dir.join(FILE);
    std::fs::write(&path, script(dir, spec, settings.as_deref()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
}

/// The script; `settings` is the run's validation settings file, when it had one.
fn script(dir: &Path, spec: &CommandSpec, settings: Option<&str>) -> String {
    let dir = dir.display().to_string();
    let word = |value: &str| rebased(value, &dir);
    let mut text = String::from(
        "#!/bin/sh\n\
         # The run kept in this directory, again, as vkexit ran it: the same working\n\
         # directory, the same changes to the environment, the same validation settings\n\
         # and command. What the run wrote into its own directory goes to OUT_DIR instead\n\
         # (default: a new replay.* directory here); the kept evidence stays as it is.\n\
         # usage: sh replay.sh [OUT_DIR]\n\
         set -eu\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd)\n\
         out=${1:-}\n\
         if [ -z \"$out\" ]; then out=$(mktemp -d \"$here/replay.XXXXXX\"); fi\n\
         mkdir -p \"$out\"\n\
         out=$(cd \"$out\" && pwd)\n\
         if [ \"$out\" = \"$here\" ]; then\n\
         \x20   echo \"replay.sh: OUT_DIR must not be the kept run's own directory\" >&2\n\
         \x20   exit 2\n\
         fi\n\
         mkdir -p -m 700 \"$out/home\" \"$out/xdg-runtime\"\n",
    );
    if let Some(settings) = settings {
        let file = format!("{dir}/{}", vkexit_evidence::files::LAYER_SETTINGS);
        text.push_str("printf '%s\\n'");
        for line in settings.lines() {
            text.push_str(" \\\n    ");
            text.push_str(&word(line));
        }
        text.push_str(&format!(" > {}\n", word(&file)));
    }
    for k in &spec.env_remove {
        text.push_str(&format!("unset {k}\n"));
    }
    for (k, v) in &spec.env_set {
        text.push_str(&format!("export {k}={}\n", word(v)));
    }
    text.push_str(&format!("cd {}\n", word(&spec.cwd.display().to_string())));
    text.push_str("set +e\n");
    text.push_str(&word(&spec.program.display().to_string()));
    for a in &spec.args {
        text.push(' ');
        text.push_str(&word(&a.to_string_lossy()));
    }
    // The preload gave each instance's log a file of its own, as in the run: one
    // validation.log of them all (by process, then by open), beside them.
    text.push_str(&format!(
        "\nstatus=$?\n\
         cat {OUT}/{logs}/*.log > {OUT}/{log_file} 2>/dev/null\n\
         exit $status\n",
        logs = vkexit_evidence::validation_logs::DIR,
        log_file = vkexit_evidence::files::VALIDATION_LOG
    ));
    text
}

/// `value` as one shell word, with every path into `dir` (the kept run's directory) moved
/// to the replay's output directory: `dir` where a path starts or after a `:` or `=`, ending
/// the value or followed by `/` or `:`.
fn rebased(value: &str, dir: &str) -> String {
    let mut word = String::new();
    let mut rest = value;
    let mut literal = String::new();
    while !rest.is_empty() {
        let starts_path =
            (word.is_empty() && literal.is_empty()) || literal.ends_with([':', '=', ' ']);
        let after = rest.strip_prefix(dir).filter(|after| {
            starts_path && (after.is_empty() || after.starts_with(['/', ':', ' ']))
        });
        match after {
            Some(after) => {
                if !literal.is_empty() {
                    word.push_str(&super::shell_quote(&literal));
                }
                literal.clear();
                word.push_str(OUT);
                rest = after;
            }
            None => {
                let c = rest.chars().next().expect("not empty");
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !literal.is_empty() || word.is_empty() {
        word.push_str(&super::shell_quote(&literal));
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_into_the_run_directory_go_to_the_replay_directory() {
        let dir = "/a/cell/run-2";
        assert_eq!(rebased("/a/cell/run-2", dir), "\"$out\"");
        assert_eq!(rebased("/a/cell/run-2/home", dir), "\"$out\"/home");
        assert_eq!(
            rebased("/x:/a/cell/run-2/crash.jsonl", dir),
            "/x:\"$out\"/crash.jsonl"
        );
        assert_eq!(
            rebased(
                "khronos_validation.log_filename = /a/cell/run-2/validation.log",
                dir
            ),
            "'khronos_validation.log_filename = '\"$out\"/validation.log"
        );
        // Another directory that starts the same is not the run's.
        assert_eq!(rebased("/a/cell/run-23/x", dir), "/a/cell/run-23/x");
        assert_eq!(rebased("it's", dir), r"'it'\''s'");
        assert_eq!(rebased("", dir), "''");
    }

    #[test]
    fn the_script_sets_what_the_run_set_and_unsets_what_it_unset() {
        let spec = CommandSpec {
            program: "/bin/prog".into(),
            args: vec!["--x".into(), "a b".into()],
            cwd: "/a/run-1".into(),
            env_set: vec![("HOME".into(), "/a/run-1/home".into())],
            env_remove: vec!["VK_INSTANCE_LAYERS".into()],
        };
        let text = script(
            Path::new("/a/run-1"),
            &spec,
            Some("# x\nlog = /a/run-1/validation.log\n"),
        );
        for line in [
            "unset VK_INSTANCE_LAYERS",
            "export HOME=\"$out\"/home",
            "cd \"$out\"",
            "/bin/prog --x 'a b'",
            "exit $status",
            "    'log = '\"$out\"/validation.log > \"$out\"/vk_layer_settings.txt",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}
