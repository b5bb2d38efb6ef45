// SPDX-License-Identifier: MIT
//! Loom models of the cache's lock-free and hand-off protocols, each on the cache's own code
//! (through `crate::sync`): pool references (tryget against kill), the striped counters
//! (stripe ownership handed from thread to thread) and the slot's `LOADING` / `WRITEBACK`
//! in-flight bits (the owner reads the entry's object with no lock held; nobody frees it
//! meanwhile). Objects are loom cells, so loom reports any access the protocol fails to order.
//! Run with `scripts/loom.sh`.

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicUsize;
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::Ordering::Relaxed;

use crate::index::{AreaIndex, Entry, SlotValue, SlotWord};
use crate::poolref::{PoolRef, RefState};
use crate::stats::{claim_stripe_in, release_stripe_in, Striped};
use crate::sync::AtomicBool;

/// `tryget` racing the kill of the pool: the pool is released exactly once, whoever drops the
/// last reference, and no reference is granted after the release.
#[test]
fn pool_reference_tryget_against_kill() {
    loom::model(|| {
        let r = Arc::new(PoolRef::new());
        let releases = Arc::new(AtomicUsize::new(0));
        let getter = {
            let (r, releases) = (r.clone(), releases.clone());
            thread::spawn(move || {
                let released = match r.tryget_at(1) {
                    Ok(()) => r.put_at(1) == RefState::Release,
                    Err(st) => st == RefState::Release,
                };
                if released {
                    releases.fetch_add(1, Relaxed);
                }
            })
        };
        if r.kill() == RefState::Release {
            releases.fetch_add(1, Relaxed);
        }
        getter.join().unwrap();
        assert_eq!(releases.load(Relaxed), 1, "released exactly once");
        assert_eq!(r.count(), 0);
        assert!(r.tryget_at(1).is_err(), "no reference after the release");
    });
}

/// Two threads count into the striped counters: at most one owns stripe 1 at a time (plain
/// load and store), the other uses the shared stripe atomically or takes stripe 1 over after
/// its release; no update is lost.
#[test]
fn striped_counters_hand_a_stripe_over() {
    loom::model(|| {
        let owned = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let rows = Arc::new(Striped::<1>::new());
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (owned, rows) = (owned.clone(), rows.clone());
                thread::spawn(move || {
                    let s = claim_stripe_in(&owned[..], 2);
                    rows.add_on(s, 0, 1);
                    rows.add_on(s, 0, 2);
                    if s != 0 {
                        release_stripe_in(&owned[..], s);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(rows.sum(0), 6);
    });
}

fn entry() -> Entry {
    Entry {
        handle: 1,
        hint: 0,
        cgroup: 0,
        lru: 0,
        pool: 0,
        length: 100,
        node: 0,
        referenced: false,
    }
}

/// One slot holding an entry; its pool object is `obj`.
fn stored_slot() -> Arc<AreaIndex> {
    let idx = Arc::new(AreaIndex::new(4));
    let (shard, i) = idx.locate(0).unwrap();
    let mut t = shard.table.lock();
    assert!(t.reserve_entries());
    t.replace_entry(i, SlotWord::EMPTY, entry());
    t.set_word(i, SlotWord::EMPTY.with_value(SlotValue::Entry(i as u32)));
    drop(t);
    idx
}

/// What an exclusive `Inner::load` does with an entry: mark the slot `LOADING`, read the object
/// with no lock held, restore the word and wake waiters. (A load that keeps the entry takes no
/// mark: zsmalloc's read guard pins the object, which zsmalloc's own model of a read against a
/// free checks.)
fn load(idx: &AreaIndex, obj: &UnsafeCell<u64>) {
    let (shard, i) = idx.locate(0).unwrap();
    let (mut t, w) = shard.lock_idle(i);
    if let SlotValue::Entry(_) = w.value() {
        t.set_word(i, w.with_loading());
        drop(t);
        // SAFETY (model): LOADING keeps the entry, and so its object, alive.
        let v = obj.with(|p| unsafe { *p });
        assert_eq!(v, 1, "the object changed under a load");
        let mut t = shard.table.lock();
        t.set_word(i, w);
        shard.wake(&t);
    }
}

/// A stored slot, its object, and a thread loading it ([`load`]) against which the model's
/// main thread races.
fn stored_slot_with_loader() -> (Arc<AreaIndex>, Arc<UnsafeCell<u64>>, thread::JoinHandle<()>) {
    let idx = stored_slot();
    let obj = Arc::new(UnsafeCell::new(1u64));
    let loader = {
        let (idx, obj) = (idx.clone(), obj.clone());
        thread::spawn(move || load(&idx, &obj))
    };
    (idx, obj, loader)
}

/// The slot's `LOADING` bit against `zswap_invalidate` (`Inner::replace_slot`): the
/// invalidation waits for the load, then frees the entry and its object.
#[test]
fn loading_bit_against_invalidate() {
    loom::model(|| {
        let (idx, obj, loader) = stored_slot_with_loader();
        let (shard, i) = idx.locate(0).unwrap();
        let (mut t, w) = shard.lock_idle(i);
        if let SlotValue::Entry(ei) = w.value() {
            t.free_entry(ei);
            t.set_word(i, SlotWord::EMPTY);
            drop(t);
            // SAFETY (model): the slot was idle, the entry is out of the index: ours to free.
            obj.with_mut(|p| unsafe { *p = 0 });
        }
        loader.join().unwrap();
    });
}

/// The slot's `WRITEBACK` bit (`Inner::walk_one`) against a load: the writeback skips a slot in
/// flight, else marks it, reads the object with no lock held and frees it once the word says
/// "on disk"; the load waits for it and finds either the entry or the block.
#[test]
fn writeback_bit_against_load() {
    loom::model(|| {
        let (idx, obj, loader) = stored_slot_with_loader();
        let (shard, i) = idx.locate(0).unwrap();
        let mut t = shard.table.lock();
        let w = t.word(i);
        match (w.busy(), w.value()) {
            (false, SlotValue::Entry(ei)) => {
                t.set_word(i, w.with_writeback());
                drop(t);
                // SAFETY (model): WRITEBACK keeps the entry alive.
                let v = obj.with(|p| unsafe { *p });
                assert_eq!(v, 1);
                let mut t = shard.table.lock();
                t.free_entry(ei);
                t.set_word(i, SlotWord::EMPTY.with_value(SlotValue::OnDisk(0)));
                shard.wake(&t);
                drop(t);
                // SAFETY (model): the entry is out of the index and the slot idle.
                obj.with_mut(|p| unsafe { *p = 0 });
            }
            // In flight (the load owns it): the writeback skips the slot, and lets go of the
            // lock before waiting for the loader.
            _ => drop(t),
        }
        loader.join().unwrap();
    });
}
