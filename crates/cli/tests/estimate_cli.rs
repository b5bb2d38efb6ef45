// SPDX-License-Identifier: MIT
//! `uzswap capture`, `uzswap estimate` and `uzswap kernel-stats` as a user runs them.

use std::io::Write as _; // skip notices bypass the test harness's output capture
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn uzswap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(args)
        .output()
        .expect("run uzswap")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uzswap-cli-{}-{name}", std::process::id()))
}

/// A perl process holding some heap data, killed on drop.
struct Workload(Child);

impl Workload {
    fn start() -> Option<Workload> {
        let mut c = Command::new("perl")
            .args([
                "-e",
                "my @a = map { \"record $_ \" x 20 } 1..20000; $|=1; print \"R\\n\"; <STDIN>;",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(c.stdout.take()?)
            .read_line(&mut line)
            .ok()?;
        Some(Workload(c))
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn capture_then_estimate_json() {
    let Some(w) = Workload::start() else {
        writeln!(
            std::io::stderr(),
            "SKIPPED: capture_then_estimate_json: perl not installed"
        )
        .ok();
        return;
    };
    let file = tmp("cap.pages");
    let o = uzswap(&["capture", "--pid", &w.pid(), "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("captured") && out.contains("(perl)"), "{out}");
    let o = uzswap(&["estimate", "--file", file.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["pages"].as_u64().unwrap() > 100);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "default: lz4 and lzo-rle at chain 8");
    for r in results {
        assert_eq!(r["chain_size"], 8);
        let pool = r["pool_pages"].as_u64().unwrap();
        assert_eq!(r["zram_mem_used_total"].as_u64().unwrap(), pool * 4096);
        assert!(r["zswap_pool_total_size"].as_u64().unwrap() > 0);
        assert!(r["compressed_bytes"].as_u64().unwrap() > 0);
    }
    // Several compressors and chain sizes, text output.
    let o = uzswap(&[
        "estimate",
        "--pid",
        &w.pid(),
        "--compressor",
        "zstd",
        "--compressor",
        "deflate:1",
        "--chain-size",
        "4",
        "--chain-size",
        "16",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "zstd",
        "deflate:1",
        "zram_mem_used_total",
        "same_filled_pages",
        "predicted zram mm_stat",
    ] {
        assert!(out.contains(needle), "missing {needle} in:\n{out}");
    }
    let rows = out
        .lines()
        .filter(|l| l.starts_with("zstd ") && !l.contains("chain"));
    assert_eq!(rows.count(), 2, "{out}");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn bad_pid_is_a_clear_error() {
    for args in [
        vec!["capture", "--pid", "999999999", "-o", "/tmp/never-written"],
        vec!["estimate", "--pid", "999999999"],
    ] {
        let o = uzswap(&args);
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(e.contains("no process with pid 999999999"), "{e}");
        assert!(!e.contains("panicked"), "{e}");
    }
    assert!(!std::path::Path::new("/tmp/never-written").exists());
}

#[test]
fn malformed_files_are_clear_errors() {
    let f = tmp("bad.pages");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not pages at all\n".repeat(300), "not a multiple of 4096"),
        (vec![], "empty"),
        (
            {
                // A valid header announcing 3 pages, with only one present.
                let mut b = b"UZSWAPPG".to_vec();
                b.extend_from_slice(&1u32.to_le_bytes());
                b.extend_from_slice(&4096u32.to_le_bytes());
                b.extend_from_slice(&3u64.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
                b.resize(4096, 0);
                b.extend_from_slice(&[b'x'; 4096]);
                b
            },
            "truncated",
        ),
        (
            {
                let mut b = b"UZSWAPPG".to_vec();
                b.extend_from_slice(&7u32.to_le_bytes());
                b.resize(4096, 0);
                b
            },
            "unsupported version 7",
        ),
    ];
    for (bytes, needle) in cases {
        std::fs::write(&f, &bytes).unwrap();
        let o = uzswap(&["estimate", "--file", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(
            e.contains(needle) && e.contains("malformed page file"),
            "{needle}: {e}"
        );
    }
    std::fs::remove_file(&f).unwrap();
    let o = uzswap(&["estimate", "--file", f.to_str().unwrap()]);
    assert!(stderr(&o).contains("No such file"), "{}", stderr(&o));
}

#[test]
fn raw_dump_is_accepted() {
    // Pages of a real binary, headerless.
    let data = std::fs::read(env!("CARGO_BIN_EXE_uzswap")).unwrap();
    let f = tmp("raw.bin");
    std::fs::write(&f, &data[..4096 * 64]).unwrap();
    let o = uzswap(&[
        "estimate",
        "--file",
        f.to_str().unwrap(),
        "--json",
        "--compressor",
        "lzo",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pages"], 64);
    assert!(v["source"].as_str().unwrap().contains("raw page dump"));
    std::fs::remove_file(&f).unwrap();
}

#[test]
fn argument_errors() {
    let o = uzswap(&["estimate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--pid"), "{}", stderr(&o));
    let o = uzswap(&["estimate", "--pid", "1", "--compressor", "lz5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown compression algorithm"),
        "{}",
        stderr(&o)
    );
    let o = uzswap(&["estimate", "--file", "/nonexistent", "--chain-size", "0"]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn capture_without_permission_is_a_clear_error() {
    // As an unprivileged user, another user's process (pid 1) cannot be read.
    // SAFETY-free check of our uid through /proc.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let root = status
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: capture_without_permission_is_a_clear_error: needs root and setpriv"
        )
        .ok();
        return;
    }
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_uzswap"))
        .args(["capture", "--pid", "1", "-o", "/dev/null"])
        .output()
        .unwrap();
    if stderr(&o).contains("Permission denied") && stderr(&o).contains("setpriv") {
        writeln!(
            std::io::stderr(),
            "SKIPPED: the binary is not executable by nobody: {}",
            stderr(&o)
        )
        .ok();
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("permission denied") && e.contains("pid 1"),
        "{e}"
    );
}

#[test]
fn kernel_stats_layouts() {
    let o = uzswap(&["kernel-stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for line in text.lines() {
        let mut f = line.split(' ');
        let (Some(_), Some(v), None) = (f.next(), f.next(), f.next()) else {
            panic!("not 'name value': {line:?}");
        };
        v.parse::<u64>().unwrap();
    }
    for k in ["zswpin", "zswpout", "zswpwb", "pswpin", "pswpout"] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{k} "))),
            "{k} missing:\n{text}"
        );
    }
    let o = uzswap(&["kernel-stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "pool_limit_hit",
        "reject_reclaim_fail",
        "reject_alloc_fail",
        "reject_kmemcache_fail",
        "reject_compress_fail",
        "reject_compress_poor",
        "decompress_fail",
        "written_back_pages",
        "pool_total_size",
        "stored_pages",
        "stored_incompressible_pages",
        "zswpin",
        "pswpout",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from JSON");
    }
}

#[test]
fn validate_kernel_matches_for_lzo_rle() {
    if std::env::var("UZSWAP_KERNEL_TESTS").as_deref() != Ok("1") {
        writeln!(
            std::io::stderr(),
            "SKIPPED: validate_kernel_matches_for_lzo_rle: set UZSWAP_KERNEL_TESTS=1"
        )
        .ok();
        return;
    }
    // The command takes the kernel-test lock itself.
    let Some(w) = Workload::start() else {
        writeln!(std::io::stderr(), "SKIPPED: perl not installed").ok();
        return;
    };
    let o = uzswap(&[
        "estimate",
        "--pid",
        &w.pid(),
        "--compressor",
        "lzo-rle",
        "--compressor",
        "lz4",
        "--validate-kernel",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let val = v["kernel_validation"].as_array().unwrap();
    assert_eq!(val.len(), 2);
    for x in val {
        let err = x["mem_used_total_error_percent"].as_f64().unwrap();
        if x["compressor"] == "lzo-rle" {
            assert_eq!(x["predicted"], x["kernel"], "lzo-rle is kernel-exact");
        } else {
            assert!(err.abs() < 1.0, "{x}");
        }
    }
    assert_eq!(
        std::fs::read_to_string("/sys/block/zram0/disksize")
            .unwrap()
            .trim(),
        "0"
    );
}
