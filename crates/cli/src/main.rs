// SPDX-License-Identifier: MIT
//! `uzswap`: the command-line front end of the uzswap workspace.
//!
//! Each subcommand lives in its own module under `cmd/`, owning its clap `Args` struct and a
//! `run(args) -> anyhow::Result<()>`; helpers several commands use live once in `shared/`;
//! this file only wires them together.

mod cache_opts;
mod cmd;
mod shared;

use clap::{Parser, Subcommand};

/// uzswap: the Linux kernel's compressed swap cache (zswap) and its allocator (zsmalloc),
/// in user space.
///
/// Start with `uzswap bench` (store, load and verify real memory through the cache, next to the
/// kernel's zram where it can) or `uzswap classes` (the allocator's size-class table).
#[derive(Parser)]
#[command(name = "uzswap", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Store, load and verify real memory through the cache; compare with the raw codec and
    /// the kernel's zram in the same run.
    Bench(cmd::bench::Args),
    /// Print the zsmalloc size-class table of an empty pool (kernel debugfs layout or JSON).
    Classes(cmd::classes::Args),
    /// Save a live process's private writable anonymous memory as a page file.
    Capture(cmd::capture::Args),
    /// Predict zram mm_stat and zswap pool size for real pages, per compressor and chain size.
    Estimate(cmd::estimate::Args),
    /// Print the live kernel's zswap debugfs, vmstat swap and zram mm_stat counters.
    KernelStats(cmd::kernel_stats::Args),
    /// Replay a workload through the cache under a memory limit and print the kernel's
    /// counters (next to the live kernel's with --kernel).
    Replay(Box<cmd::replay::Args>),
    /// The live kernel comparison's per-cgroup process (internal).
    #[command(name = "__replay-runner", hide = true)]
    ReplayRunner(cmd::replay::RunnerArgs),
    /// Run a program with its anonymous memory paged through the cache under a budget
    /// (userfaultfd + SIGBUS, through a preload library).
    Run(Box<cmd::run::Args>),
}

/// Output piped into `head` and similar ends the program quietly, as for other Unix tools,
/// instead of panicking inside `println!`.
fn restore_default_sigpipe() {
    // SAFETY: setting SIGPIPE's disposition to the default action before any other thread exists
    // touches no Rust-managed state; Rust's runtime set it to "ignore" and nothing relies on that.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    restore_default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => cmd::bench::run(args),
        Command::Classes(args) => cmd::classes::run(args),
        Command::Capture(args) => cmd::capture::run(args),
        Command::Estimate(args) => cmd::estimate::run(args),
        Command::KernelStats(args) => cmd::kernel_stats::run(args),
        Command::Replay(args) => cmd::replay::run(*args),
        Command::ReplayRunner(args) => cmd::replay::run_runner(args),
        Command::Run(args) => cmd::run::run(*args),
    };
    if let Err(err) = result {
        eprintln!("uzswap: error: {err:#}");
        std::process::exit(1);
    }
}
