// SPDX-License-Identifier: MIT
//! The userfaultfd object: the only code in the workspace issuing userfaultfd ioctls.
//!
//! Where the unsafety lives (as crosvm's `swap/src/userfaultfd.rs` argues it): filling a page
//! (`UFFDIO_COPY`) or moving one out (`UFFDIO_MOVE`) changes memory the program owns, but only
//! memory the pager manages, whose content the pager is the keeper of; the Rust-level hazard is
//! *registering* a range (after which accesses to missing pages raise SIGBUS instead of reading
//! zeros), so `register` is the unsafe entry point and its contract covers the others: a
//! registered range is a managed region, every access to a missing page of it is resolved by
//! the pager, and the pager's own code never touches it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

const UFFD_API: u64 = 0xAA;
const fn iowr(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | (0xAA << 8) | nr
}
const UFFDIO_API: u64 = iowr(0x3F, 24);
const UFFDIO_REGISTER: u64 = iowr(0x00, 32);
const UFFDIO_UNREGISTER: u64 = (2 << 30) | (16 << 16) | (0xAA << 8) | 0x01;
const UFFDIO_COPY: u64 = iowr(0x03, 40);
const UFFDIO_MOVE: u64 = iowr(0x05, 40);

/// `UFFD_FEATURE_SIGBUS`: a missing page raises SIGBUS in the faulting thread.
pub const FEATURE_SIGBUS: u64 = 1 << 7;
/// `UFFD_FEATURE_MOVE` (6.8).
pub const FEATURE_MOVE: u64 = 1 << 16;
/// `UFFD_FEATURE_WP_ASYNC` ("mm/userfaultfd: support WP on multiple VMAs" series, 6.7): a
/// write to a write-protected page just clears its uffd-wp bit in the fault path, with no
/// message or signal; `PAGEMAP_SCAN` then reports the page `WRITTEN`.
pub const FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFD_FEATURE_WP_UNPOPULATED` (6.4): needed by `PAGEMAP_SCAN`'s `PM_SCAN_WP_MATCHING` on
/// anonymous memory (the scan skips VMAs that don't "use markers", `userfaultfd_wp_use_markers`).
pub const FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// Write tracking needs both.
pub const FEATURES_TRACKING: u64 = FEATURE_WP_ASYNC | FEATURE_WP_UNPOPULATED;
/// `UFFD_USER_MODE_ONLY` (5.11): allowed for every user; kernel-mode faults fail with EFAULT.
const UFFD_USER_MODE_ONLY: i32 = 1;

const REGISTER_MODE_MISSING: u64 = 1;
const REGISTER_MODE_WP: u64 = 2;
const COPY_MODE_DONTWAKE: u64 = 1;
const COPY_MODE_WP: u64 = 2;
const MOVE_MODE_ALLOW_SRC_HOLES: u64 = 2;

/// Test hook (`UZSWAP_TEST_MISREPORT_MOVES=N`): every Nth successful `UFFDIO_MOVE` is reported
/// as EEXIST with its last page not counted, as Linux 6.18 was seen to do, so that the
/// pager's check of the scratch area is exercised on any kernel. 0: off.
static MISREPORT_EVERY: AtomicU64 = AtomicU64::new(0);
static MOVES: AtomicU64 = AtomicU64::new(0);

/// Reads the test hook's setting (outside any signal handler: it reads the environment).
pub fn init_test_hooks() {
    let every = std::env::var("UZSWAP_TEST_MISREPORT_MOVES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    MISREPORT_EVERY.store(every, Ordering::Relaxed);
}

#[repr(C)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
struct Range {
    start: u64,
    len: u64,
}
#[repr(C)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}
#[repr(C)]
struct Move {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    moved: i64,
}

/// Why a fill or a move did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UffdError {
    /// EEXIST: the destination page is populated (another thread won the race).
    Exists,
    /// EAGAIN: the address space was changing; `done` bytes were handled.
    Again { done: usize },
    /// EBUSY (move): the source page is shared with a fork child (not exclusive).
    Busy { done: usize },
    /// ENOENT (move): a source page is missing; `done` bytes were moved before it.
    Hole { done: usize },
    /// Any other errno.
    Os(i32),
    /// `UFFDIO_MOVE` failed with any other errno after moving `done` bytes (which are in the
    /// destination now: the caller must account for them).
    MoveFailed { errno: i32, done: usize },
}

/// A userfaultfd in SIGBUS mode (user-mode faults only), closed on drop.
#[derive(Debug)]
pub struct Uffd {
    fd: OwnedFd,
    features: u64,
}

impl Drop for Uffd {
    fn drop(&mut self) {
        // The number is the program's again once closed (by `fd`'s own drop, next).
        crate::fds::forget(self.fd.as_raw_fd());
    }
}

impl Uffd {
    /// Creates a non-blocking, close-on-exec userfaultfd with `UFFD_USER_MODE_ONLY` (so it works
    /// for every user) and enables SIGBUS mode, MOVE and, where the kernel has them, async write
    /// protection for write tracking (`features() & FEATURES_TRACKING`). Errors with the errno of
    /// the step that failed.
    pub fn new() -> Result<Uffd, (&'static str, i32)> {
        // SAFETY: the syscall takes flags only and returns a new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if fd < 0 {
            return Err(("userfaultfd", crate::sys::errno()));
        }
        // Out of the program's way (see `fds`); forgotten again on drop.
        let fd = crate::fds::adopt(fd as i32, false);
        // SAFETY: the kernel just gave us this fd; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // UFFDIO_API can be called once per descriptor: ask which features the kernel has on a
        // probe descriptor first, then enable the wanted subset on the real one.
        let avail = Self::probe().unwrap_or(0);
        let mut wanted = FEATURE_SIGBUS | FEATURE_MOVE;
        if avail & FEATURES_TRACKING == FEATURES_TRACKING {
            wanted |= FEATURES_TRACKING;
        }
        let mut api = Api {
            api: UFFD_API,
            features: wanted,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes the struct we pass.
        if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API as _, &mut api) } != 0 {
            return Err(("UFFDIO_API", crate::sys::errno()));
        }
        Ok(Uffd {
            fd,
            features: wanted & api.features,
        })
    }

    /// The features this kernel offers (a throw-away descriptor, handshake with no features).
    fn probe() -> Option<u64> {
        // SAFETY: the syscall takes flags only and returns a new fd or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: the kernel just gave us this fd; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let mut api = Api {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes the struct we pass.
        if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API as _, &mut api) } != 0 {
            return None;
        }
        Some(api.features)
    }

    /// Is write tracking on (async write protection, so `copy(.., wp: true)` and
    /// `PAGEMAP_SCAN` with `PM_SCAN_WP_MATCHING` may be used)?
    pub fn tracking(&self) -> bool {
        self.features & FEATURES_TRACKING == FEATURES_TRACKING
    }

    pub fn features(&self) -> u64 {
        self.features
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Registers `[start, start+len)` in MISSING mode.
    ///
    /// # Safety
    /// The range must be private anonymous memory managed by the pager for as long as it stays
    /// registered: afterwards an access to a missing page raises SIGBUS (user mode) or EFAULT
    /// (kernel mode) until the pager fills it, so no Rust code may hold a reference into it.
    pub unsafe fn register_missing(&self, start: usize, len: usize) -> Result<(), i32> {
        // WP too: write tracking (async write protection, `PAGEMAP_SCAN`) needs the range
        // registered for it.
        self.register(start, len, REGISTER_MODE_MISSING | REGISTER_MODE_WP)
    }

    /// Registers `[start, start+len)` in WP mode only, for the eviction scratch area: a
    /// `UFFDIO_MOVE` destination must be registered with the same userfaultfd, and WP-only
    /// registration keeps a missing scratch page readable (as zeros) by the pager itself.
    ///
    /// # Safety
    /// The range must be the pager's own scratch memory.
    pub unsafe fn register_scratch(&self, start: usize, len: usize) -> Result<(), i32> {
        self.register(start, len, REGISTER_MODE_WP)
    }

    fn register(&self, start: usize, len: usize, mode: u64) -> Result<(), i32> {
        let mut r = Register {
            range: Range {
                start: start as u64,
                len: len as u64,
            },
            mode,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes the struct we pass; the caller's contract
        // (see `register_missing`) covers the effect on the range.
        if unsafe { libc::ioctl(self.raw_fd(), UFFDIO_REGISTER as _, &mut r) } != 0 {
            return Err(crate::sys::errno());
        }
        Ok(())
    }

    /// Unregisters a range (its missing pages read as zeros again).
    pub fn unregister(&self, start: usize, len: usize) -> Result<(), i32> {
        let mut r = Range {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_UNREGISTER reads the range we pass.
        if unsafe { libc::ioctl(self.raw_fd(), UFFDIO_UNREGISTER as _, &mut r) } != 0 {
            return Err(crate::sys::errno());
        }
        Ok(())
    }

    /// `UFFDIO_COPY`: atomically installs `len` bytes from `src` at the missing pages at `dst`
    /// (page-aligned, inside a registered range). In SIGBUS mode no thread sleeps on the uffd,
    /// so no wake is needed. `Exists` when a destination page is already populated. With `wp`
    /// (only when `tracking()`), the pages are mapped write-protected: the first write clears
    /// the protection silently and `PAGEMAP_SCAN` reports the page `WRITTEN` from then on.
    pub fn copy(&self, dst: usize, src: *const u8, len: usize, wp: bool) -> Result<(), UffdError> {
        let mode = COPY_MODE_DONTWAKE
            | if wp && self.tracking() {
                COPY_MODE_WP
            } else {
                0
            };
        let mut done = 0usize;
        while done < len {
            let mut c = Copy {
                dst: (dst + done) as u64,
                src: src as u64 + done as u64,
                len: (len - done) as u64,
                mode,
                copy: 0,
            };
            // SAFETY: UFFDIO_COPY reads `len` bytes from `src` (the caller's buffer) and writes
            // only missing pages of a registered range (the `register_missing` contract).
            let r = unsafe { libc::ioctl(self.raw_fd(), UFFDIO_COPY as _, &mut c) };
            if r == 0 {
                return Ok(());
            }
            let e = crate::sys::errno();
            if c.copy > 0 {
                done += c.copy as usize;
            }
            match e {
                libc::EAGAIN => continue,
                libc::EEXIST => return Err(UffdError::Exists),
                _ => return Err(UffdError::Os(e)),
            }
        }
        Ok(())
    }

    /// `UFFDIO_MOVE` of `len` bytes from `src` (managed pages) to `dst` (the registered,
    /// empty scratch area): the pages leave the program's address space atomically, so a write
    /// either lands before the move (and is moved with the page) or faults afterwards.
    /// Source holes are allowed (the destination page stays missing).
    pub fn move_out(&self, dst: usize, src: usize, len: usize) -> Result<(), UffdError> {
        let mut m = Move {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode: COPY_MODE_DONTWAKE | MOVE_MODE_ALLOW_SRC_HOLES,
            moved: 0,
        };
        // SAFETY: UFFDIO_MOVE remaps pages between two ranges of this process registered with
        // this uffd (the scratch area and a managed region), touching no Rust-visible memory.
        let r = unsafe { libc::ioctl(self.raw_fd(), UFFDIO_MOVE as _, &mut m) };
        if r == 0 {
            let every = MISREPORT_EVERY.load(Ordering::Relaxed);
            if every > 0 && MOVES.fetch_add(1, Ordering::Relaxed) % every == every - 1 {
                return Err(UffdError::MoveFailed {
                    errno: libc::EEXIST,
                    done: len - crate::region::PAGE,
                });
            }
            return Ok(());
        }
        let e = crate::sys::errno();
        let done = m.moved.max(0) as usize;
        Err(match e {
            libc::EAGAIN => UffdError::Again { done },
            libc::EBUSY => UffdError::Busy { done },
            libc::ENOENT => UffdError::Hole { done },
            _ => UffdError::MoveFailed { errno: e, done },
        })
    }
}
