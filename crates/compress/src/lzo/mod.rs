//! LZO1X for pages: the kernel's `lzo` and `lzo-rle` compressors and one safe decompressor.
//!
//! Format facts (from the kernel's Documentation/staging/lzo.rst and lib/lzo, re-implemented
//! here, not copied):
//! - An LZO1X stream is a sequence of instructions: literal runs, and matches of four kinds
//!   (M1 2-byte copies within 1 KiB right after a short literal run, M2 3..8 bytes within
//!   2 KiB, M3 any length within 16 KiB, M4 any length within 48 KiB). The two low bits of a
//!   match's last distance byte ("state") give the number (0..3) of literals that follow it.
//!   The stream ends with the M4 instruction `0x11 0x00 0x00` (distance 16384 + 0 = "end").
//! - LZO-RLE streams start with the bytes `17 1` (a first byte plain LZO never emits) and may
//!   code a run of 4..=2051 zero bytes as one 4-byte M4 instruction whose distance field is
//!   the reserved value 0xbfff (so real M4 matches stop at 0xbffe).
//! - The kernel's compressor ("LZO1X-1" with its own tuning) hashes the next 4 input bytes into
//!   an 8192-entry table of u16 offsets, takes the candidate if its 4 bytes are equal, extends
//!   the match 8 bytes at a time, and otherwise skips ahead faster the longer the current
//!   literal run is (`1 + run/32`). Reproducing those choices exactly gives byte-identical
//!   output, which `tests/kernel_sizes.rs` checks per page against zram.

use std::cell::RefCell;

use crate::Error;

mod compress;
mod decompress;

pub use compress::compress_exact;
pub use decompress::{decompress_reference, decompress_safe, LzoError};

/// Which of the kernel's two LZO compressors to imitate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    /// `lzo`: plain LZO1X-1, bitstream version 0.
    Lzo,
    /// `lzo-rle`: bitstream version 1 with zero-run instructions.
    LzoRle,
}

/// Bits of the hash table index.
pub(crate) const D_BITS: u32 = 13;
/// Entries in the hash table (16 KiB of u16 offsets).
pub(crate) const D_SIZE: usize = 1 << D_BITS;

/// The largest output of [`compress_exact`] for `src_len` input bytes (the LZO1X-1 worst case
/// plus the 2-byte lzo-rle header).
pub fn worst_compressed_len(src_len: usize) -> usize {
    src_len + src_len / 16 + 64 + 3 + 2
}

/// Per-thread LZO working memory: the hash table, and a scratch output for callers whose
/// destination is smaller than the worst case.
pub(crate) struct WorkMem {
    pub(crate) dict: Box<[u16; D_SIZE]>,
    scratch: Vec<u8>,
}

impl WorkMem {
    pub(crate) fn new() -> WorkMem {
        WorkMem {
            dict: Box::new([0u16; D_SIZE]),
            scratch: Vec::new(),
        }
    }
}

thread_local! {
    static WORKMEM: RefCell<Option<WorkMem>> = const { RefCell::new(None) };
}

/// Compresses with this thread's working memory.
pub(crate) fn compress(src: &[u8], dst: &mut [u8], variant: Variant) -> Result<usize, Error> {
    crate::tls::with_cached(
        &WORKMEM,
        || Ok(WorkMem::new()),
        |wm| {
            let worst = worst_compressed_len(src.len());
            if dst.len() >= worst {
                return Ok(compress_exact(src, dst, variant, &mut wm.dict));
            }
            // Undersized destination: compress into scratch, then copy if it fits.
            if wm.scratch.len() < worst {
                wm.scratch.resize(worst, 0);
            }
            let n = compress_exact(src, &mut wm.scratch, variant, &mut wm.dict);
            match dst.get_mut(..n) {
                Some(d) => {
                    d.copy_from_slice(&wm.scratch[..n]);
                    Ok(n)
                }
                None => Err(Error::DstTooSmall {
                    available: dst.len(),
                }),
            }
        },
    )
}

/// Decompresses an `lzo` or `lzo-rle` stream (told apart by the header, as in the kernel).
pub(crate) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    decompress_safe(src, dst).map_err(|e| Error::Corrupt {
        algorithm: "lzo",
        reason: e.reason(),
    })
}

#[cfg(test)]
mod tests {
    //! Small inputs so that Miri (which checks the pointer code for undefined behaviour) can
    //! run them: `cargo +nightly miri test -p uzswap-compress --lib lzo`.

    use super::*;

    fn inputs() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![7],
            b"abcabcabcabcabcabcabcabcabcabcabc".to_vec(),
            vec![0u8; 300],
        ];
        // Text-like data with repeats at several distances, zero runs and literals.
        let mut t = Vec::new();
        for i in 0..40u32 {
            t.extend_from_slice(format!("key{}=value{};", i % 7, i * 37).as_bytes());
            if i % 9 == 0 {
                t.extend_from_slice(&[0u8; 23]);
            }
            t.push((i * 131 % 251) as u8);
        }
        v.push(t);
        let mut x = 12345u32;
        v.push(
            (0..700)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect(),
        );
        v
    }

    #[test]
    fn round_trip_small_inputs_both_variants() {
        let mut dict = Box::new([0u16; D_SIZE]);
        for src in inputs() {
            for variant in [Variant::Lzo, Variant::LzoRle] {
                let mut c = vec![0u8; worst_compressed_len(src.len())];
                let n = compress_exact(&src, &mut c, variant, &mut dict);
                let mut d = vec![0u8; src.len() + 3];
                assert_eq!(decompress_safe(&c[..n], &mut d), Ok(src.len()));
                assert_eq!(d[..src.len()], src[..]);
                let mut r = vec![0u8; src.len()];
                assert_eq!(decompress_reference(&c[..n], &mut r), Ok(src.len()));
                assert_eq!(r, src);
            }
        }
    }

    /// An input whose second copy of a block is an M4 match of 261..=264 bytes at a distance
    /// whose low bits (0x403f after the M4 bias) make the lzo-rle instruction, once 3 literals
    /// follow it, read as a zero run. The kernel shortens such a match to 260 bytes; without
    /// that the stream decodes wrong. Periodic filler around the copies makes the scan land
    /// exactly on each copy, and `lits` odd bytes follow the second copy.
    fn ambiguous_m4_input(block_len: usize, lits: usize) -> Vec<u8> {
        const DIST: usize = 0x4000 + 0x403f;
        let mut x = 99u32;
        let mut rnd = move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        };
        let block: Vec<u8> = (0..block_len).map(|_| rnd()).collect();
        let filler = |n: usize| {
            (0..n)
                .map(|i| b"0123456789abcdef"[i % 16])
                .collect::<Vec<u8>>()
        };
        let mut v = filler(1000);
        let p = v.len();
        v.extend_from_slice(&block);
        v.push(0xA1);
        v.extend(filler(p + DIST - v.len()));
        v.extend_from_slice(&block);
        v.extend_from_slice(&[0xB2, 0xC3, 0xD4, 0xE5][..lits]);
        v.extend(filler(200));
        v
    }

    #[test]
    #[cfg_attr(miri, ignore = "34 KiB inputs: too slow under Miri")]
    fn rle_never_emits_the_ambiguous_m4_match() {
        let mut dict = Box::new([0u16; D_SIZE]);
        for (block_len, lits) in (258..=268).flat_map(|b| (1..=4).map(move |l| (b, l))) {
            let src = ambiguous_m4_input(block_len, lits);
            for variant in [Variant::Lzo, Variant::LzoRle] {
                let mut c = vec![0u8; worst_compressed_len(src.len())];
                let n = compress_exact(&src, &mut c, variant, &mut dict);
                let mut d = vec![0u8; src.len()];
                assert_eq!(
                    decompress_safe(&c[..n], &mut d),
                    Ok(src.len()),
                    "{variant:?}, block {block_len}, {lits} literals"
                );
                assert!(d == src, "{variant:?}, block {block_len}, {lits} literals");
            }
        }
    }

    #[test]
    fn rle_codes_zero_runs_compactly() {
        let mut dict = Box::new([0u16; D_SIZE]);
        let src = vec![0u8; 4096];
        let mut c = vec![0u8; worst_compressed_len(src.len())];
        let rle = compress_exact(&src, &mut c, Variant::LzoRle, &mut dict);
        let plain = compress_exact(&src, &mut c, Variant::Lzo, &mut dict);
        // Header 2, literal run of the 5 bytes before the scan start 1 + 5, zero runs of 2051
        // and 2020 bytes 4 + 4, the 20 unscanned tail bytes as literals 2 + 20, end marker 3.
        assert_eq!(rle, 41, "lzo-rle zero page");
        assert!(plain < 64, "lzo zero page: {plain} bytes");
    }

    #[test]
    fn damaged_streams_are_errors() {
        let mut dict = Box::new([0u16; D_SIZE]);
        let src = inputs().swap_remove(4);
        let mut c = vec![0u8; worst_compressed_len(src.len())];
        let n = compress_exact(&src, &mut c, Variant::LzoRle, &mut dict);
        let mut d = vec![0u8; src.len()];
        for cut in [0, 1, 2, 5, n / 2, n - 1] {
            assert!(decompress_safe(&c[..cut], &mut d).is_err());
        }
        let mut short = vec![0u8; src.len() - 1];
        assert_eq!(
            decompress_safe(&c[..n], &mut short),
            Err(LzoError::OutputOverrun)
        );
        let mut trailing = c[..n].to_vec();
        trailing.push(0);
        assert_eq!(
            decompress_safe(&trailing, &mut d),
            Err(LzoError::InputNotConsumed)
        );
        for i in 0..n.min(64) {
            let mut bad = c[..n].to_vec();
            bad[i] ^= 0x5a;
            let mut a = vec![0u8; src.len()];
            let mut b = vec![0u8; src.len()];
            let ra = decompress_safe(&bad, &mut a);
            assert_eq!(ra, decompress_reference(&bad, &mut b));
            if let Ok(k) = ra {
                assert_eq!(a[..k], b[..k]);
            }
        }
    }
}
