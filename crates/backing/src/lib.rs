// SPDX-License-Identifier: MIT
//! uzswap-backing: where the compressed cache's pages go when they leave memory.
//!
//! **Owns**: the [`BackingStore`] trait the cache (`uzswap-zswap`) writes back to and reads
//! from, and its implementations: [`SwapFile`], a swap area in a real file with one crc32c
//! checksum per block (the kernel's swap device under zswap), and [`MemStore`], the same
//! contract in memory (tests, Miri, loom). Also slot allocation in 512-slot clusters
//! (lock-free bitmaps, module `alloc`), I/O error accounting ([`BackingStats`]), errors by cause
//! ([`Error`]) and, with the `test-hooks` cargo feature, fault injection (`FaultInjector`).
//!
//! **Data layout**: a store is one swap area (the kernel's swap type) of `capacity` slots of
//! one [`PAGE_SIZE`] block each; a slot is allocated (or free) and holds a block (or none).
//! [`SwapFile`]'s on-disk format is in its module docs (`swapfile.rs`); [`MemStore`] keeps one
//! optional block and its checksum per slot.
//!
//! **Locks**: none across calls. Slot allocation and the swap file's block table are atomics;
//! [`MemStore`] locks one slot's block at a time. The caller never operates on one slot from
//! two threads at once (see [`BackingStore`]).
//!
//! ```text
//!   uzswap-zswap ──(Arc<dyn BackingStore>)──► SwapFile   (file, crc32c per block, hole punching)
//!                                        └──► MemStore   (memory, same checks and faults)
//! ```

#![deny(missing_docs)]
// Two functions need unsafe (`swapfile::zeroed_table`, `swapfile::raise_fd`), and allow it for themselves.
#![deny(unsafe_code)]

mod alloc;
mod error;
mod fault;
mod memstore;
mod stats;
mod swapfile;
mod sync;

pub use alloc::CLUSTER_SLOTS;
pub use error::{Error, HeaderError, Op, Result};
#[cfg(any(test, feature = "test-hooks"))]
pub use fault::FaultInjector;
pub use memstore::MemStore;
pub use stats::BackingStats;
pub use swapfile::{block_checksum, DiscardPolicy, PrivateCopy, SwapFile, MAX_SLOTS};
pub use uzswap_types::{SwapSlot, PAGE_SIZE};

/// A swap area the cache writes pages back to and reads them from: `capacity()` slots of
/// one [`PAGE_SIZE`] block each, in area `area()`.
///
/// # Contract (every implementation)
///
/// * **Slots** belong to the caller's swap layer: [`alloc_slot`](Self::alloc_slot) hands out a
///   free slot of this area ([`Error::Full`] when none is left), [`free_slot`](Self::free_slot)
///   takes it back and forgets its block. The cache never allocates or frees slots; it writes,
///   reads and discards blocks of slots it was given.
/// * [`write_page`](Self::write_page) stores one whole page for an allocated slot. On error the
///   slot holds no block (a read gives [`Error::NotWritten`]) and other slots are untouched.
/// * [`read_page`](Self::read_page) fills the page with exactly what was last written, or fails
///   with a typed error: [`Error::NotWritten`] (no block), [`Error::Corrupt`] (checksum
///   mismatch), [`Error::ShortRead`], [`Error::Io`] (with its `io::Error` as source), ... On any
///   error the page is zeroed: wrong data is never handed out.
/// * [`discard`](Self::discard) forgets a slot's block (the slot stays allocated); slots without
///   a block and slots out of range are ignored.
/// * Every failed I/O is counted in [`stats`](Self::stats) and leaves the store usable;
///   [`Error::is_device_error`] tells device failures from misuse, and the cache counts and
///   survives them by cause.
/// * **Concurrency**: `Send + Sync`. Distinct slots are fully concurrent. The caller never issues
///   two operations on the *same* slot at once: the cache calls `write_page`, `read_page` and
///   `discard` only on a slot it owns, either under the slot's shard lock or with the slot's
///   in-flight bit (`WRITEBACK` or `LOADING`) set, as the kernel's swap-cache folio lock
///   serialises I/O on one swap entry.
///
/// # Slow, asynchronous and batched stores (a remote tier)
///
/// The cache calls `write_page` (writeback, swap-out) and `read_page` (swap-in) with **no lock
/// held**, on a slot whose in-flight bit it set beforehand and clears when the call returns;
/// every other operation on that slot waits for the bit, all other slots proceed. Hence:
///
/// * A **blocking** implementation over a network may take as long as it needs: it delays only
///   the calling thread (a shrinker, or the thread faulting the page in, as a disk read delays a
///   swap-in in the kernel), never a lock another thread needs.
/// * An **asynchronous** implementation fits without changing the cache's locking, because the
///   in-flight bit already is the hand-off between the cache and the I/O: its submission
///   (`submit_write(slot, page, completion)`) would be called where `write_page` is called now,
///   and the completion would do what the code after the call does today (lock the slot's
///   shard, set the slot's new value, clear the bit, wake waiters). Until then the slot stays
///   owned by the I/O, exactly as it is owned by a blocking call now.
/// * **Batching** fits the same way: the shrinker sets `WRITEBACK` on each slot of a batch,
///   submits the batch (a `write_pages` whose default is a loop over `write_page`) and
///   completes each slot as its result arrives.
///
/// Such methods would be added with default implementations over the synchronous ones, so
/// existing stores keep working.
pub trait BackingStore: Send + Sync + std::fmt::Debug {
    /// The area number (the kernel's swap type) of every slot of this store.
    fn area(&self) -> u32;
    /// Number of slots.
    fn capacity(&self) -> u64;
    /// Allocates a free slot; [`Error::Full`] when none is left.
    fn alloc_slot(&self) -> Result<SwapSlot>;
    /// Frees an allocated slot and forgets its block; [`Error::NotAllocated`] if it was not
    /// allocated, [`Error::OutOfRange`] if it is not a slot of this store.
    fn free_slot(&self, slot: SwapSlot) -> Result<()>;
    /// Stores `page` (exactly [`PAGE_SIZE`] bytes) as the block of an allocated slot.
    fn write_page(&self, slot: SwapSlot, page: &[u8]) -> Result<()>;
    /// Reads the block of a slot into `page` (exactly [`PAGE_SIZE`] bytes) and verifies it.
    fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> Result<()>;
    /// Forgets the block of a slot; the slot stays allocated.
    fn discard(&self, slot: SwapSlot);
    /// Counters.
    fn stats(&self) -> BackingStats;
}
