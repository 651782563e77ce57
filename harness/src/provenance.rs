//! Where a cell's runs came from: the device and driver, the loader, the
//! validation layer, the kernel and the C library. A result from another
//! machine (a shard, a CI runner) says what it was measured on.

use crate::drivers::Selection;
use crate::loader::VulkanUse;
use crate::probe::DeviceInfo;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_type: Option<String>,
    /// The device's Vulkan version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulkan: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_name: Option<String>,
    /// The driver's own version text (`VkPhysicalDeviceDriverProperties`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_info: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<u32>,
    /// The loader vkexit found (`libvulkan.so.1`): it decides how the driver is chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<String>,
    /// How the runs' driver was chosen (`VK_LOADER_DRIVERS_SELECT + VK_ADD_DRIVER_FILES`,
    /// or `VK_DRIVER_FILES + VK_ICD_FILENAMES` for a loader before 1.3.234).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_selection: Option<String>,
    /// The loaders the runs' programs loaded, each with the number of runs that loaded it:
    /// "1.4.313 (/…/ggml/libvulkan.so.1): 5 runs". "none" for runs that loaded none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaders_used: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_layer: Option<String>,
    pub kernel: String,
    pub glibc: String,
    pub arch: String,
}

impl Provenance {
    pub fn of(
        device: Option<&DeviceInfo>,
        loader: Option<&str>,
        validation_layer: Option<&str>,
    ) -> Self {
        let (kernel, glibc) = host();
        Provenance {
            device: device.map(|d| d.name.clone()),
            device_type: device.map(|d| d.device_type.clone()),
            vulkan: device.map(|d| d.api_version.clone()),
            driver_name: device.and_then(|d| d.driver_name.clone()),
            driver_info: device.and_then(|d| d.driver_info.clone()),
            driver_version: device.map(|d| d.driver_version),
            loader: loader.map(str::to_string),
            driver_selection: None,
            loaders_used: Vec::new(),
            validation_layer: validation_layer.map(str::to_string),
            kernel: kernel.clone(),
            glibc: glibc.clone(),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

impl Provenance {
    /// Adds how the driver was chosen and which loaders the runs used (`None`: a run made
    /// without the preload, which records nothing).
    pub fn with_runs<'a>(
        mut self,
        selection: Selection,
        used: impl IntoIterator<Item = Option<&'a VulkanUse>>,
    ) -> Self {
        self.driver_selection = Some(selection.describe().to_string());
        let mut counts: Vec<(String, u64)> = Vec::new();
        for run in used.into_iter().flatten() {
            let loaders = run.describe_loaders();
            match counts.iter_mut().find(|(l, _)| *l == loaders) {
                Some((_, n)) => *n += 1,
                None => counts.push((loaders, 1)),
            }
        }
        self.loaders_used = counts
            .into_iter()
            .map(|(loaders, n)| format!("{loaders}: {n} run{}", if n == 1 { "" } else { "s" }))
            .collect();
        self
    }
}

/// The kernel release and the glibc version of this machine, read once.
fn host() -> &'static (String, String) {
    static HOST: OnceLock<(String, String)> = OnceLock::new();
    HOST.get_or_init(|| {
        // SAFETY: uname fills a zeroed struct we own.
        let mut name: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let kernel = if unsafe { libc::uname(&mut name) } == 0 {
            // SAFETY: uname NUL-terminates its fields.
            unsafe { std::ffi::CStr::from_ptr(name.release.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            String::new()
        };
        // SAFETY: returns a static NUL-terminated string.
        let glibc = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }
            .to_string_lossy()
            .into_owned();
        (kernel, glibc)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_described_even_without_a_device() {
        let p = Provenance::of(None, None, None);
        assert!(!p.kernel.is_empty());
        assert!(p.glibc.starts_with("2."), "{}", p.glibc);
        assert!(p.device.is_none());
    }

    #[test]
    fn the_loaders_the_runs_used_are_counted() {
        let used = |path: &str| VulkanUse {
            loaders: vec![crate::loader::LoaderSeen {
                path: path.into(),
                version: Some("1.4.313".into()),
            }],
            drivers: Vec::new(),
        };
        let (a, b) = (used("/c/ggml/libvulkan.so.1"), VulkanUse::default());
        let p = Provenance::of(None, Some("1.3.239"), None).with_runs(
            Selection::LoaderSelect,
            [Some(&a), Some(&a), Some(&b), None],
        );
        assert_eq!(
            p.loaders_used,
            ["1.4.313 (/c/ggml/libvulkan.so.1): 2 runs", "none: 1 run"]
        );
        assert!(p
            .driver_selection
            .unwrap()
            .starts_with("VK_LOADER_DRIVERS_SELECT"));
    }
}
