// SPDX-License-Identifier: MIT
//! The load path (`zswap_load`). A load that keeps the entry copies it under the shard lock and
//! decompresses straight into the caller's page with the lock dropped, reading the object
//! optimistically (zsmalloc's `read_optimistic`, checked afterwards) or, if that fails, pinned
//! by a read guard (one critical section); an exclusive load marks the slot
//! `LOADING` for the decompression and drops the entry after it; a slot on disk is read from
//! the backing store the same way. Sequential runs prefetch the next loads' objects.

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;

use uzswap_zsmalloc::{Handle, ObjHint};

use crate::cache::Inner;
use crate::index::{self, Entry, SlotValue};
use crate::numa;
use crate::outcome::LoadOutcome;
use crate::params::WarmProtection;
use crate::pool::ZswapPool;
use crate::stats::{C, G};
use crate::worker::HotGuard;
use crate::{Error, SwapSlot, PAGE_SIZE};

/// Why an entry could not be read back (the three causes of the kernel's `decompress_fail`).
/// Fieldless, so that the load path returns it as cheaply as a bool; the error's details are
/// gathered on the cold path (`Inner::decompress_error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecompressFail {
    /// The pool rejected the handle.
    Stale,
    /// The object is shorter than the entry's length.
    Short,
    /// The decoder failed, or produced less than a page.
    Corrupt,
}

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

/// What became of a non-exclusive load after the shard lock was dropped.
enum KeptRead {
    /// The entry's object was read: decompressed into the page, or not (the error, gathered
    /// while the object was still pinned).
    Done(Result<(), Error>),
    /// The entry was freed (or its slot rewritten) before its object could be pinned.
    Gone,
}

impl Inner {
    /// A non-exclusive load's read of entry `e`, copied under the shard lock that is now
    /// dropped. No `LOADING` mark and no second critical section: the object is read
    /// optimistically, a read that a free or move overlapped is discarded, and then it is
    /// pinned by a read guard, whose generation check fails if the entry was freed meanwhile
    /// (then the caller looks again); the pool outlives the read because this thread's pool
    /// snapshot holds it. A free or writeback of the entry during the read waits for nothing:
    /// zsmalloc defers the object's free to the guard's drop, and the page read is the one the
    /// slot held when the read began.
    fn read_kept_entry(&self, slot: SwapSlot, e: &Entry, page: &mut [u8]) -> KeptRead {
        self.pools.with_snapshot(|s| {
            let Some(pool) = s.all.iter().find(|p| p.id == e.pool) else {
                return KeptRead::Gone;
            };
            let Some(h) = Handle::from_raw(e.handle) else {
                return KeptRead::Done(Err(Self::decompress_error(
                    pool,
                    DecompressFail::Stale,
                    slot,
                    e,
                )));
            };
            let len = e.length as usize;
            if Self::decompress_optimistic(pool, h, len, page) {
                return KeptRead::Done(Ok(()));
            }
            let Ok(obj) = pool.zs.read(h) else {
                return KeptRead::Gone;
            };
            match Self::decompress_object(pool, &obj, len, page) {
                Ok(()) => KeptRead::Done(Ok(())),
                Err(fail) => {
                    drop(obj);
                    KeptRead::Done(Err(Self::decompress_error(pool, fail, slot, e)))
                }
            }
        })
    }

    /// Decompress object `h` into `page` through an optimistic read (no reader count). False
    /// if that read overlapped a move or free of the object, or failed: the caller then reads
    /// it again under a read guard, which also gathers the error.
    #[inline]
    fn decompress_optimistic(pool: &ZswapPool, h: Handle, len: usize, page: &mut [u8]) -> bool {
        let read = pool
            .zs
            .read_optimistic(h, |obj| Self::decompress_object(pool, obj, len, page));
        matches!(read, Some(Ok(())))
    }

    /// Decompress (or copy, when stored as-is) the first `len` bytes of `obj` into `page`.
    #[inline]
    fn decompress_object(
        pool: &ZswapPool,
        obj: &[u8],
        len: usize,
        page: &mut [u8],
    ) -> Result<(), DecompressFail> {
        if obj.len() < len {
            return Err(DecompressFail::Short);
        }
        let src = &obj[..len];
        if len == PAGE_SIZE {
            page.copy_from_slice(src);
            Ok(())
        } else if matches!(uzswap_compress::decompress(pool.alg, src, page), Ok(n) if n == PAGE_SIZE)
        {
            Ok(())
        } else {
            Err(DecompressFail::Corrupt)
        }
    }

    /// Decompress (or copy, for a raw entry) into `page`. The caller owns the entry (slot marked
    /// in flight) so its pool reference is held.
    pub(crate) fn decompress_entry(
        &self,
        e: &Entry,
        page: &mut [u8],
    ) -> Result<(), DecompressFail> {
        // SAFETY: the caller owns the entry (its slot is marked in flight), and with it the
        // entry's pool reference, for the whole call.
        let pool = unsafe { self.pools.get(e.pool) };
        let Some(h) = Handle::from_raw(e.handle) else {
            return Err(DecompressFail::Stale);
        };
        let len = e.length as usize;
        if Self::decompress_optimistic(pool, h, len, page) {
            return Ok(());
        }
        let Ok(obj) = pool.zs.read(h) else {
            return Err(DecompressFail::Stale);
        };
        Self::decompress_object(pool, &obj, len, page)
    }

    /// Start the cache misses on entry `e`'s object now, from the location its store recorded,
    /// while the handle's own entry (which has the object's current location) is still being
    /// fetched: in random order they are otherwise two misses one after the other. The caller
    /// holds the shard lock of `e`'s slot (so its pool is alive).
    #[inline]
    fn prefetch_object(&self, e: &Entry) {
        // SAFETY: `e` is in the index and the caller holds its shard lock, so its pool
        // reference is held (see `Pools::get`).
        let pool = unsafe { self.pools.get(e.pool) };
        pool.zs.prefetch_hint(ObjHint(e.hint), e.length as usize);
    }

    /// The prefetches of a load of slot `i` (entry `e`): its own object, unless the previous
    /// load of a sequential run already asked for it (it did, within the same shard), and the
    /// next loads' misses during such a run.
    #[inline]
    fn prefetch_for_load(&self, t: &index::ShardTable, i: usize, e: &Entry, sequential: bool) {
        if !sequential || i == 0 {
            self.prefetch_object(e);
        }
        if sequential {
            self.prefetch_run(t, i);
        }
    }

    /// During a sequential run of loads, start the cache misses of the next two loads while
    /// this one decompresses: the object of slot `i + 1` (from its entry's location hint) and
    /// the handle line of slot `i + 2`. The pool's layout scatters neighbouring slots over size
    /// classes, so the hardware prefetcher can't follow them; without this a sequential load
    /// waits on both misses (lz4 load 1.5 % slower, BENCHMARKS.md section 1). Needs the shard
    /// lock: the neighbours' entries hold their pools alive only while they are in the table.
    /// A run stops at the shard's end.
    #[inline]
    pub(crate) fn prefetch_run(&self, t: &index::ShardTable, i: usize) {
        if let Some((pool, _, e)) = self.neighbour(t, i + 1) {
            pool.zs.prefetch_hint(ObjHint(e.hint), e.length as usize);
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
    ) -> Option<(&'t ZswapPool, Handle, &'t Entry)> {
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
        Some((pool, h, n))
    }

    /// `node`: where the page is read into, `None` for the calling CPU's node.
    pub(crate) fn load(
        &self,
        slot: SwapSlot,
        page: &mut [u8],
        exclusive: bool,
        node: Option<usize>,
    ) -> Result<LoadOutcome, Error> {
        // One look-up of this thread's counter stripe for every counter the load touches.
        let stripe = crate::stats::stripe_index();
        let _hot = HotGuard::on(&self.stats, stripe);
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
                self.count_on(stripe, G::Zswpin);
                self.cgroups
                    .event_on(stripe, u32::from(e.cgroup), C::Zswpin);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::Entry(ei) if !exclusive => {
                let e = *t.entry(ei);
                self.prefetch_for_load(&t, i, &e, sequential);
                // A page read and kept is warm: give it its second chance back (a write only if
                // the bit changes, so a re-read entry's line stays clean).
                let second_chance = self.hot.warm() == WarmProtection::SecondChance;
                if second_chance && !e.referenced {
                    t.entry_mut(ei).referenced = true;
                }
                drop(t);
                match self.read_kept_entry(slot, &e, page) {
                    KeptRead::Done(Ok(())) => {
                        self.count_on(stripe, G::Zswpin);
                        self.cgroups
                            .event_on(stripe, u32::from(e.cgroup), C::Zswpin);
                        Ok(LoadOutcome::Hit)
                    }
                    KeptRead::Done(Err(err)) => {
                        if second_chance && !e.referenced {
                            // Not read after all: the bit as it was.
                            let mut t = shard.table.lock();
                            if t.word(i).value() == SlotValue::Entry(ei)
                                && t.entry(ei).handle == e.handle
                            {
                                t.entry_mut(ei).referenced = false;
                            }
                        }
                        page.fill(0);
                        self.count(G::DecompressFail);
                        Err(err)
                    }
                    KeptRead::Gone => {
                        let t = shard.table.lock();
                        if t.word(i).value() == SlotValue::Entry(ei)
                            && t.entry(ei).handle == e.handle
                        {
                            // Still stored: the pool refused a live entry's handle.
                            // SAFETY: the entry is in the index and its shard lock is held, so
                            // its pool reference is held.
                            let pool = unsafe { self.pools.get(e.pool) };
                            let err = Self::decompress_error(pool, DecompressFail::Stale, slot, &e);
                            drop(t);
                            page.fill(0);
                            self.count(G::DecompressFail);
                            return Err(err);
                        }
                        drop(t);
                        // Freed or replaced since the lock was dropped: look again.
                        self.load(slot, page, exclusive, node)
                    }
                }
            }
            SlotValue::Entry(ei) => {
                let e = *t.entry(ei);
                self.prefetch_for_load(&t, i, &e, sequential);
                t.set_word(i, w.with_loading());
                drop(t);
                if let Err(fail) = self.decompress_entry(&e, page) {
                    // Still ours (LOADING): the entry and its pool stay put while the error
                    // is gathered.
                    // SAFETY: the slot is still marked in flight, so the entry and its pool
                    // reference are ours.
                    let err =
                        Self::decompress_error(unsafe { self.pools.get(e.pool) }, fail, slot, &e);
                    let mut t = shard.table.lock();
                    t.set_word(i, w);
                    shard.wake(&t);
                    drop(t);
                    page.fill(0);
                    self.count(G::DecompressFail);
                    return Err(err);
                }
                let mut t = shard.table.lock();
                t.free_entry(ei);
                t.set_word(i, w.with_value(SlotValue::Empty));
                shard.wake(&t);
                drop(t);
                self.release_entry_on(stripe, e, crate::entry::Object::JustRead);
                self.count_on(stripe, G::Zswpin);
                self.cgroups
                    .event_on(stripe, u32::from(e.cgroup), C::Zswpin);
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

    /// The public error for a failed load of `slot`, with its cause's details: the pool's
    /// error, the object's size or the decoder's error (cold path: it reads the object again).
    /// The caller holds `pool` alive (it owns the entry, or a pool snapshot).
    #[cold]
    #[inline(never)]
    fn decompress_error(
        pool: &ZswapPool,
        fail: DecompressFail,
        slot: SwapSlot,
        e: &Entry,
    ) -> Error {
        let obj = Handle::from_raw(e.handle)
            .ok_or(uzswap_zsmalloc::Error::InvalidHandle)
            .and_then(|h| pool.zs.read(h));
        let obj = match (fail, obj) {
            (_, Err(source)) => return Error::StaleHandle { slot, source },
            (DecompressFail::Stale, Ok(_)) => {
                // The pool refused the handle a moment ago (say, too many readers at once).
                return Error::StaleHandle {
                    slot,
                    source: uzswap_zsmalloc::Error::Busy,
                };
            }
            (_, Ok(obj)) => obj,
        };
        let length = usize::from(e.length);
        if obj.len() < length {
            return Error::ShortObject {
                slot,
                length,
                capacity: obj.len(),
            };
        }
        let mut page = vec![0u8; PAGE_SIZE];
        let source = match uzswap_compress::decompress(pool.alg, &obj[..length], &mut page) {
            Err(err) => err,
            Ok(_) => uzswap_compress::Error::Corrupt {
                algorithm: pool.alg.kernel_name(),
                reason: "the data decompresses to less than a page",
            },
        };
        Error::CorruptData {
            slot,
            compressor: pool.alg,
            source,
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
            Err(Error::CorruptData { .. })
        ));
        assert!(buf.iter().all(|&b| b == 0), "no garbage handed out");
        let c = z.counters();
        assert_eq!((c.decompress_fail, c.zswpin), (1, 0));
        // The entry is kept (as the kernel does); invalidation frees it.
        assert_eq!(c.stored_pages, 1);
        z.invalidate(s);
        assert_eq!(z.counters().stored_pages, 0);
    }

    /// The stored entry of `slot` (tests: nothing else runs on the cache).
    fn entry_of(z: &crate::Zswap, slot: SwapSlot) -> crate::index::Entry {
        let (shard, i) = z
            .inner
            .area(slot.area)
            .unwrap()
            .index
            .locate(slot.offset)
            .unwrap();
        let t = shard.table.lock();
        let SlotValue::Entry(ei) = t.word(i).value() else {
            panic!("not stored")
        };
        *t.entry(ei)
    }

    #[test]
    fn an_object_freed_behind_the_entry_is_a_stale_handle() {
        let z = cache();
        let s = SwapSlot::new(0, 5);
        assert_eq!(z.store(s, &page(1), CgroupId::ROOT), StoreOutcome::Stored);
        let e = entry_of(&z, s);
        // SAFETY: the entry stays stored, holding its pool.
        let pool = unsafe { z.inner.pools.get(e.pool) };
        pool.zs.free(Handle::from_raw(e.handle).unwrap()).unwrap();
        let mut buf = vec![0x55u8; PAGE_SIZE];
        let err = z.load(s, &mut buf, false).unwrap_err();
        assert!(
            matches!(
                err,
                Error::StaleHandle {
                    source: uzswap_zsmalloc::Error::InvalidHandle,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(z.counters().decompress_fail, 1);
        z.invalidate(s);
        assert_eq!(z.counters().stored_pages, 0);
    }

    #[test]
    fn an_entry_longer_than_its_object_is_a_short_object() {
        let z = cache();
        let s = SwapSlot::new(0, 6);
        assert_eq!(z.store(s, &page(2), CgroupId::ROOT), StoreOutcome::Stored);
        let e = entry_of(&z, s);
        // SAFETY: the entry stays stored, holding its pool.
        let pool = unsafe { z.inner.pools.get(e.pool) };
        let capacity = pool
            .zs
            .capacity(Handle::from_raw(e.handle).unwrap())
            .unwrap();
        assert!(capacity + 1 < PAGE_SIZE);
        let set_length = |len: u16| {
            let (shard, i) = z.inner.area(0).unwrap().index.locate(6).unwrap();
            let mut t = shard.table.lock();
            let SlotValue::Entry(ei) = t.word(i).value() else {
                panic!("not stored")
            };
            t.entry_mut(ei).length = len;
        };
        set_length(capacity as u16 + 1);
        let mut buf = vec![0x55u8; PAGE_SIZE];
        let err = z.load(s, &mut buf, false).unwrap_err();
        assert!(
            matches!(err, Error::ShortObject { length, capacity: c, .. } if length == capacity + 1 && c == capacity),
            "{err:?}"
        );
        assert!(buf.iter().all(|&b| b == 0));
        set_length(e.length);
        z.load(s, &mut buf, true).unwrap();
        assert_eq!(buf, page(2));
    }
}
