// SPDX-License-Identifier: MIT
//! Stacks the program makes out of its own memory: `makecontext` (coroutines) and
//! `pthread_attr_setstack` (threads). The kernel writes a signal frame below the stack pointer
//! itself: on a managed stack a frame that meets an evicted or never-filled page cannot be
//! written, and the thread is killed with SIGSEGV (a coroutine on a malloc'd stack with a
//! SIGALRM timer exited 139 under `--memory-max 16M`). Such a stack is taken out of paging for
//! good when it is handed over (`hooks::unmanage`): it stays resident and outside the budget,
//! and memory the allocator later hands out again from it stays unmanaged too.

use std::ffi::{c_int, c_void};

use uzswap_pager::hooks;
use uzswap_pager::sys::NextSym;

static MAKECONTEXT: NextSym = NextSym::new(c"makecontext");

/// `makecontext(ucp, func, argc, ...)`: variadic, so a naked entry saves the argument
/// registers (and `al`, the vector-register count of a variadic call), lets
/// [`makecontext_stack`] take the context's stack out of paging, and jumps to libc's function
/// with every argument as it came (the stack arguments untouched).
///
/// # Safety
/// As `makecontext(3)`.
#[no_mangle]
#[unsafe(naked)]
pub unsafe extern "C" fn makecontext() {
    core::arch::naked_asm!(
        // Seven pushes: the stack is 16-byte aligned again for the call.
        "push rax",
        "push rdi",
        "push rsi",
        "push rdx",
        "push rcx",
        "push r8",
        "push r9",
        "call {prep}",
        "mov r11, rax",
        "pop r9",
        "pop r8",
        "pop rcx",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "pop rax",
        "jmp r11",
        prep = sym makecontext_stack,
    )
}

/// Takes `ucp`'s stack out of paging; returns libc's `makecontext`.
extern "C" fn makecontext_stack(ucp: *const libc::ucontext_t) -> usize {
    if !ucp.is_null() {
        // SAFETY: the caller's context, set up with its stack before `makecontext`.
        let st = unsafe { (*ucp).uc_stack };
        hooks::unmanage(st.ss_sp as usize, st.ss_size);
    }
    MAKECONTEXT.get() as usize
}

/// # Safety
/// As `pthread_attr_setstack(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_attr_setstack(
    attr: *mut libc::pthread_attr_t,
    addr: *mut c_void,
    size: usize,
) -> c_int {
    static S: NextSym = NextSym::new(c"pthread_attr_setstack");
    hooks::unmanage(addr as usize, size);
    // SAFETY: libc's function, given the caller's arguments.
    unsafe {
        let f: unsafe extern "C" fn(*mut libc::pthread_attr_t, *mut c_void, usize) -> c_int =
            std::mem::transmute(S.get());
        f(attr, addr, size)
    }
}
