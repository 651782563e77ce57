//! vkexit's own environment variables: one table of their names, those vkexit reads and those it
//! sets for its runs, and the one reader of the former. `Environment::get` reads them once per
//! process into a typed struct; the engine hands what each stage needs down from it (the run
//! stage's `run::Process`, the plan's runtime cache), and no other code reads a `VKEXIT_`
//! variable (`harness/tests/layering.rs` holds it). The variables of the evidence files and the
//! validation logs are the evidence crate's (`vkexit_evidence::files`,
//! `vkexit_evidence::validation_logs`), shared with their writers.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The limit on processes and threads of one run (default 1024).
pub const MAX_PROCESSES: &str = "VKEXIT_MAX_PROCESSES";
/// Set to 1, vkexit does not ask to be the reaper of orphans, as where the system refuses it
/// (qemu-user answers EINVAL): for the tests of what vkexit says then.
pub const NO_SUBREAPER: &str = "VKEXIT_NO_SUBREAPER";
/// Set to 1, runs start by fork and move into their cgroup, never by `clone3`: the path of
/// kernels and filters that refuse it, for its tests.
pub const SPAWN_WITHOUT_CLONE3: &str = "VKEXIT_SPAWN_WITHOUT_CLONE3";
/// Names the runtime cache (`ci/setup-runtimes.sh` fills it); every run of a real-runtime cell
/// gets it set, since a run's own `HOME` is not the user's.
pub const RUNTIME_CACHE: &str = "VKEXIT_RUNTIME_CACHE";
/// A directory of helpers to use instead of those vkexit carries.
pub const HELPERS_DIR: &str = "VKEXIT_HELPERS_DIR";

/// Set for every run: the token that ties its processes to it, orphans included.
pub const RUN_TOKEN: &str = "VKEXIT_RUN_TOKEN";
/// Set for a run that exits in another order: the preload's exit order.
pub const EXIT_ORDER: &str = "VKEXIT_EXIT_ORDER";
/// Set for a run whose threads are timed by a seed: the preload's seed.
pub const CHAOS_SEED: &str = "VKEXIT_CHAOS_SEED";
/// Set for a run that times exit handlers only (no C++ static destructors): `atexit`.
pub const TIMELINE_HANDLERS: &str = "VKEXIT_TIMELINE_HANDLERS";
/// Set for a run of a built-in scenario: the refrt library it loads.
pub const REFRT_LIB: &str = "VKEXIT_REFRT_LIB";
/// Set for a run under an emulated driver exit: the tegra-exit layer's mode.
pub const TEGRA_MODE: &str = "VKEXIT_TEGRA_MODE";
/// Set for a run that starts in a directory it shares with other runs: that directory, where
/// the preload records what the run writes.
pub const SHARED_DIR: &str = vkexit_evidence::shared_dir::DIR_VAR;
/// Set with [`SHARED_DIR`]: vkexit's own files, never a run's writes.
pub const SHARED_DIR_SKIP: &str = vkexit_evidence::shared_dir::SKIP_VAR;

/// The default limit on processes and threads of one run: far above what a Vulkan program
/// needs (lavapipe starts one thread per core, up to 32, the validation layer a few), far below
/// a full pid table.
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;

/// A variable of vkexit's whose value is not one it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value:?} is not {what}")]
pub struct BadVariable {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it should be.
    pub what: &'static str,
}

/// What vkexit's own variables say, read once.
#[derive(Debug, Clone)]
pub struct Environment {
    /// `VKEXIT_MAX_PROCESSES`, else the default; a value that is no positive number is kept
    /// as the error it is, for the commands that make runs to refuse.
    pub max_processes: Result<u64, BadVariable>,
    /// Ask to be the reaper of orphans (not with `VKEXIT_NO_SUBREAPER=1`).
    pub subreaper: bool,
    /// Try `clone3` to start runs (not with `VKEXIT_SPAWN_WITHOUT_CLONE3=1`).
    pub clone3: bool,
    /// The runtime cache: `$VKEXIT_RUNTIME_CACHE`, else
    /// `${XDG_CACHE_HOME:-~/.cache}/vkexit/runtimes` (as `ci/setup-runtimes.sh`), absolute.
    pub runtime_cache: Option<PathBuf>,
    /// `VKEXIT_HELPERS_DIR`, when set and not empty.
    pub helpers_dir: Option<PathBuf>,
}

impl Environment {
    /// This process's, read at the first call.
    pub fn get() -> &'static Environment {
        static READ: OnceLock<Environment> = OnceLock::new();
        READ.get_or_init(|| Environment::from(|name| std::env::var_os(name)))
    }

    /// What `var` (a variable's value by name) says.
    fn from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Environment {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let one = |name: &str| var(name).is_some_and(|v| v == "1");
        let runtime_cache = set(RUNTIME_CACHE)
            .map(PathBuf::from)
            .or_else(|| set("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("vkexit/runtimes")))
            .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".cache/vkexit/runtimes")))
            .map(|dir| std::path::absolute(&dir).unwrap_or(dir));
        Environment {
            max_processes: max_processes(var(MAX_PROCESSES)),
            subreaper: !one(NO_SUBREAPER),
            clone3: !one(SPAWN_WITHOUT_CLONE3),
            runtime_cache,
            helpers_dir: set(HELPERS_DIR).map(PathBuf::from),
        }
    }
}

/// A value that is not text is taken as unset.
fn max_processes(value: Option<std::ffi::OsString>) -> Result<u64, BadVariable> {
    let Some(value) = value.and_then(|v| v.into_string().ok()) else {
        return Ok(DEFAULT_MAX_PROCESSES);
    };
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(BadVariable {
            name: MAX_PROCESSES,
            value,
            what: "a positive number of processes",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(vars: &[(&str, &str)]) -> Environment {
        Environment::from(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).into())
        })
    }

    #[test]
    fn unset_variables_give_the_defaults() {
        let env = of(&[]);
        assert_eq!(env.max_processes, Ok(DEFAULT_MAX_PROCESSES));
        assert!(env.subreaper && env.clone3);
        assert_eq!((env.runtime_cache, env.helpers_dir), (None, None));
    }

    #[test]
    fn each_variable_is_read() {
        let env = of(&[
            (MAX_PROCESSES, " 64 "),
            (NO_SUBREAPER, "1"),
            (SPAWN_WITHOUT_CLONE3, "1"),
            (RUNTIME_CACHE, "/c"),
            ("HOME", "/h"),
            (HELPERS_DIR, "/helpers"),
        ]);
        assert_eq!(env.max_processes, Ok(64));
        assert!(!env.subreaper && !env.clone3);
        assert_eq!(env.runtime_cache, Some(PathBuf::from("/c")));
        assert_eq!(env.helpers_dir, Some(PathBuf::from("/helpers")));
        // Only `1` turns a switch: anything else leaves it as it is.
        let env = of(&[(NO_SUBREAPER, "yes"), ("HOME", "/h"), (HELPERS_DIR, "")]);
        assert!(env.subreaper);
        assert_eq!(
            env.runtime_cache,
            Some(PathBuf::from("/h/.cache/vkexit/runtimes"))
        );
        assert_eq!(env.helpers_dir, None);
    }

    #[test]
    fn a_limit_that_is_no_positive_number_is_refused_naming_it() {
        for bad in ["0", "lots", "-1", ""] {
            let err = of(&[(MAX_PROCESSES, bad)]).max_processes.unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("VKEXIT_MAX_PROCESSES={bad:?} is not a positive number of processes")
            );
        }
    }
}
