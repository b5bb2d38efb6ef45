// SPDX-License-Identifier: MIT
//! Concurrent model test: threads store / load / invalidate overlapping slots while the
//! pressure shrinker, the shrink worker, compressor switches and cgroup removal run. Same-slot
//! calls are serialised by a per-slot lock in the test, as the swap-cache folio lock does in
//! the kernel; everything else races freely. Every load must return exactly the content last
//! stored, and the counters must agree with the oracle.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use uzswap_zswap::{
    Algorithm, CgroupId, LoadOutcome, LruMode, Params, SlotState, StoreOutcome, PAGE_SIZE,
};

const SLOTS: u64 = 768;
const THREADS: usize = 4;

#[test]
fn concurrent_model() {
    run_concurrent_model(Params {
        shrinker_enabled: true,
        ..small_params(4)
    });
}

/// The same with the cache variants: per-pool LRU lists (so every compressor switch makes a
/// new set of lists, and pools come and go with their shrinkers), and zero pages with entries,
/// switched on and off at run time.
#[test]
fn concurrent_model_per_pool_lru_zero_entries() {
    run_concurrent_model(Params {
        shrinker_enabled: true,
        lru: LruMode::PerPool,
        zero_page_entries: true,
        ..small_params(4)
    });
}

fn run_concurrent_model(params: Params) {
    let variant = params.lru == LruMode::PerPool;
    let (z, swap) = cache(params, SLOTS);
    let z = Arc::new(z);
    let pages = Arc::new(mixed_pages(96));
    let oracle: Arc<Vec<Mutex<Option<usize>>>> =
        Arc::new((0..SLOTS).map(|_| Mutex::new(None)).collect());
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    let b = z.create_cgroup(a).unwrap();
    let c = z.create_cgroup(CgroupId::ROOT).unwrap();
    let cgroups = [CgroupId::ROOT, a, b, c];
    let stop = Arc::new(AtomicBool::new(false));
    let loads_checked = Arc::new(AtomicU64::new(0));
    let run_for = Duration::from_millis(2500);

    let mut hs = Vec::new();
    for t in 0..THREADS {
        let (z, pages, oracle, stop, checked) = (
            z.clone(),
            pages.clone(),
            oracle.clone(),
            stop.clone(),
            loads_checked.clone(),
        );
        hs.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(0xc0ffee + t as u64);
            let mut buf = vec![0u8; PAGE_SIZE];
            while !stop.load(Relaxed) {
                let s = rng.gen_range(0..SLOTS);
                let mut o = oracle[s as usize].lock();
                let op = rng.gen_range(0..100);
                if op < 40 {
                    let id = rng.gen_range(0..pages.len());
                    let cg = cgroups[rng.gen_range(0..cgroups.len())];
                    match z.swap_out(slot(s), &pages[id], cg) {
                        Ok(_) => *o = Some(id),
                        Err(e) => panic!("swap_out {s}: {e}"),
                    }
                } else if op < 50 {
                    let id = rng.gen_range(0..pages.len());
                    *o = match z.store(slot(s), &pages[id], CgroupId::ROOT) {
                        StoreOutcome::Rejected(_) => None,
                        _ => Some(id),
                    };
                } else if op < 90 {
                    let excl = op >= 75;
                    let r = z
                        .load(slot(s), &mut buf, excl)
                        .unwrap_or_else(|e| panic!("load {s}: {e}"));
                    match *o {
                        None => assert_eq!(r, LoadOutcome::Absent, "slot {s}"),
                        Some(id) => {
                            assert_ne!(r, LoadOutcome::Absent, "slot {s} lost page {id}");
                            assert!(
                                buf == pages[id],
                                "slot {s}: wrong content (expected page {id}, {r:?})"
                            );
                            checked.fetch_add(1, Relaxed);
                            if excl {
                                *o = None;
                            }
                        }
                    }
                } else {
                    z.invalidate(slot(s));
                    *o = None;
                }
            }
        }));
    }
    // The memory-pressure shrinker.
    {
        let (z, stop) = (z.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut round = 0u32;
            while !stop.load(Relaxed) {
                for cg in cgroups {
                    if variant && round % 2 == 1 {
                        // Each pool's shrinker in turn, as shrink_slab asks them.
                        z.shrink_slab(cg, 0, 2);
                        continue;
                    }
                    let n = z.shrinker_count(cg, 0);
                    if n > 0 {
                        z.shrinker_scan(cg, 0, (n / 4).max(1));
                    }
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    // Compaction (zsmalloc's own shrinker): objects move while they are loaded and freed.
    {
        let (z, stop) = (z.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                z.compact();
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    // Compressor switches (each makes a new pool; old ones drain) and a cgroup removal.
    {
        let (z, stop) = (z.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let algs = [
                Algorithm::Zstd { level: 1 },
                Algorithm::Deflate { level: 1 },
                Algorithm::Lzo,
                Algorithm::LzoRle,
                Algorithm::Lz4,
            ];
            let start = Instant::now();
            let mut removed = false;
            let mut i = 0;
            while !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(60));
                let p = z.params();
                let proactive = i % 3 == 0;
                z.set_params(Params {
                    compressor: algs[i % algs.len()],
                    proactive_shrink: proactive,
                    zero_page_entries: variant && i % 2 == 0,
                    ..p
                })
                .unwrap();
                i += 1;
                if !removed && start.elapsed() > Duration::from_millis(1200) {
                    z.remove_cgroup(c).unwrap();
                    removed = true;
                }
            }
            assert!(i > 10, "compressor switches: {i}");
        }));
    }
    std::thread::sleep(run_for);
    stop.store(true, Relaxed);
    for h in hs {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
    assert!(z.wait_shrink_idle(Duration::from_secs(30)));
    z.check_invariants_after_concurrent_stores(THREADS)
        .unwrap_or_else(|m| panic!("quiescent cache: {m}"));
    assert!(
        z.counters().pool_pages_compacted > 0,
        "compaction moved objects during the run"
    );

    // Quiescent: every slot agrees with the oracle, and the counters with the slots.
    let (mut stored, mut zero, mut raw, mut zero_entries) = (0u64, 0u64, 0u64, 0u64);
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in 0..SLOTS {
        let o = *oracle[s as usize].lock();
        let st = z.slot_state(slot(s)).unwrap();
        match st {
            SlotState::Stored { length, .. } => {
                stored += 1;
                raw += u64::from(length as usize == PAGE_SIZE);
                zero_entries += u64::from(length == 0);
            }
            SlotState::Zero => zero += 1,
            SlotState::Empty => {}
        }
        match o {
            None => {
                assert_eq!(st, SlotState::Empty, "slot {s}");
                assert!(
                    !swap.is_written(slot(s)),
                    "slot {s}: stale block left on disk"
                );
            }
            Some(id) => {
                if st == SlotState::Empty {
                    assert!(swap.is_written(slot(s)), "slot {s}");
                }
                assert_ne!(
                    z.load(slot(s), &mut buf, false).unwrap(),
                    LoadOutcome::Absent
                );
                assert!(buf == pages[id], "slot {s}");
            }
        }
    }
    let cnt = z.counters();
    eprintln!(
        "loads checked {}, written back {}, pool_limit_hit {}, pools {}",
        loads_checked.load(Relaxed),
        cnt.written_back_pages,
        cnt.pool_limit_hit,
        cnt.nr_pools
    );
    assert_eq!(cnt.stored_pages, stored);
    assert_eq!(cnt.zero_pages, zero);
    assert_eq!(cnt.same_filled_pages, zero_entries);
    assert_eq!(cnt.stored_incompressible_pages, raw);
    assert_eq!(
        cnt.cgroups[0].zswapped,
        stored * PAGE_SIZE as u64,
        "root charge = every entry"
    );
    // Every event is counted on the root too (hierarchical memory.stat).
    let root = &cnt.cgroups[0];
    assert_eq!(
        (root.zswpout, root.zswpin, root.zswpwb),
        (cnt.zswpout, cnt.zswpin, cnt.zswpwb)
    );
    assert_eq!(cnt.zswpwb, cnt.written_back_pages);
    assert!(cnt.written_back_pages > 0, "writeback ran");
    assert!(loads_checked.load(Relaxed) > 1000);
    let refs: u64 = z.pools().iter().map(|p| p.references).sum();
    assert_eq!(
        refs,
        stored - zero_entries + 1,
        "one pool reference per pool entry plus the current pool's base"
    );
    // Drain: everything goes, every old pool is freed.
    for s in 0..SLOTS {
        z.invalidate(slot(s));
    }
    let cnt = z.counters();
    assert_eq!(
        (
            cnt.stored_pages,
            cnt.zero_pages,
            cnt.same_filled_pages,
            cnt.pool_total_size,
            cnt.nr_pools
        ),
        (0, 0, 0, 0, 1)
    );
    assert_eq!(cnt.cgroups[0].zswap, 0);
    assert_eq!(swap.stats().blocks_stored, 0);
    let m = z.metadata();
    assert_eq!((m.entry_bytes, m.lru_bytes), (0, 0));
    z.check_invariants().unwrap();
}

/// Writeback hammered on a handful of slots: the shrinkers write back the very entries that
/// other threads are storing over, loading and invalidating.
#[test]
fn writeback_races_on_few_slots() {
    const FEW: u64 = 8;
    let params = Params {
        shrinker_enabled: true,
        ..small_params(1024)
    };
    let (z, swap) = cache(params, FEW);
    let z = Arc::new(z);
    let pages = Arc::new(mixed_pages(32));
    let oracle: Arc<Vec<Mutex<Option<usize>>>> =
        Arc::new((0..FEW).map(|_| Mutex::new(None)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (z, pages, oracle, stop) = (z.clone(), pages.clone(), oracle.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7 + t);
            let mut buf = vec![0u8; PAGE_SIZE];
            while !stop.load(Relaxed) {
                let s = rng.gen_range(0..FEW);
                let mut o = oracle[s as usize].lock();
                match rng.gen_range(0..10) {
                    0..=3 => {
                        let id = rng.gen_range(0..pages.len());
                        z.swap_out(slot(s), &pages[id], CgroupId::ROOT).unwrap();
                        *o = Some(id);
                    }
                    4..=8 => {
                        let excl = rng.gen_bool(0.3);
                        let r = z.load(slot(s), &mut buf, excl).unwrap();
                        match *o {
                            None => assert_eq!(r, LoadOutcome::Absent),
                            Some(id) => {
                                assert!(buf == pages[id], "slot {s}: {r:?}");
                                if excl {
                                    *o = None;
                                }
                            }
                        }
                    }
                    _ => {
                        z.invalidate(slot(s));
                        *o = None;
                    }
                }
            }
        }));
    }
    for _ in 0..2 {
        let (z, stop) = (z.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                z.shrinker_scan(CgroupId::ROOT, 0, FEW);
                z.run_shrink_worker();
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Relaxed);
    for h in hs {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
    let c = z.counters();
    eprintln!(
        "few slots: written back {}, zswpin {}, pswpin {}",
        c.written_back_pages, c.zswpin, c.pswpin
    );
    assert!(
        c.written_back_pages > 20,
        "writeback raced: {}",
        c.written_back_pages
    );
    assert!(z.wait_shrink_idle(Duration::from_secs(30)));
    z.check_invariants_after_concurrent_stores(2)
        .unwrap_or_else(|m| panic!("quiescent cache: {m}"));
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in 0..FEW {
        match *oracle[s as usize].lock() {
            None => {
                assert_eq!(
                    z.load(slot(s), &mut buf, false).unwrap(),
                    LoadOutcome::Absent
                );
                assert!(!swap.is_written(slot(s)));
            }
            Some(id) => {
                z.load(slot(s), &mut buf, false).unwrap();
                assert!(buf == pages[id]);
            }
        }
    }
}

/// Sequential loads prefetch their neighbours' handles and objects before taking those
/// neighbours' locks. Scanners run across a shard boundary while another thread frees,
/// re-stores (in other size classes) and compacts the very neighbours being prefetched, and
/// switches the compressor so that neighbours live in different pools: every load still
/// returns the oracle's content.
#[test]
fn sequential_loads_race_with_frees_and_compaction() {
    const BASE: u64 = 4096 - 48; // the scan window straddles the first shard boundary
    const WINDOW: u64 = 96;
    let (z, _swap) = cache(small_params(1024), BASE + WINDOW);
    let z = Arc::new(z);
    let pages = Arc::new(mixed_pages(24));
    let oracle: Arc<Vec<Mutex<Option<usize>>>> =
        Arc::new((0..WINDOW).map(|_| Mutex::new(None)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (z, pages, oracle, stop) = (z.clone(), pages.clone(), oracle.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; PAGE_SIZE];
            let mut loads = 0u64;
            while !stop.load(Relaxed) {
                for k in 0..WINDOW {
                    let o = oracle[k as usize].lock();
                    let r = z.load(slot(BASE + k), &mut buf, false).unwrap();
                    match *o {
                        None => assert_eq!(r, LoadOutcome::Absent, "slot {k} (thread {t})"),
                        Some(id) => assert!(buf == pages[id], "slot {k} (thread {t}): {r:?}"),
                    }
                    loads += 1;
                }
            }
            assert!(loads > WINDOW);
        }));
    }
    {
        let (z, pages, oracle, stop) = (z.clone(), pages.clone(), oracle.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(11);
            let algos = [
                Algorithm::Lz4,
                Algorithm::Deflate { level: 1 },
                Algorithm::LzoRle,
            ];
            let mut round = 0usize;
            while !stop.load(Relaxed) {
                for _ in 0..64 {
                    let k = rng.gen_range(0..WINDOW);
                    let mut o = oracle[k as usize].lock();
                    if rng.gen_bool(0.3) {
                        z.invalidate(slot(BASE + k));
                        *o = None;
                    } else {
                        let id = rng.gen_range(0..pages.len());
                        // Rejected pages go to the swap file: loads read them from there.
                        z.swap_out(slot(BASE + k), &pages[id], CgroupId::ROOT)
                            .unwrap();
                        *o = Some(id);
                    }
                }
                z.compact();
                round += 1;
                let mut p = z.params();
                p.compressor = algos[round % algos.len()];
                z.set_params(p).unwrap();
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(800));
    stop.store(true, Relaxed);
    for h in hs {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
    assert!(z.wait_shrink_idle(Duration::from_secs(30)));
    z.check_invariants_after_concurrent_stores(4)
        .unwrap_or_else(|m| panic!("quiescent cache: {m}"));
}
