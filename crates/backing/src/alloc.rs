// SPDX-License-Identifier: MIT
//! Lock-free slot allocation in clusters, after the kernel's swap clusters.
//!
//! Slots are grouped into clusters of [`CLUSTER_SLOTS`] (512, one THP worth of 4 KiB pages, the
//! kernel's `SWAPFILE_CLUSTER` on x86-64). Each cluster is one 128-byte, cache-line aligned record:
//! a used counter and a 512-bit bitmap, all zero when free. Allocation first reserves a slot by
//! incrementing the used counter below the cluster's size (so a cluster never hands out more
//! than it has), then claims a bit with `fetch_or`.
//!
//! Threads do not share a cursor: each thread is mapped to one of [`LANES`] lanes, and each lane
//! remembers the cluster it allocates from (the kernel's per-CPU cluster). Only when that cluster
//! is exhausted does the lane search for another: first a cluster in use that has a free slot
//! (from a rotating hint), then the lowest entirely free one. This is the kernel's order for a
//! device without per-page discard since "mm, swap: prefer nonfull over free clusters" (6.18),
//! and what a swap *file* needs: preferring free clusters (as before 6.18, to spread an SSD's
//! writes) left live slots thinly spread over ever new clusters, none ever empty enough to be
//! punched, so a random-access program's 300 MB of swapped pages held 1.65 GiB of disk in
//! 12.6 thousand extents, each freed by its own discard at exit. Concurrent threads on different
//! lanes still touch different clusters and cache lines; no lock exists anywhere on the path.

#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::atomic::Ordering;

use crate::sync::{spin_hint, AtomicU32, AtomicU64, AtomicUsize};

/// Slots per cluster.
pub const CLUSTER_SLOTS: usize = 512;
const WORDS: usize = CLUSTER_SLOTS / 64;
/// Allocation lanes (threads are spread over them round-robin at first use).
pub const LANES: usize = 32;
const NO_CLUSTER: u32 = u32::MAX;
/// Records one search for a cluster in use with a free slot looks at before it falls back to
/// a free cluster: bounds the search's cost (one cache line each) in a large, full area.
const NONFULL_PROBES: usize = 64;

/// Words of one cluster's record: the used counter, then the 512-bit bitmap (bit set = slot
/// allocated), padded to 128 bytes so that each record has cache lines of its own.
const RECORD_WORDS: usize = 16;

/// One cluster's record. All-zero words are a free cluster, so a map is made from zeroed
/// memory that the OS maps only where it is used: a process that uses a few clusters of a
/// 16 GiB area touches only those (initialising a 4 Mi-slot map wrote 1 MiB, a quarter of a
/// short-lived `uzswap run` process's start-up).
struct Cluster<'a> {
    used: &'a AtomicU64,
    bits: &'a [AtomicU64],
}

#[repr(align(64))]
struct Lane {
    cluster: AtomicU32,
}

/// The free-slot map of one swap area.
pub struct SlotMap {
    /// The records, the first at word `first` (128-byte aligned).
    words: Box<[AtomicU64]>,
    first: usize,
    /// Clusters.
    n: usize,
    lanes: Box<[Lane]>,
    /// Where the next search for a cluster in use with a free slot starts (only touched when a
    /// lane's cluster runs out).
    hint: AtomicUsize,
    /// Clusters in use with a free slot (lanes' own included), kept by the transitions of each
    /// cluster's used count (wrapping: briefly "negative" while a free and an allocation race).
    /// Zero while the area only grows, which then skips the search for one.
    nonfull: AtomicUsize,
    /// Every cluster below this one was in use when last looked at: where the search for the
    /// lowest free cluster starts (lowered by a free that empties a cluster).
    free_hint: AtomicUsize,
    /// One past the highest cluster ever taken: the searches stop there (the records beyond are
    /// free and, in a large area, memory never touched).
    top: AtomicUsize,
    capacity: u64,
}

#[cfg(not(loom))]
thread_local! {
    static LANE: Cell<usize> = const { Cell::new(usize::MAX) };
}
#[cfg(not(loom))]
static NEXT_LANE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Under loom every thread shares lane 0: the threads then race on one cluster.
#[cfg(loom)]
fn my_lane() -> usize {
    0
}

#[cfg(not(loom))]
fn my_lane() -> usize {
    LANE.with(|l| {
        let v = l.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_LANE.fetch_add(1, Ordering::Relaxed) % LANES;
        l.set(v);
        v
    })
}

impl SlotMap {
    /// A map with every slot free.
    pub fn new(capacity: u64) -> SlotMap {
        let n = (capacity as usize).div_ceil(CLUSTER_SLOTS);
        // Zeroed words (free clusters), with room to align the first record to 128 bytes.
        let words = zeroed_words(n * RECORD_WORDS + RECORD_WORDS);
        let misalign = (words.as_ptr() as usize / 8) % RECORD_WORDS;
        let first = (RECORD_WORDS - misalign) % RECORD_WORDS;
        let lanes = (0..LANES)
            .map(|_| Lane {
                cluster: AtomicU32::new(NO_CLUSTER),
            })
            .collect();
        let map = SlotMap {
            words,
            first,
            n,
            lanes,
            hint: AtomicUsize::new(0),
            nonfull: AtomicUsize::new(0),
            free_hint: AtomicUsize::new(0),
            top: AtomicUsize::new(0),
            capacity,
        };
        if n > 0 {
            // Bits past the end of a short last cluster are permanently "allocated".
            let size = capacity as usize - (n - 1) * CLUSTER_SLOTS;
            for (w, word) in map.cluster(n - 1).bits.iter().enumerate() {
                let first = w * 64;
                if first >= size {
                    word.store(u64::MAX, Ordering::Relaxed);
                } else if first + 64 > size {
                    word.store(u64::MAX << (size - first), Ordering::Relaxed);
                }
            }
        }
        map
    }

    /// Cluster `c`'s record.
    #[inline]
    fn cluster(&self, c: usize) -> Cluster<'_> {
        let w = self.first + c * RECORD_WORDS;
        Cluster {
            used: &self.words[w],
            bits: &self.words[w + 1..w + 1 + WORDS],
        }
    }

    /// Real slots of cluster `c` (only the last cluster of an area may hold fewer than 512).
    #[inline]
    fn size(&self, c: usize) -> u32 {
        (self.capacity as usize - c * CLUSTER_SLOTS).min(CLUSTER_SLOTS) as u32
    }

    /// Allocates one slot, or `None` when every slot is in use.
    pub fn alloc(&self) -> Option<u64> {
        let lane = &self.lanes[my_lane()];
        let cur = lane.cluster.load(Ordering::Relaxed);
        if cur != NO_CLUSTER {
            if let Some(s) = self.alloc_in(cur as usize) {
                return Some(s);
            }
        }
        self.alloc_slow(lane)
    }

    #[cold]
    fn alloc_slow(&self, lane: &Lane) -> Option<u64> {
        let top = self.top.load(Ordering::Relaxed).min(self.n);
        // Pass 1: a cluster in use with a free slot, from where the last such search ended, at
        // most `NONFULL_PROBES` records a time (later searches go on from there).
        if top > 0 && (self.nonfull.load(Ordering::Relaxed) as isize) > 0 {
            let start = self.hint.load(Ordering::Relaxed) % top;
            for i in 0..top.min(NONFULL_PROBES) {
                let c = (start + i) % top;
                let used = self.cluster(c).used.load(Ordering::Relaxed);
                if used == 0 || used >= u64::from(self.size(c)) {
                    continue;
                }
                if let Some(s) = self.take(lane, c) {
                    self.hint.store(c + 1, Ordering::Relaxed);
                    return Some(s);
                }
            }
            self.hint
                .store(start + top.min(NONFULL_PROBES), Ordering::Relaxed);
        }
        // Pass 2: the lowest free cluster, so that the file grows at its end.
        let from = self.free_hint.load(Ordering::Relaxed).min(self.n);
        for c in (from..self.n).chain(0..from) {
            if self.cluster(c).used.load(Ordering::Relaxed) != 0 {
                continue;
            }
            if let Some(s) = self.take(lane, c) {
                // Unless a free lowered it meanwhile.
                let _ = self.free_hint.compare_exchange(
                    from,
                    c + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                return Some(s);
            }
        }
        // Pass 3: any slot (clusters changed state during the passes).
        (0..self.n).find_map(|c| {
            let used = self.cluster(c).used.load(Ordering::Relaxed);
            if used >= u64::from(self.size(c)) {
                return None;
            }
            self.take(lane, c)
        })
    }

    /// Allocates in cluster `c` and makes it the lane's.
    fn take(&self, lane: &Lane, c: usize) -> Option<u64> {
        let s = self.alloc_in(c)?;
        lane.cluster.store(c as u32, Ordering::Relaxed);
        self.top.fetch_max(c + 1, Ordering::Relaxed);
        Some(s)
    }

    fn alloc_in(&self, c: usize) -> Option<u64> {
        let cl = self.cluster(c);
        let size = u64::from(self.size(c));
        // Reserve first: once the counter is incremented a clear bit is guaranteed to exist.
        let prev = cl
            .used
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |u| {
                (u < size).then_some(u + 1)
            })
            .ok()?;
        self.count_transition(prev, prev + 1, size);
        loop {
            for (w, word) in cl.bits.iter().enumerate() {
                let mut cur = word.load(Ordering::Relaxed);
                while cur != u64::MAX {
                    let bit = (!cur).trailing_zeros();
                    let mask = 1u64 << bit;
                    let prev = word.fetch_or(mask, Ordering::AcqRel);
                    if prev & mask == 0 {
                        return Some((c * CLUSTER_SLOTS + w * 64 + bit as usize) as u64);
                    }
                    cur = prev | mask;
                }
            }
            // Another thread holding a reservation took the bit we saw; the reserved one is
            // freed by a concurrent `free` or still ahead of us in the scan: go around again.
            spin_hint();
        }
    }

    /// Frees a slot; false if it was not allocated.
    pub fn free(&self, offset: u64) -> bool {
        debug_assert!(offset < self.capacity);
        let off = offset as usize;
        let cl = self.cluster(off / CLUSTER_SLOTS);
        let mask = 1u64 << (off % 64);
        let prev = cl.bits[(off % CLUSTER_SLOTS) / 64].fetch_and(!mask, Ordering::AcqRel);
        if prev & mask == 0 {
            return false;
        }
        let c = off / CLUSTER_SLOTS;
        let prev = cl.used.fetch_sub(1, Ordering::Release);
        self.count_transition(prev, prev - 1, u64::from(self.size(c)));
        if prev == 1 {
            self.free_hint.fetch_min(c, Ordering::Relaxed);
        }
        true
    }

    /// Keeps `nonfull` as a cluster's used count goes from `prev` to `now` (of `size`).
    #[inline]
    fn count_transition(&self, prev: u64, now: u64, size: u64) {
        let partial = |u: u64| u != 0 && u < size;
        match (partial(prev), partial(now)) {
            (false, true) => {
                self.nonfull.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.nonfull.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Marks a specific free slot allocated (used when reopening a file); false if already taken.
    pub fn claim(&self, offset: u64) -> bool {
        let off = offset as usize;
        let cl = self.cluster(off / CLUSTER_SLOTS);
        let mask = 1u64 << (off % 64);
        let prev = cl.bits[(off % CLUSTER_SLOTS) / 64].fetch_or(mask, Ordering::AcqRel);
        if prev & mask != 0 {
            return false;
        }
        let c = off / CLUSTER_SLOTS;
        let prev = cl.used.fetch_add(1, Ordering::AcqRel);
        self.count_transition(prev, prev + 1, u64::from(self.size(c)));
        self.top.fetch_max(c + 1, Ordering::Relaxed);
        true
    }

    /// True if the slot is allocated.
    pub fn is_allocated(&self, offset: u64) -> bool {
        let off = offset as usize;
        let cl = self.cluster(off / CLUSTER_SLOTS);
        cl.bits[(off % CLUSTER_SLOTS) / 64].load(Ordering::Acquire) & (1u64 << (off % 64)) != 0
    }

    /// Slots in use, summed over the clusters ever taken (no global counter on the hot path;
    /// the records above `top` are free, and in a large area never touched: summing all 8192
    /// of a 4 Mi-slot map read 1 MiB of zero pages, twice in every fork of a `uzswap run`
    /// process).
    pub fn in_use(&self) -> u64 {
        (0..self.top.load(Ordering::Relaxed).min(self.n))
            .map(|c| {
                let used = self.cluster(c).used.load(Ordering::Relaxed);
                used.min(u64::from(self.size(c)))
            })
            .sum()
    }
}

/// `len` zeroed words, from the allocator's zeroed memory (calloc: fresh pages for a large
/// table, untouched until used).
#[cfg(not(loom))]
fn zeroed_words(len: usize) -> Box<[AtomicU64]> {
    crate::swapfile::zeroed_table(len)
        .unwrap_or_else(|| (0..len).map(|_| AtomicU64::new(0)).collect())
}

/// `len` zeroed words (loom's atomics are not plain memory: made one by one).
#[cfg(loom)]
fn zeroed_words(len: usize) -> Box<[AtomicU64]> {
    (0..len).map(|_| AtomicU64::new(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn alloc_all_then_full() {
        for cap in [1u64, 63, 64, 65, 511, 512, 513, 1500] {
            let m = SlotMap::new(cap);
            let mut seen = HashSet::new();
            for _ in 0..cap {
                let s = m.alloc().expect("slot");
                assert!(s < cap, "slot {s} beyond capacity {cap}");
                assert!(seen.insert(s), "slot {s} handed out twice");
            }
            assert_eq!(m.alloc(), None);
            assert_eq!(m.in_use(), cap);
            let victim = cap / 2;
            assert!(m.free(victim));
            assert!(!m.free(victim), "double free must be refused");
            assert_eq!(m.alloc(), Some(victim));
        }
    }

    #[test]
    fn claim_marks_allocated() {
        let m = SlotMap::new(1000);
        assert!(m.claim(700));
        assert!(!m.claim(700));
        assert!(m.is_allocated(700));
        assert_eq!(m.in_use(), 1);
        for _ in 0..999 {
            assert_ne!(m.alloc(), Some(700));
        }
        assert_eq!(m.alloc(), None);
    }

    /// Slots freed at random are handed out again before a free cluster is taken, and new
    /// clusters come from the low end: a swap file stays as dense as its live slots allow.
    #[test]
    fn holes_are_refilled_before_fresh_clusters() {
        let cs = CLUSTER_SLOTS as u64;
        let m = SlotMap::new(cs * 64);
        let mut live: Vec<u64> = (0..cs * 8).map(|_| m.alloc().unwrap()).collect();
        assert!(
            live.iter().all(|&s| s < cs * 8),
            "the first clusters are taken in order"
        );
        // Free about half the slots at random, as exclusive loads free slots all over the file.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut kept = Vec::new();
        for s in live.drain(..) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x & 1 == 0 {
                assert!(m.free(s));
            } else {
                kept.push(s);
            }
        }
        let holes = cs * 8 - kept.len() as u64;
        for _ in 0..holes {
            let s = m.alloc().unwrap();
            assert!(
                s < cs * 8,
                "slot {s} taken from a fresh cluster while holes remained"
            );
        }
        assert_eq!(m.in_use(), cs * 8);
        // Full now: the next cluster is the lowest free one.
        let s = m.alloc().unwrap();
        assert_eq!(s / cs, 8);
    }

    /// A cluster emptied below the others is the next one taken when none in use has room.
    #[test]
    fn an_emptied_low_cluster_is_taken_before_the_next_fresh_one() {
        let cs = CLUSTER_SLOTS as u64;
        let m = SlotMap::new(cs * 16);
        for _ in 0..cs * 4 {
            m.alloc().unwrap();
        }
        for s in cs..cs * 2 {
            assert!(m.free(s));
        }
        let s = m.alloc().unwrap();
        assert_eq!(s / cs, 1, "slot {s}");
        for _ in 1..cs {
            assert_eq!(m.alloc().unwrap() / cs, 1);
        }
        assert_eq!(m.alloc().unwrap() / cs, 4, "then the area grows at its end");
    }

    #[test]
    fn concurrent_alloc_free_unique() {
        let m = SlotMap::new(8192); // 4 threads keep 1800 each
        let per = 900;
        let got: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        for i in 0..per * 3 {
                            let v = m.alloc().expect("capacity suffices");
                            mine.push(v);
                            if i % 3 == 2 {
                                let f = mine.swap_remove(i % mine.len());
                                assert!(m.free(f));
                            }
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: Vec<u64> = got.into_iter().flatten().collect();
        let set: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len(), "a slot was owned twice");
        assert_eq!(m.in_use(), all.len() as u64);
    }
}

/// Loom models of the cluster bits: the free counter reserves, the bitmap claims. Run with
/// `scripts/loom.sh`.
#[cfg(all(test, loom))]
mod loom_models {
    use loom::sync::Arc;
    use loom::thread;

    use super::SlotMap;

    /// Two allocations racing for the last two slots of a cluster get distinct slots; a third
    /// finds the area full.
    #[test]
    fn allocations_race_for_the_last_slots() {
        loom::model(|| {
            let m = Arc::new(SlotMap::new(3));
            assert_eq!(m.alloc(), Some(0));
            let t = {
                let m = m.clone();
                thread::spawn(move || m.alloc())
            };
            let mine = m.alloc();
            let theirs = t.join().unwrap();
            let (a, b) = (mine.unwrap(), theirs.unwrap());
            assert_ne!(a, b, "one slot handed out twice");
            assert!(a < 3 && b < 3);
            assert_eq!(m.alloc(), None);
            assert_eq!(m.in_use(), 3);
        });
    }

    /// An allocation racing a free in a full cluster: it gets the freed slot or finds the area
    /// full, and never a slot that is still allocated.
    #[test]
    fn allocation_races_a_free() {
        loom::model(|| {
            let m = Arc::new(SlotMap::new(2));
            assert_eq!((m.alloc(), m.alloc()), (Some(0), Some(1)));
            let t = {
                let m = m.clone();
                thread::spawn(move || assert!(m.free(1)))
            };
            let got = m.alloc();
            t.join().unwrap();
            match got {
                Some(s) => {
                    assert_eq!(s, 1, "only the freed slot is free");
                    assert_eq!(m.in_use(), 2);
                }
                None => assert_eq!(m.in_use(), 1),
            }
        });
    }
}
