// SPDX-License-Identifier: MIT
//! Helpers of the crate's unit tests.

use std::sync::Arc;

use crate::{Algorithm, MemStore, Params, SwapSlot, Zswap, PAGE_SIZE};

/// A cache over a 64-slot in-memory store (every slot allocated), so that the unit tests run
/// under Miri too. Under Miri the compressor is lzo-rle (pure Rust; lz4 is C).
pub(crate) fn cache() -> Zswap {
    let store = Arc::new(MemStore::new(0, 64).unwrap());
    for _ in 0..64 {
        store.alloc_slot().unwrap();
    }
    let z = Zswap::new(Params {
        shrinker_enabled: true,
        compressor: if cfg!(miri) {
            Algorithm::LzoRle
        } else {
            Params::default().compressor
        },
        ..Params::default()
    })
    .unwrap();
    z.add_backing_store(store).unwrap();
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
