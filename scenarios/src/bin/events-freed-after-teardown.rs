//! events-freed-after-teardown: the application registers its event cleanup after the runtime
//! loaded but before any device exists. A runtime that registers its teardown with atexit once
//! the device exists tears down first; the cleanup then frees two recorded events on a destroyed
//! device.

use vkexit_fixtures::{
    exit_handler_starts, register_exit_handler, step, Event, ExitSlot, ScenarioArgs, Session,
};

const ABOUT: &str = "Loads the runtime, registers an atexit handler that frees two events, then \
                     initializes a backend, records and synchronizes both events, frees the \
                     backend and returns 0.";
const HANDLER: &str = "free-events";

static EVENTS: ExitSlot<(Session, [Event; 2])> = ExitSlot::new();

/// Runs as an exit handler, after a teardown the runtime registered once its device existed.
/// Calling into the runtime here is the ordering under test, so it is not async-signal-safe.
extern "C" fn free_events() {
    exit_handler_starts(HANDLER);
    let Some((session, events)) = EVENTS.take() else {
        step!("exit handler {HANDLER}: no events were kept");
        return;
    };
    for event in events {
        session.free_event(event);
    }
    step!("exit handler {HANDLER} done");
}

fn main() {
    let args = ScenarioArgs::from_env("events-freed-after-teardown", ABOUT);
    let session = Session::load(&args.runtime, args.device);
    register_exit_handler(HANDLER, free_events);
    let backend = session.backend_init();
    let events = [session.new_event(), session.new_event()];
    for event in &events {
        session.record_event(event, &backend);
        session.synchronize_event(event);
    }
    session.free_backend(backend);
    EVENTS.keep((session, events));
    step!("keep both events for {HANDLER}");
    step!("main returns");
}
