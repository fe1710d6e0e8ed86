//! Per-instruction semantics on snippets assembled by `llvm-mc-22` (the encoding oracle), the
//! gfx12 shader-clock packing of the spec ("GFX12 Shader Clock Packing"), and the typed errors.
//! Snippets here come from LLVM, so with `SQTT_NO_LLVM=1` and no LLVM the LLVM parts are skipped;
//! the error tests use `amdgpu_isa::build` only.
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{decode, testing, Target};
use common::{code_of, llvm_asm, target, CONFIGS};
use sqtt_interp::semantics::{is_supported, SUPPORTED};
use sqtt_interp::{run, shaderdata_of, InterpError, Wave};

/// Assembles `text` for (mcpu, wave size) and returns the stream after `setup`.
fn run_asm(mcpu: &str, ws: u32, text: &str, setup: impl FnOnce(&mut Wave)) -> Option<Vec<u32>> {
    let code = llvm_asm(mcpu, ws, text)?;
    Some(
        shaderdata_of(target(mcpu), ws, &code, setup)
            .unwrap_or_else(|e| panic!("{mcpu}: {e}\n{text}")),
    )
}

/// `<op> m0, a, b` spelled for the family (gfx12 renames of add/sub).
fn rename(mcpu: &str, op: &str) -> String {
    let gfx12 = mcpu.starts_with("gfx12");
    match op {
        "s_add_u32" if gfx12 => "s_add_co_u32".into(),
        "s_addc_u32" if gfx12 => "s_add_co_ci_u32".into(),
        "s_sub_u32" if gfx12 => "s_sub_co_u32".into(),
        o => o.into(),
    }
}

#[test]
fn sop2_results_and_scc() {
    // (op, a, b, scc_in, result, scc_out) from the ISA manuals' SOP2 descriptions.
    let cases: &[(&str, u32, u32, bool, u32, bool)] = &[
        ("s_and_b32", 0xf0f0, 0x0ff0, false, 0x00f0, true),
        ("s_and_b32", 0xf000, 0x0ff0, true, 0, false),
        ("s_or_b32", 0xf000, 0x000f, false, 0xf00f, true),
        ("s_lshr_b32", 0x8000_0000, 35, false, 0x1000_0000, true),
        ("s_lshl_b32", 0x8000_0001, 1, true, 2, true),
        ("s_lshl_b32", 0x8000_0000, 1, true, 0, false),
        ("s_bfe_u32", 0xabcd_1234, (8 << 16) | 4, false, 0x23, true),
        ("s_bfe_u32", 0xabcd_1234, 4, true, 0, false),
        ("s_add_u32", 0xffff_ffff, 2, false, 1, true),
        ("s_add_u32", 5, 6, true, 11, false),
        ("s_addc_u32", 0xffff_ffff, 0, true, 0, true),
        ("s_addc_u32", 5, 6, true, 12, false),
        ("s_sub_u32", 5, 6, false, 0xffff_ffff, true),
        ("s_sub_u32", 6, 5, true, 1, false),
        ("s_cselect_b32", 7, 9, true, 7, true),
        ("s_cselect_b32", 7, 9, false, 9, false),
    ];
    // One snippet per target: case k reads s[20 + 2k], s[21 + 2k]; SCC is set by an s_cmp.
    for &(name, ws) in CONFIGS {
        let mut text = String::new();
        let mut want = Vec::new();
        for (k, &(op, _, _, scc, r, r_scc)) in cases.iter().enumerate() {
            let op = rename(name, op);
            let (x, y) = (20 + 2 * k, 21 + 2 * k);
            let set_scc = if scc {
                "s_cmp_eq_u32 0, 0"
            } else {
                "s_cmp_eq_u32 0, 1"
            };
            // Result through M0; SCC through s_cselect into a second record.
            text += &format!(
                "{set_scc}\n{op} s7, s{x}, s{y}\ns_mov_b32 m0, s7\ns_ttracedata\ns_cselect_b32 m0, 1, 0\ns_ttracedata\n"
            );
            want.extend([r, u32::from(r_scc)]);
        }
        let Some(got) = run_asm(name, ws, &text, |w| {
            for (k, &(_, a, b, ..)) in cases.iter().enumerate() {
                w.sgpr[20 + 2 * k] = a;
                w.sgpr[21 + 2 * k] = b;
            }
        }) else {
            return;
        };
        for (k, c) in cases.iter().enumerate() {
            assert_eq!(
                got[2 * k..2 * k + 2],
                want[2 * k..2 * k + 2],
                "{name}: {c:?}"
            );
        }
    }
}

/// `s_cmpk_eq_u32` / `s_cmpk_lg_u32` (SOPK, gfx9..gfx11; hipBLASLt's call-table selectors): the
/// register in the `sdst` field against the zero-extended 16-bit immediate.
#[test]
fn sopk_compares() {
    // (op, register value, immediate, SCC)
    let cases: &[(&str, u32, u32, bool)] = &[
        ("s_cmpk_eq_u32", 2, 2, true),
        ("s_cmpk_eq_u32", 3, 2, false),
        ("s_cmpk_eq_u32", 0xffff, 0xffff, true),
        ("s_cmpk_eq_u32", 0xffff_ffff, 0xffff, false),
        ("s_cmpk_lg_u32", 0, 0, false),
        ("s_cmpk_lg_u32", 0x1_0000, 0, true),
    ];
    for &(name, ws) in CONFIGS.iter().filter(|c| !c.0.starts_with("gfx12")) {
        let mut text = String::new();
        for (k, &(op, _, imm, want)) in cases.iter().enumerate() {
            let set_scc = if want {
                "s_cmp_eq_u32 0, 1"
            } else {
                "s_cmp_eq_u32 0, 0"
            };
            text += &format!(
                "{set_scc}\n{op} s{}, {imm:#x}\ns_cselect_b32 m0, 1, 0\ns_ttracedata\n",
                20 + k
            );
        }
        let Some(got) = run_asm(name, ws, &text, |w| {
            for (k, &(_, v, _, _)) in cases.iter().enumerate() {
                w.sgpr[20 + k] = v;
            }
        }) else {
            return;
        };
        for (k, c) in cases.iter().enumerate() {
            assert_eq!(got[k], u32::from(c.3), "{name}: {c:?}");
        }
    }
}

#[test]
fn sopc_compares() {
    let cases: &[(&str, u32, u32, bool)] = &[
        ("s_cmp_eq_u32", 3, 3, true),
        ("s_cmp_lg_u32", 3, 3, false),
        ("s_cmp_lt_u32", 1, 0xffff_ffff, true),
        ("s_cmp_lt_i32", 1, 0xffff_ffff, false),
        ("s_cmp_le_u32", 4, 4, true),
        ("s_cmp_gt_u32", 0xffff_ffff, 1, true),
        ("s_cmp_gt_i32", 0xffff_ffff, 1, false),
        ("s_cmp_ge_i32", 0xffff_fffe, 0xffff_fffe, true),
        ("s_cmp_le_i32", 0x8000_0000, 0, true),
        ("s_cmp_eq_i32", 0, 1, false),
        ("s_cmp_lg_i32", 0, 1, true),
        ("s_cmp_ge_u32", 0, 1, false),
        ("s_bitcmp1_b32", 0b1000, 3, true),
        ("s_bitcmp1_b32", 0b1000, 35, true),
        ("s_bitcmp0_b32", 0b1000, 3, false),
        ("s_bitcmp0_b32", 0b1000, 2, true),
        ("s_bitcmp1_b32", 0x10_0000, 20, true),
        ("s_bitcmp1_b32", 0x10, 20, false),
        ("s_bitcmp0_b32", 0x8000_0000, 31, false),
    ];
    for &(name, ws) in CONFIGS {
        let mut text = String::new();
        for (k, &(op, _, _, want)) in cases.iter().enumerate() {
            // SCC starts opposite to the expected result.
            let set_scc = if want {
                "s_cmp_eq_u32 0, 1"
            } else {
                "s_cmp_eq_u32 0, 0"
            };
            text += &format!(
                "{set_scc}\n{op} s{}, s{}\ns_cselect_b32 m0, 1, 0\ns_ttracedata\n",
                20 + 2 * k,
                21 + 2 * k
            );
        }
        let Some(got) = run_asm(name, ws, &text, |w| {
            for (k, &(_, a, b, _)) in cases.iter().enumerate() {
                w.sgpr[20 + 2 * k] = a;
                w.sgpr[21 + 2 * k] = b;
            }
        }) else {
            return;
        };
        for (k, c) in cases.iter().enumerate() {
            assert_eq!(got[k], u32::from(c.3), "{name}: {c:?}");
        }
    }
}

#[test]
fn conditional_branches_on_exec_and_vcc() {
    for &(name, ws) in CONFIGS {
        for (br, exec, vcc, taken) in [
            ("s_cbranch_execz", 0u64, 0u64, true),
            ("s_cbranch_execz", 1 << 40, 0, ws == 32), // lane 40 does not exist on wave32
            ("s_cbranch_execnz", 1 << 3, 0, true),
            ("s_cbranch_vccz", u64::MAX, 0, true),
            ("s_cbranch_vccz", 0, 1 << 40, ws == 32),
            ("s_cbranch_vccnz", 0, 1 << 33, ws == 64),
            ("s_cbranch_vccnz", 0, 1, true),
            ("s_branch", 0, 0, true),
        ] {
            // Taken: skip the first marker (2 dwords: s_mov with inline constant + ttracedata).
            let text =
                format!("{br} 2\ns_mov_b32 m0, 1\ns_ttracedata\ns_mov_b32 m0, 2\ns_ttracedata\n");
            let Some(got) = run_asm(name, ws, &text, |w| {
                w.exec = exec;
                w.vcc = vcc;
            }) else {
                return;
            };
            let want = if taken { vec![2] } else { vec![1, 2] };
            assert_eq!(
                got, want,
                "{name} wave{ws}: {br} exec={exec:#x} vcc={vcc:#x}"
            );
        }
    }
}

#[test]
fn moves_readlane_and_special_operands() {
    for &(name, ws) in CONFIGS {
        let wait = if name.starts_with("gfx12") {
            "s_wait_alu 0xfffe\ns_delay_alu 0\n"
        } else if name.starts_with("gfx11") {
            "s_waitcnt 0\ns_delay_alu 0\n"
        } else {
            "s_waitcnt 0\n"
        };
        let text = format!(
            "s_mov_b64 s[4:5], exec\n{wait}s_mov_b32 m0, s4\ns_ttracedata\ns_mov_b32 m0, s5\ns_ttracedata\n\
             s_mov_b32 m0, 35\nv_readlane_b32 s6, v1, m0\ns_mov_b32 m0, s6\ns_ttracedata\n\
             v_readlane_b32 s6, v1, 2\ns_mov_b32 m0, s6\ns_ttracedata\n\
             s_mov_b32 m0, -7\ns_ttracedata\ns_mov_b32 m0, 1.0\ns_ttracedata\n\
             s_mov_b32 exec_hi, 0x99\ns_mov_b32 m0, exec_hi\ns_ttracedata\n\
             s_mov_b32 m0, vcc_hi\ns_ttracedata\n"
        );
        let Some(got) = run_asm(name, ws, &text, |w| {
            w.exec = 0x1234_5678_9abc_def0;
            w.vcc = 0x5555_0000_0000_0000;
            for l in 0..64 {
                w.vgpr[1][l] = 100 + l as u32;
            }
        }) else {
            return;
        };
        let exec = if ws == 64 {
            0x1234_5678_9abc_def0u64
        } else {
            0x9abc_def0
        };
        // Lane 35 is lane 3 on wave32 (lane select modulo wave size).
        let lane35 = if ws == 64 { 135 } else { 103 };
        let exec_hi_written = if ws == 64 { 0x99 } else { 0 };
        let want = vec![
            exec as u32,
            (exec >> 32) as u32,
            lane35,
            102,
            -7i32 as u32,
            0x3f80_0000,
            exec_hi_written,
            0x5555_0000,
        ];
        assert_eq!(got, want, "{name} wave{ws}");
    }
}

/// gfx1200: `s_getreg_b32 hwreg(HW_REG_SHADER_CYCLES_LO, 4, 12)`; gfx1250:
/// `s_get_shader_cycles_u64` + `s_bfe_u32`; both packed into marker bits 31..20 over id << 2.
#[test]
fn gfx12_shader_clock_packing() {
    let id: u32 = 0x2_5a5a; // 18-bit id
    let enter = 2;
    for (mcpu, sample) in [
        (
            "gfx1200",
            "s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES_LO, 4, 12)\n",
        ),
        (
            "gfx1250",
            "s_get_shader_cycles_u64 s[0:1]\ns_bfe_u32 s0, s0, 0xc0004\n",
        ),
    ] {
        let text = format!(
            "{sample}s_lshl_b32 s0, s0, 20\ns_or_b32 m0, s0, {:#x}\ns_nop 0\ns_ttracedata\n",
            (id << 2) | enter
        );
        for cycles in [0u64, 0x1_0000_fff0, 0xdead_beef_1234_5678, 0xffff] {
            let Some(got) = run_asm(mcpu, 32, &text, |w| w.shader_cycles = cycles) else {
                return;
            };
            let v = got[0];
            // The spec's decoding with clock_bits = 12, shift = 4.
            assert_eq!(
                v >> 20,
                ((cycles >> 4) & 0xfff) as u32,
                "{mcpu} cycles {cycles:#x}"
            );
            assert_eq!((v >> 2) & ((1 << 18) - 1), id);
            assert_eq!((v >> 1) & 1, 1);
            assert_eq!(v & 1, 0);
        }
    }
    // gfx11 HW_REG_SHADER_CYCLES is the 20-bit counter.
    if let Some(got) = run_asm(
        "gfx1100",
        32,
        "s_getreg_b32 s0, hwreg(HW_REG_SHADER_CYCLES, 0, 20)\ns_mov_b32 m0, s0\ns_ttracedata\n",
        |w| w.shader_cycles = 0x1234_5678_9abc,
    ) {
        assert_eq!(got, vec![0x8_9abc]);
    }
}

#[test]
fn endpgm_stops_and_reports_its_pc() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let Some(code) = llvm_asm(name, ws, "s_ttracedata\ns_endpgm\ns_ttracedata\n") else {
            return;
        };
        let mut w = Wave::new(t, ws).expect("wave");
        w.m0 = 9;
        let r = run(&mut w, &code, 0x200, 10).expect("run");
        assert_eq!(
            (r.shaderdata, r.executed, r.exit_pc),
            (vec![9], 2, 0x204),
            "{name}"
        );
    }
}

#[test]
fn unsupported_instruction_is_named() {
    for &(name, ws) in CONFIGS {
        let Some(code) = llvm_asm(name, ws, "s_nop 0\nv_mov_b32 v0, v1\n") else {
            return;
        };
        let mut w = Wave::new(target(name), ws).expect("wave");
        match run(&mut w, &code, 0x40, 10) {
            Err(InterpError::Unsupported {
                pc: 0x44,
                offset: 4,
                mnemonic,
            }) => {
                assert!(mnemonic.starts_with("v_mov_b32"), "{name}: {mnemonic}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn step_limit_branch_out_and_decode_errors() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        // s_branch -1 loops on itself forever.
        let code = code_of(&[build::s_branch(t, -1).expect("branch")]);
        let mut w = Wave::new(t, ws).expect("wave");
        assert_eq!(
            run(&mut w, &code, 0x80, 50),
            Err(InterpError::StepLimit {
                max_steps: 50,
                pc: 0x80
            })
        );
        // A branch leaving the range ends the run at its target.
        let code = code_of(&[
            build::s_ttracedata(t).expect("t"),
            build::s_branch(t, 100).expect("b"),
        ]);
        let r = run(&mut w, &code, 0x80, 50).expect("run");
        assert_eq!((r.exit_pc, r.executed), (0x80 + 8 + 400, 2));
        // A literal cut off by the end of the code.
        let mov = build::s_mov_b32(t, Operand::M0, Operand::Literal(0x1234)).expect("mov");
        let err = run(&mut w, &mov.bytes()[..4], 0, 5).expect_err("truncated");
        assert!(
            matches!(
                err,
                InterpError::Decode {
                    pc: 0,
                    offset: 0,
                    ..
                }
            ),
            "{name}: {err:?}"
        );
        // Reading a VGPR the wave does not have.
        let rl =
            build::v_readlane_b32(t, Operand::Sgpr(0), 200, Operand::Imm(0)).expect("readlane");
        w.vgpr.truncate(8);
        let err = run(&mut w, rl.bytes(), 0, 5).expect_err("vgpr");
        assert_eq!(
            err,
            InterpError::VgprOutOfRange {
                pc: 0,
                offset: 0,
                vgpr: 200,
                available: 8
            },
            "{name}"
        );
    }
}

#[test]
fn bad_wave_sizes_are_rejected() {
    assert!(matches!(
        Wave::new(target("gfx942"), 32),
        Err(InterpError::BadWaveSize { .. })
    ));
    assert!(matches!(
        Wave::new(target("gfx1100"), 16),
        Err(InterpError::BadWaveSize { .. })
    ));
    assert!(Wave::new(target("gfx1100"), 64).is_ok());
}

/// Every mnemonic of the semantics table exists in LLVM's opcode table of some family.
#[test]
fn semantics_table_names_real_instructions() {
    let targets: Vec<Target> = ["gfx900", "gfx1030", "gfx1100", "gfx1200", "gfx1250"]
        .iter()
        .map(|n| target(n))
        .collect();
    let mut known = std::collections::HashSet::new();
    for t in targets {
        for (w, _) in testing::opcode_words(t) {
            let mut b = [0u8; 24];
            b[..4].copy_from_slice(&w.to_le_bytes());
            if let Ok(i) = decode(&b, t) {
                known.insert(i.mnemonic());
            }
        }
    }
    for (m, _) in SUPPORTED {
        assert!(
            known.contains(m),
            "{m} is not an LLVM 22 mnemonic of any family"
        );
        assert!(is_supported(m));
    }
    assert!(!is_supported("v_mov_b32"));
}
