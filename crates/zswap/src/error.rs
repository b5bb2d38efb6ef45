// SPDX-License-Identifier: MIT
//! The cache's error type: one variant per cause, with the underlying error kept as its
//! `source()` (never repeated in the message, so a printed chain shows each cause once).

use std::io;
use std::path::PathBuf;

use crate::{Algorithm, SwapSlot, MAX_AREAS, MAX_CGROUPS, MAX_POOLS, PAGE_SIZE};

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No backing store was attached for this swap area.
    #[error("no swap area {0} (attach a backing store first)")]
    NoSwapArea(u32),
    /// A backing store for this area was attached already.
    #[error("swap area {0} was already added")]
    AreaExists(u32),
    /// The area number is not below [`MAX_AREAS`].
    #[error("swap area number {0} is beyond the maximum of {MAX_AREAS}")]
    TooManyAreas(u32),
    /// The slot's offset lies beyond its area's capacity.
    #[error("slot {0} lies beyond its swap area")]
    SlotOutOfRange(SwapSlot),
    /// A page buffer that is not [`PAGE_SIZE`] bytes.
    #[error("page buffer has {0} bytes, expected {PAGE_SIZE}")]
    BadPageLength(usize),
    /// Load: the pool no longer holds the entry's object (its handle is stale). The entry is
    /// kept, as the kernel keeps an entry whose decompression failed.
    #[error("slot {slot}: the pool no longer holds its object (stale handle)")]
    StaleHandle {
        /// The slot loaded.
        slot: SwapSlot,
        /// What the pool said.
        #[source]
        source: uzswap_zsmalloc::Error,
    },
    /// Load: the pool object is shorter than the entry's compressed length.
    #[error("slot {slot}: the pool object holds {capacity} bytes, the entry {length}")]
    ShortObject {
        /// The slot loaded.
        slot: SwapSlot,
        /// The entry's compressed length.
        length: usize,
        /// The object's payload capacity.
        capacity: usize,
    },
    /// Load: the compressor rejected the pool data, or it did not decompress to one page
    /// (`decompress_fail`). The entry is kept; the page handed back is zeroed.
    #[error("slot {slot}: {compressor} could not decompress its pool data (corrupt)")]
    CorruptData {
        /// The slot loaded.
        slot: SwapSlot,
        /// The entry pool's compressor.
        compressor: Algorithm,
        /// The decoder's error.
        #[source]
        source: uzswap_compress::Error,
    },
    /// The backing store failed (I/O error, full, checksum mismatch, ...).
    #[error("backing store")]
    Backing(#[from] uzswap_backing::Error),
    /// zsmalloc could not create a pool.
    #[error("zsmalloc pool")]
    Pool(#[source] uzswap_zsmalloc::Error),
    /// A parameter outside its range (or an unknown name).
    #[error("invalid parameter {name} = {value}: expected {expected}")]
    InvalidParam {
        /// The parameter (`Params` field name).
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// `set_params` with a different `numa_nodes` (fixed when the cache is created).
    #[error(
        "numa_nodes can't change at run time (the cache has {current}, asked for {requested})"
    )]
    NumaNodesFixed {
        /// The cache's node count.
        current: usize,
        /// The node count asked for.
        requested: usize,
    },
    /// No such cgroup (never created, or offline where an online one is needed).
    #[error("no cgroup {0}")]
    NoSuchCgroup(u32),
    /// The root cgroup can't be removed.
    #[error("the root cgroup can't be removed")]
    RootCgroup,
    /// A node not below `Params::numa_nodes`.
    #[error("no NUMA node {0} (see Params::numa_nodes)")]
    NoSuchNode(usize),
    /// `remove_cgroup` of a cgroup with online children (as rmdir refuses).
    #[error("cgroup {0} still has online children")]
    CgroupBusy(u32),
    /// Every cgroup id was handed out ([`MAX_CGROUPS`]).
    #[error("too many cgroups (at most {MAX_CGROUPS})")]
    TooManyCgroups,
    /// [`MAX_POOLS`] pools are alive (old pools still hold entries).
    #[error("too many compressor pools alive (at most {MAX_POOLS})")]
    TooManyPools,
    /// `swap_out` of a page the cache rejected, for a cgroup that may not write to the backing
    /// store.
    #[error("cgroup {0} has zswap writeback disabled: the page can't go to the swap file")]
    WritebackDisabled(u32),
    /// `set_params` with a different `lru` (fixed when the cache is created).
    #[error("lru can't change at run time (the cache was created with {current}, asked for {requested})")]
    LruModeFixed {
        /// The cache's LRU mode.
        current: crate::LruMode,
        /// The mode asked for.
        requested: crate::LruMode,
    },
    /// The shrink worker thread could not be started.
    #[error("cannot start the shrink worker thread")]
    WorkerSpawn(#[source] io::Error),
    /// A PSI trigger that is not `"some|full STALL_US WINDOW_US"` with `0 < STALL_US <= WINDOW_US`.
    #[error("bad PSI trigger {trigger:?}: expected \"some|full STALL_US WINDOW_US\"")]
    PressureTrigger {
        /// The trigger given.
        trigger: String,
    },
    /// The pressure file could not be opened.
    #[error("cannot open the pressure file {}", .path.display())]
    PressureOpen {
        /// `/proc/pressure/memory` or a cgroup's `memory.pressure`.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused the trigger.
    #[error("cannot arm PSI trigger {trigger:?} on {}{}", .path.display(), arm_hint(.source))]
    PressureArm {
        /// The pressure file.
        path: PathBuf,
        /// The trigger written.
        trigger: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The pressure monitor thread could not be started.
    #[error("cannot start the pressure monitor thread")]
    PressureSpawn(#[source] io::Error),
}

/// What the kernel's EINVAL for a PSI trigger usually means.
fn arm_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EINVAL) {
        " (windows must be 0.5..10 s; without CAP_SYS_RESOURCE a multiple of 2 s)"
    } else {
        ""
    }
}
