//! Table-driven decoding: format by dword-0 match, opcode by the format's opcode bits, length
//! from LLVM-measured sizes (base + literal/DPP/SDWA probes + NSA dwords).
use crate::regs::{RegSet, SpecialReg};
use crate::tables::*;
use crate::{Family, Flow, Format, InstClass, Special, Target};

mod fields;
mod mem;
mod reg_use;
pub(crate) use mem::MemShape;

/// Longest instruction in bytes (gfx10 MIMG with 3 NSA dwords = 20, VOPD3 + 64-bit literal = 20).
pub(crate) const MAX_LEN: usize = 24;

/// Why decoding failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// Fewer bytes remain than the instruction needs (`needed` bytes in total).
    #[error("truncated instruction: needs {needed} bytes, {available} available")]
    Truncated { needed: usize, available: usize },
    /// Dword 0 matches no encoding format of the family.
    #[error("no encoding format matches word {word:#010x}")]
    UnknownFormat { word: u32 },
    /// The format is known but the opcode does not exist on this target.
    #[error("unknown {format} opcode {opcode} (word {word:#010x})")]
    UnknownOpcode {
        format: &'static str,
        opcode: u32,
        word: u32,
    },
    /// LLVM rejects this operand combination (e.g. DPP on an opcode without a DPP form).
    #[error("invalid operand encoding for {mnemonic} (word {word:#010x})")]
    InvalidOperands { mnemonic: &'static str, word: u32 },
}

/// A decoding failure at byte `offset` of the decoded range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset:#x}: {kind}")]
pub struct DecodeError {
    /// Byte offset from the start of the slice given to [`decode`] / [`decode_all`].
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

/// Why an instruction could not be built or modified.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("branch displacement {dwords} dwords does not fit simm16")]
    BranchOutOfRange { dwords: i64 },
    #[error("branch target {target:#x} is not dword aligned relative to {pc:#x}")]
    Misaligned { pc: u64, target: u64 },
    #[error("instruction has no PC-relative branch field")]
    NotABranch,
    #[error("instruction has no literal")]
    NoLiteral,
    #[error("value {value:#x} does not fit a {bytes}-byte literal")]
    LiteralTooWide { value: u64, bytes: usize },
    #[error("{mnemonic} does not exist on {target}")]
    NoSuchInstruction {
        mnemonic: &'static str,
        target: &'static str,
    },
    #[error("operand {what} cannot be encoded on {target}")]
    BadOperand { what: String, target: &'static str },
    #[error("encoded instruction does not decode back: {0}")]
    RoundTrip(#[from] DecodeError),
}

/// Memory space of a memory instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemSpace {
    Flat,
    Global,
    Scratch,
    /// MUBUF/MTBUF/VBUFFER with the address-mode bits (gfx12: from `vaddr` use).
    Buffer {
        offen: bool,
        idxen: bool,
    },
    Image,
    Lds,
    Gds,
    /// SMEM (scalar loads/stores through the constant cache).
    Scalar,
}

pub use crate::memkind::{mem_kind, MemKind};

/// Memory access description of a memory instruction. Register numbers: VGPRs as `v<n>`,
/// SGPRs as encoded scalar operand numbers (see [`Instruction::reads`] for their meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemAccess {
    pub space: MemSpace,
    pub kind: MemKind,
    /// First address VGPR and its width in dwords.
    pub vaddr: Option<(u16, u8)>,
    /// Scalar base (`saddr`, SMEM `sbase`): first SGPR number and width in dwords.
    pub saddr: Option<(u16, u8)>,
    /// `soffset` scalar operand encoding.
    pub soffset: Option<u16>,
    /// Buffer/image resource descriptor: first SGPR and width in dwords.
    pub srsrc: Option<(u16, u8)>,
    /// DS `offset0`/`offset1` (bytes, or units for the 2-address forms).
    pub ds_offsets: Option<(u8, u8)>,
}

/// One decoded instruction. Keeps every raw byte: [`Instruction::bytes`] is byte-identical to
/// the input.
#[derive(Clone, Copy)]
pub struct Instruction {
    pub(crate) raw: [u8; MAX_LEN],
    pub(crate) len: u8,
    pub(crate) target: Target,
    pub(crate) fmt: &'static FormatDef,
    pub(crate) row: &'static OpRow,
    /// Byte offset and size of the literal, if any.
    pub(crate) lit: Option<(u8, u8)>,
    /// The opcode was found only in the other 16-bit mode's table (see
    /// [`Instruction::decoded_in_other_mode`]).
    pub(crate) other_mode: bool,
    /// Two-part instruction: index + 1 into the target's `pairs` (0 = none).
    pub(crate) pair: u8,
}

/// The decode facts of an instruction apart from its encoding bytes: target, format, opcode
/// row, length, literal position, mode and two-part definition ([`Instruction::shape`]). Two
/// instructions with equal shapes differ only in their operand bits; a caller that keeps one
/// instruction per distinct shape and only byte offsets per instruction rebuilds each one with
/// [`Instruction::with_bytes`], without decoding again.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    target: Target,
    fmt: &'static FormatDef,
    row: &'static OpRow,
    len: u8,
    lit: Option<(u8, u8)>,
    other_mode: bool,
    pair: u8,
}

impl PartialEq for Shape {
    fn eq(&self, o: &Shape) -> bool {
        self.target == o.target
            && std::ptr::eq(self.fmt, o.fmt)
            && std::ptr::eq(self.row, o.row)
            && self.len == o.len
            && self.lit == o.lit
            && self.other_mode == o.other_mode
            && self.pair == o.pair
    }
}

impl Eq for Shape {}

impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.target.hash(h);
        std::ptr::hash(self.fmt, h);
        std::ptr::hash(self.row, h);
        self.len.hash(h);
        self.lit.hash(h);
        self.other_mode.hash(h);
        self.pair.hash(h);
    }
}

impl std::fmt::Debug for Instruction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Instruction({} {:02x?})",
            self.row.mnemonic,
            self.bytes()
        )
    }
}

impl PartialEq for Instruction {
    fn eq(&self, o: &Instruction) -> bool {
        self.target == o.target && self.bytes() == o.bytes()
    }
}

/// Dword `i` of `b`, little-endian; bytes past the end read as 0.
#[inline]
fn word(b: &[u8], i: usize) -> u32 {
    if let Some(&[b0, b1, b2, b3]) = b.get(i * 4..i * 4 + 4) {
        return u32::from_le_bytes([b0, b1, b2, b3]);
    }
    let mut w = [0u8; 4];
    for (k, x) in w.iter_mut().enumerate() {
        *x = b.get(i * 4 + k).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

#[inline]
fn field_bits(b: &[u8], dw: u8, hi: u8, lo: u8) -> u32 {
    let n = u32::from(hi - lo) + 1;
    let w = word(b, usize::from(dw)) >> lo;
    if n >= 32 {
        w
    } else {
        w & ((1u32 << n) - 1)
    }
}

#[inline]
pub(crate) fn opcode_key(f: &FormatDef, b: &[u8]) -> u32 {
    f.op_bits.iter().fold(0u32, |k, &(dw, hi, lo)| {
        (k << (hi - lo + 1)) | field_bits(b, dw, hi, lo)
    })
}

/// Row of (format, key) in `ops` and its size in bytes, through the direct index `by_key`
/// (see `TargetDef::ops_by_key`; the size comes from the index, the row is not read).
#[inline]
fn lookup(
    ops: &'static [OpRow],
    by_key: &'static [&'static [u32]],
    fmt_idx: u8,
    key: u32,
) -> Option<(&'static OpRow, u8)> {
    let slot = *by_key.get(usize::from(fmt_idx))?.get(key as usize)?;
    let row = ops.get(usize::from(slot as u16).checked_sub(1)?)?;
    Some((row, (slot >> 16) as u8))
}

/// Opcode row of (format, key), its size in bytes (see `TargetDef::ops_by_key`) and whether it
/// came from the other mode's table. The selected mode's table is searched first; the other
/// mode's table is the fallback, so true16-only opcodes (gfx12 `v_mov_b16`) decode in either
/// mode.
#[inline]
fn find_row(target: Target, fmt_idx: u8, key: u32) -> Option<(&'static OpRow, u8, bool)> {
    let d = target.def();
    let main = || lookup(d.ops, d.ops_by_key, fmt_idx, key);
    let t16 = |t| lookup(t, d.ops_t16_by_key, fmt_idx, key);
    let (first, other) = match (d.ops_t16, target.true16()) {
        (Some(t), true) => (t16(t), main()),
        (Some(t), false) => (main(), t16(t)),
        (None, _) => (main(), None),
    };
    match first {
        Some((r, n)) => Some((r, n, false)),
        None => other.map(|(r, n)| (r, n, true)),
    }
}

/// The real-true16 row of (format, key), if the target has a real-true16 table and the opcode
/// is in it.
pub(crate) fn t16_row(target: Target, fmt_idx: u8, key: u32) -> Option<&'static OpRow> {
    let d = target.def();
    lookup(d.ops_t16?, d.ops_t16_by_key, fmt_idx, key).map(|(r, _)| r)
}

/// Per length in bytes (0 to `MAX_LEN`): the mask of each 8-byte word of an encoding that keeps
/// its first `len` bytes (little-endian), for [`copy_raw`] (a table lookup instead of shifts and
/// branches per word).
const KEEP_MASKS: [[u64; MAX_LEN / 8]; MAX_LEN + 1] = {
    let mut t = [[0u64; MAX_LEN / 8]; MAX_LEN + 1];
    let mut len = 0;
    while len <= MAX_LEN {
        let mut k = 0;
        while k < MAX_LEN / 8 {
            let keep = len.saturating_sub(8 * k);
            t[len][k] = if keep >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * keep)) - 1
            };
            k += 1;
        }
        len += 1;
    }
    t
};

/// The first `len` (<= `MAX_LEN`, <= `bytes.len()`) bytes of `bytes`, zero-padded to `MAX_LEN`.
/// Whole 8-byte loads and masks instead of a variable-length copy (the copy was a third of the
/// decoding time: a `memcpy` call followed by a store-forwarding stall).
#[inline]
fn copy_raw(bytes: &[u8], len: usize) -> [u8; MAX_LEN] {
    let mut raw = [0u8; MAX_LEN];
    match bytes.get(..MAX_LEN) {
        Some(src) => {
            let masks = &KEEP_MASKS[len.min(MAX_LEN)];
            for ((dst, src), mask) in raw.chunks_exact_mut(8).zip(src.chunks_exact(8)).zip(masks) {
                let mut c = [0u8; 8];
                c.copy_from_slice(src);
                dst.copy_from_slice(&(u64::from_le_bytes(c) & mask).to_le_bytes());
            }
        }
        None => {
            let n = len.min(bytes.len());
            raw[..n].copy_from_slice(&bytes[..n]);
        }
    }
    raw
}

/// Decodes the first instruction of `bytes` for `target`. Errors carry offset 0.
pub fn decode(bytes: &[u8], target: Target) -> Result<Instruction, DecodeError> {
    decode_at(bytes, target).map_err(|kind| DecodeError { offset: 0, kind })
}

fn decode_at(bytes: &[u8], target: Target) -> Result<Instruction, DecodeErrorKind> {
    if bytes.len() < 4 {
        return Err(DecodeErrorKind::Truncated {
            needed: 4,
            available: bytes.len(),
        });
    }
    let w0 = word(bytes, 0);
    let def = target.def();
    let fmt_idx = def.fmt_by_top9[(w0 >> 23) as usize];
    let fmt = def
        .formats
        .get(usize::from(fmt_idx))
        .ok_or(DecodeErrorKind::UnknownFormat { word: w0 })?;
    let nominal = usize::from(fmt.dwords) * 4;
    if bytes.len() < nominal {
        return Err(DecodeErrorKind::Truncated {
            needed: nominal,
            available: bytes.len(),
        });
    }
    let key = opcode_key(fmt, bytes);
    let (row, size, other_mode) =
        find_row(target, fmt_idx, key).ok_or(DecodeErrorKind::UnknownOpcode {
            format: fmt.name,
            opcode: key,
            word: w0,
        })?;
    let mut len = usize::from(size);
    // A literal is present when the table size exceeds the nominal size (fixed literal: madmk,
    // s_setreg_imm32_b32, ...) or a literal probe (field value 255, gfx1250 254 = 64-bit) matches.
    let mut lit: Option<(u8, u8)> = (len > nominal).then(|| (nominal as u8, (len - nominal) as u8));
    for (i, probe) in fmt.probes.iter().enumerate() {
        let hit = probe.iter().all(|&(fi, v)| {
            fmt.fields
                .get(usize::from(fi))
                .is_some_and(|f| field_bits(bytes, f.dw, f.hi, f.lo) == u32::from(v))
        });
        if !hit {
            continue;
        }
        let mut ps = usize::from(row.probe_sizes.get(i).copied().unwrap_or(0));
        // The table generator's single SDWA/DPP probe template can be rejected by LLVM for an
        // opcode that still has SDWA/DPP forms with other selects (e.g. gfx942
        // `v_cvt_pk_f32_fp8_sdwa ... src0_sel:WORD_0` in hand-written assembly). SDWA (src0 =
        // 249), DPP16 (250) and DPP8 (233/234) always add exactly one dword to a 32-bit VOP1/
        // VOP2/VOPC encoding (ISA manuals, "VOP_SDWA"/"VOP_DPP" microcode formats).
        let sdwa_dpp = probe
            .iter()
            .all(|&(_, v)| matches!(v, 249 | 250 | 233 | 234));
        if ps == 0 && sdwa_dpp && nominal == 4 {
            ps = nominal + 4;
        }
        // gfx11+ VOP3/VOP3P with src0 = 250 (DPP16) or 233/234 (DPP8): LLVM decodes the
        // VOP3 DPP forms (one extra dword for DPP8, two for DPP16) even for opcodes whose
        // template probe it rejected.
        let vop3_dpp = matches!(fmt.format, Format::Vop3 | Format::Vop3p)
            && target.family() >= Family::Gfx11
            && probe.len() == 1
            && fmt.fields.get(usize::from(probe[0].0)).map(|f| f.name) == Some("src0");
        if ps == 0 && vop3_dpp && probe[0].1 == 250 {
            ps = nominal + 8;
        } else if ps == 0 && vop3_dpp && matches!(probe[0].1, 233 | 234) {
            ps = nominal + 4;
        }
        // VOP1 `vdst = 255`: only SGPR-destination opcodes (v_readfirstlane_b32) read a
        // literal; a rejected probe says nothing about the other opcodes.
        let vdst_probe = fmt.format == Format::Vop1
            && probe
                .iter()
                .any(|&(fi, _)| fmt.fields.get(usize::from(fi)).map(|f| f.name) == Some("vdst"));
        if ps == 0 && vdst_probe {
            continue;
        }
        if ps == 0 {
            return Err(DecodeErrorKind::InvalidOperands {
                mnemonic: row.mnemonic,
                word: w0,
            });
        }
        // With both a 32-bit (255) and a gfx1250 64-bit (254) literal operand there is one
        // 64-bit literal, shared by both (LLVM AMDGPUDisassembler): keep the widest.
        let is_lit = probe.iter().any(|&(_, v)| v == 255 || v == 254);
        if is_lit && ps > nominal && lit.is_none_or(|(_, n)| usize::from(n) < ps - nominal) {
            lit = Some((nominal as u8, (ps - nominal) as u8));
        }
        len = len.max(ps);
    }
    match fmt.extra {
        Extra::None => {}
        Extra::NsaDwords(dw, hi, lo) => len += 4 * field_bits(bytes, dw, hi, lo) as usize,
        Extra::NsaFlag(dw, hi, lo) => len += 4 * field_bits(bytes, dw, hi, lo) as usize,
    }
    if bytes.len() < len {
        return Err(DecodeErrorKind::Truncated {
            needed: len,
            available: bytes.len(),
        });
    }
    if len > MAX_LEN {
        return Err(DecodeErrorKind::InvalidOperands {
            mnemonic: row.mnemonic,
            word: w0,
        });
    }
    // gfx950/gfx1250 VOP3PX2: a scale-load prefix followed by the MFMA/WMMA dwords that LLVM
    // requires (isa-tables/pairs.tsv) is one 16-byte instruction.
    let mut pair = 0u8;
    if fmt.format == Format::Vop3p && !def.pairs.is_empty() && bytes.len() >= 16 && len == 8 {
        let w = [w0, word(bytes, 1), word(bytes, 2), word(bytes, 3)];
        // LLVM also requires the matrix sources A and B (the second part's src0/src1, dword
        // 3) to be vector registers (value >= 256): with a scalar tuple it can reject the pair
        // and decode the prefix alone (gfx1250 `s[103:118]`, random test). Real code never
        // has them; such words decode as two instructions here.
        let ab_vgpr = w[3] & 0x1ff >= 256 && (w[3] >> 9) & 0x1ff >= 256;
        if let Some(i) = def.pairs.iter().position(|p| {
            ab_vgpr && p.prefix == key && (0..4).all(|k| w[k] & p.mask[k] == p.value[k])
        }) {
            pair = i as u8 + 1;
            len = 16;
        }
    }
    let raw = copy_raw(bytes, len);
    Ok(Instruction {
        raw,
        len: len as u8,
        target,
        fmt,
        row,
        lit,
        other_mode,
        pair,
    })
}

/// Decodes a whole code range; the first failure is returned with its byte offset.
/// The collected [`decode_iter`].
pub fn decode_all(bytes: &[u8], target: Target) -> Result<Vec<Instruction>, DecodeError> {
    // Every instruction is at least 4 bytes: this capacity never reallocates (pages of the
    // unused tail are never touched).
    let mut out = Vec::with_capacity(bytes.len() / 4);
    for i in decode_iter(bytes, target) {
        out.push(i?);
    }
    Ok(out)
}

/// Decodes a code range lazily, one instruction per step, without collecting: yields every
/// instruction in order, then ends; after a failure (an `Err` carrying the byte offset from the
/// start of `bytes`) it ends too. Same results as [`decode_all`].
pub fn decode_iter(bytes: &[u8], target: Target) -> DecodeIter<'_> {
    DecodeIter {
        bytes,
        offset: 0,
        target,
    }
}

/// Iterator returned by [`decode_iter`].
#[derive(Clone, Debug)]
pub struct DecodeIter<'a> {
    bytes: &'a [u8],
    /// Byte offset of the next instruction; `bytes.len()` once finished or failed.
    offset: usize,
    target: Target,
}

impl DecodeIter<'_> {
    /// Byte offset (from the start of the decoded range) of the next instruction; the range
    /// length once every instruction was yielded or decoding failed.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl Iterator for DecodeIter<'_> {
    type Item = Result<Instruction, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.bytes.get(self.offset..).filter(|r| !r.is_empty())?;
        match decode_at(rest, self.target) {
            Ok(i) => {
                self.offset += i.len();
                Some(Ok(i))
            }
            Err(kind) => {
                let offset = self.offset;
                self.offset = self.bytes.len();
                Some(Err(DecodeError { offset, kind }))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.bytes.len().saturating_sub(self.offset);
        // At least one item (an instruction or the error) while bytes remain; at most one per
        // 4 bytes (the shortest instruction), a final error included.
        (usize::from(left > 0), Some(left.div_ceil(4)))
    }
}

impl std::iter::FusedIterator for DecodeIter<'_> {}

/// Whether `row` (from [`Instruction::e32_half_row`]) gives the operand in format field `field`
/// width 0: a 16-bit VGPR half.
fn half_operand(row: Option<&'static OpRow>, field: u8) -> bool {
    row.is_some_and(|r| r.operands.iter().any(|o| o.field == field && o.width == 0))
}

fn sext16(v: u32) -> i64 {
    i64::from(v as u16 as i16)
}
