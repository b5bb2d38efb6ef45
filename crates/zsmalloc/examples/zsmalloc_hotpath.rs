// SPDX-License-Identifier: MIT
//! Deterministic allocator workload for instruction counts (callgrind), not for timing.
//!
//! Each operation runs inside its own `#[inline(never)]` phase function, so
//! `valgrind --tool=callgrind --toggle-collect='zsmalloc_hotpath::phase_read'` counts exactly
//! the reads. `scripts/callgrind-hotpath.sh` runs every phase and prints instructions per
//! operation.
//!
//! `cargo run --release -p uzswap-zsmalloc --example zsmalloc_hotpath [OBJECTS]`

use std::hint::black_box;

use uzswap_zsmalloc::{Handle, MemoryPolicy, Pool, PoolConfig};

/// Object lengths spread over the classes as compressed pages are (fixed LCG).
fn lengths(n: usize) -> Vec<usize> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            64 + (x >> 33) as usize % 3900
        })
        .collect()
}

#[inline(never)]
fn phase_alloc(p: &Pool, lens: &[usize], data: &[u8], hs: &mut Vec<Handle>) {
    for &l in lens {
        hs.push(p.alloc_write(&data[..l]).unwrap());
    }
}

#[inline(never)]
fn phase_read(p: &Pool, hs: &[Handle]) {
    for &h in hs {
        let r = p.read(h).unwrap();
        black_box(r[0]);
    }
}

#[inline(never)]
fn phase_free(p: &Pool, hs: &mut Vec<Handle>) {
    for h in hs.drain(..) {
        p.free(h).unwrap();
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(8192);
    let lens = lengths(n);
    let data = vec![0x5au8; 4096];
    // Freed memory never decays by time (wall-clock time under callgrind would make the
    // counts vary from run to run); the cache's page bound alone decides, as by default.
    let policy = MemoryPolicy {
        free_page_decay_ms: u64::MAX / 4,
        ..MemoryPolicy::default()
    };
    let p = Pool::with_memory_policy(PoolConfig::default(), policy).unwrap();
    let mut hs = Vec::with_capacity(n);
    // A warm-up round (not counted): handle-table segments, zspage runs and the arena's
    // free-run cache exist before the counted phases, which then measure the steady state.
    for &l in &lens {
        hs.push(p.alloc_write(&data[..l]).unwrap());
    }
    for h in hs.drain(..) {
        p.free(h).unwrap();
    }
    phase_alloc(&p, &lens, &data, &mut hs);
    phase_read(&p, &hs);
    phase_free(&p, &mut hs);
    println!("ops per phase: {n}");
}
