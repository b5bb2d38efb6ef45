// SPDX-License-Identifier: MIT
//! Size classes: the kernel's table of 255 classes for 4 KiB pages, the two rules for choosing
//! pages per zspage, class merging and the huge-class watermark.
//!
//! Everything here is pure arithmetic (no memory is held), so the estimator can use it
//! without creating a pool.

use std::fmt;
use std::str::FromStr;

use crate::{Error, PAGE_SIZE};

/// Bytes of the per-object handle header the kernel stores in front of every non-huge object
/// (`ZS_HANDLE_SIZE`). It is added to the caller's length before the class lookup.
pub const HANDLE_SIZE: usize = 8;
/// Smallest class size (`ZS_MIN_ALLOC_SIZE` on 64-bit).
pub const MIN_ALLOC_SIZE: usize = 32;
/// Largest object a pool accepts (`ZS_MAX_ALLOC_SIZE`).
pub const MAX_ALLOC_SIZE: usize = PAGE_SIZE;
/// Distance between neighbouring class sizes (`PAGE_SIZE >> CLASS_BITS`).
pub const CLASS_DELTA: usize = PAGE_SIZE >> 8;
/// Number of class indices before merging: `ceil((4096 - 32) / 16) + 1 = 255`.
pub const NUM_CLASSES: usize = (MAX_ALLOC_SIZE - MIN_ALLOC_SIZE).div_ceil(CLASS_DELTA) + 1;
/// Largest chain size (pages per zspage) a pool may be configured with.
pub const MAX_CHAIN_SIZE: usize = 16;
/// Default chain size (`CONFIG_ZSMALLOC_CHAIN_SIZE`).
pub const DEFAULT_CHAIN_SIZE: usize = 8;

/// How a class picks its pages per zspage among `1..=chain_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ChainRule {
    /// Today's kernel (v6.3+ `calculate_zspage_chain_size`): the chain length with the fewest
    /// wasted bytes at the zspage's end; ties keep the shorter chain; power-of-two sizes use 1.
    #[default]
    MinWaste,
    /// The rule of "zsmalloc: turn zspage order into runtime variable" (v3, Oct 2022;
    /// `get_pages_per_zspage`, up to v6.2): the chain length with the
    /// highest integer used-percentage; ties keep the shorter chain.
    UsedPercent,
}

impl ChainRule {
    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChainRule::MinWaste => "min-waste",
            ChainRule::UsedPercent => "used-percent",
        }
    }

    /// Pages per zspage for a class of `class_size` bytes with chains of at most `chain_size`.
    pub fn pages_per_zspage(self, class_size: usize, chain_size: usize) -> usize {
        match self {
            ChainRule::MinWaste => {
                if class_size.is_power_of_two() {
                    return 1;
                }
                let mut best = 1;
                let mut min_waste = usize::MAX;
                for i in 1..=chain_size {
                    let waste = (i * PAGE_SIZE) % class_size;
                    if waste < min_waste {
                        min_waste = waste;
                        best = i;
                    }
                }
                best
            }
            ChainRule::UsedPercent => {
                let mut best = 1;
                let mut max_used_pc = 0;
                for i in 1..=chain_size {
                    let zspage_size = i * PAGE_SIZE;
                    let waste = zspage_size % class_size;
                    // Integer percent, exactly as the old kernel computed it.
                    let used_pc = (zspage_size - waste) * 100 / zspage_size;
                    if used_pc > max_used_pc {
                        max_used_pc = used_pc;
                        best = i;
                    }
                }
                best
            }
        }
    }
}

impl fmt::Display for ChainRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ChainRule {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "min-waste" => Ok(ChainRule::MinWaste),
            "used-percent" => Ok(ChainRule::UsedPercent),
            other => Err(Error::InvalidChainRule(other.to_string())),
        }
    }
}

/// Settings of one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolConfig {
    /// Maximum pages per zspage, 1 to 16 (the kernel's `CONFIG_ZSMALLOC_CHAIN_SIZE`, default 8).
    pub chain_size: usize,
    /// Rule choosing each class's pages per zspage.
    pub chain_rule: ChainRule,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            chain_size: DEFAULT_CHAIN_SIZE,
            chain_rule: ChainRule::MinWaste,
        }
    }
}

impl PoolConfig {
    /// Checks the chain size range.
    pub fn validate(&self) -> Result<(), Error> {
        if (1..=MAX_CHAIN_SIZE).contains(&self.chain_size) {
            Ok(())
        } else {
            Err(Error::InvalidChainSize(self.chain_size))
        }
    }
}

/// One unique (after merging) size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassInfo {
    /// Kernel class index (0..=254) of the class that objects are stored in.
    pub index: usize,
    /// Slot size in bytes (including the 8-byte handle header for non-huge classes).
    pub size: usize,
    /// Physical pages per zspage.
    pub pages_per_zspage: usize,
    /// Slots per zspage.
    pub objs_per_zspage: usize,
    /// One object per single-page zspage, stored without a header.
    pub huge: bool,
}

impl ClassInfo {
    /// Bytes of payload one slot can hold: the slot minus the header, or the whole slot if huge.
    pub fn payload_capacity(&self) -> usize {
        if self.huge {
            self.size
        } else {
            self.size - HANDLE_SIZE
        }
    }
}

/// The size-class table of a pool configuration: pure computation, no memory held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassTable {
    cfg: PoolConfig,
    /// For each of the 255 class indices, the position in `unique` of the class it maps to.
    map: Vec<u16>,
    unique: Vec<ClassInfo>,
    huge_class_size: usize,
}

impl ClassTable {
    /// Builds the table like `zs_create_pool`: from the largest class down, merging a class into
    /// the previously created (larger) one when both pages and objects per zspage agree.
    pub fn new(cfg: &PoolConfig) -> Result<ClassTable, Error> {
        cfg.validate()?;
        let mut map = vec![0u16; NUM_CLASSES];
        // Built top-down; reversed at the end so `unique` ascends in size.
        let mut desc: Vec<ClassInfo> = Vec::new();
        let mut huge_class_size = 0;
        for i in (0..NUM_CLASSES).rev() {
            let size = (MIN_ALLOC_SIZE + i * CLASS_DELTA).min(MAX_ALLOC_SIZE);
            let pages_per_zspage = cfg.chain_rule.pages_per_zspage(size, cfg.chain_size);
            let objs_per_zspage = pages_per_zspage * PAGE_SIZE / size;
            let huge = pages_per_zspage == 1 && objs_per_zspage == 1;
            if !huge && huge_class_size == 0 {
                // The +8 header is added before lookup, so any payload of at least
                // size - 7 bytes lands above this class.
                huge_class_size = size - (HANDLE_SIZE - 1);
            }
            if let Some(prev) = desc.last() {
                if prev.pages_per_zspage == pages_per_zspage
                    && prev.objs_per_zspage == objs_per_zspage
                {
                    map[i] = (desc.len() - 1) as u16;
                    continue;
                }
            }
            desc.push(ClassInfo {
                index: i,
                size,
                pages_per_zspage,
                objs_per_zspage,
                huge,
            });
            map[i] = (desc.len() - 1) as u16;
        }
        let n = desc.len();
        desc.reverse();
        for m in map.iter_mut() {
            *m = (n - 1 - *m as usize) as u16;
        }
        Ok(ClassTable {
            cfg: *cfg,
            map,
            unique: desc,
            huge_class_size,
        })
    }

    /// The configuration this table was built for.
    pub fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    /// Number of class indices before merging (255 for 4 KiB pages).
    pub fn num_classes(&self) -> usize {
        NUM_CLASSES
    }

    /// The unique classes after merging, ascending in size.
    pub fn unique_classes(&self) -> &[ClassInfo] {
        &self.unique
    }

    /// `zs_huge_class_size()`: payloads of at least this many bytes go to huge zspages.
    /// 0 if every class is huge (chain size 1).
    pub fn huge_class_size(&self) -> usize {
        self.huge_class_size
    }

    /// Kernel class index (before merging) for a slot of `size` bytes (header included),
    /// `get_size_class_index`.
    pub fn size_class_index(size: usize) -> usize {
        let idx = if size > MIN_ALLOC_SIZE {
            (size - MIN_ALLOC_SIZE).div_ceil(CLASS_DELTA)
        } else {
            0
        };
        idx.min(NUM_CLASSES - 1)
    }

    /// Position in [`Self::unique_classes`] of the class an object of `obj_len` payload bytes
    /// is stored in.
    pub fn unique_position_for_object(&self, obj_len: usize) -> usize {
        self.map[Self::size_class_index(obj_len.saturating_add(HANDLE_SIZE))] as usize
    }

    /// Position in [`Self::unique_classes`] of the class with kernel index `index`, if `index`
    /// names a unique (not merged-away) class.
    pub fn unique_position_of_index(&self, index: usize) -> Option<usize> {
        let pos = *self.map.get(index)? as usize;
        (self.unique[pos].index == index).then_some(pos)
    }

    /// The class an object of `obj_len` payload bytes is stored in: adds the 8-byte handle
    /// header (`zs_malloc` does so before the lookup) and follows merging. Lengths above
    /// 4096 clamp to the last class, as in the kernel; [`crate::Pool::alloc`] rejects them.
    pub fn class_for_object(&self, obj_len: usize) -> &ClassInfo {
        &self.unique[self.unique_position_for_object(obj_len)]
    }

    /// `zs_lookup_class_index()`: kernel index of the class holding `obj_len`-byte objects.
    pub fn lookup_class_index(&self, obj_len: usize) -> usize {
        self.class_for_object(obj_len).index
    }

    /// Pages a pool of this configuration needs to hold objects of the given payload lengths
    /// (each class fills zspages completely before opening another, as an allocation-only
    /// workload does). Useful for estimates without a pool.
    pub fn pages_for_objects<I: IntoIterator<Item = usize>>(&self, lens: I) -> usize {
        let mut counts = vec![0usize; self.unique.len()];
        for len in lens {
            counts[self.unique_position_for_object(len)] += 1;
        }
        counts
            .iter()
            .zip(&self.unique)
            .map(|(&n, c)| n.div_ceil(c.objs_per_zspage) * c.pages_per_zspage)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(chain: usize, rule: ChainRule) -> ClassTable {
        ClassTable::new(&PoolConfig {
            chain_size: chain,
            chain_rule: rule,
        })
        .unwrap()
    }

    #[test]
    fn num_classes_is_255() {
        assert_eq!(NUM_CLASSES, 255);
    }

    #[test]
    fn chain_rule_parse_roundtrip() {
        for r in [ChainRule::MinWaste, ChainRule::UsedPercent] {
            assert_eq!(r.to_string().parse::<ChainRule>().unwrap(), r);
        }
        assert!("best".parse::<ChainRule>().is_err());
    }

    #[test]
    fn chain_size_out_of_range_is_an_error() {
        for bad in [0, 17, 100] {
            let cfg = PoolConfig {
                chain_size: bad,
                chain_rule: ChainRule::MinWaste,
            };
            assert_eq!(ClassTable::new(&cfg), Err(Error::InvalidChainSize(bad)));
        }
    }

    /// Unique classes, largest normal class and huge_class_size for chain 4 / 8 / 16: the counts of
    /// "zsmalloc: turn zspage order into runtime variable" (v3) for used-percent, kernel-notes' re-derivation for min-waste; same watermarks.
    #[test]
    fn class_counts_and_watermarks_per_rule() {
        for (rule, uniques) in [
            (ChainRule::UsedPercent, [69, 123, 191]),
            (ChainRule::MinWaste, [69, 119, 192]),
        ] {
            for ((chain, largest, huge), unique) in
                [(4, 3264, 3257), (8, 3632, 3625), (16, 3840, 3833)]
                    .into_iter()
                    .zip(uniques)
            {
                let t = table(chain, rule);
                assert_eq!(t.unique_classes().len(), unique, "{rule} chain {chain}");
                let largest_normal = t
                    .unique_classes()
                    .iter()
                    .filter(|c| !c.huge)
                    .map(|c| c.size)
                    .max();
                assert_eq!(largest_normal, Some(largest), "{rule} chain {chain}");
                assert_eq!(t.huge_class_size(), huge, "{rule} chain {chain}");
            }
        }
    }

    #[test]
    fn doc_table_of_used_percent_for_every_chain_size() {
        // Documentation/mm/zsmalloc.rst's table (produced with the used-percent rule).
        let expect = [
            (4, 69, 3264),
            (5, 86, 3408),
            (6, 93, 3504),
            (7, 112, 3584),
            (8, 123, 3632),
            (9, 140, 3680),
            (10, 143, 3712),
            (11, 159, 3744),
            (12, 164, 3776),
            (13, 180, 3792),
            (14, 183, 3808),
            (15, 188, 3840),
            (16, 191, 3840),
        ];
        for (chain, unique, watermark) in expect {
            let t = table(chain, ChainRule::UsedPercent);
            let largest = t
                .unique_classes()
                .iter()
                .filter(|c| !c.huge)
                .map(|c| c.size)
                .max()
                .unwrap();
            assert_eq!(
                (t.unique_classes().len(), largest),
                (unique, watermark),
                "chain {chain}"
            );
        }
    }

    #[test]
    fn class_1568_waste_per_chain_length() {
        // "zsmalloc: turn zspage order into runtime variable" (v3): class #96 (1568 bytes) wastes 960/352/1312/704/96 bytes for 1..5 pages.
        let wastes: Vec<usize> = (1..=5).map(|i| (i * PAGE_SIZE) % 1568).collect();
        assert_eq!(wastes, [960, 352, 1312, 704, 96]);
        assert_eq!(ChainRule::UsedPercent.pages_per_zspage(1568, 4), 2);
        assert_eq!(ChainRule::UsedPercent.pages_per_zspage(1568, 16), 5);
        assert_eq!(ChainRule::MinWaste.pages_per_zspage(1568, 8), 5);
        // At chain 4 classes #95..#99 merge into #100 (1632 bytes, 2 pages, 5 objects).
        let t = table(4, ChainRule::UsedPercent);
        let c = t.class_for_object(1568 - HANDLE_SIZE);
        assert_eq!(
            (c.index, c.size, c.pages_per_zspage, c.objs_per_zspage),
            (100, 1632, 2, 5)
        );
    }

    #[test]
    fn min_waste_chain_8_matches_kernel_notes_table() {
        // kernel-notes.md section 1.2, `index:size/pages_per_zspage/objs_per_zspage`.
        let notes = "0:32/1/128 1:48/3/256 2:64/1/64 3:80/5/256 4:96/3/128 5:112/7/256 6:128/1/32 \
            7:144/7/199 8:160/5/128 9:176/4/93 10:192/3/64 11:208/3/59 12:224/7/128 13:240/1/17 \
            14:256/1/16 15:272/1/15 16:288/5/71 17:304/7/94 18:320/5/64 19:336/6/73 20:352/8/93 \
            21:368/8/89 22:384/3/32 23:400/5/51 24:416/6/59 25:432/7/66 26:448/7/64 27:464/5/44 \
            28:480/2/17 29:496/4/33 30:512/1/8 31:528/4/31 32:544/2/15 33:560/7/51 34:576/1/7 \
            35:592/8/55 36:608/7/47 37:624/2/13 38:640/5/32 39:656/5/31 40:672/1/6 41:688/8/47 \
            42:704/5/29 43:720/3/17 44:736/2/11 45:752/7/38 46:768/3/16 47:784/5/26 49:816/1/5 \
            50:832/8/39 51:848/5/24 52:864/7/33 53:880/8/37 54:896/7/32 55:912/7/31 56:928/5/22 \
            57:944/3/13 58:960/4/17 59:976/6/25 60:992/8/33 62:1024/1/4 64:1056/8/31 65:1072/5/19 \
            66:1088/4/15 67:1104/3/11 68:1120/8/29 69:1136/5/18 71:1168/2/7 72:1184/7/24 \
            73:1200/5/17 74:1216/3/10 75:1232/7/23 76:1248/4/13 78:1280/5/16 79:1296/7/22 \
            83:1360/1/3 87:1424/8/23 88:1440/6/17 89:1456/5/14 91:1488/4/11 92:1504/7/19 \
            94:1536/3/8 95:1552/8/21 96:1568/5/13 97:1584/7/18 100:1632/2/5 103:1680/7/17 \
            104:1696/5/12 105:1712/8/19 107:1744/3/7 110:1792/7/16 111:1808/4/9 114:1856/5/11 \
            116:1888/6/13 117:1904/7/15 118:1920/8/17 126:2048/1/2 134:2176/8/15 135:2192/7/13 \
            137:2224/6/11 140:2272/5/9 144:2336/4/7 147:2384/7/12 151:2448/3/5 155:2512/8/13 \
            158:2560/5/8 160:2592/7/11 168:2720/2/3 177:2864/7/10 180:2912/5/7 184:2976/8/11 \
            190:3072/3/4 197:3184/7/9 202:3264/4/5 211:3408/5/6 217:3504/6/7 222:3584/7/8 \
            225:3632/8/9 254:4096/1/1";
        let expect: Vec<(usize, usize, usize, usize)> = notes
            .split_whitespace()
            .map(|e| {
                let (i, rest) = e.split_once(':').unwrap();
                let v: Vec<usize> = rest.split('/').map(|x| x.parse().unwrap()).collect();
                (i.parse().unwrap(), v[0], v[1], v[2])
            })
            .collect();
        let t = table(8, ChainRule::MinWaste);
        let got: Vec<(usize, usize, usize, usize)> = t
            .unique_classes()
            .iter()
            .map(|c| (c.index, c.size, c.pages_per_zspage, c.objs_per_zspage))
            .collect();
        assert_eq!(got, expect);
        let last = t.unique_classes().last().unwrap();
        assert!(last.huge && last.size == PAGE_SIZE);
        // Aliases 226..=253 map to the huge 4096 class.
        for i in 226..=253 {
            assert_eq!(t.map[i] as usize, t.unique_classes().len() - 1);
        }
    }

    #[test]
    fn lookup_adds_header_and_clamps() {
        let t = table(8, ChainRule::MinWaste);
        assert_eq!(t.class_for_object(1).size, 32);
        assert_eq!(t.class_for_object(24).size, 32);
        assert_eq!(t.class_for_object(25).size, 48);
        assert_eq!(t.class_for_object(3624).size, 3632);
        assert_eq!(t.class_for_object(3625).size, 4096);
        assert!(t.class_for_object(4096).huge);
        assert!(t.class_for_object(10_000).huge);
        assert_eq!(t.lookup_class_index(4096), 254);
    }

    #[test]
    fn unique_classes_ascend_and_positions_resolve() {
        for chain in 1..=MAX_CHAIN_SIZE {
            if cfg!(miri) && ![1, 4, 16].contains(&chain) {
                continue;
            }
            for rule in [ChainRule::MinWaste, ChainRule::UsedPercent] {
                let t = table(chain, rule);
                let u = t.unique_classes();
                assert!(u.windows(2).all(|w| w[0].size < w[1].size));
                for (pos, c) in u.iter().enumerate() {
                    assert_eq!(t.unique_position_of_index(c.index), Some(pos));
                    assert!(c.pages_per_zspage <= chain);
                    assert_eq!(c.objs_per_zspage, c.pages_per_zspage * PAGE_SIZE / c.size);
                }
                let step = if cfg!(miri) { 61 } else { 1 };
                for len in (1..=PAGE_SIZE).step_by(step) {
                    let c = t.class_for_object(len);
                    assert!(
                        c.payload_capacity() >= len,
                        "len {len} capacity {}",
                        c.payload_capacity()
                    );
                }
            }
        }
    }
}
