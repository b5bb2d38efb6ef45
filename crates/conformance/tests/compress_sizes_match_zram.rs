// SPDX-License-Identifier: MIT
//! Per-page compressed sizes against the live kernel (zram0), under `UZSWAP_KERNEL_TESTS=1`.
//!
//! Each page is written alone to a fresh slot of zram0 with O_DIRECT; the growth of
//! `compr_data_size` in mm_stat is the kernel's compressed length of that page. Same-filled
//! pages (counted in `same_pages`, no compression) are skipped; pages zram stores "huge"
//! (compressed length >= huge_class_size, 3625 bytes at zsmalloc chain size 8) count 4096 and
//! are compared by that threshold only.

use uzswap_conformance::pages as common;

use uzswap_compress::{compress, compress_liblz4, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_kernel::zram::{Zram, PAGE_SIZE};

/// zsmalloc's huge_class_size with the default chain size 8 (see kernel-notes).
const HUGE_CLASS_SIZE: usize = 3625;

#[derive(Default, Debug)]
struct Tally {
    /// lz4 only: pages where liblz4 1.10 (`compress_liblz4`, the store path's codec until
    /// 2026-11-27) gave the kernel's size.
    exact_liblz4: usize,
    compared: usize,
    exact: usize,
    same_filled: usize,
    huge_both: usize,
    mismatches: Vec<(usize, usize, usize)>, // (page index, ours, kernel)
}

fn compare(alg: Algorithm, pages: &[Vec<u8>]) -> Tally {
    let mut zram = Zram::claim_unused(0).expect("zram0 must exist and be unused (disksize 0)");
    zram.configure(
        alg.kernel_name(),
        (pages.len() * PAGE_SIZE) as u64 + (1 << 20),
    )
    .expect("configure zram0");
    let mut t = Tally::default();
    let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
    let mut before = zram.mm_stat().unwrap();
    for (i, p) in pages.iter().enumerate() {
        let page: &[u8; PAGE_SIZE] = p.as_slice().try_into().unwrap();
        zram.write_page_direct(i as u64, page).unwrap();
        let after = zram.mm_stat().unwrap();
        let kernel = (after.compr_data_size - before.compr_data_size) as usize;
        let same = after.same_pages > before.same_pages;
        let huge = after.huge_pages > before.huge_pages;
        before = after;
        if same {
            t.same_filled += 1;
            continue;
        }
        // `compress` is also `compress_kernel_exact`: every built-in compressor is kernel-exact.
        let ours = compress(alg, p, &mut buf).unwrap();
        t.compared += 1;
        let matches = |n: usize| (huge && n >= HUGE_CLASS_SIZE) || (!huge && n == kernel);
        if alg == Algorithm::Lz4 && matches(compress_liblz4(p, &mut buf).unwrap()) {
            t.exact_liblz4 += 1;
        }
        if huge {
            assert_eq!(kernel, PAGE_SIZE);
            if ours >= HUGE_CLASS_SIZE {
                t.huge_both += 1;
                t.exact += 1;
            } else {
                t.mismatches.push((i, ours, kernel));
            }
        } else if ours == kernel {
            t.exact += 1;
        } else {
            t.mismatches.push((i, ours, kernel));
        }
    }
    drop(zram); // resets zram0 and restores its algorithm
    t
}

/// The default set takes well under a second per algorithm. `UZSWAP_KERNEL_SIZE_PAGES=N` uses
/// N file pages plus N/3 pages of this process and N/3 of every other live process in
/// `UZSWAP_KERNEL_SIZE_PIDS` (space-separated pids) for a longer validation.
fn pages() -> Vec<Vec<u8>> {
    let n: usize = std::env::var("UZSWAP_KERNEL_SIZE_PAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut p = common::real_pages(n);
    p.extend(common::process_pages(n / 3));
    for pid in std::env::var("UZSWAP_KERNEL_SIZE_PIDS")
        .unwrap_or_default()
        .split_whitespace()
    {
        p.extend(common::pid_pages(pid, n / 3));
    }
    p.extend(common::special_pages());
    p
}

#[test]
fn per_page_sizes_match_the_kernel() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("kernel_sizes") else {
        return;
    };
    let pages = pages();
    for alg in [Algorithm::Lzo, Algorithm::LzoRle, Algorithm::Lz4] {
        let t = compare(alg, &pages);
        let rate = t.exact as f64 / t.compared.max(1) as f64;
        eprintln!(
            "{alg}: compress(): {} of {} pages exact ({:.2} %); liblz4: {} exact; {} same-filled skipped, {} huge in both; first compress() mismatches (page, ours, kernel): {:?}",
            t.exact,
            t.compared,
            rate * 100.0,
            t.exact_liblz4,
            t.same_filled,
            t.huge_both,
            &t.mismatches[..t.mismatches.len().min(10)]
        );
        assert!(t.compared > 1000, "{alg}: too few pages compared");
        // Every built-in compressor is a kernel-exact re-implementation: every page matches.
        assert!(t.mismatches.is_empty(), "{alg}: {t:?}");
        assert_eq!(
            t.exact, t.compared,
            "{alg}: the kernel's size on every page"
        );
        if alg == Algorithm::Lz4 {
            // liblz4 1.10 differs from the kernel's older LZ4 on a few % of pages.
            let liblz4 = t.exact_liblz4 as f64 / t.compared.max(1) as f64;
            assert!(liblz4 > 0.9, "liblz4: only {:.2} % exact", liblz4 * 100.0);
        }
    }
}
