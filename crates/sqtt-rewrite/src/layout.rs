//! Lay out and encode the new `.text`: every original instruction in its original order, inserted
//! snippets in front of the instructions they belong to, kernel entries re-aligned to 256 bytes,
//! and every PC-relative field recomputed for the new addresses.
//!
//! Relocated fields (shared/notes/rewriting.md, "Layout and relocation"):
//! - SOPP branches and `s_call_b64`: simm16 in dwords from the next instruction;
//! - `s_getpc_b64`/`s_get_pc_i64` address builders: the literal(s) of the adds that follow, which
//!   are relative to the address after the `s_getpc` (4 bytes after its start).
//!
//! Landing rule: a branch to an original instruction lands on the first inserted instruction in
//! front of it (so barrier and exit markers run on every path), except for instructions inserted
//! with [`Landing::After`] (function entry markers), which a branch skips: a loop back to a
//! function's first instruction must not enter the scope twice.

mod item;

use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{Family, Instruction, Target};
use item::{
    AddPc64, BranchToIsland, CallEntry, Fixed, Island, Item, Part, PcRelPart, Resolver, ShortBranch,
};
use thiserror::Error;

/// `s_nop 0`: the padding word lld writes between functions (same on gfx9..gfx12; checked with
/// llvm-objdump-22 on the corpus).
pub const PAD_WORD: u32 = 0xbf80_0000;

/// Where branches to the next original instruction land relative to an inserted instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// Branches land on (or before) this inserted instruction: it runs on every path.
    Before,
    /// Branches land after this inserted instruction (function entry markers).
    After,
    /// Runs only on the branch edge of original instruction `.0` (index in its function): the
    /// instruction goes into that SOPP branch's landing block ([`Piece::Island`] with
    /// `markers`), never in front of an instruction.
    Edge(usize),
}

/// Whether inserted code may contain new branches (long-branch islands, landing blocks) on `t`:
/// not on gfx1010-gfx1013, which have the LDS → branch → VMEM hazard (LLVM GCNHazardRecognizer
/// `checkLdsBranchVmemWARHazard`): a new branch would need `s_waitcnt_vscnt null, 0` waits.
pub fn may_add_branches(t: Target) -> bool {
    !matches!(
        t.name(),
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
    )
}

/// What a PC-relative address builder points at, which decides how its target is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcRelUse {
    /// A call or a pointer to code: maps to the start of the target's inserted block.
    Call,
    /// A jump inside a function (long branch): maps with the landing rule.
    Branch,
    /// Data outside `.text`: the address does not move.
    Data,
}

/// One `s_getpc` address builder (a "PC-relative idiom").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcRel {
    /// Original address of the `s_getpc_b64` / `s_get_pc_i64` (bytes).
    pub getpc_addr: u64,
    /// Original absolute target address (bytes).
    pub target: u64,
    /// How the target is mapped.
    pub use_kind: PcRelUse,
}

/// What the layout must recompute in an original instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloc {
    /// Nothing PC-relative.
    None,
    /// SOPP branch / `s_call_b64` to an original address.
    Branch {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// `s_call_b64` to a function entry: lands on the entry's inserted block (entry marker runs).
    Call {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// A relaxed SOPP branch: it now targets long-branch island `island` (see
    /// [`Piece::Island`]), which jumps to the original target.
    ToIsland {
        /// Index of the island among the plan's [`Piece::Island`]s, in output order.
        island: usize,
    },
    /// gfx1250 `s_add_pc_i64` with a 64-bit literal: offset from the next instruction.
    AddPc {
        /// Original absolute target (bytes).
        target: u64,
    },
    /// Low 32 bits of idiom `idiom`'s offset, in this instruction's 32-bit literal.
    PcRelLo {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
    /// High 32 bits of the offset (literal or inline constant 0 / -1 in SOP2 `ssrc1`).
    PcRelHi {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
    /// The whole 64-bit offset in a 64-bit literal (gfx1250 `s_add_nc_u64`).
    PcRel64 {
        /// Index into [`TextPlan::pcrels`].
        idiom: usize,
    },
}

/// One element of the new `.text`, in output order.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Pad with [`PAD_WORD`] up to a multiple of this many bytes (power of two).
    Align(u64),
    /// New instruction, belonging to the next [`Piece::Orig`].
    Insert {
        /// The instruction.
        inst: Instruction,
        /// Branch landing rule.
        landing: Landing,
    },
    /// An original instruction.
    Orig {
        /// Original address (bytes).
        addr: u64,
        /// Decoded original.
        inst: Instruction,
        /// Field to recompute.
        reloc: Reloc,
    },
    /// Code trailing a SOPP branch that now targets it, ending in a jump to the branch's
    /// original address `target` (mapped with the landing rule): a long-branch island for a
    /// relaxed branch (`markers` empty, `long`), or a landing block (`markers` run on the branch
    /// edge only, then `s_branch`, or a long jump when the block's branch was relaxed).
    Island {
        /// Original address of the branch (bytes; names it when the jump is out of range).
        from: u64,
        /// Original absolute target (bytes).
        target: u64,
        /// Marker code of the edge, run before the jump.
        markers: Vec<Instruction>,
        /// Jump through SGPR pair `pair` ([`island_code`]) instead of `s_branch`.
        long: bool,
        /// First SGPR of the even-aligned pair the long jump may clobber (unused on gfx1250).
        pair: u8,
        /// Target processor (encodings).
        isa: Target,
        /// Start with `s_branch` over the island (the branch is conditional and its
        /// fall-through path must skip the island).
        skip: bool,
    },
    /// Original bytes copied verbatim (padding tails, data islands); addresses inside map by offset.
    Raw {
        /// Original address (bytes).
        addr: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
}

/// Everything needed to build the new `.text`.
#[derive(Debug, Clone, Default)]
pub struct TextPlan {
    /// Start address of `.text` (unchanged by the rewrite).
    pub text_addr: u64,
    /// Output order.
    pub pieces: Vec<Piece>,
    /// Address builders referenced by [`Reloc`] entries.
    pub pcrels: Vec<PcRel>,
}

/// Where one original instruction went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Original address.
    pub old: u64,
    /// Original length (bytes).
    pub len: u64,
    /// New address of the first instruction inserted in front of it (or of itself).
    pub block_start: u64,
    /// New address where branches to it land.
    pub landing: u64,
    /// New address of the instruction itself.
    pub new: u64,
}

/// The laid-out `.text`.
#[derive(Debug, Clone)]
pub struct Layout {
    /// New section contents.
    pub bytes: Vec<u8>,
    /// Every original instruction, sorted by original address.
    pub placed: Vec<Placed>,
    /// Raw regions: (old start, len, new start).
    pub raws: Vec<(u64, u64, u64)>,
    /// Original end of `.text` mapped to the new end.
    pub new_end: u64,
}

/// Layout failure: the rewrite cannot be encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A relocated branch target is not an original instruction start.
    #[error("branch at {at:#x} targets {target:#x}, which is not an instruction start")]
    BadTarget {
        /// Original address of the branch.
        at: u64,
        /// Its target.
        target: u64,
    },
    /// A SOPP branch no longer reaches its target (simm16, about ±128 KiB): relax it.
    #[error("branch at {at:#x} is out of simm16 range after insertion")]
    OutOfRange {
        /// Original address of the branch.
        at: u64,
    },
    /// Re-encoding failed.
    #[error("cannot re-encode instruction at {at:#x}: {why}")]
    Encode {
        /// Original address.
        at: u64,
        /// Encoder's message.
        why: String,
    },
}

impl Layout {
    fn find(&self, old: u64) -> Option<&Placed> {
        self.placed
            .binary_search_by_key(&old, |p| p.old)
            .ok()
            .map(|i| &self.placed[i])
    }

    /// Maps an original code address for calls, symbols, DWARF and relocations: instruction
    /// starts map to their block start, bytes inside an instruction or a raw region keep their
    /// offset. `None` for addresses outside the rewritten code.
    pub fn map_addr(&self, old: u64) -> Option<u64> {
        if let Some(p) = self.find(old) {
            return Some(p.block_start);
        }
        let i = self.placed.partition_point(|p| p.old <= old);
        if i > 0 {
            let p = &self.placed[i - 1];
            if old < p.old + p.len {
                return Some(p.new + (old - p.old));
            }
        }
        for &(start, len, new) in &self.raws {
            if old >= start && old < start + len {
                return Some(new + (old - start));
            }
        }
        None
    }

    /// Maps an original branch target with the landing rule; `None` if not an instruction start.
    pub fn map_branch(&self, old: u64) -> Option<u64> {
        self.find(old).map(|p| p.landing)
    }

    /// Where the original instruction at `old` now is (the instruction itself).
    pub fn new_inst_addr(&self, old: u64) -> Option<u64> {
        self.find(old).map(|p| p.new)
    }

    /// Maps the exclusive end address of an original range (a function's or a symbol's end).
    pub fn map_end(&self, old_end: u64, text_old_end: u64) -> Option<u64> {
        if old_end == text_old_end {
            return Some(self.new_end);
        }
        let i = self.placed.partition_point(|p| p.old < old_end);
        if i > 0 {
            let p = &self.placed[i - 1];
            if p.old + p.len == old_end {
                return Some(p.new + p.len);
            }
        }
        // The end of a raw region (a verbatim function's end) maps to the end of its copy.
        if let Some(&(_, len, n)) = self.raws.iter().find(|r| r.0 + r.1 == old_end) {
            return Some(n + len);
        }
        self.map_addr(old_end)
    }
}

/// Placeholder that forces a 32-bit literal when an island is first built (inline constants would
/// change the island's size between layout passes).
const FORCE_LITERAL: u32 = 0x1234_5678;

/// Code of a long-branch island at `at` jumping to `dest` (bytes), the same sequences LLVM 22's
/// branch relaxation emits (checked against the corpus' long-branch fixtures):
/// - gfx9/gfx10/gfx11: `s_getpc_b64 s[p:p+1]`, `s_add_u32 sp, sp, lo`, `s_addc_u32 sp+1, sp+1,
///   hi`, `s_setpc_b64 s[p:p+1]` (offset relative to the getpc address + 4);
/// - gfx12: the same with `s_add_co_u32`/`s_add_co_ci_u32` and `s_wait_alu depctr_sa_sdst(0)`
///   after the getpc and before the setpc;
/// - gfx1250: one `s_add_pc_i64` with a 64-bit literal (offset from the next instruction).
///
/// Clobbers SCC and the pair (not on gfx1250). The size never depends on `at`/`dest`.
pub fn island_code(t: Target, at: u64, dest: u64, pair: u8) -> Result<Vec<Instruction>, String> {
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    if t.family() == Family::Gfx1250 {
        let add = build::s_add_pc_i64(t, 0).map_err(e)?;
        let off = dest.wrapping_sub(at + add.len() as u64);
        return Ok(vec![add.with_literal(off).map_err(e)?]);
    }
    let gfx12 = t.family() == Family::Gfx12;
    // s_wait_alu depctr_sa_sdst(0): SALU SGPR write read by the next SALU (gfx12; llc-22 output).
    const SA_SDST0: u16 = 0xff9e;
    let off = dest.wrapping_sub(at + 4);
    let p = Operand::Sgpr(pair);
    let p1 = Operand::Sgpr(pair + 1);
    let mut code = vec![build::s_getpc_b64(t, pair).map_err(e)?];
    if gfx12 {
        code.push(build::s_wait_alu(t, SA_SDST0).map_err(e)?);
    }
    let lo = build::s_add_u32(t, p, p, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(lo.with_literal(off & 0xffff_ffff).map_err(e)?);
    let hi = build::s_addc_u32(t, p1, p1, Operand::Literal(FORCE_LITERAL)).map_err(e)?;
    code.push(hi.with_literal(off >> 32).map_err(e)?);
    if gfx12 {
        code.push(build::s_wait_alu(t, SA_SDST0).map_err(e)?);
    }
    code.push(build::s_setpc_b64(t, pair).map_err(e)?);
    Ok(code)
}

fn code_len(code: &[Instruction]) -> u64 {
    code.iter().map(|i| i.len() as u64).sum()
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Assigns addresses (pass 1: sizes), then has every piece encode itself at its address (pass
/// 2: [`item`]), giving the new `.text`. Errors name the original address of the instruction
/// that cannot be encoded, or the new address of a piece whose encoding changed size.
pub fn lay_out(plan: &TextPlan) -> Result<Layout, LayoutError> {
    // Pass 1: addresses.
    let mut addr = plan.text_addr;
    let mut new_addrs = Vec::with_capacity(plan.pieces.len());
    let mut placed = Vec::new();
    let mut raws = Vec::new();
    let mut run_start: Option<u64> = None;
    let mut landing: Option<u64> = None;
    let mut islands: Vec<u64> = Vec::new();
    for piece in &plan.pieces {
        match piece {
            Piece::Align(a) => {
                new_addrs.push(addr);
                addr = align_up(addr, *a);
            }
            Piece::Insert { inst, landing: l } => {
                new_addrs.push(addr);
                run_start.get_or_insert(addr);
                match l {
                    Landing::Before => {
                        landing.get_or_insert(addr);
                    }
                    Landing::After => landing = None,
                    // Never in front of an instruction (text plans put them in islands).
                    Landing::Edge(_) => {}
                }
                addr += inst.len() as u64;
            }
            Piece::Orig {
                addr: old, inst, ..
            } => {
                new_addrs.push(addr);
                let block_start = run_start.take().unwrap_or(addr);
                let land = landing.take().unwrap_or(addr);
                placed.push(Placed {
                    old: *old,
                    len: inst.len() as u64,
                    block_start,
                    landing: land,
                    new: addr,
                });
                addr += inst.len() as u64;
            }
            Piece::Island { .. } => {
                // Trails its branch: not part of the next instruction's block.
                new_addrs.push(addr);
                let island = island_of(piece).ok_or(LayoutError::BadTarget {
                    at: addr,
                    target: 0,
                })?;
                islands.push(island.entry(addr));
                addr += island.size()?;
            }
            Piece::Raw { addr: old, bytes } => {
                new_addrs.push(addr);
                run_start = None;
                landing = None;
                raws.push((*old, bytes.len() as u64, addr));
                addr += bytes.len() as u64;
            }
        }
    }
    placed.sort_by_key(|p| p.old);
    let mut layout = Layout {
        bytes: Vec::with_capacity((addr - plan.text_addr) as usize),
        placed,
        raws,
        new_end: addr,
    };
    // Pass 2: every item encodes itself at its address, in exactly the size pass 1 gave it.
    let mut out = Vec::with_capacity((addr - plan.text_addr) as usize);
    let resolver = Resolver {
        layout: &layout,
        pcrels: &plan.pcrels,
        islands: &islands,
    };
    let ends = new_addrs.iter().skip(1).chain(std::iter::once(&addr));
    for ((piece, &at), &end) in plan.pieces.iter().zip(&new_addrs).zip(ends) {
        encode_piece(piece, at, &resolver, &mut out)?;
        if plan.text_addr + out.len() as u64 != end {
            return Err(LayoutError::Encode {
                at,
                why: format!(
                    "encoded {} bytes where the layout has {}",
                    plan.text_addr + out.len() as u64 - at,
                    end - at
                ),
            });
        }
    }
    layout.bytes = out;
    Ok(layout)
}

/// The island item of a [`Piece::Island`] (`None` for other pieces).
fn island_of(piece: &Piece) -> Option<Island<'_>> {
    match piece {
        Piece::Island {
            from,
            target,
            markers,
            long,
            pair,
            isa,
            skip,
        } => Some(Island {
            from: *from,
            target: *target,
            markers,
            long: *long,
            pair: *pair,
            isa: *isa,
            skip: *skip,
        }),
        _ => None,
    }
}

/// Appends the bytes of `piece` placed at new address `at` (bytes): padding and raw bytes as
/// they are, everything else through its [`Item`] kind.
fn encode_piece(
    piece: &Piece,
    at: u64,
    r: &Resolver,
    out: &mut Vec<u8>,
) -> Result<(), LayoutError> {
    match piece {
        Piece::Align(a) => {
            let end = align_up(at, *a);
            for _ in (at..end).step_by(4) {
                out.extend_from_slice(&PAD_WORD.to_le_bytes());
            }
            Ok(())
        }
        Piece::Raw { bytes, .. } => {
            out.extend_from_slice(bytes);
            Ok(())
        }
        Piece::Insert { inst, .. } => Fixed(inst).encode(at, r, out),
        Piece::Island { .. } => island_of(piece)
            .ok_or(LayoutError::BadTarget { at, target: 0 })?
            .encode(at, r, out),
        Piece::Orig {
            addr: old,
            inst,
            reloc,
        } => {
            let old = *old;
            match *reloc {
                Reloc::None => Fixed(inst).encode(at, r, out),
                Reloc::Branch { target } => ShortBranch { old, inst, target }.encode(at, r, out),
                Reloc::ToIsland { island } => {
                    BranchToIsland { old, inst, island }.encode(at, r, out)
                }
                Reloc::Call { target } => CallEntry { old, inst, target }.encode(at, r, out),
                Reloc::AddPc { target } => AddPc64 { old, inst, target }.encode(at, r, out),
                Reloc::PcRelLo { idiom } | Reloc::PcRelHi { idiom } | Reloc::PcRel64 { idiom } => {
                    let part = match *reloc {
                        Reloc::PcRelLo { .. } => Part::Lo,
                        Reloc::PcRelHi { .. } => Part::Hi,
                        _ => Part::Whole,
                    };
                    PcRelPart {
                        old,
                        inst,
                        idiom,
                        part,
                    }
                    .encode(at, r, out)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::decode;

    /// `s_cbranch_scc0` at 0x1000 with a landing block `{s_ttracedata_imm 1; jump}` to the
    /// `s_nop 0` at `target`, then `nops` original `s_nop 0`s.
    fn plan(t: Target, nops: u64, target: u64, long: bool) -> TextPlan {
        let mut pieces = vec![
            Piece::Orig {
                addr: 0x1000,
                inst: build::s_cbranch_scc0(t, 0).unwrap(),
                reloc: Reloc::ToIsland { island: 0 },
            },
            Piece::Island {
                from: 0x1000,
                target,
                markers: vec![build::s_ttracedata_imm(t, 1).unwrap()],
                long,
                pair: 4,
                isa: t,
                skip: true,
            },
        ];
        for i in 0..nops {
            pieces.push(Piece::Orig {
                addr: 0x1004 + 4 * i,
                inst: build::s_nop(t, 0).unwrap(),
                reloc: Reloc::None,
            });
        }
        TextPlan {
            text_addr: 0x1000,
            pieces,
            pcrels: Vec::new(),
        }
    }

    fn at(l: &Layout, a: u64) -> Instruction {
        let off = (a - 0x1000) as usize;
        decode(&l.bytes[off..], Target::from_name("gfx1100").unwrap()).unwrap()
    }

    #[test]
    fn landing_block_runs_its_markers_then_jumps_to_the_target() {
        let t = Target::from_name("gfx1100").unwrap();
        let l = lay_out(&plan(t, 4, 0x1008, false)).unwrap();
        // branch → block at 0x1008 (after the skip); skip → the first original after the block.
        assert_eq!(at(&l, 0x1000).branch_target(0x1000), Some(0x1008));
        assert_eq!(at(&l, 0x1004).mnemonic(), "s_branch");
        assert_eq!(at(&l, 0x1004).branch_target(0x1004), Some(0x1010));
        assert_eq!(
            at(&l, 0x1008).special(),
            amdgpu_isa::Special::TtraceDataImm(1)
        );
        let dest = l.map_branch(0x1008).unwrap();
        assert_eq!(at(&l, 0x100c).branch_target(0x100c), Some(dest));
        assert_eq!(l.new_inst_addr(0x1004), Some(0x1010));
    }

    #[test]
    fn far_landing_block_is_out_of_range_until_its_jump_is_long() {
        let t = Target::from_name("gfx1100").unwrap();
        // 40,000 dwords: beyond simm16.
        let target = 0x1004 + 4 * 39_999;
        assert_eq!(
            lay_out(&plan(t, 40_000, target, false)).unwrap_err(),
            LayoutError::OutOfRange { at: 0x1000 }
        );
        let l = lay_out(&plan(t, 40_000, target, true)).unwrap();
        assert_eq!(
            at(&l, 0x1008).special(),
            amdgpu_isa::Special::TtraceDataImm(1)
        );
        // s_getpc_b64 s[4:5] at 0x100c; the adds' literals carry the offset from 0x1010.
        assert_eq!(at(&l, 0x100c).mnemonic(), "s_getpc_b64");
        let lo = at(&l, 0x1010).literal().unwrap();
        let hi = at(&l, 0x1018).literal().unwrap();
        let dest = 0x1010u64.wrapping_add((hi << 32) | lo);
        assert_eq!(Some(dest), l.map_branch(target));
        let skip = at(&l, 0x1004).branch_target(0x1004).unwrap();
        assert_eq!(Some(skip), l.new_inst_addr(0x1004));
    }
}
