// SPDX-License-Identifier: MIT
//! uzswap-compress: the page compressors of uzswap.
//!
//! What it owns:
//! - [`Algorithm`], the one enum naming a compressor the way the kernel does (`lz4`, `lzo`,
//!   `lzo-rle`, `zstd`, `deflate`, the last two with an optional `:LEVEL`).
//! - [`compress`] / [`decompress`] of one buffer (normally one 4 KiB page).
//! - Per-thread reusable codec contexts: a zstd CCtx/DCtx per level, an lz4 state, zlib
//!   deflate/inflate streams per level, the LZO dictionary. They live in `thread_local!` caches
//!   inside each codec module, are created on a thread's first use of that codec and are never
//!   allocated per page.
//! - `lzo` and `lzo-rle` through the crate `uzswap-lzo` (re-exported as [`lzo`]): a kernel-exact
//!   LZO1X-1 / LZO-RLE compressor and a bounds-checked LZO1X decompressor in Rust. That crate
//!   follows the kernel's `lib/lzo` closely and is GPL-2.0-only like it, so it is used behind
//!   the cargo feature `kernel-lzo` (on by default). Without the feature this crate is MIT
//!   only and `lzo`/`lzo-rle` give [`Error::NotBuiltIn`] (docs/licensing.md). "Kernel-exact"
//!   means the same compressed bytes, hence the same size per page, as the kernel's `lib/lzo`
//!   on x86-64; the estimator relies on it.
//! - `lz4`: a Rust copy of the kernel's older LZ4 rules (module `lz4_kernel`), so sizes are the
//!   kernel's for every built-in compressor ([`compress_kernel_exact`] is [`compress`]). Its
//!   raw-pointer fast path takes 0.83-0.95x the time of liblz4 1.10, which the store path used
//!   until 2026-11-27 and which stays as the reference ([`compress_liblz4`]); liblz4 still
//!   decodes (module `lz4`).
//!
//! Verified per page against zram0 (crates/conformance/tests/compress_sizes_match_zram.rs): lzo,
//! lzo-rle and lz4 match on 100 % of ~2000 real pages; liblz4 1.10's compressor on ~95.7 %.
//!
//! Data layout: stateless API; each codec module keeps its thread-local context cache
//! (`RefCell` inside `thread_local!`), so there is no lock anywhere in this crate and no lock
//! order. A context is borrowed for exactly one call; codecs never call each other, so the
//! `RefCell` borrows never nest.
//!
//! Decoders treat their input as hostile: corrupt or truncated input gives `Err`, never a panic
//! or an out-of-bounds access, and a successful decode reports how many bytes it wrote (callers
//! that expect a page check that it is 4096).

#![deny(missing_docs)]

use std::fmt;
use std::str::FromStr;

mod deflate;
mod lz4;
mod lz4_kernel;
mod lzo_codec;
mod tls;
mod zstd_codec;

/// The kernel-derived LZO crate (GPL-2.0-only), with the `kernel-lzo` feature.
#[cfg(feature = "kernel-lzo")]
pub use uzswap_lzo as lzo;

/// Bytes in one page: the unit everything above this crate compresses (re-exported from
/// `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;

/// A destination this large always suffices to compress one 4 KiB page with any algorithm and
/// level (the largest bound is LZO's worst case, 4096 + 4096/16 + 64 + 3 = 4419; zram uses
/// two pages for the same purpose).
pub const MAX_COMPRESSED_LEN: usize = 2 * PAGE_SIZE;

/// zstd level the kernel's crypto `zstd` uses (`ZSTD_DEF_LEVEL` in crypto/zstd.c).
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// zlib level the kernel's crypto `deflate` uses (`Z_DEFAULT_COMPRESSION`, which zlib maps to 6).
pub const DEFLATE_DEFAULT_LEVEL: u32 = 6;

/// A page compressor, named as the kernel names it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Algorithm {
    /// LZ4 as the kernel's `lib/lz4` (LZ4 1.7.x rules, acceleration 1), decoded by liblz4 1.10.
    Lz4,
    /// LZO1X-1 as the kernel's `lzo`.
    Lzo,
    /// The kernel's `lzo-rle`: LZO1X-1 with zero runs coded as one instruction.
    LzoRle,
    /// zstd at `level` (kernel default 3).
    Zstd {
        /// zstd compression level (negative: fast modes).
        level: i32,
    },
    /// Raw deflate, 2 KiB window, memLevel 9, at `level` 1..=9 (kernel default 6).
    Deflate {
        /// zlib level 1..=9.
        level: u32,
    },
}

impl Algorithm {
    /// Every algorithm once, at its kernel default level.
    pub const ALL_DEFAULTS: [Algorithm; 5] = [
        Algorithm::Lz4,
        Algorithm::Lzo,
        Algorithm::LzoRle,
        Algorithm::Zstd {
            level: ZSTD_DEFAULT_LEVEL,
        },
        Algorithm::Deflate {
            level: DEFLATE_DEFAULT_LEVEL,
        },
    ];

    /// zstd at the kernel's default level.
    pub const ZSTD: Algorithm = Algorithm::Zstd {
        level: ZSTD_DEFAULT_LEVEL,
    };
    /// deflate at the kernel's default level.
    pub const DEFLATE: Algorithm = Algorithm::Deflate {
        level: DEFLATE_DEFAULT_LEVEL,
    };

    /// The kernel's name, without level: what `/sys/block/zram0/comp_algorithm` and the zswap
    /// `compressor` parameter accept.
    pub fn kernel_name(self) -> &'static str {
        match self {
            Algorithm::Lz4 => "lz4",
            Algorithm::Lzo => "lzo",
            Algorithm::LzoRle => "lzo-rle",
            Algorithm::Zstd { .. } => "zstd",
            Algorithm::Deflate { .. } => "deflate",
        }
    }

    /// True when the level is the one the kernel uses for this name (always true for
    /// algorithms without levels).
    pub fn is_kernel_default(self) -> bool {
        match self {
            Algorithm::Zstd { level } => level == ZSTD_DEFAULT_LEVEL,
            Algorithm::Deflate { level } => level == DEFLATE_DEFAULT_LEVEL,
            _ => true,
        }
    }

    /// Whether zram on this project's kernels offers the algorithm (lzo, lzo-rle, lz4 are
    /// built in; zstd and deflate are zram backends too but not built on the reference kernel).
    pub fn zram_builtin(self) -> bool {
        matches!(self, Algorithm::Lz4 | Algorithm::Lzo | Algorithm::LzoRle)
    }

    /// Whether zswap on the reference kernel offers the algorithm.
    pub fn zswap_builtin(self) -> bool {
        matches!(
            self,
            Algorithm::Lzo | Algorithm::LzoRle | Algorithm::Deflate { .. }
        )
    }

    /// Whether this build can compress and decompress with the algorithm: everything but `lzo`
    /// and `lzo-rle`, which need the cargo feature `kernel-lzo` (on by default).
    pub fn is_built_in(self) -> bool {
        match self {
            Algorithm::Lzo | Algorithm::LzoRle => lzo_codec::BUILT_IN,
            _ => true,
        }
    }

    /// An upper bound on the compressed size of `src_len` input bytes; a destination of this
    /// size never gets [`Error::DstTooSmall`].
    pub fn max_compressed_len(self, src_len: usize) -> usize {
        match self {
            Algorithm::Lz4 => lz4::bound(src_len),
            Algorithm::Lzo | Algorithm::LzoRle => lzo_codec::worst_compressed_len(src_len),
            Algorithm::Zstd { .. } => zstd_codec::bound(src_len),
            Algorithm::Deflate { .. } => deflate::bound(src_len),
        }
    }
}

impl fmt::Display for Algorithm {
    /// The kernel name; a non-default level is appended as `:LEVEL`, so that the output
    /// parses back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Algorithm::Zstd { level } if level != ZSTD_DEFAULT_LEVEL => write!(f, "zstd:{level}"),
            Algorithm::Deflate { level } if level != DEFLATE_DEFAULT_LEVEL => {
                write!(f, "deflate:{level}")
            }
            a => f.write_str(a.kernel_name()),
        }
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (s, None),
        };
        let bad_level = |l: &str| Error::InvalidLevel {
            algorithm: name.to_string(),
            level: l.to_string(),
        };
        match (name, level) {
            ("lz4", None) => Ok(Algorithm::Lz4),
            ("lzo", None) => Ok(Algorithm::Lzo),
            ("lzo-rle", None) => Ok(Algorithm::LzoRle),
            ("zstd", None) => Ok(Algorithm::ZSTD),
            ("deflate", None) => Ok(Algorithm::DEFLATE),
            ("zstd", Some(l)) => {
                let level: i32 = l.parse().map_err(|_| bad_level(l))?;
                if level == 0 || !zstd_codec::level_range().contains(&level) {
                    return Err(bad_level(l));
                }
                Ok(Algorithm::Zstd { level })
            }
            ("deflate", Some(l)) => {
                let level: u32 = l.parse().map_err(|_| bad_level(l))?;
                if !(1..=9).contains(&level) {
                    return Err(bad_level(l));
                }
                Ok(Algorithm::Deflate { level })
            }
            ("lz4" | "lzo" | "lzo-rle", Some(l)) => Err(bad_level(l)),
            _ => Err(Error::UnknownAlgorithm(s.to_string())),
        }
    }
}

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A compressor name this crate does not know.
    #[error("unknown compression algorithm {0:?} (expected lz4, lzo, lzo-rle, zstd[:LEVEL] or deflate[:LEVEL])")]
    UnknownAlgorithm(String),
    /// A level the algorithm does not have.
    #[error("invalid level {level:?} for {algorithm} (zstd: a non-zero zstd level, deflate: 1..=9, others: none)")]
    InvalidLevel {
        /// The algorithm's name.
        algorithm: String,
        /// The level as given.
        level: String,
    },
    /// The output does not fit in the destination.
    #[error("destination buffer of {available} bytes is too small")]
    DstTooSmall {
        /// Bytes the destination has.
        available: usize,
    },
    /// The input is larger than the codec can take in one call.
    #[error("input of {0} bytes is too large for this codec")]
    SrcTooLarge(usize),
    /// The compressed data is corrupt or truncated (decoders treat input as hostile).
    #[error("corrupt {algorithm} data: {reason}")]
    Corrupt {
        /// The algorithm.
        algorithm: &'static str,
        /// What the decoder found wrong.
        reason: &'static str,
    },
    /// The codec library reported an error of its own.
    #[error("{algorithm} codec failed: {reason}")]
    Codec {
        /// The algorithm.
        algorithm: &'static str,
        /// The library's message.
        reason: String,
    },
    /// The algorithm is not in this build (lzo and lzo-rle need the cargo feature
    /// `kernel-lzo`).
    #[error("{0} is not built in (uzswap-compress was built without its GPL-2.0-only cargo feature `kernel-lzo`)")]
    NotBuiltIn(&'static str),
}

/// Compresses `src` into `dst` and returns the compressed length.
///
/// With `dst.len() >= MAX_COMPRESSED_LEN` (or `alg.max_compressed_len(src.len())`) this never
/// fails for a page; a smaller `dst` that cannot hold the result gives
/// [`Error::DstTooSmall`]. Uses this thread's cached context for `alg`.
pub fn compress(alg: Algorithm, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    match alg {
        Algorithm::Lz4 => lz4_kernel::compress_tls(src, dst),
        Algorithm::Lzo => lzo_codec::compress(src, dst, false),
        Algorithm::LzoRle => lzo_codec::compress(src, dst, true),
        Algorithm::Zstd { level } => zstd_codec::compress(level, src, dst),
        Algorithm::Deflate { level } => deflate::compress(level, src, dst),
    }
}

/// Registers the calling thread's context slots for `alg` (their destructors, with the C
/// library's list of thread-exit functions) without making the contexts: LZ4's and LZO's hash
/// tables (32 and 16 KiB, cleared when made) are then made by the thread's first compression,
/// and a thread that never compresses never pays for them. Returns false, registering nothing,
/// for zstd and deflate, whose contexts come from their C library's allocator: a caller that
/// wants those ready compresses a page instead.
pub fn register_thread(alg: Algorithm) -> bool {
    match alg {
        Algorithm::Lz4 => {
            lz4_kernel::register_thread();
            true
        }
        Algorithm::Lzo | Algorithm::LzoRle => {
            lzo_codec::register_thread();
            true
        }
        Algorithm::Zstd { .. } | Algorithm::Deflate { .. } => false,
    }
}

/// Compresses `src` into output whose size equals, page for page, what the running kernel's
/// compressor produces (what zram's `compr_data_size` and the zswap pool account).
///
/// Since every built-in compressor is kernel-exact, this is [`compress`]; it stays as the name
/// the estimator and the conformance tests ask for.
/// - `lzo`, `lzo-rle`: `uzswap-lzo` *is* the kernel's algorithm.
/// - `lz4`: a Rust re-implementation of the kernel's older LZ4 (module `lz4_kernel`), whose
///   output differs from liblz4 1.10's on a few % of pages by 1-4 bytes. Any LZ4 decoder reads
///   it.
/// - `zstd`, `deflate`: not verified against the kernel (the reference kernel's zram offers
///   neither).
pub fn compress_kernel_exact(alg: Algorithm, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    compress(alg, src, dst)
}

/// liblz4 1.10's block compressor (`LZ4_compress_fast_extState_fastReset`, acceleration 1),
/// which the store path used until 2026-11-27: kept as the reference that the Rust LZ4 is
/// measured against (`lzo_speed`, the conformance tests), not used by the cache.
pub fn compress_liblz4(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    lz4::compress(src, dst)
}

/// Decompresses `src` into `dst` and returns the decompressed length.
///
/// Corrupt, truncated or oversized input gives [`Error::Corrupt`] (or
/// [`Error::DstTooSmall`] when the output would not fit), never a panic. The caller checks
/// that the length is what it expects (4096 for a page).
pub fn decompress(alg: Algorithm, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    match alg {
        Algorithm::Lz4 => lz4::decompress(src, dst),
        // The kernel decodes both with one decompressor: lzo-rle streams carry a version
        // header that plain LZO streams never start with.
        Algorithm::Lzo | Algorithm::LzoRle => lzo_codec::decompress(src, dst),
        Algorithm::Zstd { .. } => zstd_codec::decompress(src, dst),
        Algorithm::Deflate { .. } => deflate::decompress(src, dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_thread_makes_no_context_and_the_first_compression_makes_it() {
        std::thread::spawn(|| {
            assert!(register_thread(Algorithm::Lz4));
            assert_eq!(lz4_kernel::has_state(), Some(false));
            let page: Vec<u8> = (0..4096u32).map(|i| (i % 61) as u8).collect();
            let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
            let n = compress(Algorithm::Lz4, &page, &mut dst).unwrap();
            let mut out = vec![0u8; 4096];
            assert_eq!(
                decompress(Algorithm::Lz4, &dst[..n], &mut out).unwrap(),
                4096
            );
            assert_eq!(out, page);
            assert_eq!(lz4_kernel::has_state(), Some(true));
            assert!(register_thread(Algorithm::Lzo));
            assert!(!register_thread(Algorithm::Deflate { level: 6 }));
        })
        .join()
        .unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd's level range is a C call")]
    fn parse_and_display_round_trip() {
        for s in [
            "lz4",
            "lzo",
            "lzo-rle",
            "zstd",
            "deflate",
            "zstd:1",
            "zstd:-5",
            "zstd:19",
            "deflate:1",
            "deflate:9",
        ] {
            let a: Algorithm = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
        assert_eq!("zstd:3".parse::<Algorithm>().unwrap(), Algorithm::ZSTD);
        assert_eq!(Algorithm::ZSTD.to_string(), "zstd");
        assert_eq!(
            "deflate:6".parse::<Algorithm>().unwrap().to_string(),
            "deflate"
        );
        for a in Algorithm::ALL_DEFAULTS {
            assert_eq!(a.to_string().parse::<Algorithm>().unwrap(), a);
            assert!(a.is_kernel_default());
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "zstd's level range is a C call")]
    fn parse_rejects_bad_names_and_levels() {
        for s in [
            "",
            "LZ4",
            "lz4hc",
            "zstd:",
            "zstd:x",
            "zstd:0",
            "zstd:99",
            "deflate:0",
            "deflate:10",
            "deflate:-1",
            "lzo:1",
            "lz4:1",
            "zstd:1:2",
        ] {
            assert!(s.parse::<Algorithm>().is_err(), "{s:?} should not parse");
        }
    }
}
