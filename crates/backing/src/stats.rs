// SPDX-License-Identifier: MIT
//! Counters of a backing store: the public snapshot and the padded atomics behind it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one backing store (the same for every implementation). `writes`/`reads` count
/// successful block I/O only.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct BackingStats {
    /// Number of slots of the area.
    pub capacity: u64,
    /// Slots allocated right now.
    pub slots_in_use: u64,
    /// Slots holding a written block right now.
    pub blocks_stored: u64,
    /// Blocks written successfully (the kernel's pswpout when the cache writes back).
    pub writes: u64,
    /// Blocks read and verified successfully (pswpin).
    pub reads: u64,
    /// Failed block writes (EIO, ENOSPC, or a failed checksum-table update).
    pub write_errors: u64,
    /// Failed block reads (EIO, short reads); checksum mismatches are counted separately.
    pub read_errors: u64,
    /// Blocks whose content did not match its checksum.
    pub checksum_errors: u64,
    /// Of `write_errors`: those caused by a full filesystem.
    pub no_space_errors: u64,
    /// Of `read_errors`: reads that came back short.
    pub short_reads: u64,
    /// Reads of slots without a block (`Error::NotWritten`).
    pub not_written_reads: u64,
    /// Blocks discarded.
    pub discards: u64,
    /// Faults injected by the [`FaultInjector`].
    pub faults_injected: u64,
}

/// A counter on its own cache line, so concurrent readers and writers do not false-share.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) writes: Counter,
    pub(crate) reads: Counter,
    pub(crate) write_errors: Counter,
    pub(crate) read_errors: Counter,
    pub(crate) checksum_errors: Counter,
    pub(crate) no_space_errors: Counter,
    pub(crate) short_reads: Counter,
    pub(crate) not_written_reads: Counter,
    pub(crate) discards: Counter,
    pub(crate) blocks_stored: Counter,
}

impl Counters {
    /// Counts a failed block write (and, if the filesystem was full, a no-space error).
    pub(crate) fn count_write_error(&self, e: &crate::Error) {
        self.write_errors.inc();
        if matches!(e, crate::Error::NoSpace { .. }) {
            self.no_space_errors.inc();
        }
    }

    /// The public snapshot, with the figures the counters don't hold.
    pub(crate) fn snapshot(
        &self,
        capacity: u64,
        slots_in_use: u64,
        faults_injected: u64,
    ) -> BackingStats {
        BackingStats {
            capacity,
            slots_in_use,
            blocks_stored: self.blocks_stored.get(),
            writes: self.writes.get(),
            reads: self.reads.get(),
            write_errors: self.write_errors.get(),
            read_errors: self.read_errors.get(),
            checksum_errors: self.checksum_errors.get(),
            no_space_errors: self.no_space_errors.get(),
            short_reads: self.short_reads.get(),
            not_written_reads: self.not_written_reads.get(),
            discards: self.discards.get(),
            faults_injected,
        }
    }
}
