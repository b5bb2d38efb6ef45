// SPDX-License-Identifier: MIT
//! Capture a live process's private, writable, anonymous memory.

use crate::{Error, Pages, Result, PAGE_SIZE};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// pagemap entry bit 63: page present in RAM.
const PM_PRESENT: u64 = 1 << 63;

/// Options of [`capture_pid_with`].
#[derive(Clone, Debug, Default)]
pub struct CaptureOptions {
    /// Stop after this many pages (None = all).
    pub max_pages: Option<usize>,
}

/// What a capture read, and what it had to skip.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The pages read, in address order.
    pub pages: Pages,
    /// The process captured.
    pub pid: u32,
    /// The process's `comm` name.
    pub comm: String,
    /// Candidate ranges (private, writable, anonymous) read fully or partly.
    pub ranges_read: usize,
    /// Candidate ranges where reading failed (their unread pages are in `pages_skipped`).
    pub ranges_skipped: usize,
    /// Pages of candidate ranges that could not be read.
    pub pages_skipped: usize,
    /// Pages of candidate ranges not resident (not present in pagemap), not read.
    pub pages_not_resident: usize,
    /// True when `/proc/PID/pagemap` was readable and only resident pages were read.
    pub used_pagemap: bool,
    /// True when `max_pages` stopped the capture early.
    pub truncated: bool,
}

/// One parsed line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry {
    /// First address of the range.
    pub start: u64,
    /// First address after the range.
    pub end: u64,
    /// `r` permission.
    pub readable: bool,
    /// `w` permission.
    pub writable: bool,
    /// `p` (private, copy-on-write) rather than `s` (shared).
    pub private: bool,
    /// Inode of the backing file (0 for anonymous memory).
    pub inode: u64,
    /// Backing path or kernel name (`[heap]`, `[anon:NAME]`); empty for plain anonymous memory.
    pub path: String,
}

impl MapsEntry {
    /// Anonymous memory: no backing file (no path) or a kernel-named anonymous area
    /// (`[heap]`, `[stack]`, `[anon:NAME]`); never `[vdso]`, `[vvar]` and the like.
    pub fn is_anonymous(&self) -> bool {
        if self.path.is_empty() {
            return self.inode == 0;
        }
        self.path == "[heap]"
            || self.path == "[stack]"
            || self.path.starts_with("[stack:")
            || self.path.starts_with("[anon:")
    }

    /// What the kernel would swap: private, writable, readable, anonymous.
    pub fn is_candidate(&self) -> bool {
        self.private && self.writable && self.readable && self.is_anonymous()
    }

    /// Number of pages in the range.
    pub fn pages(&self) -> usize {
        ((self.end - self.start) / PAGE_SIZE as u64) as usize
    }
}

/// Parse one `/proc/PID/maps` line: `start-end perms offset dev inode [path]`.
pub fn parse_maps_line(line: &str) -> std::result::Result<MapsEntry, String> {
    let mut f = line.splitn(6, ' ');
    let range = f.next().ok_or("empty line")?;
    let perms = f.next().ok_or("missing permissions")?;
    let _offset = f.next().ok_or("missing offset")?;
    let _dev = f.next().ok_or("missing device")?;
    let inode = f.next().ok_or("missing inode")?;
    let path = f.next().unwrap_or("").trim().to_string();
    let (s, e) = range
        .split_once('-')
        .ok_or_else(|| format!("bad range {range:?}"))?;
    let start = u64::from_str_radix(s, 16).map_err(|e| format!("bad start {s:?}: {e}"))?;
    let end = u64::from_str_radix(e, 16).map_err(|err| format!("bad end {e:?}: {err}"))?;
    if end < start {
        return Err(format!("range end before start: {range}"));
    }
    let p = perms.as_bytes();
    if p.len() != 4 {
        return Err(format!("bad permissions {perms:?}"));
    }
    let inode = inode
        .parse::<u64>()
        .map_err(|e| format!("bad inode {inode:?}: {e}"))?;
    Ok(MapsEntry {
        start,
        end,
        readable: p[0] == b'r',
        writable: p[1] == b'w',
        private: p[3] == b'p',
        inode,
        path,
    })
}

/// Parse a whole `/proc/PID/maps` text (blank lines are skipped); `path` names the file in
/// errors, which quote the offending line.
pub fn parse_maps(path: &std::path::Path, text: &str) -> Result<Vec<MapsEntry>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            parse_maps_line(line).map_err(|d| Error::MalformedMaps {
                path: path.to_path_buf(),
                detail: format!("{d} in line {line:?}"),
            })
        })
        .collect()
}

/// Pages whose pagemap entries are examined at once.
const WINDOW: usize = 4096;
/// Pages read from `/proc/PID/mem` with one call.
const READ_CHUNK: usize = 64;

/// Which of `count` pages from `start` are resident; all of them when pagemap is not
/// available or cannot be read for this range.
fn residency(pagemap: Option<&dyn ReadAt>, start: u64, count: usize) -> Vec<bool> {
    let Some(pm) = pagemap else {
        return vec![true; count];
    };
    let mut raw = vec![0u8; count * 8];
    if pm
        .read_exact_at(&mut raw, start / PAGE_SIZE as u64 * 8)
        .is_err()
    {
        return vec![true; count];
    }
    raw.chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) & PM_PRESENT != 0)
        .collect()
}

/// Capture all resident private writable anonymous pages of `pid`.
pub fn capture_pid(pid: u32) -> Result<Capture> {
    capture_pid_with(pid, &CaptureOptions::default())
}

fn proc_err(pid: u32, path: PathBuf, e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::NotFound => Error::NoSuchProcess(pid),
        ErrorKind::PermissionDenied => Error::PermissionDenied { pid, path },
        _ if e.raw_os_error() == Some(libc::ESRCH) => Error::NoSuchProcess(pid),
        _ => Error::Proc { path, source: e },
    }
}

/// Capture with options (a page limit).
pub fn capture_pid_with(pid: u32, opts: &CaptureOptions) -> Result<Capture> {
    if pid == 0 {
        return Err(Error::NoSuchProcess(0));
    }
    let dir = PathBuf::from(format!("/proc/{pid}"));
    if !dir.exists() {
        return Err(Error::NoSuchProcess(pid));
    }
    let comm = std::fs::read_to_string(dir.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let maps_path = dir.join("maps");
    let maps =
        std::fs::read_to_string(&maps_path).map_err(|e| proc_err(pid, maps_path.clone(), e))?;
    let mem_path = dir.join("mem");
    let mem = File::open(&mem_path).map_err(|e| proc_err(pid, mem_path.clone(), e))?;
    // pagemap: readable flags need no privilege beyond ptrace access; fall back to reading
    // everything when it cannot be opened.
    let pagemap = File::open(dir.join("pagemap")).ok();
    capture_from(
        pid,
        comm,
        &maps_path,
        &maps,
        &mem,
        pagemap.as_ref().map(|f| f as &dyn ReadAt),
        opts,
    )
}

/// Positional reads: `/proc/PID/mem` and `/proc/PID/pagemap` in production; tests wrap them
/// to inject read failures.
pub(crate) trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

/// The capture proper, over an already-read maps text and open mem/pagemap readers.
pub(crate) fn capture_from(
    pid: u32,
    comm: String,
    maps_path: &std::path::Path,
    maps: &str,
    mem: &dyn ReadAt,
    pagemap: Option<&dyn ReadAt>,
    opts: &CaptureOptions,
) -> Result<Capture> {
    let mut out = Capture {
        pages: Pages::new(format!(
            "pid {pid} ({comm}) private writable anonymous memory"
        )),
        pid,
        comm,
        ranges_read: 0,
        ranges_skipped: 0,
        pages_skipped: 0,
        pages_not_resident: 0,
        used_pagemap: pagemap.is_some(),
        truncated: false,
    };
    let limit = opts.max_pages.unwrap_or(usize::MAX);
    let mut entries = parse_maps(maps_path, maps)?;
    entries.retain(MapsEntry::is_candidate);

    let mut buf = vec![0u8; READ_CHUNK * PAGE_SIZE];
    'ranges: for e in &entries {
        let n = e.pages();
        let mut read_any = false;
        // Walk the range a window at a time, so a huge sparse reservation costs no more
        // memory than one window of pagemap entries.
        let mut w = 0;
        while w < n {
            let wn = WINDOW.min(n - w);
            let wstart = e.start + (w * PAGE_SIZE) as u64;
            let present = residency(pagemap, wstart, wn);
            let mut i = 0;
            while i < wn {
                if !present[i] {
                    out.pages_not_resident += 1;
                    i += 1;
                    continue;
                }
                // A run of resident pages, read at most READ_CHUNK pages at a time.
                let mut j = i;
                while j < wn && present[j] && j - i < READ_CHUNK {
                    j += 1;
                }
                let room = limit - out.pages.len();
                let j = j.min(i.saturating_add(room));
                let len = (j - i) * PAGE_SIZE;
                match mem.read_exact_at(&mut buf[..len], wstart + (i * PAGE_SIZE) as u64) {
                    Ok(()) => {
                        read_any = true;
                        for page in buf[..len].chunks_exact(PAGE_SIZE) {
                            out.pages.push_page(page)?;
                        }
                    }
                    Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {
                        return Err(Error::NoSuchProcess(pid));
                    }
                    Err(_) => {
                        // Unreadable (a range unmapped or changed meanwhile, an exited
                        // process, a failing device mapping): skip the rest of the range and
                        // count its resident pages as skipped.
                        out.ranges_skipped += 1;
                        let rest = &present[i..];
                        out.pages_skipped += rest.iter().filter(|p| **p).count();
                        out.pages_not_resident += rest.iter().filter(|p| !**p).count();
                        let mut w2 = w + wn;
                        while w2 < n {
                            let k = WINDOW.min(n - w2);
                            let pr = residency(pagemap, e.start + (w2 * PAGE_SIZE) as u64, k);
                            let res = pr.iter().filter(|p| **p).count();
                            out.pages_skipped += res;
                            out.pages_not_resident += k - res;
                            w2 += k;
                        }
                        if read_any {
                            out.ranges_read += 1;
                        }
                        continue 'ranges;
                    }
                }
                if out.pages.len() >= limit {
                    out.truncated = true;
                    out.ranges_read += 1;
                    break 'ranges;
                }
                i = j;
            }
            w += wn;
        }
        out.ranges_read += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/self/mem, failing every read that touches `bad`.
    struct Failing {
        mem: File,
        bad: (u64, u64),
    }

    impl ReadAt for Failing {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            let end = offset + buf.len() as u64;
            if offset < self.bad.1 && end > self.bad.0 {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            FileExt::read_exact_at(&self.mem, buf, offset)
        }
    }

    #[test]
    fn unreadable_range_is_skipped_and_counted() {
        let keep: Vec<u8> = b"real heap text "
            .iter()
            .cycle()
            .take(1 << 20)
            .copied()
            .collect();
        let maps_path = std::path::Path::new("/proc/self/maps");
        let maps = std::fs::read_to_string(maps_path).unwrap();
        // The range holding `keep` fails; every other range reads normally.
        let addr = keep.as_ptr() as u64;
        let bad = maps
            .lines()
            .map(|l| parse_maps_line(l).unwrap())
            .find(|e| e.start <= addr && addr < e.end)
            .unwrap();
        assert!(bad.is_candidate());
        let mem = Failing {
            mem: File::open("/proc/self/mem").unwrap(),
            bad: (bad.start, bad.end),
        };
        let pm = File::open("/proc/self/pagemap").unwrap();
        let cap = capture_from(
            std::process::id(),
            "self".into(),
            maps_path,
            &maps,
            &mem,
            Some(&pm as &dyn ReadAt),
            &CaptureOptions::default(),
        )
        .unwrap();
        assert!(cap.ranges_skipped >= 1, "{cap:?}");
        assert!(
            cap.pages_skipped >= 256,
            "the 1 MiB buffer was resident: {}",
            cap.pages_skipped
        );
        assert!(cap.ranges_read >= 1);
        assert!(!cap.pages.iter().any(|p| p == &keep[..PAGE_SIZE]));
        std::hint::black_box(&keep);
        // A malformed maps text is a clear error, not a panic.
        let e = capture_from(
            1,
            "x".into(),
            maps_path,
            "zz-1 rw-p 0 0 0\n",
            &mem,
            None,
            &CaptureOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "/proc/self/maps: cannot parse: bad start \"zz\": invalid digit found in string \
             in line \"zz-1 rw-p 0 0 0\""
        );
    }

    #[test]
    fn maps_lines() {
        let e = parse_maps_line(
            "55d0c000-55d0e000 rw-p 00000000 00:00 0                          [heap]",
        )
        .unwrap();
        assert!(e.is_candidate());
        assert_eq!(e.pages(), 2);
        let e = parse_maps_line("7f00-8f00 rw-p 00000000 00:00 0 ").unwrap();
        assert!(e.is_candidate());
        let e = parse_maps_line("7f00-8f00 rw-s 00000000 00:01 5 /dev/zero (deleted)").unwrap();
        assert!(!e.is_candidate());
        let e = parse_maps_line("7f00-8f00 rw-p 00001000 08:01 1234 /usr/lib/libc.so.6").unwrap();
        assert!(!e.is_candidate());
        let e = parse_maps_line("7f00-8f00 r--p 00000000 00:00 0 [vvar]").unwrap();
        assert!(!e.is_candidate());
        let e = parse_maps_line("7f00-8f00 rw-p 00000000 00:00 0 [anon:glibc malloc]").unwrap();
        assert!(e.is_candidate());
        assert!(parse_maps_line("zz-10 rw-p 0 0 0").is_err());
        assert!(parse_maps_line("10-20 rw 0 0 0").is_err());
    }
}
