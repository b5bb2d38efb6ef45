// SPDX-License-Identifier: MIT
//! The process `--kernel` runs in each memory cgroup (`uzswap __replay-runner`): it maps an
//! anonymous region without huge pages, reports ready, and then applies a stream of page
//! operations from stdin: a write copies the page's content from the corpus (a memfd the
//! parent filled, so its page cache is charged to the parent), a read touches the page, a
//! free is `MADV_DONTNEED`, a sync is acknowledged on stdout.
//!
//! It allocates nothing once ready: after the parent moves it into its cgroup, the only memory
//! charged there is the region's pages and page tables, as for the replay's own accounting.
//!
//! Wire format (little-endian, 16 bytes per record): `op: u8`, 3 bytes padding, `arg: u32`,
//! `page: u64`. Ops: 0 read, 1 write (arg: corpus page), 2 write zeros, 3 free (arg: page
//! count), 4 sync (arg echoed back as 4 bytes), 5 exit.

use std::io::{Read, Write};

/// Size of one record.
pub const RECORD: usize = 16;
pub const OP_READ: u8 = 0;
pub const OP_WRITE: u8 = 1;
pub const OP_ZERO: u8 = 2;
pub const OP_FREE: u8 = 3;
pub const OP_SYNC: u8 = 4;
pub const OP_EXIT: u8 = 5;
/// The line a runner prints when it is ready for its cgroup.
pub const READY: &str = "uzswap-runner-ready";

/// Encode one record.
#[inline]
pub fn encode(out: &mut Vec<u8>, op: u8, arg: u32, page: u64) {
    out.push(op);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&arg.to_le_bytes());
    out.extend_from_slice(&page.to_le_bytes());
}

/// A mapping owned by the runner.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn anon(len: usize) -> Result<Map, String> {
        // SAFETY: a fresh private anonymous mapping with no address hint; the result is
        // checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap of {len} bytes: {}",
                std::io::Error::last_os_error()
            ));
        }
        // Base pages only, as the replay models them (a THP would be swapped as 512 pages
        // at once, and the zero map needs the whole folio zero).
        // SAFETY: the range is the mapping just created.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        Ok(Map { ptr: p.cast(), len })
    }

    fn file(fd: i32, len: usize) -> Result<Map, String> {
        // SAFETY: a read-only shared mapping of a file descriptor the parent passed; the
        // result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap of the corpus (fd {fd}): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Map { ptr: p.cast(), len })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from our mmap and are unmapped exactly once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Fault in the stack the loop below can reach (its frames, and std's I/O paths) so that no
/// stack page is first touched, and charged, after the move into the cgroup.
#[inline(never)]
fn touch_stack() {
    let mut a = [0u8; 256 * 1024];
    for i in (0..a.len()).step_by(4096) {
        // SAFETY: i < a.len(); a volatile write so the array and its touches are kept.
        unsafe { std::ptr::write_volatile(a.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&a);
}

/// Run the runner: `pages` pages of region, the corpus in `corpus_fd` (`corpus_pages` pages).
/// Returns when told to exit or when stdin closes.
pub fn run(pages: u64, corpus_fd: i32, corpus_pages: u64) -> Result<(), String> {
    let region_len = usize::try_from(pages.max(1) * 4096).map_err(|_| "region too large")?;
    let region = Map::anon(region_len)?;
    let corpus_len = usize::try_from(corpus_pages.max(1) * 4096).map_err(|_| "corpus too large")?;
    let corpus = Map::file(corpus_fd, corpus_len)?;
    let mut buf = vec![0u8; RECORD * 4096];
    // Everything the loop touches must be resident and charged to the root before the parent
    // moves us: `vec![0; n]` comes from calloc, whose fresh pages are never written, so the
    // first read into them after the move would charge them to the cgroup, where reclaim
    // swaps them out and they fault back in (the kernel counted 11-15 zswpin of such pages in
    // `active-vs-background`, which the replay, with no such pages, cannot have).
    for i in (0..buf.len()).step_by(4096) {
        // SAFETY: i < buf.len(); a volatile write so the touch is kept.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 0) };
    }
    touch_stack();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{READY} {}", std::process::id()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    let mut have = 0usize;
    loop {
        let n = match input.read(&mut buf[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("stdin: {e}")),
        };
        have += n;
        let whole = have / RECORD * RECORD;
        for r in buf[..whole].chunks_exact(RECORD) {
            let op = r[0];
            let arg = u32::from_le_bytes(r[4..8].try_into().expect("4 bytes"));
            let page = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            match op {
                OP_READ | OP_WRITE | OP_ZERO => {
                    if page >= pages {
                        return Err(format!("page {page} beyond the region of {pages} pages"));
                    }
                    let off = page as usize * 4096;
                    // SAFETY: off + 4096 <= region_len (page < pages checked above); the
                    // region is ours and no Rust reference aliases it.
                    let dst = unsafe { region.ptr.add(off) };
                    match op {
                        OP_READ => {
                            // SAFETY: dst is inside the region; a volatile read so the touch
                            // is not optimised away.
                            unsafe { std::ptr::read_volatile(dst) };
                        }
                        OP_WRITE => {
                            let c = u64::from(arg) % corpus_pages.max(1);
                            // SAFETY: the source page lies inside the corpus mapping
                            // (c < corpus_pages), the destination inside the region; the two
                            // mappings do not overlap.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    corpus.ptr.add(c as usize * 4096),
                                    dst,
                                    4096,
                                )
                            };
                        }
                        _ => {
                            // SAFETY: dst..dst+4096 is inside the region.
                            unsafe { std::ptr::write_bytes(dst, 0, 4096) };
                        }
                    }
                }
                OP_FREE => {
                    let end = page.saturating_add(u64::from(arg)).min(pages);
                    if page < end {
                        // SAFETY: [page, end) lies inside the region.
                        unsafe {
                            libc::madvise(
                                region.ptr.add(page as usize * 4096).cast(),
                                (end - page) as usize * 4096,
                                libc::MADV_DONTNEED,
                            )
                        };
                    }
                }
                OP_SYNC => {
                    out.write_all(&arg.to_le_bytes())
                        .and_then(|()| out.flush())
                        .map_err(|e| format!("stdout: {e}"))?;
                }
                OP_EXIT => return Ok(()),
                _ => return Err(format!("bad op {op}")),
            }
        }
        buf.copy_within(whole..have, 0);
        have -= whole;
    }
}
