// SPDX-License-Identifier: MIT
//! A pool reference count that scales with threads, modelled on the kernel's `percpu_ref`.
//!
//! Every stored entry holds one reference on its pool ("mm/zswap: optimize for dynamic zswap_pools" (v3, 6.9)). A single atomic would be a
//! cache line bouncing between all CPUs on every store and free, so gets and puts go to this
//! thread's stripe instead. The count is only ever summed after the pool was *killed* (it is no
//! longer the current pool): from then on every put sums the stripes, and the put that sees zero
//! releases the pool, exactly once.
//!
//! Why the sum is safe without a grace period: a `tryget` increments its stripe *before* reading
//! `killed` (both SeqCst). If it read `false`, its increment precedes the kill in the single total
//! order, so every sum taken after the kill sees it. If it read `true`, it undoes the increment and
//! fails; its stripe went +1 then -1, which can only make a concurrent sum larger, never a false
//! zero. Puts only decrease, and the last put in the total order sees all of them.

use std::sync::atomic::Ordering::SeqCst;

use crossbeam_utils::CachePadded;

use crate::stats::{nr_stripes, stripe_index};
use crate::sync::{AtomicBool, AtomicI64};

pub(crate) struct PoolRef {
    stripes: Box<[CachePadded<AtomicI64>]>,
    killed: AtomicBool,
    released: AtomicBool,
}

/// What a put or a failed get asks the caller to do.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RefState {
    Alive,
    /// The count reached zero after the kill: the caller must release the pool.
    Release,
}

impl PoolRef {
    /// A new reference count holding the base reference (dropped by `kill`).
    pub(crate) fn new() -> PoolRef {
        let stripes: Box<[CachePadded<AtomicI64>]> = (0..nr_stripes())
            .map(|_| CachePadded::new(AtomicI64::new(0)))
            .collect();
        stripes[0].store(1, SeqCst);
        PoolRef {
            stripes,
            killed: AtomicBool::new(false),
            released: AtomicBool::new(false),
        }
    }

    /// Take a reference unless the pool has been killed. `Err(state)` on failure.
    #[inline]
    pub(crate) fn tryget(&self) -> Result<(), RefState> {
        self.tryget_at(stripe_index())
    }

    /// `tryget` on stripe `i` (the loom models choose the stripe).
    #[inline]
    pub(crate) fn tryget_at(&self, i: usize) -> Result<(), RefState> {
        self.stripes[i].fetch_add(1, SeqCst);
        if !self.killed.load(SeqCst) {
            return Ok(());
        }
        Err(self.put_at(i))
    }

    /// Drop one reference.
    #[inline]
    pub(crate) fn put(&self) -> RefState {
        self.put_at(stripe_index())
    }

    /// `put` on stripe `i`.
    #[inline]
    pub(crate) fn put_at(&self, i: usize) -> RefState {
        self.stripes[i].fetch_sub(1, SeqCst);
        if !self.killed.load(SeqCst) {
            return RefState::Alive;
        }
        self.check_zero()
    }

    /// Switch to "dying": no new references; drop the base reference.
    pub(crate) fn kill(&self) -> RefState {
        if self.killed.swap(true, SeqCst) {
            return RefState::Alive;
        }
        self.put()
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(SeqCst)
    }

    /// References held right now (racy unless killed and quiescent).
    pub(crate) fn count(&self) -> i64 {
        self.stripes.iter().map(|s| s.load(SeqCst)).sum()
    }

    fn check_zero(&self) -> RefState {
        if self.count() == 0 && !self.released.swap(true, SeqCst) {
            RefState::Release
        } else {
            RefState::Alive
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn release_exactly_once_under_races() {
        for _ in 0..50 {
            let r = Arc::new(PoolRef::new());
            let releases = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut hs = Vec::new();
            for t in 0..4 {
                let r = r.clone();
                let releases = releases.clone();
                hs.push(std::thread::spawn(move || {
                    let mut held = 0;
                    for i in 0..2000 {
                        if (i + t) % 3 != 2 {
                            match r.tryget() {
                                Ok(()) => held += 1,
                                // A failed get's undo can be the drop to zero.
                                Err(RefState::Release) => {
                                    releases.fetch_add(1, SeqCst);
                                }
                                Err(RefState::Alive) => {}
                            }
                        } else if held > 0 {
                            held -= 1;
                            if r.put() == RefState::Release {
                                releases.fetch_add(1, SeqCst);
                            }
                        }
                    }
                    for _ in 0..held {
                        if r.put() == RefState::Release {
                            releases.fetch_add(1, SeqCst);
                        }
                    }
                }));
            }
            if r.kill() == RefState::Release {
                releases.fetch_add(1, SeqCst);
            }
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(releases.load(SeqCst), 1);
            assert_eq!(r.count(), 0);
            assert!(r.tryget().is_err());
        }
    }
}
