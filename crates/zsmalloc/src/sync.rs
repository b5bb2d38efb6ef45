// SPDX-License-Identifier: MIT
//! The sync facade of the per-object state protocol (`handle.rs`, `access.rs`, `compact.rs`):
//! std's atomics normally, loom's under `cfg(loom)`, so that the loom models
//! (`scripts/loom.sh`) check the very code the pool runs. Only the modelled protocol imports
//! from here; counters and the arena use std directly.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU64};

/// One step of waiting for another thread to clear a bit: spin first, then yield. Under loom,
/// always a yield (a spin loop must let the model schedule the other thread).
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    #[cfg(not(loom))]
    {
        if *spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    #[cfg(loom)]
    loom::thread::yield_now();
    *spins = spins.saturating_add(1);
}
