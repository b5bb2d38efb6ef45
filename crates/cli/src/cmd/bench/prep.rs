// SPDX-License-Identifier: MIT
//! Corpus preparation before any clock starts: every page compressed once, for the raw
//! decompression phase and the content figures.

use anyhow::Context;
use uzswap_compress::{Algorithm, MAX_COMPRESSED_LEN};
use uzswap_corpus::{Pages, PAGE_SIZE};

/// The compressed copies of the corpus, for the raw decompression measurement.
pub(super) struct Compressed {
    pub(super) data: Vec<u8>,
    pub(super) spans: Vec<(usize, usize)>,
    /// Sum of min(len, 4096): what a pool storing incompressible pages raw would hold.
    pub(super) capped_bytes: u64,
    pub(super) incompressible: usize,
}

pub(super) fn compress_all(alg: Algorithm, pages: &Pages) -> anyhow::Result<Compressed> {
    let mut buf = vec![0u8; MAX_COMPRESSED_LEN.max(alg.max_compressed_len(PAGE_SIZE))];
    let mut c = Compressed {
        data: Vec::with_capacity(pages.as_bytes().len() / 2),
        spans: Vec::with_capacity(pages.len()),
        capped_bytes: 0,
        incompressible: 0,
    };
    for (i, p) in pages.iter().enumerate() {
        let n = uzswap_compress::compress(alg, p, &mut buf)
            .with_context(|| format!("{alg} failed to compress page {i}"))?;
        c.spans.push((c.data.len(), n));
        c.data.extend_from_slice(&buf[..n]);
        c.capped_bytes += n.min(PAGE_SIZE) as u64;
        if n >= PAGE_SIZE {
            c.incompressible += 1;
        }
    }
    Ok(c)
}
