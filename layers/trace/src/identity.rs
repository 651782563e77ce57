//! Which thread creates an object, for its `alive` records, without a system call per
//! creation: a thread's id and name are read once, on its first creation, and again in a child
//! after `fork` (where the forking thread gets a new id).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use vkexit_evidence::{thread_id, thread_name};

use crate::lifetimes::ThreadName;

/// Bumped in the child of every `fork`: caches of an older generation are stale.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THIS_THREAD: Cell<Option<(u64, i64, ThreadName)>> = const { Cell::new(None) };
}

/// Registers the `fork` hook; call once, at library load.
pub fn watch_forks() {
    extern "C" fn forked_child() {
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: registers a plain extern "C" fn with no preconditions as the child hook.
    unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
}

/// The calling thread's kernel id and name. The process's first thread is named `main`, as
/// Rust and debuggers name it: its kernel name is the program's, which says nothing about the
/// thread. A name set after the thread's first creation is not seen (each `create` record
/// carries the name current at that call).
pub fn this_thread() -> (i64, ThreadName) {
    let generation = GENERATION.load(Ordering::Relaxed);
    THIS_THREAD.with(|cache| match cache.get() {
        Some((g, tid, name)) if g == generation => (tid, name),
        _ => {
            let tid = thread_id();
            // SAFETY: getpid has no preconditions.
            let name = if tid == i64::from(unsafe { libc::getpid() }) {
                ThreadName::new(b"main")
            } else {
                ThreadName::new(thread_name(&mut [0; 16]))
            };
            cache.set(Some((generation, tid, name)));
            (tid, name)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_thread_has_its_kernel_name_and_id() {
        let (tid, name) = std::thread::Builder::new()
            .name("vkexit-worker".into())
            .spawn(this_thread)
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(name.as_bytes(), b"vkexit-worker");
        assert_ne!(tid, i64::from(std::process::id()));
    }

    #[test]
    fn the_answer_is_cached_per_thread() {
        let first = this_thread();
        assert_eq!(this_thread(), first);
        assert_eq!(first.0, thread_id());
    }
}
