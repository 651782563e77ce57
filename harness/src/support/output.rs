//! Where a report goes, checked before any run, and how it is written there.
//!
//! A path vkexit writes is resolved once, up front, to what it names:
//! - a regular file, or a path that does not exist yet, is written whole or not at all: a
//!   temporary file next to the **resolved** path, renamed over it. A symlink is written
//!   through, to its target, and stays a symlink; an existing file keeps its permissions.
//! - a FIFO or a character device (`/dev/stdout`, `/dev/null`, a pipe) is a stream: written
//!   in place, never renamed over.
//! - an existing file that is read-only (no write bit, even for root), a directory, or a
//!   directory vkexit cannot create files in is refused before the run.
//!
//! Two outputs on one file, or an output on a file vkexit reads (a baseline, a matrix), are
//! refused: files are told apart by device and inode, so `./x`, `x` and a symlink to `x`
//! are one file.

use crate::support::errors::{Error, Result};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// An output path, resolved to what it names.
#[derive(Debug, Clone)]
pub struct Target {
    /// The path as the user gave it: messages name it so.
    pub given: PathBuf,
    /// Where the bytes go: the file a symlink leads to, or the given path of a stream.
    pub real: PathBuf,
    /// A FIFO or character device: written in place.
    pub stream: bool,
    identity: Identity,
}

/// What makes two paths one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    /// An existing file: its device and inode.
    Inode(u64, u64),
    /// A file still to be made: its directory's device and inode, and its name.
    InDir(u64, u64, std::ffi::OsString),
}

impl Target {
    /// Resolves `path` and checks that a report can be written there; `what` names the
    /// report in errors ("the results file").
    pub fn check(path: &Path, what: &str) -> Result<Target> {
        let refuse = |why: String| Error::bad_input(path, format!("cannot write {what}: {why}"));
        // A stream first, as the kernel opens it: `/dev/stdout` on a pipe leads through
        // `/proc/self/fd/1` to `pipe:[…]`, which no path resolves to.
        if let Ok(meta) = std::fs::metadata(path) {
            let kind = meta.file_type();
            if kind.is_fifo() || kind.is_char_device() || through_fd(path) {
                return Ok(Target {
                    given: path.to_path_buf(),
                    real: path.to_path_buf(),
                    stream: true,
                    identity: Identity::Inode(meta.dev(), meta.ino()),
                });
            }
        }
        let real = resolve(path).map_err(|e| refuse(e.to_string()))?;
        match std::fs::metadata(&real) {
            Ok(meta) => {
                if !meta.file_type().is_file() {
                    return Err(refuse(
                        "it is not a regular file, a FIFO or a device".into(),
                    ));
                }
                if meta.permissions().mode() & 0o222 == 0 {
                    return Err(refuse(format!(
                        "it is read-only (mode {:o}); make it writable or choose another path",
                        meta.permissions().mode() & 0o7777
                    )));
                }
                check_dir(real.parent().unwrap_or(Path::new(".")))
                    .map_err(|e| refuse(e.to_string()))?;
                Ok(Target {
                    given: path.to_path_buf(),
                    real,
                    stream: false,
                    identity: Identity::Inode(meta.dev(), meta.ino()),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = real.parent().unwrap_or(Path::new("."));
                let dir_meta = std::fs::metadata(dir)
                    .map_err(|e| refuse(format!("its directory {}: {e}", dir.display())))?;
                check_dir(dir).map_err(|e| refuse(e.to_string()))?;
                let name = real.file_name().unwrap_or_default().to_os_string();
                Ok(Target {
                    given: path.to_path_buf(),
                    identity: Identity::InDir(dir_meta.dev(), dir_meta.ino(), name),
                    real,
                    stream: false,
                })
            }
            Err(e) => Err(refuse(e.to_string())),
        }
    }

    /// Whether `self` and `other` name one file.
    pub fn same_file(&self, other: &Target) -> bool {
        self.identity == other.identity
    }

    /// Whether `input`, a file vkexit reads, is this output's file.
    pub fn is_file(&self, input: &Path) -> bool {
        match std::fs::metadata(input) {
            Ok(meta) => self.identity == Identity::Inode(meta.dev(), meta.ino()),
            Err(_) => false,
        }
    }

    /// Writes `contents`: streamed to a FIFO or device, else whole or not at all.
    pub fn write(&self, contents: &[u8]) -> std::io::Result<()> {
        match self.stream {
            // Appended: `/dev/stdout` redirected to a file already holds the table.
            true => std::fs::OpenOptions::new()
                .append(true)
                .open(&self.real)
                .and_then(|mut f| f.write_all(contents)),
            false => write_atomically(&self.real, contents),
        }
    }
}

/// Refuses two outputs on one file, and an output on an input; `outputs` are (flag, target),
/// `inputs` (flag, path).
pub fn check_apart(outputs: &[(&str, &Target)], inputs: &[(&str, &Path)]) -> Result<()> {
    for (i, (flag, out)) in outputs.iter().enumerate() {
        if let Some((first, _)) = outputs[..i].iter().find(|(_, o)| o.same_file(out)) {
            return Err(Error::bad_input(
                &out.given,
                format!("{first} and {flag} name one file: one report would overwrite the other; give each its own path"),
            ));
        }
        if let Some((input, path)) = inputs.iter().find(|(_, p)| out.is_file(p)) {
            return Err(Error::bad_input(
                &out.given,
                format!(
                    "{flag} would overwrite {input} {}, which vkexit reads; give the report another path",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `path` leads through a process's open file (`/dev/stdout`, `/dev/fd/N`,
/// `/proc/self/fd/N`): that is a stream whatever it is open on. A regular file there (`>
/// out.txt`) renamed over would leave the shell's descriptor on the old file.
fn through_fd(path: &Path) -> bool {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let text = path.to_string_lossy();
        let fd_dir = text.starts_with("/dev/fd/")
            || (text.starts_with("/proc/") && text.split('/').nth(3) == Some("fd"));
        if fd_dir {
            return true;
        }
        match std::fs::read_link(&path) {
            Ok(target) => {
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                }
            }
            Err(_) => return false,
        }
    }
    false
}

/// The path with every symlink followed, also one that leads to a file not made yet.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    // As the kernel does: a chain of links longer than 40 is a loop.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(_) => return absolute(&path, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return absolute(&path, false),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// An existing path made canonical; for one not made yet, its directory made canonical.
/// `/proc/self/fd/1` and its kind lead nowhere canonical: they are kept as they are.
fn absolute(path: &Path, exists: bool) -> std::io::Result<PathBuf> {
    if exists {
        return Ok(path.canonicalize().unwrap_or_else(|_| path.to_path_buf()));
    }
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = dir.canonicalize().map_err(|e| {
        std::io::Error::new(e.kind(), format!("its directory {}: {e}", dir.display()))
    })?;
    Ok(dir.join(name))
}

/// A directory vkexit cannot make a file in, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot create files in {}: {source}", dir.display())]
struct NoFilesIn {
    dir: PathBuf,
    #[source]
    source: std::io::Error,
}

/// A directory vkexit can make a file in: a probe file made and removed, which also finds a
/// read-only file system and a directory that root could write but whose mode says no.
fn check_dir(dir: &Path) -> std::result::Result<(), NoFilesIn> {
    let probe = dir.join(format!(".vkexit-probe.{}", std::process::id()));
    std::fs::File::create(&probe)
        .map(|_| ())
        .map_err(|source| NoFilesIn {
            dir: dir.to_path_buf(),
            source,
        })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes a file whole or not at all: into a temporary file next to `path`, flushed to
/// disk, then renamed over it. A vkexit killed while writing, or a full disk, leaves the
/// old file (or none), never half of a new one that a later merge or gate would read as
/// complete. An existing file keeps its permissions. `path` should be resolved
/// ([`Target::check`]): renamed over, a symlink would become a regular file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let written = std::fs::File::create(&temp).and_then(|mut f| {
        f.write_all(contents)?;
        if let Some(mode) = mode {
            f.set_permissions(mode)?;
        }
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&temp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_is_written_through_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        let out = Target::check(&link, "the results file").unwrap();
        out.write(b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        // A dangling link: the file is made where it leads.
        let dangling = dir.path().join("later.json");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        Target::check(&dangling, "x").unwrap().write(b"1").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.json")).unwrap(),
            "1"
        );
    }

    #[test]
    fn one_file_by_any_name_is_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x");
        let via_dot = dir.path().join(".").join("x");
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&x, &link).unwrap();
        // Not made yet, then made.
        for made in [false, true] {
            if made {
                std::fs::write(&x, "").unwrap();
            }
            let a = Target::check(&x, "a").unwrap();
            assert!(a.same_file(&Target::check(&via_dot, "b").unwrap()));
            assert!(a.same_file(&Target::check(&link, "c").unwrap()));
            let other = Target::check(&dir.path().join("y"), "d").unwrap();
            assert!(!a.same_file(&other));
            let err = check_apart(
                &[("--json", &a), ("--junit", &other)],
                &[("--baseline", &link)],
            );
            assert_eq!(err.is_err(), made, "{err:?}");
        }
    }

    #[test]
    fn read_only_files_and_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro.toml");
        std::fs::write(&ro, "x").unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = Target::check(&ro, "the baseline file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("read-only (mode 444)"), "{err}");
        let err = Target::check(dir.path(), "x").unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = Target::check(&dir.path().join("no/such/x"), "x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("its directory"), "{err}");
    }

    #[test]
    fn a_process_s_open_file_is_a_stream_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.txt");
        std::fs::write(&file, "table\n").unwrap();
        let open = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        let via = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&open)
        ));
        let out = Target::check(&via, "x").unwrap();
        assert!(out.stream);
        out.write(b"json\n").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "table\njson\n");
    }

    #[test]
    fn devices_are_streams() {
        let null = Target::check(Path::new("/dev/null"), "x").unwrap();
        assert!(null.stream);
        null.write(b"gone").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
