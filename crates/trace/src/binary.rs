// SPDX-License-Identifier: MIT
//! The binary form: `UZTRACE\0`, a little-endian u32 version, then records.
//!
//! A record is a tag byte, then its fields as LEB128 varints (strings: varint length and
//! UTF-8 bytes). Tag bits 0..=3 give the kind, bit 7 says a timestamp follows the tag (as the
//! varint delta in ns from the previous timestamp, which starts at 0). Page numbers of
//! accesses and frees are zigzag-coded deltas from the previous page of the same cgroup, so a
//! sequential or local access pattern costs 3 to 4 bytes per event.
//!
//! | kind | record | fields |
//! |---|---|---|
//! | 0 | read | cg, page delta |
//! | 1 | write | cg, page delta, content page index |
//! | 2 | write zero page | cg, page delta |
//! | 3 | free | cg, page delta, count |
//! | 4 | cgroup | parent, name (its number is the next one) |
//! | 5 | rmcgroup | cg |
//! | 6 | memory.max | cg, bytes + 1 (0 = max) |
//! | 7 | memory.zswap.max | cg, bytes + 1 (0 = max) |
//! | 8 | memory.zswap.writeback | cg, 0 or 1 |
//! | 9 | memory.reclaim | cg, bytes |
//! | 10 | param | name, value |
//! | 11 | pages (header) | 0 = default, or 1 and a path |
//! | 12 | meta (header) | key, value |

use std::io::{BufRead, Write};

use crate::{Content, Event, PageSource};

pub(crate) const K_READ: u8 = 0;
pub(crate) const K_WRITE: u8 = 1;
pub(crate) const K_WRITE_ZERO: u8 = 2;
pub(crate) const K_FREE: u8 = 3;
pub(crate) const K_CGROUP: u8 = 4;
pub(crate) const K_RMCGROUP: u8 = 5;
pub(crate) const K_MEMORY_MAX: u8 = 6;
pub(crate) const K_ZSWAP_MAX: u8 = 7;
pub(crate) const K_ZSWAP_WB: u8 = 8;
pub(crate) const K_RECLAIM: u8 = 9;
pub(crate) const K_PARAM: u8 = 10;
pub(crate) const K_PAGES: u8 = 11;
pub(crate) const K_META: u8 = 12;
pub(crate) const TIME_BIT: u8 = 0x80;

/// Encoder state: the previous page of each cgroup and the previous timestamp.
#[derive(Default)]
pub(crate) struct Encoder {
    last_page: Vec<u64>,
    last_time: u64,
    buf: Vec<u8>,
}

impl Encoder {
    fn delta(&mut self, cg: u32, page: u64) -> u64 {
        let i = cg as usize;
        if self.last_page.len() <= i {
            self.last_page.resize(i + 1, 0);
        }
        let d = page.wrapping_sub(self.last_page[i]) as i64;
        self.last_page[i] = page;
        zigzag(d)
    }

    /// Encode one record into the internal buffer and write it out. Reuses the buffer.
    pub(crate) fn write<W: Write>(
        &mut self,
        w: &mut W,
        time: Option<u64>,
        e: &Event,
    ) -> std::io::Result<()> {
        let mut b = std::mem::take(&mut self.buf);
        b.clear();
        let time_bit = if time.is_some() { TIME_BIT } else { 0 };
        let kind = match e {
            Event::Read { .. } => K_READ,
            Event::Write {
                content: Content::Page(_),
                ..
            } => K_WRITE,
            Event::Write {
                content: Content::Zero,
                ..
            } => K_WRITE_ZERO,
            Event::Free { .. } => K_FREE,
            Event::Cgroup { .. } => K_CGROUP,
            Event::RemoveCgroup { .. } => K_RMCGROUP,
            Event::MemoryMax { .. } => K_MEMORY_MAX,
            Event::ZswapMax { .. } => K_ZSWAP_MAX,
            Event::ZswapWriteback { .. } => K_ZSWAP_WB,
            Event::Reclaim { .. } => K_RECLAIM,
            Event::Param { .. } => K_PARAM,
        };
        b.push(kind | time_bit);
        if let Some(t) = time {
            // The reader and writer both refuse decreasing timestamps.
            put_varint(&mut b, t - self.last_time);
            self.last_time = t;
        }
        match e {
            Event::Read { cg, page } => {
                put_varint(&mut b, u64::from(*cg));
                let d = self.delta(*cg, *page);
                put_varint(&mut b, d);
            }
            Event::Write { cg, page, content } => {
                put_varint(&mut b, u64::from(*cg));
                let d = self.delta(*cg, *page);
                put_varint(&mut b, d);
                if let Content::Page(i) = content {
                    put_varint(&mut b, u64::from(*i));
                }
            }
            Event::Free { cg, page, count } => {
                put_varint(&mut b, u64::from(*cg));
                let d = self.delta(*cg, *page);
                put_varint(&mut b, d);
                put_varint(&mut b, *count);
            }
            Event::Cgroup { parent, name, .. } => {
                put_varint(&mut b, u64::from(*parent));
                put_str(&mut b, name);
            }
            Event::RemoveCgroup { cg } => put_varint(&mut b, u64::from(*cg)),
            Event::MemoryMax { cg, bytes } | Event::ZswapMax { cg, bytes } => {
                put_varint(&mut b, u64::from(*cg));
                put_varint(&mut b, bytes.map_or(0, |v| v + 1));
            }
            Event::ZswapWriteback { cg, enabled } => {
                put_varint(&mut b, u64::from(*cg));
                b.push(u8::from(*enabled));
            }
            Event::Reclaim { cg, bytes } => {
                put_varint(&mut b, u64::from(*cg));
                put_varint(&mut b, *bytes);
            }
            Event::Param { name, value } => {
                put_str(&mut b, name);
                put_str(&mut b, value);
            }
        }
        let r = w.write_all(&b);
        self.buf = b;
        r
    }

    pub(crate) fn write_pages<W: Write>(w: &mut W, p: &PageSource) -> std::io::Result<()> {
        let mut b = vec![K_PAGES];
        match p {
            PageSource::Default => b.push(0),
            PageSource::File(path) => {
                b.push(1);
                put_str(&mut b, &path.to_string_lossy());
            }
        }
        w.write_all(&b)
    }

    pub(crate) fn write_meta<W: Write>(w: &mut W, k: &str, v: &str) -> std::io::Result<()> {
        let mut b = vec![K_META];
        put_str(&mut b, k);
        put_str(&mut b, v);
        w.write_all(&b)
    }
}

/// What the decoder read.
pub(crate) enum Decoded {
    Pages(PageSource),
    Meta(String, String),
    Event(Option<u64>, Event),
}

/// Decoder state, the mirror of `Encoder`. `next_cg` numbers the next created cgroup.
#[derive(Default)]
pub(crate) struct Decoder {
    last_page: Vec<u64>,
    last_time: u64,
    /// Offset of the next byte in the input.
    pub(crate) offset: u64,
}

impl Decoder {
    fn byte<R: BufRead>(&mut self, r: &mut R) -> Result<Option<u8>, String> {
        let buf = r.fill_buf().map_err(|e| format!("read error: {e}"))?;
        let Some(&b) = buf.first() else {
            return Ok(None);
        };
        r.consume(1);
        self.offset += 1;
        Ok(Some(b))
    }

    fn need<R: BufRead>(&mut self, r: &mut R, what: &str) -> Result<u8, String> {
        self.byte(r)?
            .ok_or_else(|| format!("truncated record: end of input inside its {what}"))
    }

    fn varint<R: BufRead>(&mut self, r: &mut R, what: &str) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.need(r, what)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(format!("{what}: varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: varint longer than 10 bytes"))
    }

    fn u32v<R: BufRead>(&mut self, r: &mut R, what: &str) -> Result<u32, String> {
        let v = self.varint(r, what)?;
        u32::try_from(v).map_err(|_| format!("{what} {v} does not fit 32 bits"))
    }

    fn string<R: BufRead>(&mut self, r: &mut R, what: &str) -> Result<String, String> {
        let n = self.varint(r, what)?;
        if n > crate::MAX_STRING as u64 {
            return Err(format!("{what}: length {n} beyond {}", crate::MAX_STRING));
        }
        let mut v = Vec::with_capacity(n as usize);
        for _ in 0..n {
            v.push(self.need(r, what)?);
        }
        String::from_utf8(v).map_err(|_| format!("{what} is not UTF-8"))
    }

    fn page<R: BufRead>(&mut self, r: &mut R, cg: u32) -> Result<u64, String> {
        let d = unzigzag(self.varint(r, "page delta")?);
        let i = cg as usize;
        if i > crate::MAX_CGROUPS as usize {
            return Err(format!("no cgroup #{cg}"));
        }
        if self.last_page.len() <= i {
            self.last_page.resize(i + 1, 0);
        }
        let p = self.last_page[i].wrapping_add(d as u64);
        self.last_page[i] = p;
        Ok(p)
    }

    /// Decode one record; `Ok(None)` at a clean end of input. `next_cg` is the number the
    /// next `cgroup` record creates.
    pub(crate) fn next<R: BufRead>(
        &mut self,
        r: &mut R,
        next_cg: u32,
    ) -> Result<Option<Decoded>, String> {
        let Some(tag) = self.byte(r)? else {
            return Ok(None);
        };
        let kind = tag & 0x0f;
        if tag & 0x70 != 0 {
            return Err(format!("bad record tag {tag:#04x}"));
        }
        let time = if tag & TIME_BIT != 0 {
            if matches!(kind, K_PAGES | K_META) {
                return Err("a header record cannot carry a timestamp".into());
            }
            let d = self.varint(r, "timestamp delta")?;
            self.last_time = self
                .last_time
                .checked_add(d)
                .ok_or("timestamp overflows 64 bits")?;
            Some(self.last_time)
        } else {
            None
        };
        let ev = match kind {
            K_READ => {
                let cg = self.u32v(r, "cgroup")?;
                Event::Read {
                    cg,
                    page: self.page(r, cg)?,
                }
            }
            K_WRITE | K_WRITE_ZERO => {
                let cg = self.u32v(r, "cgroup")?;
                let page = self.page(r, cg)?;
                let content = if kind == K_WRITE {
                    Content::Page(self.u32v(r, "content page index")?)
                } else {
                    Content::Zero
                };
                Event::Write { cg, page, content }
            }
            K_FREE => {
                let cg = self.u32v(r, "cgroup")?;
                let page = self.page(r, cg)?;
                Event::Free {
                    cg,
                    page,
                    count: self.varint(r, "count")?,
                }
            }
            K_CGROUP => {
                let parent = self.u32v(r, "parent cgroup")?;
                Event::Cgroup {
                    cg: next_cg,
                    parent,
                    name: self.string(r, "cgroup name")?,
                }
            }
            K_RMCGROUP => Event::RemoveCgroup {
                cg: self.u32v(r, "cgroup")?,
            },
            K_MEMORY_MAX | K_ZSWAP_MAX => {
                let cg = self.u32v(r, "cgroup")?;
                let v = self.varint(r, "size")?;
                let bytes = v.checked_sub(1);
                if kind == K_MEMORY_MAX {
                    Event::MemoryMax { cg, bytes }
                } else {
                    Event::ZswapMax { cg, bytes }
                }
            }
            K_ZSWAP_WB => {
                let cg = self.u32v(r, "cgroup")?;
                let enabled = match self.need(r, "writeback flag")? {
                    0 => false,
                    1 => true,
                    b => return Err(format!("writeback flag {b}: expected 0 or 1")),
                };
                Event::ZswapWriteback { cg, enabled }
            }
            K_RECLAIM => Event::Reclaim {
                cg: self.u32v(r, "cgroup")?,
                bytes: self.varint(r, "bytes")?,
            },
            K_PARAM => Event::Param {
                name: self.string(r, "parameter name")?,
                value: self.string(r, "parameter value")?,
            },
            K_PAGES => {
                return Ok(Some(Decoded::Pages(match self.need(r, "page source")? {
                    0 => PageSource::Default,
                    1 => PageSource::File(self.string(r, "page file path")?.into()),
                    b => return Err(format!("page source kind {b}: expected 0 or 1")),
                })))
            }
            K_META => {
                let k = self.string(r, "meta key")?;
                let v = self.string(r, "meta value")?;
                // The rule the writer (and the text form) imposes, so that what one encoding
                // accepts the other can carry.
                crate::check_meta(&k, &v)?;
                return Ok(Some(Decoded::Meta(k, v)));
            }
            k => return Err(format!("unknown record kind {k}")),
        };
        Ok(Some(Decoded::Event(time, ev)))
    }
}

#[inline]
pub(crate) fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_varint(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_roundtrips() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn varint_roundtrips() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::default();
            let mut r = &b[..];
            assert_eq!(d.varint(&mut r, "x").unwrap(), v);
            assert_eq!(d.offset, b.len() as u64);
        }
    }
}
