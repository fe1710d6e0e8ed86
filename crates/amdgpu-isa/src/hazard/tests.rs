//! Encodings from `llvm-mc-22 -show-encoding`; expected waits from `llc-22 -run-pass=
//! post-RA-hazard-rec` / `amdgpu-wait-sgpr-hazards` on the same sequences (docs/hazards.md).
use super::*;
use crate::build::{self, Operand};
use crate::decode;
use crate::Instruction;

const READFIRSTLANE_S5_V1: [u8; 4] = [0x01, 0x05, 0x0a, 0x7e];
const EXP_V0_V1_GFX11: [u8; 4] = [0x01, 0x4b, 0x00, 0x7e];

fn ids(t: Target, seq: &[Instruction]) -> Vec<&'static str> {
    let (last, before) = seq.split_last().expect("non-empty");
    let mut s = Scanner::new(t);
    for i in before {
        s.push(i);
    }
    s.check(last).iter().map(|n| n.rule.id).collect()
}

fn t(n: &str) -> Target {
    Target::from_name(n).expect("known target")
}

#[test]
fn m0_write_then_ttracedata_needs_one_wait_state_on_gfx9_only() {
    for (name, want) in [
        ("gfx900", vec!["m0-msg"]),
        ("gfx942", vec!["m0-msg"]),
        ("gfx1100", vec![]),
    ] {
        let t = t(name);
        let mov = build::s_mov_b32(t, Operand::M0, Operand::Imm(5)).unwrap();
        let tt = build::s_ttracedata(t).unwrap();
        assert_eq!(ids(t, &[mov, tt]), want, "{name}");
        let nop = build::s_nop(t, 0).unwrap();
        assert!(ids(t, &[mov, nop, tt]).is_empty(), "{name}");
    }
}

#[test]
fn valu_sgpr_write_then_lane_select_needs_four_wait_states_on_gfx9() {
    let t = t("gfx900");
    let rfl = decode(&READFIRSTLANE_S5_V1, t).unwrap();
    let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
    assert_eq!(ids(t, &[rfl, rl]), vec!["valu-sgpr-lanesel"]);
    let nop2 = build::s_nop(t, 2).unwrap();
    assert_eq!(ids(t, &[rfl, nop2, rl]), vec!["valu-sgpr-lanesel"]);
    let nop3 = build::s_nop(t, 3).unwrap();
    assert!(ids(t, &[rfl, nop3, rl]).is_empty());
    // Lane select s7 is not the written s5.
    let rl7 = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(7)).unwrap();
    assert!(ids(t, &[rfl, rl7]).is_empty());
}

#[test]
fn gfx12_sgpr_waits_follow_the_commit_model() {
    let t = t("gfx1200");
    let mov = build::s_mov_b32(t, Operand::Sgpr(5), Operand::Imm(1)).unwrap();
    let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
    let m0 = build::s_mov_b32(t, Operand::M0, Operand::Sgpr(5)).unwrap();
    assert_eq!(ids(t, &[mov, rl]), vec!["salu-sgpr-read"]);
    assert_eq!(ids(t, &[mov, m0]), vec!["salu-sgpr-read"]);
    let w = build::s_wait_alu(t, DepField::SaSdst.wait_imm()).unwrap();
    assert!(ids(t, &[mov, w, rl]).is_empty());
    let rfl = decode(&READFIRSTLANE_S5_V1, t).unwrap();
    assert_eq!(ids(t, &[rfl, rl]), vec!["valu-sgpr-read"]);
    // A VALU-written SGPR read by SALU needs nothing, and that read commits VALU writes.
    assert!(ids(t, &[rfl, m0]).is_empty());
    assert!(ids(t, &[rfl, m0, rl]).is_empty());
    assert_eq!(DepField::SaSdst.wait_imm(), 0xfffe);
    assert_eq!(DepField::VaSdst.wait_imm(), 0xf1ff);
    assert!(DepField::VaSdst.is_zero_in(0xf19f));
    assert!(DepField::VaVdst.is_zero_in(0x0f9f));
}

#[test]
fn transcendental_result_read_by_readlane() {
    for (name, want) in [("gfx1100", 6usize), ("gfx1250", 1)] {
        let t = t(name);
        let exp = decode(&EXP_V0_V1_GFX11, t).unwrap();
        let rl = build::v_readlane_b32(t, Operand::Sgpr(6), 0, Operand::Sgpr(5)).unwrap();
        let salu = build::s_mov_b32(t, Operand::Sgpr(20), Operand::Imm(1)).unwrap();
        let valu = build::v_readlane_b32(t, Operand::Sgpr(7), 9, Operand::Sgpr(5)).unwrap();
        let mut seq = vec![exp];
        seq.extend(std::iter::repeat_n(salu, 9));
        seq.push(rl);
        assert_eq!(
            ids(t, &seq),
            vec!["trans-use"],
            "{name}: SALUs do not count"
        );
        let mut seq = vec![exp];
        seq.extend(std::iter::repeat_n(valu, want - 1));
        seq.push(rl);
        assert_eq!(ids(t, &seq), vec!["trans-use"], "{name}");
        seq.insert(1, valu);
        assert!(ids(t, &seq).is_empty(), "{name}");
    }
}

/// Instructions that hit the rules of `name` (= `t`'s name) when issued in random order.
fn sample_pool(t: Target, name: &str) -> Vec<Instruction> {
    let s = |n| Operand::Sgpr(n);
    let mut pool = vec![
        build::s_mov_b32(t, s(5), Operand::Imm(1)).unwrap(),
        build::s_mov_b32(t, s(7), s(5)).unwrap(),
        build::s_mov_b32(t, Operand::M0, s(5)).unwrap(),
        build::s_mov_b32(t, s(6), Operand::VccLo).unwrap(),
        build::v_readlane_b32(t, s(6), 0, s(5)).unwrap(),
        build::v_readlane_b32(t, s(5), 1, s(7)).unwrap(),
        build::v_writelane_b32(t, 2, s(6), s(5)).unwrap(),
        build::s_add_u32(t, s(8), s(6), Operand::Imm(3)).unwrap(),
        build::s_nop(t, 1).unwrap(),
        build::s_ttracedata(t).unwrap(),
        build::s_branch(t, 0).unwrap(),
        build::s_cbranch_vccz(t, 0).unwrap(),
        build::s_setpc_b64(t, 8).unwrap(),
        build::s_getreg_b32(t, s(9), 1, 0, 4).unwrap(),
    ];
    if t.family() == Family::Gfx12 {
        pool.push(build::s_wait_alu(t, DepField::SaSdst.wait_imm()).unwrap());
        pool.push(build::s_wait_alu(t, DepField::VaSdst.wait_imm()).unwrap());
    }
    if matches!(t.family(), Family::Gfx10 | Family::Gfx11) {
        pool.push(build::s_waitcnt_depctr(t, DepField::VmVsrc.wait_imm()).unwrap());
        pool.push(build::s_waitcnt_vscnt(t, 0).unwrap());
    }
    if name == "gfx1100" {
        // A transcendental VALU writing v0, which `v_readlane_b32 .., v0, ..` reads.
        pool.push(decode(&EXP_V0_V1_GFX11, t).unwrap());
    }
    if name == "gfx1010" {
        // llvm-mc-22 -mcpu=gfx1010: `global_load_dword v1, v2, s[4:5]`,
        // `ds_read_b32 v1, v2`; and a SALU write of s4.
        pool.push(decode(&[0x00, 0x80, 0x30, 0xdc, 0x02, 0x00, 0x04, 0x01], t).unwrap());
        pool.push(decode(&[0x00, 0x00, 0xd8, 0xd8, 0x02, 0x00, 0x00, 0x01], t).unwrap());
        pool.push(build::s_mov_b32(t, s(4), Operand::Imm(2)).unwrap());
    }
    pool
}

/// The next value of a xorshift64 sequence in `x`.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// `push_if_clear` answers as `check` and, when that is empty, pushes as `push` does (the
/// snippet emitter's one-decode path): two scanners over the same pseudo-random sequences
/// stay in step.
#[test]
fn push_if_clear_is_check_then_push_when_clear() {
    for name in ["gfx900", "gfx1010", "gfx1100", "gfx1200"] {
        let t = t(name);
        let pool = sample_pool(t, name);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let (mut clear, mut violated) = (0, 0);
        for _ in 0..20 {
            let (mut a, mut b) = (Scanner::new(t), Scanner::new(t));
            for k in 0..300 {
                let i = pool[(xorshift(&mut x) % pool.len() as u64) as usize];
                let want = b.check(&i);
                b.push(&i);
                let got = a.push_if_clear(&i);
                assert_eq!(got, want, "{name} position {k}");
                if got.is_empty() {
                    clear += 1;
                } else {
                    // Not pushed yet: issue it anyway, as `b` did.
                    violated += 1;
                    a.push(&i);
                }
                assert_eq!(a.position(), b.position());
            }
        }
        assert!(
            clear > 0 && violated > 0,
            "{name}: {clear} clear, {violated} violated"
        );
    }
}

/// `check_push_state` (no register decode, no history) follows the stateful rules exactly as
/// `check_push`, and after [`LOOKBACK`] full pushes every rule is checked as in a scan that
/// never skipped: the premise of the verifier's scan limited to code near inserted
/// instructions. Pseudo-random sequences over SALU/VALU SGPR and VCC writers and readers,
/// SGPR waits, `s_setpc`, branches and M0 readers.
#[test]
fn state_only_pushes_follow_the_same_state() {
    for name in ["gfx900", "gfx1010", "gfx1100", "gfx1200"] {
        let t = t(name);
        let pool = sample_pool(t, name);
        let stateful = |n: &Need| matches!(n.rule.fix, Fix::DepCtr(_) | Fix::VsCntZero);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut hits = 0;
        for _ in 0..40 {
            let (mut full, mut part) = (Scanner::new(t), Scanner::new(t));
            // Positions since the last state-only push (`None`: none yet).
            let mut since: Option<usize> = None;
            for k in 0..400 {
                let i = pool[(xorshift(&mut x) % pool.len() as u64) as usize];
                let want = full.check_push(&i);
                hits += want.len();
                if (k / 90) % 2 == 1 {
                    let got = part.check_push_state(&i, SgprUse::of(&i.reads(), &i.writes()));
                    let want: Vec<Need> = want.into_iter().filter(stateful).collect();
                    assert_eq!(got, want, "{name} position {k}: state-only push");
                    since = Some(0);
                    continue;
                }
                let got = part.check_push(&i);
                if since.is_none_or(|n| n >= LOOKBACK) {
                    assert_eq!(got, want, "{name} position {k}: full history again");
                } else {
                    let (g, w): (Vec<Need>, Vec<Need>) = (
                        got.into_iter().filter(stateful).collect(),
                        want.into_iter().filter(stateful).collect(),
                    );
                    assert_eq!(g, w, "{name} position {k}: stateful rules");
                }
                since = since.map(|n| n + 1);
            }
            assert_eq!(full.position(), part.position());
        }
        assert!(hits > 0, "{name}: the sequences hit no rule");
    }
}

#[test]
fn setreg_then_getreg_of_the_same_register_on_gfx9() {
    let t = t("gfx900");
    let set = decode(&[0x01, 0x18, 0x01, 0xb9], t).unwrap();
    let same = build::s_getreg_b32(t, Operand::Sgpr(2), 1, 0, 4).unwrap();
    let other = build::s_getreg_b32(t, Operand::Sgpr(2), 4, 0, 4).unwrap();
    assert_eq!(ids(t, &[set, same]), vec!["setreg"]);
    assert!(ids(t, &[set, other]).is_empty());
}

/// `may_consume` is an exact filter: an instruction it says cannot consume an earlier
/// producer gets no need from `check` after any history (pseudo-random sequences of the rule
/// hitting pool), and it lets some instructions through on every target (the rewriter skips
/// the entry-wait scans of blocks made only of the others).
#[test]
fn may_consume_false_means_no_need_after_any_history() {
    for name in ["gfx900", "gfx1010", "gfx1100", "gfx1200"] {
        let t = t(name);
        let mut pool = sample_pool(t, name);
        if name == "gfx900" {
            // `s_setreg_b32 hwreg(1, 0, 4), s1` (llvm-mc-22), before the pool's `s_getreg_b32`.
            pool.push(decode(&[0x01, 0x18, 0x01, 0xb9], t).unwrap());
        }
        let mut sc = Scanner::new(t);
        let consumers: Vec<bool> = pool.iter().map(|i| sc.may_consume(i)).collect();
        assert!(
            consumers.iter().any(|c| !c) && consumers.iter().any(|c| *c),
            "{name}: {consumers:?}"
        );
        let mut x = 0x51af_d7ed_558c_cd1fu64;
        let mut needs = 0;
        for k in 0..6000 {
            for (i, c) in pool.iter().zip(&consumers) {
                let n = sc.check(i);
                needs += n.len();
                assert!(
                    *c || n.is_empty(),
                    "{name} position {k}: {} {n:?}",
                    i.mnemonic()
                );
            }
            sc.push(&pool[(xorshift(&mut x) % pool.len() as u64) as usize]);
        }
        assert!(needs > 0, "{name}: the sequence hit no rule");
    }
}
