// SPDX-License-Identifier: MIT
//! uzswap-replay: workloads replayed through the real cache under memory limits, with the
//! kernel's report, and the same accesses run by the live kernel for comparison.
//!
//! **Owns**
//! - [`workload`]: the built-in workloads (`build`, `zipf`, `scan`, `active-vs-background`),
//!   generated from a seed as event streams;
//! - [`driver`]: the replay itself: a simulated page table per cgroup in front of the
//!   reclaim engine (`uzswap-mm`) and a real `Zswap` over a real swap file, every page
//!   verified on its way back, cache time measured apart from the engine's;
//! - [`report`]: the JSON and text reports, timeline CSV, `--compare` table;
//! - [`plot`]: the SVG of pool size, stored pages and written-back pages over time;
//! - [`kernel`]: `--kernel`: the same accesses by real processes in cgroup-v1 memory cgroups
//!   with the kernel's zswap and a swap file, every setting restored afterwards;
//! - [`runner`]: the body of those processes (a hidden `uzswap` subcommand);
//! - [`params`]: cache options by name (shared by the CLI's flags and trace `param` events).
//!
//! **Data layout**: events stream from a [`Source`] one at a time; the replay keeps, per
//! cgroup, a page table (a dense vector below 2^24 pages, a hash map above) mapping trace
//! pages to engine page identities, and per identity the corpus page it holds (4 bytes).
//! Memory follows the footprint, not the number of events.
//!
//! **Lock order**: a replay is single-threaded (the cache's shrink worker runs in its own
//! thread and is waited for after stores that queue it); `--compare` runs one replay per
//! thread, sharing only the read-only corpus.

pub mod batch;
pub mod driver;
pub mod kernel;
pub mod params;
pub mod plot;
pub mod report;
pub mod runner;
pub mod workload;

use std::fs::File;
use std::io::BufReader;

use uzswap_trace::{Event, Record, TraceReader};

pub use batch::{Access, Batch, Op};
pub use driver::{Replay, ReplayOptions};
pub use report::Report;
pub use workload::{Builtin, CgroupLayout, WorkloadParams, BUILTIN};

/// Errors of a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("setup: {0}")]
    Setup(String),
    #[error("trace: {0}")]
    Trace(String),
    #[error(transparent)]
    TraceFormat(#[from] uzswap_trace::TraceError),
    #[error(transparent)]
    Engine(#[from] uzswap_mm::Error),
    #[error("verification failed: {0}")]
    Verify(String),
    #[error("kernel comparison: {0}")]
    Kernel(String),
}

/// Where events come from.
pub enum Source {
    Builtin(Box<Builtin>),
    Trace(Box<TraceReader<BufReader<File>>>),
    /// A trace replayed under another budget (`uzswap replay --trace FILE --memory-max SIZE`).
    LimitedTrace(Box<LimitedTrace>),
}

/// A trace whose top-level cgroups (children of the root) get `memory.max` = `bytes` when they
/// are created, in place of the trace's own `memory.max` events for them; their descendants'
/// limits stay the trace's. A recording of `uzswap run` has one top-level cgroup, the process
/// tree's, so this replays it under another SIZE.
pub struct LimitedTrace {
    reader: TraceReader<BufReader<File>>,
    bytes: u64,
    /// By cgroup number: a child of the root.
    top_level: Vec<bool>,
    /// The limit event that follows a top-level cgroup's creation.
    pending: Option<Record>,
}

impl LimitedTrace {
    pub fn new(reader: TraceReader<BufReader<File>>, bytes: u64) -> LimitedTrace {
        LimitedTrace {
            reader,
            bytes,
            top_level: Vec::new(),
            pending: None,
        }
    }

    fn next_record(&mut self) -> Result<Option<Record>, ReplayError> {
        if let Some(e) = self.pending.take() {
            return Ok(Some(e));
        }
        loop {
            let Some(r) = self.reader.next_event()? else {
                return Ok(None);
            };
            match r.event {
                Event::Cgroup { cg, parent, .. } => {
                    let i = cg as usize;
                    if self.top_level.len() <= i {
                        self.top_level.resize(i + 1, false);
                    }
                    self.top_level[i] = parent == 0;
                    if parent == 0 {
                        self.pending = Some(Record {
                            time_ns: r.time_ns,
                            event: Event::MemoryMax {
                                cg,
                                bytes: Some(self.bytes),
                            },
                        });
                    }
                    return Ok(Some(r));
                }
                Event::MemoryMax { cg, .. }
                    if self.top_level.get(cg as usize).copied().unwrap_or(false) => {}
                _ => return Ok(Some(r)),
            }
        }
    }
}

/// A trace's clock marks in a batch: one at the batch's first timed event, then one whenever
/// the trace's time moved on by this much (the statistics flush it places runs every 2 s).
const CLOCK_STEP_NS: u64 = 1_000_000;

impl Source {
    /// The next event.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReplayError> {
        Ok(self.next_record()?.map(|r| r.event))
    }

    /// The next event with its timestamp (a trace's, if it has one).
    pub fn next_record(&mut self) -> Result<Option<Record>, ReplayError> {
        match self {
            Source::Builtin(b) => Ok(b.next_event().map(|event| Record {
                time_ns: None,
                event,
            })),
            Source::Trace(t) => Ok(t.next_event()?),
            Source::LimitedTrace(t) => t.next_record(),
        }
    }

    /// Replace `out`'s contents with the next events: at least `min` unless the stream
    /// ends (then fewer; none at its end). A trace's timestamps become the batch's clock
    /// marks (see [`Replay::advance_clock`]).
    pub fn fill(&mut self, out: &mut Batch, min: usize) -> Result<(), ReplayError> {
        if let Source::Builtin(b) = self {
            b.fill(out, min);
            return Ok(());
        }
        out.clear();
        let mut marked: Option<u64> = None;
        while out.len() < min {
            match self.next_record()? {
                Some(r) => {
                    if let Some(t) = r.time_ns {
                        if marked.is_none_or(|m| t >= m + CLOCK_STEP_NS) {
                            out.push_clock(t);
                            marked = Some(t);
                        }
                    }
                    out.push(r.event);
                }
                None => break,
            }
        }
        Ok(())
    }

    /// Events to expect, when known.
    pub fn total_events(&self) -> Option<u64> {
        match self {
            Source::Builtin(b) => Some(b.total_events()),
            Source::Trace(_) | Source::LimitedTrace(_) => None,
        }
    }

    /// The workload's name.
    pub fn name(&self) -> String {
        match self {
            Source::Builtin(b) => b.name().to_string(),
            Source::Trace(t) => trace_name(t),
            Source::LimitedTrace(t) => trace_name(&t.reader),
        }
    }
}

fn trace_name(t: &TraceReader<BufReader<File>>) -> String {
    t.header()
        .meta("workload")
        .map_or_else(|| t.name().to_string(), str::to_string)
}

/// Events between prefetching the memory an access needs (its page's flags and content
/// entry; half-way, if it will fault, its page record; a quarter before, its swap slot's
/// state) and applying it, so that the random accesses of a large footprint overlap instead
/// of stalling one after another.
const LOOKAHEAD: usize = 8;

/// Events fetched from the source at a time: large, because handing a batch back wakes the
/// event thread, and a wakeup across vCPUs costs several microseconds of the replay's time
/// on a VM; with `IN_FLIGHT` of them the replay never waits for the event thread after its
/// first batch (`source_wait_s` in the report). About 4 MiB of 16-byte ops in all, whatever
/// the trace's length.
const BATCH: usize = 16384;
/// The first batch's size (they double up to `BATCH`): the replay waits for it.
const FIRST_BATCH: usize = 1024;
/// Batches in flight between the two threads.
const IN_FLIGHT: usize = 8;

/// Replay every event of `src`; `progress(events)` is called every 65536 events.
///
/// The events are generated (built-in workload) or read and decoded (trace) on a second
/// thread, a few batches ahead, while this one replays: producing the events is the trace's
/// work, not the reclaim model's, and overlaps it (the events and so every counter are the
/// same as on one thread). The modelled TLBs run there too, marking each access with whether
/// its translation was cached ([`driver::TlbStage`]): their state depends on the access
/// stream alone. The report's `source_s` is that thread's CPU time.
pub fn run(
    replay: &mut Replay,
    src: &mut Source,
    progress: &mut dyn FnMut(u64),
) -> Result<Report, ReplayError> {
    let name = src.name();
    let mut stage = replay.take_tlb_stage();
    let r = std::thread::scope(|scope| {
        // Full batches to the replay, empty ones back for reuse: no allocation per batch.
        let (full_tx, full_rx) =
            std::sync::mpsc::sync_channel::<Result<Batch, ReplayError>>(IN_FLIGHT - 1);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Batch>();
        for _ in 0..IN_FLIGHT {
            empty_tx
                .send(Batch::with_capacity(2 * BATCH))
                .expect("receiver alive");
        }
        let producer = std::thread::Builder::new()
            .name("replay-source".into())
            .spawn_scoped(scope, move || {
                // Small batches first, so that the replay starts at once.
                let mut size = FIRST_BATCH;
                while let Ok(mut batch) = empty_rx.recv() {
                    let r = src.fill(&mut batch, size);
                    size = (size * 2).min(BATCH);
                    if r.is_ok() {
                        stage.mark(&mut batch);
                    }
                    let end = r.is_err() || batch.is_empty();
                    if full_tx.send(r.map(|()| batch)).is_err() || end {
                        break;
                    }
                }
                (stage, thread_cpu_time())
            })
            .map_err(|e| ReplayError::Setup(format!("starting the event source thread: {e}")))?;
        let mut waited = std::time::Duration::ZERO;
        // The clock starts once the event thread runs (starting a thread is set-up).
        replay.start_clock();
        let r = replay_batches(replay, &full_rx, &empty_tx, progress, &mut waited);
        // Unblock and stop the producer whatever happened here.
        drop(empty_tx);
        drop(full_rx);
        let (stage, source_cpu) = producer
            .join()
            .map_err(|_| ReplayError::Setup("the event source thread panicked".into()))?;
        replay.put_tlb_stage(stage);
        r.map(|()| (source_cpu, waited))
    });
    let (source_cpu, waited) = r?;
    progress(replay.events());
    let mut rep = replay.report(&name)?;
    rep.source_s = source_cpu.as_secs_f64();
    rep.source_wait_s = waited.as_secs_f64();
    Ok(rep)
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The replay side of `run`: apply each batch as it arrives, hand it back emptied.
fn replay_batches(
    replay: &mut Replay,
    full: &std::sync::mpsc::Receiver<Result<Batch, ReplayError>>,
    empty: &std::sync::mpsc::Sender<Batch>,
    progress: &mut dyn FnMut(u64),
    waited: &mut std::time::Duration,
) -> Result<(), ReplayError> {
    loop {
        let batch = match full.try_recv() {
            Ok(b) => Ok(b),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                let t = std::time::Instant::now();
                let b = full.recv();
                *waited += t.elapsed();
                b.map_err(|_| ())
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(()),
        };
        let Ok(batch) = batch else {
            return Err(ReplayError::Setup(
                "the event source thread stopped early".into(),
            ));
        };
        let batch = batch?;
        if batch.is_empty() {
            return Ok(());
        }
        apply_batch(replay, &batch, progress)?;
        // The producer may have finished: then nobody takes the batch back.
        let _ = empty.send(batch);
    }
}

/// Apply the events of one batch, prefetching ahead.
fn apply_batch(
    replay: &mut Replay,
    batch: &Batch,
    progress: &mut dyn FnMut(u64),
) -> Result<(), ReplayError> {
    let ops = &batch.ops;
    // The page identities of the next LOOKAHEAD ops, found once by the first prefetch stage
    // (op j's in slot j % LOOKAHEAD).
    let mut ids = [driver::NO_PAGE; LOOKAHEAD];
    for (j, &op) in ops.iter().enumerate().take(LOOKAHEAD) {
        ids[j % LOOKAHEAD] = replay.prefetch_op(op);
    }
    let mut controls = batch.events.iter();
    // The trace's clock marks (none for a built-in workload): the next one's op index.
    let clock = &batch.clock;
    let mut mark = 0;
    let mut next_mark = clock.first().map_or(usize::MAX, |c| c.0 as usize);
    for i in 0..ops.len() {
        if i == next_mark {
            while let Some(&(_, ns)) = clock.get(mark).filter(|c| c.0 as usize == i) {
                replay.advance_clock(ns);
                mark += 1;
            }
            next_mark = clock.get(mark).map_or(usize::MAX, |c| c.0 as usize);
        }
        let op = ops[i];
        let id = ids[i % LOOKAHEAD];
        ids[i % LOOKAHEAD] = match ops.get(i + LOOKAHEAD) {
            Some(&next) => replay.prefetch_op(next),
            None => driver::NO_PAGE,
        };
        replay.prefetch_fault(ids[(i + LOOKAHEAD / 2) % LOOKAHEAD], false);
        replay.prefetch_fault(ids[(i + LOOKAHEAD / 4) % LOOKAHEAD], true);
        match op.access() {
            Some(_) => replay.apply_op(op, id)?,
            None => {
                let ev = controls.next().expect("a control op has its event");
                replay.apply(ev)?;
            }
        }
        if replay.events() & 0xffff == 0 {
            progress(replay.events());
        }
    }
    for &(_, ns) in &clock[mark..] {
        replay.advance_clock(ns);
    }
    Ok(())
}

/// Swap slots for a workload spanning `footprint_pages` pages in all: twice the footprint
/// (so the swap is never more than half full and `vm_swap_full` stays false, as on a machine
/// with ample swap), at least 64 Ki slots, in whole 512-slot clusters, at most the swap
/// file's limit (`uzswap_backing::MAX_SLOTS`).
pub fn swap_slots_for(footprint_pages: u64) -> u32 {
    let max = uzswap_backing::MAX_SLOTS / 512 * 512;
    let n = (2 * footprint_pages.min(max) + 1024).max(1 << 16);
    (n.div_ceil(512) * 512).min(max) as u32
}

/// The compression ratio (uncompressed / pool bytes) of a sample of `corpus` with `alg`,
/// counting zero pages as free and incompressible pages as whole pages.
pub fn estimate_ratio(corpus: &uzswap_corpus::Pages, alg: uzswap_compress::Algorithm) -> f64 {
    let n = corpus.len().min(512);
    if n == 0 {
        return 1.0;
    }
    let step = corpus.len() / n;
    let mut out = vec![0u8; uzswap_compress::MAX_COMPRESSED_LEN.max(4096)];
    let mut bytes = 0usize;
    for i in 0..n {
        let p = corpus.page(i * step);
        if p.iter().all(|&b| b == 0) {
            continue;
        }
        bytes += match uzswap_compress::compress(alg, p, &mut out) {
            Ok(len) if len < 4096 => len + 8,
            _ => 4096,
        };
    }
    (n * 4096) as f64 / bytes.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::swap_slots_for;

    #[test]
    fn swap_slots_are_whole_clusters_within_the_swap_files_limit() {
        assert_eq!(swap_slots_for(0), 1 << 16);
        assert_eq!(
            swap_slots_for(100_000),
            (200_000u32 + 1024).div_ceil(512) * 512
        );
        // A recording of a process tree spans far more pages than exist: clamped, not wrapped.
        for huge in [1u64 << 31, 1 << 40, u64::MAX / 2, u64::MAX] {
            let n = swap_slots_for(huge);
            assert_eq!(u64::from(n), uzswap_backing::MAX_SLOTS, "{huge}");
            assert_eq!(n % 512, 0);
        }
    }
}
