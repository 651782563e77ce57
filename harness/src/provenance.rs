//! Where a cell's runs came from: the device and driver, the loader, the
//! validation layer, the kernel and the C library. A result from another
//! machine (a shard, a CI runner) says what it was measured on.

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<String>,
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
            validation_layer: validation_layer.map(str::to_string),
            kernel: kernel.clone(),
            glibc: glibc.clone(),
            arch: std::env::consts::ARCH.to_string(),
        }
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
}
