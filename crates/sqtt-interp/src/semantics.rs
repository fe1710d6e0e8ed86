//! The instruction semantics table of the interpreter.
//!
//! Sources: AMD "Vega" (gfx9) / "CDNA3" ISA manuals, chapters "Scalar ALU Operations",
//! "Program Flow Control" and "Instructions" (SOP1/SOP2/SOPC/SOPK/SOPP/VOP3 opcode tables);
//! AMD "RDNA2" / "RDNA3" / "RDNA4" ISA manuals, same chapters, plus "Hardware registers"
//! (HW_ID1/HW_ID2, SHADER_CYCLES); LLVM 22 `SIDefines.h` (hwreg ids) and the scalar operand
//! encodings of LLVM's disassembler (`isa-tables/sregs/*.tsv`).
//!
//! Scalar operand encodings (8-bit `ssrc`, 7-bit `sdst`): 0..=101 `s0..s101` (gfx9) /
//! 0..=105 `s0..s105` (gfx10+), 106/107 `vcc_lo`/`vcc_hi`, 124 `m0` on gfx9/gfx10 (`null` on
//! gfx11+), 125 `null` on gfx10 (`m0` on gfx11+), 126/127 `exec_lo`/`exec_hi`, 128..=192 integers
//! 0..=64, 193..=208 integers -1..=-16, 240..=248 float constants (0.5, -0.5, 1.0, -1.0, 2.0, -2.0,
//! 4.0, -4.0, 1/(2*pi)), 251 `src_vccz`, 252 `src_execz`, 253 `src_scc`, 255 32-bit literal,
//! 254 gfx1250 64-bit literal. TTMPs, FLAT_SCRATCH, XNACK_MASK, apertures and LDS-direct are
//! rejected with [`crate::InterpError::UnsupportedOperand`].
use amdgpu_isa::{Family, Instruction, Special};

use crate::{InterpError, Wave};

/// Every supported mnemonic with its semantics (SCC = scalar condition code; `D` destination,
/// `S0`/`S1` sources). Mnemonics are LLVM 22 spellings; gfx12 renames are listed separately.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("s_nop", "no-op (wait states are not modelled)"),
    ("s_waitcnt", "no-op"),
    ("s_wait_alu", "no-op (gfx12)"),
    ("s_waitcnt_depctr", "no-op (gfx10/gfx11)"),
    ("s_delay_alu", "no-op (gfx11+)"),
    ("s_ttracedata", "append M0 to shaderdata"),
    (
        "s_ttracedata_imm",
        "append simm16[7:0] to shaderdata (gfx10+)",
    ),
    ("s_endpgm", "stop"),
    ("s_mov_b32", "D = S0"),
    ("s_mov_b64", "D[63:0] = S0[63:0] (SGPR pair, VCC, EXEC)"),
    (
        "s_get_shader_cycles_u64",
        "D[63:0] = shader_cycles (gfx1250)",
    ),
    (
        "s_getreg_b32",
        "D = hwreg[id][offset +: size]; simm16 = id | offset << 6 | (size - 1) << 11",
    ),
    ("s_and_b32", "D = S0 & S1; SCC = D != 0"),
    ("s_or_b32", "D = S0 | S1; SCC = D != 0"),
    ("s_lshr_b32", "D = S0 >> S1[4:0]; SCC = D != 0"),
    ("s_lshl_b32", "D = S0 << S1[4:0]; SCC = D != 0"),
    ("s_mul_i32", "D = (S0 * S1)[31:0]; SCC unchanged"),
    (
        "s_mul_hi_i32",
        "D = (sext(S0) * sext(S1))[63:32]; SCC unchanged",
    ),
    (
        "s_bfe_u32",
        "D = (S0 >> S1[4:0]) & ((1 << S1[22:16]) - 1); SCC = D != 0",
    ),
    ("s_add_u32", "D = S0 + S1; SCC = carry out"),
    ("s_add_co_u32", "gfx12 name of s_add_u32"),
    ("s_addc_u32", "D = S0 + S1 + SCC; SCC = carry out"),
    ("s_add_co_ci_u32", "gfx12 name of s_addc_u32"),
    ("s_sub_u32", "D = S0 - S1; SCC = borrow out (S1 > S0)"),
    ("s_sub_co_u32", "gfx12 name of s_sub_u32"),
    (
        "s_subb_u32",
        "D = S0 - S1 - SCC; SCC = borrow out (S1 + SCC > S0)",
    ),
    ("s_sub_co_ci_u32", "gfx12 name of s_subb_u32"),
    ("s_add_i32", "D = S0 + S1; SCC = signed overflow"),
    ("s_add_co_i32", "gfx12 name of s_add_i32"),
    ("s_sub_i32", "D = S0 - S1; SCC = signed overflow"),
    ("s_sub_co_i32", "gfx12 name of s_sub_i32"),
    ("s_abs_i32", "D = |S0| (0x80000000 stays); SCC = D != 0"),
    (
        "s_getpc_b64",
        "D[63:0] = PC + 4 (the next instruction's address)",
    ),
    ("s_get_pc_i64", "gfx1250 name of s_getpc_b64"),
    ("s_setpc_b64", "PC = S0[63:0]"),
    ("s_set_pc_i64", "gfx1250 name of s_setpc_b64"),
    (
        "s_swappc_b64",
        "D[63:0] = PC + 4; PC = S0[63:0] (S0 read before D is written)",
    ),
    ("s_swap_pc_i64", "gfx1250 name of s_swappc_b64"),
    (
        "s_barrier",
        "no-op: one model wave is the whole work-group, so every barrier completes at once",
    ),
    (
        "s_barrier_signal",
        "no-op (gfx12 split barrier, see s_barrier)",
    ),
    (
        "s_barrier_wait",
        "no-op (gfx12 split barrier, see s_barrier)",
    ),
    ("s_cselect_b32", "D = SCC ? S0 : S1"),
    ("s_cmp_eq_u32", "SCC = S0 == S1"),
    ("s_cmp_lg_u32", "SCC = S0 != S1"),
    ("s_cmp_lt_u32", "SCC = S0 < S1 (unsigned)"),
    ("s_cmp_le_u32", "SCC = S0 <= S1 (unsigned)"),
    ("s_cmp_gt_u32", "SCC = S0 > S1 (unsigned)"),
    ("s_cmp_ge_u32", "SCC = S0 >= S1 (unsigned)"),
    ("s_cmp_eq_i32", "SCC = S0 == S1"),
    ("s_cmp_lg_i32", "SCC = S0 != S1"),
    ("s_cmp_lt_i32", "SCC = S0 < S1 (signed)"),
    ("s_cmp_le_i32", "SCC = S0 <= S1 (signed)"),
    ("s_cmp_gt_i32", "SCC = S0 > S1 (signed)"),
    ("s_cmp_ge_i32", "SCC = S0 >= S1 (signed)"),
    (
        "s_cmpk_eq_u32",
        "SCC = S0 == zext(simm16) (SOPK: S0 in the sdst field; gfx9..gfx11)",
    ),
    (
        "s_cmpk_lg_u32",
        "SCC = S0 != zext(simm16) (SOPK: S0 in the sdst field; gfx9..gfx11)",
    ),
    ("s_bitcmp0_b32", "SCC = S0[S1[4:0]] == 0"),
    ("s_bitcmp1_b32", "SCC = S0[S1[4:0]] == 1"),
    ("s_branch", "PC = PC + 4 + simm16 * 4"),
    ("s_cbranch_scc0", "branch if !SCC"),
    ("s_cbranch_scc1", "branch if SCC"),
    ("s_cbranch_execz", "branch if EXEC (wave lanes) == 0"),
    ("s_cbranch_execnz", "branch if EXEC (wave lanes) != 0"),
    ("s_cbranch_vccz", "branch if VCC (wave lanes) == 0"),
    ("s_cbranch_vccnz", "branch if VCC (wave lanes) != 0"),
    (
        "v_readlane_b32",
        "D(SGPR) = VGPR S0 of lane (S1 mod wave_size); ignores EXEC",
    ),
    (
        "v_writelane_b32",
        "VGPR D of lane (S1 mod wave_size) = S0 (scalar); ignores EXEC",
    ),
];

/// Whether `mnemonic` (LLVM spelling) is in [`SUPPORTED`]. Other `s_wait*`/`s_waitcnt*` counter
/// waits that `amdgpu-isa` classifies as waits are executed as no-ops too.
pub fn is_supported(mnemonic: &str) -> bool {
    SUPPORTED.iter().any(|(m, _)| *m == mnemonic)
}

/// Position of the instruction being executed.
#[derive(Clone, Copy)]
pub(crate) struct At {
    pub pc: u64,
    pub offset: usize,
}

/// What happens after an instruction.
pub(crate) enum Next {
    Fallthrough,
    Jump(u64),
    End,
}

/// A named scalar register.
#[derive(Clone, Copy)]
enum SReg {
    Sgpr(usize),
    VccLo,
    VccHi,
    M0,
    Null,
    ExecLo,
    ExecHi,
}

fn sreg(family: Family, enc: u32) -> Option<SReg> {
    let max_sgpr = if family == Family::Gfx9 { 101 } else { 105 };
    let pre11 = matches!(family, Family::Gfx9 | Family::Gfx10);
    match enc {
        e if e <= max_sgpr => Some(SReg::Sgpr(e as usize)),
        106 => Some(SReg::VccLo),
        107 => Some(SReg::VccHi),
        124 if pre11 => Some(SReg::M0),
        124 => Some(SReg::Null),
        125 if family == Family::Gfx10 => Some(SReg::Null),
        125 if !pre11 => Some(SReg::M0),
        126 => Some(SReg::ExecLo),
        127 => Some(SReg::ExecHi),
        _ => None,
    }
}

/// f32 bit patterns of inline constants 240..=248 (0.5, -0.5, 1, -1, 2, -2, 4, -4, 1/(2*pi)).
const F32_INLINE: [u32; 9] = [
    0x3f00_0000,
    0xbf00_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x4000_0000,
    0xc000_0000,
    0x4080_0000,
    0xc080_0000,
    0x3e22_f983,
];

/// f64 bit patterns of the same constants for 64-bit operands.
const F64_INLINE: [u64; 9] = [
    0x3fe0_0000_0000_0000,
    0xbfe0_0000_0000_0000,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x4000_0000_0000_0000,
    0xc000_0000_0000_0000,
    0x4010_0000_0000_0000,
    0xc010_0000_0000_0000,
    0x3fc4_5f30_6dc9_c882,
];

/// Execution context of one instruction.
struct Cx<'a> {
    w: &'a mut Wave,
    i: &'a Instruction,
    at: At,
}

impl Cx<'_> {
    fn family(&self) -> Family {
        self.w.target.family()
    }

    fn bad(&self, field: &'static str, value: u32, why: &'static str) -> InterpError {
        InterpError::UnsupportedOperand {
            pc: self.at.pc,
            offset: self.at.offset,
            mnemonic: self.i.mnemonic(),
            field,
            value,
            why,
        }
    }

    fn field(&self, name: &'static str) -> Result<u32, InterpError> {
        self.i.field(name).ok_or_else(|| InterpError::MissingField {
            pc: self.at.pc,
            offset: self.at.offset,
            mnemonic: self.i.mnemonic(),
            field: name,
        })
    }

    fn literal(&self, field: &'static str, enc: u32) -> Result<u64, InterpError> {
        self.i
            .literal()
            .ok_or_else(|| self.bad(field, enc, "literal operand without literal dword"))
    }

    /// Reads a 32-bit scalar source operand from field `name`.
    fn src32(&self, name: &'static str) -> Result<u32, InterpError> {
        let enc = self.field(name)?;
        let lanes = self.w.lane_mask();
        if let Some(r) = sreg(self.family(), enc) {
            return Ok(match r {
                SReg::Sgpr(n) => self.w.sgpr[n],
                SReg::VccLo => self.w.vcc as u32,
                SReg::VccHi => (self.w.vcc >> 32) as u32,
                SReg::M0 => self.w.m0,
                SReg::Null => 0,
                SReg::ExecLo => self.w.exec as u32,
                SReg::ExecHi => ((self.w.exec & lanes) >> 32) as u32,
            });
        }
        match enc {
            128..=192 => Ok(enc - 128),
            193..=208 => Ok((192i32 - enc as i32) as u32),
            240..=248 => Ok(F32_INLINE[(enc - 240) as usize]),
            251 => Ok(u32::from(self.w.vcc & lanes == 0)),
            252 => Ok(u32::from(self.w.exec & lanes == 0)),
            253 => Ok(u32::from(self.w.scc)),
            255 => Ok(self.literal(name, enc)? as u32),
            254 if self.family() == Family::Gfx1250 => {
                let v = self.literal(name, enc)?;
                u32::try_from(v)
                    .map_err(|_| self.bad(name, enc, "64-bit literal on a 32-bit operand"))
            }
            _ => Err(self.bad(name, enc, "scalar source not modelled")),
        }
    }

    /// Reads a 64-bit scalar source operand (register pair) from field `name`.
    fn src64(&self, name: &'static str) -> Result<u64, InterpError> {
        let enc = self.field(name)?;
        let lanes = self.w.lane_mask();
        match sreg(self.family(), enc) {
            Some(SReg::Sgpr(n)) => {
                if n % 2 != 0 || n + 1 >= crate::NUM_SGPRS {
                    return Err(self.bad(name, enc, "64-bit SGPR operand must be an aligned pair"));
                }
                return Ok(u64::from(self.w.sgpr[n]) | u64::from(self.w.sgpr[n + 1]) << 32);
            }
            Some(SReg::VccLo) => return Ok(self.w.vcc),
            Some(SReg::ExecLo) => return Ok(self.w.exec & lanes),
            Some(SReg::Null) => return Ok(0),
            Some(_) => return Err(self.bad(name, enc, "not a 64-bit register pair")),
            None => {}
        }
        match enc {
            128..=192 => Ok(u64::from(enc - 128)),
            193..=208 => Ok((192i64 - i64::from(enc)) as u64),
            240..=248 => Ok(F64_INLINE[(enc - 240) as usize]),
            253 => Ok(u64::from(self.w.scc)),
            255 => {
                let v = self.literal(name, enc)? as u32;
                // Whether hardware zero- or sign-extends depends on the opcode's signedness
                // (LLVM SIInstrInfo::isOperandLegal); only unambiguous values are accepted.
                if v & 0x8000_0000 != 0 {
                    return Err(self.bad(
                        name,
                        enc,
                        "32-bit literal with bit 31 set on a 64-bit operand",
                    ));
                }
                Ok(u64::from(v))
            }
            254 if self.family() == Family::Gfx1250 => self.literal(name, enc),
            _ => Err(self.bad(name, enc, "scalar source not modelled")),
        }
    }

    /// Writes a 32-bit scalar destination named by field `name`.
    fn dst32(&mut self, name: &'static str, v: u32) -> Result<(), InterpError> {
        let enc = self.field(name)?;
        let wave64 = self.w.wave_size == 64;
        match sreg(self.family(), enc) {
            Some(SReg::Sgpr(n)) => self.w.sgpr[n] = v,
            Some(SReg::VccLo) => self.w.vcc = (self.w.vcc & !0xffff_ffff) | u64::from(v),
            Some(SReg::VccHi) => self.w.vcc = (self.w.vcc & 0xffff_ffff) | u64::from(v) << 32,
            Some(SReg::M0) => self.w.m0 = v,
            Some(SReg::Null) => {}
            Some(SReg::ExecLo) => self.w.exec = (self.w.exec & !0xffff_ffff) | u64::from(v),
            Some(SReg::ExecHi) if wave64 => {
                self.w.exec = (self.w.exec & 0xffff_ffff) | u64::from(v) << 32
            }
            // wave32: EXEC_HI is not part of the wave (model assumption, see crate docs).
            Some(SReg::ExecHi) => {}
            None => return Err(self.bad(name, enc, "scalar destination not modelled")),
        }
        Ok(())
    }

    /// Writes a 64-bit scalar destination (register pair) named by field `name`.
    fn dst64(&mut self, name: &'static str, v: u64) -> Result<(), InterpError> {
        let enc = self.field(name)?;
        let lanes = self.w.lane_mask();
        match sreg(self.family(), enc) {
            Some(SReg::Sgpr(n)) if n % 2 == 0 && n + 1 < crate::NUM_SGPRS => {
                self.w.sgpr[n] = v as u32;
                self.w.sgpr[n + 1] = (v >> 32) as u32;
            }
            Some(SReg::VccLo) => self.w.vcc = v,
            Some(SReg::ExecLo) => self.w.exec = v & lanes,
            Some(SReg::Null) => {}
            _ => return Err(self.bad(name, enc, "not a writable 64-bit register pair")),
        }
        Ok(())
    }

    /// Value of hardware register `id` as `s_getreg_b32` sees it.
    fn hwreg(&self, id: u8) -> Result<u32, InterpError> {
        let c = self.w.shader_cycles;
        match (self.family(), id) {
            // gfx10.3/gfx11 HW_REG_SHADER_CYCLES: 20-bit free-running counter.
            (Family::Gfx10 | Family::Gfx11, 29) => Ok((c & 0xf_ffff) as u32),
            // gfx12 HW_REG_SHADER_CYCLES_LO / _HI.
            (Family::Gfx12 | Family::Gfx1250, 29) => Ok(c as u32),
            (Family::Gfx12 | Family::Gfx1250, 30) => Ok((c >> 32) as u32),
            _ => self
                .w
                .hwreg
                .get(&id)
                .copied()
                .ok_or(InterpError::UninitialisedHwreg {
                    pc: self.at.pc,
                    offset: self.at.offset,
                    id,
                }),
        }
    }

    fn branch(&self, taken: bool) -> Result<Next, InterpError> {
        if !taken {
            return Ok(Next::Fallthrough);
        }
        let t = self
            .i
            .branch_target(self.at.pc)
            .ok_or_else(|| InterpError::MissingField {
                pc: self.at.pc,
                offset: self.at.offset,
                mnemonic: self.i.mnemonic(),
                field: "simm16",
            })?;
        Ok(Next::Jump(t))
    }

    fn sop2(&mut self, f: impl FnOnce(u32, u32, bool) -> (u32, bool)) -> Result<Next, InterpError> {
        let a = self.src32("ssrc0")?;
        let b = self.src32("ssrc1")?;
        let (d, scc) = f(a, b, self.w.scc);
        self.dst32("sdst", d)?;
        self.w.scc = scc;
        Ok(Next::Fallthrough)
    }

    /// SOPK compare: the register operand is in the `sdst` field, the immediate is zero-extended.
    fn sopk_cmp(&mut self, f: impl FnOnce(u32, u32) -> bool) -> Result<Next, InterpError> {
        let a = self.src32("sdst")?;
        let b = self.field("simm16")? & 0xffff;
        self.w.scc = f(a, b);
        Ok(Next::Fallthrough)
    }

    fn sopc(&mut self, f: impl FnOnce(u32, u32) -> bool) -> Result<Next, InterpError> {
        let a = self.src32("ssrc0")?;
        let b = self.src32("ssrc1")?;
        self.w.scc = f(a, b);
        Ok(Next::Fallthrough)
    }
}

fn low_bits(v: u32, n: u32) -> u32 {
    if n >= 32 {
        v
    } else {
        v & ((1u32 << n) - 1)
    }
}

/// Executes one instruction. Appends shaderdata records to `trace`.
pub(crate) fn step(
    w: &mut Wave,
    i: &Instruction,
    at: At,
    trace: &mut Vec<u32>,
) -> Result<Next, InterpError> {
    let mut cx = Cx { w, i, at };
    let lanes = cx.w.lane_mask();
    let m = i.mnemonic();
    match m {
        "s_nop" | "s_waitcnt" | "s_wait_alu" | "s_waitcnt_depctr" | "s_delay_alu" => {
            Ok(Next::Fallthrough)
        }
        "s_barrier" | "s_barrier_signal" | "s_barrier_wait" => Ok(Next::Fallthrough),
        "s_ttracedata" => {
            trace.push(cx.w.m0);
            Ok(Next::Fallthrough)
        }
        "s_ttracedata_imm" => {
            trace.push(cx.field("simm16")? & 0xff);
            Ok(Next::Fallthrough)
        }
        "s_endpgm" => Ok(Next::End),
        "s_mov_b32" => {
            let v = cx.src32("ssrc0")?;
            cx.dst32("sdst", v)?;
            Ok(Next::Fallthrough)
        }
        "s_mov_b64" => {
            let v = cx.src64("ssrc0")?;
            cx.dst64("sdst", v)?;
            Ok(Next::Fallthrough)
        }
        "s_get_shader_cycles_u64" => {
            let c = cx.w.shader_cycles;
            cx.dst64("sdst", c)?;
            Ok(Next::Fallthrough)
        }
        "s_getreg_b32" => {
            let imm = cx.field("simm16")?;
            let id = (imm & 0x3f) as u8;
            let offset = (imm >> 6) & 0x1f;
            let size = ((imm >> 11) & 0x1f) + 1;
            let v = low_bits(cx.hwreg(id)? >> offset, size);
            cx.dst32("sdst", v)?;
            Ok(Next::Fallthrough)
        }
        "s_and_b32" => cx.sop2(|a, b, _| (a & b, a & b != 0)),
        "s_or_b32" => cx.sop2(|a, b, _| (a | b, a | b != 0)),
        "s_lshr_b32" => cx.sop2(|a, b, _| (a >> (b & 31), a >> (b & 31) != 0)),
        "s_lshl_b32" => cx.sop2(|a, b, _| (a << (b & 31), a << (b & 31) != 0)),
        "s_mul_i32" => cx.sop2(|a, b, scc| (a.wrapping_mul(b), scc)),
        "s_mul_hi_i32" => cx.sop2(|a, b, scc| {
            let p = i64::from(a as i32) * i64::from(b as i32);
            ((p >> 32) as u32, scc)
        }),
        "s_bfe_u32" => cx.sop2(|a, b, _| {
            let d = low_bits(a >> (b & 31), (b >> 16) & 0x7f);
            (d, d != 0)
        }),
        "s_add_u32" | "s_add_co_u32" => cx.sop2(|a, b, _| a.overflowing_add(b)),
        "s_addc_u32" | "s_add_co_ci_u32" => cx.sop2(|a, b, c| {
            let s = u64::from(a) + u64::from(b) + u64::from(c);
            (s as u32, s >> 32 != 0)
        }),
        "s_sub_u32" | "s_sub_co_u32" => cx.sop2(|a, b, _| a.overflowing_sub(b)),
        "s_subb_u32" | "s_sub_co_ci_u32" => cx.sop2(|a, b, c| {
            let d = u64::from(a)
                .wrapping_sub(u64::from(b))
                .wrapping_sub(u64::from(c));
            (d as u32, u64::from(b) + u64::from(c) > u64::from(a))
        }),
        "s_add_i32" | "s_add_co_i32" => cx.sop2(|a, b, _| {
            let d = a.wrapping_add(b);
            (d, ((a ^ d) & (b ^ d)) >> 31 != 0)
        }),
        "s_sub_i32" | "s_sub_co_i32" => cx.sop2(|a, b, _| {
            let d = a.wrapping_sub(b);
            (d, ((a ^ b) & (a ^ d)) >> 31 != 0)
        }),
        "s_abs_i32" => {
            // |i32::MIN| is 0x80000000 itself, which unsigned_abs gives too.
            let d = (cx.src32("ssrc0")? as i32).unsigned_abs();
            cx.dst32("sdst", d)?;
            cx.w.scc = d != 0;
            Ok(Next::Fallthrough)
        }
        "s_getpc_b64" | "s_get_pc_i64" => {
            cx.dst64("sdst", at.pc.wrapping_add(4))?;
            Ok(Next::Fallthrough)
        }
        "s_setpc_b64" | "s_set_pc_i64" => Ok(Next::Jump(cx.src64("ssrc0")?)),
        "s_swappc_b64" | "s_swap_pc_i64" => {
            let target = cx.src64("ssrc0")?;
            cx.dst64("sdst", at.pc.wrapping_add(4))?;
            Ok(Next::Jump(target))
        }
        "s_cselect_b32" => cx.sop2(|a, b, c| (if c { a } else { b }, c)),
        "s_cmp_eq_u32" | "s_cmp_eq_i32" => cx.sopc(|a, b| a == b),
        "s_cmp_lg_u32" | "s_cmp_lg_i32" => cx.sopc(|a, b| a != b),
        "s_cmp_lt_u32" => cx.sopc(|a, b| a < b),
        "s_cmp_le_u32" => cx.sopc(|a, b| a <= b),
        "s_cmp_gt_u32" => cx.sopc(|a, b| a > b),
        "s_cmp_ge_u32" => cx.sopc(|a, b| a >= b),
        "s_cmp_lt_i32" => cx.sopc(|a, b| (a as i32) < (b as i32)),
        "s_cmp_le_i32" => cx.sopc(|a, b| (a as i32) <= (b as i32)),
        "s_cmp_gt_i32" => cx.sopc(|a, b| (a as i32) > (b as i32)),
        "s_cmp_ge_i32" => cx.sopc(|a, b| (a as i32) >= (b as i32)),
        "s_cmpk_eq_u32" => cx.sopk_cmp(|a, b| a == b),
        "s_cmpk_lg_u32" => cx.sopk_cmp(|a, b| a != b),
        "s_bitcmp0_b32" => cx.sopc(|a, b| (a >> (b & 31)) & 1 == 0),
        "s_bitcmp1_b32" => cx.sopc(|a, b| (a >> (b & 31)) & 1 == 1),
        "s_branch" => cx.branch(true),
        "s_cbranch_scc0" => cx.branch(!cx.w.scc),
        "s_cbranch_scc1" => cx.branch(cx.w.scc),
        "s_cbranch_execz" => cx.branch(cx.w.exec & lanes == 0),
        "s_cbranch_execnz" => cx.branch(cx.w.exec & lanes != 0),
        "s_cbranch_vccz" => cx.branch(cx.w.vcc & lanes == 0),
        "s_cbranch_vccnz" => cx.branch(cx.w.vcc & lanes != 0),
        "v_readlane_b32" => {
            let src0 = cx.field("src0")?;
            let vgpr = src0
                .checked_sub(256)
                .ok_or_else(|| cx.bad("src0", src0, "v_readlane_b32 source must be a VGPR"))?;
            let lane = cx.src32("src1")? % cx.w.wave_size;
            let available = cx.w.vgpr.len();
            let v =
                cx.w.vgpr
                    .get(vgpr as usize)
                    .and_then(|r| r.get(lane as usize))
                    .copied()
                    .ok_or(InterpError::VgprOutOfRange {
                        pc: at.pc,
                        offset: at.offset,
                        vgpr,
                        available,
                    })?;
            cx.dst32("vdst", v)?;
            Ok(Next::Fallthrough)
        }
        "v_writelane_b32" => {
            // VOP3 `vdst` is the VGPR number (0..=255).
            let vgpr = cx.field("vdst")?;
            let value = cx.src32("src0")?;
            let lane = cx.src32("src1")? % cx.w.wave_size;
            let available = cx.w.vgpr.len();
            let slot =
                cx.w.vgpr
                    .get_mut(vgpr as usize)
                    .and_then(|r| r.get_mut(lane as usize))
                    .ok_or(InterpError::VgprOutOfRange {
                        pc: at.pc,
                        offset: at.offset,
                        vgpr,
                        available,
                    })?;
            *slot = value;
            Ok(Next::Fallthrough)
        }
        _ if matches!(i.special(), Special::Waitcnt) => Ok(Next::Fallthrough),
        _ => Err(InterpError::Unsupported {
            pc: at.pc,
            offset: at.offset,
            mnemonic: m,
        }),
    }
}
