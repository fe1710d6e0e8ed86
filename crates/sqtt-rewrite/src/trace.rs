//! Address-trace site selection (spec "Address Tracing"): which machine memory instructions
//! qualify for `SQTT_TRACE_ADDRESSES`, their funcmap kind, where each lane's address comes from
//! (register numbers and immediate offsets decoded per encoding), and where the trace block goes.
//!
//! Post-link mapping of the spec's IR categories: `memory` = FLAT and GLOBAL loads, stores and
//! atomics (AS 0/1) plus MUBUF/MTBUF/VBUFFER operations (raw when `idxen` is clear, struct when
//! set); `lds` = DS operations on LDS with a VGPR address, plus `ds_permute_b32` /
//! `ds_bpermute_b32` / `ds_bpermute_fi_b32`. Scratch (AS 5), GDS, image, SMEM and
//! cache-maintenance operations do not qualify; a FLAT/GLOBAL prefetch is left alone with its
//! reason in the report (not a load, store or atomic, issue 31). LDS DMA from global memory
//! (`global_load_lds_*`, `global_load_async_to_lds_*`) is traced as a load of its global address,
//! `global_store_async_from_lds_*` as a store ([`amdgpu_isa::MemKind`]). A 2-address DS operation (`ds_read2*`,
//! `ds_write2*`, `ds_load_2addr*`, `ds_store_2addr*`, `ds_wrxchg2*`) gets two blocks, one per
//! address, as the compile-time pass traces the two IR accesses the backend merged.

use std::collections::BTreeMap;

use amdgpu_isa::{Family, Format, Instruction, MemKind, MemSpace, RegSet, SpecialReg};

use crate::analysis::{Func, Program};
use crate::config::TraceAddresses;
use crate::layout::Landing;
use crate::plan::{
    forbidden_points, settle_hard, settle_outside, Forbidden, MarkerKey, Site, SiteKind, Skipped,
    Word,
};
use crate::snippets::{AddrSource, ScalarSrc, TraceKind, VCC_LO};

/// One address-trace block to emit in front of a memory instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOp {
    /// Funcmap kind (`addr_trace_*` name).
    pub kind: TraceKind,
    /// Where the per-lane address comes from.
    pub src: AddrSource,
}

/// What address tracing does with one instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    /// Not a qualifying operation for the requested categories.
    NotQualifying,
    /// Qualifies: one block per address (two for 2-address DS operations).
    Traced(Vec<TraceOp>),
    /// Qualifies, but the address cannot be reconstructed; the reason is reported.
    Unsupported(String),
}

/// A scalar operand encoding (SSRC / `soffset` field) as a [`ScalarSrc`]: SGPRs s0..s105, M0
/// (124 on gfx9/gfx10, 125 on gfx11+), `null` (125 on gfx10, 124 on gfx11+) as 0, and the inline
/// integers 128..=192 (0..64) and 193..=208 (-1..-16) (ISA manuals, "Scalar operands").
pub fn scalar_src(enc: u16, family: Family) -> Option<ScalarSrc> {
    let gfx11_up = family >= Family::Gfx11;
    match enc {
        0..=105 => Some(ScalarSrc::Sgpr(enc as u8)),
        124 if !gfx11_up => Some(ScalarSrc::M0),
        125 if gfx11_up => Some(ScalarSrc::M0),
        125 if family == Family::Gfx10 => Some(ScalarSrc::Const(0)),
        124 => Some(ScalarSrc::Const(0)),
        128..=192 => Some(ScalarSrc::Const(u32::from(enc - 128))),
        193..=208 => Some(ScalarSrc::Const((-(i32::from(enc) - 192)) as u32)),
        _ => None,
    }
}

fn kind3(k: MemKind, load: TraceKind, store: TraceKind, atomic: TraceKind) -> Option<TraceKind> {
    match k {
        MemKind::Load => Some(load),
        MemKind::Store => Some(store),
        MemKind::Atomic => Some(atomic),
        MemKind::Prefetch | MemKind::Other => None,
    }
}

/// DS operations on LDS whose address does not come from a VGPR (or that are not accesses).
const DS_WITHOUT_VGPR_ADDRESS: [&str; 9] = [
    "ds_append",
    "ds_consume",
    "ds_gws_",
    "ds_ordered_count",
    "ds_read_addtid",
    "ds_load_addtid",
    "ds_write_addtid",
    "ds_store_addtid",
    "ds_bvh_stack",
];

/// Classifies one instruction for the categories `want` asks for.
pub fn classify(inst: &Instruction, want: TraceAddresses) -> Classified {
    let Some(m) = inst.memory() else {
        return Classified::NotQualifying;
    };
    let name = inst.mnemonic();
    let family = inst.target().family();
    let unsupported = |why: &str| Classified::Unsupported(format!("{name}: {why}"));
    match m.space {
        MemSpace::Lds if inst.format() == Format::Ds && want.lds => {
            if name.starts_with("ds_swizzle") || name == "ds_nop" {
                return Classified::NotQualifying;
            }
            let permute = match name {
                "ds_permute_b32" => Some(TraceKind::DsPermute),
                "ds_bpermute_b32" | "ds_bpermute_fi_b32" => Some(TraceKind::DsBpermute),
                _ => None,
            };
            if DS_WITHOUT_VGPR_ADDRESS.iter().any(|p| name.starts_with(p)) {
                return unsupported("the LDS address does not come from a VGPR (M0 or lane id)");
            }
            let Some((vaddr, _)) = m.vaddr else {
                return unsupported("no address VGPR decoded");
            };
            let (o0, o1) = m.ds_offsets.unwrap_or((0, 0));
            if let Some(kind) = permute {
                return Classified::Traced(vec![TraceOp {
                    kind,
                    src: AddrSource::Permute {
                        index: vaddr,
                        offset: u32::from(o0) | (u32::from(o1) << 8),
                    },
                }]);
            }
            let Some(kind) = kind3(
                m.kind,
                TraceKind::LdsLoad,
                TraceKind::LdsStore,
                TraceKind::LdsAtomic,
            ) else {
                return Classified::NotQualifying;
            };
            let two = [
                "ds_read2",
                "ds_write2",
                "ds_load_2addr",
                "ds_store_2addr",
                "ds_wrxchg2",
                "ds_storexchg_2addr",
            ]
            .iter()
            .any(|p| name.starts_with(p));
            if two {
                let size: u32 = if name.contains("b64") { 8 } else { 4 };
                let stride = if name.contains("st64") || name.contains("stride64") {
                    64
                } else {
                    1
                };
                let unit = size * stride;
                return Classified::Traced(
                    [o0, o1]
                        .iter()
                        .map(|&o| TraceOp {
                            kind,
                            src: AddrSource::Lds32 {
                                vaddr,
                                offset: u32::from(o) * unit,
                            },
                        })
                        .collect(),
                );
            }
            Classified::Traced(vec![TraceOp {
                kind,
                src: AddrSource::Lds32 {
                    vaddr,
                    offset: u32::from(o0) | (u32::from(o1) << 8),
                },
            }])
        }
        MemSpace::Flat | MemSpace::Global if want.memory && m.kind == MemKind::Prefetch => {
            // Issue 31: LLVM marks it mayLoad and mayStore, but it reads no data into a register
            // and writes nothing; the spec's table has no prefetch kind.
            unsupported("a prefetch is not a load, store or atomic (left alone)")
        }
        MemSpace::Flat | MemSpace::Global if want.memory => {
            let Some(kind) = kind3(m.kind, TraceKind::Load, TraceKind::Store, TraceKind::Atomic)
            else {
                return Classified::NotQualifying;
            };
            // gfx1250 sign-extends the `saddr` form's VGPR offset, and `scale_offset` (dword 1
            // bit 16, from llvm-mc-22 encodings) multiplies it by the access size.
            let signed_scale = if family == Family::Gfx1250 {
                if inst.word(1) & (1 << 16) != 0 {
                    match access_size(name) {
                        Some(n) => Some(n),
                        None => {
                            return unsupported(
                                "scale_offset with an access size not named by the mnemonic",
                            )
                        }
                    }
                } else {
                    Some(1)
                }
            } else {
                None
            };
            let offset = inst.mem_offset() as i32;
            let Some((vaddr, width)) = m.vaddr else {
                return unsupported("no address VGPR decoded");
            };
            match m.saddr {
                // gfx12's SALU → SALU SGPR hazard (`s_wait_alu depctr_sa_sdst`) is modelled
                // for s0-s105 only (`amdgpu_isa::hazard`), so a block's SALU read of VCC there
                // could not be proven safe.
                Some((VCC_LO, _)) if matches!(family, Family::Gfx12 | Family::Gfx1250) => {
                    unsupported(
                        "VCC as the saddr base on gfx12 (its SALU hazards on VCC are not modelled)",
                    )
                }
                // An SGPR pair, or VCC (scalar operand 106, `vcc_lo`; clang puts a computed
                // base there: rocRAND's threefry kernels, gfx900).
                Some((s, _)) if s <= VCC_LO => Classified::Traced(vec![TraceOp {
                    kind,
                    src: AddrSource::GlobalSaddr {
                        saddr: s,
                        voffset: vaddr,
                        offset,
                        signed_scale,
                    },
                }]),
                _ if width == 2 => Classified::Traced(vec![TraceOp {
                    kind,
                    src: AddrSource::Flat64 { vaddr, offset },
                }]),
                _ => unsupported("a 64-bit address without a VGPR pair or an SGPR base"),
            }
        }
        MemSpace::Buffer { offen, idxen } if want.memory => {
            let kind = if idxen {
                kind3(
                    m.kind,
                    TraceKind::StructBufferLoad,
                    TraceKind::StructBufferStore,
                    TraceKind::StructBufferAtomic,
                )
            } else {
                kind3(
                    m.kind,
                    TraceKind::BufferLoad,
                    TraceKind::BufferStore,
                    TraceKind::BufferAtomic,
                )
            };
            let Some(kind) = kind else {
                return Classified::NotQualifying;
            };
            let Some((rsrc, 4)) = m.srsrc else {
                return unsupported("no 4-dword resource descriptor decoded");
            };
            let Some(soffset) = m.soffset.and_then(|e| scalar_src(e, family)) else {
                return unsupported("soffset is neither an SGPR, M0, null nor an inline integer");
            };
            // The tables list the `off` variant of each buffer opcode: the address VGPR comes
            // from the raw `vaddr` field when `offen`/`idxen` select one.
            let v = m
                .vaddr
                .map(|(v, _)| v)
                .or_else(|| inst.field("vaddr").map(|x| x as u16));
            let (vindex, voffset) = match (idxen, offen, v) {
                (false, false, _) => (None, None),
                (true, false, Some(v)) => (Some(v), None),
                (false, true, Some(v)) => (None, Some(v)),
                (true, true, Some(v)) => (Some(v), Some(v + 1)),
                _ => return unsupported("offen/idxen set without an address VGPR"),
            };
            Classified::Traced(vec![TraceOp {
                kind,
                src: AddrSource::Buffer {
                    rsrc,
                    soffset,
                    voffset,
                    vindex,
                    offset: inst.mem_offset() as u32,
                },
            }])
        }
        _ => Classified::NotQualifying,
    }
}

/// Bytes one lane accesses, from the mnemonic's data-type suffix (`_b128` 16, `_b96` 12,
/// 64-bit types 8, packed 16-bit pairs and 32-bit types 4, 16-bit types 2, 8-bit types 1): the
/// factor of gfx1250 `scale_offset`. `None` when no suffix names it.
fn access_size(mnemonic: &str) -> Option<u32> {
    const SIZES: [(&str, u32); 17] = [
        ("b128", 16),
        ("b96", 12),
        ("b64", 8),
        ("u64", 8),
        ("i64", 8),
        ("f64", 8),
        ("pk_", 4),
        ("b32", 4),
        ("u32", 4),
        ("i32", 4),
        ("f32", 4),
        ("b16", 2),
        ("u16", 2),
        ("i16", 2),
        ("u8", 1),
        ("i8", 1),
        ("b8", 1),
    ];
    SIZES
        .iter()
        .find(|(suffix, _)| mnemonic.contains(suffix))
        .map(|&(_, n)| n)
}

/// Registers a trace block of `src` reads, plus EXEC (traced in every block).
fn source_regs(src: &AddrSource) -> RegSet {
    let mut r = RegSet::new();
    r.add(SpecialReg::ExecLo);
    r.add(SpecialReg::ExecHi);
    match *src {
        AddrSource::Flat64 { vaddr, .. } => {
            r.add_vgpr(vaddr);
            r.add_vgpr(vaddr + 1);
        }
        AddrSource::GlobalSaddr { saddr, voffset, .. } => {
            if saddr == VCC_LO {
                r.add(SpecialReg::VccLo);
                r.add(SpecialReg::VccHi);
            } else {
                r.add_sgpr(saddr);
                r.add_sgpr(saddr + 1);
            }
            r.add_vgpr(voffset);
        }
        AddrSource::Lds32 { vaddr, .. } => r.add_vgpr(vaddr),
        AddrSource::Permute { index, .. } => r.add_vgpr(index),
        AddrSource::Buffer {
            rsrc,
            soffset,
            voffset,
            vindex,
            ..
        } => {
            r.add_sgpr(rsrc);
            r.add_sgpr(rsrc + 1);
            match soffset {
                ScalarSrc::Sgpr(s) => r.add_sgpr(u16::from(s)),
                ScalarSrc::M0 => r.add(SpecialReg::M0),
                ScalarSrc::Const(_) => {}
            }
            for v in voffset.into_iter().chain(vindex) {
                r.add_vgpr(v);
            }
        }
    }
    r
}

/// Address-trace sites of a program: one [`Site`] per block (key [`MarkerKey::AddrTrace`]),
/// the block's [`TraceOp`] by key, and the qualifying operations that cannot be traced.
///
/// A block goes right in front of its operation; inside an `s_clause` / `s_delay_alu` window or
/// an address builder it moves to the nearest earlier allowed point, and only when no
/// instruction in between writes a register the block reads (address registers, EXEC) and none
/// is a wait that can make a register ready (any but `s_waitcnt_vscnt`): the values read are
/// then those the operation reads. `wave` is the wave size of the
/// object's kernels (`None` when they mix wave32 and wave64: nothing is traced, because the
/// funcmap's single `W:` row cannot describe both).
pub fn trace_sites(
    prog: &Program,
    want: TraceAddresses,
    wave: Option<u32>,
) -> (Vec<Site>, Vec<Skipped>, BTreeMap<MarkerKey, TraceOp>) {
    let mut sites = Vec::new();
    let mut skipped = Vec::new();
    let mut ops = BTreeMap::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        let forbidden = forbidden_points(f);
        for (i, (addr, inst)) in f.insts.iter().enumerate() {
            let skip = |why: String| Skipped {
                function: f.spec.name.clone(),
                addr,
                kind: SiteKind::AddressTrace,
                why,
            };
            let traced = match classify(&inst, want) {
                Classified::NotQualifying => continue,
                Classified::Unsupported(why) => {
                    skipped.push(skip(why));
                    continue;
                }
                Classified::Traced(t) => t,
            };
            if wave.is_none() {
                skipped.push(skip("the object mixes wave32 and wave64 kernels; the funcmap's single W: row cannot describe both".into()));
                continue;
            }
            let Some(q) = placement(f, &forbidden, i, &traced) else {
                skipped.push(skip("no insertion point in front of the operation where its address registers and EXEC hold the values it reads (s_clause window or address builder)".into()));
                continue;
            };
            for (part, op) in traced.into_iter().enumerate() {
                let key = MarkerKey::AddrTrace {
                    func: fi,
                    inst: i,
                    part: part as u8,
                };
                ops.insert(key, op);
                sites.push(Site {
                    func: fi,
                    before: q,
                    word: Word::Point(key),
                    landing: Landing::Before,
                    kind: SiteKind::AddressTrace,
                    addr,
                });
            }
        }
    }
    (sites, skipped, ops)
}

/// Insertion point for the blocks of operation `i`: `i` itself when allowed, otherwise the
/// settled earlier point when the instructions in between leave the traced registers alone, or
/// `i` itself inside an `s_delay_alu` window (a hint, see [`Forbidden::hint`]), or else the
/// nearest earlier point outside the hard windows under the same condition (an `s_clause` group
/// that an `s_delay_alu` window covers: the block goes in front of the `s_clause`, inside the
/// hint's window, and the clause stays whole).
fn placement(f: &Func, forbidden: &Forbidden, i: usize, ops: &[TraceOp]) -> Option<usize> {
    let mut read = RegSet::new();
    for op in ops {
        read.union_with(&source_regs(&op.src));
    }
    // gfx1250 dual-issue (VOPD/VOPD3) destination fields are not yet decoded exactly
    // (docs/isa.md): never hoist a block across one there.
    let dual_issue_gfx1250 = |x: &Instruction| {
        x.target().family() == Family::Gfx1250 && matches!(x.format(), Format::Vopd | Format::Vopd3)
    };
    // A wait can make a register the operation reads ready (a load's result), except
    // `s_waitcnt_vscnt`: it counts vector stores (and atomics without return), which write no
    // register (RDNA ISA manuals, "S_WAITCNT_VSCNT"; LLVM 22 SIInsertWaitcnts, STORE_CNT). The
    // compiler puts one inside a gfx1010 `s_clause` window for the LDS → branch → VMEM hazard.
    let readies = |x: &Instruction| {
        x.mnemonic() != "s_waitcnt_vscnt"
            && (matches!(
                x.special(),
                amdgpu_isa::Special::Waitcnt | amdgpu_isa::Special::WaitAlu
            ) || x.mnemonic().starts_with("s_wait"))
    };
    // Whether a block at `q` (at or before `i`) reads what operation `i` reads.
    let clean = |q: usize| {
        f.insts.range(q..i).all(|(_, x)| {
            !dual_issue_gfx1250(&x) && x.writes().intersection(&read).is_empty() && !readies(&x)
        })
    };
    let inside_hint = !forbidden.hard.contains(&i);
    let nested = || settle_hard(f, forbidden, i, true).filter(|&q| q <= i && clean(q));
    let Some(q) = settle_outside(f, forbidden, i, true) else {
        return inside_hint.then_some(i).or_else(nested);
    };
    if q == i {
        return Some(i);
    }
    if q < i && clean(q) {
        Some(q)
    } else {
        inside_hint.then_some(i).or_else(nested)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::{decode, Target};

    const ALL: TraceAddresses = TraceAddresses {
        memory: true,
        lds: true,
    };

    /// Classifies one encoding; the bytes were produced by `llvm-mc-22 -show-encoding` for the
    /// assembly in each case's comment.
    fn one(target: &str, bytes: &[u8]) -> Classified {
        let t = Target::from_name(target).expect("target");
        classify(&decode(bytes, t).expect("decodes"), ALL)
    }

    fn traced(c: Classified) -> Vec<TraceOp> {
        match c {
            Classified::Traced(v) => v,
            other => panic!("not traced: {other:?}"),
        }
    }

    #[test]
    fn global_and_flat_sources_with_signed_offsets() {
        // gfx942: global_load_dword v1, v2, s[4:5] offset:-8
        let t = traced(one(
            "gfx942",
            &[0xf8, 0x9f, 0x50, 0xdc, 0x02, 0x00, 0x04, 0x01],
        ));
        assert_eq!(
            t,
            vec![TraceOp {
                kind: TraceKind::Load,
                src: AddrSource::GlobalSaddr {
                    saddr: 4,
                    voffset: 2,
                    offset: -8,
                    signed_scale: None
                }
            }]
        );
        // gfx942: global_store_dwordx2 v[4:5], v[6:7], off offset:40
        let t = traced(one(
            "gfx942",
            &[0x28, 0x80, 0x74, 0xdc, 0x04, 0x06, 0x7f, 0x00],
        ));
        assert_eq!(t[0].kind, TraceKind::Store);
        assert_eq!(
            t[0].src,
            AddrSource::Flat64 {
                vaddr: 4,
                offset: 40
            }
        );
        // gfx942: flat_atomic_add v1, v[2:3], v4 offset:8 sc0
        let t = traced(one(
            "gfx942",
            &[0x08, 0x00, 0x09, 0xdd, 0x02, 0x04, 0x00, 0x01],
        ));
        assert_eq!(t[0].kind, TraceKind::Atomic);
        assert_eq!(
            t[0].src,
            AddrSource::Flat64 {
                vaddr: 2,
                offset: 8
            }
        );
        // gfx1030: global_load_dword v1, v2, s[4:5] offset:-8
        let t = traced(one(
            "gfx1030",
            &[0xf8, 0x8f, 0x30, 0xdc, 0x02, 0x00, 0x04, 0x01],
        ));
        assert!(matches!(
            t[0].src,
            AddrSource::GlobalSaddr { offset: -8, .. }
        ));
        // gfx1100: global_atomic_add_u32 v1, v[2:3], v4, off offset:-4096 glc
        let t = traced(one(
            "gfx1100",
            &[0x00, 0x50, 0xd6, 0xdc, 0x02, 0x04, 0x7c, 0x01],
        ));
        assert_eq!(t[0].kind, TraceKind::Atomic);
        assert_eq!(
            t[0].src,
            AddrSource::Flat64 {
                vaddr: 2,
                offset: -4096
            }
        );
        // gfx1201: global_load_b32 v1, v2, s[4:5] offset:-8388608 (24-bit signed)
        let t = traced(one(
            "gfx1201",
            &[
                0x04, 0x00, 0x05, 0xee, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x80,
            ],
        ));
        assert_eq!(
            t[0].src,
            AddrSource::GlobalSaddr {
                saddr: 4,
                voffset: 2,
                offset: -8_388_608,
                signed_scale: None
            }
        );
    }

    #[test]
    fn lds_offsets_two_address_forms_and_permutes() {
        // gfx942: ds_read2st64_b64 v[0:3], v5 offset0:1 offset1:3 -> 512 and 1536 bytes
        let t = traced(one(
            "gfx942",
            &[0x01, 0x03, 0xf0, 0xd8, 0x05, 0x00, 0x00, 0x00],
        ));
        assert_eq!(
            t.iter().map(|o| o.src).collect::<Vec<_>>(),
            vec![
                AddrSource::Lds32 {
                    vaddr: 5,
                    offset: 512
                },
                AddrSource::Lds32 {
                    vaddr: 5,
                    offset: 1536
                }
            ]
        );
        assert!(t.iter().all(|o| o.kind == TraceKind::LdsLoad));
        // gfx1100: ds_store_2addr_b32 v1, v2, v3 offset0:2 offset1:5 -> 8 and 20 bytes
        let t = traced(one(
            "gfx1100",
            &[0x02, 0x05, 0x38, 0xd8, 0x01, 0x02, 0x03, 0x00],
        ));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[1].src,
            AddrSource::Lds32 {
                vaddr: 1,
                offset: 20
            }
        );
        assert_eq!(t[1].kind, TraceKind::LdsStore);
        // gfx942: ds_add_u32 v2, v3 offset:260 (16-bit offset)
        let t = traced(one(
            "gfx942",
            &[0x04, 0x01, 0x00, 0xd8, 0x02, 0x03, 0x00, 0x00],
        ));
        assert_eq!(t[0].kind, TraceKind::LdsAtomic);
        assert_eq!(
            t[0].src,
            AddrSource::Lds32 {
                vaddr: 2,
                offset: 260
            }
        );
        // gfx942: ds_bpermute_b32 v1, v2, v3; gfx1201: ds_permute_b32 v1, v2, v3
        let t = traced(one(
            "gfx942",
            &[0x00, 0x00, 0x7e, 0xd8, 0x02, 0x03, 0x00, 0x01],
        ));
        assert_eq!(t[0].kind, TraceKind::DsBpermute);
        assert_eq!(
            t[0].src,
            AddrSource::Permute {
                index: 2,
                offset: 0
            }
        );
        // gfx942 / gfx1201: ds_bpermute_b32 v1, v2, v3 offset:260 (LLVM folds a constant add of
        // the index into the offset field; the traced token is the effective index)
        for (target, bytes) in [
            ("gfx942", [0x04, 0x01, 0x7e, 0xd8, 0x02, 0x03, 0x00, 0x01]),
            ("gfx1201", [0x04, 0x01, 0xcc, 0xda, 0x02, 0x03, 0x00, 0x01]),
        ] {
            let t = traced(one(target, &bytes));
            assert_eq!(t[0].kind, TraceKind::DsBpermute, "{target}");
            assert_eq!(
                t[0].src,
                AddrSource::Permute {
                    index: 2,
                    offset: 260
                },
                "{target}"
            );
        }
        let t = traced(one(
            "gfx1201",
            &[0x00, 0x00, 0xc8, 0xda, 0x02, 0x03, 0x00, 0x01],
        ));
        assert_eq!(t[0].kind, TraceKind::DsPermute);
    }

    #[test]
    fn buffer_components_per_generation() {
        // gfx942: buffer_load_dword v1, v2, s[4:7], s3 offen offset:16
        let t = traced(one(
            "gfx942",
            &[0x10, 0x10, 0x50, 0xe0, 0x02, 0x01, 0x01, 0x03],
        ));
        assert_eq!(t[0].kind, TraceKind::BufferLoad);
        assert_eq!(
            t[0].src,
            AddrSource::Buffer {
                rsrc: 4,
                soffset: ScalarSrc::Sgpr(3),
                voffset: Some(2),
                vindex: None,
                offset: 16
            }
        );
        // gfx942: buffer_load_dword v1, v[2:3], s[4:7], m0 idxen offen offset:16
        let t = traced(one(
            "gfx942",
            &[0x10, 0x30, 0x50, 0xe0, 0x02, 0x01, 0x01, 0x7c],
        ));
        assert_eq!(t[0].kind, TraceKind::StructBufferLoad);
        assert!(matches!(
            t[0].src,
            AddrSource::Buffer {
                soffset: ScalarSrc::M0,
                vindex: Some(2),
                voffset: Some(3),
                ..
            }
        ));
        // gfx942: buffer_atomic_add v1, off, s[8:11], 7 offset:12
        let t = traced(one(
            "gfx942",
            &[0x0c, 0x00, 0x08, 0xe1, 0x00, 0x01, 0x02, 0x87],
        ));
        assert_eq!(t[0].kind, TraceKind::BufferAtomic);
        assert_eq!(
            t[0].src,
            AddrSource::Buffer {
                rsrc: 8,
                soffset: ScalarSrc::Const(7),
                voffset: None,
                vindex: None,
                offset: 12
            }
        );
        // gfx1030: buffer_store_dword v1, v[2:3], s[8:11], null idxen offen offset:4
        let t = traced(one(
            "gfx1030",
            &[0x04, 0x30, 0x70, 0xe0, 0x02, 0x01, 0x02, 0x7d],
        ));
        assert_eq!(t[0].kind, TraceKind::StructBufferStore);
        assert!(matches!(
            t[0].src,
            AddrSource::Buffer {
                rsrc: 8,
                soffset: ScalarSrc::Const(0),
                ..
            }
        ));
        // gfx1100: buffer_load_b32 v1, v[2:3], s[4:7], m0 idxen offen offset:16
        let t = traced(one(
            "gfx1100",
            &[0x10, 0x00, 0x50, 0xe0, 0x02, 0x01, 0xc1, 0x7d],
        ));
        assert_eq!(t[0].kind, TraceKind::StructBufferLoad);
        assert!(matches!(
            t[0].src,
            AddrSource::Buffer {
                soffset: ScalarSrc::M0,
                vindex: Some(2),
                voffset: Some(3),
                offset: 16,
                ..
            }
        ));
        // gfx1201: buffer_load_b32 v1, v2, s[4:7], s3 offen offset:16 / idxen offset:16
        let t = traced(one(
            "gfx1201",
            &[
                0x03, 0x00, 0x05, 0xc4, 0x01, 0x08, 0x80, 0x40, 0x02, 0x10, 0x00, 0x00,
            ],
        ));
        assert_eq!(
            t[0].src,
            AddrSource::Buffer {
                rsrc: 4,
                soffset: ScalarSrc::Sgpr(3),
                voffset: Some(2),
                vindex: None,
                offset: 16
            }
        );
        let t = traced(one(
            "gfx1201",
            &[
                0x03, 0x00, 0x05, 0xc4, 0x01, 0x08, 0x80, 0x80, 0x02, 0x10, 0x00, 0x00,
            ],
        ));
        assert_eq!(t[0].kind, TraceKind::StructBufferLoad);
        assert!(matches!(
            t[0].src,
            AddrSource::Buffer {
                vindex: Some(2),
                voffset: None,
                ..
            }
        ));
    }

    /// Issue 31: a prefetch is left alone with its reason (not a load, store or atomic, and no
    /// memory-op marker); LDS DMA from global memory is a load of its global address, to global
    /// memory a store (llvm-mc-22 encodings).
    #[test]
    fn prefetches_are_left_alone_and_lds_dma_is_a_load_or_store() {
        let dec = |t: &str, b: &[u8]| decode(b, Target::from_name(t).unwrap()).unwrap();
        // gfx1250: global_prefetch_b8 v[0:1], off / flat_prefetch_b8 v[0:1]
        for (bytes, name) in [
            (
                [0x7c, 0x40, 0x17, 0xee, 0, 0, 0, 0, 0, 0, 0, 0],
                "global_prefetch_b8",
            ),
            (
                [0x7c, 0x40, 0x17, 0xec, 0, 0, 0, 0, 0, 0, 0, 0],
                "flat_prefetch_b8",
            ),
        ] {
            assert_eq!(
                one("gfx1250", &bytes),
                Classified::Unsupported(format!(
                    "{name}: a prefetch is not a load, store or atomic (left alone)"
                ))
            );
            assert_eq!(crate::plan::vmem_kind(&dec("gfx1250", &bytes)), None);
        }
        // gfx942: global_load_lds_dword v[2:3], off
        let lds_dma = [0x00, 0x80, 0xa8, 0xdc, 0x02, 0x00, 0x7f, 0x00];
        let t = traced(one("gfx942", &lds_dma));
        assert_eq!(t[0].kind, TraceKind::Load);
        assert_eq!(
            t[0].src,
            AddrSource::Flat64 {
                vaddr: 2,
                offset: 0
            }
        );
        assert_eq!(
            crate::plan::vmem_kind(&dec("gfx942", &lds_dma)),
            Some(false)
        );
        // gfx1250: global_load_async_to_lds_b32 v1, v[2:3], off /
        // global_store_async_from_lds_b32 v[2:3], v1, off
        let to_lds = [0x7c, 0x00, 0x18, 0xee, 0x01, 0, 0, 0, 0x02, 0, 0, 0];
        let from_lds = [0x7c, 0x00, 0x19, 0xee, 0, 0, 0x80, 0, 0x02, 0, 0, 0];
        assert_eq!(
            dec("gfx1250", &to_lds).memory().unwrap().kind,
            MemKind::Load
        );
        assert_eq!(
            dec("gfx1250", &from_lds).memory().unwrap().kind,
            MemKind::Store
        );
        assert_eq!(
            crate::plan::vmem_kind(&dec("gfx1250", &from_lds)),
            Some(true)
        );
    }

    #[test]
    fn lds_ops_without_a_vgpr_address_are_refused_and_swizzles_do_not_qualify() {
        // gfx942: ds_append v1 (address from M0)
        let c = one("gfx942", &[0x00, 0x00, 0x7c, 0xd9, 0x00, 0x00, 0x00, 0x01]);
        assert_eq!(
            c,
            Classified::Unsupported(
                "ds_append: the LDS address does not come from a VGPR (M0 or lane id)".into()
            )
        );
        // gfx942: ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,"01pip")
        let c = one("gfx942", &[0x07, 0x09, 0x7a, 0xd8, 0x02, 0x00, 0x00, 0x01]);
        assert_eq!(c, Classified::NotQualifying);
    }

    #[test]
    fn gfx1250_voffset_is_signed_and_scale_offset_scales_it() {
        // gfx1250: global_load_b32 v1, v2, s[4:5] scale_offset / without it (llvm-mc-22)
        let with = traced(one(
            "gfx1250",
            &[
                0x04, 0x00, 0x05, 0xee, 0x01, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
        ));
        assert_eq!(
            with[0].src,
            AddrSource::GlobalSaddr {
                saddr: 4,
                voffset: 2,
                offset: 0,
                signed_scale: Some(4)
            }
        );
        let without = traced(one(
            "gfx1250",
            &[
                0x04, 0x00, 0x05, 0xee, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
        ));
        assert!(matches!(
            without[0].src,
            AddrSource::GlobalSaddr {
                saddr: 4,
                signed_scale: Some(1),
                ..
            }
        ));
        for (m, n) in [
            ("global_load_b128", 16),
            ("global_load_b96", 12),
            ("global_store_b64", 8),
            ("global_atomic_add_u64", 8),
            ("global_atomic_pk_add_bf16", 4),
            ("global_load_b32", 4),
            ("global_load_u16", 2),
            ("global_store_b16", 2),
            ("global_load_d16_hi_i8", 1),
            ("global_store_b8", 1),
        ] {
            assert_eq!(access_size(m), Some(n), "{m}");
        }
    }

    #[test]
    fn categories_gate_and_scalar_sources() {
        let t = Target::from_name("gfx942").expect("target");
        let lds = decode(&[0x04, 0x01, 0x00, 0xd8, 0x02, 0x03, 0x00, 0x00], t).expect("ds");
        let memory_only = TraceAddresses {
            memory: true,
            lds: false,
        };
        assert_eq!(classify(&lds, memory_only), Classified::NotQualifying);
        assert_eq!(
            scalar_src(193, Family::Gfx9),
            Some(ScalarSrc::Const(u32::MAX))
        );
        assert_eq!(scalar_src(124, Family::Gfx11), Some(ScalarSrc::Const(0)));
        assert_eq!(scalar_src(125, Family::Gfx12), Some(ScalarSrc::M0));
        assert_eq!(scalar_src(106, Family::Gfx10), None);
    }
}
