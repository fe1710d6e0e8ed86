//! `amdgpu-isa`: decoder, encoder and formatter for AMDGPU machine code (gfx9, gfx10, gfx11,
//! gfx12, gfx1250 and the generic targets), driven by tables generated from LLVM 22 and committed
//! in `isa-tables/` (regenerate with `tools/isa-gen/generate.sh`). Pure Rust; LLVM is never needed
//! at run time.
//!
//! # API
//! - [`Target`] — an exact processor: [`Target::from_name`] (`"gfx942"`, `"gfx11-generic"`),
//!   [`Target::from_elf_mach`] (`EF_AMDGPU_MACH_*`, low 8 bits of `e_flags`), [`Target::family`],
//!   [`Target::with_true16`], [`Target::has_ttracedata_imm`].
//! - [`decode`] / [`decode_all`] / [`decode_iter`] — one instruction / a whole code range into
//!   a `Vec` of [`Instruction`]s / the same, streamed without collecting; failures are typed
//!   [`DecodeError`]s with the byte offset, never panics.
//! - [`Instruction`] — keeps the raw bytes ([`Instruction::bytes`] re-encodes byte-identically);
//!   [`Instruction::len`] (bytes: 4, 8, 12, 16, 20 incl. literals, DPP/SDWA and NSA dwords),
//!   [`Instruction::mnemonic`], [`Instruction::format`], [`Instruction::class`],
//!   [`Instruction::flow`], [`Instruction::branch_target`], [`Instruction::with_branch_target`],
//!   [`Instruction::literal`], [`Instruction::with_literal`], [`Instruction::reads`],
//!   [`Instruction::writes`] (explicit and implicit registers, full widths, as [`RegSet`]),
//!   [`Instruction::special`] ([`Special`]), [`Instruction::memory`] ([`MemAccess`]) and
//!   `Display` (LLVM syntax).
//! - [`build`] — constructors of new instructions (s_nop, s_ttracedata, s_mov_b32, branches, ...)
//!   for the rewriter's snippets.
//!
//! Sources of facts: LLVM 22 AMDGPU MC layer (disassembler, instruction descriptors) via
//! `tools/isa-gen`; encoding format layouts in `isa-tables/formats.tsv` follow LLVM's
//! `SIInstrFormats.td`/`*Instructions.td` and the AMD ISA manuals' "Microcode formats" chapters.

pub mod build;
mod decode;
mod display;
pub mod hazard;
mod image;
mod memkind;
mod regs;
mod tables;
mod target;

pub use decode::{
    decode, decode_all, decode_iter, DecodeError, DecodeErrorKind, DecodeIter, EncodeError,
    Instruction, MemAccess, MemKind, MemSpace, Shape,
};
pub use regs::{RegSet, SpecialReg};
pub use target::{Family, Target};

/// Encoding format of an instruction (the microcode format of the ISA manuals). FLAT-family
/// instructions report their segment: [`Format::Flat`], [`Format::Global`], [`Format::Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Sop1,
    Sop2,
    Sopk,
    Sopc,
    Sopp,
    Smem,
    Vop1,
    Vop2,
    Vopc,
    Vop3,
    Vop3p,
    Vopd,
    /// gfx1250 96-bit dual issue (VOPD3).
    Vopd3,
    /// gfx9/gfx10 VINTRP.
    Vintrp,
    /// gfx11+ VINTERP.
    Vinterp,
    /// gfx11+ LDSDIR / gfx12 VDSDIR.
    Ldsdir,
    Ds,
    Flat,
    Global,
    Scratch,
    Mubuf,
    Mtbuf,
    Mimg,
    /// gfx12+ buffer encoding (MUBUF and MTBUF opcodes).
    Vbuffer,
    /// gfx12 image (non-sampler) encoding.
    Vimage,
    /// gfx12 sampler encoding.
    Vsample,
    Exp,
}

/// Coarse instruction class, for scheduling and instrumentation decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstClass {
    /// Scalar ALU (SOP1/SOP2/SOPK/SOPC and SOPP that are not branches).
    Salu,
    /// Vector ALU (VOP*, VOPD, VINTRP/VINTERP).
    Valu,
    /// Scalar memory (SMEM).
    Smem,
    /// LDS/GDS (DS, LDSDIR).
    Ds,
    Flat,
    Global,
    Scratch,
    /// MUBUF/MTBUF/VBUFFER.
    Buffer,
    /// MIMG/VIMAGE/VSAMPLE.
    Image,
    Export,
    /// SOPP/SOPK instruction whose [`Flow`] is not fall-through (branch, end, call, ...).
    Branch,
}

/// Control flow effect of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    Fallthrough,
    /// PC-relative branch (`s_branch`, `s_cbranch_*`, gfx10 `s_subvector_loop_*`).
    Branch {
        conditional: bool,
    },
    /// `s_endpgm*`, `s_code_end`.
    EndProgram,
    /// `s_setpc_b64` / `s_set_pc_i64`, and gfx1250 `s_add_pc_i64` (target from registers or a literal).
    IndirectJump,
    /// `s_swappc_b64`, `s_swap_pc_i64`, `s_call_b64` / `s_call_i64`.
    Call,
    /// `s_rfe_b64` / `s_rfe_i64`.
    Return,
    /// `s_trap`.
    Trap,
}

/// Instructions the rewriter must recognise (from `isa-tables/overrides.tsv`, a reviewed list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    None,
    SBarrier,
    SBarrierSignal,
    SBarrierSignalIsFirst,
    SBarrierWait,
    /// `s_waitcnt*` and gfx12 `s_wait_*cnt`.
    Waitcnt,
    /// `s_waitcnt_depctr`, `s_wait_alu`.
    WaitAlu,
    DelayAlu,
    Clause,
    TtraceData,
    /// `s_ttracedata_imm` with its 8-bit immediate.
    TtraceDataImm(u8),
    Sendmsg,
    Getreg,
    Setreg,
    Nop,
    GetPc,
    SetPc,
    SwapPc,
    Call,
    AddPcI64,
    CodeEnd,
    EndPgm,
    Trap,
    SetPrio,
    Sleep,
}

/// Test support (not a stable API): the encoding space of a target, used by the random
/// differential tests and the fuzz target to generate plausible instruction words.
#[doc(hidden)]
pub mod testing {
    use crate::Target;

    /// For every opcode of `t`: dword 0 with the format bits and opcode bits set, and the mask of
    /// those bits (other bits are free operand/modifier bits).
    pub fn opcode_words(t: Target) -> Vec<(u32, u32)> {
        let d = t.def();
        let mut v = Vec::with_capacity(d.ops.len());
        for row in d.ops.iter().chain(d.ops_t16.unwrap_or_default()) {
            let Some(f) = d.formats.get(usize::from(row.fmt)) else {
                continue;
            };
            let (mut w, mut m, mut key) = (f.value, f.mask, row.key);
            // Opcode bits outside dword 0 (gfx10 MTBUF op[3]) are left to the random dwords.
            for &(dw, hi, lo) in f.op_bits.iter().rev() {
                let n = u32::from(hi - lo) + 1;
                if dw == 0 {
                    let bits = ((1u32 << n) - 1) << lo;
                    w |= (key << lo) & bits;
                    m |= bits;
                }
                key >>= n;
            }
            v.push((w, m));
        }
        v
    }

    /// Two-part (VOP3PX2) instructions of `t`: per dword of the 16 bytes, the bits LLVM fixes
    /// (mask) and their values; every other bit is a free operand/modifier bit.
    pub fn pair_words(t: Target) -> Vec<([u32; 4], [u32; 4])> {
        t.def().pairs.iter().map(|p| (p.mask, p.value)).collect()
    }
}
