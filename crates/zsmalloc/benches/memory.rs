// SPDX-License-Identifier: MIT
//! Memory efficiency on real compressed pages: pool pages versus the ideal (sum of object
//! sizes / 4096) for chain sizes 4, 8 and 16 and both chain rules, after storing every page,
//! after freeing a random 50%, and after compaction. Prints a Markdown table.
//!
//! `cargo bench -p uzswap-zsmalloc --bench memory`

mod common;

use uzswap_zsmalloc::{ChainRule, Pool, PoolConfig};

fn main() {
    let n: usize = std::env::var("ZSM_BENCH_PAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000);
    let pages = common::compressed_pages(n);
    let total: usize = pages.iter().map(|p| p.len()).sum();
    println!(
        "{} real pages (/usr/bin, /usr/lib/x86_64-linux-gnu), lz4 -> {} bytes, ratio {:.2}\n",
        pages.len(),
        total,
        (pages.len() * 4096) as f64 / total as f64
    );
    println!("| chain | rule | ideal pages | pool pages | overhead | after 50% free: ideal | pool | compactable | after compact | overhead | pages compacted |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for chain in [4usize, 8, 16] {
        for rule in [ChainRule::MinWaste, ChainRule::UsedPercent] {
            let pool = Pool::new(PoolConfig {
                chain_size: chain,
                chain_rule: rule,
            })
            .unwrap();
            let handles: Vec<_> = pages.iter().map(|p| pool.alloc_write(p).unwrap()).collect();
            let ideal = total as f64 / 4096.0;
            let full = pool.total_pages();
            // Same predicted count from the class table alone (allocation-only workload).
            assert_eq!(
                full,
                pool.class_table()
                    .pages_for_objects(pages.iter().map(|p| p.len()))
            );
            let mut rng = common::Lcg(42);
            let mut kept_bytes = 0usize;
            for (h, p) in handles.into_iter().zip(&pages) {
                if rng.next() % 2 == 0 {
                    pool.free(h).unwrap();
                } else {
                    kept_bytes += p.len();
                }
            }
            let ideal2 = kept_bytes as f64 / 4096.0;
            let frag = pool.total_pages();
            let compactable = pool.compactable_pages();
            let freed = pool.compact();
            let after = pool.total_pages();
            println!(
                "| {chain} | {rule} | {ideal:.0} | {full} | {:+.2}% | {ideal2:.0} | {frag} ({:+.1}%) | {compactable} | {after} | {:+.2}% | {freed} |",
                (full as f64 / ideal - 1.0) * 100.0,
                (frag as f64 / ideal2 - 1.0) * 100.0,
                (after as f64 / ideal2 - 1.0) * 100.0,
            );
        }
    }
}
