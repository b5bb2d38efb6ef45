// SPDX-License-Identifier: MIT
//! Streaming reader: detects the encoding, reads the header, then yields validated events one
//! at a time. Memory use is the cgroup table and a line buffer, whatever the trace's length.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::binary::{Decoded, Decoder};
use crate::text::{self, Line, NameLookup};
use crate::{
    CgroupInfo, Cgroups, Format, Header, Location, Record, TraceError, BINARY_MAGIC, TEXT_MAGIC,
    VERSION,
};

/// Reads a trace in either encoding.
pub struct TraceReader<R: BufRead> {
    r: R,
    name: String,
    format: Format,
    header: Header,
    cgroups: Cgroups,
    /// Text: the current line number; binary: unused (the decoder tracks offsets).
    line: u64,
    line_buf: String,
    decoder: Decoder,
    last_time: u64,
    /// The first event, read while looking for the end of the header.
    pending: Option<Record>,
    /// Offset (binary) or line (text) of the pending event.
    pending_at: Location,
    events: u64,
}

impl TraceReader<BufReader<File>> {
    /// Open a trace file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let f = File::open(path)
            .map_err(|e| TraceError::new(&name, Location::None, format!("cannot open: {e}")))?;
        TraceReader::new(BufReader::with_capacity(1 << 16, f), &name)
    }
}

impl<R: BufRead> TraceReader<R> {
    /// Read the format magic and the header from `r`; `name` appears in error messages.
    pub fn new(mut r: R, name: &str) -> Result<Self, TraceError> {
        let err = |loc, m: String| TraceError::new(name, loc, m);
        let head = r
            .fill_buf()
            .map_err(|e| err(Location::None, format!("read error: {e}")))?;
        let binary = head.starts_with(&BINARY_MAGIC[..head.len().min(8)]) && !head.is_empty();
        let mut me = TraceReader {
            r,
            name: name.to_string(),
            format: if binary { Format::Binary } else { Format::Text },
            header: Header::default(),
            cgroups: Cgroups::default(),
            line: 0,
            line_buf: String::new(),
            decoder: Decoder::default(),
            last_time: 0,
            pending: None,
            pending_at: Location::None,
            events: 0,
        };
        if binary {
            let mut magic = [0u8; 12];
            me.r.read_exact(&mut magic).map_err(|_| {
                err(
                    Location::Offset(0),
                    "truncated binary header (expected 12 bytes)".into(),
                )
            })?;
            let v = u32::from_le_bytes(magic[8..12].try_into().expect("4 bytes"));
            if v != VERSION {
                return Err(err(
                    Location::Offset(8),
                    format!("binary trace version {v}: this reader knows version {VERSION}"),
                ));
            }
            me.decoder.offset = 12;
        } else {
            // The first non-blank line must be the magic.
            loop {
                if !me.read_line()? {
                    return Err(err(
                        Location::Line(me.line.max(1)),
                        format!("empty input: expected `{TEXT_MAGIC} {VERSION}`"),
                    ));
                }
                match text::parse_line(
                    &me.line_buf,
                    &NameLookup {
                        cgroups: &me.cgroups.list,
                    },
                ) {
                    Ok(Line::Blank) => continue,
                    Ok(Line::Magic(v)) if v == VERSION => break,
                    Ok(Line::Magic(v)) => {
                        return Err(err(
                            Location::Line(me.line),
                            format!("text trace version {v}: this reader knows version {VERSION}"),
                        ))
                    }
                    _ => {
                        return Err(err(
                            Location::Line(me.line),
                            format!(
                                "not a trace: the first line must be `{TEXT_MAGIC} {VERSION}` \
                                 (or the file must start with the binary magic UZTRACE)"
                            ),
                        ))
                    }
                }
            }
        }
        // Header records, up to the first event.
        loop {
            let at = me.here();
            match me.raw_next()? {
                None => break,
                Some(Raw::Pages(p)) => me.header.pages = p,
                Some(Raw::Meta(k, v)) => me.header.meta.push((k, v)),
                Some(Raw::Event(rec)) => {
                    me.pending = Some(rec);
                    me.pending_at = at;
                    break;
                }
            }
        }
        Ok(me)
    }

    /// The encoding detected.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The input's name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every cgroup seen so far, by number (0 is the root).
    pub fn cgroups(&self) -> &[CgroupInfo] {
        &self.cgroups.list
    }

    /// Events returned so far.
    pub fn events_read(&self) -> u64 {
        self.events
    }

    /// The next event, validated; `Ok(None)` at the end of the trace.
    pub fn next_event(&mut self) -> Result<Option<Record>, TraceError> {
        let (rec, at) = if let Some(p) = self.pending.take() {
            (p, self.pending_at)
        } else {
            let at = self.here();
            match self.raw_next()? {
                None => return Ok(None),
                Some(Raw::Event(rec)) => (rec, at),
                Some(Raw::Pages(_) | Raw::Meta(..)) => {
                    return Err(TraceError::new(
                        &self.name,
                        at,
                        "a `pages` or `meta` header line after the first event",
                    ))
                }
            }
        };
        if let Some(t) = rec.time_ns {
            if t < self.last_time {
                return Err(TraceError::new(
                    &self.name,
                    at,
                    format!(
                        "timestamp {t} ns is before the previous one ({})",
                        self.last_time
                    ),
                ));
            }
            self.last_time = t;
        }
        self.cgroups
            .apply(&rec.event)
            .map_err(|m| TraceError::new(&self.name, at, m))?;
        self.events += 1;
        Ok(Some(rec))
    }

    fn here(&self) -> Location {
        match self.format {
            Format::Text => Location::Line(self.line + 1),
            Format::Binary => Location::Offset(self.decoder.offset),
        }
    }

    /// Read one line into `line_buf`; false at end of input.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        self.line_buf.clear();
        let n = self.r.read_line(&mut self.line_buf).map_err(|e| {
            TraceError::new(
                &self.name,
                Location::Line(self.line + 1),
                if e.kind() == std::io::ErrorKind::InvalidData {
                    "not UTF-8 text (a binary trace must start with UZTRACE)".to_string()
                } else {
                    format!("read error: {e}")
                },
            )
        })?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        Ok(true)
    }

    fn raw_next(&mut self) -> Result<Option<Raw>, TraceError> {
        match self.format {
            Format::Binary => {
                let start = self.decoder.offset;
                let next_cg = self.cgroups.list.len() as u32;
                match self.decoder.next(&mut self.r, next_cg) {
                    Ok(None) => Ok(None),
                    Ok(Some(Decoded::Pages(p))) => Ok(Some(Raw::Pages(p))),
                    Ok(Some(Decoded::Meta(k, v))) => Ok(Some(Raw::Meta(k, v))),
                    Ok(Some(Decoded::Event(time_ns, event))) => {
                        Ok(Some(Raw::Event(Record { time_ns, event })))
                    }
                    Err(m) => Err(TraceError::new(&self.name, Location::Offset(start), m)),
                }
            }
            Format::Text => loop {
                if !self.read_line()? {
                    return Ok(None);
                }
                let parsed = text::parse_line(
                    &self.line_buf,
                    &NameLookup {
                        cgroups: &self.cgroups.list,
                    },
                )
                .map_err(|m| TraceError::new(&self.name, Location::Line(self.line), m))?;
                return Ok(Some(match parsed {
                    Line::Blank => continue,
                    Line::Magic(_) => {
                        return Err(TraceError::new(
                            &self.name,
                            Location::Line(self.line),
                            "a second format line",
                        ))
                    }
                    Line::Pages(p) => Raw::Pages(p),
                    Line::Meta(k, v) => Raw::Meta(k, v),
                    Line::Event(time_ns, event) => Raw::Event(Record { time_ns, event }),
                }));
            },
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

enum Raw {
    Pages(crate::PageSource),
    Meta(String, String),
    Event(Record),
}
