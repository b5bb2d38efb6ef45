// SPDX-License-Identifier: MIT
//! `uzswap bench` as a user runs it, on small corpora made of real file pages (this test
//! binary's own bytes): the JSON contract of issue #3, verification, threads, the swap-file
//! path under a pool limit, bad input, and (with UZSWAP_KERNEL_TESTS=1) the zram comparison.

use std::io::Write as _; // skip notices bypass the test harness's output capture
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const PAGE: usize = 4096;

fn uzswap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(args)
        .output()
        .expect("run uzswap")
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uzswap-bench-cli-{}-{name}", std::process::id()))
}

/// `n` real pages: chunks of this test executable, with a few zero pages mixed in, as a
/// uzswap-corpus page file.
fn page_file(name: &str, n: usize) -> PathBuf {
    let exe = std::fs::read("/proc/self/exe").expect("read test binary");
    let mut pages = uzswap_corpus::Pages::new("test binary pages");
    for (i, c) in exe.chunks_exact(PAGE).cycle().take(n).enumerate() {
        if i % 50 == 7 {
            pages.push_page(&[0u8; PAGE]).unwrap();
        } else {
            pages.push_page(c).unwrap();
        }
    }
    let p = tmp(name);
    uzswap_corpus::write_page_file(&p, &pages).expect("write page file");
    p
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "uzswap bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn assert_close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs(), "{a} != {b}");
}

fn assert_contract(j: &Value, pages: u64, compressor: &str, threads: u64) {
    for k in [
        "pages",
        "compressor",
        "threads",
        "verified",
        "store_pages_per_s",
        "load_pages_per_s",
        "raw_compress_pages_per_s",
        "raw_decompress_pages_per_s",
        "pool_total_size",
        "metadata_bytes_per_entry",
    ] {
        assert!(j.get(k).is_some(), "missing field {k} in {j}");
    }
    assert_eq!(j["pages"].as_u64(), Some(pages));
    assert_eq!(j["compressor"].as_str(), Some(compressor));
    assert_eq!(j["threads"].as_u64(), Some(threads));
    assert_eq!(j["verified"].as_bool(), Some(true));
    for k in [
        "store_pages_per_s",
        "store_cold_pages_per_s",
        "load_pages_per_s",
        "load_random_pages_per_s",
        "raw_compress_pages_per_s",
        "raw_decompress_pages_per_s",
        "raw_decompress_random_pages_per_s",
        "load_random_vs_raw_decompress_random",
        "metadata_bytes_per_entry",
    ] {
        let v = j[k].as_f64().unwrap_or(0.0);
        assert!(v.is_finite() && v > 0.0, "{k} = {v}");
    }
    // Ratios are the ratios of the reported medians.
    let ratio = |a: &str, b: &str| j[a].as_f64().unwrap() / j[b].as_f64().unwrap();
    assert_close(
        j["load_random_vs_raw_decompress_random"].as_f64().unwrap(),
        ratio(
            "load_random_pages_per_s",
            "raw_decompress_random_pages_per_s",
        ),
    );
    assert_close(
        j["store_cold_vs_raw_compress"].as_f64().unwrap(),
        ratio("store_cold_pages_per_s", "raw_compress_pages_per_s"),
    );
    for k in [
        "store_vs_raw_compress",
        "load_vs_raw_decompress",
        "load_random_vs_raw_decompress_random",
    ] {
        let v = j["paired_ratios"][k].as_f64().unwrap_or(0.0);
        assert!(v.is_finite() && v > 0.0, "paired_ratios.{k} = {v}");
    }
    // The cache's own cost per load (load time minus raw decompression time), per order, and
    // the warm-up run's empty-cache store (the only one in a cache new to the process).
    for k in ["slot_order", "random_order"] {
        assert!(
            j["load_overhead_ns"][k]
                .as_f64()
                .is_some_and(f64::is_finite),
            "load_overhead_ns.{k}"
        );
    }
    // The memory-latency reference measured in the same runs, and the overhead in its units.
    let lat = j["memory_latency_ns"].as_f64().unwrap_or(0.0);
    assert!(lat.is_finite() && lat > 0.0, "memory_latency_ns = {lat}");
    for k in ["slot_order", "random_order"] {
        let v = j["load_overhead_memory_latencies"][k].as_f64();
        assert!(
            v.is_some_and(f64::is_finite),
            "load_overhead_memory_latencies.{k}"
        );
    }
    for k in ["store_cold_pages_per_s", "raw_compress_pages_per_s"] {
        let v = j["first_run"][k].as_f64().unwrap_or(0.0);
        assert!(v.is_finite() && v > 0.0, "first_run.{k} = {v}");
    }
    // Who used how many threads: the cache and the raw codec the same split.
    assert_eq!(j["threads_per_side"]["cache"].as_u64(), Some(threads));
    assert_eq!(j["threads_per_side"]["raw_codec"].as_u64(), Some(threads));
    let runs = j["runs"].as_u64().unwrap() as usize;
    for k in ["store_cold_pages_per_s", "load_random_pages_per_s"] {
        assert_eq!(j["samples"][k].as_array().map(Vec::len), Some(runs), "{k}");
    }
    // Tiny corpora can need more pool than data: each size class in use holds a whole,
    // mostly empty zspage of up to 8 pages (the kernel's zram shows the same mem_used_total).
    let pool = j["pool_total_size"].as_u64().unwrap();
    assert!(
        pool > 0 && pool <= 4 * pages * PAGE as u64,
        "pool_total_size {pool}"
    );
}

#[test]
fn bench_json_on_page_file() {
    let p = page_file("pf", 300);
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--compressor",
        "lz4",
        "--json",
        "--no-kernel",
        "--runs",
        "2",
    ]);
    let j = json_of(&out);
    assert_contract(&j, 300, "lz4", 1);
    // Every 50th page is zero, and so may be a page of the test binary itself.
    let zero = j["zero_pages_in_corpus"].as_u64().unwrap();
    assert!(zero >= 6);
    assert_eq!(
        j["zero_pages"].as_u64(),
        Some(zero),
        "zero pages go to the zero map"
    );
    assert_eq!(j["stored_pages"].as_u64(), Some(300 - zero));
    assert_eq!(j["kernel_skipped"].as_str(), Some("--no-kernel"));
    for k in [
        "kernel_zram_write_pages_per_s",
        "store_cold_vs_zram_write_cold",
        "store_warm_vs_zram_write_warm",
    ] {
        assert!(j.get(k).is_none(), "{k} without the kernel side");
    }
    assert!(j["threads_per_side"].get("kernel_zram").is_none());
    let _ = std::fs::remove_file(p);
}

#[test]
fn bench_raw_file_two_threads_lzo_rle() {
    // A raw page dump (headerless, whole pages).
    let exe = std::fs::read("/proc/self/exe").expect("read test binary");
    let p = tmp("raw");
    std::fs::write(&p, &exe[..PAGE * 121]).unwrap();
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--compressor",
        "lzo-rle",
        "--threads",
        "2",
        "--json",
        "--no-kernel",
        "--runs",
        "1",
        "--exclusive",
    ]);
    let j = json_of(&out);
    assert_contract(&j, 121, "lzo-rle", 2);
    assert_eq!(j["exclusive_loads"].as_bool(), Some(true));
    let _ = std::fs::remove_file(p);
}

#[test]
fn bench_pool_limit_goes_through_the_swap_file() {
    // A 1 % pool of 4 MiB of "memory" holds about 10 pages: the rest goes to the swap file
    // and comes back from it, checksummed.
    let p = page_file("limit", 200);
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--json",
        "--no-kernel",
        "--runs",
        "1",
        "--max-pool-percent",
        "1",
        "--total-memory-mib",
        "4",
    ]);
    let j = json_of(&out);
    assert_contract(&j, 200, "lz4", 1);
    let rejected = j["rejected_to_swap_file"].as_u64().unwrap();
    let from_file = j["loaded_from_swap_file"].as_u64().unwrap();
    assert!(rejected > 100, "rejected {rejected}");
    assert!(
        from_file > 100 && from_file <= 200,
        "loaded from the swap file: {from_file}"
    );
    let _ = std::fs::remove_file(p);
}

#[test]
fn bench_table_output() {
    let p = page_file("table", 64);
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--no-kernel",
        "--runs",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "64 pages",
        "store, empty cache (cold)",
        "store (uzswap cache)",
        "raw lz4 compress",
        "load (uzswap cache)",
        "load, random order",
        "verified: every page read back bit-identical",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let _ = std::fs::remove_file(p);
}

#[test]
fn bench_bad_input_is_a_clear_error() {
    let missing = tmp("does-not-exist");
    let out = uzswap(&[
        "bench",
        "--corpus",
        missing.to_str().unwrap(),
        "--no-kernel",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read page file"), "{err}");

    let empty = tmp("empty");
    std::fs::write(&empty, b"").unwrap();
    let out = uzswap(&["bench", "--corpus", empty.to_str().unwrap(), "--no-kernel"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
    let _ = std::fs::remove_file(empty);

    let out = uzswap(&["bench", "--compressor", "snappy", "--no-kernel"]);
    assert!(!out.status.success());
    let p = page_file("threads0", 4);
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--threads",
        "0",
        "--no-kernel",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--threads"));
    let _ = std::fs::remove_file(p);
}

/// The zram comparison: root, unused zram0. The binary takes the kernel-test lock itself.
#[test]
fn bench_kernel_zram_comparison() {
    if !uzswap_kernel::kernel_tests_enabled() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: bench_kernel_zram_comparison: set UZSWAP_KERNEL_TESTS=1 (writes to zram0)"
        )
        .ok();
        return;
    }
    let p = page_file("kernel", 256);
    for (alg, threads) in [("lz4", "1"), ("lzo-rle", "2")] {
        let out = uzswap(&[
            "bench",
            "--corpus",
            p.to_str().unwrap(),
            "--compressor",
            alg,
            "--kernel",
            "--json",
            "--runs",
            "2",
            "--threads",
            threads,
        ]);
        let j = json_of(&out);
        assert_contract(&j, 256, alg, threads.parse().unwrap());
        assert_eq!(j["threads_per_side"]["kernel_zram"].as_u64(), Some(1));
        for k in [
            "kernel_zram_write_pages_per_s",
            "kernel_zram_write_warm_pages_per_s",
            "kernel_zram_read_pages_per_s",
            "store_cold_vs_zram_write_cold",
            "store_warm_vs_zram_write_warm",
        ] {
            let v = j[k].as_f64().unwrap_or(0.0);
            assert!(v.is_finite() && v > 0.0, "{k} = {v}");
        }
        // Cold pair: empty cache vs fresh device; warm pair: warm cache vs rewrite.
        let ratio = |a: &str, b: &str| j[a].as_f64().unwrap() / j[b].as_f64().unwrap();
        assert_close(
            j["store_cold_vs_zram_write_cold"].as_f64().unwrap(),
            ratio("store_cold_pages_per_s", "kernel_zram_write_pages_per_s"),
        );
        assert_close(
            j["store_warm_vs_zram_write_warm"].as_f64().unwrap(),
            ratio("store_pages_per_s", "kernel_zram_write_warm_pages_per_s"),
        );
        for k in [
            "store_cold_vs_zram_write_cold",
            "store_warm_vs_zram_write_warm",
        ] {
            assert!(j["paired_ratios"][k].as_f64().unwrap() > 0.0, "{k}");
        }
        assert_eq!(
            j["samples_kernel"]["zram_write_warm_pages_per_s"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(j["kernel_zram_verified"].as_bool(), Some(true));
        let mm = &j["kernel_zram_mm_stat"];
        assert_eq!(mm["orig_data_size"].as_u64(), Some(256 * PAGE as u64));
        assert!(
            mm["same_pages"].as_u64().unwrap() >= 5,
            "the 5 zero pages are same-filled"
        );
        let disksize = std::fs::read_to_string("/sys/block/zram0/disksize").unwrap();
        assert_eq!(disksize.trim(), "0", "zram0 must be left reset");
    }
    let _ = std::fs::remove_file(p);
}

#[test]
fn bench_scaling_measures_every_operation_against_the_raw_codec() {
    let p = page_file("scaling", 600);
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--scaling",
        "--json",
        "--runs",
        "1",
    ]);
    let j = json_of(&out);
    assert_eq!(j["mode"].as_str(), Some("scaling"));
    assert_eq!(j["threads"].as_u64(), Some(2), "at least two threads");
    assert_eq!(j["verified"].as_bool(), Some(true));
    for op in [
        "store",
        "load",
        "load_random",
        "invalidate",
        "writeback",
        "mixed",
    ] {
        let o = &j["scaling"][op];
        for k in [
            "scaling",
            "reference_scaling",
            "one_thread_per_s",
            "threads_per_s",
        ] {
            let v = o[k].as_f64().unwrap_or(0.0);
            assert!(v.is_finite() && v > 0.0, "scaling.{op}.{k} = {v}");
        }
        assert!(
            o["reference"].as_str().is_some(),
            "{op} names its reference"
        );
    }
    // The table form, and the flags it cannot be combined with.
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--scaling",
        "--runs",
        "1",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("writeback") && text.contains("1 vs 2 threads"),
        "{text}"
    );
    let out = uzswap(&[
        "bench",
        "--corpus",
        p.to_str().unwrap(),
        "--scaling",
        "--exclusive",
    ]);
    assert!(!out.status.success());
    let _ = std::fs::remove_file(p);
}
