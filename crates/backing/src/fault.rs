// SPDX-License-Identifier: MIT
//! Fault injection for tests of the layers above (the cache's writeback and swap-in paths),
//! with the `test-hooks` cargo feature (and in this crate's unit tests). Without it the
//! injector is an empty type whose checks are constants: the I/O paths carry no test code.
//!
//! Unused, it costs one relaxed atomic load per I/O: `armed` is a hint that some counter may be
//! non-zero. Setters store their counter before setting the hint; the slow path clears the hint
//! when every counter is zero and re-checks, so a racing setter is never lost.

#[cfg(any(test, feature = "test-hooks"))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the injector tells the I/O path to do with one write.
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WriteFault {
    None,
    Eio,
    NoSpace,
    /// Write the block with one flipped bit (silent media corruption).
    Corrupt,
    /// Write the block one slot further on (a misdirected write).
    Misdirect,
}

/// What the injector tells the I/O path to do with one read.
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ReadFault {
    None,
    Eio,
    /// Return fewer bytes than asked, as if the file ended.
    Short,
}

/// Fails or corrupts upcoming I/O of one backing store. Obtain it with
/// [`SwapFile::fault_injector`](crate::SwapFile::fault_injector) or
/// [`MemStore::fault_injector`](crate::MemStore::fault_injector); corrupting a block already
/// stored is the store's own `corrupt_block`.
///
/// Each `*_next_*` call *sets* (not adds to) the number of upcoming operations affected; several
/// kinds may be armed at once. For writes the order of precedence is EIO, ENOSPC, corruption,
/// misdirection; for reads EIO, then short reads.
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Debug)]
pub struct FaultInjector {
    armed: AtomicBool,
    write_eio: AtomicU64,
    write_enospc: AtomicU64,
    write_corrupt: AtomicU64,
    write_misdirect: AtomicU64,
    read_eio: AtomicU64,
    read_short: AtomicU64,
    injected: AtomicU64,
}

#[cfg(any(test, feature = "test-hooks"))]
fn take(c: &AtomicU64) -> bool {
    c.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

#[cfg(any(test, feature = "test-hooks"))]
impl FaultInjector {
    pub(crate) fn new() -> FaultInjector {
        FaultInjector {
            armed: AtomicBool::new(false),
            write_eio: AtomicU64::new(0),
            write_enospc: AtomicU64::new(0),
            write_corrupt: AtomicU64::new(0),
            write_misdirect: AtomicU64::new(0),
            read_eio: AtomicU64::new(0),
            read_short: AtomicU64::new(0),
            injected: AtomicU64::new(0),
        }
    }

    fn arm(&self, c: &AtomicU64, n: u64) {
        c.store(n, Ordering::Release);
        if n > 0 {
            self.armed.store(true, Ordering::Release);
        }
    }

    /// The next `n` block writes fail with EIO (nothing reaches the file).
    pub fn fail_next_writes(&self, n: u64) {
        self.arm(&self.write_eio, n);
    }

    /// The next `n` block reads fail with EIO.
    pub fn fail_next_reads(&self, n: u64) {
        self.arm(&self.read_eio, n);
    }

    /// The next `n` block writes fail with ENOSPC, as on a full filesystem.
    pub fn no_space_next_writes(&self, n: u64) {
        self.arm(&self.write_enospc, n);
    }

    /// The next `n` block reads come back short, as if the file had been truncated.
    pub fn short_next_reads(&self, n: u64) {
        self.arm(&self.read_short, n);
    }

    /// The next `n` block writes reach the file with one bit flipped (after the checksum was taken).
    pub fn corrupt_next_writes(&self, n: u64) {
        self.arm(&self.write_corrupt, n);
    }

    /// The next `n` block writes land one slot further on (wrapping at the end), as a misdirected
    /// write would; both the intended and the hit slot then fail their checksum.
    pub fn misdirect_next_writes(&self, n: u64) {
        self.arm(&self.write_misdirect, n);
    }

    /// Disarms everything.
    pub fn clear(&self) {
        for c in [
            &self.write_eio,
            &self.write_enospc,
            &self.write_corrupt,
            &self.write_misdirect,
            &self.read_eio,
            &self.read_short,
        ] {
            c.store(0, Ordering::Release);
        }
        self.armed.store(false, Ordering::Release);
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Counts a fault injected by the store itself (e.g. `corrupt_block`).
    pub(crate) fn count_injected(&self) {
        self.injected.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn on_write(&self) -> WriteFault {
        if !self.armed.load(Ordering::Relaxed) {
            return WriteFault::None;
        }
        self.on_write_slow()
    }

    #[inline]
    pub(crate) fn on_read(&self) -> ReadFault {
        if !self.armed.load(Ordering::Relaxed) {
            return ReadFault::None;
        }
        self.on_read_slow()
    }

    #[cold]
    fn on_write_slow(&self) -> WriteFault {
        let f = if take(&self.write_eio) {
            WriteFault::Eio
        } else if take(&self.write_enospc) {
            WriteFault::NoSpace
        } else if take(&self.write_corrupt) {
            WriteFault::Corrupt
        } else if take(&self.write_misdirect) {
            WriteFault::Misdirect
        } else {
            WriteFault::None
        };
        self.settle(f != WriteFault::None);
        f
    }

    #[cold]
    fn on_read_slow(&self) -> ReadFault {
        let f = if take(&self.read_eio) {
            ReadFault::Eio
        } else if take(&self.read_short) {
            ReadFault::Short
        } else {
            ReadFault::None
        };
        self.settle(f != ReadFault::None);
        f
    }

    fn settle(&self, injected: bool) {
        if injected {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        let pending = |s: &Self| {
            [
                &s.write_eio,
                &s.write_enospc,
                &s.write_corrupt,
                &s.write_misdirect,
                &s.read_eio,
                &s.read_short,
            ]
            .iter()
            .any(|c| c.load(Ordering::Acquire) > 0)
        };
        if !pending(self) {
            self.armed.store(false, Ordering::Release);
            // A setter may have stored its counter between our check and the clear.
            if pending(self) {
                self.armed.store(true, Ordering::Release);
            }
        }
    }
}

/// Without `test-hooks`: nothing to inject, nothing to check.
#[cfg(not(any(test, feature = "test-hooks")))]
#[derive(Debug)]
pub(crate) struct FaultInjector;

#[cfg(not(any(test, feature = "test-hooks")))]
impl FaultInjector {
    pub(crate) fn new() -> FaultInjector {
        FaultInjector
    }
    #[inline(always)]
    pub(crate) fn on_write(&self) -> WriteFault {
        WriteFault::None
    }
    #[inline(always)]
    pub(crate) fn on_read(&self) -> ReadFault {
        ReadFault::None
    }
    pub(crate) fn injected(&self) -> u64 {
        0
    }
}
