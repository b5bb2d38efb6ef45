// SPDX-License-Identifier: MIT
//! `uzswap estimate`: predict zram `mm_stat` and zswap `pool_total_size` for real pages (a
//! live process or a page file), per compressor and chain size; `--validate-kernel` writes
//! the same pages to an unused zram device and prints prediction and kernel side by side.

use anyhow::Context;
use clap::{ArgGroup, Parser};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use uzswap_compress::Algorithm;
use uzswap_corpus::{DefaultCorpusOptions, Pages, PAGE_SIZE};
use uzswap_estimate::{
    estimate_with_progress, Estimate, EstimateOptions, ZramMmStat, ZswapPrediction,
};
use uzswap_kernel::zram::{MmStat, Zram};
use uzswap_zsmalloc::ChainRule;

use crate::shared::output::emit;
use crate::shared::pages::{self, PageSource};
use crate::shared::timing::timed;

/// `writeln!` into a String (which cannot fail).
macro_rules! outln {
    ($o:expr) => {
        $o.push('\n')
    };
    ($o:expr, $($t:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($t)*);
    }};
}

/// Arguments of `uzswap estimate`.
#[derive(Parser, Debug)]
#[command(group(ArgGroup::new("source").required(true).args(["pid", "file", "default_corpus"])))]
pub struct Args {
    /// Capture this live process's private writable anonymous memory.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Read pages from a page file (or a raw dump whose length is a multiple of 4096).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Use the default corpus (a python3/perl workload captured now).
    #[arg(long)]
    pub default_corpus: bool,
    /// Compressor (lz4, lzo, lzo-rle, zstd[:LEVEL], deflate[:LEVEL]); repeat for several.
    /// Default: lz4 and lzo-rle.
    #[arg(long = "compressor", value_parser = crate::shared::parse::compressor)]
    pub compressors: Vec<Algorithm>,
    /// zsmalloc chain size (1..16); repeat for several. Default: 8.
    #[arg(long = "chain-size")]
    pub chain_sizes: Vec<usize>,
    /// Rule choosing pages per zspage: min-waste (today's kernel) or used-percent.
    #[arg(long, default_value = "min-waste", value_parser = crate::shared::parse::chain_rule)]
    pub chain_rule: ChainRule,
    /// Use at most this many pages (captures stop there; default corpus size).
    #[arg(long)]
    pub max_pages: Option<usize>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the pages to an unused zram device with each requested compressor zram
    /// offers and compare its mm_stat with the prediction; then page them out through the
    /// kernel's zswap (temporary swap file, each requested compressor zswap accepts) and
    /// compare its counters. Root; the device, zswap parameters and swap are restored after.
    #[arg(long)]
    pub validate_kernel: bool,
    /// zram device for --validate-kernel.
    #[arg(long, default_value_t = 0)]
    pub zram: u32,
    /// The kernel's CONFIG_ZSMALLOC_CHAIN_SIZE, used for --validate-kernel predictions.
    #[arg(long, default_value_t = 8)]
    pub kernel_chain_size: usize,
}

fn load_pages(args: &Args) -> anyhow::Result<Pages> {
    if args.max_pages == Some(0) {
        anyhow::bail!("--max-pages must be at least 1");
    }
    let source = if let Some(pid) = args.pid {
        PageSource::Pid(pid)
    } else if let Some(f) = &args.file {
        PageSource::File(f.clone())
    } else {
        PageSource::Default {
            pages: DefaultCorpusOptions::default().max_pages,
        }
    };
    pages::load(&source, args.max_pages, args.json)
}

fn progress_bar() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(0);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta})")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message("estimating");
    Some(pb)
}

fn run_estimate(pages: &Pages, opts: &EstimateOptions) -> anyhow::Result<Estimate> {
    let pb = progress_bar();
    let est = estimate_with_progress(pages, opts, &mut |done, total| {
        if let Some(pb) = &pb {
            pb.set_length(total);
            pb.set_position(done);
        }
    })?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    Ok(est)
}

#[derive(Serialize)]
struct Validation {
    compressor: String,
    chain_size: usize,
    predicted: ZramMmStat,
    kernel: ZramMmStat,
    mem_used_total_error_percent: f64,
    /// Mean wall time of the kernel's store (O_DIRECT write: compress + allocate), per page.
    kernel_write_ns_per_page: f64,
    /// The estimator's mean compression time per page for the same compressor.
    predicted_compress_ns_per_page: f64,
}

fn to_zram(m: &MmStat) -> ZramMmStat {
    ZramMmStat {
        orig_data_size: m.orig_data_size,
        compr_data_size: m.compr_data_size,
        mem_used_total: m.mem_used_total,
        mem_limit: m.mem_limit,
        mem_used_max: m.mem_used_max,
        same_pages: m.same_pages,
        pages_compacted: m.pages_compacted,
        huge_pages: m.huge_pages,
        huge_pages_since: m.huge_pages_since,
    }
}

/// Write the pages to zram with each algorithm zram offers and read `mm_stat` back. The
/// caller holds the kernel-test lock.
fn validate_zram(
    args: &Args,
    pages: &Pages,
    algs: &[Algorithm],
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Validation>> {
    let mut zram = Zram::claim_unused(args.zram)?;
    let supported = zram.supported_algorithms()?;
    let usable: Vec<Algorithm> = algs
        .iter()
        .copied()
        .filter(|a| a.is_kernel_default() && supported.iter().any(|s| s == a.kernel_name()))
        .collect();
    if usable.is_empty() {
        notes.push(format!(
            "zram{}: none of the requested compressors is offered (it offers: {})",
            args.zram,
            supported.join(" ")
        ));
        return Ok(Vec::new());
    }
    let opts = EstimateOptions {
        compressors: usable.clone(),
        chain_sizes: vec![args.kernel_chain_size],
        chain_rule: args.chain_rule,
    };
    let est = run_estimate(pages, &opts)?;
    let mut out = Vec::new();
    for (alg, pred) in usable.iter().zip(&est.results) {
        zram.configure(alg.kernel_name(), (pages.len() * PAGE_SIZE) as u64)?;
        let (t, res) = timed(|| zram.write_direct(0, pages.as_bytes()));
        res?;
        let write_ns = t.wall.as_nanos() as f64 / pages.len() as f64;
        let kernel = to_zram(&zram.mm_stat()?);
        zram.reset()?;
        let p = pred.zram_mm_stat.mem_used_total as f64;
        let k = kernel.mem_used_total as f64;
        out.push(Validation {
            compressor: alg.to_string(),
            chain_size: args.kernel_chain_size,
            predicted: pred.zram_mm_stat,
            kernel,
            mem_used_total_error_percent: if k == 0.0 { 0.0 } else { (p - k) / k * 100.0 },
            kernel_write_ns_per_page: write_ns,
            predicted_compress_ns_per_page: pred.compress_ns_per_page,
        });
    }
    Ok(out)
}

/// zswap's counters for one compressor: predicted for the pages that left RAM, and the
/// kernel's.
#[derive(Serialize)]
struct ZswapValidation {
    compressor: String,
    chain_size: usize,
    /// Pages MADV_PAGEOUT pushed out of RAM (the prediction covers exactly these).
    pages_out: u64,
    predicted: ZswapPrediction,
    kernel: ZswapPrediction,
    pool_total_size_error_percent: f64,
}

/// Push the pages through the kernel's zswap (temporary swap file, zswap enabled with each
/// requested compressor it accepts, shrinker off) and compare its counters with the
/// prediction. Every parameter is restored and the swap file removed afterwards. The caller
/// holds the kernel-test lock.
fn validate_zswap(
    args: &Args,
    pages: &Pages,
    algs: &[Algorithm],
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<ZswapValidation>> {
    use uzswap_kernel::{debugfs, swap, vmstat, zswap_params};
    if !zswap_params::available() {
        notes.push("zswap: not in this kernel".into());
        return Ok(Vec::new());
    }
    let mut params = zswap_params::ParamGuard::new();
    params.set("shrinker_enabled", "N")?;
    let mut out = Vec::new();
    let mut swapfile = None;
    for alg in algs.iter().copied().filter(|a| a.is_kernel_default()) {
        if let Err(e) = params.set("compressor", alg.kernel_name()) {
            notes.push(format!(
                "zswap: compressor {alg} not accepted by the kernel: {}",
                uzswap_kernel::error_chain(&e)
            ));
            continue;
        }
        params.set("enabled", "Y")?;
        let before = debugfs::read_zswap()?;
        if before.get("stored_pages") != Some(0) || before.get("pool_total_size") != Some(0) {
            notes.push(format!(
                "zswap: already in use (stored_pages {:?}), not compared",
                before.get("stored_pages")
            ));
            break;
        }
        if swapfile.is_none() {
            let path = PathBuf::from(format!(
                "/var/tmp/uzswap-validate-{}.swap",
                std::process::id()
            ));
            let bytes = (pages.len() * PAGE_SIZE) as u64 + (16 << 20);
            swapfile = Some(
                swap::SwapFile::create(&path, bytes).context("creating a temporary swap file")?,
            );
        }
        let vm0 = vmstat::read()?;
        let paged = swap::page_out(pages.as_bytes())?;
        let after = debugfs::read_zswap()?;
        let vm1 = vmstat::read()?;
        let mut sel = Pages::new(pages.source());
        for (i, s) in paged.swapped.iter().enumerate() {
            if *s {
                sel.push_page(pages.page(i))?;
            }
        }
        // Unmapping frees the swap entries, emptying zswap for the next compressor.
        drop(paged);
        let opts = EstimateOptions {
            compressors: vec![alg],
            chain_sizes: vec![args.kernel_chain_size],
            chain_rule: args.chain_rule,
        };
        let pred = if sel.is_empty() {
            ZswapPrediction::default()
        } else {
            run_estimate(&sel, &opts)?.results[0].zswap
        };
        let pool_pages = after.get("pool_total_size").unwrap_or(0) / PAGE_SIZE as u64;
        let kernel = ZswapPrediction {
            stored_pages: after.get("stored_pages").unwrap_or(0),
            stored_incompressible_pages: after.get("stored_incompressible_pages").unwrap_or(0),
            swpout_zero: vm1.swpout_zero.unwrap_or(0) - vm0.swpout_zero.unwrap_or(0),
            pool_total_size: after.get("pool_total_size").unwrap_or(0),
            pool_pages,
        };
        let k = kernel.pool_total_size as f64;
        out.push(ZswapValidation {
            compressor: alg.to_string(),
            chain_size: args.kernel_chain_size,
            pages_out: sel.len() as u64,
            pool_total_size_error_percent: if k == 0.0 {
                0.0
            } else {
                (pred.pool_total_size as f64 - k) / k * 100.0
            },
            predicted: pred,
            kernel,
        });
    }
    drop(swapfile);
    params.restore()?;
    Ok(out)
}

fn print_text(out: &mut String, est: &Estimate) {
    outln!(out, "source: {}", est.source);
    outln!(out,
        "pages {}  zero_pages {}  same_filled_pages {}  (zram stores {} same pages without memory; zswap skips {} zero pages)",
        est.pages, est.zero_pages, est.same_filled_pages, est.same_filled_pages, est.zero_pages
    );
    outln!(out);
    outln!(
        out,
        "{:<10} {:>5} {:>16} {:>6} {:>14} {:>11} {:>10} {:>19} {:>21} {:>9}",
        "compressor",
        "chain",
        "compressed_bytes",
        "ratio",
        "incompressible",
        "huge_objects",
        "pool_pages",
        "zram_mem_used_total",
        "zswap_pool_total_size",
        "ns/page"
    );
    for r in &est.results {
        outln!(
            out,
            "{:<10} {:>5} {:>16} {:>6.2} {:>14} {:>11} {:>10} {:>19} {:>21} {:>9.0}",
            r.compressor,
            r.chain_size,
            r.compressed_bytes,
            r.compression_ratio,
            r.incompressible_pages,
            r.huge_objects,
            r.pool_pages,
            r.zram_mem_used_total,
            r.zswap_pool_total_size,
            r.compress_ns_per_page
        );
    }
    outln!(out);
    outln!(out, "predicted zram mm_stat ({})", MmStat::FIELDS.join(" "));
    for r in &est.results {
        let v: Vec<String> = r.zram_mm_stat.values().iter().map(u64::to_string).collect();
        outln!(
            out,
            "{:<10} chain {:>2}: {}",
            r.compressor,
            r.chain_size,
            v.join(" ")
        );
    }
}

fn print_zswap_validation(out: &mut String, v: &[ZswapValidation]) {
    for x in v {
        outln!(out);
        outln!(
            out,
            "zswap {} (chain {}): {} pages paged out, predicted vs kernel",
            x.compressor,
            x.chain_size,
            x.pages_out
        );
        outln!(
            out,
            "{:<28} {:>14} {:>14} {:>10}",
            "counter",
            "predicted",
            "kernel",
            "diff"
        );
        let rows = [
            (
                "stored_pages",
                x.predicted.stored_pages,
                x.kernel.stored_pages,
            ),
            (
                "stored_incompressible_pages",
                x.predicted.stored_incompressible_pages,
                x.kernel.stored_incompressible_pages,
            ),
            (
                "pool_total_size",
                x.predicted.pool_total_size,
                x.kernel.pool_total_size,
            ),
            ("swpout_zero", x.predicted.swpout_zero, x.kernel.swpout_zero),
        ];
        for (name, p, k) in rows {
            outln!(
                out,
                "{name:<28} {p:>14} {k:>14} {:>+10}",
                p as i128 - k as i128
            );
        }
        outln!(
            out,
            "pool_total_size error: {:+.3}%",
            x.pool_total_size_error_percent
        );
    }
}

fn print_validation(out: &mut String, v: &[Validation], dev: u32) {
    for x in v {
        outln!(out);
        outln!(
            out,
            "zram{dev} {} (chain {}): predicted vs kernel",
            x.compressor,
            x.chain_size
        );
        outln!(
            out,
            "{:<18} {:>14} {:>14} {:>10}",
            "field",
            "predicted",
            "kernel",
            "diff"
        );
        for ((name, p), k) in MmStat::FIELDS
            .iter()
            .zip(x.predicted.values())
            .zip(x.kernel.values())
        {
            outln!(
                out,
                "{name:<18} {p:>14} {k:>14} {:>+10}",
                p as i128 - k as i128
            );
        }
        outln!(
            out,
            "mem_used_total error: {:+.3}%",
            x.mem_used_total_error_percent
        );
        outln!(
            out,
            "time per page: kernel zram store {:.0} ns, uzswap compressor alone {:.0} ns",
            x.kernel_write_ns_per_page,
            x.predicted_compress_ns_per_page
        );
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let pages = load_pages(&args)?;
    let opts = EstimateOptions {
        compressors: if args.compressors.is_empty() {
            EstimateOptions::default().compressors
        } else {
            args.compressors.clone()
        },
        chain_sizes: if args.chain_sizes.is_empty() {
            vec![8]
        } else {
            args.chain_sizes.clone()
        },
        chain_rule: args.chain_rule,
    };
    let est = run_estimate(&pages, &opts)?;
    let mut notes = Vec::new();
    let validation = if args.validate_kernel {
        let _lock = uzswap_kernel::KernelLock::acquire().context("taking the kernel-test lock")?;
        let zram = validate_zram(&args, &pages, &opts.compressors, &mut notes)?;
        let zswap = validate_zswap(&args, &pages, &opts.compressors, &mut notes)?;
        if zram.is_empty() && zswap.is_empty() {
            anyhow::bail!("nothing validated: {}", notes.join("; "));
        }
        Some((zram, zswap))
    } else {
        None
    };
    let mut out = String::new();
    if args.json {
        let mut v = serde_json::to_value(&est)?;
        if let (Some((zram, zswap)), Some(obj)) = (&validation, v.as_object_mut()) {
            obj.insert("kernel_validation".into(), serde_json::to_value(zram)?);
            obj.insert(
                "kernel_validation_zswap".into(),
                serde_json::to_value(zswap)?,
            );
            obj.insert(
                "kernel_validation_notes".into(),
                serde_json::to_value(&notes)?,
            );
        }
        outln!(out, "{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_text(&mut out, &est);
        if let Some((zram, zswap)) = &validation {
            print_validation(&mut out, zram, args.zram);
            print_zswap_validation(&mut out, zswap);
        }
        for n in &notes {
            outln!(out, "note: {n}");
        }
    }
    emit(&out)
}
