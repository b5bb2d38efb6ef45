// SPDX-License-Identifier: MIT
//! `uzswap bench --scaling`: every public operation of the cache on one thread and on
//! `--threads` threads (at least two), each pair back to back, next to the raw codec's scaling
//! measured the same way in the same run: what the machine gives two threads is the
//! reference, not a fixed 2×.
//!
//! Operations, each over the whole corpus with the pages split into one contiguous range per
//! thread (as `uzswap bench` splits them):
//! - `store` into the long-lived cache (reference: raw compress);
//! - `load` in slot order and `load_random` in the bench's fixed random order (reference: raw
//!   decompress in the same order);
//! - `invalidate` (reference: raw compress, the machine's scaling on pure computation: an
//!   invalidation runs no codec);
//! - `writeback`: every thread runs the memory-pressure shrinker on the one LRU list (the
//!   kernel's concurrent reclaimers on one `list_lru`), 32 entries per scan, until every entry
//!   went to the swap file; the entries were stored and had their referenced bits cleared by
//!   one untimed scan first (reference: raw decompress; a writeback decompresses and writes);
//! - `mixed`: each thread runs its own fixed stream of 60 % loads, 30 % stores and 10 %
//!   invalidations of random slots of its range, half of them stored beforehand (reference:
//!   the raw codec running the same streams: decompress for a load, compress for a store).
//!
//! Scaling = pages (or operations) per second of wall time with N threads ÷ with one thread;
//! the report gives the median over runs of each per-run scaling, its range, and the
//! reference's.

use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};

use anyhow::bail;
use serde_json::{json, Value};
use uzswap_compress::MAX_COMPRESSED_LEN;
use uzswap_corpus::PAGE_SIZE;
use uzswap_zswap::{CgroupId, LoadOutcome};

use super::phases::{Bench, CacheUnderTest};
use crate::shared::timing::{median, parallel, split, split_mut, PhaseTime};

/// The k-th page a phase visits: slot order or the fixed random order.
type PageOrder<'a> = &'a (dyn Fn(usize) -> usize + Sync);

/// The operations, in report order, each with the name of its reference.
pub(super) const OPS: [(&str, &str); 6] = [
    ("store", "raw_compress"),
    ("load", "raw_decompress"),
    ("load_random", "raw_decompress_random"),
    ("invalidate", "raw_compress"),
    ("writeback", "raw_decompress"),
    ("mixed", "raw_mixed"),
];

/// Entries per shrinker scan in the writeback phase.
const WRITEBACK_BATCH: u64 = 32;

/// One run: per operation (and per reference), items per second with one thread and with N.
#[derive(Clone, Debug, Default)]
pub(super) struct ScalingRun {
    /// `(name, one thread, N threads)`.
    pub(super) rates: Vec<(&'static str, f64, f64)>,
    pub(super) verified: bool,
}

impl ScalingRun {
    fn rate(&self, name: &str) -> Option<(f64, f64)> {
        self.rates.iter().find(|r| r.0 == name).map(|r| (r.1, r.2))
    }
}

/// An operation of a mixed stream.
#[derive(Clone, Copy)]
enum MixedOp {
    Load(usize),
    Store(usize),
    Invalidate(usize),
}

/// Each thread's fixed stream over its range: twice as many operations as pages, 60 % loads,
/// 30 % stores, 10 % invalidations, of slots drawn uniformly from the range (splitmix64 from a
/// seed per range, the same in every run).
fn mixed_streams(ranges: &[Range<usize>]) -> Vec<Vec<MixedOp>> {
    ranges
        .iter()
        .map(|r| {
            let mut state = 0x5EED_0000_0000_0000u64 ^ r.start as u64;
            let mut next = move || {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            (0..2 * r.len())
                .map(|_| {
                    let x = next();
                    let i = r.start + ((x >> 8) % r.len() as u64) as usize;
                    match x % 10 {
                        0..=5 => MixedOp::Load(i),
                        6..=8 => MixedOp::Store(i),
                        _ => MixedOp::Invalidate(i),
                    }
                })
                .collect()
        })
        .collect()
}

impl Bench<'_> {
    /// Runs `setup` (untimed) then `phase` with one thread, then both with `threads`; returns
    /// both rates (items per second).
    fn pair(
        &self,
        threads: usize,
        mut setup: impl FnMut(&[Range<usize>]),
        mut phase: impl FnMut(&[Range<usize>]) -> anyhow::Result<(PhaseTime, usize)>,
    ) -> anyhow::Result<(f64, f64)> {
        let n = self.pages.len();
        let mut rate = |t: usize| -> anyhow::Result<f64> {
            let ranges = split(n, t);
            setup(&ranges);
            let (d, items) = phase(&ranges)?;
            Ok(d.rate(items))
        };
        let one = rate(1)?;
        Ok((one, rate(threads)?))
    }

    fn store_ranges(&self, cache: &CacheUnderTest, ranges: &[Range<usize>]) -> PhaseTime {
        let CacheUnderTest { z, slots, .. } = cache;
        parallel(ranges.to_vec(), |range| {
            for i in range {
                z.store(slots[i], self.pages.page(i), CgroupId::ROOT);
            }
        })
        .0
    }

    fn invalidate_ranges(&self, cache: &CacheUnderTest, ranges: &[Range<usize>]) -> PhaseTime {
        let CacheUnderTest { z, slots, .. } = cache;
        parallel(ranges.to_vec(), |range| {
            for i in range {
                z.invalidate(slots[i]);
            }
        })
        .0
    }

    /// Loads every page (position `k` loads page `order(k)`); counts pages that did not come
    /// back bit-identical.
    fn load_ranges(
        &self,
        cache: &CacheUnderTest,
        ranges: &[Range<usize>],
        dest: &mut [u8],
        order: PageOrder<'_>,
    ) -> (PhaseTime, usize) {
        let CacheUnderTest { z, slots, .. } = cache;
        let (d, _) = parallel(
            ranges
                .iter()
                .cloned()
                .zip(split_mut(dest, ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                for (k, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    let _ = z.load(slots[order(k)], page, false);
                }
            },
        );
        let bad = dest
            .chunks_exact(PAGE_SIZE)
            .enumerate()
            .filter(|(k, p)| *p != self.pages.page(order(*k)))
            .count();
        (d, bad)
    }

    fn raw_compress_ranges(&self, ranges: &[Range<usize>]) -> PhaseTime {
        let alg = self.args.compressor;
        parallel(ranges.to_vec(), |range| {
            let mut dst = vec![0u8; MAX_COMPRESSED_LEN.max(alg.max_compressed_len(PAGE_SIZE))];
            for i in range {
                std::hint::black_box(uzswap_compress::compress(alg, self.pages.page(i), &mut dst))
                    .ok();
            }
        })
        .0
    }

    fn raw_decompress_ranges(
        &self,
        ranges: &[Range<usize>],
        dest: &mut [u8],
        order: PageOrder<'_>,
    ) -> PhaseTime {
        let alg = self.args.compressor;
        parallel(
            ranges
                .iter()
                .cloned()
                .zip(split_mut(dest, ranges, PAGE_SIZE))
                .collect(),
            |(range, out): (Range<usize>, &mut [u8])| {
                for (k, page) in range.zip(out.chunks_exact_mut(PAGE_SIZE)) {
                    let (off, len) = self.comp.spans[order(k)];
                    let _ = uzswap_compress::decompress(alg, &self.comp.data[off..off + len], page);
                }
            },
        )
        .0
    }

    /// Every entry of `cache` written back by `ranges.len()` threads scanning the one LRU
    /// list; returns the time and the entries written back.
    fn writeback_ranges(
        &self,
        cache: &CacheUnderTest,
        ranges: &[Range<usize>],
    ) -> anyhow::Result<(PhaseTime, u64)> {
        let z = &cache.z;
        self.store_ranges(cache, ranges);
        let on_list = z.lru_slots(CgroupId::ROOT, 0).len() as u64;
        // Second chance: a new entry is referenced; one pass clears every bit.
        let pass = z.shrinker_scan(CgroupId::ROOT, 0, on_list);
        if pass.freed != 0 {
            bail!("the referenced-bit pass wrote back {} entries", pass.freed);
        }
        let before = z.counters().written_back_pages;
        let left = AtomicI64::new(on_list as i64);
        let (d, _) = parallel(ranges.to_vec(), |_| {
            while left.load(Ordering::Relaxed) > 0 {
                let s = z.shrinker_scan(CgroupId::ROOT, 0, WRITEBACK_BATCH);
                left.fetch_sub(s.freed as i64, Ordering::Relaxed);
                if s.scanned == 0 {
                    break;
                }
            }
        });
        let written = z.counters().written_back_pages - before;
        self.invalidate_ranges(cache, ranges);
        if written != on_list {
            bail!("writeback wrote {written} of the {on_list} entries on the list");
        }
        Ok((d, written))
    }

    /// Runs each thread's mixed stream against the cache (or, `raw`, the codec alone); half the
    /// slots hold their page beforehand. Returns the time and whether every load that hit
    /// (checked after the phase, from a final pass) read its page back.
    fn mixed_ranges(
        &self,
        cache: &CacheUnderTest,
        ranges: &[Range<usize>],
        raw: bool,
    ) -> (PhaseTime, bool) {
        let CacheUnderTest { z, slots, .. } = cache;
        let alg = self.args.compressor;
        let streams = mixed_streams(ranges);
        if !raw {
            parallel(ranges.to_vec(), |range| {
                for i in range.step_by(2) {
                    z.store(slots[i], self.pages.page(i), CgroupId::ROOT);
                }
            });
        }
        let (d, _) = parallel(streams, |ops| {
            let mut page = vec![0u8; PAGE_SIZE];
            let mut buf = vec![0u8; MAX_COMPRESSED_LEN.max(alg.max_compressed_len(PAGE_SIZE))];
            for op in ops {
                match (op, raw) {
                    (MixedOp::Load(i), false) => {
                        let _ = z.load(slots[i], &mut page, false);
                    }
                    (MixedOp::Store(i), false) => {
                        z.store(slots[i], self.pages.page(i), CgroupId::ROOT);
                    }
                    (MixedOp::Invalidate(i), false) => z.invalidate(slots[i]),
                    (MixedOp::Load(i), true) => {
                        let (off, len) = self.comp.spans[i];
                        let _ = uzswap_compress::decompress(
                            alg,
                            &self.comp.data[off..off + len],
                            &mut page,
                        );
                    }
                    (MixedOp::Store(i), true) => {
                        std::hint::black_box(uzswap_compress::compress(
                            alg,
                            self.pages.page(i),
                            &mut buf,
                        ))
                        .ok();
                    }
                    (MixedOp::Invalidate(_), true) => {}
                }
            }
        });
        if raw {
            return (d, true);
        }
        // Whatever the streams left: every stored page must read back as itself.
        let mut ok = true;
        let mut page = vec![0u8; PAGE_SIZE];
        for (i, &slot) in slots.iter().enumerate() {
            match z.load(slot, &mut page, false) {
                Ok(LoadOutcome::Hit) => ok &= page == self.pages.page(i),
                Ok(LoadOutcome::Absent) => {}
                _ => ok = false,
            }
            z.invalidate(slot);
        }
        (d, ok)
    }

    /// One scaling run over `cache` (empty on entry and on return).
    pub(super) fn scaling_run(
        &self,
        cache: &CacheUnderTest,
        threads: usize,
    ) -> anyhow::Result<ScalingRun> {
        let n = self.pages.len();
        let mut r = ScalingRun {
            rates: Vec::new(),
            verified: true,
        };
        let mut dest = vec![0xA5u8; n * PAGE_SIZE];
        let slot_order = |k: usize| k;
        let random = |k: usize| self.order[k];
        let none = |_: &[Range<usize>]| {};
        let empty = |rg: &[Range<usize>]| {
            self.invalidate_ranges(cache, rg);
        };
        let fill = |rg: &[Range<usize>]| {
            if cache.z.counters().stored_pages == 0 {
                self.store_ranges(cache, rg);
            }
        };

        let rc = self.pair(threads, none, |rg| Ok((self.raw_compress_ranges(rg), n)))?;
        r.rates.push(("raw_compress", rc.0, rc.1));
        let st = self.pair(threads, empty, |rg| Ok((self.store_ranges(cache, rg), n)))?;
        r.rates.push(("store", st.0, st.1));
        if cache.z.counters().stored_pages + cache.z.counters().zero_pages != n as u64 {
            bail!("the cache did not take every page");
        }

        let mut bad = 0;
        // Each load order next to raw decompression in the same order.
        let orders: [(&str, &str, PageOrder<'_>); 2] = [
            ("raw_decompress", "load", &slot_order),
            ("raw_decompress_random", "load_random", &random),
        ];
        for (raw_name, load_name, order) in orders {
            let rd = self.pair(threads, none, |rg| {
                Ok((self.raw_decompress_ranges(rg, &mut dest, order), n))
            })?;
            r.rates.push((raw_name, rd.0, rd.1));
            let l = self.pair(threads, none, |rg| {
                let (d, b) = self.load_ranges(cache, rg, &mut dest, order);
                bad += b;
                Ok((d, n))
            })?;
            r.rates.push((load_name, l.0, l.1));
        }
        r.verified &= bad == 0;

        let inv = self.pair(threads, fill, |rg| {
            Ok((self.invalidate_ranges(cache, rg), n))
        })?;
        r.rates.push(("invalidate", inv.0, inv.1));
        let wb = self.pair(threads, none, |rg| {
            let (d, w) = self.writeback_ranges(cache, rg)?;
            Ok((d, w as usize))
        })?;
        r.rates.push(("writeback", wb.0, wb.1));

        let mut mixed_ok = true;
        let m = self.pair(threads, none, |rg| {
            let (d, ok) = self.mixed_ranges(cache, rg, false);
            mixed_ok &= ok;
            Ok((d, 2 * n))
        })?;
        r.rates.push(("mixed", m.0, m.1));
        let mr = self.pair(threads, none, |rg| {
            Ok((self.mixed_ranges(cache, rg, true).0, 2 * n))
        })?;
        r.rates.push(("raw_mixed", mr.0, mr.1));
        r.verified &= mixed_ok;
        Ok(r)
    }
}

/// The `--scaling` report: per operation, the median and range over runs of its scaling, next
/// to its reference's.
pub(super) fn report(
    bench: &Bench,
    threads: usize,
    runs: &[ScalingRun],
    machine: Value,
) -> (Value, String) {
    use std::fmt::Write;
    let scal = |name: &str| -> Vec<f64> {
        runs.iter()
            .filter_map(|r| r.rate(name))
            .map(|(one, many)| many / one)
            .collect()
    };
    let rate = |name: &str, which: usize| -> f64 {
        median(
            &runs
                .iter()
                .filter_map(|r| r.rate(name))
                .map(|(one, many)| if which == 0 { one } else { many })
                .collect::<Vec<_>>(),
        )
    };
    let range = |v: &[f64]| {
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let mut ops = serde_json::Map::new();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "uzswap bench --scaling: {} pages of {}\n  compressor {}, 1 vs {threads} threads, median of {} runs (after 1 warm-up)\n",
        bench.pages.len(),
        bench.pages.source(),
        bench.args.compressor,
        runs.len()
    );
    let _ = writeln!(
        text,
        "  {:<12} {:>12} {:>12} {:>9} {:>13}   {:<22} {:>9}",
        "operation",
        "1 thread/s",
        format!("{threads} threads/s"),
        "scaling",
        "range",
        "reference",
        "scaling"
    );
    for (name, reference) in OPS {
        let s = scal(name);
        let rs = scal(reference);
        let (lo, hi) = range(&s);
        ops.insert(
            name.to_string(),
            json!({
                "scaling": median(&s),
                "scaling_min": lo,
                "scaling_max": hi,
                "one_thread_per_s": rate(name, 0),
                "threads_per_s": rate(name, 1),
                "reference": reference,
                "reference_scaling": median(&rs),
                "samples": s,
                "reference_samples": rs,
            }),
        );
        let _ = writeln!(
            text,
            "  {:<12} {:>12.0} {:>12.0} {:>8.2}x {:>13}   {:<22} {:>8.2}x",
            name,
            rate(name, 0),
            rate(name, 1),
            median(&s),
            format!("{lo:.2}-{hi:.2}"),
            reference,
            median(&rs)
        );
    }
    let verified = runs.iter().all(|r| r.verified);
    let _ = writeln!(
        text,
        "\n  verified: {}",
        if verified {
            "every page read back bit-identical"
        } else {
            "MISMATCH: a page did not read back bit-identical"
        }
    );
    let j = json!({
        "mode": "scaling",
        "pages": bench.pages.len(),
        "corpus": bench.pages.source(),
        "compressor": bench.args.compressor.to_string(),
        "threads": threads,
        "runs": runs.len(),
        "verified": verified,
        "scaling": Value::Object(ops),
        "machine": machine,
    });
    (j, text)
}
