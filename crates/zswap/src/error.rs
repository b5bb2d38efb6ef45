// SPDX-License-Identifier: MIT
//! The cache's error type: one variant per cause.

use crate::{SwapSlot, MAX_AREAS, MAX_CGROUPS, MAX_POOLS, PAGE_SIZE};

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("no swap area {0} (add a swap file first)")]
    NoSwapArea(u32),
    #[error("swap area {0} was already added")]
    AreaExists(u32),
    #[error("swap area number {0} is beyond the maximum of {MAX_AREAS}")]
    TooManyAreas(u32),
    #[error("slot {0:?} lies beyond its swap area")]
    SlotOutOfRange(SwapSlot),
    #[error("page buffer has {0} bytes, expected {PAGE_SIZE}")]
    BadPageLength(usize),
    #[error("decompression of slot {0:?} failed (corrupt pool data)")]
    Decompress(SwapSlot),
    #[error("backing store: {0}")]
    Backing(#[from] uzswap_backing::Error),
    #[error("zsmalloc pool: {0}")]
    Pool(uzswap_zsmalloc::Error),
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    #[error("no cgroup {0}")]
    NoSuchCgroup(u32),
    #[error("no NUMA node {0} (see Params::numa_nodes)")]
    NoSuchNode(usize),
    #[error("cgroup {0} still has online children")]
    CgroupBusy(u32),
    #[error("too many cgroups (at most {MAX_CGROUPS})")]
    TooManyCgroups,
    #[error("too many compressor pools alive (at most {MAX_POOLS})")]
    TooManyPools,
    #[error("cgroup {0} has zswap writeback disabled: the page can't go to the swap file")]
    WritebackDisabled(u32),
    #[error("pressure monitor: {0}")]
    Pressure(String),
    /// `set_params` with a different `lru` (fixed when the cache is created).
    #[error("lru can't change at run time (the cache was created with {current}, asked for {requested})")]
    LruModeFixed {
        /// The cache's LRU mode.
        current: crate::LruMode,
        /// The mode asked for.
        requested: crate::LruMode,
    },
}
