// SPDX-License-Identifier: MIT
//! zstd through the `zstd` crate's bulk API, one compressor per level and one decompressor per
//! thread, reused for every page.

use std::cell::RefCell;
use std::ops::RangeInclusive;

use zstd::bulk::{Compressor, Decompressor};

use crate::Error;

thread_local! {
    /// (level, compressor) pairs.
    static CCTX: RefCell<Vec<(i32, Compressor<'static>)>> = const { RefCell::new(Vec::new()) };
    static DCTX: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

pub(crate) fn level_range() -> RangeInclusive<i32> {
    zstd::compression_level_range()
}

/// `ZSTD_compressBound`.
pub(crate) fn bound(src_len: usize) -> usize {
    zstd::zstd_safe::compress_bound(src_len)
}

fn codec_err(e: std::io::Error) -> Error {
    Error::Codec {
        algorithm: "zstd",
        reason: e.to_string(),
    }
}

pub(crate) fn compress(level: i32, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    crate::tls::with_cached_keyed(
        &CCTX,
        level,
        || Compressor::new(level).map_err(codec_err),
        |c| match c.compress_to_buffer(src, dst) {
            Ok(n) => Ok(n),
            // zstd reports "Destination buffer is too small" as an io::Error; every other
            // failure with a valid level and context is impossible for in-memory buffers.
            Err(_) if dst.len() < bound(src.len()) => Err(Error::DstTooSmall {
                available: dst.len(),
            }),
            Err(e) => Err(codec_err(e)),
        },
    )
}

pub(crate) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    crate::tls::with_cached(
        &DCTX,
        || Decompressor::new().map_err(codec_err),
        |d| {
            d.decompress_to_buffer(src, dst)
                .map_err(|_| Error::Corrupt {
                    algorithm: "zstd",
                    reason: "malformed frame or output larger than the destination",
                })
        },
    )
}
