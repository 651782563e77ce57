//! One owner per artifacts directory: a `vkexit` that runs holds an exclusive `flock` on
//! `ARTIFACTS/.lock` for as long as it runs, and writes its pid and command line there. A
//! second one given the same directory is refused at once, naming the holder: two gates in
//! one directory would share run slots and clear each other's evidence.
//!
//! The kernel drops the lock when its holder exits, however it exits, so a killed vkexit
//! leaves nothing to clean up.

use crate::support::errors::{Error, Result};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// The lock file a command holds in its artifacts directory.
pub const LOCK_FILE: &str = ".lock";

/// The held lock; dropped, it is released.
pub struct ArtifactsLock {
    _file: nix::fcntl::Flock<std::fs::File>,
}

impl ArtifactsLock {
    /// Makes the artifacts directory if needed (private, as the runs make it) and takes
    /// its lock, or says who holds it.
    pub fn take(dir: &Path) -> Result<ArtifactsLock> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("cannot create the artifacts directory", dir, e))?;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("cannot open the artifacts directory's lock", &path, e))?;
        use nix::fcntl::{Flock, FlockArg};
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => held,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "another vkexit".to_string(),
                    h => h.to_string(),
                };
                return Err(Error::bad_input(
                    dir,
                    format!("the artifacts directory is in use by {holder}; wait for it to end, or give this run another --artifacts"),
                ));
            }
            Err((_, errno)) => {
                return Err(Error::io(
                    "cannot lock the artifacts directory",
                    &path,
                    std::io::Error::from(errno),
                ))
            }
        };
        let argv: Vec<String> = std::env::args().collect();
        let me = format!("vkexit pid {} ({})\n", std::process::id(), argv.join(" "));
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = file.write_all(me.as_bytes());
        Ok(ArtifactsLock { _file: file })
    }
}
