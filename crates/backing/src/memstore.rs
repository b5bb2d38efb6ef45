// SPDX-License-Identifier: MIT
//! [`MemStore`]: the [`BackingStore`] contract in memory, for tests, Miri and loom.
//!
//! It behaves as [`SwapFile`](crate::SwapFile) does, minus the file: the same cluster slot
//! allocation, a crc32c per block over (area, offset, content) so corrupted or misdirected
//! blocks are caught on read, the same counters, and the same [`FaultInjector`] faults (EIO,
//! ENOSPC, a flipped bit, a misdirected write, a short read). Each slot holds its block and
//! checksum under its own lock; no lock is held across calls, and none is nested.

use std::io;

use parking_lot::Mutex;

use crate::alloc::SlotMap;
use crate::error::{Error, Op, Result};
use crate::fault::{FaultInjector, ReadFault, WriteFault};
use crate::stats::{BackingStats, Counters};
use crate::swapfile::{block_checksum, MAX_SLOTS};
use crate::{BackingStore, SwapSlot, PAGE_SIZE};

/// One slot's block: what the medium holds and the checksum of what was written.
#[derive(Default)]
struct Block {
    /// crc32c of the page last written successfully; `None`: the slot holds no block.
    crc: Option<u32>,
    /// The medium's content (`None` reads as zeros, like a hole in a sparse file). A fault can
    /// make it differ from what `crc` was taken of.
    data: Option<Box<[u8]>>,
}

/// A swap area in memory. `Send + Sync`; share it by reference or `Arc`. About 32 bytes per
/// slot plus one page per written block.
pub struct MemStore {
    area: u32,
    capacity: u64,
    slots: SlotMap,
    blocks: Box<[Mutex<Block>]>,
    counters: Counters,
    injector: FaultInjector,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore")
            .field("area", &self.area)
            .field("capacity", &self.capacity)
            .field("slots_in_use", &self.slots.in_use())
            .finish_non_exhaustive()
    }
}

impl MemStore {
    /// An empty store of `slots` slots in area `area`. [`Error::BadCapacity`] for 0 or more
    /// than [`MAX_SLOTS`]; [`Error::OutOfMemory`] if the slot table can't be allocated.
    pub fn new(area: u32, slots: u64) -> Result<MemStore> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(Error::BadCapacity(slots));
        }
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(slots as usize)
            .map_err(|_| Error::OutOfMemory(slots))?;
        blocks.resize_with(slots as usize, Mutex::default);
        Ok(MemStore {
            area,
            capacity: slots,
            slots: SlotMap::new(slots),
            blocks: blocks.into_boxed_slice(),
            counters: Counters::default(),
            injector: FaultInjector::new(),
        })
    }

    /// The area number (the swap type) of every slot of this store.
    pub fn area(&self) -> u32 {
        self.area
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slots allocated right now.
    pub fn slots_in_use(&self) -> u64 {
        self.slots.in_use()
    }

    #[inline]
    fn check_slot(&self, slot: SwapSlot) -> Result<usize> {
        if slot.area != self.area || slot.offset >= self.capacity {
            return Err(Error::OutOfRange {
                slot,
                area: self.area,
                capacity: self.capacity,
            });
        }
        Ok(slot.offset as usize)
    }

    /// Allocates a free slot; [`Error::Full`] when none is left.
    pub fn alloc_slot(&self) -> Result<SwapSlot> {
        match self.slots.alloc() {
            Some(offset) => Ok(SwapSlot::new(self.area, offset)),
            None => Err(Error::Full),
        }
    }

    /// Frees an allocated slot and forgets its block.
    pub fn free_slot(&self, slot: SwapSlot) -> Result<()> {
        let off = self.check_slot(slot)?;
        if !self.slots.is_allocated(off as u64) {
            return Err(Error::NotAllocated(slot));
        }
        self.forget(off);
        if !self.slots.free(off as u64) {
            return Err(Error::NotAllocated(slot));
        }
        Ok(())
    }

    /// Drops a slot's block; true if it had one.
    fn forget(&self, off: usize) -> bool {
        let mut b = self.blocks[off].lock();
        b.data = None;
        if b.crc.take().is_some() {
            self.counters.blocks_stored.dec();
            return true;
        }
        false
    }

    /// Writes one page into an allocated slot, with its checksum. On failure the slot holds no
    /// block (reads give `NotWritten`); other slots are untouched.
    pub fn write_page(&self, slot: SwapSlot, page: &[u8]) -> Result<()> {
        let off = self.check_slot(slot)?;
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        if !self.slots.is_allocated(off as u64) {
            return Err(Error::NotAllocated(slot));
        }
        let crc = block_checksum(slot, page);
        let mut b = self.blocks[off].lock();
        if b.crc.take().is_some() {
            self.counters.blocks_stored.dec();
        }
        let fault = self.injector.on_write();
        let res = match fault {
            WriteFault::None => {
                b.data = Some(page.into());
                Ok(())
            }
            WriteFault::Eio => Err(io::Error::from_raw_os_error(libc::EIO)),
            WriteFault::NoSpace => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            WriteFault::Corrupt => {
                let mut bad: Box<[u8]> = page.into();
                bad[off % PAGE_SIZE] ^= 0x01;
                b.data = Some(bad);
                Ok(())
            }
            // Below, once this slot's lock is dropped (locks are never nested).
            WriteFault::Misdirect => Ok(()),
        };
        match res {
            Ok(()) => {
                b.crc = Some(crc);
                drop(b);
                if fault == WriteFault::Misdirect {
                    let other = (off + 1) % self.capacity as usize;
                    self.blocks[other].lock().data = Some(page.into());
                }
                self.counters.writes.inc();
                self.counters.blocks_stored.inc();
                Ok(())
            }
            Err(e) => {
                drop(b);
                let e = Error::from_io(Op::Write, Some(slot), e);
                self.counters.count_write_error(&e);
                Err(e)
            }
        }
    }

    /// Reads the block of a slot into `page` and verifies it; on any error `page` is zeroed.
    pub fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> Result<()> {
        let off = self.check_slot(slot)?;
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        let res = self.read_verified(slot, off, page);
        if res.is_err() {
            page.fill(0);
        }
        res
    }

    fn read_verified(&self, slot: SwapSlot, off: usize, page: &mut [u8]) -> Result<()> {
        let b = self.blocks[off].lock();
        let Some(expected) = b.crc else {
            drop(b);
            self.counters.not_written_reads.inc();
            return Err(Error::NotWritten(slot));
        };
        match self.injector.on_read() {
            ReadFault::None => match &b.data {
                Some(d) => page.copy_from_slice(d),
                None => page.fill(0),
            },
            ReadFault::Eio => {
                drop(b);
                self.counters.read_errors.inc();
                return Err(Error::from_io(
                    Op::Read,
                    Some(slot),
                    io::Error::from_raw_os_error(libc::EIO),
                ));
            }
            ReadFault::Short => {
                drop(b);
                self.counters.read_errors.inc();
                self.counters.short_reads.inc();
                return Err(Error::ShortRead {
                    slot,
                    got: PAGE_SIZE / 2,
                    want: PAGE_SIZE,
                });
            }
        }
        drop(b);
        let actual = block_checksum(slot, page);
        if actual != expected {
            self.counters.checksum_errors.inc();
            return Err(Error::Corrupt {
                slot,
                expected,
                actual,
            });
        }
        self.counters.reads.inc();
        Ok(())
    }

    /// True if the slot currently holds a written block.
    pub fn is_written(&self, slot: SwapSlot) -> bool {
        self.check_slot(slot)
            .is_ok_and(|off| self.blocks[off].lock().crc.is_some())
    }

    /// Forgets the block of a slot (reads give `NotWritten`) and frees its memory. The slot
    /// stays allocated; invalid slots and slots without a block are ignored.
    pub fn discard(&self, slot: SwapSlot) {
        if let Ok(off) = self.check_slot(slot) {
            if self.forget(off) {
                self.counters.discards.inc();
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> BackingStats {
        self.counters
            .snapshot(self.capacity, self.slots.in_use(), self.injector.injected())
    }

    #[cfg(any(test, feature = "test-hooks"))]
    /// The fault injector of this store (for tests of the layers above; cargo feature
    /// `test-hooks`).
    pub fn fault_injector(&self) -> &FaultInjector {
        &self.injector
    }

    #[cfg(any(test, feature = "test-hooks"))]
    /// Flips one bit of the block stored for slot `offset` (its checksum is not touched), as
    /// silent media corruption would. Counted as an injected fault.
    pub fn corrupt_block(&self, offset: u64, byte: usize) -> io::Result<()> {
        if offset >= self.capacity || byte >= PAGE_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "slot or byte out of range",
            ));
        }
        let mut b = self.blocks[offset as usize].lock();
        let data = b
            .data
            .get_or_insert_with(|| vec![0u8; PAGE_SIZE].into_boxed_slice());
        data[byte] ^= 0x10;
        drop(b);
        self.injector.count_injected();
        Ok(())
    }
}

impl BackingStore for MemStore {
    fn area(&self) -> u32 {
        self.area
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn alloc_slot(&self) -> Result<SwapSlot> {
        MemStore::alloc_slot(self)
    }
    fn free_slot(&self, slot: SwapSlot) -> Result<()> {
        MemStore::free_slot(self, slot)
    }
    fn write_page(&self, slot: SwapSlot, page: &[u8]) -> Result<()> {
        MemStore::write_page(self, slot, page)
    }
    fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> Result<()> {
        MemStore::read_page(self, slot, page)
    }
    fn discard(&self, slot: SwapSlot) {
        MemStore::discard(self, slot)
    }
    fn stats(&self) -> BackingStats {
        MemStore::stats(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(seed: u8) -> Vec<u8> {
        (0..PAGE_SIZE)
            .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
            .collect()
    }

    #[test]
    fn round_trip_discard_and_free() {
        let m = MemStore::new(3, 100).unwrap();
        let s = m.alloc_slot().unwrap();
        assert_eq!(s.area, 3);
        let mut buf = vec![0xaa; PAGE_SIZE];
        assert!(matches!(
            m.read_page(s, &mut buf),
            Err(Error::NotWritten(_))
        ));
        assert!(buf.iter().all(|&b| b == 0));
        m.write_page(s, &page(7)).unwrap();
        m.read_page(s, &mut buf).unwrap();
        assert_eq!(buf, page(7));
        assert!(m.is_written(s));
        m.discard(s);
        assert!(!m.is_written(s));
        assert!(matches!(
            m.read_page(s, &mut buf),
            Err(Error::NotWritten(_))
        ));
        m.free_slot(s).unwrap();
        assert!(matches!(m.free_slot(s), Err(Error::NotAllocated(_))));
        let foreign = SwapSlot::new(4, 0);
        assert!(matches!(
            m.write_page(foreign, &page(1)),
            Err(Error::OutOfRange { .. })
        ));
        let st = m.stats();
        assert_eq!(
            (st.writes, st.reads, st.discards, st.not_written_reads),
            (1, 1, 1, 2)
        );
        assert_eq!((st.blocks_stored, st.slots_in_use), (0, 0));
    }

    #[test]
    fn full_when_every_slot_is_taken() {
        let m = MemStore::new(0, 5).unwrap();
        for _ in 0..5 {
            m.alloc_slot().unwrap();
        }
        assert!(matches!(m.alloc_slot(), Err(Error::Full)));
        assert!(matches!(MemStore::new(0, 0), Err(Error::BadCapacity(0))));
    }

    #[test]
    fn injected_faults_are_typed_counted_and_survived() {
        let m = MemStore::new(0, 4).unwrap();
        let s: Vec<SwapSlot> = (0..4).map(|_| m.alloc_slot().unwrap()).collect();
        let fi = m.fault_injector();
        let mut buf = vec![0u8; PAGE_SIZE];

        fi.fail_next_writes(1);
        let e = m.write_page(s[0], &page(1)).unwrap_err();
        assert!(matches!(e, Error::Io { .. }) && e.is_device_error(), "{e}");
        assert!(matches!(
            m.read_page(s[0], &mut buf),
            Err(Error::NotWritten(_))
        ));

        fi.no_space_next_writes(1);
        assert!(matches!(
            m.write_page(s[0], &page(1)),
            Err(Error::NoSpace { .. })
        ));

        fi.corrupt_next_writes(1);
        m.write_page(s[0], &page(1)).unwrap();
        assert!(matches!(
            m.read_page(s[0], &mut buf),
            Err(Error::Corrupt { .. })
        ));
        assert!(buf.iter().all(|&b| b == 0), "no corrupt data handed out");

        // A misdirected write: neither the intended slot nor the hit one verifies.
        m.write_page(s[2], &page(3)).unwrap();
        fi.misdirect_next_writes(1);
        m.write_page(s[1], &page(2)).unwrap();
        assert!(matches!(
            m.read_page(s[1], &mut buf),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            m.read_page(s[2], &mut buf),
            Err(Error::Corrupt { .. })
        ));

        m.write_page(s[3], &page(4)).unwrap();
        fi.fail_next_reads(1);
        assert!(matches!(m.read_page(s[3], &mut buf), Err(Error::Io { .. })));
        fi.short_next_reads(1);
        assert!(matches!(
            m.read_page(s[3], &mut buf),
            Err(Error::ShortRead { .. })
        ));
        m.read_page(s[3], &mut buf).unwrap();
        assert_eq!(buf, page(4));

        m.corrupt_block(s[3].offset, 17).unwrap();
        assert!(matches!(
            m.read_page(s[3], &mut buf),
            Err(Error::Corrupt { .. })
        ));

        let st = m.stats();
        assert_eq!((st.write_errors, st.no_space_errors), (2, 1));
        assert_eq!(
            (st.read_errors, st.short_reads, st.checksum_errors),
            (2, 1, 4)
        );
        assert_eq!(st.faults_injected, 7);
    }

    #[test]
    fn usable_as_a_trait_object() {
        let m: std::sync::Arc<dyn BackingStore> = std::sync::Arc::new(MemStore::new(1, 8).unwrap());
        let s = m.alloc_slot().unwrap();
        m.write_page(s, &page(9)).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        m.read_page(s, &mut buf).unwrap();
        assert_eq!((buf, m.area(), m.capacity()), (page(9), 1, 8));
    }
}
