// SPDX-License-Identifier: MIT
//! The default corpus: memory of real programs, captured at run time.
//!
//! A python3 workload (dicts of records, strings, JSON text, lists of numbers) and a perl
//! workload (hashes, arrays, formatted strings) are started, each grows its heap to a target
//! resident size and prints `READY <pid>`; its private anonymous memory is captured and it is
//! killed. Without either interpreter, pages of ELF binaries and libraries are used.

use crate::capture::{capture_pid_with, CaptureOptions};
use crate::{Error, Pages, Result, PAGE_SIZE};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Options of [`default_corpus_with`].
#[derive(Clone, Debug)]
pub struct DefaultCorpusOptions {
    /// Total pages wanted (default 8192 = 32 MiB).
    pub max_pages: usize,
    /// How long a workload may take to signal readiness.
    pub ready_timeout: Duration,
}

impl Default for DefaultCorpusOptions {
    fn default() -> Self {
        DefaultCorpusOptions {
            max_pages: 8192,
            ready_timeout: Duration::from_secs(120),
        }
    }
}

/// Python workload: grows realistic heap data until its RSS reaches argv[1] bytes.
const PYTHON_WORKLOAD: &str = r#"
import json, os, random, sys
target = int(sys.argv[1])
rng = random.Random(12345)
words = ("alpha beta gamma delta kernel page swap memory cache zone node slab folio "
         "compress store load write read user admin request response error value "
         "index table entry list queue worker thread session token account order "
         "price total amount status active pending closed london paris berlin tokyo").split()
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
records, blobs, numbers, counts = [], [], [], {}
i = 0
while rss() < target:
    for _ in range(500):
        name = rng.choice(words).title() + ' ' + rng.choice(words).title()
        rec = {'id': i, 'name': name, 'email': name.lower().replace(' ', '.') + '@example.com',
               'tags': rng.sample(words, rng.randint(1, 6)), 'score': rng.random() * 100,
               'visits': rng.randint(0, 10**6), 'active': rng.random() < 0.7,
               'address': {'street': '%d %s Street' % (rng.randint(1, 999), rng.choice(words).title()),
                           'city': rng.choice(words).title(), 'zip': '%05d' % rng.randint(0, 99999)}}
        records.append(rec)
        for t in rec['tags']:
            counts[t] = counts.get(t, 0) + 1
        i += 1
    blobs.append(json.dumps(records[-500:]))
    numbers.extend(rng.randint(-2**40, 2**40) for _ in range(2000))
    numbers.extend(rng.gauss(0, 1e3) for _ in range(500))
    blobs.append(' '.join(rng.choice(words) for _ in range(3000)))
sys.stdout.write('READY %d\n' % os.getpid())
sys.stdout.flush()
sys.stdin.read()
"#;

/// Perl workload: same idea with perl's data structures.
const PERL_WORKLOAD: &str = r#"
use strict; use warnings;
my $target = $ARGV[0];
srand(54321);
my @words = qw(alpha beta gamma delta kernel page swap memory cache zone node slab folio
  compress store load write read user admin request response error value index table
  entry list queue worker thread session token account order price total amount status);
sub rss { open(my $f, '<', '/proc/self/statm') or die; my @s = split(' ', <$f>); return $s[1] * 4096; }
my (%users, @log, @nums);
my $i = 0;
while (rss() < $target) {
  for (1..500) {
    my $n = ucfirst($words[int(rand(@words))]) . ' ' . ucfirst($words[int(rand(@words))]);
    $users{"user$i"} = { id => $i, name => $n, mail => lc($n) =~ s/ /./r . '@example.org',
      tags => [ map { $words[int(rand(@words))] } 1..(1+int(rand(5))) ], score => rand(100) };
    push @log, sprintf("%s [%06d] %-8s %s=%d", '2026-11-22T12:00:00', $i,
      $words[int(rand(@words))], $words[int(rand(@words))], int(rand(100000)));
    $i++;
  }
  push @nums, map { int(rand(2**40)) } 1..2000;
}
$| = 1;
print "READY $$\n";
my $x = <STDIN>;
"#;

/// Kills and reaps the workload however we leave.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workload_err(program: &str, source: std::io::Error) -> Error {
    Error::Workload {
        program: program.to_string(),
        source,
    }
}

/// Run one workload and capture up to `pages` pages of it. `Ok(None)` when the interpreter
/// is not installed.
fn capture_workload(
    interp: &str,
    script: &str,
    pages: usize,
    timeout: Duration,
) -> Result<Option<Pages>> {
    // Grow a little beyond the wanted capture: part of the RSS is file-backed (the
    // interpreter's code), which capture does not take.
    let target_bytes = (pages * PAGE_SIZE) as u64 * 5 / 4 + (8 << 20);
    let flag = if interp == "perl" { "-e" } else { "-c" };
    let spawned = Command::new(interp)
        .arg(flag)
        .arg(script)
        .arg(target_bytes.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => ChildGuard(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(workload_err(interp, e)),
    };
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
    });
    let line = match rx.recv_timeout(timeout) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return Err(workload_err(interp, e)),
        Err(_) => {
            return Err(Error::NoSource(format!(
                "{interp} workload did not become ready within {timeout:?}"
            )))
        }
    };
    let pid: u32 = line
        .trim()
        .strip_prefix("READY ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| {
            Error::NoSource(format!(
                "{interp} workload exited or printed {line:?} instead of READY <pid>"
            ))
        })?;
    let cap = capture_pid_with(
        pid,
        &CaptureOptions {
            max_pages: Some(pages),
        },
    )?;
    let mut p = cap.pages;
    p.set_source(format!("{interp} workload, {}", p.source()));
    Ok(Some(p))
}

/// Pages of ELF files under /usr/bin and /usr/lib (sorted, whole pages only).
fn elf_pages(max_pages: usize) -> Result<Pages> {
    let mut out = Pages::new("pages of ELF files in /usr/bin and /usr/lib");
    for dir in ["/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/lib"] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            if out.len() >= max_pages {
                return Ok(out);
            }
            if !f.is_file() {
                continue;
            }
            let Ok(data) = std::fs::read(&f) else {
                continue;
            };
            if !data.starts_with(b"\x7fELF") {
                continue;
            }
            for page in data.chunks_exact(PAGE_SIZE) {
                if out.len() >= max_pages {
                    break;
                }
                out.push_page(page)?;
            }
        }
    }
    if out.is_empty() {
        return Err(Error::NoSource(
            "no python3, no perl and no ELF files found".into(),
        ));
    }
    Ok(out)
}

/// The default corpus with default options (32 MiB).
pub fn default_corpus() -> Result<Pages> {
    default_corpus_with(&DefaultCorpusOptions::default())
}

/// Capture real memory of a python3 workload (3/4 of the pages) and a perl workload (1/4);
/// either alone fills the whole budget; with neither, pages of ELF files.
pub fn default_corpus_with(opts: &DefaultCorpusOptions) -> Result<Pages> {
    if opts.max_pages == 0 {
        return Err(Error::InvalidPages("max_pages must be > 0".into()));
    }
    let py_share = (opts.max_pages * 3 / 4).max(1);
    let mut out = Pages::new("");
    let mut sources = Vec::new();
    if let Some(p) = capture_workload("python3", PYTHON_WORKLOAD, py_share, opts.ready_timeout)? {
        sources.push(p.source().to_string());
        out.extend(&p);
    }
    let rest = opts.max_pages - out.len();
    if rest > 0 {
        if let Some(p) = capture_workload("perl", PERL_WORKLOAD, rest, opts.ready_timeout)? {
            sources.push(p.source().to_string());
            out.extend(&p);
        }
    }
    if out.is_empty() {
        return elf_pages(opts.max_pages);
    }
    out.set_source(format!("default corpus: {}", sources.join("; ")));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_fallback_gives_real_binary_pages() {
        let p = elf_pages(64).unwrap();
        assert_eq!(p.len(), 64);
        // The first page of the first file is an ELF header.
        assert!(p.page(0).starts_with(b"\x7fELF"));
        assert!(p.source().contains("ELF"));
    }

    #[test]
    fn zero_pages_is_an_error() {
        let e = default_corpus_with(&DefaultCorpusOptions {
            max_pages: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("max_pages"), "{e}");
    }

    #[test]
    fn missing_interpreter_is_none() {
        let r =
            capture_workload("uzswap-no-such-interpreter", "", 1, Duration::from_secs(1)).unwrap();
        assert!(r.is_none());
    }
}
