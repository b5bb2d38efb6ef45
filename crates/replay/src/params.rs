// SPDX-License-Identifier: MIT
//! Cache options by name: they live with the cache (`uzswap_zswap::options`), so that the pager
//! under `uzswap run` applies exactly what replay does.

pub use uzswap_zswap::options::{apply, OPTIONS};
