// SPDX-License-Identifier: MIT
//! The cache variants `uzswap replay` compares (issue #12's `--zero-pages entryless|entry` and
//! `--lru global|per-pool`), each against today's behaviour:
//! - `Params::zero_page_entries`: zero-filled pages kept with a length-0 entry, as `zswap_store`
//!   did before "mm: zswap: store zero-filled pages without a zswap_entry" (RFC, Mar 2024), or
//!   without one (the swap core's zeromap, "mm: store zero pages to be swapped out in a
//!   bitmap", 6.12);
//! - `Params::lru`: one LRU for every compressor pool ("mm/zswap: global lru and shrinker
//!   shared by all zswap_pools", v3, 6.9), or one per pool with a shrinker each, as in 6.8.

mod common;

use std::time::Duration;

use common::*;
use uzswap_zswap::{
    Algorithm, CgroupId, Error, LoadOutcome, LruMode, Params, RejectReason, SlotState,
    StoreOutcome, Zswap, PAGE_SIZE,
};

fn zero() -> Vec<u8> {
    vec![0u8; PAGE_SIZE]
}

fn params(zero_page_entries: bool, lru: LruMode) -> Params {
    Params {
        zero_page_entries,
        lru,
        numa_nodes: 1,
        ..small_params(1024)
    }
}

/// 4 MiB of "memory": max pool 204 pages, accept threshold 183; the kernel's hysteresis.
fn tiny(lru: LruMode) -> Params {
    Params {
        proactive_shrink: false,
        lru,
        numa_nodes: 1,
        ..small_params(4)
    }
}

fn cgroup_of(z: &Zswap, cg: CgroupId) -> uzswap_zswap::CgroupCounters {
    z.counters()
        .cgroups
        .into_iter()
        .find(|c| c.id == cg.0)
        .expect("cgroup")
}

/// 64 structured pages in slots 0..64 and 64 zero pages in slots 64..128, for cgroup `cg`.
fn store_half_zero(z: &Zswap, cg: CgroupId) -> Vec<StoreOutcome> {
    let mut out = Vec::new();
    for i in 0..64 {
        assert_eq!(
            z.store(slot(i), &structured_page(i), cg),
            StoreOutcome::Stored
        );
    }
    for i in 64..128 {
        out.push(z.store(slot(i), &zero(), cg));
    }
    out
}

#[test]
fn zero_pages_without_and_with_entries_count_as_each_kernel_did() {
    let (less, _s1) = cache(params(false, LruMode::Global), 256);
    let (with, _s2) = cache(params(true, LruMode::Global), 256);
    let cg_less = less.create_cgroup(CgroupId::ROOT).unwrap();
    let cg_with = with.create_cgroup(CgroupId::ROOT).unwrap();
    let o_less = store_half_zero(&less, cg_less);
    let o_with = store_half_zero(&with, cg_with);
    assert!(o_less.iter().all(|&o| o == StoreOutcome::StoredZero));
    // Before 6.12 a zero page was a zswap store like any other.
    assert!(o_with.iter().all(|&o| o == StoreOutcome::Stored));

    let (a, b) = (less.counters(), with.counters());
    assert_eq!(
        (a.stored_pages, a.same_filled_pages, a.zero_pages),
        (64, 0, 64)
    );
    assert_eq!(
        (b.stored_pages, b.same_filled_pages, b.zero_pages),
        (128, 64, 0)
    );
    assert_eq!((a.zswpout, a.swpout_zero), (64, 64));
    assert_eq!((b.zswpout, b.swpout_zero), (128, 0));
    // No pool memory and no compressed bytes for a zero entry, but a `zswapped` page.
    assert_eq!(a.pool_total_size, b.pool_total_size);
    let (ca, cb) = (cgroup_of(&less, cg_less), cgroup_of(&with, cg_with));
    assert_eq!(ca.zswap, cb.zswap);
    assert_eq!(
        (ca.zswapped, cb.zswapped),
        (64 * PAGE_SIZE as u64, 128 * PAGE_SIZE as u64)
    );
    assert_eq!((ca.zswpout, cb.zswpout), (64, 128));
    // Not on the LRU: only the 64 compressed entries are.
    assert_eq!(less.lru_slots(cg_less, 0).len(), 64);
    assert_eq!(with.lru_slots(cg_with, 0).len(), 64);
    assert_eq!(less.slot_state(slot(70)), Some(SlotState::Zero));
    assert!(matches!(
        with.slot_state(slot(70)),
        Some(SlotState::Stored {
            length: 0,
            referenced: false,
            ..
        })
    ));

    // Metadata: each zero page has an entry, as a zswap_entry did. Entries sit in their
    // shard's table, which these shards have for the compressed pages anyway.
    let (ma, mb) = (less.metadata(), with.metadata());
    assert_eq!((ma.zero_pages, ma.zero_entries), (64, 0));
    assert_eq!((mb.zero_pages, mb.zero_entries), (0, 64));
    assert_eq!((ma.stored_pages, mb.stored_pages), (64, 128));
    assert_eq!(ma.index_bytes, mb.index_bytes);
    assert_eq!(ma.lru_bytes, mb.lru_bytes);
    assert_eq!(ma.entry_bytes, mb.entry_bytes);
    assert_eq!(
        with.metadata_bytes_per_entry(),
        mb.total_bytes() as f64 / 128.0
    );
    // Zero pages alone: without entries a shard needs no entry table, with them it does.
    {
        let (zl, _s3) = cache(params(false, LruMode::Global), 256);
        let (zw, _s4) = cache(params(true, LruMode::Global), 256);
        for i in 0..64 {
            zl.store(slot(i), &zero(), CgroupId::ROOT);
            zw.store(slot(i), &zero(), CgroupId::ROOT);
        }
        let (ml, mw) = (zl.metadata(), zw.metadata());
        assert_eq!(ml.entry_bytes, 0, "{ml:?}");
        assert!(mw.entry_bytes >= 64 * 24, "{mw:?}");
        assert!(mw.total_bytes() > ml.total_bytes());
        // The table goes with the shard's last entry, zero entries included.
        for i in 0..64 {
            zw.invalidate(slot(i));
        }
        assert_eq!(zw.metadata().entry_bytes, 0);
        assert_eq!(zw.check_invariants(), Ok(()));
    }

    // Loads: zswpin for an entry (exclusive frees it), swpin_zero without one.
    let mut buf = vec![0xa5u8; PAGE_SIZE];
    assert_eq!(
        less.load(slot(70), &mut buf, true).unwrap(),
        LoadOutcome::Hit
    );
    assert_eq!(buf, zero());
    buf.fill(0xa5);
    assert_eq!(
        with.load(slot(70), &mut buf, false).unwrap(),
        LoadOutcome::Hit
    );
    assert_eq!(buf, zero());
    assert_eq!(with.counters().same_filled_pages, 64, "kept");
    buf.fill(0xa5);
    assert_eq!(
        with.load(slot(70), &mut buf, true).unwrap(),
        LoadOutcome::Hit
    );
    assert_eq!(buf, zero());
    let (a, b) = (less.counters(), with.counters());
    assert_eq!((a.swpin_zero, a.zswpin, a.zero_pages), (1, 0, 63));
    assert_eq!(
        (b.swpin_zero, b.zswpin, b.same_filled_pages, b.stored_pages),
        (0, 2, 63, 127)
    );
    assert_eq!(cgroup_of(&with, cg_with).zswpin, 2);
    assert_eq!(with.slot_state(slot(70)), Some(SlotState::Empty));
    assert_eq!(
        with.load(slot(70), &mut buf, false).unwrap(),
        LoadOutcome::Absent
    );

    // Overwrites and invalidation release the entry and its counts.
    with.store(slot(71), &structured_page(71), cg_with);
    with.store(slot(0), &zero(), cg_with);
    with.invalidate(slot(72));
    let b = with.counters();
    assert_eq!((b.stored_pages, b.same_filled_pages), (126, 62));
    assert_eq!(cgroup_of(&with, cg_with).zswapped, 126 * PAGE_SIZE as u64);
    for i in 0..128 {
        with.invalidate(slot(i));
    }
    let b = with.counters();
    assert_eq!(
        (b.stored_pages, b.same_filled_pages, b.zero_pages),
        (0, 0, 0)
    );
    let cb = cgroup_of(&with, cg_with);
    assert_eq!((cb.zswap, cb.zswapped), (0, 0));
    let mb = with.metadata();
    assert_eq!((mb.entry_bytes, mb.lru_bytes), (0, 0));
}

#[test]
fn zero_entries_pass_the_enable_cgroup_and_pool_limit_checks_first() {
    for entries in [false, true] {
        let what = if entries { "entry" } else { "entryless" };
        // Disabled: the zeromap still keeps the page; zswap before 6.12 refused it, so it
        // went to the swap device.
        let (z, swap) = cache(
            Params {
                enabled: false,
                ..params(entries, LruMode::Global)
            },
            64,
        );
        let out = z.swap_out(slot(1), &zero(), CgroupId::ROOT).unwrap();
        let c = z.counters();
        if entries {
            assert_eq!(out, StoreOutcome::Rejected(RejectReason::Disabled));
            assert_eq!((c.reject_disabled, c.pswpout), (1, 1), "{what}");
            assert!(swap.is_written(slot(1)));
        } else {
            assert_eq!(out, StoreOutcome::StoredZero);
            assert_eq!((c.reject_disabled, c.pswpout, c.swpout_zero), (0, 0, 1));
        }
        let mut buf = vec![1u8; PAGE_SIZE];
        assert_ne!(
            z.load(slot(1), &mut buf, true).unwrap(),
            LoadOutcome::Absent
        );
        assert_eq!(buf, zero());

        // A cgroup at its zswap.max.
        let (z, _s) = cache(params(entries, LruMode::Global), 64);
        let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
        z.set_cgroup_zswap_max(cg, Some(0)).unwrap();
        let out = z.store(slot(2), &zero(), cg);
        if entries {
            assert_eq!(out, StoreOutcome::Rejected(RejectReason::CgroupLimit));
            assert_eq!(z.counters().reject_cgroup_limit, 1);
        } else {
            assert_eq!(out, StoreOutcome::StoredZero);
        }

        // The entry allocation comes before the same-filled check.
        #[cfg(feature = "test-hooks")]
        {
            z.fault_hooks().fail_next_entry_allocs(1);
            let out = z.store(slot(3), &zero(), CgroupId::ROOT);
            if entries {
                assert_eq!(out, StoreOutcome::Rejected(RejectReason::KmemcacheFail));
                assert_eq!(z.counters().reject_kmemcache_fail, 1);
                assert_eq!(
                    z.store(slot(3), &zero(), CgroupId::ROOT),
                    StoreOutcome::Stored
                );
            } else {
                assert_eq!(out, StoreOutcome::StoredZero);
            }
        }

        // A full pool: zswap_is_full() was checked before the page was looked at.
        let (z, _s) = cache(tiny(LruMode::Global), 4096);
        z.set_params(Params {
            zero_page_entries: entries,
            ..z.params()
        })
        .unwrap();
        let nowb = z.create_cgroup(CgroupId::ROOT).unwrap();
        z.set_cgroup_writeback(nowb, false).unwrap();
        let mut i = 0;
        while z.store(slot(i), &structured_page(i), nowb) == StoreOutcome::Stored {
            i += 1;
        }
        let hits = z.counters().pool_limit_hit;
        let out = z.store(slot(4000), &zero(), CgroupId::ROOT);
        let c = z.counters();
        if entries {
            assert_eq!(out, StoreOutcome::Rejected(RejectReason::PoolLimit));
            assert_eq!(c.pool_limit_hit, hits + 1);
        } else {
            assert_eq!(out, StoreOutcome::StoredZero);
            assert_eq!(c.pool_limit_hit, hits);
        }
        assert!(z.wait_shrink_idle(Duration::from_secs(10)));
    }
}

#[test]
fn zero_entries_are_never_written_back_and_dilute_the_shrinker_count() {
    let counts: Vec<(u64, u64)> = [false, true]
        .into_iter()
        .map(|entries| {
            let (z, swap) = cache(
                Params {
                    shrinker_enabled: true,
                    ..params(entries, LruMode::Global)
                },
                256,
            );
            store_half_zero(&z, CgroupId::ROOT);
            let count = z.shrinker_count(CgroupId::ROOT, 0);
            let backing = z.counters().cgroups[0].zswap / PAGE_SIZE as u64;
            // Everything that can go goes: the compressed pages, never a zero entry (one scan
            // clears the referenced bits, then writes back).
            z.shrinker_scan(CgroupId::ROOT, 0, 1000);
            let c = z.counters();
            assert_eq!(c.written_back_pages, 64);
            assert_eq!(c.same_filled_pages, if entries { 64 } else { 0 });
            for i in 64..128 {
                assert!(!swap.is_written(slot(i)));
            }
            let mut buf = vec![0u8; PAGE_SIZE];
            for i in 0..128 {
                z.load(slot(i), &mut buf, false).unwrap();
                let want = if i < 64 { structured_page(i) } else { zero() };
                assert_eq!(buf, want, "slot {i}");
            }
            (count, backing)
        })
        .collect();
    // zswap_shrinker_count scales the list by compressed / stored pages, and a zero entry was a
    // stored page: 64 listed entries over 128 stored count half.
    let ((less, backing), (with, _)) = (counts[0], counts[1]);
    assert_eq!(less, 64 * backing / 64);
    assert_eq!(with, 64 * backing / 128);
}

#[test]
fn zero_page_entries_may_change_at_run_time() {
    let (z, _s) = cache(params(false, LruMode::Global), 64);
    assert_eq!(
        z.store(slot(0), &zero(), CgroupId::ROOT),
        StoreOutcome::StoredZero
    );
    z.set_params(Params {
        zero_page_entries: true,
        ..z.params()
    })
    .unwrap();
    assert_eq!(
        z.store(slot(1), &zero(), CgroupId::ROOT),
        StoreOutcome::Stored
    );
    // Replacing one kind by the other moves the counts.
    assert_eq!(
        z.store(slot(0), &zero(), CgroupId::ROOT),
        StoreOutcome::Stored
    );
    let c = z.counters();
    assert_eq!(
        (c.zero_pages, c.same_filled_pages, c.stored_pages),
        (0, 2, 2)
    );
    z.set_params(Params {
        zero_page_entries: false,
        ..z.params()
    })
    .unwrap();
    assert_eq!(
        z.store(slot(1), &zero(), CgroupId::ROOT),
        StoreOutcome::StoredZero
    );
    let c = z.counters();
    assert_eq!(
        (c.zero_pages, c.same_filled_pages, c.stored_pages),
        (1, 1, 1)
    );
    let mut buf = vec![7u8; PAGE_SIZE];
    for s in [0, 1] {
        assert_eq!(z.load(slot(s), &mut buf, true).unwrap(), LoadOutcome::Hit);
        assert_eq!(buf, zero());
    }
    let c = z.counters();
    assert_eq!(
        (c.zero_pages, c.same_filled_pages, c.stored_pages),
        (0, 0, 0)
    );
    assert_eq!((c.zswpin, c.swpin_zero), (1, 1));
}

/// Stores `structured_page`s from slot `from` on until the pool holds `pages` pages; returns
/// the next free slot.
fn fill_to(z: &Zswap, from: u64, pages: u64) -> u64 {
    let mut i = from;
    while z.pool_total_pages() < pages {
        assert_eq!(
            z.store(slot(i), &structured_page(i), CgroupId::ROOT),
            StoreOutcome::Stored
        );
        i += 1;
    }
    i
}

/// An lz4 pool half full, then a switch to deflate and stores until the pool limit rejects
/// one (which queues the shrink worker); returns (lz4 slots, deflate slots) once the worker is
/// done.
fn switch_then_overflow(lru: LruMode) -> (Zswap, std::ops::Range<u64>, std::ops::Range<u64>) {
    let (z, _s) = cache(tiny(lru), 4096);
    let max = z.params().max_pool_pages();
    let old_end = fill_to(&z, 0, max / 2);
    z.set_params(Params {
        compressor: Algorithm::Deflate { level: 6 },
        ..z.params()
    })
    .unwrap();
    let mut i = old_end;
    loop {
        match z.store(slot(i), &structured_page(i), CgroupId::ROOT) {
            StoreOutcome::Stored => i += 1,
            StoreOutcome::Rejected(RejectReason::PoolLimit) => break,
            o => panic!("{o:?}"),
        }
    }
    assert!(z.wait_shrink_idle(Duration::from_secs(30)));
    (z, 0..old_end, old_end..i)
}

fn written_back(z: &Zswap, r: std::ops::Range<u64>) -> Vec<u64> {
    r.filter(|&i| z.slot_state(slot(i)) == Some(SlotState::Empty))
        .collect()
}

#[test]
fn global_lru_writes_back_the_coldest_entries_whatever_their_pool() {
    let (z, old, new) = switch_then_overflow(LruMode::Global);
    let c = z.counters();
    assert!(c.written_back_pages > 0);
    assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
    // The lz4 entries are the coldest: they go first, in LRU order.
    let wb = written_back(&z, old.clone());
    assert_eq!(wb.len() as u64, c.written_back_pages);
    assert_eq!(wb, (0..wb.len() as u64).collect::<Vec<_>>());
    assert!(written_back(&z, new).is_empty());
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in wb {
        assert_eq!(
            z.load(slot(i), &mut buf, false).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, structured_page(i));
    }
}

#[test]
fn per_pool_lru_limit_writeback_walks_only_the_current_pools_lists() {
    let (z, old, new) = switch_then_overflow(LruMode::PerPool);
    let c = z.counters();
    assert!(c.written_back_pages > 0);
    assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
    // 6.8: the shrink work of the oldest pool ran, but `shrink_memcg` walked the current
    // (deflate) pool's lists: the newer entries went, every older, colder lz4 entry stayed.
    assert!(written_back(&z, old.clone()).is_empty());
    let wb = written_back(&z, new.clone());
    assert_eq!(wb.len() as u64, c.written_back_pages);
    assert_eq!(
        wb,
        (new.start..new.start + wb.len() as u64).collect::<Vec<_>>(),
        "coldest of the current pool first"
    );
    for i in old {
        assert!(matches!(
            z.slot_state(slot(i)),
            Some(SlotState::Stored {
                compressor: Algorithm::Lz4,
                ..
            })
        ));
    }
}

#[test]
fn per_pool_lru_worker_cannot_shrink_old_pools_after_a_switch() {
    for lru in [LruMode::Global, LruMode::PerPool] {
        let (z, _s) = cache(tiny(lru), 4096);
        let max = z.params().max_pool_pages();
        fill_to(&z, 0, max * 3 / 4);
        // The limit drops below the pool, and the compressor changes: the new pool is empty.
        z.set_params(Params {
            max_pool_percent: 10,
            compressor: Algorithm::Zstd { level: 3 },
            ..z.params()
        })
        .unwrap();
        let before = z.pool_total_pages();
        assert!(before > z.params().max_pool_pages());
        // What a store over the limit does.
        z.kick_shrink_worker();
        assert!(z.wait_shrink_idle(Duration::from_secs(30)));
        let c = z.counters();
        match lru {
            LruMode::Global => {
                assert!(c.written_back_pages > 0);
                assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
            }
            LruMode::PerPool => {
                // The current pool's lists are empty: the worker gives up, and the pool stays
                // over its limit until entries are loaded or invalidated.
                assert_eq!(c.written_back_pages, 0);
                assert_eq!(z.pool_total_pages(), before);
                assert_eq!(
                    z.store(slot(4000), &structured_page(1), CgroupId::ROOT),
                    StoreOutcome::Rejected(RejectReason::PoolLimit)
                );
                assert!(z.wait_shrink_idle(Duration::from_secs(30)));
            }
        }
    }
}

#[test]
fn per_pool_lru_memory_pressure_reaches_every_pool() {
    for lru in [LruMode::Global, LruMode::PerPool] {
        let (z, _s) = cache(
            Params {
                shrinker_enabled: true,
                ..params(false, lru)
            },
            512,
        );
        let algs = [
            Algorithm::Lz4,
            Algorithm::Zstd { level: 3 },
            Algorithm::Deflate { level: 6 },
        ];
        for (p, alg) in algs.into_iter().enumerate() {
            z.set_params(Params {
                compressor: alg,
                ..z.params()
            })
            .unwrap();
            for i in 0..50 {
                let s = p as u64 * 100 + i;
                z.store(slot(s), &structured_page(s), CgroupId::ROOT);
            }
        }
        assert_eq!(z.pools().len(), 3);
        // Every entry is listed once, whatever the layout of the lists.
        let mut listed: Vec<u64> = z
            .lru_slots(CgroupId::ROOT, 0)
            .iter()
            .map(|s| s.offset)
            .collect();
        listed.sort_unstable();
        let all: Vec<u64> = (0..3).flat_map(|p| p * 100..p * 100 + 50).collect();
        assert_eq!(listed, all);
        // shrink_slab asks each pool's shrinker (or the one global shrinker). The first passes
        // only clear referenced bits; the first pass that frees anything frees in every pool
        // with per-pool shrinkers, only the coldest (lz4) entries with the global one.
        let mut first = None;
        for _ in 0..20 {
            let r = z.shrink_slab(CgroupId::ROOT, 0, 0);
            if r.freed > 0 && first.is_none() {
                first = Some(
                    (0..3u64)
                        .map(|p| written_back(&z, p * 100..p * 100 + 50).len())
                        .collect::<Vec<_>>(),
                );
            }
        }
        let first = first.expect("the shrinker freed entries");
        match lru {
            LruMode::Global => assert_eq!(first[2], 0, "{first:?}"),
            LruMode::PerPool => assert!(first.iter().all(|&n| n > 0), "{first:?}"),
        }
        let c = z.counters();
        assert!(c.written_back_pages > 0);
        for p in 0..3u64 {
            let wb = written_back(&z, p * 100..p * 100 + 50).len();
            assert!(wb > 0, "{lru}: pool {p} was not shrunk");
        }
    }
}

#[test]
fn per_pool_lru_shrinkers_count_and_scan_each_pool_in_shrinker_order_not_by_age() {
    for lru in [LruMode::Global, LruMode::PerPool] {
        let (z, _s) = cache(
            Params {
                shrinker_enabled: true,
                ..params(false, lru)
            },
            512,
        );
        let switch = |alg| {
            z.set_params(Params {
                compressor: alg,
                ..z.params()
            })
            .unwrap()
        };
        for i in 0..40 {
            z.store(slot(i), &structured_page(i), CgroupId::ROOT);
        }
        switch(Algorithm::Zstd { level: 3 });
        for i in 40..80 {
            z.store(slot(i), &structured_page(i), CgroupId::ROOT);
        }
        // The lz4 pool goes with its last entry; the next new pool takes its slot, so the
        // newest entries sit in the first pool (and, in 6.8, the first-registered shrinker id).
        for i in 0..40 {
            z.invalidate(slot(i));
        }
        switch(Algorithm::Lz4);
        for i in 80..120 {
            z.store(slot(i), &structured_page(i), CgroupId::ROOT);
        }
        assert_eq!(z.pools().len(), 2);
        let backing = z.counters().cgroups[0].zswap / PAGE_SIZE as u64;
        let count = z.shrinker_count(CgroupId::ROOT, 0);
        match lru {
            LruMode::Global => assert_eq!(count, 80 * backing / 80),
            // Each pool's shrinker scales its own list by the cgroup's compression ratio.
            LruMode::PerPool => assert_eq!(count, 2 * (40 * backing / 80)),
        }
        // Clear the referenced bits of the first list scanned (the global one, or the first
        // pool's), then write back 10.
        let first_list = if lru == LruMode::Global { 80 } else { 40 };
        assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, first_list).freed, 0);
        assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, 10).freed, 10);
        let (older, newer) = (written_back(&z, 40..80), written_back(&z, 80..120));
        match lru {
            LruMode::Global => assert_eq!((older, newer), ((40..50).collect(), vec![])),
            LruMode::PerPool => assert_eq!((older, newer), (vec![], (80..90).collect())),
        }
    }
}

#[test]
fn lru_mode_is_fixed_when_the_cache_is_created() {
    let (z, _s) = cache(params(false, LruMode::Global), 16);
    let err = z
        .set_params(Params {
            lru: LruMode::PerPool,
            ..z.params()
        })
        .unwrap_err();
    assert!(matches!(
        err,
        Error::LruModeFixed {
            current: LruMode::Global,
            requested: LruMode::PerPool
        }
    ));
    assert!(err.to_string().contains("can't change at run time"));
    assert_eq!(z.params().lru, LruMode::Global);
    for m in [LruMode::Global, LruMode::PerPool] {
        assert_eq!(m.to_string().parse::<LruMode>().unwrap(), m);
    }
    assert_eq!("per-pool".parse::<LruMode>().unwrap(), LruMode::PerPool);
    assert!("pool".parse::<LruMode>().is_err());
    assert_eq!(Params::default().lru, LruMode::Global);
    assert!(!Params::default().zero_page_entries);
}

#[test]
fn per_pool_lru_entries_leave_their_pools_lists_and_pools_are_freed() {
    let (z, _s) = cache(
        Params {
            shrinker_enabled: true,
            ..params(true, LruMode::PerPool)
        },
        512,
    );
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    let pages = mixed_pages(200);
    for round in 0..4u64 {
        z.set_params(Params {
            compressor: if round % 2 == 0 {
                Algorithm::Zstd { level: 1 }
            } else {
                Algorithm::Lz4
            },
            ..z.params()
        })
        .unwrap();
        for i in 0..100 {
            let s = round * 100 + i;
            z.swap_out(
                slot(s),
                &pages[(s % 200) as usize],
                if i % 2 == 0 { cg } else { CgroupId::ROOT },
            )
            .unwrap();
        }
    }
    z.remove_cgroup(cg).unwrap();
    for _ in 0..3 {
        z.shrink_on_pressure(0);
    }
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in 0..400 {
        assert_ne!(
            z.load(slot(s), &mut buf, false).unwrap(),
            LoadOutcome::Absent
        );
        assert_eq!(buf, pages[(s % 200) as usize], "slot {s}");
    }
    for s in 0..400 {
        z.invalidate(slot(s));
    }
    let c = z.counters();
    assert_eq!((c.stored_pages, c.same_filled_pages, c.nr_pools), (0, 0, 1));
    assert!(z.lru_slots(CgroupId::ROOT, 0).is_empty());
    let m = z.metadata();
    assert_eq!((m.entry_bytes, m.lru_bytes), (0, 0));
}
