// SPDX-License-Identifier: MIT
//! SIGBUS: the fault path's entry, chaining to the program's own handler, alternate stacks.
//!
//! The pager's handler stays installed for the life of the process (`SA_SIGINFO | SA_ONSTACK |
//! SA_RESTART`, every signal blocked while it runs). The program's `sigaction`/`signal` calls
//! for SIGBUS are recorded instead of installed (ART's sigchain model): a SIGBUS that is not a
//! missing managed page (`si_code != BUS_ADRERR`, or an address outside every region) goes to
//! the recorded action, with the mask the program asked for minus SIGBUS itself. A fault with
//! SIGBUS blocked kills the process (the kernel forces the default action), so the wrappers
//! also strip SIGBUS from every mask the program sets (`strip_sigbus`).
//!
//! Every thread runs the handler on an alternate stack the pager maps for itself (the fault
//! may be on the thread's own stack page, if that is managed, and the handler's stack must
//! never be managed memory). The program's `sigaltstack` calls are recorded per thread, not
//! installed (`user_sigaltstack`): a stack it allocates with malloc or mmap is managed memory,
//! and a SIGBUS delivered onto an evicted page of it killed the program (vim at its start). Its
//! `SA_ONSTACK` handlers run on the pager's stack instead, which is larger than any the program
//! asks for in practice ([`ALT_STACK`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::sys::{self, ErrnoGuard, NextSym};

/// Alternate signal stack size: the handler decompresses on it and may reclaim (compress).
pub const ALT_STACK: usize = 256 * 1024;

thread_local! {
    /// This thread's alternate stack of the pager's own (0: none).
    static OWN_ALT_STACK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The alternate stack the program set on this thread (`None`: disabled, as at start).
    static PROGRAM_ALT_STACK: std::cell::Cell<Option<(usize, usize)>> =
        const { std::cell::Cell::new(None) };
}

/// `sigaltstack(2)` as a system call: the preload exports `sigaltstack` itself.
fn raw_sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> i32 {
    // SAFETY: the kernel reads `ss` and writes `old` (each may be null); x86-64's `stack_t`
    // is the kernel's.
    match unsafe {
        sys::direct_syscall(
            libc::SYS_sigaltstack,
            [ss as usize, old as usize, 0, 0, 0, 0],
        )
    } {
        Ok(_) => 0,
        Err(e) => {
            sys::set_errno(e);
            -1
        }
    }
}

/// The program's `sigaltstack`. While this thread runs on a stack of the pager's own, the call
/// is emulated: it is checked as the kernel checks it (`EPERM` on the alternate stack,
/// `EINVAL`, `ENOMEM` below `MINSIGSTKSZ`), recorded, and reported back by later calls, while
/// the pager's stack stays installed. Otherwise it goes to the kernel.
///
/// # Safety
/// As `sigaltstack(2)`: `ss` and `old` are null or valid.
pub unsafe fn user_sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> i32 {
    if !installed() || OWN_ALT_STACK.with(|s| s.get()) == 0 {
        return raw_sigaltstack(ss, old);
    }
    // SAFETY: a zeroed `stack_t` is valid; the kernel fills it.
    let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
    if raw_sigaltstack(std::ptr::null(), &mut cur) != 0 {
        return -1;
    }
    let on_stack = cur.ss_flags & libc::SS_ONSTACK != 0;
    let new = if ss.is_null() {
        None
    } else {
        // SAFETY: the caller's in-pointer.
        let s = unsafe { *ss };
        let mode = s.ss_flags & !SS_AUTODISARM;
        let err = if on_stack {
            libc::EPERM
        } else if mode != 0 && mode != libc::SS_DISABLE {
            libc::EINVAL
        } else if mode == 0 && s.ss_size < libc::MINSIGSTKSZ {
            libc::ENOMEM
        } else {
            0
        };
        if err != 0 {
            sys::set_errno(err);
            return -1;
        }
        Some((mode != libc::SS_DISABLE).then_some((s.ss_sp as usize, s.ss_size)))
    };
    if !old.is_null() {
        let rec = PROGRAM_ALT_STACK.with(|s| s.get());
        let (sp, size, flags) = match rec {
            Some((sp, size)) => (sp, size, if on_stack { libc::SS_ONSTACK } else { 0 }),
            None => (0, 0, libc::SS_DISABLE),
        };
        // SAFETY: the caller's out-pointer.
        unsafe {
            *old = libc::stack_t {
                ss_sp: sp as *mut libc::c_void,
                ss_flags: flags,
                ss_size: size,
            }
        };
    }
    if let Some(rec) = new {
        PROGRAM_ALT_STACK.with(|s| s.set(rec));
    }
    0
}

/// `SS_AUTODISARM` (4.7), not in every libc crate version.
const SS_AUTODISARM: i32 = 1 << 31;

static REAL_SIGACTION: NextSym = NextSym::new(c"sigaction");

/// The program's recorded SIGBUS action.
static USER_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static USER_FLAGS: AtomicU64 = AtomicU64::new(0);
static USER_MASK: AtomicU64 = AtomicU64::new(0);
static INSTALLED: AtomicU64 = AtomicU64::new(0);

type SigactionFn = unsafe extern "C" fn(i32, *const libc::sigaction, *mut libc::sigaction) -> i32;

/// The real `sigaction` (libc's), bypassing the preload library's wrapper.
///
/// # Safety
/// As `sigaction(2)`.
pub unsafe fn real_sigaction(
    sig: i32,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> i32 {
    let p = REAL_SIGACTION.get();
    if p.is_null() {
        return -1;
    }
    // SAFETY: dlsym found libc's sigaction, whose signature this is.
    let f: SigactionFn = unsafe { std::mem::transmute(p) };
    // SAFETY: forwarded under the caller's contract.
    unsafe { f(sig, act, old) }
}

/// Removes SIGBUS from a signal set.
///
/// # Safety
/// `set` must point to a valid `sigset_t` (or be null).
pub unsafe fn strip_sigbus(set: *mut libc::sigset_t) {
    if !set.is_null() && INSTALLED.load(Relaxed) != 0 {
        // SAFETY: the caller passes a valid set.
        unsafe { libc::sigdelset(set, libc::SIGBUS) };
    }
}

/// Is the pager's handler installed (SIGBUS actions are then recorded, not installed)?
pub fn installed() -> bool {
    INSTALLED.load(Relaxed) != 0
}

/// Installs the pager's SIGBUS handler, keeping any action already present as the program's.
pub fn install() -> Result<(), i32> {
    // SAFETY: plain sigaction structs; our handler has the SA_SIGINFO signature.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigfillset(&mut act.sa_mask);
        if real_sigaction(libc::SIGBUS, &act, &mut old) != 0 {
            return Err(sys::errno());
        }
        record(&old);
    }
    INSTALLED.store(1, Relaxed);
    Ok(())
}

/// Unblocks SIGBUS on the calling thread, once the handler is installed and outside any
/// `SigBlock` (whose end would block it again). A process started with SIGBUS blocked (the mask
/// survives exec: a parent that blocked it with a raw system call, or a supervisor that blocks
/// every signal for its children) died at its first fault, as the kernel kills for a fault's
/// SIGBUS that is blocked; the wrappers keep it out of every mask from here on.
pub fn unblock_sigbus() {
    // SAFETY: a plain signal set, read by the kernel.
    unsafe {
        let mut bus: libc::sigset_t = std::mem::zeroed();
        libc::sigaddset(&mut bus, libc::SIGBUS);
        let set = &bus as *const libc::sigset_t as usize;
        let _ = sys::direct_syscall(
            libc::SYS_rt_sigprocmask,
            [libc::SIG_UNBLOCK as usize, set, 0, 8, 0, 0],
        );
    }
}

fn record(act: &libc::sigaction) {
    USER_HANDLER.store(act.sa_sigaction, Relaxed);
    USER_FLAGS.store(act.sa_flags as u64, Relaxed);
    // SAFETY: sigset_t is at least 8 bytes; signals 1..=64 live in its first word.
    let first = unsafe { *(&act.sa_mask as *const libc::sigset_t as *const u64) };
    USER_MASK.store(first, Relaxed);
}

fn recorded() -> libc::sigaction {
    // SAFETY: a zeroed sigaction is valid.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    a.sa_sigaction = USER_HANDLER.load(Relaxed);
    a.sa_flags = USER_FLAGS.load(Relaxed) as i32;
    // SAFETY: writes the first word of the set.
    unsafe { *(&mut a.sa_mask as *mut libc::sigset_t as *mut u64) = USER_MASK.load(Relaxed) };
    a
}

/// The program's `sigaction(SIGBUS, act, old)`: record `act`, report the recorded one.
///
/// # Safety
/// `act`/`old` as for `sigaction(2)`.
pub unsafe fn user_sigaction(act: *const libc::sigaction, old: *mut libc::sigaction) -> i32 {
    if !old.is_null() {
        // SAFETY: the caller's out-pointer.
        unsafe { *old = recorded() };
    }
    if !act.is_null() {
        // SAFETY: the caller's in-pointer.
        record(unsafe { &*act });
    }
    0
}

/// The program's `signal(SIGBUS, h)`: record it, return the previous handler.
pub fn user_signal(h: usize) -> usize {
    let prev = USER_HANDLER.swap(h, Relaxed);
    USER_FLAGS.store((libc::SA_RESTART) as u64, Relaxed);
    USER_MASK.store(0, Relaxed);
    prev
}

extern "C" fn on_sigbus(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = ErrnoGuard::new();
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR {
        if let Some(p) = crate::pager() {
            // The x86 page-fault error code: bit 1 set for a write.
            // SAFETY: the kernel passes the interrupted context for an SA_SIGINFO handler.
            let err = unsafe {
                (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_ERR as usize]
            };
            if p.handle_fault(addr, err & 2 != 0) {
                return;
            }
        }
    }
    chain(sig, info, ctx);
}

/// Hands a SIGBUS that is not ours to the program's recorded action.
fn chain(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let h = USER_HANDLER.load(Relaxed);
    let flags = USER_FLAGS.load(Relaxed) as i32;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: the kernel's siginfo.
        let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
        let mut buf = [0u8; 160];
        let n = fmt_unhandled(&mut buf, sys::getpid(), code, addr);
        sys::raw_stderr(&buf[..n]);
        // The default action: reinstall it and return; the access faults again and the kernel
        // kills the process with SIGBUS, as it would have without the pager.
        // SAFETY: plain sigaction struct with SIG_DFL.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            real_sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
        }
        INSTALLED.store(0, Relaxed);
        return;
    }
    if flags & libc::SA_RESETHAND != 0 {
        USER_HANDLER.store(libc::SIG_DFL, Relaxed);
    }
    // Run it with the mask the program asked for (plus SIGBUS's own blocking unless
    // SA_NODEFER), minus SIGBUS itself: a managed fault in it must stay resolvable.
    // SAFETY: ctx is the ucontext the kernel passed; the mask syscall takes our set.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        let mut mask = (*uc).uc_sigmask;
        let words = &mut mask as *mut libc::sigset_t as *mut u64;
        *words |= USER_MASK.load(Relaxed);
        libc::sigdelset(&mut mask, libc::SIGBUS);
        let _ = sys::direct_syscall(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                &mask as *const libc::sigset_t as usize,
                0,
                8,
                0,
                0,
            ],
        );
        if flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(i32) = std::mem::transmute(h);
            f(sig);
        }
    }
}

/// Gives the calling thread an alternate signal stack of the pager's own memory. Returns its
/// base (for `free_alt_stack`), or 0 if the thread already had one of ours.
pub fn ensure_alt_stack() -> usize {
    let Ok(base) = sys::map_anon(ALT_STACK) else {
        return 0;
    };
    let ss = libc::stack_t {
        ss_sp: base as *mut libc::c_void,
        ss_flags: 0,
        ss_size: ALT_STACK,
    };
    // The stack is our own mapping, alive until `free_alt_stack`.
    if raw_sigaltstack(&ss, std::ptr::null_mut()) != 0 {
        // SAFETY: our own mapping, unused.
        let _ = unsafe { sys::raw_munmap(base, ALT_STACK) };
        return 0;
    }
    OWN_ALT_STACK.with(|s| s.set(base));
    base
}

/// Disables and frees the calling thread's alternate stack (thread exit).
pub fn free_alt_stack(base: usize) {
    if base == 0 {
        return;
    }
    let ss = libc::stack_t {
        ss_sp: std::ptr::null_mut(),
        ss_flags: libc::SS_DISABLE,
        ss_size: 0,
    };
    // Disabling the current thread's alternate stack; then the mapping is unused.
    if raw_sigaltstack(&ss, std::ptr::null_mut()) == 0 {
        OWN_ALT_STACK.with(|s| s.set(0));
        // SAFETY: our own mapping, no longer this thread's alternate stack.
        let _ = unsafe { sys::raw_munmap(base, ALT_STACK) };
    }
}

/// "uzswap: pid P: SIGBUS (code C) at 0xADDR is not a managed page\n" without allocating.
fn fmt_unhandled(buf: &mut [u8], pid: i32, code: i32, addr: usize) -> usize {
    let mut n = 0;
    let mut put = |b: &[u8]| {
        for &c in b {
            if n < buf.len() {
                buf[n] = c;
                n += 1;
            }
        }
    };
    let num = |v: u64, base: u64| {
        let mut d = [0u8; 20];
        let mut i = d.len();
        let mut v = v;
        loop {
            i -= 1;
            let x = (v % base) as u8;
            d[i] = if x < 10 { b'0' + x } else { b'a' + x - 10 };
            v /= base;
            if v == 0 {
                break;
            }
        }
        d[i..].to_vec()
    };
    let p = num(pid as u64, 10);
    let c = num(code as u64, 10);
    let a = num(addr as u64, 16);
    put(b"uzswap: pid ");
    put(&p);
    put(b": SIGBUS (code ");
    put(&c);
    put(b") at 0x");
    put(&a);
    put(b" is not a page the pager can restore\n");
    n
}
