// SPDX-License-Identifier: MIT
//! `mlock`, `mlock2`, `munlock`, `mlockall`, `munlockall` under the pager (docs/pager.md,
//! "Locked memory"). What the program asked for, as far as paging goes: locked memory is
//! never evicted by the pager and stays locked against the kernel's own swap, and nothing
//! outside what the program maps is populated.
//!
//! - `mlock` of managed memory: the kernel's populate met the userfaultfd's missing pages
//!   (SIGBUS mode) and failed with ENOMEM. The managed pages of the range are pinned first
//!   (made resident; the evictor skips pinned pages), then the real call locks them. Locks do
//!   not nest (one `munlock` undoes any number of `mlock`s), and a page's pin count is capped
//!   at 255, so the locked ranges are kept in a table of page ranges that never overlap: a page
//!   holds at most one pin for locking, whatever the program does.
//! - `mlockall(MCL_CURRENT)` given to the kernel populated every mapping: the 16 GiB heap
//!   reservation and the pager's own reservations (RSS reached 23.8 GiB before the kernel
//!   killed the process). It is emulated instead: eviction of this process stops (the pager's
//!   `pause`, which every eviction path respects), every evicted page comes back, and the
//!   program's unmanaged mappings are locked with real `mlock` calls (walking
//!   /proc/self/smaps). `MCL_FUTURE` is kept here: the `mmap` wrapper locks new unmanaged
//!   mappings of the program, and managed ones are never evicted while the flag is up.

use std::sync::atomic::{
    AtomicU32, AtomicUsize,
    Ordering::{AcqRel, Relaxed},
};

use crate::region::PAGE;
use crate::sys::{self, InPager, SigSpinLock};

/// Locked ranges at once; an `mlock` that would need more fails with EAGAIN (the kernel's
/// answer when "some of the range could not be locked"). Adjacent and overlapping ranges
/// merge, so this is distinct locked stretches, not calls. One slot is always kept free:
/// an `munlock` in the middle of a range splits it in two.
const SLOTS: usize = 256;

/// `(lo, hi)` page-aligned, non-overlapping; `hi == 0`: free.
type Slots = [(usize, usize); SLOTS];

/// In the library's static data (never managed), under a lock taken with signals blocked (a
/// handler that locks memory on this thread can't deadlock on it).
struct Table {
    /// Slots in use: the `munmap`/`madvise` wrappers skip the table while it is empty.
    used: AtomicUsize,
    slots: SigSpinLock<Slots>,
}

static TABLE: Table = Table {
    used: AtomicUsize::new(0),
    slots: SigSpinLock::new([(0, 0); SLOTS]),
};

/// `mlockall` in force: bit 0 eviction is paused for it (`MCL_CURRENT` or `MCL_FUTURE`),
/// bit 1 `MCL_FUTURE`, bit 2 `MCL_ONFAULT`.
static ALL: AtomicU32 = AtomicU32::new(0);
const ALL_ON: u32 = 1;
const ALL_FUTURE: u32 = 2;
const ALL_ONFAULT: u32 = 4;

impl Table {
    fn with<R>(&self, f: impl FnOnce(&mut Slots) -> R) -> R {
        self.slots.with(|s| {
            let r = f(s);
            self.used
                .store(s.iter().filter(|e| e.1 != 0).count(), Relaxed);
            r
        })
    }
}

/// The parts of `[lo, hi)` no slot covers.
fn gaps(s: &Slots, lo: usize, hi: usize) -> Vec<(usize, usize)> {
    let mut cover: Vec<(usize, usize)> = s
        .iter()
        .filter(|e| e.1 != 0 && e.0 < hi && e.1 > lo)
        .copied()
        .collect();
    cover.sort_unstable();
    let mut out = Vec::new();
    let mut at = lo;
    for (a, b) in cover {
        if a > at {
            out.push((at, a));
        }
        at = at.max(b);
    }
    if at < hi {
        out.push((at, hi));
    }
    out
}

/// Takes `[lo, hi)` out of the slots (splitting a slot that straddles it); returns the parts
/// that were covered. Never fails: one slot is always free for a split.
fn cut(s: &mut Slots, lo: usize, hi: usize) -> Vec<(usize, usize)> {
    let mut taken = Vec::new();
    let mut extra = None;
    for e in s.iter_mut().filter(|e| e.1 != 0 && e.0 < hi && e.1 > lo) {
        taken.push((e.0.max(lo), e.1.min(hi)));
        let (a, b) = *e;
        *e = (0, 0);
        if a < lo {
            *e = (a, lo);
        }
        if b > hi {
            if e.1 == 0 {
                *e = (hi, b);
            } else {
                extra = Some((hi, b));
            }
        }
    }
    if let Some(x) = extra {
        if let Some(e) = s.iter_mut().find(|e| e.1 == 0) {
            *e = x;
        }
    }
    taken
}

/// Adds `[lo, hi)` (which overlaps no slot), merged with its neighbours. False if that needs
/// the last free slot.
fn insert(s: &mut Slots, lo: usize, hi: usize) -> bool {
    let touches = |e: &(usize, usize)| e.1 != 0 && (e.1 == lo || e.0 == hi);
    let merged = s.iter().filter(|e| touches(e)).count();
    if s.iter().filter(|e| e.1 == 0).count() + merged < 2 {
        return false;
    }
    let (mut a, mut b) = (lo, hi);
    for e in s.iter_mut().filter(|e| touches(e)) {
        a = a.min(e.0);
        b = b.max(e.1);
        *e = (0, 0);
    }
    *s.iter_mut().find(|e| e.1 == 0).unwrap() = (a, b);
    true
}

fn page_range(addr: usize, len: usize) -> (usize, usize) {
    let lo = addr & !(PAGE - 1);
    (lo, addr.saturating_add(len).div_ceil(PAGE) * PAGE)
}

fn sys_ret(r: libc::c_long) -> i32 {
    if r < 0 {
        -1
    } else {
        0
    }
}

fn raw_mlock2(addr: usize, len: usize, flags: u32) -> i32 {
    // SAFETY: locking changes no memory contents.
    sys_ret(unsafe { libc::syscall(libc::SYS_mlock2, addr, len, flags) })
}

fn raw_munlock(addr: usize, len: usize) -> i32 {
    // SAFETY: unlocking changes no memory contents.
    sys_ret(unsafe { libc::syscall(libc::SYS_munlock, addr, len) })
}

/// `mlock` (`flags` 0) and `mlock2`. Returns what the libc call would (errno set on -1).
pub fn mlock(addr: usize, len: usize, flags: u32) -> i32 {
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() && p.maybe_managed(addr, len) => p,
        _ => return raw_mlock2(addr, len, flags),
    };
    let (lo, hi) = page_range(addr, len);
    if len == 0 || hi <= lo {
        return raw_mlock2(addr, len, flags);
    }
    // The table is held across the pin and the real call, so that a failed call can put it
    // back as it was. MLOCK_ONFAULT is treated as MLOCK: the managed pages are made resident
    // now (pinning a page not there yet would need the fault path to consult this table).
    let r = TABLE.with(|s| {
        let _e = sys::ErrnoGuard::new();
        let saved = *s;
        let new = gaps(s, lo, hi);
        for &(a, b) in &new {
            if !insert(s, a, b) {
                *s = saved;
                return Err(libc::EAGAIN);
            }
        }
        let mut pinned = Vec::with_capacity(new.len());
        for &(a, b) in &new {
            if p.pin_range(a, b - a, true) {
                pinned.push((a, b));
            }
        }
        if raw_mlock2(addr, len, flags) != 0 {
            let e = sys::errno();
            *s = saved;
            for &(a, b) in &pinned {
                p.unpin_range(a, b - a);
            }
            return Err(e);
        }
        let n: usize = new.iter().map(|(a, b)| (b - a) / PAGE).sum();
        p.seg.mlocked_pages.fetch_add(n as u64, Relaxed);
        Ok(())
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            sys::set_errno(e);
            -1
        }
    }
}

/// `munlock`: releases the pins of the range (a partly unlocked range keeps the rest).
pub fn munlock(addr: usize, len: usize) -> i32 {
    if let Some(p) = crate::pager() {
        if TABLE.used.load(Relaxed) > 0 && !sys::in_pager() {
            let (lo, hi) = page_range(addr, len);
            let _e = sys::ErrnoGuard::new();
            for (a, b) in TABLE.with(|s| cut(s, lo, hi)) {
                p.unpin_range(a, b - a);
            }
        }
    }
    raw_munlock(addr, len)
}

/// The program drops `[addr, addr+len)` (`munmap`, `MAP_FIXED` over it): the kernel's locks
/// go with the mapping, and the pins with the pager's state words (`drop_range`). Call before
/// `drop_range`.
pub fn forget(addr: usize, len: usize) {
    if TABLE.used.load(Relaxed) > 0 {
        let (lo, hi) = page_range(addr, len);
        TABLE.with(|s| cut(s, lo, hi));
    }
}

/// Does `[addr, addr+len)` touch memory locked with `mlock`? (`madvise(MADV_DONTNEED)` there
/// fails with EINVAL in the kernel, so the pager must not drop its copies first.)
pub fn overlaps(addr: usize, len: usize) -> bool {
    if TABLE.used.load(Relaxed) == 0 {
        return false;
    }
    let (lo, hi) = page_range(addr, len);
    TABLE.with(|s| s.iter().any(|e| e.1 != 0 && e.0 < hi && e.1 > lo))
}

/// After a successful `mremap` of `[old, old+old_len)` to `new`: the kernel moved the locks
/// with the pages, but the pager's state words of the new range start unpinned (`remanage`).
/// The locked parts are pinned again at their new addresses; a locked range that reached the
/// old end grows with the mapping, as the kernel locks the grown part.
pub fn moved(old: usize, old_len: usize, new: usize, new_len: usize) {
    let Some(p) = crate::pager() else { return };
    if TABLE.used.load(Relaxed) == 0 {
        return;
    }
    let _e = sys::ErrnoGuard::new();
    let (lo, hi) = page_range(old, old_len);
    let new_hi = new + new_len.div_ceil(PAGE) * PAGE;
    TABLE.with(|s| {
        for (a, b) in cut(s, lo, hi) {
            let na = new + (a - lo);
            let nb = if b == hi {
                new_hi
            } else {
                (new + (b - lo)).min(new_hi)
            };
            if na >= nb {
                continue;
            }
            for (x, y) in gaps(s, na, nb) {
                if insert(s, x, y) {
                    p.pin_range(x, y - x, true);
                }
            }
        }
    });
}

/// Releases every pin of the table and empties it (`munlockall`, a fork child, which
/// inherits no locks).
fn release_all() {
    if TABLE.used.load(Relaxed) == 0 {
        return;
    }
    let all = TABLE.with(|s| {
        let v: Vec<(usize, usize)> = s.iter().filter(|e| e.1 != 0).copied().collect();
        *s = [(0, 0); SLOTS];
        v
    });
    if let Some(p) = crate::pager() {
        for (a, b) in all {
            p.unpin_range(a, b - a);
        }
    }
}

/// `mlockall`. `MCL_CURRENT` and `MCL_FUTURE` never reach the kernel (see the module).
pub fn mlockall(flags: i32) -> i32 {
    let known = libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT;
    if flags == 0 || flags & !known != 0 || flags == libc::MCL_ONFAULT {
        sys::set_errno(libc::EINVAL);
        return -1;
    }
    let p = match crate::pager() {
        Some(p) if !sys::in_pager() => p,
        // SAFETY: forwarded.
        _ => return sys_ret(unsafe { libc::syscall(libc::SYS_mlockall, flags) }),
    };
    if !may_lock() {
        sys::set_errno(libc::EPERM);
        return -1;
    }
    let _e = sys::ErrnoGuard::new();
    let mut bits = ALL_ON;
    if flags & libc::MCL_FUTURE != 0 {
        bits |= ALL_FUTURE;
    }
    if flags & libc::MCL_ONFAULT != 0 {
        bits |= ALL_ONFAULT;
    }
    // Eviction stops once, however often mlockall is called (munlockall resumes it).
    if ALL.swap(bits, AcqRel) & ALL_ON == 0 {
        p.pause();
    }
    p.seg.mlockall_calls.fetch_add(1, Relaxed);
    if flags & libc::MCL_CURRENT != 0 {
        p.fault_in_evicted();
        let onfault = if flags & libc::MCL_ONFAULT != 0 {
            libc::MLOCK_ONFAULT
        } else {
            0
        };
        lock_unmanaged(p, onfault);
    }
    0
}

/// The kernel's `can_do_mlock`: a non-zero RLIMIT_MEMLOCK or CAP_IPC_LOCK (approximated by
/// root).
fn may_lock() -> bool {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass (never managed: on our stack).
    let ok = unsafe { libc::syscall(libc::SYS_getrlimit, libc::RLIMIT_MEMLOCK, &mut rl) } == 0;
    // SAFETY: no arguments.
    !ok || rl.rlim_cur != 0 || unsafe { libc::geteuid() } == 0
}

/// `MCL_CURRENT` over what the kernel may lock as it would: every mapping of the program
/// that is not managed and not the pager's own. Skipped: managed ranges (their pages are
/// resident now and never evicted), `PROT_NONE` reservations, `[vsyscall]`, `[vdso]`,
/// `[vvar]`, the run's shared segment, and every `MAP_NORESERVE` mapping (`nr` in smaps'
/// VmFlags): all of the pager's anonymous mappings are (its state arrays, scratch area,
/// zsmalloc arenas, alternate stacks, the heap reservation), as are glibc's per-thread
/// malloc arenas; the program's own private anonymous mappings are managed whatever their
/// flags. Anonymous mappings (no file: thread stacks, `[heap]`, glibc's large blocks, some of
/// them the pager's own through glibc's malloc, such as the swap file's slot table) are
/// locked with `MLOCK_ONFAULT`: what is resident is locked, the rest when first touched, and
/// nothing is populated (an untouched anonymous page holds no data to protect; populating
/// them cost 33 MiB of the pager's slot table per process). File mappings and shared memory
/// are locked and populated, as the kernel would. Populate errors are ignored, as the kernel's
/// `mlockall` ignores them.
fn lock_unmanaged(p: &crate::Pager, onfault: u32) {
    let text = {
        let _g = InPager::enter();
        match std::fs::read_to_string("/proc/self/smaps") {
            Ok(t) => t,
            Err(_) => return,
        }
    };
    let mut todo: Vec<(usize, usize, u32)> = Vec::new();
    let mut cur: Option<(usize, usize, bool, u32)> = None;
    for line in text.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if let Some((a, b, ok, how)) = cur.take() {
                let nr = flags.split_whitespace().any(|f| f == "nr");
                if ok && !nr {
                    todo.push((a, b, how));
                }
            }
            continue;
        }
        let mut f = line.split_whitespace();
        let Some(range) = f.next() else { continue };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue; // a "Key: value" line of the current mapping
        };
        let perms = f.next().unwrap_or("");
        let path = f.nth(3).unwrap_or("");
        let none = perms.len() >= 3 && &perms[..3] == "---";
        let special = matches!(path, "[vsyscall]" | "[vdso]" | "[vvar]" | "[vvar_vclock]")
            || path.starts_with("/memfd:uzswap-run");
        let anon = path.is_empty() || path.starts_with('[');
        let how = if anon { libc::MLOCK_ONFAULT } else { onfault };
        cur = Some((a, b, !none && !special, how));
    }
    for (a, b, how) in todo {
        let mut at = a;
        for (x, y) in p.managed_parts(a, b) {
            if x > at {
                raw_mlock2(at, x - at, how);
            }
            at = y;
        }
        if at < b {
            raw_mlock2(at, b - at, how);
        }
    }
}

/// After a successful `mmap` of the program's that the pager does not manage: locked under
/// `mlockall(MCL_FUTURE)`, as the kernel would have.
pub fn after_unmanaged_mmap(addr: usize, len: usize, prot: i32) {
    let bits = ALL.load(Relaxed);
    if bits & ALL_FUTURE != 0 && prot != libc::PROT_NONE {
        let _e = sys::ErrnoGuard::new();
        let onfault = if bits & ALL_ONFAULT != 0 {
            libc::MLOCK_ONFAULT
        } else {
            0
        };
        raw_mlock2(addr, len, onfault);
    }
}

/// `munlockall`: eviction resumes, every lock of the table is released.
pub fn munlockall() -> i32 {
    if let Some(p) = crate::pager() {
        if !sys::in_pager() {
            let _e = sys::ErrnoGuard::new();
            if ALL.swap(0, AcqRel) & ALL_ON != 0 {
                p.resume();
                // What mlockall kept in may be far over the budget, and a program that only
                // reads its resident pages faults no more (its next fault would reclaim, as
                // the kernel's next charge would): reclaim down to the budget now.
                let _b = sys::SigBlock::new();
                p.maybe_reclaim(0);
            }
            release_all();
        }
    }
    // SAFETY: no arguments.
    sys_ret(unsafe { libc::syscall(libc::SYS_munlockall) })
}

/// In a fork child (one thread): memory locks are not inherited, so the child's copies of
/// the pins go, and eviction resumes if `mlockall` had stopped it. The table's lock may have
/// been held by another thread of the parent at the fork.
pub fn after_fork_child() {
    TABLE.slots.reset_after_fork();
    if ALL.swap(0, AcqRel) & ALL_ON != 0 {
        if let Some(p) = crate::pager() {
            p.resume();
        }
    }
    release_all();
}
