// SPDX-License-Identifier: MIT
//! The estimate is what the compressor and the allocator give when run directly on the same
//! pages with the kernel's rules written out again here, independently of the crate's code.

use proptest::prelude::*;
use std::sync::OnceLock;
use uzswap_compress::{Algorithm, MAX_COMPRESSED_LEN};
use uzswap_corpus::{default_corpus_with, DefaultCorpusOptions, Pages, PAGE_SIZE};
use uzswap_estimate::{estimate, EstimateOptions, EstimateResult};
use uzswap_zsmalloc::{ChainRule, Pool, PoolConfig};

/// Real process memory, plus pages that exercise every rule: all-zero, one repeated non-zero
/// word (zram "same", zswap compresses it), and already-compressed data (incompressible; made
/// by zstd-compressing the real pages, not random bytes).
fn corpus() -> &'static Pages {
    static C: OnceLock<Pages> = OnceLock::new();
    C.get_or_init(|| {
        let mut p = default_corpus_with(&DefaultCorpusOptions {
            max_pages: 600,
            ..Default::default()
        })
        .unwrap();
        let packed = zstd_bytes(p.as_bytes());
        for chunk in packed.chunks_exact(PAGE_SIZE).take(6) {
            p.push_page(chunk).unwrap();
        }
        p.push_page(&[0u8; PAGE_SIZE]).unwrap();
        let word: Vec<u8> = 0xdead_beef_0bad_f00du64.to_le_bytes().repeat(PAGE_SIZE / 8);
        p.push_page(&word).unwrap();
        p.push_page(&[0x41u8; PAGE_SIZE]).unwrap();
        p
    })
}

fn zstd_bytes(data: &[u8]) -> Vec<u8> {
    // Compress page by page with the project's codec, concatenating the outputs.
    let mut out = Vec::new();
    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    for page in data.chunks_exact(PAGE_SIZE) {
        let n = uzswap_compress::compress(Algorithm::Zstd { level: 19 }, page, &mut dst).unwrap();
        out.extend_from_slice(&dst[..n]);
    }
    out
}

struct Direct {
    zram_pages: usize,
    zswap_pages: usize,
    huge: u64,
    incompressible: u64,
    same: u64,
    zero: u64,
    compressed_bytes: u64,
    zram_compr: u64,
}

fn direct(pages: &Pages, alg: Algorithm, chain_size: usize) -> Direct {
    let cfg = PoolConfig {
        chain_size,
        chain_rule: ChainRule::MinWaste,
    };
    let zram = Pool::new(cfg).unwrap();
    let zswap = Pool::new(cfg).unwrap();
    let huge_class_size = zram.class_table().huge_class_size();
    let mut d = Direct {
        zram_pages: 0,
        zswap_pages: 0,
        huge: 0,
        incompressible: 0,
        same: 0,
        zero: 0,
        compressed_bytes: 0,
        zram_compr: 0,
    };
    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    for page in pages.iter() {
        let words: Vec<u64> = page
            .chunks_exact(8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .collect();
        let same = words.iter().all(|&w| w == words[0]);
        let zero = same && words[0] == 0;
        if zero {
            d.zero += 1;
            d.same += 1;
            continue;
        }
        let len = uzswap_compress::compress_kernel_exact(alg, page, &mut dst).unwrap_or(PAGE_SIZE);
        d.compressed_bytes += len as u64;
        // zswap
        if len >= PAGE_SIZE {
            d.incompressible += 1;
            zswap.alloc(PAGE_SIZE).unwrap();
        } else {
            zswap.alloc(len).unwrap();
        }
        // zram
        if same {
            d.same += 1;
        } else if len >= huge_class_size {
            d.huge += 1;
            d.zram_compr += PAGE_SIZE as u64;
            zram.alloc(PAGE_SIZE).unwrap();
        } else {
            d.zram_compr += len as u64;
            zram.alloc(len).unwrap();
        }
    }
    d.zram_pages = zram.total_pages();
    d.zswap_pages = zswap.total_pages();
    d
}

fn check(r: &EstimateResult, d: &Direct, n: usize) {
    let ctx = format!("{} chain {}", r.compressor, r.chain_size);
    assert_eq!(r.pool_pages as usize, d.zram_pages, "{ctx}");
    assert_eq!(
        r.zram_mem_used_total,
        (d.zram_pages * PAGE_SIZE) as u64,
        "{ctx}"
    );
    assert_eq!(
        r.zswap_pool_total_size,
        (d.zswap_pages * PAGE_SIZE) as u64,
        "{ctx}"
    );
    assert_eq!(r.huge_objects, d.huge, "{ctx}");
    assert_eq!(r.incompressible_pages, d.incompressible, "{ctx}");
    assert_eq!(r.compressed_bytes, d.compressed_bytes, "{ctx}");
    let mm = &r.zram_mm_stat;
    assert_eq!(mm.orig_data_size, (n * PAGE_SIZE) as u64, "{ctx}");
    assert_eq!(mm.compr_data_size, d.zram_compr, "{ctx}");
    assert_eq!(mm.same_pages, d.same, "{ctx}");
    assert_eq!(mm.huge_pages, d.huge, "{ctx}");
    assert_eq!(r.zswap.swpout_zero, d.zero, "{ctx}");
    assert_eq!(r.zswap.stored_pages, n as u64 - d.zero, "{ctx}");
}

#[test]
fn estimate_equals_direct_run_for_every_compressor_and_chain() {
    let pages = corpus();
    let opts = EstimateOptions {
        compressors: Algorithm::ALL_DEFAULTS.to_vec(),
        chain_sizes: vec![4, 8, 16],
        chain_rule: ChainRule::MinWaste,
    };
    let est = estimate(pages, &opts).unwrap();
    assert_eq!(est.pages as usize, pages.len());
    assert!(est.zero_pages >= 1 && est.same_filled_pages >= est.zero_pages + 2);
    assert_eq!(est.results.len(), 15);
    let mut saw_incompressible = false;
    for r in &est.results {
        let alg: Algorithm = r.compressor.parse().unwrap();
        let d = direct(pages, alg, r.chain_size);
        check(r, &d, pages.len());
        saw_incompressible |= r.incompressible_pages > 0;
        assert!(
            r.compression_ratio > 1.5,
            "{}: real memory compresses",
            r.compressor
        );
    }
    assert!(
        saw_incompressible,
        "zstd output pages must be incompressible"
    );
}

#[test]
fn json_has_the_contract_keys() {
    let mut pages = Pages::new("json test");
    for i in 0..8 {
        pages.push_page(corpus().page(i)).unwrap();
    }
    let est = estimate(&pages, &EstimateOptions::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&est.to_json()).unwrap();
    for k in ["pages", "zero_pages", "same_filled_pages", "results"] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    let r = &v["results"][0];
    for k in [
        "compressor",
        "chain_size",
        "compressed_bytes",
        "pool_pages",
        "huge_objects",
        "incompressible_pages",
        "zram_mem_used_total",
        "zswap_pool_total_size",
    ] {
        assert!(r.get(k).is_some(), "missing results[].{k}");
    }
    assert_eq!(r["compressor"], "lz4");
    assert_eq!(v["results"][1]["compressor"], "lzo-rle");
    assert_eq!(r["chain_size"], 8);
}

#[test]
fn bad_options_are_errors() {
    let pages = Pages::from_bytes(corpus().page(0).to_vec(), "one").unwrap();
    let mut o = EstimateOptions {
        chain_sizes: vec![0],
        ..Default::default()
    };
    assert!(estimate(&pages, &o)
        .unwrap_err()
        .to_string()
        .contains("chain size"));
    o.chain_sizes = vec![];
    assert!(estimate(&pages, &o).is_err());
    let o = EstimateOptions {
        compressors: vec![],
        ..Default::default()
    };
    assert!(estimate(&pages, &o)
        .unwrap_err()
        .to_string()
        .contains("no compressor"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any order and multiset of real and special pages: estimate == direct run.
    #[test]
    fn estimate_equals_direct_on_any_selection(
        picks in proptest::collection::vec(0usize..10_000, 1..96),
        alg_i in 0usize..5,
        chain in prop::sample::select(vec![2usize, 4, 8, 16]),
    ) {
        let src = corpus();
        let mut pages = Pages::new("selection");
        for p in picks {
            // Bias towards the special pages at the end of the corpus.
            let i = if p % 4 == 0 { src.len() - 1 - (p / 4) % 9 } else { p % src.len() };
            pages.push_page(src.page(i)).unwrap();
        }
        let alg = Algorithm::ALL_DEFAULTS[alg_i];
        let opts = EstimateOptions { compressors: vec![alg], chain_sizes: vec![chain], chain_rule: ChainRule::MinWaste };
        let est = estimate(&pages, &opts).unwrap();
        let d = direct(&pages, alg, chain);
        check(&est.results[0], &d, pages.len());
    }
}
