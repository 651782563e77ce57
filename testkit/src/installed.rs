//! A vkexit installed as a user installs it (a release file, a wheel, `cargo install`), run as
//! the user would: from an unrelated directory, with a home of its own and nothing of the build
//! in its environment.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vkexit_evidence::verdict::CellVerdict;

/// An installed vkexit: the command that starts it and the directories it runs with.
pub struct Installed {
    program: PathBuf,
    path: String,
    home: PathBuf,
    elsewhere: PathBuf,
    xdg: PathBuf,
}

impl Installed {
    /// `program` (a path, or a name found on `PATH`), with `bin` first on `PATH` when given;
    /// its home, working directory and runtime directory made under `base`.
    pub fn new(program: &Path, bin: Option<&Path>, base: &Path) -> Installed {
        let (home, elsewhere, xdg) = (base.join("home"), base.join("elsewhere"), base.join("xdg"));
        for dir in [&home, &elsewhere, &xdg] {
            fs::create_dir_all(dir).unwrap();
        }
        let path = match bin {
            Some(bin) => format!("{}:/usr/bin:/bin", bin.display()),
            None => "/usr/bin:/bin".to_string(),
        };
        Installed {
            program: program.to_path_buf(),
            path,
            home,
            elsewhere,
            xdg,
        }
    }

    /// One command of it, run to its end.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.program)
            .args(args)
            .current_dir(&self.elsewhere)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("XDG_RUNTIME_DIR", &self.xdg)
            .output()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", self.program.display()))
    }

    /// `vkexit doctor` says ready, with every helper carried.
    pub fn assert_ready(&self) {
        let doctor = self.run(&["doctor"]);
        let said = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            said.contains("status      ready") && said.contains("helpers     9 carried"),
            "{doctor:?}"
        );
    }

    /// The seed's own fix replays: `handler-before-load` with refrt's teardown in a static
    /// destructor crashes under the Jetson's exit, and with the runtime's teardown registered
    /// after the instance and the application's cleanup after the runtime
    /// (`--exit-order teardown-before-driver,cleanup-first`) it passes on lavapipe under the
    /// validation layer. This needs the preload to tell the runtime's load-time handler apart
    /// from the system's in this build of vkexit's helpers.
    pub fn assert_seeds_fix_replays(&self) {
        let out = self.run(&[
            "run",
            "--runs",
            "1",
            "--case",
            "handler-before-load",
            "--runtime",
            "refrt:static-destructor",
            "--emulate",
            "tegra",
            "--exit-order",
            "teardown-before-driver,cleanup-first",
            "--driver",
            "lavapipe",
            "--json",
            "fix.json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let r = crate::results::read(&self.elsewhere.join("fix.json"));
        assert_eq!(
            crate::results::the_cell(&r).verdict,
            CellVerdict::Pass,
            "{r:#?}"
        );
    }

    /// The built-in `clean-exit` case under `runtime`, `runs` runs on lavapipe: exit 0 and
    /// the cell `pass`.
    pub fn assert_built_in_case_passes(&self, runtime: &str, runs: u32) {
        let runs = runs.to_string();
        let out = self.run(&[
            "run",
            "--runs",
            &runs,
            "--case",
            "clean-exit",
            "--runtime",
            runtime,
            "--driver",
            "lavapipe",
            "--json",
            "r.json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let r = crate::results::read(&self.elsewhere.join("r.json"));
        assert_eq!(
            crate::results::the_cell(&r).verdict,
            CellVerdict::Pass,
            "{r:#?}"
        );
    }
}
