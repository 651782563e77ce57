//! `fopen`/`fopen64` of the validation layer's configured log (`VKEXIT_VALIDATION_LOG`): each
//! open for writing goes to a new file of its own in `VKEXIT_VALIDATION_LOGS`, so that no
//! instance, exec'd program or concurrent process truncates what another one reported.
//!
//! Layers 1.3.239, 1.4.309 and 1.4.363 open `log_filename` with `fopen(path, "w")` from their
//! own library at each `vkCreateInstance` (seen with `strace` and an interposer). The file is
//! created exclusively (`PID-N.log`, the first free `N`: an exec'd image keeps its pid), its
//! first line says who opened it, and the stream the layer gets is that file's, in the mode it
//! asked for. Every other path, and any open that cannot be redirected, is passed to the C
//! library as it is: then the layer writes the configured path itself, where the harness sees
//! an open it did not watch.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

use vkexit_evidence::validation_logs::{file_name, Header, DIR_VAR, LOG_VAR};

use crate::real;

/// The configured log and the directory of per-open files, both set or neither.
static PATHS: OnceLock<Option<(CString, CString)>> = OnceLock::new();

/// More opens than any program makes of one log: past this the open is passed through.
const MAX_OPENS: u32 = 100_000;

/// Reads the two variables (from the library's set-up).
pub(crate) fn configure() {
    PATHS.get_or_init(|| {
        let var = |name: &str| {
            let value = std::env::var_os(name)?;
            CString::new(value.into_encoded_bytes())
                .ok()
                .filter(|v| !v.is_empty())
        };
        Some((var(LOG_VAR)?, var(DIR_VAR)?))
    });
}

type Fopen = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;

/// # Safety
/// As the C library's `fopen`: `path` and `mode` are NUL-terminated strings.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller's arguments, as fopen takes them.
    unsafe { open_stream(&real::FOPEN, path, mode) }
}

/// # Safety
/// As the C library's `fopen64`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: the caller's arguments, as fopen64 takes them.
    unsafe { open_stream(&real::FOPEN64, path, mode) }
}

/// # Safety
/// `path` and `mode` are NUL-terminated strings, or null (passed on as they are).
unsafe fn open_stream(
    next: &real::Next,
    path: *const c_char,
    mode: *const c_char,
) -> *mut libc::FILE {
    crate::ensure_loaded();
    if !path.is_null() && !mode.is_null() {
        // SAFETY: both are NUL-terminated strings, the caller says.
        let (path, mode) = unsafe { (CStr::from_ptr(path), CStr::from_ptr(mode)) };
        if let Some(stream) = redirected(path, mode) {
            return stream;
        }
        crate::vulkan::manifest_opened(path, mode);
        if mode.to_bytes().iter().any(|c| b"wa+".contains(c)) {
            // SAFETY: a NUL-terminated path.
            unsafe { crate::shared_writes::note(libc::AT_FDCWD, path.as_ptr()) };
        }
    }
    // SAFETY: the C library's own function of this signature, with the caller's arguments.
    unsafe {
        let real: Fopen = std::mem::transmute(next.get());
        real(path, mode)
    }
}

/// The stream of a new file of its own for an open of the configured log for writing; `None`
/// for any other open, or when no file could be made (the open then goes where it asked).
fn redirected(path: &CStr, mode: &CStr) -> Option<*mut libc::FILE> {
    let (log, dir) = PATHS.get()?.as_ref()?;
    if path != log.as_c_str() {
        return None;
    }
    let flags = write_flags(mode.to_bytes())?;
    // SAFETY: a NUL-terminated path; an existing directory is fine.
    unsafe { libc::mkdir(dir.as_ptr(), 0o700) };
    let pid = i64::from(std::process::id());
    let (fd, _name) = (1..=MAX_OPENS).find_map(|index| {
        let name = CString::new(format!(
            "{}/{}",
            dir.to_string_lossy(),
            file_name(pid, index)
        ))
        .ok()?;
        // SAFETY: a NUL-terminated path; the mode argument is read because of O_CREAT.
        let fd = unsafe { libc::open(name.as_ptr(), flags, 0o644 as libc::c_uint) };
        (fd >= 0).then_some((fd, name))
    })?;
    let header = Header {
        pid,
        t_ns: now_ns(),
        program: crate::objects::program()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
    .line();
    // SAFETY: `fd` is the file just created; `header` is a live buffer. A short write only
    // shortens the header, which the harness then reads as a file without one.
    unsafe { libc::write(fd, header.as_ptr().cast(), header.len()) };
    // SAFETY: `fd` is ours and `mode` NUL-terminated; "w" on an open descriptor truncates
    // nothing, so the header stays.
    let stream = unsafe { libc::fdopen(fd, mode.as_ptr()) };
    if stream.is_null() {
        // SAFETY: closes the descriptor opened above, which nothing else holds.
        unsafe { libc::close(fd) };
        return None;
    }
    Some(stream)
}

/// The `open` flags of a new, exclusive file for a write mode (`w`, `a`, with `+`, `e`);
/// `None` for a read mode, which is passed on.
fn write_flags(mode: &[u8]) -> Option<c_int> {
    let access = match mode.first()? {
        b'w' => 0,
        b'a' => libc::O_APPEND,
        _ => return None,
    };
    let flags = &mode[1..mode.iter().position(|&c| c == b',').unwrap_or(mode.len())];
    let rw = match flags.contains(&b'+') {
        true => libc::O_RDWR,
        false => libc::O_WRONLY,
    };
    let cloexec = match flags.contains(&b'e') {
        true => libc::O_CLOEXEC,
        false => 0,
    };
    Some(access | rw | cloexec | libc::O_CREAT | libc::O_EXCL)
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_modes_become_exclusive_creations_and_read_modes_pass() {
        let excl = libc::O_CREAT | libc::O_EXCL;
        assert_eq!(write_flags(b"w"), Some(libc::O_WRONLY | excl));
        assert_eq!(write_flags(b"wb"), Some(libc::O_WRONLY | excl));
        assert_eq!(
            write_flags(b"a+"),
            Some(libc::O_APPEND | libc::O_RDWR | excl)
        );
        assert_eq!(
            write_flags(b"we,ccs=UTF-8"),
            Some(libc::O_WRONLY | libc::O_CLOEXEC | excl)
        );
        for read in [&b"r"[..], b"rb", b"r+", b""] {
            assert_eq!(write_flags(read), None, "{read:?}");
        }
    }
}
