// SPDX-License-Identifier: MIT
//! Same-run speed comparison with the kernel: zram0 write/read (O_DIRECT, 1 MiB requests)
//! against this crate's compress/decompress of the same pages, for lz4, lzo and lzo-rle.
//!
//! `UZSWAP_KERNEL_TESTS=1 [CORPUS=PAGE_FILE] cargo run --release -p uzswap-conformance --example
//! zram_speed [ROUNDS]`
//! Needs root and an unused zram0 (disksize 0); zram0 is reset and its algorithm restored
//! afterwards (also on panic, by the `Zram` guard). Each round: one timed zram write pass, one
//! timed zram read pass, then one timed user-space compress pass and decompress pass.

use std::io::Write as _; // skip notices bypass the test harness's output capture
use uzswap_conformance::pages as common;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::Instant;

use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_kernel::zram::Zram;

const PAGE: usize = 4096;
const CHUNK: usize = 1 << 20;

/// A page-aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len, PAGE).unwrap();
        // SAFETY: non-zero size, valid alignment.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, layout }
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of layout.size() bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if !uzswap_kernel::kernel_tests_enabled() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: zram_speed: set UZSWAP_KERNEL_TESTS=1 (needs root and an unused zram0)"
        )
        .ok();
        return;
    }
    let _lock = uzswap_kernel::KernelLock::acquire().expect("kernel-test lock");
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    // CORPUS=FILE: the first 12800 non-zero pages of a page file (`uzswap capture`) instead.
    let mut pages: Vec<Vec<u8>> = match std::env::var_os("CORPUS") {
        Some(path) => {
            let corpus = uzswap_corpus::read_page_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
            (0..corpus.len())
                .map(|i| corpus.page(i))
                .filter(|p| p.iter().any(|&b| b != 0))
                .take(12_800)
                .map(<[u8]>::to_vec)
                .collect()
        }
        None => {
            let mut pages = common::real_pages(12_000);
            pages.extend(common::process_pages(4_000));
            pages
        }
    };
    let n = pages.len() / (CHUNK / PAGE) * (CHUNK / PAGE);
    pages.truncate(n);
    let mut data = Aligned::new(n * PAGE);
    for (i, p) in pages.iter().enumerate() {
        data.slice()[i * PAGE..(i + 1) * PAGE].copy_from_slice(p);
    }
    let mut back = Aligned::new(n * PAGE);
    println!(
        "{n} real pages ({} MiB), {rounds} rounds; times are medians, µs per page",
        (n * PAGE) >> 20
    );
    println!("| algorithm | zram write | user compress | ratio | zram read | user decompress | ratio | user compr/orig | zram compr/orig |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for alg in [Algorithm::Lz4, Algorithm::Lzo, Algorithm::LzoRle] {
        let mut zram = Zram::claim_unused(0).expect("zram0 unused");
        let (mut zw, mut zr, mut uc, mut ud, mut ratio_w, mut ratio_r) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
        let packed: Vec<Vec<u8>> = pages
            .iter()
            .map(|p| {
                let k = compress(alg, p, &mut buf).unwrap();
                buf[..k].to_vec()
            })
            .collect();
        let user_ratio = packed.iter().map(Vec::len).sum::<usize>() as f64 / (n * PAGE) as f64;
        let mut zram_ratio = 0.0;
        let mut out = vec![0u8; PAGE];
        for _ in 0..rounds {
            zram.configure(alg.kernel_name(), (n * PAGE) as u64)
                .unwrap();
            let dev = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open("/dev/zram0")
                .unwrap();
            let t = Instant::now();
            for (k, chunk) in data.slice().chunks(CHUNK).enumerate() {
                dev.write_all_at(chunk, (k * CHUNK) as u64).unwrap();
            }
            let w = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            let t = Instant::now();
            for (k, chunk) in back.slice().chunks_mut(CHUNK).enumerate() {
                dev.read_exact_at(chunk, (k * CHUNK) as u64).unwrap();
            }
            let r = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            assert!(back.slice() == data.slice(), "zram returned different data");
            let st = zram.mm_stat().unwrap();
            zram_ratio = st.compr_data_size as f64 / st.orig_data_size as f64;
            drop(dev);

            let t = Instant::now();
            for p in &pages {
                std::hint::black_box(compress(alg, p, &mut buf).unwrap());
            }
            let c = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            let t = Instant::now();
            for p in &packed {
                assert_eq!(decompress(alg, p, &mut out).unwrap(), PAGE);
            }
            let d = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            zw.push(w);
            zr.push(r);
            uc.push(c);
            ud.push(d);
            ratio_w.push(c / w);
            ratio_r.push(d / r);
        }
        println!(
            "| {alg} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.4} | {:.4} |",
            median(&mut zw),
            median(&mut uc),
            median(&mut ratio_w),
            median(&mut zr),
            median(&mut ud),
            median(&mut ratio_r),
            user_ratio,
            zram_ratio
        );
        drop(zram);
    }
    println!("ratio = user time / zram time in the same round (median over rounds); < 1 is faster than the kernel");
}
