// SPDX-License-Identifier: MIT
//! Optional reference: Debian's liblzo2 (GPL, so only loaded at run time with dlopen, never
//! linked or vendored). Absent library => `None` and the caller skips.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void, CStr};

type CompressFn = unsafe extern "C" fn(*const u8, usize, *mut u8, *mut usize, *mut c_void) -> c_int;
type DecompressFn =
    unsafe extern "C" fn(*const u8, usize, *mut u8, *mut usize, *mut c_void) -> c_int;

pub struct LibLzo2 {
    compress: CompressFn,
    decompress_safe: DecompressFn,
    wrkmem: Vec<u64>,
}

impl LibLzo2 {
    pub fn load() -> Option<LibLzo2> {
        let name: &CStr = c"liblzo2.so.2";
        // SAFETY: dlopen with a valid C string; the handle is intentionally never closed, so
        // the function pointers below stay valid for the process lifetime.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return None;
        }
        let sym = |s: &CStr| {
            // SAFETY: valid handle and C string.
            let p = unsafe { libc::dlsym(h, s.as_ptr() as *const c_char) };
            (!p.is_null()).then_some(p)
        };
        let c = sym(c"lzo1x_1_compress")?;
        let d = sym(c"lzo1x_decompress_safe")?;
        Some(LibLzo2 {
            // SAFETY: the symbols are liblzo2's functions of exactly these C signatures
            // (lzo_uint is size_t on x86-64 Linux).
            compress: unsafe { std::mem::transmute::<*mut c_void, CompressFn>(c) },
            // SAFETY: as above.
            decompress_safe: unsafe { std::mem::transmute::<*mut c_void, DecompressFn>(d) },
            // LZO1X_1_MEM_COMPRESS is 16384 dictionary entries; be generous.
            wrkmem: vec![0u64; 16384 * 2],
        })
    }

    /// lzo1x_1_compress; `dst` must hold the LZO worst case.
    pub fn compress(&mut self, src: &[u8], dst: &mut [u8]) -> usize {
        assert!(dst.len() >= src.len() + src.len() / 16 + 64 + 3);
        let mut n = dst.len();
        // SAFETY: buffers are valid for the lengths given; wrkmem is large enough.
        let rc = unsafe {
            (self.compress)(
                src.as_ptr(),
                src.len(),
                dst.as_mut_ptr(),
                &mut n,
                self.wrkmem.as_mut_ptr().cast(),
            )
        };
        assert_eq!(rc, 0, "lzo1x_1_compress failed");
        n
    }

    /// lzo1x_decompress_safe; `Err(code)` on failure.
    pub fn decompress(&self, src: &[u8], dst: &mut [u8]) -> Result<usize, i32> {
        let mut n = dst.len();
        // SAFETY: the _safe decoder checks input and output bounds itself.
        let rc = unsafe {
            (self.decompress_safe)(
                src.as_ptr(),
                src.len(),
                dst.as_mut_ptr(),
                &mut n,
                std::ptr::null_mut(),
            )
        };
        if rc == 0 {
            Ok(n)
        } else {
            Err(rc)
        }
    }
}
