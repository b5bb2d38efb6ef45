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
//! Bounds-checked LZO1X decompressors for `lzo` and `lzo-rle` streams.
//!
//! Two implementations of one specification:
//! - [`decompress_reference`]: safe Rust only; every read and write is a checked slice
//!   access. The oracle of the differential tests (and fuzz target).
//! - `fast::decompress`: the same checks done once per instruction as explicit length tests,
//!   then raw-pointer copies 8/16 bytes at a time (over-copying into room that was checked to
//!   exist), as the kernel's x86-64 build does. This is what [`decompress_safe`] runs.
//!
//! Both reject exactly the same streams and write the same bytes up to the returned length
//! (tests/decoder_robustness.rs checks that on random and corrupted input; the unit tests below
//! run the pointer code under Miri: `cargo +nightly miri test -p uzswap-compress --lib lzo`).

/// Why a stream was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LzoError {
    /// The stream ends in the middle of an instruction or lacks the end marker.
    InputOverrun,
    /// The output would not fit in the destination.
    OutputOverrun,
    /// A match refers to data before the start of the output.
    LookbehindOverrun,
    /// Bytes follow the end marker.
    InputNotConsumed,
    /// A malformed instruction (bad end marker, absurd length).
    Malformed,
}

impl LzoError {
    /// A short description of the cause, for error messages.
    pub fn reason(self) -> &'static str {
        match self {
            LzoError::InputOverrun => "truncated stream",
            LzoError::OutputOverrun => "output larger than the destination",
            LzoError::LookbehindOverrun => "match distance before the start of the output",
            LzoError::InputNotConsumed => "trailing bytes after the end marker",
            LzoError::Malformed => "malformed instruction",
        }
    }
}

const MIN_ZERO_RUN: usize = 4;

struct Input<'a> {
    s: &'a [u8],
    ip: usize,
}

impl Input<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Result<usize, LzoError> {
        let b = *self.s.get(self.ip).ok_or(LzoError::InputOverrun)?;
        self.ip += 1;
        Ok(b as usize)
    }

    #[inline(always)]
    fn le16(&mut self) -> Result<usize, LzoError> {
        let b = self
            .s
            .get(self.ip..self.ip + 2)
            .ok_or(LzoError::InputOverrun)?;
        self.ip += 2;
        Ok(b[0] as usize | (b[1] as usize) << 8)
    }

    /// A long count: each zero byte adds 255, the first non-zero byte ends it; `base` is the
    /// value the instruction's own bits stand for when they are zero.
    #[inline(never)]
    fn long_count(&mut self, base: usize) -> Result<usize, LzoError> {
        let start = self.ip;
        let rest = self.s.get(start..).ok_or(LzoError::InputOverrun)?;
        let zeros = rest
            .iter()
            .position(|&b| b != 0)
            .ok_or(LzoError::InputOverrun)?;
        self.ip = start + zeros + 1;
        let last = rest[zeros] as usize;
        zeros
            .checked_mul(255)
            .and_then(|z| z.checked_add(base + last))
            .ok_or(LzoError::Malformed)
    }
}

/// Copies `n` literals from the input to the output.
#[inline(always)]
fn copy_literals(
    inp: &mut Input<'_>,
    out: &mut [u8],
    op: &mut usize,
    n: usize,
) -> Result<(), LzoError> {
    let src = inp
        .s
        .get(inp.ip..inp.ip + n)
        .ok_or(LzoError::InputOverrun)?;
    let dst = out.get_mut(*op..*op + n).ok_or(LzoError::OutputOverrun)?;
    dst.copy_from_slice(src);
    inp.ip += n;
    *op += n;
    Ok(())
}

/// Copies `n` bytes from `dist` bytes back in the output (the regions may overlap: a short
/// distance repeats a pattern).
#[inline(always)]
fn copy_match(out: &mut [u8], op: usize, dist: usize, n: usize) -> Result<(), LzoError> {
    if dist > op {
        return Err(LzoError::LookbehindOverrun);
    }
    let end = op.checked_add(n).ok_or(LzoError::OutputOverrun)?;
    if end > out.len() {
        return Err(LzoError::OutputOverrun);
    }
    let mut from = op - dist;
    let mut to = op;
    if dist >= 8 && end + 8 <= out.len() {
        // Word copies: each 8-byte load happens before the store that could overlap it, and
        // dist >= 8 means a store never clobbers bytes a later load of the same step needs.
        // The last word may write up to 7 bytes past `end`, inside `out` (checked above); they
        // are overwritten by later output or lie beyond the reported length.
        while to < end {
            let w = u64::from_ne_bytes(out[from..from + 8].try_into().unwrap());
            out[to..to + 8].copy_from_slice(&w.to_ne_bytes());
            from += 8;
            to += 8;
        }
    } else if dist >= n {
        out.copy_within(from..from + n, to);
    } else {
        // Overlapping short pattern: byte by byte, as the format defines.
        while to < end {
            out[to] = out[from];
            from += 1;
            to += 1;
        }
    }
    Ok(())
}

/// Decompresses one LZO1X stream (plain or lzo-rle, told apart by its header) into `dst` and
/// returns the number of bytes written. Bytes of `dst` past that length may be overwritten.
pub fn decompress_safe(src: &[u8], dst: &mut [u8]) -> Result<usize, LzoError> {
    fast::decompress(src, dst)
}

/// The safe-Rust-only decoder: same result as [`decompress_safe`], slower.
pub fn decompress_reference(src: &[u8], dst: &mut [u8]) -> Result<usize, LzoError> {
    if src.len() < 3 {
        return Err(LzoError::InputOverrun);
    }
    let mut inp = Input { s: src, ip: 0 };
    let out = dst;
    let mut op = 0usize;

    // lzo-rle header: plain LZO never starts with 17.
    let mut rle = false;
    if src.len() >= 5 && src[0] == 17 {
        rle = src[1] != 0;
        inp.ip = 2;
    }

    // `state` is the number of literals that followed the last instruction (4 = a literal run
    // of 4 or more); it selects how a following 0..15 instruction byte is read.
    let mut state: usize;
    let first = inp.byte()?;
    if first > 17 {
        let t = first - 17;
        copy_literals(&mut inp, out, &mut op, t)?;
        state = if t < 4 { t } else { 4 };
    } else {
        inp.ip -= 1;
        state = 0;
    }

    loop {
        let t = inp.byte()?;
        let (dist, len, next);
        if t < 16 {
            if state == 0 {
                // Literal run of 4 or more.
                let n = if t == 0 { inp.long_count(15)? } else { t } + 3;
                copy_literals(&mut inp, out, &mut op, n)?;
                state = 4;
                continue;
            }
            let d = inp.byte()?;
            next = t & 3;
            if state != 4 {
                // M1: 2 bytes within 1 KiB, right after 1..3 literals.
                dist = 1 + (t >> 2) + (d << 2);
                len = 2;
            } else {
                // After a long literal run: 3 bytes at distance 2049..3072.
                dist = 1 + 0x800 + (t >> 2) + (d << 2);
                len = 3;
            }
        } else if t >= 64 {
            // M2: 3..8 bytes within 2 KiB.
            let d = inp.byte()?;
            next = t & 3;
            dist = 1 + ((t >> 2) & 7) + (d << 3);
            len = (t >> 5) + 1;
        } else if t >= 32 {
            // M3: any length within 16 KiB.
            let mut l = t & 31;
            if l == 0 {
                l = inp.long_count(31)?;
            }
            len = l + 2;
            let d = inp.le16()?;
            dist = 1 + (d >> 2);
            next = d & 3;
        } else {
            // M4 (16..31): 16..48 KiB, the end marker, or an lzo-rle zero run.
            let peek = src.get(inp.ip..inp.ip + 2).ok_or(LzoError::InputOverrun)?;
            let d16 = peek[0] as usize | (peek[1] as usize) << 8;
            if rle && (d16 & 0xfffc) == 0xfffc && (t & 0xf8) == 0x18 {
                let hi = *src.get(inp.ip + 2).ok_or(LzoError::InputOverrun)? as usize;
                inp.ip += 3;
                let n = ((t & 7) | (hi << 3)) + MIN_ZERO_RUN;
                let z = out.get_mut(op..op + n).ok_or(LzoError::OutputOverrun)?;
                z.fill(0);
                op += n;
                state = d16 & 3;
                copy_literals(&mut inp, out, &mut op, state)?;
                continue;
            }
            let mut l = t & 7;
            if l == 0 {
                l = inp.long_count(7)?;
            }
            len = l + 2;
            let d = inp.le16()?;
            let far = (t & 8) << 11;
            let back = far + (d >> 2);
            next = d & 3;
            if back == 0 {
                // End marker: must be the 3-byte form and the last bytes of the stream.
                if len != 3 {
                    return Err(LzoError::Malformed);
                }
                if inp.ip != src.len() {
                    return Err(LzoError::InputNotConsumed);
                }
                return Ok(op);
            }
            dist = back + 0x4000;
        }
        copy_match(out, op, dist, len)?;
        op += len;
        state = next;
        copy_literals(&mut inp, out, &mut op, next)?;
    }
}

mod fast {
    //! The pointer-copy decoder. Invariants kept at every step: `ip <= in_len` and
    //! `op <= out_len`; every access through `s`/`d` is preceded by a length test on those
    //! indices (named `have_ip`/`have_op` after the kernel's macros), and every over-copy is
    //! covered by such a test that includes the extra bytes.

    use super::{LzoError, MIN_ZERO_RUN};
    use std::ptr;

    /// Copies 8 bytes; the ranges may overlap only if `dst >= src + 8` or `dst + 8 <= src`.
    ///
    /// # Safety
    /// `src` readable and `dst` writable for 8 bytes.
    #[inline(always)]
    unsafe fn copy8(dst: *mut u8, src: *const u8) {
        // SAFETY: the caller guarantees both ranges; unaligned access is explicit.
        unsafe { ptr::write_unaligned(dst.cast::<u64>(), ptr::read_unaligned(src.cast::<u64>())) }
    }

    /// Copies 16 bytes; the ranges must not overlap.
    ///
    /// # Safety
    /// `src` readable and `dst` writable for 16 bytes, the two ranges disjoint.
    #[inline(always)]
    unsafe fn copy16(dst: *mut u8, src: *const u8) {
        // SAFETY: the caller guarantees both ranges; unaligned access is explicit.
        unsafe { ptr::write_unaligned(dst.cast::<u128>(), ptr::read_unaligned(src.cast::<u128>())) }
    }

    pub(super) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, LzoError> {
        let in_len = src.len();
        let out_len = dst.len();
        let s = src.as_ptr();
        let d = dst.as_mut_ptr();
        let mut ip = 0usize;
        let mut op = 0usize;
        macro_rules! have_ip {
            ($n:expr) => {
                in_len - ip >= $n
            };
        }
        macro_rules! have_op {
            ($n:expr) => {
                out_len - op >= $n
            };
        }
        macro_rules! byte {
            () => {{
                if ip >= in_len {
                    return Err(LzoError::InputOverrun);
                }
                // SAFETY: ip < in_len.
                let b = unsafe { *s.add(ip) } as usize;
                ip += 1;
                b
            }};
        }
        macro_rules! le16 {
            () => {{
                if !have_ip!(2) {
                    return Err(LzoError::InputOverrun);
                }
                // SAFETY: ip + 2 <= in_len.
                let v = unsafe { ptr::read_unaligned(s.add(ip).cast::<u16>()) }.to_le() as usize;
                ip += 2;
                v
            }};
        }
        // Literal copy of `n` bytes: 16 at a time when both sides have 15 bytes of slack.
        macro_rules! literals {
            ($n:expr) => {{
                let n: usize = $n;
                if have_ip!(n + 15) && have_op!(n + 15) {
                    let mut k = 0;
                    while k < n {
                        // SAFETY: k < n, so k + 16 <= n + 15 bytes fit on both sides (tested).
                        // Input and output are distinct slices.
                        unsafe { copy16(d.add(op + k), s.add(ip + k)) };
                        k += 16;
                    }
                } else {
                    if !have_ip!(n) {
                        return Err(LzoError::InputOverrun);
                    }
                    if !have_op!(n) {
                        return Err(LzoError::OutputOverrun);
                    }
                    // SAFETY: n bytes exist on both sides (tested); distinct slices.
                    unsafe { ptr::copy_nonoverlapping(s.add(ip), d.add(op), n) };
                }
                ip += n;
                op += n;
            }};
        }
        // The 0..3 literals after a match: one 4-byte copy when there is room.
        macro_rules! trailing {
            ($n:expr) => {{
                let n: usize = $n;
                if have_ip!(4) && have_op!(4) {
                    // SAFETY: 4 bytes readable at ip and writable at op (tested); n <= 3.
                    unsafe {
                        ptr::write_unaligned(
                            d.add(op).cast::<u32>(),
                            ptr::read_unaligned(s.add(ip).cast::<u32>()),
                        )
                    };
                    ip += n;
                    op += n;
                } else {
                    literals!(n);
                }
            }};
        }

        if in_len < 3 {
            return Err(LzoError::InputOverrun);
        }
        let mut rle = false;
        if in_len >= 5 && src[0] == 17 {
            rle = src[1] != 0;
            ip = 2;
        }
        let mut state: usize;
        let first = byte!();
        if first > 17 {
            let t = first - 17;
            literals!(t);
            state = if t < 4 { t } else { 4 };
        } else {
            ip -= 1;
            state = 0;
        }

        loop {
            let t = byte!();
            let (dist, len, next);
            if t < 16 {
                if state == 0 {
                    let n = if t == 0 {
                        long_count(src, &mut ip, 15)?
                    } else {
                        t
                    } + 3;
                    literals!(n);
                    state = 4;
                    continue;
                }
                let b = byte!();
                next = t & 3;
                if state != 4 {
                    dist = 1 + (t >> 2) + (b << 2);
                    len = 2;
                } else {
                    dist = 1 + 0x800 + (t >> 2) + (b << 2);
                    len = 3;
                }
            } else if t >= 64 {
                let b = byte!();
                next = t & 3;
                dist = 1 + ((t >> 2) & 7) + (b << 3);
                len = (t >> 5) + 1;
            } else if t >= 32 {
                let mut l = t & 31;
                if l == 0 {
                    l = long_count(src, &mut ip, 31)?;
                }
                len = l + 2;
                let v = le16!();
                dist = 1 + (v >> 2);
                next = v & 3;
            } else {
                if !have_ip!(2) {
                    return Err(LzoError::InputOverrun);
                }
                let d16 = src[ip] as usize | (src[ip + 1] as usize) << 8;
                if rle && (d16 & 0xfffc) == 0xfffc && (t & 0xf8) == 0x18 {
                    if !have_ip!(3) {
                        return Err(LzoError::InputOverrun);
                    }
                    let n = ((t & 7) | ((src[ip + 2] as usize) << 3)) + MIN_ZERO_RUN;
                    ip += 3;
                    if !have_op!(n) {
                        return Err(LzoError::OutputOverrun);
                    }
                    // SAFETY: n bytes writable at op (tested).
                    unsafe { ptr::write_bytes(d.add(op), 0, n) };
                    op += n;
                    state = d16 & 3;
                    trailing!(state);
                    continue;
                }
                let mut l = t & 7;
                if l == 0 {
                    l = long_count(src, &mut ip, 7)?;
                }
                len = l + 2;
                let v = le16!();
                let back = ((t & 8) << 11) + (v >> 2);
                next = v & 3;
                if back == 0 {
                    if len != 3 {
                        return Err(LzoError::Malformed);
                    }
                    if ip != in_len {
                        return Err(LzoError::InputNotConsumed);
                    }
                    return Ok(op);
                }
                dist = back + 0x4000;
            }

            // The match: `len` bytes from `dist` back.
            if dist > op {
                return Err(LzoError::LookbehindOverrun);
            }
            if dist >= 8 && len <= 8 && have_op!(15) {
                // The short match (every M2 is 3..=8 bytes): one 8-byte copy.
                // SAFETY: source op - dist .. + 8 ends at or below op (dist >= 8) and starts at
                // >= 0 (dist <= op); destination op .. + 8 <= op + 15 <= out_len (tested).
                unsafe { copy8(d.add(op), d.add(op - dist)) };
                op += len;
            } else if dist >= 16 && have_op!(len + 15) {
                // Source and destination 16 bytes apart or more: 16-byte loads and stores,
                // each load complete before its store.
                let mut k = 0;
                while k < len {
                    // SAFETY: source op - dist + k .. + 16 ends at or below op + k (dist >= 16)
                    // and starts at >= 0; destination op + k + 16 <= op + len + 15 <= out_len
                    // (tested).
                    unsafe { copy16(d.add(op + k), d.add(op + k - dist)) };
                    k += 16;
                }
                op += len;
            } else if dist >= 8 && have_op!(len + 15) {
                let mut k = 0;
                while k < len {
                    // SAFETY: source op - dist + k .. + 16 lies below op + k + 16 - 8 and
                    // starts at >= 0 (dist <= op); destination op + k + 16 <= op + len + 15
                    // (tested). dist >= 8: each 8-byte load is complete before its store and
                    // never reads bytes that store writes.
                    unsafe {
                        copy8(d.add(op + k), d.add(op + k - dist));
                        copy8(d.add(op + k + 8), d.add(op + k + 8 - dist));
                    }
                    k += 16;
                }
                op += len;
            } else if have_op!(len + 15) {
                // Short distance: the output from op - dist on repeats with period `dist`, so
                // copying from the first multiple of `dist` that is >= 8 (`far`) gives the same
                // bytes, 8 at a time. Bytes whose source at distance `far` would lie before
                // op - dist (the first far - dist < 8 of them) are copied singly first.
                // dist * ceil(8 / dist) for dist 1..=7, without a division.
                const FAR: [u8; 8] = [0, 8, 8, 9, 8, 10, 12, 14];
                let far = FAR[dist & 7] as usize;
                let head = (far - dist).min(len);
                for k in 0..head {
                    // SAFETY: op + k < op + len <= out_len and op + k - dist >= 0.
                    unsafe { *d.add(op + k) = *d.add(op + k - dist) };
                }
                let mut k = head;
                while k < len {
                    // SAFETY: k >= far - dist, so the source op + k - far >= op - dist >= 0;
                    // the destination ends at op + k + 8 <= op + len + 7 <= out_len (tested);
                    // far >= 8, so source and destination of one copy do not overlap.
                    unsafe { copy8(d.add(op + k), d.add(op + k - far)) };
                    k += 8;
                }
                op += len;
            } else {
                if !have_op!(len) {
                    return Err(LzoError::OutputOverrun);
                }
                // Near the end of the buffer: bytewise.
                for k in 0..len {
                    // SAFETY: op + k < op + len <= out_len and op + k - dist >= 0.
                    unsafe { *d.add(op + k) = *d.add(op + k - dist) };
                }
                op += len;
            }
            state = next;
            trailing!(next);
        }
    }

    /// A long count starting at `*ip` (see `Input::long_count`).
    #[inline(never)]
    fn long_count(src: &[u8], ip: &mut usize, base: usize) -> Result<usize, LzoError> {
        let rest = src.get(*ip..).ok_or(LzoError::InputOverrun)?;
        let zeros = rest
            .iter()
            .position(|&b| b != 0)
            .ok_or(LzoError::InputOverrun)?;
        *ip += zeros + 1;
        zeros
            .checked_mul(255)
            .and_then(|z| z.checked_add(base + rest[zeros] as usize))
            .ok_or(LzoError::Malformed)
    }
}
