// SPDX-License-Identifier: MIT
//! Round trips of every algorithm on real and structured pages, plus structured mutations.

mod common;

use common::{real_pages, special_pages, PAGE};
use proptest::prelude::*;
use uzswap_compress::{compress, compress_kernel_exact, decompress, Algorithm, MAX_COMPRESSED_LEN};

fn all_algorithms() -> Vec<Algorithm> {
    let mut v = Algorithm::ALL_DEFAULTS.to_vec();
    v.push("zstd:1".parse().unwrap());
    v.push("zstd:-3".parse().unwrap());
    v.push("deflate:1".parse().unwrap());
    v.push("deflate:9".parse().unwrap());
    // lzo and lzo-rle only with the cargo feature kernel-lzo.
    v.retain(|a| a.is_built_in());
    v
}

fn round_trip(alg: Algorithm, page: &[u8]) -> usize {
    let mut c = vec![0u8; MAX_COMPRESSED_LEN];
    let n = compress(alg, page, &mut c).unwrap_or_else(|e| panic!("{alg}: compress: {e}"));
    assert!(
        n <= alg.max_compressed_len(page.len()),
        "{alg}: {n} over bound"
    );
    let mut d = vec![0u8; PAGE];
    let m = decompress(alg, &c[..n], &mut d).unwrap_or_else(|e| panic!("{alg}: decompress: {e}"));
    assert_eq!(m, page.len(), "{alg}: decompressed length");
    assert!(d[..m] == *page, "{alg}: round trip changed the data");
    // The kernel-exact variant decodes with the same decompressor.
    let k = compress_kernel_exact(alg, page, &mut c).unwrap();
    let m = decompress(alg, &c[..k], &mut d).unwrap();
    assert!(
        m == page.len() && d[..m] == *page,
        "{alg}: kernel-exact round trip"
    );
    n
}

#[test]
fn real_and_special_pages_round_trip() {
    let mut pages = real_pages(600);
    assert!(pages.len() >= 100, "too few real pages: {}", pages.len());
    pages.extend(special_pages());
    for alg in all_algorithms() {
        let total: usize = pages.iter().map(|p| round_trip(alg, p)).sum();
        let ratio = total as f64 / (pages.len() * PAGE) as f64;
        assert!(
            ratio < 0.9,
            "{alg}: ratio {ratio} on real pages is implausible"
        );
    }
}

#[test]
fn zero_page_compresses_tiny() {
    let z = vec![0u8; PAGE];
    for alg in all_algorithms() {
        let n = round_trip(alg, &z);
        assert!(n < 64, "{alg}: zero page took {n} bytes");
    }
}

#[test]
fn lengths_other_than_a_page_round_trip() {
    let pages = real_pages(40);
    let big: Vec<u8> = pages.concat(); // 160 KiB: several LZO chunks (> 48 KiB each)
    for alg in all_algorithms() {
        for len in [
            0usize, 1, 2, 3, 4, 5, 17, 18, 19, 20, 21, 22, 37, 100, 255, 1000, 4095,
        ] {
            let src = &big[..len];
            let mut c = vec![0u8; alg.max_compressed_len(len).max(64)];
            let n = compress(alg, src, &mut c).unwrap();
            let mut d = vec![0u8; len + 16];
            let m = decompress(alg, &c[..n], &mut d).unwrap();
            assert_eq!(&d[..m], src, "{alg} len {len}");
            let n = compress_kernel_exact(alg, src, &mut c).unwrap();
            let m = decompress(alg, &c[..n], &mut d).unwrap();
            assert_eq!(&d[..m], src, "{alg} kernel-exact len {len}");
        }
        let mut c = vec![0u8; alg.max_compressed_len(big.len())];
        let n = compress(alg, &big, &mut c).unwrap();
        let mut d = vec![0u8; big.len()];
        let m = decompress(alg, &c[..n], &mut d).unwrap();
        assert_eq!(m, big.len());
        assert!(d == big, "{alg} multi-chunk");
        // Above 64 KiB the kernel LZ4 switches to 32-bit positions and a 5-byte hash.
        let n = compress_kernel_exact(alg, &big, &mut c).unwrap();
        let m = decompress(alg, &c[..n], &mut d).unwrap();
        assert!(m == big.len() && d == big, "{alg} kernel-exact multi-chunk");
        // And a long zero region across chunk boundaries.
        let mut zeros = vec![0u8; 150_000];
        zeros[70_000] = 9;
        let mut c = vec![0u8; alg.max_compressed_len(zeros.len())];
        let n = compress(alg, &zeros, &mut c).unwrap();
        let mut d = vec![0u8; zeros.len()];
        assert_eq!(decompress(alg, &c[..n], &mut d).unwrap(), zeros.len());
        assert!(d == zeros, "{alg} zeros multi-chunk");
    }
}

#[test]
fn undersized_destination_is_an_error_not_a_panic() {
    let pages = real_pages(8);
    let noise = special_pages().pop().unwrap();
    for alg in all_algorithms() {
        let mut small = vec![0u8; 100];
        assert!(compress(alg, &noise, &mut small).is_err(), "{alg}");
        // A page-sized destination is enough for compressible pages.
        let mut dst = vec![0u8; PAGE];
        let n = compress(alg, &pages[1], &mut dst).unwrap();
        let mut full = vec![0u8; MAX_COMPRESSED_LEN];
        assert_eq!(compress(alg, &pages[1], &mut full).unwrap(), n);
        assert_eq!(dst[..n], full[..n]);
        // Decompressing into too small a buffer fails.
        let mut out = vec![0u8; PAGE - 1];
        assert!(decompress(alg, &dst[..n], &mut out).is_err(), "{alg}");
    }
}

#[test]
fn contexts_are_per_thread_and_reusable() {
    let pages = std::sync::Arc::new(real_pages(64));
    let expected: Vec<Vec<usize>> = all_algorithms()
        .iter()
        .map(|&a| pages.iter().map(|p| round_trip(a, p)).collect())
        .collect();
    let expected = std::sync::Arc::new(expected);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let pages = pages.clone();
            let expected = expected.clone();
            std::thread::spawn(move || {
                for round in 0..3 {
                    for (ai, &alg) in all_algorithms().iter().enumerate() {
                        // Interleave algorithms differently per thread.
                        for (i, p) in pages.iter().enumerate().skip((t + round) % 3) {
                            assert_eq!(round_trip(alg, p), expected[ai][i], "{alg} thread {t}");
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// A page built from real data plus a structured mutation.
fn mutated_page() -> impl Strategy<Value = Vec<u8>> {
    let base = real_pages(200);
    (
        0..base.len(),
        0usize..6,
        any::<u64>(),
        0usize..PAGE,
        1usize..PAGE,
    )
        .prop_map(move |(i, kind, seed, at, len)| {
            let mut p = base[i].clone();
            let end = (at + len).min(PAGE);
            match kind {
                0 => {}
                1 => p[at..end].fill(0),
                2 => p[at..end].fill(seed as u8),
                3 => {
                    for (k, b) in p[at..end].iter_mut().enumerate() {
                        *b = (seed >> ((k % 8) * 8)) as u8;
                    }
                }
                4 => {
                    let mut x = seed | 1;
                    for b in &mut p[at..end] {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        *b = x as u8;
                    }
                }
                _ => {
                    let other = &base[(i + 1 + seed as usize % 7) % base.len()];
                    p[at..end].copy_from_slice(&other[at..end]);
                }
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_pages_round_trip(page in mutated_page()) {
        for alg in all_algorithms() {
            round_trip(alg, &page);
        }
    }

    /// Every codec writes only inside `max_compressed_len`, even on its worst input (random
    /// bytes, up to several LZO chunks long, with runs of a repeated byte in between): guard
    /// bytes right after the destination stay untouched. The LZO compressor's output writes
    /// are unchecked against that bound, so this also holds it to its proof in release builds.
    #[test]
    fn outputs_stay_inside_the_worst_case_bound(
        len in 0usize..70_000,
        seed in any::<u64>(),
        runs in proptest::collection::vec((0usize..70_000, 1usize..300, any::<u8>()), 0..8),
    ) {
        let mut x = seed | 1;
        let mut src: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for (at, n, b) in runs {
            if at < len {
                let end = (at + n).min(len);
                src[at..end].fill(b);
            }
        }
        const GUARD: usize = 64;
        for alg in [Algorithm::Lzo, Algorithm::LzoRle, Algorithm::Lz4].into_iter().filter(|a| a.is_built_in()) {
            let bound = alg.max_compressed_len(len);
            let mut c = vec![0xEEu8; bound + GUARD];
            let n = compress(alg, &src, &mut c[..bound]).unwrap();
            prop_assert!(n <= bound);
            prop_assert!(c[bound..].iter().all(|&g| g == 0xEE), "{} wrote past its bound", alg);
            let mut d = vec![0u8; len];
            let m = decompress(alg, &c[..n], &mut d).unwrap();
            prop_assert_eq!(m, len);
            prop_assert!(d == src, "{} round trip", alg);
        }
    }

    #[test]
    fn arbitrary_short_inputs_round_trip(data in proptest::collection::vec(0u8..4, 0..300)) {
        for alg in all_algorithms() {
            let mut c = vec![0u8; alg.max_compressed_len(data.len())];
            let n = compress(alg, &data, &mut c).unwrap();
            let mut d = vec![0u8; data.len()];
            let m = decompress(alg, &c[..n], &mut d).unwrap();
            prop_assert_eq!(&d[..m], &data[..]);
            let n = compress_kernel_exact(alg, &data, &mut c).unwrap();
            let m = decompress(alg, &c[..n], &mut d).unwrap();
            prop_assert_eq!(&d[..m], &data[..]);
        }
    }
}

/// A page compressed from another thread-local's destructor, after (or before) this crate's
/// caches are torn down: must still work (a temporary context), never panic.
#[test]
fn compressing_during_thread_teardown_works() {
    struct Late;
    impl Drop for Late {
        fn drop(&mut self) {
            let page = special_pages().swap_remove(4);
            for alg in all_algorithms() {
                let mut c = vec![0u8; MAX_COMPRESSED_LEN];
                let n = compress(alg, &page, &mut c).expect("compress at teardown");
                let mut d = vec![0u8; PAGE];
                assert_eq!(decompress(alg, &c[..n], &mut d), Ok(PAGE));
                assert!(d == page);
            }
        }
    }
    thread_local!(static LATE: Late = const { Late });
    for late_first in [true, false] {
        std::thread::spawn(move || {
            if late_first {
                LATE.with(|_| {});
            }
            round_trip(Algorithm::Lz4, &special_pages()[3]);
            for alg in all_algorithms() {
                round_trip(alg, &special_pages()[5]);
            }
            LATE.with(|_| {});
        })
        .join()
        .unwrap();
    }
}

/// Built without the cargo feature kernel-lzo, lzo and lzo-rle are refused with a clear error
/// (and everything else still works).
#[cfg(not(feature = "kernel-lzo"))]
#[test]
fn lzo_without_the_feature_is_not_built_in() {
    let page = vec![7u8; PAGE];
    let mut c = vec![0u8; MAX_COMPRESSED_LEN];
    for alg in [Algorithm::Lzo, Algorithm::LzoRle] {
        assert!(!alg.is_built_in());
        let e = compress(alg, &page, &mut c).unwrap_err();
        assert_eq!(e, uzswap_compress::Error::NotBuiltIn(alg.kernel_name()));
        assert_eq!(
            e.to_string(),
            format!(
                "{} is not built in (uzswap-compress was built without its GPL-2.0-only cargo \
                 feature `kernel-lzo`)",
                alg.kernel_name()
            )
        );
        assert!(decompress(alg, &c[..10], &mut vec![0u8; PAGE]).is_err());
    }
    assert!(Algorithm::Lz4.is_built_in());
    round_trip(Algorithm::Lz4, &page);
}

#[cfg(feature = "kernel-lzo")]
#[test]
fn lzo_with_the_feature_is_built_in() {
    assert!(Algorithm::ALL_DEFAULTS.iter().all(|a| a.is_built_in()));
}
