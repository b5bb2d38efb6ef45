// SPDX-License-Identifier: MIT
//! Managed regions and their per-page state words.
//!
//! A region is a page-aligned range of the program's private anonymous memory registered with
//! the userfaultfd. Each page has one `AtomicU64` state word (8 bytes per 4 KiB page, 0.2 %),
//! in an array the pager maps for itself (never managed). Untouched words are zero pages of
//! that array, so a sparse 64 GiB heap reservation costs address space, not memory.
//!
//! State word layout:
//! ```text
//!  63        48 47              16 15      8     7       6      5      4     3    2   1..0
//! [ evict epoch | swap slot offset | pin count | STAGED | SWPIN | ACTIVE | KEPT | INH | REF | kind ]
//! ```
//! kind: `ABSENT` (never filled, or dropped: a fault fills zeros), `RESIDENT` (the page is
//! mapped), `EVICTED` (its content is in the cache under `slot`), `BUSY` (one thread owns a
//! transition: fill, eviction or drop; everyone else waits). `REF` is the clock's referenced bit.
//! The pin count keeps a resident page from being evicted while a system call uses it (the
//! EFAULT path). The epoch is the low 16 bits of the eviction counter when the page was
//! evicted: the kernel's workingset shadow entry, giving the refault distance.
//!
//! Clean pages (write tracking on, docs/pager.md): a `RESIDENT` page with `KEPT` came back from
//! the cache by a read fault (or readahead), write-protected, and the cache still holds its copy
//! under the slot field: re-evicting it while it is unwritten reuses that copy instead of
//! compressing again. `KEPT` is a hint checked when the page is evicted (the content is compared
//! with the copy), never trusted alone. `SWPIN` (bit 6): the page came back from the cache (its
//! next eviction is a re-eviction). `ACTIVE` (bit 5): the page refaulted within the resident
//! set's worth of evictions, the kernel's workingset activation; the clock leaves it alone while
//! active pages are no more than the inactive ones (docs/pager.md, "Victim selection").

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sys;

pub const PAGE: usize = 4096;

pub const ABSENT: u64 = 0;
pub const RESIDENT: u64 = 1;
pub const EVICTED: u64 = 2;
pub const BUSY: u64 = 3;
pub const KIND: u64 = 3;
pub const REF: u64 = 1 << 2;
/// Resident since before a fork (shared copy-on-write with the parent, charged to it).
pub const INHERITED: u64 = 1 << 3;
/// The cache still holds this resident page's content under the slot field.
pub const KEPT: u64 = 1 << 4;
/// Refaulted soon after its eviction: on the active side of the clock.
pub const ACTIVE: u64 = 1 << 5;
/// Came back from the cache (pool or swap file).
pub const SWPIN: u64 = 1 << 6;
/// With `BUSY`: moved out by background reclaim and waiting in the staging area for the
/// reclaim thread; a fault may take it back (the state word's owner is whoever clears this).
pub const STAGED: u64 = 1 << 7;
pub const PIN_ONE: u64 = 1 << 8;
pub const PIN_MASK: u64 = 0xff << 8;
/// Most pins a page holds at once (a pin beyond it waits for one to go: the count must not
/// carry into the slot field).
pub const PIN_MAX: u64 = 0xff;
const SLOT_SHIFT: u32 = 16;
const SLOT_MASK: u64 = 0xffff_ffff;
const EPOCH_SHIFT: u32 = 48;

#[inline]
pub fn kind(s: u64) -> u64 {
    s & KIND
}
/// The evicted page's swap slot: (area, offset); the slot field holds the area in its top 5
/// bits (a process has one area, 0) and the offset in the low 27.
#[inline]
pub fn slot_of(s: u64) -> (u32, u64) {
    let f = (s >> SLOT_SHIFT) & SLOT_MASK;
    ((f >> 27) as u32, f & ((1 << 27) - 1))
}
#[inline]
pub fn epoch_of(s: u64) -> u16 {
    (s >> EPOCH_SHIFT) as u16
}
#[inline]
pub fn evicted(area: u32, off: u64, epoch: u64) -> u64 {
    let f = (u64::from(area) << 27) | (off & ((1 << 27) - 1));
    EVICTED | ((f & SLOT_MASK) << SLOT_SHIFT) | ((epoch & 0xffff) << EPOCH_SHIFT)
}
/// A resident page whose content the cache still holds under (`area`, `off`).
#[inline]
pub fn kept(area: u32, off: u64) -> u64 {
    let f = (u64::from(area) << 27) | (off & ((1 << 27) - 1));
    RESIDENT | KEPT | ((f & SLOT_MASK) << SLOT_SHIFT)
}
/// The word without its slot and epoch fields.
#[inline]
pub fn flags_only(s: u64) -> u64 {
    s & ((1 << SLOT_SHIFT) - 1)
}
#[inline]
pub fn pins(s: u64) -> u64 {
    (s & PIN_MASK) >> 8
}

/// Words per span of the filled-span bitmap: one page of state words.
const WORDS_PER_SPAN: usize = PAGE / 8;

/// The state words of one mapping, shared by the region pieces a partial munmap leaves.
pub struct States {
    base: usize,
    len: usize,
    words: usize,
    /// One bit per span of `WORDS_PER_SPAN` words, set once a page of the span was filled:
    /// the clock hand skips spans never filled without reading their words.
    touched: Box<[AtomicU64]>,
}

impl States {
    fn new(words: usize) -> Result<States, i32> {
        let len = (words * 8).div_ceil(PAGE) * PAGE;
        let base = sys::map_anon(len.max(PAGE))?;
        Ok(States {
            base,
            len: len.max(PAGE),
            words,
            touched: (0..words.div_ceil(WORDS_PER_SPAN).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        })
    }

    /// Marks the spans holding words `lo..=hi` as filled.
    fn mark(&self, lo: usize, hi: usize) {
        for span in lo / WORDS_PER_SPAN..=hi / WORDS_PER_SPAN {
            if let Some(t) = self.touched.get(span / 64) {
                let bit = 1u64 << (span % 64);
                if t.load(Ordering::Relaxed) & bit == 0 {
                    t.fetch_or(bit, Ordering::Relaxed);
                }
            }
        }
    }

    /// Whether the span holding word `i` was ever filled.
    #[inline]
    fn touched(&self, i: usize) -> bool {
        let span = i / WORDS_PER_SPAN;
        self.touched
            .get(span / 64)
            .is_some_and(|t| t.load(Ordering::Relaxed) & (1 << (span % 64)) != 0)
    }

    #[inline]
    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words);
        // SAFETY: `base` is a live, 8-byte-aligned mapping of at least `words` u64s owned by
        // this object (zero-initialised by the kernel, a valid AtomicU64 bit pattern).
        unsafe { &*(self.base as *const AtomicU64).add(i) }
    }
}

impl Drop for States {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no reference outlives `self`.
        let _ = unsafe { sys::raw_munmap(self.base, self.len) };
    }
}

/// A managed range `[start, start + pages * PAGE)`: a window `first..first+pages` into a
/// `States` array.
pub struct Region {
    pub start: usize,
    pub pages: usize,
    states: Arc<States>,
    first: usize,
    /// One past the highest page index ever filled: the clock hand's scan bound.
    pub hwm: AtomicUsize,
    /// The stream of first touches in this region, whichever thread makes them: the page
    /// after the last zero fill (high bits) and that fill's window (low 8 bits); see
    /// `Pager::fill_zero`.
    pub zero_stream: AtomicU64,
}

impl Region {
    pub fn new(start: usize, pages: usize) -> Result<Region, i32> {
        Ok(Region {
            start,
            pages,
            states: Arc::new(States::new(pages)?),
            first: 0,
            hwm: AtomicUsize::new(0),
            zero_stream: AtomicU64::new(0),
        })
    }

    /// The sub-range of pages `from..to` as a region sharing these state words.
    pub fn piece(&self, from: usize, to: usize) -> Region {
        Region {
            start: self.start + from * PAGE,
            pages: to - from,
            states: self.states.clone(),
            first: self.first + from,
            hwm: AtomicUsize::new(self.hwm.load(Ordering::Relaxed).saturating_sub(from)),
            zero_stream: AtomicU64::new(0),
        }
    }

    #[inline]
    pub fn end(&self) -> usize {
        self.start + self.pages * PAGE
    }

    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.start && addr < self.end()
    }

    #[inline]
    pub fn state(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.pages);
        self.states.word(self.first + i)
    }

    #[inline]
    pub fn addr(&self, i: usize) -> usize {
        self.start + i * PAGE
    }

    #[inline]
    pub fn index(&self, addr: usize) -> usize {
        (addr - self.start) / PAGE
    }

    /// The first page index in `from..to` whose state is `RESIDENT`, else `to`: the clock hand's
    /// way over the evicted and never-filled stretches of a large heap under a small budget,
    /// one plain load per word with no per-word bounds check.
    pub fn next_resident(&self, from: usize, to: usize) -> usize {
        let to = to.min(self.pages);
        if from >= to {
            return to;
        }
        let base = self.states.base as *const AtomicU64;
        // SAFETY: `first + to <= first + pages <= words` (a region is a window of its
        // `States`), so `[first + from, first + to)` lies inside the live, aligned mapping of
        // `words` AtomicU64 that `self.states` owns; shared atomics may be read through a
        // shared slice while other threads update them.
        let words = unsafe { std::slice::from_raw_parts(base.add(self.first + from), to - from) };
        let mut k = 0;
        while k < words.len() {
            let abs = self.first + from + k;
            let span_end = (abs / WORDS_PER_SPAN + 1) * WORDS_PER_SPAN - self.first - from;
            let end = span_end.min(words.len());
            if self.states.touched(abs) {
                if let Some(p) = words[k..end]
                    .iter()
                    .position(|w| w.load(Ordering::Relaxed) & KIND == RESIDENT)
                {
                    return from + k + p;
                }
            }
            k = end;
        }
        to
    }

    /// Calls `f` for every page index below `upto` whose state word can be non-zero: those on
    /// pages of the state array that are mapped. A state page never touched holds only
    /// `ABSENT` words, so a walk over a large sparse heap (a fork child marking what it
    /// inherited) need not fault in zero pages for it. `mincore` reports a page of this private
    /// anonymous array mapped exactly when it has a page table entry, and a fork child has
    /// one wherever its parent had.
    pub fn for_each_mapped(&self, upto: usize, mut f: impl FnMut(usize)) {
        let upto = upto.min(self.pages);
        if upto == 0 {
            return;
        }
        let lo = self.states.base + self.first * 8;
        let hi = lo + upto * 8;
        let page_lo = lo & !(PAGE - 1);
        let mut vec = vec![0u8; (hi - page_lo).div_ceil(PAGE)];
        if sys::mincore(page_lo, &mut vec).is_err() {
            (0..upto).for_each(f);
            return;
        }
        for (k, m) in vec.iter().enumerate() {
            if m & 1 == 0 {
                continue;
            }
            let a = (page_lo + k * PAGE).max(lo);
            let b = (page_lo + (k + 1) * PAGE).min(hi);
            ((a - lo) / 8..(b - lo) / 8).for_each(&mut f);
        }
    }

    /// Pages `first..=last` were filled (made resident).
    #[inline]
    pub fn note_filled(&self, first: usize, last: usize) {
        self.hwm.fetch_max(last + 1, Ordering::Relaxed);
        self.states.mark(self.first + first, self.first + last);
    }
}
