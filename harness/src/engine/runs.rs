//! The run stage's events turned into judged runs: each finished run judged (`judge::run`),
//! its directory kept or removed as its verdict says, the allow-lists applied, and the
//! complete record handed on, with the events a reporter shows.

use super::invocation::{Invocation, Part};
use crate::judge::run::{self as verdict, RunRecord};
use crate::judge::{allow, Allow};
use crate::plan::Cell;
use crate::report::events::GateEvent;
use crate::run::{self, Event, Flow, Reply};
use crate::support::errors::Result;
use std::collections::HashMap;

/// A judged run: its record, and the ids the allow-lists took out of it (sorted).
pub(crate) struct Judged {
    pub(crate) record: RunRecord,
    pub(crate) allowed: Vec<String>,
}

/// Makes the runs of `part` with `options` and judges each. `on_run` sees every run once it
/// is complete (judged, stored when kept, allow-listed) and says whether more runs should
/// start; `on_event` sees each complete run first, for the reporters. Gives what the runs
/// did in the directories they share with other runs.
pub(crate) fn judged_runs(
    invocation: &Invocation,
    part: &Part,
    options: &run::Options,
    mut on_event: impl FnMut(&GateEvent),
    mut on_run: impl FnMut(&Cell, Judged) -> Flow,
) -> Result<run::SharedDirs> {
    let rules = &invocation.rules;
    let keep_passing = invocation.settings.keep_passing;
    // Kept runs between their verdict and their directory's place, with whether their trace
    // showed a leak that fails them.
    let mut kept: HashMap<(usize, u32), (RunRecord, bool)> = HashMap::new();
    let mut complete = |cell: &Cell, mut record: RunRecord, leak: bool| {
        let allows: Vec<&Allow> = part.allows[record.cell].iter().collect();
        let allowed = allow::apply(&mut record, &allows, leak);
        on_event(&GateEvent::RunFinished { cell, run: &record });
        on_run(cell, Judged { record, allowed })
    };
    run::execute(&part.plan, options, |cell, event| match event {
        Event::Finished(finished) => {
            let record = verdict::judge(&finished, cell, &options.chain, rules);
            let leak = verdict::leak_fails(&finished, rules);
            if !verdict::keeps_evidence(&record, keep_passing) {
                return Reply {
                    flow: complete(cell, record, leak),
                    keep: None,
                };
            }
            let text = serde_json::to_string_pretty(&record).expect("a run record serialises");
            kept.insert((finished.cell, finished.index), (record, leak));
            Reply {
                flow: Flow::Go,
                keep: Some(text + "\n"),
            }
        }
        Event::Stored(stored) => {
            let Some((mut record, leak)) = kept.remove(&(stored.cell, stored.index)) else {
                return Reply::default();
            };
            if let Some(why) = &stored.failed {
                verdict::evidence_not_written(&mut record, &stored.dir, why);
            }
            record.kept = Some(stored.dir);
            Reply {
                flow: complete(cell, record, leak),
                keep: None,
            }
        }
    })
}
