// SPDX-License-Identifier: MIT
//! Raw system calls and per-thread state of the pager's own code.
//!
//! The preload library exports `mmap`, `munmap`, `madvise`, `read`, ... so a libc call made from
//! inside the library would land in its own wrapper. The pager therefore maps and unmaps its
//! memory with raw system calls, and marks the threads running its code (`InPager`) so that the
//! wrappers pass calls made by code it calls (zsmalloc's arena, the swap file's `pwrite`) straight
//! through.

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

thread_local! {
    /// Set while this thread runs pager code (fault handler, eviction, wrappers' bookkeeping).
    /// Const-initialised and without a destructor, so touching it never allocates.
    static IN_PAGER: Cell<u32> = const { Cell::new(0) };
}

/// Is this thread inside pager code (so a libc call it makes is the pager's own)?
#[inline]
pub fn in_pager() -> bool {
    IN_PAGER.with(|c| c.get() != 0)
}

/// Marks the current thread as running pager code until dropped (nests).
pub struct InPager(());

impl InPager {
    #[inline]
    pub fn enter() -> InPager {
        IN_PAGER.with(|c| c.set(c.get() + 1));
        InPager(())
    }
}

impl Drop for InPager {
    #[inline]
    fn drop(&mut self) {
        IN_PAGER.with(|c| c.set(c.get() - 1));
    }
}

/// A spin lock over data in static memory, taken with every signal of the thread blocked: for
/// the preload's small tables (streams' pinned buffers, locked ranges). Their sections are a
/// few loads and stores, and a signal handler on the holding thread can't re-enter them and
/// deadlock. A fork child resets it (the holder may have been another thread, gone there).
pub struct SigSpinLock<T> {
    lock: std::sync::atomic::AtomicBool,
    data: std::cell::UnsafeCell<T>,
}

// SAFETY: `data` is only reached through `with`, under the lock.
unsafe impl<T: Send> Sync for SigSpinLock<T> {}

impl<T> SigSpinLock<T> {
    pub const fn new(data: T) -> SigSpinLock<T> {
        SigSpinLock {
            lock: std::sync::atomic::AtomicBool::new(false),
            data: std::cell::UnsafeCell::new(data),
        }
    }

    /// Runs `f` on the data, under the lock, with signals blocked.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _b = SigBlock::new();
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held.
        let r = f(unsafe { &mut *self.data.get() });
        self.lock.store(false, Ordering::Release);
        r
    }

    /// In a fork child (one thread): frees the lock a parent's thread may have held at the
    /// fork.
    pub fn reset_after_fork(&self) {
        self.lock.store(false, Ordering::Relaxed);
    }
}

/// Blocks every signal of the calling thread until dropped. Pager code that takes locks or
/// allocates runs under it, so that no signal handler of the program can interrupt it, fault on
/// managed memory and re-enter the pager on the same thread while a lock is held.
pub struct SigBlock {
    old: libc::sigset_t,
}

impl SigBlock {
    #[inline]
    pub fn new() -> SigBlock {
        // SAFETY: sigset_t is plain data; sigfillset/rt_sigprocmask only write the sets we pass.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let mut old: libc::sigset_t = std::mem::zeroed();
            let _ = direct_syscall(
                libc::SYS_rt_sigprocmask,
                [
                    libc::SIG_SETMASK as usize,
                    &all as *const libc::sigset_t as usize,
                    &mut old as *mut libc::sigset_t as usize,
                    8,
                    0,
                    0,
                ],
            );
            SigBlock { old }
        }
    }
}

impl Default for SigBlock {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SigBlock {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe {
            let _ = direct_syscall(
                libc::SYS_rt_sigprocmask,
                [
                    libc::SIG_SETMASK as usize,
                    &self.old as *const libc::sigset_t as usize,
                    0,
                    8,
                    0,
                    0,
                ],
            );
        }
    }
}

/// Saves errno on creation and restores it on drop (signal handlers and wrappers must not
/// change the program's errno except where the wrapped call sets it).
pub struct ErrnoGuard(i32);

impl ErrnoGuard {
    #[inline]
    pub fn new() -> ErrnoGuard {
        ErrnoGuard(errno())
    }
}

impl Default for ErrnoGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ErrnoGuard {
    #[inline]
    fn drop(&mut self) {
        set_errno(self.0)
    }
}

#[inline]
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[inline]
pub fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e }
}

/// A raw system call result: `Ok(value)` or `Err(errno)`.
#[inline]
fn check(r: libc::c_long) -> Result<usize, i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// A system call made with the `syscall` instruction itself. The preload library exports
/// `syscall` and sends some of the program's calls through it to the pager's hooks
/// (`syscall(SYS_madvise, .., MADV_DONTNEED)` must drop the pager's copies as `madvise` does,
/// `syscall(SYS_rt_sigprocmask)` must leave SIGBUS unblocked): libc's `syscall`, called from
/// inside the library, would land in that wrapper, the hooks' own forwarded calls would come
/// back to them and the pager's own signal masks would lose SIGBUS. Returns the result or the
/// errno.
///
/// # Safety
/// As the system call `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
pub unsafe fn direct_syscall(nr: libc::c_long, a: [usize; 6]) -> Result<usize, i32> {
    let r: isize;
    // SAFETY: the caller's contract; the kernel clobbers rcx and r11 and nothing else, and
    // touches no stack of ours.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    // The kernel returns -errno (-4095..-1) on failure; every other value is a result (an
    // address may be above isize::MAX as an unsigned number, never in that range).
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r as usize)
    }
}

/// Elsewhere libc's `syscall` (the preload library, which routes these, is x86-64 only).
///
/// # Safety
/// As the system call `nr` with these arguments.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn direct_syscall(nr: libc::c_long, a: [usize; 6]) -> Result<usize, i32> {
    // SAFETY: the caller's contract.
    check(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

/// `mmap(2)` as a raw system call (never the preload library's wrapper).
///
/// # Safety
/// As `mmap(2)`: with `MAP_FIXED` the caller must own `addr..addr+len`.
pub unsafe fn raw_mmap(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
) -> Result<usize, i32> {
    // SAFETY: forwarded under the caller's contract.
    unsafe {
        direct_syscall(
            libc::SYS_mmap,
            [
                addr,
                len,
                prot as isize as usize,
                flags as isize as usize,
                fd as isize as usize,
                off as usize,
            ],
        )
    }
}

/// `close(2)` as a raw system call (never the preload library's `close`).
///
/// # Safety
/// The caller must own `fd`: nothing may use it afterwards.
pub unsafe fn raw_close(fd: i32) {
    // SAFETY: close takes an integer; the caller owns the descriptor.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// `munmap(2)` as a raw system call.
///
/// # Safety
/// The caller must own the range: nothing may use it afterwards.
pub unsafe fn raw_munmap(addr: usize, len: usize) -> Result<(), i32> {
    // SAFETY: forwarded under the caller's contract.
    unsafe { direct_syscall(libc::SYS_munmap, [addr, len, 0, 0, 0, 0]) }.map(|_| ())
}

/// `madvise(2)` as a raw system call.
///
/// # Safety
/// Destructive advice (`MADV_DONTNEED`, ...) must only be given for memory whose content the
/// caller may discard.
pub unsafe fn raw_madvise(addr: usize, len: usize, advice: i32) -> Result<(), i32> {
    // SAFETY: forwarded under the caller's contract.
    unsafe {
        direct_syscall(
            libc::SYS_madvise,
            [addr, len, advice as isize as usize, 0, 0, 0],
        )
    }
    .map(|_| ())
}

/// `mprotect(2)` as a raw system call; with `pkey`, `pkey_mprotect(2)`.
///
/// # Safety
/// As `mprotect(2)`: the caller answers for what the new protection does to the range's users.
pub unsafe fn raw_mprotect(
    addr: usize,
    len: usize,
    prot: i32,
    pkey: Option<i32>,
) -> Result<(), i32> {
    let prot = prot as isize as usize;
    // SAFETY: forwarded under the caller's contract.
    unsafe {
        match pkey {
            None => direct_syscall(libc::SYS_mprotect, [addr, len, prot, 0, 0, 0]),
            Some(k) => direct_syscall(
                libc::SYS_pkey_mprotect,
                [addr, len, prot, k as isize as usize, 0, 0],
            ),
        }
    }
    .map(|_| ())
}

/// One mapping of this address space as `PROCMAP_QUERY` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: usize,
    pub end: usize,
    pub writable: bool,
    pub exec: bool,
    pub shared: bool,
    pub file: bool,
}

/// `struct procmap_query` (include/uapi/linux/fs.h, "fs/procfs: implement efficient VMA
/// querying API for /proc/<pid>/maps", 6.11).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: u64 =
    (3 << 30) | ((std::mem::size_of::<ProcmapQuery>() as u64) << 16) | ((b'f' as u64) << 8) | 17;
const PROCMAP_QUERY_VMA_WRITABLE: u64 = 0x02;
const PROCMAP_QUERY_VMA_EXECUTABLE: u64 = 0x04;
const PROCMAP_QUERY_VMA_SHARED: u64 = 0x08;

/// The mapping covering `addr`, asked of `maps_fd` (this address space's `/proc/self/maps`):
/// one `ioctl`, no text to parse. `None` if nothing maps `addr` or the kernel lacks the query
/// (before 6.11).
pub fn vma_at(maps_fd: i32, addr: usize) -> Option<Vma> {
    let mut q = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_addr: addr as u64,
        ..Default::default()
    };
    // SAFETY: the kernel reads and writes `q` (its size is in `size`); no name or build ID is
    // asked for (sizes 0), so it writes nowhere else.
    let r = unsafe { libc::ioctl(maps_fd, PROCMAP_QUERY as _, &mut q as *mut ProcmapQuery) };
    (r == 0).then_some(Vma {
        start: q.vma_start as usize,
        end: q.vma_end as usize,
        writable: q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE != 0,
        exec: q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE != 0,
        shared: q.vma_flags & PROCMAP_QUERY_VMA_SHARED != 0,
        file: q.inode != 0,
    })
}

/// Reads `buf.len()` bytes of this address space at `addr` through `mem_fd` (its
/// `/proc/self/mem`), whatever the mapping's protection (the kernel reads with `FOLL_FORCE`)
/// and without a fault of this thread: a page that is not there (a missing page of a
/// userfaultfd range) fails the read instead. Returns the bytes read.
pub fn read_mem(mem_fd: i32, addr: usize, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which we own.
    check(unsafe {
        libc::syscall(
            libc::SYS_pread64,
            mem_fd,
            buf.as_mut_ptr(),
            buf.len(),
            addr as libc::off_t,
        )
    })
}

/// `mincore(2)`: one byte per page of `[addr, addr + vec.len() * PAGE)`, bit 0 set where
/// the page is mapped.
pub fn mincore(addr: usize, vec: &mut [u8]) -> Result<(), i32> {
    // SAFETY: the kernel writes exactly `vec.len()` bytes (one per page of the range) into
    // `vec`, which we own; the range itself is only inspected.
    check(unsafe {
        libc::syscall(
            libc::SYS_mincore,
            addr,
            vec.len() * crate::region::PAGE,
            vec.as_mut_ptr(),
        )
    })
    .map(|_| ())
}

/// `mremap(2)` as a raw system call.
///
/// # Safety
/// As `mremap(2)`: the caller owns both ranges.
pub unsafe fn raw_mremap(
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: usize,
) -> Result<usize, i32> {
    // SAFETY: forwarded under the caller's contract.
    unsafe {
        direct_syscall(
            libc::SYS_mremap,
            [old, old_len, new_len, flags as isize as usize, new_addr, 0],
        )
    }
}

/// Whether the page at `addr` is mapped (`mincore`: a present page table entry).
pub fn page_present(addr: usize) -> bool {
    let mut v = 0u8;
    // SAFETY: one page-aligned address and a one-byte vector for the kernel to fill.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mincore,
            addr & !(crate::region::PAGE - 1),
            crate::region::PAGE,
            &mut v as *mut u8,
        )
    };
    r == 0 && v & 1 != 0
}

/// Anonymous private memory for the pager's own use (never managed, never wrapped).
pub fn map_anon(len: usize) -> Result<usize, i32> {
    map_anon_prot(len, libc::PROT_READ | libc::PROT_WRITE)
}

/// As [`map_anon`], with protection `prot`.
pub fn map_anon_prot(len: usize, prot: i32) -> Result<usize, i32> {
    // SAFETY: a fresh mapping at an address the kernel chooses overlaps nothing.
    unsafe {
        raw_mmap(
            0,
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    }
}

/// `clock` (`CLOCK_MONOTONIC`, or a CPU time: `CLOCK_PROCESS_CPUTIME_ID`,
/// `CLOCK_THREAD_CPUTIME_ID`) in nanoseconds.
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Monotonic nanoseconds (vDSO, async-signal-safe).
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

#[inline]
pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[inline]
pub fn getpid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_getpid) as i32 }
}

/// A libc function found with `dlsym(RTLD_NEXT)`: the definition the preload library's
/// wrapper of the same name hides. Resolved on first use and cached.
pub struct NextSym {
    name: &'static CStr,
    ptr: AtomicPtr<libc::c_void>,
}

impl NextSym {
    pub const fn new(name: &'static CStr) -> NextSym {
        NextSym {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The address of the next definition (null if there is none). Inlined: the wrappers of
    /// uncontended locks call it on every lock.
    #[inline]
    pub fn get(&self) -> *mut libc::c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut libc::c_void {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT searches after this object.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// Writes a message to stderr with one `write(2)` system call (async-signal-safe, no
/// allocation): for fatal conditions inside the fault path.
pub fn raw_stderr(msg: &[u8]) {
    // SAFETY: writes from a valid slice.
    unsafe {
        libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len());
    }
}

/// Makes the private anonymous page at `addr` exclusive to this process without changing a
/// byte of it: an atomic add of zero to its first word, done by the kernel
/// (`FUTEX_WAKE_OP` with `FUTEX_OP_ADD 0` on `uaddr2`, waking nobody). A page shared
/// copy-on-write with a fork parent or child gets its own copy (the write fault breaks COW), so
/// `UFFDIO_MOVE` accepts it afterwards. Being atomic, the add can't undo a concurrent write of
/// the program to the same word; being a kernel access, a missing page gives `Err(EFAULT)`
/// instead of a SIGBUS in the pager's own code.
///
/// # Safety
/// `addr` must be a page of memory the pager manages, owned by the caller (an eviction that
/// claimed it): the add changes no data, but it is a write.
pub unsafe fn break_cow(addr: usize) -> Result<(), i32> {
    static DUMMY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    // FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0): op 1 in bits 28-31, oparg 0, cmp 0.
    const OP_ADD_ZERO: u32 = 1 << 28;
    // SAFETY: FUTEX_WAKE_OP on our own futex word (nr_wake 0) and the caller's page (uaddr2,
    // 4-byte aligned: page-aligned); the kernel's atomic op adds 0 there.
    unsafe {
        direct_syscall(
            libc::SYS_futex,
            [
                DUMMY.as_ptr() as usize,
                (libc::FUTEX_WAKE_OP | libc::FUTEX_PRIVATE_FLAG) as usize,
                0,
                0,
                addr,
                OP_ADD_ZERO as usize,
            ],
        )
    }
    .map(|_| ())
}

/// Half the room RLIMIT_AS and RLIMIT_DATA leave (see `uzswap_zsmalloc::address_room`).
pub use uzswap_zswap::address_room;
