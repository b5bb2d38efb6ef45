// SPDX-License-Identifier: MIT
//! Cache options by name, as `uzswap replay`/`uzswap run` spell them and as a trace's `param`
//! events carry them: the one place that maps an option to [`Params`], here so that every
//! front (the replay engine, the pager inside a program under `uzswap run`) reads them alike.

use crate::{Algorithm, ChainRule, LruMode, Params, WarmProtection};

/// The cache options (flag names without dashes) and what they take.
pub const OPTIONS: [(&str, &str); 12] = [
    (
        "compressor",
        "lzo, lzo-rle, lz4, zstd[:LEVEL], deflate[:LEVEL]",
    ),
    ("chain-size", "4..16 (pages per zspage)"),
    ("chain-rule", "min-waste | used-percent"),
    ("max-pool-percent", "0..100"),
    ("accept-threshold-percent", "0..100"),
    ("shrinker", "on | off"),
    ("proactive-shrink", "on | off"),
    ("protection", "second-chance | protected-size"),
    ("zero-pages", "entryless | entry"),
    ("incompressible", "store | reject"),
    ("lru", "global | per-pool"),
    (
        "total-memory",
        "SIZE (K/M/G/T), the RAM the pool percentages refer to",
    ),
];

fn on_off(name: &str, v: &str) -> Result<bool, String> {
    either(name, v, ("on", true), ("off", false))
}

/// The value of an option that takes one of two words.
fn either<T>(name: &str, v: &str, a: (&str, T), b: (&str, T)) -> Result<T, String> {
    if v == a.0 {
        Ok(a.1)
    } else if v == b.0 {
        Ok(b.1)
    } else {
        Err(format!("--{name} {v:?}: expected {} or {}", a.0, b.0))
    }
}

/// Apply option `name` = `value` to `p`; a bad name or value is a clear error.
pub fn apply(p: &mut Params, name: &str, value: &str) -> Result<(), String> {
    match name {
        "compressor" => {
            p.compressor = value
                .parse::<Algorithm>()
                .map_err(|e| format!("--compressor {value:?}: {e}"))?;
        }
        "chain-size" => {
            let n: usize = value
                .parse()
                .map_err(|_| format!("--chain-size {value:?}: expected 4..16"))?;
            if !(4..=16).contains(&n) {
                return Err(format!("--chain-size {n}: expected 4..16"));
            }
            p.chain_size = n;
        }
        "chain-rule" => {
            p.chain_rule = value.parse::<ChainRule>().map_err(|_| {
                format!("--chain-rule {value:?}: expected min-waste or used-percent")
            })?;
        }
        "max-pool-percent" | "accept-threshold-percent" => {
            let n: u32 = value
                .parse()
                .ok()
                .filter(|n| *n <= 100)
                .ok_or_else(|| format!("--{name} {value:?}: expected 0..100"))?;
            if name == "max-pool-percent" {
                p.max_pool_percent = n;
            } else {
                p.accept_threshold_percent = n;
            }
        }
        "shrinker" => p.shrinker_enabled = on_off(name, value)?,
        "proactive-shrink" => p.proactive_shrink = on_off(name, value)?,
        "protection" => {
            p.warm_protection = either(
                name,
                value,
                ("second-chance", WarmProtection::SecondChance),
                ("protected-size", WarmProtection::ProtectedSize),
            )?
        }
        "zero-pages" => {
            p.zero_page_entries = either(name, value, ("entryless", false), ("entry", true))?
        }
        "incompressible" => {
            p.reject_compress_poor = either(name, value, ("store", false), ("reject", true))?
        }
        "total-memory" => {
            let b = uzswap_types::parse_size(value).map_err(|e| format!("--total-memory: {e}"))?;
            if b < 1 << 20 {
                return Err(format!("--total-memory {value:?}: at least 1M"));
            }
            p.total_memory_bytes = b;
        }
        "lru" => {
            p.lru = value
                .parse::<LruMode>()
                .map_err(|_| format!("--lru {value:?}: expected global or per-pool"))?;
        }
        _ => {
            let known: Vec<&str> = OPTIONS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown cache option {name:?} (known: {})",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_to_params() {
        let mut p = Params::default();
        apply(&mut p, "compressor", "lzo-rle").unwrap();
        apply(&mut p, "chain-size", "16").unwrap();
        apply(&mut p, "max-pool-percent", "7").unwrap();
        apply(&mut p, "shrinker", "on").unwrap();
        apply(&mut p, "proactive-shrink", "off").unwrap();
        apply(&mut p, "incompressible", "reject").unwrap();
        apply(&mut p, "protection", "protected-size").unwrap();
        assert_eq!(p.compressor, Algorithm::LzoRle);
        assert_eq!((p.chain_size, p.max_pool_percent), (16, 7));
        assert!(p.shrinker_enabled && !p.proactive_shrink && p.reject_compress_poor);
        assert_eq!(p.warm_protection, WarmProtection::ProtectedSize);
        apply(&mut p, "zero-pages", "entry").unwrap();
        apply(&mut p, "lru", "per-pool").unwrap();
        apply(&mut p, "chain-rule", "used-percent").unwrap();
        assert!(p.zero_page_entries);
        assert_eq!(p.lru, LruMode::PerPool);
        assert_eq!(p.chain_rule, ChainRule::UsedPercent);
        assert!(apply(&mut p, "lru", "local")
            .unwrap_err()
            .contains("global or per-pool"));
        assert_eq!(
            apply(&mut p, "zero-pages", "none").unwrap_err(),
            "--zero-pages \"none\": expected entryless or entry"
        );
        assert_eq!(
            apply(&mut p, "shrinker", "yes").unwrap_err(),
            "--shrinker \"yes\": expected on or off"
        );
        assert!(
            p.zero_page_entries && p.shrinker_enabled,
            "a bad value changes nothing"
        );
        assert!(apply(&mut p, "chain-rule", "best").is_err());
        assert!(apply(&mut p, "chain-size", "3").is_err());
        assert!(apply(&mut p, "bogus", "1").unwrap_err().contains("unknown"));
        apply(&mut p, "total-memory", "2G").unwrap();
        apply(&mut p, "max-pool-percent", "10").unwrap();
        assert_eq!(p.max_pool_pages(), (2u64 << 30) / 10 / 4096);
        assert!(apply(&mut p, "total-memory", "12Q").is_err());
        assert!(apply(&mut p, "total-memory", "4K")
            .unwrap_err()
            .contains("at least"));
    }
}
