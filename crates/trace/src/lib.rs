// SPDX-License-Identifier: MIT
//! uzswap-trace: the page-access trace format of `uzswap replay` (and of `uzswap run
//! --record-trace`), in a text form for humans and a compact binary form, with a streaming
//! reader and writer.
//!
//! **Owns**: the event vocabulary ([`Event`]), the two encodings (docs/trace-format.md is the
//! specification, [`text`] and [`binary`] the code), [`TraceReader`] (detects the encoding,
//! validates every event, reports malformed input with its line or byte offset) and
//! [`TraceWriter`] (no allocation per access event: a recorder can call it from a fault path).
//!
//! **Data layout**: a trace is a header (format magic, where page contents come from, free
//! metadata) and a stream of events. An event is a page-granular access (read, write with its
//! content) by a cgroup, a free (unmap) of a page range, or a control event (create or remove a
//! cgroup, set memory.max / memory.zswap.max / memory.zswap.writeback, request memory.reclaim,
//! change a cache parameter). Any event may carry a timestamp in nanoseconds; timestamps never
//! decrease. Cgroups are numbered in creation order from 1 (0 is the root, which always exists);
//! pages are numbered per cgroup (one address space per cgroup). Page *contents* are never in the
//! trace: a write names a page of a page file (`uzswap capture` format) or the zero page.
//!
//! The reader keeps only the cgroup table and, for the binary form, the last page number per
//! cgroup (pages are delta-coded): memory is independent of the trace's length, so a trace of
//! 10^8 events streams in constant memory.
//!
//! **Lock order**: no locks; readers and writers are single-owner values.

pub mod binary;
pub mod reader;
pub mod text;
pub mod writer;

use std::fmt;
use std::path::PathBuf;

pub use reader::TraceReader;
pub use writer::TraceWriter;

/// Page size of every page a trace refers to (re-exported from `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;

/// The root cgroup's number; it always exists and cannot be removed.
pub const ROOT: u32 = 0;
/// Name of the root cgroup in the text form.
pub const ROOT_NAME: &str = "root";
/// Highest page number (a 64-bit address space of 4 KiB pages).
pub const MAX_PAGE: u64 = (1 << 52) - 1;
/// Most cgroups one trace may create (numbers 1..=MAX_CGROUPS).
pub const MAX_CGROUPS: u32 = 4096;
/// Longest cgroup name, parameter name or value, path or metadata string (bytes).
pub const MAX_STRING: usize = 4096;
/// Format version written by this crate (both encodings).
pub const VERSION: u32 = 1;
/// First line of a text trace (followed by a space and the version).
pub const TEXT_MAGIC: &str = "uzswap-trace";
/// First bytes of a binary trace (followed by the version as a little-endian u32).
pub const BINARY_MAGIC: [u8; 8] = *b"UZTRACE\0";

/// The two encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "binary" | "bin" => Ok(Format::Binary),
            _ => Err(format!("trace format {s:?}: expected text or binary")),
        }
    }
}

/// Where the contents of written pages come from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum PageSource {
    /// The default corpus (`uzswap_corpus::default_corpus`): captured on the replaying machine,
    /// so page indices are taken modulo its length.
    #[default]
    Default,
    /// A page file written by `uzswap capture` (or by a recorder); index `i` is its page `i`.
    File(PathBuf),
}

/// The trace's header.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub pages: PageSource,
    /// Free-form `key value` pairs (workload name, seed, recorder, ...), in order.
    pub meta: Vec<(String, String)>,
}

impl Header {
    /// The first value recorded for `key`.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// What a write puts into the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Content {
    /// Page `i` of the trace's page source.
    Page(u32),
    /// A zero-filled page.
    Zero,
}

/// One trace event. Access and free events hold no heap memory; control events may.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The cgroup's process reads the page (a first read of a never-written page maps the
    /// shared zero page, as the kernel does).
    Read { cg: u32, page: u64 },
    /// The cgroup's process writes the whole page with `content`.
    Write {
        cg: u32,
        page: u64,
        content: Content,
    },
    /// `count` pages from `page` are unmapped (munmap, MADV_DONTNEED, process exit): their
    /// memory, swap slots and cache entries are freed.
    Free { cg: u32, page: u64, count: u64 },
    /// A new cgroup `cg` (the next number) under `parent`.
    Cgroup { cg: u32, parent: u32, name: String },
    /// Remove a cgroup (its pages are freed first); it must have no live children.
    RemoveCgroup { cg: u32 },
    /// memory.max in bytes (`None`: "max").
    MemoryMax { cg: u32, bytes: Option<u64> },
    /// memory.zswap.max in bytes (`None`: "max"); cgroup v2 only.
    ZswapMax { cg: u32, bytes: Option<u64> },
    /// memory.zswap.writeback; cgroup v2 only.
    ZswapWriteback { cg: u32, enabled: bool },
    /// Write `bytes` to memory.reclaim (proactive reclaim; EAGAIN if it falls short).
    Reclaim { cg: u32, bytes: u64 },
    /// Change a cache parameter: `name` is a cache option without its dashes
    /// (`compressor`, `max-pool-percent`, ...), `value` its argument.
    Param { name: String, value: String },
}

impl Event {
    /// The cgroup the event concerns, if any.
    pub fn cgroup(&self) -> Option<u32> {
        match *self {
            Event::Read { cg, .. }
            | Event::Write { cg, .. }
            | Event::Free { cg, .. }
            | Event::Cgroup { cg, .. }
            | Event::RemoveCgroup { cg }
            | Event::MemoryMax { cg, .. }
            | Event::ZswapMax { cg, .. }
            | Event::ZswapWriteback { cg, .. }
            | Event::Reclaim { cg, .. } => Some(cg),
            Event::Param { .. } => None,
        }
    }

    /// True for reads and writes.
    pub fn is_access(&self) -> bool {
        matches!(self, Event::Read { .. } | Event::Write { .. })
    }
}

/// An event and its optional timestamp (nanoseconds from the trace's start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub time_ns: Option<u64>,
    pub event: Event,
}

/// A cgroup known to a reader or writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupInfo {
    pub name: String,
    pub parent: u32,
    pub removed: bool,
}

/// Where in the input a problem was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a text trace.
    Line(u64),
    /// Byte offset of the record in a binary trace.
    Offset(u64),
    /// Not tied to a place (I/O errors, writer misuse).
    None,
}

/// A malformed trace or an I/O error, with the input's name and the place.
#[derive(Debug, thiserror::Error)]
pub struct TraceError {
    /// The input's name (its path, or what the caller called it).
    pub source_name: String,
    pub location: Location,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Location::Line(l) => write!(f, "{}:{l}: {}", self.source_name, self.message),
            Location::Offset(o) => {
                write!(f, "{}: byte offset {o}: {}", self.source_name, self.message)
            }
            Location::None => write!(f, "{}: {}", self.source_name, self.message),
        }
    }
}

impl TraceError {
    pub(crate) fn new(name: &str, location: Location, message: impl Into<String>) -> TraceError {
        TraceError {
            source_name: name.to_string(),
            location,
            message: message.into(),
        }
    }
}

/// Cgroup bookkeeping shared by readers and writers: names, parents, which are alive. Checks
/// every event against it so that what one side accepts the other can write.
#[derive(Clone, Debug)]
pub(crate) struct Cgroups {
    pub(crate) list: Vec<CgroupInfo>,
}

impl Default for Cgroups {
    fn default() -> Self {
        Cgroups {
            list: vec![CgroupInfo {
                name: ROOT_NAME.to_string(),
                parent: ROOT,
                removed: false,
            }],
        }
    }
}

impl Cgroups {
    pub(crate) fn live(&self, cg: u32) -> Result<(), String> {
        match self.list.get(cg as usize) {
            Some(c) if !c.removed => Ok(()),
            Some(c) => Err(format!("cgroup {:?} (#{cg}) was removed", c.name)),
            None => Err(format!("no cgroup #{cg}")),
        }
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<u32> {
        // Newest first: a name may be reused after its cgroup was removed.
        self.list
            .iter()
            .enumerate()
            .rev()
            .find(|(_, c)| !c.removed && c.name == name)
            .map(|(i, _)| i as u32)
    }

    /// Check and apply a control event; accesses are only checked.
    pub(crate) fn apply(&mut self, e: &Event) -> Result<(), String> {
        match e {
            Event::Read { cg, page } | Event::Write { cg, page, .. } => {
                self.live(*cg)?;
                check_page(*page)
            }
            Event::Free { cg, page, count } => {
                self.live(*cg)?;
                check_page(*page)?;
                if *count == 0 || page.checked_add(*count - 1).is_none_or(|l| l > MAX_PAGE) {
                    return Err(format!(
                        "free of {count} pages from page {page}: empty or beyond page {MAX_PAGE}"
                    ));
                }
                Ok(())
            }
            Event::Cgroup { cg, parent, name } => {
                check_name(name)?;
                self.live(*parent)
                    .map_err(|m| format!("parent of cgroup {name:?}: {m}"))?;
                if self.by_name(name).is_some() {
                    return Err(format!("cgroup {name:?} already exists"));
                }
                let next = self.list.len() as u32;
                if *cg != next {
                    return Err(format!("cgroup {name:?} numbered #{cg}, expected #{next}"));
                }
                if next > MAX_CGROUPS {
                    return Err(format!("more than {MAX_CGROUPS} cgroups"));
                }
                self.list.push(CgroupInfo {
                    name: name.clone(),
                    parent: *parent,
                    removed: false,
                });
                Ok(())
            }
            Event::RemoveCgroup { cg } => {
                if *cg == ROOT {
                    return Err("the root cgroup cannot be removed".into());
                }
                self.live(*cg)?;
                if let Some(child) = self
                    .list
                    .iter()
                    .enumerate()
                    .find(|(i, c)| !c.removed && c.parent == *cg && *i as u32 != ROOT)
                {
                    return Err(format!(
                        "cgroup {:?} still has a live child {:?}",
                        self.list[*cg as usize].name, child.1.name
                    ));
                }
                self.list[*cg as usize].removed = true;
                Ok(())
            }
            Event::MemoryMax { cg, .. }
            | Event::ZswapMax { cg, .. }
            | Event::ZswapWriteback { cg, .. }
            | Event::Reclaim { cg, .. } => self.live(*cg),
            Event::Param { name, value } => {
                check_string("parameter name", name)?;
                if name.is_empty() || name.contains(char::is_whitespace) {
                    return Err(format!("parameter name {name:?}: empty or has spaces"));
                }
                check_string("parameter value", value)?;
                if value.is_empty() || value.contains(char::is_whitespace) {
                    return Err(format!("parameter value {value:?}: empty or has spaces"));
                }
                Ok(())
            }
        }
    }
}

pub(crate) fn check_page(page: u64) -> Result<(), String> {
    if page > MAX_PAGE {
        return Err(format!("page {page} is beyond the highest page {MAX_PAGE}"));
    }
    Ok(())
}

pub(crate) fn check_string(what: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_STRING {
        return Err(format!("{what} longer than {MAX_STRING} bytes"));
    }
    Ok(())
}

/// A header metadata pair, as both encodings can carry it: the key one word, the value one line
/// without `#` (the text form's comment marker).
pub(crate) fn check_meta(k: &str, v: &str) -> Result<(), String> {
    if k.is_empty() || k.contains(char::is_whitespace) || v.contains(['\n', '#']) {
        return Err(format!(
            "meta {k:?} {v:?}: the key must be one word, the value one line without '#'"
        ));
    }
    Ok(())
}

/// A cgroup name: non-empty, printable, no whitespace, not the root's, not starting with
/// `@` or `#` (the text form's timestamp and comment markers).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    check_string("cgroup name", name)?;
    if name.is_empty()
        || name == ROOT_NAME
        || name.starts_with(['@', '#'])
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "cgroup name {name:?}: must be non-empty, without spaces, not {ROOT_NAME:?}, \
             not starting with '@' or '#'"
        ));
    }
    Ok(())
}
