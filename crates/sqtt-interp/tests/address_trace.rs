//! Reference address-trace blocks ("Address Tracing" / "Framing protocol" and "Buffer
//! intrinsics (component-based protocol)" of the spec) written with `amdgpu_isa::build` for every
//! family, cross-checked with `llvm-mc-22 --disassemble`, executed with random VGPRs and EXEC: the
//! stream must be header, exec_lo, exec_hi (0 on wave32), then every lane 0..wave_size-1
//! regardless of EXEC.
mod common;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};
use common::{code_of, cross_check, dwords, target, Rng, CONFIGS};
use sqtt_interp::{run, Wave};

const S_LANE: u8 = 10;
const S_TMP: u8 = 11;

fn send(t: Target, src: Operand) -> Vec<Instruction> {
    vec![
        build::s_mov_b32(t, Operand::M0, src).expect("s_mov_b32 m0"),
        build::s_nop(t, 0).expect("s_nop"),
        build::s_ttracedata(t).expect("s_ttracedata"),
    ]
}

/// One readlane loop over all lanes emitting, per lane, one record per VGPR of `vgprs`.
fn lane_loop(t: Target, wave_size: u32, vgprs: &[u16]) -> Vec<Instruction> {
    let mut out = vec![build::s_mov_b32(t, Operand::Sgpr(S_LANE), Operand::Imm(0)).expect("mov")];
    let mut body = Vec::new();
    for &v in vgprs {
        if t.family() == Family::Gfx9 {
            // SALU write of the lane-select SGPR -> v_readlane needs 4 wait states (gfx9).
            body.push(build::s_nop(t, 4).expect("nop"));
        }
        body.push(
            build::v_readlane_b32(t, Operand::Sgpr(S_TMP), v, Operand::Sgpr(S_LANE))
                .expect("v_readlane_b32"),
        );
        match t.family() {
            Family::Gfx9 => {}
            Family::Gfx10 | Family::Gfx11 => {
                body.push(build::s_waitcnt_depctr(t, 0xf19f).expect("depctr"))
            }
            Family::Gfx12 | Family::Gfx1250 => {
                body.push(build::s_wait_alu(t, 0xf19f).expect("wait_alu"))
            }
        }
        body.extend(send(t, Operand::Sgpr(S_TMP)));
    }
    body.push(
        build::s_add_u32(
            t,
            Operand::Sgpr(S_LANE),
            Operand::Sgpr(S_LANE),
            Operand::Imm(1),
        )
        .expect("s_add"),
    );
    body.push(
        build::s_cmp(
            t,
            "s_cmp_lg_u32",
            Operand::Sgpr(S_LANE),
            Operand::Imm(wave_size as i32),
        )
        .expect("s_cmp"),
    );
    let back = -(dwords(&body) + 1);
    body.push(build::s_cbranch_scc1(t, back).expect("s_cbranch_scc1"));
    out.extend(body);
    out
}

/// header + exec_lo + exec_hi + `scalars` (SGPRs sent as-is) + one loop per VGPR group.
fn block(t: Target, ws: u32, header: u32, scalars: &[u8], loops: &[&[u16]]) -> Vec<Instruction> {
    let mut v = send(t, Operand::Literal(header));
    v.extend(send(t, Operand::ExecLo));
    v.extend(send(t, Operand::ExecHi));
    for &s in scalars {
        v.extend(send(t, Operand::Sgpr(s)));
    }
    for l in loops {
        v.extend(lane_loop(t, ws, l));
    }
    v
}

fn random_wave(t: Target, ws: u32, rng: &mut Rng) -> Wave {
    let mut w = Wave::new(t, ws).expect("wave");
    for r in w.vgpr.iter_mut() {
        for l in r.iter_mut() {
            *l = rng.next_u32();
        }
    }
    for s in w.sgpr.iter_mut() {
        *s = rng.next_u32();
    }
    w.exec = rng.next_u64();
    w.m0 = rng.next_u32();
    w
}

fn exec_words(w: &Wave) -> [u32; 2] {
    let e = w.exec & w.lane_mask();
    [e as u32, (e >> 32) as u32]
}

#[test]
fn memory_block_emits_header_exec_and_all_lanes_lo_hi() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let header = 7 << 2; // point marker, id 7
        let insts = block(t, ws, header, &[], &[&[5, 6]]);
        let code = code_of(&insts);
        cross_check(
            name,
            ws,
            &code,
            &[
                "s_ttracedata",
                "v_readlane_b32",
                "s_ttracedata",
                "v_readlane_b32",
                "s_cmp_lg_u32",
            ],
        );
        for round in 0..4 {
            let mut w = random_wave(t, ws, &mut rng);
            if round == 0 {
                w.exec = 0; // all lanes still emitted
            }
            let before = w.clone();
            let r = run(&mut w, &code, 0x4000, 100_000).expect("run");
            let mut want = vec![header];
            want.extend(exec_words(&before));
            for lane in 0..ws as usize {
                want.push(before.vgpr[5][lane]);
                want.push(before.vgpr[6][lane]);
            }
            assert_eq!(r.shaderdata.len(), 3 + 2 * ws as usize, "{name} wave{ws}");
            assert_eq!(r.shaderdata, want, "{name} wave{ws} round {round}");
            if ws == 32 {
                assert_eq!(r.shaderdata[2], 0, "exec_hi is 0 on wave32");
            }
            assert_eq!(r.exit_pc, 0x4000 + code.len() as u64);
            // 9 header/exec instructions + lane-counter init + wave_size loop iterations.
            let body = insts.len() - 10;
            assert_eq!(r.executed, 10 + ws as usize * body, "{name} wave{ws}");
            assert_eq!(w.sgpr[S_LANE as usize], ws);
        }
    }
}

#[test]
fn lds_block_emits_one_token_per_lane() {
    let mut rng = Rng(42);
    for &(name, ws) in CONFIGS {
        let t = target(name);
        let code = code_of(&block(t, ws, 5 << 2, &[], &[&[3]]));
        cross_check(name, ws, &code, &["v_readlane_b32", "s_cbranch_scc1"]);
        let mut w = random_wave(t, ws, &mut rng);
        let before = w.clone();
        let r = run(&mut w, &code, 0, 100_000).expect("run");
        let mut want = vec![5 << 2];
        want.extend(exec_words(&before));
        want.extend((0..ws as usize).map(|l| before.vgpr[3][l]));
        assert_eq!(r.shaderdata, want, "{name} wave{ws}");
    }
}

#[test]
fn buffer_blocks_follow_the_component_protocol() {
    let mut rng = Rng(7);
    for &(name, ws) in CONFIGS {
        let t = target(name);
        // rsrc in s[20:23] (words 0 and 1 sent), soffset in s30, voffset v8, vindex v9.
        let raw = code_of(&block(t, ws, 9 << 2, &[20, 21, 30], &[&[8]]));
        let strukt = code_of(&block(t, ws, 10 << 2, &[20, 21, 30], &[&[8], &[9]]));
        cross_check(
            name,
            ws,
            &strukt,
            &["s_ttracedata", "v_readlane_b32", "v_readlane_b32"],
        );
        for (code, header, vindex) in [(raw, 9 << 2, false), (strukt, 10 << 2, true)] {
            let mut w = random_wave(t, ws, &mut rng);
            let b = w.clone();
            let r = run(&mut w, &code, 0, 100_000).expect("run");
            let mut want = vec![header];
            want.extend(exec_words(&b));
            want.extend([b.sgpr[20], b.sgpr[21], b.sgpr[30]]);
            want.extend((0..ws as usize).map(|l| b.vgpr[8][l]));
            if vindex {
                want.extend((0..ws as usize).map(|l| b.vgpr[9][l]));
            }
            // Spec: 35 (raw) / 67 (struct) data tokens on wave32, plus header + exec pair.
            let per_lane = if vindex { 2 } else { 1 };
            assert_eq!(r.shaderdata.len(), 3 + 3 + per_lane * ws as usize);
            assert_eq!(r.shaderdata, want, "{name} wave{ws} struct={vindex}");
        }
    }
}
