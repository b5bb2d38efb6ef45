// SPDX-License-Identifier: MIT
//! Every algorithm, plain and kernel-exact, round-trips arbitrary input (padded to one page,
//! and as is).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uzswap_compress::{compress, compress_kernel_exact, decompress, Algorithm};

fuzz_target!(|data: &[u8]| {
    let mut page = data.to_vec();
    page.resize(4096, 0);
    for input in [&page[..], data] {
        for alg in Algorithm::ALL_DEFAULTS {
            let mut c = vec![0u8; alg.max_compressed_len(input.len())];
            let n = compress(alg, input, &mut c).expect("compress into a worst-case buffer");
            let mut d = vec![0u8; input.len()];
            let m = decompress(alg, &c[..n], &mut d).expect("decompress own output");
            assert_eq!(&d[..m], input);
            let n = compress_kernel_exact(alg, input, &mut c).expect("kernel-exact compress");
            let m = decompress(alg, &c[..n], &mut d).expect("decompress kernel-exact output");
            assert_eq!(&d[..m], input);
        }
    }
});
