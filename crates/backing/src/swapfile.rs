// SPDX-License-Identifier: MIT
//! [`SwapFile`]: a swap area kept in a real file, as the kernel's swap file is under zswap.
//!
//! What it owns: the file, which slots are allocated (lock-free per-cluster bitmaps, module
//! `alloc`), one crc32c checksum per block, I/O error accounting and a [`FaultInjector`]. The
//! cache above (`uzswap-zswap`) decides *what* goes to the file; this module makes sure what
//! comes back is either exactly what was written or a typed error.
//!
//! # File layout (all integers little-endian)
//!
//! ```text
//! page 0                 header: magic "UZSWAPF\0", version, area, slots, table offset,
//!                        data offset, page size, crc32c of the header fields
//! pages 1 ..= T          checksum table, 8 bytes per slot: 0 = no block,
//!                        else WRITTEN (bit 32) | crc32c(area, offset, block)
//! data offset + 4096*i   block of slot i (T = ceil(slots * 8 / 4096))
//! ```
//!
//! The checksum covers the area and slot offset as well as the content, so a block that lands
//! at the wrong offset (a misdirected write) fails its check. The table is written through on
//! every block write (a second 8-byte `pwrite`) so a file made with [`SwapFile::create`] can be
//! reopened with [`SwapFile::open`]; an in-memory copy makes reads verify without touching it.
//!
//! The file is sparse: blocks take disk space only once written, and discarded or freed blocks
//! give it back with `fallocate(PUNCH_HOLE)`: by default per 512-slot cluster once the cluster
//! holds no block (one 2 MiB punch instead of one punch of several µs per block on ext4), or
//! per block ([`DiscardPolicy`]).
//!
//! # Concurrency and lock order
//!
//! There are no locks. Allocation uses atomics on per-cluster bitmaps; the checksum entries
//! are atomics; `pread`/`pwrite` need no shared file position. The one wait: a per-cluster
//! block count carries a "punching" bit while that cluster's hole is punched, and a writer
//! entering the cluster yields until the punch is done, so a punch never erases a block written
//! after it was decided. As in the kernel, where the swap cache's folio lock serialises I/O on
//! one swap entry, the caller must not write a slot while another thread reads or writes the
//! *same* slot (doing so can make the read report `Corrupt`, never return wrong data).
//! Distinct slots are fully concurrent.
//!
//! # Errors
//!
//! Every failed I/O is counted in [`BackingStats`](crate::BackingStats) and leaves the file usable: a block whose
//! write failed reads back as [`Error::NotWritten`], other blocks are unaffected. Data from a
//! failed read is never handed out (the buffer is zeroed).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use rustix::fs::FallocateFlags;
use rustix::io::Errno;

use crate::alloc::{self, CLUSTER_SLOTS};
use crate::error::{Error, HeaderError, Op, Result};
use crate::fault::{FaultInjector, ReadFault, WriteFault};
use crate::stats::{BackingStats, Counters};
use crate::{BackingStore, SwapSlot, PAGE_SIZE};

/// Largest slot count of one area (4 TiB of swap; the in-memory checksum table is 8 B per slot).
pub const MAX_SLOTS: u64 = 1 << 30;

const MAGIC: &[u8; 8] = b"UZSWAPF\0";
const VERSION: u32 = 1;
/// Table entry flag: the slot holds a block; the low 32 bits are its crc32c.
const WRITTEN: u64 = 1 << 32;
const ENTRY_SIZE: u64 = 8;
/// Flag in a cluster's block count (`cluster_counts`): the cluster's hole is being punched;
/// writers into it wait.
const PUNCHING: u32 = 1 << 31;
/// An empty cluster is punched only once this many blocks were given up in it since its last
/// punch: a `fallocate` costs several µs on ext4 even over holes, and a cluster that one block
/// keeps entering and leaving would otherwise pay it every time. At most this many blocks
/// (256 KiB) per cluster stay allocated on disk unpunched.
const PUNCH_MIN_BLOCKS: u32 = 64;

/// When the disk space of discarded blocks goes back to the filesystem.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum DiscardPolicy {
    /// Once every block of a 512-slot cluster is gone (discarded or freed), and at least 64
    /// blocks left it since its last punch, the whole 2 MiB range is punched in one
    /// `fallocate`, as the kernel discards whole free swap clusters.
    /// Punching one 4 KiB block on ext4 costs several µs (journal, extent tree); a discard here
    /// costs one counter decrement and the checksum-table update.
    #[default]
    Cluster,
    /// Every [`SwapFile::discard`] punches its block at once (space back immediately).
    Block,
}

/// One swap area backed by a real file. `Send + Sync`; share it by reference or `Arc`.
pub struct SwapFile {
    /// The file: open from the start, or made at its first use
    /// ([`SwapFile::create_temp_on_first_write`]).
    file: OnceLock<File>,
    /// Where that file is made, for a file not made yet.
    lazy_dir: Option<PathBuf>,
    /// Serialises the making of a lazy file.
    lazy_lock: Mutex<()>,
    /// The lowest descriptor number the file's descriptors take (0: wherever the kernel puts
    /// them); see [`SwapFile::set_fd_floor`].
    fd_floor: i32,
    area: u32,
    capacity: u64,
    table_offset: u64,
    data_offset: u64,
    slots: alloc::SlotMap,
    /// In-memory copy of the checksum table (same encoding as on disk).
    table: Box<[AtomicU64]>,
    counters: Counters,
    /// Cleared the first time the filesystem refuses `FALLOC_FL_PUNCH_HOLE`.
    punch_hole: AtomicBool,
    /// Clusters of the area (`CLUSTER_SLOTS` slots each).
    nr_clusters: usize,
    /// Per cluster, made at the first block written: `[..nr_clusters]` the blocks written in
    /// it, plus [`PUNCHING`] while its hole is being punched; `[nr_clusters..]` the blocks given
    /// up since its last punch (the space a punch would return). Made then, not with the
    /// area: 64 KiB for 4 Mi slots, which glibc's `calloc` clears page by page (16 page faults
    /// at every process's start under `uzswap run`, most of which never write a block).
    cluster_counts: OnceLock<Box<[AtomicU32]>>,
    /// [`DiscardPolicy`] as a u8.
    discard_policy: AtomicU8,
    injector: FaultInjector,
    /// With [`SwapFile::enable_direct_io`]: a second descriptor of the same file opened with
    /// O_DIRECT, used for data blocks (the header and the checksum table stay buffered).
    direct: Option<File>,
}

/// A fork child's copy of a swap file, between [`SwapFile::private_copy`] and
/// [`SwapFile::switch_to_copy`].
#[derive(Debug, Default)]
pub struct PrivateCopy {
    /// The new file (None: it could not be made).
    file: Option<File>,
    /// Offsets of the written blocks that are not in it.
    failed: Vec<u64>,
    /// False for a file not made yet: nothing to switch.
    made: bool,
}

impl PrivateCopy {
    /// Offsets of the written blocks the copy lacks (the file system was full or failed):
    /// read them before the switch, forget their slots after it.
    pub fn failed(&self) -> &[u64] {
        &self.failed
    }
}

/// A block buffer aligned for O_DIRECT (any logical block size up to the page size).
#[repr(C, align(4096))]
struct AlignedBlock([u8; PAGE_SIZE]);

impl AlignedBlock {
    fn new() -> Box<AlignedBlock> {
        Box::new(AlignedBlock([0; PAGE_SIZE]))
    }
}

impl std::fmt::Debug for SwapFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapFile")
            .field("area", &self.area)
            .field("capacity", &self.capacity)
            .field("slots_in_use", &self.slots_in_use())
            .finish_non_exhaustive()
    }
}

/// Checksum of a block: crc32c over (area, offset, content), so a block stored at the wrong
/// place does not verify.
#[inline]
pub fn block_checksum(slot: SwapSlot, page: &[u8]) -> u32 {
    let mut seed = [0u8; 12];
    seed[..4].copy_from_slice(&slot.area.to_le_bytes());
    seed[4..].copy_from_slice(&slot.offset.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&seed), page)
}

fn table_pages(slots: u64) -> u64 {
    (slots * ENTRY_SIZE).div_ceil(PAGE_SIZE as u64)
}

/// Reads exactly `buf.len()` bytes at `pos`, retrying EINTR; returns the bytes read before EOF.
fn pread_full(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn encode_header(area: u32, slots: u64, table_offset: u64, data_offset: u64) -> Vec<u8> {
    let mut h = vec![0u8; PAGE_SIZE];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&area.to_le_bytes());
    h[16..24].copy_from_slice(&slots.to_le_bytes());
    h[24..32].copy_from_slice(&table_offset.to_le_bytes());
    h[32..40].copy_from_slice(&data_offset.to_le_bytes());
    h[40..44].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
    let crc = crc32c::crc32c(&h[0..44]);
    h[44..48].copy_from_slice(&crc.to_le_bytes());
    h
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// `f` on a close-on-exec descriptor at or above `floor` (0: `f` as it is); `f` itself where
/// no number up there is free.
#[allow(unsafe_code)]
fn raise_fd(f: File, floor: i32) -> File {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    if floor <= 0 || f.as_raw_fd() >= floor {
        return f;
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor `f` owns returns a new descriptor or -1; the new
    // one is owned by the returned File alone, and `f` closes its own on drop.
    unsafe {
        let high = libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor);
        if high < 0 {
            return f;
        }
        File::from_raw_fd(high)
    }
}

/// Copies `len` bytes at `pos` of `from` to the same place in `to`: `copy_file_range` where the
/// kernel takes it, else through a buffer.
fn copy_range(from: &File, to: &File, pos: u64, len: u64) -> io::Result<()> {
    let (mut src, mut dst) = (pos, pos);
    let end = pos + len;
    while src < end {
        let want = (end - src) as usize;
        match rustix::fs::copy_file_range(from, Some(&mut src), to, Some(&mut dst), want) {
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::INTR) => {}
            Err(Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let mut buf = vec![0u8; 64 * PAGE_SIZE];
    while src < end {
        let n = buf.len().min((end - src) as usize);
        from.read_exact_at(&mut buf[..n], src)?;
        to.write_all_at(&buf[..n], src)?;
        src += n as u64;
    }
    Ok(())
}

/// Opens an unnamed file in `dir` (O_TMPFILE); where the filesystem lacks it, a named file
/// that is unlinked at once. Either way the blocks vanish with the last descriptor.
fn open_temp(dir: &Path) -> io::Result<File> {
    let tmp = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    match tmp {
        Ok(f) => Ok(f),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
            ) =>
        {
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let name = dir.join(format!(
                ".uzswap-swap-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&name)?;
            std::fs::remove_file(&name)?;
            Ok(f)
        }
        Err(e) => Err(e),
    }
}

/// Atomic integers, for which all-zero bytes are the value 0 (the same layout as the integer).
pub(crate) trait ZeroIsValid {}
impl ZeroIsValid for AtomicU64 {}
impl ZeroIsValid for AtomicU32 {}

/// An all-zero table of `n` atomics, from `alloc_zeroed`: the OS hands out zero pages lazily,
/// so a large, mostly unused area costs no resident memory (nor a page fault per page of it
/// at creation), and a request the allocator cannot satisfy is an error instead of an abort.
// The crate's one unsafe function: std has no safe way to get zeroed atomics lazily (the
// checksum table, the cluster counters and the slot map's records come from it).
#[allow(unsafe_code)]
pub(crate) fn zeroed_table<T: ZeroIsValid>(n: usize) -> Option<Box<[T]>> {
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    if layout.size() == 0 {
        return Some(Box::new([]));
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a fresh allocation of exactly `layout` (n Ts, the global allocator, as
    // Box<[T]> requires); all-zero bytes are a valid T (`ZeroIsValid`).
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)) })
}

impl SwapFile {
    /// Creates (or truncates) a swap file at `path` with `slots` slots: header page, checksum
    /// table, and a sparse data area.
    pub fn create(path: &Path, area: u32, slots: u64) -> Result<SwapFile> {
        Self::check_capacity(slots)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::from_io(Op::Create, None, e))?;
        Self::init(file, area, slots)
    }

    /// Creates an anonymous swap file in directory `dir` (O_TMPFILE): same layout, gone when the
    /// `SwapFile` is dropped or the process exits.
    pub fn create_temp(dir: &Path, area: u32, slots: u64) -> Result<SwapFile> {
        Self::check_capacity(slots)?;
        let file = open_temp(dir).map_err(|e| Error::from_io(Op::Create, None, e))?;
        Self::init(file, area, slots)
    }

    /// As [`SwapFile::create_temp`], but the file is made at the first write to it (or the
    /// first call that needs it), not now: an area most of whose slots are never written
    /// (every process of a `uzswap run` tree has one, and most processes write nothing back)
    /// then costs no file, no inode to create and delete, and no header write. An error making
    /// it then fails that write as an I/O error would (counted; the page stays where it was).
    pub fn create_temp_on_first_write(dir: &Path, area: u32, slots: u64) -> Result<SwapFile> {
        Self::check_capacity(slots)?;
        let (table_offset, data_offset) = Self::layout(slots);
        let mut f = Self::build(None, area, slots, table_offset, data_offset)?;
        f.lazy_dir = Some(dir.to_path_buf());
        Ok(f)
    }

    /// Reopens a file made by [`SwapFile::create`]: every slot that holds a block comes back
    /// allocated, with its checksum, so its content can be read (and verified) again.
    pub fn open(path: &Path) -> Result<SwapFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::from_io(Op::Create, None, e))?;
        let mut h = vec![0u8; PAGE_SIZE];
        let n = pread_full(&file, &mut h, 0).map_err(|e| Error::from_io(Op::Metadata, None, e))?;
        if n < PAGE_SIZE {
            return Err(Error::BadHeader(HeaderError::TooShort(n)));
        }
        if &h[0..8] != MAGIC {
            return Err(Error::BadHeader(HeaderError::BadMagic));
        }
        if le_u32(&h[44..48]) != crc32c::crc32c(&h[0..44]) {
            return Err(Error::BadHeader(HeaderError::ChecksumMismatch));
        }
        let version = le_u32(&h[8..12]);
        if version != VERSION {
            return Err(Error::BadHeader(HeaderError::UnsupportedVersion(version)));
        }
        let area = le_u32(&h[12..16]);
        let slots = le_u64(&h[16..24]);
        let table_offset = le_u64(&h[24..32]);
        let data_offset = le_u64(&h[32..40]);
        if le_u32(&h[40..44]) as usize != PAGE_SIZE
            || slots == 0
            || slots > MAX_SLOTS
            || table_offset != PAGE_SIZE as u64
            || data_offset != PAGE_SIZE as u64 * (1 + table_pages(slots))
        {
            return Err(Error::BadHeader(HeaderError::BadGeometry));
        }
        let mut raw = vec![0u8; (slots * ENTRY_SIZE) as usize];
        let n = pread_full(&file, &mut raw, table_offset)
            .map_err(|e| Error::from_io(Op::Metadata, None, e))?;
        if n < raw.len() {
            return Err(Error::BadHeader(HeaderError::TableTruncated));
        }
        let sf = Self::build(Some(file), area, slots, table_offset, data_offset)?;
        for (i, e) in raw.chunks_exact(ENTRY_SIZE as usize).enumerate() {
            let v = le_u64(e);
            if v & WRITTEN != 0 {
                sf.table[i].store(v, Ordering::Relaxed);
                sf.slots.claim(i as u64);
                sf.counters.blocks_stored.inc();
                sf.cluster_counts()?[i / CLUSTER_SLOTS].fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(sf)
    }

    fn check_capacity(slots: u64) -> Result<()> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(Error::BadCapacity(slots));
        }
        Ok(())
    }

    fn init(file: File, area: u32, slots: u64) -> Result<SwapFile> {
        let (table_offset, data_offset) = Self::layout(slots);
        Self::format(&file, area, slots).map_err(|(op, e)| Error::from_io(op, None, e))?;
        Self::build(Some(file), area, slots, table_offset, data_offset)
    }

    /// The header's and the data's offsets for `slots` slots.
    fn layout(slots: u64) -> (u64, u64) {
        let table_offset = PAGE_SIZE as u64;
        (
            table_offset,
            table_offset + table_pages(slots) * PAGE_SIZE as u64,
        )
    }

    /// Sizes a new file for `slots` slots and writes its header.
    fn format(file: &File, area: u32, slots: u64) -> std::result::Result<(), (Op, io::Error)> {
        let (table_offset, data_offset) = Self::layout(slots);
        // Under a file-size limit (`ulimit -f`, which binds this file too) the file is sized
        // only up to it: beyond, each write fails on its own (EFBIG) and the slots below work.
        // Sized whole, the file could not be made at all.
        let limit = if cfg!(miri) {
            None
        } else {
            rustix::process::getrlimit(rustix::process::Resource::Fsize).current
        };
        let len = (data_offset + slots * PAGE_SIZE as u64).min(limit.unwrap_or(u64::MAX));
        file.set_len(len).map_err(|e| (Op::Create, e))?;
        file.write_all_at(&encode_header(area, slots, table_offset, data_offset), 0)
            .map_err(|e| (Op::Metadata, e))
    }

    /// Makes the file now if it is made on first write ([`SwapFile::create_temp_on_first_write`]):
    /// for a process about to give up the right to create files in its directory (a
    /// privilege drop), which keeps the open file.
    pub fn create_now(&self) -> Result<()> {
        self.file()
            .map(|_| ())
            .map_err(|e| Error::from_io(Op::Create, None, e))
    }

    /// The file, made now if it is made on first use.
    fn file(&self) -> io::Result<&File> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let Some(dir) = &self.lazy_dir else {
            return Err(io::Error::other("swap file not open"));
        };
        let _g = self
            .lazy_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let f = raise_fd(open_temp(dir)?, self.fd_floor);
        Self::format(&f, self.area, self.capacity).map_err(|(_, e)| e)?;
        Ok(self.file.get_or_init(|| f))
    }

    /// Keeps the file's descriptors at or above `floor` from now on: those open now move there,
    /// and a file made later (or reopened for O_DIRECT) goes there. For a library inside another
    /// program (`uzswap run`'s pager): its descriptors then never take the numbers the program
    /// expects its own `open` calls to return, nor the ones it `dup2`s onto. Where no number up
    /// there is free a descriptor stays where it is.
    pub fn set_fd_floor(&mut self, floor: i32) {
        self.fd_floor = floor;
        if let Some(f) = self.file.take() {
            let _ = self.file.set(raise_fd(f, floor));
        }
        if let Some(f) = self.direct.take() {
            self.direct = Some(raise_fd(f, floor));
        }
    }

    /// The file's descriptors open now: the buffered one, and the O_DIRECT one if any.
    pub fn raw_fds(&self) -> [Option<std::os::fd::RawFd>; 2] {
        use std::os::fd::AsRawFd as _;
        [
            self.file.get().map(|f| f.as_raw_fd()),
            self.direct.as_ref().map(|f| f.as_raw_fd()),
        ]
    }

    /// In the child of a `fork`, first step: a new unnamed file in `dir` holding the same
    /// blocks at the same offsets, for [`SwapFile::switch_to_copy`]. Until the switch both
    /// processes' descriptors name one open file, while the slot map and checksum table are
    /// each process's copy: without a file of its own, the child and the parent would hand out
    /// the same slots of one file.
    ///
    /// Only the written blocks are copied (`copy_file_range`, which the kernel may do without
    /// a pass through user space, or reflink), with the checksum-table pages that list them.
    /// Blocks that could not be copied (a full or failing file system; every one if no file
    /// could be made) are listed in [`PrivateCopy::failed`]: the caller reads them from this
    /// file before the switch and forgets their slots after it. A file not made yet (made on
    /// first write) has nothing to copy: the child makes its own when it first writes. The
    /// caller must not use this file from another thread meanwhile, and the parent must not
    /// change its blocks until the switch.
    pub fn private_copy(&self, dir: &Path) -> PrivateCopy {
        let Some(old) = self.file.get() else {
            return PrivateCopy::default();
        };
        let written = |i: usize| self.table[i].load(Ordering::Acquire) & WRITTEN != 0;
        let clusters: Vec<usize> = match self.cluster_counts.get() {
            Some(counts) => (0..self.nr_clusters)
                .filter(|&ci| counts[ci].load(Ordering::Acquire) & !PUNCHING != 0)
                .collect(),
            None => Vec::new(),
        };
        // The header only matters to a file reopened by name, which this unnamed one never is:
        // a full file system that refuses it leaves a file later writes may still fill.
        let new = open_temp(dir).inspect(|f| {
            let _ = Self::format(f, self.area, self.capacity);
        });
        let mut failed = Vec::new();
        for ci in clusters {
            let first = ci * CLUSTER_SLOTS;
            let end = (first + CLUSTER_SLOTS).min(self.capacity as usize);
            let copied = match &new {
                Ok(f) => self.copy_cluster(old, f, ci),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            };
            if copied.is_err() {
                failed.extend((first..end).filter(|&i| written(i)).map(|i| i as u64));
            }
        }
        PrivateCopy {
            file: new.ok(),
            failed,
            made: true,
        }
    }

    /// In the child of a `fork`, second step: puts the copy under the descriptors the inherited
    /// file had (so every copy of them, the O_DIRECT one too, now names the child's file). With
    /// no file made, a read-only `/dev/null` takes their place: every later write fails (an
    /// I/O error, counted; the page stays where it was) and nothing reaches the parent's file.
    pub fn switch_to_copy(&self, copy: PrivateCopy) -> Result<()> {
        use std::os::fd::AsRawFd as _;
        let Some(old) = self.file.get() else {
            return Ok(());
        };
        if !copy.made {
            return Ok(());
        }
        let new = match copy.file {
            Some(f) => f,
            None => File::open("/dev/null").map_err(|e| Error::from_io(Op::Create, None, e))?,
        };
        // O_DIRECT is a property of the open file: that descriptor is opened again on the new
        // file (or is /dev/null too).
        let regular = new.metadata().is_ok_and(|m| m.is_file());
        let direct = match &self.direct {
            Some(d) => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(regular)
                    .custom_flags(if regular { libc::O_DIRECT } else { 0 })
                    .open(format!("/proc/self/fd/{}", new.as_raw_fd()))
                    .map_err(|source| Error::DirectIoRefused { source })?;
                Some((f, d.as_raw_fd()))
            }
            None => None,
        };
        for (from, onto) in
            std::iter::once((&new, old.as_raw_fd())).chain(direct.as_ref().map(|(f, d)| (f, *d)))
        {
            // SAFETY: dup3 onto a descriptor this object owns (and keeps owning): the number
            // now names the new file; `from` stays owned by its File and closes on drop.
            #[allow(unsafe_code)]
            if unsafe { libc::dup3(from.as_raw_fd(), onto, libc::O_CLOEXEC) } < 0 {
                return Err(Error::from_io(Op::Create, None, io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// [`SwapFile::private_copy`] then [`SwapFile::switch_to_copy`], for a caller that can
    /// lose no block: an error, and no switch, if any block could not be copied.
    pub fn take_private_copy(&self, dir: &Path) -> Result<()> {
        let copy = self.private_copy(dir);
        if let Some(&off) = copy.failed.first() {
            return Err(Error::from_io(
                Op::Write,
                Some(SwapSlot::new(self.area, off)),
                io::Error::other(format!("{} blocks not copied", copy.failed.len())),
            ));
        }
        self.switch_to_copy(copy)
    }

    /// Copies cluster `ci`'s checksum-table page (its 512 entries, from memory) and its written
    /// blocks from `old` to `new`, runs of adjacent blocks at once.
    fn copy_cluster(&self, old: &File, new: &File, ci: usize) -> io::Result<()> {
        let first = ci * CLUSTER_SLOTS;
        let end = (first + CLUSTER_SLOTS).min(self.capacity as usize);
        let mut entries = Vec::with_capacity(CLUSTER_SLOTS * ENTRY_SIZE as usize);
        for e in &self.table[first..end] {
            entries.extend_from_slice(&e.load(Ordering::Acquire).to_le_bytes());
        }
        new.write_all_at(&entries, self.table_offset + first as u64 * ENTRY_SIZE)?;
        let written = |i: usize| self.table[i].load(Ordering::Acquire) & WRITTEN != 0;
        let mut i = first;
        while i < end {
            if !written(i) {
                i += 1;
                continue;
            }
            let run = (i..end).take_while(|&j| written(j)).count();
            copy_range(old, new, self.block_pos(i as u64), (run * PAGE_SIZE) as u64)?;
            i += run;
        }
        Ok(())
    }

    fn build(
        file: Option<File>,
        area: u32,
        capacity: u64,
        table_offset: u64,
        data_offset: u64,
    ) -> Result<SwapFile> {
        let clusters = capacity.div_ceil(CLUSTER_SLOTS as u64) as usize;
        Ok(SwapFile {
            file: file.map_or_else(OnceLock::new, OnceLock::from),
            lazy_dir: None,
            lazy_lock: Mutex::new(()),
            fd_floor: 0,
            area,
            capacity,
            table_offset,
            data_offset,
            slots: alloc::SlotMap::new(capacity),
            table: zeroed_table(capacity as usize).ok_or(Error::OutOfMemory(capacity))?,
            counters: Counters::default(),
            punch_hole: AtomicBool::new(true),
            nr_clusters: clusters,
            cluster_counts: OnceLock::new(),
            discard_policy: AtomicU8::new(DiscardPolicy::default() as u8),
            injector: FaultInjector::new(),
            direct: None,
        })
    }

    /// Move data blocks to O_DIRECT I/O from now on (the page cache is bypassed, as the
    /// kernel's swap I/O bypasses it), through aligned bounce buffers. The header and the
    /// checksum table stay buffered. [`Error::DirectIoRefused`] where the file system refuses
    /// O_DIRECT, at the open or at a first aligned read (the file stays usable, buffered).
    pub fn enable_direct_io(&mut self) -> Result<()> {
        use std::os::fd::AsRawFd as _;
        // Reopening through /proc works for O_TMPFILE files too (they have no name).
        let path = format!(
            "/proc/self/fd/{}",
            self.file()
                .map_err(|source| Error::DirectIoRefused { source })?
                .as_raw_fd()
        );
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|source| Error::DirectIoRefused { source })?;
        let f = raise_fd(f, self.fd_floor);
        let mut probe = AlignedBlock::new();
        pread_full(&f, &mut probe.0, self.data_offset)
            .map_err(|source| Error::DirectIoRefused { source })?;
        self.direct = Some(f);
        Ok(())
    }

    /// True once [`SwapFile::enable_direct_io`] succeeded.
    pub fn direct_io(&self) -> bool {
        self.direct.is_some()
    }

    fn write_block(&self, page: &[u8], pos: u64) -> io::Result<()> {
        match &self.direct {
            None => self.file()?.write_all_at(page, pos),
            Some(f) => {
                let mut b = AlignedBlock::new();
                b.0.copy_from_slice(page);
                f.write_all_at(&b.0, pos)
            }
        }
    }

    fn read_block(&self, page: &mut [u8], pos: u64) -> io::Result<usize> {
        match &self.direct {
            None => pread_full(self.file()?, page, pos),
            Some(f) => {
                let mut b = AlignedBlock::new();
                let n = pread_full(f, &mut b.0, pos)?;
                page[..n].copy_from_slice(&b.0[..n]);
                Ok(n)
            }
        }
    }

    /// The area number (the swap type) of every slot of this file.
    pub fn area(&self) -> u32 {
        self.area
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slots allocated right now.
    pub fn slots_in_use(&self) -> u64 {
        self.slots.in_use()
    }

    /// Allocates a free slot (lock-free, per-cluster); [`Error::Full`] when none is left.
    pub fn alloc_slot(&self) -> Result<SwapSlot> {
        match self.slots.alloc() {
            Some(offset) => Ok(SwapSlot::new(self.area, offset)),
            None => Err(Error::Full),
        }
    }

    /// Frees an allocated slot and forgets its block (reads return `NotWritten` until it is
    /// allocated and written again). Under [`DiscardPolicy::Cluster`] the disk space goes back
    /// with the whole cluster once it holds no block; otherwise the next write reuses it.
    pub fn free_slot(&self, slot: SwapSlot) -> Result<()> {
        let off = self.check_slot(slot)?;
        if !self.slots.is_allocated(off) {
            return Err(Error::NotAllocated(slot));
        }
        // Forget the block before the slot can be handed out again.
        self.forget(slot, off);
        if !self.slots.free(off) {
            return Err(Error::NotAllocated(slot));
        }
        Ok(())
    }

    #[inline]
    fn check_slot(&self, slot: SwapSlot) -> Result<u64> {
        if slot.area != self.area || slot.offset >= self.capacity {
            return Err(Error::OutOfRange {
                slot,
                area: self.area,
                capacity: self.capacity,
            });
        }
        Ok(slot.offset)
    }

    #[inline]
    fn block_pos(&self, off: u64) -> u64 {
        self.data_offset + off * PAGE_SIZE as u64
    }

    /// Clears the checksum entry in memory and on disk; true if the slot held a block.
    fn forget(&self, slot: SwapSlot, off: u64) -> bool {
        let old = self.table[off as usize].swap(0, Ordering::AcqRel);
        if old & WRITTEN == 0 {
            return false;
        }
        self.counters.blocks_stored.dec();
        if let Err(e) = self.write_entry(off, 0) {
            // The in-memory table is authoritative while the file is open; a stale on-disk entry
            // only matters to `open`, where the block would then fail its checksum or be reused.
            self.counters
                .count_write_error(&Error::from_io(Op::Metadata, Some(slot), e));
        }
        self.release_block(off);
        true
    }

    /// The per-cluster counts (see `cluster_counts`), made at the first call.
    fn cluster_counts(&self) -> Result<&[AtomicU32]> {
        if let Some(c) = self.cluster_counts.get() {
            return Ok(c);
        }
        let made = zeroed_table(2 * self.nr_clusters).ok_or(Error::OutOfMemory(self.capacity))?;
        Ok(self.cluster_counts.get_or_init(|| made))
    }

    /// Counts a block about to be written into its cluster, waiting while the cluster's hole
    /// is being punched (so a punch never erases a block written after it was decided).
    fn acquire_block(counts: &[AtomicU32], off: u64) {
        let c = &counts[off as usize / CLUSTER_SLOTS];
        let mut cur = c.load(Ordering::Acquire);
        loop {
            if cur & PUNCHING != 0 {
                std::thread::yield_now();
                cur = c.load(Ordering::Acquire);
                continue;
            }
            match c.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Uncounts a block that is gone; under [`DiscardPolicy::Cluster`] the last one out punches
    /// the cluster's whole range.
    fn release_block(&self, off: u64) {
        // A block was counted in, so the counts exist.
        let Some(counts) = self.cluster_counts.get() else {
            debug_assert!(false, "a block released before any was written");
            return;
        };
        let ci = off as usize / CLUSTER_SLOTS;
        let c = &counts[ci];
        let garbage = counts[self.nr_clusters + ci].fetch_add(1, Ordering::Relaxed) + 1;
        let prev = c.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(prev & !PUNCHING > 0, "cluster {ci} block count underflow");
        if prev != 1
            || garbage < PUNCH_MIN_BLOCKS
            || self.discard_policy.load(Ordering::Relaxed) != DiscardPolicy::Cluster as u8
            || !self.punch_hole.load(Ordering::Relaxed)
        {
            return;
        }
        // Empty now: claim the punch unless a writer got in first.
        if c.compare_exchange(0, PUNCHING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        counts[self.nr_clusters + ci].store(0, Ordering::Relaxed);
        let first = (ci * CLUSTER_SLOTS) as u64;
        let n = (CLUSTER_SLOTS as u64).min(self.capacity - first);
        self.punch(first, n);
        c.fetch_and(!PUNCHING, Ordering::AcqRel);
    }

    /// Punches the blocks `[first, first + n)`; remembers if the filesystem cannot.
    fn punch(&self, first: u64, n: u64) {
        // No file yet: nothing written, nothing to punch.
        let Some(file) = self.file.get() else {
            return;
        };
        let rc = rustix::fs::fallocate(
            file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            self.block_pos(first),
            n * PAGE_SIZE as u64,
        );
        if let Err(e) = rc {
            if e == Errno::OPNOTSUPP || e == Errno::NOSYS {
                self.punch_hole.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Chooses when discarded blocks give their space back (default [`DiscardPolicy::Cluster`]).
    pub fn set_discard_policy(&self, policy: DiscardPolicy) {
        self.discard_policy.store(policy as u8, Ordering::Relaxed);
    }

    fn write_entry(&self, off: u64, v: u64) -> io::Result<()> {
        self.file()?
            .write_all_at(&v.to_le_bytes(), self.table_offset + off * ENTRY_SIZE)
    }

    /// Writes one page into an allocated slot, with its checksum. On failure the slot holds no
    /// block (reads give `NotWritten`); other slots are untouched.
    pub fn write_page(&self, slot: SwapSlot, page: &[u8]) -> Result<()> {
        let off = self.check_slot(slot)?;
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        if !self.slots.is_allocated(off) {
            return Err(Error::NotAllocated(slot));
        }
        let counts = self.cluster_counts()?;
        let crc = block_checksum(slot, page);
        // Until the new block and its entry are both on disk the slot holds nothing valid.
        if self.table[off as usize].swap(0, Ordering::AcqRel) & WRITTEN != 0 {
            self.counters.blocks_stored.dec();
        } else {
            Self::acquire_block(counts, off);
        }
        let res = match self.injector.on_write() {
            WriteFault::None => self.write_block(page, self.block_pos(off)),
            WriteFault::Eio => Err(io::Error::from_raw_os_error(libc::EIO)),
            WriteFault::NoSpace => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            WriteFault::Corrupt => {
                let mut bad = page.to_vec();
                bad[off as usize % PAGE_SIZE] ^= 0x01;
                self.file()
                    .and_then(|f| f.write_all_at(&bad, self.block_pos(off)))
            }
            WriteFault::Misdirect => self
                .file()
                .and_then(|f| f.write_all_at(page, self.block_pos((off + 1) % self.capacity))),
        };
        let entry = WRITTEN | crc as u64;
        let res = res
            .map_err(|e| Error::from_io(Op::Write, Some(slot), e))
            .and_then(|()| {
                self.write_entry(off, entry)
                    .map_err(|e| Error::from_io(Op::Metadata, Some(slot), e))
            });
        match res {
            Ok(()) => {
                self.table[off as usize].store(entry, Ordering::Release);
                self.counters.writes.inc();
                self.counters.blocks_stored.inc();
                Ok(())
            }
            Err(e) => {
                self.counters.count_write_error(&e);
                // The slot holds nothing now (whatever reached the file is not trusted).
                self.release_block(off);
                Err(e)
            }
        }
    }

    /// Reads the block of a slot into `page` and verifies it. `Error::NotWritten` if the slot
    /// holds no block, `Error::Corrupt` if the content does not match its checksum. On any
    /// error `page` is zeroed: wrong data is never handed out.
    pub fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> Result<()> {
        let off = self.check_slot(slot)?;
        if page.len() != PAGE_SIZE {
            return Err(Error::BadPageLength(page.len()));
        }
        let res = self.read_verified(slot, off, page);
        if res.is_err() {
            page.fill(0);
        }
        res
    }

    fn read_verified(&self, slot: SwapSlot, off: u64, page: &mut [u8]) -> Result<()> {
        let entry = self.table[off as usize].load(Ordering::Acquire);
        if entry & WRITTEN == 0 {
            self.counters.not_written_reads.inc();
            return Err(Error::NotWritten(slot));
        }
        let got = match self.injector.on_read() {
            ReadFault::None => self.read_block(page, self.block_pos(off)),
            ReadFault::Eio => Err(io::Error::from_raw_os_error(libc::EIO)),
            ReadFault::Short => Ok(PAGE_SIZE / 2),
        };
        let got = got.map_err(|e| {
            self.counters.read_errors.inc();
            Error::from_io(Op::Read, Some(slot), e)
        })?;
        if got < PAGE_SIZE {
            self.counters.read_errors.inc();
            self.counters.short_reads.inc();
            return Err(Error::ShortRead {
                slot,
                got,
                want: PAGE_SIZE,
            });
        }
        let expected = entry as u32;
        let actual = block_checksum(slot, page);
        if actual != expected {
            self.counters.checksum_errors.inc();
            return Err(Error::Corrupt {
                slot,
                expected,
                actual,
            });
        }
        self.counters.reads.inc();
        Ok(())
    }

    /// True if the slot currently holds a written block.
    pub fn is_written(&self, slot: SwapSlot) -> bool {
        match self.check_slot(slot) {
            Ok(off) => self.table[off as usize].load(Ordering::Acquire) & WRITTEN != 0,
            Err(_) => false,
        }
    }

    /// Forgets the block of a slot (reads give `NotWritten`) and gives its disk space back
    /// with `fallocate(PUNCH_HOLE | KEEP_SIZE)` where the filesystem supports it: at once under
    /// [`DiscardPolicy::Block`], with its whole cluster once that holds no block under
    /// [`DiscardPolicy::Cluster`] (the default). The slot stays allocated. Invalid slots and
    /// slots without a block are ignored.
    pub fn discard(&self, slot: SwapSlot) {
        let Ok(off) = self.check_slot(slot) else {
            return;
        };
        if !self.forget(slot, off) {
            return;
        }
        self.counters.discards.inc();
        if self.discard_policy.load(Ordering::Relaxed) == DiscardPolicy::Block as u8
            && self.punch_hole.load(Ordering::Relaxed)
        {
            self.punch(off, 1);
        }
    }

    /// Flushes blocks and checksum table to stable storage (`fdatasync`).
    pub fn sync(&self) -> Result<()> {
        // No file yet: nothing to flush.
        let Some(file) = self.file.get() else {
            return Ok(());
        };
        file.sync_data()
            .map_err(|e| Error::from_io(Op::Metadata, None, e))
    }

    /// Counters.
    pub fn stats(&self) -> BackingStats {
        self.counters
            .snapshot(self.capacity, self.slots.in_use(), self.injector.injected())
    }

    #[cfg(any(test, feature = "test-hooks"))]
    /// The fault injector of this file (for tests of the layers above; cargo feature
    /// `test-hooks`).
    pub fn fault_injector(&self) -> &FaultInjector {
        &self.injector
    }

    #[cfg(any(test, feature = "test-hooks"))]
    /// Flips one bit of the block stored for slot `offset`, directly in the file (the checksum
    /// table is not touched), as silent media corruption would. Counted as an injected fault (cargo feature `test-hooks`).
    pub fn corrupt_block(&self, offset: u64, byte: usize) -> io::Result<()> {
        if offset >= self.capacity || byte >= PAGE_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "slot or byte out of range",
            ));
        }
        let pos = self.block_pos(offset) + byte as u64;
        let mut b = [0u8; 1];
        self.file()?.read_exact_at(&mut b, pos)?;
        b[0] ^= 0x10;
        self.file()?.write_all_at(&b, pos)?;
        self.injector.count_injected();
        Ok(())
    }

    /// Byte offset of a slot's block in the file (for tools and tests that inspect the file).
    pub fn block_file_offset(&self, slot: SwapSlot) -> Result<u64> {
        Ok(self.block_pos(self.check_slot(slot)?))
    }
}

impl BackingStore for SwapFile {
    fn area(&self) -> u32 {
        self.area
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn alloc_slot(&self) -> Result<SwapSlot> {
        SwapFile::alloc_slot(self)
    }
    fn free_slot(&self, slot: SwapSlot) -> Result<()> {
        SwapFile::free_slot(self, slot)
    }
    fn write_page(&self, slot: SwapSlot, page: &[u8]) -> Result<()> {
        SwapFile::write_page(self, slot, page)
    }
    fn read_page(&self, slot: SwapSlot, page: &mut [u8]) -> Result<()> {
        SwapFile::read_page(self, slot, page)
    }
    fn discard(&self, slot: SwapSlot) {
        SwapFile::discard(self, slot)
    }
    fn stats(&self) -> BackingStats {
        SwapFile::stats(self)
    }
}
