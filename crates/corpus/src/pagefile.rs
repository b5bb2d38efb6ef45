// SPDX-License-Identifier: MIT
//! The page-file format (docs/page-file-format.md).
//!
//! ```text
//! offset  size  field
//!      0     8  magic "UZSWAPPG"
//!      8     4  version (u32 LE) = 1
//!     12     4  page size (u32 LE) = 4096
//!     16     8  page count (u64 LE)
//!     24     4  source length in bytes (u32 LE, <= 4064)
//!     28     4  flags (u32 LE) = 0
//!     32     n  source description (UTF-8)
//!   32+n     .  zero padding up to offset 4096
//!   4096     .  page count * 4096 bytes of pages
//! ```
//! A file without the magic whose length is a non-zero multiple of 4096 is read as raw pages.

use crate::{Error, Pages, Result, PAGE_SIZE};
use std::path::Path;

/// First 8 bytes of a page file.
pub const MAGIC: &[u8; 8] = b"UZSWAPPG";
/// Format version written and accepted.
pub const VERSION: u32 = 1;
/// The header occupies exactly one page, so pages start page-aligned.
const HEADER_LEN: usize = PAGE_SIZE;
const FIXED_LEN: usize = 32;
/// Longest source description that fits in the header page.
pub const MAX_SOURCE_LEN: usize = HEADER_LEN - FIXED_LEN;

/// Serialize pages into the page-file format. Over-long source text is cut at a character
/// boundary.
pub fn encode_page_file(pages: &Pages) -> Vec<u8> {
    let mut src = pages.source();
    if src.len() > MAX_SOURCE_LEN {
        let mut cut = MAX_SOURCE_LEN;
        while !src.is_char_boundary(cut) {
            cut -= 1;
        }
        src = &src[..cut];
    }
    let mut out = Vec::with_capacity(HEADER_LEN + pages.as_bytes().len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
    out.extend_from_slice(&(pages.len() as u64).to_le_bytes());
    out.extend_from_slice(&(src.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(src.as_bytes());
    out.resize(HEADER_LEN, 0);
    out.extend_from_slice(pages.as_bytes());
    out
}

/// Parse page-file bytes (or a raw page dump). `path` is only used in error messages and in
/// the source description of raw files.
pub fn decode_page_file(path: &Path, bytes: Vec<u8>) -> Result<Pages> {
    let bad = |detail: String| Error::Malformed {
        path: path.to_path_buf(),
        detail,
    };
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        if bytes.is_empty() {
            return Err(bad("the file is empty".into()));
        }
        if bytes.len() % PAGE_SIZE != 0 {
            return Err(bad(format!(
                "no UZSWAPPG header, and as a raw page dump its length {} is not a multiple of {PAGE_SIZE}",
                bytes.len()
            )));
        }
        let src = format!("raw page dump {}", path.display());
        return Pages::from_bytes(bytes, src);
    }
    if bytes.len() < HEADER_LEN {
        return Err(bad(format!(
            "truncated header: {} bytes, the header is {HEADER_LEN}",
            bytes.len()
        )));
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
    let version = u32_at(8);
    if version != VERSION {
        return Err(bad(format!(
            "unsupported version {version} (this build reads version {VERSION})"
        )));
    }
    let page_size = u32_at(12);
    if page_size as usize != PAGE_SIZE {
        return Err(bad(format!(
            "page size {page_size}, only {PAGE_SIZE} is supported"
        )));
    }
    let count = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let src_len = u32_at(24) as usize;
    if src_len > MAX_SOURCE_LEN {
        return Err(bad(format!(
            "source length {src_len} exceeds the header ({MAX_SOURCE_LEN} max)"
        )));
    }
    let flags = u32_at(28);
    if flags != 0 {
        return Err(bad(format!("unknown flags {flags:#x}")));
    }
    let source = std::str::from_utf8(&bytes[FIXED_LEN..FIXED_LEN + src_len])
        .map_err(|e| bad(format!("source description is not UTF-8: {e}")))?
        .to_string();
    if bytes[FIXED_LEN + src_len..HEADER_LEN]
        .iter()
        .any(|&b| b != 0)
    {
        return Err(bad("non-zero bytes in the header padding".into()));
    }
    let body = (bytes.len() - HEADER_LEN) as u64;
    let expect = count
        .checked_mul(PAGE_SIZE as u64)
        .ok_or_else(|| bad(format!("page count {count} overflows")))?;
    if body < expect {
        return Err(bad(format!(
            "truncated: header says {count} pages ({expect} bytes) but only {body} bytes of pages follow"
        )));
    }
    if body > expect {
        return Err(bad(format!(
            "{} unexpected bytes after the {count} pages the header announces",
            body - expect
        )));
    }
    let mut bytes = bytes;
    bytes.drain(..HEADER_LEN);
    Pages::from_bytes(bytes, source)
}

/// Read a page file (or raw page dump) from disk.
pub fn read_page_file(path: impl AsRef<Path>) -> Result<Pages> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| Error::ReadPageFile {
        path: path.to_path_buf(),
        source,
    })?;
    decode_page_file(path, bytes)
}

/// Write pages to `path` in the page-file format.
pub fn write_page_file(path: impl AsRef<Path>, pages: &Pages) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, encode_page_file(pages)).map_err(|source| Error::WritePageFile {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Pages {
        let mut p = Pages::new("unit test: ascii text");
        let text = b"The quick brown fox jumps over the lazy dog. ";
        for i in 0..3u8 {
            let page: Vec<u8> = text.iter().cycle().take(PAGE_SIZE).map(|b| b ^ i).collect();
            p.push_page(&page).unwrap();
        }
        p
    }

    #[test]
    fn roundtrip() {
        let p = sample();
        let bytes = encode_page_file(&p);
        assert_eq!(bytes.len(), 4 * PAGE_SIZE);
        let q = decode_page_file(Path::new("x"), bytes).unwrap();
        assert_eq!(p, q);
    }

    #[test]
    fn malformed() {
        let p = sample();
        let good = encode_page_file(&p);
        let err = |b: Vec<u8>| decode_page_file(Path::new("f"), b).unwrap_err().to_string();
        assert!(err(good[..good.len() - 1].to_vec()).contains("truncated"));
        assert!(err(good[..100].to_vec()).contains("truncated header"));
        let mut b = good.clone();
        b[8] = 9;
        assert!(err(b).contains("unsupported version 9"));
        let mut b = good.clone();
        b[13] = 0x20;
        assert!(err(b).contains("page size"));
        let mut b = good.clone();
        b[24..28].copy_from_slice(&5000u32.to_le_bytes());
        assert!(err(b).contains("source length"));
        let mut b = good.clone();
        b[28] = 1;
        assert!(err(b).contains("flags"));
        let mut b = good.clone();
        b[4000] = 1;
        assert!(err(b).contains("padding"));
        let mut b = good.clone();
        b.extend_from_slice(&[0; PAGE_SIZE]);
        assert!(err(b).contains("unexpected bytes"));
        let mut b = good.clone();
        b[32] = 0xff;
        assert!(err(b).contains("UTF-8"));
        assert!(err(vec![]).contains("empty"));
        assert!(err(vec![1; 5000]).contains("not a multiple"));
    }

    #[test]
    fn raw_dump() {
        let p = sample();
        let q = decode_page_file(Path::new("dump.bin"), p.as_bytes().to_vec()).unwrap();
        assert_eq!(q.as_bytes(), p.as_bytes());
        assert!(q.source().contains("raw page dump dump.bin"));
    }
}
