//! The zspage arena: real OS pages for zspages. This is the crate's only module with unsafe
//! operations (mmap, mprotect, madvise, raw reads and writes).
//!
//! One large `PROT_NONE` + `MAP_NORESERVE` reservation is made at pool creation; it costs
//! address space only. Frames (4 KiB) are handed out as virtually contiguous runs of
//! `pages_per_zspage` frames: first from a per-length free list of runs given back earlier,
//! then from a bump pointer whose range is made read-write by `mprotect` in chunks, and last
//! by splitting a longer free run. A run given back is `MADV_DONTNEED`ed before it is listed
//! again, so its physical pages return to the OS and the process RSS follows the pool's page
//! count; only a small warm cache (at most [`WARM_CACHE_PAGES`] pages, like the kernel's
//! per-CPU page lists) keeps recently freed runs resident, so that a class emptying and
//! refilling a zspage does not pay `madvise` plus a page fault per page each time.
//! [`Arena::trim`] empties the cache (compaction calls it).
//!
//! Under Miri (no mmap) the reservation is a zeroed heap allocation and `MADV_DONTNEED` is
//! emulated by zero-filling, so the pool's logic and its data-race freedom can be checked.

use parking_lot::Mutex;

use crate::class::MAX_CHAIN_SIZE;
use crate::{Error, PAGE_SIZE};

/// Frames made read-write per `mprotect` growth step (4 MiB).
const GROW_FRAMES: usize = 1024;
/// Most pages kept resident in freed runs (512 KiB); beyond this, freed runs are discarded.
pub(crate) const WARM_CACHE_PAGES: usize = 128;

struct ArenaInner {
    /// Frames below this index have been handed out at least once.
    top: usize,
    /// Frames below this index are read-write.
    committed: usize,
    /// `free_runs[n]`: first frames of free, discarded runs of exactly `n` frames.
    free_runs: Vec<Vec<u32>>,
    /// `warm_runs[n]`: free runs of `n` frames whose pages are still resident.
    warm_runs: Vec<Vec<u32>>,
    /// Pages in `warm_runs`.
    warm_pages: usize,
}

/// A reservation of `frames` 4 KiB frames (see the module docs).
pub(crate) struct Arena {
    base: *mut u8,
    frames: usize,
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
    pub(crate) fn new(frames: usize) -> Result<Arena, Error> {
        assert!(frames > 0 && frames <= u32::MAX as usize);
        let base = sys::reserve(frames * PAGE_SIZE)?;
        Ok(Arena {
            base,
            frames,
            inner: Mutex::new(ArenaInner {
                top: 0,
                committed: 0,
                free_runs: vec![Vec::new(); MAX_CHAIN_SIZE + 1],
                warm_runs: vec![Vec::new(); MAX_CHAIN_SIZE + 1],
                warm_pages: 0,
            }),
        })
    }

    /// Frames of address space reserved.
    pub(crate) fn capacity_frames(&self) -> usize {
        self.frames
    }

    /// Takes a run of `n` (1..=16) contiguous frames; returns its first frame. A run that is
    /// not warm is prefaulted in one `MADV_POPULATE_WRITE` call (the zspage's free list
    /// touches every page at once anyway), which costs much less than one fault per page.
    pub(crate) fn alloc_run(&self, n: usize) -> Option<u32> {
        let first = {
            let mut g = self.inner.lock();
            if let Some(f) = g.warm_runs[n].pop() {
                g.warm_pages -= n;
                return Some(f);
            }
            self.take_cold_run(&mut g, n)
        };
        let first = match first {
            Some(f) => f,
            None => {
                // Address space exhausted: split a longer free run (discarding the warm
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
        // SAFETY: the run is committed memory inside the reservation and now ours alone.
        unsafe { sys::populate(self.base, first as usize * PAGE_SIZE, n * PAGE_SIZE) };
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

    /// Gives a run back: into the warm cache if it has room, else its physical pages return
    /// to the OS before it can be reused.
    pub(crate) fn free_run(&self, first: u32, n: usize) {
        {
            let mut g = self.inner.lock();
            debug_assert!(first as usize + n <= g.top);
            if g.warm_pages + n <= WARM_CACHE_PAGES {
                g.warm_pages += n;
                g.warm_runs[n].push(first);
                return;
            }
        }
        self.discard_run(first, n);
        self.inner.lock().free_runs[n].push(first);
    }

    fn discard_run(&self, first: u32, n: usize) {
        // SAFETY: the run was handed out by `alloc_run`, so it is committed memory inside the
        // reservation, and the caller owns it exclusively (no reader can hold a reference into
        // a zspage that is being freed: every object in it has been freed).
        unsafe { sys::discard(self.base, first as usize * PAGE_SIZE, n * PAGE_SIZE) };
    }

    /// Returns the warm cache's pages to the OS; returns how many pages that was.
    pub(crate) fn trim(&self) -> usize {
        let runs: Vec<(u32, usize)> = {
            let mut g = self.inner.lock();
            g.warm_pages = 0;
            let mut v = Vec::new();
            for n in 1..=MAX_CHAIN_SIZE {
                v.extend(g.warm_runs[n].drain(..).map(|f| (f, n)));
            }
            v
        };
        let pages = runs.iter().map(|r| r.1).sum();
        for &(f, n) in &runs {
            self.discard_run(f, n);
        }
        let mut g = self.inner.lock();
        for (f, n) in runs {
            g.free_runs[n].push(f);
        }
        pages
    }

    /// Pages held resident by the warm cache.
    pub(crate) fn warm_pages(&self) -> usize {
        self.inner.lock().warm_pages
    }

    /// Frames ever handed out (the high-water mark of the bump pointer).
    pub(crate) fn top_frames(&self) -> usize {
        self.inner.lock().top
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
        unsafe { sys::release(self.base, self.frames * PAGE_SIZE) }
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
    /// Nothing to do: the heap stand-in is always resident.
    pub(super) unsafe fn populate(_base: *mut u8, _start: usize, _len: usize) {}

    /// # Safety
    /// `base`/`len` must be exactly an allocation from `reserve`.
    pub(super) unsafe fn release(base: *mut u8, len: usize) {
        // SAFETY: allocated in `reserve` with the same layout.
        unsafe { dealloc(base, layout(len)) }
    }
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
        assert_eq!(a.alloc_run(3), Some(r1));
        assert_eq!(a.warm_pages(), 0);
    }

    #[test]
    fn warm_cache_is_bounded() {
        let a = Arena::new(4096).unwrap();
        let runs: Vec<u32> = (0..100).map(|_| a.alloc_run(8).unwrap()).collect();
        for r in runs {
            a.free_run(r, 8);
        }
        assert_eq!(a.warm_pages(), WARM_CACHE_PAGES);
        assert_eq!(a.trim(), WARM_CACHE_PAGES);
    }

    #[test]
    fn alloc_run_splits_longer_runs_when_exhausted() {
        let a = Arena::new(16).unwrap();
        let r = a.alloc_run(16).unwrap();
        assert_eq!(a.alloc_run(1), None);
        a.free_run(r, 16);
        assert_eq!(a.warm_pages(), 16);
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
        assert_eq!(a.warm_pages(), 0);
        let again = a.alloc_run(2).unwrap() as usize;
        assert_eq!(again, r);
        // SAFETY: as above.
        let b = unsafe { a.bytes(r * PAGE_SIZE, 2 * PAGE_SIZE) };
        assert!(b.iter().all(|&x| x == 0));
    }
}
