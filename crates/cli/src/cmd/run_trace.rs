// SPDX-License-Identifier: MIT
//! `uzswap run --record-trace FILE`: turns the pager's raw event log into a trace in replay's
//! format (docs/trace-format.md), with the evicted pages' contents in the page file
//! `FILE.pages` (docs/page-file-format.md).
//!
//! What the trace holds is what the pager sees: faults (first touches and refaults, read or
//! write from the fault's error code), frees (munmap, MADV_DONTNEED) and, for contents, the
//! page as it was when evicted. Accesses to resident pages raise no fault and are not in it.
//! A written page's content is the one it had at its next eviction (if it was never evicted
//! again, the last one the trace gave it, else zero); a page written where the pager could not see it (filled by fault-around,
//! written while resident) gets a write at its eviction, with the contents evicted.
//!
//! Each process of the tree is one cgroup (`pid-N`), as the format numbers pages per address
//! space, with dense page numbers: each 2 MiB chunk a process touches gets the next 512
//! numbers (`DenseSpace`). The processes' cgroups are children of one cgroup for the tree
//! (`uzswap-run`) whose `memory.max` is the run's SIZE, so that a replay holds the tree to one
//! budget as the run did. A process's exit (or exec) removes its cgroup, which frees its pages
//! in the replay. The header's meta `budget_covers` says whether SIZE covered the pool (`uzswap
//! replay` then charges it, as cgroup v2 does) or resident memory alone (cgroup v1), and
//! `cache_options` holds the run's cache flags, which the replay takes where its own command
//! line does not say otherwise.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use uzswap_pager::record::{Raw, EVICT, EXIT, FREE, RAW_BYTES, READ, WRITE};
use uzswap_trace::{Content, Format, Header, PageSource, TraceWriter};

/// Pages per chunk of [`DenseSpace`]: 2 MiB, a page table's reach.
const CHUNK_PAGES: u64 = 512;

/// A process's page numbers, made dense: each 2 MiB chunk of its address space it touches gets
/// the next chunk of page numbers, in the order of first touch, and keeps its pages' order
/// within. A process's address space spans up to 2^35 pages (its stacks and libraries sit near
/// the top), which neither the replay's flat page table nor the kernel comparison's runner
/// (which maps each cgroup's span) can hold; the touched chunks are a few thousand.
#[derive(Default)]
struct DenseSpace {
    chunks: BTreeMap<u64, u64>,
}

impl DenseSpace {
    /// The trace's page number of the process's page `page`.
    fn page(&mut self, page: u64) -> u64 {
        let n = self.chunks.len() as u64;
        let dense = *self.chunks.entry(page / CHUNK_PAGES).or_insert(n);
        dense * CHUNK_PAGES + page % CHUNK_PAGES
    }

    /// The trace's ranges (first page, count) of the process's pages `start..end`, in the
    /// chunks it touched (the others hold no page).
    fn frees(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let last = end.saturating_sub(1) / CHUNK_PAGES;
        self.chunks
            .range(start / CHUNK_PAGES..=last)
            .filter(move |_| end > start)
            .map(move |(&chunk, &dense)| {
                let lo = start.max(chunk * CHUNK_PAGES);
                let hi = end.min((chunk + 1) * CHUNK_PAGES);
                (dense * CHUNK_PAGES + lo % CHUNK_PAGES, hi - lo)
            })
    }
}

/// What the conversion keeps of a live process of the tree.
struct Proc {
    /// Its cgroup in the trace.
    cg: u32,
    /// The content the trace gives each of its pages so far: a page written where the pager
    /// could not see it (filled by fault-around, written while resident) gets a write at its
    /// eviction, so that the replay holds it with the contents the run evicted.
    known: BTreeMap<u64, Content>,
    space: DenseSpace,
}

pub struct Recording {
    pub raw_dir: PathBuf,
    out: PathBuf,
    /// The run's SIZE and whether it covers the pool.
    budget: u64,
    covers_pool: bool,
    /// The run's cache options, as flags (`--compressor lzo ...`).
    cache_options: String,
}

impl Recording {
    pub fn create(
        out: &Path,
        budget: u64,
        covers_pool: bool,
        cache_options: String,
    ) -> Result<Recording> {
        let mut raw_dir = out.as_os_str().to_owned();
        raw_dir.push(".raw.d");
        let raw_dir = PathBuf::from(raw_dir);
        std::fs::create_dir_all(&raw_dir)
            .with_context(|| format!("creating {}", raw_dir.display()))?;
        // Absolute: a process of the tree opens it at its start, maybe after a `cd`.
        let raw_dir = std::fs::canonicalize(&raw_dir)
            .with_context(|| format!("resolving {}", raw_dir.display()))?;
        for f in ["events.raw", "pages.raw"] {
            let _ = std::fs::remove_file(raw_dir.join(f));
        }
        Ok(Recording {
            raw_dir,
            out: out.to_path_buf(),
            budget,
            covers_pool,
            cache_options,
        })
    }

    /// Converts the raw log; returns the number of events written.
    pub fn finish(self) -> Result<u64> {
        let events = std::fs::read(self.raw_dir.join("events.raw")).unwrap_or_default();
        let recs: Vec<Raw> = events
            .chunks_exact(RAW_BYTES)
            .map(Raw::from_bytes)
            .collect();
        let pages_path = {
            let mut p = self.out.as_os_str().to_owned();
            p.push(".pages");
            PathBuf::from(p)
        };
        // The page file: header page, then the pages the pager wrote at 4096 * (1 + i).
        let raw_pages = self.raw_dir.join("pages.raw");
        let n_pages = std::fs::metadata(&raw_pages)
            .map(|m| m.len().saturating_sub(4096) / 4096)
            .unwrap_or(0);
        {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(false)
                .write(true)
                .truncate(false)
                .open(&raw_pages)?;
            f.set_len(4096 * (1 + n_pages))?;
            let mut h = vec![0u8; 4096];
            h[..8].copy_from_slice(b"UZSWAPPG");
            h[8..12].copy_from_slice(&1u32.to_le_bytes());
            h[12..16].copy_from_slice(&4096u32.to_le_bytes());
            h[16..24].copy_from_slice(&n_pages.to_le_bytes());
            let src = b"uzswap run --record-trace: evicted pages";
            h[24..28].copy_from_slice(&(src.len() as u32).to_le_bytes());
            h[32..32 + src.len()].copy_from_slice(src);
            f.write_all_at(&h, 0)?;
        }
        std::fs::rename(&raw_pages, &pages_path)
            .with_context(|| format!("writing {}", pages_path.display()))?;

        // Each write's content: the page's next eviction.
        let mut evicts: HashMap<(u32, u64), VecDeque<u32>> = HashMap::new();
        for r in recs.iter().filter(|r| r.kind == EVICT) {
            evicts.entry((r.pid, r.page)).or_default().push_back(r.arg);
        }
        let out = std::fs::File::create(&self.out)
            .with_context(|| format!("writing {}", self.out.display()))?;
        let header = Header {
            pages: PageSource::File(pages_path.clone()),
            meta: vec![
                ("recorder".into(), "uzswap run".into()),
                (
                    "budget_covers".into(),
                    if self.covers_pool {
                        "resident+pool"
                    } else {
                        "resident"
                    }
                    .into(),
                ),
                ("cache_options".into(), self.cache_options.clone()),
            ],
        };
        let mut w = TraceWriter::new(BufWriter::new(out), Format::Binary, &header)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let t0 = recs.first().map(|r| r.time_ns);
        let tree = w
            .cgroup("uzswap-run", 0, t0)
            .and_then(|cg| {
                w.event(
                    t0,
                    &uzswap_trace::Event::MemoryMax {
                        cg,
                        bytes: Some(self.budget),
                    },
                )?;
                Ok(cg)
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut procs: HashMap<u32, Proc> = HashMap::new();
        let mut last_t = t0.unwrap_or(0);
        let contents = std::fs::File::open(&pages_path)
            .with_context(|| format!("reading {}", pages_path.display()))?;
        let page_at = |i: u32| -> Result<Vec<u8>> {
            let mut b = vec![0u8; 4096];
            contents.read_exact_at(&mut b, 4096 * (1 + u64::from(i)))?;
            Ok(b)
        };
        for r in &recs {
            let t = r.time_ns.max(last_t);
            last_t = t;
            if r.kind == EXIT {
                // Its memory goes with it: the replay frees a removed cgroup's pages. A later
                // record of the pid (a failed exec's image going on) starts a new cgroup.
                if let Some(p) = procs.remove(&r.pid) {
                    w.event(Some(t), &uzswap_trace::Event::RemoveCgroup { cg: p.cg })
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                }
                continue;
            }
            let p = match procs.entry(r.pid) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(v) => v.insert(Proc {
                    cg: w
                        .cgroup(&format!("pid-{}", r.pid), tree, Some(t))
                        .map_err(|e| anyhow::anyhow!("{e}"))?,
                    known: BTreeMap::new(),
                    space: DenseSpace::default(),
                }),
            };
            let (cg, pages, space) = (p.cg, &mut p.known, &mut p.space);
            let res = match r.kind {
                READ => w.read(cg, space.page(r.page), Some(t)),
                WRITE => {
                    // The content it has at its next eviction. A page never evicted again
                    // keeps the last content the trace gave it (what it became is unknown,
                    // and a zero page would not even be stored), else it is zeros.
                    let c = evicts
                        .get(&(r.pid, r.page))
                        .and_then(|q| q.front().copied())
                        .map(Content::Page)
                        .or_else(|| pages.get(&r.page).copied())
                        .unwrap_or(Content::Zero);
                    pages.insert(r.page, c);
                    w.write(cg, space.page(r.page), c, Some(t))
                }
                EVICT => {
                    if let Some(q) = evicts.get_mut(&(r.pid, r.page)) {
                        q.pop_front();
                    }
                    let evicted = page_at(r.arg)?;
                    let unchanged = match pages.get(&r.page) {
                        Some(&Content::Page(i)) => i == r.arg || page_at(i)? == evicted,
                        Some(&Content::Zero) => evicted.iter().all(|&b| b == 0),
                        None => false,
                    };
                    if unchanged {
                        Ok(())
                    } else {
                        pages.insert(r.page, Content::Page(r.arg));
                        w.write(cg, space.page(r.page), Content::Page(r.arg), Some(t))
                    }
                }
                FREE => {
                    let end = r.page.saturating_add(u64::from(r.arg));
                    let gone: Vec<u64> = pages.range(r.page..end).map(|(&p, _)| p).collect();
                    for p in gone {
                        pages.remove(&p);
                    }
                    space
                        .frees(r.page, end)
                        .try_for_each(|(p, n)| w.free(cg, p, n, Some(t)))
                }
                _ => Ok(()),
            };
            res.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let n = w.events_written();
        let mut inner = w.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
        inner.flush()?;
        let _ = std::fs::remove_file(self.raw_dir.join("events.raw"));
        let _ = std::fs::remove_dir(&self.raw_dir);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::{DenseSpace, CHUNK_PAGES};

    #[test]
    fn dense_pages_keep_their_order_within_a_chunk_and_frees_skip_untouched_chunks() {
        let mut s = DenseSpace::default();
        let top = 0x7fff_f000_0000u64 / 4096;
        assert_eq!(s.page(top + 5), 5);
        assert_eq!(s.page(100), CHUNK_PAGES + 100);
        assert_eq!(s.page(top + 7), 7);
        assert_eq!(s.page(3 * CHUNK_PAGES + 1), 2 * CHUNK_PAGES + 1);
        // A free over chunks 0..4 of the address space: pieces in the two touched ones.
        let f: Vec<_> = s.frees(50, 3 * CHUNK_PAGES + 10).collect();
        assert_eq!(
            f,
            vec![(CHUNK_PAGES + 50, CHUNK_PAGES - 50), (2 * CHUNK_PAGES, 10)]
        );
        assert_eq!(s.frees(10, 10).count(), 0);
        assert_eq!(s.frees(top, top + 1).collect::<Vec<_>>(), vec![(0, 1)]);
    }
}
