// SPDX-License-Identifier: MIT
//! Compaction (`zs_compact`): move objects from the sparsest zspages of a class into the fullest
//! and free the emptied ones, one (source, destination) pair per class-lock hold; objects with
//! readers are left where they are.

use std::sync::atomic::Ordering;

use crate::fullness::{RATIO_10, RATIO_99};
use crate::handle::{
    bump_version, Entry, Loc, ALLOCATED, FREE_PENDING, MOVING, READERS_MASK, WRITING,
};
use crate::pool::{backoff, Pool, SizeClass};

impl Pool {
    /// Shrinker count: pages compaction could free now (sum of per-class `freeable`).
    pub fn compactable_pages(&self) -> usize {
        self.classes
            .iter()
            .map(|c| c.inner.lock().can_compact())
            .sum()
    }

    /// Compacts every class (`zs_compact`): moves objects from the sparsest zspages into the
    /// fullest and frees the emptied ones. Returns the pages freed. Only one compaction runs
    /// at a time; a concurrent call returns 0 at once.
    pub fn compact(&self) -> usize {
        if self.compacting.swap(true, Ordering::Acquire) {
            return 0;
        }
        let freed: usize = self
            .classes
            .iter()
            .rev()
            .map(|c| self.compact_class(c))
            .sum();
        // Compaction runs under memory pressure: give the cached pages back too.
        self.arena.trim();
        self.pages_compacted
            .fetch_add(freed as u64, Ordering::Relaxed);
        self.compacting.store(false, Ordering::Release);
        freed
    }

    /// Claims an object for moving; false if it has readers, is being freed or is dead.
    pub(crate) fn begin_move(entry: &Entry) -> bool {
        let mut spins = 0;
        loop {
            let s = entry.state.load(Ordering::Relaxed);
            if s & ALLOCATED == 0 || s & FREE_PENDING != 0 || s & READERS_MASK != 0 {
                return false;
            }
            if s & WRITING != 0 {
                // Writers never take the class lock, so waiting here cannot deadlock.
                backoff(&mut spins);
                continue;
            }
            if entry
                .state
                .compare_exchange_weak(s, s | MOVING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // An optimistic reader that sees the new location or the copy must then see
                // MOVING or the new version (a seqlock's writer side).
                crate::sync::fence(Ordering::Release);
                return true;
            }
        }
    }

    /// Ends a move claimed by [`Pool::begin_move`]: clears `MOVING` and advances the object's
    /// version, so that an optimistic read that overlapped the move fails its check. While
    /// `MOVING` is set no other thread changes the state word (readers, writers and frees wait
    /// for it to clear, and every other transition is a compare-exchange from a state without
    /// it), so a plain release store does.
    pub(crate) fn end_move(entry: &Entry) {
        let s = entry.state.load(Ordering::Relaxed);
        debug_assert!(s & MOVING != 0 && s & READERS_MASK == 0);
        entry
            .state
            .store(bump_version(s) & !MOVING, Ordering::Release);
    }

    fn compact_class(&self, class: &SizeClass) -> usize {
        if class.info.huge {
            return 0;
        }
        let mut freed = 0;
        loop {
            // One (src, dst) round per lock hold, so allocations in this class interleave.
            let mut g = class.inner.lock();
            if g.can_compact() == 0 {
                break;
            }
            let Some(src) = g.isolate_first(RATIO_10..=RATIO_99) else {
                break;
            };
            let Some(dst) = g.isolate_first((RATIO_10..=RATIO_99).rev()) else {
                let fg = g.group_of(src);
                g.insert(src, fg);
                break;
            };
            let objs_per_zspage = g.objs_per_zspage as u32;
            let mut pinned = false;
            for idx in 0..objs_per_zspage {
                if g.zspages[src as usize].inuse == 0
                    || g.zspages[dst as usize].inuse == objs_per_zspage
                {
                    break;
                }
                let Some(owner) = g.owner_of(src, idx, &self.arena) else {
                    continue;
                };
                let entry = class
                    .handles
                    .get(owner)
                    .expect("allocated slot has a handle entry");
                if !Self::begin_move(entry) {
                    // A reader holds it (or a free is completing): leave this zspage.
                    pinned = true;
                    continue;
                }
                let old = Loc {
                    zsid: src,
                    obj_idx: idx,
                    frame: g.zspages[src as usize].frame,
                };
                let new_idx = g.obj_malloc(dst, owner, &self.arena);
                let new = Loc {
                    zsid: dst,
                    obj_idx: new_idx,
                    frame: g.zspages[dst as usize].frame,
                };
                // As in `alloc`: for optimistic readers of the destination's previous object.
                crate::sync::fence(Ordering::Release);
                // SAFETY: MOVING excludes all access to the source payload; the destination
                // slot was free (nobody references it) and we hold the class lock. Distinct
                // slots never overlap.
                unsafe {
                    self.arena.copy(
                        class.payload_off(old),
                        class.payload_off(new),
                        class.capacity(),
                    )
                };
                entry.loc.store(new.pack(), Ordering::Relaxed);
                Self::end_move(entry);
                g.obj_free(src, idx, &self.arena);
            }
            let dst_fg = g.group_of(dst);
            g.insert(dst, dst_fg);
            if g.zspages[src as usize].inuse == 0 {
                let frame = g.release_zspage(src);
                drop(g);
                self.unreserve_zspage_pages(class, frame);
                freed += class.info.pages_per_zspage;
            } else {
                let fg = g.group_of(src);
                g.insert(src, fg);
                drop(g);
            }
            if pinned {
                break;
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use crate::pool::tests_support::pool;
    use crate::Handle;

    #[test]
    fn compaction_frees_sparse_zspages_and_keeps_handles() {
        let p = pool(4);
        let hs: Vec<Handle> = (0..200u32)
            .map(|i| p.alloc_write(&[i as u8; 1000]).unwrap())
            .collect();
        let before = p.total_pages();
        let mut kept = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            if i % 3 == 0 {
                kept.push((i, h));
            } else {
                p.free(h).unwrap();
            }
        }
        p.check_invariants().unwrap();
        let can = p.compactable_pages();
        assert!(can > 0);
        let freed = p.compact();
        assert_eq!(freed, can);
        assert_eq!(p.pages_compacted(), freed as u64);
        assert_eq!(p.compactable_pages(), 0);
        assert!(p.total_pages() < before);
        p.check_invariants().unwrap();
        for (i, h) in kept {
            assert!(p.read(h).unwrap()[..1000].iter().all(|&b| b == i as u8));
        }
    }

    #[test]
    fn compaction_skips_objects_with_readers() {
        let p = pool(4);
        let hs: Vec<Handle> = (0..40u32)
            .map(|i| p.alloc_write(&[i as u8; 1000]).unwrap())
            .collect();
        for h in &hs[1..36] {
            p.free(*h).unwrap();
        }
        let r = p.read(hs[0]).unwrap();
        p.compact();
        assert_eq!(r[0], 0);
        drop(r);
        p.check_invariants().unwrap();
        p.compact();
        assert_eq!(p.compactable_pages(), 0);
        for (i, h) in hs.iter().enumerate().filter(|(i, _)| *i == 0 || *i >= 36) {
            assert!(p.read(*h).unwrap()[..1000].iter().all(|&b| b == i as u8));
        }
        p.check_invariants().unwrap();
    }
}
