// SPDX-License-Identifier: MIT
//! clap value parsers for the names every command takes the same way.

use uzswap_compress::Algorithm;
use uzswap_zsmalloc::ChainRule;

/// `--compressor`: lz4, lzo, lzo-rle, zstd[:LEVEL], deflate[:LEVEL]; only algorithms this
/// build has (lzo and lzo-rle need the default cargo feature `kernel-lzo`).
pub fn compressor(s: &str) -> Result<Algorithm, String> {
    let alg: Algorithm = s
        .parse()
        .map_err(|e: uzswap_compress::Error| e.to_string())?;
    if !alg.is_built_in() {
        return Err(uzswap_compress::Error::NotBuiltIn(alg.kernel_name()).to_string());
    }
    Ok(alg)
}

/// `--chain-rule`: min-waste or used-percent.
pub fn chain_rule(s: &str) -> Result<ChainRule, String> {
    s.parse().map_err(|e: uzswap_zsmalloc::Error| e.to_string())
}
