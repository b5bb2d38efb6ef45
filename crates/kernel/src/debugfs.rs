// SPDX-License-Identifier: MIT
//! zswap's debugfs counters (`/sys/kernel/debug/zswap/*`).
//!
//! debugfs is mounted at `/sys/kernel/debug` if it is not already (needs root); a
//! [`DebugfsMount`] that did the mounting unmounts on Drop. zswap creates its directory only
//! once it has been set up (on this kernel: the first time zswap is enabled).

use crate::sysfs::read_trimmed;
use crate::{Error, Result};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Where debugfs is expected.
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug";

/// The kernel's zswap debugfs counter names, in report order.
pub const ZSWAP_COUNTERS: [&str; 11] = [
    "pool_limit_hit",
    "reject_reclaim_fail",
    "reject_alloc_fail",
    "reject_kmemcache_fail",
    "reject_compress_fail",
    "reject_compress_poor",
    "decompress_fail",
    "written_back_pages",
    "pool_total_size",
    "stored_pages",
    "stored_incompressible_pages",
];

/// True when a debugfs is mounted at [`DEBUGFS_DIR`].
pub fn is_mounted() -> Result<bool> {
    let path = Path::new("/proc/mounts");
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    Ok(text.lines().any(|l| {
        let mut f = l.split_whitespace();
        let _src = f.next();
        f.next() == Some(DEBUGFS_DIR) && f.next() == Some("debugfs")
    }))
}

/// Keeps debugfs mounted; unmounts on Drop only if this value mounted it.
#[derive(Debug)]
pub struct DebugfsMount {
    mounted_by_us: bool,
}

impl DebugfsMount {
    /// Make sure debugfs is mounted at [`DEBUGFS_DIR`].
    pub fn ensure() -> Result<DebugfsMount> {
        if is_mounted()? {
            return Ok(DebugfsMount {
                mounted_by_us: false,
            });
        }
        if !crate::is_root() {
            return Err(Error::PermissionDenied(format!(
                "debugfs is not mounted at {DEBUGFS_DIR} and mounting it needs root"
            )));
        }
        let target = CString::new(DEBUGFS_DIR).expect("no NUL");
        let fstype = CString::new("debugfs").expect("no NUL");
        // SAFETY: all pointers are valid NUL-terminated strings living across the call; data
        // is null, which mount(2) accepts.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            // Another process may have mounted it in between.
            if err.raw_os_error() == Some(libc::EBUSY) && is_mounted()? {
                return Ok(DebugfsMount {
                    mounted_by_us: false,
                });
            }
            return Err(Error::io(DEBUGFS_DIR, err));
        }
        Ok(DebugfsMount {
            mounted_by_us: true,
        })
    }

    /// True if this value mounted debugfs (and will unmount it).
    pub fn mounted_by_us(&self) -> bool {
        self.mounted_by_us
    }
}

impl Drop for DebugfsMount {
    fn drop(&mut self) {
        if self.mounted_by_us {
            let target = CString::new(DEBUGFS_DIR).expect("no NUL");
            // SAFETY: valid NUL-terminated path. A busy mount (someone else reading) stays.
            unsafe { libc::umount(target.as_ptr()) };
        }
    }
}

/// A snapshot of `/sys/kernel/debug/zswap`: every numeric file, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZswapDebugfs {
    /// `(file name, value)` in the kernel's directory order.
    pub counters: Vec<(String, u64)>,
}

impl ZswapDebugfs {
    /// Value of one counter, if the kernel has it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// Directory of zswap's counters.
pub fn zswap_dir() -> PathBuf {
    Path::new(DEBUGFS_DIR).join("zswap")
}

/// Read zswap's debugfs counters, mounting debugfs for the duration if needed.
pub fn read_zswap() -> Result<ZswapDebugfs> {
    let _mount = DebugfsMount::ensure()?;
    read_zswap_dir(&zswap_dir())
}

/// Read every numeric file of a zswap-debugfs-like directory, sorted with the kernel's known
/// counters first (in [`ZSWAP_COUNTERS`] order), then any others by name.
pub fn read_zswap_dir(dir: &Path) -> Result<ZswapDebugfs> {
    if !dir.is_dir() {
        return Err(Error::NotAvailable(format!(
            "{} does not exist: zswap creates it when first enabled \
             (echo Y > /sys/module/zswap/parameters/enabled)",
            dir.display()
        )));
    }
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut counters = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        let path = ent.path();
        if !path.is_file() {
            continue;
        }
        let text = read_trimmed(&path)?;
        let v = text.parse::<u64>().map_err(|e| {
            Error::parse(
                &path,
                format!("expected an unsigned integer, got {text:?}: {e}"),
            )
        })?;
        counters.push((ent.file_name().to_string_lossy().to_string(), v));
    }
    let rank = |n: &str| {
        ZSWAP_COUNTERS
            .iter()
            .position(|k| *k == n)
            .unwrap_or(usize::MAX)
    };
    counters.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then_with(|| a.0.cmp(&b.0)));
    Ok(ZswapDebugfs { counters })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_counter_dir_in_kernel_order() {
        let dir = std::env::temp_dir().join(format!("uzswap-debugfs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stored_pages"), "12\n").unwrap();
        std::fs::write(dir.join("pool_limit_hit"), "3\n").unwrap();
        std::fs::write(dir.join("zz_extra"), "7\n").unwrap();
        let d = read_zswap_dir(&dir).unwrap();
        let names: Vec<_> = d.counters.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["pool_limit_hit", "stored_pages", "zz_extra"]);
        assert_eq!(d.get("stored_pages"), Some(12));
        std::fs::write(dir.join("bad"), "x\n").unwrap();
        let e = read_zswap_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("bad") && e.contains("unsigned"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = read_zswap_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}
