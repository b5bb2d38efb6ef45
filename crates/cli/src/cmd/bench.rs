//! `uzswap bench`: store every page of a corpus of real memory in the cache, load them all back,
//! verify them, and put the speeds next to the raw codec and the kernel's zram, all measured in
//! the same run over the same pages.
//!
//! One run = raw compress, store, [zram write], load, raw decompress, [zram read], invalidate;
//! the phases of one run are interleaved so each pair (store / raw compress, store / zram write,
//! ...) is measured under the same machine conditions. After one untimed warm-up run, `--runs`
//! runs are timed and the median is reported (ratios are medians of the per-run ratios).
//!
//! Threads: the pages are split into N contiguous ranges, one per thread; all threads start
//! at a barrier and a phase lasts from the first thread's start to the last thread's end. The
//! raw codec is measured with the same split; zram is always written by one thread with 1 MiB
//! O_DIRECT requests (like `dd bs=1M oflag=direct`).

use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::{json, Value};
use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_compress::{Algorithm, MAX_COMPRESSED_LEN};
use uzswap_corpus::{Pages, PAGE_SIZE};
use uzswap_kernel::zram::{MmStat, Zram};
use uzswap_kernel::KernelLock;
use uzswap_zswap::{CgroupId, LoadOutcome, Params, StoreOutcome, Zswap};

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
    /// Page file (uzswap-corpus format) or raw file (a trailing partial page is zero-padded).
    /// Default: memory of a python3/perl workload started and captured now.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Compressor: lz4, lzo, lzo-rle, zstd[:LEVEL], deflate[:LEVEL].
    #[arg(long, default_value = "lz4", value_parser = parse_alg)]
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
    /// Also save the corpus used (after --pages) as a page file, to rerun on the same pages.
    #[arg(long)]
    pub save_corpus: Option<PathBuf>,
}

fn parse_alg(s: &str) -> Result<Algorithm, String> {
    s.parse::<Algorithm>().map_err(|e| e.to_string())
}

/// Reads a corpus file: the page-file format, or raw bytes zero-padded to whole pages.
pub fn read_corpus(path: &Path) -> anyhow::Result<Pages> {
    let mut bytes =
        std::fs::read(path).with_context(|| format!("reading corpus {}", path.display()))?;
    if bytes.is_empty() {
        bail!("corpus {} is empty", path.display());
    }
    if !bytes.starts_with(uzswap_corpus::MAGIC) {
        let padded = bytes.len().div_ceil(PAGE_SIZE) * PAGE_SIZE;
        bytes.resize(padded, 0);
    }
    uzswap_corpus::decode_page_file(path, bytes)
        .with_context(|| format!("reading corpus {}", path.display()))
}

/// CPU time consumed by the calling thread (user + system), in nanoseconds. On a shared,
/// busy machine this is steadier than wall time: time spent waiting for a CPU is not in it.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall and CPU time of one phase.
#[derive(Clone, Copy, Debug, Default)]
struct PhaseTime {
    wall: Duration,
    /// Sum over the phase's threads of their CPU time.
    cpu_ns: u64,
}

/// Times `f` on the calling thread.
fn timed<R>(f: impl FnOnce() -> R) -> (PhaseTime, R) {
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    let r = f();
    let wall = t0.elapsed();
    (
        PhaseTime {
            wall,
            cpu_ns: thread_cpu_ns().saturating_sub(c0),
        },
        r,
    )
}

/// Runs `work(item)` on one thread per item, all released by one barrier; returns the wall
/// time from the earliest start to the latest end, the threads' summed CPU time, and each
/// thread's result.
fn parallel<W: Send, R: Send>(items: Vec<W>, work: impl Fn(W) -> R + Sync) -> (PhaseTime, Vec<R>) {
    let barrier = Barrier::new(items.len());
    let (barrier, work) = (&barrier, &work);
    let res: Vec<(Instant, Instant, u64, R)> = std::thread::scope(|s| {
        let hs: Vec<_> = items
            .into_iter()
            .map(|item| {
                s.spawn(move || {
                    barrier.wait();
                    let (c0, t0) = (thread_cpu_ns(), Instant::now());
                    let r = work(item);
                    let t1 = Instant::now();
                    (t0, t1, thread_cpu_ns().saturating_sub(c0), r)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let start = res.iter().map(|r| r.0).min().expect("one thread");
    let end = res.iter().map(|r| r.1).max().expect("one thread");
    let cpu_ns = res.iter().map(|r| r.2).sum();
    (
        PhaseTime {
            wall: end - start,
            cpu_ns,
        },
        res.into_iter().map(|r| r.3).collect(),
    )
}

fn split(n: usize, parts: usize) -> Vec<Range<usize>> {
    (0..parts)
        .map(|t| n * t / parts..n * (t + 1) / parts)
        .collect()
}

/// Splits `buf` (one page per index) into the page ranges.
fn split_mut<'a>(mut buf: &'a mut [u8], ranges: &[Range<usize>]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (a, b) = buf.split_at_mut(r.len() * PAGE_SIZE);
        out.push(a);
        buf = b;
    }
    out
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn rate(pages: usize, d: PhaseTime) -> f64 {
    pages as f64 / d.wall.as_secs_f64().max(1e-9)
}

fn cpu_per_page(pages: usize, d: PhaseTime) -> f64 {
    d.cpu_ns as f64 / pages as f64
}

/// The compressed copies of the corpus, for the raw decompression measurement.
struct Compressed {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
    /// Sum of min(len, 4096): what a pool storing incompressible pages raw would hold.
    capped_bytes: u64,
    incompressible: usize,
}

fn compress_all(alg: Algorithm, pages: &Pages) -> anyhow::Result<Compressed> {
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

/// Everything measured in one run.
#[derive(Default, Clone)]
struct RunResult {
    raw_compress: f64,
    raw_decompress: f64,
    store: f64,
    load: f64,
    invalidate: f64,
    zram_write: Option<f64>,
    zram_read: Option<f64>,
    /// CPU ns per page of each phase: raw compress, store, load, raw decompress, invalidate.
    cpu: [f64; 5],
    /// CPU ns per page of the zram write and read (the kernel compresses in the caller's
    /// context, so the writer's system time holds the compression).
    cpu_zram: Option<[f64; 2]>,
    verified: bool,
    zram_verified: Option<bool>,
    pool_total_size: u64,
    metadata_bytes_per_entry: f64,
    stored_pages: u64,
    zero_pages: u64,
    stored_incompressible: u64,
    rejected_to_swap_file: u64,
    loaded_from_swap_file: u64,
    mismatched_pages: usize,
    load_errors: usize,
    mm_stat: Option<MmStat>,
    /// The backing swap file's counters after the load phase.
    swap_stats: uzswap_backing::BackingStats,
}

/// The zram side: a claimed device (reset on drop) under the kernel-test lock.
struct KernelSide {
    zram: Zram,
    // Declared after `zram`: dropped last, so the device is reset before the lock goes.
    _lock: KernelLock,
}

/// Decides whether the zram comparison runs; `Ok(Err(reason))` when it is skipped.
fn claim_kernel(args: &Args) -> anyhow::Result<Result<KernelSide, String>> {
    if args.no_kernel {
        return Ok(Err("--no-kernel".into()));
    }
    let alg = args.compressor;
    let why_not = if !alg.zram_builtin() || !alg.is_kernel_default() {
        Some(format!("zram here offers lz4, lzo and lzo-rle, not {alg}"))
    } else if !uzswap_kernel::is_root() {
        Some("not running as root".to_string())
    } else {
        None
    };
    if let Some(reason) = why_not {
        if args.kernel {
            bail!("--kernel: {reason}");
        }
        return Ok(Err(reason));
    }
    let lock = if args.kernel {
        KernelLock::acquire().context("taking the kernel-test lock")?
    } else {
        match KernelLock::try_acquire_at(Path::new(uzswap_kernel::LOCK_PATH)) {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Ok(Err(
                    "another uzswap process holds the kernel-test lock".into()
                ))
            }
            Err(e) => return Ok(Err(format!("kernel-test lock: {e}"))),
        }
    };
    match Zram::claim_unused(args.zram_dev) {
        Ok(zram) => Ok(Ok(KernelSide { zram, _lock: lock })),
        Err(e) if args.kernel => Err(anyhow::anyhow!("--kernel: {e}")),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// One cache for the whole bench, as a long-running process has: every run ends by
/// invalidating all it stored, so the next run stores into a pool whose freed memory is still
/// resident (see `uzswap_zswap`'s pool memory policy), the way zram's next write gets pages
/// from the kernel's free lists without clearing them. The warm-up run fills the empty pool
/// with fresh memory; its store rate is reported separately (`store_cold_pages_per_s`).
struct CacheUnderTest {
    z: Zswap,
    swap: Arc<SwapFile>,
    slots: Vec<SwapSlot>,
}

struct Bench<'a> {
    args: &'a Args,
    pages: &'a Pages,
    comp: &'a Compressed,
    ranges: Vec<Range<usize>>,
    swap_dir: PathBuf,
    params: Params,
    use_swap_out: bool,
}

impl Bench<'_> {
    /// The cache every run uses, with its swap file and one slot per page.
    fn cache(&self) -> anyhow::Result<CacheUnderTest> {
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

    fn run(
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
        r.raw_compress = rate(n, d);
        r.cpu[0] = cpu_per_page(n, d);
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
        r.store = rate(n, d);
        r.cpu[1] = cpu_per_page(n, d);
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
            r.zram_write = Some(rate(n, d));
            cpu_write = Some(cpu_per_page(n, d));
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
                .zip(split_mut(&mut dest, &self.ranges))
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
        r.load = rate(n, d);
        r.cpu[2] = cpu_per_page(n, d);
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
                .zip(split_mut(&mut dest, &self.ranges))
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
        r.raw_decompress = rate(n, d);
        r.cpu[3] = cpu_per_page(n, d);
        if errs.iter().sum::<usize>() > 0 || dest != self.pages.as_bytes() {
            bail!("{alg}: raw decompression did not reproduce the corpus");
        }

        // zram read, then verify.
        if let Some(k) = kernel {
            dest.fill(0x3C);
            let (d, res) = timed(|| k.zram.read_direct(0, &mut dest));
            res.context("reading the corpus back from zram")?;
            r.zram_read = Some(rate(n, d));
            r.cpu_zram = Some([cpu_write.unwrap_or(f64::NAN), cpu_per_page(n, d)]);
            r.zram_verified = Some(dest == self.pages.as_bytes());
            k.zram.reset().context("resetting zram")?;
        }

        // Invalidate what is left (everything unless loads were exclusive).
        let (d, _) = parallel(self.ranges.clone(), |range| {
            for i in range {
                z.invalidate(slots[i]);
            }
        });
        r.invalidate = rate(n, d);
        r.cpu[4] = cpu_per_page(n, d);
        Ok(r)
    }
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGINT and SIGTERM set [`INTERRUPTED`] instead of killing the process.
fn catch_interrupts() {
    let handler: extern "C" fn(libc::c_int) = on_interrupt;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic; no other state is shared.
        unsafe { libc::signal(sig, handler as libc::sighandler_t) };
    }
}

/// Runs the bench and prints the result.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut pages = match &args.corpus {
        Some(path) => read_corpus(path)?,
        None => {
            if !args.json && std::io::stderr().is_terminal() {
                eprintln!(
                    "capturing the default corpus ({} pages of a python3/perl workload started now)...",
                    args.default_pages
                );
            }
            uzswap_corpus::default_corpus_with(&uzswap_corpus::DefaultCorpusOptions {
                max_pages: args.default_pages,
                ..Default::default()
            })
            .context("capturing the default corpus")?
        }
    };
    if let Some(n) = args.pages {
        if n == 0 {
            bail!("--pages must be at least 1");
        }
        pages.truncate(n);
    }
    let n = pages.len();
    if n == 0 {
        bail!("the corpus holds no pages");
    }
    if let Some(path) = &args.save_corpus {
        uzswap_corpus::write_page_file(path, &pages)
            .with_context(|| format!("saving the corpus to {}", path.display()))?;
    }
    let threads = args.threads.min(n);
    let comp = compress_all(args.compressor, &pages)?;

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
    let mut kernel = claim_kernel(&args)?;
    let bench = Bench {
        args: &args,
        pages: &pages,
        comp: &comp,
        ranges: split(n, threads),
        swap_dir: args.swap_dir.clone().unwrap_or_else(std::env::temp_dir),
        params,
        use_swap_out,
    };

    if kernel.is_ok() {
        // zram must be reset even on Ctrl-C: the signal only sets a flag, checked between
        // runs, and the early return drops (resets) the device.
        catch_interrupts();
    }
    // One warm-up run (untimed), then the timed runs.
    let cache = bench.cache()?;
    let mut runs = Vec::with_capacity(args.runs);
    let mut cold = None;
    for _ in 0..=args.runs {
        if INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            bail!("interrupted (zram reset)");
        }
        let r = bench.run(&cache, kernel.as_mut().ok())?;
        if cold.is_none() {
            cold = Some(r);
        } else {
            runs.push(r);
        }
    }
    drop(cache);
    let cold = cold.expect("the warm-up run ran");
    let kernel_skipped = kernel.as_ref().err().cloned();
    drop(kernel); // resets zram and releases the lock

    let report = Report::new(&args, &pages, &comp, threads, &cold, &runs, kernel_skipped);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        print!("{}", report.text());
    }
    if !report.verified {
        bail!("verification failed: pages did not read back bit-identical");
    }
    Ok(())
}

/// CPU model, CPU count and kernel release, so a saved JSON result says where it was measured.
fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    json!({"cpu": cpu, "cpus": cpus, "kernel": kernel})
}

struct Report {
    json: Value,
    verified: bool,
    text: String,
}

fn col<F: Fn(&RunResult) -> f64>(runs: &[RunResult], f: F) -> Vec<f64> {
    runs.iter().map(f).collect()
}

fn opt_col<F: Fn(&RunResult) -> Option<f64>>(runs: &[RunResult], f: F) -> Option<Vec<f64>> {
    runs.iter().map(f).collect()
}

impl Report {
    fn new(
        args: &Args,
        pages: &Pages,
        comp: &Compressed,
        threads: usize,
        cold: &RunResult,
        runs: &[RunResult],
        kernel_skipped: Option<String>,
    ) -> Report {
        let n = pages.len();
        let alg = args.compressor;
        let last = runs.last().expect("at least one run");
        let store = col(runs, |r| r.store);
        let load = col(runs, |r| r.load);
        let rc = col(runs, |r| r.raw_compress);
        let rd = col(runs, |r| r.raw_decompress);
        let inv = col(runs, |r| r.invalidate);
        let zw = opt_col(runs, |r| r.zram_write);
        let zr = opt_col(runs, |r| r.zram_read);
        // Ratios of the reported medians, so the table's columns agree with each other.
        let store_vs_raw = median(&store) / median(&rc);
        let load_vs_raw = median(&load) / median(&rd);
        let zero_in_corpus = pages.iter().filter(|p| p.iter().all(|&b| b == 0)).count();
        let orig = (n * PAGE_SIZE) as f64;
        let verified_cache = runs.iter().all(|r| r.verified);
        let verified_zram = runs.iter().all(|r| r.zram_verified != Some(false));
        let verified = verified_cache && verified_zram;
        let mut j = json!({
            "pages": n,
            "corpus": pages.source(),
            "compressor": alg.to_string(),
            "threads": threads,
            "runs": runs.len(),
            "verified": verified,
            "store_pages_per_s": median(&store),
            "load_pages_per_s": median(&load),
            "raw_compress_pages_per_s": median(&rc),
            "raw_decompress_pages_per_s": median(&rd),
            "invalidate_pages_per_s": median(&inv),
            "store_cold_pages_per_s": cold.store,
            "store_cold_vs_raw_compress": cold.store / median(&rc),
            "store_pages_per_s_best": best(&store),
            "load_pages_per_s_best": best(&load),
            "store_vs_raw_compress": store_vs_raw,
            "load_vs_raw_decompress": load_vs_raw,
            "pool_total_size": last.pool_total_size,
            "pool_vs_orig": last.pool_total_size as f64 / orig,
            "compressed_vs_orig": comp.capped_bytes as f64 / orig,
            "metadata_bytes_per_entry": last.metadata_bytes_per_entry,
            "stored_pages": last.stored_pages,
            "zero_pages": last.zero_pages,
            "stored_incompressible_pages": last.stored_incompressible,
            "incompressible_pages": comp.incompressible,
            "zero_pages_in_corpus": zero_in_corpus,
            "rejected_to_swap_file": last.rejected_to_swap_file,
            "loaded_from_swap_file": last.loaded_from_swap_file,
            "exclusive_loads": args.exclusive,
            "samples": {
                "store_pages_per_s": store,
                "load_pages_per_s": load,
                "raw_compress_pages_per_s": rc,
                "raw_decompress_pages_per_s": rd,
            },
        });
        // Per-run ratios, then their median: each pair of phases ran back to back, so a slow
        // spell of the machine that spans several runs cancels out of these.
        let paired =
            |a: &[f64], b: &[f64]| median(&a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>());
        j["paired_ratios"] = json!({
            "store_vs_raw_compress": paired(&store, &rc),
            "load_vs_raw_decompress": paired(&load, &rd),
        });
        if let (Some(zw), Some(zr)) = (&zw, &zr) {
            j["paired_ratios"]["store_vs_zram_write"] = json!(paired(&store, zw));
            j["paired_ratios"]["load_vs_zram_read"] = json!(paired(&load, zr));
        }
        j["machine"] = machine();
        let ss = &last.swap_stats;
        j["swap_file"] = json!({
            "writes": ss.writes,
            "reads": ss.reads,
            "write_errors": ss.write_errors,
            "read_errors": ss.read_errors,
            "checksum_errors": ss.checksum_errors,
        });
        let cpu = |k: usize| median(&col(runs, |r| r.cpu[k]));
        // Speed ratios from CPU time (time the threads actually ran): robust on a busy machine.
        j["cpu_ns_per_page"] = json!({
            "raw_compress": cpu(0),
            "store": cpu(1),
            "load": cpu(2),
            "raw_decompress": cpu(3),
        });
        j["cpu_ns_per_page"]["invalidate"] = json!(cpu(4));
        j["cpu_ns_per_page"]["store_cold"] = json!(cold.cpu[1]);
        j["store_vs_raw_compress_cpu"] = json!(cpu(0) / cpu(1));
        j["load_vs_raw_decompress_cpu"] = json!(cpu(3) / cpu(2));
        let obj = j.as_object_mut().expect("object");
        if let (Some(zw), Some(zr)) = (&zw, &zr) {
            let mm = last.mm_stat.unwrap_or_default();
            let mm_obj: serde_json::Map<String, Value> = MmStat::FIELDS
                .iter()
                .zip(mm.values())
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            obj.insert("kernel_zram_write_pages_per_s".into(), json!(median(zw)));
            obj.insert("kernel_zram_read_pages_per_s".into(), json!(median(zr)));
            obj.insert("kernel_zram_mm_stat".into(), Value::Object(mm_obj));
            obj.insert("kernel_zram_verified".into(), json!(verified_zram));
            obj.insert(
                "store_vs_zram_write".into(),
                json!(median(&store) / median(zw)),
            );
            obj.insert(
                "load_vs_zram_read".into(),
                json!(median(&load) / median(zr)),
            );
            let zc = |k: usize| median(&col(runs, |r| r.cpu_zram.map_or(f64::NAN, |c| c[k])));
            if let Some(c) = obj
                .get_mut("cpu_ns_per_page")
                .and_then(Value::as_object_mut)
            {
                c.insert("kernel_zram_write".into(), json!(zc(0)));
                c.insert("kernel_zram_read".into(), json!(zc(1)));
            }
            obj.insert("store_vs_zram_write_cpu".into(), json!(zc(0) / cpu(1)));
            obj.insert("load_vs_zram_read_cpu".into(), json!(zc(1) / cpu(2)));
            obj.insert(
                "kernel_zram_mem_used_vs_orig".into(),
                json!(mm.mem_used_total as f64 / orig),
            );
            obj.insert(
                "samples_kernel".into(),
                json!({"zram_write_pages_per_s": zw, "zram_read_pages_per_s": zr}),
            );
        } else {
            obj.insert(
                "kernel_skipped".into(),
                json!(kernel_skipped.clone().unwrap_or_default()),
            );
        }

        let text = Self::render(
            args,
            pages,
            comp,
            threads,
            runs,
            &j,
            zero_in_corpus,
            kernel_skipped.as_deref(),
        );
        Report {
            json: j,
            verified,
            text,
        }
    }

    fn json(&self) -> &Value {
        &self.json
    }

    fn text(&self) -> &str {
        &self.text
    }

    #[allow(clippy::too_many_arguments)]
    fn render(
        args: &Args,
        pages: &Pages,
        comp: &Compressed,
        threads: usize,
        runs: &[RunResult],
        j: &Value,
        zero_in_corpus: usize,
        kernel_skipped: Option<&str>,
    ) -> String {
        use std::fmt::Write;
        let n = pages.len();
        let alg = args.compressor;
        let f = |k: &str| j[k].as_f64().unwrap_or(f64::NAN);
        let mib = |b: f64| b / (1u64 << 20) as f64;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "uzswap bench: {n} pages ({:.1} MiB) of {}",
            mib((n * PAGE_SIZE) as f64),
            pages.source()
        );
        let _ = writeln!(
            s,
            "  compressor {alg}, {threads} thread{}, median of {} runs (after 1 warm-up){}",
            if threads == 1 { "" } else { "s" },
            runs.len(),
            if args.exclusive {
                ", exclusive loads"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "  content: {:.2}% zero pages, {:.2}% do not compress with {alg}; {alg} output is {:.3} of the input",
            100.0 * zero_in_corpus as f64 / n as f64,
            100.0 * comp.incompressible as f64 / n as f64,
            f("compressed_vs_orig")
        );
        let _ = writeln!(s);
        let kernel = j.get("kernel_zram_write_pages_per_s").is_some();
        let _ = writeln!(
            s,
            "  {:<28} {:>9} {:>8} {:>9} {:>9} {:>13}{}",
            "phase (speed: higher=better)",
            "pages/s",
            "MB/s",
            "µs/page",
            "CPU µs/pg",
            "vs raw codec",
            if kernel { "   vs kernel zram" } else { "" }
        );
        let cpu_us = |k: &str| j["cpu_ns_per_page"][k].as_f64().unwrap_or(f64::NAN) / 1e3;
        let row = |s: &mut String,
                   name: &str,
                   r: f64,
                   cpu: f64,
                   vs_raw: Option<f64>,
                   vs_k: Option<f64>| {
            let _ = write!(
                s,
                "  {:<28} {:>9.0} {:>8.0} {:>9.2} {:>9.2} {:>13}",
                name,
                r,
                r * PAGE_SIZE as f64 / 1e6,
                1e6 / r,
                cpu,
                vs_raw.map(|v| format!("{v:.2}x")).unwrap_or_default()
            );
            if let Some(v) = vs_k {
                let _ = write!(s, " {:>17}", format!("{v:.2}x"));
            }
            let _ = writeln!(s);
        };
        let vk = |k: &str| kernel.then(|| f(k));
        row(
            &mut s,
            "store (uzswap cache)",
            f("store_pages_per_s"),
            cpu_us("store"),
            Some(f("store_vs_raw_compress")),
            vk("store_vs_zram_write"),
        );
        row(
            &mut s,
            "store, empty pool (warm-up)",
            f("store_cold_pages_per_s"),
            cpu_us("store_cold"),
            Some(f("store_cold_vs_raw_compress")),
            None,
        );
        row(
            &mut s,
            &format!("raw {alg} compress"),
            f("raw_compress_pages_per_s"),
            cpu_us("raw_compress"),
            None,
            None,
        );
        if kernel {
            row(
                &mut s,
                "kernel zram write (1 MiB)",
                f("kernel_zram_write_pages_per_s"),
                cpu_us("kernel_zram_write"),
                None,
                None,
            );
        }
        row(
            &mut s,
            "load (uzswap cache)",
            f("load_pages_per_s"),
            cpu_us("load"),
            Some(f("load_vs_raw_decompress")),
            vk("load_vs_zram_read"),
        );
        row(
            &mut s,
            &format!("raw {alg} decompress"),
            f("raw_decompress_pages_per_s"),
            cpu_us("raw_decompress"),
            None,
            None,
        );
        if kernel {
            row(
                &mut s,
                "kernel zram read (1 MiB)",
                f("kernel_zram_read_pages_per_s"),
                cpu_us("kernel_zram_read"),
                None,
                None,
            );
        }
        row(
            &mut s,
            "invalidate",
            f("invalidate_pages_per_s"),
            cpu_us("invalidate"),
            None,
            None,
        );
        if kernel && threads > 1 {
            let _ = writeln!(
                s,
                "  (zram is written and read by one thread; its ratios compare {threads} threads with it)"
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "  memory: pool {:.2} MiB = {:.3} of the stored data; {:.1} B metadata per entry; {} pages stored, {} zero, {} stored raw",
            mib(f("pool_total_size")),
            f("pool_vs_orig"),
            f("metadata_bytes_per_entry"),
            j["stored_pages"],
            j["zero_pages"],
            j["stored_incompressible_pages"],
        );
        if kernel {
            let mm = &j["kernel_zram_mm_stat"];
            let _ = writeln!(
                s,
                "  kernel zram ({alg}): mem_used_total {:.2} MiB = {:.3} of the data; compr_data_size {:.2} MiB; same_pages {}, huge_pages {}",
                mib(mm["mem_used_total"].as_f64().unwrap_or(0.0)),
                f("kernel_zram_mem_used_vs_orig"),
                mib(mm["compr_data_size"].as_f64().unwrap_or(0.0)),
                mm["same_pages"],
                mm["huge_pages"],
            );
        } else if let Some(why) = kernel_skipped {
            let _ = writeln!(s, "  kernel zram comparison skipped: {why}");
        }
        if j["rejected_to_swap_file"].as_u64().unwrap_or(0) > 0 {
            let _ = writeln!(
                s,
                "  pool limit: {} pages went to the swap file, {} loads came from it",
                j["rejected_to_swap_file"], j["loaded_from_swap_file"]
            );
        }
        // Wall time far above CPU time means other processes took the CPUs during the phases.
        let busy = (1e9 / f("store_pages_per_s"))
            / j["cpu_ns_per_page"]["store"].as_f64().unwrap_or(f64::NAN);
        if busy > 1.3 {
            let _ = writeln!(
                s,
                "  note: the machine was busy (store wall time {busy:.1}x its CPU time); the CPU column \
                 is the steadier comparison, or rerun under `chrt -f 10`"
            );
        }
        let verified = j["verified"].as_bool().unwrap_or(false);
        let _ = writeln!(
            s,
            "  verified: {}",
            if verified {
                if kernel {
                    "every page read back bit-identical, from the cache and from zram"
                } else {
                    "every page read back bit-identical"
                }
            } else {
                "FAILED: some pages did not read back bit-identical"
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything() {
        for (n, p) in [(10, 3), (1, 1), (7, 7), (100, 2)] {
            let r = split(n, p);
            assert_eq!(r.len(), p);
            assert_eq!(r[0].start, 0);
            assert_eq!(r[p - 1].end, n);
            assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        }
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn raw_corpus_is_padded() {
        let dir = std::env::temp_dir().join(format!("uzswap-bench-pad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("raw");
        let exe = std::fs::read("/proc/self/exe").unwrap();
        std::fs::write(&p, &exe[..PAGE_SIZE * 2 + 100]).unwrap();
        let pages = read_corpus(&p).unwrap();
        assert_eq!(pages.len(), 3);
        assert_eq!(
            &pages.page(2)[..100],
            &exe[PAGE_SIZE * 2..PAGE_SIZE * 2 + 100]
        );
        assert!(pages.page(2)[100..].iter().all(|&b| b == 0));
        std::fs::write(&p, b"").unwrap();
        assert!(read_corpus(&p).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
