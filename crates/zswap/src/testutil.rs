// SPDX-License-Identifier: MIT
//! Helpers of the crate's unit tests.

use std::sync::Arc;

use crate::{Params, SwapFile, SwapSlot, Zswap, PAGE_SIZE};

pub(crate) fn cache() -> Zswap {
    let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, 64).unwrap());
    for _ in 0..64 {
        swap.alloc_slot().unwrap();
    }
    let z = Zswap::new(Params {
        shrinker_enabled: true,
        ..Params::default()
    })
    .unwrap();
    z.add_swap_file(swap).unwrap();
    z
}

pub(crate) fn page(seed: u8) -> Vec<u8> {
    (0..PAGE_SIZE).map(|i| (i / 64) as u8 ^ seed).collect()
}

/// Mark a slot as being loaded, as a concurrent `load` does while it decompresses.
pub(crate) fn set_loading(z: &Zswap, slot: SwapSlot, on: bool) {
    let (shard, i) = z.inner.area(0).unwrap().index.locate(slot.offset).unwrap();
    let mut t = shard.table.lock();
    let w = t.word(i);
    t.set_word(i, if on { w.with_loading() } else { w.idle() });
}
