//! A Tensile long branch whose literal aims into the middle of an instruction (found by the
//! session-22 fresh tester: the whole object was refused, "does not verify against itself").
//! The function is the unit of failure: only the kernel holding such a branch is left alone,
//! the others are instrumented, and the output passes `sqtt-patch verify`.
//!
//! - Aimed inside its own kernel: the kernel moves as one block (the branch keeps its relative
//!   target, exactly as broken as in the input), the verifier's finding that the input already
//!   has against itself is a warning ("the input is inconsistent (kept as it is)").
//! - Aimed into another kernel: mapped by offset, such an address could land anywhere in the
//!   instrumented code, so the kernel cannot move: `.text` is kept in place.
//!
//! The literal is found and edited from `llvm-objdump-22 -d` of the fixture, not by the rewriter.

mod tensile_common;

use std::path::{Path, PathBuf};
use tensile_common::*;

/// The first forward long branch of the fixture (in `tl_forward`): the address of its
/// `s_add_i32` and its literal.
fn first_forward_branch(insns: &[Insn]) -> (u64, u32) {
    let k = insns
        .iter()
        .position(|i| i.mnemonic == "s_getpc_b64")
        .expect("an s_getpc_b64");
    let add = &insns[k + 1];
    assert!(
        matches!(add.mnemonic.as_str(), "s_add_i32" | "s_add_co_i32"),
        "{add:?}"
    );
    assert_ne!(insns[k + 2].mnemonic, "s_abs_i32", "a forward branch");
    (add.addr, int_operand(&add.operands[1]))
}

/// The first call-table builder of the fixture (in `tl_calltable`: `s_getpc_b64; s_add_i32;
/// s_add_u32; s_addc_u32; s_branch`): the address of its `s_add_i32` and its literal.
fn first_call_builder(insns: &[Insn]) -> (u64, u32) {
    let k = (0..insns.len() - 4)
        .find(|&k| insns[k].mnemonic == "s_getpc_b64" && insns[k + 4].mnemonic == "s_branch")
        .expect("a call-table builder");
    let add = &insns[k + 1];
    (add.addr, int_operand(&add.operands[1]))
}

/// A copy of `target`'s fixture whose long branch or builder (`which` picks it from the
/// disassembly) reaches `aim(original target, symbols)` instead, with that address checked to
/// be no instruction's start or a kernel's entry.
fn aimed_with(
    dir: &Path,
    target: &str,
    which: fn(&[Insn]) -> (u64, u32),
    aim: impl Fn(u64, &Syms) -> u64,
) -> PathBuf {
    let input = fixture(target);
    let insns = objdump(&input);
    let (add, lit) = which(&insns);
    let s = syms(&input);
    // The s_getpc_b64 (4 bytes) is right before the add: target = getpc + 4 + LIT + 4.
    let reached = add.wrapping_add(u64::from(lit)).wrapping_add(4);
    let new_target = aim(reached, &s);
    assert!(
        insns.iter().all(|i| i.addr != new_target) || s.kernels.values().any(|k| k.0 == new_target),
        "{target}: {new_target:#x} must be no instruction's start, or a kernel's entry"
    );
    let delta = new_target.wrapping_sub(reached) as i32;
    let moved = with_moved_literal(dir, &input, (add, lit), delta);
    let p = dir.join(format!("{target}.aimed.co"));
    std::fs::rename(moved, &p).expect("rename");
    p
}

/// [`aimed_with`] the first forward long branch.
fn aimed(dir: &Path, target: &str, aim: impl Fn(u64, &Syms) -> u64) -> PathBuf {
    aimed_with(dir, target, first_forward_branch, aim)
}

/// The end of `.text` (bytes): an address past every instruction.
fn text_end(s: &Syms) -> u64 {
    s.text_addr + s.text.len() as u64
}

/// Inside its own kernel: 2 bytes past the label the branch reached. Every config instruments
/// the other kernels, leaves `tl_forward` alone saying why, copies its bytes unchanged, and
/// `verify` accepts the output with the input's own finding as a warning.
#[test]
fn a_long_branch_into_an_instruction_costs_only_its_kernel() {
    if no_llvm() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let input = aimed(t.path(), target, |reached, _| reached + 2);
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} aimed inside its kernel");
            let (out, r) = patch(t.path(), &input, target, name, flags);
            only_left_alone(
                &ctx,
                &r,
                "tl_forward",
                "jump into the middle of an instruction",
            );
            assert!(r["text_kept_in_place"].is_null(), "{ctx}");
            let notes = r["notes"].as_array().expect("notes");
            assert!(
                notes
                    .iter()
                    .any(|n| n.as_str().unwrap_or_default().starts_with(
                        "the input is inconsistent (kept as it is): [branch] tl_forward"
                    )),
                "{ctx}: {notes:?}"
            );
            let functions = r["functions"].as_array().expect("functions");
            for k in ["tl_loop", "tl_calltable"] {
                let f = functions.iter().find(|f| f["name"] == k);
                let n = f.and_then(|f| f["inserted_instructions"].as_u64());
                assert!(n.is_some_and(|n| n > 0), "{ctx}: {k} instrumented");
            }
            // tl_forward's bytes are the input's, wherever it now is.
            let (si, so) = (syms(&input), syms(&out));
            let span = |s: &Syms| {
                let start = s.kernels["tl_forward"].0;
                let end = s.kernels["tl_loop"].0.min(start + 0x100);
                let at = (start - s.text_addr) as usize;
                s.text[at..at + (end - start) as usize].to_vec()
            };
            let len = span(&si).len();
            assert_eq!(span(&so)[..len], span(&si)[..], "{ctx}: tl_forward copied");
            let (code, text) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{text}");
            assert!(
                text.contains("warning: [branch] tl_forward"),
                "{ctx}: {text}"
            );
        }
    }
}

/// Into another kernel (2 bytes into `tl_loop`'s first instruction): `tl_forward` cannot move,
/// so `.text` stays in place and the instrumented kernels go to a new segment; `verify` accepts.
#[test]
fn a_long_branch_into_another_kernel_keeps_text_in_place() {
    if no_llvm() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let input = aimed(t.path(), target, |_, s| s.kernels["tl_loop"].0 + 2);
        let ctx = format!("{target} aimed into tl_loop");
        let (out, r) = patch(t.path(), &input, target, "fb", CONFIGS[0].1);
        only_left_alone(
            &ctx,
            &r,
            "tl_forward",
            "kept at its address: it cannot move (jump to ",
        );
        assert_eq!(r["text_kept_in_place"], true, "{ctx}");
        let (code, text) = verify(&input, &out);
        assert_eq!(code, 0, "{ctx}: verify:\n{text}");
    }
}

/// Aimed at another kernel's entry (session-23 fresh tester): under `--kernel-scopes` the kernel
/// was left alone with the verifier's "1 marker scope(s) still open at s_setpc_b64". The jump
/// leaves the kernel as a device function's tail call does, so its scope is closed in front
/// of the `s_setpc_b64`: every kernel is instrumented under every config, every kernel scope
/// site is marked, the re-aimed literal reaches `tl_loop`'s new entry (llvm-objdump-22 of the
/// output), and `verify` accepts.
#[test]
fn a_long_branch_to_another_kernels_entry_closes_its_scope() {
    if no_llvm() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let input = aimed(t.path(), target, |_, s| s.kernels["tl_loop"].0);
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} aimed at tl_loop's entry");
            let (out, r) = patch(t.path(), &input, target, name, flags);
            assert_eq!(
                r["left_alone"].as_array().map(Vec::len),
                Some(0),
                "{ctx}: {r}"
            );
            let scopes = r["coverage"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["feature"] == "kernel_scopes"));
            assert_eq!(
                scopes.is_some(),
                flags.contains(&"--kernel-scopes"),
                "{ctx}"
            );
            if let Some(c) = scopes {
                assert_eq!(c["instrumented"], c["found"], "{ctx}: {c}");
            }
            let (add, lit) = first_forward_branch(&objdump(&out));
            let reached = add.wrapping_add(u64::from(lit)).wrapping_add(4);
            assert_eq!(reached, syms(&out).kernels["tl_loop"].0, "{ctx}");
            let (code, text) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{text}");
        }
    }
}

/// Past the end of `.text` (session-23 fresh tester): the address the long branch keeps holds
/// other code once code moves (it became `tl_calltable`'s entry), so `tl_forward` cannot move:
/// `.text` stays in place, the other kernels are instrumented, `verify` accepts.
#[test]
fn a_long_branch_past_text_keeps_its_kernel_at_its_address() {
    if no_llvm() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let input = aimed(t.path(), target, |_, s| text_end(s));
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} aimed past .text");
            let (out, r) = patch(t.path(), &input, target, name, flags);
            only_left_alone(&ctx, &r, "tl_forward", "kept at its address");
            assert_eq!(r["text_kept_in_place"], true, "{ctx}");
            let (code, text) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{text}");
        }
    }
}

/// A call-table builder aimed past the end of `.text` (session-23 fresh tester): its literal
/// cannot reach that address from the moved kernel ("cannot be re-aimed"), which failed the
/// whole object. Now `.text` stays in place when moving fails, so only `tl_calltable` is left
/// alone, under every config, and `verify` accepts.
#[test]
fn a_builder_that_cannot_be_re_aimed_costs_only_its_kernel() {
    if no_llvm() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    for target in TARGETS {
        let input = aimed_with(t.path(), target, first_call_builder, |_, s| text_end(s));
        for (name, flags) in CONFIGS {
            let ctx = format!("{target} {name} call table aimed past .text");
            let (out, r) = patch(t.path(), &input, target, name, flags);
            only_left_alone(&ctx, &r, "tl_calltable", "");
            let functions = r["functions"].as_array().expect("functions");
            for k in ["tl_forward", "tl_loop"] {
                let f = functions.iter().find(|f| f["name"] == k);
                let n = f.and_then(|f| f["inserted_instructions"].as_u64());
                assert!(n.is_some_and(|n| n > 0), "{ctx}: {k} instrumented");
            }
            let (code, text) = verify(&input, &out);
            assert_eq!(code, 0, "{ctx}: verify:\n{text}");
        }
    }
}
