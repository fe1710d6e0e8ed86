//! The verifier's marker-balance proof (issue 16, spec "Semantic rules": enters and exits
//! properly nested) on real rewriter outputs: every fixture instrumented with function scopes,
//! kernel scopes and barriers passes, and the same output with ONE exit marker replaced by
//! `s_nop 0` (same size, so nothing else moves) is rejected with a `markers` finding.
use std::path::PathBuf;

use amdgpu_isa::{build, Special};
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use sqtt_verify::{layout, verify, Check};

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/objects");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/objects")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "co"))
        .collect();
    v.sort();
    v
}

/// Address (bytes) of every inserted exit marker word `0x1` of `new`: `s_ttracedata_imm 1`, or
/// `s_ttracedata` right after `s_mov_b32 m0, 1` / `s_nop 0` (the verifier's own alignment tells
/// inserted from original instructions).
fn exit_markers(orig: &[u8], new: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    for (_, insts) in layout(orig, new).expect("layout") {
        for (i, x) in insts.iter().enumerate() {
            if !x.inserted {
                continue;
            }
            let exit = match x.inst.special() {
                Special::TtraceDataImm(v) => v == 1,
                Special::TtraceData => {
                    i >= 2 && {
                        let m = &insts[i - 2].inst;
                        m.mnemonic() == "s_mov_b32"
                            && m.to_string().contains("m0")
                            && m.to_string().ends_with(", 1")
                    }
                }
                _ => false,
            };
            if exit {
                out.push(x.addr);
            }
        }
    }
    out
}

#[test]
fn every_fixture_output_balances_and_a_removed_exit_is_rejected() {
    let opts = Options {
        functions: FunctionThreshold::Count(1),
        kernel_scopes: true,
        barriers: true,
        ..Options::default()
    };
    let (mut checked, mut broken) = (0, 0);
    for p in fixtures() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let orig = std::fs::read(&p).expect("read");
        let out = rewrite(&orig, &opts).expect("rewrite");
        if out.report.status != Status::Instrumented {
            continue;
        }
        let new = out.bytes.expect("bytes");
        let r = verify(&orig, &new).expect("verify");
        assert!(r.is_clean(), "{name}: {:#?}", r.findings);
        checked += 1;
        let exits = exit_markers(&orig, &new);
        // Break the middle exit (not always the first or last).
        let Some(&at) = exits.get(exits.len() / 2) else {
            continue;
        };
        let co = hsaco::CodeObject::parse(&new).expect("parse");
        let text = co.text().expect(".text");
        let t = amdgpu_isa::Target::from_elf_mach(co.elf.header.e_flags & 0xff).expect("target");
        let nop = build::s_nop(t, 0).expect("s_nop 0");
        let off = (text.offset + at - text.addr) as usize;
        let mut bad = new.clone();
        bad[off..off + 4].copy_from_slice(nop.bytes());
        let r = verify(&orig, &bad).expect("verify");
        let f = r
            .findings
            .iter()
            .find(|f| f.check == Check::Markers)
            .unwrap_or_else(|| panic!("{name}: exit at {at:#x} removed, not caught"));
        assert!(
            f.message.contains("still open") || f.message.contains("meet here"),
            "{name}: {f}"
        );
        broken += 1;
    }
    // Most fixtures have scopes: a silent skip of everything would be a defect.
    assert!(
        checked > 200 && broken > 200,
        "{checked} checked, {broken} broken"
    );
}
