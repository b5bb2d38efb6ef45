// SPDX-License-Identifier: MIT
//! Links GCC's unwinder into the library statically (`libgcc_eh.a`, under the GCC Runtime
//! Library Exception) instead of depending on `libgcc_s.so.1`, which Rust's standard library
//! otherwise pulls in for unwinding. The library is loaded into every process of a
//! `uzswap run` tree, and `libgcc_s` cost each one about 0.1 ms: its mapping and relocation, and
//! its constructor's `cpuid` probing (`__cpu_indicator_init`), which traps to the hypervisor on
//! a VM (a loop of 300 `/bin/true` ran 0.95x the time without it; docs/pager.md, "fork and
//! exec"). The copy stays internal (a cdylib exports only its own `#[no_mangle]` symbols), so a
//! program's own unwinding (C++ exceptions, `pthread_exit`, cancellation) keeps the unwinder
//! it links; test `pthread_exit_cancellation_and_cpp_exceptions_unwind_through_the_wrappers`.
//! Where the archive can't be found (another toolchain), the library links `libgcc_s` as before.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let archive = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match archive {
        Some(a) if a.is_absolute() && a.is_file() => {
            let dir = a.parent().expect("an absolute file has a parent");
            println!("cargo:rustc-link-search=native={}", dir.display());
            // Whole archive: its objects define the unwinder before the standard library's
            // `-lgcc_s` is met, which `--as-needed` then leaves out.
            println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
        }
        _ => println!(
            "cargo:warning=libgcc_eh.a not found with `{cc} -print-file-name`: the preload \
             library links libgcc_s.so.1"
        ),
    }
}
