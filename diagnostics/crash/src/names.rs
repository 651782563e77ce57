//! Names of signals and of `si_code` values, as the kernel headers spell them. Constant tables
//! only, so they are usable from a signal handler.

use libc::c_int;

/// `SIGSEGV` for 11, and so on; `"SIG?"` for a signal vkexit never watches.
pub fn signal_name(signo: c_int) -> &'static str {
    match signo {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "SIG?",
    }
}

// Generic codes (include/uapi/asm-generic/siginfo.h): who sent the signal.
const SI_USER: c_int = 0;
const SI_KERNEL: c_int = 0x80;
const SI_QUEUE: c_int = -1;
const SI_TIMER: c_int = -2;
const SI_MESGQ: c_int = -3;
const SI_ASYNCIO: c_int = -4;
const SI_SIGIO: c_int = -5;
const SI_TKILL: c_int = -6;

/// `BUS_MCEERR_AO`: a memory error the kernel reports asynchronously; nothing re-executes.
const BUS_MCEERR_AO: c_int = 5;

const SEGV_CODES: &[&str] = &[
    "SEGV_MAPERR",
    "SEGV_ACCERR",
    "SEGV_BNDERR",
    "SEGV_PKUERR",
    "SEGV_ACCADI",
    "SEGV_ADIDERR",
    "SEGV_ADIPERR",
    "SEGV_MTEAERR",
    "SEGV_MTESERR",
    "SEGV_CPERR",
];
const BUS_CODES: &[&str] = &[
    "BUS_ADRALN",
    "BUS_ADRERR",
    "BUS_OBJERR",
    "BUS_MCEERR_AR",
    "BUS_MCEERR_AO",
];
const ILL_CODES: &[&str] = &[
    "ILL_ILLOPC",
    "ILL_ILLOPN",
    "ILL_ILLADR",
    "ILL_ILLTRP",
    "ILL_PRVOPC",
    "ILL_PRVREG",
    "ILL_COPROC",
    "ILL_BADSTK",
    "ILL_BADIADDR",
];
const FPE_CODES: &[&str] = &[
    "FPE_INTDIV",
    "FPE_INTOVF",
    "FPE_FLTDIV",
    "FPE_FLTOVF",
    "FPE_FLTUND",
    "FPE_FLTRES",
    "FPE_FLTINV",
    "FPE_FLTSUB",
    "FPE_DECOVF",
    "FPE_DECDIV",
    "FPE_DECERR",
    "FPE_INVASC",
    "FPE_INVDEC",
    "FPE_FLTUNK",
    "FPE_CONDTRAP",
];

/// The name of `code` for signal `signo`: `SEGV_MAPERR`, `SI_TKILL`, … or `"?"`.
pub fn si_code_name(signo: c_int, code: c_int) -> &'static str {
    match code {
        SI_USER => return "SI_USER",
        SI_KERNEL => return "SI_KERNEL",
        SI_QUEUE => return "SI_QUEUE",
        SI_TIMER => return "SI_TIMER",
        SI_MESGQ => return "SI_MESGQ",
        SI_ASYNCIO => return "SI_ASYNCIO",
        SI_SIGIO => return "SI_SIGIO",
        SI_TKILL => return "SI_TKILL",
        _ => {}
    }
    let table = match signo {
        libc::SIGSEGV => SEGV_CODES,
        libc::SIGBUS => BUS_CODES,
        libc::SIGILL => ILL_CODES,
        libc::SIGFPE => FPE_CODES,
        _ => &[],
    };
    usize::try_from(code)
        .ok()
        .and_then(|c| c.checked_sub(1))
        .and_then(|i| table.get(i))
        .copied()
        .unwrap_or("?")
}

/// Whether the kernel raised `signo` for the instruction at the pc, so that returning from
/// the handler executes it again. Codes ≤ 0 were sent by a process (`kill`, `raise`,
/// `abort`), `SI_KERNEL` by the kernel for other reasons, and `BUS_MCEERR_AO` asynchronously.
pub fn is_instruction_fault(signo: c_int, code: c_int) -> bool {
    let synchronous = matches!(
        signo,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
    );
    synchronous
        && code > 0
        && code != SI_KERNEL
        && !(signo == libc::SIGBUS && code == BUS_MCEERR_AO)
}

/// Whether `code` says a process sent the signal, so that `si_pid` holds the sender.
pub fn is_sent_by_process(code: c_int) -> bool {
    matches!(code, SI_USER | SI_QUEUE | SI_TKILL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_and_codes_have_their_header_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGABRT), "SIGABRT");
        assert_eq!(si_code_name(libc::SIGSEGV, 1), "SEGV_MAPERR");
        assert_eq!(si_code_name(libc::SIGSEGV, 2), "SEGV_ACCERR");
        assert_eq!(si_code_name(libc::SIGBUS, 2), "BUS_ADRERR");
        assert_eq!(si_code_name(libc::SIGILL, 2), "ILL_ILLOPN");
        assert_eq!(si_code_name(libc::SIGFPE, 1), "FPE_INTDIV");
        assert_eq!(si_code_name(libc::SIGABRT, -6), "SI_TKILL");
        assert_eq!(si_code_name(libc::SIGSEGV, 0), "SI_USER");
        assert_eq!(si_code_name(libc::SIGSEGV, 0x80), "SI_KERNEL");
        assert_eq!(si_code_name(libc::SIGSEGV, 77), "?");
        assert_eq!(si_code_name(libc::SIGABRT, 1), "?");
    }

    #[test]
    fn only_kernel_faults_of_an_instruction_refault() {
        assert!(is_instruction_fault(libc::SIGSEGV, 1));
        assert!(is_instruction_fault(libc::SIGFPE, 1));
        assert!(!is_instruction_fault(libc::SIGSEGV, -6));
        assert!(!is_instruction_fault(libc::SIGSEGV, 0x80));
        assert!(!is_instruction_fault(libc::SIGBUS, 5));
        assert!(!is_instruction_fault(libc::SIGABRT, 1));
        assert!(is_sent_by_process(-6) && is_sent_by_process(0));
        assert!(!is_sent_by_process(1));
    }
}
