//! Execution and assembly tests of `sqtt_rewrite::snippets`.
//!
//! Every snippet runs on the `sqtt-interp` model wave from random register state and random
//! EXEC; the emitted shaderdata stream must equal the spec's framing ("Address Tracing" /
//! "Framing protocol", "Scope filtering", "GFX12 Shader Clock Packing") word by word, with the
//! expected values computed here independently (addresses, HW_ID fields, clock windows). The
//! bytes of every snippet must also disassemble with llvm-mc-22 (no warnings) to the same
//! mnemonics (set SQTT_NO_LLVM=1 to skip that part only).

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Instruction, Target};
use sqtt_interp::{run, Wave};
use sqtt_rewrite::snippets::{
    address_trace, clock_marker, payload_count, scope_guard, scope_init, scratch_count,
    scratch_wanted, trace_name, AddrSource, ScalarSrc, ScopeMasks, Snippet, SnippetError,
    TraceKind,
};
use std::io::Write;
use std::process::{Command, Stdio};

const LLVM_MC: &str = "/usr/lib/llvm-22/bin/llvm-mc";

/// (processor, wave sizes) of the brief.
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

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.u32() % n
    }
}

fn target(name: &str) -> Target {
    Target::from_name(name).expect("known target")
}

/// A wave with random SGPRs, VGPRs, EXEC, VCC, SCC and M0.
fn random_wave(t: Target, ws: u32, rng: &mut Rng) -> Wave {
    let mut w = Wave::new(t, ws).expect("wave");
    for s in w.sgpr.iter_mut() {
        *s = rng.u32();
    }
    for v in w.vgpr.iter_mut() {
        for l in v.iter_mut() {
            *l = rng.u32();
        }
    }
    w.exec = rng.next() & w.lane_mask();
    w.vcc = rng.next();
    w.scc = rng.below(2) == 1;
    w.m0 = rng.u32();
    w
}

/// Runs `s` and checks the snippet rules on the final state: VGPRs, EXEC, VCC and every SGPR
/// not in `s.sgprs` unchanged; M0 and SCC only if declared.
fn exec(s: &Snippet, w: &mut Wave) -> Vec<u32> {
    let before = w.clone();
    let code = s.bytes();
    let r = run(w, &code, 0x1000, 100_000).expect("snippet runs");
    assert_eq!(
        r.exit_pc,
        0x1000 + code.len() as u64,
        "falls out of the end"
    );
    assert_eq!(w.vgpr, before.vgpr, "VGPRs untouched");
    assert_eq!(w.exec, before.exec, "EXEC untouched");
    assert_eq!(w.vcc, before.vcc, "VCC untouched");
    for (i, (a, b)) in w.sgpr.iter().zip(before.sgpr.iter()).enumerate() {
        if !s.sgprs.contains(&(i as u8)) {
            assert_eq!(a, b, "s{i} not declared clobbered but changed");
        }
    }
    if !s.clobbers_m0 {
        assert_eq!(w.m0, before.m0, "M0 changed without being declared");
    }
    if !s.clobbers_scc {
        assert_eq!(w.scc, before.scc, "SCC changed without being declared");
    }
    r.shaderdata
}

/// The spec's expected block for `src` on state `w` (computed lane by lane).
fn expected(w: &Wave, ws: u32, header: u32, src: &AddrSource) -> Vec<u32> {
    let exec_hi = if ws == 64 { (w.exec >> 32) as u32 } else { 0 };
    let mut out = vec![header, w.exec as u32, exec_hi];
    let v = |r: u16, l: u32| w.vgpr[r as usize][l as usize];
    let s = |r: u16| w.sgpr[r as usize];
    let m0 = w.m0;
    match *src {
        AddrSource::Flat64 { vaddr, offset } => {
            for l in 0..ws {
                let a = (u64::from(v(vaddr + 1, l)) << 32 | u64::from(v(vaddr, l)))
                    .wrapping_add(offset as i64 as u64);
                out.extend([a as u32, (a >> 32) as u32]);
            }
        }
        AddrSource::GlobalSaddr {
            saddr,
            voffset,
            offset,
            signed_scale,
        } => {
            let base = u64::from(s(saddr + 1)) << 32 | u64::from(s(saddr));
            for l in 0..ws {
                // gfx1250: sign-extended, then scaled; earlier: zero-extended.
                let vo = match signed_scale {
                    None => u64::from(v(voffset, l)),
                    Some(n) => (i64::from(v(voffset, l) as i32) * i64::from(n)) as u64,
                };
                let a = base.wrapping_add(vo).wrapping_add(offset as i64 as u64);
                out.extend([a as u32, (a >> 32) as u32]);
            }
        }
        AddrSource::Lds32 { vaddr, offset } => {
            out.extend((0..ws).map(|l| v(vaddr, l).wrapping_add(offset)));
        }
        AddrSource::Permute { index, offset } => {
            out.extend((0..ws).map(|l| v(index, l).wrapping_add(offset)))
        }
        AddrSource::Buffer {
            rsrc,
            soffset,
            voffset,
            vindex,
            offset,
        } => {
            out.push(s(rsrc));
            out.push(s(rsrc + 1));
            out.push(match soffset {
                ScalarSrc::Sgpr(r) => s(u16::from(r)),
                ScalarSrc::M0 => m0,
                ScalarSrc::Const(c) => c,
            });
            out.extend((0..ws).map(|l| voffset.map_or(0, |r| v(r, l)).wrapping_add(offset)));
            if let Some(r) = vindex {
                out.extend((0..ws).map(|l| v(r, l)));
            }
        }
    }
    out
}

fn sources(rng: &mut Rng) -> Vec<AddrSource> {
    let mut neg = || -((rng.below(4096) + 1) as i32);
    let (n1, n2) = (neg(), neg());
    vec![
        AddrSource::Flat64 {
            vaddr: 4,
            offset: 0,
        },
        AddrSource::Flat64 {
            vaddr: 254,
            offset: 2047,
        },
        AddrSource::Flat64 {
            vaddr: 7,
            offset: n1,
        },
        AddrSource::GlobalSaddr {
            saddr: 2,
            voffset: 9,
            offset: 0,
            signed_scale: None,
        },
        AddrSource::GlobalSaddr {
            saddr: 10,
            voffset: 255,
            offset: n2,
            signed_scale: None,
        },
        AddrSource::GlobalSaddr {
            saddr: 10,
            voffset: 1,
            offset: 0x7f_ffff,
            signed_scale: None,
        },
        // gfx1250 forms (the snippet does not depend on the target's family; the test runs
        // them everywhere): signed VGPR offset, with and without scale_offset and an offset.
        AddrSource::GlobalSaddr {
            saddr: 2,
            voffset: 9,
            offset: 0,
            signed_scale: Some(1),
        },
        AddrSource::GlobalSaddr {
            saddr: 10,
            voffset: 255,
            offset: n2,
            signed_scale: Some(4),
        },
        AddrSource::GlobalSaddr {
            saddr: 4,
            voffset: 3,
            offset: 4095,
            signed_scale: Some(12),
        },
        AddrSource::Lds32 {
            vaddr: 3,
            offset: 0,
        },
        AddrSource::Lds32 {
            vaddr: 3,
            offset: 65535,
        },
        AddrSource::Permute {
            index: 200,
            offset: 260,
        },
        AddrSource::Buffer {
            rsrc: 4,
            soffset: ScalarSrc::Sgpr(12),
            voffset: Some(5),
            vindex: None,
            offset: 0,
        },
        AddrSource::Buffer {
            rsrc: 4,
            soffset: ScalarSrc::Const(0),
            voffset: None,
            vindex: None,
            offset: 16,
        },
        AddrSource::Buffer {
            rsrc: 8,
            soffset: ScalarSrc::Const(0x1234_5678),
            voffset: Some(5),
            vindex: None,
            offset: 4095,
        },
        AddrSource::Buffer {
            rsrc: 8,
            soffset: ScalarSrc::M0,
            voffset: Some(6),
            vindex: Some(7),
            offset: 8,
        },
        AddrSource::Buffer {
            rsrc: 16,
            soffset: ScalarSrc::Sgpr(3),
            voffset: None,
            vindex: Some(250),
            offset: 0,
        },
    ]
}

#[test]
fn payload_counts_match_the_spec_table() {
    let g = AddrSource::Flat64 {
        vaddr: 0,
        offset: 0,
    };
    let s = AddrSource::GlobalSaddr {
        saddr: 0,
        voffset: 0,
        offset: 0,
        signed_scale: None,
    };
    let l = AddrSource::Lds32 {
        vaddr: 0,
        offset: 0,
    };
    let p = AddrSource::Permute {
        index: 0,
        offset: 0,
    };
    let raw = AddrSource::Buffer {
        rsrc: 0,
        soffset: ScalarSrc::Const(0),
        voffset: Some(0),
        vindex: None,
        offset: 0,
    };
    let st = AddrSource::Buffer {
        rsrc: 0,
        soffset: ScalarSrc::Const(0),
        voffset: None,
        vindex: Some(0),
        offset: 0,
    };
    let w64: Vec<u32> = [g, s, l, p, raw, st]
        .iter()
        .map(|x| payload_count(64, x))
        .collect();
    let w32: Vec<u32> = [g, s, l, p, raw, st]
        .iter()
        .map(|x| payload_count(32, x))
        .collect();
    assert_eq!(w64, [130, 130, 66, 66, 69, 133]);
    assert_eq!(w32, [66, 66, 34, 34, 37, 69]);
}

#[test]
fn trace_names_are_the_fourteen_of_the_spec() {
    let names: Vec<&str> = TraceKind::ALL.iter().map(|k| trace_name(*k)).collect();
    assert_eq!(
        names,
        [
            "addr_trace_load",
            "addr_trace_store",
            "addr_trace_atomic",
            "addr_trace_lds_load",
            "addr_trace_lds_store",
            "addr_trace_lds_atomic",
            "addr_trace_buffer_load",
            "addr_trace_buffer_store",
            "addr_trace_buffer_atomic",
            "addr_trace_struct_buffer_load",
            "addr_trace_struct_buffer_store",
            "addr_trace_struct_buffer_atomic",
            "addr_trace_ds_permute",
            "addr_trace_ds_bpermute",
        ]
    );
}

#[test]
fn address_trace_streams_match_the_framing_lane_by_lane() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut runs = 0;
    for (name, waves) in TARGETS {
        let t = target(name);
        for &ws in *waves {
            for src in sources(&mut rng) {
                let header = rng.below(1 << 20) << 2; // point marker: flags 0
                                                      // Three scratch SGPRs, and the two-register forms where a block has one.
                let tmp: &[u8] = if scratch_count(&src) == 2 && rng.below(2) == 0 {
                    &[100, 101]
                } else {
                    &[100, 101, 98]
                };
                let snip = address_trace(t, ws, header, &src, tmp)
                    .unwrap_or_else(|e| panic!("{name} w{ws} {src:?}: {e}"));
                assert!(
                    snip.sgprs.iter().all(|s| tmp.contains(s)),
                    "{name}: {:?}",
                    snip.sgprs
                );
                assert!(snip.clobbers_m0 && snip.clobbers_scc);
                for _ in 0..4 {
                    let mut w = random_wave(t, ws, &mut rng);
                    let want = expected(&w, ws, header, &src);
                    let got = exec(&snip, &mut w);
                    assert_eq!(
                        got.len() as u32,
                        1 + payload_count(ws, &src),
                        "{name} w{ws} {src:?}"
                    );
                    assert_eq!(got, want, "{name} w{ws} {src:?}");
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 500);
}

#[test]
fn address_trace_rejects_bad_inputs() {
    let t = target("gfx900");
    let src = AddrSource::Lds32 {
        vaddr: 0,
        offset: 0,
    };
    assert!(matches!(
        address_trace(t, 32, 4, &src, &[1, 2, 3]),
        Err(SnippetError::WaveSize { .. })
    ));
    let t = target("gfx1100");
    assert!(matches!(
        address_trace(t, 48, 4, &src, &[1, 2, 3]),
        Err(SnippetError::WaveSize { .. })
    ));
    assert!(matches!(
        address_trace(t, 32, 4, &src, &[1, 1, 3]),
        Err(SnippetError::RegisterOverlap { .. })
    ));
    let bad_v = AddrSource::Flat64 {
        vaddr: 255,
        offset: 0,
    };
    assert!(matches!(
        address_trace(t, 32, 4, &bad_v, &[1, 2, 3]),
        Err(SnippetError::VgprRange { vgpr: 256 })
    ));
    let sa = AddrSource::GlobalSaddr {
        saddr: 2,
        voffset: 0,
        offset: 0,
        signed_scale: None,
    };
    assert!(matches!(
        address_trace(t, 32, 4, &sa, &[3, 4, 5]),
        Err(SnippetError::RegisterOverlap { sgpr: 3, .. })
    ));
    let buf = AddrSource::Buffer {
        rsrc: 8,
        soffset: ScalarSrc::Sgpr(20),
        voffset: None,
        vindex: None,
        offset: 0,
    };
    assert!(matches!(
        address_trace(t, 32, 4, &buf, &[11, 4, 5]),
        Err(SnippetError::RegisterOverlap { sgpr: 11, .. })
    ));
    assert!(matches!(
        address_trace(t, 32, 4, &buf, &[1, 20, 5]),
        Err(SnippetError::RegisterOverlap { sgpr: 20, .. })
    ));
    // Two scratch SGPRs suffice except for a saddr address with an offset and a buffer soffset
    // in M0 (real vendor kernels often have only two dead SGPRs at a 64-bit access).
    let flat = AddrSource::Flat64 {
        vaddr: 2,
        offset: -16,
    };
    let sa_off = AddrSource::GlobalSaddr {
        saddr: 8,
        voffset: 0,
        offset: 16,
        signed_scale: None,
    };
    let signed = AddrSource::GlobalSaddr {
        saddr: 8,
        voffset: 0,
        offset: 16,
        signed_scale: Some(4),
    };
    assert_eq!(scratch_count(&flat), 2);
    assert_eq!(scratch_count(&sa), 2);
    assert_eq!((scratch_count(&sa_off), scratch_wanted(&sa_off)), (2, 3));
    assert_eq!(scratch_count(&signed), 3);
    let two = address_trace(t, 32, 4, &flat, &[1, 2, 3]).expect("two scratch SGPRs");
    assert!(!two.sgprs.contains(&3), "{:?}", two.sgprs);
    assert!(matches!(
        address_trace(t, 32, 4, &signed, &[1, 2]),
        Err(SnippetError::Rule(_))
    ));
}

/// In-scope decision computed from the field positions of the notes ("Scope check fields").
fn in_scope(gfx9: bool, m: &ScopeMasks, id: u32, id2: u32) -> bool {
    let f = |v: u32, off: u32, size: u32| (v >> off) & ((1 << size) - 1);
    let fields = if gfx9 {
        [
            (m.wave, f(id, 0, 4)),
            (m.simd, f(id, 4, 2)),
            (m.cu, f(id, 8, 4)),
            (m.wg, f(id, 16, 4)),
        ]
    } else {
        [
            (m.wave, f(id, 0, 5)),
            (m.simd, f(id, 8, 2)),
            (m.cu, f(id, 10, 4)),
            (m.wg, f(id2, 16, 5)),
        ]
    };
    fields
        .iter()
        .all(|(mask, v)| mask.is_none_or(|mask| (mask >> v) & 1 == 1))
}

fn marker_body(t: Target, v: u32) -> Vec<Instruction> {
    vec![
        build::s_mov_b32(t, Operand::M0, Operand::Literal(v)).expect("mov"),
        build::s_nop(t, 0).expect("nop"),
        build::s_ttracedata(t).expect("tt"),
    ]
}

#[test]
fn scope_check_emits_exactly_in_scope() {
    let mut rng = Rng(0x0dd_ba11);
    for (name, waves) in TARGETS {
        let t = target(name);
        let gfx9 = name.starts_with("gfx9");
        for &ws in *waves {
            for round in 0..40 {
                let mut pick = |p: u32| {
                    if rng.below(3) == 0 {
                        None
                    } else {
                        Some(rng.u32() | p)
                    }
                };
                let masks = match round {
                    0 => ScopeMasks::default(),
                    1 => ScopeMasks::unfiltered(),
                    _ => ScopeMasks {
                        wave: pick(0),
                        simd: pick(0),
                        cu: pick(0),
                        wg: pick(0),
                    },
                };
                let init = scope_init(t, &masks, 90, 91).expect("init");
                let marker = 0x4000 + round;
                let guard = scope_guard(t, 90, marker_body(t, marker)).expect("guard");
                assert!(init.sgprs.iter().all(|s| [90, 91].contains(s)));
                assert!(!init.clobbers_m0, "scope_init keeps M0");
                let mut both = init.code.clone();
                both.extend(guard.code.clone());
                let both = Snippet::new(both).expect("valid");
                let mut hits = 0;
                for _ in 0..60 {
                    let mut w = random_wave(t, ws, &mut rng);
                    let (id, id2) = (rng.u32(), rng.u32());
                    if gfx9 {
                        w.hwreg.insert(4, id);
                    } else {
                        w.hwreg.insert(23, id);
                        w.hwreg.insert(24, id2);
                    }
                    let want = in_scope(gfx9, &masks, id, id2);
                    let got = exec(&both, &mut w);
                    assert_eq!(
                        got,
                        if want { vec![marker] } else { vec![] },
                        "{name} {masks:?} {id:#x} {id2:#x}"
                    );
                    assert_eq!(w.sgpr[90], u32::from(want), "flag value");
                    hits += usize::from(want);
                }
                if round == 1 {
                    assert_eq!(hits, 60, "unfiltered always emits");
                    assert!(!masks.filters(t));
                }
            }
        }
    }
    assert!(
        ScopeMasks::default().filters(target("gfx942")),
        "spec default CU mask 0x3 filters"
    );
}

#[test]
fn clock_marker_decodes_per_the_spec_formula() {
    let mut rng = Rng(0xc10c_c10c);
    for name in ["gfx1200", "gfx1201", "gfx1250"] {
        let t = target(name);
        for _ in 0..300 {
            let bits = 1 + rng.below(29);
            let shift = rng.below(33 - bits);
            let id = rng.u32() & ((1 << (30 - bits)) - 1);
            let flags = rng.below(4);
            let value = id << 2 | flags;
            let s = clock_marker(t, value, bits, shift, 96).expect("clock");
            let mut w = random_wave(t, 32, &mut rng);
            w.shader_cycles = rng.next();
            let got = exec(&s, &mut w);
            assert_eq!(got.len(), 1);
            let val = got[0];
            assert_eq!(val & 1, flags & 1, "exit_prev");
            assert_eq!((val >> 1) & 1, flags >> 1, "enter");
            assert_eq!((val >> 2) & ((1 << (30 - bits)) - 1), id, "id");
            let window = (w.shader_cycles as u32 >> shift) & ((1u64 << bits) - 1) as u32;
            assert_eq!(
                val >> (32 - bits),
                window,
                "{name} bits {bits} shift {shift}"
            );
        }
        // The spec's example: 12 bits at shift 4 keep source bits 4..15 in marker bits 31..20.
        let s = clock_marker(t, 0x7 << 2, 12, 4, 96).expect("clock");
        let mut w = random_wave(t, 32, &mut rng);
        w.shader_cycles = 0x1234_5678_9abc_def0;
        assert_eq!(exec(&s, &mut w), vec![0xdef << 20 | 0x7 << 2]);
    }
    let g12 = target("gfx1200");
    for other in ["gfx900", "gfx1030", "gfx1100"] {
        assert!(matches!(
            clock_marker(target(other), 4, 12, 4, 96),
            Err(SnippetError::ClockTarget { .. })
        ));
    }
    assert!(matches!(
        clock_marker(g12, 4, 0, 4, 96),
        Err(SnippetError::ClockBits { .. })
    ));
    assert!(matches!(
        clock_marker(g12, 4, 30, 0, 96),
        Err(SnippetError::ClockBits { .. })
    ));
    assert!(matches!(
        clock_marker(g12, 4, 12, 21, 96),
        Err(SnippetError::ClockBits { .. })
    ));
    assert!(matches!(
        clock_marker(g12, 1 << 20, 12, 4, 96),
        Err(SnippetError::ValueTooWide { .. })
    ));
    assert!(matches!(
        clock_marker(target("gfx1250"), 4, 12, 4, 97),
        Err(SnippetError::UnalignedPair { .. })
    ));
}

/// All snippets of one target, labelled, for the assembly check and the size table.
fn all_snippets(name: &str, ws: u32) -> Vec<(String, Snippet)> {
    let t = target(name);
    let mut v = Vec::new();
    let kinds = [
        (
            "flat/global 64-bit",
            AddrSource::Flat64 {
                vaddr: 4,
                offset: 0,
            },
        ),
        (
            "global 64-bit +offset",
            AddrSource::Flat64 {
                vaddr: 4,
                offset: -64,
            },
        ),
        (
            "global saddr",
            AddrSource::GlobalSaddr {
                saddr: 2,
                voffset: 1,
                offset: 0,
                signed_scale: None,
            },
        ),
        (
            "global saddr +offset",
            AddrSource::GlobalSaddr {
                saddr: 2,
                voffset: 1,
                offset: 256,
                signed_scale: None,
            },
        ),
        (
            "lds",
            AddrSource::Lds32 {
                vaddr: 1,
                offset: 0,
            },
        ),
        (
            "lds +offset",
            AddrSource::Lds32 {
                vaddr: 1,
                offset: 128,
            },
        ),
        (
            "ds_permute",
            AddrSource::Permute {
                index: 1,
                offset: 0,
            },
        ),
        (
            "raw buffer (offen)",
            AddrSource::Buffer {
                rsrc: 4,
                soffset: ScalarSrc::Sgpr(12),
                voffset: Some(1),
                vindex: None,
                offset: 0,
            },
        ),
        (
            "struct buffer (idxen+offen)",
            AddrSource::Buffer {
                rsrc: 4,
                soffset: ScalarSrc::Const(0),
                voffset: Some(1),
                vindex: Some(2),
                offset: 0,
            },
        ),
    ];
    for (label, src) in kinds {
        v.push((
            format!("addr {label}"),
            address_trace(t, ws, 4 << 2, &src, &[97, 98, 99]).expect("addr"),
        ));
    }
    let init = scope_init(t, &ScopeMasks::default(), 90, 91).expect("init");
    v.push(("scope_init (default: CU 0x3)".into(), init));
    let all4 = ScopeMasks {
        wave: Some(0xff),
        simd: Some(1),
        cu: Some(3),
        wg: Some(0xf0),
    };
    v.push((
        "scope_init (4 fields)".into(),
        scope_init(t, &all4, 90, 91).expect("init4"),
    ));
    let guard = scope_guard(t, 90, Vec::new()).expect("guard");
    v.push(("scope_guard (marker body excluded)".into(), guard));
    if clock_marker(t, 4, 12, 4, 96).is_ok() {
        v.push((
            "clock marker (12 bits, shift 4)".into(),
            clock_marker(t, 0x104, 12, 4, 96).expect("clock"),
        ));
    }
    v
}

/// llvm-mc-22 disassembly of `bytes`: (instruction lines, stderr).
fn llvm_disassemble(mcpu: &str, bytes: &[u8]) -> (Vec<String>, String) {
    let text: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    let mut child = Command::new(LLVM_MC)
        .args(["-disassemble", "-arch=amdgcn", &format!("-mcpu={mcpu}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc-22 (install llvm-22 or set SQTT_NO_LLVM=1)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.join(" ").as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("llvm-mc output");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('.'))
        .map(str::to_string)
        .collect();
    (lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_snippet_disassembles_with_llvm_mc() {
    if std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1") {
        return;
    }
    assert!(
        std::path::Path::new(LLVM_MC).exists(),
        "{LLVM_MC} missing (set SQTT_NO_LLVM=1 to skip)"
    );
    for (name, waves) in TARGETS {
        for &ws in *waves {
            for (label, s) in all_snippets(name, ws) {
                let (lines, err) = llvm_disassemble(name, &s.bytes());
                assert!(err.trim().is_empty(), "{name} {label}: llvm-mc: {err}");
                let mn: Vec<&str> = lines
                    .iter()
                    .map(|l| l.split_whitespace().next().unwrap_or(""))
                    .collect();
                let ours: Vec<&str> = s.code.iter().map(|i| i.mnemonic()).collect();
                assert_eq!(mn, ours, "{name} w{ws} {label}");
                // The hwreg ids and fields as LLVM names them.
                let text = lines.join("\n");
                if label.starts_with("scope_init (4") {
                    let want: &[&str] = if name.starts_with("gfx9") {
                        &[
                            "hwreg(HW_REG_HW_ID, 0, 4)",
                            "hwreg(HW_REG_HW_ID, 4, 2)",
                            "hwreg(HW_REG_HW_ID, 8, 4)",
                            "hwreg(HW_REG_HW_ID, 16, 4)",
                        ]
                    } else if name.starts_with("gfx12") {
                        &[
                            "hwreg(HW_REG_WAVE_HW_ID1, 0, 5)",
                            "hwreg(HW_REG_WAVE_HW_ID1, 8, 2)",
                            "hwreg(HW_REG_WAVE_HW_ID1, 10, 4)",
                            "hwreg(HW_REG_WAVE_HW_ID2, 16, 5)",
                        ]
                    } else {
                        &[
                            "hwreg(HW_REG_HW_ID1, 0, 5)",
                            "hwreg(HW_REG_HW_ID1, 8, 2)",
                            "hwreg(HW_REG_HW_ID1, 10, 4)",
                            "hwreg(HW_REG_HW_ID2, 16, 5)",
                        ]
                    };
                    for w in want {
                        assert!(text.contains(w), "{name}: missing {w} in\n{text}");
                    }
                }
                if label.starts_with("clock") && name.starts_with("gfx120") {
                    assert!(
                        text.contains("s_getreg_b32 m0, hwreg(HW_REG_SHADER_CYCLES_LO, 4, 12)"),
                        "{name}: {text}"
                    );
                }
                if label.starts_with("clock") && *name == "gfx1250" {
                    assert!(
                        text.contains("s_get_shader_cycles_u64 s[96:97]"),
                        "{name}: {text}"
                    );
                }
            }
        }
    }
}

/// Static sizes (instructions, bytes) and dynamic instruction counts per generation; printed for
/// `agent-notes/snippet-sizes.md` (`cargo test --test snippets sizes -- --nocapture`).
#[test]
fn sizes() {
    let mut rng = Rng(7);
    for (name, waves) in TARGETS {
        for &ws in *waves {
            for (label, s) in all_snippets(name, ws) {
                let t = target(name);
                let mut w = random_wave(t, ws, &mut rng);
                w.hwreg.insert(4, 0);
                w.hwreg.insert(23, 0);
                w.hwreg.insert(24, 0);
                let code = s.bytes();
                let r = run(&mut w, &code, 0, 100_000).expect("runs");
                assert!(s.code.len() < 40, "{label}: loops keep snippets small");
                println!(
                    "| {name} | {ws} | {label} | {} | {} | {} |",
                    s.code.len(),
                    s.byte_len(),
                    r.executed
                );
            }
        }
    }
}
