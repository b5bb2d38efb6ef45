// SPDX-License-Identifier: MIT
//! Cgroups: the hierarchy, per-cgroup limits and counters, and the per-(cgroup, node) LRU lists.
//!
//! Cgroup records live in fixed chunks (the root allocated with the cache, the rest on demand)
//! that are never freed, so a `&Cgroup` can be handed out without a lock; ids are never reused.
//! A removed cgroup goes offline: its parent *absorbs* its LRU lists (the shrinker walking the
//! parent walks them too, as list_lru reparenting does) and its entries keep their charge, which
//! was made hierarchically and so is already included in every ancestor.
//!
//! Charges and events are hierarchical, as memcg's are: each counts in its cgroup and every
//! ancestor. The root's events (zswpin, zswpout, zswpwb) are not counted twice: they are the
//! global counters, taken at the same sites (`Cgroups::event_on`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

use parking_lot::Mutex;
use serde::Serialize;

use crate::lru::Lru;
use crate::stats::{CgroupCounters, Striped, C, NR_CGROUP};
use crate::{Error, PAGE_SIZE};

/// A cgroup id. `CgroupId::ROOT` always exists.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord, Serialize)]
pub struct CgroupId(pub u32);

impl CgroupId {
    /// The root cgroup.
    pub const ROOT: CgroupId = CgroupId(0);
}

const CHUNK: usize = 64;
const NR_CHUNKS: usize = 256;
/// Most cgroups a cache can ever create (ids are not reused).
pub const MAX_CGROUPS: usize = CHUNK * NR_CHUNKS;
const NO_PARENT: u32 = u32::MAX;
const UNUSED: u8 = 0;
const ONLINE: u8 = 1;
const OFFLINE: u8 = 2;

pub(crate) struct Cgroup {
    state: AtomicU8,
    parent: AtomicU32,
    /// memory.zswap.max in bytes; u64::MAX = "max".
    max_bytes: AtomicU64,
    /// memory.zswap.writeback (this level only; the effective value is hierarchical).
    writeback: AtomicBool,
    pub(crate) stats: Striped<NR_CGROUP>,
    /// The LRU lists, indexed by lane: `LruMode::Global` has one list per NUMA node (lane =
    /// node); `LruMode::PerPool` one per (pool slot, node), lane = slot × nodes + node, the
    /// kernel's per-pool `list_lru` (6.8). An entry's lane is its pool's `lane_base` plus its
    /// node (`lane_base` is 0 with the global LRU), so the free path finds its list the same
    /// way in both modes.
    pub(crate) lists: Box<[Lru]>,
    /// Disk swap-ins not yet consumed by the shrinker's count (second-chance policy), per node.
    pub(crate) disk_swapins: Box<[AtomicU64]>,
    /// The estimate of warm entries of "zswap: shrink zswap pool based on memory pressure"
    /// (6.8), `nr_zswap_protected`, per node (`WarmProtection::ProtectedSize`). It belongs to
    /// the (cgroup, node) lruvec, so with per-pool lists every pool's shrinker shares it.
    pub(crate) protected: Box<[AtomicU64]>,
    /// Offline descendants whose lists this cgroup walks.
    pub(crate) absorbed: Mutex<Vec<u32>>,
}

impl Cgroup {
    fn new(nodes: usize, lanes: usize, clock: Option<&'static AtomicU32>) -> Cgroup {
        Cgroup {
            state: AtomicU8::new(UNUSED),
            parent: AtomicU32::new(NO_PARENT),
            max_bytes: AtomicU64::new(u64::MAX),
            writeback: AtomicBool::new(true),
            stats: Striped::new(),
            lists: (0..lanes).map(|_| Lru::with_clock(clock)).collect(),
            disk_swapins: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            protected: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            absorbed: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn is_online(&self) -> bool {
        self.state.load(Relaxed) == ONLINE
    }

    pub(crate) fn parent(&self) -> Option<u32> {
        let p = self.parent.load(Relaxed);
        (p != NO_PARENT).then_some(p)
    }
}

pub(crate) struct Cgroups {
    /// The root (id 0), allocated with the table: every store and load looks its cgroup up.
    root: Box<Cgroup>,
    /// Ids 1..CHUNK, allocated at the first of them. Most caches never create a cgroup (every
    /// process under `uzswap run` has a cache with the root alone), and building the whole
    /// first chunk up front was 0.2 ms of each process's start there.
    first: OnceLock<Box<[Cgroup]>>,
    /// Ids from CHUNK on (`chunks[c - 1]` holds chunk `c`), each allocated at its first id.
    chunks: Box<[OnceLock<Box<[Cgroup]>>]>,
    nodes: usize,
    /// LRU lists per cgroup (see `Cgroup::lists`).
    lanes: usize,
    /// The sequence every LRU list numbers its entries from, if shared with other caches.
    pub(crate) clock: Option<&'static AtomicU32>,
    /// Serialises creation and removal (not on any hot path).
    admin: Mutex<u32>,
    /// The shrink worker's round-robin cursor (`zswap_next_shrink`): last id visited.
    pub(crate) cursor: Mutex<Option<u32>>,
}

impl Cgroups {
    /// `lanes`: LRU lists per cgroup (`nodes`, or `MAX_POOLS × nodes` for per-pool lists).
    pub(crate) fn new(nodes: usize, lanes: usize, clock: Option<&'static AtomicU32>) -> Cgroups {
        let cg = Cgroups {
            root: Box::new(Cgroup::new(nodes, lanes, clock)),
            first: OnceLock::new(),
            chunks: (1..NR_CHUNKS).map(|_| OnceLock::new()).collect(),
            nodes,
            lanes,
            clock,
            admin: Mutex::new(1),
            cursor: Mutex::new(None),
        };
        let root = cg.slot(0).expect("chunk 0 exists");
        root.state.store(ONLINE, Relaxed);
        cg
    }

    fn slot(&self, id: u32) -> Option<&Cgroup> {
        let (c, i) = (id as usize / CHUNK, id as usize % CHUNK);
        if c == 0 {
            if i == 0 {
                return Some(&self.root);
            }
            let rest = self.first.get_or_init(|| {
                (1..CHUNK)
                    .map(|_| Cgroup::new(self.nodes, self.lanes, self.clock))
                    .collect()
            });
            return Some(&rest[i - 1]);
        }
        let chunk = self.chunks.get(c - 1)?;
        Some(
            &chunk.get_or_init(|| {
                (0..CHUNK)
                    .map(|_| Cgroup::new(self.nodes, self.lanes, self.clock))
                    .collect()
            })[i],
        )
    }

    /// Any cgroup that was ever created (online or offline).
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&Cgroup> {
        let (c, i) = (id as usize / CHUNK, id as usize % CHUNK);
        let cg = match (c, i) {
            (0, 0) => &self.root,
            (0, _) => &self.first.get()?[i - 1],
            _ => &self.chunks.get(c - 1)?.get()?[i],
        };
        (cg.state.load(Relaxed) != UNUSED).then_some(cg)
    }

    /// Number of ids handed out so far (upper bound for walks).
    pub(crate) fn id_limit(&self) -> u32 {
        *self.admin.lock()
    }

    pub(crate) fn create(&self, parent: CgroupId) -> Result<CgroupId, Error> {
        let mut next = self.admin.lock();
        match self.get(parent.0) {
            Some(p) if p.is_online() => {}
            _ => return Err(Error::NoSuchCgroup(parent.0)),
        }
        if *next as usize >= MAX_CGROUPS {
            return Err(Error::TooManyCgroups);
        }
        let id = *next;
        let cg = self.slot(id).ok_or(Error::TooManyCgroups)?;
        cg.parent.store(parent.0, Relaxed);
        // memory.zswap.writeback starts as the parent's value (the hierarchy also applies).
        cg.writeback.store(
            self.get(parent.0)
                .is_some_and(|p| p.writeback.load(Relaxed)),
            Relaxed,
        );
        cg.state.store(ONLINE, Relaxed);
        *next += 1;
        Ok(CgroupId(id))
    }

    /// Take a cgroup offline; its parent absorbs its LRU lists. The root can't be removed, nor a
    /// cgroup with online children (as rmdir refuses).
    pub(crate) fn remove(&self, id: CgroupId) -> Result<(), Error> {
        let next = self.admin.lock();
        if id == CgroupId::ROOT {
            return Err(Error::RootCgroup);
        }
        let cg = match self.get(id.0) {
            Some(c) if c.is_online() => c,
            _ => return Err(Error::NoSuchCgroup(id.0)),
        };
        for other in 1..*next {
            if let Some(o) = self.get(other) {
                if o.is_online() && o.parent() == Some(id.0) {
                    return Err(Error::CgroupBusy(id.0));
                }
            }
        }
        let parent_id = cg.parent().unwrap_or(0);
        let parent = self.get(parent_id).ok_or(Error::NoSuchCgroup(parent_id))?;
        cg.state.store(OFFLINE, Relaxed);
        let mut moved = std::mem::take(&mut *cg.absorbed.lock());
        moved.push(id.0);
        parent.absorbed.lock().extend(moved);
        // The worker's cursor must not stay on an offline cgroup (per-pool cursors: the
        // caller fixes them with `Cgroups::fix_cursor`, as `zswap_memcg_offline_cleanup` walks
        // every pool in 6.8).
        Self::fix_cursor(&self.cursor, id.0, parent_id);
        Ok(())
    }

    /// Move a shrink-worker cursor off cgroup `removed` (now offline) to its parent.
    pub(crate) fn fix_cursor(cursor: &Mutex<Option<u32>>, removed: u32, parent: u32) {
        let mut cur = cursor.lock();
        if *cur == Some(removed) {
            *cur = Some(parent);
        }
    }

    /// The nearest online cgroup at or above `id`.
    pub(crate) fn resolve(&self, id: u32) -> u32 {
        let mut cur = id;
        loop {
            match self.get(cur) {
                Some(c) if c.is_online() => return cur,
                Some(c) => match c.parent() {
                    Some(p) => cur = p,
                    None => return 0,
                },
                None => return 0,
            }
        }
    }

    /// Apply `f` to `id` and every ancestor.
    #[inline]
    pub(crate) fn for_each_ancestor(&self, id: u32, mut f: impl FnMut(&Cgroup)) {
        let mut cur = Some(id);
        while let Some(i) = cur {
            let Some(c) = self.get(i) else { return };
            f(c);
            cur = c.parent();
        }
    }

    pub(crate) fn charge(&self, id: u32, bytes: u64) {
        self.for_each_ancestor(id, |c| {
            c.stats.add(C::ZswapBytes as usize, bytes);
            c.stats.add(C::Zswapped as usize, 1);
        });
    }

    pub(crate) fn uncharge(&self, id: u32, bytes: u64) {
        self.uncharge_on(crate::stats::stripe_index(), id, bytes);
    }

    /// `uncharge` on the calling thread's stripe `stripe` (see `stats::stripe_index`).
    #[inline]
    pub(crate) fn uncharge_on(&self, stripe: usize, id: u32, bytes: u64) {
        self.for_each_ancestor(id, |c| {
            c.stats
                .add_on(stripe, C::ZswapBytes as usize, bytes.wrapping_neg());
            c.stats
                .add_on(stripe, C::Zswapped as usize, 1u64.wrapping_neg());
        });
    }

    pub(crate) fn event(&self, id: u32, which: C) {
        self.event_on(crate::stats::stripe_index(), id, which);
    }

    /// `event` on the calling thread's stripe `stripe` (see `stats::stripe_index`).
    ///
    /// The root's own stripes are left alone: every event reaches the root (ids are never
    /// reused, so an entry's cgroup and its ancestors always exist), and each is counted in the
    /// global counters at the same site, so the root's events are the global ones (`snapshot`
    /// reports those). A load or store of the root's pages, an embedder's usual case, then
    /// touches no cgroup line at all: from a cold cache those were three misses a load
    /// (BENCHMARKS.md section 1, "A load from a cold cache").
    #[inline]
    pub(crate) fn event_on(&self, stripe: usize, id: u32, which: C) {
        let mut cur = id;
        while cur != CgroupId::ROOT.0 {
            let Some(c) = self.get(cur) else { return };
            c.stats.add_on(stripe, which as usize, 1);
            let Some(p) = c.parent() else { return };
            cur = p;
        }
    }

    /// `mem_cgroup_may_zswap`: false if this cgroup or an ancestor is at its zswap.max.
    /// Returns the first cgroup over its limit.
    pub(crate) fn over_limit(&self, id: u32) -> Option<u32> {
        let mut cur = Some(id);
        while let Some(i) = cur {
            let c = self.get(i)?;
            let max = c.max_bytes.load(Relaxed);
            if max != u64::MAX {
                let used = c.stats.gauge(C::ZswapBytes as usize);
                if max == 0 || used / PAGE_SIZE as u64 >= max / PAGE_SIZE as u64 {
                    return Some(i);
                }
            }
            cur = c.parent();
        }
        None
    }

    /// memory.zswap.writeback, hierarchical: disabled if any online ancestor disabled it.
    pub(crate) fn writeback_enabled(&self, id: u32) -> bool {
        let mut ok = true;
        self.for_each_ancestor(self.resolve(id), |c| ok &= c.writeback.load(Relaxed));
        ok
    }

    pub(crate) fn set_max(&self, id: CgroupId, max: Option<u64>) -> Result<(), Error> {
        match self.get(id.0) {
            Some(c) if c.is_online() => {
                c.max_bytes.store(max.unwrap_or(u64::MAX), Relaxed);
                Ok(())
            }
            _ => Err(Error::NoSuchCgroup(id.0)),
        }
    }

    pub(crate) fn set_writeback(&self, id: CgroupId, on: bool) -> Result<(), Error> {
        match self.get(id.0) {
            Some(c) if c.is_online() => {
                c.writeback.store(on, Relaxed);
                Ok(())
            }
            _ => Err(Error::NoSuchCgroup(id.0)),
        }
    }

    /// Next online cgroup after the cursor, like `mem_cgroup_iter`: `None` once a full walk ends
    /// (the next call starts over).
    pub(crate) fn iter_next(&self) -> Option<u32> {
        self.iter_next_from(&self.cursor)
    }

    /// `iter_next` with another cursor (a pool's own, with per-pool LRU lists).
    pub(crate) fn iter_next_from(&self, cursor: &Mutex<Option<u32>>) -> Option<u32> {
        let limit = self.id_limit();
        let mut cur = cursor.lock();
        let mut i = match *cur {
            None => 0,
            Some(c) => c + 1,
        };
        while i < limit {
            if self.get(i).is_some_and(Cgroup::is_online) {
                *cur = Some(i);
                return Some(i);
            }
            i += 1;
        }
        *cur = None;
        None
    }

    /// The lists `owner` walks: its own, then those of the offline cgroups it absorbed.
    pub(crate) fn walk_ids(&self, owner: u32) -> Vec<u32> {
        let mut v = vec![owner];
        if let Some(c) = self.get(owner) {
            v.extend(c.absorbed.lock().iter().copied());
        }
        v
    }

    /// Every online cgroup's counters; the root's events are `root_events` (zswpin, zswpout,
    /// zswpwb: the global counts, see `event_on`).
    pub(crate) fn snapshot(&self, root_events: [u64; 3]) -> Vec<CgroupCounters> {
        let limit = self.id_limit();
        (0..limit)
            .filter_map(|i| {
                let c = self.get(i)?;
                if !c.is_online() {
                    return None;
                }
                let max = c.max_bytes.load(Relaxed);
                let [zswpin, zswpout, zswpwb] = if i == CgroupId::ROOT.0 {
                    root_events
                } else {
                    [C::Zswpin, C::Zswpout, C::Zswpwb].map(|e| c.stats.sum(e as usize))
                };
                Some(CgroupCounters {
                    id: i,
                    parent: c.parent(),
                    zswap: c.stats.gauge(C::ZswapBytes as usize),
                    zswapped: c.stats.gauge(C::Zswapped as usize) * PAGE_SIZE as u64,
                    zswpin,
                    zswpout,
                    zswpwb,
                    zswap_max: (max != u64::MAX).then_some(max),
                    zswap_writeback: c.writeback.load(Relaxed),
                })
            })
            .collect()
    }
}
