// SPDX-License-Identifier: MIT
//! `lzo` and `lzo-rle` through the GPL-2.0-only crate `uzswap-lzo` (cargo feature `kernel-lzo`,
//! on by default): this module only keeps each thread's working memory and maps errors. Built
//! without the feature, both algorithms report [`crate::Error::NotBuiltIn`].

/// The largest LZO1X-1 output for `src_len` input bytes (the format's worst case plus the
/// 2-byte lzo-rle header); the same as `uzswap_lzo::worst_compressed_len`.
pub(crate) fn worst_compressed_len(src_len: usize) -> usize {
    src_len + src_len / 16 + 64 + 3 + 2
}

#[cfg(feature = "kernel-lzo")]
mod imp {
    use std::cell::RefCell;

    use uzswap_lzo::{compress_exact, decompress_safe, Dict, Variant};

    use super::worst_compressed_len;
    use crate::Error;

    /// Per-thread LZO working memory: the hash table, and a scratch output for callers whose
    /// destination is smaller than the worst case.
    struct WorkMem {
        dict: Box<Dict>,
        scratch: Vec<u8>,
    }

    thread_local! {
        static WORKMEM: RefCell<Option<WorkMem>> = const { RefCell::new(None) };
    }

    /// Registers this thread's working-memory slot (see [`crate::register_thread`]).
    pub(crate) fn register_thread() {
        let _ = WORKMEM.try_with(|_| ());
    }

    /// Compresses with this thread's working memory.
    pub(crate) fn compress(src: &[u8], dst: &mut [u8], rle: bool) -> Result<usize, Error> {
        let variant = if rle { Variant::LzoRle } else { Variant::Lzo };
        crate::tls::with_cached(
            &WORKMEM,
            || {
                Ok(WorkMem {
                    dict: Dict::new_boxed(),
                    scratch: Vec::new(),
                })
            },
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
}

#[cfg(not(feature = "kernel-lzo"))]
mod imp {
    use crate::Error;

    pub(crate) fn compress(_src: &[u8], _dst: &mut [u8], rle: bool) -> Result<usize, Error> {
        Err(Error::NotBuiltIn(if rle { "lzo-rle" } else { "lzo" }))
    }

    pub(crate) fn decompress(_src: &[u8], _dst: &mut [u8]) -> Result<usize, Error> {
        Err(Error::NotBuiltIn("lzo"))
    }

    pub(crate) fn register_thread() {}
}

pub(crate) use imp::{compress, decompress, register_thread};

/// Whether `lzo` and `lzo-rle` are built in.
pub(crate) const BUILT_IN: bool = cfg!(feature = "kernel-lzo");

#[cfg(all(test, feature = "kernel-lzo"))]
mod tests {
    #[test]
    fn worst_case_bound_matches_the_lzo_crate() {
        for n in [0, 1, 100, 4096, 65536] {
            assert_eq!(
                super::worst_compressed_len(n),
                uzswap_lzo::worst_compressed_len(n)
            );
        }
    }
}
