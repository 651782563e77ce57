//! Another exit order: the handlers pending when exit begins run in the order another build or
//! deployment of the same program would give them, or with one handler moved before another
//! (`VKEXIT_EXIT_ORDER`: the steps of `vkexit_evidence::exit_order`), and other threads are
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::handlers::{self, Pending};
use crate::{threads, timeline};

pub(crate) use vkexit_evidence::exit_order::{Class, Entry, Phase};
use vkexit_evidence::exit_order::{DestructorsBefore, Step};

/// The steps to apply, comma-separated: names of orders, or `run:FIRST:before:THEN`.
pub const EXIT_ORDER_VAR: &str = "VKEXIT_EXIT_ORDER";
/// The thread-timing seed: other threads are let run ahead at handler boundaries it picks.
pub const CHAOS_SEED_VAR: &str = "VKEXIT_CHAOS_SEED";

/// The steps asked for, in the order given, each with its name as given (at most 16).
static STEPS: OnceLock<Vec<(Step, String)>> = OnceLock::new();
static CHAOS_SEED: AtomicU64 = AtomicU64::new(0);
static CHAOS: AtomicBool = AtomicBool::new(false);
static ASKED: AtomicBool = AtomicBool::new(false);
static TAKEN_OVER: AtomicBool = AtomicBool::new(false);

/// Reads [`EXIT_ORDER_VAR`] and [`CHAOS_SEED_VAR`] (from the library's set-up). Whether
/// either asks for anything: then every handler must be wrapped.
pub(crate) fn configure() -> bool {
    let steps = STEPS.get_or_init(|| {
        let list = std::env::var(EXIT_ORDER_VAR).unwrap_or_default();
        list.split(',')
            .map(str::trim)
            .filter_map(|name| Some((Step::parse(name)?, name.to_string())))
            .take(16)
            .collect()
    });
    if let Some(seed) = std::env::var(CHAOS_SEED_VAR)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        CHAOS_SEED.store(seed, Ordering::Relaxed);
        CHAOS.store(true, Ordering::Relaxed);
    }
    let asked = !steps.is_empty() || CHAOS.load(Ordering::Relaxed);
    ASKED.store(asked, Ordering::Relaxed);
    asked
}

fn steps() -> &'static [(Step, String)] {
    STEPS.get().map_or(&[], Vec::as_slice)
}

/// The steps that move library destructors, for the loader's finalization ([`crate::fini`]).
pub(crate) fn destructor_steps() -> Vec<DestructorsBefore> {
    steps()
        .iter()
        .filter_map(|(step, _)| match step {
            Step::Destructors(d) => Some(*d),
            _ => None,
        })
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
    let steps = steps();
    let mut moved: Vec<u64> = Vec::new();
    for (step, _) in steps {
        for id in step.apply(&mut entries) {
            if !moved.contains(&id) {
                moved.push(id);
            }
        }
    }
    let chaos = CHAOS
        .load(Ordering::Relaxed)
        .then(|| CHAOS_SEED.load(Ordering::Relaxed));
    entries.reverse();
    record_reordering(steps, &moved, &entries, pending.len(), chaos);
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
    steps: &[(Step, String)],
    moved: &[u64],
    run_order: &[Entry],
    pending: usize,
    chaos: Option<u64>,
) {
    let names: Vec<&str> = steps.iter().map(|(_, name)| name.as_str()).collect();
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
/// How much CPU time of its own one pause lets each other runnable thread have at most: the
/// threads' own time, not the clock's, so that a loaded machine gives them the same head start.
const PAUSE_LIMIT_NS: u64 = 500_000_000;
/// How much CPU time of its own all pauses of a process give a thread at most.
const TOTAL_LIMIT_NS: u64 = 1_500_000_000;
/// How long, by the clock, one pause waits at most, however loaded the machine.
const PAUSE_WALL_LIMIT_NS: u64 = 5_000_000_000;
/// How long, by the clock, all pauses of a process wait at most.
const TOTAL_WALL_LIMIT_NS: u64 = 10_000_000_000;

/// Thread timing: at the handler boundaries the seed picks (every one when there are at most
/// [`MAX_PAUSES`]), the exiting thread lets every other runnable thread of the process run
/// ahead until it sleeps, blocks or ends ([`threads`]: a thread asleep or blocked there is
/// counted, not waited for).
struct Chaos {
    seed: u64,
    boundaries: usize,
    pauses: u32,
    waited_ns: u64,
    /// The CPU time the pauses so far gave a thread, at most.
    given_ns: u64,
}

impl Chaos {
    fn new(seed: u64, boundaries: usize) -> Self {
        Chaos {
            seed,
            boundaries,
            pauses: 0,
            waited_ns: 0,
            given_ns: 0,
        }
    }

    fn picks(&self, boundary: usize) -> bool {
        let n = self.boundaries as u64;
        n <= u64::from(MAX_PAUSES)
            || splitmix64(self.seed ^ (boundary as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % n
                < u64::from(MAX_PAUSES)
    }

    fn boundary(&mut self, boundary: usize, before_id: u64) {
        if self.pauses >= MAX_PAUSES
            || self.given_ns >= TOTAL_LIMIT_NS
            || self.waited_ns >= TOTAL_WALL_LIMIT_NS
            || !self.picks(boundary)
        {
            return;
        }
        self.pauses += 1;
        let start = vkexit_evidence::monotonic_ns();
        let limit = PAUSE_LIMIT_NS.min(TOTAL_LIMIT_NS - self.given_ns);
        let others = threads::others();
        let at_start = threads::Counts::of(&others);
        let mut now = start;
        let mut given = 0;
        loop {
            // The least CPU time a thread still runnable has had in this pause: the pause
            // ends when each has had the limit, or none runs.
            let least = threads::others()
                .iter()
                .filter(|t| t.state == threads::State::Runnable)
                .map(|t| {
                    let before = others
                        .iter()
                        .find(|o| o.tid == t.tid)
                        .map_or(0, |o| o.cpu_ns);
                    t.cpu_ns.saturating_sub(before)
                })
                .min();
            let Some(least) = least else { break };
            given = given.max(least);
            let wall = PAUSE_WALL_LIMIT_NS.min(TOTAL_WALL_LIMIT_NS - self.waited_ns);
            if least >= limit || now - start >= wall {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            now = vkexit_evidence::monotonic_ns();
        }
        self.given_ns += given;
        let waited = now - start;
        self.waited_ns += waited;
        let mut record = Record::new(Event::ChaosPause.as_str());
        record
            .u64(field::BEFORE_ID, before_id)
            .u64(field::WAITED_NS, waited);
        at_start.write(&mut record);
        record.u64(field::CHAOS_SEED, self.seed);
        timeline::write(record);
    }
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
