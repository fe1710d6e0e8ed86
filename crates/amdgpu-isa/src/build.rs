//! Constructors of new instructions for instrumentation snippets. Every constructor encodes from
//! the target's opcode table (by mnemonic, no hand-written opcode numbers), then decodes the result
//! with [`crate::decode`] so the returned [`Instruction`] is fully classified.
//! Round-trip tests check each against `llvm-mc-22` for every family.
use std::cell::RefCell;
use std::collections::HashMap;

use crate::decode::{decode, EncodeError, Instruction, MAX_LEN};
use crate::{Format, Target};

/// A scalar source/destination operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// SGPR `s<n>`.
    Sgpr(u8),
    VccLo,
    VccHi,
    ExecLo,
    ExecHi,
    M0,
    /// gfx10+ `null`.
    Null,
    /// Integer constant; inline when -16..=64, otherwise a 32-bit literal.
    Imm(i32),
    /// 32-bit literal, always encoded as a literal dword unless it is an inline integer.
    Literal(u32),
    /// VGPR `v<n>` (VALU sources only).
    Vgpr(u16),
}

/// Inline integer constant encoding: 128 + i for 0..=64, 192 - i for -16..=-1 (ISA manuals,
/// "Scalar operands").
fn inline_int(i: i32) -> u32 {
    if i >= 0 {
        128 + i as u32
    } else {
        (192 - i) as u32
    }
}

#[derive(Clone, Copy)]
struct Enc {
    target: Target,
    fmt_idx: usize,
    words: [u32; 4],
    literal: Option<u32>,
}

/// Starts an encoding of the first of `names` that exists on `t` (spellings change across
/// families, e.g. `s_getpc_b64` became `s_get_pc_i64` on gfx1250).
fn start_any(t: Target, format: Format, names: &[&'static str]) -> Result<Enc, EncodeError> {
    let mut err = EncodeError::NoSuchInstruction {
        mnemonic: names.first().copied().unwrap_or(""),
        target: t.name(),
    };
    for n in names {
        match start(t, format, n) {
            Ok(e) => return Ok(e),
            Err(e) => err = e,
        }
    }
    Err(err)
}

/// Cache key of [`start`]: target, format and mnemonic.
type StartKey = (Target, Format, &'static str);

thread_local! {
    /// [`start_uncached`] results by target, format and mnemonic: snippets build the same few
    /// instructions hundreds of thousands of times, and the opcode table search is linear.
    static STARTS: RefCell<HashMap<StartKey, Result<Enc, EncodeError>>> = RefCell::new(HashMap::new());
}

fn start(t: Target, format: Format, mnemonic: &'static str) -> Result<Enc, EncodeError> {
    STARTS.with(|c| {
        c.borrow_mut()
            .entry((t, format, mnemonic))
            .or_insert_with(|| start_uncached(t, format, mnemonic))
            .clone()
    })
}

fn start_uncached(t: Target, format: Format, mnemonic: &'static str) -> Result<Enc, EncodeError> {
    let def = t.def();
    for (fi, f) in def.formats.iter().enumerate() {
        if f.format != format {
            continue;
        }
        if let Some(row) = def
            .ops
            .iter()
            .find(|r| usize::from(r.fmt) == fi && r.mnemonic == mnemonic)
        {
            let mut e = Enc {
                target: t,
                fmt_idx: fi,
                words: [f.value, 0, 0, 0],
                literal: None,
            };
            let mut key = row.key;
            for &(dw, hi, lo) in f.op_bits.iter().rev() {
                let n = hi - lo + 1;
                e.set_bits(dw, hi, lo, key & ((1u32 << n) - 1));
                key >>= n;
            }
            return Ok(e);
        }
    }
    Err(EncodeError::NoSuchInstruction {
        mnemonic,
        target: t.name(),
    })
}

/// Scalar operand code of SGPR `s<n>`: its position in the target's scalar register names
/// (`sregs`, indexed by code). `s<n>` is code `n` on every family (ISA manuals, "Scalar
/// operands"); that position is tried first, then every name.
fn sgpr_code(sregs: &[&str], n: u8) -> Option<u32> {
    let is_sn = |s: &&str| {
        s.strip_prefix('s').is_some_and(|d| {
            d.bytes().all(|c| c.is_ascii_digit())
                && (d == "0" || !d.starts_with('0'))
                && d.parse::<u8>() == Ok(n)
        })
    };
    if sregs.get(usize::from(n)).is_some_and(is_sn) {
        return Some(u32::from(n));
    }
    sregs.iter().position(is_sn).map(|p| p as u32)
}

impl Enc {
    fn set_bits(&mut self, dw: u8, hi: u8, lo: u8, v: u32) {
        let n = u32::from(hi - lo) + 1;
        let m = if n >= 32 {
            u32::MAX
        } else {
            ((1u32 << n) - 1) << lo
        };
        if let Some(w) = self.words.get_mut(usize::from(dw)) {
            *w = (*w & !m) | ((v << lo) & m);
        }
    }

    fn field(mut self, name: &str, v: u32) -> Result<Enc, EncodeError> {
        let f = self.target.def().formats[self.fmt_idx]
            .fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| EncodeError::BadOperand {
                what: name.to_string(),
                target: self.target.name(),
            })?;
        let (dw, hi, lo) = (f.dw, f.hi, f.lo);
        self.set_bits(dw, hi, lo, v);
        Ok(self)
    }

    fn scalar(mut self, name: &str, op: Operand, dst: bool) -> Result<Enc, EncodeError> {
        let t = self.target;
        let sregs = t.def().sregs;
        let by_name = |n: &str| sregs.iter().position(|s| *s == n).map(|p| p as u32);
        let bad = || EncodeError::BadOperand {
            what: format!("{op:?}"),
            target: t.name(),
        };
        let v = match op {
            Operand::Sgpr(n) => sgpr_code(sregs, n).ok_or_else(bad)?,
            Operand::VccLo => by_name("vcc_lo").ok_or_else(bad)?,
            Operand::VccHi => by_name("vcc_hi").ok_or_else(bad)?,
            Operand::ExecLo => by_name("exec_lo").ok_or_else(bad)?,
            Operand::ExecHi => by_name("exec_hi").ok_or_else(bad)?,
            Operand::M0 => by_name("m0").ok_or_else(bad)?,
            Operand::Null => by_name("null").ok_or_else(bad)?,
            Operand::Imm(i) if (-16..=64).contains(&i) && !dst => inline_int(i),
            Operand::Literal(l) if l <= 64 && !dst => inline_int(l as i32),
            Operand::Imm(i) if !dst => {
                self.literal = Some(i as u32);
                255
            }
            Operand::Literal(l) if !dst => {
                self.literal = Some(l);
                255
            }
            Operand::Vgpr(n) if !dst && n < 256 => 256 + u32::from(n),
            _ => return Err(bad()),
        };
        self.field(name, v)
    }

    fn finish(self) -> Result<Instruction, EncodeError> {
        let f = &self.target.def().formats[self.fmt_idx];
        let n = usize::from(f.dwords);
        let mut b = [0u8; MAX_LEN];
        for (i, w) in self.words.iter().take(n).enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        let mut len = n * 4;
        if let Some(l) = self.literal {
            b[len..len + 4].copy_from_slice(&l.to_le_bytes());
            len += 4;
        }
        Ok(decode(&b[..len], self.target)?)
    }
}

fn sopp(t: Target, m: &'static str, imm: u16) -> Result<Instruction, EncodeError> {
    start(t, Format::Sopp, m)?
        .field("simm16", u32::from(imm))?
        .finish()
}

/// `s_nop n` (n + 1 wait states, 0..=15 on gfx9/10, 0..=127 later; only low bits kept by hardware).
pub fn s_nop(t: Target, n: u16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_nop", n)
}

/// `s_ttracedata` (sends M0 to the thread trace).
pub fn s_ttracedata(t: Target) -> Result<Instruction, EncodeError> {
    sopp(t, "s_ttracedata", 0)
}

/// `s_ttracedata_imm v` (gfx10+; error on gfx9).
pub fn s_ttracedata_imm(t: Target, v: u8) -> Result<Instruction, EncodeError> {
    sopp(t, "s_ttracedata_imm", u16::from(v))
}

/// `s_branch` with a displacement of `simm16` dwords from the next instruction.
pub fn s_branch(t: Target, simm16: i16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_branch", simm16 as u16)
}

/// `s_cbranch_scc0`.
pub fn s_cbranch_scc0(t: Target, simm16: i16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_cbranch_scc0", simm16 as u16)
}

/// `s_cbranch_scc1`.
pub fn s_cbranch_scc1(t: Target, simm16: i16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_cbranch_scc1", simm16 as u16)
}

/// `s_cbranch_execz`.
pub fn s_cbranch_execz(t: Target, simm16: i16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_cbranch_execz", simm16 as u16)
}

/// `s_cbranch_vccz`.
pub fn s_cbranch_vccz(t: Target, simm16: i16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_cbranch_vccz", simm16 as u16)
}

/// gfx12+ `s_wait_alu imm` (depctr encoding; `0xfffe` = `depctr_va_sdst(0)`... see ISA manual).
pub fn s_wait_alu(t: Target, imm: u16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_wait_alu", imm)
}

/// gfx10/gfx11 `s_waitcnt_depctr imm`.
pub fn s_waitcnt_depctr(t: Target, imm: u16) -> Result<Instruction, EncodeError> {
    sopp(t, "s_waitcnt_depctr", imm)
}

/// gfx10/gfx11 `s_waitcnt_vscnt null, imm` (SOPK; waits until at most `imm` vector stores are
/// outstanding). gfx1010..gfx1013 need `s_waitcnt_vscnt null, 0` between an LDS access, a branch and
/// a VMEM access (LLVM 22 `GCNHazardRecognizer`, "LdsBranchVmemWARHazard").
pub fn s_waitcnt_vscnt(t: Target, imm: u16) -> Result<Instruction, EncodeError> {
    start(t, Format::Sopk, "s_waitcnt_vscnt")?
        .scalar("sdst", Operand::Null, true)?
        .field("simm16", u32::from(imm))?
        .finish()
}

/// `s_mov_b32 dst, src` (dst: SGPR, M0, EXEC_LO/HI, VCC_LO/HI; src also inline or literal).
pub fn s_mov_b32(t: Target, dst: Operand, src: Operand) -> Result<Instruction, EncodeError> {
    start(t, Format::Sop1, "s_mov_b32")?
        .scalar("sdst", dst, true)?
        .scalar("ssrc0", src, false)?
        .finish()
}

/// `s_getpc_b64 s[n:n+1]` (gfx1250: `s_get_pc_i64`).
pub fn s_getpc_b64(t: Target, sdst: u8) -> Result<Instruction, EncodeError> {
    start_any(t, Format::Sop1, &["s_getpc_b64", "s_get_pc_i64"])?
        .scalar("sdst", Operand::Sgpr(sdst), true)?
        .finish()
}

/// `s_setpc_b64 s[n:n+1]` (gfx1250: `s_set_pc_i64`).
pub fn s_setpc_b64(t: Target, ssrc: u8) -> Result<Instruction, EncodeError> {
    start_any(t, Format::Sop1, &["s_setpc_b64", "s_set_pc_i64"])?
        .scalar("ssrc0", Operand::Sgpr(ssrc), false)?
        .finish()
}

/// gfx1250 `s_get_shader_cycles_u64 s[n:n+1]`.
pub fn s_get_shader_cycles_u64(t: Target, sdst: u8) -> Result<Instruction, EncodeError> {
    start(t, Format::Sop1, "s_get_shader_cycles_u64")?
        .scalar("sdst", Operand::Sgpr(sdst), true)?
        .finish()
}

fn sop2(
    t: Target,
    m: &'static str,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    start(t, Format::Sop2, m)?
        .scalar("sdst", dst, true)?
        .scalar("ssrc0", a, false)?
        .scalar("ssrc1", b, false)?
        .finish()
}

/// `s_and_b32 dst, a, b`.
pub fn s_and_b32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_and_b32", dst, a, b)
}

/// `s_lshr_b32 dst, a, b`.
pub fn s_lshr_b32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_lshr_b32", dst, a, b)
}

/// `s_or_b32 dst, a, b` (SCC = result != 0).
pub fn s_or_b32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_or_b32", dst, a, b)
}

/// `s_lshl_b32 dst, a, b` (shift count `b[4:0]`; SCC = result != 0).
pub fn s_lshl_b32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_lshl_b32", dst, a, b)
}

/// `s_mul_i32 dst, a, b` (low 32 bits of the product; SCC unchanged).
pub fn s_mul_i32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_mul_i32", dst, a, b)
}

/// `s_mul_hi_i32 dst, a, b` (high 32 bits of the signed 64-bit product; SCC unchanged; gfx9+).
pub fn s_mul_hi_i32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_mul_hi_i32", dst, a, b)
}

/// `s_cselect_b32 dst, a, b` (dst = SCC ? a : b).
pub fn s_cselect_b32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    sop2(t, "s_cselect_b32", dst, a, b)
}

/// `s_add_u32` (gfx12+: `s_add_co_u32`): dst = a + b, SCC = carry.
pub fn s_add_u32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    start_any(t, Format::Sop2, &["s_add_u32", "s_add_co_u32"])?
        .scalar("sdst", dst, true)?
        .scalar("ssrc0", a, false)?
        .scalar("ssrc1", b, false)?
        .finish()
}

/// `s_addc_u32` (gfx12+: `s_add_co_ci_u32`): dst = a + b + SCC.
pub fn s_addc_u32(
    t: Target,
    dst: Operand,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    start_any(t, Format::Sop2, &["s_addc_u32", "s_add_co_ci_u32"])?
        .scalar("sdst", dst, true)?
        .scalar("ssrc0", a, false)?
        .scalar("ssrc1", b, false)?
        .finish()
}

/// SOPC compare `s_cmp_<cond>` (e.g. `"s_cmp_eq_u32"`, `"s_cmp_lg_u32"`) and `s_bitcmp1_b32`.
pub fn s_cmp(
    t: Target,
    mnemonic: &'static str,
    a: Operand,
    b: Operand,
) -> Result<Instruction, EncodeError> {
    start(t, Format::Sopc, mnemonic)?
        .scalar("ssrc0", a, false)?
        .scalar("ssrc1", b, false)?
        .finish()
}

/// `s_bitcmp1_b32 a, bit` (SCC = bit `bit` of `a` is 1).
pub fn s_bitcmp1_b32(t: Target, a: Operand, bit: Operand) -> Result<Instruction, EncodeError> {
    s_cmp(t, "s_bitcmp1_b32", a, bit)
}

/// `s_getreg_b32 sdst, hwreg(id, offset, size)`: simm16 = id | offset << 6 | (size - 1) << 11
/// (ISA manuals, SOPK "S_GETREG_B32"). `size` is 1..=32 bits.
pub fn s_getreg_b32(
    t: Target,
    sdst: Operand,
    hwreg_id: u8,
    offset: u8,
    size: u8,
) -> Result<Instruction, EncodeError> {
    if !(1..=32).contains(&size) || offset > 31 || hwreg_id > 63 {
        return Err(EncodeError::BadOperand {
            what: format!("hwreg({hwreg_id}, {offset}, {size})"),
            target: t.name(),
        });
    }
    let imm = u32::from(hwreg_id) | u32::from(offset) << 6 | u32::from(size - 1) << 11;
    start(t, Format::Sopk, "s_getreg_b32")?
        .scalar("sdst", sdst, true)?
        .field("simm16", imm)?
        .finish()
}

/// `v_readlane_b32 sdst, v<vsrc>, lane` (VOP3; lane: SGPR/M0 or inline constant).
pub fn v_readlane_b32(
    t: Target,
    sdst: Operand,
    vsrc: u16,
    lane: Operand,
) -> Result<Instruction, EncodeError> {
    let e = start(t, Format::Vop3, "v_readlane_b32")?;
    let e = e.scalar("vdst", sdst, true)?;
    let e = e.scalar("src0", Operand::Vgpr(vsrc), false)?;
    e.scalar("src1", lane, false)?.finish()
}

/// `v_writelane_b32 v<vdst>, src, lane` (VOP3): writes `src` into lane `lane` of `v<vdst>`,
/// ignoring EXEC (ISA manuals, "V_WRITELANE_B32"; src: SGPR/M0/constant, lane: SGPR/M0 or
/// inline constant).
pub fn v_writelane_b32(
    t: Target,
    vdst: u16,
    src: Operand,
    lane: Operand,
) -> Result<Instruction, EncodeError> {
    if vdst > 255 {
        return Err(EncodeError::BadOperand {
            what: format!("v{vdst}"),
            target: t.name(),
        });
    }
    // VOP3 `vdst` holds the VGPR number itself (0..=255).
    let e = start(t, Format::Vop3, "v_writelane_b32")?.field("vdst", u32::from(vdst))?;
    let e = e.scalar("src0", src, false)?;
    e.scalar("src1", lane, false)?.finish()
}

/// gfx1250 `s_add_pc_i64 lit64(offset)`: PC of the next instruction + `offset` (bytes), always
/// encoded with the 64-bit literal (scalar source 254, as LLVM 22 encodes it), 12 bytes.
pub fn s_add_pc_i64(t: Target, offset: i64) -> Result<Instruction, EncodeError> {
    const LIT64: u32 = 254;
    let e = start(t, Format::Sop1, "s_add_pc_i64")?.field("ssrc0", LIT64)?;
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&e.words[0].to_le_bytes());
    b[4..].copy_from_slice(&(offset as u64).to_le_bytes());
    Ok(decode(&b, t)?)
}
