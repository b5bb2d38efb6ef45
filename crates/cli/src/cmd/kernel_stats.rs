// SPDX-License-Identifier: MIT
//! `uzswap kernel-stats`: the live kernel's zswap debugfs counters, vmstat swap counters and
//! zram `mm_stat`, in the layout of uzswap's own counter report ("name value" lines, kernel
//! counter names) or as one flat JSON object with the same keys.

use clap::Parser;
use serde_json::{Map, Value};
use uzswap_kernel::{debugfs, meminfo, vmstat, zram};

use crate::shared::output::{emit, emit_json};

/// Arguments of `uzswap kernel-stats`.
#[derive(Parser, Debug)]
pub struct Args {
    /// zram device whose mm_stat to show (`zramN.` keys); skipped if absent.
    #[arg(long, default_value_t = 0)]
    pub zram: u32,
    /// Print one JSON object instead of "name value" lines.
    #[arg(long)]
    pub json: bool,
}

/// Counter rows in report order; `None` = not readable on this kernel.
type Rows = Vec<(String, Option<u64>)>;

/// Collect all rows; counters that cannot be read are reported as notes (and `null` in JSON).
fn collect(dev: u32) -> anyhow::Result<(Rows, Vec<String>)> {
    let mut rows: Vec<(String, Option<u64>)> = Vec::new();
    let mut notes = Vec::new();
    match debugfs::read_zswap() {
        Ok(d) => {
            for name in debugfs::ZSWAP_COUNTERS {
                rows.push((name.to_string(), d.get(name)));
            }
        }
        Err(e) => {
            notes.push(format!(
                "zswap debugfs counters unavailable: {}",
                uzswap_kernel::error_chain(&e)
            ));
            for name in debugfs::ZSWAP_COUNTERS {
                rows.push((name.to_string(), None));
            }
        }
    }
    let v = vmstat::read()?;
    for (k, x) in v.pairs() {
        rows.push((k.to_string(), Some(x)));
    }
    let m = meminfo::read()?;
    rows.push(("meminfo.zswap_bytes".into(), m.zswap_kb.map(|k| k * 1024)));
    rows.push((
        "meminfo.zswapped_bytes".into(),
        m.zswapped_kb.map(|k| k * 1024),
    ));
    if zram::device_exists(dev) {
        let mm = zram::read_mm_stat(dev)?;
        for (k, x) in zram::MmStat::FIELDS.iter().zip(mm.values()) {
            rows.push((format!("zram{dev}.{k}"), Some(x)));
        }
    } else {
        notes.push(format!("zram{dev} does not exist"));
    }
    Ok((rows, notes))
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (rows, notes) = collect(args.zram)?;
    if args.json {
        let mut obj = Map::new();
        for (k, v) in rows {
            obj.insert(k, v.map_or(Value::Null, Value::from));
        }
        if !notes.is_empty() {
            obj.insert("notes".into(), Value::from(notes));
        }
        emit_json(&Value::Object(obj))?;
    } else {
        for n in &notes {
            eprintln!("uzswap: note: {n}");
        }
        let mut text = String::new();
        for (k, v) in rows {
            if let Some(v) = v {
                text.push_str(&format!("{k} {v}\n"));
            }
        }
        emit(&text)?;
    }
    Ok(())
}
