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
//!
//! `tl_calltable` is a hipBLASLt-style call table: an `s_cmpk_eq_u32` chain (gfx12:
//! `s_cmp_eq_u32`) chooses one of three blocks that each build a subroutine label's address into
//! `s[10:11]` (`s_getpc_b64; s_add_i32 s12, LIT, 4; s_add_u32; s_addc_u32; s_branch`), two
//! `s_swappc_b64 s[30:31], s[10:11]` call it, and the subroutines after the `s_endpgm` return with
//! `s_setpc_b64 s[30:31]`. The same oracles apply: objdump decodes each builder of the output and
//! it must reach the new address of its subroutine label, the model wave runs the selection, the
//! call and the return for each choice, and a builder literal moved by 4 bytes is rejected.
//! `tensile.S` with `-DFX_BAD_CALLTABLE` (assembled by the test, not stored: see
//! [`bad_calltable`]) adds `tl_calltable_bad`, whose pair is copied from `s[20:21]` on one path:
//! exactly that kernel is left alone.

mod tensile_common;

use std::path::{Path, PathBuf};
use tensile_common::*;

/// The call-table kernel's subroutine labels, by selector value (anything else falls through the
/// chain into the first block).
const SUBROUTINES: [&str; 3] = [
    "label_Activation_None_VW1_0",
    "label_Activation_Relu_VW1_0",
    "label_Activation_Scale_VW1_0",
];

/// `fixtures/src/tensile.S` with `-DFX_BAD_CALLTABLE` assembled for `target` into `dir` by
/// `clang-22` with the flags of `tools/build_fixtures.sh`. Not a stored fixture: it is built from
/// the same source as the stored ones with one define. `None` with `SQTT_NO_LLVM=1`.
fn bad_calltable(dir: &Path, target: &str) -> Option<PathBuf> {
    variant(dir, target, "FX_BAD_CALLTABLE")
}

/// Instruments `target`'s fixture with config `cfg` into `dir` and checks the report: exit 0,
/// status instrumented, nothing left alone or skipped, every site of every feature instrumented
/// (at least one barrier, memory site or traced address; every barrier, including the
/// call-table kernel's three); `verify` accepts the output.
fn instrument(dir: &Path, target: &str, cfg: usize) -> PathBuf {
    let (name, flags) = CONFIGS[cfg];
    let (out, r, ctx) = patch_with_context(dir, &fixture(target), target, name, flags);
    for list in ["left_alone", "reasons"] {
        assert_eq!(r[list].as_array().map(Vec::len), Some(0), "{list}: {ctx}");
    }
    // Nothing is skipped: liveness across the in-kernel calls leaves SGPRs free for the
    // address-trace loops after each call and inside the subroutines.
    let skipped = r["skipped"].as_array().expect("skipped");
    assert!(skipped.is_empty(), "skipped {skipped:?}: {ctx}");
    let cov = r["coverage"].as_array().expect("coverage");
    // tl_forward 3 + tl_loop 2 + tl_calltable 3 barriers; memory sites: 2 + 2 + 2 + 3 loads,
    // stores and the subroutine's load; the same are the address-trace sites.
    let want = match name {
        "fb" => ("barriers", 8),
        "mem" => ("memory", 11),
        _ => ("address_trace", 11),
    };
    for c in cov {
        let missing = c["found"].as_u64().unwrap_or(0) - c["instrumented"].as_u64().unwrap_or(0);
        assert_eq!(missing, 0, "coverage {c}: {ctx}");
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
        if insns[k + 4].mnemonic == "s_branch" {
            continue; // a call-table builder ([`call_builders`])
        }
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

/// Every call-table builder of the disassembly: `s_getpc_b64 s[a:b]; s_add_i32 sN, LIT, 4;
/// s_add_u32 sa, sa, sN; s_addc_u32 sb, sb, 0; s_branch` (gfx12 `_co` names), with the address it
/// builds (`getpc + 4 + LIT + 4`) in `target`, evaluated independently of the rewriter and the
/// verifier.
fn call_builders(insns: &[Insn]) -> Vec<LongBranch> {
    let mut v = Vec::new();
    for (k, i) in insns.iter().enumerate() {
        if i.mnemonic != "s_getpc_b64"
            || insns.get(k + 4).map(|x| x.mnemonic.as_str()) != Some("s_branch")
        {
            continue;
        }
        let add = &insns[k + 1];
        if !matches!(add.mnemonic.as_str(), "s_add_i32" | "s_add_co_i32") {
            continue;
        }
        assert_eq!(add.operands[2], "4", "{add:?}");
        let (lo, hi) = (&insns[k + 2], &insns[k + 3]);
        assert!(
            matches!(lo.mnemonic.as_str(), "s_add_u32" | "s_add_co_u32")
                && matches!(hi.mnemonic.as_str(), "s_addc_u32" | "s_add_co_ci_u32")
                && lo.operands[2] == add.operands[0],
            "builder at {:#x}: {lo:?} {hi:?}",
            i.addr
        );
        let lit = int_operand(&add.operands[1]);
        let off = i64::from((lit as i32).wrapping_add(4));
        v.push(LongBranch {
            getpc: i.addr,
            add: add.addr,
            lit,
            backward: false,
            target: (i.addr + 4).wrapping_add_signed(off),
        });
    }
    v
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
        // An address-traced memory operation has its per-lane loop (up to ~40 instructions of
        // any kind) in front of it.
        let traced = ctx.contains(" trace")
            && ["load", "store", "atomic"]
                .iter()
                .any(|m| orig_insn.mnemonic.contains(m));
        for skipped in &ni[from..from + k] {
            assert!(
                (inserted.contains(&skipped.mnemonic.as_str()) && k <= 8) || (traced && k <= 64),
                "{ctx}: {name} at {na:#x} is {k} instructions before its own {:?} ({skipped:?})",
                orig_insn.text
            );
        }
    }
    // Size-0 kernels, 256-byte aligned, zero padding after the last s_endpgm of each.
    let mut kernels: Vec<(u64, u64)> = ns.kernels.values().copied().collect();
    kernels.sort();
    assert_eq!(kernels.len(), 3, "{ctx}");
    let end = ns.text_addr + ns.text.len() as u64;
    for (j, &(a, size)) in kernels.iter().enumerate() {
        assert_eq!((a % 256, size), (0, 0), "{ctx}: kernel at {a:#x}");
        let next = kernels.get(j + 1).map_or(end, |k| k.0);
        // The call table's subroutines follow its s_endpgm: padding starts after the last
        // s_endpgm or subroutine return.
        let last = ni
            .iter()
            .filter(|i| {
                i.addr >= a
                    && i.addr < next
                    && matches!(i.mnemonic.as_str(), "s_endpgm" | "s_setpc_b64")
            })
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

fn assert_mutation_rejected(dir: &Path, target: &str, out: &Path, b: &LongBranch, delta: i32) {
    let ctx = format!(
        "{target} {}: literal {:#x} of the {} long branch at {:#x}",
        out.display(),
        b.lit,
        if b.backward { "backward" } else { "forward" },
        b.getpc
    );
    assert_literal_move_rejected(dir, &fixture(target), out, (b.add, b.lit), delta, &ctx);
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
                    let x = run_stretch(s, (target, wave), (from, to), n, &ctx);
                    let w = &x.wave;
                    (x.taken, x.exit, w.sgpr[8], w.sgpr[9], w.scc, x.shaderdata)
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

/// The call table of the output: objdump decodes three builders in each of the original and the
/// output, each original one builds the address of a subroutine label, and the output's builder
/// in the same position builds the new address of that label; both call sites still call through
/// `s[10:11]` and every subroutine still returns through `s[30:31]`.
#[test]
fn call_table_builders_reach_their_subroutines() {
    each_output(true, |_, target, name, out| {
        let ctx = format!("{target} {name}");
        let (oi, ni) = (objdump(&fixture(target)), objdump(out));
        let (os, ns) = (syms(&fixture(target)), syms(out));
        let (ob, nb) = (call_builders(&oi), call_builders(&ni));
        assert_eq!(ob.len(), 3, "{ctx}: three builders in the fixture");
        assert_eq!(nb.len(), 3, "{ctx}: every builder kept");
        for (k, (o, n)) in ob.iter().zip(&nb).enumerate() {
            let label = os
                .label_at
                .get(&o.target)
                .unwrap_or_else(|| panic!("{ctx}: original builder {o:?} reaches no label"));
            assert_eq!(label, SUBROUTINES[k], "{ctx}: builder {k}");
            let want = ns.label[label];
            assert_eq!(
                n.target, want,
                "{ctx}: builder at new {:#x} (literal {:#x}) builds {:#x}, {label} is at {want:#x}",
                n.getpc, n.lit, n.target
            );
        }
        let (lo, hi) = (
            ns.kernels["tl_calltable"].0,
            ns.text_addr + ns.text.len() as u64,
        );
        let calls: Vec<&Insn> = ni
            .iter()
            .filter(|i| i.addr >= lo && i.addr < hi && i.mnemonic == "s_swappc_b64")
            .collect();
        assert_eq!(calls.len(), 2, "{ctx}: two call sites");
        for c in calls {
            assert_eq!(c.operands, ["s[30:31]", "s[10:11]"], "{ctx}: {c:?}");
        }
        for l in SUBROUTINES {
            let ret = ni
                .iter()
                .find(|i| i.addr >= ns.label[l] && i.mnemonic == "s_setpc_b64")
                .unwrap_or_else(|| panic!("{ctx}: no return after {l}"));
            assert_eq!(
                ret.operands,
                ["s[30:31]"],
                "{ctx}: {l} returns through {ret:?}"
            );
        }
    });
}

/// A builder literal of the output moved by 4 bytes aims the call at the wrong address:
/// `sqtt-patch verify` rejects it (exit 1) for every builder, target and config, 4 bytes early
/// always, 4 bytes late unless that is the subroutine's first original instruction behind a
/// one-instruction `s_ttracedata_imm` marker (gfx11/gfx12 memory markers): the verifier accepts
/// a landing on the original instruction there, as for the long branches (see
/// [`forward_long_branch_into_the_marker_run_is_rejected`], docs/limitations.md).
#[test]
fn moved_call_table_literal_is_rejected() {
    each_output(true, |dir, target, name, out| {
        let insns = objdump(out);
        for b in call_builders(&insns) {
            let first = insns.iter().find(|i| i.addr == b.target).expect("target");
            let late = if first.mnemonic == "s_ttracedata_imm" {
                eprintln!(
                    "not checked: {target} {name}: builder at {:#x} + 4 lands behind the marker",
                    b.getpc
                );
                vec![]
            } else {
                vec![4]
            };
            for delta in late.into_iter().chain([-4]) {
                let p = with_moved_literal(dir, out, (b.add, b.lit), delta);
                let (code, text) = verify(&fixture(target), &p);
                assert_eq!(
                    code, 1,
                    "{target} {name}: builder at {:#x}, literal {:#x}{delta:+}: want a rejection:\n{text}",
                    b.getpc, b.lit
                );
            }
        }
    });
}

/// Instructions the call-table runs skip: vector ALU and global memory work, which the
/// model has no semantics for and which writes no SGPR, SCC, EXEC or VCC in this kernel.
fn skippable(mnemonic: &str) -> bool {
    (mnemonic.starts_with("v_")
        && !mnemonic.starts_with("v_read")
        && !mnemonic.starts_with("v_cmp"))
        || mnemonic.starts_with("global_")
}

/// Runs the model wave from `pc` on the code of `s` in `[lo, hi)` until it leaves that range
/// (returned: the address it left to) with the jumps taken; [`skippable`] instructions are
/// stepped over. An `s_endpgm` inside fails.
fn run_region(
    w: &mut sqtt_interp::Wave,
    s: &Syms,
    mut pc: u64,
    (lo, hi): (u64, u64),
    jumps: &mut Vec<sqtt_interp::Jump>,
    ctx: &str,
) -> u64 {
    for _ in 0..1000 {
        if pc < lo || pc >= hi {
            return pc;
        }
        let bytes = &s.text[(pc - s.text_addr) as usize..(hi - s.text_addr) as usize];
        let mut code = sqtt_interp::Code::new(bytes, pc);
        match sqtt_interp::run_code_jumps(w, &mut code, 10_000, jumps) {
            Ok(r) if r.exit_pc >= pc && r.exit_pc < hi => {
                panic!("{ctx}: s_endpgm at {:#x}", r.exit_pc)
            }
            Ok(r) => pc = r.exit_pc,
            Err(sqtt_interp::InterpError::Unsupported {
                pc: at, mnemonic, ..
            }) if skippable(mnemonic) => {
                let rest = &s.text[(at - s.text_addr) as usize..];
                let i = amdgpu_isa::decode(rest, w.target).expect("decode");
                pc = at + i.len() as u64;
            }
            Err(e) => panic!("{ctx}: {e}"),
        }
    }
    panic!("{ctx}: no exit after 1000 segments")
}

/// The model wave runs the call table of the original and of the output for selector values 0, 1,
/// 2 and 7 (7 falls through the chain into the first block): from `label_Check_Act_0` to the
/// first call (the selection chain and a builder; the call leaves the kernel body for the
/// subroutine), the subroutine until it returns, then from the first return label through the
/// second call and its return. Both must jump to the same labels, enter the same subroutine
/// (`SUBROUTINES[selector]`), return to `label_Ret_0_0` and `label_Ret_1_0` with the return
/// address of each call in `s[30:31]`, and end with the same selector and SCC.
#[test]
fn interpreter_calls_the_same_subroutines() {
    each_output(false, |_, target, name, out| {
        let isa = amdgpu_isa::Target::from_name(target).expect("target");
        let wave = if target.starts_with("gfx9") { 64 } else { 32 };
        let (os, ns) = (syms(&fixture(target)), syms(out));
        for sel in [0u32, 1, 2, 7] {
            let ctx = format!("{target} {name} selector {sel}");
            let run = |s: &Syms| {
                let mut w = sqtt_interp::Wave::new(isa, wave).expect("wave");
                w.sgpr[26] = sel;
                for r in [10, 11, 12, 30, 31] {
                    w.sgpr[r] = 0xdead_beef;
                }
                let end = s.text_addr + s.text.len() as u64;
                let kernel_end = s
                    .kernels
                    .values()
                    .map(|k| k.0)
                    .filter(|&a| a > s.label["label_Check_Act_0"])
                    .min()
                    .unwrap_or(end);
                let body = |from: &str, to: &str| (s.label[from], s.label[to]);
                let subs = (s.label["label_Ret_1_0"] + 4, kernel_end);
                let mut jumps = Vec::new();
                let mut trail = Vec::new();
                let name_of = |a: u64| {
                    s.label_at
                        .get(&a)
                        .cloned()
                        .unwrap_or_else(|| panic!("{ctx}: at {a:#x}, which is no label"))
                };
                let r0 = body("label_Check_Act_0", "label_Ret_0_0");
                let entry = run_region(&mut w, s, r0.0, r0, &mut jumps, &ctx);
                trail.push(name_of(entry));
                let ret = run_region(&mut w, s, entry, subs, &mut jumps, &ctx);
                trail.push(name_of(ret));
                assert_eq!(u64::from(w.sgpr[30]), ret, "{ctx}: return address");
                let r1 = body("label_Ret_0_0", "label_Ret_1_0");
                let entry = run_region(&mut w, s, ret, r1, &mut jumps, &ctx);
                trail.push(name_of(entry));
                let ret = run_region(&mut w, s, entry, subs, &mut jumps, &ctx);
                trail.push(name_of(ret));
                assert_eq!(u64::from(w.sgpr[30]), ret, "{ctx}: return address");
                let taken: Vec<String> = jumps
                    .iter()
                    .filter_map(|j| s.label_at.get(&j.to).cloned())
                    .collect();
                (trail, taken, w.sgpr[26], w.scc)
            };
            let (o, n) = (run(&os), run(&ns));
            let sub = SUBROUTINES[if sel < 3 { sel as usize } else { 0 }].to_string();
            let want = vec![
                sub.clone(),
                "label_Ret_0_0".to_string(),
                sub,
                "label_Ret_1_0".to_string(),
            ];
            assert_eq!(o.0, want, "{ctx}: original");
            assert_eq!(n.0, want, "{ctx}: output");
            assert_eq!(o.1, n.1, "{ctx}: labels jumped to");
            assert_eq!((o.2, o.3), (n.2, n.3), "{ctx}: selector and SCC");
        }
    });
}

/// `tl_calltable_bad` sets the pair with `s_mov_b64 s[10:11], s[20:21]` on one path: with every
/// config, the rewriter leaves exactly that kernel alone, saying why ("indirect jump through a
/// register in a kernel"), reports only its sites skipped, instruments the other three kernels
/// (every barrier of theirs marked) and `verify` accepts the output.
#[test]
fn unresolved_call_table_leaves_only_its_kernel_alone() {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let Some(input) = bad_calltable(t.path(), target) else {
            return;
        };
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} bad-calltable");
            let (out, r) = patch(t.path(), &input, target, name, flags);
            only_left_alone(
                &ctx,
                &r,
                "tl_calltable_bad",
                "indirect jump through a register in a kernel",
            );
            let kernels = r["kernels"].as_array().expect("kernels").len();
            assert_eq!(kernels, 4, "{ctx}");
            let mut bad = 0;
            for sk in r["skipped"].as_array().expect("skipped") {
                assert_eq!(sk["function"], "tl_calltable_bad", "{ctx}: skipped {sk}");
                bad += 1;
            }
            assert!(bad >= 3, "{ctx}: the left-alone kernel's sites are skipped");
            if name == "fb" {
                let cov = r["coverage"].as_array().expect("coverage");
                assert!(
                    cov.iter().any(|c| c["feature"] == "barriers"
                        && c["found"] == 11
                        && c["instrumented"] == 8),
                    "{ctx}: {cov:?}"
                );
            }
            let (code, text) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{text}");
        }
    }
}

/// With `--scope`, the rewriter leaves `tl_calltable_bad` alone (copied verbatim, its unresolved
/// `s_swappc_b64` an indirect call) and its entry computes no scope flag. An unresolved call
/// reaches every device function but no kernel (a kernel is entered only by a dispatch), on both
/// sides, so the other kernels keep their flags and the verifier accepts the output.
#[test]
fn unresolved_call_table_with_scope_filtering() {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let Some(input) = bad_calltable(t.path(), target) else {
            return;
        };
        let flags: Vec<&str> = "--functions 1 --barriers 1 --kernel-scopes --memory 2:5 --scope"
            .split(' ')
            .collect();
        let (out, r) = patch(t.path(), &input, target, "scope", &flags);
        assert_eq!(r["left_alone"][0]["name"], "tl_calltable_bad", "{target}");
        let (code, text) = verify(&input, &out);
        assert_eq!(code, 0, "{target}: verify:\n{text}");
    }
}
