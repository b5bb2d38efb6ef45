// SPDX-License-Identifier: MIT
//! Capture, page files and the default corpus against real processes.

use std::io::Write;
use std::process::{Command, Stdio};
use uzswap_corpus::*;

#[test]
fn capture_self_finds_heap_data() {
    // A recognisable heap allocation in this process.
    let marker: Vec<u8> = b"uzswap-capture-marker:"
        .iter()
        .cycle()
        .take(64 * 4096)
        .copied()
        .collect();
    let cap = capture_pid(std::process::id()).unwrap();
    assert!(cap.pages.len() > 16, "{} pages", cap.pages.len());
    assert!(cap.ranges_read > 0);
    assert!(cap.used_pagemap);
    let needle = &marker[..4096];
    assert!(
        cap.pages.iter().any(|p| p == needle),
        "marker page not captured"
    );
    std::hint::black_box(&marker);
}

#[test]
fn capture_limit() {
    let cap = capture_pid_with(std::process::id(), &CaptureOptions { max_pages: Some(5) }).unwrap();
    assert_eq!(cap.pages.len(), 5);
    assert!(cap.truncated);
}

#[test]
fn bad_pid_is_clear() {
    let e = capture_pid(999_999_999).unwrap_err().to_string();
    assert!(e.contains("no process with pid 999999999"), "{e}");
    assert!(capture_pid(0).is_err());
}

#[test]
fn capture_of_a_child_then_its_exit() {
    // A live child is captured (its stack at least); once reaped, its pid gives a clear error.
    // (Injected unreadable ranges are tested in capture.rs.)
    let Ok(mut child) = Command::new("sleep").arg("5").stdin(Stdio::null()).spawn() else {
        return;
    };
    // Wait for the exec to complete (before it, the child is still a copy of this binary).
    for _ in 0..500 {
        let comm =
            std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap_or_default();
        if comm.trim() == "sleep" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let cap = capture_pid(child.id()).unwrap();
    assert!(cap.ranges_read > 0 && !cap.pages.is_empty(), "{cap:?}");
    assert!(cap.pages.source().contains("(sleep)"));
    child.kill().unwrap();
    child.wait().unwrap();
    let e = capture_pid(child.id()).unwrap_err().to_string();
    assert!(e.contains("no process"), "{e}");
}

#[test]
fn page_file_roundtrip_on_disk() {
    let cap = capture_pid_with(
        std::process::id(),
        &CaptureOptions {
            max_pages: Some(32),
        },
    )
    .unwrap();
    let path = std::env::temp_dir().join(format!("uzswap-corpus-{}.pages", std::process::id()));
    write_page_file(&path, &cap.pages).unwrap();
    let back = read_page_file(&path).unwrap();
    assert_eq!(back, cap.pages);
    // Truncate the file: a clear error.
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 10).unwrap();
    let e = read_page_file(&path).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
    // Raw dump: accepted.
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(cap.pages.as_bytes()).unwrap();
    drop(f);
    assert_eq!(
        read_page_file(&path).unwrap().as_bytes(),
        cap.pages.as_bytes()
    );
    std::fs::remove_file(&path).unwrap();
    // The message names the file; the operating system's reason is the error's source (shown
    // once by `{:#}` chains), not repeated in the message.
    let e = read_page_file(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("cannot read page file {}", path.display())
    );
    match e {
        Error::ReadPageFile { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn default_corpus_is_real_memory() {
    let p = default_corpus_with(&DefaultCorpusOptions {
        max_pages: 1024,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(p.len(), 1024, "{}", p.source());
    assert!(
        p.source().contains("workload") || p.source().contains("ELF"),
        "{}",
        p.source()
    );
    // Real memory compresses: many pages contain text we put there, few are all distinct bytes.
    let text_pages = p
        .iter()
        .filter(|pg| {
            pg.windows(5)
                .any(|w| w == b"alpha" || w == b"kernel" || w == b"swap")
        })
        .count();
    assert!(
        text_pages > 10,
        "only {text_pages} pages with workload text: {}",
        p.source()
    );
}

#[test]
fn huge_sparse_range_reads_only_resident_pages() {
    // 16 GiB of reserved address space with three touched pages.
    let len = 16usize << 30;
    // SAFETY: anonymous private mapping with no hint; checked; unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED);
    let base = addr.cast::<u8>();
    for (k, off) in [0usize, 5 << 30, len - PAGE_SIZE].into_iter().enumerate() {
        // SAFETY: off is inside the mapping, page-aligned, and the page is ours.
        unsafe { std::ptr::write_bytes(base.add(off), b'a' + k as u8, PAGE_SIZE) };
    }
    let t = std::time::Instant::now();
    let cap = capture_pid(std::process::id()).unwrap();
    let took = t.elapsed();
    for k in 0..3u8 {
        let want = [b'a' + k; PAGE_SIZE];
        assert!(
            cap.pages.iter().any(|p| p == want),
            "touched page {k} missing"
        );
    }
    assert!(cap.pages_not_resident >= len / PAGE_SIZE - 3);
    assert!(
        took.as_secs() < 20,
        "capture of a sparse range took {took:?}"
    );
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(addr, len) };
}
