// SPDX-License-Identifier: MIT
//! The logic behind the preload library's libc wrappers (the exported symbols themselves live
//! in `uzswap-preload`). Every function here is called with the program's arguments and returns
//! what the libc call would; the preload crate only forwards.
//!
//! What is covered (the EFAULT path, see docs/pager.md): buffers passed to `read`, `pread`,
//! `readv`, `preadv`, `write`, `pwrite`, `writev`, `pwritev`, `recv`, `recvfrom`, `recvmsg`,
//! `send`, `sendto`, `sendmsg`, `poll`, `ppoll`, `epoll_wait`, `getrandom`, `fread`, `fwrite`,
//! and the argv/envp of the `exec` family and `posix_spawn` are made resident and pinned for
//! the call; the preload's `calls.rs` pins many more (paths, results, `ioctl`, `fcntl`, ...), and
//! a stdio buffer the program hands to `setvbuf` holds a [`LongPin`] until the stream is closed.
//! Anything else the kernel reads or writes in managed memory (a raw `syscall()` other than a
//! futex or `getrandom`) can still meet an evicted page and get EFAULT.

use std::sync::atomic::Ordering::Relaxed;

use crate::region::PAGE;
use crate::sys::{self, InPager, SigBlock};

/// Pins buffers for the length of a system call (unpins on drop).
pub struct Pinned {
    bufs: [(usize, usize); 8],
    n: usize,
    extra: Vec<(usize, usize)>,
    /// False: only make the buffers resident (see [`Pinned::touching`]).
    pin: bool,
    /// Page span `[lo, hi)` of the last managed buffer added (0, 0: none): a buffer whose
    /// pages it already covers needs nothing more (see [`Pinned::add`]).
    last: (usize, usize),
}

impl Pinned {
    pub const fn none() -> Pinned {
        Pinned::with_pins(true)
    }

    const fn with_pins(pin: bool) -> Pinned {
        Pinned {
            bufs: [(0, 0); 8],
            n: 0,
            extra: Vec::new(),
            pin,
            last: (0, 0),
        }
    }

    /// Makes the buffers resident without pinning them: for a call that may never return to
    /// unpin (an `exec` in a `vfork` child, whose pins would stay on the parent's pages for
    /// good: 255 `subprocess.run` calls then saturated a page's pin count and the next exec
    /// waited forever). Such a call must be retried if it meets an evicted page after all.
    pub const fn touching() -> Pinned {
        Pinned::with_pins(false)
    }

    /// Pins `[addr, addr+len)` if it touches managed memory.
    #[inline]
    pub fn add(&mut self, addr: *const libc::c_void, len: usize) {
        let Some(p) = crate::pager() else { return };
        let a = addr as usize;
        // The range check first: it is a few plain loads, `in_pager` a thread-local lookup, and
        // most arguments (the stack, static data, libc's memory) are not managed.
        if len == 0 || !p.maybe_managed(a, len) || sys::in_pager() {
            return;
        }
        let lo = a & !(PAGE - 1);
        let hi = a.saturating_add(len).div_ceil(PAGE) * PAGE;
        // Buffers that follow one another (an exec's argv and envp: the pointer array, then
        // each string, laid out one after the other by the shell's allocator) share pages:
        // pin only the pages the last buffer did not cover, as one extension of it. An exec
        // from a shell's child pinned each of its ~70 pointers and strings separately, with
        // two `sigprocmask` calls for every pin past the eighth.
        let (last_lo, last_hi) = self.last;
        let (from, extend) = if lo >= last_lo && lo <= last_hi && last_hi > 0 {
            if hi <= last_hi {
                return;
            }
            (last_hi, true)
        } else {
            (lo, false)
        };
        if !p.pin_range(from, hi - from, self.pin) {
            return;
        }
        if extend {
            self.last.1 = hi;
        } else {
            self.last = (lo, hi);
        }
        if !self.pin {
            return;
        }
        if extend {
            // The last recorded range grows to the new end (its unpin covers the same pages
            // that were pinned: every managed page of the span, once).
            let r = match self.extra.last_mut() {
                Some(r) => r,
                None => &mut self.bufs[self.n - 1],
            };
            r.1 = hi - r.0;
        } else if self.n < self.bufs.len() {
            self.bufs[self.n] = (a, len);
            self.n += 1;
        } else {
            let _b = SigBlock::new();
            let _g = InPager::enter();
            self.extra.push((a, len));
        }
    }

    /// Whether anything was pinned.
    pub fn any(&self) -> bool {
        self.n > 0 || !self.extra.is_empty()
    }

    /// Pins every buffer of an iovec array (and the array itself).
    ///
    /// # Safety
    /// `iov` must point to `cnt` iovecs (or be null).
    pub unsafe fn add_iov(&mut self, iov: *const libc::iovec, cnt: i32) {
        if iov.is_null() || cnt <= 0 {
            return;
        }
        let bytes = cnt as usize * std::mem::size_of::<libc::iovec>();
        self.add(iov.cast(), bytes);
        for k in 0..cnt as usize {
            // SAFETY: the caller's array of `cnt` iovecs, now resident.
            let v = unsafe { *iov.add(k) };
            self.add(v.iov_base, v.iov_len);
        }
    }

    /// Pins a msghdr, its iovecs, its name and its control buffer.
    ///
    /// # Safety
    /// `msg` must point to a valid msghdr (or be null).
    pub unsafe fn add_msg(&mut self, msg: *const libc::msghdr) {
        if msg.is_null() {
            return;
        }
        self.add(msg.cast(), std::mem::size_of::<libc::msghdr>());
        // SAFETY: valid msghdr per the caller, now resident.
        let m = unsafe { *msg };
        self.add(m.msg_name, m.msg_namelen as usize);
        self.add(m.msg_control, m.msg_controllen);
        // SAFETY: the msghdr's own iovec array.
        unsafe { self.add_iov(m.msg_iov, m.msg_iovlen as i32) };
    }

    /// Pins a NUL-terminated string (nothing for null).
    ///
    /// # Safety
    /// `s` must be a valid C string or null.
    pub unsafe fn add_str(&mut self, s: *const libc::c_char) {
        if s.is_null() {
            return;
        }
        // SAFETY: a valid C string; strlen touches it in user mode (faults resolve).
        let len = unsafe { libc::strlen(s) } + 1;
        self.add(s.cast(), len);
    }

    /// Pins a NULL-terminated array of C strings (argv, envp) and the strings.
    ///
    /// # Safety
    /// `v` must be a valid NULL-terminated array of C strings (or null).
    pub unsafe fn add_strv(&mut self, v: *const *const libc::c_char) {
        if v.is_null() {
            return;
        }
        // The array first, as one range (read in user mode to find its end: faults resolve),
        // then the strings in order, so that strings laid out one after the other merge into
        // one pin (`add`) instead of alternating with the array's slots.
        let mut n = 0;
        // SAFETY: within the caller's array up to its NULL terminator.
        while !unsafe { *v.add(n) }.is_null() {
            n += 1;
        }
        self.add(v.cast(), (n + 1) * std::mem::size_of::<usize>());
        for k in 0..n {
            // SAFETY: as above; the array is pinned now.
            let s = unsafe { *v.add(k) };
            // SAFETY: a valid C string; strlen touches it in user mode (faults resolve).
            let len = unsafe { libc::strlen(s) } + 1;
            self.add(s.cast(), len);
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.n == 0 && self.extra.is_empty() {
            return;
        }
        let _e = sys::ErrnoGuard::new();
        let Some(p) = crate::pager() else { return };
        for &(a, l) in &self.bufs[..self.n] {
            p.unpin_range(a, l);
        }
        if !self.extra.is_empty() {
            let _b = SigBlock::new();
            let _g = InPager::enter();
            for (a, l) in std::mem::take(&mut self.extra) {
                p.unpin_range(a, l);
            }
        }
    }
}

/// A pin that outlives the call that took it: a stdio stream's buffer handed over by
/// `setvbuf`, which glibc fills and drains with its internal system calls (no wrapper sees
/// them), so its pages must stay resident for as long as the stream uses it. Taken by
/// [`LongPin::new`], released by [`LongPin::release`] (not on drop: the holder keeps it in a
/// table of its own). Like a scoped pin it holds one count in each page's state word; the
/// holder must release it before the memory is freed (as a stream must be closed before its
/// buffer is), and must keep few at once: a page's count is capped at `PIN_MAX` (255) and a
/// pin beyond it waits for one to go, which a long pin never does on its own.
#[derive(Debug, PartialEq, Eq)]
pub struct LongPin {
    addr: usize,
    len: usize,
}

impl LongPin {
    /// Makes `[addr, addr+len)` resident and pinned; `None` if it touches no managed memory
    /// (then there is nothing to release).
    pub fn new(addr: *const libc::c_void, len: usize) -> Option<LongPin> {
        let p = crate::pager()?;
        let a = addr as usize;
        if len == 0 || !p.maybe_managed(a, len) || sys::in_pager() {
            return None;
        }
        let _e = sys::ErrnoGuard::new();
        p.pin_range(a, len, true)
            .then_some(LongPin { addr: a, len })
    }

    /// The pinned range: (address, length).
    pub fn range(&self) -> (usize, usize) {
        (self.addr, self.len)
    }

    /// Releases the pin (its pages may be evicted again).
    pub fn release(self) {
        let _e = sys::ErrnoGuard::new();
        if let Some(p) = crate::pager() {
            p.unpin_range(self.addr, self.len);
        }
    }
}

/// Whether `[addr, addr+len)` may touch managed memory (false before the pager is set up): a
/// few plain loads, for wrappers on hot paths. No thread-local lookup (a general-dynamic TLS
/// access in this shared object costs as much as an uncontended lock); `Pinned::add` makes
/// that check on the slow path.
#[inline]
pub fn maybe_managed(addr: usize, len: usize) -> bool {
    crate::pager().is_some_and(|p| p.maybe_managed(addr, len))
}

/// Counts a futex wait whose words were pinned (`pinned_futex_waits` in the report).
pub fn count_pinned_wait() {
    if let Some(p) = crate::pager() {
        p.seg.pinned_waits.fetch_add(1, Relaxed);
    }
}

/// Should `io_uring_setup` be refused (the pager manages this process's memory)? Counts the
/// refusal (`io_uring_refused` in the report).
pub fn refuse_io_uring() -> bool {
    let Some(p) = crate::pager() else {
        return false;
    };
    p.seg.io_uring_refused.fetch_add(1, Relaxed);
    true
}

/// Takes `[addr, addr+len)` out of paging for good, if it is managed (see
/// `Pager::unmanage_range`): a stack the program runs on, whose signal frames the kernel writes
/// itself (a frame that meets an evicted or never-filled page is SIGSEGV, not a fault the
/// pager could resolve).
pub fn unmanage(addr: usize, len: usize) {
    if let Some(p) = crate::pager() {
        if len != 0 && !sys::in_pager() && p.maybe_managed(addr, len) {
            let _b = SigBlock::new();
            p.unmanage_range(addr, len);
        }
    }
}

/// A seccomp filter is about to go in (`prctl(PR_SET_SECCOMP)`, `seccomp(2)`): it may deny
/// the system calls the fault path makes (`ioctl`, `madvise`, ...), so this process stops
/// being paged first (`Pager::detach`; counted as `seccomp_detached` in the report).
pub fn before_seccomp() {
    if let Some(p) = crate::pager() {
        if !sys::in_pager() {
            let _b = SigBlock::new();
            p.detach();
        }
    }
}

/// This process's malloc heap stays unmanaged (said on stderr by the caller): counted for the
/// report.
pub fn count_heap_unmanaged() {
    if let Some(s) = crate::tree_segment() {
        s.heaps_unmanaged.fetch_add(1, Relaxed);
    }
}

/// Does `prctl(op, ...)` change credentials that only the calling thread holds and that
/// decide whether a later `setuid`-family call succeeds there? (`PR_SET_KEEPCAPS`,
/// `PR_SET_SECUREBITS`: see [`around_thread_credentials`].)
pub fn prctl_changes_thread_credentials(op: i32) -> bool {
    op == libc::PR_SET_KEEPCAPS || op == libc::PR_SET_SECUREBITS
}

/// Does the system call `nr` (arguments `a1`, `a2`) need the pager's threads stopped around
/// it ([`around_thread_credentials`])? Those that change the calling thread's credentials
/// alone: `capset` and those `prctl`s anyway, the `setuid` family when made with `syscall`
/// (glibc's functions change every thread); and `unshare`/`setns` into a user namespace
/// ([`namespace_call_needs_one_thread`]).
pub fn syscall_parks_threads(nr: i64, a1: i64, a2: i64) -> bool {
    (nr == libc::SYS_unshare && namespace_call_needs_one_thread(a1, None))
        || (nr == libc::SYS_setns && namespace_call_needs_one_thread(0, Some(a2)))
        || matches!(
            nr,
            libc::SYS_capset
                | libc::SYS_setuid
                | libc::SYS_setgid
                | libc::SYS_setreuid
                | libc::SYS_setregid
                | libc::SYS_setresuid
                | libc::SYS_setresgid
                | libc::SYS_setgroups
        )
        || (nr == libc::SYS_prctl && i32::try_from(a1).is_ok_and(prctl_changes_thread_credentials))
}

/// Does `unshare(flags)` (`setns` with `setns_type`: a namespace type, 0 for any) need a
/// process of one thread? Entering or making a user namespace does (EINVAL otherwise), and it
/// gives the caller new credentials: see [`around_thread_credentials`]. `unshare -U` failed
/// under the pager, whose reclaim thread made every process multithreaded.
pub fn namespace_call_needs_one_thread(unshare_flags: i64, setns_type: Option<i64>) -> bool {
    let user = i64::from(libc::CLONE_NEWUSER);
    match setns_type {
        Some(t) => t == 0 || t == user,
        None => unshare_flags & user != 0,
    }
}

/// Makes `call`, which changes credentials of the calling thread only, with the pager's own
/// threads of this process stopped, and starts them again afterwards from this thread, so
/// that they hold the same credentials as the thread that changed them
/// (`Pager::park_threads` says why: glibc aborts a `setuid` that fails in one thread).
pub fn around_thread_credentials<R>(call: impl FnOnce() -> R) -> R {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() => p,
        _ => return call(),
    };
    {
        let _b = SigBlock::new();
        p.park_threads();
    }
    let r = call();
    // Started with every signal blocked, as at init.
    let _b = SigBlock::new();
    p.unpark_threads();
    r
}

/// Should a new mapping with these arguments be managed?
pub fn wants(len: usize, flags: i32, fd: i32) -> bool {
    let anon_private = flags & libc::MAP_ANONYMOUS != 0
        && flags & libc::MAP_PRIVATE != 0
        && flags & libc::MAP_SHARED == 0;
    let excluded = libc::MAP_STACK | libc::MAP_GROWSDOWN | libc::MAP_HUGETLB;
    anon_private && flags & excluded == 0 && fd == -1 && len >= 4096 && !sys::in_pager()
}

/// `mmap`: the real call, then management of fresh private anonymous memory.
///
/// # Safety
/// As `mmap(2)`.
pub unsafe fn mmap(addr: usize, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> usize {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() => p,
        // SAFETY: forwarded.
        _ => return to_ret(unsafe { sys::raw_mmap(addr, len, prot, flags, fd, off) }),
    };
    let b = SigBlock::new();
    // MAP_FIXED replaces what was there; MAP_FIXED_NOREPLACE fails instead (nothing to drop).
    let fixed = flags & libc::MAP_FIXED != 0 && flags & libc::MAP_FIXED_NOREPLACE == 0;
    let manage = wants(len, flags, fd);
    // MAP_POPULATE and MAP_LOCKED fill (and lock) the pages inside the call, before the range
    // is managed: those pages were resident, uncharged and never evicted (64 MiB of
    // MAP_POPULATE under 16M peaked at 85 MiB RSS with the budget reported kept). The range is
    // managed empty and then filled (and locked) as `madvise(MADV_POPULATE_WRITE)` and `mlock`
    // do it, a piece at a time with reclaim between, as the kernel's populate reclaims under a
    // memory limit.
    let fill = if manage {
        flags & (libc::MAP_POPULATE | libc::MAP_LOCKED)
    } else {
        0
    };
    let mut guard = if fixed { p.lock_range(addr, len) } else { None };
    // SAFETY: forwarded under the caller's contract.
    let r = unsafe { sys::raw_mmap(addr, len, prot, flags & !fill, fd, off) };
    if let (Some(g), Ok(_)) = (guard.as_mut(), r) {
        g.forget(true);
    }
    drop(guard);
    if fixed && r.is_ok() {
        crate::mlock::forget(addr, len);
    }
    let a = match r {
        Ok(a) => a,
        Err(e) => return to_ret(Err(e)),
    };
    if !(manage && p.manage(a, len)) {
        crate::mlock::after_unmanaged_mmap(a, len, prot);
    }
    drop(b);
    if fill & libc::MAP_LOCKED != 0 && crate::mlock::mlock(a, len, 0) != 0 && !fixed {
        // The kernel fails MAP_LOCKED with EAGAIN when the lock would pass RLIMIT_MEMLOCK,
        // before it maps anything (its populate's failures it ignores). Over a MAP_FIXED
        // range the old mapping is gone already: that one stays, unlocked.
        // SAFETY: the range this call just mapped, unmapped again before anyone saw it.
        unsafe { munmap(a, len) };
        return to_ret(Err(libc::EAGAIN));
    } else if fill & libc::MAP_POPULATE != 0 && prot & libc::PROT_WRITE != 0 {
        // (A read-only private mapping's populate maps the zero page: nothing to fill.)
        // SAFETY: the range just mapped for the caller, filled as the flag asked.
        let _ = unsafe { madvise(a, len, MADV_POPULATE_WRITE) };
    }
    a
}

fn to_ret(r: Result<usize, i32>) -> usize {
    match r {
        Ok(a) => a,
        Err(e) => {
            sys::set_errno(e);
            usize::MAX // MAP_FAILED / -1
        }
    }
}

/// `munmap`.
///
/// # Safety
/// As `munmap(2)`.
pub unsafe fn munmap(addr: usize, len: usize) -> i32 {
    let _b = SigBlock::new();
    let p = crate::pager().filter(|_| !sys::in_pager());
    let mut guard = p.and_then(|p| p.lock_range(addr, len));
    // SAFETY: forwarded.
    let r = unsafe { sys::raw_munmap(addr, len) };
    // Forgotten only once the kernel has unmapped the range: it refuses some calls before
    // changing anything (an unaligned or empty range: EINVAL; a sealed one: EPERM), and an
    // unaligned `munmap` under the pager lost the range's evicted pages (a SIGBUS later).
    if let (Some(g), Ok(())) = (guard.as_mut(), r) {
        g.forget(true);
    }
    drop(guard);
    if p.is_some() && r.is_ok() {
        crate::mlock::forget(addr, len);
    }
    ret0(r)
}

/// `mprotect` (`pkey_mprotect` with `pkey`): on managed memory, made under the regions write
/// lock. An eviction of a read-only page reads it and then drops it (`UFFDIO_MOVE` takes only
/// pages of writable mappings), holding the lock for reading: a protection change between the
/// two would let a write in that the drop then discards.
///
/// # Safety
/// As `mprotect(2)`.
pub unsafe fn mprotect(addr: usize, len: usize, prot: i32, pkey: Option<i32>) -> i32 {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() && p.maybe_managed(addr, len) => p,
        // SAFETY: forwarded.
        _ => return ret0(unsafe { sys::raw_mprotect(addr, len, prot, pkey) }),
    };
    let _b = SigBlock::new();
    let guard = p.lock_range(addr, len);
    // SAFETY: forwarded.
    let r = unsafe { sys::raw_mprotect(addr, len, prot, pkey) };
    drop(guard);
    ret0(r)
}

fn ret0(r: Result<(), i32>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            sys::set_errno(e);
            -1
        }
    }
}

/// `madvise`: drops on managed ranges forget the pager's copies; `MADV_HUGEPAGE` is refused
/// quietly there (THP faults bypass missing-mode userfaultfd); `MADV_FREE` becomes
/// `MADV_DONTNEED` (a lazily freed page would vanish behind the pager's back).
///
/// # Safety
/// As `madvise(2)`.
pub unsafe fn madvise(addr: usize, len: usize, mut advice: i32) -> i32 {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() && p.maybe_managed(addr, len) => p,
        // SAFETY: forwarded.
        _ => return ret0(unsafe { sys::raw_madvise(addr, len, advice) }),
    };
    let _b = SigBlock::new();
    match advice {
        libc::MADV_HUGEPAGE => return 0,
        // Each drops the range's pages (a guard's install zaps them: after its removal the
        // program reads zeros there, where it read the evicted pages' old contents under the
        // pager; `MADV_DONTNEED_LOCKED` drops locked pages too), and the pager forgets them
        // once the kernel has: it refuses some first (locked memory, `MADV_REMOVE` on the
        // private anonymous memory the pager manages, an unaligned range: EINVAL), and the
        // pages stay. ENOMEM (part of the range unmapped) comes after the rest was dropped.
        libc::MADV_DONTNEED
        | libc::MADV_FREE
        | libc::MADV_REMOVE
        | MADV_GUARD_INSTALL
        | MADV_DONTNEED_LOCKED => {
            if advice == libc::MADV_FREE {
                advice = libc::MADV_DONTNEED;
            }
            let mut guard = p.lock_range(addr, len);
            // SAFETY: forwarded.
            let r = unsafe { sys::raw_madvise(addr, len, advice) };
            if let (Some(g), Ok(()) | Err(libc::ENOMEM)) = (guard.as_mut(), r) {
                g.forget(false);
            }
            drop(guard);
            return ret0(r);
        }
        // A fork child must read zeros in a `MADV_WIPEONFORK` range, where a child's pager
        // would fill it from the parent's evicted pages: taken out of paging.
        libc::MADV_WIPEONFORK => p.unmanage_range(addr, len),
        // A fork child has no `MADV_DONTFORK` range at all: its pager leaves the range out
        // (it could not register it, and the child exited 125). The parent keeps it managed:
        // V8 gives its heap this advice (Node 20: some 280 calls in a short run), which was
        // taken out of paging and out of the budget until 2026-11-29.
        libc::MADV_DONTFORK | libc::MADV_DOFORK => {
            let mut guard = p.lock_range(addr, len);
            // SAFETY: forwarded.
            let r = unsafe { sys::raw_madvise(addr, len, advice) };
            if let (Some(g), Ok(()) | Err(libc::ENOMEM)) = (guard.as_mut(), r) {
                g.mark_dontfork(advice == libc::MADV_DONTFORK);
            }
            drop(guard);
            return ret0(r);
        }
        MADV_POPULATE_READ | MADV_POPULATE_WRITE => {
            // SAFETY: forwarded.
            let r = unsafe { sys::raw_madvise(addr, len, advice) };
            if r != Err(libc::EFAULT) {
                return ret0(r);
            }
            // The kernel's populate met a managed page that is evicted or was never filled
            // (userfaultfd in SIGBUS mode: EFAULT; a JVM pre-touching its heap this way got
            // "Bad address"). Fill them the way a fault would, a piece at a time so that
            // reclaim can make room between pieces, as the kernel's populate reclaims under a
            // memory limit. A never-filled page is filled even for POPULATE_READ, which the
            // kernel would map to the zero page.
            drop(_b);
            let end = addr.saturating_add(len);
            let mut a = addr;
            while a < end {
                let n = (end - a).min(POPULATE_PIECE);
                p.pin_range(a, n, false);
                a += n;
            }
            return 0;
        }
        _ => {}
    }
    // SAFETY: forwarded.
    ret0(unsafe { sys::raw_madvise(addr, len, advice) })
}

/// `MADV_DONTNEED_LOCKED` (Linux 5.18), `MADV_GUARD_INSTALL` (6.13): not in the libc crate.
const MADV_DONTNEED_LOCKED: i32 = 24;
const MADV_GUARD_INSTALL: i32 = 102;

/// `MREMAP_DONTUNMAP` (Linux 5.7): not in the libc crate.
const MREMAP_DONTUNMAP: i32 = 4;

/// `MADV_POPULATE_READ` and `MADV_POPULATE_WRITE` (Linux 5.14).
const MADV_POPULATE_READ: i32 = 22;
const MADV_POPULATE_WRITE: i32 = 23;
/// Managed pages a populate fills per step.
const POPULATE_PIECE: usize = 1 << 20;

/// `mremap`.
///
/// # Safety
/// As `mremap(2)`.
pub unsafe fn mremap(
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: usize,
) -> usize {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() => p,
        // SAFETY: forwarded.
        _ => return to_ret(unsafe { sys::raw_mremap(old, old_len, new_len, flags, new_addr) }),
    };
    // MREMAP_FIXED unmaps whatever was at the destination: managed pages there are dropped as
    // by `munmap`, once the kernel has done it (else their evicted copies and charges stayed
    // in the books, under a mapping the pager does not manage).
    let into = flags & libc::MREMAP_FIXED != 0 && p.maybe_managed(new_addr, new_len);
    let remap = || {
        let _b = SigBlock::new();
        let mut guard = into.then(|| p.lock_range(new_addr, new_len)).flatten();
        // SAFETY: forwarded.
        let r = unsafe { sys::raw_mremap(old, old_len, new_len, flags, new_addr) };
        if let (Some(g), Ok(_)) = (guard.as_mut(), r) {
            g.forget(true);
        }
        r
    };
    if !p.maybe_managed(old, old_len) {
        return to_ret(remap());
    }
    p.pause();
    let managed = p.prepare_remap(old, old_len);
    let r = remap();
    // `prepare_remap` made the old range resident without pinning it (eviction is paused
    // meanwhile): there is nothing to unpin, and an unpin here took away pins that others
    // hold (a system call's buffer, a stream's buffer) when the mremap failed.
    if let Ok(new) = r {
        let _b = SigBlock::new();
        if managed {
            p.remanage(old, old_len, new, new_len);
            crate::mlock::moved(old, old_len, new, new_len);
            if flags & MREMAP_DONTUNMAP != 0 {
                // The old range stays mapped, empty (its pages moved), and registered: it is
                // managed afresh, as never filled (read as zeros). Cut with the move, it took a
                // SIGBUS the pager did not know at the first touch (status 135).
                p.manage(old, old_len);
            }
        }
    }
    p.resume();
    to_ret(r)
}

/// Masks for `sigprocmask` / `pthread_sigmask` / `sigaction`: SIGBUS is never blocked.
///
/// # Safety
/// `set` must be valid or null.
pub unsafe fn filter_mask(set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    if set.is_null() || !crate::signals::installed() {
        return None;
    }
    // SAFETY: valid per the caller.
    let mut s = unsafe { *set };
    // SAFETY: our own copy.
    unsafe { crate::signals::strip_sigbus(&mut s) };
    Some(s)
}

/// Before `execve` and friends: the path, argv and envp resident and pinned (the kernel reads
/// them), eviction paused, this process's counters handed to the tree (the image is about to
/// be replaced).
pub struct ExecGuard {
    _pins: Pinned,
    retired: bool,
    paused: bool,
    /// In a `vfork` child: the exec's strings, to make resident again before a retry.
    vfork_args: Option<[usize; 3]>,
    retries: u32,
}

/// How often an exec in a `vfork` child is retried after EFAULT (the parent's other threads
/// evicted one of its strings between touching it and the kernel copying it: a window of
/// microseconds against reclaim, so one retry is almost always enough).
const VFORK_EXEC_RETRIES: u32 = 64;

impl ExecGuard {
    /// # Safety
    /// `argv`/`envp` as for `execve(2)`.
    pub unsafe fn new(
        path: *const libc::c_char,
        argv: *const *const libc::c_char,
        envp: *const *const libc::c_char,
    ) -> ExecGuard {
        // In a vfork child (the parent's memory, another pid) nothing of the parent's may
        // change: a successful exec never comes back to undo it. Not even a pin: the strings
        // are only made resident, and the exec is retried if the parent's other threads
        // evicted one meanwhile (`retry_after_efault`).
        let vfork_child = crate::pager().is_some_and(|p| p.pid.load(Relaxed) != sys::getpid());
        let mut pins = if vfork_child {
            Pinned::touching()
        } else {
            Pinned::none()
        };
        // SAFETY: forwarded contract.
        unsafe {
            pins.add_str(path);
            pins.add_strv(argv);
            pins.add_strv(envp);
        }
        let mut retired = false;
        let mut paused = false;
        if let Some(p) = crate::pager() {
            if !vfork_child {
                p.pause();
                paused = true;
                let _b = SigBlock::new();
                p.retire();
                retired = true;
            }
        }
        ExecGuard {
            _pins: pins,
            retired,
            paused,
            vfork_args: vfork_child.then_some([path as usize, argv as usize, envp as usize]),
            retries: 0,
        }
    }

    /// After the exec failed with `err`: whether to call it again. Only in a `vfork` child and
    /// only after EFAULT (an exec that fails with EFAULT has changed nothing yet: the kernel
    /// copies the strings before the point of no return), with the strings made resident again.
    pub fn retry_after_efault(&mut self, err: i32) -> bool {
        let Some([path, argv, envp]) = self.vfork_args else {
            return false;
        };
        if err != libc::EFAULT || self.retries >= VFORK_EXEC_RETRIES {
            return false;
        }
        self.retries += 1;
        let mut touch = Pinned::touching();
        // SAFETY: the same arguments `new` was given, as valid as they were then.
        unsafe {
            touch.add_str(path as *const libc::c_char);
            touch.add_strv(argv as *const *const libc::c_char);
            touch.add_strv(envp as *const *const libc::c_char);
        }
        true
    }
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        // The exec failed: this image goes on.
        if let Some(p) = crate::pager() {
            if self.retired {
                let _b = SigBlock::new();
                p.rejoin();
            }
            if self.paused {
                p.resume();
            }
        }
    }
}

/// fork, before: no eviction in flight, none starting (the child must inherit a consistent
/// table and cache).
pub fn fork_prepare() {
    if let Some(p) = crate::pager() {
        p.lock_for_fork();
    }
}

pub fn fork_parent() {
    if let Some(p) = crate::pager() {
        p.wait_for_fork_child();
        p.unlock_after_fork();
        p.resume();
    }
}

pub fn fork_child() {
    if let Some(p) = crate::pager() {
        // SAFETY: the fork child, one thread, before the pager starts its reclaim thread.
        let r = unsafe { p.unlock_after_fork_child() }.and_then(|()| p.after_fork_child());
        if let Err(e) = r {
            let msg = format!("uzswap: fork child could not take over its memory: {e}\n");
            sys::raw_stderr(msg.as_bytes());
            // SAFETY: ending the child; its memory can't be served.
            unsafe { libc::_exit(125) };
        }
        p.resume();
        // No memory locks are inherited (after the pager's locks are made usable again).
        crate::mlock::after_fork_child();
        if p.cfg.budget_bytes > 0 {
            let _b = SigBlock::new();
            p.reclaim_thread();
        }
    }
}

/// `UZSWAP_DEBUG` as read at init ([`read_env`]): `at_exit` runs with every signal blocked,
/// where the program's own `getenv` (bash exports one, over its heap) could touch an evicted
/// page, and a SIGBUS while blocked kills the process (bash under 1M exited with 135).
static DEBUG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reads the environment `at_exit` needs (at init, before the program's code runs), and keeps
/// the run's own variables for the programs this one execs (`tree_env`).
pub fn read_env() {
    DEBUG.store(std::env::var_os("UZSWAP_DEBUG").is_some(), Relaxed);
    let vars = std::env::vars_os()
        .filter(|(k, _)| k == "LD_PRELOAD" || k.as_encoded_bytes().starts_with(b"UZSWAP_"))
        .filter_map(|(k, v)| {
            let mut kv = k.into_encoded_bytes();
            kv.push(b'=');
            kv.extend_from_slice(v.as_encoded_bytes());
            std::ffi::CString::new(kv).ok()
        })
        .collect();
    let _ = TREE_ENV.set(vars);
}

/// An exec or spawn is about to start a new image (`n` 1), or one that was counted failed
/// (`n` -1): the tree's count of images started, against which those that set up their pager
/// tell how many ran unpaged (statically linked, set-user-ID, a failed start).
pub fn count_exec(n: i64) {
    if let Some(s) = crate::tree_segment() {
        s.execs.fetch_add(n as u64, Relaxed);
    }
}

static TREE_ENV: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();

/// The variables `uzswap run` gave this process (`LD_PRELOAD=<the preload library>[:...]` and
/// every `UZSWAP_*`), as `KEY=VALUE`, read before the program's code ran: what a program it
/// execs needs to be paged in the same tree. The exec and spawn wrappers put back those the
/// program left out of the child's environment (`env -i`, a sanitised environment), so that
/// the budget covers the whole tree as a cgroup covers its descendants.
pub fn tree_env() -> &'static [std::ffi::CString] {
    TREE_ENV.get().map_or(&[], Vec::as_slice)
}

/// At exit (`exit`, `_exit`, the library destructor): hand the counters to the tree once.
pub fn at_exit() {
    if let Some(p) = crate::pager() {
        // The process is ending: no more eviction (faults still load what they need).
        p.pause();
        if p.pid.load(Relaxed) == sys::getpid() && !p.retired.swap(true, Relaxed) {
            let _b = SigBlock::new();
            p.retire();
            crate::pagelog::dump();
            if DEBUG.load(Relaxed) {
                debug_dump(p);
            }
        }
    }
}

fn debug_dump(p: &crate::Pager) {
    let s = p.seg;
    let (nr, pages) = p.region_stats();
    let msg = format!(
        "uzswap[{}]: regions {nr} ({pages} pages) resident {} pool {} peak {} faults {} (pool {} file {} zero {} around {}) evictions {} busy {} misreported {} refaults {} near {} pinned {} over {} p50 {:.1}us p99 {:.1}us\n",
        sys::getpid(),
        s.resident_pages.load(Relaxed),
        s.pool_pages.load(Relaxed),
        s.peak_charged_pages.load(Relaxed),
        s.faults.load(Relaxed),
        s.faults_from_pool.load(Relaxed),
        s.faults_from_swapfile.load(Relaxed),
        s.faults_zero.load(Relaxed),
        s.fault_around_pages.load(Relaxed),
        s.evictions.load(Relaxed),
        s.evict_busy.load(Relaxed),
        s.move_misreported.load(Relaxed),
        s.refaults.load(Relaxed),
        s.refaults_near.load(Relaxed),
        s.pinned_calls.load(Relaxed),
        s.over_budget.load(Relaxed),
        s.quantile_us(0.5),
        s.quantile_us(0.99),
    );
    sys::raw_stderr(msg.as_bytes());
    for (k, v) in s.counters() {
        if v != 0 {
            sys::raw_stderr(format!("  {k} {v}\n").as_bytes());
        }
    }
}
