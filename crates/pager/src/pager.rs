// SPDX-License-Identifier: MIT
//! The pager: managed regions, the fault path, eviction, pins and the budget.
//!
//! **Fault path** (runs in the faulting thread's SIGBUS handler, all signals blocked, on the
//! thread's unmanaged alternate stack): find the region (regions read lock), claim the page's
//! state word (`ABSENT`/`EVICTED` -> `BUSY` by CAS; a `BUSY` page is waited for), decompress
//! into a buffer on the handler's stack and `UFFDIO_COPY` it in, or copy zeros for a page never
//! filled (with fault-around over the following never-filled pages), publish `RESIDENT|REF`,
//! then reclaim if the tree is over its budget (direct reclaim, as a cgroup's charge path does).
//!
//! **Eviction** (one reclaimer per process, the `reclaim` mutex): a clock hand sweeps the
//! regions in address order; a resident, unpinned page with `REF` set loses it, one without is a
//! victim (`RESIDENT` -> `BUSY`). Runs of contiguous victims are moved out with one
//! `UFFDIO_MOVE` each into a registered scratch area: the move is atomic, so a write racing the
//! eviction either lands before it (and is moved with the page) or faults afterwards and waits
//! for `BUSY` to clear. Each page is then stored in the cache from the scratch area (`swap_out`:
//! pool, or the swap file if the pool rejects it), the scratch run is dropped with one
//! `MADV_DONTNEED`, and the word becomes `EVICTED(slot, epoch)`. A page a fork shares
//! copy-on-write (MOVE refuses it) is made exclusive first (`sys::break_cow`). A page whose cache
//! copy was kept (clean-page reuse) and whose content still equals it reuses that slot.
//!
//! **Background reclaim** (staged): a fault that leaves the tree within `bg_headroom` of its
//! budget moves a batch of victims out itself, into the second half of the scratch area (the
//! moves are the only step that changes page tables, and a thread's own moves flush only its
//! own CPU's TLB), and hands the batch to this process's reclaim thread, which compresses and
//! stores it and empties that half of the scratch area. A staged page is `BUSY|STAGED`, its
//! staging slot in `stage_slots`, and whoever clears `STAGED` owns it: the reclaim thread (to
//! store it, one run at a time under the regions read lock), a fault on it (which moves it home
//! instead of waiting for the batch), or a map change under the write lock (`drop_range`, for
//! which the page is simply gone). Fork and exec pause reclaim, which drains the batch first.
//!
//! **Write tracking** (`scan`): one `PAGEMAP_SCAN` per chunk just ahead of the clock hand gives
//! written pages the referenced bit and drops the now stale kept copies.
//!
//! **Lock order**: regions (read for faults, pins and eviction; write for map changes) ->
//! reclaim mutex -> the cache's own locks. No lock is ever held while managed memory is touched,
//! and every pager path runs with signals blocked, so a program signal handler can't re-enter
//! the pager on a thread that holds one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::futex_rwlock::FutexRwLock;
use uzswap_zswap::SwapFile;
use uzswap_zswap::{CgroupId, LoadOutcome, Params, SwapSlot, Zswap};

use crate::pagelog::ev;
use crate::region::{
    self, Region, ABSENT, ACTIVE, BUSY, EVICTED, INHERITED, KEPT, PAGE, PIN_MAX, PIN_ONE, REF,
    RESIDENT, STAGED, SWPIN,
};
use crate::shared::{Segment, NO_ENTRY};
use crate::sys::{self, InPager};
use crate::uffd::{Uffd, UffdError};

/// How often at most a fork child counts the pages it still shares with its parent
/// (`Pager::recount_shared`).
const SHARED_RECOUNT_NS: u64 = 20_000_000;

/// Why `Pager::recount_shared` is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recount {
    /// In the fork child's set-up: the pool only, at once.
    AtFork,
    /// The tree is over its budget: as soon as the shortest interval allows.
    Urgent,
    /// Now and then: the interval grows while nothing changes.
    Idle,
}

/// Pages moved out per `UFFDIO_MOVE` batch.
pub const SCRATCH_PAGES: usize = 64;
/// Most pages one `Pager::move_chunk` call takes (one bit each in its result).
pub const MOVE_CHUNK_PAGES: usize = 64;
/// Zero-fill fault-around: pages filled per first-touch fault (when the following pages were
/// never filled either).
const ZERO_SRC_PAGES: usize = 16;
/// Pages of write tracking per `PAGEMAP_SCAN`, ahead of the clock hand.
const SCAN_CHUNK: usize = 512;
/// With SIZE covering the pool: the bound of the pool's cache of freed zspage memory (2 MiB,
/// zsmalloc's default `DEFAULT_MAX_CACHED_PAGES`).
const POOL_CACHE_PAGES: usize = 512;

/// What the pager was configured with (from the environment `uzswap run` sets).
#[derive(Clone, Debug)]
pub struct Config {
    /// SIZE in bytes (0: no budget, nothing is evicted).
    pub budget_bytes: u64,
    /// Does SIZE cover the compressed pool (as memory.max with zswap charged) or only resident
    /// pages (as cgroup v1 counts)?
    pub covers_pool: bool,
    pub params: Params,
    pub swap_dir: PathBuf,
    pub swap_slots: u64,
    /// Pages evicted per reclaim step.
    pub batch: usize,
    /// Zero-fill fault-around window in pages (1 = off).
    pub fault_around: usize,
    /// How victims are chosen.
    pub victim: Victim,
    /// Swap readahead window for sequential faults, in pages (0 = off).
    pub readahead: usize,
    /// Keep the cache's copy of a page that came back by a read fault, so that re-evicting it
    /// while it stays unwritten costs no compression (needs write tracking).
    pub keep_clean: bool,
    /// Background reclaim (`--background-reclaim`): a fault that leaves the tree within this
    /// many pages of its budget stages a batch (enough for twice as far below it) for its
    /// process's reclaim thread to store; 0 = off (every eviction is direct reclaim by the
    /// faulting thread).
    pub bg_headroom: usize,
    /// Swap files with O_DIRECT (`--direct-io`): written-back pages hold no page cache.
    pub direct_io: bool,
    /// One LRU order for the tree's pools (`--pool-lru tree`, the default): the shrink worker
    /// of the process holding the oldest entries writes back; false (`process`): each
    /// process's worker writes back its own entries.
    pub tree_pool_lru: bool,
    /// Idle processes give first (`--idle-first MS`): a process of the tree that has not
    /// faulted for this long evicts for a busier one over the budget; 0 = off (each process
    /// reclaims from its own memory first).
    pub idle_first_ns: u64,
}

/// Default of `Config::idle_first_ns`: 200 ms, about one lap of the clock over a program's
/// resident pages under steady eviction (docs/pager.md, "Victim selection").
pub const IDLE_FIRST_MS: u64 = 200;
/// The least a busier process asks an idle one to evict, in pages (`Pager::donation_pages`),
/// and the least an idle process must hold to be asked (twice that).
const DONATION_MIN_PAGES: usize = 128;
/// How long a busier process counts on an asked donation, from the ask and from each batch
/// the idle process evicts, before it reclaims on its own again.
const DONATION_WAIT_NS: u64 = 20_000_000;
/// A process that has not taken up a request for this long is not asked again for a second
/// (its reclaim thread goes round at least every 200 ms, and a busy host delays its wake-up
/// by tens of milliseconds: marking it after 20 ms cut the test program's donations to a
/// fifth).
const DONOR_SILENT_NS: u64 = 250_000_000;

/// Background reclaim's staging distance below the budget: 1/128 of it (0.75 MiB of a 96 MiB
/// budget), at least 16 pages, at most 256 (1 MiB).
fn bg_headroom(budget_bytes: u64) -> usize {
    ((budget_bytes / PAGE as u64 / 128) as usize).clamp(16, 256)
}

/// Victim selection (`--victim`, docs/pager.md "Victim selection").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Victim {
    /// A clock whose referenced bit is set by faults, refaults and writes (write tracking with
    /// `PAGEMAP_SCAN`).
    Clock,
    /// The same clock without write tracking: faults and refaults only.
    ClockFaults,
    /// Plain FIFO: the hand takes pages in address order whatever their references.
    Fifo,
}

/// The cache parameters of every process of a tree run under SIZE `budget_bytes` (0: none),
/// given the cache options `uzswap run` passes (`UZSWAP_PARAMS`, `name=value,...`): also what
/// `uzswap run` reports the tree's pool limit from.
pub fn cache_params(budget_bytes: u64, covers_pool: bool, pairs: Option<&str>) -> Params {
    // When SIZE covers the pool, SIZE is this tree's whole memory and the pool limit is a
    // share of it; with a budget on resident pages alone (cgroup v1 does not charge the
    // kernel's zswap pool) the pool is limited by the machine's memory, as there. One
    // NUMA node: the pager's cache is per process (and not reading /sys saves every
    // process's start some tens of microseconds).
    let total = if budget_bytes > 0 && covers_pool {
        budget_bytes
    } else {
        uzswap_zswap::mem_total_bytes().unwrap_or(1 << 30)
    };
    let base = Params::for_machine(total, 1);
    let mut params = Params {
        // Every process of the tree has a cache, and most pools stay empty or small: 4 KiB
        // pages until a pool grows, not 2 MiB at once.
        huge_first_chunk: false,
        // With SIZE covering the pool, only its pages are charged: chunks faulted in ahead
        // of it would be up to 4 MiB of RSS beyond SIZE (docs/pager.md, "What the fixed
        // overhead leaves out"). The storing thread, mostly the reclaim thread, faults
        // them in itself instead.
        pool_prefault_chunks: if covers_pool {
            0
        } else {
            base.pool_prefault_chunks
        },
        ..base
    };
    if let Some(p) = pairs {
        apply_params(&mut params, p);
    }
    params
}

impl Config {
    pub fn from_env() -> Config {
        let get = |k: &str| std::env::var(k).ok();
        let budget_bytes = get("UZSWAP_MEMORY_MAX")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let covers_pool = get("UZSWAP_BUDGET_COVERS").as_deref() != Some("resident");
        let params = cache_params(budget_bytes, covers_pool, get("UZSWAP_PARAMS").as_deref());
        Config {
            budget_bytes,
            covers_pool,
            params,
            swap_dir: get("UZSWAP_SWAP_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
            swap_slots: get("UZSWAP_SWAP_SLOTS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1 << 22),
            batch: get("UZSWAP_BATCH")
                .and_then(|v| v.parse().ok())
                .unwrap_or(32usize)
                .clamp(1, SCRATCH_PAGES),
            fault_around: get("UZSWAP_FAULT_AROUND")
                .and_then(|v| v.parse().ok())
                .unwrap_or(ZERO_SRC_PAGES)
                .clamp(1, ZERO_SRC_PAGES),
            victim: match get("UZSWAP_VICTIM").as_deref() {
                Some("fifo") => Victim::Fifo,
                Some("clock-faults") => Victim::ClockFaults,
                _ => Victim::Clock,
            },
            keep_clean: get("UZSWAP_KEEP_CLEAN").as_deref() == Some("on"),
            bg_headroom: if budget_bytes == 0 || get("UZSWAP_BG_RECLAIM").as_deref() == Some("off")
            {
                0
            } else {
                bg_headroom(budget_bytes)
            },
            direct_io: get("UZSWAP_DIRECT_IO").as_deref() == Some("1"),
            tree_pool_lru: get("UZSWAP_POOL_LRU").as_deref() != Some("process"),
            idle_first_ns: get("UZSWAP_IDLE_FIRST_MS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(IDLE_FIRST_MS)
                .saturating_mul(1_000_000),
            readahead: get("UZSWAP_READAHEAD")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0usize)
                .min(MAX_READAHEAD),
        }
    }
}

/// The cache's call when a store queued shrink work and no worker thread runs yet (from a
/// fault's direct reclaim too, so it only bumps and wakes a futex): the reclaim threads wake
/// and this process's starts the worker.
fn wake_reclaim_thread() {
    if let Some(p) = crate::pager() {
        p.seg.request_reclaim();
    }
}

/// See `pool_handoff`.
const HANDOFF_WAKE_NS: u64 = 2_000_000;

/// The cache's call when its shrink worker stopped because another process of the tree holds
/// older entries: the reclaim threads wake, and the one of the process holding the oldest
/// starts its worker (`Pager::shrink_tree_pool`).
fn pool_handoff() {
    if let Some(p) = crate::pager() {
        p.seg.pool_handoffs.fetch_add(1, Relaxed);
        // What the others decide on must be this process's oldest entry as of now.
        if let Some(z) = p.cache_made() {
            p.publish_lru_oldest(z);
        }
        p.seg.pool_shrink_wanted.store(1, Relaxed);
        // Every store over the limit starts a worker run, and each run that finds older
        // entries elsewhere ends here: wake the tree's reclaim threads at most every 2 ms
        // (Python's `multiprocessing`, 1.5-2 thousand hand-overs a run, each waking every
        // process's thread, ran 9 % slower).
        let now = sys::now_ns();
        if now.saturating_sub(p.seg.pool_handoff_woken_ns.load(Relaxed)) >= HANDOFF_WAKE_NS {
            p.seg.pool_handoff_woken_ns.store(now, Relaxed);
            p.seg.request_reclaim();
        }
    }
}

/// A new anonymous swap file of `slots` slots for area `area` in `dir`, O_DIRECT if `direct_io`
/// (what every process of a tree under `uzswap run` creates, and what the command tries
/// before the program starts).
pub fn swap_file(
    dir: &std::path::Path,
    area: u32,
    slots: u64,
    direct_io: bool,
) -> Result<SwapFile, String> {
    let shown = dir.display();
    let mut f = SwapFile::create_temp(dir, area, slots)
        .map_err(|e| format!("swap file in {shown}: {e}"))?;
    if direct_io {
        f.enable_direct_io()
            .map_err(|e| format!("O_DIRECT swap file in {shown}: {e}"))?;
    }
    Ok(f)
}

/// `name=value,...` cache settings: `uzswap run`'s cache options (the flags of `uzswap replay`,
/// without their dashes), applied as replay applies them (`uzswap_zswap::options`). Validated
/// by the command before the program starts, so a bad one here is skipped.
pub fn apply_params(p: &mut Params, s: &str) {
    for kv in s.split(',').filter(|x| !x.is_empty()) {
        if let Some((k, v)) = kv.split_once('=') {
            let _ = uzswap_zswap::options::apply(p, k, v);
        }
    }
}

/// The victims of one eviction step: a contiguous run in one region.
struct Run {
    region: Arc<Region>,
    first: usize,
    n: usize,
}

/// A batch moved out by a faulting thread for the reclaim thread to store: its runs, which
/// pages of each were moved (bit k), and where in the staging half of the scratch area.
struct Staged {
    runs: Vec<(Run, u64, usize)>,
    pages: usize,
}

struct Reclaim {
    /// The clock hand: the address to resume the sweep at.
    hand: usize,
    /// The scratch area: `SCRATCH_PAGES` for evictions, then `SCRATCH_PAGES` for a staged batch.
    scratch: usize,
    /// A staged batch not yet taken by the reclaim thread (background reclaim).
    staged: Option<Staged>,
    /// Resident pages the hand has passed in the current lap, and how many were `ACTIVE`.
    lap_seen: u64,
    lap_active: u64,
    /// Active pages to deactivate during this lap: the excess over `ACTIVE_RATIO` times the
    /// inactive pages the last lap saw.
    demote: u64,
}

/// The cache counters that are levels, not events: a process hands over its value when it
/// ends, and the report keeps the largest (a pyenv shim's chain of 78 short-lived processes
/// reported `nr_pools` 79 when they were added up).
const GAUGES: [&str; 7] = [
    "pool_total_size",
    "pool_cached_size",
    "stored_pages",
    "stored_incompressible_pages",
    "same_filled_pages",
    "zero_pages",
    "nr_pools",
];

/// Active pages allowed per inactive page before the clock deactivates some: the kernel's
/// `inactive_is_low`, whose anon ratio is 1 below 1 GiB. Larger ratios took fewer faults on
/// the programs of `scripts/pager-policy.sh` (SQLite 18.7k at 1, 17.2k at 3) but ran slower
/// (SQLite 1.0 s against 1.1-1.3 s, a C walker 1.6 s against 1.9 s): the hand passed more
/// active pages per victim, and write tracking then scanned every chunk it passed (measured
/// before the hand skipped what it need not judge; docs/pager.md).
const ACTIVE_RATIO: u64 = 1;

/// Largest swap readahead window, in pages (`--readahead` takes 0..=64).
const MAX_READAHEAD: usize = 64;

thread_local! {
    /// Where this thread's next fault from the cache continues a sequential stream: (region
    /// start, page index) of the page after its last fault, or after the window read ahead.
    static RA_NEXT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, usize::MAX)) };
}

pub struct Pager {
    uffd: AtomicPtr<Uffd>,
    regions: FutexRwLock<BTreeMap<usize, Arc<Region>>>,
    /// Lowest start and highest end of any region ever managed: a quick "not ours" test.
    span_lo: AtomicUsize,
    span_hi: AtomicUsize,
    /// The cache, made by the process's first store (`cache`): most processes of a tree never
    /// store a page, and a cache costs a process about 0.1 ms and 140 KiB to make (its pool's
    /// size classes, the pool's address space). `None` inside: it could not be made (said
    /// once on stderr; the process then keeps its pages resident).
    zswap: std::sync::OnceLock<Option<Zswap>>,
    /// What `cache` makes it with (validated at start).
    cache_params: Params,
    /// The swap area (area 0) every slot of this process is in. A fork child keeps the
    /// number and its copy of the slot map, with a file of its own holding the same blocks
    /// (`SwapFile::take_private_copy`).
    area: Arc<SwapFile>,
    pub seg: &'static Segment,
    pub cfg: Config,
    reclaim: Mutex<Reclaim>,
    zero_src: usize,
    /// Pages evicted so far (the workingset clock for refault distances).
    evictions: AtomicU64,
    /// `evictions` when the memory-pressure shrinker last took its share (`shrink_pool`).
    shrunk_at: AtomicU64,
    /// This process's resident managed pages and its last published pool size.
    resident: AtomicI64,
    pool_published: AtomicI64,
    /// Reclaim is paused while > 0 (fork, exec).
    paused: AtomicU32,
    /// Paging stopped for good (`detach`): new mappings stay unmanaged.
    detached: AtomicBool,
    pub pid: AtomicI32,
    /// Write tracking (`PAGEMAP_SCAN` on this address space's pagemap).
    scanner: crate::scan::Scanner,
    /// Counters handed to the tree and charges taken off (`retire`): the books are closed,
    /// `charge` and `publish_pool` do nothing until `rejoin` (exit paths run once).
    pub retired: std::sync::atomic::AtomicBool,
    /// This process's resident count when its last sweep found nothing to evict (-1: none).
    starved_at: AtomicI64,
    /// The slot of the process this one last asked to evict for it (`ask_idle_process`).
    last_donor: AtomicUsize,
    /// This process's reclaim thread runs (a staged batch needs it to be stored).
    reclaimer_up: AtomicBool,
    /// The reclaim thread's handle (a leaked `Box`, null without one), for `park_threads`.
    reclaim_join: AtomicPtr<std::thread::JoinHandle<()>>,
    /// `park_threads` asks the reclaim thread to end.
    reclaim_stop: AtomicBool,
    /// Callers inside `park_threads`..`unpark_threads` (the last one out starts the threads).
    parked: AtomicU32,
    /// This process was counted in `swap_dir_denied`.
    swap_dir_denied: AtomicBool,
    /// This process's pid namespace (`shared::own_pid_namespace`), read as it joins the tree.
    pidns: AtomicU64,
    /// A staged batch exists, from its staging until the staging area is empty again (read
    /// without the reclaim mutex).
    staged: AtomicBool,
    /// Pages at the start of the staging area still holding a stored batch's pages: the next
    /// staging (or `pause`) drops them, on a thread of the program, not the reclaim thread
    /// (see `store_staged`).
    staging_dirty: AtomicUsize,
    /// Staging slot j holds the page of this address (0: none), for a fault that takes it back.
    stage_slots: Box<[AtomicUsize]>,
    /// `Reclaim::scratch`, readable without the reclaim mutex (the staging slots' base).
    scratch_base: usize,
    /// Across a fork whose child must copy blocks out of this process's swap file: a pipe
    /// (read end, write end; -1 without) the child closes once it has its own file.
    fork_handshake: [AtomicI32; 2],
    /// Resident pages inherited from the fork parent not yet uncharged (not in the tree total).
    inherited: AtomicI64,
    /// Pool pages this fork child still shares with its parent (counted by the parent, so
    /// left out of this process's published pool), as last counted (`recount_shared`).
    pool_shared: AtomicI64,
    /// This address space's pagemap, open while this fork child may share pages of its pool
    /// or inherited resident pages with its parent (-1: not).
    shared_pagemap: AtomicI32,
    /// When `recount_shared` may run next (`sys::now_ns`; `u64::MAX` while one runs).
    shared_recount_at: AtomicU64,
    /// Recounts in a row that found nothing changed (each doubles the idle interval).
    shared_recount_idle: AtomicU32,
    /// This process's slot in the segment's process table (usize::MAX: none).
    proc_slot: AtomicUsize,
    /// `--record-trace`: the raw event log.
    rec: Option<crate::record::Recorder>,
    /// Loads that only compared a kept copy (pool, swap file): not swap-ins, taken out of
    /// zswpin and pswpin.
    verify_loads: [AtomicU64; 2],
    /// This address space's `/proc/self/maps` and `/proc/self/mem` (-1: not opened yet),
    /// opened at the first eviction `UFFDIO_MOVE` refuses (`evict_refused`).
    maps_fd: AtomicI32,
    mem_fd: AtomicI32,
    /// The executable scratch area (`exec_scratch`; 0: not mapped yet, `usize::MAX`: could
    /// not be made).
    exec_scratch: AtomicUsize,
    /// Page ranges the program gave `MADV_DONTFORK` (sorted, disjoint): a fork child has no
    /// such memory, so its pager leaves them out (`after_fork_child`). Changed only under the
    /// regions write lock, which a fork holds too.
    dontfork: Mutex<Vec<(usize, usize)>>,
    /// The reclaim thread's last look at the program's CPU time (`note_cpu_activity`): when,
    /// and the process's CPU time less the reclaim thread's then.
    cpu_checked_ns: AtomicU64,
    program_cpu_ns: AtomicU64,
}

impl Pager {
    pub fn new(cfg: Config, seg: &'static Segment) -> Result<Pager, String> {
        crate::uffd::init_test_hooks();
        FUTEX_IN_UNLOCK.store(
            std::env::var_os("UZSWAP_TEST_FUTEX_IN_UNLOCK").is_some(),
            Relaxed,
        );
        COPY_OUT_PAUSE_US.store(
            std::env::var("UZSWAP_TEST_COPY_OUT_PAUSE_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            Relaxed,
        );
        let uffd = Uffd::new().map_err(|(what, e)| {
            format!("{what} failed: {}", std::io::Error::from_raw_os_error(e))
        })?;
        if uffd.features() & crate::uffd::FEATURE_MOVE == 0 {
            return Err("this kernel has no UFFDIO_MOVE (Linux 6.8 or later is needed)".into());
        }
        let scanner = crate::scan::Scanner::new();
        if uffd.tracking() {
            scanner.reopen();
        }
        let scratch = sys::map_anon(2 * SCRATCH_PAGES * PAGE).map_err(|e| format!("mmap: {e}"))?;
        // SAFETY: the scratch area is the pager's own mapping, used only as a MOVE target.
        unsafe { uffd.register_scratch(scratch, 2 * SCRATCH_PAGES * PAGE) }
            .map_err(|e| format!("registering the scratch area: errno {e}"))?;
        let zero_src = sys::map_anon(ZERO_SRC_PAGES * PAGE).map_err(|e| format!("mmap: {e}"))?;
        let mut params = cfg.params.clone();
        params.numa_nodes = 1;
        params.validate().map_err(|e| format!("cache: {e}"))?;
        // Attached to the cache at the first store (`store_page`): the cache's index of a
        // 4 Mi-slot area is 128 KiB, and most processes of a tree never store a page.
        let swap = Arc::new(Self::swap_file(&cfg, 0)?);
        Ok(Pager {
            uffd: AtomicPtr::new(Box::into_raw(Box::new(uffd))),
            regions: FutexRwLock::new(BTreeMap::new()),
            span_lo: AtomicUsize::new(usize::MAX),
            span_hi: AtomicUsize::new(0),
            zswap: std::sync::OnceLock::new(),
            cache_params: params,
            area: swap,
            seg,
            cfg,
            reclaim: Mutex::new(Reclaim {
                hand: 0,
                scratch,
                staged: None,
                lap_seen: 0,
                lap_active: 0,
                demote: 0,
            }),
            zero_src,
            evictions: AtomicU64::new(0),
            shrunk_at: AtomicU64::new(0),
            resident: AtomicI64::new(0),
            pool_published: AtomicI64::new(0),
            paused: AtomicU32::new(0),
            detached: AtomicBool::new(false),
            pid: AtomicI32::new(sys::getpid()),
            scanner,
            retired: std::sync::atomic::AtomicBool::new(false),
            starved_at: AtomicI64::new(-1),
            last_donor: AtomicUsize::new(usize::MAX),
            reclaimer_up: AtomicBool::new(false),
            reclaim_join: AtomicPtr::new(std::ptr::null_mut()),
            reclaim_stop: AtomicBool::new(false),
            parked: AtomicU32::new(0),
            swap_dir_denied: AtomicBool::new(false),
            pidns: AtomicU64::new(0),
            staged: AtomicBool::new(false),
            staging_dirty: AtomicUsize::new(0),
            stage_slots: (0..SCRATCH_PAGES).map(|_| AtomicUsize::new(0)).collect(),
            scratch_base: scratch,
            fork_handshake: [AtomicI32::new(-1), AtomicI32::new(-1)],
            inherited: AtomicI64::new(0),
            pool_shared: AtomicI64::new(0),
            shared_pagemap: AtomicI32::new(-1),
            shared_recount_at: AtomicU64::new(0),
            shared_recount_idle: AtomicU32::new(0),
            proc_slot: AtomicUsize::new(usize::MAX),
            rec: std::env::var("UZSWAP_TRACE_DIR")
                .ok()
                .and_then(|d| crate::record::Recorder::open(&d)),
            verify_loads: [AtomicU64::new(0), AtomicU64::new(0)],
            maps_fd: AtomicI32::new(-1),
            mem_fd: AtomicI32::new(-1),
            exec_scratch: AtomicUsize::new(0),
            dontfork: Mutex::new(Vec::new()),
            cpu_checked_ns: AtomicU64::new(0),
            program_cpu_ns: AtomicU64::new(0),
        })
    }

    /// The descriptor in `cell` (`maps_fd`, `mem_fd`), opening `path` the first time.
    fn proc_fd(cell: &AtomicI32, path: &std::ffi::CStr) -> i32 {
        let fd = cell.load(Acquire);
        if fd >= 0 {
            return fd;
        }
        // SAFETY: a NUL-terminated path; the descriptor is ours (adopted below).
        let fd = crate::fds::adopt(
            unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) },
            false,
        );
        if fd < 0 {
            return -1;
        }
        match cell.compare_exchange(-1, fd, AcqRel, Acquire) {
            Ok(_) => fd,
            Err(other) => {
                crate::fds::close_ours(fd);
                other
            }
        }
    }

    /// Closes `maps_fd` and `mem_fd` (a fork child: the inherited ones read the parent's
    /// address space); the next use opens this one's.
    fn close_proc_fds(&self) {
        for cell in [&self.maps_fd, &self.mem_fd] {
            crate::fds::close_ours(cell.swap(-1, AcqRel));
        }
    }

    /// A new swap file for area `area` as configured. Buffered files are made at their first
    /// write: most processes of a tree never write anything back, and making and deleting an
    /// inode cost each about 0.2 ms of its start and exit. (`uzswap run` made one in the
    /// directory before the program started, so a directory that cannot hold one was reported
    /// then.) An O_DIRECT file is opened at once: whether the file system takes O_DIRECT is
    /// only known at the open.
    fn swap_file(cfg: &Config, area: u32) -> Result<SwapFile, String> {
        let mut f = if cfg.direct_io {
            swap_file(&cfg.swap_dir, area, cfg.swap_slots, cfg.direct_io)?
        } else {
            SwapFile::create_temp_on_first_write(&cfg.swap_dir, area, cfg.swap_slots)
                .map_err(|e| format!("swap file in {}: {e}", cfg.swap_dir.display()))?
        };
        // Out of the program's way; `fds` recognises them through `holds_swap_fd`.
        f.set_fd_floor(crate::fds::floor());
        Ok(f)
    }

    /// Is `fd` one of this process's swap files' descriptors?
    pub fn holds_swap_fd(&self, fd: i32) -> bool {
        let mut found = false;
        self.each_swap_fd(|f| found |= f == fd);
        found
    }

    /// Calls `f` with every descriptor of this process's swap files.
    pub fn each_swap_fd(&self, mut f: impl FnMut(i32)) {
        for fd in self.area.raw_fds().into_iter().flatten() {
            f(fd);
        }
    }

    #[inline]
    fn uffd(&self) -> &Uffd {
        // SAFETY: the pointer is set from a leaked Box in `new` and only replaced in a fork
        // child (single-threaded) by `replace_uffd`, which frees the old one at that point.
        unsafe { &*self.uffd.load(Acquire) }
    }

    /// Might `addr..addr+len` touch a managed region? (Cheap; false positives allowed.)
    #[inline]
    pub fn maybe_managed(&self, addr: usize, len: usize) -> bool {
        addr < self.span_hi.load(Relaxed) && addr.saturating_add(len) > self.span_lo.load(Relaxed)
    }

    /// Number of regions and their total pages (tests, reports).
    pub fn region_stats(&self) -> (usize, usize) {
        let _g = InPager::enter();
        let r = self.regions.read_recursive();
        (r.len(), r.values().map(|x| x.pages).sum())
    }

    fn lookup(map: &BTreeMap<usize, Arc<Region>>, addr: usize) -> Option<&Arc<Region>> {
        map.range(..=addr)
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| r.contains(addr))
    }

    // ------------------------------------------------------------------ mapping changes

    /// Starts managing `[start, start+len)` (fresh private anonymous memory of the program).
    /// Returns false if the range could not be registered (it stays plain memory).
    pub fn manage(&self, start: usize, len: usize) -> bool {
        if self.detached.load(Acquire) {
            return false;
        }
        let _g = InPager::enter();
        let pages = len.div_ceil(PAGE);
        let len = pages * PAGE;
        let Ok(region) = Region::new(start, pages) else {
            return false;
        };
        let mut map = self.regions.write();
        Self::cut(&mut map, start, start + len);
        // A fresh mapping, without `MADV_DONTFORK`.
        ranges_remove(&mut self.dontfork.lock(), start, start + len);
        // SAFETY: the range is fresh private anonymous memory of the program, which the pager
        // manages from now on (every missing page is filled by the fault path).
        if unsafe { self.uffd().register_missing(start, len) }.is_err() {
            self.seg.unmanageable.fetch_add(1, Relaxed);
            return false;
        }
        // SAFETY: advice on memory the pager now manages; NOHUGEPAGE keeps the kernel's THP
        // fault path (which bypasses userfaultfd's missing handling) away from it.
        let _ = unsafe { sys::raw_madvise(start, len, libc::MADV_NOHUGEPAGE) };
        map.insert(start, Arc::new(region));
        self.span_lo.fetch_min(start, Relaxed);
        self.span_hi.fetch_max(start + len, Relaxed);
        true
    }

    /// Removes `[lo, hi)` from the table, splitting regions that straddle it (write lock held).
    fn cut(map: &mut BTreeMap<usize, Arc<Region>>, lo: usize, hi: usize) {
        let hit: Vec<usize> = map
            .range(..hi)
            .rev()
            .take_while(|(_, r)| r.end() > lo)
            .map(|(&s, _)| s)
            .collect();
        for s in hit {
            let r = map.remove(&s).unwrap();
            if r.start < lo {
                let p = r.piece(0, (lo - r.start) / PAGE);
                map.insert(p.start, Arc::new(p));
            }
            if r.end() > hi {
                let p = r.piece((hi - r.start) / PAGE, r.pages);
                map.insert(p.start, Arc::new(p));
            }
        }
    }

    /// Stops paging this process for good: eviction stops, every evicted page comes back, and
    /// every region is forgotten and unregistered, so that no fault of this process reaches
    /// the pager again; new mappings stay unmanaged, and its pages leave the budget. For a
    /// seccomp filter about to go in, which may deny the system calls the fault path makes
    /// (a filter that made `ioctl` fail ended the process at its next fault, status 135).
    pub fn detach(&self) {
        if self.detached.swap(true, AcqRel) {
            return;
        }
        self.seg.seccomp_detached.fetch_add(1, Relaxed);
        self.pause(); // never resumed
        let ranges: Vec<(usize, usize)> = {
            let _g = InPager::enter();
            let map = self.regions.read_recursive();
            map.values().map(|r| (r.start, r.pages * PAGE)).collect()
        };
        for (a, len) in ranges {
            self.bring_back(a, len);
            let guard = self.drop_range(a, len, true);
            let _g = InPager::enter();
            if self.uffd().unregister(a, len).is_err() {
                sys::raw_stderr(b"uzswap: cannot unregister a region while stopping paging\n");
            }
            drop(guard);
        }
    }

    /// Takes `[addr, addr+len)` out of the pager's hands for good: its pages are brought back,
    /// forgotten, cut from the regions and unregistered from the userfaultfd, so that they are
    /// plain memory from now on (outside the budget). For `MADV_WIPEONFORK`: a fork child must
    /// read zeros there, but a child's pager would fill the range from the parent's evicted
    /// pages (a 1 MiB range pushed out before `fork` read back whole in the child).
    pub fn unmanage_range(&self, addr: usize, len: usize) {
        if !self.maybe_managed(addr, len) {
            return;
        }
        // Nothing may be evicted between the bring-back and the cut (a guest's memory handed to
        // KVM is gigabytes: its never-filled pages stay so).
        self.pause();
        if !self.bring_back(addr, len) {
            self.resume();
            return;
        }
        let lo = addr & !(PAGE - 1);
        let hi = addr.saturating_add(len).div_ceil(PAGE) * PAGE;
        let guard = self.drop_range(lo, hi - lo, true);
        let _g = InPager::enter();
        if self.uffd().unregister(lo, hi - lo).is_err() {
            sys::raw_stderr(b"uzswap: cannot unregister a range taken out of paging\n");
        }
        drop(guard);
        self.resume();
    }

    /// The program drops `[addr, addr+len)` (munmap, MADV_DONTNEED, MAP_FIXED over it): forget
    /// evicted copies and resident counts. With `unmap`, the regions are cut too. The caller
    /// then performs the real call while `hold` (the returned write guard) is alive, so no
    /// fault or eviction sees a half-changed range. For a call the kernel may refuse, see
    /// [`Pager::lock_range`].
    pub fn drop_range(&self, addr: usize, len: usize, unmap: bool) -> Option<DropGuard<'_>> {
        let mut g = self.lock_range(addr, len)?;
        g.forget(unmap).then_some(g)
    }

    /// The first half of [`Pager::drop_range`], for a call the kernel may refuse before it
    /// changes anything (a sealed range, too many mappings, a bad argument): the regions write
    /// lock, under which the caller makes the call and then, if it changed the range,
    /// [`DropGuard::forget`]s it. Forgotten first, the pages of a refused call were lost: the
    /// range's evicted copies gone, a later access a SIGBUS or zeros.
    pub fn lock_range(&self, addr: usize, len: usize) -> Option<DropGuard<'_>> {
        if !self.maybe_managed(addr, len) {
            return None;
        }
        let _g = InPager::enter();
        let map = self.regions.write();
        Some(DropGuard {
            pager: self,
            map,
            _in_pager: InPager::enter(),
            at: addr & !(PAGE - 1),
            end: addr.saturating_add(len),
        })
    }

    /// [`DropGuard::forget`]'s work, under the write lock the guard holds. Returns whether
    /// any region met the range.
    fn forget_locked(
        &self,
        map: &mut BTreeMap<usize, Arc<Region>>,
        addr: usize,
        len: usize,
        unmap: bool,
    ) -> bool {
        let lo = addr & !(PAGE - 1);
        let hi = (addr + len).div_ceil(PAGE) * PAGE;
        let mut any = false;
        crate::page_log!(lo, ev::DROP, (hi - lo) as u64, unmap as u64);
        if unmap {
            // Whatever is mapped there next is a new mapping, without `MADV_DONTFORK` (a
            // stale range would take a child's managed memory out of its books).
            ranges_remove(&mut self.dontfork.lock(), lo, hi);
        }
        for (_, r) in map.range(..hi).rev().take_while(|(_, r)| r.end() > lo) {
            any = true;
            let a = lo.max(r.start);
            let b = hi.min(r.end());
            let mut freed = 0;
            let mut inh = 0;
            for i in r.index(a)..r.index(b - 1) + 1 {
                // Under the write lock no BUSY owner exists (they all hold the read lock) but a
                // staged batch, whose pages (BUSY|STAGED, still counted resident) this takes over.
                let s = r.state(i).swap(ABSENT, AcqRel);
                let staged = region::kind(s) == BUSY && s & STAGED != 0;
                match region::kind(s) {
                    k if k == RESIDENT || staged => {
                        freed += 1;
                        inh += (s & INHERITED != 0) as i64;
                        if s & KEPT != 0 {
                            self.forget_slot(region::slot_of(s));
                        }
                        if staged {
                            self.unstage(r.addr(i));
                        }
                    }
                    EVICTED => self.forget_slot(region::slot_of(s)),
                    _ => {}
                }
            }
            self.resident.fetch_sub(freed, Relaxed);
            self.uncharge(freed, inh);
        }
        if !any {
            return false;
        }
        if let Some(rec) = &self.rec {
            rec.event(
                crate::record::FREE,
                (lo / PAGE) as u64,
                ((hi - lo) / PAGE) as u32,
            );
        }
        if unmap {
            Self::cut(map, lo, hi);
        }
        true
    }

    /// mremap of a managed range: bring every evicted page of the old range back (the moved
    /// range loses its userfaultfd registration without a remap event), returning the guard
    /// under which the caller performs the real mremap and then calls `remanage`.
    pub fn prepare_remap(&self, addr: usize, len: usize) -> bool {
        if !self.maybe_managed(addr, len) {
            return false;
        }
        self.bring_back(addr, len);
        true
    }

    /// After a successful mremap of a managed range from `old` to `new`.
    pub fn remanage(&self, old: usize, old_len: usize, new: usize, new_len: usize) {
        let _g = InPager::enter();
        crate::page_log!(old, ev::REMAP, old_len as u64, new as u64);
        // Which pages of the old range held data (by index): only those are resident at the
        // new place; the rest (never filled, and the part the range grew by) stay unfilled.
        let mut filled: Vec<usize> = Vec::new();
        {
            let mut map = self.regions.write();
            let mut kept = 0i64;
            let mut inh = 0i64;
            for (_, r) in map
                .range(..old + old_len)
                .rev()
                .take_while(|(_, r)| r.end() > old)
            {
                for i in r.index(old.max(r.start))..r.index((old + old_len).min(r.end()) - 1) + 1 {
                    let s = r.state(i).swap(ABSENT, AcqRel);
                    if region::kind(s) == RESIDENT {
                        filled.push((r.addr(i) - old) / PAGE);
                        kept += 1;
                        inh += (s & INHERITED != 0) as i64;
                        if s & KEPT != 0 {
                            self.forget_slot(region::slot_of(s));
                        }
                    }
                }
            }
            Self::cut(&mut map, old, old + old_len);
            self.resident.fetch_sub(kept, Relaxed);
            self.uncharge(kept, inh);
            // A moved or grown mapping keeps its flags, `MADV_DONTFORK`'s among them.
            let mut v = self.dontfork.lock();
            if ranges_meet(&v, old, old + old_len) {
                ranges_remove(&mut v, old, old + old_len);
                ranges_add(&mut v, new, new + new_len.div_ceil(PAGE) * PAGE);
            }
        }
        if self.manage(new, new_len) {
            // The pages that held data are resident at the new place (one the kernel lacks
            // after all is healed to zeros by the fault path's RESIDENT case).
            let map = self.regions.read_recursive();
            if let Some(r) = Self::lookup(&map, new) {
                let mut n = 0i64;
                for &i in filled.iter().filter(|&&i| i < r.pages) {
                    r.state(i).store(RESIDENT, Release);
                    r.note_filled(i, i);
                    n += 1;
                }
                self.resident.fetch_add(n, Relaxed);
                self.charge(n);
            }
        }
    }

    /// A large `realloc`'s whole pages: moves the `n` pages (at most `MOVE_CHUNK_PAGES`) at
    /// `src` to the never-filled pages at `dst` instead of copying them, as glibc's realloc of
    /// an mmapped chunk moves its pages with mremap. A resident page moves with `UFFDIO_MOVE` (atomic, so
    /// a racing write is never lost: the program's realloc owns both blocks anyway), an evicted
    /// one only changes address in the books (its copy stays in the cache, unread), a
    /// never-filled one stays so. Without this the old block's pages stay charged beside the
    /// new one's until mimalloc purges them, and evicted ones are decompressed to be copied.
    /// Returns which pages are done (bit k: page k); the caller copies the others itself, with
    /// no pager lock held (its accesses may fault). Nothing is done while a trace is recorded
    /// (its page events would miss the move).
    pub fn move_chunk(&self, src: usize, dst: usize, n: usize) -> u64 {
        if n == 0
            || n > MOVE_CHUNK_PAGES
            || self.rec.is_some()
            || src % PAGE != 0
            || dst % PAGE != 0
        {
            return 0;
        }
        let len = n * PAGE;
        if src.abs_diff(dst) < len || !self.maybe_managed(src, len) || !self.maybe_managed(dst, len)
        {
            return 0;
        }
        // No program signal handler may run (and fault on a page claimed here) until the
        // claims are released.
        let _b = sys::SigBlock::new();
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let (Some(rs), Some(rd)) = (Self::lookup(&map, src), Self::lookup(&map, dst)) else {
            return 0;
        };
        if !rs.contains(src + len - 1) || !rd.contains(dst + len - 1) {
            return 0;
        }
        let (js, jd) = (rs.index(src), rd.index(dst));
        // Claim: the destination page must be never filled (mimalloc's purged memory), the
        // source one resident and unpinned, evicted, or never filled. Both become BUSY (ours).
        let mut saved = [0u64; MOVE_CHUNK_PAGES];
        let (mut resident, mut evicted, mut done) = (0u64, 0u64, 0u64);
        for (k, saved_k) in saved.iter_mut().enumerate().take(n) {
            let wd = rd.state(jd + k);
            if wd.compare_exchange(ABSENT, BUSY, AcqRel, Relaxed).is_err() {
                continue;
            }
            let ws = rs.state(js + k);
            let s = ws.load(Acquire);
            let movable = match region::kind(s) {
                ABSENT => {
                    wd.store(ABSENT, Release);
                    done |= 1 << k;
                    continue;
                }
                RESIDENT => s & (INHERITED | region::PIN_MASK) == 0,
                EVICTED => true,
                _ => false,
            };
            if !movable || ws.compare_exchange(s, BUSY, AcqRel, Relaxed).is_err() {
                wd.store(ABSENT, Release);
                continue;
            }
            *saved_k = s;
            if region::kind(s) == RESIDENT {
                resident |= 1 << k;
            } else {
                evicted |= 1 << k;
            }
        }
        let mut moved = 0u64;
        let mut k = 0;
        while k < n {
            if resident & (1 << k) == 0 {
                k += 1;
                continue;
            }
            let mut e = k;
            while e < n && resident & (1 << e) != 0 {
                e += 1;
            }
            moved |= self.move_run(rs, js + k, e - k, dst + k * PAGE) << k;
            k = e;
        }
        for (k, &saved_k) in saved.iter().enumerate().take(n) {
            let bit = 1u64 << k;
            if (resident | evicted) & bit == 0 {
                continue;
            }
            let (ws, wd) = (rs.state(js + k), rd.state(jd + k));
            if (moved | evicted) & bit != 0 {
                wd.store(saved_k, Release);
                ws.store(ABSENT, Release);
                done |= bit;
            } else {
                ws.store(saved_k, Release);
                wd.store(ABSENT, Release);
            }
        }
        let carried = (moved | evicted).count_ones() as u64;
        if carried > 0 {
            rd.note_filled(jd, jd + n - 1);
            self.seg.realloc_pages_moved.fetch_add(carried, Relaxed);
        }
        done
    }

    /// Takes `n` resident pages off the counts, `inh` of which were inherited from the fork
    /// parent (shared copy-on-write, charged to the parent, as a cgroup charges a page to the
    /// one that faulted it in; see `after_fork_child`).
    fn uncharge(&self, n: i64, inh: i64) {
        self.inherited.fetch_sub(inh, Relaxed);
        self.charge(inh - n);
    }

    /// Adds `n` pages (negative: takes them off) to the tree's resident total and to this
    /// process's slot, which thus always holds what this image has charged: if the image ends
    /// without retiring (killed, or an exec the wrapper did not see), whoever finds the slot
    /// takes exactly that off the total.
    fn charge(&self, n: i64) {
        if self.retired.load(Relaxed) {
            // The books are closed (`retire`): what the process does on its way out (its exit
            // handlers' faults, a last unmap) is not the tree's any more.
            return;
        }
        self.seg.resident_pages.fetch_add(n, Relaxed);
        if let Some(p) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
            p.charged.fetch_add(n, Relaxed);
        }
    }

    /// The swap file of this process's evictions.
    pub fn swap(&self) -> &Arc<SwapFile> {
        &self.area
    }

    fn free_slot(&self, slot: SwapSlot) {
        let _ = self.area.free_slot(slot);
    }

    fn forget_slot(&self, (area, off): (u32, u64)) {
        let slot = SwapSlot { area, offset: off };
        if let Some(z) = self.cache_made() {
            z.invalidate(slot);
        }
        self.free_slot(slot);
    }

    /// The cache, made now if this is the process's first need of it (a store). The thread that
    /// makes it may be in the fault handler: making it allocates with glibc's malloc, which the
    /// handler never interrupts (it runs only on managed memory, which glibc never touches),
    /// and starts no thread (the shrink worker's starts on demand). Called with the regions
    /// lock held for reading, so a fork (which holds it for writing) never meets the cache
    /// half made.
    pub fn cache(&self) -> Option<&Zswap> {
        self.zswap
            .get_or_init(|| {
                // Most processes of a tree never fill their pool: their shrink worker's
                // thread starts only once a store queues work for it (the reclaim thread
                // starts it).
                // One LRU order for the tree's caches (`for_process_tree`): the shrink worker
                // of the process holding the oldest entries writes back (`shrink_tree_pool`).
                match Zswap::for_process_tree(
                    self.cache_params.clone(),
                    wake_reclaim_thread,
                    &self.seg.lru_clock,
                    pool_handoff,
                ) {
                    Ok(z) => {
                        if self.cfg.covers_pool {
                            // The pool's pages count against SIZE, but the freed zspage memory
                            // it keeps for reuse (by default up to the pool limit, a fifth of
                            // SIZE, for a second) would not: bound it to one huge page, a fixed
                            // overhead (docs/pager.md "The budget across the process tree").
                            z.set_pool_cache_pages(POOL_CACHE_PAGES);
                        }
                        // The tree's pools share one limit: from the first store on (see
                        // `publish_pool`).
                        z.set_pool_pages_outside(self.seg.pool_pages.load(Relaxed).max(0) as u64);
                        Some(z)
                    }
                    Err(e) => {
                        let mut why = e.to_string();
                        let mut src = std::error::Error::source(&e);
                        while let Some(s) = src {
                            why = format!("{why}: {s}");
                            src = s.source();
                        }
                        sys::raw_stderr(
                            format!(
                                "uzswap: cannot make the cache ({why}): nothing is paged out\n"
                            )
                            .as_bytes(),
                        );
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The cache if the process has made it (a page was stored): every slot of the process
    /// names it, so paths that start from a slot find it made.
    pub fn cache_made(&self) -> Option<&Zswap> {
        self.zswap.get().and_then(Option::as_ref)
    }

    /// The compressor the cache uses, or will use once made.
    pub fn cache_compressor(&self) -> uzswap_zswap::Algorithm {
        self.cache_made()
            .map_or(self.cache_params.compressor, |z| z.params().compressor)
    }

    // ------------------------------------------------------------------ the fault path

    /// Resolves a fault at `addr` (SIGBUS handler). False: not a managed address (chain on).
    pub fn handle_fault(&self, addr: usize, write: bool) -> bool {
        if !self.maybe_managed(addr, 1) {
            return false;
        }
        let _g = InPager::enter();
        let t0 = sys::now_ns();
        let handled = {
            let map = self.regions.read_recursive();
            match Self::lookup(&map, addr) {
                None => return false,
                Some(r) => {
                    crate::page_log!(
                        addr,
                        ev::FAULT,
                        r.state(r.index(addr)).load(Relaxed),
                        write as u64,
                    );
                    self.fill(r, r.index(addr), false, write)
                }
            }
        };
        if handled {
            self.note_active(t0);
            self.seg.record_fault(sys::now_ns() - t0);
            if let Some(rec) = &self.rec {
                let kind = if write {
                    crate::record::WRITE
                } else {
                    crate::record::READ
                };
                rec.event(kind, (addr / PAGE) as u64, 0);
            }
            self.maybe_reclaim(addr);
            self.seg.record_fault_with_reclaim(sys::now_ns() - t0);
        }
        handled
    }

    /// Makes page `i` of `r` resident (pinned if `pin`; `write`: the access that needs it is a
    /// write, so a clean copy is not worth keeping). Regions read lock held by the caller.
    fn fill(&self, r: &Region, i: usize, pin: bool, write: bool) -> bool {
        let w = r.state(i);
        let pin_bits = if pin { PIN_ONE } else { 0 };
        let mut spins = 0u32;
        loop {
            let s = w.load(Acquire);
            match region::kind(s) {
                RESIDENT => {
                    if pin {
                        if region::pins(s) >= PIN_MAX {
                            // 255 system calls on this page at once: wait for one to end.
                            // SAFETY: no arguments.
                            unsafe { libc::sched_yield() };
                            continue;
                        }
                        if w.compare_exchange(s, s + PIN_ONE, AcqRel, Relaxed).is_ok() {
                            return true;
                        }
                        continue;
                    }
                    // A raced fault (another thread filled it), or a page dropped behind our
                    // back: claim it and copy zeros; EEXIST means it is there after all.
                    if w.compare_exchange(s, (s & !region::KIND) | BUSY, AcqRel, Relaxed)
                        .is_err()
                    {
                        continue;
                    }
                    // SAFETY: zero_src is our own readable mapping of ZERO_SRC_PAGES pages.
                    let res = self
                        .uffd()
                        .copy(r.addr(i), self.zero_src as *const u8, PAGE, false);
                    crate::page_log!(
                        r.addr(i),
                        ev::FILL_RESIDENT,
                        s,
                        crate::pagelog::outcome(&res),
                    );
                    if res.is_ok() {
                        // The page was missing although the books have it resident: its
                        // content is lost (a bug, or a raw madvise of the program). Say so:
                        // a silent zero page is the worst way to lose data.
                        static SAID: AtomicU32 = AtomicU32::new(0);
                        if SAID.fetch_add(1, Relaxed) < 8 {
                            sys::raw_stderr(
                                format!(
                                    "uzswap: page {:#x} was resident in the pager's books but \
                                     missing from memory; it reads as zeros now\n",
                                    r.addr(i)
                                )
                                .as_bytes(),
                            );
                        }
                    }
                    w.store(s, Release);
                    return true;
                }
                BUSY if s & STAGED != 0 => {
                    if self.fault_back_staged(r, i, s, pin_bits) {
                        return true;
                    }
                }
                BUSY => {
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        // SAFETY: no arguments.
                        unsafe { libc::sched_yield() };
                    }
                }
                ABSENT => {
                    if w.compare_exchange(s, BUSY, AcqRel, Relaxed).is_err() {
                        continue;
                    }
                    return self.fill_zero(r, i, pin_bits);
                }
                _ => {
                    if w.compare_exchange(s, BUSY, AcqRel, Relaxed).is_err() {
                        continue;
                    }
                    return self.fill_evicted(r, i, s, pin_bits, write);
                }
            }
        }
    }

    /// A fault on a page background reclaim staged and the reclaim thread has not stored yet:
    /// take it (clear `STAGED`) and move it home from its staging slot, as a fault on a page
    /// still in the kernel's swap cache maps it without I/O. False: the reclaim thread took it
    /// first (the caller waits for `BUSY` to clear as usual).
    fn fault_back_staged(&self, r: &Region, i: usize, s: u64, pin_bits: u64) -> bool {
        let addr = r.addr(i);
        // The slot is published before STAGED and cleared after the batch is done with the
        // page (after a fault that took it has finished), and a new batch is staged only once
        // the last one's slots are clear: while this thread owns the page, exactly one slot
        // names it. Looked up again after the claim, so an old batch's slot seen before it
        // (the same word value staged again meanwhile) can't mislead.
        if self.staging_slot_of(addr).is_none() {
            return false;
        }
        let w = r.state(i);
        if w.compare_exchange(s, s & !STAGED, AcqRel, Relaxed).is_err() {
            return false;
        }
        let Some(j) = self.staging_slot_of(addr) else {
            // Unreachable by the protocol above. Give the page back to the batch, which
            // knows its slot by position, and wait for it like any BUSY page.
            w.store(s, Release);
            return false;
        };
        let slot_addr = self.scratch_base + (SCRATCH_PAGES + j) * PAGE;
        let res = self.uffd().move_out(addr, slot_addr, PAGE);
        let res = match res {
            Ok(()) => Ok(()),
            // SAFETY: the staging slot is our own mapping; the page is still there.
            Err(_) => self.uffd().copy(addr, slot_addr as *const u8, PAGE, false),
        };
        crate::page_log!(addr, ev::FAULT_BACK, s, crate::pagelog::outcome(&res));
        w.store(
            (s & !(region::KIND | STAGED)) | RESIDENT | REF | pin_bits,
            Release,
        );
        // Done with the slot: the reclaim thread may empty the staging area now.
        self.stage_slots[j].store(0, Release);
        self.seg.staged_faulted_back.fetch_add(1, Relaxed);
        true
    }

    fn fill_zero(&self, r: &Region, i: usize, pin_bits: u64) -> bool {
        // Fault-around: claim the following never-filled pages too (sequential first touch,
        // the common pattern of a fresh heap, costs one signal per window instead of per page).
        // The window starts at one page and doubles while the region's first touches go on
        // where the last fill ended (or a little further: an allocator hands out pages in
        // address order, a size class here and one there), as readahead ramps up: a scattered
        // first touch fills one page, where a fixed window charged neighbours that might never
        // be used (SQLite through Python peaked at 31 MiB charged, 29 with the ramp; docs/pager.md
        // "The heap's footprint"). One stream per region, not per thread: threads
        // share an allocator's arenas (Python's four threads took five times the signals
        // with a stream per thread).
        let fa = self.cfg.fault_around.max(1);
        let z = r.zero_stream.load(Relaxed);
        let (zi, zw) = ((z >> 8) as usize, (z & 0xff) as usize);
        let window = if z != 0 && i >= zi && i - zi < fa {
            (zw * 2).clamp(1, fa)
        } else if z == 0 && i == 0 {
            // A fresh mapping's first touch at its start (V8's heap pages, Python's arenas):
            // the stream is as good as known.
            fa
        } else {
            1
        };
        let mut n = 1;
        while n < window
            && i + n < r.pages
            && r.state(i + n)
                .compare_exchange(ABSENT, BUSY, AcqRel, Relaxed)
                .is_ok()
        {
            n += 1;
        }
        let mut res = self
            .uffd()
            .copy(r.addr(i), self.zero_src as *const u8, n * PAGE, false);
        if matches!(res, Err(UffdError::Os(_))) && n > 1 {
            // The window crossed into another VMA (mprotect splits a region into several, and
            // one UFFDIO_COPY must stay within one): give the neighbours back, fill one page.
            for k in 1..n {
                r.state(i + k).store(ABSENT, Release);
            }
            n = 1;
            res = self
                .uffd()
                .copy(r.addr(i), self.zero_src as *const u8, PAGE, false);
        }
        let ok = match res {
            Ok(()) => true,
            Err(UffdError::Exists) => {
                // Some page of the window was populated: fill page by page.
                for k in 0..n {
                    let _ =
                        self.uffd()
                            .copy(r.addr(i + k), self.zero_src as *const u8, PAGE, false);
                }
                true
            }
            Err(_) => false,
        };
        crate::page_log!(
            r.addr(i),
            ev::FILL_ZERO,
            n as u64,
            crate::pagelog::outcome(&res),
        );
        if !ok {
            for k in 0..n {
                r.state(i + k).store(ABSENT, Release);
            }
            return false;
        }
        r.zero_stream
            .store(((i + n) as u64) << 8 | (n as u64).min(0xff), Relaxed);
        r.state(i).store(RESIDENT | REF | pin_bits, Release);
        for k in 1..n {
            r.state(i + k).store(RESIDENT | REF, Release);
        }
        r.note_filled(i, i + n - 1);
        self.resident.fetch_add(n as i64, Relaxed);
        self.charge(n as i64);
        self.seg.faults_zero.fetch_add(1, Relaxed);
        self.seg.fault_around_pages.fetch_add(n as u64 - 1, Relaxed);
        true
    }

    fn fill_evicted(&self, r: &Region, i: usize, s: u64, pin_bits: u64, write: bool) -> bool {
        let (area, off) = region::slot_of(s);
        let slot = SwapSlot { area, offset: off };
        let mut buf = [0u8; PAGE];
        // Clean-page reuse: a page read back by a read fault keeps its cache copy (a
        // non-exclusive load, as the kernel's swap cache keeps a clean page's swap slot) and is
        // mapped write-protected, so write tracking sees its first write. A later eviction
        // that finds the same content reuses the copy instead of compressing again.
        let keep = !write && self.cfg.keep_clean && self.scanner.enabled();
        // Evicted pages were stored, so the cache exists.
        let outcome = match self.cache_made() {
            Some(z) => z.load(slot, &mut buf, !keep),
            None => Err(uzswap_zswap::Error::NoSwapArea(slot.area)),
        };
        match outcome {
            Ok(LoadOutcome::Hit) => {
                self.seg.faults_from_pool.fetch_add(1, Relaxed);
            }
            Ok(LoadOutcome::FromSwapFile) => {
                self.seg.faults_from_swapfile.fetch_add(1, Relaxed);
            }
            Ok(_) | Err(_) => {
                // The content is gone (a swap-file read error): the page can't be restored.
                // Leave it evicted and let the program die of SIGBUS, as the kernel kills a task
                // whose swap-in fails with an I/O error.
                sys::raw_stderr(b"uzswap: a paged-out page could not be read back\n");
                crate::page_log!(r.addr(i), ev::FILL_FAILED, s, 1);
                r.state(i).store(s, Release);
                return false;
            }
        }
        // Workingset: how many evictions since this page left? Within the resident set size,
        // it left too early: give it the referenced bit (activation).
        let now = self.evictions.load(Relaxed) as u16;
        let dist = now.wrapping_sub(region::epoch_of(s)) as i64;
        self.seg.refaults.fetch_add(1, Relaxed);
        let near = dist <= self.resident.load(Relaxed).min(0xffff);
        if near {
            self.seg.refaults_near.fetch_add(1, Relaxed);
        }
        // "mm: workingset: detect anon refaults" (5.9): a refault within the resident set's
        // worth of evictions left too early, and comes back on the active side, where the clock
        // leaves it while active pages do not outnumber inactive ones. User space can't see
        // reads of a resident page, so without this a page that is only read (SQLite's B-tree
        // pages behind a page-cache header that is written) is taken on every lap.
        let act = if near && self.cfg.victim != Victim::Fifo {
            ACTIVE
        } else {
            0
        };
        let res = self.uffd().copy(r.addr(i), buf.as_ptr(), PAGE, keep);
        crate::page_log!(
            r.addr(i),
            ev::FILL_EVICTED,
            s,
            u64::from_le_bytes(buf[..8].try_into().unwrap()) & !0xf
                | crate::pagelog::outcome(&res)
                | (matches!(outcome, Ok(LoadOutcome::FromSwapFile)) as u64) << 2
                | (keep as u64) << 3,
        );
        match res {
            Ok(()) | Err(UffdError::Exists) => {}
            Err(_) => {
                // The range went away under us (unmapped by a raw system call): keep nothing.
                self.forget_slot((area, off));
                r.state(i).store(ABSENT, Release);
                return false;
            }
        }
        if keep {
            r.state(i).store(
                region::kept(area, off) | SWPIN | REF | act | pin_bits,
                Release,
            );
        } else {
            if let Some(z) = self.cache_made() {
                z.invalidate(slot);
            }
            self.free_slot(slot);
            r.state(i)
                .store(RESIDENT | SWPIN | REF | act | pin_bits, Release);
        }
        r.note_filled(i, i);
        self.resident.fetch_add(1, Relaxed);
        self.charge(1);
        if self.cfg.readahead > 0 {
            // Sequential: this thread's last fault from the cache was the page before, or
            // the page after the window it read ahead (the kernel's readahead also follows
            // the faulting offset, not the pages' history: a page whose neighbour merely came
            // back once, long ago, says nothing about the stream).
            let sequential = RA_NEXT.with(|c| c.get()) == (r.start, i);
            let n = if sequential {
                self.readahead(r, i + 1)
            } else {
                0
            };
            RA_NEXT.with(|c| c.set((r.start, i + 1 + n)));
        }
        true
    }

    /// Swap readahead for sequential faults (this thread's faults from the cache follow one
    /// another page by page): bring the following evicted pages back now, up to
    /// `Config::readahead`, stopping at the first page that is not evicted (the kernel's
    /// VMA-based swap readahead, `swap_vma_readahead`, reads a window around the fault the
    /// same way). Readahead pages get no referenced bit (the clock takes them first if they go
    /// unused) and keep their cache copy like read faults, so an unused one leaves again at
    /// the price of a comparison.
    fn readahead(&self, r: &Region, from: usize) -> usize {
        let keep = self.cfg.keep_clean && self.scanner.enabled();
        let end = (from + self.cfg.readahead).min(r.pages);
        // Claim and read the whole window first, then map it with one `UFFDIO_COPY`: the
        // ioctl costs about as much as a page's decompression, once per window instead of
        // once per page. The buffer is the pager's own memory (glibc's malloc).
        let mut buf: Vec<u8> = Vec::with_capacity((end.saturating_sub(from)) * PAGE);
        let mut claimed = [0u64; MAX_READAHEAD];
        let mut n = 0;
        for j in from..end {
            let w = r.state(j);
            let s = w.load(Relaxed);
            if region::kind(s) != EVICTED || w.compare_exchange(s, BUSY, AcqRel, Relaxed).is_err() {
                break;
            }
            let (area, off) = region::slot_of(s);
            let slot = SwapSlot { area, offset: off };
            let at = buf.len();
            buf.resize(at + PAGE, 0);
            // Non-exclusive: if the copy-in fails the page stays evicted, its content intact.
            let loaded = self
                .cache_made()
                .map(|z| z.load(slot, &mut buf[at..at + PAGE], false));
            match loaded {
                Some(Ok(LoadOutcome::Hit)) | Some(Ok(LoadOutcome::FromSwapFile)) => {}
                _ => {
                    w.store(s, Release);
                    buf.truncate(at);
                    break;
                }
            }
            claimed[n] = s;
            n += 1;
        }
        if n == 0 {
            return 0;
        }
        let mapped = match self.uffd().copy(r.addr(from), buf.as_ptr(), n * PAGE, keep) {
            Ok(()) => n,
            Err(_) => {
                // Part of the window may be in place: page by page from its start, each mapped
                // now (or already, by the window's copy), until one can't be; the rest are
                // given back as they were (their copies are intact).
                let mut m = 0;
                while m < n {
                    let src = buf[m * PAGE..].as_ptr();
                    match self.uffd().copy(r.addr(from + m), src, PAGE, keep) {
                        Ok(()) | Err(UffdError::Exists) => m += 1,
                        Err(_) => break,
                    }
                }
                m
            }
        };
        for (k, &s) in claimed[..n].iter().enumerate() {
            let w = r.state(from + k);
            if k >= mapped {
                w.store(s, Release);
                continue;
            }
            let (area, off) = region::slot_of(s);
            if keep {
                w.store(region::kept(area, off) | SWPIN, Release);
            } else {
                self.forget_slot((area, off));
                w.store(RESIDENT | SWPIN, Release);
            }
        }
        crate::page_log!(r.addr(from), ev::READAHEAD, n as u64, mapped as u64);
        if mapped > 0 {
            r.note_filled(from, from + mapped - 1);
            self.resident.fetch_add(mapped as i64, Relaxed);
            self.charge(mapped as i64);
            self.seg.readahead_pages.fetch_add(mapped as u64, Relaxed);
        }
        mapped
    }

    // ------------------------------------------------------------------ mlockall (mlock.rs)

    /// `mlockall(MCL_CURRENT)`, with eviction already paused: brings every evicted page of
    /// this process back (never-filled pages stay unfilled; they fill on first touch and then
    /// stay, eviction being paused). Returns the pages loaded.
    pub fn fault_in_evicted(&self) -> u64 {
        let _b = sys::SigBlock::new();
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let mut n = 0;
        for r in map.values() {
            // Pages above the high-water mark were never filled (nothing to bring back).
            let hwm = r.hwm.load(Relaxed).min(r.pages);
            for i in 0..hwm {
                if region::kind(r.state(i).load(Acquire)) == EVICTED
                    && self.fill(r, i, false, false)
                {
                    n += 1;
                }
            }
        }
        n
    }

    /// The managed parts of `[lo, hi)`, in address order.
    pub fn managed_parts(&self, lo: usize, hi: usize) -> Vec<(usize, usize)> {
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let mut v: Vec<(usize, usize)> = map
            .range(..hi)
            .rev()
            .take_while(|(_, r)| r.end() > lo)
            .map(|(_, r)| (lo.max(r.start), hi.min(r.end())))
            .collect();
        v.reverse();
        v
    }

    // ------------------------------------------------------------------ pins (EFAULT path)

    /// Makes every managed page of `[addr, addr+len)` resident and, with `pin`, keeps it from
    /// eviction until `unpin_range`: a system call given this buffer then never meets a missing
    /// page (which SIGBUS mode would turn into EFAULT). Returns whether anything was managed.
    pub fn pin_range(&self, addr: usize, len: usize, pin: bool) -> bool {
        if len == 0 || !self.maybe_managed(addr, len) {
            return false;
        }
        let lo = addr & !(PAGE - 1);
        let hi = addr.saturating_add(len).div_ceil(PAGE) * PAGE;
        // Fast path: the pages are resident (a buffer in use, a path just built), so a pin is
        // one compare-and-swap per page. No signal mask: nothing here touches managed memory,
        // and the table's read lock is recursive, so a
        // signal handler that faults (or makes a wrapped call) meanwhile takes it again
        // without waiting behind a queued writer. The first page that needs filling ends it;
        // the slow path below goes on from there.
        let (mut any, from) = if pin {
            self.pin_resident(lo, hi)
        } else {
            (false, lo)
        };
        if from < hi {
            any |= self.pin_slow(from, hi, pin, false).0;
        }
        if any && pin {
            self.seg.pinned_calls.fetch_add(1, Relaxed);
        }
        any
    }

    /// Pins the resident pages of `[lo, hi)` from `lo` on, stopping at the first that is not
    /// resident. Returns whether a managed page was met and where it stopped.
    fn pin_resident(&self, lo: usize, hi: usize) -> (bool, usize) {
        // `InPager`: a contended lock parks through `syscall(SYS_futex)`, whose wrapper would
        // pin (and so lock) again.
        let _g = InPager::enter();
        // Signals are open here, so never wait for the table: parked on it, the thread could
        // run a handler of the program that faults and parks again while the first park is
        // still queued. A writer holding it (an unmap in progress) sends the pin to the
        // general path, which waits with signals blocked.
        let Some(map) = self.regions.try_read_recursive() else {
            return (false, lo);
        };
        let mut any = false;
        let mut at = lo;
        while at < hi {
            let Some(r) = Self::lookup(&map, at) else {
                // Unmanaged here: on to the next region that starts below `hi`, if any.
                match map.range(at..hi).next() {
                    Some((&s, _)) => {
                        at = s;
                        continue;
                    }
                    None => return (any, hi),
                }
            };
            any = true;
            let end = hi.min(r.end());
            while at < end {
                let w = r.state(r.index(at));
                let mut s = w.load(Acquire);
                loop {
                    if region::kind(s) != RESIDENT || region::pins(s) >= PIN_MAX {
                        return (any, at);
                    }
                    match w.compare_exchange_weak(s, s + PIN_ONE, AcqRel, Acquire) {
                        Ok(_) => break,
                        Err(x) => s = x,
                    }
                }
                at += PAGE;
            }
        }
        (any, hi)
    }

    /// `pin_range`'s general path over `[lo, hi)`: fills what is missing (and reclaims if that
    /// went over the budget). Returns whether a managed page was met and whether any had to be
    /// filled.
    fn pin_slow(&self, lo: usize, hi: usize, pin: bool, skip_unfilled: bool) -> (bool, bool) {
        let _b = sys::SigBlock::new();
        let _g = InPager::enter();
        let mut any = false;
        let mut filled = false;
        {
            let map = self.regions.read_recursive();
            for (_, r) in map.range(..hi).rev().take_while(|(_, r)| r.end() > lo) {
                any = true;
                for i in r.index(lo.max(r.start))..r.index(hi.min(r.end()) - 1) + 1 {
                    let s = r.state(i).load(Relaxed);
                    if skip_unfilled && s == ABSENT {
                        continue; // never filled: the kernel's zero page will do
                    }
                    if region::kind(s) != RESIDENT {
                        filled = true;
                    } else if !pin {
                        continue; // resident is all that was asked
                    }
                    // A system call's buffer: read or written, unknown here.
                    self.fill(r, i, pin, true);
                }
            }
        }
        if filled {
            // A system call's buffer brought back: the process is at work, as a fault says.
            self.note_active(sys::now_ns());
            self.maybe_reclaim(0);
        }
        (any, filled)
    }

    /// Brings every evicted page of `[addr, addr+len)` back (resident, not pinned), leaving
    /// the pages never filled as they are: what `mremap` and `unmanage_range` need before the
    /// range leaves the pager's hands. Filling the never-filled ones too populated a sparse
    /// mapping whole (an mremap of a 1 GiB mapping with two pages touched: 1 GiB resident).
    pub fn bring_back(&self, addr: usize, len: usize) -> bool {
        if len == 0 || !self.maybe_managed(addr, len) {
            return false;
        }
        let lo = addr & !(PAGE - 1);
        let hi = addr.saturating_add(len).div_ceil(PAGE) * PAGE;
        self.pin_slow(lo, hi, false, true).0
    }

    /// Releases pins taken by `pin_range` over the same range: one compare-and-swap per page,
    /// without a signal mask (see `pin_range`).
    pub fn unpin_range(&self, addr: usize, len: usize) {
        let lo = addr & !(PAGE - 1);
        let hi = addr.saturating_add(len).div_ceil(PAGE) * PAGE;
        // `InPager`: a contended lock parks through `syscall(SYS_futex)`, whose wrapper would
        // pin (and so lock) again. Waiting for the table (a writer holds it) with signals
        // blocked, as in `pin_resident`.
        let _g = InPager::enter();
        let (_mask, map) = match self.regions.try_read_recursive() {
            Some(map) => (None, map),
            None => {
                let mask = sys::SigBlock::new();
                (Some(mask), self.regions.read_recursive())
            }
        };
        for (_, r) in map.range(..hi).rev().take_while(|(_, r)| r.end() > lo) {
            for i in r.index(lo.max(r.start))..r.index(hi.min(r.end()) - 1) + 1 {
                let w = r.state(i);
                let mut s = w.load(Relaxed);
                while region::pins(s) > 0 {
                    match w.compare_exchange(s, s - PIN_ONE, AcqRel, Relaxed) {
                        Ok(_) => break,
                        Err(x) => s = x,
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------ budget and eviction

    /// Claims this process's slot in the segment's process table.
    pub fn join_tree(&self) {
        let me = self.pid.load(Relaxed);
        // Read here, where a fork child (perhaps in a new pid namespace) joins too.
        let ns = crate::shared::own_pid_namespace();
        self.pidns.store(ns, Relaxed);
        // An earlier image of this process that exec'd without retiring left its charge.
        self.seg.retire_stale(me, ns);
        let slot = self.seg.claim_slot(me, ns).unwrap_or(usize::MAX);
        self.proc_slot.store(slot, Relaxed);
        self.publish_charge();
    }

    /// Publishes this process's charge to its slot (for `collect_dead`).
    fn publish_charge(&self) {
        if let Some(p) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
            p.charged.store(
                self.resident.load(Relaxed) - self.inherited.load(Relaxed),
                Relaxed,
            );
            p.pool.store(self.pool_published.load(Relaxed), Relaxed);
        }
    }

    fn leave_tree(&self) {
        let i = self.proc_slot.swap(usize::MAX, Relaxed);
        if let Some(p) = self.seg.procs.get(i) {
            p.charged.store(0, Relaxed);
            p.pool.store(0, Relaxed);
            p.lru_oldest.store(NO_ENTRY, Relaxed);
            self.seg.stop_sharing(p);
            p.pid.store(0, Relaxed);
        }
    }

    /// Publishes the sequence number of this process's oldest pool entry for the tree's one
    /// LRU order, or none while fork children share its pool: writing back an entry whose
    /// zspage a child still maps (copy-on-write) frees no memory, so the others write back
    /// their own instead (Python's `multiprocessing`, whose workers share the parent's pool,
    /// ran 9 % slower, handing the work over 2 thousand times a run to no effect).
    fn publish_lru_oldest(&self, z: &Zswap) {
        if let Some(s) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
            let oldest = if s.sharers.load(Relaxed) > 0 {
                None
            } else {
                z.lru_oldest()
            };
            s.lru_oldest
                .store(oldest.map_or(NO_ENTRY, u64::from), Relaxed);
        }
    }

    fn publish_pool(&self) {
        if self.retired.load(Relaxed) {
            // Retired: `retire` took the pool off; the reclaim thread, still running until the
            // process ends or execs, put it back here, and it stayed on the tree's books for
            // good (every exiting process left its pool there).
            return;
        }
        let p = {
            let _no_fork = self.fork_excluded();
            self.cache_made().map_or(0, |z| {
                let shared = self.pool_shared.load(Relaxed);
                // One pool limit for the tree, as the kernel has one for every zswap pool of
                // the machine: the other processes' pools count in this cache's limit check,
                // less what this process shares of them (its own pool includes those pages).
                let others = self.seg.pool_pages.load(Relaxed) - self.pool_published.load(Relaxed);
                z.set_pool_pages_outside((others - shared).max(0) as u64);
                // And one LRU order: where the tree's oldest entries are.
                if self.cfg.tree_pool_lru {
                    self.publish_lru_oldest(z);
                    z.set_outside_lru_oldest(self.seg.lru_oldest_but(self.proc_slot.load(Relaxed)));
                }
                (z.pool_total_pages() as i64 - shared).max(0)
            })
        };
        // AcqRel: a swap that reads `retire`'s 0 also sees its `retired` flag (below).
        let old = self.pool_published.swap(p, AcqRel);
        if p != old {
            self.seg.pool_pages.fetch_add(p - old, Relaxed);
            if let Some(s) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
                s.pool.store(p, Relaxed);
            }
        }
        if self.retired.load(Relaxed) {
            // `retire` ran since the check above (it sets the flag before it takes the
            // published pool off): whatever this call published after it, take off again.
            // Both take the published figure with a swap, so neither counts it twice. (The
            // suite's SQLite run once ended with 231 pool pages on the tree's books.)
            let late = self.pool_published.swap(0, AcqRel);
            self.seg.pool_pages.fetch_sub(late, Relaxed);
        }
    }

    /// A fork child's count of what it still shares with its parent, which the parent counts
    /// (the kernel charges a page once, and a fork shares its swap entries):
    /// - its pool is the parent's memory, copy-on-write: `pool_shared` is how many of the
    ///   pool's pages are still mapped by both (the pagemap's exclusive bit over the pool's
    ///   zspages), left out of the pool this process publishes;
    /// - its inherited resident pages (`INHERITED`, not charged): those now mapped by this
    ///   process alone, because either process wrote them (each has a copy then) or the parent
    ///   evicted, unmapped or exited, are charged to this process from now on.
    ///
    /// At most every `SHARED_RECOUNT_NS`, and never more than a fiftieth of the time (a
    /// pagemap read of 8 bytes per page: about 2 µs per MiB); a count that found nothing
    /// changed doubles the interval for the next `Recount::Idle` one, up to 64 times, while
    /// `Recount::Urgent` (the tree is over its budget: an uncounted page matters now) keeps
    /// the shortest. `Recount::AtFork` counts the pool alone, at once. Once nothing is shared
    /// any more the pagemap is closed, for good (a later fork makes this process the parent,
    /// which counts everything).
    fn recount_shared(&self, when: Recount) {
        if self.shared_pagemap.load(Relaxed) < 0 {
            return;
        }
        let at_fork = when == Recount::AtFork;
        let next = self.shared_recount_at.load(Relaxed);
        let t = sys::now_ns();
        let idle = self.shared_recount_idle.load(Relaxed).min(6);
        let wait = if when == Recount::Idle {
            (SHARED_RECOUNT_NS << idle) - SHARED_RECOUNT_NS
        } else {
            0
        };
        if (!at_fork && t < next.saturating_add(wait))
            || self
                .shared_recount_at
                .compare_exchange(next, u64::MAX, Relaxed, Relaxed)
                .is_err()
        {
            return;
        }
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let fd = self.shared_pagemap.load(Relaxed);
        let mut ok = fd >= 0;
        let mut changed = false;
        if let Some(z) = self.cache_made().filter(|_| ok) {
            match crate::scan::count_shared(fd, &z.pool_memory()) {
                Some(n) => changed |= self.pool_shared.swap(n as i64, Relaxed) != n as i64,
                None => ok = false,
            }
        }
        if ok && !at_fork && self.inherited.load(Relaxed) > 0 {
            let n = self.charge_unshared_inherited(&map, fd);
            self.inherited.fetch_sub(n, Relaxed);
            self.charge(n);
            changed |= n > 0;
        }
        if changed {
            self.shared_recount_idle.store(0, Relaxed);
        } else if !at_fork {
            self.shared_recount_idle.fetch_add(1, Relaxed);
        }
        drop(map);
        if !ok || (self.pool_shared.load(Relaxed) == 0 && self.inherited.load(Relaxed) <= 0) {
            self.close_shared_pagemap();
        }
        let took = sys::now_ns().saturating_sub(t);
        // The shortest interval from now; `Recount::Idle` adds its backoff to it.
        self.shared_recount_at
            .store(sys::now_ns() + SHARED_RECOUNT_NS.max(50 * took), Relaxed);
    }

    /// Clears `INHERITED` from the resident pages this process maps alone now (pagemap at
    /// `fd`); returns how many.
    fn charge_unshared_inherited(&self, map: &BTreeMap<usize, Arc<Region>>, fd: i32) -> i64 {
        const CHUNK: usize = 512;
        let mut n = 0;
        let mut entries = [0u64; CHUNK];
        for r in map.values() {
            let hwm = r.hwm.load(Relaxed).min(r.pages);
            let mut first = 0;
            while first < hwm {
                let end = (first + CHUNK).min(hwm);
                let inherited = |i: usize| {
                    r.state(i).load(Relaxed) & (region::KIND | INHERITED) == RESIDENT | INHERITED
                };
                if (first..end).any(inherited)
                    && crate::scan::read_pagemap(fd, r.addr(first), &mut entries[..end - first])
                {
                    for i in (first..end).filter(|&i| inherited(i)) {
                        if !crate::scan::mapped_alone(entries[i - first]) {
                            continue;
                        }
                        let w = r.state(i);
                        let s = w.load(Relaxed);
                        if s & (region::KIND | INHERITED) == RESIDENT | INHERITED
                            && w.compare_exchange(s, s & !INHERITED, AcqRel, Relaxed)
                                .is_ok()
                        {
                            n += 1;
                        }
                    }
                }
                first = end;
            }
        }
        n
    }

    fn close_shared_pagemap(&self) {
        let fd = self.shared_pagemap.swap(-1, Relaxed);
        if let Some(s) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
            self.seg.stop_sharing(s);
        }
        // Our own descriptor (or the inherited copy of the parent's), used by nothing else now
        // that the field no longer holds it.
        crate::fds::close_ours(fd);
        self.pool_shared.store(0, Relaxed);
    }

    fn over_budget(&self) -> bool {
        self.over_budget_by(0)
    }

    /// Is the tree over its budget by more than this process should reclaim from its own
    /// memory? While an idle process evicts for the others (`ask_idle_process`), by more than
    /// the donation's allowance (`bg_headroom`, at least a donation's worth); otherwise by
    /// anything.
    fn over_budget_own(&self) -> bool {
        if sys::now_ns() < self.seg.donation_deadline_ns.load(Relaxed) {
            self.over_budget_by(-(self.cfg.bg_headroom.max(DONATION_MIN_PAGES) as i64))
        } else {
            self.over_budget()
        }
    }

    /// Records a fault at `now` in this process's slot, at most every `ACTIVE_STAMP_NS`.
    #[inline]
    fn note_active(&self, now: u64) {
        if let Some(p) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
            if now.saturating_sub(p.active_ns.load(Relaxed)) >= crate::shared::ACTIVE_STAMP_NS {
                p.active_ns.store(now, Relaxed);
            }
        }
    }

    /// A process busy over its resident memory takes no fault, and the fault path's stamp
    /// alone took it for idle ("idle processes give first" then asked it to evict its hot
    /// pages, which it faulted straight back). Its CPU time tells: when the program's threads
    /// (the process's CPU time less the pager's own threads': this one, the reclaim thread, and
    /// the cache's shrink worker and prefault threads, which run its evictions and writeback
    /// for others) used more than a tenth of the time since the last look, at least
    /// `CPU_LOOK_NS` ago, the process is active. Called by the reclaim thread only.
    fn note_cpu_activity(&self) {
        if self.cfg.idle_first_ns == 0 {
            return;
        }
        let now = sys::now_ns();
        let last = self.cpu_checked_ns.load(Relaxed);
        if now.saturating_sub(last) < CPU_LOOK_NS {
            return;
        }
        let own = sys::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) + {
            // Every use of the cache holds the regions lock, so that a fork never finds a
            // thread inside the cache's locks.
            let _map = self.regions.read_recursive();
            self.cache_made().map_or(0, Zswap::background_cpu_ns)
        };
        let program = sys::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(own);
        let before = self.program_cpu_ns.swap(program, Relaxed);
        self.cpu_checked_ns.store(now, Relaxed);
        // (A fork child's first look compares with its parent's figures: no activity.)
        if last != 0 && program.saturating_sub(before).saturating_mul(10) > now - last {
            self.note_active(now);
        }
    }

    /// Idle processes give first: as a memory cgroup's reclaim takes the pages at the tail of
    /// the cgroup's one LRU, whichever process maps them, a process that must reclaim asks the
    /// tree's process idle longest (no fault for `idle_first_ns`) to evict `want` pages (at
    /// least `donation_pages`) before it evicts its own. True while such a donation is
    /// pending (asked now or by another process within `DONATION_WAIT_NS`): the caller then
    /// leaves its own pages alone while the tree is within `over_budget_own`'s allowance.
    fn ask_idle_process(&self, want: usize) -> bool {
        if self.cfg.idle_first_ns == 0 {
            return false;
        }
        let now = sys::now_ns();
        if now < self.seg.donation_deadline_ns.load(Relaxed) {
            return true;
        }
        let me = self.proc_slot.load(Relaxed);
        let min = 2 * DONATION_MIN_PAGES as i64;
        let Some((i, d)) = self.seg.idle_donor(me, now, self.cfg.idle_first_ns, min) else {
            return false;
        };
        self.last_donor.store(i, Relaxed);
        if d.asked
            .fetch_add(want.max(self.donation_pages()) as u64, Relaxed)
            == 0
        {
            d.asked_at_ns.store(now, Relaxed);
        }
        self.seg
            .donation_deadline_ns
            .store(now + DONATION_WAIT_NS, Relaxed);
        self.seg.request_reclaim();
        true
    }

    /// Direct reclaim's wait for an idle process's donation, as a cgroup's direct reclaim
    /// waits while it takes another process's pages: while the tree is over `over_budget_own`'s
    /// allowance and the donation goes on (each batch the donor evicts extends its deadline by
    /// `DONATION_WAIT_NS`). A donation that ended with the tree still over (the donor's pool
    /// grew by what it stored) is followed by another, up to eight. True if the tree came
    /// within the allowance; false: reclaim from this process.
    fn wait_for_donation(&self, headroom: usize) -> bool {
        let mut asks = 1;
        loop {
            if !self.over_budget_own() {
                return true;
            }
            let now = sys::now_ns();
            let deadline = self.seg.donation_deadline_ns.load(Relaxed);
            if now >= deadline {
                if let Some(d) = self.seg.procs.get(self.last_donor.load(Relaxed)) {
                    if d.asked.load(Relaxed) > 0
                        && now.saturating_sub(d.asked_at_ns.load(Relaxed)) > DONOR_SILENT_NS
                    {
                        // It never took the request up (stopped by a signal, say): not asked
                        // again for a second.
                        d.no_donor_until.store(now + 1_000_000_000, Relaxed);
                    }
                }
                if asks < 8 && self.ask_idle_process(self.stage_want(headroom)) {
                    asks += 1;
                    continue;
                }
                return false;
            }
            let seen = self.seg.donation_progress.load(Relaxed);
            if !self.over_budget_own() {
                return true;
            }
            self.seg
                .wait_donation(seen, (deadline - now).min(1_000_000));
        }
    }

    /// What one donation asks at least: a sixteenth of the budget, 128 to 4096 pages. The
    /// asking process waits on the donor's batches from another CPU, so small asks cost it
    /// a round trip each: with 128 pages a program filling 40 MiB beside an idle 40 MiB one
    /// under 56M took 0.36-0.38 s; with 512, 1024 and 2048 pages 0.20, 0.13-0.16 and 0.11 s
    /// (the kernel's cgroup 0.18 s; docs/pager.md, "Idle processes give first").
    fn donation_pages(&self) -> usize {
        let budget = (self.seg.budget_bytes.load(Relaxed) / PAGE as u64) as usize;
        (budget / 16).clamp(DONATION_MIN_PAGES, 4096)
    }

    /// The reclaim thread's half of "idle processes give first": evicts what the others asked
    /// of this process, batch by batch (waking those that wait for it), until nothing more is
    /// asked. A donation that finds less than half of it to evict (pinned, shared or too few
    /// pages) keeps the others from asking again for a second.
    fn donate(&self) -> u64 {
        let Some(slot) = self.seg.procs.get(self.proc_slot.load(Relaxed)) else {
            return 0;
        };
        let (mut total, mut asked_any) = (0, false);
        loop {
            let asked = slot.asked.swap(0, Relaxed) as usize;
            if asked == 0 {
                break;
            }
            asked_any = true;
            let mut done = 0;
            while done < asked && self.paused.load(Relaxed) == 0 {
                let n = self.evict(self.cfg.batch.min(asked - done));
                done += n;
                if n == 0 {
                    break;
                }
                self.publish_pool();
                self.publish_charge();
                // Progress: those waiting for it wait on.
                self.seg
                    .donation_deadline_ns
                    .store(sys::now_ns() + DONATION_WAIT_NS, Relaxed);
                self.seg.donation_step();
            }
            self.seg.donated.fetch_add(done as u64, Relaxed);
            total += done;
            if done < asked / 2 {
                slot.no_donor_until
                    .store(sys::now_ns() + 1_000_000_000, Relaxed);
                break;
            }
        }
        if asked_any {
            // Done: the others reclaim on their own again, or ask anew.
            self.seg.donation_deadline_ns.store(0, Relaxed);
            self.seg.donation_step();
        }
        total as u64
    }

    /// Is the tree's charge above its budget less `margin` pages (negative: plus)?
    fn over_budget_by(&self, margin: i64) -> bool {
        let b = self.seg.budget_bytes.load(Relaxed) as i64;
        b != 0 && self.seg.charged_pages() * PAGE as i64 > (b - margin * PAGE as i64).max(0)
    }

    /// Direct reclaim: evict until the tree is within its budget. When this process has
    /// nothing left to evict (the rest of the tree holds the memory), ask the others.
    /// Before that, background reclaim: a charge within `bg_headroom` of the budget stages a
    /// batch for the reclaim thread (`stage`), as a zone's low watermark wakes kswapd, so that
    /// the faulting thread rarely compresses itself: that runs on another CPU, beside the
    /// program instead of in its path.
    /// `fault_addr`: the page a fault just brought back (0: none), which background reclaim
    /// leaves alone.
    pub fn maybe_reclaim(&self, fault_addr: usize) {
        self.seg.note_peak();
        let h = self.cfg.bg_headroom;
        if h > 0
            && self.paused.load(Relaxed) == 0
            && self.reclaimer_up.load(Relaxed)
            && self.over_budget_by(h as i64)
            && !self.ask_idle_process(self.stage_want(h))
        {
            self.stage(h, fault_addr);
        }
        if !self.over_budget() || self.paused.load(Relaxed) > 0 {
            return;
        }
        if self.ask_idle_process(self.stage_want(h)) && self.wait_for_donation(h) {
            return;
        }
        let _g = InPager::enter();
        self.recount_shared(Recount::Urgent);
        // After a fruitless sweep, don't sweep again until this process has grown a batch.
        let starved = self.starved_at.load(Relaxed);
        if starved >= 0 && self.resident.load(Relaxed) < starved + self.cfg.batch as i64 {
            self.seg.request_reclaim();
            return;
        }
        while self.over_budget_own() {
            let n = self.evict(self.cfg.batch);
            if h == 0 {
                // Without background reclaim the shrinker's share is direct reclaim's too.
                self.shrink_pool();
            }
            self.publish_pool();
            if n == 0 {
                self.starved_at.store(self.resident.load(Relaxed), Relaxed);
                self.seg.over_budget.fetch_add(1, Relaxed);
                self.seg.request_reclaim();
                break;
            }
        }
        if !self.over_budget() {
            self.starved_at.store(-1, Relaxed);
        }
        self.seg.note_peak();
    }

    /// The reclaim thread of this process: evicts from this process when another process of
    /// the tree (or a pool that grew) leaves the tree over its budget. Runs as pager code
    /// with every signal blocked.
    pub fn reclaim_thread(&'static self) {
        // std allocates the thread's handle with the system malloc: keep it off the heap.
        let _g = InPager::enter();
        let spawned = std::thread::Builder::new()
            .name("uzswap-reclaim".into())
            .spawn(move || {
                let _g = InPager::enter();
                let me = self.pid.load(Relaxed);
                self.reclaimer_up.store(true, Release);
                // With idle processes giving first, a wake-up at least twice per idle period,
                // so that a process busy without faulting is seen active (`note_cpu_activity`)
                // before it could be taken for idle.
                let wake_ms = match self.cfg.idle_first_ns / 2_000_000 {
                    0 => 200,
                    ms => ms.clamp(10, 200),
                };
                loop {
                    let seen = self.seg.reclaim_req.load(Relaxed);
                    self.seg.wait_reclaim(seen, wake_ms);
                    if self.pid.load(Relaxed) != me {
                        return; // a fork child's copy of a parent thread: never runs
                    }
                    if self.reclaim_stop.load(Acquire) {
                        return; // `park_threads`
                    }
                    self.recount_shared(if self.over_budget() {
                        Recount::Urgent
                    } else {
                        Recount::Idle
                    });
                    if let Some(s) = self.seg.procs.get(self.proc_slot.load(Relaxed)) {
                        s.reclaim_seen_ns.store(sys::now_ns(), Relaxed);
                    }
                    self.note_cpu_activity();
                    self.publish_pool();
                    self.publish_charge();
                    self.seg.collect_dead(me, self.pidns.load(Relaxed));
                    self.donate();
                    self.shrink_tree_pool();
                    self.store_staged();
                    self.evict_until_within_budget();
                    self.shrink_pool();
                    self.service_shrink_worker();
                    self.publish_pool();
                    self.seg.note_peak();
                }
            });
        match spawned {
            Ok(h) => {
                let old = self.reclaim_join.swap(Box::into_raw(Box::new(h)), AcqRel);
                if !old.is_null() {
                    // SAFETY: a pointer from `Box::into_raw` above, taken out of the field once.
                    drop(unsafe { Box::from_raw(old) }); // detaches it
                }
            }
            // Refused (EAGAIN: the user's process limit counts threads): the process goes
            // without background reclaim, its own faults reclaiming for it; counted.
            Err(_) => {
                self.seg.threads_refused.fetch_add(1, Relaxed);
            }
        }
    }

    /// Stops this process's own threads (the reclaim thread, the cache's shrink worker and
    /// prefault threads) and waits for them to end, for a call about to change credentials
    /// that only the calling thread holds: `capset`, `prctl(PR_SET_KEEPCAPS)`,
    /// `prctl(PR_SET_SECUREBITS)`, or a `setuid`-family system call made with `syscall`.
    /// Threads inherit the credentials of the thread that makes them, so
    /// [`Pager::unpark_threads`], made after the call, starts them with the new ones.
    ///
    /// Why: glibc's `setuid` family changes every thread it knows of (ours too) and aborts
    /// the process when the call succeeds in one thread and fails in another. `setpriv
    /// --reuid`, for one, keeps its capabilities across the uid change with `PR_SET_KEEPCAPS`
    /// and `capset`, which act on its own thread only; the reclaim thread lost its
    /// capabilities with the new uid, its `setresgid` failed, and the program died with
    /// SIGABRT before it could exec anything.
    ///
    /// The same for `unshare(CLONE_NEWUSER)` and `setns` into a user namespace, which need a
    /// process of one thread (EINVAL otherwise) and give the caller new credentials.
    ///
    /// The program's faults are served meanwhile (on its own threads, as always); only
    /// background reclaim and pool prefaulting wait.
    pub fn park_threads(&self) {
        if self.parked.fetch_add(1, AcqRel) != 0 {
            return;
        }
        let _g = InPager::enter();
        // A privilege drop may take away the right to create the swap file (made on first
        // write): made now, it stays open. Failing here, the first write fails as it would.
        let _ = self.area.create_now();
        let h = self.reclaim_join.swap(std::ptr::null_mut(), AcqRel);
        if !h.is_null() {
            self.reclaim_stop.store(true, Release);
            // Out of its wait now.
            self.seg.request_reclaim();
            // SAFETY: a pointer from `Box::into_raw` in `reclaim_thread`, taken out once.
            let h = unsafe { Box::from_raw(h) };
            let _ = h.join();
            self.reclaim_stop.store(false, Release);
            self.reclaimer_up.store(false, Release);
        }
        if let Some(z) = self.cache_made() {
            z.park_threads();
        }
    }

    /// Starts the threads [`Pager::park_threads`] stopped, from the calling thread.
    pub fn unpark_threads(&'static self) {
        if self.parked.fetch_sub(1, AcqRel) != 1 {
            return;
        }
        if let Some(z) = self.cache_made() {
            let _g = InPager::enter();
            if let Err(e) = z.unpark_threads() {
                let msg = format!("uzswap: cannot start the shrink worker again: {e}\n");
                sys::raw_stderr(msg.as_bytes());
            }
        }
        if self.cfg.budget_bytes > 0 && self.reclaim_join.load(Acquire).is_null() {
            self.reclaim_thread();
        }
        self.note_swap_dir_access();
    }

    /// Counts this process in `swap_dir_denied` (once) if its swap file is still to be made
    /// and its effective user may not create files in the swap directory: a program the tree
    /// started as another user (`setpriv`, `runuser`), which `uzswap run`'s check of the
    /// directory before the start could not foresee.
    pub fn note_swap_dir_access(&self) {
        if self.swap_dir_denied.load(Relaxed) || self.area.raw_fds()[0].is_some() {
            return;
        }
        let Ok(dir) = std::ffi::CString::new(self.cfg.swap_dir.as_os_str().as_encoded_bytes())
        else {
            return;
        };
        let _g = InPager::enter();
        // SAFETY: a NUL-terminated path we own; faccessat2 only reads it.
        let r = unsafe {
            libc::syscall(
                libc::SYS_faccessat2,
                libc::AT_FDCWD,
                dir.as_ptr(),
                libc::W_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        };
        let e = std::io::Error::last_os_error().raw_os_error();
        if r != 0
            && matches!(e, Some(libc::EACCES | libc::EPERM | libc::EROFS))
            && !self.swap_dir_denied.swap(true, Relaxed)
        {
            self.seg.swap_dir_denied.fetch_add(1, Relaxed);
        }
    }

    /// One LRU for the tree's pools: after a shrink worker stopped because another process
    /// holds older entries (`pool_handoff`), and while the tree's pool is above its accept
    /// threshold, the process holding the oldest entries starts its worker, which writes back
    /// from its oldest down to the threshold, as the kernel's one shrink worker walks one
    /// global LRU for every pool (here one process's part of it per run).
    fn shrink_tree_pool(&self) {
        if self.seg.pool_shrink_wanted.load(Relaxed) == 0 {
            return;
        }
        let _map = self.regions.read_recursive();
        let Some(z) = self.cache_made() else {
            return;
        };
        if !z.pool_above_accept_threshold() {
            self.seg.pool_shrink_wanted.store(0, Relaxed);
            return;
        }
        let now = self.seg.lru_clock.load(Relaxed);
        let age = |s: u32| now.wrapping_sub(s);
        let oldest_here = match (
            z.lru_oldest(),
            self.seg.lru_oldest_but(self.proc_slot.load(Relaxed)),
        ) {
            (Some(own), Some(other)) => age(own) >= age(other),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if oldest_here {
            z.kick_shrink_worker();
        }
    }

    /// The cache's shrink worker, on demand: its thread starts once a store queued work for
    /// it; until then this thread does its idle job (returning expired cached pool memory).
    fn service_shrink_worker(&self) {
        let _map = self.regions.read_recursive();
        let Some(z) = self.cache_made() else {
            return;
        };
        if let Err(e) = z.service_shrink_worker() {
            self.seg.threads_refused.fetch_add(1, Relaxed);
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Relaxed) {
                sys::raw_stderr(format!("uzswap: the cache's shrink worker: {e}\n").as_bytes());
            }
        }
    }

    /// The reclaim thread's eviction when the tree is over its budget (another process's
    /// fault asked): batch by batch until it is within (or eviction is paused), at most 256
    /// batches per wake-up (a tree whose memory is elsewhere is not this thread's to spin on).
    /// Returns the pages evicted.
    fn evict_until_within_budget(&self) -> u64 {
        let mut evicted = 0;
        for _ in 0..256 {
            if !self.over_budget_own() || self.paused.load(Relaxed) > 0 {
                break;
            }
            let n = self.evict(self.cfg.batch);
            evicted += n as u64;
            if n < self.cfg.batch {
                break;
            }
            self.publish_pool();
        }
        evicted
    }

    /// The memory-pressure shrinker's share of reclaim (`--shrinker on`, SIZE covering the
    /// pool): as memory.max reclaim runs `shrink_slab` beside `shrink_lruvec` for the cgroup
    /// ("mm: zswap: shrink zswap pool based on memory pressure", 6.8), cold entries are written
    /// back to the swap file, so that the pool's charge gives way to resident pages instead of
    /// pushing more of them out. The proportion is the kernel's: per reclaim pass an LRU scans
    /// `lru_size >> priority` pages and a shrinker `(count >> priority) * 4 / DEFAULT_SEEKS`
    /// objects, so per page evicted `2 * count / resident` entries, with what is below a
    /// batch (`SHRINK_BATCH`, 128) deferred, as `nr_deferred` defers it. Run by the reclaim
    /// thread (the writes stay out of the faults' path, as kswapd's), or by direct reclaim
    /// when background reclaim is off. Returns the entries scanned.
    fn shrink_pool(&self) -> u64 {
        if !self.cfg.covers_pool || !self.cfg.params.shrinker_enabled {
            return 0;
        }
        let _g = InPager::enter();
        // Every use of the cache holds the regions lock (a fork then never finds a thread
        // inside the cache's locks).
        let _map = self.regions.read_recursive();
        if self.paused.load(Relaxed) > 0 {
            return 0;
        }
        let evicted = self.evictions.load(Relaxed);
        let since = evicted.saturating_sub(self.shrunk_at.load(Relaxed));
        if since == 0 {
            // No reclaim since the last pass: no shrink_slab either (its count consumes the
            // disk swap-in credit, so it is not asked idly).
            return 0;
        }
        let resident = self.resident.load(Relaxed).max(1) as u64;
        let Some(z) = self.cache_made() else {
            return 0;
        };
        let r = z.shrink_slab_share(CgroupId::ROOT, 0, since, resident);
        if r.scanned > 0 {
            // Less than a batch is deferred: `since` keeps growing until it is worth one.
            self.shrunk_at.store(evicted, Relaxed);
        }
        r.scanned
    }

    /// Background reclaim, the faulting thread's half: claim and move out a batch of victims
    /// (enough to bring the tree `2 * headroom` below its budget, at most `SCRATCH_PAGES`) into
    /// the staging half of the scratch area and wake the reclaim thread to store it. Only the
    /// moves change page tables, and made here they flush this CPU's TLB alone: made by the
    /// reclaim thread, each was a TLB-shootdown IPI to the CPU the program ran on, which cost a
    /// single-threaded program's faults their median (memwalk, one thread, 32M: fault p50 5.8
    /// against 11.5 us, docs/pager.md). Skipped while the reclaimer is busy or a batch waits.
    ///
    /// The page the fault brought back and its two neighbours are never staged: the sweep's
    /// last lap ignores referenced bits, and in a process with few resident pages it took the
    /// faulting page itself, so the program's instruction faulted again, forever (a Python
    /// multiprocessing worker spun so). Nor is anything staged in a process with fewer than
    /// twice a batch resident: that is left to direct reclaim.
    fn stage(&self, headroom: usize, fault_addr: usize) {
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let Some(mut rc) = self.reclaim.try_lock() else {
            return;
        };
        if self.staged.load(Acquire) || self.paused.load(Relaxed) > 0 {
            return;
        }
        let base = rc.scratch + SCRATCH_PAGES * PAGE;
        self.empty_staging_area(base);
        let want = self.stage_want(headroom);
        if self.resident.load(Relaxed) < 2 * want as i64 {
            return;
        }
        let mut runs = self.pick_victims(&map, &mut rc, want);
        if fault_addr != 0 {
            runs = Self::spare(runs, fault_addr);
        }
        if runs.is_empty() {
            return;
        }
        let mut pages = 0;
        let mut staged = Vec::with_capacity(runs.len());
        for run in runs {
            let at = base + pages * PAGE;
            let r = &run.region;
            let moved = self.move_run(r, run.first, run.n, at);
            for k in 0..run.n {
                let w = r.state(run.first + k);
                let st = w.load(Relaxed);
                if moved & (1u64 << k) == 0 {
                    // Still in place (MOVE refused it): it stays resident.
                    w.store((st & !region::KIND) | RESIDENT | REF, Release);
                    self.seg.evict_busy.fetch_add(1, Relaxed);
                } else {
                    // The slot first: a fault that sees STAGED looks it up.
                    self.stage_slots[pages + k].store(r.addr(run.first + k), Relaxed);
                    w.store(st | STAGED, Release);
                }
            }
            pages += run.n;
            staged.push((run, moved, at));
        }
        rc.staged = Some(Staged {
            runs: staged,
            pages,
        });
        self.staged.store(true, Release);
        drop(rc);
        drop(map);
        self.seg.request_reclaim();
    }

    /// What background reclaim stages: enough to bring the tree `2 * headroom` below its
    /// budget, at most `SCRATCH_PAGES`.
    fn stage_want(&self, headroom: usize) -> usize {
        let budget = (self.seg.budget_bytes.load(Relaxed) / PAGE as u64) as i64;
        (self.seg.charged_pages() - (budget - 2 * headroom as i64)).clamp(1, SCRATCH_PAGES as i64)
            as usize
    }

    /// Gives back the victims within one page of `addr` (claimed `BUSY` by `pick_victims`, which
    /// cleared their referenced bit): they stay resident, referenced. Runs around them split.
    fn spare(runs: Vec<Run>, addr: usize) -> Vec<Run> {
        let addr = addr & !(PAGE - 1);
        let mut out = Vec::with_capacity(runs.len() + 1);
        for run in runs {
            let r = &run.region;
            let lo = addr.saturating_sub(PAGE).max(r.addr(run.first));
            let hi = (addr + 2 * PAGE).min(r.addr(run.first + run.n));
            if lo >= hi {
                out.push(run);
                continue;
            }
            let (a, b) = (r.index(lo), r.index(hi - 1) + 1);
            for i in a..b {
                let w = r.state(i);
                let s = w.load(Relaxed);
                // A plain store: the word is BUSY, ours since the claim.
                w.store((s & !region::KIND) | RESIDENT | REF, Release);
            }
            if a > run.first {
                out.push(Run {
                    region: Arc::clone(r),
                    first: run.first,
                    n: a - run.first,
                });
            }
            if b < run.first + run.n {
                out.push(Run {
                    region: Arc::clone(r),
                    first: b,
                    n: run.first + run.n - b,
                });
            }
        }
        out
    }

    /// Background reclaim, the reclaim thread's half (also run by `pause`, so that no staged
    /// batch crosses a fork or an exec): store the staged batch, publish its pages `EVICTED`,
    /// empty the staging half of the scratch area. Returns the pages stored.
    fn store_staged(&self) -> usize {
        let _g = InPager::enter();
        if !self.staged.load(Acquire) {
            return 0;
        }
        // The reclaim mutex is only ever taken under the regions lock, which a fork holds for
        // writing: a thread taking it outside, at the instant of a fork, left it locked in the
        // child for good (`after_fork_child` waits for it).
        let (st, base) = {
            let _map = self.regions.read_recursive();
            let mut rc = self.reclaim.lock();
            match rc.staged.take() {
                Some(st) => (st, rc.scratch + SCRATCH_PAGES * PAGE),
                None => return 0, // another caller is storing it
            }
        };
        // `staged` stays set until the staging area is empty again: no batch is staged, and
        // `pause` does not return, before that.
        let mut out = 0;
        for (run, moved, at) in &st.runs {
            // Each run under the regions lock, as every eviction: a map change comes either
            // before it (and took its staged pages over, `drop_range`) or after (they are
            // stored). Not the whole batch from its staging on: the program's munmap and
            // madvise then waited for the reclaim thread to wake and store it (Node ran 3.7 s
            // against 1.7 s).
            let _map = self.regions.read_recursive();
            let r = &run.region;
            let first_slot = (at - base) / PAGE;
            let mut claimed = 0u64;
            for k in 0..run.n {
                if moved & (1u64 << k) == 0 {
                    continue;
                }
                // Claim each staged page back (clear STAGED). One a fault took back is left
                // alone once its move home is done (its slot cleared), so that emptying the
                // staging area can't meet it; one a map change took has its slot cleared.
                let w = r.state(run.first + k);
                let sw = w.load(Acquire);
                if sw & STAGED != 0
                    && region::kind(sw) == BUSY
                    && w.compare_exchange(sw, sw & !STAGED, AcqRel, Relaxed)
                        .is_ok()
                {
                    claimed |= 1u64 << k;
                } else {
                    let slot = &self.stage_slots[first_slot + k];
                    while slot.load(Acquire) != 0 {
                        std::hint::spin_loop();
                    }
                }
            }
            out += self.store_run(run, claimed, !claimed, *at);
            for k in 0..run.n {
                self.stage_slots[first_slot + k].store(0, Relaxed);
            }
        }
        // The staging area is not emptied here but by the next staging, on the faulting thread.
        // Pages freed by this thread go to its CPU's free lists, while the program's faults
        // allocate theirs (`UFFDIO_COPY`) on its own CPU from memory this one last touched; and
        // this thread's `MADV_DONTNEED` flushed the TLB of the program's CPU once a batch.
        // memwalk with one thread under 32M: `UFFDIO_COPY` p50 1.07-1.38 µs against 1.62-1.77
        // when emptied here (0.73 with `--background-reclaim off`), 0.95x the run time
        // (docs/pager.md, "Background reclaim"). The price: up to one batch of pages
        // resident past its storing.
        self.staging_dirty.store(st.pages, Relaxed);
        self.staged.store(false, Release);
        self.seg.bg_evictions.fetch_add(out as u64, Relaxed);
        out
    }

    /// Drops the pages a stored batch left in the staging area at `base` (caller: the reclaim
    /// mutex held and no batch staged, so no thread uses the area).
    fn empty_staging_area(&self, base: usize) {
        let pages = self.staging_dirty.swap(0, Relaxed);
        if pages > 0 {
            // SAFETY: the staging pages are ours; their content was stored, copied back or
            // moved home.
            let res = unsafe { sys::raw_madvise(base, pages * PAGE, libc::MADV_DONTNEED) };
            crate::page_log!(base, ev::DROP, (pages * PAGE) as u64, res.is_ok() as u64);
        }
    }

    /// The staging slot holding the page of `addr`, if one does.
    fn staging_slot_of(&self, addr: usize) -> Option<usize> {
        self.stage_slots
            .iter()
            .position(|x| x.load(Relaxed) == addr)
    }

    /// A map change under the regions write lock took a staged page over: free its slot.
    fn unstage(&self, addr: usize) {
        if let Some(j) = self.staging_slot_of(addr) {
            self.stage_slots[j].store(0, Release);
        }
    }

    /// Evicts up to `want` pages of this process. Returns how many left.
    pub fn evict(&self, want: usize) -> usize {
        let _g = InPager::enter();
        let map = self.regions.read_recursive();
        let mut rc = self.reclaim.lock();
        if self.paused.load(Relaxed) > 0 {
            return 0;
        }
        let runs = self.pick_victims(&map, &mut rc, want.min(SCRATCH_PAGES));
        // The runs go to consecutive parts of the scratch area, emptied once at the end: each
        // `MADV_DONTNEED` of it is a TLB shootdown on every CPU running the program (an IPI on
        // these VMs), once per batch instead of once per run (victims of a random walk are
        // runs of one page).
        let mut done = 0;
        let mut used = 0;
        for run in runs {
            done += self.evict_run(&run, rc.scratch + used * PAGE);
            used += run.n;
        }
        if used > 0 {
            // SAFETY: the scratch pages are ours; their content was stored or copied back.
            let res = unsafe { sys::raw_madvise(rc.scratch, used * PAGE, libc::MADV_DONTNEED) };
            crate::page_log!(
                rc.scratch,
                ev::DROP,
                (used * PAGE) as u64,
                res.is_ok() as u64
            );
        }
        done
    }

    /// The clock sweep: collects up to `want` victims (claimed `BUSY`) in runs.
    fn pick_victims(
        &self,
        map: &BTreeMap<usize, Arc<Region>>,
        rc: &mut Reclaim,
        want: usize,
    ) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        let mut got = 0;
        if map.is_empty() {
            return runs;
        }
        // The region holding the hand first (the sweep resumes inside it), then the regions
        // above it, then wrapping around; two laps clear and then use REF. Starting at the first
        // region *above* the hand instead sent every sweep back to the start of the hand's own
        // region: in a heap that is one big region, the pages at its low end were taken on
        // every sweep, however hot.
        let from = map
            .range(..=rc.hand)
            .next_back()
            .filter(|(_, r)| r.contains(rc.hand))
            .map_or(rc.hand, |(&k, _)| k);
        // One lap as segments (region, first index, end index; `usize::MAX`: up to the
        // region's high-water mark): the hand's region from the hand, the other regions in
        // address order with wrap-around, then the hand's region up to the hand.
        let mut lap_order: Vec<(&Arc<Region>, usize, usize)> = Vec::new();
        let mut tail = None;
        for (k, (_, r)) in map.range(from..).chain(map.range(..from)).enumerate() {
            if k == 0 && r.contains(rc.hand) {
                let h = r.index(rc.hand);
                lap_order.push((r, h, usize::MAX));
                tail = Some((r, 0, h));
            } else {
                lap_order.push((r, 0, usize::MAX));
            }
        }
        lap_order.extend(tail);
        // Bound the work of one call (a sparse or mostly evicted address space); the hand
        // keeps the position for the next call. The bound covers two laps over every page
        // ever filled: a smaller one let a sweep spend itself clearing referenced bits and
        // find nothing, which the caller takes for "nothing left to evict" (a 226 MB Python
        // bytes object under a 64 MiB budget peaked at 295 MiB charged with 65536 words).
        let filled: usize = map.values().map(|r| r.hwm.load(Relaxed).min(r.pages)).sum();
        let mut budget_words = (2 * filled + 1024).max(1 << 16);
        // Where the next call resumes: after the last page taken (a call that ends short of
        // `want` must not rescan what it passed), or where the bound stopped it.
        let mut resume = None;
        let counting_shared = self.shared_pagemap.load(Relaxed) >= 0;
        'laps: for lap in 0..3 {
            for &(r, first, end) in &lap_order {
                let hwm = r.hwm.load(Relaxed).min(r.pages).min(end);
                let mut i = first;
                let mut scanned_to = first;
                while i < hwm {
                    if budget_words == 0 {
                        resume = Some(r.addr(i));
                        break 'laps;
                    }
                    budget_words -= 1;
                    let w = r.state(i);
                    let mut s = w.load(Relaxed);
                    if region::kind(s) != RESIDENT {
                        // Nothing to judge here: on to the next resident page (within the bound).
                        let j = r.next_resident(i + 1, hwm.min(i + 1 + budget_words));
                        budget_words -= j - i - 1;
                        i = j;
                        continue;
                    }
                    // Write tracking for the chunk ahead, from the first resident page the hand
                    // meets: a chunk with none (evicted or never filled, most of a large heap
                    // under a small budget) needs no `PAGEMAP_SCAN`. Scanning every chunk the
                    // hand passed cost a Python multiprocessing run 20 million ioctls.
                    if i >= scanned_to && region::kind(s) == RESIDENT {
                        scanned_to = (i + SCAN_CHUNK).min(hwm);
                        self.note_writes(r, i, scanned_to);
                        s = w.load(Relaxed);
                    }
                    if region::kind(s) == RESIDENT {
                        rc.lap_seen += 1;
                        rc.lap_active += (s & ACTIVE != 0) as u64;
                        if rc.lap_seen >= (self.resident.load(Relaxed).max(64) as u64) {
                            // A lap's worth of resident pages seen: deactivate the excess of
                            // active over inactive during the next one.
                            let inactive = rc.lap_seen - rc.lap_active;
                            rc.demote = rc.lap_active.saturating_sub(inactive * ACTIVE_RATIO)
                                / (ACTIVE_RATIO + 1);
                            rc.lap_seen = 0;
                            rc.lap_active = 0;
                        }
                    }
                    let victim = region::kind(s) == RESIDENT && region::pins(s) == 0;
                    if victim && s & ACTIVE != 0 && lap < 2 {
                        // Deactivated pages land on the inactive side referenced, as the
                        // kernel's deactivated folios land at the inactive list's head.
                        if rc.demote > 0
                            && w.compare_exchange(s, (s & !ACTIVE) | REF, Relaxed, Relaxed)
                                .is_ok()
                        {
                            rc.demote -= 1;
                        }
                        i += 1;
                        continue;
                    }
                    if victim && s & INHERITED != 0 && (lap < 2 || counting_shared) {
                        // A fork child's inherited page is its parent's too (copy-on-write, and
                        // charged to the parent): evicting it frees nothing while the parent
                        // maps it, stores one more copy and adds that to the tree's charge.
                        // Once it is this process's alone, `recount_shared` clears the flag.
                        // Without that count (no pagemap), the last lap takes it.
                        i += 1;
                        continue;
                    }
                    if victim && s & REF != 0 && self.cfg.victim != Victim::Fifo && lap < 2 {
                        let _ = w.compare_exchange(s, s & !REF, Relaxed, Relaxed);
                        i += 1;
                        continue;
                    }
                    // The claim keeps the flags and a kept copy's slot: BUSY only tells
                    // everyone else to wait.
                    if victim
                        && w.compare_exchange(
                            s,
                            (s & !(REF | region::KIND)) | BUSY,
                            AcqRel,
                            Relaxed,
                        )
                        .is_ok()
                    {
                        match runs.last_mut() {
                            Some(run) if Arc::ptr_eq(&run.region, r) && run.first + run.n == i => {
                                run.n += 1
                            }
                            _ => runs.push(Run {
                                region: Arc::clone(r),
                                first: i,
                                n: 1,
                            }),
                        }
                        crate::page_log!(r.addr(i), ev::CLAIM, s, 0);
                        got += 1;
                        resume = Some(r.addr(i) + PAGE);
                        if got == want {
                            break 'laps;
                        }
                    }
                    i += 1;
                }
            }
            if got > 0 && lap >= 1 {
                break;
            }
        }
        if let Some(h) = resume {
            rc.hand = h;
        }
        runs
    }

    /// Write tracking for the pages `from..to` of `r` the clock hand is about to visit: one
    /// `PAGEMAP_SCAN` reports the pages written since the last scan and protects them again in
    /// the same walk. A written page is referenced (with `Victim::Clock`), and a kept clean copy
    /// of it is stale: dropped now, so the pool doesn't hold it while the page stays resident.
    fn note_writes(&self, r: &Region, from: usize, to: usize) {
        if !self.scanner.enabled() || from >= to {
            return;
        }
        let set_ref = self.cfg.victim == Victim::Clock;
        let ok = self
            .scanner
            .written(r.addr(from), r.addr(to), true, |a, b| {
                for i in r.index(a)..r.index(b - 1) + 1 {
                    let w = r.state(i);
                    let mut s = w.load(Relaxed);
                    loop {
                        if region::kind(s) != RESIDENT {
                            break;
                        }
                        let mut n = s;
                        if set_ref {
                            n |= REF;
                        }
                        if s & KEPT != 0 {
                            n = region::flags_only(n) & !KEPT;
                        }
                        if n == s {
                            break;
                        }
                        match w.compare_exchange(s, n, AcqRel, Relaxed) {
                            Ok(_) => {
                                if s & KEPT != 0 {
                                    crate::page_log!(r.addr(i), ev::KEPT_DROPPED, s, 0);
                                    self.forget_slot(region::slot_of(s));
                                    self.seg.kept_dropped.fetch_add(1, Relaxed);
                                }
                                break;
                            }
                            Err(x) => s = x,
                        }
                    }
                }
            });
        if ok {
            self.seg.scans.fetch_add(1, Relaxed);
        }
    }

    /// Moves a run out, stores its pages, publishes them `EVICTED`.
    fn evict_run(&self, run: &Run, scratch: usize) -> usize {
        let moved = self.move_run(&run.region, run.first, run.n, scratch);
        self.store_run(run, moved, 0, scratch)
    }

    /// Stores the pages of a run that `move_run` moved to `scratch` (bit k of `moved`: page k
    /// is at `scratch + k * PAGE`), publishes them `EVICTED`; the others stay resident, except
    /// those in `skip`, which are not this call's to touch.
    fn store_run(&self, run: &Run, moved: u64, skip: u64, scratch: usize) -> usize {
        let r = &run.region;
        let mut out = 0;
        let mut inh = 0;
        let mut busy = 0;
        for k in 0..run.n {
            if skip & (1u64 << k) != 0 {
                continue;
            }
            let w = r.state(run.first + k);
            let s = w.load(Relaxed);
            if moved & (1u64 << k) == 0 {
                crate::page_log!(r.addr(run.first + k), ev::NOT_MOVED, s, 0);
                // Still in place (UFFDIO_MOVE refused it even after the COW break): it stays.
                w.store((s & !region::KIND) | RESIDENT | REF, Release);
                busy += 1;
                continue;
            }
            // SAFETY: the scratch area is our own mapping of SCRATCH_PAGES pages; the page just
            // moved there (or reads as zeros if the source was a hole: WP-only registration).
            let page =
                unsafe { std::slice::from_raw_parts((scratch + k * PAGE) as *const u8, PAGE) };
            // A hole (the page was missing although resident: a raw madvise of the program)
            // reads as zeros in the scratch area.
            crate::page_log!(
                r.addr(run.first + k),
                if sys::page_present(scratch + k * PAGE) {
                    ev::MOVED
                } else {
                    ev::HOLE
                },
                s,
                u64::from_le_bytes(page[..8].try_into().unwrap()),
            );
            let keep = s & INHERITED;
            if s & SWPIN != 0 {
                self.seg.reevictions.fetch_add(1, Relaxed);
            }
            let stored = if s & KEPT != 0 {
                let (area, off) = region::slot_of(s);
                if self.same_as_kept(SwapSlot { area, offset: off }, page) {
                    self.seg.reevictions_saved.fetch_add(1, Relaxed);
                    Some(SwapSlot { area, offset: off })
                } else {
                    self.forget_slot((area, off));
                    self.store_page(page)
                }
            } else {
                self.store_page(page)
            };
            match stored {
                Some(slot) => {
                    if let Some(rec) = &self.rec {
                        let idx = self.seg.trace_pages.fetch_add(1, Relaxed);
                        rec.evict((r.addr(run.first + k) / PAGE) as u64, page, idx);
                    }
                    let epoch = self.evictions.fetch_add(1, Relaxed);
                    crate::page_log!(
                        r.addr(run.first + k),
                        ev::STORED,
                        s,
                        (u64::from(slot.area) << 32) | slot.offset,
                    );
                    w.store(region::evicted(slot.area, slot.offset, epoch), Release);
                    out += 1;
                    inh += (keep != 0) as i64;
                }
                None => {
                    // Nowhere to put it: copy it back where it was.
                    let res = self
                        .uffd()
                        .copy(r.addr(run.first + k), page.as_ptr(), PAGE, false);
                    crate::page_log!(r.addr(run.first + k), ev::COPY_BACK, s, res.is_ok() as u64);
                    if res.is_err() {
                        // Only if the range went away under us (a raw munmap): say so rather
                        // than lose the page silently.
                        sys::raw_stderr(
                            format!(
                                "uzswap: page {:#x} could be neither stored nor put back\n",
                                r.addr(run.first + k)
                            )
                            .as_bytes(),
                        );
                    }
                    w.store(RESIDENT | REF | keep, Release);
                }
            }
        }
        self.resident.fetch_sub(out as i64, Relaxed);
        self.uncharge(out as i64, inh);
        self.seg.evictions.fetch_add(out as u64, Relaxed);
        self.seg.evict_busy.fetch_add(busy, Relaxed);
        out
    }

    /// Moves pages `first..first+n` of `r` (claimed `BUSY`) to the scratch area, page k at
    /// `scratch + k * PAGE`, and returns which were moved (bit k). The move is atomic per page:
    /// a write racing it either lands before (and is moved with the page) or faults afterwards
    /// and waits for `BUSY` to clear. `UFFDIO_MOVE` takes only exclusive pages (EBUSY for one a
    /// fork shares copy-on-write): such a page is made exclusive first (`sys::break_cow`, an
    /// atomic add of zero by the kernel, which can't undo a concurrent write) and moved on the
    /// retry. Sync write protection can't close the race instead: with
    /// `UFFD_FEATURE_WP_ASYNC` every write-protected page of the userfaultfd is async.
    fn move_run(&self, r: &Region, first: usize, n: usize, scratch: usize) -> u64 {
        let span = |a: usize, b: usize| -> u64 {
            if b <= a {
                0
            } else {
                (u64::MAX >> (64 - (b - a))) << a
            }
        };
        let mut moved = 0u64;
        let mut k = 0;
        let mut tries = 0;
        // Where this call's range ends: short of `n` while a run that crosses into another
        // mapping is moved up to the first mapping's end (a move may not cross mappings).
        let mut upto = n;
        while k < n {
            if k >= upto {
                upto = n;
            }
            let res =
                self.uffd()
                    .move_out(scratch + k * PAGE, r.addr(first + k), (upto - k) * PAGE);
            if let (Err(UffdError::MoveFailed { errno, done: 0 }), true) = (&res, upto == n) {
                if *errno == libc::EINVAL {
                    match self.evict_refused(r.addr(first + k), n - k, scratch + k * PAGE) {
                        Refused::Copied(c) => {
                            moved |= span(k, k + c);
                            k += c;
                            tries = 0;
                            continue;
                        }
                        Refused::Clip(c) => {
                            upto = k + c;
                            continue;
                        }
                        Refused::Skip(c) => {
                            k += c;
                            tries = 0;
                            continue;
                        }
                        Refused::Other => {}
                    }
                }
            }
            let (done, retry) = match res {
                Ok(()) => {
                    moved |= span(k, upto);
                    if upto == n {
                        break;
                    }
                    k = upto;
                    tries = 0;
                    continue;
                }
                Err(UffdError::Busy { done }) => {
                    let d = done / PAGE;
                    // SAFETY: page k + d is owned by this eviction (BUSY) and present (MOVE
                    // found it shared); the add of zero changes no data.
                    let broke = (d > 0 || tries == 0)
                        && unsafe { sys::break_cow(r.addr(first + k + d)) }.is_ok();
                    (d, broke)
                }
                Err(UffdError::Again { done }) => (done / PAGE, done > 0 || tries < 3),
                // Pages moved before the failure are in the scratch area: count them, or
                // their content would be dropped with it.
                Err(UffdError::Hole { done }) | Err(UffdError::MoveFailed { done, .. }) => {
                    (done / PAGE, false)
                }
                Err(_) => (0, false),
            };
            if let Err(e) = &res {
                crate::page_log!(
                    r.addr(first + k),
                    ev::MOVE_ERR,
                    (n - k) as u64,
                    match e {
                        UffdError::Busy { .. } => 1,
                        UffdError::Again { .. } => 2,
                        UffdError::Hole { .. } => 3,
                        UffdError::MoveFailed { errno, .. } => 1000 + *errno as u64,
                        _ => 9,
                    } | (done as u64) << 16
                        | (retry as u64) << 32,
                );
            }
            moved |= span(k, k + done);
            k += done;
            if res.is_err() && k < n && sys::page_present(scratch + k * PAGE) {
                if !sys::page_present(r.addr(first + k)) {
                    // The page the call stopped at is in the scratch area (empty before the
                    // call: every batch empties what it used) and gone from its place, so the
                    // kernel moved it even though it reported an error. Linux 6.18 does this:
                    // a move whose first attempt takes the page but asks for a retry (EAGAIN
                    // inside the ioctl) is retried, finds its destination full and returns
                    // EEXIST with nothing counted. Counted as not moved, the page was marked
                    // resident while it was gone from the program, which then read zeros.
                    crate::page_log!(r.addr(first + k), ev::MOVE_MISREPORTED, 0, 0);
                    self.seg.move_misreported.fetch_add(1, Relaxed);
                    moved |= 1 << k;
                    k += 1;
                    tries = 0;
                    continue;
                }
                // Still in place: the scratch slot really was full (a batch that could not
                // empty it). Empty it; this page stays resident this time.
                // SAFETY: a page of our own scratch area, holding nothing of the program's.
                let _ = unsafe { sys::raw_madvise(scratch + k * PAGE, PAGE, libc::MADV_DONTNEED) };
            }
            // A partial move (the kernel reports EAGAIN with the pages it moved before a
            // shared one) is progress, not a try: the next call meets the shared page with a
            // COW break still allowed.
            if done > 0 {
                tries = 0;
            } else if retry {
                tries += 1;
            }
            if !retry {
                k += 1; // give this page up: it stays resident
                tries = 0;
            }
        }
        moved
    }

    /// `UFFDIO_MOVE` refused the page at `addr` (EINVAL), the first of up to `max` pages of a
    /// run this eviction claimed: what its mapping allows instead.
    /// - A private anonymous mapping without write permission (a JIT's finished code, a heap
    ///   made read-only, `PROT_NONE`): the move takes pages only between writable mappings
    ///   ("userfaultfd: UFFDIO_MOVE uABI", 6.8), so these pages are read through
    ///   `/proc/self/mem` (which reads whatever the protection, and fails on a missing page
    ///   instead of faulting), copied into the scratch slots from `dst` on and dropped from
    ///   their place. Nothing can write them in between: the mapping is read-only, and its
    ///   protection can't change before this eviction is done, because `mprotect` of managed
    ///   memory takes the regions lock for writing (`hooks::mprotect`) and every eviction
    ///   holds it for reading. The kernel swaps such pages like any others; they stayed
    ///   resident, out of reach of the budget, before (docs/pager.md, "Read-only pages").
    /// - A private anonymous mapping that is writable and executable (a JIT's code cache): the
    ///   move takes pages only into a mapping of the same protection, so they are moved
    ///   through the executable scratch area (`move_out_exec`).
    /// - A writable mapping that ends inside the run: the caller moves up to its end first.
    /// - A writable mapping the move refuses for another reason (locked by the kernel, or a
    ///   protection key), or a shared or file mapping: its pages of the run stay resident,
    ///   given up at once rather than one failed move and query each.
    fn evict_refused(&self, addr: usize, max: usize, dst: usize) -> Refused {
        let maps = Self::proc_fd(&self.maps_fd, c"/proc/self/maps");
        let Some(vma) = (maps >= 0).then(|| sys::vma_at(maps, addr)).flatten() else {
            return Refused::Other;
        };
        if vma.start > addr || vma.end <= addr {
            return Refused::Other;
        }
        let within = ((vma.end - addr) / PAGE).min(max);
        if vma.writable && vma.exec && !vma.shared && !vma.file {
            return self.move_out_exec(addr, within, dst);
        }
        if vma.writable && within < max {
            return Refused::Clip(within);
        }
        if vma.writable || vma.shared || vma.file {
            return Refused::Skip(within);
        }
        let mem = Self::proc_fd(&self.mem_fd, c"/proc/self/mem");
        if mem < 0 {
            return Refused::Other;
        }
        let mut buf = [0u8; PAGE];
        let mut c = 0;
        while c < within {
            if sys::read_mem(mem, addr + c * PAGE, &mut buf) != Ok(PAGE)
                || self
                    .uffd()
                    .copy(dst + c * PAGE, buf.as_ptr(), PAGE, false)
                    .is_err()
            {
                break;
            }
            c += 1;
        }
        if c == 0 {
            return Refused::Other;
        }
        let pause = COPY_OUT_PAUSE_US.load(Relaxed);
        if pause > 0 {
            std::thread::sleep(std::time::Duration::from_micros(pause));
        }
        // SAFETY: pages of the program claimed BUSY by this eviction, whose content is in the
        // scratch slots now and which nothing can have written since (above).
        if unsafe { sys::raw_madvise(addr, c * PAGE, libc::MADV_DONTNEED) }.is_err() {
            // Still in place: give the scratch slots back empty.
            // SAFETY: our own scratch slots, holding copies only.
            let _ = unsafe { sys::raw_madvise(dst, c * PAGE, libc::MADV_DONTNEED) };
            return Refused::Other;
        }
        crate::page_log!(addr, ev::COPIED_OUT, c as u64, 0);
        self.seg.evict_read_only.fetch_add(c as u64, Relaxed);
        Refused::Copied(c)
    }

    /// Evicts `n` pages of a writable executable private mapping from `addr` (claimed `BUSY`)
    /// into the scratch slots from `dst` on: `UFFDIO_MOVE` takes them atomically into the
    /// executable scratch area (the same slots' twins there), as it takes other pages into
    /// the scratch area, so a racing write is never lost; they are then copied into the
    /// scratch slots, where the eviction stores them from, and the twins emptied. A page
    /// that can't be copied goes back home. `Skip` where the executable scratch area can't be
    /// made or the move is refused (a protection key, a lock by the kernel), `Other` where it
    /// fails otherwise.
    fn move_out_exec(&self, addr: usize, n: usize, dst: usize) -> Refused {
        let Some(area) = self.exec_scratch() else {
            return Refused::Skip(n);
        };
        let via = area + (dst - self.scratch_base);
        let mut c = 0;
        let mut broke = false;
        while c < n {
            let res = self
                .uffd()
                .move_out(via + c * PAGE, addr + c * PAGE, (n - c) * PAGE);
            let done = match res {
                Ok(()) => n - c,
                Err(UffdError::Again { done })
                | Err(UffdError::Busy { done })
                | Err(UffdError::Hole { done })
                | Err(UffdError::MoveFailed { done, .. }) => done / PAGE,
                Err(_) => 0,
            };
            c += done;
            match res {
                Ok(()) => break,
                // Refused outright (a protection key other than the default, or a mapping
                // the kernel locked): the rest of this mapping's pages in the run would be
                // too, so they are given up at once.
                Err(UffdError::MoveFailed {
                    errno: libc::EINVAL,
                    done: 0,
                }) if c == 0 => return Refused::Skip(n),
                _ if done > 0 => broke = false,
                // Shared with a fork child: made exclusive once, as `move_run` does.
                Err(UffdError::Busy { .. }) if !broke => {
                    // SAFETY: page c is owned by this eviction (BUSY) and present; the add of
                    // zero changes no data.
                    broke = unsafe { sys::break_cow(addr + c * PAGE) }.is_ok();
                    if !broke {
                        break;
                    }
                }
                _ => {
                    // Moved although an error was reported (see `move_run`).
                    if sys::page_present(via + c * PAGE) && !sys::page_present(addr + c * PAGE) {
                        self.seg.move_misreported.fetch_add(1, Relaxed);
                        c += 1;
                    }
                    break;
                }
            }
        }
        let mut copied = 0;
        while copied < c {
            let (from, to) = (via + copied * PAGE, dst + copied * PAGE);
            // A hole (missing at the source too) stays missing and is stored as zeros.
            if sys::page_present(from)
                && self
                    .uffd()
                    .copy(to, from as *const u8, PAGE, false)
                    .is_err()
            {
                break;
            }
            copied += 1;
        }
        for j in copied..c {
            // Not copied (a scratch slot already full: not expected): back home, where the
            // page is missing and claimed by this eviction.
            let (from, home) = (via + j * PAGE, addr + j * PAGE);
            if sys::page_present(from)
                && self.uffd().move_out(home, from, PAGE).is_err()
                && self
                    .uffd()
                    .copy(home, from as *const u8, PAGE, false)
                    .is_err()
            {
                sys::raw_stderr(
                    format!("uzswap: page {home:#x} could be neither evicted nor put back\n")
                        .as_bytes(),
                );
            }
        }
        if c > 0 {
            // SAFETY: our own executable scratch slots, holding copies only now.
            let _ = unsafe { sys::raw_madvise(via, c * PAGE, libc::MADV_DONTNEED) };
        }
        if copied == 0 {
            return Refused::Other;
        }
        crate::page_log!(addr, ev::COPIED_OUT, copied as u64, 1);
        self.seg.evict_exec.fetch_add(copied as u64, Relaxed);
        Refused::Copied(copied)
    }

    /// The executable scratch area: as many pages as the scratch area, mapped
    /// `PROT_READ|PROT_WRITE|PROT_EXEC` and registered like it, at the first eviction that
    /// needs it (`UFFDIO_MOVE` takes pages only between mappings of equal protection, and
    /// most programs have no writable executable memory). `None`: it can't be made (a
    /// policy that refuses writable executable mappings); such pages then stay resident.
    fn exec_scratch(&self) -> Option<usize> {
        match self.exec_scratch.load(Acquire) {
            0 => {}
            usize::MAX => return None,
            a => return Some(a),
        }
        let len = 2 * SCRATCH_PAGES * PAGE;
        let prot = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        let made = sys::map_anon_prot(len, prot).ok().and_then(|a| {
            // SAFETY: our own fresh mapping, used only as a MOVE target.
            match unsafe { self.uffd().register_scratch(a, len) } {
                Ok(()) => Some(a),
                Err(_) => {
                    // SAFETY: our own fresh mapping, known to nothing else.
                    let _ = unsafe { sys::raw_munmap(a, len) };
                    None
                }
            }
        });
        match self
            .exec_scratch
            .compare_exchange(0, made.unwrap_or(usize::MAX), AcqRel, Acquire)
        {
            Ok(_) => made,
            Err(other) => {
                if let Some(a) = made {
                    // SAFETY: as above; another eviction's area won.
                    let _ = unsafe { sys::raw_munmap(a, len) };
                }
                (other != usize::MAX).then_some(other)
            }
        }
    }

    /// Stores one page under a new slot of this process's swap area (pool, or the file).
    fn store_page(&self, page: &[u8]) -> Option<SwapSlot> {
        let z = self.cache()?;
        if !z.has_area(self.area.area()) {
            self.attach_area(z).ok()?;
        }
        let swap = self.swap();
        let slot = swap.alloc_slot().ok()?;
        match z.swap_out(slot, page, CgroupId::ROOT) {
            Ok(_) => Some(slot),
            Err(_) => {
                let _ = swap.free_slot(slot);
                None
            }
        }
    }

    /// Attaches the swap area to the cache (once; a racing thread's attach finds it there).
    #[cold]
    fn attach_area(&self, z: &Zswap) -> Result<(), String> {
        match z.add_swap_file(self.area.clone()) {
            Ok(()) | Err(uzswap_zswap::Error::AreaExists(_)) => Ok(()),
            Err(e) => Err(format!("cache: {e}")),
        }
    }

    /// Is `page` what the cache keeps under `slot` (a clean page coming back out)? Reads the
    /// kept copy without taking it, from the pool or, if it was written back, from the swap
    /// file (one read instead of a compression and a write). The comparison makes reuse sound
    /// on its own (a write between the last scan and the move is caught here); write tracking
    /// only drops stale copies early.
    fn same_as_kept(&self, slot: SwapSlot, page: &[u8]) -> bool {
        // A kept copy was stored, so the cache exists.
        let Some(z) = self.cache_made() else {
            return false;
        };
        if let Some(uzswap_zswap::SlotState::Zero) = z.slot_state(slot) {
            return page.iter().all(|&b| b == 0);
        }
        let mut buf = [0u8; PAGE];
        let same = match z.load(slot, &mut buf, false) {
            Ok(LoadOutcome::Hit) => {
                self.verify_loads[0].fetch_add(1, Relaxed);
                buf[..] == page[..]
            }
            Ok(LoadOutcome::FromSwapFile) => {
                self.verify_loads[1].fetch_add(1, Relaxed);
                buf[..] == page[..]
            }
            _ => false,
        };
        if !same {
            self.seg.kept_mismatch.fetch_add(1, Relaxed);
        }
        same
    }

    // ------------------------------------------------------------------ process lifecycle

    /// Called from program code (`mremap`, `exec`, exit), but the wait is pager code, run as
    /// such (see `sys::SigBlock`): parked on the reclaim lock with signals open, the thread
    /// could run a handler of the program that faults, and the fault path parks on the regions
    /// lock while the thread's parking_lot state is still queued on the first.
    pub fn pause(&self) {
        let _b = sys::SigBlock::new();
        let _g = InPager::enter();
        self.paused.fetch_add(1, AcqRel);
        // Store a staged batch, or wait for the reclaim thread to finish storing it; then wait
        // for an eviction in progress (under the regions lock, as the reclaim mutex always
        // is). A fault that passed the `paused` test just before may stage one more batch
        // meanwhile (it holds the reclaim mutex while it does), so the test is repeated under
        // the mutex: a batch stored across a fork left the child `staged` for good, and its
        // exit waited here forever.
        loop {
            self.store_staged();
            while self.staged.load(Acquire) {
                std::thread::yield_now();
            }
            let _map = self.regions.read_recursive();
            let rc = self.reclaim.lock();
            if !self.staged.load(Acquire) {
                // Nothing of a batch crosses a fork or outlives the process's last staging.
                self.empty_staging_area(rc.scratch + SCRATCH_PAGES * PAGE);
                break;
            }
        }
    }

    pub fn resume(&self) {
        self.paused.fetch_sub(1, AcqRel);
    }

    /// Adds this process's cache counters to the shared segment, by the kernel's names, and
    /// withdraws its pages from the tree's totals (at exit or exec).
    pub fn retire(&self) {
        let _g = InPager::enter();
        self.retired.store(true, Relaxed);
        if let Some(rec) = &self.rec {
            rec.event(crate::record::EXIT, 0, 0);
        }
        let c = {
            let _no_fork = self.fork_excluded();
            // Without a cache every counter is 0, under the same names.
            self.cache_made()
                .map_or_else(uzswap_zswap::Counters::default, Zswap::counters)
        };
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&c) {
            for (k, v) in m {
                if let Some(mut n) = v.as_u64() {
                    if k == "zswpin" {
                        n = n.saturating_sub(self.verify_loads[0].load(Relaxed));
                    }
                    if k == "pswpin" {
                        n = n.saturating_sub(self.verify_loads[1].load(Relaxed));
                    }
                    if GAUGES.contains(&k.as_str()) {
                        self.seg.max_counter(&k, n);
                    } else {
                        self.seg.add_counter(&k, n);
                    }
                }
            }
        }
        self.seg.resident_pages.fetch_sub(
            self.resident.load(Relaxed) - self.inherited.load(Relaxed),
            Relaxed,
        );
        // AcqRel: orders the `retired` flag above before this swap, for `publish_pool`.
        let p = self.pool_published.swap(0, AcqRel);
        self.seg.pool_pages.fetch_sub(p, Relaxed);
        self.seg.processes.fetch_sub(1, Relaxed);
        self.leave_tree();
    }

    /// Undoes `retire`'s withdrawal (an exec that failed).
    pub fn rejoin(&self) {
        self.retired.store(false, Relaxed);
        self.seg.resident_pages.fetch_add(
            self.resident.load(Relaxed) - self.inherited.load(Relaxed),
            Relaxed,
        );
        self.seg.processes.fetch_add(1, Relaxed);
        self.publish_pool();
        self.join_tree();
    }

    /// Keeps a fork out while held (the regions lock, read): every use of the cache holds it,
    /// so that `lock_for_fork` never forks while a thread is inside the cache's locks (the
    /// child's copy would be locked for good, or list a parked thread it does not have). A
    /// fork child deadlocked in the cache's pool registry when a fault's `publish_pool` ran
    /// outside it.
    pub(crate) fn fork_excluded(
        &self,
    ) -> parking_lot::lock_api::RwLockReadGuard<
        '_,
        crate::futex_rwlock::RawFutexRwLock,
        BTreeMap<usize, Arc<Region>>,
    > {
        self.regions.read_recursive()
    }

    /// fork, prepare: pause eviction and hold the regions table exclusively across the fork,
    /// so no fault or eviction of another thread is half done in the child's copy (`resume`
    /// and `unlock_after_fork*` undo it).
    pub fn lock_for_fork(&self) {
        // Pager code from here: a contended lock below parks through `syscall(SYS_futex)`,
        // whose wrapper pins the futex word when it may be managed, and a pin takes the regions
        // lock for reading. Parked in `regions.write()` waiting for readers, this thread would
        // then wait for itself: a forking thread hung so, with the program's other threads
        // queued behind it.
        let _g = InPager::enter();
        // The cache's background shrink worker marks slots in flight while it writes entries
        // back; a child forked meanwhile would inherit the mark with no thread to clear it,
        // and wait on that slot forever. Hold the worker and let a run in progress finish,
        // before pausing eviction: a writeback run can take a while, and the program's other
        // threads go on faulting meanwhile (paused first, a parent reached 39 MiB resident
        // under a 16M budget while it waited).
        crate::page_log!(0, ev::FORK_PREPARE, 0, 0);
        let mut held = false;
        loop {
            if !held {
                if let Some(z) = self.cache_made() {
                    z.hold_shrink_worker(true);
                    let _ = z.wait_shrink_idle(std::time::Duration::from_secs(10));
                    held = true;
                }
            }
            self.pause();
            let map = self.regions.write();
            if !held && self.cache_made().is_some() {
                // A first store made the cache since the test above (a store holds the regions
                // lock for reading, so none can now): hold its worker too, outside the lock.
                drop(map);
                self.resume();
                continue;
            }
            std::mem::forget(map);
            break;
        }
        // The child copies the blocks of this process's swap file into a file of its own at
        // once (`SwapFile::take_private_copy`); this process frees, reuses and punches them as
        // it goes on. So when the file holds blocks, this process waits for the child to have
        // copied them (`wait_for_fork_child`), still holding what it took here.
        if self.area.stats().blocks_stored > 0 {
            let mut fds = [-1; 2];
            // Pager code (above): the `pipe2` wrapper would pin `fds`, taking the regions lock
            // we hold.
            // SAFETY: a two-int array for pipe2 to fill.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
                self.fork_handshake[0].store(fds[0], Relaxed);
                self.fork_handshake[1].store(fds[1], Relaxed);
            }
        }
    }

    /// fork, parent: wait until the child has copied what it needs of this process's swap
    /// file (it closes its end of the pipe then, or by exiting).
    pub fn wait_for_fork_child(&self) {
        let Some((r, w)) = self.take_fork_handshake() else {
            return;
        };
        let _g = InPager::enter();
        // SAFETY: the pipe made in `lock_for_fork`: our ends, closed once each; one byte read
        // into a local.
        unsafe {
            libc::close(w);
            let mut b = 0u8;
            while libc::read(r, (&mut b as *mut u8).cast(), 1) < 0 && sys::errno() == libc::EINTR {}
            libc::close(r);
        }
    }

    /// fork, child: the parent may go on (see `wait_for_fork_child`).
    fn release_fork_parent(&self) {
        if let Some((r, w)) = self.take_fork_handshake() {
            // SAFETY: the child's copies of the pipe's two ends, closed once each.
            unsafe {
                libc::close(r);
                libc::close(w);
            }
        }
    }

    /// The handshake pipe's (read, write) ends, if this fork has one; taken once.
    fn take_fork_handshake(&self) -> Option<(i32, i32)> {
        let r = self.fork_handshake[0].swap(-1, Relaxed);
        let w = self.fork_handshake[1].swap(-1, Relaxed);
        (r >= 0).then_some((r, w))
    }

    /// fork, parent: release what `lock_for_fork` took.
    pub fn unlock_after_fork(&self) {
        let _g = InPager::enter();
        crate::page_log!(0, ev::FORK_PARENT, 0, 0);
        // SAFETY: `lock_for_fork` took the write lock and forgot its guard; this is its one
        // matching release in this process.
        unsafe { self.regions.force_unlock_write() };
        if let Some(z) = self.cache_made() {
            z.hold_shrink_worker(false);
        }
    }

    /// fork, child: release what `lock_for_fork` took. The regions lock keeps its waiters in
    /// the kernel (`futex_rwlock`): threads of the parent that were waiting for it at the fork
    /// (the program's, entering a fault or a wrapped call) left nothing in the child but the
    /// word's waiting bits, which the unlock clears. (With parking_lot's lock they stayed in the
    /// child's copy of its user-space queues, and a parent thread caught inside a queue's bucket
    /// lock at the fork left it locked: the child hung dropping them.) The cache's background
    /// threads are the parent's too: the cache starts its own.
    ///
    /// # Safety
    /// Only in the child of a fork prepared by `lock_for_fork`, before it starts any thread.
    pub unsafe fn unlock_after_fork_child(&self) -> Result<(), String> {
        // The cache's new thread inherits both: pager code, every signal blocked.
        let _g = InPager::enter();
        let _b = sys::SigBlock::new();
        // SAFETY: `lock_for_fork` took the write lock and forgot its guard; this is its one
        // matching release in the child.
        unsafe { self.regions.force_unlock_write() };
        // SAFETY: the caller's guarantee: a fork child with one thread.
        if let Some(z) = self.cache_made() {
            // SAFETY: the caller's guarantee: a fork child with one thread.
            unsafe { z.after_fork_child() }.map_err(|e| format!("cache: {e}"))?;
        }
        // The new worker stays held until `after_fork_child` has given the child a swap file of
        // its own: until then the pool's entries are slots of the parent's file.
        Ok(())
    }

    /// Fork child: the inherited userfaultfd still acts on the parent, and the child's copies of
    /// the managed ranges are plain memory again (no `EVENT_FORK`): close it, make a new one
    /// and register every region and the scratch area again, before the program runs on. The
    /// cache (pool, index) is the child's own copy-on-write copy, so evicted pages load as
    /// before. Single-threaded here (the child of fork has one thread).
    pub fn after_fork_child(&self) -> Result<(), String> {
        let _g = InPager::enter();
        crate::page_log!(0, ev::FORK_CHILD, 0, 0);
        // The slot index copied from the parent is the parent's slot (shared memory): nothing
        // of the child may charge it.
        self.proc_slot.store(usize::MAX, Relaxed);
        let new = Uffd::new().map_err(|(w, e)| format!("{w}: errno {e}"))?;
        let old = self.uffd.swap(Box::into_raw(Box::new(new)), AcqRel);
        // SAFETY: `old` came from Box::into_raw; the child is single-threaded, so no other
        // reference to it exists.
        drop(unsafe { Box::from_raw(old) });
        let rc = self.reclaim.lock();
        // SAFETY: our own scratch area.
        unsafe {
            self.uffd()
                .register_scratch(rc.scratch, 2 * SCRATCH_PAGES * PAGE)
        }
        .map_err(|e| format!("scratch: errno {e}"))?;
        drop(rc);
        // The executable scratch area too, if the parent made it.
        let exec = self.exec_scratch.load(Acquire);
        if exec != 0 && exec != usize::MAX {
            // SAFETY: our own executable scratch area.
            unsafe { self.uffd().register_scratch(exec, 2 * SCRATCH_PAGES * PAGE) }
                .map_err(|e| format!("executable scratch: errno {e}"))?;
        }
        // `MADV_DONTFORK` ranges are not in the child at all: out of its books, before
        // anything registers or counts them. Their evicted pages' slots (the child's copies)
        // are forgotten once the child's swap file is its own, with the kept copies below.
        let mut forgotten = Vec::new();
        {
            let mut map = self.regions.write();
            let mut gone = 0i64;
            for (lo, hi) in std::mem::take(&mut *self.dontfork.lock()) {
                for (_, r) in map.range(..hi).rev().take_while(|(_, r)| r.end() > lo) {
                    for i in r.index(lo.max(r.start))..r.index(hi.min(r.end()) - 1) + 1 {
                        let s = r.state(i).swap(ABSENT, Relaxed);
                        match region::kind(s) {
                            RESIDENT => {
                                gone += 1;
                                if s & KEPT != 0 {
                                    forgotten.push(region::slot_of(s));
                                }
                            }
                            EVICTED => forgotten.push(region::slot_of(s)),
                            _ => {}
                        }
                    }
                }
                Self::cut(&mut map, lo, hi);
            }
            self.resident.fetch_sub(gone, Relaxed);
        }
        let map = self.regions.read_recursive();
        for r in map.values() {
            // SAFETY: the same managed ranges, now in the child's address space.
            unsafe { self.uffd().register_missing(r.start, r.pages * PAGE) }
                .map_err(|e| format!("re-registering {:#x}: errno {e}", r.start))?;
        }
        self.pid.store(sys::getpid(), Relaxed);
        self.pool_published.store(0, Relaxed);
        self.retired.store(false, Relaxed);
        self.starved_at.store(-1, Relaxed);
        // The child has no reclaim thread until the fork hook starts one: nothing is staged
        // until then (a staged batch would wait for it). The handle names the parent's
        // thread: never joined or detached here (its box is left).
        self.reclaimer_up.store(false, Relaxed);
        self.reclaim_join.store(std::ptr::null_mut(), Relaxed);
        self.reclaim_stop.store(false, Relaxed);
        self.parked.store(0, Relaxed);
        // The inherited resident pages are the parent's, shared copy-on-write: not charged
        // again (the kernel charges a page once, to the cgroup that faulted it in).
        // Their kept clean copies are dropped (once the swap file is the child's own): the
        // child's write tracking starts afresh. Marked before the swap file is taken: pages it
        // brings back into memory are the child's own, charged to it.
        let mut inh = 0;
        let mut kept = Vec::new();
        let cache = self.cache_made();
        for r in map.values() {
            r.for_each_mapped(r.hwm.load(Relaxed), |i| {
                let w = r.state(i);
                let s = w.load(Relaxed);
                if region::kind(s) == RESIDENT {
                    if s & KEPT != 0 {
                        kept.push(region::slot_of(s));
                    }
                    w.store(region::flags_only(s) & !KEPT | INHERITED, Relaxed);
                    inh += 1;
                }
            });
        }
        // The swap file is one open file shared with the parent, while the slot map, the
        // index and the pool are the child's copies: both would hand out the same blocks. The
        // child takes a file of its own with the same blocks at the same places (nothing to
        // copy where none was written) and keeps everything else as it is: its pool is the
        // parent's memory, shared copy-on-write until either writes it, as the kernel's fork
        // shares swap entries. (Storing every evicted page again under a new area, as before,
        // doubled the tree's pool at each fork: a 48 MiB program forking under 16M peaked at a
        // 6.7 MiB pool against 3.4 without the fork.) The parent waits for the copy
        // (`wait_for_fork_child`).
        self.take_own_swap_file(&map)?;
        for slot in kept.into_iter().chain(forgotten) {
            self.forget_slot(slot);
        }
        if self.uffd().tracking() {
            self.scanner.reopen();
        } else {
            self.scanner.close();
        }
        self.close_proc_fds();
        self.inherited.store(inh, Relaxed);
        // An inherited pagemap is the parent's address space.
        self.close_shared_pagemap();
        let pool_shared = cache.is_some_and(|z| z.pool_total_pages() > 0);
        if inh > 0 || pool_shared {
            self.shared_pagemap
                .store(crate::scan::open_pagemap(), Relaxed);
            self.recount_shared(Recount::AtFork);
        }
        self.release_fork_parent();
        if let Some(z) = cache {
            z.hold_shrink_worker(false);
        }
        self.seg.processes.fetch_add(1, Relaxed);
        self.seg.joined.fetch_add(1, Relaxed);
        let parent_slot = self.proc_slot.swap(usize::MAX, Relaxed);
        self.join_tree();
        if pool_shared {
            // Its pool is the parent's, copy-on-write, until either writes: the parent's
            // oldest entries are then no one's to write back for the tree
            // (`publish_lru_oldest`), until the child shares nothing any more.
            self.seg
                .start_sharing(self.proc_slot.load(Relaxed), parent_slot);
        }
        self.publish_pool();
        Ok(())
    }
}

impl Pager {
    /// Fork child: a swap file of its own with the blocks of the parent's (see
    /// `after_fork_child`). Blocks that could not be copied (the swap directory's file system
    /// full or failing) come back into memory instead, read from the parent's file (which the
    /// parent leaves alone until the child is done here) and put in place as resident pages of
    /// the child; their slots are forgotten once the child's file is its own. Before, such a
    /// child could not take over its memory and exited with status 125.
    fn take_own_swap_file(&self, map: &BTreeMap<usize, Arc<Region>>) -> Result<(), String> {
        let copy = self.area.private_copy(&self.cfg.swap_dir);
        let mut forget = Vec::new();
        if !copy.failed().is_empty() {
            let failed: std::collections::HashSet<u64> = copy.failed().iter().copied().collect();
            let z = self.cache_made().ok_or("blocks written without a cache")?;
            let mut buf = [0u8; PAGE];
            for r in map.values() {
                for i in 0..r.hwm.load(Relaxed).min(r.pages) {
                    let s = r.state(i).load(Relaxed);
                    let (area, offset) = region::slot_of(s);
                    if region::kind(s) != EVICTED || !failed.contains(&offset) {
                        continue;
                    }
                    let slot = SwapSlot { area, offset };
                    match z.load(slot, &mut buf, false) {
                        Ok(LoadOutcome::Hit) | Ok(LoadOutcome::FromSwapFile) => {}
                        _ => return Err(format!("page {:#x} could not be read", r.addr(i))),
                    }
                    match self.uffd().copy(r.addr(i), buf.as_ptr(), PAGE, false) {
                        Ok(()) | Err(UffdError::Exists) => {}
                        Err(e) => return Err(format!("page {:#x}: {e:?}", r.addr(i))),
                    }
                    r.state(i).store(RESIDENT | REF, Release);
                    r.note_filled(i, i);
                    self.resident.fetch_add(1, Relaxed);
                    self.charge(1);
                    forget.push((area, offset));
                }
            }
            sys::raw_stderr(
                format!(
                    "uzswap: fork child: {} blocks could not be copied to a swap file of its own \
                     in {}; {} pages came back into memory\n",
                    copy.failed().len(),
                    self.cfg.swap_dir.display(),
                    forget.len()
                )
                .as_bytes(),
            );
        }
        self.area
            .switch_to_copy(copy)
            .map_err(|e| format!("swap file: {e}"))?;
        for slot in forget {
            self.forget_slot(slot);
        }
        Ok(())
    }
}

/// Holds the regions write lock across a program's own munmap/madvise/mmap(MAP_FIXED).
/// Releasing the lock is pager code too: with readers waiting, the unlock wakes them with a
/// `futex` system call; made as program code, such a call went through the preload's
/// `syscall` wrapper, which pinned (taking the regions lock for reading) while this thread still
/// held it for writing, and the program hung (Node, once, in the 19th run of a series, when the
/// lock was parking_lot's, whose unlock could park on a bucket lock). Fields drop in order: the
/// lock first, then the mark.
pub struct DropGuard<'a> {
    map: parking_lot::lock_api::RwLockWriteGuard<
        'a,
        crate::futex_rwlock::RawFutexRwLock,
        BTreeMap<usize, Arc<Region>>,
    >,
    _in_pager: InPager,
    pager: &'a Pager,
    /// The first page of the range (the test hook's futex word), and the range's end.
    at: usize,
    end: usize,
}

impl DropGuard<'_> {
    /// The program gave the guard's range `MADV_DONTFORK` (`on`) or `MADV_DOFORK`, and the
    /// kernel took it. The range stays managed: in this process it is memory like any other.
    /// Only its managed parts are listed: an unmanaged part may be unmapped where no wrapper
    /// sees it (glibc's thread stacks), and a stale entry would take a later managed mapping
    /// there out of a fork child's books, whose evicted pages the child would then read as
    /// zeros.
    pub fn mark_dontfork(&mut self, on: bool) {
        let lo = self.at;
        let hi = self.end.div_ceil(PAGE) * PAGE;
        let mut v = self.pager.dontfork.lock();
        ranges_remove(&mut v, lo, hi);
        if on {
            for (_, r) in self.map.range(..hi).rev().take_while(|(_, r)| r.end() > lo) {
                ranges_add(&mut v, lo.max(r.start), hi.min(r.end()));
            }
        }
    }

    /// The range was dropped (the call made under this guard changed it): forget its evicted
    /// copies and resident counts, and with `unmap` cut it from the regions. Returns whether
    /// any region met the range.
    pub fn forget(&mut self, unmap: bool) -> bool {
        self.pager
            .forget_locked(&mut self.map, self.at, self.end - self.at, unmap)
    }
}

/// Adds `[lo, hi)` to a sorted list of disjoint ranges, merging what it meets or touches.
fn ranges_add(v: &mut Vec<(usize, usize)>, lo: usize, hi: usize) {
    if lo >= hi {
        return;
    }
    let (mut lo, mut hi) = (lo, hi);
    let first = v.partition_point(|&(_, e)| e < lo);
    let mut last = first;
    while last < v.len() && v[last].0 <= hi {
        lo = lo.min(v[last].0);
        hi = hi.max(v[last].1);
        last += 1;
    }
    v.splice(first..last, [(lo, hi)]);
}

/// Takes `[lo, hi)` out of a sorted list of disjoint ranges (splitting one that straddles it).
fn ranges_remove(v: &mut Vec<(usize, usize)>, lo: usize, hi: usize) {
    if lo >= hi || !ranges_meet(v, lo, hi) {
        return;
    }
    let mut out = Vec::with_capacity(v.len() + 1);
    for &(s, e) in v.iter() {
        if e <= lo || s >= hi {
            out.push((s, e));
            continue;
        }
        if s < lo {
            out.push((s, lo));
        }
        if e > hi {
            out.push((hi, e));
        }
    }
    *v = out;
}

/// Whether any range of the sorted list meets `[lo, hi)`.
fn ranges_meet(v: &[(usize, usize)], lo: usize, hi: usize) -> bool {
    let i = v.partition_point(|&(_, e)| e <= lo);
    i < v.len() && v[i].0 < hi
}

/// Least time between two looks at the program's CPU time (`Pager::note_cpu_activity`).
const CPU_LOOK_NS: u64 = 20_000_000;

/// What [`Pager::evict_refused`] did with a page `UFFDIO_MOVE` refused.
enum Refused {
    /// Copied out and dropped this many pages (the first included).
    Copied(usize),
    /// The page's mapping is writable and ends this many pages on: move up to there first.
    Clip(usize),
    /// Neither can be done for this many pages (the rest of the page's mapping in the run):
    /// they stay where they are.
    Skip(usize),
    /// Nothing: the page stays where it is.
    Other,
}

/// Test hook (`UZSWAP_TEST_COPY_OUT_PAUSE_US`): a pause between reading read-only pages and
/// dropping them (`Pager::evict_refused`), which widens the window a protection change
/// would have to slip into.
static COPY_OUT_PAUSE_US: AtomicU64 = AtomicU64::new(0);

/// Test hook (`UZSWAP_TEST_FUTEX_IN_UNLOCK`): as the regions write lock is released after a
/// drop, make a `futex` call on the program's memory through the same libc symbol, so that
/// the hang above would show on every drop instead of once in many runs.
static FUTEX_IN_UNLOCK: AtomicBool = AtomicBool::new(false);

impl Drop for DropGuard<'_> {
    fn drop(&mut self) {
        if FUTEX_IN_UNLOCK.load(Relaxed) {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a FUTEX_WAIT with a zero timeout: the kernel only reads the word (which
            // may fault: EFAULT) and the timeout, and returns at once. Its result is irrelevant.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.at as *const u32,
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    u32::MAX,
                    &zero as *const libc::timespec,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cache option `uzswap run` passes on reaches the pager's cache, as replay applies
    /// it (`--total-memory`, `--chain-rule`, `--zero-pages` and `--lru` were once dropped here).
    #[test]
    fn every_cache_option_of_run_reaches_the_pagers_cache() {
        let mut p = Params::default();
        apply_params(
            &mut p,
            "compressor=lzo,chain-size=16,chain-rule=used-percent,max-pool-percent=7,\
             accept-threshold-percent=50,shrinker=on,proactive-shrink=off,\
             protection=protected-size,zero-pages=entry,incompressible=reject,lru=per-pool,\
             total-memory=2G",
        );
        let mut q = Params::default();
        for (k, v) in [
            ("compressor", "lzo"),
            ("chain-size", "16"),
            ("chain-rule", "used-percent"),
            ("max-pool-percent", "7"),
            ("accept-threshold-percent", "50"),
            ("shrinker", "on"),
            ("proactive-shrink", "off"),
            ("protection", "protected-size"),
            ("zero-pages", "entry"),
            ("incompressible", "reject"),
            ("lru", "per-pool"),
            ("total-memory", "2G"),
        ] {
            uzswap_zswap::options::apply(&mut q, k, v).unwrap();
        }
        assert_eq!(format!("{p:?}"), format!("{q:?}"));
        assert_eq!(p.total_memory_bytes, 2 << 30);
        assert!(p.zero_page_entries && p.shrinker_enabled && !p.proactive_shrink);
        // Every option replay knows is covered above.
        assert_eq!(uzswap_zswap::options::OPTIONS.len(), 12);
    }

    /// The list of `MADV_DONTFORK` ranges: an added range merges with those it meets or
    /// touches, a removed one splits a range that straddles it, and ranges meet only where
    /// they overlap (ends are exclusive).
    #[test]
    fn dontfork_ranges_merge_split_and_meet() {
        let mut v = Vec::new();
        ranges_add(&mut v, 10, 20);
        ranges_add(&mut v, 30, 40);
        ranges_add(&mut v, 20, 25); // touches the first: merged
        assert_eq!(v, [(10, 25), (30, 40)]);
        ranges_add(&mut v, 24, 31); // bridges both
        assert_eq!(v, [(10, 40)]);
        ranges_remove(&mut v, 15, 18);
        assert_eq!(v, [(10, 15), (18, 40)]);
        ranges_remove(&mut v, 0, 12);
        assert_eq!(v, [(12, 15), (18, 40)]);
        assert!(ranges_meet(&v, 14, 16) && ranges_meet(&v, 39, 50));
        assert!(!ranges_meet(&v, 15, 18) && !ranges_meet(&v, 40, 50) && !ranges_meet(&v, 0, 12));
        ranges_remove(&mut v, 0, 100);
        assert!(v.is_empty());
        ranges_add(&mut v, 5, 5);
        assert!(v.is_empty());
    }

    /// Background reclaim never stages the page a fault just brought back, nor its neighbours:
    /// they go back to resident and referenced, and the runs around them split.
    #[test]
    fn spare_gives_back_the_faulting_page_and_its_neighbours() {
        let r = Arc::new(Region::new(0x7000_0000, 16).unwrap());
        for i in 0..16 {
            r.state(i).store(BUSY | KEPT, Relaxed);
        }
        let runs = vec![
            Run {
                region: Arc::clone(&r),
                first: 2,
                n: 8,
            },
            Run {
                region: Arc::clone(&r),
                first: 12,
                n: 2,
            },
        ];
        // A fault in the middle of page 5 (unaligned address): pages 4, 5, 6 are spared.
        let out = Pager::spare(runs, r.addr(5) + 100);
        let spans: Vec<(usize, usize)> = out.iter().map(|x| (x.first, x.n)).collect();
        assert_eq!(spans, vec![(2, 2), (7, 3), (12, 2)]);
        for i in 4..7 {
            let s = r.state(i).load(Relaxed);
            assert_eq!(region::kind(s), RESIDENT, "page {i}");
            assert_ne!(s & REF, 0, "page {i}");
            assert_ne!(s & KEPT, 0, "page {i} keeps its flags");
        }
        assert_eq!(region::kind(r.state(3).load(Relaxed)), BUSY);
        assert_eq!(region::kind(r.state(7).load(Relaxed)), BUSY);
        // A fault at the first page of a two-page run spares the whole run.
        let runs = vec![Run {
            region: Arc::clone(&r),
            first: 12,
            n: 2,
        }];
        let out = Pager::spare(runs, r.addr(12));
        assert!(out.is_empty());
    }
}
