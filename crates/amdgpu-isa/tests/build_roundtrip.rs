//! `build::` snippets round trip: llvm-mc-22 assembles the same LLVM text to the same bytes, for
//! a processor of every family.
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};
use std::io::Write;
use std::process::{Command, Stdio};

fn llvm_mc_encode(mcpu: &str, lines: &[String]) -> Vec<Vec<u8>> {
    let mut child = Command::new(format!("{}/llvm-mc", common::LLVM_BIN))
        .args(["-arch=amdgcn", &format!("-mcpu={mcpu}"), "-show-encoding"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.join("\n").as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("llvm-mc output");
    assert!(
        out.status.success(),
        "llvm-mc failed for {mcpu}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("encoding: [").nth(1))
        .map(|e| {
            e.trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim_start_matches("0x"), 16).expect("hex byte"))
                .collect()
        })
        .collect()
}

fn snippets(t: Target) -> Vec<(Instruction, String)> {
    let f = t.family();
    let gfx12 = f >= Family::Gfx12;
    let mut v: Vec<(Instruction, String)> = vec![
        (build::s_nop(t, 0).expect("s_nop"), "s_nop 0".into()),
        (
            build::s_ttracedata(t).expect("s_ttracedata"),
            "s_ttracedata".into(),
        ),
        (
            build::s_mov_b32(t, Operand::M0, Operand::Literal(0x1234)).expect("mov"),
            "s_mov_b32 m0, 0x1234".into(),
        ),
        (
            build::s_mov_b32(t, Operand::M0, Operand::Sgpr(7)).expect("mov"),
            "s_mov_b32 m0, s7".into(),
        ),
        (
            build::s_mov_b32(t, Operand::Sgpr(3), Operand::ExecLo).expect("mov"),
            "s_mov_b32 s3, exec_lo".into(),
        ),
        (
            build::s_mov_b32(t, Operand::Sgpr(3), Operand::ExecHi).expect("mov"),
            "s_mov_b32 s3, exec_hi".into(),
        ),
        (
            build::s_mov_b32(t, Operand::Sgpr(3), Operand::Imm(-5)).expect("mov"),
            "s_mov_b32 s3, -5".into(),
        ),
        (
            build::s_branch(t, -3).expect("branch"),
            "s_branch 65533".into(),
        ),
        (
            build::s_cbranch_scc0(t, 5).expect("cbranch"),
            "s_cbranch_scc0 5".into(),
        ),
        (
            build::s_cbranch_scc1(t, 5).expect("cbranch"),
            "s_cbranch_scc1 5".into(),
        ),
        (
            build::s_cbranch_execz(t, 5).expect("cbranch"),
            "s_cbranch_execz 5".into(),
        ),
        (
            build::s_cbranch_vccz(t, 5).expect("cbranch"),
            "s_cbranch_vccz 5".into(),
        ),
        (
            build::s_getreg_b32(t, Operand::Sgpr(4), 4, 0, 32).expect("getreg"),
            "s_getreg_b32 s4, hwreg(4, 0, 32)".into(),
        ),
        (
            build::s_bitcmp1_b32(t, Operand::Sgpr(9), Operand::Imm(3)).expect("bitcmp"),
            "s_bitcmp1_b32 s9, 3".into(),
        ),
        (
            build::s_cmp(
                t,
                "s_cmp_eq_u32",
                Operand::Sgpr(9),
                Operand::Literal(0xdead),
            )
            .expect("cmp"),
            "s_cmp_eq_u32 s9, 0xdead".into(),
        ),
        (
            build::s_and_b32(t, Operand::Sgpr(1), Operand::Sgpr(2), Operand::Imm(1)).expect("and"),
            "s_and_b32 s1, s2, 1".into(),
        ),
        (
            build::s_lshr_b32(t, Operand::Sgpr(1), Operand::Sgpr(2), Operand::Imm(4))
                .expect("lshr"),
            "s_lshr_b32 s1, s2, 4".into(),
        ),
        (
            build::s_or_b32(t, Operand::M0, Operand::M0, Operand::Literal(0x1234)).expect("or"),
            "s_or_b32 m0, m0, 0x1234".into(),
        ),
        (
            build::s_lshl_b32(t, Operand::M0, Operand::Sgpr(2), Operand::Imm(20)).expect("lshl"),
            "s_lshl_b32 m0, s2, 20".into(),
        ),
        (
            build::s_cselect_b32(t, Operand::M0, Operand::Sgpr(2), Operand::Imm(0))
                .expect("cselect"),
            "s_cselect_b32 m0, s2, 0".into(),
        ),
        (
            build::v_readlane_b32(t, Operand::Sgpr(5), 7, Operand::Imm(3)).expect("readlane"),
            "v_readlane_b32 s5, v7, 3".into(),
        ),
        (
            build::v_readlane_b32(t, Operand::Sgpr(5), 7, Operand::Sgpr(8)).expect("readlane"),
            "v_readlane_b32 s5, v7, s8".into(),
        ),
        (
            build::v_writelane_b32(t, 255, Operand::Sgpr(101), Operand::Imm(31))
                .expect("writelane"),
            "v_writelane_b32 v255, s101, 31".into(),
        ),
        (
            build::v_writelane_b32(t, 3, Operand::Sgpr(0), Operand::Imm(0)).expect("writelane"),
            "v_writelane_b32 v3, s0, 0".into(),
        ),
    ];
    let (add, addc) = if gfx12 {
        ("s_add_co_u32", "s_add_co_ci_u32")
    } else {
        ("s_add_u32", "s_addc_u32")
    };
    let (getpc, setpc) = if f == Family::Gfx1250 {
        ("s_get_pc_i64", "s_set_pc_i64")
    } else {
        ("s_getpc_b64", "s_setpc_b64")
    };
    v.push((
        build::s_add_u32(
            t,
            Operand::Sgpr(10),
            Operand::Sgpr(10),
            Operand::Literal(0x100),
        )
        .expect("add"),
        format!("{add} s10, s10, 0x100"),
    ));
    v.push((
        build::s_addc_u32(t, Operand::Sgpr(11), Operand::Sgpr(11), Operand::Imm(0)).expect("addc"),
        format!("{addc} s11, s11, 0"),
    ));
    v.push((
        build::s_getpc_b64(t, 10).expect("getpc"),
        format!("{getpc} s[10:11]"),
    ));
    v.push((
        build::s_setpc_b64(t, 10).expect("setpc"),
        format!("{setpc} s[10:11]"),
    ));
    if t.has_ttracedata_imm() {
        v.push((
            build::s_ttracedata_imm(t, 7).expect("imm"),
            "s_ttracedata_imm 7".into(),
        ));
        v.push((
            build::s_mov_b32(t, Operand::Null, Operand::Sgpr(1)).expect("null"),
            "s_mov_b32 null, s1".into(),
        ));
    } else {
        assert!(
            build::s_ttracedata_imm(t, 7).is_err(),
            "gfx9 has no s_ttracedata_imm"
        );
    }
    if gfx12 {
        v.push((
            build::s_wait_alu(t, 0xfffe).expect("wait_alu"),
            "s_wait_alu 0xfffe".into(),
        ));
    } else if f != Family::Gfx9 {
        v.push((
            build::s_waitcnt_depctr(t, 0xfffe).expect("depctr"),
            "s_waitcnt_depctr 0xfffe".into(),
        ));
        v.push((
            build::s_waitcnt_vscnt(t, 0).expect("vscnt"),
            "s_waitcnt_vscnt null, 0x0".into(),
        ));
    }
    if f == Family::Gfx1250 {
        v.push((
            build::s_get_shader_cycles_u64(t, 4).expect("cycles"),
            "s_get_shader_cycles_u64 s[4:5]".into(),
        ));
    }
    v
}

#[test]
fn build_snippets_match_llvm_mc_for_every_family() {
    if common::no_llvm() {
        return;
    }
    for name in [
        "gfx900", "gfx90a", "gfx942", "gfx950", "gfx1010", "gfx1030", "gfx1100", "gfx1151",
        "gfx1200", "gfx1201", "gfx1250",
    ] {
        let t = Target::from_name(name).expect("target");
        let sn = snippets(t);
        let texts: Vec<String> = sn.iter().map(|s| s.1.clone()).collect();
        let enc = llvm_mc_encode(name, &texts);
        assert_eq!(
            enc.len(),
            sn.len(),
            "{name}: llvm-mc encoded {} of {} lines",
            enc.len(),
            sn.len()
        );
        for ((inst, text), bytes) in sn.iter().zip(&enc) {
            assert_eq!(inst.bytes(), &bytes[..], "{name}: `{text}`");
        }
    }
}
