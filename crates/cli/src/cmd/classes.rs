// SPDX-License-Identifier: MIT
//! `uzswap classes`: the zsmalloc size-class table of an empty pool, in the kernel's debugfs
//! layout or as JSON.

use anyhow::Context;
use clap::Parser;
use serde::Serialize;
use uzswap_zsmalloc::{ChainRule, ClassTable, Pool, PoolConfig, DEFAULT_CHAIN_SIZE};

use crate::shared::output::{emit, emit_json};

/// Arguments of `uzswap classes`.
#[derive(Parser, Debug)]
pub struct Args {
    /// Maximum pages per zspage (1 to 16; the kernel's CONFIG_ZSMALLOC_CHAIN_SIZE).
    #[arg(long, default_value_t = DEFAULT_CHAIN_SIZE)]
    pub chain_size: usize,
    /// Rule choosing pages per zspage: min-waste (today's kernel) or used-percent (seed 004).
    #[arg(long, default_value = "min-waste", value_parser = crate::shared::parse::chain_rule)]
    pub chain_rule: ChainRule,
    /// Print one JSON object instead of the kernel's table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct JsonClass {
    index: usize,
    size: usize,
    pages_per_zspage: usize,
    objs_per_zspage: usize,
    huge: bool,
}

#[derive(Serialize)]
struct JsonTable {
    chain_size: usize,
    chain_rule: String,
    num_classes: usize,
    unique_classes: usize,
    huge_class_size: usize,
    classes: Vec<JsonClass>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = PoolConfig {
        chain_size: args.chain_size,
        chain_rule: args.chain_rule,
    };
    if args.json {
        let table = ClassTable::new(&cfg).context("building the class table")?;
        let out = JsonTable {
            chain_size: cfg.chain_size,
            chain_rule: cfg.chain_rule.to_string(),
            num_classes: table.num_classes(),
            unique_classes: table.unique_classes().len(),
            huge_class_size: table.huge_class_size(),
            classes: table
                .unique_classes()
                .iter()
                .map(|c| JsonClass {
                    index: c.index,
                    size: c.size,
                    pages_per_zspage: c.pages_per_zspage,
                    objs_per_zspage: c.objs_per_zspage,
                    huge: c.huge,
                })
                .collect(),
        };
        emit_json(&out)
    } else {
        // An empty pool reserves address space only; its stats are the kernel's table.
        let pool = Pool::new(cfg).context("creating an empty pool")?;
        emit(&pool.stats().to_string())
    }
}
