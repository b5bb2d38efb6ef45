// SPDX-License-Identifier: MIT
//! uzswap-estimate: predict what the kernel's zram and zswap would use for a set of pages.
//!
//! What it owns: the page rules of both kernel users of zsmalloc, applied by really running
//! the compressor and a real [`uzswap_zsmalloc::Pool`] on the pages, so an estimate is by
//! construction what the allocator and the compressor give when run directly:
//!
//! - **zram** (`drivers/block/zram`): a page made of one repeated machine word (`unsigned
//!   long`, 8 bytes here) is a *same* page: no allocation, counted in `same_pages`. Otherwise
//!   it is compressed; `comp_len >= huge_class_size` stores it uncompressed as a 4096-byte
//!   *huge* object, else an object of `comp_len` bytes. `mem_used_total` is pool pages * 4096.
//! - **zswap** (mm/zswap.c, 6.12+): an all-zero page never reaches zswap (the swap core's zero
//!   map, `swpout_zero`); a non-zero page is compressed; a failure or `comp_len >= 4096` is
//!   stored raw as 4096 bytes (*incompressible*, writeback enabled), else an object of
//!   `comp_len` bytes. `pool_total_size` is pool pages * 4096.
//!
//! Data layout: each non-zero page is compressed once per compressor; the outputs are kept in
//! one buffer with offsets and then written into one zram-model and one zswap-model pool per
//! chain size, in page order (the kernel allocates in that order too).
//!
//! Lock order: none; the estimate is single-threaded (so the per-page compression time is
//! one core's time).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use serde::Serialize;
use std::time::Instant;
use uzswap_compress::{Algorithm, MAX_COMPRESSED_LEN};
use uzswap_corpus::{Pages, PAGE_SIZE};
use uzswap_zsmalloc::{ChainRule, Pool, PoolConfig};

/// Errors of an estimate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No compressor or chain size, or a chain size out of range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// The allocator failed (the source says how).
    #[error("allocator (chain size {chain_size})")]
    Pool {
        /// The chain size of the pool that failed.
        chain_size: usize,
        /// The allocator's error.
        #[source]
        source: uzswap_zsmalloc::Error,
    },
}

/// What to estimate.
#[derive(Clone, Debug)]
pub struct EstimateOptions {
    /// Compressors to estimate, each on its own.
    pub compressors: Vec<Algorithm>,
    /// zsmalloc chain sizes (1..=16) to estimate, each on its own.
    pub chain_sizes: Vec<usize>,
    /// Rule choosing pages per zspage.
    pub chain_rule: ChainRule,
}

impl Default for EstimateOptions {
    /// lz4 and lzo-rle (when built in: cargo feature `kernel-lzo`) at chain size 8 with the
    /// kernel's min-waste rule.
    fn default() -> Self {
        EstimateOptions {
            compressors: [Algorithm::Lz4, Algorithm::LzoRle]
                .into_iter()
                .filter(|a| a.is_built_in())
                .collect(),
            chain_sizes: vec![8],
            chain_rule: ChainRule::MinWaste,
        }
    }
}

/// Predicted `/sys/block/zram0/mm_stat` after writing the pages once to a fresh device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ZramMmStat {
    /// Uncompressed bytes stored (same pages included).
    pub orig_data_size: u64,
    /// Compressed bytes stored (huge objects count 4096).
    pub compr_data_size: u64,
    /// Memory the pool holds: pool pages * 4096.
    pub mem_used_total: u64,
    /// The device's memory limit (0: none).
    pub mem_limit: u64,
    /// Peak of `mem_used_total` (equal to it after one write).
    pub mem_used_max: u64,
    /// Pages of one repeated word, stored without memory.
    pub same_pages: u64,
    /// Pages freed by compaction (0 after one write).
    pub pages_compacted: u64,
    /// Pages stored uncompressed (compressed length >= `huge_class_size`).
    pub huge_pages: u64,
    /// Huge pages since the device was set up.
    pub huge_pages_since: u64,
}

impl ZramMmStat {
    /// Values in the kernel's column order.
    pub fn values(&self) -> [u64; 9] {
        [
            self.orig_data_size,
            self.compr_data_size,
            self.mem_used_total,
            self.mem_limit,
            self.mem_used_max,
            self.same_pages,
            self.pages_compacted,
            self.huge_pages,
            self.huge_pages_since,
        ]
    }
}

/// Predicted zswap state after storing the pages once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ZswapPrediction {
    /// Pages with an entry (non-zero pages).
    pub stored_pages: u64,
    /// Pages stored raw.
    pub stored_incompressible_pages: u64,
    /// Zero pages handled by the swap core (vmstat `swpout_zero`), not by zswap.
    pub swpout_zero: u64,
    /// Pool pages * 4096.
    pub pool_total_size: u64,
    /// Pool pages.
    pub pool_pages: u64,
}

/// One (compressor, chain size) prediction. The first eight fields are the JSON contract.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateResult {
    /// Kernel name (with `:LEVEL` for a non-default level).
    pub compressor: String,
    /// zsmalloc chain size of this prediction.
    pub chain_size: usize,
    /// Compressor output summed over every non-zero page (a failed page counts 4096).
    pub compressed_bytes: u64,
    /// zram-model pool pages (= `zram_mem_used_total / 4096`).
    pub pool_pages: u64,
    /// zram huge objects: pages whose compressed length is >= `huge_class_size`.
    pub huge_objects: u64,
    /// zswap incompressible pages: compression failed or gave >= 4096 bytes.
    pub incompressible_pages: u64,
    /// zram's `mem_used_total` (see [`ZramMmStat`]).
    pub zram_mem_used_total: u64,
    /// zswap's `pool_total_size` (see [`ZswapPrediction`]).
    pub zswap_pool_total_size: u64,
    /// Non-zero pages * 4096 / `compressed_bytes`.
    pub compression_ratio: f64,
    /// The pool's `huge_class_size` for this chain size.
    pub huge_class_size: usize,
    /// The whole predicted zram `mm_stat`.
    pub zram_mm_stat: ZramMmStat,
    /// The predicted zswap state.
    pub zswap: ZswapPrediction,
    /// Mean single-core compression time per non-zero page, nanoseconds.
    pub compress_ns_per_page: f64,
}

/// The whole estimate. JSON: `{"pages", "zero_pages", "same_filled_pages", "results": [..]}`.
#[derive(Clone, Debug, Serialize)]
pub struct Estimate {
    /// Pages estimated.
    pub pages: u64,
    /// All-zero pages (zswap's rule).
    pub zero_pages: u64,
    /// Pages made of one repeated 8-byte word, zero pages included (zram's rule).
    pub same_filled_pages: u64,
    /// Where the pages came from.
    pub source: String,
    /// One result per (compressor, chain size), compressors outermost.
    pub results: Vec<EstimateResult>,
}

impl Estimate {
    /// The JSON document of the CLI's `--json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes")
    }
}

/// zram's rule: the page is one `unsigned long` (8 bytes on 64-bit) repeated.
pub fn is_same_filled(page: &[u8]) -> bool {
    let first = &page[..8];
    page.chunks_exact(8).all(|w| w == first)
}

/// zswap's (swap core's) rule: every byte is zero.
pub fn is_zero_filled(page: &[u8]) -> bool {
    page.iter().all(|&b| b == 0)
}

/// Progress: units done of total (one unit = one page compressed or placed in a pool).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// The compressor's output for every page: `None` for zero pages.
struct Compressed {
    /// (offset into `data`, length) or None for a zero page; length == PAGE_SIZE and the
    /// bytes are the raw page when compression failed or did not shrink below a page.
    entries: Vec<Option<(usize, usize, bool)>>,
    data: Vec<u8>,
    /// Sum of raw compressor output lengths (failures count PAGE_SIZE).
    compressed_bytes: u64,
    elapsed_ns: u128,
    compressed_pages: u64,
}

fn compress_all(
    pages: &Pages,
    alg: Algorithm,
    zero: &[bool],
    progress: &mut dyn FnMut(u64),
) -> Compressed {
    let mut out = Compressed {
        entries: Vec::with_capacity(pages.len()),
        data: Vec::new(),
        compressed_bytes: 0,
        elapsed_ns: 0,
        compressed_pages: 0,
    };
    let mut dst = vec![0u8; MAX_COMPRESSED_LEN];
    for (i, page) in pages.iter().enumerate() {
        if zero[i] {
            out.entries.push(None);
            progress(1);
            continue;
        }
        let t = Instant::now();
        // Kernel-exact sizes (for lz4 the kernel's older LZ4 match-limit rule, which liblz4
        // 1.10 differs from on ~4% of pages): the same compressor as the store path.
        let r = uzswap_compress::compress_kernel_exact(alg, page, &mut dst);
        out.elapsed_ns += t.elapsed().as_nanos();
        out.compressed_pages += 1;
        let off = out.data.len();
        match r {
            Ok(n) => {
                out.compressed_bytes += n as u64;
                out.data.extend_from_slice(&dst[..n]);
                out.entries.push(Some((off, n, false)));
            }
            Err(_) => {
                // Like a kernel compressor error: the page can only be kept raw.
                out.compressed_bytes += PAGE_SIZE as u64;
                out.data.extend_from_slice(page);
                out.entries.push(Some((off, PAGE_SIZE, true)));
            }
        }
        progress(1);
    }
    out
}

/// Estimate zram and zswap memory for `pages` under every (compressor, chain size) asked.
pub fn estimate(pages: &Pages, opts: &EstimateOptions) -> Result<Estimate, Error> {
    estimate_with_progress(pages, opts, &mut |_, _| {})
}

/// [`estimate`] reporting progress.
pub fn estimate_with_progress(
    pages: &Pages,
    opts: &EstimateOptions,
    progress: Progress<'_>,
) -> Result<Estimate, Error> {
    if opts.compressors.is_empty() {
        return Err(Error::InvalidOptions("no compressor given".into()));
    }
    if opts.chain_sizes.is_empty() {
        return Err(Error::InvalidOptions("no chain size given".into()));
    }
    let mut tables = Vec::new();
    for &chain_size in &opts.chain_sizes {
        let cfg = PoolConfig {
            chain_size,
            chain_rule: opts.chain_rule,
        };
        let t = uzswap_zsmalloc::ClassTable::new(&cfg)
            .map_err(|source| Error::Pool { chain_size, source })?;
        tables.push((cfg, t.huge_class_size()));
    }
    let n = pages.len();
    let zero: Vec<bool> = pages.iter().map(is_zero_filled).collect();
    let same: Vec<bool> = pages.iter().map(is_same_filled).collect();
    let zero_pages = zero.iter().filter(|z| **z).count() as u64;
    let same_pages = same.iter().filter(|z| **z).count() as u64;

    let total = (opts.compressors.len() * (1 + 2 * opts.chain_sizes.len()) * n) as u64;
    let mut done = 0u64;
    let mut results = Vec::new();
    for &alg in &opts.compressors {
        let c = compress_all(pages, alg, &zero, &mut |k| {
            done += k;
            if done % 256 == 0 {
                progress(done, total);
            }
        });
        for (cfg, huge_class_size) in &tables {
            let chain_size = cfg.chain_size;
            let pool_err = |source| Error::Pool { chain_size, source };
            // zram model.
            let zram = Pool::new(*cfg).map_err(pool_err)?;
            let mut mm = ZramMmStat::default();
            for (i, e) in c.entries.iter().enumerate() {
                let page = pages.page(i);
                mm.orig_data_size += PAGE_SIZE as u64;
                if same[i] {
                    mm.same_pages += 1;
                } else {
                    let (off, len, failed) = e.expect("a non-same page is non-zero");
                    if failed || len >= *huge_class_size {
                        zram.alloc_write(page).map_err(pool_err)?;
                        mm.compr_data_size += PAGE_SIZE as u64;
                        mm.huge_pages += 1;
                    } else {
                        zram.alloc_write(&c.data[off..off + len])
                            .map_err(pool_err)?;
                        mm.compr_data_size += len as u64;
                    }
                }
                done += 1;
                if done % 256 == 0 {
                    progress(done, total);
                }
            }
            let zram_pages = zram.total_pages() as u64;
            drop(zram);
            mm.mem_used_total = zram_pages * PAGE_SIZE as u64;
            mm.mem_used_max = mm.mem_used_total;
            mm.huge_pages_since = mm.huge_pages;

            // zswap model.
            let zswap = Pool::new(*cfg).map_err(pool_err)?;
            let mut zs = ZswapPrediction::default();
            for (i, e) in c.entries.iter().enumerate() {
                match *e {
                    None => zs.swpout_zero += 1,
                    Some((off, len, failed)) => {
                        zs.stored_pages += 1;
                        if failed || len >= PAGE_SIZE {
                            zs.stored_incompressible_pages += 1;
                            zswap.alloc_write(pages.page(i)).map_err(pool_err)?;
                        } else {
                            zswap
                                .alloc_write(&c.data[off..off + len])
                                .map_err(pool_err)?;
                        }
                    }
                }
                done += 1;
                if done % 256 == 0 {
                    progress(done, total);
                }
            }
            zs.pool_pages = zswap.total_pages() as u64;
            zs.pool_total_size = zs.pool_pages * PAGE_SIZE as u64;
            drop(zswap);

            let nonzero = c.compressed_pages;
            results.push(EstimateResult {
                compressor: alg.to_string(),
                chain_size,
                compressed_bytes: c.compressed_bytes,
                pool_pages: zram_pages,
                huge_objects: mm.huge_pages,
                incompressible_pages: zs.stored_incompressible_pages,
                zram_mem_used_total: mm.mem_used_total,
                zswap_pool_total_size: zs.pool_total_size,
                compression_ratio: if c.compressed_bytes == 0 {
                    0.0
                } else {
                    (nonzero * PAGE_SIZE as u64) as f64 / c.compressed_bytes as f64
                },
                huge_class_size: *huge_class_size,
                zram_mm_stat: mm,
                zswap: zs,
                compress_ns_per_page: if nonzero == 0 {
                    0.0
                } else {
                    c.elapsed_ns as f64 / nonzero as f64
                },
            });
        }
    }
    progress(total, total);
    Ok(Estimate {
        pages: n as u64,
        zero_pages,
        same_filled_pages: same_pages,
        source: pages.source().to_string(),
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_rules() {
        let z = [0u8; PAGE_SIZE];
        assert!(is_zero_filled(&z) && is_same_filled(&z));
        let mut w = [0u8; PAGE_SIZE];
        for c in w.chunks_exact_mut(8) {
            c.copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        }
        assert!(is_same_filled(&w) && !is_zero_filled(&w));
        // A 4-byte pattern repeats as 8-byte words too; a 16-byte one does not.
        let mut x = w;
        x[8] = 9;
        assert!(!is_same_filled(&x));
    }
}
