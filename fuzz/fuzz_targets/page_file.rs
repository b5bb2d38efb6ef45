// SPDX-License-Identifier: MIT
//! The page-file reader (`uzswap_corpus::decode_page_file`, what every command reads page files
//! with) on arbitrary bytes: never panics; a file it accepts re-encodes to the same pages, and a
//! headered file it accepts re-encodes to exactly the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use uzswap_corpus::{decode_page_file, encode_page_file, MAGIC};

fuzz_target!(|data: &[u8]| {
    let Ok(pages) = decode_page_file(Path::new("fuzz.pages"), data.to_vec()) else {
        return;
    };
    let again = encode_page_file(&pages);
    if data.starts_with(MAGIC) {
        assert_eq!(again, data, "a valid page file re-encodes byte for byte");
    } else {
        assert_eq!(pages.as_bytes(), data, "a raw dump is its own pages");
    }
    let back = decode_page_file(Path::new("fuzz.pages"), again).expect("own output decodes");
    assert_eq!(back, pages);
});
