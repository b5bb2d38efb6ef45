// SPDX-License-Identifier: MIT
//! Stdio streams given a buffer of the program's by `setvbuf`, `setbuf` or `setbuffer`. glibc
//! fills and drains a stream's buffer with its internal `__read`/`__write`, which no wrapper
//! sees, so a buffer in paged-out heap memory was EFAULT ("Bad address") at `fflush`, `fclose`
//! or a refill. Such a buffer is pinned ([`LongPin`]) from the call that hands it over until
//! the stream stops using it: `fclose`, `pclose`, `fcloseall`, `freopen`, or another
//! `setvbuf`/`setbuf`/`setbuffer` on the stream that replaces it. The cost: the buffer stays
//! resident, and charged to the budget, for that long. Buffers glibc allocates itself come
//! from its own malloc (never managed) and need nothing.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use libc::{size_t, FILE};
use uzswap_pager::hooks::{LongPin, Pinned};
use uzswap_pager::sys::{NextSym, SigSpinLock};

/// Streams whose buffers are pinned at once; a stream beyond that keeps an unpinned buffer (as
/// before). Keeps long pins far below a page's pin limit (255, which a pin would wait on
/// forever), so even 64 small buffers in one page leave room for system calls' pins.
const SLOTS: usize = 64;

type Slots = [(usize, Option<LongPin>); SLOTS];

/// FILE* -> its pinned buffer. In this library's static data (never managed), under a lock
/// taken with signals blocked (a handler that closes a stream on this thread can't deadlock on
/// it; the sections are a few loads and stores: no allocation, no system call).
struct Table {
    /// Slots in use: `fclose` skips the table while it is empty (nearly every program).
    used: AtomicUsize,
    slots: SigSpinLock<Slots>,
}

static TABLE: Table = Table {
    used: AtomicUsize::new(0),
    slots: SigSpinLock::new([const { (0, None) }; SLOTS]),
};

impl Table {
    fn with<R>(&self, f: impl FnOnce(&mut Slots, &AtomicUsize) -> R) -> R {
        self.slots.with(|s| f(s, &self.used))
    }

    /// Takes `fp`'s pin out of the table (the stream no longer uses its buffer, or is about to
    /// close: the pin itself is released by the caller once the close has flushed).
    fn take(&self, fp: *mut FILE) -> Option<LongPin> {
        if self.used.load(Relaxed) == 0 {
            return None;
        }
        self.with(|s, used| {
            let e = s.iter_mut().find(|e| e.0 == fp as usize && e.1.is_some())?;
            e.0 = 0;
            used.fetch_sub(1, Relaxed);
            e.1.take()
        })
    }

    /// Gives `fp`'s buffer the pin `new` (or none), releasing the one it had.
    fn replace(&self, fp: *mut FILE, new: Option<LongPin>) {
        if new.is_none() && self.used.load(Relaxed) == 0 {
            return;
        }
        let (old, refused) = self.with(|s, used| {
            let old = s
                .iter_mut()
                .find(|e| e.0 == fp as usize && e.1.is_some())
                .and_then(|e| {
                    e.0 = 0;
                    used.fetch_sub(1, Relaxed);
                    e.1.take()
                });
            let refused = match (new, s.iter_mut().find(|e| e.1.is_none())) {
                (Some(p), Some(e)) => {
                    *e = (fp as usize, Some(p));
                    used.fetch_add(1, Relaxed);
                    None
                }
                (p, _) => p,
            };
            (old, refused)
        });
        // After the new pin is taken: a buffer handed over again keeps its pages pinned.
        old.into_iter().chain(refused).for_each(LongPin::release);
    }

    /// Every pin out of the table (`fcloseall`).
    fn drain(&self) -> [Option<LongPin>; SLOTS] {
        let mut all = [const { None }; SLOTS];
        if self.used.load(Relaxed) == 0 {
            return all;
        }
        self.with(|s, used| {
            used.store(0, Relaxed);
            for (k, e) in s.iter_mut().enumerate() {
                e.0 = 0;
                all[k] = e.1.take();
            }
        });
        all
    }
}

/// In the fork child (one thread): a lock held by another thread of the parent at the fork
/// would never be released.
pub fn after_fork_child() {
    TABLE.slots.reset_after_fork();
}

/// `setvbuf`'s and friends' new buffer for `fp`: pinned if it is managed memory.
fn hand_over(fp: *mut FILE, buf: *const c_void, len: usize) {
    TABLE.replace(fp, LongPin::new(buf, len));
}

macro_rules! real {
    ($name:expr; $t:ty) => {{
        static S: NextSym = NextSym::new($name);
        // SAFETY: libc's function of this name, of this type.
        unsafe { std::mem::transmute::<*mut c_void, $t>(S.get()) }
    }};
}

/// Pins a buffer given to the stream for as long as the stream uses it (see the module).
///
/// # Safety
/// As `setvbuf(3)`.
#[no_mangle]
pub unsafe extern "C" fn setvbuf(fp: *mut FILE, buf: *mut c_char, mode: c_int, n: size_t) -> c_int {
    let f = real!(c"setvbuf"; unsafe extern "C" fn(*mut FILE, *mut c_char, c_int, size_t) -> c_int);
    // SAFETY: forwarded. The old buffer stays pinned through the flush this may do.
    let r = unsafe { f(fp, buf, mode, n) };
    if r == 0 {
        match mode {
            // Unbuffered: glibc uses a one-byte buffer inside the FILE from now on.
            libc::_IONBF => TABLE.replace(fp, None),
            // A null buffer with full or line buffering keeps the stream's buffer (glibc).
            _ if buf.is_null() => {}
            // A zero size makes it unbuffered (glibc's `_IO_default_setbuf`).
            _ if n == 0 => TABLE.replace(fp, None),
            _ => hand_over(fp, buf.cast(), n),
        }
    }
    r
}

/// As [`setvbuf`]: glibc's `setbuf` calls its internal `_IO_setbuffer`, not `setvbuf`.
///
/// # Safety
/// As `setbuffer(3)`.
#[no_mangle]
pub unsafe extern "C" fn setbuffer(fp: *mut FILE, buf: *mut c_char, n: size_t) {
    let f = real!(c"setbuffer"; unsafe extern "C" fn(*mut FILE, *mut c_char, size_t));
    // SAFETY: forwarded.
    unsafe { f(fp, buf, n) };
    if buf.is_null() || n == 0 {
        TABLE.replace(fp, None); // unbuffered
    } else {
        hand_over(fp, buf.cast(), n);
    }
}

/// `setbuffer(fp, buf, BUFSIZ)`, pinned as [`setvbuf`].
///
/// # Safety
/// As `setbuf(3)`.
#[no_mangle]
pub unsafe extern "C" fn setbuf(fp: *mut FILE, buf: *mut c_char) {
    let f = real!(c"setbuf"; unsafe extern "C" fn(*mut FILE, *mut c_char));
    // SAFETY: forwarded.
    unsafe { f(fp, buf) };
    if buf.is_null() {
        TABLE.replace(fp, None);
    } else {
        hand_over(fp, buf.cast(), libc::BUFSIZ as usize);
    }
}

/// Closes the stream (its last flush through the still pinned buffer), then unpins the buffer.
/// The entry leaves the table before the call: once the FILE is freed, another thread's
/// `fopen` may get the same address.
///
/// # Safety
/// As `fclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    let f = real!(c"fclose"; unsafe extern "C" fn(*mut FILE) -> c_int);
    let pin = TABLE.take(fp);
    // SAFETY: forwarded.
    let r = unsafe { f(fp) };
    if let Some(p) = pin {
        p.release();
    }
    r
}

/// As [`fclose`]: glibc's `pclose` closes the stream with its internal `fclose`.
///
/// # Safety
/// As `pclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn pclose(fp: *mut FILE) -> c_int {
    let f = real!(c"pclose"; unsafe extern "C" fn(*mut FILE) -> c_int);
    let pin = TABLE.take(fp);
    // SAFETY: forwarded.
    let r = unsafe { f(fp) };
    if let Some(p) = pin {
        p.release();
    }
    r
}

/// Flushes every stream and makes it unbuffered (glibc's `fcloseall`), then unpins every
/// buffer.
///
/// # Safety
/// As `fcloseall(3)`.
#[no_mangle]
pub unsafe extern "C" fn fcloseall() -> c_int {
    let f = real!(c"fcloseall"; unsafe extern "C" fn() -> c_int);
    // SAFETY: forwarded.
    let r = unsafe { f() };
    TABLE
        .drain()
        .into_iter()
        .flatten()
        .for_each(LongPin::release);
    r
}

macro_rules! freopen_wrap {
    ($name:ident) => {
        /// Pins the path for the call; the stream's old buffer (flushed and dropped by the
        /// close inside, pinned until then) is unpinned after it. stdio's system calls are
        /// glibc-internal: `git fsck` under 1M warned "unable to access '.git/info/grafts':
        /// Bad address" from `fopen` (2026-11-27).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE {
            let f = real!(
                sym_name!($name);
                unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE
            );
            let mut pins = Pinned::none();
            // SAFETY: the caller's path.
            unsafe { pins.add_str(path) };
            let old = TABLE.take(fp);
            // SAFETY: forwarded.
            let r = unsafe { f(path, mode, fp) };
            if let Some(p) = old {
                p.release();
            }
            r
        }
    };
}

freopen_wrap!(freopen);
freopen_wrap!(freopen64);
