// SPDX-License-Identifier: MIT
//! POSIX AIO (`aio_read`, `aio_write`, `lio_listio`): glibc's AIO threads read and write the
//! request's buffer later, with internal system calls no wrapper sees, so a paged-out (or
//! never-filled) buffer came back as EFAULT in `aio_error` (an `aio_read` into a fresh heap
//! buffer under `--memory-max 8M`). The buffer is pinned ([`LongPin`]) from the submission
//! until `aio_return`, which POSIX requires once per request. A request beyond the table's
//! room, or one never returned, keeps its buffer made resident or pinned, respectively.
//!
//! Kernel AIO (`io_submit`, `io_getevents` through `syscall()`, as libaio makes them): the
//! kernel reads the iocbs and reaches the buffers while `io_submit` runs (a buffered request is
//! done there; an O_DIRECT one takes its own pins on the pages, which eviction's
//! `UFFDIO_MOVE` then refuses to move), so they are pinned for the call only.

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
            static S: NextSym = NextSym::new(sym_name!($name));
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
            static S: NextSym = NextSym::new(sym_name!($name));
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
            static S: NextSym = NextSym::new(sym_name!($name));
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

/// `struct iocb` (64 bytes): the opcode at 16, the buffer at 24, its length (or iovec count)
/// at 32.
const IOCB: usize = 64;
const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_PREADV: u16 = 7;
const IOCB_CMD_PWRITEV: u16 = 8;
/// `struct io_event`: four 64-bit words.
const IO_EVENT: usize = 32;

/// The pins for `io_submit(ctx, n, iocbpp)`: the pointer array, each iocb and its buffers.
///
/// # Safety
/// `iocbpp` null or `n` valid pointers to valid iocbs (as the kernel reads them).
pub unsafe fn io_submit_pins(n: libc::c_long, iocbpp: *const *const u8) -> Pinned {
    let mut p = Pinned::none();
    let n = n.clamp(0, 4096) as usize;
    if iocbpp.is_null() || n == 0 {
        return p;
    }
    p.add(iocbpp.cast(), n * size_of::<usize>());
    for k in 0..n {
        // SAFETY: the caller's array and iocbs, resident now if they are managed.
        unsafe {
            let cb = *iocbpp.add(k);
            if cb.is_null() {
                continue;
            }
            p.add(cb.cast(), IOCB);
            let op = (cb.add(16) as *const u16).read_unaligned();
            let buf = (cb.add(24) as *const u64).read_unaligned() as usize;
            let len = (cb.add(32) as *const u64).read_unaligned() as usize;
            match op {
                IOCB_CMD_PREAD | IOCB_CMD_PWRITE => p.add(buf as *const libc::c_void, len),
                IOCB_CMD_PREADV | IOCB_CMD_PWRITEV => {
                    p.add_iov(buf as *const libc::iovec, len.min(1024) as i32)
                }
                _ => {}
            }
        }
    }
    p
}

/// The pins for `io_getevents(ctx, min, n, events, timeout)` (and `io_pgetevents`): the
/// events array the kernel fills and the timeout it reads.
pub fn io_getevents_pins(n: libc::c_long, events: usize, timeout: usize) -> Pinned {
    let mut p = Pinned::none();
    p.add(
        events as *const libc::c_void,
        n.clamp(0, 1 << 20) as usize * IO_EVENT,
    );
    p.add(timeout as *const libc::c_void, size_of::<libc::timespec>());
    p
}
