//! One module per subcommand.

pub mod bench;
pub mod classes;
pub mod capture;
pub mod estimate;
pub mod kernel_stats;
