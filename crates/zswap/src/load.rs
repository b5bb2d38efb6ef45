// SPDX-License-Identifier: MIT
//! The load path (`zswap_load`): mark the slot `LOADING`, decompress with no lock held straight
//! into the caller's page, then keep or drop the entry; a slot on disk is read from the backing
//! store the same way. Sequential runs prefetch the next loads' objects.

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;

use uzswap_zsmalloc::Handle;

use crate::cache::Inner;
use crate::index::{self, Entry, SlotValue};
use crate::numa;
use crate::outcome::LoadOutcome;
use crate::params::WarmProtection;
use crate::pool::ZswapPool;
use crate::stats::{C, G};
use crate::worker::HotGuard;
use crate::{Error, SwapSlot, PAGE_SIZE};

thread_local! {
    /// The slot after this thread's last load, as (area, offset): a load of exactly that slot
    /// continues a sequential run (a scan, a swap-in readahead window, a pager faulting
    /// neighbouring pages), and prefetches for the next two loads of the run.
    static NEXT_LOAD: Cell<(u32, u64)> = const { Cell::new((u32::MAX, 0)) };
}

/// Does a load of `slot` continue this thread's sequential run? Records `slot` as the run's
/// latest either way.
#[inline]
fn continues_run(slot: SwapSlot) -> bool {
    let next = (slot.area, slot.offset.wrapping_add(1));
    NEXT_LOAD.with(|c| c.replace(next)) == (slot.area, slot.offset)
}

impl Inner {
    /// Decompress (or copy, for a raw entry) into `page`. The caller owns the entry (slot marked
    /// in flight) so its pool reference is held.
    pub(crate) fn decompress_entry(&self, e: &Entry, page: &mut [u8]) -> bool {
        // SAFETY: the caller owns the entry (its slot is marked in flight), and with it the
        // entry's pool reference, for the whole call.
        let pool = unsafe { self.pools.get(e.pool) };
        let Some(h) = Handle::from_raw(e.handle) else {
            return false;
        };
        let Ok(obj) = pool.zs.read(h) else {
            return false;
        };
        let len = e.length as usize;
        if obj.len() < len {
            return false;
        }
        let src = &obj[..len];
        if len == PAGE_SIZE {
            page.copy_from_slice(src);
            true
        } else {
            matches!(uzswap_compress::decompress(pool.alg, src, page), Ok(n) if n == PAGE_SIZE)
        }
    }

    /// During a sequential run of loads, start the cache misses of the next two loads while
    /// this one decompresses: the object of slot `i + 1` (its handle line was prefetched by the
    /// previous load) and the handle line of slot `i + 2`. The pool's layout scatters
    /// neighbouring slots over size classes, so the hardware prefetcher can't follow them;
    /// without this a sequential load waits on both misses (lz4 load 1.5 % slower,
    /// BENCHMARKS.md section 1). Needs the shard lock: the neighbours' entries hold their
    /// pools alive only while they are in the table. A run stops at the shard's end.
    #[inline]
    pub(crate) fn prefetch_run(&self, t: &index::ShardTable, i: usize) {
        if let Some((pool, h, len)) = self.neighbour(t, i + 1) {
            pool.zs.prefetch_object(h, len);
        }
        if let Some((pool, h, _)) = self.neighbour(t, i + 2) {
            pool.zs.prefetch_handle(h);
        }
    }

    /// The pool, handle and length of slot `j`'s entry in this shard, if it has one.
    #[inline]
    pub(crate) fn neighbour<'t>(
        &'t self,
        t: &'t index::ShardTable,
        j: usize,
    ) -> Option<(&'t ZswapPool, Handle, usize)> {
        if j >= index::SHARD_SLOTS {
            return None;
        }
        let SlotValue::Entry(ej) = t.word(j).value() else {
            return None;
        };
        let n = t.entry(ej);
        let h = Handle::from_raw(n.handle)?;
        // SAFETY: `n` is in the index and the caller holds its shard lock (it borrows `t`), so
        // its pool reference is held for as long as the borrow (see `Pools::get`).
        let pool = unsafe { self.pools.get(n.pool) };
        Some((pool, h, n.length as usize))
    }

    /// `node`: where the page is read into, `None` for the calling CPU's node.
    pub(crate) fn load(
        &self,
        slot: SwapSlot,
        page: &mut [u8],
        exclusive: bool,
        node: Option<usize>,
    ) -> Result<LoadOutcome, Error> {
        let _hot = HotGuard::new(&self.hot_ops);
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        if let Some(n) = node.filter(|&n| n >= self.nodes) {
            return Err(Error::NoSuchNode(n));
        }
        // let-else, not `ok_or(..)?`: an eager error value has drop glue, run on every call.
        let Some(area) = self.area(slot.area) else {
            return Err(Error::NoSwapArea(slot.area));
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return Err(Error::SlotOutOfRange(slot));
        };
        let sequential = continues_run(slot);
        let (mut t, w) = shard.lock_idle(i);
        match w.value() {
            SlotValue::Zero => {
                page.fill(0);
                if exclusive {
                    t.set_word(i, w.with_value(SlotValue::Empty));
                    drop(t);
                    self.stats.sub(G::ZeroPages as usize, 1);
                }
                self.count(G::SwpinZero);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::ZeroEntry(ei) => {
                // zswap_load of a length-0 entry up to 6.11: fill, count zswpin; an exclusive
                // load frees the entry.
                let e = *t.entry(ei);
                if exclusive {
                    t.free_entry(ei);
                    t.set_word(i, w.with_value(SlotValue::Empty));
                }
                drop(t);
                page.fill(0);
                if exclusive {
                    self.release_zero_entry(&e);
                }
                self.count(G::Zswpin);
                self.cgroups.event(e.cgroup, C::Zswpin);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::Entry(ei) => {
                let e = *t.entry(ei);
                if sequential {
                    self.prefetch_run(&t, i);
                }
                t.set_word(i, w.with_loading());
                drop(t);
                let ok = self.decompress_entry(&e, page);
                let mut t = shard.table.lock();
                if !ok {
                    t.set_word(i, w);
                    shard.wake(&t);
                    drop(t);
                    page.fill(0);
                    self.count(G::DecompressFail);
                    return Err(Error::Decompress(slot));
                }
                if exclusive {
                    t.free_entry(ei);
                    t.set_word(i, w.with_value(SlotValue::Empty));
                } else {
                    // A page read and kept is warm: give it its second chance back.
                    if self.hot.warm() == WarmProtection::SecondChance {
                        t.entry_mut(ei).referenced = true;
                    }
                    t.set_word(i, w);
                }
                shard.wake(&t);
                drop(t);
                if exclusive {
                    self.release_entry(e);
                }
                self.count(G::Zswpin);
                self.cgroups.event(e.cgroup, C::Zswpin);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::OnDisk(owner) => {
                t.set_word(i, w.with_loading());
                drop(t);
                let r = area.store.read_page(slot, page);
                if r.is_ok() && exclusive {
                    // Still ours (LOADING): nobody can write this slot's block meanwhile.
                    area.store.discard(slot);
                }
                let mut t = shard.table.lock();
                let still_on_disk = match &r {
                    Ok(()) => !exclusive,
                    Err(uzswap_backing::Error::NotWritten(_)) => false,
                    // Keep the block: the error may be transient, and it is reported.
                    Err(_) => true,
                };
                t.set_word(
                    i,
                    if still_on_disk {
                        w
                    } else {
                        w.with_value(SlotValue::Empty)
                    },
                );
                shard.wake(&t);
                drop(t);
                match r {
                    Ok(()) => {
                        self.count(G::Pswpin);
                        let node = node.unwrap_or_else(|| numa::current_node(self.nodes));
                        self.note_disk_swapin(owner, node);
                        Ok(LoadOutcome::FromSwapFile)
                    }
                    Err(uzswap_backing::Error::NotWritten(_)) => Ok(LoadOutcome::Absent),
                    Err(e) => {
                        self.count(if matches!(e, uzswap_backing::Error::Corrupt { .. }) {
                            G::SwapChecksumErrors
                        } else {
                            G::SwapReadErrors
                        });
                        Err(Error::Backing(e))
                    }
                }
            }
            SlotValue::Empty => Ok(LoadOutcome::Absent),
        }
    }

    /// A page came back from disk: feedback for the shrinker ("zswap: shrink zswap pool based on memory pressure" (6.8), or the second chance), on the
    /// list of the page's owner and the node the page is read into, as `zswap_folio_swapin`
    /// credits the new folio's lruvec. An offline owner's credit goes to the nearest online
    /// ancestor, which walks its lists (the kernel charges the faulting task's memcg then,
    /// which this API doesn't know).
    pub(crate) fn note_disk_swapin(&self, owner: u32, node: usize) {
        let Some(c) = self.cgroups.get(self.cgroups.resolve(owner)) else {
            return;
        };
        match self.hot.warm() {
            WarmProtection::SecondChance => {
                c.disk_swapins[node].fetch_add(1, Relaxed);
            }
            WarmProtection::ProtectedSize => {
                c.protected[node].fetch_add(1, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use uzswap_zsmalloc::Handle;

    use crate::index::SlotValue;
    use crate::testutil::{cache, page};
    use crate::{CgroupId, Error, StoreOutcome, SwapSlot, PAGE_SIZE};

    #[test]
    fn corrupt_pool_data_is_a_decompress_failure() {
        let z = cache();
        let s = SwapSlot::new(0, 9);
        assert_eq!(z.store(s, &page(3), CgroupId::ROOT), StoreOutcome::Stored);
        // Overwrite the compressed object in the pool with garbage.
        let (shard, i) = z.inner.area(0).unwrap().index.locate(9).unwrap();
        let e = {
            let t = shard.table.lock();
            let SlotValue::Entry(ei) = t.word(i).value() else {
                panic!("not stored")
            };
            *t.entry(ei)
        };
        let garbage = vec![0xffu8; e.length as usize];
        // SAFETY: the entry stays stored (nothing else runs on this cache), holding its pool.
        let pool = unsafe { z.inner.pools.get(e.pool) };
        pool.zs
            .write(Handle::from_raw(e.handle).unwrap(), &garbage)
            .unwrap();
        let mut buf = vec![0x55u8; PAGE_SIZE];
        assert!(matches!(
            z.load(s, &mut buf, true),
            Err(Error::Decompress(_))
        ));
        assert!(buf.iter().all(|&b| b == 0), "no garbage handed out");
        let c = z.counters();
        assert_eq!((c.decompress_fail, c.zswpin), (1, 0));
        // The entry is kept (as the kernel does); invalidation frees it.
        assert_eq!(c.stored_pages, 1);
        z.invalidate(s);
        assert_eq!(z.counters().stored_pages, 0);
    }
}
