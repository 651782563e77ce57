//! CTest: `ctest --show-only=json-v1` in the build directory gives every test's command
//! and properties, after CTest's own selection (`-R`, `-E`, `-L`, `-LE`, `-C`, given
//! through). A test starts where CTest would start it: its `WORKING_DIRECTORY`, else the
//! directory of the `CTestTestfile.cmake` that adds it, which the JSON does not give and
//! is found by reading those files.

use super::{command_line, run_listing, ListingError, Props, SkipRule, Suite, Test};
use crate::plan::NotRun;
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// CTest's properties that change neither how a test runs alone nor its verdict.
const HARMLESS: [&str; 8] = [
    "LABELS",
    "COST",
    "PROCESSORS",
    "ATTACHED_FILES",
    "ATTACHED_FILES_ON_FAIL",
    "MEASUREMENT",
    "_BACKTRACE_TRIPLES",
    "TIMEOUT_SIGNAL_GRACE_PERIOD",
];

pub(super) fn list(
    suite: &Suite,
    tool: &mut Duration,
) -> Result<(String, Vec<Test>), (String, ListingError)> {
    let mut args = vec!["--show-only=json-v1".to_string()];
    args.extend(suite.args.iter().cloned());
    let command = format!(
        "cd {} && {}",
        suite.target.display(),
        command_line(Path::new("ctest"), &args)
    );
    let mut ctest = Command::new("ctest");
    ctest.args(&args).current_dir(&suite.target);
    let text = run_listing(&mut ctest, &suite.env, tool).map_err(|why| (command.clone(), why))?;
    let dirs = test_dirs(&suite.target);
    let tests = parse(&text, &suite.target, &dirs)
        .map_err(|why| (command.clone(), ListingError::Ctest(why)))?;
    Ok((command, tests))
}

/// What CTest printed that is not its `json-v1` listing.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadJson {
    /// Not JSON at all.
    #[error("its output is not CTest's JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// JSON of another kind or version: what it says it is.
    #[error("its output is not CTest's json-v1 (kind {kind}, version {version})")]
    OtherKind { kind: Value, version: Value },
    /// No `tests` list.
    #[error("its JSON has no `tests` list")]
    NoTests,
    /// A test without a name: the test as written.
    #[error("a test without a name: {0}")]
    Unnamed(Value),
    /// A word of a test's command that is not a string: the test's name.
    #[error("test {0}: a word of its command is not a string")]
    CommandWord(String),
}

/// The tests of a `json-v1` document; `dirs` gives the directory each test was added in.
pub(super) fn parse(
    text: &str,
    build_dir: &Path,
    dirs: &HashMap<String, PathBuf>,
) -> Result<Vec<Test>, BadJson> {
    let doc: Value = serde_json::from_str(text).map_err(BadJson::NotJson)?;
    if doc["kind"] != "ctestInfo" || doc["version"]["major"] != 1 {
        return Err(BadJson::OtherKind {
            kind: doc["kind"].clone(),
            version: doc["version"].clone(),
        });
    }
    let Some(tests) = doc["tests"].as_array() else {
        return Err(BadJson::NoTests);
    };
    tests.iter().map(|t| test(t, build_dir, dirs)).collect()
}

fn test(t: &Value, build_dir: &Path, dirs: &HashMap<String, PathBuf>) -> Result<Test, BadJson> {
    let name = t["name"]
        .as_str()
        .ok_or_else(|| BadJson::Unnamed(t.clone()))?
        .to_string();
    let mut props = Props::default();
    let argv: Vec<OsString> = match t["command"].as_array() {
        Some(words) => words
            .iter()
            .map(|w| w.as_str().map(OsString::from))
            .collect::<Option<_>>()
            .ok_or_else(|| BadJson::CommandWord(name.clone()))?,
        None => {
            props.not_run = Some(NotRun::Broken(
                "CTest gives it no command: its program is not built for this configuration \
                 (a multi-configuration build needs `-C CONFIG` in the CTest arguments)"
                    .into(),
            ));
            Vec::new()
        }
    };
    let mut workdir = None;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut modifications: Vec<String> = Vec::new();
    let (mut skip_return_code, mut skip_patterns) = (None, Vec::new());
    for p in t["properties"].as_array().into_iter().flatten() {
        let key = p["name"].as_str().unwrap_or_default();
        let value = &p["value"];
        match key {
            "WORKING_DIRECTORY" => workdir = value.as_str().map(PathBuf::from),
            "ENVIRONMENT" => {
                for item in strings(value) {
                    match item.split_once('=') {
                        Some((k, v)) => env.push((k.to_string(), v.to_string())),
                        None => props.notes.push(format!(
                            "not honoured: ENVIRONMENT entry `{item}` has no `=`"
                        )),
                    }
                }
            }
            "ENVIRONMENT_MODIFICATION" => modifications = strings(value),
            "TIMEOUT" => {
                props.timeout = value
                    .as_f64()
                    .filter(|s| *s > 0.0)
                    .map(Duration::from_secs_f64)
            }
            "WILL_FAIL" => props.will_fail = value.as_bool().unwrap_or(false),
            "RUN_SERIAL" => props.run_serial = value.as_bool().unwrap_or(false),
            "RESOURCE_LOCK" => props.resource_locks = strings(value),
            "DISABLED" if value.as_bool() == Some(true) => {
                props.not_run = Some(NotRun::Skipped("DISABLED in CTest".into()))
            }
            "DISABLED" => {}
            "SKIP_RETURN_CODE" => match value.as_i64().or_else(|| value.as_str()?.parse().ok()) {
                Some(code) => skip_return_code = i32::try_from(code).ok(),
                None => props.notes.push(not_honoured(key, value)),
            },
            "SKIP_REGULAR_EXPRESSION" => {
                for pattern in strings(value) {
                    match super::skips::readable_pattern(&pattern) {
                        true => skip_patterns.push(pattern),
                        false => props.notes.push(format!(
                            "not honoured: SKIP_REGULAR_EXPRESSION `{pattern}`: not a regular \
                             expression vkexit can read"
                        )),
                    }
                }
            }
            key if HARMLESS.contains(&key) => {}
            key => props.notes.push(not_honoured(key, value)),
        }
    }
    if skip_return_code.is_some() || !skip_patterns.is_empty() {
        props.skip = Some(SkipRule::Ctest {
            return_code: skip_return_code,
            patterns: skip_patterns,
        });
    }
    let (env, remove, notes) = modify(env, &modifications);
    props.env = env;
    props.env_remove = remove;
    props.notes.extend(notes);
    let workdir = workdir.or_else(|| dirs.get(&name).cloned()).or_else(|| {
        props.notes.push(format!(
            "no CTestTestfile.cmake under {} adds it: it starts in that directory",
            build_dir.display()
        ));
        Some(build_dir.to_path_buf())
    });
    Ok(Test {
        name,
        argv,
        workdir,
        props,
    })
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
            .collect(),
        Value::String(s) => vec![s.clone()],
        other => vec![other.to_string()],
    }
}

/// What a property vkexit does not honour means for the verdict.
fn not_honoured(key: &str, value: &Value) -> String {
    let value = strings(value).join(";");
    let why = match key {
        "FIXTURES_REQUIRED" => "vkexit runs no setup or cleanup test around its runs",
        "FIXTURES_SETUP" | "FIXTURES_CLEANUP" => {
            "vkexit runs it as a test of its own, not around the tests that need it"
        }
        "RESOURCE_GROUPS" => "its runs may overlap other runs (-j); give -j 1 where that matters",
        "DEPENDS" => "vkexit runs tests in no particular order",
        "PASS_REGULAR_EXPRESSION" | "FAIL_REGULAR_EXPRESSION" => {
            "vkexit judges the exit status and the validation log, not the output"
        }
        "SKIP_RETURN_CODE" => "it is not an exit status",
        "REQUIRED_FILES" => "vkexit does not check for them before a run",
        "TIMEOUT_AFTER_MATCH" => "the run's time limit does not change on output",
        _ => "vkexit does not know this property",
    };
    format!("not honoured: {key} {value}: {why}")
}

/// CTest's `ENVIRONMENT_MODIFICATION` (`VAR=OP:VALUE`) over the test's `ENVIRONMENT`,
/// which CTest applies first, from vkexit's own environment as the runs inherit it: the
/// variables to set, those to unset, and notes for entries it cannot read.
fn modify(
    env: Vec<(String, String)>,
    modifications: &[String],
) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
    let mut notes = Vec::new();
    // The value each touched variable has: None is unset.
    let mut now: Vec<(String, Option<String>)> = Vec::new();
    let get = |now: &[(String, Option<String>)], k: &str| {
        now.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| std::env::var(k).ok())
    };
    let base = env.clone();
    for (k, v) in env {
        now.push((k, Some(v)));
    }
    for entry in modifications {
        let Some((name, rest)) = entry.split_once('=') else {
            notes.push(format!(
                "not honoured: ENVIRONMENT_MODIFICATION entry `{entry}` has no `=`"
            ));
            continue;
        };
        let (op, value) = rest.split_once(':').unwrap_or((rest, ""));
        let old = get(&now, name);
        let sep = |old: &Option<String>, s: &str| match old.as_deref() {
            None | Some("") => String::new(),
            Some(_) => s.to_string(),
        };
        let new = match op {
            // As `ENVIRONMENT` set it, else as inherited.
            "reset" => base
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok()),
            "set" => Some(value.to_string()),
            "unset" => None,
            "string_append" => Some(format!("{}{value}", old.unwrap_or_default())),
            "string_prepend" => Some(format!("{value}{}", old.unwrap_or_default())),
            "path_list_append" => Some(format!(
                "{}{}{value}",
                old.clone().unwrap_or_default(),
                sep(&old, ":")
            )),
            "path_list_prepend" => Some(format!(
                "{value}{}{}",
                sep(&old, ":"),
                old.clone().unwrap_or_default()
            )),
            "cmake_list_append" => Some(format!(
                "{}{}{value}",
                old.clone().unwrap_or_default(),
                sep(&old, ";")
            )),
            "cmake_list_prepend" => Some(format!(
                "{value}{}{}",
                sep(&old, ";"),
                old.clone().unwrap_or_default()
            )),
            other => {
                notes.push(format!(
                    "not honoured: ENVIRONMENT_MODIFICATION `{entry}`: unknown operation `{other}`"
                ));
                continue;
            }
        };
        now.push((name.to_string(), new));
    }
    let mut set: Vec<(String, String)> = Vec::new();
    let mut unset: Vec<String> = Vec::new();
    for (name, _) in &now {
        if set.iter().any(|(k, _)| k == name) || unset.contains(name) {
            continue;
        }
        match get(&now, name) {
            Some(v) => set.push((name.clone(), v)),
            None => unset.push(name.clone()),
        }
    }
    (set, unset, notes)
}

/// The directory each test is added in: every `CTestTestfile.cmake` from the build
/// directory's down through its `subdirs(…)`, by the name its `add_test(NAME …)` gives.
pub(super) fn test_dirs(build_dir: &Path) -> HashMap<String, PathBuf> {
    let mut dirs = HashMap::new();
    let mut todo = vec![build_dir.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = todo.pop() {
        seen += 1;
        if seen > 100_000 {
            break;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("CTestTestfile.cmake")) else {
            continue;
        };
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("add_test(") {
                if let Some(name) = first_argument(rest) {
                    dirs.entry(name).or_insert_with(|| dir.clone());
                }
            } else if let Some(rest) = line.strip_prefix("subdirs(") {
                if let Some(sub) = first_argument(rest) {
                    todo.push(dir.join(sub));
                }
            }
        }
    }
    dirs
}

/// The first argument of a CMake command: `[=[a b]=]`, `"a \"b\""` or `a`.
fn first_argument(text: &str) -> Option<String> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix('[') {
        let equals = rest.chars().take_while(|c| *c == '=').count();
        let body = rest[equals..].strip_prefix('[')?;
        let close = format!("]{}]", "=".repeat(equals));
        return body.find(&close).map(|end| body[..end].to_string());
    }
    if let Some(rest) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(out),
                '\\' => out.push(chars.next()?),
                c => out.push(c),
            }
        }
        return None;
    }
    let end = text.find(|c: char| c.is_whitespace() || c == ')')?;
    Some(text[..end].to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"kind":"ctestInfo","version":{"major":1,"minor":0},"backtraceGraph":{},
      "tests":[
        {"name":"a b/c","command":["/bin/prog","--x"],"properties":[
          {"name":"ENVIRONMENT","value":["K=1","L=x","K2=from-environment"]},
          {"name":"ENVIRONMENT_MODIFICATION","value":["L=path_list_append:y","K=unset:","M=string_prepend:p","N=cmake_list_append:z","VKEXIT_NEVER_SET=set:1","VKEXIT_NEVER_SET=reset:","L2=set:a","K2=reset:"]},
          {"name":"LABELS","value":["gpu"]},
          {"name":"TIMEOUT","value":2.5},
          {"name":"WILL_FAIL","value":true},
          {"name":"WORKING_DIRECTORY","value":"/w"}]},
        {"name":"off","command":["/bin/prog"],"properties":[{"name":"DISABLED","value":true}]},
        {"name":"fixture","command":["/bin/prog"],"properties":[{"name":"FIXTURES_REQUIRED","value":["db"]},{"name":"RESOURCE_LOCK","value":["gpu","db"]},{"name":"RUN_SERIAL","value":true}]},
        {"name":"unbuilt","properties":[]}
      ]}"#;

    #[test]
    fn every_property_vkexit_reads_is_read_and_the_others_are_said() {
        let dirs = HashMap::from([("off".to_string(), PathBuf::from("/b/sub"))]);
        let tests = parse(DOC, Path::new("/b"), &dirs).unwrap();
        assert_eq!(tests.len(), 4);
        let a = &tests[0];
        assert_eq!(a.name, "a b/c");
        assert_eq!(a.argv, [OsString::from("/bin/prog"), "--x".into()]);
        assert_eq!(a.workdir, Some(PathBuf::from("/w")));
        assert_eq!(a.props.timeout, Some(Duration::from_millis(2500)));
        assert!(a.props.will_fail);
        let m = std::env::var("M").unwrap_or_default();
        let n = std::env::var("N").ok();
        let mut want = vec![
            ("L".to_string(), "x:y".to_string()),
            ("M".into(), format!("p{m}")),
        ];
        want.push((
            "N".into(),
            match n {
                Some(n) if !n.is_empty() => format!("{n};z"),
                _ => "z".into(),
            },
        ));
        want.insert(1, ("K2".into(), "from-environment".into()));
        want.push(("L2".into(), "a".into()));
        assert_eq!(a.props.env, want);
        // `reset` goes back to what ENVIRONMENT set, else to what the runs inherit: here nothing.
        assert_eq!(a.props.env_remove, ["K", "VKEXIT_NEVER_SET"]);
        assert!(a.props.notes.is_empty(), "{:?}", a.props.notes);
        assert_eq!(
            tests[1].props.not_run,
            Some(NotRun::Skipped("DISABLED in CTest".into()))
        );
        assert_eq!(tests[1].workdir, Some(PathBuf::from("/b/sub")));
        let notes = &tests[2].props.notes;
        assert!(
            notes[0].starts_with("not honoured: FIXTURES_REQUIRED db: vkexit runs no setup"),
            "{notes:?}"
        );
        assert_eq!(tests[2].props.resource_locks, ["gpu", "db"]);
        assert!(tests[2].props.run_serial && !a.props.run_serial);
        assert!(
            notes[1].contains("no CTestTestfile.cmake under /b adds it"),
            "{notes:?}"
        );
        assert!(
            matches!(&tests[3].props.not_run, Some(NotRun::Broken(w)) if w.contains("-C CONFIG"))
        );
    }

    #[test]
    fn output_that_is_not_ctest_json_is_refused_with_why() {
        let e = parse("Test project /b\n", Path::new("/b"), &HashMap::new()).unwrap_err();
        assert!(e.to_string().contains("not CTest's JSON"), "{e}");
        let e = parse(r#"{"kind":"codemodel"}"#, Path::new("/b"), &HashMap::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"its output is not CTest's json-v1 (kind "codemodel", version null)"#
        );
    }

    #[test]
    fn the_first_argument_of_add_test_is_read_in_each_of_its_forms() {
        assert_eq!(first_argument("t1 \"/p\" \"x\")").as_deref(), Some("t1"));
        assert_eq!(first_argument("[=[a b]=] \"/p\")").as_deref(), Some("a b"));
        assert_eq!(first_argument("[[x]] y").as_deref(), Some("x"));
        assert_eq!(
            first_argument("\"q \\\"r\\\"\" /p)").as_deref(),
            Some("q \"r\"")
        );
        assert_eq!(first_argument("\"tests\")").as_deref(), Some("tests"));
        assert_eq!(first_argument(""), None);
    }

    #[test]
    fn five_thousand_tests_parse() {
        let tests: Vec<String> = (0..5000)
            .map(|i| format!(r#"{{"name":"test-{i}","command":["/bin/t","{i}"],"properties":[{{"name":"LABELS","value":["l"]}},{{"name":"WORKING_DIRECTORY","value":"/w"}}]}}"#))
            .collect();
        let doc = format!(
            r#"{{"kind":"ctestInfo","version":{{"major":1,"minor":0}},"tests":[{}]}}"#,
            tests.join(",")
        );
        let parsed = parse(&doc, Path::new("/b"), &HashMap::new()).unwrap();
        assert_eq!(parsed.len(), 5000);
        assert_eq!(parsed[4999].name, "test-4999");
    }
}
