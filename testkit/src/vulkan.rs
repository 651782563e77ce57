//! Lavapipe and the Khronos validation layer as the machine has them, and what a run needs to
//! use them: the validation settings file, manifests of built layers, the ids in a log.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The validation layer's name, as `VK_INSTANCE_LAYERS` lists it.
pub const VALIDATION_LAYER: &str = "VK_LAYER_KHRONOS_validation";
/// Where Debian's vulkan-validationlayers installs its manifest.
pub const VALIDATION_MANIFEST_DIR: &str = "/usr/share/vulkan/explicit_layer.d";

/// Lavapipe's ICD manifest; fails naming the package when it is not installed.
pub fn lavapipe_icd() -> PathBuf {
    let icd = PathBuf::from(format!(
        "/usr/share/vulkan/icd.d/lvp_icd.{}.json",
        std::env::consts::ARCH
    ));
    assert!(
        icd.is_file(),
        "lavapipe is not installed ({} is missing): run ci/setup.sh or \
         `apt-get install mesa-vulkan-drivers`",
        icd.display()
    );
    icd
}

/// The driver library lavapipe's ICD manifest names.
pub fn lavapipe_library() -> String {
    let icd = lavapipe_icd();
    let text = std::fs::read_to_string(&icd)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", icd.display()));
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", icd.display()));
    json["ICD"]["library_path"]
        .as_str()
        .unwrap_or_else(|| panic!("{} names no ICD.library_path", icd.display()))
        .to_string()
}

/// The validation layer's manifest; fails naming the package when it is not installed.
pub fn validation_manifest() -> PathBuf {
    let manifest = Path::new(VALIDATION_MANIFEST_DIR).join("VkLayer_khronos_validation.json");
    assert!(
        manifest.is_file(),
        "the Khronos validation layer is not installed ({} is missing): run ci/setup.sh or \
         `apt-get install vulkan-validationlayers`",
        manifest.display()
    );
    manifest
}

/// Fails, naming what to install, unless both lavapipe and the validation layer are here.
pub fn require_vulkan() {
    lavapipe_icd();
    validation_manifest();
}

/// Writes `vk_layer_settings.txt` into `dir`: validation logs errors and warnings to `log`.
/// Layers up to 1.3.295 read their settings from this file only (no environment variables);
/// point `VK_LAYER_SETTINGS_PATH` at the returned path.
pub fn write_validation_settings(dir: &Path, log: &Path) -> PathBuf {
    let settings = dir.join("vk_layer_settings.txt");
    std::fs::write(
        &settings,
        format!(
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
             khronos_validation.log_filename = {}\n\
             khronos_validation.report_flags = error,warn\n",
            log.display()
        ),
    )
    .unwrap_or_else(|e| panic!("cannot write {}: {e}", settings.display()));
    settings
}

/// Writes the committed layer manifest `committed` into `dir` under its own file name, with
/// `library_path` made the absolute path of `library`, as vkexit does at run time.
pub fn write_layer_manifest(committed: &Path, library: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(committed)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", committed.display()));
    let mut manifest: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", committed.display()));
    manifest["layer"]["library_path"] = Value::from(library.to_str().expect("a UTF-8 path"));
    let written = dir.join(committed.file_name().expect("a manifest file name"));
    std::fs::write(&written, serde_json::to_string_pretty(&manifest).unwrap())
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", written.display()));
    written
}

/// The `[ VUID-… ]` and `[ UNASSIGNED-… ]` message ids of a validation log, with their counts,
/// as the harness matches them.
pub fn vuids(log: &str) -> BTreeMap<String, usize> {
    let mut ids = BTreeMap::new();
    for part in log.split("[ ").skip(1) {
        let Some(end) = part.find(" ]") else { continue };
        let id = &part[..end];
        let valid = id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid && (id.starts_with("VUID-") || id.starts_with("UNASSIGNED-")) {
            *ids.entry(id.to_string()).or_insert(0) += 1;
        }
    }
    ids
}
