//! The register use of every original instruction, computed once when a function is decoded
//! ([`crate::analysis::decode`]) and read by every later pass instead of decoding operands again
//! through [`Instruction::reads`] / [`Instruction::writes`].
//!
//! A [`RegUse`] is 40 bytes: the SGPRs read and written (s0..s105, bit `n` is `s<n>`), the
//! special-register facts the passes need (M0 and SCC), the highest VGPR/AGPR touched, and the
//! per-instruction rules of the SGPR liveness ([`crate::regs`]): M0-indexed reads and writes,
//! conditional writes, asynchronous SMEM results and waits for them.
//!
//! A function keeps its instructions' register use as [`RegUses`]: each distinct [`RegUse`] once,
//! and a 4-byte index per instruction (instructions with the same operands share one entry), so
//! the storage is about a tenth of one `RegUse` per instruction.

use crate::regs::{Sgprs, ALL_SGPRS};
use amdgpu_isa::{Family, Format, Instruction, Special, SpecialReg};

/// Register use of one instruction (40 bytes; see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegUse {
    /// SGPRs read, as [`amdgpu_isa::RegSet::sgpr_bits`] split in two words (8-byte alignment
    /// keeps the struct at 40 bytes).
    reads: [u64; 2],
    /// SGPRs written (explicit and implicit), same layout.
    writes: [u64; 2],
    /// Highest VGPR or AGPR number read or written, plus 1 (0: none).
    vector_top: u16,
    /// `F_*` bits.
    flags: u16,
}

/// Reads M0 by the rule of [`crate::analysis::m0_use_is_read`].
const F_READS_M0: u16 = 1;
/// Writes M0.
const F_WRITES_M0: u16 = 1 << 1;
/// Reads SCC.
const F_READS_SCC: u16 = 1 << 2;
/// Writes SCC.
const F_WRITES_SCC: u16 = 1 << 3;
/// `s_movrels*`: reads any SGPR through M0.
const F_MOVRELS: u16 = 1 << 4;
/// `s_movreld*`: writes any SGPR through M0 (and kills none).
const F_MOVRELD: u16 = 1 << 5;
/// `s_cmov*`: a conditional write that kills nothing.
const F_CMOV: u16 = 1 << 6;
/// SMEM or gfx11+ `s_sendmsg_rtn_*`: its SGPR results arrive asynchronously.
const F_ASYNC: u16 = 1 << 7;
/// Waits until every SMEM result has arrived ([`waits_for_smem`]).
const F_WAITS_SMEM: u16 = 1 << 8;
/// May address VGPRs other than its decoded operands ([`indexes_vgprs`]).
const F_INDEXES_VGPRS: u16 = 1 << 9;

fn split(s: Sgprs) -> [u64; 2] {
    [s as u64, (s >> 64) as u64]
}

fn join(w: [u64; 2]) -> Sgprs {
    u128::from(w[0]) | (u128::from(w[1]) << 64)
}

impl RegUse {
    /// Every field folded into 64 bits (for the sharing table of [`RegUses::of`]).
    fn fold(&self) -> u64 {
        self.reads[0]
            ^ self.reads[1].rotate_left(13)
            ^ self.writes[0].rotate_left(29)
            ^ self.writes[1].rotate_left(43)
            ^ (u64::from(self.vector_top) << 16 | u64::from(self.flags)).rotate_left(51)
    }

    /// The register use of `inst` (one call of [`Instruction::reads_writes`]).
    pub fn of(inst: &Instruction) -> RegUse {
        let (r, w) = inst.reads_writes();
        let m = inst.mnemonic();
        let top = [r.max_vgpr(), r.max_agpr(), w.max_vgpr(), w.max_agpr()]
            .into_iter()
            .flatten()
            .map(|n| n + 1)
            .max()
            .unwrap_or(0);
        let mut flags = 0;
        let mut flag = |on: bool, bit: u16| {
            if on {
                flags |= bit;
            }
        };
        flag(
            r.contains(SpecialReg::M0) && crate::analysis::m0_use_is_read(inst),
            F_READS_M0,
        );
        flag(w.contains(SpecialReg::M0), F_WRITES_M0);
        flag(r.contains(SpecialReg::Scc), F_READS_SCC);
        flag(w.contains(SpecialReg::Scc), F_WRITES_SCC);
        // Every mnemonic rule below but `v_movrel*` is about a scalar (`s_`) instruction.
        let scalar = m.starts_with("s_");
        flag(scalar && m.starts_with("s_movrels"), F_MOVRELS);
        flag(scalar && m.starts_with("s_movreld"), F_MOVRELD);
        flag(scalar && m.starts_with("s_cmov"), F_CMOV);
        flag(
            inst.format() == Format::Smem || (scalar && m.starts_with("s_sendmsg_rtn")),
            F_ASYNC,
        );
        flag(
            (scalar || inst.special() == Special::EndPgm) && waits_for_smem(inst),
            F_WAITS_SMEM,
        );
        flag(
            (scalar || m.starts_with("v_")) && indexes_vgprs(inst),
            F_INDEXES_VGPRS,
        );
        RegUse {
            reads: split(r.sgpr_bits()),
            writes: split(w.sgpr_bits()),
            vector_top: top,
            flags,
        }
    }

    fn has(&self, bit: u16) -> bool {
        self.flags & bit != 0
    }

    /// SGPRs the instruction's operands read ([`amdgpu_isa::RegSet::sgpr_bits`] of
    /// [`Instruction::reads`]).
    pub fn operand_reads(&self) -> Sgprs {
        join(self.reads)
    }

    /// SGPRs the instruction's operands write ([`amdgpu_isa::RegSet::sgpr_bits`] of
    /// [`Instruction::writes`]).
    pub fn operand_writes(&self) -> Sgprs {
        join(self.writes)
    }

    /// SGPRs the instruction reads (an `s_movrels*` reads any SGPR through M0).
    pub fn sgpr_reads(&self) -> Sgprs {
        if self.has(F_MOVRELS) {
            ALL_SGPRS
        } else {
            self.operand_reads()
        }
    }

    /// SGPRs the instruction may write (an `s_movreld*` writes any SGPR through M0).
    pub fn sgpr_writes(&self) -> Sgprs {
        if self.has(F_MOVRELD) {
            ALL_SGPRS
        } else {
            self.operand_writes()
        }
    }

    /// SGPRs the instruction certainly overwrites (a kill for liveness): none for conditional
    /// or M0-indexed writes (`s_cmov*`, `s_movreld*`).
    pub fn sgpr_kills(&self) -> Sgprs {
        if self.has(F_CMOV) || self.has(F_MOVRELD) {
            0
        } else {
            self.operand_writes()
        }
    }

    /// SGPRs written asynchronously: by SMEM loads (and `s_memtime`-style SMEM reads) and the
    /// gfx11+ `s_sendmsg_rtn_*`, which return through the LGKM / KM counter.
    pub fn async_writes(&self) -> Sgprs {
        if self.has(F_ASYNC) {
            self.operand_writes()
        } else {
            0
        }
    }

    /// Whether the instruction waits until every SMEM result has arrived ([`waits_for_smem`]).
    pub fn waits_for_smem(&self) -> bool {
        self.has(F_WAITS_SMEM)
    }

    /// Whether the instruction reads M0 ([`crate::analysis::m0_use_is_read`]).
    pub fn reads_m0(&self) -> bool {
        self.has(F_READS_M0)
    }

    /// Whether the instruction writes M0.
    pub fn writes_m0(&self) -> bool {
        self.has(F_WRITES_M0)
    }

    /// Whether the instruction reads SCC (explicitly or implicitly).
    pub fn reads_scc(&self) -> bool {
        self.has(F_READS_SCC)
    }

    /// Whether the instruction writes SCC (explicitly or implicitly).
    pub fn writes_scc(&self) -> bool {
        self.has(F_WRITES_SCC)
    }

    /// Highest VGPR or AGPR number the instruction reads or writes, plus 1 (0: none).
    pub fn vector_top(&self) -> u16 {
        self.vector_top
    }

    /// Whether the instruction may address VGPRs other than its decoded operands
    /// ([`indexes_vgprs`]).
    pub fn indexes_vgprs(&self) -> bool {
        self.has(F_INDEXES_VGPRS)
    }
}

/// Whether `inst` waits until every SMEM result has arrived: `s_waitcnt` with LGKM_CNT 0
/// (simm16 bits 11:8 on gfx9, 13:8 on gfx10, 9:4 on gfx11; ISA manuals "S_WAITCNT"),
/// `s_waitcnt_lgkmcnt null, 0` (gfx10/gfx11 SOPK), `s_wait_kmcnt 0` (gfx12+), or `s_endpgm`.
fn waits_for_smem(inst: &Instruction) -> bool {
    let imm = || inst.field("simm16").unwrap_or(u32::MAX);
    match inst.mnemonic() {
        "s_waitcnt" => {
            let lgkm = match inst.target().family() {
                Family::Gfx9 => (imm() >> 8) & 0xf,
                Family::Gfx10 => (imm() >> 8) & 0x3f,
                Family::Gfx11 => (imm() >> 4) & 0x3f,
                _ => return false,
            };
            lgkm == 0
        }
        // sdst 125 is `null` on gfx10/gfx11; any other SGPR adds its value to the count.
        "s_waitcnt_lgkmcnt" => inst.field("sdst") == Some(125) && imm() == 0,
        "s_wait_kmcnt" => imm() == 0,
        _ => inst.special() == Special::EndPgm,
    }
}

/// Whether `inst` may address VGPRs other than its decoded operands: M0- or mode-indexed VGPR
/// access (`v_movrel*`, gfx9 `s_set_gpr_idx_*`), gfx1250 VGPR bank selection (`s_set_vgpr_msb`)
/// or gfx12+ dynamic VGPR allocation (`s_alloc_vgpr`).
fn indexes_vgprs(inst: &Instruction) -> bool {
    let m = inst.mnemonic();
    [
        "v_movrel",
        "s_set_gpr_idx",
        "s_set_vgpr_msb",
        "s_alloc_vgpr",
    ]
    .iter()
    .any(|p| m.starts_with(p))
}

/// Multiplicative hashing with the 64-bit golden ratio (Knuth TAOCP 6.4), the high bits moved
/// down: a slot number from its low bits.
fn mix(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40
}

/// The register use of every instruction of one function, parallel to its instructions: the
/// distinct values once, and per instruction the index of its value (see the module
/// documentation). Indexing (`uses[i]`) and iteration give `&RegUse` like a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegUses {
    /// Every distinct value, in order of first use.
    distinct: Vec<RegUse>,
    /// Per instruction: index into `distinct`.
    of: Vec<u32>,
}

impl RegUses {
    /// The register use of `insts`, in order ([`RegUse::of`] each). Two direct-mapped tables
    /// (one slot per hash, the last entry seen) share work and storage: an instruction whose
    /// encoding (up to 16 bytes) was just seen takes that instruction's value without decoding
    /// its operands again (the register use depends on nothing but the encoding and the target),
    /// and a value seen before is stored once. A slot holding something else only costs a
    /// repeated value in `distinct`, never a wrong one.
    pub fn of(insts: impl ExactSizeIterator<Item = Instruction>) -> RegUses {
        // A power of two between 16 and 4096 slots, about one per instruction.
        let slots = insts.len().next_power_of_two().clamp(16, 1 << 12);
        let mut out = RegUses {
            distinct: Vec::new(),
            of: Vec::with_capacity(insts.len()),
        };
        // (encoding zero-padded to 16 bytes, length in bytes, index into `distinct`).
        let mut by_encoding: Vec<(u128, u8, u32)> = vec![(0, 0, u32::MAX); slots];
        let mut by_value = vec![u32::MAX; slots];
        for inst in insts {
            let b = inst.bytes();
            if b.len() > 16 {
                let k = out.share(RegUse::of(&inst), &mut by_value);
                out.of.push(k);
                continue;
            }
            let mut w = [0u8; 16];
            w[..b.len()].copy_from_slice(b);
            let enc = u128::from_le_bytes(w);
            let h = mix(enc as u64 ^ (enc >> 64) as u64 ^ b.len() as u64) as usize & (slots - 1);
            let k = match by_encoding[h] {
                (e, n, k) if k != u32::MAX && e == enc && usize::from(n) == b.len() => k,
                _ => {
                    let k = out.share(RegUse::of(&inst), &mut by_value);
                    by_encoding[h] = (enc, b.len() as u8, k);
                    k
                }
            };
            out.of.push(k);
        }
        out.distinct.shrink_to_fit();
        out
    }

    /// Index of `u` in `distinct`: the entry of its slot in `slot` (as many slots as `slot` has,
    /// a power of two) when that holds `u`, else a new entry that takes the slot.
    fn share(&mut self, u: RegUse, slot: &mut [u32]) -> u32 {
        let h = mix(u.fold()) as usize & (slot.len() - 1);
        match slot[h] {
            k if k != u32::MAX && self.distinct[k as usize] == u => k,
            _ => {
                let k = self.distinct.len() as u32;
                self.distinct.push(u);
                slot[h] = k;
                k
            }
        }
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.of.len()
    }

    /// No instruction.
    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// The register use of instruction `i`, `None` past the end.
    pub fn get(&self, i: usize) -> Option<&RegUse> {
        self.of.get(i).map(|&k| &self.distinct[k as usize])
    }

    /// The register use of every instruction, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            distinct: &self.distinct,
            of: self.of.iter(),
        }
    }
}

impl std::ops::Index<usize> for RegUses {
    type Output = RegUse;

    fn index(&self, i: usize) -> &RegUse {
        &self.distinct[self.of[i] as usize]
    }
}

impl<'a> IntoIterator for &'a RegUses {
    type Item = &'a RegUse;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over the register use of a function's instructions ([`RegUses::iter`]).
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    distinct: &'a [RegUse],
    of: std::slice::Iter<'a, u32>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a RegUse;

    fn next(&mut self) -> Option<&'a RegUse> {
        self.of.next().map(|&k| &self.distinct[k as usize])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.of.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_40_bytes() {
        assert_eq!(std::mem::size_of::<RegUse>(), 40);
    }

    #[test]
    fn shared_register_use_reads_back_per_instruction() {
        use amdgpu_isa::build::{self, Operand};
        let t = amdgpu_isa::Target::from_name("gfx1100").unwrap();
        let mov =
            |d: u8, v: u32| build::s_mov_b32(t, Operand::Sgpr(d), Operand::Literal(v)).unwrap();
        let insts: Vec<Instruction> = (0..300u32)
            .map(|i| match i % 3 {
                0 => mov(4, i),
                1 => mov(7, 1),
                _ => build::s_nop(t, 0).unwrap(),
            })
            .collect();
        let uses = RegUses::of(insts.iter().copied());
        assert_eq!(uses.len(), insts.len());
        for (i, inst) in insts.iter().enumerate() {
            assert_eq!(uses[i], RegUse::of(inst), "instruction {i}");
            assert_eq!(uses.get(i), Some(&uses[i]));
        }
        assert!(uses
            .iter()
            .eq(insts.iter().map(RegUse::of).collect::<Vec<_>>().iter()));
        assert_eq!(uses.get(insts.len()), None);
        // Three register uses (s4 written, s7 written, nothing) among 300 instructions.
        assert!(uses.distinct.len() <= 6, "{}", uses.distinct.len());
        assert_eq!(
            uses.iter()
                .filter(|u| u.sgpr_writes() >> 4 & 1 == 1)
                .count(),
            100
        );
    }
}
