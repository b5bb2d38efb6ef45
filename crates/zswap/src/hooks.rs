// SPDX-License-Identifier: MIT
//! Test hooks: make the cache's next allocations fail, as the kernel's fault injection does.
//! With the `test-hooks` cargo feature (and in this crate's unit tests) only; without it
//! [`FaultHooks`] is an empty type whose checks are constants, so the store path carries no
//! test code.

#[cfg(any(test, feature = "test-hooks"))]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Test hooks: make the next allocations fail (cargo feature `test-hooks`).
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Default)]
pub struct FaultHooks {
    fail_pool_allocs: AtomicU64,
    fail_entry_allocs: AtomicU64,
}

#[cfg(any(test, feature = "test-hooks"))]
impl FaultHooks {
    pub(crate) fn new() -> FaultHooks {
        FaultHooks::default()
    }
    /// The next `n` pool allocations fail as if zsmalloc were out of memory.
    pub fn fail_next_pool_allocs(&self, n: u64) {
        self.fail_pool_allocs.store(n, Relaxed);
    }
    /// The next `n` entry allocations fail (reject_kmemcache_fail).
    pub fn fail_next_entry_allocs(&self, n: u64) {
        self.fail_entry_allocs.store(n, Relaxed);
    }
    #[inline]
    fn take(c: &AtomicU64) -> bool {
        c.load(Relaxed) > 0
            && c.fetch_update(Relaxed, Relaxed, |v| v.checked_sub(1))
                .is_ok()
    }
    /// Should this pool allocation fail?
    #[inline]
    pub(crate) fn fail_pool_alloc(&self) -> bool {
        Self::take(&self.fail_pool_allocs)
    }
    /// Should this entry allocation fail?
    #[inline]
    pub(crate) fn fail_entry_alloc(&self) -> bool {
        Self::take(&self.fail_entry_allocs)
    }
}

/// Without `test-hooks`: no allocation ever fails on purpose.
#[cfg(not(any(test, feature = "test-hooks")))]
pub(crate) struct FaultHooks;

#[cfg(not(any(test, feature = "test-hooks")))]
impl FaultHooks {
    pub(crate) fn new() -> FaultHooks {
        FaultHooks
    }
    #[inline(always)]
    pub(crate) fn fail_pool_alloc(&self) -> bool {
        false
    }
    #[inline(always)]
    pub(crate) fn fail_entry_alloc(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{cache, page};
    use crate::{CgroupId, LoadOutcome, RejectReason, StoreOutcome, SwapSlot, PAGE_SIZE};

    #[test]
    fn allocation_failures_reject_and_keep_old_entries() {
        let z = cache();
        let slot = |i| SwapSlot::new(0, i);
        for i in 0..40 {
            z.store(slot(i), &page(i as u8), CgroupId::ROOT);
        }
        z.fault_hooks().fail_next_pool_allocs(3);
        let p = page(0xa5);
        for i in 40..43 {
            assert_eq!(
                z.store(slot(i), &p, CgroupId::ROOT),
                StoreOutcome::Rejected(RejectReason::AllocFail)
            );
        }
        assert_eq!(z.store(slot(43), &p, CgroupId::ROOT), StoreOutcome::Stored);
        z.fault_hooks().fail_next_entry_allocs(2);
        for i in 44..46 {
            assert_eq!(
                z.store(slot(i), &p, CgroupId::ROOT),
                StoreOutcome::Rejected(RejectReason::KmemcacheFail)
            );
        }
        let c = z.counters();
        assert_eq!((c.reject_alloc_fail, c.reject_kmemcache_fail), (3, 2));
        assert_eq!(c.stored_pages + c.zero_pages, 41);
        // Overwriting a slot whose new store fails drops the old copy (never stale data)...
        z.fault_hooks().fail_next_pool_allocs(1);
        assert_eq!(
            z.store(slot(5), &p, CgroupId::ROOT),
            StoreOutcome::Rejected(RejectReason::AllocFail)
        );
        let mut buf = vec![0u8; PAGE_SIZE];
        assert_eq!(
            z.load(slot(5), &mut buf, false).unwrap(),
            LoadOutcome::Absent
        );
        // ...and swap_out then writes the new content to the file.
        z.fault_hooks().fail_next_pool_allocs(1);
        assert_eq!(
            z.swap_out(slot(5), &p, CgroupId::ROOT).unwrap(),
            StoreOutcome::Rejected(RejectReason::AllocFail)
        );
        assert_eq!(
            z.load(slot(5), &mut buf, false).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, p);
        // Everything else is intact.
        for i in (0..40).filter(|&i| i != 5) {
            assert_ne!(
                z.load(slot(i), &mut buf, false).unwrap(),
                LoadOutcome::Absent
            );
            assert_eq!(buf, page(i as u8), "slot {i}");
        }
        z.check_invariants().unwrap();
    }
}
