// SPDX-License-Identifier: MIT
//! Write tracking: which managed pages were written since they were last write-protected.
//!
//! Pages are filled write-protected (`UFFDIO_COPY_MODE_WP`) and the userfaultfd has
//! `UFFD_FEATURE_WP_ASYNC`, so a write just clears the page's uffd-wp bit in the kernel's fault
//! path, with no signal. The `PAGEMAP_SCAN` ioctl on `/proc/self/pagemap` ("fs/proc/task_mmu:
//! implement IOCTL to get and optionally clear info about PTEs", 6.7) reports the present pages
//! without the bit (`PAGE_IS_WRITTEN`) and, with `PM_SCAN_WP_MATCHING`, protects them again in
//! the same page-table walk, atomically with the report: every write is seen by exactly one
//! scan. Reads are invisible (no accessed bit is readable from user space on this kernel: see
//! docs/pager.md).
//!
//! The pagemap descriptor belongs to the address space it was opened in: a fork child opens its
//! own (`reopen`).

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

use crate::region::PAGE;

const PAGEMAP_SCAN: u64 =
    (3 << 30) | ((std::mem::size_of::<ScanArg>() as u64) << 16) | (0x66 << 8) | 16;
const PM_SCAN_WP_MATCHING: u64 = 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_PRESENT: u64 = 1 << 3;

#[repr(C)]
struct ScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// The process's `/proc/self/pagemap` descriptor (-1: none, tracking off).
pub struct Scanner {
    fd: AtomicI32,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub const fn new() -> Scanner {
        Scanner {
            fd: AtomicI32::new(-1),
        }
    }

    /// Opens this address space's pagemap (at start, and in a fork child). False if it can't
    /// (then write tracking stays off).
    pub fn reopen(&self) -> bool {
        let fd = open_pagemap();
        // The old one: our own (the inherited copy in a fork child), not used any more.
        crate::fds::close_ours(self.fd.swap(fd, Relaxed));
        fd >= 0
    }

    /// Turns write tracking off (a fork child whose new userfaultfd lacks it).
    pub fn close(&self) {
        crate::fds::close_ours(self.fd.swap(-1, Relaxed));
    }

    pub fn enabled(&self) -> bool {
        self.fd.load(Relaxed) >= 0
    }

    /// Calls `each(first, end)` with the page ranges of `[start, end)` (page-aligned, managed)
    /// that are present and were written since they were last protected, in address order;
    /// with `rearm`, protects them again in the same walk. Returns false if the scan failed
    /// (then nothing is known: treat every page as written).
    pub fn written(
        &self,
        start: usize,
        end: usize,
        rearm: bool,
        mut each: impl FnMut(usize, usize),
    ) -> bool {
        let fd = self.fd.load(Relaxed);
        if fd < 0 {
            return false;
        }
        let mut vec = [PageRegion::default(); 32];
        let mut from = start;
        while from < end {
            let mut a = ScanArg {
                size: std::mem::size_of::<ScanArg>() as u64,
                flags: if rearm { PM_SCAN_WP_MATCHING } else { 0 },
                start: from as u64,
                end: end as u64,
                walk_end: 0,
                vec: vec.as_mut_ptr() as u64,
                vec_len: vec.len() as u64,
                max_pages: 0,
                category_inverted: 0,
                category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_WRITTEN,
            };
            // SAFETY: PAGEMAP_SCAN reads the argument and writes up to `vec_len` regions into
            // our array; with WP_MATCHING it write-protects matching pages of managed ranges
            // (registered for async WP), which changes no data.
            let n = unsafe { libc::ioctl(fd, PAGEMAP_SCAN as _, &mut a) };
            if n < 0 {
                return false;
            }
            for r in &vec[..n as usize] {
                each(r.start as usize, r.end as usize);
            }
            let walked = (a.walk_end as usize).max(from + PAGE);
            if walked <= from {
                break;
            }
            from = walked;
        }
        true
    }
}

/// `/proc/self/pagemap` entry bits: the page is present; it is mapped by this address space
/// alone (clear for a page a fork still shares copy-on-write with the other process).
const PM_PRESENT: u64 = 1 << 63;
const PM_MMAP_EXCLUSIVE: u64 = 1 << 56;

/// Reads the pagemap entries (pagemap open at `fd`) of `out.len()` pages from `addr` on.
pub fn read_pagemap(fd: i32, addr: usize, out: &mut [u64]) -> bool {
    let at = (addr / crate::region::PAGE * 8) as libc::off_t;
    // SAFETY: reads at most `out.len()` entries into `out`.
    let got = unsafe { libc::pread(fd, out.as_mut_ptr().cast(), out.len() * 8, at) };
    got >= 0 && got as usize == out.len() * 8
}

/// A pagemap entry's page is present and mapped by this address space alone.
pub fn mapped_alone(e: u64) -> bool {
    e & PM_PRESENT != 0 && e & PM_MMAP_EXCLUSIVE != 0
}

/// A pagemap entry's page is present and mapped by another address space too.
fn mapped_with_another(e: u64) -> bool {
    e & PM_PRESENT != 0 && e & PM_MMAP_EXCLUSIVE == 0
}

/// Pages of `ranges` (`(start, pages)`, page-aligned) that are present and shared with another
/// address space (a fork's parent or child), from the pagemap open at `fd`. The kernel reports
/// this per page only where the page is mapped by a page table entry (a huge page mapped whole
/// reads as exclusive once the other side has split its own mapping): the caller splits its
/// huge mappings first. None if the pagemap could not be read.
pub fn count_shared(fd: i32, ranges: &[(usize, usize)]) -> Option<usize> {
    let mut buf = [0u64; 512];
    let mut shared = 0;
    for &(start, pages) in ranges {
        let mut done = 0;
        while done < pages {
            let n = (pages - done).min(buf.len());
            if !read_pagemap(fd, start + done * crate::region::PAGE, &mut buf[..n]) {
                return None;
            }
            shared += buf[..n].iter().filter(|&&e| mapped_with_another(e)).count();
            done += n;
        }
    }
    Some(shared)
}

/// Opens this address space's pagemap as one of the pager's descriptors (-1 on failure).
pub fn open_pagemap() -> i32 {
    // SAFETY: a NUL-terminated path; the caller owns the descriptor.
    let fd = unsafe {
        libc::open(
            c"/proc/self/pagemap".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    crate::fds::adopt(fd, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pagemap says what a fork shares: a parent's pages are shared while a child maps
    /// them, its own once it wrote them (copy-on-write) and all of them once the child is
    /// gone. The child only waits on a pipe and exits (async-signal-safe calls alone).
    #[test]
    fn the_pagemap_counts_the_pages_a_fork_child_still_shares() {
        const N: usize = 64;
        let len = N * crate::region::PAGE;
        // A fresh private anonymous mapping, ours alone; unmapped at the end.
        let p = crate::sys::map_anon(len).unwrap() as *mut libc::c_void;
        // MADV_NOHUGEPAGE: a huge page mapped whole reports its sharing as a whole.
        // SAFETY: our mapping.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        let base = p as usize;
        // SAFETY: writes inside our mapping.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 7, len) };
        let fd = open_pagemap();
        assert!(fd >= 0);
        let shared = || count_shared(fd, &[(base, N)]).unwrap();
        assert_eq!(shared(), 0);
        let mut pipe = [0; 2];
        // SAFETY: a two-int array for pipe to fill.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child makes async-signal-safe calls only (read, _exit).
        let child = unsafe { libc::fork() };
        if child == 0 {
            let mut b = 0u8;
            // SAFETY: a one-byte read into a local, then the end of the child.
            unsafe {
                libc::read(pipe[0], (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        assert!(child > 0);
        let during = shared();
        for k in 0..10 {
            // SAFETY: a write inside our mapping: this process's own copy of the page.
            unsafe { *(base as *mut u8).add(k * crate::region::PAGE) = 1 };
        }
        let after_writes = shared();
        let mut e = [0u64; N];
        assert!(read_pagemap(fd, base, &mut e));
        let alone = e.iter().filter(|&&x| mapped_alone(x)).count();
        // SAFETY: ends the child (its read returns), then reaps it.
        unsafe {
            libc::write(pipe[1], b"x".as_ptr().cast(), 1);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        let after_exit = shared();
        // SAFETY: our descriptor and mapping, no longer used.
        unsafe {
            libc::close(fd);
            libc::munmap(p, len);
        }
        assert_eq!(
            (during, after_writes, alone, after_exit),
            (N, N - 10, 10, 0)
        );
    }
}
