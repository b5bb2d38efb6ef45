// SPDX-License-Identifier: MIT
//! The pager's own file descriptors, out of the program's way.
//!
//! A process under `uzswap run` holds descriptors the program never opened: the accounting
//! segment, the userfaultfd, `/proc/self/pagemap`, its swap files and, when recording, the
//! trace files. Two things go wrong if they sit where the kernel puts a new descriptor (the
//! lowest free number):
//! - the program's own descriptors get other numbers than in a plain run, and code that
//!   counts on them (`open` then `dup2(fd, 7); close(fd)`, a shell's `exec 4>log`) breaks or,
//!   with `dup2` onto one of ours, silently replaces it: with its swap file replaced by the
//!   program's log, the pager read its pages from the log and could not get them back (and
//!   would have written its next blocks into it);
//! - a program that closes every descriptor it did not open (daemons, `closefrom(3)`,
//!   `close_range`, a loop up to `sysconf(_SC_OPEN_MAX)`, Python's `os.closerange`) closes the
//!   userfaultfd, and the process dies at its next fault (SIGSEGV), or a swap file, and a
//!   later `open` gets its number for the pager to write into.
//!
//! So every long-lived descriptor of the pager moves at once to a number at or above
//! [`floor`] (64 below the soft `RLIMIT_NOFILE` counted as at most 1024, so 960 at most: high
//! enough that programs do not pick it, low enough to keep the kernel's descriptor table
//! small), is registered here, and
//! the preload library's `close`, `close_range`, `closefrom`, `dup2` and `dup3` (and the same
//! calls through `syscall`) leave registered descriptors alone: `close` of one fails with EBADF,
//! as it would in a plain run where the number is not open; a range closes around them;
//! `dup2`/`dup3` onto one fails with EBADF (a number the program cannot have opened itself,
//! since the pager holds it). The pager's own closes (`InPager` set) pass through.
//!
//! Everything here is a few atomic loads (async-signal-safe: `close` is called from signal
//! handlers and between `fork` and `exec`).

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

/// Registered descriptors (-1: free entry). A process holds a handful.
static OURS: [AtomicI32; 16] = [const { AtomicI32::new(-1) }; 16];

/// The lowest number the pager's descriptors move to (0: not computed yet).
static FLOOR: AtomicI32 = AtomicI32::new(0);

/// The lowest number the pager's descriptors take: 64 below the soft `RLIMIT_NOFILE`, capped
/// at 1024 - 64 (a higher number would grow the kernel's descriptor table for nothing), and at
/// least 3 (a limit so low that the program needs every number is its own business).
pub fn floor() -> i32 {
    let f = FLOOR.load(Relaxed);
    if f > 0 {
        return f;
    }
    let mut rl = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    // SAFETY: fills the struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    let soft = rl.rlim_cur.min(1024) as i32;
    let f = (soft - 64).max(soft / 2).max(3);
    FLOOR.store(f, Relaxed);
    f
}

/// Moves `fd` (the pager's, just opened) to a number at or above [`floor`] and registers it;
/// returns the new number (see [`raise`]).
pub fn adopt(fd: i32, inherit: bool) -> i32 {
    let fd = raise(fd, inherit);
    register(fd);
    fd
}

/// Moves `fd` to a number at or above [`floor`], close-on-exec unless `inherit`, closing the
/// original; returns the new number, or `fd` itself if it is up there already or cannot move
/// (no free number there). Also for `uzswap run`'s segment, before the program starts.
pub fn raise(fd: i32, inherit: bool) -> i32 {
    if fd < 0 || fd >= floor() {
        return fd;
    }
    let cmd = if inherit {
        libc::F_DUPFD
    } else {
        libc::F_DUPFD_CLOEXEC
    };
    // SAFETY: duplicating a descriptor the caller owns; closing the original, which nothing
    // else uses.
    unsafe {
        let high = libc::fcntl(fd, cmd, floor());
        if high >= 0 {
            crate::sys::raw_close(fd);
            high
        } else {
            fd
        }
    }
}

/// Registers `fd` as the pager's (left alone by the program's close and dup calls).
pub fn register(fd: i32) {
    if fd < 0 || is_registered(fd) {
        return;
    }
    for slot in &OURS {
        if slot.compare_exchange(-1, fd, Relaxed, Relaxed).is_ok() {
            return;
        }
    }
}

/// Forgets `fd` (before the pager closes it: the number becomes the program's to reuse).
pub fn forget(fd: i32) {
    for slot in &OURS {
        let _ = slot.compare_exchange(fd, -1, Relaxed, Relaxed);
    }
}

/// Closes `fd`, one of the pager's own, forgetting it first.
pub fn close_ours(fd: i32) {
    if fd >= 0 {
        forget(fd);
        // SAFETY: the caller's own descriptor, which nothing uses any more.
        unsafe { crate::sys::raw_close(fd) };
    }
}

fn is_registered(fd: i32) -> bool {
    OURS.iter().any(|s| s.load(Relaxed) == fd)
}

/// Is `fd` one of the pager's descriptors (registered, or a swap file's)?
pub fn is_ours(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    is_registered(fd) || crate::pager().is_some_and(|p| p.holds_swap_fd(fd))
}

/// Should the program's call on `fd` leave it alone? (Not for the pager's own calls.)
#[inline]
pub fn guarded(fd: i32) -> bool {
    // The floor check first: the program's descriptors are almost always below it, and a
    // swap file that could not move is registered like the rest.
    (fd >= FLOOR.load(Relaxed) || is_registered(fd)) && !crate::sys::in_pager() && is_ours(fd)
}

/// The pager's descriptors within `[first, last]`, ascending (at most 24).
fn ours_within(first: u32, last: u32) -> ([i32; 24], usize) {
    let mut v = [0i32; 24];
    let mut n = 0;
    let mut add = |fd: i32| {
        if fd >= 0 && (first..=last).contains(&(fd as u32)) && !v[..n].contains(&fd) && n < 24 {
            v[n] = fd;
            n += 1;
        }
    };
    for s in &OURS {
        add(s.load(Relaxed));
    }
    if let Some(p) = crate::pager() {
        p.each_swap_fd(&mut add);
    }
    v[..n].sort_unstable();
    (v, n)
}

/// `close_range(first, last, flags)` as the program asked, except the pager's descriptors:
/// the range is closed (or marked close-on-exec) around them. `Some(result)` when the pager
/// handled the call, `None` when the caller should make the call itself (nothing of ours in the
/// range, or the pager's own call).
pub fn close_range(first: u32, last: u32, flags: u32) -> Option<i32> {
    if first > last || crate::sys::in_pager() {
        return None;
    }
    let (ours, n) = ours_within(first, last);
    if n == 0 {
        return None;
    }
    if flags & libc::CLOSE_RANGE_UNSHARE != 0 {
        // The descriptor table first becomes this process's own, as the flag asks; the
        // pieces below then close in it.
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            return Some(-1);
        }
    }
    let flags = flags & !libc::CLOSE_RANGE_UNSHARE;
    let mut lo = first;
    for &fd in &ours[..n] {
        let fd = fd as u32;
        if fd > lo && sys_close_range(lo, fd - 1, flags) != 0 {
            return Some(-1);
        }
        lo = fd.saturating_add(1);
        if fd == u32::MAX {
            return Some(0);
        }
    }
    if lo <= last && sys_close_range(lo, last, flags) != 0 {
        return Some(-1);
    }
    Some(0)
}

fn sys_close_range(first: u32, last: u32, flags: u32) -> i32 {
    // SAFETY: close_range takes integers only.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_null() -> i32 {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
    }

    fn is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD on any number.
        unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
    }

    /// A range closes around registered descriptors, which stay open and guarded; adopted ones
    /// sit at or above the floor; forgotten ones are the program's again.
    #[test]
    fn ranges_close_around_the_pagers_descriptors() {
        // Five consecutive numbers: dup the first one up from a free number.
        let base = open_null();
        let fds: Vec<i32> = (0..5)
            // SAFETY: duplicating our own descriptor.
            .map(|k| unsafe { libc::fcntl(base, libc::F_DUPFD_CLOEXEC, 600 + k) })
            .collect();
        // SAFETY: our own descriptor.
        unsafe { libc::close(base) };
        assert_eq!(fds, vec![600, 601, 602, 603, 604]);
        register(602);
        assert!(is_ours(602) && !is_ours(601));
        assert!(guarded(602) && !guarded(603));
        assert_eq!(close_range(600, 604, 0), Some(0));
        assert_eq!(
            fds.iter().map(|&fd| is_open(fd)).collect::<Vec<_>>(),
            [false, false, true, false, false]
        );
        // Nothing of ours in the range: the caller makes the call itself.
        assert_eq!(close_range(603, 604, 0), None);
        forget(602);
        assert!(!guarded(602));
        assert_eq!(close_range(600, 604, 0), None);
        // SAFETY: our own descriptor.
        unsafe { libc::close(602) };
        let high = adopt(open_null(), false);
        assert!(high >= floor(), "{high} below {}", floor());
        assert!(is_ours(high));
        forget(high);
        // SAFETY: our own descriptor.
        unsafe { libc::close(high) };
    }
}
