// SPDX-License-Identifier: MIT
//! Quick interleaved timing of the page codecs against liblzo2 (if installed) and liblz4 on
//! real pages:
//! `cargo run --release -p uzswap-compress --example lzo_speed [ROUNDS]`. Prints the median
//! ns/page per codec over ROUNDS rounds; each round runs every codec once over all pages, so
//! machine noise hits them alike.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/liblzo2.rs"]
mod liblzo2;

use std::time::Instant;
use uzswap_compress::{compress, compress_liblz4, decompress, Algorithm, MAX_COMPRESSED_LEN};

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(9);
    // SOURCE=mem: only live process memory (this process and the pids in PIDS), which
    // compresses better than the default mix of binaries and heap.
    // CORPUS=FILE: the first 8192 non-zero pages of a page file written by `uzswap capture`
    // (pages start after its 4096-byte header; crates/corpus/src/pagefile.rs).
    let mut pages = Vec::new();
    if let Ok(path) = std::env::var("CORPUS") {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            bytes.starts_with(b"UZSWAPPG") && bytes.len() > 4096,
            "{path}: not a page file"
        );
        pages.extend(
            bytes[4096..]
                .chunks_exact(4096)
                .filter(|p| p.iter().any(|&b| b != 0))
                .take(8192)
                .map(<[u8]>::to_vec),
        );
    } else if std::env::var("SOURCE").as_deref() == Ok("mem") {
        pages.extend(common::process_pages(1024));
        for pid in std::env::var("PIDS").unwrap_or_default().split_whitespace() {
            pages.extend(common::pid_pages(pid, 1024));
        }
    } else {
        pages = common::real_pages(768);
        pages.extend(common::process_pages(256));
    }
    let n = pages.len();
    let mut lib = liblzo2::LibLzo2::load();
    let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
    let mut out = vec![0u8; 4096];
    let algs = [Algorithm::Lz4, Algorithm::Lzo, Algorithm::LzoRle];
    let packed: Vec<Vec<Vec<u8>>> = algs
        .iter()
        .map(|&a| {
            pages
                .iter()
                .map(|p| {
                    let k = compress(a, p, &mut buf).unwrap();
                    buf[..k].to_vec()
                })
                .collect()
        })
        .collect();
    let lib_packed: Option<Vec<Vec<u8>>> = lib.as_mut().map(|l| {
        pages
            .iter()
            .map(|p| {
                let k = l.compress(p, &mut buf);
                buf[..k].to_vec()
            })
            .collect()
    });
    let mut names: Vec<String> = Vec::new();
    let mut times: Vec<Vec<f64>> = Vec::new();
    // ONLY=substring limits the run to matching codecs (for `perf stat` of one codec).
    let only = std::env::var("ONLY").unwrap_or_default();
    let want = |name: &str| only.is_empty() || name.contains(only.as_str());
    let mut record = |name: String, ns: f64| {
        if let Some(i) = names.iter().position(|x| *x == name) {
            times[i].push(ns);
        } else {
            names.push(name);
            times.push(vec![ns]);
        }
    };
    for _ in 0..rounds {
        if want("memcpy") {
            let t = Instant::now();
            for p in &pages {
                out.copy_from_slice(std::hint::black_box(p));
                std::hint::black_box(&out);
            }
            record("memcpy".into(), t.elapsed().as_nanos() as f64 / n as f64);
        }
        for (ai, &a) in algs.iter().enumerate() {
            if want(&format!("{a} compress")) {
                let t = Instant::now();
                for p in &pages {
                    std::hint::black_box(compress(a, p, &mut buf).unwrap());
                }
                record(
                    format!("{a} compress"),
                    t.elapsed().as_nanos() as f64 / n as f64,
                );
            }
            if want(&format!("{a} decompress")) {
                let t = Instant::now();
                for c in &packed[ai] {
                    assert_eq!(decompress(a, c, &mut out).unwrap(), 4096);
                }
                record(
                    format!("{a} decompress"),
                    t.elapsed().as_nanos() as f64 / n as f64,
                );
            }
        }
        if want("lz4_flex compress") {
            let t = Instant::now();
            for p in &pages {
                std::hint::black_box(lz4_flex::block::compress_into(p, &mut buf).unwrap());
            }
            record(
                "lz4_flex compress".into(),
                t.elapsed().as_nanos() as f64 / n as f64,
            );
        }
        if want("lz4_flex decompress") {
            let t = Instant::now();
            for c in &packed[0] {
                assert_eq!(lz4_flex::block::decompress_into(c, &mut out).unwrap(), 4096);
            }
            record(
                "lz4_flex decompress".into(),
                t.elapsed().as_nanos() as f64 / n as f64,
            );
        }
        // The reference the Rust LZ4 (the `lz4 compress` row) is measured against.
        if want("liblz4 compress") {
            let t = Instant::now();
            for p in &pages {
                std::hint::black_box(compress_liblz4(p, &mut buf).unwrap());
            }
            record(
                "liblz4 compress".into(),
                t.elapsed().as_nanos() as f64 / n as f64,
            );
        }
        if let (Some(l), Some(lp)) = (lib.as_mut(), lib_packed.as_ref()) {
            if want("liblzo2 compress") {
                let t = Instant::now();
                for p in &pages {
                    std::hint::black_box(l.compress(p, &mut buf));
                }
                record(
                    "liblzo2 compress".into(),
                    t.elapsed().as_nanos() as f64 / n as f64,
                );
            }
            if want("liblzo2 decompress") {
                let t = Instant::now();
                for c in lp {
                    assert_eq!(l.decompress(c, &mut out), Ok(4096));
                }
                record(
                    "liblzo2 decompress".into(),
                    t.elapsed().as_nanos() as f64 / n as f64,
                );
            }
        }
    }
    println!("{n} pages, {rounds} rounds, median ns/page:");
    let flex: usize = pages
        .iter()
        .map(|p| lz4_flex::block::compress(p).len())
        .sum();
    for (ai, a) in algs.iter().enumerate() {
        let total: usize = packed[ai].iter().map(Vec::len).sum();
        println!(
            "{a}: compressed/original {:.4}",
            total as f64 / (n * 4096) as f64
        );
    }
    println!(
        "lz4_flex: compressed/original {:.4}",
        flex as f64 / (n * 4096) as f64
    );
    for (name, mut v) in names.into_iter().zip(times) {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{name:28} {:8.0}   (min {:.0})", v[v.len() / 2], v[0]);
    }
}
