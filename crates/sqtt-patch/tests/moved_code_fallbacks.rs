//! Valid inputs whose rewrite our own verifier rejected (exit 1, nothing written), found by the
//! session-24 fresh tester; each now ends in a verified output.
//!
//! - The input's padding after its last function waits more than one state (`s_nop 1`): copied
//!   as it is, it was rejected as "s_nop after the end of the function (padding must be
//!   s_nop 0)". Any `s_nop` is padding now, as the rewriter already took it.
//! - A call's address builder aimed past 4 GiB (`s_addc_u32 s1, s1, 1`): the function is left
//!   alone, and moved as one block its builder reached the wrong address. When the verifier
//!   rejects a rewrite in which code moved, the object is rewritten once more with `.text` kept
//!   in place, so that every function left alone runs from its original address.
//!
//! Inputs are fixtures with bytes changed in place; `llvm-objdump-22 -d` confirms each edit.

#[path = "support/asm.rs"]
mod asm;
mod support;

use std::path::{Path, PathBuf};
use support::fixture;

/// Writes `bytes` to `dir/name` and returns its path.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write input");
    p
}

/// `llvm-objdump-22 -d` of `co` for `mcpu`.
fn disassemble(co: &Path, mcpu: &str) -> String {
    let o = std::process::Command::new("llvm-objdump-22")
        .arg("-d")
        .arg(format!("--mcpu={mcpu}"))
        .arg(co)
        .output()
        .expect("llvm-objdump-22 (LLVM 22) is needed: tools/setup.sh");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn padding_that_waits_is_copied_and_verified() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut co = fixture("objects/gfx942__barriers__O3.co");
    let f = object_text_end(&co);
    // The last word of `.text` is the linker's padding `s_nop 0` (0xbf800000)...
    assert_eq!(co[f - 4..f], [0x00, 0x00, 0x80, 0xbf]);
    // ... and becomes `s_nop 1`.
    co[f - 4] = 1;
    let input = write(t.path(), "pad.co", &co);
    assert!(disassemble(&input, "gfx942").contains("s_nop 1"));
    let out = t.path().join("pad.out.co");
    let r = asm::rewrite(&input, &out, &["--barriers", "1"]);
    assert_eq!(r["left_alone"].as_array().map(Vec::len), Some(0), "{r}");
    assert_ne!(r["text_kept_in_place"], true, "{r}");
    let (code, text) = asm::verify(&input, &out);
    assert_eq!(code, 0, "{text}");
}

/// File offset of the end of `.text` (bytes).
fn object_text_end(co: &[u8]) -> usize {
    let parsed = hsaco::CodeObject::parse(co).expect("fixture parses");
    let text = parsed.text().expect(".text");
    (text.offset + text.size) as usize
}

#[test]
fn a_call_builder_aimed_past_4_gib_keeps_text_in_place() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut co = fixture("objects/gfx1100__calls__O3.co");
    // `s_addc_u32 s1, s1, lit(0xffffffff)` of the call builders (llvm-mc-22 encoding
    // 8201ff01 ffffffff): the first one's literal becomes 1.
    let pattern = [0x01, 0xff, 0x01, 0x82, 0xff, 0xff, 0xff, 0xff];
    let at = (0..=co.len() - pattern.len())
        .find(|&k| co[k..k + pattern.len()] == pattern)
        .expect("a call builder's high add");
    co[at + 4..at + 8].copy_from_slice(&1u32.to_le_bytes());
    let input = write(t.path(), "far.co", &co);
    assert!(disassemble(&input, "gfx1100").contains("s_addc_u32 s1, s1, lit(0x1)"));
    let out = t.path().join("far.out.co");
    let r = asm::rewrite(&input, &out, &["--functions", "1"]);
    assert_eq!(r["text_kept_in_place"], true, "{r}");
    let left = r["left_alone"].as_array().expect("left_alone");
    assert_eq!(left.len(), 1, "{r}");
    assert!(
        left[0]["why"]
            .as_str()
            .is_some_and(|w| w.contains("which is not a function entry")),
        "{r}"
    );
    let notes = r["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n.as_str().is_some_and(
            |n| n.starts_with(".text kept in place: with code moved, the verifier rejected")
        )),
        "{r}"
    );
    // The other functions are instrumented.
    let marked = r["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter(|f| f["inserted_instructions"].as_u64() > Some(0))
        .count();
    assert!(marked >= 5, "{r}");
    let (code, text) = asm::verify(&input, &out);
    assert_eq!(code, 0, "{text}");
}
