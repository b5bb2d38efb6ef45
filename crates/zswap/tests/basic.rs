// SPDX-License-Identifier: MIT
//! Store / load / invalidate / swap_out round trips, counters and metadata.

mod common;

use common::*;
use uzswap_zswap::{
    Algorithm, CgroupId, LoadOutcome, Params, RejectReason, SlotState, StoreOutcome, PAGE_SIZE,
};

#[test]
fn round_trip_every_compressor() {
    let pages = mixed_pages(200);
    for alg in [
        Algorithm::Lz4,
        Algorithm::Zstd { level: 3 },
        Algorithm::Zstd { level: 1 },
        Algorithm::Deflate { level: 6 },
        Algorithm::Lzo,
        Algorithm::LzoRle,
    ] {
        let (z, _swap) = cache(
            Params {
                compressor: alg,
                ..small_params(1024)
            },
            256,
        );
        for (i, p) in pages.iter().enumerate() {
            let o = z.store(slot(i as u64), p, CgroupId::ROOT);
            assert!(
                !matches!(o, StoreOutcome::Rejected(_)),
                "{alg:?} page {i}: {o:?}"
            );
        }
        let mut buf = vec![0u8; PAGE_SIZE];
        for (i, p) in pages.iter().enumerate() {
            assert_eq!(
                z.load(slot(i as u64), &mut buf, false).unwrap(),
                LoadOutcome::Hit
            );
            assert_eq!(&buf, p, "{alg:?} page {i}");
        }
        let c = z.counters();
        assert_eq!(c.stored_pages + c.zero_pages, pages.len() as u64);
        assert_eq!(c.zero_pages, 20);
        assert!(
            c.stored_incompressible_pages >= 20,
            "random pages stored as-is"
        );
        assert_eq!(c.zswpout, c.stored_pages);
        assert_eq!(c.swpout_zero, 20);
        assert!(c.pool_total_size > 0);
        for (i, _) in pages.iter().enumerate() {
            assert_eq!(
                z.load(slot(i as u64), &mut buf, true).unwrap(),
                LoadOutcome::Hit
            );
            assert_eq!(
                z.load(slot(i as u64), &mut buf, true).unwrap(),
                LoadOutcome::Absent
            );
        }
        let c = z.counters();
        assert_eq!(
            (c.stored_pages, c.zero_pages, c.stored_incompressible_pages),
            (0, 0, 0)
        );
        assert_eq!(c.pool_total_size, 0, "{alg:?}: every object freed");
        let m = z.metadata();
        assert_eq!(
            (m.entry_bytes, m.lru_bytes),
            (0, 0),
            "{alg:?}: no entry left"
        );
    }
}

#[test]
fn zero_pages_have_no_entry() {
    let (z, _s) = cache(small_params(1024), 64);
    let zero = vec![0u8; PAGE_SIZE];
    for i in 0..64 {
        assert_eq!(
            z.store(slot(i), &zero, CgroupId::ROOT),
            StoreOutcome::StoredZero
        );
    }
    let m = z.metadata();
    assert_eq!(m.entry_bytes, 0);
    assert_eq!(m.lru_bytes, 0);
    assert_eq!(m.zero_pages, 64);
    // One 4-byte word per slot of the touched shard; no per-page allocation.
    assert!(m.index_bytes <= 4 * 4096);
    assert_eq!(z.pool_total_pages(), 0);
    assert_eq!(z.slot_state(slot(3)), Some(SlotState::Zero));
    let mut buf = vec![0xffu8; PAGE_SIZE];
    assert_eq!(z.load(slot(3), &mut buf, false).unwrap(), LoadOutcome::Hit);
    assert!(buf.iter().all(|&b| b == 0));
    // Overwrite a zero slot with data, then with zero again: the gauge follows.
    z.store(slot(3), &structured_page(1), CgroupId::ROOT);
    assert_eq!(z.counters().zero_pages, 63);
    z.store(slot(3), &zero, CgroupId::ROOT);
    assert_eq!(z.counters().zero_pages, 64);
    assert_eq!(z.counters().stored_pages, 0);
    z.invalidate(slot(3));
    assert_eq!(z.counters().zero_pages, 63);
    assert_eq!(z.counters().swpin_zero, 1);
}

#[test]
fn incompressible_pages_stored_raw_or_rejected() {
    let (z, _s) = cache(small_params(1024), 16);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    let r = random_page(7);
    assert_eq!(z.store(slot(0), &r, cg), StoreOutcome::StoredIncompressible);
    assert_eq!(
        z.slot_state(slot(0)),
        Some(SlotState::Stored {
            length: 4096,
            compressor: Algorithm::Lz4,
            referenced: true
        })
    );
    let mut buf = vec![0u8; PAGE_SIZE];
    z.load(slot(0), &mut buf, false).unwrap();
    assert_eq!(buf, r);
    assert_eq!(z.counters().stored_incompressible_pages, 1);
    // Writeback disabled: a raw page could never leave memory, so it is rejected.
    z.set_cgroup_writeback(cg, false).unwrap();
    assert_eq!(
        z.store(slot(1), &r, cg),
        StoreOutcome::Rejected(RejectReason::CompressPoor)
    );
    // The old always-reject behaviour.
    z.set_params(Params {
        reject_compress_poor: true,
        ..z.params()
    })
    .unwrap();
    assert_eq!(
        z.store(slot(2), &r, CgroupId::ROOT),
        StoreOutcome::Rejected(RejectReason::CompressPoor)
    );
    let c = z.counters();
    assert_eq!(c.reject_compress_poor, 2);
    assert_eq!(c.stored_incompressible_pages, 1);
    assert_eq!(
        z.load(slot(2), &mut buf, false).unwrap(),
        LoadOutcome::Absent
    );
}

#[test]
fn swap_out_goes_to_the_file_when_rejected() {
    let (z, swap) = cache(
        Params {
            enabled: false,
            ..small_params(1024)
        },
        16,
    );
    let p = structured_page(3);
    assert_eq!(
        z.swap_out(slot(5), &p, CgroupId::ROOT).unwrap(),
        StoreOutcome::Rejected(RejectReason::Disabled)
    );
    assert!(swap.is_written(slot(5)));
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(
        z.load(slot(5), &mut buf, false).unwrap(),
        LoadOutcome::FromSwapFile
    );
    assert_eq!(buf, p);
    // A store of newer content hides (and discards) the disk copy.
    z.set_params(Params {
        enabled: true,
        ..z.params()
    })
    .unwrap();
    let q = structured_page(4);
    assert_eq!(z.store(slot(5), &q, CgroupId::ROOT), StoreOutcome::Stored);
    assert!(!swap.is_written(slot(5)));
    z.load(slot(5), &mut buf, true).unwrap();
    assert_eq!(buf, q);
    let c = z.counters();
    assert_eq!((c.pswpout, c.pswpin, c.zswpin, c.zswpout), (1, 1, 1, 1));
    // Writeback disabled: swap_out can't put the page anywhere.
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_writeback(cg, false).unwrap();
    z.set_params(Params {
        enabled: false,
        ..z.params()
    })
    .unwrap();
    assert!(z.swap_out(slot(6), &p, cg).is_err());
}

#[test]
fn invalid_input_is_reported() {
    let (z, _s) = cache(small_params(1024), 16);
    let p = structured_page(1);
    assert_eq!(
        z.store(slot(16), &p, CgroupId::ROOT),
        StoreOutcome::Rejected(RejectReason::SlotOutOfRange)
    );
    assert_eq!(
        z.store(
            uzswap_zswap::SwapSlot { area: 3, offset: 0 },
            &p,
            CgroupId::ROOT
        ),
        StoreOutcome::Rejected(RejectReason::NoSwapArea)
    );
    assert_eq!(
        z.store(slot(0), &p[..100], CgroupId::ROOT),
        StoreOutcome::Rejected(RejectReason::BadPageLength)
    );
    assert_eq!(
        z.store(slot(0), &p, CgroupId(999)),
        StoreOutcome::Rejected(RejectReason::NoSuchCgroup)
    );
    let mut small = vec![0u8; 10];
    assert!(z.load(slot(0), &mut small, false).is_err());
    assert!(z
        .set_params(Params {
            max_pool_percent: 101,
            ..z.params()
        })
        .is_err());
    assert!(z
        .set_params(Params {
            chain_size: 2,
            ..z.params()
        })
        .is_err());
    assert!(z.remove_cgroup(CgroupId::ROOT).is_err());
    assert!(z.create_cgroup(CgroupId(77)).is_err());
}

#[test]
fn counters_text_and_json() {
    let (z, _s) = cache(small_params(1024), 16);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.store(slot(0), &structured_page(1), cg);
    let c = z.counters();
    let text = c.to_kernel_text();
    for name in [
        "pool_limit_hit",
        "reject_reclaim_fail",
        "reject_alloc_fail",
        "reject_kmemcache_fail",
        "reject_compress_fail",
        "reject_compress_poor",
        "decompress_fail",
        "written_back_pages",
        "pool_total_size",
        "stored_pages",
        "stored_incompressible_pages",
        "zero_pages",
        "zswpin",
        "zswpout",
        "zswpwb",
        "pswpin",
        "pswpout",
    ] {
        assert!(
            text.lines().any(|l| l.split(' ').next() == Some(name)),
            "{name} missing"
        );
    }
    assert!(text.lines().any(|l| l == "stored_pages 1"));
    assert!(text
        .lines()
        .any(|l| l == format!("cgroup{}.zswpout 1", cg.0)));
    assert!(text
        .lines()
        .any(|l| l == format!("cgroup{}.zswapped 4096", cg.0)));
    let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(v["stored_pages"], 1);
    assert_eq!(v["cgroups"][1]["zswpout"], 1);
    // Hierarchical: the root sees its child's charge.
    assert_eq!(c.cgroups[0].zswapped, 4096);
    assert_eq!(c.cgroups[0].zswap, c.cgroups[1].zswap);
}

/// Metadata counts what the cache *and* its allocator keep per stored page. The kernel's
/// equivalent: a 56-byte `zswap_entry`, its xarray slot (8 bytes plus node overhead) and the
/// 8-byte zsmalloc handle from its kmem cache, plus a share of each 48-byte `struct zspage`:
/// about 77 bytes.
#[test]
fn metadata_per_entry_counts_the_allocator_and_matches_the_kernel() {
    // Enough objects for the pools' handle tables (which start at 4 KiB per size class in use)
    // to be mostly used, as in any pool worth measuring.
    let n = 32768u64;
    let (z, _s) = cache(small_params(4096), n);
    let pages = binary_pages(256);
    for i in 0..n {
        z.store(slot(i), &pages[i as usize % pages.len()], CgroupId::ROOT);
    }
    let m = z.metadata();
    assert_eq!(m.stored_pages, n);
    assert!(
        m.allocator_bytes >= 16 * n,
        "the allocator's 16-byte handle entry per object is counted: {m:?}"
    );
    let per = z.metadata_bytes_per_entry();
    assert!(per <= 80.0, "metadata per entry {per} ({m:?})");
    eprintln!("metadata bytes per entry: {per:.1} ({m:?})");
}

#[test]
fn two_swap_areas() {
    use std::sync::Arc;
    use uzswap_backing::SwapFile;
    let z = uzswap_zswap::Zswap::new(Params {
        shrinker_enabled: true,
        ..small_params(1024)
    })
    .unwrap();
    let files: Vec<Arc<SwapFile>> = (0..2)
        .map(|a| {
            let f = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), a, 32).unwrap());
            for _ in 0..32 {
                f.alloc_slot().unwrap();
            }
            z.add_swap_file(f.clone()).unwrap();
            f
        })
        .collect();
    assert!(z.add_swap_file(files[1].clone()).is_err(), "area 1 twice");
    let s = |a: u32, o: u64| uzswap_zswap::SwapSlot { area: a, offset: o };
    for o in 0..32 {
        z.store(s(0, o), &structured_page(o), CgroupId::ROOT);
        z.store(s(1, o), &structured_page(100 + o), CgroupId::ROOT);
    }
    // Write everything back: each page lands in its own area's file.
    z.shrinker_scan(CgroupId::ROOT, 0, 64);
    assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, 64).freed, 64);
    assert_eq!(
        (
            files[0].stats().blocks_stored,
            files[1].stats().blocks_stored
        ),
        (32, 32)
    );
    let mut buf = vec![0u8; PAGE_SIZE];
    for o in 0..32 {
        assert_eq!(
            z.load(s(1, o), &mut buf, true).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, structured_page(100 + o));
        assert_eq!(
            z.load(s(0, o), &mut buf, false).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, structured_page(o));
    }
    assert_eq!(
        files[1].stats().blocks_stored,
        0,
        "exclusive loads discard the blocks"
    );
}

#[test]
fn prepare_thread_stores_nothing_and_later_operations_work() {
    for alg in [
        Algorithm::Lz4,
        Algorithm::Lzo,
        Algorithm::Deflate { level: 6 },
    ] {
        let (z, _swap) = cache(
            Params {
                compressor: alg,
                ..small_params(256)
            },
            64,
        );
        let before = z.counters();
        // Twice, and from another thread too: it only sets up per-thread state.
        z.prepare_thread();
        z.prepare_thread();
        std::thread::scope(|s| {
            s.spawn(|| z.prepare_thread());
        });
        assert_eq!(z.counters(), before, "{alg:?}");
        assert_eq!(z.slot_state(slot(0)), Some(SlotState::Empty));
        let page: Vec<u8> = (0..PAGE_SIZE).map(|i| (i % 251) as u8 / 16).collect();
        assert!(matches!(
            z.store(slot(0), &page, CgroupId::ROOT),
            StoreOutcome::Stored
        ));
        let mut buf = vec![0u8; PAGE_SIZE];
        assert_eq!(z.load(slot(0), &mut buf, false).unwrap(), LoadOutcome::Hit);
        assert_eq!(buf, page);
    }
}

#[test]
fn has_area_says_which_areas_are_attached() {
    let z = uzswap_zswap::Zswap::new(small_params(64)).unwrap();
    assert!(!z.has_area(0));
    let swap = std::sync::Arc::new(
        uzswap_zswap::SwapFile::create_temp(&std::env::temp_dir(), 0, 16).unwrap(),
    );
    z.add_swap_file(swap.clone()).unwrap();
    assert!(z.has_area(0));
    assert!(!z.has_area(1));
    assert!(!z.has_area(u32::MAX));
    // A second attach of the same area is refused; the pager's attach treats that as done.
    assert!(matches!(
        z.add_swap_file(swap),
        Err(uzswap_zswap::Error::AreaExists(0))
    ));
}

/// A thread-local destructor that stores, loads and writes back pages after the cache's own
/// thread-locals of that thread (its buffers, pool snapshots, codec contexts) were destroyed:
/// temporary ones stand in, and every page reads back (an embedder's exit-time code, such as a
/// paged program's key destructors under `uzswap run`, which frees the pager's state at thread
/// exit). Before, the buffer and the snapshot list panicked there.
#[test]
fn operations_during_thread_teardown_use_temporary_state() {
    use std::sync::Arc;
    struct Late(Arc<uzswap_zswap::Zswap>, Vec<Vec<u8>>);
    impl Drop for Late {
        fn drop(&mut self) {
            let mut buf = vec![0u8; PAGE_SIZE];
            for (i, p) in self.1.iter().enumerate() {
                let s = slot(100 + i as u64);
                assert!(!matches!(
                    self.0.store(s, p, CgroupId::ROOT),
                    StoreOutcome::Rejected(_)
                ));
                assert_eq!(self.0.load(s, &mut buf, false).unwrap(), LoadOutcome::Hit);
                assert_eq!(&buf, p, "page {i} during teardown");
            }
            // Writeback reads the page into the thread's page buffer, destroyed by now.
            let freed: u64 = (0..4)
                .map(|_| self.0.shrinker_scan(CgroupId::ROOT, 0, 64).freed)
                .sum();
            assert!(freed > 0, "writeback during teardown");
        }
    }
    thread_local! {
        static LATE: std::cell::RefCell<Option<Late>> = const { std::cell::RefCell::new(None) };
    }
    for alg in [
        Algorithm::Lz4,
        Algorithm::Zstd { level: 3 },
        Algorithm::Deflate { level: 6 },
    ] {
        let (z, _swap) = cache(
            Params {
                compressor: alg,
                shrinker_enabled: true,
                ..small_params(1024)
            },
            256,
        );
        let z = Arc::new(z);
        let pages = mixed_pages(40);
        let z2 = z.clone();
        std::thread::spawn(move || {
            // Registered first, so destroyed after the cache's thread-locals, which the
            // operations below register.
            LATE.with(|l| *l.borrow_mut() = Some(Late(z2.clone(), pages)));
            let mut buf = vec![0u8; PAGE_SIZE];
            let p = vec![7u8; PAGE_SIZE];
            z2.store(slot(1), &p, CgroupId::ROOT);
            z2.load(slot(1), &mut buf, false).unwrap();
        })
        .join()
        .unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        for (i, p) in mixed_pages(40).iter().enumerate() {
            // From the pool, or from the swap file where the teardown wrote it back.
            assert_ne!(
                z.load(slot(100 + i as u64), &mut buf, false).unwrap(),
                LoadOutcome::Absent,
                "{alg:?} page {i}"
            );
            assert_eq!(&buf, p, "{alg:?} page {i}");
        }
    }
}
