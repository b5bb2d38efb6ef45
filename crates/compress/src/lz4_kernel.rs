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
//! Inputs below 64 KiB (pages) take [`compress_small`], a raw-pointer loop whose unchecked loads
//! and stores are each proven by the loop bounds and the LZ4 worst-case bound (documented there,
//! checked by debug assertions); larger inputs take the generic, mostly safe `compress_with`,
//! which with 16-bit positions is also the tests' reference for the fast path. The output is
//! a standard LZ4 block (any LZ4 decoder reads it). Its table is epoch-tagged instead of cleared
//! per input ([`Table`]). On the four captured corpora (pg, jvm, go, node) it takes 0.83-0.95x
//! liblz4 1.10's time per page at the median (`lzo_speed`, three alternating rounds of seven;
//! it was 1.01-1.03x before the fast path, docs/benchmarks/compress.md), so it is the store
//! path's LZ4 compressor ([`crate::compress`]) since 2026-11-27.

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

/// Inputs below [`LIMIT_64K`]: 16-bit slots offset by the epoch. Only the tests use it now,
/// with [`compress_with`] as the reference for [`compress_small`].
#[cfg(test)]
struct Small<'a> {
    slots: &'a mut [u16; 1 << (HASH_LOG + 1)],
    epoch: u32,
}

#[cfg(test)]
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
    let k = compress_small(src, dst, &mut table.small, epoch);
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

/// Slots of the small-input table.
const SMALL_SLOTS: usize = 1 << (HASH_LOG + 1);

/// The 13-bit slot of the 4 bytes `v` (inputs below [`LIMIT_64K`]).
#[inline(always)]
fn hash4(v: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - (HASH_LOG + 1))) as usize
}

/// [`compress_with`] for inputs of [`MIN_LENGTH`]..[`LIMIT_64K`] bytes with the epoch-tagged
/// 16-bit table, on raw pointers: the same decisions, so the same bytes (the tests compare
/// the two).
///
/// A slot holds a "tagged" position, input index + `epoch`: the tag of a pointer `p` is
/// `p.addr() - base`, and a stale slot (below `epoch`) is clamped up to `epoch`, i.e. index 0,
/// as in [`Small::get`].
///
/// Bounds: every probed or hashed pointer is at most `mflimit + 1 = iend - 11`, so the 4-byte
/// loads there stay inside the input; match candidates are earlier; the count loads 8 bytes
/// only below `mlim8 + 8 = iend - 5`. Every output byte lies below the final output length,
/// except the literal copy's 8-byte steps (at most 7 bytes past the literals, which end at
/// most `ip + ip / 255 + 2` bytes into `dst` for `ip <= iend - 12`), all inside the worst-case
/// bound `dst.len() >= bound(n)` asserted on entry.
#[inline(never)]
fn compress_small(src: &[u8], dst: &mut [u8], slots: &mut [u16; SMALL_SLOTS], epoch: u32) -> usize {
    let n = src.len();
    assert!((MIN_LENGTH..LIMIT_64K).contains(&n));
    assert!(dst.len() >= bound(n));
    assert!(epoch as usize + (n - MFLIMIT) <= u16::MAX as usize);
    let e = epoch as usize;
    let s0 = src.as_ptr();
    let iend = s0.wrapping_add(n);
    // `sp + tag` is the byte at that tag; `sp` itself may lie before the input and is only
    // offset back into it.
    let sp = s0.wrapping_sub(e);
    let base = sp.addr();
    let mflimit = iend.wrapping_sub(MFLIMIT);
    // The last start of an 8-byte count load: its end is matchlimit = iend - LASTLITERALS.
    let mlim8 = iend.wrapping_sub(LASTLITERALS + 8);
    let matchlimit = iend.wrapping_sub(LASTLITERALS);
    let d0 = dst.as_mut_ptr();
    let dend = d0.wrapping_add(dst.len());
    let tp = slots.as_mut_ptr();

    let in_src = |p: *const u8, len: usize| p >= s0 && p.addr() + len <= iend.addr();
    let rd32 = |p: *const u8| -> u32 {
        debug_assert!(in_src(p, 4));
        // SAFETY: inside the input (see the bounds above; asserted in debug builds).
        unsafe { u32::from_le(p.cast::<u32>().read_unaligned()) }
    };
    let rd64 = |p: *const u8| -> u64 {
        debug_assert!(in_src(p, 8));
        // SAFETY: as `rd32`.
        unsafe { u64::from_le(p.cast::<u64>().read_unaligned()) }
    };
    let byte = |p: *const u8| -> u8 {
        debug_assert!(in_src(p, 1));
        // SAFETY: as `rd32`.
        unsafe { *p }
    };
    // The stored position as a pointer, the input's start when stale.
    let get = |h: usize| -> *const u8 {
        debug_assert!(h < SMALL_SLOTS);
        // SAFETY: `hash4` returns 13 bits, below SMALL_SLOTS.
        let tag = unsafe { *tp.add(h) } as usize;
        sp.wrapping_add(tag.max(e))
    };
    let set = |h: usize, p: *const u8| {
        debug_assert!(h < SMALL_SLOTS && in_src(p, 0));
        // SAFETY: as `get`. Tags are at most e + n - MFLIMIT, which fits 16 bits (asserted on
        // entry).
        unsafe { *tp.add(h) = (p.addr() - base) as u16 };
    };
    let in_dst = |o: *mut u8, len: usize| o >= d0 && o.addr() + len <= dend.addr();

    let mut op = d0;
    let mut anchor = s0;
    set(hash4(rd32(s0)), s0);
    let mut ip = s0.wrapping_add(1);
    let mut forward_h = hash4(rd32(ip));
    'main: loop {
        // Probe forward until 4 bytes match, skipping faster after many misses.
        let mut forward_ip = ip;
        let mut step = 1usize;
        let mut search_nb = 1u32 << SKIP_TRIGGER;
        let mut m;
        loop {
            let h = forward_h;
            ip = forward_ip;
            forward_ip = forward_ip.wrapping_add(step);
            step = (search_nb >> SKIP_TRIGGER) as usize;
            search_nb += 1;
            if forward_ip > mflimit {
                break 'main;
            }
            m = get(h);
            forward_h = hash4(rd32(forward_ip));
            set(h, ip);
            if rd32(m) == rd32(ip) {
                break;
            }
        }
        // Extend the match backwards over pending literals (not before the input).
        while ip > anchor && m > s0 && byte(ip.wrapping_sub(1)) == byte(m.wrapping_sub(1)) {
            ip = ip.wrapping_sub(1);
            m = m.wrapping_sub(1);
        }
        let lit = ip.addr() - anchor.addr();
        let mut token = op;
        op = op.wrapping_add(1);
        // The token is written last, once the match length is known.
        let mut tok = if lit >= RUN_MASK {
            op = put_len(op, dend, lit - RUN_MASK);
            (RUN_MASK << ML_BITS) as u8
        } else {
            (lit << ML_BITS) as u8
        };
        // Literals in 8-byte steps (reads end before ip + 8 <= iend - 4).
        let mut k = 0;
        loop {
            let v = rd64(anchor.wrapping_add(k));
            debug_assert!(in_dst(op.wrapping_add(k), 8));
            // SAFETY: within the worst-case bound (see the function's doc).
            unsafe { op.add(k).cast::<u64>().write_unaligned(v) };
            k += 8;
            if k >= lit {
                break;
            }
        }
        op = op.wrapping_add(lit);

        loop {
            // Offset, then match length.
            debug_assert!(in_dst(op, 2));
            // SAFETY: part of the output (see the function's doc).
            unsafe {
                op.cast::<[u8; 2]>()
                    .write_unaligned(((ip.addr() - m.addr()) as u16).to_le_bytes())
            };
            op = op.wrapping_add(2);
            let a = ip.wrapping_add(MINMATCH);
            let b = m.wrapping_add(MINMATCH);
            // The 4 bytes at the match end, for the re-probe.
            let v = 'counted: {
                // Most matches end within the first 8 bytes: length below 15, no extra bytes.
                let (mut a2, mut b2) = (a, b);
                if a <= mlim8 {
                    let wa = rd64(a);
                    let x = wa ^ rd64(b);
                    if x != 0 {
                        let sh = x.trailing_zeros() & 56;
                        let mc = (sh / 8) as usize;
                        ip = a.wrapping_add(mc);
                        tok += mc as u8;
                        // The bytes at ip from the words already at hand rather than a load
                        // that would wait for ip: a + 12 <= iend - 1 here.
                        let wq = rd64(a.wrapping_add(4));
                        // Bytes a..a + 12 as one number, shifted down to ip = a + sh / 8.
                        let w = u128::from(wa) | u128::from(wq >> 32) << 64;
                        let v = (w >> sh) as u32;
                        debug_assert_eq!(v, rd32(ip));
                        break 'counted v;
                    }
                    a2 = a.wrapping_add(8);
                    b2 = b.wrapping_add(8);
                }
                // The rest, up to matchlimit.
                let end = loop {
                    if a2 > mlim8 {
                        while a2 < matchlimit && byte(a2) == byte(b2) {
                            a2 = a2.wrapping_add(1);
                            b2 = b2.wrapping_add(1);
                        }
                        break a2;
                    }
                    let x = rd64(a2) ^ rd64(b2);
                    if x != 0 {
                        break a2.wrapping_add((x.trailing_zeros() / 8) as usize);
                    }
                    a2 = a2.wrapping_add(8);
                    b2 = b2.wrapping_add(8);
                };
                let mc = end.addr() - a.addr();
                ip = end;
                if mc >= ML_MASK {
                    tok += ML_MASK as u8;
                    op = put_len(op, dend, mc - ML_MASK);
                } else {
                    tok += mc as u8;
                }
                // ip <= matchlimit = iend - 5.
                rd32(ip)
            };
            debug_assert!(in_dst(token, 1));
            // SAFETY: token < op, inside the output written so far.
            unsafe { *token = tok };
            anchor = ip;
            if ip > mflimit {
                break 'main;
            }
            // Insert ip - 2, then re-probe at the match end: a hit starts a match with no
            // literals. The re-probe's slot is read before the insert's store (so that the
            // load does not wait for it) and takes ip - 2 when both hash alike.
            let p2 = ip.wrapping_sub(2);
            let h2 = hash4(rd32(p2));
            let h = hash4(v);
            let found = get(h);
            set(h2, p2);
            m = found;
            if h == h2 {
                // Rare outside period-2 data: a branch keeps it off the load's critical path.
                m = same_slot(p2);
            }
            set(h, ip);
            if rd32(m) != v {
                break;
            }
            token = op;
            tok = 0;
            op = op.wrapping_add(1);
        }
        ip = ip.wrapping_add(1);
        forward_h = hash4(rd32(ip));
    }

    let last = iend.addr() - anchor.addr();
    let tok = if last >= RUN_MASK {
        (RUN_MASK << ML_BITS) as u8
    } else {
        (last << ML_BITS) as u8
    };
    debug_assert!(in_dst(op, 1));
    // SAFETY: part of the output (see the function's doc).
    unsafe { *op = tok };
    op = op.wrapping_add(1);
    if last >= RUN_MASK {
        op = put_len(op, dend, last - RUN_MASK);
    }
    let at = op.addr() - d0.addr();
    dst[at..at + last].copy_from_slice(&src[n - last..]);
    at + last
}

/// The re-probe's candidate when ip - 2 and ip share a slot: out of line so that the common
/// case is a predicted branch, not a conditional move on the critical path.
#[cold]
#[inline(never)]
fn same_slot(p2: *const u8) -> *const u8 {
    p2
}

/// Writes a length beyond the 4 bits of a token at `op` (255s, then the remainder) and
/// returns the pointer after it. `dend` is the end of the destination (debug builds check).
#[inline(always)]
fn put_len(mut op: *mut u8, dend: *mut u8, mut n: usize) -> *mut u8 {
    while n >= 255 {
        debug_assert!(op < dend);
        // SAFETY: part of the output, within the worst-case bound (see `compress_small`).
        unsafe { *op = 255 };
        op = op.wrapping_add(1);
        n -= 255;
    }
    debug_assert!(op < dend);
    // SAFETY: as above.
    unsafe { *op = n as u8 };
    let _ = dend;
    op.wrapping_add(1)
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

/// Registers this thread's table slot (see [`crate::register_thread`]).
pub(crate) fn register_thread() {
    let _ = STATE.try_with(|_| ());
}

/// Whether this thread's table was made (`None` during the thread's teardown).
#[cfg(test)]
pub(crate) fn has_state() -> Option<bool> {
    STATE.try_with(|s| s.borrow().is_some()).ok()
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

    /// Deterministic test input of `len` bytes: literals from a small or a full alphabet,
    /// byte runs and copies from earlier offsets (short and long), mixed by `seed`.
    fn generated(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut v: Vec<u8> = Vec::with_capacity(len + 64);
        while v.len() < len {
            let r = next();
            let k = 1 + (r >> 8) as usize % if r & 0x100 != 0 { 8 } else { 40 };
            match r % 5 {
                0 => v.extend((0..k).map(|_| (next() % 4) as u8)),
                1 => v.extend((0..k).map(|_| next() as u8)),
                2 => v.extend(std::iter::repeat_n((r >> 40) as u8 & 3, k)),
                _ if !v.is_empty() => {
                    let back =
                        1 + (next() as usize) % v.len().min(if r & 8 != 0 { 16 } else { 70_000 });
                    let from = v.len() - back;
                    for i in 0..k {
                        let b = v[from + i];
                        v.push(b);
                    }
                }
                _ => v.push(r as u8),
            }
        }
        v.truncate(len);
        v
    }

    /// The pointer-based fast path gives the reference implementation's bytes (the generic
    /// loop with [`Small`] positions, fresh table) on every input size up to 4096 and more,
    /// with a table reused across all of them (so every epoch and its wrap-around are hit).
    #[test]
    fn fast_path_equals_reference() {
        let mut reused = Table::new_boxed();
        let (sizes, seeds): (Vec<usize>, u64) = if cfg!(miri) {
            ((0..80).chain([255, 300, 1000]).collect(), 1)
        } else {
            ((0..=4100).chain([8191, 20_000, 65_546]).collect(), 3)
        };
        for len in sizes {
            for seed in 0..seeds {
                let src = generated(len, seed * 1_000_003 + len as u64);
                let mut a = vec![0u8; bound(len)];
                let na = compress_exact(&src, &mut a, &mut reused);
                let mut fresh = Table::new_boxed();
                let mut b = vec![0u8; bound(len)];
                let nb = if !(MIN_LENGTH..LIMIT_64K).contains(&len) {
                    compress_exact(&src, &mut b, &mut fresh)
                } else {
                    compress_with(
                        &src,
                        &mut b,
                        &mut Small {
                            slots: &mut fresh.small,
                            epoch: 0,
                        },
                    )
                };
                assert_eq!(a[..na], b[..nb], "input of {len} bytes, seed {seed}");
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
