// SPDX-License-Identifier: MIT
//! Per-thread context caches.
//!
//! Every codec keeps its contexts in a `thread_local!` `RefCell`, borrowed for exactly one
//! call (codecs never call each other, so borrows never nest). If a page is (de)compressed while
//! the thread is being torn down, after its cache was destroyed, a temporary context is used
//! instead of panicking.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::Error;

/// Runs `f` on this thread's context in `key`, creating it with `init` on first use.
pub(crate) fn with_cached<T: 'static, R>(
    key: &'static LocalKey<RefCell<Option<T>>>,
    init: impl FnOnce() -> Result<T, Error>,
    f: impl FnOnce(&mut T) -> Result<R, Error>,
) -> Result<R, Error> {
    let mut init = Some(init);
    let mut f = Some(f);
    let cached = key.try_with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(c) => c,
            None => slot.insert((init.take().expect("init runs once"))()?),
        };
        (f.take().expect("f runs once"))(ctx)
    });
    match cached {
        Ok(r) => r,
        // Thread teardown: neither closure ran.
        Err(_) => {
            let mut ctx = (init.take().expect("init not run"))()?;
            (f.take().expect("f not run"))(&mut ctx)
        }
    }
}

/// Like [`with_cached`] for caches holding one context per parameter value (compression level).
/// A thread uses one or two levels, so a short list beats a map.
pub(crate) fn with_cached_keyed<K: PartialEq + Copy + 'static, T: 'static, R>(
    key: &'static LocalKey<RefCell<Vec<(K, T)>>>,
    k: K,
    init: impl FnOnce() -> Result<T, Error>,
    f: impl FnOnce(&mut T) -> Result<R, Error>,
) -> Result<R, Error> {
    let mut init = Some(init);
    let mut f = Some(f);
    let cached = key.try_with(|cell| {
        let mut list = cell.borrow_mut();
        let idx = match list.iter().position(|(lk, _)| *lk == k) {
            Some(i) => i,
            None => {
                list.push((k, (init.take().expect("init runs once"))()?));
                list.len() - 1
            }
        };
        (f.take().expect("f runs once"))(&mut list[idx].1)
    });
    match cached {
        Ok(r) => r,
        Err(_) => {
            let mut ctx = (init.take().expect("init not run"))()?;
            (f.take().expect("f not run"))(&mut ctx)
        }
    }
}
