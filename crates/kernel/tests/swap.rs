// SPDX-License-Identifier: MIT
//! The temporary swap file and MADV_PAGEOUT helper (root, UZSWAP_KERNEL_TESTS=1).

use uzswap_kernel::{swap, vmstat};

#[test]
fn page_out_into_a_temporary_swap_file() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("page_out_into_a_temporary_swap_file")
    else {
        return;
    };
    assert!(swap::page_out(&[1u8; 100]).is_err(), "whole pages only");
    let path = std::path::PathBuf::from(format!(
        "/var/tmp/uzswap-kernel-swap-test-{}",
        std::process::id()
    ));
    {
        let sf = swap::SwapFile::create(&path, 8 << 20).unwrap();
        let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
        assert!(swaps.contains(sf.path().to_str().unwrap()), "{swaps}");
        // Zero pages leave through the swap core's zero map: swpout_zero counts them.
        let before = vmstat::read().unwrap();
        let out = swap::page_out(&vec![0u8; 64 * 4096]).unwrap();
        let after = vmstat::read().unwrap();
        assert_eq!(out.swapped.len(), 64);
        assert!(
            out.swapped_count() >= 60,
            "{} pages left RAM",
            out.swapped_count()
        );
        if let (Some(a), Some(b)) = (before.swpout_zero, after.swpout_zero) {
            assert!(b - a >= out.swapped_count() as u64);
        }
        assert!(
            swap::SwapFile::create(&path, 1 << 20).is_err(),
            "existing path is refused"
        );
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(!swaps.contains(path.to_str().unwrap()), "{swaps}");
    assert!(!path.exists());
}
