// SPDX-License-Identifier: MIT
//! `uzswap capture`: save a live process's private writable anonymous memory as a page file.

use clap::Parser;
use std::path::PathBuf;
use uzswap_corpus::{capture_pid_with, write_page_file, CaptureOptions, PAGE_SIZE};

/// Arguments of `uzswap capture`.
#[derive(Parser, Debug)]
pub struct Args {
    /// Process to capture (needs root or ptrace access to it).
    #[arg(long)]
    pub pid: u32,
    /// Page file to write (format: docs/page-file-format.md).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Stop after this many pages.
    #[arg(long)]
    pub max_pages: Option<usize>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let cap = capture_pid_with(
        args.pid,
        &CaptureOptions {
            max_pages: args.max_pages,
        },
    )?;
    if cap.pages.is_empty() {
        anyhow::bail!(
            "pid {} ({}) has no readable resident private anonymous memory ({} ranges skipped)",
            args.pid,
            cap.comm,
            cap.ranges_skipped
        );
    }
    write_page_file(&args.output, &cap.pages)?;
    let mut text = format!(
        "captured {} pages ({:.1} MiB) of pid {} ({}) into {}\n",
        cap.pages.len(),
        (cap.pages.len() * PAGE_SIZE) as f64 / (1 << 20) as f64,
        cap.pid,
        cap.comm,
        args.output.display()
    );
    text.push_str(&format!(
        "ranges read {}, ranges skipped {} ({} pages unreadable), pages not resident {}{}{}\n",
        cap.ranges_read,
        cap.ranges_skipped,
        cap.pages_skipped,
        cap.pages_not_resident,
        if cap.used_pagemap {
            ""
        } else {
            " (pagemap unreadable: all pages read)"
        },
        if cap.truncated {
            ", stopped at --max-pages"
        } else {
            ""
        }
    ));
    crate::shared::output::emit(&text)
}
