// SPDX-License-Identifier: MIT
//! The swap area as the kernel's swap layer sees it: which page holds each slot, the shadow
//! entry a reclaimed page leaves in its slot, the slot allocator, and swap readahead's state.
//!
//! **Slot allocation** follows the rotational-device path of `cluster_alloc_swap_entry`
//! ("mm: swap: new cluster allocator", 6.11, and its 6.18 successors): one cursor for the whole
//! device walks a 512-slot cluster; when the cluster is used up it takes the first cluster of
//! the non-full list (clusters where slots were freed), else the first free cluster, else one
//! fragmented cluster. Slots are therefore nearly sequential in eviction order, which is what
//! makes cluster readahead read neighbours evicted together.
//!
//! **Readahead window** (`__swapin_nr_pages`, mm/swap_state.c): 2 if the fault is next to the
//! previous one, else 1; with h readahead hits since, h + 2 rounded up to a power of two (at
//! least 4); at most `1 << page_cluster`; never below half the previous window. The state is
//! global, as in the kernel.

use crate::page::NIL;

/// Slots per cluster (SWAPFILE_CLUSTER).
pub const CLUSTER: u32 = 512;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lst {
    Free,
    Nonfull,
    Frag,
    Full,
}

#[derive(Clone, Copy)]
struct Cluster {
    count: u32,
    list: Lst,
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy, Default)]
struct CList {
    head: u32,
    tail: u32,
}

/// Per slot: its owner page (`NIL` when free) and, apart (so that the allocator's scans
/// read 4 bytes a slot), the shadow left by the page's last eviction (0 = none).
pub(crate) struct SwapArea {
    pub owners: Vec<u32>,
    pub shadows: Vec<u64>,
    clusters: Vec<Cluster>,
    lists: [CList; 4],
    /// `global_cluster->next`: where the cursor continues (0 = none).
    next: u32,
    /// Allocatable slots (all but the header).
    pub total: u64,
    pub used: u64,
}

impl SwapArea {
    /// An area of `nr_slots` slots (rounded down to whole clusters; slot 0 is the header).
    pub fn new(nr_slots: u32) -> SwapArea {
        let nr_clusters = (nr_slots / CLUSTER).max(1);
        let n = nr_clusters * CLUSTER;
        let mut a = SwapArea {
            owners: vec![NIL; n as usize],
            shadows: vec![0; n as usize],
            clusters: vec![
                Cluster {
                    count: 0,
                    list: Lst::Free,
                    prev: NIL,
                    next: NIL,
                };
                nr_clusters as usize
            ],
            lists: [CList {
                head: NIL,
                tail: NIL,
            }; 4],
            next: 0,
            total: u64::from(n) - 1,
            used: 0,
        };
        // The header occupies slot 0, so cluster 0 starts non-full (setup_clusters).
        a.clusters[0].count = 1;
        a.add_tail(0, Lst::Nonfull);
        for c in 1..nr_clusters {
            a.add_tail(c, Lst::Free);
        }
        a
    }

    pub fn nr_slots(&self) -> u32 {
        self.owners.len() as u32
    }

    /// `vm_swap_full`: less than half the swap space is free.
    pub fn full(&self) -> bool {
        (self.total - self.used) * 2 < self.total
    }

    fn idx(l: Lst) -> usize {
        l as usize
    }

    fn add_tail(&mut self, c: u32, l: Lst) {
        let li = Self::idx(l);
        let old = self.lists[li].tail;
        {
            let cl = &mut self.clusters[c as usize];
            cl.list = l;
            cl.prev = old;
            cl.next = NIL;
        }
        if old == NIL {
            self.lists[li].head = c;
        } else {
            self.clusters[old as usize].next = c;
        }
        self.lists[li].tail = c;
    }

    fn unlink(&mut self, c: u32) {
        let (l, prev, next) = {
            let cl = &self.clusters[c as usize];
            (cl.list, cl.prev, cl.next)
        };
        let li = Self::idx(l);
        if prev == NIL {
            self.lists[li].head = next;
        } else {
            self.clusters[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[li].tail = prev;
        } else {
            self.clusters[next as usize].prev = prev;
        }
    }

    fn move_to(&mut self, c: u32, l: Lst) {
        if self.clusters[c as usize].list == l {
            return;
        }
        self.unlink(c);
        self.add_tail(c, l);
    }

    /// `relocate_cluster` after an allocation attempt.
    fn relocate(&mut self, c: u32) {
        let count = self.clusters[c as usize].count;
        let l = if count == 0 {
            Lst::Free
        } else if count < CLUSTER {
            Lst::Frag
        } else {
            Lst::Full
        };
        self.move_to(c, l);
    }

    /// Scan cluster `c` from `from` for a free slot (`alloc_swap_scan_cluster`).
    fn scan_cluster(&mut self, c: u32, from: u32, owner: u32) -> Option<u32> {
        let end = (c + 1) * CLUSTER;
        let mut found = None;
        let mut next = 0;
        if self.clusters[c as usize].count < CLUSTER {
            for off in from.max(c * CLUSTER)..end {
                if off != 0 && self.owners[off as usize] == NIL {
                    self.owners[off as usize] = owner;
                    self.shadows[off as usize] = 0;
                    self.clusters[c as usize].count += 1;
                    self.used += 1;
                    found = Some(off);
                    if self.clusters[c as usize].count < CLUSTER && off + 1 < end {
                        next = off + 1;
                    }
                    break;
                }
            }
        }
        self.relocate(c);
        self.next = next;
        found
    }

    fn scan_list(&mut self, l: Lst, all: bool, owner: u32) -> Option<u32> {
        loop {
            let c = self.lists[Self::idx(l)].head;
            if c == NIL {
                return None;
            }
            if let Some(s) = self.scan_cluster(c, c * CLUSTER, owner) {
                return Some(s);
            }
            if !all {
                return None;
            }
            // A cluster that yielded nothing was relocated off this list (to full or frag),
            // so the loop makes progress.
            if self.clusters[c as usize].list == l {
                return None;
            }
        }
    }

    /// `folio_alloc_swap` for one page: a slot owned by `owner`, or `None` when swap is full.
    pub fn alloc(&mut self, owner: u32) -> Option<u32> {
        if self.used >= self.total {
            return None;
        }
        if self.next != 0 {
            let c = self.next / CLUSTER;
            let from = if self.clusters[c as usize].count == 0 {
                c * CLUSTER
            } else {
                self.next
            };
            if let Some(s) = self.scan_cluster(c, from, owner) {
                return Some(s);
            }
        }
        self.scan_list(Lst::Nonfull, true, owner)
            .or_else(|| self.scan_list(Lst::Free, false, owner))
            .or_else(|| self.scan_list(Lst::Frag, false, owner))
            .or_else(|| {
                // The kernel steals from other orders' lists; with order-0 only, any cluster
                // with room will do.
                (0..self.clusters.len() as u32)
                    .find(|&c| self.clusters[c as usize].count < CLUSTER)
                    .and_then(|c| self.scan_cluster(c, c * CLUSTER, owner))
            })
    }

    /// Free a slot (`swap_range_free`): its shadow goes with it.
    pub fn free(&mut self, off: u32) {
        debug_assert!(
            self.owners[off as usize] != NIL,
            "double free of slot {off}"
        );
        self.owners[off as usize] = NIL;
        self.shadows[off as usize] = 0;
        self.used -= 1;
        let c = off / CLUSTER;
        self.clusters[c as usize].count -= 1;
        if self.clusters[c as usize].count == 0 {
            self.move_to(c, Lst::Free);
        } else {
            self.move_to(c, Lst::Nonfull);
        }
    }
}

/// Global readahead state (`swapin_nr_pages`).
#[derive(Default, Clone, Copy)]
pub(crate) struct Readahead {
    prev_offset: u32,
    last_pages: u32,
    pub hits: u32,
}

impl Readahead {
    /// The window for a fault at `offset`, with `max_pages = 1 << page_cluster`.
    pub fn window(&mut self, offset: u32, max_pages: u32) -> u32 {
        if max_pages <= 1 {
            return 1;
        }
        let hits = std::mem::take(&mut self.hits);
        let mut pages = hits + 2;
        if pages == 2 {
            if offset != self.prev_offset.wrapping_add(1)
                && offset != self.prev_offset.wrapping_sub(1)
            {
                pages = 1;
            }
        } else {
            let mut roundup = 4;
            while roundup < pages {
                roundup <<= 1;
            }
            pages = roundup;
        }
        pages = pages.min(max_pages);
        pages = pages.max(self.last_pages / 2);
        if hits == 0 {
            self.prev_offset = offset;
        }
        self.last_pages = pages;
        pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_sequential_then_reuse_holes() {
        let mut a = SwapArea::new(4 * CLUSTER);
        let s: Vec<u32> = (0..600).map(|i| a.alloc(i).unwrap()).collect();
        assert_eq!(s[0], 1, "slot 0 is the header");
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "sequential");
        assert_eq!(s[599], 600);
        // Free a few in cluster 0: the cursor continues in cluster 1 until it is used up.
        a.free(5);
        a.free(6);
        assert_eq!(a.alloc(1000), Some(601));
        assert_eq!(a.used, 599);
        assert!(!a.full());
    }

    #[test]
    fn allocation_takes_nonfull_before_free_clusters() {
        let mut a = SwapArea::new(3 * CLUSTER);
        for i in 0..(2 * CLUSTER - 1) {
            a.alloc(i).unwrap();
        }
        // Clusters 0 and 1 are full; punch a hole in cluster 0.
        a.free(10);
        // The cursor is exhausted; the non-full cluster 0 comes before the free cluster 2.
        assert_eq!(a.alloc(7), Some(10));
        assert_eq!(a.alloc(8), Some(2 * CLUSTER));
    }

    #[test]
    fn readahead_window_grows_with_hits_and_decays_slowly() {
        let mut r = Readahead::default();
        assert_eq!(r.window(100, 8), 1, "no hits, not adjacent");
        assert_eq!(r.window(101, 8), 2, "adjacent");
        r.hits = 2;
        assert_eq!(r.window(500, 8), 4);
        r.hits = 5;
        assert_eq!(r.window(900, 8), 8);
        assert_eq!(r.window(2000, 8), 4, "never below half the previous window");
        assert_eq!(r.window(3000, 8), 2);
        assert_eq!(r.window(4000, 8), 1);
    }
}
