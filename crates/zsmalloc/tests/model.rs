// SPDX-License-Identifier: MIT
//! Model-based test: random alloc / write / read / free / compact sequences against a simple
//! reference model of the kernel's placement rules (per class: zspages with LIFO slot free
//! lists, fullness-group lists with new entries at the head, "fullest non-full first"
//! allocation, sparsest-into-fullest compaction) and a `HashMap` of handle -> bytes.
//!
//! After every step: contents are bit-identical, handles are stable across compaction, and
//! obj_used, obj_allocated, pages_used, the fullness-group counts and the pool's page count
//! are what the model predicts; `check_invariants()` holds.

use std::collections::HashMap;

use proptest::prelude::*;
use uzswap_zsmalloc::{ChainRule, Error, Handle, Pool, PoolConfig, NR_FULLNESS_GROUPS};

fn group(inuse: usize, objs_per_zspage: usize) -> usize {
    if inuse == 0 {
        0
    } else if inuse == objs_per_zspage {
        11
    } else {
        100 * inuse / objs_per_zspage / 10 + 1
    }
}

struct MZs {
    inuse: usize,
    /// Free slot stack; the last element is the free-list head.
    free: Vec<usize>,
    slots: Vec<Option<Handle>>,
}

struct MClass {
    pages_per_zspage: usize,
    objs_per_zspage: usize,
    huge: bool,
    zs: HashMap<usize, MZs>,
    /// Zspage ids per group; index 0 is the list head.
    groups: [Vec<usize>; NR_FULLNESS_GROUPS],
    next_id: usize,
}

impl MClass {
    fn group_of(&self, id: usize) -> usize {
        group(self.zs[&id].inuse, self.objs_per_zspage)
    }
    fn unlist(&mut self, id: usize) {
        for g in self.groups.iter_mut() {
            if let Some(p) = g.iter().position(|&x| x == id) {
                g.remove(p);
                return;
            }
        }
        panic!("zspage {id} not listed");
    }
    fn list(&mut self, id: usize) {
        let g = self.group_of(id);
        self.groups[g].insert(0, id);
    }
    fn fix(&mut self, id: usize) {
        self.unlist(id);
        self.list(id);
    }
    fn malloc(&mut self, id: usize, h: Handle) -> usize {
        let z = self.zs.get_mut(&id).unwrap();
        let idx = z.free.pop().unwrap();
        z.slots[idx] = Some(h);
        z.inuse += 1;
        idx
    }
    fn obj_free(&mut self, id: usize, idx: usize) {
        let z = self.zs.get_mut(&id).unwrap();
        z.slots[idx] = None;
        z.free.push(idx);
        z.inuse -= 1;
    }
    fn allocated(&self) -> usize {
        self.zs.len() * self.objs_per_zspage
    }
    fn used(&self) -> usize {
        self.zs.values().map(|z| z.inuse).sum()
    }
    fn can_compact(&self) -> usize {
        (self.allocated() - self.used()) / self.objs_per_zspage * self.pages_per_zspage
    }
}

struct Model {
    classes: Vec<MClass>,
    /// handle -> (class position, zspage id, slot, contents)
    objs: HashMap<Handle, (usize, usize, usize, Vec<u8>)>,
    pages: usize,
}

impl Model {
    fn new(pool: &Pool) -> Model {
        let classes = pool
            .class_table()
            .unique_classes()
            .iter()
            .map(|c| MClass {
                pages_per_zspage: c.pages_per_zspage,
                objs_per_zspage: c.objs_per_zspage,
                huge: c.huge,
                zs: HashMap::new(),
                groups: Default::default(),
                next_id: 0,
            })
            .collect();
        Model {
            classes,
            objs: HashMap::new(),
            pages: 0,
        }
    }

    fn alloc(&mut self, pos: usize, h: Handle, data: Vec<u8>) {
        let c = &mut self.classes[pos];
        let id = match (0..=10).rev().find_map(|g| c.groups[g].first().copied()) {
            Some(id) => id,
            None => {
                let id = c.next_id;
                c.next_id += 1;
                c.zs.insert(
                    id,
                    MZs {
                        inuse: 0,
                        free: (0..c.objs_per_zspage).rev().collect(),
                        slots: vec![None; c.objs_per_zspage],
                    },
                );
                c.groups[0].insert(0, id);
                self.pages += c.pages_per_zspage;
                id
            }
        };
        let idx = c.malloc(id, h);
        c.fix(id);
        self.objs.insert(h, (pos, id, idx, data));
    }

    fn free(&mut self, h: Handle) {
        let (pos, id, idx, _) = self.objs.remove(&h).unwrap();
        let c = &mut self.classes[pos];
        c.obj_free(id, idx);
        c.fix(id);
        if c.zs[&id].inuse == 0 {
            c.unlist(id);
            c.zs.remove(&id);
            self.pages -= c.pages_per_zspage;
        }
    }

    fn compact(&mut self) -> usize {
        let mut freed = 0;
        for pos in (0..self.classes.len()).rev() {
            if self.classes[pos].huge {
                continue;
            }
            loop {
                let c = &mut self.classes[pos];
                if c.can_compact() == 0 {
                    break;
                }
                let Some(src) = (1..=10).find_map(|g| c.groups[g].first().copied()) else {
                    break;
                };
                c.unlist(src);
                let Some(dst) = (1..=10).rev().find_map(|g| c.groups[g].first().copied()) else {
                    c.list(src);
                    break;
                };
                c.unlist(dst);
                for idx in 0..c.objs_per_zspage {
                    if c.zs[&src].inuse == 0 || c.zs[&dst].inuse == c.objs_per_zspage {
                        break;
                    }
                    if let Some(h) = c.zs[&src].slots[idx] {
                        let new_idx = c.malloc(dst, h);
                        c.obj_free(src, idx);
                        let o = self.objs.get_mut(&h).unwrap();
                        o.1 = dst;
                        o.2 = new_idx;
                    }
                }
                c.list(dst);
                if c.zs[&src].inuse == 0 {
                    c.zs.remove(&src);
                    self.pages -= c.pages_per_zspage;
                    freed += c.pages_per_zspage;
                } else {
                    c.list(src);
                }
            }
        }
        freed
    }
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, u8),
    Write(usize, u8, bool),
    Read(usize),
    Free(usize),
    FreeStale(usize),
    Compact,
}

fn len_strategy() -> impl Strategy<Value = usize> {
    // A few hot sizes so zspages fill up and frees leave partial zspages, plus anything.
    prop_oneof![
        3 => 20usize..=40,
        3 => 1000usize..=1100,
        2 => 1560usize..=1600,
        2 => 3500usize..=4096,
        2 => 1usize..=4096,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (len_strategy(), any::<u8>()).prop_map(|(l, s)| Op::Alloc(l, s)),
        2 => (any::<usize>(), any::<u8>(), any::<bool>()).prop_map(|(i, s, short)| Op::Write(i, s, short)),
        3 => any::<usize>().prop_map(Op::Read),
        6 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeStale),
        1 => Just(Op::Compact),
    ]
}

fn fill(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn check(pool: &Pool, model: &Model) {
    pool.check_invariants().unwrap();
    let st = pool.stats();
    assert_eq!(st.total_pages, model.pages, "pool pages");
    assert_eq!(pool.total_pages(), model.pages);
    for (cs, mc) in st.classes.iter().zip(&model.classes) {
        assert_eq!(cs.obj_used, mc.used(), "class {} obj_used", cs.index);
        assert_eq!(
            cs.obj_allocated,
            mc.allocated(),
            "class {} obj_allocated",
            cs.index
        );
        assert_eq!(
            cs.pages_used,
            mc.zs.len() * mc.pages_per_zspage,
            "class {} pages_used",
            cs.index
        );
        assert_eq!(cs.freeable, mc.can_compact(), "class {} freeable", cs.index);
        let groups: Vec<usize> = mc.groups.iter().map(|g| g.len()).collect();
        assert_eq!(cs.fullness.to_vec(), groups, "class {} fullness", cs.index);
    }
    assert_eq!(st.obj_used(), model.objs.len());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 128 },
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn pool_matches_model(
        chain in prop_oneof![Just(4usize), Just(8), Just(16), 1usize..=16],
        used_percent in any::<bool>(),
        ops in proptest::collection::vec(op_strategy(), 1..if cfg!(miri) { 60 } else { 400 }),
    ) {
        let rule = if used_percent { ChainRule::UsedPercent } else { ChainRule::MinWaste };
        run_with_compaction(PoolConfig { chain_size: chain, chain_rule: rule }, ops);
    }
}

/// Like `run`, but compaction is executed on both sides and the freed page counts compared.
fn run_with_compaction(cfg: PoolConfig, ops: Vec<Op>) {
    let pool = Pool::new(cfg).unwrap();
    let mut model = Model::new(&pool);
    let mut order: Vec<Handle> = Vec::new();
    let mut dead: Vec<Handle> = Vec::new();
    let mut compacted = 0u64;
    for op in ops {
        match op {
            Op::Compact => {
                let can = pool.compactable_pages();
                let want = model.compact();
                let freed = pool.compact();
                assert_eq!(freed, want, "pages freed by compaction");
                assert_eq!(can, want, "compactable_pages predicts what compact frees");
                compacted += freed as u64;
                assert_eq!(pool.pages_compacted(), compacted);
            }
            Op::Alloc(len, seed) => {
                let data = fill(len, seed);
                // Both ways of storing: one step, or alloc then write.
                let h = if seed % 2 == 0 {
                    pool.alloc_write(&data).unwrap()
                } else {
                    let h = pool.alloc(len).unwrap();
                    assert!(pool.capacity(h).unwrap() >= len);
                    pool.write(h, &data).unwrap();
                    h
                };
                let pos = pool.class_table().unique_position_for_object(len);
                model.alloc(pos, h, data);
                order.push(h);
            }
            Op::Write(i, seed, short) if !order.is_empty() => {
                let h = order[i % order.len()];
                let o = model.objs.get_mut(&h).unwrap();
                let len = if short {
                    o.3.len().div_ceil(2)
                } else {
                    o.3.len()
                };
                let data = fill(len, seed);
                pool.write(h, &data).unwrap();
                o.3[..len].copy_from_slice(&data);
            }
            Op::Read(i) if !order.is_empty() => {
                let h = order[i % order.len()];
                let want = &model.objs[&h].3;
                {
                    let got = pool.read(h).unwrap();
                    assert!(got.len() >= want.len());
                    assert_eq!(&got[..want.len()], &want[..]);
                }
                let mut buf = vec![0u8; want.len()];
                pool.read_into(h, &mut buf).unwrap();
                assert_eq!(&buf, want);
            }
            Op::Free(i) if !order.is_empty() => {
                let h = order.swap_remove(i % order.len());
                pool.free(h).unwrap();
                model.free(h);
                dead.push(h);
            }
            Op::FreeStale(i) if !dead.is_empty() => {
                let h = dead[i % dead.len()];
                assert_eq!(pool.free(h), Err(Error::InvalidHandle));
                assert_eq!(pool.read(h).map(|_| ()), Err(Error::InvalidHandle));
            }
            _ => {}
        }
        check(&pool, &model);
    }
    for (h, (_, _, _, data)) in &model.objs {
        assert_eq!(&pool.read(*h).unwrap()[..data.len()], &data[..]);
    }
    for h in order {
        pool.free(h).unwrap();
    }
    assert_eq!(pool.total_pages(), 0);
    pool.check_invariants().unwrap();
}

#[test]
fn model_long_deterministic_run() {
    // A longer deterministic sequence: fill, free two of three, refill, compact; exercises
    // partial zspages and LIFO reuse.
    let mut ops = Vec::new();
    let n = if cfg!(miri) { 60 } else { 600 };
    for i in 0..n {
        ops.push(Op::Alloc(
            if i % 2 == 0 {
                1000 + i % 90
            } else {
                30 + i % 8
            },
            i as u8,
        ));
    }
    for i in 0..n * 2 / 3 {
        ops.push(Op::Free(i * 7));
    }
    for i in 0..n / 2 {
        ops.push(Op::Alloc(1000 + i % 90, i as u8));
        ops.push(Op::Read(i * 13));
    }
    run_with_compaction(PoolConfig::default(), ops.clone());
    ops.push(Op::Compact);
    run_with_compaction(
        PoolConfig {
            chain_size: 16,
            chain_rule: ChainRule::UsedPercent,
        },
        ops,
    );
}
