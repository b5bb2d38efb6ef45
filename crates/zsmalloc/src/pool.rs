// SPDX-License-Identifier: MIT
//! The pool: its size classes, creation, allocation (`zs_malloc`), free (`zs_free`) and the
//! pages it holds. Object access is in `access.rs`, compaction in `compact.rs`, statistics in
//! `stats.rs`, the invariant checker in `check.rs`; a class's zspage lists in `zspage.rs`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::access::ObjHint;
use crate::arena::{Arena, MemoryPolicy};
use crate::class::{ClassInfo, ClassTable, PoolConfig, HANDLE_SIZE, MAX_ALLOC_SIZE};
use crate::fullness::{NR_FULLNESS_GROUPS, RATIO_0};
use crate::handle::{
    free_state, next_gen, pool_first_gen, state_gen, Entry, Handle, HandleTable, Loc, ALLOCATED,
    FREE_PENDING, GEN_SHIFT, MAX_FRAMES, MAX_ZSPAGES_PER_CLASS, MOVING, READERS_MASK, WRITING,
};
use crate::zspage::{ClassInner, NONE};
use crate::{Error, PAGE_SIZE};

/// "No unique class has this index" in `Pool::position_of_index`.
const NO_CLASS: u8 = u8::MAX;

/// Address space reserved per pool by [`Pool::new`] (64 GiB; costs no memory).
#[cfg(not(miri))]
const DEFAULT_RESERVE_FRAMES: usize = 1 << 24;
#[cfg(miri)]
const DEFAULT_RESERVE_FRAMES: usize = 1 << 11;
/// Smallest reservation tried when a large one is refused (e.g. by RLIMIT_AS).
#[cfg(not(miri))]
const MIN_RESERVE_FRAMES: usize = 1 << 14;
#[cfg(miri)]
const MIN_RESERVE_FRAMES: usize = 1 << 8;
pub(crate) use crate::sync::backoff;

/// One unique size class. Cache-line aligned (128 bytes: adjacent-line prefetch) so that
/// threads working in neighbouring classes do not share lines.
///
/// `repr(C)`, hot fields first: a handle resolution and a read need the slot geometry and
/// the handle table's first segments, and these share the struct's first cache line. Loads
/// meet a given class only every hundred pages or so, long enough for its lines to leave
/// L1 and L2, so every further line a read touches is one more miss (the geometry used to
/// sit on two lines of its own, away from the segments).
#[repr(C, align(128))]
pub(crate) struct SizeClass {
    /// Slot size, `info.size`.
    slot_size: u32,
    /// Payload bytes per slot (slot size minus header, or the slot if huge).
    capacity: u32,
    /// Bytes between slot start and payload (8, or 0 if huge).
    header: u32,
    pub(crate) handles: HandleTable,
    pub(crate) info: ClassInfo,
    pub(crate) inner: Mutex<ClassInner>,
}

// The geometry and the handle table's first two segments (768 handles) in one line.
const _: () =
    assert!(std::mem::offset_of!(SizeClass, handles) + crate::handle::HOT_SEGS_BYTES <= 64);

impl SizeClass {
    fn new(info: ClassInfo, first_gen: u64, inner: ClassInner) -> SizeClass {
        let narrow = |v: usize| u32::try_from(v).expect("class geometry fits in u32");
        SizeClass {
            slot_size: narrow(info.size),
            capacity: narrow(info.payload_capacity()),
            header: narrow(if info.huge { 0 } else { HANDLE_SIZE }),
            handles: HandleTable::new(first_gen),
            info,
            inner: Mutex::new(inner),
        }
    }

    /// Payload bytes per slot (slot size minus header, or the slot if huge).
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    #[inline]
    pub(crate) fn payload_off(&self, loc: Loc) -> usize {
        loc.frame as usize * PAGE_SIZE
            + loc.obj_idx as usize * self.slot_size as usize
            + self.header as usize
    }
}

/// A zsmalloc pool. `Send + Sync`: classes lock independently (see the crate docs).
pub struct Pool {
    pub(crate) table: ClassTable,
    /// Parallel to `table.unique_classes()`.
    pub(crate) classes: Vec<SizeClass>,
    /// For each value of a handle's 8-bit class field, the position in `classes` of the unique
    /// class with that kernel index, or `NO_CLASS` (a merged-away index: no handle names it).
    /// One load instead of the class table's two on every handle resolution.
    pub(crate) position_of_index: Box<[u8; 256]>,
    pub(crate) arena: Arena,
    pub(crate) max_pages: usize,
    pub(crate) pages_held: AtomicUsize,
    pub(crate) pages_compacted: AtomicU64,
    pub(crate) compacting: AtomicBool,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("config", self.table.config())
            .field("total_pages", &self.total_pages())
            .field("pages_compacted", &self.pages_compacted())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// Creates an empty pool; reserves address space only (64 GiB), no memory.
    pub fn new(cfg: PoolConfig) -> Result<Pool, Error> {
        Self::build(
            cfg,
            usize::MAX,
            DEFAULT_RESERVE_FRAMES,
            MemoryPolicy::default(),
        )
    }

    /// Creates an empty pool whose freed memory is kept and returned by `policy` (the only
    /// way to enable transparent huge pages, which must be chosen before any page is used).
    pub fn with_memory_policy(cfg: PoolConfig, policy: MemoryPolicy) -> Result<Pool, Error> {
        Self::build(cfg, usize::MAX, DEFAULT_RESERVE_FRAMES, policy)
    }

    /// Creates a pool that holds at most `max_pages` pages; allocations beyond fail with
    /// [`Error::OutOfMemory`].
    pub fn with_max_pages(cfg: PoolConfig, max_pages: usize) -> Result<Pool, Error> {
        // Twice the limit (plus slack for one run of each length) so virtual fragmentation
        // between run lengths never causes a spurious failure.
        let frames = max_pages
            .saturating_mul(2)
            .saturating_add(256)
            .min(DEFAULT_RESERVE_FRAMES.max(256));
        Self::build(cfg, max_pages, frames, MemoryPolicy::default())
    }

    fn build(
        cfg: PoolConfig,
        max_pages: usize,
        frames: usize,
        policy: MemoryPolicy,
    ) -> Result<Pool, Error> {
        let table = ClassTable::new(&cfg)?;
        let mut frames = frames.min(MAX_FRAMES);
        // Under an address-space limit, at most half of what it leaves (the largest power of
        // two that fitted took nearly all of it, and the process could map nothing more).
        if let Some(room) = crate::arena::address_room_frames() {
            frames = frames.min(room.max(MIN_RESERVE_FRAMES));
        }
        let arena = loop {
            match Arena::with_policy(frames, policy) {
                Ok(a) => break a,
                Err(e) if frames / 2 >= MIN_RESERVE_FRAMES => {
                    let _ = e;
                    frames /= 2;
                }
                Err(e) => return Err(e),
            }
        };
        let first_gen = pool_first_gen();
        let classes = table
            .unique_classes()
            .iter()
            .map(|c| {
                SizeClass::new(
                    *c,
                    first_gen,
                    ClassInner {
                        size: c.size,
                        pages_per_zspage: c.pages_per_zspage,
                        objs_per_zspage: c.objs_per_zspage,
                        huge: c.huge,
                        zspages: Vec::new(),
                        free_ids: Vec::new(),
                        heads: [NONE; NR_FULLNESS_GROUPS],
                        group_count: [0; NR_FULLNESS_GROUPS],
                        obj_allocated: 0,
                        obj_used: 0,
                        free_handles: Vec::new(),
                        next_handle: 0,
                        retired_handles: 0,
                    },
                )
            })
            .collect();
        let mut position_of_index = Box::new([NO_CLASS; 256]);
        for (pos, c) in table.unique_classes().iter().enumerate() {
            position_of_index[c.index] = u8::try_from(pos).expect("at most 255 unique classes");
        }
        Ok(Pool {
            table,
            classes,
            position_of_index,
            arena,
            max_pages,
            pages_held: AtomicUsize::new(0),
            pages_compacted: AtomicU64::new(0),
            compacting: AtomicBool::new(false),
        })
    }

    /// The pool's configuration.
    pub fn config(&self) -> &PoolConfig {
        self.table.config()
    }

    /// The pool's size-class table.
    pub fn class_table(&self) -> &ClassTable {
        &self.table
    }

    /// Allocates a slot for `len` bytes (`zs_malloc`). Its contents are unspecified until
    /// written.
    pub fn alloc(&self, len: usize) -> Result<Handle, Error> {
        self.alloc_impl(len, None).map(|(h, _)| h)
    }

    /// Allocates a slot for `data.len()` bytes and writes `data` into it.
    pub fn alloc_write(&self, data: &[u8]) -> Result<Handle, Error> {
        self.alloc_impl(data.len(), Some(data)).map(|(h, _)| h)
    }

    /// [`Pool::alloc_write`], also returning where the object lies now, for
    /// [`Pool::prefetch_hint`]: a reader that keeps the hint with the handle can start the
    /// object's cache misses without resolving the handle first.
    pub fn alloc_write_hint(&self, data: &[u8]) -> Result<(Handle, ObjHint), Error> {
        self.alloc_impl(data.len(), Some(data))
    }

    fn alloc_impl(&self, len: usize, data: Option<&[u8]>) -> Result<(Handle, ObjHint), Error> {
        if len == 0 {
            return Err(Error::ZeroSize);
        }
        if len > MAX_ALLOC_SIZE {
            return Err(Error::TooLarge {
                size: len,
                max: MAX_ALLOC_SIZE,
            });
        }
        let class = &self.classes[self.table.unique_position_for_object(len)];
        let mut g = class.inner.lock();
        let slot = g.take_handle_slot()?;
        let id = match g.find_get_zspage() {
            Some(id) => id,
            None => {
                // Like the kernel, get the pages with the class lock dropped: a racing
                // allocation in this class may add a zspage too; both are kept.
                drop(g);
                let frame = self.reserve_zspage_pages(class);
                g = class.inner.lock();
                let frame = match frame {
                    Ok(f) if !g.free_ids.is_empty() || g.zspages.len() < MAX_ZSPAGES_PER_CLASS => f,
                    other => {
                        g.free_handles.push(slot);
                        drop(g);
                        if let Ok(f) = other {
                            self.unreserve_zspage_pages(class, f);
                        }
                        return Err(Error::OutOfMemory);
                    }
                };
                g.new_zspage(frame, &self.arena)
            }
        };
        let obj_idx = g.obj_malloc(id, slot, &self.arena);
        g.fix_fullness(id);
        g.obj_used += 1;
        let loc = Loc {
            zsid: id,
            obj_idx,
            frame: g.zspages[id as usize].frame,
        };
        let entry = class.handles.get_or_create(slot);
        // The generation was advanced by the previous free of this slot (ordered by the lock).
        let gen = state_gen(entry.state.load(Ordering::Relaxed));
        entry.loc.store(loc.pack(), Ordering::Relaxed);
        let writing = if data.is_some() { WRITING } else { 0 };
        // Published while we hold WRITING, so the compactor cannot move it before the write.
        entry
            .state
            .store((gen << GEN_SHIFT) | ALLOCATED | writing, Ordering::Release);
        drop(g);
        if let Some(d) = data {
            // An optimistic reader of the slot's previous object that sees any of these bytes
            // must then see that object's free or move (`Pool::read_optimistic`).
            crate::sync::fence(Ordering::Release);
            // SAFETY: the slot was free until now and WRITING excludes readers, writers, frees
            // and moves; the payload lies within the slot of a live zspage.
            unsafe { self.arena.write(class.payload_off(loc), d) };
            // While WRITING is set no other thread changes the state word (every other
            // transition is a compare-exchange from a state without WRITING), so a plain
            // release store ends the write. Unlike a locked read-modify-write it does not
            // wait for the copy's stores (cache misses on the fresh slot) to drain.
            entry
                .state
                .store((gen << GEN_SHIFT) | ALLOCATED, Ordering::Release);
        }
        Ok((
            Handle::new(gen, class.info.index, slot),
            ObjHint::at(class.payload_off(loc)),
        ))
    }

    /// Takes the frames of one zspage of `class` from the arena and counts its pages.
    fn reserve_zspage_pages(&self, class: &SizeClass) -> Result<u32, Error> {
        let pages_per_zspage = class.info.pages_per_zspage;
        let held = self
            .pages_held
            .fetch_add(pages_per_zspage, Ordering::Relaxed);
        if held.saturating_add(pages_per_zspage) > self.max_pages {
            self.pages_held
                .fetch_sub(pages_per_zspage, Ordering::Relaxed);
            return Err(Error::OutOfMemory);
        }
        self.arena.alloc_run(pages_per_zspage).ok_or_else(|| {
            self.pages_held
                .fetch_sub(pages_per_zspage, Ordering::Relaxed);
            Error::OutOfMemory
        })
    }

    /// Gives back the frames of a zspage of `class` that is no longer registered.
    pub(crate) fn unreserve_zspage_pages(&self, class: &SizeClass, frame: u32) {
        let pages_per_zspage = class.info.pages_per_zspage;
        self.arena.free_run(frame, pages_per_zspage);
        self.pages_held
            .fetch_sub(pages_per_zspage, Ordering::Relaxed);
    }

    /// Frees the object (`zs_free`). A stale or doubly freed handle gives
    /// [`Error::InvalidHandle`]. If a read guard on the object is alive, the slot is released
    /// when the last guard drops; the handle is invalid from now on either way.
    pub fn free(&self, h: Handle) -> Result<(), Error> {
        let (class, entry) = self.resolve(h)?;
        if let Some(next) = Self::free_state_word(entry, h.generation())? {
            self.release_slot(class, entry, h.slot(), next);
        }
        Ok(())
    }

    /// The state-word half of `free`: marks the object freed (its generation advanced) and
    /// returns the next generation, for the caller to release the slot; or, with readers
    /// present, marks it `FREE_PENDING` and returns `None` (the last reader releases it).
    #[inline]
    pub(crate) fn free_state_word(entry: &Entry, gen: u64) -> Result<Option<u64>, Error> {
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
            if s & READERS_MASK != 0 {
                if entry
                    .state
                    .compare_exchange_weak(s, s | FREE_PENDING, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(None);
                }
                continue;
            }
            if entry
                .state
                .compare_exchange_weak(
                    s,
                    free_state(next_gen(gen)),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Ok(Some(next_gen(gen)));
            }
        }
    }

    /// Returns a dead entry's slot to its zspage and the entry to the class's handle list;
    /// frees the zspage if it became empty.
    /// `gen`: the generation the slot's next handle would carry.
    pub(crate) fn release_slot(&self, class: &SizeClass, entry: &Entry, slot: u32, gen: u64) {
        let mut g = class.inner.lock();
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        g.obj_free(loc.zsid, loc.obj_idx, &self.arena);
        g.obj_used -= 1;
        // A slot whose next generation would be its first again has used every generation:
        // retire it, so that no handle it ever gave out can name a later object (see
        // `handle.rs`).
        if gen != class.handles.first_gen() {
            g.free_handles.push(slot);
        } else {
            g.retired_handles += 1;
        }
        if g.fix_fullness(loc.zsid) == RATIO_0 {
            g.remove(loc.zsid);
            let frame = g.release_zspage(loc.zsid);
            drop(g);
            self.unreserve_zspage_pages(class, frame);
        }
    }

    /// Pages held right now (`zs_get_total_pages`): pages of live zspages.
    pub fn total_pages(&self) -> usize {
        self.pages_held.load(Ordering::Relaxed)
    }

    /// Pages freed by compaction so far (`zs_pool_stats().pages_compacted`).
    pub fn pages_compacted(&self) -> u64 {
        self.pages_compacted.load(Ordering::Relaxed)
    }

    /// Returns every page kept resident for reuse by freed zspages to the OS; returns how
    /// many. [`Pool::compact`] does this too. These pages are not counted by
    /// [`Pool::total_pages`] (the kernel's freed pages likewise sit on per-CPU lists).
    pub fn trim(&self) -> usize {
        self.arena.trim()
    }

    /// Call in a fork child before it starts threads of its own: the pool's prefault thread
    /// belongs to the parent, so the child gets a work queue of its own (and a thread for it
    /// once it grows again). The pool's contents are the child's copy and stay as they are,
    /// shared with the parent until either writes them; the child's huge-page mappings of them
    /// are split so that [`Pool::zspage_memory`]'s pages report their sharing.
    pub fn after_fork_child(&self) {
        self.arena.after_fork_child();
        self.arena.split_huge_mappings();
    }

    /// Stops the pool's background thread (the arena's prefault thread), if one runs, and
    /// waits for it to end; the pool keeps working without it (a chunk is faulted in by the
    /// allocation that carves it) until [`Pool::unpark_threads`] or the next chunk queued
    /// starts one. For a caller about to change what only the calling thread's credentials
    /// hold (`capset`, `PR_SET_KEEPCAPS`): threads made afterwards inherit the new ones.
    pub fn park_threads(&self) {
        self.arena.park_prefault();
    }

    /// Starts the background thread parked by [`Pool::park_threads`] again if it has work.
    pub fn unpark_threads(&self) {
        self.arena.unpark_prefault();
    }

    /// The address ranges `(start, pages)` that may hold this pool's zspages, ascending: the
    /// memory to look at (in `/proc/self/pagemap`, say) to learn how much of the pool a fork
    /// child still shares with its parent. Free memory kept resident is left out; memory
    /// given back to the OS may be in (it maps nothing). A snapshot.
    pub fn zspage_memory(&self) -> Vec<(usize, usize)> {
        self.arena.zspage_ranges()
    }

    /// Returns the cached pages whose decay time ([`MemoryPolicy::free_page_decay_ms`]) has
    /// passed to the OS; returns how many. Zspage allocations and frees do this on their own;
    /// an idle pool's owner can call it from a timer.
    pub fn purge_expired(&self) -> usize {
        self.arena.purge_expired()
    }

    /// CPU time (ns) the pool's own background thread (the arena's prefault thread) has used:
    /// for an embedder telling its program's CPU time from its own.
    pub fn background_cpu_ns(&self) -> u64 {
        self.arena.prefault_thread_cpu_ns()
    }

    /// Pages currently kept resident for reuse (not counted by [`Pool::total_pages`]; the
    /// process RSS of the pool is `total_pages() + cached_pages()`).
    pub fn cached_pages(&self) -> usize {
        self.arena.cached_pages()
    }

    /// How freed memory is kept and returned.
    pub fn memory_policy(&self) -> MemoryPolicy {
        self.arena.policy()
    }

    /// Changes the decay and cache bound (the huge-page setting only affects memory not yet
    /// used); pages the new policy no longer allows to be cached go back at once. Returns
    /// how many.
    pub fn set_memory_policy(&self, policy: MemoryPolicy) -> usize {
        self.arena.set_policy(policy)
    }

    /// Frames of address space reserved for this pool.
    pub fn reserved_pages(&self) -> usize {
        self.arena.capacity_frames()
    }

    /// High-water mark of arena frames ever used (virtual; physical use is `total_pages`).
    pub fn arena_high_water_pages(&self) -> usize {
        self.arena.top_frames()
    }
}

/// The helper of the crate's unit tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use crate::{ChainRule, Pool, PoolConfig};

    pub(crate) fn pool(chain: usize) -> Pool {
        Pool::new(PoolConfig {
            chain_size: chain,
            chain_rule: ChainRule::MinWaste,
        })
        .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::pool;
    use super::*;
    use crate::ObjRef;

    #[test]
    fn pool_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Pool>();
        assert_send_sync::<ObjRef<'_>>();
    }

    #[test]
    fn alloc_write_read_free_roundtrip() {
        let p = pool(8);
        let data: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
        let h = p.alloc_write(&data).unwrap();
        assert_eq!(&p.read(h).unwrap()[..data.len()], &data[..]);
        let mut buf = vec![0; data.len()];
        p.read_into(h, &mut buf).unwrap();
        assert_eq!(buf, data);
        p.free(h).unwrap();
        assert_eq!(p.total_pages(), 0);
        p.check_invariants().unwrap();
    }

    #[test]
    fn errors_for_bad_sizes() {
        let p = pool(8);
        assert_eq!(p.alloc(0), Err(Error::ZeroSize));
        assert_eq!(
            p.alloc(4097),
            Err(Error::TooLarge {
                size: 4097,
                max: 4096
            })
        );
        let h = p.alloc(4096).unwrap();
        assert_eq!(p.capacity(h), Ok(4096));
        let h2 = p.alloc(100).unwrap();
        assert!(matches!(
            p.write(h2, &[0; 200]),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn stale_and_double_free_are_invalid_handle() {
        let p = pool(8);
        let h = p.alloc_write(b"hello").unwrap();
        p.free(h).unwrap();
        assert_eq!(p.free(h), Err(Error::InvalidHandle));
        assert_eq!(p.read(h).map(|_| ()), Err(Error::InvalidHandle));
        assert_eq!(p.write(h, b"x"), Err(Error::InvalidHandle));
        // The slot is reused with a new generation; the old handle stays invalid.
        let h2 = p.alloc_write(b"world").unwrap();
        assert_ne!(h, h2);
        assert_eq!(p.read(h).map(|_| ()), Err(Error::InvalidHandle));
        assert_eq!(&p.read(h2).unwrap()[..5], b"world");
        // Forged handles.
        for raw in [1u64, u64::MAX, 0xdead_beef_0000_0001] {
            let f = Handle::from_raw(raw).unwrap();
            assert_eq!(p.read(f).map(|_| ()), Err(Error::InvalidHandle));
            assert_eq!(p.free(f), Err(Error::InvalidHandle));
        }
    }

    #[test]
    fn max_pages_limit_gives_out_of_memory() {
        let p = Pool::with_max_pages(PoolConfig::default(), 3).unwrap();
        let mut n = 0;
        loop {
            match p.alloc(4000) {
                Ok(_) => n += 1,
                Err(e) => {
                    assert_eq!(e, Error::OutOfMemory);
                    break;
                }
            }
        }
        assert_eq!(n, 3);
        assert_eq!(p.total_pages(), 3);
    }

    /// One hot slot driven through its whole generation space (2^24 - 1 allocations): every
    /// handle it gives out is new, a freed handle never reads a later object, and the slot
    /// is then retired (the next allocation takes a fresh slot).
    #[test]
    #[cfg_attr(miri, ignore = "16.7 million allocations")]
    fn a_hot_slot_is_retired_before_its_generation_wraps() {
        use crate::handle::GEN_MASK;
        let p = pool(8);
        let first = p.alloc_write(b"first").unwrap();
        let slot = first.slot();
        p.free(first).unwrap();
        let mut last = first;
        for n in 1..GEN_MASK {
            let h = p.alloc_write(b"again").unwrap();
            assert_eq!(h.slot(), slot, "last-freed-first: the same hot slot");
            assert_ne!(h, first, "generation reused after {n} allocations");
            if n % (1 << 20) == 0 {
                assert_eq!(p.read(first).map(|_| ()), Err(Error::InvalidHandle));
                assert_eq!(p.read(last).map(|_| ()), Err(Error::InvalidHandle));
            }
            last = h;
            p.free(h).unwrap();
        }
        // Every generation was used once: the slot is retired, not reused.
        let fresh = p.alloc_write(b"fresh").unwrap();
        assert_ne!(fresh.slot(), slot);
        for stale in [first, last] {
            assert_eq!(p.read(stale).map(|_| ()), Err(Error::InvalidHandle));
            assert_eq!(p.free(stale), Err(Error::InvalidHandle));
        }
        assert_eq!(&p.read(fresh).unwrap()[..5], b"fresh");
        p.check_invariants().unwrap();
    }
}
