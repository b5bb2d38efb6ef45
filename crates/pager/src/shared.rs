// SPDX-License-Identifier: MIT
//! The accounting segment shared by every process of a `uzswap run` tree.
//!
//! `uzswap run` creates a memfd, sizes it to `SEGMENT_BYTES` and passes its number in
//! `UZSWAP_SHM_FD` (inherited across fork and exec). Every managed process maps it and keeps
//! the tree's totals in it with atomics: resident managed pages and compressed pool pages (the
//! two halves of the budget, as a cgroup's memory.max covers its pages and its zswap pool), the
//! fault statistics and, when a process ends or execs, its cache counters by name (events
//! added up; levels such as stored_pages keep the largest). The layout is `#[repr(C)]` and
//! only atomics, so `uzswap run` reads the same struct after the tree has exited.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

/// Latency histogram: 0.1 µs buckets up to 200 µs, then one bucket per doubling.
pub const HIST_LINEAR: usize = 2000;
pub const HIST_BUCKETS: usize = HIST_LINEAR + 24;
/// Counter cells for the cache counters, added by name.
pub const COUNTER_CELLS: usize = 96;
const NAME_LEN: usize = 48;
pub const MAGIC: u64 = 0x757a_7377_6170_0001;
/// Named counters with this prefix count the programs that ran unpaged in the tree because they
/// link their own `malloc`, by executable name (`crate::join_unpaged`); the report lists them
/// apart from the cache's counters.
pub const UNPAGED_PROGRAM_PREFIX: &str = "unpaged_program:";

#[repr(C)]
pub struct CounterCell {
    /// NUL-padded name; the first process to add a name claims the cell (`claim` 0 -> 1 -> 2).
    claim: AtomicU64,
    name: [AtomicU64; NAME_LEN / 8],
    value: AtomicU64,
}

/// One process of the tree: what it last published of its charge, so that a survivor can take
/// it off the totals if the process dies without retiring (killed by a signal).
#[repr(C)]
pub struct ProcSlot {
    pub pid: std::sync::atomic::AtomicI32,
    pub charged: AtomicI64,
    pub pool: AtomicI64,
    /// When the process last faulted, or its reclaim thread last saw its program use CPU
    /// (`sys::now_ns`, refreshed at most every `ACTIVE_STAMP_NS`): how long it has been idle,
    /// for "idle processes give first".
    pub active_ns: AtomicU64,
    /// Pages other processes asked this one to evict for them (its reclaim thread takes them).
    pub asked: AtomicU64,
    /// When `asked` last went from 0 to more.
    pub asked_at_ns: AtomicU64,
    /// Not to be asked again before this time: its last donation found too little to evict.
    pub no_donor_until: AtomicU64,
    /// The sequence number of its cache's oldest entry on the tree's LRU clock (`lru_clock`),
    /// `NO_ENTRY` if none, as of its last publication.
    pub lru_oldest: AtomicU64,
    /// Fork children that still share this process's memory (its pool among it).
    pub sharers: AtomicI64,
    /// A fork child that shares its parent's memory: the parent's slot + 1 (0: none), and the
    /// parent's pid (the slot may have been taken by another process since).
    pub sharing_parent: AtomicU64,
    pub parent_pid: std::sync::atomic::AtomicI32,
    /// The process's pid namespace (`own_pid_namespace`): its `pid` means something only to
    /// processes of the same namespace.
    pub pidns: AtomicU64,
    /// When its reclaim thread last went round its loop (`sys::now_ns`): a process whose
    /// thread has not for `RECLAIM_LIVE_NS` (stopped, or ended and not yet reaped) is not handed
    /// the tree's writeback.
    pub reclaim_seen_ns: AtomicU64,
}

/// See `ProcSlot::reclaim_seen_ns`: the reclaim thread goes round at least every 200 ms.
pub const RECLAIM_LIVE_NS: u64 = 500_000_000;

/// `ProcSlot::lru_oldest` of a process whose pool holds no entry.
pub const NO_ENTRY: u64 = u64::MAX;

/// A process's `active_ns` is rewritten at most this often (a store to a line other processes
/// read, kept off most faults).
pub const ACTIVE_STAMP_NS: u64 = 1_000_000;

pub const PROC_SLOTS: usize = 1024;

#[repr(C)]
pub struct Segment {
    pub magic: AtomicU64,
    /// The budget (SIZE) in bytes; 0 = none.
    pub budget_bytes: AtomicU64,
    /// Does the budget cover the compressed pool (1, SIZE as defined) or resident pages only (0)?
    pub budget_covers_pool: AtomicU64,
    pub resident_pages: AtomicI64,
    pub pool_pages: AtomicI64,
    /// Peak of resident + pool pages over the run.
    pub peak_charged_pages: AtomicU64,
    /// Peak of the pool's pages over the run (whether or not the budget covers them).
    pub peak_pool_pages: AtomicU64,
    pub processes: AtomicU64,
    /// Processes that set up their pager over the run (never decremented): none means the
    /// preload library was never loaded, and the program ran unpaged.
    pub joined: AtomicU64,
    /// Pagers set up at a program's start (the first program and every image exec'd in the
    /// tree; fork children are in `joined` only).
    pub images: AtomicU64,
    /// Execs and spawns by paged processes that replaced or started an image (counted before
    /// the call, taken back when it fails). `execs + 1 - images` programs ran unpaged.
    pub execs: AtomicU64,
    pub faults: AtomicU64,
    pub faults_from_pool: AtomicU64,
    pub faults_from_swapfile: AtomicU64,
    pub faults_zero: AtomicU64,
    pub fault_around_pages: AtomicU64,
    pub evictions: AtomicU64,
    /// Of `evictions`, those of background reclaim (staged batches the reclaim threads stored).
    pub bg_evictions: AtomicU64,
    /// Of `evictions`, those an idle process made because a busier one asked it to.
    pub donated: AtomicU64,
    /// While `sys::now_ns` is below this, an idle process is evicting for the others (they
    /// leave their own pages alone up to a small overshoot, `Pager::over_budget_own`).
    pub donation_deadline_ns: AtomicU64,
    /// One past the highest process slot ever claimed (the slot scans stop there).
    pub slots_used: AtomicU64,
    /// Bumped (and futex-woken) by a donating process after each batch it evicted, for the
    /// processes waiting on the donation.
    pub donation_progress: AtomicU32,
    /// The sequence every process's cache numbers its LRU entries from, so that the tree's
    /// caches hold them in one order, as the kernel's one global LRU does.
    pub lru_clock: AtomicU32,
    /// Set when a process's shrink worker found older entries in another process's pool and
    /// stopped: the processes' reclaim threads then start the worker of the process holding
    /// the oldest entries, until the tree's pool is below its accept threshold.
    pub pool_shrink_wanted: AtomicU64,
    /// How often that happened.
    pub pool_handoffs: AtomicU64,
    /// When the reclaim threads were last woken for it (they are woken at most every
    /// `HANDOFF_WAKE_NS`).
    pub pool_handoff_woken_ns: AtomicU64,
    pub evict_busy: AtomicU64,
    /// Of `evictions`, pages of read-only mappings, which `UFFDIO_MOVE` refuses, copied out
    /// instead (`Pager::evict_refused`).
    pub evict_read_only: AtomicU64,
    /// Of `evictions`, pages of writable executable mappings (a JIT's code cache), which
    /// `UFFDIO_MOVE` takes only into a mapping of the same protection: moved through the
    /// executable scratch area (`Pager::move_out_exec`).
    pub evict_exec: AtomicU64,
    /// Staged pages a fault took back before the reclaim thread stored them.
    pub staged_faulted_back: AtomicU64,
    /// Pages `UFFDIO_MOVE` moved while reporting an error (found in the scratch area).
    pub move_misreported: AtomicU64,
    pub refaults: AtomicU64,
    pub refaults_near: AtomicU64,
    /// Evictions of pages that had come back from the cache, and those of them that reused
    /// the kept clean copy instead of compressing again.
    pub reevictions: AtomicU64,
    pub reevictions_saved: AtomicU64,
    /// Kept copies dropped because write tracking saw the page written, or because the page
    /// differed from its copy at eviction (a write the scan had not seen yet).
    pub kept_dropped: AtomicU64,
    pub kept_mismatch: AtomicU64,
    /// `PAGEMAP_SCAN` calls made by the clock sweep.
    pub scans: AtomicU64,
    /// Pages brought back by swap readahead.
    pub readahead_pages: AtomicU64,
    /// Pages a large `realloc` moved (or, evicted, re-addressed) into the new block instead of
    /// copying them (`Pager::move_chunk`).
    pub realloc_pages_moved: AtomicU64,
    pub pinned_calls: AtomicU64,
    /// Futex waits (condition variables, contended locks, semaphores, `syscall(SYS_futex)`)
    /// whose words were pinned for the call.
    pub pinned_waits: AtomicU64,
    pub over_budget: AtomicU64,
    pub unmanageable: AtomicU64,
    /// Program images that exec'd without the `execve` wrapper (`execl`, a raw system call):
    /// the next image found their charge still in the tree and took it off.
    pub execs_unwrapped: AtomicU64,
    /// `io_uring_setup` calls refused with ENOSYS (the ring's kernel-side accesses to managed
    /// buffers would bypass every wrapper).
    pub io_uring_refused: AtomicU64,
    /// Processes that stopped being paged because they installed a seccomp filter.
    pub seccomp_detached: AtomicU64,
    /// Processes whose user may not create their swap file in the run's swap directory (a
    /// program the tree started as another user): what they write back fails, and those
    /// pages stay in memory.
    pub swap_dir_denied: AtomicU64,
    /// Processes whose malloc heap stayed unmanaged (its reservation refused, by an address
    /// space or data limit for one): their heap is outside the budget.
    pub heaps_unmanaged: AtomicU64,
    /// Processes that could not make their cache: nothing of theirs is paged out.
    pub caches_failed: AtomicU64,
    /// Processes started under a file-size limit (RLIMIT_FSIZE, `ulimit -f`), which binds
    /// their swap files too: writes past it fail (and their SIGXFSZ is taken back).
    pub fsize_limited: AtomicU64,
    /// Threads of the pager the kernel refused to start (the reclaim thread, a shrink
    /// worker): they count against the user's process limit (RLIMIT_NPROC, `ulimit -u`).
    pub threads_refused: AtomicU64,
    /// Pages the `mlock` wrappers pinned (each page once per lock: a page locked again while
    /// locked is not counted again).
    pub mlocked_pages: AtomicU64,
    /// `mlockall` calls emulated (eviction stopped for the calling process, see `mlock.rs`).
    pub mlockall_calls: AtomicU64,
    /// Opens of the cgroup's limit and usage files answered with the budget (`cgroup_view`).
    pub cgroup_view_opens: AtomicU64,
    /// Pages written to the trace recording's page file.
    pub trace_pages: AtomicU64,
    /// Bumped (and futex-woken) when a process is over the tree's budget with nothing left to
    /// evict itself: every process's reclaim thread then evicts from its own memory.
    pub reclaim_req: AtomicU32,
    pub hist: [AtomicU64; HIST_BUCKETS],
    /// The same faults, timed to the end of the direct reclaim they caused (what the faulting
    /// thread paid in all, as a kernel swap-in under a memory limit includes its reclaim).
    pub hist_with_reclaim: [AtomicU64; HIST_BUCKETS],
    pub counters: [CounterCell; COUNTER_CELLS],
    pub procs: [ProcSlot; PROC_SLOTS],
}

pub const SEGMENT_BYTES: usize = std::mem::size_of::<Segment>().div_ceil(4096) * 4096;

/// The calling process's pid namespace (the inode of `/proc/self/ns/pid`; 0 where it can't be
/// read): pids of processes in different namespaces can't be compared or checked.
pub fn own_pid_namespace() -> u64 {
    // SAFETY: a zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let path = c"/proc/self/ns/pid";
    // SAFETY: a NUL-terminated path and an out-parameter we own; a direct system call, never
    // a wrapper of the preload library.
    let r = unsafe {
        crate::sys::direct_syscall(
            libc::SYS_newfstatat,
            [
                libc::AT_FDCWD as usize,
                path.as_ptr() as usize,
                &mut st as *mut libc::stat as usize,
                0,
                0,
                0,
            ],
        )
    };
    r.map_or(0, |_| st.st_ino)
}

/// Wakes every waiter on `word`, a word of the shared mapping (non-private: other processes).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a word we hold a reference to; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAKE,
            i32::MAX,
        );
    }
}

/// Waits up to `ns` while `word` (of the shared mapping) holds `seen`.
fn futex_wait(word: &AtomicU32, seen: u32, ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    };
    // SAFETY: FUTEX_WAIT on a word we hold a reference to, with a timeout we own.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
        );
    }
}

#[inline]
pub fn bucket_of(ns: u64) -> usize {
    let b = (ns / 100) as usize;
    if b < HIST_LINEAR {
        return b;
    }
    let over = ns / (HIST_LINEAR as u64 * 100);
    (HIST_LINEAR + (63 - over.leading_zeros() as usize)).min(HIST_BUCKETS - 1)
}

/// The lower edge of a bucket in microseconds.
pub fn bucket_us(b: usize) -> f64 {
    if b < HIST_LINEAR {
        return b as f64 / 10.0;
    }
    (HIST_LINEAR as f64 / 10.0) * (1u64 << (b - HIST_LINEAR)) as f64
}

fn encode(name: &str) -> [u64; NAME_LEN / 8] {
    let mut b = [0u8; NAME_LEN];
    let n = name.len().min(NAME_LEN - 1);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut w = [0u64; NAME_LEN / 8];
    for (i, c) in b.chunks_exact(8).enumerate() {
        w[i] = u64::from_le_bytes(c.try_into().unwrap());
    }
    w
}

fn decode(w: &[u64]) -> String {
    let mut b = Vec::new();
    for x in w {
        b.extend_from_slice(&x.to_le_bytes());
    }
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl Segment {
    pub fn init(&self, budget: u64, covers_pool: bool) {
        self.budget_bytes.store(budget, Relaxed);
        self.budget_covers_pool.store(covers_pool as u64, Relaxed);
        self.magic.store(MAGIC, Relaxed);
    }

    pub fn record_fault(&self, ns: u64) {
        self.faults.fetch_add(1, Relaxed);
        self.hist[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    /// A fault's time including the direct reclaim after it (see `hist_with_reclaim`).
    pub fn record_fault_with_reclaim(&self, ns: u64) {
        self.hist_with_reclaim[bucket_of(ns)].fetch_add(1, Relaxed);
    }

    /// Pages charged to the budget right now.
    #[inline]
    pub fn charged_pages(&self) -> i64 {
        let r = self.resident_pages.load(Relaxed);
        if self.budget_covers_pool.load(Relaxed) != 0 {
            r + self.pool_pages.load(Relaxed)
        } else {
            r
        }
    }

    /// Asks every process of the tree to reclaim (a shared futex word in the memfd).
    pub fn request_reclaim(&self) {
        self.reclaim_req.fetch_add(1, Relaxed);
        futex_wake(&self.reclaim_req);
    }

    /// Waits up to `ms` for a reclaim request after `seen`.
    pub fn wait_reclaim(&self, seen: u32, ms: u64) {
        futex_wait(&self.reclaim_req, seen, ms * 1_000_000);
    }

    /// A donating process evicted a batch: wakes the processes waiting for it.
    pub fn donation_step(&self) {
        self.donation_progress.fetch_add(1, Relaxed);
        futex_wake(&self.donation_progress);
    }

    /// Waits up to `ns` for a donation's next batch after `seen`.
    pub fn wait_donation(&self, seen: u32, ns: u64) {
        futex_wait(&self.donation_progress, seen, ns);
    }

    /// Claims a process slot for `pid` (None when all are taken: the process is then not
    /// collected if it dies unretired).
    pub fn claim_slot(&self, pid: i32, pidns: u64) -> Option<usize> {
        let i = self
            .procs
            .iter()
            .position(|p| p.pid.compare_exchange(0, pid, Relaxed, Relaxed).is_ok())?;
        let p = &self.procs[i];
        p.pidns.store(pidns, Relaxed);
        p.asked.store(0, Relaxed);
        p.no_donor_until.store(0, Relaxed);
        p.lru_oldest.store(NO_ENTRY, Relaxed);
        p.sharers.store(0, Relaxed);
        p.sharing_parent.store(0, Relaxed);
        p.reclaim_seen_ns.store(0, Relaxed);
        p.active_ns.store(crate::sys::now_ns(), Relaxed);
        self.slots_used.fetch_max(i as u64 + 1, Relaxed);
        Some(i)
    }

    /// The slots that may be in use.
    fn live_slots(&self) -> &[ProcSlot] {
        let n = (self.slots_used.load(Relaxed) as usize).min(PROC_SLOTS);
        &self.procs[..n]
    }

    /// The slots of the tree's processes other than slot `me`, with their indices.
    fn others(&self, me: usize) -> impl Iterator<Item = (usize, &ProcSlot)> {
        self.live_slots()
            .iter()
            .enumerate()
            .filter(move |&(i, p)| i != me && p.pid.load(Relaxed) != 0)
    }

    /// Fork child slot `child` shares its parent's memory from now on (`parent`: the parent's
    /// slot, if it has one).
    pub fn start_sharing(&self, child: usize, parent: usize) {
        let (Some(c), Some(p)) = (self.procs.get(child), self.procs.get(parent)) else {
            return;
        };
        p.sharers.fetch_add(1, Relaxed);
        c.parent_pid.store(p.pid.load(Relaxed), Relaxed);
        c.sharing_parent.store(parent as u64 + 1, Relaxed);
    }

    /// The process of slot `c` no longer shares its parent's memory (nothing shared is left,
    /// or it ended).
    pub fn stop_sharing(&self, c: &ProcSlot) {
        let p = c.sharing_parent.swap(0, Relaxed);
        if p == 0 {
            return;
        }
        if let Some(ps) = self.procs.get(p as usize - 1) {
            // The parent's slot, unless the parent ended and another process took it.
            // (An image the parent exec'd has the same pid and a count of its own: never below 0.)
            if ps.pid.load(Relaxed) == c.parent_pid.load(Relaxed) {
                let _ = ps
                    .sharers
                    .fetch_update(Relaxed, Relaxed, |n| (n > 0).then_some(n - 1));
            }
        }
    }

    /// The oldest of the published oldest LRU entries of the processes other than slot `me`
    /// whose reclaim threads run (`None`: they hold none), by age on the tree's clock.
    pub fn lru_oldest_but(&self, me: usize) -> Option<u32> {
        let now = self.lru_clock.load(Relaxed);
        let t = crate::sys::now_ns();
        self.others(me)
            .filter(|(_, p)| t.saturating_sub(p.reclaim_seen_ns.load(Relaxed)) < RECLAIM_LIVE_NS)
            .map(|(_, p)| p.lru_oldest.load(Relaxed))
            .filter(|&o| o != NO_ENTRY)
            .map(|o| o as u32)
            .max_by_key(|&o| now.wrapping_sub(o))
    }

    /// The process of the tree idle longest (no fault for at least `idle_ns`) that holds at
    /// least `min_pages` charged pages and may be asked, other than slot `me`, with its slot's
    /// index. Its reclaim thread, which does the work, must have gone round lately (a stopped
    /// process's has not).
    pub fn idle_donor(
        &self,
        me: usize,
        now: u64,
        idle_ns: u64,
        min_pages: i64,
    ) -> Option<(usize, &ProcSlot)> {
        self.others(me)
            .filter(|&(_, p)| {
                p.charged.load(Relaxed) >= min_pages
                    && now >= p.no_donor_until.load(Relaxed)
                    && now.saturating_sub(p.reclaim_seen_ns.load(Relaxed)) < RECLAIM_LIVE_NS
            })
            .map(|(i, p)| (now.saturating_sub(p.active_ns.load(Relaxed)), i, p))
            .filter(|&(idle, _, _)| idle >= idle_ns)
            .max_by_key(|&(idle, _, _)| idle)
            .map(|(_, i, p)| (i, p))
    }

    /// Takes this pid's earlier images off the totals (their last published charge): a slot
    /// that holds `pid` when its process starts the pager belongs to an image that exec'd
    /// without retiring (glibc's `execl` family and `posix_spawn` call the internal
    /// `__execve`, which the preload library can't wrap). Returns how many there were.
    pub fn retire_stale(&self, pid: i32, ns: u64) -> u64 {
        let mut n = 0;
        for p in self.live_slots() {
            if p.pid.load(Relaxed) == pid && p.pidns.load(Relaxed) == ns && self.take_off(p, pid) {
                n += 1;
            }
        }
        if n > 0 {
            self.execs_unwrapped.fetch_add(n, Relaxed);
        }
        n
    }

    /// Takes processes that died without retiring off the totals (the charge in their slot).
    /// Only those of the caller's pid namespace `ns` (`own_pid_namespace`): from inside a
    /// child namespace (`unshare -p`) the tree's outer processes do not exist, and their
    /// charges were taken off while they ran (the tree ended with a negative charge).
    pub fn collect_dead(&self, me: i32, ns: u64) {
        for p in self.live_slots() {
            let pid = p.pid.load(Relaxed);
            if pid == 0 || pid == me || p.pidns.load(Relaxed) != ns {
                continue;
            }
            // SAFETY: signal 0 only checks that the process exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0 && crate::sys::errno() == libc::ESRCH;
            if gone {
                self.take_off(p, pid);
            }
        }
    }

    /// Frees slot `p` if it still holds `pid`, taking its charge off the totals. False if
    /// another thread or process got there first.
    fn take_off(&self, p: &ProcSlot, pid: i32) -> bool {
        if p.pid.compare_exchange(pid, 0, Relaxed, Relaxed).is_err() {
            return false;
        }
        self.resident_pages
            .fetch_sub(p.charged.swap(0, Relaxed), Relaxed);
        self.pool_pages.fetch_sub(p.pool.swap(0, Relaxed), Relaxed);
        p.lru_oldest.store(NO_ENTRY, Relaxed);
        self.stop_sharing(p);
        self.processes.fetch_sub(1, Relaxed);
        true
    }

    /// Raises the peaks to the current charge and pool. Called on every fault: a locked
    /// read-modify-write on these shared lines only when a peak actually rises.
    pub fn note_peak(&self) {
        let raise = |peak: &AtomicU64, v: i64| {
            let v = v.max(0) as u64;
            if v > peak.load(Relaxed) {
                peak.fetch_max(v, Relaxed);
            }
        };
        raise(&self.peak_charged_pages, self.charged_pages());
        raise(&self.peak_pool_pages, self.pool_pages.load(Relaxed));
    }

    /// Adds `v` to the counter named `name` (claiming a free cell for a new name).
    pub fn add_counter(&self, name: &str, v: u64) {
        self.update_counter(name, v, false);
    }

    /// Raises the counter named `name` to `v` if it is lower: a gauge (pool size, stored pages,
    /// live pools), which processes that ended one after another must not add up.
    pub fn max_counter(&self, name: &str, v: u64) {
        self.update_counter(name, v, true);
    }

    fn update_counter(&self, name: &str, v: u64, max: bool) {
        let key = encode(name);
        for c in &self.counters {
            loop {
                match c.claim.load(std::sync::atomic::Ordering::Acquire) {
                    0 => {
                        if c.claim.compare_exchange(0, 1, Relaxed, Relaxed).is_ok() {
                            for (slot, k) in c.name.iter().zip(key) {
                                slot.store(k, Relaxed);
                            }
                            c.claim.store(2, std::sync::atomic::Ordering::Release);
                        }
                    }
                    1 => std::hint::spin_loop(),
                    _ => break,
                }
            }
            if c.name.iter().zip(key).all(|(s, k)| s.load(Relaxed) == k) {
                if max {
                    c.value.fetch_max(v, Relaxed);
                } else {
                    c.value.fetch_add(v, Relaxed);
                }
                return;
            }
        }
    }

    /// Every named counter, in claim order.
    pub fn counters(&self) -> Vec<(String, u64)> {
        self.counters
            .iter()
            .filter(|c| c.claim.load(std::sync::atomic::Ordering::Acquire) == 2)
            .map(|c| {
                let w: Vec<u64> = c.name.iter().map(|x| x.load(Relaxed)).collect();
                (decode(&w), c.value.load(Relaxed))
            })
            .collect()
    }

    /// The fault latency at quantile `q` (0..1) in microseconds, from the histogram.
    pub fn quantile_us(&self, q: f64) -> f64 {
        quantile(&self.hist, q)
    }

    /// The same, timed to the end of each fault's direct reclaim.
    pub fn quantile_with_reclaim_us(&self, q: f64) -> f64 {
        quantile(&self.hist_with_reclaim, q)
    }
}

/// The value at quantile `q` of a latency histogram, in microseconds (0 when empty).
fn quantile(hist: &[AtomicU64; HIST_BUCKETS], q: f64) -> f64 {
    let counts: Vec<u64> = hist.iter().map(|h| h.load(Relaxed)).collect();
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let want = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (b, c) in counts.iter().enumerate() {
        acc += c;
        if acc >= want {
            // Middle of the bucket.
            let lo = bucket_us(b);
            let hi = if b + 1 < HIST_BUCKETS {
                bucket_us(b + 1)
            } else {
                lo
            };
            return (lo + hi) / 2.0;
        }
    }
    0.0
}

/// Is `fd` open on a file of the segment's size (the run's memfd)?
pub fn is_segment_fd(fd: i32) -> bool {
    // SAFETY: fstat fills the struct for a valid fd, fails otherwise.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_size as usize == SEGMENT_BYTES
    }
}

/// Maps the segment of the fd in `UZSWAP_SHM_FD`, or a private one when there is none (the
/// library preloaded by hand). Never returns a managed mapping.
pub fn map_segment(fd: Option<i32>) -> Result<&'static Segment, i32> {
    let addr = match fd {
        Some(fd) => {
            // SAFETY: a new shared mapping of the memfd at a kernel-chosen address.
            unsafe {
                crate::sys::raw_mmap(
                    0,
                    SEGMENT_BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )?
            }
        }
        None => crate::sys::map_anon(SEGMENT_BYTES)?,
    };
    // SAFETY: the mapping is SEGMENT_BYTES long, page-aligned, zero or initialised by another
    // process with the same layout, only ever accessed through atomics, and never unmapped.
    Ok(unsafe { &*(addr as *const Segment) })
}
