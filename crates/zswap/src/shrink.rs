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
//!   the heuristics of "zswap: shrink zswap pool based on memory pressure" (6.8); `shrink_slab`
//!   drives it as the kernel's `do_shrink_slab` does.
//!
//! The walks take a *lane*, the index of one LRU list among a cgroup's lists: the node with
//! the global LRU; with `LruMode::PerPool` (6.8, before "mm/zswap: global lru and shrinker
//! shared by all zswap_pools", v3, 6.9) a pool's lane base plus the node. Per-pool mode changes
//! only which lists are walked: `shrink_memcg` walks the current pool's (6.8 took
//! `zswap_pool_current_get()` there), the worker runs with the oldest pool's cgroup cursor (the
//! shrink work of `zswap_pool_last_get()`), and each pool has its own memory-pressure
//! shrinker. The worker's retry rules are today's in both modes.

use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

use crate::buf::{with_buf, PAGE_BUF};
use crate::cache::Inner;
use crate::index::{SlotValue, SlotWord};
use crate::lru::unpack_slot;
use crate::stats::{C, G};
use crate::{LruMode, WarmProtection, PAGE_SIZE};

/// The kernel's MAX_RECLAIM_RETRIES.
const MAX_RECLAIM_RETRIES: u32 = 16;
/// The kernel's SHRINK_BATCH (zswap's shrinker leaves `batch` at 0).
const SHRINK_BATCH: u64 = 128;
/// How much older (in LRU sequence numbers: stores and rotations) another cache's oldest entry
/// must be than this cache's for its worker's run to hand the writeback over.
const HANDOFF_MARGIN: u32 = 256;

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
    /// Look at the coldest entry of list (`list_cg`, `lane`).
    pub(crate) fn walk_one(&self, list_cg: u32, lane: usize, warm: WarmProtection) -> Walk {
        let Some(cg) = self.cgroups.get(list_cg) else {
            return Walk::Empty;
        };
        let Some(list) = cg.lists.get(lane) else {
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
        if e.lru != idx || u32::from(e.cgroup) != list_cg || self.entry_lane(&e) != lane {
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
            area.store.write_page(slot, buf).map_err(|e| {
                self.count_no_space(&e);
                G::SwapWriteErrors
            })
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
                self.release_entry(e, crate::entry::Object::JustRead);
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
                    // zswap_lru_putback: the (cgroup, node) lruvec's estimate.
                    cg.protected[lane % self.nodes].fetch_add(1, Relaxed);
                }
                Walk::Failed
            }
        }
    }

    /// Walk one entry across the lists `owner` covers (its own, then absorbed ones).
    fn walk_owner(&self, owner: u32, lane: usize, warm: WarmProtection) -> Walk {
        for id in self.cgroups.walk_ids(owner) {
            match self.walk_one(id, lane, warm) {
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

    /// The first lane `shrink_memcg` walks: the global lists, or with per-pool lists the
    /// current pool's (6.8's `shrink_memcg` walked `zswap_pool_current_get()->list_lru`).
    fn writeback_lane_base(&self) -> usize {
        match self.lru_mode() {
            LruMode::Global => 0,
            LruMode::PerPool => self.pools.current().lane_base,
        }
    }

    /// `shrink_memcg`: write back at most one entry per node of `cg`.
    pub(crate) fn shrink_memcg(&self, cg: u32) -> Result<(), ShrinkErr> {
        let online = self.cgroups.get(cg).is_some_and(|c| c.is_online());
        if !online || !self.cgroups.writeback_enabled(cg) {
            return Err(ShrinkErr::NoEnt);
        }
        let warm = self.hot.warm();
        let base = self.writeback_lane_base();
        let (mut scanned, mut shrunk, mut rotated) = (0, 0, 0);
        for node in 0..self.nodes {
            let w = self.walk_owner(cg, base + node, warm);
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
    /// the accept threshold. With per-pool lists this is the shrink work of the oldest live
    /// pool (a store over the limit queued `zswap_pool_last_get()`'s `shrink_work` in 6.8): it
    /// moves that pool's cgroup cursor, while `shrink_memcg` walks the current pool's lists.
    pub(crate) fn shrink_worker(&self) {
        self.shrink_worker_run(false)
    }

    /// The worker's run; `yield_to_hold`: the background worker ends it early when held
    /// (`Inner::yield_to_hold`), a direct caller runs it to its end.
    pub(crate) fn shrink_worker_run(&self, yield_to_hold: bool) {
        self.count(G::ShrinkWorkerRuns);
        let thr = self.hot.accept_pages.load(Relaxed);
        let (mut failures, mut attempts) = (0u32, 0u32);
        let work_pool = (self.lru_mode() == LruMode::PerPool).then(|| self.pools.oldest());
        if self.pools.total_pages() > thr && self.older_entries_outside() {
            // One LRU for the caches sharing the limit: the oldest entries are another
            // cache's, whose worker the embedder starts. Decided once per run: a run that
            // starts writes back to the threshold, rotations included (a second-chance
            // rotation makes an entry the newest, and deciding at each entry made two caches
            // of interleaved ages hand the work back and forth without writing anything).
            if let Some(f) = self.worker.handoff {
                f();
            }
            return;
        }
        loop {
            if self.pools.total_pages() <= thr
                || self.stopping()
                || (yield_to_hold && self.yield_to_hold())
            {
                return;
            }
            let next = match &work_pool {
                None => self.cgroups.iter_next(),
                Some(p) => self.cgroups.iter_next_from(&p.cursor),
            };
            match next {
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
            if self.stats.sum(G::InFlight as usize) as i64 > 0 {
                self.count(G::ShrinkWorkerYields);
                std::thread::yield_now();
            }
        }
    }

    /// The LRU clock's next sequence number (the root's first list's: shared by every list
    /// of a cache made by `Zswap::for_process_tree`).
    fn lru_now(&self) -> Option<u32> {
        Some(self.cgroups.get(0)?.lists.first()?.clock().load(Relaxed))
    }

    /// The sequence number of this cache's oldest LRU entry (every cgroup, every lane).
    pub(crate) fn lru_oldest(&self) -> Option<u32> {
        let now = self.lru_now()?;
        (0..self.cgroups.id_limit())
            .filter_map(|id| self.cgroups.get(id))
            .flat_map(|c| c.lists.iter())
            .filter_map(|l| l.oldest())
            .max_by_key(|&h| now.wrapping_sub(h))
    }

    /// Does a cache outside this one that shares its LRU clock hold an entry older than this
    /// one's oldest by more than `HANDOFF_MARGIN` (so that two caches whose entries are about
    /// as old don't hand the work to each other at every run)? Always false for a cache
    /// alone (`NO_OUTSIDE_ENTRY`).
    pub(crate) fn older_entries_outside(&self) -> bool {
        let o = self.outside_oldest.load(Relaxed);
        if o == crate::cache::NO_OUTSIDE_ENTRY {
            return false;
        }
        let Some(now) = self.lru_now() else {
            return false;
        };
        match self.lru_oldest() {
            None => true,
            Some(own) => {
                now.wrapping_sub(o as u32) > now.wrapping_sub(own).saturating_add(HANDOFF_MARGIN)
            }
        }
    }

    /// Entries on the lists `cg` covers for `lane`.
    fn lru_len(&self, cg: u32, lane: usize) -> u64 {
        self.cgroups
            .walk_ids(cg)
            .into_iter()
            .filter_map(|id| self.cgroups.get(id))
            .filter_map(|c| c.lists.get(lane).map(|l| l.len()))
            .sum()
    }

    /// The lanes of `node` whose shrinkers run for (cgroup, node): the node's list, or one
    /// per live pool (each pool registered its own shrinker before "mm/zswap: global lru and
    /// shrinker shared by all zswap_pools"), in pool-slot order, as shrinkers run in id order.
    fn shrinker_lanes(&self, node: usize) -> Vec<usize> {
        match self.lru_mode() {
            LruMode::Global => vec![node],
            LruMode::PerPool => {
                let mut lanes = self.lanes(node);
                lanes.sort_unstable();
                lanes
            }
        }
    }

    /// `zswap_shrinker_count`: the sum over the shrinkers of (`cg`, `node`).
    pub(crate) fn shrinker_count(&self, cg: u32, node: usize) -> u64 {
        if self.lru_mode() == LruMode::Global || node >= self.nodes {
            return self.shrinker_count_lane(cg, node, node);
        }
        self.shrinker_lanes(node)
            .into_iter()
            .map(|lane| self.shrinker_count_lane(cg, node, lane))
            .sum()
    }

    /// `zswap_shrinker_count` of the shrinker whose list is `lane`.
    fn shrinker_count_lane(&self, cg: u32, node: usize, lane: usize) -> u64 {
        if !self.hot.shrinker_enabled.load(Relaxed) || !self.cgroups.writeback_enabled(cg) {
            return 0;
        }
        let Some(c) = self.cgroups.get(cg).filter(|c| c.is_online()) else {
            return 0;
        };
        if node >= self.nodes {
            return 0;
        }
        // The cgroup's figures, whatever the pool (memcg stats in 6.8 too).
        let nr_backing = c.stats.gauge(C::ZswapBytes as usize) / PAGE_SIZE as u64;
        let nr_stored = c.stats.gauge(C::Zswapped as usize);
        if nr_stored == 0 {
            return 0;
        }
        let mut nr_freeable = self.lru_len(cg, lane);
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
                let protected = c.protected[node].load(Relaxed);
                nr_freeable = nr_freeable.saturating_sub(protected);
            }
        }
        if nr_freeable == 0 {
            return 0;
        }
        // Scale by the compression ratio: well-compressed pools free little per writeback.
        ((nr_freeable as u128 * nr_backing as u128) / nr_stored as u128) as u64
    }

    /// `zswap_shrinker_scan` of (`cg`, `node`); with per-pool lists each pool's in turn,
    /// sharing `nr_to_scan`, `stop` when every one asked said so.
    pub(crate) fn shrinker_scan(&self, cg: u32, node: usize, nr_to_scan: u64) -> ShrinkScan {
        if self.lru_mode() == LruMode::Global || node >= self.nodes {
            return self.shrinker_scan_lane(cg, node, node, nr_to_scan);
        }
        let mut total = ShrinkScan {
            stop: true,
            ..ShrinkScan::default()
        };
        for lane in self.shrinker_lanes(node) {
            let left = nr_to_scan.saturating_sub(total.scanned);
            if left == 0 {
                break;
            }
            let r = self.shrinker_scan_lane(cg, node, lane, left);
            total.scanned += r.scanned;
            total.freed += r.freed;
            total.stop &= r.stop;
        }
        total
    }

    /// `zswap_shrinker_scan` of the shrinker whose list is `lane`.
    fn shrinker_scan_lane(&self, cg: u32, node: usize, lane: usize, nr_to_scan: u64) -> ShrinkScan {
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
            let lru_size = self.lru_len(cg, lane);
            let protected = self
                .cgroups
                .get(cg)
                .map_or(0, |c| c.protected[node].load(Relaxed));
            if protected >= lru_size.saturating_sub(nr_to_scan) {
                r.stop = true;
                return r;
            }
        }
        let mut met_loading = false;
        while r.scanned < nr_to_scan {
            let w = self.walk_owner(cg, lane, warm);
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

    /// `shrink_slab` for zswap's shrinker(s) of (`cg`, `node`): see [`crate::Zswap::shrink_slab`].
    pub(crate) fn shrink_slab(&self, cg: u32, node: usize, priority: u32) -> ShrinkScan {
        self.shrink_slab_with(cg, node, |count| (count >> priority.min(63)) * 2, false)
    }

    /// `shrink_slab` in proportion to an LRU scan of `lru_scanned` of `lru_size` pages: see
    /// [`crate::Zswap::shrink_slab_share`].
    pub(crate) fn shrink_slab_share(
        &self,
        cg: u32,
        node: usize,
        lru_scanned: u64,
        lru_size: u64,
    ) -> ShrinkScan {
        self.shrink_slab_with(
            cg,
            node,
            |count| {
                let d =
                    2 * u128::from(lru_scanned) * u128::from(count) / u128::from(lru_size.max(1));
                d.min(u128::from(count)) as u64
            },
            false,
        )
    }

    /// `do_shrink_slab` for each shrinker of (`cg`, `node`), without its deferred work:
    /// `delta` from the shrinker's count (`(count >> priority) × 4 / DEFAULT_SEEKS` for a
    /// reclaim pass at a priority), at most `2 × count`, scanned in batches while at least a
    /// batch or the whole count is left. `at_least_one` (the PSI pass): scan at least one entry
    /// of a shrinker with a count, in batches until `delta` is done.
    fn shrink_slab_with(
        &self,
        cg: u32,
        node: usize,
        delta_of: impl Fn(u64) -> u64,
        at_least_one: bool,
    ) -> ShrinkScan {
        let mut total = ShrinkScan {
            stop: true,
            ..ShrinkScan::default()
        };
        if node >= self.nodes {
            return total;
        }
        for lane in self.shrinker_lanes(node) {
            let count = self.shrinker_count_lane(cg, node, lane);
            if count == 0 {
                continue;
            }
            let delta = delta_of(count);
            let mut todo = if at_least_one {
                delta.max(1)
            } else {
                delta.min(2 * count)
            };
            let mut stopped = false;
            while todo > 0 && (at_least_one || todo >= SHRINK_BATCH || todo >= count) {
                let batch = todo.min(SHRINK_BATCH);
                let r = self.shrinker_scan_lane(cg, node, lane, batch);
                total.scanned += r.scanned;
                total.freed += r.freed;
                todo -= batch;
                if r.stop {
                    stopped = true;
                    break;
                }
            }
            total.stop &= stopped;
        }
        total
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
                freed += self
                    .shrink_slab_with(cg, node, |count| (count >> priority.min(63)) * 2, true)
                    .freed;
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{cache, page, set_loading};
    use crate::{Algorithm, CgroupId, LoadOutcome, LruMode, Params, SwapSlot, Zswap, PAGE_SIZE};

    /// `shrink_slab_share`: nothing for an empty LRU scan; for an LRU scanned whole, the
    /// whole count (capped there), first clearing referenced bits, then writing back.
    #[test]
    #[cfg_attr(miri, ignore = "writes back through the shrinker: slow under Miri")]
    fn shrink_slab_share_scans_in_proportion_to_the_lru_scan() {
        let z = cache();
        for i in 0..64 {
            z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT);
        }
        let count = z.shrinker_count(CgroupId::ROOT, 0);
        assert!(count > 0);
        assert_eq!(z.shrink_slab_share(CgroupId::ROOT, 0, 0, 1000).scanned, 0);
        let r = z.shrink_slab_share(CgroupId::ROOT, 0, 1000, 1000);
        assert_eq!(
            (r.scanned, r.freed),
            (count, 0),
            "referenced bits cleared first"
        );
        // Each pass scans `count` entries of the 64: once every bit is cleared, it frees.
        let freed: u64 = (0..64)
            .map(|_| z.shrink_slab_share(CgroupId::ROOT, 0, 1000, 1000).freed)
            .sum();
        assert!(freed > 0);
        assert_eq!(z.counters().written_back_pages, freed);
    }

    /// 6.8: a store over the limit queues the oldest pool's shrink work, whose walk moves that
    /// pool's own cgroup cursor (`pool->next_shrink`), while `shrink_memcg` walks the current
    /// pool's lists; the current pool's cursor stays where it was. Removing a cgroup moves every
    /// pool's cursor off it (`zswap_memcg_offline_cleanup`).
    #[test]
    fn per_pool_worker_runs_with_the_oldest_pools_cursor() {
        let swap = std::sync::Arc::new(
            crate::SwapFile::create_temp(&std::env::temp_dir(), 0, 256).unwrap(),
        );
        for _ in 0..256 {
            swap.alloc_slot().unwrap();
        }
        let z = Zswap::new(Params {
            lru: LruMode::PerPool,
            numa_nodes: 1,
            proactive_shrink: false,
            total_memory_bytes: 64 << 20,
            ..Params::default()
        })
        .unwrap();
        z.add_swap_file(swap).unwrap();
        let a = z.create_cgroup(CgroupId::ROOT).unwrap();
        let b = z.create_cgroup(CgroupId::ROOT).unwrap();
        for i in 0..64 {
            let cg = [CgroupId::ROOT, a, b][i as usize % 3];
            z.store(SwapSlot::new(0, i), &page(i as u8), cg);
        }
        z.set_params(Params {
            compressor: Algorithm::Zstd { level: 1 },
            ..z.params()
        })
        .unwrap();
        // Incompressible pages in the new pool: one pool page each, so the walk stops after
        // a few writebacks, in the middle of a round.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 64..96 {
            let noise: Vec<u8> = (0..PAGE_SIZE)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let cg = [CgroupId::ROOT, a, b][i as usize % 3];
            z.store(SwapSlot::new(0, i), &noise, cg);
        }
        let (oldest, current) = (z.inner.pools.oldest(), z.inner.pools.current());
        assert_ne!(oldest.id, current.id);
        assert_eq!(current.lane_base, usize::from(current.id));
        // An accept threshold two pages below the pool.
        z.set_params(Params {
            max_pool_percent: 100,
            accept_threshold_percent: 100,
            total_memory_bytes: (z.pool_total_pages() - 2) * PAGE_SIZE as u64,
            ..z.params()
        })
        .unwrap();
        z.run_shrink_worker();
        assert_eq!(z.counters().written_back_pages, 2);
        assert!(
            oldest.cursor.lock().is_some(),
            "the oldest pool's cursor moved"
        );
        assert!(current.cursor.lock().is_none());
        assert_eq!(
            *z.inner.cgroups.cursor.lock(),
            None,
            "the global cursor is unused"
        );
        // Only the current (zstd) pool's entries were written back.
        for i in 0..64 {
            assert!(matches!(
                z.slot_state(SwapSlot::new(0, i)),
                Some(crate::SlotState::Stored { .. })
            ));
        }
        *oldest.cursor.lock() = Some(a.0);
        z.remove_cgroup(a).unwrap();
        assert_eq!(*oldest.cursor.lock(), Some(0));
    }

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
