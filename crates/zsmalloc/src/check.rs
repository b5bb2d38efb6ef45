// SPDX-License-Identifier: MIT
//! The pool's structural invariant checker (tests, on a quiescent pool).

use std::sync::atomic::Ordering;

use crate::fullness::NR_FULLNESS_GROUPS;
use crate::handle::{Loc, ALLOCATED};
use crate::pool::Pool;
use crate::zspage::NONE;

impl Pool {
    /// Checks the pool's structural invariants; for tests, on a quiescent pool (no call in
    /// flight on other threads). Returns a description of the first violation.
    ///
    /// Checked: every live zspage is in exactly one fullness list, the one matching its
    /// in-use ratio; each list's length matches its counter; each zspage's free list has
    /// `objs_per_zspage - inuse` slots and its allocated headers point to live handle
    /// entries that point back; the sum of `inuse` is `obj_used` and equals the live
    /// handles; `obj_allocated` and the pool's page count match the zspages.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut pages = 0;
        for c in &self.classes {
            let g = c.inner.lock();
            let ci = c.info.index;
            let live: Vec<u32> = (0..g.zspages.len() as u32)
                .filter(|&i| g.zspages[i as usize].live)
                .collect();
            let mut seen = vec![false; g.zspages.len()];
            for fg in 0..NR_FULLNESS_GROUPS {
                let mut n = 0;
                let mut prev = NONE;
                let mut cur = g.heads[fg];
                while cur != NONE {
                    let z = &g.zspages[cur as usize];
                    if !z.live || seen[cur as usize] {
                        return Err(format!("class {ci}: zspage {cur} dead or listed twice"));
                    }
                    seen[cur as usize] = true;
                    if z.fullness as usize != fg || g.group_of(cur) != fg {
                        return Err(format!(
                            "class {ci}: zspage {cur} inuse {} in group {fg} (expected {})",
                            z.inuse,
                            g.group_of(cur)
                        ));
                    }
                    if z.prev != prev {
                        return Err(format!("class {ci}: zspage {cur} has a broken prev link"));
                    }
                    prev = cur;
                    cur = z.next;
                    n += 1;
                }
                if n != g.group_count[fg] {
                    return Err(format!(
                        "class {ci}: group {fg} has {n} zspages, counter says {}",
                        g.group_count[fg]
                    ));
                }
            }
            let mut inuse_sum = 0;
            for &id in &live {
                if !seen[id as usize] {
                    return Err(format!(
                        "class {ci}: live zspage {id} is in no fullness list"
                    ));
                }
                let z = &g.zspages[id as usize];
                inuse_sum += z.inuse as usize;
                let mut free_len = 0;
                let mut cur = z.freeobj;
                while cur != NONE {
                    free_len += 1;
                    if free_len > g.objs_per_zspage || cur as usize >= g.objs_per_zspage {
                        return Err(format!("class {ci}: zspage {id} free list is corrupt"));
                    }
                    cur = if g.huge {
                        NONE
                    } else {
                        // SAFETY: header of a slot in a live zspage; class lock held.
                        let link = unsafe { self.arena.read_header(g.slot_off(z.frame, cur)) };
                        if link & 1 != 0 {
                            return Err(format!(
                                "class {ci}: zspage {id} free list reaches an allocated slot"
                            ));
                        }
                        (link >> 1) as u32
                    };
                }
                if free_len != g.objs_per_zspage - z.inuse as usize {
                    return Err(format!(
                        "class {ci}: zspage {id} free list has {free_len} slots, expected {}",
                        g.objs_per_zspage - z.inuse as usize
                    ));
                }
                let mut allocated = 0;
                for idx in 0..g.objs_per_zspage as u32 {
                    if let Some(owner) = g.owner_of(id, idx, &self.arena) {
                        allocated += 1;
                        let e = c
                            .handles
                            .get(owner)
                            .ok_or_else(|| format!("class {ci}: owner {owner} has no entry"))?;
                        let s = e.state.load(Ordering::Acquire);
                        let l = Loc::unpack(e.loc.load(Ordering::Acquire));
                        if s & ALLOCATED == 0 || (l.zsid, l.obj_idx, l.frame) != (id, idx, z.frame)
                        {
                            return Err(format!(
                                "class {ci}: slot {id}/{idx} and handle {owner} disagree"
                            ));
                        }
                    }
                }
                if allocated != z.inuse as usize {
                    return Err(format!(
                        "class {ci}: zspage {id} has {allocated} tagged slots, inuse {}",
                        z.inuse
                    ));
                }
            }
            if inuse_sum != g.obj_used {
                return Err(format!(
                    "class {ci}: sum of inuse {inuse_sum} != obj_used {}",
                    g.obj_used
                ));
            }
            let live_handles =
                g.next_handle as usize - g.free_handles.len() - g.retired_handles as usize;
            if live_handles != g.obj_used {
                return Err(format!(
                    "class {ci}: {live_handles} live handles != obj_used {}",
                    g.obj_used
                ));
            }
            if g.obj_allocated != live.len() * g.objs_per_zspage {
                return Err(format!(
                    "class {ci}: obj_allocated {} != {} zspages",
                    g.obj_allocated,
                    live.len()
                ));
            }
            pages += live.len() * g.pages_per_zspage;
        }
        if pages != self.total_pages() {
            return Err(format!(
                "pool: zspages hold {pages} pages, counter says {}",
                self.total_pages()
            ));
        }
        Ok(())
    }
}
