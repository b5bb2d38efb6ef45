// SPDX-License-Identifier: MIT
//! Test hooks: make the cache's next allocations fail, as the kernel's fault injection does.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Test hooks: make the next allocations fail.
#[derive(Default)]
pub struct FaultHooks {
    pub(crate) fail_pool_allocs: AtomicU64,
    pub(crate) fail_entry_allocs: AtomicU64,
}

impl FaultHooks {
    /// The next `n` pool allocations fail as if zsmalloc were out of memory.
    pub fn fail_next_pool_allocs(&self, n: u64) {
        self.fail_pool_allocs.store(n, Relaxed);
    }
    /// The next `n` entry allocations fail (reject_kmemcache_fail).
    pub fn fail_next_entry_allocs(&self, n: u64) {
        self.fail_entry_allocs.store(n, Relaxed);
    }
    #[inline]
    pub(crate) fn take(c: &AtomicU64) -> bool {
        c.load(Relaxed) > 0
            && c.fetch_update(Relaxed, Relaxed, |v| v.checked_sub(1))
                .is_ok()
    }
}
