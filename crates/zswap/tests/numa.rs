// SPDX-License-Identifier: MIT
//! Per-(cgroup, node) LRU lists on a 4-node cache (`Params::numa_nodes`, `store_on_node`), on
//! any host: placement, the shrinker's count and scan per node, the shrink worker, cgroup
//! removal, and the disk swap-in credit. Pages are incompressible (stored raw), so backing =
//! stored and a shrinker count is exactly the list length minus the credit.

mod common;

use common::*;
use uzswap_zswap::{
    CgroupId, Error, LoadOutcome, Params, RejectReason, SlotState, StoreOutcome, SwapSlot,
    WarmProtection, Zswap, MAX_NUMA_NODES, PAGE_SIZE,
};

const NODES: usize = 4;

fn numa_cache(warm: WarmProtection) -> Zswap {
    let params = Params {
        numa_nodes: NODES,
        shrinker_enabled: true,
        warm_protection: warm,
        ..small_params(1024)
    };
    cache(params, 1024).0
}

/// Slot `j` of node `node`'s range (each node stores into its own hundred).
fn on(node: usize, j: u64) -> SwapSlot {
    slot(node as u64 * 100 + j)
}

/// Store `per_node[n]` raw pages for `cg` on each node `n`, at `on(n, base..)`.
fn fill(z: &Zswap, cg: CgroupId, base: u64, per_node: [u64; NODES]) {
    for (node, &n) in per_node.iter().enumerate() {
        for j in base..base + n {
            let s = on(node, j);
            assert_eq!(
                z.store_on_node(s, &random_page(s.offset), cg, node),
                StoreOutcome::StoredIncompressible
            );
        }
    }
}

/// Write back `n` entries of (`cg`, `node`), one scanned entry at a time: under second chance
/// the walk first clears each entry's referenced bit, then writes back the coldest.
fn write_back(z: &Zswap, cg: CgroupId, node: usize, n: u64) {
    let mut freed = 0;
    for _ in 0..4 * n + 64 {
        if freed == n {
            return;
        }
        freed += z.shrinker_scan(cg, node, 1).freed;
    }
    panic!("({cg:?}, {node}): wrote back {freed} of {n}");
}

/// `shrinker_count` of every node of each cgroup.
fn counts(z: &Zswap, cgs: &[CgroupId]) -> Vec<[u64; NODES]> {
    cgs.iter()
        .map(|&cg| std::array::from_fn(|node| z.shrinker_count(cg, node)))
        .collect()
}

/// Load `s` and check it is `expect` and bit-identical to what was stored.
fn check_load(z: &Zswap, s: SwapSlot, expect: LoadOutcome) {
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(z.load(s, &mut buf, false).unwrap(), expect, "{s:?}");
    assert_eq!(buf, random_page(s.offset), "{s:?}");
}

#[test]
fn node_count_is_validated_and_fixed() {
    assert_eq!(Params::default().numa_nodes, uzswap_zswap::nr_nodes());
    for bad in [0, MAX_NUMA_NODES + 1] {
        let p = Params {
            numa_nodes: bad,
            ..small_params(1024)
        };
        assert!(
            matches!(Zswap::new(p), Err(Error::InvalidParam { .. })),
            "{bad}"
        );
    }
    let z = numa_cache(WarmProtection::SecondChance);
    assert!(z
        .set_params(Params {
            numa_nodes: 2,
            ..z.params()
        })
        .is_err());
    assert_eq!(z.params().numa_nodes, NODES);
    z.set_params(Params {
        max_pool_percent: 30,
        ..z.params()
    })
    .unwrap();
}

#[test]
fn entries_land_on_their_cgroup_and_node_list() {
    let z = numa_cache(WarmProtection::SecondChance);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    fill(&z, cg, 0, [2, 3, 1, 4]);
    fill(&z, CgroupId::ROOT, 50, [1, 1, 1, 1]);
    for node in 0..NODES {
        let n = [2, 3, 1, 4][node];
        assert_eq!(
            z.lru_slots(cg, node),
            (0..n).map(|j| on(node, j)).collect::<Vec<_>>()
        );
        assert_eq!(z.lru_slots(CgroupId::ROOT, node), vec![on(node, 50)]);
    }
    assert!(z.lru_slots(cg, NODES).is_empty());
    // A node beyond the cache's is refused without touching the slot.
    let s = on(1, 0);
    assert_eq!(
        z.store_on_node(s, &random_page(7), cg, NODES),
        StoreOutcome::Rejected(RejectReason::NoSuchNode)
    );
    assert!(matches!(
        z.swap_out_on_node(s, &random_page(7), cg, NODES),
        Err(Error::NoSuchNode(NODES))
    ));
    let mut buf = vec![0u8; PAGE_SIZE];
    assert!(matches!(
        z.load_on_node(s, &mut buf, false, NODES),
        Err(Error::NoSuchNode(NODES))
    ));
    check_load(&z, s, LoadOutcome::Hit);
    // Without a node the entry goes on the calling CPU's node list, one of the four.
    z.store(slot(999), &random_page(999), cg);
    let lists: Vec<usize> = (0..NODES)
        .filter(|&n| z.lru_slots(cg, n).contains(&slot(999)))
        .collect();
    assert_eq!(lists.len(), 1);
    // Replacing a page moves it to the new node's list.
    z.store_on_node(s, &random_page(s.offset), cg, 3);
    assert!(!z.lru_slots(cg, 1).contains(&s));
    assert_eq!(z.lru_slots(cg, 3).last(), Some(&s));
}

#[test]
fn shrinker_count_and_scan_are_per_node() {
    let z = numa_cache(WarmProtection::SecondChance);
    let cg = z.create_cgroup(CgroupId::ROOT).unwrap();
    let per_node = [3, 5, 7, 9];
    fill(&z, cg, 0, per_node);
    assert_eq!(counts(&z, &[cg]), vec![per_node]);
    assert_eq!(z.shrinker_count(cg, NODES), 0);
    assert!(z.shrinker_scan(cg, NODES, 1).stop);
    // Node 1 only: the first pass clears referenced bits, the second writes back.
    let r = z.shrinker_scan(cg, 1, 5);
    assert_eq!((r.scanned, r.freed, r.stop), (5, 0, true));
    let r = z.shrinker_scan(cg, 1, 100);
    assert_eq!((r.scanned, r.freed), (5, 5));
    assert!(z.lru_slots(cg, 1).is_empty());
    assert_eq!(counts(&z, &[cg]), vec![[3, 0, 7, 9]]);
    assert_eq!(z.counters().written_back_pages, 5);
    // The other nodes' entries stay in the pool.
    for (node, &n) in per_node.iter().enumerate() {
        for j in 0..n {
            let written = node == 1;
            assert_eq!(z.slot_state(on(node, j)) == Some(SlotState::Empty), written);
            let expect = if written {
                LoadOutcome::FromSwapFile
            } else {
                LoadOutcome::Hit
            };
            check_load(&z, on(node, j), expect);
        }
    }
}

#[test]
fn shrink_worker_reaches_every_node() {
    let z = numa_cache(WarmProtection::SecondChance);
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    let b = z.create_cgroup(CgroupId::ROOT).unwrap();
    fill(&z, a, 0, [16; NODES]);
    fill(&z, b, 50, [16; NODES]);
    // Shrink the limit to what is stored now: the worker goes down to 90% of it.
    let pages = z.pool_total_pages();
    z.set_params(Params {
        max_pool_percent: 100,
        accept_threshold_percent: 90,
        total_memory_bytes: pages * PAGE_SIZE as u64,
        ..z.params()
    })
    .unwrap();
    z.run_shrink_worker();
    assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
    for cg in [a, b] {
        for node in 0..NODES {
            let left = z.lru_slots(cg, node).len();
            assert!(left < 16, "({cg:?}, {node}): nothing written back");
        }
    }
    let c = z.counters();
    assert!(c.written_back_pages >= 8);
    for node in 0..NODES {
        for j in (0..16).chain(50..66) {
            let s = on(node, j);
            let expect = if z.slot_state(s) == Some(SlotState::Empty) {
                LoadOutcome::FromSwapFile
            } else {
                LoadOutcome::Hit
            };
            check_load(&z, s, expect);
        }
    }
}

#[test]
fn removing_a_cgroup_reparents_every_node_list() {
    let z = numa_cache(WarmProtection::SecondChance);
    let parent = z.create_cgroup(CgroupId::ROOT).unwrap();
    let child = z.create_cgroup(parent).unwrap();
    let per_node = [2, 4, 6, 8];
    fill(&z, child, 0, per_node);
    fill(&z, parent, 50, [1; NODES]);
    z.remove_cgroup(child).unwrap();
    assert_eq!(counts(&z, &[child]), vec![[0; NODES]], "offline");
    // The parent's count and scan cover its own and the child's list of each node.
    let with_own = per_node.map(|n| n + 1);
    assert_eq!(counts(&z, &[parent]), vec![with_own]);
    write_back(&z, parent, 2, with_own[2]);
    assert!(z.lru_slots(child, 2).is_empty() && z.lru_slots(parent, 2).is_empty());
    assert_eq!(counts(&z, &[parent]), vec![[3, 5, 0, 9]]);
    for (node, &n) in per_node.iter().enumerate() {
        for j in (0..n).chain([50]) {
            let expect = if node == 2 {
                LoadOutcome::FromSwapFile
            } else {
                LoadOutcome::Hit
            };
            check_load(&z, on(node, j), expect);
        }
    }
    let c = z.counters();
    let p = c.cgroups.iter().find(|x| x.id == parent.0).unwrap();
    assert_eq!(p.zswpwb, 7);
    assert_eq!(p.zswapped, (20 + 4 - 7) * PAGE_SIZE as u64);
}

/// The kernel credits a disk swap-in to the lruvec of the new folio: the page's memcg (the
/// swap_cgroup record) and the node the folio is allocated on, which is where the page is
/// read into, not where its zswap entry once was. So the credit goes to (owner, loading node).
#[test]
fn disk_swapin_credit_goes_to_owner_and_loading_node() {
    for warm in [WarmProtection::SecondChance, WarmProtection::ProtectedSize] {
        let z = numa_cache(warm);
        let a = z.create_cgroup(CgroupId::ROOT).unwrap();
        let b = z.create_cgroup(CgroupId::ROOT).unwrap();
        let cgs = [CgroupId::ROOT, a, b];
        fill(&z, a, 0, [6; NODES]);
        fill(&z, b, 50, [6; NODES]);
        // One of a's pages leaves node 2 by writeback, one of b's goes out by swap_out.
        write_back(&z, a, 2, 1);
        z.set_params(Params {
            enabled: false,
            ..z.params()
        })
        .unwrap();
        let out = on(1, 90);
        assert_eq!(
            z.swap_out_on_node(out, &random_page(out.offset), b, 1)
                .unwrap(),
            StoreOutcome::Rejected(RejectReason::Disabled)
        );
        // Each load must move exactly one count down by one: (`cg`, `node`), or for a load
        // without a node whichever of `cg`'s lists moved (the calling CPU's node). Second
        // chance consumes the credit with that count; the protected estimate keeps it.
        let mut expect = counts(&z, &cgs);
        let mut credited = |cg: usize, node: Option<usize>| {
            let after = counts(&z, &cgs);
            let node = node
                .or_else(|| (0..NODES).find(|&n| after[cg][n] != expect[cg][n]))
                .expect("a credit");
            expect[cg][node] -= 1;
            assert_eq!(after, expect, "{warm:?}: ({}, {node})", cgs[cg].0);
            if warm == WarmProtection::SecondChance {
                expect[cg][node] += 1;
                assert_eq!(counts(&z, &cgs), expect, "{warm:?}: consumed once");
            }
        };
        let mut buf = vec![0u8; PAGE_SIZE];
        let s = on(2, 0);
        assert_eq!(
            z.load_on_node(s, &mut buf, false, 3).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, random_page(s.offset));
        credited(1, Some(3));
        assert_eq!(
            z.load_on_node(out, &mut buf, true, 0).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, random_page(out.offset));
        credited(2, Some(0));
        assert_eq!(
            z.load(s, &mut buf, false).unwrap(),
            LoadOutcome::FromSwapFile
        );
        credited(1, None);
    }
}
