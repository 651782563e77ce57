//! vkexit's results file read as the types vkexit writes it with (`vkexit-evidence`), and
//! argument lists for vkexit built in one way: tests say what a cell came to, not where a
//! string sits in JSON.

use std::path::Path;
pub use vkexit_evidence::results::{CellResult, Counts, Results};
pub use vkexit_evidence::verdict::{CellVerdict, RunVerdict};

/// The results file at `path`, typed: a field vkexit no longer writes fails here, by name.
pub fn read(path: &Path) -> Results {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no results file {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is no results file: {e}\n{text}", path.display()))
}

/// The only cell of `results`.
pub fn the_cell(results: &Results) -> &CellResult {
    assert_eq!(results.cells.len(), 1, "{results:#?}");
    &results.cells[0]
}

/// The cell of `results` of `case` × `runtime`.
pub fn cell_of<'r>(results: &'r Results, case: &str, runtime: &str) -> &'r CellResult {
    results
        .cells
        .iter()
        .find(|c| c.case == case && c.runtime == runtime)
        .unwrap_or_else(|| panic!("no cell {case} × {runtime} in {results:#?}"))
}

/// A cell's identity across files: case, runtime, driver, layers, emulation.
pub fn id(cell: &CellResult) -> (String, String, String, String, String) {
    (
        cell.case.clone(),
        cell.runtime.clone(),
        cell.driver.clone(),
        cell.layers.join("+"),
        cell.emulation.clone(),
    )
}

/// A vkexit command line, built a flag at a time: `Args::run().case("clean-exit").runs(2)`;
/// the program to run ([`Args::program`]) comes last, after `--`, whenever it was given.
#[derive(Debug, Clone, Default)]
pub struct Args {
    args: Vec<String>,
    program: Vec<String>,
}

impl Args {
    /// `run --driver lavapipe`: a gate on the CPU driver every test machine has.
    pub fn run() -> Self {
        Args::command("run").opt("--driver", "lavapipe")
    }

    /// `merge FILES`.
    pub fn merge(files: &[&str]) -> Self {
        Args::command("merge").flags(files)
    }

    /// Any other command: `explore`, `repro`.
    pub fn command(name: &str) -> Self {
        Args {
            args: vec![name.to_string()],
            program: Vec::new(),
        }
    }

    /// `--case CASE`.
    pub fn case(self, case: &str) -> Self {
        self.opt("--case", case)
    }

    /// `--runtime RUNTIME`.
    pub fn runtime(self, runtime: &str) -> Self {
        self.opt("--runtime", runtime)
    }

    /// `--runs N`.
    pub fn runs(self, runs: u32) -> Self {
        self.opt("--runs", &runs.to_string())
    }

    /// `--json FILE`.
    pub fn json(self, file: &str) -> Self {
        self.opt("--json", file)
    }

    /// `--baseline FILE`.
    pub fn baseline(self, file: &str) -> Self {
        self.opt("--baseline", file)
    }

    /// `--shard K/N`.
    pub fn shard(self, shard: &str) -> Self {
        self.opt("--shard", shard)
    }

    /// An option with its value: `--artifacts elsewhere`.
    pub fn opt(mut self, name: &str, value: &str) -> Self {
        self.args.extend([name.to_string(), value.to_string()]);
        self
    }

    /// Flags or arguments as they are: `--no-validation`, `--allow-no-runs`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.args.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// `-- PROGRAM ARGS`: the program to run, after every flag whenever those are given.
    pub fn program(mut self, program: &Path, args: &[&str]) -> Self {
        self.program = vec![program.to_str().expect("a UTF-8 path").into()];
        self.program.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// The arguments, in order.
    pub fn to_vec(&self) -> Vec<String> {
        let mut all = self.args.clone();
        if !self.program.is_empty() {
            all.push("--".into());
            all.extend(self.program.iter().cloned());
        }
        all
    }
}

impl IntoIterator for &Args {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;

    fn into_iter(self) -> Self::IntoIter {
        self.to_vec().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_come_in_the_order_given_the_program_last() {
        let args = Args::run()
            .case("clean-exit")
            .runs(2)
            .flags(&["--no-validation"])
            .program(Path::new("/bin/true"), &["x"])
            .json("r.json");
        assert_eq!(
            args.to_vec(),
            [
                "run",
                "--driver",
                "lavapipe",
                "--case",
                "clean-exit",
                "--runs",
                "2",
                "--no-validation",
                "--json",
                "r.json",
                "--",
                "/bin/true",
                "x"
            ]
        );
        assert_eq!(
            Args::merge(&["a.json", "b.json"])
                .baseline("b.toml")
                .to_vec(),
            ["merge", "a.json", "b.json", "--baseline", "b.toml"]
        );
    }
}
