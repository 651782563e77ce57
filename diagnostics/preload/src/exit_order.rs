//! Another exit order: the handlers pending when exit begins run in the order another build or
//! deployment of the same program would give them (`VKEXIT_EXIT_ORDER`), and other threads are
//! let run ahead at handler boundaries (`VKEXIT_CHAOS_SEED`).
//!
//! glibc runs exit handlers last-in-first-out, so their order is the order of registration,
//! and that order is decided by the build: a runtime linked into the program registers its
//! load-time handlers (C++ static destructors, `atexit` in a constructor) before `main`; loaded
//! with `dlopen` as a module, after the handlers the application registered before loading it;
//! the static destructors of different objects follow link and load order. Each order here
//! moves whole groups of registrations to where such a build would have made them; none moves
//! the C library's, the dynamic loader's or the Vulkan stack's (loader, layers, drivers and
//! what they load) among themselves.
//!
//! When exit begins (`exit` called, or `main` returned), the pending handlers are taken over:
//! each runs here, in the new order, through the same trampoline records; glibc then finds
//! each already run and goes on to the loader's finalization. A handler that an object's
//! `dlclose` runs meanwhile (the driver's, inside `vkDestroyInstance`) runs there, as it would,
//! and is not run again. Handlers registered while these run go first, as glibc runs them.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::handlers::{self, Pending};
use crate::timeline;

/// The orders to apply, comma-separated names of [`Order`].
pub const EXIT_ORDER_VAR: &str = "VKEXIT_EXIT_ORDER";
/// The thread-timing seed: other threads are let run ahead at handler boundaries it picks.
pub const CHAOS_SEED_VAR: &str = "VKEXIT_CHAOS_SEED";

/// Who registered a handler, as the orders move them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Class {
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
    pub(crate) fn from_u8(v: u8) -> Class {
        match v {
            0 => Class::App,
            1 => Class::Runtime,
            2 => Class::Vulkan,
            _ => Class::System,
        }
    }
}

/// When a handler was registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Before `main`: by an object linked into the program, from its constructors.
    BeforeMain = 0,
    /// Inside a `dlopen`: by the object loaded, from its constructors.
    InDlopen = 1,
    /// While the program ran.
    Running = 2,
}

impl Phase {
    pub(crate) fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::BeforeMain,
            1 => Phase::InDlopen,
            _ => Phase::Running,
        }
    }
}

/// One pending handler, as an order sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: u64,
    pub class: Class,
    pub phase: Phase,
    /// A C++ static destructor (`__cxa_atexit` with an object).
    pub destructor: bool,
    /// The registering object (its load address): one group of the link order.
    pub group: usize,
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
pub(crate) enum Order {
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
    pub(crate) const ALL: [Order; 5] = [
        Order::Module,
        Order::Linked,
        Order::Relinked,
        Order::TeardownBeforeDriver,
        Order::CleanupFirst,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Order::Module => "module",
            Order::Linked => "linked",
            Order::Relinked => "link-order",
            Order::TeardownBeforeDriver => "teardown-before-driver",
            Order::CleanupFirst => "cleanup-first",
        }
    }

    fn from_name(name: &str) -> Option<Order> {
        Order::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Applies the order to `entries` (in registration order); the ids it moved.
    pub(crate) fn apply(self, entries: &mut Vec<Entry>) -> Vec<u64> {
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

/// The orders asked for, by index into [`Order::ALL`], in the order given (at most 8).
static ORDERS: [AtomicU8; 8] = [const { AtomicU8::new(u8::MAX) }; 8];
static CHAOS_SEED: AtomicU64 = AtomicU64::new(0);
static CHAOS: AtomicBool = AtomicBool::new(false);
static ASKED: AtomicBool = AtomicBool::new(false);
static TAKEN_OVER: AtomicBool = AtomicBool::new(false);

/// Reads [`EXIT_ORDER_VAR`] and [`CHAOS_SEED_VAR`] (from the library's constructor). Whether
/// either asks for anything: then every handler must be wrapped.
pub(crate) fn configure() -> bool {
    let mut n = 0;
    if let Ok(list) = std::env::var(EXIT_ORDER_VAR) {
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some(order) = Order::from_name(name) else {
                continue;
            };
            if n < ORDERS.len() {
                let index = Order::ALL.iter().position(|&o| o == order).unwrap_or(0);
                ORDERS[n].store(index as u8, Ordering::Relaxed);
                n += 1;
            }
        }
    }
    if let Some(seed) = std::env::var(CHAOS_SEED_VAR)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        CHAOS_SEED.store(seed, Ordering::Relaxed);
        CHAOS.store(true, Ordering::Relaxed);
    }
    let asked = n > 0 || CHAOS.load(Ordering::Relaxed);
    ASKED.store(asked, Ordering::Relaxed);
    asked
}

fn orders() -> Vec<Order> {
    ORDERS
        .iter()
        .map(|o| o.load(Ordering::Relaxed))
        .take_while(|&i| (i as usize) < Order::ALL.len())
        .map(|i| Order::ALL[i as usize])
        .collect()
}

/// Exit begins (from `exit`, or after `main` returned): runs the pending handlers in the
/// order asked for, once. Nothing is done when nothing was asked.
pub(crate) fn take_over(status: c_int) {
    if !ASKED.load(Ordering::Relaxed) || TAKEN_OVER.swap(true, Ordering::AcqRel) {
        return;
    }
    let pending = handlers::pending();
    let mut entries: Vec<Entry> = pending.iter().map(|p| p.entry).collect();
    let orders = orders();
    let mut moved: Vec<u64> = Vec::new();
    for order in &orders {
        for id in order.apply(&mut entries) {
            if !moved.contains(&id) {
                moved.push(id);
            }
        }
    }
    let chaos = CHAOS
        .load(Ordering::Relaxed)
        .then(|| CHAOS_SEED.load(Ordering::Relaxed));
    entries.reverse();
    record_reordering(&orders, &moved, &entries, pending.len(), chaos);
    if moved.is_empty() && chaos.is_none() {
        return;
    }
    let mut newest = pending.iter().map(|p| p.entry.id).max().unwrap_or(0);
    let mut chaos_state = chaos.map(|seed| Chaos::new(seed, entries.len()));
    for (i, e) in entries.iter().enumerate() {
        newest = run_newer(newest, status);
        if let Some(c) = chaos_state.as_mut() {
            c.boundary(i, e.id);
        }
        if let Some(p) = pending.iter().find(|p| p.entry.id == e.id) {
            handlers::run_pending(p, status);
        }
    }
    run_newer(newest, status);
}

/// Runs the handlers registered after `newest` (by the handlers just run), newest first, as
/// glibc would; the newest id seen.
fn run_newer(mut newest: u64, status: c_int) -> u64 {
    loop {
        let mut newer: Vec<Pending> = handlers::pending()
            .into_iter()
            .filter(|p| p.entry.id > newest)
            .collect();
        if newer.is_empty() {
            return newest;
        }
        newer.sort_by_key(|p| std::cmp::Reverse(p.entry.id));
        newest = newer[0].entry.id;
        for p in &newer {
            handlers::run_pending(p, status);
        }
    }
}

fn record_reordering(
    orders: &[Order],
    moved: &[u64],
    run_order: &[Entry],
    pending: usize,
    chaos: Option<u64>,
) {
    let names: Vec<&str> = orders.iter().map(|o| o.name()).collect();
    let in_run_order: Vec<String> = run_order
        .iter()
        .filter(|e| moved.contains(&e.id))
        .map(|e| e.id.to_string())
        .collect();
    let first: Vec<String> = run_order
        .iter()
        .take(64)
        .map(|e| e.id.to_string())
        .collect();
    let mut record = Record::new(Event::ExitReordered.as_str());
    record
        .str(field::ORDER, &names.join(","))
        .u64(field::MOVED, moved.len() as u64)
        .str(field::MOVED_IDS, &in_run_order.join(","))
        .str(field::RUN_ORDER, &first.join(","))
        .u64(field::PENDING, pending as u64);
    if let Some(seed) = chaos {
        record.u64(field::CHAOS_SEED, seed);
    }
    timeline::write(record);
}

/// At most this many pauses a process: each may wait up to [`PAUSE_LIMIT_NS`].
const MAX_PAUSES: u32 = 16;
/// How long one pause lets the other threads run at most.
const PAUSE_LIMIT_NS: u64 = 500_000_000;
/// How long all pauses of a process wait at most.
const TOTAL_LIMIT_NS: u64 = 1_500_000_000;

/// Thread timing: at the handler boundaries the seed picks (every one when there are at most
/// [`MAX_PAUSES`]), the exiting thread lets every other running thread of the process run
/// ahead until it blocks or ends.
struct Chaos {
    seed: u64,
    boundaries: usize,
    pauses: u32,
    waited_ns: u64,
}

impl Chaos {
    fn new(seed: u64, boundaries: usize) -> Self {
        Chaos {
            seed,
            boundaries,
            pauses: 0,
            waited_ns: 0,
        }
    }

    fn picks(&self, boundary: usize) -> bool {
        let n = self.boundaries as u64;
        n <= u64::from(MAX_PAUSES)
            || splitmix64(self.seed ^ (boundary as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % n
                < u64::from(MAX_PAUSES)
    }

    fn boundary(&mut self, boundary: usize, before_id: u64) {
        if self.pauses >= MAX_PAUSES || self.waited_ns >= TOTAL_LIMIT_NS || !self.picks(boundary) {
            return;
        }
        self.pauses += 1;
        let start = vkexit_evidence::monotonic_ns();
        let limit = PAUSE_LIMIT_NS.min(TOTAL_LIMIT_NS - self.waited_ns);
        let (alive, _) = other_threads();
        let mut now = start;
        while other_threads().1 > 0 && now - start < limit {
            std::thread::sleep(std::time::Duration::from_millis(1));
            now = vkexit_evidence::monotonic_ns();
        }
        let waited = now - start;
        self.waited_ns += waited;
        let mut record = Record::new(Event::ChaosPause.as_str());
        record
            .u64(field::BEFORE_ID, before_id)
            .u64(field::WAITED_NS, waited)
            .u64(field::RUNNING, alive)
            .u64(field::CHAOS_SEED, self.seed);
        timeline::write(record);
    }
}

/// The threads of this process other than the caller: how many are alive, and how many of
/// those are running or runnable (`R` in their `stat`).
fn other_threads() -> (u64, u64) {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() }.to_string();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    let (mut alive, mut running) = (0, 0);
    for task in tasks.flatten() {
        if task.file_name().to_str() == Some(me.as_str()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        alive += 1;
        // The state follows the command name, which may hold spaces and parentheses.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim().chars().next());
        if state == Some('R') {
            running += 1;
        }
    }
    (alive, running)
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
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

    #[test]
    fn chaos_picks_every_boundary_of_a_small_exit_and_some_of_a_large_one() {
        let small = Chaos::new(7, 5);
        assert!((0..5).all(|b| small.picks(b)));
        let large = Chaos::new(7, 4000);
        let picked = (0..4000).filter(|&b| large.picks(b)).count();
        assert!((1..100).contains(&picked), "{picked}");
        let other = Chaos::new(8, 4000);
        let differ = (0..4000).any(|b| large.picks(b) != other.picks(b));
        assert!(differ);
    }
}
