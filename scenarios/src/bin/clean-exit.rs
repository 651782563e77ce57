//! clean-exit: the baseline. Everything allocated is freed, in order, before main returns, so
//! whatever the harness sees besides a clean exit comes from the runtime's own teardown.

use vkexit_fixtures::{step, ScenarioArgs, Session};
use vkexit_scenarios::BUFFER_SIZE;

const ABOUT: &str = "Allocates a device buffer, a pinned host buffer and an event (when the \
                     runtime has events), runs work, frees everything and the backend, then \
                     returns 0.";

fn main() {
    let args = ScenarioArgs::from_env("clean-exit", ABOUT);
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
    session.synchronize(&backend);
    if let Some(event) = event {
        session.free_event(event);
    }
    session.free_host_buffer(host);
    session.free_device_buffer(buffer);
    session.free_backend(backend);
    step!("main returns");
}
