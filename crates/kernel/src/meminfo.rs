// SPDX-License-Identifier: MIT
//! `/proc/meminfo` fields that concern zswap.

use crate::sysfs::read_string;
use crate::{Error, Result};
use std::path::Path;

/// Selected `/proc/meminfo` values, in KiB as the kernel prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub mem_total_kb: u64,
    /// Compressed pool footprint (kernel 5.19+).
    pub zswap_kb: Option<u64>,
    /// Uncompressed size of the pages stored in zswap (kernel 5.19+).
    pub zswapped_kb: Option<u64>,
}

/// Read `/proc/meminfo`.
pub fn read() -> Result<MemInfo> {
    let path = Path::new("/proc/meminfo");
    parse(path, &read_string(path)?)
}

/// Parse meminfo text (`Name:   123 kB` lines).
pub fn parse(path: &Path, text: &str) -> Result<MemInfo> {
    let mut total = None;
    let mut info = MemInfo::default();
    for (n, line) in text.lines().enumerate() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let field = match name.trim() {
            "MemTotal" => 0,
            "Zswap" => 1,
            "Zswapped" => 2,
            _ => continue,
        };
        let num = rest.split_whitespace().next().unwrap_or("");
        let v = num.parse::<u64>().map_err(|e| {
            Error::parse(path, format!("line {}: {line:?}: not a number: {e}", n + 1))
        })?;
        match field {
            0 => total = Some(v),
            1 => info.zswap_kb = Some(v),
            _ => info.zswapped_kb = Some(v),
        }
    }
    info.mem_total_kb = total.ok_or_else(|| Error::parse(path, "MemTotal missing"))?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let p = Path::new("/proc/meminfo");
        let m = parse(
            p,
            "MemTotal:  100 kB\nMemFree: 5 kB\nZswap:  7 kB\nZswapped: 9 kB\n",
        )
        .unwrap();
        assert_eq!(
            m,
            MemInfo {
                mem_total_kb: 100,
                zswap_kb: Some(7),
                zswapped_kb: Some(9)
            }
        );
        assert!(parse(p, "MemFree: 5 kB\n")
            .unwrap_err()
            .to_string()
            .contains("MemTotal missing"));
        assert!(parse(p, "MemTotal: x kB\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(read().unwrap().mem_total_kb > 0);
    }
}
