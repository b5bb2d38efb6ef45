// SPDX-License-Identifier: MIT
//! Per-object cost of alloc+write, read and free on real compressed page sizes and contents,
//! next to a reference in the same run: one `Box<[u8]>` per object (malloc + memcpy / free /
//! slice access).
//!
//! * `steady/*`: a pool holding 8192 objects; `replace` frees a random object and stores the
//!   next page (one free + one alloc_write), `read` reads a random object (first and last
//!   byte), as zswap does at steady state.
//! * `fill_empty/*`: stores all 8192 objects into an empty pool, then frees them all: the
//!   cold path, which includes the kernel's page faults for new zspages and `madvise` for
//!   emptied ones (the pool returns memory to the OS).
//! * `threads/*`: the steady replace+read loop run by 1 thread over all sizes versus 2 threads
//!   over one half each (small / large objects, so mostly different classes), the same total
//!   number of operations: `*_wall` is wall time (the ratio is the 2-thread scaling, if two
//!   cores are free), `*_cpu` the CPU time summed over the threads (equal values for 1 and 2
//!   threads mean the threads cost each other nothing: no lock or cache-line contention).
//!   The `*_nowrite` variants run `replace_nowrite` only (no copies, no reads), isolating the
//!   allocators' own contention from memory-bandwidth effects.
//! * `steady/replace_nowrite`: like `replace` but without copying the contents (allocator
//!   bookkeeping only: `alloc(len)` versus an uninitialised `Box<[u8]>`).
//!
//! Single-thread groups measure the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, which
//! includes kernel time spent on its behalf), so other processes on this shared 2-vCPU
//! machine do not inflate them.
//!
//! `cargo bench -p uzswap-zsmalloc --bench ops`

mod common;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use uzswap_zsmalloc::{Handle, Pool, PoolConfig};

const OBJECTS: usize = 8192;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn sample() -> Vec<Vec<u8>> {
    let mut pages = common::compressed_pages(OBJECTS * 4);
    // Shuffle deterministically so consecutive objects hit different classes, as in zswap.
    let mut rng = common::Lcg(1);
    for i in (1..pages.len()).rev() {
        let j = rng.next() as usize % (i + 1);
        pages.swap(i, j);
    }
    pages
}

trait Store: Sync {
    type H: Copy + Send;
    fn put(&self, d: &[u8]) -> Self::H;
    /// Allocation without writing the contents (allocator bookkeeping only).
    fn put_uninit(&self, len: usize) -> Self::H;
    fn get(&self, h: Self::H, len: usize) -> u8;
    fn del(&self, h: Self::H);
}

struct Zs(Pool);
impl Store for Zs {
    type H = Handle;
    fn put(&self, d: &[u8]) -> Handle {
        self.0.alloc_write(d).unwrap()
    }
    fn put_uninit(&self, len: usize) -> Handle {
        self.0.alloc(len).unwrap()
    }
    fn get(&self, h: Handle, len: usize) -> u8 {
        let r = self.0.read(h).unwrap();
        r[0] ^ r[len - 1]
    }
    fn del(&self, h: Handle) {
        self.0.free(h).unwrap()
    }
}

/// Reference: one heap allocation per object (the handle is the raw Box pointer).
struct Heap;
#[derive(Clone, Copy)]
struct Raw(*mut [u8]);
// SAFETY: the pointer is only a token passed between the bench's own threads; each Box is
// owned by exactly one thread at a time.
unsafe impl Send for Raw {}
impl Store for Heap {
    type H = Raw;
    fn put(&self, d: &[u8]) -> Raw {
        Raw(Box::into_raw(Box::<[u8]>::from(d)))
    }
    fn put_uninit(&self, len: usize) -> Raw {
        let b: Box<[std::mem::MaybeUninit<u8>]> = Box::new_uninit_slice(len);
        Raw(Box::into_raw(b) as *mut [u8])
    }
    fn get(&self, h: Raw, len: usize) -> u8 {
        // SAFETY: `h` is a live Box from `put` not yet passed to `del`.
        let s = unsafe { &*h.0 };
        s[0] ^ s[len - 1]
    }
    fn del(&self, h: Raw) {
        // SAFETY: `h` came from Box::into_raw in `put` and is released once.
        drop(unsafe { Box::from_raw(h.0) })
    }
}

/// A store filled with the first `OBJECTS` of `objs`, plus the cursor for the next object.
struct Steady<'a, S: Store> {
    s: &'a S,
    objs: &'a [Vec<u8>],
    live: Vec<(S::H, usize)>,
    next: usize,
    rng: common::Lcg,
}

impl<'a, S: Store> Steady<'a, S> {
    fn new(s: &'a S, objs: &'a [Vec<u8>], seed: u64) -> Self {
        let n = OBJECTS.min(objs.len());
        let live = objs[..n].iter().map(|o| (s.put(o), o.len())).collect();
        Steady {
            s,
            objs,
            live,
            next: n,
            rng: common::Lcg(seed),
        }
    }
    fn replace(&mut self) {
        let k = self.rng.next() as usize % self.live.len();
        self.s.del(self.live[k].0);
        let o = &self.objs[self.next % self.objs.len()];
        self.next += 1;
        self.live[k] = (self.s.put(o), o.len());
    }
    fn replace_nowrite(&mut self) {
        let k = self.rng.next() as usize % self.live.len();
        self.s.del(self.live[k].0);
        let o = &self.objs[self.next % self.objs.len()];
        self.next += 1;
        self.live[k] = (black_box(self.s.put_uninit(o.len())), o.len());
    }
    fn read(&mut self) -> u8 {
        let (h, len) = self.live[self.rng.next() as usize % self.live.len()];
        self.s.get(h, len)
    }
    fn clear(self) {
        for (h, _) in self.live {
            self.s.del(h);
        }
    }
}

fn bench_steady(c: &mut Criterion) {
    let objs = sample();
    let mut g = c.benchmark_group("steady");
    g.throughput(Throughput::Elements(1));
    let zs = Zs(Pool::new(PoolConfig::default()).unwrap());
    let heap = Heap;
    {
        let mut st = Steady::new(&zs, &objs, 3);
        g.bench_function(BenchmarkId::new("replace", "zsmalloc"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    st.replace();
                }
                thread_cpu() - t
            })
        });
        g.bench_function(BenchmarkId::new("replace_nowrite", "zsmalloc"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    st.replace_nowrite();
                }
                thread_cpu() - t
            })
        });
        g.bench_function(BenchmarkId::new("read", "zsmalloc"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    black_box(st.read());
                }
                thread_cpu() - t
            })
        });
        st.clear();
    }
    {
        let mut st = Steady::new(&heap, &objs, 3);
        g.bench_function(BenchmarkId::new("replace", "box_memcpy"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    st.replace();
                }
                thread_cpu() - t
            })
        });
        g.bench_function(BenchmarkId::new("replace_nowrite", "box_memcpy"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    st.replace_nowrite();
                }
                thread_cpu() - t
            })
        });
        g.bench_function(BenchmarkId::new("read", "box_memcpy"), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    black_box(st.read());
                }
                thread_cpu() - t
            })
        });
        st.clear();
    }
    g.finish();
}

/// CPU time of (alloc+write all, free all) of `objs` starting from an empty store.
fn fill_empty<S: Store>(s: &S, objs: &[Vec<u8>], hs: &mut Vec<S::H>) -> [Duration; 2] {
    hs.clear();
    let t0 = thread_cpu();
    for o in objs {
        hs.push(s.put(o));
    }
    let t1 = thread_cpu();
    for h in hs.drain(..) {
        s.del(h);
    }
    [t1 - t0, thread_cpu() - t1]
}

fn bench_fill(c: &mut Criterion) {
    let objs = sample();
    let objs = &objs[..OBJECTS];
    let mut g = c.benchmark_group("fill_empty");
    g.throughput(Throughput::Elements(objs.len() as u64));
    for (phase_idx, phase) in ["alloc_write", "free"].iter().enumerate() {
        let zs = Zs(Pool::new(PoolConfig::default()).unwrap());
        g.bench_function(BenchmarkId::new(*phase, "zsmalloc"), |b| {
            let mut hs = Vec::with_capacity(objs.len());
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| fill_empty(&zs, objs, &mut hs)[phase_idx])
                    .sum()
            })
        });
        g.bench_function(BenchmarkId::new(*phase, "box_memcpy"), |b| {
            let mut hs = Vec::with_capacity(objs.len());
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| fill_empty(&Heap, objs, &mut hs)[phase_idx])
                    .sum()
            })
        });
    }
    g.finish();
}

/// (wall time, summed thread CPU time) for `ops` steady replace+read pairs split evenly over
/// one thread per part.
fn threads_run<S: Store>(
    s: &S,
    parts: &[Vec<Vec<u8>>],
    ops: u64,
    write: bool,
) -> (Duration, Duration) {
    let barrier = Barrier::new(parts.len());
    let per = ops / parts.len() as u64;
    std::thread::scope(|sc| {
        let joins: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                let barrier = &barrier;
                sc.spawn(move || {
                    let mut st = Steady::new(s, part, 11 + i as u64);
                    barrier.wait();
                    let t = Instant::now();
                    let c = thread_cpu();
                    let mut x = 0u8;
                    for _ in 0..per {
                        if write {
                            st.replace();
                            x ^= st.read();
                        } else {
                            st.replace_nowrite();
                        }
                    }
                    black_box(x);
                    let r = (t.elapsed(), thread_cpu() - c);
                    st.clear();
                    r
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().unwrap())
            .fold((Duration::ZERO, Duration::ZERO), |a, b| {
                (a.0.max(b.0), a.1 + b.1)
            })
    })
}

fn bench_threads(c: &mut Criterion) {
    let objs = sample();
    let mut lens: Vec<usize> = objs.iter().map(|o| o.len()).collect();
    lens.sort_unstable();
    let median = lens[lens.len() / 2];
    let (small, large): (Vec<_>, Vec<_>) = objs.iter().cloned().partition(|o| o.len() < median);
    let one = vec![objs.clone()];
    let two = vec![small, large];
    let mut g = c.benchmark_group("threads");
    const OPS: u64 = 200_000;
    g.throughput(Throughput::Elements(OPS));
    for (write, name, parts) in [
        (true, "1_thread", &one),
        (true, "2_threads", &two),
        (false, "1_thread_nowrite", &one),
        (false, "2_threads_nowrite", &two),
    ] {
        let zs = Zs(Pool::new(PoolConfig::default()).unwrap());
        g.bench_function(BenchmarkId::new("zsmalloc_wall", name), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| threads_run(&zs, parts, OPS, write).0)
                    .sum()
            })
        });
        g.bench_function(BenchmarkId::new("box_memcpy_wall", name), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| threads_run(&Heap, parts, OPS, write).0)
                    .sum()
            })
        });
        // Summed CPU time: equal per-op CPU with 1 and 2 threads means no contention cost,
        // i.e. linear scaling wherever two cores are free (robust to a loaded machine).
        g.bench_function(BenchmarkId::new("zsmalloc_cpu", name), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| threads_run(&zs, parts, OPS, write).1)
                    .sum()
            })
        });
        g.bench_function(BenchmarkId::new("box_memcpy_cpu", name), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| threads_run(&Heap, parts, OPS, write).1)
                    .sum()
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench_steady, bench_fill, bench_threads
}
criterion_main!(benches);
