// SPDX-License-Identifier: MIT
//! zram block devices: claim an unused one, configure it, write and read pages with O_DIRECT
//! (so every page reaches the compressor and its allocation is visible in `mm_stat` at once),
//! and reset it.
//!
//! A claimed [`Zram`] is reset on Drop and the compression algorithm found at claim time is
//! written back, so the device is left exactly as it was (unused, disksize 0).

use crate::sysfs::{read_string, read_trimmed, read_u64, write_value};
use crate::{Error, Result};
use std::alloc::Layout;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Page size of zram's I/O and of this module's O_DIRECT buffers (re-exported from
/// `uzswap-types`).
pub use uzswap_types::PAGE_SIZE;

/// `/sys/block/zramN/mm_stat`: bytes except the page counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmStat {
    /// Uncompressed bytes stored (same-filled pages included).
    pub orig_data_size: u64,
    /// Compressed bytes stored (huge pages count 4096; same-filled pages 0).
    pub compr_data_size: u64,
    /// Bytes of memory held by the zsmalloc pool: `zs_get_total_pages() * PAGE_SIZE`.
    pub mem_used_total: u64,
    /// Pool limit in bytes (0 = none).
    pub mem_limit: u64,
    /// Peak of `mem_used_total`.
    pub mem_used_max: u64,
    /// Pages stored as one repeated machine word, without allocation.
    pub same_pages: u64,
    /// Pages freed by compaction, cumulative.
    pub pages_compacted: u64,
    /// Pages stored uncompressed (comp_len >= huge_class_size).
    pub huge_pages: u64,
    /// Huge pages stored since the device was set up (absent on old kernels: 0).
    pub huge_pages_since: u64,
}

impl MmStat {
    /// Field names in file order.
    pub const FIELDS: [&'static str; 9] = [
        "orig_data_size",
        "compr_data_size",
        "mem_used_total",
        "mem_limit",
        "mem_used_max",
        "same_pages",
        "pages_compacted",
        "huge_pages",
        "huge_pages_since",
    ];

    /// Parse the text of an `mm_stat` file: 9 numbers, or 8 on kernels before
    /// `huge_pages_since` existed.
    pub fn parse(text: &str) -> std::result::Result<MmStat, String> {
        let nums: Vec<u64> = text
            .split_whitespace()
            .map(|t| {
                t.parse::<u64>()
                    .map_err(|e| format!("field {t:?} is not an unsigned integer: {e}"))
            })
            .collect::<std::result::Result<_, _>>()?;
        if nums.len() != 8 && nums.len() != 9 {
            return Err(format!(
                "expected 8 or 9 fields, found {} in {text:?}",
                nums.len()
            ));
        }
        Ok(MmStat {
            orig_data_size: nums[0],
            compr_data_size: nums[1],
            mem_used_total: nums[2],
            mem_limit: nums[3],
            mem_used_max: nums[4],
            same_pages: nums[5],
            pages_compacted: nums[6],
            huge_pages: nums[7],
            huge_pages_since: nums.get(8).copied().unwrap_or(0),
        })
    }

    /// The values in [`MmStat::FIELDS`] order.
    pub fn values(&self) -> [u64; 9] {
        [
            self.orig_data_size,
            self.compr_data_size,
            self.mem_used_total,
            self.mem_limit,
            self.mem_used_max,
            self.same_pages,
            self.pages_compacted,
            self.huge_pages,
            self.huge_pages_since,
        ]
    }
}

/// Read `mm_stat` of zram device `dev` without claiming it (for reports).
pub fn read_mm_stat(dev: u32) -> Result<MmStat> {
    let path = sys_dir(dev).join("mm_stat");
    let text = read_string(&path)?;
    MmStat::parse(&text).map_err(|d| Error::parse(&path, d))
}

/// True when `/sys/block/zramN` exists.
pub fn device_exists(dev: u32) -> bool {
    sys_dir(dev).is_dir()
}

fn sys_dir(dev: u32) -> PathBuf {
    PathBuf::from(format!("/sys/block/zram{dev}"))
}

/// Parse a `comp_algorithm` file: `lzo [lzo-rle] lz4` -> (all names, the selected one).
pub fn parse_comp_algorithm(text: &str) -> (Vec<String>, Option<String>) {
    let mut all = Vec::new();
    let mut selected = None;
    for tok in text.split_whitespace() {
        if let Some(name) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            selected = Some(name.to_string());
            all.push(name.to_string());
        } else {
            all.push(tok.to_string());
        }
    }
    (all, selected)
}

/// A claimed zram device. Reset on Drop, with its original algorithm restored.
#[derive(Debug)]
pub struct Zram {
    dev: u32,
    sys: PathBuf,
    node: PathBuf,
    original_algorithm: Option<String>,
    file: Option<File>,
    disksize: u64,
}

impl Zram {
    /// Claim `/dev/zram{dev}` if nobody uses it: it must exist, have disksize 0, and not be a
    /// swap device or mounted. Needs root.
    pub fn claim_unused(dev: u32) -> Result<Zram> {
        let sys = sys_dir(dev);
        let node = PathBuf::from(format!("/dev/zram{dev}"));
        if !sys.is_dir() {
            return Err(Error::NotAvailable(format!(
                "zram{dev} is absent ({} missing): load the zram module or add a device via /sys/class/zram-control/hot_add",
                sys.display()
            )));
        }
        if !crate::is_root() {
            return Err(Error::PermissionDenied(format!(
                "claiming zram{dev} needs root"
            )));
        }
        let disksize = read_u64(&sys.join("disksize"))?;
        if disksize != 0 {
            return Err(Error::Busy(format!(
                "zram{dev} is in use: disksize is {disksize} (an unused device has disksize 0)"
            )));
        }
        let node_str = node.to_string_lossy().to_string();
        if let Some(line) = find_device_line(Path::new("/proc/swaps"), &node_str)? {
            return Err(Error::Busy(format!(
                "zram{dev} is an active swap device: {line}"
            )));
        }
        if let Some(line) = find_device_line(Path::new("/proc/mounts"), &node_str)? {
            return Err(Error::Busy(format!("zram{dev} is mounted: {line}")));
        }
        let holders = sys.join("holders");
        if let Ok(mut rd) = std::fs::read_dir(&holders) {
            if let Some(Ok(h)) = rd.next() {
                return Err(Error::Busy(format!(
                    "zram{dev} is held by {}",
                    h.file_name().to_string_lossy()
                )));
            }
        }
        // An exclusive open fails with EBUSY while anyone holds the device exclusively
        // (swapon, a mounted filesystem, device-mapper, another claimer's O_EXCL).
        match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(&node)
        {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(Error::Busy(format!(
                    "zram{dev} is opened exclusively by another user"
                )));
            }
            Err(e) => return Err(Error::io(&node, e)),
        }
        let (_, original_algorithm) =
            parse_comp_algorithm(&read_string(&sys.join("comp_algorithm"))?);
        Ok(Zram {
            dev,
            sys,
            node,
            original_algorithm,
            file: None,
            disksize: 0,
        })
    }

    /// Device number N of `/dev/zramN`.
    pub fn device(&self) -> u32 {
        self.dev
    }

    /// Algorithms this zram supports (the `comp_algorithm` list, selection marks removed).
    pub fn supported_algorithms(&self) -> Result<Vec<String>> {
        Ok(parse_comp_algorithm(&read_string(&self.sys.join("comp_algorithm"))?).0)
    }

    /// The algorithm selected right now.
    pub fn current_algorithm(&self) -> Result<String> {
        let path = self.sys.join("comp_algorithm");
        parse_comp_algorithm(&read_string(&path)?)
            .1
            .ok_or_else(|| Error::parse(&path, "no [selected] algorithm"))
    }

    /// Set the algorithm and the disk size (bytes, rounded up to pages), then open the device
    /// for O_DIRECT I/O. A device configured before is reset first.
    pub fn configure(&mut self, algorithm: &str, disksize_bytes: u64) -> Result<()> {
        if disksize_bytes == 0 {
            return Err(Error::InvalidArgument("zram disksize must be > 0".into()));
        }
        if self.disksize != 0 || read_u64(&self.sys.join("disksize"))? != 0 {
            self.reset()?;
        }
        let supported = self.supported_algorithms()?;
        if !supported.iter().any(|a| a == algorithm) {
            return Err(Error::NotAvailable(format!(
                "zram{} does not support algorithm {algorithm:?} (supported: {})",
                self.dev,
                supported.join(" ")
            )));
        }
        write_value(&self.sys.join("comp_algorithm"), algorithm)?;
        let size = disksize_bytes.div_ceil(PAGE_SIZE as u64) * PAGE_SIZE as u64;
        write_value(&self.sys.join("disksize"), &size.to_string())?;
        self.disksize = size;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.node)
            .map_err(|e| Error::io(&self.node, e))?;
        self.file = Some(file);
        Ok(())
    }

    /// Configured disk size in bytes (0 before [`Zram::configure`]).
    pub fn disksize(&self) -> u64 {
        self.disksize
    }

    fn file(&self) -> Result<&File> {
        self.file.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "zram{} is not configured: call configure() first",
                self.dev
            ))
        })
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        if offset % PAGE_SIZE as u64 != 0 || len % PAGE_SIZE != 0 {
            return Err(Error::InvalidArgument(format!(
                "O_DIRECT I/O needs page-aligned offset and length (offset {offset}, length {len})"
            )));
        }
        if offset + len as u64 > self.disksize {
            return Err(Error::InvalidArgument(format!(
                "I/O at {offset}+{len} is past the end of zram{} (disksize {})",
                self.dev, self.disksize
            )));
        }
        Ok(())
    }

    /// Write one page at page index `index`.
    pub fn write_page_direct(&self, index: u64, page: &[u8; PAGE_SIZE]) -> Result<()> {
        self.write_direct(index * PAGE_SIZE as u64, page)
    }

    /// Write whole pages starting at byte `offset` (both multiples of 4096) with O_DIRECT, in
    /// requests of at most [`REQUEST_BYTES`] (like `dd bs=1M oflag=direct`). Page-aligned
    /// `data` (an [`AlignedBuf`]) is written in place; other data is first copied through a
    /// bounce buffer, which costs an allocation and a copy per page: callers that time the
    /// write prepare an [`AlignedBuf`] before the clock starts.
    pub fn write_direct(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len())?;
        let file = self.file()?;
        if is_page_aligned(data.as_ptr()) {
            for (k, req) in data.chunks(REQUEST_BYTES).enumerate() {
                file.write_all_at(req, offset + (k * REQUEST_BYTES) as u64)
                    .map_err(|e| Error::io(&self.node, e))?;
            }
            return Ok(());
        }
        let chunk = data.len().clamp(PAGE_SIZE, REQUEST_BYTES);
        let mut buf = AlignedBuf::new(chunk);
        let mut done = 0usize;
        while done < data.len() {
            let n = chunk.min(data.len() - done);
            buf[..n].copy_from_slice(&data[done..done + n]);
            file.write_all_at(&buf[..n], offset + done as u64)
                .map_err(|e| Error::io(&self.node, e))?;
            done += n;
        }
        Ok(())
    }

    /// Read one page at page index `index`.
    pub fn read_page_direct(&self, index: u64, page: &mut [u8; PAGE_SIZE]) -> Result<()> {
        self.read_direct(index * PAGE_SIZE as u64, page)
    }

    /// Read whole pages starting at byte `offset` with O_DIRECT, in requests of at most
    /// [`REQUEST_BYTES`]; page-aligned `out` is read into in place, other memory through a
    /// bounce buffer (see [`Zram::write_direct`]).
    pub fn read_direct(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.check_range(offset, out.len())?;
        let file = self.file()?;
        if is_page_aligned(out.as_ptr()) {
            for (k, req) in out.chunks_mut(REQUEST_BYTES).enumerate() {
                file.read_exact_at(req, offset + (k * REQUEST_BYTES) as u64)
                    .map_err(|e| Error::io(&self.node, e))?;
            }
            return Ok(());
        }
        let chunk = out.len().clamp(PAGE_SIZE, REQUEST_BYTES);
        let mut buf = AlignedBuf::new(chunk);
        let mut done = 0usize;
        while done < out.len() {
            let n = chunk.min(out.len() - done);
            file.read_exact_at(&mut buf[..n], offset + done as u64)
                .map_err(|e| Error::io(&self.node, e))?;
            out[done..done + n].copy_from_slice(&buf[..n]);
            done += n;
        }
        Ok(())
    }

    /// The device's `mm_stat` now.
    pub fn mm_stat(&self) -> Result<MmStat> {
        read_mm_stat(self.dev)
    }

    /// Run zsmalloc compaction on the device's pool (`compact` attribute).
    pub fn compact(&self) -> Result<()> {
        write_value(&self.sys.join("compact"), "1")
    }

    /// Free all stored data and return to disksize 0 (the device stays claimed).
    pub fn reset(&mut self) -> Result<()> {
        // The kernel refuses to reset an open device.
        self.file = None;
        let path = self.sys.join("reset");
        let mut last = None;
        // A just-closed device can still be briefly held by udev's probe: retry on EBUSY.
        for _ in 0..50 {
            match write_value(&path, "1") {
                Ok(()) => {
                    self.disksize = 0;
                    return Ok(());
                }
                Err(Error::Busy(m)) => {
                    last = Some(Error::Busy(m));
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Busy(format!("zram{} reset", self.dev))))
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        if let Err(e) = self.reset() {
            eprintln!(
                "uzswap-kernel: warning: could not reset zram{}: {}",
                self.dev,
                crate::error_chain(&e)
            );
            return;
        }
        if let Some(alg) = self.original_algorithm.clone() {
            if let Err(e) = write_value(&self.sys.join("comp_algorithm"), &alg) {
                eprintln!(
                    "uzswap-kernel: warning: could not restore zram{} algorithm {alg}: {}",
                    self.dev,
                    crate::error_chain(&e)
                );
            }
        }
    }
}

/// First line of `file` whose first field is `device`.
fn find_device_line(file: &Path, device: &str) -> Result<Option<String>> {
    let text = read_trimmed(file)?;
    Ok(text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(device))
        .map(str::to_string))
}

/// Largest O_DIRECT request [`Zram::write_direct`] and [`Zram::read_direct`] issue: 1 MiB.
pub const REQUEST_BYTES: usize = 256 * PAGE_SIZE;

fn is_page_aligned(p: *const u8) -> bool {
    (p as usize) % PAGE_SIZE == 0
}

/// A zeroed, page-aligned heap buffer for O_DIRECT I/O; dereferences to its bytes. Its length
/// is a whole number of pages (at least one).
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` bytes rounded up to whole pages, zeroed.
    pub fn new(len: usize) -> AlignedBuf {
        let size = len.max(1).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let layout = Layout::from_size_align(size, PAGE_SIZE).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    /// A page-aligned copy of `data` (padded with zeros to whole pages).
    pub fn copy_of(data: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::new(data.len());
        b[..data.len()].copy_from_slice(data);
        b
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.layout.size())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this exact layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nine_and_eight_fields() {
        let m = MmStat::parse("  4096 100 8192 0 8192 1 0 0 0\n").unwrap();
        assert_eq!(m.orig_data_size, 4096);
        assert_eq!(m.mem_used_total, 8192);
        assert_eq!(m.same_pages, 1);
        let m8 = MmStat::parse("1 2 3 4 5 6 7 8").unwrap();
        assert_eq!(m8.huge_pages, 8);
        assert_eq!(m8.huge_pages_since, 0);
        assert!(MmStat::parse("1 2 3")
            .unwrap_err()
            .contains("expected 8 or 9"));
        assert!(MmStat::parse("1 2 x 4 5 6 7 8 9")
            .unwrap_err()
            .contains("\"x\""));
    }

    #[test]
    fn parses_comp_algorithm() {
        let (all, sel) = parse_comp_algorithm("[lzo-rle] lzo lz4 \n");
        assert_eq!(all, ["lzo-rle", "lzo", "lz4"]);
        assert_eq!(sel.as_deref(), Some("lzo-rle"));
        let (all, sel) = parse_comp_algorithm("lzo lz4");
        assert_eq!(all.len(), 2);
        assert_eq!(sel, None);
    }

    #[test]
    fn aligned_buf_is_page_aligned_whole_pages_and_zeroed() {
        let b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 2 * PAGE_SIZE);
        assert!(is_page_aligned(b.as_ptr()));
        assert!(b.iter().all(|&x| x == 0));
        let c = AlignedBuf::copy_of(b"abc");
        assert_eq!(c.len(), PAGE_SIZE);
        assert_eq!(&c[..4], b"abc\0");
        assert_eq!(AlignedBuf::new(0).len(), PAGE_SIZE);
    }

    #[test]
    fn absent_device_is_a_clear_error() {
        let e = Zram::claim_unused(4000).unwrap_err().to_string();
        assert!(e.contains("zram4000 is absent"), "{e}");
    }
}
