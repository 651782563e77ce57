//! Vulkan drivers: found the way the loader finds them, from ICD manifests,
//! and named by a short stable name (`lavapipe`, `radv`, `nvidia`, …).

use crate::support::errors::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One Vulkan driver, as its ICD manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Driver {
    /// The short stable name (`lavapipe`, `radv`, …) a matrix's `drivers` and `--driver` use.
    pub(crate) name: String,
    /// The ICD manifest (`*_icd.json`) it was read from.
    pub(crate) manifest: PathBuf,
    /// The manifest's `ICD.library_path`, as written there (a file name or a path).
    pub library: String,
}

/// The manifest directories the loader reads, in its order, when neither
/// `VK_DRIVER_FILES` nor `VK_ICD_FILENAMES` is set.
pub(crate) fn icd_search_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let env_dirs = |var: &str, default: &str| -> Vec<PathBuf> {
        let value = std::env::var(var).unwrap_or_default();
        let value = if value.is_empty() {
            default.to_string()
        } else {
            value
        };
        value
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect()
    };
    let mut dirs = Vec::new();
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(d) => dirs.push(PathBuf::from(d)),
        None => dirs.extend(home.as_ref().map(|h| h.join(".config"))),
    }
    dirs.extend(env_dirs("XDG_CONFIG_DIRS", "/etc/xdg"));
    dirs.push(PathBuf::from("/etc"));
    match std::env::var_os("XDG_DATA_HOME") {
        Some(d) => dirs.push(PathBuf::from(d)),
        None => dirs.extend(home.as_ref().map(|h| h.join(".local/share"))),
    }
    dirs.extend(env_dirs("XDG_DATA_DIRS", "/usr/local/share:/usr/share"));
    dirs.into_iter().map(|d| d.join("vulkan/icd.d")).collect()
}

/// Every driver the loader would see, as (manifest, problem) pairs for the
/// manifests that could not be read.
pub(crate) fn discover() -> (Vec<Driver>, Vec<(PathBuf, ManifestError)>) {
    let explicit = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    let manifests: Vec<PathBuf> = match explicit {
        Some(list) => list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect(),
        None => icd_search_dirs()
            .iter()
            .flat_map(|d| json_files(d))
            .collect(),
    };
    let mut drivers = Vec::new();
    let mut problems = Vec::new();
    for manifest in manifests {
        match read_manifest(&manifest) {
            Ok(d) if !drivers.iter().any(|x: &Driver| x.manifest == d.manifest) => drivers.push(d),
            Ok(_) => {}
            Err(e) => problems.push((manifest, e)),
        }
    }
    (drivers, problems)
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// What is wrong with an ICD manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// It cannot be read.
    #[error("{0}")]
    Unreadable(#[source] std::io::Error),
    /// It is not JSON: where the parser stopped.
    #[error("not JSON (line {line}, column {column}): {0}", line = .0.line(), column = .0.column())]
    NotJson(#[source] serde_json::Error),
    /// It names no driver library.
    #[error("no ICD.library_path string")]
    NoLibrary,
}

/// Reads one ICD manifest; the error says what is wrong with it.
pub fn read_manifest(path: &Path) -> std::result::Result<Driver, ManifestError> {
    // Bytes, not a string: a manifest that is not UTF-8 is not JSON either,
    // and the JSON error says where.
    let bytes = std::fs::read(path).map_err(ManifestError::Unreadable)?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(ManifestError::NotJson)?;
    let library = json
        .pointer("/ICD/library_path")
        .and_then(|v| v.as_str())
        .ok_or(ManifestError::NoLibrary)?
        .to_string();
    Ok(Driver {
        name: short_name(&library),
        manifest: path.to_path_buf(),
        library,
    })
}

/// The short stable name of a driver, from its library's file name.
pub(crate) fn short_name(library: &str) -> String {
    let file = Path::new(library)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.split(".so").next().unwrap_or(&file);
    let stem = stem.strip_prefix("lib").unwrap_or(stem);
    let known = [
        ("vulkan_lvp", "lavapipe"),
        ("vulkan_radeon", "radv"),
        ("vulkan_intel_hasvk", "hasvk"),
        ("vulkan_intel", "anv"),
        ("GLX_nvidia", "nvidia"),
        ("nvidia", "nvidia"),
        ("vulkan_freedreno", "turnip"),
        ("vulkan_broadcom", "v3dv"),
        ("vulkan_panfrost", "panvk"),
        ("vulkan_virtio", "venus"),
        ("vulkan_asahi", "honeykrisp"),
        ("vulkan_nouveau", "nvk"),
        ("vulkan_powervr_mesa", "powervr"),
        ("vulkan_gfxstream", "gfxstream"),
        ("amdvlk", "amdvlk"),
        ("vulkan_dzn", "dozen"),
    ];
    for (prefix, name) in known {
        if stem.starts_with(prefix) {
            return name.to_string();
        }
    }
    stem.to_string()
}

/// Picks drivers by short name or manifest path; an unknown name is an error
/// that lists the drivers found.
pub(crate) fn select(all: &[Driver], wanted: &[String]) -> Result<Vec<Driver>> {
    let mut chosen: Vec<Driver> = Vec::new();
    for want in wanted {
        let as_path = Path::new(want);
        let found: Vec<Driver> = if want.ends_with(".json") || as_path.is_absolute() {
            let d = read_manifest(as_path).map_err(|e| Error::UnknownDriver {
                wanted: format!("{want} ({e})"),
                found: names(all),
            })?;
            vec![d]
        } else {
            all.iter().filter(|d| &d.name == want).cloned().collect()
        };
        if found.is_empty() {
            return Err(Error::UnknownDriver {
                wanted: want.clone(),
                found: names(all),
            });
        }
        for d in found {
            if !chosen.iter().any(|c| c.manifest == d.manifest) {
                chosen.push(d);
            }
        }
    }
    Ok(chosen)
}

/// The loader that first reads `VK_LOADER_DRIVERS_SELECT` and `VK_ADD_DRIVER_FILES`.
pub(crate) const LOADER_SELECT_SINCE: [u32; 3] = [1, 3, 234];

/// Every variable through which a loader (or a program) can be told which drivers to use:
/// a run gets the ones its [`DriverSelection`] sets, and none of the caller's.
pub(crate) const SELECTION_VARIABLES: [&str; 5] = [
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "VK_ADD_DRIVER_FILES",
    "VK_LOADER_DRIVERS_SELECT",
    "VK_LOADER_DRIVERS_DISABLE",
];

/// How a run's driver is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverSelection {
    /// `VK_LOADER_DRIVERS_SELECT` names a copy of the manifest that `VK_ADD_DRIVER_FILES`
    /// adds. Only a loader reads these, so a program that opens drivers itself when told of
    /// one (ncnn reads `VK_ICD_FILENAMES`) stays on the loader, and under its layers.
    LoaderSelect,
    /// `VK_DRIVER_FILES` and `VK_ICD_FILENAMES`: the only way for a loader before 1.3.234.
    DriverFiles,
}

impl DriverSelection {
    /// The selection for a loader of `version` ("1.3.239"); an unknown version gets the
    /// loader's own selection, which every current loader reads.
    pub(crate) fn for_loader(version: Option<&str>) -> DriverSelection {
        match version.and_then(parse_version) {
            Some(v) if v < LOADER_SELECT_SINCE => DriverSelection::DriverFiles,
            _ => DriverSelection::LoaderSelect,
        }
    }

    /// What the provenance says of it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            DriverSelection::LoaderSelect => "VK_LOADER_DRIVERS_SELECT + VK_ADD_DRIVER_FILES",
            DriverSelection::DriverFiles => {
                "VK_DRIVER_FILES + VK_ICD_FILENAMES (the loader predates VK_LOADER_DRIVERS_SELECT, 1.3.234; a program that reads them may open the driver itself)"
            }
        }
    }
}

/// "1.3.239" → [1, 3, 239].
pub(crate) fn parse_version(text: &str) -> Option<[u32; 3]> {
    let mut parts = text.trim().split('.').map(|p| p.parse::<u32>().ok());
    let version = [parts.next()??, parts.next()??, parts.next()??];
    parts.next().is_none().then_some(version)
}

/// The file name of `driver`'s manifest copy: unique to its manifest path, free of glob
/// characters, since `VK_LOADER_DRIVERS_SELECT` is a glob over manifest *file names* and two
/// installed manifests may share one (`nvidia_icd.json` in /usr/share and in /etc).
pub(crate) fn selected_manifest_name(driver: &Driver) -> String {
    let name: String = driver
        .name
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect();
    // FNV-1a: stable across builds and machines, unlike std's hasher.
    let hash = driver
        .manifest
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("vkexit-driver-{name}-{hash:016x}.json")
}

/// Writes the copy of `driver`'s manifest that [`DriverSelection::LoaderSelect`] names, into
/// `dir`, and returns its path. A relative `library_path` is made absolute: the loader takes
/// it relative to the manifest, and the copy lives elsewhere.
pub(crate) fn write_selected_manifest(driver: &Driver, dir: &Path) -> std::io::Result<PathBuf> {
    let invalid = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {why}", driver.manifest.display()),
        )
    };
    let bytes = std::fs::read(&driver.manifest)?;
    let mut json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    let library = json
        .pointer_mut("/ICD/library_path")
        .ok_or_else(|| invalid("no ICD.library_path".into()))?;
    if let Some(path) = library.as_str().map(Path::new) {
        if path.is_relative() && path.components().count() > 1 {
            let base = driver.manifest.parent().unwrap_or(Path::new("/"));
            *library = base.join(path).display().to_string().into();
        }
    }
    std::fs::create_dir_all(dir)?;
    let copy = dir.join(selected_manifest_name(driver));
    let text = serde_json::to_string_pretty(&json).expect("a manifest serialises");
    std::fs::write(&copy, text + "\n")?;
    Ok(copy)
}

/// The variables that choose `driver` for a run. `copies` is where
/// [`write_selected_manifest`] put the copy.
pub(crate) fn selection_env(
    driver: &Driver,
    selection: DriverSelection,
    copies: &Path,
) -> Vec<(String, String)> {
    match selection {
        DriverSelection::LoaderSelect => vec![
            (
                "VK_ADD_DRIVER_FILES".into(),
                copies
                    .join(selected_manifest_name(driver))
                    .display()
                    .to_string(),
            ),
            (
                "VK_LOADER_DRIVERS_SELECT".into(),
                selected_manifest_name(driver),
            ),
        ],
        DriverSelection::DriverFiles => ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"]
            .iter()
            .map(|k| (k.to_string(), driver.manifest.display().to_string()))
            .collect(),
    }
}

fn names(all: &[Driver]) -> String {
    if all.is_empty() {
        return "none (install one: apt-get install mesa-vulkan-drivers)".into();
    }
    all.iter()
        .map(|d| format!("{} ({})", d.name, d.manifest.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_of_common_drivers() {
        assert_eq!(
            short_name("/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"),
            "lavapipe"
        );
        assert_eq!(short_name("libvulkan_radeon.so"), "radv");
        assert_eq!(short_name("libvulkan_intel.so"), "anv");
        assert_eq!(short_name("libvulkan_intel_hasvk.so"), "hasvk");
        assert_eq!(short_name("libGLX_nvidia.so.0"), "nvidia");
        assert_eq!(short_name("libnvidia-vulkan-producer.so"), "nvidia");
        assert_eq!(short_name("libsomething_new.so.1"), "something_new");
    }

    #[test]
    fn a_manifest_that_is_not_json_names_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, "{\n  \"ICD\": { library_path: 1 }\n}").unwrap();
        let err = read_manifest(&path).unwrap_err().to_string();
        assert!(err.contains("not JSON (line 2, column"), "{err}");
        std::fs::write(&path, r#"{"ICD": {}}"#).unwrap();
        assert!(read_manifest(&path)
            .unwrap_err()
            .to_string()
            .contains("library_path"));
    }

    fn driver(manifest: &str) -> Driver {
        Driver {
            name: "lavapipe".into(),
            manifest: manifest.into(),
            library: "libvulkan_lvp.so".into(),
        }
    }

    #[test]
    fn loaders_from_1_3_234_select_through_the_loader_and_older_ones_by_files() {
        assert_eq!(
            DriverSelection::for_loader(Some("1.3.239")),
            DriverSelection::LoaderSelect
        );
        assert_eq!(
            DriverSelection::for_loader(Some("1.3.234")),
            DriverSelection::LoaderSelect
        );
        assert_eq!(
            DriverSelection::for_loader(Some("1.4.313")),
            DriverSelection::LoaderSelect
        );
        assert_eq!(
            DriverSelection::for_loader(Some("1.3.233")),
            DriverSelection::DriverFiles
        );
        assert_eq!(
            DriverSelection::for_loader(Some("1.2.198")),
            DriverSelection::DriverFiles
        );
        assert_eq!(
            DriverSelection::for_loader(None),
            DriverSelection::LoaderSelect
        );
        assert_eq!(parse_version("1.3"), None);
        assert_eq!(parse_version("1.3.239.0"), None);
        let env = selection_env(
            &driver("/m/lvp.json"),
            DriverSelection::DriverFiles,
            Path::new("/c"),
        );
        assert_eq!(
            env,
            [
                ("VK_DRIVER_FILES".to_string(), "/m/lvp.json".to_string()),
                ("VK_ICD_FILENAMES".to_string(), "/m/lvp.json".to_string())
            ]
        );
    }

    #[test]
    fn manifests_with_one_file_name_in_two_directories_get_copies_of_their_own() {
        let (a, b) = (
            driver("/usr/share/vulkan/icd.d/x_icd.json"),
            driver("/etc/vulkan/icd.d/x_icd.json"),
        );
        assert_ne!(selected_manifest_name(&a), selected_manifest_name(&b));
        assert_eq!(
            selected_manifest_name(&a),
            selected_manifest_name(&a.clone())
        );
        assert!(!selected_manifest_name(&a).contains(['*', '?', '[', '/']));
        let env = selection_env(&a, DriverSelection::LoaderSelect, Path::new("/c"));
        let copy = format!("/c/{}", selected_manifest_name(&a));
        assert_eq!(env[0], ("VK_ADD_DRIVER_FILES".to_string(), copy));
        assert_eq!(
            env[1],
            (
                "VK_LOADER_DRIVERS_SELECT".to_string(),
                selected_manifest_name(&a)
            )
        );
    }

    #[test]
    fn a_copy_takes_a_relative_library_path_from_the_original_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("icd.d/my_icd.json");
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        std::fs::write(&manifest, r#"{"file_format_version": "1.0.0", "ICD": {"library_path": "../lib/libmy.so", "api_version": "1.3.0"}}"#).unwrap();
        let copy = write_selected_manifest(
            &driver(manifest.to_str().unwrap()),
            &dir.path().join("copies"),
        )
        .unwrap();
        let read = read_manifest(&copy).unwrap();
        assert_eq!(
            read.library,
            dir.path()
                .join("icd.d/../lib/libmy.so")
                .display()
                .to_string()
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&copy).unwrap()).unwrap();
        assert_eq!(json["ICD"]["api_version"], "1.3.0");
    }

    #[test]
    fn selecting_an_unknown_driver_lists_the_known_ones() {
        let all = vec![Driver {
            name: "lavapipe".into(),
            manifest: "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json".into(),
            library: "libvulkan_lvp.so".into(),
        }];
        let err = select(&all, &["radv".into()]).unwrap_err().to_string();
        assert!(err.contains("radv") && err.contains("lavapipe"), "{err}");
        assert_eq!(select(&all, &["lavapipe".into()]).unwrap().len(), 1);
    }
}
