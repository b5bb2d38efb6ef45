// SPDX-License-Identifier: MIT
//! Handles and the per-class handle tables.
//!
//! A [`Handle`] packs `generation:24 | class index:8 | slot:32` (high to low). `slot` indexes
//! the class's handle table, whose entries are two atomic words:
//!
//! ```text
//! state: generation:24 (bits 40..64) | version:16 | ALLOCATED | FREE_PENDING | MOVING | WRITING | readers:20
//! loc:   zspage id:26 (bits 38..64) | obj_idx:12 (bits 26..38) | first frame of zspage:26
//! ```
//!
//! The state word is the per-object lock that makes reads, writes, frees and compaction moves
//! of one object mutually exclusive without any pool-wide lock: readers add to `readers`,
//! a writer sets `WRITING`, the compactor sets `MOVING` (only when there are no readers),
//! and a free bumps the generation (so stale handles fail) or, with readers present, sets
//! `FREE_PENDING` and lets the last reader finish the free. `loc` changes only while `MOVING`
//! is set (or before the object is published), under the class lock. `version` counts the
//! completed moves and writes of the live object, so that an optimistic reader, which takes no
//! reader count, can tell that nothing moved or rewrote the object during its read: the state
//! word, readers aside, is then the same before and after (see `Pool::read_optimistic`).
//!
//! **Stale handles are detected for the pool's lifetime.** A slot's generations run from the
//! table's first generation through all 2^24 - 1 non-zero values; when a free would bring a
//! slot back to its first generation, the slot is retired (never put on the free list again)
//! instead, so no slot ever reuses a generation and a freed handle can never name a later
//! object, however hot its slot (last-freed-first reuse would otherwise wrap one slot in
//! seconds). A retired slot costs its 16-byte entry, once per 2^24 - 1 frees of that slot. A
//! class runs out of slots, and allocation fails with `OutOfMemory`, after about
//! 2^31 × (2^24 - 1) ≈ 3.6 × 10^16 allocations. A handle of *another* pool is rejected as
//! long as the two pools' generations differ (pools start at well-spread generations).

use std::num::NonZeroU64;

use crate::sync::AtomicU64;
use std::sync::OnceLock;

/// An opaque, stable reference to an allocated object. Compaction moves objects without
/// changing their handles; a freed handle is detected (generation bits) and rejected with
/// [`crate::Error::InvalidHandle`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Handle(NonZeroU64);

pub(crate) const GEN_BITS: u32 = 24;
pub(crate) const GEN_SHIFT: u32 = 40;
pub(crate) const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const CLASS_SHIFT: u32 = 32;

impl Handle {
    /// The raw 64-bit value (never 0), e.g. to store in a compact table.
    pub fn to_raw(self) -> u64 {
        self.0.get()
    }

    /// Rebuilds a handle from [`Self::to_raw`]; `None` for 0. A value that was never a handle
    /// is not rejected here but by the pool ([`crate::Error::InvalidHandle`]).
    pub fn from_raw(v: u64) -> Option<Handle> {
        NonZeroU64::new(v).map(Handle)
    }

    pub(crate) fn new(gen: u64, class_index: usize, slot: u32) -> Handle {
        debug_assert!(gen != 0 && gen <= GEN_MASK && class_index < 256);
        let v = (gen << GEN_SHIFT) | ((class_index as u64) << CLASS_SHIFT) | slot as u64;
        Handle(NonZeroU64::new(v).expect("generation is never 0"))
    }

    pub(crate) fn generation(self) -> u64 {
        self.0.get() >> GEN_SHIFT
    }

    pub(crate) fn class_index(self) -> usize {
        ((self.0.get() >> CLASS_SHIFT) & 0xff) as usize
    }

    pub(crate) fn slot(self) -> u32 {
        self.0.get() as u32
    }
}

// --- state word ---------------------------------------------------------------------------

pub(crate) const READERS_MASK: u64 = (1 << 20) - 1;
pub(crate) const WRITING: u64 = 1 << 20;
pub(crate) const MOVING: u64 = 1 << 21;
pub(crate) const FREE_PENDING: u64 = 1 << 22;
pub(crate) const ALLOCATED: u64 = 1 << 23;

/// The version field (bits 24..40): bumped when a move or a write of the live object ends.
pub(crate) const VERSION_SHIFT: u32 = 24;
pub(crate) const VERSION_MASK: u64 = 0xffff << VERSION_SHIFT;

/// `s` with its version advanced (wrapping within its 16 bits: an optimistic read would need
/// 65536 moves or writes of its object to happen during it to be fooled).
pub(crate) fn bump_version(s: u64) -> u64 {
    (s & !VERSION_MASK) | (s.wrapping_add(1 << VERSION_SHIFT) & VERSION_MASK)
}

pub(crate) fn state_gen(s: u64) -> u64 {
    s >> GEN_SHIFT
}

/// A per-pool starting generation (never 0): pools created one after another get
/// well-spread values.
pub(crate) fn pool_first_gen() -> u64 {
    static POOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = POOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let g = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & GEN_MASK;
    if g == 0 {
        1
    } else {
        g
    }
}

/// The generation after `gen`, skipping 0 so that handles are never 0.
pub(crate) fn next_gen(gen: u64) -> u64 {
    let g = (gen + 1) & GEN_MASK;
    if g == 0 {
        1
    } else {
        g
    }
}

/// State of a free entry whose next handle will carry generation `gen`.
pub(crate) fn free_state(gen: u64) -> u64 {
    gen << GEN_SHIFT
}

// --- loc word ------------------------------------------------------------------------------

pub(crate) const FRAME_BITS: u32 = 26;
pub(crate) const OBJ_IDX_BITS: u32 = 12;
pub(crate) const ZSID_BITS: u32 = 64 - FRAME_BITS - OBJ_IDX_BITS;
/// Largest arena (in frames) the loc encoding can address (256 GiB).
pub(crate) const MAX_FRAMES: usize = 1 << FRAME_BITS;
/// Largest number of zspages one class can have at once.
pub(crate) const MAX_ZSPAGES_PER_CLASS: usize = 1 << ZSID_BITS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub zsid: u32,
    pub obj_idx: u32,
    pub frame: u32,
}

impl Loc {
    pub(crate) fn pack(self) -> u64 {
        debug_assert!((self.frame as usize) < MAX_FRAMES);
        debug_assert!(self.obj_idx < (1 << OBJ_IDX_BITS));
        debug_assert!((self.zsid as usize) < MAX_ZSPAGES_PER_CLASS);
        ((self.zsid as u64) << (FRAME_BITS + OBJ_IDX_BITS))
            | ((self.obj_idx as u64) << FRAME_BITS)
            | self.frame as u64
    }

    pub(crate) fn unpack(v: u64) -> Loc {
        Loc {
            zsid: (v >> (FRAME_BITS + OBJ_IDX_BITS)) as u32,
            obj_idx: ((v >> FRAME_BITS) & ((1 << OBJ_IDX_BITS) - 1)) as u32,
            frame: (v & ((1 << FRAME_BITS) - 1)) as u32,
        }
    }
}

// --- handle table ----------------------------------------------------------------------------

/// One handle-table entry (see the module docs).
#[derive(Default)]
pub(crate) struct Entry {
    pub state: AtomicU64,
    pub loc: AtomicU64,
}

/// Bytes of the handle-table entry the pool keeps for every live object (outside the zspages:
/// the per-object metadata besides the in-slot header).
pub const HANDLE_ENTRY_SIZE: usize = std::mem::size_of::<Entry>();
const _: () = assert!(HANDLE_ENTRY_SIZE == 16);

const SEG_BASE: usize = 256;
const NUM_SEGS: usize = 23;
/// Entries a class's table can hold: `SEG_BASE * (2^NUM_SEGS - 1)`, about 2.1 billion. The
/// doubling keeps a table within twice its high-water mark; the first segment (4 KiB) is what
/// a class with few objects pays (a 64-entry first segment would save about 12 bytes per
/// object in a pool of 8192 objects, for one more instruction per handle resolution).
pub(crate) const MAX_HANDLES_PER_CLASS: usize = SEG_BASE * ((1 << NUM_SEGS) - 1);

/// A growable table of entries whose existing entries never move, so they can be reached
/// without a lock: segment `s` holds `SEG_BASE << s` entries and is created on first use.
/// `repr(C)`: the segments come first, so the first ones share a cache line with what
/// precedes the table in its `SizeClass`.
#[repr(C)]
pub(crate) struct HandleTable {
    segs: [OnceLock<Box<[Entry]>>; NUM_SEGS],
    /// Generation of never-used entries: differs per pool, so a handle of one pool is
    /// (almost always) rejected by another instead of naming an unrelated object. A slot whose
    /// generation comes back to it is retired.
    first_gen: u64,
}

/// Bytes of the first two segments' cells, the ones a `SizeClass` keeps in its first line.
pub(crate) const HOT_SEGS_BYTES: usize = 2 * std::mem::size_of::<OnceLock<Box<[Entry]>>>();

fn seg_of(idx: usize) -> (usize, usize) {
    let v = idx / SEG_BASE + 1;
    let seg = (usize::BITS - 1 - v.leading_zeros()) as usize;
    (seg, idx - SEG_BASE * ((1 << seg) - 1))
}

impl HandleTable {
    pub(crate) fn new(first_gen: u64) -> HandleTable {
        debug_assert!(first_gen != 0 && first_gen <= GEN_MASK);
        HandleTable {
            segs: std::array::from_fn(|_| OnceLock::new()),
            first_gen,
        }
    }

    /// Bytes held by the segments created so far (they are never freed).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.segs
            .iter()
            .filter_map(OnceLock::get)
            .map(|s| std::mem::size_of_val::<[Entry]>(s))
            .sum()
    }

    /// The generation of never-used entries (and the one a slot retires at).
    #[inline]
    pub(crate) fn first_gen(&self) -> u64 {
        self.first_gen
    }

    /// The entry at `idx`, if its segment exists.
    pub(crate) fn get(&self, idx: u32) -> Option<&Entry> {
        let (seg, off) = seg_of(idx as usize);
        self.segs.get(seg)?.get().map(|s| &s[off])
    }

    /// The entry at `idx`, creating its segment (entries start free, at `first_gen`).
    pub(crate) fn get_or_create(&self, idx: u32) -> &Entry {
        let (seg, off) = seg_of(idx as usize);
        let s = self.segs[seg].get_or_init(|| {
            (0..SEG_BASE << seg)
                .map(|_| Entry {
                    state: AtomicU64::new(free_state(self.first_gen)),
                    loc: AtomicU64::new(0),
                })
                .collect()
        });
        &s[off]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]

        #[test]
        fn handle_roundtrips(gen in 1u64..=GEN_MASK, class in 0usize..256, slot in any::<u32>()) {
            let h = Handle::new(gen, class, slot);
            let h2 = Handle::from_raw(h.to_raw()).unwrap();
            prop_assert_eq!(h, h2);
            prop_assert_eq!((h2.generation(), h2.class_index(), h2.slot()), (gen, class, slot));
        }

        #[test]
        fn loc_roundtrips(zsid in 0u32..(1 << ZSID_BITS), idx in 0u32..(1 << OBJ_IDX_BITS), frame in 0u32..(1 << FRAME_BITS)) {
            let l = Loc { zsid, obj_idx: idx, frame };
            prop_assert_eq!(Loc::unpack(l.pack()), l);
        }
    }

    #[test]
    fn segments_cover_indices_contiguously() {
        let mut expect = (0usize, 0usize);
        for idx in 0..(SEG_BASE * 40) {
            let got = seg_of(idx);
            if got.0 != expect.0 {
                assert_eq!(got, (expect.0 + 1, 0));
            } else {
                assert_eq!(got.1, expect.1);
            }
            expect = (got.0, got.1 + 1);
            assert!(got.1 < SEG_BASE << got.0);
        }
        let (last_seg, last_off) = seg_of(MAX_HANDLES_PER_CLASS - 1);
        assert_eq!(
            (last_seg, last_off),
            (NUM_SEGS - 1, (SEG_BASE << (NUM_SEGS - 1)) - 1)
        );
    }

    #[test]
    fn from_raw_zero_is_none() {
        assert_eq!(Handle::from_raw(0), None);
    }

    #[test]
    fn next_gen_skips_zero() {
        assert_eq!(next_gen(GEN_MASK), 1);
        assert_eq!(next_gen(1), 2);
    }
}
