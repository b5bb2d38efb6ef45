// SPDX-License-Identifier: MIT
//! A cache over a temporary swap file, and pages of real binaries, for the tests that drive
//! the cache with the kernel (PSI).

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

/// Slot `offset` of area 0.
pub fn slot(offset: u64) -> SwapSlot {
    SwapSlot { area: 0, offset }
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
