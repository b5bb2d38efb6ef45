// SPDX-License-Identifier: MIT
//! uzswap-types: the vocabulary shared by every layer of uzswap.
//!
//! **Owns**: the page geometry ([`PAGE_SIZE`], [`PAGE_SHIFT`]), the cache's key,
//! [`SwapSlot`] (the kernel's `swp_entry_t`: swap type and offset), how sizes are written
//! ([`parse_size`]: trace files, cache options, command lines), and how the kernel escapes a
//! path in its mount tables ([`unescape_mount_path`]: the kernel-side runners and the pager's
//! cgroup view both find the memory cgroup's mount). Nothing else: a type
//! belongs here only if two layers that do not depend on each other both need it (the
//! backing stores and the cache; the trace format and the reclaim engine).
//!
//! **Data layout**: plain values, `Copy`, no heap. **Locks**: none. No dependencies (serde
//! only behind the `serde` feature), no unsafe code.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;

/// log2 of [`PAGE_SIZE`] (the kernel's `PAGE_SHIFT` on x86-64 and arm64 with 4 KiB pages).
pub const PAGE_SHIFT: u32 = 12;

/// Size of one page: what the cache stores per slot, a block of a backing store, and a frame
/// of a zspage.
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;

/// A swap entry: which swap area, which slot in it. The cache's key (the kernel's
/// `swp_entry_t`: swap type and swap offset).
///
/// Ordered by area, then offset. `Display` prints `area:offset` (e.g. `0:4096`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SwapSlot {
    /// Swap area (the kernel's swap type).
    pub area: u32,
    /// Slot index inside the area (the kernel's swap offset).
    pub offset: u64,
}

impl SwapSlot {
    /// A slot of `area` at `offset`.
    pub const fn new(area: u32, offset: u64) -> SwapSlot {
        SwapSlot { area, offset }
    }
}

impl fmt::Display for SwapSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.area, self.offset)
    }
}

/// A size as trace files, cache options and command lines write it: a number of bytes with an
/// optional `K`, `M`, `G` or `T` suffix (binary units; either case).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mul) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        Some(b'T' | b't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size {s:?}: expected a number with an optional K/M/G/T suffix"))?;
    n.checked_mul(mul)
        .ok_or_else(|| format!("size {s:?} overflows"))
}

/// A path field of `/proc/self/mounts` or `/proc/self/mountinfo` as the kernel wrote it, with
/// its octal escapes undone (`\040` is a space; the kernel escapes space, tab, newline and
/// backslash).
pub fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/tail\\04"), "/tail\\04");
        assert_eq!(unescape_mount_path("/a\\134b"), "/a\\b");
    }

    #[test]
    fn page_geometry() {
        assert_eq!(PAGE_SIZE, 4096);
        assert_eq!(1usize << PAGE_SHIFT, PAGE_SIZE);
    }

    #[test]
    fn slots_order_by_area_then_offset() {
        let mut v = vec![
            SwapSlot::new(1, 0),
            SwapSlot::new(0, 7),
            SwapSlot::new(0, 3),
        ];
        v.sort();
        assert_eq!(
            v,
            [
                SwapSlot::new(0, 3),
                SwapSlot::new(0, 7),
                SwapSlot::new(1, 0)
            ]
        );
        assert_eq!(SwapSlot::new(2, 4096).to_string(), "2:4096");
        assert_eq!(
            format!("{:?}", SwapSlot::new(0, 1)),
            "SwapSlot { area: 0, offset: 1 }"
        );
    }
}
