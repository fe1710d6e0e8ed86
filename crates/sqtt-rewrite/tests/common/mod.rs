//! Shared helper of the tests that build their own code objects with LLVM 22.
use std::process::Command;

/// Directory of the LLVM 22 tools.
#[allow(dead_code)] // not every test file that includes this module runs LLVM
pub const LLVM: &str = "/usr/lib/llvm-22/bin";

/// Compiles `source` (clang `-x` language `lang`: `assembler`, `cl`, ...) for `mcpu` with
/// clang-22 plus `extra` flags, links it with `ld.lld-22 -shared`, and returns the code object
/// bytes. Panics with the tool's stderr when a step fails.
#[allow(dead_code)] // not every test file that includes this module builds objects
pub fn build_code_object(lang: &str, source: &str, mcpu: &str, extra: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, obj, co) = (
        dir.path().join("k.src"),
        dir.path().join("k.o"),
        dir.path().join("k.co"),
    );
    std::fs::write(&src, source).expect("write source");
    let out = Command::new(format!("{LLVM}/clang"))
        .args(["-x", lang, "-target", "amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={mcpu}"))
        .args(extra)
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("run clang-22");
    assert!(
        out.status.success(),
        "clang-22 ({mcpu}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(format!("{LLVM}/ld.lld"))
        .arg("-shared")
        .arg(&obj)
        .arg("-o")
        .arg(&co)
        .output()
        .expect("run ld.lld-22");
    assert!(
        out.status.success(),
        "ld.lld-22 ({mcpu}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(co).expect("read code object")
}

/// The `.text` of code object `bytes` decoded for target `t`, as (file offset, instruction)
/// pairs.
#[allow(dead_code)] // not every test file that includes this module decodes text
pub fn text_insts(bytes: &[u8], t: &str) -> Vec<(usize, amdgpu_isa::Instruction)> {
    let co = hsaco::CodeObject::parse(bytes).expect("parse");
    let text = co.text().expect(".text");
    let target = amdgpu_isa::Target::from_name(t).expect("target");
    let mut off = text.offset as usize;
    amdgpu_isa::decode_all(co.section_data(text), target)
        .expect("decode")
        .into_iter()
        .map(|i| {
            let at = off;
            off += i.len();
            (at, i)
        })
        .collect()
}
