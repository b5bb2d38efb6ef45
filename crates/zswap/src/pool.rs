// SPDX-License-Identifier: MIT
//! Compressor pools: one zsmalloc pool per (compressor, chain size), the current one receiving
//! new stores, old ones serving their entries until the last goes ("mm/zswap: optimize for dynamic zswap_pools" (v3, 6.9)).
//!
//! Lookup without shared writes:
//! * an entry names its pool by a small index into `table` (an `AtomicPtr` per index); the entry's
//!   reference keeps the pool registered, so dereferencing the pointer is sound while the entry
//!   exists (see `Pools::get`);
//! * a store reads the current pool from a per-thread snapshot (`Arc`s of the current and all live
//!   pools) that it refreshes only when `generation` changes, i.e. after a switch or a release.

use std::cell::RefCell;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use uzswap_compress::Algorithm;
use uzswap_zsmalloc::{ChainRule, MemoryPolicy, Pool, PoolConfig};

use crate::poolref::{PoolRef, RefState};
use crate::Error;

/// Pools that may exist at once (the current one plus old ones still holding entries).
pub const MAX_POOLS: usize = 64;

pub(crate) struct ZswapPool {
    pub(crate) id: u16,
    pub(crate) alg: Algorithm,
    pub(crate) chain_size: usize,
    pub(crate) chain_rule: ChainRule,
    pub(crate) zs: Pool,
    pub(crate) refs: PoolRef,
    /// The pool's first LRU list among a cgroup's lists: an entry of node `n` goes on lane
    /// `lane_base + n`. 0 for every pool with the global LRU; `id × nodes` with per-pool lists.
    pub(crate) lane_base: usize,
    /// With per-pool lists, the cgroup cursor of this pool's shrink work (6.8's
    /// `pool->next_shrink`); unused with the global LRU.
    pub(crate) cursor: Mutex<Option<u32>>,
}

/// Chunks (2 MiB each) kept faulted in ahead of a growing pool by default
/// (`Params::pool_prefault_chunks`): one to carve next while the thread faults in the other (a
/// 2 MiB fault can take 5 ms when the hypervisor backs it, about what a store thread needs to
/// fill a chunk).
pub(crate) const PREFAULT_CHUNKS: usize = 2;

/// Where a new pool's memory comes from: `Params::huge_first_chunk` and
/// `Params::pool_prefault_chunks`, read when a pool is created.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolMemory {
    pub(crate) huge_first_chunk: bool,
    pub(crate) prefault_chunks: usize,
}

impl PoolMemory {
    pub(crate) fn of(p: &crate::Params) -> PoolMemory {
        PoolMemory {
            huge_first_chunk: p.huge_first_chunk,
            prefault_chunks: p.pool_prefault_chunks,
        }
    }
}

/// How a zswap pool gets and keeps the memory of its zspages (`uzswap_zsmalloc`'s arena).
///
/// * Transparent huge pages, in 2 MiB chunks that go back to the OS whole when wholly free:
///   fresh anonymous memory costs 1.5-2 µs per 4 KiB page to fault in on the test VM (the
///   kernel clears, charges and maps it; the kernel's zsmalloc takes uncleared pages from its
///   page allocator), 0.3-0.5 µs with huge pages, or 3-10 µs when the hypervisor must back a
///   huge page the guest had given back (free page reporting).
/// * [`PREFAULT_CHUNKS`] chunks (by default) faulted in ahead of a growing pool by the arena's
///   thread, so a store into a growing pool waits for neither; the memory cost is up to that
///   many chunks beyond the pool's pages while it grows (returned after the decay time).
/// * Freed zspages stay resident for the decay time (1 s) before going back to the OS, bounded
///   by `max_cached_pages`, the pool limit. User space can only get memory back from the
///   kernel cleared and faulted in again, so keeping freed runs for a second is what makes
///   swap-in / swap-out churn cost what it costs the kernel. Since cached pages come only from
///   frees, the pool's RSS never exceeds its own peak of the last second (itself at most the
///   limit) plus the open chunk and the prefaulted ones; the shrink worker returns expired
///   memory when the cache goes idle, and memory pressure (the shrinker, PSI) at once.
/// * The first chunk a huge page too, unless `huge_first_chunk` is off (`Params`).
pub(crate) fn memory_policy(max_cached_pages: usize, mem: PoolMemory) -> MemoryPolicy {
    MemoryPolicy {
        transparent_huge_pages: true,
        prefault_chunks: mem.prefault_chunks,
        huge_first_chunk: mem.huge_first_chunk,
        max_cached_pages,
        ..MemoryPolicy::default()
    }
}

struct Registry {
    current: Option<Arc<ZswapPool>>,
    live: Vec<Arc<ZswapPool>>,
}

/// `repr(C)`: every load and store reads the first three fields (`HOT_END`), which the cache
/// keeps on one line with its hot parameters (`Inner`).
#[repr(C)]
pub(crate) struct Pools {
    table: Box<[AtomicPtr<ZswapPool>]>,
    generation: AtomicU64,
    instance: u64,
    reg: Mutex<Registry>,
    /// Current bound of every pool's freed-memory cache (the pool limit, in pages).
    max_cached_pages: AtomicUsize,
    /// LRU lists per pool in a cgroup: 0 with the global LRU (every pool shares lanes
    /// `0..nodes`), `nodes` with per-pool lists.
    lanes_per_pool: usize,
}

/// A thread's view of one cache's pools.
pub(crate) struct Snapshot {
    instance: u64,
    generation: u64,
    pub(crate) current: Arc<ZswapPool>,
    pub(crate) all: Vec<Arc<ZswapPool>>,
}

thread_local! {
    static SNAPSHOTS: RefCell<Vec<Snapshot>> = const { RefCell::new(Vec::new()) };
}

/// Sets up this thread's snapshot list (registering its destructor) before any cache exists,
/// with room for a snapshot, so that a thread's first snapshot allocates nothing.
pub(crate) fn touch_snapshots() {
    let _ = SNAPSHOTS.try_with(|s| {
        if let Ok(mut v) = s.try_borrow_mut() {
            v.reserve(1);
        }
    });
}
/// Snapshots a thread keeps (one per cache instance it used recently).
const SNAPSHOTS_PER_THREAD: usize = 4;

impl Pools {
    /// The end of the fields a load or store reads: the table, the generation and the instance.
    pub(crate) const HOT_END: usize = std::mem::offset_of!(Pools, instance) + 8;

    /// `max_cached_pages`: bound of each pool's cache of freed zspage memory (see
    /// [`memory_policy`]). `lanes_per_pool`: 0 for the global LRU, the node count for per-pool
    /// lists (see `ZswapPool::lane_base`).
    pub(crate) fn new(
        alg: Algorithm,
        chain_size: usize,
        chain_rule: ChainRule,
        max_cached_pages: usize,
        mem: PoolMemory,
        lanes_per_pool: usize,
    ) -> Result<Pools, Error> {
        static INSTANCES: AtomicU64 = AtomicU64::new(1);
        let pools = Pools {
            table: (0..MAX_POOLS)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            reg: Mutex::new(Registry {
                current: None,
                live: Vec::new(),
            }),
            generation: AtomicU64::new(1),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            max_cached_pages: AtomicUsize::new(max_cached_pages),
            lanes_per_pool,
        };
        pools.switch(alg, chain_size, chain_rule, mem)?;
        Ok(pools)
    }

    /// Make a new pool current and kill the old current one (it lives on while it has entries).
    /// `mem`: where the new pool's memory comes from (`Params`, read when a pool is created).
    pub(crate) fn switch(
        &self,
        alg: Algorithm,
        chain_size: usize,
        chain_rule: ChainRule,
        mem: PoolMemory,
    ) -> Result<(), Error> {
        let mut reg = self.reg.lock();
        let id = (0..MAX_POOLS)
            .find(|&i| self.table[i].load(Ordering::Acquire).is_null())
            .ok_or(Error::TooManyPools)?;
        let cfg = PoolConfig {
            chain_size,
            chain_rule,
        };
        let policy = memory_policy(self.max_cached_pages.load(Ordering::Relaxed), mem);
        let zs = Pool::with_memory_policy(cfg, policy).map_err(Error::Pool)?;
        let pool = Arc::new(ZswapPool {
            id: id as u16,
            alg,
            chain_size,
            chain_rule,
            zs,
            refs: PoolRef::new(),
            lane_base: self.lane_base(id as u16),
            cursor: Mutex::new(None),
        });
        self.table[id].store(Arc::as_ptr(&pool).cast_mut(), Ordering::Release);
        reg.live.push(pool.clone());
        let old = reg.current.replace(pool);
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(old) = old {
            if old.refs.kill() == RefState::Release {
                Self::unregister(&self.table, &mut reg, old.id);
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        Ok(())
    }

    fn unregister(table: &[AtomicPtr<ZswapPool>], reg: &mut Registry, id: u16) {
        table[id as usize].store(std::ptr::null_mut(), Ordering::Release);
        reg.live.retain(|p| p.id != id);
    }

    /// Release a pool whose count reached zero (called by whoever dropped the last reference).
    pub(crate) fn release(&self, id: u16) {
        let mut reg = self.reg.lock();
        Self::unregister(&self.table, &mut reg, id);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Drop one entry reference on pool `id`.
    #[inline]
    pub(crate) fn put(&self, pool: &ZswapPool) {
        if pool.refs.put() == RefState::Release {
            self.release(pool.id);
        }
    }

    /// The pool an entry names.
    ///
    /// # Safety
    ///
    /// The caller must hold a reference on pool `id` for as long as it uses the returned borrow:
    /// through an entry it has locked in the index (shard lock held) or owns (taken out of the
    /// index, or its slot marked in flight), or through a successful `tryget`. A pool is
    /// unregistered and dropped only after its last reference is put.
    #[inline]
    pub(crate) unsafe fn get(&self, id: u16) -> &ZswapPool {
        let p = self.table[id as usize].load(Ordering::Acquire);
        assert!(!p.is_null(), "entry names an unregistered pool {id}");
        // SAFETY: `p` came from `Arc::as_ptr` of a pool kept in `reg.live`; it is removed from
        // there (and the pointer cleared) only once the pool's reference count dropped to zero,
        // which the caller's reference prevents (contract above).
        unsafe { &*p }
    }

    /// Run `f` with this thread's snapshot, refreshed if pools changed since it was taken.
    /// A fresh snapshot stands in where the thread's list is already destroyed (an operation
    /// during the thread's teardown), out of line, so that the common path stays as short as
    /// before (callgrind: 12 instructions fewer per load than the first form of this fallback,
    /// which made the load path's caller too large to inline).
    #[inline]
    pub(crate) fn with_snapshot<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        let gen = self.generation.load(Ordering::Acquire);
        let mut f = Some(f);
        let kept = SNAPSHOTS.try_with(|cell| {
            let mut snaps = cell.borrow_mut();
            let pos = snaps.iter().position(|s| s.instance == self.instance);
            let idx = match pos {
                Some(i) if snaps[i].generation == gen => i,
                other => {
                    let fresh = self.take_snapshot();
                    match other {
                        Some(i) => {
                            snaps[i] = fresh;
                            i
                        }
                        None => {
                            if snaps.len() >= SNAPSHOTS_PER_THREAD {
                                snaps.remove(0);
                            }
                            snaps.push(fresh);
                            snaps.len() - 1
                        }
                    }
                }
            };
            // `f` runs once: here, or in the fallback below when the list is gone.
            f.take().map(|f| f(&snaps[idx]))
        });
        match kept {
            Ok(Some(r)) => r,
            _ => self.with_fresh_snapshot(f),
        }
    }

    /// [`Pools::with_snapshot`] during the thread's teardown, out of line: the common path
    /// stays small enough to be inlined where it was.
    #[cold]
    #[inline(never)]
    fn with_fresh_snapshot<R>(&self, f: Option<impl FnOnce(&Snapshot) -> R>) -> R {
        (f.expect("the thread's list was not used"))(&self.take_snapshot())
    }

    /// Forget this thread's snapshot (so a dropped cache's pools are not kept alive by it).
    pub(crate) fn forget_snapshot(&self) {
        let _ = SNAPSHOTS.try_with(|cell| {
            if let Ok(mut s) = cell.try_borrow_mut() {
                s.retain(|s| s.instance != self.instance);
            }
        });
    }

    fn take_snapshot(&self) -> Snapshot {
        let reg = self.reg.lock();
        Snapshot {
            instance: self.instance,
            generation: self.generation.load(Ordering::Acquire),
            current: reg.current.clone().expect("a current pool always exists"),
            all: reg.live.clone(),
        }
    }

    /// The `lane_base` of pool table index `id` (no need for the pool to be alive).
    #[inline]
    pub(crate) fn lane_base(&self, id: u16) -> usize {
        usize::from(id) * self.lanes_per_pool
    }

    /// Per-pool LRU lists (`lanes_per_pool` > 0) or the global LRU.
    pub(crate) fn lru_mode(&self) -> crate::LruMode {
        if self.lanes_per_pool == 0 {
            crate::LruMode::Global
        } else {
            crate::LruMode::PerPool
        }
    }

    /// CPU time (ns) of every pool's background thread.
    pub(crate) fn background_cpu_ns(&self) -> u64 {
        self.reg
            .lock()
            .live
            .iter()
            .map(|p| p.zs.background_cpu_ns())
            .sum()
    }

    /// Pages held by all live pools (`zswap_total_pages`).
    pub(crate) fn total_pages(&self) -> u64 {
        self.reg
            .lock()
            .live
            .iter()
            .map(|p| p.zs.total_pages() as u64)
            .sum()
    }

    /// Bound every pool's freed-memory cache by `pages` (the pool limit changed).
    pub(crate) fn set_max_cached_pages(&self, pages: usize) {
        let reg = self.reg.lock();
        self.max_cached_pages.store(pages, Ordering::Relaxed);
        for p in &reg.live {
            // Only the bound changes: each pool keeps the rest of the policy it was made with.
            p.zs.set_memory_policy(MemoryPolicy {
                max_cached_pages: pages,
                ..p.zs.memory_policy()
            });
        }
    }

    /// Return the cached runs whose decay time has passed to the OS; pages returned.
    pub(crate) fn purge_expired(&self) -> u64 {
        self.live()
            .iter()
            .map(|p| p.zs.purge_expired() as u64)
            .sum()
    }

    /// Compact every live pool (`zs_compact`, what zsmalloc's own shrinker does under memory
    /// pressure); pages freed.
    pub(crate) fn compact(&self) -> u64 {
        self.live().iter().map(|p| p.zs.compact() as u64).sum()
    }

    /// The live pools, oldest first.
    pub(crate) fn live(&self) -> Vec<Arc<ZswapPool>> {
        self.reg.lock().live.clone()
    }

    /// The oldest live pool: the last of the kernel's `zswap_pools` list, where a new pool is
    /// added at the head (`zswap_pool_last_get`, 6.8).
    pub(crate) fn oldest(&self) -> Arc<ZswapPool> {
        self.reg
            .lock()
            .live
            .first()
            .cloned()
            .expect("a current pool always exists")
    }

    pub(crate) fn current(&self) -> Arc<ZswapPool> {
        self.reg
            .lock()
            .current
            .clone()
            .expect("a current pool always exists")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Params::pool_prefault_chunks` reaches the pool made with the cache and the pools made
    /// later by a compressor switch; the cache bound set since is kept beside it.
    #[test]
    #[cfg_attr(miri, ignore = "makes real pools")]
    fn pools_take_their_prefault_setting_from_the_params() {
        for prefault in [0, PREFAULT_CHUNKS, 5] {
            let mem = PoolMemory {
                huge_first_chunk: false,
                prefault_chunks: prefault,
            };
            let pools = Pools::new(Algorithm::Lz4, 8, ChainRule::MinWaste, 100, mem, 0).unwrap();
            pools.set_max_cached_pages(64);
            let check = |alg| {
                let live = pools.live();
                let p = live
                    .iter()
                    .find(|p| p.alg == alg)
                    .expect("the current pool");
                let policy = p.zs.memory_policy();
                assert_eq!(policy.prefault_chunks, prefault);
                assert!(!policy.huge_first_chunk);
                assert_eq!(policy.max_cached_pages, 64);
            };
            check(Algorithm::Lz4);
            // The old pool, empty, goes at once; the new one is made with the same setting.
            pools
                .switch(Algorithm::Lzo, 8, ChainRule::MinWaste, mem)
                .unwrap();
            check(Algorithm::Lzo);
        }
        let mut params = crate::Params::for_machine(1 << 30, 1);
        assert_eq!(params.pool_prefault_chunks, PREFAULT_CHUNKS);
        params.pool_prefault_chunks = 65;
        assert!(params.validate().is_err());
        params.pool_prefault_chunks = 0;
        params.validate().unwrap();
    }
}
