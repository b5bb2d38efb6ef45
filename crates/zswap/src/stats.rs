// SPDX-License-Identifier: MIT
//! Striped counters and the public counter snapshot.
//!
//! Hot-path counters are never a single shared atomic: every thread adds into its own stripe
//! (a cache-line-padded row of counters), and readers sum the stripes. Gauges (stored pages,
//! charged bytes) are kept the same way with wrapping arithmetic, so an increment on one stripe
//! and the matching decrement on another still sum to the right value.
//!
//! A thread *owns* its stripe (the kernel's per-CPU counters, where `this_cpu_add` needs no
//! locked instruction): stripes 1.. are claimed exclusively, one per thread, and given back when
//! the thread exits, so the owner updates its row with a plain load and store. Stripe 0 is
//! shared by the threads that found every stripe taken and is updated with atomic adds. A
//! locked add costs about 20 cycles even on an uncontended line, and a store or load touches
//! several counters.

#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::atomic::{Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
#[cfg(not(loom))]
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;
use serde::Serialize;

use crate::sync::{AtomicBool, AtomicU64};

/// Number of stripes: a power of two, about four times the CPU count (at least 8), so each
/// thread of a typical process gets a stripe of its own.
#[cfg(not(loom))]
pub(crate) fn nr_stripes() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        (cpus_allowed() * 4)
            .next_power_of_two()
            .clamp(8, MAX_STRIPES)
    })
}

/// CPUs this process may run on (its affinity mask): how many of its threads can update
/// counters at once. Not `std::thread::available_parallelism`, which also reads the cgroup's
/// CPU quota: five more files opened in every process a `uzswap run` tree starts, and a quota
/// limits CPU time, not how many CPUs threads run on at once.
#[cfg(not(loom))]
fn cpus_allowed() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero `cpu_set_t` is a valid empty set; `sched_getaffinity` writes at
        // most its size, and `CPU_COUNT` only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                let n = libc::CPU_COUNT(&set);
                if n > 0 {
                    return n as usize;
                }
            }
        }
    }
    // More CPUs than a `cpu_set_t` holds, or another system.
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

/// Two stripes in the loom models: the shared one and one to own.
#[cfg(loom)]
pub(crate) fn nr_stripes() -> usize {
    2
}

#[cfg_attr(loom, allow(dead_code))]
const MAX_STRIPES: usize = 64;
/// The stripe of threads that own none (updated atomically).
const SHARED_STRIPE: usize = 0;

/// Stripes owned by a live thread.
#[cfg(not(loom))]
static OWNED: [AtomicBool; MAX_STRIPES] = [const { AtomicBool::new(false) }; MAX_STRIPES];

/// Gives this thread's owned stripe back when the thread exits. Holds nothing itself: the
/// stripe lives in `STRIPE`, a key without a destructor, so reading it is one thread-local
/// load (a key with a destructor is checked for registration on every access), and every load
/// and store updates four or five counters.
#[cfg(not(loom))]
struct StripeGuard;

#[cfg(not(loom))]
const UNSET: usize = usize::MAX;

/// Claims a free stripe among `1..n` of `owned` for this thread, or the shared one.
pub(crate) fn claim_stripe_in(owned: &[AtomicBool], n: usize) -> usize {
    // Acquire: the previous owner's plain updates of the row happen before ours.
    (1..n)
        .find(|&i| {
            !owned[i].load(Relaxed)
                && owned[i]
                    .compare_exchange(false, true, Acquire, Relaxed)
                    .is_ok()
        })
        .unwrap_or(SHARED_STRIPE)
}

/// Gives an owned stripe back (its row's plain updates happen before the next owner's).
pub(crate) fn release_stripe_in(owned: &[AtomicBool], i: usize) {
    owned[i].store(false, Release);
}

#[cfg(not(loom))]
impl Drop for StripeGuard {
    fn drop(&mut self) {
        // Later updates from this thread's teardown go to the shared stripe.
        let i = STRIPE.with(|s| s.replace(SHARED_STRIPE));
        if i != UNSET && i != SHARED_STRIPE {
            release_stripe_in(&OWNED, i);
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    /// This thread's stripe, `UNSET` until its first counter update.
    static STRIPE: Cell<usize> = const { Cell::new(UNSET) };
    static GUARD: StripeGuard = const { StripeGuard };
}

/// This thread's stripe (claimed the first time a thread touches a counter).
#[cfg(not(loom))]
#[inline]
pub(crate) fn stripe_index() -> usize {
    let v = STRIPE.with(Cell::get);
    if v != UNSET {
        v
    } else {
        claim_stripe()
    }
}

/// Under loom every thread uses the shared stripe; the models claim stripes explicitly.
#[cfg(loom)]
pub(crate) fn stripe_index() -> usize {
    SHARED_STRIPE
}

#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn claim_stripe() -> usize {
    // Registering the guard fails once the thread's destructors run: share then.
    if GUARD.try_with(|_| ()).is_err() {
        return SHARED_STRIPE;
    }
    let v = claim_stripe_in(&OWNED, nr_stripes());
    STRIPE.with(|s| s.set(v));
    v
}

/// `N` counters, one padded row per stripe.
pub(crate) struct Striped<const N: usize> {
    rows: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Striped<N> {
    pub(crate) fn new() -> Self {
        let rows = (0..nr_stripes())
            .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        Striped { rows }
    }

    #[inline(always)]
    pub(crate) fn add(&self, i: usize, v: u64) {
        self.add_on(stripe_index(), i, v);
    }

    /// `add` on stripe `s` (the loom models choose the stripe).
    #[inline(always)]
    pub(crate) fn add_on(&self, s: usize, i: usize, v: u64) {
        let c = &self.rows[s][i];
        if s == SHARED_STRIPE {
            c.fetch_add(v, Relaxed);
        } else {
            // Only this thread writes this row (see the module docs).
            c.store(c.load(Relaxed).wrapping_add(v), Relaxed);
        }
    }

    #[inline(always)]
    pub(crate) fn sub(&self, i: usize, v: u64) {
        self.add(i, v.wrapping_neg());
    }

    /// Sum over stripes; gauges may transiently read slightly off while updates race
    /// ("not 100% accurate", as the kernel's counters).
    pub(crate) fn sum(&self, i: usize) -> u64 {
        self.rows
            .iter()
            .fold(0u64, |acc, r| acc.wrapping_add(r[i].load(Relaxed)))
    }

    /// Gauge read clamped at zero (a racing decrement may be seen before its increment).
    pub(crate) fn gauge(&self, i: usize) -> u64 {
        let v = self.sum(i) as i64;
        v.max(0) as u64
    }
}

/// Indices of the global counters.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum G {
    PoolLimitHit,
    RejectReclaimFail,
    RejectAllocFail,
    RejectKmemcacheFail,
    RejectCompressFail,
    RejectCompressPoor,
    DecompressFail,
    WrittenBackPages,
    StoredPages,
    StoredIncompressiblePages,
    ZeroPages,
    Zswpin,
    Zswpout,
    Zswpwb,
    Pswpin,
    /// Loads and stores in progress (a gauge the shrink worker reads, never reported). Kept on
    /// the row's line of `Zswpin`, `Zswpout` and `StoredPages`, so that a load or a store
    /// writes one counter line (a separate stripe array for it cost each one more line).
    InFlight,
    SwpinZero,
    SwpoutZero,
    RejectPoolLimit,
    RejectCgroupLimit,
    RejectDisabled,
    SwapReadErrors,
    SwapWriteErrors,
    SwapChecksumErrors,
    ShrinkerScanned,
    ShrinkerFreed,
    ShrinkWorkerRuns,
    ShrinkWorkerYields,
    PoolPagesCompacted,
    /// Zero-filled pages kept with an entry (`Params::zero_page_entries`).
    SameFilledPages,
    Pswpout,
    /// Of `SwapWriteErrors`: writes refused for lack of space (ENOSPC, EDQUOT).
    SwapNoSpaceErrors,
}
pub(crate) const NR_GLOBAL: usize = G::SwapNoSpaceErrors as usize + 1;
// A row starts on a cache line (`CachePadded`): the counters of every load and store share one.
const fn counter_line(g: G) -> usize {
    g as usize * std::mem::size_of::<AtomicU64>() / 64
}
const _: () = {
    assert!(counter_line(G::InFlight) == counter_line(G::Zswpin));
    assert!(counter_line(G::InFlight) == counter_line(G::Zswpout));
    assert!(counter_line(G::InFlight) == counter_line(G::StoredPages));
};

/// Indices of the per-cgroup counters (hierarchical: an event is counted on the cgroup and
/// every ancestor, as memory.stat reports it in cgroup v2).
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum C {
    /// Compressed bytes charged (`memory.zswap.current`, memory.stat `zswap`).
    ZswapBytes,
    /// Pages stored (memory.stat `zswapped`, in pages here; reported in bytes).
    Zswapped,
    Zswpin,
    Zswpout,
    Zswpwb,
}
pub(crate) const NR_CGROUP: usize = C::Zswpwb as usize + 1;

/// One cgroup's counters, as memory.stat shows them (bytes for `zswap` and `zswapped`).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CgroupCounters {
    /// The cgroup id.
    pub id: u32,
    /// Its parent (`None` for the root).
    pub parent: Option<u32>,
    /// Compressed bytes charged (memory.zswap.current).
    pub zswap: u64,
    /// Uncompressed bytes stored.
    pub zswapped: u64,
    /// Pages loaded from the pool (vmstat `zswpin`).
    pub zswpin: u64,
    /// Pages stored into the pool (vmstat `zswpout`).
    pub zswpout: u64,
    /// Pages written back to the backing store (vmstat `zswpwb`).
    pub zswpwb: u64,
    /// memory.zswap.max in bytes (`None` = "max").
    pub zswap_max: Option<u64>,
    /// memory.zswap.writeback.
    pub zswap_writeback: bool,
}

/// Snapshot of every counter. Field names are the kernel's (debugfs file names, vmstat keys).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    // debugfs /sys/kernel/debug/zswap/*
    /// Stores that found the pool at its limit (debugfs `pool_limit_hit`).
    pub pool_limit_hit: u64,
    /// Shrinker walks that looked at an entry and could not write it back (`reject_reclaim_fail`).
    pub reject_reclaim_fail: u64,
    /// Stores rejected because the pool could not allocate (`reject_alloc_fail`).
    pub reject_alloc_fail: u64,
    /// Stores rejected because the entry metadata could not be allocated (`reject_kmemcache_fail`).
    pub reject_kmemcache_fail: u64,
    /// Stores rejected because the compressor failed (`reject_compress_fail`).
    pub reject_compress_fail: u64,
    /// Stores rejected because the page did not compress and could not be kept as-is
    /// (`reject_compress_poor`).
    pub reject_compress_poor: u64,
    /// Loads or writebacks whose entry could not be read back (`decompress_fail`).
    pub decompress_fail: u64,
    /// Entries written back to the backing store (`written_back_pages`).
    pub written_back_pages: u64,
    /// Bytes of the pages every pool holds (`pool_total_size`).
    pub pool_total_size: u64,
    /// Pages stored with an entry: compressed, as-is, and zero entries (`stored_pages`).
    pub stored_pages: u64,
    /// Of `stored_pages`, those kept as-is (`stored_incompressible_pages`).
    pub stored_incompressible_pages: u64,
    /// Zero-filled pages kept with an entry of length 0 (`Params::zero_page_entries`; the
    /// debugfs file of kernels before "mm: remove code to handle same filled pages", 6.12).
    /// They are part of `stored_pages`.
    pub same_filled_pages: u64,
    // zero pages (the swap layer's zeromap in today's kernel)
    /// Zero-filled pages recorded without an entry (the swap layer's zeromap in today's kernel).
    pub zero_pages: u64,
    // vmstat
    /// Pages loaded from the pool (vmstat `zswpin`).
    pub zswpin: u64,
    /// Pages stored into the pool (vmstat `zswpout`).
    pub zswpout: u64,
    /// Pages written back to the backing store (vmstat `zswpwb`).
    pub zswpwb: u64,
    /// Pages read from the backing store (vmstat `pswpin`).
    pub pswpin: u64,
    /// Pages written to the backing store by `swap_out` (vmstat `pswpout`).
    pub pswpout: u64,
    /// Zero pages loaded (vmstat `swpin_zero`).
    pub swpin_zero: u64,
    /// Zero pages stored (vmstat `swpout_zero`).
    pub swpout_zero: u64,
    // uzswap additions: why stores were rejected, swap file errors, shrinker activity
    /// Stores rejected by the pool limit (uzswap).
    pub reject_pool_limit: u64,
    /// Stores rejected by a cgroup's zswap.max (uzswap).
    pub reject_cgroup_limit: u64,
    /// Stores rejected while the cache is disabled (uzswap).
    pub reject_disabled: u64,
    /// Failed backing-store reads, checksum mismatches excepted (uzswap).
    pub swap_read_errors: u64,
    /// Failed backing-store writes (uzswap).
    pub swap_write_errors: u64,
    /// Of `swap_write_errors`: those refused for lack of space, a full file system or quota
    /// (uzswap; the kernel's swap slots are allocated on the device beforehand, so it has
    /// no such failure).
    pub swap_no_space_errors: u64,
    /// Backing-store reads whose block failed its checksum (uzswap).
    pub swap_checksum_errors: u64,
    /// LRU entries the shrinkers looked at (uzswap).
    pub shrinker_scanned: u64,
    /// LRU entries the shrinkers wrote back (uzswap).
    pub shrinker_freed: u64,
    /// Runs of the shrink worker (uzswap).
    pub shrink_worker_runs: u64,
    /// Times the shrink worker yielded to stores and loads in flight (uzswap).
    pub shrink_worker_yields: u64,
    /// Pool pages freed by compaction (zsmalloc's `pages_compacted`, summed over pools).
    pub pool_pages_compacted: u64,
    /// Bytes of freed zspages the pools keep resident for reuse (returned to the OS after
    /// about a second, or at once under memory pressure); the pools' RSS is
    /// `pool_total_size + pool_cached_size`.
    pub pool_cached_size: u64,
    /// Pools alive (the current one plus old ones still holding entries).
    pub nr_pools: u64,
    /// Every online cgroup's counters.
    pub cgroups: Vec<CgroupCounters>,
}

impl Counters {
    pub(crate) fn from_global(g: &Striped<NR_GLOBAL>) -> Counters {
        Counters {
            pool_limit_hit: g.sum(G::PoolLimitHit as usize),
            reject_reclaim_fail: g.sum(G::RejectReclaimFail as usize),
            reject_alloc_fail: g.sum(G::RejectAllocFail as usize),
            reject_kmemcache_fail: g.sum(G::RejectKmemcacheFail as usize),
            reject_compress_fail: g.sum(G::RejectCompressFail as usize),
            reject_compress_poor: g.sum(G::RejectCompressPoor as usize),
            decompress_fail: g.sum(G::DecompressFail as usize),
            written_back_pages: g.sum(G::WrittenBackPages as usize),
            pool_total_size: 0,
            stored_pages: g.gauge(G::StoredPages as usize),
            stored_incompressible_pages: g.gauge(G::StoredIncompressiblePages as usize),
            same_filled_pages: g.gauge(G::SameFilledPages as usize),
            zero_pages: g.gauge(G::ZeroPages as usize),
            zswpin: g.sum(G::Zswpin as usize),
            zswpout: g.sum(G::Zswpout as usize),
            zswpwb: g.sum(G::Zswpwb as usize),
            pswpin: g.sum(G::Pswpin as usize),
            pswpout: g.sum(G::Pswpout as usize),
            swpin_zero: g.sum(G::SwpinZero as usize),
            swpout_zero: g.sum(G::SwpoutZero as usize),
            reject_pool_limit: g.sum(G::RejectPoolLimit as usize),
            reject_cgroup_limit: g.sum(G::RejectCgroupLimit as usize),
            reject_disabled: g.sum(G::RejectDisabled as usize),
            swap_read_errors: g.sum(G::SwapReadErrors as usize),
            swap_write_errors: g.sum(G::SwapWriteErrors as usize),
            swap_no_space_errors: g.sum(G::SwapNoSpaceErrors as usize),
            swap_checksum_errors: g.sum(G::SwapChecksumErrors as usize),
            shrinker_scanned: g.sum(G::ShrinkerScanned as usize),
            shrinker_freed: g.sum(G::ShrinkerFreed as usize),
            shrink_worker_runs: g.sum(G::ShrinkWorkerRuns as usize),
            shrink_worker_yields: g.sum(G::ShrinkWorkerYields as usize),
            pool_pages_compacted: g.sum(G::PoolPagesCompacted as usize),
            pool_cached_size: 0,
            nr_pools: 0,
            cgroups: Vec::new(),
        }
    }

    /// The counters as "name value" lines, one per debugfs file / vmstat key, in the kernel's
    /// order (debugfs set, then vmstat), then uzswap's additions, then one block per cgroup
    /// with memory.stat's keys prefixed by `cgroup<ID>.`.
    pub fn to_kernel_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let rows: [(&str, u64); 34] = [
            ("pool_limit_hit", self.pool_limit_hit),
            ("reject_reclaim_fail", self.reject_reclaim_fail),
            ("reject_alloc_fail", self.reject_alloc_fail),
            ("reject_kmemcache_fail", self.reject_kmemcache_fail),
            ("reject_compress_fail", self.reject_compress_fail),
            ("reject_compress_poor", self.reject_compress_poor),
            ("decompress_fail", self.decompress_fail),
            ("written_back_pages", self.written_back_pages),
            ("pool_total_size", self.pool_total_size),
            ("stored_pages", self.stored_pages),
            (
                "stored_incompressible_pages",
                self.stored_incompressible_pages,
            ),
            ("same_filled_pages", self.same_filled_pages),
            ("zero_pages", self.zero_pages),
            ("zswpin", self.zswpin),
            ("zswpout", self.zswpout),
            ("zswpwb", self.zswpwb),
            ("pswpin", self.pswpin),
            ("pswpout", self.pswpout),
            ("swpin_zero", self.swpin_zero),
            ("swpout_zero", self.swpout_zero),
            ("reject_pool_limit", self.reject_pool_limit),
            ("reject_cgroup_limit", self.reject_cgroup_limit),
            ("reject_disabled", self.reject_disabled),
            ("swap_read_errors", self.swap_read_errors),
            ("swap_write_errors", self.swap_write_errors),
            ("swap_no_space_errors", self.swap_no_space_errors),
            ("swap_checksum_errors", self.swap_checksum_errors),
            ("shrinker_scanned", self.shrinker_scanned),
            ("shrinker_freed", self.shrinker_freed),
            ("shrink_worker_runs", self.shrink_worker_runs),
            ("shrink_worker_yields", self.shrink_worker_yields),
            ("pool_pages_compacted", self.pool_pages_compacted),
            ("pool_cached_size", self.pool_cached_size),
            ("nr_pools", self.nr_pools),
        ];
        for (k, v) in rows {
            let _ = writeln!(s, "{k} {v}");
        }
        for cg in &self.cgroups {
            let id = cg.id;
            let _ = writeln!(s, "cgroup{id}.zswap {}", cg.zswap);
            let _ = writeln!(s, "cgroup{id}.zswapped {}", cg.zswapped);
            let _ = writeln!(s, "cgroup{id}.zswpin {}", cg.zswpin);
            let _ = writeln!(s, "cgroup{id}.zswpout {}", cg.zswpout);
            let _ = writeln!(s, "cgroup{id}.zswpwb {}", cg.zswpwb);
        }
        s
    }

    /// The counters as a JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stripe count follows the CPUs a thread may run on: one allowed CPU is one.
    #[test]
    #[cfg(all(target_os = "linux", not(loom)))]
    #[cfg_attr(miri, ignore = "sched_setaffinity is not supported under Miri")]
    fn cpus_allowed_is_the_affinity_mask() {
        assert!(cpus_allowed() >= 1);
        let one = std::thread::spawn(|| {
            // SAFETY: a zeroed set with CPU 0 added, for this thread only.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                assert_eq!(
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                    0
                );
            }
            cpus_allowed()
        })
        .join()
        .unwrap();
        assert_eq!(one, 1);
    }

    /// More threads than stripes, in waves, so stripes are owned, shared, given back and
    /// claimed again: no update is lost and gauges balance.
    #[test]
    fn striped_counts_survive_owned_shared_and_reclaimed_stripes() {
        let s = std::sync::Arc::new(Striped::<2>::new());
        let threads = nr_stripes() * 3;
        for _wave in 0..3 {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        for _ in 0..10_000 {
                            s.add(0, 1);
                            s.add(1, 3);
                            s.sub(1, 2);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        let n = 3 * threads as u64 * 10_000;
        assert_eq!(s.sum(0), n);
        assert_eq!(s.gauge(1), n);
    }

    /// Updates from a thread-local destructor, which may run after the thread gave its stripe
    /// back, go to the shared stripe: none is lost while other threads claim that stripe.
    #[test]
    fn updates_during_thread_teardown_are_kept() {
        use std::sync::Arc;
        struct Late(Arc<Striped<1>>);
        impl Drop for Late {
            fn drop(&mut self) {
                for _ in 0..1000 {
                    self.0.add(0, 1);
                }
            }
        }
        thread_local! {
            static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
        }
        let s = Arc::new(Striped::<1>::new());
        let threads = nr_stripes() * 2;
        for _wave in 0..4 {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        // Registered before the stripe claim, so it is destroyed after it.
                        LATE.with(|l| *l.borrow_mut() = Some(Late(s.clone())));
                        for _ in 0..1000 {
                            s.add(0, 1);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        assert_eq!(s.sum(0), 4 * threads as u64 * 2000);
    }
}
