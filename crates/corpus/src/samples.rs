// SPDX-License-Identifier: MIT
//! Sample pages for tests, benchmarks and examples: 4 KiB slices of ELF binaries and shared
//! libraries on this machine (the running executable itself always exists), live process
//! memory, and structured pages real memory is full of. Unlike a capture or the default corpus
//! these take no time and need no workload; every test of a codec or of the kernel's sizes
//! starts from them.

/// Bytes in a page.
pub const PAGE: usize = crate::PAGE_SIZE;

/// Files whose pages are used, in order; missing ones are skipped.
pub fn page_files() -> Vec<std::path::PathBuf> {
    let mut v = vec![std::env::current_exe().expect("test executable path")];
    for p in [
        "/usr/bin/bash",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/bin/perl",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/usr/bin/python3",
    ] {
        let p = std::path::PathBuf::from(p);
        if p.exists() {
            v.push(p);
        }
    }
    v
}

/// Up to `max` distinct-position pages from the files above, taken round-robin across files so
/// that a small `max` still sees every kind of data.
pub fn real_pages(max: usize) -> Vec<Vec<u8>> {
    let files: Vec<Vec<u8>> = page_files()
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    let mut out = Vec::new();
    let mut idx = 0usize;
    loop {
        let mut any = false;
        for f in &files {
            let start = idx * PAGE;
            if start + PAGE <= f.len() {
                out.push(f[start..start + PAGE].to_vec());
                any = true;
                if out.len() >= max {
                    return out;
                }
            }
        }
        if !any {
            return out;
        }
        idx += 1;
    }
}

/// Structured pages: all zero, one byte value, runs, short repeated patterns, sparse data in a
/// zero page, a counter table, and pseudo-random (incompressible) bytes.
pub fn special_pages() -> Vec<Vec<u8>> {
    let mut v = vec![vec![0u8; PAGE], vec![0xa5u8; PAGE]];
    let mut runs = vec![0u8; PAGE];
    for (i, b) in runs.iter_mut().enumerate() {
        *b = ((i / 300) % 3) as u8 * 0x11;
    }
    v.push(runs);
    for period in [2usize, 3, 7, 8, 13, 64] {
        v.push((0..PAGE).map(|i| (i % period) as u8 ^ 0x5a).collect());
    }
    let mut sparse = vec![0u8; PAGE];
    for i in (0..PAGE).step_by(97) {
        sparse[i] = (i / 97) as u8 | 1;
    }
    v.push(sparse);
    let mut long_zero_runs = vec![0u8; PAGE];
    long_zero_runs[5] = 1;
    long_zero_runs[2100] = 2;
    long_zero_runs[4090] = 3;
    v.push(long_zero_runs);
    v.push((0..PAGE as u32 / 4).flat_map(|i| i.to_le_bytes()).collect());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    v.push(
        (0..PAGE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect(),
    );
    v
}

/// Up to `max` pages of this process's own private writable memory (heap and anonymous
/// mappings), read through /proc/self/mem: live, real memory as swap would see it.
pub fn process_pages(max: usize) -> Vec<Vec<u8>> {
    pid_pages("self", max)
}

/// Up to `max` private writable pages of process `pid` ("self" or a number) via
/// /proc/PID/mem (needs ptrace rights over it, e.g. root). Unreadable pages are skipped.
pub fn pid_pages(pid: &str, max: usize) -> Vec<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    // Give the heap some realistic content first: strings, pointers, small structs.
    let keep: Vec<String> = (0..20_000)
        .map(|i| format!("entry-{i}-{:x}", i * 2654435761u64))
        .collect();
    let keep2: Vec<Box<(u64, u32, [u8; 12])>> = (0..5000u64)
        .map(|i| Box::new((i * 7, (i % 13) as u32, [i as u8; 12])))
        .collect();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut mem = match std::fs::File::open(format!("/proc/{pid}/mem")) {
        Ok(f) => f,
        Err(_) => return Vec::new(),
    };
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms)) = (it.next(), it.next()) else {
            continue;
        };
        let path = it.nth(3).unwrap_or("");
        if !perms.starts_with("rw") || !(path.is_empty() || path == "[heap]") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let mut addr = a;
        while addr + PAGE as u64 <= b && out.len() < max {
            let mut page = vec![0u8; PAGE];
            if mem.seek(SeekFrom::Start(addr)).is_ok()
                && mem.read_exact(&mut page).is_ok()
                && page.iter().any(|&b| b != 0)
            {
                out.push(page);
            }
            addr += PAGE as u64;
        }
    }
    drop((keep, keep2));
    out
}

/// Pages of real binaries from /usr/bin (and libraries), skipping all-zero pages.
pub fn binary_pages(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    let dirs = ["/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/lib"];
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut v: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            v.sort();
            files.extend(v);
        }
    }
    for f in files {
        if out.len() >= n {
            break;
        }
        let Ok(meta) = std::fs::metadata(&f) else {
            continue;
        };
        if !meta.is_file() || meta.len() < PAGE as u64 * 2 {
            continue;
        }
        let Ok(data) = std::fs::read(&f) else {
            continue;
        };
        for c in data.chunks_exact(PAGE).take(64) {
            if out.len() >= n {
                break;
            }
            if c.iter().any(|&b| b != 0) {
                out.push(c.to_vec());
            }
        }
    }
    // Fallback on a minimal system: structured pages.
    let mut i = 0u64;
    while out.len() < n {
        out.push(structured_page(i));
        i += 1;
    }
    out
}

/// A page of structured data (a table of little-endian integers and text).
pub fn structured_page(seed: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    for (i, c) in p.chunks_exact_mut(16).enumerate() {
        let v = seed.wrapping_mul(0x9e37_79b9).wrapping_add(i as u64 * 3);
        c[..8].copy_from_slice(&v.to_le_bytes());
        c[8..16].copy_from_slice(b"rec:item");
    }
    p
}
