// SPDX-License-Identifier: MIT
//! Wrappers of the libc functions whose system call reads or writes program memory beyond the
//! I/O buffers of `lib.rs`: paths, `stat` buffers, pipe and socket pairs, wait statuses,
//! socket addresses and options, timeouts, `getcwd`, `readlink`, extended attributes, and
//! glibc's `_FORTIFY_SOURCE` entry points (`__read_chk`, ...), which fortified programs call
//! instead of the plain names. Each pins what the kernel will touch for the length of the call
//! (see `uzswap_pager::hooks::Pinned`): in SIGBUS mode a paged-out path or buffer was EFAULT
//! ("Bad address") from `open`, `stat`, `access`, ... Unmanaged arguments (the stack, static
//! data, libc's own allocations) cost one range check each.

use std::ffi::{c_char, c_int, c_uint, c_void};
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
            static S: NextSym = NextSym::new(
                // SAFETY: a literal with one trailing NUL.
                unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) });
            let mut pins = Pinned::none();
            // SAFETY: the caller's path.
            unsafe { pins.add_str($path) };
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

io_wrap!(__open_2(path: Str, flags: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(__open64_2(path: Str, flags: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(__openat_2(d: c_int, path: Str, flags: c_int) -> c_int; |p| { p.add_str(path) });
io_wrap!(__openat64_2(d: c_int, path: Str, flags: c_int) -> c_int; |p| { p.add_str(path) });
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
// address" from `fopen` (2026-11-27).
io_wrap!(fopen(path: Str, mode: Str) -> *mut libc::FILE; |p| { p.add_str(path) });
io_wrap!(fopen64(path: Str, mode: Str) -> *mut libc::FILE; |p| { p.add_str(path) });
io_wrap!(freopen(path: Str, mode: Str, f: *mut libc::FILE) -> *mut libc::FILE; |p| { p.add_str(path) });
io_wrap!(freopen64(path: Str, mode: Str, f: *mut libc::FILE) -> *mut libc::FILE; |p| { p.add_str(path) });
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
/// The kernel's signal mask size (not glibc's 128-byte `sigset_t`).
const SIGMASK: usize = 8;
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
                static S: NextSym = NextSym::new(
                    // SAFETY: a literal with one trailing NUL.
                    unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) });
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
io_wrap!(setrlimit(r: c_int, l: *const libc::rlimit) -> c_int; |p| { p.add(l.cast(), RLIMIT) });
io_wrap!(setrlimit64(r: c_int, l: *const libc::rlimit) -> c_int; |p| { p.add(l.cast(), RLIMIT) });
io_wrap!(prlimit(pid: pid_t, r: c_int, new: *const libc::rlimit, old: *mut libc::rlimit) -> c_int;
    |p| { p.add(new.cast(), RLIMIT); p.add(old.cast(), RLIMIT) });
io_wrap!(prlimit64(pid: pid_t, r: c_int, new: *const libc::rlimit, old: *mut libc::rlimit) -> c_int;
    |p| { p.add(new.cast(), RLIMIT); p.add(old.cast(), RLIMIT) });
