// SPDX-License-Identifier: MIT
//! The sync facade of the slot allocator's cluster bits (`alloc.rs`): std's atomics normally,
//! loom's under `cfg(loom)`, so that the loom models (`scripts/loom.sh`) check the very code
//! the swap file and the in-memory store run. Other modules use std directly.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// One round of waiting for another thread's in-progress update. Under loom a yield, so the
/// model schedules that thread.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
