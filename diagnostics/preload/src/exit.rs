//! `exit`, as the program calls it (through the PLT): `exit-called` with the status and the
//! calling object. The entry is a naked function that hands its return address on, because
//! that is the only reliable way to know the caller.

use std::ffi::c_int;

use vkexit_crash::exit_state;
use vkexit_evidence::timeline::{field, Event};
use vkexit_evidence::Record;

use crate::{objects, real, timeline};

/// `exit(status)`: records, then glibc's `exit`.
///
/// # Safety
/// As `exit`: it runs the exit handlers and never returns.
#[unsafe(naked)]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn exit(_status: c_int) -> ! {
    #[cfg(target_arch = "x86_64")]
    core::arch::naked_asm!("mov rsi, [rsp]", "jmp {from}", from = sym exit_from);
    #[cfg(target_arch = "aarch64")]
    core::arch::naked_asm!("mov x1, x30", "b {from}", from = sym exit_from);
}

unsafe extern "C" fn exit_from(status: c_int, caller: usize) -> ! {
    exit_state::note_exit_called();
    crate::handlers::flush_registrations();
    if timeline::get().is_some() {
        let mut record = Record::new(Event::ExitCalled.as_str());
        record.i64(field::STATUS, status.into());
        let caller_object = objects::object_of(caller).and_then(|o| o.name);
        timeline::c_str_field(&mut record, field::CALLER, caller_object);
        record.hex(field::CALLER_ADDRESS, caller as u64);
        timeline::write(record);
        crate::vulkan::scan(None, None);
        crate::exit_order::take_over(status);
    }
    vkexit_crash::hold_exit_while_crash_is_reported();
    // SAFETY: glibc's exit has this signature.
    let exit: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(real::EXIT.get()) };
    // SAFETY: the program's own call.
    unsafe { exit(status) }
}
