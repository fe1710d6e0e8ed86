//! Shared by the CLI tests that assemble their own code objects and check the rewrite with
//! `sqtt-patch verify`. Included with `#[path]` by the tests that use it.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// Assembles AMDGPU assembly `source` for `mcpu` with clang-22 and links it with ld.lld-22 into
/// `dir/{name}.co` (a real code object, as LLVM's tools make it).
#[allow(dead_code)] // not every test file that includes this module assembles
pub fn assemble(dir: &Path, name: &str, mcpu: &str, source: &str) -> PathBuf {
    assemble_with(dir, name, mcpu, source, &[])
}

/// [`assemble`] with more clang-22 arguments (`-g`: DWARF for the assembly source itself, one
/// line-table row per instruction).
#[allow(dead_code)] // not every test file that includes this module assembles
pub fn assemble_with(dir: &Path, name: &str, mcpu: &str, source: &str, args: &[&str]) -> PathBuf {
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
        .args(args)
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

/// Source of a code object for `mcpu` with one kernel `k` whose body is `body` (assembly lines),
/// taking an 8-byte kernarg segment (pointer in s[0:1] on gfx10+, s[4:5] on gfx9 with the
/// usual user SGPRs), 8 VGPRs and 16 SGPRs, wave32 when `wave32` (gfx10+) else wave64.
#[allow(dead_code)] // not every test file that includes this module builds its kernel here
pub fn kernel(mcpu: &str, wave32: bool, body: &str) -> String {
    let wave = if wave32 { 32 } else { 64 };
    format!(
        r#".amdgcn_target "amdgcn-amd-amdhsa--{mcpu}"
.text
.globl k
.p2align 8
.type k,@function
k:
{body}
.Lk_end:
.size k, .Lk_end-k
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 16
{w32}.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .wavefront_size: {wave}
    .sgpr_count: 16
    .vgpr_count: 8
    .max_flat_workgroup_size: 256
...
.end_amdgpu_metadata
"#,
        w32 = if wave32 {
            "  .amdhsa_wavefront_size32 1\n"
        } else {
            ""
        }
    )
}
