//! A run's verdict. First its classification, a pure function from what the run left
//! behind ([`RunEvidence`]) and the rules it is judged by ([`Rules`]); then the overrules
//! that make a run an `error` whatever it seemed to do: a fault around it, its driver not
//! chosen, the loader bypassed or another validation build loaded, evidence that could not
//! be kept. The run stage hands each finished run here ([`judge`]) and keeps or removes its
//! directory as the verdict says.

pub use crate::run::observed::{ProcessTree, RunEvidence, Termination, Validation};

use crate::host::layers::{self, layer_of, layer_phrase, Chain};
use crate::host::loader::VulkanUse;
use crate::host::validation::ValidationLogs;
use crate::host::vuid::VuidReport;
use crate::plan::{CaseCommand, Cell};
use crate::run::summaries::ProcessCrash;
use crate::run::Finished;
use crate::support::util::signal_name;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use vkexit_evidence::files;
use vkexit_evidence::verdict::RunVerdict;

/// The id under which a call on an already destroyed handle, seen by the
/// trace layer, is reported among the VUIDs: it is API misuse the
/// validation layer cannot report once the parent is gone.
pub(crate) const DEAD_HANDLE_ID: &str = "VKEXIT-trace-dead-handle";

/// The id under which a sanitizer's report in a run that exited 0 (UBSan reports and goes on,
/// by default) is counted among the VUIDs: it fails the run as a validation message does, and
/// an allow-list may allow it.
pub(crate) const SANITIZER_ID: &str = "VKEXIT-sanitizer-report";

/// What one run came to, kept with its evidence and counted into its cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    /// Pass, or how the run failed; what the program itself showed (crash, exit, timeout)
    /// comes before what the layers found.
    pub verdict: RunVerdict,
    /// One line a person can read: why this verdict.
    pub(crate) reason: String,
    /// The name of the signal that ended the program (`SIGSEGV`); `None` when none did.
    pub(crate) signal: Option<String>,
    /// The message ids the run's validation log holds, and `VKEXIT-trace-dead-handle` for
    /// calls on destroyed handles, as the layer named them; an allow-list may remove some.
    pub vuids: Vec<String>,
    /// What the vkexit layers saw, as sentences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) findings: Vec<String>,
    /// The layer whose library held the pc of the crash that failed the run
    /// (`validation`, `trace`, or another layer's file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) crash_layer: Option<String>,
}

/// What a run is judged by besides what it left: the settings that change a verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Objects alive at exit (seen by the trace layer) fail a run.
    pub fail_on_leak: bool,
    /// Crashes of processes other than the one started are recorded, not judged (programs
    /// that crash children on purpose: death tests).
    pub children_may_crash: bool,
    /// A run that never used Vulkan is an `error`, not `no-vulkan` (`--require-vulkan`; every
    /// built-in scenario requires it whatever this says).
    pub require_vulkan: bool,
}

/// What one run came to, and where its evidence is.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRecord {
    pub(crate) cell: usize,
    pub(crate) index: u32,
    #[serde(flatten)]
    pub(crate) classification: Classification,
    pub(crate) termination: Termination,
    pub(crate) vuid_counts: VuidReport,
    pub(crate) duration_ms: u64,
    pub(crate) stdout_bytes: u64,
    pub(crate) stderr_bytes: u64,
    /// The run directory, when it was kept.
    pub(crate) kept: Option<PathBuf>,
    /// The Vulkan loader and drivers the program loaded; absent without the preload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vulkan: Option<VulkanUse>,
}

/// A finished run of `cell`, made with `chain`, judged: its classification, then every
/// overrule, then the story of its crash and its hang, for a failing run's reason. It reads
/// nothing: the run stage handed over all it read.
pub(crate) fn judge(finished: &Finished, cell: &Cell, chain: &Chain, rules: &Rules) -> RunRecord {
    let evidence = &finished.evidence;
    let mut c = classify(evidence, rules);
    sanitizer_report(&mut c, evidence, finished.sanitizer_report.as_deref());
    let required = rules.require_vulkan || matches!(cell.command, CaseCommand::Scenario(_));
    never_used_vulkan(&mut c, evidence, finished.vulkan.as_ref(), required);
    skipped_by_runner(&mut c, finished.skipped_by_runner.as_deref());
    for fault in &finished.faults {
        distrust(&mut c, fault);
    }
    for problem in loader_use(finished, cell, chain) {
        overrule(&mut c, problem);
    }
    if !c.verdict.is_success() {
        if let Some(summary) = &finished.crash_story {
            c.reason.push_str(&format!("; {summary}"));
            c.findings.insert(0, summary.clone());
        }
    }
    if let Some(report) = &finished.hang {
        c.reason.push_str(&format!("; {}", report.summary()));
        c.findings.push(report.summary());
    }
    RunRecord {
        cell: finished.cell,
        index: finished.index,
        classification: c,
        termination: evidence.termination.clone(),
        vuid_counts: match &evidence.validation {
            Validation::Active(logs) => logs.merged.clone(),
            _ => VuidReport::default(),
        },
        duration_ms: finished.duration.as_millis() as u64,
        stdout_bytes: finished.stdout_bytes,
        stderr_bytes: finished.stderr_bytes,
        kept: None,
        vulkan: finished.vulkan.clone(),
    }
}

/// A run that exited 0 with nothing for the layers to check because no process of it ever
/// asked the Vulkan loader for a driver: `no-vulkan` (green), or an `error` where the case
/// must use Vulkan. What shows the use is the preload's (`VulkanUse::witness`): without the
/// preload nothing is known, and the verdict stays what it was. A run that used Vulkan keeps
/// its verdict: a pass, or an error when a layer it asked for was not active.
fn never_used_vulkan(
    c: &mut Classification,
    evidence: &RunEvidence,
    vulkan: Option<&VulkanUse>,
    required: bool,
) {
    let clean_exit = matches!(evidence.termination, Termination::Exited { code: 0 })
        && evidence.setup_failure.is_none()
        && c.vuids.is_empty();
    // Every layer asked for is absent: an active one means an instance was made.
    let layers_absent = matches!(
        evidence.validation,
        Validation::NotRequested | Validation::NotActive
    ) && evidence.trace.as_ref().is_none_or(|t| !t.loaded)
        && evidence.tegra.as_ref().is_none_or(|t| !t.loaded);
    if !clean_exit || !layers_absent || !matches!(c.verdict, RunVerdict::Pass | RunVerdict::Error) {
        return;
    }
    let Some(used) = vulkan else { return };
    if let Some(witness) = used.witness() {
        if c.verdict == RunVerdict::Error {
            c.reason.push_str(&format!(" ({witness}: it used Vulkan)"));
        }
        return;
    }
    (c.verdict, c.reason) = match required {
        false => (
            RunVerdict::NoVulkan,
            "exited 0 without using Vulkan: no process asked the loader for a driver".into(),
        ),
        true => (
            RunVerdict::Error,
            "exited 0 without using Vulkan (no process asked the loader for a driver), but this \
             case must use it (--require-vulkan, or a built-in scenario)"
                .into(),
        ),
    };
}

/// A run its test's own runner reported skipped is `skipped`, with the runner's reason, when
/// it showed nothing else: it passed or used no Vulkan, or (CTest's `SKIP_RETURN_CODE`, its
/// `SKIP_REGULAR_EXPRESSION`) exited nonzero with nothing found. A crash, a validation
/// message, a hang or a run that could not be judged stays what it is.
fn skipped_by_runner(c: &mut Classification, said: Option<&str>) {
    let Some(said) = said else { return };
    let nothing_else = match c.verdict {
        RunVerdict::Pass | RunVerdict::NoVulkan => true,
        RunVerdict::Exit => c.vuids.is_empty(),
        _ => false,
    };
    if nothing_else {
        c.verdict = RunVerdict::Skipped;
        c.reason = said.to_string();
    }
}

/// A sanitizer's report on the run's stderr comes first in its reason. A run whose processes
/// all exited 0 is a `vuid` for it, as certain a failure as a crash whatever validation did:
/// vkexit gates CI, and UBSan, unless the program sets `halt_on_error`, reports undefined
/// behaviour and exits 0.
fn sanitizer_report(c: &mut Classification, evidence: &RunEvidence, report: Option<&str>) {
    let Some(report) = report else { return };
    let exited_0 = matches!(evidence.termination, Termination::Exited { code: 0 })
        && evidence.setup_failure.is_none()
        && !matches!(c.verdict, RunVerdict::Crash | RunVerdict::Timeout);
    c.reason = match c.verdict {
        RunVerdict::Pass => format!("{report}; the program exited 0"),
        _ => format!("{report}; {}", c.reason),
    };
    if exited_0 {
        c.verdict = RunVerdict::Vuid;
        c.vuids.push(SANITIZER_ID.to_string());
    }
}

/// Whether objects the trace layer saw alive at exit fail this run, for an allow-list that
/// leaves it without a VUID ([`super::allow::apply`]).
pub(crate) fn leak_fails(finished: &Finished, rules: &Rules) -> bool {
    rules.fail_on_leak && finished.evidence.trace.as_ref().is_some_and(|t| t.leaked())
}

/// Whether a run's directory is kept: a failing run's always, a passing one's when asked.
pub(crate) fn keeps_evidence(record: &RunRecord, keep_passing: bool) -> bool {
    keep_passing || record.classification.verdict.is_failure()
}

/// A kept run whose output and record could not be written beside its evidence: a verdict
/// without its evidence is not trusted.
pub(crate) fn evidence_not_written(record: &mut RunRecord, dir: &std::path::Path, why: &str) {
    record.classification.verdict = RunVerdict::Error;
    record.classification.reason = format!(
        "{}; and its evidence could not be written to {}: {why}",
        record.classification.reason,
        dir.display()
    );
}

/// What makes a run's verdict unknowable from its use of Vulkan: the driver's selection not in
/// place, the program going around the loader while layers were asked for (no layer saw its
/// calls), its loader ignoring the variables that chose the driver, another build of the
/// validation layer than the one asked for.
fn loader_use(finished: &Finished, cell: &Cell, chain: &Chain) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(copy) = &finished.unchosen_driver {
        problems.push(format!(
            "the manifest copy that chooses driver {}, {}, could not be written: the driver was not chosen",
            cell.driver.name,
            copy.display()
        ));
    }
    let Some(used) = &finished.vulkan else {
        return problems;
    };
    let layers =
        chain.validation.is_some() || chain.trace || chain.emulation != layers::Emulation::None;
    problems.extend(
        [
            used.bypass(crate::run::selection(cell)).filter(|_| layers),
            used.selection_ignored(crate::run::selection(cell)),
            chain
                .validation
                .as_ref()
                .and_then(|v| used.other_validation_layer(&v.library)),
        ]
        .into_iter()
        .flatten(),
    );
    problems
}

/// Evidence that the run could not be judged: `error`, whatever the verdict was, which the
/// reason keeps.
fn overrule(c: &mut Classification, why: String) {
    c.reason = match c.verdict {
        RunVerdict::Error => format!("{why}; {}", c.reason),
        seen => format!("{why}; the run itself: {seen}: {}", c.reason),
    };
    c.verdict = RunVerdict::Error;
    c.findings.insert(0, why);
}

/// A fault around the run: a would-be pass becomes an `error`, any other
/// verdict keeps its class and says it too.
fn distrust(c: &mut Classification, fault: &str) {
    if c.verdict.is_success() {
        c.verdict = RunVerdict::Error;
        c.reason = fault.to_string();
    } else {
        c.reason.push_str(&format!("; {fault}"));
    }
    c.findings.push(fault.to_string());
}

/// Decides the verdict. Failures the program itself showed (hang, signal,
/// exit code) come first, since they are certain whatever validation did;
/// then a run that asked for validation and cannot prove it had it is an
/// `error`, never a pass; then any message id in the log; then `pass`.
pub fn classify(evidence: &RunEvidence, rules: &Rules) -> Classification {
    let mut vuids: Vec<String> = match &evidence.validation {
        Validation::Active(logs) => logs.merged.names().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let trace = evidence.trace.as_ref();
    if trace.is_some_and(|t| t.dead_handle_calls > 0) {
        vuids.push(DEAD_HANDLE_ID.to_string());
    }
    let mut findings: Vec<String> = Vec::new();
    findings.extend(
        evidence
            .tegra
            .iter()
            .flat_map(|t| t.findings.iter().cloned()),
    );
    findings.extend(trace.iter().flat_map(|t| t.findings.iter().cloned()));
    let mut signal = None;
    let (verdict, reason) = match &evidence.termination {
        Termination::NotStarted { reason } => {
            (RunVerdict::Error, format!("could not start: {reason}"))
        }
        Termination::Interrupted => (
            RunVerdict::Error,
            "interrupted: vkexit was stopped before the program finished".into(),
        ),
        Termination::TimedOut { after_ms } => (
            RunVerdict::Timeout,
            format!(
                "still running after {:.1} s; process group killed",
                *after_ms as f64 / 1000.0
            ),
        ),
        Termination::Signaled {
            signal: sig,
            core_dumped,
        } => {
            let name = signal_name(*sig);
            let core = if *core_dumped { " (core dumped)" } else { "" };
            signal = Some(name.clone());
            (RunVerdict::Crash, format!("killed by {name}{core}"))
        }
        Termination::Exited { .. } if evidence.setup_failure.is_some() => (
            RunVerdict::Error,
            format!(
                "the scenario could not set up, so nothing was checked: {}",
                evidence.setup_failure.as_deref().unwrap_or_default()
            ),
        ),
        Termination::Exited { code } if *code != 0 => {
            (RunVerdict::Exit, format!("exited with code {code}"))
        }
        Termination::Exited { .. } => classify_clean_exit(evidence, rules, &vuids),
    };
    let mut c = Classification {
        verdict,
        reason,
        signal,
        vuids,
        findings,
        crash_layer: None,
    };
    judge_the_tree(&mut c, evidence, rules);
    c
}

/// A fatal signal anywhere in the run's process tree fails the run, not only
/// the main process's: a child that crashes while its parent exits 0 is the
/// exit crash nobody notices. A hang or a run that never started keeps its
/// verdict; the crashes are said in its findings.
fn judge_the_tree(c: &mut Classification, evidence: &RunEvidence, rules: &Rules) {
    let tree = &evidence.tree;
    let main = match &evidence.termination {
        Termination::Signaled { .. } => tree.crashes.of(tree.main_pid),
        _ => None,
    };
    if let Some(layer) = main.and_then(|p| layer_of(&p.culprit)) {
        c.reason.push_str(&format!(", in {}", layer_phrase(&layer)));
        c.crash_layer = Some(layer);
    }
    let others: Vec<&ProcessCrash> = tree.crashes.fatal_besides(tree.main_pid).collect();
    for p in &others {
        let mut line = format!("{} killed by {}", p.describe(), p.signal);
        if let Some(layer) = layer_of(&p.culprit) {
            line.push_str(&format!(", in {}", layer_phrase(&layer)));
        }
        if rules.children_may_crash {
            line.push_str(" (children may crash: recorded, not judged)");
        }
        c.findings.push(line);
    }
    if tree.crashes.more > 0 {
        c.findings
            .push(format!("{} more process(es) crashed", tree.crashes.more));
    }
    // Detached processes vkexit reaped dead of a signal, whose crash record is
    // missing (closed descriptors, no preload, a static binary): the wait
    // status is the evidence.
    let unrecorded = orphan_crashes(tree);
    for o in &unrecorded {
        let mut line = format!(
            "{} killed by {}, seen where vkexit reaped it (no crash record)",
            o.describe(),
            o.signal
        );
        if rules.children_may_crash {
            line.push_str(" (children may crash: recorded, not judged)");
        }
        c.findings.push(line);
    }
    for o in tree
        .orphans
        .iter()
        .filter(|o| !CRASH_SIGNALS.contains(&o.signal.as_str()))
    {
        c.findings.push(format!(
            "{} ended by {} (not a crash signal: not judged)",
            o.describe(),
            o.signal
        ));
    }
    let judged = matches!(
        evidence.termination,
        Termination::Exited { .. } | Termination::Signaled { .. }
    );
    let crashed = others.len() + unrecorded.len();
    if crashed == 0 || !judged || rules.children_may_crash {
        return;
    }
    if c.verdict == RunVerdict::Crash {
        // The main process's own crash is the headline.
        c.reason
            .push_str(&format!("; {crashed} other process(es) crashed too"));
        return;
    }
    let (who, signal, layer) = match (others.first(), unrecorded.first()) {
        (Some(first), _) => (
            first.describe(),
            first.signal.clone(),
            layer_of(&first.culprit),
        ),
        (None, Some(o)) => (o.describe(), o.signal.clone(), None),
        (None, None) => return,
    };
    let place = layer
        .as_deref()
        .map_or(String::new(), |l| format!(", in {}", layer_phrase(l)));
    c.reason = format!(
        "{who} killed by {signal}{place}; the main process {}",
        c.reason
    );
    if crashed > 1 {
        c.reason
            .push_str(&format!("; {} more process(es) crashed", crashed - 1));
    }
    c.verdict = RunVerdict::Crash;
    c.signal = Some(signal);
    c.crash_layer = layer;
}

/// The signals that are a crash when they end a process other than the one
/// started: the ones whose default action dumps core. A detached process
/// ended by SIGTERM, SIGKILL, SIGHUP or SIGPIPE was most likely stopped by
/// its own program, and is said in the findings only.
const CRASH_SIGNALS: [&str; 10] = [
    "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGXCPU", "SIGXFSZ",
    "SIGSYS",
];

/// The orphans that died of a crash signal without a crash record of their
/// own.
fn orphan_crashes(tree: &ProcessTree) -> Vec<&crate::run::observed::OrphanDeath> {
    let recorded = |pid: i64| tree.crashes.processes.iter().any(|p| p.pid == pid);
    tree.orphans
        .iter()
        .filter(|o| !recorded(o.pid) && Some(o.pid) != tree.main_pid)
        .filter(|o| CRASH_SIGNALS.contains(&o.signal.as_str()))
        .collect()
}

/// A run that exited 0: first every layer asked for must prove it was
/// active, then any finding fails it.
fn classify_clean_exit(
    evidence: &RunEvidence,
    rules: &Rules,
    vuids: &[String],
) -> (RunVerdict, String) {
    let missing = |layer: &str| {
        (
            RunVerdict::Error,
            format!("exited 0 but the {layer} layer was not active: it wrote no `loaded` record"),
        )
    };
    if evidence.trace.as_ref().is_some_and(|t| !t.loaded) {
        return missing("trace");
    }
    if evidence.tegra.as_ref().is_some_and(|t| !t.loaded) {
        return missing("tegra-exit");
    }
    let (verdict, reason) = classify_validation(&evidence.validation);
    if verdict != RunVerdict::Pass {
        return (verdict, reason);
    }
    if vuids.iter().any(|v| v == DEAD_HANDLE_ID) {
        let calls = evidence.trace.as_ref().map_or(0, |t| t.dead_handle_calls);
        return (
            RunVerdict::Vuid,
            format!("trace: {calls} call(s) on destroyed handles"),
        );
    }
    match &evidence.trace {
        Some(t) if rules.fail_on_leak && t.leaked() => {
            let alive: Vec<String> = t
                .alive_at_exit
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect();
            (
                RunVerdict::Leak,
                format!("alive at exit: {}", alive.join(", ")),
            )
        }
        _ => (verdict, reason),
    }
}

fn classify_validation(validation: &Validation) -> (RunVerdict, String) {
    match validation {
        Validation::NotRequested => (RunVerdict::Pass, "exited 0 (no validation)".into()),
        Validation::NotActive => (
            RunVerdict::Error,
            "exited 0 but the validation layer was not active: it never created its log".into(),
        ),
        Validation::Unreadable(why) => (
            RunVerdict::Error,
            format!("exited 0 but the validation log could not be read: {why}"),
        ),
        Validation::Active(logs) if logs.merged.is_empty() => classify_clean_logs(logs),
        Validation::Active(logs) => {
            let list: Vec<String> = logs
                .merged
                .ids
                .iter()
                .map(|(id, s)| format!("{id} ×{}", s.count))
                .collect();
            let reporting = logs
                .instances
                .iter()
                .filter(|l| !l.report.is_empty())
                .count();
            let from = match reporting {
                0 | 1 => String::new(),
                n => format!(", from the logs of {n} instances"),
            };
            let app_only: u64 = logs.app_only.ids.values().map(|s| s.count).sum();
            let from = match app_only {
                0 => from,
                n => format!(
                    "{from}; {n} of them reached only the application's own debug messenger, \
                     which this layer gives them instead of its log"
                ),
            };
            (
                RunVerdict::Vuid,
                format!("validation: {}{from}", list.join(", ")),
            )
        }
    }
}

/// A run whose logs hold no finding passes only when each instance's log proves it was
/// validated: the log was watched (no later open could have truncated it), it holds the
/// layer's status message, and that message names no check the application turned off.
fn classify_clean_logs(logs: &ValidationLogs) -> (RunVerdict, String) {
    let error = |why: String| {
        (
            RunVerdict::Error,
            format!("exited 0 with a clean validation log, but {why}"),
        )
    };
    if let Some(log) = logs.instances.iter().find(|l| l.unwatched) {
        return error(format!(
            "the validation layer wrote {} itself in a process without vkexit's diagnostics \
             preload (--no-diagnostics, a static program, or one that clears LD_PRELOAD; kept as \
             {}): each instance there truncates the report of the one before, so that log \
             proves nothing",
            files::VALIDATION_LOG,
            log.file
        ));
    }
    if let Some(what) = logs.unwitnessed.first() {
        return error(format!(
            "the application has a debug messenger of its own, which this validation layer \
             gives its findings instead of its log, and vkexit could not watch {what}"
        ));
    }
    if let Some(log) = logs
        .instances
        .iter()
        .find(|l| l.report.disabled_checks.is_none())
    {
        return error(format!(
            "the log of {} holds no status message of the layer: its instance is not proven \
             to be validated",
            log.who()
        ));
    }
    let several = logs.instances.len() > 1;
    if let Some(log) = logs
        .instances
        .iter()
        .find(|l| !l.report.disabled().is_empty())
    {
        let whose = match several {
            true => format!(" in {}", log.who()),
            false => String::new(),
        };
        return error(format!(
            "the application turned checks off (VkValidationFeaturesEXT or VkValidationFlagsEXT){whose}: {}",
            log.report.disabled().join(", ")
        ));
    }
    match several {
        true => (
            RunVerdict::Pass,
            format!(
                "exited 0, validation clean in each of {} instances",
                logs.instances.len()
            ),
        ),
        false => (RunVerdict::Pass, "exited 0, validation clean".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::validation::InstanceLog;
    use crate::host::vuid::scan_str;

    fn run(termination: Termination, validation: Validation) -> Classification {
        classify(
            &RunEvidence {
                termination,
                validation,
                trace: None,
                tegra: None,
                tree: ProcessTree::default(),
                setup_failure: None,
            },
            &Rules::default(),
        )
    }

    fn traced(trace: &str, fail_on_leak: bool) -> Classification {
        classify(
            &RunEvidence {
                termination: Termination::Exited { code: 0 },
                validation: clean_log(),
                trace: Some(crate::run::summaries::read_trace(trace.as_bytes()).unwrap()),
                tegra: None,
                tree: ProcessTree::default(),
                setup_failure: None,
            },
            &Rules {
                fail_on_leak,
                ..Rules::default()
            },
        )
    }

    /// A run that exited 0 with validation asked for and no log, judged with what the preload
    /// saw (`vulkan`) and whether its case must use Vulkan.
    fn without_log(vulkan: Option<&VulkanUse>, required: bool) -> Classification {
        let evidence = RunEvidence {
            termination: Termination::Exited { code: 0 },
            validation: Validation::NotActive,
            trace: None,
            tegra: None,
            tree: ProcessTree::default(),
            setup_failure: None,
        };
        let mut c = classify(&evidence, &Rules::default());
        never_used_vulkan(&mut c, &evidence, vulkan, required);
        c
    }

    #[test]
    fn no_vulkan_only_where_the_preload_saw_no_use_and_the_case_allows_it() {
        let nothing = VulkanUse::default();
        assert_eq!(
            without_log(Some(&nothing), false).verdict,
            RunVerdict::NoVulkan
        );
        let c = without_log(Some(&nothing), true);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("must use it"), "{}", c.reason);
        // Without the preload nothing is known: the missing log stays an error.
        let c = without_log(None, false);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("never created its log"), "{}", c.reason);
        // A manifest read is use, even where no driver loaded.
        let read = VulkanUse {
            driver_manifests: vec!["/x/icd.d/a.json".into()],
            ..VulkanUse::default()
        };
        let c = without_log(Some(&read), false);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(
            c.reason.contains("driver manifest /x/icd.d/a.json"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn a_failing_run_is_never_no_vulkan() {
        let evidence = RunEvidence {
            termination: Termination::Exited { code: 3 },
            validation: Validation::NotActive,
            trace: None,
            tegra: None,
            tree: ProcessTree::default(),
            setup_failure: None,
        };
        let mut c = classify(&evidence, &Rules::default());
        never_used_vulkan(&mut c, &evidence, Some(&VulkanUse::default()), false);
        assert_eq!(c.verdict, RunVerdict::Exit);
    }

    const LOADED: &str = "{\"ev\":\"loaded\"}\n";
    const DEVICE_ALIVE: &str = "{\"ev\":\"alive\",\"when\":\"exit\",\"type\":\"VkDevice\",\"handle\":\"0x5\",\"created_thread\":\"main\"}\n";

    #[test]
    fn a_trace_that_never_loaded_is_an_error() {
        let c = traced("", false);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("trace layer was not active"));
    }

    #[test]
    fn objects_alive_at_exit_fail_only_when_asked() {
        let text = format!("{LOADED}{DEVICE_ALIVE}");
        let c = traced(&text, false);
        assert_eq!(c.verdict, RunVerdict::Pass);
        assert_eq!(
            c.findings,
            ["VkDevice 0x5 alive at exit (created on thread main)"]
        );
        let c = traced(&text, true);
        assert_eq!(c.verdict, RunVerdict::Leak);
        assert_eq!(c.reason, "alive at exit: VkDevice ×1");
    }

    #[test]
    fn a_call_on_a_destroyed_handle_is_misuse_even_without_a_crash() {
        let text = format!("{LOADED}{{\"ev\":\"dead-handle\",\"call\":\"vkDestroyEvent\",\"type\":\"VkDevice\",\"handle\":\"0x5\"}}\n");
        let c = traced(&text, false);
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert_eq!(c.vuids, [DEAD_HANDLE_ID]);
        assert_eq!(c.findings, ["vkDestroyEvent on a destroyed VkDevice 0x5"]);
    }

    /// The layer's status message at `vkCreateInstance`, nothing turned off (1.3.239, abridged).
    const STATUS: &str = "Validation Information: [ UNASSIGNED-khronos-validation-createinstance-status-message ] Khronos Validation Layer Active:\n    Current Enables: None.\n    Current Disables: None.\n\n";

    fn active(text: &str) -> Validation {
        Validation::Active(ValidationLogs::single_instance(scan_str(text)))
    }

    fn clean_log() -> Validation {
        active(STATUS)
    }

    fn log_with(id: &str) -> Validation {
        active(&format!("{STATUS}Validation Error: [ {id} ] x\n"))
    }

    /// Logs of several instances: (file, unwatched, text).
    fn logs(files: &[(&str, bool, &str)]) -> Validation {
        let instances: Vec<InstanceLog> = files
            .iter()
            .enumerate()
            .map(|(i, (file, unwatched, text))| InstanceLog {
                file: file.to_string(),
                opener: (!unwatched).then(|| vkexit_evidence::validation_logs::Header {
                    pid: 10 + i as i64,
                    t_ns: i as u64,
                    program: "/bin/app".into(),
                }),
                unwatched: *unwatched,
                report: scan_str(text),
            })
            .collect();
        let text: String = files.iter().map(|(_, _, t)| *t).collect();
        Validation::Active(ValidationLogs {
            instances,
            merged: scan_str(&text),
            app_only: Default::default(),
            unwitnessed: Vec::new(),
        })
    }

    #[test]
    fn findings_in_any_instance_log_fail_the_run_and_are_counted_together() {
        let leak = format!("{STATUS}Validation Error: [ VUID-vkDestroyDevice-device-00378 ] x\n");
        let c = run(
            Termination::Exited { code: 0 },
            logs(&[
                ("validation.d/10-1.log", false, &leak),
                ("validation.d/11-1.log", false, &leak),
            ]),
        );
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert_eq!(
            c.reason,
            "validation: VUID-vkDestroyDevice-device-00378 ×2, from the logs of 2 instances"
        );
        // A finding is certain even in a log no preload saw.
        let c = run(
            Termination::Exited { code: 0 },
            logs(&[
                ("validation.d/10-1.log", false, STATUS),
                ("validation.d/unwatched.log", true, &leak),
            ]),
        );
        assert_eq!(c.verdict, RunVerdict::Vuid);
    }

    #[test]
    fn a_clean_run_passes_only_when_every_instance_log_proves_validation() {
        let two = logs(&[
            ("validation.d/10-1.log", false, STATUS),
            ("validation.d/10-2.log", false, STATUS),
        ]);
        let c = run(Termination::Exited { code: 0 }, two);
        assert_eq!(c.verdict, RunVerdict::Pass, "{}", c.reason);
        assert_eq!(
            c.reason,
            "exited 0, validation clean in each of 2 instances"
        );
        // A log no preloaded library saw may have been truncated by a later instance.
        let c = run(
            Termination::Exited { code: 0 },
            logs(&[("validation.d/unwatched.log", true, STATUS)]),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(
            c.reason.contains("without vkexit's diagnostics preload"),
            "{}",
            c.reason
        );
        // A clean log beside an application messenger vkexit could not watch proves nothing.
        let mut unwatched_messenger = logs(&[("validation.d/10-1.log", false, STATUS)]);
        if let Validation::Active(l) = &mut unwatched_messenger {
            l.unwitnessed =
                vec!["an instance messenger behind a chained structure of type 5".into()];
        }
        let c = run(Termination::Exited { code: 0 }, unwatched_messenger);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(
            c.reason.contains("could not watch an instance messenger"),
            "{}",
            c.reason
        );
        // An instance whose log lacks the layer's status message is not proven validated.
        let c = run(
            Termination::Exited { code: 0 },
            logs(&[
                ("validation.d/10-1.log", false, STATUS),
                ("validation.d/11-1.log", false, ""),
            ]),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(
            c.reason
                .contains("process 11 (app, validation.d/11-1.log) holds no status message"),
            "{}",
            c.reason
        );
        // Checks turned off in one instance of two are named with that instance.
        let off = STATUS.replace(
            "Disables: None.",
            "Disables: VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT, ",
        );
        let c = run(
            Termination::Exited { code: 0 },
            logs(&[
                ("validation.d/10-1.log", false, STATUS),
                ("validation.d/11-1.log", false, &off),
            ]),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("in process 11 (app, validation.d/11-1.log): VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT"), "{}", c.reason);
    }

    #[test]
    fn exit_zero_with_a_clean_active_layer_passes() {
        let c = run(Termination::Exited { code: 0 }, clean_log());
        assert_eq!(c.verdict, RunVerdict::Pass);
    }

    #[test]
    fn exit_zero_without_proof_of_validation_is_an_error_never_a_pass() {
        let c = run(Termination::Exited { code: 0 }, Validation::NotActive);
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.contains("not active"));
        let c = run(
            Termination::Exited { code: 0 },
            Validation::Unreadable("EIO".into()),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
    }

    #[test]
    fn a_clean_log_with_checks_the_application_turned_off_is_an_error_never_a_pass() {
        let status = |disables: &str| {
            format!(
                "Validation Information: [ UNASSIGNED-khronos-validation-createinstance-status-message ] Khronos Validation Layer Active:\n    Current Enables: None.\n    Current Disables: {disables}\n\n"
            )
        };
        let c = run(Termination::Exited { code: 0 }, active(&status("None.")));
        assert_eq!(c.verdict, RunVerdict::Pass);
        let off = status("VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT, ");
        let c = run(Termination::Exited { code: 0 }, active(&off));
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(
            c.reason
                .contains("VK_VALIDATION_FEATURE_DISABLE_CORE_CHECKS_EXT"),
            "{}",
            c.reason
        );
        // What the remaining checks still found fails the run as usual.
        let found = format!("{off}Validation Error: [ VUID-vkDestroyDevice-device-00378 ] x\n");
        let c = run(Termination::Exited { code: 0 }, active(&found));
        assert_eq!(c.verdict, RunVerdict::Vuid);
    }

    #[test]
    fn a_vuid_fails_an_otherwise_clean_run() {
        let c = run(
            Termination::Exited { code: 0 },
            log_with("VUID-vkDestroyDevice-device-00378"),
        );
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert_eq!(c.vuids, ["VUID-vkDestroyDevice-device-00378"]);
        assert!(c.reason.contains("00378 ×1"));
    }

    #[test]
    fn a_signal_is_a_crash_and_keeps_the_vuids_seen_before_it() {
        let c = run(
            Termination::Signaled {
                signal: libc::SIGSEGV,
                core_dumped: false,
            },
            log_with("VUID-vkDestroyDevice-device-00378"),
        );
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(c.vuids.len(), 1);
    }

    #[test]
    fn a_crash_without_validation_proof_is_still_a_crash() {
        let c = run(
            Termination::Signaled {
                signal: libc::SIGABRT,
                core_dumped: true,
            },
            Validation::NotActive,
        );
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert!(c.reason.contains("SIGABRT (core dumped)"));
    }

    #[test]
    fn nonzero_exit_beats_vuids() {
        let c = run(Termination::Exited { code: 3 }, log_with("VUID-x-y-1"));
        assert_eq!(c.verdict, RunVerdict::Exit);
    }

    #[test]
    fn timeout_and_not_started() {
        let c = run(Termination::TimedOut { after_ms: 2500 }, clean_log());
        assert_eq!(c.verdict, RunVerdict::Timeout);
        assert!(c.reason.contains("2.5 s"));
        let c = run(
            Termination::NotStarted {
                reason: "No such file".into(),
            },
            Validation::NotActive,
        );
        assert_eq!(c.verdict, RunVerdict::Error);
    }

    #[test]
    fn a_scenario_that_could_not_set_up_is_an_error_with_its_reason() {
        let why = "ggml: ggml_backend_load(/x/libggml-vulkan.so) registered nothing; ggml said: …";
        let stderr = format!(
            "ggml_vulkan: …\n{}{why}\n",
            crate::run::observed::SCENARIO_SETUP_FAILED_LINE
        );
        let setup_failure = crate::run::observed::setup_failure(3, &stderr);
        assert_eq!(setup_failure.as_deref(), Some(why));
        let c = classify(
            &RunEvidence {
                termination: Termination::Exited { code: 3 },
                validation: clean_log(),
                trace: None,
                tegra: None,
                tree: ProcessTree::default(),
                setup_failure,
            },
            &Rules::default(),
        );
        assert_eq!(c.verdict, RunVerdict::Error);
        assert!(c.reason.ends_with(why), "{}", c.reason);
        // Exit code 3 without that line, or the line with another code, is the program's exit.
        assert_eq!(crate::run::observed::setup_failure(3, "exit 3\n"), None);
        assert_eq!(crate::run::observed::setup_failure(1, &stderr), None);
        let c = run(Termination::Exited { code: 3 }, clean_log());
        assert_eq!(c.verdict, RunVerdict::Exit);
    }

    #[test]
    fn no_validation_requested_passes_on_exit_zero() {
        let c = run(Termination::Exited { code: 0 }, Validation::NotRequested);
        assert_eq!(c.verdict, RunVerdict::Pass);
    }

    fn tree(termination: Termination, crashes: &str, children_may_crash: bool) -> Classification {
        classify(
            &RunEvidence {
                termination,
                validation: clean_log(),
                trace: None,
                tegra: None,
                tree: ProcessTree {
                    main_pid: Some(10),
                    crashes: crate::run::summaries::read_crashes(crashes.as_bytes()).unwrap(),
                    orphans: Vec::new(),
                },
                setup_failure: None,
            },
            &Rules {
                children_may_crash,
                ..Rules::default()
            },
        )
    }

    const CHILD_SEGV: &str = r#"{"ev":"crash","pid":20,"ppid":10,"cmdline":"worker --n 1","then":"default-action","signal":"SIGSEGV","pc_mapping":"/lib/libc.so.6"}
"#;
    const MAIN_IN_VALIDATION: &str = r#"{"ev":"crash","pid":10,"ppid":1,"cmdline":"app","then":"default-action","signal":"SIGSEGV","pc_mapping":"/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so"}
"#;
    const SEGV: Termination = Termination::Signaled {
        signal: libc::SIGSEGV,
        core_dumped: false,
    };

    fn orphaned(signal: &str, crashes: &str) -> Classification {
        classify(
            &RunEvidence {
                termination: Termination::Exited { code: 0 },
                validation: clean_log(),
                trace: None,
                tegra: None,
                tree: ProcessTree {
                    main_pid: Some(10),
                    crashes: crate::run::summaries::read_crashes(crashes.as_bytes()).unwrap(),
                    orphans: vec![crate::run::observed::OrphanDeath {
                        pid: 20,
                        comm: "worker".into(),
                        cmdline: String::new(),
                        signal: signal.into(),
                        core_dumped: false,
                    }],
                },
                setup_failure: None,
            },
            &Rules::default(),
        )
    }

    #[test]
    fn a_detached_process_reaped_dead_of_a_crash_signal_fails_the_run() {
        let c = orphaned("SIGSEGV", "");
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert!(
            c.reason.starts_with(
                "detached process 20 (worker) killed by SIGSEGV; the main process exited 0"
            ),
            "{}",
            c.reason
        );
        assert!(
            c.findings.iter().any(|f| f.contains("no crash record")),
            "{:?}",
            c.findings
        );
        // Its own crash record says it once, not twice.
        let c = orphaned("SIGSEGV", CHILD_SEGV);
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert!(
            c.reason.starts_with("process 20 (worker --n 1)"),
            "{}",
            c.reason
        );
        assert!(!c.reason.contains("more process"), "{}", c.reason);
        // Stopped by its own program: said, not judged.
        let c = orphaned("SIGTERM", "");
        assert_eq!(c.verdict, RunVerdict::Pass, "{c:?}");
        assert!(
            c.findings.iter().any(|f| f.contains("ended by SIGTERM")),
            "{:?}",
            c.findings
        );
    }

    #[test]
    fn a_child_that_died_of_a_signal_fails_a_run_whose_main_process_exited_0() {
        let c = tree(Termination::Exited { code: 0 }, CHILD_SEGV, false);
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert_eq!(c.signal.as_deref(), Some("SIGSEGV"));
        assert_eq!(
            c.reason,
            "process 20 (worker --n 1) killed by SIGSEGV; the main process exited 0, validation clean"
        );
        assert_eq!(c.findings, ["process 20 (worker --n 1) killed by SIGSEGV"]);
        // Whatever the main process did, the crash is the verdict.
        let c = tree(Termination::Exited { code: 3 }, CHILD_SEGV, false);
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert!(c.reason.ends_with("the main process exited with code 3"));
    }

    #[test]
    fn children_that_may_crash_are_findings_and_the_main_process_is_still_judged() {
        let c = tree(Termination::Exited { code: 0 }, CHILD_SEGV, true);
        assert_eq!(c.verdict, RunVerdict::Pass);
        assert_eq!(
            c.findings,
            ["process 20 (worker --n 1) killed by SIGSEGV (children may crash: recorded, not judged)"]
        );
        let c = tree(SEGV, MAIN_IN_VALIDATION, true);
        assert_eq!(c.verdict, RunVerdict::Crash);
    }

    #[test]
    fn a_crash_a_program_handler_survived_fails_nothing() {
        let survived = r#"{"ev":"crash","pid":20,"then":"program-handler","signal":"SIGSEGV"}"#;
        let c = tree(Termination::Exited { code: 0 }, survived, false);
        assert_eq!(c.verdict, RunVerdict::Pass);
        assert!(c.findings.is_empty());
    }

    #[test]
    fn a_crash_in_a_layers_library_names_the_layer() {
        let c = tree(SEGV, MAIN_IN_VALIDATION, false);
        assert_eq!(c.reason, "killed by SIGSEGV, in the validation layer");
        assert_eq!(c.crash_layer.as_deref(), Some("validation"));
        let both = format!("{MAIN_IN_VALIDATION}{CHILD_SEGV}");
        let c = tree(SEGV, &both, false);
        assert_eq!(c.verdict, RunVerdict::Crash);
        assert_eq!(
            c.reason,
            "killed by SIGSEGV, in the validation layer; 1 other process(es) crashed too"
        );
        // The main process's crash record is its own, not any other's.
        let c = tree(SEGV, CHILD_SEGV, false);
        assert_eq!(c.crash_layer, None);
    }

    #[test]
    fn an_abort_called_from_a_layer_is_the_layers_crash() {
        let abort = r#"{"ev":"crash","pid":10,"then":"default-action","signal":"SIGABRT","pc_mapping":"/lib/x86_64-linux-gnu/libc.so.6"}
{"ev":"backtrace","pid":10,"frames":[{"object":"/lib/x86_64-linux-gnu/libc.so.6"},{"object":"/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so"}]}
"#;
        let c = tree(
            Termination::Signaled {
                signal: libc::SIGABRT,
                core_dumped: false,
            },
            abort,
            false,
        );
        assert_eq!(c.reason, "killed by SIGABRT, in the validation layer");
        assert_eq!(c.crash_layer.as_deref(), Some("validation"));
    }

    #[test]
    fn a_sanitizer_report_leads_the_reason_and_fails_a_run_that_exited_0() {
        let judged = |termination: Termination, validation: Validation, report: Option<&str>| {
            let evidence = RunEvidence {
                termination,
                validation,
                trace: None,
                tegra: None,
                tree: ProcessTree::default(),
                setup_failure: None,
            };
            let mut c = classify(&evidence, &Rules::default());
            sanitizer_report(&mut c, &evidence, report);
            c
        };
        let asan = "AddressSanitizer: heap-use-after-free at /src/a.c:2 in main";
        let c = judged(
            Termination::Exited { code: 1 },
            Validation::NotRequested,
            Some(asan),
        );
        assert_eq!(c.verdict, RunVerdict::Exit);
        assert_eq!(c.reason, format!("{asan}; exited with code 1"));
        let ub = "UndefinedBehaviorSanitizer: a.c:3:7: runtime error: shift exponent 40";
        let c = judged(Termination::Exited { code: 0 }, clean_log(), Some(ub));
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert_eq!(c.reason, format!("{ub}; the program exited 0"));
        assert_eq!(c.vuids, [SANITIZER_ID]);
        // Certain whatever validation did, as a crash is.
        let c = judged(
            Termination::Exited { code: 0 },
            Validation::NotActive,
            Some(ub),
        );
        assert_eq!(c.verdict, RunVerdict::Vuid);
        assert!(
            c.reason.starts_with(&format!("{ub}; exited 0 but")),
            "{}",
            c.reason
        );
        let c = judged(Termination::Exited { code: 0 }, clean_log(), None);
        assert_eq!(c.verdict, RunVerdict::Pass);
    }

    #[test]
    fn layers_are_known_by_their_library() {
        let of = |m: &str| layer_of(m);
        assert_eq!(
            of("/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so").as_deref(),
            Some("validation")
        );
        assert_eq!(
            of("/x/libVkLayer_vkexit_trace.so").as_deref(),
            Some("trace")
        );
        assert_eq!(
            of("/usr/lib/libVkLayer_MESA_device_select.so.1").as_deref(),
            Some("libVkLayer_MESA_device_select.so.1")
        );
        // The emulated driver's fault is the emulation, never a layer's bug.
        assert_eq!(of("/x/libVkLayer_vkexit_tegra_exit.so"), None);
        for not_a_layer in ["/lib/libc.so.6", "unmapped", "[anonymous]", ""] {
            assert_eq!(of(not_a_layer), None, "{not_a_layer}");
        }
    }

    #[test]
    fn unknown_signal_numbers_get_a_name() {
        assert_eq!(signal_name(libc::SIGBUS), "SIGBUS");
        assert_eq!(signal_name(99), "SIG99");
    }
}
