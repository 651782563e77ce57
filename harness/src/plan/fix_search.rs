//! Which changes of exit order to try on a failing exit, smallest first: a pure function of the
//! exit the natural run took (its handlers pending at exit, who registered each and when), with
//! no run and no file. `explore`'s engine runs what this proposes and hands back verdicts.
//!
//! Each candidate is a sequence of the source changes and deployments `--exit-order` names
//! ([`Order::FIXES`]), one exit handler run before another handler of the same object (the
//! program registering its two `atexit` handlers the other way round: `run:A:before:B`), or
//! one library's destructors run before another's where neither needs the other (the two
//! linked the other way round: `destructors:A:before:B`), simulated on the observed exit with the very rules the preloaded library applies
//! (`vkexit_evidence::exit_order`). A candidate is kept only when every order in it
//! moves a handler there (one that moves nothing adds nothing to a smaller candidate), and
//! only once for each exit order it gives (two sequences that end in the same order are one
//! test). They come in the order a developer would make the change: one order before two, and
//! among those, fewer handlers moved first.

use super::exit_order::{ExitOrder, Handler, Order, Step};
use std::collections::HashSet;
use vkexit_evidence::exit_order::{symbol_hash, Class, DestructorsBefore, Entry, Phase};

/// The exit a run took: the handlers pending when exit began, in registration order (the
/// last runs first), and the objects whose library destructors the loader ran after them, in
/// the order it ran them, as its main process's timeline names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ObservedExit {
    pub(crate) handlers: Vec<Entry>,
    /// The symbol of each handler that has one, by id.
    pub(crate) symbols: Vec<(u64, String)>,
    pub(crate) libraries: Vec<Library>,
}

/// An object whose library destructors ran in the loader's finalization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Library {
    /// Its file name, as `destructors:` steps name it.
    pub(crate) file: String,
    pub(crate) class: Class,
    /// The file names of the libraries it needs (`DT_NEEDED`), as far as they were read.
    pub(crate) needs: Vec<String>,
}

impl Library {
    /// Whether `self` needs `other`, directly or through libraries of `all`.
    fn needs(&self, other: &str, all: &[Library]) -> bool {
        let mut seen: Vec<&str> = Vec::new();
        let mut open: Vec<&str> = self.needs.iter().map(String::as_str).collect();
        while let Some(next) = open.pop() {
            if next == other {
                return true;
            }
            if seen.contains(&next) {
                continue;
            }
            seen.push(next);
            if let Some(l) = all.iter().find(|l| l.file == next) {
                open.extend(l.needs.iter().map(String::as_str));
            }
        }
        false
    }
}

/// A handler of the observed exit, as its registration record gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registered {
    pub(crate) id: u64,
    /// `app`, `runtime`, `vulkan`, `system`; `None` (an older timeline): never moved.
    pub(crate) class: Option<String>,
    /// `before-main`, `in-dlopen`, `running`.
    pub(crate) phase: Option<String>,
    /// A C++ static destructor.
    pub(crate) destructor: bool,
    /// Its symbol (`atexit` handlers the symbol table names).
    pub(crate) symbol: Option<String>,
    /// The object that registered it.
    pub(crate) registrant: Option<String>,
}

impl ObservedExit {
    /// The exit of these registrations (in any order), handlers with the ids in `ran` (run
    /// before exit began, inside a `dlclose`) left out.
    pub(crate) fn of(registrations: &[Registered], ran: &HashSet<u64>) -> ObservedExit {
        let mut objects: Vec<&str> = Vec::new();
        let mut handlers: Vec<Entry> = registrations
            .iter()
            .filter(|r| !ran.contains(&r.id))
            .map(|r| {
                let object = r.registrant.as_deref().unwrap_or("");
                let group = match objects.iter().position(|o| *o == object) {
                    Some(at) => at,
                    None => {
                        objects.push(object);
                        objects.len() - 1
                    }
                };
                Entry {
                    id: r.id,
                    class: r
                        .class
                        .as_deref()
                        .and_then(Class::from_name)
                        .unwrap_or(Class::System),
                    phase: r
                        .phase
                        .as_deref()
                        .and_then(Phase::from_name)
                        .unwrap_or(Phase::Running),
                    destructor: r.destructor,
                    group: group + 1,
                    symbol: r.symbol.as_deref().map_or(0, |s| symbol_hash(s.as_bytes())),
                }
            })
            .collect();
        handlers.sort_by_key(|e| e.id);
        let symbols = registrations
            .iter()
            .filter(|r| !ran.contains(&r.id))
            .filter_map(|r| Some((r.id, r.symbol.clone()?)))
            .collect();
        ObservedExit {
            handlers,
            symbols,
            libraries: Vec::new(),
        }
    }

    /// The same exit, with the objects whose library destructors the loader ran, in order.
    pub(crate) fn with_libraries(mut self, libraries: Vec<Library>) -> ObservedExit {
        self.libraries = libraries;
        self
    }

    /// The runtime libraries whose destructors a link order could put in another order: two
    /// of them, neither needing the other, in the order they ran, as pairs (earlier, later).
    fn independent_libraries(&self) -> Vec<(&Library, &Library)> {
        let movable: Vec<&Library> = self
            .libraries
            .iter()
            .filter(|l| l.class == Class::Runtime)
            .collect();
        let mut out = Vec::new();
        for (i, earlier) in movable.iter().enumerate() {
            for later in &movable[i + 1..] {
                let tied = earlier.needs(&later.file, &self.libraries)
                    || later.needs(&earlier.file, &self.libraries);
                if !tied {
                    out.push((*earlier, *later));
                }
            }
        }
        out
    }
}

/// The deployment where the runtime libraries are linked in the reverse order: their library
/// destructors run in the reverse of the observed order, as far as what each needs allows
/// (a library's destructors always run before those of the libraries it needs). `None` when
/// no two of them can change places.
pub(crate) fn relinked_libraries(exit: &ObservedExit) -> Option<ExitOrder> {
    let all = &exit.libraries;
    let mut left: Vec<&Library> = all.iter().filter(|l| l.class == Class::Runtime).collect();
    if exit.independent_libraries().is_empty() {
        return None;
    }
    // The reverse order, one library at a time: the latest whose dependents have all run.
    let mut reversed: Vec<&Library> = Vec::new();
    while !left.is_empty() {
        let ready = left
            .iter()
            .rposition(|l| {
                !left
                    .iter()
                    .any(|o| o.file != l.file && o.needs(&l.file, all))
            })
            .unwrap_or(left.len() - 1);
        reversed.push(left.remove(ready));
    }
    let steps = reversed
        .windows(2)
        .map(|w| Step::Destructors {
            first: w[0].file.clone(),
            then: w[1].file.clone(),
        })
        .collect();
    let order = minimal(exit, steps);
    (!order.0.is_empty()).then_some(order)
}

/// `steps` less those that change nothing of the order they give `exit` together.
fn minimal(exit: &ObservedExit, steps: Vec<Step>) -> ExitOrder {
    let goal = simulate_loose(exit, &steps);
    let mut kept = steps;
    let mut i = 0;
    while i < kept.len() {
        let mut fewer = kept.clone();
        fewer.remove(i);
        match simulate_loose(exit, &fewer) == goal {
            true => kept = fewer,
            false => i += 1,
        }
    }
    ExitOrder(kept)
}

/// One change to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The orders, applied in turn, as `--exit-order` takes them.
    pub(crate) order: ExitOrder,
    /// How many handlers (and objects' library destructors) it moves on the observed exit.
    pub(crate) moved: usize,
}

/// The candidates for `exit`, smallest first.
pub(crate) fn candidates(exit: &ObservedExit) -> Vec<Candidate> {
    let mut sequences: Vec<Vec<Step>> =
        Order::FIXES.iter().map(|&o| vec![Step::Order(o)]).collect();
    sequences.extend(swaps(exit).into_iter().map(|s| vec![s]));
    sequences.extend(
        exit.independent_libraries()
            .into_iter()
            .map(|(earlier, later)| {
                vec![Step::Destructors {
                    first: later.file.clone(),
                    then: earlier.file.clone(),
                }]
            }),
    );
    for &a in &Order::FIXES {
        for &b in Order::FIXES.iter().filter(|&&b| b != a) {
            sequences.push(vec![Step::Order(a), Step::Order(b)]);
        }
    }
    let natural = simulate_loose(exit, &[]);
    let mut seen: HashSet<(Vec<u64>, Vec<u64>)> = HashSet::from([natural]);
    let mut out: Vec<Candidate> = Vec::new();
    for sequence in sequences {
        let Some((order, destructors, moved)) = simulate(exit, &sequence) else {
            continue;
        };
        if seen.insert((order, destructors)) {
            out.push(Candidate {
                order: ExitOrder(sequence),
                moved,
            });
        }
    }
    // Stable: among equals, the order above (whole orders in the order of `Order::FIXES`, the
    // developer's first guess, then single handlers) stays.
    out.sort_by_key(|c| (c.order.0.len(), c.moved));
    out
}

/// The `atexit` handlers one object registered while the program ran, each pair as the other
/// registration order would run them: the earlier registered first. Handlers are named by
/// symbol, or by number where they have none; at most [`MAX_SWAPS`].
fn swaps(exit: &ObservedExit) -> Vec<Step> {
    let movable: Vec<&Entry> = exit
        .handlers
        .iter()
        .filter(|e| matches!(e.class, Class::App | Class::Runtime))
        .filter(|e| !e.destructor && e.phase == Phase::Running)
        .collect();
    let name = |e: &Entry| match exit.symbols.iter().find(|(id, _)| *id == e.id) {
        Some((_, symbol)) => Handler::Symbol(symbol.clone()),
        None => Handler::Id(e.id),
    };
    let mut out = Vec::new();
    for (i, earlier) in movable.iter().enumerate() {
        for later in movable[i + 1..].iter().filter(|l| l.group == earlier.group) {
            out.push(Step::Before {
                first: name(earlier),
                then: name(later),
            });
        }
    }
    out.truncate(MAX_SWAPS);
    out
}

/// How many single-handler moves one exit proposes at most (its first handlers' pairs).
const MAX_SWAPS: usize = 16;

/// The registration order `sequence` gives `exit`'s handlers, the order it gives its
/// library destructors (by file name's hash), and how many handlers and objects it moved; `None`
/// when one of its steps moves nothing there.
fn simulate(exit: &ObservedExit, sequence: &[Step]) -> Option<(Vec<u64>, Vec<u64>, usize)> {
    let mut entries = exit.handlers.clone();
    let mut moved: HashSet<u64> = HashSet::new();
    let natural = library_files(exit);
    let mut destructors: Vec<DestructorsBefore> = Vec::new();
    let mut order = natural.clone();
    for step in sequence {
        let rule = step.rule()?;
        if let vkexit_evidence::exit_order::Step::Destructors(d) = rule {
            destructors.push(d);
            let next = DestructorsBefore::simulate(&natural, &destructors);
            if next == order {
                return None;
            }
            order = next;
            continue;
        }
        let ids = rule.apply(&mut entries);
        if ids.is_empty() {
            return None;
        }
        moved.extend(ids);
    }
    // Each such step moves one object's destructors.
    let objects_moved = destructors.len();
    let ids = entries.iter().map(|e| e.id).collect();
    Some((ids, order, moved.len() + objects_moved))
}

/// The orders `sequence` gives, steps that move nothing included.
fn simulate_loose(exit: &ObservedExit, sequence: &[Step]) -> (Vec<u64>, Vec<u64>) {
    let mut entries = exit.handlers.clone();
    let natural = library_files(exit);
    let mut destructors = Vec::new();
    for rule in sequence.iter().filter_map(Step::rule) {
        match rule {
            vkexit_evidence::exit_order::Step::Destructors(d) => destructors.push(d),
            other => {
                other.apply(&mut entries);
            }
        }
    }
    let order = DestructorsBefore::simulate(&natural, &destructors);
    (entries.iter().map(|e| e.id).collect(), order)
}

fn library_files(exit: &ObservedExit) -> Vec<u64> {
    exit.libraries
        .iter()
        .map(|l| symbol_hash(l.file.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(id: u64, class: &str, phase: &str, destructor: bool, object: &str) -> Registered {
        Registered {
            id,
            class: Some(class.into()),
            phase: Some(phase.into()),
            destructor,
            symbol: None,
            registrant: Some(object.into()),
        }
    }

    fn steps(orders: &[Order]) -> Vec<Step> {
        orders.iter().map(|&o| Step::Order(o)).collect()
    }

    fn names(candidates: &[Candidate]) -> Vec<String> {
        candidates.iter().map(|c| c.order.to_string()).collect()
    }

    /// The seed's `handler-before-load × static-destructor` under the Tegra exit: the
    /// application's cleanup registered before the runtime loaded, the runtime's static
    /// destructor when it loaded, then the driver's handler at vkCreateInstance.
    fn seed() -> ObservedExit {
        ObservedExit::of(
            &[
                reg(1, "app", "running", false, "/bin/handler-before-load"),
                reg(2, "runtime", "in-dlopen", true, "/lib/libvkexit_refrt.so"),
                reg(3, "vulkan", "running", false, "/lib/libVkLayer_tegra.so"),
            ],
            &HashSet::new(),
        )
    }

    #[test]
    fn the_seeds_two_step_fix_is_a_candidate_after_the_single_moves() {
        let found = candidates(&seed());
        let names = names(&found);
        // One move first: each moves one handler.
        assert_eq!(
            names[..2],
            ["teardown-before-driver", "cleanup-first"],
            "{names:?}"
        );
        // Then the seed's history: the teardown after vkCreateInstance, then the cleanup
        // registered after the runtime is initialised.
        let two = names
            .iter()
            .position(|n| n == "teardown-before-driver,cleanup-first")
            .unwrap_or_else(|| panic!("{names:?}"));
        assert!(two >= 2, "{names:?}");
        assert_eq!(found[two].moved, 2);
        // Simulated, it is the order the fix runs: the cleanup, then the teardown, then the
        // driver's (registration order: the last runs first).
        let (order, _, _) = simulate(
            &seed(),
            &steps(&[Order::TeardownBeforeDriver, Order::CleanupFirst]),
        )
        .unwrap();
        assert_eq!(order, [3, 2, 1]);
        // Alone, the cleanup first still leaves the teardown after the driver's handler.
        let (alone, _, _) = simulate(&seed(), &steps(&[Order::CleanupFirst])).unwrap();
        assert_eq!(alone, [2, 3, 1]);
    }

    #[test]
    fn a_sequence_whose_order_moves_nothing_or_repeats_an_order_is_left_out() {
        let found = names(&candidates(&seed()));
        // `module` moves nothing here (the runtime's destructor is after the cleanup already).
        assert!(
            !found.iter().any(|n| n.split(',').any(|o| o == "module")),
            "{found:?}"
        );
        // Each resulting order is tried once.
        let mut orders: Vec<Vec<u64>> = Vec::new();
        for c in candidates(&seed()) {
            let (order, _, _) = simulate(&seed(), &c.order.0).unwrap();
            assert!(!orders.contains(&order), "{found:?}");
            orders.push(order);
        }
    }

    #[test]
    fn an_exit_with_nothing_to_move_has_no_candidate() {
        let only_system = ObservedExit::of(
            &[
                reg(1, "system", "before-main", false, "/lib/libc.so.6"),
                reg(2, "vulkan", "running", false, "/lib/libvulkan.so.1"),
            ],
            &HashSet::new(),
        );
        assert!(candidates(&only_system).is_empty());
        assert!(candidates(&ObservedExit::default()).is_empty());
    }

    #[test]
    fn handlers_that_ran_before_exit_and_unknown_classes_are_not_moved() {
        let ran = HashSet::from([2]);
        let exit = ObservedExit::of(
            &[
                reg(1, "app", "running", false, "/bin/p"),
                reg(2, "runtime", "in-dlopen", true, "/lib/librt.so"),
                Registered {
                    class: None,
                    ..reg(3, "", "", false, "/lib/x.so")
                },
            ],
            &ran,
        );
        assert_eq!(exit.handlers.len(), 2);
        assert_eq!(exit.handlers[1].class, Class::System);
        // Only the application's handler moves (past the unknown one), nothing of the runtime's
        // that ran already.
        let found = candidates(&exit);
        assert_eq!(names(&found), ["cleanup-first"]);
        assert_eq!(found[0].moved, 1);
    }

    #[test]
    fn the_smaller_change_comes_first() {
        // Two runtime objects' destructors before the driver's handler: teardown-before-driver
        // moves both, link-order swaps them; the app's cleanup is registered last already.
        let exit = ObservedExit::of(
            &[
                reg(1, "runtime", "before-main", true, "/lib/liba.so"),
                reg(2, "runtime", "before-main", true, "/lib/libb.so"),
                reg(3, "vulkan", "running", false, "/lib/libdriver.so"),
                reg(4, "app", "running", false, "/bin/p"),
            ],
            &HashSet::new(),
        );
        let found = candidates(&exit);
        let moved: Vec<usize> = found.iter().map(|c| c.moved).collect();
        let singles = found.iter().filter(|c| c.order.0.len() == 1).count();
        assert!(singles >= 2, "{:?}", names(&found));
        assert!(
            moved[..singles].windows(2).all(|w| w[0] <= w[1]),
            "{moved:?}"
        );
        assert!(found[singles..].iter().all(|c| c.order.0.len() == 2));
    }

    #[test]
    fn two_handlers_of_one_library_are_swapped_by_symbol() {
        // A runtime library registers join_workers, then vk_shutdown, while the program runs:
        // vk_shutdown runs first. No whole order moves a runtime's run-time handlers.
        let named = |id, symbol: &str| Registered {
            symbol: Some(symbol.into()),
            ..reg(id, "runtime", "running", false, "/lib/libworkers.so")
        };
        let exit = ObservedExit::of(
            &[
                reg(1, "vulkan", "running", false, "/lib/libvulkan_lvp.so"),
                named(2, "join_workers"),
                named(3, "vk_shutdown"),
                reg(4, "app", "running", false, "/bin/p"),
            ],
            &HashSet::new(),
        );
        let found = names(&candidates(&exit));
        assert!(
            found.contains(&"run:join_workers:before:vk_shutdown".to_string()),
            "{found:?}"
        );
        // Handlers of different objects are not paired; the app's alone has no pair.
        assert!(!found.iter().any(|n| n.contains("#4")), "{found:?}");
        let (order, _, moved) = simulate(
            &exit,
            &[ExitOrder::parse("run:join_workers:before:vk_shutdown")
                .unwrap()
                .0[0]
                .clone()],
        )
        .unwrap();
        assert_eq!((order, moved), (vec![1, 3, 2, 4], 1));
    }

    fn library(file: &str, class: Class, needs: &[&str]) -> Library {
        Library {
            file: file.into(),
            class,
            needs: needs.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// The program's destructors, then libctx's (it destroys the device), then libpool's (it
    /// frees a fence of that device): linked `-lctx -lpool`.
    fn destructors_in_link_order(pool_needs_ctx: bool) -> ObservedExit {
        let needs: &[&str] = if pool_needs_ctx { &["libctx.so"] } else { &[] };
        ObservedExit::default().with_libraries(vec![
            library("app", Class::App, &["libctx.so", "libpool.so"]),
            library("libctx.so", Class::Runtime, &["libvulkan.so.1"]),
            library("libpool.so", Class::Runtime, needs),
            library("libvulkan.so.1", Class::Vulkan, &[]),
            library("libgcc_s.so.1", Class::System, &[]),
        ])
    }

    #[test]
    fn one_librarys_destructors_move_before_anothers_that_it_does_not_need() {
        let found = candidates(&destructors_in_link_order(false));
        assert_eq!(
            names(&found),
            ["destructors:libpool.so:before:libctx.so"],
            "nothing else moves: no exit handler is pending"
        );
        assert_eq!(found[0].moved, 1);
        let (_, order, _) = simulate(&destructors_in_link_order(false), &found[0].order.0).unwrap();
        let h = |f: &str| symbol_hash(f.as_bytes());
        assert_eq!(
            order,
            [
                h("app"),
                h("libpool.so"),
                h("libctx.so"),
                h("libvulkan.so.1"),
                h("libgcc_s.so.1")
            ]
        );
        // The link order is that deployment too.
        assert_eq!(
            relinked_libraries(&destructors_in_link_order(false)).map(|o| o.to_string()),
            Some("destructors:libpool.so:before:libctx.so".into())
        );
    }

    #[test]
    fn a_library_that_needs_another_keeps_its_destructors_first() {
        // libpool needs libctx: the loader runs libpool's first whatever the link order, and
        // running libctx's before them is no build of this program.
        let tied = ObservedExit::default().with_libraries(vec![
            library("libpool.so", Class::Runtime, &["libctx.so"]),
            library("libctx.so", Class::Runtime, &[]),
        ]);
        assert!(candidates(&tied).is_empty());
        assert_eq!(relinked_libraries(&tied), None);
        // Through a third library too.
        let through = ObservedExit::default().with_libraries(vec![
            library("libpool.so", Class::Runtime, &["libmid.so"]),
            library("libmid.so", Class::System, &["libctx.so"]),
            library("libctx.so", Class::Runtime, &[]),
        ]);
        assert!(candidates(&through).is_empty());
        // One runtime library alone, or the program and the system's: nothing to move.
        let alone = ObservedExit::default().with_libraries(vec![
            library("app", Class::App, &[]),
            library("libvkexit_refrt.so", Class::Runtime, &[]),
            library("libgcc_s.so.1", Class::System, &[]),
        ]);
        assert!(candidates(&alone).is_empty());
        assert_eq!(relinked_libraries(&alone), None);
    }

    #[test]
    fn reversing_three_libraries_keeps_what_each_needs() {
        // a, b, c ran in that order; b needs c, so c's destructors stay after b's.
        let exit = ObservedExit::default().with_libraries(vec![
            library("liba.so", Class::Runtime, &[]),
            library("libb.so", Class::Runtime, &["libc3.so"]),
            library("libc3.so", Class::Runtime, &[]),
        ]);
        let order = relinked_libraries(&exit).unwrap();
        // A chain: each step alone may leave the order as it was.
        let (_, ran) = simulate_loose(&exit, &order.0);
        let h = |f: &str| symbol_hash(f.as_bytes());
        assert_eq!(ran, [h("libb.so"), h("libc3.so"), h("liba.so")], "{order}");
    }
}
