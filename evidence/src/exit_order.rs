//! Exit orders as the preloaded library applies them (`VKEXIT_EXIT_ORDER`), shared with the
//! harness, whose search for a fix simulates them on the exit a run took.
//!
//! glibc runs exit handlers last-in-first-out, so their order is the order of registration,
//! and that order is decided by the build: a runtime linked into the program registers its
//! load-time handlers (C++ static destructors, `atexit` in a constructor) before `main`; loaded
//! with `dlopen` as a module, after the handlers the application registered before loading it;
//! the static destructors of different objects follow link and load order. Each order here
//! moves whole groups of registrations to where such a build would have made them; none moves
//! the C library's, the dynamic loader's or the Vulkan stack's (loader, layers, drivers and
//! what they load) among themselves. Entries are in registration order: the last runs first.

/// Who registered a handler, as the orders move them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    /// The program's own executable.
    App = 0,
    /// Any other library: the runtime under test, a plugin, an extension module.
    Runtime = 1,
    /// The Vulkan loader, its layers, its drivers and what they loaded.
    Vulkan = 2,
    /// The C and C++ runtimes, the dynamic loader, this library: never moved.
    System = 3,
}

impl Class {
    /// Every class, in the order of their numbers.
    pub const ALL: [Class; 4] = [Class::App, Class::Runtime, Class::Vulkan, Class::System];

    /// The class of a number [`Class::App`]`as u8` gave; anything else is the system's.
    pub fn from_u8(v: u8) -> Class {
        match v {
            0 => Class::App,
            1 => Class::Runtime,
            2 => Class::Vulkan,
            _ => Class::System,
        }
    }

    /// Its name in the timeline (`class` of `handler-registered`).
    pub fn name(self) -> &'static str {
        match self {
            Class::App => "app",
            Class::Runtime => "runtime",
            Class::Vulkan => "vulkan",
            Class::System => "system",
        }
    }

    /// The class of a timeline name.
    pub fn from_name(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// When a handler was registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Before `main`: by an object linked into the program, from its constructors.
    BeforeMain = 0,
    /// Inside a `dlopen`: by the object loaded, from its constructors.
    InDlopen = 1,
    /// While the program ran.
    Running = 2,
}

impl Phase {
    /// Every phase, in the order of their numbers.
    pub const ALL: [Phase; 3] = [Phase::BeforeMain, Phase::InDlopen, Phase::Running];

    /// The phase of a number [`Phase::BeforeMain`]`as u8` gave; anything else is `Running`.
    pub fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::BeforeMain,
            1 => Phase::InDlopen,
            _ => Phase::Running,
        }
    }

    /// Its name in the timeline (`phase` of `handler-registered`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::BeforeMain => "before-main",
            Phase::InDlopen => "in-dlopen",
            Phase::Running => "running",
        }
    }

    /// The phase of a timeline name.
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One pending handler, as an order sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The handler's number, from 1 in each process.
    pub id: u64,
    /// Who registered it.
    pub class: Class,
    /// When.
    pub phase: Phase,
    /// A C++ static destructor (`__cxa_atexit` with an object).
    pub destructor: bool,
    /// The registering object (its load address): one group of the link order.
    pub group: usize,
    /// The [`symbol_hash`] of the handler's symbol; 0 when it has none (a C++ static
    /// destructor, a function the symbol table does not name).
    pub symbol: u64,
}

/// The number by which an exit order names a handler's symbol: FNV-1a of its bytes, never 0.
pub fn symbol_hash(symbol: &[u8]) -> u64 {
    symbol
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
        .max(1)
}

/// A handler an exit order names: by its symbol, or by its number where it has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// The [`symbol_hash`] of its symbol.
    Symbol(u64),
    /// Its number (`handler-registered`'s `id`) in the process.
    Id(u64),
}

impl Named {
    /// `#7` is handler 7; anything else is a symbol.
    pub fn parse(text: &str) -> Option<Named> {
        match text.strip_prefix('#') {
            Some(id) => id.parse().ok().map(Named::Id),
            None if text.is_empty() => None,
            None => Some(Named::Symbol(symbol_hash(text.as_bytes()))),
        }
    }

    fn matches(self, e: &Entry) -> bool {
        match self {
            Named::Symbol(hash) => e.symbol == hash,
            Named::Id(id) => e.id == id,
        }
    }
}

/// One handler run before another: `first` registered just after `then`, as the program would
/// register it with its two registrations swapped (the last registered runs first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Before {
    /// The handler to run first.
    pub first: Named,
    /// The handler it must run before.
    pub then: Named,
}

impl Before {
    /// Applies the move to `entries` (in registration order); the id it moved, if it did:
    /// nothing when either is not pending or `first` runs first already.
    pub fn apply(self, entries: &mut Vec<Entry>) -> Vec<u64> {
        let first = entries.iter().position(|e| self.first.matches(e));
        let then = entries.iter().position(|e| self.then.matches(e));
        let (Some(first), Some(then)) = (first, then) else {
            return Vec::new();
        };
        if first > then {
            return Vec::new();
        }
        let moved = entries.remove(first);
        // `then` moved one place down with the removal.
        entries.insert(then, moved);
        vec![moved.id]
    }
}

/// The library destructors of one object run before another's, in the loader's finalization
/// (`destructors:FIRST:before:THEN`, each object by its file name): what linking `FIRST`
/// before `THEN` gives two libraries neither of which depends on the other, or `FIRST`
/// depending on `THEN`.
///
/// Carried out when `then`'s destructors come due: `first`'s run just before them, unless
/// they ran already; when the loader reaches `first`'s later, they do not run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DestructorsBefore {
    /// The [`symbol_hash`] of the file name of the object whose destructors run first.
    pub first: u64,
    /// The [`symbol_hash`] of the file name of the object they run before.
    pub then: u64,
}

impl DestructorsBefore {
    /// The objects whose destructors run when `object`'s come due, in turn: each object that
    /// `steps` put before it and that has not run (with those put before it, first), then
    /// `object` itself unless it ran. `ran` says which have; what this returns counts as run
    /// from then on. A cycle in `steps` is cut where it closes.
    pub fn due(object: u64, steps: &[DestructorsBefore], ran: &[u64]) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        let mut open: Vec<u64> = Vec::new();
        visit(object, steps, ran, &mut open, &mut out);
        out
    }

    /// The order `steps` gives objects whose destructors the loader runs in `natural` order.
    pub fn simulate(natural: &[u64], steps: &[DestructorsBefore]) -> Vec<u64> {
        let mut ran: Vec<u64> = Vec::new();
        for &object in natural {
            let due = DestructorsBefore::due(object, steps, &ran);
            ran.extend(due);
        }
        ran
    }
}

fn visit(
    object: u64,
    steps: &[DestructorsBefore],
    ran: &[u64],
    open: &mut Vec<u64>,
    out: &mut Vec<u64>,
) {
    if ran.contains(&object) || out.contains(&object) || open.contains(&object) {
        return;
    }
    open.push(object);
    for step in steps.iter().filter(|s| s.then == object) {
        visit(step.first, steps, ran, open, out);
    }
    open.pop();
    out.push(object);
}

/// One step of an exit order: a whole order, one handler moved before another, or one
/// object's library destructors moved before another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// An order of [`Order::ALL`].
    Order(Order),
    /// `run:FIRST:before:THEN`.
    Before(Before),
    /// `destructors:FIRST:before:THEN`.
    Destructors(DestructorsBefore),
}

impl Step {
    /// A step as `VKEXIT_EXIT_ORDER` names it: an order's name, or `run:FIRST:before:THEN`
    /// with each handler a symbol or `#ID`.
    pub fn parse(text: &str) -> Option<Step> {
        if let Some(order) = Order::from_name(text) {
            return Some(Step::Order(order));
        }
        if let Some(objects) = text.strip_prefix("destructors:") {
            let (first, then) = objects.split_once(":before:")?;
            if first.is_empty() || then.is_empty() {
                return None;
            }
            return Some(Step::Destructors(DestructorsBefore {
                first: symbol_hash(first.as_bytes()),
                then: symbol_hash(then.as_bytes()),
            }));
        }
        let (first, then) = text.strip_prefix("run:")?.split_once(":before:")?;
        Some(Step::Before(Before {
            first: Named::parse(first)?,
            then: Named::parse(then)?,
        }))
    }

    /// Applies the step to `entries` (in registration order); the ids it moved. Library
    /// destructors are no exit handlers: their step moves none.
    pub fn apply(self, entries: &mut Vec<Entry>) -> Vec<u64> {
        match self {
            Step::Order(order) => order.apply(entries),
            Step::Before(before) => before.apply(entries),
            Step::Destructors(_) => Vec::new(),
        }
    }
}

impl Entry {
    /// Registered when its object was loaded: a static destructor, or a constructor's `atexit`.
    fn at_load(&self) -> bool {
        self.destructor || self.phase != Phase::Running
    }

    fn runtime_at_load(&self) -> bool {
        self.class == Class::Runtime && self.at_load()
    }
}

/// The orders, each a real build or deployment of the same program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The runtime libraries loaded with `dlopen` after the application registered its
    /// handlers (`GGML_BACKEND_DL`, plugins, extension modules): their load-time handlers
    /// are registered after the application's, before the Vulkan stack's.
    Module,
    /// The runtime libraries linked into the program: their load-time handlers registered
    /// before `main`, before any of the application's.
    Linked,
    /// The static destructors of the program and its runtime libraries in the reverse order
    /// across objects (another link or load order); each object's own order kept.
    Relinked,
    /// The runtime libraries' load-time handlers registered after `vkCreateInstance` (with
    /// `atexit` after the instance exists), so they run before the Vulkan stack's.
    TeardownBeforeDriver,
    /// The application's handlers registered after the runtime was initialised, so they run
    /// before everything the runtime and the driver registered.
    CleanupFirst,
}

impl Order {
    /// Every order.
    pub const ALL: [Order; 5] = [
        Order::Module,
        Order::Linked,
        Order::Relinked,
        Order::TeardownBeforeDriver,
        Order::CleanupFirst,
    ];

    /// Its name, as `--exit-order` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Order::Module => "module",
            Order::Linked => "linked",
            Order::Relinked => "link-order",
            Order::TeardownBeforeDriver => "teardown-before-driver",
            Order::CleanupFirst => "cleanup-first",
        }
    }

    /// The order of that name.
    pub fn from_name(name: &str) -> Option<Order> {
        Order::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Applies the order to `entries` (in registration order); the ids it moved.
    pub fn apply(self, entries: &mut Vec<Entry>) -> Vec<u64> {
        match self {
            Order::Module => {
                let first_vulkan = position(entries, |e| e.class == Class::Vulkan);
                let before_vulkan = &entries[..first_vulkan.unwrap_or(entries.len())];
                let Some(anchor) = before_vulkan.iter().rposition(|e| e.class == Class::App) else {
                    return Vec::new();
                };
                let anchor_id = entries[anchor].id;
                move_after(entries, anchor_id, |i, e| i < anchor && e.runtime_at_load())
            }
            Order::Linked => {
                let Some(first_app) = position(entries, |e| e.class == Class::App) else {
                    return Vec::new();
                };
                let movers = |i: usize, e: &Entry| {
                    i > first_app && e.class == Class::Runtime && e.phase == Phase::InDlopen
                };
                let moved: Vec<Entry> = take(entries, movers);
                let at = position(entries, |e| e.class == Class::App).unwrap_or(0);
                let ids = moved.iter().map(|e| e.id).collect();
                entries.splice(at..at, moved);
                ids
            }
            Order::Relinked => reverse_groups(entries),
            Order::TeardownBeforeDriver => {
                let Some(last_vulkan) = entries.iter().rposition(|e| e.class == Class::Vulkan)
                else {
                    return Vec::new();
                };
                let anchor_id = entries[last_vulkan].id;
                move_after(entries, anchor_id, |i, e| {
                    i < last_vulkan && e.runtime_at_load()
                })
            }
            Order::CleanupFirst => {
                let last = entries.len();
                let moved: Vec<Entry> = take(entries, |i, e| {
                    e.class == Class::App && e.phase == Phase::Running && i + 1 < last
                });
                // Only handlers that something registered after them: else nothing moved.
                let ids = moved.iter().map(|e| e.id).collect();
                entries.extend(moved);
                ids
            }
        }
    }
}

fn position(entries: &[Entry], f: impl Fn(&Entry) -> bool) -> Option<usize> {
    entries.iter().position(f)
}

/// Removes the entries `f` picks (by index and entry), keeping their order.
fn take(entries: &mut Vec<Entry>, f: impl Fn(usize, &Entry) -> bool) -> Vec<Entry> {
    let mut kept = Vec::with_capacity(entries.len());
    let mut taken = Vec::new();
    for (i, e) in entries.drain(..).enumerate() {
        match f(i, &e) {
            true => taken.push(e),
            false => kept.push(e),
        }
    }
    *entries = kept;
    taken
}

/// Moves the entries `f` picks to just after the entry `anchor_id`.
fn move_after(
    entries: &mut Vec<Entry>,
    anchor_id: u64,
    f: impl Fn(usize, &Entry) -> bool,
) -> Vec<u64> {
    let moved = take(entries, f);
    let at = entries
        .iter()
        .position(|e| e.id == anchor_id)
        .map_or(entries.len(), |i| i + 1);
    let ids = moved.iter().map(|e| e.id).collect();
    entries.splice(at..at, moved);
    ids
}

/// The load-time handlers of the program and the runtime libraries, grouped by object in the
/// order the objects first registered, put back into the same places with the groups in the
/// reverse order. Nothing moves with fewer than two such objects.
fn reverse_groups(entries: &mut [Entry]) -> Vec<u64> {
    let eligible =
        |e: &Entry| (e.class == Class::App && e.phase == Phase::BeforeMain) || e.runtime_at_load();
    let places: Vec<usize> = (0..entries.len())
        .filter(|&i| eligible(&entries[i]))
        .collect();
    let mut groups: Vec<(usize, Vec<Entry>)> = Vec::new();
    for &i in &places {
        let e = entries[i];
        match groups.iter_mut().find(|(g, _)| *g == e.group) {
            Some((_, members)) => members.push(e),
            None => groups.push((e.group, vec![e])),
        }
    }
    if groups.len() < 2 {
        return Vec::new();
    }
    let reordered: Vec<Entry> = groups.into_iter().rev().flat_map(|(_, m)| m).collect();
    let mut moved = Vec::new();
    for (&place, e) in places.iter().zip(reordered) {
        if entries[place].id != e.id {
            moved.push(e.id);
        }
        entries[place] = e;
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: u64, class: Class, phase: Phase, group: usize) -> Entry {
        Entry {
            id,
            class,
            phase,
            destructor: false,
            group,
            symbol: 0,
        }
    }

    #[test]
    fn one_handler_is_run_before_another_by_symbol_or_number() {
        let named = |id, symbol: &str| Entry {
            symbol: symbol_hash(symbol.as_bytes()),
            ..e(id, Class::Runtime, Phase::Running, 1)
        };
        // Registered: join_workers, then vk_shutdown; so vk_shutdown runs first.
        let natural = vec![
            named(1, "join_workers"),
            named(2, "vk_shutdown"),
            named(3, "x"),
        ];
        let mut entries = natural.clone();
        let step = Step::parse("run:join_workers:before:vk_shutdown").unwrap();
        assert_eq!(step.apply(&mut entries), [1]);
        assert_eq!(ids(&entries), [2, 1, 3]);
        // Already so: nothing moves.
        assert!(step.apply(&mut entries).is_empty());
        let mut entries = natural.clone();
        assert_eq!(
            Step::parse("run:#1:before:#2").unwrap().apply(&mut entries),
            [1]
        );
        assert_eq!(ids(&entries), [2, 1, 3]);
        let mut entries = natural;
        let absent = Step::parse("run:nowhere:before:vk_shutdown").unwrap();
        assert!(absent.apply(&mut entries).is_empty());
        for bad in ["run:a", "run::before:b", "run:#x:before:b", "teardown"] {
            assert_eq!(Step::parse(bad), None, "{bad}");
        }
        assert_eq!(Step::parse("module"), Some(Step::Order(Order::Module)));
    }

    #[test]
    fn one_objects_destructors_run_before_anothers_when_those_come_due() {
        let h = |name: &str| symbol_hash(name.as_bytes());
        let Some(Step::Destructors(step)) = Step::parse("destructors:libpool.so:before:libctx.so")
        else {
            panic!("not read");
        };
        assert_eq!((step.first, step.then), (h("libpool.so"), h("libctx.so")));
        // The loader's order: the program, libctx, libpool, libc.
        let natural = [h("app"), h("libctx.so"), h("libpool.so"), h("libc.so.6")];
        assert_eq!(
            DestructorsBefore::simulate(&natural, &[step]),
            [h("app"), h("libpool.so"), h("libctx.so"), h("libc.so.6")]
        );
        // Already first: nothing changes.
        let reversed = DestructorsBefore {
            first: step.then,
            then: step.first,
        };
        assert_eq!(DestructorsBefore::simulate(&natural, &[reversed]), natural);
        // Chained: c before b before a.
        let chain = [
            DestructorsBefore {
                first: h("c"),
                then: h("b"),
            },
            DestructorsBefore {
                first: h("b"),
                then: h("a"),
            },
        ];
        assert_eq!(
            DestructorsBefore::simulate(&[h("a"), h("b"), h("c")], &chain),
            [h("c"), h("b"), h("a")]
        );
        // A cycle is cut, every object runs once.
        let cycle = [step, reversed];
        let mut order = DestructorsBefore::simulate(&natural, &cycle);
        assert_eq!(order.len(), natural.len());
        order.sort();
        let mut all = natural.to_vec();
        all.sort();
        assert_eq!(order, all);
        for bad in [
            "destructors:a",
            "destructors::before:b",
            "destructors:a:before:",
        ] {
            assert_eq!(Step::parse(bad), None, "{bad}");
        }
    }

    fn ids(entries: &[Entry]) -> Vec<u64> {
        entries.iter().map(|e| e.id).collect()
    }

    /// `events-freed-after-teardown`: refrt loaded (its load-time handler), the application's
    /// cleanup, then the Vulkan stack, then refrt's teardown registered after init.
    fn events_freed() -> Vec<Entry> {
        vec![
            e(1, Class::Runtime, Phase::InDlopen, 10),
            e(2, Class::App, Phase::Running, 1),
            e(3, Class::Vulkan, Phase::InDlopen, 20),
            e(4, Class::Vulkan, Phase::InDlopen, 21),
            e(5, Class::Runtime, Phase::Running, 10),
        ]
    }

    #[test]
    fn module_registers_a_runtimes_load_time_handlers_after_the_applications() {
        let mut entries = events_freed();
        assert_eq!(Order::Module.apply(&mut entries), [1]);
        assert_eq!(ids(&entries), [2, 1, 3, 4, 5]);
        // Already a module loaded after the cleanup: nothing to move.
        let mut again = entries.clone();
        assert!(Order::Module.apply(&mut again).is_empty());
        assert_eq!(again, entries);
    }

    #[test]
    fn linked_registers_a_modules_load_time_handlers_before_the_applications() {
        // `handler-before-load`: the cleanup, then refrt loaded.
        let mut entries = vec![
            e(1, Class::App, Phase::Running, 1),
            e(2, Class::Runtime, Phase::InDlopen, 10),
            e(3, Class::Vulkan, Phase::InDlopen, 20),
            e(4, Class::Runtime, Phase::Running, 10),
        ];
        assert_eq!(Order::Linked.apply(&mut entries), [2]);
        assert_eq!(ids(&entries), [2, 1, 3, 4]);
        assert!(Order::Linked.apply(&mut entries).is_empty());
    }

    #[test]
    fn teardown_before_driver_moves_load_time_handlers_past_the_vulkan_stacks() {
        let mut entries = events_freed();
        assert_eq!(Order::TeardownBeforeDriver.apply(&mut entries), [1]);
        assert_eq!(ids(&entries), [2, 3, 4, 1, 5]);
        // The handler registered at run time stays where it is.
        assert_eq!(entries[4].phase, Phase::Running);
    }

    #[test]
    fn cleanup_first_moves_the_applications_run_time_handlers_last_registered() {
        let mut entries = events_freed();
        assert_eq!(Order::CleanupFirst.apply(&mut entries), [2]);
        assert_eq!(ids(&entries), [1, 3, 4, 5, 2]);
        assert!(Order::CleanupFirst.apply(&mut entries).is_empty());
    }

    #[test]
    fn link_order_reverses_objects_not_the_handlers_of_one_object() {
        let mut entries = vec![
            e(1, Class::System, Phase::BeforeMain, 0),
            e(2, Class::Runtime, Phase::BeforeMain, 10),
            e(3, Class::Runtime, Phase::BeforeMain, 10),
            e(4, Class::App, Phase::BeforeMain, 1),
            e(5, Class::App, Phase::Running, 1),
            e(6, Class::Vulkan, Phase::InDlopen, 20),
        ];
        let moved = Order::Relinked.apply(&mut entries);
        assert_eq!(ids(&entries), [1, 4, 2, 3, 5, 6]);
        assert_eq!(moved, [4, 2, 3]);
        // One object alone has no other order.
        let mut one = vec![
            e(1, Class::Runtime, Phase::BeforeMain, 10),
            e(2, Class::Runtime, Phase::BeforeMain, 10),
        ];
        assert!(Order::Relinked.apply(&mut one).is_empty());
    }

    #[test]
    fn nothing_of_the_system_or_the_vulkan_stack_moves() {
        let mut entries = vec![
            e(1, Class::System, Phase::BeforeMain, 0),
            e(2, Class::Vulkan, Phase::InDlopen, 20),
            e(3, Class::Vulkan, Phase::InDlopen, 21),
        ];
        for order in Order::ALL {
            let before = entries.clone();
            assert!(order.apply(&mut entries).is_empty(), "{order:?}");
            assert_eq!(entries, before);
        }
    }
}
