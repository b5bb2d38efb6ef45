// SPDX-License-Identifier: MIT
//! uzswap-kernel: the only crate that touches the running kernel's knobs.
//!
//! What it owns:
//! - the kernel-test gate ([`kernel_tests_enabled`], `UZSWAP_KERNEL_TESTS=1`) and the
//!   cross-process [`KernelLock`] (an exclusive `flock` on [`LOCK_PATH`]), so kernel tests in
//!   different test binaries never run at the same time;
//! - [`zram`]: claim an unused `/dev/zramN`, configure it, O_DIRECT page I/O, `mm_stat`,
//!   reset (also on Drop, restoring the compression algorithm found);
//! - [`zswap_params`]: `/sys/module/zswap/parameters/*` with a restore-on-Drop guard;
//! - [`debugfs`]: `/sys/kernel/debug/zswap/*` counters (mounting debugfs if needed);
//! - [`vmstat`] and [`meminfo`]: swap counters of `/proc/vmstat` and `/proc/meminfo`;
//! - [`swap`]: a temporary swap file and `MADV_PAGEOUT` of given pages (zswap comparisons).
//! - [`cgroup`]: a dedicated memory cgroup (v1 or v2) with a limit, removed on Drop (tests).
//!
//! Data layout: nothing is cached; every read goes to the kernel's text files and is parsed
//! with errors that name the file and the offending line.
//!
//! Lock order: [`KernelLock`] first, then any claimed device or parameter guard. Guards are
//! dropped before the lock (declare the lock first so it drops last).

#![deny(missing_docs)]

use std::io::Write as _; // skip notices bypass the test harness's output capture
pub mod cgroup;
pub mod debugfs;
pub mod meminfo;
pub mod swap;
pub mod vmstat;
pub mod zram;
pub mod zswap_params;

mod sysfs;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Errors of every kernel interaction; each names the file or device it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on a kernel file or device (the I/O error is the source, not repeated in
    /// the message).
    #[error("{path}")]
    Io {
        /// The file or device.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A kernel file had content we could not parse.
    #[error("{path}: cannot parse: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong, with the offending line or value.
        detail: String,
    },
    /// The feature or device is not present on this kernel.
    #[error("not available: {0}")]
    NotAvailable(String),
    /// The device is used by someone else.
    #[error("busy: {0}")]
    Busy(String),
    /// The caller passed an invalid argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The operation needs root (CAP_SYS_ADMIN).
    #[error("permission denied: {0} (run as root)")]
    PermissionDenied(String),
}

/// Result of every kernel interaction.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Error {
        let path = path.as_ref().to_path_buf();
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            return Error::PermissionDenied(format!("{}: {source}", path.display()));
        }
        Error::Io { path, source }
    }
    pub(crate) fn parse(path: impl AsRef<Path>, detail: impl Into<String>) -> Error {
        Error::Parse {
            path: path.as_ref().to_path_buf(),
            detail: detail.into(),
        }
    }
}

/// An error and its causes as one line, `error: cause: cause`, for messages that are not
/// printed through anyhow's `{:#}` (warnings, skip notes). Errors here keep their I/O cause as
/// the [`source`](std::error::Error::source) instead of repeating it in their own message.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut s = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Name of the environment variable that enables tests touching the kernel.
pub const KERNEL_TESTS_ENV: &str = "UZSWAP_KERNEL_TESTS";

/// True when `UZSWAP_KERNEL_TESTS=1`: tests may touch zram0, zswap parameters, debugfs.
pub fn kernel_tests_enabled() -> bool {
    std::env::var(KERNEL_TESTS_ENV).is_ok_and(|v| v == "1")
}

/// The file every kernel test locks.
pub const LOCK_PATH: &str = "/run/lock/uzswap-kernel-tests.lock";

/// An exclusive `flock` on [`LOCK_PATH`], held until dropped. The kernel releases it when the
/// process dies, so a crashed test never leaves it stuck.
#[derive(Debug)]
pub struct KernelLock {
    _file: File,
}

impl KernelLock {
    /// Block until the lock is ours.
    pub fn acquire() -> Result<KernelLock> {
        Self::acquire_at(Path::new(LOCK_PATH))
    }

    /// Same as [`KernelLock::acquire`] on another path (tests of the lock itself).
    pub fn acquire_at(path: &Path) -> Result<KernelLock> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(KernelLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::io(path, err));
            }
        }
    }

    /// Take the lock without waiting; `Ok(None)` if another process holds it.
    pub fn try_acquire_at(path: &Path) -> Result<Option<KernelLock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(KernelLock { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(Error::io(path, err))
        }
    }
}

/// The usual opening of a kernel test: `None` (after printing a visible skip line) unless
/// `UZSWAP_KERNEL_TESTS=1`, else the acquired [`KernelLock`].
///
/// ```no_run
/// let Some(_lock) = uzswap_kernel::kernel_test_guard("my_test") else { return };
/// ```
pub fn kernel_test_guard(test_name: &str) -> Option<KernelLock> {
    if !kernel_tests_enabled() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: {test_name}: set {KERNEL_TESTS_ENV}=1 to run tests that touch the kernel"
        )
        .ok();
        return None;
    }
    match KernelLock::acquire() {
        Ok(lock) => Some(lock),
        Err(e) => panic!("{test_name}: cannot take the kernel-test lock: {e}"),
    }
}

/// True when the process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
