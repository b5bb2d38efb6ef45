// SPDX-License-Identifier: MIT
//! zram O_DIRECT I/O (root, UZSWAP_KERNEL_TESTS=1, zram0 unused): page-aligned buffers are
//! written and read in place, other memory through a bounce buffer, with the same result.

use uzswap_kernel::zram::{AlignedBuf, Zram, REQUEST_BYTES};

#[test]
fn aligned_and_unaligned_buffers_read_back_the_same_pages() {
    let Some(_lock) =
        uzswap_kernel::kernel_test_guard("aligned_and_unaligned_buffers_read_back_the_same_pages")
    else {
        return;
    };
    let mut zram = match Zram::claim_unused(0) {
        Ok(z) => z,
        Err(e) => {
            eprintln!("SKIPPED: zram0: {}", uzswap_kernel::error_chain(&e));
            return;
        }
    };
    // 300 pages of real text (this test's own binary): more than one 1 MiB request.
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let len = 300 * 4096;
    assert!(len > REQUEST_BYTES);
    let data: Vec<u8> = exe.iter().cycle().take(len).copied().collect();
    zram.configure("lzo-rle", 2 * len as u64).unwrap();

    // Aligned write at 0, unaligned (a Vec offset by one byte) at `len`.
    let aligned = AlignedBuf::copy_of(&data);
    zram.write_direct(0, &aligned).unwrap();
    let mut shifted = vec![0u8; len + 1];
    shifted[1..].copy_from_slice(&data);
    zram.write_direct(len as u64, &shifted[1..]).unwrap();

    let mut back = AlignedBuf::new(2 * len);
    zram.read_direct(0, &mut back).unwrap();
    assert!(back[..len] == data[..], "aligned write, aligned read");
    assert!(back[len..] == data[..], "unaligned write, aligned read");
    let mut out = vec![0u8; len + 1];
    zram.read_direct(len as u64, &mut out[1..]).unwrap();
    assert!(out[1..] == data[..], "unaligned read");
    assert_eq!(zram.mm_stat().unwrap().orig_data_size, 2 * len as u64);
}
