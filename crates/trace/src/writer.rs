// SPDX-License-Identifier: MIT
//! Streaming writer. Access events go through [`TraceWriter::read`], [`TraceWriter::write`]
//! and [`TraceWriter::free`], which allocate nothing (they encode into a reused buffer and a
//! `BufWriter`), so a recorder may call them for every fault. Control events take `&Event`.
//! Every event is validated as the reader would, so a writer never produces a trace the
//! reader refuses.

use std::io::{BufWriter, Write};

use crate::binary::Encoder;
use crate::text;
use crate::{
    Cgroups, Content, Event, Format, Header, Location, TraceError, BINARY_MAGIC, TEXT_MAGIC,
    VERSION,
};

/// Writes a trace in either encoding.
pub struct TraceWriter<W: Write> {
    w: BufWriter<W>,
    format: Format,
    cgroups: Cgroups,
    enc: Encoder,
    line: String,
    last_time: u64,
    events: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Start a trace: writes the format magic and the header.
    pub fn new(w: W, format: Format, header: &Header) -> Result<Self, TraceError> {
        let mut me = TraceWriter {
            w: BufWriter::with_capacity(1 << 16, w),
            format,
            cgroups: Cgroups::default(),
            enc: Encoder::default(),
            line: String::with_capacity(128),
            last_time: 0,
            events: 0,
        };
        let r = match format {
            Format::Binary => (|| {
                me.w.write_all(&BINARY_MAGIC)?;
                me.w.write_all(&VERSION.to_le_bytes())?;
                Encoder::write_pages(&mut me.w, &header.pages)?;
                for (k, v) in &header.meta {
                    Encoder::write_meta(&mut me.w, k, v)?;
                }
                Ok(())
            })(),
            Format::Text => (|| {
                writeln!(me.w, "{TEXT_MAGIC} {VERSION}")?;
                match &header.pages {
                    crate::PageSource::Default => writeln!(me.w, "pages default")?,
                    crate::PageSource::File(p) => writeln!(me.w, "pages file {}", p.display())?,
                }
                for (k, v) in &header.meta {
                    writeln!(me.w, "meta {k} {v}")?;
                }
                Ok(())
            })(),
        };
        for (k, v) in &header.meta {
            crate::check_meta(k, v).map_err(|m| me.err(m))?;
        }
        r.map_err(|e: std::io::Error| me.err(format!("write error: {e}")))?;
        Ok(me)
    }

    fn err(&self, m: String) -> TraceError {
        TraceError::new("trace writer", Location::None, m)
    }

    /// Create a cgroup under `parent` (0 = root); returns its number.
    pub fn cgroup(
        &mut self,
        name: &str,
        parent: u32,
        time: Option<u64>,
    ) -> Result<u32, TraceError> {
        let cg = self.cgroups.list.len() as u32;
        self.event(
            time,
            &Event::Cgroup {
                cg,
                parent,
                name: name.to_string(),
            },
        )?;
        Ok(cg)
    }

    /// A read of `page` by cgroup `cg`.
    #[inline]
    pub fn read(&mut self, cg: u32, page: u64, time: Option<u64>) -> Result<(), TraceError> {
        self.event(time, &Event::Read { cg, page })
    }

    /// A write of `page` by cgroup `cg` with `content`.
    #[inline]
    pub fn write(
        &mut self,
        cg: u32,
        page: u64,
        content: Content,
        time: Option<u64>,
    ) -> Result<(), TraceError> {
        self.event(time, &Event::Write { cg, page, content })
    }

    /// `count` pages from `page` of cgroup `cg` are unmapped.
    #[inline]
    pub fn free(
        &mut self,
        cg: u32,
        page: u64,
        count: u64,
        time: Option<u64>,
    ) -> Result<(), TraceError> {
        self.event(time, &Event::Free { cg, page, count })
    }

    /// Any event. A `Cgroup` event must carry the next number (see [`TraceWriter::cgroup`]).
    pub fn event(&mut self, time: Option<u64>, e: &Event) -> Result<(), TraceError> {
        if let Some(t) = time {
            if t < self.last_time {
                return Err(self.err(format!(
                    "timestamp {t} ns is before the previous one ({})",
                    self.last_time
                )));
            }
        }
        self.cgroups.apply(e).map_err(|m| self.err(m))?;
        if let Some(t) = time {
            self.last_time = t;
        }
        let r = match self.format {
            Format::Binary => self.enc.write(&mut self.w, time, e),
            Format::Text => {
                self.line.clear();
                text::format_event(&mut self.line, time, e, &self.cgroups.list);
                self.w.write_all(self.line.as_bytes())
            }
        };
        r.map_err(|e| self.err(format!("write error: {e}")))?;
        self.events += 1;
        Ok(())
    }

    /// Events written so far.
    pub fn events_written(&self) -> u64 {
        self.events
    }

    /// Flush and return the inner writer.
    pub fn finish(self) -> Result<W, TraceError> {
        let err = self.err(String::new());
        self.w.into_inner().map_err(|e| TraceError {
            message: format!("write error: {}", e.error()),
            ..err
        })
    }
}
