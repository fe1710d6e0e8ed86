//! Tensile-shaped fixtures (issue 37, `fixtures/src/tensile.S`): long branches whose offset is
//! computed in an SGPR (forward `s_add_i32 sN, LIT, 4; s_add_u32; s_addc_u32`, backward with
//! `s_abs_i32` and `s_sub_u32`/`s_subb_u32`, gfx12 `_co` names), in size-0 kernel symbols
//! followed by zero padding, with local `label_*` symbols.
//!
//! Proof, not only patterns: every output is checked against oracles that are neither the
//! rewriter nor the verifier. `llvm-objdump-22` decodes each long branch of the output and the
//! target it computes (`getpc + 4 + LIT + 4`, or `getpc + 4 - |LIT + 4|`) must be the new
//! address of the local label the original branch reached; the `sqtt-interp` model wave executes
//! each long-branch stretch of the original and of the output and must land on the same labels,
//! with the same registers. A literal moved by 4 bytes must be rejected by `sqtt-patch verify`.

use object::{Object, ObjectSection, ObjectSymbol};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// The fixture targets: forward and backward long branches in each (gfx9 wave64, gfx11 and
/// gfx12 `_co` wave32).
const TARGETS: [&str; 4] = ["gfx908", "gfx90a", "gfx1100", "gfx1201"];

/// The two flag sets of the issue, by name.
const CONFIGS: [(&str, &[&str]); 2] = [
    (
        "fb",
        &["--functions", "1", "--barriers", "1", "--kernel-scopes"],
    ),
    ("trace", &["--trace-addresses", "memory"]),
];

fn fixture(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tensile")
        .join(format!("{target}__tensile__O3.co"))
}

/// `sqtt-patch verify ORIG NEW`: exit code and stdout + stderr.
fn verify(orig: &Path, new: &Path) -> (i32, String) {
    let o = Command::new(BIN)
        .arg("verify")
        .arg(orig)
        .arg(new)
        .output()
        .expect("run sqtt-patch verify");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// Instruments `target`'s fixture with config `cfg` into `dir` and checks the report: exit 0,
/// status instrumented, every site of every feature instrumented (100 % coverage, at least one
/// barrier or traced address), nothing skipped or left alone; `verify` accepts the output.
fn instrument(dir: &Path, target: &str, cfg: usize) -> PathBuf {
    let (name, flags) = CONFIGS[cfg];
    let out = dir.join(format!("{target}.{name}.co"));
    let json = dir.join(format!("{target}.{name}.json"));
    let o = Command::new(BIN)
        .arg(fixture(target))
        .arg("-o")
        .arg(&out)
        .args(flags)
        .arg("--report-json")
        .arg(&json)
        .output()
        .expect("run sqtt-patch");
    let ctx = format!(
        "{target} {name}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{ctx}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
    assert_eq!(r["status"], "instrumented", "{ctx}");
    for list in ["skipped", "left_alone", "reasons"] {
        assert_eq!(r[list].as_array().map(Vec::len), Some(0), "{list}: {ctx}");
    }
    let cov = r["coverage"].as_array().expect("coverage");
    let want = if name == "fb" {
        ("barriers", 5)
    } else {
        ("address_trace", 6)
    };
    for c in cov {
        assert_eq!(c["instrumented"], c["found"], "coverage {c}: {ctx}");
    }
    assert!(
        cov.iter()
            .any(|c| c["feature"] == want.0 && c["found"] == want.1),
        "want {} sites of {}: {ctx}",
        want.1,
        want.0
    );
    let (code, text) = verify(&fixture(target), &out);
    assert_eq!(code, 0, "verify {target} {name}:\n{text}");
    out
}

/// One instruction as `llvm-objdump-22 -d` prints it.
#[derive(Debug, Clone)]
struct Insn {
    addr: u64,
    /// The text without the encoding comment, blanks collapsed.
    text: String,
    mnemonic: String,
    operands: Vec<String>,
}

/// `SQTT_NO_LLVM=1`: the llvm-objdump-22 checks are skipped (docs/testing.md).
fn no_llvm() -> bool {
    let off = std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1");
    if off {
        eprintln!("not checked: SQTT_NO_LLVM=1 (the llvm-objdump-22 oracle)");
    }
    off
}

fn objdump(path: &Path) -> Vec<Insn> {
    let o = Command::new("llvm-objdump-22")
        .arg("-d")
        .arg(path)
        .output()
        .expect("llvm-objdump-22 (LLVM 22) is needed: tools/setup.sh");
    assert!(o.status.success(), "llvm-objdump-22 -d {}", path.display());
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let Some((text, enc)) = line.split_once("//") else {
            continue;
        };
        let Some((addr, _)) = enc.trim().split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let (mnemonic, rest) = text.split_once(' ').unwrap_or((&text, ""));
        v.push(Insn {
            addr,
            mnemonic: mnemonic.to_string(),
            operands: rest.split(", ").map(|s| s.trim().to_string()).collect(),
            text: text.clone(),
        });
    }
    v
}

/// A 32-bit operand as objdump prints it (`0x138`, `0xffffff58`, `4`, `-4`).
fn int_operand(s: &str) -> u32 {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap_or_else(|_| panic!("operand {s}")),
        None => s.parse::<i64>().unwrap_or_else(|_| panic!("operand {s}")) as u32,
    }
}

/// A Tensile long branch decoded from the disassembly.
#[derive(Debug)]
struct LongBranch {
    getpc: u64,
    /// Address of the `s_add_i32` holding the literal (the literal is its second dword).
    add: u64,
    lit: u32,
    backward: bool,
    /// Where the `s_setpc_b64` goes: `getpc + 4 + LIT + 4` or `getpc + 4 - |LIT + 4|`.
    target: u64,
}

/// Every `s_getpc_b64; s_add_i32 sN, LIT, 4; [s_abs_i32 sN, sN;] s_add_u32|s_sub_u32; ...;
/// s_setpc_b64` of the disassembly (gfx12 spellings included), evaluated independently of the
/// rewriter and the verifier.
fn long_branches(insns: &[Insn]) -> Vec<LongBranch> {
    let mut v = Vec::new();
    for (k, i) in insns.iter().enumerate() {
        if i.mnemonic != "s_getpc_b64" {
            continue;
        }
        let add = &insns[k + 1];
        if !matches!(add.mnemonic.as_str(), "s_add_i32" | "s_add_co_i32") {
            continue; // a call builder (@rel32) or another shape: not a Tensile long branch
        }
        assert_eq!(add.operands[2], "4", "{add:?}");
        let lit = int_operand(&add.operands[1]);
        let backward = insns[k + 2].mnemonic == "s_abs_i32";
        let setpc = insns[k + 2..k + 7]
            .iter()
            .find(|x| x.mnemonic == "s_setpc_b64")
            .unwrap_or_else(|| panic!("no s_setpc_b64 after the long branch at {:#x}", i.addr));
        assert_eq!(setpc.operands[0], i.operands[0], "same pair");
        let off = i64::from((lit as i32).wrapping_add(4));
        let from = i.addr + 4;
        let target = if backward {
            from.wrapping_sub(off.unsigned_abs())
        } else {
            from.wrapping_add_signed(off)
        };
        v.push(LongBranch {
            getpc: i.addr,
            add: add.addr,
            lit,
            backward,
            target,
        });
    }
    v
}

/// The symbols of an object: local `label_*` by address and by name, kernels (`STT_FUNC`) by
/// name with (address, size), the `.text` address, file offset and bytes.
struct Syms {
    label_at: BTreeMap<u64, String>,
    label: BTreeMap<String, u64>,
    kernels: BTreeMap<String, (u64, u64)>,
    text_addr: u64,
    text_offset: u64,
    text: Vec<u8>,
}

fn syms(path: &Path) -> Syms {
    let data = std::fs::read(path).expect("read object");
    let f = object::File::parse(&*data).expect("ELF");
    let mut s = Syms {
        label_at: BTreeMap::new(),
        label: BTreeMap::new(),
        kernels: BTreeMap::new(),
        text_addr: 0,
        text_offset: 0,
        text: Vec::new(),
    };
    for sym in f.symbols() {
        let name = sym.name().unwrap_or_default().to_string();
        if name.starts_with("label_") {
            assert!(sym.is_local(), "{name} is local");
            s.label_at.insert(sym.address(), name.clone());
            s.label.insert(name, sym.address());
        } else if sym.kind() == object::SymbolKind::Text {
            s.kernels.insert(name, (sym.address(), sym.size()));
        }
    }
    let text = f.section_by_name(".text").expect(".text");
    s.text_addr = text.address();
    s.text_offset = text.file_range().expect("file range").0;
    s.text = text.data().expect("text").to_vec();
    s
}

/// The long branches of the output aim at the new addresses of the labels the original ones
/// reached; every label moved with its instruction; kernels keep size 0, start at 256-byte
/// boundaries and end in padding (zero words or `s_nop`) after their last `s_endpgm`.
fn check_output(orig: &Path, new: &Path, ctx: &str) {
    let (oi, ni) = (objdump(orig), objdump(new));
    let (os, ns) = (syms(orig), syms(new));
    let (ob, nb) = (long_branches(&oi), long_branches(&ni));
    assert_eq!(ob.len(), 2, "{ctx}: two long branches in the fixture");
    assert_eq!(nb.len(), ob.len(), "{ctx}: every long branch kept");
    for (o, n) in ob.iter().zip(&nb) {
        assert_eq!(o.backward, n.backward, "{ctx}");
        let label = os
            .label_at
            .get(&o.target)
            .unwrap_or_else(|| panic!("{ctx}: original {o:?} reaches no label"));
        let want = ns.label[label];
        assert_eq!(
            n.target, want,
            "{ctx}: long branch at new {:#x} (literal {:#x}) reaches {:#x}, {label} is at {want:#x}",
            n.getpc, n.lit, n.target
        );
    }
    // Labels move with their code: the original instruction at a label is the first original
    // instruction at or after the label's new address; only inserted marker code may come
    // before it.
    let inserted = [
        "s_mov_b32",
        "s_nop",
        "s_ttracedata",
        "s_ttracedata_imm",
        "s_wait_alu",
        "s_waitcnt_depctr",
    ];
    for (name, &oa) in &os.label {
        let orig_insn = oi
            .iter()
            .find(|i| i.addr == oa)
            .unwrap_or_else(|| panic!("{ctx}: no instruction at {name}"));
        let na = ns.label[name];
        let from = ni.iter().position(|i| i.addr == na).unwrap_or_else(|| {
            panic!("{ctx}: {name} at {na:#x} is not an instruction start of the output")
        });
        let k = ni[from..]
            .iter()
            .position(|i| i.text == orig_insn.text)
            .unwrap_or_else(|| panic!("{ctx}: {} not found after {name}", orig_insn.text));
        for skipped in &ni[from..from + k] {
            assert!(
                inserted.contains(&skipped.mnemonic.as_str()) && k <= 8,
                "{ctx}: {name} at {na:#x} is {k} instructions before its own {:?} ({skipped:?})",
                orig_insn.text
            );
        }
    }
    // Size-0 kernels, 256-byte aligned, zero padding after the last s_endpgm of each.
    let mut kernels: Vec<(u64, u64)> = ns.kernels.values().copied().collect();
    kernels.sort();
    assert_eq!(kernels.len(), 2, "{ctx}");
    let end = ns.text_addr + ns.text.len() as u64;
    for (j, &(a, size)) in kernels.iter().enumerate() {
        assert_eq!((a % 256, size), (0, 0), "{ctx}: kernel at {a:#x}");
        let next = kernels.get(j + 1).map_or(end, |k| k.0);
        let last = ni
            .iter()
            .filter(|i| i.addr >= a && i.addr < next && i.mnemonic == "s_endpgm")
            .map(|i| i.addr)
            .max()
            .unwrap_or_else(|| panic!("{ctx}: no s_endpgm in kernel at {a:#x}"));
        // The input pads with zeros; the rewrite may fill what it moved with s_nop.
        let nops: std::collections::BTreeSet<u64> = ni
            .iter()
            .filter(|i| i.mnemonic == "s_nop")
            .map(|i| i.addr)
            .collect();
        for p in (last + 4..next).step_by(4) {
            let at = (p - ns.text_addr) as usize;
            assert!(
                ns.text[at..at + 4] == [0; 4] || nops.contains(&p),
                "{ctx}: padding word at {p:#x} (after the s_endpgm at {last:#x}) is neither 0 nor s_nop"
            );
        }
    }
}

/// Runs `f(dir, target, config name, output)` on every fixture instrumented with every config
/// ([`instrument`] checks each); with `llvm` and `SQTT_NO_LLVM=1`, only instruments.
fn each_output(llvm: bool, mut f: impl FnMut(&Path, &str, &str, &Path)) {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        for (c, (name, _)) in CONFIGS.iter().enumerate() {
            let out = instrument(t.path(), target, c);
            if llvm && no_llvm() {
                continue;
            }
            f(t.path(), target, name, &out);
        }
    }
}

#[test]
fn long_branches_reach_their_labels() {
    each_output(true, |_, target, name, out| {
        check_output(&fixture(target), out, &format!("{target} {name}"))
    });
}

/// A copy of `out` with the literal of long branch `b` moved by `delta`.
fn mutated(out: &Path, b: &LongBranch, delta: i32) -> Vec<u8> {
    let s = syms(out);
    let at = (s.text_offset + b.add + 4 - s.text_addr) as usize;
    let mut bytes = std::fs::read(out).expect("read output");
    assert_eq!(
        bytes[at..at + 4],
        b.lit.to_le_bytes(),
        "the literal's bytes"
    );
    bytes[at..at + 4].copy_from_slice(&b.lit.wrapping_add(delta as u32).to_le_bytes());
    bytes
}

fn assert_mutation_rejected(dir: &Path, target: &str, out: &Path, b: &LongBranch, delta: i32) {
    let p = dir.join("mutated.co");
    std::fs::write(&p, mutated(out, b, delta)).expect("write");
    let (code, text) = verify(&fixture(target), &p);
    let ctx = format!(
        "{target} {}: literal {:#x}{delta:+} of the {} long branch at {:#x}",
        out.display(),
        b.lit,
        if b.backward { "backward" } else { "forward" },
        b.getpc
    );
    assert_eq!(code, 1, "{ctx}: want a rejection:\n{text}");
    assert!(
        text.contains("[branch]") && text.contains("address builder to orig"),
        "{ctx}: want a branch finding naming the address builder:\n{text}"
    );
}

/// Every long branch aimed 4 bytes early is rejected; aimed 4 bytes late, the backward ones
/// (their target, the loop head, has no inserted code in front) and the forward ones of the
/// address-trace output (no inserted code in front of their target barrier) are rejected.
#[test]
fn moved_long_branch_literal_is_rejected() {
    each_output(true, |dir, target, name, out| {
        for b in long_branches(&objdump(out)) {
            assert_mutation_rejected(dir, target, out, &b, -4);
            if b.backward || name == "trace" {
                assert_mutation_rejected(dir, target, out, &b, 4);
            }
        }
    });
}

/// The forward long branch of the barrier output aimed 4 bytes late lands inside the marker
/// run the rewrite put in front of its target barrier: on gfx9 after the `s_mov_b32 m0`, so the
/// `s_ttracedata` would send whatever M0 holds. The verifier rejects a landing that splits a
/// marker from its M0 write (`splits_marker` in sqtt-verify). Not covered (docs/limitations.md):
/// on gfx11/gfx12 the marker is one `s_ttracedata_imm` and 4 bytes late is the barrier itself,
/// which the verifier still accepts as a landing on the original instruction.
#[test]
fn forward_long_branch_into_the_marker_run_is_rejected() {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS.iter().filter(|t| t.starts_with("gfx9")) {
        let out = instrument(t.path(), target, 0);
        let branches: Vec<_> = long_branches(&objdump(&out))
            .into_iter()
            .filter(|b| !b.backward)
            .collect();
        assert!(!branches.is_empty(), "{target}: no forward long branch");
        for b in branches {
            assert_mutation_rejected(t.path(), target, &out, &b, 4);
        }
    }
}

/// The `sqtt-interp` model wave runs each long-branch stretch of the original and of the output
/// (the interpreter has no memory model, so not whole kernels, whose loads and stores it cannot
/// execute): the forward check from `label_Check_0` up to `label_NoBranch_0` with n = 0 and
/// n = 1, the loop from `label_LoopBeginL_0` up to `label_LoopEndL_0` with n = 3. Both must take
/// the same branches to the same labels (new addresses mapped back by symbol name), leave at
/// the same label and end with the same counter, sum and SCC.
#[test]
fn interpreter_takes_the_same_branches() {
    each_output(false, |_, target, name, out| {
        let isa = amdgpu_isa::Target::from_name(target).expect("target");
        let wave = if target.starts_with("gfx9") { 64 } else { 32 };
        {
            let (os, ns) = (syms(&fixture(target)), syms(out));
            let stretches = [
                ("label_Check_0", "label_NoBranch_0", 0u32),
                ("label_Check_0", "label_NoBranch_0", 1),
                ("label_LoopBeginL_0", "label_LoopEndL_0", 3),
            ];
            for (from, to, n) in stretches {
                let ctx = format!("{target} {name} {from} n={n}");
                let run = |s: &Syms| {
                    let (a, b) = (s.label[from], s.label[to]);
                    let bytes = &s.text[(a - s.text_addr) as usize..(b - s.text_addr) as usize];
                    let mut w = sqtt_interp::Wave::new(isa, wave).expect("wave");
                    w.sgpr[8] = n;
                    w.sgpr[9] = 0;
                    for r in 34..=36 {
                        w.sgpr[r] = 0xdead_beef;
                    }
                    let mut code = sqtt_interp::Code::new(bytes, a);
                    let mut jumps = Vec::new();
                    let r = sqtt_interp::run_code_jumps(&mut w, &mut code, 10_000, &mut jumps)
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    // Jumps to labels; the rewrite's own loops jump to no label.
                    let taken: Vec<String> = jumps
                        .iter()
                        .filter_map(|j| s.label_at.get(&j.to).cloned())
                        .collect();
                    let exit = s.label_at.get(&r.exit_pc).cloned().unwrap_or_else(|| {
                        panic!("{ctx}: left at {:#x}, which is no label", r.exit_pc)
                    });
                    (taken, exit, w.sgpr[8], w.sgpr[9], w.scc, r.shaderdata)
                };
                let (o, n_) = (run(&os), run(&ns));
                assert_eq!(o.0, n_.0, "{ctx}: labels jumped to");
                assert_eq!(o.1, n_.1, "{ctx}: exit label");
                assert_eq!((o.2, o.3, o.4), (n_.2, n_.3, n_.4), "{ctx}: s8, s9, SCC");
                assert!(o.5.is_empty(), "{ctx}: the original sends no markers");
                let want_exit = match (from, n) {
                    ("label_Check_0", 0) => "label_GW_End_0",
                    ("label_Check_0", _) => "label_NoBranch_0",
                    _ => "label_LoopEndL_0",
                };
                assert_eq!(o.1, want_exit, "{ctx}");
                if from == "label_LoopBeginL_0" {
                    let mut want = vec!["label_LoopBeginL_0".to_string(); 2];
                    want.push("label_LoopEndL_0".into());
                    assert_eq!(o.0, want, "{ctx}: two back edges, then the exit");
                    assert_eq!((o.2, o.3), (0, 6), "{ctx}: s8 counted down, s9 = 3 + 2 + 1");
                    // The barrier output marks the barrier of each of the 3 iterations.
                    assert_eq!(n_.5.is_empty(), name != "fb", "{ctx}: {:?}", n_.5);
                }
            }
        }
    });
}
