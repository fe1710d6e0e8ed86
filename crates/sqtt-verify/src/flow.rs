//! Per-function analyses over the ORIGINAL control-flow graph with the inserted runs attached:
//! whitelist of inserted instructions, relocated jump targets, M0 liveness and reaching
//! constants, marker words and enter/exit balance.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use amdgpu_isa::{Flow, Instruction, RegSet, SpecialReg};

use crate::program::insn::{
    allowed, getreg_allowed, legacy, marker_kind, reads_m0, region_class, scalar_const, Allowed,
    MarkerKind, Region,
};
use crate::program::{Func, NInst, OInst, Program, Regs};
use crate::program::{FuncmapInfo, Layout};
use crate::region;
use crate::sgprs::{self, CallGraph};
use crate::sites::LoopEnter;
use crate::subcalls::Resolved;
use crate::{Check, Finding};
use rayon::prelude::*;

/// Marker counts of one function (instructions).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MarkerCounts {
    pub enter: usize,
    pub exit: usize,
    pub point: usize,
}

pub(crate) struct Analysis {
    /// Every SGPR inserted code writes (M0 excluded), ascending.
    pub inserted_sgprs: Vec<u16>,
    /// The scope-filter flag SGPRs computed at kernel entries, ascending.
    pub scope_flags: Vec<u16>,
    /// Per kernel function index: the highest SGPR inserted code writes in it or anything it
    /// reaches (for the descriptor and note checks).
    pub inserted_top: BTreeMap<usize, u16>,
    /// Parallel to `Program::funcs`.
    pub markers: Vec<MarkerCounts>,
}

/// Abstract value of M0 inside an inserted run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    /// The value the original program has there.
    Orig,
    Const(u32),
    Unknown,
}

/// Effect of executing (a suffix of) an inserted run.
struct Effect {
    m0: Val,
    /// The last instruction of the run writes M0.
    last_writes_m0: bool,
    markers: Vec<(u64, u32)>,
    problems: Vec<(Check, u64, String)>,
    /// SCC differs after the run in some execution.
    scc_changed: bool,
}

/// `regs`, `classes`: parallel to `run`, its registers and whitelist classes (decoded once).
fn simulate<'r>(
    run: &[NInst],
    regs: impl Iterator<Item = &'r Regs>,
    classes: &[Option<Region>],
) -> Effect {
    let mut e = Effect {
        m0: Val::Orig,
        last_writes_m0: false,
        markers: Vec::new(),
        problems: Vec::new(),
        scc_changed: false,
    };
    let mut sr = Val::Unknown;
    for ((n, r), class) in run.iter().zip(regs).zip(classes) {
        let mut writes_m0 = false;
        let mut value = None;
        match legacy(*class) {
            Some(Allowed::SetM0(k)) => {
                e.m0 = Val::Const(k);
                writes_m0 = true;
            }
            Some(Allowed::SaveM0(_)) => sr = e.m0,
            Some(Allowed::RestoreM0(r)) => {
                if sr == Val::Unknown {
                    e.problems.push((
                        Check::M0,
                        n.addr,
                        format!("M0 restored from s{r}, which this run did not save"),
                    ));
                }
                e.m0 = sr;
                writes_m0 = true;
            }
            Some(Allowed::Ttrace) => {
                if e.last_writes_m0 {
                    e.problems.push((
                        Check::M0,
                        n.addr,
                        "s_ttracedata directly after an M0 write (needs s_nop 0)".into(),
                    ));
                }
                match e.m0 {
                    Val::Const(k) => value = Some(k),
                    _ => e.problems.push((
                        Check::Markers,
                        n.addr,
                        "s_ttracedata without an M0 constant set in the same run".into(),
                    )),
                }
            }
            Some(Allowed::TtraceImm(v)) => value = Some(u32::from(v)),
            Some(Allowed::Nop0) => {}
            None => {
                if r.has(Regs::M0_WRITE) {
                    e.m0 = Val::Unknown;
                    writes_m0 = true;
                }
            }
        }
        e.last_writes_m0 = writes_m0;
        if let Some(v) = value {
            e.markers.push((n.addr, v));
        }
    }
    e
}

/// Successor of an original instruction: index and, for jumps, the rewritten landing address
/// (`None`: falls through into the whole run).
type Succ = (usize, Option<u64>);

/// Per original instruction of one function, a list of `u32` (successor indices), all in one
/// flat array (compressed rows): 4 bytes per instruction plus 4 per entry, where a `Vec` per
/// instruction cost about 70 bytes and an allocation each.
#[derive(Default)]
pub(crate) struct Rows {
    /// Row `k` is `to[off[k]..off[k + 1]]`.
    off: Vec<u32>,
    to: Vec<u32>,
}

impl Rows {
    fn with_capacity(n: usize) -> Rows {
        let mut off = Vec::with_capacity(n + 1);
        off.push(0);
        Rows {
            off,
            to: Vec::with_capacity(n),
        }
    }

    /// Appends an entry to the row being built.
    fn push(&mut self, v: usize) {
        self.to.push(v as u32);
    }

    /// Closes the row being built (rows are built in order).
    fn end_row(&mut self) {
        self.off.push(self.to.len() as u32);
    }

    fn range(&self, k: usize) -> std::ops::Range<usize> {
        self.off[k] as usize..self.off[k + 1] as usize
    }

    /// The entries of row `k`.
    pub fn of(&self, k: usize) -> &[u32] {
        &self.to[self.range(k)]
    }

    /// Number of rows (instructions).
    pub fn len(&self) -> usize {
        self.off.len() - 1
    }
}

/// Successors for register facts: a function's CFG edges plus the fall-through of `s_trap`
/// (the trap handler resumes at the next instruction), without a copy of the edges.
pub(crate) struct FactSuccs<'a> {
    cfg: &'a Rows,
    /// Ascending indices of `s_trap` instructions with a next instruction.
    traps: Vec<u32>,
}

impl FactSuccs<'_> {
    /// The successors of original instruction `k`.
    pub fn each(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let trap = self.traps.binary_search(&(k as u32)).is_ok();
        self.cfg
            .of(k)
            .iter()
            .map(|&s| s as usize)
            .chain(trap.then_some(k + 1))
    }

    /// Whether control leaves the function after `k`.
    pub fn none(&self, k: usize) -> bool {
        self.each(k).next().is_none()
    }
}

struct Cfg {
    /// Successor indices per original instruction.
    succs: Rows,
    /// Edges that land at a given address (jumps into a run), ascending by edge index (index
    /// into `succs.to`); every other edge falls into the whole run.
    lands: Vec<(u32, u64)>,
    /// Branch edges through a landing block: (branch, successor) → the block's start.
    via: BTreeMap<(usize, usize), u64>,
    /// Function exits (end of program, return, tail call) that must leave no open scope.
    exits: Vec<usize>,
    /// `s_swappc_b64` calls of subroutines inside the function ([`crate::subcalls`]): not calls
    /// of unknown code.
    intra_calls: Vec<usize>,
}

impl Cfg {
    fn push(&mut self, (s, land): Succ) {
        if let Some(l) = land {
            self.lands.push((self.succs.to.len() as u32, l));
        }
        self.succs.push(s);
    }

    fn extend(&mut self, s: Option<Succ>) {
        if let Some(s) = s {
            self.push(s);
        }
    }

    /// The edges `range` (indices into `succs.to`), each with its landing: one walk along the
    /// sparse landings, not a search per edge.
    fn edges_in(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Succ> + '_ {
        let mut j = self.lands.partition_point(|e| (e.0 as usize) < range.start);
        range.map(move |i| {
            let land = match self.lands.get(j) {
                Some(&(e, l)) if e as usize == i => {
                    j += 1;
                    Some(l)
                }
                _ => None,
            };
            (self.succs.to[i] as usize, land)
        })
    }

    /// The successors of original instruction `k`.
    fn succ(&self, k: usize) -> impl Iterator<Item = Succ> + '_ {
        self.edges_in(self.succs.range(k))
    }

    /// Every edge's successor, by source instruction.
    fn edges(&self) -> impl Iterator<Item = Succ> + '_ {
        self.edges_in(0..self.succs.to.len())
    }

    /// Number of original instructions.
    fn len(&self) -> usize {
        self.succs.len()
    }
}

/// Whether every instruction of each inserted run is a simple marker-snippet instruction, by
/// original index of the function.
fn legacy_runs(f: &Func) -> Vec<bool> {
    (0..f.orig.len())
        .map(|k| all_legacy(f.inserted_class.get(f.run(k)).unwrap_or_default()))
        .collect()
}

/// Every class is a simple marker-snippet instruction's ([`Region::Legacy`]).
fn all_legacy(classes: &[Option<Region>]) -> bool {
    classes.iter().all(|c| matches!(c, Some(Region::Legacy(_))))
}

/// `wave_sizes`: lanes of each function of `p` (parallel to `p.funcs`); `outside`: device
/// functions code outside the object may enter (same order, [`crate::program::outside`]).
pub(crate) fn analyse(
    p: &Program,
    fm: &FuncmapInfo,
    wave_sizes: &[u32],
    outside: &[bool],
    findings: &mut Vec<Finding>,
) -> Analysis {
    // Per-function work runs in parallel; findings keep the function order.
    let (cfgs, found): (Vec<Cfg>, Vec<Vec<Finding>>) = (0..p.funcs.len())
        .into_par_iter()
        .map(|fi| {
            let mut found = Vec::new();
            (build_cfg(p, fi, &mut found), found)
        })
        .unzip();
    findings.extend(found.into_iter().flatten());
    let exits: Vec<Vec<usize>> = cfgs.iter().map(|c| c.exits.clone()).collect();
    let intra: Vec<Vec<usize>> = cfgs.iter().map(|c| c.intra_calls.clone()).collect();
    let cg = CallGraph::new(p, &exits, &intra);
    // Successors for register facts: the CFG's, plus the fall-through of `s_trap` (the trap
    // handler resumes at the next instruction).
    let succ: Vec<FactSuccs> = cfgs
        .par_iter()
        .zip(&p.funcs)
        .map(|(c, f)| FactSuccs {
            cfg: &c.succs,
            traps: (0..c.len())
                .filter(|&k| f.inst(&f.orig[k]).flow() == Flow::Trap && k + 1 < f.orig.len())
                .map(|k| k as u32)
                .collect(),
        })
        .collect();
    let mut changeable = sgprs::changeable(p, &cg, &succ, outside);
    drop(succ);
    let reach: Vec<Option<Vec<usize>>> = p
        .funcs
        .iter()
        .enumerate()
        .map(|(fi, f)| (f.kind == crate::FunctionKind::Kernel).then(|| cg.reachable(fi)))
        .collect();
    let (flags, entry_flags) = scope_flags(p, &reach, findings);
    let vgprs_used = crate::spill::used_in_call_graphs(p, &reach);
    // A kernel's entry run computes scope flags. `scope_flags` proved that no original
    // instruction the kernel reaches touches them, so writing them there changes nothing the
    // original program reads, even where liveness is conservative (an unresolved call reads
    // every SGPR).
    for (ki, set) in entry_flags.iter().enumerate() {
        let tested = set.iter().fold(0u128, |a, f| a | 1u128 << f);
        changeable[ki].add(entry_index(&p.funcs[ki]), tested);
    }
    let all_flags: BTreeSet<u16> = flags.iter().flatten().copied().collect();
    let packing = fm.layout != Layout::Legacy;
    let free: Vec<u16> = sgprs(&p.free_sgprs).collect();
    let (markers, found): (Vec<MarkerCounts>, Vec<Vec<Finding>>) = p
        .funcs
        .par_iter()
        .enumerate()
        .map(|(fi, f)| {
            let mut found = Vec::new();
            let regs = RunRegs {
                changeable: &changeable[fi],
                vgprs_used: vgprs_used[fi],
                wave: wave_sizes.get(fi).copied().unwrap_or(64),
            };
            check_inserted(p, f, &cfgs[fi], &all_flags, &regs, packing, &mut found);
            check_windows(f, &mut found);
            let env = region::Env {
                target: p.isa,
                wave_size: wave_sizes.get(fi).copied().unwrap_or(64),
                free: &free,
                scope_flag: flags[fi],
                layout: fm.layout,
                payload: &fm.payload,
                names: &fm.names,
                runs: Default::default(),
            };
            let counts = check_runs(
                p,
                f,
                &legacy_runs(f),
                &cfgs[fi],
                &changeable[fi],
                fm,
                &env,
                &mut found,
            );
            (counts, found)
        })
        .unzip();
    findings.extend(found.into_iter().flatten());
    let written: Vec<u128> = p
        .funcs
        .iter()
        .map(|f| {
            f.inserted_regs(0..f.inserted.len())
                .fold(0, |a, r| a | r.sgpr_writes)
        })
        .collect();
    let inserted_top = reach
        .iter()
        .enumerate()
        .filter_map(|(fi, r)| {
            let w = r.as_ref()?.iter().fold(0u128, |a, &g| a | written[g]);
            (w != 0).then(|| (fi, 127 - w.leading_zeros() as u16))
        })
        .collect();
    let all_written = written.iter().fold(0u128, |a, w| a | w);
    Analysis {
        inserted_sgprs: (0..106u16).filter(|r| all_written >> r & 1 == 1).collect(),
        scope_flags: all_flags.into_iter().collect(),
        inserted_top,
        markers,
    }
}

/// SGPR numbers in a register set.
fn sgprs(set: &RegSet) -> impl Iterator<Item = u16> + '_ {
    (0..sqtt_interp::NUM_SGPRS as u16).filter(|r| set.contains_sgpr(*r))
}

/// The SGPRs the scope guards of `run` test: `s_cmp_lg_u32 sF, 0` directly followed by
/// `s_cbranch_scc0` (spec "Scope filtering": the flag computed once at kernel entry), on an
/// SGPR the run has not written before unless `entry` (a kernel's entry run computes the flag and
/// may guard a marker right after).
fn guard_reads<'r>(
    run: &[NInst],
    regs: impl Iterator<Item = &'r Regs>,
    entry: bool,
) -> BTreeSet<u16> {
    let mut written: u128 = 0;
    let mut out = BTreeSet::new();
    for (i, (n, r)) in run.iter().zip(regs).enumerate() {
        let guard = n.inst.mnemonic() == "s_cmp_lg_u32"
            && scalar_const(&n.inst, "ssrc1") == Some(0)
            && run
                .get(i + 1)
                .is_some_and(|b| matches!(b.inst.mnemonic(), "s_cbranch_scc0" | "s_cbranch_scc1"));
        if guard {
            // The lowest SGPR s0..s105 it reads.
            let reads = r.sgpr_reads & crate::program::regs::EVERY;
            if reads != 0 {
                let g = reads.trailing_zeros() as u16;
                if entry || written >> g & 1 == 0 {
                    out.insert(g);
                }
            }
        }
        written |= r.sgpr_writes;
    }
    out
}

fn is_hw_id_read(i: &Instruction) -> bool {
    matches!(region_class(i), Some(Region::Getreg(id)) if matches!(id, 4 | 23 | 24))
}

/// The scope-filter flag (spec "Scope filtering": computed once at kernel entry from
/// HW_ID / HW_ID1 / HW_ID2 into one reserved SGPR and reused by every marker): a reserved SGPR
/// written by a kernel's entry run that reads a hardware-ID register, and read before being
/// written by some other run. Every kernel entry must then compute it.
/// Index of the original instruction where a kernel's body starts: after the 256-byte
/// kernarg-preload prologue when the kernel has one (an `s_branch` inside the first 256 bytes to
/// entry + 256), else the first instruction.
pub(crate) fn entry_index(f: &Func) -> usize {
    if f.kind != crate::FunctionKind::Kernel {
        return 0;
    }
    let body = f.orig_start + 256;
    // The prologue ends with that branch followed only by `s_nop` padding up to entry + 256
    // (a loop branch that happens to target entry + 256 is followed by real code).
    let in_prologue = f.orig.iter().take_while(|o| o.addr < body);
    let has_prologue = in_prologue.enumerate().any(|(i, o)| {
        let inst = f.inst(o);
        matches!(inst.flow(), Flow::Branch { conditional: false })
            && inst.branch_target(o.addr) == Some(body)
            && f.orig[i + 1..]
                .iter()
                .take_while(|x| x.addr < body)
                .all(|x| f.inst(x).special() == amdgpu_isa::Special::Nop)
    });
    if !has_prologue {
        return 0;
    }
    f.orig.iter().position(|o| o.addr == body).unwrap_or(0)
}

/// The scope-filter flag of each function: the SGPR its runs' guards test ([`guard_reads`]), one
/// per function. For every kernel that reaches a function with flag sF: the kernel's entry run
/// reads a hardware-ID register and writes sF, and no original instruction of any function the
/// kernel reaches reads or writes sF (its value must survive from the entry to every marker).
/// The same "untouched" rule holds for a flag of the object that a kernel's entry run computes
/// although nothing the kernel reaches tests it (a call graph whose guarded sites were all
/// skipped).
/// `reach[k]`: functions kernel `k` reaches, ascending (`None` for device functions).
/// Returns the flags, and per function the flags its entry run may write (empty for device
/// functions).
fn scope_flags(
    p: &Program,
    reach: &[Option<Vec<usize>>],
    findings: &mut Vec<Finding>,
) -> (Vec<Option<u16>>, Vec<BTreeSet<u16>>) {
    // Per function in parallel; findings keep the function order.
    let per: Vec<(Option<u16>, Option<Finding>)> = p
        .funcs
        .par_iter()
        .map(|f| {
            let entry = entry_index(f);
            let mut tested = BTreeSet::new();
            for k in 0..f.orig.len() {
                let run = f.run(k);
                if run.is_empty() {
                    continue;
                }
                let kernel_entry = k == entry && f.kind == crate::FunctionKind::Kernel;
                tested.extend(guard_reads(
                    f.inserted.get(run.clone()).unwrap_or_default(),
                    f.inserted_regs(run),
                    kernel_entry,
                ));
            }
            let more = (tested.len() > 1).then(|| {
                fnd(
                    f,
                    Check::Markers,
                    Some(f.orig_start),
                    f.new_start,
                    format!("scope guards test more than one flag: {tested:?}"),
                )
            });
            (tested.first().copied(), more)
        })
        .collect();
    let flags: Vec<Option<u16>> = per
        .into_iter()
        .map(|(flag, more)| {
            findings.extend(more);
            flag
        })
        .collect();
    // Only needed when some kernel's call graph tests a flag (decoded lazily: most objects have
    // no scope filtering).
    let touched: Vec<u128> = if flags.iter().any(Option::is_some) {
        p.funcs.iter().map(crate::sgprs::touched).collect()
    } else {
        Vec::new()
    };
    let all_flags: BTreeSet<u16> = flags.iter().flatten().copied().collect();
    let mut entry_flags = vec![BTreeSet::new(); p.funcs.len()];
    for (ki, r) in reach.iter().enumerate() {
        let Some(r) = r else { continue };
        let kf = &p.funcs[ki];
        let needed: BTreeSet<u16> = r.iter().filter_map(|&g| flags[g]).collect();
        let run = kf.inserted.get(kf.run(entry_index(kf))).unwrap_or_default();
        let computes = run.iter().any(|n| is_hw_id_read(&n.inst));
        // The object's flags this entry run computes (it reads a hardware-ID register and
        // writes them), tested in the kernel's call graph or not.
        let computed: BTreeSet<u16> = all_flags
            .iter()
            .copied()
            .filter(|&f| computes && run.iter().any(|n| n.inst.writes().contains_sgpr(f)))
            .collect();
        for &flag in needed.union(&computed) {
            entry_flags[ki].insert(flag);
            if !computed.contains(&flag) {
                findings.push(fnd(
                    kf,
                    Check::Markers,
                    Some(kf.orig_start),
                    kf.new_start,
                    format!(
                        "kernel entry does not compute the scope flag s{flag} its call graph tests"
                    ),
                ));
            }
            for &g in r.iter().filter(|&&g| touched[g] >> flag & 1 == 1) {
                let gf = &p.funcs[g];
                let at = gf.orig.iter().find(|o| {
                    let (r, w) = gf.inst(o).reads_writes();
                    r.contains_sgpr(flag) || w.contains_sgpr(flag)
                });
                findings.push(fnd(
                    gf,
                    Check::Inserted,
                    at.map(|o| o.addr),
                    at.and_then(|o| gf.new_address(o)),
                    format!(
                        "scope flag s{flag} of kernel {} is used by original code of {}",
                        kf.name, gf.name
                    ),
                ));
            }
        }
    }
    (flags, entry_flags)
}

fn fnd(f: &Func, check: Check, o: Option<u64>, n: Option<u64>, message: String) -> Finding {
    Finding {
        check,
        function: Some(f.name.clone()),
        original_address: o,
        new_address: n,
        message,
    }
}

/// What inserted code of one function may do with registers.
struct RunRegs<'a> {
    /// `changeable.get(k)`: SGPRs inserted code in front of original `k` may change.
    changeable: &'a sgprs::Masks,
    /// VGPRs original code of the function's call graphs uses (no lane save may go there).
    vgprs_used: crate::spill::Vgprs,
    /// Lanes of the waves running the function.
    wave: u32,
}

/// Static whitelist of every inserted instruction (class, memory, registers written, branch
/// targets, hardware registers read), and the SGPRs each run writes: changeable there, or saved
/// and restored around the run ([`crate::spill`]).
/// `flags`: every scope-filter flag of the object (only kernel entry runs may write one).
fn check_inserted(
    p: &Program,
    f: &Func,
    cfg: &Cfg,
    flags: &BTreeSet<u16>,
    regs: &RunRegs,
    packing: bool,
    findings: &mut Vec<Finding>,
) {
    let changeable = regs.changeable;
    let has_imm = p.isa.has_ttracedata_imm();
    let family = p.isa.family();
    let entry = entry_index(f);
    // Landing block start -> the original instruction its branch edge leads to.
    let landed_at: BTreeMap<u64, usize> = cfg.via.iter().map(|(&(_, s), &b)| (b, s)).collect();
    // Jump landings by target instruction, in edge order (one pass over the edges, not one per
    // run).
    let mut landings_of: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (s, l) in cfg.edges() {
        if let Some(l) = l {
            landings_of.entry(s).or_default().push(l);
        }
    }
    for (k, o) in f.orig.iter().enumerate() {
        let run = f.inserted.get(f.run(k)).unwrap_or_default();
        let (Some(first), Some(end)) = (run.first(), f.new_address(o)) else {
            continue;
        };
        // Parallel to `run`: registers decoded once.
        let rregs = f.inserted_regs(f.run(k));
        let (run_start, run_end) = (first.addr, end);
        // Parallel to `run`: the landing block and the island each instruction lies in (looked
        // up once, not once per question below).
        let trailers: Vec<_> = run
            .iter()
            .map(|n| (p.landing_containing(n.addr), p.island_containing(n.addr)))
            .collect();
        // A landing block sits in front of `k` but runs on its branch edge only, right before
        // the branch target: what it writes must be changeable there (its tail island is checked
        // below like every island).
        for ((n, r), trailer) in run.iter().zip(rregs.clone()).zip(&trailers) {
            let (Some((start, _)), None) = *trailer else {
                continue;
            };
            let may = landed_at
                .get(&start)
                .and_then(|&s| changeable.get(s))
                .unwrap_or(0);
            let w = r.sgpr_writes & !may;
            if w != 0 {
                findings.push(fnd(
                    f,
                    Check::Inserted,
                    Some(o.addr),
                    Some(n.addr),
                    format!(
                        "inserted {} in a landing block writes s{}, which is live or awaiting an SMEM result at the branch target",
                        n.inst.mnemonic(),
                        w.trailing_zeros()
                    ),
                ));
            }
        }
        let kernel_entry = k == entry && f.kind == crate::FunctionKind::Kernel;
        let landings: &[u64] = landings_of.get(&k).map(Vec::as_slice).unwrap_or_default();
        let (body, body_regs): (Vec<NInst>, Vec<Regs>) = run
            .iter()
            .zip(rregs.clone())
            .zip(&trailers)
            .filter(|(_, t)| matches!(t, (None, None)))
            .map(|((n, r), _)| (*n, *r))
            .unzip();
        let saves = crate::spill::saves(
            &body,
            &body_regs,
            run_end,
            landings,
            regs.wave,
            regs.vgprs_used,
        );
        for (a, msg) in saves.problems {
            findings.push(fnd(f, Check::Inserted, Some(o.addr), Some(a), msg));
        }
        let may_write = changeable.get(k).unwrap_or(0) | saves.restored;
        if let Some((n, r)) = body
            .iter()
            .zip(&body_regs)
            .find(|(_, r)| r.sgpr_writes & !may_write != 0)
        {
            let w = r.sgpr_writes & !may_write;
            findings.push(fnd(
                f,
                Check::Inserted,
                Some(o.addr),
                Some(n.addr),
                format!(
                    "inserted {} writes s{}, which is live or awaiting an SMEM result there and not saved and restored around the run",
                    n.inst.mnemonic(),
                    w.trailing_zeros()
                ),
            ));
        }
        let rclasses = &f.inserted_class[f.run(k)];
        for (((n, r), &class), &(landing, island)) in
            run.iter().zip(rregs).zip(rclasses).zip(&trailers)
        {
            let m = n.inst.mnemonic();
            let mut bad = |msg: String| {
                findings.push(fnd(f, Check::Inserted, None, Some(n.addr), msg));
            };
            if let Some(isl) = island {
                // Validated through the branch that uses it (check_target); the SGPRs it writes
                // must be changeable where it lands.
                let lands = f.orig.iter().enumerate().position(|(m, x)| {
                    let start = f
                        .inserted
                        .get(f.run(m))
                        .and_then(|r| r.first())
                        .map_or(f.new_address(x), |y| Some(y.addr));
                    start.is_some_and(|s| s <= isl.dest)
                        && f.new_address(x).is_some_and(|y| isl.dest <= y)
                });
                let ok = lands
                    .and_then(|k| changeable.get(k))
                    .is_some_and(|c| isl.writes.sgpr_bits() & !c == 0);
                if !ok {
                    bad(format!(
                        "long-branch island at {:#x} writes SGPRs that are live or awaiting an SMEM result where it lands",
                        n.addr
                    ));
                }
                continue;
            }
            if landing.is_some_and(|(_, b)| n.addr >= b.body_end) {
                // A landing block's jump: its destination is checked through the branch that
                // uses the block (check_target).
                continue;
            }
            match class {
                None => bad(format!("inserted instruction {m} is not allowed")),
                Some(Region::Legacy(Allowed::TtraceImm(_))) if !has_imm => {
                    bad("s_ttracedata_imm before gfx10".into())
                }
                Some(Region::Legacy(Allowed::TtraceImm(_))) if packing => {
                    bad("s_ttracedata_imm while shader-clock packing is active".into())
                }
                Some(Region::Getreg(id)) if !getreg_allowed(family, id) => {
                    bad(format!("s_getreg_b32 of hwreg {id} is not allowed"))
                }
                Some(Region::Branch) => {
                    let t = n.inst.branch_target(n.addr);
                    if !t.is_some_and(|t| t >= run_start && t <= run_end) {
                        bad(format!(
                            "inserted {m} leaves its run: target {}, run {run_start:#x}..{run_end:#x}",
                            t.map_or("unknown".into(), |t| format!("{t:#x}"))
                        ));
                    }
                }
                _ => {}
            }
            if n.inst.memory().is_some() {
                bad(format!("inserted instruction {m} accesses memory"));
            }
            let m0_save = matches!(class, Some(Region::Legacy(Allowed::SaveM0(_))));
            // Lane saves write a VGPR; `spill::saves` checked them above.
            let lane_save = matches!(class, Some(Region::Writelane));
            if !m0_save && !lane_save && !r.has(Regs::SCALAR_WRITES) {
                bad(format!(
                    "inserted instruction {m} writes registers other than M0, SCC and SGPRs"
                ));
            }
            if r.has(Regs::TTMP_READ) {
                bad(format!("inserted instruction {m} reads a TTMP"));
            }
            let writes_sgpr =
                |s: u16| r.sgpr_writes.checked_shr(u32::from(s)).unwrap_or(0) & 1 == 1;
            if let Some(r) = flags.iter().find(|r| !kernel_entry && writes_sgpr(**r)) {
                bad(format!(
                    "inserted instruction {m} overwrites the scope flag s{r}"
                ));
            }
        }
    }
}

/// No insertion inside an `s_clause` window (the clause would be split).
fn check_windows(f: &Func, findings: &mut Vec<Finding>) {
    for (k, o) in f.orig.iter().enumerate() {
        // `s_delay_alu` windows are not checked: the instruction is a scheduling hint (code
        // without it is correct, only slower), so inserted code may sit inside one.
        let m = f.mnemonic(o);
        if m != "s_clause" {
            continue;
        }
        // simm16[5:0] = clause length - 1 (instructions following the s_clause).
        let imm = f.inst(o).field("simm16").unwrap_or(0);
        let last = k + 1 + (imm & 0x3f) as usize;
        for m in (k + 1)..=last.min(f.orig.len().saturating_sub(1)) {
            if let Some(x) = f.orig.get(m).filter(|_| !f.run(m).is_empty()) {
                findings.push(fnd(
                    f,
                    Check::Inserted,
                    Some(x.addr),
                    f.new_address(x),
                    format!(
                        "instrumentation inside the {} window of orig {:#x}",
                        m, o.addr
                    ),
                ));
            }
        }
    }
}

/// Checks one relocated jump and returns the landing if it is inside the same function.
/// `k`: index of the jumping original instruction in function `fi`.
fn check_target(
    p: &Program,
    fi: usize,
    k: usize,
    t_o: u64,
    t_n: Option<u64>,
    what: &str,
    findings: &mut Vec<Finding>,
) -> Option<Succ> {
    let f = &p.funcs[fi];
    let o_addr = f.orig[k].addr;
    let n_addr = f.new_address(&f.orig[k]);
    // A relaxed branch reaches its target through a long-branch island, a branch with a landing
    // block through the block's jump.
    let t_n = t_n.map(|t| {
        p.landings
            .get(&t)
            .map(|b| b.dest)
            .or_else(|| p.islands.get(&t).map(|isl| isl.dest))
            .unwrap_or(t)
    })?;
    // A function kept in place runs the original code, so what it reaches outside itself is
    // the original there (kept in `.text`), not another function's instrumented copy.
    if f.kept_in_place && !(f.orig_start <= t_o && t_o < f.orig_end) {
        if t_n != t_o {
            findings.push(fnd(
                f,
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} to orig {t_o:#x} from a function kept in place reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    if !p.otext.contains(t_o) {
        let want = p.map_data(t_o);
        if t_n != want {
            findings.push(fnd(
                f,
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} data target {t_o:#x} should become {want:#x}, reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    // Into a function kept in place that does not decode: the address stays.
    if let Some(name) = p.opaque_at(t_o) {
        if t_n != t_o {
            findings.push(fnd(
                f,
                Check::Branch,
                Some(o_addr),
                n_addr,
                format!("{what} to orig {t_o:#x} in {name} (kept in place) reaches {t_n:#x}"),
            ));
        }
        return None;
    }
    let Some((tfi, tk, lands)) = p.landings(t_o, Some(fi)) else {
        findings.push(fnd(
            f,
            Check::Branch,
            Some(o_addr),
            n_addr,
            format!("{what} target {t_o:#x} is not a mapped original instruction"),
        ));
        return None;
    };
    let entry_of_other = tk == 0 && tfi != fi;
    let ok = if entry_of_other {
        lands.clone().next() == Some(t_n)
    } else {
        lands.clone().any(|a| a == t_n)
    };
    if !ok {
        findings.push(fnd(
            f,
            Check::Branch,
            Some(o_addr),
            n_addr,
            format!(
                "{what} to orig {t_o:#x} reaches {t_n:#x}, allowed {}",
                lands
                    .map(|a| format!("{a:#x}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    (tfi == fi).then_some((tk, Some(t_n)))
}

/// The CFG of function `fi`; in a kernel, calls and jumps through a pair built in another
/// block are resolved over a first CFG without them ([`crate::subcalls`]) and the CFG is built
/// again with their edges.
fn build_cfg(p: &Program, fi: usize, findings: &mut Vec<Finding>) -> Cfg {
    let f = &p.funcs[fi];
    let mut first = Vec::new();
    let cfg = build_cfg_with(p, fi, &mut first, &Resolved::default());
    if f.kind != crate::FunctionKind::Kernel {
        findings.extend(first);
        return cfg;
    }
    let jumps: Vec<usize> = cfg
        .exits
        .iter()
        .copied()
        .filter(|&k| {
            let i = f.inst(&f.orig[k]);
            i.flow() == Flow::IndirectJump && i.special() != amdgpu_isa::Special::AddPcI64
        })
        .collect();
    let extra = crate::subcalls::resolve(
        f,
        |k| cfg.succs.of(k).iter().map(|&s| s as usize).collect(),
        &jumps,
    );
    if extra.is_empty() {
        findings.extend(first);
        return cfg;
    }
    build_cfg_with(p, fi, findings, &extra)
}

fn build_cfg_with(p: &Program, fi: usize, findings: &mut Vec<Finding>, extra: &Resolved) -> Cfg {
    let f = &p.funcs[fi];
    let n = f.orig.len();
    let mut cfg = Cfg {
        succs: Rows::with_capacity(n),
        lands: Vec::new(),
        via: BTreeMap::new(),
        exits: Vec::new(),
        intra_calls: extra.calls.keys().copied().collect(),
    };
    // Address builders: their targets, and the intra-function ones by destination pair.
    let mut builder_edges: BTreeMap<usize, (u16, Option<Succ>)> = BTreeMap::new();
    for b in &f.builders {
        let Some(g) = f.orig.get(b.getpc) else {
            continue;
        };
        let Some(t_o) = b.target_with(g.addr, |k| f.orig.get(k).map(|o| f.inst(o))) else {
            continue;
        };
        let t_n = f.copy(g).and_then(|gn| {
            b.target_with(gn.addr, |k| {
                f.orig.get(k).and_then(|o| f.copy(o)).map(|c| c.inst)
            })
        });
        let edge = check_target(p, fi, b.getpc, t_o, t_n, "address builder", findings);
        builder_edges.insert(b.getpc, (b.dst, edge));
    }
    for (k, o) in f.orig.iter().enumerate() {
        let next = (k + 1 < n).then_some((k + 1, None));
        if f.regs(o).has(Regs::PLAIN) {
            cfg.extend(next);
            cfg.succs.end_row();
            continue;
        }
        let oi = f.inst(o);
        match oi.flow() {
            Flow::Call if extra.calls.contains_key(&k) => {
                cfg.extend(next);
                for g in &extra.calls[&k] {
                    if let Some(&(_, Some(s))) = builder_edges.get(g) {
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if extra.jumps.contains_key(&k) => {
                for g in &extra.jumps[&k] {
                    if let Some(&(_, Some(s))) = builder_edges.get(g) {
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if extra.returns.contains_key(&k) => {
                // Returns to the instruction after each call: the call's copy + its length must
                // be where that instruction's run or copy starts.
                for &c in &extra.returns[&k] {
                    let o = &f.orig[c];
                    let len = f.inst(o).len() as u64;
                    let t_n = f.copy(o).map(|nn| nn.addr + nn.inst.len() as u64);
                    if let Some(s) = check_target(p, fi, k, o.addr + len, t_n, "return", findings) {
                        cfg.push(s);
                    }
                }
            }
            Flow::Fallthrough | Flow::Call => cfg.extend(next),
            Flow::Branch { conditional } => {
                if conditional {
                    cfg.extend(next);
                }
                if let Some(t_o) = oi.branch_target(o.addr) {
                    let t_n = f.copy(o).and_then(|nn| nn.inst.branch_target(nn.addr));
                    if let Some(s) = check_target(p, fi, k, t_o, t_n, oi.mnemonic(), findings) {
                        if let Some(b) = t_n.filter(|t| p.landings.contains_key(t)) {
                            cfg.via.insert((k, s.0), b);
                        }
                        cfg.push(s);
                    }
                }
            }
            Flow::IndirectJump if oi.special() == amdgpu_isa::Special::AddPcI64 => {
                // gfx1250 long branch: next instruction's address + 64-bit literal.
                let target_of = |i: &amdgpu_isa::Instruction, at: u64| {
                    i.literal().map(|l| (at + i.len() as u64).wrapping_add(l))
                };
                if let Some(t_o) = target_of(&oi, o.addr) {
                    let t_n = f.copy(o).and_then(|nn| target_of(&nn.inst, nn.addr));
                    match check_target(p, fi, k, t_o, t_n, "s_add_pc_i64", findings) {
                        Some(s) => cfg.push(s),
                        None => cfg.exits.push(k),
                    }
                } else {
                    cfg.exits.push(k);
                }
            }
            Flow::IndirectJump => {
                // A long branch: the latest builder before k producing the register pair.
                let src = oi.reads().max_sgpr().map(|r| r.saturating_sub(1));
                let edge = builder_edges
                    .range(..k)
                    .rev()
                    .find(|(_, (d, _))| Some(*d) == src)
                    .and_then(|(_, (_, e))| *e);
                match edge {
                    Some(s) => cfg.push(s),
                    None => cfg.exits.push(k),
                }
            }
            Flow::EndProgram | Flow::Return => cfg.exits.push(k),
            Flow::Trap => {}
        }
        if oi.mnemonic() == "s_call_b64" || oi.mnemonic() == "s_call_i64" {
            if let Some(t_o) = oi.branch_target(o.addr) {
                let t_n = f.copy(o).and_then(|nn| nn.inst.branch_target(nn.addr));
                check_target(p, fi, k, t_o, t_n, oi.mnemonic(), findings);
            }
        }
        cfg.succs.end_row();
    }
    // Grown past one successor per instruction by conditional branches: kept until the last
    // check.
    cfg.succs.to.shrink_to_fit();
    cfg
}

/// Backward liveness of one register over the original CFG to a fixed point: `facts[k]` is
/// (instruction `k` reads it, instruction `k` kills it); returns whether it is live before each
/// instruction.
fn backward_liveness(cfg: &Cfg, facts: &[(bool, bool)]) -> Vec<bool> {
    let n = facts.len();
    let mut live_in = vec![false; n];
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..n).rev() {
            let out = cfg
                .succs
                .of(k)
                .iter()
                .any(|&s| live_in.get(s as usize).copied().unwrap_or(false));
            let (reads, kills) = facts[k];
            let v = reads || (out && !kills);
            if v != live_in[k] {
                live_in[k] = v;
                changed = true;
            }
        }
    }
    live_in
}

/// Backward M0 liveness over the original CFG: calls clobber M0, exits end liveness.
fn m0_liveness(f: &Func, cfg: &Cfg) -> Vec<bool> {
    // (reads, kills) per instruction, from the registers decoded once (`Func::regs`).
    let facts: Vec<(bool, bool)> = f
        .orig
        .iter()
        .map(|o| {
            let kills = f.regs(o).has(Regs::M0_WRITE) || f.regs(o).has(Regs::CALL);
            // `reads_m0` is false without M0 among the decoder's reads.
            (f.regs(o).has(Regs::M0_READ) && reads_m0(&f.inst(o)), kills)
        })
        .collect();
    backward_liveness(cfg, &facts)
}

/// Backward SCC liveness over the original CFG (reads and writes from the decoder's implicit
/// uses/defs, e.g. `s_cbranch_scc*`, `s_cselect`, `s_addc`); calls clobber SCC, exits end
/// liveness.
fn scc_liveness(f: &Func, cfg: &Cfg) -> Vec<bool> {
    // (reads, kills) per instruction, from the registers decoded once (`Func::regs`).
    let facts: Vec<(bool, bool)> = f
        .orig
        .iter()
        .map(|o| {
            let kills = f.regs(o).has(Regs::SCC_WRITE) || f.regs(o).has(Regs::CALL);
            (f.regs(o).has(Regs::SCC_READ), kills)
        })
        .collect();
    backward_liveness(cfg, &facts)
}

/// Forward reaching constant of M0 before each original instruction (`None`: unreached).
fn m0_constants(f: &Func, cfg: &Cfg) -> Vec<Option<Val>> {
    let n = f.orig.len();
    let mut val_in: Vec<Option<Val>> = vec![None; n];
    if n == 0 {
        return val_in;
    }
    val_in[0] = Some(Val::Unknown);
    let mut work: VecDeque<usize> = VecDeque::from([0]);
    while let Some(k) = work.pop_front() {
        let o = &f.orig[k];
        let Some(vin) = val_in[k] else { continue };
        let out = if f.regs(o).has(Regs::CALL) {
            Val::Unknown
        } else if f.regs(o).has(Regs::M0_WRITE) {
            match allowed(&f.inst(o)) {
                Some(Allowed::SetM0(c)) => Val::Const(c),
                _ => Val::Unknown,
            }
        } else {
            vin
        };
        for &s in cfg.succs.of(k) {
            let s = s as usize;
            let merged = match val_in[s] {
                None => out,
                Some(v) if v == out => v,
                Some(_) => Val::Unknown,
            };
            if val_in[s] != Some(merged) {
                val_in[s] = Some(merged);
                work.push_back(s);
            }
        }
    }
    val_in
}

/// Normalised entry into the run of original `k`: `None` when the landing executes the whole run.
fn entry_key(f: &Func, k: usize, land: Option<u64>) -> Option<u64> {
    let start = f
        .inserted
        .get(f.run(k))
        .and_then(|r| r.first())
        .map(|x| x.addr);
    match (land, start) {
        (None, _) => None,
        (Some(l), Some(s)) if l == s => None,
        // No run in front: every landing executes the (empty) whole run.
        (Some(_), None) => None,
        (Some(l), _) => Some(l),
    }
}

fn run_from<'a>(p: &Program, f: &'a Func, k: usize, landing: Option<u64>) -> &'a [NInst] {
    let mut run = f.inserted.get(f.run(k)).unwrap_or_default();
    // A run that starts with a long-branch island or a landing block is never entered by
    // fall-through: after an unconditional branch nothing falls into it, and after a conditional
    // branch the fall-through path takes the `s_branch` over it. Execution starts after it.
    let trailer_end = |a: u64| {
        p.landing_containing(a)
            .map(|(_, b)| b.end)
            .or_else(|| p.island_containing(a).map(|isl| isl.end))
    };
    while let Some(first) = run.first() {
        if landing.is_some() {
            break;
        }
        if trailer_end(first.addr).is_some() {
            run = &run[1..];
            continue;
        }
        let skips_island = run.get(1).and_then(|next| {
            let end = trailer_end(next.addr)?;
            let over = first.inst.mnemonic() == "s_branch"
                && first.inst.branch_target(first.addr) == Some(end);
            over.then_some(())
        });
        match skips_island {
            Some(()) => run = &run[1..],
            None => break,
        }
    }
    match landing {
        None => run,
        Some(a) => {
            let skip = run.iter().take_while(|n| n.addr < a).count();
            run.get(skip..).unwrap_or_default()
        }
    }
}

/// Effect of a run that is more than a simple marker snippet, from its execution.
fn executed_effect(run: &[NInst], at: u64, x: region::Exec, layout: Layout) -> Effect {
    let mut e = Effect {
        m0: if x.m0_preserved {
            Val::Orig
        } else {
            x.m0_const.map_or(Val::Unknown, Val::Const)
        },
        last_writes_m0: run
            .last()
            .is_some_and(|n| n.inst.writes().contains(SpecialReg::M0)),
        markers: Vec::new(),
        problems: x.problems.into_iter().map(|(c, m)| (c, at, m)).collect(),
        scc_changed: x.scc_changed,
    };
    for w in run.windows(2) {
        if w[1].inst.special() == amdgpu_isa::Special::TtraceData
            && w[0].inst.writes().contains(SpecialReg::M0)
        {
            e.problems.push((
                Check::M0,
                w[1].addr,
                "s_ttracedata directly after an M0 write (needs s_nop 0)".into(),
            ));
        }
    }
    for v in x.headers {
        e.markers.push((at, layout.strip(v)));
    }
    e
}

#[allow(clippy::too_many_arguments)]
fn check_runs(
    p: &Program,
    f: &Func,
    legacy: &[bool],
    cfg: &Cfg,
    changeable: &sgprs::Masks,
    fm: &FuncmapInfo,
    env: &region::Env,
    findings: &mut Vec<Finding>,
) -> MarkerCounts {
    let mut counts = MarkerCounts::default();
    let n = f.orig.len();
    if n == 0 {
        return counts;
    }
    if f.inserted.is_empty() {
        // Nothing inserted: every run is empty, so no run changes M0, SCC or the scope depth and
        // no marker is emitted; only an F row added for this function can be wrong.
        check_f_entry(f, fm, None, findings);
        return counts;
    }
    let live = m0_liveness(f, cfg);
    let scc_live = scc_liveness(f, cfg);
    let consts = m0_constants(f, cfg);
    // Entries into each run: whole run (entry, fall-through) and each branch landing, as
    // sorted distinct (instruction, landing) pairs (one flat list: a set per instruction cost
    // an allocation per instruction). Only instructions with a run in front have entries to
    // check (the loop below skips the others), so only their edges are listed and sorted.
    let mut entries: Vec<(usize, Option<u64>)> = vec![(0, None)];
    for (s, land) in cfg.edges() {
        if !f.run(s).is_empty() {
            entries.push((s, entry_key(f, s, land)));
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let facts = Facts {
        live: &live,
        scc_live: &scc_live,
        consts: &consts,
        fm,
        layout: env.layout,
    };
    let mut effects: BTreeMap<(usize, Option<u64>), Effect> = BTreeMap::new();
    let mut loops = Vec::new();
    let mut next = 0;
    for k in 0..n {
        let first = next;
        while entries.get(next).is_some_and(|e| e.0 == k) {
            next += 1;
        }
        let es = entries[first..next].iter().map(|e| e.1);
        let o = &f.orig[k];
        // No run in front: every entry executes nothing (`run_from` gives empty code, whose
        // effect changes nothing and emits nothing), so there is nothing to check or record.
        if f.run(k).is_empty() {
            continue;
        }
        // The run as fall-through enters it (a leading long-branch island is not part of it).
        let whole = run_from(p, f, k, None);
        let code = Code::new(
            f,
            whole,
            f.new_address(o),
            legacy.get(k).copied().unwrap_or(true),
            changeable.get(k).unwrap_or(0),
        )
        .with_m0(facts.consts[k]);
        for land in es {
            let e = entry_effect(p, env, f, &code, run_from(p, f, k, land), land.is_none());
            check_effect(
                f,
                k,
                &e,
                land.is_none(),
                code.legacy,
                &facts,
                &mut counts,
                &mut loops,
                findings,
            );
            // Only runs with markers matter to the scope checks (a missing effect is an empty
            // one); one map entry per original instruction cost time and memory.
            if !e.markers.is_empty() {
                effects.insert((k, land), e);
            }
        }
    }
    // Landing blocks: their marker code runs on the branch edge only, before the target's run.
    let mut landed: BTreeMap<u64, Effect> = BTreeMap::new();
    for (&(_, s), &start) in &cfg.via {
        let Some(b) = p
            .landings
            .get(&start)
            .filter(|_| !landed.contains_key(&start))
        else {
            continue;
        };
        let lo = f.inserted.partition_point(|x| x.addr < start);
        let hi = f.inserted.partition_point(|x| x.addr < b.body_end);
        let body = &f.inserted[lo..hi];
        // The landing block runs on one edge into `s`: a constant M0 at `s` (the join over
        // every edge) is that constant on this edge too.
        let code = Code::new(
            f,
            body,
            Some(b.body_end),
            all_legacy(&f.inserted_class[lo..hi]),
            changeable.get(s).unwrap_or(0),
        )
        .with_m0(facts.consts[s]);
        let e = entry_effect(p, env, f, &code, body, true);
        check_effect(
            f,
            s,
            &e,
            true,
            code.legacy,
            &facts,
            &mut counts,
            &mut loops,
            findings,
        );
        landed.insert(start, e);
    }
    let succ = |k: usize| cfg.succ(k).map(|s| s.0).collect();
    crate::sites::check_loop_enters(f, succ, &fm.names, &loops, findings);
    check_f_entry(f, fm, effects.get(&(0, None)), findings);
    check_balance(f, cfg, &effects, &landed, fm, findings);
    counts
}

/// Facts of the original program the effect of inserted code is checked against, by original
/// instruction index.
struct Facts<'a> {
    live: &'a [bool],
    scc_live: &'a [bool],
    consts: &'a [Option<Val>],
    fm: &'a FuncmapInfo,
    layout: Layout,
}

/// Inserted code in front of one original instruction (a run) or of one jump (a landing block),
/// with what every entry into it asks, worked out once for all of them.
struct Code<'a> {
    /// The code as fall-through enters it.
    whole: &'a [NInst],
    /// Where it ends (new address; the original instruction after a run, a landing block's
    /// jump).
    end: Option<u64>,
    /// Every instruction is a simple marker-snippet instruction.
    legacy: bool,
    /// SGPRs the code may change (bit n = s<n>).
    changeable: u128,
    /// The model can execute it: every instruction is whitelisted and writes only SGPRs, M0
    /// and SCC, or is an M0 save or a lane save.
    executable: bool,
    /// Some instruction names a VGPR (most runs name none: then no decode for
    /// [`Code::vgprs`]).
    names_vgprs: bool,
    /// VGPRs it reads (randomised by the execution), decoded at the first execution.
    vgprs: std::cell::OnceCell<Vec<u16>>,
    /// M0 where the code runs, when the original program has the same constant there on every
    /// path ([`m0_constants`]): the execution starts from it instead of a random value, so a
    /// guarded run that re-materialises that constant on one path only keeps M0.
    m0: Option<u32>,
}

impl<'a> Code<'a> {
    /// `whole`: a stretch of `f.inserted`.
    fn new(
        f: &Func,
        whole: &'a [NInst],
        end: Option<u64>,
        legacy: bool,
        changeable: u128,
    ) -> Code<'a> {
        let at = span(f, whole);
        let names_vgprs = f.inserted_regs(at.clone()).any(|r| r.vgpr_top != 0);
        let executable = f.inserted_class[at.clone()]
            .iter()
            .zip(f.inserted_regs(at))
            .all(|(class, r)| {
                class.is_some() && r.has(Regs::SCALAR_WRITES)
                    || matches!(
                        class,
                        Some(Region::Legacy(Allowed::SaveM0(_)) | Region::Writelane)
                    )
            });
        Code {
            whole,
            end,
            legacy,
            changeable,
            executable,
            names_vgprs,
            vgprs: std::cell::OnceCell::new(),
            m0: None,
        }
    }

    /// The code with M0's original value where it runs (`Some(Val::Const)` only counts).
    fn with_m0(mut self, m0: Option<Val>) -> Code<'a> {
        self.m0 = match m0 {
            Some(Val::Const(c)) => Some(c),
            _ => None,
        };
        self
    }

    fn vgprs(&self) -> &[u16] {
        self.vgprs.get_or_init(|| {
            if self.names_vgprs {
                region::vgprs_read(self.whole.iter().map(|x| &x.inst))
            } else {
                Vec::new()
            }
        })
    }
}

/// Indices into `f.inserted` (ascending by address) of `run`, a stretch of it.
fn span(f: &Func, run: &[NInst]) -> std::ops::Range<usize> {
    let Some(first) = run.first() else {
        return 0..0;
    };
    let i = f.inserted.partition_point(|x| x.addr < first.addr);
    i..i + run.len()
}

/// Effect of executing `run` (a stretch of `f.inserted` ending where `c` ends, from one entry);
/// `frame`: entered whole.
fn entry_effect(
    p: &Program,
    env: &region::Env,
    f: &Func,
    c: &Code,
    run: &[NInst],
    frame: bool,
) -> Effect {
    let idx = span(f, run);
    let simulated = || {
        simulate(
            run,
            f.inserted_regs(idx.clone()),
            &f.inserted_class[idx.clone()],
        )
    };
    if c.whole.is_empty() {
        // Most original instructions have no run: nothing is executed (`run`, a suffix, is
        // empty too).
        return simulated();
    }
    let exec = match (c.whole.first(), c.end) {
        (Some(first), Some(end)) if c.executable && !run.is_empty() => {
            let landing = run.first().map_or(end, |x| x.addr);
            Some((
                landing,
                region::execute(
                    env,
                    &region::Entry {
                        code: p.ntext.slice(first.addr, end),
                        start: first.addr,
                        landing,
                        frame,
                        deterministic: !c.legacy,
                        trials: if c.legacy { 2 } else { 6 },
                        vgprs: c.vgprs(),
                        changeable: c.changeable,
                        m0: c.m0,
                    },
                ),
            ))
        }
        _ => None,
    };
    match exec {
        Some((at, x)) if !c.legacy => executed_effect(run, at, x, env.layout),
        Some((at, x)) => {
            let mut e = simulated();
            e.scc_changed = x.scc_changed;
            e.problems
                .extend(x.problems.into_iter().map(|(c, m)| (c, at, m)));
            e
        }
        None => simulated(),
    }
}

/// Checks the effect of inserted code that runs just before original `k`: SCC and M0 kept where
/// live, no M0 write right before an M0 reader, its problems, and (`whole`: entered whole) its
/// marker words.
#[allow(clippy::too_many_arguments)]
fn check_effect(
    f: &Func,
    k: usize,
    e: &Effect,
    whole: bool,
    legacy: bool,
    facts: &Facts,
    counts: &mut MarkerCounts,
    loops: &mut Vec<LoopEnter>,
    findings: &mut Vec<Finding>,
) {
    let o = &f.orig[k];
    let na = f.new_address(o);
    if e.scc_changed && facts.scc_live[k] {
        findings.push(fnd(
            f,
            Check::Scc,
            Some(o.addr),
            na,
            "SCC is live here and the inserted run changes it".into(),
        ));
    }
    let clobbered = match e.m0 {
        Val::Orig => false,
        Val::Const(c) => facts.live[k] && facts.consts[k] != Some(Val::Const(c)),
        Val::Unknown => facts.live[k],
    };
    if clobbered {
        findings.push(fnd(
            f,
            Check::M0,
            Some(o.addr),
            na,
            format!("M0 is live here and the inserted run leaves it {:?}", e.m0),
        ));
    }
    let oi = f.inst(o);
    if e.last_writes_m0 && reads_m0(&oi) {
        findings.push(fnd(
            f,
            Check::M0,
            Some(o.addr),
            na,
            format!(
                "M0 written directly before {}, which reads it (needs s_nop 0)",
                oi.mnemonic()
            ),
        ));
    }
    for (c, a, msg) in &e.problems {
        if whole || *c != Check::Markers || !legacy {
            findings.push(fnd(f, *c, Some(o.addr), Some(*a), msg.clone()));
        }
    }
    if whole {
        for &(a, v) in &e.markers {
            check_marker(
                f,
                k,
                (a, facts.layout.strip(v)),
                facts.fm,
                counts,
                loops,
                findings,
            );
        }
    }
}

/// Checks marker word `v` at new address `a` (`(a, v)`), inserted in front of original `k` of `f`: a
/// post-link rewrite's kind of word, an id with a funcmap row of the kind the word needs, and a
/// row that names what stands there ([`crate::sites`]).
fn check_marker(
    f: &Func,
    k: usize,
    (a, v): (u64, u32),
    fm: &FuncmapInfo,
    counts: &mut MarkerCounts,
    loops: &mut Vec<LoopEnter>,
    findings: &mut Vec<Finding>,
) {
    let o_addr = f.orig[k].addr;
    let kind = marker_kind(v);
    let id = match kind {
        MarkerKind::Enter(id) => {
            counts.enter += 1;
            Some(id)
        }
        MarkerKind::Fused(id) => {
            counts.exit += 1;
            // Exit+enter fusion merges a user exit with the next enter (spec "Marker
            // fusion"); a post-link rewrite inserts no user markers, so it never emits one.
            findings.push(fnd(
                f,
                Check::Markers,
                Some(o_addr),
                Some(a),
                format!("fused exit+enter marker value {v:#x}: a post-link rewrite emits none"),
            ));
            Some(id)
        }
        MarkerKind::Point(id) => {
            counts.point += 1;
            Some(id)
        }
        MarkerKind::Exit => {
            counts.exit += 1;
            None
        }
        MarkerKind::Reserved => {
            findings.push(fnd(
                f,
                Check::Markers,
                Some(o_addr),
                Some(a),
                format!("marker value {v:#x} uses the reserved id 0"),
            ));
            None
        }
    };
    let Some(id) = id else {
        return;
    };
    match fm.new.as_ref().and_then(|m| m.by_id.get(&id)) {
        None => findings.push(fnd(
            f,
            Check::Markers,
            Some(o_addr),
            Some(a),
            format!("marker value {v:#x} (id {id}) has no .sqtt_funcmap row"),
        )),
        // A point event is named by a `P:` row (spec "Funcmap format": "P: markers are
        // point events"); a point word on an `F:`/`U:` id would show a scope's name as an event.
        Some(row) if matches!(kind, MarkerKind::Point(_)) && row.kind != 'P' => findings.push(fnd(
            f,
            Check::Markers,
            Some(o_addr),
            Some(a),
            format!(
                "point marker value {v:#x} (id {id}) names a {}: row, not a P: row",
                row.kind
            ),
        )),
        // A kernel scope (`U:`) is entered in its kernel, a loop scope (`U:` named `loop
        // SYMBOL+0x..`) in the function of that symbol; an `F:` row named after a symbol is
        // that function's scope, entered in that function (inlined copies of a function with an
        // out-of-line symbol get no row of their own). Symbols are compared by entry address:
        // aliased kernels share one body.
        Some(row) if matches!(kind, MarkerKind::Point(_)) => {
            let home = |s: &str| fm.symbols.get(s).is_some_and(|e| Some(e.1) == f.new_start);
            if let Some(why) = crate::sites::point_misplaced(f, k, &row.name, home) {
                findings.push(fnd(
                    f,
                    Check::Markers,
                    Some(o_addr),
                    Some(a),
                    format!(
                        "point marker value {v:#x} (id {id}) names the P: row {:?}, which does not fit here: {why}",
                        row.name
                    ),
                ));
            }
        }
        Some(row) if matches!(kind, MarkerKind::Enter(_)) => {
            let here = |(_, entry): (bool, u64)| Some(entry) == f.new_start;
            let looped = (row.kind == 'U')
                .then(|| crate::program::scope_rows::loop_scope_symbol(&row.name))
                .flatten();
            let symbol = fm.symbols.get(looped.unwrap_or(&row.name)).copied();
            let misplaced = match (row.kind, symbol) {
                ('U', Some(s)) if looped.is_some() => !here(s),
                ('U', Some(s)) => !s.0 || !here(s),
                ('U', None) => true,
                ('F', Some(s)) => !here(s),
                _ => false,
            };
            if misplaced {
                findings.push(fnd(
                    f,
                    Check::Markers,
                    Some(o_addr),
                    Some(a),
                    format!(
                        "enter marker value {v:#x} (id {id}) names the {}: row of {}, which is not entered here",
                        row.kind, row.name
                    ),
                ));
            } else if looped.is_some() && row.name.starts_with("loop ") {
                // The right function: the site must be in the loop too (a region's enter is
                // proven by the scope balance)
                // ([`crate::sites::check_loop_enters`]).
                let home = |s: &str| fm.symbols.get(s).is_some_and(|e| here(*e));
                let why = match crate::sites::loop_header(f, &row.name, home) {
                    Ok(h) => {
                        loops.push(LoopEnter { k, a, v, id, h });
                        None
                    }
                    Err(why) => Some(why),
                };
                if let Some(why) = why {
                    findings.push(crate::sites::loop_enter_finding(
                        f, k, a, v, id, &row.name, &why,
                    ));
                }
            }
        }
        Some(_) => {}
    }
}

/// A function with an F row added by the rewrite enters its scope at the entry.
fn check_f_entry(f: &Func, fm: &FuncmapInfo, entry: Option<&Effect>, findings: &mut Vec<Finding>) {
    if fm.new.is_none() {
        return;
    }
    // The F rows the rewrite added for this function (indexed by name once, not a scan of every
    // row per function).
    for &id in fm
        .added_f
        .get(&f.name)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let first = entry.and_then(|e| e.markers.first()).map(|(_, v)| *v);
        if first != Some((id << 2) | 2) {
            findings.push(fnd(
                f,
                Check::Markers,
                Some(f.orig_start),
                f.new_start,
                format!(
                    "F row id {id}: the entry has no enter marker {:#x} (first marker {first:?})",
                    (id << 2) | 2
                ),
            ));
        }
    }
}

/// One scope operation of a marker word as the decoder applies it (spec "Semantic rules";
/// `marker_stream.cpp`: `exit_prev` pops, `enter` pushes only for `F`/`U` rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScopeOp {
    Push(u32),
    Pop,
}

/// The scope operations of a run's marker words, in order. An enter (or fused exit+enter) whose id
/// has no `F`/`U` row does not push (points never push); that is reported once per address.
fn scope_ops(
    f: &Func,
    e: &Effect,
    fm: &FuncmapInfo,
    at: &OInst,
    reported: &mut BTreeSet<u64>,
    findings: &mut Vec<Finding>,
) -> Vec<ScopeOp> {
    let kind = |id: u32| {
        fm.new
            .as_ref()
            .and_then(|m| m.by_id.get(&id))
            .map(|r| r.kind)
    };
    let mut ops = Vec::new();
    for &(a, v) in &e.markers {
        let (pop, push) = match marker_kind(v) {
            MarkerKind::Enter(id) => (false, Some(id)),
            MarkerKind::Fused(id) => (true, Some(id)),
            MarkerKind::Exit => (true, None),
            MarkerKind::Point(_) | MarkerKind::Reserved => (false, None),
        };
        if pop {
            ops.push(ScopeOp::Pop);
        }
        if let Some(id) = push {
            match kind(id) {
                Some('F' | 'U') => ops.push(ScopeOp::Push(id)),
                // No row at all is `check_marker`'s finding.
                None => {}
                Some(k) if reported.insert(a) => {
                    findings.push(fnd(
                        f,
                        Check::Markers,
                        Some(at.addr),
                        Some(a),
                        format!(
                            "enter marker {v:#x}: id {id} is a {k}: row, which never opens a scope"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    ops
}

/// Scope stacks (ids of the open `F`/`U` scopes, outermost first) for every path through the
/// function: the stack before each original instruction must be the same on every path that
/// reaches it (so every CFG join agrees, in depth and in which scopes are open), no exit may pop
/// an empty stack, and the stack must be empty at every function exit (`s_endpgm`, return, tail
/// call, unresolved indirect jump) (spec: enter/exit "properly nested"; the llvm-project test
/// decoder rejects underflow and unclosed scopes). Applies to every kind of scope: device
/// functions (`F:`), inlined instances (`F:` without address), kernel scopes (`U:`).
///
/// A branch edge through a landing block (`landed`: effects by block start) runs the block's
/// markers before the target's run.
fn check_balance(
    f: &Func,
    cfg: &Cfg,
    effects: &BTreeMap<(usize, Option<u64>), Effect>,
    landed: &BTreeMap<u64, Effect>,
    fm: &FuncmapInfo,
    findings: &mut Vec<Finding>,
) {
    let n = f.orig.len();
    // Scope stacks are shared between instructions until a marker changes them (a copy per
    // instruction was an allocation per instruction inside every scope).
    let mut stack: Vec<Option<Rc<Vec<u32>>>> = vec![None; n];
    let mut reported = BTreeSet::new();
    let mut bad_enter = BTreeSet::new();
    // Whether some entry into the run of original `k` has an effect with markers (most have
    // none: no map lookup on their edges).
    let mut marked = vec![false; n];
    for &(k, _) in effects.keys() {
        marked[k] = true;
    }
    // Scope operations on entering original `k` at `land`, after landing block `via` if any.
    let mut ops = |k: usize, land: Option<u64>, via: Option<u64>, findings: &mut Vec<Finding>| {
        if via.is_none() && !marked[k] {
            return Vec::new();
        }
        let block = via.and_then(|b| landed.get(&b));
        let run = effects.get(&(k, entry_key(f, k, land)));
        let mut v = Vec::new();
        for e in block.into_iter().chain(run) {
            v.extend(scope_ops(f, e, fm, &f.orig[k], &mut bad_enter, findings));
        }
        v
    };
    // Applies `ops` to `from`; `false` when an exit finds no open scope.
    let apply = |from: &Rc<Vec<u32>>, ops: &[ScopeOp]| {
        if ops.is_empty() {
            return (Rc::clone(from), true);
        }
        let mut s = from.to_vec();
        let mut ok = true;
        for op in ops {
            match op {
                ScopeOp::Push(id) => s.push(*id),
                ScopeOp::Pop => ok &= s.pop().is_some(),
            }
        }
        (Rc::new(s), ok)
    };
    let (s0, ok0) = apply(&Rc::new(Vec::new()), &ops(0, None, None, findings));
    if !ok0 {
        findings.push(fnd(
            f,
            Check::Markers,
            Some(f.orig_start),
            f.new_start,
            "exit marker at function entry with no open scope".into(),
        ));
    }
    stack[0] = Some(s0);
    let mut work = VecDeque::from([0usize]);
    while let Some(k) = work.pop_front() {
        let Some(cur) = stack[k].clone() else {
            continue;
        };
        for (s, land) in cfg.succ(k) {
            let via = cfg.via.get(&(k, s)).copied();
            let (next, ok) = apply(&cur, &ops(s, land, via, findings));
            let o = &f.orig[s];
            if !ok && reported.insert(s) {
                findings.push(fnd(
                    f,
                    Check::Markers,
                    Some(o.addr),
                    f.new_address(o),
                    "exit marker with no open scope on some path".into(),
                ));
            }
            match &stack[s] {
                None => {
                    stack[s] = Some(next);
                    work.push_back(s);
                }
                Some(old) if *old != next && reported.insert(s) => {
                    let msg = if old.len() != next.len() {
                        format!(
                            "unbalanced markers: scope depth {} and {} meet here",
                            old.len(),
                            next.len()
                        )
                    } else {
                        format!(
                            "unbalanced markers: scope stacks (ids) {old:?} and {next:?} meet here"
                        )
                    };
                    findings.push(fnd(f, Check::Markers, Some(o.addr), f.new_address(o), msg));
                }
                Some(_) => {}
            }
        }
    }
    for &k in &cfg.exits {
        if let Some(d) = stack[k].as_ref().map(|s| s.len()).filter(|d| *d != 0) {
            let o = &f.orig[k];
            findings.push(fnd(
                f,
                Check::Markers,
                Some(o.addr),
                f.new_address(o),
                format!("{d} marker scope(s) still open at {}", f.inst(o).mnemonic()),
            ));
        }
    }
}
