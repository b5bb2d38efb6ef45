// SPDX-License-Identifier: MIT
//! uzswap-zswap: the kernel's zswap (compressed swap cache) in user space.
//!
//! **Owns**: store / load / invalidate of 4 KiB pages keyed by swap slot; one zsmalloc pool per
//! compressor (old pools keep serving their entries until the last goes: "mm/zswap: optimize
//! for dynamic zswap_pools", v3, 6.9); the single global LRU with per-(cgroup, node) lists;
//! writeback of cold entries to the area's [`BackingStore`]; the pool limit with the
//! accept-threshold hysteresis (optionally proactive shrinking: "mm: zswap: proactive shrinking
//! before pool size limit is hit", v2, on 6.10-rc6); the shrink worker and the memory-pressure
//! shrinker (count/scan: "zswap: shrink zswap pool based on memory pressure", 6.8); an optional
//! PSI pressure source; cgroups with `zswap.max` and `zswap.writeback`; the kernel's counters.
//! Older kernels' behaviour as settings ([`Params`]): zero-filled pages kept with a length-0
//! entry (`zero_page_entries`, before "mm: zswap: store zero-filled pages without a
//! zswap_entry"), and one LRU and shrinker per pool (`lru`, [`LruMode::PerPool`], 6.8).
//!
//! **Modules** (one job each):
//!
//! | module | job |
//! |---|---|
//! | `cache` | [`Zswap`] and its public API; `Inner`, the state every path shares |
//! | `store` | the store path (`zswap_store`) and `swap_out` |
//! | `load` | the load path (`zswap_load`), sequential-run prefetch |
//! | `entry` | entry lifecycle: replacing a slot's value, releasing an entry, `zswap_invalidate` |
//! | `shrink` | writeback of one LRU entry, `shrink_memcg`, the shrink worker's walk, the pressure shrinker |
//! | `worker` | the background shrink worker thread (started with the cache, or on demand by the embedder: `Zswap::with_shrink_worker_on_demand`) and its wake-ups |
//! | `index` | slot words, entries, shards (the kernel's xarray + `zswap_entry`) |
//! | `lru` | the LRU of one (cgroup, node) (`list_lru_one`), as per-thread sub-lists in one order |
//! | `spin` | the spinning mutex of the LRU sub-lists |
//! | `pool`, `poolref` | compressor pools ([`MAX_POOLS`], the kernel's `zswap_pool`), their per-thread-striped reference count (`percpu_ref`) |
//! | `cgroup` | cgroups, charges, zswap.max, zswap.writeback, reparenting |
//! | `options` | cache options by name (`--compressor`, `--chain-size`, ...) to [`Params`], for every front |
//! | `stats` | striped counters and the [`Counters`] snapshot |
//! | `params`, `numa`, `pressure` | [`Params`], NUMA nodes, the PSI pressure source |
//! | `error`, `outcome`, `hooks`, `buf` | [`Error`], [`StoreOutcome`] and friends, `FaultHooks` (feature `test-hooks`), per-thread buffers |
//!
//! **Data layout** (see `index.rs`): per swap area a table of u32 slot words, split in shards
//! of 4096 slots, each shard under a mutex. A slot word is empty, a zero page (no entry, no
//! pool memory), an entry, a `ZERO_ENTRY`-tagged entry of length 0 (`zero_page_entries`), or
//! `ON_DISK` with the id of the cgroup that owned the page (the kernel's swap_cgroup, for the
//! disk refault credit), plus `LOADING` / `WRITEBACK` bits. The 24-byte entries `{handle,
//! object location hint, lru node, cgroup, pool, length, node, referenced}` sit in a per-shard
//! table at their slot's index, so a load fetches the word and the entry together, then the
//! object (from the hint) and its handle together.
//! The LRU of each (cgroup, node) (`lru.rs`) is eight intrusive sub-lists of 16-byte nodes
//! holding the packed slot, one per thread stripe, kept in one order by sequence numbers; with
//! per-pool lists a cgroup has one such LRU per (pool slot, node), and an entry's LRU (its
//! lane) is its pool's `lane_base` plus its node. Caches made by `Zswap::for_process_tree`
//! (one per process of a tree) take their sequence numbers from one shared clock, so their
//! lists form one order and the shrink worker of the cache holding the oldest entries writes
//! back.
//! Counters are striped per thread (`stats.rs`), one padded row per stripe, the counters of a
//! load or a store (and the in-flight count) on one line of it; pool references are striped
//! (`poolref.rs`). `Inner`, the state every path shares, is laid out by hand so that what a
//! load or store reads of it lies in its first two cache lines.
//! Each pool keeps the memory of freed zspages for a second, bounded by the pool limit
//! (`pool::memory_policy`); the idle shrink worker and memory pressure give it back.
//!
//! **Store**: zero check → limits (cgroup zswap.max, pool limit) → compress into a per-thread
//! buffer outside any lock → `alloc_write` into the current pool → LRU node → counters, charge
//! and slot word (shard lock). **Load**: copy the entry under the shard lock and decompress
//! straight into the caller's page with the lock dropped, the object pinned by its zsmalloc
//! read guard and the pool by the thread's pool snapshot; an exclusive load marks the slot
//! `LOADING` instead, and re-locks to drop the entry.
//! **Writeback** (from the shrinkers only, never on the caller's store/load path except the
//! kernel's one synchronous attempt for a cgroup over zswap.max): rotate the LRU head to the
//! tail under the list lock, drop it, lock the slot's shard and revalidate the entry by
//! identity (same list, same node index), mark it `WRITEBACK`, decompress and write the block
//! to the backing store with no lock held, then free it. A slot marked `LOADING` or
//! `WRITEBACK` is owned by that operation: stores, loads and invalidations of the same slot
//! wait on the shard's condvar, so no race loses or corrupts a page (the kernel gets the same
//! from the swap-cache folio lock). The same bits are what lets a slow or asynchronous backing
//! store fit without other locking (see [`BackingStore`]).
//!
//! **Lock order**: shard lock → backing store (only `discard` of a slot's stale block, which
//! must happen before the slot is published again). LRU sub-list locks are leaves (spinning:
//! their critical sections are a few instructions, and sleeping on a contended lock costs tens
//! of µs on a VM): the free path
//! unlinks the LRU node after dropping the shard lock, and the shrinker drops the list lock
//! before taking the shard lock, so the two are never nested. Pool registry, cgroup admin and
//! worker mutexes are leaves taken off the hot path (a store takes the registry lock only when
//! its per-thread pool snapshot is stale). zsmalloc (its own class locks) is only called with
//! none of our locks held.
//!
//! **Caller contract** (the kernel's swap-cache folio lock): store / load / invalidate of one
//! slot should not race each other; if they do, they are serialised per slot but their order is
//! whatever the race gives. Slot allocation belongs to the caller
//! ([`BackingStore::alloc_slot`]).
//!
//! **fork**: the cache's threads (shrink worker, each pool's prefault thread) are not in a
//! fork child. A caller that forks keeps its own threads out of the cache across the fork
//! (none inside a lock the child would find held), holds the worker idle
//! ([`Zswap::hold_shrink_worker`], [`Zswap::wait_shrink_idle`]) and calls
//! [`Zswap::after_fork_child`] in the child before anything else.

#![deny(missing_docs)]

mod buf;
mod cache;
mod cgroup;
mod check;
mod entry;
mod error;
mod hooks;
mod index;
mod load;
mod lru;
mod numa;
pub mod options;
mod outcome;
mod params;
mod pool;
mod poolref;
mod pressure;
mod shrink;
mod spin;
mod stats;
mod store;
mod sync;
#[cfg(test)]
mod testutil;
mod worker;

pub use cache::Zswap;
pub use cgroup::{CgroupId, MAX_CGROUPS};
pub use error::Error;
#[cfg(any(test, feature = "test-hooks"))]
pub use hooks::FaultHooks;
pub use numa::{nr_nodes, MAX_NUMA_NODES};
pub use outcome::{LoadOutcome, MetadataUsage, PoolInfo, RejectReason, SlotState, StoreOutcome};
pub use params::{mem_total_bytes, LruMode, Params, WarmProtection};
pub use pool::MAX_POOLS;
pub use pressure::PressureConfig;
pub use shrink::ShrinkScan;
pub use stats::{CgroupCounters, Counters};
pub use uzswap_backing::{BackingStore, MemStore, SwapFile, SwapSlot};
pub use uzswap_compress::Algorithm;
/// Page size of the cache (re-exported from `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;
pub use uzswap_zsmalloc::{address_room, ChainRule};

/// Swap areas a cache can hold (the kernel's MAX_SWAPFILES is about 32).
pub const MAX_AREAS: usize = 32;

#[cfg(all(test, loom))]
mod loom_models;
