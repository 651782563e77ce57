//! Where a cell's runs came from: the device and driver, the loader, the
//! validation layer, the kernel and the C library. A result from another
//! machine (a shard, a CI runner) says what it was measured on.

use crate::host::drivers::DriverSelection;
use crate::host::loader::VulkanUse;
use crate::host::probe::DeviceInfo;
use std::sync::OnceLock;

pub use vkexit_evidence::results::Provenance;

/// What the harness puts in a results file's [`Provenance`]: this machine and its probed
/// device, how the driver was chosen, and the loaders the runs loaded. (The type is the
/// results file's, in `vkexit-evidence`; what fills it is the harness's.)
pub trait FromHost: Sized {
    /// The host, and the device and loader when known.
    fn of(
        device: Option<&DeviceInfo>,
        loader: Option<&str>,
        validation_layer: Option<&str>,
    ) -> Self;

    /// Adds how the driver was chosen and which loaders the runs, given in order, used
    /// (`None`: a run made without the preload, which records nothing). The gate folds the
    /// runs in as they finish instead ([`Self::with_loaders`]).
    #[cfg(test)]
    fn with_runs<'a>(
        self,
        selection: DriverSelection,
        used: impl IntoIterator<Item = Option<&'a VulkanUse>>,
    ) -> Self;

    /// Adds how the driver was chosen and the loaders counted over the runs.
    fn with_loaders(self, selection: DriverSelection, loaders: &LoadersUsed) -> Self;
}

impl FromHost for Provenance {
    fn of(
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

    #[cfg(test)]
    fn with_runs<'a>(
        self,
        selection: DriverSelection,
        used: impl IntoIterator<Item = Option<&'a VulkanUse>>,
    ) -> Self {
        let mut loaders = LoadersUsed::default();
        for (index, run) in used.into_iter().enumerate() {
            loaders.add(u32::try_from(index).unwrap_or(u32::MAX), run);
        }
        self.with_loaders(selection, &loaders)
    }

    fn with_loaders(mut self, selection: DriverSelection, loaders: &LoadersUsed) -> Self {
        self.driver_selection = Some(selection.describe().to_string());
        self.loaders_used = loaders.lines();
        self
    }
}

/// The loaders a cell's runs loaded, each with the number of runs that loaded it, counted
/// as runs finish, in a size that does not grow with the number of runs.
#[derive(Debug, Clone, Default)]
pub struct LoadersUsed {
    /// (what the runs loaded, the lowest run index that loaded it, runs).
    seen: Vec<(String, u32, u64)>,
    /// Runs that loaded something not among the ones named.
    others: u64,
}

/// Loader sets named per cell; a cell's runs load one in practice, a few when a case
/// brings its own loader. Which ones are named past this many depends on the order the
/// runs finished; the counts always add up.
const MAX_LOADER_SETS: usize = 8;

impl LoadersUsed {
    /// Counts run `index`'s loaders (`None`: made without the preload, which records none).
    pub fn add(&mut self, index: u32, used: Option<&VulkanUse>) {
        let Some(used) = used else {
            return;
        };
        let loaders = used.describe_loaders();
        if let Some((_, first, n)) = self.seen.iter_mut().find(|(l, _, _)| *l == loaders) {
            *first = (*first).min(index);
            *n += 1;
        } else if self.seen.len() < MAX_LOADER_SETS {
            self.seen.push((loaders, index, 1));
        } else {
            self.others += 1;
        }
    }

    /// "1.4.313 (/…/ggml/libvulkan.so.1): 5 runs", in the order of the first run of each.
    fn lines(&self) -> Vec<String> {
        let runs = |n: u64| format!("{n} run{}", if n == 1 { "" } else { "s" });
        let mut seen = self.seen.clone();
        seen.sort_by_key(|(_, first, _)| *first);
        let mut lines: Vec<String> = seen
            .into_iter()
            .map(|(loaders, _, n)| format!("{loaders}: {}", runs(n)))
            .collect();
        if self.others > 0 {
            lines.push(format!("other loaders: {}", runs(self.others)));
        }
        lines
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
            loaders: vec![crate::host::loader::LoaderSeen {
                path: path.into(),
                version: Some("1.4.313".into()),
            }],
            ..Default::default()
        };
        let (a, b) = (used("/c/ggml/libvulkan.so.1"), VulkanUse::default());
        let p = Provenance::of(None, Some("1.3.239"), None).with_runs(
            DriverSelection::LoaderSelect,
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

    #[test]
    fn loaders_are_counted_in_bounded_space_in_the_order_first_loaded() {
        let used = |k: u32| VulkanUse {
            loaders: vec![crate::host::loader::LoaderSeen {
                path: format!("/l{k}/libvulkan.so.1"),
                version: None,
            }],
            ..Default::default()
        };
        let named = |ks: std::ops::RangeInclusive<u32>| -> Vec<String> {
            ks.map(|k| format!("version unknown (/l{k}/libvulkan.so.1): 10 runs"))
                .chain(["other loaders: 20 runs".to_string()])
                .collect()
        };
        // Run i of 100 loads loader i % 10: eight are named, the runs of the rest counted.
        let mut in_order = LoadersUsed::default();
        for i in 0..100u32 {
            in_order.add(i, Some(&used(i % 10)));
        }
        assert_eq!(in_order.lines(), named(0..=7));
        // Finished last first: those seen first are named, still in the order of their
        // first run.
        let mut reversed = LoadersUsed::default();
        for i in (0..100u32).rev() {
            reversed.add(i, Some(&used(i % 10)));
        }
        assert_eq!(reversed.lines(), named(2..=9));
    }
}
