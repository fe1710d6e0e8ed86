//! Table-driven decoding: format by dword-0 match, opcode by the format's opcode bits, length
//! from LLVM-measured sizes (base + literal/DPP/SDWA probes + NSA dwords).
use crate::regs::{RegSet, SpecialReg};
use crate::tables::*;
use crate::{Family, Flow, Format, InstClass, Special, Target};

mod mem;
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
    fn e32_half_row(&self) -> Option<&'static OpRow> {
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
    fn dpp_src0_regs(&self, set: &mut RegSet) {
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

    fn regs(&self, defs: bool) -> RegSet {
        let [reads, writes] = self.regs_of([!defs, defs]);
        if defs {
            writes
        } else {
            reads
        }
    }

    /// Registers read (`[0]`) and written (`[1]`), each built when `want` asks for it (the
    /// operand shapes are worked out once for both).
    fn regs_of(&self, want: [bool; 2]) -> [RegSet; 2] {
        let mut sets = [RegSet::new(), RegSet::new()];
        // Two-part instructions: both parts' registers (the prefix reads the scale VGPRs).
        if self.pair != 0 {
            for p in (0..2).filter_map(|i| self.pair_part(i)) {
                let [r, w] = p.regs_of(want);
                sets[0].union_with(&r);
                sets[1].union_with(&w);
            }
            return sets;
        }
        let sregs = self.target.def().sregs;
        let b = self.bytes();
        // Image instructions: operand widths from dmask/d16/tfe/dim/a16/NSA (crate::image).
        let image = self.image_shape();
        if let Some(sh) = &image {
            for (d, set) in sets.iter_mut().enumerate() {
                if want[d] {
                    sh.add_regs(sregs, d == 1, set);
                }
            }
        }
        // FLAT family and buffers: operands the mode bits add (decode/mem.rs).
        let shape = self.mem_shape();
        if let Some(s) = &shape {
            if want[0] {
                if let Some((v, w)) = self.mem_extra_vaddr(s) {
                    (0..u16::from(w)).for_each(|i| sets[0].add_vgpr(v + i));
                }
                if s.lds {
                    sets[0].add(SpecialReg::M0);
                }
            }
            if want[1] {
                if let (true, Some(v)) = (self.flat_atomic_returns(), self.field("vdst")) {
                    let file_a = self.acc_data();
                    for i in 0..u16::from(self.flat_atomic_vdst_width()) {
                        if file_a {
                            sets[1].add_agpr(v as u16 + i)
                        } else {
                            sets[1].add_vgpr(v as u16 + i)
                        }
                    }
                }
            }
        }
        // The real-true16 row of a 32-bit VOP encoding, looked up once for every operand.
        let half_row = self.e32_half_row();
        for o in self
            .row
            .operands
            .iter()
            .filter(|o| want[usize::from(o.def)] && image.is_none())
        {
            let set = &mut sets[usize::from(o.def)];
            let Some(f) = self.fmt.fields.get(usize::from(o.field)) else {
                continue;
            };
            let v = field_bits(b, f.dw, f.hi, f.lo) as u16;
            let mut width = self.f8f6f4_width(f.name).unwrap_or(o.width.max(1));
            // 16-bit operands of 32-bit VOP encodings: bit 7 selects the half of v0..v127.
            let half = |n: u16| {
                if half_operand(half_row, o.field) {
                    n & 0x7f
                } else {
                    n
                }
            };
            if self.fmt.format == Format::Exp && !self.exp_source_enabled(f.name) {
                continue;
            }
            // Memory instructions: operands the mode bits remove or widen (decode/mem.rs).
            if let Some(s) = &shape {
                match self.mem_operand_width(s, f.name, width) {
                    Some(w) => width = w,
                    None => continue,
                }
            }
            match (f.kind, o.file) {
                (FieldKind::Sx2, _) => (0..u16::from(width)).for_each(|i| set.add_sgpr(v * 2 + i)),
                (FieldKind::Sx4, _) => (0..u16::from(width)).for_each(|i| set.add_sgpr(v * 4 + i)),
                (FieldKind::V9, _) if v >= 256 => {
                    for i in 0..u16::from(width) {
                        if o.file == RegFile::Agpr || self.mai_acc(f.name) {
                            set.add_agpr(v - 256 + i)
                        } else {
                            set.add_vgpr(half(v - 256) + i)
                        }
                    }
                }
                // gfx90a+ `acc` bit of memory encodings, and MFMA `acc`/`acc_cd`: AGPR operands.
                (FieldKind::V8, RegFile::Vgpr)
                    if (self.acc_data()
                        && matches!(f.name, "vdata" | "vdst" | "data" | "data0" | "data1"))
                        || self.mai_acc(f.name) =>
                {
                    (0..u16::from(width)).for_each(|i| set.add_agpr(v + i))
                }
                (FieldKind::V8, RegFile::Vgpr) => {
                    (0..u16::from(width)).for_each(|i| set.add_vgpr(half(v) + i))
                }
                (FieldKind::V8, RegFile::Agpr) => {
                    (0..u16::from(width)).for_each(|i| set.add_agpr(v + i))
                }
                (FieldKind::Imm, _) => {}
                _ => set.add_scalar(sregs, v, width),
            }
        }
        if want[0] && image.is_none() {
            self.dpp_src0_regs(&mut sets[0]);
        }
        // SMEM offset SGPR: not a table operand (the tables list the immediate-offset forms).
        if let (true, Some(v)) = (want[0], self.smem_soffset()) {
            sets[0].add_scalar(sregs, v, 1);
        }
        // gfx9/gfx10 scalar atomics with `glc` (dword0 bit 16) return the old value into
        // `sdata` (LLVM `SM_Pseudo_Atomics` `_RTN` forms: `sdst` tied to `sdata`).
        if want[1]
            && self.fmt.format == Format::Smem
            && self.row.mnemonic.contains("_atomic_")
            && self.target.family() <= Family::Gfx10
            && self.word(0) & (1 << 16) != 0
        {
            if let Some((v, w)) = self.operand_reg("sdata") {
                sets[1].add_scalar(sregs, v, w);
            }
        }
        // VOPD: vdstY = (field << 1) | !(vdstX & 1) (LLVM VOPDInstructions.td).
        // The Y accumulators (v_dual_fmac_f32, v_dual_dot2acc_*) also read vdstY: src2Y is tied
        // to vdstY (`VOPD_Base` hasSrc2AccY); the X side's tie is in the table.
        let y_acc = matches!(
            self.row.mnemonic_y,
            "v_dual_fmac_f32" | "v_dual_dot2acc_f32_f16" | "v_dual_dot2acc_f32_bf16"
        );
        if self.fmt.format == Format::Vopd {
            if let (Some(y), Some(x)) = (self.field("vdsty"), self.field("vdstx")) {
                let v = ((y << 1) | (!x & 1)) as u16;
                if want[1] {
                    sets[1].add_vgpr(v);
                }
                if want[0] && y_acc {
                    sets[0].add_vgpr(v);
                }
            }
        }
        for (d, set) in sets.iter_mut().enumerate() {
            if !want[d] {
                continue;
            }
            let imp = if d == 1 {
                self.row.imp_defs
            } else {
                self.row.imp_uses
            };
            let wave32_vcc = self.target.family() >= Family::Gfx10 && imp & IMP_VCC_LO != 0;
            if imp & IMP_EXEC != 0 {
                set.add(SpecialReg::ExecLo);
                set.add(SpecialReg::ExecHi);
            }
            if imp & IMP_EXEC_LO != 0 {
                set.add(SpecialReg::ExecLo);
            }
            if imp & IMP_VCC != 0 {
                set.add(SpecialReg::VccLo);
                set.add(SpecialReg::VccHi);
            }
            if wave32_vcc {
                set.add(SpecialReg::VccLo);
            }
            if imp & IMP_SCC != 0 {
                set.add(SpecialReg::Scc);
            }
            if imp & IMP_M0 != 0 {
                set.add(SpecialReg::M0);
            }
            if imp & IMP_MODE != 0 {
                set.add(SpecialReg::Mode);
            }
            if imp & IMP_FLAT_SCR != 0 {
                set.add(SpecialReg::FlatScratchLo);
                set.add(SpecialReg::FlatScratchHi);
            }
        }
        sets
    }

    /// Registers read, explicit and implicit (LLVM implicit uses), full widths. Implicit VCC/EXEC
    /// are reported as both halves (the tables are wave64-neutral).
    pub fn reads(&self) -> RegSet {
        self.regs(false)
    }

    /// Registers written, explicit and implicit (LLVM implicit defs), full widths.
    pub fn writes(&self) -> RegSet {
        self.regs(true)
    }

    /// [`Instruction::reads`] and [`Instruction::writes`] together, the operand shapes worked
    /// out once.
    pub fn reads_writes(&self) -> (RegSet, RegSet) {
        let [r, w] = self.regs_of([true, true]);
        (r, w)
    }

    /// The opcode's operand encoded in field `name` and that field's index in the format, when
    /// the opcode has one (the format may define fields an opcode does not use).
    pub(crate) fn operand_of(&self, name: &str) -> Option<(usize, &'static OperandDef)> {
        let fi = self.fmt.fields.iter().position(|f| f.name == name)?;
        let o = self
            .row
            .operands
            .iter()
            .find(|o| usize::from(o.field) == fi)?;
        Some((fi, o))
    }

    fn operand_reg(&self, name: &str) -> Option<(u16, u8)> {
        let (fi, o) = self.operand_of(name)?;
        let f = &self.fmt.fields[fi];
        let v = field_bits(self.bytes(), f.dw, f.hi, f.lo) as u16;
        let v = match f.kind {
            FieldKind::Sx2 => v * 2,
            FieldKind::Sx4 => v * 4,
            _ => v,
        };
        Some((v, o.width.max(1)))
    }

    /// Buffer `(offen, idxen)` bits: gfx9/gfx10 dword0 bits 12/13, gfx11 dword1 bits 22/23,
    /// gfx12 VBUFFER dword1 bits 30/31 (ISA manuals, MUBUF/VBUFFER microcode formats).
    pub(crate) fn buffer_addr_mode(&self) -> (bool, bool) {
        match self.target.family() {
            Family::Gfx9 | Family::Gfx10 => {
                (self.word(0) & (1 << 12) != 0, self.word(0) & (1 << 13) != 0)
            }
            Family::Gfx11 => (self.word(1) & (1 << 22) != 0, self.word(1) & (1 << 23) != 0),
            _ => (self.word(1) & (1 << 30) != 0, self.word(1) & (1 << 31) != 0),
        }
    }

    /// Does this SMEM opcode take an address (`sbase` or PC-relative) and so an offset?
    /// (`s_dcache_inv`, `s_memtime`, ... have none.)
    pub(crate) fn smem_addressed(&self) -> bool {
        self.fmt.format == Format::Smem
            && (self.operand_reg("sbase").is_some() || self.row.mnemonic.ends_with("_pc_rel"))
    }

    /// SMEM offset register (encoded scalar operand number), if the encoding selects one.
    /// gfx9 (Vega ISA "SMEM" microcode format): `imm` dword0 bit 17, `soe` bit 14; `soe` takes
    /// the SGPR from dword1 bits 31:25, `imm = 0` without `soe` from the offset field (bits
    /// 6:0). gfx10+ (RDNA ISA manuals): dword1 bits 31:25, `null` selecting none (gfx9 keeps
    /// `null`, which reads no register).
    pub(crate) fn smem_soffset(&self) -> Option<u16> {
        if !self.smem_addressed() {
            return None;
        }
        let w0 = self.word(0);
        let w1 = self.word(1);
        if self.target.family() == Family::Gfx9 {
            // gfx9 `soe`/`imm = 0` select the register form even for `null` (LLVM prints
            // `null offset:...`).
            return match (w0 & (1 << 17) != 0, w0 & (1 << 14) != 0) {
                (_, true) => Some((w1 >> 25) as u16),
                (false, false) => Some((w1 & 0x7f) as u16),
                (true, false) => None,
            };
        }
        let v = w1 >> 25;
        let sregs = self.target.def().sregs;
        (sregs.get(v as usize).copied() != Some("null")).then_some(v as u16)
    }

    /// Memory access of DS, FLAT/GLOBAL/SCRATCH, buffer, image and SMEM instructions.
    pub fn memory(&self) -> Option<MemAccess> {
        let kind = mem_kind(
            self.row.mnemonic,
            self.row.mcid & MCID_LOAD != 0,
            self.row.mcid & MCID_STORE != 0,
        );
        let space = match self.format() {
            Format::Flat => MemSpace::Flat,
            Format::Global => MemSpace::Global,
            Format::Scratch => MemSpace::Scratch,
            Format::Mubuf | Format::Mtbuf | Format::Vbuffer => {
                let (offen, idxen) = self.buffer_addr_mode();
                MemSpace::Buffer { offen, idxen }
            }
            Format::Mimg | Format::Vimage | Format::Vsample => MemSpace::Image,
            Format::Ds if self.ds_gds() => MemSpace::Gds,
            Format::Ds => MemSpace::Lds,
            Format::Ldsdir => MemSpace::Lds,
            Format::Smem => MemSpace::Scalar,
            _ => return None,
        };
        let image = self.image_shape().map(|sh| sh.addrs[0]);
        let (vaddr, saddr) = match self.mem_shape() {
            // FLAT family and buffers: the mode bits decide (decode/mem.rs).
            Some(s) => {
                let vaddr = match self.fmt.format {
                    Format::Flat => self.field("addr"),
                    _ => self.field("vaddr"),
                };
                let saddr = self.field("saddr");
                (
                    vaddr.zip(s.vaddr).map(|(v, w)| (v as u16, w)),
                    saddr.zip(s.saddr).map(|(v, w)| (v as u16, w)),
                )
            }
            None => (
                image
                    .or_else(|| self.operand_reg("addr"))
                    .or_else(|| self.operand_reg("vaddr"))
                    .or_else(|| self.operand_reg("vaddr0")),
                self.operand_reg("saddr")
                    .or_else(|| self.operand_reg("sbase")),
            ),
        };
        let soffset = self
            .operand_reg("soffset")
            .map(|(v, _)| v)
            .or_else(|| self.smem_soffset());
        let srsrc = self.operand_reg("srsrc");
        let ds_offsets = (self.fmt.format == Format::Ds).then(|| {
            (
                (self.word(0) & 0xff) as u8,
                ((self.word(0) >> 8) & 0xff) as u8,
            )
        });
        Some(MemAccess {
            space,
            kind,
            vaddr,
            saddr,
            soffset,
            srsrc,
            ds_offsets,
        })
    }
}
