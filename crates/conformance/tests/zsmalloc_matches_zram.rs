// SPDX-License-Identifier: MIT
//! Issue #2: the uzswap allocator holds exactly as many pages as the kernel's zsmalloc.
//!
//! Real pages (ELF binaries and a live python3/perl process's memory) are written one at a
//! time with O_DIRECT to an unused zram0; each page's compressed size is read from the
//! `mm_stat` delta. Objects of exactly those sizes are then allocated, in the same order, in
//! a chain-8 `min-waste` uzswap pool, whose page count must equal zram's `mem_used_total /
//! 4096` after every single page.

use uzswap_corpus::{default_corpus_with, DefaultCorpusOptions, Pages, PAGE_SIZE};
use uzswap_kernel::zram::{MmStat, Zram};
use uzswap_zsmalloc::{ChainRule, Pool, PoolConfig};

/// Pages of real binaries: whole pages of the named files that exist.
fn binary_pages(max_pages: usize) -> Pages {
    let mut p = Pages::new("ELF binaries");
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/bin/perl",
        "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
        "/usr/bin/bash",
    ];
    for f in candidates {
        let Ok(data) = std::fs::read(f) else { continue };
        for page in data.chunks_exact(PAGE_SIZE) {
            if p.len() >= max_pages {
                return p;
            }
            p.push_page(page).unwrap();
        }
    }
    p
}

enum Kind {
    Same,
    Huge,
    Object(usize),
}

fn classify(before: &MmStat, after: &MmStat) -> Kind {
    assert_eq!(
        after.orig_data_size - before.orig_data_size,
        PAGE_SIZE as u64
    );
    if after.same_pages > before.same_pages {
        Kind::Same
    } else if after.huge_pages > before.huge_pages {
        Kind::Huge
    } else {
        Kind::Object((after.compr_data_size - before.compr_data_size) as usize)
    }
}

#[test]
fn zsmalloc_matches_zram() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("zsmalloc_matches_zram") else {
        return;
    };
    let mut pages = binary_pages(2048);
    let proc_pages = default_corpus_with(&DefaultCorpusOptions {
        max_pages: 1024,
        ..Default::default()
    })
    .unwrap();
    pages.extend(&proc_pages);
    assert!(pages.len() >= 2048, "too few real pages: {}", pages.len());

    let mut zram = Zram::claim_unused(0).unwrap();
    let supported = zram.supported_algorithms().unwrap();
    let alg = if supported.iter().any(|a| a == "lz4") {
        "lz4"
    } else {
        "lzo-rle"
    };
    zram.configure(alg, (pages.len() * PAGE_SIZE) as u64)
        .unwrap();

    let pool = Pool::new(PoolConfig {
        chain_size: 8,
        chain_rule: ChainRule::MinWaste,
    })
    .unwrap();
    let huge_class_size = pool.class_table().huge_class_size();
    let (mut same, mut huge, mut objects) = (0, 0, 0);
    let mut before = zram.mm_stat().unwrap();
    for i in 0..pages.len() {
        zram.write_page_direct(i as u64, pages.page_array(i))
            .unwrap();
        let after = zram.mm_stat().unwrap();
        match classify(&before, &after) {
            Kind::Same => same += 1,
            Kind::Huge => {
                huge += 1;
                pool.alloc(PAGE_SIZE).unwrap();
            }
            Kind::Object(len) => {
                objects += 1;
                assert!(
                    len > 0 && len < huge_class_size,
                    "page {i}: {len} bytes not huge"
                );
                pool.alloc(len).unwrap();
            }
        }
        assert_eq!(
            pool.total_pages() as u64,
            after.mem_used_total / PAGE_SIZE as u64,
            "page {i}: uzswap pool pages differ from zram's mem_used_total ({alg})"
        );
        before = after;
    }
    let end = zram.mm_stat().unwrap();
    eprintln!(
        "zram0 {alg}: {} pages ({same} same, {huge} huge, {objects} objects) -> kernel {} pages, uzswap {} pages",
        pages.len(),
        end.mem_used_total / PAGE_SIZE as u64,
        pool.total_pages()
    );
    assert_eq!(end.same_pages, same);
    assert_eq!(end.huge_pages, huge);
    assert!(
        objects > 1000,
        "the comparison needs many compressed objects"
    );
    zram.reset().unwrap();
    assert_eq!(zram.mm_stat().unwrap().mem_used_total, 0);
}
