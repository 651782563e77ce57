//! What the project promises about itself matches what it is: the Rust
//! version it says it needs is what its locked dependencies need, declared
//! once and inherited by every crate, and said the same in README and
//! ci/setup.sh; the license Cargo.toml names comes with its texts; every
//! crate holds the workspace's lints.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn version(text: &str) -> Vec<u64> {
    text.split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("not a version: {text}"))
        })
        .collect()
}

/// `[workspace.package] rust-version`.
fn declared() -> String {
    let manifest: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    manifest["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("[workspace.package] declares rust-version")
        .to_string()
}

#[test]
fn the_declared_rust_version_is_what_the_locked_dependencies_need() {
    // Offline when every manifest is here already; a fresh clone's build
    // fetched only its own platform's, so then ask the registry.
    let metadata = |offline: bool| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["metadata", "--format-version", "1", "--locked"]);
        if offline {
            cmd.arg("--offline");
        }
        cmd.current_dir(repo("")).output().unwrap()
    };
    let mut out = metadata(true);
    if !out.status.success() {
        out = metadata(false);
    }
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let (needed, by) = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !members.contains(&p["id"].as_str().unwrap()))
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            let name = p["name"].as_str().unwrap_or("?");
            let at = p["version"].as_str().unwrap_or("?");
            Some((version(v), format!("{name} {at} ({v})")))
        })
        .max()
        .expect("some dependency declares a rust-version");
    let declared = declared();
    let mut padded = version(&declared);
    padded.resize(needed.len().max(padded.len()), 0);
    let mut needed_padded = needed.clone();
    needed_padded.resize(padded.len(), 0);
    assert_eq!(
        padded, needed_padded,
        "Cargo.toml declares rust-version {declared}; the locked dependencies need {by}"
    );
}

#[test]
fn every_crate_inherits_the_rust_version_and_the_docs_promise_it() {
    let declared = declared();
    let manifest: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    for member in manifest["workspace"]["members"].as_array().unwrap() {
        let path = format!("{}/Cargo.toml", member.as_str().unwrap());
        let crate_manifest: toml::Value = toml::from_str(&read(&path)).unwrap();
        let inherited = crate_manifest["package"]
            .get("rust-version")
            .and_then(|v| v.get("workspace"))
            .and_then(toml::Value::as_bool);
        assert_eq!(
            inherited,
            Some(true),
            "{path}: `rust-version.workspace = true` expected"
        );
    }
    let readme = read("README.md");
    let promise = format!("It needs a Rust toolchain, {declared} or newer.");
    assert!(readme.contains(&promise), "README.md lacks: {promise}");
    let setup = read("ci/setup.sh");
    let promise = format!("install a Rust toolchain ({declared} or newer)");
    assert!(setup.contains(&promise), "ci/setup.sh lacks: {promise}");
    // No other version is promised anywhere in them.
    let any = regex::Regex::new(r"(?:Rust|toolchain,?|rustc) \(?(1\.\d+)").unwrap();
    for (name, text) in [("README.md", &readme), ("ci/setup.sh", &setup)] {
        for c in any.captures_iter(text) {
            assert_eq!(&c[1], declared, "{name}: `{}`", &c[0]);
        }
    }
}

#[test]
fn the_license_cargo_names_comes_with_its_texts() {
    let manifest: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    assert_eq!(
        manifest["workspace"]["package"]["license"].as_str(),
        Some("MIT OR Apache-2.0")
    );
    let mit = read("LICENSE-MIT");
    assert!(mit.starts_with("MIT License\n\nCopyright (c) "), "{mit}");
    assert!(mit.contains("the vkexit developers"));
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    let apache = read("LICENSE-APACHE");
    assert!(apache.contains("Apache License\n                           Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
    assert!(apache.contains("Copyright 2026 the vkexit developers"));
    for member in manifest["workspace"]["members"].as_array().unwrap() {
        let path = format!("{}/Cargo.toml", member.as_str().unwrap());
        let crate_manifest: toml::Value = toml::from_str(&read(&path)).unwrap();
        let inherited = crate_manifest["package"]
            .get("license")
            .and_then(|v| v.get("workspace"))
            .and_then(toml::Value::as_bool);
        assert_eq!(
            inherited,
            Some(true),
            "{path}: `license.workspace = true` expected"
        );
    }
}

/// The lints `[workspace.lints]` sets (documented public items, a SAFETY line on every unsafe
/// block, no unsafe operation outside its block) hold in every crate: a new crate cannot leave
/// them out unnoticed.
#[test]
fn every_crate_holds_the_workspace_lints() {
    let manifest: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    let lints = &manifest["workspace"]["lints"];
    assert_eq!(
        lints["rust"]["unsafe_op_in_unsafe_fn"].as_str(),
        Some("deny")
    );
    assert!(lints["rust"].get("missing_docs").is_some(), "{lints}");
    assert!(
        lints["clippy"].get("undocumented_unsafe_blocks").is_some(),
        "{lints}"
    );
    for member in manifest["workspace"]["members"].as_array().unwrap() {
        let path = format!("{}/Cargo.toml", member.as_str().unwrap());
        let crate_manifest: toml::Value = toml::from_str(&read(&path)).unwrap();
        let inherited = crate_manifest
            .get("lints")
            .and_then(|v| v.get("workspace"))
            .and_then(toml::Value::as_bool);
        assert_eq!(
            inherited,
            Some(true),
            "{path}: `[lints] workspace = true` expected"
        );
    }
}
