//! The mock's command line. Options combine; they take effect in a fixed order (see
//! [`USAGE`]), so a combination has one meaning.

use vkexit_fixtures::args::device_index;
use vkexit_fixtures::{ArgCursor, Parsed, UsageError};

use super::signals::Signal;

/// The mock's usage text (`mock --help`), which also says the order options take effect in.
pub const USAGE: &str = "\
usage: mock [OPTIONS]

Provokes each verdict of the vkexit harness on demand. By default it creates a VkInstance and a
VkDevice (so the validation layer loads), destroys them cleanly and returns 0 from main.

options, in the order they take effect:
  --quiet                        write nothing to stdout or stderr: both point at /dev/null
                                 from the start, so a failure shows only in the layer's log
  --grandchild-holds-pipes SECS  double-fork a grandchild (setsid) that keeps stdout and stderr
                                 open for SECS seconds; mock does not wait for it
  --detached-helper SECS         double-fork a helper (setsid, stdin, stdout and stderr on
                                 /dev/null) that sleeps SECS seconds and exits 0; mock does not
                                 wait for it: a benign daemon that outlives the program
  --daemon-crash                 double-fork a helper that calls setsid, closes every descriptor
                                 and raises SIGSEGV (it can write no crash record); mock waits
                                 until the helper is dead, then goes on
  --no-vulkan                    skip the Vulkan setup (validation asked for, never loaded)
  --device N                     the physical device to use (default 0)
  --silent-messenger             install a VK_EXT_debug_utils messenger for every severity and
                                 type that swallows each message (returns VK_FALSE, prints
                                 nothing), as an application that hides validation does
  --disable-validation           create the VkInstance with VkValidationFeaturesEXT disabling
                                 every check (DISABLE_ALL), as an application that turns
                                 validation off itself does
  --layer-settings               chain a VkLayerSettingsCreateInfoEXT (no setting) into
                                 VkInstanceCreateInfo, as ggml does: a validation layer older
                                 than its header (1.3.268) reports
                                 VUID-VkInstanceCreateInfo-pNext-pNext
  --overlapping-instance         while the first instance and device are alive, create and
                                 destroy a second VkInstance (the layer opens its log again)
  --leaking-child                while the first instance and device are alive, start a copy of
                                 mock that destroys its VkDevice with a live VkBuffer (--vuid),
                                 and wait for it: two processes log at once
  --flood BYTES                  write BYTES to stdout and to stderr, in big chunks
                                 (suffixes K, M, G: powers of 1024)
  --vuid                         destroy the VkDevice while a VkBuffer is alive
                                 (VUID-vkDestroyDevice-device-00378)
  --vuids N                      the same with N live VkBuffers: N duplicates of that VUID
                                 in one run, N in 1..=100000
  --keep-vulkan                  leave the instance and device alive at exit
  --second-instance              after the first instance's teardown, create and destroy a
                                 second, clean VkInstance
  --child-crash                  start a copy of mock that uses Vulkan, then raises SIGSEGV;
                                 wait for it, ignore its status and go on (exit 0 unless told)
  --forked-child-crash           fork (no exec, as a multiprocessing pool does) a child that
                                 raises SIGSEGV; wait for it, ignore its status and go on
  --grandchild-crash             start a copy of mock (no Vulkan) that does --child-crash and
                                 exits 0: the crash is two processes down
  --child-crash-at-exit          start a copy of mock that uses Vulkan and crashes in its own
                                 atexit handler (--crash-at-exit); ignore its status
  --crash-at-exit                SIGSEGV from an atexit handler, after main returned
  --crash-probability P          the same with probability P in [0, 1]
  --invalid-device-at-exit       from an atexit handler, call vkDeviceWaitIdle through the
                                 loader with a VkDevice that is not one: the loader's handle
                                 check aborts (SIGABRT), saying `Invalid device` first when
                                 VK_LOADER_DEBUG=error
  --hang-at-exit                 sleep forever inside an atexit handler
  --spin-at-exit-ignoring-term   inside an atexit handler, ignore SIGTERM and loop forever
  --signal NAME                  raise the signal (SIGSEGV, SEGV or 11; default action)
  --hang                         sleep forever in main
  --exit-code N                  leave through exit(N), N in 0..=255 (exit handlers run)
  --exec-after PROG [ARGS...]    instead of returning from main, exec PROG with ARGS (the rest
                                 of the command line), keeping the environment
  --runtime SPEC                 accepted for the harness's sake, not used
  -h, --help                     print this text
";

/// What to do with Vulkan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VulkanPlan {
    /// No instance at all: `--no-vulkan`.
    Skip,
    /// Create instance and device; `keep` leaves them alive at exit; `live_buffers` buffers are
    /// still alive when the device is destroyed (one VUID each); `silent_messenger` installs an
    /// application debug messenger that swallows every message; `disable_validation` turns every
    /// check of the validation layer off from the application's side.
    Create {
        /// Leave instance and device alive at exit (`--keep-vulkan`).
        keep: bool,
        /// Buffers still alive when the device is destroyed (`--vuid`, `--vuids N`).
        live_buffers: u32,
        /// Install a messenger that swallows every message (`--silent-messenger`).
        silent_messenger: bool,
        /// Turn validation off from the application (`--disable-validation`).
        disable_validation: bool,
    },
}

/// Most live buffers `--vuids` accepts: enough to flood any duplicate-message limit, few enough
/// to stay a fast run.
pub const MAX_LIVE_BUFFERS: u32 = 100_000;

/// What one mock run does, as its command line asked.
#[derive(Debug, Clone, PartialEq)]
pub struct MockOptions {
    /// What Vulkan objects it makes and leaves.
    pub vulkan: VulkanPlan,
    /// The physical device to use (`--device`).
    pub device: u32,
    /// A runtime spec, accepted so the harness can pass one; the mock loads none.
    pub runtime: Option<String>,
    /// Raise this signal (`--signal NAME`).
    pub signal: Option<Signal>,
    /// Exit with this code (`--exit-code N`).
    pub exit_code: Option<u8>,
    /// Never exit (`--hang`).
    pub hang: bool,
    /// Hang in an exit handler (`--hang-at-exit`).
    pub hang_at_exit: bool,
    /// Write this many bytes of output (`--flood BYTES`).
    pub flood: Option<u64>,
    /// Leave a grandchild holding stdout/stderr for this many seconds (`--grandchild-holds-pipes`).
    pub grandchild_holds_pipes: Option<u64>,
    /// Crash in an exit handler (`--crash-at-exit`).
    pub crash_at_exit: bool,
    /// Crash at exit with this probability (`--crash-probability P`).
    pub crash_probability: Option<f64>,
    /// Call the loader with a VkDevice that is none at exit (`--invalid-device-at-exit`).
    pub invalid_device_at_exit: bool,
    /// Write nothing to stdout or stderr (`--quiet`).
    pub quiet: bool,
    /// A crashing copy of mock to start (and ignore) after the Vulkan teardown.
    pub crashing_child: Option<CrashingChild>,
    /// Chain a VkLayerSettingsCreateInfoEXT into the instance's `pNext` (`--layer-settings`).
    pub layer_settings: bool,
    /// A second instance while the first is alive (`--overlapping-instance`).
    pub overlapping_instance: bool,
    /// A copy of mock that leaks a VkBuffer while this one's instance is alive (`--leaking-child`).
    pub leaking_child: bool,
    /// A second instance after the first one's teardown (`--second-instance`).
    pub second_instance: bool,
    /// The program and arguments to exec where main would return (`--exec-after`).
    pub exec_after: Option<Vec<String>>,
    /// Leave a detached helper sleeping this many seconds (`--detached-helper`).
    pub detached_helper: Option<u64>,
    /// A detached helper with no descriptors dies of SIGSEGV (`--daemon-crash`).
    pub daemon_crash: bool,
    /// Loop forever in an exit handler, ignoring SIGTERM (`--spin-at-exit-ignoring-term`).
    pub spin_at_exit_ignoring_term: bool,
}

/// Which process of mock's tree crashes, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashingChild {
    /// The child raises SIGSEGV in main.
    Child,
    /// A forked copy of this process, never exec'd, raises SIGSEGV.
    Forked,
    /// The child starts a grandchild that raises SIGSEGV.
    Grandchild,
    /// The child faults in its own atexit handler.
    ChildAtExit,
}

impl CrashingChild {
    /// The arguments of the copy of mock this starts (none for a forked child).
    pub fn child_args(self, device: u32) -> Vec<String> {
        let device = ["--device".to_string(), device.to_string()];
        let own: &[&str] = match self {
            CrashingChild::Child => &["--signal", "SIGSEGV"],
            CrashingChild::Forked => return Vec::new(),
            CrashingChild::Grandchild => &["--no-vulkan", "--child-crash"],
            CrashingChild::ChildAtExit => &["--crash-at-exit"],
        };
        own.iter().map(|a| a.to_string()).chain(device).collect()
    }

    fn option(self) -> &'static str {
        match self {
            CrashingChild::Child => "--child-crash",
            CrashingChild::Forked => "--forked-child-crash",
            CrashingChild::Grandchild => "--grandchild-crash",
            CrashingChild::ChildAtExit => "--child-crash-at-exit",
        }
    }
}

impl MockOptions {
    /// Parses the arguments after the program's name.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
    ) -> Result<Parsed<MockOptions>, UsageError> {
        let mut args: Vec<String> = args.into_iter().collect();
        // `--exec-after` takes the rest of the command line as the program to exec.
        let exec_after = match args.iter().position(|a| a == "--exec-after") {
            Some(at) => {
                let program: Vec<String> = args.split_off(at).into_iter().skip(1).collect();
                if program.is_empty() {
                    return Err(UsageError::MissingValue {
                        option: "--exec-after".into(),
                    });
                }
                Some(program)
            }
            None => None,
        };
        let mut cursor = ArgCursor::new(args);
        let mut options = MockOptions {
            vulkan: VulkanPlan::Create {
                keep: false,
                live_buffers: 0,
                silent_messenger: false,
                disable_validation: false,
            },
            device: 0,
            runtime: None,
            signal: None,
            exit_code: None,
            hang: false,
            hang_at_exit: false,
            flood: None,
            grandchild_holds_pipes: None,
            crash_at_exit: false,
            crash_probability: None,
            invalid_device_at_exit: false,
            quiet: false,
            crashing_child: None,
            layer_settings: false,
            overlapping_instance: false,
            leaking_child: false,
            second_instance: false,
            exec_after,
            detached_helper: None,
            daemon_crash: false,
            spin_at_exit_ignoring_term: false,
        };
        let (mut no_vulkan, mut keep, mut vuid) = (false, false, false);
        let (mut vuids, mut silent_messenger, mut disable_validation) = (None, false, false);
        while let Some(option) = cursor.next_option() {
            match option?.as_str() {
                "--signal" => options.signal = Some(cursor.parsed_value()?),
                "--exit-code" => options.exit_code = Some(cursor.parsed_value()?),
                "--vuid" => vuid = true,
                "--vuids" => vuids = Some(live_buffers(&mut cursor)?),
                "--silent-messenger" => silent_messenger = true,
                "--disable-validation" => disable_validation = true,
                "--invalid-device-at-exit" => options.invalid_device_at_exit = true,
                "--quiet" => options.quiet = true,
                "--hang" => options.hang = true,
                "--hang-at-exit" => options.hang_at_exit = true,
                "--flood" => options.flood = Some(bytes(&mut cursor)?),
                "--grandchild-holds-pipes" => {
                    options.grandchild_holds_pipes = Some(cursor.parsed_value()?)
                }
                "--crash-at-exit" => options.crash_at_exit = true,
                "--detached-helper" => options.detached_helper = Some(cursor.parsed_value()?),
                "--daemon-crash" => options.daemon_crash = true,
                "--spin-at-exit-ignoring-term" => options.spin_at_exit_ignoring_term = true,
                "--child-crash" => set_child(&mut options, CrashingChild::Child)?,
                "--grandchild-crash" => set_child(&mut options, CrashingChild::Grandchild)?,
                "--forked-child-crash" => set_child(&mut options, CrashingChild::Forked)?,
                "--child-crash-at-exit" => set_child(&mut options, CrashingChild::ChildAtExit)?,
                "--crash-probability" => {
                    options.crash_probability = Some(probability(&mut cursor)?)
                }
                "--layer-settings" => options.layer_settings = true,
                "--overlapping-instance" => options.overlapping_instance = true,
                "--leaking-child" => options.leaking_child = true,
                "--second-instance" => options.second_instance = true,
                "--no-vulkan" => no_vulkan = true,
                "--keep-vulkan" => keep = true,
                "--device" => options.device = device_index(&mut cursor)?,
                "--runtime" => options.runtime = Some(cursor.value()?),
                "--help" | "-h" => return cursor.no_value().map(|()| Parsed::Help),
                other => {
                    return Err(UsageError::UnknownOption {
                        option: other.to_owned(),
                    })
                }
            }
        }
        let live_buffers = match (vuid, vuids) {
            (true, Some(_)) => return Err(conflict("--vuid", "--vuids")),
            (true, None) => 1,
            (false, n) => n.unwrap_or(0),
        };
        let vuid_option = if vuid { "--vuid" } else { "--vuids" };
        options.vulkan = match (no_vulkan, keep, live_buffers > 0) {
            (true, true, _) => return Err(conflict("--no-vulkan", "--keep-vulkan")),
            (true, _, true) => return Err(conflict("--no-vulkan", vuid_option)),
            // The VUID is raised by destroying the device; a kept device is never destroyed.
            (_, true, true) => return Err(conflict("--keep-vulkan", vuid_option)),
            (true, false, false) if silent_messenger => {
                return Err(conflict("--no-vulkan", "--silent-messenger"))
            }
            (true, false, false) if disable_validation => {
                return Err(conflict("--no-vulkan", "--disable-validation"))
            }
            (true, false, false) => VulkanPlan::Skip,
            (false, keep, _) => VulkanPlan::Create {
                keep,
                live_buffers,
                silent_messenger,
                disable_validation,
            },
        };
        if no_vulkan && options.layer_settings {
            return Err(conflict("--no-vulkan", "--layer-settings"));
        }
        if no_vulkan && options.overlapping_instance {
            return Err(conflict("--no-vulkan", "--overlapping-instance"));
        }
        if no_vulkan && options.leaking_child {
            return Err(conflict("--no-vulkan", "--leaking-child"));
        }
        if options.crash_at_exit && options.crash_probability.is_some() {
            return Err(conflict("--crash-at-exit", "--crash-probability"));
        }
        Ok(Parsed::Run(options))
    }
}

/// One crashing child at most: two would be two options fighting over one meaning.
fn set_child(options: &mut MockOptions, child: CrashingChild) -> Result<(), UsageError> {
    match options.crashing_child {
        Some(other) if other != child => Err(conflict(other.option(), child.option())),
        _ => {
            options.crashing_child = Some(child);
            Ok(())
        }
    }
}

fn conflict(first: &'static str, second: &'static str) -> UsageError {
    UsageError::Conflict { first, second }
}

fn invalid(option: &str, value: String, reason: &str) -> UsageError {
    UsageError::InvalidValue {
        option: option.to_owned(),
        value,
        reason: reason.to_owned(),
    }
}

/// A byte count with an optional binary suffix: `4096`, `64K`, `8M`, `1G`.
fn bytes<I: Iterator<Item = String>>(cursor: &mut ArgCursor<I>) -> Result<u64, UsageError> {
    let value = cursor.value()?;
    let (digits, unit) = match value.char_indices().last() {
        Some((at, 'k' | 'K')) => (&value[..at], 1 << 10),
        Some((at, 'm' | 'M')) => (&value[..at], 1 << 20),
        Some((at, 'g' | 'G')) => (&value[..at], 1 << 30),
        _ => (value.as_str(), 1),
    };
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)) {
        Some(bytes) => Ok(bytes),
        None => Err(invalid(
            "--flood",
            value,
            "not a byte count like 4096, 64K, 8M or 1G",
        )),
    }
}

fn live_buffers<I: Iterator<Item = String>>(cursor: &mut ArgCursor<I>) -> Result<u32, UsageError> {
    let value = cursor.value()?;
    match value.parse::<u32>() {
        Ok(n) if (1..=MAX_LIVE_BUFFERS).contains(&n) => Ok(n),
        _ => Err(invalid(
            "--vuids",
            value,
            &format!("not a count in 1..={MAX_LIVE_BUFFERS}"),
        )),
    }
}

fn probability<I: Iterator<Item = String>>(cursor: &mut ArgCursor<I>) -> Result<f64, UsageError> {
    let value = cursor.value()?;
    match value.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(invalid(
            "--crash-probability",
            value,
            "not a probability in [0, 1]",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<MockOptions, UsageError> {
        match MockOptions::parse(args.iter().map(|a| a.to_string()))? {
            Parsed::Run(options) => Ok(options),
            Parsed::Help => panic!("unexpected help"),
        }
    }

    #[test]
    fn default_is_a_clean_vulkan_run() {
        let options = parse(&[]).unwrap();
        assert_eq!(
            options.vulkan,
            VulkanPlan::Create {
                keep: false,
                live_buffers: 0,
                silent_messenger: false,
                disable_validation: false
            }
        );
        assert_eq!(
            (options.signal, options.exit_code, options.hang),
            (None, None, false)
        );
        assert!(!options.quiet && !options.invalid_device_at_exit);
        assert_eq!(options.device, 0);
    }

    #[test]
    fn options_combine() {
        let options = parse(&[
            "--signal",
            "SIGBUS",
            "--flood=2M",
            "--exit-code",
            "7",
            "--hang-at-exit",
            "--grandchild-holds-pipes",
            "30",
            "--runtime",
            "refrt:guarded",
            "--device",
            "1",
            "--quiet",
            "--invalid-device-at-exit",
        ])
        .unwrap();
        assert!(options.quiet && options.invalid_device_at_exit);
        assert_eq!(options.signal.map(|s| s.number), Some(libc::SIGBUS));
        assert_eq!(options.flood, Some(2 << 20));
        assert_eq!(options.exit_code, Some(7));
        assert!(options.hang_at_exit);
        assert_eq!(options.grandchild_holds_pipes, Some(30));
        assert_eq!(options.runtime.as_deref(), Some("refrt:guarded"));
        assert_eq!(options.device, 1);
    }

    #[test]
    fn vulkan_plans() {
        assert_eq!(parse(&["--no-vulkan"]).unwrap().vulkan, VulkanPlan::Skip);
        let create = |keep, live_buffers, silent_messenger| VulkanPlan::Create {
            keep,
            live_buffers,
            silent_messenger,
            disable_validation: false,
        };
        assert_eq!(parse(&["--vuid"]).unwrap().vulkan, create(false, 1, false));
        assert_eq!(
            parse(&["--vuids", "150"]).unwrap().vulkan,
            create(false, 150, false)
        );
        assert_eq!(
            parse(&["--keep-vulkan"]).unwrap().vulkan,
            create(true, 0, false)
        );
        assert_eq!(
            parse(&["--silent-messenger", "--vuid"]).unwrap().vulkan,
            create(false, 1, true)
        );
        assert_eq!(
            parse(&["--silent-messenger", "--keep-vulkan"])
                .unwrap()
                .vulkan,
            create(true, 0, true)
        );
        assert_eq!(
            parse(&["--disable-validation", "--vuid"]).unwrap().vulkan,
            VulkanPlan::Create {
                keep: false,
                live_buffers: 1,
                silent_messenger: false,
                disable_validation: true
            }
        );
        for pair in [
            ["--no-vulkan", "--disable-validation"],
            ["--no-vulkan", "--vuid"],
            ["--no-vulkan", "--vuids=2"],
            ["--no-vulkan", "--keep-vulkan"],
            ["--no-vulkan", "--silent-messenger"],
            ["--no-vulkan", "--layer-settings"],
            ["--vuid", "--keep-vulkan"],
            ["--vuids=2", "--keep-vulkan"],
            ["--vuid", "--vuids=2"],
        ] {
            assert!(
                matches!(parse(&pair), Err(UsageError::Conflict { .. })),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn values_are_checked() {
        assert_eq!(parse(&["--flood", "4096"]).unwrap().flood, Some(4096));
        assert_eq!(parse(&["--flood", "1g"]).unwrap().flood, Some(1 << 30));
        for bad in ["", "K", "1.5M", "-1", "99999999999G"] {
            assert!(parse(&["--flood", bad]).is_err(), "{bad}");
        }
        assert_eq!(
            parse(&["--crash-probability", "0.25"])
                .unwrap()
                .crash_probability,
            Some(0.25)
        );
        for bad in ["1.5", "-0.1", "NaN", "half"] {
            assert!(parse(&["--crash-probability", bad]).is_err(), "{bad}");
        }
        for bad in ["0", "-1", "100001", "many"] {
            assert!(parse(&["--vuids", bad]).is_err(), "{bad}");
        }
        assert!(parse(&["--exit-code", "256"]).is_err());
        assert!(parse(&["--signal", "SIGFOO"]).is_err());
        assert!(parse(&["--crash-at-exit", "--crash-probability", "1"]).is_err());
    }

    #[test]
    fn crashing_children() {
        assert_eq!(parse(&[]).unwrap().crashing_child, None);
        let child = parse(&["--child-crash", "--device", "1"]).unwrap();
        assert_eq!(child.crashing_child, Some(CrashingChild::Child));
        assert_eq!(
            CrashingChild::Child.child_args(1),
            ["--signal", "SIGSEGV", "--device", "1"]
        );
        assert_eq!(
            parse(&["--grandchild-crash"]).unwrap().crashing_child,
            Some(CrashingChild::Grandchild)
        );
        assert_eq!(
            parse(&["--child-crash-at-exit"]).unwrap().crashing_child,
            Some(CrashingChild::ChildAtExit)
        );
        assert!(matches!(
            parse(&["--child-crash", "--grandchild-crash"]),
            Err(UsageError::Conflict { .. })
        ));
    }

    #[test]
    fn more_instances_and_processes_of_one_run() {
        let options = parse(&["--vuid", "--second-instance", "--overlapping-instance"]).unwrap();
        assert!(options.second_instance && options.overlapping_instance);
        assert!(!options.leaking_child && options.exec_after.is_none());
        assert!(parse(&["--leaking-child"]).unwrap().leaking_child);
        let exec = parse(&["--vuid", "--exec-after", "/bin/mock", "--vuid", "--quiet"]).unwrap();
        assert_eq!(exec.vulkan, parse(&["--vuid"]).unwrap().vulkan);
        assert_eq!(exec.exec_after.unwrap(), ["/bin/mock", "--vuid", "--quiet"]);
        assert_eq!(
            parse(&["--exec-after"]),
            Err(UsageError::MissingValue {
                option: "--exec-after".into()
            })
        );
        for pair in [
            ["--no-vulkan", "--overlapping-instance"],
            ["--no-vulkan", "--leaking-child"],
        ] {
            assert!(
                matches!(parse(&pair), Err(UsageError::Conflict { .. })),
                "{pair:?}"
            );
        }
    }

    #[test]
    fn detached_helpers() {
        let options = parse(&[
            "--detached-helper",
            "2",
            "--daemon-crash",
            "--spin-at-exit-ignoring-term",
        ])
        .unwrap();
        assert_eq!(options.detached_helper, Some(2));
        assert!(options.daemon_crash && options.spin_at_exit_ignoring_term);
        assert!(parse(&["--detached-helper", "soon"]).is_err());
        let plain = parse(&[]).unwrap();
        assert!(plain.detached_helper.is_none() && !plain.daemon_crash);
    }

    #[test]
    fn bad_command_lines() {
        assert_eq!(
            parse(&["--segfault"]),
            Err(UsageError::UnknownOption {
                option: "--segfault".into()
            })
        );
        assert_eq!(
            parse(&["--hang=1"]),
            Err(UsageError::UnexpectedValue {
                option: "--hang".into()
            })
        );
        assert_eq!(
            parse(&["--signal"]),
            Err(UsageError::MissingValue {
                option: "--signal".into()
            })
        );
        assert_eq!(
            parse(&["SIGSEGV"]),
            Err(UsageError::UnexpectedArgument {
                argument: "SIGSEGV".into()
            })
        );
    }
}
