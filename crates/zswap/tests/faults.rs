// SPDX-License-Identifier: MIT
//! Fault injection: swap-file write and read errors, a full disk, corruption (allocation
//! failures: `hooks.rs`'s unit test). Every failure is reported by the call that met it, and
//! nothing stored before is lost.

mod common;

use common::*;
use uzswap_zswap::{CgroupId, Error, LoadOutcome, Params, Zswap, PAGE_SIZE};

fn params() -> Params {
    Params {
        shrinker_enabled: true,
        ..small_params(1024)
    }
}

/// Store `n` pages (slots 0..n) and write the coldest `wb` back to the swap file; returns the
/// pages and the slots written back, coldest first.
fn setup(z: &Zswap, n: u64, wb: u64) -> (Vec<Vec<u8>>, Vec<u64>) {
    let pages = mixed_pages(n as usize);
    for i in 0..n {
        z.store(slot(i), &pages[i as usize], CgroupId::ROOT);
    }
    let lru: Vec<u64> = z
        .lru_slots(CgroupId::ROOT, 0)
        .iter()
        .map(|s| s.offset)
        .collect();
    clear_referenced(z);
    if wb > 0 {
        let r = z.shrinker_scan(CgroupId::ROOT, 0, wb);
        assert_eq!(r.freed, wb);
    }
    (pages, lru[..wb as usize].to_vec())
}

/// One pass over the LRU: every entry loses its referenced bit.
fn clear_referenced(z: &Zswap) {
    let n = z.lru_slots(CgroupId::ROOT, 0).len() as u64;
    let r = z.shrinker_scan(CgroupId::ROOT, 0, n);
    assert_eq!(r.freed, 0);
}

fn check_all(z: &Zswap, pages: &[Vec<u8>]) {
    let mut buf = vec![0u8; PAGE_SIZE];
    for (i, p) in pages.iter().enumerate() {
        let o = z
            .load(slot(i as u64), &mut buf, false)
            .unwrap_or_else(|e| panic!("slot {i}: {e}"));
        assert_ne!(o, LoadOutcome::Absent, "slot {i}");
        assert_eq!(&buf, p, "slot {i}");
    }
}

#[test]
fn writeback_write_errors_keep_entries() {
    let (z, swap) = cache(params(), 128);
    let (pages, _) = setup(&z, 100, 0);
    let in_pool = z.counters().stored_pages;
    swap.fault_injector().fail_next_writes(5);
    let r = z.shrinker_scan(CgroupId::ROOT, 0, 10);
    assert_eq!(r.freed, 5, "5 writes failed, the next 5 succeeded");
    let c = z.counters();
    assert_eq!(c.swap_write_errors, 5);
    assert_eq!(c.swap_no_space_errors, 0, "EIO is not a full disk");
    assert_eq!(c.reject_reclaim_fail, 5);
    assert_eq!(c.written_back_pages, 5);
    assert_eq!(c.stored_pages, in_pool - 5);
    check_all(&z, &pages);
}

#[test]
fn swap_out_full_disk_and_eio_are_reported() {
    let (z, swap) = cache(
        Params {
            enabled: false,
            ..params()
        },
        64,
    );
    let p = structured_page(1);
    assert!(z.swap_out(slot(0), &p, CgroupId::ROOT).is_ok());
    swap.fault_injector().no_space_next_writes(1);
    let e = z.swap_out(slot(1), &p, CgroupId::ROOT).unwrap_err();
    assert!(
        matches!(e, Error::Backing(uzswap_backing::Error::NoSpace { .. })),
        "{e}"
    );
    swap.fault_injector().fail_next_writes(1);
    assert!(z.swap_out(slot(2), &p, CgroupId::ROOT).is_err());
    let mut buf = vec![0u8; PAGE_SIZE];
    // The failed slots hold nothing (never stale data); the good one is intact.
    assert_eq!(
        z.load(slot(1), &mut buf, false).unwrap(),
        LoadOutcome::Absent
    );
    assert_eq!(
        z.load(slot(2), &mut buf, false).unwrap(),
        LoadOutcome::Absent
    );
    assert_eq!(
        z.load(slot(0), &mut buf, false).unwrap(),
        LoadOutcome::FromSwapFile
    );
    assert_eq!(buf, p);
    assert_eq!(z.counters().swap_write_errors, 2);
    assert_eq!(
        z.counters().swap_no_space_errors,
        1,
        "one of them a full disk"
    );
    // Writeback onto a full disk: the entries stay in the pool.
    z.set_params(Params {
        enabled: true,
        ..z.params()
    })
    .unwrap();
    let (pages, _) = setup(&z, 30, 0);
    swap.fault_injector().no_space_next_writes(1000);
    let r = z.shrinker_scan(CgroupId::ROOT, 0, 30);
    assert_eq!(r.freed, 0);
    let c = z.counters();
    assert_eq!(
        c.swap_no_space_errors,
        1 + 30,
        "every refused writeback is counted"
    );
    assert_eq!(c.swap_write_errors, 2 + 30);
    swap.fault_injector().clear();
    check_all(&z, &pages);
}

#[test]
fn read_errors_are_errors_and_retryable() {
    let (z, swap) = cache(params(), 128);
    let (pages, wb) = setup(&z, 50, 10);
    let cold = wb[0];
    swap.fault_injector().fail_next_reads(1);
    let mut buf = vec![0u8; PAGE_SIZE];
    assert!(z.load(slot(cold), &mut buf, true).is_err());
    assert_eq!(z.counters().swap_read_errors, 1);
    swap.fault_injector().short_next_reads(1);
    assert!(z.load(slot(cold), &mut buf, true).is_err());
    // The block is still there.
    assert_eq!(
        z.load(slot(cold), &mut buf, false).unwrap(),
        LoadOutcome::FromSwapFile
    );
    assert_eq!(buf, pages[cold as usize]);
    check_all(&z, &pages);
}

#[test]
fn corruption_is_detected_never_returned() {
    let (z, swap) = cache(params(), 128);
    let (pages, _) = setup(&z, 20, 0);
    let lru: Vec<u64> = z
        .lru_slots(CgroupId::ROOT, 0)
        .iter()
        .map(|s| s.offset)
        .collect();
    // The first block is written with a flipped bit, the second cleanly, then flipped in the file.
    swap.fault_injector().corrupt_next_writes(1);
    assert_eq!(z.shrinker_scan(CgroupId::ROOT, 0, 2).freed, 2);
    swap.corrupt_block(lru[1], 100).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    for &s in &lru[..2] {
        let e = z.load(slot(s), &mut buf, false).unwrap_err();
        assert!(
            matches!(e, Error::Backing(uzswap_backing::Error::Corrupt { .. })),
            "{e}"
        );
        assert!(buf.iter().all(|&b| b == 0), "no corrupt data handed out");
    }
    assert_eq!(z.counters().swap_checksum_errors, 2);
    // Everything else is intact.
    for i in 0..20u64 {
        if !lru[..2].contains(&i) {
            z.load(slot(i), &mut buf, false).unwrap();
            assert_eq!(buf, pages[i as usize]);
        }
    }
}
