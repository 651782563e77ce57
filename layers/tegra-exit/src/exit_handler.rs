//! The exit handler: libEGL_nvidia's, which unmaps libnvidia-eglcore while the driver's worker
//! threads may still run code in it.

use crate::layer::Layer;
use crate::mode::Mode;
use crate::{region, worker};
use vkexit_evidence::tegra::{field, Event};
use vkexit_evidence::{monotonic_ns, Record};

/// How long the deterministic mode waits for a live worker to fault.
pub const FAULT_WAIT_NS: u64 = 5_000_000_000;
/// The step of that wait.
const WAIT_STEP_NS: i64 = 1_000_000;

/// Registered with `atexit` when the library loads (see `on_load`).
///
/// Runs as an exit handler: inside `exit()` (after every handler registered later, before
/// those registered earlier) or inside the loader's `dlclose` of this library, while other
/// threads still run. So: no allocation, no lock (settings are read without blocking, the
/// region and worker count are atomics, records are built on the stack and written with one
/// `write()`), only `munmap` and `nanosleep` besides.
pub extern "C" fn run() {
    let Some(layer) = Layer::get_if_read() else {
        return;
    };
    if layer.mode == Mode::Off {
        return;
    }
    let live = worker::live();
    let mut start = Record::new(Event::ExitHandlerStart.as_str());
    start.u64(field::LIVE_WORKERS, live as u64);
    layer.write(start);

    if let Some(range) = region::unmap() {
        let mut unmapped = Record::new(Event::RegionUnmapped.as_str());
        unmapped
            .hex(field::START, range.start as u64)
            .hex(field::END, range.end as u64);
        layer.write(unmapped);
    }

    if live > 0 && layer.mode == Mode::Deterministic {
        layer.write(Record::new(Event::WaitingForFault.as_str()));
        wait_while_workers_live();
    }
    layer.write(Record::new(Event::ExitHandlerEnd.as_str()));
}

/// Sleeps in short steps until no worker is live (each faults, killing the process, when it
/// returns to the unmapped region) or `FAULT_WAIT_NS` have passed.
fn wait_while_workers_live() {
    let deadline = monotonic_ns() + FAULT_WAIT_NS;
    while worker::live() > 0 && monotonic_ns() < deadline {
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: WAIT_STEP_NS as libc::c_long,
        };
        // SAFETY: a valid request on the stack, no remainder wanted.
        unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
    }
}
