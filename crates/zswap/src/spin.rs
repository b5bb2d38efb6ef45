// SPDX-License-Identifier: MIT
//! A spinning mutex for critical sections of a few instructions shared by every thread (the LRU
//! lists). A parking mutex that finds the lock taken soon sleeps on a futex, and waking a
//! thread on the other vCPU costs tens of µs on the test VM (perf-baselines.md), against the
//! tens of ns the holder keeps the lock; spinning (yielding after a while, in case the holder
//! was preempted) never sleeps.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::lock_api::{GuardSend, RawMutex};

/// The raw lock of [`SpinMutex`].
pub(crate) struct RawSpin(AtomicBool);

/// Spins before each `yield_now` once the lock was found taken.
const SPINS_BEFORE_YIELD: u32 = 128;

// SAFETY: `lock` returns only once this thread changed the flag from false to true (Acquire),
// `unlock` stores false (Release), so at most one holder exists and the holder's writes are
// visible to the next one.
unsafe impl RawMutex for RawSpin {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSpin = RawSpin(AtomicBool::new(false));
    type GuardMarker = GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

impl RawSpin {
    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            // Read-only wait: the line stays shared until the holder releases it.
            while self.0.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    std::hint::spin_loop();
                    spins += 1;
                } else {
                    std::thread::yield_now();
                    spins = 0;
                }
            }
            if self.try_lock() {
                return;
            }
        }
    }
}

/// A mutex that spins instead of sleeping (see the module docs).
pub(crate) type SpinMutex<T> = parking_lot::lock_api::Mutex<RawSpin, T>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_and_publishes() {
        let m = std::sync::Arc::new(SpinMutex::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_000);
    }
}
