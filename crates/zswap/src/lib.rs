//! uzswap-zswap: the kernel's zswap (compressed swap cache) in user space.
//!
//! **Owns**: store / load / invalidate of 4 KiB pages keyed by swap slot; one zsmalloc pool per
//! compressor (old pools keep serving their entries until the last goes); the single global
//! LRU with per-(cgroup, node) lists; writeback of cold entries to the backing swap file; the
//! pool limit with the accept-threshold hysteresis (optionally seed 003's proactive shrinking);
//! the shrink worker and the memory-pressure shrinker (count/scan, seed 001); an optional PSI
//! pressure source; cgroups with `zswap.max` and `zswap.writeback`; the kernel's counters.
//!
//! **Data layout** (see `index.rs`): per swap area a table of u32 slot words, split in shards
//! of 4096 slots, each shard under a mutex. A slot word is empty, a zero page (no entry, no
//! pool memory), the index of a 24-byte entry `{handle, cgroup, lru node, pool, length, node,
//! referenced}` in the shard's slab, or `ON_DISK` with the id of the cgroup that owned the page
//! (the kernel's swap_cgroup, for the disk refault credit), plus `LOADING` / `WRITEBACK` bits.
//! The LRU lists (`lru.rs`) are intrusive lists of 16-byte nodes holding the packed slot.
//! Counters are striped per thread (`stats.rs`); pool references are striped (`poolref.rs`).
//! Each pool keeps the memory of freed zspages for a second, bounded by the pool limit
//! (`pool::memory_policy`); the idle shrink worker and memory pressure give it back.
//!
//! **Store**: zero check → limits (cgroup zswap.max, pool limit) → compress into a per-thread
//! buffer outside any lock → `alloc_write` into the current pool → LRU node → counters, charge
//! and slot word (shard lock). **Load**: mark the slot `LOADING`, drop the lock, decompress straight into
//! the caller's page, re-lock, drop the entry if the load is exclusive. **Writeback** (from the
//! shrinkers only, never on the caller's store/load path except the kernel's one synchronous
//! attempt for a cgroup over zswap.max): rotate the LRU head to the tail under the list lock,
//! drop it, lock the slot's shard and revalidate the entry by identity (same list, same node
//! index), mark it `WRITEBACK`, decompress and write the block with no lock held, then free it.
//! A slot marked `LOADING` or `WRITEBACK` is owned by that operation: stores, loads and
//! invalidations of the same slot wait on the shard's condvar, so no race loses or corrupts a
//! page (the kernel gets the same from the swap-cache folio lock).
//!
//! **Lock order**: shard lock → swap file (only `discard` of a slot's stale block, which must
//! happen before the slot is published again). LRU list locks are leaves: the free path unlinks
//! the LRU node after dropping the shard lock, and the shrinker drops the list lock before taking
//! the shard lock, so the two are never nested. Pool registry, cgroup admin and worker mutexes
//! are leaves taken off the hot path (a store takes the registry lock only when its per-thread
//! pool snapshot is stale). zsmalloc (its own class locks) is only called with none of our
//! locks held.
//!
//! **Caller contract** (the kernel's swap-cache folio lock): store / load / invalidate of one
//! slot should not race each other; if they do, they are serialised per slot but their order is
//! whatever the race gives. Slot allocation belongs to the caller (`SwapFile::alloc_slot`).

mod cgroup;
mod index;
mod lru;
mod numa;
mod params;
mod pool;
mod poolref;
mod pressure;
mod shrink;
mod stats;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use uzswap_zsmalloc::Handle;

pub use cgroup::{CgroupId, MAX_CGROUPS};
pub use numa::{nr_nodes, MAX_NUMA_NODES};
pub use params::{mem_total_bytes, Params, WarmProtection};
pub use pool::MAX_POOLS;
pub use pressure::PressureConfig;
pub use shrink::ShrinkScan;
pub use stats::{CgroupCounters, Counters};
pub use uzswap_compress::Algorithm;
pub use uzswap_swapfile::{SwapFile, SwapSlot};

use index::{AreaIndex, Entry, Shard, SlotValue, SlotWord};
use stats::{Striped, C, G, NR_GLOBAL};

/// Page size of the cache.
pub const PAGE_SIZE: usize = 4096;
/// Swap areas a cache can hold (the kernel's MAX_SWAPFILES is about 32).
pub const MAX_AREAS: usize = 32;

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("no swap area {0} (add a swap file first)")]
    NoSwapArea(u32),
    #[error("swap area {0} was already added")]
    AreaExists(u32),
    #[error("swap area number {0} is beyond the maximum of {MAX_AREAS}")]
    TooManyAreas(u32),
    #[error("slot {0:?} lies beyond its swap area")]
    SlotOutOfRange(SwapSlot),
    #[error("page buffer has {0} bytes, expected {PAGE_SIZE}")]
    BadPageLength(usize),
    #[error("decompression of slot {0:?} failed (corrupt pool data)")]
    Decompress(SwapSlot),
    #[error("swap file: {0}")]
    Swap(#[from] uzswap_swapfile::Error),
    #[error("zsmalloc pool: {0}")]
    Pool(uzswap_zsmalloc::Error),
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    #[error("no cgroup {0}")]
    NoSuchCgroup(u32),
    #[error("no NUMA node {0} (see Params::numa_nodes)")]
    NoSuchNode(usize),
    #[error("cgroup {0} still has online children")]
    CgroupBusy(u32),
    #[error("too many cgroups (at most {MAX_CGROUPS})")]
    TooManyCgroups,
    #[error("too many compressor pools alive (at most {MAX_POOLS})")]
    TooManyPools,
    #[error("cgroup {0} has zswap writeback disabled: the page can't go to the swap file")]
    WritebackDisabled(u32),
    #[error("pressure monitor: {0}")]
    Pressure(String),
}

/// Why a store was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RejectReason {
    /// `enabled` is off.
    Disabled,
    /// The pool is at max_pool_percent (or above the accept threshold after hitting it).
    PoolLimit,
    /// The cgroup or an ancestor is at memory.zswap.max.
    CgroupLimit,
    /// The compressor failed (reject_compress_fail).
    CompressFail,
    /// The page doesn't compress and may not be stored as-is (reject_compress_poor).
    CompressPoor,
    /// The pool could not allocate (reject_alloc_fail).
    AllocFail,
    /// No room for the entry metadata (reject_kmemcache_fail).
    KmemcacheFail,
    /// No swap file for the slot's area.
    NoSwapArea,
    /// The slot's offset is beyond its area.
    SlotOutOfRange,
    /// The page buffer is not 4096 bytes.
    BadPageLength,
    /// Unknown cgroup.
    NoSuchCgroup,
    /// The node given to `store_on_node` is not below `Params::numa_nodes`.
    NoSuchNode,
}

/// Result of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum StoreOutcome {
    /// Compressed into the pool.
    Stored,
    /// A zero-filled page: recorded in the slot, no entry, no pool memory.
    StoredZero,
    /// Did not compress; stored as-is (the cgroup may write back).
    StoredIncompressible,
    /// Not stored (from `swap_out`: written to the swap file instead).
    Rejected(RejectReason),
}

/// Result of a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LoadOutcome {
    /// Served from the pool (or the zero map).
    Hit,
    /// Read from the swap file (the entry had been written back, or the page was swapped out
    /// directly).
    FromSwapFile,
    /// Nothing stored for this slot.
    Absent,
}

/// What one slot holds (tests and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    Empty,
    Zero,
    Stored {
        length: u16,
        compressor: Algorithm,
        referenced: bool,
    },
}

/// One live compressor pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    pub compressor: Algorithm,
    pub chain_size: usize,
    /// Pages its zsmalloc pool holds.
    pub total_pages: u64,
    /// Receives new stores.
    pub current: bool,
    /// No longer current: freed when its last entry goes.
    pub killed: bool,
    /// References held (entries, plus the base reference while current).
    pub references: u64,
}

/// Metadata memory of the cache (entry slabs, slot tables, LRU nodes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MetadataUsage {
    pub index_bytes: u64,
    pub entry_bytes: u64,
    pub lru_bytes: u64,
    pub stored_pages: u64,
    pub zero_pages: u64,
}

impl MetadataUsage {
    pub fn total_bytes(&self) -> u64 {
        self.index_bytes + self.entry_bytes + self.lru_bytes
    }
}

/// Test hooks: make the next allocations fail.
#[derive(Default)]
pub struct FaultHooks {
    fail_pool_allocs: AtomicU64,
    fail_entry_allocs: AtomicU64,
}

impl FaultHooks {
    /// The next `n` pool allocations fail as if zsmalloc were out of memory.
    pub fn fail_next_pool_allocs(&self, n: u64) {
        self.fail_pool_allocs.store(n, Relaxed);
    }
    /// The next `n` entry allocations fail (reject_kmemcache_fail).
    pub fn fail_next_entry_allocs(&self, n: u64) {
        self.fail_entry_allocs.store(n, Relaxed);
    }
    #[inline]
    fn take(c: &AtomicU64) -> bool {
        c.load(Relaxed) > 0
            && c.fetch_update(Relaxed, Relaxed, |v| v.checked_sub(1))
                .is_ok()
    }
}

struct Area {
    swap: Arc<SwapFile>,
    index: AreaIndex,
}

/// Parameters read on the hot path, kept as atomics (the full `Params` sits behind a mutex).
struct HotParams {
    enabled: AtomicBool,
    max_pages: AtomicU64,
    accept_pages: AtomicU64,
    proactive_start: AtomicU64,
    proactive: AtomicBool,
    reject_poor: AtomicBool,
    shrinker_enabled: AtomicBool,
    warm: AtomicU8,
    memcg_sync: AtomicBool,
    rotation_is_failure: AtomicBool,
}

impl HotParams {
    fn set(&self, p: &Params) {
        self.enabled.store(p.enabled, Relaxed);
        self.max_pages.store(p.max_pool_pages(), Relaxed);
        self.accept_pages.store(p.accept_threshold_pages(), Relaxed);
        self.proactive_start
            .store(p.proactive_start_pages(), Relaxed);
        self.proactive.store(p.proactive_shrink, Relaxed);
        self.reject_poor.store(p.reject_compress_poor, Relaxed);
        self.shrinker_enabled.store(p.shrinker_enabled, Relaxed);
        self.warm.store(p.warm_protection as u8, Relaxed);
        self.memcg_sync.store(p.memcg_limit_sync_writeback, Relaxed);
        self.rotation_is_failure
            .store(p.rotation_is_failure, Relaxed);
    }
    fn warm(&self) -> WarmProtection {
        if self.warm.load(Relaxed) == WarmProtection::ProtectedSize as u8 {
            WarmProtection::ProtectedSize
        } else {
            WarmProtection::SecondChance
        }
    }
}

#[derive(Default)]
struct WorkerState {
    pending: bool,
    running: bool,
    stop: bool,
    /// Queued runs wait until released (`hold_shrink_worker`).
    held: bool,
    /// Cgroups whose zswap.max rejected a store (async mode): shrink them below their limit.
    memcgs: Vec<u32>,
}

struct WorkerCtl {
    queued: AtomicBool,
    state: Mutex<WorkerState>,
    cv: Condvar,
    idle_cv: Condvar,
}

pub(crate) struct Inner {
    params: Mutex<Params>,
    hot: HotParams,
    reached_full: AtomicBool,
    pools: pool::Pools,
    areas: Box<[OnceLock<Area>]>,
    cgroups: cgroup::Cgroups,
    stats: Striped<NR_GLOBAL>,
    /// Stores and loads in progress (the shrink worker yields while any are).
    hot_ops: Striped<1>,
    worker: WorkerCtl,
    faults: FaultHooks,
    nodes: usize,
}

/// The cache. `Send + Sync`; share it by reference or in an `Arc`. Dropping it stops its
/// background threads.
pub struct Zswap {
    inner: Arc<Inner>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    pressure: Mutex<Option<pressure::Monitor>>,
}

/// Counts an operation in flight while alive.
struct HotGuard<'a>(&'a Striped<1>);
impl<'a> HotGuard<'a> {
    #[inline]
    fn new(s: &'a Striped<1>) -> Self {
        s.add(0, 1);
        HotGuard(s)
    }
}
impl Drop for HotGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.sub(0, 1);
    }
}

thread_local! {
    /// The slot after this thread's last load, as (area, offset): a load of exactly that slot
    /// continues a sequential run (a scan, a swap-in readahead window, a pager faulting
    /// neighbouring pages), and prefetches for the next two loads of the run.
    static NEXT_LOAD: Cell<(u32, u64)> = const { Cell::new((u32::MAX, 0)) };
    static COMP_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static PAGE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Does a load of `slot` continue this thread's sequential run? Records `slot` as the run's
/// latest either way.
#[inline]
fn continues_run(slot: SwapSlot) -> bool {
    let next = (slot.area, slot.offset.wrapping_add(1));
    NEXT_LOAD.with(|c| c.replace(next)) == (slot.area, slot.offset)
}

/// Run `f` with this thread's buffer of at least `len` bytes (reused, never freed per page).
fn with_buf<R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<u8>>>,
    len: usize,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut b) => {
            if b.len() < len {
                b.resize(len, 0);
            }
            f(&mut b[..len])
        }
        // Re-entered (not expected): use a temporary buffer rather than fail.
        Err(_) => f(&mut vec![0u8; len]),
    })
}

/// True if every byte of the page is zero (first line first: see below).
#[inline]
fn is_zero_page(p: &[u8]) -> bool {
    // The first line decides for almost every page, and compression reads it next anyway
    // (checking the last line first cost a cache miss of its own); the rest is OR-folded in
    // 256-byte blocks the compiler vectorizes.
    let (head, rest) = p.split_at(64.min(p.len()));
    if head.iter().fold(0u8, |a, &b| a | b) != 0 {
        return false;
    }
    let mut blocks = rest.chunks_exact(256);
    blocks.all(|c| c.iter().fold(0u8, |a, &b| a | b) == 0)
        && blocks.remainder().iter().all(|&b| b == 0)
}

/// Bound of a pool's cache of freed zspage memory: the pool limit (see `pool::memory_policy`).
fn cache_bound(p: &Params) -> usize {
    usize::try_from(p.max_pool_pages()).unwrap_or(usize::MAX)
}

/// How often the idle shrink worker returns expired cached pool memory to the OS.
const PURGE_INTERVAL: Duration = Duration::from_millis(uzswap_zsmalloc::DEFAULT_FREE_PAGE_DECAY_MS);

#[inline]
fn pack_slot(slot: SwapSlot) -> u64 {
    (u64::from(slot.area) << 48) | slot.offset
}

#[inline]
fn unpack_slot(key: u64) -> SwapSlot {
    SwapSlot {
        area: (key >> 48) as u32,
        offset: key & ((1 << 48) - 1),
    }
}

impl Zswap {
    /// A cache with these parameters and no swap area yet; starts the shrink worker thread.
    pub fn new(params: Params) -> Result<Zswap, Error> {
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
            rotation_is_failure: AtomicBool::new(false),
        };
        hot.set(&params);
        let inner = Arc::new(Inner {
            pools: pool::Pools::new(params.compressor, params.chain_size, cache_bound(&params))?,
            params: Mutex::new(params),
            hot,
            reached_full: AtomicBool::new(false),
            areas: (0..MAX_AREAS).map(|_| OnceLock::new()).collect(),
            cgroups: cgroup::Cgroups::new(nodes),
            stats: Striped::new(),
            hot_ops: Striped::new(),
            worker: WorkerCtl {
                queued: AtomicBool::new(false),
                state: Mutex::new(WorkerState::default()),
                cv: Condvar::new(),
                idle_cv: Condvar::new(),
            },
            faults: FaultHooks::default(),
            nodes,
        });
        let w = inner.clone();
        let handle = std::thread::Builder::new()
            .name("zswap-shrink".into())
            .spawn(move || w.worker_main())
            .map_err(|e| Error::InvalidParam(format!("cannot start the shrink worker: {e}")))?;
        Ok(Zswap {
            inner,
            worker: Mutex::new(Some(handle)),
            pressure: Mutex::new(None),
        })
    }

    /// Attach a swap file; its area number is `swap.area()`.
    pub fn add_swap_file(&self, swap: Arc<SwapFile>) -> Result<(), Error> {
        let a = swap.area();
        let cell = self
            .inner
            .areas
            .get(a as usize)
            .ok_or(Error::TooManyAreas(a))?;
        let index = AreaIndex::new(swap.capacity());
        cell.set(Area { swap, index })
            .map_err(|_| Error::AreaExists(a))
    }

    /// The swap file of an area.
    pub fn swap_file(&self, area: u32) -> Option<Arc<SwapFile>> {
        self.inner.area(area).map(|a| a.swap.clone())
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
        c.cgroups = i.cgroups.snapshot();
        c
    }

    /// The parameters in force.
    pub fn params(&self) -> Params {
        self.inner.params.lock().clone()
    }

    /// Change parameters at run time. A new compressor or chain size creates a new pool; old
    /// pools keep serving their entries and are freed with their last entry. `numa_nodes` is
    /// fixed when the cache is created: a different value is an error.
    pub fn set_params(&self, p: Params) -> Result<(), Error> {
        p.validate()?;
        let mut cur = self.inner.params.lock();
        if p.numa_nodes != cur.numa_nodes {
            return Err(Error::InvalidParam(format!(
                "numa_nodes can't change at run time (the cache has {})",
                cur.numa_nodes
            )));
        }
        if p.compressor != cur.compressor || p.chain_size != cur.chain_size {
            self.inner.pools.switch(p.compressor, p.chain_size)?;
        }
        self.inner.hot.set(&p);
        if p.max_pool_percent != cur.max_pool_percent
            || p.total_memory_bytes != cur.total_memory_bytes
        {
            // A new limit re-evaluates the hysteresis latch from scratch.
            self.inner.reached_full.store(false, Relaxed);
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
        self.inner.cgroups.remove(cg)
    }

    /// memory.zswap.max in bytes (`None` = "max").
    pub fn set_cgroup_zswap_max(&self, cg: CgroupId, max: Option<u64>) -> Result<(), Error> {
        self.inner.cgroups.set_max(cg, max)
    }

    /// memory.zswap.writeback.
    pub fn set_cgroup_writeback(&self, cg: CgroupId, enabled: bool) -> Result<(), Error> {
        self.inner.cgroups.set_writeback(cg, enabled)
    }

    /// Compressed bytes charged to `cg` and its descendants (`memory.zswap.current`); `None`
    /// for an unknown cgroup. One gauge read: cheap enough for a charge path.
    pub fn cgroup_zswap_bytes(&self, cg: CgroupId) -> Option<u64> {
        self.inner
            .cgroups
            .get(cg.0)
            .map(|c| c.stats.gauge(C::ZswapBytes as usize))
    }

    /// Metadata bytes per stored (compressed or raw) page: entry slabs, slot tables and LRU
    /// nodes, divided by `stored_pages` (zero pages only cost their 4-byte slot word).
    pub fn metadata_bytes_per_entry(&self) -> f64 {
        let m = self.metadata();
        m.total_bytes() as f64 / m.stored_pages.max(1) as f64
    }

    /// Metadata memory, measured from the allocations held now.
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
                m.lru_bytes += c
                    .lists
                    .iter()
                    .map(|l| l.lock().heap_bytes() as u64)
                    .sum::<u64>();
            }
        }
        m.stored_pages = i.stats.gauge(G::StoredPages as usize);
        m.zero_pages = i.stats.gauge(G::ZeroPages as usize);
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

    /// Slots on a cgroup's LRU list for `node`, coldest first.
    pub fn lru_slots(&self, cg: CgroupId, node: usize) -> Vec<SwapSlot> {
        let Some(c) = self.inner.cgroups.get(cg.0) else {
            return Vec::new();
        };
        let Some(l) = c.lists.get(node) else {
            return Vec::new();
        };
        let keys = l.lock().keys();
        keys.into_iter().map(unpack_slot).collect()
    }

    /// Pages held by all pools (`zswap_total_pages`).
    pub fn pool_total_pages(&self) -> u64 {
        self.inner.pools.total_pages()
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
                total_pages: p.zs.total_pages() as u64,
                current: p.id == cur.id,
                killed: p.refs.is_killed(),
                references: p.refs.count().max(0) as u64,
            })
            .collect()
    }

    /// The allocator's statistics (class table, debugfs `classes` layout) of every live pool,
    /// current first.
    pub fn pool_stats(&self) -> Vec<(Algorithm, uzswap_zsmalloc::PoolStats)> {
        let cur = self.inner.pools.current();
        let mut live = self.inner.pools.live();
        live.sort_by_key(|p| p.id != cur.id);
        live.iter().map(|p| (p.alg, p.zs.stats())).collect()
    }

    /// The memory-pressure shrinker's count for (cgroup, node).
    pub fn shrinker_count(&self, cg: CgroupId, node: usize) -> u64 {
        self.inner.shrinker_count(cg.0, node)
    }

    /// The memory-pressure shrinker's scan for (cgroup, node).
    pub fn shrinker_scan(&self, cg: CgroupId, node: usize, nr_to_scan: u64) -> ShrinkScan {
        self.inner.shrinker_scan(cg.0, node, nr_to_scan)
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
    /// but it does not start, so an embedder decides when queued work runs (a replay lets it
    /// run when the faulting task leaves the kernel, deterministically). Releasing starts a
    /// queued run.
    pub fn hold_shrink_worker(&self, hold: bool) {
        let w = &self.inner.worker;
        let mut st = w.state.lock();
        st.held = hold;
        if !hold && st.pending {
            w.cv.notify_one();
        }
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
        while (st.pending && !st.held) || st.running {
            if w.idle_cv.wait_until(&mut st, deadline).timed_out() {
                return false;
            }
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

    /// Allocation failure hooks (tests).
    pub fn fault_hooks(&self) -> &FaultHooks {
        &self.inner.faults
    }
}

impl Drop for Zswap {
    fn drop(&mut self) {
        if let Some(p) = self.pressure.get_mut().take() {
            p.stop();
        }
        {
            let mut st = self.inner.worker.state.lock();
            st.stop = true;
            self.inner.worker.cv.notify_all();
        }
        if let Some(h) = self.worker.get_mut().take() {
            let _ = h.join();
        }
        self.inner.pools.forget_snapshot();
    }
}

impl Inner {
    #[inline]
    fn area(&self, a: u32) -> Option<&Area> {
        self.areas.get(a as usize)?.get()
    }

    fn compact_pools(&self) -> u64 {
        let freed = self.pools.compact();
        self.stats.add(G::PoolPagesCompacted as usize, freed);
        freed
    }

    #[inline]
    fn count(&self, g: G) {
        self.stats.add(g as usize, 1);
    }

    /// `node`: the page's NUMA node, `None` for the calling CPU's.
    fn store(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: Option<usize>,
    ) -> StoreOutcome {
        let _hot = HotGuard::new(&self.hot_ops);
        if page.len() != PAGE_SIZE {
            return StoreOutcome::Rejected(RejectReason::BadPageLength);
        }
        let Some(area) = self.area(slot.area) else {
            return StoreOutcome::Rejected(RejectReason::NoSwapArea);
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return StoreOutcome::Rejected(RejectReason::SlotOutOfRange);
        };
        if self.cgroups.get(cg.0).is_none() {
            return StoreOutcome::Rejected(RejectReason::NoSuchCgroup);
        }
        if node.is_some_and(|n| n >= self.nodes) {
            return StoreOutcome::Rejected(RejectReason::NoSuchNode);
        }
        let cg = self.cgroups.resolve(cg.0);
        if is_zero_page(page) {
            self.store_zero(area, shard, i, slot);
            return StoreOutcome::StoredZero;
        }
        match self.store_compressed(area, shard, i, slot, page, cg, node) {
            Ok(o) => o,
            Err(reason) => {
                // check_old: a stale copy must not survive a failed store.
                self.replace_slot(area, shard, i, slot, SlotValue::Empty);
                let proactive = self.hot.proactive.load(Relaxed);
                // Kernel: shrink whenever a store fails while the pool is full. Seed 003: also
                // when the allocator failed, to make room.
                if (!proactive && self.reached_full.load(Relaxed))
                    || (proactive && reason == RejectReason::AllocFail)
                {
                    self.kick_worker();
                }
                StoreOutcome::Rejected(reason)
            }
        }
    }

    /// Seed 002: a zero page is only a slot value; the store and load helpers and
    /// `replace_slot` are the only places that know about it.
    fn store_zero(&self, area: &Area, shard: &Shard, i: usize, slot: SwapSlot) {
        self.replace_slot(area, shard, i, slot, SlotValue::Zero);
        self.count(G::SwpoutZero);
    }

    /// Set a slot to `Empty` or `Zero`, freeing whatever it held (entry, zero mark, disk block).
    fn replace_slot(&self, area: &Area, shard: &Shard, i: usize, slot: SwapSlot, new: SlotValue) {
        debug_assert!(!matches!(new, SlotValue::Entry(_)));
        let (mut t, w) = shard.lock_idle(i);
        if w.value() == SlotValue::Empty && new == SlotValue::Empty {
            return;
        }
        let old = self.take_entry(&mut t, w);
        Self::discard_owned(area, slot, w);
        t.set_word(i, SlotWord::EMPTY.with_value(new));
        drop(t);
        self.after_replace(w, old, new == SlotValue::Zero);
    }

    /// Forget the slot's swap-file block if it has one. Called while the caller still owns the
    /// slot (shard lock held, or its in-flight bit set): once the slot is published again a
    /// writeback may write a new block, which a late discard would destroy.
    #[inline]
    fn discard_owned(area: &Area, slot: SwapSlot, old: SlotWord) {
        if old.on_disk() {
            area.swap.discard(slot);
        }
    }

    /// Remove the entry a word names from the slab (the caller then rewrites the word).
    #[inline]
    fn take_entry(&self, t: &mut index::ShardTable, w: SlotWord) -> Option<Entry> {
        match w.value() {
            SlotValue::Entry(ei) => {
                let e = *t.entry(ei);
                t.free_entry(ei);
                Some(e)
            }
            _ => None,
        }
    }

    /// Bookkeeping after a slot word was replaced (shard lock dropped; the disk block, if
    /// any, was already discarded by `discard_owned`).
    #[inline]
    fn after_replace(&self, old: SlotWord, old_entry: Option<Entry>, new_zero: bool) {
        if let Some(e) = old_entry {
            self.release_entry(e);
        }
        match (old.value() == SlotValue::Zero, new_zero) {
            (false, true) => self.stats.add(G::ZeroPages as usize, 1),
            (true, false) => self.stats.sub(G::ZeroPages as usize, 1),
            _ => {}
        }
    }

    /// Free everything an entry holds once it is out of the index: LRU node, pool object,
    /// charge, counters, and last its pool reference (which may free an old pool).
    fn release_entry(&self, e: Entry) {
        if let Some(c) = self.cgroups.get(e.cgroup) {
            c.lists[e.node as usize].lock().remove(e.lru);
        }
        // SAFETY: the entry was taken out of the index by the caller, which now owns its pool
        // reference until the `put` below, the last use of `pool`.
        let pool = unsafe { self.pools.get(e.pool) };
        if let Some(h) = Handle::from_raw(e.handle) {
            let _ = pool.zs.free(h);
        }
        self.cgroups.uncharge(e.cgroup, u64::from(e.length));
        self.stats.sub(G::StoredPages as usize, 1);
        if e.length as usize == PAGE_SIZE {
            self.stats.sub(G::StoredIncompressiblePages as usize, 1);
        }
        self.pools.put(pool);
    }

    /// Pool limit with the kernel's hysteresis, or seed 003's proactive variant. True = reject.
    fn check_limits(&self, cur: u64) -> bool {
        let max = self.hot.max_pages.load(Relaxed);
        if self.hot.proactive.load(Relaxed) {
            if cur >= max {
                self.count(G::PoolLimitHit);
                self.kick_worker();
                return true;
            }
            if cur >= self.hot.proactive_start.load(Relaxed) {
                self.kick_worker();
            }
            return false;
        }
        if cur >= max {
            self.count(G::PoolLimitHit);
            if !self.reached_full.load(Relaxed) {
                self.reached_full.store(true, Relaxed);
            }
        } else if self.reached_full.load(Relaxed) && cur <= self.hot.accept_pages.load(Relaxed) {
            self.reached_full.store(false, Relaxed);
        }
        self.reached_full.load(Relaxed)
    }

    #[allow(clippy::too_many_arguments)]
    fn store_compressed(
        &self,
        area: &Area,
        shard: &Shard,
        i: usize,
        slot: SwapSlot,
        page: &[u8],
        cg: u32,
        node: Option<usize>,
    ) -> Result<StoreOutcome, RejectReason> {
        if !self.hot.enabled.load(Relaxed) {
            self.count(G::RejectDisabled);
            return Err(RejectReason::Disabled);
        }
        if self.cgroups.over_limit(cg).is_some() {
            let retry = self.hot.memcg_sync.load(Relaxed) && self.shrink_memcg(cg).is_ok();
            if !retry {
                self.count(G::RejectCgroupLimit);
                if !self.hot.memcg_sync.load(Relaxed) {
                    self.kick_memcg(cg);
                }
                return Err(RejectReason::CgroupLimit);
            }
        }
        // Limit check and a reference on the current pool, from this thread's snapshot.
        let mut pool_id = None;
        for _ in 0..8 {
            let r = self.pools.with_snapshot(|s| {
                let cur: u64 = s.all.iter().map(|p| p.zs.total_pages() as u64).sum();
                if self.check_limits(cur) {
                    return Err(true);
                }
                match s.current.refs.tryget() {
                    Ok(()) => Ok(s.current.id),
                    Err(st) => {
                        if st == poolref::RefState::Release {
                            self.pools.release(s.current.id);
                        }
                        Err(false)
                    }
                }
            });
            match r {
                Ok(id) => {
                    pool_id = Some(id);
                    break;
                }
                Err(true) => {
                    self.count(G::RejectPoolLimit);
                    return Err(RejectReason::PoolLimit);
                }
                Err(false) => continue,
            }
        }
        let Some(pool_id) = pool_id else {
            self.count(G::RejectAllocFail);
            return Err(RejectReason::AllocFail);
        };
        // SAFETY: the `tryget` above gave us a reference on `pool_id`; every path below either
        // hands it to the new entry or puts it, after the last use of `pool`.
        let pool = unsafe { self.pools.get(pool_id) };
        let res = with_buf(
            &COMP_BUF,
            uzswap_compress::MAX_COMPRESSED_LEN.max(PAGE_SIZE),
            |buf| {
                let data: &[u8] = match uzswap_compress::compress(pool.alg, page, buf) {
                    Ok(n) if n > 0 && n < PAGE_SIZE => &buf[..n],
                    r => {
                        let failed = r.is_err();
                        if self.hot.reject_poor.load(Relaxed) {
                            return Err(if failed {
                                RejectReason::CompressFail
                            } else {
                                RejectReason::CompressPoor
                            });
                        }
                        if !self.cgroups.writeback_enabled(cg) {
                            // A raw page that can never be written back only wastes memory.
                            return Err(if failed {
                                RejectReason::CompressFail
                            } else {
                                RejectReason::CompressPoor
                            });
                        }
                        page
                    }
                };
                if FaultHooks::take(&self.faults.fail_pool_allocs) {
                    return Err(RejectReason::AllocFail);
                }
                match pool.zs.alloc_write(data) {
                    Ok(h) => Ok((h, data.len())),
                    Err(uzswap_zsmalloc::Error::TooLarge { .. }) => Err(RejectReason::CompressPoor),
                    Err(_) => Err(RejectReason::AllocFail),
                }
            },
        );
        let (handle, length) = match res {
            Ok(x) => x,
            Err(reason) => {
                self.count(match reason {
                    RejectReason::CompressFail => G::RejectCompressFail,
                    RejectReason::CompressPoor => G::RejectCompressPoor,
                    _ => G::RejectAllocFail,
                });
                self.pools.put(pool);
                return Err(reason);
            }
        };
        let Some(cgrp) = self.cgroups.get(cg) else {
            let _ = pool.zs.free(handle);
            self.pools.put(pool);
            return Err(RejectReason::NoSuchCgroup);
        };
        let node = node.unwrap_or_else(|| numa::current_node(self.nodes));
        let warm = self.hot.warm();
        let lru = if FaultHooks::take(&self.faults.fail_entry_allocs) {
            None
        } else {
            let mut l = cgrp.lists[node].lock();
            let idx = l.push_tail(pack_slot(slot));
            if warm == WarmProtection::ProtectedSize && idx.is_some() {
                // Seed 001: every new entry counts as warm; the estimate decays to half when it
                // exceeds a quarter of the list.
                l.nr_protected += 1;
                if l.nr_protected > l.len() / 4 {
                    l.nr_protected /= 2;
                }
            }
            idx
        };
        let entry = Entry {
            handle: handle.to_raw(),
            cgroup: cg,
            lru: lru.unwrap_or(0),
            pool: pool_id,
            length: length as u16,
            node: node as u8,
            referenced: warm == WarmProtection::SecondChance,
        };
        let (mut t, w) = shard.lock_idle(i);
        let ei = match lru.and_then(|_| t.alloc_entry(entry)) {
            Some(ei) => ei,
            None => {
                drop(t);
                if let Some(l) = lru {
                    cgrp.lists[node].lock().remove(l);
                }
                let _ = pool.zs.free(handle);
                self.pools.put(pool);
                self.count(G::RejectKmemcacheFail);
                return Err(RejectReason::KmemcacheFail);
            }
        };
        // Account before publishing, so a writeback or invalidation that frees the entry as soon
        // as the lock drops never un-counts it first.
        self.stats.add(G::StoredPages as usize, 1);
        if length == PAGE_SIZE {
            self.stats.add(G::StoredIncompressiblePages as usize, 1);
        }
        self.cgroups.charge(cg, length as u64);
        let old = self.take_entry(&mut t, w);
        Self::discard_owned(area, slot, w);
        t.set_word(i, SlotWord::EMPTY.with_value(SlotValue::Entry(ei)));
        drop(t);
        self.after_replace(w, old, false);
        self.count(G::Zswpout);
        self.cgroups.event(cg, C::Zswpout);
        Ok(if length == PAGE_SIZE {
            StoreOutcome::StoredIncompressible
        } else {
            StoreOutcome::Stored
        })
    }

    /// Decompress (or copy, for a raw entry) into `page`. The caller owns the entry (slot marked
    /// in flight) so its pool reference is held.
    fn decompress_entry(&self, e: &Entry, page: &mut [u8]) -> bool {
        // SAFETY: the caller owns the entry (its slot is marked in flight), and with it the
        // entry's pool reference, for the whole call.
        let pool = unsafe { self.pools.get(e.pool) };
        let Some(h) = Handle::from_raw(e.handle) else {
            return false;
        };
        let Ok(obj) = pool.zs.read(h) else {
            return false;
        };
        let len = e.length as usize;
        if obj.len() < len {
            return false;
        }
        let src = &obj[..len];
        if len == PAGE_SIZE {
            page.copy_from_slice(src);
            true
        } else {
            matches!(uzswap_compress::decompress(pool.alg, src, page), Ok(n) if n == PAGE_SIZE)
        }
    }

    /// During a sequential run of loads, start the cache misses of the next two loads while
    /// this one decompresses: the object of slot `i + 1` (its handle line was prefetched by the
    /// previous load) and the handle line of slot `i + 2`. The pool's layout scatters
    /// neighbouring slots over size classes, so the hardware prefetcher can't follow them;
    /// without this a sequential load waits on both misses (lz4 load 1.5 % slower,
    /// BENCHMARKS.md section 1). Needs the shard lock: the neighbours' entries hold their
    /// pools alive only while they are in the table. A run stops at the shard's end.
    #[inline]
    fn prefetch_run(&self, t: &index::ShardTable, i: usize) {
        if let Some((pool, h, len)) = self.neighbour(t, i + 1) {
            pool.zs.prefetch_object(h, len);
        }
        if let Some((pool, h, _)) = self.neighbour(t, i + 2) {
            pool.zs.prefetch_handle(h);
        }
    }

    /// The pool, handle and length of slot `j`'s entry in this shard, if it has one.
    #[inline]
    fn neighbour<'t>(
        &'t self,
        t: &'t index::ShardTable,
        j: usize,
    ) -> Option<(&'t pool::ZPool, Handle, usize)> {
        if j >= index::SHARD_SLOTS {
            return None;
        }
        let SlotValue::Entry(ej) = t.word(j).value() else {
            return None;
        };
        let n = t.entry(ej);
        let h = Handle::from_raw(n.handle)?;
        // SAFETY: `n` is in the index and the caller holds its shard lock (it borrows `t`), so
        // its pool reference is held for as long as the borrow (see `Pools::get`).
        let pool = unsafe { self.pools.get(n.pool) };
        Some((pool, h, n.length as usize))
    }

    /// `node`: where the page is read into, `None` for the calling CPU's node.
    fn load(
        &self,
        slot: SwapSlot,
        page: &mut [u8],
        exclusive: bool,
        node: Option<usize>,
    ) -> Result<LoadOutcome, Error> {
        let _hot = HotGuard::new(&self.hot_ops);
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        if let Some(n) = node.filter(|&n| n >= self.nodes) {
            return Err(Error::NoSuchNode(n));
        }
        // let-else, not `ok_or(..)?`: an eager error value has drop glue, run on every call.
        let Some(area) = self.area(slot.area) else {
            return Err(Error::NoSwapArea(slot.area));
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return Err(Error::SlotOutOfRange(slot));
        };
        let sequential = continues_run(slot);
        let (mut t, w) = shard.lock_idle(i);
        match w.value() {
            SlotValue::Zero => {
                page.fill(0);
                if exclusive {
                    t.set_word(i, w.with_value(SlotValue::Empty));
                    drop(t);
                    self.stats.sub(G::ZeroPages as usize, 1);
                }
                self.count(G::SwpinZero);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::Entry(ei) => {
                let e = *t.entry(ei);
                if sequential {
                    self.prefetch_run(&t, i);
                }
                t.set_word(i, w.with_loading());
                drop(t);
                let ok = self.decompress_entry(&e, page);
                let mut t = shard.table.lock();
                if !ok {
                    t.set_word(i, w);
                    shard.wake(&t);
                    drop(t);
                    page.fill(0);
                    self.count(G::DecompressFail);
                    return Err(Error::Decompress(slot));
                }
                if exclusive {
                    t.free_entry(ei);
                    t.set_word(i, w.with_value(SlotValue::Empty));
                } else {
                    // A page read and kept is warm: give it its second chance back.
                    if self.hot.warm() == WarmProtection::SecondChance {
                        t.entry_mut(ei).referenced = true;
                    }
                    t.set_word(i, w);
                }
                shard.wake(&t);
                drop(t);
                if exclusive {
                    self.release_entry(e);
                }
                self.count(G::Zswpin);
                self.cgroups.event(e.cgroup, C::Zswpin);
                Ok(LoadOutcome::Hit)
            }
            SlotValue::OnDisk(owner) => {
                t.set_word(i, w.with_loading());
                drop(t);
                let r = area.swap.read_page(slot, page);
                if r.is_ok() && exclusive {
                    // Still ours (LOADING): nobody can write this slot's block meanwhile.
                    area.swap.discard(slot);
                }
                let mut t = shard.table.lock();
                let still_on_disk = match &r {
                    Ok(()) => !exclusive,
                    Err(uzswap_swapfile::Error::NotWritten(_)) => false,
                    // Keep the block: the error may be transient, and it is reported.
                    Err(_) => true,
                };
                t.set_word(
                    i,
                    if still_on_disk {
                        w
                    } else {
                        w.with_value(SlotValue::Empty)
                    },
                );
                shard.wake(&t);
                drop(t);
                match r {
                    Ok(()) => {
                        self.count(G::Pswpin);
                        let node = node.unwrap_or_else(|| numa::current_node(self.nodes));
                        self.note_disk_swapin(owner, node);
                        Ok(LoadOutcome::FromSwapFile)
                    }
                    Err(uzswap_swapfile::Error::NotWritten(_)) => Ok(LoadOutcome::Absent),
                    Err(e) => {
                        self.count(if matches!(e, uzswap_swapfile::Error::Corrupt { .. }) {
                            G::SwapChecksumErrors
                        } else {
                            G::SwapReadErrors
                        });
                        Err(Error::Swap(e))
                    }
                }
            }
            SlotValue::Empty => Ok(LoadOutcome::Absent),
        }
    }

    /// A page came back from disk: feedback for the shrinker (seed 001 / second chance), on the
    /// list of the page's owner and the node the page is read into, as `zswap_folio_swapin`
    /// credits the new folio's lruvec. An offline owner's credit goes to the nearest online
    /// ancestor, which walks its lists (the kernel charges the faulting task's memcg then,
    /// which this API doesn't know).
    fn note_disk_swapin(&self, owner: u32, node: usize) {
        let Some(c) = self.cgroups.get(self.cgroups.resolve(owner)) else {
            return;
        };
        match self.hot.warm() {
            WarmProtection::SecondChance => {
                c.disk_swapins[node].fetch_add(1, Relaxed);
            }
            WarmProtection::ProtectedSize => c.lists[node].lock().nr_protected += 1,
        }
    }

    fn invalidate(&self, slot: SwapSlot) {
        let Some(area) = self.area(slot.area) else {
            return;
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return;
        };
        self.replace_slot(area, shard, i, slot, SlotValue::Empty);
    }

    fn swap_out(
        &self,
        slot: SwapSlot,
        page: &[u8],
        cg: CgroupId,
        node: Option<usize>,
    ) -> Result<StoreOutcome, Error> {
        let out = self.store(slot, page, cg, node);
        let StoreOutcome::Rejected(reason) = out else {
            return Ok(out);
        };
        match reason {
            RejectReason::NoSwapArea => return Err(Error::NoSwapArea(slot.area)),
            RejectReason::SlotOutOfRange => return Err(Error::SlotOutOfRange(slot)),
            RejectReason::BadPageLength => return Err(Error::BadPageLength(page.len())),
            RejectReason::NoSuchCgroup => return Err(Error::NoSuchCgroup(cg.0)),
            // Only an explicit node is ever rejected.
            RejectReason::NoSuchNode => return Err(Error::NoSuchNode(node.unwrap_or_default())),
            _ => {}
        }
        if !self.cgroups.writeback_enabled(cg.0) {
            return Err(Error::WritebackDisabled(cg.0));
        }
        // let-else, not `ok_or(..)?`: an eager error value has drop glue, run on every call.
        let Some(area) = self.area(slot.area) else {
            return Err(Error::NoSwapArea(slot.area));
        };
        let Some((shard, i)) = area.index.locate(slot.offset) else {
            return Err(Error::SlotOutOfRange(slot));
        };
        let (mut t, w) = shard.lock_idle(i);
        // The store above emptied the slot; if another caller raced in, this write wins.
        let old = self.take_entry(&mut t, w);
        t.set_word(i, SlotWord::EMPTY.with_writeback());
        drop(t);
        // Our write replaces any older block; no discard needed.
        self.after_replace(w, old, false);
        let r = area.swap.write_page(slot, page);
        let mut t = shard.table.lock();
        let value = if r.is_ok() {
            SlotValue::OnDisk(cg.0)
        } else {
            SlotValue::Empty
        };
        t.set_word(i, SlotWord::EMPTY.with_value(value));
        shard.wake(&t);
        drop(t);
        match r {
            Ok(()) => {
                self.count(G::Pswpout);
                Ok(out)
            }
            Err(e) => {
                self.count(G::SwapWriteErrors);
                Err(Error::Swap(e))
            }
        }
    }

    fn kick_worker(&self) {
        // Read first: while the worker is queued, stores above the threshold must not all write
        // the same cache line.
        let q = &self.worker.queued;
        if !q.load(Relaxed) && !q.swap(true, std::sync::atomic::Ordering::AcqRel) {
            let mut st = self.worker.state.lock();
            st.pending = true;
            self.worker.cv.notify_one();
        }
    }

    fn worker_main(self: Arc<Self>) {
        // Background reclaim must not compete with the page-in/out path (seed 003 patch 4).
        // SAFETY: setpriority on our own thread id; no memory is passed.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 5);
        }
        loop {
            let memcgs;
            {
                let mut st = self.worker.state.lock();
                while (!st.pending || st.held) && !st.stop {
                    if self.worker.cv.wait_for(&mut st, PURGE_INTERVAL).timed_out() {
                        // Idle: freed pool memory whose decay time passed goes back to the
                        // OS even if no store or free comes to do it.
                        drop(st);
                        self.pools.purge_expired();
                        st = self.worker.state.lock();
                    }
                }
                if st.stop {
                    st.running = false;
                    self.worker.idle_cv.notify_all();
                    return;
                }
                st.pending = false;
                st.running = true;
                memcgs = std::mem::take(&mut st.memcgs);
            }
            self.worker
                .queued
                .store(false, std::sync::atomic::Ordering::Release);
            for cg in memcgs {
                self.shrink_memcg_to_limit(cg);
            }
            self.shrink_worker();
            let mut st = self.worker.state.lock();
            st.running = false;
            self.worker.idle_cv.notify_all();
        }
    }

    /// Queue a cgroup that hit its zswap.max for background writeback (async mode).
    fn kick_memcg(&self, cg: u32) {
        let mut st = self.worker.state.lock();
        if !st.memcgs.contains(&cg) {
            st.memcgs.push(cg);
        }
        st.pending = true;
        self.worker.cv.notify_one();
    }

    /// Write back entries of `cg` until neither it nor an ancestor is over zswap.max (the
    /// asynchronous form of the kernel's one synchronous `shrink_memcg` in `zswap_store`).
    fn shrink_memcg_to_limit(&self, cg: u32) {
        let mut failures = 0;
        while self.cgroups.over_limit(cg).is_some() && !self.stopping() {
            match self.shrink_memcg(cg) {
                Ok(()) => {}
                Err(shrink::ShrinkErr::Rotated) if !self.hot.rotation_is_failure.load(Relaxed) => {}
                Err(shrink::ShrinkErr::Rotated) => {
                    failures += 1;
                    if failures >= 16 {
                        return;
                    }
                }
                Err(shrink::ShrinkErr::NoEnt) => return,
                Err(shrink::ShrinkErr::Again) => {
                    failures += 1;
                    if failures >= 16 {
                        return;
                    }
                }
            }
        }
    }

    fn stopping(&self) -> bool {
        self.worker.state.lock().stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn zero_detection() {
        let mut p = vec![0u8; PAGE_SIZE];
        assert!(is_zero_page(&p));
        p[100] = 1;
        assert!(!is_zero_page(&p));
        p[100] = 0;
        p[PAGE_SIZE - 1] = 1;
        assert!(!is_zero_page(&p));
    }

    fn cache() -> Zswap {
        let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, 64).unwrap());
        for _ in 0..64 {
            swap.alloc_slot().unwrap();
        }
        let z = Zswap::new(Params {
            shrinker_enabled: true,
            ..Params::default()
        })
        .unwrap();
        z.add_swap_file(swap).unwrap();
        z
    }

    fn page(seed: u8) -> Vec<u8> {
        (0..PAGE_SIZE).map(|i| (i / 64) as u8 ^ seed).collect()
    }

    /// Mark a slot as being loaded, as a concurrent `load` does while it decompresses.
    fn set_loading(z: &Zswap, slot: SwapSlot, on: bool) {
        let (shard, i) = z.inner.area(0).unwrap().index.locate(slot.offset).unwrap();
        let mut t = shard.table.lock();
        let w = t.word(i);
        t.set_word(i, if on { w.with_loading() } else { w.idle() });
    }

    #[test]
    fn pressure_shrinker_stops_at_a_page_being_loaded() {
        let z = cache();
        for i in 0..4 {
            z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT);
        }
        // Clear the referenced bits, then make the second-coldest entry "being loaded".
        assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, 4).freed, 0);
        set_loading(&z, SwapSlot::new(0, 1), true);
        let r = z.shrinker_scan(CgroupId::ROOT, 0, 4);
        assert_eq!(
            (r.scanned, r.freed, r.stop),
            (2, 1, true),
            "wrote back slot 0, stopped at slot 1"
        );
        set_loading(&z, SwapSlot::new(0, 1), false);
        // Once the load is over the walk goes on.
        let r = z.shrinker_scan(CgroupId::ROOT, 0, 4);
        assert_eq!(r.freed, 3);
        let mut buf = vec![0u8; PAGE_SIZE];
        for i in 0..4 {
            assert_eq!(
                z.load(SwapSlot::new(0, i), &mut buf, false).unwrap(),
                LoadOutcome::FromSwapFile
            );
            assert_eq!(buf, page(i as u8));
        }
    }

    #[test]
    fn corrupt_pool_data_is_a_decompress_failure() {
        let z = cache();
        let s = SwapSlot::new(0, 9);
        assert_eq!(z.store(s, &page(3), CgroupId::ROOT), StoreOutcome::Stored);
        // Overwrite the compressed object in the pool with garbage.
        let (shard, i) = z.inner.area(0).unwrap().index.locate(9).unwrap();
        let e = {
            let t = shard.table.lock();
            let SlotValue::Entry(ei) = t.word(i).value() else {
                panic!("not stored")
            };
            *t.entry(ei)
        };
        let garbage = vec![0xffu8; e.length as usize];
        // SAFETY: the entry stays stored (nothing else runs on this cache), holding its pool.
        let pool = unsafe { z.inner.pools.get(e.pool) };
        pool.zs
            .write(Handle::from_raw(e.handle).unwrap(), &garbage)
            .unwrap();
        let mut buf = vec![0x55u8; PAGE_SIZE];
        assert!(matches!(
            z.load(s, &mut buf, true),
            Err(Error::Decompress(_))
        ));
        assert!(buf.iter().all(|&b| b == 0), "no garbage handed out");
        let c = z.counters();
        assert_eq!((c.decompress_fail, c.zswpin), (1, 0));
        // The entry is kept (as the kernel does); invalidation frees it.
        assert_eq!(c.stored_pages, 1);
        z.invalidate(s);
        assert_eq!(z.counters().stored_pages, 0);
    }

    #[test]
    fn seed003_worker_yields_to_stores_and_loads_in_flight() {
        let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, 4096).unwrap());
        for _ in 0..4096 {
            swap.alloc_slot().unwrap();
        }
        let params = Params {
            total_memory_bytes: 4 << 20,
            proactive_shrink: false,
            ..Params::default()
        };
        let z = Zswap::new(params).unwrap();
        z.add_swap_file(swap).unwrap();
        let mut i = 0;
        while z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT)
            != StoreOutcome::Rejected(RejectReason::PoolLimit)
        {
            i += 1;
        }
        assert!(z.wait_shrink_idle(Duration::from_secs(30)));
        let before = z.counters().shrink_worker_yields;
        // Shrink further while a store is "in flight" (another thread inside store/load).
        z.set_params(Params {
            accept_threshold_percent: 50,
            ..z.params()
        })
        .unwrap();
        let guard = HotGuard::new(&z.inner.hot_ops);
        z.run_shrink_worker();
        drop(guard);
        let c = z.counters();
        assert!(c.shrink_worker_yields > before, "the worker yielded");
        assert!(
            z.pool_total_pages() <= z.params().accept_threshold_pages(),
            "and still finished"
        );
    }

    #[test]
    fn pressure_monitor_arms_a_psi_trigger() {
        let z = cache();
        let bad = PressureConfig {
            trigger: "most 1 2".into(),
            ..PressureConfig::default()
        };
        assert!(matches!(
            z.start_pressure_monitor(bad),
            Err(Error::Pressure(_))
        ));
        if !std::path::Path::new("/proc/pressure/memory").exists() {
            writeln!(
                std::io::stderr(),
                "SKIPPED: no /proc/pressure/memory (kernel without PSI)"
            )
            .ok();
            return;
        }
        match z.start_pressure_monitor(PressureConfig::default()) {
            Ok(()) => {
                std::thread::sleep(Duration::from_millis(150));
                let _events = z.stop_pressure_monitor();
            }
            Err(e) => {
                writeln!(
                    std::io::stderr(),
                    "SKIPPED: cannot arm a PSI trigger here: {e}"
                )
                .ok();
            }
        }
        // A window the kernel refuses is reported with the reason.
        let odd = PressureConfig {
            trigger: "some 150000 1000001".into(),
            ..PressureConfig::default()
        };
        if let Err(e) = z.start_pressure_monitor(odd) {
            assert!(e.to_string().contains("window"), "{e}");
        }
    }

    #[test]
    fn slot_packing() {
        let s = SwapSlot {
            area: 31,
            offset: (1 << 40) + 5,
        };
        assert_eq!(unpack_slot(pack_slot(s)), s);
    }
}
