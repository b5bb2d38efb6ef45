// SPDX-License-Identifier: MIT
//! Writing a command's output to stdout.

use std::io::Write as _;

use anyhow::Context;
use serde::Serialize;

/// Writes a command's whole output to stdout. A closed pipe (`uzswap ... | head`) ends the
/// output quietly instead of panicking like `println!`.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// Emits `value` as one pretty-printed JSON document and a newline.
pub fn emit_json(value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("serializing the JSON output")?;
    text.push('\n');
    emit(&text)
}
