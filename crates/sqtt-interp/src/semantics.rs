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

/// Defines [`Op`] (one variant per supported mnemonic), [`SUPPORTED`] and `Op::of`.
macro_rules! ops {
    ($($variant:ident = $mnemonic:literal: $semantics:literal;)*) => {
        /// A supported instruction, resolved from its mnemonic once per decoded instruction
        /// ([`Prepared`]) so that executing it does not compare mnemonics.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Op {
            $($variant,)*
        }

        /// Every supported mnemonic with its semantics (SCC = scalar condition code; `D`
        /// destination, `S0`/`S1` sources). Mnemonics are LLVM 22 spellings; gfx12 renames are
        /// listed separately.
        pub const SUPPORTED: &[(&str, &str)] = &[$(($mnemonic, $semantics),)*];

        impl Op {
            /// The operation of `mnemonic` (LLVM spelling), if supported.
            fn of(mnemonic: &str) -> Option<Op> {
                match mnemonic {
                    $($mnemonic => Some(Op::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

ops! {
    SNop = "s_nop": "no-op (wait states are not modelled)";
    SWaitcnt = "s_waitcnt": "no-op";
    SWaitAlu = "s_wait_alu": "no-op (gfx12)";
    SWaitcntDepctr = "s_waitcnt_depctr": "no-op (gfx10/gfx11)";
    SDelayAlu = "s_delay_alu": "no-op (gfx11+)";
    STtracedata = "s_ttracedata": "append M0 to shaderdata";
    STtracedataImm = "s_ttracedata_imm": "append simm16[7:0] to shaderdata (gfx10+)";
    SEndpgm = "s_endpgm": "stop";
    SMovB32 = "s_mov_b32": "D = S0";
    SMovB64 = "s_mov_b64": "D[63:0] = S0[63:0] (SGPR pair, VCC, EXEC)";
    SGetShaderCyclesU64 = "s_get_shader_cycles_u64": "D[63:0] = shader_cycles (gfx1250)";
    SGetregB32 = "s_getreg_b32": "D = hwreg[id][offset +: size]; simm16 = id | offset << 6 | (size - 1) << 11";
    SAndB32 = "s_and_b32": "D = S0 & S1; SCC = D != 0";
    SOrB32 = "s_or_b32": "D = S0 | S1; SCC = D != 0";
    SLshrB32 = "s_lshr_b32": "D = S0 >> S1[4:0]; SCC = D != 0";
    SLshlB32 = "s_lshl_b32": "D = S0 << S1[4:0]; SCC = D != 0";
    SMulI32 = "s_mul_i32": "D = (S0 * S1)[31:0]; SCC unchanged";
    SMulHiI32 = "s_mul_hi_i32": "D = (sext(S0) * sext(S1))[63:32]; SCC unchanged";
    SBfeU32 = "s_bfe_u32": "D = (S0 >> S1[4:0]) & ((1 << S1[22:16]) - 1); SCC = D != 0";
    SAddU32 = "s_add_u32": "D = S0 + S1; SCC = carry out";
    SAddCoU32 = "s_add_co_u32": "gfx12 name of s_add_u32";
    SAddcU32 = "s_addc_u32": "D = S0 + S1 + SCC; SCC = carry out";
    SAddCoCiU32 = "s_add_co_ci_u32": "gfx12 name of s_addc_u32";
    SSubU32 = "s_sub_u32": "D = S0 - S1; SCC = borrow out (S1 > S0)";
    SSubCoU32 = "s_sub_co_u32": "gfx12 name of s_sub_u32";
    SSubbU32 = "s_subb_u32": "D = S0 - S1 - SCC; SCC = borrow out (S1 + SCC > S0)";
    SSubCoCiU32 = "s_sub_co_ci_u32": "gfx12 name of s_subb_u32";
    SAddI32 = "s_add_i32": "D = S0 + S1; SCC = signed overflow";
    SAddCoI32 = "s_add_co_i32": "gfx12 name of s_add_i32";
    SSubI32 = "s_sub_i32": "D = S0 - S1; SCC = signed overflow";
    SSubCoI32 = "s_sub_co_i32": "gfx12 name of s_sub_i32";
    SAbsI32 = "s_abs_i32": "D = |S0| (0x80000000 stays); SCC = D != 0";
    SGetpcB64 = "s_getpc_b64": "D[63:0] = PC + 4 (the next instruction's address)";
    SGetPcI64 = "s_get_pc_i64": "gfx1250 name of s_getpc_b64";
    SSetpcB64 = "s_setpc_b64": "PC = S0[63:0]";
    SSetPcI64 = "s_set_pc_i64": "gfx1250 name of s_setpc_b64";
    SSwappcB64 = "s_swappc_b64": "D[63:0] = PC + 4; PC = S0[63:0] (S0 read before D is written)";
    SSwapPcI64 = "s_swap_pc_i64": "gfx1250 name of s_swappc_b64";
    SBarrier = "s_barrier": "no-op: one model wave is the whole work-group, so every barrier completes at once";
    SBarrierSignal = "s_barrier_signal": "no-op (gfx12 split barrier, see s_barrier)";
    SBarrierWait = "s_barrier_wait": "no-op (gfx12 split barrier, see s_barrier)";
    SCselectB32 = "s_cselect_b32": "D = SCC ? S0 : S1";
    SCmpEqU32 = "s_cmp_eq_u32": "SCC = S0 == S1";
    SCmpLgU32 = "s_cmp_lg_u32": "SCC = S0 != S1";
    SCmpLtU32 = "s_cmp_lt_u32": "SCC = S0 < S1 (unsigned)";
    SCmpLeU32 = "s_cmp_le_u32": "SCC = S0 <= S1 (unsigned)";
    SCmpGtU32 = "s_cmp_gt_u32": "SCC = S0 > S1 (unsigned)";
    SCmpGeU32 = "s_cmp_ge_u32": "SCC = S0 >= S1 (unsigned)";
    SCmpEqI32 = "s_cmp_eq_i32": "SCC = S0 == S1";
    SCmpLgI32 = "s_cmp_lg_i32": "SCC = S0 != S1";
    SCmpLtI32 = "s_cmp_lt_i32": "SCC = S0 < S1 (signed)";
    SCmpLeI32 = "s_cmp_le_i32": "SCC = S0 <= S1 (signed)";
    SCmpGtI32 = "s_cmp_gt_i32": "SCC = S0 > S1 (signed)";
    SCmpGeI32 = "s_cmp_ge_i32": "SCC = S0 >= S1 (signed)";
    SCmpkEqU32 = "s_cmpk_eq_u32": "SCC = S0 == zext(simm16) (SOPK: S0 in the sdst field; gfx9..gfx11)";
    SCmpkLgU32 = "s_cmpk_lg_u32": "SCC = S0 != zext(simm16) (SOPK: S0 in the sdst field; gfx9..gfx11)";
    SBitcmp0B32 = "s_bitcmp0_b32": "SCC = S0[S1[4:0]] == 0";
    SBitcmp1B32 = "s_bitcmp1_b32": "SCC = S0[S1[4:0]] == 1";
    SBranch = "s_branch": "PC = PC + 4 + simm16 * 4";
    SCbranchScc0 = "s_cbranch_scc0": "branch if !SCC";
    SCbranchScc1 = "s_cbranch_scc1": "branch if SCC";
    SCbranchExecz = "s_cbranch_execz": "branch if EXEC (wave lanes) == 0";
    SCbranchExecnz = "s_cbranch_execnz": "branch if EXEC (wave lanes) != 0";
    SCbranchVccz = "s_cbranch_vccz": "branch if VCC (wave lanes) == 0";
    SCbranchVccnz = "s_cbranch_vccnz": "branch if VCC (wave lanes) != 0";
    VReadlaneB32 = "v_readlane_b32": "D(SGPR) = VGPR S0 of lane (S1 mod wave_size); ignores EXEC";
    VWritelaneB32 = "v_writelane_b32": "VGPR D of lane (S1 mod wave_size) = S0 (scalar); ignores EXEC";
}

/// Whether `mnemonic` (LLVM spelling) is in [`SUPPORTED`]. Other `s_wait*`/`s_waitcnt*` counter
/// waits that `amdgpu-isa` classifies as waits are executed as no-ops too.
pub fn is_supported(mnemonic: &str) -> bool {
    SUPPORTED.iter().any(|(m, _)| *m == mnemonic)
}

/// The encoding fields the semantics read, by name in the ISA tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fld {
    Ssrc0,
    Ssrc1,
    Sdst,
    Simm16,
    Src0,
    Src1,
    Vdst,
}

impl Fld {
    const ALL: [Fld; 7] = [
        Fld::Ssrc0,
        Fld::Ssrc1,
        Fld::Sdst,
        Fld::Simm16,
        Fld::Src0,
        Fld::Src1,
        Fld::Vdst,
    ];

    /// The field's name in the ISA tables (`amdgpu_isa::Instruction::field`).
    fn name(self) -> &'static str {
        match self {
            Fld::Ssrc0 => "ssrc0",
            Fld::Ssrc1 => "ssrc1",
            Fld::Sdst => "sdst",
            Fld::Simm16 => "simm16",
            Fld::Src0 => "src0",
            Fld::Src1 => "src1",
            Fld::Vdst => "vdst",
        }
    }
}

/// A decoded instruction with what executing it needs resolved once: its operation (`None`:
/// not supported) and the values of the fields the semantics read (`None`: the format has no
/// such field). [`crate::Code`] keeps one per instruction, so a run executed many times
/// (trials, per-lane loops) looks up mnemonics and fields once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    pub inst: Instruction,
    op: Option<Op>,
    fields: [Option<u32>; 7],
}

impl Prepared {
    pub fn new(inst: Instruction) -> Prepared {
        // Other counter waits `amdgpu-isa` classifies as waits run as no-ops, as `s_waitcnt`.
        let op = Op::of(inst.mnemonic())
            .or_else(|| matches!(inst.special(), Special::Waitcnt).then_some(Op::SWaitcnt));
        Prepared {
            inst,
            op,
            fields: Fld::ALL.map(|f| inst.field(f.name())),
        }
    }
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
    fields: &'a [Option<u32>; 7],
    at: At,
}

impl Cx<'_> {
    fn family(&self) -> Family {
        self.w.target.family()
    }

    fn bad(&self, field: Fld, value: u32, why: &'static str) -> InterpError {
        InterpError::UnsupportedOperand {
            pc: self.at.pc,
            offset: self.at.offset,
            mnemonic: self.i.mnemonic(),
            field: field.name(),
            value,
            why,
        }
    }

    fn field(&self, f: Fld) -> Result<u32, InterpError> {
        self.fields[f as usize].ok_or_else(|| InterpError::MissingField {
            pc: self.at.pc,
            offset: self.at.offset,
            mnemonic: self.i.mnemonic(),
            field: f.name(),
        })
    }

    fn literal(&self, field: Fld, enc: u32) -> Result<u64, InterpError> {
        self.i
            .literal()
            .ok_or_else(|| self.bad(field, enc, "literal operand without literal dword"))
    }

    /// Reads a 32-bit scalar source operand from field `name`.
    fn src32(&self, name: Fld) -> Result<u32, InterpError> {
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
    fn src64(&self, name: Fld) -> Result<u64, InterpError> {
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
    fn dst32(&mut self, name: Fld, v: u32) -> Result<(), InterpError> {
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
    fn dst64(&mut self, name: Fld, v: u64) -> Result<(), InterpError> {
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
        let a = self.src32(Fld::Ssrc0)?;
        let b = self.src32(Fld::Ssrc1)?;
        let (d, scc) = f(a, b, self.w.scc);
        self.dst32(Fld::Sdst, d)?;
        self.w.scc = scc;
        Ok(Next::Fallthrough)
    }

    /// SOPK compare: the register operand is in the `sdst` field, the immediate is zero-extended.
    fn sopk_cmp(&mut self, f: impl FnOnce(u32, u32) -> bool) -> Result<Next, InterpError> {
        let a = self.src32(Fld::Sdst)?;
        let b = self.field(Fld::Simm16)? & 0xffff;
        self.w.scc = f(a, b);
        Ok(Next::Fallthrough)
    }

    fn sopc(&mut self, f: impl FnOnce(u32, u32) -> bool) -> Result<Next, InterpError> {
        let a = self.src32(Fld::Ssrc0)?;
        let b = self.src32(Fld::Ssrc1)?;
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
    p: &Prepared,
    at: At,
    trace: &mut Vec<u32>,
) -> Result<Next, InterpError> {
    let i = &p.inst;
    let mut cx = Cx {
        w,
        i,
        fields: &p.fields,
        at,
    };
    let lanes = cx.w.lane_mask();
    let Some(op) = p.op else {
        return Err(InterpError::Unsupported {
            pc: at.pc,
            offset: at.offset,
            mnemonic: i.mnemonic(),
        });
    };
    match op {
        Op::SNop | Op::SWaitcnt | Op::SWaitAlu | Op::SWaitcntDepctr | Op::SDelayAlu => {
            Ok(Next::Fallthrough)
        }
        Op::SBarrier | Op::SBarrierSignal | Op::SBarrierWait => Ok(Next::Fallthrough),
        Op::STtracedata => {
            trace.push(cx.w.m0);
            Ok(Next::Fallthrough)
        }
        Op::STtracedataImm => {
            trace.push(cx.field(Fld::Simm16)? & 0xff);
            Ok(Next::Fallthrough)
        }
        Op::SEndpgm => Ok(Next::End),
        Op::SMovB32 => {
            let v = cx.src32(Fld::Ssrc0)?;
            cx.dst32(Fld::Sdst, v)?;
            Ok(Next::Fallthrough)
        }
        Op::SMovB64 => {
            let v = cx.src64(Fld::Ssrc0)?;
            cx.dst64(Fld::Sdst, v)?;
            Ok(Next::Fallthrough)
        }
        Op::SGetShaderCyclesU64 => {
            let c = cx.w.shader_cycles;
            cx.dst64(Fld::Sdst, c)?;
            Ok(Next::Fallthrough)
        }
        Op::SGetregB32 => {
            let imm = cx.field(Fld::Simm16)?;
            let id = (imm & 0x3f) as u8;
            let offset = (imm >> 6) & 0x1f;
            let size = ((imm >> 11) & 0x1f) + 1;
            let v = low_bits(cx.hwreg(id)? >> offset, size);
            cx.dst32(Fld::Sdst, v)?;
            Ok(Next::Fallthrough)
        }
        Op::SAndB32 => cx.sop2(|a, b, _| (a & b, a & b != 0)),
        Op::SOrB32 => cx.sop2(|a, b, _| (a | b, a | b != 0)),
        Op::SLshrB32 => cx.sop2(|a, b, _| (a >> (b & 31), a >> (b & 31) != 0)),
        Op::SLshlB32 => cx.sop2(|a, b, _| (a << (b & 31), a << (b & 31) != 0)),
        Op::SMulI32 => cx.sop2(|a, b, scc| (a.wrapping_mul(b), scc)),
        Op::SMulHiI32 => cx.sop2(|a, b, scc| {
            let p = i64::from(a as i32) * i64::from(b as i32);
            ((p >> 32) as u32, scc)
        }),
        Op::SBfeU32 => cx.sop2(|a, b, _| {
            let d = low_bits(a >> (b & 31), (b >> 16) & 0x7f);
            (d, d != 0)
        }),
        Op::SAddU32 | Op::SAddCoU32 => cx.sop2(|a, b, _| a.overflowing_add(b)),
        Op::SAddcU32 | Op::SAddCoCiU32 => cx.sop2(|a, b, c| {
            let s = u64::from(a) + u64::from(b) + u64::from(c);
            (s as u32, s >> 32 != 0)
        }),
        Op::SSubU32 | Op::SSubCoU32 => cx.sop2(|a, b, _| a.overflowing_sub(b)),
        Op::SSubbU32 | Op::SSubCoCiU32 => cx.sop2(|a, b, c| {
            let d = u64::from(a)
                .wrapping_sub(u64::from(b))
                .wrapping_sub(u64::from(c));
            (d as u32, u64::from(b) + u64::from(c) > u64::from(a))
        }),
        Op::SAddI32 | Op::SAddCoI32 => cx.sop2(|a, b, _| {
            let d = a.wrapping_add(b);
            (d, ((a ^ d) & (b ^ d)) >> 31 != 0)
        }),
        Op::SSubI32 | Op::SSubCoI32 => cx.sop2(|a, b, _| {
            let d = a.wrapping_sub(b);
            (d, ((a ^ b) & (a ^ d)) >> 31 != 0)
        }),
        Op::SAbsI32 => {
            // |i32::MIN| is 0x80000000 itself, which unsigned_abs gives too.
            let d = (cx.src32(Fld::Ssrc0)? as i32).unsigned_abs();
            cx.dst32(Fld::Sdst, d)?;
            cx.w.scc = d != 0;
            Ok(Next::Fallthrough)
        }
        Op::SGetpcB64 | Op::SGetPcI64 => {
            cx.dst64(Fld::Sdst, at.pc.wrapping_add(4))?;
            Ok(Next::Fallthrough)
        }
        Op::SSetpcB64 | Op::SSetPcI64 => Ok(Next::Jump(cx.src64(Fld::Ssrc0)?)),
        Op::SSwappcB64 | Op::SSwapPcI64 => {
            let target = cx.src64(Fld::Ssrc0)?;
            cx.dst64(Fld::Sdst, at.pc.wrapping_add(4))?;
            Ok(Next::Jump(target))
        }
        Op::SCselectB32 => cx.sop2(|a, b, c| (if c { a } else { b }, c)),
        Op::SCmpEqU32 | Op::SCmpEqI32 => cx.sopc(|a, b| a == b),
        Op::SCmpLgU32 | Op::SCmpLgI32 => cx.sopc(|a, b| a != b),
        Op::SCmpLtU32 => cx.sopc(|a, b| a < b),
        Op::SCmpLeU32 => cx.sopc(|a, b| a <= b),
        Op::SCmpGtU32 => cx.sopc(|a, b| a > b),
        Op::SCmpGeU32 => cx.sopc(|a, b| a >= b),
        Op::SCmpLtI32 => cx.sopc(|a, b| (a as i32) < (b as i32)),
        Op::SCmpLeI32 => cx.sopc(|a, b| (a as i32) <= (b as i32)),
        Op::SCmpGtI32 => cx.sopc(|a, b| (a as i32) > (b as i32)),
        Op::SCmpGeI32 => cx.sopc(|a, b| (a as i32) >= (b as i32)),
        Op::SCmpkEqU32 => cx.sopk_cmp(|a, b| a == b),
        Op::SCmpkLgU32 => cx.sopk_cmp(|a, b| a != b),
        Op::SBitcmp0B32 => cx.sopc(|a, b| (a >> (b & 31)) & 1 == 0),
        Op::SBitcmp1B32 => cx.sopc(|a, b| (a >> (b & 31)) & 1 == 1),
        Op::SBranch => cx.branch(true),
        Op::SCbranchScc0 => cx.branch(!cx.w.scc),
        Op::SCbranchScc1 => cx.branch(cx.w.scc),
        Op::SCbranchExecz => cx.branch(cx.w.exec & lanes == 0),
        Op::SCbranchExecnz => cx.branch(cx.w.exec & lanes != 0),
        Op::SCbranchVccz => cx.branch(cx.w.vcc & lanes == 0),
        Op::SCbranchVccnz => cx.branch(cx.w.vcc & lanes != 0),
        Op::VReadlaneB32 => {
            let src0 = cx.field(Fld::Src0)?;
            let vgpr = src0
                .checked_sub(256)
                .ok_or_else(|| cx.bad(Fld::Src0, src0, "v_readlane_b32 source must be a VGPR"))?;
            let lane = cx.src32(Fld::Src1)? % cx.w.wave_size;
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
            cx.dst32(Fld::Vdst, v)?;
            Ok(Next::Fallthrough)
        }
        Op::VWritelaneB32 => {
            // VOP3 `vdst` is the VGPR number (0..=255).
            let vgpr = cx.field(Fld::Vdst)?;
            let value = cx.src32(Fld::Src0)?;
            let lane = cx.src32(Fld::Src1)? % cx.w.wave_size;
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
    }
}
