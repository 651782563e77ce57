//! What the validation layer said, not only which ids: the first message of
//! each id in a log, with the call it was raised in, the objects it names and
//! its text without the spec quote. A failing run's reports show these, so a
//! reader sees "VkBuffer 0x… has not been destroyed" without opening the log.
//!
//! Both log formats are read (see `vuid`): 1.3.2xx writes a message on one
//! line (`[ ID ] Object 0: handle = H, type = VK_OBJECT_TYPE_X; | MessageID =
//! … | TEXT The Vulkan spec states: …`); 1.4.3xx writes the header, then
//! `vkCall(): TEXT`, the spec quote and an `Objects:` list on lines of their own.

use super::vuid::{is_information, message_id, severity_of, STATUS_MESSAGE};
use std::io::{BufRead, BufReader, Read};

/// At most this many bytes of a log are read for messages; the ids themselves are
/// counted over the whole log by `vuid::scan`.
const MAX_READ: u64 = 16 * 1024 * 1024;
/// Text beyond this many characters is cut, with `…`.
const MAX_TEXT: usize = 400;

/// The first message of one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerMessage {
    /// `VUID-vkDestroyDevice-device-00378`, as the layer wrote it.
    pub id: String,
    /// The Vulkan call it was raised in (`vkDestroyDevice`), when the message or its id says.
    pub call: Option<String>,
    /// The objects it names, as `VkBuffer 0x10000000001`.
    pub objects: Vec<String>,
    /// What it says, on one line, without the spec quote.
    pub text: String,
}

impl LayerMessage {
    /// `VUID-…-00378 in vkDestroyDevice: For VkDevice 0x…, VkBuffer 0x… has not been destroyed.`
    pub fn line(&self) -> String {
        match &self.call {
            Some(call) => format!("{} in {call}: {}", self.id, self.text),
            None => format!("{}: {}", self.id, self.text),
        }
    }
}

/// The first message of each error or warning id in a log, in the order they first
/// appear, at most `max` of them; information messages and the layer's status are left out.
pub fn first_messages(reader: impl Read, max: usize) -> Vec<LayerMessage> {
    let mut out: Vec<LayerMessage> = Vec::new();
    // The 1.4.3xx message being read: its text and object lines follow its header.
    let mut open: Option<LayerMessage> = None;
    let mut in_objects = false;
    for line in BufReader::new(reader.take(MAX_READ)).split(b'\n') {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches('\r');
        if let Some((id, header_end)) = message_id(line) {
            finish(&mut out, open.take(), max);
            in_objects = false;
            let id = id.to_string();
            let skip = is_information(line, severity_of(line))
                || id == STATUS_MESSAGE
                || line.contains("status-message")
                || out.iter().any(|m| m.id == id);
            if !skip {
                open = Some(header(id, &line[header_end..]));
            }
            continue;
        }
        let Some(m) = open.as_mut() else { continue };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            finish(&mut out, open.take(), max);
        } else if trimmed.starts_with("Objects:") {
            in_objects = true;
        } else if in_objects {
            // `[0] VkDevice 0x…` (1.4.3xx); 1.3.2xx's `[0] 0x…, type: 3, name: NULL`
            // repeats the header's objects by number only.
            if let Some((_, object)) = trimmed.split_once("] ") {
                if object.starts_with("Vk") && !m.objects.iter().any(|o| o == object) {
                    m.objects.push(object.to_string());
                }
            }
        } else if m.text.is_empty() {
            m.text = body(trimmed, &mut m.call);
        }
    }
    finish(&mut out, open, max);
    out
}

fn finish(out: &mut Vec<LayerMessage>, m: Option<LayerMessage>, max: usize) {
    if let Some(mut m) = m {
        if out.len() < max {
            if m.call.is_none() {
                m.call = call_of_id(&m.id);
            }
            out.push(m);
        }
    }
}

/// What follows `[ ID ]` on the header line: in 1.3.2xx the objects and the text too.
fn header(id: String, rest: &str) -> LayerMessage {
    let mut m = LayerMessage {
        id,
        call: None,
        objects: Vec::new(),
        text: String::new(),
    };
    let mut parts = rest.splitn(3, " | ");
    let objects = parts.next().unwrap_or("");
    for object in objects.split(';') {
        let handle = field(object, "handle = ");
        let ty = field(object, "type = ");
        if let (Some(handle), Some(ty)) = (handle, ty) {
            m.objects.push(format!("{} {handle}", type_name(ty)));
        }
    }
    // `MessageID = 0x…`, then the text (1.3.2xx); nothing more in 1.4.3xx.
    if let (Some(_), Some(text)) = (parts.next(), parts.next()) {
        m.text = body(text, &mut m.call);
    }
    m
}

/// `handle = 0x55…, type = …` → the value after `key`, up to `,` or the end.
fn field<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    let at = object.find(key)? + key.len();
    let value = object[at..].split(',').next()?.trim();
    (!value.is_empty()).then_some(value)
}

/// `VK_OBJECT_TYPE_DEVICE_MEMORY` → `VkDeviceMemory`.
fn type_name(ty: &str) -> String {
    let Some(words) = ty.strip_prefix("VK_OBJECT_TYPE_") else {
        return ty.to_string();
    };
    let mut name = String::from("Vk");
    for word in words.split('_') {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            name.push(first);
            name.extend(chars.map(|c| c.to_ascii_lowercase()));
        }
    }
    // The acronyms the API spells in capitals.
    name.replace("Khr", "KHR").replace("Ext", "EXT")
}

/// The message's words: the call prefix taken off (`vkDestroyDevice(): `), the check's own
/// tag (`OBJ ERROR : `) and the spec quote dropped, empty debug names (`0x…[]`) removed.
fn body(text: &str, call: &mut Option<String>) -> String {
    let mut text = text.trim();
    if let Some(at) = text.find("The Vulkan spec states:") {
        text = text[..at].trim_end();
    }
    if let Some((tag, rest)) = text.split_once(" : ") {
        if !tag.is_empty() && tag.chars().all(|c| c.is_ascii_uppercase() || c == ' ') {
            text = rest.trim_start();
        }
    }
    if let Some((name, rest)) = text.split_once("(): ") {
        if name.starts_with("vk") && name.chars().all(|c| c.is_ascii_alphanumeric()) {
            *call = Some(name.to_string());
            text = rest;
        }
    } else if let Some(at) = text.find("(): ") {
        // `THREADING ERROR : vkQueueSubmit(): …` after the tag was taken off.
        let name = &text[..at];
        if name.starts_with("vk") && name.chars().all(|c| c.is_ascii_alphanumeric()) {
            *call = Some(name.to_string());
            text = &text[at + 4..];
        }
    }
    let mut clean = text.replace("[]", "");
    if clean.chars().count() > MAX_TEXT {
        clean = clean.chars().take(MAX_TEXT).collect::<String>() + "…";
    }
    clean
}

/// `VUID-vkDestroyDevice-device-00378` → `vkDestroyDevice`.
fn call_of_id(id: &str) -> Option<String> {
    let name = id.strip_prefix("VUID-")?.split('-').next()?;
    name.starts_with("vk").then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYER_1_3_239: &str = "UNASSIGNED-khronos-validation-createinstance-status-message(INFO / SPEC): msgNum: -671457468 - Validation Information: [ UNASSIGNED-khronos-validation-createinstance-status-message ] Object 0: handle = 0x55cfa8ed1760, type = VK_OBJECT_TYPE_INSTANCE; | MessageID = 0xd7fa5f44 | Khronos Validation Layer Active:
    Current Disables: None.

    Objects: 1
        [0] 0x55cfa8ed1760, type: 1, name: NULL
VUID-vkDestroyDevice-device-00378(ERROR / SPEC): msgNum: 1901072314 - Validation Error: [ VUID-vkDestroyDevice-device-00378 ] Object 0: handle = 0x55cfa971a2f0, type = VK_OBJECT_TYPE_DEVICE; Object 1: handle = 0x10000000001, type = VK_OBJECT_TYPE_BUFFER; | MessageID = 0x71500fba | OBJ ERROR : For VkDevice 0x55cfa971a2f0[], VkBuffer 0x10000000001[] has not been destroyed. The Vulkan spec states: All child objects created on device must have been destroyed prior to destroying device (https://www.khronos.org/registry/vulkan/specs/1.3-extensions/html/vkspec.html#VUID-vkDestroyDevice-device-00378)
    Objects: 2
        [0] 0x55cfa971a2f0, type: 3, name: NULL
        [1] 0x10000000001, type: 9, name: NULL
VUID-vkDestroyDevice-device-00378(ERROR / SPEC): msgNum: 1901072314 - Validation Error: [ VUID-vkDestroyDevice-device-00378 ] Object 0: handle = 0x55cfa971a2f0, type = VK_OBJECT_TYPE_DEVICE; Object 1: handle = 0x10000000002, type = VK_OBJECT_TYPE_DEVICE_MEMORY; | MessageID = 0x71500fba | OBJ ERROR : For VkDevice 0x55cfa971a2f0[], VkDeviceMemory 0x10000000002[] has not been destroyed. The Vulkan spec states: …
UNASSIGNED-Threading-MultipleThreads(ERROR / SPEC): msgNum: 1810669668 - Validation Error: [ UNASSIGNED-Threading-MultipleThreads ] Object 0: handle = 0x1, type = VK_OBJECT_TYPE_QUEUE; | MessageID = 0x6bec9b64 | THREADING ERROR : vkQueueSubmit(): object of type VkQueue is simultaneously used in thread 1 and thread 2
";

    const LAYER_1_4_3XX: &str = "Validation Error: [ VUID-vkDestroyDevice-device-05137 ] | MessageID = 0x4872eaa0
vkDestroyDevice(): Object Tracking - For VkDevice 0x5581a0e2c3b0, VkBuffer 0xcb3ee80000000007 has not been destroyed.
The Vulkan spec states: All child objects created on device must have been destroyed prior to destroying device (https://docs.vulkan.org/spec/latest/chapters/devsandqueues.html#VUID-vkDestroyDevice-device-05137)
Objects: 2
    [0] VkDevice 0x5581a0e2c3b0
    [1] VkBuffer 0xcb3ee80000000007

Validation Information: [ UNASSIGNED-some-info ] | MessageID = 0x1
vkCreateDevice(): nothing wrong.

Validation Warning: [ UNASSIGNED-BestPractices-vkCreateDevice-specialuse-extension ] | MessageID = 0x675dc32e
vkCreateDevice(): Attempting to enable extension VK_EXT_debug_utils, but this extension is intended to support use by applications.
";

    #[test]
    fn the_one_line_format_gives_call_objects_and_text_once_per_id() {
        let m = first_messages(LAYER_1_3_239.as_bytes(), 8);
        assert_eq!(m.len(), 2, "{m:#?}");
        assert_eq!(
            m[0],
            LayerMessage {
                id: "VUID-vkDestroyDevice-device-00378".into(),
                call: Some("vkDestroyDevice".into()),
                objects: vec![
                    "VkDevice 0x55cfa971a2f0".into(),
                    "VkBuffer 0x10000000001".into()
                ],
                text: "For VkDevice 0x55cfa971a2f0, VkBuffer 0x10000000001 has not been destroyed."
                    .into(),
            }
        );
        assert_eq!(
            m[0].line(),
            "VUID-vkDestroyDevice-device-00378 in vkDestroyDevice: For VkDevice 0x55cfa971a2f0, VkBuffer 0x10000000001 has not been destroyed."
        );
        assert_eq!(m[1].call.as_deref(), Some("vkQueueSubmit"));
        assert_eq!(
            m[1].text,
            "object of type VkQueue is simultaneously used in thread 1 and thread 2"
        );
        assert_eq!(first_messages(LAYER_1_3_239.as_bytes(), 1).len(), 1);
    }

    #[test]
    fn the_multi_line_format_reads_the_lines_after_the_header() {
        let m = first_messages(LAYER_1_4_3XX.as_bytes(), 8);
        assert_eq!(m.len(), 2, "{m:#?}");
        assert_eq!(m[0].id, "VUID-vkDestroyDevice-device-05137");
        assert_eq!(m[0].call.as_deref(), Some("vkDestroyDevice"));
        assert_eq!(
            m[0].text,
            "Object Tracking - For VkDevice 0x5581a0e2c3b0, VkBuffer 0xcb3ee80000000007 has not been destroyed."
        );
        assert_eq!(
            m[0].objects,
            ["VkDevice 0x5581a0e2c3b0", "VkBuffer 0xcb3ee80000000007"]
        );
        assert_eq!(m[1].call.as_deref(), Some("vkCreateDevice"));
    }

    #[test]
    fn garbage_and_cut_logs_give_what_they_hold() {
        assert!(first_messages(&b"\xff\xfe\n[ not an id ]\n"[..], 8).is_empty());
        let cut = "Validation Error: [ VUID-vkDestroyBuffer-buffer-00922 ] Object 0: hand";
        let m = first_messages(cut.as_bytes(), 8);
        assert_eq!(m[0].call.as_deref(), Some("vkDestroyBuffer"));
        assert!(m[0].objects.is_empty() && m[0].text.is_empty());
        assert_eq!(type_name("VK_OBJECT_TYPE_SURFACE_KHR"), "VkSurfaceKHR");
    }
}
