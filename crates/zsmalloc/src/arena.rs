//! The zspage arena: real OS pages for zspages. This is the crate's only module with unsafe
//! operations (mmap, mprotect, madvise, raw reads and writes).
//!
//! One large `PROT_NONE` + `MAP_NORESERVE` reservation is made at pool creation; it costs
//! address space only. Frames (4 KiB) are handed out as virtually contiguous runs of
//! `pages_per_zspage` frames: first from the cache of freed, still resident runs (newest
//! first), then from a per-length list of discarded runs, then from a bump pointer whose range
//! is made read-write by `mprotect` in chunks, and last by splitting a longer free run.
//!
//! **Reuse of freed memory** (the model is jemalloc's dirty-page decay): faulting fresh
//! anonymous memory in costs about 1.2 µs per 4 KiB page on the test VM (the kernel zeroes,
//! charges and maps it), several times what the pool's own bookkeeping costs per zspage. So a
//! run given back stays resident in the free-run cache, stamped with the time it was freed,
//! and is returned to the OS (`MADV_DONTNEED`) only once it has stayed unused for
//! [`MemoryPolicy::free_page_decay_ms`], or when the cache exceeds
//! [`MemoryPolicy::max_cached_pages`] (then the oldest runs go, down to 3/4 of the bound, so
//! discards come in batches). Runs discarded together are sorted and merged into contiguous
//! ranges, one `madvise` (one TLB shootdown) per range. The checks run on slow paths only
//! (a zspage taken or given back); [`Arena::trim`] empties the cache at once (compaction and
//! `Pool::trim` call it). Decay 0 returns every freed run at once, as the kernel does.
//!
//! Optionally ([`MemoryPolicy::transparent_huge_pages`]) the reservation is 2 MiB aligned and
//! marked `MADV_HUGEPAGE`, so fresh memory comes in 2 MiB pages: one fault and one 2 MiB clear
//! instead of 512 faults. The catch: discarding part of a huge page splits it, and RSS grows in
//! 2 MiB steps, so it is off by default.
//!
//! Under Miri (no mmap) the reservation is a zeroed heap allocation and `MADV_DONTNEED` is
//! emulated by zero-filling, so the pool's logic and its data-race freedom can be checked.

use std::collections::VecDeque;
use std::time::Instant;

use parking_lot::Mutex;

use crate::class::MAX_CHAIN_SIZE;
use crate::{Error, PAGE_SIZE};

/// Frames made read-write per `mprotect` growth step (4 MiB, a multiple of a 2 MiB huge page).
const GROW_FRAMES: usize = 1024;
/// Frames per 2 MiB huge page.
const HUGE_FRAMES: usize = 512;

/// How a pool keeps and returns the memory of freed zspages (see the `arena` module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryPolicy {
    /// Milliseconds a freed zspage's pages stay resident for reuse before they go back to the
    /// OS; 0 returns them at once (the kernel's behaviour: RSS follows
    /// [`crate::Pool::total_pages`] exactly).
    pub free_page_decay_ms: u64,
    /// Most pages kept resident for reuse; beyond it the oldest are returned at once.
    pub max_cached_pages: usize,
    /// Back the pool with transparent huge pages (`MADV_HUGEPAGE`).
    pub transparent_huge_pages: bool,
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
        }
    }
}

impl MemoryPolicy {
    /// The kernel's behaviour: no freed page kept.
    pub fn immediate() -> Self {
        MemoryPolicy {
            free_page_decay_ms: 0,
            max_cached_pages: 0,
            transparent_huge_pages: false,
        }
    }
}

struct ArenaInner {
    /// Frames below this index have been handed out at least once.
    top: usize,
    /// Frames below this index are read-write.
    committed: usize,
    /// `free_runs[n]`: first frames of free, discarded runs of exactly `n` frames.
    free_runs: Vec<Vec<u32>>,
    /// `cached_runs[n]`: free runs of `n` frames still resident, with the time (ms since the
    /// arena's creation) they were freed; oldest at the front (pushes happen in time order).
    cached_runs: Vec<VecDeque<(u32, u64)>>,
    /// Pages in `cached_runs`.
    cached_pages: usize,
    /// Earliest time a cached run expires (`u64::MAX`: none cached).
    next_expiry: u64,
    policy: MemoryPolicy,
}

impl ArenaInner {
    /// Removes the runs whose decay time has passed into `out`.
    fn take_expired(&mut self, now: u64, out: &mut Vec<(u32, usize)>) {
        if now < self.next_expiry {
            return;
        }
        let decay = self.policy.free_page_decay_ms;
        let mut next = u64::MAX;
        for n in 1..=MAX_CHAIN_SIZE {
            let q = &mut self.cached_runs[n];
            while let Some(&(f, t)) = q.front() {
                if t.saturating_add(decay) > now {
                    next = next.min(t.saturating_add(decay));
                    break;
                }
                q.pop_front();
                self.cached_pages -= n;
                out.push((f, n));
            }
        }
        self.next_expiry = next;
    }

    /// Removes the oldest runs into `out` until at most `target` pages stay cached.
    fn take_oldest(&mut self, target: usize, out: &mut Vec<(u32, usize)>) {
        while self.cached_pages > target {
            let oldest = (1..=MAX_CHAIN_SIZE)
                .filter_map(|n| self.cached_runs[n].front().map(|&(_, t)| (t, n)))
                .min();
            let Some((_, n)) = oldest else { break };
            let (f, _) = self.cached_runs[n].pop_front().expect("non-empty");
            self.cached_pages -= n;
            out.push((f, n));
        }
        if self.cached_pages == 0 {
            self.next_expiry = u64::MAX;
        }
    }

    /// Removes every cached run into `out`.
    fn take_all(&mut self, out: &mut Vec<(u32, usize)>) {
        for n in 1..=MAX_CHAIN_SIZE {
            out.extend(self.cached_runs[n].drain(..).map(|(f, _)| (f, n)));
        }
        self.cached_pages = 0;
        self.next_expiry = u64::MAX;
    }
}

/// A reservation of `frames` 4 KiB frames (see the module docs).
pub(crate) struct Arena {
    base: *mut u8,
    frames: usize,
    /// The mapping as made by `sys::reserve` (it starts before `base` when aligned for huge
    /// pages).
    map_base: *mut u8,
    map_len: usize,
    /// The reservation is `MADV_HUGEPAGE` (see the module docs).
    huge: bool,
    epoch: Instant,
    inner: Mutex<ArenaInner>,
}

// SAFETY: the arena's memory is plain bytes reached through `base`; all mutation of the
// bookkeeping is behind `inner`'s mutex, and accesses to the bytes themselves follow the
// exclusion protocol documented on the unsafe accessors below.
unsafe impl Send for Arena {}
// SAFETY: as for Send: shared access to the bytes is governed by the callers' protocol.
unsafe impl Sync for Arena {}

impl Arena {
    /// Reserves `frames` frames of address space (no memory is committed yet).
    #[cfg(test)]
    pub(crate) fn new(frames: usize) -> Result<Arena, Error> {
        Self::with_policy(frames, MemoryPolicy::default())
    }

    /// Reserves `frames` frames of address space, managed by `policy`.
    pub(crate) fn with_policy(frames: usize, policy: MemoryPolicy) -> Result<Arena, Error> {
        assert!(frames > 0 && frames <= u32::MAX as usize);
        let huge = policy.transparent_huge_pages && !cfg!(miri);
        let slack = if huge { HUGE_FRAMES * PAGE_SIZE } else { 0 };
        let map_len = frames * PAGE_SIZE + slack;
        let map_base = sys::reserve(map_len)?;
        let base = if huge {
            let align = HUGE_FRAMES * PAGE_SIZE;
            let pad = (align - (map_base as usize) % align) % align;
            // SAFETY: pad < align = slack, so base..base+frames*PAGE_SIZE stays in the mapping.
            let b = unsafe { map_base.add(pad) };
            // SAFETY: the range is our own reservation.
            unsafe { sys::advise_huge(b, frames * PAGE_SIZE) };
            b
        } else {
            map_base
        };
        Ok(Arena {
            base,
            frames,
            map_base,
            map_len,
            huge,
            epoch: Instant::now(),
            inner: Mutex::new(ArenaInner {
                top: 0,
                committed: 0,
                free_runs: vec![Vec::new(); MAX_CHAIN_SIZE + 1],
                cached_runs: vec![VecDeque::new(); MAX_CHAIN_SIZE + 1],
                cached_pages: 0,
                next_expiry: u64::MAX,
                policy,
            }),
        })
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> MemoryPolicy {
        self.inner.lock().policy
    }

    /// Changes the policy (huge pages only affect memory not yet faulted in); applies the
    /// new decay and bound at once. Returns the pages this returned to the OS.
    pub(crate) fn set_policy(&self, policy: MemoryPolicy) -> usize {
        let mut out = Vec::new();
        {
            let mut g = self.inner.lock();
            let old = g.policy;
            g.policy = policy;
            if old.free_page_decay_ms != policy.free_page_decay_ms {
                // Re-derive the next expiry under the new decay.
                g.next_expiry = 0;
            }
            let now = self.now_ms();
            g.take_expired(now, &mut out);
            let bound = policy.max_cached_pages;
            g.take_oldest(bound, &mut out);
        }
        self.discard_batch(out)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Frames of address space reserved.
    pub(crate) fn capacity_frames(&self) -> usize {
        self.frames
    }

    /// Takes a run of `n` (1..=16) contiguous frames; returns its first frame. A run that is
    /// not resident is prefaulted in one `MADV_POPULATE_WRITE` call (the zspage's free list
    /// touches every page at once anyway), which saves the per-fault entry and exit (about
    /// 10 % of a fault on the test VM: most of the cost is the kernel's page clearing).
    pub(crate) fn alloc_run(&self, n: usize) -> Option<u32> {
        let mut expired = Vec::new();
        let first = {
            let mut g = self.inner.lock();
            let now = self.now_ms();
            g.take_expired(now, &mut expired);
            if let Some((f, _)) = g.cached_runs[n].pop_back() {
                g.cached_pages -= n;
                if g.cached_pages == 0 {
                    g.next_expiry = u64::MAX;
                }
                drop(g);
                self.discard_batch(expired);
                return Some(f);
            }
            self.take_cold_run(&mut g, n)
        };
        self.discard_batch(expired);
        let first = match first {
            Some(f) => f,
            None => {
                // Address space exhausted: split a longer free run (discarding the cached
                // ones first so they can be split too).
                self.trim();
                let mut g = self.inner.lock();
                let mut found = None;
                for m in n + 1..=MAX_CHAIN_SIZE {
                    if let Some(f) = g.free_runs[m].pop() {
                        g.free_runs[m - n].push(f + n as u32);
                        found = Some(f);
                        break;
                    }
                }
                found?
            }
        };
        let start = first as usize * PAGE_SIZE;
        if self.huge {
            // The first write faults in the whole 2 MiB page, which covers the next runs too
            // (a populate syscall per run would be wasted). Touch the frames here, with no
            // class lock held: faulting while building the zspage would hold the class lock
            // for the 2 MiB clear.
            for k in 0..n {
                // SAFETY: the frame is committed, inside the reservation, and ours alone; its
                // contents are unspecified until the zspage is built, so writing a zero byte
                // changes nothing anyone may rely on.
                unsafe { std::ptr::write_volatile(self.base.add(start + k * PAGE_SIZE), 0) };
            }
        } else {
            // SAFETY: the run is committed memory inside the reservation and now ours alone.
            unsafe { sys::populate(self.base, start, n * PAGE_SIZE) };
        }
        Some(first)
    }

    /// A discarded free run of `n` frames, or fresh frames from the bump pointer.
    fn take_cold_run(&self, g: &mut ArenaInner, n: usize) -> Option<u32> {
        debug_assert!((1..=MAX_CHAIN_SIZE).contains(&n));
        if let Some(f) = g.free_runs[n].pop() {
            return Some(f);
        }
        if g.top + n > self.frames {
            return None;
        }
        let first = g.top;
        if first + n > g.committed {
            let new_committed = (first + n).max(g.committed + GROW_FRAMES).min(self.frames);
            let start = g.committed * PAGE_SIZE;
            let len = (new_committed - g.committed) * PAGE_SIZE;
            // SAFETY: [start, start+len) lies inside the reservation made in `new`
            // (new_committed <= self.frames).
            if unsafe { sys::commit(self.base, start, len) }.is_err() {
                return None;
            }
            g.committed = new_committed;
        }
        g.top += n;
        Some(first as u32)
    }

    /// Gives a run back: into the free-run cache (see the module docs), or straight back to
    /// the OS with decay 0; runs that expired or overflow the cache go back to the OS too.
    pub(crate) fn free_run(&self, first: u32, n: usize) {
        let mut out = Vec::new();
        {
            let mut g = self.inner.lock();
            debug_assert!(first as usize + n <= g.top);
            let policy = g.policy;
            if policy.free_page_decay_ms == 0 || policy.max_cached_pages < n {
                out.push((first, n));
            } else {
                let now = self.now_ms();
                g.cached_runs[n].push_back((first, now));
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
        self.discard_batch(out);
    }

    /// Returns `runs` (taken out of the cache, so owned by the caller) to the OS, merging
    /// contiguous ones into one `madvise`, then lists them as discarded. Returns their pages.
    fn discard_batch(&self, mut runs: Vec<(u32, usize)>) -> usize {
        if runs.is_empty() {
            return 0;
        }
        runs.sort_unstable_by_key(|r| r.0);
        let mut pages = 0;
        let mut i = 0;
        while i < runs.len() {
            let start = runs[i].0 as usize;
            let mut end = start + runs[i].1;
            let mut j = i + 1;
            while j < runs.len() && runs[j].0 as usize == end {
                end += runs[j].1;
                j += 1;
            }
            self.discard_range(start, end - start);
            pages += end - start;
            i = j;
        }
        let mut g = self.inner.lock();
        for (f, n) in runs {
            g.free_runs[n].push(f);
        }
        pages
    }

    fn discard_range(&self, first: usize, n: usize) {
        // SAFETY: the frames were handed out by `alloc_run`, so they are committed memory
        // inside the reservation, and the caller owns them exclusively (they are in no list,
        // and no reader can hold a reference into a freed zspage: its objects were all freed).
        unsafe { sys::discard(self.base, first * PAGE_SIZE, n * PAGE_SIZE) };
    }

    /// Returns the pages whose decay time has passed to the OS; returns how many.
    pub(crate) fn purge_expired(&self) -> usize {
        let mut out = Vec::new();
        {
            let mut g = self.inner.lock();
            let now = self.now_ms();
            g.take_expired(now, &mut out);
        }
        self.discard_batch(out)
    }

    /// Returns every cached page to the OS; returns how many pages that was.
    pub(crate) fn trim(&self) -> usize {
        let mut out = Vec::new();
        self.inner.lock().take_all(&mut out);
        self.discard_batch(out)
    }

    /// Pages held resident by the free-run cache.
    pub(crate) fn cached_pages(&self) -> usize {
        self.inner.lock().cached_pages
    }

    /// Frames ever handed out (the high-water mark of the bump pointer).
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

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: `base` came from `sys::reserve` with this length, and `&mut self` proves no
        // borrow of the arena's bytes is alive.
        unsafe { sys::release(self.map_base, self.map_len) }
    }
}

#[cfg(not(miri))]
mod sys {
    use crate::Error;

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    pub(super) fn reserve(len: usize) -> Result<*mut u8, Error> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page != crate::PAGE_SIZE as libc::c_long {
            // Frames are 4 KiB; madvise/mprotect need them to be whole OS pages.
            return Err(Error::ArenaInit(libc::EINVAL));
        }
        // SAFETY: an anonymous PROT_NONE mapping at a kernel-chosen address cannot alias any
        // Rust-managed memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
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

    /// # Safety
    /// The range must be inside a reservation of ours.
    pub(super) unsafe fn advise_huge(base: *mut u8, len: usize) {
        // SAFETY: only sets a flag on our own mapping; failure (THP disabled) is harmless.
        let _ = unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) };
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

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, PAGE_SIZE).expect("arena layout")
    }

    pub(super) fn reserve(len: usize) -> Result<*mut u8, Error> {
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
    pub(super) unsafe fn advise_huge(_base: *mut u8, _len: usize) {}

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

    #[test]
    fn cache_is_bounded_with_hysteresis() {
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
        assert!(a.cached_pages() >= 96);
        let cached = a.cached_pages();
        assert_eq!(a.trim(), cached);
        assert_eq!(a.cached_pages(), 0);
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
        let a = Arena::with_policy(
            256,
            MemoryPolicy {
                free_page_decay_ms: 20,
                ..MemoryPolicy::default()
            },
        )
        .unwrap();
        let r: Vec<u32> = (0..4).map(|_| a.alloc_run(2).unwrap()).collect();
        a.free_run(r[0], 2);
        a.free_run(r[1], 2);
        assert_eq!(a.purge_expired(), 0);
        assert_eq!(a.cached_pages(), 4);
        std::thread::sleep(std::time::Duration::from_millis(30));
        // A slow-path call purges the expired runs (and caches the new one).
        a.free_run(r[2], 2);
        assert_eq!(a.cached_pages(), 2);
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert_eq!(a.purge_expired(), 2);
        assert_eq!(a.cached_pages(), 0);
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
            assert_eq!(a.base as usize % (HUGE_FRAMES * PAGE_SIZE), 0);
        }
        let r = a.alloc_run(4).unwrap() as usize;
        // SAFETY: the run is ours alone in this test.
        unsafe { a.write(r * PAGE_SIZE, &[1u8; 4 * PAGE_SIZE]) };
        a.free_run(r as u32, 4);
        assert_eq!(a.trim(), 4);
    }
}
