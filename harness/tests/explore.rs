//! `vkexit explore` and its replay flags, on real programs built here with the C compiler and
//! run under the real preload: each program's exit fails only in an order another build would
//! give it, or with another thread timing, and passes in its own. The exploration must find
//! that, and `vkexit run --exit-order` / `--chaos-seed` must replay the same verdict. Then the
//! built-in matrix on lavapipe under the real validation layer, where the seed's history is the
//! oracle.

use std::path::{Path, PathBuf};
use vkexit_testkit::cc::cc;
use vkexit_testkit::results::{cell_of, exploration, the_cell, Args, Exploration, ExploredCell};
use vkexit_testkit::vkexit::Sandbox;

/// `vkexit explore --driver lavapipe --no-validation --runs N ARGS -- PROGRAM`: the exploration.
fn explore(sb: &Sandbox, runs: u32, args: &[&str], program: &Path) -> (i32, Exploration) {
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args([
            "explore",
            "--driver",
            "lavapipe",
            "--no-validation",
            "--runs",
        ])
        .arg(runs.to_string())
        .arg("--json")
        .arg(&json)
        .args(args)
        .arg("--")
        .arg(program)
        .output()
        .expect("vkexit starts");
    let code = out.status.code().expect("vkexit exits");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no exploration file ({e}); exit {code}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        code,
        serde_json::from_str(&text).expect("an exploration file"),
    )
}

/// `vkexit explore --driver lavapipe ARGS --json FILE` over built-in cells: its exit code, the
/// exploration, stderr and stdout.
fn explore_cells(sb: &Sandbox, args: &[&str]) -> (Option<i32>, Exploration, String, String) {
    let json: PathBuf = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args(["explore", "--driver", "lavapipe"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), exploration(&json), stderr, stdout)
}

fn verdict<'a>(cell: &'a ExploredCell, name: &str) -> &'a str {
    &cell
        .perturbations
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no perturbation {name} in {cell:#?}"))
        .verdict
}

/// `vkexit run --no-validation --runs N ARGS -- PROGRAM`: the cell's counts of pass and crash.
fn replay(sb: &Sandbox, runs: u32, args: &[&str], program: &Path) -> (u64, u64) {
    let runs = runs.to_string();
    let mut all = vec!["--runs", runs.as_str(), "--no-validation"];
    all.extend_from_slice(args);
    all.extend(["--", program.to_str().unwrap()]);
    let (_, r) = sb.gate_run(&all);
    let counts = the_cell(&r).counts;
    // These programs never use Vulkan: a clean run of theirs is `no-vulkan`, a pass.
    (counts.pass + counts.no_vulkan, counts.crash)
}

/// Two libraries whose load-time exit handlers depend on each other: `second` reads what
/// `first` frees. Linked `second` then `first`, the dependency is constructed first and torn
/// down last, so the program passes; in the reverse order across the two objects it crashes.
#[test]
fn a_teardown_that_depends_on_link_order_is_found_and_replays() {
    let sb = Sandbox::new();
    let dir = sb.path();
    let first = r#"
        #include <stdlib.h>
        int *first_state;
        static void first_down(void) { free(first_state); first_state = 0; }
        __attribute__((constructor)) static void first_up(void) {
            first_state = malloc(sizeof *first_state); *first_state = 7; atexit(first_down);
        }"#;
    let second = r#"
        #include <stdlib.h>
        extern int *first_state;
        static void second_down(void) { if (*first_state != 7) abort(); }
        __attribute__((constructor)) static void second_up(void) { atexit(second_down); }"#;
    cc(
        dir,
        &[("first.c", first)],
        &["-shared", "-fPIC", "-o", "libfirst.so", "first.c"],
    );
    cc(
        dir,
        &[("second.c", second)],
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libsecond.so",
            "second.c",
            "-L.",
            "-lfirst",
        ],
    );
    cc(
        dir,
        &[("main.c", "int main(void) { return 0; }\n")],
        &[
            "-o",
            "two-libraries",
            "main.c",
            "-L.",
            "-Wl,--no-as-needed",
            "-lsecond",
            "-lfirst",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    let program = dir.join("two-libraries");
    let (code, exploration) = explore(&sb, 2, &[], &program);
    let cell = &exploration.cells[0];
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}");
    assert_eq!(verdict(cell, "link-order"), "fail", "{cell:#?}");
    assert_eq!(verdict(cell, "module"), "not-applicable", "{cell:#?}");
    let order = cell
        .perturbations
        .iter()
        .find(|p| p.name == "link-order")
        .unwrap();
    assert!(
        order.moved.iter().any(|m| m.contains("libsecond.so")),
        "{order:#?}"
    );
    assert!(
        cell.findings
            .iter()
            .any(|f| f.starts_with("passes here; crashes 2/2")),
        "{:#?}",
        cell.findings
    );
    assert_eq!(code, 1, "a failing perturbation makes the gate red");
    assert_eq!(
        replay(&sb, 2, &["--exit-order", "link-order"], &program),
        (0, 2)
    );
    assert_eq!(replay(&sb, 2, &[], &program), (2, 0));
}

/// A module loaded with dlopen before the application registers its cleanup: the cleanup
/// runs first and passes. Loaded after it (a module build that loads later), the module's
/// teardown runs first and the cleanup crashes on what it freed.
#[test]
fn a_module_whose_teardown_crashes_only_when_moved_is_found_and_replays() {
    let sb = Sandbox::new();
    let dir = sb.path();
    let module = r#"
        #include <stdlib.h>
        static int *state;
        static void module_down(void) { free(state); state = 0; }
        int module_use(void) { return *state; }
        __attribute__((constructor)) static void module_up(void) {
            state = malloc(sizeof *state); *state = 3; atexit(module_down);
        }"#;
    let main = r#"
        #include <dlfcn.h>
        #include <stdlib.h>
        static int (*use)(void);
        static void cleanup(void) { if (use() != 3) abort(); }
        int main(int argc, char **argv) {
            void *m = dlopen(argv[1], RTLD_NOW);
            if (!m) return 2;
            use = (int (*)(void))dlsym(m, "module_use");
            atexit(cleanup);
            return 0;
        }"#;
    cc(
        dir,
        &[("module.c", module)],
        &["-shared", "-fPIC", "-o", "libmodule.so", "module.c"],
    );
    cc(
        dir,
        &[("main.c", main)],
        &["-o", "loads-a-module", "main.c", "-ldl"],
    );
    let program = dir.join("loads-a-module");
    let module = dir.join("libmodule.so");
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args([
            "explore",
            "--driver",
            "lavapipe",
            "--no-validation",
            "--runs",
            "2",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--")
        .arg(&program)
        .arg(&module)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exploration = exploration(&json);
    let cell = &exploration.cells[0];
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}");
    assert_eq!(verdict(cell, "module"), "fail", "{cell:#?}");
    assert_eq!(verdict(cell, "linked"), "not-applicable", "{cell:#?}");
    let replayed = |args: &[&str]| {
        let mut all = vec!["--no-validation", "--runs", "2"];
        all.extend_from_slice(args);
        all.extend(["--", program.to_str().unwrap(), module.to_str().unwrap()]);
        let (_, r) = sb.gate_run(&all);
        the_cell(&r).counts.crash
    };
    assert_eq!(replayed(&["--exit-order", "module"]), 2);
    assert_eq!(replayed(&[]), 0);
}

/// A worker thread that writes to a page an exit handler unmaps, after 50 ms of its own CPU
/// time from when it was told: the natural exit ends long before, however loaded the machine; when the thread timing lets running threads run ahead at the
/// next handler boundary, it writes into the hole, every time, for this seed.
#[test]
fn a_thread_race_that_the_chaos_schedule_loses_is_found_and_replays() {
    let sb = Sandbox::new();
    let dir = sb.path();
    let main = r#"
        #include <pthread.h>
        #include <stdatomic.h>
        #include <stdlib.h>
        #include <sys/mman.h>
        #include <time.h>
        static volatile char *page;
        static atomic_int unmapped;
        /* The worker's own CPU time, not the clock: on a loaded machine it runs less, and
           the natural exit (which gives it no time of its own) stays clean, while a pause
           that lets it run gives it all it needs. */
        static double cpu(void) {
            struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec / 1e9;
        }
        static void *worker(void *arg) {
            (void)arg;
            while (!atomic_load(&unmapped)) {}
            double start = cpu();
            while (cpu() - start < 0.05) {}
            page[0] = 1;
            return 0;
        }
        static void unmap_page(void) { munmap((void *)page, 4096); atomic_store(&unmapped, 1); }
        static void last_words(void) {}
        int main(void) {
            page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            pthread_t t;
            pthread_create(&t, 0, worker, 0);
            atexit(last_words);
            atexit(unmap_page);
            return 0;
        }"#;
    cc(
        dir,
        &[("race.c", main)],
        &["-O1", "-o", "exit-race", "race.c", "-pthread"],
    );
    let program = dir.join("exit-race");
    let (code, exploration) = explore(&sb, 2, &["--exit-order", "module"], &program);
    let cell = &exploration.cells[0];
    assert_eq!(cell.natural.counts.passed(), 2, "{cell:#?}");
    assert_eq!(verdict(cell, "threads:seed=1"), "fail", "{cell:#?}");
    assert_eq!(code, 1);
    assert_eq!(replay(&sb, 2, &["--chaos-seed", "1"], &program), (0, 2));
}

/// The built-in cells on lavapipe under validation: the natural exit is exactly `run`'s
/// verdict, and the seed's history holds: the order-proof policy (`release-children`) passes
/// every perturbation, every other policy fails at least one somewhere, and the crash of a
/// static destructor after the Tegra driver's exit handler is fixed by the seed's own fix.
#[test]
fn the_seeds_history_is_found_by_exploring_the_built_in_cells() {
    let sb = Sandbox::new();
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args(["explore", "--driver", "lavapipe", "--runs", "1", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exploration = exploration(&json);
    assert_eq!(exploration.cells.len(), 20);
    let (code, run) = sb.gate_run(&["--runs", "1"]);
    assert_eq!(code, 0);
    for (explored, ran) in exploration.cells.iter().zip(&run.cells) {
        let n = &explored.natural;
        assert_eq!((&n.case, &n.runtime), (&ran.case, &ran.runtime));
        assert_eq!(n.verdict, ran.verdict, "{}", n.case);
    }
    let failing = |c: &ExploredCell| {
        c.natural.counts.pass < c.natural.runs
            || c.perturbations
                .iter()
                .any(|p| matches!(p.verdict.as_str(), "fail" | "flaky" | "error"))
    };
    for policy in [
        "never",
        "static-destructor",
        "atexit-after-init",
        "guarded",
        "release-children",
    ] {
        let runtime = format!("refrt:{policy}");
        let cells: Vec<&ExploredCell> = exploration
            .cells
            .iter()
            .filter(|c| c.natural.runtime == runtime)
            .collect();
        assert_eq!(cells.len(), 4, "{runtime}");
        let any_fails = cells.iter().any(|c| failing(c));
        assert_eq!(
            any_fails,
            policy != "release-children",
            "{runtime}: {cells:#?}"
        );
    }
    let events = exploration
        .cells
        .iter()
        .find(|c| {
            c.natural.case == "events-freed-after-teardown"
                && c.natural.runtime == "refrt:static-destructor"
        })
        .unwrap();
    assert_eq!(events.natural.counts.pass, 1);
    assert_eq!(
        verdict(events, "module"),
        "fail",
        "the seed's P2: {events:#?}"
    );
    let clean = exploration
        .cells
        .iter()
        .find(|c| c.natural.case == "clean-exit" && c.natural.runtime == "refrt:static-destructor")
        .unwrap();
    assert_eq!(verdict(clean, "driver-exit:tegra"), "fail", "{clean:#?}");
}

/// The seed's first fix, found: `clean-exit × static-destructor` crashes under the Tegra
/// driver's exit; registering the teardown after vkCreateInstance makes it clean.
#[test]
fn the_static_destructor_after_the_tegra_exit_gets_the_seeds_fix() {
    let sb = Sandbox::new();
    let args = [
        "--case",
        "clean-exit",
        "--runtime",
        "refrt:static-destructor",
        "--runtime",
        "refrt:never",
        "--emulate",
        "tegra",
        "--runs",
        "2",
    ];
    let (code, exploration, stderr, _) = explore_cells(&sb, &args);
    // Both crash as the built-in baseline expects (expected-fail, green as `run` judges it).
    // A perturbation of an exit that fails already, failing too, is no new alarm: the gate is
    // green whether or not thread timing found a thread to run ahead.
    assert_eq!(code, Some(0), "{stderr}");
    let cell = |runtime: &str| {
        exploration
            .cells
            .iter()
            .find(|c| c.natural.runtime == runtime)
            .unwrap()
    };
    let fixed = cell("refrt:static-destructor");
    assert_eq!(fixed.natural.counts.crash, 2);
    let fix = fixed.fix.as_ref().unwrap_or_else(|| panic!("{fixed:#?}"));
    assert_eq!(fix.exit_order, "teardown-before-driver");
    assert_eq!((fix.counts.pass, fix.verdict.as_str()), (2, "pass"));
    assert!(
        fix.change.contains("atexit after vkCreateInstance"),
        "{fix:#?}"
    );
    assert!(
        fix.moved.iter().any(|m| m.contains("libvkexit_refrt.so")),
        "{fix:#?}"
    );
    // Nothing tears down under `never`: no order helps, and it says so.
    let never = cell("refrt:never");
    assert!(never.fix.is_none());
    // The Tegra driver's thread is alive at exit, asleep between its rounds most of the time;
    // whether some thread is runnable at the first pause is the scheduler's choice. Either way
    // the cell tells the threads' states as they were and raises no alarm: with nothing
    // runnable thread timing does not apply; with one, it ran and the exit, failing already,
    // also fails.
    let threads = never
        .perturbations
        .iter()
        .find(|p| p.name == "threads:seed=1")
        .unwrap();
    let said = threads.moved.join("; ");
    assert!(said.contains(" alive"), "{threads:#?}");
    match threads.verdict.as_str() {
        "not-applicable" => assert!(
            said.contains("asleep") && said.contains("none was runnable"),
            "{threads:#?}"
        ),
        "fail" => {
            assert!(
                said.contains("with one runnable") && said.ends_with("let run ahead"),
                "{threads:#?}"
            );
            assert!(
                never
                    .findings
                    .iter()
                    .any(|f| f.starts_with("threads:seed=1 also fails")),
                "{never:#?}"
            );
        }
        other => panic!("thread timing of a failing exit read {other}: {threads:#?}"),
    }
    assert!(
        never
            .no_fix
            .as_deref()
            .unwrap_or("")
            .contains("no change of exit order"),
        "{never:#?}"
    );
}

/// The seed's two-step fix, found by the search: under the Tegra driver's exit, a cleanup
/// registered before the runtime loaded and a runtime torn down in a static destructor pass
/// only when the teardown runs before the driver's handler and the cleanup before the
/// teardown. No single change does it; the combined one, replayed with `run`, passes.
#[test]
fn the_seeds_two_step_fix_is_searched_and_replays() {
    let sb = Sandbox::new();
    let args = [
        "--case",
        "handler-before-load",
        "--runtime",
        "refrt:static-destructor",
        "--emulate",
        "tegra",
        "--runs",
        "2",
    ];
    let (_, exploration, stderr, _) = explore_cells(&sb, &args);
    let cell = &exploration.cells[0];
    assert!(cell.natural.counts.passed() < 2, "{cell:#?}");
    let fix = cell
        .fix
        .as_ref()
        .unwrap_or_else(|| panic!("{cell:#?}\n{stderr}"));
    assert_eq!(
        fix.exit_order, "teardown-before-driver,cleanup-first",
        "{cell:#?}"
    );
    assert_eq!((fix.counts.pass, fix.verdict.as_str()), (2, "pass"));
    assert!(
        fix.change.contains("atexit after vkCreateInstance")
            && fix
                .change
                .contains("; then register the application's cleanup"),
        "{fix:#?}"
    );
    assert!(cell.no_fix.is_none(), "{cell:#?}");
    // `run` replays it.
    let args = Args::run()
        .case("handler-before-load")
        .runtime("refrt:static-destructor")
        .opt("--emulate", "tegra")
        .opt("--exit-order", &fix.exit_order)
        .runs(2)
        .json("replay.json");
    let (_, replay) = sb.gate(&args, "replay.json");
    let replayed = the_cell(&replay);
    assert_eq!(replayed.counts.passed(), 2, "{replayed:#?}");
}

/// A search the budget stops is no answer: the cell whose two-step fix exists, explored with
/// a budget spent by its natural runs, reads "not decided", never "no order that helps".
#[test]
fn a_fix_search_the_budget_cuts_short_is_not_decided_not_no_order_helps() {
    let sb = Sandbox::new();
    let args = [
        "--case",
        "handler-before-load",
        "--runtime",
        "refrt:static-destructor",
        "--emulate",
        "tegra",
        "--runs",
        "1",
        "--budget",
        "0.001",
    ];
    let (_, exploration, _, stdout) = explore_cells(&sb, &args);
    let cell = &exploration.cells[0];
    assert_eq!(cell.natural.counts.passed(), 0, "{cell:#?}");
    assert!(cell.fix.is_none() && cell.fix_undecided, "{cell:#?}");
    let why = cell.no_fix.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("not decided: the budget (--budget) ran out after 0 of the")
            && why.ends_with("(none tried)"),
        "{why}"
    );
    assert!(
        stdout.contains("0 failing with no order that helps")
            && stdout.contains("1 failing cell(s) not decided"),
        "{stdout}"
    );
}

/// A matrix with a layer set of the desktop exit and one of the Jetson's, as the default gate
/// is, explores both: each set's cells are natural cells of their own, and only those of the
/// desktop exit are perturbed with the emulated driver exits (those of the Jetson's emulate it
/// already), never planned twice as two sets of the same layers.
#[test]
fn a_matrix_with_the_desktop_and_the_tegra_exit_explores_both() {
    let sb = Sandbox::new();
    let matrix = sb.path().join("two-exits.toml");
    std::fs::write(
        &matrix,
        "cases = [\"handler-before-load\"]\nruntimes = [\"refrt:atexit-after-init\"]\nruns = 1\n\n\
         [[layers]]\nvalidation = true\nemulation = \"none\"\n\n\
         [[layers]]\nvalidation = true\nemulation = \"tegra\"\n",
    )
    .unwrap();
    let (code, exploration, stderr, _) =
        explore_cells(&sb, &["--config", matrix.to_str().unwrap()]);
    // The natural crashes are the built-in baseline's expected ones, and a perturbation of an
    // exit that fails already only "also fails": green, not refused (2).
    assert_eq!(code, Some(0), "{stderr}");
    let emulations: Vec<&str> = exploration
        .cells
        .iter()
        .map(|c| c.natural.emulation.as_str())
        .collect();
    assert_eq!(emulations, ["none", "tegra"], "{stderr}");
    for cell in &exploration.cells {
        assert_eq!(cell.natural.counts.crash, 1, "{cell:#?}");
        let fix = cell.fix.as_ref().expect("the seed's fix");
        assert_eq!(fix.exit_order, "cleanup-first", "{cell:#?}");
    }
    let (desktop, tegra) = (&exploration.cells[0], &exploration.cells[1]);
    assert_eq!(
        verdict(desktop, "driver-exit:tegra"),
        "fail",
        "{desktop:#?}"
    );
    assert_eq!(
        verdict(tegra, "driver-exit:tegra"),
        "not-applicable",
        "{tegra:#?}"
    );
}

/// The explorations committed with the docs (ci/explorations/, real runs on the NVIDIA H200)
/// read as exploration files of this version's types, every perturbation with a verdict.
#[test]
fn the_committed_explorations_read_as_exploration_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/explorations");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let e: Exploration =
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        assert_eq!(
            e.schema,
            vkexit_evidence::explore::SCHEMA,
            "{}",
            path.display()
        );
        assert!(!e.cells.is_empty());
        for cell in &e.cells {
            for p in &cell.perturbations {
                let known = ["pass", "fail", "flaky", "error", "not-applicable"];
                assert!(
                    known.contains(&p.verdict.as_str()),
                    "{}: {p:?}",
                    path.display()
                );
            }
        }
        read += 1;
    }
    assert!(read >= 2, "only {read} explorations in {}", dir.display());
}

/// `vkexit explore` over the built-in cells of `runtimes` on lavapipe, one run a perturbation,
/// the link-order perturbation alone, with `extra` flags: its exit code and stdout.
fn explore_built_in(sb: &Sandbox, runtimes: &[&str], extra: &[&str]) -> (i32, String) {
    let mut cmd = sb.vkexit();
    cmd.args([
        "explore",
        "--driver",
        "lavapipe",
        "--case",
        "clean-exit",
        "--runs",
        "1",
        "--exit-order",
        "link-order",
    ]);
    for r in runtimes {
        cmd.args(["--runtime", r]);
    }
    let out = cmd.args(extra).output().expect("vkexit starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().expect("vkexit exits");
    assert!(
        (0..=2).contains(&code),
        "exit {code}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, stdout + &String::from_utf8_lossy(&out.stderr))
}

/// An exploration split with `--shard K/N` explores each natural cell in one shard only, with
/// all its perturbations (the emulated driver exits too, whose cells' own identity falls in
/// another shard), and `vkexit merge` joins the shards into the whole: its table, its gate,
/// its reports. A shard left out, a shard given twice, an empty shard: each refused, named.
#[test]
fn an_exploration_split_in_shards_merges_into_the_whole() {
    let sb = Sandbox::new();
    let runtimes = [
        "refrt:never",
        "refrt:static-destructor",
        "refrt:atexit-after-init",
        "refrt:release-children",
    ];
    let mut files = Vec::new();
    let mut explored = Vec::new();
    for k in 1..=2 {
        let json = sb.path().join(format!("shard-{k}.json"));
        let shard = format!("{k}/2");
        let (code, out) = explore_built_in(
            &sb,
            &runtimes,
            &[
                "--shard",
                &shard,
                "--allow-no-runs",
                "--json",
                json.to_str().unwrap(),
            ],
        );
        let e: Exploration = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
            .unwrap_or_else(|err| panic!("{err}\n{out}"));
        assert_eq!(e.shard.as_deref(), Some(shard.as_str()));
        for cell in &e.cells {
            // Every cell carries every perturbation, the emulated driver exits among them.
            let names: Vec<&str> = cell.perturbations.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "link-order",
                    "driver-exit:tegra",
                    "driver-exit:tegra-racy",
                    "threads:seed=1",
                    "slow-teardown",
                    "library-link-order"
                ],
                "{out}"
            );
            assert!(
                cell.perturbations.iter().all(|p| p.verdict != "error"),
                "{cell:#?}"
            );
        }
        assert_eq!(code, i32::from(!green(&e)), "{out}");
        explored.extend(e.cells.iter().map(|c| c.natural.runtime.clone()));
        files.push(json);
    }
    explored.sort();
    let mut all: Vec<String> = runtimes.iter().map(|r| r.to_string()).collect();
    all.sort();
    assert_eq!(explored, all, "each cell explored in exactly one shard");

    // The shards joined: every cell, the whole's gate (the static destructor crashes under the
    // Tegra driver's exit: red), and the reports of an exploration.
    let merged = sb.path().join("merged.json");
    let html = sb.path().join("html");
    let junit = sb.path().join("junit.xml");
    let out = sb
        .vkexit()
        .arg("merge")
        .args(&files)
        .arg("--json")
        .arg(&merged)
        .arg("--html")
        .arg(&html)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("4 cells explored: "),
        "the merged table: {stdout}"
    );
    let whole = exploration(&merged);
    assert_eq!((whole.cells.len(), whole.shard.as_deref()), (4, None));
    let static_destructor = whole
        .cells
        .iter()
        .find(|c| c.natural.runtime == "refrt:static-destructor")
        .unwrap();
    assert_eq!(verdict(static_destructor, "driver-exit:tegra"), "fail");
    let page = std::fs::read_to_string(html.join("index.html")).unwrap();
    assert!(
        page.contains("<td class=\"fail\">") || page.contains("class=\"fail\"><a"),
        "{page}"
    );
    assert!(page.contains("driver-exit:tegra"), "{page}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("clean-exit × refrt:static-destructor × lavapipe")
            && xml.contains("<failure message=\"fail: crashes 1/1"),
        "{xml}"
    );

    // One shard of two: the other is named as missing. One file twice: refused.
    let alone = sb
        .vkexit()
        .arg("merge")
        .arg(&files[0])
        .arg("--json")
        .arg(sb.path().join("alone.json"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{said}");
    assert!(said.contains("2/2"), "{said}");
    let twice = sb
        .vkexit()
        .arg("merge")
        .args([&files[0], &files[0], &files[1]])
        .arg("--json")
        .arg(sb.path().join("twice.json"))
        .output()
        .unwrap();
    assert_eq!(twice.status.code(), Some(2));
}

/// An exploration in which no run started (here: a shard that holds no cell) is not green:
/// exit 2 with the reason, unless `--allow-no-runs`.
#[test]
fn an_exploration_that_ran_nothing_is_not_green() {
    let sb = Sandbox::new();
    // One cell in 64 shards: all but one shard are empty; find one that is.
    let runtimes = ["refrt:never"];
    let empty = (1..=64)
        .map(|k| format!("{k}/64"))
        .find(|shard| {
            let (_, out) = explore_built_in(&sb, &runtimes, &["--shard", shard, "--allow-no-runs"]);
            out.contains("0 cells explored")
        })
        .expect("an empty shard among 64");
    let (code, out) = explore_built_in(&sb, &runtimes, &["--shard", &empty]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no cell in shard"), "{out}");
}

fn green(e: &Exploration) -> bool {
    e.cells.iter().all(|c| {
        c.natural.is_green()
            && !c
                .perturbations
                .iter()
                .any(|p| matches!(p.verdict.as_str(), "fail" | "flaky" | "error"))
    })
}

/// A library that starts a worker thread on its device and registers, while the program runs,
/// `join_workers` and then `vk_shutdown` with `atexit`: `vk_shutdown` runs first and destroys
/// the device while the worker still submits (it waits there, up to 2 s, for the worker's next
/// call, so that this happens in every run). Swapping the two registrations fixes it.
const WORKERS: &str = r#"#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <vulkan/vulkan.h>
static VkInstance instance;
static VkDevice device;
static VkQueue queue;
static volatile int stop, destroyed, called_after;
static pthread_t worker;
static void *work(void *unused) {
    (void)unused;
    while (!stop) {
        vkQueueWaitIdle(queue);
        if (destroyed) called_after = 1;
    }
    return 0;
}
void join_workers(void) {
    stop = 1;
    pthread_join(worker, 0);
}
void vk_shutdown(void) {
    vkDestroyDevice(device, 0);
    destroyed = 1;
    for (int i = 0; i < 2000 && !stop && !called_after; i++) usleep(1000);
    vkDestroyInstance(instance, 0);
}
int workers_start(void) {
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    if (vkCreateInstance(&info, 0, &instance) != VK_SUCCESS) return 2;
    uint32_t n = 1;
    VkPhysicalDevice gpu;
    if (vkEnumeratePhysicalDevices(instance, &n, &gpu) < 0 || n == 0) return 2;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo d = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    d.queueCreateInfoCount = 1;
    d.pQueueCreateInfos = &q;
    if (vkCreateDevice(gpu, &d, 0, &device) != VK_SUCCESS) return 2;
    vkGetDeviceQueue(device, 0, 0, &queue);
    pthread_create(&worker, 0, work, 0);
    atexit(join_workers);
    atexit(vk_shutdown);
    return 0;
}
"#;

#[test]
fn two_handlers_of_one_library_in_the_wrong_order_get_a_swap_that_replays() {
    let sb = Sandbox::new();
    cc(
        sb.path(),
        &[("workers.c", WORKERS)],
        &[
            "-g",
            "-shared",
            "-fPIC",
            "workers.c",
            "-o",
            "libworkers.so",
            "-lvulkan",
            "-pthread",
        ],
    );
    cc(
        sb.path(),
        &[(
            "main.c",
            "int workers_start(void);\nint main(void) { return workers_start(); }\n",
        )],
        &[
            "main.c",
            "-o",
            "workers",
            "-L.",
            "-lworkers",
            "-Wl,-rpath,$ORIGIN",
        ],
    );
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args([
            "explore",
            "--driver",
            "lavapipe",
            "--runs",
            "2",
            "--timeout",
            "30",
            "--json",
        ])
        .arg(&json)
        .arg("--")
        .arg(sb.path().join("workers"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let exploration = exploration(&json);
    let cell = &exploration.cells[0];
    assert_eq!(cell.natural.counts.passed(), 0, "{cell:#?}\n{stderr}");
    let fix = cell
        .fix
        .as_ref()
        .unwrap_or_else(|| panic!("{cell:#?}\n{stderr}"));
    assert_eq!(
        fix.exit_order, "run:join_workers:before:vk_shutdown",
        "{cell:#?}"
    );
    assert_eq!((fix.counts.passed(), fix.verdict.as_str()), (2, "pass"));
    // In the program's own terms: the two `atexit` calls' lines (built with -g), and the
    // swap as a diff of its source.
    assert!(
        fix.change
            .contains("register `join_workers` after `vk_shutdown` (workers.c:44, workers.c:45)"),
        "{fix:#?}"
    );
    let diff = fix.diff.as_deref().unwrap_or_else(|| panic!("{fix:#?}"));
    assert!(
        diff.contains(
            "-    atexit(join_workers);\n+    atexit(vk_shutdown);\n-    atexit(vk_shutdown);\n+    atexit(join_workers);\n"
        ),
        "{diff}"
    );
    assert!(
        fix.moved.iter().any(|m| m.contains("join_workers")),
        "{fix:#?}"
    );
    // `run` replays it: clean with the swap, failing without.
    for (order, passes) in [(Some(fix.exit_order.as_str()), 2), (None, 0)] {
        let mut args = Args::run()
            .runs(2)
            .json("replay.json")
            .opt("--timeout", "30");
        if let Some(order) = order {
            args = args.opt("--exit-order", order);
        }
        let args = args.program(&sb.path().join("workers"), &[]);
        let (_, replay) = sb.gate(&args, "replay.json");
        assert_eq!(
            the_cell(&replay).counts.passed(),
            passes,
            "{order:?}: {replay:#?}"
        );
    }
}

/// Crashes at exit in its first run only: `teardown` counts the runs in the file its argument
/// names and crashes when it is the first. Any order of its two handlers passes after that.
const FIRST_RUN_CRASHES: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static const char *counter;

void cleanup(void) {}

void teardown(void) {
    int fd = open(counter, O_WRONLY | O_CREAT | O_APPEND, 0644);
    off_t before = lseek(fd, 0, SEEK_END);
    write(fd, "x", 1);
    close(fd);
    if (before == 0) {
        volatile int *field = (int *)16;
        *field = 1;
    }
}

int main(int argc, char **argv) {
    counter = argv[1];
    atexit(cleanup);
    atexit(teardown);
    return 0;
}
"#;

/// A flaky exit (it crashed in 1 of 2 runs) whose handlers swapped pass 2 of 2: as likely by
/// chance as not, so no fix is claimed; the cell is not decided, and says how many runs would
/// tell.
#[test]
fn a_change_that_passes_a_flaky_exit_in_too_few_runs_is_no_fix() {
    let sb = Sandbox::new();
    cc(
        sb.path(),
        &[("first.c", FIRST_RUN_CRASHES)],
        &["-g", "-rdynamic", "first.c", "-o", "first-run-crashes"],
    );
    let json = sb.path().join("explore.json");
    let out = sb
        .vkexit()
        .args(["explore", "--driver", "lavapipe", "--no-validation"])
        .args(["--runs", "2", "-j", "1", "--json"])
        .arg(&json)
        .arg("--")
        .arg(sb.path().join("first-run-crashes"))
        .arg(sb.path().join("runs.count"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let exploration = exploration(&json);
    let cell = &exploration.cells[0];
    let counts = &cell.natural.counts;
    assert_eq!((counts.crash, counts.passed()), (1, 1), "{cell:#?}");
    assert!(cell.fix.is_none() && cell.fix_undecided, "{cell:#?}");
    let why = cell.no_fix.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("not decided: `")
            && why.contains("passed 2 of 2 run(s), but the natural exit passed 1 of 2 too")
            && why.ends_with("(explore again with --runs 5 or more)"),
        "{why}"
    );
    assert!(stdout.contains("1 failing cell(s) not decided"), "{stdout}");
}

/// Under the Tegra driver's exit, every built-in cell that explore says no order helps fails
/// in each change of order the fix search knows and in each two of them in sequence, replayed
/// with `run`: "no order" is never said where a combination passes. The cells that some order
/// makes clean get that fix, the seed's two-step ones included.
#[test]
fn no_order_helps_only_where_no_combination_of_orders_passes() {
    let sb = Sandbox::new();
    let (_, exploration, stderr, _) = explore_cells(&sb, &["--emulate", "tegra", "--runs", "1"]);
    let failing: Vec<&ExploredCell> = exploration
        .cells
        .iter()
        .filter(|c| c.natural.counts.passed() < c.natural.runs)
        .collect();
    let fixed = failing.iter().filter(|c| c.fix.is_some()).count();
    let none: Vec<(String, String)> = failing
        .iter()
        .filter(|c| c.fix.is_none())
        .map(|c| {
            assert!(
                c.no_fix
                    .as_deref()
                    .unwrap_or("")
                    .contains("no change of exit order"),
                "a failing cell with neither a fix nor why: {c:#?}"
            );
            (c.natural.case.clone(), c.natural.runtime.clone())
        })
        .collect();
    assert_eq!(failing.len(), 14, "{stderr}");
    assert_eq!((fixed, none.len()), (7, 7), "{none:?}\n{stderr}");
    let orders = [
        "teardown-before-driver",
        "cleanup-first",
        "linked",
        "module",
        "link-order",
    ];
    let mut tried: Vec<String> = orders.iter().map(|o| o.to_string()).collect();
    for a in orders {
        for b in orders.iter().filter(|b| **b != a) {
            tried.push(format!("{a},{b}"));
        }
    }
    let mut runtimes: Vec<&str> = none.iter().map(|(_, r)| r.as_str()).collect();
    runtimes.sort_unstable();
    runtimes.dedup();
    for (i, order) in tried.iter().enumerate() {
        let file = format!("order-{i}.json");
        let mut args = Args::run()
            .opt("--emulate", "tegra")
            .opt("--exit-order", order)
            .runs(1)
            .json(&file);
        for r in &runtimes {
            args = args.runtime(r);
        }
        let (_, results) = sb.gate(&args, &file);
        for (case, runtime) in &none {
            let cell = cell_of(&results, case, runtime);
            assert_eq!(
                cell.counts.passed(),
                0,
                "--exit-order {order} passes {case} × {runtime}, of which explore said no \
                 order helps: {cell:#?}"
            );
        }
    }
}
