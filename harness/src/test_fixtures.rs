//! Values the unit tests of several modules build their cases from.

use vkexit_evidence::results::{CellResult, Counts, Results};
use vkexit_evidence::verdict::CellVerdict;

/// A cell as a results file would hold it.
pub(crate) fn cell(case: &str, runtime: &str, verdict: CellVerdict, counts: Counts) -> CellResult {
    let runs = counts.total();
    CellResult {
        case: case.into(),
        runtime: runtime.into(),
        driver: "lavapipe".into(),
        layers: vec!["validation".into()],
        emulation: "none".into(),
        exit_order: None,
        chaos_seed: None,
        slow_teardown: false,
        runs,
        counts,
        verdict,
        vuids: Vec::new(),
        vuid_counts: Default::default(),
        vuid_names: Default::default(),
        signals: Vec::new(),
        artifacts: Vec::new(),
        findings: Vec::new(),
        pass_rate: crate::judge::cell::pass_rate(counts),
        pass_rate_95: crate::judge::cell::pass_rate_95(counts),
        duration_ms: 1234,
        reason: Some(format!("{verdict} because")),
        device: Some("llvmpipe".into()),
        provenance: None,
        driver_manifest: None,
        expectation: None,
        flaky_expected: false,
        allowed_vuids: Vec::new(),
        crash_in_layer: None,
    }
}

pub(crate) fn results(cells: Vec<CellResult>) -> Results {
    crate::report::results(cells, false)
}

pub(crate) fn counts(pass: u64, crash: u64, vuid: u64) -> Counts {
    Counts {
        pass,
        crash,
        vuid,
        ..Counts::default()
    }
}

/// A planned cell: `clean-exit` × `refrt:guarded` on lavapipe under validation, to run.
pub(crate) fn planned_cell() -> crate::plan::Cell {
    crate::plan::Cell {
        case: "clean-exit".into(),
        runtime: "refrt:guarded".into(),
        driver: crate::host::drivers::Driver {
            name: "lavapipe".into(),
            manifest: "/x.json".into(),
            library: "libvulkan_lvp.so".into(),
        },
        device: None,
        layers: vec!["validation".into()],
        emulation: crate::host::layers::Emulation::None,
        command: crate::plan::CaseCommand::External(vec![]),
        workdir: None,
        not_run: None,
        env: Vec::new(),
        validation_layer: None,
        props: Default::default(),
    }
}
