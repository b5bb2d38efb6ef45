// SPDX-License-Identifier: MIT
//! The C liblz4 1.10 bundled by `lz4-sys`: the LZ4 decoder of the load path, and the reference
//! compressor (`crate::compress_liblz4`) that the Rust kernel-exact compressor (`lz4_kernel`,
//! the store path's since 2026-11-27) is measured against. One reused state per thread.
//!
//! Why liblz4 and not lz4_flex: measured on this machine (CPU time per page, see
//! docs/benchmarks/compress.md), the two tie on compression (within ±3 %, the order varying
//! between runs) and liblz4 decompresses 17-27 % faster than lz4_flex built without its
//! `safe-*` features; the load budget against zram is only ~0.4 µs per page. The reused state (`LZ4_compress_fast_extState_fastReset`)
//! gives output byte-identical to `LZ4_compress_default`; that matches the kernel's zram lz4
//! size on ~96 % of pages.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_void};

use crate::Error;

// lz4-sys builds and links liblz4 statically but does not declare the "extState" entry points.
// They are plain exported functions of lz4.c 1.10.
extern "C" {
    fn LZ4_sizeofState() -> c_int;
    fn LZ4_initStream(buffer: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_compress_fast_extState_fastReset(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        acceleration: c_int,
    ) -> c_int;
}

/// One LZ4 compression state (`LZ4_stream_t`), 8-byte aligned as liblz4 requires.
struct State {
    words: Vec<u64>,
}

impl State {
    fn new() -> State {
        // SAFETY: LZ4_sizeofState only returns a constant.
        let size = unsafe { LZ4_sizeofState() } as usize;
        let mut words = vec![0u64; size.div_ceil(8)];
        // SAFETY: `words` is `size` bytes (rounded up), 8-byte aligned and exclusively ours.
        let init = unsafe { LZ4_initStream(words.as_mut_ptr().cast(), words.len() * 8) };
        assert!(
            !init.is_null(),
            "LZ4_initStream rejected an aligned buffer of sizeofState bytes"
        );
        State { words }
    }
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// `LZ4_compressBound`.
pub(crate) fn bound(src_len: usize) -> usize {
    src_len + src_len / 255 + 16
}

pub(crate) fn compress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    // LZ4_MAX_INPUT_SIZE
    if src.len() > 0x7E00_0000 {
        return Err(Error::SrcTooLarge(src.len()));
    }
    let cap = dst.len().min(i32::MAX as usize) as c_int;
    crate::tls::with_cached(
        &STATE,
        || Ok(State::new()),
        |state| {
            // SAFETY: the state was initialised by LZ4_initStream and is only used by this
            // thread; src/dst are valid for the lengths passed (cap <= dst.len()). The
            // fastReset variant resets the table itself as needed (always for inputs of
            // >= 4 KiB).
            let n = unsafe {
                LZ4_compress_fast_extState_fastReset(
                    state.words.as_mut_ptr().cast(),
                    src.as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    src.len() as c_int,
                    cap,
                    1,
                )
            };
            if n <= 0 && !src.is_empty() {
                Err(Error::DstTooSmall {
                    available: dst.len(),
                })
            } else {
                Ok(n.max(0) as usize)
            }
        },
    )
}

pub(crate) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    if src.len() > i32::MAX as usize {
        return Err(Error::SrcTooLarge(src.len()));
    }
    let cap = dst.len().min(i32::MAX as usize) as c_int;
    // SAFETY: LZ4_decompress_safe never reads outside src[..src.len()] nor writes outside
    // dst[..cap]; it returns a negative value for malformed input.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            src.len() as c_int,
            cap,
        )
    };
    if n < 0 {
        Err(Error::Corrupt {
            algorithm: "lz4",
            reason: "malformed block or output larger than the destination",
        })
    } else {
        Ok(n as usize)
    }
}
