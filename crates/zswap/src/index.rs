//! The slot index: per swap area, a table of compact slot words indexed by offset, split into
//! shards of `SHARD_SLOTS` slots, each under its own mutex.
//!
//! A slot word (u32) is the typed value of one swap slot:
//!
//! ```text
//!  31          30        29       28       27 ........................ 0
//!  0           WRITEBACK LOADING  0        value: 0 = empty, 1 = zero page, n >= 2 = entry n - 2
//!  0           WRITEBACK LOADING  ON_DISK  owner cgroup id
//!  ZERO_ENTRY  0         0        0        entry n (a zero-filled page with an entry)
//! ```
//!
//! `SlotValue` is the only way the rest of the crate sees a word's value. By default zero
//! pages exist only as `SlotValue::Zero`: no entry, no allocation, one word (the swap core's
//! zeromap since "mm: store zero pages to be swapped out in a bitmap", 6.12). With
//! `Params::zero_page_entries` a zero page is `SlotValue::ZeroEntry`: a slab entry of length 0
//! with no pool object and no LRU node, as before "mm: zswap: store zero-filled pages without
//! a zswap_entry" (RFC, Mar 2024). Its own tag keeps it off every path that handles pool
//! entries (load, writeback, prefetch), at no cost to them: `value()` tests `ON_DISK` and
//! `ZERO_ENTRY` with one mask. Entries (24 bytes) live in a per-shard slab whose free list is
//! threaded through the free entries.
//!
//! `LOADING` / `WRITEBACK` mark a slot "in flight" (the kernel's locked swap-cache folio): the
//! load or writeback that set the bit owns the slot until it clears it, with the shard lock
//! dropped in between; every other operation on that slot waits on the shard's condvar.
//! `ON_DISK` says the swap file block holds this slot's content (written back or swapped out);
//! such a slot has no entry, so its value bits record the cgroup that owned the page (the
//! kernel's swap_cgroup) for the refault credit: `SlotValue::OnDisk(owner)`. The owner is part
//! of the value, so any new value (entry, zero page, empty) replaces it with the block.

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex, MutexGuard};

pub(crate) const SHARD_SHIFT: u32 = 12;
pub(crate) const SHARD_SLOTS: usize = 1 << SHARD_SHIFT;

const VALUE_MASK: u32 = (1 << 28) - 1;
const ON_DISK: u32 = 1 << 28;
const LOADING: u32 = 1 << 29;
const WRITEBACK: u32 = 1 << 30;
/// The value bits name a zero-filled page's entry (`SlotValue::ZeroEntry`).
const ZERO_ENTRY: u32 = 1 << 31;
const MAX_ENTRIES: u32 = VALUE_MASK - 2;
const FREE_END: u32 = u32::MAX;
const _: () = assert!(crate::MAX_CGROUPS as u32 <= VALUE_MASK);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SlotValue {
    Empty,
    /// A zero-filled page: no entry, no pool memory.
    Zero,
    /// Index into the shard's entry slab.
    Entry(u32),
    /// A zero-filled page kept with an entry of length 0 (`Params::zero_page_entries`): index
    /// into the shard's entry slab; no pool object, no LRU node.
    ZeroEntry(u32),
    /// The swap file block holds the page; the cgroup id it belonged to (may since be offline).
    OnDisk(u32),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct SlotWord(u32);

impl SlotWord {
    pub(crate) const EMPTY: SlotWord = SlotWord(0);

    pub(crate) fn value(self) -> SlotValue {
        // One test for both tags: the untagged values cost what they did before zero entries.
        if self.0 & (ON_DISK | ZERO_ENTRY) != 0 {
            return if self.on_disk() {
                SlotValue::OnDisk(self.0 & VALUE_MASK)
            } else {
                SlotValue::ZeroEntry(self.0 & VALUE_MASK)
            };
        }
        match self.0 & VALUE_MASK {
            0 => SlotValue::Empty,
            1 => SlotValue::Zero,
            n => SlotValue::Entry(n - 2),
        }
    }
    /// The word with value `v`, keeping the in-flight bits.
    pub(crate) fn with_value(self, v: SlotValue) -> SlotWord {
        let bits = match v {
            SlotValue::Empty => 0,
            SlotValue::Zero => 1,
            SlotValue::Entry(i) => i + 2,
            SlotValue::OnDisk(owner) => {
                debug_assert!(owner <= VALUE_MASK);
                ON_DISK | owner
            }
            SlotValue::ZeroEntry(i) => {
                debug_assert!(i <= MAX_ENTRIES);
                ZERO_ENTRY | i
            }
        };
        SlotWord((self.0 & !(ZERO_ENTRY | ON_DISK | VALUE_MASK)) | bits)
    }
    /// The swap file holds a block for this slot (`SlotValue::OnDisk`).
    #[inline]
    pub(crate) fn on_disk(self) -> bool {
        self.0 & ON_DISK != 0
    }
    pub(crate) fn loading(self) -> bool {
        self.0 & LOADING != 0
    }
    pub(crate) fn busy(self) -> bool {
        self.0 & (LOADING | WRITEBACK) != 0
    }
    pub(crate) fn with_loading(self) -> SlotWord {
        SlotWord(self.0 | LOADING)
    }
    pub(crate) fn with_writeback(self) -> SlotWord {
        SlotWord(self.0 | WRITEBACK)
    }
    #[cfg(test)]
    pub(crate) fn idle(self) -> SlotWord {
        SlotWord(self.0 & !(LOADING | WRITEBACK))
    }
}

/// One stored compressed page. 24 bytes; the kernel's zswap_entry is 56 plus its xarray slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// zsmalloc handle (raw).
    pub(crate) handle: u64,
    /// Charged cgroup (may since have gone offline).
    pub(crate) cgroup: u32,
    /// Node index in the cgroup's LRU list for `node`; the free-list link while free.
    pub(crate) lru: u32,
    /// Pool table index (the entry holds a reference on that pool).
    pub(crate) pool: u16,
    /// Compressed length; `PAGE_SIZE` means stored as-is.
    pub(crate) length: u16,
    /// The entry's LRU list among its cgroup's lists: its NUMA node, plus its pool's first
    /// list with `LruMode::PerPool` (see `Cgroup::lists`).
    pub(crate) lane: u16,
    /// Second-chance bit.
    pub(crate) referenced: bool,
}

#[derive(Default)]
pub(crate) struct ShardTable {
    words: Vec<u32>,
    entries: Vec<Entry>,
    free: Option<u32>,
    pub(crate) live: u32,
    pub(crate) waiters: u32,
}

impl ShardTable {
    #[inline]
    pub(crate) fn word(&self, i: usize) -> SlotWord {
        self.words.get(i).map_or(SlotWord::EMPTY, |&w| SlotWord(w))
    }

    /// Set a slot word; allocates the shard's word table on first non-empty use.
    #[inline]
    pub(crate) fn set_word(&mut self, i: usize, w: SlotWord) {
        match self.words.get_mut(i) {
            Some(x) => *x = w.0,
            None => self.set_word_first(i, w),
        }
    }

    #[cold]
    #[inline(never)]
    fn set_word_first(&mut self, i: usize, w: SlotWord) {
        if self.words.is_empty() {
            if w == SlotWord::EMPTY {
                return;
            }
            self.words = vec![0; SHARD_SLOTS];
        }
        self.words[i] = w.0;
    }

    #[inline]
    pub(crate) fn entry(&self, i: u32) -> &Entry {
        &self.entries[i as usize]
    }

    #[inline]
    pub(crate) fn entry_mut(&mut self, i: u32) -> &mut Entry {
        &mut self.entries[i as usize]
    }

    /// Place an entry in the slab. `None` if the slab can't grow (reject_kmemcache_fail).
    pub(crate) fn alloc_entry(&mut self, e: Entry) -> Option<u32> {
        let i = match self.free {
            Some(i) => {
                let next = self.entries[i as usize].lru;
                self.free = (next != FREE_END).then_some(next);
                self.entries[i as usize] = e;
                i
            }
            None => {
                let i = u32::try_from(self.entries.len())
                    .ok()
                    .filter(|&i| i < MAX_ENTRIES)?;
                self.entries.try_reserve(1).ok()?;
                self.entries.push(e);
                i
            }
        };
        self.live += 1;
        Some(i)
    }

    /// Return an entry's slab cell (the caller already copied what it needs).
    pub(crate) fn free_entry(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        e.handle = 0;
        e.lru = self.free.unwrap_or(FREE_END);
        self.free = Some(i);
        self.live -= 1;
        if self.live == 0 {
            self.entries = Vec::new();
            self.free = None;
        }
    }

    /// Metadata bytes held: (word table, entry slab).
    pub(crate) fn heap_bytes(&self) -> (usize, usize) {
        (
            self.words.capacity() * 4,
            self.entries.capacity() * std::mem::size_of::<Entry>(),
        )
    }
}

pub(crate) struct Shard {
    pub(crate) table: Mutex<ShardTable>,
    cv: Condvar,
}

impl Shard {
    /// Lock the shard and wait until slot `i` is not in flight.
    #[inline]
    pub(crate) fn lock_idle(&self, i: usize) -> (MutexGuard<'_, ShardTable>, SlotWord) {
        let mut t = self.table.lock();
        loop {
            let w = t.word(i);
            if !w.busy() {
                return (t, w);
            }
            t.waiters += 1;
            self.cv.wait(&mut t);
            t.waiters -= 1;
        }
    }

    /// Wake waiters after clearing an in-flight bit (call with the lock held).
    #[inline]
    pub(crate) fn wake(&self, t: &ShardTable) {
        if t.waiters > 0 {
            self.cv.notify_all();
        }
    }
}

pub(crate) struct AreaIndex {
    pub(crate) shards: Box<[CachePadded<Shard>]>,
    pub(crate) capacity: u64,
}

impl AreaIndex {
    pub(crate) fn new(capacity: u64) -> AreaIndex {
        let n = capacity.div_ceil(SHARD_SLOTS as u64).max(1) as usize;
        let shards = (0..n)
            .map(|_| {
                CachePadded::new(Shard {
                    table: Mutex::new(ShardTable::default()),
                    cv: Condvar::new(),
                })
            })
            .collect();
        AreaIndex { shards, capacity }
    }

    /// Shard and in-shard index for an offset (`None` if out of range).
    #[inline]
    pub(crate) fn locate(&self, offset: u64) -> Option<(&Shard, usize)> {
        if offset >= self.capacity {
            return None;
        }
        let s = &self.shards[(offset >> SHARD_SHIFT) as usize];
        Some((s, (offset as usize) & (SHARD_SLOTS - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_word_round_trip() {
        let w = SlotWord::EMPTY.with_value(SlotValue::Entry(7));
        assert_eq!(w.value(), SlotValue::Entry(7));
        assert!(!w.on_disk() && !w.busy());
        let b = w.with_writeback();
        assert!(b.busy() && !b.loading());
        assert_eq!(b.idle(), w);
        assert_eq!(w.with_value(SlotValue::Zero).value(), SlotValue::Zero);
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        // A zero entry is neither a pool entry nor a disk block, and any value replaces it.
        let z = SlotWord::EMPTY.with_value(SlotValue::ZeroEntry(MAX_ENTRIES));
        assert_eq!(z.value(), SlotValue::ZeroEntry(MAX_ENTRIES));
        assert!(!z.on_disk() && !z.busy());
        for v in [
            SlotValue::Empty,
            SlotValue::Zero,
            SlotValue::Entry(4),
            SlotValue::OnDisk(2),
        ] {
            assert_eq!(z.with_value(v).value(), v);
            assert_eq!(
                SlotWord::EMPTY
                    .with_value(v)
                    .with_value(SlotValue::ZeroEntry(9))
                    .value(),
                SlotValue::ZeroEntry(9)
            );
        }
    }

    #[test]
    fn on_disk_owner_is_never_an_entry() {
        let last = crate::MAX_CGROUPS as u32 - 1;
        for owner in [0, 1, 2, last] {
            let d = SlotWord::EMPTY.with_value(SlotValue::OnDisk(owner));
            assert!(d.on_disk());
            assert_eq!(d.value(), SlotValue::OnDisk(owner));
            // In flight and back: the owner stays with the block.
            let l = d.with_loading();
            assert_eq!((l.value(), l.idle()), (SlotValue::OnDisk(owner), d));
            // Any other value drops the block and its owner.
            for v in [SlotValue::Empty, SlotValue::Zero, SlotValue::Entry(owner)] {
                let n = l.with_value(v);
                assert_eq!((n.value(), n.on_disk(), n.loading()), (v, false, true));
            }
        }
        let e = SlotWord::EMPTY.with_value(SlotValue::Entry(3));
        assert_eq!(
            e.with_value(SlotValue::OnDisk(5)).value(),
            SlotValue::OnDisk(5)
        );
    }

    #[test]
    fn slab_reuses_cells() {
        let mut t = ShardTable::default();
        let e = Entry {
            handle: 1,
            cgroup: 0,
            lru: 0,
            pool: 0,
            length: 10,
            lane: 0,
            referenced: true,
        };
        let a = t.alloc_entry(e).unwrap();
        let b = t.alloc_entry(e).unwrap();
        t.free_entry(a);
        assert_eq!(t.alloc_entry(e).unwrap(), a);
        assert_eq!(t.live, 2);
        t.free_entry(a);
        t.free_entry(b);
        assert_eq!(t.live, 0);
    }
}
