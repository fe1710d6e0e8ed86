//! `F:` scopes of in-kernel subroutines (issue 37 item 3) on the call-table kernel
//! `tl_calltable` of `fixtures/tensile` (`fixtures/src/tensile.S`): three subroutines after the
//! kernel's `s_endpgm`, each at a local `label_Activation_*` symbol, called by two
//! `s_swappc_b64 s[30:31], s[10:11]` and returning with `s_setpc_b64 s[30:31]`.
//!
//! Oracles: llvm-objdump-22 (the labels of the output and the instructions at and before
//! them: the enter marker is the first instruction at each subroutine label, the exit marker
//! the last before each returning `s_setpc_b64`), `sqtt-patch funcmap` (the rows and their
//! ids, which the markers must carry), the independent verifier (accepts the outputs; rejects
//! an output with an exit marker taken out or a row renamed).

mod tensile_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tensile_common::{fixture, verify, BIN, TARGETS};

/// The call-table kernel's subroutine labels.
const SUBROUTINES: [&str; 3] = [
    "label_Activation_None_VW1_0",
    "label_Activation_Relu_VW1_0",
    "label_Activation_Scale_VW1_0",
];

const FLAGS: [&str; 5] = ["--functions", "1", "--barriers", "1", "--kernel-scopes"];

/// `sqtt-patch IN -o DIR/TARGET.co FLAGS`; asserts exit 0.
fn patch(dir: &Path, target: &str) -> PathBuf {
    let out = dir.join(format!("{target}.co"));
    let o = Command::new(BIN)
        .arg(fixture(target))
        .arg("-o")
        .arg(&out)
        .args(FLAGS)
        .output()
        .expect("run sqtt-patch");
    assert!(
        o.status.success(),
        "{target}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The `F:` rows `sqtt-patch funcmap` prints (kind `function`): name → id.
fn function_rows(co: &Path) -> BTreeMap<String, u32> {
    let o = Command::new(BIN)
        .arg("funcmap")
        .arg(co)
        .output()
        .expect("run sqtt-patch funcmap");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 5 && w[1] == "function").then(|| {
                let id = w[0]
                    .parse()
                    .unwrap_or_else(|_| panic!("decimal id in {l:?}"));
                (w[4].to_string(), id)
            })
        })
        .collect()
}

/// One instruction of llvm-objdump-22's listing, with the label it starts (if any).
#[derive(Debug)]
struct Insn {
    addr: u64,
    text: String,
    label: Option<String>,
}

/// llvm-objdump-22 -d of `co`, in address order.
fn objdump(co: &Path) -> Vec<Insn> {
    let o = Command::new("llvm-objdump-22")
        .args(["-d", "--no-show-raw-insn"])
        .arg(co)
        .output()
        .expect("llvm-objdump-22 (install llvm-22: tools/setup.sh)");
    assert!(o.status.success());
    let mut out = Vec::new();
    let mut label = None;
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if let Some(name) = l.strip_suffix(">:").and_then(|s| s.split_once(" <")) {
            label = Some(name.1.to_string());
        } else if let Some((ins, rest)) = l.split_once("//") {
            let Some(a) = rest
                .trim()
                .split(':')
                .next()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            else {
                continue;
            };
            out.push(Insn {
                addr: a,
                text: ins.trim().to_string(),
                label: label.take(),
            });
        }
    }
    out
}

fn imm(s: &str) -> Option<u32> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The marker word the instructions starting at `i` emit: `s_ttracedata_imm V`, or
/// `s_mov_b32 m0, V; s_nop 0; s_ttracedata`.
fn marker_at(ins: &[Insn], i: usize) -> Option<u32> {
    let t = &ins.get(i)?.text;
    if let Some(v) = t.strip_prefix("s_ttracedata_imm ") {
        return imm(v);
    }
    let v = t.strip_prefix("s_mov_b32 m0, ")?;
    (ins.get(i + 1)?.text == "s_nop 0" && ins.get(i + 2)?.text == "s_ttracedata")
        .then(|| imm(v))
        .flatten()
}

/// The marker word of the snippet that ends right before instruction `i`.
fn marker_before(ins: &[Insn], i: usize) -> Option<u32> {
    let prev = &ins.get(i.checked_sub(1)?)?.text;
    if prev.starts_with("s_ttracedata_imm ") {
        marker_at(ins, i - 1)
    } else if prev == "s_ttracedata" {
        marker_at(ins, i.checked_sub(3)?)
    } else {
        None
    }
}

/// Each subroutine label of the output starts with the enter marker of its `F:` row, each
/// returning `s_setpc_b64` after it is preceded by the exit marker, `sqtt-patch funcmap` lists
/// one `F:` row per subroutine named by its label (and no other), and the verifier accepts.
#[test]
fn call_table_subroutines_get_function_scopes() {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let out = patch(t.path(), target);
        let rows = function_rows(&out);
        let names: Vec<&str> = rows.keys().map(String::as_str).collect();
        assert_eq!(names, SUBROUTINES, "{target}: F rows {rows:?}");
        let ins = objdump(&out);
        for l in SUBROUTINES {
            let at = ins
                .iter()
                .position(|i| i.label.as_deref() == Some(l))
                .unwrap_or_else(|| panic!("{target}: no label {l}"));
            assert_eq!(
                marker_at(&ins, at),
                Some((rows[l] << 2) | 2),
                "{target}: {l} at {:#x} starts with {:?}",
                ins[at].addr,
                ins[at].text
            );
            let ret = (at..ins.len())
                .find(|&i| ins[i].text.starts_with("s_setpc_b64"))
                .unwrap_or_else(|| panic!("{target}: no return after {l}"));
            assert_eq!(ins[ret].text, "s_setpc_b64 s[30:31]", "{target}: {l}");
            assert_eq!(
                marker_before(&ins, ret),
                Some(1),
                "{target}: {l}: no exit marker before the return at {:#x}",
                ins[ret].addr
            );
        }
        let (code, text) = verify(&fixture(target), &out);
        assert_eq!(code, 0, "{target}: {text}");
    }
}

/// The byte range of section `name` in the file `bytes`.
fn section(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    let co = hsaco::CodeObject::parse(bytes).expect("parse");
    let s = co
        .elf
        .sections
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name}"));
    s.offset as usize..(s.offset + s.size) as usize
}

/// `bytes` with `from` replaced by `to` (same length) inside the `.sqtt_funcmap` section.
fn rename_row(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let r = section(bytes, ".sqtt_funcmap");
    let mut v = bytes.to_vec();
    let at = v[r.clone()]
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .expect("row in the funcmap")
        + r.start;
    v[at..at + to.len()].copy_from_slice(to.as_bytes());
    v
}

/// The verifier proves each subroutine's scope, not the kernel's: with the exit marker before
/// one subroutine's return taken out (its last marker instruction made `s_nop 0`, same size),
/// with a row renamed to another subroutine's label, or to a label that does not exist, the
/// output is rejected with the matching finding.
#[test]
fn call_table_subroutine_mutations_are_rejected() {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let out = patch(t.path(), target);
        let bytes = std::fs::read(&out).expect("read");
        let ins = objdump(&out);
        let text = section(&bytes, ".text");
        let text_addr = {
            let co = hsaco::CodeObject::parse(&bytes).expect("parse");
            co.elf
                .sections
                .iter()
                .find(|s| s.name == ".text")
                .expect(".text")
                .addr
        };
        let mutated = t.path().join("mutated.co");
        let rejected = |v: &[u8], want: &str, what: &str| {
            std::fs::write(&mutated, v).expect("write");
            let (code, msg) = verify(&fixture(target), &mutated);
            assert_eq!(code, 1, "{target}: {what}: want a rejection:\n{msg}");
            assert!(
                msg.contains(want),
                "{target}: {what}: want {want:?}:\n{msg}"
            );
        };
        for l in SUBROUTINES {
            let at = ins
                .iter()
                .position(|i| i.label.as_deref() == Some(l))
                .expect("label");
            let ret = (at..ins.len())
                .find(|&i| ins[i].text.starts_with("s_setpc_b64"))
                .expect("return");
            // The last instruction of the exit snippet: s_ttracedata_imm 0x1 or s_ttracedata.
            let last = &ins[ret - 1];
            assert!(last.text.starts_with("s_ttracedata"), "{target}: {last:?}");
            let off = text.start + (last.addr - text_addr) as usize;
            let mut v = bytes.clone();
            v[off..off + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
            rejected(
                &v,
                "still open at s_setpc_b64 (return of an in-kernel subroutine)",
                &format!("{l}: exit marker taken out"),
            );
        }
        let wrong = rename_row(&bytes, SUBROUTINES[0], SUBROUTINES[1]);
        rejected(
            &wrong,
            "which is not the in-kernel subroutine entered here",
            "row named after another subroutine",
        );
        let none = rename_row(&bytes, SUBROUTINES[0], "label_Activation_Nonx_VW1_0");
        rejected(&none, "no in-kernel subroutine", "row naming no label");
    }
}

/// A return whose pair is a call table's (the fixture's `s_setpc_b64 s[30:31]` at file offset
/// 0xdf0 turned into `s_setpc_b64 s[10:11]`: a jump into a subroutine). The verifier's walk
/// then meets an instruction that starts its own straight chain after an added predecessor
/// split another; it panicked there (session-26 fresh tester). The rewrite and its
/// verification run as before the run-skipping walks: exit 0, the output verified.
#[test]
fn a_return_through_the_call_table_pair_is_walked_without_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = std::fs::read(fixture("gfx1201")).expect("fixture");
    assert_eq!(
        bytes[0xdf0], 0x1e,
        "the fixture's return no longer sits at 0xdf0"
    );
    bytes[0xdf0] = 0x0a;
    let input = dir.path().join("ret.co");
    std::fs::write(&input, &bytes).expect("write input");
    let out = dir.path().join("ret.instr.co");
    let o = Command::new(BIN)
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .args(["--barriers", "1"])
        .output()
        .expect("run sqtt-patch");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let (code, text) = verify(&input, &out);
    assert_eq!(code, 0, "{text}");
}
