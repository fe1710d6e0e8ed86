//! Device functions that no kernel of the object calls (issue 39 item 6), on
//! `fixtures/callers/{gfx942,gfx1100}__callers__O3.co` (from `fixtures/src/callers.S`):
//! - `ext_fn` is exported (like clang >= 21's `__clang_ocl_kern_imp_<kernel>` twins) and `cb_fn`
//!   has its address in `.data` (an `R_AMDGPU_RELATIVE64`, like rocFFT's callbacks): callers
//!   outside the object follow the AMDGPU function calling convention, so every address-trace
//!   site of both is instrumented with scratch SGPRs among the callee-clobbered s0..s29, never
//!   among s30..s105 (the caller may read them after the return);
//! - `dead_fn` is local, never called, its address never taken: its load (every one of s0..s29
//!   read after it) is skipped with the named reason and counted apart (`in_unreachable`).
//!
//! Oracles: llvm-readelf-22 (the symbols and relocation the fixture is about), llvm-objdump-22
//! (the SGPRs the inserted `v_readlane_b32` write in the output) and the independent verifier,
//! which must also reject the output once one of those writes is moved to s40.
mod common;
use common::text_insts;
use sqtt_rewrite::config::{Options, TraceAddresses};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::Path;
use std::process::Command;

const TARGETS: [&str; 2] = ["gfx942", "gfx1100"];

fn fixture_path(target: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/callers")
        .join(format!("{target}__callers__O3.co"))
}

fn trace() -> Options {
    Options {
        trace_addresses: Some(TraceAddresses {
            memory: true,
            lds: true,
        }),
        ..Options::default()
    }
}

fn llvm(tool: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(format!("/usr/lib/llvm-22/bin/{tool}"))
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{tool} (LLVM 22): {e}"));
    assert!(out.status.success(), "{tool} {}", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn no_llvm() -> bool {
    std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1")
}

#[test]
fn fixture_has_an_exported_an_address_taken_and_an_unreachable_function() {
    if no_llvm() {
        return;
    }
    for t in TARGETS {
        let p = fixture_path(t);
        let syms = llvm("llvm-readelf", &["-s", "--wide"], &p);
        let sym = |name: &str| {
            syms.lines()
                .find(|l| l.split_whitespace().last() == Some(name) && l.contains("FUNC"))
                .unwrap_or_else(|| panic!("{t}: no symbol {name}"))
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let ext = sym("ext_fn");
        assert_eq!((ext[4].as_str(), ext[5].as_str()), ("GLOBAL", "DEFAULT"));
        let cb = sym("cb_fn");
        assert_eq!(cb[4], "LOCAL");
        assert_eq!(sym("dead_fn")[4], "LOCAL");
        let relocs = llvm("llvm-readelf", &["-r", "--wide"], &p);
        let cb_addr = u64::from_str_radix(&cb[1], 16).expect("address");
        assert!(
            relocs.lines().any(|l| l.contains("R_AMDGPU_RELATIVE64")
                && l.split_whitespace()
                    .last()
                    .and_then(|a| u64::from_str_radix(a, 16).ok())
                    == Some(cb_addr)),
            "{t}: cb_fn's address is stored in data: {relocs}"
        );
    }
}

#[test]
fn functions_called_from_outside_get_scratch_sgprs_by_the_calling_convention() {
    for t in TARGETS {
        let input = std::fs::read(fixture_path(t)).expect("fixture");
        let out = rewrite(&input, &trace()).expect("rewrite");
        let r = &out.report;
        assert_eq!(r.status, Status::Instrumented, "{t}: {:?}", r.reasons);
        let skipped: Vec<_> = r.skipped.iter().map(|s| (&s.function, &s.why)).collect();
        assert_eq!(
            skipped.len(),
            1,
            "{t}: only dead_fn's load is skipped: {skipped:?}"
        );
        assert_eq!(r.skipped[0].function, "dead_fn");
        assert!(
            r.skipped[0]
                .why
                .starts_with(sqtt_rewrite::callers::UNREACHABLE),
            "{t}: {}",
            r.skipped[0].why
        );
        let c = &r.coverage[0];
        assert_eq!(
            (c.feature, c.instrumented, c.found, c.in_unreachable),
            ("address_trace", 6, 7, 1),
            "{t}"
        );
        let bytes = out.bytes.expect("output");
        let v = sqtt_verify::verify(&input, &bytes).expect("verify");
        assert!(v.is_clean(), "{t}: {:?}", v.findings);
        if no_llvm() {
            continue;
        }
        // Every SGPR an inserted v_readlane_b32 writes inside ext_fn and cb_fn is below s30.
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("out.co");
        std::fs::write(&f, &bytes).expect("write");
        let dis = llvm("llvm-objdump", &["-d"], &f);
        let mut current = String::new();
        let mut seen = 0;
        for l in dis.lines() {
            if let Some(name) = l.strip_suffix(">:").and_then(|l| l.split_once('<')) {
                current = name.1.to_string();
                continue;
            }
            let Some(rest) = l.trim().strip_prefix("v_readlane_b32 s") else {
                continue;
            };
            if current == "ext_fn" || current == "cb_fn" {
                let n: u32 = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|d| d.parse().ok())
                    .expect("sgpr");
                assert!(n < 30, "{t} {current}: scratch s{n} is callee-saved: {l}");
                seen += 1;
            }
        }
        assert!(seen >= 4, "{t}: address loops in ext_fn and cb_fn: {seen}");
    }
}

#[test]
fn verifier_rejects_scratch_in_a_callee_saved_sgpr() {
    for t in TARGETS {
        let input = std::fs::read(fixture_path(t)).expect("fixture");
        let bytes = rewrite(&input, &trace())
            .expect("rewrite")
            .bytes
            .expect("output");
        let co = hsaco::CodeObject::parse(&bytes).expect("parse");
        let ext = co
            .functions
            .iter()
            .find(|f| f.name == "ext_fn")
            .expect("ext_fn");
        let text = co.text().expect(".text");
        let (lo, hi) = (
            (ext.address - text.addr + text.offset) as usize,
            (ext.address + ext.size - text.addr + text.offset) as usize,
        );
        let (at, _) = text_insts(&bytes, t)
            .into_iter()
            .find(|(at, i)| (lo..hi).contains(at) && i.mnemonic() == "v_readlane_b32")
            .expect("an inserted v_readlane_b32 in ext_fn");
        // VOP3 vdst (the SGPR v_readlane_b32 writes) is bits 7:0 of the first dword.
        let mut bad = bytes.clone();
        bad[at] = 40;
        let v = sqtt_verify::verify(&input, &bad).expect("verify");
        assert!(
            v.findings
                .iter()
                .any(|f| f.message.contains("s40, which is live")),
            "{t}: an inserted write of s40 (callee-saved) in ext_fn must be rejected: {:?}",
            v.findings
        );
    }
}
