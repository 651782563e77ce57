//! Start-up: one `vkexit run` or `vkexit exec` of one program, from spawn to exit, against
//! the program spawned bare. What a test runner pays per test when it launches each one
//! through `vkexit exec`. The commands take turns, round after round, so that a load that
//! drifts weighs on each alike; the median of the rounds is reported, with the spread.

use crate::run::cost::children_cpu_ms;
use crate::support::errors::{Error, Result};
use serde::Serialize;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One command's start-up, over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub command: String,
    /// Median wall time from spawn to exit, in ms.
    pub wall_ms: f64,
    /// Slowest minus fastest round, in ms.
    pub wall_spread_ms: f64,
    /// Median CPU time (user + system of the command and what it waited for), in ms.
    pub cpu_ms: f64,
    /// The median wall time less the bare program's.
    pub beyond_bare_ms: f64,
}

/// The commands timed: a name, and the arguments after `vkexit` (none: the program bare).
/// `cold` ones run with an empty cache of driver probes each time.
struct Timed {
    name: String,
    args: Vec<OsString>,
    cold: bool,
}

/// Times each command `rounds` times, after one untimed round that fills the probe cache.
pub fn measure(work: &Path, driver: &str, rounds: u32) -> Result<Vec<Figure>> {
    let exe = super::vkexit_exe()?;
    let commands = commands(work, driver);
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); commands.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); commands.len()];
    for round in 0..=rounds as usize {
        for turn in 0..commands.len() {
            let i = (turn + round) % commands.len();
            let (w, c) = time_one(&exe, &commands[i], work, round)?;
            if round > 0 {
                wall[i].push(w);
                cpu[i].push(c);
            }
        }
    }
    let bare = median(&mut wall[0].clone());
    Ok(commands
        .iter()
        .zip(wall.iter_mut().zip(cpu.iter_mut()))
        .map(|(command, (w, c))| {
            let spread = w.iter().copied().fold(f64::MIN, f64::max)
                - w.iter().copied().fold(f64::MAX, f64::min);
            let wall_ms = median(w);
            Figure {
                command: command.name.clone(),
                wall_ms,
                wall_spread_ms: spread,
                cpu_ms: median(c),
                beyond_bare_ms: wall_ms - bare,
            }
        })
        .collect())
}

fn commands(work: &Path, driver: &str) -> Vec<Timed> {
    let artifacts = work.join("startup").into_os_string();
    let vkexit = |words: &[&str], cold: bool| {
        let mut args: Vec<OsString> = Vec::new();
        let (sub, rest) = words.split_first().expect("a subcommand");
        args.push(sub.into());
        args.extend(["--driver".into(), driver.into()]);
        if *sub == "run" {
            args.extend(["--runs".into(), "1".into()]);
        }
        args.extend(["--artifacts".into(), artifacts.clone()]);
        args.extend(rest.iter().map(OsString::from));
        args.extend(["--".into(), "/bin/true".into()]);
        let name = format!(
            "vkexit {} -- /bin/true{}",
            words.join(" "),
            if cold { " (no probe kept)" } else { "" }
        );
        Timed { name, args, cold }
    };
    vec![
        Timed {
            name: "/bin/true".into(),
            args: Vec::new(),
            cold: false,
        },
        vkexit(&["exec", "--no-validation"], false),
        vkexit(&["run", "--no-validation"], false),
        vkexit(&["exec"], false),
        vkexit(&["run"], false),
        vkexit(&["run", "--no-validation"], true),
    ]
}

/// Wall and CPU ms of one command, its output dropped. A vkexit that exits nonzero is timed
/// all the same: `/bin/true` under validation is an `error` run (no Vulkan to prove it on).
fn time_one(exe: &Path, timed: &Timed, work: &Path, round: usize) -> Result<(f64, f64)> {
    let mut command = match timed.args.is_empty() {
        true => Command::new("/bin/true"),
        false => Command::new(exe),
    };
    command
        .args(&timed.args)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let cold_cache = work.join(format!("cold-cache-{round}"));
    if timed.cold {
        command.env("XDG_CACHE_HOME", &cold_cache);
    }
    let cpu = children_cpu_ms();
    let start = Instant::now();
    command
        .status()
        .map_err(|e| Error::io("cannot start", exe, e))?;
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    let cpu = children_cpu_ms() - cpu;
    if timed.cold {
        let _ = std::fs::remove_dir_all(&cold_cache);
    }
    Ok((wall, cpu))
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
