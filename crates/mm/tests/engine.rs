// SPDX-License-Identifier: MIT
//! The engine against an oracle of page contents, with an in-memory front: every page reads
//! back what was last written, through any mix of reclaim, readahead, frees and limit changes;
//! the kernel's aging rules hold on small cases.

use std::collections::HashMap;

use uzswap_mm::{Accounting, Config, Error, Fault, Front, MemCg, Mm, PageId, ReadIn, WriteOut};

/// Keeps each slot's content as a number; "pool" slots are dropped when read (exclusive).
#[derive(Default)]
struct MemFront {
    /// What each resident page holds (the page table's memory).
    mem: HashMap<u32, u64>,
    slots: HashMap<u32, (u64, bool)>,
    /// Contents to write next, set by the test before a write access.
    outs: u64,
    ins: u64,
    reject_every: u64,
}

impl Front for MemFront {
    fn swap_out(&mut self, page: PageId, slot: u32, _cg: MemCg) -> Result<WriteOut, Error> {
        self.outs += 1;
        let v = *self
            .mem
            .get(&page.0)
            .expect("swap-out of a page with no memory");
        let disk = self.reject_every != 0 && self.outs % self.reject_every == 0;
        self.slots.insert(slot, (v, disk));
        Ok(if disk {
            WriteOut::Disk
        } else {
            WriteOut::Zswap
        })
    }
    fn swap_in(&mut self, page: PageId, slot: u32, _cg: MemCg) -> Result<ReadIn, Error> {
        self.ins += 1;
        let (v, disk) = *self
            .slots
            .get(&slot)
            .ok_or_else(|| Error::Front(format!("slot {slot} empty")))?;
        self.mem.insert(page.0, v);
        if disk {
            Ok(ReadIn::Disk)
        } else {
            self.slots.remove(&slot);
            Ok(ReadIn::Zswap)
        }
    }
    fn release(&mut self, page: PageId) {
        self.mem.remove(&page.0);
    }
    fn free_slot(&mut self, slot: u32) {
        self.slots.remove(&slot);
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn write(mm: &mut Mm, fr: &mut MemFront, p: PageId, v: u64) {
    let f = mm.access(p, true, fr).unwrap();
    // The page is mapped now; its memory takes the new content.
    assert!(mm.page_state(p).mapped, "{f:?}");
    fr.mem.insert(p.0, v);
}

fn read(mm: &mut Mm, fr: &mut MemFront, p: PageId) -> Option<u64> {
    mm.access(p, false, fr).unwrap();
    let s = mm.page_state(p);
    if s.zero_mapped {
        None
    } else {
        Some(*fr.mem.get(&p.0).expect("mapped page without memory"))
    }
}

#[test]
fn contents_survive_reclaim_readahead_and_frees() {
    for (accounting, reject_every) in [
        (Accounting::V1, 0),
        (Accounting::V1, 3),
        (Accounting::V2, 7),
    ] {
        let mut mm = Mm::new(Config {
            accounting,
            swap_slots: 8192,
            ..Config::default()
        });
        let mut fr = MemFront {
            reject_every,
            ..MemFront::default()
        };
        let cg = mm.create_cgroup(MemCg::ROOT).unwrap();
        mm.set_limit(cg, Some(200), &mut fr).unwrap();
        let mut pages: Vec<PageId> = (0..1000).map(|_| mm.new_page(cg).unwrap()).collect();
        let mut oracle: HashMap<u32, u64> = HashMap::new();
        let mut rng = Rng(0x9e3779b97f4a7c15);
        for step in 0..60_000u64 {
            let r = rng.next();
            let i = (r % pages.len() as u64) as usize;
            let p = pages[i];
            match (r >> 32) % 10 {
                0..=3 => {
                    write(&mut mm, &mut fr, p, step);
                    oracle.insert(p.0, step);
                }
                4..=8 => {
                    let got = read(&mut mm, &mut fr, p);
                    assert_eq!(got, oracle.get(&p.0).copied(), "page {} step {step}", p.0);
                }
                _ => {
                    mm.free_page(p, &mut fr);
                    oracle.remove(&p.0);
                    pages[i] = mm.new_page(cg).unwrap();
                }
            }
            if step % 5000 == 0 {
                mm.check().unwrap();
            }
        }
        mm.check().unwrap();
        let s = mm.stats();
        assert!(s.pgsteal_anon > 1000, "{s:?}");
        assert!(s.swap_ra > 0, "{s:?}");
        assert!(
            s.workingset_refault_anon > 0 && s.workingset_activate_anon > 0,
            "{s:?}"
        );
        let c = &mm.cgroup_stats()[1];
        assert!(c.usage_pages <= 200, "{c:?}");
        // Free everything: no charge, no slot, no cache content left.
        for p in pages {
            mm.free_page(p, &mut fr);
        }
        assert_eq!(mm.stats().swap_used, 0);
        assert!(fr.slots.is_empty());
        assert_eq!(mm.cgroup_stats()[1].usage_pages, 0);
        mm.remove_cgroup(cg).unwrap();
    }
}

/// A page touched again between two scans is activated; one touched once is reclaimed on the
/// second scan (folio_check_references).
#[test]
fn two_scan_rule() {
    let mut mm = Mm::new(Config {
        accounting: Accounting::V1,
        swap_slots: 4096,
        ..Config::default()
    });
    let mut fr = MemFront::default();
    let cg = mm.create_cgroup(MemCg::ROOT).unwrap();
    mm.set_limit(cg, Some(64), &mut fr).unwrap();
    let hot = mm.new_page(cg).unwrap();
    write(&mut mm, &mut fr, hot, 1);
    let mut cold = Vec::new();
    for i in 0..2000u64 {
        let p = mm.new_page(cg).unwrap();
        write(&mut mm, &mut fr, p, i);
        cold.push(p);
        // Keep the hot page in use.
        assert_eq!(read(&mut mm, &mut fr, hot), Some(1));
    }
    let s = mm.page_state(hot);
    assert!(s.present, "{s:?}");
    assert!(mm.stats().pgactivate > 0);
    // The cold pages written once are mostly out.
    let out = cold.iter().filter(|p| !mm.page_state(**p).present).count();
    assert!(out > 1900, "{out}");
    // A swapped-in page read (not written) keeps its slot: a clean drop needs no new store.
    let p = cold[10];
    let outs = fr.outs;
    assert!(matches!(
        mm.access(p, false, &mut fr).unwrap(),
        Fault::Major(ReadIn::Zswap)
    ));
    assert!(mm.page_state(p).slot.is_some());
    assert!(fr.outs == outs);
}

#[test]
fn memory_reclaim_and_limits() {
    let mut mm = Mm::new(Config {
        accounting: Accounting::V2,
        swap_slots: 4096,
        ..Config::default()
    });
    let mut fr = MemFront::default();
    let cg = mm.create_cgroup(MemCg::ROOT).unwrap();
    let pages: Vec<PageId> = (0..500).map(|_| mm.new_page(cg).unwrap()).collect();
    for (i, p) in pages.iter().enumerate() {
        write(&mut mm, &mut fr, *p, i as u64);
    }
    assert_eq!(mm.cgroup_stats()[1].usage_pages, 500);
    // memory.reclaim of 200 pages succeeds and leaves about 300.
    let got = mm.reclaim(cg, 200, &mut fr).unwrap();
    assert!(got >= 200, "{got}");
    assert!(mm.cgroup_stats()[1].usage_pages <= 300);
    // Lowering the limit reclaims down to it.
    mm.set_limit(cg, Some(100), &mut fr).unwrap();
    assert!(mm.cgroup_stats()[1].usage_pages <= 100);
    // Swappiness 0: nothing can be reclaimed, memory.reclaim says EAGAIN.
    mm.set_swappiness(cg, 0).unwrap();
    assert!(matches!(
        mm.reclaim(cg, 50, &mut fr),
        Err(Error::Again { .. })
    ));
}

/// The shortcuts a front with a flat page table takes (`fault_new_page_at` for a first touch,
/// `free_pages` for a range) leave the engine exactly as the general calls do
/// (`new_page_at` then `access`, `free_page` one at a time): same counters, page states and
/// slot contents after every step, with reclaim, refaults and frees mixed in.
#[test]
fn fused_first_touch_and_range_free_match_the_general_calls() {
    for accounting in [Accounting::V1, Accounting::V2] {
        let cfg = Config {
            accounting,
            swap_slots: 8192,
            ..Config::default()
        };
        let (mut a, mut b) = (Mm::new(cfg.clone()), Mm::new(cfg));
        let (mut fa, mut fb) = (MemFront::default(), MemFront::default());
        let parent = a.create_cgroup(MemCg::ROOT).unwrap();
        assert_eq!(b.create_cgroup(MemCg::ROOT).unwrap(), parent);
        let mut cgs = vec![];
        for _ in 0..2 {
            let c = a.create_cgroup(parent).unwrap();
            assert_eq!(b.create_cgroup(parent).unwrap(), c);
            cgs.push(c);
        }
        a.set_limit(parent, Some(300), &mut fa).unwrap();
        b.set_limit(parent, Some(300), &mut fb).unwrap();
        const N: u32 = 1200;
        a.reserve_pages(N as usize);
        b.reserve_pages(N as usize);
        // Pages [0, 600) belong to the first cgroup, the rest to the second.
        let cg_of = |p: u32| cgs[(p / 600) as usize];
        let mut rng = Rng(0x2545f4914f6cdd1d);
        for step in 0..40_000u64 {
            let r = rng.next();
            let p = (r % u64::from(N)) as u32;
            let write = (r >> 32) % 3 != 0;
            if (r >> 40) % 50 == 0 {
                // A process exits: free a range of its pages.
                let len = 1 + (r >> 48) % 64;
                let first = p - p % 600;
                let start = first + ((r >> 20) as u32 % 600);
                let end = (u64::from(start) + len).min(u64::from(first + 600)) as u32;
                let ids: Vec<u32> = (start..end).filter(|&i| a.is_live(PageId(i))).collect();
                for &i in &ids {
                    a.free_page(PageId(i), &mut fa);
                }
                b.free_pages(&ids, &mut fb);
            } else if !a.is_live(PageId(p)) {
                assert!(!b.is_live(PageId(p)));
                a.new_page_at(cg_of(p), PageId(p)).unwrap();
                let ra = a.access(PageId(p), write, &mut fa).unwrap();
                let rb = b
                    .fault_new_page_at(cg_of(p), PageId(p), write, &mut fb)
                    .unwrap();
                assert_eq!(ra, rb, "step {step}");
            } else {
                let ra = a.access(PageId(p), write, &mut fa).unwrap();
                let rb = b.access(PageId(p), write, &mut fb).unwrap();
                assert_eq!(ra, rb, "step {step}");
            }
            if write {
                fa.mem.insert(p, step);
                fb.mem.insert(p, step);
            }
            assert_eq!(a.stats(), b.stats(), "step {step}");
            if step % 1000 == 0 {
                a.check().unwrap();
                b.check().unwrap();
                assert_eq!(
                    format!("{:?}", a.cgroup_stats()),
                    format!("{:?}", b.cgroup_stats())
                );
                for i in 0..N {
                    assert_eq!(a.page_state(PageId(i)), b.page_state(PageId(i)), "page {i}");
                }
                assert_eq!(fa.slots, fb.slots);
            }
        }
        assert!(a.stats().pgsteal_anon > 1000, "{:?}", a.stats());
    }
}
