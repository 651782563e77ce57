//! Signal names as the harness reports them (`SIGSEGV`), and raising one for real.

use std::fmt;
use std::str::FromStr;

use libc::c_int;

/// A signal, by number and by its conventional name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// The signal's number.
    pub number: c_int,
    /// Its name, `SIGSEGV`.
    pub name: &'static str,
}

/// The standard Linux signals; real-time signals have no names and no use in a mock.
const SIGNALS: &[(&str, c_int)] = &[
    ("SIGHUP", libc::SIGHUP),
    ("SIGINT", libc::SIGINT),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGILL", libc::SIGILL),
    ("SIGTRAP", libc::SIGTRAP),
    ("SIGABRT", libc::SIGABRT),
    ("SIGBUS", libc::SIGBUS),
    ("SIGFPE", libc::SIGFPE),
    ("SIGKILL", libc::SIGKILL),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGSEGV", libc::SIGSEGV),
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGPIPE", libc::SIGPIPE),
    ("SIGALRM", libc::SIGALRM),
    ("SIGTERM", libc::SIGTERM),
    ("SIGCHLD", libc::SIGCHLD),
    ("SIGCONT", libc::SIGCONT),
    ("SIGSTOP", libc::SIGSTOP),
    ("SIGTSTP", libc::SIGTSTP),
    ("SIGTTIN", libc::SIGTTIN),
    ("SIGTTOU", libc::SIGTTOU),
    ("SIGURG", libc::SIGURG),
    ("SIGXCPU", libc::SIGXCPU),
    ("SIGXFSZ", libc::SIGXFSZ),
    ("SIGVTALRM", libc::SIGVTALRM),
    ("SIGPROF", libc::SIGPROF),
    ("SIGWINCH", libc::SIGWINCH),
    ("SIGIO", libc::SIGIO),
    ("SIGSYS", libc::SIGSYS),
];

impl Signal {
    /// SIGSEGV, the crash most exit bugs end in.
    pub const SEGV: Signal = Signal {
        number: libc::SIGSEGV,
        name: "SIGSEGV",
    };

    /// Raises the signal at this process with its default action, so that a terminating signal
    /// really terminates. Returns only for a signal whose default action is to ignore or stop.
    pub fn raise_with_default_action(self) {
        // Rust's runtime handles SIGSEGV and SIGBUS itself (to report stack overflows) and returns
        // from its handler for a raised signal, which would let the process live on.
        // SAFETY: SIG_DFL is a valid disposition for every signal; for SIGKILL and SIGSTOP the
        // call fails harmlessly, their action being fixed anyway.
        unsafe { libc::signal(self.number, libc::SIG_DFL) };
        // SAFETY: `set` is initialised by sigemptyset before use; unblocking only widens delivery.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, self.number);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
        // SAFETY: raise takes a plain signal number.
        unsafe { libc::raise(self.number) };
    }
}

impl FromStr for Signal {
    type Err = String;

    /// Accepts `SIGSEGV`, `SEGV`, `segv` or a number (`11`).
    fn from_str(s: &str) -> Result<Signal, String> {
        let found = match s.parse::<c_int>() {
            Ok(number) => SIGNALS.iter().find(|(_, n)| *n == number),
            Err(_) => {
                let upper = s.to_ascii_uppercase();
                let name = upper.strip_prefix("SIG").unwrap_or(&upper);
                SIGNALS.iter().find(|(full, _)| &full[3..] == name)
            }
        };
        found
            .map(|&(name, number)| Signal { number, name })
            .ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(name, _)| *name).collect();
                format!("not a signal; known: {}", names.join(", "))
            })
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_short_names_and_numbers() {
        let segv = Signal::SEGV;
        assert_eq!("SIGSEGV".parse(), Ok(segv));
        assert_eq!("segv".parse(), Ok(segv));
        assert_eq!("Sigsegv".parse(), Ok(segv));
        assert_eq!(libc::SIGSEGV.to_string().parse(), Ok(segv));
        assert_eq!("SIGKILL".parse::<Signal>().unwrap().number, libc::SIGKILL);
    }

    #[test]
    fn unknown_signals_list_the_known_ones() {
        let err = "SIGFOO".parse::<Signal>().unwrap_err();
        assert!(err.contains("SIGBUS"), "{err}");
        assert!("0".parse::<Signal>().is_err());
        assert!("".parse::<Signal>().is_err());
    }
}
