// SPDX-License-Identifier: MIT
//! The crate's error type: one variant per cause, errnos mapped to domain variants at the I/O wrapper.

use std::io;

use crate::SwapSlot;

/// What the store was doing when an I/O error happened.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    /// Creating, sizing or opening the backing file.
    Create,
    /// Writing a data block.
    Write,
    /// Reading a data block.
    Read,
    /// Writing or reading the header or checksum table.
    Metadata,
    /// Punching a hole for a discarded block.
    Discard,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Create => "create",
            Op::Write => "write",
            Op::Read => "read",
            Op::Metadata => "metadata",
            Op::Discard => "discard",
        })
    }
}

/// Errors of a backing store, one variant per cause. Every I/O failure is reported, counted,
/// and leaves the store usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No free slot is left (the kernel's `get_swap_pages` returning 0).
    #[error("swap area is full: all slots are in use")]
    Full,
    /// The slot belongs to another area or lies beyond the capacity.
    #[error("slot {slot} is out of range of this store (area {area}, capacity {capacity} slots)")]
    OutOfRange {
        /// The slot asked for.
        slot: SwapSlot,
        /// This store's area.
        area: u32,
        /// This store's slot count.
        capacity: u64,
    },
    /// `free_slot` on a slot that is not allocated (double free or never allocated).
    #[error("slot {0:?} is not allocated")]
    NotAllocated(SwapSlot),
    /// The slot holds no block: never written, discarded, or its last write failed.
    #[error("slot {0:?} holds no data (never written or discarded)")]
    NotWritten(SwapSlot),
    /// The block read back does not match its checksum; the data is not returned.
    #[error("checksum mismatch in slot {slot:?}: expected {expected:#010x}, read {actual:#010x}")]
    Corrupt {
        /// The slot read.
        slot: SwapSlot,
        /// Checksum recorded when the block was written.
        expected: u32,
        /// Checksum of what came back from the file.
        actual: u32,
    },
    /// The filesystem is full (ENOSPC, or EDQUOT).
    #[error("no space left on the swap file's filesystem ({op} of slot {slot:?})")]
    NoSpace {
        /// The operation that failed.
        op: Op,
        /// The slot concerned, if any.
        slot: Option<SwapSlot>,
    },
    /// The file ended before the block did (it was truncated behind our back).
    #[error("short read of slot {slot:?}: got {got} of {want} bytes")]
    ShortRead {
        /// The slot read.
        slot: SwapSlot,
        /// Bytes actually read.
        got: usize,
        /// Bytes wanted.
        want: usize,
    },
    /// Any other I/O error (EIO and friends).
    #[error("I/O error during {op} of slot {slot:?}")]
    Io {
        /// The operation that failed.
        op: Op,
        /// The slot concerned, if any.
        slot: Option<SwapSlot>,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file system refused O_DIRECT on the swap file (tmpfs before 6.6, some FUSE and
    /// network file systems): the file stays usable through the page cache.
    #[error("the swap file's file system refuses O_DIRECT (use a directory on a disk file system, or drop the direct I/O option)")]
    DirectIoRefused {
        /// The OS error of the open or of the first aligned transfer.
        #[source]
        source: io::Error,
    },
    /// A page buffer is not exactly `PAGE_SIZE` bytes.
    #[error("page buffer has {0} bytes, expected 4096")]
    BadPageLength(usize),
    /// The requested capacity is 0 or above [`crate::MAX_SLOTS`].
    #[error("invalid slot count {0} (must be 1..={max})", max = crate::MAX_SLOTS)]
    BadCapacity(u64),
    /// The in-memory checksum table for this many slots could not be allocated.
    #[error("cannot allocate the checksum table for {0} slots")]
    OutOfMemory(u64),
    /// `open` found no valid uzswap swap-file header.
    #[error("not a uzswap swap file: {0}")]
    BadHeader(HeaderError),
}

/// What is wrong with a swap file's header (from [`SwapFile::open`](crate::SwapFile::open)).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The file is shorter than its header page.
    #[error("the file has only {0} bytes")]
    TooShort(usize),
    /// The magic bytes are not `UZSWAPF\0`.
    #[error("bad magic")]
    BadMagic,
    /// The header's own checksum does not match.
    #[error("header checksum mismatch")]
    ChecksumMismatch,
    /// A format version this build does not read.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u32),
    /// Page size, slot count or offsets that don't describe a valid file.
    #[error("inconsistent geometry")]
    BadGeometry,
    /// The checksum table ends before the header says.
    #[error("checksum table truncated")]
    TableTruncated,
}

impl Error {
    /// Maps an OS error to `NoSpace` or `Io`.
    pub(crate) fn from_io(op: Op, slot: Option<SwapSlot>, source: io::Error) -> Error {
        if source.raw_os_error() == Some(libc::EFBIG) {
            take_back_sigxfsz();
        }
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::NoSpace { op, slot },
            _ => Error::Io { op, slot, source },
        }
    }

    /// True for errors caused by the device (I/O, space, short reads, checksum), as opposed to misuse.
    pub fn is_device_error(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. }
                | Error::NoSpace { .. }
                | Error::ShortRead { .. }
                | Error::Io { .. }
        )
    }
}

/// A write past the process's file-size limit (RLIMIT_FSIZE, `ulimit -f`) fails with EFBIG,
/// and the kernel sends the writing thread SIGXFSZ, whose default action ends the process. A
/// swap file is not a file the program asked for: where the signal is blocked (`uzswap run`'s
/// pager blocks every signal in its threads and its fault path) the pending signal is taken
/// back here, so it is never delivered, and the error is reported as any I/O error. (A C
/// program under `ulimit -f 1000` died of it, status 153, where it ran plainly.)
#[allow(unsafe_code)]
fn take_back_sigxfsz() {
    #[cfg(not(miri))]
    // SAFETY: a signal set and a zero timeout on our stack; sigtimedwait only takes a signal
    // that is pending and blocked, so an unblocked thread loses nothing.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGXFSZ);
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
