// SPDX-License-Identifier: MIT
//! Pool statistics and the kernel's debugfs `classes` table layout.

use std::fmt;

use crate::fullness::NR_FULLNESS_GROUPS;
use crate::pool::Pool;

/// One row of the kernel's `/sys/kernel/debug/zsmalloc/<pool>/classes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStats {
    /// Kernel class index.
    pub index: usize,
    /// Slot size in bytes.
    pub size: usize,
    /// Zspages per fullness group: `[0]` empty, `[1]`..`[10]` the 10% .. 99% buckets,
    /// `[11]` full. The kernel's table prints `[1]..=[11]`.
    pub fullness: [usize; NR_FULLNESS_GROUPS],
    /// Slots in the class's zspages.
    pub obj_allocated: usize,
    /// Slots holding live objects.
    pub obj_used: usize,
    /// `obj_allocated / objs_per_zspage * pages_per_zspage`.
    pub pages_used: usize,
    /// Pages per zspage.
    pub pages_per_zspage: usize,
    /// Objects per zspage (not a kernel column; kept for callers).
    pub objs_per_zspage: usize,
    /// Pages compaction could free (`zs_can_compact`).
    pub freeable: usize,
    /// Huge class (one object per page, no header).
    pub huge: bool,
}

/// Per-class rows plus pool totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// One row per unique class, ascending size.
    pub classes: Vec<ClassStats>,
    /// Pages held by the pool (`zs_get_total_pages`).
    pub total_pages: usize,
    /// Pages freed by compaction so far.
    pub pages_compacted: u64,
    /// Pages of freed zspages kept resident for reuse, not in `total_pages`
    /// ([`crate::Pool::cached_pages`]).
    pub cached_pages: usize,
}

impl PoolStats {
    /// Sum of `obj_used` over all classes.
    pub fn obj_used(&self) -> usize {
        self.classes.iter().map(|c| c.obj_used).sum()
    }

    /// Sum of `obj_allocated` over all classes.
    pub fn obj_allocated(&self) -> usize {
        self.classes.iter().map(|c| c.obj_allocated).sum()
    }

    /// The table in the layout of the kernel's `zs_stats_size_show` (v6.4+ columns).
    pub fn kernel_table(&self) -> String {
        self.to_string()
    }
}

const GROUP_HEADERS: [&str; NR_FULLNESS_GROUPS - 1] = [
    "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "99%", "100%",
];

impl fmt::Display for PoolStats {
    /// Same column widths as the kernel: ` %5s %5s` + eleven `%9s` + ` %13s %10s %10s %16s %8s`,
    /// rows for each real class, a blank line and a `Total` row.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, " {:>5} {:>5}", "class", "size")?;
        for h in GROUP_HEADERS {
            write!(f, " {h:>9}")?;
        }
        writeln!(
            f,
            " {:>13} {:>10} {:>10} {:>16} {:>8}",
            "obj_allocated", "obj_used", "pages_used", "pages_per_zspage", "freeable"
        )?;
        let mut totals = [0usize; NR_FULLNESS_GROUPS];
        let (mut objs, mut used, mut pages, mut freeable) = (0, 0, 0, 0);
        for c in &self.classes {
            write!(f, " {:>5} {:>5} ", c.index, c.size)?;
            for (fg, t) in totals.iter_mut().enumerate().skip(1) {
                *t += c.fullness[fg];
                write!(f, "{:>9} ", c.fullness[fg])?;
            }
            writeln!(
                f,
                "{:>13} {:>10} {:>10} {:>16} {:>8}",
                c.obj_allocated, c.obj_used, c.pages_used, c.pages_per_zspage, c.freeable
            )?;
            objs += c.obj_allocated;
            used += c.obj_used;
            pages += c.pages_used;
            freeable += c.freeable;
        }
        writeln!(f)?;
        write!(f, " {:>5} {:>5} ", "Total", "")?;
        for t in totals.iter().skip(1) {
            write!(f, "{t:>9} ")?;
        }
        writeln!(
            f,
            "{:>13} {:>10} {:>10} {:>16} {:>8}",
            objs, used, pages, "", freeable
        )
    }
}

impl Pool {
    /// Metadata the pool keeps outside its zspages, in bytes, measured from the allocations it
    /// holds now: the handle tables ([`HANDLE_ENTRY_SIZE`](crate::HANDLE_ENTRY_SIZE) bytes per
    /// object it ever held at once: the tables grow in segments and are never shrunk), the
    /// zspage records and the free lists of zspage ids and handle slots. Per-object headers live
    /// in the zspages (counted by [`Pool::total_pages`]); the fixed per-class structures are not
    /// counted.
    pub fn metadata_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| {
                let g = c.inner.lock();
                c.handles.heap_bytes() + g.heap_bytes()
            })
            .sum()
    }

    /// Per-class statistics with the kernel's debugfs `classes` columns, plus pool totals.
    pub fn stats(&self) -> PoolStats {
        let classes = self
            .classes
            .iter()
            .map(|c| {
                let g = c.inner.lock();
                ClassStats {
                    index: c.info.index,
                    size: c.info.size,
                    fullness: g.group_count,
                    obj_allocated: g.obj_allocated,
                    obj_used: g.obj_used,
                    pages_used: g.obj_allocated / g.objs_per_zspage * g.pages_per_zspage,
                    pages_per_zspage: g.pages_per_zspage,
                    objs_per_zspage: g.objs_per_zspage,
                    freeable: g.can_compact(),
                    huge: g.huge,
                }
            })
            .collect();
        PoolStats {
            classes,
            total_pages: self.total_pages(),
            pages_compacted: self.pages_compacted(),
            cached_pages: self.cached_pages(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pool::tests_support::pool;
    use crate::Handle;

    #[test]
    fn stats_table_shows_kernel_columns() {
        // Class 1568 at chain 8 (min-waste): 5 pages, 13 objects. 20 objects -> 2 zspages,
        // one full (100%) and one with 7 of 13 (53%: group 6, printed under "60%", since the
        // kernel labels each bucket by its upper bound).
        let p = pool(8);
        let hs: Vec<Handle> = (0..20)
            .map(|_| p.alloc_write(&[1u8; 1560]).unwrap())
            .collect();
        let st = p.stats();
        let row = st.classes.iter().find(|c| c.size == 1568).unwrap();
        assert_eq!(
            (row.obj_allocated, row.obj_used, row.pages_used),
            (26, 20, 10)
        );
        assert_eq!((row.fullness[6], row.fullness[11], row.freeable), (1, 1, 0));
        let text = st.to_string();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("1568"))
            .unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "96", "1568", "0", "0", "0", "0", "0", "1", "0", "0", "0", "0", "1", "26", "20",
                "10", "5", "0"
            ]
        );
        let total: Vec<&str> = text.lines().last().unwrap().split_whitespace().collect();
        assert_eq!(
            total,
            [
                "Total", "0", "0", "0", "0", "0", "1", "0", "0", "0", "0", "1", "26", "20", "10",
                "0"
            ]
        );
        for h in hs.iter().take(10) {
            p.free(*h).unwrap();
        }
        // 3 + 7 live objects in 26 slots: 16 free slots, so one 5-page zspage is freeable.
        assert_eq!(p.compactable_pages(), 5);
        assert_eq!(
            p.stats()
                .classes
                .iter()
                .find(|c| c.size == 1568)
                .unwrap()
                .freeable,
            5
        );
        assert_eq!(p.compact(), 5);
        assert_eq!(p.total_pages(), 5);
        for h in &hs[10..] {
            assert!(p.read(*h).unwrap()[..1560].iter().all(|&b| b == 1));
        }
    }
}
