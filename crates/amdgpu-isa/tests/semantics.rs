//! Classification, flow, branch, literal, register and memory facts of single instructions,
//! assembled by llvm-mc-22 (the oracle for the bytes; the expectations restate LLVM's
//! instruction definitions and the ISA manuals).
mod common;

use amdgpu_isa::{
    decode, Flow, Format, InstClass, Instruction, MemKind, MemSpace, Special, SpecialReg, Target,
};
use std::io::Write;
use std::process::{Command, Stdio};

fn asm(mcpu: &str, text: &str) -> Instruction {
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
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("llvm-mc");
    let s = String::from_utf8_lossy(&out.stdout);
    let enc = s.split("encoding: [").nth(1).unwrap_or_else(|| {
        panic!(
            "{mcpu}: llvm-mc rejected `{text}`: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let bytes: Vec<u8> = enc
        .split(']')
        .next()
        .expect("]")
        .split(',')
        .map(|b| u8::from_str_radix(b.trim_start_matches("0x"), 16).expect("hex"))
        .collect();
    let t = Target::from_name(mcpu).expect("target");
    let i = decode(&bytes, t).unwrap_or_else(|e| panic!("{mcpu}: `{text}`: {e}"));
    assert_eq!(i.len(), bytes.len(), "{mcpu}: `{text}` length");
    assert_eq!(i.bytes(), &bytes[..]);
    i
}

#[test]
fn control_flow_and_specials() {
    if common::no_llvm() {
        return;
    }
    for cpu in [
        "gfx900", "gfx942", "gfx1030", "gfx1100", "gfx1200", "gfx1250",
    ] {
        let b = asm(cpu, "s_cbranch_scc1 5");
        assert_eq!(b.flow(), Flow::Branch { conditional: true }, "{cpu}");
        assert_eq!(b.class(), InstClass::Branch);
        assert_eq!(b.branch_target(0x100), Some(0x100 + 4 + 20));
        assert!(
            b.reads().contains(SpecialReg::Scc),
            "{cpu}: s_cbranch_scc1 reads SCC"
        );
        let moved = b.with_branch_target(0x100, 0x40).expect("in range");
        assert_eq!(moved.branch_target(0x100), Some(0x40));
        assert!(
            b.with_branch_target(0, 0x40000).is_err(),
            "{cpu}: out of simm16 range"
        );
        let br = asm(cpu, "s_branch 0");
        assert_eq!(br.flow(), Flow::Branch { conditional: false });
        let e = asm(cpu, "s_endpgm");
        assert_eq!(
            (e.flow(), e.special()),
            (Flow::EndProgram, Special::EndPgm),
            "{cpu}"
        );
        let t = asm(cpu, "s_ttracedata");
        assert_eq!(t.special(), Special::TtraceData);
        assert!(
            t.reads().contains(SpecialReg::M0),
            "{cpu}: s_ttracedata reads M0"
        );
        if cpu.starts_with("gfx12") {
            assert_eq!(
                asm(cpu, "s_barrier_signal -1").special(),
                Special::SBarrierSignal,
                "{cpu}"
            );
            assert_eq!(
                asm(cpu, "s_barrier_wait -1").special(),
                Special::SBarrierWait,
                "{cpu}"
            );
        } else {
            assert_eq!(asm(cpu, "s_barrier").special(), Special::SBarrier, "{cpu}");
        }
        assert_eq!(asm(cpu, "s_nop 3").special(), Special::Nop);
        assert_eq!(
            asm(cpu, "s_sendmsg sendmsg(MSG_INTERRUPT)").special(),
            Special::Sendmsg,
            "{cpu}"
        );
        let m = asm(cpu, "s_mov_b32 m0, s3");
        assert!(
            m.writes().contains(SpecialReg::M0) && m.reads().contains_sgpr(3),
            "{cpu}"
        );
        assert_eq!(m.class(), InstClass::Salu);
        let a = asm(
            cpu,
            if cpu.starts_with("gfx12") {
                "s_add_co_u32 s0, s1, 0x12345678"
            } else {
                "s_add_u32 s0, s1, 0x12345678"
            },
        );
        assert_eq!(a.literal(), Some(0x1234_5678));
        assert!(
            a.writes().contains_sgpr(0) && a.writes().contains(SpecialReg::Scc),
            "{cpu}: add writes SCC"
        );
        assert_eq!(a.with_literal(0x42).expect("fits").literal(), Some(0x42));
        assert!(a.with_literal(1 << 40).is_err());
        let r = asm(cpu, "v_readlane_b32 s5, v7, 3");
        assert!(
            r.writes().contains_sgpr(5) && r.reads().contains_vgpr(7),
            "{cpu}: readlane regs {:?} {:?}",
            r.writes(),
            r.reads()
        );
        assert_eq!(r.class(), InstClass::Valu);
        let (getpc, setpc, swappc) = if cpu == "gfx1250" {
            ("s_get_pc_i64", "s_set_pc_i64", "s_swap_pc_i64")
        } else {
            ("s_getpc_b64", "s_setpc_b64", "s_swappc_b64")
        };
        let g = asm(cpu, &format!("{getpc} s[4:5]"));
        assert_eq!(g.special(), Special::GetPc);
        assert!(g.writes().contains_sgpr(4) && g.writes().contains_sgpr(5));
        let s = asm(cpu, &format!("{setpc} s[4:5]"));
        assert_eq!(s.flow(), Flow::IndirectJump);
        assert!(s.reads().contains_sgpr(5));
        let c = asm(cpu, &format!("{swappc} s[30:31], s[4:5]"));
        assert_eq!(c.flow(), Flow::Call);
        assert!(c.writes().contains_sgpr(31) && c.reads().contains_sgpr(4));
        if cpu != "gfx900" && cpu != "gfx942" {
            assert_eq!(
                asm(cpu, "s_ttracedata_imm 9").special(),
                Special::TtraceDataImm(9)
            );
        }
    }
}

/// MFMA operands in AGPRs by the encoding's `acc`/`acc_cd` bits (gfx90a/gfx942; LLVM
/// `VOP3Pe_MAI`): register sets and text name AGPRs, as llvm-mc assembled them.
#[test]
fn mfma_acc_operands() {
    if common::no_llvm() {
        return;
    }
    for cpu in ["gfx90a", "gfx942"] {
        let i = asm(
            cpu,
            "v_mfma_f32_32x32x2f32 a[32:47], a8, v129, a[32:47] cbsz:1 blgp:2",
        );
        let (r, w) = (i.reads(), i.writes());
        assert!(r.contains_agpr(8) && !r.contains_vgpr(8), "{cpu}: {i}");
        assert!(r.contains_vgpr(129) && !r.contains_agpr(129), "{cpu}: {i}");
        assert!(r.contains_agpr(47) && !r.contains_vgpr(47), "{cpu}: {i}");
        assert!(w.contains_agpr(32) && !w.contains_vgpr(32), "{cpu}: {i}");
        assert!(
            i.to_string()
                .ends_with("a[32:47], a8, v129, a[32:47] cbsz:1 blgp:2"),
            "{cpu}: {i}"
        );
        let v = asm(cpu, "v_mfma_f32_32x32x2f32 v[32:47], v8, a129, v[32:47]");
        assert!(
            v.reads().contains_vgpr(8) && v.reads().contains_agpr(129),
            "{cpu}: {v}"
        );
        assert!(
            v.writes().contains_vgpr(32) && !v.writes().contains_agpr(32),
            "{cpu}: {v}"
        );
    }
}

#[test]
fn memory_and_formats() {
    if common::no_llvm() {
        return;
    }
    let g = asm("gfx942", "global_load_dword v1, v[2:3], off offset:16");
    assert_eq!(g.format(), Format::Global);
    let m = g.memory().expect("memory");
    assert_eq!(
        (m.space, m.kind, m.vaddr),
        (MemSpace::Global, MemKind::Load, Some((2, 2)))
    );
    assert!(g.writes().contains_vgpr(1) && g.reads().contains_vgpr(3));
    let s = asm("gfx1100", "global_store_b32 v0, v1, s[4:5]");
    let m = s.memory().expect("memory");
    assert_eq!(
        (m.space, m.kind, m.saddr),
        (MemSpace::Global, MemKind::Store, Some((4, 2)))
    );
    assert!(s.reads().contains_sgpr(5) && s.reads().contains_vgpr(1));
    let d = asm("gfx90a", "ds_add_u32 v1, v2 offset:8");
    let m = d.memory().expect("memory");
    assert_eq!(
        (m.space, m.kind, m.ds_offsets),
        (MemSpace::Lds, MemKind::Atomic, Some((8, 0)))
    );
    let b = asm("gfx1030", "buffer_load_dword v1, v2, s[8:11], s3 offen");
    let m = b.memory().expect("memory");
    assert_eq!(
        (m.space, m.srsrc, m.soffset),
        (
            MemSpace::Buffer {
                offen: true,
                idxen: false
            },
            Some((8, 4)),
            Some(3)
        )
    );
    let k = asm("gfx1200", "s_load_b64 s[2:3], s[0:1], 0x10");
    assert_eq!(k.class(), InstClass::Smem);
    assert!(k.writes().contains_sgpr(3) && k.reads().contains_sgpr(1));
    let l = asm("gfx1250", "s_add_pc_i64 0x123456789");
    assert_eq!(
        (l.len(), l.literal(), l.special()),
        (12, Some(0x1_2345_6789), Special::AddPcI64)
    );
    let v = asm("gfx1100", "v_add_f32_e32 v1, 0x40490fdb, v2");
    assert_eq!((v.len(), v.literal()), (8, Some(0x4049_0fdb)));
    assert!(v.reads().contains(SpecialReg::ExecLo), "VALU reads EXEC");
}

#[test]
fn targets_and_errors() {
    let t = Target::from_name("gfx90a:xnack+").expect("target id");
    assert_eq!(t.name(), "gfx90a");
    assert_eq!(
        Target::from_elf_mach(0x4c).map(|t| t.name()),
        Some("gfx942")
    );
    assert_eq!(
        Target::from_elf_mach(0x59).map(|t| t.name()),
        Some("gfx12-generic")
    );
    assert!(Target::from_name("gfx803").is_none());
    assert!(!Target::from_name("gfx906").expect("t").has_ttracedata_imm());
    // Truncated literal: s_mov_b32 m0, <literal> without its literal dword.
    let e = decode(
        &[0xff, 0x00, 0xfd, 0xbe],
        Target::from_name("gfx1100").expect("t"),
    )
    .expect_err("truncated");
    assert!(
        matches!(
            e.kind,
            amdgpu_isa::DecodeErrorKind::Truncated {
                needed: 8,
                available: 4
            }
        ),
        "{e}"
    );
    assert!(decode(&[0, 0], t).is_err());
}
