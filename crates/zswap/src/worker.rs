// SPDX-License-Identifier: MIT
//! The background shrink worker (the kernel's `shrink_work`): woken when a store finds the
//! pool at its limit (or, with proactive shrinking, above the accept threshold + 1 %) and for
//! cgroups over zswap.max in asynchronous mode; idle, it returns expired cached pool memory.
//! It yields to stores and loads in flight (`HotGuard` counts them).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, MutexGuard, PoisonError};
use std::time::Duration;

use crate::cache::Inner;
use crate::shrink;
use crate::stats::{Striped, G, NR_GLOBAL};

#[derive(Default)]
pub(crate) struct WorkerState {
    pub(crate) pending: bool,
    pub(crate) running: bool,
    pub(crate) stop: bool,
    /// Queued runs wait until released (`Zswap::hold_shrink_worker`).
    pub(crate) held: bool,
    /// Cgroups whose zswap.max rejected a store (async mode): shrink them below their limit.
    pub(crate) memcgs: Vec<u32>,
}

/// The worker's state lock and condition variables are std's, each a futex word of its own.
/// parking_lot parks and wakes through a process-wide table of bucket locks: a process that
/// forks while this worker parks or wakes (as holding it and waiting for it to go idle, just
/// before a fork, makes it do) could hand the child a bucket locked by a thread it does not
/// have, and the child's next park in that bucket would never return.
pub(crate) struct WorkerCtl {
    pub(crate) queued: AtomicBool,
    pub(crate) state: WorkerLock,
    pub(crate) cv: Condvar,
    pub(crate) idle_cv: Condvar,
    /// A thread runs `worker_main` (from creation, or since an on-demand start).
    pub(crate) thread_up: AtomicBool,
    /// On demand (`Zswap::with_shrink_worker_on_demand`): called when work is queued and no
    /// thread runs it yet, so that the embedder starts one from a context where it may
    /// (`Zswap::service_shrink_worker`).
    pub(crate) wake: Option<fn()>,
    /// For a cache of a process tree (`Zswap::for_process_tree`): called when a run ends
    /// because another cache holds older entries.
    pub(crate) handoff: Option<fn()>,
}

impl WorkerCtl {
    /// Tells the worker thread `t` to stop and waits for it to end (what is running finishes
    /// first). The stop stays asked for: a parked worker's caller clears it.
    pub(crate) fn stop_and_join(&self, t: std::thread::JoinHandle<()>) {
        self.state.lock().stop = true;
        self.cv.notify_all();
        let _ = t.join();
    }

    pub(crate) fn new(wake: Option<fn()>, handoff: Option<fn()>) -> Self {
        WorkerCtl {
            handoff,
            queued: AtomicBool::new(false),
            state: WorkerLock::new(WorkerState::default()),
            cv: Condvar::new(),
            idle_cv: Condvar::new(),
            thread_up: AtomicBool::new(false),
            wake,
        }
    }

    /// Work was queued: with no thread yet, ask the embedder for one.
    #[inline]
    fn wake_embedder(&self) {
        if !self.thread_up.load(Relaxed) {
            if let Some(f) = self.wake {
                f();
            }
        }
    }
}

/// `std::sync::Mutex<WorkerState>` without poisoning (the state stays consistent: every
/// critical section only sets flags), which a fork child can make its own again.
pub(crate) struct WorkerLock(UnsafeCell<std::sync::Mutex<WorkerState>>);

// SAFETY: the cell is only written by `reset_in_fork_child`, whose caller guarantees that no
// other thread and no guard exists; otherwise it is only read (a `&Mutex`, itself Sync).
unsafe impl Sync for WorkerLock {}

impl WorkerLock {
    pub(crate) fn new(s: WorkerState) -> Self {
        WorkerLock(UnsafeCell::new(std::sync::Mutex::new(s)))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, WorkerState> {
        // SAFETY: a shared reference; the cell is replaced only with no reference alive (below).
        let m = unsafe { &*self.0.get() };
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fork child's copy of the lock: the parent's worker may have held it at the fork (it
    /// takes it when it wakes), and that thread is not in the child. Replace it by an unlocked
    /// lock over the same state, with no run in progress.
    ///
    /// # Safety
    /// Only in a fork child that runs no thread but the caller, with no guard of this lock
    /// alive.
    pub(crate) unsafe fn reset_in_fork_child(&self) {
        // SAFETY: the caller's guarantee makes this the only reference to the cell's content.
        let m = unsafe { &mut *self.0.get() };
        let st = std::mem::take(m.get_mut().unwrap_or_else(PoisonError::into_inner));
        *m = std::sync::Mutex::new(WorkerState {
            running: false,
            ..st
        });
    }
}

/// Counts an operation in flight (`G::InFlight`) while alive.
pub(crate) struct HotGuard<'a>(&'a Striped<NR_GLOBAL>, usize);
impl<'a> HotGuard<'a> {
    #[inline]
    pub(crate) fn new(s: &'a Striped<NR_GLOBAL>) -> Self {
        Self::on(s, crate::stats::stripe_index())
    }

    /// `new` on the calling thread's stripe `stripe`, already looked up (the load path looks
    /// it up once for all its counters).
    #[inline]
    pub(crate) fn on(s: &'a Striped<NR_GLOBAL>, stripe: usize) -> Self {
        s.add_on(stripe, G::InFlight as usize, 1);
        HotGuard(s, stripe)
    }
}
impl Drop for HotGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0
            .add_on(self.1, G::InFlight as usize, 1u64.wrapping_neg());
    }
}

/// How often the idle shrink worker returns expired cached pool memory to the OS.
const PURGE_INTERVAL: Duration = Duration::from_millis(uzswap_zsmalloc::DEFAULT_FREE_PAGE_DECAY_MS);

impl Inner {
    pub(crate) fn kick_worker(&self) {
        // Read first: while the worker is queued, stores above the threshold must not all write
        // the same cache line.
        let q = &self.worker.queued;
        if !q.load(Relaxed) && !q.swap(true, std::sync::atomic::Ordering::AcqRel) {
            let mut st = self.worker.state.lock();
            st.pending = true;
            self.worker.cv.notify_one();
            drop(st);
            self.worker.wake_embedder();
        }
    }

    pub(crate) fn worker_main(self: Arc<Self>) {
        // Background reclaim must not compete with the page-in/out path (patch 4 of the series
        // "mm: zswap: global shrinker fix and proactive shrink", v2, on 6.10-rc6: the worker
        // leaves the reclaim path). Miri has no setpriority.
        // SAFETY: setpriority on our own thread id; no memory is passed.
        #[cfg(not(miri))]
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 5);
        }
        loop {
            let memcgs;
            {
                let mut st = self.worker.state.lock();
                while (!st.pending || st.held) && !st.stop {
                    let (g, waited) = self
                        .worker
                        .cv
                        .wait_timeout(st, PURGE_INTERVAL)
                        .unwrap_or_else(PoisonError::into_inner);
                    st = g;
                    if waited.timed_out() && !st.held {
                        // Idle: freed pool memory whose decay time passed goes back to the
                        // OS even if no store or free comes to do it. A run like any other:
                        // `wait_shrink_idle` waits for it, and a held worker (an embedder's
                        // fork, a replay's step) does not start it.
                        st.running = true;
                        drop(st);
                        self.pools.purge_expired();
                        st = self.worker.state.lock();
                        st.running = false;
                        self.worker.idle_cv.notify_all();
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
            self.shrink_worker_run(true);
            let mut st = self.worker.state.lock();
            st.running = false;
            self.worker.idle_cv.notify_all();
        }
    }

    /// Queue a cgroup that hit its zswap.max for background writeback (async mode).
    pub(crate) fn kick_memcg(&self, cg: u32) {
        let mut st = self.worker.state.lock();
        if !st.memcgs.contains(&cg) {
            st.memcgs.push(cg);
        }
        st.pending = true;
        self.worker.cv.notify_one();
        drop(st);
        self.worker.wake_embedder();
    }

    /// Write back entries of `cg` until neither it nor an ancestor is over zswap.max (the
    /// asynchronous form of the kernel's one synchronous `shrink_memcg` in `zswap_store`).
    pub(crate) fn shrink_memcg_to_limit(&self, cg: u32) {
        let mut failures = 0;
        while self.cgroups.over_limit(cg).is_some() {
            if self.stopping() {
                return;
            }
            if self.yield_to_hold() {
                // Run again for this cgroup once released.
                let mut st = self.worker.state.lock();
                if !st.memcgs.contains(&cg) {
                    st.memcgs.push(cg);
                }
                return;
            }
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

    pub(crate) fn stopping(&self) -> bool {
        self.worker.state.lock().stop
    }

    /// Between two writebacks of a run: is the worker held (an embedder about to fork waits for
    /// it to go idle)? Then the run ends here and is queued again for the release. A slot the
    /// worker writes back at the instant of a fork stays marked in flight in the child, where
    /// no thread will clear it; the run used to go on to its end, which on a slow disk
    /// (O_DIRECT swap files, many processes writing) outlasted the embedder's wait.
    pub(crate) fn yield_to_hold(&self) -> bool {
        let mut st = self.worker.state.lock();
        if st.held && !st.stop {
            st.pending = true;
            self.worker
                .queued
                .store(true, std::sync::atomic::Ordering::Release);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::HotGuard;
    use crate::testutil::page;
    use crate::{CgroupId, Params, RejectReason, StoreOutcome, SwapFile, SwapSlot, Zswap};

    /// A backing store whose writes take 2 ms (a slow disk under O_DIRECT).
    #[derive(Debug)]
    struct SlowDisk(crate::MemStore);
    impl crate::BackingStore for SlowDisk {
        fn area(&self) -> u32 {
            self.0.area()
        }
        fn capacity(&self) -> u64 {
            self.0.capacity()
        }
        fn alloc_slot(&self) -> uzswap_backing::Result<SwapSlot> {
            self.0.alloc_slot()
        }
        fn free_slot(&self, slot: SwapSlot) -> uzswap_backing::Result<()> {
            self.0.free_slot(slot)
        }
        fn write_page(&self, slot: SwapSlot, page: &[u8]) -> uzswap_backing::Result<()> {
            std::thread::sleep(Duration::from_millis(2));
            self.0.write_page(slot, page)
        }
        fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> uzswap_backing::Result<()> {
            self.0.read_page(slot, page)
        }
        fn discard(&self, slot: SwapSlot) {
            self.0.discard(slot)
        }
        fn stats(&self) -> uzswap_backing::BackingStats {
            self.0.stats()
        }
    }

    /// An embedder about to fork holds the worker and waits for it to go idle: a run in
    /// progress ends at its next writeback instead of going on to the accept threshold (on a
    /// slow disk that outlasted the wait, and the fork child inherited a slot in flight), and
    /// resumes once released.
    #[test]
    #[cfg_attr(miri, ignore = "fills a 4 MiB pool and sleeps: minutes under Miri")]
    fn a_held_worker_stops_its_run_at_the_next_writeback_and_resumes_on_release() {
        let disk = crate::MemStore::new(0, 4096).unwrap();
        let z = Zswap::new(Params {
            total_memory_bytes: 4 << 20,
            proactive_shrink: false,
            accept_threshold_percent: 50,
            ..Params::default()
        })
        .unwrap();
        for _ in 0..4096 {
            crate::BackingStore::alloc_slot(&disk).unwrap();
        }
        z.add_backing_store(Arc::new(SlowDisk(disk))).unwrap();
        let mut i = 0;
        while z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT)
            != StoreOutcome::Rejected(RejectReason::PoolLimit)
        {
            i += 1;
        }
        // The worker now writes back down to half the limit, 2 ms an entry: seconds.
        std::thread::sleep(Duration::from_millis(50));
        z.hold_shrink_worker(true);
        let t = std::time::Instant::now();
        assert!(
            z.wait_shrink_idle(Duration::from_secs(5)),
            "the held worker went idle"
        );
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert!(
            z.pool_total_pages() > z.params().accept_threshold_pages(),
            "the run stopped early"
        );
        let written = z.counters().written_back_pages;
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            z.counters().written_back_pages,
            written,
            "nothing while held"
        );
        z.hold_shrink_worker(false);
        assert!(z.wait_shrink_idle(Duration::from_secs(60)));
        assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
        for k in 0..i {
            let mut out = [0u8; crate::PAGE_SIZE];
            z.load(SwapSlot::new(0, k), &mut out, false).unwrap();
            assert_eq!(out[..], page(k as u8)[..], "page {k}");
        }
    }

    /// A 4 MiB machine's cache whose accept threshold is half its pool limit, no proactive
    /// shrinking.
    fn half_accept_4mib() -> Params {
        Params {
            total_memory_bytes: 4 << 20,
            proactive_shrink: false,
            accept_threshold_percent: 50,
            ..Params::default()
        }
    }

    /// An in-memory backing store of 4096 slots, every slot allocated.
    fn full_disk() -> crate::MemStore {
        let disk = crate::MemStore::new(0, 4096).unwrap();
        for _ in 0..4096 {
            crate::BackingStore::alloc_slot(&disk).unwrap();
        }
        disk
    }

    /// Caches that share an LRU clock and a pool limit (the processes of a tree) write back
    /// the oldest entries first, whichever cache holds them, as the kernel's one global LRU
    /// does for every pool: the younger cache's worker hands over, the older one's writes
    /// back all of its entries, and the younger one's then writes back its oldest, down to
    /// the accept threshold of the two together. Every page reads back.
    #[test]
    #[cfg_attr(miri, ignore = "fills a 4 MiB pool: minutes under Miri")]
    fn caches_sharing_an_lru_clock_write_back_the_oldest_entries_first() {
        use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
        static CLOCK: AtomicU32 = AtomicU32::new(u32::MAX - 100); // wraps on the way
        static HANDOFFS: AtomicUsize = AtomicUsize::new(0);
        fn wake() {}
        fn handoff() {
            HANDOFFS.fetch_add(1, Relaxed);
        }
        let params = half_accept_4mib();
        let (max, thr) = (params.max_pool_pages(), params.accept_threshold_pages());
        let cache = || {
            let z = Zswap::for_process_tree(params.clone(), wake, &CLOCK, handoff).unwrap();
            z.add_backing_store(Arc::new(full_disk())).unwrap();
            z
        };
        let written = |z: &Zswap| z.counters().written_back_pages;
        // The older cache fills a third of the limit, the younger one the rest.
        let (old, young) = (cache(), cache());
        let mut n_old = 0;
        while old.pool_total_pages() < max / 3 {
            assert_eq!(
                old.store(SwapSlot::new(0, n_old), &page(n_old as u8), CgroupId::ROOT),
                StoreOutcome::Stored
            );
            n_old += 1;
        }
        young.set_pool_pages_outside(old.pool_total_pages());
        young.set_outside_lru_oldest(old.lru_oldest());
        let mut n_young = 0;
        while young.store(
            SwapSlot::new(0, n_young),
            &page(n_young as u8 ^ 0x55),
            CgroupId::ROOT,
        ) != StoreOutcome::Rejected(RejectReason::PoolLimit)
        {
            n_young += 1;
        }
        let tree = |a: &Zswap, b: &Zswap| a.pool_total_pages() + b.pool_total_pages();
        assert!(tree(&old, &young) >= max);
        // The younger cache's worker finds older entries outside: it hands over, writing
        // nothing back.
        young.run_shrink_worker();
        assert_eq!((written(&young), HANDOFFS.load(Relaxed)), (0, 1));
        // Then the two run in turn, each told what the other holds, as the embedder would
        // after each hand-over: the older one writes back (its entries' second chance
        // rotations included) down to the threshold or until it is empty, and no entry of the
        // younger cache is written back before every entry of the older one.
        for round in 0..16 {
            if tree(&old, &young) <= thr {
                break;
            }
            for (z, other) in [(&old, &young), (&young, &old)] {
                z.set_pool_pages_outside(other.pool_total_pages());
                z.set_outside_lru_oldest(other.lru_oldest());
                z.run_shrink_worker();
                assert!(
                    written(&young) == 0 || written(&old) == n_old,
                    "round {round}: {} of the younger cache's entries written back before {} \
                     of the older one's",
                    written(&young),
                    n_old - written(&old)
                );
            }
        }
        assert!(tree(&old, &young) <= thr, "down to the accept threshold");
        assert_eq!(written(&old), n_old, "every entry of the older cache");
        assert!(written(&young) > 0, "a third of the limit was not enough");
        assert!(HANDOFFS.load(Relaxed) >= 1);
        for (z, n, x) in [(&old, n_old, 0), (&young, n_young, 0x55)] {
            for k in 0..n {
                let mut out = [0u8; crate::PAGE_SIZE];
                z.load(SwapSlot::new(0, k), &mut out, false).unwrap();
                assert_eq!(out[..], page(k as u8 ^ x)[..], "page {k}");
            }
        }
    }

    /// Pages of pools outside the cache that share its limit count as its own: with a quarter
    /// of the limit held outside, stores are rejected once the cache's own pool reaches the
    /// rest, and the worker writes its own entries back until both together are at the accept
    /// threshold (half the limit), no further. The same cache alone fills the whole limit.
    /// Every page reads back.
    #[test]
    #[cfg_attr(miri, ignore = "fills a 4 MiB pool: minutes under Miri")]
    fn pages_outside_the_cache_count_against_its_limit() {
        let params = half_accept_4mib();
        let (max, thr) = (params.max_pool_pages(), params.accept_threshold_pages());
        let fill = |outside: u64| {
            let z = Zswap::new(params.clone()).unwrap();
            z.add_backing_store(Arc::new(full_disk())).unwrap();
            z.hold_shrink_worker(true);
            z.set_pool_pages_outside(outside);
            let mut i = 0;
            while z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT)
                != StoreOutcome::Rejected(RejectReason::PoolLimit)
            {
                i += 1;
            }
            (z, i)
        };
        let (alone, _) = fill(0);
        let chain = alone.params().chain_size as u64;
        assert!(alone.pool_total_pages() >= max, "alone: the whole limit");
        let outside = max / 4;
        let (z, n) = fill(outside);
        let own = z.pool_total_pages();
        assert!(
            own + outside >= max && own + outside <= max + chain,
            "own {own} + outside {outside} against the limit {max}"
        );
        assert_eq!(z.counters().pool_limit_hit, 1);
        z.hold_shrink_worker(false);
        assert!(z.wait_shrink_idle(Duration::from_secs(60)));
        assert!(
            z.pool_total_pages() + outside <= thr,
            "written back to the accept threshold, outside pages included"
        );
        assert!(
            z.pool_total_pages() + outside + chain > thr,
            "no further than the zspage that crossed it"
        );
        for k in 0..n {
            let mut out = [0u8; crate::PAGE_SIZE];
            z.load(SwapSlot::new(0, k), &mut out, false).unwrap();
            assert_eq!(out[..], page(k as u8)[..], "page {k}");
        }
    }

    static WAKES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    fn count_wake() {
        WAKES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// On demand, no thread runs until a store queues work: the store calls the embedder's
    /// wake, `wait_shrink_idle` does not wait for work no thread can run yet, and
    /// `service_shrink_worker` starts the thread, which then writes back down to the accept
    /// threshold as the eager worker does. Every page reads back.
    #[test]
    #[cfg_attr(miri, ignore = "fills a 4 MiB pool: minutes under Miri")]
    fn an_on_demand_worker_starts_when_work_is_queued_and_then_does_it() {
        let disk = crate::MemStore::new(0, 4096).unwrap();
        for _ in 0..4096 {
            crate::BackingStore::alloc_slot(&disk).unwrap();
        }
        let z = Zswap::with_shrink_worker_on_demand(
            Params {
                total_memory_bytes: 4 << 20,
                proactive_shrink: false,
                accept_threshold_percent: 50,
                ..Params::default()
            },
            count_wake,
        )
        .unwrap();
        z.add_backing_store(Arc::new(disk)).unwrap();
        assert!(
            !z.service_shrink_worker().unwrap(),
            "nothing queued, no thread"
        );
        let wakes = WAKES.load(std::sync::atomic::Ordering::Relaxed);
        let mut i = 0;
        while z.store(SwapSlot::new(0, i), &page(i as u8), CgroupId::ROOT)
            != StoreOutcome::Rejected(RejectReason::PoolLimit)
        {
            i += 1;
        }
        assert!(z.shrink_worker_queued());
        assert!(
            WAKES.load(std::sync::atomic::Ordering::Relaxed) > wakes,
            "woken"
        );
        let t = std::time::Instant::now();
        assert!(z.wait_shrink_idle(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(z.counters().written_back_pages, 0, "no thread ran yet");
        assert!(z.service_shrink_worker().unwrap(), "started");
        assert!(z.wait_shrink_idle(Duration::from_secs(60)));
        assert!(z.counters().written_back_pages > 0);
        assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
        for k in 0..i {
            let mut out = [0u8; crate::PAGE_SIZE];
            z.load(SwapSlot::new(0, k), &mut out, false).unwrap();
            assert_eq!(out[..], page(k as u8)[..], "page {k}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "fills a 4 MiB pool: minutes under Miri")]
    fn shrink_worker_yields_to_stores_and_loads_in_flight() {
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
        let guard = HotGuard::new(&z.inner.stats);
        z.run_shrink_worker();
        drop(guard);
        let c = z.counters();
        assert!(c.shrink_worker_yields > before, "the worker yielded");
        assert!(
            z.pool_total_pages() <= z.params().accept_threshold_pages(),
            "and still finished"
        );
    }
}
