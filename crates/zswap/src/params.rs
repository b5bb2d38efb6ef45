// SPDX-License-Identifier: MIT
//! Parameters, with the kernel's names and defaults, plus switches for behaviour of upstream patches that today's kernel does not have.

use std::str::FromStr;

use serde::Serialize;
use uzswap_compress::Algorithm;
use uzswap_zsmalloc::ChainRule;

use crate::Error;

/// How the memory-pressure shrinker protects warm entries ("zswap: shrink zswap pool based on memory pressure" (6.8) and its successor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub enum WarmProtection {
    /// Today's kernel (≈6.12+): a referenced bit per entry gives it a second chance, and disk
    /// swap-ins are subtracted from the freeable count.
    #[default]
    SecondChance,
    /// "zswap: shrink zswap pool based on memory pressure" (6.8), in 6.8–6.11: estimate the
    /// number of warm entries per LRU (`nr_zswap_protected`: grows on stores, rotations and
    /// disk swap-ins, decays to half when above a quarter of the list) and never shrink into
    /// that region.
    ProtectedSize,
}

/// How the compressed entries are kept in LRU order: one LRU shared by every compressor pool
/// (today's kernel), or one per pool (before "mm/zswap: global lru and shrinker shared by all
/// zswap_pools", v3, merged in 6.9). Fixed when the cache is created, as `numa_nodes`: the
/// per-(cgroup, node) lists are laid out for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub enum LruMode {
    /// Since 6.9: one set of (cgroup, node) lists for all pools, one memory-pressure shrinker,
    /// one pool-limit shrink worker; writeback takes the coldest entries whatever their pool.
    #[default]
    Global,
    /// 6.8 (and earlier): each compressor pool has its own (cgroup, node) lists and its own
    /// memory-pressure shrinker; every pool's shrinker runs under pressure, with no order
    /// between them. A store over the pool limit queues the shrink work of the last pool of
    /// `zswap_pools` (`zswap_pool_last_get`), the oldest live one, since a new pool is added at
    /// the head; that work keeps its own cgroup cursor but, since "zswap: make shrinking
    /// memcg-aware" (6.8), `shrink_memcg` walks the lists of the *current* pool
    /// (`zswap_pool_current_get`). So after a compressor switch, limit-driven writeback takes
    /// entries of the newest pool only, and the older pools' (colder) entries stay until they
    /// are loaded, invalidated or reached by their pool's memory-pressure shrinker.
    PerPool,
}

impl FromStr for LruMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "global" => Ok(LruMode::Global),
            "per-pool" => Ok(LruMode::PerPool),
            _ => Err(Error::InvalidParam {
                name: "lru",
                value: s.to_string(),
                expected: "global or per-pool",
            }),
        }
    }
}

impl std::fmt::Display for LruMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LruMode::Global => "global",
            LruMode::PerPool => "per-pool",
        })
    }
}

impl FromStr for WarmProtection {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "second-chance" => Ok(WarmProtection::SecondChance),
            "protected-size" => Ok(WarmProtection::ProtectedSize),
            _ => Err(Error::InvalidParam {
                name: "warm_protection",
                value: s.to_string(),
                expected: "second-chance or protected-size",
            }),
        }
    }
}

/// Tunables. `Default` is the kernel's defaults (compressor: lz4, the common distribution
/// choice; the kernel's Kconfig default is lzo), except `proactive_shrink` (see there).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `enabled`: stores are accepted (zero pages are always recorded, as the swap layer does).
    pub enabled: bool,
    /// `compressor`: switching at run time creates a new pool.
    pub compressor: Algorithm,
    /// `max_pool_percent` (20): the pool may hold this percentage of `total_memory_bytes`.
    pub max_pool_percent: u32,
    /// `accept_threshold_percent` (90): after the limit was hit, stores are accepted again once
    /// the pool is back under this percentage of the limit.
    pub accept_threshold_percent: u32,
    /// `shrinker_enabled`: the memory-pressure shrinker may write back (kernel default off).
    pub shrinker_enabled: bool,
    /// zsmalloc chain size (pages per zspage, 4..=16); changing it creates a new pool.
    pub chain_size: usize,
    /// How zsmalloc picks each class's pages per zspage among `1..=chain_size`: the kernel's
    /// rule since 6.3 (`MinWaste`, the default) or the used-percentage rule of "zsmalloc: turn
    /// zspage order into runtime variable" (v3, Oct 2022; `UsedPercent`). Changing it creates
    /// a new pool, as `chain_size` does.
    pub chain_rule: ChainRule,
    /// The memory the percentages refer to (default: MemTotal from /proc/meminfo).
    pub total_memory_bytes: u64,
    /// "mm: zswap: proactive shrinking before pool size limit is hit" (v2, on 6.10-rc6): shrink in
    /// the background from accept threshold + 1% down to the accept
    /// threshold, and reject only at the hard limit. Never merged in the kernel (`false` gives
    /// the kernel's hysteresis); on by default here because it measured 16% fewer cache misses
    /// for an active workload next to a full pool, for twice the writeback of cold pages
    /// (docs/benchmarks/zswap.md, `examples/policy.rs`).
    pub proactive_shrink: bool,
    /// Before ≈6.18 incompressible pages were always rejected; `true` restores that.
    pub reject_compress_poor: bool,
    /// Warm-entry protection used by the memory-pressure shrinker.
    pub warm_protection: WarmProtection,
    /// A store over a cgroup's zswap.max first writes back one entry of that cgroup
    /// synchronously (the kernel's behaviour); `false` rejects at once and has the background
    /// worker write the cgroup's coldest entries back until it is under its limit.
    pub memcg_limit_sync_writeback: bool,
    /// The shrink worker counts a visit that only rotated referenced entries (second chance)
    /// as a failure, as the kernel's `shrink_memcg` returns -EAGAIN for it, so a run stops
    /// after `MAX_RECLAIM_RETRIES` such visits. `false` (the default here) treats rotation as
    /// progress, so one run reaches the accept threshold; `uzswap replay` uses `true` to predict
    /// the kernel.
    pub rotation_is_failure: bool,
    /// Zero-filled pages. `false` (today's kernel): kept without an entry, as the swap core's
    /// zeromap does since "mm: store zero pages to be swapped out in a bitmap" (6.12), counted
    /// as `swpout_zero` / `swpin_zero`. `true`: the behaviour before "mm: zswap: store
    /// zero-filled pages without a zswap_entry" (RFC, Mar 2024): a zero-filled page is a zswap
    /// store like any other (`zswpout` / `zswpin`, `stored_pages`, debugfs
    /// `same_filled_pages`), with a real entry of length 0 (entry metadata, no pool memory, not
    /// on the LRU), and it first passes the cgroup and pool limit checks, as `zswap_store` did
    /// up to 6.9 (so it is rejected while the pool is full or zswap is disabled). Only
    /// zero-filled pages: kernels up to 6.11 also kept pages filled with one non-zero word
    /// this way. May change at run time: slots already kept either way stay valid.
    pub zero_page_entries: bool,
    /// One LRU for all pools, or one per pool (see [`LruMode`]). Fixed when the cache is
    /// created. Per-pool lists are laid out for every pool slot ([`crate::MAX_POOLS`]) of every
    /// cgroup: about 70 KiB per cgroup and node, allocated with the cgroup's chunk.
    pub lru: LruMode,
    /// NUMA nodes the cache keeps LRU lists for (1..=`MAX_NUMA_NODES`; default: the machine's,
    /// `nr_nodes()`). Fixed when the cache is created. `store` uses the calling CPU's node
    /// (folded into the last list if the machine has more); `store_on_node` takes the node, so
    /// an embedder may model other nodes than the host's, e.g. a VMM its guest's.
    pub numa_nodes: usize,
    /// Where a new pool's first memory comes from (user space only; the kernel's zsmalloc
    /// takes pages from the page allocator): `true` (the default), one transparent huge page
    /// faulted in at the pool's first store, so that a pool filling from empty does not fault
    /// 4 KiB at a time until the arena's prefault thread takes over (an empty cache's stores
    /// ran 2-3 % slower that way, BENCHMARKS.md); `false`, 4 KiB pages faulted in as zspages
    /// are carved, for many small caches (one per process under `uzswap run`), each of which
    /// would otherwise have up to 2 MiB resident from its first store. Read when a pool is
    /// created: with the cache, and when a new compressor or chain size makes a new one.
    pub huge_first_chunk: bool,
    /// 2 MiB chunks a background thread keeps faulted in ahead of a growing pool (default 2),
    /// so that its stores wait for neither the kernel nor the hypervisor to back new memory.
    /// They are resident but hold no zspage: 0 for an embedder that charges the pool's pages
    /// against a budget and wants its RSS to follow them (`uzswap run` with SIZE covering the
    /// pool); the storing thread then faults new chunks in itself. Read when a pool is created.
    pub pool_prefault_chunks: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params::for_machine(mem_total_bytes().unwrap_or(1 << 30), crate::nr_nodes())
    }
}

impl Params {
    /// The defaults, for a machine with this much memory and this many NUMA nodes, given
    /// instead of read from the system (`Default` reads them: /proc and /sys, tens of
    /// microseconds, which every process of a `uzswap run` tree would pay).
    pub fn for_machine(total_memory_bytes: u64, numa_nodes: usize) -> Params {
        Params {
            enabled: true,
            compressor: Algorithm::Lz4,
            max_pool_percent: 20,
            accept_threshold_percent: 90,
            shrinker_enabled: false,
            chain_size: 8,
            chain_rule: ChainRule::MinWaste,
            total_memory_bytes,
            proactive_shrink: true,
            reject_compress_poor: false,
            warm_protection: WarmProtection::SecondChance,
            memcg_limit_sync_writeback: true,
            rotation_is_failure: false,
            zero_page_entries: false,
            lru: LruMode::Global,
            numa_nodes,
            huge_first_chunk: true,
            pool_prefault_chunks: crate::pool::PREFAULT_CHUNKS,
        }
    }
}

impl Params {
    /// Checks every value as [`Zswap::new`](crate::Zswap::new) does, without making a cache:
    /// for embedders that make theirs later.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |name, value: &dyn std::fmt::Display, expected| {
            Err(Error::InvalidParam {
                name,
                value: value.to_string(),
                expected,
            })
        };
        if self.max_pool_percent > 100 {
            return bad("max_pool_percent", &self.max_pool_percent, "0..=100");
        }
        if self.accept_threshold_percent > 100 {
            return bad(
                "accept_threshold_percent",
                &self.accept_threshold_percent,
                "0..=100",
            );
        }
        if !(4..=16).contains(&self.chain_size) {
            return bad("chain_size", &self.chain_size, "4..=16");
        }
        let zs = uzswap_zsmalloc::PoolConfig {
            chain_size: self.chain_size,
            chain_rule: self.chain_rule,
        };
        if zs.validate().is_err() {
            return bad(
                "chain_rule",
                &self.chain_rule,
                "a rule zsmalloc accepts with this chain_size",
            );
        }
        if !(1..=crate::MAX_NUMA_NODES).contains(&self.numa_nodes) {
            const _: () = assert!(crate::MAX_NUMA_NODES == 64, "update the text below");
            return bad("numa_nodes", &self.numa_nodes, "1..=64 (MAX_NUMA_NODES)");
        }
        if self.total_memory_bytes < crate::PAGE_SIZE as u64 {
            return bad(
                "total_memory_bytes",
                &self.total_memory_bytes,
                "at least one page (4096)",
            );
        }
        if self.pool_prefault_chunks > 64 {
            return bad(
                "pool_prefault_chunks",
                &self.pool_prefault_chunks,
                "0..=64 (2 MiB each)",
            );
        }
        Ok(())
    }

    /// `max_pool_pages`: the pool's hard limit in pages.
    pub fn max_pool_pages(&self) -> u64 {
        self.total_memory_bytes / crate::PAGE_SIZE as u64 * u64::from(self.max_pool_percent) / 100
    }

    /// `zswap_accept_thr_pages`.
    pub fn accept_threshold_pages(&self) -> u64 {
        self.max_pool_pages() * u64::from(self.accept_threshold_percent) / 100
    }

    /// Where proactive shrinking starts: accept threshold + 1% of the limit ("mm: zswap:
    /// proactive shrinking before pool size limit is hit", v2, on 6.10-rc6).
    pub fn proactive_start_pages(&self) -> u64 {
        self.max_pool_pages() * u64::from((self.accept_threshold_percent + 1).min(100)) / 100
    }
}

/// MemTotal (as /proc/meminfo gives it), in bytes.
pub fn mem_total_bytes() -> Option<u64> {
    // sysinfo's totalram is the same count of pages (`si_meminfo`), in one system call:
    // reading /proc/meminfo took 60-120 us, paid by every process of a `uzswap run` tree.
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: sysinfo fills the struct we pass; all-zero bytes are a valid `sysinfo`.
        let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::sysinfo(&mut si) } == 0 && si.totalram > 0 {
            return Some(si.totalram.saturating_mul(u64::from(si.mem_unit.max(1))));
        }
    }
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    /// The system call gives the kernel's MemTotal exactly.
    #[test]
    #[cfg_attr(miri, ignore = "reads /proc")]
    fn mem_total_is_meminfos() {
        let s = std::fs::read_to_string("/proc/meminfo").unwrap();
        let line = s.lines().find(|l| l.starts_with("MemTotal:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(super::mem_total_bytes(), Some(kb * 1024));
    }
}
