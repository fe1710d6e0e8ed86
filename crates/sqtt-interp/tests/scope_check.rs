//! Scope-check snippets ("Scope filtering" of the spec; field layout from
//! notes/funcmap-contract.md "Scope check fields"): `s_getreg_b32` of HW_ID (gfx9, hwreg 4) /
//! HW_ID1 (hwreg 23) and HW_ID2 (hwreg 24) on gfx10+, extract the CU/WGP (and other) fields, test
//! a mask bit and branch over a marker. The marker must appear exactly when the mask bits are set.
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};
use common::{code_of, cross_check, dwords, target, Rng, CONFIGS};
use sqtt_interp::{run, shaderdata_of, InterpError, Wave};

const MARKER: u32 = (0x123 << 2) | 2; // enter scope 0x123
const AFTER: u32 = 0x1; // exit marker, emitted unconditionally after the skip

/// (hwreg id, offset, size) of the CU/WGP field: gfx9 HW_ID CU[11:8], gfx10+ HW_ID1 WGP[13:10].
fn cu_field(t: Target) -> (u8, u8, u8) {
    if t.family() == Family::Gfx9 {
        (4, 8, 4)
    } else {
        (23, 10, 4)
    }
}

fn marker(t: Target, v: u32) -> Vec<Instruction> {
    vec![
        build::s_mov_b32(t, Operand::M0, Operand::Literal(v)).expect("mov"),
        build::s_nop(t, 0).expect("nop"),
        build::s_ttracedata(t).expect("ttracedata"),
    ]
}

/// `insts` + `s_cbranch_scc0` over the marker + marker + unconditional trailing marker.
fn guarded(t: Target, mut insts: Vec<Instruction>) -> Vec<Instruction> {
    let m = marker(t, MARKER);
    insts.push(build::s_cbranch_scc0(t, dwords(&m)).expect("s_cbranch_scc0"));
    insts.extend(m);
    insts.extend(marker(t, AFTER));
    insts
}

/// Variant A: field via s_getreg offset/size, then `s_bitcmp1_b32 mask, field`.
fn bitcmp_check(t: Target, mask: u32) -> Vec<Instruction> {
    let (id, off, size) = cu_field(t);
    guarded(
        t,
        vec![
            build::s_getreg_b32(t, Operand::Sgpr(2), id, off, size).expect("getreg"),
            build::s_bitcmp1_b32(t, Operand::Literal(mask), Operand::Sgpr(2)).expect("bitcmp1"),
        ],
    )
}

/// Variant B: whole register read, field by s_lshr/s_and, result cached in s4 by s_cselect and
/// tested later with s_cmp_lg_u32 (the spec computes the check once per function).
fn cached_check(t: Target, mask: u32) -> Vec<Instruction> {
    let (id, off, _) = cu_field(t);
    let s = Operand::Sgpr;
    guarded(
        t,
        vec![
            build::s_getreg_b32(t, s(2), id, 0, 32).expect("getreg"),
            build::s_lshr_b32(t, s(3), s(2), Operand::Imm(i32::from(off))).expect("lshr"),
            build::s_and_b32(t, s(3), s(3), Operand::Imm(0xf)).expect("and"),
            build::s_lshr_b32(t, s(3), Operand::Literal(mask), s(3)).expect("lshr"),
            build::s_and_b32(t, s(3), s(3), Operand::Imm(1)).expect("and"),
            build::s_cselect_b32(t, s(4), Operand::Imm(1), Operand::Imm(0)).expect("cselect"),
            // Clobber SCC in between, as other code would.
            build::s_cmp(t, "s_cmp_eq_u32", s(2), s(2)).expect("cmp"),
            build::s_cmp(t, "s_cmp_lg_u32", s(4), Operand::Imm(0)).expect("cmp"),
        ],
    )
}

fn expect_stream(present: bool) -> Vec<u32> {
    if present {
        vec![MARKER, AFTER]
    } else {
        vec![AFTER]
    }
}

fn hw_id_with_cu(t: Target, cu: u32, noise: u32) -> u32 {
    let (_, off, size) = cu_field(t);
    let field = ((1u32 << size) - 1) << off;
    (noise & !field) | (cu << off)
}

#[test]
fn marker_appears_exactly_when_cu_mask_bit_is_set() {
    let mut rng = Rng(0xc0ffee);
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let (id, _, _) = cu_field(t);
        for mask in [0x3u32, 0x5, 0x8001, 0xfffe, rng.next_u32() & 0xffff] {
            let a = code_of(&bitcmp_check(t, mask));
            let b = code_of(&cached_check(t, mask));
            cross_check(
                name,
                ws,
                &a,
                &["s_getreg_b32", "s_bitcmp1_b32", "s_cbranch_scc0"],
            );
            cross_check(
                name,
                ws,
                &b,
                &["s_getreg_b32", "s_lshr_b32", "s_cselect_b32"],
            );
            for cu in 0..16u32 {
                let hw = hw_id_with_cu(t, cu, rng.next_u32());
                let want = expect_stream((mask >> cu) & 1 == 1);
                for code in [&a, &b] {
                    let got = shaderdata_of(t, ws, code, |w| {
                        w.hwreg.insert(id, hw);
                        w.scc = rng.next_u32() & 1 == 1;
                    })
                    .expect("run");
                    assert_eq!(
                        got, want,
                        "{name} wave{ws} mask {mask:#x} cu {cu} hw {hw:#x}"
                    );
                }
            }
        }
    }
}

/// gfx10+: WGP (HW_ID1[13:10]), SIMD (HW_ID1[9:8]) and WG (HW_ID2[20:16]) masks combined.
#[test]
fn combined_rdna_masks_need_every_bit() {
    let mut rng = Rng(99);
    let (cu_mask, simd_mask, wg_mask) = (0x3u32, 0x5u32, 0x0f0f_00ffu32);
    for &(name, ws) in CONFIGS {
        let t = target(name);
        if t.family() == Family::Gfx9 {
            continue;
        }
        let s = Operand::Sgpr;
        let mut insts = Vec::new();
        // s5 = AND of the three tests (1/0); each test leaves its bit in s3.
        insts.push(build::s_mov_b32(t, s(5), Operand::Imm(1)).expect("mov"));
        for (id, off, size, mask) in [
            (23u8, 10u8, 4u8, cu_mask),
            (23, 8, 2, simd_mask),
            (24, 16, 5, wg_mask),
        ] {
            insts.push(build::s_getreg_b32(t, s(2), id, off, size).expect("getreg"));
            insts.push(build::s_lshr_b32(t, s(3), Operand::Literal(mask), s(2)).expect("lshr"));
            insts.push(build::s_and_b32(t, s(5), s(5), s(3)).expect("and"));
        }
        insts.push(build::s_bitcmp1_b32(t, s(5), Operand::Imm(0)).expect("bitcmp1"));
        let code = code_of(&guarded(t, insts));
        cross_check(
            name,
            ws,
            &code,
            &[
                "s_getreg_b32",
                "s_getreg_b32",
                "s_getreg_b32",
                "s_bitcmp1_b32",
            ],
        );
        let mut seen = [0usize; 2];
        for _ in 0..300 {
            let (id1, id2) = (rng.next_u32(), rng.next_u32());
            let (wgp, simd, wg) = ((id1 >> 10) & 0xf, (id1 >> 8) & 3, (id2 >> 16) & 0x1f);
            let on = (cu_mask >> wgp) & 1 == 1
                && (simd_mask >> simd) & 1 == 1
                && (wg_mask >> wg) & 1 == 1;
            seen[usize::from(on)] += 1;
            let got = shaderdata_of(t, ws, &code, |w| {
                w.hwreg.insert(23, id1);
                w.hwreg.insert(24, id2);
            })
            .expect("run");
            assert_eq!(got, expect_stream(on), "{name} id1 {id1:#x} id2 {id2:#x}");
        }
        assert!(
            seen[0] > 0 && seen[1] > 0,
            "both outcomes exercised: {seen:?}"
        );
    }
}

#[test]
fn missing_hwreg_is_a_typed_error() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let code = code_of(&bitcmp_check(t, 0x3));
        let mut w = Wave::new(t, ws).expect("wave");
        let err = run(&mut w, &code, 0x100, 100).expect_err("hwreg undefined");
        assert_eq!(
            err,
            InterpError::UninitialisedHwreg {
                pc: 0x100,
                offset: 0,
                id: cu_field(t).0
            },
            "{name}"
        );
    }
}
