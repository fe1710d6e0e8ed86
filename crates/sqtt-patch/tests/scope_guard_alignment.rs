//! A conditional branch right before scope-guarded markers (`--scope`: each marker is
//! `s_cmp_lg_u32 sFLAG, 0; s_cbranch_scc0 1; s_ttracedata_imm`), inside a stretch of SALU code
//! that inserted code could also hold. The verifier's alignment matched the original
//! `s_cbranch_scc0` as late as it could, to the guard's own `s_cbranch_scc0` over its marker,
//! found that branch reaching the wrong place, and the function was left alone: MAGMA sparse's
//! `bajac_csr_o_ls` kernels (Debian `libmagma-sparse2-rocm`) lost 17,379 of 223,564 sites under
//! `--scope`. The alignment now prefers the match whose original branches reach where their
//! targets were matched; a branch really re-aimed into a guard is still caught.

#[path = "support/asm.rs"]
mod asm;
use asm::{assemble, kernel, rewrite, verify};

/// The kernel (gfx1100, wave32): `s_cbranch_scc0` at k+0x20 over `s_cmp_eq_u32 s2, 2` (k+0x24).
const BODY: &str = "  s_load_b64 s[4:5], s[0:1], 0x0\n\
  s_waitcnt lgkmcnt(0)\n\
  s_load_b32 s2, s[4:5], 0x0\n\
  s_mov_b32 s3, 0\n\
  s_waitcnt lgkmcnt(0)\n\
  s_cmp_gt_i32 s2, 1\n\
  s_cbranch_scc0 .Lt\n\
  s_cmp_eq_u32 s2, 2\n\
  s_cbranch_scc1 .Lt\n\
  s_mov_b32 s3, -1\n\
.Lt:\n\
  s_mov_b32 s6, s3\n\
  s_cbranch_execz .Lend\n\
  v_mov_b32 v0, s6\n\
  v_mov_b32 v1, 0\n\
  global_store_b32 v1, v0, s[4:5]\n\
.Lend:\n\
  s_endpgm";

#[test]
fn original_branch_before_scope_guards_is_aligned_to_itself() {
    let t = tempfile::tempdir().unwrap();
    let co = assemble(t.path(), "k", "gfx1100", &kernel("gfx1100", true, BODY));
    let out = t.path().join("k.out.co");
    // Two points at `s_cmp_eq_u32 s2, 2` (k+0x24), the fall-through of `s_cbranch_scc0`.
    let r = rewrite(
        &co,
        &out,
        &["--point", "a=k+0x24", "--point", "b=k+0x24", "--scope"],
    );
    assert!(r["left_alone"].as_array().is_none_or(Vec::is_empty), "{r}");
    assert_eq!(r["functions"][0]["sites"]["user_point"], 2, "{r}");
    let (code, text) = verify(&co, &out);
    assert_eq!(code, 0, "{text}");

    // The original `s_cbranch_scc0` (after `s_cmp_gt_i32 s2, 1` = 0xbf028102) re-aimed one
    // instruction ahead, into the first guard: the verifier must reject it.
    let mut bytes = std::fs::read(&out).unwrap();
    let cmp = [0x02, 0x81, 0x02, 0xbf];
    let at = bytes
        .windows(4)
        .position(|w| w == cmp)
        .expect("s_cmp_gt_i32 s2, 1 in the output")
        + 4;
    assert_eq!(
        bytes[at + 2..at + 4],
        [0xa1, 0xbf],
        "s_cbranch_scc0 follows it"
    );
    bytes[at..at + 2].copy_from_slice(&[0x01, 0x00]);
    let bad = t.path().join("k.bad.co");
    std::fs::write(&bad, &bytes).unwrap();
    let (code, text) = verify(&co, &bad);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("[branch]"), "{text}");
}
