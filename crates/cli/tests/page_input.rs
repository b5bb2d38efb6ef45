// SPDX-License-Identifier: MIT
//! Every command reads pages through one loader with one set of errors: the same input gives
//! the same verdict and the same message in `bench` and `estimate`, and each message names the
//! file or process once, with the operating system's reason once.

use std::io::Write as _; // skip notices bypass the test harness's output capture
use std::path::PathBuf;
use std::process::{Command, Output};

const PAGE: usize = 4096;

fn uzswap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(args)
        .output()
        .expect("run uzswap")
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uzswap-page-input-{}-{name}", std::process::id()))
}

/// The two commands that read page files, with the file in place of `{}`.
fn readers(path: &str) -> [Vec<String>; 2] {
    [
        vec!["bench", "--corpus", path, "--no-kernel", "--runs", "1"],
        vec!["estimate", "--file", path, "--compressor", "lz4"],
    ]
    .map(|v| v.into_iter().map(String::from).collect())
}

/// Runs `args`, expects exit status 1 and exactly `want` on stderr.
fn assert_error(args: &[String], want: &str) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = uzswap(&args);
    assert_eq!(o.status.code(), Some(1), "{args:?}");
    assert_eq!(String::from_utf8_lossy(&o.stderr), want, "{args:?}");
    assert!(o.stdout.is_empty(), "{args:?}");
}

#[test]
fn a_partial_last_page_is_rejected_by_every_command() {
    // 5000 bytes of a real file: one page and 904 bytes, no header.
    let exe = std::fs::read(env!("CARGO_BIN_EXE_uzswap")).unwrap();
    let p = tmp("5000");
    std::fs::write(&p, &exe[..5000]).unwrap();
    let path = p.to_str().unwrap();
    for args in readers(path) {
        assert_error(
            &args,
            &format!(
                "uzswap: error: {path}: malformed page file: no UZSWAPPG header, and as a raw \
                 page dump its length 5000 is not a multiple of 4096\n"
            ),
        );
    }
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn whole_raw_pages_are_accepted_by_every_command() {
    let exe = std::fs::read(env!("CARGO_BIN_EXE_uzswap")).unwrap();
    let p = tmp("raw");
    std::fs::write(&p, &exe[..PAGE * 3]).unwrap();
    let path = p.to_str().unwrap();
    for args in readers(path) {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.push("--json");
        let o = uzswap(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["pages"].as_u64(), Some(3), "{args:?}");
    }
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn a_missing_file_names_the_file_and_the_reason_once() {
    let p = tmp("missing");
    let path = p.to_str().unwrap();
    for args in readers(path) {
        assert_error(
            &args,
            &format!(
                "uzswap: error: cannot read page file {path}: No such file or directory (os error 2)\n"
            ),
        );
    }
}

#[test]
fn an_empty_file_and_an_empty_page_file_are_errors() {
    let p = tmp("empty");
    let path = p.to_str().unwrap();
    std::fs::write(&p, b"").unwrap();
    for args in readers(path) {
        assert_error(
            &args,
            &format!("uzswap: error: {path}: malformed page file: the file is empty\n"),
        );
    }
    // A well-formed page file with zero pages.
    uzswap_corpus::write_page_file(&p, &uzswap_corpus::Pages::new("nothing")).unwrap();
    for args in readers(path) {
        assert_error(
            &args,
            &format!("uzswap: error: page file {path} holds no pages\n"),
        );
    }
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn capture_without_permission_names_the_real_proc_file() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let root = status
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        writeln!(
            std::io::stderr(),
            "SKIPPED: capture_without_permission_names_the_real_proc_file: needs root and setpriv"
        )
        .ok();
        return;
    }
    // As nobody, pid 1 (another user's process) cannot be read.
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_uzswap"))
        .args(["capture", "--pid", "1", "-o", "/dev/null"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    if e.contains("setpriv") {
        writeln!(
            std::io::stderr(),
            "SKIPPED: nobody cannot run the binary: {e}"
        )
        .ok();
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(
        e,
        "uzswap: error: permission denied reading /proc/1/maps of pid 1 (needs root or ptrace \
         access to the process)\n"
    );
}
