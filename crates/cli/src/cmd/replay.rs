// SPDX-License-Identifier: MIT
//! `uzswap replay`: a workload (built-in or a trace) through the real cache under memory
//! limits, with the kernel's counters at the end, optionally next to the live kernel running
//! the same accesses (`--kernel`), or several cache configurations side by side (`--compare`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use uzswap_corpus::Pages;
use uzswap_mm::Accounting;
use uzswap_replay::kernel::{self, KernelOptions};
use uzswap_replay::workload::{self, Builtin, CgroupLayout, WorkloadParams};
use uzswap_replay::{report, LimitedTrace, Replay, ReplayOptions, Report, Source};
use uzswap_trace::{Event, PageSource, TraceReader};
use uzswap_zswap::{Algorithm, Params};

use crate::cache_opts::CacheOptions;
use crate::shared::output::{emit, emit_json};
use crate::shared::pages;

/// Arguments of `uzswap replay`.
#[derive(Parser, Debug)]
#[command(after_help = "Built-in workloads:\n  \
    build                 compile-like phases: short-lived jobs next to a warm working set\n  \
    zipf                  hot/cold skew: Zipf(1.0) accesses over twice the limit\n  \
    scan                  sequential streaming: three passes over twice the limit\n  \
    active-vs-background  a background cgroup fills the pool, then an active one works\n\n\
    The trace format is docs/trace-format.md; the model and its differences from the kernel are\n\
    docs/replay-vs-kernel.md.")]
pub struct Args {
    /// A built-in workload: build, zipf, scan, active-vs-background.
    #[arg(long, value_name = "NAME", conflicts_with = "trace")]
    pub workload: Option<String>,
    /// A trace file (docs/trace-format.md), text or binary.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// memory.max of the workload's cgroup(s) (K, M, G suffixes; default 256M). With --trace,
    /// the memory.max of the trace's top-level cgroups in place of the trace's own (a
    /// recording of `uzswap run`: its process tree's budget); without it, the trace's own.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_max: Option<u64>,
    /// Accounting of memory.max: v2 charges the compressed pool to the cgroup, v1 does not
    /// (this machine's kernel; `--kernel` uses v1).
    #[arg(long, value_name = "v1|v2", value_parser = ["v1", "v2"])]
    pub cgroup: Option<String>,
    /// Page contents: a page file written by `uzswap capture` (default: memory of real
    /// programs captured now).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    /// Also write the corpus used (captured now, or read) as a page file, to replay again on
    /// exactly the same pages (`--corpus FILE`).
    #[arg(long, value_name = "FILE")]
    pub save_corpus: Option<PathBuf>,
    /// Seed of the built-in workload's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Multiplies the built-in workload's accesses.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    #[command(flatten)]
    pub cache: CacheOptions,
    /// Also run the same accesses on the live kernel (root, cgroup v1, zswap) and print its
    /// counters next to ours.
    #[arg(long)]
    pub kernel: bool,
    /// Directory of the live kernel's swap file (must be on a disk, not tmpfs).
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    pub kernel_swap_dir: PathBuf,
    /// Directory of the replay's own swap file.
    #[arg(long, value_name = "DIR")]
    pub swap_dir: Option<PathBuf>,
    /// Open the replay's swap file with O_DIRECT (no page cache, as the kernel's swap I/O);
    /// an error where the swap directory's file system refuses it.
    #[arg(long)]
    pub direct_io: bool,
    /// Run the workload with each set of cache options (each one quoted string of flags,
    /// on top of the flags given outside) in parallel, and print one side-by-side table.
    /// Takes the rest of the command line: put it last.
    #[arg(
        long,
        value_name = "OPTIONS",
        num_args = 1..,
        allow_hyphen_values = true,
        conflicts_with = "kernel"
    )]
    pub compare: Vec<String>,
    /// Latency model of the swap device: microseconds added per page read from it to the
    /// elapsed time of the cgroup that waits for it.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub disk_latency_us: u64,
    /// Write counters and pool size over time as CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub timeline: Option<PathBuf>,
    /// Draw pool size, stored and written-back pages over time as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the workload's events as a trace instead of replaying it (.txt: text, else binary).
    #[arg(long, value_name = "FILE")]
    pub save_trace: Option<PathBuf>,
    /// Do not compare every page read back with what was written.
    #[arg(long)]
    pub no_verify: bool,
    /// Entries of the modelled data TLB (0: every access sets the accessed bit).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub tlb: usize,
    /// Period of the memcg statistics flush (ms of modelled kernel time) that reclaim's
    /// heuristics read; 0: they see exact values.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub stats_flush_ms: u64,
    /// vm.page-cluster: swap-in reads up to 2^N pages around a fault (readahead; 0: none, as
    /// zram setups often set). Default: the kernel's 3, or with --kernel the machine's value,
    /// which --page-cluster replaces for the run (restored after).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=31))]
    pub page_cluster: Option<u32>,
    /// Let the cache's shrink worker run concurrently, as the kernel's does (counters then
    /// depend on timing); by default it runs when each fault is done, deterministically.
    #[arg(long)]
    pub async_shrink: bool,
    /// Print one JSON object (issue #12's layout) instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// `uzswap __replay-runner`: the live kernel comparison's per-cgroup process.
#[derive(Parser, Debug)]
pub struct RunnerArgs {
    #[arg(long)]
    pub pages: u64,
    #[arg(long)]
    pub corpus_fd: i32,
    #[arg(long)]
    pub corpus_pages: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    uzswap_trace::text::parse_size(s).and_then(|b| {
        if b < 64 * 4096 {
            Err(format!("{s}: at least 256K"))
        } else {
            Ok(b)
        }
    })
}

/// Runs the hidden runner subcommand.
pub fn run_runner(a: RunnerArgs) -> anyhow::Result<()> {
    uzswap_replay::runner::run(a.pages, a.corpus_fd, a.corpus_pages).map_err(anyhow::Error::msg)
}

/// Notes for stderr (kept apart from the report, so `--json` stays one object on stdout).
fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "uzswap replay: {msg}");
}

fn load_corpus(args: &Args, header_pages: Option<&PageSource>) -> anyhow::Result<Arc<Pages>> {
    let path = args.corpus.clone().or_else(|| match header_pages {
        Some(PageSource::File(p)) => Some(p.clone()),
        _ => None,
    });
    let pages = match path {
        Some(p) => pages::load(&pages::PageSource::File(p), None, args.json)?,
        None => default_corpus(DEFAULT_CORPUS_PAGES, args.json)?,
    };
    note(&format!(
        "corpus: {} pages ({})",
        pages.len(),
        pages.source()
    ));
    if let Some(p) = &args.save_corpus {
        uzswap_corpus::write_page_file(p, &pages)
            .with_context(|| format!("writing the corpus to {}", p.display()))?;
        note(&format!("corpus saved to {}", p.display()));
    }
    Ok(Arc::new(pages))
}

/// Pages of the default corpus (32 MiB).
const DEFAULT_CORPUS_PAGES: usize = 8192;

/// The default corpus, captured now from real processes (issue #12): this replay process's
/// own resident private anonymous memory (at most a quarter of the pages), then the memory of
/// short-lived real programs it starts (a python3 and a perl workload; pages of ELF files
/// without either interpreter) for the rest. Never generated bytes.
fn default_corpus(n: usize, quiet: bool) -> anyhow::Result<Pages> {
    let me = std::process::id();
    let own = uzswap_corpus::capture_pid_with(
        me,
        &uzswap_corpus::CaptureOptions {
            max_pages: Some((n / 4).max(1)),
        },
    )
    .with_context(|| format!("capturing this process's memory (pid {me})"))?;
    let mut out = own.pages;
    let own_source = format!("this process, pid {me} ({}): {} pages", own.comm, out.len());
    let started = pages::load(
        &pages::PageSource::Default {
            pages: n - out.len(),
        },
        None,
        quiet,
    )?;
    out.extend(&started);
    out.set_source(format!("{own_source}; {}", started.source()));
    Ok(out)
}

/// The kernel's zswap compressors (from /proc/crypto).
fn kernel_has_compressor(name: &str) -> bool {
    std::fs::read_to_string("/proc/crypto")
        .map(|t| {
            t.lines().any(|l| {
                l.strip_prefix("name")
                    .and_then(|r| r.trim_start().strip_prefix(':'))
                    .is_some_and(|v| v.trim() == name)
            })
        })
        .unwrap_or(false)
}

/// Settle the cache options for this run; returns the options in force and notes.
fn settle_options(
    args: &Args,
    workload: &str,
    recorded: Option<&str>,
) -> anyhow::Result<(CacheOptions, Vec<String>)> {
    let mut o = args.cache.clone();
    let mut notes = Vec::new();
    // A recording of `uzswap run` carries the run's cache options: the replay's defaults.
    if let Some(r) = recorded.filter(|r| !r.trim().is_empty()) {
        let mut rec = CacheOptions::parse_str(r)
            .with_context(|| "the trace's recorded cache options (meta cache_options)")?;
        if args.kernel {
            // The live kernel's pool limit is a share of this machine's RAM.
            rec.total_memory = None;
        }
        o = rec.overlay(&o);
        let taken = rec.to_flags();
        if !taken.is_empty() {
            notes.push(format!(
                "the recorded run's cache options, where not given here: {}",
                taken.join(" ")
            ));
        }
    }
    if workload == "active-vs-background" && o.max_pool_percent.is_none() {
        o.max_pool_percent = Some(1);
        notes.push(
            "active-vs-background fills the pool: --max-pool-percent 1 unless given (the \
             background cgroup writes pool limit x compression ratio x 1.3)"
                .into(),
        );
    }
    if args.kernel {
        match o.compressor.as_deref() {
            None | Some("lz4") => {
                if o.compressor.is_some() {
                    bail!("--kernel: this kernel's zswap offers lzo, lzo-rle and deflate, not lz4");
                }
                o.compressor = Some("lzo-rle".into());
                notes.push(
                    "--kernel: this kernel's zswap has no lz4 (it offers lzo, lzo-rle, \
                     deflate): both sides use lzo-rle"
                        .into(),
                );
            }
            Some(c) => {
                let alg: Algorithm = c
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--compressor {c}: {e}"))?;
                let kname = alg.to_string();
                if !kernel_has_compressor(&kname) {
                    bail!("--kernel: the kernel has no {kname} compressor (see /proc/crypto)");
                }
            }
        }
        match o.proactive_shrink.as_deref() {
            None => {
                o.proactive_shrink = Some("off".into());
                notes.push(
                    "--kernel: proactive shrinking off on both sides (the kernel has none)".into(),
                );
            }
            Some("on") => notes.push(
                "--kernel: the kernel has no proactive shrinking; expect its writeback to differ"
                    .into(),
            ),
            _ => {}
        }
        if o.protection.as_deref() == Some("protected-size") {
            notes.push("--kernel: the kernel protects warm entries with second chance".into());
        }
        if o.incompressible.as_deref() == Some("reject") {
            notes.push("--kernel: the kernel stores incompressible pages as-is".into());
        }
        if o.chain_rule.as_deref() == Some("used-percent") {
            notes.push(
                "--kernel: this kernel's zsmalloc picks pages per zspage by min-waste".into(),
            );
        }
        if o.zero_pages.as_deref() == Some("entry") {
            notes
                .push("--kernel: this kernel keeps zero-filled pages without a zswap entry".into());
        }
        if o.lru.as_deref() == Some("per-pool") {
            notes.push("--kernel: this kernel has one LRU for all pools".into());
        }
        if o.chain_size.is_some_and(|n| n != 8) {
            notes.push("--kernel: this kernel's zsmalloc chain size is 8 (a build option)".into());
        }
        if o.total_memory.is_some() {
            bail!(
                "--kernel: the live kernel's pool limit is a percent of this machine's RAM; \
                 drop --total-memory to compare with it"
            );
        }
    }
    Ok((o, notes))
}

struct Plan {
    name: String,
    accounting: Accounting,
    params: Params,
    layout: Vec<CgroupLayout>,
    swap_slots: u32,
    wparams: Option<WorkloadParams>,
    /// vm.page-cluster of the model (and, given, of the live kernel's run).
    page_cluster: u32,
}

fn source(args: &Args, plan: &Plan) -> anyhow::Result<Source> {
    Ok(match &args.trace {
        Some(p) => {
            let r = TraceReader::open(p).map_err(|e| anyhow::anyhow!("{e}"))?;
            match args.memory_max {
                Some(b) => Source::LimitedTrace(Box::new(LimitedTrace::new(r, b))),
                None => Source::Trace(Box::new(r)),
            }
        }
        None => Source::Builtin(Box::new(
            Builtin::new(&plan.name, plan.wparams.as_ref().expect("built-in"))
                .expect("known workload"),
        )),
    })
}

/// memory.max of a built-in workload's cgroups when --memory-max is not given.
const DEFAULT_MEMORY_MAX: u64 = 256 << 20;

/// The limit a replay runs under, for its reports.
fn limit_label(args: &Args) -> String {
    match (args.memory_max, &args.trace) {
        (Some(b), _) => format!("{} MiB", b >> 20),
        (None, Some(_)) => "the trace's own".into(),
        (None, None) => format!("{} MiB", DEFAULT_MEMORY_MAX >> 20),
    }
}

/// What one pass over a trace tells before it is replayed.
struct TraceScan {
    /// Its cgroups and the pages each one's address space spans.
    layout: Vec<CgroupLayout>,
    events: u64,
    /// Its writes: a bound on the pages it can swap out (a page never written reads as the
    /// zero page and is never swapped), far below the spans of a recording whose processes'
    /// pages are numbered apart.
    writes: u64,
    /// Its page source and meta (a recording of `uzswap run`: `budget_covers`,
    /// `cache_options`).
    header: uzswap_trace::Header,
}

/// Scans a trace (one pass).
fn scan_trace(path: &PathBuf) -> anyhow::Result<TraceScan> {
    let mut r = TraceReader::open(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let header = r.header().clone();
    let mut layout: Vec<CgroupLayout> = Vec::new();
    let (mut events, mut writes) = (0, 0);
    while let Some(rec) = r.next_event().map_err(|e| anyhow::anyhow!("{e}"))? {
        events += 1;
        if let Event::Write { .. } = rec.event {
            writes += 1;
        }
        match rec.event {
            Event::Cgroup { name, parent, .. } => layout.push(CgroupLayout {
                name,
                pages: 0,
                parent,
            }),
            Event::Read { cg, page } | Event::Write { cg, page, .. } if cg > 0 => {
                let l = &mut layout[cg as usize - 1];
                l.pages = l.pages.max(page + 1);
            }
            _ => {}
        }
    }
    Ok(TraceScan {
        layout,
        events,
        writes,
        header,
    })
}

fn plan(
    args: &Args,
    opts: &CacheOptions,
    corpus: &Pages,
    trace: Option<&TraceScan>,
) -> anyhow::Result<Plan> {
    let params = opts.to_params()?;
    // A recording of `uzswap run --budget-covers resident` is replayed as cgroup v1 charges
    // (the pool outside the budget) unless --cgroup says otherwise.
    let recorded_v1 = trace.and_then(|t| t.header.meta("budget_covers")) == Some("resident");
    let accounting = match (args.cgroup.as_deref(), args.kernel || recorded_v1) {
        (Some("v2"), true) => {
            bail!("--kernel compares cgroup v1 limits (this machine's kernel): drop --cgroup v2")
        }
        (Some("v1"), _) | (None, true) => Accounting::V1,
        _ => Accounting::V2,
    };
    let (name, layout, wparams) = match (&args.workload, trace.map(|t| &t.layout[..])) {
        (_, Some(l)) => (
            args.trace
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            l.to_vec(),
            None,
        ),
        (Some(w), None) => {
            if !workload::BUILTIN.contains(&w.as_str()) {
                bail!(
                    "unknown workload {w:?}: the built-in workloads are {}",
                    workload::BUILTIN.join(", ")
                );
            }
            let wp = WorkloadParams {
                memory_max_pages: args.memory_max.unwrap_or(DEFAULT_MEMORY_MAX) / 4096,
                scale: args.scale,
                seed: args.seed,
                pool_limit_pages: params.max_pool_pages(),
                ratio: uzswap_replay::estimate_ratio(corpus, params.compressor),
                pool_charged: accounting == Accounting::V2,
            };
            let b = Builtin::new(w, &wp).expect("known workload");
            (w.clone(), b.layout().to_vec(), Some(wp))
        }
        (None, None) => bail!("give --workload NAME or --trace FILE"),
    };
    let mut footprint: u64 = layout.iter().map(|l| l.pages).sum();
    if let Some(t) = trace {
        footprint = footprint.min(t.writes);
    }
    // Beside the live kernel the model reads ahead as the machine does, unless told.
    let page_cluster = match args.page_cluster {
        Some(n) => n,
        None if args.kernel => uzswap_kernel::swap::page_cluster().unwrap_or(3),
        None => 3,
    };
    Ok(Plan {
        name,
        accounting,
        params,
        layout,
        swap_slots: uzswap_replay::swap_slots_for(footprint),
        wparams,
        page_cluster,
    })
}

fn replay_options(args: &Args, plan: &Plan, timeline_every: u64) -> ReplayOptions {
    ReplayOptions {
        params: plan.params.clone(),
        accounting: plan.accounting,
        swap_slots: plan.swap_slots,
        swap_dir: args.swap_dir.clone().unwrap_or_else(std::env::temp_dir),
        verify: !args.no_verify,
        disk_read_latency: Duration::from_micros(args.disk_latency_us),
        timeline_every,
        sync_shrink: !args.async_shrink,
        tlb_entries: args.tlb,
        stats_flush: Duration::from_millis(args.stats_flush_ms),
        spans: plan.layout.iter().map(|l| l.pages).collect(),
        direct_io: args.direct_io,
        trace_clock: !args.kernel,
        page_cluster: plan.page_cluster,
        ..ReplayOptions::default()
    }
}

fn progress_bar(total: Option<u64>, label: &str, quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(total.unwrap_or(0));
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix:>8} [{bar:40}] {pos}/{len} events ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_prefix(label.to_string());
    Some(pb)
}

fn config_json(plan: &Plan, args: &Args, opts: &CacheOptions) -> serde_json::Value {
    serde_json::json!({
        "memory_max": args.memory_max.or(args.trace.is_none().then_some(DEFAULT_MEMORY_MAX)),
        "cgroup": match plan.accounting { Accounting::V1 => "v1", Accounting::V2 => "v2" },
        "seed": args.seed,
        "scale": args.scale,
        "swap_slots": plan.swap_slots,
        "compressor": plan.params.compressor.to_string(),
        "max_pool_percent": plan.params.max_pool_percent,
        "total_memory_bytes": plan.params.total_memory_bytes,
        "accept_threshold_percent": plan.params.accept_threshold_percent,
        "chain_size": plan.params.chain_size,
        "chain_rule": plan.params.chain_rule.to_string(),
        "zero_pages": if plan.params.zero_page_entries { "entry" } else { "entryless" },
        "lru": plan.params.lru.to_string(),
        "proactive_shrink": plan.params.proactive_shrink,
        "shrinker": plan.params.shrinker_enabled,
        "page_cluster": plan.page_cluster,
        "options": opts.to_flags(),
    })
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.scale <= 0.0 || !args.scale.is_finite() {
        bail!("--scale must be positive");
    }
    let trace = args.trace.as_ref().map(scan_trace).transpose()?;
    let wname = args.workload.clone().unwrap_or_default();
    let (opts, notes) = settle_options(
        &args,
        &wname,
        trace.as_ref().and_then(|t| t.header.meta("cache_options")),
    )?;
    for n in &notes {
        note(n);
    }
    let corpus = load_corpus(&args, trace.as_ref().map(|t| &t.header.pages))?;
    if args.kernel {
        if let Some(why) = kernel::unavailable() {
            note(&format!("--kernel skipped: {why}"));
        }
    }
    if !args.compare.is_empty() {
        return run_compare(&args, &opts, &corpus, trace.as_ref());
    }
    let plan = plan(&args, &opts, &corpus, trace.as_ref())?;
    if let Some(path) = &args.save_trace {
        return save_trace(&args, &plan, trace.as_ref(), path);
    }
    let mut src = source(&args, &plan)?;
    let total = src.total_events().or(trace.as_ref().map(|t| t.events));
    let every = if args.timeline.is_some() || args.plot.is_some() {
        (total.unwrap_or(1 << 20) / 400).max(256)
    } else {
        0
    };
    let mut replay = Replay::new(replay_options(&args, &plan, every), corpus.clone())?;
    let pb = progress_bar(total, "replay", false);
    let r = uzswap_replay::run(&mut replay, &mut src, &mut |n| {
        if let Some(pb) = &pb {
            pb.set_position(n);
        }
    });
    let mut report = match r {
        Err(e @ uzswap_replay::ReplayError::Engine(uzswap_mm::Error::Oom(_)))
            if plan.accounting == Accounting::V2 =>
        {
            return Err(anyhow::Error::new(e).context(
                "in cgroup v2 the compressed pool counts against memory.max: at this corpus's \
                 compression ratio the workload may not fit (try a larger --memory-max or \
                 --cgroup v1)",
            ));
        }
        r => r?,
    };
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    drop(replay);
    report.config = Some(config_json(&plan, &args, &opts));
    if args.kernel && kernel::unavailable().is_none() {
        let kopts = KernelOptions {
            compressor: plan.params.compressor.to_string(),
            max_pool_percent: plan.params.max_pool_percent,
            accept_threshold_percent: plan.params.accept_threshold_percent,
            shrinker_enabled: plan.params.shrinker_enabled,
            swap_dir: args.kernel_swap_dir.clone(),
            swap_slots: plan.swap_slots,
            exe: std::env::current_exe().context("locating the uzswap binary")?,
            page_cluster: args.page_cluster,
        };
        let mut src = source(&args, &plan)?;
        let pb = progress_bar(total, "kernel", false);
        let mut k = kernel::run(&kopts, &mut src, &plan.layout, &corpus, &mut |n| {
            if let Some(pb) = &pb {
                pb.set_position(n);
            }
        })?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        kernel::fill_ratios(&mut k, &report);
        for n in &k.notes {
            note(n);
        }
        report.kernel = Some(k);
    }
    if let Some(p) = &args.timeline {
        std::fs::write(p, report.timeline_csv())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.plot {
        let title = format!(
            "{} (memory.max {}, {})",
            report.workload,
            limit_label(&args),
            plan.params.compressor
        );
        std::fs::write(p, uzswap_replay::plot::svg(&title, &report.timeline))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if args.json {
        return emit_json(&report);
    }
    let out = {
        let mut s = format!(
            "uzswap replay: {} under memory.max {} (cgroup {}), {} (max_pool_percent {}, accept {}%, proactive shrink {})\n",
            report.workload,
            limit_label(&args),
            match plan.accounting {
                Accounting::V1 => "v1",
                Accounting::V2 => "v2",
            },
            plan.params.compressor,
            plan.params.max_pool_percent,
            plan.params.accept_threshold_percent,
            if plan.params.proactive_shrink { "on" } else { "off" },
        );
        s.push_str(&report.to_text());
        s
    };
    emit(&out)
}

fn save_trace(
    args: &Args,
    plan: &Plan,
    trace: Option<&TraceScan>,
    path: &PathBuf,
) -> anyhow::Result<()> {
    let mut src = source(args, plan)?;
    let text = path.extension().is_some_and(|e| e == "txt" || e == "trace");
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    // A trace saved again (another encoding, another limit) keeps its page source and meta
    // (a recording's budget and options); a built-in workload's names its parameters.
    let header = match trace {
        Some(t) => {
            let mut h = t.header.clone();
            if let Some(p) = &args.corpus {
                h.pages = PageSource::File(p.clone());
            }
            h
        }
        None => uzswap_trace::Header {
            pages: match &args.corpus {
                Some(p) => PageSource::File(p.clone()),
                None => PageSource::Default,
            },
            meta: vec![
                ("workload".into(), plan.name.clone()),
                ("seed".into(), args.seed.to_string()),
                ("scale".into(), args.scale.to_string()),
            ],
        },
    };
    let mut w = uzswap_trace::TraceWriter::new(
        f,
        if text {
            uzswap_trace::Format::Text
        } else {
            uzswap_trace::Format::Binary
        },
        &header,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    // A trace's timestamps go with its events: they pace a replay's kernel clock.
    while let Some(r) = src.next_record()? {
        w.event(r.time_ns, &r.event)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let n = w.events_written();
    w.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    note(&format!("wrote {n} events to {}", path.display()));
    Ok(())
}

fn run_compare(
    args: &Args,
    base: &CacheOptions,
    corpus: &Arc<Pages>,
    trace: Option<&TraceScan>,
) -> anyhow::Result<()> {
    let mut plans = Vec::new();
    for s in &args.compare {
        let o = base.overlay(&CacheOptions::parse_str(s)?);
        let p = plan(args, &o, corpus, trace)?;
        plans.push((s.clone(), p));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut results: Vec<Option<anyhow::Result<Report>>> = (0..plans.len()).map(|_| None).collect();
    for chunk in (0..plans.len()).collect::<Vec<_>>().chunks(threads) {
        std::thread::scope(|sc| {
            let hs: Vec<_> = chunk
                .iter()
                .map(|&i| {
                    let (_, p) = &plans[i];
                    let corpus = corpus.clone();
                    (
                        i,
                        sc.spawn(move || -> anyhow::Result<Report> {
                            let mut src = source(args, p)?;
                            let mut r = Replay::new(replay_options(args, p, 0), corpus)?;
                            Ok(uzswap_replay::run(&mut r, &mut src, &mut |_| {})?)
                        }),
                    )
                })
                .collect();
            for (i, h) in hs {
                results[i] = Some(
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("replay thread panicked"))),
                );
            }
        });
    }
    // A configuration under which the workload runs out of memory (the kernel would OOM-kill
    // it) is a result of the comparison, not its failure; any other error ends it.
    let mut runs = Vec::new();
    let mut oom = Vec::new();
    for ((label, _), r) in plans.iter().zip(results) {
        match r.expect("ran") {
            Ok(rep) => runs.push((label.clone(), rep)),
            Err(e)
                if matches!(
                    e.downcast_ref::<uzswap_replay::ReplayError>(),
                    Some(uzswap_replay::ReplayError::Engine(uzswap_mm::Error::Oom(_)))
                ) =>
            {
                oom.push((label.clone(), e.to_string()))
            }
            Err(e) => return Err(e.context(format!("replay with {label:?}"))),
        }
    }
    if runs.is_empty() {
        bail!(
            "every configuration ran out of memory (the kernel would OOM-kill): {}",
            oom.iter()
                .map(|(l, _)| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if args.json {
        let v = serde_json::json!({
            "workload": runs.first().map(|(_, r)| r.workload.clone()),
            "runs": runs.iter().map(|(l, r)| serde_json::json!({"options": l, "report": r})).collect::<Vec<_>>(),
            "out_of_memory": oom.iter().map(|(l, e)| serde_json::json!({"options": l, "error": e})).collect::<Vec<_>>(),
        });
        emit_json(&v)
    } else {
        let mut text = format!(
            "uzswap replay --compare: {} under memory.max {} ({} runs in parallel)\n{}",
            runs.first().map(|(_, r)| r.workload.as_str()).unwrap_or(""),
            limit_label(args),
            runs.len() + oom.len(),
            report::compare_table(&runs)
        );
        for (l, e) in &oom {
            text.push_str(&format!("{l:?}: {e}\n"));
        }
        emit(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default corpus comes from this process and from a program it starts, never from
    /// generated bytes: its source names both, this process's pages come first (at most a
    /// quarter), the started program's follow.
    #[test]
    fn default_corpus_is_this_process_and_a_started_program() {
        let c = default_corpus(256, true).unwrap();
        assert_eq!(c.len(), 256);
        let me = std::process::id();
        assert!(
            c.source().contains(&format!("this process, pid {me}")),
            "{}",
            c.source()
        );
        assert!(
            ["python3", "perl", "ELF"]
                .iter()
                .any(|p| c.source().contains(p)),
            "a started program or files: {}",
            c.source()
        );
        let own: usize = c
            .source()
            .split("): ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(own > 0 && own <= 64, "own pages {own}");
        assert!(own < c.len(), "pages of the started program follow");
        // The pages after this process's are the started program's: not all zero.
        assert!((own..c.len()).any(|i| c.page(i).iter().any(|&b| b != 0)));
    }
}
