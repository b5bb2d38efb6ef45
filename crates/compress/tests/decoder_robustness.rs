// SPDX-License-Identifier: MIT
//! Decoders on hostile input: random bytes, truncated and corrupted valid streams. They must
//! return Err or a length within the destination, never panic; the fast LZO decoder must agree
//! with the safe reference decoder byte for byte.

mod common;

use proptest::prelude::*;
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};

/// Every algorithm this build has (lzo and lzo-rle need the cargo feature kernel-lzo).
fn algs() -> impl Iterator<Item = Algorithm> {
    Algorithm::ALL_DEFAULTS
        .into_iter()
        .filter(|a| a.is_built_in())
}

fn check_all(input: &[u8], dst_len: usize) {
    for alg in algs() {
        let mut out = vec![0u8; dst_len];
        if let Ok(n) = decompress(alg, input, &mut out) {
            assert!(n <= dst_len, "{alg}: reported {n} > {dst_len}");
        }
    }
    #[cfg(feature = "kernel-lzo")]
    lzo_decoders_agree(input, dst_len);
}

/// The fast LZO decoder and the safe reference decoder give the same verdict and bytes.
#[cfg(feature = "kernel-lzo")]
fn lzo_decoders_agree(input: &[u8], dst_len: usize) {
    use uzswap_compress::lzo::{decompress_reference, decompress_safe};
    let mut a = vec![0u8; dst_len];
    let mut b = vec![0u8; dst_len];
    let ra = decompress_safe(input, &mut a);
    let rb = decompress_reference(input, &mut b);
    assert_eq!(ra, rb, "fast and reference LZO decoders disagree");
    if let Ok(n) = ra {
        assert_eq!(
            a[..n],
            b[..n],
            "fast and reference LZO decoders wrote different bytes"
        );
    }
}

fn valid_streams() -> Vec<(Algorithm, Vec<u8>)> {
    let mut pages = common::real_pages(24);
    pages.extend(common::special_pages());
    let mut v = Vec::new();
    let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
    for p in &pages {
        for alg in algs() {
            let n = compress(alg, p, &mut buf).unwrap();
            v.push((alg, buf[..n].to_vec()));
        }
    }
    v
}

#[test]
fn every_truncation_of_valid_streams_is_rejected() {
    for (alg, s) in valid_streams().iter().step_by(3) {
        let mut out = vec![0u8; 4096];
        for cut in 0..s.len() {
            let r = decompress(*alg, &s[..cut], &mut out);
            // A prefix may never decode to a full page (every format here marks its end).
            assert!(
                r.map_or(true, |n| n < 4096),
                "{alg}: prefix {cut} gave a full page"
            );
            check_all(&s[..cut], 4096);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600),
                                dst_len in prop_oneof![Just(4096usize), 0usize..5000]) {
        check_all(&data, dst_len);
        // Random bytes behind a valid lzo-rle header and behind a literal-run opener.
        let mut rle = vec![17u8, 1];
        rle.extend_from_slice(&data);
        check_all(&rle, dst_len);
        let mut lit = vec![0u8];
        lit.extend_from_slice(&data);
        check_all(&lit, dst_len);
    }

    #[test]
    fn corrupted_streams_never_panic(idx in 0usize..1000, edits in proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 1..6),
                                     dst_len in prop_oneof![Just(4096usize), 0usize..4200]) {
        let streams = valid_streams_cached();
        let (_, s) = &streams[idx % streams.len()];
        let mut s = s.clone();
        for (pos, val, kind) in edits {
            let i = pos as usize % s.len();
            match kind {
                0 => s[i] ^= 1 << (val % 8),
                1 => s[i] = val,
                _ => { s.remove(i); if s.is_empty() { s.push(val); } }
            }
        }
        check_all(&s, dst_len);
    }
}

fn valid_streams_cached() -> &'static [(Algorithm, Vec<u8>)] {
    static CELL: std::sync::OnceLock<Vec<(Algorithm, Vec<u8>)>> = std::sync::OnceLock::new();
    CELL.get_or_init(valid_streams)
}
