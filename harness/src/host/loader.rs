//! Which Vulkan loader a run's program used, and whether it went around it: read from the
//! preload's `vulkan-object` records in the run's exit timeline. The loader that counts is
//! the one the program loads (a wheel may bundle its own), not the one vkexit finds; a
//! driver that the program opened itself is one that no layer can see.

use crate::host::drivers::{self, DriverSelection};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use vkexit_evidence::timeline::{Entry, Event, Role};

/// What a run loaded, as the preload saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanUse {
    /// Every loader, in the order loaded.
    pub loaders: Vec<LoaderSeen>,
    /// Every driver, with the object that loaded it when a `dlopen` of it was seen.
    pub drivers: Vec<DriverSeen>,
    /// Every validation layer library, as the dynamic loader found it (not in result files).
    #[serde(skip)]
    pub validation_layers: Vec<String>,
    /// The first driver manifest each process that asked the loader for drivers opened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_manifests: Vec<String>,
}

/// A Vulkan loader a run loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderSeen {
    /// The file it was loaded from.
    pub path: String,
    /// Its version, as it reports it (`vkEnumerateInstanceVersion`); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A Vulkan driver a run loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverSeen {
    /// The file it was loaded from.
    pub path: String,
    /// The library that loaded it (the loader, or the program itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_by: Option<String>,
}

/// The file a path names, links resolved, to tell two names of one library apart from two
/// libraries.
fn same_file(path: &str) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path))
}

/// The run's Vulkan objects, from its timeline; `None` when there is no timeline (the run
/// was made without the preload), so nothing is known.
pub fn read(timeline: &Path) -> Option<VulkanUse> {
    let file = std::fs::File::open(timeline).ok()?;
    let mut objects = Vec::new();
    let _ = vkexit_evidence::read::records_of(file, Event::VulkanObject, |_, e: Entry| {
        if let Entry::VulkanObject(object) = e {
            objects.push(object);
        }
    });
    let mut seen = VulkanUse::default();
    for r in objects {
        match r.role() {
            Some(Role::Loader) => {
                // The file itself, not the soname link the program named.
                let path = std::fs::canonicalize(&r.path)
                    .map(|p| p.display().to_string())
                    .unwrap_or(r.path);
                if !seen.loaders.iter().any(|l| l.path == path) {
                    let version = version_of(Path::new(&path));
                    seen.loaders.push(LoaderSeen { path, version });
                }
            }
            Some(Role::Driver) => {
                let driver = DriverSeen {
                    path: r.path,
                    loaded_by: r.caller,
                };
                if !seen.drivers.contains(&driver) {
                    seen.drivers.push(driver);
                }
            }
            Some(Role::ValidationLayer) if !seen.validation_layers.contains(&r.path) => {
                seen.validation_layers.push(r.path);
            }
            Some(Role::ValidationLayer) => {}
            Some(Role::DriverManifest) if !seen.driver_manifests.contains(&r.path) => {
                seen.driver_manifests.push(r.path);
            }
            Some(Role::DriverManifest) | None => {}
        }
    }
    Some(seen)
}

impl VulkanUse {
    /// What shows that the run used Vulkan: a driver manifest read, a driver or the
    /// validation layer loaded (in any of its processes); `None` when nothing does. A loader
    /// linked in but never asked for a driver is not use.
    pub fn witness(&self) -> Option<String> {
        if let Some(d) = self.drivers.first() {
            return Some(format!("it loaded the driver {}", d.path));
        }
        if let Some(m) = self.driver_manifests.first() {
            return Some(format!("it read the driver manifest {}", m));
        }
        self.validation_layers
            .first()
            .map(|l| format!("it loaded the validation layer {l}"))
    }

    /// Why no layer could see the program's Vulkan calls: it opened a driver itself, one the
    /// loader did not open or the very one the loader opened, or loaded one with no loader in
    /// the process at all. A different driver library that a library other than the loader
    /// opens while the loader has opened a driver is part of that driver (NVIDIA's
    /// libGLX_nvidia, opened by the loader, brings in libEGL_nvidia through libEGL): no bypass.
    pub fn bypass(&self, selection: DriverSelection) -> Option<String> {
        let by_loader: Vec<PathBuf> = self
            .drivers
            .iter()
            .filter(|d| d.loaded_by.as_deref().is_some_and(is_loader_file))
            .map(|d| same_file(&d.path))
            .collect();
        let by_program = self.drivers.iter().find(|d| {
            d.loaded_by
                .as_deref()
                .is_some_and(|caller| !is_loader_file(caller))
                && (by_loader.is_empty() || by_loader.contains(&same_file(&d.path)))
        });
        let without_loader = self.drivers.first().filter(|_| self.loaders.is_empty());
        let driver = by_program.or(without_loader)?;
        let who = match &driver.loaded_by {
            Some(caller) if !is_loader_file(caller) => format!("{caller} loaded the driver"),
            _ => "the program loaded the driver".to_string(),
        };
        let remedy = match selection {
            DriverSelection::LoaderSelect => {
                "make the program load Vulkan through libvulkan.so.1 (ncnn: create_gpu_instance() \
                 with no driver path, or create_gpu_instance(\"libvulkan.so.1\"))"
            }
            // The variables the program read are vkexit's own: no advice to the program helps.
            DriverSelection::DriverFiles => {
                "this loader is older than 1.3.234, so vkexit chose the driver with VK_DRIVER_FILES \
                 and VK_ICD_FILENAMES, which the program read to open the driver itself (ncnn does); \
                 it can be judged with a loader from 1.3.234, which vkexit tells through \
                 VK_LOADER_DRIVERS_SELECT, a variable only loaders read"
            }
        };
        Some(format!(
            "{who} {} itself, not through the Vulkan loader: no layer can see its calls, so \
             the run cannot be judged; {remedy}",
            driver.path
        ))
    }

    /// Why the validation layer that ran may not be the one vkexit names in the results: the
    /// dynamic loader found another file for the library the manifest names (a manifest that
    /// names its library by file name, and an `LD_LIBRARY_PATH` that holds another build).
    pub fn other_validation_layer(&self, expected: &Path) -> Option<String> {
        let expected_file = same_file(&expected.display().to_string());
        let ran: Vec<&String> = self
            .validation_layers
            .iter()
            .filter(|p| same_file(p) != expected_file)
            .collect();
        if ran.is_empty() || self.validation_layers.len() > ran.len() {
            return None;
        }
        Some(format!(
            "the validation layer library that ran, {}, is not the one its manifest names, {} \
             (a manifest that names its library by file name lets LD_LIBRARY_PATH choose \
             another build): which layer, and which version, validated the run is unknown",
            ran[0],
            expected.display()
        ))
    }

    /// Why the driver vkexit chose may not be the one the run used: the program's loader
    /// does not read the variables that chose it.
    pub fn selection_ignored(&self, selection: DriverSelection) -> Option<String> {
        if selection != DriverSelection::LoaderSelect {
            return None;
        }
        let old = self.loaders.iter().find(|l| {
            l.version
                .as_deref()
                .and_then(drivers::parse_version)
                .is_some_and(|v| v < drivers::LOADER_SELECT_SINCE)
        })?;
        Some(format!(
            "the program loaded the Vulkan loader {} (version {}), which ignores \
             VK_LOADER_DRIVERS_SELECT (read since 1.3.234): the driver was not chosen; \
             run it with a newer loader first on LD_LIBRARY_PATH",
            old.path,
            old.version.as_deref().unwrap_or("unknown")
        ))
    }

    /// "1.4.313 (/path/libvulkan.so.1)", each loader once; "none" without one.
    pub fn describe_loaders(&self) -> String {
        if self.loaders.is_empty() {
            return "none".into();
        }
        self.loaders
            .iter()
            .map(|l| {
                format!(
                    "{} ({})",
                    l.version.as_deref().unwrap_or("version unknown"),
                    l.path
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn is_loader_file(path: &str) -> bool {
    Path::new(path)
        .file_name()
        .is_some_and(|f| f.as_encoded_bytes().starts_with(b"libvulkan.so"))
}

/// A loader's version: from its file name where packages put it (`libvulkan.so.1.3.239`),
/// else from the loader itself, asked in a child process (`vkexit probe-loader`). Each
/// file is asked once.
pub fn version_of(path: &Path) -> Option<String> {
    static KNOWN: Mutex<Option<HashMap<PathBuf, Option<String>>>> = Mutex::new(None);
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(v) = version_in_name(&real) {
        return Some(v);
    }
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let known = known.get_or_insert_with(HashMap::new);
    known
        .entry(real.clone())
        .or_insert_with(|| ask_loader(&real))
        .clone()
}

fn version_in_name(path: &Path) -> Option<String> {
    // libvulkan.so.1.3.239: the soname, libvulkan.so.1, grown to the loader's full version.
    let version = path.file_name()?.to_str()?.strip_prefix("libvulkan.so.")?;
    drivers::parse_version(version).map(|_| version.to_string())
}

fn ask_loader(path: &Path) -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .arg("probe-loader")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim();
    (out.status.success() && drivers::parse_version(version).is_some()).then(|| version.to_string())
}

/// `vkexit probe-loader PATH`: the loader's own version, from `vkEnumerateInstanceVersion`.
pub fn probe_loader_here(path: &Path) -> Result<String, crate::support::errors::ProbeError> {
    use crate::host::vk;
    use crate::support::errors::ProbeError;
    let loader = vk::Loader::at(path).map_err(|e| ProbeError::LoaderNotLoaded {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let version = loader
        .instance_version()
        .map_err(|e| ProbeError::vulkan("vkEnumerateInstanceVersion", e))?;
    Ok(vk::version_text(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(lines: &[&str]) -> VulkanUse {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        read(&path).unwrap()
    }

    const LOADER: &str = r#"{"ev":"vulkan-object","role":"loader","path":"/opt/x/libvulkan.so.1.3.200","caller":null}"#;
    const BY_LOADER: &str = r#"{"ev":"vulkan-object","role":"driver","path":"/usr/lib/libvulkan_lvp.so","caller":"/opt/x/libvulkan.so.1.3.200"}"#;
    const BY_NCNN: &str = r#"{"ev":"vulkan-object","role":"driver","path":"/usr/lib/libvulkan_lvp.so","caller":"/w/ncnn.cpython-311-x86_64-linux-gnu.so"}"#;

    #[test]
    fn a_driver_the_program_opened_itself_is_a_bypass_naming_both() {
        let seen = timeline(&[BY_NCNN]);
        let why = seen.bypass(DriverSelection::LoaderSelect).unwrap();
        assert!(
            why.starts_with("/w/ncnn.cpython-311-x86_64-linux-gnu.so loaded the driver /usr/lib/libvulkan_lvp.so itself")
                && why.contains("no layer can see its calls"),
            "{why}"
        );
        // With a loader in the process too, the program's own dlopen still bypasses it.
        assert!(timeline(&[LOADER, BY_NCNN])
            .bypass(DriverSelection::LoaderSelect)
            .is_some());
    }

    #[test]
    fn under_a_loader_before_1_3_234_the_bypass_says_the_variables_were_vkexits() {
        let why = timeline(&[LOADER, BY_NCNN])
            .bypass(DriverSelection::DriverFiles)
            .unwrap();
        assert!(
            why.contains("itself, not through the Vulkan loader")
                && why.contains("older than 1.3.234")
                && why.contains("VK_LOADER_DRIVERS_SELECT")
                && !why.contains("create_gpu_instance"),
            "{why}"
        );
        let why = timeline(&[BY_NCNN])
            .bypass(DriverSelection::LoaderSelect)
            .unwrap();
        assert!(why.contains("create_gpu_instance()"), "{why}");
    }

    #[test]
    fn a_driver_loaded_by_the_loader_is_no_bypass() {
        let seen = timeline(&[LOADER, BY_LOADER, "{\"ev\":\"main-returned\"}", "{trunc"]);
        assert_eq!(seen.bypass(DriverSelection::LoaderSelect), None);
        assert_eq!(seen.loaders[0].version.as_deref(), Some("1.3.200"));
        // A driver with no loader at all, whoever loaded it.
        let alone = r#"{"ev":"vulkan-object","role":"driver","path":"/d/x.so","caller":null}"#;
        assert!(timeline(&[alone])
            .bypass(DriverSelection::LoaderSelect)
            .is_some());
    }

    #[test]
    fn a_driver_that_the_loaders_driver_loads_in_turn_is_no_bypass() {
        // NVIDIA: the loader opens libGLX_nvidia, whose start-up opens libEGL (glvnd), which
        // opens libEGL_nvidia, itself a Vulkan driver library.
        let glx = r#"{"ev":"vulkan-object","role":"driver","path":"/n/libGLX_nvidia.so.0","caller":"/opt/x/libvulkan.so.1.3.200"}"#;
        let egl = r#"{"ev":"vulkan-object","role":"driver","path":"/n/libEGL_nvidia.so.0","caller":"/s/libEGL.so.1"}"#;
        assert_eq!(
            timeline(&[LOADER, glx, egl]).bypass(DriverSelection::LoaderSelect),
            None
        );
        assert_eq!(
            timeline(&[LOADER, egl, glx]).bypass(DriverSelection::LoaderSelect),
            None
        );
        // Without the loader's own open, the same record is a bypass.
        assert!(timeline(&[LOADER, egl])
            .bypass(DriverSelection::LoaderSelect)
            .is_some());
        // The very driver the loader opened, opened by the program too, is one.
        assert!(timeline(&[LOADER, BY_LOADER, BY_NCNN])
            .bypass(DriverSelection::LoaderSelect)
            .is_some());
    }

    #[test]
    fn an_old_loader_ignores_the_selection() {
        let seen = timeline(&[LOADER, BY_LOADER]);
        let why = seen
            .selection_ignored(DriverSelection::LoaderSelect)
            .unwrap();
        assert!(
            why.contains("1.3.200") && why.contains("VK_LOADER_DRIVERS_SELECT"),
            "{why}"
        );
        assert_eq!(seen.selection_ignored(DriverSelection::DriverFiles), None);
    }

    #[test]
    fn versions_come_from_versioned_file_names() {
        assert_eq!(
            version_in_name(Path::new("/usr/lib/libvulkan.so.1.3.239")).as_deref(),
            Some("1.3.239")
        );
        assert_eq!(version_in_name(Path::new("/x/libvulkan.so.1")), None);
    }
}
