// SPDX-License-Identifier: MIT
//! What the paired harnesses (`load_overhead`, `store_overhead`) share: their arguments, the
//! corpus's pages and the quartiles they print.

use std::sync::Arc;

use uzswap_backing::SwapFile;
use uzswap_compress::Algorithm;
use uzswap_corpus::Pages;
use uzswap_zswap::{Params, Zswap};

/// The command line: `NAME FILE.pages [numbers and words at fixed positions]`.
pub struct Cli {
    name: &'static str,
    args: Vec<String>,
}

impl Cli {
    /// The arguments, or the usage line and exit status 2 without a page file.
    pub fn parse(name: &'static str, usage: &str) -> Cli {
        let args: Vec<String> = std::env::args().collect();
        if args.len() < 2 {
            eprintln!("usage: {name} {usage}");
            std::process::exit(2);
        }
        Cli { name, args }
    }

    /// Prints `msg` as this program's error and exits with `status`.
    pub fn fail(&self, msg: impl std::fmt::Display, status: i32) -> ! {
        eprintln!("{}: {msg}", self.name);
        std::process::exit(status);
    }

    /// The number at position `i`, or `default`.
    pub fn num(&self, i: usize, default: usize) -> usize {
        self.args
            .get(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// The word at position `i`, if given.
    pub fn word(&self, i: usize) -> Option<&str> {
        self.args.get(i).map(String::as_str)
    }

    /// The compressor named at position `i`, `default` if none.
    pub fn alg(&self, i: usize, default: Algorithm) -> Algorithm {
        match self.word(i).map(str::parse) {
            None => default,
            Some(Ok(a)) => a,
            Some(Err(e)) => self.fail(e, 2),
        }
    }

    /// The page file.
    pub fn corpus(&self) -> Pages {
        let path = &self.args[1];
        uzswap_corpus::read_page_file(path)
            .unwrap_or_else(|e| self.fail(format_args!("{path}: {e}"), 1))
    }
}

/// The first `n` pages of `corpus` that are not all zero (a zero page is neither compressed nor
/// stored in the pool, so it says nothing about either).
pub fn nonzero_pages(corpus: &Pages, n: usize) -> Vec<&[u8]> {
    corpus
        .iter()
        .filter(|p| p.iter().any(|&b| b != 0))
        .take(n)
        .collect()
}

/// "median ns (lower quartile..upper quartile)" of `v`.
pub fn quartiles(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    let (a, b, c) = (v[v.len() / 4], v[v.len() / 2], v[v.len() * 3 / 4]);
    format!("{b:.0} ns ({a:.0}..{c:.0})")
}

/// An empty cache for `slots` slots whose pool limit never rejects (the harnesses measure the
/// cache, not writeback), over a swap file in the temporary directory.
pub fn cache(alg: Algorithm, slots: usize) -> Zswap {
    let swap = SwapFile::create_temp(&std::env::temp_dir(), 0, slots as u64).expect("swap file");
    let z = Zswap::new(Params {
        compressor: alg,
        total_memory_bytes: 1 << 40,
        ..Params::default()
    })
    .expect("cache");
    z.add_swap_file(Arc::new(swap)).expect("swap area");
    z
}
