//! Execution tests of `sqtt_rewrite::snippets::spill_wrap` (issue 12 item 3): live SGPRs saved
//! in lanes of a VGPR around a snippet that overwrites them. Every wrapped snippet runs on the
//! `sqtt-interp` model wave from random register states (random EXEC, EXEC = 0 included) on
//! every target family of the snippet tests, wave32 and wave64; afterwards every SGPR, every
//! VGPR other than the saved lanes, EXEC and VCC equal their values before, and the snippet's
//! own output (the address-trace stream, computed here lane by lane) is unchanged by the
//! wrapping. The waits after the restores are checked with the shared hazard scanner against
//! the original instructions that may follow (a lane select, VALU and SALU reads of a restored
//! SGPR).

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{hazard, Instruction, Target};
use sqtt_interp::{run, Wave};
use sqtt_rewrite::snippets::{address_trace, spill_wrap, AddrSource, MAX_SAVED};

/// (processor, wave sizes): one per family and hazard scope of the snippet tests.
const TARGETS: &[(&str, &[u32])] = &[
    ("gfx900", &[64]),
    ("gfx942", &[64]),
    ("gfx1010", &[32, 64]),
    ("gfx1030", &[32, 64]),
    ("gfx1100", &[32, 64]),
    ("gfx1200", &[32, 64]),
    ("gfx1201", &[32]),
    ("gfx1250", &[32]),
];

/// The spill VGPR of the tests (v255: the highest `v_writelane_b32` can address).
const SPILL: u16 = 255;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
}

fn random_wave(t: Target, ws: u32, rng: &mut Rng, trial: usize) -> Wave {
    let mut w = Wave::new(t, ws).expect("wave");
    for s in w.sgpr.iter_mut() {
        *s = rng.u32();
    }
    for v in w.vgpr.iter_mut() {
        for l in v.iter_mut() {
            *l = rng.u32();
        }
    }
    // Trial 0: no lane active (lane moves ignore EXEC); trial 1: all lanes.
    w.exec = match trial {
        0 => 0,
        1 => w.lane_mask(),
        _ => rng.next() & w.lane_mask(),
    };
    w.vcc = rng.next();
    w.scc = rng.next() & 1 == 1;
    w.m0 = rng.u32();
    w
}

fn bytes(code: &[Instruction]) -> Vec<u8> {
    code.iter().flat_map(|i| i.bytes().to_vec()).collect()
}

/// Runs `code` from `w`; returns the shaderdata words. Checks that it falls out of its end.
fn exec(code: &[Instruction], w: &mut Wave) -> Vec<u32> {
    let b = bytes(code);
    let r = run(w, &b, 0x2000, 100_000).expect("runs");
    assert_eq!(r.exit_pc, 0x2000 + b.len() as u64, "falls out of the end");
    r.shaderdata
}

/// Everything the original code can observe, except the saved lanes of the spill VGPR, M0 and
/// SCC (the body's own declared clobbers, kept by other means in the rewriter).
fn assert_restored(name: &str, before: &Wave, after: &Wave, saved: usize) {
    assert_eq!(after.sgpr, before.sgpr, "{name}: SGPRs restored");
    assert_eq!(after.exec, before.exec, "{name}: EXEC");
    assert_eq!(after.vcc, before.vcc, "{name}: VCC");
    for (v, (a, b)) in after.vgpr.iter().zip(&before.vgpr).enumerate() {
        for lane in 0..after.wave_size as usize {
            if v == usize::from(SPILL) && lane < saved {
                continue;
            }
            assert_eq!(a[lane], b[lane], "{name}: v{v} lane {lane} changed");
        }
    }
}

/// The address-trace block of `src` with three live scratch SGPRs, saved around it: the SGPRs
/// come back, the stream equals the unwrapped block's on the same state.
#[test]
fn saved_sgprs_come_back_around_an_address_trace() {
    let mut rng = Rng(0x5a7e_0012_0003_0001);
    let mut runs = 0;
    for (name, waves) in TARGETS {
        let t = Target::from_name(name).expect("target");
        for &ws in *waves {
            let src = AddrSource::Flat64 {
                vaddr: 4,
                offset: 16,
            };
            let tmp = [10u8, 11, 101];
            let saved: u128 = tmp.iter().fold(0, |a, &r| a | 1u128 << r);
            let body = address_trace(t, ws, 0x40, &src, &tmp)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .code;
            let wrapped =
                spill_wrap(t, SPILL, saved, body.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let writes = wrapped
                .iter()
                .filter(|i| i.mnemonic() == "v_writelane_b32")
                .count();
            let reads_back = wrapped
                .iter()
                .skip(wrapped.len() - 8)
                .filter(|i| i.mnemonic() == "v_readlane_b32")
                .count();
            assert_eq!(
                (writes, reads_back),
                (3, 3),
                "{name}: three saves, three restores"
            );
            for trial in 0..6 {
                let mut w = random_wave(t, ws, &mut rng, trial);
                let before = w.clone();
                let mut plain = w.clone();
                let got = exec(&wrapped, &mut w);
                let want = exec(&body, &mut plain);
                let what = format!("{name} w{ws} trial {trial}");
                assert_eq!(got, want, "{what}: stream");
                assert_restored(&what, &before, &w, tmp.len());
                runs += 1;
            }
        }
    }
    assert!(runs >= 6 * 12);
}

/// Every SGPR a body may clobber, up to the lane limit, saved at once: all come back.
#[test]
fn thirty_two_sgprs_in_one_vgpr() {
    let mut rng = Rng(0x5a7e_0012_0003_0002);
    for (name, waves) in TARGETS {
        let t = Target::from_name(name).expect("target");
        for &ws in *waves {
            let regs: Vec<u8> = (70..70 + MAX_SAVED as u8).collect();
            let saved = regs.iter().fold(0u128, |a, &r| a | 1u128 << r);
            let body: Vec<Instruction> = regs
                .iter()
                .map(|&r| {
                    build::s_mov_b32(t, Operand::Sgpr(r), Operand::Imm(-1)).expect("s_mov_b32")
                })
                .collect();
            let wrapped = spill_wrap(t, SPILL, saved, body).expect("wrap");
            for trial in 0..3 {
                let mut w = random_wave(t, ws, &mut rng, trial);
                let before = w.clone();
                exec(&wrapped, &mut w);
                assert_restored(&format!("{name} w{ws}"), &before, &w, regs.len());
                assert_eq!(w.m0, before.m0, "{name}: M0");
                assert_eq!(w.scc, before.scc, "{name}: SCC");
            }
            let too_many = saved | 1u128 << 5;
            assert!(
                spill_wrap(t, SPILL, too_many, Vec::new()).is_err(),
                "{name}"
            );
        }
    }
}

/// After the restores, an original instruction that reads a restored SGPR right away (as a lane
/// select, a VALU operand or a SALU operand) violates no hazard rule of the shared table.
#[test]
fn restores_leave_no_hazard_for_the_next_original_instruction() {
    for (name, _) in TARGETS {
        let t = Target::from_name(name).expect("target");
        let body = vec![build::s_mov_b32(t, Operand::Sgpr(20), Operand::Imm(7)).expect("mov")];
        let wrapped = spill_wrap(t, SPILL, 1u128 << 20, body).expect("wrap");
        let probes = [
            build::v_readlane_b32(t, Operand::Sgpr(0), 1, Operand::Sgpr(20)).expect("lane select"),
            build::v_writelane_b32(t, 1, Operand::Sgpr(20), Operand::Imm(0)).expect("VALU read"),
            build::s_mov_b32(t, Operand::Sgpr(0), Operand::Sgpr(20)).expect("SALU read"),
        ];
        for p in &probes {
            let mut sc = hazard::Scanner::new(t);
            for i in &wrapped {
                assert!(sc.check(i).is_empty(), "{name}: {} inside", i.mnemonic());
                sc.push(i);
            }
            let need = sc.check(p);
            assert!(need.is_empty(), "{name}: {} after: {need:?}", p.mnemonic());
        }
    }
}
