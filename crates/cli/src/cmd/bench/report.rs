// SPDX-License-Identifier: MIT
//! The bench's result: medians over the timed runs, as one JSON object (a contract: field
//! names are kept exactly) and as the table a person reads.

use serde_json::{json, Value};
use uzswap_corpus::{Pages, PAGE_SIZE};
use uzswap_kernel::zram::MmStat;

use super::phases::{Phase, RunResult, ZramPhases};
use super::prep::Compressed;
use super::Args;
use crate::shared::timing::{best, median, paired_median};

/// CPU model, CPU count and kernel release, so a saved JSON result says where it was measured.
pub(super) fn machine() -> Value {
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

pub(super) struct Report {
    pub(super) json: Value,
    pub(super) verified: bool,
    pub(super) text: String,
}

fn col<F: Fn(&RunResult) -> f64>(runs: &[RunResult], f: F) -> Vec<f64> {
    runs.iter().map(f).collect()
}

fn col_z(z: &[ZramPhases], f: impl Fn(&ZramPhases) -> f64) -> Vec<f64> {
    z.iter().map(f).collect()
}

impl Report {
    pub(super) fn new(
        args: &Args,
        pages: &Pages,
        comp: &Compressed,
        threads: usize,
        first: &RunResult,
        runs: &[RunResult],
        kernel_skipped: Option<String>,
    ) -> Report {
        let n = pages.len();
        let alg = args.compressor;
        let last = runs.last().expect("at least one run");
        let rate = |f: fn(&RunResult) -> Phase| col(runs, |r| f(r).rate);
        let cpu = |f: fn(&RunResult) -> Phase| median(&col(runs, |r| f(r).cpu_ns));
        let store = rate(|r| r.store);
        let store_cold = rate(|r| r.store_cold);
        let load = rate(|r| r.load);
        let load_random = rate(|r| r.load_random);
        let rc = rate(|r| r.raw_compress);
        let rd = rate(|r| r.raw_decompress);
        let rd_random = rate(|r| r.raw_decompress_random);
        let inv = rate(|r| r.invalidate);
        let zram: Option<Vec<ZramPhases>> = runs.iter().map(|r| r.zram).collect();
        let zero_in_corpus = pages.iter().filter(|p| p.iter().all(|&b| b == 0)).count();
        let orig = (n * PAGE_SIZE) as f64;
        let verified_cache = runs.iter().all(|r| r.verified);
        let verified_zram = runs.iter().all(|r| r.zram_verified != Some(false));
        let verified = verified_cache && verified_zram;
        let mut threads_per_side = json!({"cache": threads, "raw_codec": threads});
        if zram.is_some() {
            threads_per_side["kernel_zram"] = json!(1);
        }
        // Top-level ratios are ratios of the reported medians, so the table's columns agree
        // with each other.
        let mut j = json!({
            "pages": n,
            "corpus": pages.source(),
            "compressor": alg.to_string(),
            "threads": threads,
            "threads_per_side": threads_per_side,
            "runs": runs.len(),
            "verified": verified,
            "store_pages_per_s": median(&store),
            "load_pages_per_s": median(&load),
            "load_random_pages_per_s": median(&load_random),
            "raw_compress_pages_per_s": median(&rc),
            "raw_decompress_pages_per_s": median(&rd),
            "raw_decompress_random_pages_per_s": median(&rd_random),
            "invalidate_pages_per_s": median(&inv),
            "store_cold_pages_per_s": median(&store_cold),
            "store_cold_vs_raw_compress": median(&store_cold) / median(&rc),
            "store_pages_per_s_best": best(&store),
            "load_pages_per_s_best": best(&load),
            "store_vs_raw_compress": median(&store) / median(&rc),
            "load_vs_raw_decompress": median(&load) / median(&rd),
            "load_random_vs_raw_decompress_random": median(&load_random) / median(&rd_random),
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
                "store_cold_pages_per_s": store_cold,
                "load_pages_per_s": load,
                "load_random_pages_per_s": load_random,
                "raw_compress_pages_per_s": rc,
                "raw_decompress_pages_per_s": rd,
                "raw_decompress_random_pages_per_s": rd_random,
            },
        });
        // Per-run ratios, then their median: each pair of phases ran back to back, so a slow
        // spell of the machine that spans several runs cancels out of these.
        j["paired_ratios"] = json!({
            "store_vs_raw_compress": paired_median(&store, &rc),
            "load_vs_raw_decompress": paired_median(&load, &rd),
            "load_random_vs_raw_decompress_random": paired_median(&load_random, &rd_random),
        });
        // The cache's own cost per load: load time minus raw decompression time per page, per
        // run (the two ran back to back), median over runs; and the same per run in units of
        // that run's memory latency (one dependent read that misses the last-level cache): what
        // a random-order load's overhead is made of, whatever the host's latency was then.
        let per_run = |a: &[f64], b: &[f64]| -> Vec<f64> {
            a.iter().zip(b).map(|(x, y)| 1e9 / x - 1e9 / y).collect()
        };
        let (slot, random) = (per_run(&load, &rd), per_run(&load_random, &rd_random));
        let lat = col(runs, |r| r.memory_latency_ns);
        let in_latencies =
            |d: &[f64]| median(&d.iter().zip(&lat).map(|(d, l)| d / l).collect::<Vec<_>>());
        j["load_overhead_ns"] = json!({
            "slot_order": median(&slot),
            "random_order": median(&random),
        });
        j["memory_latency_ns"] = json!(median(&lat));
        j["load_overhead_memory_latencies"] = json!({
            "slot_order": in_latencies(&slot),
            "random_order": in_latencies(&random),
        });
        // The warm-up run's empty-cache store is the only one into a cache created in a fresh
        // process: its memory comes from the OS, not from a pool freed a moment ago.
        j["first_run"] = json!({
            "store_cold_pages_per_s": first.store_cold.rate,
            "raw_compress_pages_per_s": first.raw_compress.rate,
        });
        if let Some(z) = first.zram {
            j["first_run"]["kernel_zram_write_pages_per_s"] = json!(z.write_cold.rate);
            j["first_run"]["store_cold_vs_zram_write_cold"] =
                json!(first.store_cold.rate / z.write_cold.rate);
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
        // Speed ratios from CPU time (time the threads actually ran): robust on a busy machine.
        j["cpu_ns_per_page"] = json!({
            "raw_compress": cpu(|r| r.raw_compress),
            "store": cpu(|r| r.store),
            "store_cold": cpu(|r| r.store_cold),
            "load": cpu(|r| r.load),
            "load_random": cpu(|r| r.load_random),
            "raw_decompress": cpu(|r| r.raw_decompress),
            "raw_decompress_random": cpu(|r| r.raw_decompress_random),
            "invalidate": cpu(|r| r.invalidate),
        });
        j["store_vs_raw_compress_cpu"] = json!(cpu(|r| r.raw_compress) / cpu(|r| r.store));
        j["load_vs_raw_decompress_cpu"] = json!(cpu(|r| r.raw_decompress) / cpu(|r| r.load));
        let obj = j.as_object_mut().expect("object");
        if let Some(zram) = &zram {
            let zw = col_z(zram, |z| z.write_cold.rate);
            let zww = col_z(zram, |z| z.write_warm.rate);
            let zr = col_z(zram, |z| z.read.rate);
            let zcpu = |f: fn(&ZramPhases) -> f64| median(&col_z(zram, f));
            let mm = last.mm_stat.unwrap_or_default();
            let mm_obj: serde_json::Map<String, Value> = MmStat::FIELDS
                .iter()
                .zip(mm.values())
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            obj.insert("kernel_zram_write_pages_per_s".into(), json!(median(&zw)));
            obj.insert(
                "kernel_zram_write_warm_pages_per_s".into(),
                json!(median(&zww)),
            );
            obj.insert("kernel_zram_read_pages_per_s".into(), json!(median(&zr)));
            obj.insert("kernel_zram_mm_stat".into(), Value::Object(mm_obj));
            obj.insert("kernel_zram_verified".into(), json!(verified_zram));
            // Kept for continuity: the warm store against the fresh-device write. The two
            // pairs below compare like with like.
            obj.insert(
                "store_vs_zram_write".into(),
                json!(median(&store) / median(&zw)),
            );
            obj.insert(
                "store_cold_vs_zram_write_cold".into(),
                json!(median(&store_cold) / median(&zw)),
            );
            obj.insert(
                "store_warm_vs_zram_write_warm".into(),
                json!(median(&store) / median(&zww)),
            );
            obj.insert(
                "load_vs_zram_read".into(),
                json!(median(&load) / median(&zr)),
            );
            if let Some(p) = obj.get_mut("paired_ratios").and_then(Value::as_object_mut) {
                p.insert(
                    "store_vs_zram_write".into(),
                    json!(paired_median(&store, &zw)),
                );
                p.insert(
                    "store_cold_vs_zram_write_cold".into(),
                    json!(paired_median(&store_cold, &zw)),
                );
                p.insert(
                    "store_warm_vs_zram_write_warm".into(),
                    json!(paired_median(&store, &zww)),
                );
                p.insert("load_vs_zram_read".into(), json!(paired_median(&load, &zr)));
            }
            if let Some(c) = obj
                .get_mut("cpu_ns_per_page")
                .and_then(Value::as_object_mut)
            {
                c.insert(
                    "kernel_zram_write".into(),
                    json!(zcpu(|z| z.write_cold.cpu_ns)),
                );
                c.insert(
                    "kernel_zram_write_warm".into(),
                    json!(zcpu(|z| z.write_warm.cpu_ns)),
                );
                c.insert("kernel_zram_read".into(), json!(zcpu(|z| z.read.cpu_ns)));
            }
            obj.insert(
                "store_vs_zram_write_cpu".into(),
                json!(zcpu(|z| z.write_cold.cpu_ns) / cpu(|r| r.store)),
            );
            obj.insert(
                "load_vs_zram_read_cpu".into(),
                json!(zcpu(|z| z.read.cpu_ns) / cpu(|r| r.load)),
            );
            obj.insert(
                "kernel_zram_mem_used_vs_orig".into(),
                json!(mm.mem_used_total as f64 / orig),
            );
            obj.insert(
                "samples_kernel".into(),
                json!({
                    "zram_write_pages_per_s": zw,
                    "zram_write_warm_pages_per_s": zww,
                    "zram_read_pages_per_s": zr,
                }),
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

    pub(super) fn json(&self) -> &Value {
        &self.json
    }

    pub(super) fn text(&self) -> &str {
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
            "store, empty cache (cold)",
            f("store_cold_pages_per_s"),
            cpu_us("store_cold"),
            Some(f("store_cold_vs_raw_compress")),
            vk("store_cold_vs_zram_write_cold"),
        );
        row(
            &mut s,
            "store (uzswap cache)",
            f("store_pages_per_s"),
            cpu_us("store"),
            Some(f("store_vs_raw_compress")),
            vk("store_warm_vs_zram_write_warm"),
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
                "kernel zram write, fresh",
                f("kernel_zram_write_pages_per_s"),
                cpu_us("kernel_zram_write"),
                None,
                None,
            );
            row(
                &mut s,
                "kernel zram rewrite",
                f("kernel_zram_write_warm_pages_per_s"),
                cpu_us("kernel_zram_write_warm"),
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
        row(
            &mut s,
            "load, random order",
            f("load_random_pages_per_s"),
            cpu_us("load_random"),
            Some(f("load_random_vs_raw_decompress_random")),
            None,
        );
        row(
            &mut s,
            &format!("raw {alg} decomp., random"),
            f("raw_decompress_random_pages_per_s"),
            cpu_us("raw_decompress_random"),
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
        let _ = writeln!(
            s,
            "  (cold: an empty cache vs a freshly reset zram; warm: a cache that has held the corpus\n   \
             before vs zram rewriting the same sectors; loads in slot order, then in one fixed\n   \
             random order)"
        );
        if kernel && threads > 1 {
            let _ = writeln!(
                s,
                "  (zram is written and read by one thread; its ratios compare {threads} threads with it)"
            );
        }
        let _ = writeln!(
            s,
            "  per load over the raw decompressor: {:.0} ns in slot order, {:.0} ns in random order;\n   \
             one dependent memory read took {:.0} ns in the same runs ({:.2} of them in random order)",
            j["load_overhead_ns"]["slot_order"].as_f64().unwrap_or(f64::NAN),
            j["load_overhead_ns"]["random_order"].as_f64().unwrap_or(f64::NAN),
            f("memory_latency_ns"),
            j["load_overhead_memory_latencies"]["random_order"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
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
