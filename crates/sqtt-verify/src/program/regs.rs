//! The registers each instruction reads and writes, decoded once and shared by every check,
//! and the hasher that interns them.

use amdgpu_isa::{Family, Instruction, RegSet, Special, SpecialReg};

/// The registers an instruction reads and writes, as far as the checks ask (SGPR liveness,
/// M0/SCC liveness, descriptor register usage, the whitelist of inserted code): decoded once per
/// original and per inserted instruction (`Instruction::reads` / `writes`, the decoder's explicit
/// and implicit operands at full width) and shared by every check, instead of a decode per check
/// and per fixed-point iteration. 40 bytes per instruction (8-byte aligned: the `u128` masks
/// would otherwise round every [`OInst`] up to a multiple of 16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C, packed(8))]
pub(crate) struct Regs {
    /// SGPRs read: bit `n` is `s<n>` (`RegSet::sgpr_bits`).
    pub sgpr_reads: u128,
    /// SGPRs written.
    pub sgpr_writes: u128,
    /// Highest VGPR and AGPR number read or written, plus one (0: none).
    pub vgpr_top: u16,
    pub agpr_top: u16,
    /// [`Regs::M0_READ`] .. [`Regs::INDEXED`].
    flags: u16,
}

impl Regs {
    pub const M0_READ: u16 = 1;
    pub const M0_WRITE: u16 = 2;
    pub const SCC_READ: u16 = 4;
    pub const SCC_WRITE: u16 = 8;
    pub const VCC_READ: u16 = 16;
    pub const VCC_WRITE: u16 = 32;
    /// Reads a trap temporary (TTMP).
    pub const TTMP_READ: u16 = 64;
    /// Writes nothing but SGPRs s0..s105, M0 and SCC (`insn::writes_only` with every SGPR).
    pub const SCALAR_WRITES: u16 = 128;
    /// `s_movrels*`: reads an SGPR chosen by M0 (`sgprs`: reads every SGPR).
    pub const MOVRELS: u16 = 256;
    /// `s_movreld*`: writes an SGPR chosen by M0 (`sgprs`: writes every SGPR, kills none).
    pub const MOVRELD: u16 = 512;
    /// `s_cmov*`: a conditional write (`sgprs`: kills nothing).
    pub const CMOV: u16 = 1024;
    /// An SMEM instruction or `s_sendmsg_rtn*`: its SGPR result arrives later (`sgprs`).
    pub const ASYNC_RESULT: u16 = 2048;
    /// Indexes VGPRs ([`indexed`]).
    pub const INDEXED: u16 = 4096;
    /// A call (`Flow::Call`: `s_swappc`, `s_call`): it clobbers M0 and SCC for the liveness
    /// checks, and its callee is resolved from the instruction.
    pub const CALL: u16 = 8192;
    /// Drains every pending SMEM result (`sgprs`: `s_waitcnt` with LGKM_CNT 0, ...).
    pub const SMEM_DRAINED: u16 = 16384;
    /// Control flows only to the next instruction (`Flow::Fallthrough`), with no PC-relative
    /// target and not `s_call_*`: the CFG and the branch checks have nothing to ask it.
    pub const PLAIN: u16 = 32768;

    /// The summary of the sets instruction `i` reads (`r`) and writes (`w`), with the facts of
    /// its mnemonic the checks ask per fixed-point round (asked once here, not once per round).
    pub fn of(i: &Instruction, r: &RegSet, w: &RegSet) -> Regs {
        let top = |m: Option<u16>| m.map_or(0, |x| x + 1);
        let u = r.union(w);
        let flag = |set: &RegSet, reg: SpecialReg, bit: u16| {
            if set.contains(reg) {
                bit
            } else {
                0
            }
        };
        let when = |c: bool, bit: u16| if c { bit } else { 0 };
        let m = i.mnemonic();
        Regs {
            sgpr_reads: r.sgpr_bits(),
            sgpr_writes: w.sgpr_bits(),
            vgpr_top: top(u.max_vgpr()),
            agpr_top: top(u.max_agpr()),
            flags: flag(r, SpecialReg::M0, Regs::M0_READ)
                | flag(w, SpecialReg::M0, Regs::M0_WRITE)
                | flag(r, SpecialReg::Scc, Regs::SCC_READ)
                | flag(w, SpecialReg::Scc, Regs::SCC_WRITE)
                | flag(r, SpecialReg::VccLo, Regs::VCC_READ)
                | flag(r, SpecialReg::VccHi, Regs::VCC_READ)
                | flag(w, SpecialReg::VccLo, Regs::VCC_WRITE)
                | flag(w, SpecialReg::VccHi, Regs::VCC_WRITE)
                | when((0..16).any(|t| r.contains_ttmp(t)), Regs::TTMP_READ)
                | when(
                    crate::program::insn::set_within(w, &crate::program::insn::every_sgpr()),
                    Regs::SCALAR_WRITES,
                )
                | when(m.starts_with("s_movrels"), Regs::MOVRELS)
                | when(m.starts_with("s_movreld"), Regs::MOVRELD)
                | when(m.starts_with("s_cmov"), Regs::CMOV)
                | when(
                    i.format() == amdgpu_isa::Format::Smem || m.starts_with("s_sendmsg_rtn"),
                    Regs::ASYNC_RESULT,
                )
                | when(indexed(i), Regs::INDEXED)
                | when(i.flow() == amdgpu_isa::Flow::Call, Regs::CALL)
                | when(smem_drained(i), Regs::SMEM_DRAINED)
                | when(
                    i.flow() == amdgpu_isa::Flow::Fallthrough
                        && i.branch_target(0).is_none()
                        && !matches!(m, "s_call_b64" | "s_call_i64"),
                    Regs::PLAIN,
                ),
        }
    }

    /// Decodes `i`'s registers.
    pub fn of_inst(i: &Instruction) -> Regs {
        {
            let (r, w) = i.reads_writes();
            Regs::of(i, &r, &w)
        }
    }

    /// Whether the flag bit `f` (one of the constants above) is set.
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    /// The scalar registers the hazard rules without a window follow.
    pub fn sgpr_use(&self) -> amdgpu_isa::hazard::SgprUse {
        amdgpu_isa::hazard::SgprUse {
            reads: self.sgpr_reads,
            writes: self.sgpr_writes,
            m0_read: self.has(Regs::M0_READ),
            m0_write: self.has(Regs::M0_WRITE),
            vcc_read: self.has(Regs::VCC_READ),
            vcc_write: self.has(Regs::VCC_WRITE),
        }
    }

    /// Highest SGPR number read or written, plus one (0: none).
    pub fn sgpr_top(&self) -> u16 {
        128 - (self.sgpr_reads | self.sgpr_writes).leading_zeros() as u16
    }
}

/// A multiply-rotate hasher for interning [`Regs`], encodings and [`amdgpu_isa::Shape`]s: the
/// keys come from the decoder, not from an adversary, and the default SipHash costs several
/// times as much per 38-byte key.
#[derive(Default)]
pub(crate) struct RegsHasher(u64);

impl RegsHasher {
    /// Odd 64-bit multiplier (2^64 / golden ratio).
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for RegsHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_u128(&mut self, v: u128) {
        self.add(v as u64);
        self.add((v >> 64) as u64);
    }
}

pub(crate) type BuildRegsHasher = std::hash::BuildHasherDefault<RegsHasher>;

/// Whether `i` may address VGPRs other than its operands: M0- or mode-indexed VGPRs
/// (`v_movrel*`, gfx9 `s_set_gpr_idx_*`), gfx1250 VGPR banks (`s_set_vgpr_msb`), gfx12+ dynamic
/// VGPR allocation (`s_alloc_vgpr`).
pub(crate) fn indexed(i: &Instruction) -> bool {
    let m = i.mnemonic();
    m.starts_with("v_movrel")
        || m.starts_with("s_set_gpr_idx")
        || m == "s_set_vgpr_msb"
        || m == "s_alloc_vgpr"
}

/// LGKM_CNT field of `s_waitcnt` simm16 per family (ISA manuals "S_WAITCNT").
pub(crate) fn smem_drained(i: &Instruction) -> bool {
    let simm = i.field("simm16");
    match i.mnemonic() {
        "s_waitcnt" => {
            let Some(v) = simm else { return false };
            let lgkm = match i.target().family() {
                Family::Gfx9 => v >> 8 & 0xf,
                Family::Gfx10 => v >> 8 & 0x3f,
                Family::Gfx11 => v >> 4 & 0x3f,
                _ => 1,
            };
            lgkm == 0
        }
        "s_waitcnt_lgkmcnt" => i.field("sdst") == Some(125) && simm == Some(0),
        "s_wait_kmcnt" => simm == Some(0),
        _ => i.special() == Special::EndPgm,
    }
}

/// Bit `n` is `s<n>`.
pub(crate) type Mask = u128;

/// s0..s105.
pub(crate) const EVERY: Mask = (1u128 << 106) - 1;

/// SGPRs `r` reads (every SGPR for `s_movrels*`, whose source M0 chooses).
pub(crate) fn reads(r: &Regs) -> Mask {
    if r.has(Regs::MOVRELS) {
        EVERY
    } else {
        r.sgpr_reads
    }
}

/// SGPRs `r` writes (every SGPR for `s_movreld*`, whose destination M0 chooses).
pub(crate) fn writes(r: &Regs) -> Mask {
    if r.has(Regs::MOVRELD) {
        EVERY
    } else {
        r.sgpr_writes
    }
}
