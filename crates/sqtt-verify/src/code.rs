//! Function discovery in both code objects, decoding and instruction alignment (the address map
//! from original instructions to their rewritten copies and the inserted runs in front of them).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

use amdgpu_isa::{decode, Instruction, Special, Target};
use hsaco::CodeObject;
use rayon::prelude::*;

pub(crate) use crate::builder::{find_builders, Builder};
use crate::insn::{allowed, insertable, is_padding, region_class_regs, Allowed, Region};
use crate::{Check, Finding, FunctionKind, VerifyError};
use amdgpu_isa::{RegSet, SpecialReg};

/// The executable `.text` section of one code object (its bytes borrowed from the parsed code
/// object, not copied).
#[derive(Clone, Copy)]
pub(crate) struct Text<'a> {
    /// Virtual address (bytes).
    pub addr: u64,
    /// File offset (bytes).
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// Name of the section of the new segment that holds the instrumented functions when the
/// rewriter keeps `.text` in place (the rewriter's `KEPT_TEXT_SECTION`; docs/left-alone.md).
pub(crate) const KEPT_TEXT_SECTION: &str = ".sqtt_text";

impl<'a> Text<'a> {
    /// The rewritten object's texts: the one executable section, or, when `.text` is kept in
    /// place, the new section [`KEPT_TEXT_SECTION`] and the kept `.text` (second).
    fn of_rewritten(co: &'a CodeObject) -> Result<(Text<'a>, Option<Text<'a>>), VerifyError> {
        let execs: Vec<_> = co.exec_sections().collect();
        if let [a, b] = execs.as_slice() {
            let (kept, new) = match (a.name.as_str(), b.name.as_str()) {
                (".text", KEPT_TEXT_SECTION) => (a, b),
                (KEPT_TEXT_SECTION, ".text") => (b, a),
                _ => return Ok((Text::of(co, "rewritten")?, None)),
            };
            let (new, kept) = (Text::of_section(co, new), Text::of_section(co, kept));
            if u32::try_from(new.end().saturating_sub(kept.addr)).is_err() || new.addr < kept.end()
            {
                return Err(VerifyError::Text {
                    which: "rewritten",
                    detail: format!(
                        "{KEPT_TEXT_SECTION} at {:#x} must lie above .text and end less than 4 GiB after its start",
                        new.addr
                    ),
                });
            }
            return Ok((new, Some(kept)));
        }
        Ok((Text::of(co, "rewritten")?, None))
    }

    fn of(co: &'a CodeObject, which: &'static str) -> Result<Text<'a>, VerifyError> {
        let execs: Vec<_> = co.exec_sections().collect();
        let [sec] = execs.as_slice() else {
            return Err(VerifyError::Text {
                which,
                detail: format!(
                    "expected exactly one executable section, found {}",
                    execs.len()
                ),
            });
        };
        let t = Text::of_section(co, sec);
        // Instructions keep their places as `u32` offsets ([`OInst`]).
        if u32::try_from(t.bytes.len()).is_err() {
            return Err(VerifyError::Text {
                which,
                detail: format!(
                    "executable section of {} bytes (at most 4 GiB are supported)",
                    t.bytes.len()
                ),
            });
        }
        Ok(t)
    }

    /// The text of section `sec` of `co` (its bytes borrowed).
    fn of_section(co: &'a CodeObject, sec: &hsaco::elf::Section) -> Text<'a> {
        Text {
            addr: sec.addr,
            offset: sec.offset,
            bytes: co.section_data(sec),
        }
    }

    pub fn end(&self) -> u64 {
        self.addr + self.bytes.len() as u64
    }

    pub fn contains(&self, a: u64) -> bool {
        a >= self.addr && a < self.end()
    }

    /// Bytes from address `start` to the end of the section (empty outside it).
    pub fn from(&self, start: u64) -> &'a [u8] {
        let s = start.wrapping_sub(self.addr);
        usize::try_from(s)
            .ok()
            .and_then(|s| self.bytes.get(s..))
            .unwrap_or_default()
    }

    /// Bytes of `[start, end)` clipped to the section.
    pub fn slice(&self, start: u64, end: u64) -> &'a [u8] {
        let s = start.saturating_sub(self.addr) as usize;
        let e = (end.saturating_sub(self.addr) as usize).min(self.bytes.len());
        self.bytes.get(s..e).unwrap_or_default()
    }
}

/// An instruction of the rewritten text.
#[derive(Clone, Copy)]
pub(crate) struct NInst {
    pub addr: u64,
    pub inst: Instruction,
}

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
    /// Indexes VGPRs (`spill::indexed`).
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
                    crate::insn::set_within(w, &crate::insn::every_sgpr()),
                    Regs::SCALAR_WRITES,
                )
                | when(m.starts_with("s_movrels"), Regs::MOVRELS)
                | when(m.starts_with("s_movreld"), Regs::MOVRELD)
                | when(m.starts_with("s_cmov"), Regs::CMOV)
                | when(
                    i.format() == amdgpu_isa::Format::Smem || m.starts_with("s_sendmsg_rtn"),
                    Regs::ASYNC_RESULT,
                )
                | when(crate::spill::indexed(i), Regs::INDEXED)
                | when(i.flow() == amdgpu_isa::Flow::Call, Regs::CALL)
                | when(crate::sgprs::smem_drained(i), Regs::SMEM_DRAINED)
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
    shape: u32,
    /// Index of its registers (decoded once) in [`Func::regs_table`].
    regs: u32,
    /// Offset of its copy in the rewritten text ([`NOT_PLACED`]: no copy found).
    new_off: u32,
    /// End (exclusive index into [`Func::inserted`]) of the run inserted in front of it.
    run_end: u32,
}

/// One instruction of a rewritten function body ([`Func::address_order`]): an original's copy
/// (index into [`Func::orig`]) or an inserted instruction (index into [`Func::inserted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Orig(u32),
    Inserted(u32),
}

/// [`OInst`] offset of an original instruction without a copy.
const NOT_PLACED: u32 = u32::MAX;

impl OInst {
    /// [`OInst::shape`] flag: the copy's bytes differ from the original's.
    const COPY_CHANGED: u32 = 1 << 31;
    /// [`OInst::shape`] flag: the copy decodes to another shape (kept in [`Func::copies`]).
    const COPY_RESHAPED: u32 = 1 << 30;

    /// An original instruction (shape index `shape`, register index `regs`) with no copy found
    /// in the rewritten text and no run in front (its run ends where the previous one's does).
    fn unplaced(addr: u64, shape: u32, regs: u32, run_end: usize) -> OInst {
        OInst {
            addr,
            shape,
            regs,
            new_off: NOT_PLACED,
            run_end: run_end as u32,
        }
    }

    /// Index of its shape in [`Func::shapes`].
    fn shape_index(&self) -> usize {
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
    shapes: Vec<Instruction>,
    /// Copies that decode to another shape than their original (an original instruction
    /// changed into another one: a finding), by original address, ascending.
    copies: Vec<(u64, Instruction)>,
    /// Both texts (the instructions' bytes).
    pub otext: Text<'a>,
    pub ntext: Text<'a>,
    /// Inserted instructions, ascending by address.
    pub inserted: Vec<NInst>,
    /// Parallel to `inserted`: their registers (decoded once) as indices into
    /// `inserted_regs_table` (4 bytes per inserted instruction, not 40: the snippets repeat a few
    /// encodings).
    inserted_regs_at: Vec<u32>,
    /// The distinct register summaries of the inserted instructions ([`Func::inserted_regs`]).
    inserted_regs_table: Vec<Regs>,
    /// Parallel to `inserted`: their whitelist classes ([`crate::insn::region_class`]),
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
    fn place(&mut self, addr: u64, inst: &Instruction, (shape, regs): (u32, u32), n: &NInst) {
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

    fn finding(&self, check: Check, o: Option<u64>, n: Option<u64>, message: String) -> Finding {
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
    pub fn unaligned(text: Text<'a>, isa: Target) -> Func<'a> {
        let span = (text.addr, text.end());
        let mut f = Func::new("f".into(), FunctionKind::Function, span, None, text, text);
        let body = decode_original(&text, &f, isa).unwrap_or_default();
        f.builders = find_builders(&body);
        for (k, (addr, i)) in body.iter().enumerate() {
            f.shapes.push(*i);
            f.regs_table.push(Regs::of_inst(i));
            f.orig.push(OInst::unplaced(*addr, k as u32, k as u32, 0));
        }
        f
    }
}

/// Both texts and every function, aligned.
pub(crate) struct Program<'a> {
    pub isa: Target,
    pub otext: Text<'a>,
    pub ntext: Text<'a>,
    /// The rewritten object's `.text` when the rewriter kept it in place and put the
    /// instrumented functions in [`KEPT_TEXT_SECTION`] (`ntext`): byte-identical to `otext`
    /// (a finding otherwise). Functions whose rewritten entry is their original one run from
    /// it, unchanged.
    pub kept: Option<Text<'a>>,
    /// Functions kept in place whose original does not decode, as (start, end, name), ascending:
    /// not in `funcs` (nothing of them can be checked but that they did not change, which
    /// `kept` proves); a call into one is unresolved for liveness, and a reference to an address
    /// in one must stay that address.
    pub opaque: Vec<(u64, u64, String)>,
    /// Every function, ascending by original start address (bodies do not overlap).
    pub funcs: Vec<Func<'a>>,
    /// Allocated non-executable sections: (original address, original end, rewritten address).
    pub secmap: Vec<(u64, u64, u64)>,
    /// SGPRs no original instruction of the object reads or writes (the only SGPRs inserted code
    /// may write).
    pub free_sgprs: RegSet,
    /// Long-branch islands found in inserted code (a relaxed branch's, or a landing block's
    /// long jump), by start address.
    pub islands: BTreeMap<u64, Island>,
    /// Landing blocks found in inserted code, by start address.
    pub landings: BTreeMap<u64, LandingBlock>,
}

/// A landing block the rewriter emits for a branch edge that needs markers of its own (issue
/// 16): the original conditional SOPP branch is retargeted to inserted code right after it and
/// an `s_branch` over the block, `{marker code; s_branch D}` or
/// `{marker code; long-branch island to D}`, where `D` must be a landing of the original target.
#[derive(Clone, Debug)]
pub(crate) struct LandingBlock {
    /// End of the marker code (exclusive; start of the jump).
    pub body_end: u64,
    /// End of the block (exclusive).
    pub end: u64,
    /// Where the jump lands.
    pub dest: u64,
}

/// Recognises a landing block starting at `run[j]`: at least one contiguous instruction
/// `is_body` accepts (a relaxed branch's bare island is not a landing block), then an `s_branch`
/// out of the block or a long-branch island. Returns the block and its tail island, if any.
fn landing_at(
    run: &[NInst],
    j: usize,
    is_body: impl Fn(&Instruction) -> bool,
) -> Option<(LandingBlock, Option<Island>)> {
    let start = run.get(j)?.addr;
    let mut next = start;
    for i in j..run.len() {
        let n = &run[i];
        if n.addr != next {
            return None;
        }
        let tail = i > j;
        if let Some(isl) = island_at(run, i).filter(|_| tail) {
            let block = LandingBlock {
                body_end: n.addr,
                end: isl.end,
                dest: isl.dest,
            };
            return Some((block, Some(isl)));
        }
        if tail && n.inst.mnemonic() == "s_branch" {
            let t = n.inst.branch_target(n.addr)?;
            if t >= start && t <= n.addr {
                return None;
            }
            let block = LandingBlock {
                body_end: n.addr,
                end: n.addr + 4,
                dest: t,
            };
            return Some((block, None));
        }
        if !is_body(&n.inst) {
            return None;
        }
        next = n.addr + n.inst.len() as u64;
    }
    None
}

/// The landing block a conditional SOPP branch at `new[q]` (the instructions after it follow in
/// `new`) was retargeted to, with its tail island: the block starts right after an `s_branch` to
/// the block's end, which follows the branch.
fn landing_after(
    new: &[NInst],
    q: usize,
    is_body: impl Fn(&Instruction) -> bool,
) -> Option<(u64, LandingBlock, Option<Island>)> {
    let b = new.get(q)?;
    if b.inst.flow() != (amdgpu_isa::Flow::Branch { conditional: true }) {
        return None;
    }
    let t = b.inst.branch_target(b.addr)?;
    let j = new.binary_search_by_key(&t, |n| n.addr).ok()?;
    let after = b.addr + b.inst.len() as u64;
    let s = new.get(j.checked_sub(1)?)?;
    let over = (s.addr == after && s.inst.mnemonic() == "s_branch" && t == after + 4)
        .then(|| s.inst.branch_target(s.addr))??;
    let (block, isl) = landing_at(new, j, is_body)?;
    (over == block.end).then_some((t, block, isl))
}

/// A long-branch island the rewriter emits for a relaxed branch: `s_getpc_b64 s[p:p+1]`,
/// optional `s_wait_alu`, `s_add_u32`/`s_add_co_u32 sp, sp, lit`, `s_addc_u32`/
/// `s_add_co_ci_u32 sp+1, sp+1, lit`, optional `s_wait_alu`, `s_setpc_b64 s[p:p+1]` (offset
/// from the getpc address + 4), or one gfx1250 `s_add_pc_i64 lit64` (offset from the next
/// instruction).
#[derive(Clone, Debug)]
pub(crate) struct Island {
    /// End address (exclusive).
    pub end: u64,
    /// Where it jumps.
    pub dest: u64,
    /// Registers it writes (the pair and SCC; nothing on gfx1250).
    pub writes: RegSet,
}

/// Recognises an island starting at `run[i]` (instructions must be contiguous).
fn island_at(run: &[NInst], i: usize) -> Option<Island> {
    let first = run.get(i)?;
    let m = first.inst.mnemonic();
    if m == "s_add_pc_i64" && first.inst.len() == 12 {
        let lit = first.inst.literal()?;
        let end = first.addr + 12;
        return Some(Island {
            end,
            dest: end.wrapping_add(lit),
            writes: RegSet::new(),
        });
    }
    if m != "s_getpc_b64" && m != "s_get_pc_i64" {
        return None;
    }
    let pair = first.inst.writes().max_sgpr()?.checked_sub(1)?;
    let mut j = i + 1;
    let mut next = first.addr + 4;
    // Next contiguous instruction if its mnemonic is one of `want`.
    fn step(run: &[NInst], j: &mut usize, next: &mut u64, want: &[&str]) -> Option<NInst> {
        let n = *run.get(*j)?;
        if n.addr != *next || !want.contains(&n.inst.mnemonic()) {
            return None;
        }
        *j += 1;
        *next = n.addr + n.inst.len() as u64;
        Some(n)
    }
    let _ = step(run, &mut j, &mut next, &["s_wait_alu"]);
    let lo = step(run, &mut j, &mut next, &["s_add_u32", "s_add_co_u32"])?;
    let hi = step(run, &mut j, &mut next, &["s_addc_u32", "s_add_co_ci_u32"])?;
    let _ = step(run, &mut j, &mut next, &["s_wait_alu"]);
    let set = step(run, &mut j, &mut next, &["s_setpc_b64", "s_set_pc_i64"])?;
    let (lw, hw) = (lo.inst.writes(), hi.inst.writes());
    let ok = lw.contains_sgpr(pair)
        && !lw.contains_sgpr(pair + 1)
        && hw.contains_sgpr(pair + 1)
        && set.inst.reads().contains_sgpr(pair)
        && set.inst.reads().contains_sgpr(pair + 1);
    if !ok {
        return None;
    }
    let off = (hi.inst.literal()? << 32) | (lo.inst.literal()? & 0xffff_ffff);
    let mut writes = RegSet::new();
    writes.add_sgpr(pair);
    writes.add_sgpr(pair + 1);
    writes.add(amdgpu_isa::SpecialReg::Scc);
    Some(Island {
        end: next,
        dest: (first.addr + 4).wrapping_add(off),
        writes,
    })
}

/// Every landing block in the inserted code of `funcs` (an original branch whose target is not
/// the next original instruction, retargeted to inserted code after it), and the islands at
/// their tails, by start address.
/// Functions are searched in parallel and their blocks entered in function order.
fn find_landings(funcs: &[Func<'_>]) -> (BTreeMap<u64, LandingBlock>, BTreeMap<u64, Island>) {
    let found: Vec<Vec<(u64, LandingBlock, Option<Island>)>> = funcs
        .par_iter()
        .map(|f| {
            let mut found = Vec::new();
            for (k, o) in f.orig.iter().enumerate() {
                // The run of the next original (where the block sits); without one the branch
                // has no block after it.
                let run = f.orig.get(k + 1).map_or(&[][..], |_| {
                    f.inserted.get(f.run(k + 1)).unwrap_or_default()
                });
                if run.is_empty() {
                    continue;
                }
                let (Some(n), Some(to)) = (f.copy(o), f.inst(o).branch_target(o.addr)) else {
                    continue;
                };
                if f.orig.get(k + 1).is_some_and(|x| x.addr == to) {
                    continue;
                }
                // The branch, then that run.
                let mut seq = vec![n];
                seq.extend_from_slice(run);
                found.extend(landing_after(&seq, 0, |_| true));
            }
            found
        })
        .collect();
    let mut out = BTreeMap::new();
    let mut tails = BTreeMap::new();
    for (t, block, isl) in found.into_iter().flatten() {
        if let Some(isl) = isl {
            tails.insert(block.body_end, isl);
        }
        out.insert(t, block);
    }
    (out, tails)
}

/// Every island in the inserted code of `funcs` that a relocated original branch targets.
/// Functions are searched in parallel (a function without inserted code has none).
fn find_islands(funcs: &[Func<'_>]) -> BTreeMap<u64, Island> {
    let found: Vec<Vec<(u64, Island)>> = funcs
        .par_iter()
        .filter(|f| !f.inserted.is_empty())
        .map(|f| {
            let targeted: std::collections::BTreeSet<u64> = f
                .orig
                .iter()
                // A copy of the original's shape has a target only where the original has one
                // (not `Regs::PLAIN`).
                .filter(|o| !f.regs(o).has(Regs::PLAIN) || o.copy_reshaped())
                .filter_map(|o| f.copy(o).and_then(|n| n.inst.branch_target(n.addr)))
                .collect();
            (0..f.inserted.len())
                .filter(|&i| targeted.contains(&f.inserted[i].addr))
                .filter_map(|i| island_at(&f.inserted, i).map(|isl| (f.inserted[i].addr, isl)))
                .collect()
        })
        .collect();
    found.into_iter().flatten().collect()
}

impl Program<'_> {
    /// The landing block containing new address `a`, with its start, if any.
    pub(crate) fn landing_containing(&self, a: u64) -> Option<(u64, &LandingBlock)> {
        self.landings
            .range(..=a)
            .next_back()
            .map(|(s, b)| (*s, b))
            .filter(|(_, b)| a < b.end)
    }

    /// The island containing new address `a`, if any.
    pub(crate) fn island_containing(&self, a: u64) -> Option<&Island> {
        self.islands
            .range(..=a)
            .next_back()
            .map(|(_, isl)| isl)
            .filter(|isl| a < isl.end)
    }
}

struct Seed {
    name: String,
    kind: FunctionKind,
    size: Option<u64>,
}

/// Addresses of same-named entries, ascending per name: the `n`-th occurrence of a name in
/// the original pairs with the `n`-th address here (static functions may share names).
fn by_name<'a>(names: impl Iterator<Item = (&'a str, u64)>) -> HashMap<&'a str, Vec<u64>> {
    let mut m: HashMap<&str, Vec<u64>> = HashMap::new();
    for (nm, a) in names {
        m.entry(nm).or_default().push(a);
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// The `n`-th address of `key` in a [`by_name`] map.
fn pair_by_name(m: &HashMap<&str, Vec<u64>>, key: &str, n: usize) -> Option<u64> {
    m.get(key).and_then(|v| v.get(n)).copied()
}

impl<'a> Program<'a> {
    pub fn build(
        orig: &'a CodeObject,
        new: &'a CodeObject,
        isa: Target,
        findings: &mut Vec<Finding>,
    ) -> Result<Program<'a>, VerifyError> {
        let otext = Text::of(orig, "original")?;
        let (ntext, kept) = Text::of_rewritten(new)?;
        if let Some(k) = kept {
            check_kept(&otext, &k, findings);
        }

        // Original functions: kernels through their descriptors, device functions through
        // STT_FUNC symbols; one entry per start address.
        let mut seeds: BTreeMap<u64, Seed> = BTreeMap::new();
        for k in &orig.kernels {
            if otext.contains(k.entry) {
                seeds.entry(k.entry).or_insert(Seed {
                    name: k.name.clone(),
                    kind: FunctionKind::Kernel,
                    size: k.code_size,
                });
            }
        }
        for f in &orig.functions {
            if otext.contains(f.address) {
                seeds.entry(f.address).or_insert(Seed {
                    name: f.name.clone(),
                    kind: FunctionKind::Function,
                    size: Some(f.size),
                });
            }
        }
        let starts: Vec<u64> = seeds.keys().copied().collect();

        // Rewritten entries by name, built once (a search per function was quadratic): the
        // lowest kernel-entry or function symbol, the kernels' descriptor entries and the
        // device functions.
        let mut sym_entry: HashMap<&str, u64> = HashMap::new();
        for s in new.symbols.iter().filter(|s| {
            (s.kind == hsaco::SymbolKind::KernelEntry || s.symbol.st_type == hsaco::elf::STT_FUNC)
                && s.symbol.shndx != hsaco::elf::SHN_UNDEF
        }) {
            let e = sym_entry.entry(s.symbol.name.as_str()).or_insert(u64::MAX);
            *e = (*e).min(s.symbol.value);
        }
        let new_kernels = by_name(new.kernels.iter().map(|k| (k.name.as_str(), k.entry)));
        let new_functions = by_name(new.functions.iter().map(|f| (f.name.as_str(), f.address)));
        // Occurrence number of each name (for duplicated local names).
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut funcs = Vec::new();
        let mut opaque = Vec::new();
        for (i, (&start, seed)) in seeds.iter().enumerate() {
            let occ = seen.entry(seed.name.as_str()).or_insert(0);
            let n = *occ;
            *occ += 1;
            let region_end = starts.get(i + 1).copied().unwrap_or(otext.end());
            let orig_end = match seed.size {
                Some(s) if s > 0 => start.saturating_add(s).min(region_end),
                _ => trim_padding(&otext, start, region_end, isa),
            };
            let new_start = match seed.kind {
                FunctionKind::Kernel => sym_entry
                    .get(seed.name.as_str())
                    .copied()
                    .or_else(|| pair_by_name(&new_kernels, &seed.name, n)),
                FunctionKind::Function => pair_by_name(&new_functions, &seed.name, n),
            };
            if new_start.is_none() {
                findings.push(Finding {
                    check: Check::Functions,
                    function: Some(seed.name.clone()),
                    original_address: Some(start),
                    new_address: None,
                    message: "function is missing from the rewritten code object".into(),
                });
            }
            // Kept in place: the function runs from the kept `.text`, unchanged.
            let in_place = kept.filter(|k| new_start == Some(start) && k.contains(start));
            if in_place.is_some()
                && amdgpu_isa::decode_all(otext.slice(start, orig_end), isa).is_err()
            {
                opaque.push((start, orig_end, seed.name.clone()));
                continue;
            }
            let mut f = Func::new(
                seed.name.clone(),
                seed.kind,
                (start, orig_end),
                new_start,
                otext,
                in_place.unwrap_or(ntext),
            );
            f.kept_in_place = in_place.is_some();
            funcs.push(f);
        }
        check_new_only(orig, new, findings);

        let mut new_starts: Vec<u64> = funcs.iter().filter_map(|f| f.new_start).collect();
        new_starts.sort_unstable();
        new_starts.dedup();
        for f in funcs.iter_mut().filter(|f| !f.kept_in_place) {
            if let Some(s) = f.new_start {
                f.new_region_end = new_starts
                    .get(new_starts.partition_point(|&x| x <= s))
                    .copied()
                    .unwrap_or(ntext.end())
                    .min(ntext.end());
            }
        }

        // Kept in place: its copy is its own body; the bytes after it are the kept `.text`'s,
        // which `check_kept` proves unchanged (a gap there need not be padding).
        for f in funcs.iter_mut().filter(|f| f.kept_in_place) {
            f.new_region_end = f.orig_end;
        }
        // Functions are decoded, their registers decoded once for every later check, and aligned
        // in one parallel pass, so only the functions in flight hold their decoded bodies;
        // findings keep the function order, and the first function that does not decode is the
        // error.
        let ostarts: Vec<u64> = funcs.iter().map(|f| f.orig_start).collect();
        let aligned: Vec<Result<Vec<Finding>, VerifyError>> = funcs
            .par_iter_mut()
            .enumerate()
            .map(|(fi, f)| prepare(f, fi, &ostarts, &otext, isa, true))
            .collect();
        let mut aligned: Vec<Vec<Finding>> = aligned.into_iter().collect::<Result<_, _>>()?;
        // A function whose last instruction calls a function that never returns does not fall
        // off its end ([`crate::noreturn`]): prepared again as an ordinary function, and only
        // the findings of that second alignment count.
        for fi in crate::noreturn::ending_in_noreturn_calls(&funcs) {
            let f = &mut funcs[fi];
            let mut fresh = Func::new(
                f.name.clone(),
                f.kind,
                (f.orig_start, f.orig_end),
                f.new_start,
                otext,
                f.ntext,
            );
            fresh.new_region_end = f.new_region_end;
            fresh.kept_in_place = f.kept_in_place;
            *f = fresh;
            aligned[fi] = prepare(f, fi, &ostarts, &otext, isa, false)?;
        }
        findings.extend(aligned.into_iter().flatten());
        let used = funcs.iter().fold(RegSet::new(), |mut a, f| {
            a.union_with(&f.orig_used);
            a
        });
        let mut free_sgprs = RegSet::new();
        for r in 0..sqtt_interp::NUM_SGPRS as u16 {
            if !used.contains_sgpr(r) {
                free_sgprs.add_sgpr(r);
            }
        }
        let secmap = orig
            .elf
            .sections
            .iter()
            .filter(|s| s.is_alloc() && !s.is_exec())
            .filter_map(|s| {
                crate::elfcheck::counterpart(new, s)
                    .map(|n| (s.addr, s.addr.saturating_add(s.size), n.addr))
            })
            .collect();
        let mut islands = find_islands(&funcs);
        let (landings, tails) = find_landings(&funcs);
        islands.extend(tails);
        let program = Program {
            isa,
            otext,
            ntext,
            kept,
            opaque,
            funcs,
            secmap,
            free_sgprs,
            islands,
            landings,
        };
        // Kept in place, the original tail padding stays in the kept `.text`.
        if program.kept.is_none() {
            program.check_tail(findings);
        }
        Ok(program)
    }

    /// Landing addresses allowed for a jump to original address `target`: every instruction start
    /// of the inserted run in front of the original instruction, and the instruction itself.
    pub fn landing(&self, target: u64) -> Option<(usize, usize, Vec<u64>)> {
        let (fi, k, lands) = self.landings(target, None)?;
        Some((fi, k, lands.collect()))
    }

    /// [`Program::landing`] with the addresses as an iterator (no list per question).
    /// `near`: index of a function the target most likely lies in (the jump's own), looked at
    /// before the search over every function.
    pub fn landings(
        &self,
        target: u64,
        near: Option<usize>,
    ) -> Option<(usize, usize, impl Iterator<Item = u64> + Clone + '_)> {
        let (fi, k) = self.original_at(target, near)?;
        let f = &self.funcs[fi];
        let copy = f.new_address(&f.orig[k])?;
        let run = f.inserted.get(f.run(k)).unwrap_or_default();
        Some((
            fi,
            k,
            run.iter()
                .enumerate()
                .filter(move |&(p, _)| !splits_marker(run, p))
                .map(|(_, n)| n.addr)
                .chain(std::iter::once(copy)),
        ))
    }

    /// Rewritten address of a data address `a` outside `.text` (moves with its section; addresses in
    /// no allocated section stay put).
    pub fn map_data(&self, a: u64) -> u64 {
        self.secmap
            .iter()
            .find(|(s, e, _)| a >= *s && a <= *e)
            .map_or(a, |(s, _, n)| n.wrapping_add(a - s))
    }

    /// The function kept in place that does not decode ([`Program::opaque`]) holding original
    /// address `a`: its name.
    pub fn opaque_at(&self, a: u64) -> Option<&str> {
        let i = self.opaque.partition_point(|o| o.0 <= a).checked_sub(1)?;
        let (s, e, name) = &self.opaque[i];
        (*s <= a && a < *e).then_some(name.as_str())
    }

    /// Original function index whose entry is `addr` (binary search: `funcs` is sorted by start).
    pub fn func_at(&self, addr: u64) -> Option<usize> {
        self.funcs
            .binary_search_by_key(&addr, |f| f.orig_start)
            .ok()
    }

    /// The original instruction starting at address `a`: (function index, instruction index).
    /// Binary searches: functions by start, then the function's instructions (in address order).
    /// `near`: a function to try first; when `a` lies in its body it is the function the search
    /// would find (the last one starting at or before `a`: bodies do not overlap and the next
    /// function starts at or after its end).
    pub fn original_at(&self, a: u64, near: Option<usize>) -> Option<(usize, usize)> {
        let inside = near.filter(|&g| {
            self.funcs
                .get(g)
                .is_some_and(|f| f.orig_start <= a && a < f.orig_end)
        });
        let fi = match inside {
            Some(g) => g,
            None => self
                .funcs
                .partition_point(|f| f.orig_start <= a)
                .checked_sub(1)?,
        };
        let k = self.funcs[fi]
            .orig
            .binary_search_by_key(&a, |o| o.addr)
            .ok()?;
        Some((fi, k))
    }

    /// The tail `s_code_end` padding after the last function is copied (same count).
    fn check_tail(&self, findings: &mut Vec<Finding>) {
        let Some(last_o) = self.funcs.iter().max_by_key(|f| f.orig_start) else {
            return;
        };
        let otail = count_code_end(
            self.otext.slice(last_o.orig_end, self.otext.end()),
            self.isa,
        );
        let Some(last_n) = self
            .funcs
            .iter()
            .filter(|f| f.new_start.is_some())
            .max_by_key(|f| f.new_start)
        else {
            return;
        };
        let ntail = last_n
            .padding
            .iter()
            .filter(|p| p.inst.special() == Special::CodeEnd)
            .count();
        if otail != ntail {
            findings.push(last_n.finding(
                Check::Padding,
                Some(last_o.orig_end),
                last_n.new_body_end(),
                format!("tail padding has {ntail} s_code_end words, the original has {otail}"),
            ));
        }
        for (fi, f) in self.funcs.iter().enumerate() {
            if f.new_start == last_n.new_start {
                continue;
            }
            // Real libraries (rocPRIM in onnxruntime) have `s_code_end` between functions: the
            // original's own gap after `f` may keep it. `funcs` ascend by distinct starts.
            let next = self
                .funcs
                .get(fi + 1)
                .map_or(self.otext.end(), |g| g.orig_start);
            if count_code_end(self.otext.slice(f.orig_end, next), self.isa) > 0 {
                continue;
            }
            if let Some(p) = f
                .padding
                .iter()
                .find(|p| p.inst.special() == Special::CodeEnd)
            {
                findings.push(f.finding(
                    Check::Padding,
                    None,
                    Some(p.addr),
                    "s_code_end inside the text (only allowed as tail padding)".into(),
                ));
            }
        }
    }
}

/// The rewritten object's kept `.text` must be the original `.text`, at the same address and
/// byte for byte (what runs from it is the original code).
fn check_kept(otext: &Text<'_>, kept: &Text<'_>, findings: &mut Vec<Finding>) {
    let differs = if kept.addr != otext.addr || kept.bytes.len() != otext.bytes.len() {
        Some(format!(
            "the kept .text is at {:#x} with {:#x} bytes, the original at {:#x} with {:#x}",
            kept.addr,
            kept.bytes.len(),
            otext.addr,
            otext.bytes.len()
        ))
    } else {
        (0..kept.bytes.len())
            .find(|&k| kept.bytes[k] != otext.bytes[k])
            .map(|k| format!("the kept .text differs from the original at byte {k:#x}"))
    };
    if let Some(message) = differs {
        findings.push(Finding {
            check: Check::Sections,
            function: None,
            original_address: Some(otext.addr),
            new_address: Some(kept.addr),
            message,
        });
    }
}

fn check_new_only(orig: &CodeObject, new: &CodeObject, findings: &mut Vec<Finding>) {
    let kernels: HashSet<&str> = orig.kernels.iter().map(|k| k.name.as_str()).collect();
    let functions: HashSet<&str> = orig.functions.iter().map(|f| f.name.as_str()).collect();
    for k in &new.kernels {
        if !kernels.contains(k.name.as_str()) {
            findings.push(Finding {
                check: Check::Functions,
                function: Some(k.name.clone()),
                original_address: None,
                new_address: Some(k.entry),
                message: "kernel exists only in the rewritten code object".into(),
            });
        }
    }
    for f in &new.functions {
        if !functions.contains(f.name.as_str()) {
            findings.push(Finding {
                check: Check::Functions,
                function: Some(f.name.clone()),
                original_address: None,
                new_address: Some(f.address),
                message: "device function exists only in the rewritten code object".into(),
            });
        }
    }
}

fn count_code_end(bytes: &[u8], isa: Target) -> usize {
    let mut off = 0;
    let mut n = 0;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let Ok(i) = decode(rest, isa) else { break };
        if i.special() == Special::CodeEnd {
            n += 1;
        }
        off += i.len();
    }
    n
}

/// End of a symbol-less (or zero-sized) function: its region minus trailing padding words.
fn trim_padding(t: &Text<'_>, start: u64, end: u64, isa: Target) -> u64 {
    let mut off = 0;
    let bytes = t.slice(start, end);
    let mut last_real = 0;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let Ok(i) = decode(rest, isa) else { return end };
        off += i.len();
        if !is_padding(&i) {
            last_real = off;
        }
    }
    start + last_real as u64
}

/// Decodes the original body of function `fi`, the registers of its instructions, and aligns
/// its rewritten copy with it ([`align`]); then the registers and classes of its inserted code.
/// `falls_off_allowed`: a body whose last instruction falls through is marked as running off
/// its end ([`Func::falls_off`]); `false` for one that ends in a call of a function that never
/// returns. Returns the alignment findings; errors: the body does not decode.
fn prepare(
    f: &mut Func,
    fi: usize,
    ostarts: &[u64],
    otext: &Text<'_>,
    isa: Target,
    falls_off_allowed: bool,
) -> Result<Vec<Finding>, VerifyError> {
    let body = decode_original(otext, f, isa)?;
    let mut used = RegSet::new();
    let mut table: Vec<Regs> = Vec::new();
    let mut index: HashMap<Regs, u32, BuildRegsHasher> = HashMap::default();
    let mut shapes: HashMap<amdgpu_isa::Shape, u32, BuildRegsHasher> = HashMap::default();
    // The registers, and whether the aligner may take the instruction for inserted
    // code (`insertable_regs`), are functions of the encoding (one target per
    // object): an instruction with the bytes of an earlier one of the function (most
    // of them) takes both without a decode of its operands. `used` is a union, so
    // the distinct encodings' registers give it.
    // Sized for a quarter of the body distinct (no rehash on most functions).
    // The shape (`Func::shapes`) is one too.
    // Keyed by the encoding as integers (`encoding_key`): hashed in two steps and
    // compared without a byte loop.
    let mut by_bytes: HashMap<EncodingKey, ((u32, u32), bool), BuildRegsHasher> =
        HashMap::with_capacity_and_hasher(body.len() / 4, Default::default());
    let mut facts = |i: &Instruction| {
        let (r, w) = i.reads_writes();
        used.union_with(&r);
        used.union_with(&w);
        let x = Regs::of(i, &r, &w);
        let k = *index.entry(x).or_insert_with(|| {
            table.push(x);
            (table.len() - 1) as u32
        });
        let s = *shapes.entry(i.shape()).or_insert_with(|| {
            f.shapes.push(*i);
            (f.shapes.len() - 1) as u32
        });
        ((s, k), crate::insn::insertable_regs(i, &x))
    };
    let (index_of, body_ins): (Vec<(u32, u32)>, Vec<bool>) = body
        .iter()
        .map(|(_, i)| match encoding_key(i.bytes()) {
            Some(key) => *by_bytes.entry(key).or_insert_with(|| facts(i)),
            None => facts(i),
        })
        .unzip();
    drop(index);
    drop(shapes);
    drop(by_bytes);
    table.shrink_to_fit();
    f.shapes.shrink_to_fit();
    if falls_off_allowed && crate::verbatim::falls_off(&body) {
        let next = ostarts.get(fi + 1).copied().unwrap_or(otext.end());
        f.falls_off = Some(next.saturating_sub(f.orig_end));
    }
    f.builders = find_builders(&body);
    f.orig_used = used;
    let mut found = Vec::new();
    align(f, body, index_of, &body_ins, isa, &mut found);
    // Grown by pushes (up to twice the size): kept for every later check.
    f.inserted.shrink_to_fit();
    f.padding.shrink_to_fit();
    f.regs_table = table;
    // Registers and class are functions of the encoding: decoded once per distinct
    // encoding of the function's inserted code.
    let mut by_bytes: HashMap<&[u8], (u32, Option<Region>), BuildRegsHasher> = HashMap::default();
    let mut table: Vec<Regs> = Vec::new();
    let mut index: HashMap<Regs, u32, BuildRegsHasher> = HashMap::default();
    let (at, class): (Vec<u32>, Vec<Option<Region>>) = f
        .inserted
        .iter()
        .map(|n| {
            *by_bytes.entry(n.inst.bytes()).or_insert_with(|| {
                let r = Regs::of_inst(&n.inst);
                let k = *index.entry(r).or_insert_with(|| {
                    table.push(r);
                    (table.len() - 1) as u32
                });
                (k, region_class_regs(&n.inst, &r))
            })
        })
        .unzip();
    drop(by_bytes);
    f.inserted_regs_at = at;
    f.inserted_class = class;
    f.inserted_regs_table = table;
    Ok(found)
}

fn decode_original(
    t: &Text<'_>,
    f: &Func,
    isa: Target,
) -> Result<Vec<(u64, Instruction)>, VerifyError> {
    let bytes = t.slice(f.orig_start, f.orig_end);
    // Every instruction is at least 4 bytes: no reallocation (untouched capacity of a large
    // body is never paged in).
    let mut out = Vec::with_capacity(bytes.len() / 4);
    let mut off = 0usize;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let addr = f.orig_start + off as u64;
        let i = decode(rest, isa).map_err(|e| VerifyError::OriginalDecode {
            function: f.name.clone(),
            address: addr,
            offset: t.offset + (addr - t.addr),
            detail: e.kind.to_string(),
        })?;
        off += i.len();
        out.push((addr, i));
    }
    Ok(out)
}

/// Whether landing at instruction `p` of the inserted run `run` enters a marker after the write of
/// its M0 value: the first `s_ttracedata` from `p` on, before any M0 write from `p` on, would
/// send an M0 that an instruction before `p` set (issue 37: a jump re-aimed 4 bytes into a
/// marker). Landing at the start of a marker, or on the original instruction, stays allowed.
fn splits_marker(run: &[NInst], p: usize) -> bool {
    let set_before = run[..p]
        .iter()
        .any(|n| n.inst.writes().contains(SpecialReg::M0));
    if !set_before {
        return false;
    }
    for n in &run[p..] {
        if n.inst.writes().contains(SpecialReg::M0) {
            return false;
        }
        if n.inst.special() == Special::TtraceData {
            return true;
        }
    }
    false
}

/// Whether rewritten `n` is original `o` up to its PC-relative field: the simm16 of a direct
/// branch or call, or the literal when `pcrel_literal` (an add of an `s_getpc` address builder)
/// or for `s_add_pc_i64`. Every other byte must be equal.
pub(crate) fn same(o: &Instruction, n: &Instruction, pcrel_literal: bool) -> bool {
    if o.len() != n.len() || o.target() != n.target() {
        return false;
    }
    if o.branch_target(0).is_some() {
        return o.bytes().get(2..) == n.bytes().get(2..);
    }
    if pcrel_literal || o.special() == amdgpu_isa::Special::AddPcI64 {
        if let (Ok(a), Ok(b)) = (o.with_literal(0), n.with_literal(0)) {
            return a.bytes() == b.bytes();
        }
    }
    o.bytes() == n.bytes()
}

fn hex(b: &[u8]) -> String {
    b.chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            format!("{:08x}", u32::from_le_bytes(w))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Address windows of a stretch: the original instructions `[first, end]` and the rewritten
/// instructions `[first, end]` (ends inclusive: an inserted branch may target the end of its run).
#[derive(Clone, Copy)]
struct Windows<'a> {
    orig: (u64, u64),
    new: (u64, u64),
    /// Start addresses of long-branch islands and landing blocks in the rewritten region: a
    /// relaxed original branch, or one with a landing block, targets one of them.
    islands: &'a std::collections::BTreeSet<u64>,
}

/// Whether original `o` (at `o_addr`) and rewritten `n` can be the same instruction: equal up to
/// PC-relative fields, and a branch whose rewritten target stays inside the inserted stretch
/// (an instrumentation-internal branch) is not taken for an original branch whose target lies
/// outside the original stretch.
fn matches(o_addr: u64, o: &Instruction, n: &NInst, w: Windows, pcrel_literal: bool) -> bool {
    if !same(o, &n.inst, pcrel_literal) {
        return false;
    }
    let (Some(to), Some(tn)) = (o.branch_target(o_addr), n.inst.branch_target(n.addr)) else {
        return true;
    };
    // A relaxed branch targets its long-branch island, a branch with a landing block that block;
    // both trail it: forward, whatever the original direction (their own destination is checked
    // by the flow check).
    if w.islands.contains(&tn) {
        return true;
    }
    // Relocation keeps the order of instructions, so a branch keeps its direction.
    if (to > o_addr) != (tn > n.addr) {
        return false;
    }
    let inside = |t: u64, (a, b): (u64, u64)| t >= a && t <= b;
    !inside(tn, w.new) || inside(to, w.orig)
}

/// Positions in `new` of a subsequence equal to `orig`, each matched as late as possible.
fn match_late(orig: &[(u64, Instruction)], new: &[NInst], w: Windows) -> Option<Vec<usize>> {
    let mut pos = vec![0usize; orig.len()];
    let mut hi = new.len();
    for (t, (a, o)) in orig.iter().enumerate().rev() {
        let p = new[..hi]
            .iter()
            .rposition(|n| matches(*a, o, n, w, false))?;
        pos[t] = p;
        hi = p;
    }
    Some(pos)
}

/// Positions in `new` of a subsequence equal to `orig`, each matched as early as possible.
fn match_early(orig: &[(u64, Instruction)], new: &[NInst], w: Windows) -> Option<Vec<usize>> {
    let mut pos = Vec::with_capacity(orig.len());
    let mut lo = 0usize;
    for (a, o) in orig {
        let p = lo + new[lo..].iter().position(|n| matches(*a, o, n, w, false))?;
        pos.push(p);
        lo = p + 1;
    }
    Some(pos)
}

/// How implausible an alignment is: the number of inserted runs (maximal stretches of
/// unmatched rewritten instructions) that begin in the middle of a snippet. Every snippet the
/// rewriter inserts starts with `s_ttracedata_imm`, `s_mov_b32 m0, K`, an M0 save or an SCC
/// save or a scope guard (`s_cmp_lg_u32 sFLAG, 0` then `s_cbranch_scc*`), never with `s_nop 0`,
/// `s_ttracedata`, an M0 restore, an SCC restore (`s_cmp_lg_u32 sR, 0` not followed by an SCC
/// branch) or a closing wait (`s_waitcnt_vscnt`, `s_wait_alu`), and never at the head of one of
/// its own loops (an address-trace loop is entered after its lane counter is set: a run that
/// begins where a later branch of `new` jumps back to starts inside a snippet; fastllm's
/// `FastllmGemv*MultiRow` kernels for gfx1100, where the original right before a site was
/// `s_mov_b32 s1, 0`, the bytes of the loop's counter init, issue 29).
fn misaligned_runs(pos: &[usize], new: &[NInst]) -> usize {
    let loop_heads: std::collections::BTreeSet<u64> = new
        .iter()
        .filter_map(|n| n.inst.branch_target(n.addr).filter(|&t| t < n.addr))
        .collect();
    let closing = |q: usize, i: &Instruction| match i.mnemonic() {
        "s_cmp_lg_u32" => {
            i.field("ssrc1") == Some(128)
                && !new
                    .get(q + 1)
                    .is_some_and(|n| n.inst.mnemonic().starts_with("s_cbranch_scc"))
        }
        "s_waitcnt_vscnt" | "s_wait_alu" => true,
        _ => false,
    };
    let mut bad = 0;
    let mut prev_matched = true;
    for (q, n) in new.iter().enumerate() {
        // `pos` is strictly increasing (a subsequence's positions).
        let matched = pos.binary_search(&q).is_ok();
        if !matched
            && prev_matched
            && (matches!(
                allowed(&n.inst),
                Some(Allowed::Nop0 | Allowed::Ttrace | Allowed::RestoreM0(_))
            ) || closing(q, &n.inst)
                || loop_heads.contains(&n.addr))
        {
            bad += 1;
        }
        prev_matched = matched;
    }
    bad
}

/// How many of the next originals the decoder of the rewritten text compares the next bytes
/// with (a copy with a relocated PC-relative field does not match its original's bytes; the
/// cursor steps over up to this many such copies in a row).
const CURSOR_WINDOW: usize = 4;

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

/// An encoding of up to 16 bytes as a map key ([`encoding_key`]).
type EncodingKey = (u128, u64);

/// An encoding of up to 16 bytes as a map key: the bytes zero-padded into a little-endian
/// `u128`, and the length (bytes), so encodings that differ only in trailing zero bytes differ.
/// `None` for a longer encoding (MIMG NSA, gfx950/gfx1250 two-part instructions: rare).
fn encoding_key(b: &[u8]) -> Option<EncodingKey> {
    let mut w = [0u8; 16];
    w.get_mut(..b.len())?.copy_from_slice(b);
    Some((u128::from_le_bytes(w), b.len() as u64))
}

pub(crate) type BuildRegsHasher = std::hash::BuildHasherDefault<RegsHasher>;

/// Forward greedy alignment of the original body against the rewritten region. Inserted
/// instructions go in front of originals, so an original is matched at the first rewritten
/// instruction equal to it.
/// `index_of`: parallel to `body`, its shapes and register summaries (indices into
/// `f.shapes` and `f.regs_table`); `body_ins`: parallel to `body`, whether each is insertable
/// (`insertable_regs`).
fn align(
    f: &mut Func,
    body: Vec<(u64, Instruction)>,
    index_of: Vec<(u32, u32)>,
    body_ins: &[bool],
    isa: Target,
    findings: &mut Vec<Finding>,
) {
    let ntext = f.ntext;
    // Inserted code may write any SGPR that is dead where it runs (checked per run by `flow`),
    // so the aligner accepts SGPR writes anywhere.
    let free = crate::insn::every_sgpr();
    let ins = |i: &Instruction| insertable(i, &free);
    let pcrel: Vec<usize> = f
        .builders
        .iter()
        .flat_map(|b| b.parts.iter().copied())
        .collect();
    let unplaced = |f: &mut Func, from: usize| {
        let run_end = f.inserted.len();
        f.orig.extend(
            body[from..]
                .iter()
                .zip(&index_of[from..])
                .map(|(&(addr, _), &(s, r))| OInst::unplaced(addr, s, r, run_end)),
        );
    };
    f.orig = Vec::with_capacity(body.len());
    let Some(start) = f.new_start else {
        unplaced(f, 0);
        return;
    };
    if !ntext.contains(start) {
        findings.push(f.finding(
            Check::Functions,
            Some(f.orig_start),
            Some(start),
            "rewritten entry is outside .text".into(),
        ));
        unplaced(f, 0);
        return;
    }
    // Decode the rewritten region; stop at the first word that does not decode. Most of it is
    // copies of the originals in order: a cursor follows them along the text, and where the
    // next bytes are those of one of the next originals, that original's instruction is taken
    // instead of a second decode (`same_as`: its index). `decode` reads only the instruction's
    // own bytes (its format's fields, literal and NSA dwords), except for an 8-byte VOP3P
    // word pair, where it looks at the next 8 bytes for a gfx950/gfx1250 two-part instruction
    // (`amdgpu_isa` `decode_at`): those are always decoded here.
    let bytes = ntext.slice(start, f.new_region_end);
    let mut new = Vec::with_capacity(bytes.len() / 4);
    let mut same_as: Vec<u32> = Vec::with_capacity(bytes.len() / 4);
    let mut cur = 0usize;
    let mut off = 0usize;
    while let Some(rest) = bytes.get(off..).filter(|r| !r.is_empty()) {
        let addr = start + off as u64;
        let copy = (cur..(cur + CURSOR_WINDOW).min(body.len())).find(|&t| {
            let o = &body[t].1;
            rest.starts_with(o.bytes())
                && !(o.format() == amdgpu_isa::Format::Vop3p && o.len() == 8)
        });
        if let Some(t) = copy {
            cur = t + 1;
            off += body[t].1.len();
            new.push(NInst {
                addr,
                inst: body[t].1,
            });
            same_as.push(t as u32);
            continue;
        }
        match decode(rest, isa) {
            Ok(i) => {
                off += i.len();
                new.push(NInst { addr, inst: i });
                same_as.push(u32::MAX);
            }
            Err(e) => {
                findings.push(f.finding(
                    Check::Decode,
                    None,
                    Some(addr),
                    format!("rewritten text does not decode: {}", e.kind),
                ));
                break;
            }
        }
    }
    // An island is only a recognised sequence entered from the relaxed branch right before it
    // (`branch; island`, or `conditional branch; s_branch over the island; island`): that is
    // how the rewriter lays them out. The compiler's own long branches (LLVM's branch
    // relaxation) are entered by fall-through or from a branch elsewhere, and stay originals.
    let jumps_to = |p: Option<usize>, a: u64| {
        p.and_then(|p| new.get(p))
            .is_some_and(|b| b.inst.branch_target(b.addr) == Some(a))
    };
    let island_ranges: Vec<(u64, u64)> = (0..new.len())
        .filter_map(|q| island_at(&new, q).map(|isl| (q, isl)))
        .filter(|(q, isl)| {
            let (before, a) = (q.checked_sub(1), new[*q].addr);
            let over = before.is_some_and(|p| new[p].inst.mnemonic() == "s_branch")
                && jumps_to(before, isl.end);
            jumps_to(before, a) || (over && jumps_to(q.checked_sub(2), a))
        })
        .map(|(q, isl)| (new[q].addr, isl.end))
        .collect();
    // Landing blocks: inserted code a branch right before it was retargeted to.
    let landing_ranges: Vec<(u64, u64)> = (0..new.len())
        .filter_map(|q| landing_after(&new, q, ins).map(|(t, b, _)| (t, b.end)))
        .collect();
    let island_starts: std::collections::BTreeSet<u64> = island_ranges
        .iter()
        .chain(&landing_ranges)
        .map(|&(a, _)| a)
        .collect();
    let mut island_ranges: Vec<(u64, u64)> =
        island_ranges.into_iter().chain(landing_ranges).collect();
    island_ranges.sort_unstable();
    // Classified once per instruction (the loop below asks several times per position): an
    // address is in some range `[s, e)` when the largest end of the ranges starting at or before
    // it lies after it (one walk along both ascending lists, not a scan of the ranges per
    // instruction).
    let (mut r, mut reach) = (0usize, 0u64);
    let new_island: Vec<bool> = new
        .iter()
        .map(|n| {
            while let Some(&(_, e)) = island_ranges.get(r).filter(|x| x.0 <= n.addr) {
                reach = reach.max(e);
                r += 1;
            }
            n.addr < reach
        })
        .collect();
    // An instruction with an original's bytes (`same_as`, found while decoding) has that
    // original's answer; only the other instructions are classified.
    let new_ins: Vec<bool> = new
        .iter()
        .zip(&new_island)
        .zip(&same_as)
        .map(|((n, &isl), &t)| {
            isl || body_ins
                .get(t as usize)
                .copied()
                .unwrap_or_else(|| ins(&n.inst))
        })
        .collect();
    drop(same_as);
    let ins_new = |q: usize| new_ins[q];
    let (mut i, mut j) = (0usize, 0usize);
    while i < body.len() && j < new.len() {
        // A stretch of insertable instructions in front of a non-insertable one holds every
        // insertable-looking original up to that point: match them as late as possible (inserted
        // code goes in front of originals), so an inserted `s_nop 0` is not taken for an
        // original one.
        let e = (j..new.len()).find(|&x| !ins_new(x)).unwrap_or(new.len());
        let m = body_ins[i..].iter().take_while(|&&x| x).count();
        let w = Windows {
            orig: (body[i].0, body.get(i + m).map_or(f.orig_end, |(a, _)| *a)),
            new: (new[j].addr, new.get(e).map_or(f.new_region_end, |n| n.addr)),
            islands: &island_starts,
        };
        if ins_new(j) && e < new.len() {
            let late = match_late(&body[i..i + m], &new[j..e], w);
            let early = match_early(&body[i..i + m], &new[j..e], w);
            let pick = match (late, early) {
                (Some(l), Some(r)) => {
                    if misaligned_runs(&r, &new[j..e]) < misaligned_runs(&l, &new[j..e]) {
                        Some(r)
                    } else {
                        Some(l)
                    }
                }
                (l, r) => l.or(r),
            };
            if let Some(pos) = pick {
                for (q, n) in new[j..e].iter().enumerate() {
                    // `pos` is strictly increasing: a binary search, not a scan per instruction.
                    if let Ok(t) = pos.binary_search(&q) {
                        let (oa, oi) = &body[i + t];
                        f.place(*oa, oi, index_of[i + t], n);
                    } else {
                        f.inserted.push(*n);
                    }
                }
                i += m;
                j = e;
                continue;
            }
        }
        let (oa, oi) = body[i];
        let n = new[j];
        // Islands and landing blocks are never original code, even where no original follows
        // them (a landing block right before a function's last branch: its own `s_branch` must
        // not be taken for that branch).
        if new_island[j] {
            f.inserted.push(n);
            j += 1;
            continue;
        }
        let lit = pcrel.contains(&i);
        if matches(oa, &oi, &n, w, lit) {
            f.place(oa, &oi, index_of[i], &n);
            i += 1;
            j += 1;
            continue;
        }
        if ins_new(j) {
            f.inserted.push(n);
            j += 1;
            continue;
        }
        if new.get(j + 1).is_some_and(|m| same(&oi, &m.inst, lit)) {
            // A foreign instruction inserted in front of the original: `check_inserted` reports it.
            f.inserted.push(n);
            j += 1;
            continue;
        }
        findings.push(f.finding(
            Check::Alignment,
            Some(oa),
            Some(n.addr),
            format!(
                "original instruction changed: expected {} [{}], found {} [{}]",
                oi.mnemonic(),
                hex(oi.bytes()),
                n.inst.mnemonic(),
                hex(n.inst.bytes())
            ),
        ));
        f.place(oa, &oi, index_of[i], &n);
        i += 1;
        j += 1;
    }
    if i < body.len() {
        let (oa, oi) = body[i];
        findings.push(f.finding(
            Check::Alignment,
            Some(oa),
            new.get(j).map(|n| n.addr),
            format!(
                "{} original instructions missing from the rewritten function, first {}",
                body.len() - i,
                oi.mnemonic()
            ),
        ));
        unplaced(f, i);
    }
    // The bytes that followed a function execution falls off are compared by `verbatim::check`.
    let copied_end = f
        .falls_off
        .zip(f.orig.last().and_then(|o| f.copy(o)))
        .map_or(0, |(gap, n)| n.addr + n.inst.len() as u64 + gap);
    for (q, n) in new.iter().enumerate().skip(j) {
        if new_island[q] {
            // A relaxed last branch's long form trails it inside the function (its extent runs
            // to the next function); checked as an island like any other.
            f.inserted.push(*n);
        } else if is_padding(&n.inst) {
            f.padding.push(*n);
        } else if n.addr < copied_end {
            continue;
        } else {
            findings.push(f.finding(
                Check::Padding,
                None,
                Some(n.addr),
                format!(
                    "{} after the end of the function (padding must be s_nop 0)",
                    n.inst.mnemonic()
                ),
            ));
        }
    }
}
