// SPDX-License-Identifier: MIT
//! One module per subcommand.

pub mod bench;
pub mod capture;
pub mod classes;
pub mod estimate;
pub mod kernel_stats;
pub mod replay;
pub mod run;
pub mod run_trace;
