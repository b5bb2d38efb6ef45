//! Several NUMA nodes on any machine (`Params::numa_nodes` with `store_on_node` /
//! `load_on_node`): entries sit on the list of (their cgroup, their page's node), the
//! memory-pressure shrinker counts and scans one (cgroup, node) at a time, the shrink worker
//! reaches every node, cgroup removal reparents every node's list, and a page read back from
//! the swap file credits (the cgroup that owned it, the node it comes back to).

mod common;

use common::{binary_pages, cache, slot, small_params};
use uzswap_swapfile::SwapSlot;
use uzswap_zswap::{
    CgroupId, Error, LoadOutcome, Params, RejectReason, SlotState, StoreOutcome, WarmProtection,
    Zswap, PAGE_SIZE,
};

const NODES: usize = 4;

fn params(warm: WarmProtection) -> Params {
    Params {
        numa_nodes: NODES,
        shrinker_enabled: true,
        warm_protection: warm,
        ..small_params(1024)
    }
}

fn store_on(z: &Zswap, pages: &[Vec<u8>], slots: std::ops::Range<u64>, cg: CgroupId, node: usize) {
    for s in slots {
        let out = z.store_on_node(slot(s), &pages[s as usize], cg, node);
        assert!(
            matches!(
                out,
                StoreOutcome::Stored | StoreOutcome::StoredIncompressible
            ),
            "slot {s}: {out:?}"
        );
    }
}

fn slots(r: std::ops::Range<u64>) -> Vec<SwapSlot> {
    r.map(slot).collect()
}

fn load_all(z: &Zswap, pages: &[Vec<u8>], r: std::ops::Range<u64>, want: LoadOutcome) {
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in r {
        assert_eq!(z.load(slot(s), &mut buf, false).unwrap(), want, "slot {s}");
        assert_eq!(buf, pages[s as usize], "slot {s} reads back bit-identical");
    }
}

#[test]
fn entries_live_on_the_list_of_their_cgroup_and_node() {
    let pages = binary_pages(64);
    let (z, _swap) = cache(params(WarmProtection::SecondChance), 64);
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    store_on(&z, &pages, 0..8, a, 1);
    store_on(&z, &pages, 8..16, a, 3);
    store_on(&z, &pages, 16..24, CgroupId::ROOT, 1);
    assert_eq!(z.lru_slots(a, 1), slots(0..8));
    assert_eq!(z.lru_slots(a, 3), slots(8..16));
    assert_eq!(z.lru_slots(CgroupId::ROOT, 1), slots(16..24));
    for n in [0, 2] {
        assert!(z.lru_slots(a, n).is_empty() && z.lru_slots(CgroupId::ROOT, n).is_empty());
    }
    // The count is per (cgroup, node); both of a's lists hold 8 entries at one ratio.
    assert_eq!(z.shrinker_count(a, 0), 0);
    assert_eq!(z.shrinker_count(a, 2), 0);
    let (c1, c3) = (z.shrinker_count(a, 1), z.shrinker_count(a, 3));
    assert!(c1 > 0 && c1 == c3, "{c1} {c3}");

    // Scanning node 1 writes back node 1's entries only (first pass: second chance).
    let r = z.shrinker_scan(a, 1, 8);
    assert_eq!((r.scanned, r.freed), (8, 0));
    let r = z.shrinker_scan(a, 1, 8);
    assert_eq!((r.scanned, r.freed), (8, 8));
    assert!(z.lru_slots(a, 1).is_empty());
    assert_eq!(z.lru_slots(a, 3), slots(8..16));
    assert_eq!(z.lru_slots(CgroupId::ROOT, 1), slots(16..24));
    load_all(&z, &pages, 0..8, LoadOutcome::FromSwapFile);
    load_all(&z, &pages, 8..24, LoadOutcome::Hit);

    // A node beyond the count is refused, never filed somewhere else.
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(
        z.store_on_node(slot(40), &pages[40], a, NODES),
        StoreOutcome::Rejected(RejectReason::NoSuchNode)
    );
    assert!(matches!(
        z.load_on_node(slot(40), &mut buf, false, NODES),
        Err(Error::NoSuchNode(NODES))
    ));
    assert!(matches!(
        z.set_params(Params {
            numa_nodes: 2,
            ..z.params()
        }),
        Err(Error::InvalidParam(_))
    ));
}

#[test]
fn the_shrink_worker_reaches_every_node() {
    let pages = binary_pages(256);
    let (z, _swap) = cache(params(WarmProtection::SecondChance), 256);
    for n in 0..NODES as u64 {
        store_on(&z, &pages, n * 64..(n + 1) * 64, CgroupId::ROOT, n as usize);
    }
    let full = z.pool_total_pages();
    // A limit of about half the pool: the worker writes back round-robin over the nodes.
    let mut p = z.params();
    p.total_memory_bytes = full * PAGE_SIZE as u64 * 2;
    p.max_pool_percent = 25;
    p.accept_threshold_percent = 100;
    z.set_params(p).unwrap();
    z.run_shrink_worker();
    assert!(z.pool_total_pages() <= z.params().accept_threshold_pages());
    for n in 0..NODES {
        let left = z.lru_slots(CgroupId::ROOT, n).len();
        assert!(left < 64, "node {n} was shrunk ({left} left)");
    }
    for n in 0..NODES as u64 {
        let mut buf = vec![0u8; PAGE_SIZE];
        for s in n * 64..(n + 1) * 64 {
            z.load(slot(s), &mut buf, false).unwrap();
            assert_eq!(buf, pages[s as usize]);
        }
    }
}

#[test]
fn removing_a_cgroup_reparents_every_node_list() {
    let pages = binary_pages(64);
    let (z, _swap) = cache(params(WarmProtection::SecondChance), 64);
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    for n in 0..NODES as u64 {
        store_on(&z, &pages, n * 4..(n + 1) * 4, a, n as usize);
    }
    z.remove_cgroup(a).unwrap();
    for n in 0..NODES as u64 {
        // The parent's scan of node n covers a's node-n list, and nothing else.
        assert!(z.shrinker_count(CgroupId::ROOT, n as usize) > 0);
        z.shrinker_scan(CgroupId::ROOT, n as usize, 4); // second chance
        let r = z.shrinker_scan(CgroupId::ROOT, n as usize, 4);
        assert_eq!(r.freed, 4, "node {n}");
        load_all(&z, &pages, n * 4..(n + 1) * 4, LoadOutcome::FromSwapFile);
        load_all(&z, &pages, (n + 1) * 4..16, LoadOutcome::Hit);
    }
}

/// Entries of `a` on nodes 1 and 3 and of a sibling `b` on node 3; some of a's node-1
/// entries are written back. Returns the written-back slots.
fn refault_setup(warm: WarmProtection) -> (Zswap, Vec<Vec<u8>>, CgroupId, CgroupId, Vec<u64>) {
    let pages = binary_pages(64);
    let (z, _swap) = cache(params(warm), 64);
    let a = z.create_cgroup(CgroupId::ROOT).unwrap();
    let b = z.create_cgroup(CgroupId::ROOT).unwrap();
    store_on(&z, &pages, 0..8, a, 1);
    store_on(&z, &pages, 8..16, a, 3);
    store_on(&z, &pages, 16..24, b, 3);
    // One entry at a time: the protected-size policy refuses to scan into its warm estimate.
    for _ in 0..16 {
        z.shrinker_scan(a, 1, 1);
    }
    let on_disk: Vec<u64> = (0..8)
        .filter(|&s| z.slot_state(slot(s)) == Some(SlotState::Empty))
        .collect();
    assert!(on_disk.len() >= 2, "{warm:?}: written back {on_disk:?}");
    (z, pages, a, b, on_disk)
}

#[test]
fn a_disk_swapin_credits_its_owner_cgroup_on_the_loading_node() {
    for warm in [WarmProtection::SecondChance, WarmProtection::ProtectedSize] {
        let (z, pages, a, b, on_disk) = refault_setup(warm);
        let before = [
            z.shrinker_count(a, 1),
            z.shrinker_count(a, 3),
            z.shrinker_count(b, 3),
            z.shrinker_count(CgroupId::ROOT, 3),
        ];
        let mut buf = vec![0u8; PAGE_SIZE];
        for &s in &on_disk[..on_disk.len() / 2] {
            assert_eq!(
                z.load_on_node(slot(s), &mut buf, true, 3).unwrap(),
                LoadOutcome::FromSwapFile
            );
            assert_eq!(buf, pages[s as usize]);
        }
        let after = [
            z.shrinker_count(a, 1),
            z.shrinker_count(a, 3),
            z.shrinker_count(b, 3),
            z.shrinker_count(CgroupId::ROOT, 3),
        ];
        assert!(
            after[1] < before[1],
            "{warm:?}: (a, node 3) was credited: {before:?} -> {after:?}"
        );
        assert_eq!(
            after[0], before[0],
            "{warm:?}: (a, node 1) was not credited"
        );
        assert_eq!(
            after[2], before[2],
            "{warm:?}: the sibling b was not credited"
        );
        assert_eq!(
            after[3], before[3],
            "{warm:?}: the root (where every credit used to go) was not credited"
        );
    }
}

#[test]
fn a_disk_swapin_of_a_removed_cgroup_credits_its_parent() {
    let (z, pages, a, _b, _) = refault_setup(WarmProtection::SecondChance);
    let p = z.create_cgroup(CgroupId::ROOT).unwrap();
    // Move the setup one level down: c under p owns pages on disk, then goes away.
    let c = z.create_cgroup(p).unwrap();
    store_on(&z, &pages, 32..40, c, 2);
    store_on(&z, &pages, 40..48, p, 2);
    while !z.lru_slots(c, 2).is_empty() {
        z.shrinker_scan(c, 2, 8);
    }
    z.remove_cgroup(c).unwrap();
    let before = (z.shrinker_count(p, 2), z.shrinker_count(a, 2));
    let mut buf = vec![0u8; PAGE_SIZE];
    for s in 32..36 {
        assert_eq!(
            z.load_on_node(slot(s), &mut buf, true, 2).unwrap(),
            LoadOutcome::FromSwapFile
        );
        assert_eq!(buf, pages[s as usize]);
    }
    let after = (z.shrinker_count(p, 2), z.shrinker_count(a, 2));
    assert!(
        after.0 < before.0,
        "p inherits c's credit: {before:?} -> {after:?}"
    );
    assert_eq!(after.1, before.1);
}
