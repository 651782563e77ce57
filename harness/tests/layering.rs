//! The harness's modules flow one way (lib.rs's doc says why): each top-level module may use
//! those before it in `ORDER`, never one after it. This reads harness/src and fails on any
//! `crate::` path that points later in the order, naming the file and line.

mod rust_sources;

use rust_sources::sources;
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first; modules on one line are one level.
const ORDER: &[&[&str]] = &[
    &["support"],
    &["host"],
    &["plan"],
    &["explain"],
    &["run"],
    &["judge"],
    &["report"],
    &["engine"],
    &["cli"],
    // Built only for unit tests: fixtures any stage's tests may use.
    &["test_fixtures"],
];

fn level(module: &str) -> Option<usize> {
    ORDER.iter().position(|l| l.contains(&module))
}

/// The top-level module a source file belongs to: `host/probe.rs` → `host`, `results.rs` →
/// `results`; `None` for the crate roots.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first.strip_suffix(".rs") {
        Some("lib" | "main") => None,
        Some(stem) => Some(stem.to_string()),
        None => Some(first.to_string()),
    }
}

/// The lines of the code that ships, numbered from 0: up to the file's test module
/// (`#[cfg(test)] mod tests`, at its end), comments left out.
fn shipping_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        if !code.starts_with("//") {
            out.push((i, *line));
        }
    }
    out
}

/// The top-level modules `text` names through `crate::`, each with its line number, in the
/// code that ships: a file's test module (`#[cfg(test)] mod tests`, at its end) builds
/// fixtures from any stage and is left out.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in shipping_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                // `use crate::{a::X, b};`
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|part| part.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")],
            };
            for name in names.into_iter().filter(|n| !n.is_empty()) {
                found.push((i + 1, name.to_string()));
            }
        }
    }
    found
}

/// Every backward import in `text`, the source of module `module` at `shown`.
fn backward(module: &str, shown: &str, text: &str) -> Vec<String> {
    let Some(own) = level(module) else {
        return vec![format!(
            "{shown}: module `{module}` has no place in the order: add it to ORDER and to lib.rs's doc"
        )];
    };
    imports(text)
        .into_iter()
        .filter_map(|(line, name)| match level(&name) {
            Some(theirs) if theirs > own => Some(format!(
                "{shown}:{line}: `{module}` uses `{name}`, which comes after it"
            )),
            Some(_) => None,
            // `crate::SOMETHING` that is no top-level module: a re-export at the root.
            None => Some(format!(
                "{shown}:{line}: `crate::{name}` is no module of the order: use the module's own path"
            )),
        })
        .collect()
}

#[test]
fn no_module_uses_one_after_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let Some(module) = module_of(relative) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        problems.extend(backward(&module, &relative.display().to_string(), &text));
        checked += 1;
    }
    assert!(
        checked > 40,
        "only {checked} source files found under {}",
        root.display()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_module_of_the_order_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for module in ORDER.iter().flat_map(|l| l.iter()) {
        let folder = root.join(module).join("mod.rs");
        let file = root.join(format!("{module}.rs"));
        assert!(
            folder.is_file() || file.is_file(),
            "{module}: neither {} nor {}",
            folder.display(),
            file.display()
        );
    }
}

/// The binary is the command line's entry and nothing else: arguments and handlers live in cli/.
#[test]
fn main_only_calls_the_cli() {
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
    let text = std::fs::read_to_string(&main).unwrap();
    assert!(
        text.lines().count() <= 50,
        "{}: {} lines",
        main.display(),
        text.lines().count()
    );
    assert!(text.contains("vkexit::cli::main()"), "{text}");
}

#[test]
fn the_check_sees_backward_imports() {
    let text = "\
//! use crate::cli (a comment)
use crate::host::drivers;
use crate::{judge::Expectation, support};
fn f() { crate::report::print(); }
#[cfg(test)]
mod tests {
    use crate::cli::main;
}
";
    let found = backward("run", "run/x.rs", text);
    assert_eq!(
        found,
        [
            "run/x.rs:3: `run` uses `judge`, which comes after it",
            "run/x.rs:4: `run` uses `report`, which comes after it",
        ]
    );
    assert_eq!(
        backward("nowhere", "nowhere.rs", "")[0],
        "nowhere.rs: module `nowhere` has no place in the order: add it to ORDER and to lib.rs's doc"
    );
    assert_eq!(
        backward("plan", "plan/x.rs", "use crate::drivers::Driver;"),
        ["plan/x.rs:1: `crate::drivers` is no module of the order: use the module's own path"]
    );
}

/// The lines of the shipping code of `files` (each file up to its test module) that contain
/// `needle` outside comments, as `FILE:LINE`.
fn code_lines_with(root: &Path, files: &[PathBuf], needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in shipping_lines(&text) {
            if line.contains(needle) {
                let shown = file.strip_prefix(root).unwrap_or(file).display();
                found.push(format!("{shown}:{}", i + 1));
            }
        }
    }
    found
}

/// The shipping code of `text` (up to its test module, comments left out) as one string, with
/// the line number (from 1) of each byte offset's line.
fn shipping_text(text: &str) -> (String, Vec<usize>) {
    let (mut code, mut lines) = (String::new(), Vec::new());
    for (i, line) in shipping_lines(text) {
        let line = match line.find(" //") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        code.push_str(line);
        code.push('\n');
        lines.extend(std::iter::repeat_n(i + 1, line.len() + 1));
    }
    (code, lines)
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each place in `code` where the word `word` stands, as byte offsets.
fn words(code: &str, word: &str) -> Vec<usize> {
    code.match_indices(word)
        .map(|(at, _)| at)
        .filter(|&at| {
            !code[..at].ends_with(is_ident) && !code[at + word.len()..].starts_with(is_ident)
        })
        .collect()
}

/// What comes before the path that ends at `at` (`crate::run::Options` → what precedes
/// `crate`), trimmed.
fn before_path(code: &str, at: usize) -> &str {
    let mut start = at;
    while code[..start].ends_with("::") {
        start -= 2;
        start = code[..start].trim_end_matches(is_ident).len();
    }
    code[..start].trim_end()
}

/// The struct literals of `run::Options` in `text` (the source at `shown`), as `FILE:LINE`:
/// the type named by its own name, a path, or an alias, followed by `{` where an expression
/// is, and `Self {` inside an `impl` of it. A type definition, an `impl` header, a return
/// type and a `let` pattern are no literal.
fn options_literals(shown: &str, text: &str) -> Vec<String> {
    let (code, lines) = shipping_text(text);
    let mut names = vec!["Options".to_string()];
    for at in words(&code, "Options") {
        let rest = code[at + "Options".len()..].trim_start();
        if let Some(alias) = rest.strip_prefix("as ") {
            names.push(
                alias
                    .split(|c: char| !is_ident(c))
                    .next()
                    .unwrap_or("")
                    .to_string(),
            );
        }
    }
    let mut found = Vec::new();
    for name in &names {
        for at in words(&code, name) {
            if !code[at + name.len()..].trim_start().starts_with('{') {
                continue;
            }
            let before = before_path(&code, at);
            let header = [
                "struct", "enum", "union", "trait", "impl", "for", "->", "let", "mod",
            ]
            .iter()
            .any(|w| before.ends_with(w));
            if header {
                if before.ends_with("impl") {
                    found.extend(self_literals(&code, at, &lines, shown));
                }
                continue;
            }
            found.push(format!("{shown}:{}", lines[at]));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// `Self {` literals in the block that opens after `at` (an `impl` of the type).
fn self_literals(code: &str, at: usize, lines: &[usize], shown: &str) -> Vec<String> {
    let open = at + code[at..].find('{').unwrap();
    let mut depth = 0;
    let mut end = code.len();
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => continue,
        }
        if depth == 0 {
            end = open + i;
            break;
        }
    }
    words(&code[..end], "Self")
        .into_iter()
        .filter(|&s| s > open)
        .filter(|&s| code[s + 4..].trim_start().starts_with('{'))
        .filter(|&s| !code[..s].trim_end().ends_with("->"))
        .map(|s| format!("{shown}:{}", lines[s]))
        .collect()
}

/// One place assembles runs: `run::Options` is built by the Invocation only (the run stage
/// itself only fills in the paths it resolved, field by field).
#[test]
fn only_the_invocation_assembles_run_options() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let defined = code_lines_with(&root, &files, "struct Options ");
    assert!(
        defined.len() == 1 && defined[0].starts_with("run/mod.rs:"),
        "one type is named Options, run's: the check finds its literals by that name: {defined:?}"
    );
    let mut built = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        built.extend(options_literals(
            &shown,
            &std::fs::read_to_string(file).unwrap(),
        ));
    }
    let outside: Vec<&String> = built
        .iter()
        .filter(|at| !at.starts_with("engine/invocation.rs:"))
        .collect();
    assert!(
        outside.is_empty(),
        "run::Options built outside engine/invocation.rs: {outside:?}"
    );
    assert!(
        !built.is_empty(),
        "engine/invocation.rs builds no run::Options: the check looks for the wrong text"
    );
}

#[test]
fn the_check_sees_every_literal_of_run_options() {
    let text = "\
use crate::run::Options as RunOptions;
pub(crate) struct Options {
    runs: u32,
}
impl Options {
    fn again(&self) -> Self {
        Self { runs: 1 }
    }
    fn same(&self) -> Self {
        self.clone()
    }
}
fn options(&self) -> run::Options {
    let Options { runs } = self.options;
    let resolved = &Options {
        artifacts: root,
        ..options.clone()
    };
    let other = crate::run::Options { runs };
    let aliased = RunOptions { runs };
    // Options { runs } in a comment
    let mut fine = options.clone();
    fine.runs = 1;
}
#[cfg(test)]
mod tests {
    fn built() -> Options { Options { runs: 1 } }
}
";
    assert_eq!(
        options_literals("run/x.rs", text),
        ["run/x.rs:15", "run/x.rs:19", "run/x.rs:20", "run/x.rs:7"]
    );
}

/// `VKEXIT_` names given as constants: in harness/src and in the evidence crate, whose
/// writers read theirs.
fn vkexit_constants() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&manifest.join("src"), &mut files);
    sources(&manifest.join("../evidence/src"), &mut files);
    let mut names = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        names.extend(constants_of(&text));
    }
    names
}

/// The constants `text` defines whose value is a `VKEXIT_` name (`const NAME: &str =
/// "VKEXIT_…"`, or a `use … as NAME` of one is not needed: the check matches the last part of a
/// path).
fn constants_of(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let (head, value) = line.split_once('=')?;
            let name = head.trim().strip_suffix(": &str")?;
            let name = name.rsplit(' ').next()?;
            value
                .trim()
                .starts_with("\"VKEXIT_")
                .then(|| name.to_string())
        })
        .collect()
}

/// The reads of a `VKEXIT_` variable in `text` (the source at `shown`), as `FILE:LINE`: a call
/// of `var` or `var_os` (`std::env::var`, `env::var_os`, or a closure so named around one)
/// whose argument is a `"VKEXIT_…"` literal, one of `constants` (by itself or at the end of a
/// path), or an evidence file's variable (`TRACE.var`).
fn env_reads(shown: &str, text: &str, constants: &[String]) -> Vec<String> {
    let (code, lines) = shipping_text(text);
    let mut found = Vec::new();
    for reader in ["var", "var_os"] {
        for at in words(&code, reader) {
            let Some(args) = code[at + reader.len()..].strip_prefix('(') else {
                continue;
            };
            let mut depth = 1;
            let end = args
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(args.len(), |(i, _)| i);
            let arg = &args[..end];
            let named = arg.contains("\"VKEXIT_")
                || arg.contains(".var")
                || constants.iter().any(|c| !words(arg, c).is_empty());
            if named {
                found.push(format!("{shown}:{}", lines[at]));
            }
        }
    }
    found.sort();
    found
}

/// One module reads vkexit's own variables (`support/env.rs`): everything else is handed
/// what they say.
#[test]
fn only_support_env_reads_vkexit_variables() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let constants = vkexit_constants();
    assert!(
        constants.len() > 8,
        "the variables' constants are not found: {constants:?}"
    );
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let mut reads = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        reads.extend(env_reads(&shown, &text, &constants));
    }
    let outside: Vec<&String> = reads
        .iter()
        .filter(|at| !at.starts_with("support/env.rs:"))
        .collect();
    assert!(
        outside.is_empty(),
        "VKEXIT_ variables read outside support/env.rs: {outside:?}"
    );
    assert!(
        reads.iter().any(|at| at.starts_with("support/env.rs:")),
        "support/env.rs reads no variable: the check looks for the wrong text"
    );
}

#[test]
fn the_check_sees_every_read_of_a_vkexit_variable() {
    let text = "\
const LIMIT_VAR: &str = \"VKEXIT_LIMIT\";
fn reads() {
    let off = std::env::var_os(\"VKEXIT_SPAWN_WITHOUT_CLONE3\").is_some();
    let limit = std::env::var(LIMIT_VAR);
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var(env::RUNTIME_CACHE);
    let log = std::env::var(
        vkexit_evidence::files::TRACE.var,
    );
    let path = std::env::var_os(\"PATH\");
    // std::env::var(\"VKEXIT_IN_A_COMMENT\")
    env_set.push((env::EXIT_ORDER.into(), order));
}
";
    let mut constants = constants_of(text);
    constants.extend(["RUNTIME_CACHE".to_string(), "EXIT_ORDER".to_string()]);
    assert_eq!(constants[0], "LIMIT_VAR");
    assert_eq!(
        env_reads("host/x.rs", text, &constants),
        ["host/x.rs:3", "host/x.rs:4", "host/x.rs:6", "host/x.rs:7"]
    );
}

/// Every gate rule lives in judge/: outside it, shipping code sets a verdict only to what a
/// function of judge/ decided, on the same line.
#[test]
fn verdicts_are_decided_in_judge_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let set: Vec<String> = code_lines_with(&root, &files, ".verdict = ");
    assert!(
        set.iter().any(|at| at.starts_with("judge/")),
        "judge/ sets no verdict: the check looks for the wrong text"
    );
    let outside: Vec<&String> = set
        .iter()
        .filter(|at| !at.starts_with("judge/"))
        .filter(|at| {
            let (file, line) = at.rsplit_once(':').unwrap();
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            let line: usize = line.parse().unwrap();
            !text.lines().nth(line - 1).unwrap().contains("judge::")
        })
        .collect();
    assert!(
        outside.is_empty(),
        "verdicts set outside judge/, not by a judge:: function: {outside:?}"
    );
}

/// The run stage decides no verdict: its shipping code names no verdict type and no judging.
#[test]
fn the_run_stage_decides_no_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root.join("run"), &mut files);
    files.sort();
    assert!(files.len() > 5, "run/ holds {} files", files.len());
    for needle in ["RunVerdict", "CellVerdict", "Classification", "classify("] {
        let found = code_lines_with(&root, &files, needle);
        assert!(found.is_empty(), "run/ names {needle}: {found:?}");
    }
}

/// What reads files, as shipping code spells it: the standard library's ways, and this
/// crate's readers, each a function named `read` or `read_…` of a type or module
/// (`Story::read`, `TomlFile::read`, `loader::read`).
const FILE_READS: &[&str] = &[
    "fs::",
    "File::",
    "OpenOptions",
    "BufReader",
    "read_dir",
    "read_to_string",
    ".exists()",
    ".is_file()",
    ".is_dir()",
    ".metadata(",
    "::read(",
    "::read_",
];

/// Whether `line` holds `needle` as a whole name: `File::` is not in `TomlFile::`.
fn names(line: &str, needle: &str) -> bool {
    line.match_indices(needle).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        !needle.starts_with(|c: char| c.is_alphanumeric())
            || !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The lines of `text`'s shipping code that read a file, each as `SHOWN:LINE: what`.
fn file_reads(shown: &str, text: &str) -> Vec<String> {
    shipping_lines(text)
        .into_iter()
        .flat_map(|(i, line)| {
            FILE_READS
                .iter()
                .filter(move |needle| names(line, needle))
                .map(move |needle| format!("{shown}:{}: {needle}", i + 1))
        })
        .collect()
}

/// Judging is pure: judge/ decides from what the run stage read back and handed over (the
/// raw evidence of a finished run, a crash's story included) and from the baselines as
/// engine/ read them; its shipping code reads no file.
#[test]
fn judging_reads_no_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root.join("judge"), &mut files);
    files.sort();
    assert!(files.len() > 5, "judge/ holds {} files", files.len());
    let reads: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let shown = file.strip_prefix(&root).unwrap().display().to_string();
            file_reads(&shown, &std::fs::read_to_string(file).unwrap())
        })
        .collect();
    assert!(reads.is_empty(), "judge/ reads files: {reads:?}");
}

#[test]
fn the_check_sees_a_file_read_in_judge() {
    let text = "\
//! Story::read (a comment)
fn judge(finished: &Finished) {
    if let Some(summary) = Story::read(&finished.dir).summary() {}
    let text = std::fs::read_to_string(path);
    let baseline = BaselineFile::parse(&TomlFile::read(path, \"baseline\")?);
    let crashes = summaries::read_crashes(file);
    let fine = (finished.crash_story.clone(), TomlFile::default());
}
#[cfg(test)]
mod tests {
    fn f() { std::fs::write(\"x\", \"\").unwrap(); }
}
";
    assert_eq!(
        file_reads("judge/run.rs", text),
        [
            "judge/run.rs:3: ::read(",
            "judge/run.rs:4: fs::",
            "judge/run.rs:4: read_to_string",
            "judge/run.rs:4: ::read_",
            "judge/run.rs:5: ::read(",
            "judge/run.rs:6: ::read_",
        ]
    );
}

/// The names of a run directory's files, as the evidence crate defines them.
fn run_file_names() -> Vec<&'static str> {
    use vkexit_evidence::files;
    let mut names: Vec<&str> = files::EVIDENCE.iter().map(|f| f.name).collect();
    names.extend([
        files::STDOUT,
        files::STDERR,
        files::VALIDATION_LOG,
        files::LAYER_SETTINGS,
        files::RESULT,
        files::COMMAND,
        files::HANG,
    ]);
    names
}

/// The lines of `text`'s shipping code that spell a run file's name as a string literal, each
/// as `SHOWN:LINE: "NAME"`.
fn file_name_literals(shown: &str, text: &str, names: &[&str]) -> Vec<String> {
    shipping_lines(text)
        .into_iter()
        .flat_map(|(i, line)| {
            names
                .iter()
                .filter(move |name| line.contains(&format!("\"{name}\"")))
                .map(move |name| format!("{shown}:{}: \"{name}\"", i + 1))
        })
        .collect()
}

/// One file-name table: the harness names a run directory's files through the evidence
/// crate's constants, never by a literal of its own.
#[test]
fn run_files_are_named_by_the_evidence_crate_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let names = run_file_names();
    assert!(names.len() >= 11, "{names:?}");
    let literals: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let shown = file.strip_prefix(&root).unwrap().display().to_string();
            file_name_literals(&shown, &std::fs::read_to_string(file).unwrap(), &names)
        })
        .collect();
    assert!(
        literals.is_empty(),
        "name these through vkexit_evidence::files: {literals:?}"
    );
}

#[test]
fn the_check_sees_a_run_file_named_by_a_literal() {
    let text = "\
//! Writes \"result.json\" (a comment)
fn write(dir: &Path) {
    std::fs::write(dir.join(\"result.json\"), b\"\").unwrap();
    let log = dir.join(files::VALIDATION_LOG);
    let other = dir.join(\"result.json.tmp\");
}
#[cfg(test)]
mod tests {
    fn f() { let _ = \"stderr.txt\"; }
}
";
    assert_eq!(
        file_name_literals("run/mod.rs", text, &run_file_names()),
        ["run/mod.rs:3: \"result.json\""]
    );
}
