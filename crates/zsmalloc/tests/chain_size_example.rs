// SPDX-License-Identifier: MIT
//! The worked example of "zsmalloc: turn zspage order into runtime variable" (v3, Oct 2022): "13 objects of 1568 bytes" take 6 pages with 4-page zspages
//! (class #96 merged into #100: 1632 bytes, 2 pages, 5 objects -> 3 zspages) and 5 pages with
//! 16-page zspages (class #96 alone: 5 pages, 13 objects -> 1 zspage).
//!
//! The patch's "objects of 1568 bytes" are class-#96 objects, i.e. sizes *after* zs_malloc added
//! the 8-byte handle header: the caller's payload is 1568 - 8 = 1560 bytes. (A 1568-byte
//! payload becomes 1576 and lands in class #97, 1584 bytes; that case is checked too.)

use uzswap_zsmalloc::{ChainRule, Pool, PoolConfig, HANDLE_SIZE};

fn pages_for(chain: usize, rule: ChainRule, payload: usize, n: usize) -> (usize, usize) {
    let pool = Pool::new(PoolConfig {
        chain_size: chain,
        chain_rule: rule,
    })
    .unwrap();
    let data: Vec<u8> = (0..payload).map(|i| (i % 251) as u8).collect();
    let hs: Vec<_> = (0..n).map(|_| pool.alloc_write(&data).unwrap()).collect();
    for h in &hs {
        assert_eq!(&pool.read(*h).unwrap()[..payload], &data[..]);
    }
    pool.check_invariants().unwrap();
    let class = pool.class_table().class_for_object(payload).index;
    (pool.total_pages(), class)
}

#[test]
fn thirteen_objects_of_class_1568() {
    let payload = 1568 - HANDLE_SIZE;
    for rule in [ChainRule::UsedPercent, ChainRule::MinWaste] {
        assert_eq!(pages_for(4, rule, payload, 13), (6, 100), "{rule} chain 4");
        assert_eq!(pages_for(16, rule, payload, 13), (5, 96), "{rule} chain 16");
    }
}

#[test]
fn payload_of_1568_bytes_lands_in_class_1584() {
    // 1568 + 8 = 1576 -> class #97 (1584 bytes). Chain 4: #97 merges into #100 too (6 pages);
    // chain 16: class #97 keeps its own geometry, and 13 objects fill zspages of it.
    let (pages4, class4) = pages_for(4, ChainRule::UsedPercent, 1568, 13);
    assert_eq!((pages4, class4), (6, 100));
    let (pages16, class16) = pages_for(16, ChainRule::UsedPercent, 1568, 13);
    assert_eq!(class16, 97);
    let t = Pool::new(PoolConfig {
        chain_size: 16,
        chain_rule: ChainRule::UsedPercent,
    })
    .unwrap();
    let c = *t.class_table().class_for_object(1568);
    assert_eq!(
        pages16,
        13usize.div_ceil(c.objs_per_zspage) * c.pages_per_zspage
    );
}

#[test]
fn class_table_predicts_pool_pages_for_allocation_only_workloads() {
    for chain in [4, 8, 16] {
        let pool = Pool::new(PoolConfig {
            chain_size: chain,
            chain_rule: ChainRule::MinWaste,
        })
        .unwrap();
        let lens: Vec<usize> = (0..if cfg!(miri) { 300 } else { 3000 })
            .map(|i| 1 + (i * 7919) % 4096)
            .collect();
        for &len in &lens {
            pool.alloc(len).unwrap();
        }
        assert_eq!(
            pool.total_pages(),
            pool.class_table().pages_for_objects(lens.iter().copied())
        );
    }
}
