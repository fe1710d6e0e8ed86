//! Analysis of decoded code: functions, per-instruction control flow, PC-relative address
//! builders, call graph, and the M0 facts the marker snippets need (liveness and known constants).
//!
//! Everything that would make moving code unsafe is recorded as a [`Problem`] on the function;
//! the rewriter then fails closed (docs/background/rewriting.md: "A computed jump or call target the
//! rewriter cannot resolve ... fail closed").
//!
//! The address builders are recognised in `analysis/builders.rs`; the M0 and SCC facts are
//! computed in `analysis/liveness.rs` (re-exported here).

mod builders;
mod liveness;

pub(crate) use liveness::m0_use_is_read;
pub use liveness::{m0_facts, scc_live, M0Facts};

use crate::calltable::{Built, Pending, Resolved};
use crate::insts::Insts;
use crate::layout::{PcRel, PcRelUse, Reloc, Relocs};
use crate::reguse::RegUses;
use amdgpu_isa::{Flow, Instruction, Special, Target};
use builders::{has, match_builder, pc_source, RelocPart};
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

/// Start of the problem of a function whose code does not all decode (an instruction word the
/// ISA tables do not know, or an instruction cut off by the function's end).
pub const CANNOT_DECODE: &str = "cannot decode";

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

/// How the problem of a jump through an address builder to an address that is neither in its
/// function nor a function entry starts (the target address follows); such a function cannot
/// move ([`crate::verbatim`]).
pub const JUMP_ELSEWHERE: &str = "jump to ";

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
    /// Register use of each instruction, parallel to `insts` ([`RegUse::of`](crate::reguse::RegUse::of), computed once when
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

    /// The predecessors of every instruction from [`Func::successors`], as one flat list:
    /// those of instruction `j` are `list[at[j]..at[j + 1]]`, in ascending order (one vector
    /// for the function, not one per instruction: ~1.3 million instructions in a hipBLASLt
    /// object). Returns `(at, list)`; `at` has one entry more than there are instructions.
    pub fn flat_predecessors(&self) -> (Vec<usize>, Vec<usize>) {
        let n = self.insts.len();
        let mut at = vec![0usize; n + 1];
        for i in 0..n {
            for s in self.successors(i).filter(|&s| s < n) {
                at[s + 1] += 1;
            }
        }
        for j in 0..n {
            at[j + 1] += at[j];
        }
        let mut fill = at.clone();
        let mut list = vec![0usize; at[n]];
        for i in 0..n {
            for s in self.successors(i).filter(|&s| s < n) {
                list[fill[s]] = i;
                fill[s] += 1;
            }
        }
        (at, list)
    }

    /// Whether part of its code does not decode ([`CANNOT_DECODE`]): it then has no
    /// instructions here, and its sites are found by [`crate::undecodable`].
    pub fn does_not_decode(&self) -> bool {
        self.first_undecodable().is_some()
    }

    /// The first [`CANNOT_DECODE`] problem of the function: where its code stops decoding.
    pub fn first_undecodable(&self) -> Option<&Problem> {
        self.problems
            .iter()
            .find(|p| p.why.starts_with(CANNOT_DECODE))
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
        why: format!("{CANNOT_DECODE}: {}", e.kind),
    })?;
    let reg_use = RegUses::of(insts.iter().map(|(_, i)| i));
    Ok(Decoded { insts, reg_use })
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
    // Builders completed on a second path ([`builders::Builder::also_done`]): index -> (pair,
    // pcrel index).
    let mut also_held: BTreeMap<usize, (u16, usize)> = BTreeMap::new();
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
                        } else if in_fn(t) {
                            f.problems.push(Problem {
                                addr: a,
                                why: format!("jump into the middle of an instruction at {t:#x}"),
                            });
                        } else {
                            f.problems.push(Problem {
                                addr: a,
                                why: format!("{JUMP_ELSEWHERE}{t:#x}, which is neither in this function nor a function entry"),
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
        // The second path of a signed long branch completes here.
        if let Some((pair, k)) = also_held.remove(&i) {
            holder.insert(pair, (k, i));
            built.push((i, pair, k));
        }
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
                    if let Some(d) = b.also_done {
                        also_held.insert(d, (b.pair, k));
                    }
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
