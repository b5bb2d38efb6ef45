// SPDX-License-Identifier: MIT
//! Per-thread scratch buffers: the store's compression destination and the writeback's page,
//! reused by every operation of a thread, never allocated per page.

use std::cell::RefCell;

thread_local! {
    pub(crate) static COMP_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    pub(crate) static PAGE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's buffer of at least `len` bytes (reused, never freed per page).
pub(crate) fn with_buf<R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<u8>>>,
    len: usize,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut b) => {
            if b.len() < len {
                b.resize(len, 0);
            }
            f(&mut b[..len])
        }
        // Re-entered (not expected): use a temporary buffer rather than fail.
        Err(_) => f(&mut vec![0u8; len]),
    })
}
