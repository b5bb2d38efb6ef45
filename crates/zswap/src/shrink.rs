// SPDX-License-Identifier: MIT
//! Writeback and the two shrinkers.
//!
//! * `walk_one`: the LRU walk callback (`shrink_memcg_cb`): rotate, second chance, revalidate,
//!   write back.
//! * `shrink_memcg`: one entry per node of one cgroup (the kernel's `shrink_memcg`).
//! * `shrink_worker`: the global, pool-limit driven worker; round-robin over online cgroups with
//!   the fixes of the series "mm: zswap: global shrinker fix and proactive shrink" (v2, on 6.10-rc6): offline or empty cgroups don't end the
//!   walk and don't count as failures, expected outcomes aren't failures, give up after 16 real
//!   failures.
//! * `shrinker_count` / `shrinker_scan`: the memory-pressure shrinker per (cgroup, node) with
//!   the heuristics of "zswap: shrink zswap pool based on memory pressure" (6.8).

use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

use crate::buf::{with_buf, PAGE_BUF};
use crate::cache::Inner;
use crate::index::{SlotValue, SlotWord};
use crate::lru::unpack_slot;
use crate::stats::{C, G};
use crate::{WarmProtection, PAGE_SIZE};

/// The kernel's MAX_RECLAIM_RETRIES.
const MAX_RECLAIM_RETRIES: u32 = 16;

/// Result of a memory-pressure scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShrinkScan {
    /// LRU entries looked at.
    pub scanned: u64,
    /// Entries written back and freed.
    pub freed: u64,
    /// SHRINK_STOP: nothing freed, or the walk met an entry being loaded (the warm region).
    pub stop: bool,
}

/// Outcome of looking at one LRU entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// The list is empty.
    Empty,
    /// Referenced: bit cleared, entry rotated (second chance).
    Rotated,
    WrittenBack,
    /// The node's entry is changing (being freed or replaced) or its slot is gone.
    Stale,
    /// The slot is in flight: loading (`true`, the warm region) or written back by another walker.
    Busy(bool),
    /// The entry's cgroup may not write back.
    NoWriteback,
    /// Decompression or the swap-file write failed; the entry stays.
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShrinkErr {
    /// -ENOENT: nothing to do here (empty, offline, writeback disabled); not a failure.
    NoEnt,
    /// -EAGAIN: looked at entries, freed none.
    Again,
    /// Looked at entries and only cleared referenced bits (second chance): progress, not failure.
    Rotated,
}

impl Inner {
    /// Look at the coldest entry of list (`list_cg`, `node`).
    pub(crate) fn walk_one(&self, list_cg: u32, node: usize, warm: WarmProtection) -> Walk {
        let Some(cg) = self.cgroups.get(list_cg) else {
            return Walk::Empty;
        };
        let Some(list) = cg.lists.get(node) else {
            return Walk::Empty;
        };
        // Rotate before dropping the list lock: whatever happens next, the entry is no longer
        // at the head, and the walk can't spin on it.
        let Some((idx, key)) = list.rotate_head() else {
            return Walk::Empty;
        };
        let slot = unpack_slot(key);
        let Some(area) = self.area(slot.area) else {
            return Walk::Stale;
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return Walk::Stale;
        };
        let mut t = shard.table.lock();
        let w = t.word(i);
        if w.busy() {
            return Walk::Busy(w.loading());
        }
        let SlotValue::Entry(ei) = w.value() else {
            return Walk::Stale;
        };
        let e = *t.entry(ei);
        // Revalidate by identity: the entry must still be the one this node belongs to.
        if e.lru != idx || u32::from(e.cgroup) != list_cg || e.node as usize != node {
            return Walk::Stale;
        }
        if warm == WarmProtection::SecondChance && e.referenced {
            t.entry_mut(ei).referenced = false;
            return Walk::Rotated;
        }
        if !self.cgroups.writeback_enabled(u32::from(e.cgroup)) {
            return Walk::NoWriteback;
        }
        t.set_word(i, w.with_writeback());
        drop(t);
        // The slot is ours: decompress and write with no lock held.
        let res = with_buf(&PAGE_BUF, PAGE_SIZE, |buf| {
            if self.decompress_entry(&e, buf).is_err() {
                return Err(G::DecompressFail);
            }
            area.store
                .write_page(slot, buf)
                .map_err(|_| G::SwapWriteErrors)
        });
        let mut t = shard.table.lock();
        match res {
            Ok(()) => {
                t.free_entry(ei);
                t.set_word(
                    i,
                    SlotWord::EMPTY.with_value(SlotValue::OnDisk(u32::from(e.cgroup))),
                );
                shard.wake(&t);
                drop(t);
                self.release_entry(e);
                self.count(G::WrittenBackPages);
                self.count(G::Zswpwb);
                self.cgroups.event(u32::from(e.cgroup), C::Zswpwb);
                Walk::WrittenBack
            }
            Err(g) => {
                t.set_word(i, w);
                shard.wake(&t);
                drop(t);
                self.count(g);
                if warm == WarmProtection::ProtectedSize {
                    list.add_protected();
                }
                Walk::Failed
            }
        }
    }

    /// Walk one entry across the lists `owner` covers (its own, then absorbed ones).
    fn walk_owner(&self, owner: u32, node: usize, warm: WarmProtection) -> Walk {
        for id in self.cgroups.walk_ids(owner) {
            match self.walk_one(id, node, warm) {
                Walk::Empty => continue,
                w => return w,
            }
        }
        Walk::Empty
    }

    fn count_walk(&self, w: Walk) {
        match w {
            Walk::Empty => {}
            Walk::WrittenBack => {
                self.count(G::ShrinkerScanned);
                self.count(G::ShrinkerFreed);
            }
            Walk::Rotated => self.count(G::ShrinkerScanned),
            Walk::Stale | Walk::Busy(_) | Walk::NoWriteback | Walk::Failed => {
                self.count(G::ShrinkerScanned);
                self.count(G::RejectReclaimFail);
            }
        }
    }

    /// `shrink_memcg`: write back at most one entry per node of `cg`.
    pub(crate) fn shrink_memcg(&self, cg: u32) -> Result<(), ShrinkErr> {
        let online = self.cgroups.get(cg).is_some_and(|c| c.is_online());
        if !online || !self.cgroups.writeback_enabled(cg) {
            return Err(ShrinkErr::NoEnt);
        }
        let warm = self.hot.warm();
        let (mut scanned, mut shrunk, mut rotated) = (0, 0, 0);
        for node in 0..self.nodes {
            let w = self.walk_owner(cg, node, warm);
            self.count_walk(w);
            match w {
                Walk::Empty => {}
                Walk::WrittenBack => {
                    scanned += 1;
                    shrunk += 1;
                }
                Walk::Rotated => {
                    scanned += 1;
                    rotated += 1;
                }
                _ => scanned += 1,
            }
        }
        if scanned == 0 {
            Err(ShrinkErr::NoEnt)
        } else if shrunk > 0 {
            Ok(())
        } else if rotated == scanned {
            Err(ShrinkErr::Rotated)
        } else {
            Err(ShrinkErr::Again)
        }
    }

    /// The global shrink worker: round-robin over online cgroups until the pool is at or below
    /// the accept threshold.
    pub(crate) fn shrink_worker(&self) {
        self.count(G::ShrinkWorkerRuns);
        let thr = self.hot.accept_pages.load(Relaxed);
        let (mut failures, mut attempts) = (0u32, 0u32);
        loop {
            if self.pools.total_pages() <= thr || self.stopping() {
                return;
            }
            match self.cgroups.iter_next() {
                None => {
                    // A full walk ended. Only a walk with no attempt at all is a failure;
                    // offline and empty cgroups were skipped, not counted ("mm: zswap: fix global
                    // shrinker memcg iteration", v2, on 6.10-rc6).
                    if attempts == 0 {
                        failures += 1;
                        if failures >= MAX_RECLAIM_RETRIES {
                            return;
                        }
                    }
                    attempts = 0;
                }
                Some(cg) => match self.shrink_memcg(cg) {
                    // Nothing to do in this cgroup: expected, not a failure ("mm: zswap: fix
                    // global shrinker error handling logic", v2, on 6.10-rc6).
                    Err(ShrinkErr::NoEnt) => {}
                    Ok(()) => attempts += 1,
                    Err(ShrinkErr::Rotated) if !self.hot.rotation_is_failure.load(Relaxed) => {
                        attempts += 1
                    }
                    // The kernel: a visit that only rotated is -EAGAIN, a failure.
                    Err(ShrinkErr::Rotated | ShrinkErr::Again) => {
                        attempts += 1;
                        failures += 1;
                        if failures >= MAX_RECLAIM_RETRIES {
                            return;
                        }
                    }
                },
            }
            // Yield to waiting page-ins and page-outs (patch 6 of "mm: zswap: global shrinker fix and proactive shrink" (v2, on 6.10-rc6)).
            if self.hot_ops.sum(0) as i64 > 0 {
                self.count(G::ShrinkWorkerYields);
                std::thread::yield_now();
            }
        }
    }

    /// Entries on the lists `cg` covers for `node`.
    fn lru_len(&self, cg: u32, node: usize) -> u64 {
        self.cgroups
            .walk_ids(cg)
            .into_iter()
            .filter_map(|id| self.cgroups.get(id))
            .filter_map(|c| c.lists.get(node).map(|l| l.len()))
            .sum()
    }

    /// `zswap_shrinker_count`.
    pub(crate) fn shrinker_count(&self, cg: u32, node: usize) -> u64 {
        if !self.hot.shrinker_enabled.load(Relaxed) || !self.cgroups.writeback_enabled(cg) {
            return 0;
        }
        let Some(c) = self.cgroups.get(cg).filter(|c| c.is_online()) else {
            return 0;
        };
        if node >= self.nodes {
            return 0;
        }
        let nr_backing = c.stats.gauge(C::ZswapBytes as usize) / PAGE_SIZE as u64;
        let nr_stored = c.stats.gauge(C::Zswapped as usize);
        if nr_stored == 0 {
            return 0;
        }
        let mut nr_freeable = self.lru_len(cg, node);
        if nr_freeable == 0 {
            return 0;
        }
        match self.hot.warm() {
            WarmProtection::SecondChance => {
                // Consume the disk swap-in credit: pages that came back from disk were written
                // back too early, so shrink that much less.
                let ds = &c.disk_swapins[node];
                let mut cur = ds.load(Relaxed);
                loop {
                    let remain = cur.saturating_sub(nr_freeable);
                    match ds.compare_exchange_weak(cur, remain, Relaxed, Relaxed) {
                        Ok(_) => {
                            nr_freeable -= cur - remain;
                            break;
                        }
                        Err(v) => cur = v,
                    }
                }
            }
            WarmProtection::ProtectedSize => {
                let protected = c.lists[node].protected();
                nr_freeable = nr_freeable.saturating_sub(protected);
            }
        }
        if nr_freeable == 0 {
            return 0;
        }
        // Scale by the compression ratio: well-compressed pools free little per writeback.
        ((nr_freeable as u128 * nr_backing as u128) / nr_stored as u128) as u64
    }

    /// `zswap_shrinker_scan`.
    pub(crate) fn shrinker_scan(&self, cg: u32, node: usize, nr_to_scan: u64) -> crate::ShrinkScan {
        let mut r = ShrinkScan::default();
        let online = self.cgroups.get(cg).is_some_and(|c| c.is_online());
        if !self.hot.shrinker_enabled.load(Relaxed)
            || !online
            || !self.cgroups.writeback_enabled(cg)
            || node >= self.nodes
        {
            r.stop = true;
            return r;
        }
        let warm = self.hot.warm();
        if warm == WarmProtection::ProtectedSize {
            let lru_size = self.lru_len(cg, node);
            let protected = self
                .cgroups
                .get(cg)
                .map_or(0, |c| c.lists[node].protected());
            if protected >= lru_size.saturating_sub(nr_to_scan) {
                r.stop = true;
                return r;
            }
        }
        let mut met_loading = false;
        while r.scanned < nr_to_scan {
            let w = self.walk_owner(cg, node, warm);
            self.count_walk(w);
            match w {
                Walk::Empty => break,
                Walk::WrittenBack => r.freed += 1,
                Walk::Busy(true) => {
                    // A page being swapped in: the walk reached the warm region
                    // ("zswap: shrink zswap pool based on memory pressure" (6.8)).
                    r.scanned += 1;
                    met_loading = true;
                    break;
                }
                _ => {}
            }
            r.scanned += 1;
        }
        r.stop = met_loading || r.freed == 0;
        r
    }

    /// One memory-pressure pass over all online cgroups and nodes.
    pub(crate) fn shrink_all(&self, priority: u32) -> u64 {
        // What costs no I/O goes first: zsmalloc's own shrinker compacts the pools, which also
        // gives the freed pool memory kept for reuse back to the OS.
        self.compact_pools();
        let mut freed = 0;
        for cg in 0..self.cgroups.id_limit() {
            if !self.cgroups.get(cg).is_some_and(|c| c.is_online()) {
                continue;
            }
            for node in 0..self.nodes {
                let count = self.shrinker_count(cg, node);
                if count == 0 {
                    continue;
                }
                // shrink_slab's delta with DEFAULT_SEEKS: (freeable >> priority) * 4 / 2.
                let mut todo = ((count >> priority.min(63)) * 2).max(1);
                while todo > 0 {
                    let batch = todo.min(128);
                    let r = self.shrinker_scan(cg, node, batch);
                    freed += r.freed;
                    todo -= batch;
                    if r.stop {
                        break;
                    }
                }
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{cache, page, set_loading};
    use crate::{CgroupId, LoadOutcome, SwapSlot, PAGE_SIZE};

    #[test]
    fn pressure_shrinker_stops_at_a_page_being_loaded() {
        let z = cache();
        for i in 0..4 {
            z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT);
        }
        // Clear the referenced bits, then make the second-coldest entry "being loaded".
        assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, 4).freed, 0);
        set_loading(&z, SwapSlot::new(0, 1), true);
        let r = z.shrinker_scan(CgroupId::ROOT, 0, 4);
        assert_eq!(
            (r.scanned, r.freed, r.stop),
            (2, 1, true),
            "wrote back slot 0, stopped at slot 1"
        );
        set_loading(&z, SwapSlot::new(0, 1), false);
        // Once the load is over the walk goes on.
        let r = z.shrinker_scan(CgroupId::ROOT, 0, 4);
        assert_eq!(r.freed, 3);
        let mut buf = vec![0u8; PAGE_SIZE];
        for i in 0..4 {
            assert_eq!(
                z.load(SwapSlot::new(0, i), &mut buf, false).unwrap(),
                LoadOutcome::FromSwapFile
            );
            assert_eq!(buf, page(i as u8));
        }
    }
}
