//! Which Vulkan loader and which drivers the program has loaded, and who loaded each driver:
//! `vulkan-object` records. A layer sees only the calls that go through a loader, so a driver
//! in the process with no loader, or one opened by the program itself, means that no layer
//! saw its calls (ncnn's built-in loader opens the driver named by `VK_ICD_FILENAMES`).
//!
//! The link map is scanned when the library loads (the program's own dependencies), after
//! every `dlopen` whose outcome is observed (with what it brought in), and when `main`
//! returns (what unobserved `dlopen`s brought in). Each object is looked at once:
//! - a **loader** is a `libvulkan.so*` (its soname on every platform that has one);
//! - a **driver** exports `vk_icdGetInstanceProcAddr` or
//!   `vk_icdNegotiateLoaderICDInterfaceVersion` itself, as every ICD must and nothing else does;
//! - the **validation layer** is a `libVkLayer_khronos_validation.so`;
//! - a **driver manifest** is the first manifest the loader opens ([`manifest_opened`]).

use std::ffi::{c_int, c_void, CStr};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use vkexit_evidence::timeline::{field, Event, Role};
use vkexit_evidence::Record;

use crate::{elf, real, timeline};

/// The objects already looked at, by load address: each is classified once.
const SEEN_CAPACITY: usize = 1024;
static SEEN: [AtomicUsize; SEEN_CAPACITY] = [const { AtomicUsize::new(0) }; SEEN_CAPACITY];
static SEEN_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Objects taken from one pass over the link map; a fuller map takes more passes.
const BATCH: usize = 16;
const NAME_MAX: usize = 512;

/// Names copied out of the link map. Not zeroed: 8 KiB cleared on every scan was a tenth of
/// what this library cost a short program.
struct Batch {
    names: [[MaybeUninit<u8>; NAME_MAX]; BATCH],
    lens: [usize; BATCH],
    /// Whether each object exports a driver's entry point, read from its own symbol table;
    /// `None` where that table could not be read (asked through `dlopen` then).
    drivers: [Option<bool>; BATCH],
    count: usize,
}

impl Batch {
    fn name(&self, i: usize) -> &[u8] {
        // SAFETY: `collect` initialised the first `lens[i]` bytes of every name below `count`.
        unsafe { std::slice::from_raw_parts(self.names[i].as_ptr().cast::<u8>(), self.lens[i]) }
    }
}

/// Marks this library and the dynamic loader as seen before the first scan: neither is ever
/// a Vulkan object, and looking at each (a `dlopen`, two `dlsym`, a `dladdr`) was a third of
/// what this library cost a short program at start-up.
pub(crate) fn prepare() {
    // SAFETY: getauxval reads the auxiliary vector; AT_BASE is the interpreter's load address.
    let interpreter = unsafe { libc::getauxval(libc::AT_BASE) } as usize;
    let own = crate::objects::object_of(prepare as *const () as usize).map(|o| o.base);
    for base in [Some(interpreter), own].into_iter().flatten() {
        if base != 0 {
            first_sight(base);
        }
    }
}

/// Looks at the objects loaded since the last scan, and at `opened`, the object a `dlopen`
/// by `caller` just returned, every time (an object unloaded and loaded again can come back
/// at the address it had, and who opened a driver is what matters).
pub(crate) fn scan(opened: Option<&[u8]>, caller: Option<&CStr>) {
    if timeline::get().is_none() {
        return;
    }
    let mut opened_driver = None;
    loop {
        let mut batch = Batch {
            names: [[MaybeUninit::uninit(); NAME_MAX]; BATCH],
            lens: [0; BATCH],
            drivers: [None; BATCH],
            count: 0,
        };
        // SAFETY: `collect` only reads the entries; `batch` outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(collect), std::ptr::from_mut(&mut batch).cast()) };
        for i in 0..batch.count {
            let name = batch.name(i);
            match opened == Some(name) {
                true => opened_driver = batch.drivers[i],
                false => classify(name, None, batch.drivers[i]),
            }
        }
        if batch.count < BATCH {
            break;
        }
    }
    if let Some(name) = opened.filter(|n| !n.is_empty() && n.len() < NAME_MAX) {
        classify(name, caller, opened_driver);
    }
}

/// Called by `dl_iterate_phdr` with the loader's lock held: it copies names only (no `dlopen`
/// here).
unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes our Batch and a valid entry for one loaded object.
    let (batch, info) = unsafe { (&mut *data.cast::<Batch>(), &*info) };
    if batch.count == BATCH {
        return 1;
    }
    if info.dlpi_name.is_null() {
        return 0;
    }
    // SAFETY: the loader keeps the name NUL-terminated while the object is loaded.
    let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes();
    // The main program (empty name) and the vDSO (no slash) are never Vulkan objects.
    if !name.contains(&b'/') || name.len() >= NAME_MAX || !first_sight(info.dlpi_addr as usize) {
        return 0;
    }
    let slot = batch.count;
    // SAFETY: `name` fits (checked above), and MaybeUninit<u8> has u8's layout.
    unsafe {
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            batch.names[slot].as_mut_ptr().cast::<u8>(),
            name.len(),
        )
    };
    batch.lens[slot] = name.len();
    // SAFETY: the loader's entry for a loaded object, read while it holds the object.
    batch.drivers[slot] = unsafe { elf::exports_any(info, &DRIVER_ENTRIES) };
    batch.count += 1;
    0
}

/// The validation layer's library: which file of that name the dynamic loader found (a manifest
/// that names it by file name leaves the choice to the library search path).
const VALIDATION_LAYER_FILE: &[u8] = b"libVkLayer_khronos_validation.so";

/// What every driver exports itself, and nothing else does.
const DRIVER_ENTRIES: [&CStr; 2] = [
    c"vk_icdGetInstanceProcAddr",
    c"vk_icdNegotiateLoaderICDInterfaceVersion",
];

/// Whether the object at `address` is looked at for the first time (and marks it). Past the
/// capacity nothing is new: a record is missed rather than repeated without end.
fn first_sight(address: usize) -> bool {
    let count = SEEN_COUNT.load(Ordering::Acquire).min(SEEN_CAPACITY);
    if SEEN[..count]
        .iter()
        .any(|s| s.load(Ordering::Relaxed) == address)
    {
        return false;
    }
    let slot = SEEN_COUNT.fetch_add(1, Ordering::AcqRel);
    if slot >= SEEN_CAPACITY {
        return false;
    }
    SEEN[slot].store(address, Ordering::Release);
    true
}

/// Records the object `name` when it is a loader or a driver; `driver` says which it is when
/// its symbol table was read already.
fn classify(name: &[u8], caller: Option<&CStr>, driver: Option<bool>) {
    let file = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    let role = if file.starts_with(b"libvulkan.so") {
        Role::Loader
    } else if file == VALIDATION_LAYER_FILE {
        Role::ValidationLayer
    } else if driver.unwrap_or_else(|| is_driver(name)) {
        Role::Driver
    } else {
        return;
    };
    let mut record = Record::new(Event::VulkanObject.as_str());
    record
        .str(field::ROLE, role.as_str())
        .bytes_str(field::PATH, name);
    timeline::c_str_field(&mut record, field::CALLER, caller);
    timeline::write(record);
}

fn is_driver(name: &[u8]) -> bool {
    let mut path = [0u8; NAME_MAX + 1];
    path[..name.len()].copy_from_slice(name);
    type Dlopen = unsafe extern "C" fn(*const libc::c_char, c_int) -> *mut c_void;
    type Dlclose = unsafe extern "C" fn(*mut c_void) -> c_int;
    // SAFETY: glibc's dlopen and dlclose have these signatures.
    let (dlopen, dlclose) = unsafe {
        (
            std::mem::transmute::<usize, Dlopen>(real::DLOPEN.get()),
            std::mem::transmute::<usize, Dlclose>(real::DLCLOSE.get()),
        )
    };
    // SAFETY: a NUL-terminated path; RTLD_NOLOAD only takes a reference to a loaded object.
    let handle = unsafe { dlopen(path.as_ptr().cast(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return false;
    }
    let exports = DRIVER_ENTRIES.iter().any(|symbol| {
        // SAFETY: a live handle and a NUL-terminated name.
        let address = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
        !address.is_null() && defined_in(address, name)
    });
    // SAFETY: the reference RTLD_NOLOAD took above.
    unsafe { dlclose(handle) };
    exports
}

/// Whether `address` lies in the object named `name`, not in one of its dependencies (which
/// `dlsym` on a handle also searches).
fn defined_in(address: *mut c_void, name: &[u8]) -> bool {
    // SAFETY: an all-zero Dl_info is a valid output buffer.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only compares the address's value against loaded objects.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: dladdr's file name is NUL-terminated and lives as long as the object.
    unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes() == name
}

/// Whether a process recorded the driver manifest it opened: once is the witness.
static MANIFEST_RECORDED: AtomicBool = AtomicBool::new(false);

/// The variables that name driver manifests (files, or directories of them), `:`-separated.
const DRIVER_FILE_VARS: [&CStr; 3] = [
    c"VK_ICD_FILENAMES",
    c"VK_DRIVER_FILES",
    c"VK_ADD_DRIVER_FILES",
];

/// Called for every `fopen` the program's libraries make: the first open for reading of a
/// Vulkan driver manifest (a `.json` file in an `icd.d` directory, or one that the driver
/// variables name, itself or by its directory) is recorded as a `driver-manifest` object. The
/// loader reads them when asked for drivers, whether or not a driver then loads.
pub(crate) fn manifest_opened(path: &CStr, mode: &CStr) {
    if MANIFEST_RECORDED.load(Ordering::Relaxed) || !mode.to_bytes().starts_with(b"r") {
        return;
    }
    let path = path.to_bytes();
    if !path.ends_with(b".json") || !is_driver_manifest(path) {
        return;
    }
    if MANIFEST_RECORDED.swap(true, Ordering::AcqRel) || timeline::get().is_none() {
        return;
    }
    let mut record = Record::new(Event::VulkanObject.as_str());
    record
        .str(field::ROLE, Role::DriverManifest.as_str())
        .bytes_str(field::PATH, path);
    timeline::write(record);
}

fn is_driver_manifest(path: &[u8]) -> bool {
    let dir = match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[..slash],
        None => &path[..0],
    };
    if dir.ends_with(b"/icd.d") || dir == b"icd.d" {
        return true;
    }
    DRIVER_FILE_VARS.iter().any(|var| {
        // SAFETY: getenv with a NUL-terminated name; the value is read before anything can
        // change the environment on this thread.
        let value = unsafe { libc::getenv(var.as_ptr()) };
        if value.is_null() {
            return false;
        }
        // SAFETY: the environment's value, NUL-terminated.
        let value = unsafe { CStr::from_ptr(value) }.to_bytes();
        value.split(|&b| b == b':').any(|entry| {
            let entry = entry.strip_suffix(b"/").unwrap_or(entry);
            !entry.is_empty() && (entry == path || entry == dir)
        })
    })
}
