// SPDX-License-Identifier: MIT
//! Memory cgroups of the engine: the page counter (usage and limit), the per-cgroup lruvec
//! (inactive and active anon lists, reclaim costs, the workingset clock) and the counters the
//! kernel keeps per memcg.

use serde::Serialize;

use crate::page::List;

/// Per-cgroup event counters (the kernel's memory.stat names), hierarchical where the kernel's
/// are (`workingset_*`, `pg*`: counted on the cgroup that owns the page; reported summed over
/// the subtree by `Mm::cgroup_stats`).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MemcgEvents {
    pub pgfault: u64,
    pub pgmajfault: u64,
    pub pgscan: u64,
    pub pgsteal: u64,
    pub pgactivate: u64,
    pub pgdeactivate: u64,
    pub pgrefill: u64,
    pub workingset_refault_anon: u64,
    pub workingset_activate_anon: u64,
    pub workingset_restore_anon: u64,
    pub workingset_nodereclaim: u64,
    /// Charges that failed and entered reclaim (memory.failcnt / memory.events max).
    pub failcnt: u64,
    /// Reclaim invocations for this cgroup's limit.
    pub reclaim_runs: u64,
    /// Charges that could not be satisfied after every retry (the kernel would OOM-kill).
    pub oom: u64,
}

pub(crate) struct Memcg {
    pub parent: u16,
    pub online: bool,
    pub children: Vec<u16>,
    /// Page counter: resident pages plus kernel memory charged (page tables) plus, in cgroup
    /// v2 accounting, the cgroup's compressed bytes in pages (added at read time).
    pub usage: u64,
    pub limit: Option<u64>,
    pub swappiness: u32,
    pub inactive: List,
    pub active: List,
    /// Subtree sums of the two lists' lengths (lruvec_page_state of a memcg is hierarchical).
    pub sub_inactive: u64,
    pub sub_active: u64,
    /// lruvec->anon_cost / file_cost.
    pub anon_cost: u64,
    pub file_cost: u64,
    /// lruvec->nonresident_age: the workingset clock.
    pub nonresident_age: u64,
    /// WORKINGSET_ACTIVATE_ANON summed over the subtree, and its snapshot at the end of the
    /// last reclaim that targeted this cgroup (`snapshot_refaults`).
    pub sub_activate: u64,
    pub refaults_snapshot: u64,
    /// The subtree figures as of the last rstat flush (`Mm::flush_stats`): what the kernel's
    /// `lruvec_page_state` readers see between flushes (inactive, active, activations).
    pub flushed: [u64; 3],
    /// Where the next partial walk of this subtree starts (the reclaim cookie's position).
    pub iter_pos: usize,
    pub ev: MemcgEvents,
}

impl Memcg {
    pub fn new(parent: u16) -> Memcg {
        Memcg {
            parent,
            online: true,
            children: Vec::new(),
            usage: 0,
            limit: None,
            swappiness: 60,
            inactive: List::default(),
            active: List::default(),
            sub_inactive: 0,
            sub_active: 0,
            anon_cost: 0,
            file_cost: 0,
            nonresident_age: 0,
            sub_activate: 0,
            refaults_snapshot: 0,
            flushed: [0; 3],
            iter_pos: 0,
            ev: MemcgEvents::default(),
        }
    }
}

/// `int_sqrt`.
pub(crate) fn int_sqrt(x: u64) -> u64 {
    if x < 2 {
        return x;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// `inactive_is_low`: the inactive list is short of its target ratio to the active list.
pub(crate) fn inactive_is_low(inactive: u64, active: u64) -> bool {
    let gb = (inactive + active) >> (30 - 12);
    let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
    inactive * ratio < active
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inactive_ratio_follows_the_kernel_table() {
        assert_eq!(int_sqrt(10), 3);
        assert_eq!(int_sqrt(100), 10);
        // Below 1 GiB the lists aim at 1:1.
        assert!(inactive_is_low(99, 100));
        assert!(!inactive_is_low(100, 100));
        // 1 GiB: ratio 3.
        let gb = 1 << 18;
        assert!(!inactive_is_low(gb / 4, gb - gb / 4));
        assert!(inactive_is_low(gb / 5, gb - gb / 5));
    }
}
