// SPDX-License-Identifier: MIT
//! Memcg reclaim as mm/vmscan.c does it without MGLRU: `try_to_free_mem_cgroup_pages` →
//! `do_try_to_free_pages` (priorities 12..0, stop once the cumulative reclaim reaches the
//! target) → `shrink_node` (`prepare_scan_control`, then a partial walk of the target's
//! subtree) → `shrink_lruvec` (`get_scan_count`, 32-page batches) → `shrink_inactive_list` /
//! `shrink_active_list` → `shrink_folio_list` (`folio_check_references`, swap slot, unmap,
//! `pageout`, `__remove_mapping` with a workingset shadow).

use crate::cgroup::inactive_is_low;
use crate::page::f;
use crate::{
    pack_shadow, Accounting, Front, MemCg, Mm, PageId, WriteOut, DEF_PRIORITY, SWAP_CLUSTER_MAX,
};

/// `struct scan_control`, the parts memcg reclaim uses.
struct Scan {
    target: u16,
    nr_to_reclaim: u64,
    nr_reclaimed: u64,
    priority: u32,
    may_swap: bool,
    may_deactivate: bool,
    force_deactivate: bool,
    skipped_deactivate: bool,
    full_walk: bool,
    anon_cost: u64,
    file_cost: u64,
}

/// What `shrink_folio_list` did with one folio.
enum Verdict {
    Freed,
    /// Back to the inactive list: at the head (referenced once), or at the tail (written to
    /// the device: `folio_rotate_reclaimable` once the write completes).
    Keep {
        tail: bool,
    },
    Activate,
}

impl Mm {
    /// `try_to_free_mem_cgroup_pages(memcg, nr, ..)`: reclaim at least `max(nr, 32)` pages from
    /// `cg`'s subtree if it can. Returns pages reclaimed.
    pub(crate) fn try_to_free<F: Front>(
        &mut self,
        cg: u16,
        nr: u64,
        may_swap: bool,
        front: &mut F,
    ) -> u64 {
        self.try_to_free_inner(cg, nr, may_swap, false, front)
    }

    pub(crate) fn try_to_free_inner<F: Front>(
        &mut self,
        cg: u16,
        nr: u64,
        may_swap: bool,
        _proactive: bool,
        front: &mut F,
    ) -> u64 {
        self.st.reclaim_runs += 1;
        self.cgs[cg as usize].ev.reclaim_runs += 1;
        let mut sc = Scan {
            target: cg,
            nr_to_reclaim: nr.max(SWAP_CLUSTER_MAX),
            nr_reclaimed: 0,
            priority: DEF_PRIORITY,
            may_swap,
            may_deactivate: false,
            force_deactivate: false,
            skipped_deactivate: false,
            full_walk: false,
            anon_cost: 0,
            file_cost: 0,
        };
        loop {
            loop {
                self.shrink_node(&mut sc, front);
                if sc.nr_reclaimed >= sc.nr_to_reclaim || sc.priority == 0 {
                    break;
                }
                sc.priority -= 1;
            }
            // snapshot_refaults: the next reclaim deactivates only if refaults happen since.
            let activations = self.rstat(cg).2;
            self.cgs[cg as usize].refaults_snapshot = activations;
            if sc.nr_reclaimed > 0 {
                return sc.nr_reclaimed;
            }
            if !sc.full_walk {
                sc.full_walk = true;
                sc.priority = DEF_PRIORITY;
                continue;
            }
            if sc.skipped_deactivate {
                sc.priority = DEF_PRIORITY;
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            return 0;
        }
    }

    /// The target's subtree in pre-order (the order of `mem_cgroup_iter`).
    fn subtree(&self, root: u16, out: &mut Vec<u16>) {
        out.push(root);
        for &k in &self.cgs[root as usize].children {
            if self.cgs[k as usize].online {
                self.subtree(k, out);
            }
        }
    }

    fn shrink_node<F: Front>(&mut self, sc: &mut Scan, front: &mut F) {
        // prepare_scan_control
        let (inact, act, activations) = self.rstat(sc.target);
        let t = &self.cgs[sc.target as usize];
        sc.anon_cost = t.anon_cost;
        sc.file_cost = t.file_cost;
        sc.may_deactivate = sc.force_deactivate
            || activations != t.refaults_snapshot
            || inactive_is_low(inact, act);
        // shrink_node_memcgs: a partial walk continues where the last one for this target
        // stopped; a full walk (the retry before giving up) covers the whole subtree.
        let leaf = t.children.is_empty();
        let walk: Vec<u16> = if leaf {
            vec![sc.target]
        } else {
            let mut v = Vec::new();
            self.subtree(sc.target, &mut v);
            v
        };
        let partial = !sc.full_walk;
        let start = if partial {
            let p = self.cgs[sc.target as usize].iter_pos;
            if p >= walk.len() {
                0
            } else {
                p
            }
        } else {
            0
        };
        for (i, &m) in walk.iter().enumerate().skip(start) {
            self.shrink_lruvec(m, sc, front);
            if self.cfg.accounting == Accounting::V2 {
                front.shrink_slab(MemCg(m), sc.priority);
            }
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                self.cgs[sc.target as usize].iter_pos = i + 1;
                return;
            }
        }
        if partial {
            self.cgs[sc.target as usize].iter_pos = 0;
        }
    }

    /// `get_scan_count` for anon: `size >> priority` per list, times anon's share of the
    /// pressure (swappiness against the recorded reclaim costs) above priority 0.
    fn scan_count(&self, m: u16, sc: &Scan) -> (u64, u64) {
        let c = &self.cgs[m as usize];
        if !sc.may_swap || self.swap.used >= self.swap.total || c.swappiness == 0 {
            return (0, 0);
        }
        let (ia, aa) = (c.inactive.len >> sc.priority, c.active.len >> sc.priority);
        if sc.priority == 0 {
            return (ia, aa);
        }
        let sw = u64::from(c.swappiness);
        let total = sc.anon_cost + sc.file_cost;
        let anon = total + sc.anon_cost;
        let file = total + sc.file_cost;
        let total = anon + file;
        let ap = sw * (total + 1) / (anon + 1);
        let fp = (200 - sw) * (total + 1) / (file + 1);
        let den = ap + fp;
        (ia * ap / den, aa * ap / den)
    }

    fn shrink_lruvec<F: Front>(&mut self, m: u16, sc: &mut Scan, front: &mut F) {
        let (ia, aa) = self.scan_count(m, sc);
        let mut nr = [ia, aa];
        let mut reclaimed = 0;
        // With no file pages the loop runs while inactive anon has a target, and stops once
        // this lruvec reclaimed the whole goal (the smaller type, file, has nothing left).
        while nr[0] > 0 {
            let n = nr[0].min(SWAP_CLUSTER_MAX);
            nr[0] -= n;
            reclaimed += self.shrink_inactive_list(n, m, sc, front);
            if nr[1] > 0 {
                let n = nr[1].min(SWAP_CLUSTER_MAX);
                nr[1] -= n;
                if sc.may_deactivate {
                    self.shrink_active_list(n, m);
                } else {
                    sc.skipped_deactivate = true;
                }
            }
            if reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
        sc.nr_reclaimed += reclaimed;
        // Keep the inactive:active ratio even if nothing was reclaimed here.
        let (inact, act, _) = self.rstat(m);
        if inactive_is_low(inact, act) {
            self.shrink_active_list(SWAP_CLUSTER_MAX, m);
        }
    }

    /// `shrink_active_list` for anon: every folio taken is deactivated (anon is never rotated
    /// on the active list), its accessed bit cleared and PG_workingset set.
    fn shrink_active_list(&mut self, n: u64, m: u16) {
        let mut taken = 0;
        let mut iso = std::mem::take(&mut self.iso);
        iso.clear();
        while taken < n {
            let Some(id) = self.cgs[m as usize].active.pop_tail(&mut self.pages) else {
                break;
            };
            iso.push(id);
            taken += 1;
        }
        self.sub_lru(m, true, -(taken as i64));
        for &id in &iso {
            let mut p = self.pages.get_mut(id);
            p.clear(f::YOUNG);
            p.set(f::WORKINGSET);
            self.lru_add(id, false, false);
        }
        self.st.pgrefill += taken;
        self.st.pgdeactivate += taken;
        let ev = &mut self.cgs[m as usize].ev;
        ev.pgrefill += taken;
        ev.pgdeactivate += taken;
        self.iso = iso;
    }

    fn shrink_inactive_list<F: Front>(
        &mut self,
        n: u64,
        m: u16,
        sc: &mut Scan,
        front: &mut F,
    ) -> u64 {
        let mut iso = std::mem::take(&mut self.iso);
        iso.clear();
        while (iso.len() as u64) < n {
            let Some(id) = self.cgs[m as usize].inactive.pop_tail(&mut self.pages) else {
                break;
            };
            self.pages.set(id, f::ISOLATED);
            iso.push(id);
        }
        let taken = iso.len() as u64;
        self.sub_lru(m, false, -(taken as i64));
        if taken == 0 {
            self.iso = iso;
            return 0;
        }
        self.st.pgscan_anon += taken;
        self.cgs[m as usize].ev.pgscan += taken;
        let mut reclaimed = 0;
        let mut pageouts = 0;
        let mut activated = 0;
        for &id in &iso {
            let (v, wrote) = self.shrink_folio(id, sc, front);
            pageouts += u64::from(wrote);
            self.pages.clear(id, f::ISOLATED);
            match v {
                Verdict::Freed => reclaimed += 1,
                Verdict::Keep { tail } => self.lru_add(id, false, tail),
                Verdict::Activate => {
                    activated += 1;
                    self.lru_add(id, true, false);
                    // move_folios_to_lru ages the workingset clock for active putbacks.
                    self.age_nonresident(m, 1);
                }
            }
        }
        self.iso = iso;
        self.st.pgsteal_anon += reclaimed;
        self.st.pgactivate += activated;
        let ev = &mut self.cgs[m as usize].ev;
        ev.pgsteal += reclaimed;
        ev.pgactivate += activated;
        // lru_note_cost: pageouts (zswap stores included) cost I/O, the rest rotations.
        self.note_cost(m, pageouts, taken - reclaimed);
        reclaimed
    }

    /// `shrink_folio_list` for one isolated anon folio. Returns the verdict and whether the
    /// folio was written out (`nr_pageout`).
    fn shrink_folio<F: Front>(&mut self, id: u32, sc: &Scan, front: &mut F) -> (Verdict, bool) {
        let mut p = self.pages.get_mut(id);
        // folio_check_references: young PTEs (only a mapped folio has one), then PG_referenced.
        let young = p.has(f::MAPPED) && p.take(f::YOUNG);
        let referenced = p.take(f::REFERENCED);
        if young {
            p.set(f::REFERENCED);
            return (
                if referenced {
                    self.activate(id, front)
                } else {
                    Verdict::Keep { tail: false }
                },
                false,
            );
        }
        // Reclaim: a slot (folio_alloc_swap), always dirty when newly in the swap cache.
        if p.rec.slot == 0 {
            match self.swap.alloc(id) {
                Some(s) => {
                    self.pages.set_slot(id, s);
                    self.pages.set(id, f::DIRTY);
                }
                None => return (self.activate(id, front), false),
            }
        }
        let mut p = self.pages.get_mut(id);
        p.clear(f::MAPPED | f::YOUNG);
        let (slot, cg) = (p.rec.slot, p.rec.cg);
        let mut wrote = false;
        if p.has(f::DIRTY) {
            wrote = true;
            self.st.pageout += 1;
            match front.swap_out(PageId(id), slot, MemCg(cg)) {
                Ok(WriteOut::Zswap | WriteOut::Zero) => self.pages.clear(id, f::DIRTY),
                Ok(WriteOut::Disk) => {
                    // Under writeback: kept now, rotated to the tail when the write completes,
                    // freed by the next scan that reaches it.
                    self.pages.clear(id, f::DIRTY);
                    return (Verdict::Keep { tail: true }, true);
                }
                Ok(WriteOut::Refused) => return (self.activate(id, front), true),
                Err(e) => {
                    self.front_errors += 1;
                    self.last_front_error.get_or_insert(e);
                    return (self.activate(id, front), true);
                }
            }
        } else {
            self.st.clean_drops += 1;
        }
        // __remove_mapping: leave a shadow (workingset_eviction, stamped with the reclaim
        // target's clock), free the folio.
        let ws = self.pages.has(id, f::WORKINGSET);
        let age = self.cgs[sc.target as usize].nonresident_age;
        self.age_nonresident(sc.target, 1);
        self.swap.shadows[slot as usize] = pack_shadow(sc.target, age, ws);
        let mut p = self.pages.get_mut(id);
        p.clear(
            f::PRESENT
                | f::ACTIVE
                | f::REFERENCED
                | f::YOUNG
                | f::READAHEAD
                | f::DIRTY
                | f::WORKINGSET,
        );
        self.uncharge(cg, 1);
        self.st.resident_pages -= 1;
        front.release(PageId(id));
        (Verdict::Freed, wrote)
    }

    /// `activate_locked`: a swap-cache folio gives its slot back when swap is more than half
    /// full.
    fn activate<F: Front>(&mut self, id: u32, front: &mut F) -> Verdict {
        if self.swap.full() {
            self.free_swap_cache(id, front);
        }
        Verdict::Activate
    }
}
