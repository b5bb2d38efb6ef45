// SPDX-License-Identifier: MIT
//! Page records: one 16-byte record per page identity the front created, in one vector indexed
//! by `PageId`, with the LRU links inside (intrusive lists, no allocation per page move).

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
}

/// One page identity. `slot` is its swap slot (0 = none; slot 0 is the swap header and never
/// allocated): with `PRESENT` the folio is in the swap cache, without it the data is out.
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
    #[inline]
    pub fn set(&mut self, bits: u16) {
        self.flags |= bits;
    }
    #[inline]
    pub fn clear(&mut self, bits: u16) {
        self.flags &= !bits;
    }
    /// Test and clear.
    #[inline]
    pub fn take(&mut self, bits: u16) -> bool {
        let had = self.flags & bits != 0;
        self.flags &= !bits;
        had
    }
}

/// All page records and the free list of identities.
#[derive(Default)]
pub(crate) struct Pages {
    pub v: Vec<Page>,
    free: Vec<u32>,
}

impl Pages {
    pub fn alloc(&mut self, cg: u16) -> PageId {
        let p = Page {
            prev: NIL,
            next: NIL,
            slot: 0,
            cg,
            flags: f::LIVE,
        };
        if let Some(i) = self.free.pop() {
            self.v[i as usize] = p;
            PageId(i)
        } else {
            self.v.push(p);
            PageId(self.v.len() as u32 - 1)
        }
    }

    pub fn release(&mut self, id: PageId) {
        self.v[id.0 as usize].flags = 0;
        self.free.push(id.0);
    }

    #[inline]
    pub fn get(&self, id: u32) -> &Page {
        &self.v[id as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, id: u32) -> &mut Page {
        &mut self.v[id as usize]
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
            let p = pages.get_mut(id);
            p.prev = NIL;
            p.next = old;
        }
        if old == NIL {
            self.tail = id;
        } else {
            pages.get_mut(old).prev = id;
        }
        self.head = id;
        self.len += 1;
    }

    pub fn push_tail(&mut self, pages: &mut Pages, id: u32) {
        let old = self.tail;
        {
            let p = pages.get_mut(id);
            p.next = NIL;
            p.prev = old;
        }
        if old == NIL {
            self.head = id;
        } else {
            pages.get_mut(old).next = id;
        }
        self.tail = id;
        self.len += 1;
    }

    pub fn remove(&mut self, pages: &mut Pages, id: u32) {
        let (prev, next) = {
            let p = pages.get(id);
            (p.prev, p.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            pages.get_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            pages.get_mut(next).prev = prev;
        }
        let p = pages.get_mut(id);
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
}
