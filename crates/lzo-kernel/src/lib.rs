// SPDX-License-Identifier: GPL-2.0-only
//
// Follows the Linux kernel's lib/lzo (lzo1x_compress.c, lzo1x_decompress_safe.c, lzodefs.h),
// which carry this notice:
//
//  LZO1X Compressor from LZO / LZO1X Decompressor from LZO
//
//  Copyright (C) 1996-2012 Markus F.X.J. Oberhumer <markus@oberhumer.com>
//
//  The full LZO package can be found at:
//  http://www.oberhumer.com/opensource/lzo/
//
//  Changed for Linux kernel use by:
//  Nitin Gupta <nitingupta910@gmail.com>
//  Richard Purdie <rpurdie@openedhand.com>
//
// Rewritten in Rust for uzswap by the uzswap developers (2026). This file is free software;
// you can redistribute it and/or modify it under the terms of the GNU General Public License
// version 2 as published by the Free Software Foundation (see COPYING in this crate). It is
// distributed WITHOUT ANY WARRANTY; without even the implied warranty of MERCHANTABILITY or
// FITNESS FOR A PARTICULAR PURPOSE.
//! uzswap-lzo: the Linux kernel's LZO1X-1 compressor (`lzo` and `lzo-rle`) and an LZO1X
//! decompressor, in Rust, under the kernel's licence (GPL-2.0-only).
//!
//! What it owns: [`compress_exact`], which produces byte for byte what the kernel's
//! `lzo1x_1_compress` / `lzorle1x_1_compress` produce on x86-64 (the estimator predicts zram
//! and zswap memory from these sizes; the conformance tests check them per page against zram),
//! and two bounds-checked decoders of one specification: [`decompress_safe`] (the kernel's
//! `lzo1x_decompress_safe` structure: per-instruction length tests, then 8/16-byte over-copies)
//! and [`decompress_reference`] (safe slice accesses only; the oracle of the differential tests
//! and fuzz target). Both follow the kernel's code closely (variable names, instruction
//! dispatch, copy strategy), which is why they live in this GPL crate and not in the MIT
//! `uzswap-compress`: that crate uses this one behind its default-on cargo feature `kernel-lzo`
//! (docs/licensing.md).
//!
//! Format facts (the kernel's Documentation/staging/lzo.rst):
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
//!   output.
//!
//! Data layout: stateless functions; the caller owns the compressor's hash table ([`Dict`])
//! and reuses it across calls (epoch-tagged, so it needs no clearing per call). Lock order:
//! no locks.
//!
//! Decoders treat their input as hostile: corrupt or truncated input gives `Err`, never a panic
//! or an out-of-bounds access.

#![deny(missing_docs)]

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
/// Entries in the compressor's hash table (16 KiB of u16 offsets).
pub const D_SIZE: usize = 1 << D_BITS;

/// The compressor's hash table: offsets of earlier input positions by the hash of their next 4
/// bytes. Allocate it once ([`Dict::new_boxed`], 16 KiB) and pass it to every
/// [`compress_exact`] call.
///
/// The kernel clears its table before every input (a 16 KiB `memset` per 4 KiB page), so that
/// every slot starts as "offset 0". Here a slot holds `epoch + offset`, and each input starts
/// `epoch` above every offset stored before it: a slot below `epoch` is stale and reads as 0,
/// exactly as a cleared slot does. The output stays byte-identical, and the table is cleared
/// only when the 16-bit offsets run out (every 16 inputs of 4 KiB).
pub struct Dict {
    slots: [u16; D_SIZE],
    /// Offsets of the current input are stored as `epoch + offset`.
    epoch: u32,
}

impl Dict {
    /// A table in the cleared state, on the heap (16 KiB).
    pub fn new_boxed() -> Box<Dict> {
        Box::new(Dict {
            slots: [0; D_SIZE],
            epoch: 0,
        })
    }
}

/// The largest output of [`compress_exact`] for `src_len` input bytes (the LZO1X-1 worst case
/// plus the 2-byte lzo-rle header).
pub fn worst_compressed_len(src_len: usize) -> usize {
    src_len + src_len / 16 + 64 + 3 + 2
}

#[cfg(test)]
mod tests {
    //! Small inputs so that Miri (which checks the pointer code for undefined behaviour) can
    //! run them: `cargo +nightly miri test -p uzswap-lzo --lib`.

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
        let mut dict = Dict::new_boxed();
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

    /// Every copy path of the fast decoder: matches at each distance from 1 to 40 (the
    /// period-multiple path below 8, the overlapping 8-byte path from 8 to 15, the 16-byte path
    /// from 16) and lengths from 3 to 40 (one 8-byte copy up to 8), each followed by 0 to 3
    /// literals, decoded into buffers of the exact size and a few bytes larger (the checked
    /// tail paths near the end of the output), against the reference decoder.
    #[test]
    #[cfg_attr(miri, ignore = "2.5k streams: too slow under Miri")]
    fn every_match_distance_and_length_decodes_as_the_reference() {
        let mut dict = Dict::new_boxed();
        let mut x = 7u32;
        let mut rnd = move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        };
        for dist in 1..=40usize {
            for len in (3..=40usize).step_by(3) {
                // Random bytes, then `len` bytes repeating the `dist` bytes before them, then
                // a few random literals, three times over.
                let mut src = Vec::new();
                for lits in 0..3 {
                    src.extend((0..dist + 5).map(|_| rnd()));
                    let from = src.len() - dist;
                    for k in 0..len {
                        src.push(src[from + k]);
                    }
                    src.extend((0..lits).map(|_| rnd()));
                }
                for variant in [Variant::Lzo, Variant::LzoRle] {
                    let mut c = vec![0u8; worst_compressed_len(src.len())];
                    let n = compress_exact(&src, &mut c, variant, &mut dict);
                    for extra in [0, 1, 7, 15, 16] {
                        let mut d = vec![0u8; src.len() + extra];
                        let mut r = vec![0u8; src.len() + extra];
                        let got = decompress_safe(&c[..n], &mut d);
                        assert_eq!(got, decompress_reference(&c[..n], &mut r));
                        assert_eq!(got, Ok(src.len()), "dist {dist} len {len} extra {extra}");
                        assert_eq!(d[..src.len()], src[..], "dist {dist} len {len}");
                    }
                    let mut short = vec![0u8; src.len() - 1];
                    assert_eq!(
                        decompress_safe(&c[..n], &mut short),
                        Err(LzoError::OutputOverrun)
                    );
                }
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
        let mut dict = Dict::new_boxed();
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
        let mut dict = Dict::new_boxed();
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
        let mut dict = Dict::new_boxed();
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

    /// A table reused across inputs of every size (tiny, 4 KiB, odd sizes, several chunks;
    /// enough of them to wrap the 16-bit epoch many times) gives the bytes a cleared one gives.
    #[test]
    fn reused_dict_equals_cleared_dict() {
        let mut text = Vec::new();
        for i in 0..30_000u32 {
            text.extend_from_slice(
                format!("k{}=v{};", i % 97, i.wrapping_mul(2_654_435_761) % 1000).as_bytes(),
            );
            if i % 50 == 0 {
                text.extend_from_slice(&[0u8; 40]);
            }
        }
        let sizes: &[usize] = if cfg!(miri) {
            &[0, 20, 21, 300, 700, 64, 5000]
        } else {
            &[
                4096, 4096, 21, 4096, 20, 100, 4096, 49_152, 49_153, 100_000, 4096, 3000, 60_000,
                4096, 5000,
            ]
        };
        let rounds = if cfg!(miri) { 1 } else { 8 };
        for variant in [Variant::Lzo, Variant::LzoRle] {
            let mut reused = Dict::new_boxed();
            let mut at = 0usize;
            for _ in 0..rounds {
                for &len in sizes {
                    at = (at + 7919) % (text.len() - len + 1);
                    let src = &text[at..at + len];
                    let mut a = vec![0u8; worst_compressed_len(len)];
                    let mut b = vec![0u8; worst_compressed_len(len)];
                    let na = compress_exact(src, &mut a, variant, &mut reused);
                    let nb = compress_exact(src, &mut b, variant, &mut Dict::new_boxed());
                    assert_eq!(a[..na], b[..nb], "{variant:?}, {len} bytes at {at}");
                }
            }
        }
    }
}
