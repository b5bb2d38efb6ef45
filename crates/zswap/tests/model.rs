// SPDX-License-Identifier: MIT
//! Proptest model test: the single-threaded cache against a HashMap oracle, with writeback,
//! the shrink worker, compressor switches and enable toggles mixed in.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use uzswap_zswap::{Algorithm, CgroupId, LoadOutcome, Params, SlotState, StoreOutcome, PAGE_SIZE};

const SLOTS: u64 = 40;

#[derive(Clone, Debug)]
enum Op {
    Store { slot: u64, page: usize, cg: usize },
    SwapOut { slot: u64, page: usize, cg: usize },
    Load { slot: u64, exclusive: bool },
    Invalidate { slot: u64 },
    Scan { n: u64 },
    Worker,
    Switch { alg: usize },
    Enable(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..SLOTS, 0..24usize, 0..3usize).prop_map(|(slot, page, cg)| Op::Store { slot, page, cg }),
        3 => (0..SLOTS, 0..24usize, 0..3usize).prop_map(|(slot, page, cg)| Op::SwapOut { slot, page, cg }),
        5 => (0..SLOTS, any::<bool>()).prop_map(|(slot, exclusive)| Op::Load { slot, exclusive }),
        2 => (0..SLOTS).prop_map(|slot| Op::Invalidate { slot }),
        1 => (1..8u64).prop_map(|n| Op::Scan { n }),
        1 => Just(Op::Worker),
        1 => (0..5usize).prop_map(|alg| Op::Switch { alg }),
        1 => any::<bool>().prop_map(Op::Enable),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn cache_matches_hashmap(ops in proptest::collection::vec(op(), 1..120)) {
        let pages = mixed_pages(24);
        // 512 KiB of "memory": a 25-page pool limit, so limits and rejections happen.
        let (z, swap) = cache(Params { shrinker_enabled: true, total_memory_bytes: 512 << 10, ..Params::default() }, SLOTS);
        let a = z.create_cgroup(CgroupId::ROOT).unwrap();
        let nowb = z.create_cgroup(CgroupId::ROOT).unwrap();
        z.set_cgroup_writeback(nowb, false).unwrap();
        let cgs = [CgroupId::ROOT, a, nowb];
        let algs = [Algorithm::Lz4, Algorithm::Zstd { level: 3 }, Algorithm::Deflate { level: 6 }, Algorithm::Lzo, Algorithm::LzoRle];
        let mut oracle: HashMap<u64, usize> = HashMap::new();
        let mut buf = vec![0u8; PAGE_SIZE];
        for op in ops {
            let op_dbg = format!("{op:?}");
            match op {
                Op::Store { slot: s, page, cg } => {
                    match z.store(slot(s), &pages[page], cgs[cg]) {
                        StoreOutcome::Rejected(_) => { oracle.remove(&s); }
                        _ => { oracle.insert(s, page); }
                    }
                }
                Op::SwapOut { slot: s, page, cg } => {
                    match z.swap_out(slot(s), &pages[page], cgs[cg]) {
                        Ok(_) => { oracle.insert(s, page); }
                        Err(_) => {
                            prop_assert_eq!(cg, 2, "only the no-writeback cgroup can fail");
                            oracle.remove(&s);
                        }
                    }
                }
                Op::Load { slot: s, exclusive } => {
                    let r = z.load(slot(s), &mut buf, exclusive).unwrap();
                    match oracle.get(&s) {
                        None => prop_assert_eq!(r, LoadOutcome::Absent),
                        Some(&p) => {
                            prop_assert_ne!(r, LoadOutcome::Absent);
                            prop_assert!(buf == pages[p], "slot {} content", s);
                            if exclusive { oracle.remove(&s); }
                        }
                    }
                }
                Op::Invalidate { slot: s } => { z.invalidate(slot(s)); oracle.remove(&s); }
                Op::Scan { n } => { for cg in cgs { z.shrinker_scan(cg, 0, n); } }
                Op::Worker => z.run_shrink_worker(),
                Op::Switch { alg } => z.set_params(Params { compressor: algs[alg], ..z.params() }).unwrap(),
                Op::Enable(on) => z.set_params(Params { enabled: on, ..z.params() }).unwrap(),
            }
            prop_assert!(z.wait_shrink_idle(Duration::from_secs(10)));
            // The structures agree with themselves, the counters and the pools.
            if let Err(m) = z.check_invariants() {
                prop_assert!(false, "after {:?}: {}", op_dbg, m);
            }
            // Counters agree with the slots, slots with the oracle.
            let (mut stored, mut zero, mut on_disk) = (0u64, 0u64, 0u64);
            for s in 0..SLOTS {
                match z.slot_state(slot(s)).unwrap() {
                    SlotState::Stored { .. } => stored += 1,
                    SlotState::Zero => zero += 1,
                    SlotState::Empty => on_disk += u64::from(swap.is_written(slot(s))),
                }
            }
            let c = z.counters();
            prop_assert_eq!(c.stored_pages, stored);
            prop_assert_eq!(c.zero_pages, zero);
            prop_assert_eq!(stored + zero + on_disk, oracle.len() as u64);
            prop_assert_eq!(c.cgroups[0].zswapped, stored * PAGE_SIZE as u64);
        }
    }
}
