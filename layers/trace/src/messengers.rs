//! The application's own debug messengers, witnessed when `VKEXIT_APP_MESSAGES` names a file.
//!
//! A validation layer before 1.3.239 writes its log only while the application has no messenger
//! or report callback of its own: while one exists it skips its default callbacks, so each
//! finding reaches the application's callback alone, which may drop it, and the log vkexit reads
//! stays clean. This layer sits above validation and sees every messenger made: it registers its
//! own callback in the application's place, for every severity and type, writes each warning and
//! error to the file, then hands the application what it asked for, as it asked.
//!
//! Messengers chained to `VkInstanceCreateInfo` (those the layer uses inside `vkCreateInstance`
//! and `vkDestroyInstance`) are replaced in a copy of the chain; one behind a structure the layer
//! cannot copy is named in the file as unwitnessed, so that vkexit does not trust a clean log.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::sync::OnceLock;

use ash::vk;
use vkexit_evidence::validation_logs::{APP_MESSAGES_VAR, UNWITNESSED};

use crate::dispatch::CHAIN;

/// The witness file's path, when messengers are witnessed in this process.
fn witness_path() -> Option<&'static std::path::Path> {
    static PATH: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::var_os(APP_MESSAGES_VAR)
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from)
    })
    .as_deref()
}

/// The witness file, opened for appending at the first message, so that a run whose
/// application messengers got nothing leaves none.
fn witness() -> Option<&'static File> {
    static FILE: OnceLock<Option<File>> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = witness_path()?;
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .ok()
    })
    .as_ref()
}

/// Whether messengers are witnessed in this process.
pub fn witnessing() -> bool {
    witness_path().is_some()
}

/// One line, in one write: every process of a run appends to the same file.
fn write_line(line: &str) {
    if let Some(mut file) = witness() {
        let _ = file.write_all(line.as_bytes());
    }
}

thread_local! {
    /// The message last written by this thread: the layer hands one message to each of the
    /// application's messengers in turn, and it is written once.
    static LAST: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

/// Writes a message unless this thread just wrote the same one (same text at the same address).
fn write_once(message: *const c_char, line: &str) {
    let hash = fnv1a(line.as_bytes());
    let key = (message as usize, hash);
    if LAST.with(|last| last.replace(key)) != key {
        write_line(line);
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The text behind a C string the layer passed, or "" for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
unsafe fn text<'a>(p: *const c_char) -> std::borrow::Cow<'a, str> {
    if p.is_null() {
        return "".into();
    }
    // SAFETY: as the function requires.
    unsafe { CStr::from_ptr(p) }.to_string_lossy()
}

/// `[ ID ] (SEVERITY / TYPE): MESSAGE` with the message on one line, as the harness reads it;
/// `None` below warning severity.
fn line(id: &str, severity: &str, kind: &str, message: &str) -> String {
    let message = message.replace(['\n', '\r'], " ");
    match id.is_empty() {
        true => format!("({severity} / {kind}): {message}\n"),
        false => format!("[ {id} ] ({severity} / {kind}): {message}\n"),
    }
}

/// What the application asked of one messenger.
struct AppMessenger {
    callback: vk::PFN_vkDebugUtilsMessengerCallbackEXT,
    user_data: *mut c_void,
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
}

/// What the application asked of one report callback (`VK_EXT_debug_report`).
struct AppReport {
    callback: vk::PFN_vkDebugReportCallbackEXT,
    user_data: *mut c_void,
    flags: vk::DebugReportFlagsEXT,
}

const EVERY_SEVERITY: vk::DebugUtilsMessageSeverityFlagsEXT =
    vk::DebugUtilsMessageSeverityFlagsEXT::from_raw(0x1111);
const EVERY_TYPE: vk::DebugUtilsMessageTypeFlagsEXT =
    vk::DebugUtilsMessageTypeFlagsEXT::from_raw(0x7);
const EVERY_REPORT: vk::DebugReportFlagsEXT = vk::DebugReportFlagsEXT::from_raw(0x1f);

/// The callback registered in the application's place.
unsafe extern "system" fn messenger_witness(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user_data` is the `AppMessenger` this layer leaked for this messenger.
    let app = unsafe { &*user_data.cast::<AppMessenger>() };
    // SAFETY: the layer passes valid callback data (or null) for the call.
    if let Some(d) = unsafe { data.as_ref() } {
        let level = match severity {
            s if s.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) => Some("ERROR"),
            s if s.contains(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING) => Some("WARN"),
            _ => None,
        };
        let kind = match types {
            t if t.contains(vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE) => "PERF",
            t if t.contains(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION) => "SPEC",
            _ => "GENERAL",
        };
        if let Some(level) = level {
            // SAFETY: the strings of valid callback data.
            let (id, message) = unsafe { (text(d.p_message_id_name), text(d.p_message)) };
            write_once(d.p_message, &line(&id, level, kind, &message));
        }
    }
    match app.callback {
        Some(callback) if app.severity.intersects(severity) && app.types.intersects(types) => {
            // SAFETY: the application's callback, with what the layer passed and its own data.
            unsafe { callback(severity, types, data, app.user_data) }
        }
        _ => vk::FALSE,
    }
}

/// The report callback registered in the application's place.
unsafe extern "system" fn report_witness(
    flags: vk::DebugReportFlagsEXT,
    object_type: vk::DebugReportObjectTypeEXT,
    object: u64,
    location: usize,
    code: i32,
    layer_prefix: *const c_char,
    message: *const c_char,
    user_data: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user_data` is the `AppReport` this layer leaked for this callback.
    let app = unsafe { &*user_data.cast::<AppReport>() };
    let level = match flags {
        f if f.contains(vk::DebugReportFlagsEXT::ERROR) => Some(("ERROR", "SPEC")),
        f if f.contains(vk::DebugReportFlagsEXT::PERFORMANCE_WARNING) => Some(("WARN", "PERF")),
        f if f.contains(vk::DebugReportFlagsEXT::WARNING) => Some(("WARN", "SPEC")),
        _ => None,
    };
    if let Some((level, kind)) = level {
        // SAFETY: the layer's message, valid for the call.
        let text = unsafe { text(message) };
        write_once(message, &line("", level, kind, &text));
    }
    match app.callback {
        Some(callback) if app.flags.intersects(flags) => {
            // SAFETY: the application's callback, with what the layer passed and its own data.
            unsafe {
                callback(
                    flags,
                    object_type,
                    object,
                    location,
                    code,
                    layer_prefix,
                    message,
                    app.user_data,
                )
            }
        }
        _ => vk::FALSE,
    }
}

/// The application's messenger with this layer's callback in its place. The application's part
/// is leaked: the layer may call a messenger until the instance is gone, and an instance's
/// `pNext` messengers again inside `vkDestroyInstance`.
fn witnessed_messenger(
    app: &vk::DebugUtilsMessengerCreateInfoEXT<'_>,
) -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    let ours = Box::leak(Box::new(AppMessenger {
        callback: app.pfn_user_callback,
        user_data: app.p_user_data,
        severity: app.message_severity,
        types: app.message_type,
    }));
    vk::DebugUtilsMessengerCreateInfoEXT {
        s_type: app.s_type,
        p_next: app.p_next,
        flags: app.flags,
        message_severity: EVERY_SEVERITY,
        message_type: EVERY_TYPE,
        pfn_user_callback: Some(messenger_witness),
        p_user_data: (ours as *mut AppMessenger).cast(),
        _marker: std::marker::PhantomData,
    }
}

/// As [`witnessed_messenger`], for a report callback.
fn witnessed_report(
    app: &vk::DebugReportCallbackCreateInfoEXT<'_>,
) -> vk::DebugReportCallbackCreateInfoEXT<'static> {
    let ours = Box::leak(Box::new(AppReport {
        callback: app.pfn_callback,
        user_data: app.p_user_data,
        flags: app.flags,
    }));
    vk::DebugReportCallbackCreateInfoEXT {
        s_type: app.s_type,
        p_next: app.p_next,
        flags: EVERY_REPORT,
        pfn_callback: Some(report_witness),
        p_user_data: (ours as *mut AppReport).cast(),
        _marker: std::marker::PhantomData,
    }
}

/// The next layer's function `name` for `instance`.
///
/// # Safety
/// `F` is the `PFN_vk*` type of `name`.
unsafe fn next_fn<F: Copy>(instance: vk::Instance, name: &CStr) -> Option<F> {
    let next = CHAIN.instance(instance)?;
    // SAFETY: the next layer's own vkGetInstanceProcAddr, for an instance it created.
    let f = unsafe { (next.get_instance_proc_addr)(next.handle, name.as_ptr()) }?;
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&f));
    // SAFETY: as the function requires, `F` is the function's type; both are fn pointers.
    Some(unsafe { std::mem::transmute_copy(&f) })
}

pub unsafe extern "system" fn create_debug_utils_messenger(
    instance: vk::Instance,
    p_create_info: *const vk::DebugUtilsMessengerCreateInfoEXT<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_messenger: *mut vk::DebugUtilsMessengerEXT,
) -> vk::Result {
    // SAFETY: the name's own type.
    let next: Option<vk::PFN_vkCreateDebugUtilsMessengerEXT> =
        unsafe { next_fn(instance, c"vkCreateDebugUtilsMessengerEXT") };
    let Some(create) = next else {
        return vk::Result::ERROR_EXTENSION_NOT_PRESENT;
    };
    // SAFETY: the application's create info, valid for the call, or null.
    let info = match unsafe { p_create_info.as_ref() } {
        Some(app) if witnessing() => witnessed_messenger(app),
        // SAFETY: the application's own call, forwarded unchanged.
        _ => return unsafe { create(instance, p_create_info, p_allocator, p_messenger) },
    };
    // SAFETY: the application's call with this layer's callback in its place.
    unsafe { create(instance, &info, p_allocator, p_messenger) }
}

pub unsafe extern "system" fn create_debug_report_callback(
    instance: vk::Instance,
    p_create_info: *const vk::DebugReportCallbackCreateInfoEXT<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_callback: *mut vk::DebugReportCallbackEXT,
) -> vk::Result {
    // SAFETY: the name's own type.
    let next: Option<vk::PFN_vkCreateDebugReportCallbackEXT> =
        unsafe { next_fn(instance, c"vkCreateDebugReportCallbackEXT") };
    let Some(create) = next else {
        return vk::Result::ERROR_EXTENSION_NOT_PRESENT;
    };
    // SAFETY: the application's create info, valid for the call, or null.
    let info = match unsafe { p_create_info.as_ref() } {
        Some(app) if witnessing() => witnessed_report(app),
        // SAFETY: the application's own call, forwarded unchanged.
        _ => return unsafe { create(instance, p_create_info, p_allocator, p_callback) },
    };
    // SAFETY: the application's call with this layer's callback in its place.
    unsafe { create(instance, &info, p_allocator, p_callback) }
}

/// Application structures that may stand before a messenger in `VkInstanceCreateInfo`'s chain,
/// with their sizes: the layer copies them to reach the messenger.
fn copyable_size(s_type: vk::StructureType) -> Option<usize> {
    use std::mem::size_of;
    Some(match s_type {
        vk::StructureType::DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT => {
            size_of::<vk::DebugUtilsMessengerCreateInfoEXT<'_>>()
        }
        vk::StructureType::DEBUG_REPORT_CALLBACK_CREATE_INFO_EXT => {
            size_of::<vk::DebugReportCallbackCreateInfoEXT<'_>>()
        }
        vk::StructureType::VALIDATION_FEATURES_EXT => size_of::<vk::ValidationFeaturesEXT<'_>>(),
        vk::StructureType::VALIDATION_FLAGS_EXT => size_of::<vk::ValidationFlagsEXT<'_>>(),
        vk::StructureType::LAYER_SETTINGS_CREATE_INFO_EXT => {
            size_of::<vk::LayerSettingsCreateInfoEXT<'_>>()
        }
        vk::StructureType::DIRECT_DRIVER_LOADING_LIST_LUNARG => {
            size_of::<vk::DirectDriverLoadingListLUNARG<'_>>()
        }
        _ => return None,
    })
}

fn is_messenger(s_type: vk::StructureType) -> bool {
    matches!(
        s_type,
        vk::StructureType::DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT
            | vk::StructureType::DEBUG_REPORT_CALLBACK_CREATE_INFO_EXT
    )
}

/// A `VkInstanceCreateInfo` whose messengers were put in the layer's hands for the call; restores
/// the loader's structure it relinked when dropped.
pub struct InstanceMessengers {
    info: *const vk::InstanceCreateInfo<'static>,
    relinked: Option<(
        *mut vk::BaseOutStructure<'static>,
        *mut vk::BaseOutStructure<'static>,
    )>,
}

impl InstanceMessengers {
    /// The create info to pass down.
    pub fn info(&self) -> *const vk::InstanceCreateInfo<'static> {
        self.info
    }
}

impl Drop for InstanceMessengers {
    fn drop(&mut self) {
        if let Some((node, next)) = self.relinked {
            // SAFETY: the loader's own structure, still alive inside its vkCreateInstance, whose
            // link this layer changed for the call.
            unsafe { (*node).p_next = next };
        }
    }
}

/// The chain of `p_create_info` with each application messenger replaced by a witnessed copy.
///
/// The loader's own `VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO` structures come first and are
/// writable (layers advance them): the last one before the first messenger is pointed at copies
/// of the application's structures up to its last messenger, which then link to the rest of the
/// chain unchanged; the loader's link is restored after the call. Nothing changes when nothing is
/// witnessed or no messenger is chained.
///
/// # Safety
/// `p_create_info` is the create info the loader passed to this layer's `vkCreateInstance`.
pub unsafe fn witness_instance_messengers(
    p_create_info: *const vk::InstanceCreateInfo<'static>,
) -> InstanceMessengers {
    let unchanged = InstanceMessengers {
        info: p_create_info,
        relinked: None,
    };
    if !witnessing() {
        return unchanged;
    }
    // SAFETY: the loader's create info, valid for the call.
    let Some(info) = (unsafe { p_create_info.as_ref() }) else {
        return unchanged;
    };
    let mut nodes = Vec::new();
    let mut at = info
        .p_next
        .cast::<vk::BaseOutStructure<'static>>()
        .cast_mut();
    // SAFETY: a valid pNext chain: each node starts with sType and pNext.
    while let Some(node) = unsafe { at.as_ref() } {
        nodes.push((at, node.s_type));
        at = node.p_next;
    }
    let Some(last) = nodes.iter().rposition(|(_, s)| is_messenger(*s)) else {
        return unchanged;
    };
    let first = nodes
        .iter()
        .position(|(_, s)| is_messenger(*s))
        .unwrap_or(last);
    let anchor = nodes[..first]
        .iter()
        .rposition(|(_, s)| *s == vk::StructureType::LOADER_INSTANCE_CREATE_INFO);
    let from = anchor.map_or(0, |a| a + 1);
    let Some(anchor) = anchor else {
        write_line(&format!(
            "{UNWITNESSED}an instance messenger: no loader structure before it in the chain\n"
        ));
        return unchanged;
    };
    if let Some((_, s)) = nodes[from..=last]
        .iter()
        .find(|(_, s)| copyable_size(*s).is_none())
    {
        write_line(&format!(
            "{UNWITNESSED}an instance messenger behind a chained structure of type {}\n",
            s.as_raw()
        ));
        return unchanged;
    }
    // Copies, leaked: the validation layer may keep pointers into them until exit.
    let mut copies: Vec<*mut vk::BaseOutStructure<'static>> = Vec::new();
    for &(node, s_type) in &nodes[from..=last] {
        let size = copyable_size(s_type).expect("checked above");
        let buffer: &'static mut [u64] = Vec::leak(vec![0u64; size.div_ceil(8)]);
        let copy = buffer.as_mut_ptr().cast::<u8>();
        // SAFETY: the node is a structure of this type, `size` bytes long; the buffer as long.
        unsafe { std::ptr::copy_nonoverlapping(node.cast::<u8>(), copy, size) };
        // SAFETY: the copy is a structure of its type, aligned as u64 (every field's alignment).
        unsafe {
            match s_type {
                vk::StructureType::DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT => {
                    let m = copy.cast::<vk::DebugUtilsMessengerCreateInfoEXT<'static>>();
                    *m = witnessed_messenger(&*m);
                }
                vk::StructureType::DEBUG_REPORT_CALLBACK_CREATE_INFO_EXT => {
                    let r = copy.cast::<vk::DebugReportCallbackCreateInfoEXT<'static>>();
                    *r = witnessed_report(&*r);
                }
                _ => {}
            }
        }
        copies.push(copy.cast());
    }
    for pair in copies.windows(2) {
        // SAFETY: both are this layer's copies.
        unsafe { (*pair[0]).p_next = pair[1] };
    }
    let (anchor_node, _) = nodes[anchor];
    // SAFETY: the loader's writable structure; the last copy takes over its old successor's link.
    unsafe {
        let rest = (*nodes[last].0).p_next;
        (**copies.last().expect("one copy at least")).p_next = rest;
        let old = (*anchor_node).p_next;
        (*anchor_node).p_next = copies[0];
        InstanceMessengers {
            info: p_create_info,
            relinked: Some((anchor_node, old)),
        }
    }
}
