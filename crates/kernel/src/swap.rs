// SPDX-License-Identifier: MIT
//! Kernel swap for comparisons: a temporary swap file ([`SwapFile`], swapoff and removal on
//! Drop) and [`page_out`], which puts given pages into the kernel's swap path (zswap when it
//! is enabled) with `MADV_PAGEOUT` on a private anonymous mapping of this process; and
//! `vm.page-cluster`, the swap-in readahead window ([`PageClusterGuard`] restores it).

use crate::{Error, Result};
use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use uzswap_types::PAGE_SIZE;
/// pagemap bit 62: the page is in swap (which includes zswap and the zero map).
const PM_SWAPPED: u64 = 1 << 62;
/// pagemap bit 63: the page is in RAM.
const PM_PRESENT: u64 = 1 << 63;

/// An active swap file, removed from swap and deleted when dropped.
#[derive(Debug)]
pub struct SwapFile {
    path: PathBuf,
    active: bool,
}

impl SwapFile {
    /// Create a swap file of `bytes` (rounded up to pages, at least 1 MiB) at `path`, format it
    /// with `mkswap` and enable it with the lowest priority. Needs root.
    pub fn create(path: &Path, bytes: u64) -> Result<SwapFile> {
        if !crate::is_root() {
            return Err(Error::PermissionDenied("swapon needs root".into()));
        }
        if path.exists() {
            return Err(Error::Busy(format!("{} already exists", path.display())));
        }
        let size = bytes.max(1 << 20).div_ceil(PAGE_SIZE as u64) * PAGE_SIZE as u64;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // From here on the file is ours: Drop removes it if a later step fails.
        let mut me = SwapFile {
            path: path.to_path_buf(),
            active: false,
        };
        // Written, not sparse: swapon refuses files with holes.
        let zeros = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(&zeros[..n]).map_err(|e| Error::io(path, e))?;
            left -= n as u64;
        }
        f.sync_all().map_err(|e| Error::io(path, e))?;
        drop(f);
        let out = Command::new("mkswap")
            .arg(path)
            .output()
            .map_err(|e| Error::io("mkswap", e))?;
        if !out.status.success() {
            return Err(Error::NotAvailable(format!(
                "mkswap {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::InvalidArgument("path contains NUL".into()))?;
        // SAFETY: c is a valid NUL-terminated path for the duration of the call.
        let rc = unsafe { libc::swapon(c.as_ptr(), 0) };
        if rc != 0 {
            return Err(Error::io(path, std::io::Error::last_os_error()));
        }
        me.active = true;
        Ok(me)
    }

    /// Path of the swap file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        if self.active {
            if let Ok(c) = CString::new(self.path.as_os_str().as_bytes()) {
                // SAFETY: c is a valid NUL-terminated path for the duration of the call.
                let rc = unsafe { libc::swapoff(c.as_ptr()) };
                if rc != 0 {
                    eprintln!(
                        "uzswap-kernel: warning: swapoff {}: {}",
                        self.path.display(),
                        std::io::Error::last_os_error()
                    );
                    return; // never delete an active swap file
                }
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Pages pushed out with `MADV_PAGEOUT`; unmapped (their swap entries freed) on Drop.
#[derive(Debug)]
pub struct PagedOut {
    addr: *mut libc::c_void,
    len: usize,
    /// Per page: true when pagemap shows it in swap (and not in RAM) after the page-out.
    pub swapped: Vec<bool>,
}

impl PagedOut {
    /// Number of pages that went to swap.
    pub fn swapped_count(&self) -> usize {
        self.swapped.iter().filter(|s| **s).count()
    }
}

impl Drop for PagedOut {
    fn drop(&mut self) {
        // SAFETY: addr/len came from our mmap and are unmapped exactly once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Copy `data` (whole pages) into a fresh private anonymous mapping without huge pages and
/// ask the kernel to page it out (`MADV_PAGEOUT`). With an active swap device and zswap
/// enabled, every non-zero page that leaves RAM is stored by zswap (zero pages go to the swap
/// core's zero map). `swapped` says which pages left RAM.
pub fn page_out(data: &[u8]) -> Result<PagedOut> {
    if data.is_empty() || data.len() % PAGE_SIZE != 0 {
        return Err(Error::InvalidArgument(format!(
            "page_out needs whole pages, got {} bytes",
            data.len()
        )));
    }
    let len = data.len();
    // SAFETY: anonymous private mapping with no address hint; the result is checked.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Error::io("mmap", std::io::Error::last_os_error()));
    }
    let mut out = PagedOut {
        addr,
        len,
        swapped: Vec::new(),
    };
    // Base pages only: zswap stores a large folio as a whole, and the zero map needs the
    // whole folio zero, which would change which pages count as zero pages.
    // SAFETY: the range is our own mapping.
    unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
    // SAFETY: the mapping is len bytes, writable, and not aliased by any Rust reference.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr.cast::<u8>(), len) };
    // SAFETY: the range is our own mapping.
    let rc = unsafe { libc::madvise(addr, len, libc::MADV_PAGEOUT) };
    if rc != 0 {
        return Err(Error::io(
            "madvise(MADV_PAGEOUT)",
            std::io::Error::last_os_error(),
        ));
    }
    let pm_path = Path::new("/proc/self/pagemap");
    let pm = std::fs::File::open(pm_path).map_err(|e| Error::io(pm_path, e))?;
    let n = len / PAGE_SIZE;
    let mut buf = vec![0u8; n * 8];
    pm.read_exact_at(&mut buf, addr as u64 / PAGE_SIZE as u64 * 8)
        .map_err(|e| Error::io(pm_path, e))?;
    out.swapped = buf
        .chunks_exact(8)
        .map(|b| {
            let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
            v & PM_SWAPPED != 0 && v & PM_PRESENT == 0
        })
        .collect();
    Ok(out)
}

/// `vm.page-cluster`: swap-in reads up to `1 << N` slots around a fault's (readahead).
pub const PAGE_CLUSTER: &str = "/proc/sys/vm/page-cluster";

/// The kernel's `vm.page-cluster` now.
pub fn page_cluster() -> Result<u32> {
    let v = crate::sysfs::read_u64(Path::new(PAGE_CLUSTER))?;
    u32::try_from(v).map_err(|_| Error::parse(Path::new(PAGE_CLUSTER), format!("{v} out of range")))
}

/// Sets `vm.page-cluster` and writes the value it found back when dropped (also when a test
/// panics).
#[derive(Debug)]
pub struct PageClusterGuard {
    orig: Option<u32>,
}

impl PageClusterGuard {
    /// Set `vm.page-cluster` to `n`, keeping the value it had.
    pub fn set(n: u32) -> Result<PageClusterGuard> {
        let orig = page_cluster()?;
        crate::sysfs::write_value(Path::new(PAGE_CLUSTER), &n.to_string())?;
        Ok(PageClusterGuard { orig: Some(orig) })
    }

    /// Restore now; errors are returned (Drop only prints them).
    pub fn restore(&mut self) -> Result<()> {
        match self.orig.take() {
            Some(v) => crate::sysfs::write_value(Path::new(PAGE_CLUSTER), &v.to_string()),
            None => Ok(()),
        }
    }
}

impl Drop for PageClusterGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "uzswap-kernel: warning: could not restore vm.page-cluster: {}",
                crate::error_chain(&e)
            );
        }
    }
}
