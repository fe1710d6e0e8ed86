//! Byte-identical outputs (issue 15): every fixture (`fixtures/objects`, `left-alone`,
//! `bundles`, `hosts`), instrumented by `sqtt-patch batch` with a fixed set of flag
//! combinations, plus `--fatbin --compress-bundles` on the host library, must produce exactly
//! the bytes recorded (as SHA-256, `sha2` crate) in `fixtures/output-hashes.sha256`.
//!
//! Any change of an output byte fails this test, naming the outputs that changed. When the
//! change is intended (another issue changes the output on purpose), re-record with
//! `SQTT_RECORD_OUTPUT_HASHES=1 cargo test --release -p sqtt-patch --test output_hashes` and say
//! why in the commit. The file keeps the `sha256sum` line format (`<hex>  <config>/<path>`)
//! after its `#` header lines.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const RECORD_VAR: &str = "SQTT_RECORD_OUTPUT_HASHES";

/// Flag combinations: name and flags. Together they exercise every feature: function and
/// kernel scopes, barriers, memory chunks, scope filtering, address tracing, the cost model and
/// gfx12 clock packing (a note on other targets).
const CONFIGS: [(&str, &[&str]); 4] = [
    ("fb", &["--functions", "1", "--barriers", "1"]),
    (
        "allmem",
        &[
            "--functions",
            "1",
            "--barriers",
            "1",
            "--kernel-scopes",
            "--memory",
            "2:5",
            "--scope",
        ],
    ),
    (
        "trace",
        &[
            "--functions",
            "1",
            "--kernel-scopes",
            "--trace-addresses",
            "memory,lds",
            "--scope",
        ],
    ),
    (
        "cost-clock",
        &[
            "--functions",
            "cost:20",
            "--barriers",
            "1",
            "--memory",
            "4:0",
            "--shader-clock-bits",
            "8",
            "--shader-clock-shift",
            "2",
        ],
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hash_file() -> PathBuf {
    workspace().join("fixtures/output-hashes.sha256")
}

/// Runs the binary in the workspace with a clean environment (no `SQTT_*` defaults).
fn run(args: &[&str]) {
    let out = Command::new(BIN)
        .current_dir(workspace())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(args)
        .output()
        .expect("run sqtt-patch");
    // Exit 0 (the bad-word fixtures keep `.text` in place); a verifier rejection (exit 1) or
    // an input error (exit 2) is a failure here.
    assert!(
        matches!(out.status.code(), Some(0)),
        "sqtt-patch {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SHA-256 of every file below `dir`, keyed `<prefix>/<path below dir>`.
fn hash_tree(dir: &Path, prefix: &str, into: &mut BTreeMap<String, String>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read output dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).expect("below dir");
            let key = format!("{prefix}/{}", rel.to_string_lossy());
            into.insert(key, hex(&std::fs::read(&p).expect("read output")));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn render(hashes: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# SHA-256 of sqtt-patch's outputs for every fixture and flag combination\n\
         # (crates/sqtt-patch/tests/output_hashes.rs). Re-record only for an intended change:\n\
         # SQTT_RECORD_OUTPUT_HASHES=1 cargo test --release -p sqtt-patch --test output_hashes\n",
    );
    for (k, h) in hashes {
        s += &format!("{h}  {k}\n");
    }
    s
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once("  "))
        .map(|(h, k)| (k.to_string(), h.to_string()))
        .collect()
}

#[test]
fn outputs_are_byte_identical_to_the_recorded_hashes() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut hashes = BTreeMap::new();
    for (name, flags) in CONFIGS {
        let out = tmp.path().join(name);
        let mut args = vec!["batch", "fixtures", "-o"];
        let out_s = out.to_string_lossy().into_owned();
        args.push(&out_s);
        args.extend_from_slice(flags);
        run(&args);
        hash_tree(&out, name, &mut hashes);
    }
    // `--fatbin` writing compressed bundles (the batch mode keeps the input's bundle format).
    let host = tmp.path().join("libfx_hip.so");
    let host_s = host.to_string_lossy().into_owned();
    run(&[
        "--fatbin",
        "fixtures/hosts/libfx_hip.so",
        "-o",
        &host_s,
        "--functions",
        "1",
        "--barriers",
        "1",
        "--compress-bundles",
    ]);
    hashes.insert(
        "fatbin-compressed/libfx_hip.so".into(),
        hex(&std::fs::read(&host).expect("read fatbin output")),
    );
    assert!(
        hashes.len() > 4 * 300,
        "only {} outputs: fixtures missing?",
        hashes.len()
    );
    if std::env::var_os(RECORD_VAR).is_some() {
        std::fs::write(hash_file(), render(&hashes)).expect("write the hash file");
        eprintln!(
            "recorded {} hashes in {}",
            hashes.len(),
            hash_file().display()
        );
        return;
    }
    let recorded = parse(&std::fs::read_to_string(hash_file()).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with {RECORD_VAR}=1 cargo test --release -p sqtt-patch --test output_hashes",
            hash_file().display()
        )
    }));
    let mut diffs = Vec::new();
    for (k, h) in &hashes {
        match recorded.get(k) {
            None => diffs.push(format!("new output {k}")),
            Some(r) if r != h => diffs.push(format!("changed {k}")),
            Some(_) => {}
        }
    }
    for k in recorded.keys().filter(|k| !hashes.contains_key(*k)) {
        diffs.push(format!("missing output {k}"));
    }
    assert!(
        diffs.is_empty(),
        "{} output(s) differ from {} (first 30 below). If the change is intended, re-record with \
         {RECORD_VAR}=1 cargo test --release -p sqtt-patch --test output_hashes\n{}",
        diffs.len(),
        hash_file().display(),
        diffs
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_hash_file_format_round_trips() {
    let mut m = BTreeMap::new();
    m.insert("fb/objects/a b.co".to_string(), hex(b"abc"));
    // The SHA-256 test vector of "abc" (FIPS 180-2, appendix B.1).
    assert_eq!(
        m["fb/objects/a b.co"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(parse(&render(&m)), m);
}
