// SPDX-License-Identifier: MIT
//! Store / load cost against the raw codec in the same run.
//!
//! `cargo bench -p uzswap-zswap --bench zswap` (env: `UZSWAP_BENCH_PAGES`, default 4096;
//! `UZSWAP_BENCH_ALGS`, default "lz4,lzo-rle,zstd"; `UZSWAP_BENCH_THREADS`, default 1;
//! `UZSWAP_BENCH_ROUNDS`, default 9; `UZSWAP_BENCH_STEADY_ONLY=1` runs only the steady state). Pages come from the binaries in /usr/bin (non-zero pages).
//! Each round runs, per page: raw compress; compress + zsmalloc `alloc_write` (the allocator
//! alone); `store`; raw decompress; zsmalloc `read` + decompress; `load`; exclusive `load`
//! (frees); zsmalloc `free`. Reported: min and median ns per page, and the cache's overhead over
//! the codec and over codec + allocator. Then a steady state: random exclusive load + store over
//! a resident pool, against the raw codec on the same page sequence.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use uzswap_backing::{SwapFile, SwapSlot};
use uzswap_compress::{compress, decompress, Algorithm, MAX_COMPRESSED_LEN};
use uzswap_zsmalloc::{Handle, Pool, PoolConfig};
use uzswap_zswap::{CgroupId, Params, Zswap, PAGE_SIZE};

fn pages(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir("/usr/bin")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        if out.len() >= n {
            break;
        }
        let Ok(data) = std::fs::read(&f) else {
            continue;
        };
        for c in data.chunks_exact(PAGE_SIZE) {
            if out.len() >= n {
                break;
            }
            if c.iter().any(|&b| b != 0) {
                out.push(c.to_vec());
            }
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Phases, run in this order every round; times are ns per page.
const PHASES: [&str; 8] = [
    "compress",
    "comp+alloc",
    "store",
    "decomp",
    "read+decomp",
    "load",
    "load-excl",
    "free",
];

fn main() {
    let n: usize = std::env::var("UZSWAP_BENCH_PAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let algs: Vec<Algorithm> = std::env::var("UZSWAP_BENCH_ALGS")
        .unwrap_or_else(|_| "lz4,lzo-rle,zstd".into())
        .split(',')
        .map(|a| a.parse().expect("algorithm"))
        .collect();
    let threads: Vec<usize> = std::env::var("UZSWAP_BENCH_THREADS")
        .unwrap_or_else(|_| "1".into())
        .split(',')
        .map(|t| t.parse().expect("threads"))
        .collect();
    let rounds: usize = std::env::var("UZSWAP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let pages = Arc::new(pages(n));
    let n = pages.len();
    println!("pages: {n} from /usr/bin, rounds: {rounds}, ns/page as min / median over rounds");
    let steady_only = std::env::var("UZSWAP_BENCH_STEADY_ONLY").is_ok_and(|v| v == "1");
    for &alg in algs.iter().filter(|_| !steady_only) {
        for &thr in &threads {
            let swap = Arc::new(
                SwapFile::create_temp(&std::env::temp_dir(), 0, (n * thr) as u64)
                    .expect("swap file"),
            );
            let z = Arc::new(
                Zswap::new(Params {
                    compressor: alg,
                    total_memory_bytes: 1 << 40,
                    ..Params::default()
                })
                .expect("cache"),
            );
            z.add_swap_file(swap).expect("area");
            // The allocator alone, as the reference for what the cache adds on top of it.
            let zs = Arc::new(Pool::new(PoolConfig::default()).expect("pool"));
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];
            for _ in 0..rounds {
                let hs: Vec<_> = (0..thr)
                    .map(|t| {
                        let (z, zs, pages) = (z.clone(), zs.clone(), pages.clone());
                        std::thread::spawn(move || {
                            let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
                            let mut out = vec![0u8; PAGE_SIZE];
                            let comp: Vec<Vec<u8>> = pages
                                .iter()
                                .map(|p| {
                                    let l = compress(alg, p, &mut buf).unwrap();
                                    buf[..l].to_vec()
                                })
                                .collect();
                            let mut handles: Vec<Handle> = Vec::with_capacity(pages.len());
                            let mut per = Vec::new();
                            for phase in 0..PHASES.len() {
                                let t0 = Instant::now();
                                for (i, p) in pages.iter().enumerate() {
                                    let s = SwapSlot {
                                        area: 0,
                                        offset: (t * pages.len() + i) as u64,
                                    };
                                    match phase {
                                        0 => {
                                            black_box(compress(alg, p, &mut buf).unwrap());
                                        }
                                        1 => {
                                            let l = compress(alg, p, &mut buf).unwrap();
                                            let data =
                                                if l < PAGE_SIZE { &buf[..l] } else { &p[..] };
                                            handles.push(zs.alloc_write(data).unwrap());
                                        }
                                        2 => {
                                            black_box(z.store(s, p, CgroupId::ROOT));
                                        }
                                        3 => {
                                            black_box(decompress(alg, &comp[i], &mut out).unwrap());
                                        }
                                        4 => {
                                            let obj = zs.read(handles[i]).unwrap();
                                            let l = comp[i].len();
                                            if l < PAGE_SIZE {
                                                black_box(
                                                    decompress(alg, &obj[..l], &mut out).unwrap(),
                                                );
                                            } else {
                                                out.copy_from_slice(&obj[..PAGE_SIZE]);
                                            }
                                        }
                                        5 => {
                                            black_box(z.load(s, &mut out, false).unwrap());
                                        }
                                        6 => {
                                            black_box(z.load(s, &mut out, true).unwrap());
                                        }
                                        _ => {
                                            zs.free(handles[i]).unwrap();
                                        }
                                    }
                                }
                                per.push(t0.elapsed().as_nanos() as f64 / pages.len() as f64);
                            }
                            per
                        })
                    })
                    .collect();
                let mut sum = vec![0.0; PHASES.len()];
                for h in hs {
                    for (k, v) in h.join().unwrap().into_iter().enumerate() {
                        sum[k] += v / thr as f64;
                    }
                }
                for (k, v) in sum.into_iter().enumerate() {
                    times[k].push(v);
                }
                assert_eq!(z.counters().stored_pages, 0);
            }
            println!("\n{alg} x{thr} threads");
            let mins: Vec<f64> = times
                .iter()
                .map(|v| v.iter().cloned().fold(f64::MAX, f64::min))
                .collect();
            for (k, name) in PHASES.iter().enumerate() {
                println!(
                    "  {:<12} {:>8.0} {:>8.0}",
                    name,
                    mins[k],
                    median(&mut times[k])
                );
            }
            println!(
                "  store vs compress {:+.1}%, vs compress+alloc {:+.1}%; load vs decompress {:+.1}%, vs read+decompress {:+.1}%; exclusive load vs read+decompress+free {:+.1}%",
                (mins[2] / mins[0] - 1.0) * 100.0,
                (mins[2] / mins[1] - 1.0) * 100.0,
                (mins[5] / mins[3] - 1.0) * 100.0,
                (mins[5] / mins[4] - 1.0) * 100.0,
                (mins[6] / (mins[4] + mins[7]) - 1.0) * 100.0,
            );
        }
    }
    steady_state(&pages, &algs, rounds);
    let z = Zswap::new(Params::default()).unwrap();
    let swap = Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, n as u64).unwrap());
    z.add_swap_file(swap).unwrap();
    for (i, p) in pages.iter().enumerate() {
        z.store(
            SwapSlot {
                area: 0,
                offset: i as u64,
            },
            p,
            CgroupId::ROOT,
        );
    }
    println!(
        "\nmetadata bytes per stored page ({n} pages, lz4): {:.1} {:?}",
        z.metadata_bytes_per_entry(),
        z.metadata()
    );
}

/// Steady state: a resident pool of every page; each step swaps one random slot in (exclusive
/// load) and a page out again into it (store), so zsmalloc reuses freed object slots in
/// partly used zspages instead of faulting in fresh ones. Reference: the raw codec on the same
/// sequence of pages, timed the same way (one operation per timed call pair).
fn steady_state(pages: &Arc<Vec<Vec<u8>>>, algs: &[Algorithm], rounds: usize) {
    let n = pages.len();
    let steps = n * 2;
    println!(
        "\nsteady state: {n} resident pages, {steps} random swap-in + swap-out steps per round"
    );
    println!(
        "  {:<10} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "alg", "compress", "store", "store%", "decomp", "load-ex", "load%"
    );
    for &alg in algs {
        let swap =
            Arc::new(SwapFile::create_temp(&std::env::temp_dir(), 0, n as u64).expect("swap file"));
        let z = Zswap::new(Params {
            compressor: alg,
            total_memory_bytes: 1 << 40,
            ..Params::default()
        })
        .expect("cache");
        z.add_swap_file(swap).expect("area");
        for (i, p) in pages.iter().enumerate() {
            z.store(
                SwapSlot {
                    area: 0,
                    offset: i as u64,
                },
                p,
                CgroupId::ROOT,
            );
        }
        let mut buf = vec![0u8; MAX_COMPRESSED_LEN];
        let mut out = vec![0u8; PAGE_SIZE];
        // Which page each slot holds now, and a compressed copy for the raw-decompress reference.
        let mut holds: Vec<usize> = (0..n).collect();
        let comp: Vec<Vec<u8>> = pages
            .iter()
            .map(|p| {
                let l = compress(alg, p, &mut buf).unwrap();
                buf[..l].to_vec()
            })
            .collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut tc, mut ts, mut td, mut tl) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let plan: Vec<(usize, usize)> = (0..steps)
                .map(|_| ((next() % n as u64) as usize, (next() % n as u64) as usize))
                .collect();
            let (mut c, mut st, mut d, mut l) = (0u128, 0u128, 0u128, 0u128);
            for (k, &(slot, page)) in plan.iter().enumerate() {
                let sl = SwapSlot {
                    area: 0,
                    offset: slot as u64,
                };
                let old = holds[slot];
                // Alternate which of the pair runs first, so that neither always finds the
                // page (or its compressed copy) already in the CPU cache.
                let raw_first = k % 2 == 0;
                for turn in 0..2 {
                    if (turn == 0) == raw_first {
                        let t = Instant::now();
                        if comp[old].len() < PAGE_SIZE {
                            black_box(decompress(alg, &comp[old], &mut out).unwrap());
                        }
                        d += t.elapsed().as_nanos();
                    } else {
                        let t = Instant::now();
                        black_box(z.load(sl, &mut out, true).unwrap());
                        l += t.elapsed().as_nanos();
                    }
                }
                for turn in 0..2 {
                    if (turn == 0) == raw_first {
                        let t = Instant::now();
                        black_box(compress(alg, &pages[page], &mut buf).unwrap());
                        c += t.elapsed().as_nanos();
                    } else {
                        let t = Instant::now();
                        black_box(z.store(sl, &pages[page], CgroupId::ROOT));
                        st += t.elapsed().as_nanos();
                    }
                }
                holds[slot] = page;
            }
            let per = |v: u128| v as f64 / steps as f64;
            tc.push(per(c));
            ts.push(per(st));
            td.push(per(d));
            tl.push(per(l));
        }
        let min = |v: &Vec<f64>| v.iter().cloned().fold(f64::MAX, f64::min);
        let (c, st, d, l) = (min(&tc), min(&ts), min(&td), min(&tl));
        println!(
            "  {:<10} {:>9.0} {:>9.0} {:>+6.1}% {:>9.0} {:>9.0} {:>+6.1}%",
            alg.to_string(),
            c,
            st,
            (st / c - 1.0) * 100.0,
            d,
            l,
            (l / d - 1.0) * 100.0
        );
    }
}
