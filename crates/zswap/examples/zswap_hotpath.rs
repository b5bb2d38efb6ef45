// SPDX-License-Identifier: MIT
//! Deterministic hot-path workload for instruction counts (callgrind), not for timing.
//!
//! Each public operation runs inside its own `#[inline(never)]` phase function, so
//! `valgrind --tool=callgrind --toggle-collect='zswap_hotpath::phase_load'` counts exactly the
//! instructions of N loads (and everything they call), independent of how the library's own
//! functions are named or inlined. `scripts/callgrind-hotpath.sh` runs every phase and prints
//! instructions per operation.
//!
//! `cargo run --release -p uzswap-zswap --example zswap_hotpath [PAGES]`

use std::hint::black_box;
use std::sync::Arc;

use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_zswap::{CgroupId, Params, Zswap, PAGE_SIZE};

/// Text-like pages from a fixed word list and a fixed LCG: compress about 3:1 with lz4,
/// identical on every machine and run.
fn pages(n: usize) -> Vec<Vec<u8>> {
    const WORDS: [&str; 16] = [
        "swap ",
        "zspage ",
        "entry ",
        "handle ",
        "pool ",
        "class ",
        "page ",
        "lru ",
        "the ",
        "of ",
        "0x7f3a ",
        "cgroup ",
        "\n",
        "load ",
        "store ",
        "writeback ",
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..n)
        .map(|_| {
            let mut p = Vec::with_capacity(PAGE_SIZE + 16);
            while p.len() < PAGE_SIZE {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let w = WORDS[(x >> 60) as usize];
                p.extend_from_slice(w.as_bytes());
                if (x >> 20) & 7 == 0 {
                    p.extend_from_slice(&x.to_le_bytes());
                }
            }
            p.truncate(PAGE_SIZE);
            p
        })
        .collect()
}

/// The raw codec on the same pages: what the cache's store and load add is the difference.
#[inline(never)]
fn phase_compress(alg: Algorithm, pages: &[Vec<u8>], dst: &mut [u8]) {
    for p in pages {
        black_box(compress(alg, p, dst).unwrap());
    }
}

#[inline(never)]
fn phase_decompress(alg: Algorithm, comp: &[Vec<u8>], page: &mut [u8]) {
    for c in comp {
        black_box(decompress(alg, c, page).unwrap());
    }
}

#[inline(never)]
fn phase_store(z: &Zswap, pages: &[Vec<u8>]) {
    for (i, p) in pages.iter().enumerate() {
        black_box(z.store(SwapSlot::new(0, i as u64), p, CgroupId::ROOT));
    }
}

#[inline(never)]
fn phase_load(z: &Zswap, n: usize, buf: &mut [u8]) {
    for i in 0..n {
        black_box(z.load(SwapSlot::new(0, i as u64), buf, false).unwrap());
    }
}

#[inline(never)]
fn phase_load_random(z: &Zswap, n: usize, buf: &mut [u8]) {
    // A fixed permutation step (odd, so every slot is visited once).
    for k in 0..n {
        let i = (k * 2_654_435_761) % n;
        black_box(z.load(SwapSlot::new(0, i as u64), buf, false).unwrap());
    }
}

#[inline(never)]
fn phase_load_excl(z: &Zswap, n: usize, buf: &mut [u8]) {
    for i in 0..n {
        black_box(z.load(SwapSlot::new(0, i as u64), buf, true).unwrap());
    }
}

#[inline(never)]
fn phase_invalidate(z: &Zswap, n: usize) {
    for i in 0..n {
        z.invalidate(SwapSlot::new(0, i as u64));
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048);
    let pages = pages(n);
    let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, n as u64).unwrap());
    let z = Zswap::new(Params {
        total_memory_bytes: 1 << 40,
        ..Params::default()
    })
    .unwrap();
    z.add_swap_file(swap).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    let alg = z.params().compressor;
    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    let comp: Vec<Vec<u8>> = pages
        .iter()
        .map(|p| {
            let n = compress(alg, p, &mut dst).unwrap();
            dst[..n].to_vec()
        })
        .collect();
    phase_compress(alg, &pages, &mut dst);
    phase_decompress(alg, &comp, &mut buf);
    // A warm-up round (not counted): pool memory, slabs, LRU nodes, handle tables and
    // thread-locals exist before the counted phases, which then measure the steady state.
    for round in 0..2 {
        for (i, p) in pages.iter().enumerate() {
            z.store(SwapSlot::new(0, i as u64), p, CgroupId::ROOT);
        }
        for i in 0..n {
            z.load(SwapSlot::new(0, i as u64), &mut buf, round == 1)
                .unwrap();
        }
        for i in 0..n {
            z.invalidate(SwapSlot::new(0, i as u64));
        }
    }
    phase_store(&z, &pages);
    phase_load(&z, n, &mut buf);
    phase_load_random(&z, n, &mut buf);
    phase_load_excl(&z, n, &mut buf);
    phase_store(&z, &pages);
    phase_invalidate(&z, n);
    println!(
        "ops per phase: {n} (stored pages {})",
        z.counters().stored_pages
    );
}
