// SPDX-License-Identifier: MIT
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
//! `Params::zero_page_entries` a zero page is `SlotValue::ZeroEntry`: an entry of length 0
//! with no pool object and no LRU node, as before "mm: zswap: store zero-filled pages without
//! a zswap_entry" (RFC, Mar 2024). Its own tag keeps it off every path that handles pool
//! entries (load, writeback, prefetch), at no cost to them: `value()` tests `ON_DISK` and
//! `ZERO_ENTRY` with one mask. Entries (24 bytes), zero entries included, sit in a per-shard
//! table at their slot's own index.
//!
//! `LOADING` / `WRITEBACK` mark a slot "in flight" (the kernel's locked swap-cache folio): the
//! load or writeback that set the bit owns the slot until it clears it, with the shard lock
//! dropped in between; every other operation on that slot waits on the shard's condvar.
//! `ON_DISK` says the swap file block holds this slot's content (written back or swapped out);
//! such a slot has no entry, so its value bits record the cgroup that owned the page (the
//! kernel's swap_cgroup) for the refault credit: `SlotValue::OnDisk(owner)`. The owner is part
//! of the value, so any new value (entry, zero page, empty) replaces it with the block.

use crossbeam_utils::CachePadded;

use crate::sync::{Condvar, Mutex, MutexGuard};

pub(crate) const SHARD_SHIFT: u32 = 12;
pub(crate) const SHARD_SLOTS: usize = 1 << SHARD_SHIFT;

const VALUE_MASK: u32 = (1 << 28) - 1;
const ON_DISK: u32 = 1 << 28;
const LOADING: u32 = 1 << 29;
const WRITEBACK: u32 = 1 << 30;
/// The value bits name a zero-filled page's entry (`SlotValue::ZeroEntry`).
const ZERO_ENTRY: u32 = 1 << 31;
const _: () = assert!(crate::MAX_CGROUPS as u32 <= VALUE_MASK);
const _: () = assert!(crate::MAX_CGROUPS <= u16::MAX as usize + 1);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SlotValue {
    Empty,
    /// A zero-filled page: no entry, no pool memory.
    Zero,
    /// An entry, at this index of the shard's entry table (the slot's own index).
    Entry(u32),
    /// A zero-filled page kept with an entry of length 0 (`Params::zero_page_entries`), at this
    /// index of the shard's entry table (the slot's own index); no pool object, no LRU node.
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
                debug_assert!(i <= VALUE_MASK);
                ZERO_ENTRY | i
            }
        };
        SlotWord((self.0 & !(ZERO_ENTRY | ON_DISK | VALUE_MASK)) | bits)
    }
    /// The word names a zero entry (`SlotValue::ZeroEntry`).
    #[inline]
    pub(crate) fn zero_entry(self) -> bool {
        self.0 & ZERO_ENTRY != 0
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    /// zsmalloc handle (raw).
    pub(crate) handle: u64,
    /// Where the object lay when stored (`uzswap_zsmalloc::ObjHint`): a load starts the
    /// object's cache misses together with the handle's instead of after it.
    pub(crate) hint: u32,
    /// Node index in the cgroup's LRU list for `node`.
    pub(crate) lru: u32,
    /// Charged cgroup (may since have gone offline; below `MAX_CGROUPS`).
    pub(crate) cgroup: u16,
    /// Pool table index (the entry holds a reference on that pool).
    pub(crate) pool: u16,
    /// Compressed length; `PAGE_SIZE` means stored as-is.
    pub(crate) length: u16,
    /// NUMA node. The entry's LRU list among its cgroup's lists (its lane) is its pool's
    /// `lane_base` plus the node (`lane_base` is 0 unless `LruMode::PerPool`).
    pub(crate) node: u8,
    /// Second-chance bit.
    pub(crate) referenced: bool,
}

/// A read prefetch of the cache line holding `p` into all cache levels. A hint only: it has no
/// architectural effect and never faults, whatever `p` is.
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: PREFETCHT0 is part of SSE (baseline on x86_64), reads no memory architecturally
    // and cannot fault, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// One shard's slots: the word table, and the entries at the same index as their slot (so a
/// load can fetch a slot's word and entry at once instead of one after the other; in random
/// order each is a cache miss). The entry table exists while the shard holds an entry.
#[derive(Default)]
pub(crate) struct ShardTable {
    words: Vec<u32>,
    entries: Vec<Entry>,
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

    /// Hint: slot `i`'s entry will be read soon (a hint only; no entry table, no effect).
    #[inline]
    pub(crate) fn prefetch_entry(&self, i: usize) {
        if let Some(e) = self.entries.get(i) {
            prefetch_line(e as *const Entry as *const u8);
        }
    }

    #[inline]
    pub(crate) fn entry(&self, i: u32) -> &Entry {
        &self.entries[i as usize]
    }

    #[inline]
    pub(crate) fn entry_mut(&mut self, i: u32) -> &mut Entry {
        &mut self.entries[i as usize]
    }

    /// Make room for entries (the table of the shard's first one). False if it can't be
    /// allocated (reject_kmemcache_fail).
    pub(crate) fn reserve_entries(&mut self) -> bool {
        if self.entries.is_empty() {
            if self.entries.try_reserve_exact(SHARD_SLOTS).is_err() {
                return false;
            }
            self.entries.resize(SHARD_SLOTS, Entry::default());
        }
        true
    }

    /// Put `e` at slot `i` (after [`ShardTable::reserve_entries`]), returning the entry it
    /// replaces if the slot's word `w` named one (a pool entry, or a zero entry if `w` says
    /// `ZeroEntry`). The caller then rewrites the word.
    pub(crate) fn replace_entry(&mut self, i: usize, w: SlotWord, e: Entry) -> Option<Entry> {
        let old = match w.value() {
            SlotValue::Entry(ei) | SlotValue::ZeroEntry(ei) => {
                debug_assert_eq!(ei as usize, i);
                Some(self.entries[i])
            }
            _ => {
                self.live += 1;
                None
            }
        };
        self.entries[i] = e;
        old
    }

    /// Free slot `i`'s entry cell (the caller already copied what it needs and rewrites the
    /// word); the last one gives the table back.
    pub(crate) fn free_entry(&mut self, i: u32) {
        self.entries[i as usize].handle = 0;
        self.live -= 1;
        if self.live == 0 {
            self.entries = Vec::new();
        }
    }

    /// Checks the shard's own structure and returns its slots that hold something, as
    /// `(in-shard index, word, entry if the word names one)` (the cache's invariant checker).
    /// Checked: an entry word (pool or zero entry) names the entry at its own index, `live`
    /// counts them, the entry table exists exactly while the shard holds an entry, and every
    /// other cell is free (handle 0).
    pub(crate) fn check(&self) -> Result<Vec<(usize, SlotWord, Option<Entry>)>, String> {
        let mut named = vec![false; self.entries.len()];
        let mut out = Vec::new();
        for (i, &w) in self.words.iter().enumerate() {
            let w = SlotWord(w);
            let entry = match w.value() {
                SlotValue::Empty => continue,
                SlotValue::Zero | SlotValue::OnDisk(_) => None,
                SlotValue::Entry(ei) | SlotValue::ZeroEntry(ei) => {
                    if ei as usize != i {
                        return Err(format!("slot {i} names entry {ei}, not its own"));
                    }
                    let cell = named
                        .get_mut(i)
                        .ok_or_else(|| format!("slot {i} names an entry with no entry table"))?;
                    *cell = true;
                    Some(self.entries[i])
                }
            };
            out.push((i, w, entry));
        }
        let live = named.iter().filter(|&&n| n).count();
        if live != self.live as usize {
            return Err(format!(
                "{live} entries named, the shard counts {}",
                self.live
            ));
        }
        if (live == 0) != self.entries.is_empty() {
            return Err(format!(
                "{live} entries with an entry table of {} cells",
                self.entries.len()
            ));
        }
        if let Some(c) = (0..self.entries.len()).find(|&c| !named[c] && self.entries[c].handle != 0)
        {
            return Err(format!("cell {c} holds a handle but no slot names it"));
        }
        Ok(out)
    }

    /// Metadata bytes held: (word table, entry table).
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
    /// Lock the shard and wait until slot `i` is not in flight (its entry's line on its way).
    #[inline]
    pub(crate) fn lock_idle(&self, i: usize) -> (MutexGuard<'_, ShardTable>, SlotWord) {
        let mut t = self.table.lock();
        // Whatever the word says, its entry is read next: start both misses now.
        t.prefetch_entry(i);
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
        let last = SHARD_SLOTS as u32 - 1;
        let z = SlotWord::EMPTY.with_value(SlotValue::ZeroEntry(last));
        assert_eq!(z.value(), SlotValue::ZeroEntry(last));
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
    fn entries_sit_at_their_slot_and_the_table_goes_with_the_last() {
        let mut t = ShardTable::default();
        let e = Entry {
            handle: 1,
            length: 10,
            referenced: true,
            ..Entry::default()
        };
        assert!(t.reserve_entries());
        assert_eq!(t.replace_entry(5, SlotWord::EMPTY, e), None);
        t.set_word(5, SlotWord::EMPTY.with_value(SlotValue::Entry(5)));
        assert_eq!(t.replace_entry(9, SlotWord::EMPTY, e), None);
        assert_eq!(t.live, 2);
        // A store over a stored slot replaces its entry in place.
        let newer = Entry { handle: 2, ..e };
        assert_eq!(t.replace_entry(5, t.word(5), newer), Some(e));
        assert_eq!((*t.entry(5), t.live), (newer, 2));
        // So does a store over a zero entry (`Params::zero_page_entries`).
        t.set_word(9, SlotWord::EMPTY.with_value(SlotValue::ZeroEntry(9)));
        assert_eq!(t.replace_entry(9, t.word(9), newer), Some(e));
        assert_eq!(t.live, 2);
        assert_eq!(t.check().map(|v| v.len()), Ok(2));
        t.free_entry(5);
        assert_eq!(t.heap_bytes().1, SHARD_SLOTS * std::mem::size_of::<Entry>());
        t.free_entry(9);
        assert_eq!((t.live, t.heap_bytes().1), (0, 0));
    }
}
