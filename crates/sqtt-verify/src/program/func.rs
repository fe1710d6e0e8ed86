//! One kernel or device function as the verifier decoded and aligned it: its original
//! instructions, where each went, and the runs inserted in front of them.

use std::ops::Range;

use amdgpu_isa::{Instruction, RegSet};

use super::{Builder, Regs, Text};
use crate::program::insn::Region;
use crate::{Check, Finding, FunctionKind};

/// An instruction of the rewritten text.
#[derive(Clone, Copy)]
pub(crate) struct NInst {
    pub addr: u64,
    pub inst: Instruction,
}

/// An original instruction and where it went, in 24 bytes (an 88-byte record with the decoded
/// instruction and its copy was most of the verifier's memory): its instruction as an index into
/// the function's table of distinct [`Shape`]s ([`Func::shapes`], rebuilt over the text bytes by
/// [`Func::inst`]: a function has a few hundred shapes for many thousands of instructions), its
/// registers as an index into the function's table of distinct register summaries
/// ([`Func::regs`]), its copy as an offset into the rewritten text (the copy's instruction is
/// rebuilt from those bytes with the original's shape, or kept in [`Func::copies`] where the
/// copy decodes to another shape), and the end of the run inserted in front of it (the run
/// starts where the previous original's ends: [`Func::run`]).
pub(crate) struct OInst {
    pub addr: u64,
    /// Index of its shape in [`Func::shapes`], with the flags [`OInst::COPY_CHANGED`] and
    /// [`OInst::COPY_RESHAPED`].
    pub(super) shape: u32,
    /// Index of its registers (decoded once) in [`Func::regs_table`].
    pub(super) regs: u32,
    /// Offset of its copy in the rewritten text ([`NOT_PLACED`]: no copy found).
    pub(super) new_off: u32,
    /// End (exclusive index into [`Func::inserted`]) of the run inserted in front of it.
    pub(super) run_end: u32,
}

/// One instruction of a rewritten function body ([`Func::address_order`]): an original's copy
/// (index into [`Func::orig`]) or an inserted instruction (index into [`Func::inserted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Orig(u32),
    Inserted(u32),
}

/// [`OInst`] offset of an original instruction without a copy.
pub(super) const NOT_PLACED: u32 = u32::MAX;

impl OInst {
    /// [`OInst::shape`] flag: the copy's bytes differ from the original's.
    const COPY_CHANGED: u32 = 1 << 31;
    /// [`OInst::shape`] flag: the copy decodes to another shape (kept in [`Func::copies`]).
    const COPY_RESHAPED: u32 = 1 << 30;

    /// An original instruction (shape index `shape`, register index `regs`) with no copy found
    /// in the rewritten text and no run in front (its run ends where the previous one's does).
    pub(super) fn unplaced(addr: u64, shape: u32, regs: u32, run_end: usize) -> OInst {
        OInst {
            addr,
            shape,
            regs,
            new_off: NOT_PLACED,
            run_end: run_end as u32,
        }
    }

    /// Index of its shape in [`Func::shapes`].
    pub(super) fn shape_index(&self) -> usize {
        (self.shape & !(OInst::COPY_CHANGED | OInst::COPY_RESHAPED)) as usize
    }

    /// Its copy was found and decodes to another shape than it ([`Func::copies`]).
    pub fn copy_reshaped(&self) -> bool {
        self.shape & OInst::COPY_RESHAPED != 0
    }

    /// Its copy was found and has its bytes.
    pub fn copied_verbatim(&self) -> bool {
        self.new_off != NOT_PLACED && self.shape & OInst::COPY_CHANGED == 0
    }
}

/// One kernel or device function.
pub(crate) struct Func<'a> {
    pub name: String,
    pub kind: FunctionKind,
    pub orig_start: u64,
    /// End of the original body (bytes, exclusive).
    pub orig_end: u64,
    /// Rewritten entry (symbol value, or descriptor entry for kernels without a symbol).
    pub new_start: Option<u64>,
    /// End of the rewritten region (next function's start or end of `.text`).
    pub new_region_end: u64,
    pub orig: Vec<OInst>,
    /// The distinct shapes of the original instructions, each as the first instruction of that
    /// shape ([`Func::inst`] puts an instruction's own bytes in).
    pub(super) shapes: Vec<Instruction>,
    /// Copies that decode to another shape than their original (an original instruction
    /// changed into another one: a finding), by original address, ascending.
    pub(super) copies: Vec<(u64, Instruction)>,
    /// Both texts (the instructions' bytes).
    pub otext: Text<'a>,
    pub ntext: Text<'a>,
    /// Inserted instructions, ascending by address.
    pub inserted: Vec<NInst>,
    /// Parallel to `inserted`: their registers (decoded once) as indices into
    /// `inserted_regs_table` (4 bytes per inserted instruction, not 40: the snippets repeat a few
    /// encodings).
    pub(super) inserted_regs_at: Vec<u32>,
    /// The distinct register summaries of the inserted instructions ([`Func::inserted_regs`]).
    pub(super) inserted_regs_table: Vec<Regs>,
    /// Parallel to `inserted`: their whitelist classes ([`crate::program::insn::region_class`]),
    /// classified once for every check and every entry into their runs.
    pub inserted_class: Vec<Option<Region>>,
    /// Words after the last original instruction up to the next function.
    pub padding: Vec<NInst>,
    /// Kept in place: its rewritten copy is the original itself in the kept `.text`
    /// ([`Program::kept`]), which is `ntext` here.
    pub kept_in_place: bool,
    /// Execution can fall off the end of the original body: the function must be copied
    /// verbatim together with the bytes that follow it ([`crate::verbatim`]); this is the number
    /// of those bytes (original body end up to the next function or the end of `.text`).
    pub falls_off: Option<u64>,
    pub builders: Vec<Builder>,
    /// Every register the original instructions read or write (their union).
    pub orig_used: RegSet,
    /// The distinct register summaries of the original instructions ([`Func::regs`]).
    pub regs_table: Vec<Regs>,
}

impl<'a> Func<'a> {
    /// A function without instructions yet: its place in both texts.
    pub fn new(
        name: String,
        kind: FunctionKind,
        (orig_start, orig_end): (u64, u64),
        new_start: Option<u64>,
        otext: Text<'a>,
        ntext: Text<'a>,
    ) -> Func<'a> {
        Func {
            name,
            kind,
            orig_start,
            orig_end,
            new_start,
            new_region_end: ntext.end(),
            orig: Vec::new(),
            shapes: Vec::new(),
            copies: Vec::new(),
            otext,
            ntext,
            inserted: Vec::new(),
            inserted_regs_at: Vec::new(),
            inserted_regs_table: Vec::new(),
            inserted_class: Vec::new(),
            padding: Vec::new(),
            kept_in_place: false,
            falls_off: None,
            builders: Vec::new(),
            orig_used: RegSet::new(),
            regs_table: Vec::new(),
        }
    }

    /// The registers of original instruction `o` of this function, decoded once.
    pub fn regs(&self, o: &OInst) -> &Regs {
        &self.regs_table[o.regs as usize]
    }

    /// The registers of the inserted instructions `range` (indices into [`Func::inserted`]; an
    /// empty sequence outside the list), decoded once.
    pub fn inserted_regs(&self, range: Range<usize>) -> impl Iterator<Item = &Regs> + Clone + '_ {
        self.inserted_regs_at
            .get(range)
            .unwrap_or_default()
            .iter()
            .filter_map(|&r| self.inserted_regs_table.get(r as usize))
    }

    /// The mnemonic of original `o` of this function (a fact of its shape: no rebuilt
    /// instruction).
    pub fn mnemonic(&self, o: &OInst) -> &'static str {
        self.shapes[o.shape_index()].mnemonic()
    }

    /// The instruction of original `o` of this function (its shape over its bytes).
    pub fn inst(&self, o: &OInst) -> Instruction {
        self.shapes[o.shape_index()].with_bytes(self.otext.from(o.addr))
    }

    /// The copy of original `o` of this function in the rewritten text, when found.
    pub fn copy(&self, o: &OInst) -> Option<NInst> {
        let addr = self.new_address(o)?;
        let inst = if o.copy_reshaped() {
            let k = self.copies.binary_search_by_key(&o.addr, |c| c.0).ok()?;
            self.copies[k].1
        } else {
            self.shapes[o.shape_index()].with_bytes(self.ntext.from(addr))
        };
        Some(NInst { addr, inst })
    }

    /// Address of the copy of original `o` in the rewritten text, when found ([`Func::copy`]
    /// without its instruction).
    pub fn new_address(&self, o: &OInst) -> Option<u64> {
        (o.new_off != NOT_PLACED).then(|| self.ntext.addr + u64::from(o.new_off))
    }

    /// Indices into [`Func::inserted`] of the run inserted in front of original `k`.
    pub fn run(&self, k: usize) -> Range<usize> {
        let start = match k.checked_sub(1) {
            Some(p) => self.orig.get(p).map_or(0, |o| o.run_end as usize),
            None => 0,
        };
        let end = self.orig.get(k).map_or(start, |o| o.run_end as usize);
        start..end
    }

    /// Records original instruction `addr` (decoded as `inst`, shape index `shape`, register
    /// index `regs`), whose copy is `n`, with the run in front of it ending at the current end of
    /// [`Func::inserted`].
    pub(super) fn place(
        &mut self,
        addr: u64,
        inst: &Instruction,
        (shape, regs): (u32, u32),
        n: &NInst,
    ) {
        let mut shape = shape;
        if n.inst.bytes() != inst.bytes() {
            shape |= OInst::COPY_CHANGED;
            if n.inst.shape() != inst.shape() {
                shape |= OInst::COPY_RESHAPED;
                self.copies.push((addr, n.inst));
            }
        }
        self.orig.push(OInst {
            addr,
            shape,
            regs,
            // In the text (decoded from its bytes), which is shorter than 4 GiB (`Text::of`).
            new_off: n.addr.wrapping_sub(self.ntext.addr) as u32,
            run_end: self.inserted.len() as u32,
        });
    }

    /// New address just after the last original instruction (end of the rewritten body).
    pub fn new_body_end(&self) -> Option<u64> {
        let last = self.copy(self.orig.last()?)?;
        Some(last.addr + last.inst.len() as u64)
    }

    /// Every instruction of the rewritten body (original copies and inserted ones), in address
    /// order.
    pub fn in_address_order(&self) -> Vec<crate::LaidOut> {
        self.address_order()
            .into_iter()
            .map(|s| self.laid_out(s))
            .collect()
    }

    /// [`Func::in_address_order`] as [`Slot`]s (8 bytes per instruction, not a copy of each):
    /// the copies of the originals, then the inserted instructions, stably sorted by new address
    /// (both lists are ascending as the aligner builds them: then one merge, ties original first,
    /// gives that order without a sort).
    pub fn address_order(&self) -> Vec<Slot> {
        let copies: Vec<(u64, Slot)> = self
            .orig
            .iter()
            .enumerate()
            .filter_map(|(k, o)| Some((self.new_address(o)?, Slot::Orig(k as u32))))
            .collect();
        let sorted = copies.windows(2).all(|w| w[0].0 <= w[1].0)
            && self.inserted.windows(2).all(|w| w[0].addr <= w[1].addr);
        if !sorted {
            let mut v: Vec<(u64, Slot)> = copies;
            v.extend(
                self.inserted
                    .iter()
                    .enumerate()
                    .map(|(j, n)| (n.addr, Slot::Inserted(j as u32))),
            );
            v.sort_by_key(|x| x.0);
            return v.into_iter().map(|x| x.1).collect();
        }
        let mut out = Vec::with_capacity(copies.len() + self.inserted.len());
        let (mut c, mut j) = (0usize, 0usize);
        while c < copies.len() || j < self.inserted.len() {
            let take_copy = match (copies.get(c), self.inserted.get(j)) {
                (Some(x), Some(n)) => x.0 <= n.addr,
                (Some(_), None) => true,
                _ => false,
            };
            if take_copy {
                out.push(copies[c].1);
                c += 1;
            } else {
                out.push(Slot::Inserted(j as u32));
                j += 1;
            }
        }
        out
    }

    /// The instruction at slot `s` of [`Func::address_order`].
    pub fn laid_out(&self, s: Slot) -> crate::LaidOut {
        match s {
            Slot::Orig(k) => {
                let o = &self.orig[k as usize];
                let n = self.copy(o).unwrap_or(NInst {
                    addr: u64::MAX,
                    inst: self.inst(o),
                });
                crate::LaidOut {
                    addr: n.addr,
                    inst: n.inst,
                    inserted: false,
                    original_address: Some(o.addr),
                }
            }
            Slot::Inserted(j) => {
                let n = &self.inserted[j as usize];
                crate::LaidOut {
                    addr: n.addr,
                    inst: n.inst,
                    inserted: true,
                    original_address: None,
                }
            }
        }
    }

    /// The registers of the instruction at slot `s` when they are known without a decode: a
    /// copy with its original's bytes has its original's [`Regs`].
    pub fn known_regs(&self, s: Slot) -> Option<Regs> {
        match s {
            Slot::Orig(k) => {
                let o = &self.orig[k as usize];
                o.copied_verbatim().then(|| *self.regs(o))
            }
            Slot::Inserted(_) => None,
        }
    }

    /// A finding in this function (`o`, `n`: original and rewritten addresses, bytes).
    pub(crate) fn finding(
        &self,
        check: Check,
        o: Option<u64>,
        n: Option<u64>,
        message: String,
    ) -> Finding {
        Finding {
            check,
            function: Some(self.name.clone()),
            original_address: o,
            new_address: n,
            message,
        }
    }
}

#[cfg(test)]
impl<'a> Func<'a> {
    /// A device function of every instruction of `text` (decoded for `isa`) without a copy in a
    /// rewritten text (unit tests of the analyses of original code).
    pub fn unaligned(text: Text<'a>, isa: amdgpu_isa::Target) -> Func<'a> {
        let span = (text.addr, text.end());
        let mut f = Func::new("f".into(), FunctionKind::Function, span, None, text, text);
        let body = super::prepare::decode_original(&text, &f, isa).unwrap_or_default();
        f.builders = super::find_builders(&body);
        for (k, (addr, i)) in body.iter().enumerate() {
            f.shapes.push(*i);
            f.regs_table.push(Regs::of_inst(i));
            f.orig.push(OInst::unplaced(*addr, k as u32, k as u32, 0));
        }
        f
    }
}
