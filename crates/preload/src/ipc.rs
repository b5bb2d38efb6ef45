// SPDX-License-Identifier: MIT
//! More libc functions whose system call reads or writes program memory, beyond `calls.rs`:
//! System V and POSIX message queues and semaphores, `vmsplice`, `process_vm_readv`/`writev`
//! (the local buffers and the remote iovec array, which the kernel reads from this process),
//! `mincore`'s vector, `getresuid`/`getresgid`, `capget`/`capset`. Each pins what the kernel
//! touches for the call (`uzswap_pager::hooks::Pinned`): a paged-out buffer was EFAULT.

use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use std::mem::size_of;

use libc::{gid_t, pid_t, size_t, ssize_t, timespec, uid_t};
use uzswap_pager::hooks::Pinned;
use uzswap_pager::sys::NextSym;

const TIMESPEC: usize = size_of::<timespec>();
/// `struct sembuf`: three shorts.
const SEMBUF: usize = 6;
/// `struct __user_cap_header_struct` and two `__user_cap_data_struct`s (version 3).
const CAP_HEADER: usize = 8;
const CAP_DATA: usize = 2 * 12;

type Iov = *const libc::iovec;

/// `count` iovecs, counted as the kernel counts them (at most `IOV_MAX` are read).
fn iovs(count: c_ulong) -> i32 {
    count.min(1024) as i32
}

io_wrap!(msgsnd(q: c_int, m: *const c_void, n: size_t, fl: c_int) -> c_int;
    |p| { p.add(m, size_of::<c_long>() + n) });
io_wrap!(msgrcv(q: c_int, m: *mut c_void, n: size_t, t: c_long, fl: c_int) -> ssize_t;
    |p| { p.add(m, size_of::<c_long>() + n) });
io_wrap!(semop(s: c_int, ops: *mut c_void, n: size_t) -> c_int; |p| { p.add(ops, n * SEMBUF) });
io_wrap!(semtimedop(s: c_int, ops: *mut c_void, n: size_t, t: *const timespec) -> c_int;
    |p| { p.add(ops, n * SEMBUF); p.add(t.cast(), TIMESPEC) });
io_wrap!(mq_send(q: libc::mqd_t, m: *const c_char, n: size_t, pr: c_uint) -> c_int;
    |p| { p.add(m.cast(), n) });
io_wrap!(mq_timedsend(q: libc::mqd_t, m: *const c_char, n: size_t, pr: c_uint, t: *const timespec) -> c_int;
    |p| { p.add(m.cast(), n); p.add(t.cast(), TIMESPEC) });
io_wrap!(mq_receive(q: libc::mqd_t, m: *mut c_char, n: size_t, pr: *mut c_uint) -> ssize_t;
    |p| { p.add(m.cast(), n); p.add(pr.cast(), 4) });
io_wrap!(mq_timedreceive(q: libc::mqd_t, m: *mut c_char, n: size_t, pr: *mut c_uint, t: *const timespec) -> ssize_t;
    |p| { p.add(m.cast(), n); p.add(pr.cast(), 4); p.add(t.cast(), TIMESPEC) });
io_wrap!(vmsplice(fd: c_int, v: Iov, n: size_t, fl: c_uint) -> ssize_t;
    |p| { p.add_iov(v, iovs(n as c_ulong)) });
io_wrap!(process_vm_readv(pid: pid_t, l: Iov, ln: c_ulong, r: Iov, rn: c_ulong, fl: c_ulong) -> ssize_t;
    |p| { p.add_iov(l, iovs(ln)); remote_iovs(&mut p, pid, r, rn) });
io_wrap!(process_vm_writev(pid: pid_t, l: Iov, ln: c_ulong, r: Iov, rn: c_ulong, fl: c_ulong) -> ssize_t;
    |p| { p.add_iov(l, iovs(ln)); remote_iovs(&mut p, pid, r, rn) });

/// The remote iovec array (read from this process), and the remote buffers too when the
/// remote process is this one. Another process's paged-out memory is its own pager's.
///
/// # Safety
/// `r` null or `rn` valid iovecs.
unsafe fn remote_iovs(p: &mut Pinned, pid: pid_t, r: Iov, rn: c_ulong) {
    // SAFETY: getpid has no preconditions.
    if pid == unsafe { libc::getpid() } {
        // SAFETY: the caller's iovecs.
        unsafe { p.add_iov(r, iovs(rn)) };
    } else {
        p.add(r.cast(), iovs(rn) as usize * size_of::<libc::iovec>());
    }
}
io_wrap!(mincore(a: *mut c_void, n: size_t, v: *mut u8) -> c_int;
    |p| { p.add(v.cast(), n.div_ceil(4096)) });
io_wrap!(getresuid(r: *mut uid_t, e: *mut uid_t, s: *mut uid_t) -> c_int;
    |p| { p.add(r.cast(), 4); p.add(e.cast(), 4); p.add(s.cast(), 4) });
io_wrap!(getresgid(r: *mut gid_t, e: *mut gid_t, s: *mut gid_t) -> c_int;
    |p| { p.add(r.cast(), 4); p.add(e.cast(), 4); p.add(s.cast(), 4) });
io_wrap!(capget(h: *mut c_void, d: *mut c_void) -> c_int;
    |p| { p.add(h, CAP_HEADER); p.add(d, CAP_DATA) });

/// Pins its arguments and makes the call with the pager's threads stopped
/// (`uzswap_pager::hooks::around_thread_credentials`): capabilities are the calling thread's
/// alone, and the threads started again take them.
///
/// # Safety
/// As `capset(2)`.
#[no_mangle]
pub unsafe extern "C" fn capset(h: *mut c_void, d: *const c_void) -> c_int {
    static S: NextSym = NextSym::new(c"capset");
    let mut p = Pinned::none();
    p.add(h, CAP_HEADER);
    p.add(d, CAP_DATA);
    uzswap_pager::hooks::around_thread_credentials(|| {
        // SAFETY: libc's capset, given the caller's arguments.
        unsafe {
            let f: unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int =
                std::mem::transmute(S.get());
            f(h, d)
        }
    })
}
