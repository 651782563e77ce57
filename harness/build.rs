//! Builds the helpers vkexit carries (the built-in scenario programs, refrt, the diagnostics
//! preload and vkexit's two layers) and packs them into one archive that `src/host/helpers.rs`
//! embeds, so that the `vkexit` executable is the whole tool.
//!
//! The helpers are workspace crates built by a nested cargo: its own target directory (the
//! outer build holds the lock on its own), kept between builds beside the outer one so that
//! only what changed is built again, the same profile, the same target, the same lock file,
//! and no network unless a crate is missing from the registry cache. The archive's format is
//! written in `src/host/helpers.rs`, its one reader.
//!
//! `VKEXIT_HELPERS_FROM=DIR` packs helpers already built in DIR instead (a cross build made
//! them for another target).
//!
//! Built from its package (`cargo install vkexit`, or `cargo package`'s verification), vkexit
//! has no workspace beside it: the package carries the helpers' crates in `packaged/`
//! (ci/package.sh copies them there, with a workspace of their own and its lock file), each
//! manifest named `Cargo.toml.in` because cargo leaves a folder with a `Cargo.toml` out of a
//! package. The script copies that tree into OUT_DIR under the real names and runs the same
//! nested build there. The results file's schema, which `vkexit schema` prints, comes from
//! the same place as the helpers: the workspace's `docs/`, or the package's copy.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates whose outputs are helpers.
const PACKAGES: [&str; 5] = [
    "vkexit-scenarios",
    "vkexit-refrt",
    "vkexit-preload",
    "vkexit-layer-trace",
    "vkexit-layer-tegra-exit",
];

/// What the archive carries, with each file's mode: programs, then shared libraries.
const HELPERS: [(&str, u32); 9] = [
    ("clean-exit", 0o755),
    ("buffer-kept-at-exit", 0o755),
    ("handler-before-load", 0o755),
    ("events-freed-after-teardown", 0o755),
    ("vk-call-loop", 0o755),
    ("libvkexit_refrt.so", 0o644),
    ("libvkexit_preload.so", 0o644),
    ("libVkLayer_vkexit_trace.so", 0o644),
    ("libVkLayer_vkexit_tegra_exit.so", 0o644),
];

/// The crates the helpers are built from, with what they depend on.
const CRATES: [&str; 10] = [
    "scenarios",
    "fixtures",
    "fixtures/refrt",
    "layers/support",
    "layers/trace",
    "layers/tegra-exit",
    "diagnostics/crash",
    "diagnostics/preload",
    "evidence",
    "elf",
];

/// What in a crate's folder the build reads: not its tests, nor the scripts and other crates
/// beside it (`scenarios/python`, `scenarios/wgpu`). ci/package.sh reads this list and CRATES.
const CRATE_PARTS: [&str; 5] = ["Cargo.toml", "build.rs", "src", "shaders", "include"];

/// The results file's schema, from the root of the workspace (or of `packaged/`).
const SCHEMA: &str = "docs/results.schema.json";

/// Where the helpers' crates are: the workspace beside `harness/`, or the package's copy.
enum Sources {
    Workspace(PathBuf),
    Packaged(PathBuf),
}

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let sources = sources(&manifest_dir);
    let root = match &sources {
        Sources::Workspace(root) | Sources::Packaged(root) => root.clone(),
    };
    let schema = root.join(SCHEMA);
    println!("cargo:rerun-if-changed={}", schema.display());
    let text = std::fs::read(&schema)
        .unwrap_or_else(|e| panic!("the results file's schema {}: {e}", schema.display()));
    std::fs::write(out_dir.join("results.schema.json"), text).expect("OUT_DIR is writable");
    println!("cargo:rerun-if-env-changed=VKEXIT_HELPERS_FROM");
    let built = match std::env::var_os("VKEXIT_HELPERS_FROM") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let parts = CRATES
                .iter()
                .flat_map(|c| CRATE_PARTS.iter().map(move |p| (c, p)))
                .map(|(c, p)| match (&sources, *p) {
                    (Sources::Packaged(_), "Cargo.toml") => root.join(c).join("Cargo.toml.in"),
                    _ => root.join(c).join(p),
                })
                .filter(|p| p.exists());
            let top = match sources {
                Sources::Workspace(_) => "Cargo.toml",
                Sources::Packaged(_) => "Cargo.toml.in",
            };
            for source in [top, "Cargo.lock"]
                .iter()
                .map(|f| root.join(f))
                .chain(parts)
            {
                println!("cargo:rerun-if-changed={}", source.display());
            }
            match sources {
                Sources::Workspace(workspace) => {
                    nested_build(&workspace, &nested_target_dir(&out_dir, "vkexit-helpers"))
                }
                Sources::Packaged(packaged) => {
                    let workspace = out_dir.join("helpers-src");
                    copy_named(&packaged, &workspace);
                    // Apart from the workspace's nested build: other paths, other crates.
                    let target = nested_target_dir(&out_dir, "vkexit-helpers-packaged");
                    nested_build(&workspace, &target)
                }
            }
        }
    };
    let archive = pack(&built);
    let bin = out_dir.join("helpers.bin");
    std::fs::write(&bin, &archive).expect("OUT_DIR is writable");
    // A section of its own, so that `vkexit bundle` finds the helpers of a vkexit built for
    // another machine in its file.
    let code = format!(
        "#[used]\n#[link_section = \".vkexit_helpers\"]\nstatic ARCHIVE: [u8; {}] = *include_bytes!({:?});\n",
        archive.len(),
        bin.display().to_string()
    );
    std::fs::write(out_dir.join("carried.rs"), code).expect("OUT_DIR is writable");
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

/// The workspace beside `harness/` when its manifest lists `harness` among its members, else
/// the copy this package carries.
fn sources(manifest_dir: &Path) -> Sources {
    let parent = manifest_dir.parent().unwrap_or(manifest_dir);
    let manifest = std::fs::read_to_string(parent.join("Cargo.toml")).unwrap_or_default();
    let members = manifest
        .lines()
        .skip_while(|l| l.trim() != "[workspace]")
        .find(|l| l.trim_start().starts_with("members"))
        .unwrap_or_default();
    match members.contains("\"harness\"") {
        true => Sources::Workspace(parent.to_path_buf()),
        false => Sources::Packaged(manifest_dir.join("packaged")),
    }
}

/// Copies the package's tree of the helpers' crates to `to`, each `Cargo.toml.in` as
/// `Cargo.toml`. A file whose bytes are there already is left as it is, so that the nested
/// build sees it unchanged.
fn copy_named(from: &Path, to: &Path) {
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; a vkexit package carries the helpers' sources there (ci/package.sh)",
            from.display()
        )
    });
    std::fs::create_dir_all(to).expect("OUT_DIR is writable");
    for entry in entries {
        let path = entry.expect("a readable folder").path();
        let name = path.file_name().expect("an entry has a name");
        let name = match name.to_str() {
            Some("Cargo.toml.in") => "Cargo.toml".as_ref(),
            _ => name,
        };
        if path.is_dir() {
            copy_named(&path, &to.join(name));
            continue;
        }
        let bytes = std::fs::read(&path).expect("the package's files are readable");
        let dest = to.join(name);
        if std::fs::read(&dest).ok().as_ref() != Some(&bytes) {
            std::fs::write(&dest, bytes).expect("OUT_DIR is writable");
        }
    }
}

/// Runs the nested cargo build into `target_dir` and returns the directory the helpers are in.
fn nested_build(workspace: &Path, target_dir: &Path) -> PathBuf {
    let target = env("TARGET");
    let release = env("PROFILE") == "release";
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--target")
        .arg(&target);
    let profile = if release { "release" } else { "dev" };
    if release {
        cargo.arg("--release");
    }
    // Without DWARF: a tenth of the size, so vkexit stays small and checking a helper before
    // its use stays cheap. Symbol tables stay, so backtraces and the exit timeline keep names.
    cargo
        .arg("--config")
        .arg(format!("profile.{profile}.debug=false"))
        .arg("--config")
        .arg(format!("profile.{profile}.strip=\"debuginfo\""));
    if workspace.join("Cargo.lock").is_file() {
        cargo.arg("--locked");
    }
    for package in PACKAGES {
        cargo.arg("-p").arg(package);
    }
    // Clippy's driver wraps the outer build's own crates only; the helpers are compiled as
    // they are for a run.
    cargo.env_remove("RUSTC_WORKSPACE_WRAPPER");
    cargo.env_remove("CARGO_TARGET_DIR");
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("cannot start cargo for vkexit's helpers: {e}"));
    if !status.success() {
        panic!(
            "the nested build of vkexit's helpers failed ({status}); run it alone to see why: \
             cargo build --release -p {}",
            PACKAGES.join(" -p ")
        );
    }
    target_dir
        .join(target)
        .join(if release { "release" } else { "debug" })
}

/// `<target>/NAME` beside the outer build's profile directories, so that it outlives one
/// build (OUT_DIR is `<target>/<profile>/build/vkexit-<hash>/out`); else inside OUT_DIR.
fn nested_target_dir(out_dir: &Path, name: &str) -> PathBuf {
    let build = out_dir.ancestors().nth(2);
    match (build, out_dir.ancestors().nth(4)) {
        (Some(b), Some(target)) if b.file_name().is_some_and(|n| n == "build") => target.join(name),
        _ => out_dir.join("helpers-target"),
    }
}

/// The archive: `VKEXIT-HELPERS/1`, one line per file (`name mode size sha256`), an empty
/// line, then the files' bytes in the order of their lines.
fn pack(dir: &Path) -> Vec<u8> {
    let mut index = String::from("VKEXIT-HELPERS/1\n");
    let mut payload = Vec::new();
    for (name, mode) in HELPERS {
        let path = dir.join(name);
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("vkexit's helper {} is missing: {e}", path.display()));
        let hash = sha256_hex(&bytes);
        writeln!(index, "{name} {mode:o} {} {hash}", bytes.len()).expect("a String grows");
        payload.extend_from_slice(&bytes);
    }
    index.push('\n');
    let mut archive = index.into_bytes();
    archive.extend_from_slice(&payload);
    archive
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            write!(s, "{b:02x}").expect("a String grows");
            s
        })
}
