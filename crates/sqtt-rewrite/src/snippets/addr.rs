//! Per-lane address-trace blocks (spec "Address Tracing": "Framing protocol", "Buffer
//! intrinsics (component-based protocol)", "ds_permute / ds_bpermute", "Address width by type",
//! "Per-op unique IDs and source locations").

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::Target;

use super::{check_wave, simm16, Emitter, Snippet, SnippetError};

/// A scalar operand that is an SGPR, M0, or a constant (the `soffset` of a buffer instruction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarSrc {
    /// `s<n>`.
    Sgpr(u8),
    /// M0 (gfx9/gfx10 MUBUF `soffset` may name it). The snippet copies it to `tmp[2]` before
    /// overwriting M0.
    M0,
    /// An inline constant or literal value (gfx12 `null` is `Const(0)`).
    Const(u32),
}

/// Scalar operand encoding of `vcc_lo` (106; `vcc_hi` is 107) on gfx9-gfx12 (AMDGPU ISA
/// manuals, "Scalar operands"): a GLOBAL/FLAT `saddr` may name the VCC pair.
pub const VCC_LO: u16 = 106;

/// Where the address of one memory instruction comes from (register numbers are as encoded in
/// the traced instruction; byte offsets are the instruction's immediate offset fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrSource {
    /// FLAT/GLOBAL with a 64-bit VGPR address: per lane `v[vaddr+1]:v[vaddr] + sext(offset)`.
    Flat64 { vaddr: u16, offset: i32 },
    /// GLOBAL/FLAT with `saddr`: per lane `s[saddr+1]:s[saddr] + ext(v[voffset]) + sext(offset)`
    /// (`saddr` [`VCC_LO`]: the pair `vcc_hi:vcc_lo`),
    /// where `ext` is a zero extension up to gfx12 (`signed_scale: None`) and on gfx1250
    /// (`Some(n)`) a sign extension times `n`: the access size in bytes with `scale_offset`, else
    /// 1 (LLVM `GCNSubtarget::hasSignedGVSOffset`, gfx1250 and later; the scaled form widens
    /// before it multiplies, so the product is signed).
    GlobalSaddr {
        saddr: u16,
        voffset: u16,
        offset: i32,
        signed_scale: Option<u32>,
    },
    /// LDS (DS): per lane `v[vaddr] + offset` (32-bit, wrapping).
    Lds32 { vaddr: u16, offset: u32 },
    /// MUBUF/VBUFFER: descriptor `s[rsrc..rsrc+3]`; tokens `rsrc_lo`, `rsrc_hi`, `soffset`, per
    /// lane `voffset + offset` (just `offset` without `offen`), and per lane `vindex` when present
    /// (`idxen`: a struct buffer). Adding the immediate offset to the voffset token keeps the
    /// decoder's `base + soffset + voffset` equal to the accessed address.
    Buffer {
        rsrc: u16,
        soffset: ScalarSrc,
        voffset: Option<u16>,
        vindex: Option<u16>,
        offset: u32,
    },
    /// `ds_permute_b32` / `ds_bpermute_b32` (`_fi`): per lane `v[index] + offset` (32-bit,
    /// wrapping): the byte address the hardware turns into a lane number (lane * 4). A nonzero
    /// `offset` is LLVM folding a constant add of the index into the instruction's offset field
    /// (`offset0 | offset1 << 8`); the token is the effective index either way.
    Permute { index: u16, offset: u32 },
}

/// The fourteen address-trace kinds of the spec's "Funcmap name prefix" table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceKind {
    Load,
    Store,
    Atomic,
    LdsLoad,
    LdsStore,
    LdsAtomic,
    BufferLoad,
    BufferStore,
    BufferAtomic,
    StructBufferLoad,
    StructBufferStore,
    StructBufferAtomic,
    DsPermute,
    DsBpermute,
}

impl TraceKind {
    /// All kinds, in the spec's table order.
    pub const ALL: [TraceKind; 14] = [
        TraceKind::Load,
        TraceKind::Store,
        TraceKind::Atomic,
        TraceKind::LdsLoad,
        TraceKind::LdsStore,
        TraceKind::LdsAtomic,
        TraceKind::BufferLoad,
        TraceKind::BufferStore,
        TraceKind::BufferAtomic,
        TraceKind::StructBufferLoad,
        TraceKind::StructBufferStore,
        TraceKind::StructBufferAtomic,
        TraceKind::DsPermute,
        TraceKind::DsBpermute,
    ];
}

/// The exact funcmap name of `kind` (spec "Per-op unique IDs and source locations"; the old
/// Python tools match these names exactly, `docs/background/funcmap-contract.md`).
pub fn trace_name(kind: TraceKind) -> &'static str {
    match kind {
        TraceKind::Load => "addr_trace_load",
        TraceKind::Store => "addr_trace_store",
        TraceKind::Atomic => "addr_trace_atomic",
        TraceKind::LdsLoad => "addr_trace_lds_load",
        TraceKind::LdsStore => "addr_trace_lds_store",
        TraceKind::LdsAtomic => "addr_trace_lds_atomic",
        TraceKind::BufferLoad => "addr_trace_buffer_load",
        TraceKind::BufferStore => "addr_trace_buffer_store",
        TraceKind::BufferAtomic => "addr_trace_buffer_atomic",
        TraceKind::StructBufferLoad => "addr_trace_struct_buffer_load",
        TraceKind::StructBufferStore => "addr_trace_struct_buffer_store",
        TraceKind::StructBufferAtomic => "addr_trace_struct_buffer_atomic",
        TraceKind::DsPermute => "addr_trace_ds_permute",
        TraceKind::DsBpermute => "addr_trace_ds_bpermute",
    }
}

/// Shaderdata words after the header (the funcmap's `R:<id>:extra_payload_count=N`): `exec_lo`,
/// `exec_hi`, then 2 per lane for 64-bit addresses, 1 per lane for LDS and permutes, and for
/// buffers 3 fixed words plus 1 (raw) or 2 (struct) per lane. Wave64: 130 / 66 / 69 / 133;
/// wave32: 66 / 34 / 37 / 69 (spec "Address width by type"). Words (32-bit records).
pub fn payload_count(wave_size: u32, src: &AddrSource) -> u32 {
    let per_lane = match src {
        AddrSource::Flat64 { .. } | AddrSource::GlobalSaddr { .. } => 2 * wave_size,
        AddrSource::Lds32 { .. } | AddrSource::Permute { .. } => wave_size,
        AddrSource::Buffer { vindex, .. } => 3 + wave_size * if vindex.is_some() { 2 } else { 1 },
    };
    2 + per_lane
}

fn vgpr(n: u16) -> Result<u16, SnippetError> {
    if n <= 255 {
        Ok(n)
    } else {
        Err(SnippetError::VgprRange { vgpr: u32::from(n) })
    }
}

fn sgpr(n: u16) -> Result<u8, SnippetError> {
    u8::try_from(n).map_err(|_| SnippetError::RegisterOverlap {
        sgpr: u8::MAX,
        what: "an SGPR number above 255",
    })
}

/// Scratch SGPRs the block of `src` needs at least: the lane counter and one word register, plus
/// a second word register for a signed (gfx1250) `saddr` VGPR offset (the high half is built
/// while the low one is sent) or a buffer `soffset` held in M0 (its copy).
pub fn scratch_count(src: &AddrSource) -> usize {
    match *src {
        AddrSource::GlobalSaddr {
            signed_scale: Some(_),
            ..
        } => 3,
        AddrSource::Buffer {
            soffset: ScalarSrc::M0,
            ..
        } => 3,
        _ => 2,
    }
}

/// Scratch SGPRs the block of `src` uses when they are free: [`scratch_count`], or 3 for a
/// zero-extended `saddr` address with an immediate offset, whose two-register form re-reads each
/// lane (2 instructions more per lane).
pub fn scratch_wanted(src: &AddrSource) -> usize {
    match *src {
        AddrSource::GlobalSaddr {
            offset,
            signed_scale: None,
            ..
        } if offset != 0 => 3,
        _ => scratch_count(src),
    }
}

/// Rejects scratch registers that repeat or overlap `[first, first + count)` of a source.
fn no_overlap(tmp: &[u8], first: u16, count: u16, what: &'static str) -> Result<(), SnippetError> {
    for &r in tmp {
        if (first..first + count).contains(&u16::from(r)) {
            return Err(SnippetError::RegisterOverlap { sgpr: r, what });
        }
    }
    Ok(())
}

/// Builds the address-trace block for one memory instruction (spec "Framing protocol"):
/// `header` (always through M0: payload follows), `exec_lo`, `exec_hi` (the constant 0 on
/// wave32), then the payload of [`AddrSource`] for every lane `0..wave_size` regardless of EXEC,
/// each word sent with `s_mov_b32 m0, x` + `s_nop 0` + `s_ttracedata`. Lanes are read with
/// `v_readlane_b32` in a loop over a lane counter (not unrolled, as the spec's pass does).
///
/// `tmp = [counter, word, word2]`: at least [`scratch_count`]`(src)` SGPRs the caller proved
/// free; at most [`scratch_wanted`]`(src)` are used (which ones are written is in [`Snippet::sgprs`]). A 64-bit
/// VGPR address sends both halves through `word`: the low add's carry stays in SCC across the
/// high half's `v_readlane_b32` (a VALU instruction, which leaves SCC alone). Clobbers M0 and
/// SCC. Length: `1 + payload_count(wave_size, src)` words. Errors: invalid wave size for `t`,
/// VGPR above 255, too few scratch registers, scratch registers repeating or overlapping the
/// source SGPRs, encodings missing on `t`.
pub fn address_trace(
    t: Target,
    wave_size: u32,
    header: u32,
    src: &AddrSource,
    tmp: &[u8],
) -> Result<Snippet, SnippetError> {
    check_wave(t, wave_size)?;
    let need = scratch_count(src);
    if tmp.len() < need {
        return Err(SnippetError::Rule(format!(
            "the address-trace block needs {need} scratch SGPRs, {} given",
            tmp.len()
        )));
    }
    let tmp = &tmp[..tmp.len().min(scratch_wanted(src))];
    for (i, r) in tmp.iter().enumerate() {
        if tmp[i + 1..].contains(r) {
            return Err(SnippetError::RegisterOverlap {
                sgpr: *r,
                what: "another scratch register",
            });
        }
    }
    let (c, x) = (tmp[0], tmp[1]);
    // The second word register; present whenever `scratch_count` asked for it.
    let y = || {
        tmp.get(2).copied().ok_or_else(|| {
            SnippetError::Rule("the address-trace block needs a third scratch SGPR".into())
        })
    };
    // Validate registers first.
    match *src {
        AddrSource::Flat64 { vaddr, .. } => {
            vgpr(vaddr)?;
            vgpr(vaddr + 1)?;
        }
        AddrSource::GlobalSaddr { saddr, voffset, .. } => {
            vgpr(voffset)?;
            sgpr(saddr + 1)?;
            no_overlap(tmp, saddr, 2, "the saddr pair")?;
        }
        AddrSource::Lds32 { vaddr, .. } => {
            vgpr(vaddr)?;
        }
        AddrSource::Permute { index, .. } => {
            vgpr(index)?;
        }
        AddrSource::Buffer {
            rsrc,
            soffset,
            voffset,
            vindex,
            ..
        } => {
            sgpr(rsrc + 3)?;
            no_overlap(tmp, rsrc, 4, "the buffer descriptor")?;
            if let ScalarSrc::Sgpr(s) = soffset {
                no_overlap(tmp, u16::from(s), 1, "soffset")?;
            }
            if let Some(v) = voffset {
                vgpr(v)?;
            }
            if let Some(v) = vindex {
                vgpr(v)?;
            }
        }
    }

    let mut e = Emitter::new(t, true);
    let s = |n: u16| match n {
        VCC_LO => Operand::VccLo,
        n if n == VCC_LO + 1 => Operand::VccHi,
        n => Operand::Sgpr(n as u8),
    };
    // A buffer soffset held in M0 is copied before M0 is overwritten.
    if let AddrSource::Buffer {
        soffset: ScalarSrc::M0,
        ..
    } = src
    {
        e.push(
            "s_mov_b32",
            build::s_mov_b32(t, Operand::Sgpr(y()?), Operand::M0),
        )?;
    }
    e.word(Operand::Literal(header))?;
    e.word(Operand::ExecLo)?;
    e.word(if wave_size == 64 {
        Operand::ExecHi
    } else {
        Operand::Imm(0)
    })?;

    match *src {
        AddrSource::Flat64 { vaddr, offset } => lane_loop(&mut e, wave_size, c, |e| {
            e.push(
                "v_readlane_b32",
                build::v_readlane_b32(t, Operand::Sgpr(x), vaddr, Operand::Sgpr(c)),
            )?;
            if offset == 0 {
                e.word(Operand::Sgpr(x))?;
            } else {
                e.push(
                    "s_add_u32",
                    build::s_add_u32(t, Operand::M0, Operand::Sgpr(x), Operand::Imm(offset)),
                )?;
                e.trace_m0()?;
            }
            e.push(
                "v_readlane_b32",
                build::v_readlane_b32(t, Operand::Sgpr(x), vaddr + 1, Operand::Sgpr(c)),
            )?;
            if offset == 0 {
                e.word(Operand::Sgpr(x))?;
            } else {
                // SCC still holds the low add's carry.
                e.push(
                    "s_addc_u32",
                    build::s_addc_u32(
                        t,
                        Operand::M0,
                        Operand::Sgpr(x),
                        Operand::Imm(sext_hi(offset)),
                    ),
                )?;
                e.trace_m0()?;
            }
            Ok(Box::new(|_: &mut Emitter| Ok(())))
        })?,
        AddrSource::GlobalSaddr {
            saddr,
            voffset,
            offset,
            signed_scale: Some(n),
        } => {
            let y = y()?;
            lane_loop(&mut e, wave_size, c, |e| {
                e.push(
                    "v_readlane_b32",
                    build::v_readlane_b32(t, Operand::Sgpr(x), voffset, Operand::Sgpr(c)),
                )?;
                // y:x = sext(x) * n, then + s[saddr+1]:s[saddr]; the multiplies leave SCC alone.
                let scale = Operand::Literal(n);
                e.push(
                    "s_mul_hi_i32",
                    build::s_mul_hi_i32(t, Operand::Sgpr(y), Operand::Sgpr(x), scale),
                )?;
                if n != 1 {
                    e.push(
                        "s_mul_i32",
                        build::s_mul_i32(t, Operand::Sgpr(x), Operand::Sgpr(x), scale),
                    )?;
                }
                e.push(
                    "s_add_u32",
                    build::s_add_u32(t, Operand::Sgpr(x), Operand::Sgpr(x), s(saddr)),
                )?;
                e.push(
                    "s_addc_u32",
                    build::s_addc_u32(t, Operand::Sgpr(y), Operand::Sgpr(y), s(saddr + 1)),
                )?;
                if offset == 0 {
                    e.word(Operand::Sgpr(x))?;
                    e.word(Operand::Sgpr(y))?;
                } else {
                    e.push(
                        "s_add_u32",
                        build::s_add_u32(t, Operand::M0, Operand::Sgpr(x), Operand::Imm(offset)),
                    )?;
                    e.trace_m0()?;
                    e.push(
                        "s_addc_u32",
                        build::s_addc_u32(
                            t,
                            Operand::M0,
                            Operand::Sgpr(y),
                            Operand::Imm(sext_hi(offset)),
                        ),
                    )?;
                    e.trace_m0()?;
                }
                Ok(Box::new(|_: &mut Emitter| Ok(())))
            })?
        }
        AddrSource::GlobalSaddr {
            saddr,
            voffset,
            offset,
            signed_scale: None,
        } if offset != 0 && tmp.len() < 3 => lane_loop(&mut e, wave_size, c, |e| {
            // Two registers only: the low half is sent first; the high half re-reads the lane
            // and recomputes both carries (t = v + off: carry c0; lo = t + s_lo: carry c1;
            // hi = s_hi + sext_hi(off) + c0 + c1, accumulated in M0).
            let read = |e: &mut Emitter| {
                e.push(
                    "v_readlane_b32",
                    build::v_readlane_b32(t, Operand::Sgpr(x), voffset, Operand::Sgpr(c)),
                )?;
                e.push(
                    "s_add_u32",
                    build::s_add_u32(t, Operand::Sgpr(x), Operand::Sgpr(x), Operand::Imm(offset)),
                )
            };
            read(e)?;
            e.push(
                "s_add_u32",
                build::s_add_u32(t, Operand::M0, Operand::Sgpr(x), s(saddr)),
            )?;
            e.trace_m0()?;
            read(e)?;
            e.push(
                "s_addc_u32",
                build::s_addc_u32(t, Operand::M0, s(saddr + 1), Operand::Imm(sext_hi(offset))),
            )?;
            e.push(
                "s_add_u32",
                build::s_add_u32(t, Operand::Sgpr(x), Operand::Sgpr(x), s(saddr)),
            )?;
            e.push(
                "s_addc_u32",
                build::s_addc_u32(t, Operand::M0, Operand::M0, Operand::Imm(0)),
            )?;
            e.trace_m0()?;
            Ok(Box::new(|_: &mut Emitter| Ok(())))
        })?,
        AddrSource::GlobalSaddr {
            saddr,
            voffset,
            offset,
            signed_scale: None,
        } => {
            // The high half's register, used only with an offset (three were given).
            let y = if offset == 0 { x } else { y()? };
            lane_loop(&mut e, wave_size, c, |e| {
                e.push(
                    "v_readlane_b32",
                    build::v_readlane_b32(t, Operand::Sgpr(x), voffset, Operand::Sgpr(c)),
                )?;
                Ok(Box::new(move |e: &mut Emitter| {
                    if offset == 0 {
                        e.push(
                            "s_add_u32",
                            build::s_add_u32(t, Operand::M0, Operand::Sgpr(x), s(saddr)),
                        )?;
                        e.trace_m0()?;
                        e.push(
                            "s_addc_u32",
                            build::s_addc_u32(t, Operand::M0, s(saddr + 1), Operand::Imm(0)),
                        )?;
                        e.trace_m0()
                    } else {
                        // lo = x + s_lo + off, hi = s_hi + sext_hi(off) + both carries.
                        e.push(
                            "s_add_u32",
                            build::s_add_u32(t, Operand::Sgpr(x), Operand::Sgpr(x), s(saddr)),
                        )?;
                        e.push(
                            "s_addc_u32",
                            build::s_addc_u32(
                                t,
                                Operand::Sgpr(y),
                                s(saddr + 1),
                                Operand::Imm(sext_hi(offset)),
                            ),
                        )?;
                        e.push(
                            "s_add_u32",
                            build::s_add_u32(
                                t,
                                Operand::M0,
                                Operand::Sgpr(x),
                                Operand::Imm(offset),
                            ),
                        )?;
                        e.trace_m0()?;
                        e.push(
                            "s_addc_u32",
                            build::s_addc_u32(t, Operand::M0, Operand::Sgpr(y), Operand::Imm(0)),
                        )?;
                        e.trace_m0()
                    }
                }))
            })?
        }
        AddrSource::Lds32 { vaddr, offset } => {
            one_word_loop(&mut e, wave_size, c, x, Some(vaddr), offset)?
        }
        AddrSource::Permute { index, offset } => {
            one_word_loop(&mut e, wave_size, c, x, Some(index), offset)?
        }
        AddrSource::Buffer {
            rsrc,
            soffset,
            voffset,
            vindex,
            offset,
        } => {
            e.word(s(rsrc))?;
            e.word(s(rsrc + 1))?;
            e.word(match soffset {
                ScalarSrc::Sgpr(r) => Operand::Sgpr(r),
                ScalarSrc::M0 => Operand::Sgpr(y()?),
                ScalarSrc::Const(v) => Operand::Literal(v),
            })?;
            one_word_loop(&mut e, wave_size, c, x, voffset, offset)?;
            if let Some(vi) = vindex {
                one_word_loop(&mut e, wave_size, c, x, Some(vi), 0)?;
            }
        }
    }
    e.branch_tail()?;
    e.finish()
}

/// High word of the sign-extended 64-bit `offset`.
fn sext_hi(offset: i32) -> i32 {
    if offset < 0 {
        -1
    } else {
        0
    }
}

/// Loop with one word per lane: `v[src][lane] + offset`, or the constant `offset` without `src`.
fn one_word_loop(
    e: &mut Emitter,
    wave_size: u32,
    c: u8,
    x: u8,
    src: Option<u16>,
    offset: u32,
) -> Result<(), SnippetError> {
    let t = e.t;
    lane_loop(e, wave_size, c, |e| {
        if let Some(v) = src {
            e.push(
                "v_readlane_b32",
                build::v_readlane_b32(t, Operand::Sgpr(x), v, Operand::Sgpr(c)),
            )?;
        }
        Ok(Box::new(move |e: &mut Emitter| match (src, offset) {
            (None, _) => e.word(Operand::Literal(offset)),
            (Some(_), 0) => e.word(Operand::Sgpr(x)),
            (Some(_), _) => {
                e.push(
                    "s_add_u32",
                    build::s_add_u32(t, Operand::M0, Operand::Sgpr(x), Operand::Literal(offset)),
                )?;
                e.trace_m0()
            }
        }))
    })
}

type Emit<'a> = Box<dyn FnOnce(&mut Emitter) -> Result<(), SnippetError> + 'a>;

/// `s_mov_b32 c, 0`, then a loop `L: <reads of lane c> ; s_add_u32 c, c, 1 ; <emit> ;
/// s_cmp_lg_u32 c, wave_size ; s_cbranch_scc1 L`. `reads` appends the `v_readlane_b32`s (the only
/// readers of `c` before the increment) and returns the word emission, which runs after the
/// increment so that one gfx12 `s_wait_alu` per iteration commits every SALU write.
fn lane_loop<'a>(
    e: &mut Emitter,
    wave_size: u32,
    c: u8,
    reads: impl FnOnce(&mut Emitter) -> Result<Emit<'a>, SnippetError>,
) -> Result<(), SnippetError> {
    let t = e.t;
    e.push(
        "s_mov_b32",
        build::s_mov_b32(t, Operand::Sgpr(c), Operand::Imm(0)),
    )?;
    // Commit the counter (and any caller SGPR write) before the loop, not in every iteration.
    e.flush()?;
    let head = e.code.len();
    let emit = reads(e)?;
    e.push(
        "s_add_u32",
        build::s_add_u32(t, Operand::Sgpr(c), Operand::Sgpr(c), Operand::Imm(1)),
    )?;
    emit(e)?;
    e.push(
        "s_cmp_lg_u32",
        build::s_cmp(
            t,
            "s_cmp_lg_u32",
            Operand::Sgpr(c),
            Operand::Imm(wave_size as i32),
        ),
    )?;
    if e.pending() {
        return Err(SnippetError::Rule(
            "an SGPR write is uncommitted on the loop back edge".into(),
        ));
    }
    let back = -(e.bytes_since(head) as i64) - 4;
    e.push("s_cbranch_scc1", build::s_cbranch_scc1(t, simm16(back)?))
}
