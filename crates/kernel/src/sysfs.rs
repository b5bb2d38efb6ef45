// SPDX-License-Identifier: MIT
//! Small helpers for the kernel's one-value text files.

use crate::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Read a whole text file.
pub(crate) fn read_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::NotAvailable(format!("{} does not exist", path.display()))
        } else {
            Error::io(path, e)
        }
    })
}

/// Read a file holding one value, trimmed.
pub(crate) fn read_trimmed(path: &Path) -> Result<String> {
    Ok(read_string(path)?.trim().to_string())
}

/// Read a file holding one unsigned integer.
pub(crate) fn read_u64(path: &Path) -> Result<u64> {
    let s = read_trimmed(path)?;
    s.parse::<u64>().map_err(|e| {
        Error::parse(
            path,
            format!("expected an unsigned integer, got {s:?}: {e}"),
        )
    })
}

/// Write a value with one `write(2)`, as sysfs expects.
pub(crate) fn write_value(path: &Path, value: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all(value.as_bytes()).map_err(|e| {
        if e.raw_os_error() == Some(libc::EBUSY) {
            Error::Busy(format!("writing {value:?} to {}: {e}", path.display()))
        } else if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) {
            // The file exists (open succeeded): ENOENT here is the kernel refusing the value,
            // e.g. a compressor that is not available.
            Error::InvalidArgument(format!(
                "the kernel rejected {value:?} for {}: {e}",
                path.display()
            ))
        } else {
            Error::io(path, e)
        }
    })
}

/// Parse `name value` lines (vmstat, meminfo-like) into pairs. Lines that do not split into a
/// name and an unsigned number are an error naming the line.
pub(crate) fn parse_name_value(path: &Path, text: &str) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(name), Some(value)) = (it.next(), it.next()) else {
            return Err(Error::parse(
                path,
                format!("line {}: {line:?}: expected 'name value'", n + 1),
            ));
        };
        let name = name.trim_end_matches(':');
        let value = value.parse::<u64>().map_err(|e| {
            Error::parse(
                path,
                format!(
                    "line {}: {line:?}: value is not an unsigned integer: {e}",
                    n + 1
                ),
            )
        })?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}
