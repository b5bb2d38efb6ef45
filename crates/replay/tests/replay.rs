// SPDX-License-Identifier: MIT
//! Replays of the built-in workloads and of traces: deterministic, consistent with the oracle
//! of pages (every page read back verified, every page that is out found in its slot, the
//! cache's counters matching), bad traces refused with their place, seed 003's direction, and
//! a long trace streaming in memory bounded by its footprint.

use std::sync::Arc;

use uzswap_corpus::Pages;
use uzswap_mm::Accounting;
use uzswap_replay::{run, Builtin, Replay, ReplayOptions, Report, Source, WorkloadParams};
use uzswap_trace::{Content, Format, Header, TraceWriter};
use uzswap_zswap::{Algorithm, Params};

/// Real pages: the test binary's own bytes (machine code and data), never random ones.
fn corpus() -> Arc<Pages> {
    let mut b = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    b.truncate((b.len() / 4096).min(2048) * 4096);
    Arc::new(Pages::from_bytes(b, "test binary").unwrap())
}

fn params() -> Params {
    Params {
        compressor: Algorithm::LzoRle,
        proactive_shrink: false,
        ..Params::default()
    }
}

fn opts(p: Params, accounting: Accounting) -> ReplayOptions {
    ReplayOptions {
        params: p,
        accounting,
        swap_slots: 1 << 16,
        ..ReplayOptions::default()
    }
}

fn replay_builtin(name: &str, m_pages: u64, o: ReplayOptions, seed: u64) -> (Report, (u64, u64)) {
    let c = corpus();
    let wp = WorkloadParams {
        memory_max_pages: m_pages,
        scale: 0.5,
        seed,
        pool_limit_pages: o.params.max_pool_pages(),
        ratio: uzswap_replay::estimate_ratio(&c, o.params.compressor),
        pool_charged: o.accounting == Accounting::V2,
    };
    let b = Builtin::new(name, &wp).unwrap();
    let mut o = o;
    // The built-in layout gives the flat page table (a `spans` set by the caller is kept).
    if o.spans.is_empty() {
        o.spans = b.layout().iter().map(|l| l.pages).collect();
    }
    let mut r = Replay::new(o, c).unwrap();
    let mut src = Source::Builtin(Box::new(b));
    let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
    let audit = r.audit().unwrap();
    (rep, audit)
}

/// The counters that must not depend on timing.
const STABLE: [&str; 14] = [
    "zswpin",
    "zswpout",
    "zswpwb",
    "pswpin",
    "pswpout",
    "stored_pages",
    "pool_total_size",
    "pool_limit_hit",
    "written_back_pages",
    "pgmajfault",
    "pgscan_anon",
    "swap_ra",
    "swap_ra_hit",
    "workingset_refault_anon",
];

#[test]
fn same_seed_same_counters_and_the_oracle_holds() {
    for (name, acc) in [
        ("zipf", Accounting::V1),
        ("build", Accounting::V2),
        ("scan", Accounting::V1),
    ] {
        let (a, audit) = replay_builtin(name, 512, opts(params(), acc), 7);
        let (b, _) = replay_builtin(name, 512, opts(params(), acc), 7);
        // Page identities from the hash map instead of the flat table (a trace whose layout
        // is not known): the same run.
        let mut o = opts(params(), acc);
        o.spans = vec![0];
        let (h, _) = replay_builtin(name, 512, o, 7);
        for k in STABLE {
            assert_eq!(a.counter(k), b.counter(k), "{name}: {k}");
            assert_eq!(a.counter(k), h.counter(k), "{name}: {k}, hash-mapped pages");
        }
        assert!(a.counter("zswpout") > 0, "{name} swapped");
        // Every page that is out has its data; pool entries and stored_pages agree.
        assert_eq!(audit.1, a.counter("stored_pages"), "{name}");
        if name == "scan" {
            continue; // a scan touches the same pages in the same order whatever the seed
        }
        let (c, _) = replay_builtin(name, 512, opts(params(), acc), 8);
        assert_ne!(
            (a.counter("zswpin"), a.counter("pgscan_anon")),
            (c.counter("zswpin"), c.counter("pgscan_anon")),
            "{name}: another seed is another run"
        );
        // The JSON layout of issue #12.
        let v = serde_json::to_value(&a).unwrap();
        for key in [
            "workload",
            "elapsed_s",
            "engine_s",
            "cache_s",
            "counters",
            "cgroups",
            "classes",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(v["cgroups"][0]["name"], name);
        assert!(v["cgroups"][0]["counters"]["zswpout"].as_u64().unwrap() > 0);
        assert!(v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["obj_used"].as_u64() > Some(0)));
    }
}

/// Seed 003: with the pool full of a background cgroup's cold pages, today's kernel keeps it
/// full (every entry carries its store-time referenced bit, and a worker run that only clears
/// bits gives up after 16 such visits), so the active cgroup's pages go to the disk. The seed's
/// proactive shrinking (measured on 6.10, before the second-chance bit of 6.12: entries carry
/// no referenced bit, the `protected-size` mode) writes background pages back instead and
/// serves the active cgroup from the pool.
#[test]
fn seed003_direction_on_a_small_run() {
    let small = |seed003: bool| Params {
        total_memory_bytes: 256 << 20,
        max_pool_percent: 5,
        proactive_shrink: seed003,
        warm_protection: if seed003 {
            uzswap_zswap::WarmProtection::ProtectedSize
        } else {
            uzswap_zswap::WarmProtection::SecondChance
        },
        ..params()
    };
    let (off, _) = replay_builtin(
        "active-vs-background",
        1024,
        opts(small(false), Accounting::V1),
        3,
    );
    let (on, _) = replay_builtin(
        "active-vs-background",
        1024,
        opts(small(true), Accounting::V1),
        3,
    );
    let cg = |r: &Report, name: &str, k: &str| {
        r.cgroups.iter().find(|c| c.name == name).unwrap().counters[k]
    };
    assert!(off.counter("pool_limit_hit") > 0, "the pool filled up");
    assert!(
        cg(&on, "active", "zswpin") > cg(&off, "active", "zswpin"),
        "active pages served from the pool: {} vs {}",
        cg(&on, "active", "zswpin"),
        cg(&off, "active", "zswpin")
    );
    assert!(
        cg(&on, "active", "pswpin") < cg(&off, "active", "pswpin"),
        "fewer active pages from disk"
    );
    assert!(
        cg(&on, "background", "zswpwb") > cg(&off, "background", "zswpwb"),
        "background pages written back"
    );
}

fn write_trace(
    path: &std::path::Path,
    format: Format,
    body: impl FnOnce(&mut TraceWriter<std::fs::File>),
) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = TraceWriter::new(f, format, &Header::default()).unwrap();
    body(&mut w);
    w.finish().unwrap();
}

#[test]
fn traces_replay_and_bad_ones_are_refused_with_their_place() {
    let dir = std::env::temp_dir();
    let p = dir.join(format!("uzswap-replay-test-{}.trace", std::process::id()));
    // A text trace: cgroup with a limit, writes twice the limit, reads back, frees, a
    // compressor switch mid-run and memory.reclaim (v2).
    write_trace(&p, Format::Text, |w| {
        let cg = w.cgroup("app", 0, None).unwrap();
        w.event(
            None,
            &uzswap_trace::Event::MemoryMax {
                cg,
                bytes: Some(2 << 20),
            },
        )
        .unwrap();
        for i in 0..512u64 {
            w.write(cg, i, Content::Page(i as u32), None).unwrap();
        }
        w.event(
            None,
            &uzswap_trace::Event::Param {
                name: "compressor".into(),
                value: "deflate".into(),
            },
        )
        .unwrap();
        for i in 0..512u64 {
            w.read(cg, i, None).unwrap();
        }
        w.event(
            None,
            &uzswap_trace::Event::Reclaim {
                cg,
                bytes: 256 << 10,
            },
        )
        .unwrap();
        w.free(cg, 0, 256, None).unwrap();
    });
    let mut r = Replay::new(opts(params(), Accounting::V2), corpus()).unwrap();
    let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
    let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
    assert!(rep.counter("zswpin") > 0, "{:?}", rep.counters);
    assert!(
        rep.classes.iter().all(|c| c.compressor == "deflate"),
        "the switch made a new pool"
    );
    r.audit().unwrap();
    // memory.reclaim does not exist in cgroup v1.
    let mut r = Replay::new(opts(params(), Accounting::V1), corpus()).unwrap();
    let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
    let e = run(&mut r, &mut src, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("does not exist in cgroup v1"), "{e}");
    // A malformed line is reported with its line number.
    std::fs::write(&p, "uzswap-trace 1\ncgroup a\nw a 1 2\nr b 1\n").unwrap();
    let mut r = Replay::new(opts(params(), Accounting::V2), corpus()).unwrap();
    let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
    let e = run(&mut r, &mut src, &mut |_| {}).unwrap_err();
    assert!(
        e.to_string()
            .ends_with(":4: unknown cgroup \"b\" (create it with `cgroup b`)"),
        "{e}"
    );
    std::fs::remove_file(&p).unwrap();
}

/// Peak RSS (KiB) of a child process replaying a generated trace of `n` events over a
/// 1280-page footprint (the test binary re-run on `long_trace_child`).
fn child_peak_rss_kb(n: u64) -> u64 {
    #[allow(clippy::zombie_processes)] // reaped by wait4 below
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "long_trace_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("UZSWAP_LONG_TRACE_EVENTS", n.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // This child's own peak, from wait4: RUSAGE_CHILDREN would be the largest of every child
    // this test process reaped, including those other tests run at the same time.
    let mut status = 0;
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: waits for our own child (not yet reaped: `child` is never waited on), filling the
    // status and the rusage struct we own.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, ru.as_mut_ptr()) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    // SAFETY: initialised by wait4 above (zeroed before).
    unsafe { ru.assume_init() }.ru_maxrss as u64
}

/// The child of `a_long_trace_streams_in_memory_bounded_by_its_footprint`.
#[test]
fn long_trace_child() {
    let Ok(n) = std::env::var("UZSWAP_LONG_TRACE_EVENTS") else {
        return;
    };
    let n: u64 = n.parse().unwrap();
    let path = std::env::temp_dir().join(format!("uzswap-replay-long-{}.bin", std::process::id()));
    write_trace(&path, Format::Binary, |w| {
        let cg = w.cgroup("app", 0, None).unwrap();
        w.event(
            None,
            &uzswap_trace::Event::MemoryMax {
                cg,
                bytes: Some(4 << 20),
            },
        )
        .unwrap();
        let mut x = 1u64;
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let page = (x >> 33) % 1280;
            if i % 8 == 0 {
                w.write(cg, page, Content::Page((x >> 20) as u32), None)
                    .unwrap();
            } else {
                w.read(cg, page, None).unwrap();
            }
        }
    });
    // A small machine, so that the pool's cache of freed zspages (bounded by the pool limit,
    // returned after a second) is small next to what a per-event structure would take.
    let p = Params {
        total_memory_bytes: 32 << 20,
        ..params()
    };
    let mut o = opts(p, Accounting::V1);
    o.verify = false;
    // Uniform random reads over more than the limit activate every resident page; with
    // statistics as stale as the kernel's 2 s flush this OOMs in the replay and in the live
    // kernel alike (the runner is OOM-killed), so this memory test reads exact statistics.
    o.stats_flush = std::time::Duration::ZERO;
    let mut r = Replay::new(o, corpus()).unwrap();
    let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&path).unwrap()));
    let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
    assert_eq!(rep.events, n + 2);
    std::fs::remove_file(&path).unwrap();
}

/// A trace sixteen times longer replays in the same memory: the reader keeps no per-event
/// state and the replay's structures follow the footprint (page tables, the pool under its
/// limit).
#[test]
fn a_long_trace_streams_in_memory_bounded_by_its_footprint() {
    let short = child_peak_rss_kb(64_000);
    let long = child_peak_rss_kb(1_024_000);
    // 15 times more events may cost a few more 2 MiB arena chunks held by timing (the pool's
    // prefault thread and its one-second cache of freed zspages run against a slower replay
    // when other tests share the CPUs: up to 9.5 MiB measured), never per-event memory: at 12
    // MiB for 960k more events, anything from 13 bytes per event fails.
    assert!(
        long < short + 12 * 1024,
        "peak RSS {short} KiB for 64k events, {long} KiB for 1M events"
    );
}

/// The kernel's cgroup zswap selftest scenarios as traces (tools/testing/selftests/cgroup/
/// test_zswap.c): memory.zswap.max 0 keeps a cgroup's pages out of the pool (they go to the
/// swap device), memory.zswap.writeback 0 keeps them off the device, and memory.reclaim
/// reclaims what it is asked to.
#[test]
fn selftest_scenarios_as_traces() {
    let run_text = |body: &str| -> Report {
        let p = std::env::temp_dir().join(format!(
            "uzswap-replay-selftest-{}-{}.trace",
            std::process::id(),
            body.len()
        ));
        std::fs::write(&p, format!("uzswap-trace 1\n{body}")).unwrap();
        let mut o = opts(params(), Accounting::V2);
        o.stats_flush = std::time::Duration::ZERO;
        let mut r = Replay::new(o, corpus()).unwrap();
        let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
        let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
        r.audit().unwrap();
        std::fs::remove_file(&p).unwrap();
        rep
    };
    let writes = |n: u64| -> String { (0..n).map(|i| format!("w t {i} {i}\n")).collect() };
    // zswap.max 0: nothing stored, everything that leaves memory goes to the device.
    let r = run_text(&format!(
        "cgroup t\nmemory.max t 1M\nmemory.zswap.max t 0\n{}",
        writes(1024)
    ));
    assert_eq!(r.counter("zswpout"), 0);
    assert!(r.counter("pswpout") > 500, "{}", r.counter("pswpout"));
    assert!(r.counter("reject_cgroup_limit") > 0);
    // memory.reclaim of 2 MiB from a cgroup holding 4 MiB succeeds (no EAGAIN) and stores.
    let r = run_text(&format!("cgroup t\n{}memory.reclaim t 2M\n", writes(1024)));
    assert_eq!(r.counter("reclaim_eagain"), 0);
    assert!(r.counter("zswpout") >= 512, "{}", r.counter("zswpout"));
    // zswap.writeback 0 and a small zswap.max: reclaim stores what fits, no page reaches the
    // device, and memory.reclaim reports EAGAIN for what it could not reclaim.
    let r = run_text(&format!(
        "cgroup t\n{}memory.zswap.max t 512K\nmemory.zswap.writeback t 0\nmemory.reclaim t 3M\n",
        writes(1024)
    ));
    assert_eq!(r.counter("pswpout") + r.counter("zswpwb"), 0);
    assert!(r.counter("zswpout") > 0);
    assert_eq!(r.counter("reclaim_eagain"), 1);
}

/// `--lru per-pool` (6.8's lists per compressor pool): after a compressor switch, the pool
/// limit's writeback walks only the current pool's lists, so the older pool's (colder) entries
/// stay; with the global LRU (6.9+) the coldest entries go first, the older pool's.
#[test]
fn per_pool_lru_writes_back_from_the_current_pool_after_a_switch() {
    let dir = std::env::temp_dir();
    let p = dir.join(format!("uzswap-replay-lru-{}.trace", std::process::id()));
    write_trace(&p, Format::Text, |w| {
        let cg = w.cgroup("app", 0, None).unwrap();
        let mm = uzswap_trace::Event::MemoryMax {
            cg,
            bytes: Some(1 << 20),
        };
        w.event(None, &mm).unwrap();
        for i in 0..1500u64 {
            w.write(cg, i, Content::Page(i as u32), None).unwrap();
        }
        let sw = uzswap_trace::Event::Param {
            name: "compressor".into(),
            value: "deflate".into(),
        };
        w.event(None, &sw).unwrap();
        for i in 1500..4000u64 {
            w.write(cg, i, Content::Page(i as u32), None).unwrap();
        }
    });
    let mut out = Vec::new();
    for lru in [
        uzswap_zswap::LruMode::Global,
        uzswap_zswap::LruMode::PerPool,
    ] {
        let p0 = Params {
            lru,
            // A pool limit of 328 pages: reached by the second pool's stores.
            total_memory_bytes: 16 << 20,
            max_pool_percent: 8,
            ..params()
        };
        let mut r = Replay::new(opts(p0, Accounting::V1), corpus()).unwrap();
        let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
        let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
        r.audit().unwrap();
        let used = |alg: &str| -> usize {
            rep.classes
                .iter()
                .filter(|c| c.compressor == alg)
                .map(|c| c.obj_used)
                .sum()
        };
        assert!(
            rep.counter("written_back_pages") > 0,
            "{lru}: {:?}",
            rep.counters
        );
        out.push((used("lzo-rle"), used("deflate")));
    }
    std::fs::remove_file(&p).unwrap();
    let (global, per_pool) = (out[0], out[1]);
    // Global: the old pool's entries were the coldest and went first.
    assert!(
        global.0 < per_pool.0,
        "global {global:?} per-pool {per_pool:?}"
    );
    // Per pool: none of the old pool's entries was written back by the limit.
    assert!(
        per_pool.0 > 0 && per_pool.1 < global.1,
        "global {global:?} per-pool {per_pool:?}"
    );
}

/// A recording's timestamps pace the modelled kernel clock, which places the 2 s memcg
/// statistics flush: a trace whose events span 9 s of its run gets the flushes of 9 s, the same
/// events without timestamps none (the model's own time for them is milliseconds). Until
/// 2026-11-28 recordings of `uzswap run` replayed with none, and so with the inactive:active
/// ratio of each cgroup's creation: Node's recording under 90M in cgroup v2 with zstd ran out
/// of memory in the model, with 21k pages on the active list and none on the inactive one.
#[test]
fn a_recordings_timestamps_pace_the_statistics_flushes() {
    let p = std::env::temp_dir().join(format!("uzswap-replay-timed-{}.trace", std::process::id()));
    let mut flushes = Vec::new();
    for (timed, trace_clock) in [(false, true), (true, true), (true, false)] {
        let at = |i: u64| timed.then_some(i * 3_000_000);
        write_trace(&p, Format::Binary, |w| {
            let cg = w.cgroup("app", 0, at(0)).unwrap();
            w.event(
                at(0),
                &uzswap_trace::Event::MemoryMax {
                    cg,
                    bytes: Some(1 << 20),
                },
            )
            .unwrap();
            for i in 0..3000u64 {
                w.write(cg, i, Content::Page((i % 2048) as u32), at(i))
                    .unwrap();
            }
        });
        let o = ReplayOptions {
            trace_clock,
            ..opts(params(), Accounting::V1)
        };
        let mut r = Replay::new(o, corpus()).unwrap();
        let mut src = Source::Trace(Box::new(uzswap_trace::TraceReader::open(&p).unwrap()));
        let rep = run(&mut r, &mut src, &mut |_| {}).unwrap();
        assert!(rep.counter("zswpout") > 1000, "{:?}", rep.counters);
        r.audit().unwrap();
        flushes.push(rep.counter("stats_flushes"));
    }
    std::fs::remove_file(&p).unwrap();
    assert_eq!(
        flushes,
        vec![0, 4, 0],
        "untimed; 9 s of recorded time; the same with the model's own clock (beside the live kernel)"
    );
}

/// `vm.page-cluster` (`ReplayOptions::page_cluster`): swap-in reads up to 2^N slots around a
/// fault's; 0 reads none ahead, as zram setups often set it.
#[test]
fn page_cluster_sets_the_readahead_window() {
    let ra = |n: u32| {
        let o = ReplayOptions {
            page_cluster: n,
            ..opts(params(), Accounting::V1)
        };
        let (rep, _) = replay_builtin("scan", 512, o, 7);
        (rep.counter("swap_ra"), rep.counter("pgmajfault"))
    };
    let (none, faults0) = ra(0);
    let (some, faults3) = ra(3);
    assert_eq!(none, 0, "no readahead at page-cluster 0");
    assert!(some > 0, "readahead at the default 3");
    assert!(
        faults0 > faults3,
        "readahead saves major faults: {faults0} vs {faults3}"
    );
}
