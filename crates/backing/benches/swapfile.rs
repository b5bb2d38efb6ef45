// SPDX-License-Identifier: MIT
//! write_page / read_page per 4 KiB page against raw pwrite / pread of the same size on the
//! same kind of file, in the same run: the difference is the cost of checksums, the checksum
//! table update and slot bookkeeping.
//!
//! `cargo bench -p uzswap-backing --bench swapfile`

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use uzswap_backing::{SwapFile, SwapSlot, PAGE_SIZE};

const SLOTS: u64 = 4096; // 16 MiB: stays in the page cache, so the file system path is measured

/// Real, non-trivial page content: bytes of this benchmark's own executable.
fn pages() -> Vec<Vec<u8>> {
    let exe = std::fs::read("/proc/self/exe").expect("read own executable");
    exe.chunks(PAGE_SIZE)
        .filter(|c| c.len() == PAGE_SIZE)
        .take(256)
        .map(|c| c.to_vec())
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = std::env::var_os("UZSWAP_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let pages = pages();
    let sf = SwapFile::create_temp(&dir, 0, SLOTS).expect("swap file");
    let slots: Vec<SwapSlot> = (0..SLOTS).map(|_| sf.alloc_slot().unwrap()).collect();
    let raw = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(Path::new(&dir))
        .expect("raw temp file");
    raw.set_len(SLOTS * PAGE_SIZE as u64).unwrap();

    let mut g = c.benchmark_group("page_io");
    g.throughput(Throughput::Bytes(PAGE_SIZE as u64));
    let mut i = 0usize;
    g.bench_function("raw_pwrite", |b| {
        b.iter(|| {
            i = (i + 1) % SLOTS as usize;
            raw.write_all_at(&pages[i % pages.len()], (i * PAGE_SIZE) as u64)
                .unwrap();
        })
    });
    g.bench_function("swapfile_write_page", |b| {
        b.iter(|| {
            i = (i + 1) % SLOTS as usize;
            sf.write_page(slots[i], &pages[i % pages.len()]).unwrap();
        })
    });
    // Make every block readable for the read benchmarks.
    for (k, s) in slots.iter().enumerate() {
        sf.write_page(*s, &pages[k % pages.len()]).unwrap();
        raw.write_all_at(&pages[k % pages.len()], (k * PAGE_SIZE) as u64)
            .unwrap();
    }
    let mut buf = vec![0u8; PAGE_SIZE];
    g.bench_function("raw_pread", |b| {
        b.iter(|| {
            i = (i + 1) % SLOTS as usize;
            raw.read_exact_at(&mut buf, (i * PAGE_SIZE) as u64).unwrap();
        })
    });
    g.bench_function("swapfile_read_page", |b| {
        b.iter(|| {
            i = (i + 1) % SLOTS as usize;
            sf.read_page(slots[i], &mut buf).unwrap();
        })
    });
    g.bench_function("swapfile_write_then_discard", |b| {
        b.iter(|| {
            i = (i + 1) % SLOTS as usize;
            sf.write_page(slots[i], &pages[i % pages.len()]).unwrap();
            sf.discard(slots[i]);
        })
    });
    g.bench_function("swapfile_discard_only", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % SLOTS as usize;
                sf.write_page(slots[i], &pages[i % pages.len()]).unwrap();
                slots[i]
            },
            |s| sf.discard(s),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("crc32c_block_checksum", |b| {
        b.iter(|| {
            i = (i + 1) % pages.len();
            uzswap_backing::block_checksum(slots[i], &pages[i])
        })
    });
    g.finish();

    let mut g = c.benchmark_group("slots");
    let big = SwapFile::create_temp(&dir, 1, 1 << 16).expect("swap file");
    g.bench_function("alloc_free_pair", |b| {
        b.iter_batched(
            || (),
            |()| {
                let s = big.alloc_slot().unwrap();
                big.free_slot(s).unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
