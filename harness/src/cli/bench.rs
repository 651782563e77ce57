//! `vkexit bench`: its flags; the measurement is `engine::bench`.

use crate::engine::bench::{self, Request};
use crate::support::errors::Result;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Runs of the case in each loop: bare, CTest and vkexit, at -j 1 and -j 2.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..))]
    runs: u32,
    /// Times each loop this many times, interleaved with the others; the median is reported,
    /// with the spread (slowest − fastest).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// The case to run.
    #[arg(long = "case", value_name = "NAME", default_value = "clean-exit")]
    case: String,
    /// The runtime of the case.
    #[arg(
        long = "runtime",
        value_name = "SPEC",
        default_value = "refrt:release-children"
    )]
    runtime: String,
    /// A driver short name or ICD manifest path [default: the one driver with a device].
    #[arg(long = "driver", value_name = "NAME")]
    driver: Option<String>,
    /// Run the case without the validation layer.
    #[arg(long)]
    no_validation: bool,
    /// Runs of a trivial case (`/bin/true`) whose peak memory is measured; a tenth as many
    /// are measured too, to show that it does not grow with the number of runs.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(10..))]
    rss_runs: u32,
    /// vkCreateBuffer + vkDestroyBuffer pairs per layer measurement.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(10..))]
    pairs: u32,
    /// Write the figures as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Internal: make the gate SPEC (a file the bench wrote) asks for, and report its peak RSS.
    #[arg(long, value_name = "SPEC", hide = true)]
    rss_child: Option<PathBuf>,
    /// An external program and its arguments, as the case.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub(super) fn bench(args: BenchArgs) -> Result<bool> {
    if let Some(spec) = &args.rss_child {
        return bench::memory::child(spec);
    }
    bench::bench(Request {
        runs: args.runs,
        repeats: args.repeats,
        case: args.case,
        runtime: args.runtime,
        driver: args.driver,
        no_validation: args.no_validation,
        rss_runs: args.rss_runs,
        pairs: args.pairs,
        json: args.json,
        command: args.command,
    })
}
