//! buffer-kept-at-exit: the backend is freed but a device buffer and a pinned host buffer are
//! still allocated when main returns, as when an application leaks its model weights. The
//! runtime's teardown meets live children of the device.

use vkexit_fixtures::{step, ScenarioArgs, Session};
use vkexit_scenarios::BUFFER_SIZE;

const ABOUT: &str = "Allocates a device buffer and a pinned host buffer, runs work, frees the \
                     backend and returns 0 with both buffers still allocated.";

fn main() {
    let args = ScenarioArgs::from_env("buffer-kept-at-exit", ABOUT);
    let session = Session::load(&args.runtime, args.device);
    let backend = session.backend_init();
    let buffer = session.alloc_device_buffer(BUFFER_SIZE);
    let host = session.alloc_host_buffer(BUFFER_SIZE);
    session.submit(&backend, &buffer);
    session.synchronize(&backend);
    session.free_backend(backend);
    // Handles free nothing when they go out of scope: only the runtime's exit path decides what
    // becomes of these two.
    let _kept_at_exit = (buffer, host);
    step!("keep device buffer and pinned host buffer allocated at exit");
    step!("main returns");
}
