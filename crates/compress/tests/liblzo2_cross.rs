// SPDX-License-Identifier: MIT
//! Cross-check the plain `lzo` format against Debian's liblzo2 (loaded with dlopen; the test
//! skips visibly when liblzo2.so.2 is not installed: `apt-get install liblzo2-2`, and fails
//! instead when `UZSWAP_CI=1`, which `.ci/run` sets after installing it).
#![cfg(feature = "kernel-lzo")]

use std::io::Write as _; // skip notices bypass the test harness's output capture
mod common;

#[path = "common/liblzo2.rs"]
mod liblzo2;

use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};

#[test]
fn liblzo2_and_uzswap_decode_each_others_lzo() {
    let Some(mut lib) = liblzo2::LibLzo2::load() else {
        // Under CI the cross-check must run: .ci/run installs the library.
        assert!(
            std::env::var("UZSWAP_CI").as_deref() != Ok("1"),
            "liblzo2.so.2 not found although UZSWAP_CI=1: .ci/run installs liblzo2-2 \
             (apt-get install liblzo2-2); the cross-check may not skip under CI"
        );
        writeln!(
            std::io::stderr(),
            "SKIPPED: liblzo2_cross: liblzo2.so.2 not found (apt-get install liblzo2-2)"
        )
        .ok();
        return;
    };
    let mut pages = common::real_pages(400);
    pages.extend(common::special_pages());
    let mut c = vec![0u8; MAX_COMPRESSED_LEN];
    let mut d = vec![0u8; 4096];
    let mut same_size = 0;
    for p in &pages {
        // Ours -> liblzo2.
        let n = compress(Algorithm::Lzo, p, &mut c).unwrap();
        assert_eq!(lib.decompress(&c[..n], &mut d), Ok(4096));
        assert!(d == *p);
        // liblzo2 -> ours.
        let m = lib.compress(p, &mut c);
        assert_eq!(decompress(Algorithm::Lzo, &c[..m], &mut d).unwrap(), 4096);
        assert!(d == *p);
        same_size += usize::from(n == m);
    }
    eprintln!(
        "liblzo2 cross-check: {} pages decode both ways; liblzo2's size equals the kernel-exact size on {same_size}",
        pages.len()
    );
}
