//! Debian 11's Vulkan stack as `ci/setup-debian11-vulkan.sh` unpacks it into vkexit's cache:
//! validation layer 1.2.162 and Mesa 20.3.5's lavapipe (a Vulkan 1.0 device), each with a
//! manifest that names its library by absolute path, and the libraries they need beside them.

use std::path::{Path, PathBuf};

/// The unpacked stack.
pub struct Debian11 {
    dir: PathBuf,
}

impl Debian11 {
    /// The stack in the cache; `Err` says why it is not there, for [`crate::or_skip!`].
    pub fn find() -> Result<Debian11, String> {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
        let stack = Debian11 {
            dir: cache.join("vkexit/debian11"),
        };
        match stack.layer_manifest().is_file() && stack.lavapipe_manifest().is_file() {
            true => Ok(stack),
            false => Err(format!(
                "Debian 11's Vulkan stack is not in {} (ci/setup-debian11-vulkan.sh puts it there)",
                stack.dir.display()
            )),
        }
    }

    /// Validation layer 1.2.162's manifest, for a matrix's `validation_manifest`.
    pub fn layer_manifest(&self) -> PathBuf {
        self.dir.join("layer/VkLayer_khronos_validation.json")
    }

    /// Mesa 20.3.5's lavapipe manifest, for `--driver`.
    pub fn lavapipe_manifest(&self) -> PathBuf {
        self.dir.join("lavapipe/lvp_icd.x86_64.json")
    }

    /// The libraries both need and this machine lacks (LLVM 11, libffi 7, libVkLayer_utils),
    /// for `LD_LIBRARY_PATH`.
    pub fn lib_dir(&self) -> PathBuf {
        self.dir.join("lib")
    }
}
