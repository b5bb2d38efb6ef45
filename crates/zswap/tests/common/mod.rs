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

/// Pages of real binaries from /usr/bin (and libraries), skipping all-zero pages.
pub fn binary_pages(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    let dirs = ["/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/lib"];
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut v: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            v.sort();
            files.extend(v);
        }
    }
    for f in files {
        if out.len() >= n {
            break;
        }
        let Ok(meta) = std::fs::metadata(&f) else {
            continue;
        };
        if !meta.is_file() || meta.len() < PAGE_SIZE as u64 * 2 {
            continue;
        }
        let Ok(data) = std::fs::read(&f) else {
            continue;
        };
        for c in data.chunks_exact(PAGE_SIZE).take(64) {
            if out.len() >= n {
                break;
            }
            if c.iter().any(|&b| b != 0) {
                out.push(c.to_vec());
            }
        }
    }
    // Fallback on a minimal system: structured pages.
    let mut i = 0u64;
    while out.len() < n {
        out.push(structured_page(i));
        i += 1;
    }
    out
}

/// A page of structured data (a table of little-endian integers and text).
pub fn structured_page(seed: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE_SIZE];
    for (i, c) in p.chunks_exact_mut(16).enumerate() {
        let v = seed.wrapping_mul(0x9e37_79b9).wrapping_add(i as u64 * 3);
        c[..8].copy_from_slice(&v.to_le_bytes());
        c[8..16].copy_from_slice(b"rec:item");
    }
    p
}

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
