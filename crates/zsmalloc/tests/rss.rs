// SPDX-License-Identifier: MIT
//! The pool's page count is real memory: RSS grows by about `total_pages()` pages when objects
//! are stored and drops back when they are freed (emptied zspages are MADV_DONTNEED'd).
//!
//! One test per binary so no other test allocates concurrently; other noise (metadata, the
//! handle tables, the test's own vectors) is bounded by a slack of a few percent.

use uzswap_zsmalloc::{Pool, PoolConfig};

fn rss_pages() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    statm.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn rss_follows_pool_pages() {
    if cfg!(miri) {
        return;
    }
    let pool = Pool::new(PoolConfig::default()).unwrap();
    // About 64 MiB of objects of mixed sizes (content is irrelevant to RSS).
    let sizes = [700usize, 1100, 1568, 2300, 3000, 3700];
    let payload = vec![0x5au8; 4096];
    let mut handles = Vec::with_capacity(40_000);
    let before = rss_pages();
    let mut i = 0;
    while pool.total_pages() < 16_384 {
        let len = sizes[i % sizes.len()];
        handles.push(pool.alloc_write(&payload[..len]).unwrap());
        i += 1;
    }
    let pages = pool.total_pages();
    let grown = rss_pages().saturating_sub(before);
    // Handle-table and Vec metadata add a little (~16 bytes per object: ~100 pages here).
    let slack = pages / 20 + 256;
    eprintln!("pool pages {pages}, RSS grew by {grown} pages");
    assert!(
        grown + slack >= pages && grown <= pages + slack,
        "RSS grew {grown} pages for {pages} pool pages"
    );

    let high = rss_pages();
    for h in handles.drain(..) {
        pool.free(h).unwrap();
    }
    assert_eq!(pool.total_pages(), 0);
    let dropped = high.saturating_sub(rss_pages());
    eprintln!("after freeing everything RSS dropped by {dropped} pages");
    assert!(
        dropped + slack >= pages,
        "RSS dropped only {dropped} of {pages} pages"
    );

    // Compaction also returns memory: fill, free two objects of three, compact.
    let mut hs: Vec<_> = (0..20_000)
        .map(|k| pool.alloc_write(&payload[..sizes[k % 4]]).unwrap())
        .collect();
    let mut keep = Vec::new();
    for (k, h) in hs.drain(..).enumerate() {
        if k % 3 == 0 {
            keep.push(h);
        } else {
            pool.free(h).unwrap();
        }
    }
    let held = pool.total_pages();
    let rss_before = rss_pages();
    let freed = pool.compact();
    assert!(freed > 0);
    assert_eq!(pool.total_pages(), held - freed);
    let dropped = rss_before.saturating_sub(rss_pages());
    eprintln!("compaction freed {freed} pages; RSS dropped by {dropped}");
    assert!(
        dropped + slack / 2 >= freed,
        "compaction freed {freed} pages but RSS dropped {dropped}"
    );
}
