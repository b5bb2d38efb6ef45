// SPDX-License-Identifier: MIT
//! Real pages for the tests, benchmarks and examples: `uzswap_corpus::samples`.
#![allow(unused_imports)]

pub use uzswap_corpus::samples::*;
