//! What the process writes into the working directory it shares with other runs
//! (`VKEXIT_SHARED_DIR`): a `shared-write` timeline record for each top-level name there that
//! it opens for writing, creates, renames or removes, once per name and process.
//!
//! Interposed: `open`, `open64`, `openat`, `openat64`, `creat`, `creat64` and their fortified
//! forms, `rename`, `renameat`, `renameat2`, `mkdir`, `mkdirat`, `unlink`, `unlinkat`,
//! `remove`, `rmdir`; `fopen`/`fopen64` tell it from [`crate::validation_log`]. Each records
//! and then passes the call on with the caller's own arguments. A call on a path outside the
//! shared directory, or below vkexit's own files (`VKEXIT_SHARED_DIR_SKIP`), records nothing.
//!
//! `open` may be called from a signal handler: recording allocates nothing (the paths are
//! resolved in stack buffers, the names seen kept in a fixed table of hashes) and makes no
//! call that could come back here (`getcwd` and `readlink` are system calls in glibc).

use std::ffi::{c_char, c_int, c_uint, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use vkexit_evidence::shared_dir::{DIR_VAR, SKIP_VAR};
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::{real, timeline};

/// The shared directory and vkexit's own, both canonical, without a trailing `/`.
struct Dirs {
    shared: Vec<u8>,
    skip: Option<Vec<u8>>,
}

static DIRS: OnceLock<Option<Dirs>> = OnceLock::new();

/// Names already recorded by this process, as hashes: a program that rewrites one file a
/// thousand times writes one record. Full, every further name is recorded each time.
const SEEN: usize = 128;
static SEEN_NAMES: [AtomicU64; SEEN] = [const { AtomicU64::new(0) }; SEEN];

const PATH_MAX: usize = 4096;

/// Reads the two variables (from the library's set-up).
pub(crate) fn configure() {
    DIRS.get_or_init(|| {
        let var = |name: &str| {
            let value = std::env::var_os(name)?.into_encoded_bytes();
            let value = trimmed(&value).to_vec();
            (value.len() > 1 && value.starts_with(b"/")).then_some(value)
        };
        Some(Dirs {
            shared: var(DIR_VAR)?,
            skip: var(SKIP_VAR),
        })
    });
}

fn trimmed(path: &[u8]) -> &[u8] {
    match path {
        [rest @ .., b'/'] if !rest.is_empty() => trimmed(rest),
        _ => path,
    }
}

/// Whether `flags` of an `open` can change the file: written, created or truncated.
fn writes(flags: c_int) -> bool {
    flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) != 0
}

/// Records `path` (relative to `dirfd`, as the `*at` calls take it) if it lies in the shared
/// directory. Allocates nothing.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
pub(crate) unsafe fn note(dirfd: c_int, path: *const c_char) {
    let Some(dirs) = DIRS.get().and_then(Option::as_ref) else {
        return;
    };
    if path.is_null() || timeline::get().is_none() {
        return;
    }
    // SAFETY: a NUL-terminated string, the caller says.
    let path = unsafe { CStr::from_ptr(path) }.to_bytes();
    let mut joined = [0u8; PATH_MAX];
    let Some(full) = absolute(dirfd, path, &mut joined) else {
        return;
    };
    let mut normal = [0u8; PATH_MAX];
    let Some(full) = normalize(full, &mut normal) else {
        return;
    };
    if dirs.skip.as_deref().is_some_and(|skip| below(full, skip)) {
        return;
    }
    let Some(name) = top_name(full, &dirs.shared) else {
        return;
    };
    if !first_sight(name) {
        return;
    }
    let mut record = Record::new(Event::SharedWrite.as_str());
    record.bytes_str(field::NAME, name);
    timeline::write(record);
}

/// `path` made absolute in `buf`: as it is, or after the working directory or `dirfd`'s path.
fn absolute<'a>(dirfd: c_int, path: &'a [u8], buf: &'a mut [u8; PATH_MAX]) -> Option<&'a [u8]> {
    if path.starts_with(b"/") {
        return Some(path);
    }
    let base = match dirfd {
        libc::AT_FDCWD => {
            // SAFETY: `buf` is a live buffer of that length.
            let got = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
            if got.is_null() {
                return None;
            }
            buf.iter().position(|&b| b == 0)?
        }
        fd => {
            let mut link = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
            decimal(fd as u32, &mut link[14..]);
            // SAFETY: a NUL-terminated path (the buffer's tail is zeros); `buf` is live.
            let n = unsafe {
                libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len() - 1)
            };
            usize::try_from(n).ok()?
        }
    };
    let end = base + 1 + path.len();
    if end > buf.len() {
        return None;
    }
    buf[base] = b'/';
    buf[base + 1..end].copy_from_slice(path);
    Some(&buf[..end])
}

/// `n` in decimal at the start of `out`; how many digits.
fn decimal(mut n: u32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len.min(out.len()) {
        out[i] = digits[len - 1 - i];
    }
    len
}

/// An absolute path with `.`, `..` and repeated `/` taken out, in `out`; links are not
/// followed (the harness names the shared directory as the program sees it, canonical).
fn normalize<'a>(path: &[u8], out: &'a mut [u8; PATH_MAX]) -> Option<&'a [u8]> {
    let mut len = 0;
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                len = out[..len].iter().rposition(|&b| b == b'/').unwrap_or(0);
            }
            _ => {
                let end = len + 1 + part.len();
                if end > out.len() {
                    return None;
                }
                out[len] = b'/';
                out[len + 1..end].copy_from_slice(part);
                len = end;
            }
        }
    }
    if len == 0 {
        out[0] = b'/';
        len = 1;
    }
    Some(&out[..len])
}

/// Whether `path` is `dir` or lies below it.
fn below(path: &[u8], dir: &[u8]) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// The first component of `path` below `dir`; `None` for `dir` itself or a path elsewhere.
fn top_name<'a>(path: &'a [u8], dir: &[u8]) -> Option<&'a [u8]> {
    let rest = path.strip_prefix(dir)?.strip_prefix(b"/")?;
    let name = rest.split(|&b| b == b'/').next()?;
    (!name.is_empty()).then_some(name)
}

/// Whether `name` is seen for the first time in this process (or the table is full).
fn first_sight(name: &[u8]) -> bool {
    // Never 0, the empty slot.
    let hash = vkexit_evidence::exit_order::symbol_hash(name);
    let start = (hash % SEEN as u64) as usize;
    for i in 0..SEEN {
        let slot = &SEEN_NAMES[(start + i) % SEEN];
        match slot.compare_exchange(0, hash, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(found) if found == hash => return false,
            Err(_) => {}
        }
    }
    true
}

type Open = unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int;
type OpenAt = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int;
type Open2 = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type OpenAt2 = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type WithMode = unsafe extern "C" fn(*const c_char, c_uint) -> c_int;
type AtWithMode = unsafe extern "C" fn(c_int, *const c_char, c_uint) -> c_int;
type Path1 = unsafe extern "C" fn(*const c_char) -> c_int;
type AtWithFlags = unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int;
type Rename = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type RenameAt = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
type RenameAt2 = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;

/// The next definition of `next` as a function of type `F`.
///
/// # Safety
/// `F` is the C library's type of that function.
unsafe fn next<F: Copy>(next: &real::Next) -> F {
    let address = next.get();
    // SAFETY: the caller says `F` is the function's type; the address is that function's.
    unsafe { std::mem::transmute_copy(&address) }
}

/// Declares interposers that note the paths given (each with the directory descriptor it is
/// relative to) when `if` holds, then call the C library's function.
macro_rules! interpose {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $kind:ty, $real:expr;
        note [$(($dirfd:expr, $path:expr)),*] if $when:expr;
    )*) => {$(
        $(#[$meta])*
        /// # Safety
        /// As the C library's function of this name.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            crate::ensure_loaded();
            if $when {
                // SAFETY: the caller's paths, NUL-terminated or null.
                unsafe { $(note($dirfd, $path);)* }
            }
            // SAFETY: the C library's own function of this type, with the caller's arguments.
            unsafe { next::<$kind>(&$real)($($arg),*) }
        }
    )*};
}

const CWD: c_int = libc::AT_FDCWD;

interpose! {
    /// `open(path, flags, mode)`: `mode` is passed on as it came, read by glibc only when
    /// `flags` need it.
    fn open(path: *const c_char, flags: c_int, mode: c_uint) -> c_int = Open, real::OPEN;
    note [(CWD, path)] if writes(flags);
    fn open64(path: *const c_char, flags: c_int, mode: c_uint) -> c_int = Open, real::OPEN64;
    note [(CWD, path)] if writes(flags);
    fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int =
        OpenAt, real::OPENAT;
    note [(dirfd, path)] if writes(flags);
    fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int =
        OpenAt, real::OPENAT64;
    note [(dirfd, path)] if writes(flags);
    fn __open_2(path: *const c_char, flags: c_int) -> c_int = Open2, real::OPEN_2;
    note [(CWD, path)] if writes(flags);
    fn __open64_2(path: *const c_char, flags: c_int) -> c_int = Open2, real::OPEN64_2;
    note [(CWD, path)] if writes(flags);
    fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int =
        OpenAt2, real::OPENAT_2;
    note [(dirfd, path)] if writes(flags);
    fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int =
        OpenAt2, real::OPENAT64_2;
    note [(dirfd, path)] if writes(flags);
    fn creat(path: *const c_char, mode: c_uint) -> c_int = WithMode, real::CREAT;
    note [(CWD, path)] if true;
    fn creat64(path: *const c_char, mode: c_uint) -> c_int = WithMode, real::CREAT64;
    note [(CWD, path)] if true;
    fn mkdir(path: *const c_char, mode: c_uint) -> c_int = WithMode, real::MKDIR;
    note [(CWD, path)] if true;
    fn mkdirat(dirfd: c_int, path: *const c_char, mode: c_uint) -> c_int =
        AtWithMode, real::MKDIRAT;
    note [(dirfd, path)] if true;
    fn unlink(path: *const c_char) -> c_int = Path1, real::UNLINK;
    note [(CWD, path)] if true;
    fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int =
        AtWithFlags, real::UNLINKAT;
    note [(dirfd, path)] if true;
    fn rmdir(path: *const c_char) -> c_int = Path1, real::RMDIR;
    note [(CWD, path)] if true;
    fn remove(path: *const c_char) -> c_int = Path1, real::REMOVE;
    note [(CWD, path)] if true;
    fn rename(from: *const c_char, to: *const c_char) -> c_int = Rename, real::RENAME;
    note [(CWD, from), (CWD, to)] if true;
    fn renameat(fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char) -> c_int =
        RenameAt, real::RENAMEAT;
    note [(fromfd, from), (tofd, to)] if true;
    fn renameat2(
        fromfd: c_int, from: *const c_char, tofd: c_int, to: *const c_char, flags: c_uint
    ) -> c_int = RenameAt2, real::RENAMEAT2;
    note [(fromfd, from), (tofd, to)] if true;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(path: &str) -> String {
        let mut out = [0u8; PATH_MAX];
        String::from_utf8(normalize(path.as_bytes(), &mut out).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn paths_are_normalized_without_following_links() {
        assert_eq!(normal("/a/b/../c/./d//e/"), "/a/c/d/e");
        assert_eq!(normal("/../x"), "/x");
        assert_eq!(normal("/"), "/");
    }

    #[test]
    fn the_top_level_name_below_the_shared_directory() {
        let top = |p: &str| top_name(p.as_bytes(), b"/w/build").map(|n| n.to_vec());
        assert_eq!(top("/w/build/shader.spv"), Some(b"shader.spv".to_vec()));
        assert_eq!(top("/w/build/out/a/b"), Some(b"out".to_vec()));
        assert_eq!(top("/w/build"), None);
        assert_eq!(top("/w/builder/x"), None);
        assert_eq!(top("/tmp/x"), None);
        assert!(below(
            b"/w/build/vkexit-artifacts/run",
            b"/w/build/vkexit-artifacts"
        ));
        assert!(!below(
            b"/w/build/vkexit-artifacts2",
            b"/w/build/vkexit-artifacts"
        ));
    }

    #[test]
    fn write_flags_are_told_from_reads() {
        assert!(!writes(libc::O_RDONLY | libc::O_CLOEXEC));
        assert!(writes(libc::O_WRONLY));
        assert!(writes(libc::O_RDWR));
        assert!(writes(libc::O_RDONLY | libc::O_CREAT));
        assert!(writes(libc::O_RDONLY | libc::O_TRUNC));
    }

    #[test]
    fn descriptors_in_decimal() {
        let mut out = [0u8; 10];
        assert_eq!(decimal(0, &mut out), 1);
        assert_eq!(&out[..1], b"0");
        assert_eq!(decimal(1234, &mut out), 4);
        assert_eq!(&out[..4], b"1234");
    }

    #[test]
    fn a_name_is_first_seen_once() {
        assert!(first_sight(b"only-here.txt"));
        assert!(!first_sight(b"only-here.txt"));
        assert!(first_sight(b"another.txt"));
    }
}
