// SPDX-License-Identifier: MIT
//! Entry lifecycle: replacing a slot's value (entry, zero mark, disk block) and releasing what
//! an entry holds (LRU node, pool object, charge, counters, pool reference), in that order;
//! `zswap_invalidate`.

use uzswap_zsmalloc::{Handle, ObjHint};

use crate::cache::{Area, Inner};
use crate::index::{self, Entry, Shard, SlotValue, SlotWord};
use crate::stats::G;
use crate::{SwapSlot, PAGE_SIZE};

/// Whether the object of an entry being released was just read (a load, a writeback) or
/// nobody touched it lately (an invalidation, a store over an old entry): only then does the
/// release start the free's cache misses early.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Object {
    Cold,
    JustRead,
}

impl Inner {
    /// Set a slot to `Empty` or `Zero`, freeing whatever it held (entry, zero mark, disk block).
    pub(crate) fn replace_slot(
        &self,
        area: &Area,
        shard: &Shard,
        i: usize,
        slot: SwapSlot,
        new: SlotValue,
    ) {
        debug_assert!(!matches!(new, SlotValue::Entry(_)));
        let (mut t, w) = shard.lock_idle(i);
        if w.value() == SlotValue::Empty && new == SlotValue::Empty {
            return;
        }
        let old = self.take_entry(&mut t, w);
        Self::discard_owned(area, slot, w);
        t.set_word(i, SlotWord::EMPTY.with_value(new));
        drop(t);
        self.after_replace(w, old, new == SlotValue::Zero);
    }

    /// Forget the slot's swap-file block if it has one. Called while the caller still owns the
    /// slot (shard lock held, or its in-flight bit set): once the slot is published again a
    /// writeback may write a new block, which a late discard would destroy.
    #[inline]
    pub(crate) fn discard_owned(area: &Area, slot: SwapSlot, old: SlotWord) {
        if old.on_disk() {
            area.store.discard(slot);
        }
    }

    /// Remove the entry a word names from the slab (the caller then rewrites the word). A zero
    /// entry is released here at once (it holds no pool object and no LRU node, only counts),
    /// so only pool entries are handed back for `release_entry`.
    #[inline]
    pub(crate) fn take_entry(&self, t: &mut index::ShardTable, w: SlotWord) -> Option<Entry> {
        match w.value() {
            SlotValue::Entry(ei) => {
                let e = *t.entry(ei);
                t.free_entry(ei);
                Some(e)
            }
            SlotValue::ZeroEntry(ei) => {
                self.take_zero_entry(t, ei);
                None
            }
            _ => None,
        }
    }

    /// `take_entry` of a zero entry, out of line: the pool-entry path stays as small as it
    /// was without zero entries.
    #[cold]
    #[inline(never)]
    fn take_zero_entry(&self, t: &mut index::ShardTable, ei: u32) {
        let e = *t.entry(ei);
        t.free_entry(ei);
        self.release_zero_entry(&e);
    }

    /// The counts a zero entry holds (`zswap_free_entry` of a length-0 entry up to 6.11:
    /// `same_filled_pages`, `stored_pages`, the cgroup's `zswapped` page). Out of line: the
    /// paths it shares with pool entries stay as they were.
    #[cold]
    #[inline(never)]
    pub(crate) fn release_zero_entry(&self, e: &Entry) {
        self.cgroups.uncharge(u32::from(e.cgroup), 0);
        self.stats.sub(G::StoredPages as usize, 1);
        self.stats.sub(G::SameFilledPages as usize, 1);
    }

    /// Bookkeeping after a slot word was replaced (shard lock dropped; the disk block, if
    /// any, was already discarded by `discard_owned`).
    #[inline]
    pub(crate) fn after_replace(&self, old: SlotWord, old_entry: Option<Entry>, new_zero: bool) {
        if let Some(e) = old_entry {
            self.release_entry(e, Object::Cold);
        }
        match (old.value() == SlotValue::Zero, new_zero) {
            (false, true) => self.stats.add(G::ZeroPages as usize, 1),
            (true, false) => self.stats.sub(G::ZeroPages as usize, 1),
            _ => {}
        }
    }

    /// `after_replace` for a store, whose `old` entry (from `ShardTable::replace_entry`) may be
    /// a zero entry (`Params::zero_page_entries`); `take_entry` releases those itself, so the
    /// invalidation path doesn't test for them.
    #[inline]
    pub(crate) fn after_store(&self, old: SlotWord, old_entry: Option<Entry>) {
        if let Some(e) = old_entry {
            if old.zero_entry() {
                self.release_zero_entry(&e);
            } else {
                self.release_entry(e, Object::Cold);
            }
        }
        if old.value() == SlotValue::Zero {
            self.stats.sub(G::ZeroPages as usize, 1);
        }
    }

    /// Free everything an entry holds once it is out of the index: LRU node, pool object,
    /// charge, counters, and last its pool reference (which may free an old pool).
    pub(crate) fn release_entry(&self, e: Entry, object: Object) {
        self.release_entry_on(crate::stats::stripe_index(), e, object);
    }

    /// `release_entry` with the calling thread's counter stripe already looked up.
    pub(crate) fn release_entry_on(&self, stripe: usize, e: Entry, object: Object) {
        // SAFETY: the entry was taken out of the index by the caller, which now owns its pool
        // reference until the `put` below, the last use of `pool`.
        let pool = unsafe { self.pools.get(e.pool) };
        let handle = Handle::from_raw(e.handle);
        if let (Some(h), Object::Cold) = (handle, object) {
            // The free writes the handle's state word and the object's header under the class
            // lock: start those misses now, behind the LRU unlink.
            pool.zs.prefetch_free(h, ObjHint(e.hint));
        }
        if let Some(c) = self.cgroups.get(u32::from(e.cgroup)) {
            // The entry's list: its node's, offset by its pool's with per-pool lists.
            c.lists[pool.lane_base + usize::from(e.node)].remove(e.lru);
        }
        if let Some(h) = handle {
            let _ = pool.zs.free(h);
        }
        self.cgroups
            .uncharge_on(stripe, u32::from(e.cgroup), u64::from(e.length));
        self.stats
            .add_on(stripe, G::StoredPages as usize, 1u64.wrapping_neg());
        if e.length as usize == PAGE_SIZE {
            self.stats.add_on(
                stripe,
                G::StoredIncompressiblePages as usize,
                1u64.wrapping_neg(),
            );
        }
        self.pools.put(pool);
    }

    pub(crate) fn invalidate(&self, slot: SwapSlot) {
        let Some(area) = self.area(slot.area) else {
            return;
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return;
        };
        self.replace_slot(area, shard, i, slot, SlotValue::Empty);
    }
}
