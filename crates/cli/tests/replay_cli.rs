// SPDX-License-Identifier: MIT
//! `uzswap replay` end to end: the JSON layout of issue #12, `--compare`, `--timeline` and
//! `--plot`, a saved trace replaying like the workload it came from, clear errors, and (with
//! UZSWAP_KERNEL_TESTS=1) the live kernel comparison restoring every setting.

use std::io::Write as _; // skip notices bypass the test harness's output capture
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn uzswap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(args)
        .output()
        .expect("run uzswap")
}

/// A file of this test process, under cargo's target tmp directory (`cargo clean` takes it);
/// files of earlier runs whose process is gone are removed at first use.
fn tmp(name: &str) -> PathBuf {
    static CLEANED: std::sync::Once = std::sync::Once::new();
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay-cli");
    CLEANED.call_once(|| {
        std::fs::create_dir_all(&base).unwrap();
        for e in std::fs::read_dir(&base).unwrap().flatten() {
            let gone = e
                .file_name()
                .to_str()
                .and_then(|n| n.split('-').next()?.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if gone {
                let p = e.path();
                let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
            }
        }
    });
    base.join(format!("{}-{name}", std::process::id()))
}

/// A raw page dump of real bytes: the uzswap binary's first 2048 pages.
fn corpus() -> PathBuf {
    let p = tmp("corpus.pages");
    if !p.exists() {
        let exe = std::fs::read(env!("CARGO_BIN_EXE_uzswap")).unwrap();
        let n = (exe.len() / 4096).min(2048) * 4096;
        // Written aside and renamed into place: tests run in parallel, and another one must
        // never find the file half written (it once read it empty).
        let part = tmp(&format!("corpus.pages.{:?}", std::thread::current().id()));
        std::fs::write(&part, &exe[..n]).unwrap();
        std::fs::rename(&part, &p).unwrap();
    }
    p
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = uzswap(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON document")
}

#[test]
fn json_report_has_the_issue_layout() {
    let c = corpus();
    let v = ok_json(&[
        "replay",
        "--workload",
        "zipf",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        c.to_str().unwrap(),
        "--compressor",
        "lzo-rle",
        "--json",
    ]);
    for k in [
        "workload",
        "elapsed_s",
        "engine_s",
        "cache_s",
        "counters",
        "cgroups",
        "classes",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["workload"], "zipf");
    for k in [
        "pool_limit_hit",
        "written_back_pages",
        "stored_pages",
        "pool_total_size",
        "zswpin",
        "zswpout",
        "zswpwb",
        "pswpin",
        "pswpout",
        "reject_compress_poor",
    ] {
        assert!(v["counters"][k].is_u64(), "counter {k}");
    }
    assert!(v["counters"]["zswpout"].as_u64().unwrap() > 0);
    let cg = &v["cgroups"][0];
    assert_eq!(cg["name"], "zipf");
    assert!(cg["elapsed_s"].is_f64());
    assert!(cg["counters"]["zswpin"].is_u64());
    assert!(v["classes"].as_array().unwrap().len() > 50);
}

#[test]
fn compare_timeline_plot_and_saved_traces() {
    let c = corpus();
    let cs = c.to_str().unwrap();
    let o = uzswap(&[
        "replay",
        "--workload",
        "build",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        cs,
        "--compare",
        "--chain-size 4",
        "--chain-size 16",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("--chain-size 4") && t.contains("--chain-size 16"),
        "{t}"
    );
    assert!(
        t.contains("stored_pages") && t.contains("huge_pages_used"),
        "{t}"
    );
    // Timeline and plot.
    let (csv, svg) = (tmp("t.csv"), tmp("t.svg"));
    let o = uzswap(&[
        "replay",
        "--workload",
        "scan",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        cs,
        "--timeline",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert!(rows.starts_with("events,t_s,pool_total_size,stored_pages,written_back_pages"));
    assert!(rows.lines().count() > 10);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<polyline"));
    // A saved trace replays exactly like the workload it was saved from.
    let tr = tmp("w.txt");
    let o = uzswap(&[
        "replay",
        "--workload",
        "zipf",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        cs,
        "--seed",
        "5",
        "--save-trace",
        tr.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = ok_json(&[
        "replay",
        "--workload",
        "zipf",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        cs,
        "--seed",
        "5",
        "--json",
    ]);
    let b = ok_json(&[
        "replay",
        "--trace",
        tr.to_str().unwrap(),
        "--cgroup",
        "v1",
        "--corpus",
        cs,
        "--json",
    ]);
    for k in ["zswpin", "zswpout", "stored_pages", "pgmajfault", "swap_ra"] {
        assert_eq!(a["counters"][k], b["counters"][k], "{k}");
    }
    for p in [csv, svg, tr] {
        std::fs::remove_file(p).ok();
    }
}

#[test]
fn errors_are_clear() {
    let c = corpus();
    let cs = c.to_str().unwrap();
    let err = |args: &[&str]| {
        let o = uzswap(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(&["replay", "--workload", "nosuch", "--corpus", cs]);
    assert!(e.contains("build, zipf, scan, active-vs-background"), "{e}");
    let o = uzswap(&[
        "replay",
        "--workload",
        "zipf",
        "--corpus",
        cs,
        "--lru",
        "local",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("per-pool"), "{e}");
    let bad = tmp("bad.trace");
    std::fs::write(&bad, "uzswap-trace 1\ncgroup a\nw a 1 1\nfree a x\n").unwrap();
    let e = err(&["replay", "--trace", bad.to_str().unwrap(), "--corpus", cs]);
    assert!(e.contains(":4: page \"x\": not a number"), "{e}");
    std::fs::remove_file(bad).ok();
}

fn zswap_params() -> String {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/sys/module/zswap/parameters").unwrap() {
        let e = e.unwrap();
        v.push(format!(
            "{}={}",
            e.file_name().to_string_lossy(),
            std::fs::read_to_string(e.path()).unwrap().trim()
        ));
    }
    v.sort();
    v.join(" ")
}

fn leftover_cgroups() -> Vec<String> {
    std::fs::read_dir("/sys/fs/cgroup/memory")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("uzswap-replay-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The live kernel runs the same accesses: counters within tolerance of ours on a small zipf
/// run, and every setting back as it was (zswap parameters, swaps, cgroups).
#[test]
fn kernel_comparison_restores_every_setting() {
    if !uzswap_kernel::kernel_tests_enabled() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: kernel_comparison_restores_every_setting: set UZSWAP_KERNEL_TESTS=1"
        )
        .ok();
        return;
    }
    if let Some(why) = uzswap_replay::kernel::unavailable() {
        writeln!(std::io::stderr(), "SKIPPED: live kernel comparison: {why}").ok();
        return;
    }
    // The replay takes the kernel-test lock itself; read the settings under it too.
    let settings = || {
        let _l = uzswap_kernel::KernelLock::acquire().unwrap();
        (
            zswap_params(),
            std::fs::read_to_string("/proc/swaps").unwrap(),
            std::fs::read_to_string("/proc/sys/vm/page-cluster").unwrap(),
        )
    };
    let before = settings();
    let c = corpus();
    // A readahead window of its own for the run (vm.page-cluster, restored after), the model's
    // the same.
    let pc = if before.2.trim() == "2" { "1" } else { "2" };
    let v = ok_json(&[
        "replay",
        "--workload",
        "zipf",
        "--memory-max",
        "8M",
        "--corpus",
        c.to_str().unwrap(),
        "--kernel",
        "--page-cluster",
        pc,
        "--json",
    ]);
    let after = settings();
    assert_eq!(
        before, after,
        "zswap parameters, swaps and vm.page-cluster restored"
    );
    assert_eq!(v["config"]["page_cluster"].to_string(), pc);
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());
    let k = &v["kernel"];
    assert_eq!(k["compressor"], "lzo-rle");
    for name in ["zswpout", "stored_pages", "zswpin"] {
        let r = k["ratio"][name].as_f64().unwrap_or(0.0);
        assert!((0.7..1.3).contains(&r), "{name}: ours/kernel {r}");
    }
}

/// `--zero-pages entry`: zero-filled pages are zswap stores with an entry (counted in
/// zswpout and stored_pages, debugfs same_filled_pages), not the swap core's zeromap.
#[test]
fn zero_pages_entry_stores_zero_pages_in_the_cache() {
    let c = corpus();
    let t = tmp("zero.trace");
    let mut s = String::from("uzswap-trace 1\ncgroup a\nmemory.max a 1M\n");
    for i in 0..2048 {
        if i % 2 == 0 {
            s.push_str(&format!("w a {i} z\n"));
        } else {
            s.push_str(&format!("w a {i} {i}\n"));
        }
    }
    std::fs::write(&t, s).unwrap();
    let run = |z: &str| {
        ok_json(&[
            "replay",
            "--trace",
            t.to_str().unwrap(),
            "--corpus",
            c.to_str().unwrap(),
            "--cgroup",
            "v1",
            "--zero-pages",
            z,
            "--json",
        ])
    };
    let (a, b) = (run("entryless"), run("entry"));
    std::fs::remove_file(&t).ok();
    let n = |v: &serde_json::Value, k: &str| v["counters"][k].as_u64().unwrap();
    assert!(n(&a, "swpout_zero") > 0);
    assert_eq!(n(&a, "same_filled_pages"), 0);
    assert_eq!(n(&b, "swpout_zero"), 0);
    assert_eq!(n(&b, "same_filled_pages"), n(&a, "swpout_zero"));
    assert_eq!(
        n(&b, "stored_pages"),
        n(&a, "stored_pages") + n(&a, "swpout_zero")
    );
    assert_eq!(b["config"]["zero_pages"], "entry");
}

/// `--chain-rule used-percent`: the cache's pool builds the class table `uzswap classes
/// --chain-rule used-percent` shows, which differs from the kernel's min-waste table.
#[test]
fn chain_rule_used_percent_changes_the_class_table_as_uzswap_classes_says() {
    let c = corpus();
    let table = |rule: &str| -> Vec<(u64, u64)> {
        let v = ok_json(&["classes", "--chain-rule", rule, "--json"]);
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["size"].as_u64().unwrap(),
                    k["pages_per_zspage"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let replayed = |rule: &str| -> Vec<(u64, u64)> {
        let v = ok_json(&[
            "replay",
            "--workload",
            "zipf",
            "--memory-max",
            "4M",
            "--cgroup",
            "v1",
            "--corpus",
            c.to_str().unwrap(),
            "--chain-rule",
            rule,
            "--json",
        ]);
        assert_eq!(v["config"]["chain_rule"], rule);
        assert_eq!(
            v["config"]["page_cluster"], 3,
            "the kernel's default readahead"
        );
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["size"].as_u64().unwrap(),
                    k["pages_per_zspage"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let (up, mw) = (replayed("used-percent"), replayed("min-waste"));
    assert_eq!(up, table("used-percent"));
    assert_eq!(mw, table("min-waste"));
    assert_ne!(up, mw);
}

/// `--direct-io`: the replay's swap file takes O_DIRECT, and every page the replay reads back
/// from it is verified against the oracle (pool limit 0: every swap-out goes to the file).
/// Skipped visibly where the file system refuses O_DIRECT.
#[test]
fn direct_io_replay_reads_back_identical_pages() {
    let c = corpus();
    let args = [
        "replay",
        "--workload",
        "zipf",
        "--memory-max",
        "4M",
        "--cgroup",
        "v1",
        "--corpus",
        c.to_str().unwrap(),
        "--swap-dir",
        "/var/tmp",
        "--max-pool-percent",
        "0",
        "--direct-io",
        "--json",
    ];
    let o = uzswap(&args);
    let e = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && e.contains("refuses O_DIRECT") {
        writeln!(std::io::stderr(), "SKIPPED: /var/tmp refuses O_DIRECT: {e}").ok();
        return;
    }
    assert!(o.status.success(), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // The run verifies every page read back (a mismatch fails the replay).
    assert!(v["counters"]["pswpout"].as_u64().unwrap() > 0);
    assert!(v["counters"]["pswpin"].as_u64().unwrap() > 0);
}

#[test]
fn total_memory_models_a_machine_of_another_size() {
    let c = corpus();
    let cs = c.to_str().unwrap();
    let run = |total: &str| {
        ok_json(&[
            "replay",
            "--workload",
            "zipf",
            "--memory-max",
            "4M",
            "--cgroup",
            "v1",
            "--corpus",
            cs,
            "--total-memory",
            total,
            "--max-pool-percent",
            "5",
            "--json",
        ])
    };
    // 5 % of 16 MiB is a 205-page pool limit, well under zipf's pool at 4M; 5 % of 1 TiB is
    // never reached.
    let small = run("16M");
    let big = run("1T");
    assert_eq!(small["config"]["total_memory_bytes"], 16u64 << 20);
    assert!(
        small["counters"]["pool_limit_hit"].as_u64().unwrap() > 0,
        "{small}"
    );
    assert_eq!(big["counters"]["pool_limit_hit"], 0, "{big}");
    let o = uzswap(&[
        "replay",
        "--workload",
        "zipf",
        "--corpus",
        cs,
        "--total-memory",
        "1G",
        "--kernel",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("--total-memory"), "{e}");
}

/// `--compare`: a configuration under which the workload runs out of memory is reported as
/// such beside the others, not the end of the comparison. Incompressible pages under a 10-page
/// cgroup v2 limit: stored as-is (the kernel's default) each eviction moves a page into the
/// charged pool and frees nothing; rejected, they go to the swap file.
#[test]
fn compare_reports_a_configuration_that_runs_out_of_memory() {
    let pages = tmp("random.pages");
    let mut bytes = vec![0u8; 64 * 4096];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").unwrap(),
        &mut bytes,
    )
    .unwrap();
    std::fs::write(&pages, bytes).unwrap();
    let trace = tmp("oom.txt");
    let mut t = format!(
        "uzswap-trace 1\npages file {}\ncgroup t\nmemory.max t 40K\n",
        pages.display()
    );
    for round in 0..3 {
        for p in 0..64 {
            if round == 0 {
                t.push_str(&format!("w t {p} {p}\n"));
            } else {
                t.push_str(&format!("r t {p}\n"));
            }
        }
    }
    std::fs::write(&trace, t).unwrap();
    let v = ok_json(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--cgroup",
        "v2",
        "--json",
        "--compare",
        "--incompressible store",
        "--incompressible reject",
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{v}");
    assert_eq!(runs[0]["options"], "--incompressible reject");
    assert!(runs[0]["report"]["counters"]["pswpout"].as_u64().unwrap() > 0);
    let oom = v["out_of_memory"].as_array().unwrap();
    assert_eq!(oom.len(), 1, "{v}");
    assert_eq!(oom[0]["options"], "--incompressible store");
    assert!(oom[0]["error"].as_str().unwrap().contains("out of memory"));
}
