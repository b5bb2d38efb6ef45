// SPDX-License-Identifier: MIT
//! Real compressed pages for the benches: 4 KiB pages of the machine's own binaries and shared
//! libraries, compressed with LZ4 (lz4_flex). Zero-filled pages are skipped (zswap keeps them
//! out of the pool); pages that do not compress below 4096 bytes are stored as-is (4096 bytes),
//! as zswap does.

use std::path::PathBuf;

pub const PAGE: usize = 4096;

fn candidate_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["/usr/bin", "/usr/lib/x86_64-linux-gnu"] {
        if let Ok(rd) = std::fs::read_dir(dir) {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    (dir == "/usr/bin" || name.contains(".so")) && p.is_file()
                })
                .collect();
            v.sort();
            files.extend(v);
        }
    }
    files
}

/// Up to `max_pages` compressed pages (payloads), in file order.
pub fn compressed_pages(max_pages: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let files = candidate_files();
    // Interleave files with a stride so the sample is not dominated by the first few.
    let stride = (files.len() / 64).max(1);
    'outer: for start in 0..stride {
        for f in files.iter().skip(start).step_by(stride) {
            let Ok(data) = std::fs::read(f) else { continue };
            for page in data.chunks_exact(PAGE) {
                if page.iter().all(|&b| b == 0) {
                    continue;
                }
                let c = lz4_flex::block::compress(page);
                out.push(if c.len() >= PAGE { page.to_vec() } else { c });
                if out.len() >= max_pages {
                    break 'outer;
                }
            }
        }
    }
    assert!(
        !out.is_empty(),
        "no readable files under /usr/bin or /usr/lib/x86_64-linux-gnu"
    );
    out
}

/// A small deterministic generator (benches must be reproducible run to run).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}
