// SPDX-License-Identifier: MIT
//! A load from a cold cache: what an embedder that loads now and then, or `uzswap run`'s fault
//! path after the program has run a while, meets. `uzswap bench` and `load_overhead` run loads
//! back to back, so everything a load touches besides its own slot (the code, thread-locals,
//! the cache's and the pool's shared structures, and the pages' translations) stays cached
//! there, and this cost does not show.
//!
//! Each sample picks a random stored slot, streams through a buffer larger than the last-level
//! cache (THRASH_MIB MiB), times one raw decompression of that page's compressed copy (its own heap
//! allocation, cold as well) into a cold destination; streams again, and times one
//! `Zswap::load` of the slot into the same destination. It prints the quartiles of both and of
//! their per-sample difference.
//!
//! `cargo run --release -p uzswap-zswap --example cold_load -- FILE.pages [PAGES] [SAMPLES]
//! [THRASH_MIB] [ALG] [kept|exclusive]` (PAGES 20000, SAMPLES 2000, THRASH_MIB 64, ALG lzo,
//! kept).
//! An exclusive load frees the entry, so each sample then stores the page back, outside the
//! timed part. The environment splits the cold cost:
//! - `COLD_LOAD_WARM=code`: after the stream, an untimed load from a second, small cache
//!   (another instance: its own index, entries, pool) warms what the two share, the code,
//!   thread-locals, statics and their page translations; the slot's cache stays cold. The raw
//!   side first decompresses another page (untimed), which warms the decoder's code alike.
//! - `COLD_LOAD_WARM=all`: the same, but the untimed load is of another slot of the same cache,
//!   which warms everything but the slot's own lines (its index word, entry, handle, object).
//! - `COLD_LOAD_THP=1`: the streamed buffer is on transparent huge pages, so streaming it
//!   replaces cache lines but few TLB entries.
//!
//! The warm-up loads write to a destination of their own, so the timed one's stays cold.

use std::hint::black_box;
use std::time::Instant;

use uzswap_backing::SwapSlot;
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_zswap::{CgroupId, PAGE_SIZE};

mod common;

use common::{cache, nonzero_pages, quartiles, Cli};

/// Reads one byte per cache line of `buf`: every line of the caches is replaced.
fn thrash(buf: &[u8]) -> u64 {
    buf.iter()
        .step_by(64)
        .fold(0u64, |a, &b| a.wrapping_add(u64::from(b)))
}

/// The streamed buffer, filled; with `huge`, on transparent huge pages (`MADV_HUGEPAGE`), so
/// that streaming it replaces cache lines but few TLB entries.
fn thrash_buffer(len: usize, huge: bool) -> &'static [u8] {
    // SAFETY: a fresh private anonymous mapping, never unmapped (the process's lifetime), only
    // read after it is filled here.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        if huge {
            libc::madvise(p, len, libc::MADV_HUGEPAGE);
        }
        let b = std::slice::from_raw_parts_mut(p.cast::<u8>(), len);
        for (i, v) in b.iter_mut().enumerate() {
            *v = i as u8;
        }
        b
    }
}

/// What an untimed operation warms before each timed one (`COLD_LOAD_WARM`).
enum Warm {
    Nothing,
    /// A load from this second cache: the code, thread-locals and statics.
    Shared(uzswap_zswap::Zswap),
    /// A load of another slot of the same cache.
    AllButSlot,
}

fn main() {
    let cli = Cli::parse(
        "cold_load",
        "FILE.pages [PAGES] [SAMPLES] [THRASH_MIB] [ALG] [kept|exclusive]",
    );
    let corpus = cli.corpus();
    let pages = nonzero_pages(&corpus, cli.num(2, 20000));
    let (n, samples, thrash_mib) = (pages.len(), cli.num(3, 2000), cli.num(4, 64));
    let alg = cli.alg(5, Algorithm::Lzo);
    let exclusive = match cli.word(6) {
        None | Some("kept") => false,
        Some("exclusive") => true,
        Some(o) => cli.fail(format_args!("MODE is kept or exclusive, not {o}"), 2),
    };
    if n == 0 {
        cli.fail("the page file has no page that is not all zero", 1);
    }
    let z = cache(alg, n);
    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    let comp: Vec<Vec<u8>> = pages
        .iter()
        .map(|p| {
            let k = compress(alg, p, &mut dst).expect("compress");
            dst[..k].to_vec()
        })
        .collect();
    for (i, p) in pages.iter().enumerate() {
        z.store(SwapSlot::new(0, i as u64), p, CgroupId::ROOT);
    }
    let big = thrash_buffer(
        thrash_mib << 20,
        std::env::var_os("COLD_LOAD_THP").is_some(),
    );
    let warm = match std::env::var("COLD_LOAD_WARM").as_deref() {
        Err(_) => Warm::Nothing,
        Ok("code") => Warm::Shared({
            let z2 = cache(alg, 64);
            for (i, p) in pages.iter().take(64).enumerate() {
                z2.store(SwapSlot::new(0, i as u64), p, CgroupId::ROOT);
            }
            z2
        }),
        Ok("all") => Warm::AllButSlot,
        Ok(o) => cli.fail(format_args!("COLD_LOAD_WARM is code or all, not {o}"), 2),
    };
    let mut page = vec![0u8; PAGE_SIZE];
    // The warm-up loads' destination: `page` itself stays cold on both sides.
    let mut other = vec![0u8; PAGE_SIZE];
    let (mut raw, mut load, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut sink = 0u64;
    for _ in 0..samples {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % n as u64) as usize;
        // The warm-ups' slot, far from `i`.
        let j = (i + n / 2) % n;
        sink = sink.wrapping_add(thrash(big));
        if !matches!(warm, Warm::Nothing) {
            // The decoder's code and the raw side's own state.
            black_box(decompress(alg, &comp[j], &mut other).expect("raw decompress"));
        }
        let t0 = Instant::now();
        black_box(decompress(alg, &comp[i], &mut page).expect("raw decompress"));
        let r = t0.elapsed().as_nanos() as f64;
        assert_eq!(&page[..], pages[i], "raw decompression of page {i}");
        sink = sink.wrapping_add(thrash(big));
        match &warm {
            Warm::Nothing => {}
            Warm::Shared(z2) => {
                let s = SwapSlot::new(0, (j % 64) as u64);
                black_box(z2.load(s, &mut other, false).expect("load"));
            }
            Warm::AllButSlot => {
                black_box(
                    z.load(SwapSlot::new(0, j as u64), &mut other, false)
                        .expect("load"),
                );
            }
        }
        let t1 = Instant::now();
        black_box(
            z.load(SwapSlot::new(0, i as u64), &mut page, exclusive)
                .expect("load"),
        );
        let l = t1.elapsed().as_nanos() as f64;
        assert_eq!(&page[..], pages[i], "load of slot {i}");
        if exclusive {
            z.store(SwapSlot::new(0, i as u64), pages[i], CgroupId::ROOT);
        }
        raw.push(r);
        load.push(l);
        diff.push(l - r);
    }
    black_box(sink);
    println!(
        "{n} pages, {samples} samples, {thrash_mib} MiB streamed before each, {alg:?}, {}:",
        if exclusive { "exclusive" } else { "kept" }
    );
    println!("  raw decompress, cold: {}", quartiles(&mut raw));
    println!("  load, cold:           {}", quartiles(&mut load));
    println!("  load - raw:           {}", quartiles(&mut diff));
}
