// SPDX-License-Identifier: MIT
//! Where a store's time over the raw compressor goes, on real memory, with the host's noise
//! paired away (the store-side twin of `load_overhead`): the corpus is walked in blocks of
//! `BLOCK` pages, and each block is first compressed raw (every page into one reused buffer,
//! what `uzswap bench` compares against) and then stored through the cache (`Zswap::store`).
//! Each round stores into a new, empty cache (a growing pool: zspages carved from fresh
//! chunks, as `uzswap bench`'s cold store), then invalidates everything and stores the corpus
//! again into the same cache (its freed memory still resident: the warm store).
//!
//! It prints the quartiles over all blocks of each block's per-page difference to raw: the
//! cache's own work per store (zero check, limits, allocation, the copy into the slot, LRU,
//! index, counters) and the cache misses that work takes.
//!
//! `cargo run --release -p uzswap-zswap --example store_overhead -- FILE.pages [PAGES] [ROUNDS]
//! [BLOCK] [ALG]` (a page file from `uzswap capture`; PAGES 16384, ROUNDS 5, BLOCK 256, ALG
//! lz4).

use std::hint::black_box;
use std::time::Instant;

use uzswap_backing::SwapSlot;
use uzswap_compress::{compress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_zswap::{CgroupId, LoadOutcome, StoreOutcome, Zswap, PAGE_SIZE};

mod common;

use common::{cache, nonzero_pages, quartiles, Cli};

/// Raw compression of `pages[range]` then their stores into `z`, in ns per page.
fn pair(
    z: &Zswap,
    pages: &[&[u8]],
    range: std::ops::Range<usize>,
    alg: Algorithm,
    buf: &mut [u8],
) -> (f64, f64) {
    let per_page = range.len() as f64;
    let t = Instant::now();
    for k in range.clone() {
        black_box(compress(alg, pages[k], buf).expect("compresses any page"));
    }
    let raw = t.elapsed().as_nanos() as f64 / per_page;
    let t = Instant::now();
    for k in range {
        let out = z.store(SwapSlot::new(0, k as u64), pages[k], CgroupId::ROOT);
        assert!(
            matches!(
                out,
                StoreOutcome::Stored | StoreOutcome::StoredIncompressible
            ),
            "page {k}: {out:?}"
        );
    }
    let store = t.elapsed().as_nanos() as f64 / per_page;
    (raw, store)
}

fn main() {
    let cli = Cli::parse(
        "store_overhead",
        "FILE.pages [PAGES] [ROUNDS] [BLOCK] [ALG]",
    );
    let corpus = cli.corpus();
    let pages = nonzero_pages(&corpus, cli.num(2, 16384));
    let (n, rounds, block) = (pages.len(), cli.num(3, 5), cli.num(4, 256).max(1));
    let alg = cli.alg(5, Algorithm::Lz4);
    let mut buf = vec![0u8; MAX_COMPRESSED_LEN];

    let (mut raw_ns, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    let mut page = vec![0u8; PAGE_SIZE];
    for _ in 0..rounds {
        let z = cache(alg, n);
        for (pass, out) in [&mut cold, &mut warm].into_iter().enumerate() {
            if pass == 1 {
                for k in 0..n {
                    z.invalidate(SwapSlot::new(0, k as u64));
                }
            }
            for start in (0..n).step_by(block) {
                let (r, s) = pair(&z, &pages, start..(start + block).min(n), alg, &mut buf);
                raw_ns.push(r);
                out.push(s - r);
            }
        }
        for (k, p) in pages.iter().enumerate() {
            let got = z.load(SwapSlot::new(0, k as u64), &mut page, false);
            assert!(matches!(got, Ok(LoadOutcome::Hit)), "page {k}: {got:?}");
            assert_eq!(&page[..], *p, "page {k} read back");
        }
    }
    println!(
        "{n} pages, {rounds} rounds, blocks of {block}: raw {alg} compress {} per page",
        quartiles(&mut raw_ns)
    );
    println!("  cold store - raw: {}", quartiles(&mut cold));
    println!("  warm store - raw: {}", quartiles(&mut warm));
}
