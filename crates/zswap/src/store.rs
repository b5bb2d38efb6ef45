// SPDX-License-Identifier: MIT
//! The store path (`zswap_store`): zero-page check, limits, compression outside any lock,
//! allocation in the current pool, LRU node, then the slot word under the shard lock; and
//! `swap_out`, which writes a rejected page to the backing store.

use std::sync::atomic::Ordering::Relaxed;

use crate::buf::{with_buf, COMP_BUF};
use crate::cache::{Area, Inner};
use crate::cgroup::CgroupId;
use crate::index::{Entry, Shard, SlotValue, SlotWord};
use crate::lru::pack_slot;
use crate::numa;
use crate::outcome::{RejectReason, StoreOutcome};
use crate::params::WarmProtection;
use crate::poolref;
use crate::stats::{C, G};
use crate::worker::HotGuard;
use crate::{Error, SwapSlot, PAGE_SIZE};

/// True if every byte of the page is zero (first line first: see below).
#[inline]
pub(crate) fn is_zero_page(p: &[u8]) -> bool {
    // The first line decides for almost every page, and compression reads it next anyway
    // (checking the last line first cost a cache miss of its own); the rest is OR-folded in
    // 256-byte blocks the compiler vectorizes.
    let (head, rest) = p.split_at(64.min(p.len()));
    if head.iter().fold(0u8, |a, &b| a | b) != 0 {
        return false;
    }
    let mut blocks = rest.chunks_exact(256);
    blocks.all(|c| c.iter().fold(0u8, |a, &b| a | b) == 0)
        && blocks.remainder().iter().all(|&b| b == 0)
}

impl Inner {
    /// [`Zswap::prepare_thread`](crate::Zswap::prepare_thread).
    pub(crate) fn prepare_thread(&self) {
        let alg = self.pools.with_snapshot(|s| s.current.alg);
        prepare_thread_for(alg, true);
    }
}

/// [`Zswap::prepare_thread_for`](crate::Zswap::prepare_thread_for).
/// `contexts`: make the codec's contexts too (else LZ4's and LZO's are only registered, see
/// `uzswap_compress::register_thread`).
pub(crate) fn prepare_thread_for(alg: uzswap_compress::Algorithm, contexts: bool) {
    let _ = crate::stats::stripe_index();
    crate::pool::touch_snapshots();
    with_buf(
        &COMP_BUF,
        uzswap_compress::MAX_COMPRESSED_LEN.max(PAGE_SIZE),
        |buf| {
            if !contexts && uzswap_compress::register_thread(alg) {
                return;
            }
            // A page that compresses, so that both directions run once.
            let page = [0x5a_u8; PAGE_SIZE];
            if let Ok(n) = uzswap_compress::compress(alg, &page, buf) {
                let mut out = [0u8; PAGE_SIZE];
                let _ = uzswap_compress::decompress(alg, &buf[..n], &mut out);
            }
        },
    );
}

impl Inner {
    /// `node`: the page's NUMA node, `None` for the calling CPU's.
    pub(crate) fn store(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: Option<usize>,
    ) -> StoreOutcome {
        let _hot = HotGuard::new(&self.stats);
        if page.len() != PAGE_SIZE {
            return StoreOutcome::Rejected(RejectReason::BadPageLength);
        }
        let Some(area) = self.area(slot.area) else {
            return StoreOutcome::Rejected(RejectReason::NoSwapArea);
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return StoreOutcome::Rejected(RejectReason::SlotOutOfRange);
        };
        if self.cgroups.get(cg.0).is_none() {
            return StoreOutcome::Rejected(RejectReason::NoSuchCgroup);
        }
        if node.is_some_and(|n| n >= self.nodes) {
            return StoreOutcome::Rejected(RejectReason::NoSuchNode);
        }
        let cg = self.cgroups.resolve(cg.0);
        let res = if is_zero_page(page) {
            if !self.hot.zero_entries.load(Relaxed) {
                self.store_zero(area, shard, i, slot);
                return StoreOutcome::StoredZero;
            }
            self.store_zero_entry(area, shard, i, slot, cg)
        } else {
            self.store_compressed(area, shard, i, slot, page, cg, node)
        };
        match res {
            Ok(o) => o,
            Err(reason) => self.rejected(area, shard, i, slot, reason),
        }
    }

    /// A store was rejected: drop the slot's old content and maybe kick the shrink worker.
    fn rejected(
        &self,
        area: &Area,
        shard: &Shard,
        i: usize,
        slot: SwapSlot,
        reason: RejectReason,
    ) -> StoreOutcome {
        // check_old: a stale copy must not survive a failed store.
        self.replace_slot(area, shard, i, slot, SlotValue::Empty);
        let proactive = self.hot.proactive.load(Relaxed);
        // Kernel: shrink whenever a store fails while the pool is full. Proactive
        // shrinking ("mm: zswap: proactive shrinking before pool size limit is hit"): also
        // when the allocator failed, to make room.
        if (!proactive && self.reached_full.load(Relaxed))
            || (proactive && reason == RejectReason::AllocFail)
        {
            self.kick_worker();
        }
        StoreOutcome::Rejected(reason)
    }

    /// "mm: zswap: store zero-filled pages without a zswap_entry" (6.10): a zero page is only a slot value; the store and load helpers and
    /// `replace_slot` are the only places that know about it.
    pub(crate) fn store_zero(&self, area: &Area, shard: &Shard, i: usize, slot: SwapSlot) {
        self.replace_slot(area, shard, i, slot, SlotValue::Zero);
        self.count(G::SwpoutZero);
    }

    /// A zero-filled page with an entry of length 0 (`Params::zero_page_entries`): zswap_store
    /// as it was before "mm: zswap: store zero-filled pages without a zswap_entry" (RFC, Mar
    /// 2024). Read in 6.8's mm/zswap.c: `zswap_enabled`, then the cgroup's zswap.max (one
    /// synchronous `shrink_memcg`), then the pool limit with its hysteresis, then the entry
    /// allocation, and only then the same-filled check; the entry gets no pool object and is
    /// not put on the LRU (`if (entry->length)`), is charged to the cgroup with 0 bytes (one
    /// `zswapped` page), and counts in `stored_pages`, `same_filled_pages` and zswpout.
    pub(crate) fn store_zero_entry(
        &self,
        area: &Area,
        shard: &Shard,
        i: usize,
        slot: SwapSlot,
        cg: u32,
    ) -> Result<StoreOutcome, RejectReason> {
        self.admit(cg)?;
        let full = self.pools.with_snapshot(|s| {
            self.check_limits(s.all.iter().map(|p| p.zs.total_pages() as u64).sum())
        });
        if full {
            self.count(G::RejectPoolLimit);
            return Err(RejectReason::PoolLimit);
        }
        let entry = Entry {
            // Below MAX_CGROUPS (index.rs asserts it fits).
            cgroup: cg as u16,
            ..Entry::default()
        };
        let stored = !self.faults.fail_entry_alloc() && {
            let (mut t, w) = shard.lock_idle(i);
            t.reserve_entries() && {
                self.stats.add(G::StoredPages as usize, 1);
                self.stats.add(G::SameFilledPages as usize, 1);
                self.cgroups.charge(cg, 0);
                let old = t.replace_entry(i, w, entry);
                Self::discard_owned(area, slot, w);
                t.set_word(
                    i,
                    SlotWord::EMPTY.with_value(SlotValue::ZeroEntry(i as u32)),
                );
                drop(t);
                self.after_store(w, old);
                true
            }
        };
        if !stored {
            self.count(G::RejectKmemcacheFail);
            return Err(RejectReason::KmemcacheFail);
        }
        self.count(G::Zswpout);
        self.cgroups.event(cg, C::Zswpout);
        Ok(StoreOutcome::Stored)
    }

    /// `zswap_enabled` and the cgroup's zswap.max (with the kernel's one synchronous writeback
    /// attempt, or the asynchronous variant), the first checks of `zswap_store`. Always
    /// inlined: the store path must not pay a call for sharing it with zero entries.
    #[inline(always)]
    pub(crate) fn admit(&self, cg: u32) -> Result<(), RejectReason> {
        if !self.hot.enabled.load(Relaxed) {
            self.count(G::RejectDisabled);
            return Err(RejectReason::Disabled);
        }
        if self.cgroups.over_limit(cg).is_some() {
            let retry = self.hot.memcg_sync.load(Relaxed) && self.shrink_memcg(cg).is_ok();
            if !retry {
                self.count(G::RejectCgroupLimit);
                if !self.hot.memcg_sync.load(Relaxed) {
                    self.kick_memcg(cg);
                }
                return Err(RejectReason::CgroupLimit);
            }
        }
        Ok(())
    }

    /// Pool limit with the kernel's hysteresis, or the proactive variant ("mm: zswap: proactive
    /// shrinking before pool size limit is hit", v2, on 6.10-rc6). True = reject.
    pub(crate) fn check_limits(&self, cur: u64) -> bool {
        let max = self.hot.max_pages.load(Relaxed);
        if self.hot.proactive.load(Relaxed) {
            if cur >= max {
                self.count(G::PoolLimitHit);
                self.kick_worker();
                return true;
            }
            if cur >= self.hot.proactive_start.load(Relaxed) {
                self.kick_worker();
            }
            return false;
        }
        if cur >= max {
            self.count(G::PoolLimitHit);
            if !self.reached_full.load(Relaxed) {
                self.reached_full.store(true, Relaxed);
            }
        } else if self.reached_full.load(Relaxed) && cur <= self.hot.accept_pages.load(Relaxed) {
            self.reached_full.store(false, Relaxed);
        }
        self.reached_full.load(Relaxed)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_compressed(
        &self,
        area: &Area,
        shard: &Shard,
        i: usize,
        slot: SwapSlot,
        page: &[u8],
        cg: u32,
        node: Option<usize>,
    ) -> Result<StoreOutcome, RejectReason> {
        self.admit(cg)?;
        // Limit check and a reference on the current pool, from this thread's snapshot.
        let mut pool_id = None;
        for _ in 0..8 {
            let r = self.pools.with_snapshot(|s| {
                let cur: u64 = s.all.iter().map(|p| p.zs.total_pages() as u64).sum();
                if self.check_limits(cur) {
                    return Err(true);
                }
                match s.current.refs.tryget() {
                    Ok(()) => Ok(s.current.id),
                    Err(st) => {
                        if st == poolref::RefState::Release {
                            self.pools.release(s.current.id);
                        }
                        Err(false)
                    }
                }
            });
            match r {
                Ok(id) => {
                    pool_id = Some(id);
                    break;
                }
                Err(true) => {
                    self.count(G::RejectPoolLimit);
                    return Err(RejectReason::PoolLimit);
                }
                Err(false) => continue,
            }
        }
        let Some(pool_id) = pool_id else {
            self.count(G::RejectAllocFail);
            return Err(RejectReason::AllocFail);
        };
        // SAFETY: the `tryget` above gave us a reference on `pool_id`; every path below either
        // hands it to the new entry or puts it, after the last use of `pool`.
        let pool = unsafe { self.pools.get(pool_id) };
        let res = with_buf(
            &COMP_BUF,
            uzswap_compress::MAX_COMPRESSED_LEN.max(PAGE_SIZE),
            |buf| {
                let data: &[u8] = match uzswap_compress::compress(pool.alg, page, buf) {
                    Ok(n) if n > 0 && n < PAGE_SIZE => &buf[..n],
                    r => {
                        let failed = r.is_err();
                        if self.hot.reject_poor.load(Relaxed) {
                            return Err(if failed {
                                RejectReason::CompressFail
                            } else {
                                RejectReason::CompressPoor
                            });
                        }
                        if !self.cgroups.writeback_enabled(cg) {
                            // A raw page that can never be written back only wastes memory.
                            return Err(if failed {
                                RejectReason::CompressFail
                            } else {
                                RejectReason::CompressPoor
                            });
                        }
                        page
                    }
                };
                if self.faults.fail_pool_alloc() {
                    return Err(RejectReason::AllocFail);
                }
                match pool.zs.alloc_write_hint(data) {
                    Ok((h, hint)) => Ok((h, hint, data.len())),
                    Err(uzswap_zsmalloc::Error::TooLarge { .. }) => Err(RejectReason::CompressPoor),
                    Err(_) => Err(RejectReason::AllocFail),
                }
            },
        );
        let (handle, hint, length) = match res {
            Ok(x) => x,
            Err(reason) => {
                self.count(match reason {
                    RejectReason::CompressFail => G::RejectCompressFail,
                    RejectReason::CompressPoor => G::RejectCompressPoor,
                    _ => G::RejectAllocFail,
                });
                self.pools.put(pool);
                return Err(reason);
            }
        };
        let Some(cgrp) = self.cgroups.get(cg) else {
            let _ = pool.zs.free(handle);
            self.pools.put(pool);
            return Err(RejectReason::NoSuchCgroup);
        };
        let node = node.unwrap_or_else(|| numa::current_node(self.nodes));
        // The node's list, in the pool's set of lists with `LruMode::PerPool` (0 otherwise).
        let lane = node + pool.lane_base;
        let warm = self.hot.warm();
        let lru = if self.faults.fail_entry_alloc() {
            None
        } else {
            let l = &cgrp.lists[lane];
            let idx = l.push(pack_slot(slot));
            if warm == WarmProtection::ProtectedSize && idx.is_some() {
                // "zswap: shrink zswap pool based on memory pressure" (6.8): every new entry
                // counts as warm; the estimate decays to half when it exceeds a quarter of the
                // list (`zswap_lru_add`).
                let len = l.len();
                let p = &cgrp.protected[node];
                let mut old = p.fetch_add(1, Relaxed) + 1;
                loop {
                    let new = if old > len / 4 { old / 2 } else { old };
                    match p.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                        Ok(_) => break,
                        Err(v) => old = v,
                    }
                }
            }
            idx
        };
        let entry = Entry {
            handle: handle.to_raw(),
            hint: hint.0,
            // Below MAX_CGROUPS (index.rs asserts it fits).
            cgroup: cg as u16,
            lru: lru.unwrap_or(0),
            pool: pool_id,
            length: length as u16,
            node: node as u8,
            referenced: warm == WarmProtection::SecondChance,
        };
        let (mut t, w) = shard.lock_idle(i);
        match lru.filter(|_| t.reserve_entries()) {
            Some(_) => {}
            None => {
                drop(t);
                if let Some(l) = lru {
                    cgrp.lists[lane].remove(l);
                }
                let _ = pool.zs.free(handle);
                self.pools.put(pool);
                self.count(G::RejectKmemcacheFail);
                return Err(RejectReason::KmemcacheFail);
            }
        }
        // Account before publishing, so a writeback or invalidation that frees the entry as soon
        // as the lock drops never un-counts it first.
        self.stats.add(G::StoredPages as usize, 1);
        if length == PAGE_SIZE {
            self.stats.add(G::StoredIncompressiblePages as usize, 1);
        }
        self.cgroups.charge(cg, length as u64);
        let old = t.replace_entry(i, w, entry);
        Self::discard_owned(area, slot, w);
        t.set_word(i, SlotWord::EMPTY.with_value(SlotValue::Entry(i as u32)));
        drop(t);
        self.after_store(w, old);
        self.count(G::Zswpout);
        self.cgroups.event(cg, C::Zswpout);
        Ok(if length == PAGE_SIZE {
            StoreOutcome::StoredIncompressible
        } else {
            StoreOutcome::Stored
        })
    }

    pub(crate) fn swap_out(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: Option<usize>,
    ) -> Result<StoreOutcome, Error> {
        let out = self.store(slot, page, cg, node);
        let StoreOutcome::Rejected(reason) = out else {
            return Ok(out);
        };
        match reason {
            RejectReason::NoSwapArea => return Err(Error::NoSwapArea(slot.area)),
            RejectReason::SlotOutOfRange => return Err(Error::SlotOutOfRange(slot)),
            RejectReason::BadPageLength => return Err(Error::BadPageLength(page.len())),
            RejectReason::NoSuchCgroup => return Err(Error::NoSuchCgroup(cg.0)),
            // Only an explicit node is ever rejected.
            RejectReason::NoSuchNode => return Err(Error::NoSuchNode(node.unwrap_or_default())),
            _ => {}
        }
        if !self.cgroups.writeback_enabled(cg.0) {
            return Err(Error::WritebackDisabled(cg.0));
        }
        // let-else, not `ok_or(..)?`: an eager error value has drop glue, run on every call.
        let Some(area) = self.area(slot.area) else {
            return Err(Error::NoSwapArea(slot.area));
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return Err(Error::SlotOutOfRange(slot));
        };
        let (mut t, w) = shard.lock_idle(i);
        // The store above emptied the slot; if another caller raced in, this write wins.
        let old = self.take_entry(&mut t, w);
        t.set_word(i, SlotWord::EMPTY.with_writeback());
        drop(t);
        // Our write replaces any older block; no discard needed.
        self.after_replace(w, old, false);
        let r = area.store.write_page(slot, page);
        let mut t = shard.table.lock();
        let value = if r.is_ok() {
            SlotValue::OnDisk(cg.0)
        } else {
            SlotValue::Empty
        };
        t.set_word(i, SlotWord::EMPTY.with_value(value));
        shard.wake(&t);
        drop(t);
        match r {
            Ok(()) => {
                self.count(G::Pswpout);
                Ok(out)
            }
            Err(e) => {
                self.count(G::SwapWriteErrors);
                self.count_no_space(&e);
                Err(Error::Backing(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_detection() {
        let mut p = vec![0u8; PAGE_SIZE];
        assert!(is_zero_page(&p));
        p[100] = 1;
        assert!(!is_zero_page(&p));
        p[100] = 0;
        p[PAGE_SIZE - 1] = 1;
        assert!(!is_zero_page(&p));
    }
}
