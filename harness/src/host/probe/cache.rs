//! Driver probes kept across vkexit processes, one file per driver manifest in the user's
//! cache (`${XDG_CACHE_HOME:-~/.cache}/vkexit/probes/`). A probe creates a Vulkan instance in
//! a child process (20 ms and more); `vkexit exec` under `ctest -j` starts hundreds of vkexits.
//!
//! A kept report is used only while everything it was made from is unchanged: vkexit itself,
//! the manifest, a driver library named by path, the dynamic linker's cache, every file the
//! probe process had mapped (the loader, the driver and what they load), the device nodes,
//! and the variables that steer a loader or driver. Each file is known by its path, size,
//! modification and change times, inode and device; the manifest by its text too. Anything unreadable, corrupt or different
//! is a miss: the driver is probed again and the file replaced atomically, so that vkexits
//! running at once read either the old report or the new one.

use super::ProbeReport;
use crate::host::drivers::Driver;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The layout of a cache file; another layout is a miss.
const FORMAT: u32 = 1;

/// Variables that can change which devices a driver shows, by prefix.
const STEERING_PREFIXES: [&str; 14] = [
    "VK_", "MESA_", "LP_", "GALLIUM_", "RADV_", "ACO_", "ANV_", "INTEL_", "NV_", "__NV", "__GL_",
    "DRI_", "LIBGL_", "CUDA_",
];
/// Variables that can change which libraries the probe loads.
const LINKER_VARIABLES: [&str; 2] = ["LD_LIBRARY_PATH", "LD_PRELOAD"];

/// A file as it is now: a different one, or the same one changed, compares unequal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileId {
    path: PathBuf,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
    dev: u64,
}

impl FileId {
    fn of(path: &Path) -> Option<FileId> {
        let m = std::fs::metadata(path).ok()?;
        Some(FileId {
            path: path.to_path_buf(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
        })
    }
}

/// What a probe's report depends on that can be known before probing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Key {
    format: u32,
    vkexit: Option<FileId>,
    manifest: FileId,
    /// The manifest's text, hashed: a rewrite within one tick of the file system's clock
    /// that keeps its size is still seen.
    manifest_text: u64,
    /// The driver library, when the manifest names it by path.
    library: Option<FileId>,
    ld_cache: Option<FileId>,
    /// The device nodes a driver opens, with their device numbers.
    devices: Vec<(String, u64)>,
    env: Vec<(String, String)>,
}

/// One cache file.
#[derive(Serialize, Deserialize)]
struct Entry {
    key: Key,
    /// Every file the probe process had mapped, as it was then.
    libraries: Vec<FileId>,
    report: ProbeReport,
}

/// The cache file of one driver, and what its report must have been made from.
pub(super) struct Cache {
    file: PathBuf,
    key: Key,
}

impl Cache {
    /// `None` when there is no cache directory or the manifest cannot be read.
    pub(super) fn for_driver(driver: &Driver) -> Option<Cache> {
        Cache::in_dir(&cache_dir()?, driver)
    }

    fn in_dir(dir: &Path, driver: &Driver) -> Option<Cache> {
        let manifest = FileId::of(&driver.manifest)?;
        let mut text = std::hash::DefaultHasher::new();
        std::fs::read(&driver.manifest).ok()?.hash(&mut text);
        let named = Path::new(&driver.library);
        let library = match driver.library.contains('/') {
            true => driver
                .manifest
                .parent()
                .and_then(|d| FileId::of(&d.join(named))),
            false => None,
        };
        let key = Key {
            format: FORMAT,
            vkexit: std::env::current_exe().ok().and_then(|e| FileId::of(&e)),
            manifest,
            manifest_text: text.finish(),
            library,
            ld_cache: FileId::of(Path::new("/etc/ld.so.cache")),
            devices: device_nodes(),
            env: steering_env(std::env::vars_os()),
        };
        let mut hash = std::hash::DefaultHasher::new();
        driver.manifest.hash(&mut hash);
        let file = dir.join(format!("{:016x}.json", hash.finish()));
        Some(Cache { file, key })
    }

    /// The kept report, when it was made from what is here now.
    pub(super) fn load(&self) -> Option<ProbeReport> {
        let bytes = std::fs::read(&self.file).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        let same = entry.key == self.key
            && entry
                .libraries
                .iter()
                .all(|l| FileId::of(&l.path).as_ref() == Some(l));
        same.then_some(entry.report)
    }

    /// Keeps `report` for the next vkexit; a report whose files cannot all be known, or a
    /// cache that cannot be written, is simply not kept.
    pub(super) fn store(&self, report: &ProbeReport) {
        let libraries: Option<Vec<FileId>> =
            report.libraries.iter().map(|l| FileId::of(l)).collect();
        let Some(libraries) = libraries else { return };
        let entry = Entry {
            key: self.key.clone(),
            libraries,
            report: report.clone(),
        };
        let Ok(text) = serde_json::to_vec(&entry) else {
            return;
        };
        let Some(dir) = self.file.parent() else {
            return;
        };
        use std::os::unix::fs::DirBuilderExt;
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        if made.is_ok() {
            let _ = crate::support::output::write_atomically(&self.file, &text);
        }
    }
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/vkexit/probes`; `None` when neither is set.
fn cache_dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let base = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("vkexit/probes"))
}

/// The device nodes GPU drivers open (`/dev/dri/*`, NVIDIA's, AMD's compute node, WSL's),
/// sorted, with their device numbers: a GPU that appears or goes changes the key.
fn device_nodes() -> Vec<(String, u64)> {
    let mut nodes = Vec::new();
    let mut add = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if keep(&name) {
                let rdev = e.metadata().map(|m| m.rdev()).unwrap_or(0);
                nodes.push((dir.join(&name).display().to_string(), rdev));
            }
        }
    };
    add(Path::new("/dev/dri"), &|_| true);
    add(Path::new("/dev"), &|n| {
        n.starts_with("nvidia") || n == "kfd" || n == "dxg"
    });
    nodes.sort();
    nodes
}

/// The variables of `vars` that steer a loader, a driver or the dynamic linker, sorted.
fn steering_env(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vars
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .filter(|(k, _)| {
            STEERING_PREFIXES.iter().any(|p| k.starts_with(p))
                || LINKER_VARIABLES.contains(&k.as_str())
        })
        .collect();
    env.sort();
    env
}

/// The files this process has mapped (from `/proc/self/maps`), each once, in the order they
/// first appear.
pub(super) fn mapped_files() -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path: the path is the sixth field, may hold spaces.
        let Some(path) = line.splitn(6, ' ').nth(5).map(str::trim_start) else {
            continue;
        };
        if path.starts_with('/') && !path.ends_with(" (deleted)") {
            let path = PathBuf::from(path);
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ProbeReport {
        ProbeReport {
            loader_version: "1.3.239".into(),
            devices: Vec::new(),
            libraries: vec![std::env::current_exe().unwrap()],
        }
    }

    fn driver(manifest: &Path) -> Driver {
        crate::host::drivers::read_manifest(manifest).unwrap()
    }

    #[test]
    fn a_kept_probe_is_used_until_the_manifest_changes() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("x_icd.json");
        std::fs::write(&manifest, r#"{"ICD":{"library_path":"libx.so"}}"#).unwrap();
        let cache = Cache::in_dir(&dir.path().join("probes"), &driver(&manifest)).unwrap();
        assert!(cache.load().is_none());
        cache.store(&report());
        assert_eq!(cache.load().unwrap().loader_version, "1.3.239");
        std::fs::write(&manifest, r#"{"ICD":{"library_path":"liby.so"}}"#).unwrap();
        let again = Cache::in_dir(&dir.path().join("probes"), &driver(&manifest)).unwrap();
        assert!(again.load().is_none(), "a changed manifest is probed again");
    }

    #[test]
    fn a_changed_library_or_a_corrupt_file_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("x_icd.json");
        std::fs::write(&manifest, r#"{"ICD":{"library_path":"libx.so"}}"#).unwrap();
        let cache = Cache::in_dir(&dir.path().join("probes"), &driver(&manifest)).unwrap();
        let library = dir.path().join("libdep.so");
        std::fs::write(&library, b"one").unwrap();
        let mut with_library = report();
        with_library.libraries.push(library.clone());
        cache.store(&with_library);
        assert!(cache.load().is_some());
        std::fs::write(&library, b"three").unwrap();
        assert!(cache.load().is_none(), "a changed library is probed again");
        cache.store(&with_library);
        std::fs::write(&cache.file, b"{\"key\": tru").unwrap();
        assert!(cache.load().is_none(), "a corrupt file is ignored");
    }

    #[test]
    fn only_steering_variables_are_part_of_the_key() {
        let vars = [
            ("VK_LOADER_DEBUG", "all"),
            ("PATH", "/bin"),
            ("LP_NUM_THREADS", "2"),
        ];
        let env = steering_env(vars.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        assert_eq!(
            env,
            [
                ("LP_NUM_THREADS".to_string(), "2".to_string()),
                ("VK_LOADER_DEBUG".into(), "all".into())
            ]
        );
    }

    #[test]
    fn mapped_files_include_this_program() {
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        assert!(mapped_files().contains(&exe));
    }
}
