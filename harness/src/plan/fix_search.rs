//! Which changes of exit order to try on a failing exit, smallest first: a pure function of the
//! exit the natural run took (its handlers pending at exit, who registered each and when), with
//! no run and no file. `explore`'s engine runs what this proposes and hands back verdicts.
//!
//! Each candidate is a sequence of the source changes and deployments `--exit-order` names
//! ([`Order::FIXES`]), or one exit handler run before another handler of the same object (the
//! program registering its two `atexit` handlers the other way round: `run:A:before:B`),
//! simulated on the observed exit with the very rules the preloaded library applies
//! (`vkexit_evidence::exit_order`). A candidate is kept only when every order in it
//! moves a handler there (one that moves nothing adds nothing to a smaller candidate), and
//! only once for each exit order it gives (two sequences that end in the same order are one
//! test). They come in the order a developer would make the change: one order before two, and
//! among those, fewer handlers moved first.

use super::exit_order::{ExitOrder, Handler, Order, Step};
use std::collections::HashSet;
use vkexit_evidence::exit_order::{symbol_hash, Class, Entry, Phase};

/// The exit a run took: the handlers pending when exit began, in registration order (the
/// last runs first), as its main process's timeline names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ObservedExit {
    pub(crate) handlers: Vec<Entry>,
    /// The symbol of each handler that has one, by id.
    pub(crate) symbols: Vec<(u64, String)>,
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
        ObservedExit { handlers, symbols }
    }
}

/// One change to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The orders, applied in turn, as `--exit-order` takes them.
    pub(crate) order: ExitOrder,
    /// How many handlers it moves on the observed exit.
    pub(crate) moved: usize,
}

/// The candidates for `exit`, smallest first.
pub(crate) fn candidates(exit: &ObservedExit) -> Vec<Candidate> {
    let mut sequences: Vec<Vec<Step>> =
        Order::FIXES.iter().map(|&o| vec![Step::Order(o)]).collect();
    sequences.extend(swaps(exit).into_iter().map(|s| vec![s]));
    for &a in &Order::FIXES {
        for &b in Order::FIXES.iter().filter(|&&b| b != a) {
            sequences.push(vec![Step::Order(a), Step::Order(b)]);
        }
    }
    let natural: Vec<u64> = exit.handlers.iter().map(|e| e.id).collect();
    let mut seen: HashSet<Vec<u64>> = HashSet::from([natural]);
    let mut out: Vec<Candidate> = Vec::new();
    for sequence in sequences {
        let Some((order, moved)) = simulate(exit, &sequence) else {
            continue;
        };
        if seen.insert(order) {
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

/// The registration order `sequence` gives `exit` and how many handlers it moved, or `None`
/// when one of its steps moves nothing there.
fn simulate(exit: &ObservedExit, sequence: &[Step]) -> Option<(Vec<u64>, usize)> {
    let mut entries = exit.handlers.clone();
    let mut moved: HashSet<u64> = HashSet::new();
    for step in sequence {
        let ids = step.rule()?.apply(&mut entries);
        if ids.is_empty() {
            return None;
        }
        moved.extend(ids);
    }
    Some((entries.iter().map(|e| e.id).collect(), moved.len()))
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
        let (order, _) = simulate(
            &seed(),
            &steps(&[Order::TeardownBeforeDriver, Order::CleanupFirst]),
        )
        .unwrap();
        assert_eq!(order, [3, 2, 1]);
        // Alone, the cleanup first still leaves the teardown after the driver's handler.
        let (alone, _) = simulate(&seed(), &steps(&[Order::CleanupFirst])).unwrap();
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
            let (order, _) = simulate(&seed(), &c.order.0).unwrap();
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
        let (order, moved) = simulate(
            &exit,
            &[ExitOrder::parse("run:join_workers:before:vk_shutdown")
                .unwrap()
                .0[0]
                .clone()],
        )
        .unwrap();
        assert_eq!((order, moved), (vec![1, 3, 2, 4], 1));
    }
}
