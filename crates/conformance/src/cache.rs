// SPDX-License-Identifier: MIT
//! A cache over a temporary swap file, and pages of real binaries, for the tests that drive
//! the cache with the kernel (PSI).

use std::sync::Arc;

use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_zswap::{Params, Zswap};

/// A cache with one temporary swap file of `slots` slots (area 0), every slot allocated.
pub fn cache(params: Params, slots: u64) -> (Zswap, Arc<SwapFile>) {
    let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, slots).expect("swap file"));
    for _ in 0..slots {
        swap.alloc_slot().expect("slot");
    }
    let z = Zswap::new(params).expect("cache");
    z.add_swap_file(swap.clone()).expect("add swap file");
    (z, swap)
}

/// Slot `offset` of area 0.
pub fn slot(offset: u64) -> SwapSlot {
    SwapSlot { area: 0, offset }
}

pub use uzswap_corpus::samples::{binary_pages, structured_page};
