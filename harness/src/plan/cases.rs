//! The catalogue: the built-in cases and refrt's policies, in the order they are planned,
//! listed and reported, and the runtimes a case can run against (refrt, and the real
//! runtimes in the runtime cache).

use crate::support::errors::{Error, Result};
use std::path::Path;

/// An ordering scenario built into vkexit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub name: &'static str,
    /// What it does, as `vkexit list` shows it.
    pub description: &'static str,
}

/// The catalogue of built-in cases, in the order they are planned, listed
/// and reported.
pub const CASES: [Case; 4] = [
    Case {
        name: "clean-exit",
        description: "init, allocate, free everything, exit",
    },
    Case {
        name: "buffer-kept-at-exit",
        description: "a device buffer and a pinned host buffer still allocated at exit",
    },
    Case {
        name: "handler-before-load",
        description: "atexit(cleanup) before the runtime is loaded; cleanup frees after teardown",
    },
    Case {
        name: "events-freed-after-teardown",
        description: "events recorded, freed by a handler that runs after the teardown",
    },
];

/// The names of [`CASES`], in their order.
pub const BUILTIN_CASES: [&str; 4] = [CASES[0].name, CASES[1].name, CASES[2].name, CASES[3].name];

/// Built-in cases in their order, before any other (stable sort keeps the rest).
pub fn case_rank(case: &str) -> usize {
    BUILTIN_CASES
        .iter()
        .position(|c| *c == case)
        .unwrap_or(usize::MAX)
}

/// refrt policies from the oldest behaviour to the final fix, before any other.
pub fn runtime_rank(runtime: &str) -> usize {
    runtime
        .strip_prefix("refrt:")
        .and_then(|p| POLICIES.iter().position(|q| *q == p))
        .unwrap_or(usize::MAX)
}

/// refrt's teardown policies, from the oldest behaviour to the final fix.
pub const POLICIES: [&str; 5] = [
    "never",
    "static-destructor",
    "atexit-after-init",
    "guarded",
    "release-children",
];

pub const REFRT_LIBRARY: &str = "libvkexit_refrt.so";

/// The real runtimes the scenarios can drive besides refrt, and the
/// directory of each in the runtime cache.
pub const REAL_RUNTIMES: [&str; 2] = ["ggml", "halide"];

/// Why a built-in case cannot run against `runtime` at all, for a cell that
/// is then `skipped`: the case needs an operation the runtime does not have.
/// (The scenario itself refuses the same way, with exit code 3, when run by hand.)
pub fn case_needs_missing_operation(case: &str, runtime: &str) -> Option<String> {
    let kind = runtime.split_once(':').map_or(runtime, |(kind, _)| kind);
    match (case, kind) {
        ("events-freed-after-teardown", "halide") => Some(
            "Halide's runtime has no event object (its only synchronization is \
             halide_device_sync), and this ordering frees events after teardown"
                .into(),
        ),
        _ => None,
    }
}

/// Why a real-runtime cell cannot run here (`skipped`): `ggml` or `halide`
/// without a path, and nothing of it in the runtime `cache`.
pub(super) fn real_runtime_missing(runtime: &str, cache: Option<&Path>) -> Option<String> {
    if !REAL_RUNTIMES.contains(&runtime) {
        return None;
    }
    let Some(cache) = cache else {
        return Some(format!(
            "`{runtime}` names the runtime cache, but none of {}, XDG_CACHE_HOME and HOME is set",
            crate::support::env::RUNTIME_CACHE
        ));
    };
    let dir = cache.join(runtime);
    (!dir.join("VERSION").exists()).then(|| {
        format!(
            "{runtime} is not in the runtime cache ({}); ci/setup-runtimes.sh downloads it",
            dir.display()
        )
    })
}

/// A real runtime's path made absolute, since runs start in their own
/// directory; other specs unchanged.
pub(super) fn absolute_runtime(spec: &str) -> String {
    match spec.split_once(':') {
        Some((kind, path)) if REAL_RUNTIMES.contains(&kind) && !path.is_empty() => {
            let path = Path::new(path);
            let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
            format!("{kind}:{}", path.display())
        }
        _ => spec.to_string(),
    }
}

/// The layouts a `ggml:<path>` may name, as the ggml adapter resolves them (its `layout`
/// module says how each is opened).
pub const GGML_LAYOUTS: &str = "a directory holding libggml.so, a libggml.so[.N], or a \
     GGML_BACKEND_DL module libggml-<backend>.so (Debian: \
     /usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so)";

/// A `ggml:<path>` that names a file ggml's adapter cannot open: its name.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is none of ggml's layouts; expected {GGML_LAYOUTS}")]
struct NoGgmlLayout(String);

/// Whether an existing `path` is one of ggml's layouts, by what it is: a directory, or a file
/// named as ggml names its registry library or its backend modules. What the files need is
/// found by the scenario, in the environment it runs in.
fn check_ggml_layout(path: &Path) -> std::result::Result<(), NoGgmlLayout> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let library = name == "libggml.so" || name.starts_with("libggml.so.");
    let module = name.starts_with("libggml-") && name.contains(".so");
    match path.is_dir() || library || module {
        true => Ok(()),
        false => Err(NoGgmlLayout(name)),
    }
}

/// Checks a runtime spec: `refrt:<policy>`, `ggml[:<path>]`, `halide[:<path>]`.
pub fn check_runtime(spec: &str) -> Result<()> {
    let bad = |reason: String| Error::BadRuntime {
        spec: spec.to_string(),
        reason,
    };
    if REAL_RUNTIMES.contains(&spec) {
        return Ok(());
    }
    match spec.split_once(':') {
        Some(("refrt", policy)) if POLICIES.contains(&policy) => Ok(()),
        Some(("refrt", policy)) => Err(bad(format!(
            "unknown refrt policy `{policy}`; policies: {}",
            POLICIES.join(", ")
        ))),
        Some((kind, path)) if REAL_RUNTIMES.contains(&kind) => match Path::new(path).exists() {
            true if kind == "ggml" => {
                check_ggml_layout(Path::new(path)).map_err(|e| bad(e.to_string()))
            }
            true => Ok(()),
            false => Err(bad(format!("{path} does not exist"))),
        },
        Some((kind @ ("wgpu" | "ncnn"), _)) => Err(bad(format!(
            "runtime kind `{kind}` is not supported by this build yet; supported: refrt:<policy>, ggml[:<path>], halide[:<path>]"
        ))),
        _ => Err(bad(format!(
            "expected KIND:ARG, e.g. refrt:guarded; refrt policies: {}",
            POLICIES.join(", ")
        ))),
    }
}
