// SPDX-License-Identifier: MIT
//! RSS under the free-page reuse policy ([`MemoryPolicy`]): with decay 0 RSS follows the pool's
//! page count exactly (freed zspages go back at once); with a decay, freed pages stay resident
//! and are reported by `cached_pages()` (RSS = pages + cached) until their decay time has
//! passed (`purge_expired`) or `trim()` is called, when RSS drops by them.
//!
//! One test per binary so no other test allocates concurrently; other noise (metadata, the
//! handle tables, the test's own vectors) is bounded by a slack of a few percent.

use std::time::Duration;

use uzswap_zsmalloc::{Handle, MemoryPolicy, Pool, PoolConfig};

fn rss_pages() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    statm.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const SIZES: [usize; 6] = [700, 1100, 1568, 2300, 3000, 3700];

/// Stores objects until the pool holds `pages` pages (about 32 MiB here).
fn fill(pool: &Pool, pages: usize) -> Vec<Handle> {
    let payload = vec![0x5au8; 4096];
    let mut handles = Vec::with_capacity(20_000);
    let mut i = 0;
    while pool.total_pages() < pages {
        handles.push(
            pool.alloc_write(&payload[..SIZES[i % SIZES.len()]])
                .unwrap(),
        );
        i += 1;
    }
    handles
}

#[test]
fn rss_follows_pages_plus_cached_pages() {
    if cfg!(miri) {
        return;
    }
    const PAGES: usize = 8192;
    let slack = PAGES / 20 + 256;

    // Decay 0: the kernel's behaviour, nothing cached.
    let pool = Pool::with_memory_policy(PoolConfig::default(), MemoryPolicy::immediate()).unwrap();
    let handles = fill(&pool, PAGES);
    let pages = pool.total_pages();
    let high = rss_pages();
    for h in handles {
        pool.free(h).unwrap();
    }
    assert_eq!(pool.total_pages(), 0);
    assert_eq!(pool.cached_pages(), 0);
    let dropped = high.saturating_sub(rss_pages());
    eprintln!("decay 0: {pages} pool pages freed, RSS dropped by {dropped}");
    assert!(
        dropped + slack >= pages,
        "RSS dropped only {dropped} of {pages} pages"
    );
    drop(pool);

    // A decay and a bound larger than the pool: every freed page stays cached, resident.
    let policy = MemoryPolicy {
        free_page_decay_ms: 300,
        max_cached_pages: 1 << 20,
        transparent_huge_pages: false,
        prefault_chunks: 0,
        huge_first_chunk: false,
    };
    let pool = Pool::with_memory_policy(PoolConfig::default(), policy).unwrap();
    let before = rss_pages();
    let handles = fill(&pool, PAGES);
    let pages = pool.total_pages();
    let grown = rss_pages().saturating_sub(before);
    assert!(
        grown + slack >= pages && grown <= pages + slack,
        "RSS grew {grown} for {pages}"
    );
    let high = rss_pages();
    for h in handles {
        pool.free(h).unwrap();
    }
    assert_eq!(pool.total_pages(), 0);
    let cached = pool.cached_pages();
    assert_eq!(cached, pages, "every freed zspage is cached");
    assert_eq!(pool.stats().cached_pages, cached);
    let dropped = high.saturating_sub(rss_pages());
    eprintln!("decay 300 ms: {cached} pages cached, RSS dropped by {dropped}");
    assert!(
        dropped <= slack,
        "cached pages must stay resident (dropped {dropped})"
    );

    // Refilling reuses the cached pages: RSS does not grow again.
    let rss_cached = rss_pages();
    let handles = fill(&pool, PAGES);
    assert!(pool.cached_pages() < slack);
    let grown = rss_pages().saturating_sub(rss_cached);
    assert!(
        grown <= slack,
        "refill grew RSS by {grown} despite {cached} cached pages"
    );
    for h in handles {
        pool.free(h).unwrap();
    }

    // Not yet expired: nothing purged. After the decay time, everything goes back.
    assert_eq!(pool.purge_expired(), 0);
    let cached = pool.cached_pages();
    let high = rss_pages();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(pool.purge_expired(), cached);
    assert_eq!(pool.cached_pages(), 0);
    let dropped = high.saturating_sub(rss_pages());
    eprintln!("after the decay time: {cached} pages returned, RSS dropped by {dropped}");
    assert!(
        dropped + slack >= cached,
        "RSS dropped only {dropped} of {cached}"
    );

    // trim() returns the cache at once.
    let handles = fill(&pool, PAGES / 2);
    for h in handles {
        pool.free(h).unwrap();
    }
    let cached = pool.cached_pages();
    assert!(cached > 0);
    let high = rss_pages();
    assert_eq!(pool.trim(), cached);
    let dropped = high.saturating_sub(rss_pages());
    assert!(
        dropped + slack >= cached,
        "trim: RSS dropped only {dropped} of {cached}"
    );

    // A bound: the cache never exceeds it.
    pool.set_memory_policy(MemoryPolicy {
        max_cached_pages: 512,
        ..policy
    });
    let handles = fill(&pool, PAGES / 2);
    for h in handles {
        pool.free(h).unwrap();
        assert!(pool.cached_pages() <= 512);
    }
}
