// SPDX-License-Identifier: MIT
//! The LRU of one (cgroup, node) (the kernel's `list_lru_one`): intrusive doubly linked lists
//! over node slabs.
//!
//! There is one [`Lru`] per (cgroup, node); together they form the single global LRU shared by
//! all pools ("mm/zswap: optimize for dynamic zswap_pools" (v3, 6.9)), or, with
//! `LruMode::PerPool`, one per (cgroup, node, pool) as before that series (see
//! `Cgroup::lists`). The warm-entry estimate of `WarmProtection::ProtectedSize` belongs to the
//! (cgroup, node), not to a list: `Cgroup::protected`. A node holds the entry's
//! swap slot, packed into a u64; the entry holds its node's index. Nodes are only removed by
//! the entry's owner (the free path); the shrinker only rotates them, so a node it looked at
//! may be gone by the time it checks the slot, and it then re-validates the entry in the index
//! (see `shrink.rs`).
//!
//! **Sub-lists.** An `Lru` is [`NR_SUBLISTS`] lists, each under its own spinning lock; a thread
//! appends to the one of its counter stripe (`stats::stripe_index`), so threads storing and
//! invalidating their own pages never share a lock or a node's cache line (with one list, two
//! threads invalidating scaled 1.1x). The order stays one global order: every append and every
//! rotation takes the next number of the `Lru`'s sequence, and the shrinker takes the head whose
//! number is the oldest, so a walk meets the entries exactly as one list would hold them (up to
//! races between concurrent appends, as in the kernel). An entry's node index carries its
//! sub-list in the top bits.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use crate::spin::SpinMutex;
use crate::SwapSlot;

pub(crate) const NIL: u32 = u32::MAX;

/// Sub-lists per [`Lru`] (a power of two).
pub(crate) const NR_SUBLISTS: usize = 8;
/// Bits of a node index within its sub-list; the sub-list is in the bits above.
const SUB_SHIFT: u32 = 29;
const INDEX_MASK: u32 = (1 << SUB_SHIFT) - 1;
/// `Sub::head_seq` of an empty sub-list.
const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct Node {
    prev: u32,
    next: u32,
    key: u64,
}

/// One list. `seqs[i]` is node `i`'s number in the `Lru`'s sequence (kept apart from the nodes
/// so a node stays 16 bytes).
#[derive(Default)]
struct LruList {
    nodes: Vec<Node>,
    seqs: Vec<u32>,
    free: Option<u32>,
    head: Option<u32>,
    tail: Option<u32>,
    len: u32,
}

impl LruList {
    /// Bytes held by the node slab.
    fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.seqs.capacity() * std::mem::size_of::<u32>()
    }

    /// The head's sequence number, `EMPTY` if none.
    fn head_seq(&self) -> u64 {
        self.head
            .map_or(EMPTY, |h| u64::from(self.seqs[h as usize]))
    }

    /// Append at the tail (newest). Returns the node index, or `None` if the slab can't grow.
    fn push_tail(&mut self, key: u64, seq: u32) -> Option<u32> {
        let idx = match self.free {
            Some(i) => {
                let next = self.nodes[i as usize].next;
                self.free = if next == NIL { None } else { Some(next) };
                i
            }
            None => {
                let i = u32::try_from(self.nodes.len())
                    .ok()
                    .filter(|&i| i <= INDEX_MASK)?;
                if self.nodes.try_reserve(1).is_err() || self.seqs.try_reserve(1).is_err() {
                    return None;
                }
                self.nodes.push(Node {
                    prev: NIL,
                    next: NIL,
                    key: 0,
                });
                self.seqs.push(0);
                i
            }
        };
        let prev = self.tail.unwrap_or(NIL);
        self.nodes[idx as usize] = Node {
            prev,
            next: NIL,
            key,
        };
        self.seqs[idx as usize] = seq;
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
    fn remove(&mut self, idx: u32) {
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

    /// The coldest node moved to the tail with sequence number `seq` (rotation before the lock
    /// is dropped, as the kernel's shrinker does), with its key. `None` if empty.
    fn rotate_head(&mut self, seq: u32) -> Option<(u32, u64)> {
        let h = self.head?;
        let key = self.nodes[h as usize].key;
        self.seqs[h as usize] = seq;
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

    /// Checks the links and returns `(node index, key)` from coldest to newest (the cache's
    /// invariant checker): `prev` links mirror `next` links, the walk ends at the tail, its
    /// length is `len`, and sequence numbers rise along the list (as ages from `now`).
    fn check(&self, now: u32) -> Result<Vec<(u32, u64)>, String> {
        let mut out = Vec::with_capacity(self.len as usize);
        let (mut prev, mut cur) = (NIL, self.head);
        let mut last_age = u32::MAX;
        while let Some(i) = cur {
            let n = self
                .nodes
                .get(i as usize)
                .ok_or_else(|| format!("node {i} beyond the slab"))?;
            if n.prev != prev {
                return Err(format!("node {i}: prev {} != {prev}", n.prev));
            }
            let age = now.wrapping_sub(self.seqs[i as usize]);
            if age > last_age {
                return Err(format!("node {i}: younger than the node before it"));
            }
            last_age = age;
            out.push((i, n.key));
            if out.len() > self.nodes.len() {
                return Err("the list loops".into());
            }
            prev = i;
            cur = (n.next != NIL).then_some(n.next);
        }
        if self.tail != (prev != NIL).then_some(prev) {
            return Err(format!("tail {:?}, the walk ends at {prev}", self.tail));
        }
        if out.len() != self.len as usize {
            return Err(format!("{} nodes linked, len {}", out.len(), self.len));
        }
        Ok(out)
    }

    /// `(sequence number, key)` from coldest to newest.
    fn entries(&self) -> Vec<(u32, u64)> {
        let mut v = Vec::with_capacity(self.len as usize);
        let mut cur = self.head;
        while let Some(i) = cur {
            let n = self.nodes[i as usize];
            v.push((self.seqs[i as usize], n.key));
            cur = (n.next != NIL).then_some(n.next);
        }
        v
    }
}

/// A sub-list with what other threads read of it without its lock.
struct Sub {
    list: SpinMutex<LruList>,
    /// The head's sequence number (`EMPTY` if none), updated under the lock.
    head_seq: AtomicU64,
    /// Nodes on the list, updated under the lock.
    len: AtomicU32,
}

impl Sub {
    fn publish(&self, l: &LruList) {
        self.head_seq.store(l.head_seq(), Relaxed);
        self.len.store(l.len, Relaxed);
    }
}

/// The LRU of one (cgroup, node): [`NR_SUBLISTS`] sub-lists in one order (see the module docs).
pub(crate) struct Lru {
    subs: [CachePadded<Sub>; NR_SUBLISTS],
    /// The next sequence number (wrapping; ages are compared as differences from it).
    seq: CachePadded<AtomicU32>,
    /// A sequence shared with the caches of other processes (`Zswap::for_process_tree`), used
    /// instead of `seq`: the lists of all of them then hold their entries in one order, so
    /// their heads' ages compare, as the entries of one global LRU would.
    shared: Option<&'static AtomicU32>,
}

impl Default for Lru {
    fn default() -> Self {
        Self::with_clock(None)
    }
}

impl Lru {
    /// An empty list numbering its entries from `shared` (None: its own sequence).
    pub(crate) fn with_clock(shared: Option<&'static AtomicU32>) -> Self {
        Lru {
            subs: std::array::from_fn(|_| {
                CachePadded::new(Sub {
                    list: SpinMutex::new(LruList::default()),
                    head_seq: AtomicU64::new(EMPTY),
                    len: AtomicU32::new(0),
                })
            }),
            seq: CachePadded::new(AtomicU32::new(0)),
            shared,
        }
    }

    /// The sequence the list numbers its entries from.
    #[inline]
    pub(crate) fn clock(&self) -> &AtomicU32 {
        match self.shared {
            Some(c) => c,
            None => &self.seq,
        }
    }

    /// The sequence number of the coldest entry (the oldest head of the sub-lists), `None` if
    /// the list is empty.
    pub(crate) fn oldest(&self) -> Option<u32> {
        let now = self.clock().load(Relaxed);
        self.subs
            .iter()
            .filter_map(|s| {
                let h = s.head_seq.load(Relaxed);
                (h != EMPTY).then_some(h as u32)
            })
            .max_by_key(|&h| now.wrapping_sub(h))
    }
    /// Entries on the list.
    pub(crate) fn len(&self) -> u64 {
        self.subs
            .iter()
            .map(|s| u64::from(s.len.load(Relaxed)))
            .sum()
    }

    /// Bytes held by the node slabs.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.subs.iter().map(|s| s.list.lock().heap_bytes()).sum()
    }

    /// Append `key` at the tail (newest), on the calling thread's sub-list. Returns the node's
    /// index (sub-list in the top bits), or `None` if the slab can't grow.
    pub(crate) fn push(&self, key: u64) -> Option<u32> {
        let sub = crate::stats::stripe_index() & (NR_SUBLISTS - 1);
        let s = &self.subs[sub];
        let mut l = s.list.lock();
        let idx = l.push_tail(key, self.clock().fetch_add(1, Relaxed))?;
        s.publish(&l);
        Some(((sub as u32) << SUB_SHIFT) | idx)
    }

    /// Remove the node of an entry being freed.
    pub(crate) fn remove(&self, node: u32) {
        let s = &self.subs[(node >> SUB_SHIFT) as usize];
        let mut l = s.list.lock();
        l.remove(node & INDEX_MASK);
        s.publish(&l);
    }

    /// The coldest node of all the sub-lists, moved to the tail; with its key. `None` if the
    /// list is empty. Concurrent appends may make it one of the coldest rather than the coldest.
    pub(crate) fn rotate_head(&self) -> Option<(u32, u64)> {
        for _ in 0..2 * NR_SUBLISTS {
            let now = self.clock().load(Relaxed);
            let coldest = (0..NR_SUBLISTS)
                .filter_map(|i| {
                    let h = self.subs[i].head_seq.load(Relaxed);
                    (h != EMPTY).then(|| (now.wrapping_sub(h as u32), i))
                })
                .max();
            let (_, sub) = coldest?;
            let s = &self.subs[sub];
            let mut l = s.list.lock();
            // Emptied since we looked: look again.
            let Some((idx, key)) = l.rotate_head(self.clock().fetch_add(1, Relaxed)) else {
                continue;
            };
            s.publish(&l);
            return Some((((sub as u32) << SUB_SHIFT) | idx, key));
        }
        None
    }

    /// Checks every sub-list ([`LruList::check`]) and what it publishes to lock-free readers;
    /// returns `(node index, key)` of every node, sub-list by sub-list (the cache's invariant
    /// checker, on a quiescent cache).
    pub(crate) fn check(&self) -> Result<Vec<(u32, u64)>, String> {
        let now = self.clock().load(Relaxed);
        let mut out = Vec::new();
        for (si, s) in self.subs.iter().enumerate() {
            let l = s.list.lock();
            let nodes = l.check(now).map_err(|m| format!("sub-list {si}: {m}"))?;
            if s.len.load(Relaxed) != l.len || s.head_seq.load(Relaxed) != l.head_seq() {
                return Err(format!(
                    "sub-list {si}: published length or head out of date"
                ));
            }
            out.extend(
                nodes
                    .into_iter()
                    .map(|(i, k)| (((si as u32) << SUB_SHIFT) | i, k)),
            );
        }
        Ok(out)
    }

    /// Keys from coldest to newest (tests and diagnostics).
    pub(crate) fn keys(&self) -> Vec<u64> {
        let now = self.clock().load(Relaxed);
        let mut all: Vec<(u32, u32, u64)> = self
            .subs
            .iter()
            .flat_map(|s| s.list.lock().entries())
            .map(|(seq, key)| (now.wrapping_sub(seq), seq, key))
            .collect();
        all.sort_unstable_by_key(|a| std::cmp::Reverse(a.0));
        all.into_iter().map(|(_, _, k)| k).collect()
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
        let l = Lru::default();
        let a = l.push(1).unwrap();
        let b = l.push(2).unwrap();
        let c = l.push(3).unwrap();
        assert_eq!(l.keys(), vec![1, 2, 3]);
        assert_eq!(l.rotate_head(), Some((a, 1)));
        assert_eq!(l.keys(), vec![2, 3, 1]);
        l.remove(c);
        assert_eq!(l.keys(), vec![2, 1]);
        let d = l.push(4).unwrap();
        assert_eq!(d, c, "freed node slots are reused");
        assert_eq!(l.keys(), vec![2, 1, 4]);
        l.remove(b);
        l.remove(a);
        assert_eq!(l.rotate_head(), Some((d, 4)));
        assert_eq!(l.keys(), vec![4]);
        l.remove(d);
        assert_eq!(l.len(), 0);
        assert_eq!(l.heap_bytes(), 0, "an empty list holds no slab");
        assert_eq!(l.rotate_head(), None);
    }

    #[test]
    fn threads_append_to_their_own_sub_lists_in_one_order() {
        let l = Lru::default();
        let a = l.push(1).unwrap();
        // Another thread (another counter stripe) appends to another sub-list.
        let b = std::thread::scope(|s| s.spawn(|| l.push(2).unwrap()).join().unwrap());
        let c = l.push(3).unwrap();
        assert_ne!(a >> SUB_SHIFT, b >> SUB_SHIFT, "a sub-list per thread");
        assert_eq!(a >> SUB_SHIFT, c >> SUB_SHIFT);
        assert_eq!(l.keys(), vec![1, 2, 3], "one order across sub-lists");
        assert_eq!(l.len(), 3);
        // The walk takes the coldest head of all sub-lists, and a rotated node is newest.
        assert_eq!(l.rotate_head(), Some((a, 1)));
        assert_eq!(l.rotate_head(), Some((b, 2)));
        assert_eq!(l.keys(), vec![3, 1, 2]);
        assert_eq!(l.rotate_head(), Some((c, 3)));
        l.remove(b);
        assert_eq!(l.keys(), vec![1, 3]);
        l.remove(a);
        l.remove(c);
        assert_eq!((l.len(), l.rotate_head()), (0, None));
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
