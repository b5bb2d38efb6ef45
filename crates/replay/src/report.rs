// SPDX-License-Identifier: MIT
//! The replay's report: the kernel's counters at the end (debugfs zswap set, vmstat swap
//! counters, per cgroup), elapsed times, the allocator's class table; JSON in the layout of
//! issue #12 (`workload`, `elapsed_s`, `engine_s`, `cache_s`, `counters`, `cgroups`,
//! `classes`), a kernel-style text form, the comparison with the live kernel, and the
//! side-by-side table of `--compare`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use uzswap_mm::{CgroupStats, MmStats};
use uzswap_zswap::{Algorithm, CgroupCounters, Counters};

/// One cgroup of the report.
#[derive(Clone, Debug, Serialize)]
pub struct CgroupReport {
    pub name: String,
    /// Cache time spent for the cgroup, the modelled device latency it waited for, and its
    /// share of the engine's time.
    pub elapsed_s: f64,
    pub counters: BTreeMap<String, u64>,
}

/// One row of the allocator's class table (debugfs `classes` columns).
#[derive(Clone, Debug, Serialize)]
pub struct ClassRow {
    pub compressor: String,
    pub class: usize,
    pub size: usize,
    pub obj_allocated: usize,
    pub obj_used: usize,
    pub pages_used: usize,
    pub pages_per_zspage: usize,
    pub freeable: usize,
    pub huge: bool,
}

/// One timeline sample.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    pub events: u64,
    pub t_s: f64,
    pub pool_total_size: u64,
    pub stored_pages: u64,
    pub written_back_pages: u64,
    pub zswpout: u64,
    pub zswpin: u64,
    pub pswpout: u64,
    pub pswpin: u64,
    pub resident_pages: u64,
}

/// What the front counted per cgroup.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrontCounts {
    pub zswpout: u64,
    pub zswpin: u64,
    pub pswpout: u64,
    pub pswpin: u64,
    pub swpout_zero: u64,
    pub swpin_zero: u64,
}

/// The live kernel's side of a `--kernel` run.
#[derive(Clone, Debug, Serialize)]
pub struct KernelSide {
    pub compressor: String,
    pub elapsed_s: f64,
    /// Deltas of the vmstat counters and end values of the debugfs gauges.
    pub counters: BTreeMap<String, u64>,
    /// ours / kernel per compared counter.
    pub ratio: BTreeMap<String, f64>,
    /// memory.usage_in_bytes of each cgroup before its first access (the runner's own
    /// memory), in bytes.
    pub runner_bytes: Vec<u64>,
    /// Each cgroup's memory.stat at the end (page counts for the `*_anon`, `rss` and `swap`
    /// lines, events as they are).
    pub cgroups: Vec<(String, BTreeMap<String, u64>)>,
    pub notes: Vec<String>,
}

/// The counters `--kernel` compares, in the order printed.
pub const COMPARED: [&str; 8] = [
    "zswpin",
    "zswpout",
    "zswpwb",
    "pswpin",
    "pswpout",
    "written_back_pages",
    "stored_pages",
    "pool_limit_hit",
];

/// The replay report (JSON layout of issue #12, plus `events` and optional sections).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub workload: String,
    pub elapsed_s: f64,
    pub engine_s: f64,
    pub cache_s: f64,
    /// Time spent comparing pages read back with what was written (in neither of the above).
    pub verify_s: f64,
    /// CPU time of the event thread, which runs beside the replay: generating (or reading
    /// and decoding) the events and the TLB model that marks them. Not part of `elapsed_s`
    /// except where the replay waited for it (then it is in `engine_s`).
    pub source_s: f64,
    /// Time the replay waited for the event thread's next batch (part of `engine_s`).
    pub source_wait_s: f64,
    pub counters: BTreeMap<String, u64>,
    pub cgroups: Vec<CgroupReport>,
    pub classes: Vec<ClassRow>,
    pub events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSide>,
    #[serde(skip)]
    pub timeline: Vec<Sample>,
}

fn counters_map(c: &Counters) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    if let Ok(serde_json::Value::Object(o)) = serde_json::to_value(c) {
        for (k, v) in o {
            if let Some(n) = v.as_u64() {
                m.insert(k, n);
            }
        }
    }
    m
}

fn add_struct<T: Serialize>(m: &mut BTreeMap<String, u64>, v: &T) {
    if let Ok(serde_json::Value::Object(o)) = serde_json::to_value(v) {
        for (k, v) in o {
            if let Some(n) = v.as_u64() {
                m.entry(k).or_insert(n);
            }
        }
    }
}

/// A cgroup's counters: the front's swap traffic, the cache's memory.stat figures and the
/// engine's memcg events.
pub fn cgroup_counters(
    f: &FrontCounts,
    z: Option<&CgroupCounters>,
    m: Option<&CgroupStats>,
) -> BTreeMap<String, u64> {
    let mut c = BTreeMap::new();
    for (k, v) in [
        ("zswpout", f.zswpout),
        ("zswpin", f.zswpin),
        ("pswpout", f.pswpout),
        ("pswpin", f.pswpin),
        ("swpout_zero", f.swpout_zero),
        ("swpin_zero", f.swpin_zero),
    ] {
        c.insert(k.to_string(), v);
    }
    if let Some(z) = z {
        c.insert("zswpwb".into(), z.zswpwb);
        c.insert("zswap".into(), z.zswap);
        c.insert("zswapped".into(), z.zswapped);
    }
    if let Some(m) = m {
        c.insert("usage_pages".into(), m.usage_pages);
        c.insert("inactive_anon".into(), m.inactive_anon);
        c.insert("active_anon".into(), m.active_anon);
        add_struct(&mut c, &m.events);
    }
    c
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        workload: &str,
        elapsed_s: f64,
        engine_s: f64,
        cache_s: f64,
        c: &Counters,
        st: &MmStats,
        cgroups: Vec<CgroupReport>,
        pools: &[(Algorithm, uzswap_zsmalloc::PoolStats)],
        events: u64,
        reclaim_eagain: u64,
        limit_ebusy: u64,
        timeline: Vec<Sample>,
    ) -> Report {
        let mut counters = counters_map(c);
        add_struct(&mut counters, st);
        counters.insert("reclaim_eagain".into(), reclaim_eagain);
        counters.insert("limit_ebusy".into(), limit_ebusy);
        let classes = pools
            .iter()
            .flat_map(|(alg, ps)| {
                ps.classes.iter().map(move |k| ClassRow {
                    compressor: alg.to_string(),
                    class: k.index,
                    size: k.size,
                    obj_allocated: k.obj_allocated,
                    obj_used: k.obj_used,
                    pages_used: k.pages_used,
                    pages_per_zspage: k.pages_per_zspage,
                    freeable: k.freeable,
                    huge: k.huge,
                })
            })
            .collect();
        Report {
            workload: workload.to_string(),
            elapsed_s,
            engine_s,
            cache_s,
            verify_s: 0.0,
            source_s: 0.0,
            source_wait_s: 0.0,
            counters,
            cgroups,
            classes,
            events,
            config: None,
            kernel: None,
            timeline,
        }
    }

    /// A counter by its kernel name (0 if absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// The kernel-style text report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "workload {}: {} events in {:.2} s (engine {:.2} s, cache {:.2} s)",
            self.workload, self.events, self.elapsed_s, self.engine_s, self.cache_s
        );
        if let Some(k) = &self.kernel {
            let _ = writeln!(s, "live kernel ({}): {:.2} s\n", k.compressor, k.elapsed_s);
            let _ = writeln!(
                s,
                "{:<28} {:>12} {:>12} {:>7}",
                "counter", "replay", "kernel", "ratio"
            );
            for name in COMPARED {
                let ours = self.counter(name);
                let theirs = k.counters.get(name).copied().unwrap_or(0);
                let _ = writeln!(
                    s,
                    "{name:<28} {ours:>12} {theirs:>12} {:>7}",
                    ratio_text(ours, theirs)
                );
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s, "/sys/kernel/debug/zswap");
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
        ] {
            let _ = writeln!(s, "  {k:<28} {}", self.counter(k));
        }
        let _ = writeln!(s, "/proc/vmstat");
        for k in [
            "zswpin",
            "zswpout",
            "zswpwb",
            "pswpin",
            "pswpout",
            "swpin_zero",
            "swpout_zero",
            "pgfault",
            "pgmajfault",
            "pgscan_anon",
            "pgsteal_anon",
            "pgactivate",
            "pgdeactivate",
            "workingset_refault_anon",
            "workingset_activate_anon",
            "workingset_restore_anon",
            "swap_ra",
            "swap_ra_hit",
        ] {
            let _ = writeln!(s, "  {k:<28} {}", self.counter(k));
        }
        if !self.cgroups.is_empty() {
            let _ = writeln!(
                s,
                "cgroups{:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
                "", "elapsed_s", "zswpout", "zswpin", "zswpwb", "pswpout", "pswpin", "refaults"
            );
            for c in &self.cgroups {
                let g = |k: &str| c.counters.get(k).copied().unwrap_or(0);
                let _ = writeln!(
                    s,
                    "  {:<18} {:>9.3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
                    c.name,
                    c.elapsed_s,
                    g("zswpout"),
                    g("zswpin"),
                    g("zswpwb"),
                    g("pswpout"),
                    g("pswpin"),
                    g("workingset_refault_anon")
                );
            }
        }
        let used: Vec<&ClassRow> = self.classes.iter().filter(|c| c.pages_used > 0).collect();
        if !used.is_empty() {
            let _ = writeln!(
                s,
                "classes (non-empty)\n  {:>5} {:>5} {:>13} {:>9} {:>10} {:>16} {:>8}",
                "class",
                "size",
                "obj_allocated",
                "obj_used",
                "pages_used",
                "pages_per_zspage",
                "freeable"
            );
            for c in used {
                let _ = writeln!(
                    s,
                    "  {:>5} {:>5} {:>13} {:>9} {:>10} {:>16} {:>8}{}",
                    c.class,
                    c.size,
                    c.obj_allocated,
                    c.obj_used,
                    c.pages_used,
                    c.pages_per_zspage,
                    c.freeable,
                    if c.huge { " huge" } else { "" }
                );
            }
        }
        s
    }

    /// The timeline as CSV.
    pub fn timeline_csv(&self) -> String {
        let mut s = String::from(
            "events,t_s,pool_total_size,stored_pages,written_back_pages,zswpout,zswpin,pswpout,pswpin,resident_pages\n",
        );
        for x in &self.timeline {
            let _ = writeln!(
                s,
                "{},{:.6},{},{},{},{},{},{},{},{}",
                x.events,
                x.t_s,
                x.pool_total_size,
                x.stored_pages,
                x.written_back_pages,
                x.zswpout,
                x.zswpin,
                x.pswpout,
                x.pswpin,
                x.resident_pages
            );
        }
        s
    }
}

/// "ours/theirs" as text ("-" when both are 0, "inf" when only theirs is).
pub fn ratio_text(ours: u64, theirs: u64) -> String {
    match (ours, theirs) {
        (0, 0) => "-".into(),
        (_, 0) => "inf".into(),
        _ => format!("{:.2}", ours as f64 / theirs as f64),
    }
}

/// `--compare`: one column per configuration.
pub fn compare_table(runs: &[(String, Report)]) -> String {
    let mut s = String::new();
    let w = runs
        .iter()
        .map(|(l, _)| l.len())
        .max()
        .unwrap_or(8)
        .clamp(10, 28);
    let _ = write!(s, "{:<28}", "counter");
    for (label, _) in runs {
        let _ = write!(s, " {label:>w$}");
    }
    let _ = writeln!(s);
    let rows = [
        "elapsed_s",
        "engine_s",
        "cache_s",
        "pool_limit_hit",
        "pool_total_size",
        "stored_pages",
        "stored_incompressible_pages",
        "written_back_pages",
        "reject_compress_poor",
        "zswpout",
        "zswpin",
        "zswpwb",
        "pswpout",
        "pswpin",
        "pgmajfault",
        "workingset_refault_anon",
        "swap_ra",
        "swap_ra_hit",
        "pool_pages_used",
        "huge_pages_used",
    ];
    for r in rows {
        let _ = write!(s, "{r:<28}");
        for (_, rep) in runs {
            let v = match r {
                "elapsed_s" => format!("{:.3}", rep.elapsed_s),
                "engine_s" => format!("{:.3}", rep.engine_s),
                "cache_s" => format!("{:.3}", rep.cache_s),
                "pool_pages_used" => rep
                    .classes
                    .iter()
                    .map(|c| c.pages_used)
                    .sum::<usize>()
                    .to_string(),
                "huge_pages_used" => rep
                    .classes
                    .iter()
                    .filter(|c| c.huge)
                    .map(|c| c.pages_used)
                    .sum::<usize>()
                    .to_string(),
                _ => rep.counter(r).to_string(),
            };
            let _ = write!(s, " {v:>w$}");
        }
        let _ = writeln!(s);
    }
    for (i, c) in runs
        .first()
        .map(|(_, r)| r.cgroups.iter().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        for k in ["zswpin", "pswpin", "zswpwb"] {
            let _ = write!(s, "{:<28}", format!("{}.{k}", c.name));
            for (_, rep) in runs {
                let v = rep
                    .cgroups
                    .get(i)
                    .and_then(|c| c.counters.get(k))
                    .copied()
                    .unwrap_or(0);
                let _ = write!(s, " {v:>w$}");
            }
            let _ = writeln!(s);
        }
    }
    s
}
