//! The exit orders a run can take instead of its own (`--exit-order`): each one the order
//! another build or deployment of the same program gives its exit handlers. The preloaded
//! library carries them out (diagnostics/preload, `exit_order.rs`); these are their names, the
//! real-world condition each stands for, and the advice each gives when it turns a failing
//! exit into a clean one.

use std::fmt;

/// One exit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Order {
    Module,
    Linked,
    Relinked,
    TeardownBeforeDriver,
    CleanupFirst,
    /// The dynamic loader's sort of glibc 2.31 (`GLIBC_TUNABLES=glibc.rtld.dynamic_sort=1`):
    /// applied by the run's environment, not by the preload.
    OlderGlibc,
}

impl Order {
    /// Every order, as `--exit-order` names them.
    pub(crate) const ALL: [Order; 6] = [
        Order::Module,
        Order::Linked,
        Order::Relinked,
        Order::TeardownBeforeDriver,
        Order::CleanupFirst,
        Order::OlderGlibc,
    ];

    /// The orders that stand for another build or deployment of an unchanged program: what
    /// `explore` perturbs a passing exit with. The others are changes to the program's source,
    /// tried as fixes.
    pub(crate) const DEPLOYMENTS: [Order; 4] = [
        Order::Module,
        Order::Linked,
        Order::Relinked,
        Order::OlderGlibc,
    ];

    /// The environment that makes the dynamic loader sort libraries as glibc 2.31 did, for a
    /// run whose exit order (as `--exit-order` names it) asks for it; glibc before 2.35 has
    /// that sort only and ignores the tunable.
    pub(crate) fn loader_tunable(exit_order: &str) -> Option<&'static str> {
        exit_order
            .split(',')
            .any(|s| s.trim() == Order::OlderGlibc.name())
            .then_some("glibc.rtld.dynamic_sort=1")
    }

    /// The changes tried, smallest first, when the natural exit fails.
    pub(crate) const FIXES: [Order; 5] = [
        Order::TeardownBeforeDriver,
        Order::CleanupFirst,
        Order::Linked,
        Order::Module,
        Order::Relinked,
    ];

    /// The preload's rule for this order (its name there too), or none for an order the run's
    /// environment applies.
    pub(crate) fn preload(self) -> Option<vkexit_evidence::exit_order::Order> {
        use vkexit_evidence::exit_order::Order as Rule;
        match self {
            Order::Module => Some(Rule::Module),
            Order::Linked => Some(Rule::Linked),
            Order::Relinked => Some(Rule::Relinked),
            Order::TeardownBeforeDriver => Some(Rule::TeardownBeforeDriver),
            Order::CleanupFirst => Some(Rule::CleanupFirst),
            Order::OlderGlibc => None,
        }
    }

    /// Its name, as `--exit-order` gives it: the preload's for the orders the preload applies.
    pub(crate) fn name(self) -> &'static str {
        match self.preload() {
            Some(rule) => rule.name(),
            None => "glibc-2.31-library-order",
        }
    }

    /// The real-world condition the order stands for.
    pub(crate) fn condition(self) -> &'static str {
        match self {
            Order::Module => {
                "the runtime libraries loaded with dlopen after the application registered its \
                 exit handlers (a GGML_BACKEND_DL build, a plugin, a Python extension module)"
            }
            Order::Linked => {
                "the runtime libraries linked into the program (loaded before main), their \
                 load-time exit handlers registered before the application's"
            }
            Order::Relinked => {
                "the static destructors of the program and its runtime libraries in the reverse \
                 order across objects (another link or load order)"
            }
            Order::TeardownBeforeDriver => {
                "the runtime libraries' load-time teardown registered with atexit after \
                 vkCreateInstance, so that it runs before the driver's exit handlers"
            }
            Order::CleanupFirst => {
                "the application's exit handlers registered after the runtime was initialised, \
                 so that they run before the runtime's teardown and the driver's exit handlers"
            }
            Order::OlderGlibc => {
                "glibc 2.31's dynamic loader (Ubuntu 20.04, L4T 35 on a Jetson): it sorts \
                 libraries that do not need each other in another order, so their constructors \
                 and library destructors run in another order (GLIBC_TUNABLES=\
                 glibc.rtld.dynamic_sort=1 in newer glibc)"
            }
        }
    }

    /// What to change in the source, when this order made a failing exit clean.
    pub(crate) fn advice(self) -> &'static str {
        match self {
            Order::TeardownBeforeDriver => {
                "register the runtime's teardown with atexit after vkCreateInstance (its static \
                 destructor, registered when the library loaded, runs after the driver's exit \
                 handlers)"
            }
            Order::CleanupFirst => {
                "register the application's cleanup after the runtime is initialised (it was \
                 registered before, so it ran after the runtime's teardown)"
            }
            Order::Linked => {
                "load the runtime before registering the application's cleanup, or link it in \
                 (its load-time teardown then runs after the cleanup)"
            }
            Order::Module => {
                "register the application's cleanup before loading the runtime, or load the \
                 runtime as a module after it"
            }
            Order::Relinked => {
                "make the static destructors independent of link order (or link the objects in \
                 the reverse order)"
            }
            Order::OlderGlibc => {
                "make each library's destructor independent of the order the loader picks \
                 among libraries that do not need each other (or make one need the other)"
            }
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Order> {
        Order::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// A handler named in a step: by its symbol, or `#ID` (its number in the main process) where
/// it has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Handler {
    Symbol(String),
    Id(u64),
}

impl fmt::Display for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Handler::Symbol(s) => f.write_str(s),
            Handler::Id(id) => write!(f, "#{id}"),
        }
    }
}

impl Handler {
    fn parse(text: &str) -> Option<Handler> {
        match text.strip_prefix('#') {
            Some(id) => id.parse().ok().map(Handler::Id),
            None if text.is_empty() || text.contains([',', ':', ' ']) => None,
            None => Some(Handler::Symbol(text.to_string())),
        }
    }

    /// As the preload names it (`vkexit_evidence::exit_order::Named`).
    pub(crate) fn named(&self) -> vkexit_evidence::exit_order::Named {
        use vkexit_evidence::exit_order::{symbol_hash, Named};
        match self {
            Handler::Symbol(s) => Named::Symbol(symbol_hash(s.as_bytes())),
            Handler::Id(id) => Named::Id(*id),
        }
    }
}

/// One step of an exit order: a whole order, or one handler run before another
/// (`run:FIRST:before:THEN`: the program registering its two handlers the other way round).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    Order(Order),
    Before {
        first: Handler,
        then: Handler,
    },
    /// `destructors:FIRST:before:THEN`: one object's library destructors (`.fini_array`)
    /// before another's, each object by its file name.
    Destructors {
        first: String,
        then: String,
    },
}

impl Step {
    fn parse(text: &str) -> Option<Step> {
        if let Some(order) = Order::parse(text) {
            return Some(Step::Order(order));
        }
        if let Some(objects) = text.strip_prefix("destructors:") {
            let (first, then) = objects.split_once(":before:")?;
            let file = |f: &str| {
                (!f.is_empty() && !f.contains([',', ':', ' ', '/'])).then(|| f.to_string())
            };
            return Some(Step::Destructors {
                first: file(first)?,
                then: file(then)?,
            });
        }
        let (first, then) = text.strip_prefix("run:")?.split_once(":before:")?;
        Some(Step::Before {
            first: Handler::parse(first)?,
            then: Handler::parse(then)?,
        })
    }

    /// What to change in the source, when this step made a failing exit clean.
    pub(crate) fn advice(&self) -> String {
        self.advice_at(None, None)
    }

    /// The same, with where in the source each of the two it names is (`workers.c:44`, or for
    /// a library, its destructor and its line), where that is known.
    pub(crate) fn advice_at(&self, first_at: Option<&str>, then_at: Option<&str>) -> String {
        match self {
            Step::Order(o) => o.advice().to_string(),
            Step::Before { first, then } => {
                let places = match (first_at, then_at) {
                    (None, None) => String::new(),
                    (a, b) => format!(" ({}, {})", a.unwrap_or("?"), b.unwrap_or("?")),
                };
                format!(
                    "register `{first}` after `{then}`{places} (exit handlers run last registered \
                     first: `{then}` ran before `{first}`)"
                )
            }
            Step::Destructors { first, then } => {
                let at = |place: Option<&str>| place.map_or(String::new(), |p| format!(" ({p})"));
                format!(
                    "make {first}'s library destructors{} run before {then}'s{}: link {first} \
                     before {then}, or make {first} depend on {then} (the loader runs a \
                     library's destructors before those of the libraries it needs)",
                    at(first_at),
                    at(then_at)
                )
            }
        }
    }

    /// As the preload applies it.
    pub(crate) fn rule(&self) -> Option<vkexit_evidence::exit_order::Step> {
        use vkexit_evidence::exit_order as rules;
        Some(match self {
            Step::Order(o) => rules::Step::Order(o.preload()?),
            Step::Before { first, then } => rules::Step::Before(rules::Before {
                first: first.named(),
                then: then.named(),
            }),
            Step::Destructors { first, then } => {
                rules::Step::Destructors(rules::DestructorsBefore {
                    first: rules::symbol_hash(first.as_bytes()),
                    then: rules::symbol_hash(then.as_bytes()),
                })
            }
        })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Order(o) => f.write_str(o.name()),
            Step::Before { first, then } => write!(f, "run:{first}:before:{then}"),
            Step::Destructors { first, then } => write!(f, "destructors:{first}:before:{then}"),
        }
    }
}

/// The steps of one `--exit-order` value, applied in turn.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ExitOrder(pub(crate) Vec<Step>);

/// An `--exit-order` value (or a matrix's `exit_order`) that is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadExitOrder {
    /// A name of no order.
    #[error(
        "`{0}` is no exit order; expected one or more of {known}, run:FIRST:before:THEN \
         (two exit handlers by symbol or #ID), or destructors:FIRST:before:THEN (two objects' \
         library destructors, by file name), comma-separated",
        known = Order::ALL.map(Order::name).join(", ")
    )]
    Unknown(String),
    /// An order named twice.
    #[error("`{0}` is given twice")]
    Twice(String),
}

impl ExitOrder {
    /// Reads `module,linked` or `run:join_workers:before:vk_shutdown`: every step known, none
    /// twice, at least one.
    pub(crate) fn parse(text: &str) -> Result<ExitOrder, BadExitOrder> {
        let mut steps = Vec::new();
        for name in text.split(',').map(str::trim) {
            let Some(step) = Step::parse(name) else {
                return Err(BadExitOrder::Unknown(name.to_string()));
            };
            if steps.contains(&step) {
                return Err(BadExitOrder::Twice(name.to_string()));
            }
            steps.push(step);
        }
        Ok(ExitOrder(steps))
    }

    /// The whole orders among its steps.
    pub(crate) fn orders(&self) -> Vec<Order> {
        self.0
            .iter()
            .filter_map(|s| match s {
                Step::Order(o) => Some(*o),
                Step::Before { .. } | Step::Destructors { .. } => None,
            })
            .collect()
    }

    /// One whole order.
    pub(crate) fn of(order: Order) -> ExitOrder {
        ExitOrder(vec![Step::Order(order)])
    }
}

impl fmt::Display for ExitOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(Step::to_string).collect();
        f.write_str(&names.join(","))
    }
}

impl std::str::FromStr for ExitOrder {
    type Err = BadExitOrder;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExitOrder::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_orders_are_read_by_name_and_said_back_the_same() {
        let order = ExitOrder::parse("module,linked").unwrap();
        assert_eq!(order.orders(), [Order::Module, Order::Linked]);
        assert_eq!(order.to_string(), "module,linked");
        let moved = ExitOrder::parse("cleanup-first,run:join_workers:before:#4").unwrap();
        assert_eq!(
            moved.0[1],
            Step::Before {
                first: Handler::Symbol("join_workers".into()),
                then: Handler::Id(4),
            }
        );
        assert_eq!(
            moved.to_string(),
            "cleanup-first,run:join_workers:before:#4"
        );
        assert_eq!(moved.orders(), [Order::CleanupFirst]);
        let libraries = ExitOrder::parse("destructors:libpool.so:before:libctx.so").unwrap();
        assert_eq!(
            libraries.0[0],
            Step::Destructors {
                first: "libpool.so".into(),
                then: "libctx.so".into(),
            }
        );
        assert_eq!(
            libraries.to_string(),
            "destructors:libpool.so:before:libctx.so"
        );
        for o in Order::ALL {
            assert_eq!(Order::parse(o.name()), Some(o));
        }
    }

    #[test]
    fn every_order_the_preload_applies_is_one_to_name_and_by_its_name() {
        use vkexit_evidence::exit_order::Order as Rule;
        for rule in Rule::ALL {
            let named: Vec<Order> = Order::ALL
                .into_iter()
                .filter(|o| o.preload() == Some(rule))
                .collect();
            assert_eq!(named.len(), 1, "{rule:?}: {named:?}");
            assert_eq!(named[0].name(), rule.name());
            assert_eq!(ExitOrder::parse(rule.name()).unwrap().orders(), named);
        }
        assert_eq!(Order::OlderGlibc.preload(), None);
        assert_eq!(
            Step::Order(Order::OlderGlibc).rule(),
            None,
            "the loader's sort is the environment's, not a preload rule"
        );
    }

    #[test]
    fn a_bad_exit_order_names_what_was_expected() {
        let err = ExitOrder::parse("module,static").unwrap_err().to_string();
        assert!(err.contains("`static` is no exit order"), "{err}");
        assert!(err.contains("module, linked, link-order"), "{err}");
        assert_eq!(
            ExitOrder::parse("linked,linked").unwrap_err().to_string(),
            "`linked` is given twice"
        );
        assert!(ExitOrder::parse("").is_err());
        for bad in [
            "run:a",
            "run::before:b",
            "run:#x:before:b",
            "run:a b:before:c",
            "destructors:a",
            "destructors::before:b",
            "destructors:/lib/a.so:before:b",
        ] {
            assert!(ExitOrder::parse(bad).is_err(), "{bad}");
        }
    }
}
