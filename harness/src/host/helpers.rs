//! The helpers vkexit carries inside its own executable (the built-in scenario programs, refrt,
//! the diagnostics preload and vkexit's two layers), and the one place that hands out their
//! paths.
//!
//! A run needs them as files: the loader opens a layer by path, `LD_PRELOAD` names a file, a
//! scenario is a program. On first use they are written to
//! `${XDG_CACHE_HOME:-~/.cache}/vkexit/helpers/<key>/`, `<key>` derived from their content; when
//! that cannot be written, beside the artifacts directory of the command
//! (`.vkexit-helpers/<key>/`). What vkexit preloads into every run must be what it carries, so:
//! - the directory must be owned by this user and writable by nobody else, and so must every
//!   directory above it (root's may be, and a sticky one may be writable by all, as `/tmp`); one
//!   that is not is refused, never used;
//! - every file is read and checked against its SHA-256 before this process hands out its path
//!   the first time; a file that is missing, changed, planted, a link, or not this user's is
//!   replaced: written under a temporary name in the same directory, then renamed over it, so
//!   that processes unpacking at once each see a whole file.
//!
//! `VKEXIT_HELPERS_DIR=DIR` uses the helpers in DIR as they are, unchecked: for working on the
//! helpers themselves, or a test that swaps one.
//!
//! The archive (written by `harness/build.rs`): `VKEXIT-HELPERS/1`, one line per file
//! (`name mode-in-octal size sha256-hex`), an empty line, then the files' bytes in that order.

use crate::support::errors::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The ELF section of vkexit's executable that holds the archive.
pub(crate) const SECTION: &str = ".vkexit_helpers";

// `static ARCHIVE`, the archive, in the section named [`SECTION`].
include!(concat!(env!("OUT_DIR"), "/carried.rs"));

/// The helpers this executable carries.
static CARRIED: &[u8] = &ARCHIVE;

const MAGIC: &str = "VKEXIT-HELPERS/1";

/// One file of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Helper<'a> {
    pub(crate) name: &'a str,
    pub(crate) mode: u32,
    pub(crate) sha256: [u8; 32],
    pub(crate) bytes: &'a [u8],
}

/// Bytes that are no archive of helpers: where they stop making sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadArchive {
    #[error("no end to the index")]
    NoIndexEnd,
    #[error("an index not in UTF-8")]
    IndexNotUtf8,
    #[error("does not start with {MAGIC}")]
    NoMagic,
    /// A line of the index that is not `name mode size sha256`, or whose name is a path.
    #[error("a bad index line: {0:?}")]
    BadLine(String),
    /// A file, by name, whose size goes past the archive's end.
    #[error("{0} runs past the end")]
    PastTheEnd(String),
    /// How many bytes follow the last file.
    #[error("{0} bytes after the last file")]
    Trailing(usize),
}

/// An archive of helpers, read.
#[derive(Debug)]
pub(crate) struct Archive<'a> {
    pub(crate) helpers: Vec<Helper<'a>>,
    /// Names the directory they are unpacked in: from the index, which holds every hash.
    pub(crate) key: String,
}

impl<'a> Archive<'a> {
    /// Reads an archive; anything that is not one is an error saying where it stops making
    /// sense.
    pub(crate) fn parse(bytes: &'a [u8]) -> std::result::Result<Archive<'a>, BadArchive> {
        let end = find(bytes, b"\n\n").ok_or(BadArchive::NoIndexEnd)?;
        let index = std::str::from_utf8(&bytes[..end]).map_err(|_| BadArchive::IndexNotUtf8)?;
        let mut lines = index.lines();
        if lines.next() != Some(MAGIC) {
            return Err(BadArchive::NoMagic);
        }
        let mut at = end + 2;
        let mut helpers = Vec::new();
        for line in lines {
            let (helper, next) = entry(line, bytes, at)?;
            helpers.push(helper);
            at = next;
        }
        if at != bytes.len() {
            return Err(BadArchive::Trailing(bytes.len() - at));
        }
        let key = hex(&Sha256::digest(index.as_bytes()))[..20].to_string();
        Ok(Archive { helpers, key })
    }

    /// The helpers this executable carries.
    pub(crate) fn carried() -> &'static Archive<'static> {
        static PARSED: OnceLock<Archive<'static>> = OnceLock::new();
        PARSED.get_or_init(|| {
            Archive::parse(CARRIED).expect("harness/build.rs writes a well-formed archive")
        })
    }

    /// The helper named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Helper<'a>> {
        self.helpers.iter().find(|h| h.name == name)
    }
}

fn entry<'a>(
    line: &'a str,
    bytes: &'a [u8],
    at: usize,
) -> std::result::Result<(Helper<'a>, usize), BadArchive> {
    let bad = || BadArchive::BadLine(line.to_string());
    let fields: Vec<&str> = line.split(' ').collect();
    let [name, mode, size, sha] = fields[..] else {
        return Err(bad());
    };
    let mode = u32::from_str_radix(mode, 8).map_err(|_| bad())?;
    let size: usize = size.parse().map_err(|_| bad())?;
    let sha256 = unhex(sha).ok_or_else(bad)?;
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(bad());
    }
    let end = at
        .checked_add(size)
        .filter(|e| *e <= bytes.len())
        .ok_or_else(|| BadArchive::PastTheEnd(name.to_string()))?;
    let helper = Helper {
        name,
        mode,
        sha256,
        bytes: &bytes[at..end],
    };
    Ok((helper, end))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The path of helper `name`, checked against what vkexit carries (once per process).
pub(crate) fn path(name: &str) -> Result<PathBuf> {
    if let Some(dir) = overridden() {
        let path = dir.join(name);
        return match path.exists() {
            true => Ok(path),
            false => Err(Error::ScenarioMissing { path }),
        };
    }
    store()?.checked(name)
}

/// Where the helpers are, for `vkexit doctor`: every one checked, or why not.
pub(crate) fn where_all() -> Result<Location> {
    if let Some(dir) = overridden() {
        let missing: Vec<String> = Archive::carried()
            .helpers
            .iter()
            .filter(|h| !dir.join(h.name).exists())
            .map(|h| h.name.to_string())
            .collect();
        return Ok(Location::Overridden { dir, missing });
    }
    let store = store()?;
    for helper in &Archive::carried().helpers {
        store.checked(helper.name)?;
    }
    Ok(Location::Unpacked {
        dir: store.dir.clone(),
        count: Archive::carried().helpers.len(),
    })
}

/// Where the helpers of this process come from.
#[derive(Debug)]
pub(crate) enum Location {
    /// Unpacked and checked.
    Unpacked { dir: PathBuf, count: usize },
    /// `VKEXIT_HELPERS_DIR`, with the helpers missing from it.
    Overridden { dir: PathBuf, missing: Vec<String> },
}

/// A directory whose helpers are used as they are, unchecked (`VKEXIT_HELPERS_DIR`). Read from
/// the process's environment, resolved once, rather than handed down: any stage may ask for a
/// helper, before any command is resolved.
fn overridden() -> Option<PathBuf> {
    crate::support::env::Environment::get().helpers_dir.clone()
}

/// Where helpers go when the user's cache cannot be written: beside the artifacts directory
/// of this command. Set once, before the first helper is asked for.
pub(crate) fn fall_back_beside(artifacts: &Path) {
    let parent = match artifacts.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let _ = FALLBACK.set(parent.join(".vkexit-helpers"));
}

static FALLBACK: OnceLock<PathBuf> = OnceLock::new();

/// Why the helpers cannot be unpacked, or not where they would go.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unpack {
    /// Neither XDG_CACHE_HOME nor HOME says where.
    #[error(
        "nowhere to unpack them: none of XDG_CACHE_HOME and HOME is set; set XDG_CACHE_HOME to a directory of yours"
    )]
    Nowhere,
    /// No directory could be made: each one tried, and why not.
    #[error(
        "cannot unpack them ({}); set XDG_CACHE_HOME to a writable directory of yours",
        tried(.0)
    )]
    NoDirectory(Vec<(PathBuf, std::io::Error)>),
    /// A path that cannot be looked at.
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A directory someone else owns or may write in.
    #[error(
        "{} is not private (owner uid {owner}, mode {mode:o}; it must be uid {me}'s, mode 700): \
         refused; remove it, or set XDG_CACHE_HOME to a directory of yours",
        dir.display()
    )]
    NotPrivate {
        dir: PathBuf,
        owner: u32,
        mode: u32,
        me: u32,
    },
    /// A directory below one that others could swap it out of.
    #[error(
        "{} is below {}, which others could change (owner uid {owner}, mode {mode:o}): refused; \
         set XDG_CACHE_HOME to a directory of yours",
        dir.display(),
        above.display()
    )]
    Exposed {
        dir: PathBuf,
        above: PathBuf,
        owner: u32,
        mode: u32,
    },
    /// A helper cannot be written into the directory.
    #[error("cannot write in {}: {source}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A helper's mode cannot be set.
    #[error("cannot set the mode of a file in {}: {source}", dir.display())]
    Mode {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A helper, written, cannot be renamed into place.
    #[error("cannot rename a file in {}: {source}", dir.display())]
    Rename {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A helper, written and renamed into place, reads back other than written.
    #[error("{} does not hold what was written", .0.display())]
    NotHeld(PathBuf),
}

/// `DIR: why; DIR: why`, the directories tried.
fn tried(tried: &[(PathBuf, std::io::Error)]) -> String {
    let each: Vec<String> = tried
        .iter()
        .map(|(dir, e)| format!("{}: {e}", dir.display()))
        .collect();
    each.join("; ")
}

/// The directory the helpers are unpacked in, and the names checked in it by this process.
struct Store {
    dir: PathBuf,
    checked: Mutex<HashSet<String>>,
}

fn store() -> Result<&'static Store> {
    static STORE: OnceLock<std::result::Result<Store, Unpack>> = OnceLock::new();
    STORE
        .get_or_init(|| open_store(&roots(), &Archive::carried().key))
        .as_ref()
        .map_err(|why| Error::Helpers {
            why: why.to_string(),
        })
}

/// `${XDG_CACHE_HOME:-~/.cache}/vkexit/helpers`, then the fallback.
fn roots() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")));
    cache
        .map(|c| c.join("vkexit").join("helpers"))
        .into_iter()
        .chain(FALLBACK.get().cloned())
        .collect()
}

/// The first root whose `<key>` directory can be made; one that exists but is not safe stops
/// the search: a directory someone else could write is a reason to stop, not to look elsewhere.
fn open_store(roots: &[PathBuf], key: &str) -> std::result::Result<Store, Unpack> {
    let mut tried = Vec::new();
    for root in roots {
        // Runs work in directories of their own: every path they get is absolute.
        let dir = std::path::absolute(root.join(key)).unwrap_or_else(|_| root.join(key));
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
        {
            Ok(()) => {
                check_dir(&dir)?;
                return Ok(Store {
                    dir,
                    checked: Mutex::default(),
                });
            }
            Err(e) => tried.push((dir, e)),
        }
    }
    match tried.is_empty() {
        true => Err(Unpack::Nowhere),
        false => Err(Unpack::NoDirectory(tried)),
    }
}

/// Holds `dir` to be this user's, writable by nobody else, below directories only this user,
/// root, or (sticky, as `/tmp`) nobody can swap it in.
pub(crate) fn check_dir(dir: &Path) -> std::result::Result<(), Unpack> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Unpack::Unreadable { path, source }
    };
    let meta = fs::symlink_metadata(dir).map_err(unreadable(dir))?;
    if !meta.is_dir() {
        return Err(Unpack::NotADirectory(dir.to_path_buf()));
    }
    if meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(Unpack::NotPrivate {
            dir: dir.to_path_buf(),
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
            me,
        });
    }
    let real = dir.canonicalize().map_err(unreadable(dir))?;
    for above in real.ancestors().skip(1) {
        let meta = fs::metadata(above).map_err(unreadable(above))?;
        let owner_ok = meta.uid() == me || meta.uid() == 0;
        let sticky = meta.mode() & 0o1000 != 0;
        let others_write = meta.mode() & 0o022 != 0;
        if !owner_ok || (others_write && !sticky) {
            return Err(Unpack::Exposed {
                dir: dir.to_path_buf(),
                above: above.to_path_buf(),
                owner: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
    }
    Ok(())
}

impl Store {
    /// The path of `name`, its content checked the first time this process asks.
    fn checked(&self, name: &str) -> Result<PathBuf> {
        let helper = Archive::carried()
            .get(name)
            .ok_or_else(|| Error::ScenarioMissing {
                path: self.dir.join(name),
            })?;
        let path = self.dir.join(name);
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if checked.contains(name) {
            return Ok(path);
        }
        if !holds(&path, helper) {
            let installed = install(&self.dir, helper).and_then(|()| match holds(&path, helper) {
                true => Ok(()),
                false => Err(Unpack::NotHeld(path.clone())),
            });
            installed.map_err(|why| Error::Helpers {
                why: why.to_string(),
            })?;
        }
        checked.insert(name.to_string());
        Ok(path)
    }
}

/// Whether `path` is a regular file of this user's, writable by nobody else, with the
/// helper's exact bytes. Links are not followed.
fn holds(path: &Path, helper: &Helper) -> bool {
    let Ok(mut file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file()
        || meta.uid() != me
        || meta.mode() & 0o022 != 0
        || meta.len() != helper.bytes.len() as u64
    {
        return false;
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return false,
        }
    }
    hasher.finalize()[..] == helper.sha256[..]
}

/// Writes `helper` whole under a temporary name in `dir`, then renames it into place over
/// whatever was there.
fn install(dir: &Path, helper: &Helper) -> std::result::Result<(), Unpack> {
    let dir_buf = || dir.to_path_buf();
    let write = |source| Unpack::Write {
        dir: dir_buf(),
        source,
    };
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{}.", helper.name))
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(write)?;
    temp.write_all(helper.bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(write)?;
    fs::set_permissions(temp.path(), fs::Permissions::from_mode(helper.mode & 0o555)).map_err(
        |source| Unpack::Mode {
            dir: dir_buf(),
            source,
        },
    )?;
    temp.persist(dir.join(helper.name))
        .map_err(|e| Unpack::Rename {
            dir: dir_buf(),
            source: e.error,
        })?;
    Ok(())
}

/// The library preloaded into every run: the crash report and the exit timeline.
pub(crate) const PRELOAD_LIBRARY: &str = "libvkexit_preload.so";

#[cfg(test)]
mod tests {
    use super::*;

    /// The helpers besides the built-in cases that vkexit asks for by name.
    const REQUIRED: [&str; 5] = [
        "vk-call-loop",
        "libvkexit_refrt.so",
        PRELOAD_LIBRARY,
        "libVkLayer_vkexit_trace.so",
        "libVkLayer_vkexit_tegra_exit.so",
    ];

    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut index = format!("{MAGIC}\n");
        let mut payload = Vec::new();
        for (name, bytes) in files {
            let sha = hex(&Sha256::digest(bytes));
            index.push_str(&format!("{name} 755 {} {sha}\n", bytes.len()));
            payload.extend_from_slice(bytes);
        }
        index.push('\n');
        let mut out = index.into_bytes();
        out.extend(payload);
        out
    }

    #[test]
    fn an_archive_reads_back_file_by_file() {
        let bytes = archive(&[("a", b"first"), ("b", b"")]);
        let a = Archive::parse(&bytes).unwrap();
        assert_eq!(a.helpers.len(), 2);
        assert_eq!(a.get("a").unwrap().bytes, b"first");
        assert_eq!(a.get("b").unwrap().bytes, b"");
        assert_eq!(a.key.len(), 20);
    }

    #[test]
    fn a_different_content_has_a_different_key() {
        let one = archive(&[("a", b"first")]);
        let two = archive(&[("a", b"First")]);
        assert_ne!(
            Archive::parse(&one).unwrap().key,
            Archive::parse(&two).unwrap().key
        );
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        let good = archive(&[("a", b"first")]);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"nothing".to_vec(), "no end to the index"),
            (b"OTHER/1\n\n".to_vec(), "does not start with"),
            (good[..good.len() - 1].to_vec(), "runs past the end"),
            ([&good[..], b"x"].concat(), "after the last file"),
            (
                format!("{MAGIC}\n../x 755 0 {}\n\n", "0".repeat(64)).into_bytes(),
                "a bad index line",
            ),
            (
                format!("{MAGIC}\na 755 0 zz\n\n").into_bytes(),
                "a bad index line",
            ),
        ];
        for (bytes, why) in cases {
            let e = Archive::parse(&bytes).unwrap_err().to_string();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
    }

    #[test]
    fn the_carried_archive_holds_every_helper_vkexit_asks_for() {
        let carried = Archive::carried();
        let mut wanted: Vec<&str> = crate::plan::BUILTIN_CASES.to_vec();
        wanted.extend(REQUIRED);
        for name in wanted {
            let h = carried
                .get(name)
                .unwrap_or_else(|| panic!("{name} is not carried"));
            assert!(h.bytes.starts_with(b"\x7fELF"), "{name} is not an ELF file");
            assert_eq!(h.sha256[..], Sha256::digest(h.bytes)[..], "{name}");
        }
    }
}
