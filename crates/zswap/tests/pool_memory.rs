// SPDX-License-Identifier: MIT
//! The pools' freed memory: kept resident for reuse (like the kernel's free page lists), bounded
//! by the pool limit, returned to the OS when idle and at once under memory pressure.

mod common;

use std::time::{Duration, Instant};

use common::{binary_pages, cache, slot, small_params};
use uzswap_zswap::{CgroupId, LoadOutcome, RejectReason, StoreOutcome, PAGE_SIZE};

const PAGES: usize = 2048;

fn fill(z: &uzswap_zswap::Zswap, pages: &[Vec<u8>]) {
    for (i, p) in pages.iter().enumerate() {
        let out = z.store(slot(i as u64), p, CgroupId::ROOT);
        assert!(
            matches!(
                out,
                StoreOutcome::Stored | StoreOutcome::StoredIncompressible
            ),
            "{out:?}"
        );
    }
}

/// Every page loads back (exclusively) as it was stored.
fn all_back(z: &uzswap_zswap::Zswap, pages: &[Vec<u8>]) {
    let mut buf = vec![0u8; PAGE_SIZE];
    for (i, p) in pages.iter().enumerate() {
        assert_eq!(
            z.load(slot(i as u64), &mut buf, true).unwrap(),
            LoadOutcome::Hit
        );
        assert_eq!(&buf, p);
    }
}

fn invalidate_all(z: &uzswap_zswap::Zswap, n: usize) {
    for i in 0..n {
        z.invalidate(slot(i as u64));
    }
}

/// A cache whose pool was filled and then emptied: its freed memory is cached.
fn filled_then_freed() -> (
    uzswap_zswap::Zswap,
    std::sync::Arc<uzswap_backing::SwapFile>,
) {
    let pages = binary_pages(PAGES);
    let (z, swap) = cache(small_params(1024), PAGES as u64);
    fill(&z, &pages);
    invalidate_all(&z, PAGES);
    assert!(z.counters().pool_cached_size > 0);
    (z, swap)
}

#[test]
fn freed_pool_memory_is_reused_by_the_next_stores() {
    let pages = binary_pages(PAGES);
    let (z, _swap) = cache(small_params(1024), PAGES as u64);
    fill(&z, &pages);
    let full = z.counters().pool_total_size;
    assert!(full > 0);
    invalidate_all(&z, PAGES);
    let c = z.counters();
    assert_eq!(c.pool_total_size, 0, "every zspage freed");
    assert_eq!(
        c.pool_cached_size, full,
        "the freed zspages stay resident for reuse"
    );
    fill(&z, &pages);
    let c = z.counters();
    assert_eq!(c.pool_total_size, full, "the same pages again");
    assert_eq!(c.pool_cached_size, 0, "all taken from the cache");
    all_back(&z, &pages);
}

#[test]
fn the_cache_is_bounded_by_the_pool_limit() {
    let pages = binary_pages(PAGES);
    // A 2.5 MiB limit, below what the pages need: the cached memory may never exceed it.
    let mut params = small_params(256);
    params.max_pool_percent = 1;
    params.accept_threshold_percent = 100;
    let limit = params.max_pool_pages() * PAGE_SIZE as u64;
    let (z, _swap) = cache(params.clone(), PAGES as u64);
    let mut stored = 0;
    for (i, p) in pages.iter().enumerate() {
        if z.store(slot(i as u64), p, CgroupId::ROOT)
            != StoreOutcome::Rejected(RejectReason::PoolLimit)
        {
            stored += 1;
        }
    }
    assert!(
        stored > 0 && stored < PAGES,
        "the limit binds ({stored} stored)"
    );
    invalidate_all(&z, PAGES);
    assert!(z.counters().pool_cached_size <= limit);
    // Lowering the limit gives back what exceeds the new bound at once.
    params.max_pool_percent = 0;
    z.set_params(params).unwrap();
    assert_eq!(z.counters().pool_cached_size, 0);
}

#[test]
fn memory_pressure_returns_cached_memory_at_once() {
    let (z, _swap) = filled_then_freed();
    z.shrink_on_pressure(12);
    assert_eq!(z.counters().pool_cached_size, 0);
}

#[test]
fn an_idle_cache_returns_cached_memory_after_the_decay_time() {
    let (z, _swap) = filled_then_freed();
    // No store or free comes; the shrink worker's idle timer returns the memory (decay 1 s,
    // checked every second).
    let deadline = Instant::now() + Duration::from_secs(20);
    while z.counters().pool_cached_size > 0 {
        assert!(
            Instant::now() < deadline,
            "cached pool memory was never returned"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn memory_pressure_compacts_fragmented_pools() {
    let pages = binary_pages(PAGES);
    let (z, _swap) = cache(small_params(1024), PAGES as u64);
    fill(&z, &pages);
    // Free every other page: most zspages stay half used.
    for i in (0..PAGES).step_by(2) {
        z.invalidate(slot(i as u64));
    }
    let before = z.counters().pool_total_size;
    let freed = z.compact();
    let c = z.counters();
    assert!(freed > 0, "compaction freed pages");
    assert_eq!(c.pool_pages_compacted, freed);
    assert_eq!(c.pool_total_size, before - freed * PAGE_SIZE as u64);
    // A second fragmentation, compacted by the pressure pass.
    for i in (1..PAGES).step_by(4) {
        z.invalidate(slot(i as u64));
    }
    let before = z.counters().pool_total_size;
    z.shrink_on_pressure(12);
    let c = z.counters();
    assert!(c.pool_total_size < before);
    assert!(c.pool_pages_compacted > freed);
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in (3..PAGES).step_by(4) {
        assert_eq!(
            z.load(slot(i as u64), &mut buf, false).unwrap(),
            LoadOutcome::Hit
        );
        assert_eq!(buf, pages[i], "page {i} moved intact");
    }
}

#[test]
fn an_embedder_can_bound_the_cache_below_the_pool_limit() {
    let pages = binary_pages(PAGES);
    let (z, _swap) = cache(small_params(1024), PAGES as u64);
    // What `uzswap run` does when its budget counts the pool's pages: the freed memory kept
    // for reuse is resident but no pool page, so it is held to a fixed bound.
    z.set_pool_cache_pages(32);
    fill(&z, &pages);
    let full = z.counters().pool_total_size;
    assert!(full > 32 * PAGE_SIZE as u64 * 4, "pool of {full} bytes");
    invalidate_all(&z, PAGES);
    let c = z.counters();
    assert_eq!(c.pool_total_size, 0, "every zspage freed");
    assert!(
        c.pool_cached_size <= 32 * PAGE_SIZE as u64,
        "cached {} bytes beyond the bound",
        c.pool_cached_size
    );
    // The bound changes nothing stored: the pages come back intact after a refill.
    fill(&z, &pages);
    all_back(&z, &pages);
}
