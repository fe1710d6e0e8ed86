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
    // SMEM offset registers are read; immediates are signed (gfx9 `imm`, gfx10+ 21/24-bit).
    for (cpu, text, soff, off) in [
        ("gfx900", "s_load_dword s5, s[2:3], s7", Some(7), 0),
        (
            "gfx900",
            "s_load_dword s5, s[2:3], s9 offset:0x10",
            Some(9),
            16,
        ),
        ("gfx900", "s_load_dword s5, s[2:3], -0x10", None, -16),
        (
            "gfx1030",
            "s_load_dword s5, s[2:3], s11 offset:-0x10",
            Some(11),
            -16,
        ),
        ("gfx1030", "s_load_dword s5, s[2:3], 0x10", None, 16),
        ("gfx1100", "s_buffer_load_b32 s5, s[4:7], m0", Some(125), 0),
        (
            "gfx1201",
            "s_load_b32 s5, s[2:3], s13 offset:-0x800000",
            Some(13),
            -0x80_0000,
        ),
        (
            "gfx1250",
            "s_prefetch_data s[2:3], 0x10, s17, 3",
            Some(17),
            16,
        ),
    ] {
        let i = asm(cpu, text);
        let m = i.memory().expect("memory");
        assert_eq!((m.soffset, i.mem_offset()), (soff, off), "{cpu} `{text}`");
        match soff {
            Some(125) => assert!(i.reads().contains(SpecialReg::M0), "{cpu} `{text}`"),
            Some(s) => assert!(i.reads().contains_sgpr(s), "{cpu} `{text}` reads s{s}"),
            None => assert!(!i.reads().contains_sgpr(5), "{cpu} `{text}`"),
        }
        assert_eq!(i.to_string(), text, "{cpu} text");
    }
    // Scalar atomics write sdata only with glc (the returning form).
    for (cpu, text, ret) in [
        ("gfx900", "s_atomic_add s5, s[2:3], 0x10 glc", true),
        ("gfx900", "s_atomic_add s5, s[2:3], 0x10", false),
        ("gfx1010", "s_atomic_cmpswap s[6:7], s[2:3], s9 glc", true),
    ] {
        let i = asm(cpu, text);
        assert_eq!(
            i.writes().contains_sgpr(5) || i.writes().contains_sgpr(6),
            ret,
            "{cpu} `{text}`"
        );
        assert_eq!(i.to_string(), text, "{cpu} text");
    }
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

/// Scalar operand texts that depend on the family or on bits outside the named fields:
/// llvm-mc-22 assembles each line and our text of its bytes must equal LLVM's canonical text.
#[test]
fn scalar_operand_text() {
    if common::no_llvm() {
        return;
    }
    for (cpu, text) in [
        ("gfx900", "s_nop 0x41"),
        ("gfx900", "s_set_gpr_idx_on s5, gpr_idx(SRC0,DST)"),
        (
            "gfx900",
            "s_buffer_load_dword s5, s[4:7], s7 offset:0x10 glc",
        ),
        ("gfx942", "s_getreg_b32 s0, hwreg(HW_REG_XCC_ID, 0, 1)"),
        ("gfx1010", "s_waitcnt_depctr depctr_vm_vsrc(0)"),
        (
            "gfx1030",
            "s_waitcnt_depctr depctr_hold_cnt(0) depctr_vm_vsrc(2)",
        ),
        ("gfx1030", "s_load_dword s5, s[2:3], null"),
        ("gfx1100", "s_version UC_VERSION_GFX11|UC_VERSION_W32_BIT"),
        ("gfx1100", "s_sleep 0x5dd6"),
        ("gfx1100", "s_load_b32 s5, s[2:3], s5 offset:-0x10 glc dlc"),
        (
            "gfx1201",
            "s_buffer_load_b32 s0, s[4:7], s50 offset:0x0 th:TH_LOAD_BYPASS scope:SCOPE_SYS nv",
        ),
        (
            "gfx1250",
            "s_load_b32 s0, s[4:5], m0 offset:-0x10 scale_offset th:TH_LOAD_HT",
        ),
        ("gfx1250", "s_add_nc_u64 s[0:1], s[0:1], lit64(0xafe0)"),
        ("gfx1250", "s_nor_b64 s[2:3], s[4:5], 0.15915494309189532"),
    ] {
        assert_eq!(asm(cpu, text).to_string(), text, "{cpu}");
    }
}

/// VGPR numbers of a register set, ascending.
fn vgprs(s: &amdgpu_isa::RegSet) -> Vec<u16> {
    (0..512).filter(|&n| s.contains_vgpr(n)).collect()
}

/// Image instructions: the VGPRs read and written follow the widths LLVM decodes (dmask, d16,
/// tfe, gather4, dim, a16, NSA and partial-NSA lists). llvm-mc-22 is the oracle twice: it
/// rejects these texts unless the register widths match dmask/d16/tfe and dim/a16, and our
/// text of the assembled bytes must be the same text (up to LLVM's double space after NSA
/// sampler mnemonics).
#[test]
fn image_operand_widths() {
    if common::no_llvm() {
        return;
    }
    let cases: &[(&str, &str, &[u16], &[u16])] = &[
        (
            "gfx1100",
            "image_sample v[0:2], v[4:5], s[8:15], s[12:15] dmask:0x7 dim:SQ_RSRC_IMG_2D",
            &[4, 5],
            &[0, 1, 2],
        ),
        (
            "gfx1100",
            "image_sample_d v[0:3], [v4, v9, v10, v11, v[12:16]], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_3D",
            &[4, 9, 10, 11, 12, 13, 14, 15, 16],
            &[0, 1, 2, 3],
        ),
        (
            "gfx1100",
            "image_gather4_b v[0:3], v[4:5], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_2D a16",
            &[4, 5],
            &[0, 1, 2, 3],
        ),
        (
            "gfx1100",
            "image_atomic_cmpswap v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_1D glc",
            &[0, 1, 4],
            &[0, 1],
        ),
        (
            "gfx1030",
            "image_load v[0:2], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D tfe d16",
            &[4],
            &[0, 1, 2],
        ),
        (
            "gfx1030",
            "image_sample_c_l v[0:1], [v4, v8, v12, v16], s[0:7], s[8:11] dmask:0x3 dim:SQ_RSRC_IMG_2D",
            &[4, 8, 12, 16],
            &[0, 1],
        ),
        (
            "gfx1201",
            "image_sample_d v[0:3], [v4, v5, v6, v[7:12]], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_3D",
            &[4, 5, 6, 7, 8, 9, 10, 11, 12],
            &[0, 1, 2, 3],
        ),
        (
            "gfx1201",
            "image_store v[0:1], [v4, v5], s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D",
            &[0, 1, 4, 5],
            &[],
        ),
        (
            "gfx900",
            "image_gather4 v[0:3], v4, s[0:7], s[8:11] dmask:0x1",
            &[4],
            &[0, 1, 2, 3],
        ),
        (
            "gfx900",
            "image_load v[0:1], v4, s[0:7] dmask:0x7 d16",
            &[4],
            &[0, 1],
        ),
        ("gfx90a", "image_load a[2:3], v0, s[0:7] dmask:0x3", &[0], &[]),
    ];
    for &(cpu, text, reads, writes) in cases {
        let i = asm(cpu, text);
        let ours = i
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(ours, text, "{cpu}: text");
        assert_eq!(vgprs(&i.reads()), reads, "{cpu}: `{text}` reads");
        assert_eq!(vgprs(&i.writes()), writes, "{cpu}: `{text}` writes");
        assert!(
            i.reads().contains(SpecialReg::ExecLo),
            "{cpu}: `{text}` EXEC"
        );
    }
    // Resource (8 SGPRs) and sampler (4 SGPRs) descriptors; the first address operand.
    let s = asm(
        "gfx1100",
        "image_sample_d v[0:3], [v4, v9, v10, v11, v[12:16]], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_3D",
    );
    let r = s.reads();
    assert!((0..12).all(|n| r.contains_sgpr(n)) && !r.contains_sgpr(12));
    let m = s.memory().expect("memory");
    assert_eq!(
        (m.space, m.kind, m.vaddr, m.srsrc),
        (MemSpace::Image, MemKind::Load, Some((4, 1)), Some((0, 8)))
    );
    // gfx90a: the acc bit makes the data AGPRs.
    let a = asm("gfx90a", "image_load a[2:3], v0, s[0:7] dmask:0x3");
    assert!(a.writes().contains_agpr(2) && a.writes().contains_agpr(3));
}

/// Address and data operands that the encodings' mode bits add, remove or widen (llvm-mc-22
/// assembles each form; the expectations restate LLVM's FLAT/BUF/DS/EXP operand lists and the
/// ISA manuals' microcode formats).
#[test]
fn memory_mode_bits() {
    if common::no_llvm() {
        return;
    }
    // GLOBAL with a TTMP pair as saddr: a 32-bit VGPR offset plus ttmp12..13, not v[2:3].
    let g = asm("gfx1100", "global_load_b32 v1, v2, ttmp[12:13]");
    let m = g.memory().expect("memory");
    assert_eq!((m.vaddr, m.saddr), (Some((2, 1)), Some((120, 2))));
    let r = g.reads();
    assert!(r.contains_vgpr(2) && !r.contains_vgpr(3), "{r:?}");
    assert!(r.contains_ttmp(12) && r.contains_ttmp(13), "{r:?}");
    // SCRATCH: the VGPR address exists only with SVE (gfx11 dword1 bit 23, gfx12 bit 17,
    // gfx940 dword0 bit 13) or, on gfx10, with saddr = off.
    for (cpu, text, vaddr, saddr) in [
        (
            "gfx1100",
            "scratch_load_b32 v1, off, s2",
            None,
            Some((2, 1)),
        ),
        (
            "gfx1100",
            "scratch_load_b32 v1, v5, s2",
            Some((5, 1)),
            Some((2, 1)),
        ),
        (
            "gfx1201",
            "scratch_load_b32 v1, v5, off",
            Some((5, 1)),
            None,
        ),
        (
            "gfx1030",
            "scratch_load_dword v1, v5, off",
            Some((5, 1)),
            None,
        ),
        (
            "gfx942",
            "scratch_load_dword v1, v5, off",
            Some((5, 1)),
            None,
        ),
    ] {
        let i = asm(cpu, text);
        let m = i.memory().expect("memory");
        assert_eq!(
            (m.space, m.vaddr, m.saddr),
            (MemSpace::Scratch, vaddr, saddr),
            "{cpu} {text}"
        );
        assert_eq!(i.reads().contains_vgpr(5), vaddr.is_some(), "{cpu} {text}");
        assert_eq!(i.to_string(), text, "{cpu}");
    }
    // gfx1250 FLAT with a scalar base.
    let f = asm("gfx1250", "flat_load_b32 v1, v2, s[4:5]");
    let m = f.memory().expect("memory");
    assert_eq!((m.vaddr, m.saddr), (Some((2, 1)), Some((4, 2))));
    // Buffer `tfe` writes one more dword; `offen` reads the address VGPR.
    let b = asm(
        "gfx1030",
        "buffer_load_dword v[1:2], v3, s[8:11], s4 offen tfe",
    );
    assert!(b.writes().contains_vgpr(1) && b.writes().contains_vgpr(2));
    assert!(b.reads().contains_vgpr(3));
    assert_eq!(b.memory().expect("memory").vaddr, Some((3, 1)));
    // Buffer `lds`: no VGPR is written, M0 (the LDS address) is read.
    let l = asm("gfx1030", "buffer_load_dword v3, s[8:11], s4 offen lds");
    assert_eq!(l.writes().max_vgpr(), None);
    assert!(l.reads().contains(SpecialReg::M0) && l.reads().contains_vgpr(3));
    // gfx90a `acc`: the data is an AGPR.
    let a = asm("gfx90a", "buffer_load_dword a1, off, s[8:11], s4");
    assert!(a.writes().contains_agpr(1) && !a.writes().contains_vgpr(1));
    // A returning atomic (glc) writes its vdst.
    let at = asm("gfx1100", "global_atomic_add_u32 v0, v1, v2, s[4:5] glc");
    assert!(at.writes().contains_vgpr(0) && !at.writes().contains_vgpr(1));
    // gfx11 DS `gds` bit.
    let d = asm("gfx1100", "ds_add_u32 v1, v2 gds");
    assert_eq!(d.memory().expect("memory").space, MemSpace::Gds);
    // EXP reads only the enabled sources (`off` encodes register 0).
    let e = asm("gfx1100", "exp mrt0 v1, off, v3, off");
    let r = e.reads();
    assert!(
        r.contains_vgpr(1) && r.contains_vgpr(3) && !r.contains_vgpr(0),
        "{r:?}"
    );
    let c = asm("gfx1030", "exp mrt0 v1, v1, v2, v2 compr");
    let r = c.reads();
    assert!(
        r.contains_vgpr(1) && r.contains_vgpr(2) && !r.contains_vgpr(0),
        "{r:?}"
    );
}

/// Dual-issue operands (LLVM `VOPDInstructions.td`: VOPD vdstY from its 7-bit field and the
/// parity of vdstX; VOPD3 every register field of `VOPD3e`) and tied accumulators (LLVM
/// `TIED_TO` constraints: v_fmac/v_dual_fmac/s_addk/v_swap read their destination).
#[test]
fn dual_issue_and_tied_operands() {
    if common::no_llvm() {
        return;
    }
    let vgprs = |s: &amdgpu_isa::RegSet| {
        (0..64)
            .filter(|&n| s.contains_vgpr(n))
            .collect::<Vec<u16>>()
    };
    // VOPD3: both destinations, three sources per half, the X and Y fmac accumulators.
    let d = asm(
        "gfx1250",
        "v_dual_fma_f32 v12, -v0, v9, v10 :: v_dual_fmac_f32 v11, v13, v6",
    );
    assert_eq!(d.format(), Format::Vopd3);
    assert_eq!(vgprs(&d.writes()), [11, 12]);
    assert_eq!(vgprs(&d.reads()), [0, 6, 9, 10, 11, 13]);
    assert_eq!(
        d.to_string(),
        "v_dual_fma_f32 v12, -v0, v9, v10 :: v_dual_fmac_f32 v11, v13, v6"
    );
    // VOPD3 v_dual_cndmask_b32 reads an SGPR (or VCC) mask from its 8-bit vsrc2 field.
    let c = asm(
        "gfx1250",
        "v_dual_mov_b32 v1, v2 :: v_dual_cndmask_b32 v5, v3, v4, s7",
    );
    assert_eq!(vgprs(&c.writes()), [1, 5]);
    assert_eq!(vgprs(&c.reads()), [2, 3, 4]);
    assert!(c.reads().contains_sgpr(7) && !c.reads().contains(SpecialReg::VccLo));
    let v = asm(
        "gfx1250",
        "v_dual_cndmask_b32 v2, v2, v6, vcc_lo :: v_dual_mov_b32 v6, 0",
    );
    assert!(v.reads().contains(SpecialReg::VccLo) && v.reads().contains_vgpr(6));
    assert_eq!(vgprs(&v.writes()), [2, 6]);
    // VOPD3 64-bit X half.
    let f = asm(
        "gfx1250",
        "v_dual_add_f64 v[4:5], v[6:7], v[8:9] :: v_dual_mov_b32 v11, v1",
    );
    assert_eq!(vgprs(&f.writes()), [4, 5, 11]);
    assert_eq!(vgprs(&f.reads()), [1, 6, 7, 8, 9]);
    // VOPD3 bitop2 Y: the bitop3 byte is no register.
    let b = asm(
        "gfx1250",
        "v_dual_lshrrev_b32 v0, 5, v0 :: v_dual_bitop2_b32 v1, 31, v0 bitop3:0x40",
    );
    assert_eq!(vgprs(&b.reads()), [0]);
    assert_eq!(vgprs(&b.writes()), [0, 1]);
    // VOPD (gfx11): the fmac accumulator of either half is read.
    for (text, acc) in [
        ("v_dual_mul_f32 v0, v1, v2 :: v_dual_fmac_f32 v3, v4, v5", 3),
        ("v_dual_fmac_f32 v0, v1, v2 :: v_dual_mul_f32 v3, v4, v5", 0),
    ] {
        let i = asm("gfx1100", text);
        assert!(i.reads().contains_vgpr(acc), "{text}: {:?}", i.reads());
        assert_eq!(vgprs(&i.writes()), [0, 3], "{text}");
    }
    for cpu in [
        "gfx900", "gfx942", "gfx1030", "gfx1100", "gfx1200", "gfx1250",
    ] {
        let k = asm(cpu, "s_addk_i32 s3, 0x10");
        assert!(
            k.reads().contains_sgpr(3) && k.writes().contains_sgpr(3),
            "{cpu}"
        );
        let s = asm(cpu, "v_swap_b32 v1, v2");
        assert_eq!(vgprs(&s.reads()), [1, 2], "{cpu}");
        assert_eq!(vgprs(&s.writes()), [1, 2], "{cpu}");
        if cpu != "gfx900" {
            let m = asm(cpu, "v_fmac_f32 v5, v1, v2");
            assert_eq!(vgprs(&m.reads()), [1, 2, 5], "{cpu}");
        }
    }
}
