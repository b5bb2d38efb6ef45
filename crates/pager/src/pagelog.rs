// SPDX-License-Identifier: MIT
//! A debugging log of page-state transitions: with `UZSWAP_PAGE_LOG=PREFIX` set, every fill,
//! eviction step, drop and fork is recorded in a ring of fixed-size records in memory the pager
//! maps for itself, and the ring is written to `PREFIX.PID` when the process retires.
//! `scripts/pagelog.py` prints one page's history. Off (one relaxed load per event) otherwise.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::sys;

/// Records in the ring (a power of two): 4M records of 32 bytes, 128 MiB of address space,
/// touched as it fills.
const RING: usize = 1 << 22;

static BASE: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The process that mapped the ring: fork children, whose copy starts with the parent's
/// records, don't write theirs.
static OWNER: AtomicUsize = AtomicUsize::new(0);

pub mod ev {
    pub const FAULT: u64 = 1;
    pub const FILL_ZERO: u64 = 2;
    pub const FILL_EVICTED: u64 = 3;
    pub const FILL_RESIDENT: u64 = 4;
    pub const READAHEAD: u64 = 5;
    pub const CLAIM: u64 = 6;
    pub const MOVED: u64 = 7;
    pub const NOT_MOVED: u64 = 8;
    pub const STORED: u64 = 9;
    pub const COPY_BACK: u64 = 10;
    pub const DROP: u64 = 11;
    pub const REMAP: u64 = 12;
    pub const FORK_PREPARE: u64 = 13;
    pub const FORK_PARENT: u64 = 14;
    pub const FORK_CHILD: u64 = 15;
    pub const KEPT_DROPPED: u64 = 16;
    pub const MOVE_ERR: u64 = 17;
    pub const MOVE_MISREPORTED: u64 = 18;
    pub const HOLE: u64 = 19;
    pub const PIN_FILL: u64 = 20;
    pub const FILL_FAILED: u64 = 21;
    /// A fault took a staged page back from the staging area.
    pub const FAULT_BACK: u64 = 22;
    /// Pages of a read-only mapping copied out for eviction (state: how many).
    pub const COPIED_OUT: u64 = 23;
}

/// Records an event when the log is on; the arguments are evaluated only then.
#[macro_export]
macro_rules! page_log {
    ($addr:expr, $event:expr, $state:expr, $extra:expr $(,)?) => {
        if $crate::pagelog::on() {
            $crate::pagelog::log($addr, $event, $state, $extra)
        }
    };
}

/// A userfaultfd call's outcome as a log value: 1 done, 0 the page was there, 2 failed.
pub fn outcome(res: &Result<(), crate::uffd::UffdError>) -> u64 {
    match res {
        Ok(()) => 1,
        Err(crate::uffd::UffdError::Exists) => 0,
        Err(_) => 2,
    }
}

/// Where `dump` writes: `UZSWAP_PAGE_LOG` as read at init. `dump` runs at exit with every
/// signal blocked, where the program's own `getenv` (bash exports one, over its heap) could
/// touch an evicted page and kill the process.
static PREFIX: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();

/// Maps the ring if `UZSWAP_PAGE_LOG` is set (at init, before any event).
pub fn init() {
    let Some(prefix) = std::env::var_os("UZSWAP_PAGE_LOG") else {
        return;
    };
    if BASE.load(Relaxed) != 0 {
        return;
    }
    let _ = PREFIX.set(prefix);
    if let Ok(b) = sys::map_anon(RING * 32) {
        BASE.store(b, Relaxed);
        OWNER.store(sys::getpid() as usize, Relaxed);
    }
}

#[inline]
pub fn on() -> bool {
    BASE.load(Relaxed) != 0
}

/// One record: the page (or range start), the event, the state word seen, one more value.
#[inline]
pub fn log(addr: usize, event: u64, state: u64, extra: u64) {
    let base = BASE.load(Relaxed);
    if base == 0 {
        return;
    }
    let i = NEXT.fetch_add(1, Relaxed) & (RING - 1);
    // SAFETY: `base` maps RING records of four u64 words; `i` is within it.
    let rec = unsafe { std::slice::from_raw_parts((base + i * 32) as *const AtomicU64, 4) };
    rec[0].store((addr as u64 & !0xfff) | event, Relaxed);
    rec[1].store(state, Relaxed);
    rec[2].store(extra, Relaxed);
    rec[3].store(
        (u64::from(sys::gettid() as u32) << 40) | (sys::now_ns() & ((1 << 40) - 1)),
        Relaxed,
    );
}

/// Writes the ring (oldest first) to `PREFIX.PID`.
pub fn dump() {
    let base = BASE.load(Relaxed);
    let Some(prefix) = PREFIX.get() else {
        return;
    };
    if base == 0 || OWNER.load(Relaxed) != sys::getpid() as usize {
        return;
    }
    let n = NEXT.load(Relaxed);
    let path = format!("{}.{}", prefix.to_string_lossy(), sys::getpid());
    let Ok(c) = std::ffi::CString::new(path) else {
        return;
    };
    // SAFETY: a NUL-terminated path; writes from the ring's own memory.
    unsafe {
        let fd = libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            return;
        }
        let (first, count) = if n > RING {
            (n & (RING - 1), RING)
        } else {
            (0, n)
        };
        let tail = count.min(RING - first);
        libc::write(fd, (base + first * 32) as *const libc::c_void, tail * 32);
        if count > tail {
            libc::write(fd, base as *const libc::c_void, (count - tail) * 32);
        }
        libc::close(fd);
    }
}
