// SPDX-License-Identifier: MIT
//! uzswap-conformance: every test that compares uzswap with the live kernel, in one test-only
//! crate (not published), so that the dependency graph stays one-way: no library crate
//! dev-depends on `uzswap-kernel`.
//!
//! What it owns: the tests in `tests/` (compressed sizes against zram, the allocator against
//! zram's `mm_stat`, the estimator against zram and zswap, the cache's shrinker under a real PSI
//! event) and the helpers they share here ([`pages`]: real page content; [`cache`]: a cache over
//! a temporary swap file). Every test runs only with `UZSWAP_KERNEL_TESTS=1`, takes the
//! cross-process kernel-test lock (`uzswap_kernel::KernelLock`), restores what it changes and
//! prints `SKIPPED: reason` where the kernel lacks something.
//!
//! Data layout and lock order: no state of its own.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cache;
pub mod pages;
