// SPDX-License-Identifier: MIT
//! One run of the bench: every phase, timed, over the same pages.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use uzswap_compress::MAX_COMPRESSED_LEN;
use uzswap_corpus::{Pages, PAGE_SIZE};
use uzswap_kernel::zram::MmStat;
use uzswap_swapfile::{SwapFile, SwapSlot};
use uzswap_zswap::{CgroupId, LoadOutcome, Params, StoreOutcome, Zswap};

use super::kernel::KernelSide;
use super::prep::Compressed;
use super::Args;
use crate::shared::timing::{parallel, split_mut, timed};

/// Everything measured in one run.
#[derive(Default, Clone)]
pub(super) struct RunResult {
    pub(super) raw_compress: f64,
    pub(super) raw_decompress: f64,
    pub(super) store: f64,
    pub(super) load: f64,
    pub(super) invalidate: f64,
    pub(super) zram_write: Option<f64>,
    pub(super) zram_read: Option<f64>,
    /// CPU ns per page of each phase: raw compress, store, load, raw decompress, invalidate.
    pub(super) cpu: [f64; 5],
    /// CPU ns per page of the zram write and read (the kernel compresses in the caller's
    /// context, so the writer's system time holds the compression).
    pub(super) cpu_zram: Option<[f64; 2]>,
    pub(super) verified: bool,
    pub(super) zram_verified: Option<bool>,
    pub(super) pool_total_size: u64,
    pub(super) metadata_bytes_per_entry: f64,
    pub(super) stored_pages: u64,
    pub(super) zero_pages: u64,
    pub(super) stored_incompressible: u64,
    pub(super) rejected_to_swap_file: u64,
    pub(super) loaded_from_swap_file: u64,
    pub(super) mismatched_pages: usize,
    pub(super) load_errors: usize,
    pub(super) mm_stat: Option<MmStat>,
    /// The backing swap file's counters after the load phase.
    pub(super) swap_stats: uzswap_swapfile::SwapFileStats,
}

/// One cache for the whole bench, as a long-running process has: every run ends by
/// invalidating all it stored, so the next run stores into a pool whose freed memory is still
/// resident (see `uzswap_zswap`'s pool memory policy), the way zram's next write gets pages
/// from the kernel's free lists without clearing them. The warm-up run fills the empty pool
/// with fresh memory; its store rate is reported separately (`store_cold_pages_per_s`).
pub(super) struct CacheUnderTest {
    pub(super) z: Zswap,
    pub(super) swap: Arc<SwapFile>,
    pub(super) slots: Vec<SwapSlot>,
}

pub(super) struct Bench<'a> {
    pub(super) args: &'a Args,
    pub(super) pages: &'a Pages,
    pub(super) comp: &'a Compressed,
    pub(super) ranges: Vec<Range<usize>>,
    pub(super) swap_dir: PathBuf,
    pub(super) params: Params,
    pub(super) use_swap_out: bool,
}

impl Bench<'_> {
    /// The cache every run uses, with its swap file and one slot per page.
    pub(super) fn cache(&self) -> anyhow::Result<CacheUnderTest> {
        let n = self.pages.len();
        let swap = Arc::new(
            SwapFile::create_temp(&self.swap_dir, 0, n as u64)
                .with_context(|| format!("creating a swap file in {}", self.swap_dir.display()))?,
        );
        let slots: Vec<SwapSlot> = (0..n)
            .map(|_| swap.alloc_slot())
            .collect::<Result<_, _>>()
            .context("allocating swap slots")?;
        let z = Zswap::new(self.params.clone()).context("creating the cache")?;
        z.add_swap_file(swap.clone())
            .context("adding the swap file")?;
        Ok(CacheUnderTest { z, swap, slots })
    }

    pub(super) fn run(
        &self,
        cache: &CacheUnderTest,
        mut kernel: Option<&mut KernelSide>,
    ) -> anyhow::Result<RunResult> {
        let alg = self.args.compressor;
        let n = self.pages.len();
        let mut r = RunResult::default();

        // Raw compress: every page into a reused, preallocated buffer per thread.
        let (d, sizes) = parallel(self.ranges.clone(), |range| {
            let mut dst = vec![0u8; MAX_COMPRESSED_LEN.max(alg.max_compressed_len(PAGE_SIZE))];
            let mut total = 0usize;
            for i in range {
                total += uzswap_compress::compress(alg, self.pages.page(i), &mut dst).unwrap_or(0);
            }
            total
        });
        r.raw_compress = d.rate(n);
        r.cpu[0] = d.cpu_per_item(n);
        let total: usize = sizes.iter().sum();
        if total != self.comp.spans.iter().map(|s| s.1).sum::<usize>() {
            bail!("{alg} compressed the corpus to a different size on a second pass");
        }

        // Store.
        let CacheUnderTest { z, swap, slots } = cache;
        let (d, outs) = parallel(self.ranges.clone(), |range| {
            let mut rejected = 0u64;
            let mut failed = 0u64;
            for i in range {
                let page = self.pages.page(i);
                if self.use_swap_out {
                    match z.swap_out(slots[i], page, CgroupId::ROOT) {
                        Ok(StoreOutcome::Rejected(_)) => rejected += 1,
                        Ok(_) => {}
                        Err(_) => failed += 1,
                    }
                } else if let StoreOutcome::Rejected(_) = z.store(slots[i], page, CgroupId::ROOT) {
                    rejected += 1;
                }
            }
            (rejected, failed)
        });
        r.store = d.rate(n);
        r.cpu[1] = d.cpu_per_item(n);
        let failed: u64 = outs.iter().map(|o| o.1).sum();
        r.rejected_to_swap_file = outs.iter().map(|o| o.0).sum();
        if failed > 0 {
            bail!("{failed} pages could be stored neither in the cache nor in the swap file");
        }
        if !self.use_swap_out && r.rejected_to_swap_file > 0 {
            bail!(
                "the cache rejected {} pages although the limit was set to fit the corpus",
                r.rejected_to_swap_file
            );
        }
        let c = z.counters();
        r.pool_total_size = c.pool_total_size;
        r.stored_pages = c.stored_pages;
        r.zero_pages = c.zero_pages;
        r.stored_incompressible = c.stored_incompressible_pages;
        r.metadata_bytes_per_entry = z.metadata_bytes_per_entry();

        // zram write (1 MiB O_DIRECT requests, one thread).
        let mut cpu_write = None;
        if let Some(k) = kernel.as_deref_mut() {
            let size = (n * PAGE_SIZE) as u64;
            let disksize = size.div_ceil(1 << 20) << 20;
            k.zram
                .configure(alg.kernel_name(), disksize)
                .context("configuring zram")?;
            let (d, res) = timed(|| k.zram.write_direct(0, self.pages.as_bytes()));
            res.context("writing the corpus to zram")?;
            r.zram_write = Some(d.rate(n));
            cpu_write = Some(d.cpu_per_item(n));
            r.mm_stat = Some(k.zram.mm_stat().context("reading zram mm_stat")?);
        }

        // Load, straight into a separate destination (pre-touched, so no first-touch faults
        // are timed), then verify outside the timed phase.
        let mut dest = vec![0xA5u8; n * PAGE_SIZE];
        let exclusive = self.args.exclusive;
        let (d, outs) = parallel(
            self.ranges
                .iter()
                .cloned()
                .zip(split_mut(&mut dest, &self.ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                let (mut from_file, mut errors) = (0u64, 0usize);
                for (i, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    match z.load(slots[i], page, exclusive) {
                        Ok(LoadOutcome::Hit) => {}
                        Ok(LoadOutcome::FromSwapFile) => from_file += 1,
                        Ok(LoadOutcome::Absent) | Err(_) => errors += 1,
                    }
                }
                (from_file, errors)
            },
        );
        r.load = d.rate(n);
        r.cpu[2] = d.cpu_per_item(n);
        r.loaded_from_swap_file = outs.iter().map(|o| o.0).sum();
        r.load_errors = outs.iter().map(|o| o.1).sum();
        r.mismatched_pages = dest
            .chunks_exact(PAGE_SIZE)
            .zip(self.pages.iter())
            .filter(|(a, b)| a != b)
            .count();
        r.verified = r.mismatched_pages == 0 && r.load_errors == 0;
        r.swap_stats = swap.stats();

        // Raw decompress into a separate destination, same split.
        dest.fill(0x5A);
        let (d, errs) = parallel(
            self.ranges
                .iter()
                .cloned()
                .zip(split_mut(&mut dest, &self.ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                let mut errors = 0usize;
                for (i, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    let (off, len) = self.comp.spans[i];
                    let src = &self.comp.data[off..off + len];
                    if uzswap_compress::decompress(alg, src, page).ok() != Some(PAGE_SIZE) {
                        errors += 1;
                    }
                }
                errors
            },
        );
        r.raw_decompress = d.rate(n);
        r.cpu[3] = d.cpu_per_item(n);
        if errs.iter().sum::<usize>() > 0 || dest != self.pages.as_bytes() {
            bail!("{alg}: raw decompression did not reproduce the corpus");
        }

        // zram read, then verify.
        if let Some(k) = kernel {
            dest.fill(0x3C);
            let (d, res) = timed(|| k.zram.read_direct(0, &mut dest));
            res.context("reading the corpus back from zram")?;
            r.zram_read = Some(d.rate(n));
            r.cpu_zram = Some([cpu_write.unwrap_or(f64::NAN), d.cpu_per_item(n)]);
            r.zram_verified = Some(dest == self.pages.as_bytes());
            k.zram.reset().context("resetting zram")?;
        }

        // Invalidate what is left (everything unless loads were exclusive).
        let (d, _) = parallel(self.ranges.clone(), |range| {
            for i in range {
                z.invalidate(slots[i]);
            }
        });
        r.invalidate = d.rate(n);
        r.cpu[4] = d.cpu_per_item(n);
        Ok(r)
    }
}
