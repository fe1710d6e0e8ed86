//! Shared by the CLI tests that assemble their own code objects and check the rewrite with
//! `sqtt-patch verify`. Included with `#[path]` by the tests that use it.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// Assembles AMDGPU assembly `source` for `mcpu` with clang-22 and links it with ld.lld-22 into
/// `dir/{name}.co` (a real code object, as LLVM's tools make it).
#[allow(dead_code)] // not every test file that includes this module assembles
pub fn assemble(dir: &Path, name: &str, mcpu: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.s"));
    let obj = dir.join(format!("{name}.o"));
    let co = dir.join(format!("{name}.co"));
    std::fs::write(&src, source).unwrap();
    let ok = std::process::Command::new("/usr/lib/llvm-22/bin/clang")
        .args([
            "-target",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-c",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("clang-22 (apt-get install clang-22)")
        .success();
    assert!(ok, "assembling {name}");
    let ok = std::process::Command::new("/usr/lib/llvm-22/bin/ld.lld")
        .arg("-shared")
        .arg(&obj)
        .arg("-o")
        .arg(&co)
        .status()
        .expect("ld.lld-22 (apt-get install lld-22)")
        .success();
    assert!(ok, "linking {name}");
    co
}

/// `sqtt-patch verify ORIG NEW`: its exit code and everything it printed.
pub fn verify(orig: &Path, new: &Path) -> (i32, String) {
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg("verify")
        .arg(orig)
        .arg(new)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// `sqtt-patch CO -o OUT ARGS --report-json JSON` with the feature variables of the caller's
/// environment removed: asserts exit 0 and status "instrumented", returns the JSON report.
#[allow(dead_code)] // not every test file that includes this module rewrites
pub fn rewrite(co: &Path, out: &Path, args: &[&str]) -> serde_json::Value {
    let json = out.with_extension("json");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(co)
        .arg("-o")
        .arg(out)
        .args(args)
        .arg("--report-json")
        .arg(&json)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["status"], "instrumented", "{r}");
    r
}
