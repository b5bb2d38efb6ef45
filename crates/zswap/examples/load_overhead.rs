// SPDX-License-Identifier: MIT
//! Where a load's time over the raw decompressor goes, on real memory, with the host's noise
//! paired away: the corpus is walked in blocks of `BLOCK` pages, and each block is decompressed
//! three ways in turn, each into its own pre-touched destination:
//!
//! - **raw**: from one contiguous buffer of compressed pages (what `uzswap bench` compares
//!   against);
//! - **scattered**: from a copy laid out as zsmalloc lays it out (objects grouped by size
//!   class, slot order inside a class), so consecutive slots sit in different places: what the
//!   pool's layout alone costs the decoder (an upper bound: this copy is ordinary heap memory
//!   on 4 KiB pages, so its share includes TLB misses that the pool, on THP, does not pay);
//! - **load**: through the cache (`Zswap::load`, kept, in slot order).
//!
//! It prints the quartiles over all blocks of each block's per-page difference to raw. The
//! difference load - scattered is the cache's own work per load (index, entry, handle, pool,
//! counters) and the misses that work takes; scattered - raw is the layout's.
//!
//! `cargo run --release -p uzswap-zswap --example load_overhead -- FILE.pages [PAGES] [ROUNDS]
//! [BLOCK] [ORDER] [ALG]` (a page file from `uzswap capture`; PAGES 16384, ROUNDS 5, BLOCK 512,
//! ORDER `slot` or `random` (a fixed permutation of the slots; each side writes its
//! destinations in visiting order), ALG lz4). A small PAGES (32) and BLOCK (32) keep everything
//! in cache and give the fixed cost per load; a PAGES whose pool exceeds the last-level cache
//! (60000 of a real program's pages) gives a random-order load's misses.

use std::hint::black_box;
use std::time::Instant;

use uzswap_backing::SwapSlot;
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_zsmalloc::CLASS_DELTA;
use uzswap_zswap::{CgroupId, PAGE_SIZE};

mod common;

use common::{cache, nonzero_pages, quartiles, Cli};

fn main() {
    let cli = Cli::parse(
        "load_overhead",
        "FILE.pages [PAGES] [ROUNDS] [BLOCK] [slot|random] [ALG]",
    );
    let corpus = cli.corpus();
    let pages = nonzero_pages(&corpus, cli.num(2, 16384));
    let (n, rounds, block) = (pages.len(), cli.num(3, 5), cli.num(4, 512).max(1));
    let random = match cli.word(5) {
        None | Some("slot") => false,
        Some("random") => true,
        Some(o) => cli.fail(format_args!("ORDER is slot or random, not {o}"), 2),
    };
    // The visiting order: slot order, or a fixed random permutation (a xorshift shuffle). The
    // destinations are written in visiting order on all three sides, as `uzswap bench` does.
    let mut visit: Vec<usize> = (0..n).collect();
    if random {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for k in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            visit.swap(k, (x % (k as u64 + 1)) as usize);
        }
    }
    let alg = cli.alg(6, Algorithm::Lz4);

    let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
    let mut raw = Vec::new();
    let mut spans = Vec::with_capacity(n);
    for p in &pages {
        let len = compress(alg, p, &mut buf).expect("compresses any page");
        spans.push((raw.len(), len));
        raw.extend_from_slice(&buf[..len]);
    }
    // zsmalloc's layout: objects rounded up to their size class, each class's objects together
    // in slot order.
    let class_size = |len: usize| len.div_ceil(CLASS_DELTA) * CLASS_DELTA;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&k| (class_size(spans[k].1), k));
    let mut scattered = vec![0u8; order.iter().map(|&k| class_size(spans[k].1)).sum()];
    let mut scattered_spans = vec![(0, 0); n];
    let mut off = 0;
    for &k in &order {
        let (o, len) = spans[k];
        scattered[off..off + len].copy_from_slice(&raw[o..o + len]);
        scattered_spans[k] = (off, len);
        off += class_size(len);
    }

    let z = cache(alg, n);
    for (i, p) in pages.iter().enumerate() {
        z.store(SwapSlot::new(0, i as u64), p, CgroupId::ROOT);
    }

    let mut dest: Vec<Vec<u8>> = (0..3).map(|i| vec![i as u8 + 1; n * PAGE_SIZE]).collect();
    let (mut over_scattered, mut over_load, mut raw_ns) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for start in (0..n).step_by(block) {
            let range = start..(start + block).min(n);
            let per_page = range.len() as f64;
            let time = |d: &mut Vec<u8>, src: &[u8], spans: &[(usize, usize)]| {
                let t = Instant::now();
                for j in range.clone() {
                    let (o, len) = spans[visit[j]];
                    let page = &mut d[j * PAGE_SIZE..(j + 1) * PAGE_SIZE];
                    black_box(decompress(alg, &src[o..o + len], page).expect("decodes"));
                }
                t.elapsed().as_nanos() as f64 / per_page
            };
            let r = time(&mut dest[0], &raw, &spans);
            let s = time(&mut dest[1], &scattered, &scattered_spans);
            let t = Instant::now();
            for j in range.clone() {
                let page = &mut dest[2][j * PAGE_SIZE..(j + 1) * PAGE_SIZE];
                black_box(
                    z.load(SwapSlot::new(0, visit[j] as u64), page, false)
                        .expect("loads"),
                );
            }
            let l = t.elapsed().as_nanos() as f64 / per_page;
            raw_ns.push(r);
            over_scattered.push(s - r);
            over_load.push(l - r);
        }
    }
    // Each destination page holds the page visited at that position.
    for (j, &k) in visit.iter().enumerate() {
        assert_eq!(
            &dest[2][j * PAGE_SIZE..(j + 1) * PAGE_SIZE],
            pages[k],
            "page {k} read back"
        );
    }
    println!(
        "{n} pages, {} blocks of {block}, {} order: raw {alg} decompress {} per page",
        raw_ns.len(),
        if random { "random" } else { "slot" },
        quartiles(&mut raw_ns)
    );
    println!("  scattered - raw: {}", quartiles(&mut over_scattered));
    println!("  load - raw:      {}", quartiles(&mut over_load));
}
