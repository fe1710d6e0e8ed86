//! An in-kernel subroutine (issue 37 item 3) whose return pair was earlier the pair of a long
//! branch. hipBLASLt gfx1201 kernels (`TensileLibrary_B8B8_BB8_HA_Bias_SAV_UA_Type_B8B_HPA_*`)
//! jump over their GSU code with `s_getpc_b64 s[30:31]; s_add_co_i32 s32, LIT, 4;
//! s_add_co_u32 s30, s30, s32; s_add_co_ci_u32 s31, s31, 0; s_setpc_b64 s[30:31]`, and later
//! call their activation subroutines with `s_swappc_b64 s[30:31], s[12:13]`, which return with
//! `s_setpc_b64 s[30:31]`. The verifier took every `s_setpc_b64` through a pair after such a
//! builder for a long branch to the builder's target, even with a call writing the pair in
//! between: those returns were never resolved, the subroutines were no regions of their own, and
//! the verifier rejected the `F:` scopes the rewriter gave them ("names the F: row ..., which is
//! not the in-kernel subroutine entered here"): the whole kernel was left alone, all its markers
//! lost (54 kernels in the first 34 of the 149 gfx1201 objects). Now a rejected subroutine
//! scope would only cost the kernel its subroutine scopes (`sqtt-pipeline`'s verified
//! rewrite); this test wants them placed. The same shape here, with the pair s[6:7].

#[path = "support/asm.rs"]
mod asm;
use asm::{assemble, kernel, rewrite, verify};

/// The kernel (gfx1201, wave32): a long branch through s[6:7] over an `s_nop`, then a call of
/// `label_Activation_Relu_VW1` through a call-table builder into s[10:11] that writes the return
/// address into s[6:7], a store and `s_endpgm`; the subroutine follows and returns with
/// `s_setpc_b64 s[6:7]`.
const BODY: &str = "  s_load_b64 s[4:5], s[0:1], 0x0\n\
  s_getpc_b64 s[6:7]\n\
.Lpc_long:\n\
  s_add_co_i32 s8, .Lover - .Lpc_long - 4, 4\n\
  s_add_co_u32 s6, s6, s8\n\
  s_add_co_ci_u32 s7, s7, 0\n\
  s_setpc_b64 s[6:7]\n\
  s_nop 0\n\
.Lover:\n\
  v_mov_b32 v1, v0\n\
  s_getpc_b64 s[10:11]\n\
.Lpc_call:\n\
  s_add_co_i32 s12, label_Activation_Relu_VW1 - .Lpc_call - 4, 4\n\
  s_add_co_u32 s10, s10, s12\n\
  s_add_co_ci_u32 s11, s11, 0\n\
  s_swappc_b64 s[6:7], s[10:11]\n\
  v_mov_b32 v2, 0\n\
  s_wait_kmcnt 0\n\
  global_store_b32 v2, v1, s[4:5]\n\
  s_endpgm\n\
label_Activation_Relu_VW1:\n\
  v_max_f32 v1, 0, v1\n\
  s_setpc_b64 s[6:7]";

const FLAGS: [&str; 5] = ["--functions", "1", "--barriers", "1", "--kernel-scopes"];

/// The rewrite instruments the kernel (nothing left alone), gives the subroutine its scope (one
/// function entry, one function exit, an `F:` row named by its label) and the verifier accepts
/// the output; with the subroutine's exit marker overwritten by `s_nop 0` it still names the
/// scope open at the subroutine's return.
#[test]
fn subroutine_returning_through_a_long_branch_pair_gets_its_scope() {
    let t = tempfile::tempdir().unwrap();
    let co = assemble(t.path(), "k", "gfx1201", &kernel("gfx1201", true, BODY));
    let out = t.path().join("k.out.co");
    let r = rewrite(&co, &out, &FLAGS);
    assert_eq!(r["left_alone"], serde_json::json!([]), "{r:#}");
    let sites = &r["functions"][0]["sites"];
    assert_eq!(sites["function_entry"], 1, "{r:#}");
    assert_eq!(sites["function_exit"], 1, "{r:#}");
    assert!(
        r["ids"].get("label_Activation_Relu_VW1").is_some(),
        "no F: row named by the label: {r:#}"
    );
    let (code, text) = verify(&co, &out);
    assert_eq!(code, 0, "{text}");

    // The exit marker in front of the return: the last `s_ttracedata_imm 0x1` of the output.
    let bytes = std::fs::read(&out).unwrap();
    let exit = 0xbfbb_0001u32.to_le_bytes();
    let at = bytes
        .windows(4)
        .rposition(|w| w == exit)
        .expect("an exit marker (s_ttracedata_imm 0x1)");
    let mut v = bytes.clone();
    v[at..at + 4].copy_from_slice(&0xbf80_0000u32.to_le_bytes());
    let mutated = t.path().join("k.mutated.co");
    std::fs::write(&mutated, &v).unwrap();
    let (code, text) = verify(&co, &mutated);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("still open at s_setpc_b64 (return of an in-kernel subroutine)"),
        "{text}"
    );
}
