// SPDX-License-Identifier: MIT
//! The fault path: `do_anonymous_page` (zero page on read, a new page on write),
//! `do_swap_page` (swap-cache hit, or swap-in with cluster readahead through
//! `__read_swap_cache_async`), and what happens to the slot after mapping.

use crate::page::{f, NIL};
use crate::{Error, Fault, Front, MemCg, Mm, PageId, ReadIn};

impl Mm {
    pub(crate) fn fault<F: Front>(
        &mut self,
        id: u32,
        write: bool,
        front: &mut F,
    ) -> Result<Fault, Error> {
        let p = self.pages.get(id);
        if !write && p.has(f::ZERO_MAPPED) {
            self.pages.set(id, f::YOUNG);
            return Ok(Fault::None);
        }
        let cg = p.cg;
        self.st.pgfault += 1;
        self.cgs[cg as usize].ev.pgfault += 1;
        if p.has(f::PRESENT) {
            return Ok(self.swapcache_hit(id, write, front));
        }
        if p.slot == 0 {
            return self.anon_fault(id, cg, write, front);
        }
        self.st.pgmajfault += 1;
        self.cgs[cg as usize].ev.pgmajfault += 1;
        let how = self.swapin(id, p.slot, front)?;
        self.map_swapped_in(id, write, front);
        Ok(Fault::Major(how))
    }

    /// `do_anonymous_page` for page `id` of `cg`, which has no data anywhere (never written,
    /// or zero-mapped): the zero page on a read, a new charged page on a write.
    #[inline]
    pub(crate) fn anon_fault<F: Front>(
        &mut self,
        id: u32,
        cg: u16,
        write: bool,
        front: &mut F,
    ) -> Result<Fault, Error> {
        if !write {
            self.pages.set(id, f::ZERO_MAPPED | f::YOUNG);
            return Ok(Fault::ZeroMap);
        }
        self.try_charge(cg, 1, front)?;
        let mut pg = self.pages.get_mut(id);
        pg.clear(f::ZERO_MAPPED);
        pg.set(f::PRESENT | f::MAPPED | f::YOUNG | f::DIRTY);
        self.st.resident_pages += 1;
        // A new anon folio starts on the inactive list ("mm: workingset: detect anon
        // refaults" and "mm/vmscan: make active/inactive ratio as 1:1 for anon lru", 5.9).
        // (`lru_add` without its lookups: the cgroup is known, and a page with no data is on
        // no list and not active.)
        self.cgs[cg as usize]
            .inactive
            .push_head(&mut self.pages, id);
        self.sub_lru(cg, false, 1);
        Ok(Fault::Anon)
    }

    /// A fault on a page whose folio is still in the swap cache (readahead, or a page reclaim
    /// unmapped but has not freed yet): map it; a readahead folio counts a readahead hit.
    fn swapcache_hit<F: Front>(&mut self, id: u32, write: bool, front: &mut F) -> Fault {
        if self.pages.take(id, f::READAHEAD) {
            self.st.swap_ra_hit += 1;
            self.ra.hits += 1;
        }
        self.map_swapped_in(id, write, front);
        Fault::SwapCache
    }

    /// Map a swap-cache folio, then `should_try_to_free_swap`: the slot is freed on a write
    /// fault (the page is exclusive and about to be dirtied) or when swap is more than half
    /// full; otherwise the folio keeps its slot and, if clean, can be dropped without I/O later.
    fn map_swapped_in<F: Front>(&mut self, id: u32, write: bool, front: &mut F) {
        let mut p = self.pages.get_mut(id);
        p.set(f::MAPPED | f::YOUNG);
        if write {
            p.set(f::DIRTY);
        }
        if write || self.swap.full() {
            self.free_swap_cache(id, front);
        }
    }

    /// `folio_free_swap`: the present page gives up its slot and becomes dirty (its only copy
    /// is now in memory).
    pub(crate) fn free_swap_cache<F: Front>(&mut self, id: u32, front: &mut F) {
        if self.pages.slot(id) != 0 {
            self.free_slot(id, front);
            self.pages.set(id, f::DIRTY);
        }
    }

    /// `swapin_readahead` on a rotational device: read the aligned window of slots around the
    /// fault, then make sure the faulting page itself is in (reclaim run by a readahead page's
    /// charge may have taken it back out). Returns where the faulting page's data came from.
    fn swapin<F: Front>(&mut self, id: u32, slot: u32, front: &mut F) -> Result<ReadIn, Error> {
        let mut got = None;
        if self.cfg.readahead {
            let win = self.ra.window(slot, 1 << self.cfg.page_cluster);
            if win > 1 {
                let mask = win - 1;
                let start = (slot & !mask).max(1);
                let end = (slot | mask).min(self.swap.nr_slots() - 1);
                for off in start..=end {
                    if off == slot {
                        got = self.read_slot(off, false, front)?;
                    } else {
                        // Readahead is best effort: a page that can't be charged or read is
                        // simply not read ahead.
                        let _ = self.read_slot(off, true, front);
                    }
                }
            }
        }
        if !self.pages.has(id, f::PRESENT) {
            let slot = self.pages.slot(id);
            got = self.read_slot(slot, false, front)?;
        }
        got.ok_or_else(|| Error::Front(format!("swap-in of slot {slot}: the slot has no owner")))
    }

    /// `__read_swap_cache_async` + `swap_read_folio` for one slot: nothing if the slot is free
    /// or its page already in memory; else charge the owner's cgroup (which may reclaim), run
    /// `workingset_refault` with the slot's shadow, add the folio to the LRU (active if the
    /// refault was recent) and read the data through the front.
    fn read_slot<F: Front>(
        &mut self,
        off: u32,
        readahead: bool,
        front: &mut F,
    ) -> Result<Option<ReadIn>, Error> {
        let owner = self.swap.owners[off as usize];
        if owner == NIL || self.pages.has(owner, f::PRESENT) {
            return Ok(None);
        }
        let cg = self.pages.cg(owner);
        self.try_charge(cg, 1, front)?;
        // Reclaim never frees the slot of a page that is out, nor reads pages in; checked
        // anyway, since the charge ran front code.
        if self.swap.owners[off as usize] != owner || self.pages.has(owner, f::PRESENT) {
            self.uncharge(cg, 1);
            return Ok(None);
        }
        let shadow = std::mem::take(&mut self.swap.shadows[off as usize]);
        let active = shadow != 0 && self.refault(owner, shadow);
        {
            let mut p = self.pages.get_mut(owner);
            p.clear(f::YOUNG | f::REFERENCED | f::MAPPED | f::ZERO_MAPPED | f::DIRTY);
            p.set(f::PRESENT);
            if readahead {
                p.set(f::READAHEAD);
            }
        }
        self.st.resident_pages += 1;
        self.lru_add(owner, active, false);
        match front.swap_in(PageId(owner), off, MemCg(cg)) {
            Ok(how) => {
                if how == ReadIn::Zswap {
                    // zswap_load is exclusive: the entry is gone, the folio is the only copy.
                    self.pages.set(owner, f::DIRTY);
                }
                if readahead {
                    self.st.swap_ra += 1;
                }
                Ok(Some(how))
            }
            Err(e) => {
                // The folio never became uptodate: it is dropped again.
                self.lru_del(owner);
                let mut p = self.pages.get_mut(owner);
                p.clear(f::PRESENT | f::READAHEAD | f::ACTIVE | f::WORKINGSET);
                self.st.resident_pages -= 1;
                self.uncharge(cg, 1);
                self.swap.shadows[off as usize] = shadow;
                Err(e)
            }
        }
    }
}
