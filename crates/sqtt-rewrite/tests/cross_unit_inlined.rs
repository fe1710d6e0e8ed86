//! Inlined functions whose abstract origins lie in another compile unit (issue 39 item 3): the
//! `rdc` fixture (`fixtures/src/rdc_main.hip` + `rdc_lib.hip`, `-fgpu-rdc -flto`, linked by
//! ld.lld-22) inlines `hash_span`, `mix_word` and `Mixer::step` of `rdc_lib.hip` into
//! `rdc_main.hip`'s kernel; the `DW_TAG_inlined_subroutine` entries reach their origins through
//! `DW_FORM_ref_addr`, and `Mixer::step`'s origin names it only through `DW_AT_specification`.
//! Oracles: llvm-dwarfdump-22 (the forms, the names it resolves, `--verify` of the output).
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use sqtt_funcmap::Row;
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use sqtt_verify::Check;

const DWARFDUMP: &str = "/usr/lib/llvm-22/bin/llvm-dwarfdump";

fn fixture() -> Vec<u8> {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/rdc/gfx1100__rdc__O3-g.co");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// llvm-dwarfdump-22 `args` of `bytes`: (exit status success, stdout).
fn dwarfdump(bytes: &[u8], args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("in.co");
    std::fs::write(&p, bytes).expect("write");
    let out = Command::new(DWARFDUMP)
        .args(args)
        .arg(&p)
        .output()
        .expect("llvm-dwarfdump-22");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Names llvm-dwarfdump-22 prints for the `DW_AT_abstract_origin` of every inlined subroutine
/// (it resolves them through the reference chain), split by whether the reference is
/// `DW_FORM_ref_addr`.
fn origin_names(bytes: &[u8]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (_, text) = dwarfdump(bytes, &["--debug-info", "--show-form"]);
    let (mut cross, mut local) = (BTreeSet::new(), BTreeSet::new());
    let mut in_inlined = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.contains("DW_TAG_") || t == "NULL" {
            in_inlined = t.contains("DW_TAG_inlined_subroutine");
        } else if in_inlined && t.starts_with("DW_AT_abstract_origin") {
            let name = t.split('"').nth(1).unwrap_or_default().to_string();
            if t.contains("[DW_FORM_ref_addr]") {
                cross.insert(name);
            } else {
                local.insert(name);
            }
        }
    }
    (cross, local)
}

#[test]
fn cross_unit_inlined_functions_are_marked_with_their_names_and_verify() {
    let orig = fixture();
    let (cross, local) = origin_names(&orig);
    let want: BTreeSet<String> = ["_Z9hash_spanPKjjj", "_Z8mix_wordjj", "_ZN5Mixer4stepEj"]
        .map(String::from)
        .into();
    assert_eq!(cross, want, "the fixture's DW_FORM_ref_addr origins");

    let opts = Options {
        functions: FunctionThreshold::Count(1),
        ..Options::default()
    };
    let out = rewrite(&orig, &opts).expect("rewrite");
    assert_eq!(out.report.status, Status::Instrumented);
    let inl = &out.report.inlined;
    assert!(
        inl.unavailable.is_none() && inl.left_out.is_empty(),
        "{inl:?}"
    );
    let new = out.bytes.expect("bytes");
    let r = sqtt_verify::verify(&orig, &new).expect("verify");
    assert!(r.is_clean(), "{:#?}", r.findings);
    let (ok, text) = dwarfdump(&new, &["--verify"]);
    assert!(ok, "llvm-dwarfdump-22 --verify of the output:\n{text}");

    // Every F row without a symbol names an inlined function llvm-dwarfdump-22 names, and every
    // cross-unit one is there.
    let co = hsaco::CodeObject::parse(&new).expect("parse");
    let rows: BTreeSet<String> = sqtt_funcmap::parse(co.funcmap().expect("funcmap"))
        .rows
        .into_iter()
        .filter_map(|r| match r {
            Row::Function { name, .. } if name != "k_rdc" => Some(name),
            _ => None,
        })
        .collect();
    let dwarf: BTreeSet<String> = cross.union(&local).cloned().collect();
    assert!(rows.is_subset(&dwarf), "{rows:?} not all in {dwarf:?}");
    assert!(rows.is_superset(&want), "{rows:?} lacks some of {want:?}");

    // Mutation: one F row renamed (same length, so nothing moves) must be caught.
    let fm = co.section(".sqtt_funcmap").expect(".sqtt_funcmap");
    let (start, len) = (fm.offset as usize, fm.size as usize);
    let at = new[start..start + len]
        .windows(13)
        .position(|w| w == b"_Z8mix_wordjj")
        .expect("row of mix_word");
    let mut bad = new.clone();
    bad[start + at + 11..start + at + 13].copy_from_slice(b"xx");
    let r = sqtt_verify::verify(&orig, &bad).expect("verify");
    assert!(
        r.findings.iter().any(|f| f.check == Check::Funcmap
            && f.message
                .contains("\"_Z8mix_wordxx\" names no device function")),
        "renamed F row not caught: {:#?}",
        r.findings
    );
}
