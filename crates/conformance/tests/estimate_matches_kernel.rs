// SPDX-License-Identifier: MIT
//! The estimate against the running kernel: the same real pages written to an unused zram0
//! with every zram algorithm the estimator models (root, UZSWAP_KERNEL_TESTS=1).

use std::io::Write as _; // skip notices bypass the test harness's output capture
use uzswap_compress::Algorithm;
use uzswap_corpus::{default_corpus_with, DefaultCorpusOptions, PAGE_SIZE};
use uzswap_estimate::{estimate, EstimateOptions};
use uzswap_kernel::zram::Zram;
use uzswap_zsmalloc::ChainRule;

#[test]
fn estimate_matches_zram_mm_stat() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("estimate_matches_zram_mm_stat") else {
        return;
    };
    let pages = default_corpus_with(&DefaultCorpusOptions {
        max_pages: 4096,
        ..Default::default()
    })
    .unwrap();
    let mut zram = Zram::claim_unused(0).unwrap();
    let supported = zram.supported_algorithms().unwrap();
    let algs: Vec<Algorithm> = [Algorithm::Lzo, Algorithm::LzoRle, Algorithm::Lz4]
        .into_iter()
        .filter(|a| supported.iter().any(|s| s == a.kernel_name()))
        .collect();
    assert!(
        !algs.is_empty(),
        "zram offers none of lzo, lzo-rle, lz4: {supported:?}"
    );
    let est = estimate(
        &pages,
        &EstimateOptions {
            compressors: algs.clone(),
            chain_sizes: vec![8],
            chain_rule: ChainRule::MinWaste,
        },
    )
    .unwrap();
    for (alg, r) in algs.iter().zip(&est.results) {
        zram.configure(alg.kernel_name(), (pages.len() * PAGE_SIZE) as u64)
            .unwrap();
        zram.write_direct(0, pages.as_bytes()).unwrap();
        let k = zram.mm_stat().unwrap();
        zram.reset().unwrap();
        let p = &r.zram_mm_stat;
        let err = (p.mem_used_total as f64 - k.mem_used_total as f64) / k.mem_used_total as f64;
        eprintln!(
            "{alg}: predicted mem_used_total {} kernel {} ({:+.3}%), compr {} vs {}",
            p.mem_used_total,
            k.mem_used_total,
            err * 100.0,
            p.compr_data_size,
            k.compr_data_size
        );
        assert_eq!(p.orig_data_size, k.orig_data_size, "{alg}");
        assert_eq!(p.same_pages, k.same_pages, "{alg}: zram's same-page rule");
        // Kernel-exact compressors (lzo, lzo-rle, and lz4 through the Rust copy of the
        // kernel's LZ4 rules): the whole mm_stat matches.
        assert_eq!(p.compr_data_size, k.compr_data_size, "{alg}");
        assert_eq!(p.huge_pages, k.huge_pages, "{alg}");
        assert_eq!(
            p.mem_used_total,
            k.mem_used_total,
            "{alg}: {:+.3}% off",
            err * 100.0
        );
    }
}

/// The zswap prediction against the kernel's zswap: the same pages are pushed out of this
/// process with MADV_PAGEOUT into a temporary swap file with zswap enabled (lzo-rle, no
/// shrinker), and debugfs `stored_pages`, `stored_incompressible_pages`, `pool_total_size`
/// and vmstat `swpout_zero` are compared with the estimate for the pages that left RAM.
#[test]
fn estimate_matches_kernel_zswap() {
    use uzswap_kernel::{debugfs, swap, vmstat, zswap_params};
    let Some(_lock) = uzswap_kernel::kernel_test_guard("estimate_matches_kernel_zswap") else {
        return;
    };
    if !zswap_params::available() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: estimate_matches_kernel_zswap: no zswap in this kernel"
        )
        .ok();
        return;
    }
    let mut pages = default_corpus_with(&DefaultCorpusOptions {
        max_pages: 3000,
        ..Default::default()
    })
    .unwrap();
    // Rules zswap must apply: zero pages (zero map), a same-filled non-zero page (compressed
    // by zswap, unlike zram), already-compressed data (stored raw).
    let mut dst = vec![0u8; uzswap_compress::MAX_COMPRESSED_LEN];
    let mut packed = Vec::new();
    for i in 0..64 {
        let n = uzswap_compress::compress(Algorithm::Zstd { level: 19 }, pages.page(i), &mut dst)
            .unwrap();
        packed.extend_from_slice(&dst[..n]);
    }
    for chunk in packed.chunks_exact(PAGE_SIZE).take(3) {
        pages.push_page(chunk).unwrap();
    }
    pages.push_page(&[0u8; PAGE_SIZE]).unwrap();
    pages.push_page(&[0x5au8; PAGE_SIZE]).unwrap();

    let mut params = zswap_params::ParamGuard::new();
    params.set("shrinker_enabled", "N").unwrap();
    params.set("compressor", "lzo-rle").unwrap();
    params.set("enabled", "Y").unwrap();
    let before = debugfs::read_zswap().unwrap();
    if before.get("stored_pages") != Some(0) {
        writeln!(
            std::io::stderr(),
            "SKIPPED: estimate_matches_kernel_zswap: zswap already holds {:?} pages",
            before.get("stored_pages")
        )
        .ok();
        return;
    }
    let swap_path = std::path::PathBuf::from(format!(
        "/var/tmp/uzswap-estimate-test-{}.swap",
        std::process::id()
    ));
    let swapfile =
        swap::SwapFile::create(&swap_path, (pages.len() * PAGE_SIZE) as u64 + (16 << 20)).unwrap();
    let vm0 = vmstat::read().unwrap();
    let out = swap::page_out(pages.as_bytes()).unwrap();
    let after = debugfs::read_zswap().unwrap();
    let vm1 = vmstat::read().unwrap();
    let mut sel = uzswap_corpus::Pages::new("paged out");
    for (i, s) in out.swapped.iter().enumerate() {
        if *s {
            sel.push_page(pages.page(i)).unwrap();
        }
    }
    drop(out);
    drop(swapfile);
    drop(params);
    assert!(
        sel.len() * 10 >= pages.len() * 9,
        "only {} of {} pages left RAM",
        sel.len(),
        pages.len()
    );
    let est = estimate(
        &sel,
        &EstimateOptions {
            compressors: vec![Algorithm::LzoRle],
            chain_sizes: vec![8],
            chain_rule: ChainRule::MinWaste,
        },
    )
    .unwrap();
    let z = &est.results[0].zswap;
    eprintln!(
        "zswap lzo-rle: {} pages out; kernel stored {:?} incompressible {:?} pool {:?} B; predicted {} {} {} B; swpout_zero {} vs {}",
        sel.len(),
        after.get("stored_pages"),
        after.get("stored_incompressible_pages"),
        after.get("pool_total_size"),
        z.stored_pages,
        z.stored_incompressible_pages,
        z.pool_total_size,
        vm1.swpout_zero.unwrap_or(0) - vm0.swpout_zero.unwrap_or(0),
        z.swpout_zero
    );
    assert_eq!(after.get("stored_pages"), Some(z.stored_pages));
    if let Some(k) = after.get("stored_incompressible_pages") {
        assert_eq!(k, z.stored_incompressible_pages);
    }
    if let (Some(a), Some(b)) = (vm0.swpout_zero, vm1.swpout_zero) {
        assert_eq!(b - a, z.swpout_zero);
    }
    assert_eq!(after.get("pool_total_size"), Some(z.pool_total_size));
}
