//! VUID extraction from a validation layer log.
//!
//! The one version-proof anchor is the bracketed message id, present in every
//! layer since 1.2: `Validation Error: [ VUID-vkDestroyDevice-device-00378 ]`.
//! 1.3.2xx writes one line per message (`VUID-…(ERROR / SPEC): msgNum: … -
//! Validation Error: [ VUID-… ] Object 0: …`); 1.4.3xx writes the header line
//! and then the message text, the spec quote and the objects on lines of their
//! own. Only the header line carries the bracketed id, so counting bracketed
//! ids counts messages in both formats.
//!
//! Information is no finding: only errors and warnings count. The one
//! information message read is the layer's status at `vkCreateInstance`
//! (`UNASSIGNED-khronos-validation-createinstance-status-message`, written
//! when `report_flags` has `info`), for its `Current Disables:` line: checks
//! an application turned off itself with `VkValidationFeaturesEXT` or
//! `VkValidationFlagsEXT` leave a silent log that proves nothing.

use crate::support::glob;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;

/// Lines longer than this are cut: the id sits at the start of its line.
const MAX_LINE: usize = 64 * 1024;

/// How severe the layer said a message is, most severe first (the order is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Severity {
    /// `Validation Error` (1.4.3xx) or `(ERROR /` (1.3.2xx), and any line that says neither.
    Error,
    /// `Validation Warning` or `(WARN /`.
    Warning,
    /// `Performance Warning` or `/ PERF)`.
    Performance,
    /// `Validation Information` or `(INFO /`; such messages are not counted.
    Info,
}

/// How one message id showed in a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VuidStat {
    /// Messages with this id.
    pub(crate) count: u64,
    /// The most severe of them.
    pub(crate) severity: Severity,
}

/// Every message id a log holds, with how often and how severe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VuidReport {
    /// Each bracketed `VUID-…` or `UNASSIGNED-…` id the log holds, as the layer wrote it;
    /// information messages are left out.
    pub ids: BTreeMap<String, VuidStat>,
    /// The log ended in the middle of a line (the process died while writing).
    pub cut_mid_line: bool,
    /// The checks the layer's status message says are disabled (empty for
    /// `None.`); `None` when the log holds no status message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) disabled_checks: Option<Vec<String>>,
}

/// The id of the layer's status message at `vkCreateInstance`.
pub(crate) const STATUS_MESSAGE: &str =
    "UNASSIGNED-khronos-validation-createinstance-status-message";

/// Where a scan is: outside the layer's status message, or inside it and in which form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Outside,
    /// `    Current Disables: A, B.` (layers 1.3.2xx to 1.4.309).
    Disables,
    /// `Current Validation Enabled:` and one `  - Name` line per check enabled (1.4.363): what
    /// is missing from the list was turned off.
    EnabledList,
}

/// The status message's id as each layer writes it: the 1.4 layers renamed it, and 1.4.363
/// lists what is enabled instead of what is disabled.
const STATUS_IDS: [(&str, Status); 3] = [
    (STATUS_MESSAGE, Status::Disables),
    ("WARNING-CreateInstance-status-message", Status::Disables),
    ("CURRENT-VALIDATION-ENABLED", Status::EnabledList),
];

/// The checks layer 1.4.363 lists as enabled when nothing is turned off, each with the flag
/// that turns it off: a missing one is reported by that name, as the older layers report it.
const ENABLED_BY_DEFAULT: [(&str, &str); 5] = [
    (
        "Core Checks",
        "VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT",
    ),
    (
        "Stateless Parameter",
        "VK_VALIDATION_FEATURE_DISABLE_API_PARAMETERS_EXT",
    ),
    (
        "Object lifetime",
        "VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT",
    ),
    (
        "Thread Safety",
        "VK_VALIDATION_FEATURE_DISABLE_THREAD_SAFETY_EXT",
    ),
    (
        "Handle Wrapping",
        "VK_VALIDATION_FEATURE_DISABLE_UNIQUE_HANDLES_EXT",
    ),
];

fn status_form(line: &str) -> Option<Status> {
    STATUS_IDS
        .iter()
        .find(|(id, _)| line.contains(&format!("[ {id} ]")))
        .map(|&(_, form)| form)
}

impl VuidReport {
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.ids.values().map(|s| s.count).sum()
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.ids.keys().map(String::as_str)
    }

    /// The checks disabled while the layer reported a clean run: what an
    /// application turned off itself (vkexit's settings disable none).
    pub(crate) fn disabled(&self) -> &[String] {
        self.disabled_checks.as_deref().unwrap_or_default()
    }

    /// Adds one line; `status` says whether the lines read so far are the
    /// status message's, whose own lines follow its header.
    fn add_line(&mut self, line: &str, status: &mut Status) {
        if let Some(form) = status_form(line) {
            *status = form;
            if form == Status::EnabledList {
                self.disabled_checks
                    .get_or_insert_with(Vec::new)
                    .extend(ENABLED_BY_DEFAULT.map(|(_, flag)| flag.to_string()));
            }
            return;
        }
        let Some((id, _)) = message_id(line) else {
            if line.contains("| MessageID = ") {
                // The header of a message whose id is neither VUID- nor UNASSIGNED-.
                *status = Status::Outside;
            } else if *status != Status::Outside {
                self.read_status_line(line, *status);
            }
            return;
        };
        let id = id.to_string();
        let severity = severity_of(line);
        *status = Status::Outside;
        if is_information(line, severity) {
            return;
        }
        let stat = self
            .ids
            .entry(id)
            .or_insert(VuidStat { count: 0, severity });
        stat.count += 1;
        stat.severity = stat.severity.min(severity);
    }
}

impl VuidReport {
    /// `    Current Disables: VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT, … .`
    /// or `None.`, as layers 1.3.239 and 1.4.309 write it; or `  - Core Checks`, one
    /// enabled check of layer 1.4.363's list.
    fn read_status_line(&mut self, line: &str, form: Status) {
        if form == Status::EnabledList {
            if let (Some(name), Some(off)) = (
                line.trim().strip_prefix("- "),
                self.disabled_checks.as_mut(),
            ) {
                let flag = ENABLED_BY_DEFAULT.iter().find(|(n, _)| *n == name);
                if let Some(at) = flag.and_then(|(_, f)| off.iter().position(|c| c == f)) {
                    off.remove(at);
                }
            }
            return;
        }
        let Some(list) = line.trim().strip_prefix("Current Disables:") else {
            return;
        };
        let checks = list
            .split(',')
            .map(|c| c.trim().trim_end_matches('.'))
            .filter(|c| !c.is_empty() && *c != "None")
            .map(str::to_string);
        self.disabled_checks
            .get_or_insert_with(Vec::new)
            .extend(checks);
    }
}

/// A message's id as the layer prints it in its header, `[ VUID-… ]` or `[ UNASSIGNED-… ]`:
/// the first such id in `line`, and where in `line` its closing bracket ends.
pub(super) fn message_id(line: &str) -> Option<(&str, usize)> {
    let mut from = 0;
    while let Some(at) = line[from..].find("[ ") {
        let start = from + at + 2;
        let rest = &line[start..];
        if rest.starts_with("VUID-") || rest.starts_with("UNASSIGNED-") {
            let dash = rest.find('-').expect("both prefixes hold a dash") + 1;
            let len = dash
                + rest[dash..]
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
                    .count();
            if len > dash && rest[len..].starts_with(" ]") {
                return Some((&rest[..len], start + len + 2));
            }
        }
        from = start - 1;
    }
    None
}

pub(super) fn severity_of(line: &str) -> Severity {
    if line.contains("Performance Warning") || line.contains("/ PERF)") {
        Severity::Performance
    } else if line.contains("Validation Warning") || line.contains("(WARN /") {
        Severity::Warning
    } else if line.contains("Validation Information") || line.contains("(INFO /") {
        Severity::Info
    } else {
        Severity::Error
    }
}

/// Information is no finding; a line that says error anywhere counts, whatever
/// else it says.
pub(super) fn is_information(line: &str, severity: Severity) -> bool {
    severity == Severity::Info && !line.contains("Validation Error") && !line.contains("(ERROR /")
}

/// Scans a whole log from any reader, in bounded memory, whatever its bytes.
pub fn scan(mut reader: impl Read) -> std::io::Result<VuidReport> {
    let mut report = VuidReport::default();
    let mut in_status = Status::Outside;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&piece[..piece.len().min(room)]);
            if piece.ends_with(b"\n") {
                report.add_line(&String::from_utf8_lossy(&line), &mut in_status);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        report.cut_mid_line = true;
        report.add_line(&String::from_utf8_lossy(&line), &mut in_status);
    }
    Ok(report)
}

#[cfg(test)]
pub(crate) fn scan_str(text: &str) -> VuidReport {
    scan(text.as_bytes()).expect("reading from memory cannot fail")
}

/// A check the validation layer reports under a new id since a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Renamed {
    pub(crate) old: &'static str,
    pub(crate) current: &'static str,
    /// The first layer version that logs `current`.
    pub(crate) since: &'static str,
}

/// Every rename of a check vkexit's baselines, docs and tests name. The
/// others they name kept their ids through layer 1.4.3xx:
/// `VUID-vkDestroyInstance-instance-00629`, `VUID-vkDestroyBuffer-buffer-00922`,
/// `VUID-vkDestroyEvent-event-01145`, `VUID-vkFreeMemory-memory-00677`.
pub(crate) const RENAMED: [Renamed; 1] = [Renamed {
    // The spec split "all child objects destroyed" into 05137 when VulkanSC
    // made some children impossible to destroy; the object tracker followed.
    old: "VUID-vkDestroyDevice-device-00378",
    current: "VUID-vkDestroyDevice-device-05137",
    since: "1.3.268",
}];

/// The name the newest layer gives the check this id names.
pub(crate) fn current_name(id: &str) -> &str {
    RENAMED
        .iter()
        .find(|r| r.old == id)
        .map_or(id, |r| r.current)
}

/// Every name of the check this id names: the id first, then its other names.
pub fn names(id: &str) -> impl Iterator<Item = &str> {
    let current = current_name(id);
    let older = RENAMED
        .iter()
        .filter(move |r| r.current == current)
        .map(|r| r.old);
    std::iter::once(id).chain(
        std::iter::once(current)
            .chain(older)
            .filter(move |n| *n != id),
    )
}

/// Whether a pattern from a baseline or an allow-list (`*` allowed) names the
/// check a layer logged as `id`, under any of the check's names: a baseline
/// written under one layer holds under another.
pub(crate) fn matches(pattern: &str, id: &str) -> bool {
    names(id).any(|name| glob::matches(pattern, name))
}

/// The logged ids that a newer layer names differently, each with its
/// current name: a results file's `vuid_names`.
pub(crate) fn renamed_ids<'a>(
    ids: impl IntoIterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    ids.into_iter()
        .filter(|id| current_name(id) != id.as_str())
        .map(|id| (id.clone(), current_name(id).to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_id_is_read_where_the_layer_prints_it() {
        let line = "Validation Error: [ VUID-vkDestroyDevice-device-05137 ] | MessageID = 0x1";
        let (id, end) = message_id(line).expect("an id");
        assert_eq!(id, "VUID-vkDestroyDevice-device-05137");
        assert_eq!(&line[end..], " | MessageID = 0x1");
        let unassigned = "x [ UNASSIGNED-Threading-MultipleThreads ] y";
        assert_eq!(
            message_id(unassigned).map(|m| m.0),
            Some("UNASSIGNED-Threading-MultipleThreads")
        );
        // The first whole id counts; brackets that hold no id, an empty id or a space inside
        // it, and ids of other kinds are passed over.
        let later = "[ [ VUID- ] [ VUID-a b ] [ SYNC-HAZARD ] [ VUID-x_1-2 ] [ VUID-y ]";
        assert_eq!(message_id(later), Some(("VUID-x_1-2", 55)));
        for none in [
            "",
            "[ VUID-x",
            "VUID-x ]",
            "[VUID-x ]",
            "[ vuid-x ]",
            "[ VUID-é ]",
        ] {
            assert_eq!(message_id(none), None, "{none:?}");
        }
    }

    const LAYER_1_3_239: &str = "VUID-vkDestroyDevice-device-00378(ERROR / SPEC): msgNum: 1901072314 - Validation Error: [ VUID-vkDestroyDevice-device-00378 ] Object 0: handle = 0x55d0c6f3b0a0, type = VK_OBJECT_TYPE_DEVICE; Object 1: handle = 0xfab64d0000000002, type = VK_OBJECT_TYPE_BUFFER; | MessageID = 0x71500fba | OBJ ERROR : For VkDevice 0x55d0c6f3b0a0[], VkBuffer 0xfab64d0000000002[] has not been destroyed. The Vulkan spec states: All child objects created on device must have been destroyed prior to destroying device (https://vulkan.lunarg.com/doc/view/1.3.239.0/linux/1.3-extensions/vkspec.html#VUID-vkDestroyDevice-device-00378)
    Objects: 2
        [0] 0x55d0c6f3b0a0, type: 3, name: NULL
        [1] 0xfab64d0000000002, type: 9, name: NULL
VUID-vkDestroyDevice-device-00378(ERROR / SPEC): msgNum: 1901072314 - Validation Error: [ VUID-vkDestroyDevice-device-00378 ] Object 0: handle = 0x55d0c6f3b0a0, type = VK_OBJECT_TYPE_DEVICE; Object 1: handle = 0xead9370000000003, type = VK_OBJECT_TYPE_DEVICE_MEMORY; | MessageID = 0x71500fba | OBJ ERROR : For VkDevice 0x55d0c6f3b0a0[], VkDeviceMemory 0xead9370000000003[] has not been destroyed. The Vulkan spec states: All child objects created on device must have been destroyed prior to destroying device (https://vulkan.lunarg.com/doc/view/1.3.239.0/linux/1.3-extensions/vkspec.html#VUID-vkDestroyDevice-device-00378)
    Objects: 2
        [0] 0x55d0c6f3b0a0, type: 3, name: NULL
        [1] 0xead9370000000003, type: 8, name: NULL
UNASSIGNED-Threading-MultipleThreads(ERROR / SPEC): msgNum: 1810669668 - Validation Error: [ UNASSIGNED-Threading-MultipleThreads ] Object 0: handle = 0x1, type = VK_OBJECT_TYPE_QUEUE; | MessageID = 0x6bec9b64 | THREADING ERROR : vkQueueSubmit(): object of type VkQueue is simultaneously used in thread 1 and thread 2
";

    const LAYER_1_4_3XX: &str = "Validation Error: [ VUID-vkDestroyDevice-device-05137 ] | MessageID = 0x4872eaa0
vkDestroyDevice(): Object Tracking - For VkDevice 0x5581a0e2c3b0, VkBuffer 0xcb3ee80000000007 has not been destroyed.
The Vulkan spec states: All child objects created on device must have been destroyed prior to destroying device (https://docs.vulkan.org/spec/latest/chapters/devsandqueues.html#VUID-vkDestroyDevice-device-05137)
Objects: 2
    [0] VkDevice 0x5581a0e2c3b0
    [1] VkBuffer 0xcb3ee80000000007

Validation Warning: [ UNASSIGNED-BestPractices-vkCreateDevice-specialuse-extension ] | MessageID = 0x675dc32e
vkCreateDevice(): Attempting to enable extension VK_EXT_debug_utils, but this extension is intended to support use by applications.

";

    #[test]
    fn one_line_format_counts_each_message_once() {
        let r = scan_str(LAYER_1_3_239);
        assert_eq!(r.ids["VUID-vkDestroyDevice-device-00378"].count, 2);
        assert_eq!(r.ids["UNASSIGNED-Threading-MultipleThreads"].count, 1);
        assert_eq!(
            r.ids["VUID-vkDestroyDevice-device-00378"].severity,
            Severity::Error
        );
        assert_eq!(r.total(), 3);
        assert!(!r.cut_mid_line);
    }

    #[test]
    fn multi_line_format_reads_the_header_and_not_the_spec_link() {
        let r = scan_str(LAYER_1_4_3XX);
        let names: Vec<_> = r.names().collect();
        assert_eq!(
            names,
            [
                "UNASSIGNED-BestPractices-vkCreateDevice-specialuse-extension",
                "VUID-vkDestroyDevice-device-05137"
            ]
        );
        assert_eq!(r.ids["VUID-vkDestroyDevice-device-05137"].count, 1);
        assert_eq!(
            r.ids["UNASSIGNED-BestPractices-vkCreateDevice-specialuse-extension"].severity,
            Severity::Warning
        );
    }

    #[test]
    fn a_log_cut_mid_line_still_yields_its_ids() {
        let cut = "Validation Error: [ VUID-vkDestroyBuffer-buffer-00922 ] Object 0: hand";
        let r = scan_str(cut);
        assert!(r.cut_mid_line);
        assert_eq!(r.ids["VUID-vkDestroyBuffer-buffer-00922"].count, 1);
    }

    #[test]
    fn bytes_that_are_not_utf8_do_not_hide_an_id() {
        let mut bytes =
            b"\xff\xfe garbage\nValidation Error: [ VUID-vkDestroyEvent-event-01145 ] \xc3\x28\n"
                .to_vec();
        bytes.extend_from_slice(&[0x80; 10]);
        let r = scan(&bytes[..]).unwrap();
        assert_eq!(r.ids["VUID-vkDestroyEvent-event-01145"].count, 1);
        assert!(r.cut_mid_line);
    }

    #[test]
    fn an_empty_log_and_prose_without_brackets_have_no_ids() {
        assert!(scan_str("").is_empty());
        assert!(scan_str("see #VUID-vkDestroyDevice-device-00378 in the spec\n").is_empty());
    }

    #[test]
    fn many_duplicates_are_all_counted() {
        let line = "Validation Error: [ VUID-vkDestroyDevice-device-00378 ] x\n";
        let r = scan_str(&line.repeat(250));
        assert_eq!(r.ids["VUID-vkDestroyDevice-device-00378"].count, 250);
    }

    /// The status message of layer 1.3.239 with `report_flags = error,warn,info`, for an
    /// application that passed `VkValidationFeaturesEXT` with `DISABLE_ALL` (abridged).
    const STATUS_DISABLED: &str = "UNASSIGNED-khronos-validation-createinstance-status-message(INFO / SPEC): msgNum: -671457468 - Validation Information: [ UNASSIGNED-khronos-validation-createinstance-status-message ] Object 0: handle = 0x55d89ba8d2a0, type = VK_OBJECT_TYPE_INSTANCE; | MessageID = 0xd7fa5f44 | Khronos Validation Layer Active:
    Settings File: Found at /tmp/r/vk_layer_settings.txt specified by environment variable (VK_LAYER_SETTINGS_PATH).
    Current Enables: None.
    Current Disables: VALIDATION_CHECK_DISABLE_COMMAND_BUFFER_STATE, VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT, VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT, 

    Objects: 1
        [0] 0x55d89ba8d2a0, type: 1, name: NULL
";

    #[test]
    fn the_status_message_is_no_finding_but_its_disabled_checks_are_read() {
        let clean = STATUS_DISABLED.replace(
            "Current Disables: VALIDATION_CHECK_DISABLE_COMMAND_BUFFER_STATE, VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT, VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT, ",
            "Current Disables: None.",
        );
        let r = scan_str(&clean);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(r.disabled_checks, Some(vec![]));
        let r = scan_str(STATUS_DISABLED);
        assert!(r.is_empty());
        assert_eq!(
            r.disabled(),
            [
                "VALIDATION_CHECK_DISABLE_COMMAND_BUFFER_STATE",
                "VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT",
                "VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT"
            ]
        );
        // Without a status message, nothing is known of disabled checks.
        assert_eq!(scan_str(LAYER_1_3_239).disabled_checks, None);
    }

    /// The status messages of layers 1.4.309 (Debian 13) and 1.4.363 (sid) for an application
    /// that passed `VkValidationFeaturesEXT` with `DISABLE_ALL`, from their logs.
    const STATUS_DISABLED_1_4_309: &str = "Validation Information: [ WARNING-CreateInstance-status-message ] | MessageID = 0x23dfd876
vkCreateInstance(): Khronos Validation Layer Active:
    Current Enables: None.
    Current Disables: VALIDATION_CHECK_DISABLE_COMMAND_BUFFER_STATE, VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT, VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT.

Objects: 1
    [0] VkInstance 0x556bc1e67050

";
    const STATUS_DISABLED_1_4_363: &str =
        "Validation Information: [ CURRENT-VALIDATION-ENABLED ] | MessageID = 0xfd7b2292
vkCreateInstance(): Current Validation Enabled:

Objects: 1
    [0] VkInstance 0x562f2a61c200

";
    const STATUS_CLEAN_1_4_363: &str =
        "Validation Information: [ CURRENT-VALIDATION-ENABLED ] | MessageID = 0xfd7b2292
vkCreateInstance(): Current Validation Enabled:
  - Core Checks
  - Stateless Parameter
  - Object lifetime
  - Thread Safety
  - Handle Wrapping

Objects: 1
    [0] VkInstance 0x55a7bab610c0

Validation Information: [ WARNING-cache-file-error ] | MessageID = 0xb8515d13
vkCreateDevice(): Cannot open shader validation cache for reading (it may not exist yet)
  - Thread Safety
";

    #[test]
    fn the_status_messages_of_1_4_layers_are_read_too() {
        let r = scan_str(STATUS_DISABLED_1_4_309);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(r.disabled().len(), 3, "{r:?}");
        let clean = STATUS_DISABLED_1_4_309.replace(
            "Current Disables: VALIDATION_CHECK_DISABLE_COMMAND_BUFFER_STATE, VK_VALIDATION_FEATURE_DISABLE_OBJECT_LIFETIMES_EXT, VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT.",
            "Current Disables: None.",
        );
        assert_eq!(scan_str(&clean).disabled_checks, Some(vec![]));

        let r = scan_str(STATUS_DISABLED_1_4_363);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(r.disabled(), ENABLED_BY_DEFAULT.map(|(_, flag)| flag));
        let r = scan_str(STATUS_CLEAN_1_4_363);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(r.disabled_checks, Some(vec![]));
        // A check missing from the list was turned off; a bullet of a later message is not the
        // status message's.
        let one_off = STATUS_CLEAN_1_4_363.replacen("  - Thread Safety\n", "", 1);
        assert_eq!(
            scan_str(&one_off).disabled(),
            ["VK_VALIDATION_FEATURE_DISABLE_THREAD_SAFETY_EXT"]
        );
    }

    #[test]
    fn a_disables_line_outside_the_status_message_is_not_read() {
        let text = format!("{LAYER_1_3_239}    Current Disables: X.\n");
        assert_eq!(scan_str(&text).disabled_checks, None);
        let after = format!("{STATUS_DISABLED}{LAYER_1_3_239}    Current Disables: Y.\n");
        assert!(!scan_str(&after).disabled().contains(&"Y".to_string()));
    }

    #[test]
    fn an_information_message_is_not_counted() {
        let info = "Validation Information: [ UNASSIGNED-some-info ] x\n";
        assert!(scan_str(info).is_empty());
        let both = format!("{info}{LAYER_1_3_239}");
        assert_eq!(scan_str(&both).total(), 3);
        // An error that quotes "Validation Information" is still an error.
        let quoting = "Validation Error: [ VUID-x-y-01 ] says Validation Information\n";
        assert_eq!(scan_str(quoting).total(), 1);
    }

    #[test]
    fn an_overlong_line_is_cut_but_its_leading_id_kept() {
        let mut text = String::from("Validation Error: [ VUID-vkCmdDispatch-None-02697 ] ");
        text.push_str(&"x".repeat(3 * MAX_LINE));
        text.push('\n');
        let r = scan_str(&text);
        assert_eq!(r.ids["VUID-vkCmdDispatch-None-02697"].count, 1);
    }

    #[test]
    fn a_renamed_check_matches_under_either_name() {
        let old = "VUID-vkDestroyDevice-device-00378";
        let new = "VUID-vkDestroyDevice-device-05137";
        assert_eq!(current_name(old), new);
        assert_eq!(current_name(new), new);
        assert_eq!(names(old).collect::<Vec<_>>(), [old, new]);
        assert_eq!(names(new).collect::<Vec<_>>(), [new, old]);
        assert!(matches(old, new) && matches(new, old));
        assert!(matches("VUID-vkDestroyDevice-device-00*", new));
        assert!(!matches(old, "VUID-vkDestroyInstance-instance-00629"));
        let other = "VUID-vkDestroyBuffer-buffer-00922";
        assert_eq!(names(other).collect::<Vec<_>>(), [other]);
    }

    #[test]
    fn a_real_1_4_log_line_gives_the_check_a_1_3_baseline_names() {
        let logged = scan_str(LAYER_1_4_3XX);
        let id = logged.names().find(|n| n.starts_with("VUID-")).unwrap();
        assert!(matches("VUID-vkDestroyDevice-device-00378", id));
        let old = scan_str(LAYER_1_3_239);
        let ids: Vec<String> = old.names().map(str::to_string).collect();
        let renamed = renamed_ids(&ids);
        assert_eq!(
            renamed.into_iter().collect::<Vec<_>>(),
            [(
                "VUID-vkDestroyDevice-device-00378".to_string(),
                "VUID-vkDestroyDevice-device-05137".to_string()
            )]
        );
    }
}
