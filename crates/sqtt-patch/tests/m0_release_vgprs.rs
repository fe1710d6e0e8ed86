//! `s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)` before `s_endpgm` (gfx11 and gfx12: LLVM's
//! `SIInsertWaitcnts` emits it after register allocation without setting M0) does not read M0.
//! The decoder's tables list an M0 use for every `s_sendmsg`; taken at its word, M0 was live with
//! an unknown value through every kernel that never writes M0, every address-trace block had to
//! save M0 in an SGPR first, and CUB's rocPRIM `block_reduce` kernels on gfx1201 (all other SGPRs
//! taken) lost 462 address-trace sites ("no SGPR is provably free"). On gfx10 message 3 is
//! MSG_GS_DONE, which does read M0: there M0 is still saved, and the verifier still catches a
//! missing restore.

#[path = "support/asm.rs"]
mod asm;
use asm::{assemble, kernel, rewrite, verify};

/// A kernel for `mcpu` (gfx1030, gfx1100 or gfx12) that loads a word through its kernarg
/// pointer, stores it back and ends with the message `msg`; M0 is never written.
fn source(mcpu: &str, msg: &str) -> String {
    let body = match mcpu {
        "gfx1030" => {
            "  s_load_dwordx2 s[2:3], s[0:1], 0x0\n  v_mov_b32 v1, 0\n  s_waitcnt lgkmcnt(0)\n  \
             global_load_dword v2, v1, s[2:3]\n  s_waitcnt vmcnt(0)\n  \
             global_store_dword v1, v2, s[2:3] offset:4"
        }
        "gfx1100" => {
            "  s_load_b64 s[2:3], s[0:1], 0x0\n  v_mov_b32 v1, 0\n  s_waitcnt lgkmcnt(0)\n  \
             global_load_b32 v2, v1, s[2:3]\n  s_waitcnt vmcnt(0)\n  \
             global_store_b32 v1, v2, s[2:3] offset:4"
        }
        _ => {
            "  s_load_b64 s[2:3], s[0:1], 0x0\n  v_mov_b32 v1, 0\n  s_wait_kmcnt 0\n  \
             global_load_b32 v2, v1, s[2:3]\n  s_wait_loadcnt 0\n  \
             global_store_b32 v1, v2, s[2:3] offset:4"
        }
    };
    kernel(
        mcpu,
        true,
        &format!("{body}\n  s_sendmsg {msg}\n  s_endpgm"),
    )
}

/// Rewrites the kernel for `mcpu` with address tracing of memory operations, checks the report
/// (both sites traced) and the verifier, and returns the input, the output and llvm-objdump-22's
/// disassembly of the output.
fn traced(
    dir: &std::path::Path,
    mcpu: &str,
    msg: &str,
) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let co = assemble(dir, mcpu, mcpu, &source(mcpu, msg));
    let out = dir.join(format!("{mcpu}.out.co"));
    let r = rewrite(&co, &out, &["--trace-addresses", "memory"]);
    assert_eq!(r["functions"][0]["sites"]["address_trace"], 2, "{r}");
    assert!(r["skipped"].as_array().is_none_or(Vec::is_empty), "{r}");
    let (code, text) = verify(&co, &out);
    assert_eq!(code, 0, "{text}");
    let dis = std::process::Command::new("llvm-objdump-22")
        .args(["-d", "--no-show-raw-insn", "--no-leading-addr"])
        .arg(&out)
        .output()
        .expect("llvm-objdump-22 (apt-get install llvm-22)");
    assert!(dis.status.success());
    (co, out, String::from_utf8_lossy(&dis.stdout).into_owned())
}

/// Lines of a disassembly that copy M0 into an SGPR (`s_mov_b32 sN, m0`: the save), comments
/// (`// address: words`) cut off.
fn m0_saves(dis: &str) -> usize {
    dis.lines()
        .filter(|l| {
            let l = l.split("//").next().unwrap_or("").trim();
            l.starts_with("s_mov_b32 s") && l.ends_with(", m0")
        })
        .count()
}

#[test]
fn release_vgprs_message_leaves_m0_dead_on_gfx11_and_gfx12() {
    let t = tempfile::tempdir().unwrap();
    for mcpu in ["gfx1100", "gfx1201"] {
        let (_, _, dis) = traced(t.path(), mcpu, "sendmsg(MSG_DEALLOC_VGPRS)");
        assert!(
            dis.contains("s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)"),
            "{dis}"
        );
        assert_eq!(m0_saves(&dis), 0, "{mcpu}: M0 saved although dead:\n{dis}");
    }
}

#[test]
fn gs_done_message_on_gfx10_still_reads_m0() {
    let t = tempfile::tempdir().unwrap();
    let (co, out, dis) = traced(t.path(), "gfx1030", "sendmsg(MSG_GS_DONE, GS_OP_NOP)");
    assert!(
        m0_saves(&dis) >= 1,
        "M0 not saved before the blocks:\n{dis}"
    );
    // Every restore `s_mov_b32 m0, sN` (SOP1 on gfx10: 0xbefc03NN) turned into `s_nop 0`
    // (0xbf800000): the message then reads the blocks' M0, and the verifier must say so.
    let mut bytes = std::fs::read(&out).unwrap();
    let mut hits = 0;
    for at in 0..bytes.len().saturating_sub(3) {
        if at % 4 == 0 && bytes[at] < 106 && bytes[at + 1..at + 4] == [0x03, 0xfc, 0xbe] {
            bytes[at..at + 4].copy_from_slice(&[0x00, 0x00, 0x80, 0xbf]);
            hits += 1;
        }
    }
    assert!(hits >= 1, "no M0 restore found in the output");
    let bad = t.path().join("bad.co");
    std::fs::write(&bad, &bytes).unwrap();
    let (code, text) = verify(&co, &bad);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("[m0]"), "{text}");
}
