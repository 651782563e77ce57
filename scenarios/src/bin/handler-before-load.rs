//! handler-before-load: an application registers its cleanup with atexit *before* the runtime
//! library is loaded (ggml with GGML_BACKEND_DL). Exit handlers run last-registered-first, so the
//! cleanup runs after any teardown the runtime registered, and frees an event, a device buffer, a
//! pinned host buffer and the backend on a device that may already be destroyed.

use vkexit_fixtures::{
    exit_handler_starts, register_exit_handler, step, Backend, DeviceBuffer, Event, ExitSlot,
    HostBuffer, ScenarioArgs, Session,
};
use vkexit_scenarios::BUFFER_SIZE;

const ABOUT: &str = "Registers an atexit cleanup before loading the runtime, then initializes a \
                     backend, a device buffer, a pinned host buffer and an event (when the runtime \
                     has events), runs work and returns 0; the cleanup frees them all at exit.";
const HANDLER: &str = "free-retained";

/// What main leaves for the cleanup handler.
struct Retained {
    session: Session,
    /// `None` for a runtime without events.
    event: Option<Event>,
    buffer: DeviceBuffer,
    host: HostBuffer,
    backend: Backend,
}

static RETAINED: ExitSlot<Retained> = ExitSlot::new();

/// Runs as an exit handler, after the runtime's own teardown when the runtime registered one.
/// It calls into the runtime on purpose: what those calls do on a torn-down device is the
/// ordering under test, so it is not async-signal-safe and is not meant to be.
extern "C" fn free_retained() {
    exit_handler_starts(HANDLER);
    let Some(retained) = RETAINED.take() else {
        step!("exit handler {HANDLER}: nothing was retained");
        return;
    };
    let session = retained.session;
    if let Some(event) = retained.event {
        session.free_event(event);
    }
    session.free_device_buffer(retained.buffer);
    session.free_host_buffer(retained.host);
    session.free_backend(retained.backend);
    step!("exit handler {HANDLER} done");
}

fn main() {
    let args = ScenarioArgs::from_env("handler-before-load", ABOUT);
    register_exit_handler(HANDLER, free_retained);
    let session = Session::load(&args.runtime, args.device);
    let backend = session.backend_init();
    let buffer = session.alloc_device_buffer(BUFFER_SIZE);
    let host = session.alloc_host_buffer(BUFFER_SIZE);
    let event = session.new_event_if_any();
    session.submit(&backend, &buffer);
    if let Some(event) = &event {
        session.record_event(event, &backend);
        session.synchronize_event(event);
    }
    RETAINED.keep(Retained {
        session,
        event,
        buffer,
        host,
        backend,
    });
    step!("retain event, device buffer, pinned host buffer and backend for {HANDLER}");
    step!("main returns");
}
