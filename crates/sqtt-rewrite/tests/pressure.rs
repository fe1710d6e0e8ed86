//! Real vendor kernels use every SGPR (issue 12): the `pressure` fixtures write s8..s101 (gfx9) or
//! s8..s105 (gfx10+) and read each later, so no SGPR is unused by the object. Scratch registers
//! must come from liveness: s0..s3 are dead after the kernarg load. The same objects carry a
//! kernel without code at the end of `.text` and a kernel sharing another kernel's entry, as
//! rocPRIM's trampoline kernels in XLA do.
use sqtt_rewrite::config::{self, FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::PathBuf;

fn fixture(t: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(format!("{t}__pressure__O3.co"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Highest SGPR any instruction of the object's `.text` reads or writes.
fn top_sgpr(bytes: &[u8], t: &str) -> u16 {
    let co = hsaco::CodeObject::parse(bytes).expect("parse");
    let text = co.text().expect(".text");
    let target = amdgpu_isa::Target::from_name(t).expect("target");
    amdgpu_isa::decode_all(co.section_data(text), target)
        .expect("decode")
        .iter()
        .filter_map(|i| i.reads().union(&i.writes()).max_sgpr())
        .max()
        .expect("SGPRs")
}

fn covered(out: &sqtt_rewrite::rewrite::Outcome, feature: &str) -> (u64, u64) {
    out.report
        .coverage
        .iter()
        .find(|c| c.feature == feature)
        .map_or((0, 0), |c| (c.instrumented, c.found))
}

#[test]
fn every_sgpr_used_scratch_comes_from_liveness() {
    for (t, top) in [("gfx942", 101), ("gfx1100", 105), ("gfx1201", 105)] {
        let input = fixture(t);
        assert_eq!(top_sgpr(&input, t), top, "{t}: the fixture uses every SGPR");
        let full = Options {
            functions: FunctionThreshold::Count(1),
            barriers: true,
            trace_addresses: config::parse_trace_addresses("memory,lds").expect("option"),
            scope: Some(Default::default()),
            ..Options::default()
        };
        let mut sets = vec![("trace+scope", full)];
        sets.push((
            "memory",
            Options {
                memory: config::parse_memory("2:5").expect("option"),
                ..Options::default()
            },
        ));
        if t == "gfx1201" {
            sets.push((
                "clock",
                Options {
                    barriers: true,
                    shader_clock_bits: 12,
                    ..Options::default()
                },
            ));
        }
        for (what, opts) in sets {
            let out = rewrite(&input, &opts).expect("rewrite");
            assert_eq!(out.report.status, Status::Instrumented, "{t} {what}");
            // Only SGPRs dead at their insertion points: s0..s3 (kernarg pointer and workgroup
            // id, never read after the first load).
            assert!(
                out.report.inserted_sgprs.iter().all(|&r| r <= 3),
                "{t} {what}: {:?}",
                out.report.inserted_sgprs
            );
            let bytes = out.bytes.clone().expect("rewritten");
            let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
            assert!(v.is_clean(), "{t} {what}: {:?}", v.findings);
            if what == "trace+scope" {
                // The load (s8..s{top} all live, s0..s3 dead) and the store after the call (the
                // callee issues no SMEM load, so nothing is in flight) are both traced.
                assert_eq!(covered(&out, "address_trace"), (2, 2), "{t}");
                assert_eq!(covered(&out, "barriers"), (1, 1), "{t}");
            }
            assert!(
                out.report.skipped.is_empty(),
                "{t} {what}: {:?}",
                out.report.skipped
            );
            // Kernels without code stay at the end of `.text`; folded kernels share their entry.
            let co = hsaco::CodeObject::parse(&bytes).expect("parse output");
            let text = co.text().expect(".text");
            let entry = |n: &str| co.kernels.iter().find(|k| k.name == n).expect(n).entry;
            assert_eq!(entry("k_codeless"), text.addr + text.size, "{t} {what}");
            assert_eq!(entry("k_alias"), entry("k_pressure"), "{t} {what}");
        }
    }
}

/// `relax.S`: a loop whose back edge (`s_cbranch_scc1` just before `s_endpgm`) is in SOPP range
/// in the input and out of range once every load carries an address-trace loop. The relaxed
/// branch jumps forward to its long-branch island, which the fall-through path skips with an
/// `s_branch`; the verifier must accept the direction change and the island in front of the
/// store's trace loop (XLA's rocPRIM trampoline kernels end this way; they were rejected).
#[test]
fn back_edge_relaxed_by_instrumentation_verifies() {
    for t in ["gfx942", "gfx1100"] {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/objects")
            .join(format!("{t}__relax__O3.co"));
        let input = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let opts = Options {
            trace_addresses: config::parse_trace_addresses("memory").expect("option"),
            ..Options::default()
        };
        let out = rewrite(&input, &opts).expect("rewrite");
        assert_eq!(out.report.status, Status::Instrumented, "{t}");
        assert_eq!(covered(&out, "address_trace"), (2501, 2501), "{t}");
        let bytes = out.bytes.clone().expect("rewritten");
        let getpcs = |b: &[u8]| {
            let co = hsaco::CodeObject::parse(b).expect("parse");
            let text = co.text().expect(".text");
            let target = amdgpu_isa::Target::from_name(t).expect("target");
            amdgpu_isa::decode_all(co.section_data(text), target)
                .expect("decode")
                .iter()
                .filter(|i| i.mnemonic() == "s_getpc_b64")
                .count()
        };
        assert_eq!(getpcs(&input), 0, "{t}: no long branch in the input");
        assert_eq!(getpcs(&bytes), 1, "{t}: the back edge is relaxed");
        let v = sqtt_verify::verify(&input, &bytes).expect("verifier runs");
        assert!(v.is_clean(), "{t}: {:?}", v.findings);
    }
}
