// SPDX-License-Identifier: MIT
//! The cache object: [`Zswap`], its public API, and the state every path shares (`Inner`:
//! hot parameters, pools, swap areas, cgroups, counters, the worker's control block).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cgroup::{self, CgroupId};
use crate::hooks::FaultHooks;
use crate::index::{AreaIndex, Entry, SlotValue};
use crate::lru::unpack_slot;
use crate::outcome::{LoadOutcome, MetadataUsage, PoolInfo, SlotState, StoreOutcome};
use crate::params::{LruMode, Params, WarmProtection};
use crate::pool;
use crate::pressure::{self, PressureConfig};
use crate::shrink::ShrinkScan;
use crate::stats::{Counters, Striped, G, NR_GLOBAL};
use crate::worker::WorkerCtl;
use crate::{BackingStore, Error, SwapFile, SwapSlot, MAX_AREAS, PAGE_SIZE};

pub(crate) struct Area {
    /// Where written-back and swapped-out pages go.
    pub(crate) store: Arc<dyn BackingStore>,
    /// The same store as a [`SwapFile`], when it was attached as one.
    pub(crate) file: Option<Arc<SwapFile>>,
    pub(crate) index: AreaIndex,
}

/// Parameters read on the hot path, kept as atomics (the full `Params` sits behind a mutex).
pub(crate) struct HotParams {
    pub(crate) enabled: AtomicBool,
    pub(crate) max_pages: AtomicU64,
    pub(crate) accept_pages: AtomicU64,
    pub(crate) proactive_start: AtomicU64,
    pub(crate) proactive: AtomicBool,
    pub(crate) reject_poor: AtomicBool,
    pub(crate) shrinker_enabled: AtomicBool,
    pub(crate) warm: AtomicU8,
    pub(crate) memcg_sync: AtomicBool,
    /// `Params::zero_page_entries`.
    pub(crate) zero_entries: AtomicBool,
    pub(crate) rotation_is_failure: AtomicBool,
}

impl HotParams {
    /// `outside`: pages of pools outside the cache that share its limit
    /// (`Zswap::set_pool_pages_outside`), taken off the limit and its thresholds here so that
    /// a store's check stays one comparison of the cache's own pages.
    pub(crate) fn set(&self, p: &Params, outside: u64) {
        self.enabled.store(p.enabled, Relaxed);
        self.max_pages
            .store(p.max_pool_pages().saturating_sub(outside), Relaxed);
        self.accept_pages
            .store(p.accept_threshold_pages().saturating_sub(outside), Relaxed);
        self.proactive_start
            .store(p.proactive_start_pages().saturating_sub(outside), Relaxed);
        self.proactive.store(p.proactive_shrink, Relaxed);
        self.reject_poor.store(p.reject_compress_poor, Relaxed);
        self.shrinker_enabled.store(p.shrinker_enabled, Relaxed);
        self.warm.store(p.warm_protection as u8, Relaxed);
        self.memcg_sync.store(p.memcg_limit_sync_writeback, Relaxed);
        self.zero_entries.store(p.zero_page_entries, Relaxed);
        self.rotation_is_failure
            .store(p.rotation_is_failure, Relaxed);
    }
    pub(crate) fn warm(&self) -> WarmProtection {
        if self.warm.load(Relaxed) == WarmProtection::ProtectedSize as u8 {
            WarmProtection::ProtectedSize
        } else {
            WarmProtection::SecondChance
        }
    }
}

/// The cache's shared state. Laid out by hand (`repr(C)`, on its own cache lines): what every
/// load and store reads sits in its first two lines, checked below, so that a load from a cold
/// cache misses two lines here, not the five the compiler's order spread it over (BENCHMARKS.md
/// section 1, "A load from a cold cache").
#[repr(C, align(64))]
pub(crate) struct Inner {
    // First line.
    /// The global counters, and the loads and stores in progress (`G::InFlight`).
    pub(crate) stats: Striped<NR_GLOBAL>,
    pub(crate) areas: Box<[OnceLock<Area>]>,
    pub(crate) nodes: usize,
    pub(crate) reached_full: AtomicBool,
    /// The pool limit was lowered and the pools may still be above it (`check_invariants`).
    pub(crate) limit_lowered: AtomicBool,
    pub(crate) faults: FaultHooks,
    // Then the hot parameters and the pool table's head (`Pools::HOT_END`), ending in the second
    // line.
    pub(crate) hot: HotParams,
    pub(crate) pools: pool::Pools,
    // The rest: stores of nested cgroups, administration.
    pub(crate) cgroups: cgroup::Cgroups,
    pub(crate) params: Mutex<Params>,
    pub(crate) worker: WorkerCtl,
    /// Pages of pools outside this cache that share its limit (`Zswap::set_pool_pages_outside`),
    /// already taken off the limits in `hot`: read by no store, so last.
    pub(crate) pages_outside: AtomicU64,
    /// The sequence number (on the shared LRU clock) of the oldest entry the caches outside
    /// this one hold (`Zswap::set_outside_lru_oldest`), `NO_OUTSIDE_ENTRY` if none: the shrink
    /// worker leaves the writeback to them while theirs is older than this cache's oldest.
    pub(crate) outside_oldest: AtomicU64,
}

// Everything up to the pool table's head (in field order) lies in the first two lines.
const _: () = assert!(std::mem::offset_of!(Inner, pools) + pool::Pools::HOT_END <= 128);

/// `Inner::outside_oldest` when the caches outside hold no entry.
pub(crate) const NO_OUTSIDE_ENTRY: u64 = u64::MAX;

/// The cache. `Send + Sync`; share it by reference or in an `Arc`. Dropping it stops its
/// background threads.
pub struct Zswap {
    pub(crate) inner: Arc<Inner>,
    pub(crate) worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) pressure: Mutex<Option<pressure::Monitor>>,
}

/// Bound of a pool's cache of freed zspage memory: the pool limit (see `pool::memory_policy`).
fn cache_bound(p: &Params) -> usize {
    usize::try_from(p.max_pool_pages()).unwrap_or(usize::MAX)
}

impl Zswap {
    /// A cache with these parameters and no swap area yet; starts the shrink worker thread.
    pub fn new(params: Params) -> Result<Zswap, Error> {
        let z = Self::build(params, None, None, None)?;
        z.spawn_worker(&mut z.worker.lock())?;
        Ok(z)
    }

    /// As [`Zswap::new`], but the shrink worker's thread is started only once work is queued
    /// for it, by [`Zswap::service_shrink_worker`]: for an embedder that makes many caches
    /// most of which never reach their pool limit (every process of a `uzswap run` tree has
    /// one; a thread made and torn down with each cost about 0.3 ms of every process's life).
    /// `wake` is called when work is queued and no thread runs it yet, from whatever context
    /// queued it (a store in a signal handler included), so it must be async-signal-safe:
    /// typically a futex wake of the embedder's own thread, which then calls
    /// [`Zswap::service_shrink_worker`].
    pub fn with_shrink_worker_on_demand(params: Params, wake: fn()) -> Result<Zswap, Error> {
        Self::build(params, Some(wake), None, None)
    }

    /// As [`Zswap::with_shrink_worker_on_demand`], for one of several caches (one per process
    /// of a tree, say) that share one pool limit and one LRU order, as every zswap pool of a
    /// machine shares the kernel's global LRU and shrinker ("mm/zswap: global lru and shrinker
    /// shared by all zswap_pools", v3, 6.9). Every LRU list numbers its entries from `clock`,
    /// shared by all of them, so the age of each cache's oldest entry ([`Zswap::lru_oldest`])
    /// compares with the others'. The embedder tells each cache what the others hold
    /// ([`Zswap::set_pool_pages_outside`], [`Zswap::set_outside_lru_oldest`]); a shrink worker
    /// run that starts while another cache holds an entry older than this one's oldest (by a
    /// few hundred stores) ends at once and calls `handoff` (async-signal-safe, as `wake`),
    /// so that the embedder has the cache holding the oldest entries write back instead
    /// ([`Zswap::kick_shrink_worker`]), down to the accept threshold.
    pub fn for_process_tree(
        params: Params,
        wake: fn(),
        clock: &'static AtomicU32,
        handoff: fn(),
    ) -> Result<Zswap, Error> {
        Self::build(params, Some(wake), Some(clock), Some(handoff))
    }

    fn build(
        params: Params,
        wake: Option<fn()>,
        clock: Option<&'static AtomicU32>,
        handoff: Option<fn()>,
    ) -> Result<Zswap, Error> {
        params.validate()?;
        let nodes = params.numa_nodes;
        let hot = HotParams {
            enabled: AtomicBool::new(false),
            max_pages: AtomicU64::new(0),
            accept_pages: AtomicU64::new(0),
            proactive_start: AtomicU64::new(0),
            proactive: AtomicBool::new(false),
            reject_poor: AtomicBool::new(false),
            shrinker_enabled: AtomicBool::new(false),
            warm: AtomicU8::new(0),
            memcg_sync: AtomicBool::new(true),
            zero_entries: AtomicBool::new(false),
            rotation_is_failure: AtomicBool::new(false),
        };
        hot.set(&params, 0);
        let lru_mode = params.lru;
        // Per-pool lists: a cgroup has `nodes` lists for each pool slot (see `Cgroup::lists`).
        let (lanes, lanes_per_pool) = match lru_mode {
            LruMode::Global => (nodes, 0),
            LruMode::PerPool => (pool::MAX_POOLS * nodes, nodes),
        };
        let inner = Arc::new(Inner {
            pools: pool::Pools::new(
                params.compressor,
                params.chain_size,
                params.chain_rule,
                cache_bound(&params),
                pool::PoolMemory::of(&params),
                lanes_per_pool,
            )?,
            params: Mutex::new(params),
            hot,
            pages_outside: AtomicU64::new(0),
            outside_oldest: AtomicU64::new(NO_OUTSIDE_ENTRY),
            reached_full: AtomicBool::new(false),
            limit_lowered: AtomicBool::new(false),
            areas: (0..MAX_AREAS).map(|_| OnceLock::new()).collect(),
            cgroups: cgroup::Cgroups::new(nodes, lanes, clock),
            stats: Striped::new(),
            worker: WorkerCtl::new(wake, handoff),
            faults: FaultHooks::new(),
            nodes,
        });
        Ok(Zswap {
            inner,
            worker: Mutex::new(None),
            pressure: Mutex::new(None),
        })
    }

    /// Starts the shrink worker's thread into `slot` (the caller holds the handle's lock).
    fn spawn_worker(&self, slot: &mut Option<std::thread::JoinHandle<()>>) -> Result<(), Error> {
        let w = self.inner.clone();
        *slot = Some(
            std::thread::Builder::new()
                .name("zswap-shrink".into())
                .spawn(move || w.worker_main())
                .map_err(Error::WorkerSpawn)?,
        );
        self.inner.worker.thread_up.store(true, Relaxed);
        Ok(())
    }

    /// For a cache made by [`Zswap::with_shrink_worker_on_demand`]: starts the shrink
    /// worker's thread if work is queued for it and none runs yet; until then does the idle
    /// worker's other job, returning cached pool memory whose decay time has passed (unless
    /// the worker is held). Call it from an ordinary thread context (it may spawn a thread),
    /// after each `wake` and periodically (every few hundred milliseconds). True if a thread
    /// runs the worker now. A no-op returning true for a cache made by [`Zswap::new`].
    pub fn service_shrink_worker(&self) -> Result<bool, Error> {
        if self.inner.worker.thread_up.load(Relaxed) {
            return Ok(true);
        }
        let w = &self.inner.worker;
        let mut st = w.state.lock();
        if st.pending {
            drop(st);
            let mut h = self.worker.lock();
            if h.is_none() {
                self.spawn_worker(&mut h)?;
            }
            return Ok(true);
        }
        if st.held || st.stop {
            return Ok(false);
        }
        // The idle purge, under the protocol the worker's own follows (`wait_shrink_idle`
        // waits for it; a held worker does not start it).
        st.running = true;
        drop(st);
        self.inner.pools.purge_expired();
        let mut st = w.state.lock();
        st.running = false;
        w.idle_cv.notify_all();
        Ok(false)
    }

    /// Attach a backing store (a swap file, a [`MemStore`](uzswap_backing::MemStore), a remote
    /// tier...) as swap area `store.area()`: pages of that area are written back to it and read
    /// from it.
    pub fn add_backing_store(&self, store: Arc<dyn BackingStore>) -> Result<(), Error> {
        self.attach(store, None)
    }

    /// Attach a swap file as swap area `swap.area()` (as [`Zswap::add_backing_store`], and
    /// [`Zswap::swap_file`] gives it back as a `SwapFile`).
    pub fn add_swap_file(&self, swap: Arc<SwapFile>) -> Result<(), Error> {
        self.attach(swap.clone(), Some(swap))
    }

    fn attach(
        &self,
        store: Arc<dyn BackingStore>,
        file: Option<Arc<SwapFile>>,
    ) -> Result<(), Error> {
        let a = store.area();
        let cell = self
            .inner
            .areas
            .get(a as usize)
            .ok_or(Error::TooManyAreas(a))?;
        let index = AreaIndex::new(store.capacity());
        cell.set(Area { store, file, index })
            .map_err(|_| Error::AreaExists(a))
    }

    /// Whether swap area `area` is attached (one atomic load; no reference taken).
    pub fn has_area(&self, area: u32) -> bool {
        self.inner.area(area).is_some()
    }

    /// The backing store of an area.
    pub fn backing_store(&self, area: u32) -> Option<Arc<dyn BackingStore>> {
        self.inner.area(area).map(|a| a.store.clone())
    }

    /// The swap file of an area, if it was attached with [`Zswap::add_swap_file`].
    pub fn swap_file(&self, area: u32) -> Option<Arc<SwapFile>> {
        self.inner.area(area).and_then(|a| a.file.clone())
    }

    /// `zswap_store`: keep `page` for `slot`, charged to `cg`. Any older content of the slot is
    /// dropped, whatever the outcome (a rejected page goes to the swap file, so no stale copy may
    /// remain).
    pub fn store(&self, slot: SwapSlot, page: &[u8], cg: CgroupId) -> StoreOutcome {
        self.inner.store(slot, page, cg, None)
    }

    /// `store` with the page's NUMA node given (the kernel's `page_to_nid`) instead of the
    /// calling CPU's: the entry goes on the (`cg`, `node`) LRU list. For embedders that know
    /// where a page lives, e.g. a VMM and its guest's nodes. A node not below
    /// `Params::numa_nodes` is rejected (`NoSuchNode`) without touching the slot.
    pub fn store_on_node(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: usize,
    ) -> StoreOutcome {
        self.inner.store(slot, page, cg, Some(node))
    }

    /// `zswap_load`: fill `page` with the slot's content from the pool (`Hit`), from the swap
    /// file (`FromSwapFile`, pswpin) or report `Absent`. An exclusive load drops what it read,
    /// as the kernel does when the swap-cache page becomes the only copy. A checksum mismatch or
    /// a decompression failure is an error, never data.
    pub fn load(
        &self,
        slot: SwapSlot,
        page: &mut [u8],
        exclusive: bool,
    ) -> Result<LoadOutcome, Error> {
        self.inner.load(slot, page, exclusive, None)
    }

    /// `load` into a page on NUMA node `node` rather than the calling CPU's. The node only
    /// matters for a page read from the swap file: its refault credit goes to the (owner
    /// cgroup, `node`) list, as the kernel credits the lruvec of the newly allocated folio.
    /// `Error::NoSuchNode` if `node` is not below `Params::numa_nodes`.
    pub fn load_on_node(
        &self,
        slot: SwapSlot,
        page: &mut [u8],
        exclusive: bool,
        node: usize,
    ) -> Result<LoadOutcome, Error> {
        self.inner.load(slot, page, exclusive, Some(node))
    }

    /// `zswap_invalidate`: forget the slot's content (entry, zero mark and swap-file block).
    /// Slot allocation stays with the caller (`SwapFile::alloc_slot` / `free_slot`).
    pub fn invalidate(&self, slot: SwapSlot) {
        self.inner.invalidate(slot)
    }

    /// Store, or write the page to the swap file if the cache rejects it (pswpout). Returns
    /// `Rejected(reason)` when the page went to the file; an error if it could go nowhere.
    pub fn swap_out(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
    ) -> Result<StoreOutcome, Error> {
        self.inner.swap_out(slot, page, cg, None)
    }

    /// `swap_out` with the page's NUMA node given, as `store_on_node`.
    pub fn swap_out_on_node(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: usize,
    ) -> Result<StoreOutcome, Error> {
        self.inner.swap_out(slot, page, cg, Some(node))
    }

    /// Sets up the calling thread's own state for stores and loads (its counter stripe, its
    /// snapshot of the pools, the store's compression buffer, the current compressor's
    /// contexts) without storing anything, so that its first store or load allocates none of
    /// it: for embedders whose stores and loads run where allocating is best avoided, like
    /// `uzswap run`'s fault handler. Shared structures (index tables, zspages) are still made
    /// by the first store that needs them. Counts nothing.
    pub fn prepare_thread(&self) {
        self.inner.prepare_thread();
    }

    /// [`Zswap::prepare_thread`] before any cache exists, for a cache that will compress with
    /// `alg`: the thread's counter stripe, its (empty) list of pool snapshots and the store's
    /// buffer. `alg`'s contexts are made for zstd and deflate, whose C libraries allocate them;
    /// for LZ4 and LZO only registered (`uzswap_compress::register_thread`), their tables
    /// (32 and 16 KiB, cleared) made by the thread's first store with Rust's allocator. The
    /// snapshot of the cache itself is left to its first operation. For embedders that make
    /// the cache on first use, like `uzswap run`, whose processes and threads mostly never
    /// store a page.
    pub fn prepare_thread_for(alg: uzswap_compress::Algorithm) {
        crate::store::prepare_thread_for(alg, false);
    }

    /// Every counter, with the pool size and per-cgroup figures.
    pub fn counters(&self) -> Counters {
        let i = &self.inner;
        let mut c = Counters::from_global(&i.stats);
        let live = i.pools.live();
        c.pool_total_size =
            live.iter().map(|p| p.zs.total_pages() as u64).sum::<u64>() * PAGE_SIZE as u64;
        c.pool_cached_size =
            live.iter().map(|p| p.zs.cached_pages() as u64).sum::<u64>() * PAGE_SIZE as u64;
        c.nr_pools = live.len() as u64;
        c.cgroups = i.cgroups.snapshot([c.zswpin, c.zswpout, c.zswpwb]);
        c
    }

    /// The parameters in force.
    pub fn params(&self) -> Params {
        self.inner.params.lock().clone()
    }

    /// Change parameters at run time. A new compressor or chain size creates a new pool; old
    /// pools keep serving their entries and are freed with their last entry. `numa_nodes` and
    /// `lru` are fixed when the cache is created (the LRU lists are laid out for them): a
    /// different value is an error. `zero_page_entries` may change: zero pages already kept
    /// either way stay as they are.
    pub fn set_params(&self, p: Params) -> Result<(), Error> {
        p.validate()?;
        let mut cur = self.inner.params.lock();
        if p.numa_nodes != cur.numa_nodes {
            return Err(Error::NumaNodesFixed {
                current: cur.numa_nodes,
                requested: p.numa_nodes,
            });
        }
        if p.lru != cur.lru {
            return Err(Error::LruModeFixed {
                current: cur.lru,
                requested: p.lru,
            });
        }
        if p.compressor != cur.compressor
            || p.chain_size != cur.chain_size
            || p.chain_rule != cur.chain_rule
        {
            self.inner.pools.switch(
                p.compressor,
                p.chain_size,
                p.chain_rule,
                pool::PoolMemory::of(&p),
            )?;
        }
        self.inner
            .hot
            .set(&p, self.inner.pages_outside.load(Relaxed));
        if p.max_pool_percent != cur.max_pool_percent
            || p.total_memory_bytes != cur.total_memory_bytes
        {
            // A new limit re-evaluates the hysteresis latch from scratch.
            self.inner.reached_full.store(false, Relaxed);
            if p.max_pool_pages() < cur.max_pool_pages() {
                // The pools may sit above the new limit until the shrinker catches up.
                self.inner.limit_lowered.store(true, Relaxed);
            }
            self.inner.pools.set_max_cached_pages(cache_bound(&p));
        }
        *cur = p;
        Ok(())
    }

    /// Create a cgroup under `parent`.
    pub fn create_cgroup(&self, parent: CgroupId) -> Result<CgroupId, Error> {
        self.inner.cgroups.create(parent)
    }

    /// Remove a cgroup: its entries are reparented (their charge is already part of every
    /// ancestor's, and the parent's shrinker walk covers their LRU lists).
    pub fn remove_cgroup(&self, cg: CgroupId) -> Result<(), Error> {
        let i = &self.inner;
        i.cgroups.remove(cg)?;
        if i.lru_mode() == LruMode::PerPool {
            let parent = i.cgroups.get(cg.0).and_then(|c| c.parent()).unwrap_or(0);
            for p in i.pools.live() {
                cgroup::Cgroups::fix_cursor(&p.cursor, cg.0, parent);
            }
        }
        Ok(())
    }

    /// memory.zswap.max in bytes (`None` = "max").
    pub fn set_cgroup_zswap_max(&self, cg: CgroupId, max: Option<u64>) -> Result<(), Error> {
        self.inner.cgroups.set_max(cg, max)
    }

    /// memory.zswap.writeback.
    pub fn set_cgroup_writeback(&self, cg: CgroupId, enabled: bool) -> Result<(), Error> {
        self.inner.cgroups.set_writeback(cg, enabled)
    }

    /// Metadata bytes per stored page: everything the cache and its allocator keep besides the
    /// pool pages (entry slabs, slot tables, LRU nodes, the pools' handle tables, zspage records
    /// and free lists: [`MetadataUsage::total_bytes`]), divided by `stored_pages` (compressed,
    /// raw and, with `Params::zero_page_entries`, zero-filled pages kept with an entry; zero
    /// pages without an entry only cost their 4-byte slot word).
    pub fn metadata_bytes_per_entry(&self) -> f64 {
        let m = self.metadata();
        m.total_bytes() as f64 / m.stored_pages.max(1) as f64
    }

    /// Metadata memory of the cache and its pools' allocator, measured from the allocations
    /// held now.
    pub fn metadata(&self) -> MetadataUsage {
        let i = &self.inner;
        let mut m = MetadataUsage::default();
        for a in i.areas.iter().filter_map(OnceLock::get) {
            for s in a.index.shards.iter() {
                let (w, e) = s.table.lock().heap_bytes();
                m.index_bytes += w as u64;
                m.entry_bytes += e as u64;
            }
        }
        for id in 0..i.cgroups.id_limit() {
            if let Some(c) = i.cgroups.get(id) {
                m.lru_bytes += c.lists.iter().map(|l| l.heap_bytes() as u64).sum::<u64>();
            }
        }
        m.allocator_bytes = i
            .pools
            .live()
            .iter()
            .map(|p| p.zs.metadata_bytes() as u64)
            .sum();
        m.stored_pages = i.stats.gauge(G::StoredPages as usize);
        m.zero_pages = i.stats.gauge(G::ZeroPages as usize);
        m.zero_entries = i.stats.gauge(G::SameFilledPages as usize);
        m
    }

    /// What a slot holds.
    pub fn slot_state(&self, slot: SwapSlot) -> Option<SlotState> {
        let i = &self.inner;
        let (shard, idx) = i.area(slot.area)?.index.locate(slot.offset)?;
        let (t, w) = shard.lock_idle(idx);
        Some(match w.value() {
            SlotValue::Empty | SlotValue::OnDisk(_) => SlotState::Empty,
            SlotValue::Zero => SlotState::Zero,
            // The kernel's same-filled entry: length 0, its pool and LRU link unused.
            SlotValue::ZeroEntry(_) => SlotState::Stored {
                length: 0,
                compressor: i.pools.current().alg,
                referenced: false,
            },
            SlotValue::Entry(e) => {
                let e = *t.entry(e);
                SlotState::Stored {
                    length: e.length,
                    // SAFETY: the entry is in the index and the shard lock is held, so its pool
                    // reference is alive.
                    compressor: unsafe { i.pools.get(e.pool) }.alg,
                    referenced: e.referenced,
                }
            }
        })
    }

    /// Slots on a cgroup's LRU list for `node`, coldest first. With per-pool lists
    /// (`LruMode::PerPool`): each live pool's list in turn, oldest pool first.
    pub fn lru_slots(&self, cg: CgroupId, node: usize) -> Vec<SwapSlot> {
        let i = &self.inner;
        let Some(c) = i.cgroups.get(cg.0) else {
            return Vec::new();
        };
        if node >= i.nodes {
            return Vec::new();
        }
        i.lanes(node)
            .into_iter()
            .filter_map(|lane| c.lists.get(lane))
            .flat_map(|l| l.keys())
            .map(unpack_slot)
            .collect()
    }

    /// The allocator's statistics (class table, debugfs `classes` layout) of every live pool,
    /// current first.
    pub fn pool_stats(&self) -> Vec<(uzswap_compress::Algorithm, uzswap_zsmalloc::PoolStats)> {
        let cur = self.inner.pools.current();
        let mut live = self.inner.pools.live();
        live.sort_by_key(|p| p.id != cur.id);
        live.iter().map(|p| (p.alg, p.zs.stats())).collect()
    }

    /// Compressed bytes charged to `cg` and its descendants (`memory.zswap.current`); `None`
    /// for an unknown cgroup. One gauge read: cheap enough for a charge path.
    pub fn cgroup_zswap_bytes(&self, cg: CgroupId) -> Option<u64> {
        self.inner
            .cgroups
            .get(cg.0)
            .map(|c| c.stats.gauge(crate::stats::C::ZswapBytes as usize))
    }

    /// Bound every pool's cache of freed zspage memory by `pages` (by default the pool limit;
    /// a new limit resets it). Cached pages are resident but no pool page: an embedder that
    /// charges the pool's pages against a budget keeps the cache small, a fixed overhead.
    pub fn set_pool_cache_pages(&self, pages: usize) {
        self.inner.pools.set_max_cached_pages(pages);
    }

    /// CPU time (ns) the cache's own threads have used: the shrink worker's and the pools'
    /// prefault threads'. An embedder that judges its program busy by CPU time (`uzswap run`'s
    /// "idle processes give first") takes this off.
    pub fn background_cpu_ns(&self) -> u64 {
        let worker = self
            .worker
            .lock()
            .as_ref()
            .map_or(0, uzswap_zsmalloc::thread_cpu_ns);
        worker + self.inner.pools.background_cpu_ns()
    }

    /// Pages held by all pools (`zswap_total_pages`).
    pub fn pool_total_pages(&self) -> u64 {
        self.inner.pools.total_pages()
    }

    /// Counts `pages` held by pools outside this cache against its pool limit: the kernel has
    /// one limit for every zswap pool of the machine, so an embedder that runs one cache per
    /// process under one limit (`uzswap run`'s process tree) tells each cache what the others
    /// hold. The limit check of every store, the accept threshold's hysteresis and the shrink
    /// worker's goal (`max_pool_pages`, `accept_threshold_pages`) then apply to this cache's
    /// pages plus `pages`; the worker still writes back only this cache's own entries.
    /// Neither `pool_total_pages` nor the counters include them. 0 (the default) for a cache
    /// alone under its limit.
    pub fn set_pool_pages_outside(&self, pages: u64) {
        let i = &self.inner;
        if i.pages_outside.load(Relaxed) == pages {
            return;
        }
        let p = i.params.lock();
        let old = i.pages_outside.swap(pages, Relaxed);
        i.hot.set(&p, pages);
        if pages > old {
            // The cache's own pages may now sit above what is left of the limit.
            i.limit_lowered.store(true, Relaxed);
        }
    }

    /// The sequence number of this cache's oldest LRU entry, on its LRU clock (shared with
    /// other caches by [`Zswap::for_process_tree`]); `None` if it holds no pool entry.
    pub fn lru_oldest(&self) -> Option<u32> {
        self.inner.lru_oldest()
    }

    /// The oldest entry's sequence number among the caches sharing this one's LRU clock and
    /// pool limit (`None`: they hold none). While it is older than this cache's own oldest
    /// by more than a few hundred entries, this cache's shrink worker runs leave the writeback
    /// to them (see [`Zswap::for_process_tree`]).
    pub fn set_outside_lru_oldest(&self, seq: Option<u32>) {
        self.inner
            .outside_oldest
            .store(seq.map_or(NO_OUTSIDE_ENTRY, u64::from), Relaxed);
    }

    /// Are the pools, with the pages outside this cache that share its limit, above the
    /// accept threshold (where the shrink worker stops)?
    pub fn pool_above_accept_threshold(&self) -> bool {
        self.inner.pools.total_pages() > self.inner.hot.accept_pages.load(Relaxed)
    }

    /// The address ranges `(start, pages)` that may hold zspages of any live pool (see
    /// `Pool::zspage_memory`): what a fork child looks at to count the pool pages it still
    /// shares with its parent.
    pub fn pool_memory(&self) -> Vec<(usize, usize)> {
        self.inner
            .pools
            .live()
            .iter()
            .flat_map(|p| p.zs.zspage_memory())
            .collect()
    }

    /// The live pools, current first.
    pub fn pools(&self) -> Vec<PoolInfo> {
        let cur = self.inner.pools.current();
        let mut live = self.inner.pools.live();
        live.sort_by_key(|p| p.id != cur.id);
        live.iter()
            .map(|p| PoolInfo {
                compressor: p.alg,
                chain_size: p.chain_size,
                chain_rule: p.chain_rule,
                total_pages: p.zs.total_pages() as u64,
                current: p.id == cur.id,
                killed: p.refs.is_killed(),
                references: p.refs.count().max(0) as u64,
            })
            .collect()
    }

    /// The memory-pressure shrinker's count for (cgroup, node). With per-pool lists
    /// (`LruMode::PerPool`, one shrinker per pool): the sum of the pools' counts.
    pub fn shrinker_count(&self, cg: CgroupId, node: usize) -> u64 {
        self.inner.shrinker_count(cg.0, node)
    }

    /// The memory-pressure shrinker's scan for (cgroup, node). With per-pool lists: each
    /// pool's shrinker in turn (pool-slot order, as shrinkers run in id order, which says
    /// nothing about the entries' age), sharing `nr_to_scan`; `stop` when every pool's said
    /// so. Prefer [`Zswap::shrink_slab`], which asks each pool's shrinker separately.
    pub fn shrinker_scan(&self, cg: CgroupId, node: usize, nr_to_scan: u64) -> ShrinkScan {
        self.inner.shrinker_scan(cg.0, node, nr_to_scan)
    }

    /// What the kernel's `shrink_slab` does with zswap's shrinker(s) for (cgroup, node) at
    /// reclaim `priority`: for each shrinker (one, or one per pool with
    /// `LruMode::PerPool`), its count, then scans of `SHRINK_BATCH` (128) entries until
    /// `(count >> priority) × 2` (`DEFAULT_SEEKS`) are scanned or it says stop. Returns what
    /// all of them scanned and freed (`stop`: every shrinker stopped early or freed nothing).
    pub fn shrink_slab(&self, cg: CgroupId, node: usize, priority: u32) -> ShrinkScan {
        self.inner.shrink_slab(cg.0, node, priority)
    }

    /// `shrink_slab` for (cgroup, node) in proportion to an LRU scan, for an embedder whose
    /// reclaim has no priorities: per page of `lru_scanned` out of `lru_size`, `2 × count /
    /// lru_size` entries (the ratio of `(count >> priority) × 4 / DEFAULT_SEEKS` to
    /// `lru_size >> priority` at any priority), at most the count, in batches of
    /// `SHRINK_BATCH` (128). Less than a batch scans nothing (`scanned` 0): the caller keeps
    /// counting its LRU scan and asks again, as the kernel defers it in `nr_deferred`.
    pub fn shrink_slab_share(
        &self,
        cg: CgroupId,
        node: usize,
        lru_scanned: u64,
        lru_size: u64,
    ) -> ShrinkScan {
        self.inner
            .shrink_slab_share(cg.0, node, lru_scanned, lru_size)
    }

    /// One pass of the memory-pressure shrinker over every cgroup and node (what a PSI event
    /// triggers); `priority` is the shift applied to each freeable count. Returns pages freed.
    pub fn shrink_on_pressure(&self, priority: u32) -> u64 {
        self.inner.shrink_all(priority)
    }

    /// Compact every pool now (`zs_compact`; the memory-pressure pass does it too). Returns the
    /// pages freed.
    pub fn compact(&self) -> u64 {
        self.inner.compact_pools()
    }

    /// Queue the background shrink worker (as a store that hits the limit does).
    pub fn kick_shrink_worker(&self) {
        self.inner.kick_worker();
    }

    /// Run the shrink worker's loop on this thread (tests and tools).
    pub fn run_shrink_worker(&self) {
        self.inner.shrink_worker();
    }

    /// Hold (`true`) or release the background worker: while held, stores still queue it
    /// but it does not start (nor its idle return of expired pool memory), so an embedder
    /// decides when queued work runs (a replay lets it run when the faulting task leaves the
    /// kernel, deterministically; a process about to fork holds it, then waits with
    /// [`Zswap::wait_shrink_idle`] for a run in progress, so that no slot is in flight in the
    /// child's copy). Releasing starts a queued run.
    pub fn hold_shrink_worker(&self, hold: bool) {
        let w = &self.inner.worker;
        let mut st = w.state.lock();
        st.held = hold;
        if !hold && st.pending {
            w.cv.notify_one();
        }
    }

    /// Call in a fork child, before it starts threads of its own and before anything else of
    /// this cache is used: the background threads (the shrink worker, each pool's prefault
    /// thread) are the parent's and are not in the child. The child gets a shrink worker of
    /// its own (held or not as the parent's was at the fork) and its pools queues of their
    /// own. Hold the worker and wait for it to go idle before the fork
    /// ([`Zswap::hold_shrink_worker`], [`Zswap::wait_shrink_idle`]), so that no entry is in
    /// flight in the child's copy. A pressure monitor ([`Zswap::start_pressure_monitor`]) is
    /// the parent's too and is not restarted: start one again in the child if it needs it.
    ///
    /// # Safety
    /// Only in the child of `fork`, while it runs no thread but the caller's.
    pub unsafe fn after_fork_child(&self) -> Result<(), Error> {
        // SAFETY: the caller's guarantee (no other thread, so no guard of the lock).
        unsafe { self.inner.worker.state.reset_in_fork_child() };
        for p in self.inner.pools.live() {
            p.zs.after_fork_child();
        }
        let mut h = self.worker.lock();
        // The handle names the parent's thread: never join or detach it here.
        std::mem::forget(h.take());
        self.inner.worker.thread_up.store(false, Relaxed);
        if self.inner.worker.wake.is_some() {
            // On demand: the child's thread starts when work is queued for it.
            return Ok(());
        }
        self.spawn_worker(&mut h)
    }

    /// Stops the cache's background threads (the shrink worker, each pool's prefault thread)
    /// and waits for them to end; the cache works on without them until
    /// [`Zswap::unpark_threads`] starts them again (queued shrink work waits for that).
    /// For an embedder about to change credentials that only the calling thread holds
    /// (`capset`, `PR_SET_KEEPCAPS`, a raw `setuid` system call): threads inherit the
    /// credentials of the thread that makes them, and glibc's `setuid` family aborts the
    /// process when the call fails in one of its threads but not in another. A pressure
    /// monitor's thread ([`Zswap::start_pressure_monitor`]) is not parked: stop and start it
    /// again around the change.
    pub fn park_threads(&self) {
        {
            let mut h = self.worker.lock();
            if let Some(t) = h.take() {
                let w = &self.inner.worker;
                w.stop_and_join(t);
                w.state.lock().stop = false;
                w.thread_up.store(false, Relaxed);
            }
        }
        for p in self.inner.pools.live() {
            p.zs.park_threads();
        }
    }

    /// Starts the threads [`Zswap::park_threads`] stopped, from the calling thread (so with its
    /// credentials): each pool's prefault thread if it has work, and the shrink worker (on
    /// demand, if work is queued for it).
    pub fn unpark_threads(&self) -> Result<(), Error> {
        for p in self.inner.pools.live() {
            p.zs.unpark_threads();
        }
        let mut h = self.worker.lock();
        if h.is_some() {
            return Ok(());
        }
        let on_demand = self.inner.worker.wake.is_some();
        if on_demand && !self.inner.worker.state.lock().pending {
            return Ok(());
        }
        self.spawn_worker(&mut h)
    }

    /// True if a store queued the background worker and it has not started yet (one atomic
    /// load: cheap enough to poll after every operation).
    pub fn shrink_worker_queued(&self) -> bool {
        self.inner
            .worker
            .queued
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Wait until the background worker is neither queued nor running (a held worker's queued
    /// run does not count). False on timeout.
    pub fn wait_shrink_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let w = &self.inner.worker;
        let mut st = w.state.lock();
        // Queued work with no thread to run it yet (on demand) is not in progress.
        while (st.pending && !st.held && w.thread_up.load(Relaxed)) || st.running {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = w
                .idle_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Start the PSI pressure source: arm a trigger and run the shrinker on each event.
    pub fn start_pressure_monitor(&self, cfg: PressureConfig) -> Result<(), Error> {
        let mut p = self.pressure.lock();
        if let Some(old) = p.take() {
            old.stop();
        }
        *p = Some(pressure::Monitor::start(Arc::downgrade(&self.inner), cfg)?);
        Ok(())
    }

    /// Stop the PSI pressure source; returns the number of events it saw.
    pub fn stop_pressure_monitor(&self) -> u64 {
        self.pressure
            .lock()
            .take()
            .map_or(0, pressure::Monitor::stop)
    }

    /// Allocation failure hooks (tests; cargo feature `test-hooks`).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fault_hooks(&self) -> &FaultHooks {
        &self.inner.faults
    }
}

impl Drop for Zswap {
    fn drop(&mut self) {
        if let Some(p) = self.pressure.get_mut().take() {
            p.stop();
        }
        match self.worker.get_mut().take() {
            Some(h) => self.inner.worker.stop_and_join(h),
            // None started (on demand) or parked: none may start after this.
            None => self.inner.worker.state.lock().stop = true,
        }
        self.inner.pools.forget_snapshot();
    }
}

impl Inner {
    /// `Params::lru`, fixed at creation (kept by the pools, which lay out the lanes; a field of
    /// its own here would move `Inner`'s hot fields).
    #[inline]
    pub(crate) fn lru_mode(&self) -> LruMode {
        self.pools.lru_mode()
    }

    /// The lane (index into its cgroup's `lists`) of an entry in the index: its pool's
    /// `lane_base` plus its node (see `ZswapPool::lane_base`).
    #[inline]
    pub(crate) fn entry_lane(&self, e: &Entry) -> usize {
        self.pools.lane_base(e.pool) + usize::from(e.node)
    }

    /// The lanes (indices into a cgroup's `lists`) that hold entries of `node`: the node's
    /// list, or with per-pool lists each live pool's, oldest pool first.
    pub(crate) fn lanes(&self, node: usize) -> Vec<usize> {
        match self.lru_mode() {
            LruMode::Global => vec![node],
            LruMode::PerPool => self
                .pools
                .live()
                .iter()
                .map(|p| p.lane_base + node)
                .collect(),
        }
    }

    #[inline]
    pub(crate) fn area(&self, a: u32) -> Option<&Area> {
        self.areas.get(a as usize)?.get()
    }

    pub(crate) fn compact_pools(&self) -> u64 {
        let freed = self.pools.compact();
        self.stats.add(G::PoolPagesCompacted as usize, freed);
        freed
    }

    #[inline]
    pub(crate) fn count(&self, g: G) {
        self.stats.add(g as usize, 1);
    }

    /// Counts a failed backing-store write that the file system refused for lack of space
    /// (what a user must be told: unlike the kernel's preallocated swap device, a swap file
    /// that grows as it is written can fill its disk).
    #[cold]
    pub(crate) fn count_no_space(&self, e: &uzswap_backing::Error) {
        if matches!(e, uzswap_backing::Error::NoSpace { .. }) {
            self.count(G::SwapNoSpaceErrors);
        }
    }

    /// `count` on the calling thread's stripe `stripe` (see `stats::stripe_index`).
    #[inline]
    pub(crate) fn count_on(&self, stripe: usize, g: G) {
        self.stats.add_on(stripe, g as usize, 1);
    }
}
