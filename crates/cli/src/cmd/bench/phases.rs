// SPDX-License-Identifier: MIT
//! One run of the bench: every phase, timed, over the same pages.
//!
//! Order within a run (each pair of compared phases back to back):
//! 1. raw compress;
//! 2. **cold pair**: store into an empty cache created for this run, then write a freshly
//!    reset zram device;
//! 3. **warm pair**: store into the bench's long-lived cache (it has held the corpus before and
//!    its freed memory is still resident), then rewrite the same zram sectors without a reset;
//! 4. load in slot order, raw decompress in slot order;
//! 5. load in a fixed random order, raw decompress in the same order;
//! 6. zram read; invalidate.
//!
//! Nothing that a side would not pay in production is inside a timed region: the zram side
//! writes from and reads into page-aligned buffers prepared before the clock starts (as a
//! swap device gets page-aligned pages), the cache side reads the corpus in place and loads
//! into pre-touched destinations; verification happens after each phase.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use uzswap_backing::{BackingStore, MemStore, SwapFile, SwapSlot};
use uzswap_compress::MAX_COMPRESSED_LEN;
use uzswap_corpus::{Pages, PAGE_SIZE};
use uzswap_kernel::zram::{AlignedBuf, MmStat};
use uzswap_zswap::{CgroupId, LoadOutcome, Params, StoreOutcome, Zswap};

use super::kernel::KernelSide;
use super::prep::Compressed;
use super::{Args, Backing};
use crate::shared::timing::{parallel, split_mut, timed, PhaseTime};

/// Speed (pages per second of wall time) and CPU nanoseconds per page of one phase.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Phase {
    pub(super) rate: f64,
    pub(super) cpu_ns: f64,
}

impl Phase {
    fn of(t: PhaseTime, pages: usize) -> Phase {
        Phase {
            rate: t.rate(pages),
            cpu_ns: t.cpu_per_item(pages),
        }
    }
}

/// The zram phases of one run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ZramPhases {
    /// Write to a freshly reset device.
    pub(super) write_cold: Phase,
    /// Rewrite of the same sectors, no reset in between.
    pub(super) write_warm: Phase,
    pub(super) read: Phase,
}

/// Everything measured in one run.
#[derive(Default, Clone)]
pub(super) struct RunResult {
    pub(super) raw_compress: Phase,
    /// Store into an empty cache.
    pub(super) store_cold: Phase,
    /// Store into the long-lived cache.
    pub(super) store: Phase,
    /// Load in slot order.
    pub(super) load: Phase,
    pub(super) raw_decompress: Phase,
    /// Load in the bench's fixed random order.
    pub(super) load_random: Phase,
    pub(super) raw_decompress_random: Phase,
    /// One dependent memory read, right after the random-order pair (`PointerChase`; NaN when
    /// not measured).
    pub(super) memory_latency_ns: f64,
    pub(super) invalidate: Phase,
    /// `None` when the kernel comparison is skipped.
    pub(super) zram: Option<ZramPhases>,
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
    /// zram's `mm_stat` after the write to the fresh device.
    pub(super) mm_stat: Option<MmStat>,
    /// The backing swap file's counters after the slot-order load phase.
    pub(super) swap_stats: uzswap_backing::BackingStats,
}

/// A cache with its backing store (a swap file, or memory with `--backing memory`) and one
/// slot per page. The bench keeps one for all runs, as a
/// long-running process has: every run ends by invalidating all it stored, so the next run
/// stores into a pool whose freed memory is still resident (see `uzswap_zswap`'s pool memory
/// policy), the way zram's rewrite of the same sectors reuses its pool. Each run also creates
/// an empty one for the cold store.
pub(super) struct CacheUnderTest {
    pub(super) z: Zswap,
    pub(super) swap: Arc<dyn BackingStore>,
    pub(super) slots: Vec<SwapSlot>,
}

/// Buffers the zram phases use, allocated and touched once before any clock starts.
pub(super) struct ZramBuffers {
    /// The corpus, page-aligned.
    src: AlignedBuf,
    /// Where reads land.
    dst: AlignedBuf,
}

impl ZramBuffers {
    pub(super) fn new(pages: &Pages) -> ZramBuffers {
        ZramBuffers {
            src: AlignedBuf::copy_of(pages.as_bytes()),
            dst: AlignedBuf::new(pages.as_bytes().len()),
        }
    }
}

pub(super) struct Bench<'a> {
    pub(super) args: &'a Args,
    pub(super) pages: &'a Pages,
    pub(super) comp: &'a Compressed,
    /// Page ranges, one per thread.
    pub(super) ranges: Vec<Range<usize>>,
    /// A fixed permutation of the page indices: the order of the random-order phases. Thread
    /// `t` takes the positions `ranges[t]` of it.
    pub(super) order: Vec<usize>,
    pub(super) swap_dir: PathBuf,
    pub(super) params: Params,
    pub(super) use_swap_out: bool,
    /// The memory-latency reference (`None`: not measured, as in `--scaling`).
    pub(super) chase: Option<&'a PointerChase>,
}

/// What the threads of a store phase saw.
struct StoreOutcomes {
    rejected: u64,
    failed: u64,
}

/// What the threads of a load phase saw.
struct LoadOutcomes {
    from_file: u64,
    errors: usize,
}

/// splitmix64 from `seed`: the bench's fixed pseudo-random stream.
fn splitmix(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A permutation of `0..n` from a fixed seed (splitmix64 driving Fisher-Yates), the same in
/// every run and invocation.
pub(super) fn random_order(n: usize) -> Vec<usize> {
    let mut next = splitmix(0x9E37_79B9_7F4A_7C15);
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Bytes the pointer chase walks: twice this machine class's last-level cache (32 MiB), so
/// nearly every step misses it, as a random-order load's first access does.
const CHASE_BYTES: usize = 64 << 20;
/// u64 words per 64-byte line; the chase reads the first word of each line.
const LINE_WORDS: usize = 8;
/// Steps timed per run (about 20 ms at 100 ns a step).
const CHASE_STEPS: usize = 200_000;

/// The reference for the cost of a load in random order: the time of one dependent memory
/// read, a pointer chase along one random cycle through the 64-byte lines of a buffer larger
/// than the last-level cache, timed in every run right after the random-order pair. A load in
/// random order waits on one such miss (its slot's index line) before it can start the misses
/// the raw decompressor also has (the handle entry's address comes out of the index entry),
/// so its overhead in ns follows this machine's memory latency, which on a shared host moves
/// with the neighbours' load; the report gives the overhead in these units too. The buffer is
/// on 4 KiB pages, as the cache's index is, so a step also pays a TLB miss as that read does.
pub(super) struct PointerChase {
    next: Vec<u64>,
}

impl PointerChase {
    pub(super) fn new() -> PointerChase {
        PointerChase::with_lines(CHASE_BYTES / 64)
    }

    fn with_lines(lines: usize) -> PointerChase {
        // Sattolo's shuffle: a single cycle through every line, from a fixed seed.
        let mut perm: Vec<u32> = (0..lines as u32).collect();
        let mut rng = splitmix(0x2545_F491_4F6C_DD1D);
        for i in (1..lines).rev() {
            let j = (rng() % i as u64) as usize;
            perm.swap(i, j);
        }
        let mut next = vec![0u64; lines * LINE_WORDS];
        for (i, &p) in perm.iter().enumerate() {
            next[i * LINE_WORDS] = u64::from(p);
        }
        PointerChase { next }
    }

    /// Nanoseconds per step of `CHASE_STEPS` dependent reads.
    pub(super) fn measure(&self) -> f64 {
        let mut i = 0usize;
        let t = std::time::Instant::now();
        for _ in 0..CHASE_STEPS {
            i = self.next[i * LINE_WORDS] as usize;
        }
        let ns = t.elapsed().as_nanos() as f64 / CHASE_STEPS as f64;
        std::hint::black_box(i);
        ns
    }
}

impl Bench<'_> {
    /// A new, empty cache with its backing store and one slot per page.
    pub(super) fn cache(&self) -> anyhow::Result<CacheUnderTest> {
        let n = self.pages.len();
        let swap: Arc<dyn BackingStore> = if self.args.backing == Backing::Memory {
            Arc::new(MemStore::new(0, n as u64).context("creating the memory backing store")?)
        } else {
            Arc::new(
                SwapFile::create_temp(&self.swap_dir, 0, n as u64).with_context(|| {
                    format!("creating a swap file in {}", self.swap_dir.display())
                })?,
            )
        };
        let slots: Vec<SwapSlot> = (0..n)
            .map(|_| swap.alloc_slot())
            .collect::<Result<_, _>>()
            .context("allocating swap slots")?;
        let z = Zswap::new(self.params.clone()).context("creating the cache")?;
        z.add_backing_store(swap.clone())
            .context("adding the backing store")?;
        Ok(CacheUnderTest { z, swap, slots })
    }

    /// Stores every page into `cache`, one thread per range; fails if a page could be stored
    /// nowhere, or was rejected although the limit was set to fit the corpus.
    fn store_all(&self, cache: &CacheUnderTest) -> anyhow::Result<(PhaseTime, u64)> {
        let CacheUnderTest { z, slots, .. } = cache;
        let (d, outs) = parallel(self.ranges.clone(), |range| {
            let mut o = StoreOutcomes {
                rejected: 0,
                failed: 0,
            };
            for i in range {
                let page = self.pages.page(i);
                if self.use_swap_out {
                    match z.swap_out(slots[i], page, CgroupId::ROOT) {
                        Ok(StoreOutcome::Rejected(_)) => o.rejected += 1,
                        Ok(_) => {}
                        Err(_) => o.failed += 1,
                    }
                } else if let StoreOutcome::Rejected(_) = z.store(slots[i], page, CgroupId::ROOT) {
                    o.rejected += 1;
                }
            }
            o
        });
        let failed: u64 = outs.iter().map(|o| o.failed).sum();
        let rejected: u64 = outs.iter().map(|o| o.rejected).sum();
        if failed > 0 {
            bail!("{failed} pages could be stored neither in the cache nor in the swap file");
        }
        if !self.use_swap_out && rejected > 0 {
            bail!(
                "the cache rejected {rejected} pages although the limit was set to fit the corpus"
            );
        }
        Ok((d, rejected))
    }

    /// Loads every page from `cache` in the order `order` gives (position `k` of a thread's
    /// range loads page `order(k)` into the `k`-th page of that thread's destination), then
    /// counts mismatches against the corpus outside the timed phase.
    fn load_all(
        &self,
        cache: &CacheUnderTest,
        dest: &mut [u8],
        order: impl Fn(usize) -> usize + Sync,
    ) -> (PhaseTime, LoadOutcomes, usize) {
        let CacheUnderTest { z, slots, .. } = cache;
        let exclusive = self.args.exclusive;
        let order = &order;
        let (d, outs) = parallel(
            self.ranges
                .iter()
                .cloned()
                .zip(split_mut(dest, &self.ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                let mut o = LoadOutcomes {
                    from_file: 0,
                    errors: 0,
                };
                for (k, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    match z.load(slots[order(k)], page, exclusive) {
                        Ok(LoadOutcome::Hit) => {}
                        Ok(LoadOutcome::FromSwapFile) => o.from_file += 1,
                        Ok(LoadOutcome::Absent) | Err(_) => o.errors += 1,
                    }
                }
                o
            },
        );
        let total = LoadOutcomes {
            from_file: outs.iter().map(|o| o.from_file).sum(),
            errors: outs.iter().map(|o| o.errors).sum(),
        };
        (d, total, self.mismatches(dest, order))
    }

    /// Decompresses every page's compressed copy in the order `order` gives, like
    /// [`Bench::load_all`]; fails unless the corpus comes back.
    fn raw_decompress_all(
        &self,
        dest: &mut [u8],
        order: impl Fn(usize) -> usize + Sync,
    ) -> anyhow::Result<PhaseTime> {
        let alg = self.args.compressor;
        let order = &order;
        let (d, errs) = parallel(
            self.ranges
                .iter()
                .cloned()
                .zip(split_mut(dest, &self.ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                let mut errors = 0usize;
                for (k, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    let (off, len) = self.comp.spans[order(k)];
                    let src = &self.comp.data[off..off + len];
                    if uzswap_compress::decompress(alg, src, page).ok() != Some(PAGE_SIZE) {
                        errors += 1;
                    }
                }
                errors
            },
        );
        if errs.iter().sum::<usize>() > 0 || self.mismatches(dest, order) > 0 {
            bail!("{alg}: raw decompression did not reproduce the corpus");
        }
        Ok(d)
    }

    /// Pages of `dest` (page `k` holding corpus page `order(k)`) that differ from the corpus.
    fn mismatches(&self, dest: &[u8], order: impl Fn(usize) -> usize) -> usize {
        dest.chunks_exact(PAGE_SIZE)
            .enumerate()
            .filter(|(k, p)| *p != self.pages.page(order(*k)))
            .count()
    }

    /// One run. `cache` is the long-lived cache; `zram` holds the zram side and its buffers
    /// when the kernel comparison runs.
    pub(super) fn run(
        &self,
        cache: &CacheUnderTest,
        mut zram: Option<(&mut KernelSide, &mut ZramBuffers)>,
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
        r.raw_compress = Phase::of(d, n);
        let total: usize = sizes.iter().sum();
        if total != self.comp.spans.iter().map(|s| s.1).sum::<usize>() {
            bail!("{alg} compressed the corpus to a different size on a second pass");
        }

        // Cold pair: an empty cache, a freshly reset zram device.
        {
            let fresh = self.cache()?;
            let (d, _) = self.store_all(&fresh)?;
            r.store_cold = Phase::of(d, n);
        }
        let mut zr = ZramPhases::default();
        if let Some((k, bufs)) = zram.as_mut() {
            let disksize = ((n * PAGE_SIZE) as u64).div_ceil(1 << 20) << 20;
            k.zram
                .configure(alg.kernel_name(), disksize)
                .context("configuring zram")?;
            let (d, res) = timed(|| k.zram.write_direct(0, &bufs.src[..n * PAGE_SIZE]));
            res.context("writing the corpus to zram")?;
            zr.write_cold = Phase::of(d, n);
            r.mm_stat = Some(k.zram.mm_stat().context("reading zram mm_stat")?);
        }

        // Warm pair: the long-lived cache, the same zram sectors rewritten.
        let (d, rejected) = self.store_all(cache)?;
        r.store = Phase::of(d, n);
        r.rejected_to_swap_file = rejected;
        let c = cache.z.counters();
        r.pool_total_size = c.pool_total_size;
        r.stored_pages = c.stored_pages;
        r.zero_pages = c.zero_pages;
        r.stored_incompressible = c.stored_incompressible_pages;
        r.metadata_bytes_per_entry = cache.z.metadata_bytes_per_entry();
        if let Some((k, bufs)) = zram.as_mut() {
            let (d, res) = timed(|| k.zram.write_direct(0, &bufs.src[..n * PAGE_SIZE]));
            res.context("rewriting the corpus to zram")?;
            zr.write_warm = Phase::of(d, n);
        }

        // Slot order: load straight into a separate, pre-touched destination, then the raw
        // decompression into the same.
        let mut dest = vec![0xA5u8; n * PAGE_SIZE];
        let (d, outs, mismatched) = self.load_all(cache, &mut dest, |k| k);
        r.load = Phase::of(d, n);
        r.loaded_from_swap_file = outs.from_file;
        r.load_errors = outs.errors;
        r.mismatched_pages = mismatched;
        r.swap_stats = cache.swap.stats();
        dest.fill(0x5A);
        r.raw_decompress = Phase::of(self.raw_decompress_all(&mut dest, |k| k)?, n);

        // Random order: exclusive loads freed every entry, so store them again (untimed).
        if self.args.exclusive {
            self.store_all(cache)?;
        }
        dest.fill(0xA5);
        let order = |k: usize| self.order[k];
        let (d, outs, mismatched) = self.load_all(cache, &mut dest, order);
        r.load_random = Phase::of(d, n);
        r.load_errors += outs.errors;
        r.mismatched_pages += mismatched;
        r.verified = r.mismatched_pages == 0 && r.load_errors == 0;
        dest.fill(0x5A);
        r.raw_decompress_random = Phase::of(self.raw_decompress_all(&mut dest, order)?, n);
        r.memory_latency_ns = self.chase.map_or(f64::NAN, PointerChase::measure);

        // zram read into the aligned destination (touched by the fill), then verify.
        if let Some((k, bufs)) = zram {
            let out = &mut bufs.dst[..n * PAGE_SIZE];
            out.fill(0x3C);
            let (d, res) = timed(|| k.zram.read_direct(0, out));
            res.context("reading the corpus back from zram")?;
            zr.read = Phase::of(d, n);
            r.zram_verified = Some(*out == *self.pages.as_bytes());
            r.zram = Some(zr);
            k.zram.reset().context("resetting zram")?;
        }

        // Invalidate what is left (everything unless loads were exclusive).
        let (d, _) = parallel(self.ranges.clone(), |range| {
            for i in range {
                cache.z.invalidate(cache.slots[i]);
            }
        });
        r.invalidate = Phase::of(d, n);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pointer_chase_is_one_cycle_through_every_line() {
        let lines = 4096;
        let c = PointerChase::with_lines(lines);
        let mut seen = vec![false; lines];
        let mut i = 0usize;
        for _ in 0..lines {
            assert!(!seen[i], "line {i} visited twice");
            seen[i] = true;
            i = c.next[i * LINE_WORDS] as usize;
        }
        assert_eq!(i, 0, "the walk returns to its start after every line");
        assert!(seen.iter().all(|&s| s));
        assert!(c.measure() > 0.0);
    }

    #[test]
    fn random_order_is_a_fixed_permutation() {
        let a = random_order(1000);
        assert_eq!(a, random_order(1000), "the same order every time");
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        // Not the identity, and far from sorted: few positions keep their page.
        assert!(a.iter().enumerate().filter(|(i, p)| i == *p).count() < 10);
        assert!(random_order(0).is_empty());
        assert_eq!(random_order(1), [0]);
    }
}
