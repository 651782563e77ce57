//! Which mapping of `/proc/self/maps` holds an address, found from a signal handler: `open` and
//! `read` into a buffer on the stack, lines parsed in place, no allocation, no lock.

use std::ffi::CStr;

/// The most path bytes kept per mapping; longer paths are cut (and end in `…`).
pub const PATH_CAPACITY: usize = 512;
/// The read buffer. The kernel returns whole lines per `read`; a longer line is parsed from
/// its head.
const READ_BUFFER: usize = 8192;

/// One line of `/proc/self/maps`.
#[derive(Clone, Copy)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// Offset of `start` in the mapped file.
    pub offset: u64,
    pub perms: [u8; 4],
    path: [u8; PATH_CAPACITY],
    path_len: usize,
}

impl Mapping {
    /// The file path, `[heap]`-style kernel name, or empty for an anonymous mapping.
    pub fn path(&self) -> &[u8] {
        &self.path[..self.path_len]
    }

    /// The file offset that `address` (inside this mapping) corresponds to: what `addr2line`
    /// wants for a shared library.
    pub fn file_offset(&self, address: u64) -> u64 {
        address - self.start + self.offset
    }

    fn contains(&self, address: u64) -> bool {
        (self.start..self.end).contains(&address)
    }
}

/// What the maps say about one address.
// Lives on a signal handler's stack: no boxing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy)]
pub enum Lookup {
    Mapped(Mapping),
    /// No mapping holds it: never mapped, or unmapped since.
    Unmapped,
    /// `/proc/self/maps` could not be read.
    Unknown,
}

/// Looks up each of `addresses` in one pass over `/proc/self/maps`.
///
/// Async-signal-safe: `open`, `read`, `close` and stack buffers only.
pub fn lookup<const N: usize>(addresses: [u64; N]) -> [Lookup; N] {
    let mut found = [Lookup::Unmapped; N];
    let path: &CStr = c"/proc/self/maps";
    // SAFETY: a NUL-terminated path; open has no other preconditions.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return [Lookup::Unknown; N];
    }
    let mut buffer = [0u8; READ_BUFFER];
    let complete = for_each_line(fd, &mut buffer, |line| {
        if let Some(mapping) = parse_line(line) {
            for (address, slot) in addresses.iter().zip(found.iter_mut()) {
                if mapping.contains(*address) {
                    *slot = Lookup::Mapped(mapping);
                }
            }
        }
    });
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
    if !complete {
        return [Lookup::Unknown; N];
    }
    found
}

/// Calls `each` with every line read from `fd` (without its newline). A line longer than the
/// buffer is passed as its head. Returns false on a read error.
fn for_each_line(fd: libc::c_int, buffer: &mut [u8], mut each: impl FnMut(&[u8])) -> bool {
    let mut filled = 0;
    let mut skipping_rest_of_line = false;
    loop {
        if filled == buffer.len() {
            if !skipping_rest_of_line {
                each(&buffer[..filled]);
            }
            skipping_rest_of_line = true;
            filled = 0;
        }
        let free = &mut buffer[filled..];
        // SAFETY: reads at most `free.len()` bytes into the live buffer `free`.
        let n = unsafe { libc::read(fd, free.as_mut_ptr().cast(), free.len()) };
        if n < 0 {
            // SAFETY: __errno_location returns the calling thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return false;
        }
        if n == 0 {
            break;
        }
        filled += n as usize;
        let mut start = 0;
        while let Some(newline) = buffer[start..filled].iter().position(|&b| b == b'\n') {
            if skipping_rest_of_line {
                skipping_rest_of_line = false;
            } else {
                each(&buffer[start..start + newline]);
            }
            start += newline + 1;
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
    }
    if filled > 0 && !skipping_rest_of_line {
        each(&buffer[..filled]);
    }
    true
}

/// Parses `start-end perms offset dev inode [path]`; `None` for anything else.
fn parse_line(line: &[u8]) -> Option<Mapping> {
    let mut fields = Fields { rest: line };
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = parse_hex(&range[..dash])?;
    let end = parse_hex(&range[dash + 1..])?;
    let perms: [u8; 4] = fields.next()?.try_into().ok()?;
    let offset = parse_hex(fields.next()?)?;
    fields.next()?; // device
    fields.next()?; // inode
    let path = fields.rest.trim_ascii_start();
    let mut mapping = Mapping {
        start,
        end,
        offset,
        perms,
        path: [0; PATH_CAPACITY],
        path_len: 0,
    };
    if path.len() <= PATH_CAPACITY {
        mapping.path[..path.len()].copy_from_slice(path);
        mapping.path_len = path.len();
    } else {
        const CUT: &[u8] = "…".as_bytes();
        let keep = PATH_CAPACITY - CUT.len();
        mapping.path[..keep].copy_from_slice(&path[..keep]);
        mapping.path[keep..].copy_from_slice(CUT);
        mapping.path_len = PATH_CAPACITY;
    }
    Some(mapping)
}

/// Space-separated fields, consumed from the front.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let text = self.rest.trim_ascii_start();
        let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
        if end == 0 {
            return None;
        }
        self.rest = &text[end..];
        Some(&text[..end])
    }
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &b| {
        let digit = (b as char).to_digit(16)?;
        Some(value << 4 | u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(lookup: Lookup) -> Mapping {
        match lookup {
            Lookup::Mapped(m) => m,
            Lookup::Unmapped => panic!("unmapped"),
            Lookup::Unknown => panic!("unknown"),
        }
    }

    #[test]
    fn a_line_with_a_path_parses_whole() {
        let line = b"7f12a0000000-7f12a0021000 r-xp 00002000 08:01 1234567    /usr/lib/x86_64-linux-gnu/libc.so.6";
        let m = parse_line(line).unwrap();
        assert_eq!(
            (m.start, m.end, m.offset),
            (0x7f12a0000000, 0x7f12a0021000, 0x2000)
        );
        assert_eq!(&m.perms, b"r-xp");
        assert_eq!(m.path(), b"/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(m.file_offset(0x7f12a0000010), 0x2010);
    }

    #[test]
    fn anonymous_and_kernel_named_mappings_parse() {
        let anonymous = parse_line(b"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(anonymous.path(), b"");
        let stack = parse_line(
            b"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]",
        )
        .unwrap();
        assert_eq!(stack.path(), b"[stack]");
        let deleted =
            parse_line(b"7f0000000000-7f0000001000 r-xp 00000000 08:01 99 /tmp/a b (deleted)")
                .unwrap();
        assert_eq!(deleted.path(), b"/tmp/a b (deleted)");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert!(parse_line(b"").is_none());
        assert!(parse_line(b"zzzz-1000 r-xp 0 0 0").is_none());
        assert!(parse_line(b"1000-2000 r-xp").is_none());
    }

    #[test]
    fn long_paths_are_cut_with_an_ellipsis() {
        let mut line = b"1000-2000 r--p 00000000 08:01 7 /".to_vec();
        line.extend(std::iter::repeat_n(b'x', 2 * PATH_CAPACITY));
        let m = parse_line(&line).unwrap();
        assert_eq!(m.path().len(), PATH_CAPACITY);
        assert!(m.path().ends_with("…".as_bytes()));
    }

    #[test]
    fn lines_split_across_reads_and_overlong_lines_are_handled() {
        let mut text = Vec::new();
        text.extend_from_slice(b"1000-2000 r--p 00000000 08:01 7 /short\n");
        text.extend_from_slice(b"3000-4000 r--p 00000000 08:01 7 /");
        text.extend(std::iter::repeat_n(b'y', 100));
        text.extend_from_slice(b"\n5000-6000 r--p 00000000 08:01 7 /last");
        let mut fds = [0; 2];
        // SAFETY: a two-element array for pipe's output.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: writes our buffer to the pipe's write end, then closes it.
        unsafe {
            libc::write(fds[1], text.as_ptr().cast(), text.len());
            libc::close(fds[1]);
        }
        let mut buffer = [0u8; 48];
        let mut lines = Vec::new();
        assert!(for_each_line(fds[0], &mut buffer, |l| lines.push(l.to_vec())));
        // SAFETY: closes the read end, once.
        unsafe { libc::close(fds[0]) };
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], b"1000-2000 r--p 00000000 08:01 7 /short");
        assert_eq!(lines[1].len(), 48);
        assert!(lines[1].starts_with(b"3000-4000"));
        assert_eq!(lines[2], b"5000-6000 r--p 00000000 08:01 7 /last");
    }

    #[test]
    fn this_test_binary_and_an_unmapped_page_are_told_apart() {
        let code = parse_hex as *const () as u64;
        // SAFETY: a fresh anonymous mapping, unmapped at once; nothing else uses it.
        let gone = unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            libc::munmap(page, 4096);
            page as u64
        };
        let [here, there] = lookup([code, gone]);
        let exe = std::env::current_exe().unwrap();
        let here = mapped(here);
        assert_eq!(here.path(), exe.as_os_str().as_encoded_bytes());
        assert_eq!(here.perms[2], b'x');
        assert!(matches!(there, Lookup::Unmapped));
    }
}
