// SPDX-License-Identifier: MIT
//! Both encodings round-trip every event kind; malformed input is refused with its line or
//! byte offset; long traces stream.

use std::io::Cursor;

use uzswap_trace::{
    Content, Event, Format, Header, Location, PageSource, Record, TraceReader, TraceWriter,
};

fn sample() -> Vec<Record> {
    let ev = |time_ns, event| Record { time_ns, event };
    vec![
        ev(
            None,
            Event::Cgroup {
                cg: 1,
                parent: 0,
                name: "web".into(),
            },
        ),
        ev(
            None,
            Event::Cgroup {
                cg: 2,
                parent: 1,
                name: "job".into(),
            },
        ),
        ev(
            Some(5),
            Event::MemoryMax {
                cg: 1,
                bytes: Some(256 << 20),
            },
        ),
        ev(None, Event::ZswapMax { cg: 2, bytes: None }),
        ev(
            None,
            Event::ZswapWriteback {
                cg: 2,
                enabled: false,
            },
        ),
        ev(
            Some(10),
            Event::Write {
                cg: 1,
                page: 7,
                content: Content::Page(3),
            },
        ),
        ev(
            None,
            Event::Write {
                cg: 2,
                page: 1 << 40,
                content: Content::Zero,
            },
        ),
        ev(Some(10), Event::Read { cg: 1, page: 6 }),
        ev(None, Event::Read { cg: 1, page: 0 }),
        ev(
            None,
            Event::Free {
                cg: 2,
                page: 1 << 40,
                count: 3,
            },
        ),
        ev(
            Some(99),
            Event::Reclaim {
                cg: 1,
                bytes: 1 << 20,
            },
        ),
        ev(
            None,
            Event::Param {
                name: "compressor".into(),
                value: "lzo-rle".into(),
            },
        ),
        ev(None, Event::RemoveCgroup { cg: 2 }),
        ev(
            None,
            Event::Cgroup {
                cg: 3,
                parent: 0,
                name: "job".into(),
            },
        ),
        ev(None, Event::Read { cg: 3, page: 1 }),
    ]
}

fn header() -> Header {
    Header {
        pages: PageSource::File("/tmp/corpus.uzpf".into()),
        meta: vec![
            ("workload".into(), "test".into()),
            ("seed".into(), "42".into()),
        ],
    }
}

fn encode(format: Format, recs: &[Record]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), format, &header()).unwrap();
    for r in recs {
        w.event(r.time_ns, &r.event).unwrap();
    }
    w.finish().unwrap()
}

fn decode(bytes: &[u8]) -> Result<(Header, Vec<Record>), uzswap_trace::TraceError> {
    let mut r = TraceReader::new(Cursor::new(bytes), "t")?;
    let h = r.header().clone();
    let mut out = Vec::new();
    while let Some(rec) = r.next_event()? {
        out.push(rec);
    }
    Ok((h, out))
}

#[test]
fn both_encodings_roundtrip() {
    for f in [Format::Text, Format::Binary] {
        let b = encode(f, &sample());
        let (h, recs) = decode(&b).unwrap();
        assert_eq!(h, header(), "{f:?}");
        assert_eq!(recs, sample(), "{f:?}");
    }
    // Binary is compact: a local access pattern costs a few bytes per event.
    let mut recs = vec![Record {
        time_ns: None,
        event: Event::Cgroup {
            cg: 1,
            parent: 0,
            name: "a".into(),
        },
    }];
    for i in 0..10_000u64 {
        recs.push(Record {
            time_ns: None,
            event: Event::Read { cg: 1, page: i },
        });
    }
    assert!(encode(Format::Binary, &recs).len() < 40_000);
}

fn text_err(body: &str) -> uzswap_trace::TraceError {
    match decode(body.as_bytes()) {
        Err(e) => e,
        Ok(_) => panic!("accepted: {body}"),
    }
}

#[test]
fn bad_text_is_refused_with_its_line() {
    let cases = [
        ("hello\n", 1, "not a trace"),
        ("uzswap-trace 1\ncgroup a\nr b 1\n", 3, "unknown cgroup"),
        ("uzswap-trace 1\ncgroup a\n\nw a 1\n", 4, "missing content"),
        (
            "uzswap-trace 1\ncgroup a\n@5 r a 1\n@4 r a 2\n",
            4,
            "before the previous",
        ),
        ("uzswap-trace 1\ncgroup a\ncgroup a\n", 3, "already exists"),
        (
            "uzswap-trace 1\ncgroup a\ncgroup b a\nrmcgroup a\n",
            4,
            "live child",
        ),
        (
            "uzswap-trace 1\ncgroup a\nrmcgroup a\nr a 1\n",
            4,
            "unknown cgroup",
        ),
        ("uzswap-trace 1\nbogus 1\n", 2, "unknown event"),
        ("uzswap-trace 1\ncgroup a\nr a 1\nmeta k v\n", 4, "header"),
        (
            "uzswap-trace 1\ncgroup a\nr a 4503599627370496\n",
            3,
            "beyond",
        ),
        ("uzswap-trace 2\n", 1, "version 2"),
        ("uzswap-trace 1\ncgroup a\nfree a 1 0\n", 3, "empty"),
    ];
    for (body, line, what) in cases {
        let e = text_err(body);
        assert_eq!(e.location, Location::Line(line), "{body:?}: {e}");
        assert!(e.to_string().contains(what), "{body:?}: {e}");
        assert!(e.to_string().starts_with(&format!("t:{line}: ")), "{e}");
    }
}

#[test]
fn bad_binary_is_refused_with_its_offset() {
    let good = encode(Format::Binary, &sample());
    // Truncation anywhere inside the records is reported, never accepted silently.
    for cut in 13..good.len() {
        if let Err(e) = decode(&good[..cut]) {
            assert!(
                matches!(e.location, Location::Offset(o) if o < cut as u64),
                "{e}"
            );
        }
    }
    // A truncated record right after the header.
    let mut b = good[..12].to_vec();
    b.extend_from_slice(&[0x00]); // read: cg missing
    let e = decode(&b).unwrap_err();
    assert_eq!(e.location, Location::Offset(12));
    assert!(e.to_string().contains("truncated"), "{e}");
    // Unknown kind.
    let mut b = good[..12].to_vec();
    b.push(0x0f);
    let e = decode(&b).unwrap_err();
    assert!(
        e.to_string()
            .contains("byte offset 12: unknown record kind 15"),
        "{e}"
    );
    // Access to a cgroup that does not exist.
    let mut b = good[..12].to_vec();
    b.extend_from_slice(&[0x00, 5, 2]);
    let e = decode(&b).unwrap_err();
    assert!(e.to_string().contains("no cgroup #5"), "{e}");
    // Wrong version.
    let mut b = good[..12].to_vec();
    b[8] = 9;
    assert!(decode(&b).unwrap_err().to_string().contains("version 9"));
}

#[test]
fn writer_refuses_what_the_reader_would() {
    let mut w = TraceWriter::new(Vec::new(), Format::Binary, &Header::default()).unwrap();
    assert!(w.read(1, 0, None).is_err());
    let cg = w.cgroup("a", 0, Some(10)).unwrap();
    assert!(w.read(cg, 0, Some(9)).is_err());
    assert!(w.cgroup("a", 0, None).is_err());
    assert!(w.cgroup("has space", 0, None).is_err());
    w.write(cg, 3, Content::Page(1), Some(11)).unwrap();
    assert_eq!(w.events_written(), 2);
}

/// A trace of a million events streams through the reader with the cgroup table as its only
/// state (the reader holds no per-event data; this checks it gets through and counts right).
#[test]
fn long_traces_stream() {
    struct Gen(u64);
    let n = 1_000_000u64;
    let mut w = TraceWriter::new(Vec::new(), Format::Binary, &Header::default()).unwrap();
    let cg = w.cgroup("a", 0, None).unwrap();
    let mut g = Gen(1);
    for _ in 0..n {
        g.0 =
            g.0.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        let page = (g.0 >> 40) % 4096;
        if g.0 & 1 == 0 {
            w.read(cg, page, None).unwrap();
        } else {
            w.write(cg, page, Content::Page((g.0 >> 20) as u32 % 1000), None)
                .unwrap();
        }
    }
    let bytes = w.finish().unwrap();
    let mut r = TraceReader::new(Cursor::new(&bytes[..]), "long").unwrap();
    let mut count = 0u64;
    while let Some(rec) = r.next_event().unwrap() {
        assert!(
            matches!(rec.event, Event::Read { page, .. } | Event::Write { page, .. } if page < 4096 )
                || count == 0
        );
        count += 1;
    }
    assert_eq!(count, n + 1);
}
