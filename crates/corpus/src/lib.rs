// SPDX-License-Identifier: MIT
//! uzswap-corpus: real 4 KiB pages to feed the allocator, the compressors and the estimator.
//!
//! What it owns:
//! - [`Pages`]: an owned buffer of `n * 4096` bytes plus a description of where they came from;
//! - [`capture_pid`]: a live process's private, writable, anonymous memory (what the kernel
//!   would swap), read through `/proc/PID/maps`, `/proc/PID/pagemap` (resident pages only) and
//!   `/proc/PID/mem`;
//! - the page-file format ([`read_page_file`], [`write_page_file`]; docs/page-file-format.md);
//! - [`default_corpus`]: memory captured at run time from a real program (a python3 or perl
//!   workload building heap data), falling back to pages of ELF files; never random bytes;
//! - [`samples`]: quick sample pages for tests and benchmarks (ELF files, this process's own
//!   memory, structured pages).
//!
//! Data layout: [`Pages`] is one contiguous `Vec<u8>`; page `i` is bytes `i*4096..(i+1)*4096`.
//!
//! Lock order: no locks; capture reads another process's memory without stopping it, so a
//! page may be torn by a concurrent write in that process (it is still that process's data).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod capture;
mod default;
mod pagefile;
pub mod samples;

pub use capture::{
    capture_pid, capture_pid_with, parse_maps, parse_maps_line, Capture, CaptureOptions, MapsEntry,
};
pub use default::{default_corpus, default_corpus_with, DefaultCorpusOptions};
pub use pagefile::{
    decode_page_file, encode_page_file, read_page_file, write_page_file, MAGIC, MAX_SOURCE_LEN,
    VERSION,
};

use std::path::PathBuf;

/// Page size of every page this crate handles (re-exported from `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;

/// Errors of capture, page files and the default corpus: one variant per cause. Variants
/// caused by an I/O error keep it as their [`source`](std::error::Error::source) and do not
/// repeat it in their own message (`{:#}` in anyhow prints the chain once).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process does not exist (or exited during the capture).
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// A `/proc/PID` file of the process cannot be read by this user.
    #[error("permission denied reading {path} of pid {pid} (needs root or ptrace access to the process)")]
    PermissionDenied {
        /// The process.
        pid: u32,
        /// The `/proc/PID/...` file that could not be read.
        path: PathBuf,
    },
    /// Reading a `/proc/PID` file of the process failed for another reason.
    #[error("cannot read {path}")]
    Proc {
        /// The `/proc/PID/...` file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `/proc/PID/maps` holds a line this parser does not understand.
    #[error("{path}: cannot parse: {detail}")]
    MalformedMaps {
        /// The maps file.
        path: PathBuf,
        /// What is wrong, with the offending line.
        detail: String,
    },
    /// A page file cannot be read (missing, unreadable, a directory, ...).
    #[error("cannot read page file {path}")]
    ReadPageFile {
        /// The page file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A page file cannot be written.
    #[error("cannot write page file {path}")]
    WritePageFile {
        /// The page file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A page file's bytes break the format (docs/page-file-format.md).
    #[error("{path}: malformed page file: {detail}")]
    Malformed {
        /// The page file.
        path: PathBuf,
        /// Which rule of the format the file breaks.
        detail: String,
    },
    /// Bytes that are not a whole number of pages were offered as pages.
    #[error("invalid pages: {0}")]
    InvalidPages(String),
    /// The default corpus's workload program could not be run or talked to.
    #[error("default corpus: cannot run the {program} workload")]
    Workload {
        /// The interpreter (`python3`, `perl`).
        program: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No workload gave the default corpus its pages.
    #[error("default corpus: {0}")]
    NoSource(String),
}

/// Result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;

/// `n * 4096` bytes of real memory and where they came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pages {
    data: Vec<u8>,
    source: String,
}

impl Pages {
    /// Empty page set with a source description.
    pub fn new(source: impl Into<String>) -> Pages {
        Pages {
            data: Vec::new(),
            source: source.into(),
        }
    }

    /// Take ownership of `data`; its length must be a multiple of 4096.
    pub fn from_bytes(data: Vec<u8>, source: impl Into<String>) -> Result<Pages> {
        if data.len() % PAGE_SIZE != 0 {
            return Err(Error::InvalidPages(format!(
                "{} bytes is not a whole number of {PAGE_SIZE}-byte pages",
                data.len()
            )));
        }
        Ok(Pages {
            data,
            source: source.into(),
        })
    }

    /// Number of pages.
    pub fn len(&self) -> usize {
        self.data.len() / PAGE_SIZE
    }

    /// True when there are no pages.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Page `i` (panics when out of range, like slice indexing).
    pub fn page(&self, i: usize) -> &[u8] {
        &self.data[i * PAGE_SIZE..(i + 1) * PAGE_SIZE]
    }

    /// Page `i` as a fixed-size array reference.
    pub fn page_array(&self, i: usize) -> &[u8; PAGE_SIZE] {
        self.page(i).try_into().expect("a page is PAGE_SIZE bytes")
    }

    /// Iterate over the pages in order.
    pub fn iter(&self) -> std::slice::ChunksExact<'_, u8> {
        self.data.chunks_exact(PAGE_SIZE)
    }

    /// All bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// Give the bytes back.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Where these pages came from (free text, e.g. `pid 123 (python3)`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Replace the source description.
    pub fn set_source(&mut self, source: impl Into<String>) {
        self.source = source.into();
    }

    /// Append one page (must be exactly 4096 bytes).
    pub fn push_page(&mut self, page: &[u8]) -> Result<()> {
        if page.len() != PAGE_SIZE {
            return Err(Error::InvalidPages(format!(
                "a page must be {PAGE_SIZE} bytes, got {}",
                page.len()
            )));
        }
        self.data.extend_from_slice(page);
        Ok(())
    }

    /// Append all pages of `other`.
    pub fn extend(&mut self, other: &Pages) {
        self.data.extend_from_slice(&other.data);
    }

    /// Keep at most `n` pages.
    pub fn truncate(&mut self, n: usize) {
        self.data
            .truncate(n.saturating_mul(PAGE_SIZE).min(self.data.len()));
    }
}

impl<'a> IntoIterator for &'a Pages {
    type Item = &'a [u8];
    type IntoIter = std::slice::ChunksExact<'a, u8>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_basics() {
        let mut p = Pages::from_bytes(vec![1u8; 2 * PAGE_SIZE], "t").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p.iter().count(), 2);
        p.push_page(&[2u8; PAGE_SIZE]).unwrap();
        assert_eq!(p.page(2)[0], 2);
        assert!(p.push_page(&[0u8; 10]).is_err());
        p.truncate(1);
        assert_eq!(p.len(), 1);
        assert!(Pages::from_bytes(vec![0u8; 100], "x")
            .unwrap_err()
            .to_string()
            .contains("100 bytes"));
    }
}
