// SPDX-License-Identifier: MIT
//! Runs the `uzswap classes` binary and checks its JSON figures (the stable CLI contract) and
//! its kernel-layout table.

use std::process::Command;

fn classes_json(chain: usize, rule: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args([
            "classes",
            "--json",
            "--chain-size",
            &chain.to_string(),
            "--chain-rule",
            rule,
        ])
        .output()
        .expect("run uzswap");
    assert!(
        out.status.success(),
        "uzswap classes failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn largest_normal(v: &serde_json::Value) -> u64 {
    v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["huge"].as_bool().unwrap())
        .map(|c| c["size"].as_u64().unwrap())
        .max()
        .unwrap()
}

#[test]
fn used_percent_gives_seed_004_figures() {
    for (chain, unique, largest, huge) in [
        (4, 69, 3264, 3257),
        (8, 123, 3632, 3625),
        (16, 191, 3840, 3833),
    ] {
        let v = classes_json(chain, "used-percent");
        assert_eq!(v["chain_size"], chain);
        assert_eq!(v["chain_rule"], "used-percent");
        assert_eq!(v["num_classes"], 255);
        assert_eq!(v["unique_classes"], unique, "chain {chain}");
        assert_eq!(v["classes"].as_array().unwrap().len(), unique);
        assert_eq!(v["huge_class_size"], huge);
        assert_eq!(largest_normal(&v), largest);
    }
}

#[test]
fn min_waste_gives_kernel_figures() {
    for (chain, unique, largest, huge) in [
        (4, 69, 3264, 3257),
        (8, 119, 3632, 3625),
        (16, 192, 3840, 3833),
    ] {
        let v = classes_json(chain, "min-waste");
        assert_eq!(v["chain_rule"], "min-waste");
        assert_eq!(v["unique_classes"], unique, "chain {chain}");
        assert_eq!(v["huge_class_size"], huge);
        assert_eq!(largest_normal(&v), largest);
        let first = &v["classes"][0];
        assert_eq!(
            (first["index"].as_u64(), first["size"].as_u64()),
            (Some(0), Some(32))
        );
        let last = v["classes"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            (last["index"].as_u64(), last["size"].as_u64()),
            (Some(254), Some(4096))
        );
        assert_eq!(last["objs_per_zspage"], 1);
        assert_eq!(last["huge"], true);
    }
}

#[test]
fn default_is_chain_8_min_waste() {
    let out = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args(["classes", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["chain_size"].as_u64(), v["chain_rule"].as_str()),
        (Some(8), Some("min-waste"))
    );
    assert_eq!(v["unique_classes"], 119);
}

#[test]
fn table_has_kernel_header_and_one_row_per_unique_class() {
    let out = Command::new(env!("CARGO_BIN_EXE_uzswap"))
        .args([
            "classes",
            "--chain-size",
            "4",
            "--chain-rule",
            "used-percent",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        " class  size       10%       20%       30%       40%       50%       60%       70%       80%       90%       99%      100% obj_allocated   obj_used pages_used pages_per_zspage freeable"
    );
    // Header, 69 rows, blank line, Total.
    assert_eq!(lines.len(), 1 + 69 + 2);
    assert!(lines
        .iter()
        .any(|l| l.split_whitespace().take(2).eq(["202", "3264"])));
    assert!(lines.last().unwrap().trim_start().starts_with("Total"));
}

#[test]
fn bad_arguments_fail_cleanly() {
    for args in [
        &["classes", "--chain-size", "0"][..],
        &["classes", "--chain-size", "17"],
        &["classes", "--chain-rule", "x"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_uzswap"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}
