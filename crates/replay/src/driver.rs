// SPDX-License-Identifier: MIT
//! The replay driver: a simulated page table per cgroup in front of the reclaim engine
//! (`uzswap-mm`) and a real cache (`uzswap-zswap` over a real swap file). Every store, load and
//! device read or write is executed and timed; page contents come from the corpus, and every
//! page read back is compared with what was written.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uzswap_backing::SwapFile;
use uzswap_corpus::Pages;
use uzswap_mm::{
    cache, Accounting, Config, Error as MmError, Front, MemCg, Mm, PageId, ReadIn, WriteOut,
};
use uzswap_trace::{Content, Event};
use uzswap_zswap::{CgroupId, Params, Zswap};

use crate::batch::{Access, Op};
use crate::report::{CgroupReport, Report, Sample};
use crate::ReplayError;

/// The swap area number the replay's swap file uses.
const AREA: u32 = 0;
/// Content index of a zero-filled page.
const ZERO: u32 = u32::MAX;
/// No page.
const NONE: u32 = u32::MAX;
/// No page identity (what `Replay::prefetch_op` returns for a page it could not place).
pub const NO_PAGE: u32 = NONE;
static ZERO_PAGE: [u8; 4096] = [0; 4096];

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Cache parameters (`numa_nodes` is forced to 1: the replay is one node).
    pub params: Params,
    pub accounting: Accounting,
    /// Swap slots (the engine's area and the swap file).
    pub swap_slots: u32,
    /// Where the swap file is created (an anonymous O_TMPFILE file).
    pub swap_dir: PathBuf,
    /// Compare every page read back with what was written.
    pub verify: bool,
    /// Latency model of the swap device, added per device read (a fault waits for it) to the
    /// cgroups' elapsed time; device writes are asynchronous and cost nothing.
    pub disk_read_latency: Duration,
    /// Events between timeline samples (0: no timeline).
    pub timeline_every: u64,
    /// Charge page tables (one page per 512 pages of address space touched), as the kernel
    /// charges `GFP_PGTABLE_USER` allocations to the memcg.
    pub page_tables: bool,
    /// Wait for the cache's shrink worker after each store that queued it (deterministic).
    pub sync_shrink: bool,
    /// Entries of the modelled data TLB per address space (0: none). An access that hits a
    /// cached translation does not set the PTE's accessed bit, as on x86 (see `Tlb`).
    pub tlb_entries: usize,
    /// Period of the memcg statistics flush in kernel time (`FLUSH_TIME`, 2 s; zero: the
    /// reclaim heuristics that read rstat see exact values). Kernel time is modelled by
    /// `clock`.
    pub stats_flush: Duration,
    /// The kernel-time model that places the statistics flushes.
    pub clock: KernelClock,
    /// Pages each trace cgroup's address space spans (cgroup 1 first), when known (a
    /// built-in workload's layout, a trace's first pass): those pages get fixed engine page
    /// identities, so an access finds its page without a lookup. Pages beyond (or of cgroups
    /// not listed) go through a hash map.
    pub spans: Vec<u64>,
    /// Open the swap file's data blocks with O_DIRECT (`SwapFile::enable_direct_io`).
    pub direct_io: bool,
    /// A trace's timestamps pace the modelled kernel clock ([`Replay::advance_clock`]). Off
    /// beside the live kernel, whose runners replay the events as fast as they can, not at
    /// the recording's pace: the model's own clock is fitted to theirs.
    pub trace_clock: bool,
    /// vm.page-cluster: swap-in reads up to `1 << page_cluster` slots around a fault's (the
    /// kernel's default 3; 0: no readahead, as zram setups often have).
    pub page_cluster: u32,
}

/// How long the kernel takes for what a replay does, to place time-driven kernel behaviour
/// (the 2 s memcg statistics flush) among the events. Defaults: a regression over `--kernel`
/// runs of the four built-in workloads on the development VM (2 vCPUs, AMD EPYC, swap file on
/// a virtio disk) while other builds loaded it; docs/replay-vs-kernel.md.
#[derive(Clone, Copy, Debug)]
pub struct KernelClock {
    /// Per access (including the runner's page copy for writes and minor faults).
    pub access: Duration,
    /// Per zswap store or load (with the reclaim scanning around it).
    pub zswap_op: Duration,
    /// Per page written to or read from the swap device.
    pub disk_op: Duration,
}

impl Default for KernelClock {
    fn default() -> Self {
        KernelClock {
            access: Duration::from_micros(3),
            zswap_op: Duration::from_micros(27),
            disk_op: Duration::from_micros(50),
        }
    }
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            params: Params::default(),
            accounting: Accounting::V2,
            swap_slots: 1 << 20,
            swap_dir: std::env::temp_dir(),
            verify: true,
            disk_read_latency: Duration::ZERO,
            timeline_every: 0,
            page_tables: true,
            sync_shrink: true,
            tlb_entries: 2048,
            stats_flush: Duration::from_secs(2),
            clock: KernelClock::default(),
            spans: Vec::new(),
            direct_io: false,
            trace_clock: true,
            page_cluster: 3,
        }
    }
}

/// Per-cgroup counters the front keeps (by the page's owner). A cgroup's report adds its
/// descendants', the removed ones' included, as the kernel's memory.stat does.
#[derive(Clone, Copy, Debug, Default)]
struct PerCg {
    zswpout: u64,
    zswpin: u64,
    pswpout: u64,
    pswpin: u64,
    swpout_zero: u64,
    swpin_zero: u64,
    /// Cache time spent on this cgroup's behalf (its faults and its reclaim), in `ticks`.
    cache_ticks: u64,
    /// Modelled device latency its faults waited for.
    model_ns: u64,
    events: u64,
}

impl std::ops::AddAssign for PerCg {
    fn add_assign(&mut self, o: PerCg) {
        self.zswpout += o.zswpout;
        self.zswpin += o.zswpin;
        self.pswpout += o.pswpout;
        self.pswpin += o.pswpin;
        self.swpout_zero += o.swpout_zero;
        self.swpin_zero += o.swpin_zero;
        self.cache_ticks += o.cache_ticks;
        self.model_ns += o.model_ns;
        self.events += o.events;
    }
}

/// `x % d` for 32-bit `x` by a multiplication (Lemire, Kaser and Kurz, "Faster remainder by
/// direct computation", 2019): exact for every 32-bit `x` and `d`.
#[derive(Clone, Copy)]
struct FastMod {
    d: u64,
    m: u64,
}

impl FastMod {
    fn new(d: u32) -> FastMod {
        let d = u64::from(d.max(1));
        FastMod {
            d,
            m: (u64::MAX / d).wrapping_add(1),
        }
    }

    #[inline]
    fn rem(self, x: u32) -> u32 {
        ((u128::from(self.m.wrapping_mul(u64::from(x))) * u128::from(self.d)) >> 64) as u32
    }
}

struct ReplayFront {
    z: Zswap,
    corpus: Arc<Pages>,
    /// `% corpus.len()`.
    corpus_mod: FastMod,
    /// Per page identity: the corpus page it holds, or `ZERO`.
    content: Vec<u32>,
    buf: Vec<u8>,
    /// Engine cgroup number -> cache cgroup.
    zcg: Vec<CgroupId>,
    pc: Vec<PerCg>,
    /// The engine cgroup whose event is being replayed (pays for the cache time).
    cur: u16,
    cache_ticks: u64,
    /// Time spent comparing pages read back with what was written (neither engine nor
    /// cache), in `ticks`; `cache_ticks` likewise.
    verify_ticks: u64,
    /// Kernel time of the zswap stores and loads and device reads and writes so far (see
    /// `KernelClock`), and what one of each costs.
    op_ns: u64,
    zswap_op_ns: u64,
    disk_op_ns: u64,
    verify: bool,
    mismatches: u64,
    first_mismatch: Option<String>,
    disk_ns: u64,
    sync_shrink: bool,
    /// A store ran since the last look at the shrink worker (only stores queue it).
    stored: bool,
    shrinker: bool,
    /// Bumped by every call into the cache that may change it (and every control event).
    zs_gen: u64,
    /// Per engine cgroup: `zswap_pages` as of generation `.0` (reclaim asks for it on every
    /// charge; summing the cache's per-CPU counters each time is the engine's cost).
    zs_memo: Vec<std::cell::Cell<(u64, u64)>>,
}

impl ReplayFront {
    #[inline]
    fn data(&self, page: PageId) -> &[u8] {
        match self.content.get(page.0 as usize).copied().unwrap_or(ZERO) {
            ZERO => &ZERO_PAGE,
            c => self.corpus.page(self.corpus_mod.rem(c) as usize),
        }
    }

    /// Account the cache's time since `t` (a `ticks::now()` reading).
    #[inline]
    fn charge_time(&mut self, t: u64) {
        // Every call into the cache comes through here: its per-cgroup sizes may have moved.
        self.zs_gen += 1;
        let d = ticks::now().saturating_sub(t);
        self.cache_ticks += d;
        self.pc[self.cur as usize].cache_ticks += d;
    }
}

impl ReplayFront {
    /// Let the cache's shrink worker run what stores queued during the last event, and wait
    /// for it: the worker gets the CPU when the faulting task leaves the kernel (one run per
    /// event however many stores queued it, as the kernel's workqueue coalesces queue_work
    /// calls made while the work is pending).
    #[inline]
    fn run_queued_worker(&mut self) {
        self.stored = false;
        if self.sync_shrink && self.z.shrink_worker_queued() {
            let t = ticks::now();
            self.z.hold_shrink_worker(false);
            cache::settle(&self.z);
            self.z.hold_shrink_worker(true);
            self.charge_time(t);
        }
    }
}

impl Front for ReplayFront {
    fn swap_out(&mut self, page: PageId, slot: u32, cg: MemCg) -> Result<WriteOut, MmError> {
        let t = ticks::now();
        self.stored = true;
        let zcg = self.zcg[cg.0 as usize];
        let r = cache::swap_out(&self.z, AREA, slot, self.data(page), zcg);
        self.charge_time(t);
        let pc = &mut self.pc[cg.0 as usize];
        match r {
            Ok(WriteOut::Zswap) => {
                pc.zswpout += 1;
                self.op_ns += self.zswap_op_ns;
            }
            Ok(WriteOut::Disk) => {
                pc.pswpout += 1;
                self.op_ns += self.disk_op_ns;
            }
            Ok(WriteOut::Zero) => pc.swpout_zero += 1,
            _ => {}
        }
        r
    }

    fn swap_in(&mut self, page: PageId, slot: u32, cg: MemCg) -> Result<ReadIn, MmError> {
        let t = ticks::now();
        let mut buf = std::mem::take(&mut self.buf);
        let r = cache::swap_in(&self.z, AREA, slot, &mut buf);
        self.charge_time(t);
        if let Ok(how) = r {
            let pc = &mut self.pc[cg.0 as usize];
            match how {
                ReadIn::Zswap => {
                    pc.zswpin += 1;
                    self.op_ns += self.zswap_op_ns;
                }
                ReadIn::Disk => {
                    pc.pswpin += 1;
                    self.op_ns += self.disk_op_ns;
                    // The faulting task waits for the device read (readahead reads are
                    // submitted in the same plug, so each costs the same).
                    self.pc[self.cur as usize].model_ns += self.disk_ns;
                }
                ReadIn::Zero => pc.swpin_zero += 1,
            }
            if self.verify {
                let t = ticks::now();
                if buf[..] != *self.data(page) {
                    self.mismatches += 1;
                    self.first_mismatch.get_or_insert_with(|| {
                        format!("page {} (slot {slot}) read back different bytes", page.0)
                    });
                }
                self.verify_ticks += ticks::now().saturating_sub(t);
            }
        }
        self.buf = buf;
        r
    }

    fn free_slot(&mut self, slot: u32) {
        let t = ticks::now();
        cache::free_slot(&self.z, AREA, slot);
        self.charge_time(t);
    }

    fn zswap_pages(&self, cg: MemCg) -> u64 {
        let memo = self.zs_memo.get(cg.0 as usize).filter(|_| self.sync_shrink);
        if let Some(m) = memo {
            let (g, v) = m.get();
            if g == self.zs_gen {
                return v;
            }
        }
        let v = self
            .z
            .cgroup_zswap_bytes(self.zcg[cg.0 as usize])
            .unwrap_or(0)
            .div_ceil(4096);
        if let Some(m) = memo {
            m.set((self.zs_gen, v));
        }
        v
    }

    fn shrink_slab(&mut self, cg: MemCg, priority: u32) {
        if !self.shrinker {
            return;
        }
        let t = ticks::now();
        let zcg = self.zcg[cg.0 as usize];
        // shrink_slab / do_shrink_slab with DEFAULT_SEEKS: delta = (freeable >> priority) * 4
        // / 2, scanned in batches of SHRINK_BATCH (128).
        let count = self.z.shrinker_count(zcg, 0);
        if count > 0 {
            let mut todo = (count >> priority) * 2;
            while todo > 0 {
                let b = todo.min(128);
                let r = self.z.shrinker_scan(zcg, 0, b);
                todo -= b;
                if r.stop {
                    break;
                }
            }
        }
        self.charge_time(t);
    }
}

/// A set-associative data TLB with LRU ways (default 2048 entries, 16 ways: the L2 DTLB of
/// the AMD EPYC this was calibrated on; Intel's STLB is 1536-2048 entries). The kernel clears
/// accessed bits with `ptep_clear_flush_young`, which on x86 does not flush the TLB ("x86/mm:
/// Don't flush the TLB on #WP pmd fixups" and the comment on `ptep_clear_flush_young`): an
/// access through a still-cached translation leaves the bit clear, so a page hot enough to stay
/// in the TLB can look unused to reclaim. Translations are dropped when the page is unmapped;
/// this model checks that the page is still mapped on every hit instead.
///
/// A set is 16 32-bit tags (a page number folded to 32 bits; two pages 2^32 pages apart alias,
/// which only matters for address spaces of more than 16 TiB), one cache line, and its
/// recency order: the 16 way numbers as the nibbles of one word, most recent first. A lookup
/// is one vector compare; a hit moves its way to the front, a miss replaces the last way.
struct Tlb {
    mask: u32,
    tags: Vec<TlbTags>,
    order: Vec<u64>,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct TlbTags([u32; WAYS]);

const WAYS: usize = 16;
const NIB_ONES: u64 = 0x1111_1111_1111_1111;
const NIB_HIGH: u64 = 0x8888_8888_8888_8888;
/// Ways 0, 1, .., 15 from most to least recent.
const NIB_IDENTITY: u64 = 0xfedc_ba98_7654_3210;

impl Tlb {
    fn new(entries: usize) -> Option<Tlb> {
        if entries == 0 {
            return None;
        }
        let sets = (entries / WAYS).max(1).next_power_of_two();
        Some(Tlb {
            mask: sets as u32 - 1,
            tags: vec![TlbTags([u32::MAX; WAYS]); sets],
            order: vec![NIB_IDENTITY; sets],
        })
    }

    #[inline]
    fn set_of(&self, tag: u64) -> usize {
        (((tag ^ (tag >> 32)) as u32) & self.mask) as usize
    }

    /// Start loading the set `tag` maps to into the CPU cache.
    #[inline]
    fn prefetch(&self, tag: u64) {
        let i = self.set_of(tag);
        if let (Some(t), Some(o)) = (self.tags.get(i), self.order.get(i)) {
            uzswap_mm::prefetch(std::ptr::from_ref(t).cast());
            uzswap_mm::prefetch(std::ptr::from_ref(o).cast());
        }
    }

    /// Look `tag` up; on a hit it becomes the set's most recent entry. On a miss it replaces
    /// the set's least recent entry. Returns whether it hit.
    #[inline(always)]
    fn access(&mut self, tag: u64) -> bool {
        let t32 = (tag ^ (tag >> 32)) as u32;
        let i = self.set_of(tag);
        let tags = &mut self.tags[i].0;
        let mut m = 0u32;
        for (k, &t) in tags.iter().enumerate() {
            m |= u32::from(t == t32) << k;
        }
        let ord = &mut self.order[i];
        if m != 0 {
            let way = u64::from(m.trailing_zeros());
            // The nibble holding `way` (exactly one does): the lowest zero nibble of
            // `ord ^ way*0x11..1`, found with the borrow trick, exact for the lowest.
            let x = *ord ^ (way * NIB_ONES);
            let pos = (x.wrapping_sub(NIB_ONES) & !x & NIB_HIGH).trailing_zeros() / 4;
            // Nibbles below `pos` move up one, `way` goes to the front, the rest stay.
            let below = (1u64 << (4 * pos)) - 1;
            let upto = u64::MAX >> (60 - 4 * pos);
            *ord = (*ord & !upto) | ((*ord & below) << 4) | way;
            true
        } else {
            let way = *ord >> 60;
            tags[way as usize] = t32;
            *ord = (*ord << 4) | way;
            false
        }
    }
}

/// Tag of a page-source page in the TLB (the replayed process reads it to write a page).
const SOURCE_TAG: u64 = 1 << 62;

/// The TLB tag of the page-source page holding content `v` (a corpus page number).
#[inline]
fn source_tag(corpus_mod: FastMod, v: u32) -> u64 {
    SOURCE_TAG | u64::from(corpus_mod.rem(v))
}

/// The TLB models of a replay's address spaces, run ahead of it over the event stream (see
/// `Replay::take_tlb_stage`): `mark` looks every access of a batch up, in order, as the
/// replay would (the page, then for a write of corpus data the source page the process reads
/// it from), and sets the op's hit bit; cgroup events make and drop address spaces' TLBs.
pub struct TlbStage {
    /// Per trace cgroup number (as `Replay::spaces`): its TLB, none once removed.
    tlbs: Vec<Option<Tlb>>,
    entries: usize,
    corpus_mod: FastMod,
}

impl TlbStage {
    /// Mark the accesses of `batch`.
    pub fn mark(&mut self, batch: &mut crate::batch::Batch) {
        let mut controls = batch.events.iter();
        for op in &mut batch.ops {
            let Some((cg, page, a)) = op.access() else {
                // A numbering the replay rejects stops it there; the stage just skips it.
                match controls.next() {
                    Some(Event::Cgroup { cg, .. }) if *cg as usize == self.tlbs.len() => {
                        self.tlbs.push(Tlb::new(self.entries));
                    }
                    Some(Event::RemoveCgroup { cg }) => {
                        if let Some(t) = self.tlbs.get_mut(*cg as usize) {
                            *t = None;
                        }
                    }
                    _ => {}
                }
                continue;
            };
            let Some(t) = self.tlbs.get_mut(cg as usize).and_then(Option::as_mut) else {
                continue;
            };
            if t.access(page) {
                op.set_tlb_hit();
            }
            if let Access::Write(Content::Page(i)) = a {
                t.access(source_tag(self.corpus_mod, i % (ZERO - 1)));
            }
        }
    }
}

/// A cgroup's address space.
struct Space {
    name: String,
    mem: MemCg,
    /// Pages `[0, span)` have engine identity `base + page` (a flat page table).
    base: u32,
    span: u64,
    /// Identities of the other pages (from `Mm::new_page`).
    extra: HashMap<u64, u32>,
    /// Page-table pages charged: one per 2 MiB of address space touched.
    chunks: Vec<u64>,
    far_chunks: HashSet<u64>,
    pt_pages: u64,
    removed: bool,
    tlb: Option<Tlb>,
    /// The parent's trace cgroup number (0: the root).
    parent: usize,
}

/// 2 MiB chunks below this number use the bitmap.
const NEAR_CHUNKS: u64 = 1 << 15;

impl Space {
    fn new(
        name: String,
        mem: MemCg,
        parent: usize,
        base: u32,
        span: u64,
        tlb_entries: usize,
    ) -> Space {
        Space {
            parent,
            tlb: Tlb::new(tlb_entries),
            name,
            mem,
            base,
            span,
            extra: HashMap::new(),
            chunks: Vec::new(),
            far_chunks: HashSet::new(),
            pt_pages: 0,
            removed: false,
        }
    }

    /// The identity of `page` (in the flat range, whether live or not), or `NONE`.
    #[inline]
    fn id(&self, page: u64) -> u32 {
        if page < self.span {
            self.base + page as u32
        } else {
            self.extra.get(&page).copied().unwrap_or(NONE)
        }
    }

    /// True if `page` is in a 2 MiB chunk not touched before (marks it).
    #[inline]
    fn new_chunk(&mut self, page: u64) -> bool {
        let c = page >> 9;
        if c < NEAR_CHUNKS {
            let (w, b) = ((c / 64) as usize, c % 64);
            if self.chunks.len() <= w {
                self.chunks.resize(w + 1, 0);
            }
            let had = self.chunks[w] & (1 << b) != 0;
            self.chunks[w] |= 1 << b;
            !had
        } else {
            self.far_chunks.insert(c)
        }
    }

    /// The live identities of `[page, page + count)`, removing those outside the flat range
    /// from the table, in page order.
    fn take_range(&mut self, mm: &Mm, page: u64, count: u64) -> Vec<u32> {
        let end = page.saturating_add(count);
        let mut ids: Vec<u32> = (page.min(self.span)..end.min(self.span))
            .map(|p| self.base + p as u32)
            .filter(|&id| mm.is_live(PageId(id)))
            .collect();
        if end > self.span && !self.extra.is_empty() {
            let mut keys: Vec<u64> = if count < self.extra.len() as u64 {
                (page.max(self.span)..end)
                    .filter(|p| self.extra.contains_key(p))
                    .collect()
            } else {
                self.extra
                    .keys()
                    .copied()
                    .filter(|p| (page..end).contains(p))
                    .collect()
            };
            keys.sort_unstable();
            for k in keys {
                if let Some(id) = self.extra.remove(&k) {
                    ids.push(id);
                }
            }
        }
        ids
    }

    /// Every live identity, in page order.
    fn pages(&self, mm: &Mm) -> Vec<u32> {
        let mut extra: Vec<(u64, u32)> = self.extra.iter().map(|(&p, &id)| (p, id)).collect();
        extra.sort_unstable();
        (0..self.span)
            .map(|p| self.base + p as u32)
            .filter(|&id| mm.is_live(PageId(id)))
            .chain(extra.into_iter().map(|(_, id)| id))
            .collect()
    }
}

/// Flat page identities stay below this (the rest of `u32` is for `Mm::new_page`).
const MAX_FLAT: u64 = 1 << 31;

/// Flat page identities the spans take (spans that do not fit get none).
fn flat_pages(spans: &[u64]) -> u64 {
    spans
        .iter()
        .fold(0, |n, &s| if n + s <= MAX_FLAT { n + s } else { n })
}

/// One replay in progress.
pub struct Replay {
    opts: ReplayOptions,
    mm: Mm,
    f: ReplayFront,
    /// Trace cgroup number -> address space (index 0: the root).
    spaces: Vec<Space>,
    events: u64,
    started: Instant,
    /// `ticks::now()` at `started`: the cache's and the verification's times are in ticks.
    started_ticks: u64,
    timeline: Vec<Sample>,
    /// memory.reclaim requests that returned EAGAIN, and memory.max writes refused (EBUSY).
    reclaim_eagain: u64,
    limit_ebusy: u64,
    /// Modelled kernel time of the accesses (see `KernelClock`; the cache and device
    /// operations' share is `ReplayFront::op_ns`) and the next statistics flush.
    kernel_ns: u64,
    next_flush_ns: u64,
    /// `opts.stats_flush` in nanoseconds (0: exact statistics, no flushes).
    flush_period_ns: u64,
    /// The event count of the next timeline sample (never reached without a timeline).
    next_sample: u64,
    clock_access_ns: u64,
    /// The next flat page identity (see `ReplayOptions::spans`).
    next_base: u64,
    /// The address spaces' TLBs live in a [`TlbStage`] that marks each access op upstream
    /// (`take_tlb_stage`): accesses take their hit bit from the op.
    tlb_upstream: bool,
    _swap: Arc<SwapFile>,
}

impl Replay {
    /// Set up the cache (its swap file in `opts.swap_dir`) and the engine.
    pub fn new(opts: ReplayOptions, corpus: Arc<Pages>) -> Result<Replay, ReplayError> {
        if corpus.is_empty() {
            return Err(ReplayError::Setup("the corpus has no pages".into()));
        }
        let mut params = opts.params.clone();
        params.numa_nodes = 1;
        // The kernel's shrink worker: a visit that only clears referenced bits is a failure.
        params.rotation_is_failure = true;
        let swap_slots = (opts.swap_slots / 512).max(1) * 512;
        let mut swap =
            SwapFile::create_temp(&opts.swap_dir, AREA, u64::from(swap_slots)).map_err(|e| {
                ReplayError::Setup(format!("swap file in {}: {e}", opts.swap_dir.display()))
            })?;
        if opts.direct_io {
            swap.enable_direct_io().map_err(|e| {
                ReplayError::Setup(format!(
                    "--direct-io: swap file in {}: {e}",
                    opts.swap_dir.display()
                ))
            })?;
        }
        // The engine numbers slots itself (cluster allocator); the file only needs them
        // allocated.
        for _ in 0..swap_slots {
            swap.alloc_slot()
                .map_err(|e| ReplayError::Setup(format!("swap file: {e}")))?;
        }
        let swap = Arc::new(swap);
        let shrinker = params.shrinker_enabled && opts.accounting == Accounting::V2;
        let tlb_entries = opts.tlb_entries;
        let (flush_ns, clock) = (opts.stats_flush.as_nanos() as u64, opts.clock);
        let next_sample = if opts.timeline_every > 0 {
            opts.timeline_every
        } else {
            u64::MAX
        };
        let z = Zswap::new(params).map_err(|e| ReplayError::Setup(format!("cache: {e}")))?;
        z.add_swap_file(swap.clone())
            .map_err(|e| ReplayError::Setup(format!("cache: {e}")))?;
        if opts.sync_shrink {
            z.hold_shrink_worker(true);
        }
        let mut mm = Mm::new(Config {
            accounting: opts.accounting,
            swap_slots,
            exact_stats: opts.stats_flush.is_zero(),
            page_cluster: opts.page_cluster,
            ..Config::default()
        });
        let flat = flat_pages(&opts.spans);
        mm.reserve_pages(flat as usize);
        let f = ReplayFront {
            z,
            corpus_mod: FastMod::new(u32::try_from(corpus.len()).unwrap_or(u32::MAX)),
            corpus,
            content: vec![ZERO; flat as usize],
            buf: vec![0; 4096],
            zcg: vec![CgroupId::ROOT],
            pc: vec![PerCg::default()],
            cur: 0,
            cache_ticks: 0,
            verify_ticks: 0,
            op_ns: 0,
            zswap_op_ns: clock.zswap_op.as_nanos() as u64,
            disk_op_ns: clock.disk_op.as_nanos() as u64,
            verify: opts.verify,
            mismatches: 0,
            first_mismatch: None,
            disk_ns: opts.disk_read_latency.as_nanos() as u64,
            sync_shrink: opts.sync_shrink,
            stored: false,
            shrinker,
            zs_gen: 1,
            zs_memo: Vec::new(),
        };
        Ok(Replay {
            opts,
            mm,
            f,
            spaces: vec![Space::new(
                uzswap_trace::ROOT_NAME.into(),
                MemCg::ROOT,
                0,
                0,
                0,
                tlb_entries,
            )],
            events: 0,
            started: Instant::now(),
            started_ticks: ticks::now(),
            timeline: Vec::new(),
            reclaim_eagain: 0,
            limit_ebusy: 0,
            kernel_ns: 0,
            // The periodic flusher's phase: the first flush half a period in.
            next_flush_ns: flush_ns / 2,
            flush_period_ns: flush_ns,
            next_sample,
            clock_access_ns: clock.access.as_nanos() as u64,
            next_base: 0,
            tlb_upstream: false,
            _swap: swap,
        })
    }

    /// The cache (for reports and tests).
    pub fn cache(&self) -> &Zswap {
        &self.f.z
    }

    /// The engine (for reports and tests).
    pub fn engine(&self) -> &Mm {
        &self.mm
    }

    /// Events applied so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Start the clock (setup excluded from elapsed time).
    pub fn start_clock(&mut self) {
        self.started = Instant::now();
        self.started_ticks = ticks::now();
    }

    fn space(&mut self, cg: u32) -> Result<&mut Space, ReplayError> {
        match self.spaces.get_mut(cg as usize) {
            Some(s) if !s.removed => Ok(s),
            _ => Err(ReplayError::Trace(format!("no cgroup #{cg}"))),
        }
    }

    /// Apply one event.
    pub fn apply(&mut self, ev: &Event) -> Result<(), ReplayError> {
        match *ev {
            Event::Read { cg, page } => self.apply_access(cg, page, Access::Read),
            Event::Write { cg, page, content } => {
                self.apply_access(cg, page, Access::Write(content))
            }
            _ => {
                self.events += 1;
                self.control(ev)?;
                // Control events may run reclaim: look at the shrink worker.
                self.f.stored = true;
                self.after_event();
                Ok(())
            }
        }
    }

    /// Apply one access (the replay loop's fast path; `apply` of a read or write).
    #[inline]
    pub fn apply_access(&mut self, cg: u32, page: u64, a: Access) -> Result<(), ReplayError> {
        self.events += 1;
        let write = match a {
            Access::Read => None,
            Access::Write(c) => Some(c),
        };
        self.access(cg, page, write, None, NONE)?;
        self.after_event();
        Ok(())
    }

    /// Apply one access op of a batch marked by this replay's [`TlbStage`] (see
    /// `take_tlb_stage`): the op says whether its translation was cached. `id`: its page's
    /// identity as `prefetch_op` found it, or `NO_PAGE` (then it is looked up here).
    #[inline]
    pub fn apply_op(&mut self, op: Op, id: u32) -> Result<(), ReplayError> {
        let Some((cg, page, a)) = op.access() else {
            return Err(ReplayError::Trace(
                "a control op applied as an access".into(),
            ));
        };
        debug_assert!(self.tlb_upstream, "apply_op without the TLB stage");
        self.events += 1;
        let write = match a {
            Access::Read => None,
            Access::Write(c) => Some(c),
        };
        self.access(cg, page, write, Some(op.tlb_hit()), id)?;
        self.after_event();
        Ok(())
    }

    /// Move the address spaces' TLB models into a stage that runs ahead of the replay (on the
    /// event thread, overlapping it, as generating the events does) and marks every access
    /// op with whether its translation was cached: the TLB's state is a function of the
    /// access stream alone (a hit on a page unmapped since is checked against the engine's
    /// page state here), so the hits are the same as when the replay looks them up itself.
    /// Until `put_tlb_stage`, accesses must come through `apply_op` on marked batches.
    pub fn take_tlb_stage(&mut self) -> TlbStage {
        self.tlb_upstream = true;
        TlbStage {
            tlbs: self
                .spaces
                .iter_mut()
                .map(|s| if s.removed { None } else { s.tlb.take() })
                .collect(),
            entries: self.opts.tlb_entries,
            corpus_mod: self.f.corpus_mod,
        }
    }

    /// Take the TLBs back from the stage (`apply` and `apply_access` look them up again).
    pub fn put_tlb_stage(&mut self, stage: TlbStage) {
        self.tlb_upstream = false;
        for (s, t) in self.spaces.iter_mut().zip(stage.tlbs) {
            s.tlb = t;
        }
    }

    /// A recorded trace's clock: the next event came `trace_ns` into the recorded run. Between
    /// the events a recording has, its program ran (computed, or touched resident pages,
    /// which no trace sees), so the modelled kernel time, which counts only what the replay
    /// does, falls behind the run's: `node_map.js` recorded over 9.2 s replayed in 1.0 s of
    /// modelled time, with no statistics flush at all, and so with the inactive:active ratio
    /// of the cgroup's creation until its inactive list ran dry and the model ran out of
    /// memory (cgroup v2, 90M, zstd), where exact statistics complete. The modelled clock
    /// never runs behind the trace's, so time-driven kernel behaviour (the 2 s flush) keeps
    /// the recording's pace; it runs ahead where the model's own costs say so.
    #[inline]
    pub fn advance_clock(&mut self, trace_ns: u64) {
        if !self.opts.trace_clock {
            return;
        }
        let now = self.kernel_ns + self.f.op_ns;
        if trace_ns > now {
            self.kernel_ns += trace_ns - now;
        }
    }

    /// What follows every event: the shrink worker's turn, the statistics flush, the
    /// timeline.
    #[inline(always)]
    fn after_event(&mut self) {
        if self.f.stored {
            self.f.run_queued_worker();
        }
        if self.flush_period_ns != 0 {
            self.kernel_ns += self.clock_access_ns;
            let now = self.kernel_ns + self.f.op_ns;
            if now >= self.next_flush_ns {
                self.mm.flush_stats();
                self.next_flush_ns = now + self.flush_period_ns;
            }
        }
        if self.events == self.next_sample {
            self.next_sample += self.opts.timeline_every;
            self.sample();
        }
    }

    /// Events other than accesses.
    #[inline(never)]
    fn control(&mut self, ev: &Event) -> Result<(), ReplayError> {
        self.f.zs_gen += 1;
        match *ev {
            Event::Read { .. } | Event::Write { .. } => unreachable!("accesses take the fast path"),
            Event::Free { cg, page, count } => {
                let s = self.spaces.get_mut(cg as usize).filter(|s| !s.removed);
                let s = s.ok_or_else(|| ReplayError::Trace(format!("no cgroup #{cg}")))?;
                let mem = s.mem.0;
                let ids = s.take_range(&self.mm, page, count);
                self.f.cur = mem;
                self.mm.free_pages(&ids, &mut self.f);
            }
            Event::Cgroup {
                cg,
                parent,
                ref name,
            } => {
                if cg as usize != self.spaces.len() {
                    return Err(ReplayError::Trace(format!(
                        "cgroup {name:?} numbered #{cg}"
                    )));
                }
                let pmem = self.space(parent)?.mem;
                let mem = self.mm.create_cgroup(pmem).map_err(ReplayError::Engine)?;
                let zparent = self.f.zcg[pmem.0 as usize];
                let zcg = self
                    .f
                    .z
                    .create_cgroup(zparent)
                    .map_err(|e| ReplayError::Setup(format!("cache cgroup: {e}")))?;
                debug_assert_eq!(mem.0 as usize, self.f.zcg.len());
                self.f.zcg.push(zcg);
                self.f.pc.push(PerCg::default());
                self.f.zs_memo.resize(self.f.zcg.len(), Default::default());
                let span = self.opts.spans.get(cg as usize - 1).copied().unwrap_or(0);
                let span = if self.next_base + span <= MAX_FLAT {
                    span
                } else {
                    0
                };
                let base = self.next_base as u32;
                self.next_base += span;
                // With the TLBs upstream the stage made this space's TLB when it met this event.
                let tlb_entries = if self.tlb_upstream {
                    0
                } else {
                    self.opts.tlb_entries
                };
                self.spaces.push(Space::new(
                    name.clone(),
                    mem,
                    parent as usize,
                    base,
                    span,
                    tlb_entries,
                ));
            }
            Event::RemoveCgroup { cg } => {
                let s = self.spaces.get_mut(cg as usize).filter(|s| !s.removed);
                let s = s.ok_or_else(|| ReplayError::Trace(format!("no cgroup #{cg}")))?;
                let mem = s.mem;
                let ids = s.pages(&self.mm);
                let pt = std::mem::take(&mut s.pt_pages);
                s.removed = true;
                s.extra = HashMap::new();
                self.f.cur = mem.0;
                self.mm.free_pages(&ids, &mut self.f);
                self.mm.uncharge_kernel(mem, pt);
                self.mm.remove_cgroup(mem).map_err(ReplayError::Engine)?;
                let _ = self.f.z.remove_cgroup(self.f.zcg[mem.0 as usize]);
                // Its counts stay in its parent's, as a dead memcg's in its ancestors'.
                let parent = self.spaces[cg as usize].parent;
                if parent != 0 {
                    let into = self.spaces[parent].mem.0 as usize;
                    let from = self.f.pc[mem.0 as usize];
                    self.f.pc[into] += from;
                }
            }
            Event::MemoryMax { cg, bytes } => {
                let mem = self.space(cg)?.mem;
                self.f.cur = mem.0;
                match self.mm.set_limit(mem, bytes.map(|b| b / 4096), &mut self.f) {
                    Ok(()) => {}
                    Err(MmError::Busy(_)) => self.limit_ebusy += 1,
                    Err(e) => return Err(ReplayError::Engine(e)),
                }
            }
            Event::ZswapMax { cg, bytes } => {
                self.need_v2("memory.zswap.max")?;
                let mem = self.space(cg)?.mem;
                self.f
                    .z
                    .set_cgroup_zswap_max(self.f.zcg[mem.0 as usize], bytes)
                    .map_err(|e| ReplayError::Trace(format!("memory.zswap.max: {e}")))?;
            }
            Event::ZswapWriteback { cg, enabled } => {
                self.need_v2("memory.zswap.writeback")?;
                let mem = self.space(cg)?.mem;
                self.f
                    .z
                    .set_cgroup_writeback(self.f.zcg[mem.0 as usize], enabled)
                    .map_err(|e| ReplayError::Trace(format!("memory.zswap.writeback: {e}")))?;
            }
            Event::Reclaim { cg, bytes } => {
                self.need_v2("memory.reclaim")?;
                let mem = self.space(cg)?.mem;
                self.f.cur = mem.0;
                match self.mm.reclaim(mem, bytes.div_ceil(4096), &mut self.f) {
                    Ok(_) => {}
                    Err(MmError::Again { .. }) => self.reclaim_eagain += 1,
                    Err(e) => return Err(ReplayError::Engine(e)),
                }
            }
            Event::Param {
                ref name,
                ref value,
            } => {
                let mut p = self.f.z.params();
                crate::params::apply(&mut p, name, value).map_err(ReplayError::Trace)?;
                self.f
                    .z
                    .set_params(p)
                    .map_err(|e| ReplayError::Trace(format!("param {name} {value}: {e}")))?;
            }
        }
        Ok(())
    }

    fn need_v2(&self, what: &str) -> Result<(), ReplayError> {
        if self.opts.accounting == Accounting::V1 {
            return Err(ReplayError::Trace(format!(
                "{what} does not exist in cgroup v1 (replay with --cgroup v2)"
            )));
        }
        Ok(())
    }

    #[inline(always)]
    fn access(
        &mut self,
        cg: u32,
        page: u64,
        write: Option<Content>,
        tlb_hit: Option<bool>,
        id: u32,
    ) -> Result<(), ReplayError> {
        let Some(s) = self.spaces.get_mut(cg as usize).filter(|s| !s.removed) else {
            return Err(ReplayError::Trace(format!("no cgroup #{cg}")));
        };
        let mem = s.mem;
        self.f.cur = mem.0;
        self.f.pc[mem.0 as usize].events += 1;
        let tlb_hit = match tlb_hit {
            Some(hit) => hit,
            None => s.tlb.as_mut().is_some_and(|t| t.access(page)),
        };
        // A known identity is the one `s.id` gives: a space's pages keep theirs for its life.
        let id = if id != NONE { id } else { s.id(page) };
        // A TLB hit on a mapped page needs no page walk: no accessed bit, no fault. (A
        // translation of a page unmapped since would have been flushed: then it is a miss.)
        if id == NONE || !self.mm.access_mapped(PageId(id), write.is_some(), tlb_hit) {
            return self.fault(cg, page, id, write);
        }
        if let Some(c) = write {
            self.write_content(cg, id, c);
        }
        Ok(())
    }

    /// An access to a page that is not mapped (`id`: its identity, or `NONE`): the engine's
    /// fault path, and a first touch makes the page.
    #[inline(never)]
    fn fault(
        &mut self,
        cg: u32,
        page: u64,
        id: u32,
        write: Option<Content>,
    ) -> Result<(), ReplayError> {
        let id = if id != NONE && self.mm.is_live(PageId(id)) {
            self.mm
                .access(PageId(id), write.is_some(), &mut self.f)
                .map_err(ReplayError::Engine)?;
            id
        } else {
            self.first_touch(cg, page, write.is_some())?
        };
        if let Some(c) = write {
            self.write_content(cg, id, c);
        }
        Ok(())
    }

    /// The first touch of `page`: charge its page-table page if its 2 MiB chunk is new, make
    /// its engine identity (holding the zero page's content) and fault it in.
    fn first_touch(&mut self, cg: u32, page: u64, write: bool) -> Result<u32, ReplayError> {
        let s = &mut self.spaces[cg as usize];
        let mem = s.mem;
        let new_chunk = s.new_chunk(page);
        if new_chunk && self.opts.page_tables {
            s.pt_pages += 1;
            self.mm
                .charge_kernel(mem, 1, &mut self.f)
                .map_err(ReplayError::Engine)?;
        }
        let s = &mut self.spaces[cg as usize];
        if page < s.span {
            // Flat identities have their content entry from the start.
            let id = s.base + page as u32;
            self.f.content[id as usize] = ZERO;
            self.mm
                .fault_new_page_at(mem, PageId(id), write, &mut self.f)
                .map_err(ReplayError::Engine)?;
            return Ok(id);
        }
        let id = self.mm.new_page(mem).map_err(ReplayError::Engine)?.0;
        s.extra.insert(page, id);
        let i = id as usize;
        if self.f.content.len() <= i {
            self.f.content.resize(i + 1, ZERO);
        }
        self.f.content[i] = ZERO;
        self.mm
            .access(PageId(id), write, &mut self.f)
            .map_err(ReplayError::Engine)?;
        Ok(id)
    }

    /// The TLB tag of the page-source page holding content `v`.
    #[inline]
    fn source_tag(&self, v: u32) -> u64 {
        source_tag(self.f.corpus_mod, v)
    }

    /// Record what a write put in page `id`; the process reads it from the page source.
    #[inline]
    fn write_content(&mut self, cg: u32, id: u32, c: Content) {
        let v = match c {
            Content::Page(i) => i % (ZERO - 1),
            Content::Zero => ZERO,
        };
        self.f.content[id as usize] = v;
        if v != ZERO {
            let tag = self.source_tag(v);
            if let Some(t) = self.spaces[cg as usize].tlb.as_mut() {
                t.access(tag);
            }
        }
    }

    /// Check every page against the cache (tests and `--audit`): a page that is out has its
    /// data in its slot (a pool entry, a zero mark or a device block), a clean page in the swap
    /// cache too; every pool entry belongs to such a page; the cache's `stored_pages` equals the
    /// entries found; the engine's own invariants hold. Returns (pages out, entries found).
    pub fn audit(&mut self) -> Result<(u64, u64), String> {
        if self.f.sync_shrink {
            self.f.run_queued_worker();
        }
        self.mm.check()?;
        let swap = self
            .f
            .z
            .swap_file(AREA)
            .ok_or("the cache has no swap file")?;
        let mut owned = vec![false; self.mm.swap_slots() as usize];
        let (mut out, mut entries) = (0u64, 0u64);
        for sp in self.spaces.iter().filter(|s| !s.removed) {
            for id in sp.pages(&self.mm) {
                let st = self.mm.page_state(PageId(id));
                let Some(slot) = st.slot else {
                    continue;
                };
                owned[slot as usize] = true;
                let ss = uzswap_zswap::SwapSlot::new(AREA, u64::from(slot));
                let state = self.f.z.slot_state(ss);
                let has_data = match state {
                    Some(uzswap_zswap::SlotState::Stored { .. }) => {
                        entries += 1;
                        true
                    }
                    Some(uzswap_zswap::SlotState::Zero) => true,
                    _ => swap.is_written(ss),
                };
                if !st.present {
                    out += 1;
                }
                if (!st.present || !st.dirty) && !has_data {
                    return Err(format!(
                        "page {id} of {}: {} but slot {slot} holds nothing",
                        sp.name,
                        if st.present {
                            "clean in the swap cache"
                        } else {
                            "swapped out"
                        }
                    ));
                }
            }
        }
        for (slot, o) in owned.iter().enumerate().skip(1) {
            if !o {
                let ss = uzswap_zswap::SwapSlot::new(AREA, slot as u64);
                if let Some(uzswap_zswap::SlotState::Stored { .. }) = self.f.z.slot_state(ss) {
                    return Err(format!("slot {slot} has a pool entry but no page"));
                }
            }
        }
        let stored = self.f.z.counters().stored_pages;
        if stored != entries {
            return Err(format!(
                "stored_pages {stored} but {entries} pages have a pool entry"
            ));
        }
        Ok((out, entries))
    }

    /// Overlap the memory latency of an upcoming access: load its page's flags and content
    /// entry and the TLB sets it looks up into the CPU cache (the cache's work in between
    /// evicts them).
    #[inline]
    pub fn prefetch(&self, ev: &Event) {
        let (cg, page, content) = match *ev {
            Event::Read { cg, page } => (cg, page, None),
            Event::Write { cg, page, content } => (cg, page, Some(content)),
            _ => return,
        };
        self.prefetch_access(cg, page, content);
    }

    /// `prefetch` of an op. Returns the identity of its page if it has a flat one (for
    /// `prefetch_fault` and `apply_op`), else `NO_PAGE`.
    #[inline]
    pub fn prefetch_op(&self, op: Op) -> u32 {
        match op.access() {
            Some((cg, page, Access::Read)) => self.prefetch_access(cg, page, None),
            Some((cg, page, Access::Write(c))) => self.prefetch_access(cg, page, Some(c)),
            None => NONE,
        }
    }

    /// Later stages of `prefetch_op` for an access to page `id` (from `prefetch_op`) that
    /// will fault: its page's record (`swap` false), then its swap slot's state (`swap` true).
    #[inline]
    pub fn prefetch_fault(&self, id: u32, swap: bool) {
        if id != NONE {
            self.mm.prefetch_fault(PageId(id), swap);
        }
    }

    #[inline]
    fn prefetch_access(&self, cg: u32, page: u64, content: Option<Content>) -> u32 {
        let Some(s) = self.spaces.get(cg as usize) else {
            return NONE;
        };
        if let Some(t) = &s.tlb {
            t.prefetch(page);
            if let Some(Content::Page(i)) = content {
                t.prefetch(self.source_tag(i % (ZERO - 1)));
            }
        }
        if page < s.span {
            let id = s.base + page as u32;
            self.mm.prefetch(PageId(id));
            if let Some(c) = self.f.content.get(id as usize) {
                uzswap_mm::prefetch(std::ptr::from_ref(c).cast());
            }
            id
        } else {
            NONE
        }
    }

    fn sample(&mut self) {
        let c = self.f.z.counters();
        let st = self.mm.stats();
        self.timeline.push(Sample {
            events: self.events,
            t_s: self.started.elapsed().as_secs_f64(),
            pool_total_size: c.pool_total_size,
            stored_pages: c.stored_pages,
            written_back_pages: c.written_back_pages,
            zswpout: c.zswpout,
            zswpin: c.zswpin,
            pswpout: c.pswpout,
            pswpin: c.pswpin,
            resident_pages: st.resident_pages,
        });
    }

    /// Finish: the report of everything replayed so far.
    pub fn report(&mut self, workload: &str) -> Result<Report, ReplayError> {
        self.f.run_queued_worker();
        let elapsed = self.started.elapsed().as_secs_f64();
        // Nanoseconds per tick over the whole replay.
        let ticks = ticks::now().saturating_sub(self.started_ticks).max(1);
        let ns_per_tick = elapsed * 1e9 / ticks as f64;
        if self.opts.timeline_every > 0 {
            self.sample();
        }
        if let Some(m) = &self.f.first_mismatch {
            return Err(ReplayError::Verify(format!(
                "{} pages read back wrong; first: {m}",
                self.f.mismatches
            )));
        }
        let cache_s = self.f.cache_ticks as f64 * ns_per_tick / 1e9;
        let verify_s = self.f.verify_ticks as f64 * ns_per_tick / 1e9;
        let engine_s = (elapsed - cache_s - verify_s).max(0.0);
        let counters = self.f.z.counters();
        let st = self.mm.stats();
        let total_events = self.events.max(1) as f64;
        let zc = counters.cgroups.clone();
        // Each live cgroup's counts with its live descendants' (children come after parents).
        let mut total: Vec<PerCg> = vec![PerCg::default(); self.spaces.len()];
        for (i, s) in self.spaces.iter().enumerate().skip(1).rev() {
            if s.removed {
                continue;
            }
            total[i] += self.f.pc[s.mem.0 as usize];
            if s.parent != 0 {
                let t = total[i];
                total[s.parent] += t;
            }
        }
        let all_stats = self.mm.cgroup_stats();
        let mut cgroups = Vec::new();
        for (i, s) in self.spaces.iter().enumerate().skip(1) {
            if s.removed {
                continue;
            }
            let pc = total[i];
            let zid = self.f.zcg[s.mem.0 as usize];
            let z = zc.iter().find(|c| c.id == zid.0);
            let ms = all_stats.iter().find(|c| c.id == s.mem);
            cgroups.push(CgroupReport {
                name: s.name.clone(),
                elapsed_s: (pc.cache_ticks as f64 * ns_per_tick + pc.model_ns as f64) / 1e9
                    + engine_s * pc.events as f64 / total_events,
                counters: crate::report::cgroup_counters(&pc_view(&pc), z, ms),
            });
        }
        let mut r = Report::new(
            workload,
            elapsed,
            engine_s,
            cache_s,
            &counters,
            &st,
            cgroups,
            &self.f.z.pool_stats(),
            self.events,
            self.reclaim_eagain,
            self.limit_ebusy,
            std::mem::take(&mut self.timeline),
        );
        r.verify_s = verify_s;
        Ok(r)
    }
}

fn pc_view(p: &PerCg) -> crate::report::FrontCounts {
    crate::report::FrontCounts {
        zswpout: p.zswpout,
        zswpin: p.zswpin,
        pswpout: p.pswpout,
        pswpin: p.pswpin,
        swpout_zero: p.swpout_zero,
        swpin_zero: p.swpin_zero,
    }
}

/// The clock that times the calls into the cache: ticks of the CPU's time-stamp counter on
/// x86-64 (invariant on this machine, its kernel's clocksource), cheaper to read than
/// `Instant::now` through the vDSO (about 25 ns here), twice per call into the cache; converted to nanoseconds with the rate measured over the whole replay
/// (`Replay::report`). Elsewhere, nanoseconds since the first reading. Differences saturate at
/// zero: a thread that moved to a CPU whose counter lags counts nothing rather than 2^64.
mod ticks {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub fn now() -> u64 {
        // RDTSCP, not RDTSC: it waits for every earlier instruction to finish, so a reading
        // taken after a call into the cache does not run ahead of the call's last loads (an
        // unordered RDTSC moved tens of milliseconds of `scan`'s cache time to the engine).
        let mut aux = 0u32;
        // SAFETY: RDTSCP has no preconditions; it reads the time-stamp counter and
        // IA32_TSC_AUX into `aux`, a valid local.
        unsafe { std::arch::x86_64::__rdtscp(&mut aux) }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn now() -> u64 {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::{FastMod, Tlb};

    #[test]
    fn fastmod_is_the_remainder() {
        let mut x = 1u64;
        for d in [
            1u32,
            2,
            3,
            7,
            4096,
            8191,
            8192,
            65537,
            u32::MAX - 1,
            u32::MAX,
        ] {
            let f = FastMod::new(d);
            for v in [0u32, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1] {
                assert_eq!(f.rem(v), v % d, "{v} % {d}");
            }
            for _ in 0..10_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 32) as u32;
                assert_eq!(f.rem(v), v % d, "{v} % {d}");
            }
        }
    }

    /// The nibble-age TLB is an exact 16-way LRU: compare with a plain list model.
    #[test]
    fn tlb_is_an_lru_per_set() {
        let mut t = Tlb::new(64).unwrap(); // 4 sets of 16
        let mut model: Vec<Vec<u64>> = vec![Vec::new(); 4];
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let tag = (x >> 40) % 96;
            let set = &mut model[(tag & 3) as usize];
            let want = match set.iter().position(|&v| v == tag) {
                Some(i) => {
                    set.remove(i);
                    true
                }
                None => {
                    if set.len() == 16 {
                        set.pop();
                    }
                    false
                }
            };
            set.insert(0, tag);
            assert_eq!(t.access(tag), want, "tag {tag}");
        }
    }
}
