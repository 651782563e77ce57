//! The Khronos validation layer: where it is, which version, and the
//! per-run settings that make its findings land in the run's own directory.
//!
//! Layers 1.3.204 (Jetson L4T 36) and 1.3.239 (Debian 12) read `log_filename`,
//! `debug_action` and `report_flags` only from a `vk_layer_settings.txt`, so
//! every run gets one, named by `VK_LAYER_SETTINGS_PATH`. `debug_action` is
//! `LOG_MSG`, not `DEFAULT`: with `DEFAULT` an application's own debug
//! messenger silences the log. The layer creates its log file as soon as it
//! initialises at `vkCreateInstance`, even when it has nothing to say: the file
//! is the proof, per run, that validation was active with our settings.
//! `report_flags` has `info` for one message: the layer's status at
//! `vkCreateInstance`, whose `Current Disables:` shows checks an application
//! turned off itself (information is never counted as a finding).
//!
//! Every layer opens `log_filename` with `fopen(path, "w")` at each `vkCreateInstance`, so a
//! second instance, an exec'd program or another process of the run would truncate what an
//! earlier instance reported. The diagnostics preload sends each of those opens to a file of
//! its own in `validation.d/` ([`ValidationLogs`]); after the run vkexit reads each one and
//! writes their concatenation at `validation.log`. A log that no preload saw is still written
//! at the configured path: vkexit moves it to `validation.d/unwatched.log` and cannot prove it
//! is whole.

use crate::host::vuid::{self, VuidReport};
use crate::support::errors::{Error, PinnedLayer, Result};
use serde::Serialize;
use std::io::{BufRead, Read, Seek, Write};
use std::path::{Path, PathBuf};
use vkexit_evidence::files;
use vkexit_evidence::validation_logs::{self as logs, Header};

/// The Khronos validation layer's name in layer manifests and in `VK_INSTANCE_LAYERS`.
pub const LAYER_NAME: &str = "VK_LAYER_KHRONOS_validation";

/// An installed validation layer, as its manifest describes it.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationLayer {
    /// The layer manifest (`VkLayer_khronos_validation.json`) it was read from.
    pub(crate) manifest: PathBuf,
    /// The manifest's `api_version` ("1.3.239"); empty when it has none.
    pub(crate) api_version: String,
    /// The manifest's `implementation_version`; empty when it has none.
    pub(crate) implementation_version: String,
    /// The layer's library, resolved from the manifest's `library_path`; it exists.
    pub library: PathBuf,
    /// Named by a matrix's `[[layers]]` set (`validation_manifest`), not found where the loader
    /// looks: runs find it through `VK_LAYER_PATH`, and its cells carry its version in their
    /// layers label, so that two builds side by side are two columns.
    #[serde(skip)]
    pub(crate) pinned: bool,
}

/// The oldest layer measured to keep writing its log while the application has a debug
/// messenger of its own (Debian 12's); 1.2.162 (Debian 11) writes nothing once one exists.
const LOGS_BESIDE_APP_MESSENGERS: (u32, u32, u32) = (1, 3, 239);

impl ValidationLayer {
    /// Whether this layer still writes its log while the application has its own debug
    /// messenger. A layer older than [`LOGS_BESIDE_APP_MESSENGERS`], or one whose manifest names
    /// no version, is not trusted to: its runs witness the application's messengers instead.
    pub(crate) fn logs_beside_app_messengers(&self) -> bool {
        let mut parts = self.api_version.split('.').map(|p| p.trim().parse::<u32>());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Ok(a)), Some(Ok(b)), Some(Ok(c))) => (a, b, c) >= LOGS_BESIDE_APP_MESSENGERS,
            _ => false,
        }
    }
}

/// The explicit-layer directories the loader reads, in its order.
pub(crate) fn layer_search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = match std::env::var("VK_LAYER_PATH") {
        Ok(v) if !v.is_empty() => v.split(':').map(PathBuf::from).collect(),
        _ => crate::host::drivers::icd_search_dirs()
            .into_iter()
            .map(|d| d.with_file_name("explicit_layer.d"))
            .collect(),
    };
    if let Ok(extra) = std::env::var("VK_ADD_LAYER_PATH") {
        dirs.extend(
            extra
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
        );
    }
    dirs
}

/// Finds the validation layer the loader would load, and checks that its
/// library is really there.
pub(crate) fn find_layer() -> Result<ValidationLayer> {
    let dirs = layer_search_dirs();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for manifest in files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
        {
            if let Some(layer) = read_layer_manifest(manifest)? {
                return Ok(layer);
            }
        }
    }
    Err(Error::NoValidationLayer {
        searched: dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `Ok(None)` for a manifest of another layer or one that cannot be parsed
/// (the loader skips those too); an error when it is the validation layer
/// and its library is missing.
pub fn read_layer_manifest(path: &Path) -> Result<Option<ValidationLayer>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    let mut layers: Vec<&serde_json::Value> = Vec::new();
    layers.extend(json.get("layer"));
    if let Some(list) = json.get("layers").and_then(|l| l.as_array()) {
        layers.extend(list);
    }
    let Some(layer) = layers
        .into_iter()
        .find(|l| l.get("name").and_then(|n| n.as_str()) == Some(LAYER_NAME))
    else {
        return Ok(None);
    };
    let field = |k: &str| {
        layer
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let library_path = field("library_path");
    let library = resolve_library(path, &library_path).ok_or(Error::ValidationLibraryMissing {
        manifest: path.to_path_buf(),
        library: library_path.clone(),
    })?;
    Ok(Some(ValidationLayer {
        manifest: path.to_path_buf(),
        api_version: field("api_version"),
        implementation_version: field("implementation_version"),
        library,
        pinned: false,
    }))
}

/// The validation layer of a manifest a matrix names, to be used instead of the one the loader
/// would find. The path is made absolute: runs start in their own directories.
pub(crate) fn pinned_layer(manifest: &Path) -> std::result::Result<ValidationLayer, PinnedLayer> {
    let manifest = std::path::absolute(manifest).map_err(|e| PinnedLayer::Unresolved {
        manifest: manifest.to_path_buf(),
        source: e,
    })?;
    if !manifest.is_file() {
        return Err(PinnedLayer::NoSuchFile(manifest));
    }
    match read_layer_manifest(&manifest) {
        Ok(Some(layer)) => Ok(ValidationLayer {
            pinned: true,
            ..layer
        }),
        Ok(None) => Err(PinnedLayer::NotTheLayer(manifest)),
        Err(e) => Err(PinnedLayer::Unusable(Box::new(e))),
    }
}

/// A path with a slash is relative to the manifest; a bare file name is
/// looked up like `dlopen` would.
fn resolve_library(manifest: &Path, library: &str) -> Option<PathBuf> {
    if library.is_empty() {
        return None;
    }
    if library.contains('/') {
        let path = manifest.parent().unwrap_or(Path::new("/")).join(library);
        return path.exists().then_some(path);
    }
    library_dirs()
        .into_iter()
        .map(|d| d.join(library))
        .find(|p| p.exists())
}

fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect();
    if let Ok(entries) = std::fs::read_dir("/etc/ld.so.conf.d") {
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            dirs.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    for d in ["/lib", "/usr/lib", "/lib64", "/usr/lib64"] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The settings file content for one run, logging to `log`.
pub(crate) fn settings_text(log: &Path) -> String {
    format!(
        "# written by vkexit for one run\n\
         khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n\
         khronos_validation.log_filename = {}\n\
         khronos_validation.report_flags = error,warn,info\n\
         khronos_validation.enable_message_limit = false\n",
        log.display()
    )
}

/// Variables a user may have set that would change what the layer reports;
/// each run starts without them.
pub(crate) fn is_stray_setting(key: &str) -> bool {
    key.starts_with("VK_KHRONOS_VALIDATION_")
        || (key.starts_with("VK_LAYER_") && key != "VK_LAYER_PATH")
}

/// The variables that point the layer at this run's settings file and lift
/// its duplicate-message limit (read from the environment by layers from
/// 1.3.296 on; older ones take the limit from the file).
pub(crate) fn settings_env(run_dir: &Path) -> Vec<(String, String)> {
    vec![
        (
            "VK_LAYER_SETTINGS_PATH".into(),
            run_dir.join(files::LAYER_SETTINGS).display().to_string(),
        ),
        ("VK_LAYER_DUPLICATE_MESSAGE_LIMIT".into(), "0".into()),
        ("VK_LAYER_ENABLE_MESSAGE_LIMIT".into(), "0".into()),
        (
            logs::LOG_VAR.into(),
            run_dir.join(files::VALIDATION_LOG).display().to_string(),
        ),
        (
            logs::DIR_VAR.into(),
            run_dir.join(logs::DIR).display().to_string(),
        ),
    ]
}

/// One instance's validation log: a file of `validation.d/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLog {
    /// Its path in the run directory (`validation.d/1234-1.log`).
    pub(crate) file: String,
    /// Who opened it, from its first line; `None` for the unwatched log, or a header cut short.
    pub(crate) opener: Option<Header>,
    /// The log no preloaded library saw: the layer wrote the configured path itself.
    pub(crate) unwatched: bool,
    /// What it holds.
    pub(crate) report: VuidReport,
}

impl InstanceLog {
    /// `process 1234 (mock)` or the file, for sentences.
    pub(crate) fn who(&self) -> String {
        match &self.opener {
            Some(h) => {
                let name = h.program.rsplit('/').next().unwrap_or(&h.program);
                format!("process {} ({name}, {})", h.pid, self.file)
            }
            None => self.file.clone(),
        }
    }
}

/// Every validation log of one run, one per instance the layer opened its log for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationLogs {
    /// In the order they were opened; the unwatched log, if any, last.
    pub(crate) instances: Vec<InstanceLog>,
    /// All of them together: the run's message ids and counts, those that reached only the
    /// application's own messengers included.
    pub merged: VuidReport,
    /// What the layer gave the application's own debug messengers and did not log
    /// (`validation.d/app-messengers.txt`, witnessed for layers that stop logging once the
    /// application has a messenger).
    pub(crate) app_only: VuidReport,
    /// The application's messengers that could not be witnessed, each said in a sentence.
    pub(crate) unwitnessed: Vec<String>,
}

impl ValidationLogs {
    /// Reads the logs of a run directory after its run; `None` when the layer wrote none.
    /// Moves a log at the configured path into `validation.d/` and writes the combined log
    /// there instead; reading again gives the same.
    pub(crate) fn read(dir: &Path) -> std::io::Result<Option<ValidationLogs>> {
        let configured = dir.join(files::VALIDATION_LOG);
        let logs_dir = dir.join(logs::DIR);
        if configured.is_file() && !is_combined(&configured)? {
            std::fs::create_dir_all(&logs_dir)?;
            let to = (1..)
                .map(|n| match n {
                    1 => logs_dir.join(logs::UNWATCHED),
                    n => logs_dir.join(format!("unwatched-{n}.log")),
                })
                .find(|p| !p.exists())
                .expect("a free name");
            std::fs::rename(&configured, to)?;
        }
        let Ok(entries) = std::fs::read_dir(&logs_dir) else {
            return Ok(None);
        };
        let witnessed = match std::fs::read(logs_dir.join(logs::APP_MESSAGES)) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut instances = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|x| x == "log") && path.is_file() {
                instances.push(read_instance(&path)?);
            }
        }
        if instances.is_empty() {
            return Ok(None);
        }
        instances.sort_by(|a, b| {
            let key = |l: &InstanceLog| (l.unwatched, l.opener.as_ref().map(|h| h.t_ns));
            key(a).cmp(&key(b)).then_with(|| a.file.cmp(&b.file))
        });
        let app = app_messages(&witnessed, &instances, dir)?;
        write_combined(dir, &instances, &app.lines)?;
        let merged = merge(
            instances
                .iter()
                .map(|l| &l.report)
                .chain(std::iter::once(&app.report)),
        );
        Ok(Some(ValidationLogs {
            instances,
            merged,
            app_only: app.report,
            unwitnessed: app.unwitnessed,
        }))
    }

    /// The logs of a run with one instance, whose watched log holds `report` (for readers that
    /// judge a log they scanned themselves).
    pub fn single_instance(report: VuidReport) -> ValidationLogs {
        ValidationLogs {
            instances: vec![InstanceLog {
                file: format!("{}/1-1.log", logs::DIR),
                opener: None,
                unwatched: false,
                report: report.clone(),
            }],
            merged: report,
            app_only: VuidReport::default(),
            unwitnessed: Vec::new(),
        }
    }
}

/// What the application's own messengers got that no instance's log holds.
#[derive(Default)]
struct AppMessages {
    /// Those messages, scanned as a log.
    report: VuidReport,
    /// Their lines, for the combined log.
    lines: String,
    /// The messengers that could not be witnessed, each said in a sentence.
    unwitnessed: Vec<String>,
}

/// Reads the witness file's text against the instances' logs. A message counts as logged as
/// often as its text occurs in the logs, so a layer that logs and calls the application's
/// messenger too adds nothing; one that only calls the messenger (before 1.3.239) adds every
/// finding.
fn app_messages(
    witnessed: &str,
    instances: &[InstanceLog],
    dir: &Path,
) -> std::io::Result<AppMessages> {
    let mut app = AppMessages::default();
    if witnessed.is_empty() {
        return Ok(app);
    }
    let mut logged = String::new();
    for log in instances {
        let bytes = std::fs::read(dir.join(&log.file))?;
        logged.push_str(&String::from_utf8_lossy(&bytes).replace(['\n', '\r'], " "));
    }
    // Per message text: how often it was witnessed so far, and how often the logs hold it.
    let mut seen: std::collections::HashMap<&str, (usize, usize)> =
        std::collections::HashMap::new();
    for line in witnessed.lines() {
        if let Some(what) = line.strip_prefix(logs::UNWITNESSED) {
            app.unwitnessed.push(what.to_string());
            continue;
        }
        let message = line.split_once("): ").map_or(line, |(_, m)| m).trim();
        if message.is_empty() {
            continue;
        }
        let (witnessed, in_logs) = seen
            .entry(message)
            .or_insert_with(|| (0, logged.matches(message).count()));
        *witnessed += 1;
        if *witnessed > *in_logs {
            app.lines.push_str(line);
            app.lines.push('\n');
        }
    }
    app.report = vuid::scan(app.lines.as_bytes())?;
    Ok(app)
}

fn is_combined(path: &Path) -> std::io::Result<bool> {
    let mut first = String::new();
    std::io::BufReader::new(std::fs::File::open(path)?).read_line(&mut first)?;
    Ok(first.trim_end() == logs::COMBINED_HEADER)
}

fn read_instance(path: &Path) -> std::io::Result<InstanceLog> {
    let mut first = Vec::new();
    std::io::BufReader::new(std::fs::File::open(path)?).read_until(b'\n', &mut first)?;
    let first = String::from_utf8_lossy(&first);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    Ok(InstanceLog {
        file: format!("{}/{name}", logs::DIR),
        opener: Header::parse(first.trim_end_matches('\n')),
        unwatched: name.starts_with("unwatched"),
        report: vuid::scan(std::fs::File::open(path)?)?,
    })
}

/// The message ids of all logs together; the disabled checks of every status message.
fn merge<'a>(reports: impl Iterator<Item = &'a VuidReport>) -> VuidReport {
    let mut merged = VuidReport::default();
    for report in reports {
        for (id, stat) in &report.ids {
            let into = merged.ids.entry(id.clone()).or_insert(vuid::VuidStat {
                count: 0,
                severity: stat.severity,
            });
            into.count += stat.count;
            into.severity = into.severity.min(stat.severity);
        }
        merged.cut_mid_line |= report.cut_mid_line;
        if let Some(off) = &report.disabled_checks {
            let all = merged.disabled_checks.get_or_insert_with(Vec::new);
            all.extend(
                off.iter()
                    .filter(|c| !all.contains(c))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
    }
    merged
}

/// `validation.log`: every instance's log in turn, each after a line that names its file, for
/// a reader who opens the one file the layer was told to write.
fn write_combined(dir: &Path, instances: &[InstanceLog], app_only: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{}.tmp", files::VALIDATION_LOG));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    writeln!(out, "{}", logs::COMBINED_HEADER)?;
    for log in instances {
        let what = match (&log.opener, log.unwatched) {
            (_, true) => {
                "no preloaded library saw this open: a later one may have truncated it".to_string()
            }
            (Some(h), _) => format!(
                "opened by process {} ({}) at t_ns {}",
                h.pid, h.program, h.t_ns
            ),
            (None, _) => "no header: who opened it is unknown".to_string(),
        };
        writeln!(out, "# ---- {}: {what}", log.file)?;
        // Copied, not read whole: 100,000 messages are a log of a hundred megabytes.
        let mut file = std::fs::File::open(dir.join(&log.file))?;
        let copied = std::io::copy(&mut file, &mut out)?;
        let mut last = [b'\n'];
        if copied > 0 {
            file.seek(std::io::SeekFrom::End(-1))?;
            file.read_exact(&mut last)?;
        }
        if last[0] != b'\n' {
            out.write_all(b"\n")?;
        }
    }
    if !app_only.is_empty() {
        writeln!(
            out,
            "# ---- {}/{}: what the layer gave the application's own debug messengers and did not log",
            logs::DIR,
            logs::APP_MESSAGES
        )?;
        out.write_all(app_only.as_bytes())?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(tmp, dir.join(files::VALIDATION_LOG))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_log_to_the_given_absolute_file() {
        let text = settings_text(Path::new("/tmp/r/validation.log"));
        assert!(text.contains("khronos_validation.log_filename = /tmp/r/validation.log\n"));
        assert!(text.contains("VK_DBG_LAYER_ACTION_LOG_MSG"));
        // `info` for the layer's status message, which names the disabled checks.
        assert!(text.contains("khronos_validation.report_flags = error,warn,info\n"));
        assert!(!text.contains("DEFAULT"));
    }

    #[test]
    fn every_instance_log_is_read_and_a_log_no_preload_saw_is_set_apart() {
        let dir = tempfile::tempdir().unwrap();
        let logs_dir = dir.path().join(logs::DIR);
        std::fs::create_dir(&logs_dir).unwrap();
        let leak = "Validation Error: [ VUID-vkDestroyDevice-device-00378 ] x\n";
        let opened = |pid, t_ns| {
            Header {
                pid,
                t_ns,
                program: "/bin/app".into(),
            }
            .line()
        };
        // Opened later, named first: the order is the opening time's.
        std::fs::write(
            logs_dir.join("20-1.log"),
            format!("{}{leak}", opened(20, 9)),
        )
        .unwrap();
        std::fs::write(
            logs_dir.join("30-1.log"),
            format!("{}{leak}cut", opened(30, 5)),
        )
        .unwrap();
        std::fs::write(dir.path().join(files::VALIDATION_LOG), leak).unwrap();
        let read = ValidationLogs::read(dir.path()).unwrap().unwrap();
        let files: Vec<&str> = read.instances.iter().map(|l| l.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "validation.d/30-1.log",
                "validation.d/20-1.log",
                "validation.d/unwatched.log"
            ]
        );
        assert_eq!(read.instances[0].opener.as_ref().map(|h| h.pid), Some(30));
        assert!(read.instances[2].unwatched && read.instances[2].opener.is_none());
        assert_eq!(
            read.merged.ids["VUID-vkDestroyDevice-device-00378"].count,
            3
        );
        assert!(read.merged.cut_mid_line);
        // The configured path now holds every log in turn, and reading again gives the same.
        let combined = std::fs::read_to_string(dir.path().join(files::VALIDATION_LOG)).unwrap();
        assert!(combined.starts_with(logs::COMBINED_HEADER), "{combined}");
        assert_eq!(combined.matches(leak).count(), 3, "{combined}");
        assert!(
            combined.contains("cut\n# ---- validation.d/20-1.log"),
            "{combined}"
        );
        assert_eq!(ValidationLogs::read(dir.path()).unwrap().unwrap(), read);
        // No log at all: the layer never wrote one.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(ValidationLogs::read(empty.path()).unwrap(), None);
    }

    #[test]
    fn a_message_given_to_the_application_counts_once_whether_or_not_the_layer_logged_it() {
        let dir = tempfile::tempdir().unwrap();
        let logs_dir = dir.path().join(logs::DIR);
        std::fs::create_dir(&logs_dir).unwrap();
        let header = Header {
            pid: 7,
            t_ns: 1,
            program: "/bin/app".into(),
        }
        .line();
        let logged = "Validation Error: [ VUID-vkDestroyDevice-device-00378 ] buffer 0x1\nleft";
        std::fs::write(logs_dir.join("7-1.log"), format!("{header}x - {logged}\n")).unwrap();
        // The same message twice: the layer logged it once (a layer that logs and calls the
        // application's messenger); another only reached the application (a layer before 1.3.239).
        let witnessed = format!(
            "[ VUID-vkDestroyDevice-device-00378 ] (ERROR / SPEC): {one}\n\
             [ VUID-vkDestroyDevice-device-00378 ] (ERROR / SPEC): {one}\n\
             [ VUID-vkDestroyInstance-instance-00629 ] (ERROR / SPEC): Validation Error: [ VUID-vkDestroyInstance-instance-00629 ] y\n\
             {UNWITNESSED}an instance messenger behind a chained structure of type 5\n",
            one = logged.replace('\n', " "),
            UNWITNESSED = logs::UNWITNESSED,
        );
        std::fs::write(logs_dir.join(logs::APP_MESSAGES), witnessed).unwrap();
        let read = ValidationLogs::read(dir.path()).unwrap().unwrap();
        assert_eq!(
            read.instances.len(),
            1,
            "the witness file is no instance's log"
        );
        let count = |r: &VuidReport, id: &str| r.ids.get(id).map_or(0, |s| s.count);
        assert_eq!(
            count(&read.app_only, "VUID-vkDestroyDevice-device-00378"),
            1
        );
        assert_eq!(count(&read.merged, "VUID-vkDestroyDevice-device-00378"), 2);
        assert_eq!(
            count(&read.merged, "VUID-vkDestroyInstance-instance-00629"),
            1
        );
        assert_eq!(
            read.unwitnessed,
            ["an instance messenger behind a chained structure of type 5"]
        );
        let combined = std::fs::read_to_string(dir.path().join(files::VALIDATION_LOG)).unwrap();
        assert!(
            combined.contains("# ---- validation.d/app-messengers.txt"),
            "{combined}"
        );
        assert_eq!(ValidationLogs::read(dir.path()).unwrap().unwrap(), read);
    }

    #[test]
    fn layers_before_1_3_239_are_not_trusted_to_log_beside_an_application_messenger() {
        let layer = |v: &str| ValidationLayer {
            manifest: PathBuf::from("/m.json"),
            api_version: v.into(),
            implementation_version: String::new(),
            library: PathBuf::from("/l.so"),
            pinned: false,
        };
        for (version, trusted) in [
            ("1.2.162", false),
            ("1.3.204", false),
            ("1.3.239", true),
            ("1.4.309", true),
            ("", false),
            ("1.3", false),
        ] {
            assert_eq!(
                layer(version).logs_beside_app_messengers(),
                trusted,
                "{version}"
            );
        }
    }

    #[test]
    fn stray_settings_are_recognised_but_the_layer_path_is_kept() {
        assert!(is_stray_setting("VK_KHRONOS_VALIDATION_DEBUG_ACTION"));
        assert!(is_stray_setting("VK_LAYER_ENABLES"));
        assert!(!is_stray_setting("VK_LAYER_PATH"));
        assert!(!is_stray_setting("VK_ICD_FILENAMES"));
    }

    #[test]
    fn a_manifest_whose_library_is_missing_is_an_error_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("v.json");
        std::fs::write(
            &manifest,
            r#"{"file_format_version":"1.2.0","layer":{"name":"VK_LAYER_KHRONOS_validation","type":"GLOBAL","library_path":"./libnope.so","api_version":"1.3.239","implementation_version":"1"}}"#,
        )
        .unwrap();
        let err = read_layer_manifest(&manifest).unwrap_err().to_string();
        assert!(
            err.contains("v.json") && err.contains("libnope.so"),
            "{err}"
        );
    }

    #[test]
    fn manifests_of_other_layers_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("o.json");
        std::fs::write(
            &manifest,
            r#"{"layer":{"name":"VK_LAYER_MESA_overlay","library_path":"x.so"}}"#,
        )
        .unwrap();
        assert!(read_layer_manifest(&manifest).unwrap().is_none());
    }
}
