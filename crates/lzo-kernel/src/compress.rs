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
//! The kernel's LZO1X-1 compressor (`lzo` and `lzo-rle`), re-implemented for identical output.
//!
//! Every choice below that affects the output (where the scan starts, the skip heuristic, the
//! hash function, when the table is cleared, how a match is extended and where that stops, which
//! instruction codes a match, the zero-run limits) follows the kernel's x86-64 build, because the
//! estimator predicts zram/zswap memory from these sizes. Input reads in the scan loops are
//! unchecked where the loop's own `ip < ip_end` test proves them (the last 20 input bytes are
//! never scanned); output writes are unchecked against the one worst-case test at the start
//! (see [`Out`]). Both keep bounds checks out of the hot loop and the buffers' lengths out of
//! its registers. With checked slices the compressor ran 5.5 % slower than a gcc -O2 build of
//! the kernel's C on the same pages (identical output); now 1-2 % (BENCHMARKS.md).

use super::{Dict, Variant, D_BITS, D_SIZE};

const M2_MAX_LEN: usize = 8;
const M3_MAX_LEN: usize = 33;
const M4_MAX_LEN: usize = 9;
const M2_MAX_OFFSET: usize = 0x0800;
const M3_MAX_OFFSET: usize = 0x4000;
const M3_MARKER: u8 = 32;
const M4_MARKER: u8 = 16;
/// Largest M4 distance of plain LZO (0xbfff) and of lzo-rle (0xbffe: 0xbfff marks a zero run).
const M4_MAX_OFFSET_V0: usize = 0xbfff;
const M4_MAX_OFFSET_V1: usize = 0xbffe;
const MIN_ZERO_RUN: usize = 4;
const MAX_ZERO_RUN: usize = 2047 + MIN_ZERO_RUN;
/// Multiplier of the 4-byte hash.
const HASH_MUL: u32 = 0x1824_429d;

/// Little-endian u32 at `s[i..i + 4]` without a bounds test (debug builds assert it): these
/// loads sit in the per-byte scan loop, and the loop's own `ip < ip_end` test already proves
/// them. Miri runs this exact code in the unit tests.
///
/// # Safety
/// `i + 4 <= s.len()`.
#[inline(always)]
unsafe fn le32(s: &[u8], i: usize) -> u32 {
    debug_assert!(i + 4 <= s.len());
    // SAFETY: the caller guarantees i + 4 <= s.len(); the read is explicitly unaligned.
    unsafe { u32::from_le(s.as_ptr().add(i).cast::<u32>().read_unaligned()) }
}

/// Little-endian u64 at `s[i..i + 8]`, unchecked like [`le32`].
///
/// # Safety
/// `i + 8 <= s.len()`.
#[inline(always)]
unsafe fn le64(s: &[u8], i: usize) -> u64 {
    debug_assert!(i + 8 <= s.len());
    // SAFETY: the caller guarantees i + 8 <= s.len(); the read is explicitly unaligned.
    unsafe { u64::from_le(s.as_ptr().add(i).cast::<u64>().read_unaligned()) }
}

/// Checked little-endian u64 (cold paths).
#[inline(always)]
fn le64_checked(s: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(s[i..i + 8].try_into().unwrap())
}

/// Output cursor over the caller's buffer. `last_state` is where the two "literals follow"
/// bits of the previous instruction live, as a distance back from the end (2 after a match, 3
/// after a zero run).
///
/// Writes are unchecked (a raw pointer, so the buffer's length is not live in the scan loop):
/// `compress_exact` asserts `out.len() >= worst_compressed_len(src.len())` once, and the output
/// never comes near that. After consuming `k` input bytes at most `k + k / 255 + 8` bytes are
/// written (a match or zero run emits fewer bytes than it consumes, a literal run one header
/// byte plus one per 255), and a literal copy writes at most 15 bytes beyond that, while the
/// bound gives `n + n / 16 + 69`. `cap` re-checks this in debug builds.
struct Out {
    p: *mut u8,
    op: usize,
    last_state: usize,
    #[cfg(debug_assertions)]
    cap: usize,
}

impl Out {
    #[inline(always)]
    fn at(&mut self, i: usize, len: usize) -> *mut u8 {
        #[cfg(debug_assertions)]
        assert!(i + len <= self.cap, "output bound");
        let _ = len;
        // SAFETY: i + len <= out.len() (see the type's docs); p is out's start.
        unsafe { self.p.add(i) }
    }

    #[inline(always)]
    fn push(&mut self, b: u8) {
        let d = self.at(self.op, 1);
        // SAFETY: in bounds (see `at`).
        unsafe { d.write(b) };
        self.op += 1;
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let d = self.at(self.op, bytes.len());
        // SAFETY: in bounds (see `at`); `bytes` is not in the output buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), d, bytes.len()) };
        self.op += bytes.len();
    }

    /// A length beyond what an instruction's own bits hold: zero bytes for each 255, then the
    /// remainder (which is never 0, so the decoder knows where the count stops).
    #[inline(always)]
    fn push_long_count(&mut self, mut n: usize) {
        while n > 255 {
            n -= 255;
            self.push(0);
        }
        self.push(n as u8);
    }

    /// Copies `src[from..from + n]` to the output in 16-byte blocks, the last one running up
    /// to 15 bytes past the run on both sides (what follows overwrites them). Only for runs
    /// that end at or before the scan limit, 20 bytes before the end of `src`.
    #[inline(always)]
    fn put_from_mid(&mut self, src: &[u8], from: usize, n: usize) {
        debug_assert!(n > 0 && from + n + 15 <= src.len());
        let (mut f, mut o) = (from, self.op);
        let end = from + n;
        // The first block unconditionally: most runs are short, and a loop whose trip count
        // varies with the run length mispredicts its exit.
        let d = self.at(o, 16);
        // SAFETY: as in the loop below.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(f), d, 16) };
        f += 16;
        o += 16;
        while f < end {
            let d = self.at(o, 16);
            // SAFETY: f + 16 <= end + 15 <= src.len() (asserted above, by the caller's scan
            // limit); the destination is in bounds (see `at`).
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(f), d, 16) };
            f += 16;
            o += 16;
        }
        self.op += n;
    }

    /// Copies `src[from..from + n]` exactly (the last literals of the input).
    #[inline(always)]
    fn put_from_exact(&mut self, src: &[u8], from: usize, n: usize) {
        let s = &src[from..from + n];
        self.put(s);
    }

    /// Codes a literal run's header, following the previous instruction.
    #[inline(always)]
    fn literal_header(&mut self, t: usize) {
        if t <= 3 {
            // Up to 3 literals ride in the previous instruction's state bits.
            let d = self.at(self.op - self.last_state, 1);
            // SAFETY: an earlier output byte (see `at`).
            unsafe { *d |= t as u8 };
        } else if t <= 18 {
            self.push((t - 3) as u8);
        } else {
            self.push(0);
            self.push_long_count(t - 18);
        }
    }
}

/// Compresses `src` exactly as the kernel's `lzo1x_1_compress` (`Variant::Lzo`) or
/// `lzorle1x_1_compress` (`Variant::LzoRle`) does, returning the output length.
///
/// # Panics
/// If `out` is shorter than [`worst_compressed_len(src.len())`](super::worst_compressed_len).
pub fn compress_exact(src: &[u8], out: &mut [u8], variant: Variant, dict: &mut Dict) -> usize {
    assert!(out.len() >= super::worst_compressed_len(src.len()));
    let rle = variant == Variant::LzoRle;
    let mut o = Out {
        p: out.as_mut_ptr(),
        op: 0,
        last_state: 2,
        #[cfg(debug_assertions)]
        cap: out.len(),
    };
    let m4_max_offset = if rle {
        o.push(17);
        o.push(1);
        M4_MAX_OFFSET_V1
    } else {
        M4_MAX_OFFSET_V0
    };
    let data_start = o.op;

    // Inputs longer than the largest M4 distance are cut into independent chunks (each with a
    // cleared table); literals pending at a chunk's end carry into the next one.
    let mut pos = 0usize;
    let mut left = src.len();
    let mut pending = 0usize;
    while left > 20 {
        let ll = left.min(m4_max_offset + 1);
        // The kernel clears the table here. Offsets stored for this chunk are below `ll`; they
        // go in above `epoch`, and earlier chunks' slots (below it) read as cleared ones.
        if dict.epoch as usize + ll > u16::MAX as usize + 1 {
            dict.slots.fill(0);
            dict.epoch = 0;
        }
        let epoch = dict.epoch;
        // Monomorphised per variant so the scan loop carries no run-time variant test.
        pending = if rle {
            compress_chunk::<true>(src, pos, ll, &mut o, pending, &mut dict.slots, epoch)
        } else {
            compress_chunk::<false>(src, pos, ll, &mut o, pending, &mut dict.slots, epoch)
        };
        dict.epoch = epoch + ll as u32;
        pos += ll;
        left -= ll;
    }
    pending += left;

    if pending > 0 {
        let from = src.len() - pending;
        if o.op == data_start && pending <= 238 {
            // A stream that starts with literals codes their count in the first byte.
            o.push((17 + pending) as u8);
        } else {
            o.literal_header(pending);
        }
        o.put_from_exact(src, from, pending);
    }
    // End of stream: M4 with distance 0.
    o.put(&[M4_MARKER | 1, 0, 0]);
    o.op
}

/// One chunk `src[base..base + len]`. `ti` literals before `base` are still pending. Returns the
/// number of literals pending at the chunk's end. `dict` holds `epoch + offset` (see [`Dict`]).
#[inline(always)]
fn compress_chunk<const RLE: bool>(
    src: &[u8],
    base: usize,
    len: usize,
    o: &mut Out,
    mut ti: usize,
    dict: &mut [u16; D_SIZE],
    epoch: u32,
) -> usize {
    let in_end = base + len;
    // Scanning stops 20 bytes before the end: the word compares below may then read 16 bytes
    // ahead without a bounds test of their own (and the tail goes out as literals).
    let ip_end = in_end - 20;
    let mut ip = base + 4usize.saturating_sub(ti);
    let mut ii = base;

    'literal: loop {
        // No match at ip: move on, faster the longer the literal run has grown.
        ip += 1 + ((ip - ii) >> 5);
        loop {
            if ip >= ip_end {
                break 'literal;
            }
            // SAFETY: ip < ip_end = in_end - 20 and in_end <= src.len().
            let dv = unsafe { le32(src, ip) };
            let mut m_pos = 0usize;
            let mut run = 0usize;
            if RLE && dv == 0 {
                run = zero_run_len(src, ip, ip_end.min(ip + MAX_ZERO_RUN + 1));
            } else {
                let h = ((dv.wrapping_mul(HASH_MUL) >> (32 - D_BITS)) as usize) & (D_SIZE - 1);
                // A slot below the epoch is an earlier input's: it reads as a cleared one (0).
                m_pos = base + (dict[h] as u32).saturating_sub(epoch) as usize;
                dict[h] = (epoch as usize + ip - base) as u16;
                // SAFETY: m_pos <= ip - 1 (slots at or above the epoch are earlier positions of
                // this chunk; the others read as 0), so m_pos + 4 < in_end.
                if dv != unsafe { le32(src, m_pos) } {
                    continue 'literal;
                }
            }

            // Flush the literals before the match (including any carried from the previous
            // chunk).
            let lit_start = ii - ti;
            ti = 0;
            if ip > lit_start {
                o.literal_header(ip - lit_start);
                o.put_from_mid(src, lit_start, ip - lit_start);
            }

            if run != 0 {
                ip += run;
                let r = (run - MIN_ZERO_RUN) as u32;
                let word = (r << 21) | 0x00ff_fc18 | (r & 7);
                o.put(&word.to_le_bytes());
                o.last_state = 3;
                ii = ip;
                continue;
            }

            // Extend the 4-byte match 8 bytes at a time. As in the kernel, once the compared
            // position reaches ip_end the length is taken as is (not refined to the byte).
            let mut m_len = 4usize;
            // SAFETY: (both loads here and in the loop below) a load at ip + m_len happens only
            // while the previous ip + m_len was < ip_end, so it ends before ip_end + 16 < in_end;
            // the m_pos side is below the ip side.
            let mut v = unsafe { le64(src, ip + m_len) ^ le64(src, m_pos + m_len) };
            let mut capped = false;
            if v == 0 {
                loop {
                    m_len += 8;
                    // SAFETY: see above.
                    v = unsafe { le64(src, ip + m_len) ^ le64(src, m_pos + m_len) };
                    if ip + m_len >= ip_end {
                        capped = true;
                        break;
                    }
                    if v != 0 {
                        break;
                    }
                }
            }
            if !capped {
                m_len += (v.trailing_zeros() / 8) as usize;
            }

            let mut m_off = ip - m_pos;
            ip += m_len;
            if m_len <= M2_MAX_LEN && m_off <= M2_MAX_OFFSET {
                m_off -= 1;
                o.push((((m_len - 1) << 5) | ((m_off & 7) << 2)) as u8);
                o.push((m_off >> 3) as u8);
            } else if m_off <= M3_MAX_OFFSET {
                m_off -= 1;
                if m_len <= M3_MAX_LEN {
                    o.push(M3_MARKER | (m_len - 2) as u8);
                } else {
                    o.push(M3_MARKER);
                    o.push_long_count(m_len - M3_MAX_LEN);
                }
                o.push((m_off << 2) as u8);
                o.push((m_off >> 6) as u8);
            } else {
                m_off -= 0x4000;
                if RLE && (m_off & 0x403f) == 0x403f && (261..=264).contains(&m_len) {
                    // Its count byte (252..255) and distance low byte (0xfc, 0xff once 3
                    // literals follow) would read as a zero run's marker. Shorten it to 260
                    // bytes, as the kernel does; the scan resumes right after them.
                    ip -= m_len - 260;
                    m_len = 260;
                }
                let hi = ((m_off >> 11) & 8) as u8;
                if m_len <= M4_MAX_LEN {
                    o.push(M4_MARKER | hi | (m_len - 2) as u8);
                } else {
                    o.push(M4_MARKER | hi);
                    o.push_long_count(m_len - M4_MAX_LEN);
                }
                o.push((m_off << 2) as u8);
                o.push((m_off >> 6) as u8);
            }
            o.last_state = 2;
            ii = ip;
        }
    }
    in_end - (ii - ti)
}

/// Length of the zero run at `ip` (whose first 4 bytes are known to be zero), scanning no
/// further than `limit`, capped at the longest codable run. Scans 32 then 8 bytes at a time
/// like the kernel's 64-bit build; the result does not depend on the stride.
#[inline(always)]
fn zero_run_len(src: &[u8], ip: usize, limit: usize) -> usize {
    let mut ir = ip + 4;
    while ir + 32 <= limit {
        let w = le64_checked(src, ir)
            | le64_checked(src, ir + 8)
            | le64_checked(src, ir + 16)
            | le64_checked(src, ir + 24);
        if w != 0 {
            break;
        }
        ir += 32;
    }
    while ir + 8 <= limit {
        let w = le64_checked(src, ir);
        if w != 0 {
            ir += (w.trailing_zeros() / 8) as usize;
            break;
        }
        ir += 8;
    }
    while ir < limit && src[ir] == 0 {
        ir += 1;
    }
    (ir - ip).min(MAX_ZERO_RUN)
}
