//! rocBLAS's signed long branch (issue 37; the gfx90a `DGEMM_Aldebaran_*` kernels of rocBLAS 6.4
//! and 7.2): `s_getpc_b64 s[a:a+1]; s_add_i32 sN, LIT, 4; s_cmp_ge_i32 sN, 0;
//! s_cbranch_scc1 P; s_abs_i32 sN, sN; s_sub_u32; s_subb_u32; s_setpc_b64;
//! P: s_add_u32; s_addc_u32; s_setpc_b64` — the offset's sign picks the subtract or the add
//! form, and both reach `getpc + 4 + sext(LIT + 4)`. `fixtures/src/tensile.S` with
//! `-DFX_SIGNED_BRANCH` (assembled by the test) adds the kernel `tl_signed` with a forward one
//! (the add path runs) and a backward one (the subtract path runs).
//!
//! Oracles that are neither the rewriter nor the verifier: `llvm-objdump-22` decodes each signed
//! long branch of the output, and the target it computes must be the new address of the label
//! the original reached, its `s_cbranch_scc1` must still reach its add path; the `sqtt-interp`
//! model wave runs the stretches around both branches in the original and the output and must
//! take the same branches to the same labels. A literal moved by 4 bytes must be rejected by
//! `sqtt-patch verify`.

#[path = "support/asm.rs"]
mod asm;
mod tensile_common;

use std::path::Path;
use std::process::Command;
use tensile_common::*;

/// A signed long branch decoded from the disassembly.
#[derive(Debug)]
struct Signed {
    getpc: u64,
    /// Address of the `s_add_i32` holding the literal (the literal is its second dword).
    add: u64,
    lit: u32,
    /// `getpc + 4 + sext(LIT + 4)`.
    target: u64,
    /// Its `s_cbranch_scc1`'s operand as objdump prints it (the label at the target).
    branch_to: String,
    /// Address of the add path's first instruction.
    add_path: u64,
}

/// Every `s_getpc_b64; s_add_i32 sN, LIT, 4; s_cmp_ge_i32 sN, 0; s_cbranch_scc1` of the
/// disassembly (gfx12 `s_add_co_i32`), with the subtract path (`s_abs_i32`, a subtract pair,
/// `s_setpc_b64`) after the branch and the add path at its target.
fn signed_branches(insns: &[Insn]) -> Vec<Signed> {
    let mut v = Vec::new();
    for (k, i) in insns.iter().enumerate() {
        let Some(w) = insns.get(k..k + 11) else {
            continue;
        };
        let names: Vec<&str> = w.iter().map(|x| x.mnemonic.as_str()).collect();
        if names[0] != "s_getpc_b64" || names[2] != "s_cmp_ge_i32" {
            continue;
        }
        assert!(
            matches!(names[1], "s_add_i32" | "s_add_co_i32"),
            "{names:?}"
        );
        assert_eq!(w[1].operands[2], "4", "{:?}", w[1]);
        assert_eq!(
            &names[3..8],
            [
                "s_cbranch_scc1",
                "s_abs_i32",
                names[5],
                names[6],
                "s_setpc_b64"
            ],
            "the subtract path at {:#x}",
            i.addr
        );
        assert!(names[5].starts_with("s_sub"), "{names:?}");
        assert!(names[8].starts_with("s_add") && names[10] == "s_setpc_b64");
        let lit = int_operand(&w[1].operands[1]);
        v.push(Signed {
            getpc: i.addr,
            add: w[1].addr,
            lit,
            target: (i.addr + 4).wrapping_add_signed(i64::from((lit as i32).wrapping_add(4))),
            branch_to: w[3].operands[0].clone(),
            add_path: w[8].addr,
        });
    }
    v
}

/// Runs `f(dir, target, config, input, output)` for every target and config on `tl_signed`'s
/// variant, after checking the report (nothing left alone or skipped, every site instrumented)
/// and that `verify` accepts the output; `None`-variant (no LLVM) runs nothing.
fn each_signed_output(mut f: impl FnMut(&Path, &str, &str, &Path, &Path)) {
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let Some(input) = variant(t.path(), target, "FX_SIGNED_BRANCH") else {
            return;
        };
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} signed branch");
            let (out, r, text) = patch_with_context(t.path(), &input, target, name, flags);
            for list in ["left_alone", "skipped"] {
                assert_eq!(r[list].as_array().map(Vec::len), Some(0), "{list}: {text}");
            }
            let cov = r["coverage"].as_array().expect("coverage");
            assert!(!cov.is_empty(), "{ctx}");
            for c in cov {
                assert_eq!(c["found"], c["instrumented"], "{ctx}: {c}");
            }
            let (code, vtext) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{vtext}");
            f(t.path(), target, name, &input, &out);
        }
    }
}

/// Both signed long branches are instrumented around (the kernel is no longer left in place)
/// and reach the new addresses of the labels the original ones reached; their branches still
/// reach their add paths.
#[test]
fn signed_long_branches_reach_their_labels() {
    each_signed_output(|_, target, name, input, out| {
        let ctx = format!("{target} {name}");
        let (os, ns) = (syms(input), syms(out));
        let (ob, nb) = (
            signed_branches(&objdump(input)),
            signed_branches(&objdump(out)),
        );
        assert_eq!(ob.len(), 2, "{ctx}: two signed long branches in tl_signed");
        assert_eq!(nb.len(), 2, "{ctx}: both kept");
        let want = [
            ("label_GW_End_S", "label_Positive_S"),
            ("label_NoBranch_S", "label_Positive_SB"),
        ];
        for ((o, n), (to, add_path)) in ob.iter().zip(&nb).zip(want) {
            assert_eq!(
                os.label_at.get(&o.target).map(String::as_str),
                Some(to),
                "{ctx}"
            );
            assert_eq!(n.target, ns.label[to], "{ctx}: {n:?} reaches {to}");
            assert_eq!(n.branch_to, add_path, "{ctx}: {n:?}");
            assert_eq!(n.add_path, ns.label[add_path], "{ctx}: {n:?}");
        }
        // The second one is backward (its subtract path runs), in the original and the output.
        assert!(
            ob[1].target < ob[1].getpc && nb[1].target < nb[1].getpc,
            "{ctx}"
        );
    });
}

/// Each signed long branch of each output aimed 4 bytes early is rejected by `verify` with a
/// branch finding naming the address builder; the backward one (whose target has no inserted
/// code in front) also 4 bytes late.
#[test]
fn moved_signed_branch_literal_is_rejected() {
    each_signed_output(|dir, target, name, input, out| {
        for (k, b) in signed_branches(&objdump(out)).iter().enumerate() {
            let deltas: &[i32] = if k == 1 { &[-4, 4] } else { &[-4] };
            for &d in deltas {
                let ctx = format!("{target} {name}: literal of the branch at {:#x}", b.getpc);
                assert_literal_move_rejected(dir, input, out, (b.add, b.lit), d, &ctx);
            }
        }
    });
}

/// The model wave runs, in the original and the output, the forward check from
/// `label_Check_S` up to `label_NoBranch_S` (s8 = 0: the long branch to `label_GW_End_S` through
/// the add path; s8 = 1: no branch) and the loop's back edge from `label_Back_S` up to
/// `label_GW_End_S` (s8 = 2: back to `label_NoBranch_S` through the subtract path; s8 = 1: out
/// to `label_GW_End_S`). Both take the same branches to the same labels and leave with the same
/// s8 and SCC.
#[test]
fn interpreter_takes_the_same_signed_branches() {
    each_signed_output(|_, target, name, input, out| {
        let wave = if target.starts_with("gfx9") { 64 } else { 32 };
        let (os, ns) = (syms(input), syms(out));
        let stretches = [
            ("label_Check_S", "label_NoBranch_S", 0u32, "label_GW_End_S"),
            ("label_Check_S", "label_NoBranch_S", 1, "label_NoBranch_S"),
            ("label_Back_S", "label_GW_End_S", 2, "label_NoBranch_S"),
            ("label_Back_S", "label_GW_End_S", 1, "label_GW_End_S"),
        ];
        for (from, to, n, want_exit) in stretches {
            let ctx = format!("{target} {name} {from} s8={n}");
            let run = |s: &Syms| {
                let x = run_stretch(s, (target, wave), (from, to), n, &ctx);
                (x.taken, x.exit, x.wave.sgpr[8], x.wave.scc)
            };
            let (o, n_) = (run(&os), run(&ns));
            assert_eq!(o, n_, "{ctx}: labels jumped to, exit label, s8, SCC");
            assert_eq!(o.1, want_exit, "{ctx}");
        }
    });
}

/// A kernel (gfx908) with a signed long branch over an `s_nop` to an `s_barrier`, whose
/// subtract is `sub` and with `extra` after the barrier.
fn signed_kernel(sub: &str, extra: &str) -> String {
    let body = format!(
        "  v_mov_b32 v1, v0
  s_getpc_b64 s[6:7]
.Lpc:
  s_add_i32 s8, .Lend - .Lpc - 4, 4
  s_cmp_ge_i32 s8, 0
  s_cbranch_scc1 .Lpos
  s_abs_i32 s8, s8
  {sub}
  s_subb_u32 s7, s7, 0
  s_setpc_b64 s[6:7]
.Lpos:
  s_add_u32 s6, s6, s8
  s_addc_u32 s7, s7, 0
  s_setpc_b64 s[6:7]
  s_nop 0
.Lend:
  s_barrier
{extra}  s_endpgm"
    );
    asm::kernel("gfx908", false, &body)
}

/// What the rewriter may not take for the signed form stays in place with the reason, and the
/// form itself is instrumented: the subtract with its operands swapped (`sN - pc` is no offset
/// from the PC) and an add path that another branch also enters (it could bring another pair
/// value) leave the kernel alone; the exact form gets its barrier marker. `verify` accepts
/// each output.
#[test]
fn only_the_exact_signed_form_is_rewritten() {
    let t = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "swapped",
            "s_sub_u32 s6, s8, s6",
            "",
            Some("control flow before the adds complete"),
        ),
        (
            "entered",
            "s_sub_u32 s6, s6, s8",
            "  s_cbranch_scc0 .Lpos\n",
            Some("is entered from elsewhere too"),
        ),
        ("exact", "s_sub_u32 s6, s6, s8", "", None),
    ];
    for (name, sub, extra, why) in cases {
        let co = asm::assemble(t.path(), name, "gfx908", &signed_kernel(sub, extra));
        let (out, json) = (
            t.path().join(format!("{name}.out.co")),
            t.path().join("r.json"),
        );
        let o = Command::new(BIN)
            .arg(&co)
            .arg("-o")
            .arg(&out)
            .args(["--barriers", "1", "--report-json"])
            .arg(&json)
            .output()
            .expect("run sqtt-patch");
        assert_eq!(o.status.code(), Some(0), "{name}: {o:?}");
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
        let left = r["left_alone"].as_array().expect("left_alone");
        match why {
            Some(why) => {
                assert_eq!(left.len(), 1, "{name}: {r:#}");
                let got = left[0]["why"].as_str().unwrap_or_default();
                assert!(got.contains(why), "{name}: {got}");
            }
            None => {
                assert!(left.is_empty(), "{name}: {r:#}");
                assert_eq!(r["status"], "instrumented", "{name}: {r:#}");
            }
        }
        let (code, text) = asm::verify(&co, &out);
        assert_eq!(code, 0, "{name}: verify:\n{text}");
    }
}
