// SPDX-License-Identifier: MIT
//! Per-thread scratch buffers: the store's compression destination and the writeback's page,
//! reused by every operation of a thread, never allocated per page.

use std::cell::RefCell;

thread_local! {
    pub(crate) static COMP_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    pub(crate) static PAGE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's buffer of at least `len` bytes (reused, never freed per page).
/// A temporary buffer stands in where the thread's is borrowed (re-entered: not expected) or
/// already destroyed (a page stored or written back during the thread's teardown).
pub(crate) fn with_buf<R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<u8>>>,
    len: usize,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    let mut f = Some(f);
    let kept = key.try_with(|cell| {
        let mut b = cell.try_borrow_mut().ok()?;
        if b.len() < len {
            b.resize(len, 0);
        }
        Some((f.take().expect("f runs once"))(&mut b[..len]))
    });
    match kept {
        Ok(Some(r)) => r,
        _ => (f.take().expect("f not run"))(&mut vec![0u8; len]),
    }
}
