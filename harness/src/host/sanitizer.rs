//! Programs built with a sanitizer (AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer,
//! ThreadSanitizer): the runtime a run of one must preload ahead of vkexit's preload, and the
//! report a sanitizer writes on the run's stderr.
//!
//! gcc links each sanitizer's runtime as a shared library (`libasan.so.8`, `liblsan.so.0`,
//! `libubsan.so.1`, `libtsan.so.2`), and clang does with `-shared-libasan`
//! (`libclang_rt.asan-x86_64.so`). ASan refuses to start unless its runtime is the first
//! library of the initial list, and a preload comes before the program's own libraries: with
//! vkexit's preload alone in `LD_PRELOAD`, every run of a gcc ASan build would exit 1 ("ASan
//! runtime does not come first in initial library list"). So the sanitizer runtimes a program
//! names (`DT_NEEDED`) are preloaded first, as ASan itself advises: each the very file the
//! program's own dynamic linker resolves (`ld.so --list` with the run's library path), and
//! only when nobody but root and this user can change that file or a directory above it. A
//! runtime that cannot be resolved so is not preloaded; for ASan, the run is then told not to
//! check the order (`verify_asan_link_order=0` appended to `ASAN_OPTIONS`), which keeps the
//! program running with vkexit's preload ahead of the runtime. clang's default links the
//! runtime into the program itself, which always comes first: nothing to do.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use vkexit_elf as elf;

/// The file names of sanitizer runtimes, by how they begin; a shared runtime ends in `.so`
/// or `.so.N`.
const RUNTIMES: [&str; 10] = [
    "libasan.so",
    "liblsan.so",
    "libubsan.so",
    "libtsan.so",
    "libhwasan.so",
    "libclang_rt.asan",
    "libclang_rt.lsan",
    "libclang_rt.ubsan",
    "libclang_rt.tsan",
    "libclang_rt.hwasan",
];

/// Whether `name`, a library's name or path, is a sanitizer's shared runtime.
pub(crate) fn is_runtime(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    RUNTIMES.iter().any(|r| file.starts_with(r)) && file.contains(".so")
}

/// Whether a runtime is ASan's, the one that checks it comes first.
fn is_asan(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    file.starts_with("libasan.so") || file.starts_with("libclang_rt.asan")
}

/// What a run of a program needs for its sanitizer runtimes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Runtimes {
    /// The runtimes to preload first, in the program's order, as absolute paths.
    pub(crate) first: Vec<PathBuf>,
    /// ASan's runtime could not be preloaded first: the run is told not to check the order.
    pub(crate) asan_unordered: bool,
}

impl Runtimes {
    /// `LD_PRELOAD` for a run: the runtimes first, then the sanitizer runtimes the caller's
    /// own preload names (`user`), then `preload` (vkexit's), then the rest of `user` in its
    /// order.
    pub(crate) fn compose(&self, preload: &str, user: Option<&str>) -> String {
        let user: Vec<&str> = user
            .unwrap_or_default()
            .split([':', ' '])
            .filter(|e| !e.is_empty())
            .collect();
        let mut list: Vec<String> = self.first.iter().map(|p| p.display().to_string()).collect();
        for entry in user.iter().filter(|e| is_runtime(e)) {
            if !list.iter().any(|l| l == entry) {
                list.push(entry.to_string());
            }
        }
        list.push(preload.to_string());
        list.extend(
            user.iter()
                .filter(|e| !is_runtime(e))
                .map(|e| e.to_string()),
        );
        list.join(":")
    }

    /// `ASAN_OPTIONS` for a run, from the caller's (`user`), when it must change.
    pub(crate) fn asan_options(&self, user: Option<&str>) -> Option<String> {
        if !self.asan_unordered {
            return None;
        }
        Some(match user.filter(|u| !u.trim().is_empty()) {
            Some(u) => format!("{u}:verify_asan_link_order=0"),
            None => "verify_asan_link_order=0".into(),
        })
    }
}

/// The sanitizer runtimes `program` names itself, resolved as its dynamic linker resolves them
/// with `library_path` as `LD_LIBRARY_PATH`. A program that is not an ELF file this reader
/// knows (a script, another architecture), or names no runtime, needs nothing.
pub(crate) fn runtimes(program: &Path, library_path: Option<&OsString>) -> Runtimes {
    let Ok(bytes) = std::fs::read(program) else {
        return Runtimes::default();
    };
    let Ok(linking) = elf::linking(&bytes) else {
        return Runtimes::default();
    };
    let wanted: Vec<&String> = linking.needed.iter().filter(|n| is_runtime(n)).collect();
    let Some(interpreter) = linking.interpreter.filter(|_| !wanted.is_empty()) else {
        return Runtimes::default();
    };
    let resolved = resolve(&interpreter, program, library_path);
    let mut runtimes = Runtimes::default();
    for name in wanted {
        match resolved.iter().find(|(n, _)| n == name) {
            Some((_, path)) if only_trusted_can_change(path) => runtimes.first.push(path.clone()),
            _ => runtimes.asan_unordered |= is_asan(name),
        }
    }
    runtimes
}

/// Each library the program loads and the file it resolves to, as its interpreter lists them
/// (`ld.so --list`: it maps the libraries and runs none of the program's code).
fn resolve(
    interpreter: &str,
    program: &Path,
    library_path: Option<&OsString>,
) -> Vec<(String, PathBuf)> {
    let mut command = Command::new(interpreter);
    command
        .arg("--list")
        .arg(program)
        .env_remove("LD_PRELOAD")
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    if let Some(path) = library_path {
        command.env("LD_LIBRARY_PATH", path);
    }
    let Ok(out) = command.output() else {
        return Vec::new();
    };
    listed(&String::from_utf8_lossy(&out.stdout))
}

/// `\tlibasan.so.8 => /lib/x86_64-linux-gnu/libasan.so.8 (0x…)` lines, as pairs.
fn listed(text: &str) -> Vec<(String, PathBuf)> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" => ")?;
            let path = rest.rsplit_once(" (").map_or(rest, |(p, _)| p).trim();
            path.starts_with('/')
                .then(|| (name.to_string(), PathBuf::from(path)))
        })
        .collect()
}

/// Whether only root and this user can change the file at `path` (its real file) and every
/// directory above it: one that others may write, unless sticky, would let them choose the
/// code every process of the run starts with.
fn only_trusted_can_change(path: &Path) -> bool {
    let Ok(real) = path.canonicalize() else {
        return false;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let trusted = |p: &Path, dir: bool| {
        std::fs::metadata(p).is_ok_and(|m| {
            let owner_ok = m.uid() == 0 || m.uid() == me;
            let others_write = m.mode() & 0o022 != 0;
            let sticky = m.mode() & 0o1000 != 0;
            owner_ok && (!others_write || (dir && sticky))
        })
    };
    trusted(&real, false)
        && real
            .ancestors()
            .skip(1)
            .filter(|p| !p.as_os_str().as_bytes().is_empty())
            .all(|p| trusted(p, true))
}

/// The report a sanitizer wrote on a run's stderr, in one line: its headline (`AddressSanitizer:
/// heap-use-after-free at /src/a.c:7 in main`), or UBSan's first runtime error.
pub(crate) fn report(stderr: &str) -> Option<String> {
    let mut headline: Option<String> = None;
    let mut summary: Option<&str> = None;
    let mut runtime_errors: Vec<&str> = Vec::new();
    for line in stderr.lines() {
        let line = line.trim_end();
        if let Some(text) = error_line(line) {
            headline.get_or_insert_with(|| text.to_string());
        } else if let Some(text) = line.strip_prefix("SUMMARY: ") {
            summary.get_or_insert(text);
        } else if line.contains(": runtime error: ") {
            runtime_errors.push(line);
        }
    }
    if let Some(headline) = headline {
        return Some(with_summary(&headline, summary));
    }
    let first = runtime_errors.first()?;
    let more = match runtime_errors.len() {
        1 => String::new(),
        n => format!(" (and {} more runtime errors)", n - 1),
    };
    Some(format!("UndefinedBehaviorSanitizer: {first}{more}"))
}

/// `==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x… at pc …` →
/// `AddressSanitizer: heap-use-after-free`; ThreadSanitizer's `WARNING: ThreadSanitizer: data
/// race (pid=123)` → `ThreadSanitizer: data race`. Addresses and pids change from run to run
/// and are left out.
fn error_line(line: &str) -> Option<&str> {
    let text = line.split_once("==ERROR: ").map(|(_, t)| t).or_else(|| {
        line.strip_prefix("WARNING: ThreadSanitizer: ")
            .map(|_| &line[9..])
    })?;
    if !text.split(':').next()?.ends_with("Sanitizer") {
        return None;
    }
    let end = [" on address ", " on unknown address ", " (pid=", " at pc "]
        .iter()
        .filter_map(|cut| text.find(cut))
        .min()
        .unwrap_or(text.len());
    Some(&text[..end])
}

/// The headline with where the summary says it happened: `SUMMARY: AddressSanitizer:
/// heap-use-after-free /src/a.c:7 in main` adds `at /src/a.c:7 in main`; a summary of
/// another shape (`AddressSanitizer: 64 byte(s) leaked in 1 allocation(s).`) is added whole.
fn with_summary(headline: &str, summary: Option<&str>) -> String {
    let Some(summary) = summary else {
        return headline.to_string();
    };
    let kind = headline.split_once(": ").map_or("", |(_, k)| k);
    let said = summary.split_once(": ").map_or(summary, |(_, s)| s);
    match said.strip_prefix(kind).filter(|_| !kind.is_empty()) {
        Some(place) if place.trim().is_empty() => headline.to_string(),
        Some(place) => format!("{headline} at {}", place.trim()),
        None => format!("{headline}: {said}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_known_by_their_file_names() {
        assert!(is_runtime("libasan.so.8"));
        assert!(is_runtime(
            "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.asan-x86_64.so"
        ));
        assert!(is_runtime("libubsan.so.1"));
        assert!(!is_runtime("libclang_rt.asan-x86_64.a"));
        assert!(!is_runtime("libvulkan.so.1"));
        assert!(!is_runtime("/opt/libasan/libvkexit_preload.so"));
    }

    #[test]
    fn the_runtimes_come_first_then_vkexits_preload_then_the_callers() {
        let r = Runtimes {
            first: vec!["/lib/libasan.so.8".into()],
            asan_unordered: false,
        };
        assert_eq!(
            r.compose("/v/libvkexit_preload.so", Some("/my/hook.so libubsan.so.1")),
            "/lib/libasan.so.8:libubsan.so.1:/v/libvkexit_preload.so:/my/hook.so"
        );
        assert_eq!(
            r.compose("/v/p.so", Some("/lib/libasan.so.8")),
            "/lib/libasan.so.8:/v/p.so"
        );
        assert_eq!(Runtimes::default().compose("/v/p.so", None), "/v/p.so");
        assert_eq!(r.asan_options(Some("detect_leaks=0")), None);
        let unordered = Runtimes {
            first: Vec::new(),
            asan_unordered: true,
        };
        assert_eq!(
            unordered.asan_options(Some("detect_leaks=0")).as_deref(),
            Some("detect_leaks=0:verify_asan_link_order=0")
        );
    }

    #[test]
    fn the_interpreters_list_reads_as_names_and_files() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
            \tlibasan.so.8 => /lib/x86_64-linux-gnu/libasan.so.8 (0x00007f10)\n\
            \tlibmissing.so => not found\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f20)\n";
        assert_eq!(
            listed(text),
            vec![(
                "libasan.so.8".to_string(),
                PathBuf::from("/lib/x86_64-linux-gnu/libasan.so.8")
            )]
        );
    }

    #[test]
    fn a_file_others_may_change_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libasan.so.8");
        std::fs::write(&lib, b"").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        let open_dir = dir.path().join("open");
        std::fs::create_dir(&open_dir).unwrap();
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let exposed = open_dir.join("libasan.so.8");
        std::fs::write(&exposed, b"").unwrap();
        // The temporary directory's parents (/tmp) are sticky: allowed.
        assert!(only_trusted_can_change(&lib));
        assert!(!only_trusted_can_change(&exposed));
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!only_trusted_can_change(&lib));
        assert!(!only_trusted_can_change(&dir.path().join("absent.so")));
    }

    #[test]
    fn an_asan_report_reads_as_its_kind_and_place() {
        let stderr = "=================================================================\n\
            ==19480==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000014 at pc 0x5613687fc1da bp 0x7ffd535ea470 sp 0x7ffd535ea468\n\
            READ of size 4 at 0x602000000014 thread T0\n\
            \x20   #0 0x5613687fc1d9 in main /tmp/san/uaf.c:2\n\
            SUMMARY: AddressSanitizer: heap-use-after-free /tmp/san/uaf.c:2 in main\n";
        assert_eq!(
            report(stderr).as_deref(),
            Some("AddressSanitizer: heap-use-after-free at /tmp/san/uaf.c:2 in main")
        );
    }

    #[test]
    fn a_leak_report_says_how_much_leaked() {
        let stderr = "==19490==ERROR: LeakSanitizer: detected memory leaks\n\n\
            Direct leak of 64 byte(s) in 1 object(s) allocated from:\n\
            SUMMARY: LeakSanitizer: 64 byte(s) leaked in 1 allocation(s).\n";
        assert_eq!(
            report(stderr).as_deref(),
            Some("LeakSanitizer: detected memory leaks: 64 byte(s) leaked in 1 allocation(s).")
        );
    }

    #[test]
    fn ubsan_runtime_errors_read_as_the_first_and_a_count() {
        let stderr = "a.c:3:70: runtime error: shift exponent 40 is too large for 32-bit type 'int'\n\
            256\n\
            a.c:9:5: runtime error: signed integer overflow: 2147483647 + 1 cannot be represented in type 'int'\n\
            SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior a.c:3:70 in \n";
        assert_eq!(
            report(stderr).as_deref(),
            Some(
                "UndefinedBehaviorSanitizer: a.c:3:70: runtime error: shift exponent 40 is too \
                 large for 32-bit type 'int' (and 1 more runtime errors)"
            )
        );
    }

    #[test]
    fn a_tsan_warning_and_plain_output_read_as_they_are() {
        assert_eq!(
            report("WARNING: ThreadSanitizer: data race (pid=12)\n").as_deref(),
            Some("ThreadSanitizer: data race")
        );
        assert_eq!(report("ERROR: not a sanitizer\nall fine\n"), None);
        assert_eq!(report("==1==ERROR: something else: x\n"), None);
    }
}
