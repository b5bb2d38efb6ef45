// SPDX-License-Identifier: MIT
//! Helpers every subcommand shares, each in one place: value parsers for compressor and chain
//! rule, stdout emission (text and JSON, quiet on a closed pipe), the one page loader (page
//! files, live processes, the default corpus) and timing (per-thread CPU time, parallel
//! phases, medians).

pub mod output;
pub mod pages;
pub mod parse;
pub mod timing;
