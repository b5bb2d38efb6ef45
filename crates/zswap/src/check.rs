// SPDX-License-Identifier: MIT
//! The cache's invariant checker (tests, at quiescent points): what the structures hold must
//! agree with itself, with the counters and with the pools.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::OnceLock;

use uzswap_zsmalloc::Handle;

use crate::cache::Zswap;
use crate::index::{Entry, SlotValue, SHARD_SHIFT};
use crate::lru::unpack_slot;
use crate::params::LruMode;
use crate::stats::{C, G};
use crate::{SwapSlot, MAX_POOLS, PAGE_SIZE};

impl Zswap {
    /// Checks the cache's invariants; returns a description of the first violation. For tests,
    /// on a quiescent cache: no call in flight on other threads and the shrink worker idle
    /// ([`Zswap::wait_shrink_idle`]). Costs a pass over every slot, LRU node and pool object.
    ///
    /// Checked:
    /// - the index: every slot word names the entry at its own index of its shard's table, the
    ///   other cells are free, no slot is in flight (`LOADING` / `WRITEBACK`), no thread waits,
    ///   a slot on disk names a cgroup that exists; a zero entry (`Params::zero_page_entries`)
    ///   has length 0, no handle, no LRU node and no second-chance bit;
    /// - the LRU: every pool entry is on exactly one list, the one of its cgroup and lane (its
    ///   node's list, or with `LruMode::PerPool` its pool's list for that node), at the node
    ///   index it records; every list node belongs to an entry; the lists' links and lengths
    ///   are sound;
    /// - the counters: `stored_pages` (pool and zero entries), `same_filled_pages` (zero
    ///   entries), zero pages and incompressible pages equal what the index holds; each cgroup's
    ///   charge (`zswap` bytes, `zswapped` pages) equals the entries of the cgroup and its
    ///   descendants (charges are hierarchical; a zero entry is a page of 0 bytes);
    /// - the pools: each pool entry's pool is live and its handle names an object at least as
    ///   long as the entry; each pool holds exactly one object per entry, its references are its
    ///   entries plus the base reference while it is current (zero entries hold none), and
    ///   zsmalloc's own checker passes;
    /// - the pool limit: the pools exceed `max_pool_pages` by at most one zspage (`chain_size`
    ///   pages), since a store checks the limit before it allocates, as `zswap_store` does;
    ///   after stores from several threads at once use
    ///   [`Zswap::check_invariants_after_concurrent_stores`]. Not checked while a lowered limit
    ///   has not been reached yet.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_invariants_after_concurrent_stores(1)
    }

    /// [`Zswap::check_invariants`] after up to `store_threads` threads stored at once: the pool
    /// limit may then be exceeded by one zspage per thread.
    pub fn check_invariants_after_concurrent_stores(
        &self,
        store_threads: usize,
    ) -> Result<(), String> {
        let i = &self.inner;
        // The index.
        let mut entries: Vec<(SwapSlot, Entry)> = Vec::new();
        let mut zero_entries: Vec<(SwapSlot, Entry)> = Vec::new();
        let (mut zero, mut raw) = (0u64, 0u64);
        for (a, cell) in i.areas.iter().enumerate() {
            let Some(area) = OnceLock::get(cell) else {
                continue;
            };
            for (si, shard) in area.index.shards.iter().enumerate() {
                let t = shard.table.lock();
                if t.waiters != 0 {
                    return Err(format!("area {a} shard {si}: {} waiters", t.waiters));
                }
                let held = t.check().map_err(|m| format!("area {a} shard {si}: {m}"))?;
                for (idx, w, e) in held {
                    let slot = SwapSlot::new(a as u32, ((si << SHARD_SHIFT) | idx) as u64);
                    if w.busy() {
                        return Err(format!("slot {slot} is in flight"));
                    }
                    match (w.value(), e) {
                        (SlotValue::Zero, _) => zero += 1,
                        (SlotValue::Entry(_), Some(e)) => {
                            raw += u64::from(usize::from(e.length) == PAGE_SIZE);
                            entries.push((slot, e));
                        }
                        (SlotValue::ZeroEntry(_), Some(e)) => {
                            if e != (Entry {
                                cgroup: e.cgroup,
                                ..Entry::default()
                            }) {
                                return Err(format!("slot {slot}: zero entry {e:?}"));
                            }
                            zero_entries.push((slot, e));
                        }
                        (SlotValue::OnDisk(owner), _) => {
                            if i.cgroups.get(owner).is_none() {
                                return Err(format!(
                                    "slot {slot} on disk for unknown cgroup {owner}"
                                ));
                            }
                        }
                        (v, e) => return Err(format!("slot {slot}: value {v:?} with entry {e:?}")),
                    }
                }
            }
        }

        // The counters.
        let gauge = |g: G| i.stats.sum(g as usize);
        let expect = [
            (
                "stored_pages",
                G::StoredPages,
                (entries.len() + zero_entries.len()) as u64,
            ),
            (
                "same_filled_pages",
                G::SameFilledPages,
                zero_entries.len() as u64,
            ),
            ("zero pages", G::ZeroPages, zero),
            ("incompressible pages", G::StoredIncompressiblePages, raw),
        ];
        for (name, g, want) in expect {
            if gauge(g) != want {
                return Err(format!(
                    "{name}: counter {}, the index holds {want}",
                    gauge(g)
                ));
            }
        }

        // The LRU lists: one per lane (a node, or with per-pool lists a (pool slot, node)).
        let lanes = match i.lru_mode() {
            LruMode::Global => i.nodes,
            LruMode::PerPool => i.pools.lane_base(MAX_POOLS as u16),
        };
        let mut listed: HashMap<SwapSlot, (u32, usize, u32)> = HashMap::new();
        let ids = i.cgroups.id_limit();
        for id in 0..ids {
            let Some(c) = i.cgroups.get(id) else {
                continue;
            };
            if c.lists.len() != lanes {
                return Err(format!(
                    "cgroup {id}: {} LRU lists, {lanes} lanes",
                    c.lists.len()
                ));
            }
            for (lane, l) in c.lists.iter().enumerate() {
                let nodes = l
                    .check()
                    .map_err(|m| format!("cgroup {id} lane {lane} LRU: {m}"))?;
                for (idx, key) in nodes {
                    let slot = unpack_slot(key);
                    if let Some(other) = listed.insert(slot, (id, lane, idx)) {
                        return Err(format!(
                            "slot {slot} is on two LRU lists: (cgroup, lane, index) {other:?} and {:?}",
                            (id, lane, idx)
                        ));
                    }
                }
            }
        }
        if listed.len() != entries.len() {
            return Err(format!(
                "{} LRU nodes for {} entries",
                listed.len(),
                entries.len()
            ));
        }
        for (slot, e) in &entries {
            if usize::from(e.node) >= i.nodes {
                return Err(format!("slot {slot}: node {} of {}", e.node, i.nodes));
            }
            let want = (u32::from(e.cgroup), i.entry_lane(e), e.lru);
            if listed.get(slot) != Some(&want) {
                return Err(format!(
                    "slot {slot}: entry says (cgroup, lane, index) {want:?}, the lists {:?}",
                    listed.get(slot)
                ));
            }
        }

        // Charges, hierarchical.
        let mut charged = vec![(0u64, 0u64); ids as usize];
        for (slot, e) in entries.iter().chain(&zero_entries) {
            let mut cur = Some(u32::from(e.cgroup));
            while let Some(id) = cur {
                let c = i
                    .cgroups
                    .get(id)
                    .ok_or_else(|| format!("slot {slot}: charged to unknown cgroup {id}"))?;
                let ch = &mut charged[id as usize];
                ch.0 += u64::from(e.length);
                ch.1 += 1;
                cur = c.parent();
            }
        }
        for id in 0..ids {
            let Some(c) = i.cgroups.get(id) else {
                continue;
            };
            let got = (
                c.stats.sum(C::ZswapBytes as usize),
                c.stats.sum(C::Zswapped as usize),
            );
            if got != charged[id as usize] {
                return Err(format!(
                    "cgroup {id}: charge (bytes, pages) {got:?}, its entries {:?}",
                    charged[id as usize]
                ));
            }
        }

        // The pools.
        let live = i.pools.live();
        let current = i.pools.current();
        let mut per_pool: HashMap<u16, u64> = HashMap::new();
        for (slot, e) in &entries {
            let pool = live
                .iter()
                .find(|p| p.id == e.pool)
                .ok_or_else(|| format!("slot {slot}: entry names pool {} that is gone", e.pool))?;
            let h = Handle::from_raw(e.handle).ok_or_else(|| format!("slot {slot}: no handle"))?;
            let cap = pool
                .zs
                .capacity(h)
                .map_err(|err| format!("slot {slot}: handle rejected by its pool: {err}"))?;
            if cap < usize::from(e.length) {
                return Err(format!(
                    "slot {slot}: object of {cap} bytes, entry {}",
                    e.length
                ));
            }
            *per_pool.entry(e.pool).or_default() += 1;
        }
        let mut max_chain = 0;
        for p in &live {
            let n = per_pool.get(&p.id).copied().unwrap_or(0);
            let objects: usize = p.zs.stats().classes.iter().map(|c| c.obj_used).sum();
            if objects as u64 != n {
                return Err(format!("pool {}: {objects} objects for {n} entries", p.id));
            }
            let base = u64::from(p.id == current.id && !p.refs.is_killed());
            let refs = p.refs.count();
            if refs != (n + base) as i64 {
                return Err(format!(
                    "pool {}: {refs} references for {n} entries + {base} base",
                    p.id
                ));
            }
            p.zs.check_invariants()
                .map_err(|m| format!("pool {}: {m}", p.id))?;
            max_chain = max_chain.max(p.chain_size as u64);
        }

        // The pool limit.
        let total = i.pools.total_pages();
        let max = i.hot.max_pages.load(Relaxed);
        if i.limit_lowered.load(Relaxed) && total <= max {
            i.limit_lowered.store(false, Relaxed);
        }
        let slack = max_chain * store_threads.max(1) as u64;
        if !i.limit_lowered.load(Relaxed) && total > max + slack {
            return Err(format!(
                "the pools hold {total} pages, over the limit of {max} by more than {slack}"
            ));
        }
        Ok(())
    }
}
