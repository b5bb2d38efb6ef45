// SPDX-License-Identifier: MIT
//! Fullness groups: which list a zspage is on, by the share of its objects in use
//! (`ZS_INUSE_RATIO_*` and `get_fullness_group()`).

/// Fullness groups: empty, 1-9%, 10-19%, ..., 90-99%, full (`ZS_INUSE_RATIO_*`).
pub const NR_FULLNESS_GROUPS: usize = 12;
pub(crate) const RATIO_0: usize = 0;
pub(crate) const RATIO_10: usize = 1;
pub(crate) const RATIO_99: usize = 10;
pub(crate) const RATIO_100: usize = 11;
/// `get_fullness_group()`: 0 empty, 11 full, else `100*inuse/objs_per_zspage/10 + 1`.
pub(crate) fn fullness_group(inuse: usize, objs_per_zspage: usize) -> usize {
    if inuse == 0 {
        RATIO_0
    } else if inuse == objs_per_zspage {
        RATIO_100
    } else {
        // +1 so that 1 object of 127 (ratio 0) counts as 10%, as in the kernel.
        100 * inuse / objs_per_zspage / 10 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fullness_group_matches_kernel_buckets() {
        assert_eq!(fullness_group(0, 127), 0);
        assert_eq!(fullness_group(1, 127), 1);
        assert_eq!(fullness_group(13, 127), 2);
        assert_eq!(fullness_group(126, 127), 10);
        assert_eq!(fullness_group(127, 127), 11);
        assert_eq!(fullness_group(1, 2), 6);
    }
}
