//! One LRU list (the kernel's `list_lru_one`): an intrusive doubly linked list over a node slab.
//!
//! There is one list per (cgroup, node); together they form the single global LRU shared by all
//! pools ("mm/zswap: optimize for dynamic zswap_pools" (v3, 6.9)), or, with `LruMode::PerPool`,
//! one list per (cgroup, node, pool) as before that series. A node holds the entry's swap slot, packed into a u64; the entry holds its
//! node index. Nodes are only removed by the entry's owner (the free path); the shrinker only
//! rotates them, so a node it looked at may be gone by the time it checks the slot, and it then
//! re-validates the entry in the index (see `shrink.rs`).

use crate::SwapSlot;

pub(crate) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    prev: u32,
    next: u32,
    key: u64,
}

#[derive(Default)]
pub(crate) struct LruList {
    nodes: Vec<Node>,
    free: Option<u32>,
    head: Option<u32>,
    tail: Option<u32>,
    len: u32,
}

impl LruList {
    pub(crate) fn len(&self) -> u64 {
        u64::from(self.len)
    }

    /// Bytes held by the node slab.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    /// Append at the tail (newest). Returns the node index, or `None` if the slab can't grow.
    pub(crate) fn push_tail(&mut self, key: u64) -> Option<u32> {
        let idx = match self.free {
            Some(i) => {
                let next = self.nodes[i as usize].next;
                self.free = if next == NIL { None } else { Some(next) };
                i
            }
            None => {
                let i = u32::try_from(self.nodes.len()).ok().filter(|&i| i != NIL)?;
                if self.nodes.try_reserve(1).is_err() {
                    return None;
                }
                self.nodes.push(Node {
                    prev: NIL,
                    next: NIL,
                    key: 0,
                });
                i
            }
        };
        let prev = self.tail.unwrap_or(NIL);
        self.nodes[idx as usize] = Node {
            prev,
            next: NIL,
            key,
        };
        match self.tail {
            Some(t) => self.nodes[t as usize].next = idx,
            None => self.head = Some(idx),
        }
        self.tail = Some(idx);
        self.len += 1;
        Some(idx)
    }

    fn unlink(&mut self, idx: u32) {
        let Node { prev, next, .. } = self.nodes[idx as usize];
        if prev == NIL {
            self.head = (next != NIL).then_some(next);
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = (prev != NIL).then_some(prev);
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    /// Remove a node the caller owns (its entry is being freed).
    pub(crate) fn remove(&mut self, idx: u32) {
        debug_assert!((idx as usize) < self.nodes.len());
        self.unlink(idx);
        self.nodes[idx as usize] = Node {
            prev: NIL,
            next: self.free.unwrap_or(NIL),
            key: 0,
        };
        self.free = Some(idx);
        self.len -= 1;
        // Give the slab back when the list empties (a node index is never held across that).
        if self.len == 0 {
            *self = LruList::default();
        }
    }

    /// The coldest node moved to the tail (rotation before the lock is dropped, as the kernel's
    /// shrinker does), with its key. `None` if empty.
    pub(crate) fn rotate_head(&mut self) -> Option<(u32, u64)> {
        let h = self.head?;
        let key = self.nodes[h as usize].key;
        if self.tail != Some(h) {
            self.unlink(h);
            let t = self.tail.unwrap_or(NIL);
            self.nodes[h as usize].prev = t;
            self.nodes[h as usize].next = NIL;
            if t != NIL {
                self.nodes[t as usize].next = h;
            }
            self.tail = Some(h);
            if self.head.is_none() {
                self.head = Some(h);
            }
        }
        Some((h, key))
    }

    /// Keys from coldest to newest (tests and diagnostics).
    pub(crate) fn keys(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.len as usize);
        let mut cur = self.head;
        while let Some(i) = cur {
            let n = self.nodes[i as usize];
            v.push(n.key);
            cur = (n.next != NIL).then_some(n.next);
        }
        v
    }
}

#[inline]
pub(crate) fn pack_slot(slot: SwapSlot) -> u64 {
    (u64::from(slot.area) << 48) | slot.offset
}

#[inline]
pub(crate) fn unpack_slot(key: u64) -> SwapSlot {
    SwapSlot {
        area: (key >> 48) as u32,
        offset: key & ((1 << 48) - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_remove_rotate() {
        let mut l = LruList::default();
        let a = l.push_tail(1).unwrap();
        let b = l.push_tail(2).unwrap();
        let c = l.push_tail(3).unwrap();
        assert_eq!(l.keys(), vec![1, 2, 3]);
        assert_eq!(l.rotate_head(), Some((a, 1)));
        assert_eq!(l.keys(), vec![2, 3, 1]);
        l.remove(c);
        assert_eq!(l.keys(), vec![2, 1]);
        let d = l.push_tail(4).unwrap();
        assert_eq!(d, c, "freed node slots are reused");
        assert_eq!(l.keys(), vec![2, 1, 4]);
        l.remove(b);
        l.remove(a);
        assert_eq!(l.rotate_head(), Some((d, 4)));
        assert_eq!(l.keys(), vec![4]);
        l.remove(d);
        assert_eq!(l.len(), 0);
        assert_eq!(l.rotate_head(), None);
    }

    #[test]
    fn slot_packing() {
        let s = SwapSlot {
            area: 31,
            offset: (1 << 40) + 5,
        };
        assert_eq!(unpack_slot(pack_slot(s)), s);
    }
}
