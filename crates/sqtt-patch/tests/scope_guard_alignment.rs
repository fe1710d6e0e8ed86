//! A conditional branch right before scope-guarded markers (`--scope`: each marker is
//! `s_cmp_lg_u32 sFLAG, 0; s_cbranch_scc0 1; s_ttracedata_imm`), inside a stretch of SALU code
//! that inserted code could also hold. The verifier's alignment matched the original
//! `s_cbranch_scc0` as late as it could, to the guard's own `s_cbranch_scc0` over its marker,
//! found that branch reaching the wrong place, and the function was left alone: MAGMA sparse's
//! `bajac_csr_o_ls` kernels (Debian `libmagma-sparse2-rocm`) lost 17,379 of 223,564 sites under
//! `--scope`. The alignment now prefers the match whose original branches reach where their
//! targets were matched; a branch really re-aimed into a guard is still caught.
//!
//! On gfx1010 each guarded marker ends with `s_waitcnt_vscnt null, 0` (the LDS → branch → VMEM
//! hazard), the same word as an original wait in front of which the markers go: neither the
//! latest nor the earliest such wait is the original, the misplaced original then sat on
//! another `.debug_line` row, and the function was left alone (`[dwarf]`; MAGMA sparse and
//! rocRAND gfx1010 under `--scope`, 2,264 and 7,996 sites). The alignment also tries the latest
//! match that takes no wait closing a marker for an original.

#[path = "support/asm.rs"]
mod asm;
use asm::{assemble, assemble_with, kernel, rewrite, verify};

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

/// gfx1010: two points and a barrier marker, all scope-guarded and each closed by
/// `s_waitcnt_vscnt null, 0`, around an original `s_waitcnt_vscnt null, 0`; DWARF line rows per
/// instruction (clang-22 `-g` on the assembly source).
#[test]
fn original_wait_among_closing_waits_keeps_its_line() {
    let t = tempfile::tempdir().unwrap();
    let body =
        "  s_load_dwordx2 s[4:5], s[0:1], 0x0\n  s_waitcnt lgkmcnt(0)\n  v_mov_b32 v1, 0\n  \
                global_store_dword v1, v1, s[4:5]\n  s_waitcnt_vscnt null, 0x0\n  s_barrier\n  \
                s_endpgm";
    let co = assemble_with(
        t.path(),
        "k",
        "gfx1010",
        &kernel("gfx1010", true, body),
        &["-g"],
    );
    let out = t.path().join("k.out.co");
    // The points go in front of `s_waitcnt_vscnt null, 0x0` (k+0x18).
    let r = rewrite(
        &co,
        &out,
        &[
            "--point",
            "a=k+0x18",
            "--point",
            "b=k+0x18",
            "--barriers",
            "1",
            "--scope",
        ],
    );
    assert!(r["left_alone"].as_array().is_none_or(Vec::is_empty), "{r}");
    assert_eq!(r["functions"][0]["sites"]["user_point"], 2, "{r}");
    assert_eq!(r["functions"][0]["sites"]["barrier"], 1, "{r}");
    let (code, text) = verify(&co, &out);
    assert_eq!(code, 0, "{text}");
    // The original wait keeps its line: in llvm-dwarfdump-22's rows, the row covering its new
    // address has the line the row covering its old one had (its line in the assembly source).
    let rows = |f: &std::path::Path| {
        let o = std::process::Command::new("llvm-dwarfdump-22")
            .arg("--debug-line")
            .arg(f)
            .output()
            .expect("llvm-dwarfdump-22");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The line of the last row at or before `addr` (rows of the one sequence, ascending).
    let line_of = |dump: &str, addr: u64| {
        dump.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let a = u64::from_str_radix(f.next()?.strip_prefix("0x")?, 16).ok()?;
                Some((a, f.next()?.to_string()))
            })
            .take_while(|(a, _)| *a <= addr)
            .last()
            .map(|(_, line)| line)
    };
    let before = line_of(&rows(&co), 0x1418).expect("a row at the original wait");
    let dis = std::process::Command::new("llvm-objdump-22")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&out)
        .output()
        .expect("llvm-objdump-22");
    let dis = String::from_utf8_lossy(&dis.stdout);
    // The original wait is the last one before `s_barrier` that a marker does not precede.
    let lines: Vec<&str> = dis.lines().collect();
    let barrier = lines.iter().position(|l| l.contains("s_barrier")).unwrap();
    let wait = (0..barrier)
        .rev()
        .find(|&q| lines[q].contains("s_waitcnt_vscnt") && !lines[q - 1].contains("s_ttracedata"))
        .expect("the original wait");
    let addr = u64::from_str_radix(
        lines[wait]
            .rsplit("// ")
            .next()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .trim(),
        16,
    )
    .unwrap();
    assert_eq!(line_of(&rows(&out), addr), Some(before), "{dis}");
}
