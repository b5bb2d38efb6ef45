// SPDX-License-Identifier: MIT AND BSD-2-Clause
//
// Follows the Linux kernel's lib/lz4/lz4_compress.c (an import of LZ4 1.7.x), which carries
// this notice and terms (BSD-2-Clause); the changes and the Rust code are MIT (LICENSE):
//
// LZ4 - Fast LZ compression algorithm
// Copyright (C) 2011 - 2016, Yann Collet.
// BSD 2 - Clause License (http://www.opensource.org/licenses/bsd - license.php)
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions are
// met:
//     * Redistributions of source code must retain the above copyright
//       notice, this list of conditions and the following disclaimer.
//     * Redistributions in binary form must reproduce the above
// copyright notice, this list of conditions and the following disclaimer
// in the documentation and/or other materials provided with the
// distribution.
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
// "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
// LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR
// A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
// OWNER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
// SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT
// LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE,
// DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
// THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
// (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
// OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
// You can contact the author at :
//     - LZ4 homepage : http://www.lz4.org
//     - LZ4 source repository : https://github.com/lz4/lz4
//
//     Changed for kernel usage by:
//     Sven Schmidt <4sschmid@informatik.uni-hamburg.de>
//
// The binary-form condition is met by NOTICE at the repository root, which reproduces this
// notice for every build that contains this code.

//! A Rust LZ4 block compressor that reproduces the Linux kernel's `lib/lz4` output byte for byte.
//!
//! The kernel's LZ4 is an import of LZ4 1.7.x. liblz4 1.10 produces the same bytes on ~96 % of
//! pages; the rest come out 1-4 bytes smaller in liblz4 because of one rule: the kernel stops
//! looking for a new match as soon as the *next* probe position would pass `iend - MFLIMIT`
//! (`forwardIp > mflimit`), whereas LZ4 >= 1.9 allows a probe at `mflimit + 1` and so can
//! still find a short match at `iend - 12` that the kernel leaves as literals.
//! `crates/conformance/tests/compress_sizes_match_zram.rs` checks the per-page size against zram's lz4.
//!
//! The remaining choices are the 1.7-era ones both versions share: a 4 KiB-entry-per-table
//! (LZ4_MEMORY_USAGE 14) hash of 4 bytes with 13 bits for inputs below 64 KiB + 11 ("byU16"),
//! a 5-byte hash with 12 bits and a 64 KiB distance limit above that, acceleration 1 (the skip
//! step grows every 64 failed probes), backward "catch up" of a found match, and an immediate
//! re-probe at the end of every match.
//!
//! Safe Rust except the probe loop's unchecked loads (each proven by the loop bounds, checked by
//! debug assertions, and the output writes, all within the LZ4 worst-case bound); the output is
//! a standard LZ4 block (any LZ4 decoder reads it). Its table is epoch-tagged instead of cleared
//! per input ([`Table`]). On captured program memory it runs at liblz4's speed (1.01-1.03x its
//! time at the median, docs/benchmarks/compress.md), so [`crate::compress`] keeps the
//! long-proven liblz4 for the store path and the estimator uses
//! [`crate::compress_kernel_exact`].

use crate::Error;

const MINMATCH: usize = 4;
const MFLIMIT: usize = 12;
const LASTLITERALS: usize = 5;
const ML_MASK: usize = 15;
const RUN_MASK: usize = 15;
const ML_BITS: u32 = 4;
const MIN_LENGTH: usize = MFLIMIT + 1;
/// Inputs shorter than this use 16-bit positions and the 13-bit 4-byte hash.
const LIMIT_64K: usize = 64 * 1024 + (MFLIMIT - 1);
const SKIP_TRIGGER: u32 = 6;
const MAX_DISTANCE: usize = 65535;
/// LZ4_MEMORY_USAGE 14: 16 KiB of table, i.e. 2^12 u32 or 2^13 u16 entries.
const HASH_LOG: u32 = 12;

/// The compressor's position table, reused from call to call without clearing it each time.
///
/// The kernel (and liblz4 for a 4 KiB input) clears its 16 KiB table before every input, so
/// that every slot starts as "position 0". Here the 16-bit slots of small inputs hold
/// `epoch + position`, and every call after the first starts `epoch` above every position the
/// earlier calls stored: a slot below `epoch` is stale and reads as 0, which is exactly what a
/// cleared slot reads. The output is therefore byte-identical to a cleared table's, and the
/// table is only cleared when the 16-bit positions run out (every 16 calls for 4 KiB pages).
/// Large inputs (u32 positions, rare on the store path) clear their own table every call.
pub(crate) struct Table {
    small: [u16; 1 << (HASH_LOG + 1)],
    /// Positions of small inputs are stored as `epoch + position`.
    epoch: u32,
    large: [u32; 1 << HASH_LOG],
}

impl Table {
    pub(crate) fn new_boxed() -> Box<Table> {
        Box::new(Table {
            small: [0; 1 << (HASH_LOG + 1)],
            epoch: 0,
            large: [0; 1 << HASH_LOG],
        })
    }
}

/// One kind of input's view of [`Table`]: `get` returns the stored position (0 when stale).
trait Positions {
    const SMALL: bool;
    fn get(&self, h: usize) -> usize;
    fn set(&mut self, h: usize, pos: usize);
}

/// Inputs below [`LIMIT_64K`]: 16-bit slots offset by the epoch.
struct Small<'a> {
    slots: &'a mut [u16; 1 << (HASH_LOG + 1)],
    epoch: u32,
}

impl Positions for Small<'_> {
    const SMALL: bool = true;
    #[inline(always)]
    fn get(&self, h: usize) -> usize {
        // A slot below the epoch was stored by an earlier input: it reads as a cleared slot.
        (self.slots[h] as u32).saturating_sub(self.epoch) as usize
    }
    #[inline(always)]
    fn set(&mut self, h: usize, pos: usize) {
        debug_assert!(self.epoch as usize + pos <= u16::MAX as usize);
        self.slots[h] = (self.epoch as usize + pos) as u16;
    }
}

/// Larger inputs: 32-bit positions, cleared for every input.
struct Large<'a> {
    slots: &'a mut [u32; 1 << HASH_LOG],
}

impl Positions for Large<'_> {
    const SMALL: bool = false;
    #[inline(always)]
    fn get(&self, h: usize) -> usize {
        self.slots[h] as usize
    }
    #[inline(always)]
    fn set(&mut self, h: usize, pos: usize) {
        self.slots[h] = pos as u32;
    }
}

/// Little-endian u32 at `s[i..i + 4]`, unchecked (debug builds assert): the probe loop's
/// `forward_ip <= mflimit` test proves every load in it.
///
/// # Safety
/// `i + 4 <= s.len()`.
#[inline(always)]
unsafe fn read32(s: &[u8], i: usize) -> u32 {
    debug_assert!(i + 4 <= s.len());
    // SAFETY: guaranteed by the caller; explicitly unaligned.
    unsafe { u32::from_le(s.as_ptr().add(i).cast::<u32>().read_unaligned()) }
}

/// The table slot of position `i`.
///
/// # Safety
/// `i + 8 <= s.len()` (the 5-byte hash of large inputs loads 8 bytes).
#[inline(always)]
unsafe fn hash(s: &[u8], i: usize, small: bool) -> usize {
    debug_assert!(i + 8 <= s.len());
    if small {
        // SAFETY: i + 4 <= i + 8 <= s.len().
        let v = unsafe { read32(s, i) };
        (v.wrapping_mul(2_654_435_761) >> (32 - (HASH_LOG + 1))) as usize
    } else {
        // SAFETY: guaranteed by the caller; explicitly unaligned.
        let seq = u64::from_le(unsafe { s.as_ptr().add(i).cast::<u64>().read_unaligned() });
        ((seq << 24).wrapping_mul(889_523_592_379) >> (64 - HASH_LOG)) as usize
    }
}

/// Little-endian u64 at `s[i..i + 8]`, unchecked (debug builds assert).
///
/// # Safety
/// `i + 8 <= s.len()`.
#[inline(always)]
unsafe fn read64(s: &[u8], i: usize) -> u64 {
    debug_assert!(i + 8 <= s.len());
    // SAFETY: guaranteed by the caller; explicitly unaligned.
    unsafe { u64::from_le(s.as_ptr().add(i).cast::<u64>().read_unaligned()) }
}

/// Number of equal bytes at `a` and `b` (b < a), not counting past `limit` on the `a` side.
/// `limit <= s.len()`.
#[inline(always)]
fn count(s: &[u8], mut a: usize, mut b: usize, limit: usize) -> usize {
    debug_assert!(b < a && limit <= s.len());
    let start = a;
    while a + 8 <= limit {
        // SAFETY: a + 8 <= limit <= s.len(), and b < a.
        let x = unsafe { read64(s, a) ^ read64(s, b) };
        if x != 0 {
            return a - start + (x.trailing_zeros() / 8) as usize;
        }
        a += 8;
        b += 8;
    }
    while a < limit && s[a] == s[b] {
        a += 1;
        b += 1;
    }
    a - start
}

/// Copies `n` literals; 16 bytes at a time (past the end, overwritten later) while both sides
/// have room, the tail exactly.
#[inline(always)]
fn copy_literals(dst: &mut [u8], op: usize, src: &[u8], from: usize, n: usize) {
    let (mut f, mut o, end) = (from, op, from + n);
    while f < end && f + 16 <= src.len() && o + 16 <= dst.len() {
        dst[o..o + 16].copy_from_slice(&src[f..f + 16]);
        f += 16;
        o += 16;
    }
    if f < end {
        dst[o..o + (end - f)].copy_from_slice(&src[f..end]);
    }
}

/// Writes `v` at `dst[i]`, unchecked (debug builds assert).
///
/// # Safety
/// `i < dst.len()`. Every write of [`compress_with`] lies below the final output length, which
/// the LZ4 worst-case bound ([`bound`], asserted on entry) covers, as in liblz4's
/// unlimited-output mode.
#[inline(always)]
unsafe fn put(dst: &mut [u8], i: usize, v: u8) {
    debug_assert!(i < dst.len());
    // SAFETY: guaranteed by the caller.
    unsafe { *dst.get_unchecked_mut(i) = v };
}

/// Appends a length beyond the 4 bits of the token: 255s, then the remainder.
///
/// # Safety
/// As [`put`]: the bytes written lie within the worst-case bound.
#[inline(always)]
unsafe fn push_len(dst: &mut [u8], op: &mut usize, mut n: usize) {
    while n >= 255 {
        // SAFETY: the caller's.
        unsafe { put(dst, *op, 255) };
        *op += 1;
        n -= 255;
    }
    // SAFETY: the caller's.
    unsafe { put(dst, *op, n as u8) };
    *op += 1;
}

/// `LZ4_compressBound`.
pub(crate) fn bound(src_len: usize) -> usize {
    src_len + src_len / 255 + 16
}

/// Compresses `src` as the kernel's `LZ4_compress_default` does. `dst` must hold
/// [`bound(src.len())`](bound) bytes; `table` is this compressor's scratch (any earlier
/// contents give the same output as a cleared table, see [`Table`]).
pub(crate) fn compress_exact(src: &[u8], dst: &mut [u8], table: &mut Table) -> usize {
    assert!(dst.len() >= bound(src.len()));
    let n = src.len();
    if n < MIN_LENGTH {
        // No position is hashed: the table is neither read nor written.
        return compress_with(
            src,
            dst,
            &mut Large {
                slots: &mut table.large,
            },
        );
    }
    if n >= LIMIT_64K {
        table.large.fill(0);
        return compress_with(
            src,
            dst,
            &mut Large {
                slots: &mut table.large,
            },
        );
    }
    // Stored positions are at most n - MFLIMIT; they must fit 16 bits above the epoch.
    if table.epoch as usize + (n - MFLIMIT) > u16::MAX as usize {
        table.small.fill(0);
        table.epoch = 0;
    }
    let epoch = table.epoch;
    let k = compress_with(
        src,
        dst,
        &mut Small {
            slots: &mut table.small,
            epoch,
        },
    );
    // Above every position this input stored.
    table.epoch = epoch + (n - MFLIMIT + 1) as u32;
    k
}

#[inline(always)]
fn compress_with<T: Positions>(src: &[u8], dst: &mut [u8], table: &mut T) -> usize {
    let n = src.len();
    let small = T::SMALL;
    let mut op = 0usize;
    let mut anchor = 0usize;

    if n >= MIN_LENGTH {
        let mflimit = n - MFLIMIT;
        let matchlimit = n - LASTLITERALS;
        // Every position hashed or compared below is <= mflimit + 1 = n - 11, so 8 bytes from
        // it are inside `src`; match candidates are earlier positions.
        // SAFETY: 0 + 8 <= MIN_LENGTH <= n.
        let h0 = unsafe { hash(src, 0, small) };
        table.set(h0, 0);
        let mut ip = 1usize;
        // SAFETY: see above.
        let mut forward_h = unsafe { hash(src, ip, small) };
        'main: loop {
            // Probe forward until 4 bytes match, skipping faster after many misses.
            let mut forward_ip = ip;
            let mut step = 1usize;
            let mut search_nb = 1u32 << SKIP_TRIGGER;
            let mut m;
            loop {
                let h = forward_h;
                ip = forward_ip;
                forward_ip += step;
                step = (search_nb >> SKIP_TRIGGER) as usize;
                search_nb += 1;
                if forward_ip > mflimit {
                    break 'main;
                }
                m = table.get(h);
                // SAFETY: forward_ip <= mflimit (tested just above).
                forward_h = unsafe { hash(src, forward_ip, small) };
                table.set(h, ip);
                if !small && m + MAX_DISTANCE < ip {
                    continue;
                }
                // SAFETY: m < ip < forward_ip <= mflimit.
                if unsafe { read32(src, m) == read32(src, ip) } {
                    break;
                }
            }
            // Extend the match backwards over pending literals.
            while ip > anchor
                && m > 0
                // SAFETY: m < ip <= mflimit < n, and both are above 0 here.
                && unsafe { *src.get_unchecked(ip - 1) == *src.get_unchecked(m - 1) }
            {
                ip -= 1;
                m -= 1;
            }
            let lit = ip - anchor;
            let mut token = op;
            op += 1;
            // The token is written last, once the match length is known.
            let mut tok = if lit >= RUN_MASK {
                // SAFETY: part of the output, within the worst-case bound (see `put`).
                unsafe { push_len(dst, &mut op, lit - RUN_MASK) };
                (RUN_MASK << ML_BITS) as u8
            } else {
                (lit << ML_BITS) as u8
            };
            copy_literals(dst, op, src, anchor, lit);
            op += lit;

            loop {
                // Offset, then match length.
                let off = ((ip - m) as u16).to_le_bytes();
                // SAFETY: part of the output, within the worst-case bound (see `put`).
                unsafe {
                    put(dst, op, off[0]);
                    put(dst, op + 1, off[1]);
                }
                op += 2;
                let mc = count(src, ip + MINMATCH, m + MINMATCH, matchlimit);
                ip += MINMATCH + mc;
                if mc >= ML_MASK {
                    tok += ML_MASK as u8;
                    // SAFETY: as above.
                    unsafe { push_len(dst, &mut op, mc - ML_MASK) };
                } else {
                    tok += mc as u8;
                }
                // SAFETY: token < op, inside the output written so far.
                unsafe { put(dst, token, tok) };
                anchor = ip;
                if ip > mflimit {
                    break 'main;
                }
                // SAFETY: ip <= mflimit here (tested just above).
                let h2 = unsafe { hash(src, ip - 2, small) };
                table.set(h2, ip - 2);
                // Immediate re-probe at the match end: a hit starts a match with no literals.
                // SAFETY: as above.
                let h = unsafe { hash(src, ip, small) };
                m = table.get(h);
                table.set(h, ip);
                // SAFETY: m < ip <= mflimit.
                if (small || m + MAX_DISTANCE >= ip) && unsafe { read32(src, m) == read32(src, ip) }
                {
                    token = op;
                    tok = 0;
                    op += 1;
                    continue;
                }
                break;
            }
            ip += 1;
            // SAFETY: the last match ended at ip - 1 <= mflimit, and ip <= mflimit + 1 means
            // ip + 8 <= n - 3.
            forward_h = unsafe { hash(src, ip, small) };
        }
    }

    let last = n - anchor;
    if last >= RUN_MASK {
        // SAFETY: the last token and its length are part of the output, within the
        // worst-case bound (see `put`).
        unsafe { put(dst, op, (RUN_MASK << ML_BITS) as u8) };
        op += 1;
        // SAFETY: as above.
        unsafe { push_len(dst, &mut op, last - RUN_MASK) };
    } else {
        // SAFETY: as above.
        unsafe { put(dst, op, (last << ML_BITS) as u8) };
        op += 1;
    }
    dst[op..op + last].copy_from_slice(&src[anchor..]);
    op + last
}

/// [`compress_exact`] with a caller-sized destination (scratch copy when it is below the bound).
pub(crate) fn compress(
    src: &[u8],
    dst: &mut [u8],
    table: &mut Table,
    scratch: &mut Vec<u8>,
) -> Result<usize, Error> {
    if src.len() > 0x7E00_0000 {
        return Err(Error::SrcTooLarge(src.len()));
    }
    let b = bound(src.len());
    if dst.len() >= b {
        return Ok(compress_exact(src, dst, table));
    }
    if scratch.len() < b {
        scratch.resize(b, 0);
    }
    let k = compress_exact(src, scratch, table);
    match dst.get_mut(..k) {
        Some(d) => {
            d.copy_from_slice(&scratch[..k]);
            Ok(k)
        }
        None => Err(Error::DstTooSmall {
            available: dst.len(),
        }),
    }
}

/// Per-thread hash table and scratch output.
type State = (Box<Table>, Vec<u8>);

thread_local! {
    static STATE: std::cell::RefCell<Option<State>> = const { std::cell::RefCell::new(None) };
}

/// [`compress`] with this thread's table.
pub(crate) fn compress_tls(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    crate::tls::with_cached(
        &STATE,
        || Ok((Table::new_boxed(), Vec::new())),
        |(table, scratch)| compress(src, dst, table, scratch),
    )
}

#[cfg(test)]
mod tests {
    //! Small inputs so that Miri can check the unchecked loads:
    //! `cargo +nightly miri test -p uzswap-compress --lib lz4_kernel` (the liblz4 decode check
    //! is skipped under Miri, which cannot run C).

    use super::*;

    #[test]
    fn small_inputs_compress_and_decode() {
        let mut table = Table::new_boxed();
        let mut text = Vec::new();
        for i in 0..60u32 {
            text.extend_from_slice(format!("k{}=v{};", i % 5, i * 7).as_bytes());
        }
        let inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"0123456789abc".to_vec(),
            vec![0u8; 200],
            text,
            (0..300u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ];
        for src in inputs {
            let mut dst = vec![0u8; bound(src.len())];
            let n = compress_exact(&src, &mut dst, &mut table);
            assert!(n <= dst.len());
            #[cfg(not(miri))]
            {
                let mut out = vec![0u8; src.len() + 1];
                // SAFETY: valid buffers of the given sizes; LZ4_decompress_safe is bounds-checked.
                let m = unsafe {
                    lz4_sys::LZ4_decompress_safe(
                        dst.as_ptr().cast(),
                        out.as_mut_ptr().cast(),
                        n as i32,
                        out.len() as i32,
                    )
                };
                assert_eq!(m, src.len() as i32);
                assert_eq!(out[..src.len()], src[..]);
            }
        }
    }

    /// A table reused across inputs of every size class (tiny, 4 KiB, odd sizes, over 64 KiB,
    /// enough of them to wrap the 16-bit epoch many times) gives the bytes a cleared table gives.
    #[test]
    fn reused_table_equals_cleared_table() {
        let mut reused = Table::new_boxed();
        let mut text = Vec::new();
        for i in 0..20_000u32 {
            text.extend_from_slice(
                format!("k{}=v{};", i % 97, i.wrapping_mul(2_654_435_761) % 1000).as_bytes(),
            );
        }
        let sizes: &[usize] = if cfg!(miri) {
            &[0, 12, 13, 300, 700, 64, 5000]
        } else {
            &[
                4096, 4096, 13, 4096, 12, 100, 4096, 65_546, 65_547, 70_000, 4096, 3000, 60_000,
                4096, 5000,
            ]
        };
        let rounds = if cfg!(miri) { 1 } else { 8 };
        let mut at = 0usize;
        for _ in 0..rounds {
            for &len in sizes {
                let len = len.min(text.len());
                at = (at + 7919) % (text.len() - len + 1);
                let src = &text[at..at + len];
                let mut a = vec![0u8; bound(len)];
                let mut b = vec![0u8; bound(len)];
                let na = compress_exact(src, &mut a, &mut reused);
                let nb = compress_exact(src, &mut b, &mut Table::new_boxed());
                assert_eq!(a[..na], b[..nb], "input of {len} bytes at {at}");
            }
        }
    }
}
