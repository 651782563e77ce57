//! The other threads of this process, each as the kernel says it is now: running or runnable,
//! asleep in a timed sleep, blocked on something else, or stopped. A thread alive but asleep
//! is not running, and it will run again by itself: what the exit perturbations that act on
//! threads need to tell apart.
//!
//! Read from `/proc/self/task/TID/`: the state letter of `stat`, and for a sleeping thread the
//! system call it sleeps in (`syscall`'s first field, which the process may read of itself).
//! Called from exit handlers (the chaos pauses, the held teardown), never from a signal
//! handler: it reads files and allocates.

use vkexit_evidence::timeline::field;
use vkexit_evidence::Record;

/// What one other thread is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Running or runnable (`R`).
    Runnable,
    /// In `nanosleep` or `clock_nanosleep` (`sleep`, `usleep`, `std::thread::sleep`): it wakes
    /// by itself.
    Asleep,
    /// Waiting on something else: a futex (a lock, a condition variable, a join), a read, a
    /// poll, the disk.
    Blocked,
    /// Stopped by a signal or a tracer, or ended and not yet reaped.
    Stopped,
}

/// One other thread, now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Thread {
    pub(crate) tid: u32,
    pub(crate) state: State,
    /// Its context switches so far: they grow each time it stops running, so a thread asleep
    /// before and asleep now has woken in between when they grew.
    pub(crate) switches: u64,
    /// The CPU time it has had so far, in nanoseconds.
    pub(crate) cpu_ns: u64,
}

/// The threads of this process other than the caller, now.
pub(crate) fn others() -> Vec<Thread> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() } as u32;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| task.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| tid != me)
        .filter_map(read)
        .collect()
}

/// One thread, or `None` when it ended before its files could be read.
fn read(tid: u32) -> Option<Thread> {
    let dir = format!("/proc/self/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let letter = state_letter(&stat)?;
    let state = match letter {
        'R' => State::Runnable,
        'T' | 't' | 'Z' | 'X' | 'x' => State::Stopped,
        'S' => match std::fs::read_to_string(format!("{dir}/syscall")) {
            Ok(syscall) if sleeps(&syscall) => State::Asleep,
            _ => State::Blocked,
        },
        _ => State::Blocked,
    };
    let switches = std::fs::read_to_string(format!("{dir}/status"))
        .map(|s| context_switches(&s))
        .unwrap_or(0);
    Some(Thread {
        tid,
        state,
        switches,
        cpu_ns: cpu_ns(&stat).unwrap_or(0),
    })
}

/// The CPU time of a `stat` line, in nanoseconds: its user and system time, in clock ticks.
fn cpu_ns(stat: &str) -> Option<u64> {
    // After the command name: state is field 3, utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as u64,
        _ => 100,
    };
    Some(ticks.saturating_mul(1_000_000_000) / per_second)
}

/// The state letter of a `stat` line: it follows the command name, which may hold spaces and
/// parentheses.
fn state_letter(stat: &str) -> Option<char> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Whether a `syscall` line says the thread is in a timed sleep: its first field is the number
/// of the call it is in (`running` while it runs, `-1` outside any call).
fn sleeps(syscall: &str) -> bool {
    let Some(number) = syscall.split_whitespace().next() else {
        return false;
    };
    let Ok(number) = number.parse::<i64>() else {
        return false;
    };
    number == libc::SYS_nanosleep || number == libc::SYS_clock_nanosleep
}

/// The sum of `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` in a `status` file.
fn context_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        .sum()
}

/// How many threads are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) alive: u64,
    pub(crate) runnable: u64,
    pub(crate) asleep: u64,
    pub(crate) blocked: u64,
    pub(crate) stopped: u64,
}

impl Counts {
    pub(crate) fn of(threads: &[Thread]) -> Counts {
        let mut c = Counts {
            alive: threads.len() as u64,
            ..Counts::default()
        };
        for t in threads {
            match t.state {
                State::Runnable => c.runnable += 1,
                State::Asleep => c.asleep += 1,
                State::Blocked => c.blocked += 1,
                State::Stopped => c.stopped += 1,
            }
        }
        c
    }

    /// Adds the counts to a `chaos-pause` or `teardown-hold` record.
    pub(crate) fn write(&self, record: &mut Record) {
        record
            .u64(field::ALIVE, self.alive)
            .u64(field::RUNNABLE, self.runnable)
            .u64(field::ASLEEP, self.asleep)
            .u64(field::BLOCKED, self.blocked)
            .u64(field::STOPPED, self.stopped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier, Condvar, Mutex};
    use std::time::Duration;

    #[test]
    fn a_state_letter_follows_a_command_name_with_parentheses() {
        assert_eq!(state_letter("42 (a (b) c) S 1 42"), Some('S'));
        assert_eq!(state_letter("42 (worker) R 1"), Some('R'));
        assert_eq!(state_letter("42 (cut"), None);
    }

    #[test]
    fn only_the_timed_sleeps_are_sleep() {
        let line = |n: i64| format!("{n} 0x7ffd 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f12");
        assert!(sleeps(&line(libc::SYS_nanosleep)));
        assert!(sleeps(&line(libc::SYS_clock_nanosleep)));
        assert!(!sleeps(&line(libc::SYS_futex)));
        assert!(!sleeps(&line(libc::SYS_read)));
        assert!(!sleeps("running"));
        assert!(!sleeps("-1 0x7ffd 0x7f12"));
    }

    #[test]
    fn context_switches_add_both_kinds() {
        let status = "Name:\tw\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t2\n";
        assert_eq!(context_switches(status), 9);
    }

    /// Until `ready` holds for some survey of the others, at most a few seconds.
    fn wait_for(ready: impl Fn(&[Thread]) -> bool) -> Vec<Thread> {
        for _ in 0..500 {
            let now = others();
            if ready(&now) {
                return now;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the threads never got there: {:?}", others());
    }

    /// A thread that spins has CPU time of its own, and it grows, as `others` reads it.
    #[test]
    fn a_spinning_thread_gains_cpu_time() {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {}
            })
        };
        let tid = rx.recv().unwrap();
        let cpu = || {
            others()
                .iter()
                .find(|t| t.tid == tid)
                .expect("the spinner")
                .cpu_ns
        };
        let before = cpu();
        while cpu() < before + 100_000_000 {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
    }

    /// Real threads of this test process, in each state: one in a long sleep, one waiting on a
    /// condition variable, one spinning. Each is found in its state (the test's harness threads
    /// are there too, so the counts are at least these).
    #[test]
    fn threads_asleep_blocked_and_running_are_told_apart() {
        let start = Arc::new(Barrier::new(4));
        let stop = Arc::new(AtomicBool::new(false));
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let mut tids = Vec::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = {
            let (start, stop, tx) = (start.clone(), stop.clone(), tx.clone());
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(("asleep", unsafe { libc::gettid() } as u32))
                    .unwrap();
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        let waiter = {
            let (start, gate, tx) = (start.clone(), gate.clone(), tx.clone());
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(("blocked", unsafe { libc::gettid() } as u32))
                    .unwrap();
                start.wait();
                let (lock, cv) = &*gate;
                let mut open = lock.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
            })
        };
        let spinner = {
            let (start, stop, tx) = (start.clone(), stop.clone(), tx.clone());
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(("runnable", unsafe { libc::gettid() } as u32))
                    .unwrap();
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        for _ in 0..3 {
            tids.push(rx.recv().unwrap());
        }
        start.wait();
        let state_of =
            |now: &[Thread], tid: u32| now.iter().find(|t| t.tid == tid).map(|t| t.state);
        let expected = |name: &str| match name {
            "asleep" => State::Asleep,
            "blocked" => State::Blocked,
            _ => State::Runnable,
        };
        let now = wait_for(|now| {
            tids.iter()
                .all(|(name, tid)| state_of(now, *tid) == Some(expected(name)))
        });
        let counts = Counts::of(&now);
        assert!(
            counts.asleep >= 1 && counts.blocked >= 1 && counts.runnable >= 1,
            "{counts:?}"
        );
        assert_eq!(
            counts.alive,
            counts.runnable + counts.asleep + counts.blocked + counts.stopped
        );
        stop.store(true, Ordering::Relaxed);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        for t in [sleeper, waiter, spinner] {
            t.join().unwrap();
        }
    }
}
