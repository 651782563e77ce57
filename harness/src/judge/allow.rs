//! Allow-lists at work: the ids a baseline allows taken out of a judged run, on the evidence
//! the run stage handed over.

use super::file::Allow;
use super::run::RunRecord;
use vkexit_evidence::verdict::RunVerdict;

/// Removes the allowed ids from a run before its cell is judged. A `vuid` run left with no id
/// passes, or is a `leak` when `leak` says its trace showed objects alive at exit and leaks
/// fail runs. Returns the ids removed, sorted.
pub(crate) fn apply(run: &mut RunRecord, allows: &[&Allow], leak: bool) -> Vec<String> {
    let mut here: Vec<String> = Vec::new();
    if allows.is_empty() {
        return here;
    }
    let by = |id: &str| allows.iter().find(|a| a.allows(id));
    let mut sources: Vec<&str> = Vec::new();
    run.classification.vuids.retain(|id| match by(id) {
        Some(a) => {
            if !here.contains(id) {
                here.push(id.clone());
            }
            if !sources.contains(&a.source.as_str()) {
                sources.push(&a.source);
            }
            false
        }
        None => true,
    });
    run.vuid_counts.ids.retain(|id, _| by(id).is_none());
    if here.is_empty() {
        return here;
    }
    if run.classification.verdict == RunVerdict::Vuid && run.classification.vuids.is_empty() {
        run.classification.verdict = match leak {
            true => RunVerdict::Leak,
            false => RunVerdict::Pass,
        };
        run.classification.reason = format!(
            "exited 0; its validation messages are all allowed: {} ({})",
            here.join(", "),
            sources.join(", ")
        );
    }
    here.sort();
    here
}
