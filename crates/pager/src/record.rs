// SPDX-License-Identifier: MIT
//! `uzswap run --record-trace`: the raw event log the pager writes while the tree runs.
//!
//! With `UZSWAP_TRACE_DIR` set, every process appends fixed 32-byte records to
//! `DIR/events.raw` (one `write(2)` each on an `O_APPEND` file: atomic between processes and
//! async-signal-safe) and writes the content of every page it evicts to `DIR/pages.raw` at
//! `4096 * (1 + index)` (the index from the shared segment; page 0 is left for the page-file
//! header). `uzswap run` turns the log into a trace in replay's format when the tree is done.

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

/// Record kinds.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;
pub const EVICT: u8 = 3;
pub const FREE: u8 = 4;
/// The process's image ends (exit, or an exec about to replace it): its memory is gone.
pub const EXIT: u8 = 5;

/// One raw record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw {
    pub time_ns: u64,
    pub pid: u32,
    pub kind: u8,
    pub _pad: [u8; 3],
    /// Page number: address >> 12.
    pub page: u64,
    /// EVICT: index of the content in pages.raw; FREE: page count (low 32 bits).
    pub arg: u32,
    pub _pad2: u32,
}

pub const RAW_BYTES: usize = std::mem::size_of::<Raw>();

impl Raw {
    pub fn from_bytes(b: &[u8]) -> Raw {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        Raw {
            time_ns: u64_at(0),
            pid: u32_at(8),
            kind: b[12],
            _pad: [0; 3],
            page: u64_at(16),
            arg: u32_at(24),
            _pad2: 0,
        }
    }
}

pub struct Recorder {
    events: AtomicI32,
    pages: AtomicI32,
    start_ns: u64,
}

impl Recorder {
    /// Opens the log files in `dir` (None if recording is off or they can't be opened).
    pub fn open(dir: &str) -> Option<Recorder> {
        let open = |name: &str, append: bool| {
            let path = std::ffi::CString::new(format!("{dir}/{name}")).ok()?;
            let flags = libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_CLOEXEC
                | if append { libc::O_APPEND } else { 0 };
            // SAFETY: a NUL-terminated path.
            let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600) };
            (fd >= 0).then(|| crate::fds::adopt(fd, false))
        };
        let start_ns = std::env::var("UZSWAP_TRACE_T0")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Some(Recorder {
            events: AtomicI32::new(open("events.raw", true)?),
            pages: AtomicI32::new(open("pages.raw", false)?),
            start_ns,
        })
    }

    /// Appends one record (async-signal-safe).
    pub fn event(&self, kind: u8, page: u64, arg: u32) {
        let r = Raw {
            time_ns: crate::sys::now_ns().saturating_sub(self.start_ns),
            pid: crate::sys::getpid() as u32,
            kind,
            page,
            arg,
            ..Raw::default()
        };
        // SAFETY: writes the bytes of a plain repr(C) struct.
        unsafe {
            libc::syscall(
                libc::SYS_write,
                self.events.load(Relaxed),
                &r as *const Raw,
                RAW_BYTES,
            );
        }
    }

    /// Stores an evicted page's content at `index` and logs the eviction.
    pub fn evict(&self, page_no: u64, content: &[u8], index: u64) {
        // SAFETY: writes from a valid slice.
        unsafe {
            libc::syscall(
                libc::SYS_pwrite64,
                self.pages.load(Relaxed),
                content.as_ptr(),
                content.len(),
                (4096 * (1 + index)) as i64,
            );
        }
        self.event(EVICT, page_no, index as u32);
    }
}
