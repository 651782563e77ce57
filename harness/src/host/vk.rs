//! The few Vulkan commands vkexit calls itself, in its short-lived probe processes: the
//! loader's version, an instance, its physical devices and their properties. Declared here
//! from the Vulkan specification (the structures' C layout, the loader's exported
//! `vkGetInstanceProcAddr`), so that vkexit does not build a whole binding for seven calls.

pub use crate::support::errors::VkResult;
use std::ffi::{c_char, c_void, CStr};
use std::path::Path;

/// `VK_API_VERSION_1_0`.
pub(crate) const API_VERSION_1_0: u32 = make_api_version(1, 0);
/// `VK_API_VERSION_1_2`.
pub(crate) const API_VERSION_1_2: u32 = make_api_version(1, 2);

const fn make_api_version(major: u32, minor: u32) -> u32 {
    (major << 22) | (minor << 12)
}

/// An api version as `MAJOR.MINOR.PATCH` (the variant, in the top three bits, left out).
pub(crate) fn version_text(version: u32) -> String {
    format!(
        "{}.{}.{}",
        (version >> 22) & 0x7f,
        (version >> 12) & 0x3ff,
        version & 0xfff
    )
}

type Handle = *mut c_void;
type GetInstanceProcAddr = unsafe extern "C" fn(Handle, *const c_char) -> Option<VoidFunction>;
type VoidFunction = unsafe extern "C" fn();
type EnumerateInstanceVersion = unsafe extern "C" fn(*mut u32) -> VkResult;
type CreateInstance =
    unsafe extern "C" fn(*const InstanceCreateInfo, *const c_void, *mut Handle) -> VkResult;
type DestroyInstance = unsafe extern "C" fn(Handle, *const c_void);
type EnumeratePhysicalDevices = unsafe extern "C" fn(Handle, *mut u32, *mut Handle) -> VkResult;
type GetPhysicalDeviceProperties = unsafe extern "C" fn(Handle, *mut c_void);

/// `VK_STRUCTURE_TYPE_APPLICATION_INFO`.
const APPLICATION_INFO: i32 = 0;
/// `VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO`.
const INSTANCE_CREATE_INFO: i32 = 1;
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2`.
const PHYSICAL_DEVICE_PROPERTIES_2: i32 = 1_000_059_001;
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES`.
const PHYSICAL_DEVICE_DRIVER_PROPERTIES: i32 = 1_000_196_000;

#[repr(C)]
struct ApplicationInfo {
    s_type: i32,
    p_next: *const c_void,
    application_name: *const c_char,
    application_version: u32,
    engine_name: *const c_char,
    engine_version: u32,
    api_version: u32,
}

#[repr(C)]
struct InstanceCreateInfo {
    s_type: i32,
    p_next: *const c_void,
    flags: u32,
    application_info: *const ApplicationInfo,
    enabled_layer_count: u32,
    enabled_layer_names: *const *const c_char,
    enabled_extension_count: u32,
    enabled_extension_names: *const *const c_char,
}

/// `VkPhysicalDeviceProperties`: the fields vkexit reads, at their places, then room for the
/// limits and sparse properties (824 bytes in all on 64-bit targets; more room is harmless).
#[repr(C)]
struct DeviceProperties {
    api_version: u32,
    driver_version: u32,
    vendor_id: u32,
    device_id: u32,
    device_type: i32,
    device_name: [c_char; 256],
    pipeline_cache_uuid: [u8; 16],
    rest: [u64; 80],
}

#[repr(C)]
struct DeviceProperties2 {
    s_type: i32,
    p_next: *mut c_void,
    properties: DeviceProperties,
}

/// `VkPhysicalDeviceDriverProperties`.
#[repr(C)]
struct DriverProperties {
    s_type: i32,
    p_next: *mut c_void,
    driver_id: i32,
    driver_name: [c_char; 256],
    driver_info: [c_char; 256],
    conformance_version: [u8; 4],
}

fn zeroed_properties() -> DeviceProperties {
    DeviceProperties {
        api_version: 0,
        driver_version: 0,
        vendor_id: 0,
        device_id: 0,
        device_type: 0,
        device_name: [0; 256],
        pipeline_cache_uuid: [0; 16],
        rest: [0; 80],
    }
}

/// A NUL-terminated name from a fixed-size array; `None` without its NUL.
fn text_of(chars: &[c_char]) -> Option<String> {
    // SAFETY: c_char and u8 have one size and alignment; the slice stays borrowed.
    let bytes = unsafe { std::slice::from_raw_parts(chars.as_ptr().cast::<u8>(), chars.len()) };
    CStr::from_bytes_until_nul(bytes)
        .ok()
        .map(|s| s.to_string_lossy().into_owned())
}

/// A Vulkan loader, loaded into this process and never unloaded (a probe process exits soon
/// after; unloading would run the driver's teardown at a time of vkexit's choosing).
pub(crate) struct Loader {
    get_instance_proc_addr: GetInstanceProcAddr,
}

impl Loader {
    /// The system's loader (`libvulkan.so.1`, else `libvulkan.so`), as the dynamic linker
    /// finds it; the error is the dynamic linker's reason.
    pub(crate) fn system() -> Result<Loader, NotLoaded> {
        Loader::open(c"libvulkan.so.1")
            .or_else(|first| Loader::open(c"libvulkan.so").map_err(|_| first))
    }

    /// The loader at `path`.
    pub(crate) fn at(path: &Path) -> Result<Loader, NotLoaded> {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| NotLoaded::NulInPath)?;
        Loader::open(&name)
    }

    fn open(name: &CStr) -> Result<Loader, NotLoaded> {
        // SAFETY: a NUL-terminated name; loading a library runs its constructors, which a
        // Vulkan loader's are fit for.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(NotLoaded::Dlopen(dl_error()));
        }
        // SAFETY: a live handle and a NUL-terminated symbol name.
        let symbol = unsafe { libc::dlsym(handle, c"vkGetInstanceProcAddr".as_ptr()) };
        if symbol.is_null() {
            return Err(NotLoaded::NoEntryPoint(dl_error()));
        }
        // SAFETY: the loader exports vkGetInstanceProcAddr with this signature.
        let get_instance_proc_addr =
            unsafe { std::mem::transmute::<*mut c_void, GetInstanceProcAddr>(symbol) };
        Ok(Loader {
            get_instance_proc_addr,
        })
    }

    /// `vkGetInstanceProcAddr(instance, name)` as a function of type `F`.
    ///
    /// # Safety
    /// `F` must be the command's signature.
    unsafe fn command<F: Copy>(&self, instance: Handle, name: &CStr) -> Option<F> {
        // SAFETY: a valid instance or null, and a NUL-terminated name.
        let f = unsafe { (self.get_instance_proc_addr)(instance, name.as_ptr()) }?;
        assert_eq!(
            std::mem::size_of::<F>(),
            std::mem::size_of::<VoidFunction>()
        );
        // SAFETY: the caller names the command's signature.
        Some(unsafe { std::mem::transmute_copy::<VoidFunction, F>(&f) })
    }

    /// The loader's instance-level version (1.0.0 for a loader without
    /// `vkEnumerateInstanceVersion`).
    pub(crate) fn instance_version(&self) -> Result<u32, VkResult> {
        // SAFETY: the command's signature from the specification.
        let f: Option<EnumerateInstanceVersion> =
            unsafe { self.command(std::ptr::null_mut(), c"vkEnumerateInstanceVersion") };
        let Some(f) = f else {
            return Ok(API_VERSION_1_0);
        };
        let mut version = 0;
        // SAFETY: a valid out pointer.
        unsafe { f(&mut version) }.check()?;
        Ok(version)
    }

    /// An instance of this loader, asking for `api_version`, without layers or extensions
    /// but those the environment enables.
    pub(crate) fn create_instance(
        &self,
        application: &CStr,
        api_version: u32,
    ) -> Result<Instance<'_>, VkResult> {
        // SAFETY: the command's signature from the specification.
        let create: CreateInstance =
            unsafe { self.command(std::ptr::null_mut(), c"vkCreateInstance") }
                .ok_or(VkResult::NO_COMMAND)?;
        let app = ApplicationInfo {
            s_type: APPLICATION_INFO,
            p_next: std::ptr::null(),
            application_name: application.as_ptr(),
            application_version: 0,
            engine_name: std::ptr::null(),
            engine_version: 0,
            api_version,
        };
        let info = InstanceCreateInfo {
            s_type: INSTANCE_CREATE_INFO,
            p_next: std::ptr::null(),
            flags: 0,
            application_info: &app,
            enabled_layer_count: 0,
            enabled_layer_names: std::ptr::null(),
            enabled_extension_count: 0,
            enabled_extension_names: std::ptr::null(),
        };
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: well-formed create info that outlives the call, no allocator, an out
        // pointer.
        unsafe { create(&info, std::ptr::null(), &mut handle) }.check()?;
        Ok(Instance {
            loader: self,
            handle,
        })
    }
}

/// Why a loader could not be loaded: each with the dynamic linker's words.
#[derive(Debug, thiserror::Error)]
pub enum NotLoaded {
    /// `dlopen` failed.
    #[error("{0}")]
    Dlopen(String),
    /// The library exports no `vkGetInstanceProcAddr`: it is no Vulkan loader.
    #[error("no vkGetInstanceProcAddr in it: {0}")]
    NoEntryPoint(String),
    /// The path cannot be given to `dlopen`.
    #[error("the path holds a NUL byte")]
    NulInPath,
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message of this thread's last error.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        return "the dynamic linker gave no reason".to_string();
    }
    // SAFETY: not null, NUL-terminated, valid until the next dl call of this thread.
    unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned()
}

/// A live instance, destroyed when dropped.
pub(crate) struct Instance<'l> {
    loader: &'l Loader,
    handle: Handle,
}

/// What a physical device says of itself.
pub(crate) struct Device {
    pub(crate) api_version: u32,
    pub(crate) driver_version: u32,
    pub(crate) vendor_id: u32,
    /// `deviceType` as the specification names it without `VK_PHYSICAL_DEVICE_TYPE_`.
    pub(crate) device_type: String,
    pub(crate) name: String,
    /// `driverName` and `driverInfo` of `VkPhysicalDeviceDriverProperties` (Vulkan 1.2).
    pub(crate) driver: Option<(Option<String>, Option<String>)>,
}

impl Instance<'_> {
    /// The command `name` of this instance, as `F`.
    ///
    /// # Safety
    /// `F` must be the command's signature.
    unsafe fn command<F: Copy>(&self, name: &CStr) -> Result<F, VkResult> {
        // SAFETY: passed on from the caller; a live instance.
        unsafe { self.loader.command(self.handle, name) }.ok_or(VkResult::NO_COMMAND)
    }

    /// Every physical device, in the loader's order.
    pub(crate) fn devices(&self) -> Result<Vec<Device>, VkResult> {
        // SAFETY: the commands' signatures from the specification.
        let enumerate: EnumeratePhysicalDevices =
            unsafe { self.command(c"vkEnumeratePhysicalDevices")? };
        // SAFETY: as above.
        let properties: GetPhysicalDeviceProperties =
            unsafe { self.command(c"vkGetPhysicalDeviceProperties")? };
        let mut handles: Vec<Handle> = Vec::new();
        loop {
            let mut count = 0;
            // SAFETY: a live instance and an out pointer; no array asked for.
            unsafe { enumerate(self.handle, &mut count, std::ptr::null_mut()) }.check()?;
            handles.resize(count as usize, std::ptr::null_mut());
            // SAFETY: room for `count` handles.
            match unsafe { enumerate(self.handle, &mut count, handles.as_mut_ptr()) } {
                VkResult::INCOMPLETE => continue,
                result => result.check()?,
            }
            handles.truncate(count as usize);
            break;
        }
        let mut out = Vec::new();
        for &physical in &handles {
            let mut props = zeroed_properties();
            // SAFETY: a device of this instance and room for its properties.
            unsafe { properties(physical, (&mut props as *mut DeviceProperties).cast()) };
            let driver = match props.api_version >= API_VERSION_1_2 {
                true => self.driver_properties(physical),
                false => None,
            };
            out.push(Device {
                api_version: props.api_version,
                driver_version: props.driver_version,
                vendor_id: props.vendor_id,
                device_type: device_type_name(props.device_type),
                name: text_of(&props.device_name).unwrap_or_default(),
                driver,
            });
        }
        Ok(out)
    }

    /// `driverName` and `driverInfo`; `None` when the loader lacks the Vulkan 1.1 command.
    fn driver_properties(&self, physical: Handle) -> Option<(Option<String>, Option<String>)> {
        // SAFETY: the command's signature from the specification (core in Vulkan 1.1).
        let properties2: GetPhysicalDeviceProperties =
            unsafe { self.command(c"vkGetPhysicalDeviceProperties2") }.ok()?;
        let mut driver = DriverProperties {
            s_type: PHYSICAL_DEVICE_DRIVER_PROPERTIES,
            p_next: std::ptr::null_mut(),
            driver_id: 0,
            driver_name: [0; 256],
            driver_info: [0; 256],
            conformance_version: [0; 4],
        };
        let mut props2 = DeviceProperties2 {
            s_type: PHYSICAL_DEVICE_PROPERTIES_2,
            p_next: (&mut driver as *mut DriverProperties).cast(),
            properties: zeroed_properties(),
        };
        // SAFETY: a device of this instance and a well-formed chain that outlives the call.
        unsafe { properties2(physical, (&mut props2 as *mut DeviceProperties2).cast()) };
        Some((text_of(&driver.driver_name), text_of(&driver.driver_info)))
    }
}

impl Drop for Instance<'_> {
    fn drop(&mut self) {
        // SAFETY: the command's signature from the specification.
        if let Ok(destroy) = unsafe { self.command::<DestroyInstance>(c"vkDestroyInstance") } {
            // SAFETY: a live instance none of whose objects is alive; no allocator.
            unsafe { destroy(self.handle, std::ptr::null()) };
        }
    }
}

/// `VkPhysicalDeviceType` as the specification names it, without its prefix.
fn device_type_name(value: i32) -> String {
    match value {
        0 => "OTHER".to_string(),
        1 => "INTEGRATED_GPU".to_string(),
        2 => "DISCRETE_GPU".to_string(),
        3 => "VIRTUAL_GPU".to_string(),
        4 => "CPU".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structures_have_the_specifications_layout() {
        // VkPhysicalDeviceProperties: its limits start at 296 and the whole is 824 bytes.
        assert_eq!(std::mem::offset_of!(DeviceProperties, device_name), 20);
        assert_eq!(std::mem::offset_of!(DeviceProperties, rest), 296);
        assert!(std::mem::size_of::<DeviceProperties>() >= 824);
        assert_eq!(std::mem::offset_of!(DeviceProperties2, properties), 16);
        assert_eq!(std::mem::offset_of!(DriverProperties, driver_name), 20);
        assert_eq!(std::mem::offset_of!(DriverProperties, driver_info), 276);
        assert_eq!(std::mem::size_of::<DriverProperties>(), 536);
        assert_eq!(
            std::mem::offset_of!(InstanceCreateInfo, application_info),
            24
        );
        assert_eq!(std::mem::size_of::<InstanceCreateInfo>(), 64);
        assert_eq!(std::mem::size_of::<ApplicationInfo>(), 48);
    }

    #[test]
    fn versions_and_results_read_as_the_specification_writes_them() {
        assert_eq!(version_text(API_VERSION_1_2), "1.2.0");
        assert_eq!(version_text((1 << 22) | (3 << 12) | 239), "1.3.239");
        assert_eq!(VkResult(-9).to_string(), "VK_ERROR_INCOMPATIBLE_DRIVER");
        assert_eq!(VkResult(-1000).to_string(), "VkResult -1000");
        assert_eq!(device_type_name(4), "CPU");
        assert_eq!(device_type_name(9), "9");
        let mut name = [0 as c_char; 8];
        name[..3].copy_from_slice(&[b'l' as c_char, b'v' as c_char, b'p' as c_char]);
        assert_eq!(text_of(&name).as_deref(), Some("lvp"));
        assert_eq!(text_of(&[b'x' as c_char; 4]), None);
    }
}
