//! A scope-guarded marker on gfx9 (no `s_ttracedata_imm`: the marker value goes through M0) in
//! front of code that still reads M0 (`ds_gws_barrier`: GWS takes its resource base from M0,
//! ISA manual "DS" chapter). The rewriter puts M0's value back by writing the constant the
//! original program holds there on every path (`s_mov_b32 m0, 0` before a loop). On the path
//! where the guard skips the marker nothing is written. The verifier must see that both paths
//! leave M0 equal to that constant: before, its trials started from a random M0, the two paths
//! disagreed, and the kernel was rejected and left alone (jax's `CholeskyUpdateKernel` on
//! gfx906/908/90a/90c under `--scope`). A wrong constant must still be caught.

#[path = "support/asm.rs"]
mod asm;
use asm::{assemble, kernel, rewrite, verify};

/// The kernel (gfx908, wave64).
const BODY: &str = "  s_mov_b32 m0, 0\n\
  s_load_dword s6, s[4:5], 0x0\n\
  s_waitcnt lgkmcnt(0)\n\
  s_cmp_eq_u32 s6, 0\n\
  s_cbranch_scc1 .Lend\n\
.Lloop:\n\
  s_barrier\n\
  v_mov_b32 v0, s6\n\
  ds_gws_barrier v0 gds\n\
  s_waitcnt lgkmcnt(0)\n\
  s_add_u32 s6, s6, -1\n\
  s_cmp_lg_u32 s6, 0\n\
  s_cbranch_scc1 .Lloop\n\
.Lend:\n\
  s_endpgm";

#[test]
fn guarded_marker_restoring_a_known_m0_constant_verifies() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let co = assemble(t.path(), "k", "gfx908", &kernel("gfx908", false, BODY));
    let out = t.path().join("k.out.co");
    let r = rewrite(&co, &out, &["--barriers", "1", "--scope"]);
    assert!(r["left_alone"].as_array().is_none_or(Vec::is_empty), "{r}");
    assert_eq!(r["functions"][0]["sites"]["barrier"], 1, "{r}");
    let (code, text) = verify(&co, &out);
    assert_eq!(code, 0, "{text}");

    // The inserted `s_mov_b32 m0, 0` after the marker (`s_ttracedata` = 0xbf960000, then
    // 0xbefc0080), changed to `s_mov_b32 m0, 1`: M0 no longer holds the original constant on
    // the marker's path, and the GWS barrier reads it.
    let mut bytes = std::fs::read(&out).unwrap();
    let pat = [0x00, 0x00, 0x96, 0xbf, 0x80, 0x00, 0xfc, 0xbe];
    let at = bytes
        .windows(pat.len())
        .position(|w| w == pat)
        .expect("s_ttracedata followed by s_mov_b32 m0, 0 in the output");
    bytes[at + 4] = 0x81;
    let bad = t.path().join("k.bad.co");
    std::fs::write(&bad, &bytes).unwrap();
    let (code, text) = verify(&co, &bad);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("[m0]") && text.contains("M0 is live here"),
        "{text}"
    );
}
