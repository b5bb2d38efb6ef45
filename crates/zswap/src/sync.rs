// SPDX-License-Identifier: MIT
//! The sync facade of the cache's modelled protocols: pool references (`poolref.rs`), the
//! striped counters (`stats.rs`) and the slot's `LOADING` / `WRITEBACK` hand-off under the shard
//! lock (`index.rs`). Normally std's atomics and parking_lot's `Mutex` / `Condvar`; under
//! `cfg(loom)` loom's, behind the same API, so that the loom models (`loom_models.rs`,
//! `scripts/loom.sh`) check the very code the cache runs. Other modules use std and
//! parking_lot directly.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
#[cfg(loom)]
pub(crate) use loom_lock::{Condvar, Mutex, MutexGuard};

/// loom's `Mutex` / `Condvar` with parking_lot's API (no poisoning, `wait(&mut guard)`).
#[cfg(loom)]
mod loom_lock {
    use std::ops::{Deref, DerefMut};

    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(t))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().expect("no poisoning in the models")))
        }
    }

    /// The guard; `None` only inside `Condvar::wait`.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard held")
        }
    }

    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().expect("guard held");
            g.0 = Some(self.0.wait(inner).expect("no poisoning in the models"));
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}
