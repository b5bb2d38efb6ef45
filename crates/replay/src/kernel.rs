// SPDX-License-Identifier: MIT
//! `--kernel`: the same accesses, in the same order, by real processes in cgroup-v1 memory
//! cgroups with the same limits, with the kernel's zswap enabled (same compressor and
//! parameters) in front of a swap file on disk; the kernel's counters before and after.
//!
//! Every setting is restored on the way out, whatever happens (error, panic, Ctrl-C): the
//! runners are killed, the cgroups removed, zswap's parameters written back (enabled last to
//! be set, first to be restored), `vm.page-cluster` written back if `--page-cluster` set it,
//! the swap file swapped off and deleted. The whole run holds
//! the kernel-test lock, so it never overlaps a kernel test.
//!
//! One runner process per cgroup ([`crate::runner`]), moved into its cgroup once it has
//! mapped its region, so only the region's pages and page tables are charged there. Events are
//! streamed to the runner of their cgroup; when the stream moves to another cgroup, or before a
//! control event, the runners are synchronised, so cross-cgroup order is kept at those points.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uzswap_kernel::cgroup::{memory_controller, MemCgroup, Version};
use uzswap_kernel::debugfs::{self, DebugfsMount};
use uzswap_kernel::zswap_params::{self, ParamGuard};
use uzswap_kernel::{swap, vmstat, KernelLock};
use uzswap_trace::{Content, Event};

use crate::report::{KernelSide, COMPARED};
use crate::runner;
use crate::workload::CgroupLayout;
use crate::{ReplayError, Source};

/// What the kernel side runs with.
#[derive(Clone, Debug)]
pub struct KernelOptions {
    /// The kernel's compressor name (`lzo-rle`, `lzo`, `deflate`).
    pub compressor: String,
    pub max_pool_percent: u32,
    pub accept_threshold_percent: u32,
    pub shrinker_enabled: bool,
    /// Directory of the swap file: on a disk, not tmpfs.
    pub swap_dir: PathBuf,
    /// Slots of the swap file (same as the replay's swap area).
    pub swap_slots: u32,
    /// The `uzswap` binary (it has the hidden `__replay-runner` subcommand).
    pub exe: PathBuf,
    /// vm.page-cluster for the run (restored after); None: the machine's as it is.
    pub page_cluster: Option<u32>,
}

/// Counters read before and after (vmstat deltas, debugfs gauges at the end).
const VMSTAT: [&str; 18] = [
    "pgactivate",
    "pgdeactivate",
    "pgrefill",
    "pgsteal_anon",
    "zswpin",
    "zswpout",
    "zswpwb",
    "pswpin",
    "pswpout",
    "swpin_zero",
    "swpout_zero",
    "pgmajfault",
    "swap_ra",
    "swap_ra_hit",
    "workingset_refault_anon",
    "workingset_activate_anon",
    "workingset_restore_anon",
    "pgscan_anon",
];

/// Why the live comparison cannot run here (one line), if it cannot.
pub fn unavailable() -> Option<String> {
    if !uzswap_kernel::is_root() {
        return Some("needs root (memory cgroups, swapon, zswap parameters)".into());
    }
    match memory_controller() {
        Ok(c) if c.version == Version::V1 => {}
        Ok(_) => {
            return Some(
                "the memory controller is cgroup v2 here; the comparison runs cgroup v1 limits"
                    .into(),
            )
        }
        Err(e) => return Some(format!("no memory cgroup controller ({e})")),
    }
    if !zswap_params::available() {
        return Some("this kernel has no zswap".into());
    }
    None
}

static ABORT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    ABORT.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set the abort flag (the run then unwinds through every guard) and SIGPIPE is
/// ignored (a runner that died is an error, not a silent exit) while alive.
struct SignalGuard {
    old: [(libc::c_int, libc::sigaction); 3],
}

impl SignalGuard {
    fn install() -> SignalGuard {
        ABORT.store(false, Ordering::SeqCst);
        let mut old = [(0, unsafe_zeroed_sigaction()); 3];
        for (i, (sig, handler)) in [
            (libc::SIGINT, on_signal as *const () as libc::sighandler_t),
            (libc::SIGTERM, on_signal as *const () as libc::sighandler_t),
            (libc::SIGPIPE, libc::SIG_IGN),
        ]
        .into_iter()
        .enumerate()
        {
            let mut sa = unsafe_zeroed_sigaction();
            sa.sa_sigaction = handler;
            old[i].0 = sig;
            // SAFETY: valid sigaction structs; the handler only stores to an atomic, which is
            // async-signal-safe.
            unsafe { libc::sigaction(sig, &sa, &mut old[i].1) };
        }
        SignalGuard { old }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, sa) in &self.old {
            // SAFETY: restores the action saved by `install`.
            unsafe { libc::sigaction(*sig, sa, std::ptr::null_mut()) };
        }
    }
}

fn unsafe_zeroed_sigaction() -> libc::sigaction {
    // SAFETY: sigaction is a plain C struct for which all-zero bytes are a valid value
    // (SIG_DFL, empty mask, no flags).
    unsafe { std::mem::zeroed() }
}

/// One runner process; killed and reaped on drop.
struct Runner {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    buf: Vec<u8>,
    pages: u64,
}

impl Runner {
    fn flush(&mut self) -> Result<(), ReplayError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self
            .stdin
            .as_mut()
            .ok_or_else(|| ReplayError::Kernel("runner already stopped".into()))?
            .write_all(&self.buf);
        self.buf.clear();
        r.map_err(|e| self.died(&e.to_string()))
    }

    /// The error for a runner that stopped answering: killed (by the OOM killer, when its
    /// cgroup says so) or failed.
    fn died(&mut self, what: &str) -> ReplayError {
        std::thread::sleep(Duration::from_millis(50));
        let status = self.child.try_wait().ok().flatten();
        ReplayError::Kernel(match status {
            Some(s) if std::os::unix::process::ExitStatusExt::signal(&s) == Some(libc::SIGKILL) => {
                format!(
                    "the kernel killed runner {} (SIGKILL: out of memory in its cgroup, see dmesg)",
                    self.child.id()
                )
            }
            Some(s) => format!("runner {} exited ({s}): {what}", self.child.id()),
            None => format!("runner {}: {what}", self.child.id()),
        })
    }

    fn sync(&mut self, token: u32) -> Result<(), ReplayError> {
        runner::encode(&mut self.buf, runner::OP_SYNC, token, 0);
        self.flush()?;
        let mut ack = [0u8; 4];
        if let Err(e) = self.stdout.read_exact(&mut ack) {
            return Err(self.died(&format!("no acknowledgement: {e}")));
        }
        if u32::from_le_bytes(ack) != token {
            return Err(ReplayError::Kernel("runner out of step".into()));
        }
        Ok(())
    }

    fn stop(&mut self) {
        runner::encode(&mut self.buf, runner::OP_EXIT, 0, 0);
        let _ = self.flush();
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Everything the run changed, undone in field order on drop: runners, cgroups, zswap
/// parameters, vm.page-cluster, swap file, debugfs mount, lock.
struct Session {
    /// By layout index: None before its cgroup is made (a nested one starts with its event).
    runners: Vec<Option<Runner>>,
    cgroups: Vec<Option<MemCgroup>>,
    params: ParamGuard,
    page_cluster: Option<swap::PageClusterGuard>,
    swap: Option<swap::SwapFile>,
    _corpus: OwnedFd,
    _debugfs: DebugfsMount,
    _signals: SignalGuard,
    _lock: KernelLock,
}

impl Drop for Session {
    fn drop(&mut self) {
        for r in self.runners.iter_mut().flatten() {
            r.stop();
        }
        self.runners.clear();
        // Children before their parents, which were made first.
        while let Some(c) = self.cgroups.pop() {
            drop(c);
        }
        if let Err(e) = self.params.restore() {
            eprintln!("uzswap: warning: restoring zswap parameters: {e}");
        }
        if let Some(Err(e)) = self.page_cluster.as_mut().map(|g| g.restore()) {
            eprintln!("uzswap: warning: restoring vm.page-cluster: {e}");
        }
        self.swap = None;
    }
}

fn kerr(what: &str) -> impl Fn(uzswap_kernel::Error) -> ReplayError + '_ {
    move |e| ReplayError::Kernel(format!("{what}: {e}"))
}

fn snapshot() -> Result<Vec<(String, u64)>, ReplayError> {
    let mut v: Vec<(String, u64)> = vmstat::read_all()
        .map_err(kerr("vmstat"))?
        .into_iter()
        .filter(|(k, _)| VMSTAT.contains(&k.as_str()))
        .collect();
    let d = debugfs::read_zswap().map_err(kerr("zswap debugfs"))?;
    v.extend(d.counters);
    Ok(v)
}

fn corpus_memfd(corpus: &uzswap_corpus::Pages) -> Result<OwnedFd, ReplayError> {
    let name = std::ffi::CString::new("uzswap-corpus").expect("no NUL");
    // SAFETY: a valid NUL-terminated name; flags 0 (inheritable, so the runners get it).
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(ReplayError::Kernel(format!(
            "memfd_create: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned);
    f.write_all(corpus.as_bytes())
        .map_err(|e| ReplayError::Kernel(format!("writing the corpus memfd: {e}")))?;
    Ok(OwnedFd::from(f))
}

/// Makes cgroup `i` of `layout` (under its parent, as the trace nests them) and starts its
/// runner in it; returns the runner's own charge.
fn start_cgroup(
    s: &mut Session,
    opts: &KernelOptions,
    layout: &[CgroupLayout],
    i: usize,
    corpus_pages: u64,
) -> Result<u64, ReplayError> {
    let l = &layout[i];
    // A trace's cgroups nest as in the trace (a recording of `uzswap run`: the tree's
    // budget on a parent of its processes' cgroups).
    let parent = match l.parent {
        0 => None,
        p => Some(
            s.cgroups
                .get(p as usize - 1)
                .and_then(Option::as_ref)
                .ok_or_else(|| {
                    ReplayError::Kernel(format!("cgroup {}: its parent comes later", l.name))
                })?,
        ),
    };
    let cg = match parent {
        None => MemCgroup::create(&format!(
            "uzswap-replay-{}-{}-{}",
            std::process::id(),
            i + 1,
            l.name
        )),
        Some(p) => MemCgroup::create_under(p, &format!("{}-{}", i + 1, l.name)),
    }
    .map_err(kerr("memory cgroup"))?;
    let mut cmd = Command::new(&opts.exe);
    cmd.arg("__replay-runner")
        .arg("--pages")
        .arg(l.pages.to_string())
        .arg("--corpus-fd")
        .arg(s._corpus.as_raw_fd().to_string())
        .arg("--corpus-pages")
        .arg(corpus_pages.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: setpgid is async-signal-safe and touches no memory of the parent; the runner
    // leaves the terminal's process group so Ctrl-C reaches only us, and we stop it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            Ok(())
        })
    };
    let mut child = cmd
        .spawn()
        .map_err(|e| ReplayError::Kernel(format!("starting {}: {e}", opts.exe.display())))?;
    let stdin = child.stdin.take();
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    let r = Runner {
        child,
        stdin,
        stdout,
        buf: Vec::with_capacity(1 << 16),
        pages: l.pages,
    };
    read.map_err(|e| ReplayError::Kernel(format!("runner: {e}")))?;
    if !line.starts_with(runner::READY) {
        return Err(ReplayError::Kernel(format!(
            "runner for cgroup {} did not start: {line:?}",
            l.name
        )));
    }
    cg.attach(r.child.id())
        .map_err(kerr("moving the runner into its cgroup"))?;
    let bytes = cg.usage_bytes().unwrap_or(0);
    s.runners[i] = Some(r);
    s.cgroups[i] = Some(cg);
    Ok(bytes)
}

/// Run `src` (a fresh instance of the replayed workload) on the live kernel.
pub fn run(
    opts: &KernelOptions,
    src: &mut Source,
    layout: &[CgroupLayout],
    corpus: &uzswap_corpus::Pages,
    progress: &mut dyn FnMut(u64),
) -> Result<KernelSide, ReplayError> {
    if let Some(why) = unavailable() {
        return Err(ReplayError::Kernel(why));
    }
    let lock = KernelLock::acquire().map_err(kerr("kernel-test lock"))?;
    let dbg = DebugfsMount::ensure().map_err(kerr("debugfs"))?;
    let signals = SignalGuard::install();
    let mut notes = Vec::new();
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps.lines().count() > 1 {
        notes.push(
            "another swap device is active: the kernel's counters include its traffic".into(),
        );
    }
    let corpus_fd = corpus_memfd(corpus)?;
    let mut s = Session {
        runners: Vec::new(),
        cgroups: Vec::new(),
        params: ParamGuard::new(),
        page_cluster: None,
        swap: None,
        _corpus: corpus_fd,
        _debugfs: dbg,
        _signals: signals,
        _lock: lock,
    };
    let swap_path = opts
        .swap_dir
        .join(format!("uzswap-replay-{}.swap", std::process::id()));
    s.swap = Some(
        swap::SwapFile::create(&swap_path, u64::from(opts.swap_slots) * 4096)
            .map_err(kerr("swap file"))?,
    );
    if let Some(n) = opts.page_cluster {
        s.page_cluster = Some(swap::PageClusterGuard::set(n).map_err(kerr("vm.page-cluster"))?);
    }
    let yn = |b: bool| if b { "Y" } else { "N" };
    s.params
        .set("max_pool_percent", &opts.max_pool_percent.to_string())
        .map_err(kerr("zswap max_pool_percent"))?;
    s.params
        .set(
            "accept_threshold_percent",
            &opts.accept_threshold_percent.to_string(),
        )
        .map_err(kerr("zswap accept_threshold_percent"))?;
    s.params
        .set("shrinker_enabled", yn(opts.shrinker_enabled))
        .map_err(kerr("zswap shrinker_enabled"))?;
    s.params
        .set("compressor", &opts.compressor)
        .map_err(kerr("zswap compressor (does this kernel have it?)"))?;
    s.params
        .set("enabled", "Y")
        .map_err(kerr("zswap enabled"))?;
    let corpus_pages = corpus.len() as u64;
    s.runners = (0..layout.len()).map(|_| None).collect();
    s.cgroups = (0..layout.len()).map(|_| None).collect();
    // A top-level cgroup starts now; a nested one (a recording's process, under the tree's
    // cgroup) when the trace creates it, and stops when it removes it, so that only the live
    // ones' runners are charged inside the budget.
    let mut runner_bytes = vec![0; layout.len()];
    for (i, l) in layout.iter().enumerate() {
        if l.parent == 0 {
            runner_bytes[i] = start_cgroup(&mut s, opts, layout, i, corpus_pages)?;
        }
    }
    let before = snapshot()?;
    let t0 = Instant::now();
    let mut current: Option<usize> = None;
    let mut token = 1u32;
    let mut events = 0u64;
    let sync_all = |s: &mut Session, token: &mut u32| -> Result<(), ReplayError> {
        // A removed cgroup's runner has stopped: nothing of it to wait for.
        for r in s.runners.iter_mut().flatten().filter(|r| r.stdin.is_some()) {
            *token = token.wrapping_add(1);
            r.sync(*token)?;
        }
        Ok(())
    };
    while let Some(ev) = src.next_event()? {
        if ABORT.load(Ordering::SeqCst) {
            return Err(ReplayError::Kernel(
                "interrupted; every setting restored".into(),
            ));
        }
        events += 1;
        if events & 0xffff == 0 {
            progress(events);
        }
        let idx = |cg: u32| -> Result<usize, ReplayError> {
            (cg as usize)
                .checked_sub(1)
                .filter(|&i| i < layout.len())
                .ok_or_else(|| {
                    ReplayError::Kernel(format!(
                        "event for cgroup #{cg}: the live comparison runs accesses only in the \
                         workload's own cgroups"
                    ))
                })
        };
        match ev {
            Event::Read { cg, page }
            | Event::Write { cg, page, .. }
            | Event::Free { cg, page, .. } => {
                let i = idx(cg)?;
                if current != Some(i) {
                    if let Some(r) = current.and_then(|c| s.runners[c].as_mut()) {
                        token = token.wrapping_add(1);
                        r.sync(token)?;
                    }
                    current = Some(i);
                }
                let r = s.runners[i].as_mut().ok_or_else(|| {
                    ReplayError::Kernel(format!("event for cgroup {} before it", layout[i].name))
                })?;
                if page >= r.pages {
                    return Err(ReplayError::Kernel(format!(
                        "page {page} beyond cgroup {}'s {} pages",
                        layout[i].name, r.pages
                    )));
                }
                match ev {
                    Event::Read { .. } => runner::encode(&mut r.buf, runner::OP_READ, 0, page),
                    Event::Write {
                        content: Content::Page(c),
                        ..
                    } => runner::encode(
                        &mut r.buf,
                        runner::OP_WRITE,
                        (u64::from(c) % corpus_pages.max(1)) as u32,
                        page,
                    ),
                    Event::Write { .. } => runner::encode(&mut r.buf, runner::OP_ZERO, 0, page),
                    Event::Free { count, .. } => {
                        let mut p = page;
                        let end = page.saturating_add(count).min(r.pages);
                        while p < end {
                            let n = (end - p).min(u64::from(u32::MAX));
                            runner::encode(&mut r.buf, runner::OP_FREE, n as u32, p);
                            p += n;
                        }
                    }
                    _ => unreachable!(),
                }
                if r.buf.len() >= 1 << 16 {
                    r.flush()?;
                }
            }
            Event::Cgroup { cg, ref name, .. } => {
                let i = idx(cg)?;
                if layout[i].name != *name {
                    return Err(ReplayError::Kernel(format!(
                        "cgroup #{cg} is {name:?}, the layout says {:?}",
                        layout[i].name
                    )));
                }
                if s.runners[i].is_none() {
                    runner_bytes[i] = start_cgroup(&mut s, opts, layout, i, corpus_pages)?;
                }
            }
            Event::MemoryMax { cg, bytes } => {
                let i = idx(cg)?;
                sync_all(&mut s, &mut token)?;
                let cgroup = s.cgroups[i]
                    .as_ref()
                    .ok_or_else(|| ReplayError::Kernel("cgroup removed".into()))?;
                if let Err(e) = cgroup.set_limit(bytes.unwrap_or(i64::MAX as u64 / 4096 * 4096)) {
                    notes.push(format!(
                        "memory.limit_in_bytes of {} refused: {e}",
                        layout[i].name
                    ));
                }
            }
            Event::RemoveCgroup { cg } => {
                let i = idx(cg)?;
                sync_all(&mut s, &mut token)?;
                if let Some(r) = s.runners[i].as_mut() {
                    r.stop();
                }
                if let Some(c) = s.cgroups[i].take() {
                    c.remove().map_err(kerr("removing a cgroup"))?;
                }
                if current == Some(i) {
                    current = None;
                }
            }
            Event::Param {
                ref name,
                ref value,
            } => {
                sync_all(&mut s, &mut token)?;
                let (k, v) = match name.as_str() {
                    "compressor" => ("compressor", value.clone()),
                    "max-pool-percent" => ("max_pool_percent", value.clone()),
                    "accept-threshold-percent" => ("accept_threshold_percent", value.clone()),
                    "shrinker" => ("shrinker_enabled", yn(value == "on").to_string()),
                    _ => {
                        notes.push(format!(
                            "param {name} {value}: no kernel equivalent, ignored"
                        ));
                        continue;
                    }
                };
                s.params.set(k, &v).map_err(kerr("zswap parameter"))?;
            }
            Event::ZswapMax { .. } | Event::ZswapWriteback { .. } | Event::Reclaim { .. } => {
                return Err(ReplayError::Kernel(
                    "memory.zswap.max, memory.zswap.writeback and memory.reclaim do not exist in \
                     cgroup v1"
                        .into(),
                ));
            }
        }
    }
    for r in s.runners.iter_mut().flatten() {
        r.flush()?;
    }
    sync_all(&mut s, &mut token)?;
    let elapsed_s = t0.elapsed().as_secs_f64();
    progress(events);
    // The shrink worker runs asynchronously: let it finish (the pool stops changing).
    let mut last = snapshot()?;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let now = snapshot()?;
        if now == last {
            break;
        }
        last = now;
    }
    let after = last;
    // Each cgroup's memory.stat at the end (v1: list sizes in bytes, faults).
    let mut cgroup_stats = Vec::new();
    for (i, c) in s.cgroups.iter().enumerate() {
        let mut m = std::collections::BTreeMap::new();
        if let Some(c) = c {
            let text = std::fs::read_to_string(c.path().join("memory.stat")).unwrap_or_default();
            for l in text.lines() {
                let mut f = l.split_whitespace();
                if let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok()))
                {
                    if matches!(
                        k,
                        "active_anon" | "inactive_anon" | "pgfault" | "pgmajfault" | "rss" | "swap"
                    ) {
                        m.insert(
                            k.to_string(),
                            if k.ends_with("anon") || k == "rss" || k == "swap" {
                                v / 4096
                            } else {
                                v
                            },
                        );
                    }
                }
            }
        }
        cgroup_stats.push((layout[i].name.clone(), m));
    }
    let get = |v: &[(String, u64)], k: &str| v.iter().find(|(n, _)| n == k).map(|(_, x)| *x);
    let mut counters = std::collections::BTreeMap::new();
    for (k, a) in &after {
        let b = get(&before, k).unwrap_or(0);
        counters.insert(k.clone(), a.saturating_sub(b));
    }
    drop(s);
    Ok(KernelSide {
        compressor: opts.compressor.clone(),
        elapsed_s,
        counters,
        ratio: Default::default(),
        runner_bytes,
        cgroups: cgroup_stats,
        notes,
    })
}

/// Fill `k.ratio` with ours / kernel for the compared counters.
pub fn fill_ratios(k: &mut KernelSide, ours: &crate::Report) {
    for name in COMPARED {
        let o = ours.counter(name) as f64;
        let t = k.counters.get(name).copied().unwrap_or(0) as f64;
        if t > 0.0 {
            k.ratio.insert(name.to_string(), o / t);
        }
    }
}
