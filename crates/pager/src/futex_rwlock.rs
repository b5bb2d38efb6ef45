// SPDX-License-Identifier: MIT
//! A reader-writer lock whose waiters wait in the kernel (one futex word), for the regions
//! table: a fork child inherits the word and nothing else.
//!
//! Why not parking_lot's: it keeps its waiters in a process-wide table of queues in user
//! memory, each bucket under a small lock of its own. A thread of the parent caught inside a
//! bucket's critical section at the instant of `fork` (parking on the regions lock, which the
//! forking thread holds for writing across the fork) leaves that bucket locked in the child
//! forever: the child hung in `parking_lot_core::unpark_all` dropping the parent's waiters
//! (once in 82 runs of a program forking from a thread while two others fault, with the
//! reclaim thread evicting beside them). Here a parent's waiter is only a sleeper in the
//! parent's kernel futex queue; the child's copy of the word says "write-locked", and the
//! child unlocks it.
//!
//! Semantics are parking_lot's where the pager relies on them: a recursive read succeeds
//! whenever no writer holds the lock, even if a writer waits (a thread holding the lock for
//! reading may take it again); a plain read waits for waiting writers too.
//!
//! The word: bit 31 a writer holds it, bit 30 writers wait, bit 29 readers wait, bits 0-28
//! the number of readers. Waiters sleep on the word with the value they saw; every change that
//! may let one of them in (the last reader leaving with writers waiting, a writer leaving with
//! anyone waiting) wakes them all, and they compete again.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use parking_lot::lock_api::{GuardNoSend, RawRwLock, RawRwLockRecursive};

const WRITER: u32 = 1 << 31;
const WRITERS_WAITING: u32 = 1 << 30;
const READERS_WAITING: u32 = 1 << 29;
const READERS: u32 = READERS_WAITING - 1;

/// The raw lock (use it through [`FutexRwLock`]).
pub struct RawFutexRwLock {
    state: AtomicU32,
}

/// A reader-writer lock over `T` with kernel-held waiters (see the module docs).
pub type FutexRwLock<T> = parking_lot::lock_api::RwLock<RawFutexRwLock, T>;

fn futex_wait(word: &AtomicU32, expected: u32) {
    // Made with the instruction itself, not through the preload's `syscall` wrapper, which
    // would look the word up in the regions this lock guards.
    let op = (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as usize;
    let w = word as *const AtomicU32 as usize;
    // SAFETY: FUTEX_WAIT_PRIVATE on a live, aligned word of this process; no timeout. An
    // early return (EAGAIN, EINTR, a spurious wake) only makes the caller look again.
    let r =
        unsafe { crate::sys::direct_syscall(libc::SYS_futex, [w, op, expected as usize, 0, 0, 0]) };
    let _ = r;
}

fn futex_wake_all(word: &AtomicU32) {
    let op = (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize;
    let w = word as *const AtomicU32 as usize;
    // SAFETY: FUTEX_WAKE_PRIVATE on a live word of this process.
    let r =
        unsafe { crate::sys::direct_syscall(libc::SYS_futex, [w, op, i32::MAX as usize, 0, 0, 0]) };
    let _ = r;
}

impl RawFutexRwLock {
    /// One attempt at a read lock; `Err` gives the word that refused it.
    #[inline]
    fn try_read(&self, refuse: u32) -> Result<(), u32> {
        let mut s = self.state.load(Relaxed);
        loop {
            if s & refuse != 0 || s & READERS == READERS {
                return Err(s);
            }
            match self.state.compare_exchange_weak(s, s + 1, Acquire, Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    /// Read lock, waiting while any bit of `refuse` is set.
    fn read_slow(&self, refuse: u32) {
        loop {
            let s = match self.try_read(refuse) {
                Ok(()) => return,
                Err(s) => s,
            };
            if s & READERS == READERS {
                std::thread::yield_now();
                continue;
            }
            self.wait_on(s, READERS_WAITING);
        }
    }

    /// Announces a waiter (`bit`) on the word last seen as `s` and sleeps until the word
    /// changes; returns at once if it changed meanwhile (the caller looks again either way).
    fn wait_on(&self, s: u32, bit: u32) {
        let waiting = s | bit;
        if s & bit == 0
            && self
                .state
                .compare_exchange(s, waiting, Relaxed, Relaxed)
                .is_err()
        {
            return;
        }
        futex_wait(&self.state, waiting);
    }
}

// SAFETY: `lock_exclusive` returns only when this thread set WRITER on a word with no writer
// and no reader, and nothing else sets WRITER or adds a reader until `unlock_exclusive` clears
// it; a read lock is a reader count added while WRITER was clear, which keeps WRITER clear
// until it is taken back. Acquire on taking, Release on giving back.
unsafe impl RawRwLock for RawFutexRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawFutexRwLock = RawFutexRwLock {
        state: AtomicU32::new(0),
    };
    type GuardMarker = GuardNoSend;

    #[inline]
    fn lock_shared(&self) {
        if self.try_read(WRITER | WRITERS_WAITING).is_err() {
            self.read_slow(WRITER | WRITERS_WAITING);
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.try_read(WRITER | WRITERS_WAITING).is_ok()
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        let prev = self.state.fetch_sub(1, Release);
        if prev & READERS == 1 && prev & WRITERS_WAITING != 0 {
            futex_wake_all(&self.state);
        }
    }

    fn lock_exclusive(&self) {
        loop {
            let s = self.state.load(Relaxed);
            if s & (WRITER | READERS) == 0 {
                // The waiting bits stay: the unlock wakes whoever set them.
                if self
                    .state
                    .compare_exchange_weak(s, s | WRITER, Acquire, Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            self.wait_on(s, WRITERS_WAITING);
        }
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        let s = self.state.load(Relaxed);
        s & (WRITER | READERS) == 0
            && self
                .state
                .compare_exchange(s, s | WRITER, Acquire, Relaxed)
                .is_ok()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        let prev = self.state.swap(0, Release);
        if prev & (WRITERS_WAITING | READERS_WAITING) != 0 {
            futex_wake_all(&self.state);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Relaxed) & (WRITER | READERS) != 0
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.state.load(Relaxed) & WRITER != 0
    }
}

// SAFETY: a recursive read is a read lock that does not wait for waiting writers (only for a
// writer holding the lock), so a thread that holds a read lock can always take another.
unsafe impl RawRwLockRecursive for RawFutexRwLock {
    #[inline]
    fn lock_shared_recursive(&self) {
        if self.try_read(WRITER).is_err() {
            self.read_slow(WRITER);
        }
    }

    #[inline]
    fn try_lock_shared_recursive(&self) -> bool {
        self.try_read(WRITER).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    /// The lock's word, to wait until a waiter has announced itself.
    fn word<T>(l: &FutexRwLock<T>) -> u32 {
        // SAFETY: only reads the word; the lock's state is not changed behind its back.
        unsafe { l.raw() }.state.load(SeqCst)
    }

    #[test]
    fn writers_exclude_everyone_and_readers_share() {
        let l = Arc::new(FutexRwLock::new(0u64));
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (l, inside) = (l.clone(), inside.clone());
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        if (i + t) % 7 == 0 {
                            let mut g = l.write();
                            assert_eq!(inside.fetch_add(1, SeqCst), 0, "a writer with company");
                            *g += 1;
                            inside.fetch_sub(1, SeqCst);
                        } else {
                            let g = if i % 2 == 0 {
                                l.read()
                            } else {
                                l.read_recursive()
                            };
                            let v = *g;
                            assert!(inside.load(SeqCst) < 1 << 20);
                            drop(g);
                            std::hint::black_box(v);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let writes: u64 = (0..6u64)
            .map(|t| (0..20_000u64).filter(|i| (i + t) % 7 == 0).count() as u64)
            .sum();
        assert_eq!(*l.read(), writes);
        assert!(!l.is_locked());
    }

    #[test]
    fn a_recursive_read_passes_a_waiting_writer_and_the_writer_gets_in_after() {
        let l = Arc::new(FutexRwLock::new(()));
        let first = l.read_recursive();
        let wrote = Arc::new(AtomicBool::new(false));
        let w = {
            let (l, wrote) = (l.clone(), wrote.clone());
            std::thread::spawn(move || {
                let _g = l.write();
                wrote.store(true, SeqCst);
            })
        };
        // Let the writer queue up behind the read lock.
        while word(&l) & WRITERS_WAITING == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let again = l.read_recursive();
        assert!(l.try_read_recursive().is_some());
        assert!(l.try_read().is_none(), "a plain read waits for the writer");
        assert!(!wrote.load(SeqCst));
        drop((first, again));
        w.join().unwrap();
        assert!(wrote.load(SeqCst));
        assert!(!l.is_locked());
    }

    #[test]
    fn readers_wait_for_a_writer_and_all_get_in_when_it_leaves() {
        let l = Arc::new(FutexRwLock::new(0));
        let g = l.write();
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || *l.read_recursive())
            })
            .collect();
        while word(&l) & READERS_WAITING == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut g = g;
        *g = 7;
        drop(g);
        for r in readers {
            assert_eq!(r.join().unwrap(), 7);
        }
    }

    #[test]
    fn a_fork_child_unlocks_what_the_forking_thread_held_while_others_waited() {
        let l: &'static FutexRwLock<u32> = Box::leak(Box::new(FutexRwLock::new(1)));
        let g = l.write();
        // Parent threads wait for it, as program threads wait on the regions lock at a fork.
        let waiters: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(move || *l.read_recursive()))
            .collect();
        while word(l) & READERS_WAITING == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::mem::forget(g);
        // SAFETY: fork; the child only unlocks, reads and writes the lock, then _exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: the child holds the write lock through its copy of the forgotten guard.
            unsafe { l.force_unlock_write() };
            let ok = *l.read_recursive() == 1 && {
                *l.write() = 2;
                *l.read() == 2
            };
            // SAFETY: ending the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        // SAFETY: the parent's forgotten guard.
        unsafe { l.force_unlock_write() };
        for w in waiters {
            assert_eq!(w.join().unwrap(), 1);
        }
    }
}
