// SPDX-License-Identifier: MIT
//! uzswap-mm: the reclaim engine of `uzswap replay`. It decides, as Linux 6.18 does for
//! anonymous memory in a memory-limited cgroup (classic LRU, not MGLRU), which page leaves
//! memory, when, and what the swap layer does on the way out and in. The *front* (replay's
//! simulated page table) supplies the accesses and performs the data movement (store in the
//! cache, write to the swap device, load back) through the `Front` trait. The pager of
//! `uzswap run` keeps its own engine (per-page atomics on every faulting thread, where this one
//! is single-threaded and told of every access; docs/pager.md, "Victim selection"); the traces
//! it records with `--record-trace` replay through this one.
//!
//! **Owns**
//! - page identities ([`PageId`]) and their state: resident or not, mapped, active/inactive,
//!   the PTE accessed bit and PG_referenced, dirty, PG_workingset, PG_readahead, swap slot;
//! - memory cgroups ([`MemCg`]): the page counter (memory.max) covering resident pages and
//!   charged kernel memory (page tables), plus the cgroup's share of the compressed pool in
//!   cgroup-v2 accounting ([`Accounting::V2`]; v1 does not charge it, "memcg: zswap: charge
//!   compressed pages to the memcg" is cgroup-v2 only); the charge → reclaim → retry loop of
//!   `try_charge_memcg` with `MAX_RECLAIM_RETRIES`;
//! - reclaim (`try_to_free_mem_cgroup_pages`): priorities 12..0, `SWAP_CLUSTER_MAX` batches,
//!   `get_scan_count`'s swappiness/cost fraction, `shrink_lruvec`'s stop rule, the
//!   inactive/active ratio, the two-scan rule of `folio_check_references` (young PTE, then
//!   PG_referenced), deactivation of active anon only on refaults or a low inactive list;
//! - workingset shadows (mm/workingset.c): eviction stamps the reclaim target's
//!   `nonresident_age` into the slot; a refault within the workingset size activates the page
//!   ("mm: workingset: detect anon refaults", 5.9);
//! - the swap layer: slot allocation in 512-slot clusters (rotational device), the swap cache
//!   (read faults keep the slot; clean swap-cache pages drop without I/O; zswap loads are
//!   exclusive, so a page loaded from zswap is dirty and is stored again), cluster readahead
//!   with the kernel's window and its hit accounting (readahead pages from zswap count zswpin
//!   and, unused, cost another zswpout).
//!
//! **API** (single-threaded: one `Mm` per replay, behind the front's lock)
//! - `Mm::new(Config)`; `create_cgroup(parent)`, `remove_cgroup`, `set_limit(cg, pages)`,
//!   `reclaim(cg, pages)` (memory.reclaim), `charge_kernel`/`uncharge_kernel` (non-LRU memory);
//! - `new_page(cg) -> PageId`: a page of `cg`'s address space, not yet present;
//! - `access(page, write, front)`: one access; faults it in (new page, zero page, swap-cache
//!   hit or swap-in with readahead), charging and reclaiming as needed;
//! - `touch(page)`: set the accessed bit of a present page without a fault (a front that can
//!   observe accesses); `access_cached(page, write)`: an access through a cached translation
//!   (no accessed bit, as on x86 after reclaim cleared it without a TLB flush);
//!   `free_page(page, front)`: unmap; `fault_new_page_at` and `free_pages`: a first touch and
//!   the free of a range as one call each (a front with a flat page table: most of a
//!   short-lived process's engine work);
//! - `flush_stats()`: the memcg statistics flush; with `Config::exact_stats` off, the
//!   heuristics that read rstat in the kernel (inactive:active ratio, workingset size, the
//!   refault count that triggers deactivation, the cost decay's LRU size) see the values of the
//!   last flush, as the kernel's do between its 2 s flushes;
//! - [`Front`]: `swap_out` (store, else write to the device), `swap_in`, `free_slot`,
//!   `release` (the page's memory may be dropped), and for v2 `zswap_pages`/`shrink_slab`.
//!   [`cache`] implements the data movement over a `uzswap_zswap::Zswap` with the kernel's
//!   semantics (exclusive loads for pool entries, disk and zero-map data kept until the slot
//!   is freed), so a front only maps page identities to memory.
//!
//! **Data layout**: structure of arrays indexed by `PageId`: 2 bytes of flags per page (all
//! that an access to a mapped page touches, so a large footprint's accesses stay in the CPU's
//! cache) and a 16-byte record (LRU links inside, no allocation per move; swap slot;
//! cgroup); a front may place identities itself (`new_page_at`: a flat page table). Cgroups
//! are a vector indexed by `MemCg`; the swap area a vector of 4-byte slot owners, one of
//! 8-byte shadows, and 16-byte cluster records. Memory is proportional to the pages and
//! slots in use, never to the number of accesses.
//!
//! **Lock order**: none inside; the caller serialises calls (the front calls back into nothing
//! of the engine's while it is inside a `Front` method).

pub mod cache;
mod cgroup;
mod fault;
mod page;
mod reclaim;
mod swap;

use serde::Serialize;

use cgroup::Memcg;
pub use cgroup::MemcgEvents;
use page::{f, List, Pages, NIL};
use swap::{Readahead, SwapArea};

pub use uzswap_types::PAGE_SIZE;
/// `MAX_RECLAIM_RETRIES` (mm/internal.h).
pub const MAX_RECLAIM_RETRIES: u32 = 16;
/// `SWAP_CLUSTER_MAX`: reclaim's batch.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// `DEF_PRIORITY`: reclaim scans `size >> priority` pages per list, from 12 down to 0.
pub const DEF_PRIORITY: u32 = 12;

/// A page identity (an index the front keeps in its page table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId(pub u32);

/// A memory cgroup of the engine. `MemCg::ROOT` always exists and has no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct MemCg(pub u16);

impl MemCg {
    pub const ROOT: MemCg = MemCg(0);
}

/// What the memory counter covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub enum Accounting {
    /// cgroup v2: resident pages, kernel memory and the compressed pool's share
    /// (`memory.zswap.current`) count against memory.max; memory.zswap.max/writeback and
    /// memory.reclaim exist; zswap's memory-pressure shrinker runs from reclaim.
    #[default]
    V2,
    /// cgroup v1 (`memory.limit_in_bytes`): the pool is not charged, the dynamic shrinker is
    /// inert, memory.reclaim does not exist.
    V1,
}

impl std::str::FromStr for Accounting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "v2" => Ok(Accounting::V2),
            "v1" => Ok(Accounting::V1),
            _ => Err(format!("cgroup accounting {s:?}: expected v1 or v2")),
        }
    }
}

/// Engine settings (the kernel's defaults, except the swap size which is the front's).
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub accounting: Accounting,
    /// Slots of the swap area (slot 0 is its header; rounded down to 512-slot clusters).
    pub swap_slots: u32,
    /// vm.page-cluster: readahead reads up to `1 << page_cluster` slots (3).
    pub page_cluster: u32,
    /// vm.swappiness, inherited by new cgroups (60).
    pub swappiness: u32,
    /// Cluster readahead on swap-in (a swap file on a rotational disk, as on this machine's
    /// vda); `false` models a `SWP_SYNCHRONOUS_IO` device (zram), which skips the swap cache
    /// and readahead.
    pub readahead: bool,
    /// Statistics read through rstat (list sizes for the inactive:active ratio, the
    /// workingset size of refaults, the refault count that triggers deactivation, the LRU size
    /// of cost decay) are exact (`true`), or as of the last `Mm::flush_stats` (`false`): the
    /// kernel flushes them every 2 s (`FLUSH_TIME`) and its readers use the flushed values.
    pub exact_stats: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            accounting: Accounting::V2,
            swap_slots: 1 << 20,
            page_cluster: 3,
            swappiness: 60,
            readahead: true,
            exact_stats: true,
        }
    }
}

/// Where a page went when written out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOut {
    /// Stored by the cache (zswpout).
    Zswap,
    /// A zero-filled page: recorded without data (swpout_zero).
    Zero,
    /// Rejected by the cache and written to the swap device (pswpout); the folio is freed by a
    /// later scan once the write completes, as after `__swap_writepage`.
    Disk,
    /// Nowhere: the cache refused and the cgroup may not write to the device
    /// (memory.zswap.writeback = 0, `AOP_WRITEPAGE_ACTIVATE`); the page is activated.
    Refused,
}

/// Where a page's data came from when read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadIn {
    /// From the compressed pool (zswpin); the entry is gone, so the page is dirty.
    Zswap,
    /// From the zero map (swpin_zero).
    Zero,
    /// From the swap device (pswpin); the block stays, so the page is clean.
    Disk,
}

/// What an access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The page was mapped: no fault.
    None,
    /// A read of a never-written page mapped the zero page.
    ZeroMap,
    /// A write to a never-written (or zero-mapped) page allocated a new page.
    Anon,
    /// A minor fault on a page still in the swap cache (readahead or not yet freed).
    SwapCache,
    /// A major fault: the page was read in.
    Major(ReadIn),
}

/// Errors of the engine and of the front's data movement.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("out of memory in cgroup {0}: no reclaimable page after {MAX_RECLAIM_RETRIES} retries (the kernel would OOM-kill)")]
    Oom(u16),
    #[error("no cgroup {0}")]
    NoSuchCgroup(u16),
    #[error("cgroup {0} still has pages or children")]
    CgroupBusy(u16),
    #[error("page {0} was freed")]
    DeadPage(u32),
    #[error("page {0} already exists")]
    LivePage(u32),
    /// memory.reclaim fell short (EAGAIN).
    #[error("memory.reclaim of cgroup {cg}: reclaimed {reclaimed} of {requested} pages (EAGAIN)")]
    Again {
        cg: u16,
        requested: u64,
        reclaimed: u64,
    },
    /// A lower v1 limit could not be reached (EBUSY).
    #[error("cgroup {0}: usage stays above the new limit (EBUSY)")]
    Busy(u16),
    /// The front failed to move a page (I/O error, corrupt data).
    #[error("{0}")]
    Front(String),
}

/// Data movement and cache queries the engine needs from its front.
pub trait Front {
    /// Write resident page `page` of `cg` out to swap slot `slot` (store it in the cache, or
    /// write it to the swap device if the cache refuses).
    fn swap_out(&mut self, page: PageId, slot: u32, cg: MemCg) -> Result<WriteOut, Error>;
    /// Read slot `slot` into `page` (a fault or a readahead).
    fn swap_in(&mut self, page: PageId, slot: u32, cg: MemCg) -> Result<ReadIn, Error>;
    /// `page`'s memory is no longer needed: it was reclaimed (its data is in its slot) or freed.
    fn release(&mut self, _page: PageId) {}
    /// Slot `slot` is free: drop what the cache and the device hold for it.
    fn free_slot(&mut self, slot: u32);
    /// The compressed memory charged to `cg` and its descendants, in pages rounded up
    /// (memory.zswap.current); only asked in cgroup-v2 accounting.
    fn zswap_pages(&self, _cg: MemCg) -> u64 {
        0
    }
    /// Run zswap's memory-pressure shrinker for `cg` at reclaim priority `priority`
    /// (`shrink_slab` from `shrink_node_memcgs`); only called in cgroup-v2 accounting.
    fn shrink_slab(&mut self, _cg: MemCg, _priority: u32) {}
}

/// Engine-wide counters (the kernel's vmstat names where one exists).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MmStats {
    pub pgfault: u64,
    pub pgmajfault: u64,
    pub pgscan_anon: u64,
    pub pgsteal_anon: u64,
    pub pgactivate: u64,
    pub pgdeactivate: u64,
    pub pgrefill: u64,
    pub workingset_refault_anon: u64,
    pub workingset_activate_anon: u64,
    pub workingset_restore_anon: u64,
    pub swap_ra: u64,
    pub swap_ra_hit: u64,
    /// Dirty pages written out (`nr_pageout`): stores, device writes and zero pages.
    pub pageout: u64,
    /// Clean swap-cache pages dropped without I/O.
    pub clean_drops: u64,
    /// Reclaim invocations (`try_to_free_mem_cgroup_pages`).
    pub reclaim_runs: u64,
    pub oom: u64,
    /// Periodic statistics flushes (`Mm::flush_stats`).
    pub stats_flushes: u64,
    /// Resident pages now (charged folios).
    pub resident_pages: u64,
    /// Swap slots in use now.
    pub swap_used: u64,
    /// Page identities alive now.
    pub pages: u64,
}

/// A cgroup's state and counters.
#[derive(Clone, Debug, Serialize)]
pub struct CgroupStats {
    pub id: MemCg,
    pub parent: Option<MemCg>,
    /// Pages charged (subtree; without the compressed share).
    pub usage_pages: u64,
    pub limit_pages: Option<u64>,
    pub inactive_anon: u64,
    pub active_anon: u64,
    pub events: MemcgEvents,
}

/// The engine.
pub struct Mm {
    cfg: Config,
    pages: Pages,
    cgs: Vec<Memcg>,
    swap: SwapArea,
    ra: Readahead,
    st: MmStats,
    /// Reused isolation buffer of reclaim.
    iso: Vec<u32>,
    /// Front failures met by reclaim (the page stays in memory); the first is reported by the
    /// call that triggered the reclaim.
    front_errors: u64,
    last_front_error: Option<Error>,
}

/// No cgroup (a run of `free_pages` not started).
const NIL_CG: u16 = u16::MAX;

/// Shadow entry packing: valid bit, PG_workingset, memcg, eviction age.
const SHADOW_AGE_BITS: u32 = 46;
const AGE_MASK: u64 = (1 << SHADOW_AGE_BITS) - 1;

fn pack_shadow(memcg: u16, age: u64, workingset: bool) -> u64 {
    1 | (u64::from(workingset) << 1) | (u64::from(memcg) << 2) | ((age & AGE_MASK) << 18)
}

fn unpack_shadow(s: u64) -> (u16, u64, bool) {
    (((s >> 2) & 0xffff) as u16, s >> 18, s & 2 != 0)
}

impl Mm {
    /// An engine with only the root cgroup.
    pub fn new(cfg: Config) -> Mm {
        let mut root = Memcg::new(0);
        root.swappiness = cfg.swappiness;
        Mm {
            swap: SwapArea::new(cfg.swap_slots),
            cfg,
            pages: Pages::default(),
            cgs: vec![root],
            ra: Readahead::default(),
            st: MmStats::default(),
            iso: Vec::with_capacity(SWAP_CLUSTER_MAX as usize),
            front_errors: 0,
            last_front_error: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Slots of the swap area (after rounding to clusters).
    pub fn swap_slots(&self) -> u32 {
        self.swap.nr_slots()
    }

    fn cg(&self, cg: MemCg) -> Result<&Memcg, Error> {
        self.cgs
            .get(cg.0 as usize)
            .filter(|c| c.online)
            .ok_or(Error::NoSuchCgroup(cg.0))
    }

    /// A new cgroup under `parent`, inheriting its swappiness.
    pub fn create_cgroup(&mut self, parent: MemCg) -> Result<MemCg, Error> {
        let sw = self.cg(parent)?.swappiness;
        // u16::MAX stays free: it marks "no cgroup" inside the engine.
        let id = u16::try_from(self.cgs.len())
            .ok()
            .filter(|&i| i < u16::MAX)
            .ok_or(Error::NoSuchCgroup(u16::MAX))?;
        let mut c = Memcg::new(parent.0);
        c.swappiness = sw;
        self.cgs.push(c);
        self.cgs[parent.0 as usize].children.push(id);
        Ok(MemCg(id))
    }

    /// Remove a cgroup that has no pages, charges or live children left.
    pub fn remove_cgroup(&mut self, cg: MemCg) -> Result<(), Error> {
        let c = self.cg(cg)?;
        if cg == MemCg::ROOT
            || c.usage > 0
            || c.inactive.len + c.active.len > 0
            || c.children.iter().any(|&k| self.cgs[k as usize].online)
        {
            return Err(Error::CgroupBusy(cg.0));
        }
        self.cgs[cg.0 as usize].online = false;
        let parent = self.cgs[cg.0 as usize].parent as usize;
        self.cgs[parent].children.retain(|&k| k != cg.0);
        Ok(())
    }

    /// vm.swappiness / memory.swappiness of one cgroup (0 disables swap for its limit).
    pub fn set_swappiness(&mut self, cg: MemCg, swappiness: u32) -> Result<(), Error> {
        self.cg(cg)?;
        self.cgs[cg.0 as usize].swappiness = swappiness.min(200);
        Ok(())
    }

    /// Set memory.max in pages (`None`: no limit). Lowering it reclaims down to the new limit:
    /// cgroup v1 gives up with `Busy` (EBUSY) once a reclaim run makes no progress, as
    /// `mem_cgroup_resize_max` does; v2 sets the limit first and reclaims with up to
    /// `MAX_RECLAIM_RETRIES` fruitless runs (the kernel would then OOM-kill; here the usage
    /// simply stays above the limit).
    pub fn set_limit<F: Front>(
        &mut self,
        cg: MemCg,
        pages: Option<u64>,
        front: &mut F,
    ) -> Result<(), Error> {
        self.cg(cg)?;
        let Some(max) = pages else {
            self.cgs[cg.0 as usize].limit = None;
            return Ok(());
        };
        match self.cfg.accounting {
            Accounting::V1 => loop {
                if self.usage(cg.0, front) <= max {
                    self.cgs[cg.0 as usize].limit = Some(max);
                    return Ok(());
                }
                if self.try_to_free(cg.0, 1, true, front) == 0 {
                    return Err(Error::Busy(cg.0));
                }
            },
            Accounting::V2 => {
                self.cgs[cg.0 as usize].limit = Some(max);
                let mut retries = MAX_RECLAIM_RETRIES;
                loop {
                    let usage = self.usage(cg.0, front);
                    if usage <= max {
                        return Ok(());
                    }
                    if self.try_to_free(cg.0, usage - max, true, front) == 0 {
                        retries -= 1;
                        if retries == 0 {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// memory.reclaim: reclaim `pages` from `cg`'s subtree in batches of a quarter of what
    /// remains (at least `SWAP_CLUSTER_MAX`); `Again` after `MAX_RECLAIM_RETRIES` fruitless
    /// batches, as `user_proactive_reclaim` returns -EAGAIN.
    pub fn reclaim<F: Front>(
        &mut self,
        cg: MemCg,
        pages: u64,
        front: &mut F,
    ) -> Result<u64, Error> {
        self.cg(cg)?;
        let mut done = 0;
        let mut retries = MAX_RECLAIM_RETRIES;
        while done < pages {
            let batch = ((pages - done) / 4).max(SWAP_CLUSTER_MAX);
            let r = self.try_to_free_inner(cg.0, batch, true, true, front);
            if r == 0 {
                retries -= 1;
                if retries == 0 {
                    return Err(Error::Again {
                        cg: cg.0,
                        requested: pages,
                        reclaimed: done,
                    });
                }
            }
            done += r;
        }
        Ok(done)
    }

    /// Charge `nr` pages of non-LRU memory (page tables, kernel objects) to `cg`, reclaiming
    /// as a normal charge does.
    pub fn charge_kernel<F: Front>(
        &mut self,
        cg: MemCg,
        nr: u64,
        front: &mut F,
    ) -> Result<(), Error> {
        self.cg(cg)?;
        let r = self.try_charge(cg.0, nr, front);
        self.front_error(r)
    }

    /// Give back non-LRU memory charged with `charge_kernel`.
    pub fn uncharge_kernel(&mut self, cg: MemCg, nr: u64) {
        self.uncharge(cg.0, nr);
    }

    /// A new page identity in `cg`'s address space; not present until accessed.
    pub fn new_page(&mut self, cg: MemCg) -> Result<PageId, Error> {
        self.cg(cg)?;
        let id = self.pages.alloc(cg.0);
        self.st.pages += 1;
        Ok(id)
    }

    /// Like `new_page`, with the identity chosen by the front (a front with a flat page table
    /// uses its page numbers, saving a lookup per access). `page` must not be live; identities
    /// `new_page` hands out never collide with placed ones.
    pub fn new_page_at(&mut self, cg: MemCg, page: PageId) -> Result<PageId, Error> {
        self.cg(cg)?;
        if self.is_live(page) {
            return Err(Error::LivePage(page.0));
        }
        self.pages.alloc_at(page.0, cg.0);
        self.st.pages += 1;
        Ok(page)
    }

    /// `new_page_at` and the page's first `access` in one step (a front's first touch of a
    /// page it places): the zero page on a read, a new charged page on a write.
    pub fn fault_new_page_at<F: Front>(
        &mut self,
        cg: MemCg,
        page: PageId,
        write: bool,
        front: &mut F,
    ) -> Result<Fault, Error> {
        // `new_page_at` then `fault`, without the general path's checks of a page that has
        // never been present: a first touch is most faults of short-lived processes.
        self.cg(cg)?;
        if self.is_live(page) {
            return Err(Error::LivePage(page.0));
        }
        self.pages.alloc_at(page.0, cg.0);
        self.st.pages += 1;
        self.st.pgfault += 1;
        self.cgs[cg.0 as usize].ev.pgfault += 1;
        let r = self.anon_fault(page.0, cg.0, write, front);
        self.front_error(r)
    }

    /// Make the records of page identities below `n` (not live; a front that places them
    /// knows its span), so that placing them later reallocates nothing.
    pub fn reserve_pages(&mut self, n: usize) {
        self.pages.reserve(n);
    }

    /// True if `page` exists (made by `new_page` or `new_page_at`, not freed since).
    #[inline]
    pub fn is_live(&self, page: PageId) -> bool {
        self.pages
            .flags
            .get(page.0 as usize)
            .is_some_and(|&fl| fl & f::LIVE != 0)
    }

    /// Start loading `page`'s state into the CPU cache (a front that knows its next accesses
    /// overlaps their memory latency). No effect on the engine's state.
    #[inline]
    pub fn prefetch(&self, page: PageId) {
        if let Some(p) = self.pages.flags.get(page.0 as usize) {
            prefetch(std::ptr::from_ref(p).cast());
        }
    }

    /// The next stage of `prefetch`, a few accesses later (when `page`'s flags are cached):
    /// if the access will fault, start loading the page's record (LRU links, slot) and, once
    /// that is cached (`swap`: a later call), its swap slot's owner and shadow. No effect on
    /// the engine's state.
    #[inline]
    pub fn prefetch_fault(&self, page: PageId, swap: bool) {
        let i = page.0 as usize;
        let Some(&fl) = self.pages.flags.get(i) else {
            return;
        };
        if fl & (f::PRESENT | f::MAPPED) == f::PRESENT | f::MAPPED || fl & f::LIVE == 0 {
            return;
        }
        let r = &self.pages.rec[i];
        if !swap {
            prefetch(std::ptr::from_ref(r).cast());
        } else if fl & f::PRESENT == 0 && r.slot != 0 {
            let s = r.slot as usize;
            if let (Some(o), Some(sh)) = (self.swap.owners.get(s), self.swap.shadows.get(s)) {
                prefetch(std::ptr::from_ref(o).cast());
                prefetch(std::ptr::from_ref(sh).cast());
            }
        }
    }

    /// The cgroup a page belongs to.
    pub fn page_cgroup(&self, page: PageId) -> MemCg {
        MemCg(self.pages.cg(page.0))
    }

    /// Set the accessed bit of a present, mapped page (a front that observes accesses without
    /// faults, e.g. by sampling PTEs). No effect otherwise.
    #[inline]
    pub fn touch(&mut self, page: PageId) {
        let fl = self.pages.flags_mut(page.0);
        if *fl & (f::PRESENT | f::MAPPED) == f::PRESENT | f::MAPPED {
            *fl |= f::YOUNG;
        }
    }

    /// An access through a cached translation (a TLB hit): the page is mapped and the CPU
    /// does not walk the page table, so the PTE's accessed bit is not set again (x86 sets it
    /// only on a walk, and `ptep_clear_flush_young` clears it without flushing the TLB, so
    /// reclaim can miss such accesses). A write still dirties the page. Returns false if the
    /// page is not mapped (then the caller must fault it in with `access`).
    #[inline]
    pub fn access_cached(&mut self, page: PageId, write: bool) -> bool {
        self.access_mapped(page, write, true)
    }

    /// The access of a mapped page, reading and writing only its flags: the accessed bit is
    /// set unless the translation was `cached` (see `access_cached`), the dirty bit on a
    /// write. Returns false, changing nothing, if the page is not mapped (then the caller
    /// must fault it in with `access`).
    #[inline]
    pub fn access_mapped(&mut self, page: PageId, write: bool, cached: bool) -> bool {
        let Some(fl) = self.pages.flags.get_mut(page.0 as usize) else {
            return false;
        };
        if *fl & (f::PRESENT | f::MAPPED) != f::PRESENT | f::MAPPED {
            return false;
        }
        *fl |= (if write { f::DIRTY } else { 0 }) | (if cached { 0 } else { f::YOUNG });
        true
    }

    /// True if `page` is mapped by a PTE (a translation may be cached for it).
    #[inline]
    pub fn is_mapped(&self, page: PageId) -> bool {
        self.pages.has(page.0, f::PRESENT | f::MAPPED)
    }

    /// One access to `page`. A mapped page only gets its accessed (and dirty) bit; otherwise
    /// this is the fault path: the zero page, a new page, a swap-cache hit or a swap-in with
    /// readahead, charging (and reclaiming) as the kernel does.
    #[inline]
    pub fn access<F: Front>(
        &mut self,
        page: PageId,
        write: bool,
        front: &mut F,
    ) -> Result<Fault, Error> {
        if self.access_mapped(page, write, false) {
            return Ok(Fault::None);
        }
        if !self.pages.has(page.0, f::LIVE) {
            return Err(Error::DeadPage(page.0));
        }
        let r = self.fault(page.0, write, front);
        self.front_error(r)
    }

    /// Surface a front failure met during reclaim.
    fn front_error<T>(&mut self, r: Result<T, Error>) -> Result<T, Error> {
        match self.last_front_error.take() {
            Some(e) => Err(e),
            None => r,
        }
    }

    /// Front failures reclaim met so far (each left its page in memory).
    pub fn front_errors(&self) -> u64 {
        self.front_errors
    }

    /// Unmap a page and forget it: its memory is uncharged, its slot (and the cache's copy)
    /// freed. The identity may be reused by `new_page`.
    pub fn free_page<F: Front>(&mut self, page: PageId, front: &mut F) {
        self.free_pages(&[page.0], front);
    }

    /// `free_page` of each of `pages` in order (the front sees the same calls in the same
    /// order), with the page counters and list sizes of their cgroups updated once per run of
    /// pages of one cgroup instead of once per page (a process exiting frees its whole range).
    pub fn free_pages<F: Front>(&mut self, pages: &[u32], front: &mut F) {
        // The current run: its cgroup, pages uncharged, pages off the inactive and the active
        // list.
        let mut run = (NIL_CG, 0u64, 0u64, 0u64);
        for &id in pages {
            let p = self.pages.get(id);
            if !p.has(f::LIVE) {
                continue;
            }
            if p.cg != run.0 {
                self.settle_freed(run);
                run = (p.cg, 0, 0, 0);
            }
            if p.has(f::PRESENT) {
                if !p.has(f::ISOLATED) {
                    let active = p.has(f::ACTIVE);
                    let c = &mut self.cgs[p.cg as usize];
                    if active {
                        c.active.remove(&mut self.pages, id);
                        run.3 += 1;
                    } else {
                        c.inactive.remove(&mut self.pages, id);
                        run.2 += 1;
                    }
                }
                run.1 += 1;
                self.st.resident_pages -= 1;
                front.release(PageId(id));
            }
            if p.slot != 0 {
                self.free_slot(id, front);
            }
            self.pages.release(PageId(id));
            self.st.pages -= 1;
        }
        self.settle_freed(run);
    }

    /// The counter updates of one run of `free_pages`.
    fn settle_freed(&mut self, (cg, uncharged, inactive, active): (u16, u64, u64, u64)) {
        if cg == NIL_CG {
            return;
        }
        if inactive > 0 {
            self.sub_lru(cg, false, -(inactive as i64));
        }
        if active > 0 {
            self.sub_lru(cg, true, -(active as i64));
        }
        if uncharged > 0 {
            self.uncharge(cg, uncharged);
        }
    }

    /// The periodic rstat flush: statistics readers see the subtree figures as of now (only
    /// matters with `Config::exact_stats` off).
    pub fn flush_stats(&mut self) {
        self.st.stats_flushes += 1;
        for c in &mut self.cgs {
            c.flushed = [c.sub_inactive, c.sub_active, c.sub_activate];
        }
    }

    /// (inactive, active, activations) of `cg`'s subtree as rstat readers see them.
    #[inline]
    pub(crate) fn rstat(&self, cg: u16) -> (u64, u64, u64) {
        let c = &self.cgs[cg as usize];
        if self.cfg.exact_stats {
            (c.sub_inactive, c.sub_active, c.sub_activate)
        } else {
            (c.flushed[0], c.flushed[1], c.flushed[2])
        }
    }

    /// Engine counters.
    pub fn stats(&self) -> MmStats {
        let mut s = self.st;
        s.swap_used = self.swap.used;
        s
    }

    /// Every cgroup alive, root first.
    pub fn cgroup_stats(&self) -> Vec<CgroupStats> {
        self.cgs
            .iter()
            .enumerate()
            .filter(|(_, c)| c.online)
            .map(|(i, c)| CgroupStats {
                id: MemCg(i as u16),
                parent: (i != 0).then_some(MemCg(c.parent)),
                usage_pages: c.usage,
                limit_pages: c.limit,
                inactive_anon: c.inactive.len,
                active_anon: c.active.len,
                events: self.subtree_events(i as u16),
            })
            .collect()
    }

    fn subtree_events(&self, cg: u16) -> MemcgEvents {
        let mut e = self.cgs[cg as usize].ev;
        for &k in &self.cgs[cg as usize].children {
            let s = self.subtree_events(k);
            e.pgfault += s.pgfault;
            e.pgmajfault += s.pgmajfault;
            e.pgscan += s.pgscan;
            e.pgsteal += s.pgsteal;
            e.pgactivate += s.pgactivate;
            e.pgdeactivate += s.pgdeactivate;
            e.pgrefill += s.pgrefill;
            e.workingset_refault_anon += s.workingset_refault_anon;
            e.workingset_activate_anon += s.workingset_activate_anon;
            e.workingset_restore_anon += s.workingset_restore_anon;
        }
        e
    }

    /// A page's state, for tests and diagnostics.
    pub fn page_state(&self, page: PageId) -> PageState {
        let p = self.pages.get(page.0);
        PageState {
            live: p.has(f::LIVE),
            present: p.has(f::PRESENT),
            mapped: p.has(f::MAPPED),
            zero_mapped: p.has(f::ZERO_MAPPED),
            active: p.has(f::ACTIVE),
            referenced: p.has(f::REFERENCED),
            young: p.has(f::YOUNG),
            dirty: p.has(f::DIRTY),
            workingset: p.has(f::WORKINGSET),
            slot: (p.slot != 0).then_some(p.slot),
        }
    }

    /// Check the engine's invariants (tests): list lengths and links, charges, slot owners.
    pub fn check(&self) -> Result<(), String> {
        let mut resident = vec![0u64; self.cgs.len()];
        for (i, c) in self.cgs.iter().enumerate() {
            for (l, active) in [(&c.inactive, false), (&c.active, true)] {
                let mut n = 0;
                let mut id = l.head;
                let mut prev = NIL;
                while id != NIL {
                    let p = self.pages.get(id);
                    if p.prev != prev {
                        return Err(format!("page {id}: broken prev link"));
                    }
                    if p.cg as usize != i || p.has(f::ACTIVE) != active || !p.has(f::PRESENT) {
                        return Err(format!("page {id} on the wrong list"));
                    }
                    n += 1;
                    prev = id;
                    id = p.next;
                }
                if n != l.len || prev != l.tail {
                    return Err(format!("cgroup {i}: list length {} but {n} linked", l.len));
                }
            }
        }
        for id in 0..self.pages.len() {
            let p = self.pages.get(id as u32);
            if !p.has(f::LIVE) {
                continue;
            }
            if p.has(f::PRESENT) {
                resident[p.cg as usize] += 1;
            }
            if p.slot != 0 && self.swap.owners[p.slot as usize] != id as u32 {
                return Err(format!("page {id}: slot {} owned by another page", p.slot));
            }
            if !p.has(f::PRESENT) && p.slot == 0 && p.any(f::MAPPED | f::ACTIVE) {
                return Err(format!("page {id}: absent but mapped or active"));
            }
        }
        // Usage covers resident pages (plus kernel charges, so >=), summed over subtrees.
        for i in (0..self.cgs.len()).rev() {
            let kids: u64 = self.cgs[i]
                .children
                .iter()
                .map(|&k| resident[k as usize])
                .sum();
            resident[i] += kids;
            if self.cgs[i].online && self.cgs[i].usage < resident[i] {
                return Err(format!(
                    "cgroup {i}: usage {} below its {} resident pages",
                    self.cgs[i].usage, resident[i]
                ));
            }
        }
        Ok(())
    }
}

/// Hint the CPU to load the cache line at `p` (never faults, never reads architecturally).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint: it does not dereference `p` architecturally and cannot fault,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A page's state (see [`Mm::page_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageState {
    pub live: bool,
    pub present: bool,
    pub mapped: bool,
    pub zero_mapped: bool,
    pub active: bool,
    pub referenced: bool,
    pub young: bool,
    pub dirty: bool,
    pub workingset: bool,
    pub slot: Option<u32>,
}

// ---- internals shared by fault and reclaim paths ----

impl Mm {
    /// The page counter of `cg` (subtree), with the compressed share in v2.
    fn usage<F: Front>(&self, cg: u16, front: &F) -> u64 {
        let c = &self.cgs[cg as usize];
        match self.cfg.accounting {
            Accounting::V1 => c.usage,
            Accounting::V2 => c.usage + front.zswap_pages(MemCg(cg)),
        }
    }

    /// The lowest cgroup from `cg` up whose limit `nr` more pages would exceed.
    fn over_limit<F: Front>(&self, cg: u16, nr: u64, front: &F) -> Option<u16> {
        let mut i = cg;
        loop {
            let c = &self.cgs[i as usize];
            if let Some(max) = c.limit {
                if self.usage(i, front) + nr > max {
                    return Some(i);
                }
            }
            if i == 0 {
                return None;
            }
            i = c.parent;
        }
    }

    fn margin<F: Front>(&self, cg: u16, front: &F) -> u64 {
        match self.cgs[cg as usize].limit {
            Some(max) => max.saturating_sub(self.usage(cg, front)),
            None => u64::MAX,
        }
    }

    /// `try_charge_memcg`: charge `nr` pages to `cg` and its ancestors, reclaiming from the
    /// cgroup whose limit is in the way; retry while reclaim makes progress (small charges),
    /// else up to `MAX_RECLAIM_RETRIES` times, then fail (OOM).
    fn try_charge<F: Front>(&mut self, cg: u16, nr: u64, front: &mut F) -> Result<(), Error> {
        let mut retries = MAX_RECLAIM_RETRIES;
        let mut drained = false;
        // Bound the progress-but-no-margin loop (a v2 cgroup whose reclaim only converts
        // pages into equally large raw pool entries).
        let mut spins = 0u32;
        loop {
            let Some(over) = self.over_limit(cg, nr, front) else {
                let mut i = cg;
                loop {
                    self.cgs[i as usize].usage += nr;
                    if i == 0 {
                        break;
                    }
                    i = self.cgs[i as usize].parent;
                }
                return Ok(());
            };
            self.cgs[over as usize].ev.failcnt += 1;
            let reclaimed = self.try_to_free(over, nr, true, front);
            if self.margin(over, front) >= nr {
                continue;
            }
            if !drained {
                drained = true;
                continue;
            }
            spins += 1;
            if reclaimed > 0 && nr <= 8 && spins < 1024 {
                continue;
            }
            if retries == 0 {
                self.cgs[cg as usize].ev.oom += 1;
                self.st.oom += 1;
                return Err(Error::Oom(cg));
            }
            retries -= 1;
        }
    }

    fn uncharge(&mut self, cg: u16, nr: u64) {
        let mut i = cg;
        loop {
            let c = &mut self.cgs[i as usize];
            c.usage = c.usage.saturating_sub(nr);
            if i == 0 {
                break;
            }
            i = c.parent;
        }
    }

    /// Add a present page to its cgroup's inactive or active list, at the head or the tail.
    fn lru_add(&mut self, id: u32, active: bool, tail: bool) {
        let cg = self.pages.cg(id);
        {
            let mut p = self.pages.get_mut(id);
            if active {
                p.set(f::ACTIVE);
            } else {
                p.clear(f::ACTIVE);
            }
        }
        let c = &mut self.cgs[cg as usize];
        let l: &mut List = if active {
            &mut c.active
        } else {
            &mut c.inactive
        };
        if tail {
            l.push_tail(&mut self.pages, id);
        } else {
            l.push_head(&mut self.pages, id);
        }
        self.sub_lru(cg, active, 1);
    }

    fn lru_del(&mut self, id: u32) {
        let p = self.pages.get(id);
        if p.has(f::ISOLATED) {
            return;
        }
        let active = p.has(f::ACTIVE);
        let c = &mut self.cgs[p.cg as usize];
        let l: &mut List = if active {
            &mut c.active
        } else {
            &mut c.inactive
        };
        l.remove(&mut self.pages, id);
        self.sub_lru(p.cg, active, -1);
    }

    fn sub_lru(&mut self, cg: u16, active: bool, d: i64) {
        let mut i = cg;
        loop {
            let c = &mut self.cgs[i as usize];
            let v = if active {
                &mut c.sub_active
            } else {
                &mut c.sub_inactive
            };
            *v = v.wrapping_add_signed(d);
            if i == 0 {
                break;
            }
            i = c.parent;
        }
    }

    /// `workingset_age_nonresident`: advance the clock of `cg` and its ancestors.
    fn age_nonresident(&mut self, cg: u16, nr: u64) {
        let mut i = cg;
        loop {
            let c = &mut self.cgs[i as usize];
            c.nonresident_age += nr;
            if i == 0 {
                break;
            }
            i = c.parent;
        }
    }

    /// `lru_note_cost`: record anon reclaim cost on `cg` and its ancestors, halving both costs
    /// when they exceed a quarter of the LRU.
    fn note_cost(&mut self, cg: u16, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
        if cost == 0 {
            return;
        }
        let mut i = cg;
        loop {
            let (inact, act, _) = self.rstat(i);
            let c = &mut self.cgs[i as usize];
            c.anon_cost += cost;
            let lrusize = inact + act;
            if c.anon_cost + c.file_cost > lrusize / 4 {
                c.anon_cost /= 2;
                c.file_cost /= 2;
            }
            if i == 0 {
                break;
            }
            i = c.parent;
        }
    }

    /// Free a page's slot: the cache's copy and the shadow go too.
    fn free_slot<F: Front>(&mut self, id: u32, front: &mut F) {
        let slot = self.pages.slot(id);
        if slot == 0 {
            return;
        }
        self.pages.set_slot(id, 0);
        self.swap.free(slot);
        front.free_slot(slot);
    }

    /// `workingset_refault` for page `id` entering memory with `shadow`. Returns true if it is
    /// to be activated.
    fn refault(&mut self, id: u32, shadow: u64) -> bool {
        let cg = self.pages.cg(id);
        self.cgs[cg as usize].ev.workingset_refault_anon += 1;
        self.st.workingset_refault_anon += 1;
        let (evict_cg, age, ws) = unpack_shadow(shadow);
        let Some(ec) = self.cgs.get(evict_cg as usize).filter(|c| c.online) else {
            return false;
        };
        let distance = ec.nonresident_age.wrapping_sub(age) & AGE_MASK;
        // The anon workingset competes with file pages (none here) and, while swap has room,
        // with the active anon list (`workingset_test_recent`).
        let size = if self.swap.used < self.swap.total {
            self.rstat(evict_cg).1
        } else {
            0
        };
        if distance > size {
            return false;
        }
        self.age_nonresident(cg, 1);
        self.cgs[cg as usize].ev.workingset_activate_anon += 1;
        self.st.workingset_activate_anon += 1;
        let mut i = cg;
        loop {
            self.cgs[i as usize].sub_activate += 1;
            if i == 0 {
                break;
            }
            i = self.cgs[i as usize].parent;
        }
        if ws {
            self.pages.set(id, f::WORKINGSET);
            self.note_cost(cg, 1, 0);
            self.cgs[cg as usize].ev.workingset_restore_anon += 1;
            self.st.workingset_restore_anon += 1;
        }
        true
    }
}
