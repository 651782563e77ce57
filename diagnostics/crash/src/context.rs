//! What the kernel hands an `SA_SIGINFO` handler: the faulting address and the interrupted pc.

use libc::{c_int, c_void, siginfo_t};

use crate::names;

/// The essentials of one delivered signal, read from its `siginfo_t` and `ucontext_t`.
#[derive(Clone, Copy)]
pub struct Delivery {
    pub signo: c_int,
    pub code: c_int,
    /// `si_addr`: the faulting address, for an instruction fault.
    pub addr: Option<u64>,
    /// The sender, for a signal sent by a process (`kill`, `raise`, `abort`).
    pub sender_pid: Option<i64>,
    /// The interrupted pc; 0 when there was no context.
    pub pc: u64,
}

impl Delivery {
    /// Reads what the handler was given.
    ///
    /// # Safety
    /// `info` and `context` are the pointers the kernel passed to an `SA_SIGINFO` handler (or
    /// null).
    pub unsafe fn read(signo: c_int, info: *const siginfo_t, context: *const c_void) -> Self {
        let mut delivery = Delivery {
            signo,
            code: 0,
            addr: None,
            sender_pid: None,
            pc: 0,
        };
        if !info.is_null() {
            // SAFETY: the kernel's siginfo for this signal, valid for the handler's duration.
            let info = unsafe { &*info };
            delivery.code = info.si_code;
            if names::is_instruction_fault(signo, info.si_code) {
                // SAFETY: si_addr is the member the kernel filled for a fault.
                delivery.addr = Some(unsafe { info.si_addr() } as u64);
            } else if names::is_sent_by_process(info.si_code) {
                // SAFETY: si_pid is the member the kernel filled for a process-sent signal.
                delivery.sender_pid = Some(i64::from(unsafe { info.si_pid() }));
            }
        }
        if !context.is_null() {
            // SAFETY: the kernel's ucontext for this signal.
            delivery.pc = unsafe { interrupted_pc(context.cast()) };
        }
        delivery
    }

    /// Whether returning from the handler re-executes the faulting instruction.
    pub fn refaults(&self) -> bool {
        names::is_instruction_fault(self.signo, self.code)
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn interrupted_pc(context: *const libc::ucontext_t) -> u64 {
    // SAFETY: the caller passes the kernel's ucontext.
    unsafe { (*context).uc_mcontext.gregs[libc::REG_RIP as usize] as u64 }
}

#[cfg(target_arch = "aarch64")]
unsafe fn interrupted_pc(context: *const libc::ucontext_t) -> u64 {
    // SAFETY: the caller passes the kernel's ucontext.
    unsafe { (*context).uc_mcontext.pc }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("vkexit-crash reads the pc on x86_64 and aarch64 only");
