//! The two layout passes (part of [`crate::layout`]): pass 1 assigns every piece its address
//! from the sizes, pass 2 has every item encode itself there ([`super::item`]).

use super::item::{
    AddPc64, BranchToIsland, CallEntry, Fixed, Island, Item, Part, PcRelPart, Resolver, ShortBranch,
};
use super::positions::{text_offset, Block, DataPart, Placed};
use super::{align_up, Landing, Layout, LayoutError, PcRelUse, Piece, Reloc, TextPlan, PAD_WORD};
use amdgpu_isa::Instruction;

/// Pass 1 state: where the next byte goes, and the block of inserted code waiting for its
/// original instruction.
struct Pass1 {
    addr: u64,
    run_start: Option<u64>,
    landing: Option<u64>,
}

impl Pass1 {
    /// An inserted instruction of `len` bytes with landing rule `l`.
    fn insert(&mut self, len: u64, l: Landing) {
        self.run_start.get_or_insert(self.addr);
        match l {
            Landing::Before => {
                self.landing.get_or_insert(self.addr);
            }
            Landing::After => self.landing = None,
            // Never in front of an instruction (text plans put them in islands).
            Landing::Edge(_) => {}
        }
        self.addr += len;
    }

    /// The original instruction at `old` of `len` bytes, recorded in `l`.
    fn orig(
        &mut self,
        text_addr: u64,
        old: u64,
        len: usize,
        l: &mut Layout,
    ) -> Result<(), LayoutError> {
        let new = self.addr;
        let block_start = self.run_start.take().unwrap_or(new);
        let land = self.landing.take().unwrap_or(new);
        let off = |a: u64| text_offset(text_addr, a, old);
        let p = Placed {
            old: off(old)?,
            new: off(new)?,
        };
        if block_start != new || land != new {
            l.blocks.push(Block {
                old: p.old,
                start: off(block_start)?,
                landing: off(land)?,
            });
        }
        l.placed.push(p);
        l.lens.push(len as u8);
        self.addr += len as u64;
        Ok(())
    }
}

/// Assigns addresses (pass 1: sizes), then has every piece encode itself at its address (pass 2:
/// [`item`](super::item)), giving the new `.text`. Errors name the original address of the
/// instruction that cannot be encoded, or the new address of a piece whose encoding changed size.
pub fn lay_out(plan: &TextPlan) -> Result<Layout, LayoutError> {
    let (text_addr, out_addr) = (plan.text_addr, plan.out_addr);
    // Pass 1: addresses.
    let mut p1 = Pass1 {
        addr: out_addr,
        run_start: None,
        landing: None,
    };
    let mut new_addrs = Vec::with_capacity(plan.pieces.len());
    let mut layout = Layout {
        bytes: Vec::new(),
        text_addr,
        out_addr,
        placed: Vec::new(),
        lens: Vec::new(),
        blocks: Vec::new(),
        trails: Vec::new(),
        kept: plan.kept.clone(),
        raws: Vec::new(),
        new_end: out_addr,
        data_parts: Vec::new(),
    };
    let mut islands: Vec<u64> = Vec::new();
    for piece in &plan.pieces {
        new_addrs.push(p1.addr);
        match piece {
            Piece::Align(a) => p1.addr = align_up(p1.addr, *a),
            Piece::Insert { code, landing } => {
                for inst in *code {
                    p1.insert(inst.len() as u64, *landing);
                }
            }
            Piece::Orig { insts, i, .. } => {
                p1.orig(text_addr, insts.addr(*i), insts.size(*i), &mut layout)?
            }
            Piece::Run { insts, range, .. } => {
                layout.placed.reserve(range.len());
                layout.lens.reserve(range.len());
                for i in range.clone() {
                    p1.orig(text_addr, insts.addr(i), insts.size(i), &mut layout)?;
                }
            }
            Piece::Island { .. } => {
                // Trails its branch: not part of the next instruction's block.
                let island = island_of(piece).ok_or(LayoutError::BadTarget {
                    at: p1.addr,
                    target: 0,
                })?;
                islands.push(island.entry(p1.addr));
                p1.addr += island.size()?;
                // The island trails the last original placed (its branch).
                if let Some(last) = layout.placed.last() {
                    let end = text_offset(text_addr, p1.addr, text_addr + u64::from(last.old))?;
                    match layout.trails.last_mut() {
                        Some(t) if t.0 == last.old => t.1 = end,
                        _ => layout.trails.push((last.old, end)),
                    }
                }
            }
            Piece::Raw { addr: old, bytes } => {
                p1.run_start = None;
                p1.landing = None;
                layout.raws.push((*old, bytes.len() as u64, p1.addr));
                p1.addr += bytes.len() as u64;
            }
        }
    }
    let addr = p1.addr;
    layout.new_end = addr;
    if !layout.placed.is_sorted_by_key(|p| p.old) {
        let mut both: Vec<(Placed, u8)> = layout
            .placed
            .iter()
            .copied()
            .zip(layout.lens.iter().copied())
            .collect();
        both.sort_by_key(|(p, _)| p.old);
        (layout.placed, layout.lens) = both.into_iter().unzip();
        layout.blocks.sort_by_key(|b| b.old);
        layout.trails.sort_by_key(|t| t.0);
    }
    // Pass 2: every item encodes itself at its address, in exactly the size pass 1 gave it.
    let mut p2 = Pass2 {
        r: Resolver {
            layout: &layout,
            pcrels: &plan.pcrels,
            islands: &islands,
        },
        out_addr,
        out: Vec::with_capacity((addr - out_addr) as usize),
        data_parts: Vec::new(),
        out_of_range: Vec::new(),
    };
    let ends = new_addrs.iter().skip(1).chain(std::iter::once(&addr));
    for ((piece, &at), &end) in plan.pieces.iter().zip(&new_addrs).zip(ends) {
        let result = p2.piece(piece, at);
        p2.go_on_if_out_of_range(result, at, end)?;
        p2.check(at, end)?;
    }
    if !p2.out_of_range.is_empty() {
        let mut at = p2.out_of_range;
        at.sort_unstable();
        at.dedup();
        return Err(LayoutError::OutOfRange { at });
    }
    let (bytes, data_parts) = (p2.out, p2.data_parts);
    layout.bytes = bytes;
    layout.data_parts = data_parts;
    Ok(layout)
}

/// Pass 2 state: the bytes so far, the adds of address builders of data seen, and the
/// branches found out of range so far.
struct Pass2<'l> {
    r: Resolver<'l>,
    /// Address of the first output byte.
    out_addr: u64,
    out: Vec<u8>,
    data_parts: Vec<DataPart>,
    out_of_range: Vec<u64>,
}

impl Pass2<'_> {
    /// Passes `result` of encoding what starts at new address `at` and ends at `end` (bytes)
    /// through, except an out-of-range branch: that is recorded, and its bytes become zeros of
    /// the size pass 1 gave them, so that the rest of the plan is checked too (the layout then
    /// fails with every such branch: [`LayoutError::OutOfRange`]).
    fn go_on_if_out_of_range(
        &mut self,
        result: Result<(), LayoutError>,
        at: u64,
        end: u64,
    ) -> Result<(), LayoutError> {
        match result {
            Err(LayoutError::OutOfRange { at: far }) => {
                self.out_of_range.extend(far);
                let (from, to) = (
                    (at - self.out_addr) as usize,
                    (end - self.out_addr) as usize,
                );
                self.out.truncate(from);
                self.out.resize(to, 0);
                Ok(())
            }
            other => other,
        }
    }

    /// Errors when the bytes written since new address `at` do not end at `end` (bytes).
    fn check(&self, at: u64, end: u64) -> Result<(), LayoutError> {
        let now = self.out_addr + self.out.len() as u64;
        if now == end {
            return Ok(());
        }
        Err(LayoutError::Encode {
            at,
            why: format!(
                "encoded {} bytes where the layout has {}",
                now - at,
                end - at
            ),
        })
    }

    /// Appends the bytes of `piece` placed at new address `at` (bytes): padding and raw bytes
    /// as they are, everything else through its [`Item`] kind; each original instruction of a
    /// run is checked to fill exactly its size.
    fn piece(&mut self, piece: &Piece, at: u64) -> Result<(), LayoutError> {
        let (r, out) = (&self.r, &mut self.out);
        match piece {
            Piece::Align(a) => {
                let end = align_up(at, *a);
                for _ in (at..end).step_by(4) {
                    out.extend_from_slice(&PAD_WORD.to_le_bytes());
                }
            }
            Piece::Raw { bytes, .. } => out.extend_from_slice(bytes),
            Piece::Insert { code, .. } => {
                let mut a = at;
                for inst in *code {
                    Fixed(inst).encode(a, r, out)?;
                    a += inst.len() as u64;
                }
            }
            Piece::Island { .. } => island_of(piece)
                .ok_or(LayoutError::BadTarget { at, target: 0 })?
                .encode(at, r, out)?,
            Piece::Orig { insts, i, reloc } => {
                let (old, inst) = insts.at(*i);
                self.orig(old, &inst, *reloc, at)?
            }
            Piece::Run {
                insts,
                range,
                relocs,
            } => {
                let mut a = at;
                let mut rel = relocs.iter().peekable();
                for (i, (old, inst)) in range.clone().zip(insts.range(range.clone())) {
                    while rel.next_if(|(j, _)| (*j as usize) < i).is_some() {}
                    let reloc = rel
                        .next_if(|(j, _)| *j as usize == i)
                        .map_or(Reloc::None, |&(_, r)| r);
                    let end = a + inst.len() as u64;
                    let result = self.orig(old, &inst, reloc, a);
                    self.go_on_if_out_of_range(result, a, end)?;
                    self.check(a, end)?;
                    a = end;
                }
            }
        }
        Ok(())
    }

    /// Appends the original instruction `inst` from `old`, placed at new address `at` (bytes),
    /// with the field `reloc` names recomputed through its [`Item`] kind; an add of an address
    /// builder of data is recorded for [`Layout::retarget_data`].
    fn orig(
        &mut self,
        old: u64,
        inst: &Instruction,
        reloc: Reloc,
        at: u64,
    ) -> Result<(), LayoutError> {
        let (r, out) = (&self.r, &mut self.out);
        match reloc {
            Reloc::None | Reloc::PcRelEnd { .. } => Fixed(inst).encode(at, r, out),
            Reloc::Branch { target } => ShortBranch { old, inst, target }.encode(at, r, out),
            Reloc::ToIsland { island } => BranchToIsland { old, inst, island }.encode(at, r, out),
            Reloc::Call { target } => CallEntry { old, inst, target }.encode(at, r, out),
            Reloc::AddPc { target } => AddPc64 { old, inst, target }.encode(at, r, out),
            Reloc::PcRelLo { idiom }
            | Reloc::PcRelHi { idiom }
            | Reloc::PcRel64 { idiom }
            | Reloc::PcRelEval { idiom, .. } => {
                let part = match reloc {
                    Reloc::PcRelLo { .. } => Part::Lo,
                    Reloc::PcRelHi { .. } => Part::Hi,
                    Reloc::PcRelEval { expr, .. } => Part::Eval(expr),
                    _ => Part::Whole,
                };
                if r.pcrels
                    .get(idiom)
                    .is_some_and(|p| p.use_kind == PcRelUse::Data)
                {
                    self.data_parts.push(DataPart {
                        at,
                        old,
                        inst: *inst,
                        idiom,
                        part,
                    });
                }
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

/// The island item of a [`Piece::Island`] (`None` for other pieces).
fn island_of<'p>(piece: &'p Piece) -> Option<Island<'p>> {
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
