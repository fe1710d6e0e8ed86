//! Classification of single instructions: the whitelist of instructions a rewrite may insert,
//! scalar inline constants, padding words.

use amdgpu_isa::{Instruction, RegSet, Special, SpecialReg};

/// An instruction the rewriter is allowed to insert (brief of the verifier; spec "Marker
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
        // LLVM 22 decodes `s_ttracedata` only with a zero `simm16` (anything else is printed as
        // `.long`); the rewrite never sets it.
        Special::TtraceData if inst.field("simm16") == Some(0) => return Some(Allowed::Ttrace),
        Special::Nop if inst.field("simm16") == Some(0) => return Some(Allowed::Nop0),
        _ => {}
    }
    if inst.mnemonic() != "s_mov_b32" {
        return None;
    }
    let (r, w) = inst.reads_writes();
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

/// [`allowed`] from the registers decoded once ([`crate::program::Regs`]): every snippet move
/// reads or writes M0, so an `s_mov_b32` that does neither is not one (its operands are not
/// decoded again).
pub(crate) fn allowed_regs(inst: &Instruction, regs: &crate::program::Regs) -> Option<Allowed> {
    use crate::program::Regs;
    if !regs.has(Regs::M0_READ) && !regs.has(Regs::M0_WRITE) && inst.mnemonic() == "s_mov_b32" {
        return None;
    }
    allowed(inst)
}

/// Padding word between functions (`s_nop`, or a zero dword as linkers leave between
/// functions of real libraries, e.g. after rocPRIM's compiled-out kernels) or at the end of
/// `.text` (`s_code_end`).
pub(crate) fn is_padding(inst: &Instruction) -> bool {
    // Any `s_nop`: the input's own padding may wait more than one state (`s_nop 1`, found by
    // the session-24 fresh tester); it is copied as it is and, never executed, does nothing.
    matches!(inst.special(), Special::CodeEnd | Special::Nop) || inst.bytes() == [0, 0, 0, 0]
}

/// Effect of a marker word on the scope stack (spec "Semantic rules").
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
        // `id != 0` with only exit_prev: not a form the spec defines ("Exit is always 0x1").
        _ => MarkerKind::Reserved,
    }
}

/// Whether `inst` reads M0. Works around the decoder's implicit M0 on FLAT-family memory
/// instructions other than LDS DMA, and around the decoder reporting an implicit M0 use for every gfx9
/// DS instruction (it decodes them with LLVM's `*_vi` MC opcodes, which carry the gfx8 M0 use):
/// from gfx9 on LDS access does not need M0 (LLVM `GCNSubtarget::ldsRequiresM0Init`: before
/// GFX9 only). GDS, GWS, `ds_ordered_count`, `ds_append`/`ds_consume` and the `addtid` forms
/// still use M0 and keep the decoder's answer.
///
/// The "release VGPRs" message (`s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)`, gfx11/gfx12 message 3,
/// which LLVM's `SIInsertWaitcnts` places before `s_endpgm` without defining M0) carries no M0
/// payload; on gfx9/gfx10 message 3 is MSG_GS_DONE and does read M0.
pub(crate) fn reads_m0(inst: &Instruction) -> bool {
    if !inst.reads().contains(SpecialReg::M0) {
        return false;
    }
    if inst.mnemonic() == "s_sendmsg" {
        let gfx11_on = matches!(
            inst.target().family(),
            amdgpu_isa::Family::Gfx11 | amdgpu_isa::Family::Gfx12
        );
        let message = inst.word(0) & 0xff;
        return !(gfx11_on && message == 3);
    }
    // The decoder also reports M0 for FLAT/GLOBAL/SCRATCH stores and loads (seen on gfx11/gfx12
    // `global_store_b32 ..., off`); only the LDS-DMA forms (`*_lds_*`, M0 = LDS address) read it.
    if matches!(
        inst.format(),
        amdgpu_isa::Format::Flat | amdgpu_isa::Format::Global | amdgpu_isa::Format::Scratch
    ) {
        return inst.mnemonic().contains("lds");
    }
    // From gfx9 on, plain LDS access does not use M0 (LLVM `ldsRequiresM0Init`: gfx8 and older);
    // the MC descriptors shared with gfx8 still list it. Every family we support is gfx9+.
    if inst.format() != amdgpu_isa::Format::Ds {
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

/// Class of an instruction allowed inside an instrumentation region (inserted run) beyond the
/// simple marker snippets of [`Allowed`] (issue 5: address-trace blocks, scope checks, gfx12
/// clock packing). Register effects are checked separately (writes only reserved SGPRs, M0, SCC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Region {
    /// One of the simple marker-snippet instructions.
    Legacy(Allowed),
    /// SALU arithmetic, logic, move, compare (SOP1/SOP2/SOPC/SOPK).
    Salu,
    /// `s_getreg_b32` of HW_ID / HW_ID1 / HW_ID2 / SHADER_CYCLES (hwreg id).
    Getreg(u8),
    /// `s_get_shader_cycles_u64` (gfx1250).
    ShaderCycles,
    /// `s_branch` / `s_cbranch_{scc,exec,vcc}{z,nz,0,1}` (target must stay in the run).
    Branch,
    /// `s_nop N`, `s_wait_alu`, `s_waitcnt_depctr` (hazard waits; no architectural effect).
    Wait,
    /// `v_readlane_b32 sX, vN, lane` (reads one lane of a VGPR into an SGPR).
    Readlane,
    /// `v_writelane_b32 vN, sX, lane` (saves an SGPR in one lane of a VGPR; `spill` checks it).
    Writelane,
}

/// SALU mnemonic stems whose only effects are their register operands and SCC (ISA manuals,
/// "Scalar ALU Operations"). Instructions with side effects (messages, barriers, sleeps, PC,
/// `s_setreg`, `s_movrel*`, `*_saveexec`, indexing) do not match; `*_saveexec` and EXEC moves are
/// also rejected by the register check.
const SALU_STEMS: &[&str] = &[
    "s_mov_b32",
    "s_mov_b64",
    "s_cmov_b32",
    "s_cmov_b64",
    "s_movk_i32",
    "s_cmovk_i32",
    "s_not_b",
    "s_brev_b",
    "s_bcnt",
    "s_ff0_i32",
    "s_ff1_i32",
    "s_flbit_i32",
    "s_sext_i32",
    "s_bitset",
    "s_and_b",
    "s_or_b",
    "s_xor_b",
    "s_andn2_b",
    "s_orn2_b",
    "s_nand_b",
    "s_nor_b",
    "s_xnor_b",
    "s_and_not1_b",
    "s_or_not1_b",
    "s_lshl_b",
    "s_lshr_b",
    "s_ashr_i",
    "s_lshl1_add",
    "s_lshl2_add",
    "s_lshl3_add",
    "s_lshl4_add",
    "s_bfm_b",
    "s_bfe_",
    "s_mul_i32",
    "s_mul_hi",
    "s_mulk_i32",
    "s_add_u32",
    "s_add_i32",
    "s_addc_u32",
    "s_add_co_",
    "s_addk_",
    "s_sub_u32",
    "s_sub_i32",
    "s_subb_u32",
    "s_sub_co_",
    "s_min_",
    "s_max_",
    "s_cselect_b",
    "s_absdiff_i32",
    "s_abs_i32",
    "s_pack_",
    "s_cmp_",
    "s_cmpk_",
    "s_bitcmp",
    "s_ctz_i32",
    "s_clz_i32",
    "s_cls_i32",
];

/// Whether mnemonic `m` starts with one of [`SALU_STEMS`], remembered per mnemonic (the
/// decoder's mnemonics are static strings: one per opcode, so the answer is kept by address
/// and asked once per opcode and thread, not once per instruction).
fn salu_stem(m: &'static str) -> bool {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static SEEN: RefCell<HashMap<(usize, usize), bool>> = RefCell::new(HashMap::new());
    }
    let key = (m.as_ptr() as usize, m.len());
    if let Some(b) = SEEN.with(|c| c.borrow().get(&key).copied()) {
        return b;
    }
    let b = SALU_STEMS.iter().any(|s| m.starts_with(s));
    SEEN.with(|c| c.borrow_mut().insert(key, b));
    b
}

/// Hardware registers inserted code may read with `s_getreg_b32` (LLVM 22 `SIDefines.h`
/// `Hwreg::Id`): gfx9 `HW_REG_HW_ID` (4); gfx10+ `HW_REG_HW_ID1` (23), `HW_REG_HW_ID2` (24),
/// `HW_REG_SHADER_CYCLES` (29; `_LO` on gfx12) and gfx12+ `HW_REG_SHADER_CYCLES_HI` (30).
pub(crate) fn getreg_allowed(family: amdgpu_isa::Family, id: u8) -> bool {
    use amdgpu_isa::Family;
    match family {
        Family::Gfx9 => id == 4,
        Family::Gfx10 | Family::Gfx11 => matches!(id, 23 | 24 | 29),
        Family::Gfx12 | Family::Gfx1250 => matches!(id, 23 | 24 | 29 | 30),
    }
}

/// The region class of `inst`, or `None` when it may not be inserted at all.
pub(crate) fn region_class(inst: &Instruction) -> Option<Region> {
    region_class_of(inst, allowed(inst))
}

/// [`region_class`] from the registers decoded once (see [`allowed_regs`]).
pub(crate) fn region_class_regs(inst: &Instruction, regs: &crate::program::Regs) -> Option<Region> {
    region_class_of(inst, allowed_regs(inst, regs))
}

/// The snippet class of a [`Region`] ([`allowed`] of its instruction).
pub(crate) fn legacy(class: Option<Region>) -> Option<Allowed> {
    match class {
        Some(Region::Legacy(a)) => Some(a),
        _ => None,
    }
}

/// [`region_class`] of `inst`, whose [`allowed`] class is `snippet`.
fn region_class_of(inst: &Instruction, snippet: Option<Allowed>) -> Option<Region> {
    use amdgpu_isa::{Flow, Format};
    if let Some(a) = snippet {
        return Some(Region::Legacy(a));
    }
    // Memory instructions (the formats `Instruction::memory` describes; asking the format is
    // cheaper than building the access).
    if matches!(
        inst.format(),
        Format::Flat
            | Format::Global
            | Format::Scratch
            | Format::Mubuf
            | Format::Mtbuf
            | Format::Vbuffer
            | Format::Mimg
            | Format::Vimage
            | Format::Vsample
            | Format::Ds
            | Format::Ldsdir
            | Format::Smem
    ) {
        return None;
    }
    let m = inst.mnemonic();
    // gfx1010-gfx1013 LDS/branch/VMEM hazard wait after inserted branches (SOPK encoding).
    if m == "s_waitcnt_vscnt" {
        return Some(Region::Wait);
    }
    match inst.format() {
        Format::Sopp => match m {
            "s_nop" | "s_wait_alu" | "s_waitcnt_depctr" => Some(Region::Wait),
            "s_branch" | "s_cbranch_scc0" | "s_cbranch_scc1" | "s_cbranch_execz"
            | "s_cbranch_execnz" | "s_cbranch_vccz" | "s_cbranch_vccnz" => Some(Region::Branch),
            _ => None,
        },
        Format::Sop1 | Format::Sop2 | Format::Sopc | Format::Sopk => {
            if inst.flow() != Flow::Fallthrough {
                return None;
            }
            if m == "s_getreg_b32" {
                let id = (inst.field("simm16")? & 0x3f) as u8;
                return Some(Region::Getreg(id));
            }
            if m == "s_get_shader_cycles_u64" {
                return Some(Region::ShaderCycles);
            }
            salu_stem(m).then_some(Region::Salu)
        }
        Format::Vop3 if m == "v_readlane_b32" && plain_lane_move(inst) => Some(Region::Readlane),
        Format::Vop3 if m == "v_writelane_b32" && plain_lane_move(inst) => Some(Region::Writelane),
        _ => None,
    }
}

/// A lane move as the rewrite encodes it (`amdgpu_isa::build::v_readlane_b32` /
/// `v_writelane_b32`: only `vdst`, `src0` and `src1` set): 8 bytes, no source modifiers and no
/// `src2`. VOP3 dword 0 bits 8-15 hold `abs`, `op_sel` and `clamp`, dword 1 bits 18-26 `src2`,
/// 27-28 `omod` and 29-31 `neg` (ISA manuals, "VOP3" encoding; AMDGPU `VOP3Instructions.td`).
/// LLVM 22 prints a lane move with any of them set as `.long` (fresh tester, session 13: a
/// flipped `abs` bit of an inserted `v_readlane_b32` was accepted).
fn plain_lane_move(inst: &Instruction) -> bool {
    inst.len() == 8 && inst.word(0) & 0xff00 == 0 && inst.word(1) & 0xfffc_0000 == 0
}

/// Whether `inst` may be part of an inserted run for the aligner: a simple marker-snippet
/// instruction, a region instruction whose SGPR writes all lie in `free` (SGPRs no original
/// instruction of the object uses) and which writes nothing else but M0 and SCC, a
/// `v_writelane_b32` (a lane save, checked by `spill`), or a `v_readfirstlane_b32` (never
/// allowed, but aligned as inserted).
pub(crate) fn insertable(inst: &Instruction, free: &RegSet) -> bool {
    match region_class(inst) {
        // Lane movers are what a faulty snippet most plausibly contains: align them as inserted
        // so that the whitelist reports them instead of a broken alignment.
        None => inst.mnemonic() == "v_readfirstlane_b32",
        Some(Region::Legacy(_) | Region::Writelane) => true,
        Some(_) => writes_only(inst, free),
    }
}

/// [`insertable`] with `free` every SGPR s0..s105, from the registers decoded once.
pub(crate) fn insertable_regs(inst: &Instruction, regs: &crate::program::Regs) -> bool {
    insertable_class(inst, region_class_regs(inst, regs), regs)
}

/// [`insertable_regs`] of `inst`, whose region class is `class`.
pub(crate) fn insertable_class(
    inst: &Instruction,
    class: Option<Region>,
    regs: &crate::program::Regs,
) -> bool {
    match class {
        None => inst.mnemonic() == "v_readfirstlane_b32",
        Some(Region::Legacy(_) | Region::Writelane) => true,
        Some(_) => regs.has(crate::program::Regs::SCALAR_WRITES),
    }
}

/// Every SGPR s0..s105 (built once: callers ask per instruction).
pub(crate) fn every_sgpr() -> RegSet {
    static EVERY: std::sync::OnceLock<RegSet> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        let mut r = RegSet::new();
        (0..106).for_each(|n| r.add_sgpr(n));
        r
    })
}

/// `inst` writes no register outside `sgprs` ∪ {M0, SCC}.
pub(crate) fn writes_only(inst: &Instruction, sgprs: &RegSet) -> bool {
    set_within(&inst.writes(), sgprs)
}

/// The register set `w` holds nothing outside `sgprs` ∪ {M0, SCC}.
pub(crate) fn set_within(w: &RegSet, sgprs: &RegSet) -> bool {
    let mut ok = *sgprs;
    ok.add(SpecialReg::M0);
    ok.add(SpecialReg::Scc);
    w.union(&ok) == ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inserted `s_ttracedata` is allowed only with `simm16` 0 (fresh tester, session 12:
    /// `BF960400` and `BF960004` were accepted).
    #[test]
    fn ttracedata_with_a_nonzero_simm16_may_not_be_inserted() {
        for mcpu in ["gfx942", "gfx1100", "gfx1201"] {
            let t = amdgpu_isa::Target::from_name(mcpu).expect("target");
            let plain = amdgpu_isa::build::s_ttracedata(t).expect("s_ttracedata");
            assert!(matches!(allowed(&plain), Some(Allowed::Ttrace)), "{mcpu}");
            for simm in [0x400u16, 0x4] {
                let mut b = plain.bytes().to_vec();
                b[..2].copy_from_slice(&simm.to_le_bytes());
                let i = amdgpu_isa::decode(&b, t).expect("decodes");
                assert!(allowed(&i).is_none(), "{mcpu} simm16 {simm:#x}");
                assert!(region_class(&i).is_none(), "{mcpu} simm16 {simm:#x}");
            }
        }
    }

    /// An inserted lane move is allowed only as the rewrite encodes it: a modifier, `omod`,
    /// `neg`, `clamp` or `src2` bit set makes it foreign code (fresh tester, session 13).
    #[test]
    fn lane_moves_with_modifier_bits_may_not_be_inserted() {
        use amdgpu_isa::build::{v_readlane_b32, v_writelane_b32, Operand};
        for mcpu in ["gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1201"] {
            let t = amdgpu_isa::Target::from_name(mcpu).expect("target");
            let moves = [
                (
                    v_readlane_b32(t, Operand::Sgpr(14), 2, Operand::Sgpr(13)).expect("readlane"),
                    Region::Readlane,
                ),
                (
                    v_writelane_b32(t, 3, Operand::Sgpr(14), Operand::Sgpr(13)).expect("writelane"),
                    Region::Writelane,
                ),
            ];
            for (plain, class) in moves {
                assert_eq!(region_class(&plain), Some(class), "{mcpu} {plain}");
                // abs (8-10), op_sel (11-14), clamp (15); src2 (32+18), omod (32+27), neg (32+29..31).
                for bit in [8, 10, 11, 15, 50, 59, 60, 61, 63] {
                    let mut b = plain.bytes().to_vec();
                    b[bit / 8] ^= 1 << (bit % 8);
                    let Ok(i) = amdgpu_isa::decode(&b, t) else {
                        continue;
                    };
                    assert!(region_class(&i).is_none(), "{mcpu} {plain} bit {bit}");
                }
            }
        }
    }
}
