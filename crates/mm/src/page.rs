// SPDX-License-Identifier: MIT
//! Page records: per page identity the front created, 2 bytes of flags and a 16-byte record
//! (LRU links inside: intrusive lists, no allocation per page move), in two vectors indexed
//! by `PageId`.

use crate::PageId;

/// No page / end of a list.
pub(crate) const NIL: u32 = u32::MAX;

/// Flag bits of a page (kernel folio and PTE state, in one word).
pub(crate) mod f {
    /// A folio holds the page's data in memory (charged to its cgroup, on an LRU list).
    pub const PRESENT: u16 = 1 << 0;
    /// A PTE maps the folio (false for a readahead folio sitting in the swap cache).
    pub const MAPPED: u16 = 1 << 1;
    /// The PTE maps the shared zero page (read of a never-written page): nothing charged.
    pub const ZERO_MAPPED: u16 = 1 << 2;
    /// On the active list (PG_active).
    pub const ACTIVE: u16 = 1 << 3;
    /// The PTE's accessed bit (set by every access, test-and-cleared by reclaim's rmap walk).
    pub const YOUNG: u16 = 1 << 4;
    /// PG_referenced.
    pub const REFERENCED: u16 = 1 << 5;
    /// The folio (or its PTE) is dirty: it must be written out before it can be dropped.
    pub const DIRTY: u16 = 1 << 6;
    /// PG_workingset: was active before (set on deactivation, carried by shadows).
    pub const WORKINGSET: u16 = 1 << 7;
    /// PG_readahead: brought in by swap readahead, not yet used.
    pub const READAHEAD: u16 = 1 << 8;
    /// Isolated from its list by a reclaim pass in progress.
    pub const ISOLATED: u16 = 1 << 9;
    /// The page identity exists (not freed by `free_page`).
    pub const LIVE: u16 = 1 << 10;
    /// The identity was placed by the front (`alloc_at`): it stays the front's when freed,
    /// never handed out by `alloc`.
    pub const PLACED: u16 = 1 << 11;
}

/// A page's record apart from its flags: LRU links, swap slot and cgroup. `slot` is its swap
/// slot (0 = none; slot 0 is the swap header and never allocated): with `PRESENT` the folio
/// is in the swap cache, without it the data is out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rec {
    pub prev: u32,
    pub next: u32,
    pub slot: u32,
    pub cg: u16,
}

const EMPTY: Rec = Rec {
    prev: NIL,
    next: NIL,
    slot: 0,
    cg: 0,
};

/// A copy of one page's state (flags and record), for reading.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Page {
    pub prev: u32,
    pub next: u32,
    pub slot: u32,
    pub cg: u16,
    pub flags: u16,
}

impl Page {
    #[inline]
    pub fn has(&self, bits: u16) -> bool {
        self.flags & bits == bits
    }
    #[inline]
    pub fn any(&self, bits: u16) -> bool {
        self.flags & bits != 0
    }
}

/// One page's flags and record, for writing.
pub(crate) struct PageMut<'a> {
    pub flags: &'a mut u16,
    pub rec: &'a mut Rec,
}

impl PageMut<'_> {
    #[inline]
    pub fn has(&self, bits: u16) -> bool {
        *self.flags & bits == bits
    }
    #[inline]
    pub fn set(&mut self, bits: u16) {
        *self.flags |= bits;
    }
    #[inline]
    pub fn clear(&mut self, bits: u16) {
        *self.flags &= !bits;
    }
    /// Test and clear.
    #[inline]
    pub fn take(&mut self, bits: u16) -> bool {
        let had = *self.flags & bits != 0;
        *self.flags &= !bits;
        had
    }
}

/// All page records, as two arrays indexed by `PageId`: the flags (2 bytes a page: all an
/// access to a mapped page reads and writes, so the accesses of a large footprint stay in the
/// CPU's cache) and the rest (16 bytes: links, slot and cgroup, touched by faults and
/// reclaim). Identities come from the free list (`alloc`) or are placed by the front
/// (`alloc_at`).
#[derive(Default)]
pub(crate) struct Pages {
    pub flags: Vec<u16>,
    pub rec: Vec<Rec>,
    free: Vec<u32>,
}

impl Pages {
    pub fn alloc(&mut self, cg: u16) -> PageId {
        while let Some(i) = self.free.pop() {
            // An identity placed by `alloc_at` since it was freed is taken.
            if self.flags[i as usize] & (f::LIVE | f::PLACED) == 0 {
                self.init(i, cg);
                return PageId(i);
            }
        }
        let i = self.flags.len() as u32;
        self.grow(i);
        self.init(i, cg);
        PageId(i)
    }

    /// Make identity `id` live (it must not be).
    pub fn alloc_at(&mut self, id: u32, cg: u16) {
        self.grow(id);
        debug_assert_eq!(self.flags[id as usize] & f::LIVE, 0);
        self.init(id, cg);
        self.flags[id as usize] |= f::PLACED;
    }

    fn grow(&mut self, id: u32) {
        let n = id as usize + 1;
        if self.flags.len() < n {
            // Identities skipped here stay unused by `alloc` (which only reuses released ones
            // or appends), so placed and allocated identities never collide.
            self.flags.resize(n, 0);
            self.rec.resize(n, EMPTY);
        }
    }

    /// Records (not live) for identities below `n`.
    pub fn reserve(&mut self, n: usize) {
        if n > 0 {
            self.grow(n as u32 - 1);
        }
    }

    #[inline]
    fn init(&mut self, i: u32, cg: u16) {
        self.flags[i as usize] = f::LIVE;
        self.rec[i as usize] = Rec { cg, ..EMPTY };
    }

    pub fn release(&mut self, id: PageId) {
        let fl = &mut self.flags[id.0 as usize];
        if *fl & f::PLACED != 0 {
            // The front may place it again: `alloc` must not hand it out meanwhile.
            *fl = f::PLACED;
        } else {
            *fl = 0;
            self.free.push(id.0);
        }
    }

    /// Identities ever made (live or not).
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    #[inline]
    pub fn get(&self, id: u32) -> Page {
        let r = self.rec[id as usize];
        Page {
            prev: r.prev,
            next: r.next,
            slot: r.slot,
            cg: r.cg,
            flags: self.flags[id as usize],
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: u32) -> PageMut<'_> {
        PageMut {
            flags: &mut self.flags[id as usize],
            rec: &mut self.rec[id as usize],
        }
    }

    #[inline]
    pub fn flags_mut(&mut self, id: u32) -> &mut u16 {
        &mut self.flags[id as usize]
    }

    #[inline]
    pub fn has(&self, id: u32, bits: u16) -> bool {
        self.flags[id as usize] & bits == bits
    }

    #[inline]
    pub fn set(&mut self, id: u32, bits: u16) {
        self.flags[id as usize] |= bits;
    }

    #[inline]
    pub fn clear(&mut self, id: u32, bits: u16) {
        self.flags[id as usize] &= !bits;
    }

    /// Test and clear.
    #[inline]
    pub fn take(&mut self, id: u32, bits: u16) -> bool {
        let f = &mut self.flags[id as usize];
        let had = *f & bits != 0;
        *f &= !bits;
        had
    }

    #[inline]
    pub fn slot(&self, id: u32) -> u32 {
        self.rec[id as usize].slot
    }

    #[inline]
    pub fn set_slot(&mut self, id: u32, slot: u32) {
        self.rec[id as usize].slot = slot;
    }

    #[inline]
    pub fn cg(&self, id: u32) -> u16 {
        self.rec[id as usize].cg
    }
}

/// A doubly-linked list of pages through `Page::prev/next`. `head` is the most recently added
/// end (the kernel's list head), `tail` the end reclaim takes from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl List {
    pub fn push_head(&mut self, pages: &mut Pages, id: u32) {
        let old = self.head;
        {
            let p = &mut pages.rec[id as usize];
            p.prev = NIL;
            p.next = old;
        }
        if old == NIL {
            self.tail = id;
        } else {
            pages.rec[old as usize].prev = id;
        }
        self.head = id;
        self.len += 1;
    }

    pub fn push_tail(&mut self, pages: &mut Pages, id: u32) {
        let old = self.tail;
        {
            let p = &mut pages.rec[id as usize];
            p.next = NIL;
            p.prev = old;
        }
        if old == NIL {
            self.head = id;
        } else {
            pages.rec[old as usize].next = id;
        }
        self.tail = id;
        self.len += 1;
    }

    pub fn remove(&mut self, pages: &mut Pages, id: u32) {
        let (prev, next) = {
            let p = &pages.rec[id as usize];
            (p.prev, p.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            pages.rec[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            pages.rec[next as usize].prev = prev;
        }
        let p = &mut pages.rec[id as usize];
        p.prev = NIL;
        p.next = NIL;
        self.len -= 1;
    }

    pub fn pop_tail(&mut self, pages: &mut Pages) -> Option<u32> {
        let t = self.tail;
        if t == NIL {
            return None;
        }
        self.remove(pages, t);
        // Reclaim pops tails in a row: start loading the record the next pop unlinks from
        // (the new tail's is cached now; its predecessor's is a random page's).
        if self.tail != NIL {
            let prev = pages.rec[self.tail as usize].prev;
            if let Some(r) = pages.rec.get(prev as usize) {
                crate::prefetch(std::ptr::from_ref(r).cast());
            }
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_ops_keep_order() {
        let mut pages = Pages::default();
        let ids: Vec<u32> = (0..4).map(|_| pages.alloc(0).0).collect();
        let mut l = List::default();
        for &i in &ids {
            l.push_head(&mut pages, i);
        }
        // head: 3 2 1 0 :tail
        l.remove(&mut pages, ids[2]);
        l.push_tail(&mut pages, ids[2]);
        let mut out = Vec::new();
        while let Some(i) = l.pop_tail(&mut pages) {
            out.push(i);
        }
        assert_eq!(out, vec![2, 0, 1, 3]);
        assert_eq!(l.len, 0);
        assert_eq!((l.head, l.tail), (NIL, NIL));
    }

    #[test]
    fn placed_identities_never_go_to_alloc() {
        let mut pages = Pages::default();
        pages.reserve(4);
        pages.alloc_at(1, 0);
        pages.alloc_at(2, 0);
        let a = pages.alloc(0).0;
        assert_eq!(a, 4, "alloc appends past the reserved identities");
        pages.release(PageId(1));
        pages.release(PageId(a));
        // The freed allocated identity comes back; the freed placed one does not.
        assert_eq!(pages.alloc(0).0, a);
        assert_eq!(pages.alloc(0).0, 5);
        pages.alloc_at(1, 0);
        assert!(pages.has(1, f::LIVE));
    }
}
