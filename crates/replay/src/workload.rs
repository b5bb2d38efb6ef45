// SPDX-License-Identifier: MIT
//! Built-in workloads: event streams generated from a seed, sized from the memory limit, in
//! memory independent of their length (a few counters and one small event queue).
//!
//! | name | cgroups | what it does |
//! |---|---|---|
//! | `build` | `build` (limit M) | compile-like: long-lived cold state (M/4), a warm working set (0.35 M, Zipf-skewed, touched throughout), and 32 short-lived jobs, 4 at a time, each writing a private region (M/20..M/4), computing on it with 80 % reads, then exiting (the region is freed) |
//! | `zipf` | `zipf` (limit M) | hot/cold skew: 2 M pages written, then 8 M Zipf(1.0) accesses over them (20 % writes), hot pages scattered over the range |
//! | `scan` | `scan` (limit M) | sequential streaming: 2 M pages written in order, then 2 more passes reading them (10 % rewritten) |
//! | `active-vs-background` | `background`, `active` (limit M each; the background's plus the pool limit in cgroup v2) | a background cgroup writes enough cold pages to fill the compressed pool past its limit and goes idle, then an active cgroup works on 1.5 M pages with Zipf(0.8) accesses (10 % writes) |
//!
//! `--scale` multiplies the accesses (and `build`'s job count); `--seed` changes every
//! random choice. Page contents are corpus page indices chosen by a hash of (seed, cgroup,
//! page, event number).

use uzswap_trace::{Content, Event};

use crate::batch::Batch;

/// The built-in workloads, in the order `--help` lists them.
pub const BUILTIN: [&str; 4] = ["build", "zipf", "scan", "active-vs-background"];

/// A one-line description of a built-in workload.
pub fn describe(name: &str) -> Option<&'static str> {
    Some(match name {
        "build" => "compile-like phases: short-lived jobs next to a warm working set and cold long-lived state (the kernel-build workload of the seeds)",
        "zipf" => "hot/cold skew: Zipf(1.0) accesses over twice the limit",
        "scan" => "sequential streaming: three passes over twice the limit",
        "active-vs-background" => "a background cgroup fills the pool with cold pages, then an active cgroup works under a tight limit (seed 003's scenario)",
        _ => return None,
    })
}

/// What a workload is sized from.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadParams {
    /// memory.max of the (active) cgroup, in pages.
    pub memory_max_pages: u64,
    /// Multiplies the number of accesses.
    pub scale: f64,
    pub seed: u64,
    /// The compressed pool's limit in pages (max_pool_percent of the machine): what
    /// `active-vs-background`'s background cgroup fills.
    pub pool_limit_pages: u64,
    /// Expected compression ratio (uncompressed / compressed) of the page source.
    pub ratio: f64,
    /// The compressed pool counts against memory.max (cgroup v2): `active-vs-background`'s
    /// background cgroup then gets room for its share of the pool on top of its limit, or it
    /// could never fill the pool.
    pub pool_charged: bool,
}

/// A cgroup a workload creates: its name and how many pages its address space spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLayout {
    pub name: String,
    pub pages: u64,
    /// The parent's cgroup number (0: the root).
    pub parent: u32,
}

/// A generated workload.
pub struct Builtin {
    name: &'static str,
    layout: Vec<CgroupLayout>,
    total: u64,
    /// Generated events not handed out yet: ops from `pos`, their control events from
    /// `epos`.
    q: Batch,
    pos: usize,
    epos: usize,
    g: Gen,
}

impl Builtin {
    /// The workload `name` (one of [`BUILTIN`]).
    pub fn new(name: &str, p: &WorkloadParams) -> Option<Builtin> {
        let m = p.memory_max_pages.max(64);
        let rng = Rng::new(p.seed);
        let (name, g): (&'static str, Gen) = match name {
            "build" => ("build", Gen::Build(Build::new(m, p.scale))),
            "zipf" => ("zipf", Gen::Zipf(ZipfW::new(m, p.scale))),
            "scan" => ("scan", Gen::Scan(Scan::new(m, p.scale))),
            "active-vs-background" => (
                "active-vs-background",
                Gen::Avb(Avb::new(m, p.scale, p.pool_limit_pages, p.ratio)),
            ),
            _ => return None,
        };
        let mut g = g;
        g.set_rng(rng, p.seed);
        let layout = g.layout();
        let total = g.total();
        let mut q = Batch::default();
        for (i, c) in layout.iter().enumerate() {
            q.push(Event::Cgroup {
                cg: i as u32 + 1,
                parent: 0,
                name: c.name.clone(),
            });
            let extra = if p.pool_charged && c.name == "background" {
                p.pool_limit_pages
            } else {
                0
            };
            q.push(Event::MemoryMax {
                cg: i as u32 + 1,
                bytes: Some((m + extra) * 4096),
            });
        }
        Some(Builtin {
            name,
            layout,
            total: total + q.len() as u64,
            q,
            pos: 0,
            epos: 0,
            g,
        })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The cgroups (numbered from 1 in this order) and their address-space sizes.
    pub fn layout(&self) -> &[CgroupLayout] {
        &self.layout
    }

    /// Events the stream will produce (exact).
    pub fn total_events(&self) -> u64 {
        self.total
    }

    /// The next event.
    pub fn next_event(&mut self) -> Option<Event> {
        while self.pos == self.q.len() {
            self.q.clear();
            (self.pos, self.epos) = (0, 0);
            if !self.g.refill(&mut self.q) {
                return None;
            }
        }
        let op = self.q.ops[self.pos];
        self.pos += 1;
        Some(op.to_event(|| {
            self.epos += 1;
            std::mem::replace(
                &mut self.q.events[self.epos - 1],
                Event::RemoveCgroup { cg: 0 },
            )
        }))
    }

    /// Replace `out`'s contents with the next events: at least `min` of them unless the
    /// stream ends (then fewer; none at its end).
    pub fn fill(&mut self, out: &mut Batch, min: usize) {
        out.clear();
        self.q.move_tail(self.pos, self.epos, out);
        (self.pos, self.epos) = (0, 0);
        while out.len() < min && self.g.refill(out) {}
    }
}

/// SplitMix64: small, fast, and the same on every platform.
#[derive(Clone, Copy, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// Zipf(s) over 1..=n by rejection-inversion (Hörmann and Derflinger 1996): O(1) time and
/// memory per sample. The acceptance bound of the slow test of the lowest ranks (the hottest,
/// where it runs most) is kept once computed: the same values, without four libm calls.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    sq: f64,
    /// `h_int(k + 0.5) - h(k)` of rank `k` (index `k - 1`); NaN until computed.
    bound: Vec<f64>,
}

/// Ranks whose acceptance bound is kept.
const ZIPF_MEMO: usize = 1 << 14;

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let mut z = Zipf {
            n: n.max(1) as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            sq: 0.0,
            bound: vec![f64::NAN; (n.max(1) as usize).min(ZIPF_MEMO)],
        };
        z.h_x1 = z.h_int(1.5) - 1.0;
        z.h_n = z.h_int(z.n + 0.5);
        z.sq = 2.0 - z.h_int_inv(z.h_int(2.5) - z.h(2.0));
        z
    }
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }
    fn h_int(&self, x: f64) -> f64 {
        let lx = x.ln();
        helper2((1.0 - self.s) * lx) * lx
    }
    fn h_int_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }
    /// `h_int(k + 0.5) - h(k)`, from the memo for the lowest ranks.
    #[inline]
    fn bound(&mut self, k: f64) -> f64 {
        let Some(b) = self.bound.get_mut(k as usize - 1) else {
            return self.h_int(k + 0.5) - self.h(k);
        };
        if b.is_nan() {
            let v = {
                let z = &*self;
                z.h_int(k + 0.5) - z.h(k)
            };
            self.bound[k as usize - 1] = v;
            return v;
        }
        *b
    }

    /// A rank in 1..=n (1 is the most frequent).
    pub fn sample(&mut self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = self.h_int_inv(u);
            // floor(x + 0.5) for x + 0.5 >= 0 (below 2^63 here), without a libm call:
            // truncation is floor for non-negative values; NaN and negatives go to 0 and are
            // clamped to 1 as floor's result would be.
            let k = (((x + 0.5) as u64) as f64).clamp(1.0, self.n);
            if k - x <= self.sq || u >= self.bound(k) {
                return k as u64;
            }
        }
    }
}

fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// A bijection of 0..n that scatters consecutive ranks (an affine map with a multiplier
/// coprime to n): hot pages are spread over the range, in constant memory.
#[derive(Clone, Copy, Debug)]
struct Scatter {
    n: u64,
    a: u64,
    b: u64,
}

impl Scatter {
    fn new(n: u64, rng: &mut Rng) -> Scatter {
        let n = n.max(1);
        let mut a = (n as f64 * 0.618_033_988_7) as u64 | 1;
        while gcd(a, n) != 1 {
            a += 2;
        }
        Scatter {
            n,
            a: a % n.max(2),
            b: rng.below(n),
        }
    }
    #[inline]
    fn map(&self, i: u64) -> u64 {
        let a = self.a.max(1);
        if self.n <= 1 << 32 && i < self.n {
            // i, a, b < n <= 2^32: i * a + b < 2^64, the same value without 128-bit division.
            (i * a + self.b) % self.n
        } else {
            ((u128::from(i) * u128::from(a) + u128::from(self.b)) % u128::from(self.n)) as u64
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Content of a write: a corpus page index from (seed, cgroup, page, event number).
#[derive(Clone, Copy, Debug)]
struct Contents {
    seed: u64,
    n: u64,
}

impl Contents {
    #[inline]
    fn next(&mut self, cg: u32, page: u64) -> Content {
        self.n += 1;
        let mut r = Rng::new(self.seed ^ (u64::from(cg) << 56) ^ page.rotate_left(17) ^ self.n);
        Content::Page((r.next_u64() >> 33) as u32)
    }
}

enum Gen {
    Build(Build),
    Zipf(ZipfW),
    Scan(Scan),
    Avb(Avb),
}

/// Events generated per refill (bounded queue).
const BATCH: usize = 256;

impl Gen {
    fn layout(&self) -> Vec<CgroupLayout> {
        let l = |name: &str, pages| CgroupLayout {
            name: name.into(),
            pages,
            parent: 0,
        };
        match self {
            Gen::Build(b) => vec![l("build", b.region_end())],
            Gen::Zipf(z) => vec![l("zipf", z.f)],
            Gen::Scan(s) => vec![l("scan", s.f)],
            Gen::Avb(a) => vec![l("background", a.bg), l("active", a.wa)],
        }
    }

    fn total(&self) -> u64 {
        match self {
            Gen::Build(b) => b.total(),
            Gen::Zipf(z) => z.f + z.accesses,
            Gen::Scan(s) => s.f * s.passes,
            Gen::Avb(a) => a.bg + a.wa + a.accesses,
        }
    }

    fn set_rng(&mut self, rng: Rng, seed: u64) {
        let c = Contents { seed, n: 0 };
        match self {
            Gen::Build(b) => {
                b.rng = rng;
                b.c = c;
            }
            Gen::Zipf(z) => {
                z.rng = rng;
                z.c = c;
                z.scatter = Scatter::new(z.f, &mut z.rng);
            }
            Gen::Scan(s) => {
                s.rng = rng;
                s.c = c;
            }
            Gen::Avb(a) => {
                a.rng = rng;
                a.c = c;
                a.scatter = Scatter::new(a.wa, &mut a.rng);
            }
        }
    }

    fn refill(&mut self, q: &mut Batch) -> bool {
        match self {
            Gen::Build(b) => b.refill(q),
            Gen::Zipf(z) => z.refill(q),
            Gen::Scan(s) => s.refill(q),
            Gen::Avb(a) => a.refill(q),
        }
    }
}

// ---- zipf ----

struct ZipfW {
    f: u64,
    accesses: u64,
    done: u64,
    zipf: Zipf,
    scatter: Scatter,
    rng: Rng,
    c: Contents,
}

impl ZipfW {
    fn new(m: u64, scale: f64) -> ZipfW {
        let f = 2 * m;
        ZipfW {
            f,
            accesses: ((4 * f) as f64 * scale).round().max(1.0) as u64,
            done: 0,
            zipf: Zipf::new(f, 1.0),
            scatter: Scatter { n: 1, a: 1, b: 0 },
            rng: Rng::new(0),
            c: Contents { seed: 0, n: 0 },
        }
    }
    fn refill(&mut self, q: &mut Batch) -> bool {
        let end = self.f + self.accesses;
        if self.done >= end {
            return false;
        }
        for _ in 0..BATCH {
            if self.done >= end {
                break;
            }
            let e = if self.done < self.f {
                let page = self.done;
                Event::Write {
                    cg: 1,
                    page,
                    content: self.c.next(1, page),
                }
            } else {
                let page = self.scatter.map(self.zipf.sample(&mut self.rng) - 1);
                if self.rng.chance(0.2) {
                    Event::Write {
                        cg: 1,
                        page,
                        content: self.c.next(1, page),
                    }
                } else {
                    Event::Read { cg: 1, page }
                }
            };
            q.push(e);
            self.done += 1;
        }
        true
    }
}

// ---- scan ----

struct Scan {
    f: u64,
    passes: u64,
    done: u64,
    rng: Rng,
    c: Contents,
}

impl Scan {
    fn new(m: u64, scale: f64) -> Scan {
        Scan {
            f: 2 * m,
            passes: (3.0 * scale).round().max(1.0) as u64,
            done: 0,
            rng: Rng::new(0),
            c: Contents { seed: 0, n: 0 },
        }
    }
    fn refill(&mut self, q: &mut Batch) -> bool {
        let end = self.f * self.passes;
        if self.done >= end {
            return false;
        }
        for _ in 0..BATCH {
            if self.done >= end {
                break;
            }
            let page = self.done % self.f;
            let first = self.done < self.f;
            q.push(if first || self.rng.chance(0.1) {
                Event::Write {
                    cg: 1,
                    page,
                    content: self.c.next(1, page),
                }
            } else {
                Event::Read { cg: 1, page }
            });
            self.done += 1;
        }
        true
    }
}

// ---- active-vs-background ----

struct Avb {
    /// Background pages (written once).
    bg: u64,
    /// Active working set.
    wa: u64,
    accesses: u64,
    done: u64,
    zipf: Zipf,
    scatter: Scatter,
    rng: Rng,
    c: Contents,
}

impl Avb {
    fn new(m: u64, scale: f64, pool_limit: u64, ratio: f64) -> Avb {
        // Enough cold pages to fill the pool 30 % past its limit at the expected compression
        // ratio, plus what stays resident under the background's own limit.
        let bg = ((pool_limit as f64 * ratio.max(1.0) * 1.3) as u64 + m).max(4 * m);
        let wa = m * 3 / 2;
        Avb {
            bg,
            wa,
            accesses: ((6 * wa) as f64 * scale).round().max(1.0) as u64,
            done: 0,
            zipf: Zipf::new(wa, 0.8),
            scatter: Scatter { n: 1, a: 1, b: 0 },
            rng: Rng::new(0),
            c: Contents { seed: 0, n: 0 },
        }
    }
    fn refill(&mut self, q: &mut Batch) -> bool {
        let end = self.bg + self.wa + self.accesses;
        if self.done >= end {
            return false;
        }
        for _ in 0..BATCH {
            if self.done >= end {
                break;
            }
            let d = self.done;
            let e = if d < self.bg {
                Event::Write {
                    cg: 1,
                    page: d,
                    content: self.c.next(1, d),
                }
            } else if d < self.bg + self.wa {
                let page = d - self.bg;
                Event::Write {
                    cg: 2,
                    page,
                    content: self.c.next(2, page),
                }
            } else {
                let page = self.scatter.map(self.zipf.sample(&mut self.rng) - 1);
                if self.rng.chance(0.1) {
                    Event::Write {
                        cg: 2,
                        page,
                        content: self.c.next(2, page),
                    }
                } else {
                    Event::Read { cg: 2, page }
                }
            };
            q.push(e);
            self.done += 1;
        }
        true
    }
}

// ---- build ----

/// A job slot: a region of `max_job` pages reused by successive jobs.
#[derive(Clone, Copy, Debug, Default)]
struct Job {
    /// Pages of the current job (0: slot idle).
    size: u64,
    /// Pages written so far (allocation phase).
    written: u64,
    /// Compute accesses left.
    left: u64,
}

struct Build {
    cold: u64,
    warm: u64,
    max_job: u64,
    min_job: u64,
    slots: [Job; 4],
    jobs_total: u64,
    jobs_started: u64,
    /// Setup pages written (cold then warm).
    setup_done: u64,
    warm_zipf: Zipf,
    /// Round-robin position over the slots.
    turn: usize,
    rng: Rng,
    c: Contents,
}

/// Events a job slot runs before the next slot gets its turn (a scheduler time slice).
const SLICE: u64 = 64;

impl Build {
    fn new(m: u64, scale: f64) -> Build {
        Build {
            cold: m / 4,
            warm: m * 35 / 100,
            max_job: (m / 4).max(1),
            min_job: (m / 20).max(1),
            slots: [Job::default(); 4],
            jobs_total: (32.0 * scale).round().max(1.0) as u64,
            jobs_started: 0,
            setup_done: 0,
            warm_zipf: Zipf::new((m * 35 / 100).max(1), 1.1),
            turn: 0,
            rng: Rng::new(0),
            c: Contents { seed: 0, n: 0 },
        }
    }

    fn region_end(&self) -> u64 {
        self.cold + self.warm + 4 * self.max_job
    }

    fn slot_base(&self, k: usize) -> u64 {
        self.cold + self.warm + k as u64 * self.max_job
    }

    fn job_size(&self, rng: &mut Rng) -> u64 {
        self.min_job + rng.below(self.max_job - self.min_job + 1)
    }

    fn total(&self) -> u64 {
        // Job sizes are drawn from a dedicated stream, so they can be known in advance.
        let mut r = Rng::new(0xb111d ^ self.c.seed);
        let jobs: u64 = (0..self.jobs_total)
            .map(|_| {
                let s = self.job_size(&mut r);
                s + 2 * s + 1
            })
            .sum();
        self.cold + self.warm + jobs
    }

    fn start_job(&mut self, k: usize) {
        let mut r = Rng::new(0xb111d ^ self.c.seed);
        // The i-th job's size is the i-th draw of the size stream.
        let mut s = 0;
        for _ in 0..=self.jobs_started {
            s = self.job_size(&mut r);
        }
        self.slots[k] = Job {
            size: s,
            written: 0,
            left: 2 * s,
        };
        self.jobs_started += 1;
    }

    fn refill(&mut self, q: &mut Batch) -> bool {
        let setup = self.cold + self.warm;
        if self.setup_done < setup {
            for _ in 0..BATCH {
                if self.setup_done >= setup {
                    break;
                }
                let page = self.setup_done;
                q.push(Event::Write {
                    cg: 1,
                    page,
                    content: self.c.next(1, page),
                });
                self.setup_done += 1;
            }
            return true;
        }
        // Fill idle slots with new jobs.
        for k in 0..4 {
            if self.slots[k].size == 0 && self.jobs_started < self.jobs_total {
                self.start_job(k);
            }
        }
        // Next busy slot, round robin.
        let Some(k) = (0..4)
            .map(|i| (self.turn + i) % 4)
            .find(|&k| self.slots[k].size > 0)
        else {
            return false;
        };
        self.turn = (k + 1) % 4;
        let base = self.slot_base(k);
        let mut n = 0;
        while n < SLICE {
            let j = self.slots[k];
            if j.written < j.size {
                let page = base + j.written;
                q.push(Event::Write {
                    cg: 1,
                    page,
                    content: self.c.next(1, page),
                });
                self.slots[k].written += 1;
            } else if j.left > 0 {
                let r = self.rng.unit();
                let e = if r < 0.3 {
                    // The warm working set, Zipf-skewed.
                    let page = self.cold + self.warm_zipf.sample(&mut self.rng) - 1;
                    if self.rng.chance(0.1) {
                        Event::Write {
                            cg: 1,
                            page,
                            content: self.c.next(1, page),
                        }
                    } else {
                        Event::Read { cg: 1, page }
                    }
                } else if r < 0.3005 {
                    // Rarely, the cold long-lived state.
                    Event::Read {
                        cg: 1,
                        page: self.rng.below(self.cold.max(1)),
                    }
                } else {
                    let page = base + self.rng.below(j.size);
                    if self.rng.chance(0.2) {
                        Event::Write {
                            cg: 1,
                            page,
                            content: self.c.next(1, page),
                        }
                    } else {
                        Event::Read { cg: 1, page }
                    }
                };
                q.push(e);
                self.slots[k].left -= 1;
            } else {
                // The job exits: its memory is freed.
                q.push(Event::Free {
                    cg: 1,
                    page: base,
                    count: j.size,
                });
                self.slots[k] = Job::default();
                break;
            }
            n += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> WorkloadParams {
        WorkloadParams {
            memory_max_pages: 1024,
            scale: 1.0,
            seed: 7,
            pool_limit_pages: 512,
            ratio: 3.0,
            pool_charged: false,
        }
    }

    #[test]
    fn every_workload_is_deterministic_counted_and_in_range() {
        for name in BUILTIN {
            let mut a = Builtin::new(name, &params()).unwrap();
            let mut b = Builtin::new(name, &params()).unwrap();
            let layout = a.layout().to_vec();
            let total = a.total_events();
            let mut n = 0;
            while let Some(e) = a.next_event() {
                assert_eq!(Some(e.clone()), b.next_event());
                if let Event::Read { cg, page } | Event::Write { cg, page, .. } = e {
                    assert!(page < layout[cg as usize - 1].pages, "{name}: {e:?}");
                }
                n += 1;
            }
            assert_eq!(b.next_event(), None);
            assert_eq!(n, total, "{name}");
            assert!(describe(name).is_some());
        }
    }

    #[test]
    fn zipf_is_skewed() {
        let mut z = Zipf::new(1000, 1.0);
        let mut r = Rng::new(1);
        let mut top = 0;
        for _ in 0..100_000 {
            let k = z.sample(&mut r);
            assert!((1..=1000).contains(&k));
            if k <= 10 {
                top += 1;
            }
        }
        // The 10 most popular of 1000 ranks get about 39 % of accesses under Zipf(1).
        assert!((35_000..43_000).contains(&top), "{top}");
    }

    #[test]
    fn scatter_is_a_bijection() {
        let mut r = Rng::new(3);
        for n in [1u64, 2, 10, 1000, 4096] {
            let s = Scatter::new(n, &mut r);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = s.map(i) as usize;
                assert!(!seen[j]);
                seen[j] = true;
            }
        }
    }
}
