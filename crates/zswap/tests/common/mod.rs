// SPDX-License-Identifier: MIT
//! Shared test helpers: a cache over a temporary swap file, and real page content.
#![allow(dead_code)]

use std::sync::Arc;

use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_zswap::{Params, Zswap, PAGE_SIZE};

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

pub fn slot(offset: u64) -> SwapSlot {
    SwapSlot { area: 0, offset }
}

/// Params with a small, explicit memory size so limits are reachable in tests.
pub fn small_params(total_mib: u64) -> Params {
    Params {
        total_memory_bytes: total_mib << 20,
        ..Params::default()
    }
}

pub use uzswap_corpus::samples::{binary_pages, structured_page};

/// A page that does not compress (xorshift noise).
pub fn random_page(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut p = vec![0u8; PAGE_SIZE];
    for c in p.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.copy_from_slice(&x.to_le_bytes());
    }
    p
}

/// A mixed corpus: binaries, zero pages, structured pages and a few random pages.
pub fn mixed_pages(n: usize) -> Vec<Vec<u8>> {
    let bins = binary_pages(n);
    (0..n)
        .map(|i| match i % 10 {
            0 => vec![0u8; PAGE_SIZE],
            1 | 2 => structured_page(i as u64),
            3 => random_page(i as u64),
            _ => bins[i].clone(),
        })
        .collect()
}
