// SPDX-License-Identifier: MIT
//! Wrappers of the libc functions whose system call reads or writes program memory beyond the
//! I/O buffers of `lib.rs`: paths, `stat` buffers, pipe and socket pairs, wait statuses,
//! socket addresses and options, timeouts, `getcwd`, `readlink`, extended attributes, the
//! arguments of `ioctl`, `fcntl` and `prctl`, timers, clocks and thread names, and
//! glibc's `_FORTIFY_SOURCE` entry points (`__read_chk`, ...), which fortified programs call
//! instead of the plain names. Each pins what the kernel will touch for the length of the call
//! (see `uzswap_pager::hooks::Pinned`): in SIGBUS mode a paged-out path or buffer was EFAULT
//! ("Bad address") from `open`, `stat`, `access`, ... Unmanaged arguments (the stack, static
//! data, libc's own allocations) cost one range check each.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use std::mem::size_of;

use libc::{gid_t, mode_t, off64_t, off_t, pid_t, size_t, sockaddr, socklen_t, ssize_t, uid_t};
use uzswap_pager::hooks::Pinned;
use uzswap_pager::sys::NextSym;

type Str = *const c_char;
type Stat = *mut libc::stat;

// ---------------------------------------------------------------- open (variadic mode)

macro_rules! open_wrap {
    ($name:ident ($($a:ident: $t:ty),*; $path:ident)) => {
        /// Pins the path for the call; the mode is forwarded as the variadic argument.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t,)* flags: c_int, mode: c_uint) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut pins = Pinned::none();
            // SAFETY: the caller's path.
            unsafe { pins.add_str($path) };
            // SAFETY: the caller's path, pinned above.
            if let Some(fd) = unsafe { uzswap_pager::cgroup_view::open($path, flags) } {
                return fd;
            }
            // SAFETY: libc's variadic function of this name, given its optional mode.
            unsafe {
                let f: unsafe extern "C" fn($($t,)* c_int, ...) -> c_int = std::mem::transmute(S.get());
                f($($a,)* flags, mode)
            }
        }
    };
}

open_wrap!(open(path: Str; path));
open_wrap!(open64(path: Str; path));
open_wrap!(openat(dirfd: c_int, path: Str; path));
open_wrap!(openat64(dirfd: c_int, path: Str; path));

// ---------------------------------------------------------------- paths

/// `_FORTIFY_SOURCE`'s `open` entry points: the path pinned, and the cgroup view first, as
/// `open_wrap!`.
macro_rules! open2_wrap {
    ($name:ident ($($a:ident: $t:ty),*)) => {
        /// Pins the path for the call (see `open_wrap!`).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t,)* path: Str, flags: c_int) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut pins = Pinned::none();
            // SAFETY: the caller's path.
            unsafe { pins.add_str(path) };
            // SAFETY: the caller's path, pinned above.
            if let Some(fd) = unsafe { uzswap_pager::cgroup_view::open(path, flags) } {
                return fd;
            }
            // SAFETY: the libc function of the same name and signature.
            unsafe {
                let f: unsafe extern "C" fn($($t,)* Str, c_int) -> c_int = std::mem::transmute(S.get());
                f($($a,)* path, flags)
            }
        }
    };
}

open2_wrap!(__open_2());
open2_wrap!(__open64_2());
open2_wrap!(__openat_2(d: c_int));
open2_wrap!(__openat64_2(d: c_int));
io_wrap!(creat(path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(creat64(path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });

const STAT: usize = size_of::<libc::stat>();
io_wrap!(stat(path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(stat64(path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(lstat(path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(lstat64(path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(fstat(fd: c_int, b: Stat) -> c_int; |p| { p.add(b.cast(), STAT) });
io_wrap!(fstat64(fd: c_int, b: Stat) -> c_int; |p| { p.add(b.cast(), STAT) });
io_wrap!(fstatat(d: c_int, path: Str, b: Stat, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(fstatat64(d: c_int, path: Str, b: Stat, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add(b.cast(), STAT) });
// The versioned names older binaries call (Node here).
io_wrap!(__xstat(v: c_int, path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(__xstat64(v: c_int, path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(__lxstat(v: c_int, path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(__lxstat64(v: c_int, path: Str, b: Stat) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(__fxstat(v: c_int, fd: c_int, b: Stat) -> c_int; |p| { p.add(b.cast(), STAT) });
io_wrap!(__fxstat64(v: c_int, fd: c_int, b: Stat) -> c_int; |p| { p.add(b.cast(), STAT) });
io_wrap!(__fxstatat(v: c_int, d: c_int, path: Str, b: Stat, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(__fxstatat64(v: c_int, d: c_int, path: Str, b: Stat, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add(b.cast(), STAT) });
io_wrap!(statx(d: c_int, path: Str, fl: c_int, mask: c_uint, b: *mut libc::statx) -> c_int;
    |p| { p.add_str(path); p.add(b.cast(), size_of::<libc::statx>()) });

const STATFS: usize = size_of::<libc::statfs>();
const STATVFS: usize = size_of::<libc::statvfs>();
io_wrap!(statfs(path: Str, b: *mut libc::statfs) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STATFS) });
io_wrap!(statfs64(path: Str, b: *mut libc::statfs) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STATFS) });
io_wrap!(fstatfs(fd: c_int, b: *mut libc::statfs) -> c_int; |p| { p.add(b.cast(), STATFS) });
io_wrap!(fstatfs64(fd: c_int, b: *mut libc::statfs) -> c_int; |p| { p.add(b.cast(), STATFS) });
io_wrap!(statvfs(path: Str, b: *mut libc::statvfs) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STATVFS) });
io_wrap!(statvfs64(path: Str, b: *mut libc::statvfs) -> c_int; |p| { p.add_str(path); p.add(b.cast(), STATVFS) });
io_wrap!(fstatvfs(fd: c_int, b: *mut libc::statvfs) -> c_int; |p| { p.add(b.cast(), STATVFS) });
io_wrap!(fstatvfs64(fd: c_int, b: *mut libc::statvfs) -> c_int; |p| { p.add(b.cast(), STATVFS) });

io_wrap!(access(path: Str, m: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(faccessat(d: c_int, path: Str, m: c_int, fl: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(euidaccess(path: Str, m: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(eaccess(path: Str, m: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(mkdir(path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(mkdirat(d: c_int, path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(rmdir(path: Str) -> c_int; |p| { p.add_str(path) });
io_wrap!(unlink(path: Str) -> c_int; |p| { p.add_str(path) });
io_wrap!(unlinkat(d: c_int, path: Str, fl: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(rename(a: Str, b: Str) -> c_int; |p| { p.add_str(a); p.add_str(b) });
io_wrap!(renameat(da: c_int, a: Str, db: c_int, b: Str) -> c_int; |p| { p.add_str(a); p.add_str(b) });
io_wrap!(renameat2(da: c_int, a: Str, db: c_int, b: Str, fl: c_uint) -> c_int;
    |p| { p.add_str(a); p.add_str(b) });
io_wrap!(link(a: Str, b: Str) -> c_int; |p| { p.add_str(a); p.add_str(b) });
io_wrap!(linkat(da: c_int, a: Str, db: c_int, b: Str, fl: c_int) -> c_int;
    |p| { p.add_str(a); p.add_str(b) });
io_wrap!(symlink(a: Str, b: Str) -> c_int; |p| { p.add_str(a); p.add_str(b) });
io_wrap!(symlinkat(a: Str, d: c_int, b: Str) -> c_int; |p| { p.add_str(a); p.add_str(b) });
io_wrap!(readlink(path: Str, b: *mut c_char, n: size_t) -> ssize_t; |p| { p.add_str(path); p.add(b.cast(), n) });
io_wrap!(readlinkat(d: c_int, path: Str, b: *mut c_char, n: size_t) -> ssize_t;
    |p| { p.add_str(path); p.add(b.cast(), n) });
io_wrap!(chdir(path: Str) -> c_int; |p| { p.add_str(path) });
io_wrap!(chroot(path: Str) -> c_int; |p| { p.add_str(path) });
io_wrap!(chmod(path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(fchmodat(d: c_int, path: Str, m: mode_t, fl: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(chown(path: Str, u: uid_t, g: gid_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(lchown(path: Str, u: uid_t, g: gid_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(fchownat(d: c_int, path: Str, u: uid_t, g: gid_t, fl: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(truncate(path: Str, n: off_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(truncate64(path: Str, n: off64_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(mknod(path: Str, m: mode_t, dev: libc::dev_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(mknodat(d: c_int, path: Str, m: mode_t, dev: libc::dev_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(mkfifo(path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
io_wrap!(mkfifoat(d: c_int, path: Str, m: mode_t) -> c_int; |p| { p.add_str(path) });
const TIMES: usize = 2 * size_of::<libc::timespec>();
io_wrap!(utimensat(d: c_int, path: Str, t: *const libc::timespec, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add(t.cast(), TIMES) });
io_wrap!(futimens(fd: c_int, t: *const libc::timespec) -> c_int; |p| { p.add(t.cast(), TIMES) });
io_wrap!(utimes(path: Str, t: *const libc::timeval) -> c_int; |p| { p.add_str(path); p.add(t.cast(), TIMES) });
io_wrap!(lutimes(path: Str, t: *const libc::timeval) -> c_int; |p| { p.add_str(path); p.add(t.cast(), TIMES) });
io_wrap!(utime(path: Str, t: *const libc::utimbuf) -> c_int;
    |p| { p.add_str(path); p.add(t.cast(), size_of::<libc::utimbuf>()) });
io_wrap!(opendir(path: Str) -> *mut libc::DIR; |p| { p.add_str(path) });
// stdio's and `remove`'s system calls are glibc-internal (`__open`, `__unlink`), out of reach of
// the wrappers above: `git fsck` under 1M warned "unable to access '.git/info/grafts': Bad
// address" from `fopen` (2026-11-27). `freopen` is in `streams.rs` (it also drops a pinned
// stream buffer).
macro_rules! fopen_wrap {
    ($name:ident) => {
        /// Pins the path for the call; a cgroup file the view shows is opened by
        /// `uzswap_pager::cgroup_view` and wrapped in a stream.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: Str, mode: Str) -> *mut libc::FILE {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut pins = Pinned::none();
            // SAFETY: the caller's path.
            unsafe { pins.add_str(path) };
            // SAFETY: the caller's NUL-terminated path (pinned) and mode.
            if let Some(fd) = unsafe {
                uzswap_pager::cgroup_view::open(path, uzswap_pager::cgroup_view::fopen_flags(mode))
            } {
                // SAFETY: a descriptor just opened for reading, and the caller's mode.
                let f = unsafe { libc::fdopen(fd, mode) };
                if f.is_null() {
                    let _e = uzswap_pager::sys::ErrnoGuard::new();
                    // SAFETY: our own descriptor.
                    unsafe { libc::close(fd) };
                }
                return f;
            }
            // SAFETY: the libc function of the same name and signature.
            unsafe {
                let f: unsafe extern "C" fn(Str, Str) -> *mut libc::FILE =
                    std::mem::transmute(S.get());
                f(path, mode)
            }
        }
    };
}

fopen_wrap!(fopen);
fopen_wrap!(fopen64);
io_wrap!(remove(path: Str) -> c_int; |p| { p.add_str(path) });
io_wrap!(inotify_add_watch(fd: c_int, path: Str, mask: u32) -> c_int; |p| { p.add_str(path) });
// A null buffer makes glibc allocate one itself (libc's own memory, never managed).
io_wrap!(getcwd(b: *mut c_char, n: size_t) -> *mut c_char; |p| { p.add(b.cast(), n) });

io_wrap!(getxattr(path: Str, name: Str, v: *mut c_void, n: size_t) -> ssize_t;
    |p| { p.add_str(path); p.add_str(name); p.add(v, n) });
io_wrap!(lgetxattr(path: Str, name: Str, v: *mut c_void, n: size_t) -> ssize_t;
    |p| { p.add_str(path); p.add_str(name); p.add(v, n) });
io_wrap!(fgetxattr(fd: c_int, name: Str, v: *mut c_void, n: size_t) -> ssize_t;
    |p| { p.add_str(name); p.add(v, n) });
io_wrap!(setxattr(path: Str, name: Str, v: *const c_void, n: size_t, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add_str(name); p.add(v, n) });
io_wrap!(lsetxattr(path: Str, name: Str, v: *const c_void, n: size_t, fl: c_int) -> c_int;
    |p| { p.add_str(path); p.add_str(name); p.add(v, n) });
io_wrap!(fsetxattr(fd: c_int, name: Str, v: *const c_void, n: size_t, fl: c_int) -> c_int;
    |p| { p.add_str(name); p.add(v, n) });
io_wrap!(listxattr(path: Str, l: *mut c_char, n: size_t) -> ssize_t; |p| { p.add_str(path); p.add(l.cast(), n) });
io_wrap!(llistxattr(path: Str, l: *mut c_char, n: size_t) -> ssize_t; |p| { p.add_str(path); p.add(l.cast(), n) });
io_wrap!(flistxattr(fd: c_int, l: *mut c_char, n: size_t) -> ssize_t; |p| { p.add(l.cast(), n) });
io_wrap!(removexattr(path: Str, name: Str) -> c_int; |p| { p.add_str(path); p.add_str(name) });
io_wrap!(lremovexattr(path: Str, name: Str) -> c_int; |p| { p.add_str(path); p.add_str(name) });
io_wrap!(fremovexattr(fd: c_int, name: Str) -> c_int; |p| { p.add_str(name) });

// ---------------------------------------------------------------- results written by the kernel

io_wrap!(pipe(fds: *mut c_int) -> c_int; |p| { p.add(fds.cast(), 8) });
io_wrap!(pipe2(fds: *mut c_int, fl: c_int) -> c_int; |p| { p.add(fds.cast(), 8) });
io_wrap!(socketpair(d: c_int, t: c_int, pr: c_int, sv: *mut c_int) -> c_int; |p| { p.add(sv.cast(), 8) });
const RUSAGE: usize = size_of::<libc::rusage>();
io_wrap!(wait(st: *mut c_int) -> pid_t; |p| { p.add(st.cast(), 4) });
io_wrap!(waitpid(pid: pid_t, st: *mut c_int, o: c_int) -> pid_t; |p| { p.add(st.cast(), 4) });
io_wrap!(wait3(st: *mut c_int, o: c_int, ru: *mut libc::rusage) -> pid_t;
    |p| { p.add(st.cast(), 4); p.add(ru.cast(), RUSAGE) });
io_wrap!(wait4(pid: pid_t, st: *mut c_int, o: c_int, ru: *mut libc::rusage) -> pid_t;
    |p| { p.add(st.cast(), 4); p.add(ru.cast(), RUSAGE) });
io_wrap!(waitid(t: libc::idtype_t, id: libc::id_t, info: *mut libc::siginfo_t, o: c_int) -> c_int;
    |p| { p.add(info.cast(), size_of::<libc::siginfo_t>()) });
io_wrap!(uname(b: *mut libc::utsname) -> c_int; |p| { p.add(b.cast(), size_of::<libc::utsname>()) });
io_wrap!(getrusage(who: c_int, ru: *mut libc::rusage) -> c_int; |p| { p.add(ru.cast(), RUSAGE) });
io_wrap!(sysinfo(b: *mut libc::sysinfo) -> c_int; |p| { p.add(b.cast(), size_of::<libc::sysinfo>()) });
io_wrap!(times(b: *mut libc::tms) -> libc::clock_t; |p| { p.add(b.cast(), size_of::<libc::tms>()) });
const TS: usize = size_of::<libc::timespec>();
io_wrap!(nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> c_int;
    |p| { p.add(req.cast(), TS); p.add(rem.cast(), TS) });
io_wrap!(clock_nanosleep(c: libc::clockid_t, fl: c_int, req: *const libc::timespec, rem: *mut libc::timespec) -> c_int;
    |p| { p.add(req.cast(), TS); p.add(rem.cast(), TS) });

/// Bytes of an fd_set the kernel reads and writes for `n` descriptors.
fn fdset_bytes(n: c_int) -> usize {
    (n.max(0) as usize).div_ceil(64) * 8
}
use crate::SIGMASK;
io_wrap!(select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *mut libc::timeval) -> c_int;
    |p| { let b = fdset_bytes(n); p.add(r.cast(), b); p.add(w.cast(), b); p.add(e.cast(), b); p.add(t.cast(), TS) });
io_wrap!(pselect(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, t: *const libc::timespec, m: *const libc::sigset_t) -> c_int;
    |p| { let b = fdset_bytes(n); p.add(r.cast(), b); p.add(w.cast(), b); p.add(e.cast(), b); p.add(t.cast(), TS); p.add(m.cast(), SIGMASK) });
const POLLFD: usize = size_of::<libc::pollfd>();
io_wrap!(ppoll(f: *mut libc::pollfd, n: libc::nfds_t, t: *const libc::timespec, m: *const libc::sigset_t) -> c_int;
    |p| { p.add(f.cast(), n as usize * POLLFD); p.add(t.cast(), TS); p.add(m.cast(), SIGMASK) });
const EPOLL_EVENT: usize = size_of::<libc::epoll_event>();
io_wrap!(epoll_pwait(e: c_int, ev: *mut libc::epoll_event, n: c_int, t: c_int, m: *const libc::sigset_t) -> c_int;
    |p| { p.add(ev.cast(), n.max(0) as usize * EPOLL_EVENT); p.add(m.cast(), SIGMASK) });
io_wrap!(epoll_ctl(e: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int;
    |p| { p.add(ev.cast(), EPOLL_EVENT) });

/// Pins a socket address whose length the kernel reads from (and writes back to) `*len`.
///
/// # Safety
/// `len` null or valid; `addr` valid for `*len` bytes.
unsafe fn add_addr(p: &mut Pinned, addr: *const c_void, len: *mut socklen_t) {
    if len.is_null() {
        return;
    }
    p.add(len.cast(), size_of::<socklen_t>());
    // SAFETY: the caller's length, now resident.
    p.add(addr, unsafe { *len } as usize);
}
io_wrap!(accept(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int; |p| { add_addr(&mut p, a.cast(), l) });
io_wrap!(accept4(fd: c_int, a: *mut sockaddr, l: *mut socklen_t, fl: c_int) -> c_int;
    |p| { add_addr(&mut p, a.cast(), l) });
io_wrap!(getsockname(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int; |p| { add_addr(&mut p, a.cast(), l) });
io_wrap!(getpeername(fd: c_int, a: *mut sockaddr, l: *mut socklen_t) -> c_int; |p| { add_addr(&mut p, a.cast(), l) });
io_wrap!(connect(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int; |p| { p.add(a.cast(), l as usize) });
io_wrap!(bind(fd: c_int, a: *const sockaddr, l: socklen_t) -> c_int; |p| { p.add(a.cast(), l as usize) });
io_wrap!(getsockopt(fd: c_int, lv: c_int, nm: c_int, v: *mut c_void, l: *mut socklen_t) -> c_int;
    |p| { add_addr(&mut p, v, l) });
io_wrap!(setsockopt(fd: c_int, lv: c_int, nm: c_int, v: *const c_void, l: socklen_t) -> c_int;
    |p| { p.add(v, l as usize) });

io_wrap!(preadv2(fd: c_int, v: *const libc::iovec, c: c_int, o: off_t, fl: c_int) -> ssize_t; |p| { p.add_iov(v, c) });
io_wrap!(pwritev2(fd: c_int, v: *const libc::iovec, c: c_int, o: off_t, fl: c_int) -> ssize_t; |p| { p.add_iov(v, c) });
io_wrap!(preadv64v2(fd: c_int, v: *const libc::iovec, c: c_int, o: off64_t, fl: c_int) -> ssize_t; |p| { p.add_iov(v, c) });
io_wrap!(pwritev64v2(fd: c_int, v: *const libc::iovec, c: c_int, o: off64_t, fl: c_int) -> ssize_t; |p| { p.add_iov(v, c) });
io_wrap!(sendfile(o: c_int, i: c_int, off: *mut off_t, n: size_t) -> ssize_t; |p| { p.add(off.cast(), 8) });
io_wrap!(sendfile64(o: c_int, i: c_int, off: *mut off64_t, n: size_t) -> ssize_t; |p| { p.add(off.cast(), 8) });
io_wrap!(splice(fi: c_int, oi: *mut off64_t, fo: c_int, oo: *mut off64_t, n: size_t, fl: c_uint) -> ssize_t;
    |p| { p.add(oi.cast(), 8); p.add(oo.cast(), 8) });
io_wrap!(copy_file_range(fi: c_int, oi: *mut off64_t, fo: c_int, oo: *mut off64_t, n: size_t, fl: c_uint) -> ssize_t;
    |p| { p.add(oi.cast(), 8); p.add(oo.cast(), 8) });
io_wrap!(getdents64(fd: c_int, b: *mut c_void, n: size_t) -> ssize_t; |p| { p.add(b, n) });

// ---------------------------------------------------------------- _FORTIFY_SOURCE entry points

// Each checks its buffer's size as glibc does (the real function then fails the check and
// aborts), then goes through the plain wrapper, which pins and, for large reads, chunks.

macro_rules! chk_wrap {
    ($name:ident ($($a:ident: $t:ty),*) -> $r:ty; $ok:expr; $plain:expr) => {
        /// The `_FORTIFY_SOURCE` variant: checked, then the plain wrapper.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            if !$ok {
                static S: NextSym = NextSym::new(sym_name!($name));
                // SAFETY: libc's checking function, which reports the overflow.
                return unsafe {
                    let f: unsafe extern "C" fn($($t),*) -> $r = std::mem::transmute(S.get());
                    f($($a),*)
                };
            }
            // SAFETY: the plain function's arguments, within the checked size.
            unsafe { $plain }
        }
    };
}

chk_wrap!(__read_chk(fd: c_int, b: *mut c_void, n: size_t, bl: size_t) -> ssize_t; n <= bl;
    crate::read(fd, b, n));
chk_wrap!(__pread_chk(fd: c_int, b: *mut c_void, n: size_t, o: off_t, bl: size_t) -> ssize_t; n <= bl;
    crate::pread(fd, b, n, o));
chk_wrap!(__pread64_chk(fd: c_int, b: *mut c_void, n: size_t, o: off64_t, bl: size_t) -> ssize_t; n <= bl;
    crate::pread64(fd, b, n, o));
chk_wrap!(__recv_chk(fd: c_int, b: *mut c_void, n: size_t, bl: size_t, fl: c_int) -> ssize_t; n <= bl;
    crate::recv(fd, b, n, fl));
chk_wrap!(__recvfrom_chk(fd: c_int, b: *mut c_void, n: size_t, bl: size_t, fl: c_int, a: *mut sockaddr, al: *mut socklen_t) -> ssize_t;
    n <= bl; crate::recvfrom(fd, b, n, fl, a, al));
chk_wrap!(__readlink_chk(path: Str, b: *mut c_char, n: size_t, bl: size_t) -> ssize_t; n <= bl;
    readlink(path, b, n));
chk_wrap!(__readlinkat_chk(d: c_int, path: Str, b: *mut c_char, n: size_t, bl: size_t) -> ssize_t; n <= bl;
    readlinkat(d, path, b, n));
chk_wrap!(__getcwd_chk(b: *mut c_char, n: size_t, bl: size_t) -> *mut c_char; n <= bl; getcwd(b, n));
chk_wrap!(__fread_chk(b: *mut c_void, bl: size_t, sz: size_t, nm: size_t, fp: *mut libc::FILE) -> size_t;
    sz.checked_mul(nm).is_some_and(|t| t <= bl); crate::fread(b, sz, nm, fp));
chk_wrap!(__poll_chk(f: *mut libc::pollfd, n: libc::nfds_t, t: c_int, fl: size_t) -> c_int;
    (n as usize).checked_mul(POLLFD).is_some_and(|b| b <= fl); crate::poll(f, n, t));
chk_wrap!(__ppoll_chk(f: *mut libc::pollfd, n: libc::nfds_t, t: *const libc::timespec, m: *const libc::sigset_t, fl: size_t) -> c_int;
    (n as usize).checked_mul(POLLFD).is_some_and(|b| b <= fl); ppoll(f, n, t, m));

// ---------------------------------------------------------------- more results and arguments

io_wrap!(getentropy(b: *mut c_void, n: size_t) -> c_int; |p| { p.add(b, n) });

/// Pins `n` message headers of a `recvmmsg`/`sendmmsg` vector and what each names.
///
/// # Safety
/// `v` null or valid for `n` `mmsghdr`s.
unsafe fn add_mmsg(p: &mut Pinned, v: *mut libc::mmsghdr, n: c_uint) {
    if v.is_null() {
        return;
    }
    let n = n.min(1024) as usize;
    p.add(v.cast(), n * size_of::<libc::mmsghdr>());
    for k in 0..n {
        // SAFETY: the caller's k-th header, resident now.
        unsafe { p.add_msg(&(*v.add(k)).msg_hdr) };
    }
}
io_wrap!(recvmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, fl: c_int, t: *mut libc::timespec) -> c_int;
    |p| { add_mmsg(&mut p, v, n); p.add(t.cast(), TS) });
io_wrap!(sendmmsg(fd: c_int, v: *mut libc::mmsghdr, n: c_uint, fl: c_int) -> c_int; |p| { add_mmsg(&mut p, v, n) });
io_wrap!(epoll_pwait2(e: c_int, ev: *mut libc::epoll_event, n: c_int, t: *const libc::timespec, m: *const libc::sigset_t) -> c_int;
    |p| { p.add(ev.cast(), n.max(0) as usize * EPOLL_EVENT); p.add(t.cast(), TS); p.add(m.cast(), SIGMASK) });
const ITIMERSPEC: usize = size_of::<libc::itimerspec>();
io_wrap!(timerfd_settime(fd: c_int, fl: c_int, new: *const libc::itimerspec, old: *mut libc::itimerspec) -> c_int;
    |p| { p.add(new.cast(), ITIMERSPEC); p.add(old.cast(), ITIMERSPEC) });
io_wrap!(timerfd_gettime(fd: c_int, cur: *mut libc::itimerspec) -> c_int; |p| { p.add(cur.cast(), ITIMERSPEC) });
const SIGINFO: usize = size_of::<libc::siginfo_t>();
io_wrap!(sigtimedwait(set: *const libc::sigset_t, info: *mut libc::siginfo_t, t: *const libc::timespec) -> c_int;
    |p| { p.add(set.cast(), SIGMASK); p.add(info.cast(), SIGINFO); p.add(t.cast(), TS) });
io_wrap!(sigwaitinfo(set: *const libc::sigset_t, info: *mut libc::siginfo_t) -> c_int;
    |p| { p.add(set.cast(), SIGMASK); p.add(info.cast(), SIGINFO) });
io_wrap!(sched_getaffinity(pid: pid_t, n: size_t, m: *mut libc::cpu_set_t) -> c_int; |p| { p.add(m.cast(), n) });
io_wrap!(sched_setaffinity(pid: pid_t, n: size_t, m: *const libc::cpu_set_t) -> c_int; |p| { p.add(m.cast(), n) });
io_wrap!(getgroups(n: c_int, l: *mut gid_t) -> c_int; |p| { p.add(l.cast(), n.max(0) as usize * size_of::<gid_t>()) });
io_wrap!(setgroups(n: size_t, l: *const gid_t) -> c_int; |p| { p.add(l.cast(), n * size_of::<gid_t>()) });
const RLIMIT: usize = size_of::<libc::rlimit>();
io_wrap!(getrlimit(r: c_int, l: *mut libc::rlimit) -> c_int; |p| { p.add(l.cast(), RLIMIT) });
io_wrap!(getrlimit64(r: c_int, l: *mut libc::rlimit) -> c_int; |p| { p.add(l.cast(), RLIMIT) });

/// `setrlimit`, `setrlimit64`, `prlimit`, `prlimit64`: the limits pinned for the call, and
/// after an address-space limit set on this process, the heap reservation fitted under it
/// (`fit_heap_to_address_limit`).
macro_rules! rlimit_wrap {
    ($name:ident) => {
        /// Pins the limits and fits the heap reservation under a new RLIMIT_AS.
        ///
        /// # Safety
        /// As `setrlimit(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(r: c_int, l: *const libc::rlimit) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut p = Pinned::none();
            p.add(l.cast(), RLIMIT);
            // SAFETY: the libc function of the same name and signature.
            let ret = unsafe {
                let f: unsafe extern "C" fn(c_int, *const libc::rlimit) -> c_int =
                    std::mem::transmute(S.get());
                f(r, l)
            };
            drop(p);
            if ret == 0 && (r as u32 == libc::RLIMIT_AS || r as u32 == libc::RLIMIT_DATA) {
                crate::fit_heap_to_address_limit();
            }
            ret
        }
    };
    ($name:ident, pid) => {
        /// Pins the limits and fits the heap reservation under a new RLIMIT_AS of this process.
        ///
        /// # Safety
        /// As `prlimit(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            pid: pid_t,
            r: c_int,
            new: *const libc::rlimit,
            old: *mut libc::rlimit,
        ) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut p = Pinned::none();
            p.add(new.cast(), RLIMIT);
            p.add(old.cast(), RLIMIT);
            // SAFETY: the libc function of the same name and signature.
            let ret = unsafe {
                let f: unsafe extern "C" fn(
                    pid_t,
                    c_int,
                    *const libc::rlimit,
                    *mut libc::rlimit,
                ) -> c_int = std::mem::transmute(S.get());
                f(pid, r, new, old)
            };
            drop(p);
            // SAFETY: getpid has no preconditions.
            let mine = pid == 0 || pid == unsafe { libc::getpid() };
            let sized = r as u32 == libc::RLIMIT_AS || r as u32 == libc::RLIMIT_DATA;
            if ret == 0 && !new.is_null() && mine && sized {
                crate::fit_heap_to_address_limit();
            }
            ret
        }
    };
}
rlimit_wrap!(setrlimit);
rlimit_wrap!(setrlimit64);
rlimit_wrap!(prlimit, pid);
rlimit_wrap!(prlimit64, pid);

/// `unshare`: with `CLONE_NEWUSER` the process must have one thread, so the pager's threads
/// are stopped around the call (and started again in the new namespace).
///
/// # Safety
/// As `unshare(2)`.
#[no_mangle]
pub unsafe extern "C" fn unshare(flags: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"unshare");
    // SAFETY: libc's unshare.
    let call = || unsafe {
        let f: unsafe extern "C" fn(c_int) -> c_int = std::mem::transmute(S.get());
        f(flags)
    };
    if uzswap_pager::hooks::namespace_call_needs_one_thread(flags.into(), None) {
        return uzswap_pager::hooks::around_thread_credentials(call);
    }
    call()
}

/// `setns`: entering a user namespace needs a process of one thread (see `unshare`).
///
/// # Safety
/// As `setns(2)`.
#[no_mangle]
pub unsafe extern "C" fn setns(fd: c_int, nstype: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"setns");
    // SAFETY: libc's setns.
    let call = || unsafe {
        let f: unsafe extern "C" fn(c_int, c_int) -> c_int = std::mem::transmute(S.get());
        f(fd, nstype)
    };
    if uzswap_pager::hooks::namespace_call_needs_one_thread(0, Some(nstype.into())) {
        return uzswap_pager::hooks::around_thread_credentials(call);
    }
    call()
}

// ---------------------------------------------------------------- ioctl, fcntl, prctl (variadic)

// Declared with their optional arguments as pointer-sized words: on x86-64 a variadic call
// passes them in the same registers, and an argument the caller did not pass is forwarded
// unread (as `open_wrap!` forwards `open`'s mode). Pinning a word that is an integer, not an
// address, costs one range check (it is not managed memory) or at worst makes a page or two of
// the heap resident for the call: never wrong.

/// `_IOC_SIZE` and `_IOC_DIR` of <asm-generic/ioctl.h> (x86-64).
const IOC_SIZESHIFT: u32 = 16;
const IOC_SIZEMASK: u32 = (1 << 14) - 1;
const IOC_DIRSHIFT: u32 = 30;
/// Pinned at the argument of a request with no size encoded and none in [`ioctl_classic`]:
/// covers the structs of the unlisted classic requests (`struct serial_struct`,
/// `serial_icounter_struct`, ...).
const IOCTL_WINDOW: usize = 256;
/// `struct ifreq`.
const IFREQ: usize = 40;

/// Bytes the kernel reads or writes at the argument of a classic request (direction bits
/// `_IOC_NONE`): terminals, `FIO*`, sockets (<asm-generic/ioctls.h>, <linux/sockios.h>).
/// `None`: the request needs more than one range (see [`ioctl_pins`]).
fn ioctl_classic(req: u32) -> Option<usize> {
    const INT: usize = size_of::<c_int>();
    Some(match req {
        // No argument, or an integer by value: TCSBRK, TCXONC, TCFLSH, TIOCEXCL, TIOCNXCL,
        // TIOCSCTTY, TIOCCONS, TIOCNOTTY, TCSBRKP, TIOCSBRK, TIOCCBRK, FIONCLEX, FIOCLEX,
        // TIOCSERCONFIG, TIOCMIWAIT.
        0x5409..=0x540E
        | 0x541D
        | 0x5422
        | 0x5425
        | 0x5427
        | 0x5428
        | 0x5450
        | 0x5451
        | 0x5453
        | 0x545C => 0,
        // The kernel's `struct termios` (36 bytes, not glibc's 60): TCGETS, TCSETS, TCSETSW,
        // TCSETSF, TIOCGLCKTRMIOS, TIOCSLCKTRMIOS.
        0x5401..=0x5404 | 0x5456 | 0x5457 => 36,
        // `struct termio`: TCGETA, TCSETA, TCSETAW, TCSETAF.
        0x5405..=0x5408 => 18,
        // TIOCSTI: one character.
        0x5412 => 1,
        // `struct winsize`: TIOCGWINSZ, TIOCSWINSZ.
        0x5413 | 0x5414 => 8,
        // `int` or `pid_t`: TIOCGPGRP, TIOCSPGRP, TIOCOUTQ, TIOCMGET, TIOCMBIS, TIOCMBIC,
        // TIOCMSET, TIOCGSOFTCAR, TIOCSSOFTCAR, FIONREAD (TIOCINQ), TIOCPKT, FIONBIO,
        // TIOCSETD, TIOCGETD, TIOCGSID, FIOASYNC, TIOCSERGWILD, TIOCSERSWILD, TIOCSERGETLSR.
        0x540F..=0x5411
        | 0x5415..=0x541B
        | 0x5420
        | 0x5421
        | 0x5423
        | 0x5424
        | 0x5429
        | 0x5452
        | 0x5454
        | 0x5455
        | 0x5459 => INT,
        // FIOQSIZE: `loff_t`.
        0x5460 => 8,
        // FIOSETOWN, SIOCSPGRP, FIOGETOWN, SIOCGPGRP, SIOCATMARK, SIOCOUTQNSD: `int`.
        0x8901..=0x8905 | 0x894B => INT,
        // SIOCGSTAMP, SIOCGSTAMPNS: a 64-bit `timeval` / `timespec`.
        0x8906 | 0x8907 => 16,
        // SIOCADDRT, SIOCDELRT: `struct rtentry`.
        0x890B | 0x890C => 120,
        // SIOCDARP, SIOCGARP, SIOCSARP, SIOCDRARP, SIOCGRARP, SIOCSRARP: `struct arpreq`.
        0x8953..=0x8955 | 0x8960..=0x8962 => 68,
        // SIOCGIFCONF; SIOCBRADDBR, SIOCBRDELBR (a name string); the requests whose `ifreq`
        // points further (SIOCETHTOOL, SIOCWANDEV, SIOCSHWTSTAMP, SIOCGHWTSTAMP,
        // SIOCDEVPRIVATE...).
        0x8912 | 0x89A0 | 0x89A1 | 0x8946 | 0x894A | 0x89B0 | 0x89B1 | 0x89F0..=0x89FF => {
            return None
        }
        // SIOCPROTOPRIVATE...: the protocol's own.
        0x89E0..=0x89EF => IOCTL_WINDOW,
        // The rest of the socket configuration family (SIOCGIFNAME, SIOCGIFFLAGS,
        // SIOCSIFFLAGS, SIOCGIFADDR, ..., SIOCGIFINDEX, SIOCGIFTXQLEN, SIOCGIFMAP,
        // SIOCBONDENSLAVE, SIOCBRADDIF, ...): `struct ifreq`.
        0x8910..=0x89FF => IFREQ,
        _ => IOCTL_WINDOW,
    })
}

/// Pins what `ioctl(fd, req, arg)` has the kernel read or write: `_IOC_SIZE(req)` bytes when
/// the request encodes a direction, else the classic request's argument.
///
/// # Safety
/// `arg` as the request takes it (for SIOCGIFCONF, SIOCBRADDBR and the `ifr_data` requests it
/// is read here, as the kernel would).
unsafe fn ioctl_pins(p: &mut Pinned, req: u32, arg: usize) {
    let a = arg as *const c_void;
    if req >> IOC_DIRSHIFT != 0 {
        p.add(a, ((req >> IOC_SIZESHIFT) & IOC_SIZEMASK) as usize);
        return;
    }
    if let Some(n) = ioctl_classic(req) {
        p.add(a, n);
        return;
    }
    if arg == 0 {
        return;
    }
    match req {
        // `struct ifconf { int ifc_len; char *ifc_buf; }` and the array the kernel fills.
        0x8912 => {
            p.add(a, 16);
            // SAFETY: the caller's ifconf, resident now if it is managed.
            let (len, buf) = unsafe { (*(arg as *const c_int), *((arg + 8) as *const usize)) };
            p.add(buf as *const c_void, len.max(0) as usize);
        }
        // SAFETY: a C string per the request.
        0x89A0 | 0x89A1 => unsafe { p.add_str(arg as *const c_char) },
        // An `ifreq` whose `ifr_data` (at offset 16) points to the request's own struct.
        _ => {
            p.add(a, IFREQ);
            // SAFETY: the caller's ifreq, resident now if it is managed.
            let data = unsafe { *((arg + 16) as *const usize) };
            p.add(data as *const c_void, IOCTL_WINDOW);
        }
    }
}

/// `_IOW(KVMIO, 0x46, struct kvm_userspace_memory_region)` and its version 2 (`0x49`, 160 bytes).
const KVM_SET_USER_MEMORY_REGION: u32 = 0x4020_ae46;
const KVM_SET_USER_MEMORY_REGION2: u32 = 0x40a0_ae49;

/// Pins the request's argument for the call (FIONREAD into a paged-out heap `int` was EFAULT).
///
/// # Safety
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: usize) -> c_int {
    static S: NextSym = NextSym::new(c"ioctl");
    let mut pins = Pinned::none();
    // The kernel takes the request as 32 bits (a caller may have declared it `int`).
    // SAFETY: the caller's argument, as the request takes it.
    unsafe { ioctl_pins(&mut pins, req as u32, arg) };
    if matches!(
        req as u32,
        KVM_SET_USER_MEMORY_REGION | KVM_SET_USER_MEMORY_REGION2
    ) && arg != 0
    {
        // A guest's memory: KVM reaches it from the kernel (get_user_pages), where an evicted
        // or never-filled managed page is an error, not a fault the pager sees (a guest whose
        // code page was evicted stopped with KVM_EXIT_INTERNAL_ERROR). Taken out of paging.
        // SAFETY: the caller's kvm_userspace_memory_region(2): size at 16, address at 24.
        let (size, addr) = unsafe {
            let b = arg as *const u8;
            (
                (b.add(16) as *const u64).read_unaligned(),
                (b.add(24) as *const u64).read_unaligned(),
            )
        };
        uzswap_pager::hooks::unmanage(addr as usize, size as usize);
    }
    // SAFETY: libc's variadic ioctl, given its argument.
    unsafe {
        let f: unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int = std::mem::transmute(S.get());
        f(fd, req, arg)
    }
}

/// Bytes `fcntl(fd, cmd, arg)` has the kernel read or write at `arg` (0: an integer or none).
fn fcntl_bytes(cmd: c_int) -> usize {
    match cmd {
        libc::F_GETLK
        | libc::F_SETLK
        | libc::F_SETLKW
        | libc::F_OFD_GETLK
        | libc::F_OFD_SETLK
        | libc::F_OFD_SETLKW => size_of::<libc::flock>(),
        // F_SETOWN_EX, F_GETOWN_EX: `struct f_owner_ex`.
        15 | 16 => 8,
        // F_GET_RW_HINT, F_SET_RW_HINT, F_GET_FILE_RW_HINT, F_SET_FILE_RW_HINT: a `u64`.
        1035..=1038 => 8,
        _ => 0,
    }
}

macro_rules! fcntl_wrap {
    ($name:ident) => {
        /// Pins the lock or owner struct for the call (a paged-out heap `struct flock` was
        /// EFAULT); the argument is forwarded as the variadic one.
        ///
        /// # Safety
        /// As `fcntl(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, cmd: c_int, arg: usize) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut pins = Pinned::none();
            pins.add(arg as *const c_void, fcntl_bytes(cmd));
            // SAFETY: libc's variadic function of this name, given its argument.
            unsafe {
                let f: unsafe extern "C" fn(c_int, c_int, ...) -> c_int =
                    std::mem::transmute(S.get());
                f(fd, cmd, arg)
            }
        }
    };
}

// ---------------------------------------------------------------- the pager's descriptors

/// `close`, except that the pager's own descriptors (userfaultfd, pagemap, swap files, see
/// `uzswap_pager::fds`) stay open: closing one fails with EBADF, as closing a number that is
/// not open does in a plain run. (Programs that close every descriptor they did not open
/// killed themselves at their next fault.)
///
/// # Safety
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"close");
    if uzswap_pager::fds::guarded(fd) {
        uzswap_pager::sys::set_errno(libc::EBADF);
        return -1;
    }
    // SAFETY: libc's `close`.
    unsafe {
        let f: unsafe extern "C" fn(c_int) -> c_int = std::mem::transmute(S.get());
        f(fd)
    }
}

/// `close_range` (glibc 2.34), closing around the pager's descriptors.
///
/// # Safety
/// As `close_range(2)`.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"close_range");
    if let Some(r) = uzswap_pager::fds::close_range(first, last, flags as u32) {
        return r;
    }
    // SAFETY: libc's `close_range`.
    unsafe {
        let f: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int = std::mem::transmute(S.get());
        f(first, last, flags)
    }
}

/// `closefrom` (glibc 2.34), closing around the pager's descriptors (glibc's own calls the
/// system call directly, past any wrapper of `close_range`).
///
/// # Safety
/// As `closefrom(3)`.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    static S: NextSym = NextSym::new(c"closefrom");
    if low >= 0 && uzswap_pager::fds::close_range(low as u32, u32::MAX, 0).is_some() {
        return;
    }
    // SAFETY: libc's `closefrom`.
    unsafe {
        let f: unsafe extern "C" fn(c_int) = std::mem::transmute(S.get());
        f(low)
    }
}

/// `dup2`, refused with EBADF onto one of the pager's descriptors (which would otherwise be
/// closed and replaced: with a swap file replaced by the program's file, the pager's pages
/// could not be read back).
///
/// # Safety
/// As `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"dup2");
    if old != new && uzswap_pager::fds::guarded(new) {
        uzswap_pager::sys::set_errno(libc::EBADF);
        return -1;
    }
    // SAFETY: libc's `dup2`.
    unsafe {
        let f: unsafe extern "C" fn(c_int, c_int) -> c_int = std::mem::transmute(S.get());
        f(old, new)
    }
}

/// `dup3`, as `dup2`.
///
/// # Safety
/// As `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    static S: NextSym = NextSym::new(c"dup3");
    if uzswap_pager::fds::guarded(new) {
        uzswap_pager::sys::set_errno(libc::EBADF);
        return -1;
    }
    // SAFETY: libc's `dup3`.
    unsafe {
        let f: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int = std::mem::transmute(S.get());
        f(old, new, flags)
    }
}

fcntl_wrap!(fcntl);
// `fcntl` under `_FILE_OFFSET_BITS=64` (glibc 2.28 and later).
fcntl_wrap!(fcntl64);

/// Pins what `prctl(op, a2, a3, a4, a5)` has the kernel read or write.
///
/// # Safety
/// The arguments of such a call (for a seccomp filter the program is read here).
unsafe fn prctl_pins(
    p: &mut Pinned,
    op: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) {
    let at = |x: c_ulong| x as usize as *const c_void;
    match op {
        libc::PR_SET_NAME | libc::PR_GET_NAME => p.add(at(a2), 16),
        libc::PR_GET_PDEATHSIG
        | libc::PR_GET_UNALIGN
        | libc::PR_GET_FPEMU
        | libc::PR_GET_FPEXC
        | libc::PR_GET_ENDIAN
        | libc::PR_GET_TSC
        | libc::PR_GET_CHILD_SUBREAPER => p.add(at(a2), size_of::<c_int>()),
        libc::PR_GET_TID_ADDRESS => p.add(at(a2), size_of::<usize>()),
        // PR_GET_AUXV: the buffer and its size.
        0x4155_5856 => p.add(at(a2), a3 as usize),
        // SECCOMP_MODE_FILTER: `struct sock_fprog { u16 len; struct sock_filter *filter; }`
        // and the filter's 8-byte instructions.
        libc::PR_SET_SECCOMP if a2 == 2 && a3 != 0 => {
            p.add(at(a3), 16);
            // SAFETY: the caller's sock_fprog, resident now if it is managed.
            let (len, filter) = unsafe {
                (
                    *(a3 as usize as *const u16),
                    *((a3 as usize + 8) as *const usize),
                )
            };
            p.add(filter as *const c_void, len as usize * 8);
        }
        libc::PR_SET_MM => match a2 {
            // PR_SET_MM_AUXV, PR_SET_MM_MAP: a struct and its size; PR_SET_MM_MAP_SIZE: a u32.
            12 | 14 => p.add(at(a3), a4 as usize),
            15 => p.add(at(a3), 4),
            _ => {}
        },
        // PR_SET_VMA_ANON_NAME: a name string (null clears it).
        // SAFETY: a C string or null per the call.
        0x5356_4d41 if a2 == 0 => unsafe { p.add_str(a5 as usize as *const c_char) },
        _ => {}
    }
}

/// Pins the name buffer and the other results `prctl` has the kernel write or read.
///
/// # Safety
/// As `prctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn prctl(
    op: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    static S: NextSym = NextSym::new(c"prctl");
    if op == libc::PR_SET_SECCOMP {
        uzswap_pager::hooks::before_seccomp();
    }
    let mut pins = Pinned::none();
    // SAFETY: the caller's arguments.
    unsafe { prctl_pins(&mut pins, op, a2, a3, a4, a5) };
    // SAFETY: libc's variadic prctl, given every argument register.
    let call = || unsafe {
        let f: unsafe extern "C" fn(c_int, ...) -> c_int = std::mem::transmute(S.get());
        f(op, a2, a3, a4, a5)
    };
    if uzswap_pager::hooks::prctl_changes_thread_credentials(op) {
        return uzswap_pager::hooks::around_thread_credentials(call);
    }
    call()
}

// ---------------------------------------------------------------- timers, signals, clocks, names

const ITIMERVAL: usize = size_of::<libc::itimerval>();
io_wrap!(getitimer(w: c_int, cur: *mut libc::itimerval) -> c_int; |p| { p.add(cur.cast(), ITIMERVAL) });
io_wrap!(setitimer(w: c_int, new: *const libc::itimerval, old: *mut libc::itimerval) -> c_int;
    |p| { p.add(new.cast(), ITIMERVAL); p.add(old.cast(), ITIMERVAL) });
io_wrap!(timer_settime(t: libc::timer_t, fl: c_int, new: *const libc::itimerspec, old: *mut libc::itimerspec) -> c_int;
    |p| { p.add(new.cast(), ITIMERSPEC); p.add(old.cast(), ITIMERSPEC) });
io_wrap!(timer_gettime(t: libc::timer_t, cur: *mut libc::itimerspec) -> c_int; |p| { p.add(cur.cast(), ITIMERSPEC) });
io_wrap!(timer_create(c: libc::clockid_t, ev: *mut libc::sigevent, t: *mut libc::timer_t) -> c_int;
    |p| { p.add(ev.cast(), size_of::<libc::sigevent>()) });
io_wrap!(sigpending(set: *mut libc::sigset_t) -> c_int; |p| { p.add(set.cast(), SIGMASK) });
// `pthread_setname_np` of the calling thread is glibc's internal `prctl(PR_SET_NAME)`; of
// another thread, and `pthread_getname_np`, its internal open, read and write of
// /proc/self/task/TID/comm.
io_wrap!(pthread_setname_np(t: libc::pthread_t, name: Str) -> c_int; |p| { p.add_str(name) });
io_wrap!(pthread_getname_np(t: libc::pthread_t, b: *mut c_char, n: size_t) -> c_int; |p| { p.add(b.cast(), n) });

macro_rules! clock_wrap {
    ($name:ident) => {
        /// The vDSO answers most clocks in user mode, but the CPU-time clocks (and any clock
        /// while the clock source has no vDSO support) are a system call, which wrote a
        /// paged-out heap `timespec` as EFAULT: a managed result goes through a copy on this
        /// stack (cheaper than a pin on this hot path).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(c: libc::clockid_t, ts: *mut libc::timespec) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            let f: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int =
                // SAFETY: libc's function of this name and signature.
                unsafe { std::mem::transmute(S.get()) };
            if ts.is_null() || !uzswap_pager::hooks::maybe_managed(ts as usize, TS) {
                // SAFETY: forwarded.
                return unsafe { f(c, ts) };
            }
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: forwarded with a result on this stack, then stored in user mode.
            unsafe {
                let r = f(c, &mut t);
                if r == 0 {
                    *ts = t;
                }
                r
            }
        }
    };
}

clock_wrap!(clock_gettime);
clock_wrap!(clock_getres);
