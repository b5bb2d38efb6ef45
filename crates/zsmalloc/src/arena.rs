// SPDX-License-Identifier: MIT
//! The zspage arena: real OS pages for zspages. This is the crate's only module with unsafe
//! operations (mmap, mprotect, madvise, raw reads and writes).
//!
//! One large `PROT_NONE` + `MAP_NORESERVE` reservation is made at pool creation; it costs
//! address space only. It is cut into **chunks** of 2 MiB (512 frames of 4 KiB, one huge page,
//! 2 MiB aligned), the unit in which memory comes from the OS and, when a chunk is wholly free,
//! goes back to it. A zspage is a virtually contiguous run of `pages_per_zspage` (1..=16)
//! frames inside one chunk.
//!
//! **Where a run comes from**, in this order:
//! 1. a free run of that length still resident (freed earlier, kept for reuse), the lowest
//!    address first;
//! 2. the tail of the *open* chunk (the one being carved, front to back), if it is resident
//!    (a huge page, or prefaulted);
//! 3. a free run of that length given back to the OS earlier, the lowest first (then the open
//!    chunk's tail if it was not resident: both fault, the holes keep memory packed);
//! 4. a new open chunk: one the prefault thread has faulted in, else the lowest chunk given
//!    back earlier, else a never used one (see the huge-page regions below; a pool's first
//!    chunk is a small-page one unless [`MemoryPolicy::huge_first_chunk`]);
//! 5. when the address space is exhausted, a longer free run, split.
//!
//! Lowest-address-first reuse keeps the live zspages packed into the low chunks, so the high
//! ones drain and can be returned whole: one `MADV_DONTNEED` of 2 MiB, which is almost free
//! and splits no huge page (discarding part of a huge page splits it, and that memory then
//! comes back in 4 KiB faults).
//!
//! **Where memory goes back** (the model is jemalloc's dirty-page decay): faulting fresh
//! anonymous memory in costs 1.5-2 µs per 4 KiB page on the test VM, several times the pool's
//! own bookkeeping per zspage, so a freed run stays resident and the chunk's decay clock is
//! restarted. A chunk whose free runs stay unused for [`MemoryPolicy::free_page_decay_ms`], or
//! the chunks freed longest ago when the resident free runs exceed
//! [`MemoryPolicy::max_cached_pages`] (down to 3/4 of the bound, so discards come in batches),
//! give their memory back: a wholly free chunk as a whole, a partly used one run by run
//! (merged into contiguous ranges, one `madvise` and one TLB shootdown per range). The checks
//! run on slow paths only (a zspage taken or given back); [`Arena::trim`] returns everything at
//! once (compaction and `Pool::trim` call it). Decay 0 returns every freed run at once, as the
//! kernel does. A huge-page chunk that gives runs back while others are in use is advised
//! `MADV_NOHUGEPAGE` until it goes back whole, so that khugepaged does not collapse it into a
//! huge page again, refilling the frames just given back (`Arena::release`).
//!
//! **Huge pages** ([`MemoryPolicy::transparent_huge_pages`], used only where the kernel's THP
//! mode is not `never`): the first half of the reservation is `MADV_HUGEPAGE`, the second
//! `MADV_NOHUGEPAGE` (see `Chunks`). A huge-page chunk's first touch faults in one 2 MiB page:
//! 0.3-0.5 µs per 4 KiB on the test VM when the guest has recently freed memory, but 3-10 µs
//! per 4 KiB when the hypervisor must back the page again (a VM with free page reporting gets
//! back free 2 MiB blocks after about two seconds; 4 KiB faults are served from memory that is
//! never reported): 1.5-2 µs per 4 KiB is what small pages cost either way. Huge pages also
//! spare the pool's readers TLB misses. RSS then grows in 2 MiB steps: the open chunk's
//! uncarved tail is resident but holds no zspage ([`Arena::slack_pages`]).
//!
//! **Prefaulting** ([`MemoryPolicy::prefault_chunks`]): once the pool has carved half a chunk
//! (a pool that stays smaller, like a short-lived process's under `uzswap run`, never starts
//! the thread), a background thread per arena keeps
//! that many huge-page chunks faulted in ahead of the open one, so a growing pool's stores do
//! not wait for the kernel to clear and map memory, nor for the hypervisor to back it. When
//! the pool outruns the thread, the chunk it must open at once comes from the small-page
//! region and is faulted in 4 KiB at a time as it is carved. The cost is memory, up to
//! `prefault_chunks` × 2 MiB resident beyond the pool's pages while it grows (returned after
//! the decay time once it stops growing), and the thread's CPU time: the work is not saved,
//! it runs beside the caller instead of in its path. Without prefaulting, a huge-page arena
//! opens huge-page chunks on the allocating thread. Before prefaulting starts, the first chunk
//! is a small-page one, so that a pool that stays small holds only the pages it uses; with
//! [`MemoryPolicy::huge_first_chunk`] it is a huge page, faulted in at the first allocation
//! (one fault instead of 512: an empty zswap cache's stores ran 2-3 % faster).
//!
//! Under Miri (no mmap) the reservation is a zeroed heap allocation, `MADV_DONTNEED` is
//! emulated by zero-filling and there is no prefault thread, so the pool's logic and its
//! data-race freedom can be checked.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::class::MAX_CHAIN_SIZE;
use crate::{Error, PAGE_SIZE};

/// Frames made read-write per `mprotect` growth step where the reservation cannot be
/// read-write from the start (4 MiB, two chunks; the step doubles with the committed size).
const GROW_FRAMES: usize = 1024;
/// Frames per chunk: one 2 MiB huge page.
pub(crate) const CHUNK_FRAMES: usize = 512;

/// How a pool gets, keeps and returns the memory of its zspages (see the `arena` module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryPolicy {
    /// Milliseconds a freed zspage's pages stay resident for reuse before they go back to the
    /// OS; 0 returns them at once (the kernel's behaviour: RSS follows
    /// [`crate::Pool::total_pages`] up to the open chunk's uncarved tail).
    pub free_page_decay_ms: u64,
    /// Most pages of freed zspages kept resident for reuse; beyond it the chunks freed longest
    /// ago are returned at once.
    pub max_cached_pages: usize,
    /// Back the pool with transparent huge pages (`MADV_HUGEPAGE`; ignored where THP is off).
    pub transparent_huge_pages: bool,
    /// Chunks (2 MiB each) a background thread keeps populated ahead of a growing pool; 0: none,
    /// a growing pool faults its memory in on the allocating thread.
    pub prefault_chunks: usize,
    /// With `prefault_chunks` > 0: the chunks a pool opens before prefaulting starts (its
    /// first) are huge pages faulted in at once, instead of 4 KiB pages faulted in as they
    /// are carved. Faster for a pool that grows (one 2 MiB fault instead of 512 small ones,
    /// 2-3 % of an empty pool's store time), but a pool that stays small has up to 2 MiB
    /// resident from its first allocation on. Without prefaulting every chunk is a huge page.
    pub huge_first_chunk: bool,
}

/// Default decay: long enough to span a burst of invalidations followed by stores (swap-in
/// then swap-out of a working set), short enough that an idle pool gives memory back within
/// a second or so of its next allocation or free (jemalloc's default dirty decay is 10 s).
pub const DEFAULT_FREE_PAGE_DECAY_MS: u64 = 1000;
/// Default bound of the free-run cache: 512 pages (2 MiB, one huge page), a fixed, predictable
/// overhead (the pool's RSS exceeds its page count by at most this, under 4 % of a 64 MiB
/// pool); it still absorbs the churn of a working set of about 5 MiB of stored pages (at
/// zswap's typical 0.4 ratio) being invalidated and stored again, without a fault or an
/// `madvise` per zspage. A bound proportional to the pool's peak would let a large pool keep
/// megabytes it no longer needs for a whole decay period.
pub const DEFAULT_MAX_CACHED_PAGES: usize = 512;

impl Default for MemoryPolicy {
    fn default() -> Self {
        MemoryPolicy {
            free_page_decay_ms: DEFAULT_FREE_PAGE_DECAY_MS,
            max_cached_pages: DEFAULT_MAX_CACHED_PAGES,
            transparent_huge_pages: false,
            prefault_chunks: 0,
            huge_first_chunk: false,
        }
    }
}

impl MemoryPolicy {
    /// The kernel's behaviour: no freed page kept, nothing prefaulted.
    pub fn immediate() -> Self {
        MemoryPolicy {
            free_page_decay_ms: 0,
            max_cached_pages: 0,
            transparent_huge_pages: false,
            prefault_chunks: 0,
            huge_first_chunk: false,
        }
    }
}

/// Where a chunk is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// Nothing carved, not resident: never used, or given back (then in `returned`).
    Idle,
    /// Nothing carved, populated (or being populated) by the prefault thread (in `prepared`).
    Prepared,
    /// Being carved: frames from `cursor` on were never handed out.
    Open,
    /// Wholly carved.
    Carved,
    /// Being given back (its `madvise` runs with the arena lock dropped).
    Returning,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    state: ChunkState,
    /// Frames in runs handed out.
    used: u16,
    /// Frames in free runs kept resident (in `cached`).
    cached: u16,
    /// The whole chunk was faulted in at once (a huge page, or the prefault thread), so its
    /// uncarved tail is resident too.
    populated: bool,
    /// When a run was last freed into it (ms since the arena's epoch): the decay clock of its
    /// cached runs. For a prepared chunk, when it was prepared.
    last_free: u64,
    /// A huge-page chunk advised `MADV_NOHUGEPAGE` because runs of it went back to the OS while
    /// others are in use (see `Arena::release`); advised back when it goes back whole.
    thp_off: bool,
}

impl Chunk {
    const IDLE: Chunk = Chunk {
        state: ChunkState::Idle,
        used: 0,
        cached: 0,
        populated: false,
        last_free: 0,
        thp_off: false,
    };
}

/// The huge-page region (chunks below `small_base`, `MADV_HUGEPAGE`) and the small-page region
/// (the rest, `MADV_NOHUGEPAGE`). Only the prefault thread takes new chunks from the huge
/// region when it runs: a chunk the pool must open at once, with none prefaulted, comes from
/// the small region and faults 4 KiB pages as they are needed (1.5-2 µs each) instead of a
/// whole huge page up front (up to 5 ms when the hypervisor backs it). Without huge pages
/// everything is the small region.
struct Chunks {
    /// Chunks `0..huge.len()` ever used.
    huge: Vec<Chunk>,
    /// Chunks `small_base..small_base + small.len()` ever used.
    small: Vec<Chunk>,
    small_base: u32,
}

/// Regions, as indices of `ArenaInner::returned`.
const HUGE: usize = 0;
const SMALL: usize = 1;

impl Chunks {
    fn region(&self, c: u32) -> usize {
        if c < self.small_base {
            HUGE
        } else {
            SMALL
        }
    }

    fn get(&self, c: u32) -> Chunk {
        let v = match self.region(c) {
            HUGE => self.huge.get(c as usize),
            _ => self.small.get((c - self.small_base) as usize),
        };
        v.copied().unwrap_or(Chunk::IDLE)
    }

    fn get_mut(&mut self, c: u32) -> &mut Chunk {
        let (v, i) = match self.region(c) {
            HUGE => (&mut self.huge, c as usize),
            _ => (&mut self.small, (c - self.small_base) as usize),
        };
        if i >= v.len() {
            v.resize(i + 1, Chunk::IDLE);
        }
        &mut v[i]
    }

    /// Every chunk ever used.
    fn ids(&self) -> impl Iterator<Item = u32> {
        (0..self.huge.len() as u32)
            .chain(self.small_base..self.small_base + self.small.len() as u32)
    }

    /// The region's first chunk never used.
    fn next_new(&self, region: usize) -> u32 {
        match region {
            HUGE => self.huge.len() as u32,
            _ => self.small_base + self.small.len() as u32,
        }
    }
}

/// Memory to give back to the OS, decided under the arena lock and done after dropping it.
#[derive(Clone, Copy)]
enum Release {
    /// A wholly free chunk: one `madvise`, then the chunk goes to `returned`.
    Chunk(u32),
    /// A free run of a partly used chunk: `madvise`, then it goes to `discarded`.
    Run(u32, usize),
}

struct ArenaInner {
    /// Chunks ever touched, per region (see [`Chunks`]).
    chunks: Chunks,
    /// The chunk being carved and its next uncarved frame.
    open: Option<(u32, u32)>,
    /// `cached[n]`: first frames of free, resident runs of `n` frames.
    cached: Vec<BTreeSet<u32>>,
    /// `discarded[n]`: first frames of free runs of `n` frames given back to the OS.
    discarded: Vec<BTreeSet<u32>>,
    /// Chunks given back whole, reusable (lowest first), per region.
    returned: [BTreeSet<u32>; 2],
    /// Chunks handed to the prefault thread, oldest first.
    prepared: VecDeque<u32>,
    /// The prefault thread's work queue; replaced in a fork child (see
    /// [`Arena::after_fork_child`]).
    prefault: Arc<Prefault>,
    /// The prefault thread, started by the first chunk it is given.
    prefault_thread: Option<std::thread::JoinHandle<()>>,
    /// CPU time of prefault threads stopped by [`Arena::park_prefault`].
    prefault_parked_cpu_ns: u64,
    /// Pages in `cached`.
    cached_pages: usize,
    /// Frames below this index are read-write.
    committed: usize,
    /// High-water mark of frames ever handed out.
    top: usize,
    /// Frames carved from chunks so far: prefaulting starts once the pool has carved
    /// `PREFAULT_AFTER` (a pool that stays small, like a short-lived process's, never pays for
    /// a thread and chunks it does not use).
    carved: usize,
    /// `top_up_prefault` has run past `PREFAULT_AFTER`.
    prefault_armed: bool,
    /// Earliest time a cached run or a prepared chunk expires (`u64::MAX`: none).
    next_expiry: u64,
    policy: MemoryPolicy,
}

/// Frames a pool carves before its arena starts prefaulting (half a chunk: about 1500
/// compressed pages of typical memory), so that the prefault thread has the other half's
/// stores to fault in the next chunks.
const PREFAULT_AFTER: usize = CHUNK_FRAMES / 2;

/// Work queue of the prefault thread. Its lock and condition variable are std's (a futex word
/// each, waiters kept by the kernel): the thread waits here whenever it is idle, and with
/// parking_lot it would sit at every fork in the process-wide table of parked threads, which a
/// fork child inherits. glibc gives a child's new threads the stacks (and thread-local storage)
/// of the parent's threads the child does not have, so the child's reclaim thread then
/// rewrote that stale queue entry as its own and corrupted the table (a fork child crashed in
/// `park` about one run in ten of a Python `multiprocessing` pool).
#[derive(Default)]
struct Prefault {
    state: std::sync::Mutex<PrefaultState>,
    cv: std::sync::Condvar,
}

impl Prefault {
    fn state(&self) -> std::sync::MutexGuard<'_, PrefaultState> {
        // Every critical section only moves chunk numbers between fields: never half done.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Default)]
struct PrefaultState {
    queue: VecDeque<u32>,
    busy: Option<u32>,
    stop: bool,
}

/// A reservation of `frames` 4 KiB frames (see the module docs).
pub(crate) struct Arena {
    base: *mut u8,
    frames: usize,
    /// The mapping as made by `sys::reserve` (it starts before `base`: aligned to a chunk).
    map_base: *mut u8,
    map_len: usize,
    /// Chunks below this one are the huge-page region (see `Chunks`); 0 without huge pages.
    small_base: u32,
    epoch: Instant,
    inner: Mutex<ArenaInner>,
}

// SAFETY: the arena's memory is plain bytes reached through `base`; all mutation of the
// bookkeeping is behind `inner`'s mutex, and accesses to the bytes themselves follow the
// exclusion protocol documented on the unsafe accessors below.
unsafe impl Send for Arena {}
// SAFETY: as for Send: shared access to the bytes is governed by the callers' protocol.
unsafe impl Sync for Arena {}

impl ArenaInner {
    fn chunk_of(frame: u32) -> u32 {
        frame / CHUNK_FRAMES as u32
    }

    fn chunk(&mut self, c: u32) -> &mut Chunk {
        self.chunks.get_mut(c)
    }

    /// Takes a resident free run of `n` frames, the lowest first.
    fn take_cached(&mut self, n: usize) -> Option<u32> {
        let f = self.cached[n].pop_first()?;
        self.cached_pages -= n;
        let ch = self.chunk(Self::chunk_of(f));
        ch.cached -= n as u16;
        ch.used += n as u16;
        Some(f)
    }

    /// Takes a discarded free run of `n` frames, the lowest first.
    fn take_discarded(&mut self, n: usize) -> Option<u32> {
        let f = self.discarded[n].pop_first()?;
        self.chunk(Self::chunk_of(f)).used += n as u16;
        Some(f)
    }

    /// Forgets every free run of chunk `c` (resident or not): the chunk goes back whole.
    fn forget_runs(&mut self, c: u32) {
        let lo = c * CHUNK_FRAMES as u32;
        let hi = lo + CHUNK_FRAMES as u32;
        for n in 1..=MAX_CHAIN_SIZE {
            let cached: Vec<u32> = self.cached[n].range(lo..hi).copied().collect();
            for f in cached {
                self.cached[n].remove(&f);
            }
            let discarded: Vec<u32> = self.discarded[n].range(lo..hi).copied().collect();
            for f in discarded {
                self.discarded[n].remove(&f);
            }
        }
        let cached = std::mem::take(&mut self.chunk(c).cached);
        self.cached_pages -= cached as usize;
    }

    /// Gives back what chunk `c` holds free: the whole chunk if nothing in it is used (and it
    /// is not the open chunk), else its cached runs, the highest first, until `budget` pages
    /// went. Returns the cached pages released.
    fn release_chunk(&mut self, c: u32, budget: usize, out: &mut Vec<Release>) -> usize {
        let ch = *self.chunk(c);
        let pages = ch.cached as usize;
        let is_open = self.open.is_some_and(|(o, _)| o == c);
        if ch.used == 0 && ch.state == ChunkState::Carved && !is_open {
            self.forget_runs(c);
            self.chunk(c).state = ChunkState::Returning;
            out.push(Release::Chunk(c));
            return pages;
        }
        let lo = c * CHUNK_FRAMES as u32;
        let hi = lo + CHUNK_FRAMES as u32;
        let mut runs: Vec<(u32, usize)> = (1..=MAX_CHAIN_SIZE)
            .flat_map(|n| self.cached[n].range(lo..hi).map(move |&f| (f, n)))
            .collect();
        runs.sort_unstable();
        let mut released = 0;
        while released < budget {
            let Some((f, n)) = runs.pop() else { break };
            self.cached[n].remove(&f);
            released += n;
            out.push(Release::Run(f, n));
        }
        self.cached_pages -= released;
        self.chunk(c).cached -= released as u16;
        released
    }

    /// Releases the chunks whose decay time has passed into `out`.
    fn take_expired(&mut self, now: u64, out: &mut Vec<Release>) {
        if now < self.next_expiry {
            return;
        }
        let decay = self.policy.free_page_decay_ms;
        let mut next = u64::MAX;
        let ids: Vec<u32> = self.chunks.ids().collect();
        for c in ids {
            let ch = self.chunks.get(c);
            if ch.cached == 0 {
                continue;
            }
            let expiry = ch.last_free.saturating_add(decay);
            if expiry <= now {
                self.release_chunk(c, usize::MAX, out);
            } else {
                next = next.min(expiry);
            }
        }
        // Chunks prefaulted for a pool that stopped growing.
        let mut keep = VecDeque::new();
        while let Some(c) = self.prepared.pop_front() {
            let expiry = self.chunks.get(c).last_free.saturating_add(decay);
            if expiry <= now && self.unprepare(c, out) {
                continue;
            }
            next = next.min(expiry.max(now + 1));
            keep.push_back(c);
        }
        self.prepared = keep;
        self.next_expiry = next;
    }

    /// Takes prepared chunk `c` back from the prefault thread to give it back; false if the
    /// thread is populating it right now (try again later).
    fn unprepare(&mut self, c: u32, out: &mut Vec<Release>) -> bool {
        let mut st = self.prefault.state();
        if st.busy == Some(c) {
            return false;
        }
        let queued = st.queue.iter().position(|&q| q == c);
        if let Some(i) = queued {
            st.queue.remove(i);
        }
        drop(st);
        let ch = self.chunk(c);
        if queued.is_some() {
            // Never populated: nothing to give back.
            ch.state = ChunkState::Idle;
            let r = self.chunks.region(c);
            self.returned[r].insert(c);
        } else {
            ch.state = ChunkState::Returning;
            out.push(Release::Chunk(c));
        }
        true
    }

    /// Releases the chunks freed longest ago into `out` until at most `target` pages stay
    /// cached; among chunks freed at the same time, the least used first (a wholly free one
    /// goes back whole and splits no huge page).
    fn take_oldest(&mut self, target: usize, out: &mut Vec<Release>) {
        if self.cached_pages > target {
            let mut order: Vec<(u64, u16, u32)> = self
                .chunks
                .ids()
                .map(|c| (c, self.chunks.get(c)))
                .filter(|(_, ch)| ch.cached > 0)
                .map(|(c, ch)| (ch.last_free, ch.used, c))
                .collect();
            order.sort_unstable();
            for (_, _, c) in order {
                if self.cached_pages <= target {
                    break;
                }
                let budget = self.cached_pages - target;
                self.release_chunk(c, budget, out);
            }
        }
        if self.cached_pages == 0 && self.prepared.is_empty() {
            self.next_expiry = u64::MAX;
        }
    }

    /// Releases every cached run into `out`; returns the cached pages released.
    fn take_all(&mut self, out: &mut Vec<Release>) -> usize {
        let mut pages = 0;
        let ids: Vec<u32> = self.chunks.ids().collect();
        for c in ids {
            if self.chunks.get(c).cached > 0 {
                pages += self.release_chunk(c, usize::MAX, out);
            }
        }
        pages
    }
}

impl Arena {
    /// Reserves `frames` frames of address space (no memory is committed yet).
    #[cfg(test)]
    pub(crate) fn new(frames: usize) -> Result<Arena, Error> {
        Self::with_policy(frames, MemoryPolicy::default())
    }

    /// Reserves `frames` frames of address space, managed by `policy`.
    pub(crate) fn with_policy(frames: usize, policy: MemoryPolicy) -> Result<Arena, Error> {
        assert!(frames > 0 && frames <= u32::MAX as usize);
        let huge = policy.transparent_huge_pages && sys::thp_available();
        // Chunk-aligned, so that a chunk can be one huge page.
        let slack = if cfg!(miri) {
            0
        } else {
            CHUNK_FRAMES * PAGE_SIZE
        };
        let map_len = frames * PAGE_SIZE + slack;
        // Read-write from the start unless the kernel would charge the whole reservation
        // (strict overcommit ignores MAP_NORESERVE): then it is made read-write chunk by chunk.
        // An `mprotect` takes the address space's lock for writing, which waits for every
        // fault in progress, among them the prefault thread's (milliseconds when the
        // hypervisor backs a huge page).
        let writable = sys::overcommit_allowed();
        let map_base = sys::reserve(map_len, writable)?;
        let pad = match slack {
            0 => 0,
            align => (align - (map_base as usize) % align) % align,
        };
        // SAFETY: pad < slack, so base..base+frames*PAGE_SIZE stays in the mapping.
        let base = unsafe { map_base.add(pad) };
        let chunk_count = frames.div_ceil(CHUNK_FRAMES) as u32;
        // The first half of the chunks is the huge-page region (see `Chunks`).
        let small_base = if huge { chunk_count.div_ceil(2) } else { 0 };
        if huge {
            let split = (small_base as usize * CHUNK_FRAMES).min(frames) * PAGE_SIZE;
            // SAFETY: both ranges are inside our own reservation.
            unsafe {
                sys::advise(base, split, true);
                sys::advise(base.add(split), frames * PAGE_SIZE - split, false);
            }
        }
        Ok(Arena {
            base,
            frames,
            map_base,
            map_len,
            small_base,
            epoch: Instant::now(),
            inner: Mutex::new(ArenaInner {
                chunks: Chunks {
                    huge: Vec::new(),
                    small: Vec::new(),
                    small_base,
                },
                open: None,
                cached: vec![BTreeSet::new(); MAX_CHAIN_SIZE + 1],
                discarded: vec![BTreeSet::new(); MAX_CHAIN_SIZE + 1],
                returned: [BTreeSet::new(), BTreeSet::new()],
                prepared: VecDeque::new(),
                cached_pages: 0,
                committed: if writable { frames } else { 0 },
                top: 0,
                carved: 0,
                prefault_armed: false,
                next_expiry: u64::MAX,
                policy,
                prefault: Arc::default(),
                prefault_thread: None,
                prefault_parked_cpu_ns: 0,
            }),
        })
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> MemoryPolicy {
        self.inner.lock().policy
    }

    /// Changes the policy (huge pages only as chosen at creation); applies the new decay,
    /// bound and prefault depth at once. Returns the cached pages this returned to the OS.
    pub(crate) fn set_policy(&self, policy: MemoryPolicy) -> usize {
        let mut out = Vec::new();
        let released = {
            let mut g = self.inner.lock();
            let before = g.cached_pages;
            let old = g.policy;
            g.policy = MemoryPolicy {
                transparent_huge_pages: old.transparent_huge_pages,
                ..policy
            };
            if old.free_page_decay_ms != policy.free_page_decay_ms {
                // Re-derive the next expiry under the new decay.
                g.next_expiry = 0;
            }
            let now = self.now_ms();
            g.take_expired(now, &mut out);
            g.take_oldest(policy.max_cached_pages, &mut out);
            while g.prepared.len() > policy.prefault_chunks {
                let c = g.prepared.pop_back().expect("non-empty");
                if !g.unprepare(c, &mut out) {
                    g.prepared.push_back(c);
                    break;
                }
            }
            before - g.cached_pages
        };
        self.release(out);
        released
    }

    /// In a fork child: the prefault thread is the parent's and is not in this process. Give
    /// the child a queue of its own (a thread is started for it by the next chunk queued) and
    /// put back on it the prepared chunks the parent's thread had not finished, the one it was
    /// busy with included (writing a byte per page of a chunk no zspage uses changes nothing).
    /// The old queue's lock is only tried: the parent's thread may have held it at the fork,
    /// and then every prepared chunk counts as not populated (the pool faults it in as it
    /// carves it, as it does a chunk taken back from the queue). The child must not have
    /// started threads of its own yet.
    pub(crate) fn after_fork_child(&self) {
        let mut g = self.inner.lock();
        let old = std::mem::take(&mut g.prefault);
        // The handle names a thread of the parent: never join or detach it here.
        std::mem::forget(g.prefault_thread.take());
        let unfinished: Vec<u32> = {
            let st = match old.state.try_lock() {
                Ok(st) => Some(st),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            match st {
                Some(st) => st.queue.iter().copied().chain(st.busy).collect(),
                None => g.prepared.iter().copied().collect(),
            }
        };
        // The parent's thread holds a reference to `old` that is never dropped here: leak ours
        // too rather than run the destructor of a lock that may be held.
        std::mem::forget(old);
        let mut st = g.prefault.state();
        st.queue.extend(
            g.prepared
                .iter()
                .copied()
                .filter(|c| unfinished.contains(c)),
        );
    }

    /// In a fork child: maps the huge-page chunks with 4 KiB page table entries (the huge
    /// pages themselves stay, shared with the parent until either writes). The kernel reports a
    /// page's sharing (`/proc/self/pagemap`'s exclusive bit) correctly only for pages mapped by
    /// page table entries: a chunk the child still maps as one huge page reads as exclusive as
    /// soon as the parent has written one page of it (checked on 6.18), so the child's count of
    /// the pool memory it shares ([`Arena::zspage_ranges`]) would miss every such chunk.
    /// Changing one page's protection and back splits the mapping. The child must not have
    /// started threads of its own yet.
    pub(crate) fn split_huge_mappings(&self) {
        let g = self.inner.lock();
        for c in 0..g.chunks.huge.len() as u32 {
            if g.returned[HUGE].contains(&c) || (c as usize) * CHUNK_FRAMES >= g.committed {
                continue;
            }
            // SAFETY: the chunk's first frame is committed and inside our reservation; its
            // protection ends as it was, and the lock keeps the arena's other users out.
            unsafe { sys::split_huge_mapping(self.base, c as usize * CHUNK_FRAMES * PAGE_SIZE) };
        }
    }

    /// The address ranges (start, pages), ascending, that may hold zspages: the chunks ever
    /// used less the frames known to hold none while resident (free runs kept for reuse, the
    /// open chunk's resident tail, prefaulted chunks). Ranges given back to the OS are left in:
    /// they hold no memory. A snapshot: allocations may change it as soon as it is returned.
    pub(crate) fn zspage_ranges(&self) -> Vec<(usize, usize)> {
        let g = self.inner.lock();
        let mut idle: Vec<(usize, usize)> = Vec::new();
        for (n, set) in g.cached.iter().enumerate() {
            idle.extend(set.iter().map(|&f| (f as usize, n)));
        }
        if let Some((c, cursor)) = g.open {
            if Self::tail_resident(&g, c) {
                let end = c as usize * CHUNK_FRAMES + self.chunk_len(c);
                idle.push((cursor as usize, end.saturating_sub(cursor as usize)));
            }
        }
        idle.extend(
            g.prepared
                .iter()
                .map(|&c| (c as usize * CHUNK_FRAMES, self.chunk_len(c))),
        );
        // The chunks ever used: the huge-page region's from its start, the small-page one's
        // from `small_base` (the address space between them was never touched).
        let spans = [
            (0, g.chunks.huge.len() * CHUNK_FRAMES),
            (
                g.chunks.small_base as usize * CHUNK_FRAMES,
                (g.chunks.small_base as usize + g.chunks.small.len()) * CHUNK_FRAMES,
            ),
        ];
        drop(g);
        idle.sort_unstable();
        let mut out = Vec::new();
        for (lo, hi) in spans {
            let hi = hi.min(self.frames);
            let mut at = lo;
            for &(first, n) in idle.iter().filter(|&&(f, n)| f + n > lo && f < hi) {
                if first > at {
                    out.push((at, first - at));
                }
                at = at.max(first + n);
            }
            if at < hi {
                out.push((at, hi - at));
            }
        }
        out.iter()
            .map(|&(f, n)| (self.base as usize + f * PAGE_SIZE, n))
            .collect()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Frames of address space reserved.
    pub(crate) fn capacity_frames(&self) -> usize {
        self.frames
    }

    fn chunk_len(&self, c: u32) -> usize {
        CHUNK_FRAMES.min(self.frames - c as usize * CHUNK_FRAMES)
    }

    fn chunk_count(&self) -> u32 {
        self.frames.div_ceil(CHUNK_FRAMES) as u32
    }

    /// Makes frames below `end` read-write.
    fn commit_to(&self, g: &mut ArenaInner, end: usize) -> bool {
        if end <= g.committed {
            return true;
        }
        let new_committed = end
            .max(g.committed + GROW_FRAMES.max(g.committed))
            .min(self.frames);
        let start = g.committed * PAGE_SIZE;
        let len = (new_committed - g.committed) * PAGE_SIZE;
        // SAFETY: [start, start+len) lies inside the reservation (new_committed <= frames).
        if unsafe { sys::commit(self.base, start, len) }.is_err() {
            return false;
        }
        g.committed = new_committed;
        true
    }

    /// The next chunk to open or prepare, from `region` if it has one (else the other): the
    /// lowest given back, else a never used one.
    fn fresh_chunk(&self, g: &mut ArenaInner, region: usize) -> Option<u32> {
        for r in [region, 1 - region] {
            let end = match r {
                HUGE => g.chunks.small_base,
                _ => self.chunk_count(),
            };
            let c = match g.returned[r].pop_first() {
                Some(c) => c,
                None => {
                    let c = g.chunks.next_new(r);
                    if c >= end {
                        continue;
                    }
                    c
                }
            };
            let last = c as usize * CHUNK_FRAMES + self.chunk_len(c);
            if !self.commit_to(g, last) {
                g.returned[r].insert(c);
                return None;
            }
            *g.chunk(c) = Chunk::IDLE;
            return Some(c);
        }
        None
    }

    /// Whether chunk `c`'s frames not yet handed out are resident: faulted in as a whole.
    fn tail_resident(g: &ArenaInner, c: u32) -> bool {
        g.chunks.get(c).populated || g.chunks.region(c) == HUGE
    }

    /// Opens a new chunk for carving (the previous open one's tail, too short for the run
    /// asked for, becomes a free run). Returns false if the address space is exhausted.
    fn open_chunk(&self, g: &mut ArenaInner) -> bool {
        // The first prepared chunk the prefault thread is not working on: done, or not
        // started (then taken back and faulted in here, outside the class lock).
        let pf = g.prefault.clone();
        let mut st = pf.state();
        let pick = g.prepared.iter().position(|&c| st.busy != Some(c));
        let next = match pick {
            Some(i) => {
                let c = g.prepared.remove(i).expect("in range");
                let queued = st.queue.iter().position(|&q| q == c);
                if let Some(q) = queued {
                    st.queue.remove(q);
                }
                drop(st);
                g.chunk(c).populated = queued.is_none();
                Some(c)
            }
            None => {
                drop(st);
                // Nothing prefaulted: a small-page chunk, faulted in as it is carved, unless
                // this pool has no prefault thread to give it huge pages, or it is the first
                // chunk and the policy wants that one huge.
                let region = if g.policy.prefault_chunks == 0
                    || (g.policy.huge_first_chunk && !g.prefault_armed)
                {
                    HUGE
                } else {
                    SMALL
                };
                self.fresh_chunk(g, region)
            }
        };
        let Some(c) = next else { return false };
        if let Some((o, cursor)) = g.open.take() {
            let end = o * CHUNK_FRAMES as u32 + self.chunk_len(o) as u32;
            let tail = (end - cursor) as usize;
            let now = self.now_ms();
            let resident = Self::tail_resident(g, o);
            let ch = g.chunk(o);
            ch.state = ChunkState::Carved;
            if tail > 0 {
                if resident {
                    ch.cached += tail as u16;
                    ch.last_free = now;
                    g.cached[tail].insert(cursor);
                    g.cached_pages += tail;
                    g.next_expiry = g
                        .next_expiry
                        .min(now.saturating_add(g.policy.free_page_decay_ms));
                } else {
                    g.discarded[tail].insert(cursor);
                }
            }
        }
        let ch = g.chunk(c);
        ch.state = ChunkState::Open;
        g.open = Some((c, c * CHUNK_FRAMES as u32));
        true
    }

    /// Carves `n` frames from the open chunk, if it has them.
    fn carve(&self, g: &mut ArenaInner, n: usize) -> Option<(u32, bool)> {
        let (c, cursor) = g.open?;
        let end = c * CHUNK_FRAMES as u32 + self.chunk_len(c) as u32;
        if (end - cursor) as usize >= n {
            g.open = Some((c, cursor + n as u32));
            g.chunk(c).used += n as u16;
            g.carved += n;
            let resident = g.chunks.get(c).populated;
            g.top = g.top.max((cursor as usize) + n);
            Some((cursor, resident))
        } else {
            None
        }
    }

    /// Keeps `prefault_chunks` chunks queued for (or done by) the prefault thread, once the
    /// pool has carved `PREFAULT_AFTER` frames.
    fn top_up_prefault(&self, g: &mut ArenaInner) {
        if cfg!(miri) || g.carved < PREFAULT_AFTER {
            return;
        }
        g.prefault_armed = true;
        let want = g.policy.prefault_chunks;
        let mut added = false;
        while g.prepared.len() < want {
            let Some(c) = self.fresh_chunk(g, HUGE) else {
                break;
            };
            let now = self.now_ms();
            let ch = g.chunk(c);
            ch.state = ChunkState::Prepared;
            ch.populated = true;
            ch.last_free = now;
            g.prepared.push_back(c);
            g.next_expiry = g
                .next_expiry
                .min(now.saturating_add(g.policy.free_page_decay_ms));
            g.prefault.state().queue.push_back(c);
            added = true;
        }
        if added {
            g.prefault.cv.notify_one();
            if g.prefault_thread.is_none() {
                let pf = g.prefault.clone();
                let base = self.base as usize;
                let frames = self.frames;
                g.prefault_thread = std::thread::Builder::new()
                    .name("zsmalloc-prefault".into())
                    .spawn(move || prefault_loop(&pf, base, frames))
                    .ok();
            }
        }
    }

    /// Takes a run of `n` (1..=16) contiguous frames; returns its first frame (see the module
    /// docs for the order). Memory that may not be resident is faulted in here, with no class
    /// lock held: faulting while building the zspage would hold the class lock for the clear.
    pub(crate) fn alloc_run(&self, n: usize) -> Option<u32> {
        debug_assert!((1..=MAX_CHAIN_SIZE).contains(&n));
        let mut out = Vec::new();
        let got = {
            let mut g = self.inner.lock();
            let now = self.now_ms();
            g.take_expired(now, &mut out);
            let mut got = g.take_cached(n).map(|f| (f, true));
            // The open chunk's tail before the holes given back, if it is resident; else the
            // holes first (both fault, and the holes keep memory packed).
            let tail_resident = g.open.is_some_and(|(c, _)| Self::tail_resident(&g, c));
            if got.is_none() && tail_resident {
                got = self.carve(&mut g, n);
            }
            if got.is_none() {
                got = g.take_discarded(n).map(|f| (f, false));
            }
            if got.is_none() && !tail_resident {
                got = self.carve(&mut g, n);
            }
            if got.is_none() && self.open_chunk(&mut g) {
                got = self.carve(&mut g, n);
                self.top_up_prefault(&mut g);
            } else if !g.prefault_armed && g.carved >= PREFAULT_AFTER {
                // The pool just reached the size that starts prefaulting.
                self.top_up_prefault(&mut g);
            }
            // A cached or discarded run may be a retired open chunk's tail, never carved; it
            // lies above the mark when the next chunk opened lower down (a prefaulted one from
            // the huge-page region below the small-page one).
            if let Some((f, _)) = got {
                g.top = g.top.max(f as usize + n);
            }
            got
        };
        self.release(out);
        let (first, resident) = match got {
            Some(x) => x,
            None => {
                // Address space exhausted: give the cached runs back (wholly free chunks become
                // reusable whole), then take a discarded run, a chunk, or split a longer run.
                self.trim();
                let mut g = self.inner.lock();
                let mut found = g.take_discarded(n);
                if found.is_none() && self.open_chunk(&mut g) {
                    found = self.carve(&mut g, n).map(|(f, _)| f);
                }
                if found.is_none() {
                    for m in n + 1..=MAX_CHAIN_SIZE {
                        if let Some(f) = g.discarded[m].pop_first() {
                            g.discarded[m - n].insert(f + n as u32);
                            g.chunk(ArenaInner::chunk_of(f)).used += n as u16;
                            found = Some(f);
                            break;
                        }
                    }
                }
                if let Some(f) = found {
                    g.top = g.top.max(f as usize + n);
                }
                (found?, false)
            }
        };
        if !resident {
            self.fault_in(first as usize, n);
        }
        Some(first)
    }

    /// Faults in frames `[first, first + n)`.
    fn fault_in(&self, first: usize, n: usize) {
        let start = first * PAGE_SIZE;
        if first / CHUNK_FRAMES < self.small_base as usize {
            // The first write faults in the whole 2 MiB page, which covers the next runs too
            // (a populate syscall per run would be wasted).
            for k in 0..n {
                // SAFETY: the frame is committed, inside the reservation, and ours alone; its
                // contents are unspecified until the zspage is built, so writing a zero byte
                // changes nothing anyone may rely on.
                unsafe { std::ptr::write_volatile(self.base.add(start + k * PAGE_SIZE), 0) };
            }
        } else {
            // One MADV_POPULATE_WRITE for the run saves the per-fault entry and exit (about
            // 10 % of a fault on the test VM).
            // SAFETY: the run is committed memory inside the reservation and now ours alone.
            unsafe { sys::populate(self.base, start, n * PAGE_SIZE) };
        }
    }

    /// Gives a run back: into the free-run cache (see the module docs), or straight back to
    /// the OS with decay 0; runs that expired or overflow the cache go back to the OS too.
    pub(crate) fn free_run(&self, first: u32, n: usize) {
        let mut out = Vec::new();
        {
            let mut g = self.inner.lock();
            debug_assert!(first as usize + n <= g.top);
            let c = ArenaInner::chunk_of(first);
            let policy = g.policy;
            let now = self.now_ms();
            let ch = g.chunk(c);
            ch.used -= n as u16;
            if policy.free_page_decay_ms == 0 || policy.max_cached_pages < n {
                if ch.used == 0 && ch.state == ChunkState::Carved && ch.cached == 0 {
                    // Nothing left in it: give the chunk back whole.
                    g.forget_runs(c);
                    g.chunk(c).state = ChunkState::Returning;
                    out.push(Release::Chunk(c));
                } else {
                    out.push(Release::Run(first, n));
                }
            } else {
                ch.cached += n as u16;
                ch.last_free = now;
                g.cached[n].insert(first);
                g.cached_pages += n;
                let expiry = now.saturating_add(policy.free_page_decay_ms);
                g.next_expiry = g.next_expiry.min(expiry);
                g.take_expired(now, &mut out);
                if g.cached_pages > policy.max_cached_pages {
                    // Hysteresis: drop to 3/4 of the bound so the next discards batch up.
                    let target = policy.max_cached_pages - policy.max_cached_pages / 4;
                    g.take_oldest(target, &mut out);
                }
            }
        }
        self.release(out);
    }

    /// Gives `out` (taken out of every list under the lock, so owned by the caller) back to the
    /// OS, merging contiguous ranges into one `madvise`, then lists it as reusable.
    ///
    /// A huge-page chunk that gives back runs while others are in use is advised
    /// `MADV_NOHUGEPAGE` first: the kernel's khugepaged collapses a 2 MiB range of a
    /// `MADV_HUGEPAGE` mapping into a huge page again when as few as one of its 512 pages is
    /// mapped (`max_ptes_none` 511 by default), refilling the chunk's free frames and undoing
    /// the discard. A pool under `uzswap run` limited to 13.8 MiB had 20-28 MiB resident in its
    /// mapping after a minute of churn, 6-12 MiB of it huge pages. The chunk gets its
    /// `MADV_HUGEPAGE` back when it goes back whole (its next use faults one huge page again).
    fn release(&self, out: Vec<Release>) {
        if out.is_empty() {
            return;
        }
        {
            // Under the lock, so that the advice given last is the one the flag says.
            let mut g = self.inner.lock();
            for r in &out {
                let c = match *r {
                    Release::Chunk(c) => c,
                    Release::Run(f, _) => ArenaInner::chunk_of(f),
                };
                if g.chunks.region(c) != HUGE {
                    continue;
                }
                let ch = g.chunk(c);
                let huge = match (*r, ch.thp_off) {
                    (Release::Run(..), false) => false,
                    (Release::Chunk(_), true) => true,
                    _ => continue,
                };
                ch.thp_off = !huge;
                // SAFETY: a whole chunk inside the reservation; only its flag changes.
                unsafe {
                    sys::advise(
                        self.base.add(c as usize * CHUNK_FRAMES * PAGE_SIZE),
                        self.chunk_len(c) * PAGE_SIZE,
                        huge,
                    )
                };
            }
        }
        let mut ranges: Vec<(usize, usize)> = out
            .iter()
            .map(|r| match *r {
                Release::Chunk(c) => (c as usize * CHUNK_FRAMES, self.chunk_len(c)),
                Release::Run(f, n) => (f as usize, n),
            })
            .collect();
        ranges.sort_unstable();
        let mut i = 0;
        while i < ranges.len() {
            let start = ranges[i].0;
            let mut end = start + ranges[i].1;
            let mut j = i + 1;
            while j < ranges.len() && ranges[j].0 == end {
                end += ranges[j].1;
                j += 1;
            }
            // SAFETY: the frames were handed out by `alloc_run` or prepared, so they are
            // committed memory inside the reservation, and we own them exclusively (they are
            // in no list, and no reader can hold a reference into a freed zspage: its objects
            // were all freed).
            unsafe { sys::discard(self.base, start * PAGE_SIZE, (end - start) * PAGE_SIZE) };
            i = j;
        }
        let mut g = self.inner.lock();
        for r in out {
            match r {
                Release::Chunk(c) => {
                    *g.chunk(c) = Chunk::IDLE;
                    let r = g.chunks.region(c);
                    g.returned[r].insert(c);
                }
                Release::Run(f, n) => {
                    g.discarded[n].insert(f);
                }
            }
        }
    }

    /// CPU time (ns) the prefault threads have used (0 without one).
    pub(crate) fn prefault_thread_cpu_ns(&self) -> u64 {
        let g = self.inner.lock();
        g.prefault_parked_cpu_ns + g.prefault_thread.as_ref().map_or(0, thread_cpu_ns)
    }

    /// Stops the prefault thread and waits for it to end (see [`crate::Pool::park_threads`]);
    /// queued chunks stay queued for [`Arena::unpark_prefault`]'s new thread. The arena's
    /// lock is held across the join, so no allocation starts a thread meanwhile: the thread
    /// never takes that lock, and it stops after the chunk it is faulting in.
    pub(crate) fn park_prefault(&self) {
        let mut g = self.inner.lock();
        let Some(t) = g.prefault_thread.take() else {
            return;
        };
        g.prefault_parked_cpu_ns += thread_cpu_ns(&t);
        g.prefault.state().stop = true;
        g.prefault.cv.notify_all();
        let _ = t.join();
        g.prefault.state().stop = false;
    }

    /// Starts a prefault thread again (from the calling thread, whose credentials it takes)
    /// if chunks wait in the queue; later ones start as usual, with the next chunk queued.
    pub(crate) fn unpark_prefault(&self) {
        let mut g = self.inner.lock();
        if g.prefault_thread.is_some() || g.prefault.state().queue.is_empty() {
            return;
        }
        let pf = g.prefault.clone();
        let (base, frames) = (self.base as usize, self.frames);
        g.prefault_thread = std::thread::Builder::new()
            .name("zsmalloc-prefault".into())
            .spawn(move || prefault_loop(&pf, base, frames))
            .ok();
    }

    /// Returns the cached pages whose decay time has passed to the OS; returns how many.
    pub(crate) fn purge_expired(&self) -> usize {
        let mut out = Vec::new();
        let released = {
            let mut g = self.inner.lock();
            let before = g.cached_pages;
            let now = self.now_ms();
            g.take_expired(now, &mut out);
            before - g.cached_pages
        };
        self.release(out);
        released
    }

    /// Returns every cached page to the OS (and the prefaulted chunks); returns how many
    /// cached pages that was.
    pub(crate) fn trim(&self) -> usize {
        let mut out = Vec::new();
        let pages = {
            let mut g = self.inner.lock();
            let pages = g.take_all(&mut out);
            let mut keep = VecDeque::new();
            while let Some(c) = g.prepared.pop_front() {
                if !g.unprepare(c, &mut out) {
                    keep.push_back(c);
                }
            }
            g.prepared = keep;
            if g.prepared.is_empty() {
                g.next_expiry = u64::MAX;
            }
            pages
        };
        self.release(out);
        pages
    }

    /// Pages held resident by the free-run cache (freed zspages kept for reuse).
    pub(crate) fn cached_pages(&self) -> usize {
        self.inner.lock().cached_pages
    }

    /// Resident pages holding no zspage beyond the cached ones: the open chunk's uncarved tail
    /// when the chunk was faulted in whole (a huge page), and the prefaulted chunks. The
    /// pool's RSS is about `total_pages + cached_pages + slack_pages`.
    #[allow(dead_code)] // exposed by the pool once its module split lands
    pub(crate) fn slack_pages(&self) -> usize {
        let g = self.inner.lock();
        let open = g.open.map_or(0, |(c, cursor)| {
            if Self::tail_resident(&g, c) {
                c as usize * CHUNK_FRAMES + self.chunk_len(c) - cursor as usize
            } else {
                0
            }
        });
        open + g.prepared.iter().map(|&c| self.chunk_len(c)).sum::<usize>()
    }

    /// Frames ever handed out (the high-water mark).
    pub(crate) fn top_frames(&self) -> usize {
        self.inner.lock().top
    }

    /// Asks the CPU to bring the cache lines of `[off, off+len)` in (a hint: no memory is
    /// read, nothing faults, and an offset outside the arena is simply ignored). Safe for any
    /// offset: readers may pass a location read without the object's lock.
    #[inline]
    pub(crate) fn prefetch(&self, off: usize, len: usize) {
        if off.saturating_add(len) > self.frames * PAGE_SIZE {
            return;
        }
        let mut line = 0;
        while line < len {
            prefetch_line(self.base.wrapping_add(off + line));
            line += 64;
        }
    }

    /// The address of frame 0 (tests compare object addresses with offsets).
    #[cfg(test)]
    pub(crate) fn base_addr(&self) -> usize {
        self.base as usize
    }

    /// Borrows `len` bytes at byte offset `off`.
    ///
    /// # Safety
    /// `[off, off+len)` must lie in a run currently handed out, and no thread may write these
    /// bytes while the returned slice lives (the pool's handle-state protocol: a reader count
    /// excludes writers, movers and frees of that object).
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        debug_assert!(off + len <= self.frames * PAGE_SIZE);
        // SAFETY: in bounds of the live mapping (caller contract), and the caller guarantees
        // no concurrent writes for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
    }

    /// Borrows `len` bytes at byte offset `off` for an optimistic read: other threads may
    /// write them while the slice lives (a seqlock read; the reader validates afterwards and
    /// discards what it read if anything changed).
    ///
    /// # Safety
    /// `[off, off+len)` must lie in the reservation. The caller must not trust the contents,
    /// nor rely on them staying the same between two reads, until it has validated them.
    pub(crate) unsafe fn racy_bytes(&self, off: usize, len: usize) -> &[u8] {
        debug_assert!(off + len <= self.frames * PAGE_SIZE);
        // SAFETY: in bounds of the mapping, which stays mapped read-write (or, under Miri,
        // allocated) for the arena's lifetime; see the caller contract for the contents.
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
    }

    /// Copies `data` to byte offset `off`.
    ///
    /// # Safety
    /// The destination must lie in a run currently handed out, and the caller must have
    /// exclusive access to those bytes (no concurrent reader or writer).
    pub(crate) unsafe fn write(&self, off: usize, data: &[u8]) {
        debug_assert!(off + data.len() <= self.frames * PAGE_SIZE);
        // SAFETY: in bounds (caller contract); `data` cannot overlap the arena range being
        // written because the caller holds exclusive access to it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(off), data.len()) }
    }

    /// Copies `len` bytes from offset `src` to offset `dst` (non-overlapping slots).
    ///
    /// # Safety
    /// Both ranges must lie in runs currently handed out and not overlap; no other thread may
    /// write the source or access the destination during the copy.
    pub(crate) unsafe fn copy(&self, src: usize, dst: usize, len: usize) {
        debug_assert!(src + len <= dst || dst + len <= src);
        // SAFETY: in bounds and disjoint (caller contract); exclusive access per caller.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(src), self.base.add(dst), len) }
    }

    /// Reads the 8-byte slot header at `off` (8-byte aligned).
    ///
    /// # Safety
    /// `off` must be 8-byte aligned inside a run currently handed out; headers are only
    /// accessed under their class lock.
    pub(crate) unsafe fn read_header(&self, off: usize) -> u64 {
        debug_assert!(off % 8 == 0);
        // SAFETY: aligned, in bounds, and serialized by the class lock (caller contract).
        unsafe { (self.base.add(off) as *const u64).read() }
    }

    /// Writes the 8-byte slot header at `off` (8-byte aligned).
    ///
    /// # Safety
    /// As for [`Self::read_header`].
    pub(crate) unsafe fn write_header(&self, off: usize, v: u64) {
        debug_assert!(off % 8 == 0);
        // SAFETY: aligned, in bounds, and serialized by the class lock (caller contract).
        unsafe { (self.base.add(off) as *mut u64).write(v) }
    }
}

/// Frames a new arena may reserve under the process's address-space limit (RLIMIT_AS): half
/// of what the limit leaves; `None` without a limit.
pub(crate) fn address_room_frames() -> Option<usize> {
    sys::address_room(0).map(|b| b / PAGE_SIZE)
}

/// Half the room the process's address-space and data limits (RLIMIT_AS, RLIMIT_DATA) leave,
/// in bytes, counting `ours` bytes of what is mapped now as free (a reservation about to be
/// given back); `None` without either limit. A reservation costs no memory but counts against
/// both, so one sized by this leaves the process's own mappings the other half (what this
/// crate's pools do, and `uzswap run`'s heap).
pub fn address_room(ours: usize) -> Option<usize> {
    sys::address_room(ours)
}

/// The prefault thread: faults in the queued chunks one at a time, with no lock held while it
/// does. It writes one byte per page, so it must only ever touch chunks no zspage uses: the
/// arena never hands out the chunk it is busy with (`open_chunk`), waits for it before giving
/// it back (`unprepare`) and joins the thread before unmapping. Plain faults, unlike
/// `MADV_POPULATE_WRITE`, do not hold the address space's lock: a fault that waits for the
/// hypervisor does not stall the pool's users' `mmap`s and `mprotect`s (malloc's).
fn prefault_loop(pf: &Prefault, base: usize, frames: usize) {
    loop {
        let c = {
            let mut st = pf.state();
            st.busy = None;
            loop {
                if st.stop {
                    return;
                }
                if let Some(c) = st.queue.pop_front() {
                    st.busy = Some(c);
                    break c;
                }
                st = pf
                    .cv
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let start = c as usize * CHUNK_FRAMES;
        let len = CHUNK_FRAMES.min(frames - start);
        for k in start..start + len {
            // SAFETY: the frame is committed memory inside the reservation (committed before
            // the chunk was queued) that no zspage uses while the chunk is this thread's (see
            // above); its contents are unspecified until a run of it is handed out.
            unsafe { std::ptr::write_volatile((base as *mut u8).add(k * PAGE_SIZE), 0) };
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let g = self.inner.get_mut();
        g.prefault.state().stop = true;
        g.prefault.cv.notify_all();
        if let Some(t) = g.prefault_thread.take() {
            let _ = t.join();
        }
        // SAFETY: `map_base` came from `sys::reserve` with this length, and `&mut self` proves
        // no borrow of the arena's bytes is alive (and the prefault thread is gone).
        unsafe { sys::release(self.map_base, self.map_len) }
    }
}

#[cfg(not(miri))]
mod sys {
    use crate::Error;

    /// Transparent huge pages can back a `MADV_HUGEPAGE` range: the kernel's THP mode is
    /// `always` or `madvise` (not `never`, and the kernel has THP at all).
    pub(super) fn thp_available() -> bool {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// Half the room RLIMIT_AS and RLIMIT_DATA leave (bytes), `None` without either: a
    /// reservation counts against both although it costs no memory, so a pool takes at most
    /// half of what is left and the process's own mappings keep the rest.
    pub(super) fn address_room(ours: usize) -> Option<usize> {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
                .map_or(0, |k| k << 10)
        };
        // RLIMIT_DATA counts private writable mappings: the reservation is one.
        [
            (libc::RLIMIT_AS, kib("VmSize:")),
            (libc::RLIMIT_DATA, kib("VmData:")),
        ]
        .into_iter()
        .filter_map(|(res, used)| {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: a valid out-parameter.
            if unsafe { libc::getrlimit(res, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY
            {
                return None;
            }
            let limit = usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX);
            Some(limit.saturating_sub(used.saturating_sub(ours)) / 2)
        })
        .min()
    }

    /// MAP_NORESERVE is honoured: the kernel's overcommit mode is not 2 (strict).
    pub(super) fn overcommit_allowed() -> bool {
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|s| s.trim() != "2")
    }

    pub(super) fn reserve(len: usize, writable: bool) -> Result<*mut u8, Error> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page != crate::PAGE_SIZE as libc::c_long {
            // Frames are 4 KiB; madvise/mprotect need them to be whole OS pages.
            return Err(Error::ArenaInit(libc::EINVAL));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_NONE
        };
        // SAFETY: an anonymous mapping at a kernel-chosen address cannot alias any Rust-managed
        // memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::ArenaInit(errno()));
        }
        Ok(p as *mut u8)
    }

    /// # Safety
    /// `[start, start+len)` must be inside the reservation at `base`.
    pub(super) unsafe fn commit(base: *mut u8, start: usize, len: usize) -> Result<(), Error> {
        // SAFETY: the range is inside our own reservation (caller contract); making it
        // read-write does not affect any other memory.
        let r = unsafe {
            libc::mprotect(
                base.add(start).cast(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if r != 0 {
            return Err(Error::OutOfMemory);
        }
        Ok(())
    }

    /// # Safety
    /// The range must be inside the reservation and not borrowed by anyone.
    pub(super) unsafe fn discard(base: *mut u8, start: usize, len: usize) {
        // SAFETY: private anonymous memory of ours that nobody references; after
        // MADV_DONTNEED it reads back as zeros, which is fine for free frames.
        let r = unsafe { libc::madvise(base.add(start).cast(), len, libc::MADV_DONTNEED) };
        debug_assert_eq!(r, 0, "madvise(MADV_DONTNEED) failed");
    }

    /// Marks the range for huge pages or against them.
    ///
    /// # Safety
    /// The range must be inside a reservation of ours.
    pub(super) unsafe fn advise(base: *mut u8, len: usize, huge: bool) {
        if len == 0 {
            return;
        }
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: only sets a flag on our own mapping; failure (THP disabled) is harmless.
        let _ = unsafe { libc::madvise(base.cast(), len, advice) };
    }

    /// Maps the huge page at `start` (if one maps it) with 4 KiB entries, by changing the
    /// protection of its first page and back.
    ///
    /// # Safety
    /// The page at `start` must be committed (read-write) and inside the reservation.
    pub(super) unsafe fn split_huge_mapping(base: *mut u8, start: usize) {
        // SAFETY: our own committed page; it is read-write again when this returns, and its
        // contents are untouched. Failure leaves the mapping as it was (only the count of
        // shared pages is then less exact).
        unsafe {
            let p = base.add(start).cast();
            libc::mprotect(p, crate::PAGE_SIZE, libc::PROT_READ);
            libc::mprotect(p, crate::PAGE_SIZE, libc::PROT_READ | libc::PROT_WRITE);
        }
    }

    /// # Safety
    /// The range must be committed, inside the reservation, and not borrowed by anyone.
    pub(super) unsafe fn populate(base: *mut u8, start: usize, len: usize) {
        // SAFETY: prefaulting writable private memory of ours does not change its contents
        // (fresh or discarded pages read as zeros either way). Failure (kernels before 5.14)
        // only means the pages fault in on first touch instead.
        let _ = unsafe { libc::madvise(base.add(start).cast(), len, libc::MADV_POPULATE_WRITE) };
    }

    /// # Safety
    /// `base`/`len` must be exactly a reservation from `reserve`, no longer borrowed.
    pub(super) unsafe fn release(base: *mut u8, len: usize) {
        // SAFETY: caller contract: the mapping is ours and unused.
        unsafe { libc::munmap(base.cast(), len) };
    }
}

#[cfg(miri)]
mod sys {
    use std::alloc::{alloc_zeroed, dealloc, Layout};

    use crate::{Error, PAGE_SIZE};

    /// The heap stand-in has no huge pages.
    pub(super) fn thp_available() -> bool {
        false
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, PAGE_SIZE).expect("arena layout")
    }

    /// No address-space limit under Miri.
    pub(super) fn address_room(_ours: usize) -> Option<usize> {
        None
    }

    /// The heap stand-in is always read-write.
    pub(super) fn overcommit_allowed() -> bool {
        true
    }

    pub(super) fn reserve(len: usize, _writable: bool) -> Result<*mut u8, Error> {
        // SAFETY: the layout has non-zero size (frames > 0).
        let p = unsafe { alloc_zeroed(layout(len)) };
        if p.is_null() {
            return Err(Error::ArenaInit(0));
        }
        Ok(p)
    }

    /// # Safety
    /// Nothing to do: the heap stand-in is always read-write.
    pub(super) unsafe fn commit(_base: *mut u8, _start: usize, _len: usize) -> Result<(), Error> {
        Ok(())
    }

    /// # Safety
    /// The range must be inside the allocation and not borrowed by anyone.
    pub(super) unsafe fn discard(base: *mut u8, start: usize, len: usize) {
        // SAFETY: in bounds and unborrowed (caller contract); zeroing mimics MADV_DONTNEED.
        unsafe { std::ptr::write_bytes(base.add(start), 0, len) }
    }

    /// # Safety
    /// Nothing to do: the heap stand-in has no huge pages.
    pub(super) unsafe fn advise(_base: *mut u8, _len: usize, _huge: bool) {}

    /// # Safety
    /// Nothing to do: the heap stand-in has no huge pages.
    pub(super) unsafe fn split_huge_mapping(_base: *mut u8, _start: usize) {}

    /// # Safety
    /// Nothing to do: the heap stand-in is always resident.
    pub(super) unsafe fn populate(_base: *mut u8, _start: usize, _len: usize) {}

    /// # Safety
    /// `base`/`len` must be exactly an allocation from `reserve`.
    pub(super) unsafe fn release(base: *mut u8, len: usize) {
        // SAFETY: allocated in `reserve` with the same layout.
        unsafe { dealloc(base, layout(len)) }
    }
}

/// CPU time (ns) the thread of `handle` has used so far; 0 if the system can't tell (the
/// thread has ended, or under Miri).
pub fn thread_cpu_ns(handle: &std::thread::JoinHandle<()>) -> u64 {
    #[cfg(not(miri))]
    {
        use std::os::unix::thread::JoinHandleExt;
        let mut clock: libc::clockid_t = 0;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a thread of ours that has not been joined (its handle is borrowed), and
        // out-parameters we own.
        let ok = unsafe {
            libc::pthread_getcpuclockid(handle.as_pthread_t(), &mut clock) == 0
                && libc::clock_gettime(clock, &mut ts) == 0
        };
        if ok {
            return ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        }
    }
    let _ = handle;
    0
}

/// A read prefetch of the cache line holding `p` into all cache levels. A hint only: it has no
/// architectural effect and never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: PREFETCHT0 is part of SSE (baseline on x86_64), reads no memory architecturally
    // and cannot fault, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_run_reuses_freed_runs_of_the_same_length() {
        let a = Arena::new(64).unwrap();
        let r1 = a.alloc_run(3).unwrap();
        let r2 = a.alloc_run(3).unwrap();
        assert_ne!(r1, r2);
        a.free_run(r1, 3);
        assert_eq!(a.cached_pages(), 3);
        assert_eq!(a.alloc_run(3), Some(r1));
        assert_eq!(a.cached_pages(), 0);
    }

    /// The ranges a fork child reads the pagemap over: every frame of a run handed out is
    /// in them, no frame of a freed run kept resident is, and they stay within the chunks
    /// used (a huge-page arena's small-page chunks start half the reservation away: the
    /// untouched address space between is left out), in both regions.
    #[test]
    fn zspage_ranges_cover_the_runs_handed_out_and_no_cached_one() {
        for huge in [false, true] {
            // With prefaulting, a huge-page arena's first chunk is a small-page one.
            let policy = MemoryPolicy {
                transparent_huge_pages: huge,
                prefault_chunks: huge as usize,
                ..MemoryPolicy::default()
            };
            let a = Arena::with_policy(64 * CHUNK_FRAMES, policy).unwrap();
            let lens = [1usize, 2, 3, 4, 5, 8, 16];
            let runs: Vec<(u32, usize)> = (0..900)
                .map(|k| {
                    let n = lens[k % lens.len()];
                    (a.alloc_run(n).unwrap(), n)
                })
                .collect();
            let (freed, live): (Vec<_>, Vec<_>) =
                runs.iter().enumerate().partition(|(k, _)| k % 3 == 1);
            for (_, &(f, n)) in &freed {
                a.free_run(f, n);
            }
            assert!(a.cached_pages() > 0);
            let ranges = a.zspage_ranges();
            let base = a.base as usize;
            let covered = |frame: usize| {
                let addr = base + frame * PAGE_SIZE;
                ranges
                    .iter()
                    .any(|&(s, n)| addr >= s && addr < s + n * PAGE_SIZE)
            };
            for (_, &(f, n)) in &live {
                assert!(
                    (f as usize..f as usize + n).all(covered),
                    "live run {f}+{n}"
                );
            }
            let g = a.inner.lock();
            for (n, set) in g.cached.iter().enumerate() {
                for &f in set {
                    assert!(
                        !(f as usize..f as usize + n).any(covered),
                        "cached run {f}+{n}"
                    );
                }
            }
            let used = (g.chunks.huge.len() + g.chunks.small.len()) * CHUNK_FRAMES;
            if huge && a.small_base > 0 {
                assert!(!g.chunks.huge.is_empty() && !g.chunks.small.is_empty());
            }
            drop(g);
            let total: usize = ranges.iter().map(|r| r.1).sum();
            assert!(
                total <= used,
                "{total} pages in ranges, {used} in the chunks used"
            );
            assert!(ranges
                .windows(2)
                .all(|w| w[0].0 + w[0].1 * PAGE_SIZE <= w[1].0));
        }
    }

    #[test]
    fn reuse_takes_the_lowest_address_first() {
        let a = Arena::new(4096).unwrap();
        let runs: Vec<u32> = (0..200).map(|_| a.alloc_run(4).unwrap()).collect();
        // Runs 0..128 fill chunk 0, the rest are in chunk 1.
        assert_eq!(runs[128], CHUNK_FRAMES as u32);
        a.free_run(runs[150], 4);
        a.free_run(runs[3], 4);
        a.free_run(runs[140], 4);
        assert_eq!(a.alloc_run(4), Some(runs[3]));
        assert_eq!(a.alloc_run(4), Some(runs[140]));
        assert_eq!(a.alloc_run(4), Some(runs[150]));
    }

    #[test]
    fn cache_is_bounded() {
        let a = Arena::new(4096).unwrap();
        a.set_policy(MemoryPolicy {
            max_cached_pages: 128,
            ..MemoryPolicy::default()
        });
        let runs: Vec<u32> = (0..100).map(|_| a.alloc_run(8).unwrap()).collect();
        for (k, r) in runs.into_iter().enumerate() {
            a.free_run(r, 8);
            assert!(a.cached_pages() <= 128, "after {k} frees");
        }
        assert!(a.cached_pages() > 0);
        let cached = a.cached_pages();
        assert_eq!(a.trim(), cached);
        assert_eq!(a.cached_pages(), 0);
    }

    #[test]
    fn a_wholly_free_chunk_goes_back_whole_and_is_reused_whole() {
        let a = Arena::with_policy(2048, MemoryPolicy::immediate()).unwrap();
        let runs: Vec<u32> = (0..256).map(|_| a.alloc_run(4).unwrap()).collect();
        // Two chunks carved; the second is the open one.
        assert_eq!(a.inner.lock().open.map(|o| o.0), Some(1));
        for &r in &runs[..128] {
            a.free_run(r, 4);
        }
        {
            let g = a.inner.lock();
            assert!(g.returned[SMALL].contains(&0), "chunk 0 given back whole");
            assert!((1..=MAX_CHAIN_SIZE).all(|n| g.discarded[n].range(0..512).next().is_none()));
        }
        // The open chunk is full: the next run opens the lowest returned chunk.
        assert_eq!(a.alloc_run(16), Some(0));
    }

    #[test]
    fn decay_zero_returns_at_once() {
        let a = Arena::with_policy(64, MemoryPolicy::immediate()).unwrap();
        let r = a.alloc_run(4).unwrap();
        a.free_run(r, 4);
        assert_eq!(a.cached_pages(), 0);
        assert_eq!(a.alloc_run(4), Some(r));
    }

    #[test]
    fn expired_runs_are_purged() {
        // Miri runs the steps in between a hundred times slower.
        let decay = if cfg!(miri) { 5000 } else { 20 };
        let a = Arena::with_policy(
            256,
            MemoryPolicy {
                free_page_decay_ms: decay,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        let r: Vec<u32> = (0..4).map(|_| a.alloc_run(2).unwrap()).collect();
        a.free_run(r[0], 2);
        a.free_run(r[1], 2);
        assert_eq!(a.purge_expired(), 0);
        assert_eq!(a.cached_pages(), 4);
        std::thread::sleep(std::time::Duration::from_millis(decay + 10));
        assert_eq!(a.purge_expired(), 4);
        assert_eq!(a.cached_pages(), 0);
        // A freed run restarts its chunk's clock.
        a.free_run(r[2], 2);
        assert_eq!(a.purge_expired(), 0);
        assert_eq!(a.cached_pages(), 2);
    }

    #[test]
    fn alloc_run_splits_longer_runs_when_exhausted() {
        let a = Arena::new(16).unwrap();
        let r = a.alloc_run(16).unwrap();
        assert_eq!(a.alloc_run(1), None);
        a.free_run(r, 16);
        assert_eq!(a.cached_pages(), 16);
        assert_eq!(a.alloc_run(4), Some(r));
        assert_eq!(a.alloc_run(12), Some(r + 4));
        assert_eq!(a.alloc_run(1), None);
    }

    #[test]
    fn a_chunk_tail_too_short_becomes_a_free_run() {
        // 512 frames = 34 runs of 15 (510 frames) and a tail of 2.
        let a = Arena::new(2048).unwrap();
        let runs: Vec<u32> = (0..35).map(|_| a.alloc_run(15).unwrap()).collect();
        assert_eq!(runs[34], CHUNK_FRAMES as u32, "the 35th opens chunk 1");
        assert_eq!(a.alloc_run(2), Some(510), "the tail of chunk 0");
    }

    #[test]
    fn every_run_handed_out_lies_below_the_high_water_mark() {
        // Prefaulted huge-page chunks lie below the small-page region, so a small chunk's
        // tail, retired when a prefaulted chunk opens, lies above every frame carved since;
        // handing it out from the free runs must still raise the mark.
        let policy = MemoryPolicy {
            transparent_huge_pages: true,
            prefault_chunks: 2,
            ..MemoryPolicy::default()
        };
        let a = Arena::with_policy(if cfg!(miri) { 1024 } else { 8192 }, policy).unwrap();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut live: Vec<(u32, usize)> = Vec::new();
        for _ in 0..if cfg!(miri) { 300 } else { 20_000 } {
            if live.is_empty() || next() % 3 != 0 {
                let n = 1 + (next() % 16) as usize;
                let Some(f) = a.alloc_run(n) else {
                    continue;
                };
                assert!(
                    f as usize + n <= a.top_frames(),
                    "run {f}+{n} above the mark"
                );
                live.push((f, n));
            } else {
                let (f, n) = live.swap_remove((next() % live.len() as u64) as usize);
                a.free_run(f, n);
            }
        }
        for (f, n) in live {
            a.free_run(f, n);
        }
    }

    #[test]
    fn freed_run_reads_back_as_zeros() {
        let a = Arena::new(8).unwrap();
        let r = a.alloc_run(2).unwrap() as usize;
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(r * PAGE_SIZE + 100, &[7u8; 5000]) };
        a.free_run(r as u32, 2);
        assert_eq!(a.trim(), 2);
        assert_eq!(a.cached_pages(), 0);
        let again = a.alloc_run(2).unwrap() as usize;
        assert_eq!(again, r);
        // SAFETY: as above.
        let b = unsafe { a.bytes(r * PAGE_SIZE, 2 * PAGE_SIZE) };
        assert!(b.iter().all(|&x| x == 0));
    }

    #[test]
    fn huge_page_arena_is_aligned() {
        let a = Arena::with_policy(
            1024,
            MemoryPolicy {
                transparent_huge_pages: true,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        if !cfg!(miri) {
            assert_eq!(a.base as usize % (CHUNK_FRAMES * PAGE_SIZE), 0);
        }
        let r = a.alloc_run(4).unwrap() as usize;
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(r * PAGE_SIZE, &[1u8; 4 * PAGE_SIZE]) };
        a.free_run(r as u32, 4);
        assert_eq!(a.trim(), 4);
    }

    /// Waits until the prefault thread has faulted in every chunk queued for it: the tests
    /// below check which chunk is opened next, and a chunk the thread is still working on is
    /// passed over (another one is opened at once).
    fn wait_for_prefault(a: &Arena) {
        let pf = a.inner.lock().prefault.clone();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            {
                let st = pf.state();
                if st.queue.is_empty() && st.busy.is_none() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the prefault thread never caught up"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn prefaulted_chunks_are_used_and_returned() {
        let a = Arena::with_policy(
            8192,
            MemoryPolicy {
                prefault_chunks: 2,
                free_page_decay_ms: 50,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        let first = a.alloc_run(8).unwrap();
        assert_eq!(first, 0);
        if cfg!(miri) {
            return;
        }
        // A pool this small (a short-lived process's, say) prefaults nothing.
        assert_eq!(a.slack_pages(), 0);
        assert!(a.inner.lock().prefault_thread.is_none());
        // Half a chunk carved: chunks 1 and 2 are prefaulted while the rest of chunk 0 is.
        let mut runs: Vec<u32> = (0..31).map(|_| a.alloc_run(8).unwrap()).collect();
        assert_eq!(a.slack_pages(), 2 * CHUNK_FRAMES);
        wait_for_prefault(&a);
        runs.extend((0..33).map(|_| a.alloc_run(8).unwrap()));
        assert_eq!(
            runs[63], CHUNK_FRAMES as u32,
            "the prefaulted chunk 1 is opened next"
        );
        assert_eq!(a.inner.lock().prepared.len(), 2, "and one more is queued");
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(runs[63] as usize * PAGE_SIZE, &[3u8; 8 * PAGE_SIZE]) };
        // A pool that stops growing gives its prefaulted chunks back after the decay time.
        std::thread::sleep(std::time::Duration::from_millis(80));
        a.purge_expired();
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while !a.inner.lock().prepared.is_empty() {
            assert!(
                Instant::now() < deadline,
                "prefaulted chunks never returned"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
            a.purge_expired();
        }
        assert_eq!(a.trim(), 0);
    }

    #[test]
    fn a_huge_first_chunk_is_one_huge_page_and_later_ones_come_prefaulted() {
        let a = Arena::with_policy(
            8 * CHUNK_FRAMES,
            MemoryPolicy {
                transparent_huge_pages: true,
                prefault_chunks: 1,
                huge_first_chunk: true,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        let small_base = a.small_base;
        let first = a.alloc_run(4).unwrap();
        // From the huge-page region (when THP is available at all), its tail resident.
        assert_eq!(first / (CHUNK_FRAMES as u32) < small_base, small_base > 0);
        if cfg!(miri) {
            return;
        }
        let huge = small_base > 0;
        assert_eq!(a.slack_pages(), if huge { CHUNK_FRAMES - 4 } else { 0 });
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(first as usize * PAGE_SIZE, &[5u8; 4 * PAGE_SIZE]) };
        let mut runs: Vec<u32> = (0..127).map(|_| a.alloc_run(4).unwrap()).collect();
        // The first chunk carved whole: prefaulting started halfway through it, and the chunk
        // opened next is the prefaulted one, not another faulted in at once.
        let prepared = a.inner.lock().prepared[0];
        wait_for_prefault(&a);
        runs.push(a.alloc_run(4).unwrap());
        assert_eq!(runs[127], prepared * CHUNK_FRAMES as u32);
        for r in runs.into_iter().chain([first]) {
            a.free_run(r, 4);
        }
        let cached = a.cached_pages();
        assert_eq!(a.trim(), cached);
    }

    #[test]
    fn huge_pages_come_from_the_prefault_thread_small_ones_on_demand() {
        let a = Arena::with_policy(
            8 * CHUNK_FRAMES,
            MemoryPolicy {
                transparent_huge_pages: true,
                prefault_chunks: 1,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        let small_base = a.small_base;
        // Nothing prefaulted yet: the first chunk is a small-page one, faulted in as carved.
        let first = a.alloc_run(4).unwrap();
        assert_eq!(first / CHUNK_FRAMES as u32, small_base);
        if cfg!(miri) {
            return;
        }
        assert!(
            a.inner.lock().prepared.is_empty(),
            "a small pool prefaults nothing"
        );
        let mut runs: Vec<u32> = (0..63).map(|_| a.alloc_run(4).unwrap()).collect();
        // Half a chunk carved: the prefault thread gets a huge-page chunk (if THP is available
        // at all).
        let prepared = a.inner.lock().prepared[0];
        assert_eq!(prepared < small_base, small_base > 0);
        // Once the open chunk is full, the prefaulted one is opened.
        wait_for_prefault(&a);
        runs.extend((0..65).map(|_| a.alloc_run(4).unwrap()));
        assert_eq!(runs[127], prepared * CHUNK_FRAMES as u32);
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(runs[127] as usize * PAGE_SIZE, &[9u8; 4 * PAGE_SIZE]) };
        for r in runs.into_iter().chain([first]) {
            a.free_run(r, 4);
            assert!(a.cached_pages() <= DEFAULT_MAX_CACHED_PAGES);
        }
        let cached = a.cached_pages();
        assert_eq!(a.trim(), cached);
        assert_eq!(a.cached_pages(), 0);
    }
    /// Whether the mapping holding `addr` carries `MADV_NOHUGEPAGE` ("nh" in its VmFlags).
    fn no_huge_pages_at(addr: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = lo <= addr && addr < hi;
                        continue;
                    }
                }
            }
            if inside && line.starts_with("VmFlags:") {
                return line.split_whitespace().any(|f| f == "nh");
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// A huge-page chunk that gives runs back while others are in use is kept from
    /// khugepaged, which would collapse it into a huge page again and refill the frames just
    /// given back (`MADV_COLLAPSE` stands in for it here: it collapses at once, where
    /// khugepaged takes its time); the chunk gets its huge pages back when it goes back whole.
    #[test]
    fn a_partly_returned_huge_chunk_is_not_collapsed_again() {
        let a = Arena::with_policy(
            8 * CHUNK_FRAMES,
            MemoryPolicy {
                transparent_huge_pages: true,
                huge_first_chunk: true,
                free_page_decay_ms: 0,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        if cfg!(miri) || a.small_base == 0 {
            println!("SKIPPED: no transparent huge pages here");
            return;
        }
        let runs: Vec<u32> = (0..128).map(|_| a.alloc_run(4).unwrap()).collect();
        assert!(runs.iter().all(|&r| (r as usize) < CHUNK_FRAMES));
        // The first chunk carved whole and closed: the next run opens another.
        assert!(a.alloc_run(4).unwrap() as usize >= CHUNK_FRAMES);
        for &r in &runs {
            // SAFETY: the runs are ours alone in this test.
            unsafe { a.write(r as usize * PAGE_SIZE, &[7u8; 4 * PAGE_SIZE]) };
        }
        let chunk = a.base as usize;
        assert!(!no_huge_pages_at(chunk));
        for &r in runs.iter().skip(1).step_by(2) {
            a.free_run(r, 4);
        }
        assert!(no_huge_pages_at(chunk));
        // MADV_COLLAPSE (Linux 6.1): refused for a mapping advised against huge pages.
        // SAFETY: advice on our own mapping; a collapse would change no byte of it.
        let r = unsafe { libc::madvise(chunk as *mut libc::c_void, CHUNK_FRAMES * PAGE_SIZE, 25) };
        assert_ne!(r, 0, "the partly returned chunk was collapsed");
        let mut vec = vec![0u8; CHUNK_FRAMES];
        // SAFETY: the kernel writes one byte per page of the chunk into `vec`.
        let r = unsafe {
            libc::mincore(
                chunk as *mut libc::c_void,
                CHUNK_FRAMES * PAGE_SIZE,
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0);
        let resident = vec.iter().filter(|&&v| v & 1 != 0).count();
        assert_eq!(resident, CHUNK_FRAMES / 2, "frames given back came back");
        for &r in runs.iter().step_by(2) {
            a.free_run(r, 4);
        }
        assert!(
            !no_huge_pages_at(chunk),
            "a chunk gone back whole gets huge pages again"
        );
    }
}
