// SPDX-License-Identifier: MIT
//! `uzswap bench`: store every page of a corpus of real memory in the cache, load them all back,
//! verify them, and put the speeds next to the raw codec and the kernel's zram, all measured in
//! the same run over the same pages.
//!
//! One run measures, back to back so each compared pair sees the same machine conditions: raw
//! compress; the cold pair (store into an empty cache, write to a freshly reset zram); the warm
//! pair (store into a cache that has held the corpus before, rewrite the same zram sectors);
//! load and raw decompress in slot order, then in one fixed random order; zram read;
//! invalidate (see `phases`). After one untimed warm-up run, `--runs` runs are timed. The
//! JSON's top-level figures are medians over the runs and its top-level ratios ratios of those
//! medians; `paired_ratios` are medians of the per-run ratios.
//!
//! Threads: the pages are split into N contiguous ranges, one per thread; all threads start
//! at a barrier and a phase lasts from the first thread's start to the last thread's end. The
//! raw codec is measured with the same split; zram is always written and read by one thread
//! with 1 MiB O_DIRECT requests (like `dd bs=1M oflag=direct`) from page-aligned buffers
//! prepared before the clock starts. `threads_per_side` in the JSON says who used how many.
//!
//! Beside the ratios, the JSON gives the cache's own cost per load in nanoseconds
//! (`load_overhead_ns`: load minus raw decompression, per order), the time of one dependent
//! memory read measured in the same runs (`memory_latency_ns`) and the overhead in those units
//! (`load_overhead_memory_latencies`), and the warm-up run's cold
//! pair (`first_run`: the only empty-cache store whose memory comes from the OS rather than
//! from a pool this process freed a moment ago). `--scaling` measures something else: every
//! operation on one thread and on N, against the raw codec's scaling (`scaling`).

mod kernel;
mod phases;
mod prep;
mod report;
mod scaling;

use std::path::PathBuf;

use anyhow::bail;
use clap::Parser;
use uzswap_compress::Algorithm;
use uzswap_corpus::PAGE_SIZE;
use uzswap_zswap::Params;

use crate::shared::output::{emit, emit_json};
use crate::shared::pages::{self, PageSource};
use crate::shared::timing::split;

/// The backing store under the bench's cache.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A swap file (`uzswap_backing::SwapFile`) in --swap-dir.
    File,
    /// Memory (`uzswap_backing::MemStore`).
    Memory,
}

/// Arguments of `uzswap bench`.
#[derive(Parser, Debug)]
#[command(after_help = "\
KERNEL COMPARISON
  By default the kernel's zram is measured too whenever that is possible without asking:
  running as root, /dev/zram0 (or --zram-dev) unused (disksize 0), the compressor one zram
  offers (lz4, lzo, lzo-rle), and no uzswap kernel test holding the kernel-test lock.
  Otherwise the comparison is skipped with a note. --kernel makes it mandatory (an error if
  impossible); --no-kernel turns it off. zram is reset and its algorithm restored afterwards.

EXAMPLES
  uzswap bench                                  # default corpus (real memory captured now), lz4
  uzswap bench --compressor lzo-rle --threads 2
  uzswap bench --corpus pages.bin --compressor lz4 --json")]
pub struct Args {
    /// Page file (docs/page-file-format.md) or raw page dump (a whole number of 4 KiB pages).
    /// Default: memory of a python3/perl workload started and captured now.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Compressor: lz4, lzo, lzo-rle, zstd[:LEVEL], deflate[:LEVEL].
    #[arg(long, default_value = "lz4", value_parser = crate::shared::parse::compressor)]
    pub compressor: Algorithm,
    /// Threads sharing the store and load phases (and the raw codec measurement).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Require the zram comparison (root, unused zram device, compressor zram offers).
    #[arg(long, conflicts_with = "no_kernel")]
    pub kernel: bool,
    /// Never touch the kernel.
    #[arg(long)]
    pub no_kernel: bool,
    /// zram device number for the comparison.
    #[arg(long, default_value_t = 0)]
    pub zram_dev: u32,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Timed runs (after one warm-up run); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Use only the first N pages of the corpus.
    #[arg(long)]
    pub pages: Option<usize>,
    /// Pages of the default corpus to capture.
    #[arg(long, default_value_t = 8192)]
    pub default_pages: usize,
    /// Exclusive loads: every load also frees its entry (the kernel's zswap since 6.x);
    /// by default entries stay and are invalidated in a separate timed phase.
    #[arg(long)]
    pub exclusive: bool,
    /// Cache limit in percent of --total-memory-mib. By default the limit is set so the whole
    /// corpus fits (the bench measures the cache, not writeback); with a limit, rejected pages
    /// go to the swap file and loads read them back from there.
    #[arg(long)]
    pub max_pool_percent: Option<u32>,
    /// Memory the pool percentage refers to (default with --max-pool-percent: MemTotal).
    #[arg(long, requires = "max_pool_percent")]
    pub total_memory_mib: Option<u64>,
    /// Directory of the backing swap file (an unnamed O_TMPFILE).
    #[arg(long)]
    pub swap_dir: Option<PathBuf>,
    /// Backing store under the cache: `file` (a swap file in --swap-dir) or `memory` (no file
    /// system: what writeback costs the cache itself; buffered writes to one file serialise on
    /// the file's inode lock).
    #[arg(long, value_enum, default_value = "file")]
    pub backing: Backing,
    /// Also save the corpus used (after --pages) as a page file, to rerun on the same pages.
    #[arg(long)]
    pub save_corpus: Option<PathBuf>,
    /// Instead of the comparison with the codec and zram: every operation (store, load in slot
    /// and random order, invalidate, writeback, a mixed 60/30/10 load/store/invalidate stream)
    /// on one thread and on --threads (at least 2), next to the raw codec's scaling.
    #[arg(long, conflicts_with_all = ["kernel", "max_pool_percent", "exclusive"])]
    pub scaling: bool,
}

/// `--scaling`: one warm-up run, then the timed runs, of every operation on 1 and N threads.
fn run_scaling(
    args: &Args,
    pages: &uzswap_corpus::Pages,
    comp: &prep::Compressed,
    params: Params,
) -> anyhow::Result<()> {
    let n = pages.len();
    let threads = args.threads.max(2).min(n);
    let bench = phases::Bench {
        args,
        pages,
        comp,
        ranges: split(n, threads),
        order: phases::random_order(n),
        swap_dir: args.swap_dir.clone().unwrap_or_else(std::env::temp_dir),
        // The writeback phase runs the memory-pressure shrinker.
        params: Params {
            shrinker_enabled: true,
            ..params
        },
        use_swap_out: false,
        chase: None,
    };
    let cache = bench.cache()?;
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..=args.runs {
        let r = bench.scaling_run(&cache, threads)?;
        if i > 0 {
            runs.push(r);
        }
    }
    drop(cache);
    let (json, text) = scaling::report(&bench, threads, &runs, report::machine());
    if args.json {
        emit_json(&json)?;
    } else {
        emit(&text)?;
    }
    if !json["verified"].as_bool().unwrap_or(false) {
        bail!("verification failed: pages did not read back bit-identical");
    }
    Ok(())
}

/// Runs the bench and prints the result.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if args.pages == Some(0) {
        bail!("--pages must be at least 1");
    }
    let source = match &args.corpus {
        Some(path) => PageSource::File(path.clone()),
        None => PageSource::Default {
            pages: args.default_pages,
        },
    };
    let pages = pages::load(&source, args.pages, args.json)?;
    let n = pages.len();
    if let Some(path) = &args.save_corpus {
        uzswap_corpus::write_page_file(path, &pages)?;
    }
    let threads = args.threads.min(n);
    let comp = prep::compress_all(args.compressor, &pages)?;

    let use_swap_out = args.max_pool_percent.is_some();
    let params = match args.max_pool_percent {
        Some(p) => Params {
            compressor: args.compressor,
            max_pool_percent: p,
            total_memory_bytes: match args.total_memory_mib {
                Some(m) => m << 20,
                None => uzswap_zswap::mem_total_bytes().unwrap_or(1 << 30),
            },
            ..Params::default()
        },
        // Twice the corpus at 100 %: every page fits even stored raw, with room for
        // zsmalloc's fragmentation.
        None => Params {
            compressor: args.compressor,
            max_pool_percent: 100,
            total_memory_bytes: ((n * PAGE_SIZE) as u64 * 2).max(64 << 20),
            ..Params::default()
        },
    };
    if args.scaling {
        return run_scaling(&args, &pages, &comp, params);
    }
    let mut kernel = kernel::claim_kernel(&args)?;
    let chase = phases::PointerChase::new();
    let bench = phases::Bench {
        args: &args,
        pages: &pages,
        comp: &comp,
        ranges: split(n, threads),
        order: phases::random_order(n),
        swap_dir: args.swap_dir.clone().unwrap_or_else(std::env::temp_dir),
        params,
        use_swap_out,
        chase: Some(&chase),
    };
    let mut zram_buffers = kernel.is_ok().then(|| phases::ZramBuffers::new(&pages));

    if kernel.is_ok() {
        // zram must be reset even on Ctrl-C: the signal only sets a flag, checked between
        // runs, and the early return drops (resets) the device.
        kernel::catch_interrupts();
    }
    // One warm-up run (untimed), then the timed runs.
    let cache = bench.cache()?;
    let mut runs = Vec::with_capacity(args.runs);
    let mut first = None;
    for i in 0..=args.runs {
        if kernel::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            bail!("interrupted (zram reset)");
        }
        let zram = kernel.as_mut().ok().zip(zram_buffers.as_mut());
        let r = bench.run(&cache, zram)?;
        if i > 0 {
            runs.push(r);
        } else {
            first = Some(r);
        }
    }
    drop(cache);
    let kernel_skipped = kernel.as_ref().err().cloned();
    drop(kernel); // resets zram and releases the lock

    let first = first.expect("the warm-up run ran");
    let report = report::Report::new(&args, &pages, &comp, threads, &first, &runs, kernel_skipped);
    if args.json {
        emit_json(report.json())?;
    } else {
        emit(report.text())?;
    }
    if !report.verified {
        bail!("verification failed: pages did not read back bit-identical");
    }
    Ok(())
}
