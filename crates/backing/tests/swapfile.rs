// SPDX-License-Identifier: MIT
//! Integration tests of the swap file: real files in a private directory under the system temp
//! dir, real page content (bytes of this test executable), real corruption through a second
//! descriptor, and every injected fault kind.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write as _; // skip notices bypass the test harness's output capture
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use uzswap_backing::{
    DiscardPolicy, Error, HeaderError, SwapFile, SwapSlot, CLUSTER_SLOTS, PAGE_SIZE,
};

/// A private directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "uzswap-swapfile-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Real, distinct pages: 4 KiB chunks of this test binary, skipping duplicates.
fn real_pages(n: usize) -> Vec<Vec<u8>> {
    let exe = std::fs::read("/proc/self/exe").expect("read own executable");
    let mut seen = std::collections::HashSet::new();
    let pages: Vec<Vec<u8>> = exe
        .chunks_exact(PAGE_SIZE)
        .filter(|c| seen.insert(c.to_vec()))
        .take(n)
        .map(|c| c.to_vec())
        .collect();
    assert_eq!(
        pages.len(),
        n,
        "test binary too small for {n} distinct pages"
    );
    pages
}

fn read(sf: &SwapFile, slot: SwapSlot) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0xAAu8; PAGE_SIZE];
    sf.read_page(slot, &mut buf).map(|()| buf)
}

#[test]
fn round_trip_and_misuse() {
    let dir = TempDir::new("rt");
    let sf = SwapFile::create_temp(dir.path(), 3, 100).unwrap();
    assert_eq!((sf.area(), sf.capacity(), sf.slots_in_use()), (3, 100, 0));
    let pages = real_pages(20);
    let slots: Vec<SwapSlot> = (0..20).map(|_| sf.alloc_slot().unwrap()).collect();
    assert!(slots.iter().all(|s| s.area == 3 && s.offset < 100));
    for (s, p) in slots.iter().zip(&pages) {
        sf.write_page(*s, p).unwrap();
    }
    for (s, p) in slots.iter().zip(&pages) {
        assert_eq!(&read(&sf, *s).unwrap(), p);
    }
    // Overwrite one block.
    sf.write_page(slots[0], &pages[1]).unwrap();
    assert_eq!(read(&sf, slots[0]).unwrap(), pages[1]);

    let fresh = sf.alloc_slot().unwrap();
    let mut buf = vec![0xAAu8; PAGE_SIZE];
    assert!(matches!(
        sf.read_page(fresh, &mut buf),
        Err(Error::NotWritten(_))
    ));
    assert!(
        buf.iter().all(|&b| b == 0),
        "failed read must not leave data"
    );
    assert!(matches!(
        sf.read_page(SwapSlot::new(4, 0), &mut buf),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        sf.read_page(SwapSlot::new(3, 100), &mut buf),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        sf.write_page(fresh, &pages[0][..100]),
        Err(Error::BadPageLength(100))
    ));
    // Writing an unallocated slot is refused.
    let unallocated = (0..100)
        .map(|o| SwapSlot::new(3, o))
        .find(|s| !slots.contains(s) && *s != fresh)
        .unwrap();
    assert!(matches!(
        sf.write_page(unallocated, &pages[0]),
        Err(Error::NotAllocated(_))
    ));
    let st = sf.stats();
    assert_eq!(st.writes, 21);
    assert_eq!(st.reads, 21);
    assert_eq!(st.blocks_stored, 20);
    assert_eq!(st.slots_in_use, 21);
    assert_eq!(st.not_written_reads, 1);
    assert_eq!(st.write_errors + st.read_errors + st.checksum_errors, 0);
    assert!(matches!(
        SwapFile::create_temp(dir.path(), 0, 0),
        Err(Error::BadCapacity(0))
    ));
}

#[test]
fn large_sparse_area() {
    // 2^24 slots = 64 GiB of swap: the file is sparse and the checksum table is lazily zeroed,
    // so this costs a few MiB of bitmaps, not 128 MiB of table.
    let dir = TempDir::new("large");
    let sf = SwapFile::create_temp(dir.path(), 0, 1 << 24).unwrap();
    let p = real_pages(1);
    let s = sf.alloc_slot().unwrap();
    sf.write_page(s, &p[0]).unwrap();
    assert_eq!(read(&sf, s).unwrap(), p[0]);
    assert!(matches!(
        SwapFile::create_temp(dir.path(), 0, uzswap_backing::MAX_SLOTS + 1),
        Err(Error::BadCapacity(_))
    ));
}

#[test]
fn full_and_double_free() {
    let dir = TempDir::new("full");
    let sf = SwapFile::create_temp(dir.path(), 0, 10).unwrap();
    let slots: Vec<_> = (0..10).map(|_| sf.alloc_slot().unwrap()).collect();
    let mut offs: Vec<u64> = slots.iter().map(|s| s.offset).collect();
    offs.sort_unstable();
    assert_eq!(offs, (0..10).collect::<Vec<_>>());
    assert!(matches!(sf.alloc_slot(), Err(Error::Full)));
    assert_eq!(sf.slots_in_use(), 10);
    sf.free_slot(slots[4]).unwrap();
    assert!(matches!(
        sf.free_slot(slots[4]),
        Err(Error::NotAllocated(_))
    ));
    assert_eq!(sf.alloc_slot().unwrap(), slots[4]);
    assert!(matches!(sf.alloc_slot(), Err(Error::Full)));
}

#[test]
fn freed_slot_forgets_its_block() {
    let dir = TempDir::new("free");
    let sf = SwapFile::create_temp(dir.path(), 0, 1).unwrap();
    let p = real_pages(1);
    let s = sf.alloc_slot().unwrap();
    sf.write_page(s, &p[0]).unwrap();
    sf.free_slot(s).unwrap();
    let s2 = sf.alloc_slot().unwrap();
    assert_eq!(s, s2);
    assert!(matches!(read(&sf, s2), Err(Error::NotWritten(_))));
    assert_eq!(sf.stats().blocks_stored, 0);
}

#[test]
fn create_header_and_reopen() {
    let dir = TempDir::new("reopen");
    let path = dir.path().join("swap");
    let pages = real_pages(8);
    let slots: Vec<SwapSlot> = {
        let sf = SwapFile::create(&path, 7, 1000).unwrap();
        let slots: Vec<_> = (0..8).map(|_| sf.alloc_slot().unwrap()).collect();
        for (s, p) in slots.iter().zip(&pages) {
            sf.write_page(*s, p).unwrap();
        }
        sf.discard(slots[7]);
        sf.sync().unwrap();
        slots
    };
    let head = std::fs::read(&path).unwrap();
    assert_eq!(&head[..8], b"UZSWAPF\0");
    assert_eq!(u64::from_le_bytes(head[16..24].try_into().unwrap()), 1000);

    let sf = SwapFile::open(&path).unwrap();
    assert_eq!((sf.area(), sf.capacity()), (7, 1000));
    assert_eq!(sf.slots_in_use(), 7, "written slots come back allocated");
    for (s, p) in slots.iter().zip(&pages).take(7) {
        assert_eq!(&read(&sf, *s).unwrap(), p);
    }
    assert!(matches!(read(&sf, slots[7]), Err(Error::NotWritten(_))));
    // Allocation never hands out a slot that holds a block.
    for _ in 0..993 {
        let s = sf.alloc_slot().unwrap();
        assert!(!slots[..7].contains(&s));
    }
    assert!(matches!(sf.alloc_slot(), Err(Error::Full)));

    // Not a swap file.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, &pages[0]).unwrap();
    assert!(matches!(
        SwapFile::open(&junk),
        Err(Error::BadHeader(HeaderError::BadMagic))
    ));
    std::fs::write(&junk, b"short").unwrap();
    assert!(matches!(
        SwapFile::open(&junk),
        Err(Error::BadHeader(HeaderError::TooShort(5)))
    ));
}

#[test]
fn concurrent_distinct_slots() {
    let dir = TempDir::new("conc");
    let sf = SwapFile::create_temp(dir.path(), 0, 2048).unwrap();
    let pages = real_pages(64);
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (sf, pages) = (&sf, &pages);
            s.spawn(move || {
                let mut mine: Vec<(SwapSlot, usize)> = Vec::new();
                for round in 0..300usize {
                    let slot = sf.alloc_slot().unwrap();
                    let k = (t * 7 + round) % pages.len();
                    sf.write_page(slot, &pages[k]).unwrap();
                    mine.push((slot, k));
                    if round % 4 == 3 {
                        let (old, k) = mine.remove(round % mine.len());
                        assert_eq!(read(sf, old).unwrap(), pages[k]);
                        sf.free_slot(old).unwrap();
                    }
                }
                for (slot, k) in &mine {
                    assert_eq!(read(sf, *slot).unwrap(), pages[*k]);
                }
            });
        }
    });
    let st = sf.stats();
    assert_eq!(st.writes, 1200);
    assert_eq!(st.slots_in_use, 4 * 225);
    assert_eq!(st.blocks_stored, 4 * 225);
    assert_eq!(st.checksum_errors + st.read_errors + st.write_errors, 0);
}

#[test]
fn corruption_on_disk_is_detected() {
    let dir = TempDir::new("corrupt");
    let path = dir.path().join("swap");
    let sf = SwapFile::create(&path, 0, 64).unwrap();
    let pages = real_pages(4);
    let slots: Vec<_> = (0..4).map(|_| sf.alloc_slot().unwrap()).collect();
    for (s, p) in slots.iter().zip(&pages) {
        sf.write_page(*s, p).unwrap();
    }
    // Flip one byte through an unrelated descriptor, as a disk error would.
    let other = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let pos = sf.block_file_offset(slots[2]).unwrap() + 1234;
    let mut b = [0u8; 1];
    other.read_exact_at(&mut b, pos).unwrap();
    other.write_all_at(&[b[0] ^ 0x80], pos).unwrap();

    let mut buf = vec![0u8; PAGE_SIZE];
    match sf.read_page(slots[2], &mut buf) {
        Err(Error::Corrupt {
            slot,
            expected,
            actual,
        }) => {
            assert_eq!(slot, slots[2]);
            assert_ne!(expected, actual);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(
        buf.iter().all(|&b| b == 0),
        "corrupt data must not be returned"
    );
    assert_eq!(sf.stats().checksum_errors, 1);
    for i in [0, 1, 3] {
        assert_eq!(read(&sf, slots[i]).unwrap(), pages[i]);
    }
    // The file's own on-disk corruption hook, then a rewrite heals the slot.
    sf.corrupt_block(slots[0].offset, 0).unwrap();
    assert!(matches!(read(&sf, slots[0]), Err(Error::Corrupt { .. })));
    sf.write_page(slots[2], &pages[2]).unwrap();
    assert_eq!(read(&sf, slots[2]).unwrap(), pages[2]);
    assert_eq!(sf.stats().checksum_errors, 2);
}

#[test]
fn block_moved_to_another_slot_is_detected() {
    // Identical content at another offset must not verify: the checksum covers the offset.
    let dir = TempDir::new("moved");
    let path = dir.path().join("swap");
    let sf = SwapFile::create(&path, 0, 8).unwrap();
    let p = real_pages(2);
    let a = sf.alloc_slot().unwrap();
    let b = sf.alloc_slot().unwrap();
    sf.write_page(a, &p[0]).unwrap();
    sf.write_page(b, &p[1]).unwrap();
    let other = OpenOptions::new().write(true).open(&path).unwrap();
    other
        .write_all_at(&p[0], sf.block_file_offset(b).unwrap())
        .unwrap();
    assert!(matches!(read(&sf, b), Err(Error::Corrupt { .. })));
    assert_eq!(read(&sf, a).unwrap(), p[0]);
}

#[test]
fn injected_faults_are_reported_and_file_stays_usable() {
    let dir = TempDir::new("faults");
    let sf = SwapFile::create_temp(dir.path(), 0, 64).unwrap();
    let fi = sf.fault_injector();
    let pages = real_pages(16);
    let slots: Vec<_> = (0..16).map(|_| sf.alloc_slot().unwrap()).collect();
    for i in 0..4 {
        sf.write_page(slots[i], &pages[i]).unwrap();
    }
    let check_old = || {
        for i in 0..4 {
            assert_eq!(read(&sf, slots[i]).unwrap(), pages[i]);
        }
    };

    // EIO on writes.
    fi.fail_next_writes(2);
    for i in 4..6 {
        match sf.write_page(slots[i], &pages[i]) {
            Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
            other => panic!("expected EIO, got {other:?}"),
        }
        assert!(matches!(read(&sf, slots[i]), Err(Error::NotWritten(_))));
    }
    sf.write_page(slots[6], &pages[6]).unwrap();
    check_old();
    // A slot whose write failed and that held a block before holds nothing now.
    fi.fail_next_writes(1);
    assert!(sf.write_page(slots[6], &pages[0]).is_err());
    assert!(matches!(read(&sf, slots[6]), Err(Error::NotWritten(_))));

    // ENOSPC.
    fi.no_space_next_writes(1);
    assert!(matches!(
        sf.write_page(slots[7], &pages[7]),
        Err(Error::NoSpace { .. })
    ));
    sf.write_page(slots[7], &pages[7]).unwrap();
    check_old();

    // EIO on reads.
    fi.fail_next_reads(1);
    assert!(matches!(read(&sf, slots[0]), Err(Error::Io { .. })));
    // Short read.
    fi.short_next_reads(1);
    assert!(matches!(read(&sf, slots[0]), Err(Error::ShortRead { .. })));
    check_old();

    // Silent corruption of a write, and a misdirected write.
    fi.corrupt_next_writes(1);
    sf.write_page(slots[8], &pages[8]).unwrap();
    assert!(matches!(read(&sf, slots[8]), Err(Error::Corrupt { .. })));
    sf.write_page(slots[9], &pages[9]).unwrap();
    sf.write_page(slots[10], &pages[10]).unwrap();
    let (s9, s10) = (slots[9], slots[10]);
    let (lo, hi) = if s9.offset + 1 == s10.offset {
        (s9, s10)
    } else {
        (s10, s9)
    };
    assert_eq!(lo.offset + 1, hi.offset, "cluster allocation is sequential");
    fi.misdirect_next_writes(1);
    sf.write_page(lo, &pages[11]).unwrap(); // lands on `hi`
    assert!(matches!(read(&sf, lo), Err(Error::Corrupt { .. })));
    assert!(matches!(read(&sf, hi), Err(Error::Corrupt { .. })));
    check_old();

    let st = sf.stats();
    assert_eq!(st.write_errors, 4);
    assert_eq!(st.no_space_errors, 1);
    assert_eq!(st.read_errors, 2);
    assert_eq!(st.short_reads, 1);
    assert_eq!(st.checksum_errors, 3);
    assert_eq!(st.faults_injected, 8);
    // Disarmed: everything works again.
    fi.fail_next_reads(5);
    fi.clear();
    check_old();
}

#[test]
fn real_short_read_after_truncation() {
    let dir = TempDir::new("trunc");
    let path = dir.path().join("swap");
    let sf = SwapFile::create(&path, 0, 4).unwrap();
    let p = real_pages(4);
    let slots: Vec<_> = (0..4).map(|_| sf.alloc_slot().unwrap()).collect();
    for (s, pg) in slots.iter().zip(&p) {
        sf.write_page(*s, pg).unwrap();
    }
    let last = *slots.iter().max_by_key(|s| s.offset).unwrap();
    let cut = sf.block_file_offset(last).unwrap() + 100;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    match read(&sf, last) {
        Err(Error::ShortRead { got, want, .. }) => assert_eq!((got, want), (100, PAGE_SIZE)),
        other => panic!("expected ShortRead, got {other:?}"),
    }
    assert_eq!(sf.stats().short_reads, 1);
    // Still usable: the other blocks read, and rewriting the cut block extends the file again.
    for (s, pg) in slots.iter().zip(&p) {
        if *s != last {
            assert_eq!(&read(&sf, *s).unwrap(), pg);
        }
    }
    let k = slots.iter().position(|s| *s == last).unwrap();
    sf.write_page(last, &p[k]).unwrap();
    assert_eq!(read(&sf, last).unwrap(), p[k]);
}

#[test]
fn discard_punches_a_hole() {
    let dir = TempDir::new("discard");
    let path = dir.path().join("swap");
    let sf = SwapFile::create(&path, 0, 512).unwrap();
    let p = real_pages(1);
    let slots: Vec<_> = (0..256).map(|_| sf.alloc_slot().unwrap()).collect();
    for s in &slots {
        sf.write_page(*s, &p[0]).unwrap();
    }
    sf.sync().unwrap();
    let before = std::fs::metadata(&path).unwrap().blocks();
    for s in &slots {
        sf.discard(*s);
    }
    sf.sync().unwrap();
    let after = std::fs::metadata(&path).unwrap().blocks();
    assert!(matches!(read(&sf, slots[0]), Err(Error::NotWritten(_))));
    assert_eq!(sf.stats().discards, 256);
    assert_eq!(sf.stats().blocks_stored, 0);
    assert_eq!(sf.slots_in_use(), 256, "discard keeps the slot allocated");
    // 256 blocks of 4 KiB = 2048 sectors of 512 B; allow for filesystems that punch lazily.
    assert!(
        before - after >= 1024,
        "punching holes freed only {} sectors",
        before - after
    );
    sf.discard(SwapSlot::new(9, 0)); // invalid slots are ignored
}

#[test]
fn cluster_discard_waits_for_the_last_block() {
    let dir = TempDir::new("clusterdiscard");
    let path = dir.path().join("swap");
    let sf = SwapFile::create(&path, 0, 2 * CLUSTER_SLOTS as u64).unwrap();
    let p = real_pages(1);
    let slots: Vec<_> = (0..CLUSTER_SLOTS)
        .map(|_| sf.alloc_slot().unwrap())
        .collect();
    let cluster = slots[0].offset / CLUSTER_SLOTS as u64;
    assert!(slots
        .iter()
        .all(|s| s.offset / CLUSTER_SLOTS as u64 == cluster));
    for s in &slots {
        sf.write_page(*s, &p[0]).unwrap();
    }
    sf.sync().unwrap();
    let blocks = || std::fs::metadata(&path).unwrap().blocks();
    let full = blocks();
    for s in &slots[..CLUSTER_SLOTS - 1] {
        sf.discard(*s);
    }
    sf.sync().unwrap();
    assert!(
        full - blocks() < 64,
        "space returned before the cluster was empty"
    );
    assert_eq!(read(&sf, slots[CLUSTER_SLOTS - 1]).unwrap(), p[0]);
    sf.free_slot(slots[CLUSTER_SLOTS - 1]).unwrap(); // the last block goes with its slot
    sf.sync().unwrap();
    assert!(
        full - blocks() >= (CLUSTER_SLOTS * 8) as u64 * 3 / 4,
        "cluster not punched: {} of {} sectors back",
        full - blocks(),
        CLUSTER_SLOTS * 8
    );
    // The punched cluster takes blocks again.
    sf.write_page(slots[3], &p[0]).unwrap();
    assert_eq!(read(&sf, slots[3]).unwrap(), p[0]);
}

#[test]
fn concurrent_write_discard_in_one_cluster_never_loses_a_block() {
    // Threads share one cluster and keep emptying it, so its hole is punched again and again
    // while the others write: a punch must never erase a block written after it was decided.
    let dir = TempDir::new("punchrace");
    let sf = SwapFile::create_temp(dir.path(), 0, CLUSTER_SLOTS as u64).unwrap();
    let pages = real_pages(4);
    let slots: Vec<_> = (0..8).map(|_| sf.alloc_slot().unwrap()).collect();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (sf, pages, slots) = (&sf, &pages, &slots);
            s.spawn(move || {
                let mine = [slots[2 * t], slots[2 * t + 1]];
                for round in 0..3000usize {
                    let slot = mine[round % 2];
                    let k = (t + round) % pages.len();
                    sf.write_page(slot, &pages[k]).unwrap();
                    assert_eq!(
                        read(sf, slot).unwrap(),
                        pages[k],
                        "thread {t} round {round}"
                    );
                    sf.discard(slot);
                }
            });
        }
    });
    let st = sf.stats();
    assert_eq!(st.checksum_errors + st.read_errors + st.write_errors, 0);
    assert_eq!(st.blocks_stored, 0);
}

/// Mounts a `size`-limited tmpfs at `dir` in a mount namespace private to the calling thread
/// (`unshare(CLONE_NEWNS)`, then `/` made recursively private), so the system's mount table is
/// never touched: the mount vanishes with the thread. `Err` when not permitted (not root).
fn private_tmpfs(dir: &Path, size: &str) -> Result<(), String> {
    // SAFETY: unshare takes no pointers; CLONE_NEWNS gives this thread its own fs/mount view.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNS): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: valid NUL-terminated strings; null source/fstype/data are allowed for a
    // propagation change.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "making / private: {}",
            std::io::Error::last_os_error()
        ));
    }
    let target = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let opts = std::ffi::CString::new(format!("size={size},mode=0700")).unwrap();
    // SAFETY: all pointers are valid NUL-terminated strings living across the call.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(format!("mount tmpfs: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// ENOSPC from a real, tiny filesystem: a 256 KiB tmpfs in a private mount namespace (needs
/// root, changes nothing outside this test's thread). Without the privilege it is skipped; the
/// injector covers the same error path in `injected_faults_are_reported_and_file_stays_usable`.
#[test]
fn real_enospc_on_tiny_tmpfs() {
    let dir = TempDir::new("enospc");
    let path = dir.path().to_path_buf();
    // The namespace belongs to this thread only, so the whole test body runs in it.
    std::thread::spawn(move || {
        if let Err(why) = private_tmpfs(&path, "256k") {
            writeln!(
                std::io::stderr(),
                "SKIPPED: real_enospc_on_tiny_tmpfs: cannot mount a private tmpfs: {why}"
            )
            .ok();
            return;
        }
        enospc_body(&path);
    })
    .join()
    .expect("ENOSPC test body failed");
}

fn enospc_body(dir: &Path) {
    // 1024 slots (4 MiB) in a sparse file on a 256 KiB filesystem.
    let sf = SwapFile::create(&dir.join("swap"), 0, 1024).unwrap();
    // Space must come back per discarded block for the retry below.
    sf.set_discard_policy(DiscardPolicy::Block);
    let p = real_pages(8);
    let mut written = Vec::new();
    let mut nospace = None;
    for i in 0..1024usize {
        let s = sf.alloc_slot().unwrap();
        match sf.write_page(s, &p[i % 8]) {
            Ok(()) => written.push((s, i % 8)),
            Err(Error::NoSpace { .. }) => {
                nospace = Some(s);
                break;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    let failed = nospace.expect("a 256 KiB filesystem must fill up");
    assert!(
        written.len() > 10 && written.len() < 64,
        "{} blocks fit",
        written.len()
    );
    assert_eq!(sf.stats().no_space_errors, 1);
    for (s, k) in &written {
        assert_eq!(read(&sf, *s).unwrap(), p[*k]);
    }
    // Discarding blocks gives space back; the failed slot can then be written.
    for (s, _) in written.drain(..4) {
        sf.discard(s);
    }
    sf.write_page(failed, &p[0]).unwrap();
    assert_eq!(read(&sf, failed).unwrap(), p[0]);
}

#[derive(Clone, Debug)]
enum OpKind {
    Alloc,
    Free(usize),
    Write(usize, usize),
    Read(usize),
    Discard(usize),
}

fn op() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        3 => Just(OpKind::Alloc),
        1 => (0..64usize).prop_map(OpKind::Free),
        3 => (0..64usize, 0..8usize).prop_map(|(a, b)| OpKind::Write(a, b)),
        3 => (0..64usize).prop_map(OpKind::Read),
        1 => (0..64usize).prop_map(OpKind::Discard),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The swap file behaves like a map slot -> Option<page> with a bounded set of slots.
    #[test]
    fn model_matches(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = TempDir::new("model");
        let sf = SwapFile::create_temp(dir.path(), 1, 24).unwrap();
        let pages = real_pages(8);
        let mut model: HashMap<u64, Option<usize>> = HashMap::new(); // allocated -> content
        for o in ops {
            match o {
                OpKind::Alloc => match sf.alloc_slot() {
                    Ok(s) => prop_assert!(model.insert(s.offset, None).is_none()),
                    Err(Error::Full) => prop_assert_eq!(model.len(), 24),
                    Err(e) => prop_assert!(false, "alloc: {}", e),
                },
                OpKind::Free(i) => {
                    let s = SwapSlot::new(1, (i % 24) as u64);
                    let r = sf.free_slot(s);
                    if model.remove(&s.offset).is_some() {
                        prop_assert!(r.is_ok());
                    } else {
                        prop_assert!(matches!(r, Err(Error::NotAllocated(_))));
                    }
                }
                OpKind::Write(i, k) => {
                    let s = SwapSlot::new(1, (i % 24) as u64);
                    let r = sf.write_page(s, &pages[k]);
                    if let Some(c) = model.get_mut(&s.offset) {
                        prop_assert!(r.is_ok());
                        *c = Some(k);
                    } else {
                        prop_assert!(matches!(r, Err(Error::NotAllocated(_))));
                    }
                }
                OpKind::Read(i) => {
                    let s = SwapSlot::new(1, (i % 24) as u64);
                    match (model.get(&s.offset).copied().flatten(), read(&sf, s)) {
                        (Some(k), Ok(data)) => prop_assert_eq!(&data, &pages[k]),
                        (None, Err(Error::NotWritten(_))) => {}
                        (m, r) => prop_assert!(false, "model {:?} vs {:?}", m, r.map(|_| ())),
                    }
                }
                OpKind::Discard(i) => {
                    let s = SwapSlot::new(1, (i % 24) as u64);
                    sf.discard(s);
                    if let Some(c) = model.get_mut(&s.offset) {
                        *c = None;
                    }
                }
            }
            prop_assert_eq!(sf.slots_in_use(), model.len() as u64);
        }
        let st = sf.stats();
        prop_assert_eq!(st.blocks_stored, model.values().filter(|c| c.is_some()).count() as u64);
        prop_assert_eq!(st.checksum_errors + st.read_errors + st.write_errors, 0);
    }
}

/// O_DIRECT data blocks: every page written reads back bit-identical, through a fresh reopen
/// too (the blocks reached the file, not just a cache). Skipped visibly where the file
/// system refuses O_DIRECT.
#[test]
fn direct_io_pages_read_back_identical() {
    let dir = std::env::var_os("UZSWAP_DIRECT_IO_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/var/tmp"));
    let path = dir.join(format!("uzswap-direct-io-{}.swap", std::process::id()));
    let mut sf = uzswap_backing::SwapFile::create(&path, 0, 1024).unwrap();
    match sf.enable_direct_io() {
        Ok(()) => {}
        Err(e @ uzswap_backing::Error::DirectIoRefused { .. }) => {
            std::fs::remove_file(&path).ok();
            use std::io::Write as _;
            writeln!(std::io::stderr(), "SKIPPED: {}: {e}", dir.display()).ok();
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert!(sf.direct_io());
    let page = |i: u64| -> Vec<u8> {
        (0..4096u64)
            .map(|b| (b.wrapping_mul(31) ^ i.wrapping_mul(131)) as u8)
            .collect()
    };
    let mut slots = Vec::new();
    for i in 0..300u64 {
        let s = sf.alloc_slot().unwrap();
        sf.write_page(s, &page(i)).unwrap();
        slots.push(s);
    }
    let mut buf = vec![0u8; 4096];
    for (i, s) in slots.iter().enumerate() {
        sf.read_page(*s, &mut buf).unwrap();
        assert_eq!(buf, page(i as u64));
    }
    sf.sync().unwrap();
    drop(sf);
    let sf = uzswap_backing::SwapFile::open(&path).unwrap();
    for (i, s) in slots.iter().enumerate() {
        sf.read_page(*s, &mut buf).unwrap();
        assert_eq!(buf, page(i as u64));
    }
    std::fs::remove_file(&path).unwrap();
}

/// A file made on first write: nothing is made until a write needs it (here the directory
/// does not exist yet, so the first write fails as an I/O error would: counted, the slot holds
/// nothing, the area stays usable), then the first writes of several threads at once make one
/// file, and every page reads back.
#[test]
fn a_file_made_on_first_write_is_made_once_and_its_failure_is_survived() {
    let base = TempDir::new("lazy");
    let dir = base.path().join("not-yet");
    let sf = SwapFile::create_temp_on_first_write(&dir, 3, 1024).unwrap();
    let a = sf.alloc_slot().unwrap();
    let b = sf.alloc_slot().unwrap();
    sf.free_slot(b).unwrap();
    sf.discard(a);
    sf.sync().unwrap();
    assert!(!dir.exists());
    let pages = real_pages(64);
    assert!(
        sf.write_page(a, &pages[0]).is_err(),
        "no directory to make it in"
    );
    assert_eq!(sf.stats().write_errors, 1);
    assert!(matches!(read(&sf, a), Err(Error::NotWritten(_))));

    std::fs::create_dir(&dir).unwrap();
    let slots: Vec<SwapSlot> = (0..63).map(|_| sf.alloc_slot().unwrap()).collect();
    std::thread::scope(|s| {
        for (t, chunk) in slots.chunks(16).enumerate() {
            let (sf, pages) = (&sf, &pages);
            s.spawn(move || {
                for (k, &slot) in chunk.iter().enumerate() {
                    sf.write_page(slot, &pages[1 + t * 16 + k]).unwrap();
                }
            });
        }
    });
    for (i, &slot) in slots.iter().enumerate() {
        assert_eq!(read(&sf, slot).unwrap(), pages[1 + i], "slot {i}");
    }
    sf.write_page(a, &pages[0]).unwrap();
    assert_eq!(read(&sf, a).unwrap(), pages[0]);
    sf.sync().unwrap();
    // One unnamed file in the directory's file system, none named in the directory.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// A fork child's private copy (`take_private_copy`): every written block reads back identical
/// from the new file, under the same descriptors, with O_DIRECT too (where the file system takes
/// it); what this `SwapFile` writes, frees or punches afterwards never reaches the original
/// file, which still holds every block it had (reopened by name). A file not made yet copies
/// nothing and makes nothing.
#[test]
fn a_private_copy_holds_the_same_blocks_and_leaves_the_original_alone() {
    let dir = TempDir::new("private-copy");
    let pages = real_pages(700);
    for direct in [false, true] {
        let path = dir.path().join(format!("area-{direct}.swap"));
        let mut sf = SwapFile::create(&path, 2, 4 * CLUSTER_SLOTS as u64).unwrap();
        if direct {
            let o_direct_dir = std::env::var_os("UZSWAP_DIRECT_IO_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/tmp"));
            let probe = o_direct_dir.join(format!("uzswap-pc-{}.swap", std::process::id()));
            let mut p = SwapFile::create(&probe, 2, 4 * CLUSTER_SLOTS as u64).unwrap();
            let refused = p.enable_direct_io().is_err();
            drop(p);
            std::fs::remove_file(&probe).ok();
            if refused || sf.enable_direct_io().is_err() {
                writeln!(std::io::stderr(), "SKIPPED: O_DIRECT private copy").ok();
                continue;
            }
        }
        let fds_before = sf.raw_fds();
        // Runs and gaps over three clusters: slot k holds page k unless freed or discarded.
        let slots: Vec<SwapSlot> = (0..pages.len()).map(|_| sf.alloc_slot().unwrap()).collect();
        let mut held = HashMap::new();
        for (k, s) in slots.iter().enumerate() {
            if k % 7 == 3 {
                continue; // allocated, never written
            }
            sf.write_page(*s, &pages[k]).unwrap();
            held.insert(*s, k);
        }
        for (k, s) in slots.iter().enumerate() {
            if k % 11 == 5 && held.remove(s).is_some() {
                if k % 2 == 0 {
                    sf.free_slot(*s).unwrap();
                } else {
                    sf.discard(*s);
                }
            }
        }
        sf.take_private_copy(dir.path()).unwrap();
        assert_eq!(
            sf.raw_fds(),
            fds_before,
            "the descriptors keep their numbers"
        );
        assert_eq!(sf.direct_io(), direct);
        let mut buf = vec![0u8; PAGE_SIZE];
        for (s, &k) in &held {
            sf.read_page(*s, &mut buf).unwrap();
            assert_eq!(buf, pages[k], "slot {s:?} after the copy");
        }
        // Changes after the copy: overwrite some blocks, free others (a whole cluster's worth,
        // so that its hole is punched in the copy).
        let mut changed = Vec::new();
        for (s, &k) in held.iter().filter(|(s, _)| s.offset % 3 == 0) {
            sf.write_page(*s, &pages[(k + 1) % pages.len()]).unwrap();
            changed.push(*s);
        }
        for (s, _) in held.iter().filter(|(s, _)| s.offset < CLUSTER_SLOTS as u64) {
            if sf.is_written(*s) {
                sf.free_slot(*s).unwrap();
            }
        }
        sf.sync().unwrap();
        drop(sf);
        let orig = SwapFile::open(&path).unwrap();
        for (s, &k) in &held {
            orig.read_page(*s, &mut buf).unwrap();
            assert_eq!(buf, pages[k], "the original's slot {s:?}");
        }
        assert!(!changed.is_empty());
        let st = orig.stats();
        assert_eq!(st.checksum_errors + st.read_errors, 0);
    }
    let lazy_dir = dir.path().join("lazy-not-made");
    let lazy = SwapFile::create_temp_on_first_write(&lazy_dir, 1, 1024).unwrap();
    lazy.take_private_copy(dir.path()).unwrap();
    assert_eq!(lazy.raw_fds(), [None, None]);
    assert!(!lazy_dir.exists());
}

/// A private copy that cannot be made (here its directory does not exist; a full file system
/// fails the same way, block by block): every written block is listed as not copied, the switch
/// puts a read-only `/dev/null` under the descriptors, and from then on nothing reaches the
/// original file: writes fail (counted), reads of the listed blocks fail, never with wrong data,
/// and the original keeps every block (reopened by name).
#[test]
fn a_private_copy_that_cannot_be_made_lists_every_block_and_writes_nowhere() {
    let dir = TempDir::new("private-copy-fails");
    let path = dir.path().join("area.swap");
    let sf = SwapFile::create(&path, 1, 2 * CLUSTER_SLOTS as u64).unwrap();
    let pages = real_pages(40);
    let slots: Vec<SwapSlot> = (0..pages.len()).map(|_| sf.alloc_slot().unwrap()).collect();
    for (s, p) in slots.iter().zip(&pages) {
        sf.write_page(*s, p).unwrap();
    }
    let copy = sf.private_copy(&dir.path().join("missing"));
    let mut failed = copy.failed().to_vec();
    failed.sort_unstable();
    assert_eq!(failed, slots.iter().map(|s| s.offset).collect::<Vec<_>>());
    sf.switch_to_copy(copy).unwrap();
    let errors = sf.stats().write_errors;
    assert!(sf.write_page(slots[0], &pages[1]).is_err());
    assert_eq!(sf.stats().write_errors, errors + 1);
    let mut buf = vec![0u8; PAGE_SIZE];
    assert!(sf.read_page(slots[2], &mut buf).is_err());
    assert!(
        buf.iter().all(|&b| b == 0),
        "a failed read hands out nothing"
    );
    drop(sf);
    let orig = SwapFile::open(&path).unwrap();
    for (s, p) in slots.iter().zip(&pages) {
        orig.read_page(*s, &mut buf).unwrap();
        assert_eq!(&buf, p);
    }
}
