// SPDX-License-Identifier: MIT
//! Data movement over a `uzswap_zswap::Zswap` with the kernel's swap semantics, for fronts.
//!
//! - [`swap_out`]: `swap_writeout` → zero map, `zswap_store`, or the swap device when zswap
//!   refuses (`Refused` when the cgroup may not write to the device).
//! - [`swap_in`]: `swap_read_folio` → zero map (kept: the zeromap bit lives until the slot is
//!   freed, so the page comes back clean), zswap (the entry is dropped, as `zswap_load` has been
//!   exclusive since "mm: zswap: only support zswap_exclusive_loads_enabled", 6.9, so the page
//!   comes back dirty), or the device (the block stays, the page is clean).
//! - [`free_slot`]: `zswap_invalidate` plus the device block, when the slot is freed.
//! - [`settle`]: wait for the cache's shrink worker, so a replay is deterministic (the kernel's
//!   worker runs concurrently; see docs/replay-vs-kernel.md).

use std::time::Duration;

use uzswap_zswap::{CgroupId, LoadOutcome, StoreOutcome, SwapSlot, Zswap};

use crate::{Error, ReadIn, WriteOut, PAGE_SIZE};

/// Write `page` out to `(area, slot)` for cgroup `cg`.
pub fn swap_out(
    z: &Zswap,
    area: u32,
    slot: u32,
    page: &[u8],
    cg: CgroupId,
) -> Result<WriteOut, Error> {
    let s = SwapSlot {
        area,
        offset: u64::from(slot),
    };
    match z.swap_out(s, page, cg) {
        Ok(StoreOutcome::Stored | StoreOutcome::StoredIncompressible) => Ok(WriteOut::Zswap),
        Ok(StoreOutcome::StoredZero) => Ok(WriteOut::Zero),
        Ok(StoreOutcome::Rejected(_)) => Ok(WriteOut::Disk),
        Err(uzswap_zswap::Error::WritebackDisabled(_)) => Ok(WriteOut::Refused),
        Err(e) => Err(Error::Front(format!("swap-out of slot {slot}: {e}"))),
    }
}

/// Read `(area, slot)` into `buf` (one page).
pub fn swap_in(z: &Zswap, area: u32, slot: u32, buf: &mut [u8]) -> Result<ReadIn, Error> {
    let s = SwapSlot {
        area,
        offset: u64::from(slot),
    };
    // A non-exclusive load keeps device blocks and zero marks; a pool entry is then dropped
    // by hand, which is what an exclusive load would have done to it.
    match z.load(s, buf, false) {
        Ok(LoadOutcome::Hit) => {
            if is_zero(buf) {
                // Zero pages never reach the pool: this came from the zero map.
                Ok(ReadIn::Zero)
            } else {
                z.invalidate(s);
                Ok(ReadIn::Zswap)
            }
        }
        Ok(LoadOutcome::FromSwapFile) => Ok(ReadIn::Disk),
        Ok(LoadOutcome::Absent) => Err(Error::Front(format!(
            "swap-in of slot {slot}: nothing stored there (lost page)"
        ))),
        Err(e) => Err(Error::Front(format!("swap-in of slot {slot}: {e}"))),
    }
}

/// The slot was freed: drop the cache's entry, zero mark and device block.
pub fn free_slot(z: &Zswap, area: u32, slot: u32) {
    z.invalidate(SwapSlot {
        area,
        offset: u64::from(slot),
    });
}

/// Wait until the cache's shrink worker is idle (after a store that queued it).
pub fn settle(z: &Zswap) {
    while !z.wait_shrink_idle(Duration::from_secs(60)) {}
}

fn is_zero(p: &[u8]) -> bool {
    debug_assert_eq!(p.len(), PAGE_SIZE);
    p.iter().all(|&b| b == 0)
}
