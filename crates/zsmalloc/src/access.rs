// SPDX-License-Identifier: MIT
//! Object access without a pool-wide lock: handle resolution, read guards ([`ObjRef`]), reads,
//! writes and prefetch hints, ordered against frees and compaction moves by the per-object
//! state word (see `handle.rs`).

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::Ordering;

use crate::handle::{
    bump_version, free_state, next_gen, state_gen, Entry, Handle, Loc, ALLOCATED, FREE_PENDING,
    MOVING, READERS_MASK, WRITING,
};
use crate::pool::{backoff, Pool, SizeClass};
use crate::Error;

/// How much of an object [`Pool::prefetch_object`] asks for: four lines start the codec's
/// first reads and the hardware prefetcher's stream; asking for a whole page's lines at once
/// fills the core's miss buffers and stalls the load in progress (0.918 vs 0.909 of raw for
/// 512 bytes, BENCHMARKS.md section 1).
const PREFETCH_OBJECT_BYTES: usize = 256;

/// How long `write` waits for readers of the same object before reporting `Busy`.
const WRITE_WAIT_SPINS: u32 = 4096;

/// Where an object lay when it was allocated: the cache line of its first byte (see
/// [`Pool::alloc_write_hint`]). Four bytes cover the whole arena (2^26 frames of 4 KiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjHint(pub u32);

impl ObjHint {
    pub(crate) fn at(payload_off: usize) -> ObjHint {
        ObjHint((payload_off >> 6) as u32)
    }

    fn offset(self) -> usize {
        (self.0 as usize) << 6
    }
}

/// A read guard on one object: derefs to the slot's whole payload capacity (callers slice
/// their own length). While it lives the object cannot move, be rewritten or be freed (a
/// `free` is deferred until the guard drops; `write` waits, then reports `Busy`).
pub struct ObjRef<'a> {
    pool: &'a Pool,
    class: &'a SizeClass,
    entry: &'a Entry,
    slot: u32,
    bytes: &'a [u8],
}

impl Deref for ObjRef<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl AsRef<[u8]> for ObjRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.bytes
    }
}

impl fmt::Debug for ObjRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjRef")
            .field("class", &self.class.info.index)
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl Drop for ObjRef<'_> {
    fn drop(&mut self) {
        self.pool.release_read(self.class, self.entry, self.slot);
    }
}

impl Pool {
    /// Hint: `h`'s handle entry will be read soon (say, by the load after next of a sequential
    /// run). Only brings a cache line in; a stale or foreign handle is ignored.
    #[inline]
    pub fn prefetch_handle(&self, h: Handle) {
        if let Ok((_, entry)) = self.resolve(h) {
            crate::arena::prefetch_line(entry as *const Entry as *const u8);
        }
    }

    /// Hint: the first `len` bytes of `h`'s object will be read soon (at most
    /// `PREFETCH_OBJECT_BYTES`; the rest is the hardware prefetcher's). The location is read
    /// without taking the object's read lock, so a concurrent move or free only makes the hint
    /// useless; no object byte is read.
    #[inline]
    pub fn prefetch_object(&self, h: Handle, len: usize) {
        let Ok((class, entry)) = self.resolve(h) else {
            return;
        };
        let s = entry.state.load(Ordering::Relaxed);
        if state_gen(s) != h.generation() || s & ALLOCATED == 0 {
            return;
        }
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        self.arena.prefetch(
            class.payload_off(loc),
            len.min(class.capacity()).min(PREFETCH_OBJECT_BYTES),
        );
    }

    /// Hint: the first `len` bytes of the object that lay at `hint` when it was allocated will
    /// be read soon. Unlike [`Pool::prefetch_object`] it reads nothing of the pool (the
    /// handle's entry is itself a cache miss away), so the two misses can overlap; a hint made
    /// stale by compaction or a free only brings in a useless line.
    #[inline]
    pub fn prefetch_hint(&self, hint: ObjHint, len: usize) {
        self.arena
            .prefetch(hint.offset(), len.min(PREFETCH_OBJECT_BYTES));
    }

    /// Hint: `h`'s object, which lay at `hint` when it was allocated, will be freed soon.
    /// Starts the misses of the lines a free writes (the handle's state word, and the object's
    /// header, in the line of `hint` or the one before it), so that they overlap with the
    /// caller's other work instead of landing inside the class lock.
    #[inline]
    pub fn prefetch_free(&self, h: Handle, hint: ObjHint) {
        if let Ok((_, entry)) = self.resolve(h) {
            crate::arena::prefetch_line(entry as *const Entry as *const u8);
        }
        let off = hint.offset();
        self.arena.prefetch(off.saturating_sub(64), 128);
    }

    pub(crate) fn resolve(&self, h: Handle) -> Result<(&SizeClass, &Entry), Error> {
        let pos = self.position_of_index[h.class_index() & 0xff];
        let class = self.classes.get(pos as usize).ok_or(Error::InvalidHandle)?;
        let entry = class.handles.get(h.slot()).ok_or(Error::InvalidHandle)?;
        Ok((class, entry))
    }

    pub(crate) fn acquire_read(entry: &Entry, gen: u64) -> Result<(), Error> {
        let mut spins = 0;
        loop {
            let s = entry.state.load(Ordering::Relaxed);
            if state_gen(s) != gen || s & ALLOCATED == 0 || s & FREE_PENDING != 0 {
                return Err(Error::InvalidHandle);
            }
            if s & (MOVING | WRITING) != 0 {
                backoff(&mut spins);
                continue;
            }
            if s & READERS_MASK == READERS_MASK {
                return Err(Error::Busy);
            }
            if entry
                .state
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(());
            }
        }
    }

    pub(crate) fn release_read(&self, class: &SizeClass, entry: &Entry, slot: u32) {
        if let Some(gen) = Self::release_read_word(entry) {
            self.release_slot(class, entry, slot, gen);
        }
    }

    /// The state-word half of `release_read`: drops this reader; the last reader of an object
    /// freed meanwhile completes the free and gets the next generation, to release the slot.
    #[inline]
    pub(crate) fn release_read_word(entry: &Entry) -> Option<u64> {
        let prev = entry.state.fetch_sub(1, Ordering::AcqRel);
        if prev & FREE_PENDING != 0 && prev & READERS_MASK == 1 {
            let gen = next_gen(state_gen(prev));
            entry.state.store(free_state(gen), Ordering::Release);
            return Some(gen);
        }
        None
    }

    /// Read access without a copy: zspages are virtually contiguous, so even objects that
    /// straddle a 4 KiB boundary are one slice.
    pub fn read(&self, h: Handle) -> Result<ObjRef<'_>, Error> {
        let (class, entry) = self.resolve(h)?;
        Self::acquire_read(entry, h.generation())?;
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        // SAFETY: our reader count excludes writers, moves and frees of this object, and the
        // payload lies inside the slot of a live zspage; the slice dies with the guard.
        let bytes = unsafe { self.arena.bytes(class.payload_off(loc), class.capacity()) };
        Ok(ObjRef {
            pool: self,
            class,
            entry,
            slot: h.slot(),
            bytes,
        })
    }

    /// Reads object `h` without taking a reader count: `f` gets the object's payload as a
    /// seqlock reader gets its data, and its result is returned only if the object was neither
    /// freed, moved nor rewritten while `f` ran; otherwise `None` (also when the object is busy
    /// or `h` is stale: then [`Pool::read`] says why). A read guard costs two locked
    /// read-modify-writes of the object's state word, and the first waits for the word's cache
    /// line; this costs two plain loads, so a load's decompression starts while that line is
    /// still on its way (BENCHMARKS.md section 1).
    ///
    /// `f` must treat the bytes as untrusted: while it runs they may be rewritten by the next
    /// object in the slot (a safe decoder only fails or produces a wrong page, which the failed
    /// check then discards). The bytes are never unmapped memory: the arena's reservation
    /// stays mapped read-write for the pool's lifetime, and a returned frame reads as zeros.
    #[inline]
    pub fn read_optimistic<R>(&self, h: Handle, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        // Miri reports the overlapping write the check exists to detect: it checks the
        // guarded path only.
        if cfg!(miri) {
            return None;
        }
        let (class, entry) = self.resolve(h).ok()?;
        let before = Self::optimistic_begin(entry, h.generation())?;
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        // SAFETY: the payload lies inside the arena's reservation, which is mapped read-write
        // for the pool's lifetime (`loc` was read after an acquire load that saw the object
        // live; a location is only ever set to a slot of a zspage in the arena). Concurrent
        // writes are possible and are detected by `optimistic_valid`.
        let bytes = unsafe {
            self.arena
                .racy_bytes(class.payload_off(loc), class.capacity())
        };
        let r = f(bytes);
        Self::optimistic_valid(entry, before).then_some(r)
    }

    /// The optimistic read's first look at the state word: the word if the object is live,
    /// of generation `gen`, and not being moved, written or freed.
    #[inline]
    pub(crate) fn optimistic_begin(entry: &Entry, gen: u64) -> Option<u64> {
        let s = entry.state.load(Ordering::Acquire);
        let busy = FREE_PENDING | MOVING | WRITING;
        (state_gen(s) == gen && s & ALLOCATED != 0 && s & busy == 0).then_some(s)
    }

    /// The optimistic read's check: the state word, readers aside, is still `before` (every
    /// free advances the generation or sets `FREE_PENDING`, every move and write advances the
    /// version). The acquire fence keeps the object's reads before this load.
    #[inline]
    pub(crate) fn optimistic_valid(entry: &Entry, before: u64) -> bool {
        crate::sync::fence(Ordering::Acquire);
        let s = entry.state.load(Ordering::Relaxed);
        (s ^ before) & !READERS_MASK == 0
    }

    /// Copies the first `buf.len()` payload bytes of the object into `buf`.
    pub fn read_into(&self, h: Handle, buf: &mut [u8]) -> Result<(), Error> {
        let r = self.read(h)?;
        if buf.len() > r.len() {
            return Err(Error::TooLarge {
                size: buf.len(),
                max: r.len(),
            });
        }
        buf.copy_from_slice(&r[..buf.len()]);
        Ok(())
    }

    /// Payload capacity of the slot behind `h` (at least the length it was allocated for).
    pub fn capacity(&self, h: Handle) -> Result<usize, Error> {
        let (class, entry) = self.resolve(h)?;
        let s = entry.state.load(Ordering::Acquire);
        if state_gen(s) != h.generation() || s & ALLOCATED == 0 || s & FREE_PENDING != 0 {
            return Err(Error::InvalidHandle);
        }
        Ok(class.capacity())
    }

    /// Writes `data` at the start of the object's payload (`zs_obj_write`).
    pub fn write(&self, h: Handle, data: &[u8]) -> Result<(), Error> {
        let (class, entry) = self.resolve(h)?;
        let gen = h.generation();
        let mut spins = 0;
        let mut busy = 0;
        loop {
            let s = entry.state.load(Ordering::Relaxed);
            if state_gen(s) != gen || s & ALLOCATED == 0 || s & FREE_PENDING != 0 {
                return Err(Error::InvalidHandle);
            }
            if data.len() > class.capacity() {
                return Err(Error::TooLarge {
                    size: data.len(),
                    max: class.capacity(),
                });
            }
            if s & READERS_MASK != 0 {
                busy += 1;
                if busy > WRITE_WAIT_SPINS {
                    return Err(Error::Busy);
                }
                backoff(&mut spins);
                continue;
            }
            if s & (MOVING | WRITING) != 0 {
                backoff(&mut spins);
                continue;
            }
            if entry
                .state
                .compare_exchange_weak(s, s | WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break;
            }
        }
        // An optimistic reader that sees any byte of this write must then see WRITING or the
        // new version (a seqlock's writer side).
        crate::sync::fence(Ordering::Release);
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        // SAFETY: WRITING excludes readers, other writers, moves and frees of this object.
        unsafe { self.arena.write(class.payload_off(loc), data) };
        // While WRITING is set no other thread changes the state word (see `end_move`).
        let s = entry.state.load(Ordering::Relaxed);
        entry
            .state
            .store(bump_version(s) & !WRITING, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::ObjHint;
    use crate::pool::tests_support::pool;
    use crate::{Error, Handle};

    #[test]
    fn prefetch_hints_accept_any_handle() {
        let a = pool(4);
        let b = pool(4);
        let big = vec![7u8; 3000];
        let h = a.alloc_write(&big).unwrap();
        let g = a.alloc_write(b"gone").unwrap();
        a.free(g).unwrap();
        let other = b.alloc_write(b"other pool").unwrap();
        // Live, freed (stale generation) and foreign handles, any length: hints only.
        for h in [h, g, other] {
            for len in [0, 1, 256, 4096, usize::MAX] {
                a.prefetch_handle(h);
                a.prefetch_object(h, len);
            }
        }
        assert_eq!(&a.read(h).unwrap()[..3000], &big[..]);
        assert_eq!(a.read(g).map(|_| ()), Err(Error::InvalidHandle));
    }

    #[test]
    fn a_hint_names_the_line_of_the_object_and_any_hint_is_harmless() {
        let a = pool(8);
        let data: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
        let (h, hint) = a.alloc_write_hint(&data).unwrap();
        let obj = a.read(h).unwrap();
        let start = obj.as_ptr() as usize - a.arena.base_addr();
        assert_eq!(hint, ObjHint::at(start));
        assert_eq!(hint.offset() / 64, start / 64);
        drop(obj);
        for hint in [hint, ObjHint(0), ObjHint(u32::MAX)] {
            for len in [0, 1, 256, 4096, usize::MAX] {
                a.prefetch_hint(hint, len);
            }
        }
        assert_eq!(&a.read(h).unwrap()[..data.len()], &data[..]);
    }

    #[test]
    fn handle_of_another_pool_is_rejected() {
        let a = pool(8);
        let b = pool(8);
        let ha = a.alloc_write(b"from a").unwrap();
        let hb = b.alloc_write(b"from b").unwrap();
        assert_eq!(b.read(ha).map(|_| ()), Err(Error::InvalidHandle));
        assert_eq!(a.free(hb), Err(Error::InvalidHandle));
        assert_eq!(&a.read(ha).unwrap()[..6], b"from a");
    }

    #[test]
    fn free_during_read_is_deferred_to_the_last_reader() {
        let p = pool(8);
        let h = p.alloc_write(&[5u8; 300]).unwrap();
        let r = p.read(h).unwrap();
        p.free(h).unwrap();
        assert_eq!(p.read(h).map(|_| ()), Err(Error::InvalidHandle));
        assert_eq!(p.free(h), Err(Error::InvalidHandle));
        assert_eq!(r[0], 5);
        assert!(p.total_pages() > 0);
        drop(r);
        assert_eq!(p.total_pages(), 0);
        p.check_invariants().unwrap();
    }

    #[test]
    fn write_while_read_reports_busy() {
        let p = pool(8);
        let h = p.alloc_write(&[1u8; 64]).unwrap();
        let r = p.read(h).unwrap();
        assert_eq!(p.write(h, &[2u8; 64]), Err(Error::Busy));
        drop(r);
        p.write(h, &[2u8; 64]).unwrap();
        assert_eq!(p.read(h).unwrap()[..64], [2u8; 64]);
    }

    #[test]
    fn an_optimistic_read_passes_only_when_nothing_touched_its_object() {
        if cfg!(miri) {
            return; // read_optimistic always declines under Miri
        }
        let p = pool(8);
        let h = p.alloc_write(&[3u8; 500]).unwrap();
        assert_eq!(
            p.read_optimistic(h, |b| b[..500].to_vec()),
            Some(vec![3u8; 500])
        );
        // A read guard held meanwhile does not matter: readers change nothing.
        let r = p.read(h).unwrap();
        assert_eq!(p.read_optimistic(h, |b| b[0]), Some(3));
        drop(r);
        // A write during the read: refused, and the next read sees the new bytes.
        assert_eq!(
            p.read_optimistic(h, |_| p.write(h, &[4u8; 500]).unwrap()),
            None
        );
        assert_eq!(p.read_optimistic(h, |b| b[499]), Some(4));
        // A compaction move during the read: refused (the version advanced), though the
        // object's bytes are the same at its new place. `h` and the last of 200 objects are
        // alone in their zspages once the rest are freed, so compaction moves one of them.
        let loc = |h: Handle| p.resolve(h).unwrap().1.loc.load(Ordering::Relaxed);
        let others: Vec<Handle> = (0..200)
            .map(|_| p.alloc_write(&[9u8; 500]).unwrap())
            .collect();
        for o in &others[..199] {
            p.free(*o).unwrap();
        }
        let (h_at, last_at) = (loc(h), loc(others[199]));
        let read = p.read_optimistic(h, |b| {
            let bytes = b[..500].to_vec();
            assert!(p.compact() > 0);
            bytes
        });
        assert!(
            loc(h) != h_at || loc(others[199]) != last_at,
            "nothing moved"
        );
        if loc(h) != h_at {
            assert_eq!(read, None);
        } else {
            assert_eq!(read, Some(vec![4u8; 500]));
        }
        assert_eq!(
            p.read_optimistic(h, |b| b[..500].to_vec()),
            Some(vec![4u8; 500])
        );
        p.free(others[199]).unwrap();
        // A free during the read: refused; a stale handle: refused before `f` runs.
        assert_eq!(p.read_optimistic(h, |_| p.free(h).unwrap()), None);
        assert_eq!(p.read_optimistic(h, |_| unreachable!()), None::<()>);
        // Another object in the freed slot is never shown under the old handle.
        let n = p.alloc_write(&[6u8; 500]).unwrap();
        assert_eq!(p.read_optimistic(h, |_| unreachable!()), None::<()>);
        assert_eq!(p.read_optimistic(n, |b| b[0]), Some(6));
        p.check_invariants().unwrap();
    }

    #[test]
    fn straddling_object_reads_as_one_slice() {
        // Class 1568 (5 pages, 13 objects): object 2 spans pages 0 and 1.
        let p = pool(8);
        let hs: Vec<Handle> = (0..13u8)
            .map(|i| p.alloc_write(&[i; 1560]).unwrap())
            .collect();
        for (i, &h) in hs.iter().enumerate() {
            assert!(p.read(h).unwrap()[..1560].iter().all(|&b| b == i as u8));
        }
        assert_eq!(p.total_pages(), 5);
        p.check_invariants().unwrap();
    }
}
