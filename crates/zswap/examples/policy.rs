// SPDX-License-Identifier: MIT
//! Measures the pool-limit policy: the kernel's hysteresis (shrink only after the limit was
//! hit) against proactive shrinking (shrink in the background from accept + 1%: "mm: zswap:
//! proactive shrinking before pool size limit is hit", v2, on 6.10-rc6).
//!
//! `cargo run --release -p uzswap-zswap --example policy [ACCEPT_PERCENT]`
//!
//! Scenario of that series' benchmark ("mm: zswap: global shrinker fix and proactive shrink"): background cgroups fill the pool with cold pages, then an
//! active cgroup swaps a working set out and in repeatedly. Reported per policy: active pages
//! that missed the cache (went to the swap file on swap-out), swap-ins served from the file,
//! pool_limit_hit, written-back pages and the elapsed time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_zswap::{CgroupId, LoadOutcome, Params, StoreOutcome, Zswap, PAGE_SIZE};

fn pages(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir("/usr/bin")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        let Ok(data) = std::fs::read(&f) else {
            continue;
        };
        for c in data.chunks_exact(PAGE_SIZE) {
            if out.len() >= n {
                return out;
            }
            if c.iter().any(|&b| b != 0) {
                out.push(c.to_vec());
            }
        }
    }
    out
}

fn main() {
    let accept: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(90);
    let corpus = pages(4096);
    const SLOTS: u64 = 16384;
    const WORKING_SET: u64 = 1024;
    const BATCH: u64 = 256;
    const BG_PER_ROUND: u64 = 48;
    const ROUNDS: u64 = 60;
    println!("accept_threshold_percent {accept}, pool limit 20% of 32 MiB = 1638 pages");
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9}",
        "policy", "act-miss", "act-pswpin", "limit-hit", "written-back", "bg-on-disk", "ms"
    );
    for proactive in [false, true] {
        let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, SLOTS).unwrap());
        for _ in 0..SLOTS {
            swap.alloc_slot().unwrap();
        }
        let z = Zswap::new(Params {
            total_memory_bytes: 32 << 20,
            accept_threshold_percent: accept,
            proactive_shrink: proactive,
            ..Params::default()
        })
        .unwrap();
        z.add_swap_file(swap).unwrap();
        let bg = z.create_cgroup(CgroupId::ROOT).unwrap();
        let act = z.create_cgroup(CgroupId::ROOT).unwrap();
        // Background services fill the pool until it rejects.
        let mut s = 0u64;
        loop {
            let o = z
                .swap_out(SwapSlot::new(0, s), &corpus[s as usize % corpus.len()], bg)
                .unwrap();
            s += 1;
            if matches!(o, StoreOutcome::Rejected(_)) || s >= SLOTS / 4 {
                break;
            }
        }
        z.wait_shrink_idle(Duration::from_secs(30));
        let before = z.counters();
        // The active process: swap a batch out, then back in, over a working set.
        let base = SLOTS / 2;
        let (mut miss, mut from_disk) = (0u64, 0u64);
        let mut buf = vec![0u8; PAGE_SIZE];
        let start = Instant::now();
        for r in 0..ROUNDS {
            // Background services keep pushing cold pages out.
            for _ in 0..BG_PER_ROUND {
                z.swap_out(
                    SwapSlot::new(0, s % (SLOTS / 2)),
                    &corpus[s as usize % corpus.len()],
                    bg,
                )
                .unwrap();
                s += 1;
            }
            let first = (r * BATCH) % WORKING_SET;
            for i in first..first + BATCH {
                let p = &corpus[((i * 7 + r) as usize) % corpus.len()];
                if matches!(
                    z.swap_out(SwapSlot::new(0, base + i), p, act).unwrap(),
                    StoreOutcome::Rejected(_)
                ) {
                    miss += 1;
                }
            }
            for i in first..first + BATCH {
                if z.load(SwapSlot::new(0, base + i), &mut buf, true).unwrap()
                    == LoadOutcome::FromSwapFile
                {
                    from_disk += 1;
                }
            }
        }
        let ms = start.elapsed().as_secs_f64() * 1e3;
        z.wait_shrink_idle(Duration::from_secs(30));
        let after = z.counters();
        let bg_on_disk = (0..s.min(SLOTS / 2))
            .filter(|&i| z.slot_state(SwapSlot::new(0, i)) == Some(uzswap_zswap::SlotState::Empty))
            .count();
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9.1}",
            if proactive { "proactive" } else { "kernel" },
            miss,
            from_disk,
            after.pool_limit_hit - before.pool_limit_hit,
            after.written_back_pages - before.written_back_pages,
            bg_on_disk,
            ms
        );
    }
}
