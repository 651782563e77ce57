//! An evidence file written through a shared memory mapping: a record costs a copy, not a
//! system call, and is still crash-safe, because a store into a `MAP_SHARED` mapping of a file
//! is in the page cache at once and outlives the process however it dies.
//!
//! Each process takes the file a chunk at a time: under a POSIX record lock (which excludes
//! other processes, and is not inherited across `fork`) it extends the file by [`CHUNK`] bytes
//! with `ftruncate` and maps the new chunk; its records then go into that chunk one after
//! another. Space a process did not use stays NUL bytes, so readers treat NUL like a line end.
//! [`MappedLog::close_tail`] cuts the unused end of the file's last chunk, at clean exit.
//!
//! Threads of a process share its chunk under a spin lock held only for a copy. The lock and
//! the chunk belong to one process: after `fork` the child (whose [`fork_generation`] differs)
//! takes the lock as free and a chunk of its own.
//!
//! Anything that is not a regular file (a pipe, `/dev/stderr`), or a file that cannot be
//! mapped, is written with one `write()` per record instead, as [`crate::EvidenceLog`] does.

use std::cell::UnsafeCell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::record::{fork_generation, open_append, open_from_env, write_all, Record};

/// How much of the file a process takes at a time.
pub const CHUNK: u64 = 256 * 1024;

/// An evidence file, open for writing records through a mapping.
pub struct MappedLog {
    fd: OwnedFd,
    mappable: bool,
    /// 0 when free, else `generation << 1 | 1` of the process that holds it.
    lock: AtomicU64,
    window: UnsafeCell<Window>,
}

// SAFETY: `window` is only touched with `lock` held, by one thread at a time.
unsafe impl Sync for MappedLog {}
// SAFETY: as above; the mapping is not tied to the thread that made it.
unsafe impl Send for MappedLog {}

/// The chunk this process writes into.
struct Window {
    /// The generation the chunk was taken in; another one means a forked child.
    generation: u64,
    map: *mut u8,
    map_len: usize,
    /// File offset of `map`, page aligned.
    map_offset: u64,
    /// File offsets: where the next record goes, and the chunk's end.
    next: u64,
    end: u64,
}

const EMPTY: Window = Window {
    generation: 0,
    map: std::ptr::null_mut(),
    map_len: 0,
    map_offset: 0,
    next: 0,
    end: 0,
};

impl std::fmt::Debug for MappedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedLog")
            .field("fd", &self.fd)
            .field("mappable", &self.mappable)
            .finish_non_exhaustive()
    }
}

impl MappedLog {
    /// Opens (creating if needed, mode 0644) `path` for reading and writing.
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = open_append(path, libc::O_RDWR)?;
        let mappable =
            fstat(fd.as_raw_fd()).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
        Ok(Self {
            fd,
            mappable,
            lock: AtomicU64::new(0),
            window: UnsafeCell::new(EMPTY),
        })
    }

    /// Opens the file named by environment variable `var`; `None` when it is unset or empty.
    /// A file that cannot be opened is reported once on stderr (prefixed by `who`).
    pub fn from_env(var: &str, who: &str) -> Option<Self> {
        open_from_env(var, who, Self::open)
    }

    /// Adds `record` as one line. Never allocates.
    pub fn write<const N: usize>(&self, record: &mut Record<N>) -> io::Result<()> {
        let line = record.finish_line();
        if !self.mappable {
            return write_all(self.fd.as_raw_fd(), line);
        }
        let generation = fork_generation();
        let _held = self.lock(generation);
        // SAFETY: the lock is held: no other thread of this process touches the window.
        let window = unsafe { &mut *self.window.get() };
        if window.generation != generation {
            // A forked child: the chunk is the parent's (the child's copy of its mapping is
            // left alone; the parent may still be writing through its own).
            *window = EMPTY;
        }
        let len = line.len() as u64;
        if window.map.is_null() || window.next + len > window.end {
            if let Err(err) = self.take_chunk(window, generation) {
                // No chunk (a full disk, a file system that cannot map): the record is still
                // written, by a plain append.
                return write_all(self.fd.as_raw_fd(), line).map_err(|_| err);
            }
        }
        let at = (window.next - window.map_offset) as usize;
        // SAFETY: [at, at + len) lies inside the mapping: next + len <= end = map_offset +
        // map_len, and the record does not overlap the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(line.as_ptr(), window.map.add(at), line.len());
        }
        window.next += len;
        Ok(())
    }

    /// Cuts the NUL bytes at the end of the file, when the last chunk is this process's: for
    /// clean exit. Records written afterwards take a new chunk. Never shrinks a chunk another
    /// process holds.
    pub fn close_tail(&self) {
        if !self.mappable {
            return;
        }
        let generation = fork_generation();
        let _held = self.lock(generation);
        // SAFETY: the lock is held.
        let window = unsafe { &mut *self.window.get() };
        if window.generation != generation || window.map.is_null() {
            return;
        }
        let fd = self.fd.as_raw_fd();
        if file_lock(fd, libc::F_WRLCK).is_ok() {
            if fstat(fd).is_ok_and(|st| st.st_size as u64 == window.end) {
                // SAFETY: ftruncate on our own descriptor; nothing maps past `next` any more
                // once the window is dropped below.
                unsafe { libc::ftruncate(fd, window.next as libc::off_t) };
            }
            let _ = file_lock(fd, libc::F_UNLCK);
        }
        unmap(window);
        *window = EMPTY;
    }

    /// Extends the file by a chunk and maps it; `window` then points at where the next record
    /// goes: the chunk's start, or `next` when the old chunk was the file's last.
    fn take_chunk(&self, window: &mut Window, generation: u64) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        file_lock(fd, libc::F_WRLCK)?;
        let ours = window.generation == generation && !window.map.is_null();
        let taken = (|| {
            let size = fstat(fd)?.st_size as u64;
            // Still the file's last chunk: carry on from `next`, so that one writer leaves no
            // NUL bytes between its records.
            let start = match ours && size == window.end {
                true => window.next,
                false => size,
            };
            let end = size + CHUNK;
            // SAFETY: ftruncate on our own descriptor, only ever growing the file.
            if unsafe { libc::ftruncate(fd, end as libc::off_t) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok((start, end))
        })();
        let _ = file_lock(fd, libc::F_UNLCK);
        let (start, end) = taken?;
        if ours {
            unmap(window);
        }
        let map_offset = start & !(page_size() - 1);
        let map_len = (end - map_offset) as usize;
        // SAFETY: a new shared mapping of our own file, within its (just extended) length.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                map_offset as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            *window = EMPTY;
            return Err(io::Error::last_os_error());
        }
        // Fault the chunk in with one call rather than a trap per page on the hot path (Linux
        // 5.14; older kernels refuse it and fault page by page).
        // SAFETY: advice on the mapping just made, within its length.
        unsafe { libc::madvise(map, map_len, libc::MADV_POPULATE_WRITE) };
        *window = Window {
            generation,
            map: map.cast(),
            map_len,
            map_offset,
            next: start,
            end,
        };
        Ok(())
    }

    fn lock(&self, generation: u64) -> Held<'_> {
        let mine = generation << 1 | 1;
        let mut spins = 0u32;
        loop {
            let now = self.lock.load(Ordering::Relaxed);
            // Free, or held in another generation: by a thread that does not exist in this
            // process (the parent's, before fork).
            if (now == 0 || now >> 1 != generation)
                && self
                    .lock
                    .compare_exchange_weak(now, mine, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Held(&self.lock);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
}

impl Drop for MappedLog {
    fn drop(&mut self) {
        unmap(self.window.get_mut());
    }
}

struct Held<'a>(&'a AtomicU64);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

fn unmap(window: &mut Window) {
    if !window.map.is_null() {
        // SAFETY: the mapping was made by `take_chunk` with this length and is ours.
        unsafe { libc::munmap(window.map.cast(), window.map_len) };
        window.map = std::ptr::null_mut();
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: fstat writes into the zeroed struct it is given.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// Locks (`F_WRLCK`) or unlocks (`F_UNLCK`) the whole file against other processes, waiting.
fn file_lock(fd: RawFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: a zeroed flock is valid; the fields set describe the whole file.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: fcntl on our own descriptor with a valid flock.
        if unsafe { libc::fcntl(fd, libc::F_SETLKW, &lock) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's records, NUL padding read as line ends.
    fn lines(path: &Path) -> Vec<String> {
        let bytes = std::fs::read(path).unwrap();
        bytes
            .split(|&b| b == b'\n' || b == 0)
            .filter(|l| !l.is_empty())
            .map(|l| String::from_utf8(l.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn records_land_whole_and_in_order_and_the_tail_is_cut_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let log = MappedLog::open(&path).unwrap();
        for i in 0..5000u64 {
            let mut r = Record::new("n");
            r.u64("i", i).str("pad", "p");
            log.write(&mut r).unwrap();
        }
        let before = std::fs::metadata(&path).unwrap().len();
        assert_eq!(before % CHUNK, 0, "the file grows by chunks");
        let got = lines(&path);
        assert_eq!(got.len(), 5000);
        assert!(got[4999].contains("\"i\":4999"), "{}", got[4999]);
        log.close_tail();
        let text = std::fs::read(&path).unwrap();
        assert!(!text.contains(&0), "no NUL left after close_tail");
        assert!(text.ends_with(b"}\n"));
        // Writing after the cut takes a new chunk.
        log.write(&mut Record::new("late")).unwrap();
        let got = lines(&path);
        assert_eq!(got.len(), 5001);
        assert!(got[5000].starts_with("{\"ev\":\"late\""));
    }

    #[test]
    fn threads_share_a_chunk_without_tearing_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let log = std::sync::Arc::new(MappedLog::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = std::sync::Arc::clone(&log);
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let mut r = Record::new("n");
                        r.u64("t", t).u64("i", i).str("pad", &"x".repeat(300));
                        log.write(&mut r).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let got = lines(&path);
        assert_eq!(got.len(), 8000);
        assert!(got
            .iter()
            .all(|l| l.starts_with("{\"ev\":\"n\"") && l.ends_with("\"}")));
    }

    #[test]
    fn two_writers_of_one_file_take_separate_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let a = MappedLog::open(&path).unwrap();
        let b = MappedLog::open(&path).unwrap();
        for i in 0..100u64 {
            let mut r = Record::new("a");
            r.u64("i", i);
            a.write(&mut r).unwrap();
            let mut r = Record::new("b");
            r.u64("i", i);
            b.write(&mut r).unwrap();
        }
        let got = lines(&path);
        assert_eq!(
            got.iter().filter(|l| l.contains("\"ev\":\"a\"")).count(),
            100
        );
        assert_eq!(
            got.iter().filter(|l| l.contains("\"ev\":\"b\"")).count(),
            100
        );
    }

    #[test]
    fn a_forked_child_writes_its_own_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let log = MappedLog::open(&path).unwrap();
        log.write(&mut Record::new("parent-before")).unwrap();
        // SAFETY: the child only writes a record through the log and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = log.write(&mut Record::new("child")).is_ok();
            // SAFETY: leaves the forked test process at once, without running the harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(status, 0);
        log.write(&mut Record::new("parent-after")).unwrap();
        let got = lines(&path);
        let evs: Vec<&str> = got
            .iter()
            .map(|l| l.split('"').nth(3).unwrap_or(""))
            .collect();
        assert_eq!(evs.len(), 3, "{got:?}");
        for ev in ["parent-before", "child", "parent-after"] {
            assert!(evs.contains(&ev), "{ev} in {evs:?}");
        }
    }

    #[test]
    fn a_pipe_gets_plain_writes() {
        let mut fds = [0; 2];
        // SAFETY: pipe fills the two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let path = format!("/proc/self/fd/{}", fds[1]);
        let log = MappedLog::open(Path::new(&path)).unwrap();
        assert!(!log.mappable);
        log.write(&mut Record::new("piped")).unwrap();
        let mut buf = [0u8; 256];
        // SAFETY: reads into a local buffer from the pipe we made.
        let n = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
        assert!(n > 0);
        assert!(buf[..n as usize].starts_with(b"{\"ev\":\"piped\""));
        // SAFETY: closing the descriptors we made.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
