// SPDX-License-Identifier: MIT
//! The kernel side of the bench: the zram device, claimed only when that is possible without
//! asking (see `Args`' help), under the kernel-test lock, reset on drop and on Ctrl-C.

use std::path::Path;

use anyhow::{bail, Context};
use uzswap_kernel::zram::Zram;
use uzswap_kernel::KernelLock;

use super::Args;

/// The zram side: a claimed device (reset on drop) under the kernel-test lock.
pub(super) struct KernelSide {
    pub(super) zram: Zram,
    // Declared after `zram`: dropped last, so the device is reset before the lock goes.
    pub(super) _lock: KernelLock,
}

/// Decides whether the zram comparison runs; `Ok(Err(reason))` when it is skipped.
pub(super) fn claim_kernel(args: &Args) -> anyhow::Result<Result<KernelSide, String>> {
    if args.no_kernel {
        return Ok(Err("--no-kernel".into()));
    }
    let alg = args.compressor;
    let why_not = if !alg.zram_builtin() || !alg.is_kernel_default() {
        Some(format!("zram here offers lz4, lzo and lzo-rle, not {alg}"))
    } else if !uzswap_kernel::is_root() {
        Some("not running as root".to_string())
    } else {
        None
    };
    if let Some(reason) = why_not {
        if args.kernel {
            bail!("--kernel: {reason}");
        }
        return Ok(Err(reason));
    }
    let lock = if args.kernel {
        KernelLock::acquire().context("taking the kernel-test lock")?
    } else {
        match KernelLock::try_acquire_at(Path::new(uzswap_kernel::LOCK_PATH)) {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Ok(Err(
                    "another uzswap process holds the kernel-test lock".into()
                ))
            }
            Err(e) => {
                return Ok(Err(format!(
                    "kernel-test lock: {}",
                    uzswap_kernel::error_chain(&e)
                )))
            }
        }
    };
    match Zram::claim_unused(args.zram_dev) {
        Ok(zram) => Ok(Ok(KernelSide { zram, _lock: lock })),
        Err(e) if args.kernel => Err(anyhow::Error::from(e).context("--kernel")),
        Err(e) => Ok(Err(uzswap_kernel::error_chain(&e))),
    }
}

pub(super) static INTERRUPTED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// SIGINT and SIGTERM set [`INTERRUPTED`] instead of killing the process.
pub(super) fn catch_interrupts() {
    let handler: extern "C" fn(libc::c_int) = on_interrupt;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores to an atomic; no other state is shared.
        unsafe { libc::signal(sig, handler as libc::sighandler_t) };
    }
}
