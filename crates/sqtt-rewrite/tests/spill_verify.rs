//! No SGPR is ever dead (issue 12 item 3): the `spill` fixtures (gfx942, gfx1100, gfx1201) keep
//! every SGPR the wave can address live across each memory instruction and the barrier. Every
//! feature set must instrument every site by saving SGPRs in lanes of the VGPR the descriptor
//! allocates but no instruction uses, and the verifier must accept the output. Byte-level
//! mutations of that output (restore dropped, restored from the wrong lane or the wrong VGPR,
//! saved in a VGPR the original code uses) must each be rejected with their finding.
mod common;
use common::text_insts;
use sqtt_rewrite::config::{self, FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::PathBuf;

const TARGETS: [&str; 3] = ["gfx942", "gfx1100", "gfx1201"];

fn fixture(t: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(format!("{t}__spill__O3.co"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn full() -> Options {
    Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        kernel_scopes: true,
        trace_addresses: config::parse_trace_addresses("memory,lds").expect("option"),
        ..Options::default()
    }
}

/// Every SGPR the original code touches, from its instructions.
fn touched(bytes: &[u8], t: &str) -> u128 {
    text_insts(bytes, t).iter().fold(0, |a, (_, i)| {
        a | i.reads().sgpr_bits() | i.writes().sgpr_bits()
    })
}

#[test]
fn every_site_is_instrumented_by_saving_live_sgprs() {
    for t in TARGETS {
        let input = fixture(t);
        let top = if t == "gfx942" { 101 } else { 105 };
        assert_eq!(
            touched(&input, t),
            (1u128 << (top + 1)) - 1,
            "{t}: the fixture uses every SGPR"
        );
        let mut sets = vec![
            ("trace", full()),
            (
                "memory",
                Options {
                    memory: config::parse_memory("2:5").expect("option"),
                    ..Options::default()
                },
            ),
        ];
        if t == "gfx1201" {
            sets.push((
                "clock",
                Options {
                    shader_clock_bits: 12,
                    ..full()
                },
            ));
            sets[2].1.trace_addresses = None;
        }
        for (what, opts) in sets {
            let out = rewrite(&input, &opts).expect("rewrite");
            assert_eq!(out.report.status, Status::Instrumented, "{t} {what}");
            assert!(
                out.report.skipped.is_empty(),
                "{t} {what}: {:?}",
                out.report.skipped
            );
            for c in &out.report.coverage {
                assert_eq!(c.instrumented, c.found, "{t} {what}: {}", c.feature);
            }
            let bytes = out.bytes.clone().expect("rewritten");
            let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
            assert!(v.is_clean(), "{t} {what}: {:?}", v.findings);
            // gfx942: k_spill; gfx10+: k_spill and k_grow.
            let kernels = if t == "gfx942" { 1 } else { 2 };
            if what == "trace" {
                assert_eq!(
                    out.report
                        .coverage
                        .iter()
                        .find(|c| c.feature == "address_trace")
                        .map(|c| c.found),
                    Some(3 * kernels),
                    "{t}"
                );
                let saves = text_insts(&bytes, t)
                    .iter()
                    .filter(|(_, i)| i.mnemonic() == "v_writelane_b32")
                    .count();
                // The load and the first store (every SGPR live) save two SGPRs each; at the last
                // store everything but s[2:3] is dead.
                assert_eq!(
                    saves,
                    4 * kernels as usize,
                    "{t}: two trace loops per kernel"
                );
            }
            // Occupancy never drops; k_grow's 8 VGPRs are all used, so its descriptor grows by
            // one granule for the lane saves; k_spill's unused tail suffices.
            for k in &out.report.kernels {
                assert_eq!(
                    k.occupancy_after, k.occupancy_before,
                    "{t} {what} {}",
                    k.name
                );
            }
            let co = hsaco::CodeObject::parse(&bytes).expect("parse output");
            let target = co.target.clone();
            for k in &co.kernels {
                let vgprs = k.descriptor.registers(&target).vgprs_allocated;
                // Only the trace loops need scratch SGPRs (the clock goes through M0).
                let want = if k.name == "k_grow" && what == "trace" {
                    16
                } else {
                    8
                };
                assert_eq!(vgprs, want, "{t} {what} {}", k.name);
            }
        }
    }
}

/// VOP3 word 1 (bytes 4..8): src0 bits 8:0, src1 bits 17:9. Word 0 bits 7:0: vdst.
fn word1(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at + 4..at + 8].try_into().expect("4 bytes"))
}

fn set_word1(b: &mut [u8], at: usize, w: u32) {
    b[at + 4..at + 8].copy_from_slice(&w.to_le_bytes());
}

fn rejected(t: &str, input: &[u8], bad: &[u8], want: &str) {
    let v = sqtt_verify::verify(input, bad).expect("verifier runs");
    assert!(
        v.findings.iter().any(|f| f.message.contains(want)),
        "{t}: expected a finding containing {want:?}, got {:?}",
        v.findings
    );
}

#[test]
fn broken_saves_and_restores_are_rejected() {
    for t in TARGETS {
        let input = fixture(t);
        let out = rewrite(&input, &full()).expect("rewrite");
        let good = out.bytes.expect("rewritten");
        let insts = text_insts(&good, t);
        let (w_at, w) = insts
            .iter()
            .find(|(_, i)| i.mnemonic() == "v_writelane_b32")
            .copied()
            .expect("a save");
        let vt = good[w_at];
        let sk = w.field("src0").expect("src0");
        // Its restore: the first `v_readlane_b32 sK, vT, ...` after it.
        let (r_at, _) = insts
            .iter()
            .find(|(a, i)| {
                *a > w_at
                    && i.mnemonic() == "v_readlane_b32"
                    && i.field("vdst") == Some(sk)
                    && i.field("src0") == Some(256 + u32::from(vt))
            })
            .copied()
            .expect("a restore");
        let lane = ((word1(&good, r_at) >> 9) & 0x1ff) - 128;

        // Restore from the next lane.
        let mut bad = good.clone();
        set_word1(&mut bad, r_at, word1(&good, r_at) + (1 << 9));
        rejected(t, &input, &bad, "is never restored from there");

        // Restore from another (also unused) VGPR.
        let mut bad = good.clone();
        set_word1(&mut bad, r_at, word1(&good, r_at) - 1);
        rejected(t, &input, &bad, "is never restored from there");

        // No restore: the readlane becomes two `s_nop 0`.
        let mut bad = good.clone();
        bad[r_at..r_at + 8].copy_from_slice(&[0, 0, 0x80, 0xbf, 0, 0, 0x80, 0xbf]);
        rejected(t, &input, &bad, "is never restored from there");
        rejected(t, &input, &bad, "not saved and restored around the run");

        // Saved in v1, which the original code uses (the address of every load and store).
        let mut bad = good.clone();
        bad[w_at] = 1;
        let r1 = (word1(&good, r_at) & !0x1ff) | (256 + 1);
        set_word1(&mut bad, r_at, r1);
        rejected(
            t,
            &input,
            &bad,
            "writes v1, which original code of this call graph uses",
        );
        assert!(lane < 32, "{t}: lane {lane} is an inline constant 0..=31");
    }
}

/// gfx11+ `inst_pref_size` (compute_pgm_rsrc3, 128-byte lines) follows a kernel's new code size
/// also when the same kernel's VGPR granule grows for lane saves: both descriptor updates
/// survive (the register update once started again from the input's descriptor and dropped the
/// prefetch). The fixtures are assembled with no prefetch, so the input's `k_grow` descriptor is
/// set here to prefetch its whole code.
#[test]
fn prefetch_and_vgpr_growth_both_reach_the_descriptor() {
    for t in ["gfx1100", "gfx1201"] {
        let mut input = fixture(t);
        let co = hsaco::CodeObject::parse(&input).expect("parse fixture");
        let gen = co.target.generation();
        let k = co
            .kernels
            .iter()
            .find(|k| k.name == "k_grow")
            .expect("k_grow");
        let size = k.code_size.expect("k_grow has a size");
        let lines = size.div_ceil(128) as u32;
        let mut kd = k.descriptor.clone();
        kd.set_inst_pref_size(gen, lines);
        let at = k.kd_offset as usize;
        input[at..at + 64].copy_from_slice(&kd.encode());

        let out = rewrite(&input, &full()).expect("rewrite");
        assert_eq!(out.report.status, Status::Instrumented, "{t}");
        let bytes = out.bytes.expect("rewritten");
        let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
        assert!(v.is_clean(), "{t}: {:?}", v.findings);
        let new = hsaco::CodeObject::parse(&bytes).expect("parse output");
        let nk = new
            .kernels
            .iter()
            .find(|k| k.name == "k_grow")
            .expect("k_grow in the output");
        let new_size = nk.code_size.expect("output k_grow has a size");
        assert!(new_size > size, "{t}: inserted code grows k_grow");
        assert_eq!(
            nk.descriptor.registers(&new.target).vgprs_allocated,
            16,
            "{t}: the VGPR granule grew for the lane saves"
        );
        assert_eq!(
            nk.descriptor.inst_pref_size(gen),
            Some(new_size.div_ceil(128) as u32),
            "{t}: prefetch covers the new code ({new_size} bytes)"
        );
    }
}
