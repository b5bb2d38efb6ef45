// SPDX-License-Identifier: MIT
//! Timing of benchmark phases: wall time and the threads' own CPU time, phases split over
//! threads released together, and the statistics reported over runs.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// CPU time consumed by the calling thread (user + system), in nanoseconds. On a shared,
/// busy machine this is steadier than wall time: time spent waiting for a CPU is not in it.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall and CPU time of one phase.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTime {
    /// From the earliest thread's start to the latest thread's end.
    pub wall: Duration,
    /// Sum over the phase's threads of their CPU time.
    pub cpu_ns: u64,
}

impl PhaseTime {
    /// Items per second of wall time.
    pub fn rate(&self, items: usize) -> f64 {
        items as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// CPU nanoseconds per item.
    pub fn cpu_per_item(&self, items: usize) -> f64 {
        self.cpu_ns as f64 / items as f64
    }
}

/// Times `f` on the calling thread.
pub fn timed<R>(f: impl FnOnce() -> R) -> (PhaseTime, R) {
    let (c0, t0) = (thread_cpu_ns(), Instant::now());
    let r = f();
    let wall = t0.elapsed();
    (
        PhaseTime {
            wall,
            cpu_ns: thread_cpu_ns().saturating_sub(c0),
        },
        r,
    )
}

/// Releases a phase's threads together. With `std::sync::Barrier` the last thread to arrive
/// wakes the others through a futex, and on a 2-vCPU VM the woken thread started 1-40 µs
/// later (at times 0.7-2.6 ms): up to 3 % of a 1.2 ms two-thread invalidation phase, counted
/// as that phase's time, and nothing of a compression phase. Spinning until the last thread
/// has arrived, the starts were mostly within 1 µs of each other. After about a million spins
/// a waiter yields, for more threads than CPUs.
struct StartGate {
    arrived: AtomicUsize,
    n: usize,
}

impl StartGate {
    fn new(n: usize) -> Self {
        StartGate {
            arrived: AtomicUsize::new(0),
            n,
        }
    }

    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::Acquire) < self.n {
            if spins < 1 << 20 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Runs `work(item)` on one thread per item, all released together ([`StartGate`]); returns
/// the wall time from the earliest start to the latest end, the threads' summed CPU time, and
/// each thread's result.
pub fn parallel<W: Send, R: Send>(
    items: Vec<W>,
    work: impl Fn(W) -> R + Sync,
) -> (PhaseTime, Vec<R>) {
    let gate = StartGate::new(items.len());
    let (gate, work) = (&gate, &work);
    let res: Vec<(Instant, Instant, u64, R)> = std::thread::scope(|s| {
        let hs: Vec<_> = items
            .into_iter()
            .map(|item| {
                s.spawn(move || {
                    gate.wait();
                    let (c0, t0) = (thread_cpu_ns(), Instant::now());
                    let r = work(item);
                    let t1 = Instant::now();
                    (t0, t1, thread_cpu_ns().saturating_sub(c0), r)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let start = res.iter().map(|r| r.0).min().expect("one thread");
    let end = res.iter().map(|r| r.1).max().expect("one thread");
    let cpu_ns = res.iter().map(|r| r.2).sum();
    (
        PhaseTime {
            wall: end - start,
            cpu_ns,
        },
        res.into_iter().map(|r| r.3).collect(),
    )
}

/// `0..n` cut into `parts` contiguous ranges of (nearly) equal length.
pub fn split(n: usize, parts: usize) -> Vec<Range<usize>> {
    (0..parts)
        .map(|t| n * t / parts..n * (t + 1) / parts)
        .collect()
}

/// Cuts `buf` into consecutive pieces of `ranges[i].len() * unit` bytes.
pub fn split_mut<'a>(
    mut buf: &'a mut [u8],
    ranges: &[Range<usize>],
    unit: usize,
) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (a, b) = buf.split_at_mut(r.len() * unit);
        out.push(a);
        buf = b;
    }
    out
}

/// The median (mean of the middle two for an even count; NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The largest value (NaN when empty).
pub fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// The median of the element-wise ratios `a[i] / b[i]`: each pair was measured back to back,
/// so a slow spell of the machine spanning several runs cancels out.
pub fn paired_median(a: &[f64], b: &[f64]) -> f64 {
    median(&a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything() {
        for (n, p) in [(10, 3), (1, 1), (7, 7), (100, 2)] {
            let r = split(n, p);
            assert_eq!(r.len(), p);
            assert_eq!(r[0].start, 0);
            assert_eq!(r[p - 1].end, n);
            assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(paired_median(&[2.0, 9.0, 4.0], &[1.0, 3.0, 4.0]), 2.0);
        assert_eq!(best(&[1.0, 5.0, 2.0]), 5.0);
    }

    #[test]
    fn the_gate_opens_when_all_arrived_and_parallel_keeps_the_order() {
        // More threads than CPUs: the waiters must yield, not spin forever.
        let n = 4 * std::thread::available_parallelism().map_or(2, |p| p.get());
        let gate = StartGate::new(n);
        let seen: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        gate.arrived.load(Ordering::Acquire)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|&a| a == n), "{seen:?}");
        let (t, out) = parallel((0..n).collect(), |i| i * 10);
        assert_eq!(out, (0..n).map(|i| i * 10).collect::<Vec<_>>());
        assert!(t.wall > Duration::ZERO);
    }

    #[test]
    fn split_mut_follows_the_ranges() {
        let mut buf = vec![0u8; 10 * 4];
        let r = split(10, 3);
        let parts = split_mut(&mut buf, &r, 4);
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [12, 12, 16]
        );
    }
}
