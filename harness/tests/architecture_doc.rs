//! ARCHITECTURE.md stays the map of the code: its list of the modules of harness/src (the
//! lines between `<!-- harness/src modules: begin -->` and `<!-- harness/src modules: end -->`)
//! names every folder and top-level file of harness/src and nothing that is not there, its
//! table of crates names every member of the workspace, and every path it shows exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- harness/src modules: begin -->";
const END: &str = "<!-- harness/src modules: end -->";

/// Listed while it is being written: a name the doc may hold before the code does.
const MAY_BE_ABSENT: &[&str] = &["engine/explore.rs"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness/ is in the workspace")
        .to_path_buf()
}

fn doc() -> String {
    let path = root().join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names of the module list: the first word of each line that starts at the margin
/// (the others continue the line before), fences left out.
fn listed(text: &str) -> Result<Vec<String>, String> {
    let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        return Err(format!("no section between `{BEGIN}` and `{END}`"));
    };
    if end < begin || text.matches(BEGIN).count() != 1 || text.matches(END).count() != 1 {
        return Err(format!("`{BEGIN}` must come once, before `{END}`, once"));
    }
    Ok(text[begin + BEGIN.len()..end]
        .lines()
        .filter(|l| !l.starts_with("```") && !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// What the doc must list: each folder of harness/src as `name/`, each top-level `.rs` file.
fn modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            match p.is_dir() {
                true => Some(format!("{name}/")),
                false => name.ends_with(".rs").then_some(name),
            }
        })
        .collect()
}

/// What is wrong with the list `names` against the modules of `src`.
fn mismatches(names: &[String], src: &Path) -> Vec<String> {
    let code = modules(src);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            problems.push(format!("`{name}` is listed twice"));
        }
        let top = !name.trim_end_matches('/').contains('/');
        let exists = match top {
            true => code.contains(name),
            false => src.join(name).exists(),
        };
        if !exists && !MAY_BE_ABSENT.contains(&name.as_str()) {
            problems.push(format!(
                "`{name}` is listed, but harness/src/{name} is not in the code"
            ));
        }
    }
    for module in &code {
        if !names.contains(module) {
            problems.push(format!(
                "harness/src/{module} is not listed: add a line for it"
            ));
        }
    }
    problems
}

#[test]
fn the_module_list_names_every_folder_and_top_level_file_of_harness_src_and_no_other() {
    let names = listed(&doc()).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let problems = mismatches(&names, &root().join("harness/src"));
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md, its list of the modules of harness/src:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_a_module_missing_or_made_up() {
    let src = tempfile::tempdir().unwrap();
    for dir in ["engine", "run"] {
        std::fs::create_dir(src.path().join(dir)).unwrap();
    }
    for file in ["lib.rs", "run/cgroup.rs"] {
        std::fs::write(src.path().join(file), "").unwrap();
    }
    let text = |lines: &str| format!("intro\n{BEGIN}\n```text\n{lines}```\n{END}\nafter\n");
    let names = |lines: &str| listed(&text(lines)).unwrap();

    let whole = names("run/     runs\n         more of it\nrun/cgroup.rs  bounds\nengine/  drives\nengine/explore.rs  soon\nlib.rs   root\n");
    assert_eq!(
        whole,
        [
            "run/",
            "run/cgroup.rs",
            "engine/",
            "engine/explore.rs",
            "lib.rs"
        ]
    );
    assert_eq!(mismatches(&whole, src.path()), Vec::<String>::new());

    let wrong =
        names("run/  runs\nrun/gone.rs  x\njudge/  verdicts\nlib.rs  root\nlib.rs  again\n");
    assert_eq!(
        mismatches(&wrong, src.path()),
        [
            "`run/gone.rs` is listed, but harness/src/run/gone.rs is not in the code",
            "`judge/` is listed, but harness/src/judge/ is not in the code",
            "`lib.rs` is listed twice",
            "harness/src/engine/ is not listed: add a line for it",
        ]
    );

    assert!(listed("no section").is_err());
    assert!(listed(&format!("{END}\n{BEGIN}\n")).is_err());
    assert!(listed(&format!("{BEGIN}\n{END}\n{BEGIN}\n{END}\n")).is_err());
}

/// The workspace's members, as Cargo.toml lists them.
fn members() -> Vec<String> {
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .expect("[workspace] members")
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_crates_table_names_every_member_of_the_workspace() {
    let text = doc();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("The crates\n"))
        .expect("ARCHITECTURE.md: a section `## The crates`");
    let rows: BTreeSet<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let members: BTreeSet<String> = members().into_iter().map(|m| format!("{m}/")).collect();
    let missing: Vec<&String> = members
        .iter()
        .filter(|m| !rows.contains(m.as_str()))
        .collect();
    let extra: Vec<&&str> = rows.iter().filter(|r| !members.contains(**r)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "ARCHITECTURE.md, the crates: members not in the table {missing:?}, rows that are no member {extra:?}"
    );
}

#[test]
fn every_path_the_doc_shows_exists() {
    let text = doc();
    let roots: Vec<String> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .map(|n| format!("{n}/"))
        .collect();
    let quoted = regex::Regex::new(r"`([^`\s]+)`").unwrap();
    let mut missing = Vec::new();
    let mut checked = 0;
    for span in quoted.captures_iter(&text).map(|c| c[1].to_string()) {
        if !roots.iter().any(|r| span.starts_with(r.as_str())) {
            continue;
        }
        checked += 1;
        let tolerated = MAY_BE_ABSENT
            .iter()
            .any(|m| span == format!("harness/src/{m}"));
        if !root().join(&span).exists() && !tolerated {
            missing.push(span);
        }
    }
    assert!(
        checked > 20,
        "only {checked} paths found in ARCHITECTURE.md"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md shows paths that do not exist: {missing:?}"
    );
}
