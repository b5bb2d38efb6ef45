// SPDX-License-Identifier: MIT
//! The trace reader (`uzswap_trace::TraceReader`, both encodings) on arbitrary bytes: never
//! panics, stops at the first malformed event; every event it accepted, written again with
//! `TraceWriter` in the same encoding, reads back identical.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use uzswap_trace::{TraceReader, TraceWriter};

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = TraceReader::new(Cursor::new(data), "fuzz") else {
        return;
    };
    let mut records = Vec::new();
    while let Ok(Some(rec)) = r.next_event() {
        records.push(rec);
    }
    let mut w = TraceWriter::new(Vec::new(), r.format(), r.header()).expect("header re-encodes");
    for rec in &records {
        w.event(rec.time_ns, &rec.event)
            .expect("an event the reader accepted is writable");
    }
    let bytes = w.finish().expect("finish");
    let mut r2 = TraceReader::new(Cursor::new(&bytes[..]), "again").expect("own output opens");
    assert_eq!(r2.header(), r.header());
    for rec in &records {
        assert_eq!(r2.next_event().expect("own output reads").as_ref(), Some(rec));
    }
    assert!(r2.next_event().expect("clean end").is_none());
});
