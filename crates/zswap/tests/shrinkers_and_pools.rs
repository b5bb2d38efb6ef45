// SPDX-License-Identifier: MIT
//! One test per upstream behaviour of the pool limit, the shrinkers and the pools:
//! - the pool limit's hysteresis, and proactive shrinking, the shrink worker's cgroup walk and
//!   its give-up rule (series "mm: zswap: global shrinker fix and proactive shrink", v2, on
//!   6.10-rc6);
//! - second chance, the memory-pressure shrinker's count and scan, the protected-size estimate,
//!   the disk swap-in credit ("zswap: shrink zswap pool based on memory pressure", 6.8);
//! - pool switching and freeing ("mm/zswap: optimize for dynamic zswap_pools", v3, 6.9);
//! - cgroups: zswap.max, writeback, reparenting.
//!
//! Zero pages and incompressible pages: see basic.rs.

mod common;

use std::time::Duration;

use common::*;
use uzswap_zswap::{
    Algorithm, CgroupId, LoadOutcome, Params, RejectReason, SlotState, StoreOutcome,
    WarmProtection, PAGE_SIZE,
};

/// 4 MiB of "memory": max pool 20% = 204 pages, accept threshold 90% = 183 pages; the
/// kernel's limit policy (hysteresis, no proactive shrinking).
fn tiny() -> Params {
    Params {
        proactive_shrink: false,
        ..small_params(4)
    }
}

/// Store structured pages into consecutive slots until the first rejection; returns how many
/// were stored.
fn fill_until_rejected(z: &uzswap_zswap::Zswap, cg: CgroupId, start: u64, max: u64) -> u64 {
    for i in start..start + max {
        match z.store(slot(i), &structured_page(i), cg) {
            StoreOutcome::Stored | StoreOutcome::StoredIncompressible => {}
            StoreOutcome::Rejected(RejectReason::PoolLimit) => return i - start,
            o => panic!("unexpected {o:?}"),
        }
    }
    panic!("limit never hit");
}

#[test]
fn pool_limit_hysteresis_rejects_until_the_accept_threshold() {
    let (z, _s) = cache(tiny(), 8192);
    let p = z.params();
    let (max, accept) = (p.max_pool_pages(), p.accept_threshold_pages());
    assert_eq!((max, accept), (204, 183));
    // No writeback possible: only invalidation frees pool pages, so the test controls the size.
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_writeback(cg, false).unwrap();
    let n = fill_until_rejected(&z, cg, 0, 8192);
    assert!(z.pool_total_pages() >= max);
    assert!(z.counters().pool_limit_hit >= 1);
    // Free pages until just below the limit but above the threshold: still rejected.
    let mut next = 0;
    while z.pool_total_pages() >= max {
        z.invalidate(slot(next));
        next += 1;
    }
    assert!(z.pool_total_pages() > accept);
    assert_eq!(
        z.store(slot(n + 1), &structured_page(1), cg),
        StoreOutcome::Rejected(RejectReason::PoolLimit)
    );
    // Down to the threshold: accepted again.
    while z.pool_total_pages() > accept {
        z.invalidate(slot(next));
        next += 1;
    }
    assert_eq!(
        z.store(slot(n + 1), &structured_page(1), cg),
        StoreOutcome::Stored
    );
    // accept_threshold_percent = 100 disables the hysteresis.
    z.set_params(Params {
        accept_threshold_percent: 100,
        ..z.params()
    })
    .unwrap();
    let m = fill_until_rejected(&z, cg, n + 2, 8192);
    assert!(m > 0);
    while z.pool_total_pages() >= max {
        z.invalidate(slot(next));
        next += 1;
    }
    assert_ne!(
        z.store(slot(n + 1), &structured_page(2), cg),
        StoreOutcome::Rejected(RejectReason::PoolLimit)
    );
}

/// Stores pages into slots 0, 1, ... until the pool passes `pages`, then one more (the store
/// that notices the level); returns the last slot stored.
fn fill_past(z: &uzswap_zswap::Zswap, pages: u64) -> u64 {
    let mut i = 0;
    while z.pool_total_pages() <= pages {
        assert_eq!(
            z.store(slot(i), &structured_page(i), CgroupId::ROOT),
            StoreOutcome::Stored
        );
        i += 1;
    }
    z.store(slot(i), &structured_page(i), CgroupId::ROOT);
    i
}

/// Every page of slots `0..=last` reads back, from the pool or the swap file.
fn assert_all_read_back(z: &uzswap_zswap::Zswap, last: u64) {
    let mut buf = vec![0u8; PAGE_SIZE];
    for j in 0..=last {
        let o = z.load(slot(j), &mut buf, false).unwrap();
        assert_ne!(o, LoadOutcome::Absent);
        assert_eq!(buf, structured_page(j));
    }
}

#[test]
fn proactive_shrinking_starts_at_accept_threshold_plus_one_percent() {
    for proactive in [false, true] {
        let (z, _s) = cache(
            Params {
                proactive_shrink: proactive,
                ..tiny()
            },
            8192,
        );
        let p = z.params();
        let start = p.proactive_start_pages();
        assert_eq!(start, 204 * 91 / 100);
        // Grow the pool just past accept + 1%; one more store notices the level and kicks
        // the worker (proactive) or not (kernel).
        let i = fill_past(&z, start);
        assert!(z.wait_shrink_idle(Duration::from_secs(20)));
        let c = z.counters();
        if proactive {
            assert!(c.written_back_pages > 0, "proactive: background writeback");
            assert!(z.pool_total_pages() <= p.accept_threshold_pages());
        } else {
            assert_eq!(
                c.written_back_pages, 0,
                "kernel: nothing happens below the limit"
            );
        }
        assert_eq!(c.pool_limit_hit, 0);
        assert_eq!(c.reject_pool_limit, 0);
        // Every page is still readable, from the pool or the swap file.
        assert_all_read_back(&z, i);
    }
}

#[test]
fn shrink_worker_walk_skips_empty_offline_and_no_writeback_cgroups() {
    let (z, _s) = cache(tiny(), 8192);
    // 20 empty cgroups, one removed cgroup, one with writeback disabled but entries, all before
    // the cgroup holding the pages: the old walk gave up after 16 such "failures".
    for _ in 0..20 {
        z.create_cgroup(CgroupId::ROOT).unwrap();
    }
    let gone = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.remove_cgroup(gone).unwrap();
    let nowb = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_writeback(nowb, false).unwrap();
    for i in 0..10 {
        z.store(slot(5000 + i), &structured_page(i), nowb);
    }
    let busy = z.create_cgroup(CgroupId::ROOT).unwrap();
    let n = fill_until_rejected(&z, busy, 0, 8192);
    assert!(z.wait_shrink_idle(Duration::from_secs(30)));
    let c = z.counters();
    assert!(c.written_back_pages > 0);
    assert!(
        z.pool_total_pages() <= z.params().accept_threshold_pages(),
        "worker reached the accept threshold: {} pages",
        z.pool_total_pages()
    );
    // Nothing lost.
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..n {
        assert_ne!(
            z.load(slot(i), &mut buf, false).unwrap(),
            LoadOutcome::Absent
        );
        assert_eq!(buf, structured_page(i));
    }
    // The cgroup with writeback disabled kept its entries in the pool.
    let cgs = z.counters().cgroups;
    let nowb_c = cgs.iter().find(|c| c.id == nowb.0).unwrap();
    assert_eq!(nowb_c.zswpwb, 0);
    assert_eq!(nowb_c.zswapped, 10 * PAGE_SIZE as u64);
}

#[test]
fn shrink_worker_gives_up_after_max_reclaim_retries_real_failures() {
    let (z, swap) = cache(tiny(), 8192);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    swap.fault_injector().fail_next_writes(1_000_000);
    let n = fill_until_rejected(&z, cg, 0, 8192);
    assert!(
        z.wait_shrink_idle(Duration::from_secs(30)),
        "the worker stops"
    );
    let c = z.counters();
    assert_eq!(c.written_back_pages, 0);
    assert!(c.reject_reclaim_fail >= 16, "{}", c.reject_reclaim_fail);
    swap.fault_injector().clear();
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..n {
        assert_eq!(z.load(slot(i), &mut buf, false).unwrap(), LoadOutcome::Hit);
        assert_eq!(buf, structured_page(i));
    }
}

#[test]
fn pressure_shrinker_gives_referenced_entries_a_second_chance() {
    let (z, _s) = cache(
        Params {
            shrinker_enabled: true,
            ..small_params(1024)
        },
        64,
    );
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    for i in 0..3 {
        z.store(slot(i), &structured_page(i), cg);
    }
    assert_eq!(z.lru_slots(cg, 0), vec![slot(0), slot(1), slot(2)]);
    // First pass: every entry is referenced, so each gets a second chance and nothing is freed.
    let r = z.shrinker_scan(cg, 0, 3);
    assert_eq!((r.scanned, r.freed, r.stop), (3, 0, true));
    assert_eq!(z.lru_slots(cg, 0), vec![slot(0), slot(1), slot(2)]);
    assert!(matches!(
        z.slot_state(slot(0)),
        Some(SlotState::Stored {
            referenced: false,
            ..
        })
    ));
    // Second pass: the coldest goes to the swap file.
    let r = z.shrinker_scan(cg, 0, 1);
    assert_eq!((r.scanned, r.freed, r.stop), (1, 1, false));
    assert_eq!(z.lru_slots(cg, 0), vec![slot(1), slot(2)]);
    assert_eq!(z.slot_state(slot(0)), Some(SlotState::Empty));
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(
        z.load(slot(0), &mut buf, true).unwrap(),
        LoadOutcome::FromSwapFile
    );
    assert_eq!(buf, structured_page(0));
    let c = z.counters();
    assert_eq!((c.written_back_pages, c.zswpwb, c.pswpin), (1, 1, 1));
    let cgc = c.cgroups.iter().find(|x| x.id == cg.0).unwrap();
    assert_eq!(cgc.zswpwb, 1);
    // Disabled shrinker: count 0, scan stops.
    z.set_params(Params {
        shrinker_enabled: false,
        ..z.params()
    })
    .unwrap();
    assert_eq!(z.shrinker_count(cg, 0), 0);
    assert!(z.shrinker_scan(cg, 0, 10).stop);
}

#[test]
fn shrinker_count_scales_by_compression_ratio_minus_disk_swapins() {
    let (z, _s) = cache(
        Params {
            shrinker_enabled: true,
            ..small_params(1024)
        },
        512,
    );
    for i in 0..200 {
        z.store(slot(i), &structured_page(i), CgroupId::ROOT);
    }
    let c = z.counters();
    let root = &c.cgroups[0];
    let backing = root.zswap / PAGE_SIZE as u64;
    let expect = 200 * backing / 200;
    assert!(backing < 200, "structured pages compress");
    assert_eq!(z.shrinker_count(CgroupId::ROOT, 0), expect);
    // Write one back and read it from disk: the disk swap-in is subtracted from the next count.
    z.shrinker_scan(CgroupId::ROOT, 0, 200); // clears referenced bits
    let r = z.shrinker_scan(CgroupId::ROOT, 0, 1);
    assert_eq!(r.freed, 1);
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(
        z.load(slot(0), &mut buf, false).unwrap(),
        LoadOutcome::FromSwapFile
    );
    let c = z.counters();
    let root = &c.cgroups[0];
    let backing = root.zswap / PAGE_SIZE as u64;
    let stored = root.zswapped / PAGE_SIZE as u64;
    assert_eq!(stored, 199);
    assert_eq!(z.shrinker_count(CgroupId::ROOT, 0), 198 * backing / 199);
    // The credit is consumed once.
    assert_eq!(z.shrinker_count(CgroupId::ROOT, 0), 199 * backing / 199);
}

#[test]
fn protected_size_estimate_keeps_the_shrinker_off_warm_entries() {
    let params = Params {
        shrinker_enabled: true,
        warm_protection: WarmProtection::ProtectedSize,
        ..small_params(1024)
    };
    let (z, _s) = cache(params, 512);
    for i in 0..200 {
        z.store(slot(i), &structured_page(i), CgroupId::ROOT);
    }
    assert!(matches!(
        z.slot_state(slot(0)),
        Some(SlotState::Stored {
            referenced: false,
            ..
        })
    ));
    let c = z.counters();
    let backing = c.cgroups[0].zswap / PAGE_SIZE as u64;
    let count = z.shrinker_count(CgroupId::ROOT, 0);
    assert!(
        count < 200 * backing / 200,
        "protected entries are not freeable: {count}"
    );
    // A scan that would reach into the protected region stops at once.
    let r = z.shrinker_scan(CgroupId::ROOT, 0, 200);
    assert_eq!((r.scanned, r.freed, r.stop), (0, 0, true));
    // A small scan writes back the coldest entries (no second chance in this mode).
    let r = z.shrinker_scan(CgroupId::ROOT, 0, 10);
    assert_eq!(r.freed, 10);
    assert_eq!(z.lru_slots(CgroupId::ROOT, 0)[0], slot(10));
}

#[test]
fn compressor_switch_makes_a_new_pool_and_frees_the_old_with_its_last_entry() {
    let (z, _s) = cache(small_params(1024), 512);
    let pages = binary_pages(150);
    for i in 0..50 {
        z.store(slot(i), &pages[i as usize], CgroupId::ROOT);
    }
    z.set_params(Params {
        compressor: Algorithm::Zstd { level: 3 },
        ..z.params()
    })
    .unwrap();
    for i in 50..100 {
        z.store(slot(i), &pages[i as usize], CgroupId::ROOT);
    }
    z.set_params(Params {
        compressor: Algorithm::Deflate { level: 6 },
        ..z.params()
    })
    .unwrap();
    for i in 100..150 {
        z.store(slot(i), &pages[i as usize], CgroupId::ROOT);
    }
    let pools = z.pools();
    assert_eq!(pools.len(), 3);
    assert!(pools[0].current && pools[0].compressor == Algorithm::Deflate { level: 6 });
    assert!(pools[1..].iter().all(|p| p.killed && !p.current));
    assert!(matches!(
        z.slot_state(slot(0)),
        Some(SlotState::Stored {
            compressor: Algorithm::Lz4,
            ..
        })
    ));
    // Every pool serves its own entries; all share one LRU.
    assert_eq!(z.lru_slots(CgroupId::ROOT, 0).len(), 150);
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..150 {
        z.load(slot(i), &mut buf, false).unwrap();
        assert_eq!(buf, pages[i as usize]);
    }
    // The lz4 pool goes away with its last entry.
    for i in 0..50 {
        z.invalidate(slot(i));
    }
    let pools = z.pools();
    assert_eq!(pools.len(), 2);
    assert!(pools.iter().all(|p| p.compressor != Algorithm::Lz4));
    // The zstd pool too, when its entries are loaded exclusively.
    for i in 50..100 {
        z.load(slot(i), &mut buf, true).unwrap();
        assert_eq!(buf, pages[i as usize]);
    }
    assert_eq!(z.pools().len(), 1);
    assert_eq!(z.counters().nr_pools, 1);
    // Switching the chain size is a new pool too.
    z.set_params(Params {
        chain_size: 16,
        ..z.params()
    })
    .unwrap();
    let pools = z.pools();
    assert_eq!((pools.len(), pools[0].chain_size), (2, 16));
}

#[test]
fn cgroup_zswap_max_rejects_or_writes_back() {
    let (z, _s) = cache(small_params(1024), 512);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    let child = z.create_cgroup(cg).unwrap();
    z.set_cgroup_zswap_max(cg, Some(8 * PAGE_SIZE as u64))
        .unwrap();
    z.set_cgroup_writeback(cg, false).unwrap();
    let mut stored = 0;
    for i in 0..200 {
        match z.store(
            slot(i),
            &random_page(i).iter().map(|b| b & 0x3).collect::<Vec<_>>(),
            child,
        ) {
            StoreOutcome::Stored => stored += 1,
            StoreOutcome::Rejected(RejectReason::CgroupLimit) => break,
            o => panic!("{o:?}"),
        }
    }
    let c = z.counters();
    let parent = c.cgroups.iter().find(|x| x.id == cg.0).unwrap();
    assert!(
        parent.zswap / PAGE_SIZE as u64 >= 8,
        "limit reached by the child's charge: {parent:?}"
    );
    assert!(stored > 8);
    assert_eq!(c.reject_cgroup_limit, 1);
    // With writeback allowed the store first writes one entry of the cgroup back (second
    // chance: the first attempts only clear referenced bits), then proceeds.
    z.set_cgroup_writeback(cg, true).unwrap();
    z.set_cgroup_writeback(child, true).unwrap();
    let mut accepted = 0;
    for i in 300..340 {
        if z.store(slot(i), &structured_page(i), child) == StoreOutcome::Stored {
            accepted += 1;
        }
    }
    assert!(accepted > 0);
    assert!(z.counters().written_back_pages > 0);
}

#[test]
fn removed_cgroup_entries_are_reparented() {
    let (z, _s) = cache(
        Params {
            shrinker_enabled: true,
            ..small_params(1024)
        },
        512,
    );
    let parent = z.create_cgroup(CgroupId::ROOT).unwrap();
    let child = z.create_cgroup(parent).unwrap();
    for i in 0..20 {
        z.store(slot(i), &structured_page(i), child);
    }
    assert!(z.remove_cgroup(parent).is_err(), "has an online child");
    z.remove_cgroup(child).unwrap();
    let c = z.counters();
    assert!(c.cgroups.iter().all(|x| x.id != child.0));
    let p = c.cgroups.iter().find(|x| x.id == parent.0).unwrap();
    assert_eq!(p.zswapped, 20 * PAGE_SIZE as u64);
    // The parent's shrinker reaches the child's entries.
    assert!(z.shrinker_count(parent, 0) > 0);
    z.shrinker_scan(parent, 0, 20);
    let r = z.shrinker_scan(parent, 0, 5);
    assert_eq!(r.freed, 5);
    // Loads of reparented entries still work; uncharging goes to the parent.
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..20 {
        z.load(slot(i), &mut buf, true).unwrap();
        assert_eq!(buf, structured_page(i));
    }
    let c = z.counters();
    let p = c.cgroups.iter().find(|x| x.id == parent.0).unwrap();
    assert_eq!((p.zswapped, p.zswap), (0, 0));
    assert_eq!(p.zswpwb, 5);
    // The parent can now go too, and the root walks both absorbed lists.
    z.remove_cgroup(parent).unwrap();
    z.store(slot(100), &structured_page(100), CgroupId::ROOT);
    assert_eq!(z.counters().cgroups.len(), 1);
}

#[test]
fn pressure_pass_shrinks_every_cgroup_that_may_write_back() {
    let (z, _s) = cache(
        Params {
            shrinker_enabled: true,
            ..small_params(1024)
        },
        512,
    );
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    let b = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_writeback(b, false).unwrap();
    for i in 0..100 {
        z.store(slot(i), &structured_page(i), a);
        z.store(slot(200 + i), &structured_page(i), b);
    }
    // What a PSI event runs: count and scan every (cgroup, node). The first pass only clears
    // referenced bits; later passes write back, never from the no-writeback cgroup.
    let mut freed = 0;
    for _ in 0..4 {
        freed += z.shrink_on_pressure(0);
    }
    assert!(freed > 0);
    let c = z.counters();
    assert_eq!(c.written_back_pages, freed);
    let cb = c.cgroups.iter().find(|x| x.id == b.0).unwrap();
    assert_eq!((cb.zswpwb, cb.zswapped), (0, 100 * PAGE_SIZE as u64));
    // Disabled shrinker: nothing.
    z.set_params(Params {
        shrinker_enabled: false,
        ..z.params()
    })
    .unwrap();
    assert_eq!(z.shrink_on_pressure(0), 0);
}

#[test]
fn cgroup_zswap_max_async_writeback() {
    let params = Params {
        memcg_limit_sync_writeback: false,
        ..small_params(1024)
    };
    let (z, _s) = cache(params, 512);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_zswap_max(cg, Some(8 * PAGE_SIZE as u64))
        .unwrap();
    let mut i = 0;
    while z.store(slot(i), &structured_page(i), cg)
        != StoreOutcome::Rejected(RejectReason::CgroupLimit)
    {
        i += 1;
        assert!(i < 500, "limit never hit");
    }
    // The store was rejected at once; the worker brings the cgroup back under its limit.
    assert!(z.wait_shrink_idle(Duration::from_secs(20)));
    let c = z.counters();
    let cgc = c.cgroups.iter().find(|x| x.id == cg.0).unwrap();
    assert!(cgc.zswap < 8 * PAGE_SIZE as u64, "{cgc:?}");
    assert!(cgc.zswpwb > 0);
    assert_eq!(
        z.store(slot(i), &structured_page(i), cg),
        StoreOutcome::Stored
    );
    let mut buf = vec![0u8; PAGE_SIZE];
    for j in 0..i {
        assert_ne!(
            z.load(slot(j), &mut buf, false).unwrap(),
            LoadOutcome::Absent
        );
        assert_eq!(buf, structured_page(j));
    }
}

/// A disk swap-in is credited to the list of the cgroup that owned the page (the kernel's
/// swap_cgroup record), whether the page went to disk by writeback or by `swap_out`, and to the
/// nearest online ancestor once the owner is gone. Raw pages keep backing = stored, so a count
/// is exactly the list length minus the credit.
#[test]
fn disk_swapin_credits_the_owner_cgroup() {
    for warm in [WarmProtection::SecondChance, WarmProtection::ProtectedSize] {
        let params = Params {
            shrinker_enabled: true,
            warm_protection: warm,
            ..small_params(1024)
        };
        let (z, _s) = cache(params, 512);
        let parent = z.create_cgroup(CgroupId::ROOT).unwrap();
        let child = z.create_cgroup(parent).unwrap();
        let grandchild = z.create_cgroup(child).unwrap();
        for i in 0..40 {
            let cg = [CgroupId::ROOT, parent, child][i as usize % 3];
            z.store(slot(i), &random_page(i), cg);
        }
        for i in 100..108 {
            z.store(slot(i), &random_page(i), grandchild);
        }
        // Two of the child's pages and one of the grandchild's go to disk by writeback, one of
        // the child's by swap_out.
        let write_back = |cg, n| {
            if warm == WarmProtection::SecondChance {
                // The first pass only clears the referenced bits.
                z.shrinker_scan(cg, 0, z.lru_slots(cg, 0).len() as u64);
            }
            assert_eq!(z.shrinker_scan(cg, 0, n).freed, n, "{warm:?}");
        };
        write_back(child, 2);
        write_back(grandchild, 1);
        let written: Vec<u64> = (0..40)
            .filter(|&i| z.slot_state(slot(i)) == Some(SlotState::Empty))
            .collect();
        assert_eq!(written, vec![2, 5], "{warm:?}");
        z.set_params(Params {
            enabled: false,
            ..z.params()
        })
        .unwrap();
        assert_eq!(
            z.swap_out(slot(200), &random_page(200), child).unwrap(),
            StoreOutcome::Rejected(RejectReason::Disabled)
        );
        z.remove_cgroup(grandchild).unwrap();
        z.set_params(Params {
            enabled: true,
            ..z.params()
        })
        .unwrap();

        let counts = || [CgroupId::ROOT, parent, child].map(|cg| z.shrinker_count(cg, 0));
        let before = counts();
        let mut buf = vec![0u8; PAGE_SIZE];
        for (s, owner) in [(2, child), (200, child), (100, grandchild)] {
            assert_eq!(
                z.load(slot(s), &mut buf, false).unwrap(),
                LoadOutcome::FromSwapFile,
                "{warm:?} slot {s} ({owner:?})"
            );
            assert_eq!(buf, random_page(s));
        }
        // The child's two swap-ins are its credit; the removed grandchild's goes to the child,
        // whose walk covers the grandchild's list. The root and the parent get none.
        let after = counts();
        assert_eq!(after[0], before[0], "{warm:?}: root");
        assert_eq!(after[1], before[1], "{warm:?}: parent");
        assert_eq!(after[2] + 3, before[2], "{warm:?}: child");
        if warm == WarmProtection::SecondChance {
            assert_eq!(counts(), before, "the credit is consumed once");
        }
        // pswpin is global only; zswpin counts hits, per cgroup and up the hierarchy.
        let c = z.counters();
        assert_eq!((c.pswpin, c.zswpin), (3, 0));
        assert!(c.cgroups.iter().all(|x| x.zswpin == 0));
        assert_eq!(z.load(slot(8), &mut buf, false).unwrap(), LoadOutcome::Hit);
        let c = z.counters();
        let zswpin = |cg: CgroupId| c.cgroups.iter().find(|x| x.id == cg.0).unwrap().zswpin;
        assert_eq!([CgroupId::ROOT, parent, child].map(zswpin), [1, 1, 1]);
    }
}

#[test]
fn root_events_are_the_global_counts_and_nested_cgroups_count_their_own() {
    // The root's zswpin / zswpout / zswpwb are reported from the global counters (every event
    // reaches the root); a nested cgroup's events count in it and its ancestors below the root.
    let (z, _swap) = cache(
        Params {
            shrinker_enabled: true,
            ..small_params(1024)
        },
        64,
    );
    let parent = z.create_cgroup(CgroupId::ROOT).unwrap();
    let child = z.create_cgroup(parent).unwrap();
    let page = |s: u64| structured_page(s);
    for s in 0..6 {
        assert!(matches!(
            z.store(slot(s), &page(s), CgroupId::ROOT),
            StoreOutcome::Stored
        ));
    }
    for s in 10..14 {
        assert!(matches!(
            z.store(slot(s), &page(s), child),
            StoreOutcome::Stored
        ));
    }
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in [0, 1, 10] {
        assert_eq!(z.load(slot(s), &mut buf, false).unwrap(), LoadOutcome::Hit);
        assert_eq!(buf, page(s));
    }
    // Write back the child's entries (its list holds only them; the first passes may only
    // take referenced bits).
    let wb: u64 = (0..4).map(|_| z.shrinker_scan(child, 0, 64).freed).sum();
    assert!(wb > 0);
    let c = z.counters();
    let of = |cg: CgroupId| c.cgroups.iter().find(|x| x.id == cg.0).unwrap().clone();
    let (root, p, ch) = (of(CgroupId::ROOT), of(parent), of(child));
    assert_eq!((c.zswpout, c.zswpin, c.zswpwb), (10, 3, wb));
    assert_eq!((root.zswpout, root.zswpin, root.zswpwb), (10, 3, wb));
    assert_eq!((p.zswpout, p.zswpin, p.zswpwb), (4, 1, wb));
    assert_eq!((ch.zswpout, ch.zswpin, ch.zswpwb), (4, 1, wb));
}

/// `park_threads` (for an embedder about to change its thread's credentials) stops the shrink
/// worker: the work queued meanwhile waits, the cache serves stores and loads without it, and
/// `unpark_threads` starts a worker that does the work.
#[test]
fn parked_threads_leave_the_cache_working_and_queued_work_waits_for_unpark() {
    let (z, _s) = cache(
        Params {
            proactive_shrink: true,
            ..tiny()
        },
        8192,
    );
    z.park_threads();
    z.park_threads(); // nothing left to stop: a no-op
    let i = fill_past(&z, z.params().proactive_start_pages());
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(z.counters().written_back_pages, 0, "no worker while parked");
    z.unpark_threads().unwrap();
    assert!(z.wait_shrink_idle(Duration::from_secs(20)));
    assert!(
        z.counters().written_back_pages > 0,
        "the new worker wrote back"
    );
    assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
    assert_all_read_back(&z, i);
}
