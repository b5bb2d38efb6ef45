// SPDX-License-Identifier: MIT
//! The kernel-test lock excludes a second holder, across processes as well as in-process.

use uzswap_kernel::KernelLock;

#[test]
fn lock_is_exclusive() {
    let path = std::env::temp_dir().join(format!("uzswap-lock-test-{}", std::process::id()));
    let held = KernelLock::acquire_at(&path).unwrap();
    // flock locks belong to the open file description: a second open must fail to lock.
    assert!(KernelLock::try_acquire_at(&path).unwrap().is_none());
    drop(held);
    assert!(KernelLock::try_acquire_at(&path).unwrap().is_some());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn zram_claim_and_roundtrip() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("zram_claim_and_roundtrip") else {
        return;
    };
    let mut z = uzswap_kernel::zram::Zram::claim_unused(0).unwrap();
    let before_alg = z.current_algorithm().unwrap();
    // While we hold it configured, a second claim must see it busy.
    z.configure("lzo-rle", 16 * 4096).unwrap();
    let e = uzswap_kernel::zram::Zram::claim_unused(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("in use"), "{e}");
    let mut page = [0u8; 4096];
    // Text from a real file: compressible but not same-filled.
    let src = std::fs::read("/proc/self/maps").unwrap();
    for (i, b) in page.iter_mut().enumerate() {
        *b = src[i % src.len()];
    }
    z.write_page_direct(3, &page).unwrap();
    let m = z.mm_stat().unwrap();
    assert_eq!(m.orig_data_size, 4096);
    assert!(m.compr_data_size > 0 && m.compr_data_size < 4096);
    let mut back = [0u8; 4096];
    z.read_page_direct(3, &mut back).unwrap();
    assert_eq!(back, page);
    z.write_page_direct(4, &[7u8; 4096]).unwrap();
    assert_eq!(z.mm_stat().unwrap().same_pages, 1);
    assert!(z.write_direct(100, &page).is_err());
    assert!(z.write_page_direct(16, &page).is_err());
    drop(z);
    let d = std::fs::read_to_string("/sys/block/zram0/disksize").unwrap();
    assert_eq!(d.trim(), "0");
    let alg = std::fs::read_to_string("/sys/block/zram0/comp_algorithm").unwrap();
    assert!(alg.contains(&format!("[{before_alg}]")), "{alg}");
}

#[test]
fn zswap_param_guard_restores() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("zswap_param_guard_restores") else {
        return;
    };
    use uzswap_kernel::zswap_params;
    let orig = zswap_params::read("max_pool_percent").unwrap();
    {
        let mut g = zswap_params::ParamGuard::new();
        let new = if orig == "17" { "18" } else { "17" };
        g.set("max_pool_percent", new).unwrap();
        assert_eq!(zswap_params::read("max_pool_percent").unwrap(), new);
    }
    assert_eq!(zswap_params::read("max_pool_percent").unwrap(), orig);
}

#[test]
fn debugfs_mount_is_restored() {
    let Some(_lock) = uzswap_kernel::kernel_test_guard("debugfs_mount_is_restored") else {
        return;
    };
    use uzswap_kernel::debugfs;
    let was = debugfs::is_mounted().unwrap();
    {
        let _m = debugfs::DebugfsMount::ensure().unwrap();
        assert!(debugfs::is_mounted().unwrap());
        // The zswap dir may be absent if zswap was never enabled: then a clear error.
        match debugfs::read_zswap() {
            Ok(d) => assert!(d.get("stored_pages").is_some()),
            Err(e) => assert!(e.to_string().contains("does not exist"), "{e}"),
        }
    }
    assert_eq!(debugfs::is_mounted().unwrap(), was);
}
