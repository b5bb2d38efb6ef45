// SPDX-License-Identifier: MIT
//! zswap module parameters (`/sys/module/zswap/parameters/*`) and a guard that writes the
//! original values back when dropped (also when a test panics).

use crate::sysfs::{read_trimmed, write_value};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Directory of the zswap parameters.
pub const PARAMS_DIR: &str = "/sys/module/zswap/parameters";

fn param_path(name: &str) -> Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(Error::InvalidArgument(format!(
            "bad zswap parameter name {name:?}"
        )));
    }
    Ok(Path::new(PARAMS_DIR).join(name))
}

/// True when zswap is built in or loaded.
pub fn available() -> bool {
    Path::new(PARAMS_DIR).is_dir()
}

/// Read one parameter (trimmed), e.g. `read("compressor")` -> `"lzo"`.
pub fn read(name: &str) -> Result<String> {
    if !available() {
        return Err(Error::NotAvailable(format!(
            "zswap is not in this kernel ({PARAMS_DIR} missing)"
        )));
    }
    read_trimmed(&param_path(name)?)
}

/// Write one parameter without restoring it later; prefer [`ParamGuard::set`].
pub fn write(name: &str, value: &str) -> Result<()> {
    if !available() {
        return Err(Error::NotAvailable(format!(
            "zswap is not in this kernel ({PARAMS_DIR} missing)"
        )));
    }
    write_value(&param_path(name)?, value)
}

/// All parameters as (name, value), sorted by name.
pub fn read_all() -> Result<Vec<(String, String)>> {
    let dir = Path::new(PARAMS_DIR);
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        let name = ent.file_name().to_string_lossy().to_string();
        out.push((name.clone(), read_trimmed(&ent.path())?));
    }
    out.sort();
    Ok(out)
}

/// Parse a zswap boolean parameter ("Y"/"N", also "1"/"0").
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "Y" | "y" | "1" => Some(true),
        "N" | "n" | "0" => Some(false),
        _ => None,
    }
}

/// Remembers the original value of every parameter it changes and restores them, newest
/// change first, on Drop.
#[derive(Debug, Default)]
pub struct ParamGuard {
    saved: Vec<(String, String)>,
}

impl ParamGuard {
    /// An empty guard.
    pub fn new() -> ParamGuard {
        ParamGuard::default()
    }

    /// Set `name` to `value`, saving its value first (only the first time per name).
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        if !self.saved.iter().any(|(n, _)| n == name) {
            let orig = read(name)?;
            self.saved.push((name.to_string(), orig));
        }
        write(name, value)
    }

    /// The saved originals, in the order first changed.
    pub fn originals(&self) -> &[(String, String)] {
        &self.saved
    }

    /// Restore now; errors are returned (Drop only prints them).
    pub fn restore(&mut self) -> Result<()> {
        let mut first_err = None;
        while let Some((name, value)) = self.saved.pop() {
            if let Err(e) = write(&name, &value) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for ParamGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "uzswap-kernel: warning: could not restore a zswap parameter: {}",
                crate::error_chain(&e)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_path_tricks() {
        assert!(param_path("../x").is_err());
        assert!(param_path("").is_err());
        assert!(param_path("enabled").is_ok());
    }

    #[test]
    fn bools() {
        assert_eq!(parse_bool("Y\n"), Some(true));
        assert_eq!(parse_bool("N"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }
}
