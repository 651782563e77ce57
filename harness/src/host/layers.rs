//! The layer chain of a run: which layers, in which order, found where.
//!
//! Order, from the application down: VK_LAYER_VKEXIT_trace,
//! VK_LAYER_KHRONOS_validation, VK_LAYER_VKEXIT_tegra_exit, driver.
//! - trace sits next to the application so it records every call as the
//!   application made it, before validation (which may itself fault on a
//!   dead handle): its record is on disk before anything below can crash.
//! - tegra-exit sits next to the driver, because it stands in for the
//!   driver's own exit behaviour; validation checks the calls above it.
//!
//! Layers are enabled with `VK_INSTANCE_LAYERS`, the one variable every
//! loader reads (1.3.204 on Jetson L4T included) and the only one that fixes
//! the order; `VK_LOADER_LAYERS_ENABLE` orders by discovery, not by list.
//! vkexit's own manifests are generated once per invocation with absolute
//! library paths, and found through `VK_LAYER_PATH`, which then also names
//! the validation layer's manifest directory (it replaces the default search).

use crate::host::validation::{self, ValidationLayer};
use crate::support::env;
use crate::support::errors::{Error, Result};
use std::path::{Path, PathBuf};
use vkexit_evidence::validation_logs as logs;

/// The layer a library belongs to, by its file name: vkexit's names for the
/// layers it enables, the file name for any other layer (`libVkLayer_*`).
/// The tegra-exit layer stands in for the driver: a fault of its emulated
/// driver is the emulation working, the application's crash, not a layer's.
pub(crate) fn layer_of(mapping: &str) -> Option<String> {
    let file = mapping.rsplit('/').next().unwrap_or(mapping);
    let stem = file.split(".so").next().unwrap_or(file);
    match stem {
        "libVkLayer_khronos_validation" => Some("validation".into()),
        "libVkLayer_vkexit_trace" => Some("trace".into()),
        "libVkLayer_vkexit_tegra_exit" => None,
        _ if stem.starts_with("libVkLayer_") => Some(file.to_string()),
        _ => None,
    }
}

/// `the validation layer` or `the layer libVkLayer_x.so`, for sentences.
pub(crate) fn layer_phrase(layer: &str) -> String {
    match layer {
        "validation" | "trace" => format!("the {layer} layer"),
        other => format!("the layer {other}"),
    }
}

/// vkexit's trace layer: Vulkan object lifetimes, as `VK_INSTANCE_LAYERS` names it.
pub(crate) const TRACE_LAYER: &str = "VK_LAYER_VKEXIT_trace";
/// vkexit's tegra-exit layer, the emulated driver exit (`--emulate`, `emulation`).
pub(crate) const TEGRA_LAYER: &str = "VK_LAYER_VKEXIT_tegra_exit";
/// The validation layer in a cell's layers label: `validation`, or `validation@VERSION` for a
/// layer build a matrix names by its manifest.
const VALIDATION: &str = "validation";

/// Whether a name of a cell's layers label is the validation layer, whichever build.
pub(crate) fn is_validation(name: &str) -> bool {
    name == VALIDATION
        || name
            .strip_prefix(VALIDATION)
            .is_some_and(|rest| rest.starts_with('@'))
}

/// How the Tegra driver's exit behaviour is emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Emulation {
    None,
    /// The exit handler waits for the worker's fault: the crash is certain.
    Tegra,
    /// No wait: the process may finish exiting first, as on the Orin.
    TegraRacy,
}

impl Emulation {
    pub(crate) fn parse(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Emulation::None),
            "tegra" => Ok(Emulation::Tegra),
            "tegra-racy" => Ok(Emulation::TegraRacy),
            other => Err(Error::bad_flag(
                "--emulate",
                other,
                "expected one of none, tegra, tegra-racy",
            )),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Emulation::None => "none",
            Emulation::Tegra => "tegra",
            Emulation::TegraRacy => "tegra-racy",
        }
    }

    fn mode(self) -> Option<&'static str> {
        match self {
            Emulation::None => None,
            Emulation::Tegra => Some("deterministic"),
            Emulation::TegraRacy => Some("racy"),
        }
    }
}

/// What a run's chain holds; `manifests` is where vkexit's own layer
/// manifests were written, when it has any.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    /// The trace layer goes in, with no trace of its own, to report each destroy call to the
    /// preloaded library, which holds it during exit as a slower device would
    /// (`run --slow-teardown`, `vkexit_evidence::slow_teardown`).
    pub(crate) slow_teardown: bool,
    pub(crate) trace: bool,
    pub(crate) validation: Option<ValidationLayer>,
    pub(crate) emulation: Emulation,
    pub(crate) manifests: Option<PathBuf>,
}

impl Chain {
    /// The layer names recorded in the results, in chain order.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.trace {
            names.push("trace".to_string());
        }
        match &self.validation {
            Some(v) if v.pinned => names.push(format!("{VALIDATION}@{}", v.api_version)),
            Some(_) => names.push(VALIDATION.to_string()),
            None => {}
        }
        names
    }

    /// Whether the trace layer goes in to witness the application's own debug messengers: for a
    /// validation layer that stops logging once the application has one (see
    /// [`ValidationLayer::logs_beside_app_messengers`]).
    pub(crate) fn witnesses_messengers(&self) -> bool {
        self.validation
            .as_ref()
            .is_some_and(|v| !v.logs_beside_app_messengers())
    }

    /// Whether vkexit's trace layer is in the chain: to trace, to witness messengers, or to
    /// report destroy calls.
    fn has_trace_layer(&self) -> bool {
        self.trace || self.witnesses_messengers() || self.slow_teardown
    }

    fn instance_layers(&self) -> Vec<&'static str> {
        let mut layers = Vec::new();
        if self.has_trace_layer() {
            layers.push(TRACE_LAYER);
        }
        if self.validation.is_some() {
            layers.push(validation::LAYER_NAME);
        }
        if self.emulation != Emulation::None {
            layers.push(TEGRA_LAYER);
        }
        layers
    }

    /// Writes the manifests of vkexit's own layers into `dir`, pointing at
    /// the libraries vkexit carries, unpacked and checked.
    pub(crate) fn write_manifests(&mut self, dir: &Path) -> Result<()> {
        let mut wanted = Vec::new();
        if self.has_trace_layer() {
            wanted.push((
                TRACE_LAYER,
                "libVkLayer_vkexit_trace.so",
                "records object lifetimes and the exit timeline",
            ));
        }
        if self.emulation != Emulation::None {
            wanted.push((
                TEGRA_LAYER,
                "libVkLayer_vkexit_tegra_exit.so",
                "behaves at exit like the NVIDIA Tegra driver",
            ));
        }
        if wanted.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io("cannot create the layer manifest directory", dir, e))?;
        for (name, library, description) in wanted {
            let path = super::helpers::path(library)?;
            let manifest = serde_json::json!({
                "file_format_version": "1.1.2",
                "layer": {
                    "name": name,
                    "type": "GLOBAL",
                    "library_path": path,
                    "api_version": "1.3.0",
                    "implementation_version": "1",
                    "description": description,
                }
            });
            let file = dir.join(format!("{name}.json"));
            let text = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
            std::fs::write(&file, text)
                .map_err(|e| Error::io("cannot write a layer manifest", &file, e))?;
        }
        self.manifests = Some(dir.to_path_buf());
        Ok(())
    }

    /// The variables that build this chain for one run directory.
    pub(crate) fn env(&self, run_dir: &Path) -> Vec<(String, String)> {
        let mut env = Vec::new();
        let layers = self.instance_layers();
        if !layers.is_empty() {
            env.push(("VK_INSTANCE_LAYERS".to_string(), layers.join(":")));
        }
        let pinned = self.validation.as_ref().is_some_and(|v| v.pinned);
        if self.manifests.is_some() || pinned {
            // The validation layer's directory goes before the user's own VK_LAYER_PATH: the
            // loader takes the first manifest of a name it finds, and that may hold another build.
            let mut path: Vec<String> = self
                .manifests
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            if let Some(v) = &self.validation {
                path.extend(v.manifest.parent().map(|p| p.display().to_string()));
            }
            if let Ok(user) = std::env::var("VK_LAYER_PATH") {
                path.extend(
                    user.split(':')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                );
            }
            env.push(("VK_LAYER_PATH".to_string(), path.join(":")));
        }
        if self.validation.is_some() {
            env.extend(validation::settings_env(run_dir));
        }
        if self.trace {
            env.push((
                vkexit_evidence::files::TRACE.var.into(),
                run_dir
                    .join(vkexit_evidence::files::TRACE.name)
                    .display()
                    .to_string(),
            ));
        }
        if self.slow_teardown {
            env.push((vkexit_evidence::slow_teardown::VAR.into(), "1".into()));
        }
        if self.witnesses_messengers() {
            env.push((
                logs::APP_MESSAGES_VAR.into(),
                run_dir
                    .join(logs::DIR)
                    .join(logs::APP_MESSAGES)
                    .display()
                    .to_string(),
            ));
        }
        if let Some(mode) = self.emulation.mode() {
            env.push((env::TEGRA_MODE.into(), mode.into()));
            env.push((
                vkexit_evidence::files::TEGRA.var.into(),
                run_dir
                    .join(vkexit_evidence::files::TEGRA.name)
                    .display()
                    .to_string(),
            ));
        }
        env
    }
}

/// Variables a run never inherits: they would change which layers load,
/// what they report, or where the diagnostics write.
pub(crate) fn is_inherited_layer_setting(key: &str) -> bool {
    use vkexit_evidence::files::{CRASH, TEGRA, TIMELINE, TRACE};
    [
        "VK_INSTANCE_LAYERS",
        "VK_LOADER_LAYERS_ENABLE",
        "VK_LOADER_LAYERS_DISABLE",
        TRACE.var,
        logs::APP_MESSAGES_VAR,
        env::TEGRA_MODE,
        TEGRA.var,
        CRASH.var,
        TIMELINE.var,
        env::TIMELINE_HANDLERS,
        env::EXIT_ORDER,
        env::CHAOS_SEED,
        vkexit_evidence::slow_teardown::VAR,
    ]
    .contains(&key)
        || validation::is_stray_setting(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer() -> ValidationLayer {
        ValidationLayer {
            manifest: "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json".into(),
            api_version: "1.3.239".into(),
            implementation_version: "1".into(),
            library: "/usr/lib/libVkLayer_khronos_validation.so".into(),
            pinned: false,
        }
    }

    fn value<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_chain_is_trace_then_validation_then_tegra() {
        let chain = Chain {
            slow_teardown: false,
            trace: true,
            validation: Some(layer()),
            emulation: Emulation::Tegra,
            manifests: Some("/a/layers".into()),
        };
        let env = chain.env(Path::new("/r"));
        assert_eq!(
            value(&env, "VK_INSTANCE_LAYERS"),
            Some("VK_LAYER_VKEXIT_trace:VK_LAYER_KHRONOS_validation:VK_LAYER_VKEXIT_tegra_exit")
        );
        let path = value(&env, "VK_LAYER_PATH").unwrap();
        assert!(
            path.starts_with("/a/layers:/usr/share/vulkan/explicit_layer.d"),
            "{path}"
        );
        assert_eq!(value(&env, "VKEXIT_TEGRA_MODE"), Some("deterministic"));
        assert_eq!(value(&env, "VKEXIT_TRACE_FILE"), Some("/r/trace.jsonl"));
        assert_eq!(
            value(&env, "VK_LAYER_SETTINGS_PATH"),
            Some("/r/vk_layer_settings.txt")
        );
        assert_eq!(chain.names(), ["trace", "validation"]);
    }

    #[test]
    fn a_slow_teardown_puts_the_trace_layer_in_without_a_trace_or_a_name() {
        let chain = Chain {
            slow_teardown: true,
            trace: false,
            validation: Some(layer()),
            emulation: Emulation::None,
            manifests: Some("/a/layers".into()),
        };
        let env = chain.env(Path::new("/r"));
        assert_eq!(
            value(&env, "VK_INSTANCE_LAYERS"),
            Some("VK_LAYER_VKEXIT_trace:VK_LAYER_KHRONOS_validation")
        );
        assert_eq!(value(&env, "VKEXIT_SLOW_TEARDOWN"), Some("1"));
        assert_eq!(value(&env, "VKEXIT_TRACE_FILE"), None);
        assert_eq!(chain.names(), ["validation"]);
        assert!(is_inherited_layer_setting("VKEXIT_SLOW_TEARDOWN"));
    }

    #[test]
    fn validation_alone_leaves_the_layer_path_to_the_loader() {
        let chain = Chain {
            slow_teardown: false,
            trace: false,
            validation: Some(layer()),
            emulation: Emulation::None,
            manifests: None,
        };
        let env = chain.env(Path::new("/r"));
        assert_eq!(
            value(&env, "VK_INSTANCE_LAYERS"),
            Some("VK_LAYER_KHRONOS_validation")
        );
        assert_eq!(value(&env, "VK_LAYER_PATH"), None);
        assert_eq!(value(&env, "VKEXIT_TEGRA_MODE"), None);
    }

    #[test]
    fn a_pinned_validation_layer_is_found_first_and_named_with_its_version() {
        let chain = Chain {
            slow_teardown: false,
            trace: false,
            validation: Some(ValidationLayer {
                manifest: "/opt/sdk/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
                    .into(),
                api_version: "1.4.309".into(),
                pinned: true,
                ..layer()
            }),
            emulation: Emulation::None,
            manifests: None,
        };
        let env = chain.env(Path::new("/r"));
        let path = value(&env, "VK_LAYER_PATH").unwrap();
        assert!(
            path.starts_with("/opt/sdk/share/vulkan/explicit_layer.d"),
            "{path}"
        );
        assert_eq!(chain.names(), ["validation@1.4.309"]);
        assert!(is_validation("validation@1.4.309") && is_validation("validation"));
        assert!(!is_validation("validationx") && !is_validation("trace"));
    }

    #[test]
    fn emulation_names() {
        assert_eq!(Emulation::parse("tegra-racy").unwrap().name(), "tegra-racy");
        let e = Emulation::parse("jetson").unwrap_err().to_string();
        assert!(e.contains("none, tegra, tegra-racy"), "{e}");
    }
}
