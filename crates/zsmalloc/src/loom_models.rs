// SPDX-License-Identifier: MIT
//! Loom models of the per-object state word (`handle.rs`): the pool's own functions
//! (`Pool::acquire_read`, `release_read_word`, `free_state_word`, `begin_move`) on one handle
//! entry, with the object's bytes as loom cells so that loom reports any access the protocol
//! fails to order. Run with `scripts/loom.sh`.

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicUsize;
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::Ordering;

use crate::handle::{free_state, Entry, ALLOCATED, GEN_SHIFT};
use crate::sync::AtomicU64;
use crate::{Error, Pool};

const GEN: u64 = 7;

fn live_entry(loc: u64) -> Entry {
    Entry {
        state: AtomicU64::new((GEN << GEN_SHIFT) | ALLOCATED),
        loc: AtomicU64::new(loc),
    }
}

/// A reader against a free: the reader sees the object's bytes intact or fails with
/// `InvalidHandle`; the slot is released exactly once, after the last read of it (the release
/// writes the bytes, as the next object in the slot would).
#[test]
fn read_against_free() {
    loom::model(|| {
        let entry = Arc::new(live_entry(0));
        let bytes = Arc::new(UnsafeCell::new(42u64));
        let released = Arc::new(AtomicUsize::new(0));
        let release = |bytes: &UnsafeCell<u64>, released: &AtomicUsize| {
            released.fetch_add(1, Ordering::Relaxed);
            // SAFETY (model): the protocol claims nobody else touches a released slot.
            bytes.with_mut(|b| unsafe { *b = 0xdead });
        };
        let reader = {
            let (entry, bytes, released) = (entry.clone(), bytes.clone(), released.clone());
            thread::spawn(move || match Pool::acquire_read(&entry, GEN) {
                Ok(()) => {
                    // SAFETY (model): a reader count excludes frees of the slot.
                    let v = bytes.with(|b| unsafe { *b });
                    assert_eq!(v, 42, "a reader saw a freed object");
                    if Pool::release_read_word(&entry).is_some() {
                        release(&bytes, &released);
                    }
                }
                Err(e) => assert_eq!(e, Error::InvalidHandle),
            })
        };
        if let Some(_next) = Pool::free_state_word(&entry, GEN).unwrap() {
            release(&bytes, &released);
        }
        reader.join().unwrap();
        assert_eq!(released.load(Ordering::Relaxed), 1, "released exactly once");
        assert_eq!(
            entry.state.load(Ordering::Relaxed),
            free_state(GEN + 1),
            "free and the next generation"
        );
        assert_eq!(Pool::acquire_read(&entry, GEN), Err(Error::InvalidHandle));
        assert_eq!(
            Pool::free_state_word(&entry, GEN),
            Err(Error::InvalidHandle)
        );
    });
}

/// A reader against a compaction move: the reader finds the object where `loc` says, whole,
/// before or after the move, never half-moved; the mover only moves an object without readers.
#[test]
fn read_against_move() {
    loom::model(|| {
        let entry = Arc::new(live_entry(0));
        let slots = Arc::new([UnsafeCell::new(42u64), UnsafeCell::new(0u64)]);
        let reader = {
            let (entry, slots) = (entry.clone(), slots.clone());
            thread::spawn(move || {
                Pool::acquire_read(&entry, GEN).unwrap();
                let at = entry.loc.load(Ordering::Relaxed) as usize;
                // SAFETY (model): a reader count excludes moves of the object.
                let v = slots[at].with(|b| unsafe { *b });
                assert_eq!(v, 42, "a reader saw a half-moved object");
                assert!(Pool::release_read_word(&entry).is_none());
            })
        };
        if Pool::begin_move(&entry) {
            // SAFETY (model): MOVING excludes readers; the destination slot is free.
            let v = slots[0].with(|b| unsafe { *b });
            slots[1].with_mut(|b| unsafe { *b = v });
            entry.loc.store(1, Ordering::Relaxed);
            entry
                .state
                .fetch_and(!crate::handle::MOVING, Ordering::Release);
            // The old slot is free now: the next object may be written there.
            slots[0].with_mut(|b| unsafe { *b = 0xdead });
        }
        reader.join().unwrap();
    });
}

/// An optimistic reader against a compaction move and the reuse of the old slot: a read that
/// passes its check saw the object whole. The object's bytes are loom atomics here (loom has no
/// racy plain read; the pool's read is a plain one), so the model checks the protocol's
/// orderings: whatever the reader read, a passed check means it was 42.
#[test]
fn optimistic_read_against_move() {
    loom::model(|| {
        let entry = Arc::new(live_entry(0));
        let slots = Arc::new([loom::sync::atomic::AtomicU64::new(42), Default::default()]);
        let reader = {
            let (entry, slots) = (entry.clone(), slots.clone());
            thread::spawn(move || {
                let Some(before) = Pool::optimistic_begin(&entry, GEN) else {
                    return;
                };
                let at = entry.loc.load(Ordering::Relaxed) as usize;
                let v = slots[at].load(Ordering::Relaxed);
                if Pool::optimistic_valid(&entry, before) {
                    assert_eq!(v, 42, "a passed optimistic read saw another object's bytes");
                }
            })
        };
        if Pool::begin_move(&entry) {
            let v = slots[0].load(Ordering::Relaxed);
            slots[1].store(v, Ordering::Relaxed);
            entry.loc.store(1, Ordering::Relaxed);
            Pool::end_move(&entry);
            // The old slot is free now: the next object may be written there, after the
            // release fence every writer of a slot issues (`alloc`, the compactor's copy).
            loom::sync::atomic::fence(Ordering::Release);
            slots[0].store(0xdead, Ordering::Relaxed);
        }
        reader.join().unwrap();
    });
}

/// An optimistic reader against a free and the next object written into the slot.
#[test]
fn optimistic_read_against_free() {
    loom::model(|| {
        let entry = Arc::new(live_entry(0));
        let bytes = Arc::new(loom::sync::atomic::AtomicU64::new(42));
        let reader = {
            let (entry, bytes) = (entry.clone(), bytes.clone());
            thread::spawn(move || {
                let Some(before) = Pool::optimistic_begin(&entry, GEN) else {
                    return;
                };
                let v = bytes.load(Ordering::Relaxed);
                if Pool::optimistic_valid(&entry, before) {
                    assert_eq!(v, 42, "a passed optimistic read saw a freed object");
                }
            })
        };
        if let Some(_next) = Pool::free_state_word(&entry, GEN).unwrap() {
            loom::sync::atomic::fence(Ordering::Release);
            bytes.store(0xdead, Ordering::Relaxed);
        }
        reader.join().unwrap();
    });
}
