// SPDX-License-Identifier: MIT
//! Per-page compress/decompress of every algorithm on real pages, against references measured
//! in the same run: memcpy of a page, lz4_flex (pure Rust, unsafe paths), liblz4's
//! LZ4_compress_default (fresh state per call) and, when installed, Debian's liblzo2.
//!
//! `cargo bench -p uzswap-compress --bench codecs` ; the kernel (zram) comparison is the
//! `zram_speed` example of uzswap-conformance.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/liblzo2.rs"]
mod liblzo2;

const PAGE: usize = 4096;

fn pages() -> Vec<Vec<u8>> {
    let mut p = common::real_pages(768);
    p.extend(common::process_pages(256));
    p
}

fn bench(c: &mut Criterion) {
    let pages = pages();
    let n = pages.len();
    eprintln!("{n} real pages");

    let mut g = c.benchmark_group("page");
    g.throughput(Throughput::Bytes(PAGE as u64));
    g.sample_size(30);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.warm_up_time(std::time::Duration::from_millis(500));

    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    let mut out = vec![0u8; PAGE];

    let mut i = 0usize;
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            i = (i + 1) % n;
            out.copy_from_slice(black_box(&pages[i]));
            black_box(&out);
        })
    });

    let mut algs = Algorithm::ALL_DEFAULTS.to_vec();
    algs.retain(|a| a.is_built_in());
    algs.push("zstd:1".parse().unwrap());
    algs.push("deflate:1".parse().unwrap());
    for alg in algs {
        let mut i = 0usize;
        g.bench_function(format!("compress/{alg}"), |b| {
            b.iter(|| {
                i = (i + 1) % n;
                black_box(compress(alg, black_box(&pages[i]), &mut dst).unwrap())
            })
        });
        let packed: Vec<Vec<u8>> = pages
            .iter()
            .map(|p| {
                let k = compress(alg, p, &mut dst).unwrap();
                dst[..k].to_vec()
            })
            .collect();
        let ratio = packed.iter().map(Vec::len).sum::<usize>() as f64 / (n * PAGE) as f64;
        eprintln!("{alg}: compressed/original = {ratio:.4}");
        let mut i = 0usize;
        g.bench_function(format!("decompress/{alg}"), |b| {
            b.iter(|| {
                i = (i + 1) % n;
                let m = decompress(alg, black_box(&packed[i]), &mut out).unwrap();
                assert_eq!(m, PAGE);
            })
        });
    }

    // References.
    let mut i = 0usize;
    g.bench_function("ref/lz4_flex/compress", |b| {
        b.iter(|| {
            i = (i + 1) % n;
            black_box(lz4_flex::block::compress_into(black_box(&pages[i]), &mut dst).unwrap())
        })
    });
    let packed: Vec<Vec<u8>> = pages.iter().map(|p| lz4_flex::block::compress(p)).collect();
    let mut i = 0usize;
    g.bench_function("ref/lz4_flex/decompress", |b| {
        b.iter(|| {
            i = (i + 1) % n;
            let m = lz4_flex::block::decompress_into(black_box(&packed[i]), &mut out).unwrap();
            assert_eq!(m, PAGE);
        })
    });
    let mut i = 0usize;
    g.bench_function("ref/liblz4/compress_default", |b| {
        b.iter(|| {
            i = (i + 1) % n;
            // SAFETY: valid buffers of the given sizes.
            black_box(unsafe {
                lz4_sys::LZ4_compress_default(
                    pages[i].as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    PAGE as i32,
                    dst.len() as i32,
                )
            })
        })
    });
    if let Some(mut lib) = liblzo2::LibLzo2::load() {
        let mut i = 0usize;
        g.bench_function("ref/liblzo2/compress", |b| {
            b.iter(|| {
                i = (i + 1) % n;
                black_box(lib.compress(black_box(&pages[i]), &mut dst))
            })
        });
        let packed: Vec<Vec<u8>> = pages
            .iter()
            .map(|p| {
                let k = lib.compress(p, &mut dst);
                dst[..k].to_vec()
            })
            .collect();
        let mut i = 0usize;
        g.bench_function("ref/liblzo2/decompress", |b| {
            b.iter(|| {
                i = (i + 1) % n;
                assert_eq!(lib.decompress(black_box(&packed[i]), &mut out), Ok(PAGE));
            })
        });
    } else {
        eprintln!("liblzo2.so.2 not installed: liblzo2 reference skipped");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
