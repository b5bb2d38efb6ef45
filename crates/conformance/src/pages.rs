// SPDX-License-Identifier: MIT
//! Real pages for the conformance tests: `uzswap_corpus::samples`.

pub use uzswap_corpus::samples::*;
