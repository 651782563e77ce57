//! Driver probing: which physical devices a driver shows, with names and
//! versions. It runs in a child process (vkexit's hidden `probe-driver`
//! command) so that a broken driver cannot take vkexit down, and so that the
//! driver is chosen exactly as for a run: by environment.

mod cache;

use crate::host::drivers::Driver;
use crate::host::vk;
use crate::support::errors::ProbeError;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Stdio};

/// A device a driver shows, as the probe saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Its place in `vkEnumeratePhysicalDevices`.
    pub index: u32,
    /// `deviceName`.
    pub name: String,
    /// `deviceType`, as `cpu`, `discrete-gpu`, ….
    pub device_type: String,
    /// `apiVersion`, as `1.3.255`.
    pub api_version: String,
    /// `vendorID`.
    pub vendor_id: u32,
    /// `driverVersion`, as the driver encodes it.
    pub driver_version: u32,
    /// `VkPhysicalDeviceDriverProperties`, when the device has Vulkan 1.2.
    pub driver_name: Option<String>,
    /// `driverInfo` of the same structure.
    pub driver_info: Option<String>,
    /// The loader's version, filled in by the planner from the probe.
    #[serde(default)]
    pub loader_version: Option<String>,
}

/// What the probe of one driver reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The version of the loader the probe went through.
    pub loader_version: String,
    /// The devices the driver shows.
    pub devices: Vec<DeviceInfo>,
    /// The files the probe process had mapped with the instance alive (the loader, the
    /// driver, what they load): a cached probe holds while each of them is unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<std::path::PathBuf>,
}

/// Enumerates devices in this process, with whatever driver and layers the
/// environment selects. The instance is destroyed before returning.
pub fn probe_here() -> Result<ProbeReport, ProbeError> {
    let loader = vk::Loader::system().map_err(|e| ProbeError::NoLoader(e.to_string()))?;
    let loader_version = loader
        .instance_version()
        .map_err(|e| ProbeError::vulkan("vkEnumerateInstanceVersion", e))?;
    let instance = loader
        .create_instance(c"vkexit-probe", vk::API_VERSION_1_2)
        .map_err(|e| ProbeError::vulkan("vkCreateInstance", e))?;
    let devices = match instance.devices() {
        Ok(devices) => devices,
        // What the loader answers when no driver has hardware to drive.
        Err(vk::VkResult::ERROR_INITIALIZATION_FAILED) => Vec::new(),
        Err(e) => return Err(ProbeError::vulkan("vkEnumeratePhysicalDevices", e)),
    };
    let libraries = cache::mapped_files();
    drop(instance);
    Ok(ProbeReport {
        loader_version: vk::version_text(loader_version),
        devices: devices
            .into_iter()
            .enumerate()
            .map(|(index, d)| {
                let (driver_name, driver_info) = d.driver.unwrap_or_default();
                DeviceInfo {
                    index: index as u32,
                    name: d.name,
                    device_type: d.device_type,
                    api_version: vk::version_text(d.api_version),
                    vendor_id: d.vendor_id,
                    driver_version: d.driver_version,
                    driver_name,
                    driver_info,
                    loader_version: None,
                }
            })
            .collect(),
        libraries,
    })
}

/// Probes one driver in a child process. `extra_env` adds variables (the
/// doctor uses it to enable validation). Without them, the report of an earlier
/// probe of the same driver is used while nothing it depends on has changed
/// ([`super::probe_cache`]), and a fresh report is kept for the next vkexit.
///
/// The child writes its report to a file of its own, never to stdout: a layer
/// may print there too (the validation layer 1.4 logs to stdout by default),
/// and a report mixed with a layer's text would read as a broken probe.
pub fn probe_driver(
    driver: &Driver,
    extra_env: &[(String, String)],
    cwd: &Path,
) -> Result<ProbeReport, ProbeError> {
    if !extra_env.is_empty() {
        return probe_in_child(driver, extra_env, cwd);
    }
    let cache = cache::Cache::for_driver(driver);
    if let Some(report) = cache.as_ref().and_then(|c| c.load()) {
        return Ok(report);
    }
    let report = probe_in_child(driver, extra_env, cwd)?;
    if let Some(cache) = &cache {
        cache.store(&report);
    }
    Ok(report)
}

fn probe_in_child(
    driver: &Driver,
    extra_env: &[(String, String)],
    cwd: &Path,
) -> Result<ProbeReport, ProbeError> {
    let exe = std::env::current_exe().map_err(ProbeError::NoSelf)?;
    let scratch = tempfile::Builder::new()
        .prefix("vkexit-probe")
        .tempdir()
        .map_err(ProbeError::NoScratch)?;
    let report_file = scratch.path().join("report.json");
    let mut command = Command::new(exe);
    command
        .arg("probe-driver")
        .arg("--report")
        .arg(&report_file)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env_remove("VK_INSTANCE_LAYERS")
        .env_remove("VK_LOADER_LAYERS_ENABLE")
        .env("VK_ICD_FILENAMES", &driver.manifest)
        .env("VK_DRIVER_FILES", &driver.manifest);
    for (k, v) in extra_env {
        command.env(k, v);
    }
    let out = command.output().map_err(ProbeError::NotStarted)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(ProbeError::Failed {
            status: describe_status(out.status),
            last: last.to_string(),
        });
    }
    let text = std::fs::read(&report_file).map_err(ProbeError::NoReport)?;
    serde_json::from_slice(&text).map_err(ProbeError::BrokenReport)
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("killed by {}", crate::support::util::signal_name(s)),
        _ => "failed".into(),
    }
}
