//! `vkexit bundle`: one relocatable tarball with the vkexit executable (which carries its
//! scenarios, refrt, layers and diagnostics), the CI matrices and baselines, and optionally a
//! Vulkan loader and validation layer unpacked from Debian packages, so that a GPU machine
//! without a Rust toolchain (and without Vulkan packages of its own) can run one shard of a
//! matrix.
//!
//! Layout of `vkexit-VERSION-ARCH/`:
//! - `vkexit`: a POSIX shell wrapper that puts the bundle's own loader and layers first when the
//!   bundle carries them, then runs `bin/vkexit`;
//! - `bin/vkexit`: the executable, the same file `cargo install` installs;
//! - `share/<dir>/`: matrices, baselines and whatever `--include` named;
//! - `sysroot/`: the unpacked `.deb` packages, when any were asked for;
//! - `runtimes/`: a copy of a real-runtime cache, when `--runtimes` named one;
//! - `bundle.json`: what is inside and what it needs (target, glibc floor).
//!
//! The executable comes from a cargo build for the bundle's target: this vkexit for the host's
//! own, `target/TRIPLE/release` for `--target TRIPLE` (a cross build, or a build against an
//! older glibc with `cargo zigbuild --target TRIPLE.2.31`; ci/bundles.sh makes both). Every ELF
//! file packed, and every helper the executable carries, is read before the tarball is
//! written: one built for
//! another machine, or one that needs a glibc symbol version newer than the floor (2.31 unless
//! `--glibc-floor` says otherwise), fails the bundle, naming the file, the version and the
//! symbols.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::host::helpers::{self, Archive};
use crate::support::errors::{Error, Result};
use vkexit_elf::{self as elf, GlibcVersion};

/// The Debian packages `--with-vulkan` downloads: the loader and the validation layer.
pub const VULKAN_PACKAGES: [&str; 2] = ["libvulkan1", "vulkan-validationlayers"];

/// The targets a bundle can be made for.
pub const TARGETS: [&str; 2] = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];

/// The oldest glibc a bundle runs on unless `--glibc-floor` names another: Debian 11, Ubuntu
/// 20.04 and the Jetson's L4T 35.
pub const GLIBC_FLOOR: GlibcVersion = GlibcVersion(2, 31);

/// What `vkexit bundle` was asked to pack.
#[derive(Debug, Default)]
pub struct BundleRequest {
    /// The target triple of the binaries to pack (default: this machine's).
    pub target: Option<String>,
    /// Where the binaries for that target were built (default: cargo's directory for it).
    pub from: Option<PathBuf>,
    /// The newest glibc symbol version a packed file may need (default [`GLIBC_FLOOR`]).
    pub glibc_floor: Option<GlibcVersion>,
    /// The tarball to write (`.tar.gz`); its parent directory must exist.
    pub output: Option<PathBuf>,
    /// Download the loader and validation layer with `apt-get download` and carry them.
    pub with_vulkan: bool,
    /// More `.deb` files, or directories of them, to unpack into `sysroot/`.
    pub debs: Vec<PathBuf>,
    /// Directories or files to carry under `share/` (default: `ci/matrix`, `ci/baselines`).
    pub include: Vec<PathBuf>,
    /// A real-runtime cache to carry under `runtimes/`.
    pub runtimes: Option<PathBuf>,
    /// Drop DWARF debug info from the binaries (symbol tables stay, so backtraces keep names).
    pub strip_debug: bool,
}

/// What went into a bundle, as written to `bundle.json`.
#[derive(Debug, Serialize)]
pub struct Manifest {
    pub schema: &'static str,
    pub vkexit_version: &'static str,
    /// The target triple the binaries were built for.
    pub target: String,
    pub arch: String,
    /// The floor every packed file was held to: it runs on this glibc or newer.
    pub glibc_floor: String,
    /// The newest glibc symbol version any packed file needs (at most the floor).
    pub glibc_min: String,
    pub binaries: Vec<String>,
    /// What `bin/vkexit` carries: its scenarios, refrt, preload and layers.
    pub helpers: Vec<String>,
    pub share: Vec<String>,
    pub packages: Vec<Package>,
    pub runtimes: bool,
    pub debug_info: bool,
}

/// A Debian package unpacked into `sysroot/`.
#[derive(Debug, Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub arch: String,
}

/// Where the bundle was written and what is in it.
#[derive(Debug)]
pub struct Built {
    pub tarball: PathBuf,
    pub bytes: u64,
    pub manifest: Manifest,
}

/// `vkexit-0.1.0-x86_64`: the top directory of the tarball for an architecture.
pub fn top_dir_name(arch: &str) -> String {
    format!("vkexit-{}-{arch}", env!("CARGO_PKG_VERSION"))
}

/// This machine's target triple, as cargo names it.
pub fn host_target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// The directory of this vkexit executable.
fn exe_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The target asked for, checked, with its architecture and where its binaries are.
fn resolve_target(options: &BundleRequest) -> Result<(String, String, PathBuf)> {
    let target = options.target.clone().unwrap_or_else(host_target);
    if !TARGETS.contains(&target.as_str()) {
        let hint = match target.split_once(".2.") {
            Some((triple, _)) => format!(
                "; the glibc suffix belongs to cargo zigbuild, give vkexit bundle {triple} (and --glibc-floor)"
            ),
            None => String::new(),
        };
        return Err(Error::bad_flag(
            "--target",
            &target,
            format!("expected one of {}{hint}", TARGETS.join(", ")),
        ));
    }
    let arch = target.split('-').next().unwrap_or_default().to_string();
    let from = match &options.from {
        Some(dir) => dir.clone(),
        None if options.target.is_none() => exe_dir(),
        // cargo puts a `--target` build in target/TRIPLE/release, beside target/release.
        None => exe_dir()
            .parent()
            .map(|t| t.join(&target).join("release"))
            .unwrap_or_default(),
    };
    if !from.join("vkexit").is_file() {
        return Err(Error::bad_flag(
            if options.from.is_some() { "--from" } else { "--target" },
            from.display(),
            format!(
                "no vkexit built for {target} there: build it first (ci/bundles.sh builds both targets), or name the directory with --from"
            ),
        ));
    }
    Ok((target, arch, from))
}

/// Builds the tarball. Nothing is written at `output` unless every part was found and packed.
pub fn build(options: &BundleRequest) -> Result<Built> {
    let (target, arch, from) = resolve_target(options)?;
    let floor = options.glibc_floor.unwrap_or(GLIBC_FLOOR);
    let tarball = options
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.tar.gz", top_dir_name(&arch))));
    let parent = match tarball.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(Error::bad_flag(
            "--output",
            tarball.display(),
            format!("directory {} does not exist", parent.display()),
        ));
    }
    let staging = tempfile::Builder::new()
        .prefix(".vkexit-bundle-")
        .tempdir_in(&parent)
        .map_err(|e| Error::io("cannot create a staging directory in", &parent, e))?;
    let root = staging.path().join(top_dir_name(&arch));

    let strip_with = options.strip_debug.then(|| objcopy_for(&arch));
    let binaries = copy_vkexit(&from, &root.join("bin"), strip_with.as_deref())?;
    let share = copy_includes(&include_list(options)?, &root.join("share"))?;
    let packages = unpack_packages(options, &root.join("sysroot"), staging.path())?;
    if let Some(cache) = &options.runtimes {
        if !cache.is_dir() {
            return Err(Error::bad_flag(
                "--runtimes",
                cache.display(),
                "not a directory",
            ));
        }
        copy_tree(cache, &root.join("runtimes"))?;
    }
    let (glibc_min, helpers) = check_elf_files(&root, &arch, floor)?;
    let manifest = Manifest {
        schema: "vkexit.bundle/1",
        vkexit_version: env!("CARGO_PKG_VERSION"),
        target,
        arch,
        glibc_floor: floor.to_string(),
        glibc_min: glibc_min.map_or_else(|| "none".to_string(), |v| v.to_string()),
        binaries,
        helpers,
        share,
        packages,
        runtimes: options.runtimes.is_some(),
        debug_info: !options.strip_debug,
    };
    write_file(&root.join("vkexit"), WRAPPER.as_bytes(), 0o755)?;
    let json = serde_json::to_string_pretty(&manifest).expect("a manifest always serializes");
    write_file(
        &root.join("bundle.json"),
        format!("{json}\n").as_bytes(),
        0o644,
    )?;
    write_file(
        &root.join("README.txt"),
        readme(&manifest).as_bytes(),
        0o644,
    )?;

    let partial = staging.path().join("bundle.tar.gz");
    write_tarball(&root, &partial)?;
    fs::rename(&partial, &tarball)
        .map_err(|e| Error::io("cannot move the bundle to", &tarball, e))?;
    let bytes = fs::metadata(&tarball).map(|m| m.len()).unwrap_or(0);
    Ok(Built {
        tarball,
        bytes,
        manifest,
    })
}

/// Copies vkexit, the one file that carries every helper, into `to`.
fn copy_vkexit(from: &Path, to: &Path, strip_with: Option<&str>) -> Result<Vec<String>> {
    let path = from.join("vkexit");
    fs::create_dir_all(to).map_err(|e| Error::io("cannot create", to, e))?;
    let dest = to.join("vkexit");
    match strip_with {
        Some(objcopy) => strip(objcopy, &path, &dest)?,
        None => {
            fs::copy(&path, &dest).map_err(|e| Error::io("cannot copy", &path, e))?;
        }
    }
    Ok(vec!["vkexit".to_string()])
}

/// The objcopy that reads `arch`'s files: this machine's own, or the cross binutils'.
fn objcopy_for(arch: &str) -> String {
    if arch == std::env::consts::ARCH {
        "objcopy".to_string()
    } else {
        format!("{arch}-linux-gnu-objcopy")
    }
}

fn strip(objcopy: &str, from: &Path, to: &Path) -> Result<()> {
    let output = Command::new(objcopy)
        .arg("--strip-debug")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| {
            let package = match objcopy.strip_suffix("-objcopy") {
                Some(prefix) => format!("binutils-{prefix}"),
                None => "binutils".to_string(),
            };
            Error::tool(
                format!("--strip-debug needs {objcopy} (apt-get install {package})"),
                e,
            )
        })?;
    if !output.status.success() {
        return Err(Error::tool(
            format!("{objcopy} --strip-debug {} failed", from.display()),
            String::from_utf8_lossy(&output.stderr).trim(),
        ));
    }
    Ok(())
}

/// `--include` as given, or the CI files of the source tree vkexit runs from.
fn include_list(options: &BundleRequest) -> Result<Vec<PathBuf>> {
    if !options.include.is_empty() {
        for path in &options.include {
            if !path.exists() {
                return Err(Error::bad_flag(
                    "--include",
                    path.display(),
                    "no such file or directory",
                ));
            }
        }
        return Ok(options.include.clone());
    }
    Ok(["ci/matrix", "ci/baselines"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect())
}

fn copy_includes(paths: &[PathBuf], share: &Path) -> Result<Vec<String>> {
    fs::create_dir_all(share).map_err(|e| Error::io("cannot create", share, e))?;
    let mut names = Vec::new();
    for path in paths {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::bad_flag("--include", path.display(), "no file name"))?;
        let dest = share.join(name);
        if dest.exists() {
            return Err(Error::bad_flag(
                "--include",
                path.display(),
                format!("share/{name} is already taken by another --include"),
            ));
        }
        copy_tree(path, &dest)?;
        names.push(name.to_string());
    }
    Ok(names)
}

/// Copies a file, or a directory with everything in it. A symbolic link is copied as the link
/// (a library's `libx.so -> libx.so.0` would otherwise be carried twice).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(from).map_err(|e| Error::io("cannot read", from, e))?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(from).map_err(|e| Error::io("cannot read the link", from, e))?;
        return std::os::unix::fs::symlink(&target, to)
            .map_err(|e| Error::io("cannot create the link", to, e));
    }
    if meta.is_dir() {
        fs::create_dir_all(to).map_err(|e| Error::io("cannot create", to, e))?;
        let entries = fs::read_dir(from).map_err(|e| Error::io("cannot list", from, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("cannot list", from, e))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        fs::copy(from, to)
            .map(drop)
            .map_err(|e| Error::io("cannot copy", from, e))
    }
}

/// Downloads (`--with-vulkan`) and collects (`--deb`) packages, then unpacks each into `sysroot`.
fn unpack_packages(
    options: &BundleRequest,
    sysroot: &Path,
    scratch: &Path,
) -> Result<Vec<Package>> {
    let mut debs = Vec::new();
    if options.with_vulkan {
        debs.extend(download(&VULKAN_PACKAGES, &scratch.join("downloads"))?);
    }
    for path in &options.debs {
        debs.extend(debs_at(path)?);
    }
    let mut packages = Vec::new();
    for deb in debs {
        let fields = dpkg_deb(
            &[
                "-f".as_ref(),
                deb.as_os_str(),
                "Package".as_ref(),
                "Version".as_ref(),
                "Architecture".as_ref(),
            ],
            &deb,
        )?;
        let field = |key: &str| {
            fields
                .lines()
                .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(": ")))
                .unwrap_or("")
                .to_string()
        };
        dpkg_deb(&["-x".as_ref(), deb.as_os_str(), sysroot.as_os_str()], &deb)?;
        packages.push(Package {
            name: field("Package"),
            version: field("Version"),
            arch: field("Architecture"),
        });
    }
    Ok(packages)
}

fn debs_at(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = fs::read_dir(path).map_err(|e| Error::io("--deb: cannot read", path, e))?;
    let mut debs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    if debs.is_empty() {
        return Err(Error::bad_flag(
            "--deb",
            path.display(),
            "no .deb file in this directory",
        ));
    }
    debs.sort();
    Ok(debs)
}

fn download(packages: &[&str], dir: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let output = Command::new("apt-get")
        .arg("download")
        .args(packages)
        .current_dir(dir)
        .output()
        .map_err(|e| {
            Error::tool(
                "--with-vulkan needs apt-get (Debian or Ubuntu), or pass the packages with --deb",
                e,
            )
        })?;
    if !output.status.success() {
        return Err(Error::tool(
            format!("apt-get download {} failed", packages.join(" ")),
            format!(
                "{}\n  download them elsewhere and pass them with --deb",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    debs_at(dir)
}

fn dpkg_deb(args: &[&std::ffi::OsStr], deb: &Path) -> Result<String> {
    let output = Command::new("dpkg-deb").args(args).output().map_err(|e| {
        Error::tool(
            format!("unpacking {} needs dpkg-deb (Debian's dpkg)", deb.display()),
            e,
        )
    })?;
    if !output.status.success() {
        return Err(Error::tool(
            format!(
                "{} is not a Debian package dpkg-deb can read",
                deb.display()
            ),
            String::from_utf8_lossy(&output.stderr).trim(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut file = fs::File::create(path).map_err(|e| Error::io("cannot write", path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.set_permissions(fs::Permissions::from_mode(mode)))
        .map_err(|e| Error::io("cannot write", path, e))
}

/// gzip'd tar of `root` under its own name, files in a stable order.
fn write_tarball(root: &Path, to: &Path) -> Result<()> {
    let file = fs::File::create(to).map_err(|e| Error::io("cannot write", to, e))?;
    let gz = flate2::write::GzEncoder::new(io::BufWriter::new(file), flate2::Compression::new(6));
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    let name = root.file_name().expect("the staging root has a name");
    let packed = tar
        .append_dir_all(name, root)
        .and_then(|()| tar.into_inner())
        .and_then(|gz| gz.finish())
        .and_then(|mut w| w.flush());
    packed.map_err(|e| Error::io("cannot write the bundle", to, e))
}

/// Reads every ELF file under `root`: each must be built for `arch` and need no glibc
/// symbol version newer than `floor`, and so must every helper `bin/vkexit` carries. Returns the
/// newest version any of them needs, and the names of the helpers.
fn check_elf_files(
    root: &Path,
    arch: &str,
    floor: GlibcVersion,
) -> Result<(Option<GlibcVersion>, Vec<String>)> {
    let machine = elf::machine_of(arch).expect("resolve_target admits only known architectures");
    let mut files = Vec::new();
    elf_files(root, &mut files)?;
    files.sort();
    let mut newest = None;
    let mut too_new = Vec::new();
    let mut carried = Vec::new();
    for path in &files {
        let shown = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let bytes = fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
        let section = elf::section_named(&bytes, helpers::SECTION)
            .map_err(|e| Error::bad_input(path, e.to_string()))?;
        let mut inside = Vec::new();
        if let Some(section) = section {
            let archive = Archive::parse(section)
                .map_err(|e| Error::bad_input(path, format!("its helpers: {e}")))?;
            if shown == "bin/vkexit" {
                carried = archive.helpers.iter().map(|h| h.name.to_string()).collect();
            }
            inside.extend(
                archive
                    .helpers
                    .iter()
                    .map(|h| (format!("{shown} (carried {})", h.name), h.bytes.to_vec())),
            );
        }
        for (shown, bytes) in std::iter::once((shown, bytes)).chain(inside) {
            check_elf(
                &shown,
                &bytes,
                path,
                machine,
                arch,
                floor,
                &mut newest,
                &mut too_new,
            )?;
        }
    }
    if carried.is_empty() {
        return Err(Error::bad_input(
            root.join("bin/vkexit"),
            "carries no helpers: build it with its build script (cargo build --release)",
        ));
    }
    if too_new.is_empty() {
        return Ok((newest, carried));
    }
    Err(Error::tool(
        format!("the bundle would not start on glibc {floor}"),
        format!(
            "{}\n  build against glibc {floor} (ci/bundles.sh uses cargo zigbuild --target TRIPLE.{floor}), \
             or state the newer floor with --glibc-floor",
            too_new.join("\n  ")
        ),
    ))
}

/// One ELF file's machine and glibc needs, held to the bundle's; `shown` names it.
#[allow(clippy::too_many_arguments)]
fn check_elf(
    shown: &str,
    bytes: &[u8],
    path: &Path,
    machine: u16,
    arch: &str,
    floor: GlibcVersion,
    newest: &mut Option<GlibcVersion>,
    too_new: &mut Vec<String>,
) -> Result<()> {
    let needs = elf::read(bytes).map_err(|e| Error::bad_input(path, format!("{shown}: {e}")))?;
    if needs.machine != machine {
        return Err(Error::bad_input(
            path,
            format!(
                "{shown} is built for {}, not for the bundle's {arch}",
                elf::machine_name(needs.machine)
            ),
        ));
    }
    for need in &needs.needs {
        let Some(version) = GlibcVersion::parse(&need.version) else {
            continue;
        };
        if !need.version.starts_with("GLIBC_") {
            continue;
        }
        *newest = (*newest).max(Some(version));
        if version > floor {
            let symbols = match need.symbols.len() {
                0 => String::new(),
                n if n <= 4 => format!(" for {}", need.symbols.join(", ")),
                n => format!(" for {} and {} more", need.symbols[..4].join(", "), n - 4),
            };
            too_new.push(format!(
                "{shown} needs {} ({}){symbols}",
                need.version, need.library
            ));
        }
    }
    Ok(())
}

/// Every regular file under `dir` that starts with the ELF magic (links are not followed:
/// their targets are packed, and read, under their own names).
fn elf_files(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("cannot list", dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::io("cannot list", dir, e))?.path();
        let meta = fs::symlink_metadata(&path).map_err(|e| Error::io("cannot read", &path, e))?;
        if meta.is_dir() {
            elf_files(&path, found)?;
        } else if meta.is_file() {
            let mut magic = [0u8; 4];
            let elf = fs::File::open(&path)
                .and_then(|mut f| f.read_exact(&mut magic))
                .map(|()| magic == *b"\x7fELF")
                .unwrap_or(false);
            if elf {
                found.push(path);
            }
        }
    }
    Ok(())
}

/// The bundle's entry point. `bin/vkexit` finds its scenarios and layers beside itself; this
/// only adds the carried loader and validation layer in front of the machine's own, and the
/// carried runtime cache.
const WRAPPER: &str = r#"#!/bin/sh
# vkexit, from a bundle: runs bin/vkexit with the Vulkan loader and layers this bundle
# carries (sysroot/) in front of the machine's own, and its runtime cache (runtimes/).
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || exit 2
sysroot="$here/sysroot"
if [ -d "$sysroot" ]; then
    for lib in "$sysroot"/usr/lib "$sysroot"/usr/lib/*-linux-gnu "$sysroot"/lib/*-linux-gnu; do
        [ -d "$lib" ] && LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    export LD_LIBRARY_PATH
    if [ -d "$sysroot/usr/share/vulkan/explicit_layer.d" ]; then
        VK_LAYER_PATH="$sysroot/usr/share/vulkan/explicit_layer.d${VK_LAYER_PATH:+:$VK_LAYER_PATH}"
        export VK_LAYER_PATH
    fi
fi
if [ -d "$here/runtimes" ] && [ -z "${VKEXIT_RUNTIME_CACHE:-}" ]; then
    VKEXIT_RUNTIME_CACHE="$here/runtimes"
    export VKEXIT_RUNTIME_CACHE
fi
exec "$here/bin/vkexit" "$@"
"#;

fn readme(manifest: &Manifest) -> String {
    let packages = if manifest.packages.is_empty() {
        "none: the machine's own Vulkan loader and validation layer are used".to_string()
    } else {
        manifest
            .packages
            .iter()
            .map(|p| format!("{} {} ({})", p.name, p.version, p.arch))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "vkexit {version} for {target}, glibc {glibc} or newer; no Rust toolchain needed.\n\
         \n\
         Run it through the wrapper, from anywhere:\n\
         \n\
         \x20   ./vkexit doctor\n\
         \x20   ./vkexit run --config share/matrix/default.toml --shard 1/2 --json shard-1.json\n\
         \x20   ./vkexit run --driver /usr/share/vulkan/icd.d/nvidia_icd.json --json nvidia.json\n\
         \n\
         Carried Debian packages (in sysroot/, put first by the wrapper): {packages}.\n\
         What is inside: bundle.json.\n",
        version = manifest.vkexit_version,
        target = manifest.target,
        glibc = manifest.glibc_floor,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_copied_as_links() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("cache");
        fs::create_dir(&from).unwrap();
        fs::write(from.join("libx.so.0"), b"library").unwrap();
        std::os::unix::fs::symlink("libx.so.0", from.join("libx.so")).unwrap();
        let to = dir.path().join("copy");
        copy_tree(&from, &to).unwrap();
        assert_eq!(fs::read(to.join("libx.so.0")).unwrap(), b"library");
        assert_eq!(
            fs::read_link(to.join("libx.so")).unwrap(),
            Path::new("libx.so.0")
        );
    }

    #[test]
    fn the_top_directory_names_version_and_architecture() {
        let name = top_dir_name("aarch64");
        assert!(name.starts_with("vkexit-"));
        assert!(name.ends_with("-aarch64"));
    }
}
