// SPDX-License-Identifier: MIT
//! The capture path's `/proc/PID/maps` parser (`uzswap_corpus::parse_maps`) on arbitrary text:
//! never panics; every entry it accepts is a well-formed range whose page count fits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use uzswap_corpus::{parse_maps, PAGE_SIZE};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(entries) = parse_maps(Path::new("/proc/fuzz/maps"), text) else {
        return;
    };
    assert!(entries.len() <= text.lines().count());
    for e in &entries {
        assert!(e.start <= e.end);
        assert_eq!(e.pages() as u64, (e.end - e.start) / PAGE_SIZE as u64);
        let _ = e.is_candidate();
    }
});
