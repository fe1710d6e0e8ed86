//! Shared helpers of the hsaco integration tests: corpus location and LLVM 22 tools.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `<workspace root>/fixtures/corpus`; panics with a clear message when absent.
pub fn corpus() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let c = root.join("fixtures/corpus");
    assert!(
        c.join("MANIFEST.tsv").exists(),
        "corpus not found at {} (expected <workspace>/fixtures/corpus)",
        c.display()
    );
    c
}

/// Every bare code object of the corpus (`compiled/*.co`, `triton/*.hsaco`), sorted.
pub fn bare_objects() -> Vec<PathBuf> {
    let c = corpus();
    let mut v = Vec::new();
    for d in ["compiled", "triton"] {
        for e in std::fs::read_dir(c.join(d)).expect("corpus dir") {
            let p = e.expect("dir entry").path();
            if p.extension().is_some_and(|x| x == "co" || x == "hsaco") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// True when LLVM tests are disabled by `SQTT_NO_LLVM=1`.
pub fn no_llvm() -> bool {
    std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1")
}

/// Path of an LLVM 22 tool (`llvm-objdump` ...): `/usr/lib/llvm-22/bin/<tool>` or `<tool>-22`
/// on PATH. Panics (test failure) when missing.
pub fn llvm_tool(tool: &str) -> PathBuf {
    let p = PathBuf::from("/usr/lib/llvm-22/bin").join(tool);
    if p.exists() {
        return p;
    }
    let alt = format!("{tool}-22");
    if Command::new(&alt).arg("--version").output().is_ok() {
        return PathBuf::from(alt);
    }
    panic!("LLVM 22 tool {tool} not found (set SQTT_NO_LLVM=1 to skip LLVM-based tests)");
}

/// Runs a tool, returns (exit ok, stdout, stderr).
pub fn run(tool: &str, args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let out = Command::new(llvm_tool(tool))
        .args(args)
        .output()
        .expect("spawn LLVM tool");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Rows of MANIFEST.tsv as (path, column map).
pub fn manifest() -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(corpus().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("header").split('\t').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split('\t').map(str::to_string))
                .collect()
        })
        .collect()
}
