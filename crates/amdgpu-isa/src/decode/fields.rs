//! What a decoded instruction is (part of the decoder, `decode.rs`): length, bytes, mnemonic,
//! encoding fields, format, class, control flow, branch target, literal, special role, and
//! re-encoding with a new branch target or literal.

use super::*;

impl Instruction {
    /// Length in bytes (4, 8, 12, 16, 20).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Its decode facts apart from the bytes (see [`Shape`]).
    pub fn shape(&self) -> Shape {
        Shape {
            target: self.target,
            fmt: self.fmt,
            row: self.row,
            len: self.len,
            lit: self.lit,
            other_mode: self.other_mode,
            pair: self.pair,
        }
    }

    /// The instruction of the same [`Shape`] (format, opcode row, length, literal position)
    /// whose encoding is the first [`Instruction::len`] bytes of `bytes` (bytes past the end of
    /// `bytes` read as 0). No decoding: the caller guarantees that `bytes` start with an
    /// encoding of this shape, e.g. because they are the bytes this instruction (or one of its
    /// shape) was decoded from, at the same place; then the result equals
    /// `decode(bytes, self.target())` in every field. For callers that store one instruction per
    /// distinct shape and only offsets into the code per instruction.
    #[inline]
    pub fn with_bytes(&self, bytes: &[u8]) -> Instruction {
        Instruction {
            raw: copy_raw(bytes, usize::from(self.len)),
            ..*self
        }
    }

    /// The encoding, byte-identical to the decoded input (or the built instruction).
    pub fn bytes(&self) -> &[u8] {
        &self.raw[..usize::from(self.len)]
    }

    /// Dword `i` of the encoding (0 past the end).
    pub fn word(&self, i: usize) -> u32 {
        word(self.bytes(), i)
    }

    /// The target this instruction was decoded for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// LLVM mnemonic (`"s_cbranch_scc1"`, `"v_add_f32_e32"`); for VOPD the X half.
    pub fn mnemonic(&self) -> &'static str {
        self.pair_def().map_or(self.row.mnemonic, |p| p.mnemonic)
    }

    /// The two-part (VOP3PX2) definition, if this is one.
    pub(crate) fn pair_def(&self) -> Option<&'static PairDef> {
        let i = usize::from(self.pair).checked_sub(1)?;
        self.target.def().pairs.get(i)
    }

    /// Part `i` (0: the scale-load prefix, bytes 0..8; 1: the MFMA/WMMA, bytes 8..16) of a
    /// two-part instruction, decoded alone.
    pub(crate) fn pair_part(&self, i: usize) -> Option<Instruction> {
        self.pair_def()?;
        decode_at(self.raw.get(i * 8..i * 8 + 8)?, self.target).ok()
    }

    /// VOPD/VOPD3: the Y half's mnemonic.
    pub fn mnemonic_y(&self) -> Option<&'static str> {
        (!self.row.mnemonic_y.is_empty()).then_some(self.row.mnemonic_y)
    }

    /// LLVM MC opcode name (`"S_ENDPGM_gfx11"`), for diagnostics.
    pub fn llvm_opcode_name(&self) -> &'static str {
        self.pair_def().map_or(self.row.mc_name, |p| p.mc_name)
    }

    /// LLVM `TSFlags` of the MC opcode (bit meanings: LLVM `SIDefines.h`, `SIInstrFlags`).
    pub fn llvm_tsflags(&self) -> u64 {
        self.row.tsflags
    }

    /// Value of the format field `name` (e.g. `"src0"`, `"simm16"`), if the format has it.
    pub fn field(&self, name: &str) -> Option<u32> {
        self.fmt
            .fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| field_bits(self.bytes(), f.dw, f.hi, f.lo))
    }

    /// Encoding format; FLAT-family instructions report Flat/Global/Scratch.
    pub fn format(&self) -> Format {
        match self.fmt.format {
            Format::Flat => {
                let m = self.row.mnemonic;
                if m.starts_with("global_") {
                    Format::Global
                } else if m.starts_with("scratch_") {
                    Format::Scratch
                } else {
                    Format::Flat
                }
            }
            f => f,
        }
    }

    /// Instruction class.
    pub fn class(&self) -> InstClass {
        match self.format() {
            Format::Sop1 | Format::Sop2 | Format::Sopk | Format::Sopc | Format::Sopp => {
                if self.flow() == Flow::Fallthrough {
                    InstClass::Salu
                } else {
                    InstClass::Branch
                }
            }
            Format::Smem => InstClass::Smem,
            Format::Vop1
            | Format::Vop2
            | Format::Vopc
            | Format::Vop3
            | Format::Vop3p
            | Format::Vopd
            | Format::Vopd3
            | Format::Vintrp
            | Format::Vinterp => InstClass::Valu,
            Format::Ds | Format::Ldsdir => InstClass::Ds,
            Format::Flat => InstClass::Flat,
            Format::Global => InstClass::Global,
            Format::Scratch => InstClass::Scratch,
            Format::Mubuf | Format::Mtbuf | Format::Vbuffer => InstClass::Buffer,
            Format::Mimg | Format::Vimage | Format::Vsample => InstClass::Image,
            Format::Exp => InstClass::Export,
        }
    }

    /// Control-flow effect (override list first, then LLVM's branch/conditional flags).
    pub fn flow(&self) -> Flow {
        if let Some(f) = self.row.flow {
            return f;
        }
        if self.row.mcid & MCID_BRANCH != 0 && self.row.mcid & MCID_INDIRECT == 0 {
            return Flow::Branch {
                conditional: self.row.mcid & MCID_COND != 0,
            };
        }
        Flow::Fallthrough
    }

    fn has_simm16_target(&self) -> bool {
        matches!(self.fmt.format, Format::Sopp | Format::Sopk)
            && (matches!(self.flow(), Flow::Branch { .. }) || self.row.special == Special::Call)
    }

    /// Target of a PC-relative SOPP branch or `s_call_b64`: `pc + 4 + simm16 * 4` (bytes;
    /// ISA manuals, "SOPP"/"SOPK" branch description). `pc` is this instruction's address.
    pub fn branch_target(&self, pc: u64) -> Option<u64> {
        if !self.has_simm16_target() {
            return None;
        }
        let d = sext16(self.word(0) & 0xffff) * 4;
        Some(pc.wrapping_add(4).wrapping_add(d as u64))
    }

    /// Copy with the simm16 branch displacement changed so that the branch at `pc` reaches
    /// `target`. Errors: not a branch, misaligned, or out of the simm16 range (±128 KiB).
    pub fn with_branch_target(&self, pc: u64, target: u64) -> Result<Instruction, EncodeError> {
        if !self.has_simm16_target() {
            return Err(EncodeError::NotABranch);
        }
        let delta = (target as i64).wrapping_sub(pc.wrapping_add(4) as i64);
        if delta % 4 != 0 {
            return Err(EncodeError::Misaligned { pc, target });
        }
        let dwords = delta / 4;
        let v = i16::try_from(dwords).map_err(|_| EncodeError::BranchOutOfRange { dwords })?;
        let mut out = *self;
        out.raw[..2].copy_from_slice(&v.to_le_bytes());
        Ok(out)
    }

    /// The literal constant (32-bit, or 64-bit on gfx1250 `lit64` operands), if any.
    pub fn literal(&self) -> Option<u64> {
        let (off, n) = self.lit?;
        let mut b = [0u8; 8];
        let (o, n) = (usize::from(off), usize::from(n).min(8));
        b[..n].copy_from_slice(self.raw.get(o..o + n)?);
        Some(u64::from_le_bytes(b))
    }

    /// Copy with the literal replaced; errors if there is no literal or the value is too wide.
    pub fn with_literal(&self, value: u64) -> Result<Instruction, EncodeError> {
        let (off, n) = self.lit.ok_or(EncodeError::NoLiteral)?;
        let n = usize::from(n);
        if n < 8 && value >> (8 * n) != 0 {
            return Err(EncodeError::LiteralTooWide { value, bytes: n });
        }
        let mut out = *self;
        let o = usize::from(off);
        out.raw[o..o + n].copy_from_slice(&value.to_le_bytes()[..n]);
        Ok(out)
    }

    /// The opcode exists only in the other 16-bit mode's table: LLVM 22 in this instruction's
    /// mode rejects the word (llvm-objdump prints `.long`), e.g. gfx12/gfx1250 `v_mov_b16`
    /// (real-true16 only) decoded in fake16 mode. Code containing such instructions was
    /// compiled for the other mode; [`Target::with_true16`] selects it.
    pub fn decoded_in_other_mode(&self) -> bool {
        self.other_mode
    }

    /// Does the operand in format field `field` take a 16-bit VGPR half in a 32-bit
    /// VOP1/VOP2/VOPC encoding? There (gfx11+, either 16-bit mode) bit 7 of the VGPR number
    /// selects the high half and only v0..v127 are addressable (LLVM `VGPR_16_Lo128`; fake16
    /// prints `v130` for `v2.h`). Facts from the real-true16 opcode table: width 0.
    fn e32_half(&self, field: u8) -> bool {
        half_operand(self.e32_half_row(), field)
    }

    /// The real-true16 opcode row that says which operands of a 32-bit VOP1/VOP2/VOPC encoding
    /// are 16-bit halves (gfx11+; see [`Instruction::e32_half`]), `None` elsewhere.
    pub(super) fn e32_half_row(&self) -> Option<&'static OpRow> {
        if self.target.family() < Family::Gfx11
            || !matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc)
        {
            return None;
        }
        let fi = self.format_index()?;
        if self.target.true16() != self.other_mode {
            Some(self.row)
        } else {
            t16_row(self.target, fi as u8, opcode_key(self.fmt, self.bytes()))
        }
    }

    /// Index of this instruction's format in its target's format table (`fmt` points into it).
    fn format_index(&self) -> Option<usize> {
        let formats = self.target.def().formats;
        let size = std::mem::size_of::<FormatDef>();
        let off = (self.fmt as *const FormatDef as usize).checked_sub(formats.as_ptr() as usize)?;
        let fi = off / size;
        (off % size == 0 && fi < formats.len() && std::ptr::eq(&formats[fi], self.fmt))
            .then_some(fi)
    }

    /// Registers of a DPP/SDWA instruction's real src0 (ISA manuals, "VOP_DPP"/"VOP_DPP8"/
    /// "VOP_SDWA"/"VOP3 DPP" microcode formats): VOP1/VOP2/VOPC with src0 = 250 (DPP16),
    /// 233/234 (DPP8, gfx10+) or 249 (SDWA, gfx9/gfx10) take it from dword 1 bits 7:0 (an SGPR
    /// when SDWA bit 23 `s0` is set); gfx11+ VOP3/VOP3P DPP from dword 2 bits 7:0.
    pub(super) fn dpp_src0_regs(&self, set: &mut RegSet) {
        let fam = self.target.family();
        let e32 = matches!(self.fmt.format, Format::Vop1 | Format::Vop2 | Format::Vopc);
        let vop3 = matches!(self.fmt.format, Format::Vop3 | Format::Vop3p) && fam >= Family::Gfx11;
        // Without a DPP/SDWA dword only the gfx9/gfx10 SDWA SGPR form below could add anything
        // before the length check: skip the field lookups for every other instruction.
        let extra_dwords = self.len() > usize::from(self.fmt.dwords) * 4;
        if !(e32 || vop3) || !(extra_dwords || (e32 && fam <= Family::Gfx10)) {
            return;
        }
        let Some((fi, o)) = self.operand_of("src0") else {
            return;
        };
        let f = &self.fmt.fields[fi];
        let src0 = field_bits(self.bytes(), f.dw, f.hi, f.lo);
        let n = match src0 {
            250 | 233 | 234 if e32 && (src0 == 250 || fam >= Family::Gfx10) => self.word(1) & 0xff,
            249 if e32 && fam <= Family::Gfx10 => {
                if self.word(1) & (1 << 23) != 0 {
                    set.add_scalar(self.target.def().sregs, (self.word(1) & 0xff) as u16, 1);
                    return;
                }
                self.word(1) & 0xff
            }
            250 | 233 | 234 if vop3 => self.word(2) & 0xff,
            _ => return,
        } as u16;
        if !extra_dwords {
            return;
        }
        let n = if self.e32_half(fi as u8) { n & 0x7f } else { n };
        for i in 0..u16::from(o.width.max(1)) {
            set.add_vgpr(n + i);
        }
    }

    /// `*_f8f6f4` matrix source widths in VGPRs from the operand formats. gfx950
    /// `v_mfma_*_f8f6f4`: `cbsz` (dword0 bits 10:8) for src0, `blgp` (dword1 bits 31:29) for
    /// src1; FP8/BF8 (0, 1) take 8 registers, FP6/BF6 (2, 3) 6, FP4 (4) 4 (LLVM 22 prints
    /// other values with 8; AMD CDNA4 ISA, "MFMA with FP8/FP6/FP4 operands").
    /// gfx1250 `v_wmma_*_f8f6f4`: `matrix_a_fmt` (dword0 bits 13:11) for src0, `matrix_b_fmt`
    /// (dword0 bit 14, dword1 bits 28:27) for src1: 16, 12 or 8 VGPRs (llvm-mc-22).
    pub(crate) fn f8f6f4_width(&self, field: &str) -> Option<u8> {
        let m = self.row.mnemonic;
        if self.fmt.format != Format::Vop3p || !m.ends_with("_f8f6f4") {
            return None;
        }
        if m.starts_with("v_wmma_") && self.target.family() == Family::Gfx1250 {
            let f = match field {
                "src0" => (self.word(0) >> 11) & 7,
                "src1" => ((self.word(0) >> 12) & 4) | ((self.word(1) >> 27) & 3),
                _ => return None,
            };
            return Some(match f {
                2 | 3 => 12,
                4 => 8,
                _ => 16,
            });
        }
        if !m.starts_with("v_mfma_") {
            return None;
        }
        let f = match field {
            "src0" => (self.word(0) >> 8) & 7,
            "src1" => self.word(1) >> 29,
            _ => return None,
        };
        Some(match f {
            2 | 3 => 6,
            4 => 4,
            _ => 8,
        })
    }

    /// The recognised special instruction kind.
    pub fn special(&self) -> Special {
        match self.row.special {
            Special::TtraceDataImm(_) => Special::TtraceDataImm((self.word(0) & 0xff) as u8),
            s => s,
        }
    }

    /// gfx908+ MFMA operand in an AGPR by the encoding's `acc` bits (dword1 bits 27/28 for
    /// src0/src1, dword0 bit 15 `acc_cd` for vdst/src2; LLVM `VOP3Pe_MAI`, per-opcode facts
    /// probed into the `mods` column).
    pub(crate) fn mai_acc(&self, field: &str) -> bool {
        if self.row.mods.is_empty() {
            return false;
        }
        let slot = match field {
            "src0" => 0,
            "src1" => 1,
            "src2" => 2,
            "vdst" => 3,
            _ => return false,
        };
        self.row.mods.iter().any(|m| match *m {
            Mod::AccCd(b) => b & (1 << slot) != 0 && self.word(0) & (1 << 15) != 0,
            Mod::Acc(b) => {
                slot < 2 && b & (1 << slot) != 0 && self.word(1) & (1 << (27 + slot)) != 0
            }
            _ => false,
        })
    }
}
