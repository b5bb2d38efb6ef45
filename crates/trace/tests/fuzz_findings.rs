// SPDX-License-Identifier: MIT
//! Inputs the fuzz target `trace_reader` (fuzz/fuzz_targets/trace_reader.rs, docs/fuzzing.md)
//! found, kept as regression tests: what the reader accepts, the writer can write again.

use std::io::Cursor;

use uzswap_trace::{Format, Header, TraceReader, TraceWriter, BINARY_MAGIC, VERSION};

/// A binary trace whose header holds one meta record (kind 12) with the given key and value.
fn binary_with_meta(k: &str, v: &str) -> Vec<u8> {
    let mut b = BINARY_MAGIC.to_vec();
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.push(12);
    for s in [k, v] {
        b.push(s.len() as u8);
        b.extend_from_slice(s.as_bytes());
    }
    b
}

#[test]
fn binary_meta_with_an_empty_or_spaced_key_is_refused_like_the_writer_refuses_it() {
    for (k, v) in [
        ("", ""),
        ("two words", "x"),
        ("key", "a#b"),
        ("key", "a\nb"),
    ] {
        let e = TraceReader::new(Cursor::new(binary_with_meta(k, v)), "t")
            .err()
            .unwrap_or_else(|| panic!("meta {k:?} {v:?} accepted"));
        assert!(
            e.to_string()
                .contains("the key must be one word, the value one line without '#'"),
            "{e}"
        );
        let h = Header {
            meta: vec![(k.into(), v.into())],
            ..Header::default()
        };
        assert!(TraceWriter::new(Vec::new(), Format::Binary, &h).is_err());
    }
    // A valid pair still reads.
    let r = TraceReader::new(Cursor::new(binary_with_meta("seed", "42 x")), "t").unwrap();
    assert_eq!(r.header().meta("seed"), Some("42 x"));
}
