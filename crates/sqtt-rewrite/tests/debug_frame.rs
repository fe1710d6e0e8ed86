//! DWARF never costs the object (issue 29 item 5), on `fixtures/objects/gfx942__debug-frame__*.co`
//! (from `fixtures/src/debug_frame.S`, assembled with `-g`):
//! - `llvm`: the `.debug_frame` CIE carries LLVM's vendor augmentation `[llvm:v0.0]`
//!   (AMDGPUUsage, "Call Frame Information"): the FDE is remapped like any other;
//! - `bad-cfa`: the FDE also holds an opcode no DWARF defines: `.debug_frame` is emptied, the
//!   report says so, and the code is still instrumented.
//!
//! Oracles: `llvm-dwarfdump-22 --verify` and `--debug-frame` on the output, the independent
//! verifier (`sqtt_verify::verify`).
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::Path;
use std::process::Command;

/// Instruments fixture `variant` with functions and barriers; checks the status, the verifier
/// and `llvm-dwarfdump-22 --verify`; returns the report's notes and `llvm-dwarfdump-22
/// --debug-frame` of the input and of the output.
fn instrument(variant: &str) -> (Vec<String>, String, String) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(format!("gfx942__debug-frame__{variant}.co"));
    let input = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        ..Options::default()
    };
    let out = rewrite(&input, &opts).expect("rewrite");
    assert_eq!(
        out.report.status,
        Status::Instrumented,
        "{variant}: {:?}",
        out.report.reasons
    );
    let bytes = out.bytes.expect("output");
    assert_ne!(bytes, input, "{variant}: the code moved");
    let v = sqtt_verify::verify(&input, &bytes).expect("verify");
    assert!(
        v.findings.is_empty(),
        "{variant}: {:?}",
        v.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("out.co");
    std::fs::write(&f, &bytes).expect("write");
    let dump = |args: &[&str], file: &Path| {
        let o = Command::new("/usr/lib/llvm-22/bin/llvm-dwarfdump")
            .args(args)
            .arg(file)
            .output()
            .expect("llvm-dwarfdump-22");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (ok, text) = dump(&["--verify"], &f);
    assert!(ok && text.contains("No errors."), "{variant}: {text}");
    let (_, before) = dump(&["--debug-frame"], &p);
    let (_, after) = dump(&["--debug-frame"], &f);
    (out.report.notes, before, after)
}

/// `pc=START...END` of the FDE line of a `--debug-frame` dump.
fn fde_range(dump: &str) -> Option<(u64, u64)> {
    let pc = dump
        .lines()
        .find(|l| l.contains(" FDE "))?
        .split("pc=")
        .nth(1)?;
    let (a, b) = pc.split_once("...")?;
    Some((
        u64::from_str_radix(a.trim(), 16).ok()?,
        u64::from_str_radix(b.trim(), 16).ok()?,
    ))
}

#[test]
fn llvm_vendor_cie_augmentation_is_remapped() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let (_, before, after) = instrument("llvm");
    assert!(
        after.contains("Augmentation:          \"[llvm:v0.0]\""),
        "{after}"
    );
    let (a0, b0) = fde_range(&before).expect("input FDE");
    let (a1, b1) = fde_range(&after).expect("output FDE");
    assert_eq!(a0, a1, "the kernel entry stays where it is");
    assert!(
        b1 > b0,
        "the FDE covers the grown kernel: {b0:#x} -> {b1:#x}"
    );
}

#[test]
fn unremappable_debug_frame_is_dropped_and_the_code_instrumented() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    // (llvm-dwarfdump-22 stops at the input's bad opcode: the input is not dumped.)
    let (notes, _, after) = instrument("bad-cfa");
    assert!(
        !after.contains(" CIE") && !after.contains(" FDE "),
        "{after}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains(".debug_frame") && n.contains("emptied")),
        "{notes:?}"
    );
}
