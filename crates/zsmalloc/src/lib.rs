// SPDX-License-Identifier: MIT
//! uzswap-zsmalloc: the kernel's zsmalloc allocator in user space, on real OS pages.
//!
//! **Owns**: the size-class table (255 classes of 16-byte steps from 32 bytes, pages per
//! zspage by the kernel's `min-waste` rule or the `used-percent` rule of "zsmalloc: turn
//! zspage order into runtime variable" (v3, Oct 2022), chain size 1..16, merging, huge
//! classes), zspages made of real memory, opaque handles, the 12 fullness groups, compaction
//! and the debugfs-style per-class statistics.
//!
//! **Modules** (one job each):
//!
//! | module | job |
//! |---|---|
//! | `class` | size classes: pages and objects per zspage, merging, huge classes ([`ClassTable`]) |
//! | `pool` | [`Pool`]: creation, allocation (`zs_malloc`), free (`zs_free`), pages held |
//! | `access` | handle resolution, reads ([`ObjRef`]), writes, prefetch hints |
//! | `compact` | compaction (`zs_compact`) |
//! | `zspage` | one class's zspages, fullness lists and free-slot lists (under the class lock) |
//! | `fullness` | fullness groups (`ZS_INUSE_RATIO_*`) |
//! | `handle` | handles, the per-object state word, the per-class handle tables |
//! | `arena` | the pool's address space and real pages (the only unsafe memory access) |
//! | `stats`, `check` | [`PoolStats`] (the kernel's debugfs table), the invariant checker |
//!
//! **Why zspages**: compressed pages are 30..4096 bytes; packing them into slots of fixed size
//! classes, with a slot allowed to straddle the 4 KiB pages of a multi-page zspage, wastes
//! little and never needs contiguous physical memory. Sizes include the kernel's 8-byte
//! per-object header (`+8` before the class lookup), so page counts match zram's exactly.
//!
//! **Data layout** (class 1568 bytes at chain 8: 5 pages, 13 objects):
//! ```text
//!  frame f          f+1              f+2 ...                      f+4
//!  |hdr|obj0 ... |hdr|obj1 ...|hdr|obj2 ..|.. obj2 |hdr|obj3 ...   ...|obj12   |waste 96|
//!  hdr (8 bytes): allocated -> handle slot << 1 | 1;  free -> next free obj_idx << 1
//! ```
//! Each pool reserves one large `PROT_NONE` range of address space; a zspage is a virtually
//! contiguous run of `pages_per_zspage` frames in it, so every object, even one straddling
//! a page boundary, is one slice (reads need no copy). Emptied zspages are `MADV_DONTNEED`ed:
//! the pool's page count ([`Pool::total_pages`], the kernel's `zs_get_total_pages`) is the
//! memory its zspages hold, and RSS follows it; only freed zspages' pages stay resident in a
//! free-run cache for reuse until they have been unused for a decay time or the cache exceeds
//! its bound ([`MemoryPolicy`], default 1 s and 2 MiB; decay 0 is the kernel's behaviour), so
//! RSS is `total_pages + cached_pages` ([`Pool::cached_pages`], returned by [`Pool::trim`],
//! [`Pool::purge_expired`] and [`Pool::compact`]). `arena.rs` is the only module with unsafe
//! operations. Huge classes hold one object per page with no header.
//!
//! **Handles** (`handle.rs`): `generation:24 | class index:8 | slot:32`. Each class has its own
//! table of entries `{state, loc}`; `state` carries the generation (stale handles fail with
//! [`Error::InvalidHandle`] for the pool's lifetime: a slot is retired before its generation
//! wraps), a per-object reader count / writer / mover / free-pending bits and a version that
//! every move and write advances; `loc` is where the object lives now. Compaction rewrites
//! `loc`, never the handle. Besides read guards ([`Pool::read`]) there are optimistic reads
//! ([`Pool::read_optimistic`]): no reader count, the state word checked after the read, as a
//! seqlock reader checks its sequence.
//!
//! **Locks**: one `Mutex<ClassInner>` per class (fullness lists, zspage free lists, slot
//! headers, counters, handle-slot free list) and the arena's mutex (free-run lists), never
//! held together: like the kernel, zspage pages are taken and given back with the class lock
//! dropped. There is no pool-wide lock: classes never contend with each other; reads, writes
//! and frees resolve handles lock-free through the per-object state word, which orders them
//! against each other and against compaction (a spinning waiter never holds a lock the
//! holder needs). The compactor holds one class lock at a time and only moves objects it can
//! claim (no readers); a reader never sees a half-moved object. Page counters are atomics.

#![deny(missing_docs)]

mod access;
mod arena;
mod check;
mod class;
mod compact;
mod fullness;
mod handle;
mod pool;
mod stats;
mod sync;
mod zspage;

pub use access::{ObjHint, ObjRef};
pub use arena::address_room;
pub use arena::{
    thread_cpu_ns, MemoryPolicy, DEFAULT_FREE_PAGE_DECAY_MS, DEFAULT_MAX_CACHED_PAGES,
};
pub use class::{
    ChainRule, ClassInfo, ClassTable, PoolConfig, CLASS_DELTA, DEFAULT_CHAIN_SIZE, HANDLE_SIZE,
    MAX_ALLOC_SIZE, MAX_CHAIN_SIZE, MIN_ALLOC_SIZE, NUM_CLASSES,
};
pub use fullness::NR_FULLNESS_GROUPS;
pub use handle::{Handle, HANDLE_ENTRY_SIZE};
pub use pool::Pool;
pub use stats::{ClassStats, PoolStats};

/// Size of a page, and of every frame of a zspage (re-exported from `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;

/// Errors of the allocator. The first three mirror `zs_malloc`'s `-EINVAL`, `-ENOSPC` and
/// `-ENOMEM`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Allocation of 0 bytes.
    #[error("zero-size allocation")]
    ZeroSize,
    /// Object (or buffer) larger than the allowed maximum.
    #[error("{size} bytes exceed the maximum of {max}")]
    TooLarge {
        /// Bytes asked for.
        size: usize,
        /// Largest allowed.
        max: usize,
    },
    /// No pages left (pool limit reached or address space exhausted).
    #[error("out of memory")]
    OutOfMemory,
    /// Freed, stale or forged handle.
    #[error("invalid handle (freed, stale or never allocated)")]
    InvalidHandle,
    /// The object is being read (a live `ObjRef`), so it cannot be written now.
    #[error("object is busy (read guard alive)")]
    Busy,
    /// Chain size outside 1..=16.
    #[error("invalid chain size {0}: must be 1 to 16")]
    InvalidChainSize(usize),
    /// Unknown chain rule name.
    #[error("unknown chain rule {0:?}: expected \"min-waste\" or \"used-percent\"")]
    InvalidChainRule(String),
    /// The address-space reservation failed (errno).
    #[error("cannot reserve the pool's address space (errno {0})")]
    ArenaInit(i32),
}

#[cfg(all(test, loom))]
mod loom_models;
