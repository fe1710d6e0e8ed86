//! Analysis of decoded code: functions, per-instruction control flow, PC-relative address
//! builders, call graph, and the M0 facts the marker snippets need (liveness and known constants).
//!
//! Everything that would make moving code unsafe is recorded as a [`Problem`] on the function;
//! the rewriter then fails closed (docs/background/rewriting.md: "A computed jump or call target the
//! rewriter cannot resolve ... fail closed").

use crate::calltable::{Built, Pending, Resolved};
use crate::consteval::OffsetExpr;
use crate::insts::Insts;
use crate::layout::{PcRel, PcRelUse, Reloc, Relocs};
use crate::regs::Sgprs;
use crate::reguse::{RegUse, RegUses};
use amdgpu_isa::{Flow, Instruction, Special, Target};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// A function to analyse, as found by the container layer.
#[derive(Debug, Clone)]
pub struct FnSpec {
    /// Symbol name (mangled), or the descriptor name minus `.kd` for kernels.
    pub name: String,
    /// Entry address (bytes).
    pub start: u64,
    /// End address, exclusive (bytes).
    pub end: u64,
    /// Kernel facts, `None` for device functions.
    pub kernel: Option<KernelSpec>,
}

/// Facts about a kernel from its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    /// The kernel starts with the 256-byte kernarg-preload backward-compatible prologue (set from
    /// the descriptor's preload length, then confirmed by [`analyse`] from the code).
    pub preload: bool,
    /// Wave size (32 or 64).
    pub wave_size: u32,
}

/// Why a function cannot be moved or instrumented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Original address of the offending instruction (bytes).
    pub addr: u64,
    /// Human-readable reason.
    pub why: String,
}

/// The [`Problem`] of a function whose last instruction does not end execution (no `s_endpgm`,
/// return or unconditional branch): execution would run into whatever follows it.
pub const FALLS_OFF_END: &str = "execution falls off the end of the function";

/// The [`Problem`] of a function whose last instruction is a call: execution falls off its end
/// if the callee returns. Compilers end a function that way when the callee does not return
/// (`__assert_fail` calling the message printer, then nothing), so unlike [`FALLS_OFF_END`] the
/// function is code that can run, not a compiled-out stub.
pub const FALLS_OFF_AFTER_CALL: &str =
    "execution falls off the end of the function after its last instruction, a call (to a function that presumably does not return)";

/// The trap ID of `s_trap 2` (`llvm.trap` on amdhsa): AMDGPUUsage, "Trap Handler ABI", trap ID
/// 0x02 is `llvm.trap`, which aborts the queue; the wave never resumes after it.
pub const ABORT_TRAP_ID: u32 = 2;

/// Whether `inst` is `s_trap 2` ([`ABORT_TRAP_ID`]): as the last instruction of a function it
/// ends it like `s_endpgm` (no "falls off the end" problem); other trap IDs (`s_trap 3`,
/// `llvm.debugtrap`, ...) resume at the next instruction. The trap ID is the low 8 bits of
/// simm16 (ISA manuals, "S_TRAP").
pub fn aborts(inst: &Instruction) -> bool {
    inst.flow() == Flow::Trap && inst.field("simm16").map(|v| v & 0xff) == Some(ABORT_TRAP_ID)
}

/// Who a call site calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Callee {
    /// A function of this code object (index into [`Program::funcs`]).
    Direct(usize),
    /// Through a register we cannot resolve: any function.
    Indirect,
}

/// How control leaves a function at an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `s_endpgm` (kernels).
    EndPgm,
    /// `s_setpc_b64` through the return address (device functions).
    Return,
    /// `s_setpc_b64` to another function's entry (tail call).
    TailCall(usize),
}

/// The successors of one instruction (instruction indices, at most two: a branch target and
/// the fall-through, in the order found), stored inline (8 bytes, no allocation; an empty slot
/// holds `u32::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Succs {
    s: [u32; 2],
}

impl Default for Succs {
    fn default() -> Succs {
        Succs { s: [u32::MAX; 2] }
    }
}

impl Succs {
    /// Adds successor `i`. Panics on a third successor, which no instruction has (a SOPP
    /// branch has its target and the fall-through; `s_setpc_b64`/`s_add_pc_i64` one target).
    fn push(&mut self, i: usize) {
        let n = self.len();
        assert!(n < 2, "an instruction has at most two successors");
        // Instruction indices stay far below u32::MAX (4 bytes or more per instruction).
        self.s[n] = i as u32;
    }

    /// Number of successors (0 to 2).
    fn len(&self) -> usize {
        self.s.iter().take_while(|&&s| s != u32::MAX).count()
    }

    /// The successors, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.into_iter()
    }

    /// No successor (execution leaves the function here).
    pub fn is_empty(&self) -> bool {
        self.s[0] == u32::MAX
    }
}

impl<'a> IntoIterator for &'a Succs {
    type Item = usize;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, u32>, fn(&u32) -> usize>;

    fn into_iter(self) -> Self::IntoIter {
        self.s[..self.len()].iter().map(|&s| s as usize)
    }
}

/// One analysed function.
#[derive(Debug, Clone)]
pub struct Func {
    /// The input description.
    pub spec: FnSpec,
    /// Decoded instructions with their original addresses (compact: [`Insts`]).
    pub insts: Insts,
    /// Register use of each instruction, parallel to `insts` ([`RegUse::of`], computed once when
    /// the function is decoded).
    pub reg_use: RegUses,
    /// What the layout must fix, by instruction index (only the instructions that have one).
    pub relocs: Relocs,
    /// Successor instruction indices, parallel to `insts` (at most two inline; see
    /// [`Func::successors`] for all of them).
    pub succs: Vec<Succs>,
    /// Successors beyond [`Func::succs`]: the subroutine entries of an in-function call through
    /// a built address, and the return sites of its return ([`crate::calltable`]).
    pub more_succs: BTreeMap<usize, Vec<usize>>,
    /// The `s_setpc_b64` returns of those in-function calls ([`crate::calltable`]), by
    /// instruction index.
    pub sub_returns: BTreeSet<usize>,
    /// Instruction indices that are branch targets inside the function.
    pub leaders: BTreeSet<usize>,
    /// Call sites: instruction index and callee.
    pub calls: Vec<(usize, Callee)>,
    /// Exits: instruction index and kind.
    pub exits: Vec<(usize, Exit)>,
    /// Everything that makes moving or instrumenting it unsafe.
    pub problems: Vec<Problem>,
}

impl Func {
    /// Every successor of instruction `i` (instruction indices): the inline ones, then the
    /// extra ones of in-function calls and returns.
    pub fn successors(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.succs[i]
            .iter()
            .chain(self.more_succs.get(&i).into_iter().flatten().copied())
    }
}

/// Analysis of all code of one code object.
#[derive(Debug, Clone)]
pub struct Program {
    /// Target processor.
    pub target: Target,
    /// `.text` start address (bytes).
    pub text_addr: u64,
    /// `.text` end address (bytes, exclusive).
    pub text_end: u64,
    /// Functions sorted by address.
    pub funcs: Vec<Func>,
    /// PC-relative address builders referenced by relocs.
    pub pcrels: Vec<PcRel>,
}

/// Whether SGPR `n` is in `s`.
fn has(s: Sgprs, n: u16) -> bool {
    n < 128 && s >> n & 1 == 1
}

/// The pair `s[lo:lo+1]` at the top of the SGPRs an instruction writes (`s_getpc_b64`).
fn sgpr_pair_written(u: &RegUse) -> Option<u16> {
    let w = u.operand_writes();
    let lo = (w.checked_ilog2()? as u16).checked_sub(1)?;
    has(w, lo).then_some(lo)
}

/// Value of an inline integer constant or literal in scalar source field `name`, when the field
/// does not name register `reg` (ISA manuals, "Scalar ALU operands": 128..=192 → 0..=64,
/// 193..=208 → -1..=-16, 255 → literal).
fn scalar_const(inst: &Instruction, name: &str) -> Option<u64> {
    let v = inst.field(name)?;
    match v {
        128..=192 => Some(u64::from(v - 128)),
        193..=208 => Some((-(i64::from(v) - 192)) as u64),
        255 => inst.literal(),
        _ => None,
    }
}

/// High half of a 64-bit add: the constant among `ssrc0`/`ssrc1`, sign-extended to 64 bits.
fn hi_const(inst: &Instruction) -> Option<u32> {
    scalar_const(inst, "ssrc1")
        .or_else(|| scalar_const(inst, "ssrc0"))
        .map(|v| v as u32)
}

struct Decoded {
    insts: Insts,
    reg_use: RegUses,
}

fn decode_fn(
    target: Target,
    text: &[u8],
    text_addr: u64,
    spec: &FnSpec,
) -> Result<Decoded, Problem> {
    let lo = (spec.start - text_addr) as usize;
    let hi = (spec.end - text_addr) as usize;
    let bytes = text.get(lo..hi).ok_or_else(|| Problem {
        addr: spec.start,
        why: "function range outside .text".into(),
    })?;
    if u32::try_from(bytes.len()).is_err() {
        return Err(Problem {
            addr: spec.start,
            why: "function of 4 GiB or more (instructions are kept as 32-bit offsets)".into(),
        });
    }
    let insts = Insts::decode(bytes, spec.start, target).map_err(|e| Problem {
        addr: spec.start + e.offset as u64,
        why: format!("cannot decode: {}", e.kind),
    })?;
    let reg_use = RegUses::of(insts.iter().map(|(_, i)| i));
    Ok(Decoded { insts, reg_use })
}

const ADD_LO: [&str; 2] = ["s_add_u32", "s_add_co_u32"];
const ADD_HI: [&str; 2] = ["s_addc_u32", "s_add_co_ci_u32"];
const SUB_LO: [&str; 2] = ["s_sub_u32", "s_sub_co_u32"];
const SUB_HI: [&str; 2] = ["s_subb_u32", "s_sub_co_ci_u32"];

/// A recognised address builder inside one function, before classification of its use.
struct Builder {
    getpc: usize,
    pair: u16,
    target: u64,
    /// (instruction index, reloc) for the adds.
    fixups: Vec<(usize, RelocPart)>,
    /// Index after which the pair holds the address.
    done_at: usize,
}

#[derive(Clone, Copy)]
enum RelocPart {
    Lo,
    Hi,
    Whole,
    /// The literal of the offset computation of an evaluated builder ([`crate::consteval`]).
    Eval(OffsetExpr),
    /// The last instruction of an evaluated builder (nothing to re-encode).
    End,
}

/// Recognises `s_getpc_b64 s[a:a+1]` followed (in straight-line code) by the adds of a
/// linker-resolved offset: `s_add_u32`/`s_addc_u32` (gfx9-gfx11), `s_add_co_u32`/
/// `s_add_co_ci_u32` with `s_sext_i32_i16` and `s_wait_alu` in between (gfx12), or one
/// `s_add_nc_u64` with a 64-bit literal (gfx1250). Offsets are relative to the getpc address + 4.
fn match_builder(
    insts: &Insts,
    reg_use: &RegUses,
    leaders: &BTreeSet<usize>,
    i: usize,
) -> Result<Builder, Problem> {
    let addr = &insts.addr(i);
    let fail = |at: u64, why: &str| Problem {
        addr: at,
        why: format!("unrecognised PC-relative sequence from s_getpc at {addr:#x}: {why}"),
    };
    let a =
        sgpr_pair_written(&reg_use[i]).ok_or_else(|| fail(*addr, "no SGPR pair destination"))?;
    // (instruction index, 32-bit constant) of the low and high adds once seen.
    type Half = Option<(usize, u32)>;
    let (mut lo, mut hi): (Half, Half) = (None, None);
    // (low add index, offset register, subtract) of an evaluated builder.
    let mut evaluated: Option<(usize, u16, bool)> = None;
    for (j, (ja, inst)) in (i + 1..).zip(insts.range(i + 1..insts.len())) {
        if leaders.contains(&j) {
            return Err(fail(ja, "branch target inside the sequence"));
        }
        let (r, w) = (reg_use[j].operand_reads(), reg_use[j].operand_writes());
        let touches_r = has(r, a) || has(r, a + 1);
        let touches_w = has(w, a) || has(w, a + 1);
        if !touches_r && !touches_w {
            if inst.flow() != Flow::Fallthrough {
                return Err(fail(ja, "control flow before the adds complete"));
            }
            continue;
        }
        let m = inst.mnemonic();
        // Each add must read the half it writes (`s_add_u32 sa, sa, K`): an add of another
        // source into the pair is not an offset from the PC.
        let (reads_lo, reads_hi) = (has(r, a), has(r, a + 1));
        let (writes_lo, writes_hi) = (has(w, a), has(w, a + 1));
        if m == "s_add_nc_u64"
            && writes_lo
            && writes_hi
            && reads_lo
            && reads_hi
            && lo.is_none()
            && hi.is_none()
        {
            if inst.len() != 12 {
                return Err(fail(ja, "64-bit add without a 64-bit literal"));
            }
            let off = inst.literal().ok_or_else(|| fail(ja, "no literal"))?;
            return Ok(Builder {
                getpc: i,
                pair: a,
                target: (addr + 4).wrapping_add(off),
                fixups: vec![(j, RelocPart::Whole)],
                done_at: j,
            });
        }
        let low_op = ADD_LO.contains(&m) || SUB_LO.contains(&m);
        if low_op && writes_lo && !writes_hi && reads_lo && !reads_hi && lo.is_none() {
            let sub = SUB_LO.contains(&m);
            match inst.literal() {
                Some(v) if !sub => lo = Some((j, v as u32)),
                _ => {
                    // Tensile: the offset is computed in another SGPR ([`crate::consteval`]).
                    let other = ["ssrc0", "ssrc1"]
                        .iter()
                        .filter_map(|f| inst.field(f))
                        .find(|&v| v < 106 && v != u32::from(a))
                        .ok_or_else(|| fail(ja, "low add without a literal or offset register"))?;
                    evaluated = Some((j, other as u16, sub));
                    lo = Some((j, 0));
                }
            }
        } else if (ADD_HI.contains(&m) || SUB_HI.contains(&m))
            && writes_hi
            && !writes_lo
            && reads_hi
            && !reads_lo
            && lo.is_some()
            && hi.is_none()
            && SUB_HI.contains(&m) == evaluated.is_some_and(|e| e.2)
        {
            let v = hi_const(&inst).ok_or_else(|| fail(ja, "high add without a constant"))?;
            if let Some((add, s, sub)) = evaluated {
                let (root, expr) =
                    crate::consteval::offset_expr(insts, reg_use, leaders, (i, add), s, v, sub)
                        .map_err(|why| fail(ja, &why))?;
                let lit = insts.get(root).literal().unwrap_or(0) as u32;
                return Ok(Builder {
                    getpc: i,
                    pair: a,
                    target: (addr + 4).wrapping_add(expr.eval(lit) as u64),
                    fixups: vec![(root, RelocPart::Eval(expr)), (j, RelocPart::End)],
                    done_at: j,
                });
            }
            hi = Some((j, v));
        } else if m == "s_sext_i32_i16" && writes_hi && !writes_lo && lo.is_none() {
            // gfx12 canonicalises the PC's high half first; the address is unchanged.
        } else {
            return Err(fail(ja, &format!("{m} uses the PC register pair")));
        }
        if let (Some((lj, lv)), Some((hj, hv))) = (lo, hi) {
            let off = (u64::from(hv) << 32) | u64::from(lv);
            return Ok(Builder {
                getpc: i,
                pair: a,
                target: (addr + 4).wrapping_add(off),
                fixups: vec![(lj, RelocPart::Lo), (hj, RelocPart::Hi)],
                done_at: j,
            });
        }
    }
    Err(fail(*addr, "sequence runs off the function"))
}

/// The pair read by `s_setpc_b64`/`s_swappc_b64`-style instructions (lowest SGPR read).
fn pc_source(u: &RegUse) -> Option<u16> {
    let r = u.operand_reads();
    (0..106u16).find(|&n| has(r, n) && has(r, n + 1))
}

/// Index of the first instruction of the padding that ends a function, when it has one: a run
/// of `s_nop`, `s_code_end` or all-zero words after an instruction that does not fall through
/// (`s_endpgm`, an unconditional branch or jump, a return, `s_trap 2`), which no direct branch of
/// the function targets. A function whose extent runs to the next symbol (Tensile's kernels are
/// symbols of size 0, issue 37) holds the linker's alignment padding; cut off, it is padding
/// between functions like any other (an all-zero word decodes as a VALU instruction on gfx9 and
/// would otherwise look like execution falling off the end).
fn trailing_padding(insts: &Insts) -> Option<usize> {
    let pad = |i: &Instruction| {
        matches!(i.special(), Special::Nop | Special::CodeEnd)
            || (0..i.len() / 4).all(|w| i.word(w) == 0)
    };
    let n = insts.len();
    let mut k = n;
    while k > 0 && pad(&insts.get(k - 1)) {
        k -= 1;
    }
    if k == n || k == 0 {
        return None;
    }
    let last = insts.get(k - 1);
    let ends = aborts(&last)
        || matches!(
            last.flow(),
            Flow::EndProgram
                | Flow::Branch { conditional: false }
                | Flow::IndirectJump
                | Flow::Return
        );
    let from = insts.addr(k);
    let targeted = insts
        .iter()
        .any(|(a, i)| i.branch_target(a).is_some_and(|t| t >= from));
    (ends && !targeted).then_some(k)
}

/// Every function decoded, not yet analysed: the output of the decode stage ([`decode`]) and
/// the input of [`analyse_decoded`].
pub struct DecodedProgram {
    target: Target,
    text_addr: u64,
    text_end: u64,
    funcs: Vec<(FnSpec, Result<Decoded, Problem>)>,
}

/// Decodes every function (`text` is `.text`, loaded at `text_addr`). `specs` must be sorted by
/// start and non-overlapping. A function that does not decode keeps the problem.
pub fn decode(target: Target, text: &[u8], text_addr: u64, specs: Vec<FnSpec>) -> DecodedProgram {
    // In parallel over functions; `collect` keeps the order.
    let funcs = specs
        .into_par_iter()
        .map(|mut spec| {
            let mut d = decode_fn(target, text, text_addr, &spec);
            if let Some(k) = d.as_ref().ok().and_then(|d| trailing_padding(&d.insts)) {
                if let Ok(dd) = &d {
                    spec.end = dd.insts.addr(k);
                }
                d = decode_fn(target, text, text_addr, &spec);
            }
            (spec, d)
        })
        .collect();
    DecodedProgram {
        target,
        text_addr,
        text_end: text_addr + text.len() as u64,
        funcs,
    }
}

/// Analyses every decoded function: branches, successors, calls, exits, PC-relative sequences.
pub fn analyse_decoded(d: DecodedProgram) -> Program {
    let DecodedProgram {
        target,
        text_addr,
        text_end,
        funcs: decoded,
    } = d;
    let starts: BTreeMap<u64, usize> = decoded
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.start, i))
        .collect();
    // In parallel over functions, each with its own address builders; then merged in function
    // order, the builders renumbered as if found one function after the other.
    let analysed: Vec<(Func, Vec<PcRel>)> = decoded
        .into_par_iter()
        .map(|(spec, d)| {
            let mut pcrels = Vec::new();
            let f = analyse_one(spec, d, &starts, text_addr, text_end, &mut pcrels);
            (f, pcrels)
        })
        .collect();
    let mut pcrels = Vec::new();
    let mut funcs = Vec::with_capacity(analysed.len());
    for (mut f, local) in analysed {
        let base = pcrels.len();
        if base > 0 {
            for r in f.relocs.relocs_mut() {
                if let Reloc::PcRelLo { idiom }
                | Reloc::PcRelHi { idiom }
                | Reloc::PcRel64 { idiom }
                | Reloc::PcRelEval { idiom, .. }
                | Reloc::PcRelEnd { idiom } = r
                {
                    *idiom += base;
                }
            }
        }
        pcrels.extend(local);
        funcs.push(f);
    }
    crate::noreturn::accept_calls_that_never_return(&mut funcs);
    Program {
        target,
        text_addr,
        text_end,
        funcs,
        pcrels,
    }
}

/// One function: its decoded instructions (or the problem that stopped decoding) analysed by
/// [`analyse_fn`], address builders appended to `pcrels`.
fn analyse_one(
    spec: FnSpec,
    d: Result<Decoded, Problem>,
    starts: &BTreeMap<u64, usize>,
    text_addr: u64,
    text_end: u64,
    pcrels: &mut Vec<PcRel>,
) -> Func {
    {
        let mut f = Func {
            spec,
            insts: Insts::default(),
            reg_use: RegUses::default(),
            relocs: Relocs::default(),
            succs: Vec::new(),
            more_succs: BTreeMap::new(),
            sub_returns: BTreeSet::new(),
            leaders: BTreeSet::new(),
            calls: Vec::new(),
            exits: Vec::new(),
            problems: Vec::new(),
        };
        match d {
            Ok(d) => {
                f.insts = d.insts;
                f.reg_use = d.reg_use;
            }
            Err(p) => {
                f.problems.push(p);
                return f;
            }
        }
        analyse_fn(&mut f, starts, text_addr, text_end, pcrels);
        f
    }
}

/// Decodes and analyses every function ([`decode`], then [`analyse_decoded`]). `specs` must be
/// sorted by start and non-overlapping.
pub fn analyse(target: Target, text: &[u8], text_addr: u64, specs: Vec<FnSpec>) -> Program {
    analyse_decoded(decode(target, text, text_addr, specs))
}

fn analyse_fn(
    f: &mut Func,
    starts: &BTreeMap<u64, usize>,
    text_addr: u64,
    text_end: u64,
    pcrels: &mut Vec<PcRel>,
) {
    let n = f.insts.len();
    // Instruction index by address (instructions are in ascending address order).
    let insts = &f.insts;
    let index = |t: u64| insts.index_of(t);
    let in_fn = |t: u64| t >= f.spec.start && t < f.spec.end;
    // Relocations as set, in order (the last one set for an instruction counts).
    let mut relocs: Vec<(u32, Reloc)> = Vec::new();
    f.succs = vec![Succs::default(); n];
    // Pass 1: direct branches.
    for i in 0..n {
        if let Flow::Branch { .. } = f.insts.flow(i) {
            let (a, inst) = f.insts.at(i);
            match inst.branch_target(a) {
                Some(t) if in_fn(t) => match index(t) {
                    Some(ti) => {
                        f.leaders.insert(ti);
                        relocs.push((i as u32, Reloc::Branch { target: t }));
                    }
                    None => f.problems.push(Problem {
                        addr: a,
                        why: format!("branch into the middle of an instruction at {t:#x}"),
                    }),
                },
                Some(t) => {
                    // Re-aimed at the target's entry block if the function is left alone
                    // ([`crate::verbatim`]); the problem keeps it from being instrumented.
                    if starts.contains_key(&t) {
                        relocs.push((i as u32, Reloc::Call { target: t }));
                    }
                    f.problems.push(Problem {
                        addr: a,
                        why: format!("branch leaves the function (target {t:#x})"),
                    })
                }
                None => f.problems.push(Problem {
                    addr: a,
                    why: format!("{} without a decodable target", inst.mnemonic()),
                }),
            }
        }
    }
    // Pass 2: address builders and what consumes them.
    let mut holder: BTreeMap<u16, (usize, usize)> = BTreeMap::new(); // pair -> (pcrel index, builder done_at)
                                                                     // Uses of a pair not resolved in straight-line code, and every builder's last instruction.
    let mut pending: Vec<Pending> = Vec::new();
    let mut built: Vec<Built> = Vec::new();
    let mut i = 0;
    while i < n {
        let (a, inst) = f.insts.at(i);
        if f.leaders.contains(&i) {
            holder.clear();
        }
        let special = inst.special();
        // Consumers first (they read the pair).
        match (special, inst.flow()) {
            (_, Flow::IndirectJump) if special == Special::AddPcI64 => {
                // gfx1250 long branch: PC of the next instruction + signed 64-bit literal.
                // Only the 64-bit literal form is relocated (its width is unambiguous).
                let t = inst
                    .literal()
                    .filter(|_| inst.len() == 12)
                    .map(|l| (a + inst.len() as u64).wrapping_add(l));
                match t.and_then(|t| index(t).map(|ti| (t, ti))) {
                    Some((t, ti)) if in_fn(t) => {
                        f.leaders.insert(ti);
                        f.succs[i].push(ti);
                        relocs.push((i as u32, Reloc::AddPc { target: t }));
                    }
                    _ => f.problems.push(Problem {
                        addr: a,
                        why: format!(
                            "s_add_pc_i64 target {t:x?} is not an instruction of this function"
                        ),
                    }),
                }
            }
            (_, Flow::IndirectJump) => {
                let src = pc_source(&f.reg_use[i]);
                match src.and_then(|p| holder.get(&p)) {
                    Some(&(k, _)) => {
                        let t = pcrels[k].target;
                        if let Some(ti) = index(t).filter(|_| in_fn(t)) {
                            pcrels[k].use_kind = PcRelUse::Branch;
                            f.leaders.insert(ti);
                            f.succs[i].push(ti);
                        } else if let Some(&fi) = starts.get(&t) {
                            f.exits.push((i, Exit::TailCall(fi)));
                        } else {
                            f.problems.push(Problem {
                                addr: a,
                                why: format!("jump to {t:#x}, which is neither in this function nor a function entry"),
                            });
                        }
                    }
                    None if f.spec.kernel.is_none() => f.exits.push((i, Exit::Return)),
                    None => match src {
                        Some(pair) => pending.push(Pending {
                            at: i,
                            pair,
                            call: false,
                        }),
                        None => f.problems.push(Problem {
                            addr: a,
                            why: "indirect jump through a register in a kernel".into(),
                        }),
                    },
                }
            }
            (_, Flow::Call) => {
                if let Some(t) = inst.branch_target(a) {
                    match starts.get(&t) {
                        Some(&fi) => {
                            relocs.push((i as u32, Reloc::Call { target: t }));
                            f.calls.push((i, Callee::Direct(fi)));
                        }
                        None => f.problems.push(Problem {
                            addr: a,
                            why: format!("call to {t:#x}, which is not a function entry"),
                        }),
                    }
                } else {
                    let src = pc_source(&f.reg_use[i]);
                    let kernel = f.spec.kernel.is_some();
                    match (src, src.and_then(|p| holder.get(&p))) {
                        (_, Some(&(k, _))) if starts.contains_key(&pcrels[k].target) => {
                            f.calls.push((i, Callee::Direct(starts[&pcrels[k].target])))
                        }
                        // A subroutine inside the kernel ([`crate::calltable`]).
                        (Some(pair), _) if kernel => pending.push(Pending {
                            at: i,
                            pair,
                            call: true,
                        }),
                        (_, Some(&(k, _))) => f.problems.push(Problem {
                            addr: a,
                            why: format!(
                                "call to {:#x}, which is not a function entry",
                                pcrels[k].target
                            ),
                        }),
                        (_, None) => f.calls.push((i, Callee::Indirect)),
                    }
                }
            }
            (Special::EndPgm, _) => f.exits.push((i, Exit::EndPgm)),
            (_, Flow::Return) => f.problems.push(Problem {
                addr: a,
                why: format!("{} is not supported", inst.mnemonic()),
            }),
            _ => {}
        }
        // Writers invalidate held addresses.
        let w = f.reg_use[i].operand_writes();
        holder.retain(|&p, _| !(has(w, p) || has(w, p + 1)));
        if special == Special::GetPc {
            match match_builder(&f.insts, &f.reg_use, &f.leaders, i) {
                Ok(b) => {
                    let k = pcrels.len();
                    let use_kind = if b.target >= text_addr && b.target < text_end {
                        PcRelUse::Call
                    } else {
                        PcRelUse::Data
                    };
                    pcrels.push(PcRel {
                        getpc_addr: a,
                        target: b.target,
                        use_kind,
                    });
                    for (j, part) in &b.fixups {
                        let r = match part {
                            RelocPart::Lo => Reloc::PcRelLo { idiom: k },
                            RelocPart::Hi => Reloc::PcRelHi { idiom: k },
                            RelocPart::Whole => Reloc::PcRel64 { idiom: k },
                            RelocPart::Eval(expr) => Reloc::PcRelEval {
                                idiom: k,
                                expr: *expr,
                            },
                            RelocPart::End => Reloc::PcRelEnd { idiom: k },
                        };
                        relocs.push((*j as u32, r));
                    }
                    // Replay the sequence so later writers see it, then hold the pair.
                    let _ = b.getpc;
                    i = b.done_at;
                    holder.insert(b.pair, (k, b.done_at));
                    built.push((b.done_at, b.pair, k));
                    i += 1;
                    continue;
                }
                Err(p) => f.problems.push(p),
            }
        }
        i += 1;
    }
    f.relocs = Relocs::from_set(relocs);
    // A kernarg-preload kernel has the 256-byte backward-compatible prologue only where the
    // compiler emitted it: an `s_branch` in the first 256 bytes to entry + 256 (gfx90a/gfx942/
    // gfx950 do; gfx1250 preloads without one).
    if let Some(k) = f.spec.kernel.as_mut() {
        if k.preload {
            let limit = f.spec.start + 256;
            // ... followed only by `s_nop` padding up to entry + 256.
            k.preload = f.insts.iter().enumerate().any(|(i, (a, inst))| {
                a < limit
                    && matches!(inst.flow(), Flow::Branch { conditional: false })
                    && inst.branch_target(a) == Some(limit)
                    && f.insts
                        .range(i + 1..f.insts.len())
                        .take_while(|(x, _)| *x < limit)
                        .all(|(_, x)| x.special() == Special::Nop)
            });
        }
    }
    // Pass 3: successors.
    for i in 0..n {
        let falls = match f.insts.flow(i) {
            Flow::Branch { conditional } => {
                let (a, inst) = f.insts.at(i);
                if let Some(t) = inst.branch_target(a) {
                    if let Some(ti) = index(t) {
                        f.succs[i].push(ti);
                    }
                }
                conditional
            }
            Flow::EndProgram | Flow::IndirectJump | Flow::Return => false,
            // s_trap: the trap handler resumes at the next instruction (its saved PC is taken
            // at run time, so moving the code is safe). `s_trap 2` too when code follows it:
            // LLVM 22 follows it on gfx11 with a fallback for a trap handler that does not stop
            // the wave (doorbell interrupt, `s_sethalt`, a branch to itself; llvm-objdump-22 on
            // fixtures/left-alone/gfx1100__trap__O3.co); as the last instruction it ends the
            // function ([`aborts`]).
            Flow::Call | Flow::Fallthrough | Flow::Trap => true,
        };
        if falls {
            if i + 1 < n {
                f.succs[i].push(i + 1);
            } else if f.insts.get(i).special() != Special::CodeEnd && !aborts(&f.insts.get(i)) {
                let why = if f.insts.flow(i) == Flow::Call {
                    FALLS_OFF_AFTER_CALL
                } else {
                    FALLS_OFF_END
                };
                f.problems.push(Problem {
                    addr: f.insts.addr(i),
                    why: why.into(),
                });
            }
        }
    }
    // Pass 4: uses of a pair built in another block (hipBLASLt call tables).
    if !pending.is_empty() {
        for (p, res) in crate::calltable::resolve(f, &pending, &built, pcrels) {
            match res {
                Ok(Resolved::Targets(_)) => {}
                Ok(Resolved::Returns(_)) => {
                    f.sub_returns.insert(p.at);
                }
                Err(_) if p.call => f.calls.push((p.at, Callee::Indirect)),
                Err(why) => {
                    let problem = crate::calltable::unresolved(f, &p, &why);
                    f.problems.push(problem);
                }
            }
        }
        f.calls.sort_by_key(|c| c.0);
    }
}

impl Program {
    /// Frees the per-instruction data of every function (instructions, register use,
    /// relocations, successors, branch targets) once no later stage reads it. What stays: the
    /// functions' specs, calls, exits and problems, and the address builders, so
    /// [`Program::reachable`] still answers; instruction indices in `calls` and `exits` then
    /// name instructions that are gone.
    pub fn drop_instructions(&mut self) {
        for f in &mut self.funcs {
            f.insts = Insts::default();
            f.reg_use = RegUses::default();
            f.relocs = Relocs::default();
            f.succs = Vec::new();
            f.more_succs = BTreeMap::new();
            f.sub_returns = BTreeSet::new();
            f.leaders = BTreeSet::new();
        }
    }

    /// Functions reachable from function `root` through calls and tail calls (including `root`).
    /// An indirect call may reach every function but a kernel: a kernel's code is entered only
    /// by a dispatch through its descriptor, never by a call (AMDGPUUsage, "Kernel Descriptor";
    /// an OpenCL kernel that calls another kernel calls its `__clang_ocl_kern_imp_` clone).
    pub fn reachable(&self, root: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut work = vec![root];
        while let Some(f) = work.pop() {
            if !seen.insert(f) {
                continue;
            }
            for (_, c) in &self.funcs[f].calls {
                match c {
                    Callee::Direct(g) => work.push(*g),
                    Callee::Indirect => work.extend(
                        (0..self.funcs.len()).filter(|&g| self.funcs[g].spec.kernel.is_none()),
                    ),
                }
            }
            for (_, e) in &self.funcs[f].exits {
                if let Exit::TailCall(g) = e {
                    work.push(*g);
                }
            }
        }
        seen
    }
}

/// For an instruction whose decoded reads include M0: whether that implicit use is a real read
/// on the target (the M0 read of [`crate::reguse::RegUse::reads_m0`]).
///
/// LLVM 22's disassembler decodes gfx9 DS instructions to the `*_vi` MC opcodes it shares with
/// gfx8, whose descriptors list an implicit M0 use (gfx8 clamps LDS addresses with M0). From gfx9
/// on, plain LDS instructions do not use M0 (LLVM `GCNSubtarget::ldsRequiresM0Init`: gfx8 and
/// older only). DS instructions that still use M0 on every generation are kept: GDS (the `gds`
/// bit: dword 0 bit 16 on gfx9, bit 17 on gfx10/gfx11), GWS, `ds_ordered_count`,
/// `ds_append`/`ds_consume` and the `addtid` forms (ISA manuals, "DS" chapter: M0 supplies the
/// base address or counter there).
///
/// `s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)` (gfx11 and gfx12, message id 3 in SIMM16[7:0]) does
/// not read M0 either: LLVM emits it right before `s_endpgm` after register allocation without
/// setting M0 (`SIInsertWaitcnts`, "release VGPRs"; `SendMsg::ID_DEALLOC_VGPRS_GFX11Plus`), and
/// the ISA manuals name no M0 payload for it. Other messages keep the decoder's M0 use.
pub(crate) fn m0_use_is_read(inst: &Instruction) -> bool {
    let m = inst.mnemonic();
    if m == "s_sendmsg" {
        return !releases_vgprs(inst);
    }
    // The MC descriptors also list M0 for FLAT/GLOBAL/SCRATCH loads and stores; only the LDS-DMA
    // forms (`*_lds_*`: M0 holds the LDS address) read it.
    if matches!(
        inst.format(),
        amdgpu_isa::Format::Flat | amdgpu_isa::Format::Global | amdgpu_isa::Format::Scratch
    ) {
        return m.contains("lds");
    }
    if !m.starts_with("ds_") {
        return true;
    }
    let special_ds = ["gws", "ordered_count", "append", "consume", "addtid"]
        .iter()
        .any(|k| m.contains(k));
    let gds_bit = match inst.target().family() {
        amdgpu_isa::Family::Gfx9 => Some(16),
        amdgpu_isa::Family::Gfx10 | amdgpu_isa::Family::Gfx11 => Some(17),
        _ => None,
    };
    let gds = gds_bit.is_some_and(|b| inst.word(0) >> b & 1 == 1);
    special_ds || gds
}

/// Whether `inst` (an `s_sendmsg`) sends MSG_DEALLOC_VGPRS: gfx11 and gfx12 only (on gfx9 and
/// gfx10 id 3 is MSG_GS_DONE, which reads M0), message id in SIMM16 bits 7:0 (LLVM
/// `SendMsg::ID_MASK_GFX11Plus_`).
fn releases_vgprs(inst: &Instruction) -> bool {
    matches!(
        inst.target().family(),
        amdgpu_isa::Family::Gfx11 | amdgpu_isa::Family::Gfx12
    ) && inst.word(0) & 0xff == 3
}

/// M0 facts at each instruction of a function: whether M0 is live before it, and the constant it
/// holds there if every path wrote the same `s_mov_b32 m0, K`.
#[derive(Debug, Clone)]
pub struct M0Facts {
    /// Live before instruction i.
    pub live: Vec<bool>,
    /// Known constant before instruction i.
    pub constant: Vec<Option<u32>>,
}

/// Computes [`M0Facts`]. Calls clobber M0 (it is not callee-saved in the AMDGPU calling
/// convention, LLVM `SIRegisterInfo` CSR lists); returns and `s_endpgm` leave it dead.
pub fn m0_facts(f: &Func) -> M0Facts {
    let n = f.insts.len();
    let reads: Vec<bool> = f.reg_use.iter().map(RegUse::reads_m0).collect();
    let writes: Vec<bool> = f
        .reg_use
        .iter()
        .enumerate()
        .map(|(i, u)| u.writes_m0() || f.insts.flow(i) == Flow::Call)
        .collect();
    let live = backward_live(f, &reads, &writes);
    // Forward constants: None = unknown; Some(None) state distinguishes "not reached yet".
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..f.succs.len() {
        for s in f.successors(i) {
            preds[s].push(i);
        }
    }
    #[derive(Clone, Copy, PartialEq)]
    enum C {
        Unreached,
        Known(u32),
        Unknown,
    }
    let after = |i: usize, before: C| -> C {
        if !writes[i] {
            return before;
        }
        let inst = f.insts.get(i);
        if inst.mnemonic() == "s_mov_b32" && f.reg_use[i].writes_m0() {
            if let Some(v) = scalar_const(&inst, "ssrc0") {
                return C::Known(v as u32);
            }
        }
        C::Unknown
    };
    let mut state_in = vec![C::Unreached; n];
    if n > 0 {
        state_in[0] = C::Unknown;
    }
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..n {
            let mut v = if i == 0 { C::Unknown } else { C::Unreached };
            for &p in &preds[i] {
                let o = after(p, state_in[p]);
                v = match (v, o) {
                    (C::Unreached, x) | (x, C::Unreached) => x,
                    (C::Known(a), C::Known(b)) if a == b => C::Known(a),
                    _ => C::Unknown,
                };
            }
            if v != state_in[i] {
                state_in[i] = v;
                changed = true;
            }
        }
    }
    let constant = state_in
        .iter()
        .map(|c| match c {
            C::Known(k) => Some(*k),
            _ => None,
        })
        .collect();
    M0Facts { live, constant }
}

/// SCC live before each instruction of `f` (backward liveness from the ISA tables' explicit and
/// implicit SCC reads and writes; calls clobber SCC, returns and `s_endpgm` leave it dead).
pub fn scc_live(f: &Func) -> Vec<bool> {
    let reads: Vec<bool> = f.reg_use.iter().map(RegUse::reads_scc).collect();
    let writes: Vec<bool> = f
        .reg_use
        .iter()
        .enumerate()
        .map(|(i, u)| u.writes_scc() || f.insts.flow(i) == Flow::Call)
        .collect();
    backward_live(f, &reads, &writes)
}

/// Backward liveness of one register over the function's CFG: live before `i` when `i` reads
/// it, or when it is live after `i` and `i` does not write it (iterated to a fixed point).
fn backward_live(f: &Func, reads: &[bool], writes: &[bool]) -> Vec<bool> {
    let mut live = vec![false; f.insts.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..f.insts.len()).rev() {
            let out = f.successors(i).any(|s| live[s]);
            let v = reads[i] || (out && !writes[i]);
            if v != live[i] {
                live[i] = v;
                changed = true;
            }
        }
    }
    live
}
