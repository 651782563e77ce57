//! Every error the harness reports to its user, in one place.

use std::path::PathBuf;

/// A failure that stops vkexit before or while it runs cases. Each one says
/// what was wrong and what to do; none is a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),

    #[error("no Vulkan loader: {detail}\n  install it with: apt-get install libvulkan1")]
    NoLoader { detail: String },

    #[error(
        "the Khronos validation layer is not installed (searched {searched}).\n  install it with: apt-get install vulkan-validationlayers\n  or run without validation: --no-validation"
    )]
    NoValidationLayer { searched: String },

    #[error("the validation layer manifest {manifest} names a library that cannot be found: {library}\n  reinstall it with: apt-get install --reinstall vulkan-validationlayers")]
    ValidationLibraryMissing { manifest: PathBuf, library: String },

    #[error("no Vulkan driver matches {wanted}; drivers found: {found}")]
    UnknownDriver { wanted: String, found: String },

    #[error("unknown case `{name}`; built-in cases: {valid}")]
    UnknownCase { name: String, valid: String },

    #[error("bad runtime spec `{spec}`: {reason}")]
    BadRuntime { spec: String, reason: String },

    #[error("{path} is missing: build the workspace first: cargo build --release --workspace")]
    ScenarioMissing { path: PathBuf },

    #[error("{context}: {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn io(context: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            context,
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
