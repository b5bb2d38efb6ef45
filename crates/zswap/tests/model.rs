// SPDX-License-Identifier: MIT
//! Proptest model test: the single-threaded cache against a HashMap oracle, with writeback,
//! the shrink worker, compressor switches, enable toggles and other pools' pages under the
//! same limit mixed in; and the same with the cache variants (zero pages with entries,
//! per-pool LRU lists) and their own operations.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use uzswap_zswap::{
    Algorithm, CgroupId, LoadOutcome, LruMode, Params, SlotState, StoreOutcome, PAGE_SIZE,
};

const SLOTS: u64 = 40;

#[derive(Clone, Debug)]
enum Op {
    Store {
        slot: u64,
        page: usize,
        cg: usize,
    },
    SwapOut {
        slot: u64,
        page: usize,
        cg: usize,
    },
    Load {
        slot: u64,
        exclusive: bool,
    },
    Invalidate {
        slot: u64,
    },
    Scan {
        n: u64,
    },
    Worker,
    Switch {
        alg: usize,
    },
    Enable(bool),
    /// `Zswap::set_pool_pages_outside`: pages of other pools under the same limit.
    Outside {
        pages: u64,
    },
    /// `Zswap::set_outside_lru_oldest`: another cache's oldest entry, `older` sequence numbers
    /// before this one's oldest (past the hand-over margin from 256 on), or none.
    OutsideOldest {
        older: Option<u32>,
    },
    /// `Params::zero_page_entries` (variant test only).
    ZeroEntries(bool),
    /// `Zswap::shrink_slab` at this priority (variant test only).
    ShrinkSlab {
        priority: u32,
    },
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
        1 => prop_oneof![Just(0u64), 0..30u64].prop_map(|pages| Op::Outside { pages }),
        1 => proptest::option::of(0..600u32).prop_map(|older| Op::OutsideOldest { older }),
    ]
}

/// The operations of the plain test plus the variants' own.
fn variant_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => op(),
        1 => any::<bool>().prop_map(Op::ZeroEntries),
        1 => (0..3u32).prop_map(|priority| Op::ShrinkSlab { priority }),
    ]
}

/// Runs `ops` on a cache made with `params` (a 25-page pool limit) against a HashMap oracle,
/// checking contents, slots and counters after every operation.
fn run_model(params: Params, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let pages = mixed_pages(24);
    // 512 KiB of "memory": a 25-page pool limit, so limits and rejections happen.
    let (z, swap) = cache(
        Params {
            shrinker_enabled: true,
            total_memory_bytes: 512 << 10,
            ..params
        },
        SLOTS,
    );
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    let nowb = z.create_cgroup(CgroupId::ROOT).unwrap();
    z.set_cgroup_writeback(nowb, false).unwrap();
    let cgs = [CgroupId::ROOT, a, nowb];
    let algs = [
        Algorithm::Lz4,
        Algorithm::Zstd { level: 3 },
        Algorithm::Deflate { level: 6 },
        Algorithm::Lzo,
        Algorithm::LzoRle,
    ];
    let mut oracle: HashMap<u64, usize> = HashMap::new();
    let mut buf = vec![0u8; PAGE_SIZE];
    for op in ops {
        let op_dbg = format!("{op:?}");
        match op {
            Op::Store { slot: s, page, cg } => match z.store(slot(s), &pages[page], cgs[cg]) {
                StoreOutcome::Rejected(_) => {
                    oracle.remove(&s);
                }
                _ => {
                    oracle.insert(s, page);
                }
            },
            Op::SwapOut { slot: s, page, cg } => match z.swap_out(slot(s), &pages[page], cgs[cg]) {
                Ok(_) => {
                    oracle.insert(s, page);
                }
                Err(_) => {
                    prop_assert_eq!(cg, 2, "only the no-writeback cgroup can fail");
                    oracle.remove(&s);
                }
            },
            Op::Load { slot: s, exclusive } => {
                let r = z.load(slot(s), &mut buf, exclusive).unwrap();
                match oracle.get(&s) {
                    None => prop_assert_eq!(r, LoadOutcome::Absent),
                    Some(&p) => {
                        prop_assert_ne!(r, LoadOutcome::Absent);
                        prop_assert!(buf == pages[p], "slot {} content", s);
                        if exclusive {
                            oracle.remove(&s);
                        }
                    }
                }
            }
            Op::Invalidate { slot: s } => {
                z.invalidate(slot(s));
                oracle.remove(&s);
            }
            Op::Scan { n } => {
                for cg in cgs {
                    z.shrinker_scan(cg, 0, n);
                }
            }
            Op::Worker => z.run_shrink_worker(),
            Op::Switch { alg } => z
                .set_params(Params {
                    compressor: algs[alg],
                    ..z.params()
                })
                .unwrap(),
            Op::Enable(on) => z
                .set_params(Params {
                    enabled: on,
                    ..z.params()
                })
                .unwrap(),
            Op::Outside { pages } => z.set_pool_pages_outside(pages),
            Op::OutsideOldest { older } => z.set_outside_lru_oldest(
                older.and_then(|o| z.lru_oldest().map(|own| own.wrapping_sub(o))),
            ),
            Op::ZeroEntries(on) => z
                .set_params(Params {
                    zero_page_entries: on,
                    ..z.params()
                })
                .unwrap(),
            Op::ShrinkSlab { priority } => {
                for cg in cgs {
                    z.shrink_slab(cg, 0, priority);
                }
            }
        }
        prop_assert!(z.wait_shrink_idle(Duration::from_secs(10)));
        // The structures agree with themselves, the counters and the pools.
        if let Err(m) = z.check_invariants() {
            prop_assert!(false, "after {:?}: {}", op_dbg, m);
        }
        // Counters agree with the slots, slots with the oracle.
        let (mut stored, mut zero, mut zero_entries, mut on_disk) = (0u64, 0u64, 0u64, 0u64);
        for s in 0..SLOTS {
            match z.slot_state(slot(s)).unwrap() {
                SlotState::Stored { length, .. } => {
                    stored += 1;
                    zero_entries += u64::from(length == 0);
                }
                SlotState::Zero => zero += 1,
                SlotState::Empty => on_disk += u64::from(swap.is_written(slot(s))),
            }
        }
        let c = z.counters();
        prop_assert_eq!(c.stored_pages, stored);
        prop_assert_eq!(c.zero_pages, zero);
        prop_assert_eq!(c.same_filled_pages, zero_entries);
        prop_assert_eq!(stored + zero + on_disk, oracle.len() as u64);
        prop_assert_eq!(c.cgroups[0].zswapped, stored * PAGE_SIZE as u64);
        // Zero entries hold no pool reference and no LRU node.
        let refs: u64 = z.pools().iter().map(|p| p.references).sum();
        prop_assert_eq!(refs, stored - zero_entries + 1);
        let nodes = z.params().numa_nodes;
        let listed: usize = cgs
            .iter()
            .flat_map(|&cg| (0..nodes).map(move |n| (cg, n)))
            .map(|(cg, n)| z.lru_slots(cg, n).len())
            .sum();
        prop_assert_eq!(listed as u64, stored - zero_entries);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn cache_matches_hashmap(ops in proptest::collection::vec(op(), 1..120)) {
        run_model(Params::default(), ops)?;
    }

    /// Zero pages with entries and per-pool LRU lists, each on or off, with `zero_page_entries`
    /// toggled at run time and `shrink_slab` asking each pool's shrinker.
    #[test]
    fn variants_match_hashmap(
        zero_page_entries in any::<bool>(),
        per_pool in any::<bool>(),
        ops in proptest::collection::vec(variant_op(), 1..120),
    ) {
        let lru = if per_pool { LruMode::PerPool } else { LruMode::Global };
        run_model(Params { zero_page_entries, lru, numa_nodes: 1, ..Params::default() }, ops)?;
    }
}
