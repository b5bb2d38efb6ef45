// SPDX-License-Identifier: MIT
//! Zspages of one size class and everything "protected by class->lock": the zspage records,
//! the doubly linked fullness lists, each zspage's free-slot list threaded through the slot
//! headers, the class's object counters and its free handle slots.

use crate::arena::Arena;
use crate::fullness::{fullness_group, NR_FULLNESS_GROUPS, RATIO_0, RATIO_99};
use crate::handle::MAX_HANDLES_PER_CLASS;
use crate::{Error, PAGE_SIZE};

/// "No zspage / no object" in links and free lists.
pub(crate) const NONE: u32 = u32::MAX;
/// Header of a free slot: next free index shifted left, tag bit 0 clear.
const fn free_link(next: u32) -> u64 {
    (next as u64) << 1
}
/// Header of an allocated slot: handle-table slot shifted left, tag bit 0 set.
const fn allocated_tag(handle_slot: u32) -> u64 {
    ((handle_slot as u64) << 1) | 1
}

/// Metadata of one zspage (the kernel's `struct zspage`); protected by its class lock.
#[derive(Clone, Debug)]
pub(crate) struct ZsPage {
    /// First arena frame of the virtually contiguous run of `pages_per_zspage` frames.
    pub(crate) frame: u32,
    pub(crate) inuse: u32,
    /// Head of the in-memory free-slot list (`NONE` when full).
    pub(crate) freeobj: u32,
    /// Fullness group it is listed in, or `u8::MAX` while unlisted (isolated by compaction).
    pub(crate) fullness: u8,
    pub(crate) live: bool,
    pub(crate) prev: u32,
    pub(crate) next: u32,
    /// Huge zspages keep their owner here instead of an in-object header.
    pub(crate) huge_owner: u32,
}

/// Everything the kernel marks "protected by class->lock".
pub(crate) struct ClassInner {
    pub(crate) size: usize,
    pub(crate) pages_per_zspage: usize,
    pub(crate) objs_per_zspage: usize,
    pub(crate) huge: bool,
    pub(crate) zspages: Vec<ZsPage>,
    pub(crate) free_ids: Vec<u32>,
    /// Head (most recently inserted) of each fullness list; lists are doubly linked via ids.
    pub(crate) heads: [u32; NR_FULLNESS_GROUPS],
    pub(crate) group_count: [usize; NR_FULLNESS_GROUPS],
    pub(crate) obj_allocated: usize,
    pub(crate) obj_used: usize,
    pub(crate) free_handles: Vec<u32>,
    pub(crate) next_handle: u32,
    /// Handle slots retired after using every generation (never handed out again).
    pub(crate) retired_handles: u32,
}

impl ClassInner {
    pub(crate) fn slot_off(&self, frame: u32, obj_idx: u32) -> usize {
        frame as usize * PAGE_SIZE + obj_idx as usize * self.size
    }

    pub(crate) fn insert(&mut self, id: u32, fg: usize) {
        let head = self.heads[fg];
        {
            let z = &mut self.zspages[id as usize];
            z.prev = NONE;
            z.next = head;
            z.fullness = fg as u8;
        }
        if head != NONE {
            self.zspages[head as usize].prev = id;
        }
        self.heads[fg] = id;
        self.group_count[fg] += 1;
    }

    pub(crate) fn remove(&mut self, id: u32) {
        let (prev, next, fg) = {
            let z = &self.zspages[id as usize];
            (z.prev, z.next, z.fullness as usize)
        };
        debug_assert!(fg < NR_FULLNESS_GROUPS, "removing an unlisted zspage");
        if prev != NONE {
            self.zspages[prev as usize].next = next;
        } else {
            self.heads[fg] = next;
        }
        if next != NONE {
            self.zspages[next as usize].prev = prev;
        }
        let z = &mut self.zspages[id as usize];
        z.prev = NONE;
        z.next = NONE;
        z.fullness = u8::MAX;
        self.group_count[fg] -= 1;
    }

    pub(crate) fn group_of(&self, id: u32) -> usize {
        fullness_group(
            self.zspages[id as usize].inuse as usize,
            self.objs_per_zspage,
        )
    }

    /// `fix_fullness_group`: moves a listed zspage to the list matching its ratio.
    pub(crate) fn fix_fullness(&mut self, id: u32) -> usize {
        let fg = self.group_of(id);
        if self.zspages[id as usize].fullness as usize != fg {
            self.remove(id);
            self.insert(id, fg);
        }
        fg
    }

    /// `find_get_zspage`: the first zspage of the fullest non-full group.
    pub(crate) fn find_get_zspage(&self) -> Option<u32> {
        (RATIO_0..=RATIO_99)
            .rev()
            .map(|fg| self.heads[fg])
            .find(|&h| h != NONE)
    }

    /// Registers a zspage on `frame` and threads its free list through the slot headers
    /// (`init_zspage`); this touches every page of it, as the kernel does.
    // Inline: its one caller is the allocation path (Pool::alloc_impl, another module).
    #[inline]
    pub(crate) fn new_zspage(&mut self, frame: u32, arena: &Arena) -> u32 {
        let zs = ZsPage {
            frame,
            inuse: 0,
            freeobj: 0,
            fullness: u8::MAX,
            live: true,
            prev: NONE,
            next: NONE,
            huge_owner: NONE,
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.zspages[id as usize] = zs;
                id
            }
            None => {
                self.zspages.push(zs);
                (self.zspages.len() - 1) as u32
            }
        };
        if !self.huge {
            for i in 0..self.objs_per_zspage as u32 {
                let next = if i + 1 < self.objs_per_zspage as u32 {
                    i + 1
                } else {
                    NONE
                };
                // SAFETY: the run was just handed to this class (exclusively ours), the slot
                // header is 8-byte aligned (sizes are multiples of 16) and we hold the class lock.
                unsafe { arena.write_header(self.slot_off(frame, i), free_link(next)) };
            }
        }
        self.obj_allocated += self.objs_per_zspage;
        self.insert(id, RATIO_0);
        id
    }

    /// Unregisters an empty, unlisted zspage; returns its first frame, which the caller
    /// gives back to the arena after dropping the class lock.
    pub(crate) fn release_zspage(&mut self, id: u32) -> u32 {
        let z = &mut self.zspages[id as usize];
        debug_assert!(z.inuse == 0 && z.fullness == u8::MAX && z.live);
        z.live = false;
        self.free_ids.push(id);
        self.obj_allocated -= self.objs_per_zspage;
        z.frame
    }

    /// `obj_malloc`: takes the first free slot of zspage `id` for handle slot `owner`.
    pub(crate) fn obj_malloc(&mut self, id: u32, owner: u32, arena: &Arena) -> u32 {
        let huge = self.huge;
        let off = {
            let z = &self.zspages[id as usize];
            debug_assert!(z.freeobj != NONE);
            self.slot_off(z.frame, z.freeobj)
        };
        let z = &mut self.zspages[id as usize];
        let idx = z.freeobj;
        if huge {
            z.freeobj = NONE;
            z.huge_owner = owner;
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            let link = unsafe { arena.read_header(off) };
            debug_assert!(link & 1 == 0, "free list points at an allocated slot");
            z.freeobj = (link >> 1) as u32;
            // SAFETY: as above.
            unsafe { arena.write_header(off, allocated_tag(owner)) };
        }
        z.inuse += 1;
        idx
    }

    /// `obj_free`: pushes slot `idx` of zspage `id` on its free list (LIFO).
    pub(crate) fn obj_free(&mut self, id: u32, idx: u32, arena: &Arena) {
        let off = self.slot_off(self.zspages[id as usize].frame, idx);
        let huge = self.huge;
        let z = &mut self.zspages[id as usize];
        if huge {
            z.huge_owner = NONE;
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            unsafe { arena.write_header(off, free_link(z.freeobj)) };
        }
        z.freeobj = idx;
        z.inuse -= 1;
    }

    /// Handle slot owning object `idx` of zspage `id`, if the slot is allocated.
    pub(crate) fn owner_of(&self, id: u32, idx: u32, arena: &Arena) -> Option<u32> {
        let z = &self.zspages[id as usize];
        if self.huge {
            (z.huge_owner != NONE).then_some(z.huge_owner)
        } else {
            // SAFETY: header of a slot of a live zspage of this class; class lock held.
            let h = unsafe { arena.read_header(self.slot_off(z.frame, idx)) };
            (h & 1 == 1).then_some((h >> 1) as u32)
        }
    }

    /// Bytes held by the zspage records and the free lists.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.zspages.capacity() * std::mem::size_of::<ZsPage>()
            + (self.free_ids.capacity() + self.free_handles.capacity()) * std::mem::size_of::<u32>()
    }

    /// `zs_can_compact`: pages that compaction could free in this class.
    pub(crate) fn can_compact(&self) -> usize {
        (self.obj_allocated - self.obj_used) / self.objs_per_zspage * self.pages_per_zspage
    }

    pub(crate) fn take_handle_slot(&mut self) -> Result<u32, Error> {
        if let Some(s) = self.free_handles.pop() {
            return Ok(s);
        }
        if self.next_handle as usize >= MAX_HANDLES_PER_CLASS {
            return Err(Error::OutOfMemory);
        }
        self.next_handle += 1;
        Ok(self.next_handle - 1)
    }

    /// Takes the first zspage of the first non-empty group in `groups` off its list.
    pub(crate) fn isolate_first(&mut self, groups: impl Iterator<Item = usize>) -> Option<u32> {
        for fg in groups {
            let h = self.heads[fg];
            if h != NONE {
                self.remove(h);
                return Some(h);
            }
        }
        None
    }
}
