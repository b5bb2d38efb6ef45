// SPDX-License-Identifier: MIT
//! The one page loader of every command: a page file (or raw page dump), a live process, or the
//! default corpus, with one set of errors (those of `uzswap_corpus`, which name the file or
//! process and keep the I/O error as their source).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use uzswap_corpus::{
    capture_pid_with, default_corpus_with, read_page_file, CaptureOptions, DefaultCorpusOptions,
    Pages,
};

/// Where a command's pages come from.
#[derive(Clone, Debug)]
pub enum PageSource {
    /// A page file in the format of docs/page-file-format.md, or a raw page dump whose length
    /// is a whole number of pages.
    File(PathBuf),
    /// A live process's private writable anonymous memory.
    Pid(u32),
    /// Memory of a python3/perl workload started and captured now, at most `pages` pages.
    Default {
        /// Pages to capture.
        pages: usize,
    },
}

/// Loads the pages of `source`, keeping at most `limit` of them (captures stop there). Notes
/// (skipped ranges, the default corpus being captured) go to stderr unless `quiet`. No pages
/// at all is an error.
pub fn load(source: &PageSource, limit: Option<usize>, quiet: bool) -> anyhow::Result<Pages> {
    if limit == Some(0) {
        anyhow::bail!("the page limit must be at least 1");
    }
    let mut pages = match source {
        PageSource::File(path) => read_page_file(path)?,
        PageSource::Pid(pid) => {
            let cap = capture_pid_with(*pid, &CaptureOptions { max_pages: limit })?;
            if cap.ranges_skipped > 0 && !quiet {
                eprintln!(
                    "uzswap: note: {} unreadable ranges of pid {pid} skipped ({} pages)",
                    cap.ranges_skipped, cap.pages_skipped
                );
            }
            if cap.pages.is_empty() {
                anyhow::bail!(
                    "pid {pid} ({}) has no readable resident private anonymous memory",
                    cap.comm
                );
            }
            cap.pages
        }
        PageSource::Default { pages } => {
            let pages = limit.map_or(*pages, |l| l.min(*pages));
            if !quiet && std::io::stderr().is_terminal() {
                eprintln!(
                    "capturing the default corpus ({pages} pages of a python3/perl workload started now)..."
                );
            }
            default_corpus_with(&DefaultCorpusOptions {
                max_pages: pages,
                ..Default::default()
            })
            .context("capturing the default corpus")?
        }
    };
    if let Some(l) = limit {
        pages.truncate(l);
    }
    if pages.is_empty() {
        match source {
            PageSource::File(path) => anyhow::bail!("page file {} holds no pages", path.display()),
            _ => anyhow::bail!("{} holds no pages", pages.source()),
        }
    }
    Ok(pages)
}
