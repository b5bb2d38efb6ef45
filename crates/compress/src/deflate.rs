// SPDX-License-Identifier: MIT
//! Raw deflate with the kernel crypto `deflate` parameters, through zlib (`libz-sys`).
//!
//! crypto/deflate.c (and zram's deflate backend) use a raw stream (no zlib header or
//! checksum) with windowBits 11 (a 2 KiB window), memLevel 9 (`MAX_MEM_LEVEL`), the default
//! strategy and level `Z_DEFAULT_COMPRESSION` (= 6). flate2 does not let a caller choose the
//! window of a raw stream, hence zlib directly. Streams are kept per thread (one deflate stream
//! per level, one inflate stream) and `*Reset` between pages, as the kernel does per request.

use std::cell::RefCell;
use std::os::raw::{c_int, c_uint, c_void};

use libz_sys as z;

use crate::Error;

/// Negative: raw deflate, no zlib wrapper.
const WINDOW_BITS: c_int = -11;
/// `MAX_MEM_LEVEL`.
const MEM_LEVEL: c_int = 9;

unsafe extern "C" fn zalloc(_opaque: *mut c_void, items: c_uint, size: c_uint) -> *mut c_void {
    // SAFETY: calloc accepts any sizes and returns null on failure, which zlib handles.
    unsafe { libc::calloc(items as usize, size as usize) }
}

unsafe extern "C" fn zfree(_opaque: *mut c_void, ptr: *mut c_void) {
    // SAFETY: zlib only frees pointers that `zalloc` returned.
    unsafe { libc::free(ptr) }
}

fn new_stream() -> Box<z::z_stream> {
    Box::new(z::z_stream {
        next_in: std::ptr::null_mut(),
        avail_in: 0,
        total_in: 0,
        next_out: std::ptr::null_mut(),
        avail_out: 0,
        total_out: 0,
        msg: std::ptr::null_mut(),
        state: std::ptr::null_mut(),
        zalloc,
        zfree,
        opaque: std::ptr::null_mut(),
        data_type: 0,
        adler: 0,
        reserved: 0,
    })
}

/// A zlib stream that zlib has initialised; boxed because zlib's state points back at it.
struct Stream {
    strm: Box<z::z_stream>,
    inflate: bool,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream was successfully initialised by deflateInit2_/inflateInit2_ and
        // is ended exactly once here.
        unsafe {
            if self.inflate {
                z::inflateEnd(&mut *self.strm);
            } else {
                z::deflateEnd(&mut *self.strm);
            }
        }
    }
}

fn zlib_err(what: &str, ret: c_int) -> Error {
    Error::Codec {
        algorithm: "deflate",
        reason: format!("{what} returned {ret}"),
    }
}

impl Stream {
    fn deflater(level: u32) -> Result<Stream, Error> {
        let mut strm = new_stream();
        // SAFETY: `strm` is a valid, boxed z_stream with allocator callbacks; version and
        // struct size let zlib check the ABI.
        let ret = unsafe {
            z::deflateInit2_(
                &mut *strm,
                level as c_int,
                z::Z_DEFLATED,
                WINDOW_BITS,
                MEM_LEVEL,
                z::Z_DEFAULT_STRATEGY,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if ret != z::Z_OK {
            return Err(zlib_err("deflateInit2", ret));
        }
        Ok(Stream {
            strm,
            inflate: false,
        })
    }

    fn inflater() -> Result<Stream, Error> {
        let mut strm = new_stream();
        // SAFETY: as in `deflater`.
        let ret = unsafe {
            z::inflateInit2_(
                &mut *strm,
                WINDOW_BITS,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if ret != z::Z_OK {
            return Err(zlib_err("inflateInit2", ret));
        }
        Ok(Stream {
            strm,
            inflate: true,
        })
    }
}

thread_local! {
    static DEFLATERS: RefCell<Vec<(u32, Stream)>> = const { RefCell::new(Vec::new()) };
    static INFLATER: RefCell<Option<Stream>> = const { RefCell::new(None) };
}

/// zlib's conservative `deflateBound` for non-default window/memLevel (raw stream, so no
/// wrapper bytes), or its stored-blocks bound if larger.
pub(crate) fn bound(src_len: usize) -> usize {
    let conservative = src_len + ((src_len + 7) >> 3) + ((src_len + 63) >> 6) + 5;
    let stored = src_len + (src_len >> 5) + (src_len >> 7) + (src_len >> 11) + 7;
    conservative.max(stored)
}

pub(crate) fn compress(level: u32, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let avail_in = c_uint::try_from(src.len()).map_err(|_| Error::SrcTooLarge(src.len()))?;
    let avail_out = dst.len().min(c_uint::MAX as usize) as c_uint;
    crate::tls::with_cached_keyed(
        &DEFLATERS,
        level,
        || Stream::deflater(level),
        |stream| {
            let s = &mut *stream.strm;
            // SAFETY: the stream is initialised; zlib only reads `avail_in` bytes at next_in (the
            // *mut cast is zlib's API, it never writes input) and writes at most `avail_out` bytes.
            let ret = unsafe {
                let r = z::deflateReset(s);
                if r != z::Z_OK {
                    return Err(zlib_err("deflateReset", r));
                }
                s.next_in = src.as_ptr() as *mut u8;
                s.avail_in = avail_in;
                s.next_out = dst.as_mut_ptr();
                s.avail_out = avail_out;
                z::deflate(s, z::Z_FINISH)
            };
            let produced = s.total_out as usize;
            s.next_in = std::ptr::null_mut();
            s.next_out = std::ptr::null_mut();
            match ret {
                z::Z_STREAM_END => Ok(produced),
                z::Z_OK | z::Z_BUF_ERROR => Err(Error::DstTooSmall {
                    available: dst.len(),
                }),
                r => Err(zlib_err("deflate", r)),
            }
        },
    )
}

pub(crate) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let avail_in = c_uint::try_from(src.len()).map_err(|_| Error::SrcTooLarge(src.len()))?;
    let avail_out = dst.len().min(c_uint::MAX as usize) as c_uint;
    crate::tls::with_cached(&INFLATER, Stream::inflater, |stream| {
        let s = &mut *stream.strm;
        // SAFETY: as in `compress`; inflate never reads past avail_in nor writes past avail_out.
        let ret = unsafe {
            let r = z::inflateReset(s);
            if r != z::Z_OK {
                return Err(zlib_err("inflateReset", r));
            }
            s.next_in = src.as_ptr() as *mut u8;
            s.avail_in = avail_in;
            s.next_out = dst.as_mut_ptr();
            s.avail_out = avail_out;
            z::inflate(s, z::Z_FINISH)
        };
        let produced = s.total_out as usize;
        let out_full = s.avail_out == 0;
        s.next_in = std::ptr::null_mut();
        s.next_out = std::ptr::null_mut();
        match ret {
            z::Z_STREAM_END => Ok(produced),
            z::Z_BUF_ERROR if out_full => Err(Error::Corrupt {
                algorithm: "deflate",
                reason: "output larger than the destination",
            }),
            z::Z_BUF_ERROR | z::Z_OK => Err(Error::Corrupt {
                algorithm: "deflate",
                reason: "truncated stream",
            }),
            _ => Err(Error::Corrupt {
                algorithm: "deflate",
                reason: "malformed stream",
            }),
        }
    })
}
