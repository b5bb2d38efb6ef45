// SPDX-License-Identifier: MIT
//! POSIX AIO (`aio_read`, `aio_write`, `lio_listio`): glibc's AIO threads read and write the
//! request's buffer later, with internal system calls no wrapper sees, so a paged-out (or
//! never-filled) buffer came back as EFAULT in `aio_error` (an `aio_read` into a fresh heap
//! buffer under `--memory-max 8M`). The buffer is pinned ([`LongPin`]) from the submission
//! until `aio_return`, which POSIX requires once per request. A request beyond the table's
//! room, or one never returned, keeps its buffer made resident or pinned, respectively.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use libc::{aiocb, sigevent, ssize_t};
use uzswap_pager::hooks::{LongPin, Pinned};
use uzswap_pager::sys::{NextSym, SigSpinLock};

/// Requests whose buffers are pinned at once.
const SLOTS: usize = 256;

type Slots = [(usize, Option<LongPin>); SLOTS];

/// aiocb* -> its buffer's pin, in this library's static data.
static TABLE: SigSpinLock<Slots> = SigSpinLock::new([const { (0, None) }; SLOTS]);
/// Slots in use: `aio_return` skips the table while it is empty.
static USED: AtomicUsize = AtomicUsize::new(0);

/// Pins `cb`'s buffer until `aio_return(cb)`.
///
/// # Safety
/// `cb` null or a valid request.
unsafe fn pin_request(cb: *const aiocb) {
    if cb.is_null() {
        return;
    }
    // SAFETY: the caller's request.
    let (buf, len) = unsafe { ((*cb).aio_buf as *const libc::c_void, (*cb).aio_nbytes) };
    let Some(pin) = LongPin::new(buf, len) else {
        return;
    };
    let pin = TABLE.with(|s| {
        let Some(e) = s.iter_mut().find(|e| e.1.is_none()) else {
            return Some(pin);
        };
        *e = (cb as usize, Some(pin));
        USED.fetch_add(1, Relaxed);
        None
    });
    // No room: the buffer was made resident at least; let it go again.
    if let Some(p) = pin {
        p.release();
    }
}

/// Releases `cb`'s pin, if it has one.
fn release_request(cb: *const aiocb) {
    if USED.load(Relaxed) == 0 {
        return;
    }
    let pin = TABLE.with(|s| {
        let e = s.iter_mut().find(|e| e.0 == cb as usize && e.1.is_some())?;
        e.0 = 0;
        USED.fetch_sub(1, Relaxed);
        e.1.take()
    });
    if let Some(p) = pin {
        p.release();
    }
}

/// In a fork child: the AIO requests are the parent's.
pub fn after_fork_child() {
    TABLE.reset_after_fork();
}

macro_rules! aio_submit {
    ($name:ident) => {
        /// Pins the request's buffer until `aio_return`.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(cb: *mut aiocb) -> c_int {
            static S: NextSym = NextSym::new(
                // SAFETY: a literal with one trailing NUL.
                unsafe {
                    std::ffi::CStr::from_bytes_with_nul_unchecked(
                        concat!(stringify!($name), "\0").as_bytes(),
                    )
                },
            );
            // SAFETY: the caller's request.
            unsafe { pin_request(cb) };
            // SAFETY: libc's function of this name.
            let r = unsafe {
                let f: unsafe extern "C" fn(*mut aiocb) -> c_int = std::mem::transmute(S.get());
                f(cb)
            };
            if r != 0 {
                release_request(cb);
            }
            r
        }
    };
}

aio_submit!(aio_read);
aio_submit!(aio_write);
aio_submit!(aio_read64);
aio_submit!(aio_write64);

macro_rules! aio_ret {
    ($name:ident) => {
        /// Releases the request's pin once its result is collected.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(cb: *mut aiocb) -> ssize_t {
            static S: NextSym = NextSym::new(
                // SAFETY: a literal with one trailing NUL.
                unsafe {
                    std::ffi::CStr::from_bytes_with_nul_unchecked(
                        concat!(stringify!($name), "\0").as_bytes(),
                    )
                },
            );
            // SAFETY: libc's function of this name.
            let r = unsafe {
                let f: unsafe extern "C" fn(*mut aiocb) -> ssize_t = std::mem::transmute(S.get());
                f(cb)
            };
            release_request(cb);
            r
        }
    };
}

aio_ret!(aio_return);
aio_ret!(aio_return64);

macro_rules! lio {
    ($name:ident) => {
        /// Pins every request's buffer until its `aio_return`.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            mode: c_int,
            list: *const *mut aiocb,
            n: c_int,
            sev: *mut sigevent,
        ) -> c_int {
            static S: NextSym = NextSym::new(
                // SAFETY: a literal with one trailing NUL.
                unsafe {
                    std::ffi::CStr::from_bytes_with_nul_unchecked(
                        concat!(stringify!($name), "\0").as_bytes(),
                    )
                },
            );
            let mut p = Pinned::none();
            p.add(list.cast(), n.max(0) as usize * size_of::<*mut aiocb>());
            for k in 0..n.max(0) as usize {
                // SAFETY: the caller's list of `n` requests (null entries are skipped).
                unsafe {
                    let cb = *list.add(k);
                    if !cb.is_null() && (*cb).aio_lio_opcode != libc::LIO_NOP {
                        pin_request(cb);
                    }
                }
            }
            // SAFETY: libc's function of this name.
            unsafe {
                let f: unsafe extern "C" fn(
                    c_int,
                    *const *mut aiocb,
                    c_int,
                    *mut sigevent,
                ) -> c_int = std::mem::transmute(S.get());
                f(mode, list, n, sev)
            }
        }
    };
}

lio!(lio_listio);
lio!(lio_listio64);
