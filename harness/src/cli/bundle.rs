//! `vkexit bundle`: vkexit packed for another machine.

use super::Exit;
use crate::support::errors::Result;
use std::path::PathBuf;
use vkexit_elf::GlibcVersion;

#[derive(clap::Args)]
pub(super) struct BundleArgs {
    /// The target the binaries were built for: x86_64-unknown-linux-gnu or
    /// aarch64-unknown-linux-gnu [default: this machine's, from the directory vkexit runs from;
    /// another target's from target/TRIPLE/release beside it].
    #[arg(long, value_name = "TRIPLE")]
    pub(super) target: Option<String>,
    /// The directory holding the built binaries to pack [default: see --target].
    #[arg(long, value_name = "DIR")]
    pub(super) from: Option<PathBuf>,
    /// The oldest glibc the bundle must start on: packing fails on any file that needs a newer
    /// glibc symbol version [default: 2.31].
    #[arg(long, value_name = "X.Y", value_parser = parse_glibc)]
    pub(super) glibc_floor: Option<GlibcVersion>,
    /// The tarball to write [default: vkexit-VERSION-ARCH.tar.gz].
    #[arg(short, long, value_name = "FILE.tar.gz")]
    pub(super) output: Option<PathBuf>,
    /// Carry the Vulkan loader and the validation layer: `apt-get download` them
    /// (libvulkan1, vulkan-validationlayers) and unpack them into the bundle.
    #[arg(long)]
    pub(super) with_vulkan: bool,
    /// A .deb file, or a directory of them, to unpack into the bundle too (repeatable).
    #[arg(long = "deb", value_name = "PATH")]
    pub(super) debs: Vec<PathBuf>,
    /// A file or directory to carry under share/ (repeatable)
    /// [default: ci/matrix and ci/baselines of the current directory].
    #[arg(long, value_name = "PATH")]
    pub(super) include: Vec<PathBuf>,
    /// A real-runtime cache directory to carry under runtimes/.
    #[arg(long, value_name = "DIR")]
    pub(super) runtimes: Option<PathBuf>,
    /// Drop the debug info of the binaries (function names stay for backtraces).
    #[arg(long)]
    pub(super) strip_debug: bool,
}

/// A glibc version that is none.
#[derive(Debug, thiserror::Error)]
#[error("expected a glibc version like 2.31, got `{0}`")]
struct BadGlibc(String);

fn parse_glibc(text: &str) -> std::result::Result<GlibcVersion, BadGlibc> {
    GlibcVersion::parse(text).ok_or_else(|| BadGlibc(text.to_string()))
}

pub(super) fn bundle(args: BundleArgs) -> Result<Exit> {
    let built = crate::engine::bundle::build(&crate::engine::bundle::BundleRequest {
        target: args.target,
        from: args.from,
        glibc_floor: args.glibc_floor,
        output: args.output,
        with_vulkan: args.with_vulkan,
        debs: args.debs,
        include: args.include,
        runtimes: args.runtimes,
        strip_debug: args.strip_debug,
    })?;
    let m = &built.manifest;
    println!(
        "{}: {:.1} MiB, {} programs and libraries for {} (glibc {} or newer; the newest version needed is {})",
        built.tarball.display(),
        built.bytes as f64 / (1024.0 * 1024.0),
        m.binaries.len(),
        m.target,
        m.glibc_floor,
        m.glibc_min
    );
    if !m.share.is_empty() {
        println!("  share/: {}", m.share.join(", "));
    }
    for p in &m.packages {
        println!("  sysroot/: {} {}", p.name, p.version);
    }
    if m.runtimes {
        println!("  runtimes/: the real-runtime cache");
    }
    println!(
        "  unpack it anywhere and run: {}/vkexit doctor",
        crate::engine::bundle::top_dir_name(&m.arch)
    );
    Ok(Exit::Green)
}
