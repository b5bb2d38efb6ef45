// SPDX-License-Identifier: MIT
//! zstd decoder on arbitrary input: Err or a length within the destination, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uzswap_compress::{decompress, Algorithm};

fuzz_target!(|data: &[u8]| {
    let alg: Algorithm = "zstd".parse().unwrap();
    let mut out = vec![0u8; 4096];
    if let Ok(n) = decompress(alg, data, &mut out) {
        assert!(n <= out.len());
    }
});
