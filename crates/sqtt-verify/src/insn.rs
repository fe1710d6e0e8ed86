//! Classification of single instructions: the whitelist of instructions a rewrite may insert,
//! scalar inline constants, padding words.

use amdgpu_isa::{Instruction, RegSet, Special, SpecialReg};

/// An instruction the rewriter is allowed to insert (brief of the verifier; seed spec "Marker
/// Encoding", "Instruction selection").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Allowed {
    /// `s_nop 0` (one wait state).
    Nop0,
    /// `s_ttracedata_imm N` (gfx10+): marker value N.
    TtraceImm(u8),
    /// `s_ttracedata` (marker value in M0).
    Ttrace,
    /// `s_mov_b32 m0, K` with an inline or literal constant K.
    SetM0(u32),
    /// `s_mov_b32 sR, m0`.
    SaveM0(u16),
    /// `s_mov_b32 m0, sR`.
    RestoreM0(u16),
}

/// Value of a scalar source operand field (`ssrc0`/`ssrc1`) when it is a constant: inline
/// integers 128..=192 (0..64) and 193..=208 (-1..-16), inline floats 240..=247 and 248
/// (1/(2*pi)), literal 255 (ISA manuals, "Scalar ALU operands" / SSRC encoding table).
pub(crate) fn scalar_const(inst: &Instruction, field: &str) -> Option<u32> {
    let v = inst.field(field)?;
    match v {
        128..=192 => Some(v - 128),
        193..=208 => Some((-((v - 192) as i32)) as u32),
        240 => Some(0x3f00_0000),
        241 => Some(0xbf00_0000),
        242 => Some(0x3f80_0000),
        243 => Some(0xbf80_0000),
        244 => Some(0x4000_0000),
        245 => Some(0xc000_0000),
        246 => Some(0x4080_0000),
        247 => Some(0xc080_0000),
        248 => Some(0x3e22_f983),
        255 => inst.literal().map(|l| l as u32),
        _ => None,
    }
}

fn only_m0() -> RegSet {
    let mut s = RegSet::new();
    s.add(SpecialReg::M0);
    s
}

fn single_sgpr(set: &RegSet) -> Option<u16> {
    let n = set.max_sgpr()?;
    let mut only = RegSet::new();
    only.add_sgpr(n);
    (only == *set).then_some(n)
}

/// The whitelist class of `inst`, or `None` when it may not be inserted.
pub(crate) fn allowed(inst: &Instruction) -> Option<Allowed> {
    match inst.special() {
        Special::TtraceDataImm(v) => return Some(Allowed::TtraceImm(v)),
        Special::TtraceData => return Some(Allowed::Ttrace),
        Special::Nop if inst.field("simm16") == Some(0) => return Some(Allowed::Nop0),
        _ => {}
    }
    if inst.mnemonic() != "s_mov_b32" {
        return None;
    }
    let (r, w) = (inst.reads(), inst.writes());
    if w == only_m0() {
        if r.is_empty() {
            return scalar_const(inst, "ssrc0").map(Allowed::SetM0);
        }
        return single_sgpr(&r).map(Allowed::RestoreM0);
    }
    if r == only_m0() {
        return single_sgpr(&w).map(Allowed::SaveM0);
    }
    None
}

/// Padding word between functions (`s_nop 0`) or at the end of `.text` (`s_code_end`).
pub(crate) fn is_padding(inst: &Instruction) -> bool {
    matches!(inst.special(), Special::CodeEnd)
        || (inst.special() == Special::Nop && inst.field("simm16") == Some(0))
}

/// Effect of a marker word on the scope stack (seed spec "Semantic rules").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    /// `(id<<2)|2`.
    Enter(u32),
    /// `0x1`.
    Exit,
    /// `(id<<2)|3`.
    Fused(u32),
    /// `id<<2`.
    Point(u32),
    /// Reserved id 0 with flags other than a bare exit, or an exit carrying an id.
    Reserved,
}

/// Decodes a marker word in the legacy (no shader-clock) layout.
pub(crate) fn marker_kind(v: u32) -> MarkerKind {
    let id = v >> 2;
    match (id, v & 3) {
        (0, 1) => MarkerKind::Exit,
        (0, _) => MarkerKind::Reserved,
        (id, 2) => MarkerKind::Enter(id),
        (id, 3) => MarkerKind::Fused(id),
        (id, 0) => MarkerKind::Point(id),
        // `id != 0` with only exit_prev: not a form the seed spec defines ("Exit is always 0x1").
        _ => MarkerKind::Reserved,
    }
}

/// Whether `inst` reads M0. Works around the decoder reporting an implicit M0 use for every gfx9
/// DS instruction (it decodes them with LLVM's `*_vi` MC opcodes, which carry the gfx8 M0 use):
/// from gfx9 on LDS access does not need M0 (LLVM `GCNSubtarget::ldsRequiresM0Init`: before
/// GFX9 only). GDS, GWS, `ds_ordered_count`, `ds_append`/`ds_consume` and the `addtid` forms
/// still use M0 and keep the decoder's answer.
pub(crate) fn reads_m0(inst: &Instruction) -> bool {
    if !inst.reads().contains(SpecialReg::M0) {
        return false;
    }
    if inst.target().family() != amdgpu_isa::Family::Gfx9 || inst.format() != amdgpu_isa::Format::Ds
    {
        return true;
    }
    let m = inst.mnemonic();
    let keeps_m0 = m.starts_with("ds_gws")
        || m.contains("addtid")
        || matches!(m, "ds_ordered_count" | "ds_append" | "ds_consume");
    keeps_m0
        || inst
            .memory()
            .is_some_and(|a| a.space == amdgpu_isa::MemSpace::Gds)
}
