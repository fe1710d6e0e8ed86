//! Marker snippets ("Marker Encoding" of the spec) built with `amdgpu_isa::build` for every
//! family, cross-checked with `llvm-mc-22 --disassemble`, executed, and their shaderdata checked.
mod common;

use amdgpu_isa::build::{self, Operand};
use common::{code_of, cross_check, target, CONFIGS};
use sqtt_interp::{run, shaderdata_of, Wave};

/// `s_mov_b32 m0, <v>; s_nop 0; s_ttracedata` as the spec's M0 path.
fn m0_marker(t: amdgpu_isa::Target, v: u32) -> Vec<amdgpu_isa::Instruction> {
    vec![
        build::s_mov_b32(t, Operand::M0, Operand::Literal(v)).expect("s_mov_b32"),
        build::s_nop(t, 0).expect("s_nop"),
        build::s_ttracedata(t).expect("s_ttracedata"),
    ]
}

#[test]
fn m0_marker_emits_its_value_on_every_family() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let code = code_of(&m0_marker(t, 0x1234));
        cross_check(name, ws, &code, &["s_mov_b32", "s_nop", "s_ttracedata"]);
        // M0 starts with garbage: the s_mov_b32 must be what sets the record.
        let got = shaderdata_of(t, ws, &code, |w| w.m0 = 0xdead_beef).expect("run");
        assert_eq!(got, vec![0x1234], "{name} wave{ws}");
    }
}

#[test]
fn m0_marker_values_with_inline_and_literal_encodings() {
    // 5 and 64 encode as inline integers, 0xffff_ffff as a literal (or -1 inline on the
    // Imm path), (id << 2) | 3 is a fused exit+enter, 0x1 the exit marker.
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let values = [
            5u32,
            64,
            65,
            0x1,
            (0x48d << 2) | 3,
            0xffff_ffff,
            0x8000_0000,
        ];
        let mut insts = Vec::new();
        for v in values {
            insts.extend(m0_marker(t, v));
        }
        insts.push(build::s_mov_b32(t, Operand::M0, Operand::Imm(-16)).expect("mov"));
        insts.push(build::s_ttracedata(t).expect("ttracedata"));
        let code = code_of(&insts);
        cross_check(name, ws, &code, &["s_mov_b32", "s_ttracedata"]);
        let mut w = Wave::new(t, ws).expect("wave");
        let r = run(&mut w, &code, 0x1000, 1000).expect("run");
        let mut want = values.to_vec();
        want.push(-16i32 as u32);
        assert_eq!(r.shaderdata, want, "{name} wave{ws}");
        assert_eq!(r.executed, insts.len());
        assert_eq!(r.exit_pc, 0x1000 + code.len() as u64);
    }
}

#[test]
fn ttracedata_imm_emits_its_immediate_on_gfx10_and_later() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        if !t.has_ttracedata_imm() {
            assert!(
                build::s_ttracedata_imm(t, 0x0a).is_err(),
                "{name} has no s_ttracedata_imm"
            );
            continue;
        }
        let insts = [
            build::s_ttracedata_imm(t, 0x0a).expect("imm"),
            build::s_ttracedata_imm(t, 0xff).expect("imm"),
            build::s_ttracedata_imm(t, 0x01).expect("imm"),
        ];
        let code = code_of(&insts);
        cross_check(name, ws, &code, &["s_ttracedata_imm", "s_ttracedata_imm"]);
        let got = shaderdata_of(t, ws, &code, |w| w.m0 = 0x5555).expect("run");
        assert_eq!(got, vec![0x0a, 0xff, 0x01], "{name} wave{ws}");
    }
}

#[test]
fn ttracedata_without_mov_sends_current_m0() {
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let code = code_of(&[build::s_ttracedata(t).expect("ttracedata")]);
        let got = shaderdata_of(t, ws, &code, |w| w.m0 = 0x0bad_f00d).expect("run");
        assert_eq!(got, vec![0x0bad_f00d], "{name}");
    }
}
