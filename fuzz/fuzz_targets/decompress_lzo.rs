// SPDX-License-Identifier: MIT
//! LZO/LZO-RLE decoder on arbitrary input: never panics, never reads or writes out of bounds
//! (run under ASan by cargo-fuzz), and the fast decoder agrees with the safe reference decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uzswap_compress::lzo::{decompress_reference, decompress_safe};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the destination size, so output-overrun paths are reached too.
    let (dst_len, input) = match data.split_first() {
        Some((&b, rest)) if b & 1 == 0 => (4096, rest),
        Some((&b, rest)) => (b as usize * 17, rest),
        None => (4096, data),
    };
    let mut a = vec![0u8; dst_len];
    let mut b = vec![0u8; dst_len];
    let ra = decompress_safe(input, &mut a);
    let rb = decompress_reference(input, &mut b);
    assert_eq!(ra, rb);
    if let Ok(n) = ra {
        assert!(n <= dst_len);
        assert_eq!(a[..n], b[..n]);
    }
});
