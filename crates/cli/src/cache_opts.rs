// SPDX-License-Identifier: MIT
//! The cache options shared by `uzswap replay` and `uzswap run` (issue #12): one clap struct,
//! mapped to `uzswap_zswap::Params` through `uzswap_replay::params` (the same names a trace's
//! `param` events use). Every option is optional: unset means the cache's default, so a
//! caller can tell what the user chose (the kernel comparison picks kernel defaults for
//! options the user left alone).

use clap::Args;
use uzswap_zswap::Params;

/// Cache options.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheOptions {
    /// Compressor: lz4 (default), lzo, lzo-rle, zstd[:LEVEL], deflate[:LEVEL].
    #[arg(long, value_name = "NAME")]
    pub compressor: Option<String>,
    /// Pages per zspage, 4..16 (CONFIG_ZSMALLOC_CHAIN_SIZE; default 8).
    #[arg(long, value_name = "N")]
    pub chain_size: Option<usize>,
    /// How zsmalloc picks pages per zspage: min-waste (the kernel's) or used-percent (seed 004).
    #[arg(long, value_name = "RULE", value_parser = ["min-waste", "used-percent"])]
    pub chain_rule: Option<String>,
    /// Pool limit, percent of RAM (default 20); under `uzswap run`, one limit for the whole
    /// process tree's pools.
    #[arg(long, value_name = "PCT")]
    pub max_pool_percent: Option<u32>,
    /// After hitting the limit, accept stores again below this percent of it (default 90).
    #[arg(long, value_name = "PCT")]
    pub accept_threshold_percent: Option<u32>,
    /// The memory-pressure shrinker (default off, as the kernel's).
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub shrinker: Option<String>,
    /// Seed 003's proactive shrinking from accept threshold + 1% (default on; not in the kernel).
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    pub proactive_shrink: Option<String>,
    /// Warm-entry protection of the shrinker: second-chance (default) or protected-size (seed 001).
    #[arg(long, value_name = "KIND", value_parser = ["second-chance", "protected-size"])]
    pub protection: Option<String>,
    /// Zero-filled pages: entryless (default, as today's kernel) or entry (a zswap entry and a
    /// store per zero page, as before "mm: zswap: store zero-filled pages without a zswap_entry").
    #[arg(long, value_name = "KIND", value_parser = ["entryless", "entry"])]
    pub zero_pages: Option<String>,
    /// Incompressible pages: store them as-is (default, kernel 6.18) or reject them.
    #[arg(long, value_name = "KIND", value_parser = ["store", "reject"])]
    pub incompressible: Option<String>,
    /// LRU of compressed pages: one global LRU (default, seed 000) or one per compressor pool.
    #[arg(long, value_name = "KIND", value_parser = ["global", "per-pool"])]
    pub lru: Option<String>,
    /// The RAM the pool percentages refer to (default: this machine's MemTotal; under `uzswap
    /// run` with SIZE covering the pool, SIZE), to model a machine of another size:
    /// `--total-memory 64G --max-pool-percent 20`.
    #[arg(long, value_name = "SIZE")]
    pub total_memory: Option<String>,
}

impl CacheOptions {
    /// The options set, as (name, value) in flag order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        let mut put = |n: &'static str, x: Option<String>| {
            if let Some(x) = x {
                v.push((n, x));
            }
        };
        put("compressor", self.compressor.clone());
        put("chain-size", self.chain_size.map(|n| n.to_string()));
        put("chain-rule", self.chain_rule.clone());
        put(
            "max-pool-percent",
            self.max_pool_percent.map(|n| n.to_string()),
        );
        put(
            "accept-threshold-percent",
            self.accept_threshold_percent.map(|n| n.to_string()),
        );
        put("shrinker", self.shrinker.clone());
        put("proactive-shrink", self.proactive_shrink.clone());
        put("protection", self.protection.clone());
        put("zero-pages", self.zero_pages.clone());
        put("incompressible", self.incompressible.clone());
        put("lru", self.lru.clone());
        put("total-memory", self.total_memory.clone());
        v
    }

    /// The options set, as command-line flags (`--compressor lzo`), in flag order: what
    /// `parse_str` reads back.
    pub fn to_flags(&self) -> Vec<String> {
        self.pairs()
            .into_iter()
            .map(|(n, v)| format!("--{n} {v}"))
            .collect()
    }

    /// Apply the options set to `p`.
    pub fn apply(&self, p: &mut Params) -> anyhow::Result<()> {
        for (n, v) in self.pairs() {
            uzswap_replay::params::apply(p, n, &v).map_err(anyhow::Error::msg)?;
        }
        Ok(())
    }

    /// The cache's defaults with these options applied.
    pub fn to_params(&self) -> anyhow::Result<Params> {
        let mut p = Params::default();
        self.apply(&mut p)?;
        Ok(p)
    }

    /// Parse options from one string of flags, as `--compare "--compressor zstd --chain-size 16"`.
    pub fn parse_str(s: &str) -> anyhow::Result<CacheOptions> {
        #[derive(clap::Parser)]
        #[command(name = "cache options", no_binary_name = true)]
        struct P {
            #[command(flatten)]
            o: CacheOptions,
        }
        use clap::Parser as _;
        let p = P::try_parse_from(s.split_whitespace())
            .map_err(|e| anyhow::anyhow!("cache options {s:?}: {}", e.to_string().trim_end()))?;
        Ok(p.o)
    }

    /// These options with `other`'s set values on top.
    pub fn overlay(&self, other: &CacheOptions) -> CacheOptions {
        let pick = |a: &Option<String>, b: &Option<String>| b.clone().or_else(|| a.clone());
        CacheOptions {
            compressor: pick(&self.compressor, &other.compressor),
            chain_size: other.chain_size.or(self.chain_size),
            chain_rule: pick(&self.chain_rule, &other.chain_rule),
            max_pool_percent: other.max_pool_percent.or(self.max_pool_percent),
            accept_threshold_percent: other
                .accept_threshold_percent
                .or(self.accept_threshold_percent),
            shrinker: pick(&self.shrinker, &other.shrinker),
            proactive_shrink: pick(&self.proactive_shrink, &other.proactive_shrink),
            protection: pick(&self.protection, &other.protection),
            zero_pages: pick(&self.zero_pages, &other.zero_pages),
            incompressible: pick(&self.incompressible, &other.incompressible),
            lru: pick(&self.lru, &other.lru),
            total_memory: pick(&self.total_memory, &other.total_memory),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_params() {
        let o = CacheOptions::parse_str(
            "--compressor lzo-rle --chain-size 16 --max-pool-percent 5 \
             --accept-threshold-percent 50 --shrinker on --proactive-shrink off \
             --protection protected-size --incompressible reject --zero-pages entryless \
             --lru global --chain-rule min-waste",
        )
        .unwrap();
        let p = o.to_params().unwrap();
        assert_eq!(p.compressor, uzswap_zswap::Algorithm::LzoRle);
        assert_eq!(
            (p.chain_size, p.max_pool_percent, p.accept_threshold_percent),
            (16, 5, 50)
        );
        assert!(p.shrinker_enabled && !p.proactive_shrink && p.reject_compress_poor);
        assert!(!p.zero_page_entries);
        assert_eq!(p.lru, uzswap_zswap::LruMode::Global);
        assert_eq!(p.chain_rule, uzswap_zswap::ChainRule::MinWaste);
        assert_eq!(o.pairs().len(), 11);
    }

    #[test]
    fn variants_map_to_params() {
        let p =
            CacheOptions::parse_str("--zero-pages entry --lru per-pool --chain-rule used-percent")
                .unwrap()
                .to_params()
                .unwrap();
        assert!(p.zero_page_entries);
        assert_eq!(p.lru, uzswap_zswap::LruMode::PerPool);
        assert_eq!(p.chain_rule, uzswap_zswap::ChainRule::UsedPercent);
        let d = CacheOptions::default().to_params().unwrap();
        assert!(!d.zero_page_entries);
        assert_eq!(d.lru, uzswap_zswap::LruMode::Global);
        assert_eq!(d.chain_rule, uzswap_zswap::ChainRule::MinWaste);
        assert!(CacheOptions::parse_str("--shrinker maybe").is_err());
        assert!(CacheOptions::parse_str("--lru local").is_err());
        assert!(CacheOptions::parse_str("--bogus 1").is_err());
    }

    #[test]
    fn overlay_prefers_the_second() {
        let a = CacheOptions::parse_str("--compressor lzo --chain-size 4").unwrap();
        let b = CacheOptions::parse_str("--chain-size 16").unwrap();
        let c = a.overlay(&b);
        assert_eq!(c.compressor.as_deref(), Some("lzo"));
        assert_eq!(c.chain_size, Some(16));
    }
}
