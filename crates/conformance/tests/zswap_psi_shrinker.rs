// SPDX-License-Identifier: MIT
//! End to end: a real Linux PSI memory-pressure event drives the cache's shrinker.
//!
//! A child process in a dedicated memory cgroup with a small limit keeps reading a file much
//! larger than that limit, so memcg reclaim and page-cache refaults stall it (PSI "some"
//! memory stall). The cache's pressure monitor, armed with a sensitive trigger, must receive
//! the events and run the memory-pressure shrinker, which writes cold entries back to the swap
//! file; every page must still read back unchanged.
//!
//! Runs only with `UZSWAP_KERNEL_TESTS=1` (root, PSI, a memory cgroup controller); everything
//! it creates (child, cgroup, file, monitor) is undone by Drop guards, also on panic.

use uzswap_conformance::cache as common;

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uzswap_kernel::cgroup::{self, MemCgroup};
use uzswap_zswap::{CgroupId, LoadOutcome, Params, PressureConfig, StoreOutcome, Zswap, PAGE_SIZE};

/// Cached pages: few enough that two events (one clearing the referenced bits, one writing
/// back) reach every entry at priority 0.
const ENTRIES: usize = 128;
/// The child's memory limit and the file it reads over and over.
const CGROUP_LIMIT: u64 = 32 << 20;
const FILE_SIZE: u64 = 256 << 20;
/// How long the pressure phase may last at most.
const PRESSURE_BUDGET: Duration = Duration::from_secs(12);
/// With CAP_SYS_RESOURCE the kernel accepts windows of 0.5 s; without it (e.g. root in a
/// container that drops the capability) only multiples of 2 s, so the trigger fires at most
/// once per 2 s.
const SENSITIVE_TRIGGER: &str = "some 5000 500000";
const UNPRIVILEGED_TRIGGER: &str = "some 10000 2000000";

/// ramfs (the libc crate has no constant for it).
const RAMFS_MAGIC: u64 = 0x8584_58f6;

fn skip(why: &str) {
    writeln!(
        std::io::stderr(),
        "SKIPPED: psi_pressure_drives_shrinker: {why}"
    )
    .ok();
}

/// A directory of ours, removed with its content on Drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The reader process group; killed and reaped on Drop.
struct Workload(Child);

impl Drop for Workload {
    fn drop(&mut self) {
        let pgid = self.0.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the process group the child leads
        // (spawned with process_group(0)); it touches no memory. The child is not reaped
        // before this, so its pid cannot have been reused.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Stops the cache's pressure monitor if the test ends early.
struct MonitorGuard<'a>(&'a Zswap);

impl Drop for MonitorGuard<'_> {
    fn drop(&mut self) {
        self.0.stop_pressure_monitor();
    }
}

/// True when `dir` lives on a memory-backed file system (its pages can't be reclaimed to disk,
/// so reading it under a memcg limit creates no refaults).
fn on_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: statfs fills the zeroed struct we own from a NUL-terminated path we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are valid for the call.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    // The field's integer type differs between architectures; compare as u64.
    let t = st.f_type as u64;
    rc != 0 || t == libc::TMPFS_MAGIC as u64 || t == RAMFS_MAGIC
}

/// A file of `size` bytes of non-zero data, flushed and dropped from the page cache, so that
/// the child's reads charge fresh page-cache pages to its cgroup.
fn write_big_file(path: &Path, size: u64) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    let mut buf = vec![0u8; 1 << 20];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8 | 1;
    }
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    // SAFETY: advice on a descriptor `f` keeps open; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The `some ... total=` stall time (µs) of a PSI file.
fn psi_some_total(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("some "))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn psi_pressure_drives_shrinker() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("psi_pressure_drives_shrinker") else {
        return;
    };
    if !Path::new("/proc/pressure/memory").exists() {
        return skip("no /proc/pressure/memory (kernel without PSI)");
    }
    if !uzswap_kernel::is_root() {
        return skip("needs root to create a memory cgroup");
    }
    if let Err(e) = cgroup::memory_controller() {
        return skip(&e.to_string());
    }
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("psi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let dir = TempDir(dir);
    if on_tmpfs(&dir.0) {
        return skip("the temp dir is memory-backed: reading it creates no reclaim refaults");
    }

    // The cache: real binary pages, a swap file to write back to, the pressure shrinker on,
    // and a pool limit far away so no other shrinker path runs.
    let params = Params {
        shrinker_enabled: true,
        total_memory_bytes: 1 << 30,
        ..Params::default()
    };
    let (z, swap) = common::cache(params, ENTRIES as u64);
    let pages = common::binary_pages(ENTRIES);
    for (i, p) in pages.iter().enumerate() {
        let out = z.store(common::slot(i as u64), p, CgroupId::ROOT);
        assert!(
            matches!(
                out,
                StoreOutcome::Stored | StoreOutcome::StoredIncompressible
            ),
            "page {i}: {out:?}"
        );
    }
    let before = z.counters();
    assert_eq!(before.shrinker_scanned, 0);
    assert_eq!(before.written_back_pages, 0);

    let big = dir.0.join("big");
    let t0 = Instant::now();
    write_big_file(&big, FILE_SIZE).expect("write the big file");
    let file_secs = t0.elapsed().as_secs_f64();

    let cg = MemCgroup::create(&format!("uzswap-psi-{}", std::process::id()))
        .expect("create the memory cgroup");
    cg.set_limit(CGROUP_LIMIT).expect("set the cgroup limit");

    // Listen on the cgroup's own memory.pressure where the kernel has one, else system-wide.
    let psi_path = cg
        .pressure_path()
        .unwrap_or_else(|| PathBuf::from("/proc/pressure/memory"));
    let mut cfg = PressureConfig {
        path: psi_path.clone(),
        trigger: SENSITIVE_TRIGGER.into(),
        priority: 0,
    };
    if let Err(e) = z.start_pressure_monitor(cfg.clone()) {
        writeln!(
            std::io::stderr(),
            "note: {e}; falling back to {UNPRIVILEGED_TRIGGER:?}"
        )
        .ok();
        cfg.trigger = UNPRIVILEGED_TRIGGER.into();
        z.start_pressure_monitor(cfg.clone())
            .expect("arm a PSI trigger");
    }
    let monitor = MonitorGuard(&z);

    // The reader: blocks on stdin until it is in the cgroup, then reads the file forever.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "read _ || exit 1; while :; do cat \"$1\" >/dev/null || exit 1; done",
        ])
        .arg("sh")
        .arg(&big)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn the reader");
    let stdin = child.stdin.take();
    let workload = Workload(child);
    cg.attach(workload.0.id()).expect("attach the reader");
    assert_eq!(cg.pids().expect("cgroup pids"), vec![workload.0.id()]);
    let stall_before = psi_some_total(&psi_path);
    let hits_before = cg.limit_hits().unwrap_or(0);
    let start = Instant::now();
    {
        let mut stdin = stdin.expect("reader stdin");
        stdin.write_all(b"go\n").expect("start the reader");
    }

    // Pressure phase: until the shrinker has written something back, or the budget is spent.
    let mut now = z.counters();
    while start.elapsed() < PRESSURE_BUDGET && now.written_back_pages == 0 {
        std::thread::sleep(Duration::from_millis(50));
        now = z.counters();
    }
    let pressure_secs = start.elapsed().as_secs_f64();
    drop(workload);
    let events = z.stop_pressure_monitor();
    drop(monitor);
    let stall = psi_some_total(&psi_path).saturating_sub(stall_before);
    let hits = cg.limit_hits().unwrap_or(0).saturating_sub(hits_before);
    let after = z.counters();
    writeln!(
        std::io::stderr(),
        "psi_pressure_drives_shrinker: {} trigger {:?}, file {} MiB written in {file_secs:.2} s, \
         cgroup limit {} MiB ({:?}): {pressure_secs:.2} s of pressure, {stall} us of 'some' \
         stall, {hits} limit hits, {events} PSI events; shrinker scanned {} freed {}, \
         written back {}, swap-file writes {}",
        psi_path.display(),
        cfg.trigger,
        FILE_SIZE >> 20,
        CGROUP_LIMIT >> 20,
        cg.version(),
        after.shrinker_scanned,
        after.shrinker_freed,
        after.written_back_pages,
        swap.stats().writes,
    )
    .ok();

    // The workload really stalled on memory ...
    assert!(hits > 0, "the reader never hit its cgroup limit");
    assert!(stall > 0, "no PSI memory stall was recorded");
    // ... the kernel told the monitor, and the shrinker acted on it (nothing else scans: the
    // pool is far below its limit, the worker never ran).
    assert!(
        events >= 1,
        "no PSI event in {pressure_secs:.1} s ({stall} us of stall)"
    );
    assert_eq!(after.shrink_worker_runs, before.shrink_worker_runs);
    assert!(after.shrinker_scanned > 0, "the shrinker never scanned");
    assert!(
        after.written_back_pages > 0,
        "no entry written back after {events} events ({} scanned)",
        after.shrinker_scanned
    );
    assert_eq!(after.shrinker_freed, after.written_back_pages);
    assert_eq!(after.zswpwb, after.written_back_pages);
    assert_eq!(swap.stats().writes, after.written_back_pages);
    assert_eq!(
        after.stored_pages,
        ENTRIES as u64 - after.written_back_pages
    );

    // Every page reads back unchanged: from the pool, or from the swap file if written back.
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut from_file = 0;
    for (i, p) in pages.iter().enumerate() {
        match z
            .load(common::slot(i as u64), &mut buf, true)
            .expect("load")
        {
            LoadOutcome::Hit => {}
            LoadOutcome::FromSwapFile => from_file += 1,
            LoadOutcome::Absent => panic!("page {i} lost"),
        }
        assert!(buf == *p, "page {i} changed");
    }
    assert_eq!(from_file, after.written_back_pages);

    cg.remove().expect("remove the cgroup");
}
