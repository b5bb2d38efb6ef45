// SPDX-License-Identifier: MIT
//! Swap counters of `/proc/vmstat`.

use crate::sysfs::{parse_name_value, read_string};
use crate::{Error, Result};
use std::path::Path;

/// The swap-related vmstat counters uzswap reports, in report order.
pub const SWAP_COUNTERS: [&str; 5] = ["zswpin", "zswpout", "zswpwb", "pswpin", "pswpout"];

/// The swap-related counters of `/proc/vmstat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapVmStat {
    /// Pages loaded from zswap.
    pub zswpin: u64,
    /// Pages stored in zswap.
    pub zswpout: u64,
    /// Pages zswap wrote back to the swap device.
    pub zswpwb: u64,
    /// Pages read from the swap device.
    pub pswpin: u64,
    /// Pages written to the swap device.
    pub pswpout: u64,
    /// Zero pages swapped out without I/O (kernel 6.13+).
    pub swpout_zero: Option<u64>,
    /// Zero pages swapped in from the zero map (kernel 6.13+).
    pub swpin_zero: Option<u64>,
}

impl SwapVmStat {
    /// Counters as (name, value) in report order; the optional ones only when present.
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("zswpin", self.zswpin),
            ("zswpout", self.zswpout),
            ("zswpwb", self.zswpwb),
            ("pswpin", self.pswpin),
            ("pswpout", self.pswpout),
        ];
        if let Some(x) = self.swpout_zero {
            v.push(("swpout_zero", x));
        }
        if let Some(x) = self.swpin_zero {
            v.push(("swpin_zero", x));
        }
        v
    }
}

/// All of `/proc/vmstat` as (name, value).
pub fn read_all() -> Result<Vec<(String, u64)>> {
    let path = Path::new("/proc/vmstat");
    parse_name_value(path, &read_string(path)?)
}

/// Read the swap counters.
pub fn read() -> Result<SwapVmStat> {
    let path = Path::new("/proc/vmstat");
    parse_swap(path, &read_string(path)?)
}

/// Parse vmstat text; the five zswap/pswp counters are required.
pub fn parse_swap(path: &Path, text: &str) -> Result<SwapVmStat> {
    let all = parse_name_value(path, text)?;
    let get = |n: &str| all.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    let need = |n: &str| {
        get(n).ok_or_else(|| {
            Error::parse(
                path,
                format!("counter {n} missing (kernel without zswap/swap support?)"),
            )
        })
    };
    Ok(SwapVmStat {
        zswpin: need("zswpin")?,
        zswpout: need("zswpout")?,
        zswpwb: need("zswpwb")?,
        pswpin: need("pswpin")?,
        pswpout: need("pswpout")?,
        swpout_zero: get("swpout_zero"),
        swpin_zero: get("swpin_zero"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_requires() {
        let p = Path::new("/proc/vmstat");
        let t =
            "nr_free_pages 5\npswpin 1\npswpout 2\nzswpin 3\nzswpout 4\nzswpwb 5\nswpout_zero 6\n";
        let s = parse_swap(p, t).unwrap();
        assert_eq!(
            (s.pswpin, s.zswpwb, s.swpout_zero, s.swpin_zero),
            (1, 5, Some(6), None)
        );
        assert_eq!(s.pairs().len(), 6);
        let e = parse_swap(p, "pswpin 1\n").unwrap_err().to_string();
        assert!(
            e.contains("pswpout missing") || e.contains("missing"),
            "{e}"
        );
        let e = parse_swap(p, "pswpin x\n").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn reads_live_kernel() {
        let s = read().unwrap();
        // Counters are monotonic; just check they parse and relate sanely.
        assert!(s.pairs().len() >= 5);
    }
}
