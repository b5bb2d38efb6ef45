// SPDX-License-Identifier: MIT
//! uzswap-pager: transparent compressed paging of an unmodified program, from inside it.
//!
//! **Owns**: the userfaultfd object (`uffd`, the only userfaultfd ioctls in the workspace),
//! managed regions and their page-state words (`region`), the SIGBUS fault path resolving
//! faults on the faulting thread and chaining to the program's handlers (`signals`), eviction
//! with `UFFDIO_MOVE` (a copy and a drop for read-only mappings, which it refuses; a move through a scratch area of their protection for writable executable ones) and the clock sweep, clean-page reuse and swap readahead, pins for
//! system-call buffers and the budget (`pager`), write tracking with `PAGEMAP_SCAN` (`scan`), the accounting segment shared by a process tree (`shared`), the pager's own file descriptors, kept above the program's numbers and out of its close calls (`fds`), the cgroup limit and usage files as the program reads them (`cgroup_view`), the debugging log of
//! page-state transitions (`pagelog`, off unless `UZSWAP_PAGE_LOG` is set), the logic of the
//! preload library's libc wrappers (`hooks`), and raw system calls (`sys`). The LD_PRELOAD
//! library `uzswap-preload` is a thin layer of exported symbols over this crate;
//! `uzswap run` starts programs with it. Design and coverage: docs/pager.md.
//!
//! **Data layout**: one `Pager` per process (a static, set once by `init`): a table of
//! regions (`BTreeMap` by start address, `Arc<Region>`), each with one `AtomicU64` state word
//! per page in memory the pager maps for itself; a `Zswap` cache with an O_TMPFILE swap file
//! (slot offsets are stored in the evicted pages' state words); a scratch area of
//! `SCRATCH_PAGES` pages registered with the userfaultfd as the MOVE target. Across the tree
//! (`shared::Segment`, one memfd every process maps): the budget's totals, each process's slot
//! (its charge, pool, last fault or CPU use for "idle processes give first", oldest pool entry on the
//! tree's LRU clock for "one LRU for the tree's pools") and the futex words that wake the
//! other processes' reclaim threads. A program the tree starts that can't be paged (it links
//! its own `malloc`) has no `Pager`, only the segment (`join_unpaged`), to count what it execs.
//!
//! **Lock order**: regions RwLock (read: faults, pins, eviction; write: mapping changes, fork;
//! a `futex_rwlock`, whose waiters wait in the kernel, so that a fork child inherits no queue)
//! -> reclaim mutex -> the cache's locks; the `MADV_DONTFORK` range list's mutex is taken only
//! under the regions write lock (or in a fork child before it starts threads). Every read of the regions lock is recursive
//! (`read_recursive`): a signal handler may fault, or make a wrapped call, on a thread that
//! holds it, and must not queue behind a waiting writer. All pager code runs with signals
//! blocked (the SIGBUS handler's mask, or `sys::SigBlock` in wrappers), never touches managed
//! memory itself, and marks its thread `InPager` so its own libc calls bypass the wrappers;
//! the one exception is pinning and unpinning pages that are already resident (one
//! compare-and-swap per page, `InPager` set), which runs with signals open.

pub mod cgroup_view;
pub mod fds;
pub mod futex_rwlock;
pub mod hooks;
pub mod mlock;
pub mod pagelog;
pub mod pager;
pub mod record;
pub mod region;
pub mod scan;
pub mod shared;
pub mod signals;
pub mod sys;
pub mod uffd;

use std::sync::OnceLock;

pub use pager::{Config, Pager};

static PAGER: OnceLock<Pager> = OnceLock::new();

/// The process's pager, once `init` succeeded.
#[inline]
pub fn pager() -> Option<&'static Pager> {
    PAGER.get()
}

/// Sets the pager up for this process: shared segment, userfaultfd, cache, SIGBUS handler,
/// the calling (main) thread's alternate stack, fork handlers. Called by the preload
/// library's constructor, with signals blocked, before the program's code runs.
pub fn init() -> Result<&'static Pager, String> {
    if let Some(p) = PAGER.get() {
        return Ok(p);
    }
    let _g = sys::InPager::enter();
    pagelog::init();
    hooks::read_env();
    let cfg = Config::from_env();
    let fd = segment_fd();
    // `uzswap run` put the inherited one above the program's numbers (`fds::floor`); both are
    // kept from the program's close calls.
    if let Some(fd) = fd {
        fds::register(fd);
    }
    if fd.is_none() && std::env::var_os("UZSWAP_SHM_PATH").is_some() {
        return Err("the run's shared accounting segment is gone (is `uzswap run` alive?)".into());
    }
    let seg = shared::map_segment(fd).map_err(|e| format!("shared segment: errno {e}"))?;
    if fd.is_none() {
        seg.init(cfg.budget_bytes, cfg.covers_pool);
    }
    let p = Pager::new(cfg, seg)?;
    seg.processes
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    seg.joined
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    seg.images
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = PAGER.get_or_init(|| p);
    cgroup_view::set_enabled(std::env::var("UZSWAP_CGROUP_VIEW").as_deref() != Ok("off"));
    p.join_tree();
    signals::install().map_err(|e| format!("installing the SIGBUS handler: errno {e}"))?;
    signals::ensure_alt_stack();
    warm_thread();
    if p.cfg.budget_bytes > 0 {
        p.reclaim_thread();
    }
    p.note_swap_dir_access();
    let mut fsize = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut fsize) } == 0
        && fsize.rlim_cur != libc::RLIM_INFINITY
    {
        seg.fsize_limited
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(p)
}

/// The run's accounting segment's fd: inherited, unless a parent closed it before exec
/// (Python's subprocess closes every fd by default): then opened again through `uzswap run`'s
/// /proc entry for it. `None` outside `uzswap run` (the library preloaded by hand).
fn segment_fd() -> Option<i32> {
    std::env::var("UZSWAP_SHM_FD")
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|&fd| shared::is_segment_fd(fd))
        .or_else(|| {
            let path = std::ffi::CString::new(std::env::var("UZSWAP_SHM_PATH").ok()?).ok()?;
            // SAFETY: a NUL-terminated path; the fd stays open for the process's life.
            let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            (fd >= 0 && shared::is_segment_fd(fd)).then(|| fds::adopt(fd, false))
        })
}

/// The run's segment, for a process that runs unpaged in the tree ([`join_unpaged`]).
static UNPAGED: OnceLock<&'static shared::Segment> = OnceLock::new();

/// For a program that can't be paged (it links its own `malloc`) started by a paged process
/// of a `uzswap run` tree: true if the tree has started (a pager is set up somewhere in it,
/// so this is not the program `uzswap run` started, which is refused instead). The process
/// then runs unpaged and outside the budget, as a statically linked program the tree starts
/// does, and is counted so (`execs_unpaged`); what it execs is counted too and keeps the run's
/// environment, so that its own children (a compiler's linker) are paged in the tree.
pub fn join_unpaged() -> bool {
    let Some(fd) = segment_fd() else {
        return false;
    };
    let Ok(seg) = shared::map_segment(Some(fd)) else {
        return false;
    };
    if seg.images.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return false;
    }
    hooks::read_env();
    let _ = UNPAGED.set(seg);
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    let name = exe.file_name().map_or("?".into(), |n| n.to_string_lossy());
    seg.add_counter(&format!("{}{name}", shared::UNPAGED_PROGRAM_PREFIX), 1);
    true
}

/// The run's segment: this process's pager's, or the one it joined unpaged.
pub(crate) fn tree_segment() -> Option<&'static shared::Segment> {
    pager().map(|p| p.seg).or_else(|| UNPAGED.get().copied())
}

/// Sets up the thread-local state the fault path uses (compression contexts, counter
/// stripes, the cache's buffers), so that the first fault of a thread does not have to set it
/// up inside the signal handler. Stores nothing: until 2026-11-28 this was a store, a load
/// and an invalidation of one page, which also made the index's first shard table (112 KiB)
/// and a zspage in every process, most of which never evict (a shell's children).
pub fn warm_thread() {
    let Some(p) = PAGER.get() else { return };
    let _g = sys::InPager::enter();
    let _no_fork = p.fork_excluded();
    match p.cache_made() {
        Some(z) => z.prepare_thread(),
        // The cache is made by the process's first store: set up what does not need it.
        None => uzswap_zswap::Zswap::prepare_thread_for(p.cache_compressor()),
    }
}
