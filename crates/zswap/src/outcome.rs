// SPDX-License-Identifier: MIT
//! What the public operations return: store and load outcomes with the reasons for a reject,
//! and the diagnostic snapshots (slot state, pool info, metadata usage).

use serde::Serialize;

use crate::Algorithm;

/// Why a store was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RejectReason {
    /// `enabled` is off.
    Disabled,
    /// The pool is at max_pool_percent (or above the accept threshold after hitting it).
    PoolLimit,
    /// The cgroup or an ancestor is at memory.zswap.max.
    CgroupLimit,
    /// The compressor failed (reject_compress_fail).
    CompressFail,
    /// The page doesn't compress and may not be stored as-is (reject_compress_poor).
    CompressPoor,
    /// The pool could not allocate (reject_alloc_fail).
    AllocFail,
    /// No room for the entry metadata (reject_kmemcache_fail).
    KmemcacheFail,
    /// No swap file for the slot's area.
    NoSwapArea,
    /// The slot's offset is beyond its area.
    SlotOutOfRange,
    /// The page buffer is not 4096 bytes.
    BadPageLength,
    /// Unknown cgroup.
    NoSuchCgroup,
    /// The node given to `store_on_node` is not below `Params::numa_nodes`.
    NoSuchNode,
}

/// Result of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum StoreOutcome {
    /// Compressed into the pool (or, with `Params::zero_page_entries`, a zero-filled page kept
    /// with an entry of length 0: a zswap store, counted in zswpout).
    Stored,
    /// A zero-filled page: recorded in the slot, no entry, no pool memory (the swap core's
    /// zeromap; swpout_zero).
    StoredZero,
    /// Did not compress; stored as-is (the cgroup may write back).
    StoredIncompressible,
    /// Not stored (from `swap_out`: written to the swap file instead).
    Rejected(RejectReason),
}

/// Result of a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LoadOutcome {
    /// Served from the pool (or the zero map).
    Hit,
    /// Read from the swap file (the entry had been written back, or the page was swapped out
    /// directly).
    FromSwapFile,
    /// Nothing stored for this slot.
    Absent,
}

/// What one slot holds (tests and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Nothing in the pool (the slot may still have a block in the backing store).
    Empty,
    /// A zero-filled page without an entry.
    Zero,
    /// An entry. `length` 0: a zero-filled page kept with an entry
    /// (`Params::zero_page_entries`); it has no pool object, so `compressor` is only the
    /// current pool's and `referenced` is false.
    Stored {
        /// Compressed length (`PAGE_SIZE` for a page kept as-is).
        length: u16,
        /// The entry pool's compressor.
        compressor: Algorithm,
        /// The second-chance bit.
        referenced: bool,
    },
}

/// One live compressor pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// Its compressor.
    pub compressor: Algorithm,
    /// Its zsmalloc chain size.
    pub chain_size: usize,
    /// Its zsmalloc chain rule.
    pub chain_rule: uzswap_zsmalloc::ChainRule,
    /// Pages its zsmalloc pool holds.
    pub total_pages: u64,
    /// Receives new stores.
    pub current: bool,
    /// No longer current: freed when its last entry goes.
    pub killed: bool,
    /// References held (entries, plus the base reference while current).
    pub references: u64,
}

/// Metadata memory of the cache (entry slabs, slot tables, LRU nodes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MetadataUsage {
    /// Slot words (4 bytes per slot of every shard that was ever used).
    pub index_bytes: u64,
    /// Entry tables (24 bytes per slot of every shard that holds an entry; zero entries
    /// included).
    pub entry_bytes: u64,
    /// LRU nodes (16 bytes per entry on an LRU list).
    pub lru_bytes: u64,
    /// What the pools' allocator keeps outside its zspages: handle tables (16 bytes per object,
    /// never shrunk), zspage records and free lists (`uzswap_zsmalloc::Pool::metadata_bytes`).
    pub allocator_bytes: u64,
    /// Pages stored with an entry (`stored_pages`: compressed, as-is, zero entries).
    pub stored_pages: u64,
    /// Zero-filled pages kept without an entry (a slot word each).
    pub zero_pages: u64,
    /// Zero-filled pages kept with an entry (`Params::zero_page_entries`; part of
    /// `stored_pages`): each costs an entry, as a `zswap_entry` did before "mm: zswap: store
    /// zero-filled pages without a zswap_entry".
    pub zero_entries: u64,
}

impl MetadataUsage {
    /// Everything the cache and its allocator keep besides the pool pages themselves.
    pub fn total_bytes(&self) -> u64 {
        self.index_bytes + self.entry_bytes + self.lru_bytes + self.allocator_bytes
    }
}
