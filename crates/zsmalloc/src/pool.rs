//! The pool: per-class zspage lists, object allocation, access, free and compaction.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::arena::{Arena, MemoryPolicy};
use crate::class::{ClassInfo, ClassTable, PoolConfig, HANDLE_SIZE, MAX_ALLOC_SIZE};
use crate::handle::{
    free_state, next_gen, pool_first_gen, state_gen, Entry, Handle, HandleTable, Loc, ALLOCATED,
    FREE_PENDING, GEN_SHIFT, MAX_FRAMES, MAX_HANDLES_PER_CLASS, MAX_ZSPAGES_PER_CLASS, MOVING,
    READERS_MASK, WRITING,
};
use crate::stats::{ClassStats, PoolStats};
use crate::{Error, PAGE_SIZE};

/// "No zspage / no object" in links and free lists.
const NONE: u32 = u32::MAX;
/// "No unique class has this index" in `Pool::position_of_index`.
const NO_CLASS: u8 = u8::MAX;

/// How much of an object [`Pool::prefetch_object`] asks for: four lines start the codec's
/// first reads and the hardware prefetcher's stream; asking for a whole page's lines at once
/// fills the core's miss buffers and stalls the load in progress (0.918 vs 0.909 of raw for
/// 512 bytes, BENCHMARKS.md section 1).
const PREFETCH_OBJECT_BYTES: usize = 256;

/// Fullness groups: empty, 1-9%, 10-19%, ..., 90-99%, full (`ZS_INUSE_RATIO_*`).
pub const NR_FULLNESS_GROUPS: usize = 12;
const RATIO_0: usize = 0;
const RATIO_10: usize = 1;
const RATIO_99: usize = 10;
const RATIO_100: usize = 11;
/// Header of a free slot: next free index shifted left, tag bit 0 clear.
const fn free_link(next: u32) -> u64 {
    (next as u64) << 1
}
/// Header of an allocated slot: handle-table slot shifted left, tag bit 0 set.
const fn allocated_tag(handle_slot: u32) -> u64 {
    ((handle_slot as u64) << 1) | 1
}

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
/// How long `write` waits for readers of the same object before reporting `Busy`.
const WRITE_WAIT_SPINS: u32 = 4096;

/// `get_fullness_group()`: 0 empty, 11 full, else `100*inuse/opz/10 + 1`.
pub(crate) fn fullness_group(inuse: usize, opz: usize) -> usize {
    if inuse == 0 {
        RATIO_0
    } else if inuse == opz {
        RATIO_100
    } else {
        // +1 so that 1 object of 127 (ratio 0) counts as 10%, as in the kernel.
        100 * inuse / opz / 10 + 1
    }
}

fn backoff(spins: &mut u32) {
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
    *spins = spins.saturating_add(1);
}

/// Metadata of one zspage (the kernel's `struct zspage`); protected by its class lock.
#[derive(Clone, Debug)]
struct ZsPage {
    /// First arena frame of the virtually contiguous run of `pages_per_zspage` frames.
    frame: u32,
    inuse: u32,
    /// Head of the in-memory free-slot list (`NONE` when full).
    freeobj: u32,
    /// Fullness group it is listed in, or `u8::MAX` while unlisted (isolated by compaction).
    fullness: u8,
    live: bool,
    prev: u32,
    next: u32,
    /// Huge zspages keep their owner here instead of an in-object header.
    huge_owner: u32,
}

/// Everything the kernel marks "protected by class->lock".
struct ClassInner {
    size: usize,
    ppz: usize,
    opz: usize,
    huge: bool,
    zspages: Vec<ZsPage>,
    free_ids: Vec<u32>,
    /// Head (most recently inserted) of each fullness list; lists are doubly linked via ids.
    heads: [u32; NR_FULLNESS_GROUPS],
    group_count: [usize; NR_FULLNESS_GROUPS],
    obj_allocated: usize,
    obj_used: usize,
    free_handles: Vec<u32>,
    next_handle: u32,
}

impl ClassInner {
    fn slot_off(&self, frame: u32, obj_idx: u32) -> usize {
        frame as usize * PAGE_SIZE + obj_idx as usize * self.size
    }

    fn insert(&mut self, id: u32, fg: usize) {
        let head = self.heads[fg];
        {
            let z = &mut self.zspages[id as usize];
            z.prev = NONE;
            z.next = head;
            z.fullness = fg as u8;
        }
        if head != NONE {
            self.zspages[head as usize].prev = id;
        }
        self.heads[fg] = id;
        self.group_count[fg] += 1;
    }

    fn remove(&mut self, id: u32) {
        let (prev, next, fg) = {
            let z = &self.zspages[id as usize];
            (z.prev, z.next, z.fullness as usize)
        };
        debug_assert!(fg < NR_FULLNESS_GROUPS, "removing an unlisted zspage");
        if prev != NONE {
            self.zspages[prev as usize].next = next;
        } else {
            self.heads[fg] = next;
        }
        if next != NONE {
            self.zspages[next as usize].prev = prev;
        }
        let z = &mut self.zspages[id as usize];
        z.prev = NONE;
        z.next = NONE;
        z.fullness = u8::MAX;
        self.group_count[fg] -= 1;
    }

    fn group_of(&self, id: u32) -> usize {
        fullness_group(self.zspages[id as usize].inuse as usize, self.opz)
    }

    /// `fix_fullness_group`: moves a listed zspage to the list matching its ratio.
    fn fix_fullness(&mut self, id: u32) -> usize {
        let fg = self.group_of(id);
        if self.zspages[id as usize].fullness as usize != fg {
            self.remove(id);
            self.insert(id, fg);
        }
        fg
    }

    /// `find_get_zspage`: the first zspage of the fullest non-full group.
    fn find_get_zspage(&self) -> Option<u32> {
        (RATIO_0..=RATIO_99)
            .rev()
            .map(|fg| self.heads[fg])
            .find(|&h| h != NONE)
    }

    /// Registers a zspage on `frame` and threads its free list through the slot headers
    /// (`init_zspage`); this touches every page of it, as the kernel does.
    fn new_zspage(&mut self, frame: u32, arena: &Arena) -> u32 {
        let zs = ZsPage {
            frame,
            inuse: 0,
            freeobj: 0,
            fullness: u8::MAX,
            live: true,
            prev: NONE,
            next: NONE,
            huge_owner: NONE,
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.zspages[id as usize] = zs;
                id
            }
            None => {
                self.zspages.push(zs);
                (self.zspages.len() - 1) as u32
            }
        };
        if !self.huge {
            for i in 0..self.opz as u32 {
                let next = if i + 1 < self.opz as u32 { i + 1 } else { NONE };
                // SAFETY: the run was just handed to this class (exclusively ours), the slot
                // header is 8-byte aligned (sizes are multiples of 16) and we hold the class lock.
                unsafe { arena.write_header(self.slot_off(frame, i), free_link(next)) };
            }
        }
        self.obj_allocated += self.opz;
        self.insert(id, RATIO_0);
        id
    }

    /// Unregisters an empty, unlisted zspage; returns its first frame, which the caller
    /// gives back to the arena after dropping the class lock.
    fn release_zspage(&mut self, id: u32) -> u32 {
        let z = &mut self.zspages[id as usize];
        debug_assert!(z.inuse == 0 && z.fullness == u8::MAX && z.live);
        z.live = false;
        self.free_ids.push(id);
        self.obj_allocated -= self.opz;
        z.frame
    }

    /// `obj_malloc`: takes the first free slot of zspage `id` for handle slot `owner`.
    fn obj_malloc(&mut self, id: u32, owner: u32, arena: &Arena) -> u32 {
        let huge = self.huge;
        let off = {
            let z = &self.zspages[id as usize];
            debug_assert!(z.freeobj != NONE);
            self.slot_off(z.frame, z.freeobj)
        };
        let z = &mut self.zspages[id as usize];
        let idx = z.freeobj;
        if huge {
            z.freeobj = NONE;
            z.huge_owner = owner;
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            let link = unsafe { arena.read_header(off) };
            debug_assert!(link & 1 == 0, "free list points at an allocated slot");
            z.freeobj = (link >> 1) as u32;
            // SAFETY: as above.
            unsafe { arena.write_header(off, allocated_tag(owner)) };
        }
        z.inuse += 1;
        idx
    }

    /// `obj_free`: pushes slot `idx` of zspage `id` on its free list (LIFO).
    fn obj_free(&mut self, id: u32, idx: u32, arena: &Arena) {
        let off = self.slot_off(self.zspages[id as usize].frame, idx);
        let huge = self.huge;
        let z = &mut self.zspages[id as usize];
        if huge {
            z.huge_owner = NONE;
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            unsafe { arena.write_header(off, free_link(z.freeobj)) };
        }
        z.freeobj = idx;
        z.inuse -= 1;
    }

    /// Handle slot owning object `idx` of zspage `id`, if the slot is allocated.
    fn owner_of(&self, id: u32, idx: u32, arena: &Arena) -> Option<u32> {
        let z = &self.zspages[id as usize];
        if self.huge {
            (z.huge_owner != NONE).then_some(z.huge_owner)
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            let h = unsafe { arena.read_header(self.slot_off(z.frame, idx)) };
            (h & 1 == 1).then_some((h >> 1) as u32)
        }
    }

    /// `zs_can_compact`: pages that compaction could free in this class.
    fn can_compact(&self) -> usize {
        (self.obj_allocated - self.obj_used) / self.opz * self.ppz
    }

    fn take_handle_slot(&mut self) -> Result<u32, Error> {
        if let Some(s) = self.free_handles.pop() {
            return Ok(s);
        }
        if self.next_handle as usize >= MAX_HANDLES_PER_CLASS {
            return Err(Error::OutOfMemory);
        }
        self.next_handle += 1;
        Ok(self.next_handle - 1)
    }

    /// Takes the first zspage of the first non-empty group in `groups` off its list.
    fn isolate_first(&mut self, groups: impl Iterator<Item = usize>) -> Option<u32> {
        for fg in groups {
            let h = self.heads[fg];
            if h != NONE {
                self.remove(h);
                return Some(h);
            }
        }
        None
    }
}

/// One unique size class. Cache-line aligned (128 bytes: adjacent-line prefetch) so that
/// threads working in neighbouring classes do not share lines.
#[repr(align(128))]
struct SizeClass {
    info: ClassInfo,
    /// Payload bytes per slot (slot size minus header, or the slot if huge).
    capacity: usize,
    /// Bytes between slot start and payload (8, or 0 if huge).
    header: usize,
    handles: HandleTable,
    inner: Mutex<ClassInner>,
}

impl SizeClass {
    fn payload_off(&self, loc: Loc) -> usize {
        loc.frame as usize * PAGE_SIZE + loc.obj_idx as usize * self.info.size + self.header
    }
}

/// A zsmalloc pool. `Send + Sync`: classes lock independently (see the crate docs).
pub struct Pool {
    table: ClassTable,
    /// Parallel to `table.unique_classes()`.
    classes: Vec<SizeClass>,
    /// For each value of a handle's 8-bit class field, the position in `classes` of the unique
    /// class with that kernel index, or `NO_CLASS` (a merged-away index: no handle names it).
    /// One load instead of the class table's two on every handle resolution.
    position_of_index: Box<[u8; 256]>,
    arena: Arena,
    max_pages: usize,
    pages_held: AtomicUsize,
    pages_compacted: AtomicU64,
    compacting: AtomicBool,
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
            .map(|c| SizeClass {
                info: *c,
                capacity: c.payload_capacity(),
                header: if c.huge { 0 } else { HANDLE_SIZE },
                handles: HandleTable::new(first_gen),
                inner: Mutex::new(ClassInner {
                    size: c.size,
                    ppz: c.pages_per_zspage,
                    opz: c.objs_per_zspage,
                    huge: c.huge,
                    zspages: Vec::new(),
                    free_ids: Vec::new(),
                    heads: [NONE; NR_FULLNESS_GROUPS],
                    group_count: [0; NR_FULLNESS_GROUPS],
                    obj_allocated: 0,
                    obj_used: 0,
                    free_handles: Vec::new(),
                    next_handle: 0,
                }),
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
        self.alloc_impl(len, None)
    }

    /// Allocates a slot for `data.len()` bytes and writes `data` into it.
    pub fn alloc_write(&self, data: &[u8]) -> Result<Handle, Error> {
        self.alloc_impl(data.len(), Some(data))
    }

    fn alloc_impl(&self, len: usize, data: Option<&[u8]>) -> Result<Handle, Error> {
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
        Ok(Handle::new(gen, class.info.index, slot))
    }

    /// Takes the frames of one zspage of `class` from the arena and counts its pages.
    fn reserve_zspage_pages(&self, class: &SizeClass) -> Result<u32, Error> {
        let ppz = class.info.pages_per_zspage;
        let held = self.pages_held.fetch_add(ppz, Ordering::Relaxed);
        if held.saturating_add(ppz) > self.max_pages {
            self.pages_held.fetch_sub(ppz, Ordering::Relaxed);
            return Err(Error::OutOfMemory);
        }
        self.arena.alloc_run(ppz).ok_or_else(|| {
            self.pages_held.fetch_sub(ppz, Ordering::Relaxed);
            Error::OutOfMemory
        })
    }

    /// Gives back the frames of a zspage of `class` that is no longer registered.
    fn unreserve_zspage_pages(&self, class: &SizeClass, frame: u32) {
        let ppz = class.info.pages_per_zspage;
        self.arena.free_run(frame, ppz);
        self.pages_held.fetch_sub(ppz, Ordering::Relaxed);
    }

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
            len.min(class.capacity).min(PREFETCH_OBJECT_BYTES),
        );
    }

    fn resolve(&self, h: Handle) -> Result<(&SizeClass, &Entry), Error> {
        let pos = self.position_of_index[h.class_index() & 0xff];
        let class = self.classes.get(pos as usize).ok_or(Error::InvalidHandle)?;
        let entry = class.handles.get(h.slot()).ok_or(Error::InvalidHandle)?;
        Ok((class, entry))
    }

    fn acquire_read(entry: &Entry, gen: u64) -> Result<(), Error> {
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

    fn release_read(&self, class: &SizeClass, entry: &Entry, slot: u32) {
        let prev = entry.state.fetch_sub(1, Ordering::AcqRel);
        if prev & FREE_PENDING != 0 && prev & READERS_MASK == 1 {
            // The last reader of an object freed meanwhile completes the free.
            entry
                .state
                .store(free_state(next_gen(state_gen(prev))), Ordering::Release);
            self.release_slot(class, entry, slot);
        }
    }

    /// Read access without a copy: zspages are virtually contiguous, so even objects that
    /// straddle a 4 KiB boundary are one slice.
    pub fn read(&self, h: Handle) -> Result<ObjRef<'_>, Error> {
        let (class, entry) = self.resolve(h)?;
        Self::acquire_read(entry, h.generation())?;
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        // SAFETY: our reader count excludes writers, moves and frees of this object, and the
        // payload lies inside the slot of a live zspage; the slice dies with the guard.
        let bytes = unsafe { self.arena.bytes(class.payload_off(loc), class.capacity) };
        Ok(ObjRef {
            pool: self,
            class,
            entry,
            slot: h.slot(),
            bytes,
        })
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
        Ok(class.capacity)
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
            if data.len() > class.capacity {
                return Err(Error::TooLarge {
                    size: data.len(),
                    max: class.capacity,
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
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        // SAFETY: WRITING excludes readers, other writers, moves and frees of this object.
        unsafe { self.arena.write(class.payload_off(loc), data) };
        entry.state.fetch_and(!WRITING, Ordering::Release);
        Ok(())
    }

    /// Frees the object (`zs_free`). A stale or doubly freed handle gives
    /// [`Error::InvalidHandle`]. If a read guard on the object is alive, the slot is released
    /// when the last guard drops; the handle is invalid from now on either way.
    pub fn free(&self, h: Handle) -> Result<(), Error> {
        let (class, entry) = self.resolve(h)?;
        let gen = h.generation();
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
                    return Ok(());
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
                break;
            }
        }
        self.release_slot(class, entry, h.slot());
        Ok(())
    }

    /// Returns a dead entry's slot to its zspage and the entry to the class's handle list;
    /// frees the zspage if it became empty.
    fn release_slot(&self, class: &SizeClass, entry: &Entry, slot: u32) {
        let mut g = class.inner.lock();
        let loc = Loc::unpack(entry.loc.load(Ordering::Relaxed));
        g.obj_free(loc.zsid, loc.obj_idx, &self.arena);
        g.obj_used -= 1;
        g.free_handles.push(slot);
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

    /// Shrinker count: pages compaction could free now (sum of per-class `freeable`).
    pub fn compactable_pages(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.inner.lock().can_compact())
            .sum()
    }

    /// Compacts every class (`zs_compact`): moves objects from the sparsest zspages into the
    /// fullest and frees the emptied ones. Returns the pages freed. Only one compaction runs
    /// at a time; a concurrent call returns 0 at once.
    pub fn compact(&self) -> usize {
        if self.compacting.swap(true, Ordering::Acquire) {
            return 0;
        }
        let freed: usize = self
            .classes
            .iter()
            .rev()
            .map(|c| self.compact_class(c))
            .sum();
        // Compaction runs under memory pressure: give the cached pages back too.
        self.arena.trim();
        self.pages_compacted
            .fetch_add(freed as u64, Ordering::Relaxed);
        self.compacting.store(false, Ordering::Release);
        freed
    }

    /// Claims an object for moving; false if it has readers, is being freed or is dead.
    fn begin_move(entry: &Entry) -> bool {
        let mut spins = 0;
        loop {
            let s = entry.state.load(Ordering::Relaxed);
            if s & ALLOCATED == 0 || s & FREE_PENDING != 0 || s & READERS_MASK != 0 {
                return false;
            }
            if s & WRITING != 0 {
                // Writers never take the class lock, so waiting here cannot deadlock.
                backoff(&mut spins);
                continue;
            }
            if entry
                .state
                .compare_exchange_weak(s, s | MOVING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    fn compact_class(&self, class: &SizeClass) -> usize {
        if class.info.huge {
            return 0;
        }
        let mut freed = 0;
        loop {
            // One (src, dst) round per lock hold, so allocations in this class interleave.
            let mut g = class.inner.lock();
            if g.can_compact() == 0 {
                break;
            }
            let Some(src) = g.isolate_first(RATIO_10..=RATIO_99) else {
                break;
            };
            let Some(dst) = g.isolate_first((RATIO_10..=RATIO_99).rev()) else {
                let fg = g.group_of(src);
                g.insert(src, fg);
                break;
            };
            let opz = g.opz as u32;
            let mut pinned = false;
            for idx in 0..opz {
                if g.zspages[src as usize].inuse == 0 || g.zspages[dst as usize].inuse == opz {
                    break;
                }
                let Some(owner) = g.owner_of(src, idx, &self.arena) else {
                    continue;
                };
                let entry = class
                    .handles
                    .get(owner)
                    .expect("allocated slot has a handle entry");
                if !Self::begin_move(entry) {
                    // A reader holds it (or a free is completing): leave this zspage.
                    pinned = true;
                    continue;
                }
                let old = Loc {
                    zsid: src,
                    obj_idx: idx,
                    frame: g.zspages[src as usize].frame,
                };
                let new_idx = g.obj_malloc(dst, owner, &self.arena);
                let new = Loc {
                    zsid: dst,
                    obj_idx: new_idx,
                    frame: g.zspages[dst as usize].frame,
                };
                // SAFETY: MOVING excludes all access to the source payload; the destination
                // slot was free (nobody references it) and we hold the class lock. Distinct
                // slots never overlap.
                unsafe {
                    self.arena.copy(
                        class.payload_off(old),
                        class.payload_off(new),
                        class.capacity,
                    )
                };
                entry.loc.store(new.pack(), Ordering::Relaxed);
                entry.state.fetch_and(!MOVING, Ordering::Release);
                g.obj_free(src, idx, &self.arena);
            }
            let dst_fg = g.group_of(dst);
            g.insert(dst, dst_fg);
            if g.zspages[src as usize].inuse == 0 {
                let frame = g.release_zspage(src);
                drop(g);
                self.unreserve_zspage_pages(class, frame);
                freed += class.info.pages_per_zspage;
            } else {
                let fg = g.group_of(src);
                g.insert(src, fg);
                drop(g);
            }
            if pinned {
                break;
            }
        }
        freed
    }

    /// Per-class statistics with the kernel's debugfs `classes` columns, plus pool totals.
    pub fn stats(&self) -> PoolStats {
        let classes = self
            .classes
            .iter()
            .map(|c| {
                let g = c.inner.lock();
                ClassStats {
                    index: c.info.index,
                    size: c.info.size,
                    fullness: g.group_count,
                    obj_allocated: g.obj_allocated,
                    obj_used: g.obj_used,
                    pages_used: g.obj_allocated / g.opz * g.ppz,
                    pages_per_zspage: g.ppz,
                    objs_per_zspage: g.opz,
                    freeable: g.can_compact(),
                    huge: g.huge,
                }
            })
            .collect();
        PoolStats {
            classes,
            total_pages: self.total_pages(),
            pages_compacted: self.pages_compacted(),
            cached_pages: self.cached_pages(),
        }
    }

    /// Checks the pool's structural invariants; for tests, on a quiescent pool (no call in
    /// flight on other threads). Returns a description of the first violation.
    ///
    /// Checked: every live zspage is in exactly one fullness list, the one matching its
    /// in-use ratio; each list's length matches its counter; each zspage's free list has
    /// `objs_per_zspage - inuse` slots and its allocated headers point to live handle
    /// entries that point back; the sum of `inuse` is `obj_used` and equals the live
    /// handles; `obj_allocated` and the pool's page count match the zspages.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut pages = 0;
        for c in &self.classes {
            let g = c.inner.lock();
            let ci = c.info.index;
            let live: Vec<u32> = (0..g.zspages.len() as u32)
                .filter(|&i| g.zspages[i as usize].live)
                .collect();
            let mut seen = vec![false; g.zspages.len()];
            for fg in 0..NR_FULLNESS_GROUPS {
                let mut n = 0;
                let mut prev = NONE;
                let mut cur = g.heads[fg];
                while cur != NONE {
                    let z = &g.zspages[cur as usize];
                    if !z.live || seen[cur as usize] {
                        return Err(format!("class {ci}: zspage {cur} dead or listed twice"));
                    }
                    seen[cur as usize] = true;
                    if z.fullness as usize != fg || g.group_of(cur) != fg {
                        return Err(format!(
                            "class {ci}: zspage {cur} inuse {} in group {fg} (expected {})",
                            z.inuse,
                            g.group_of(cur)
                        ));
                    }
                    if z.prev != prev {
                        return Err(format!("class {ci}: zspage {cur} has a broken prev link"));
                    }
                    prev = cur;
                    cur = z.next;
                    n += 1;
                }
                if n != g.group_count[fg] {
                    return Err(format!(
                        "class {ci}: group {fg} has {n} zspages, counter says {}",
                        g.group_count[fg]
                    ));
                }
            }
            let mut inuse_sum = 0;
            for &id in &live {
                if !seen[id as usize] {
                    return Err(format!(
                        "class {ci}: live zspage {id} is in no fullness list"
                    ));
                }
                let z = &g.zspages[id as usize];
                inuse_sum += z.inuse as usize;
                let mut free_len = 0;
                let mut cur = z.freeobj;
                while cur != NONE {
                    free_len += 1;
                    if free_len > g.opz || cur as usize >= g.opz {
                        return Err(format!("class {ci}: zspage {id} free list is corrupt"));
                    }
                    cur = if g.huge {
                        NONE
                    } else {
                        // SAFETY: header of a slot in a live zspage; class lock held.
                        let link = unsafe { self.arena.read_header(g.slot_off(z.frame, cur)) };
                        if link & 1 != 0 {
                            return Err(format!(
                                "class {ci}: zspage {id} free list reaches an allocated slot"
                            ));
                        }
                        (link >> 1) as u32
                    };
                }
                if free_len != g.opz - z.inuse as usize {
                    return Err(format!(
                        "class {ci}: zspage {id} free list has {free_len} slots, expected {}",
                        g.opz - z.inuse as usize
                    ));
                }
                let mut allocated = 0;
                for idx in 0..g.opz as u32 {
                    if let Some(owner) = g.owner_of(id, idx, &self.arena) {
                        allocated += 1;
                        let e = c
                            .handles
                            .get(owner)
                            .ok_or_else(|| format!("class {ci}: owner {owner} has no entry"))?;
                        let s = e.state.load(Ordering::Acquire);
                        let l = Loc::unpack(e.loc.load(Ordering::Acquire));
                        if s & ALLOCATED == 0 || (l.zsid, l.obj_idx, l.frame) != (id, idx, z.frame)
                        {
                            return Err(format!(
                                "class {ci}: slot {id}/{idx} and handle {owner} disagree"
                            ));
                        }
                    }
                }
                if allocated != z.inuse as usize {
                    return Err(format!(
                        "class {ci}: zspage {id} has {allocated} tagged slots, inuse {}",
                        z.inuse
                    ));
                }
            }
            if inuse_sum != g.obj_used {
                return Err(format!(
                    "class {ci}: sum of inuse {inuse_sum} != obj_used {}",
                    g.obj_used
                ));
            }
            let live_handles = g.next_handle as usize - g.free_handles.len();
            if live_handles != g.obj_used {
                return Err(format!(
                    "class {ci}: {live_handles} live handles != obj_used {}",
                    g.obj_used
                ));
            }
            if g.obj_allocated != live.len() * g.opz {
                return Err(format!(
                    "class {ci}: obj_allocated {} != {} zspages",
                    g.obj_allocated,
                    live.len()
                ));
            }
            pages += live.len() * g.ppz;
        }
        if pages != self.total_pages() {
            return Err(format!(
                "pool: zspages hold {pages} pages, counter says {}",
                self.total_pages()
            ));
        }
        Ok(())
    }

    /// Returns every page kept resident for reuse by freed zspages to the OS; returns how
    /// many. [`Pool::compact`] does this too. These pages are not counted by
    /// [`Pool::total_pages`] (the kernel's freed pages likewise sit on per-CPU lists).
    pub fn trim(&self) -> usize {
        self.arena.trim()
    }

    /// Returns the cached pages whose decay time ([`MemoryPolicy::free_page_decay_ms`]) has
    /// passed to the OS; returns how many. Zspage allocations and frees do this on their own;
    /// an idle pool's owner can call it from a timer.
    pub fn purge_expired(&self) -> usize {
        self.arena.purge_expired()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChainRule;

    fn pool(chain: usize) -> Pool {
        Pool::new(PoolConfig {
            chain_size: chain,
            chain_rule: ChainRule::MinWaste,
        })
        .unwrap()
    }

    #[test]
    fn pool_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Pool>();
        assert_send_sync::<ObjRef<'_>>();
    }

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
    fn fullness_group_matches_kernel_buckets() {
        assert_eq!(fullness_group(0, 127), 0);
        assert_eq!(fullness_group(1, 127), 1);
        assert_eq!(fullness_group(13, 127), 2);
        assert_eq!(fullness_group(126, 127), 10);
        assert_eq!(fullness_group(127, 127), 11);
        assert_eq!(fullness_group(1, 2), 6);
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

    #[test]
    fn compaction_frees_sparse_zspages_and_keeps_handles() {
        let p = pool(4);
        let hs: Vec<Handle> = (0..200u32)
            .map(|i| p.alloc_write(&[i as u8; 1000]).unwrap())
            .collect();
        let before = p.total_pages();
        let mut kept = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            if i % 3 == 0 {
                kept.push((i, h));
            } else {
                p.free(h).unwrap();
            }
        }
        p.check_invariants().unwrap();
        let can = p.compactable_pages();
        assert!(can > 0);
        let freed = p.compact();
        assert_eq!(freed, can);
        assert_eq!(p.pages_compacted(), freed as u64);
        assert_eq!(p.compactable_pages(), 0);
        assert!(p.total_pages() < before);
        p.check_invariants().unwrap();
        for (i, h) in kept {
            assert!(p.read(h).unwrap()[..1000].iter().all(|&b| b == i as u8));
        }
    }

    #[test]
    fn compaction_skips_objects_with_readers() {
        let p = pool(4);
        let hs: Vec<Handle> = (0..40u32)
            .map(|i| p.alloc_write(&[i as u8; 1000]).unwrap())
            .collect();
        for h in &hs[1..36] {
            p.free(*h).unwrap();
        }
        let r = p.read(hs[0]).unwrap();
        p.compact();
        assert_eq!(r[0], 0);
        drop(r);
        p.check_invariants().unwrap();
        p.compact();
        assert_eq!(p.compactable_pages(), 0);
        for (i, h) in hs.iter().enumerate().filter(|(i, _)| *i == 0 || *i >= 36) {
            assert!(p.read(*h).unwrap()[..1000].iter().all(|&b| b == i as u8));
        }
        p.check_invariants().unwrap();
    }

    #[test]
    fn stats_table_shows_kernel_columns() {
        // Class 1568 at chain 8 (min-waste): 5 pages, 13 objects. 20 objects -> 2 zspages,
        // one full (100%) and one with 7 of 13 (53%: group 6, printed under "60%", since the
        // kernel labels each bucket by its upper bound).
        let p = pool(8);
        let hs: Vec<Handle> = (0..20)
            .map(|_| p.alloc_write(&[1u8; 1560]).unwrap())
            .collect();
        let st = p.stats();
        let row = st.classes.iter().find(|c| c.size == 1568).unwrap();
        assert_eq!(
            (row.obj_allocated, row.obj_used, row.pages_used),
            (26, 20, 10)
        );
        assert_eq!((row.fullness[6], row.fullness[11], row.freeable), (1, 1, 0));
        let text = st.to_string();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("1568"))
            .unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "96", "1568", "0", "0", "0", "0", "0", "1", "0", "0", "0", "0", "1", "26", "20",
                "10", "5", "0"
            ]
        );
        let total: Vec<&str> = text.lines().last().unwrap().split_whitespace().collect();
        assert_eq!(
            total,
            [
                "Total", "0", "0", "0", "0", "0", "1", "0", "0", "0", "0", "1", "26", "20", "10",
                "0"
            ]
        );
        for h in hs.iter().take(10) {
            p.free(*h).unwrap();
        }
        // 3 + 7 live objects in 26 slots: 16 free slots, so one 5-page zspage is freeable.
        assert_eq!(p.compactable_pages(), 5);
        assert_eq!(
            p.stats()
                .classes
                .iter()
                .find(|c| c.size == 1568)
                .unwrap()
                .freeable,
            5
        );
        assert_eq!(p.compact(), 5);
        assert_eq!(p.total_pages(), 5);
        for h in &hs[10..] {
            assert!(p.read(*h).unwrap()[..1560].iter().all(|&b| b == 1));
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
}
