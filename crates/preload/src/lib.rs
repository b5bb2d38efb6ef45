// SPDX-License-Identifier: MIT
//! libuzswap_preload.so: the library `uzswap run` preloads into the program.
//!
//! Thin by design: the exported libc symbols below forward to `uzswap_pager::hooks`, which
//! holds their logic. What lives here is what must be in the shared object itself: the
//! constructor and destructor, the program's malloc (mimalloc, over one large managed arena)
//! with its dispatch, and this library's own Rust allocator (glibc's malloc, which gets its
//! memory through glibc-internal `__mmap`/`__sbrk` and so is never managed).
//!
//! **Malloc dispatch.** The program's allocations come from mimalloc in a managed arena.
//! Allocations made *by libc itself* (stdio buffers, `opendir`, `getaddrinfo`, ...) go to
//! glibc's own malloc instead: libc fills them with internal system calls the wrappers can't
//! see, which would fail with EFAULT on an evicted page. The caller is told apart by the
//! return address (the naked entry points pass it on); `free`/`realloc` dispatch by address.
//!
//! **Thread exit.** The pager's own thread-local destructors are kept in a table in the
//! thread's static storage (`__cxa_thread_atexit_impl`) and run from the destructor of the
//! thread's alternate-stack key (`thread_gone`), after the program's thread-local destructors;
//! the alternate stack goes last.

extern crate libmimalloc_sys;

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{
    AtomicBool, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

use uzswap_pager::hooks::{self, ExecGuard, Pinned};
use uzswap_pager::sys::{self, NextSym, SigBlock};
use uzswap_pager::{signals, warm_thread};

/// The C string of a libc symbol's name, from the wrapper's identifier (checked when compiled:
/// the wrappers' `NextSym`s are made from it).
macro_rules! sym_name {
    ($name:ident) => {
        match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("a symbol name holds no NUL"),
        }
    };
}

/// `dladdr1`'s request for the symbol table entry (`<dlfcn.h>`).
const RTLD_DL_SYMENT: c_int = 1;

extern "C" {
    fn dladdr1(
        addr: *const c_void,
        info: *mut libc::Dl_info,
        extra: *mut *mut c_void,
        flags: c_int,
    ) -> c_int;
    fn __libc_malloc(n: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, m: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    fn __libc_memalign(a: usize, n: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn mi_malloc(n: usize) -> *mut c_void;
    fn mi_calloc(n: usize, m: usize) -> *mut c_void;
    fn mi_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    fn mi_malloc_aligned(n: usize, a: usize) -> *mut c_void;
    fn mi_malloc_aligned_at(n: usize, a: usize, offset: usize) -> *mut c_void;
    fn mi_free(p: *mut c_void);
    fn mi_usable_size(p: *const c_void) -> usize;
    fn mi_option_set(o: c_int, v: libc::c_long);
    fn mi_process_init();
    fn mi_manage_os_memory_ex(
        start: *mut c_void,
        size: usize,
        committed: bool,
        large: bool,
        zero: bool,
        numa: c_int,
        exclusive: bool,
        id: *mut *mut c_void,
    ) -> bool;
    static mut environ: *const *const c_char;
}

// ---------------------------------------------------------------- this library's allocator

/// The pager's own allocations: glibc's malloc, never managed.
struct LibcAlloc;

// SAFETY: glibc's allocator returns memory of at least the requested size and alignment
// (memalign for alignments above 16), and frees only what it returned.
unsafe impl std::alloc::GlobalAlloc for LibcAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        // SAFETY: plain glibc calls.
        unsafe {
            if l.align() <= 16 {
                __libc_malloc(l.size()).cast()
            } else {
                __libc_memalign(l.align(), l.size()).cast()
            }
        }
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        // calloc hands out fresh mappings for large blocks without touching them (the swap
        // file's slot table is 8 bytes per slot, mostly never used).
        // SAFETY: plain glibc calls.
        unsafe {
            if l.align() <= 16 {
                __libc_calloc(1, l.size()).cast()
            } else {
                let p = __libc_memalign(l.align(), l.size()).cast::<u8>();
                if !p.is_null() {
                    std::ptr::write_bytes(p, 0, l.size());
                }
                p
            }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, _l: std::alloc::Layout) {
        // SAFETY: p came from alloc/realloc above.
        unsafe { __libc_free(p.cast()) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        // SAFETY: as above; over-aligned blocks are moved by hand.
        unsafe {
            if l.align() <= 16 {
                return __libc_realloc(p.cast(), n).cast();
            }
            let q = __libc_memalign(l.align(), n).cast::<u8>();
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(n));
                __libc_free(p.cast());
            }
            q
        }
    }
}

#[global_allocator]
static ALLOC: LibcAlloc = LibcAlloc;

// ---------------------------------------------------------------- the program's malloc

static READY: AtomicBool = AtomicBool::new(false);
static HEAP_LO: AtomicUsize = AtomicUsize::new(0);
static HEAP_HI: AtomicUsize = AtomicUsize::new(0);
/// Executable ranges of libc and ld.so (callers whose allocations stay unmanaged).
static SYS_TEXT: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

#[inline]
fn in_heap(p: *mut c_void) -> bool {
    (p as usize).wrapping_sub(HEAP_LO.load(Relaxed)) < HEAP_HI.load(Relaxed) - HEAP_LO.load(Relaxed)
}

#[inline]
fn managed_caller(ra: usize) -> bool {
    if !READY.load(Relaxed) || sys::in_pager() {
        return false;
    }
    for k in (0..SYS_TEXT.len()).step_by(2) {
        let lo = SYS_TEXT[k].load(Relaxed);
        if lo != 0 && ra >= lo && ra < SYS_TEXT[k + 1].load(Relaxed) {
            return false;
        }
    }
    true
}

macro_rules! naked_ra {
    ($name:ident, $impl:ident, $reg:literal, ($($a:ident: $t:ty),*) -> $r:ty) => {
        /// Exported allocator entry: passes the caller's return address on to the dispatcher.
        #[no_mangle]
        #[unsafe(naked)]
        pub extern "C" fn $name($($a: $t),*) -> $r {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {f}", f = sym $impl)
        }
    };
}

naked_ra!(malloc, malloc_ra, "rsi", (n: usize) -> *mut c_void);
naked_ra!(calloc, calloc_ra, "rdx", (n: usize, m: usize) -> *mut c_void);
naked_ra!(realloc, realloc_ra, "rdx", (p: *mut c_void, n: usize) -> *mut c_void);
naked_ra!(memalign, memalign_ra, "rdx", (a: usize, n: usize) -> *mut c_void);
naked_ra!(aligned_alloc, memalign_ra, "rdx", (a: usize, n: usize) -> *mut c_void);
naked_ra!(posix_memalign, posix_memalign_ra, "rcx", (out: *mut *mut c_void, a: usize, n: usize) -> c_int);
naked_ra!(valloc, valloc_ra, "rsi", (n: usize) -> *mut c_void);
naked_ra!(pvalloc, pvalloc_ra, "rsi", (n: usize) -> *mut c_void);

extern "C" fn malloc_ra(n: usize, ra: usize) -> *mut c_void {
    // SAFETY: allocator calls with the caller's size.
    unsafe {
        if managed_caller(ra) {
            grown(n, || mi_malloc(n))
        } else {
            __libc_malloc(n)
        }
    }
}

extern "C" fn calloc_ra(n: usize, m: usize, ra: usize) -> *mut c_void {
    // SAFETY: as above.
    unsafe {
        if managed_caller(ra) {
            grown(n.saturating_mul(m), || mi_calloc(n, m))
        } else {
            __libc_calloc(n, m)
        }
    }
}

extern "C" fn realloc_ra(p: *mut c_void, n: usize, ra: usize) -> *mut c_void {
    if p.is_null() {
        return malloc_ra(n, ra);
    }
    // SAFETY: p belongs to the allocator its address says.
    unsafe {
        if in_heap(p) {
            if let Some(q) = realloc_moving(p, n) {
                return q;
            }
            grown(n, || mi_realloc(p, n))
        } else {
            __libc_realloc(p, n)
        }
    }
}

/// Below this a block's growth is copied (mimalloc's own realloc): the pages to move are too
/// few to pay for the system calls.
const MOVE_REALLOC_MIN: usize = 256 << 10;

/// Grows a large heap block by moving its whole pages into the new block
/// (`Pager::move_chunk`) instead of copying them, as glibc's realloc of an mmapped chunk
/// moves them with mremap: the old block's pages then never sit charged beside the new
/// block's, and evicted ones are not read back to be copied. Python's lists, for one, grow
/// this way: a list of a million strings peaked 10 MiB above glibc's run (docs/pager.md "The
/// heap's footprint"). `None`: not a case for it (mimalloc's realloc then does the usual).
///
/// # Safety
/// `p` is a live block of the managed heap.
unsafe fn realloc_moving(p: *mut c_void, n: usize) -> Option<*mut c_void> {
    use uzswap_pager::pager::MOVE_CHUNK_PAGES;
    use uzswap_pager::region::PAGE;
    // SAFETY: p is a live mimalloc block (the caller's contract).
    let old = unsafe { mi_usable_size(p) };
    if n <= old || old < MOVE_REALLOC_MIN || sys::in_pager() {
        return None;
    }
    let pager = uzswap_pager::pager()?;
    let off = p as usize % PAGE;
    // The new block at the same offset in its page, so that page k of one is page k of the
    // other.
    // SAFETY: a plain allocation.
    let q = grown(n, || unsafe {
        mi_malloc_aligned_at(n, PAGE, (PAGE - off) % PAGE)
    });
    if q.is_null() || q as usize % PAGE != off {
        if !q.is_null() {
            // SAFETY: the block just allocated.
            unsafe { mi_free(q) };
        }
        return None;
    }
    let (src, dst) = (p as *const u8, q as *mut u8);
    // The first page is copied, never moved: mimalloc's free writes its list link into the
    // old block's first bytes, which would fault a moved-away page back in as zeros.
    let head = (PAGE - off).min(old);
    let pages = (old - head) / PAGE;
    // SAFETY: both blocks hold at least `old` bytes and don't overlap (q is a new block).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut k = 0;
    while k < pages {
        let c = (pages - k).min(MOVE_CHUNK_PAGES);
        let at = head + k * PAGE;
        // SAFETY: pointer arithmetic inside both blocks.
        let (s, d) = unsafe { (src.add(at), dst.add(at)) };
        let done = pager.move_chunk(s as usize, d as usize, c);
        for j in 0..c {
            if done & (1 << j) == 0 {
                // SAFETY: page j of this chunk lies inside both blocks.
                unsafe { std::ptr::copy_nonoverlapping(s.add(j * PAGE), d.add(j * PAGE), PAGE) };
            }
        }
        k += c;
    }
    let tail = head + pages * PAGE;
    // SAFETY: the rest of the old block, inside both.
    unsafe { std::ptr::copy_nonoverlapping(src.add(tail), dst.add(tail), old - tail) };
    // SAFETY: p is the caller's live block, now copied.
    unsafe { mi_free(p) };
    Some(q)
}

extern "C" fn memalign_ra(a: usize, n: usize, ra: usize) -> *mut c_void {
    // SAFETY: as above.
    unsafe {
        if managed_caller(ra) {
            grown(n, || mi_malloc_aligned(n, a.max(8)))
        } else {
            __libc_memalign(a, n)
        }
    }
}

extern "C" fn posix_memalign_ra(out: *mut *mut c_void, a: usize, n: usize, ra: usize) -> c_int {
    if a % std::mem::size_of::<usize>() != 0 || !a.is_power_of_two() {
        return libc::EINVAL;
    }
    let p = memalign_ra(a, n, ra);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's out-pointer.
    unsafe { *out = p };
    0
}

extern "C" fn valloc_ra(n: usize, ra: usize) -> *mut c_void {
    memalign_ra(4096, n, ra)
}

extern "C" fn pvalloc_ra(n: usize, ra: usize) -> *mut c_void {
    memalign_ra(4096, n.div_ceil(4096).max(1) * 4096, ra)
}

/// # Safety
/// As `free(3)`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let _e = sys::ErrnoGuard::new();
    // SAFETY: p belongs to the allocator its address says.
    unsafe {
        if in_heap(p) {
            mi_free(p)
        } else {
            __libc_free(p)
        }
    }
}

/// # Safety
/// As `cfree`.
#[no_mangle]
pub unsafe extern "C" fn cfree(p: *mut c_void) {
    // SAFETY: forwarded.
    unsafe { free(p) }
}

/// # Safety
/// As `malloc_usable_size(3)`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    // SAFETY: p belongs to the allocator its address says.
    unsafe {
        if in_heap(p) {
            mi_usable_size(p)
        } else {
            malloc_usable_size_libc(p)
        }
    }
}

/// glibc's own `malloc_usable_size` (found by dlsym: this library's symbol hides it).
fn malloc_usable_size_libc(p: *mut c_void) -> usize {
    static S: NextSym = NextSym::new(c"malloc_usable_size");
    let f = S.get();
    if f.is_null() {
        return 0;
    }
    // SAFETY: libc's malloc_usable_size.
    unsafe { std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_void) -> usize>(f)(p) }
}

// ---------------------------------------------------------------- constructor / destructor

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = uzswap_init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = uzswap_fini;

static THREAD_KEY: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Finds a program whose executable defines `malloc` itself (an allocator linked in: rustc
/// links jemalloc so), which can't be paged: refused as the program `uzswap run` starts, run
/// unpaged when the tree starts it (`uzswap_init`). The executable comes first in the symbol
/// lookup, so the dynamic linker, libc and Rust's `System` allocator inside this library would
/// all allocate from it, in memory the program mapped and the pager manages: the fault
/// handler's thread-local accesses read the thread's TLS vector there, and a pager allocation
/// touches the allocator's state, both with SIGBUS blocked, so an evicted page of either killed
/// the process (rustc under `--memory-max 19M` died of SIGBUS in five of six cache
/// configurations, 2026-11-28).
fn check_own_allocator() -> Result<(), String> {
    // SAFETY: dlsym and dladdr with NUL-terminated names and valid out-structs.
    unsafe {
        let first = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        if first.is_null() {
            return Ok(());
        }
        let mut found: libc::Dl_info = std::mem::zeroed();
        let mut here: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(first, &mut found) == 0
            || libc::dladdr(check_own_allocator as *const c_void, &mut here) == 0
            || found.dli_fbase == here.dli_fbase
        {
            return Ok(());
        }
        // A program that only takes malloc's address has a canonical PLT entry for it, which
        // dlsym returns, under an undefined symbol: not an allocator of its own.
        let mut sym: *const libc::Elf64_Sym = std::ptr::null();
        let mut info: libc::Dl_info = std::mem::zeroed();
        if dladdr1(first, &mut info, (&raw mut sym).cast(), RTLD_DL_SYMENT) != 0
            && !sym.is_null()
            && (*sym).st_shndx == 0
        {
            return Ok(());
        }
        let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
        let by = if found.dli_fname.is_null() {
            String::from("?")
        } else {
            std::ffi::CStr::from_ptr(found.dli_fname)
                .to_string_lossy()
                .into_owned()
        };
        Err(format!(
            "{} links its own malloc (from {by}: an allocator such as jemalloc in the \
             executable): the dynamic linker and libc would allocate from it, in memory the \
             pager manages and its fault path reads, so its memory can't be managed",
            exe.display()
        ))
    }
}

extern "C" fn uzswap_init() {
    let _b = SigBlock::new();
    let strict = std::env::var_os("UZSWAP_STRICT").is_some();
    let refused = match check_own_allocator() {
        // Started by a paged process of the tree (a compiler run by a build tool): it runs
        // unpaged, counted and reported, as a statically linked program would. The program
        // `uzswap run` started is refused instead, before its code runs.
        Err(_) if strict && uzswap_pager::join_unpaged() => return,
        Err(e) => Some(e),
        Ok(()) => uzswap_pager::init().err(),
    };
    if let Some(e) = refused {
        sys::raw_stderr(format!("uzswap: cannot manage this process: {e}\n").as_bytes());
        if strict {
            // SAFETY: ending the process before the program runs.
            unsafe { libc::_exit(125) };
        }
        return;
    }
    find_sys_text();
    // SAFETY: plain calls; the key destructor frees a thread's alternate stack.
    unsafe {
        let mut key: libc::pthread_key_t = 0;
        if libc::pthread_key_create(&mut key, Some(thread_gone)) == 0 {
            THREAD_KEY.store(key as usize, Relaxed);
        }
        libc::pthread_atfork(
            Some(at_fork_prepare),
            Some(at_fork_parent),
            Some(at_fork_child),
        );
    }
    drop(_b);
    signals::unblock_sigbus();
    setup_heap();
}

/// Reserves the program's heap arena (managed) and hands it to mimalloc.
fn setup_heap() {
    let size: usize = std::env::var("UZSWAP_HEAP_RESERVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| reserve_within_address_limit(16 << 30));
    // The reservation is plain memory while mimalloc sets its arenas up, and managed only
    // after: mimalloc's meta-data at the start of each arena (some 80 bitmap pages touched)
    // then faults in as ordinary memory instead of taking the pager's fault path, which filled
    // 16 pages around each (2.5 MiB and 42 signals per process, most of a short-lived
    // program's start-up under `uzswap run`). Those pages stay outside the budget, part of the
    // fixed overhead (docs/pager.md).
    // SAFETY: a fresh private anonymous mapping that nothing else knows of.
    let base = match unsafe {
        sys::raw_mmap(
            0,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    } {
        Ok(a) => a,
        Err(_) => {
            sys::raw_stderr(b"uzswap: cannot reserve the heap arena; malloc stays unmanaged\n");
            uzswap_pager::hooks::count_heap_unmanaged();
            return;
        }
    };
    // Base pages only, as managed memory has them (a huge page would bypass the pager).
    // SAFETY: advice on the mapping just made.
    let _ = unsafe { sys::raw_madvise(base, size, libc::MADV_NOHUGEPAGE) };
    // SAFETY: mimalloc takes the range as an arena it owns from now on (committed, zeroed).
    unsafe {
        mi_option_set(17, 1); // mi_option_disallow_os_alloc: heap memory only from the arena

        // mi_option_allow_thp stays on. Off, mimalloc calls `prctl(PR_SET_THP_DISABLE)`: no
        // huge page anywhere in the process or in what it execs, so the cache's pool lost its
        // 2 MiB chunks (every chunk faulted in 4 KiB at a time, every object read through
        // 4 KiB TLB entries) and the program's unmanaged memory its usual THP. Managed memory
        // needs no such switch: the arena is NOHUGEPAGE (above), so is every range the pager
        // manages, and the program's own MADV_HUGEPAGE on them is refused (`hooks.rs`).

        // mi_option_arena_max_object_size (KiB, 2 GiB by default): above it mimalloc takes a
        // block from the OS, which disallow_os_alloc forbids, so `malloc(2 GiB)` was NULL.
        mi_option_set(45, (MAX_ARENA >> 10) as libc::c_long);
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // mi_option_purge_delay: mimalloc v3 keeps freed memory 1 s before purging it,
            // where glibc's free unmaps or trims at once. Under a budget that memory is charged
            // and pushes live pages out (Python with four threads peaked at 110 MiB charged
            // against 108 with 100 ms). Shorter delays purge memory a program reuses at once:
            // every reuse is then a zero-fill fault, and a loop of growing buffers ran twice as
            // long with 10 ms (docs/pager.md "The heap's footprint").
            mi_option_set(15, 100);
        }
        // mimalloc's own maps made at its start (its page map, reserved large and written as
        // the heap spreads) are made here as the pager's, so they stay plain memory, as its
        // arenas' meta-data does (above). Made by its constructor after this one, they were
        // managed: each first touch of the page map took the fault path (a signal and a
        // 16-page fill). They are part of the fixed overhead.
        {
            let _own = sys::InPager::enter();
            let _env = HiddenEnvironment::unless_mimalloc_options();
            mi_process_init();
        }
        // The first arena only; the rest of the reservation becomes arenas as the heap needs
        // them (`grow_heap`).
        let len = FIRST_ARENA.min(size);
        if len < MIN_ARENA || !add_arena(base, len) {
            sys::raw_stderr(b"uzswap: mimalloc refused the arena; malloc stays unmanaged\n");
            uzswap_pager::hooks::count_heap_unmanaged();
            return;
        }
        HEAP_ARENAS_END.store(base + len, Relaxed);
    }
    if let Some(p) = uzswap_pager::pager() {
        if !p.manage(base, size) {
            sys::raw_stderr(b"uzswap: cannot register the heap arena; its memory is not paged\n");
        }
    }
    HEAP_LO.store(base, Relaxed);
    HEAP_HI.store(base + size, Relaxed);
    READY.store(true, Relaxed);
}

/// Hides the environment from mimalloc's process start (`mi_process_init`) while it reads its
/// options, when none of them is set (no variable starts with `MIMALLOC_`, in any case).
/// mimalloc looks each of its ~45 options up by walking `environ` with a case-insensitive
/// compare per variable: about 40 µs of every process's start under `uzswap run` here (2.5 %
/// of a loop of `/bin/true`s). The preload sets the options it needs itself; with none in the
/// environment the walk finds nothing, so hiding it changes no option. Restored on drop, in
/// the constructor, before the program runs (the pager's reclaim thread, already started,
/// reads no variable: the pager reads them all at its start).
struct HiddenEnvironment(Option<*const *const c_char>);

impl HiddenEnvironment {
    /// # Safety
    /// Only in the library's constructor, before the program runs (no thread of it exists yet).
    unsafe fn unless_mimalloc_options() -> HiddenEnvironment {
        static EMPTY: [usize; 1] = [0];
        // SAFETY: the process's environment array, NULL-terminated, not changing meanwhile
        // (nothing of the program runs yet, per the caller; the pager's threads never look).
        let env = unsafe { environ };
        if env.is_null() {
            return HiddenEnvironment(None);
        }
        let mut k = 0;
        loop {
            // SAFETY: within the NULL-terminated array.
            let v = unsafe { *env.add(k) };
            if v.is_null() {
                break;
            }
            // SAFETY: each entry is a C string.
            let name = unsafe { std::ffi::CStr::from_ptr(v) }.to_bytes();
            if name.len() >= 9 && name[..9].eq_ignore_ascii_case(b"MIMALLOC_") {
                return HiddenEnvironment(None);
            }
            k += 1;
        }
        // SAFETY: an empty NULL-terminated array in static memory, for the duration of the
        // guard (per the caller, nobody else reads `environ` meanwhile).
        unsafe { environ = EMPTY.as_ptr().cast() };
        HiddenEnvironment(Some(env))
    }
}

impl Drop for HiddenEnvironment {
    fn drop(&mut self) {
        if let Some(env) = self.0 {
            // SAFETY: puts back the array taken in `unless_mimalloc_options`.
            unsafe { environ = env };
        }
    }
}

/// The first arena: small, because mimalloc writes a header page for each of its per-arena
/// bitmaps (about 80) when it takes an arena, and every process of a `uzswap run` tree sets
/// its heap up. Two arenas of 8 GiB made up front cost 160 page faults and 0.6-0.7 ms of each
/// process's start (a shell loop of 300 `/bin/true`: 1.25-1.32 s against 0.98-1.12 s with a
/// 64 MiB reservation).
const FIRST_ARENA: usize = 64 << 20;
/// mimalloc's smallest arena is 32 MiB (`MI_ARENA_MIN_SIZE`); below 64 MiB left, stop.
const MIN_ARENA: usize = 64 << 20;
/// mimalloc keeps an arena's meta-data inside it and limits that to 512 slices, so an arena
/// of 16 GiB is too large.
const MAX_ARENA: usize = 8 << 30;

/// The end of the reservation handed to mimalloc as arenas so far.
static HEAP_ARENAS_END: AtomicUsize = AtomicUsize::new(0);
/// Bumped each time an arena is added: an allocation that failed before the bump retries.
static HEAP_GEN: AtomicUsize = AtomicUsize::new(0);
/// Held while an arena is being added (a plain flag: the new arena's first pages are managed
/// memory, so the SIGBUS fault path must stay open while mimalloc writes them).
static HEAP_GROWING: AtomicBool = AtomicBool::new(false);

/// Hands `[start, start+len)` of the reservation to mimalloc as an arena (committed, zero,
/// no large pages, any NUMA node, shared by every heap). False if mimalloc refused it.
fn add_arena(start: usize, len: usize) -> bool {
    let mut id: *mut c_void = std::ptr::null_mut();
    // SAFETY: a stretch of the heap reservation no one else uses, mimalloc's from now on.
    unsafe {
        mi_manage_os_memory_ex(
            start as *mut c_void,
            len,
            true,
            false,
            true,
            -1,
            false,
            &mut id,
        )
    }
}

/// Runs a mimalloc allocation; if it fails because the arenas are full, adds the next arena
/// and tries again, until the reservation is used up. Only requests that could fit in an
/// arena grow the heap (a program probing with an absurd size gets NULL at once).
#[inline]
fn grown<T>(n: usize, f: impl Fn() -> *mut T) -> *mut T {
    let gen = HEAP_GEN.load(Acquire);
    let p = f();
    if !p.is_null() || n >= MAX_ARENA {
        return p;
    }
    grow_and_retry(gen, n, f)
}

#[cold]
#[inline(never)]
fn grow_and_retry<T>(mut gen: usize, n: usize, f: impl Fn() -> *mut T) -> *mut T {
    let e = sys::errno();
    loop {
        if !grow_heap(gen, n) {
            // Said once: a program's out-of-memory error under `uzswap run` then has a cause.
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Relaxed) {
                sys::raw_stderr(
                    format!(
                        "uzswap: the managed heap's reservation ({} MiB) is used up; an \
                         allocation fails\n",
                        (HEAP_HI.load(Relaxed) - HEAP_LO.load(Relaxed)) >> 20
                    )
                    .as_bytes(),
                );
            }
            sys::set_errno(libc::ENOMEM);
            return std::ptr::null_mut();
        }
        gen = HEAP_GEN.load(Acquire);
        let p = f();
        if !p.is_null() {
            sys::set_errno(e);
            return p;
        }
    }
}

/// Adds the next arena unless another thread added one since `gen`: as large as all before
/// it (so a few arenas cover the reservation), at most `MAX_ARENA`, and large enough for the
/// `n` bytes asked for where the reservation has room (under an address-space limit the
/// reservation is small: 100 MiB asked of a 320 MiB one failed with 64 MiB arenas). False
/// when the reservation is used up.
fn grow_heap(gen: usize, n: usize) -> bool {
    loop {
        if HEAP_GEN.load(Acquire) != gen {
            return true;
        }
        if HEAP_GROWING
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
        {
            break;
        }
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
    }
    let grew = HEAP_GEN.load(Acquire) != gen || {
        let (lo, hi, end) = (
            HEAP_LO.load(Relaxed),
            HEAP_HI.load(Relaxed),
            HEAP_ARENAS_END.load(Relaxed),
        );
        // mimalloc's meta-data and alignment inside the arena: 64 MiB of slack is ample.
        let fit = n.saturating_add(2 * MIN_ARENA - 1) / MIN_ARENA * MIN_ARENA;
        let len = (end - lo)
            .clamp(MIN_ARENA, MAX_ARENA)
            .max(fit.min(MAX_ARENA))
            .min(hi - end);
        // The next stretch of our reservation, never handed out: zero (never filled, or filled
        // with zeros by the fault path).
        let ok = len >= MIN_ARENA && add_arena(end, len);
        if ok {
            HEAP_ARENAS_END.store(end + len, Relaxed);
            HEAP_GEN.fetch_add(1, Release);
        }
        ok
    };
    HEAP_GROWING.store(false, Release);
    grew
}

/// The heap reservation's size: `default`, or under an address-space limit (`ulimit -v`,
/// RLIMIT_AS, which counts the reservation although it is never committed) half the room left
/// below it, so that the program's own mappings keep the other half. Before, the 16 GiB
/// reservation failed under such a limit and malloc stayed unmanaged (outside the budget).
fn reserve_within_address_limit(default: usize) -> usize {
    address_room(0).map_or(default, |room| default.min(room))
}

/// Half the room left under RLIMIT_AS (all mappings) and RLIMIT_DATA (private writable ones,
/// which the reservation is too), counting `ours` bytes of what is mapped as free, in 2 MiB
/// pieces; `None` without either limit.
fn address_room(ours: usize) -> Option<usize> {
    sys::address_room(ours).map(|room| room & !((2 << 20) - 1))
}

/// The program set its address-space or data limit (`ulimit -v` or `-d` in a shell,
/// `setrlimit(RLIMIT_AS)`, `RLIMIT_DATA`):
/// the heap reservation's tail that no arena has taken yet is given back down to half the room
/// the new limit leaves, as at a start under that limit. A shell whose 16 GiB reservation was
/// made before its `ulimit -v 2000000` had every later mapping refused: its pager could not
/// make its cache ("nothing is paged out") and the shell could map nothing more.
pub(crate) fn fit_heap_to_address_limit() {
    if !READY.load(Acquire) {
        return;
    }
    while HEAP_GROWING
        .compare_exchange(false, true, Acquire, Relaxed)
        .is_err()
    {
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
    }
    let (end, hi) = (HEAP_ARENAS_END.load(Relaxed), HEAP_HI.load(Relaxed));
    let unused = hi - end;
    if let Some(room) = address_room(unused) {
        let new_hi = end + room.min(unused);
        // SAFETY: the reservation's tail beyond the arenas: never handed out, nothing in it.
        if new_hi < hi && unsafe { uzswap_pager::hooks::munmap(new_hi, hi - new_hi) } == 0 {
            HEAP_HI.store(new_hi, Relaxed);
        }
    }
    HEAP_GROWING.store(false, Release);
}

/// Records the executable segments of libc and the dynamic loader.
fn find_sys_text() {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _sz: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info struct for each object.
        unsafe {
            let i = &*info;
            if i.dlpi_name.is_null() {
                return 0;
            }
            let name = std::ffi::CStr::from_ptr(i.dlpi_name).to_bytes();
            let is_sys = name.windows(7).any(|w| w == b"libc.so")
                || name.windows(9).any(|w| w == b"ld-linux-");
            if !is_sys {
                return 0;
            }
            let n = &mut *(data as *mut usize);
            for k in 0..i.dlpi_phnum as usize {
                let ph = &*i.dlpi_phdr.add(k);
                if ph.p_type == libc::PT_LOAD
                    && ph.p_flags & libc::PF_X != 0
                    && *n + 1 < SYS_TEXT.len()
                {
                    let lo = i.dlpi_addr as usize + ph.p_vaddr as usize;
                    SYS_TEXT[*n].store(lo, Relaxed);
                    SYS_TEXT[*n + 1].store(lo + ph.p_memsz as usize, Relaxed);
                    *n += 2;
                }
            }
        }
        0
    }
    let mut n = 0usize;
    // SAFETY: the callback only reads the loader's structs.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut n as *mut usize as *mut c_void) };
}

extern "C" fn uzswap_fini() {
    hooks::at_exit();
}

extern "C" fn at_fork_prepare() {
    hooks::fork_prepare();
}
extern "C" fn at_fork_parent() {
    hooks::fork_parent();
}
extern "C" fn at_fork_child() {
    // A thread of the parent may have been adding an arena: it is not in the child.
    HEAP_GROWING.store(false, Relaxed);
    streams::after_fork_child();
    aio::after_fork_child();
    hooks::fork_child();
}

extern "C" fn thread_gone(base: *mut c_void) {
    run_pager_dtors();
    signals::free_alt_stack(base as usize);
}

// ---------------------------------------------------------------- processes made without fork

/// The child's side of [`clone`]: the program's function and argument.
struct CloneStart {
    f: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
}

extern "C" fn clone_child_start(p: *mut c_void) -> c_int {
    // SAFETY: the child's copy of the `CloneStart` on the parent's stack in `clone` below (the
    // child has a copy of the whole address space, the parent's stack among it).
    let s = unsafe { &*(p as *const CloneStart) };
    at_fork_child();
    let status = (s.f)(s.arg);
    // glibc ends a clone child whose function returns with the thread's `exit`, which ended
    // the process when it had one thread; the pager's threads (reclaim, the cache's shrinker)
    // kept it alive, and its parent waited forever.
    // SAFETY: ending this process, as glibc would, with the function's status.
    unsafe { libc::_exit(status) }
}

/// `clone(fn, stack, flags, arg, parent_tid, tls, child_tid)`: without `CLONE_VM` the child is
/// a process with a copy of this address space, as a fork child is, but glibc runs no atfork
/// handler for it, where the pager hands a child its memory: the child read its copies of
/// evicted pages as zeros (4.6 million of 6.3 million words wrong). Such a clone gets the
/// handlers' work around it, the child's part on its new stack before the program's function.
/// Threads and `vfork`-like clones (`CLONE_VM`) share the memory and are passed on. Declared
/// with every argument: on x86-64 a variadic call passes the last one on the stack, which is
/// forwarded unread by the kernel unless the flags ask for it.
///
/// # Safety
/// As `clone(2)`.
#[no_mangle]
pub unsafe extern "C" fn clone(
    f: extern "C" fn(*mut c_void) -> c_int,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    parent_tid: *mut libc::pid_t,
    tls: *mut c_void,
    child_tid: *mut libc::pid_t,
) -> c_int {
    static S: NextSym = NextSym::new(c"clone");
    type Clone = unsafe extern "C" fn(
        extern "C" fn(*mut c_void) -> c_int,
        *mut c_void,
        c_int,
        *mut c_void,
        ...
    ) -> c_int;
    // SAFETY: libc's `clone`, of this type.
    let real = unsafe { std::mem::transmute::<*mut c_void, Clone>(S.get()) };
    if flags & libc::CLONE_VM != 0 || uzswap_pager::pager().is_none() {
        // SAFETY: forwarded.
        return unsafe { real(f, stack, flags, arg, parent_tid, tls, child_tid) };
    }
    let start = CloneStart { f, arg };
    at_fork_prepare();
    let me = (&start as *const CloneStart).cast_mut().cast();
    // SAFETY: forwarded, the child starting in our function with the program's.
    let r = unsafe {
        real(
            clone_child_start,
            stack,
            flags,
            me,
            parent_tid,
            tls,
            child_tid,
        )
    };
    at_fork_parent();
    r
}

/// `_Fork` (glibc 2.34): `fork` without the atfork handlers, for the same reason as [`clone`]
/// given the pager's part of them.
///
/// # Safety
/// As `_Fork(3)`.
#[no_mangle]
pub unsafe extern "C" fn _Fork() -> libc::pid_t {
    static S: NextSym = NextSym::new(c"_Fork");
    // SAFETY: libc's `_Fork`, of this type.
    let real =
        unsafe { std::mem::transmute::<*mut c_void, extern "C" fn() -> libc::pid_t>(S.get()) };
    with_fork_handlers(|| real().into()) as libc::pid_t
}

/// A fork made past glibc's `fork` (`_Fork`, the system calls through `syscall`), with the
/// atfork handlers' work around it: `call` returns 0 in the child, else the child's pid or -1.
fn with_fork_handlers(call: impl FnOnce() -> libc::c_long) -> libc::c_long {
    at_fork_prepare();
    let r = call();
    if r == 0 {
        at_fork_child();
    } else {
        at_fork_parent();
    }
    r
}

// ---------------------------------------------------------------- threads

struct Start {
    f: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
}

extern "C" fn thread_start(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box made by pthread_create below, consumed once here.
    let s = unsafe { Box::from_raw(p as *mut Start) };
    {
        let _b = SigBlock::new();
        let alt = signals::ensure_alt_stack();
        let key = THREAD_KEY.load(Relaxed);
        if key != usize::MAX {
            // SAFETY: the key exists; its destructor frees the stack at thread exit.
            unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, alt as *const c_void) };
        }
        warm_thread();
    }
    let (f, arg) = (s.f, s.arg);
    {
        let _b = SigBlock::new();
        drop(s);
    }
    f(arg)
}

extern "C" fn own_thread_start(p: *mut c_void) -> *mut c_void {
    std::mem::forget(sys::InPager::enter());
    // SAFETY: the Box made by pthread_create, consumed once here.
    let s = unsafe { Box::from_raw(p as *mut Start) };
    let (f, arg) = (s.f, s.arg);
    drop(s);
    f(arg)
}

type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    extern "C" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> c_int;

/// Every program thread gets an unmanaged alternate signal stack for the fault path.
///
/// # Safety
/// As `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    t: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    f: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    static S: NextSym = NextSym::new(c"pthread_create");
    // SAFETY: libc's pthread_create.
    let real: PthreadCreate = unsafe { std::mem::transmute(S.get()) };
    if sys::in_pager() {
        // A thread of the pager's own (the cache's shrink worker): it runs pager code all its
        // life, with every signal blocked (inherited from the creating pager code).
        let boxed = Box::into_raw(Box::new(Start { f, arg }));
        // SAFETY: forwarded, with our trampoline owning the box.
        let r = unsafe { real(t, attr, own_thread_start, boxed.cast()) };
        if r != 0 {
            // SAFETY: the thread was not created; the box is still ours.
            drop(unsafe { Box::from_raw(boxed) });
        }
        return r;
    }
    if uzswap_pager::pager().is_none() {
        // SAFETY: forwarded.
        return unsafe { real(t, attr, f, arg) };
    }
    let boxed = {
        let _b = SigBlock::new();
        Box::into_raw(Box::new(Start { f, arg }))
    };
    // SAFETY: forwarded, with our trampoline owning the box.
    let r = unsafe { real(t, attr, thread_start, boxed.cast()) };
    if r != 0 {
        let _b = SigBlock::new();
        // SAFETY: the thread was not created; the box is still ours.
        drop(unsafe { Box::from_raw(boxed) });
    }
    r
}

// ---------------------------------------------------------------- memory mappings

/// # Safety
/// As `mmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    a: *mut c_void,
    l: usize,
    pr: c_int,
    fl: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { hooks::mmap(a as usize, l, pr, fl, fd, off) as *mut c_void }
}

/// # Safety
/// As `mmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    a: *mut c_void,
    l: usize,
    pr: c_int,
    fl: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { hooks::mmap(a as usize, l, pr, fl, fd, off) as *mut c_void }
}

/// # Safety
/// As `munmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn munmap(a: *mut c_void, l: usize) -> c_int {
    // SAFETY: forwarded.
    unsafe { hooks::munmap(a as usize, l) }
}

/// # Safety
/// As `madvise(2)`.
#[no_mangle]
pub unsafe extern "C" fn madvise(a: *mut c_void, l: usize, adv: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { hooks::madvise(a as usize, l, adv) }
}

/// # Safety
/// As `posix_madvise(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_madvise(a: *mut c_void, l: usize, adv: c_int) -> c_int {
    // POSIX_MADV_DONTNEED is a no-op in glibc; only the other hints reach the kernel.
    if adv == libc::POSIX_MADV_DONTNEED {
        return 0;
    }
    // SAFETY: forwarded.
    match unsafe { hooks::madvise(a as usize, l, adv) } {
        0 => 0,
        _ => sys::errno(),
    }
}

/// # Safety
/// As `mprotect(2)`.
#[no_mangle]
pub unsafe extern "C" fn mprotect(a: *mut c_void, l: usize, prot: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { hooks::mprotect(a as usize, l, prot, None) }
}

/// # Safety
/// As `pkey_mprotect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pkey_mprotect(
    a: *mut c_void,
    l: usize,
    prot: c_int,
    pkey: c_int,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { hooks::mprotect(a as usize, l, prot, Some(pkey)) }
}

/// # Safety
/// As `mremap(2)` (the fifth argument is read only with MREMAP_FIXED).
#[no_mangle]
pub unsafe extern "C" fn mremap(
    a: *mut c_void,
    ol: usize,
    nl: usize,
    fl: c_int,
    na: *mut c_void,
) -> *mut c_void {
    let na = if fl & libc::MREMAP_FIXED != 0 {
        na as usize
    } else {
        0
    };
    // SAFETY: forwarded.
    unsafe { hooks::mremap(a as usize, ol, nl, fl, na) as *mut c_void }
}

// ---------------------------------------------------------------- memory locks

/// Pins the managed part of the range, then locks it (`uzswap_pager::mlock`).
///
/// # Safety
/// As `mlock(2)`.
#[no_mangle]
pub unsafe extern "C" fn mlock(a: *const c_void, l: usize) -> c_int {
    uzswap_pager::mlock::mlock(a as usize, l, 0)
}

/// As `mlock`, with `MLOCK_ONFAULT` passed on (managed pages are made resident regardless).
///
/// # Safety
/// As `mlock2(2)`.
#[no_mangle]
pub unsafe extern "C" fn mlock2(a: *const c_void, l: usize, flags: std::ffi::c_uint) -> c_int {
    uzswap_pager::mlock::mlock(a as usize, l, flags)
}

/// # Safety
/// As `munlock(2)`.
#[no_mangle]
pub unsafe extern "C" fn munlock(a: *const c_void, l: usize) -> c_int {
    uzswap_pager::mlock::munlock(a as usize, l)
}

/// Emulated: `MCL_CURRENT` given to the kernel would populate the heap reservation and the
/// pager's own mappings.
///
/// # Safety
/// As `mlockall(2)`.
#[no_mangle]
pub unsafe extern "C" fn mlockall(flags: c_int) -> c_int {
    uzswap_pager::mlock::mlockall(flags)
}

/// # Safety
/// As `munlockall(2)`.
#[no_mangle]
pub unsafe extern "C" fn munlockall() -> c_int {
    uzswap_pager::mlock::munlockall()
}

// ---------------------------------------------------------------- signals

/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if sig == libc::SIGBUS && signals::installed() {
        // SAFETY: forwarded.
        return unsafe { signals::user_sigaction(act, old) };
    }
    if act.is_null() || !signals::installed() {
        // SAFETY: forwarded.
        return unsafe { signals::real_sigaction(sig, act, old) };
    }
    // SAFETY: a copy of the caller's action with SIGBUS unblocked in its mask.
    unsafe {
        let mut a = *act;
        signals::strip_sigbus(&mut a.sa_mask);
        signals::real_sigaction(sig, &a, old)
    }
}

/// # Safety
/// As `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    if sig == libc::SIGBUS && signals::installed() {
        return signals::user_signal(h);
    }
    static S: NextSym = NextSym::new(c"signal");
    // SAFETY: libc's signal.
    unsafe {
        let f: extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t =
            std::mem::transmute(S.get());
        f(sig, h)
    }
}

/// The other entry points libc offers for installing a handler. glibc's own implementations
/// call its internal `__sigaction`, which the wrapper above never sees, so a program that
/// reaches them (`signal` is `__sysv_signal` under `-std=c99`; zstd's command line installs its
/// crash handlers that way) replaced the pager's SIGBUS handler and died at its first fault.
/// Each is rebuilt here on [`sigaction`] with glibc's flags.
unsafe fn signal_with_flags(sig: c_int, h: libc::sighandler_t, flags: c_int) -> libc::sighandler_t {
    // SAFETY: zeroed sigaction structs are valid; `sigaction` is the wrapper above.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        let mut old: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = h;
        act.sa_flags = flags;
        libc::sigemptyset(&mut act.sa_mask);
        if h == libc::SIG_ERR || sigaction(sig, &act, &mut old) < 0 {
            sys::set_errno(libc::EINVAL);
            return libc::SIG_ERR;
        }
        old.sa_sigaction
    }
}

/// # Safety
/// As glibc's `__sysv_signal`: System V semantics (the handler is reset when it runs, the
/// signal is not blocked while it does).
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: forwarded.
    unsafe { signal_with_flags(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER) }
}

/// # Safety
/// As `sysv_signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: forwarded.
    unsafe { __sysv_signal(sig, h) }
}

/// # Safety
/// As `bsd_signal(3)`: glibc's `signal`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, h: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: forwarded.
    unsafe { signal(sig, h) }
}

/// `SIG_HOLD` of `sigset(3)`.
const SIG_HOLD: libc::sighandler_t = 2;

/// # Safety
/// As `sigset(3)`: `SIG_HOLD` blocks the signal; any other disposition is installed (flags 0)
/// and unblocks it. Returns `SIG_HOLD` if the signal was blocked before, else the previous
/// disposition.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, disp: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: zeroed sets and actions are valid; the calls are the wrappers in this file.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut was: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigaddset(&mut set, sig) < 0 {
            return libc::SIG_ERR;
        }
        let prev = if disp == SIG_HOLD {
            let mut old: libc::sigaction = std::mem::zeroed();
            if sigaction(sig, std::ptr::null(), &mut old) < 0
                || sigprocmask(libc::SIG_BLOCK, &set, &mut was) < 0
            {
                return libc::SIG_ERR;
            }
            old.sa_sigaction
        } else {
            let prev = signal_with_flags(sig, disp, 0);
            if prev == libc::SIG_ERR || sigprocmask(libc::SIG_UNBLOCK, &set, &mut was) < 0 {
                return libc::SIG_ERR;
            }
            prev
        };
        if libc::sigismember(&was, sig) == 1 {
            SIG_HOLD
        } else {
            prev
        }
    }
}

/// # Safety
/// As `sigaltstack(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    // Signals stay unblocked: `ss` and `old` may be managed memory, which may fault.
    // SAFETY: forwarded.
    unsafe { signals::user_sigaltstack(ss, old) }
}

/// The kernel's signal mask size (not glibc's 128-byte `sigset_t`).
const SIGMASK: usize = 8;

type MaskFn = extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

/// `sigprocmask` and `pthread_sigmask`: SIGBUS stripped from a set that blocks; the set is
/// handed on as a copy on this stack and the old mask's buffer, which the kernel writes, is
/// pinned (a paged-out heap `sigset_t` was EFAULT).
///
/// # Safety
/// `set` and `old` null or valid; `f` libc's function.
unsafe fn set_mask(
    f: MaskFn,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let mut pins = Pinned::none();
    pins.add(old.cast(), SIGMASK);
    // SAFETY: valid per the caller.
    let copy = match unsafe { hooks::filter_mask(set) } {
        Some(s) if how != libc::SIG_UNBLOCK => Some(s),
        // SAFETY: as above; read here in user mode (a fault resolves).
        _ => (!set.is_null()).then(|| unsafe { *set }),
    };
    match &copy {
        Some(s) => f(how, s, old),
        None => f(how, set, old),
    }
}

macro_rules! mask_wrap {
    ($name:ident) => {
        /// SIGBUS stripped from the set (see [`set_mask`]).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            how: c_int,
            set: *const libc::sigset_t,
            old: *mut libc::sigset_t,
        ) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            // SAFETY: libc's function of this name, with SIGBUS stripped from the set.
            unsafe {
                set_mask(
                    std::mem::transmute::<*mut c_void, MaskFn>(S.get()),
                    how,
                    set,
                    old,
                )
            }
        }
    };
}

mask_wrap!(sigprocmask);
mask_wrap!(pthread_sigmask);

/// SIGBUS stripped from the mask (a handler that runs during the wait runs with it, and may
/// fault), which is handed on as a copy on this stack: the wait may be long, and the kernel
/// reads the mask itself (a paged-out heap mask was EFAULT).
///
/// # Safety
/// As `sigsuspend(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigsuspend(mask: *const libc::sigset_t) -> c_int {
    static S: NextSym = NextSym::new(c"sigsuspend");
    // SAFETY: libc's sigsuspend; the copy is read from the caller's valid mask.
    unsafe {
        let f: extern "C" fn(*const libc::sigset_t) -> c_int = std::mem::transmute(S.get());
        let copy = match hooks::filter_mask(mask) {
            Some(s) => s,
            None if !mask.is_null() => *mask,
            None => return f(mask),
        };
        f(&copy)
    }
}

/// The set is handed on as a copy on this stack (the wait may be long; glibc's internal
/// `sigtimedwait` has the kernel read it).
///
/// # Safety
/// As `sigwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sigwait(set: *const libc::sigset_t, sig: *mut c_int) -> c_int {
    static S: NextSym = NextSym::new(c"sigwait");
    // SAFETY: libc's sigwait; the copy is read from the caller's valid set.
    unsafe {
        let f: extern "C" fn(*const libc::sigset_t, *mut c_int) -> c_int =
            std::mem::transmute(S.get());
        if set.is_null() {
            return f(set, sig);
        }
        let copy = *set;
        f(&copy, sig)
    }
}

// ---------------------------------------------------------------- system calls with buffers

macro_rules! io_wrap {
    ($name:ident ($($a:ident: $t:ty),*) -> $r:ty; |$pins:ident| $pin:block) => {
        /// Pins its user buffers for the call (see `uzswap_pager::hooks`).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            static S: NextSym = NextSym::new(sym_name!($name));
            let mut $pins = Pinned::none();
            #[allow(unused_unsafe)]
            // SAFETY: the caller's buffers, as the libc function takes them.
            unsafe { $pin }
            // SAFETY: the libc function of the same name and signature.
            unsafe {
                let f: unsafe extern "C" fn($($t),*) -> $r = std::mem::transmute(S.get());
                f($($a),*)
            }
        }
    };
}

io_wrap!(readv(fd: c_int, v: *const libc::iovec, c: c_int) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(writev(fd: c_int, v: *const libc::iovec, c: c_int) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(preadv(fd: c_int, v: *const libc::iovec, c: c_int, o: i64) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(pwritev(fd: c_int, v: *const libc::iovec, c: c_int, o: i64) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(preadv64(fd: c_int, v: *const libc::iovec, c: c_int, o: i64) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(pwritev64(fd: c_int, v: *const libc::iovec, c: c_int, o: i64) -> isize; |p| { p.add_iov(v, c) });
io_wrap!(recv(fd: c_int, b: *mut c_void, n: usize, fl: c_int) -> isize; |p| { p.add(b, n) });
io_wrap!(send(fd: c_int, b: *const c_void, n: usize, fl: c_int) -> isize; |p| { p.add(b, n) });
io_wrap!(recvfrom(fd: c_int, b: *mut c_void, n: usize, fl: c_int, a: *mut libc::sockaddr, al: *mut libc::socklen_t) -> isize;
    |p| { p.add(b, n); p.add(al.cast(), 4); if !al.is_null() { p.add(a.cast(), *al as usize) } });
io_wrap!(sendto(fd: c_int, b: *const c_void, n: usize, fl: c_int, a: *const libc::sockaddr, al: libc::socklen_t) -> isize;
    |p| { p.add(b, n); p.add(a.cast(), al as usize) });
io_wrap!(recvmsg(fd: c_int, m: *mut libc::msghdr, fl: c_int) -> isize; |p| { p.add_msg(m) });
io_wrap!(sendmsg(fd: c_int, m: *const libc::msghdr, fl: c_int) -> isize; |p| { p.add_msg(m) });
io_wrap!(poll(f: *mut libc::pollfd, n: libc::nfds_t, t: c_int) -> c_int;
    |p| { p.add(f.cast(), n as usize * std::mem::size_of::<libc::pollfd>()) });
io_wrap!(epoll_wait(e: c_int, ev: *mut libc::epoll_event, n: c_int, t: c_int) -> c_int;
    |p| { p.add(ev.cast(), n.max(0) as usize * std::mem::size_of::<libc::epoll_event>()) });
io_wrap!(getrandom(b: *mut c_void, n: usize, fl: u32) -> isize; |p| { p.add(b, n) });

// ---------------------------------------------------------------- futex waits

// A blocking wait ends in a futex system call, and the kernel reads the futex word (and the
// timeout) itself: an evicted word is EFAULT in SIGBUS mode, on which glibc aborts ("The
// futex facility returned an unexpected error code"). The word is resident when the caller's
// user-mode check reads it, but another thread may evict it before the system call does. So
// the blocking entry points pin their lock objects and timeout for the call (a page or two per
// sleeping thread; the pages are hot anyway). Waking needs no pin: FUTEX_WAKE of a private
// futex never reads the word. `pthread_mutex_lock` and the rwlock and C11 locks take the
// uncontended path unpinned (a try first, which succeeds or fails exactly as the lock would
// except for "busy"), so only a lock that will sleep pays for the pin.

const COND: usize = std::mem::size_of::<libc::pthread_cond_t>();
const MUTEX: usize = std::mem::size_of::<libc::pthread_mutex_t>();
const RWLOCK: usize = std::mem::size_of::<libc::pthread_rwlock_t>();
const SEM: usize = std::mem::size_of::<libc::sem_t>();
const TIMESPEC: usize = std::mem::size_of::<libc::timespec>();
/// `thrd_busy` of glibc's <threads.h>.
const THRD_BUSY: c_int = 1;

/// Pins `objs` (address, length) for a futex wait and counts the wait if anything was pinned.
fn pin_wait(objs: &[(*const c_void, usize)]) -> Pinned {
    let mut p = Pinned::none();
    add_wait(&mut p, objs);
    p
}

/// [`pin_wait`] into the pins `p` of a wrapper.
fn add_wait(p: &mut Pinned, objs: &[(*const c_void, usize)]) {
    for &(a, l) in objs {
        p.add(a, l);
    }
    if p.any() {
        hooks::count_pinned_wait();
    }
}

/// `io_wrap!` for a blocking wait: pins its futex words and timeout for the call (see "futex
/// waits" above) and counts it.
macro_rules! wait_wrap {
    ($name:ident ($($a:ident: $t:ty),*) -> $r:ty; [$(($pa:expr, $pl:expr)),*]) => {
        io_wrap!($name($($a: $t),*) -> $r; |p| { add_wait(&mut p, &[$(($pa as *const c_void, $pl)),*]) });
    };
}

type Cond = *mut libc::pthread_cond_t;
type Mutex = *mut libc::pthread_mutex_t;
type RwLock = *mut libc::pthread_rwlock_t;
type Ts = *const libc::timespec;

wait_wrap!(pthread_cond_wait(c: Cond, m: Mutex) -> c_int; [(c, COND), (m, MUTEX)]);
wait_wrap!(pthread_cond_timedwait(c: Cond, m: Mutex, t: Ts) -> c_int;
    [(c, COND), (m, MUTEX), (t, TIMESPEC)]);
wait_wrap!(pthread_cond_clockwait(c: Cond, m: Mutex, k: libc::clockid_t, t: Ts) -> c_int;
    [(c, COND), (m, MUTEX), (t, TIMESPEC)]);
wait_wrap!(pthread_mutex_timedlock(m: Mutex, t: Ts) -> c_int; [(m, MUTEX), (t, TIMESPEC)]);
wait_wrap!(pthread_mutex_clocklock(m: Mutex, k: libc::clockid_t, t: Ts) -> c_int;
    [(m, MUTEX), (t, TIMESPEC)]);
wait_wrap!(pthread_rwlock_timedrdlock(l: RwLock, t: Ts) -> c_int; [(l, RWLOCK), (t, TIMESPEC)]);
wait_wrap!(pthread_rwlock_timedwrlock(l: RwLock, t: Ts) -> c_int; [(l, RWLOCK), (t, TIMESPEC)]);
wait_wrap!(pthread_rwlock_clockrdlock(l: RwLock, k: libc::clockid_t, t: Ts) -> c_int;
    [(l, RWLOCK), (t, TIMESPEC)]);
wait_wrap!(pthread_rwlock_clockwrlock(l: RwLock, k: libc::clockid_t, t: Ts) -> c_int;
    [(l, RWLOCK), (t, TIMESPEC)]);
wait_wrap!(pthread_barrier_wait(b: *mut libc::pthread_barrier_t) -> c_int;
    [(b, std::mem::size_of::<libc::pthread_barrier_t>())]);
wait_wrap!(pthread_once(o: *mut libc::pthread_once_t, f: Option<unsafe extern "C" fn()>) -> c_int;
    [(o, std::mem::size_of::<libc::pthread_once_t>())]);
wait_wrap!(sem_wait(s: *mut libc::sem_t) -> c_int; [(s, SEM)]);
wait_wrap!(sem_timedwait(s: *mut libc::sem_t, t: Ts) -> c_int; [(s, SEM), (t, TIMESPEC)]);
wait_wrap!(sem_clockwait(s: *mut libc::sem_t, k: libc::clockid_t, t: Ts) -> c_int;
    [(s, SEM), (t, TIMESPEC)]);
// C11 threads: glibc's cnd_t and mtx_t are its pthread_cond_t and pthread_mutex_t.
wait_wrap!(cnd_wait(c: Cond, m: Mutex) -> c_int; [(c, COND), (m, MUTEX)]);
wait_wrap!(cnd_timedwait(c: Cond, m: Mutex, t: Ts) -> c_int; [(c, COND), (m, MUTEX), (t, TIMESPEC)]);
wait_wrap!(mtx_timedlock(m: Mutex, t: Ts) -> c_int; [(m, MUTEX), (t, TIMESPEC)]);

macro_rules! lock_wrap {
    ($name:ident, $try:ident, $t:ty, $size:expr, $busy:expr) => {
        /// Takes the lock unpinned if it is free; pins it before a wait (see "futex waits").
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(l: $t) -> c_int {
            static S: NextSym = NextSym::new(sym_name!($name));
            static T: NextSym = NextSym::new(sym_name!($try));
            type Lock = unsafe extern "C" fn($t) -> c_int;
            // SAFETY: the libc function of this name and signature.
            let f = unsafe { std::mem::transmute::<*mut c_void, Lock>(S.get()) };
            if hooks::maybe_managed(l as usize, $size) {
                // SAFETY: as above.
                let t = unsafe { std::mem::transmute::<*mut c_void, Lock>(T.get()) };
                // SAFETY: the caller's lock, as the lock function takes it.
                let r = unsafe { t(l) };
                if r != $busy {
                    return r;
                }
                let _pins = pin_wait(&[(l as *const c_void, $size)]);
                // SAFETY: forwarded.
                return unsafe { f(l) };
            }
            // SAFETY: forwarded.
            unsafe { f(l) }
        }
    };
}

lock_wrap!(
    pthread_mutex_lock,
    pthread_mutex_trylock,
    Mutex,
    MUTEX,
    libc::EBUSY
);
lock_wrap!(
    pthread_rwlock_rdlock,
    pthread_rwlock_tryrdlock,
    RwLock,
    RWLOCK,
    libc::EBUSY
);
lock_wrap!(
    pthread_rwlock_wrlock,
    pthread_rwlock_trywrlock,
    RwLock,
    RWLOCK,
    libc::EBUSY
);
lock_wrap!(mtx_lock, mtx_trylock, Mutex, MUTEX, THRD_BUSY);

/// `pthread_mutex_t.__data.__kind` (x86-64 glibc) and its priority-inheritance bit.
const MUTEX_KIND_OFFSET: usize = 16;
const PTHREAD_MUTEX_PRIO_INHERIT_NP: c_int = 32;

/// Unlocking a priority-inheritance mutex with waiters is `FUTEX_UNLOCK_PI`, whose kernel side
/// reads the word: such a mutex stays pinned for the call. Every other kind wakes with
/// `FUTEX_WAKE`, which reads nothing, and goes straight through.
///
/// # Safety
/// As `pthread_mutex_unlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_unlock(m: Mutex) -> c_int {
    static S: NextSym = NextSym::new(c"pthread_mutex_unlock");
    type Unlock = unsafe extern "C" fn(Mutex) -> c_int;
    // SAFETY: libc's function of this name and signature.
    let f = unsafe { std::mem::transmute::<*mut c_void, Unlock>(S.get()) };
    if hooks::maybe_managed(m as usize, MUTEX) {
        // SAFETY: the caller's initialised mutex; the kind is a plain int of its layout (a
        // paged-out page faults in as any user-mode read does).
        let kind = unsafe {
            (m as *const u8)
                .add(MUTEX_KIND_OFFSET)
                .cast::<c_int>()
                .read_volatile()
        };
        if kind & PTHREAD_MUTEX_PRIO_INHERIT_NP != 0 {
            let mut pins = Pinned::none();
            pins.add(m as *const c_void, MUTEX);
            // SAFETY: forwarded.
            return unsafe { f(m) };
        }
    }
    // SAFETY: forwarded.
    unsafe { f(m) }
}

/// `syscall(2)`, for the futex operations whose kernel side reads or writes user memory (the
/// wait operations, the PI and requeue operations, `FUTEX_WAKE_OP`, every operation on a
/// shared futex, and `futex_waitv`) and for `getrandom`: Rust's std and other runtimes call
/// it directly. Declared
/// with six arguments after the number: on x86-64 a variadic call passes them in the same
/// registers and stack slot, and an unused one is forwarded unread by the kernel.
///
/// # Safety
/// As `syscall(2)`.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    nr: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    static S: NextSym = NextSym::new(c"syscall");
    type Syscall = unsafe extern "C" fn(libc::c_long, ...) -> libc::c_long;
    // SAFETY: libc's variadic `syscall`, of this type.
    let real = unsafe { std::mem::transmute::<*mut c_void, Syscall>(S.get()) };
    if nr == libc::SYS_io_uring_setup && hooks::refuse_io_uring() {
        // An io_uring's kernel side reads and writes the program's buffers long after the
        // system call that queued them, where no wrapper can pin them: an evicted (or never
        // filled) buffer page fails with EFAULT (Node with UV_USE_IO_URING=1 failed its first
        // `fs.readFile`). Refused as a kernel without io_uring refuses it; libuv and liburing's
        // users fall back to plain system calls or report the error.
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    }
    // The pager's descriptors, as the `close`, `close_range`, `dup2` and `dup3` wrappers keep
    // them (see `uzswap_pager::fds`).
    let guarded = |fd: libc::c_long| uzswap_pager::fds::guarded(fd as i32);
    if (nr == libc::SYS_close && guarded(a1))
        || ((nr == libc::SYS_dup2 || nr == libc::SYS_dup3) && a1 != a2 && guarded(a2))
    {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EBADF };
        return -1;
    }
    if nr == libc::SYS_close_range {
        if let Some(r) = uzswap_pager::fds::close_range(a1 as u32, a2 as u32, a3 as u32) {
            return r.into();
        }
    }
    // Changes to the memory map go where libc's functions go: made behind the pager's back, a
    // `syscall(SYS_madvise, .., MADV_DONTNEED)` had the program read the evicted pages' old
    // contents where it expects zeros, and a `syscall(SYS_munmap)` left the range's pages
    // charged to the budget for good. (The hooks make their own calls with the `syscall`
    // instruction, never through this function.)
    let (a, n) = (a1 as usize, a2 as usize);
    match nr {
        // SAFETY (each arm): the program's system call, made through the hook with its
        // arguments, as the libc function's wrapper makes it.
        libc::SYS_mmap => {
            // SAFETY: as above.
            let r = unsafe { hooks::mmap(a, n, a3 as c_int, a4 as c_int, a5 as c_int, a6) };
            return r as libc::c_long;
        }
        // SAFETY: as above.
        libc::SYS_munmap => return unsafe { hooks::munmap(a, n) }.into(),
        // SAFETY: as above.
        libc::SYS_madvise => return unsafe { hooks::madvise(a, n, a3 as c_int) }.into(),
        // SAFETY: as above.
        libc::SYS_mprotect => return unsafe { hooks::mprotect(a, n, a3 as c_int, None) }.into(),
        libc::SYS_pkey_mprotect => {
            // SAFETY: as above.
            return unsafe { hooks::mprotect(a, n, a3 as c_int, Some(a4 as c_int)) }.into();
        }
        libc::SYS_mremap => {
            let fixed = a4 as c_int & libc::MREMAP_FIXED != 0;
            let na = if fixed { a5 as usize } else { 0 };
            // SAFETY: as above.
            return unsafe { hooks::mremap(a, n, a3 as usize, a4 as c_int, na) } as libc::c_long;
        }
        _ => {}
    }
    if nr == libc::SYS_rt_sigprocmask && a1 != libc::SIG_UNBLOCK as libc::c_long && a2 != 0 {
        // SIGBUS stays out of the mask, as the `sigprocmask` wrapper keeps it: blocked, the
        // next fault's SIGBUS killed the process (status 135). The kernel's set is the first
        // word of libc's.
        // SAFETY: a zeroed set, its first word the caller's (which the kernel would read).
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            let word = (a2 as usize as *const u64).read_unaligned();
            (&mut set as *mut libc::sigset_t).cast::<u64>().write(word);
            uzswap_pager::signals::strip_sigbus(&mut set);
        }
        // SAFETY: libc's `syscall`, given every argument register, with our copy of the set.
        return unsafe { real(nr, a1, &set as *const libc::sigset_t, a3, a4, a5, a6) };
    }
    if nr == libc::SYS_rt_sigaction && a4 == 8 && signals::installed() {
        // SAFETY: the caller's kernel sigaction pointers, each null or valid, as the kernel
        // reads and writes them.
        return unsafe {
            raw_rt_sigaction(
                a1 as c_int,
                a2 as usize as *const KernelSigaction,
                a3 as usize as *mut KernelSigaction,
            )
        }
        .into();
    }
    if nr == libc::SYS_sigaltstack {
        // As the `sigaltstack` wrapper: recorded, so that the pager's handler keeps a stack
        // of its own (a managed one may be evicted under the frame the kernel writes).
        // SAFETY: the caller's stack_t pointers, each null or valid, as the kernel reads them.
        let r = unsafe {
            signals::user_sigaltstack(a1 as usize as *const libc::stack_t, a2 as usize as *mut _)
        };
        return r.into();
    }
    if makes_a_process(nr, a1, a2) {
        // A fork made with the system call itself skips libc's atfork handlers, where the
        // pager hands the child its memory: the child's copies of evicted pages read as zeros
        // (a child of `syscall(SYS_fork)` found 4.6 million of 6.3 million words wrong).
        // SAFETY: libc's `syscall`, given every argument register.
        return with_fork_handlers(|| unsafe { real(nr, a1, a2, a3, a4, a5, a6) });
    }
    if nr == libc::SYS_seccomp && (a1 == 0 || a1 == 1) {
        // SECCOMP_SET_MODE_STRICT or _FILTER (libseccomp's `seccomp_load`).
        hooks::before_seccomp();
    }
    if hooks::syscall_parks_threads(nr, a1, a2) {
        // The calling thread's credentials alone: the pager's threads follow them.
        let mut p = Pinned::none();
        if nr == libc::SYS_capset {
            p.add(a1 as usize as *const c_void, 8);
            p.add(a2 as usize as *const c_void, 24);
        } else if nr == libc::SYS_setgroups {
            p.add(a2 as usize as *const c_void, a1.max(0) as usize * 4);
        }
        // SAFETY: libc's `syscall`, given every argument register.
        return hooks::around_thread_credentials(|| unsafe { real(nr, a1, a2, a3, a4, a5, a6) });
    }
    let _pins = if nr == libc::SYS_futex || nr == libc::SYS_futex_waitv {
        // SAFETY: the futex system call's arguments, as the kernel reads them.
        unsafe { pin_futex_args(nr, a1, a2, a4, a5) }
    } else if nr == libc::SYS_io_submit {
        // SAFETY: the call's iocb pointer array, as the kernel reads it.
        unsafe { aio::io_submit_pins(a2, a3 as usize as *const *const u8) }
    } else if nr == libc::SYS_io_getevents || nr == 333 {
        // 333: io_pgetevents (x86-64), not in the libc crate.
        aio::io_getevents_pins(a3, a4 as usize, a5 as usize)
    } else if nr == libc::SYS_getrandom {
        // Random bytes straight into a buffer (OpenSSL, other runtimes).
        let mut p = Pinned::none();
        p.add(a1 as *const c_void, a2.max(0) as usize);
        p
    } else {
        Pinned::none()
    };
    // SAFETY: libc's `syscall`, given every argument register.
    unsafe { real(nr, a1, a2, a3, a4, a5, a6) }
}

/// The kernel's `struct sigaction` on x86-64 (what `rt_sigaction` reads and writes; libc's
/// differs: a 128-byte mask before the flags).
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: libc::sighandler_t,
    mask: u64,
}

/// `syscall(SYS_rt_sigaction, sig, act, old, 8)` made through the `sigaction` wrapper: made
/// behind its back, a program's SIGBUS handler replaced the pager's, and the pager's next
/// fault went to the program's handler ("stray SIGBUS", the program's exit 7 in the test);
/// other signals' masks keep SIGBUS out, as the wrapper keeps them. The kernel's structure is
/// translated to libc's and back; the program's restorer gives way to libc's (both return
/// through `rt_sigreturn`).
///
/// # Safety
/// `act` and `old` null or valid, as for the system call.
unsafe fn raw_rt_sigaction(
    sig: c_int,
    act: *const KernelSigaction,
    old: *mut KernelSigaction,
) -> c_int {
    // SAFETY: zeroed sigaction structs are valid; the pointers are the caller's.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        let mut o: libc::sigaction = std::mem::zeroed();
        if let Some(k) = act.as_ref() {
            a.sa_sigaction = k.handler;
            a.sa_flags = (k.flags & !(SA_RESTORER as libc::c_ulong)) as c_int;
            (&mut a.sa_mask as *mut libc::sigset_t)
                .cast::<u64>()
                .write(k.mask);
        }
        let r = sigaction(
            sig,
            if act.is_null() { std::ptr::null() } else { &a },
            &mut o,
        );
        if let (0, Some(k)) = (r, old.as_mut()) {
            *k = KernelSigaction {
                handler: o.sa_sigaction,
                flags: o.sa_flags as u32 as libc::c_ulong,
                restorer: o.sa_restorer.map_or(0, |f| f as libc::sighandler_t),
                mask: (&o.sa_mask as *const libc::sigset_t).cast::<u64>().read(),
            };
        }
        r
    }
}

/// `SA_RESTORER` (x86-64; not in the libc crate for this target).
const SA_RESTORER: c_int = 0x0400_0000;

/// Does `syscall(nr, a1, a2, ...)` make a process of its own (a copy of this address space,
/// not a thread or a `vfork` child sharing it) that returns from this call in the child, as
/// `fork` does: `SYS_fork`, or `SYS_clone`/`SYS_clone3` without `CLONE_VM` and without a new
/// stack (with one, the child would return into a stack that holds no frame of this call).
fn makes_a_process(nr: libc::c_long, a1: libc::c_long, a2: libc::c_long) -> bool {
    let vm = libc::CLONE_VM as u64;
    match nr {
        libc::SYS_fork => true,
        // clone(flags, newsp, parent_tid, child_tid, tls)
        libc::SYS_clone => a1 as u64 & vm == 0 && a2 == 0,
        // clone3(&clone_args, size): flags at 0, stack at 40 (`struct clone_args`, Linux 5.3).
        libc::SYS_clone3 if a1 != 0 && a2 >= 64 => {
            let args = a1 as usize as *const u64;
            // SAFETY: the caller's `struct clone_args` of `a2` bytes, which the kernel reads
            // too (a bad pointer faults here as the kernel's read would return EFAULT: the
            // program's own error).
            let (flags, stack) = unsafe { (args.read_unaligned(), args.add(5).read_unaligned()) };
            flags & vm == 0 && stack == 0
        }
        _ => false,
    }
}

/// The pins for one `futex(uaddr, op, val, timeout|val2, uaddr2, val3)` or
/// `futex_waitv(waiters, nr, flags, timeout, clock)` call.
///
/// # Safety
/// The arguments of such a call (pointers the kernel would read, or values it ignores).
unsafe fn pin_futex_args(
    nr: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
) -> Pinned {
    const WORD: usize = 4;
    if nr == libc::SYS_futex_waitv {
        // struct futex_waitv { u64 val; u64 uaddr; u32 flags; u32 reserved; }
        let (w, n) = (a1 as *const [u64; 3], a2.clamp(0, 128) as usize);
        if w.is_null() || n == 0 {
            return Pinned::none();
        }
        let mut p = pin_wait(&[(w.cast(), n * 24), (a4 as *const c_void, TIMESPEC)]);
        for k in 0..n {
            // SAFETY: the caller's array of `n` waiters (resident now if it is managed).
            let uaddr = unsafe { (*w.add(k))[1] } as usize;
            p.add(uaddr as *const c_void, WORD);
        }
        return p;
    }
    let op = (a2 as c_int) & libc::FUTEX_CMD_MASK;
    let private = (a2 as c_int) & libc::FUTEX_PRIVATE_FLAG != 0;
    let uaddr = a1 as *const c_void;
    let uaddr2 = a5 as *const c_void;
    match op {
        // Timeout in the fourth argument.
        libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET | libc::FUTEX_LOCK_PI | libc::FUTEX_LOCK_PI2 => {
            pin_wait(&[(uaddr, WORD), (a4 as *const c_void, TIMESPEC)])
        }
        libc::FUTEX_WAIT_REQUEUE_PI => pin_wait(&[
            (uaddr, WORD),
            (a4 as *const c_void, TIMESPEC),
            (uaddr2, WORD),
        ]),
        libc::FUTEX_TRYLOCK_PI | libc::FUTEX_UNLOCK_PI | libc::FUTEX_CMP_REQUEUE => {
            pin_wait(&[(uaddr, WORD)])
        }
        libc::FUTEX_CMP_REQUEUE_PI => pin_wait(&[(uaddr, WORD), (uaddr2, WORD)]),
        libc::FUTEX_WAKE_OP => pin_wait(&[(uaddr, WORD), (uaddr2, WORD)]),
        // A shared futex's key is found through the page itself.
        _ if !private => pin_wait(&[(uaddr, WORD), (uaddr2, WORD)]),
        _ => Pinned::none(),
    }
}

mod aio;
mod calls;
mod ipc;
mod stacks;
mod streams;

/// Buffers above this size are read and written in pieces of it (regular files only, where a
/// loop of calls returns what one call would): a pinned buffer is resident for the whole call,
/// and a 1 GiB `read` must not pin 1 GiB over the budget.
const CHUNK: usize = 1 << 20;

fn is_regular(fd: c_int) -> bool {
    // SAFETY: fstat fills the struct or fails.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG
    }
}

/// Runs `op(offset, len)` over `[0, n)` in pinned pieces of `CHUNK` bytes until it returns
/// short, 0 or an error (then: the bytes done so far, or the error if none).
fn chunked(buf: *const c_void, n: usize, mut op: impl FnMut(usize, usize) -> isize) -> isize {
    let mut done = 0usize;
    while done < n {
        let len = CHUNK.min(n - done);
        let mut pins = Pinned::none();
        pins.add((buf as usize + done) as *const c_void, len);
        let r = op(done, len);
        drop(pins);
        if r < 0 {
            return if done > 0 { done as isize } else { r };
        }
        done += r as usize;
        if (r as usize) < len {
            break;
        }
    }
    done as isize
}

macro_rules! rw_wrap {
    ($name:ident, $ptr:ty, $($off:ident)?) => {
        /// Pins its buffer for the call, in 1 MiB pieces for regular files.
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, b: $ptr, n: usize $(, $off: i64)?) -> isize {
            static S: NextSym = NextSym::new(sym_name!($name));
            let f: unsafe extern "C" fn(c_int, $ptr, usize $(, rw_wrap!(@t $off))?) -> isize =
                // SAFETY: libc's function of this name and signature.
                unsafe { std::mem::transmute(S.get()) };
            let managed = uzswap_pager::pager()
                .is_some_and(|p| !sys::in_pager() && p.maybe_managed(b as usize, n));
            if n > CHUNK && managed && is_regular(fd) {
                return chunked(b as *const c_void, n, |o, l| {
                    // SAFETY: a piece of the caller's buffer (and offset).
                    unsafe { f(fd, (b as usize + o) as $ptr, l $(, $off + o as i64)?) }
                });
            }
            let mut pins = Pinned::none();
            pins.add(b as *const c_void, n);
            // SAFETY: forwarded.
            unsafe { f(fd, b, n $(, $off)?) }
        }
    };
    (@t $off:ident) => { i64 };
}

rw_wrap!(read, *mut c_void,);
rw_wrap!(write, *const c_void,);
rw_wrap!(pread, *mut c_void, off);
rw_wrap!(pread64, *mut c_void, off);
rw_wrap!(pwrite, *const c_void, off);
rw_wrap!(pwrite64, *const c_void, off);

macro_rules! stdio_wrap {
    ($name:ident, $ptr:ty) => {
        /// Pins its buffer for the call, in 1 MiB pieces (stdio loops over them exactly as
        /// one call would).
        ///
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            b: $ptr,
            size: usize,
            nmemb: usize,
            fp: *mut libc::FILE,
        ) -> usize {
            static S: NextSym = NextSym::new(sym_name!($name));
            let f: unsafe extern "C" fn($ptr, usize, usize, *mut libc::FILE) -> usize =
                // SAFETY: libc's function of this name and signature.
                unsafe { std::mem::transmute(S.get()) };
            let total = size.saturating_mul(nmemb);
            let managed = uzswap_pager::pager()
                .is_some_and(|p| !sys::in_pager() && p.maybe_managed(b as usize, total));
            if total > CHUNK && managed && size > 0 {
                let r = chunked(b as *const c_void, total, |o, l| {
                    // SAFETY: a piece of the caller's buffer, as bytes.
                    unsafe { f((b as usize + o) as $ptr, 1, l, fp) as isize }
                });
                return r.max(0) as usize / size;
            }
            let mut pins = Pinned::none();
            pins.add(b as *const c_void, total);
            // SAFETY: forwarded.
            unsafe { f(b, size, nmemb, fp) }
        }
    };
}

stdio_wrap!(fread, *mut c_void);
stdio_wrap!(fwrite, *const c_void);
stdio_wrap!(fread_unlocked, *mut c_void);
stdio_wrap!(fwrite_unlocked, *const c_void);

// ---------------------------------------------------------------- exec, spawn, exit

type Execve =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// What `tree_envp` made, alive until the exec or spawn call returns.
#[derive(Default)]
struct EnvKeep {
    array: Vec<*const c_char>,
    preload: Option<std::ffi::CString>,
}

/// `envp` with the run's variables (`uzswap_pager::hooks::tree_env`) it lacks added, and this
/// library put first in its `LD_PRELOAD`: a program that execs or spawns with a cleared or
/// sanitised environment (`env -i`, `execle` with a list of its own) otherwise took the new
/// program out of the tree and out of the budget, which a cgroup's descendants never leave.
/// `envp` itself when nothing is missing (no allocation, the common case). The new array and
/// string live in `keep`.
///
/// # Safety
/// `envp` null or a NULL-terminated array of C strings, all resident.
unsafe fn tree_envp(envp: *const *const c_char, keep: &mut EnvKeep) -> *const *const c_char {
    let ours = uzswap_pager::hooks::tree_env();
    if ours.is_empty() || uzswap_pager::pager().is_none() {
        return envp;
    }
    let mut entries: &[*const c_char] = &[];
    if !envp.is_null() {
        let mut n = 0;
        // SAFETY: a NULL-terminated array (the caller's contract).
        while unsafe { !(*envp.add(n)).is_null() } {
            n += 1;
        }
        // SAFETY: the n entries counted above.
        entries = unsafe { std::slice::from_raw_parts(envp, n) };
    }
    // SAFETY: C strings of the array.
    let text = |p: *const c_char| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    let key = |kv: &[u8]| -> usize { kv.iter().position(|&b| b == b'=').unwrap_or(kv.len()) };
    // One pass over the child's environment: which of ours it has, and where (only entries
    // that start like ours are looked at closely; an exec costs about a millisecond, this a
    // few hundred nanoseconds for a hundred variables).
    let mut at = [usize::MAX; 32];
    for (i, &e) in entries.iter().enumerate() {
        let e = text(e);
        if !(e.starts_with(b"UZSWAP_") || e.starts_with(b"LD_PRELOAD=")) {
            continue;
        }
        let k = &e[..key(e)];
        if let Some(j) = ours.iter().position(|kv| {
            let kv = kv.to_bytes();
            kv.len() > k.len() && kv[k.len()] == b'=' && kv.starts_with(k)
        }) {
            if j < at.len() {
                at[j] = i;
            }
        }
    }
    let mut add: Vec<*const c_char> = Vec::new();
    let mut preload_at = None;
    for (j, kv) in ours.iter().enumerate() {
        let kv_b = kv.to_bytes();
        let k = &kv_b[..key(kv_b)];
        match at.get(j).copied().unwrap_or(usize::MAX) {
            usize::MAX => add.push(kv.as_ptr()),
            i if k == b"LD_PRELOAD" => {
                // Ours is the first entry of the value `uzswap run` set.
                let lib = kv_b[k.len() + 1..]
                    .split(|&b| b == b':' || b == b' ')
                    .next()
                    .unwrap_or_default();
                let theirs = &text(entries[i])[k.len() + 1..];
                if !theirs.split(|&b| b == b':' || b == b' ').any(|e| e == lib) {
                    let mut v = b"LD_PRELOAD=".to_vec();
                    v.extend_from_slice(lib);
                    if !theirs.is_empty() {
                        v.push(b':');
                        v.extend_from_slice(theirs);
                    }
                    keep.preload = std::ffi::CString::new(v).ok();
                    preload_at = Some(i);
                }
            }
            _ => {}
        }
    }
    if add.is_empty() && keep.preload.is_none() {
        return envp;
    }
    keep.array = entries.to_vec();
    if let (Some(i), Some(p)) = (preload_at, &keep.preload) {
        keep.array[i] = p.as_ptr();
    }
    keep.array.extend(add);
    keep.array.push(std::ptr::null());
    keep.array.as_ptr()
}

/// Runs an exec call under an [`ExecGuard`] for `path`, `argv` and `envp` (again, in a vfork
/// child, if it met an evicted string: see `ExecGuard::retry_after_efault`).
///
/// # Safety
/// `argv`/`envp` as for `execve(2)`, `path` a C string or null.
unsafe fn guarded_exec(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    call: impl Fn(*const *const c_char) -> c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    let mut g = unsafe { ExecGuard::new(path, argv, envp) };
    let mut keep = EnvKeep::default();
    // SAFETY: envp made resident by the guard.
    let envp = unsafe { tree_envp(envp, &mut keep) };
    hooks::count_exec(1);
    loop {
        let r = call(envp);
        if r == -1 && g.retry_after_efault(sys::errno()) {
            continue;
        }
        // Only a failed exec returns.
        let e = sys::errno();
        hooks::count_exec(-1);
        sys::set_errno(e);
        return r;
    }
}

/// # Safety
/// As `execve(2)`.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    static S: NextSym = NextSym::new(c"execve");
    // SAFETY: libc's execve, forwarded with argv/envp resident.
    unsafe {
        let f: Execve = std::mem::transmute(S.get());
        guarded_exec(path, argv, envp, |e| f(path, argv, e))
    }
}

/// # Safety
/// As `execv(3)`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarded.
    unsafe { execve(path, argv, environ) }
}

/// # Safety
/// As `execvpe(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    static S: NextSym = NextSym::new(c"execvpe");
    // SAFETY: libc's execvpe, forwarded with argv/envp resident.
    unsafe {
        let f: Execve = std::mem::transmute(S.get());
        guarded_exec(file, argv, envp, |e| f(file, argv, e))
    }
}

/// # Safety
/// As `execvp(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarded.
    unsafe { execvpe(file, argv, environ) }
}

/// # Safety
/// As `fexecve(3)`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    static S: NextSym = NextSym::new(c"fexecve");
    // SAFETY: libc's fexecve, forwarded with argv/envp resident.
    unsafe {
        let f: unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int =
            std::mem::transmute(S.get());
        guarded_exec(std::ptr::null(), argv, envp, |e| f(fd, argv, e))
    }
}

type Spawn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const c_void,
    *const c_void,
    *const *const c_char,
    *const *const c_char,
) -> c_int;

unsafe fn spawn(
    s: &NextSym,
    pid: *mut libc::pid_t,
    path: *const c_char,
    fa: *const c_void,
    at: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // The child runs in our memory (CLONE_VM) with default signal handlers until it execs:
    // everything it reads must be resident and stay so.
    let mut pins = Pinned::none();
    // SAFETY: the caller's posix_spawn arguments.
    unsafe {
        pins.add_str(path);
        pins.add_strv(argv);
        pins.add_strv(envp);
        pins.add(fa, std::mem::size_of::<libc::posix_spawn_file_actions_t>());
        pins.add(at, std::mem::size_of::<libc::posix_spawnattr_t>());
        pins.add(pid.cast(), 4);
    }
    let mut keep = EnvKeep::default();
    // SAFETY: envp pinned above.
    let envp = unsafe { tree_envp(envp, &mut keep) };
    let p = uzswap_pager::pager();
    if let Some(p) = p {
        p.pause();
    }
    // SAFETY: libc's posix_spawn(p).
    let r = unsafe {
        std::mem::transmute::<*mut c_void, Spawn>(s.get())(pid, path, fa, at, argv, envp)
    };
    if let Some(p) = p {
        p.resume();
    }
    if r == 0 {
        hooks::count_exec(1);
    }
    drop(pins);
    r
}

/// # Safety
/// As `posix_spawn(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    fa: *const c_void,
    at: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    static S: NextSym = NextSym::new(c"posix_spawn");
    // SAFETY: forwarded.
    unsafe { spawn(&S, pid, path, fa, at, argv, envp) }
}

/// # Safety
/// As `posix_spawnp(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    path: *const c_char,
    fa: *const c_void,
    at: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    static S: NextSym = NextSym::new(c"posix_spawnp");
    // SAFETY: forwarded.
    unsafe { spawn(&S, pid, path, fa, at, argv, envp) }
}

// The `execl` family is variadic: a naked entry saves the five argument registers after the
// path next to the caller's stack arguments, and `execl_impl` gathers the NULL-terminated list
// (and `execle`'s envp after it) into an argv array of its own, then goes through the wrappers
// above (pins, the exec bookkeeping) instead of glibc's internal `__execve`.

/// How an `execl`-family call continues (the entry's `ecx`): `execl` is
/// `execve(path, argv, environ)`, `execlp` is `execvp(file, argv)`, `execle` is
/// `execve(path, argv, envp)` with envp after the list's NULL.
const EXECL: c_int = 0;
const EXECLP: c_int = 1;
const EXECLE: c_int = 2;

/// Most arguments `execl_impl` gathers (the kernel's own limit on argv is far below).
const EXECL_MAX_ARGS: usize = 1 << 20;

/// # Safety
/// `regs` holds the five register arguments after the path and `stack` points at the caller's
/// stack arguments, together one `execl`-family argument list (NULL-terminated, then envp for
/// `EXECLE`).
unsafe extern "C" fn execl_impl(
    path: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
    kind: c_int,
) -> c_int {
    // SAFETY: the k-th variadic argument, as the caller passed it (see above).
    let arg = |k: usize| unsafe {
        if k < 5 {
            *regs.add(k)
        } else {
            *stack.add(k - 5)
        }
    };
    let mut argv: Vec<*const c_char> = Vec::new();
    loop {
        if argv.len() >= EXECL_MAX_ARGS {
            // SAFETY: errno of this thread.
            unsafe { *libc::__errno_location() = libc::E2BIG };
            return -1;
        }
        let a = arg(argv.len());
        argv.push(a);
        if a.is_null() {
            break;
        }
    }
    // SAFETY: forwarded to the wrappers with an argv array of our own (unmanaged memory).
    unsafe {
        match kind {
            EXECLP => execvp(path, argv.as_ptr()),
            EXECLE => {
                let envp = arg(argv.len()) as *const *const c_char;
                execve(path, argv.as_ptr(), envp)
            }
            _ => execve(path, argv.as_ptr(), environ),
        }
    }
}

macro_rules! execl_entry {
    ($name:ident, $kind:literal) => {
        /// Variadic entry (see `execl_impl`); `$kind` is one of `EXECL`, `EXECLP`, `EXECLE`.
        #[no_mangle]
        #[unsafe(naked)]
        pub extern "C" fn $name() {
            // At entry rsp is 8 mod 16; five pushes make it 0 mod 16 for the call.
            core::arch::naked_asm!(
                "push r9",
                "push r8",
                "push rcx",
                "push rdx",
                "push rsi",
                "mov rsi, rsp",
                "lea rdx, [rsp + 48]",
                concat!("mov ecx, ", $kind),
                "call {f}",
                "add rsp, 40",
                "ret",
                f = sym execl_impl,
            )
        }
    };
}

execl_entry!(execl, "0");
execl_entry!(execlp, "1");
execl_entry!(execle, "2");
const _: () = assert!(EXECL == 0 && EXECLP == 1 && EXECLE == 2);

/// `system(3)` and `popen(3)` start `/bin/sh -c CMD` through glibc's internal `posix_spawn`:
/// the child (our memory, default signal handlers) and then the kernel read CMD, so it stays
/// resident and pinned for the call (an evicted command was a failed exec: status 127 from
/// `system`, NULL from `popen`). Nothing else the child reads is the program's memory.
///
/// # Safety
/// As `system(3)`.
#[no_mangle]
pub unsafe extern "C" fn system(cmd: *const c_char) -> c_int {
    static S: NextSym = NextSym::new(c"system");
    let mut pins = Pinned::none();
    // SAFETY: the caller's command string (or null).
    unsafe { pins.add_str(cmd) };
    // SAFETY: libc's system.
    unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char) -> c_int>(S.get())(
            cmd,
        )
    }
}

/// See [`system`].
///
/// # Safety
/// As `popen(3)`.
#[no_mangle]
pub unsafe extern "C" fn popen(cmd: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    static S: NextSym = NextSym::new(c"popen");
    let mut pins = Pinned::none();
    // SAFETY: the caller's strings.
    unsafe {
        pins.add_str(cmd);
        pins.add_str(mode);
    }
    type Popen = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;
    // SAFETY: libc's popen.
    unsafe { std::mem::transmute::<*mut c_void, Popen>(S.get())(cmd, mode) }
}

/// `_exit` skips the destructors: hand the counters over first.
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    hooks::at_exit();
    // SAFETY: ends the process.
    unsafe {
        libc::syscall(libc::SYS_exit_group, status);
    }
    unreachable!()
}

/// As `_exit`.
#[no_mangle]
pub extern "C" fn _Exit(status: c_int) -> ! {
    _exit(status)
}

// ---------------------------------------------------------------- thread-local destructors

/// Thread-local destructors registered by the pager's own code (its buffers, compression
/// contexts, pool snapshots) are kept here, not handed to glibc: glibc's list takes a node
/// from `calloc`, which is the program's allocator in managed memory, and pager code never
/// touches managed memory. They run when the thread's alternate-stack key is destroyed
/// (`thread_gone`), after the program's own thread-local destructors. The fault path falls back
/// to temporary buffers and contexts for a fault after that (a later key destructor of the
/// program's, mimalloc's thread teardown). Until 2026-11-29 they were dropped, never run: a
/// program that started 20,000 short threads grew by 8 KiB each (163 MiB peak RSS under
/// `uzswap run` against 1.5 MB alone), 100 KiB each with `--compressor zstd` and 170 KiB with
/// `deflate`. More than `MAX_PAGER_DTORS` on one thread (not seen) are dropped, as before.
const MAX_PAGER_DTORS: usize = 32;

thread_local! {
    /// (destructor, object) pairs, and how many; no destructor of its own.
    static PAGER_DTORS: std::cell::RefCell<([(usize, usize); MAX_PAGER_DTORS], usize)> =
        const { std::cell::RefCell::new(([(0, 0); MAX_PAGER_DTORS], 0)) };
}

/// Runs this thread's pager destructors, the last registered first (a destructor that
/// registers another gets it run too).
fn run_pager_dtors() {
    let _b = SigBlock::new();
    let _g = sys::InPager::enter();
    loop {
        let next = PAGER_DTORS.with(|d| {
            let mut d = d.try_borrow_mut().ok()?;
            let n = d.1.checked_sub(1)?;
            d.1 = n;
            Some(d.0[n])
        });
        let Some((f, obj)) = next else { break };
        // SAFETY: `f` and `obj` were registered together by `__cxa_thread_atexit_impl` below,
        // on this thread, whose thread-locals are still there; each pair runs once.
        unsafe {
            let f = std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void)>(f);
            f(obj as *mut c_void)
        }
    }
}

/// # Safety
/// As glibc's `__cxa_thread_atexit_impl`.
#[no_mangle]
pub unsafe extern "C" fn __cxa_thread_atexit_impl(
    dtor: unsafe extern "C" fn(*mut c_void),
    obj: *mut c_void,
    dso: *mut c_void,
) -> c_int {
    if sys::in_pager() {
        PAGER_DTORS.with(|d| {
            if let Ok(mut d) = d.try_borrow_mut() {
                let n = d.1;
                if n < MAX_PAGER_DTORS {
                    d.0[n] = (dtor as usize, obj as usize);
                    d.1 = n + 1;
                }
            }
        });
        return 0;
    }
    static S: NextSym = NextSym::new(c"__cxa_thread_atexit_impl");
    // SAFETY: glibc's implementation, same signature.
    unsafe {
        let f: unsafe extern "C" fn(
            unsafe extern "C" fn(*mut c_void),
            *mut c_void,
            *mut c_void,
        ) -> c_int = std::mem::transmute(S.get());
        f(dtor, obj, dso)
    }
}
