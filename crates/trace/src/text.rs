// SPDX-License-Identifier: MIT
//! The text form: one event per line (docs/trace-format.md).
//!
//! ```text
//! uzswap-trace 1
//! pages default                      # or: pages file /path/to/pages.uzpf
//! meta workload build
//! cgroup web                         # create under the root; `cgroup job web` nests
//! memory.max web 256M
//! @1500 w web 0 17                   # optional @timestamp (ns); write page 0 with page 17
//! r web 0
//! w web 1 z                          # a zero-filled page
//! free web 0 2
//! param compressor lzo-rle
//! ```

use std::fmt::Write as _;

use crate::{CgroupInfo, Content, Event, PageSource, ROOT, ROOT_NAME};

/// What one line holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    Blank,
    Magic(u32),
    Pages(PageSource),
    Meta(String, String),
    Event(Option<u64>, Event),
}

/// Parse one line (without its newline). `names` resolves cgroup names to numbers; a
/// `cgroup` line is given the next number (`names.len()`).
pub(crate) fn parse_line(line: &str, names: &NameLookup<'_>) -> Result<Line, String> {
    let line = match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    };
    let mut tok = line.split_ascii_whitespace();
    let Some(mut first) = tok.next() else {
        return Ok(Line::Blank);
    };
    let mut time = None;
    if let Some(t) = first.strip_prefix('@') {
        time = Some(parse_u64(t).map_err(|e| format!("timestamp {first:?}: {e}"))?);
        first = tok
            .next()
            .ok_or_else(|| "a timestamp without an event".to_string())?;
    }
    let mut next = |what: &str| tok.next().ok_or_else(|| format!("{first}: missing {what}"));
    let ev = match first {
        crate::TEXT_MAGIC => {
            let v = next("version")?;
            return Ok(Line::Magic(
                v.parse().map_err(|_| format!("bad version {v:?}"))?,
            ));
        }
        "pages" if time.is_none() => {
            let kind = next("page source (default or file PATH)")?;
            let src = match kind {
                "default" => PageSource::Default,
                "file" => {
                    // The path is the rest of the line (it may contain spaces).
                    let rest = line
                        .trim_start()
                        .strip_prefix("pages")
                        .map(str::trim_start)
                        .and_then(|r| r.strip_prefix("file"))
                        .map(str::trim)
                        .unwrap_or("");
                    if rest.is_empty() {
                        return Err("pages file: missing path".into());
                    }
                    PageSource::File(rest.into())
                }
                k => return Err(format!("page source {k:?}: expected default or file PATH")),
            };
            return Ok(Line::Pages(src));
        }
        "meta" if time.is_none() => {
            let k = next("key")?.to_string();
            let rest = line
                .trim_start()
                .strip_prefix("meta")
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix(k.as_str()))
                .map(str::trim)
                .unwrap_or("");
            crate::check_meta(&k, rest)?;
            return Ok(Line::Meta(k, rest.to_string()));
        }
        "r" => {
            let cg = names.get(next("cgroup")?)?;
            let page = parse_page(next("page")?)?;
            Event::Read { cg, page }
        }
        "w" => {
            let cg = names.get(next("cgroup")?)?;
            let page = parse_page(next("page")?)?;
            let c = next("content (page index or z)")?;
            let content = if c == "z" {
                Content::Zero
            } else {
                Content::Page(
                    c.parse()
                        .map_err(|_| format!("content {c:?}: expected a page index or z"))?,
                )
            };
            Event::Write { cg, page, content }
        }
        "free" => {
            let cg = names.get(next("cgroup")?)?;
            let page = parse_page(next("page")?)?;
            let count = match tok.next() {
                Some(c) => parse_u64(c).map_err(|e| format!("count {c:?}: {e}"))?,
                None => 1,
            };
            Event::Free { cg, page, count }
        }
        "cgroup" => {
            let name = next("name")?.to_string();
            let parent = match tok.next() {
                Some(p) => names.get(p)?,
                None => ROOT,
            };
            Event::Cgroup {
                cg: names.next_id(),
                parent,
                name,
            }
        }
        "rmcgroup" => Event::RemoveCgroup {
            cg: names.get(next("cgroup")?)?,
        },
        "memory.max" => Event::MemoryMax {
            cg: names.get(next("cgroup")?)?,
            bytes: parse_max(next("size or max")?)?,
        },
        "memory.zswap.max" => Event::ZswapMax {
            cg: names.get(next("cgroup")?)?,
            bytes: parse_max(next("size or max")?)?,
        },
        "memory.zswap.writeback" => {
            let cg = names.get(next("cgroup")?)?;
            let v = next("0 or 1")?;
            Event::ZswapWriteback {
                cg,
                enabled: match v {
                    "1" => true,
                    "0" => false,
                    _ => return Err(format!("memory.zswap.writeback {v:?}: expected 0 or 1")),
                },
            }
        }
        "memory.reclaim" => Event::Reclaim {
            cg: names.get(next("cgroup")?)?,
            bytes: parse_size(next("size")?)?,
        },
        "param" => Event::Param {
            name: next("name")?.to_string(),
            value: next("value")?.to_string(),
        },
        other => return Err(format!("unknown event {other:?}")),
    };
    if let Some(extra) = tok.next() {
        return Err(format!("unexpected {extra:?} after the event"));
    }
    Ok(Line::Event(time, ev))
}

/// Resolves cgroup names of a text trace.
pub(crate) struct NameLookup<'a> {
    pub(crate) cgroups: &'a [CgroupInfo],
}

impl NameLookup<'_> {
    fn get(&self, name: &str) -> Result<u32, String> {
        if name == ROOT_NAME {
            return Ok(ROOT);
        }
        self.cgroups
            .iter()
            .enumerate()
            .rev()
            .find(|(_, c)| !c.removed && c.name == name)
            .map(|(i, _)| i as u32)
            .ok_or_else(|| format!("unknown cgroup {name:?} (create it with `cgroup {name}`)"))
    }
    fn next_id(&self) -> u32 {
        self.cgroups.len() as u32
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16)
    } else {
        s.parse()
    };
    r.map_err(|_| "not a number".to_string())
}

fn parse_page(s: &str) -> Result<u64, String> {
    let p = parse_u64(s).map_err(|e| format!("page {s:?}: {e}"))?;
    crate::check_page(p)?;
    Ok(p)
}

/// A size in bytes with an optional K, M, G or T suffix (powers of 1024).
pub use uzswap_types::parse_size;

fn parse_max(s: &str) -> Result<Option<u64>, String> {
    if s == "max" {
        Ok(None)
    } else {
        parse_size(s).map(Some)
    }
}

/// Append one event line (with its newline) to `out`. `names[i]` is cgroup `i`'s name.
/// Formatting into a reused `String` allocates nothing once it has grown.
pub(crate) fn format_event(out: &mut String, time: Option<u64>, e: &Event, names: &[CgroupInfo]) {
    let n = |cg: u32| -> &str { names.get(cg as usize).map_or("?", |c| c.name.as_str()) };
    if let Some(t) = time {
        let _ = write!(out, "@{t} ");
    }
    let _ = match e {
        Event::Read { cg, page } => writeln!(out, "r {} {page}", n(*cg)),
        Event::Write { cg, page, content } => match content {
            Content::Page(i) => writeln!(out, "w {} {page} {i}", n(*cg)),
            Content::Zero => writeln!(out, "w {} {page} z", n(*cg)),
        },
        Event::Free { cg, page, count } => writeln!(out, "free {} {page} {count}", n(*cg)),
        Event::Cgroup { parent, name, .. } => {
            if *parent == ROOT {
                writeln!(out, "cgroup {name}")
            } else {
                writeln!(out, "cgroup {name} {}", n(*parent))
            }
        }
        Event::RemoveCgroup { cg } => writeln!(out, "rmcgroup {}", n(*cg)),
        Event::MemoryMax { cg, bytes } => writeln!(out, "memory.max {} {}", n(*cg), max(*bytes)),
        Event::ZswapMax { cg, bytes } => {
            writeln!(out, "memory.zswap.max {} {}", n(*cg), max(*bytes))
        }
        Event::ZswapWriteback { cg, enabled } => {
            writeln!(
                out,
                "memory.zswap.writeback {} {}",
                n(*cg),
                u8::from(*enabled)
            )
        }
        Event::Reclaim { cg, bytes } => writeln!(out, "memory.reclaim {} {bytes}", n(*cg)),
        Event::Param { name, value } => writeln!(out, "param {name} {value}"),
    };
}

fn max(b: Option<u64>) -> MaxFmt {
    MaxFmt(b)
}

struct MaxFmt(Option<u64>);
impl std::fmt::Display for MaxFmt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(b) => write!(f, "{b}"),
            None => f.write_str("max"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cgroups;

    fn parse(l: &str, cgs: &Cgroups) -> Result<Line, String> {
        parse_line(l, &NameLookup { cgroups: &cgs.list })
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("3"), Ok(3));
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn lines() {
        let mut cgs = Cgroups::default();
        let Line::Event(None, e) = parse("cgroup web", &cgs).unwrap() else {
            panic!()
        };
        cgs.apply(&e).unwrap();
        assert_eq!(
            parse("@7 w web 0x10 z # note", &cgs).unwrap(),
            Line::Event(
                Some(7),
                Event::Write {
                    cg: 1,
                    page: 16,
                    content: Content::Zero
                }
            )
        );
        assert_eq!(parse("   # only a comment", &cgs).unwrap(), Line::Blank);
        assert!(parse("r nosuch 1", &cgs)
            .unwrap_err()
            .contains("unknown cgroup"));
        assert!(parse("r web 1 2", &cgs).unwrap_err().contains("unexpected"));
        assert!(parse("w web 1", &cgs).unwrap_err().contains("missing"));
        assert_eq!(
            parse("pages file /tmp/a b.uzpf", &cgs).unwrap(),
            Line::Pages(PageSource::File("/tmp/a b.uzpf".into()))
        );
    }
}
