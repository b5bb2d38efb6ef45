// SPDX-License-Identifier: MIT
//! The budget as the program sees it: its memory cgroup's limit and usage files.
//!
//! A program inside a memory cgroup can read its limit, and runtimes size themselves from it:
//! Node sets V8's heap limits from libuv's `uv_get_constrained_memory` (`memory.max` and
//! `memory.high`, or v1's `memory.limit_in_bytes` and `memory.soft_limit_in_bytes`), the JVM
//! takes a quarter of the limit as its default heap, .NET its GC budget. Under `uzswap run` the
//! program stays in the caller's cgroup, usually without a limit, so without this view it
//! sized itself for the whole machine. Node under `--memory-max 96M` chose a 4.3 GB heap limit
//! where a cgroup of 96M gets 271 MB and a young generation a few times smaller. It then took
//! 2.5x the kernel's swap-ins, since its larger semi-spaces are rewritten on every scavenge
//! (BENCHMARKS.md section 6, 2026-11-27 ninth session).
//!
//! The preload's `open`/`openat`/`fopen` wrappers call [`open`] first. A read-only open of one
//! of the files below, in the process's own memory cgroup directory (found from
//! `/proc/self/cgroup` and `/proc/self/mountinfo`, v1 and v2), returns a read-only copy of the
//! file's contents as the tree's cgroup would show them:
//! - limit (`memory.limit_in_bytes`, `memory.max`): the smaller of the real limit and SIZE,
//!   in whole pages as the kernel stores it;
//! - usage (`memory.usage_in_bytes`, `memory.current`): the bytes the budget charges now;
//! - peak (`memory.max_usage_in_bytes`, `memory.peak`): the run's peak charge;
//! - v2's `memory.high`, only where the real file is missing (the root cgroup has none, and
//!   libuv then reports no limit at all): `max`.
//!
//! Everything else (writes, other files, `memory.stat`, raw `open` system calls, paths
//! relative to a directory descriptor) goes to the real file. `--cgroup-view off` turns it off.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed, Ordering::SeqCst};

use uzswap_types::unescape_mount_path;

use crate::sys::{self, InPager, SigBlock};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The process's own memory cgroup directories, found on first use (a `Box<Vec<OwnDir>>`
/// leaked once; a racing thread that loses the exchange drops its own copy).
static DIRS: AtomicPtr<Vec<OwnDir>> = AtomicPtr::new(std::ptr::null_mut());

/// Which cgroup hierarchy a directory belongs to (their files have different names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    V1,
    V2,
}

/// One of the process's own memory cgroup directories (normalized absolute path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnDir {
    pub path: String,
    pub hierarchy: Hierarchy,
}

/// What a virtualized file shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    Limit,
    Usage,
    Peak,
    /// v2 `memory.high`, shown only where the real file is missing.
    HighIfMissing,
}

/// The view's switch, from `UZSWAP_CGROUP_VIEW` (on unless `off`), set by `init`.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Relaxed);
}

/// Which of a hierarchy's files `name` is, if the view shows it.
pub fn classify(name: &[u8], h: Hierarchy) -> Option<Shown> {
    Some(match (h, name) {
        (Hierarchy::V1, b"memory.limit_in_bytes") => Shown::Limit,
        (Hierarchy::V1, b"memory.usage_in_bytes") => Shown::Usage,
        (Hierarchy::V1, b"memory.max_usage_in_bytes") => Shown::Peak,
        (Hierarchy::V2, b"memory.max") => Shown::Limit,
        (Hierarchy::V2, b"memory.current") => Shown::Usage,
        (Hierarchy::V2, b"memory.peak") => Shown::Peak,
        (Hierarchy::V2, b"memory.high") => Shown::HighIfMissing,
        _ => return None,
    })
}

/// `path` with empty and `.` components dropped and `..` applied, or `None` if it is not
/// absolute. No symbolic link is followed.
pub fn normalize(path: &[u8]) -> Option<String> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut s = String::with_capacity(path.len());
    for c in parts {
        s.push('/');
        s.push_str(std::str::from_utf8(c).ok()?);
    }
    if s.is_empty() {
        s.push('/');
    }
    Some(s)
}

/// The process's own memory cgroup directories, from the text of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`: the v1 memory controller's and the v2 hierarchy's, where mounted
/// and where the process's cgroup lies inside the mount's root.
pub fn own_dirs(proc_cgroup: &str, mountinfo: &str) -> Vec<OwnDir> {
    let mut v1_path = None;
    let mut v2_path = None;
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && ctrl.is_empty() {
            v2_path = Some(path);
        } else if ctrl.split(',').any(|c| c == "memory") {
            v1_path = Some(path);
        }
    }
    let mut dirs = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|&f| f == "-") else {
            continue;
        };
        if fields.len() < sep + 4 || sep < 5 {
            continue;
        }
        let (root, mount) = (
            unescape_mount_path(fields[3]),
            unescape_mount_path(fields[4]),
        );
        let (fstype, superopts) = (fields[sep + 1], fields[sep + 3]);
        let (hierarchy, cg) = match fstype {
            "cgroup" if superopts.split(',').any(|o| o == "memory") => (Hierarchy::V1, v1_path),
            "cgroup2" => (Hierarchy::V2, v2_path),
            _ => continue,
        };
        let Some(cg) = cg else { continue };
        // The process's cgroup as seen under this mount: below the mount's root.
        let rel = if root == "/" {
            cg
        } else if cg == root {
            ""
        } else if let Some(r) = cg
            .strip_prefix(root.as_str())
            .filter(|r| r.starts_with('/'))
        {
            r
        } else {
            continue;
        };
        if let Some(path) = normalize(format!("{mount}/{rel}").as_bytes()) {
            let d = OwnDir { path, hierarchy };
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    dirs
}

/// The first number in a cgroup file's text (`max` is unlimited), or `None`.
fn parse_value(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return Some(u64::MAX);
    }
    t.parse().ok()
}

/// A shown file's contents. `real` is the real file's text, if it could be read; `budget`,
/// `charged` and `peak` are bytes.
pub fn render(shown: Shown, real: Option<&str>, budget: u64, charged: u64, peak: u64) -> String {
    match shown {
        Shown::Limit => {
            let real = real.and_then(parse_value).unwrap_or(u64::MAX);
            format!("{}\n", real.min(budget) & !4095)
        }
        Shown::Usage => format!("{charged}\n"),
        Shown::Peak => format!("{peak}\n"),
        Shown::HighIfMissing => real.map_or_else(|| "max\n".to_string(), str::to_string),
    }
}

/// Reads a small file with the real libc calls (the caller is `InPager`).
fn read_real(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn dirs() -> &'static [OwnDir] {
    let p = DIRS.load(SeqCst);
    if !p.is_null() {
        // SAFETY: published once below and never freed.
        return unsafe { &*p };
    }
    let cg = read_real("/proc/self/cgroup").unwrap_or_default();
    let mi = read_real("/proc/self/mountinfo").unwrap_or_default();
    let fresh = Box::into_raw(Box::new(own_dirs(&cg, &mi)));
    match DIRS.compare_exchange(std::ptr::null_mut(), fresh, SeqCst, SeqCst) {
        // SAFETY: `fresh` is now the published pointer.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` was never published; `winner` is, for good.
            unsafe {
                drop(Box::from_raw(fresh));
                &*winner
            }
        }
    }
}

/// If `path` (opened with `flags`) is one of the files the view shows, opens a read-only file
/// with the view's contents and returns its descriptor; `None` for every other open, and if
/// that file can't be made, which the caller then passes on to libc.
///
/// # Safety
/// `path` is a NUL-terminated string the caller may read (the wrappers pin it first).
pub unsafe fn open(path: *const c_char, flags: c_int) -> Option<c_int> {
    if !ENABLED.load(Relaxed) || path.is_null() {
        return None;
    }
    // SAFETY: the caller's NUL-terminated path.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    // The cheap filter every open pays: an absolute path whose last component starts with
    // "memory.".
    let slash = bytes.iter().rposition(|&b| b == b'/')?;
    let name = &bytes[slash + 1..];
    if bytes[0] != b'/' || !name.starts_with(b"memory.") {
        return None;
    }
    let writing = flags & libc::O_ACCMODE != libc::O_RDONLY
        || flags & (libc::O_PATH | libc::O_DIRECTORY | libc::O_CREAT | libc::O_TRUNC) != 0;
    if writing || sys::in_pager() {
        return None;
    }
    let p = crate::pager()?;
    let budget = p.seg.budget_bytes.load(Relaxed);
    if budget == 0 {
        return None;
    }
    let _errno = sys::ErrnoGuard::new();
    let _b = SigBlock::new();
    let _g = InPager::enter();
    let dir_text = normalize(&bytes[..slash.max(1)])?;
    let mut found = dirs()
        .iter()
        .find(|d| d.path == dir_text)
        .map(|d| d.hierarchy);
    if found.is_none() {
        // Through a symbolic link (`/sys/fs/cgroup/memory` may be one to a joint mount).
        let real = std::fs::canonicalize(&dir_text).ok()?;
        let real = real.to_str()?;
        found = dirs().iter().find(|d| d.path == real).map(|d| d.hierarchy);
    }
    let shown = classify(name, found?)?;
    let full = std::str::from_utf8(bytes).ok()?;
    let real = match shown {
        Shown::Limit | Shown::HighIfMissing => read_real(full),
        Shown::Usage | Shown::Peak => None,
    };
    if shown == Shown::HighIfMissing && real.is_some() {
        return None;
    }
    let charged = (p.seg.charged_pages().max(0) as u64) * 4096;
    let peak = p.seg.peak_charged_pages.load(Relaxed) * 4096;
    let text = render(shown, real.as_deref(), budget, charged, peak);
    let fd = file_with(text.as_bytes(), flags & libc::O_CLOEXEC != 0)?;
    p.seg.cgroup_view_opens.fetch_add(1, Relaxed);
    Some(fd)
}

/// A read-only descriptor of an anonymous file holding `text`.
fn file_with(text: &[u8], cloexec: bool) -> Option<c_int> {
    // SAFETY: plain system calls on a descriptor this function owns.
    unsafe {
        let m = libc::memfd_create(c"uzswap-cgroup-view".as_ptr(), libc::MFD_CLOEXEC);
        if m < 0 {
            return None;
        }
        if libc::write(m, text.as_ptr().cast(), text.len()) != text.len() as isize {
            libc::close(m);
            return None;
        }
        // Reopened read-only, as the program asked: a write fails as it would on the real file.
        let proc_path = format!("/proc/self/fd/{m}\0");
        let cl = if cloexec { libc::O_CLOEXEC } else { 0 };
        let fd = libc::open(proc_path.as_ptr().cast(), libc::O_RDONLY | cl);
        if fd >= 0 {
            libc::close(m);
            return Some(fd);
        }
        libc::lseek(m, 0, libc::SEEK_SET);
        if !cloexec {
            libc::fcntl(m, libc::F_SETFD, 0);
        }
        Some(m)
    }
}

/// `fopen`'s flags for a mode string: read-only unless it writes.
///
/// # Safety
/// `mode` is a NUL-terminated string.
pub unsafe fn fopen_flags(mode: *const c_char) -> c_int {
    if mode.is_null() {
        return libc::O_RDWR;
    }
    // SAFETY: the caller's NUL-terminated mode.
    let m = unsafe { CStr::from_ptr(mode) }.to_bytes();
    let mut f = match m.first() {
        Some(b'r') => libc::O_RDONLY,
        _ => libc::O_WRONLY,
    };
    if m.contains(&b'+') {
        f = libc::O_RDWR;
    }
    if m.contains(&b'e') {
        f |= libc::O_CLOEXEC;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
40 33 0:35 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,memory
41 33 0:36 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:19 - cgroup cgroup rw,cpu,cpuacct
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
";

    #[test]
    fn v1_and_hybrid_directories_come_from_cgroup_and_mountinfo() {
        let cg = "5:cpu,cpuacct:/a\n4:memory:/process_api/5f57\n0::/user.slice\n";
        let d = own_dirs(cg, MOUNTINFO_V1);
        assert_eq!(
            d,
            vec![
                OwnDir {
                    path: "/sys/fs/cgroup/memory/process_api/5f57".into(),
                    hierarchy: Hierarchy::V1
                },
                OwnDir {
                    path: "/sys/fs/cgroup/unified/user.slice".into(),
                    hierarchy: Hierarchy::V2
                },
            ]
        );
        // The root cgroup: the mount point itself.
        let d = own_dirs("4:memory:/\n", MOUNTINFO_V1);
        assert_eq!(d[0].path, "/sys/fs/cgroup/memory");
    }

    #[test]
    fn a_v2_only_host_and_a_container_whose_mount_root_is_its_cgroup() {
        let mi = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(own_dirs("0::/\n", mi)[0].path, "/sys/fs/cgroup");
        assert_eq!(
            own_dirs("0::/system.slice/x.service\n", mi)[0].path,
            "/sys/fs/cgroup/system.slice/x.service"
        );
        // A container's cgroup namespace mounts its own cgroup as the root.
        let mi = "30 25 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_dirs("0::/kubepods/pod1\n", mi)[0].path,
            "/sys/fs/cgroup"
        );
        assert_eq!(
            own_dirs("0::/kubepods/pod1/c\n", mi)[0].path,
            "/sys/fs/cgroup/c"
        );
        // A cgroup outside the mount's root is not visible there.
        assert!(own_dirs("0::/other\n", mi).is_empty());
        // No cgroup file system mounted: nothing to show.
        assert!(own_dirs("0::/\n", "").is_empty());
    }

    #[test]
    fn mount_points_with_escapes_and_paths_with_dots_and_double_slashes() {
        let mi = "40 33 0:35 / /mnt/my\\040cg rw - cgroup none rw,memory\n";
        assert_eq!(own_dirs("3:memory:/x\n", mi)[0].path, "/mnt/my cg/x");
        assert_eq!(
            normalize(b"/sys/fs/cgroup/memory//memory.max").unwrap(),
            "/sys/fs/cgroup/memory/memory.max"
        );
        assert_eq!(
            normalize(b"/sys/fs/cgroup/./a/../memory").unwrap(),
            "/sys/fs/cgroup/memory"
        );
        assert_eq!(normalize(b"/").unwrap(), "/");
        assert_eq!(normalize(b"relative/memory.max"), None);
    }

    #[test]
    fn files_render_as_the_kernel_writes_them() {
        let gib = 1u64 << 30;
        let v1_unlimited = "9223372036854771712\n";
        assert_eq!(
            render(Shown::Limit, Some(v1_unlimited), 96 << 20, 0, 0),
            "100663296\n"
        );
        // A real limit below the budget stays; the budget is shown in whole pages.
        assert_eq!(
            render(Shown::Limit, Some("67108864\n"), gib, 0, 0),
            "67108864\n"
        );
        assert_eq!(
            render(Shown::Limit, Some("max\n"), gib + 100, 0, 0),
            "1073741824\n"
        );
        assert_eq!(render(Shown::Limit, None, gib, 0, 0), "1073741824\n");
        assert_eq!(render(Shown::Usage, None, gib, 12288, 0), "12288\n");
        assert_eq!(render(Shown::Peak, None, gib, 0, 40960), "40960\n");
        assert_eq!(render(Shown::HighIfMissing, None, gib, 0, 0), "max\n");
        assert_eq!(classify(b"memory.max", Hierarchy::V1), None);
        assert_eq!(
            classify(b"memory.limit_in_bytes", Hierarchy::V1),
            Some(Shown::Limit)
        );
        assert_eq!(classify(b"memory.stat", Hierarchy::V2), None);
    }
}
