//! Instrumentation planning: which sites get which marker, marker ids, and the instruction
//! snippet each site needs.
//!
//! Spec facts (seed `000_df2c860dad9fe6b4.txt`): marker word `(id << 2) | flags` with
//! EXIT_PREV = 1 and ENTER = 2; function entry `(id << 2) | 2`, exit `0x1`; barrier placement
//! ("Barrier marker placement"); `s_ttracedata_imm` only on gfx10+ for words <= 0xFF, otherwise
//! `s_mov_b32 m0, <value>`, `s_nop 0`, `s_ttracedata` ("Instruction selection").

use crate::analysis::{Exit, Func, Program};
use crate::config::{FunctionThreshold, Options};
use crate::layout::Landing;
use amdgpu_isa::build::{self, Operand};
use amdgpu_isa::{InstClass, Instruction, MemKind, MemSpace, Special, Target};
use std::collections::{BTreeMap, BTreeSet};

/// What a marker id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MarkerKey {
    /// A device function's scope (index into [`Program::funcs`]).
    Function(usize),
    /// A kernel's scope (kernel-scope option).
    Kernel(usize),
    /// `barrier_signal` point.
    BarrierSignal,
    /// `barrier_wait` point.
    BarrierWait,
    /// `barrier` point (`s_barrier`, or a signal+wait pair).
    Barrier,
    /// `vmem_load` point (memory-op markers).
    VmemLoad,
    /// `vmem_store` point (memory-op markers; atomics count as stores).
    VmemStore,
    /// One address-trace block: function index, instruction index, and the address number
    /// (0, or 1 for the second address of a 2-address DS operation). Ids come last, in
    /// instruction order (spec "ID Allocation", item 4).
    AddrTrace { func: usize, inst: usize, part: u8 },
    /// The scopes of one inlined function ([`crate::inlined::InlinedNames`] index).
    Inlined(u32),
    /// The scope of one loop (`--loops`; index into [`crate::inlined::Planned::loop_names`]).
    Loop(u32),
    /// The back-edge point of the same loop (`--loops N:iters`).
    LoopIter(u32),
    /// The scope of one user-named region in one function (`--region`; index into
    /// [`crate::inlined::Planned::region_names`]).
    Region(u32),
    /// One user-named point in one function (`--point`; index into
    /// [`crate::inlined::Planned::point_names`]).
    UserPoint(u32),
    /// The scope of an in-kernel subroutine reached through a call table (`--functions`;
    /// [`crate::subroutines`]): kernel index and the entry's original address (bytes).
    Subroutine { func: usize, addr: u64 },
}

impl MarkerKey {
    /// Rank used to break emission-count ties: the spec's allocation order (functions, then
    /// barrier_signal, barrier_wait, barrier).
    fn rank(self) -> u8 {
        match self {
            MarkerKey::Function(_)
            | MarkerKey::Kernel(_)
            | MarkerKey::Inlined(_)
            | MarkerKey::Loop(_)
            | MarkerKey::Region(_)
            | MarkerKey::Subroutine { .. } => 0,
            MarkerKey::LoopIter(_) | MarkerKey::UserPoint(_) => 7,
            MarkerKey::BarrierSignal => 1,
            MarkerKey::BarrierWait => 2,
            MarkerKey::Barrier => 3,
            MarkerKey::VmemLoad => 4,
            MarkerKey::VmemStore => 5,
            MarkerKey::AddrTrace { .. } => 6,
        }
    }
}

/// The 32-bit word a site emits, before ids are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// `(id << 2) | 2`.
    Enter(MarkerKey),
    /// `id << 2`.
    Point(MarkerKey),
    /// `0x1`.
    Exit,
}

/// Kind of site, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// Device function entry.
    FunctionEntry,
    /// Before a device function's return or tail call.
    FunctionExit,
    /// Kernel entry (kernel-scope option).
    KernelEntry,
    /// Before `s_endpgm` (kernel-scope option).
    KernelExit,
    /// Before `s_barrier`.
    Barrier,
    /// After an unpaired `s_barrier_signal`.
    BarrierSignal,
    /// Before an unpaired `s_barrier_wait`.
    BarrierWait,
    /// Between `s_barrier_signal` and its `s_barrier_wait`.
    BarrierPair,
    /// Before the first load of a chunk of VMEM loads.
    MemoryLoad,
    /// Before the first store/atomic of a chunk of VMEM stores.
    MemoryStore,
    /// Scope-filter flag computed at a kernel's entry.
    ScopeInit,
    /// Per-lane address-trace block in front of a memory operation.
    AddressTrace,
    /// Enter of an inlined function's scope ([`crate::inlined`]).
    InlinedEnter,
    /// Exit of an inlined function's scope ([`crate::inlined`]).
    InlinedExit,
    /// Enter of a loop's scope, on an edge into its header from outside ([`crate::loops`]).
    LoopEnter,
    /// Exit of a loop's scope, on an edge leaving its body ([`crate::loops`]).
    LoopExit,
    /// Point marker on a loop's back edge (`--loops N:iters`).
    LoopIteration,
    /// Enter of a user-named region's scope (`--region`), on an edge into its entry from
    /// outside ([`crate::regions`]).
    RegionEnter,
    /// Exit of a user-named region's scope, on an edge leaving it.
    RegionExit,
    /// A user-named point marker (`--point`), in front of its instruction.
    UserPoint,
}

impl SiteKind {
    /// Every kind, in declaration order (`ALL[k as usize] == k`).
    pub const ALL: [SiteKind; 20] = [
        SiteKind::FunctionEntry,
        SiteKind::FunctionExit,
        SiteKind::KernelEntry,
        SiteKind::KernelExit,
        SiteKind::Barrier,
        SiteKind::BarrierSignal,
        SiteKind::BarrierWait,
        SiteKind::BarrierPair,
        SiteKind::MemoryLoad,
        SiteKind::MemoryStore,
        SiteKind::ScopeInit,
        SiteKind::AddressTrace,
        SiteKind::InlinedEnter,
        SiteKind::InlinedExit,
        SiteKind::LoopEnter,
        SiteKind::LoopExit,
        SiteKind::LoopIteration,
        SiteKind::RegionEnter,
        SiteKind::RegionExit,
        SiteKind::UserPoint,
    ];

    /// The option a site kind belongs to, as reports name it: `functions`, `kernel_scopes`,
    /// `barriers`, `memory`, `address_trace`, `loops`, `regions` or `points`; `None` for the scope-flag computation, which is
    /// not a requested site.
    pub fn feature(self) -> Option<&'static str> {
        Some(match self {
            SiteKind::FunctionEntry
            | SiteKind::FunctionExit
            | SiteKind::InlinedEnter
            | SiteKind::InlinedExit => "functions",
            SiteKind::KernelEntry | SiteKind::KernelExit => "kernel_scopes",
            SiteKind::Barrier
            | SiteKind::BarrierSignal
            | SiteKind::BarrierWait
            | SiteKind::BarrierPair => "barriers",
            SiteKind::MemoryLoad | SiteKind::MemoryStore => "memory",
            SiteKind::AddressTrace => "address_trace",
            SiteKind::LoopEnter | SiteKind::LoopExit | SiteKind::LoopIteration => "loops",
            SiteKind::RegionEnter | SiteKind::RegionExit => "regions",
            SiteKind::UserPoint => "points",
            SiteKind::ScopeInit => return None,
        })
    }

    /// [`SiteKind::feature`] of the kind serialized as `name` (`function_entry`, ...).
    pub fn feature_of_name(name: &str) -> Option<&'static str> {
        SiteKind::ALL
            .into_iter()
            .find(|k| {
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s == name))
                    == Some(true)
            })
            .and_then(SiteKind::feature)
    }
}

/// One requested marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// Function index.
    pub func: usize,
    /// Insert in front of this instruction index.
    pub before: usize,
    /// Marker word.
    pub word: Word,
    /// Branch landing rule for the snippet.
    pub landing: Landing,
    /// Kind.
    pub kind: SiteKind,
    /// Original address of the instruction the site describes (bytes).
    pub addr: u64,
}

/// A site that was requested but not instrumented, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// Function name.
    pub function: String,
    /// Original address (bytes).
    pub addr: u64,
    /// Kind.
    pub kind: SiteKind,
    /// Why.
    pub why: String,
}

/// Weighted cost of one machine instruction, the spec's "Cost Model" mapped to machine classes:
/// MFMA/WMMA 16, LDS 4, global/flat/buffer/image memory 10, everything else 1; `s_nop`,
/// waits and other no-op scheduling instructions 0 (the IR model's "debug"/"lifetime" weight).
pub fn cost(inst: &Instruction) -> u64 {
    let m = inst.mnemonic();
    match inst.special() {
        Special::Nop
        | Special::Waitcnt
        | Special::WaitAlu
        | Special::DelayAlu
        | Special::Clause
        | Special::CodeEnd => return 0,
        _ => {}
    }
    if m.contains("_mfma_")
        || m.contains("_wmma_")
        || m.contains("_swmmac_")
        || m.contains("_smfmac_")
    {
        return 16;
    }
    match inst.class() {
        InstClass::Ds => 4,
        InstClass::Flat | InstClass::Global | InstClass::Buffer | InstClass::Image => 10,
        _ => 1,
    }
}

/// Size of a function against the threshold, in machine instructions (`Count`) or weighted
/// cost (`Cost`); padding `s_nop`/`s_code_end` is never counted in `Count` mode either.
pub fn function_size(f: &Func, mode: FunctionThreshold) -> u64 {
    let counted = |i: &Instruction| !matches!(i.special(), Special::Nop | Special::CodeEnd);
    match mode {
        FunctionThreshold::Off => 0,
        FunctionThreshold::Count(_) => f.insts.iter().filter(|(_, i)| counted(i)).count() as u64,
        FunctionThreshold::Cost(_) => f.insts.iter().map(|(_, i)| cost(&i)).sum(),
    }
}

/// Insertion points (instruction indices `p`: "insert before `p`") to avoid.
#[derive(Debug, Clone, Default)]
pub struct Forbidden {
    /// Points that would split an `s_clause` group, fall inside an address-builder sequence or
    /// inside a kernarg-preload prologue: never used.
    pub hard: Points,
    /// Points between an `s_delay_alu` and the instructions it covers. `s_delay_alu` is a
    /// scheduling hint (LLVM `AMDGPUInsertDelayAlu`: "insert s_delay_alu instructions to avoid
    /// stalls on GFX11+"; code without it is still correct), so such a point is used when no
    /// point outside the window serves; the hint then delays inserted code instead.
    pub hint: Points,
}

/// A set of insertion points of one function (instruction indices), one flag per point: the
/// points of [`Forbidden`] are dense runs, looked up once per candidate site.
#[derive(Debug, Clone, Default)]
pub struct Points(Vec<bool>);

impl Points {
    /// Whether `p` is in the set.
    pub fn contains(&self, p: &usize) -> bool {
        self.0.get(*p).copied().unwrap_or(false)
    }

    fn insert(&mut self, p: usize) {
        if p >= self.0.len() {
            self.0.resize(p + 1, false);
        }
        self.0[p] = true;
    }

    fn extend(&mut self, points: impl IntoIterator<Item = usize>) {
        for p in points {
            self.insert(p);
        }
    }
}

impl Forbidden {
    /// Whether `p` is in either set.
    pub fn contains(&self, p: usize) -> bool {
        self.hard.contains(&p) || self.hint.contains(&p)
    }
}

/// The [`Forbidden`] points of `f`.
pub fn forbidden_points(f: &Func) -> Forbidden {
    let n = f.insts.len();
    let mut out = Points(vec![false; n + 1]);
    let mut hint = Points(vec![false; n + 1]);
    for (d, (_, inst)) in f.insts.iter().enumerate() {
        match inst.special() {
            Special::Clause => {
                // s_clause simm16[5:0] = instructions in the clause - 1 (ISA manuals, "S_CLAUSE").
                let len = (inst.field("simm16").unwrap_or(0) & 0x3f) as usize + 1;
                out.extend(d + 1..=(d + len).min(n));
            }
            Special::DelayAlu => {
                // simm16: instid0 [3:0], instskip [6:4], instid1 [10:7] (ISA manuals, "S_DELAY_ALU").
                let v = inst.field("simm16").unwrap_or(0);
                let skip = ((v >> 4) & 7) as usize;
                let last = if (v >> 7) & 0xf != 0 {
                    d + 1 + skip
                } else {
                    d + 1
                };
                hint.extend(d + 1..=last.min(n));
            }
            _ => {}
        }
    }
    // Address builders: between the getpc and the instruction that completes it.
    for (i, r) in f.relocs.iter() {
        if let crate::layout::Reloc::PcRelHi { .. }
        | crate::layout::Reloc::PcRel64 { .. }
        | crate::layout::Reloc::PcRelEnd { .. } = r
        {
            let mut g = i;
            while g > 0 && f.insts.get(g).special() != Special::GetPc {
                g -= 1;
            }
            out.extend(g + 1..=i);
        }
    }
    if let Some(k) = f.spec.kernel {
        if k.preload {
            let limit = f.spec.start + 256;
            for (p, (a, _)) in f.insts.iter().enumerate() {
                if a < limit {
                    out.insert(p);
                }
            }
        }
    }
    Forbidden { hard: out, hint }
}

/// Largest distance (instructions) a site may move to leave a forbidden window: an `s_clause`
/// groups at most 64 instructions (simm16[5:0] + 1).
const MAX_SETTLE: usize = 64;

/// Moves an insertion point to the nearest allowed one, earlier or later, without crossing a
/// branch target, a control-flow instruction, another barrier or marker, or more than
/// [`MAX_SETTLE`] instructions; inside an `s_delay_alu` window when nothing else serves (`p`
/// itself, else the nearest point outside the hard windows: an `s_clause` group nested in an
/// `s_delay_alu` window settles in front of its `s_clause`); `None` when impossible (the site is
/// then skipped and reported).
pub(crate) fn settle(f: &Func, forbidden: &Forbidden, p: usize, earlier: bool) -> Option<usize> {
    settle_outside(f, forbidden, p, earlier)
        .or_else(|| (!forbidden.hard.contains(&p) && p < f.insts.len()).then_some(p))
        .or_else(|| settle_hard(f, forbidden, p, earlier))
}

/// [`settle`] without the `s_delay_alu` fallbacks: the nearest point outside every window.
pub(crate) fn settle_outside(
    f: &Func,
    forbidden: &Forbidden,
    p: usize,
    earlier: bool,
) -> Option<usize> {
    settle_while(f, p, earlier, |q| forbidden.contains(q))
}

/// The nearest point outside the hard windows of [`Forbidden`] (it may lie inside an
/// `s_delay_alu` window, a scheduling hint), with the limits of [`settle`].
pub(crate) fn settle_hard(
    f: &Func,
    forbidden: &Forbidden,
    p: usize,
    earlier: bool,
) -> Option<usize> {
    settle_while(f, p, earlier, |q| forbidden.hard.contains(&q))
}

/// Moves `p` earlier or later while `blocked` holds, with the limits of [`settle`].
fn settle_while(
    f: &Func,
    p: usize,
    earlier: bool,
    blocked: impl Fn(usize) -> bool,
) -> Option<usize> {
    let pinned = |i: usize| {
        matches!(
            f.insts.get(i).special(),
            Special::SBarrier
                | Special::SBarrierSignal
                | Special::SBarrierSignalIsFirst
                | Special::SBarrierWait
                | Special::TtraceData
                | Special::TtraceDataImm(_)
        )
    };
    let mut q = p;
    let mut moved = 0;
    while blocked(q) {
        moved += 1;
        if moved > MAX_SETTLE {
            return None;
        }
        if earlier {
            if q == 0 || f.leaders.contains(&q) {
                return None;
            }
            q -= 1;
            if f.insts.flow(q) != amdgpu_isa::Flow::Fallthrough || pinned(q) {
                return None;
            }
        } else {
            if q >= f.insts.len() || f.insts.flow(q) != amdgpu_isa::Flow::Fallthrough || pinned(q) {
                return None;
            }
            q += 1;
            if f.leaders.contains(&q) {
                return None;
            }
        }
    }
    Some(q)
}

/// Sites per function for the options, plus the sites that had to be skipped.
pub fn collect_sites(prog: &Program, ok: &[bool], opts: &Options) -> (Vec<Site>, Vec<Skipped>) {
    let mut sites = Vec::new();
    let mut skipped = Vec::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        if !ok[fi] {
            continue;
        }
        let forbidden = forbidden_points(f);
        let mut want: Vec<(usize, bool, Word, Landing, SiteKind)> = Vec::new();
        let kernel = f.spec.kernel;
        // Function / kernel scopes.
        let scoped = match kernel {
            None => match opts.functions {
                FunctionThreshold::Off => false,
                FunctionThreshold::Count(n) | FunctionThreshold::Cost(n) => {
                    function_size(f, opts.functions) >= n
                }
            },
            Some(_) => opts.kernel_scopes,
        };
        if scoped {
            let (key, ek, xk) = match kernel {
                None => (
                    MarkerKey::Function(fi),
                    SiteKind::FunctionEntry,
                    SiteKind::FunctionExit,
                ),
                Some(_) => (
                    MarkerKey::Kernel(fi),
                    SiteKind::KernelEntry,
                    SiteKind::KernelExit,
                ),
            };
            let entry = match kernel {
                Some(k) if k.preload => f.insts.index_of(f.spec.start + 256),
                _ => Some(0),
            };
            let entry_landing = match kernel {
                Some(k) if k.preload => Landing::Before,
                _ => Landing::After,
            };
            match entry {
                Some(e)
                    if kernel.is_some_and(|k| k.preload) && f.leaders.contains(&e) && e != 0 =>
                {
                    // The prologue branch targets it by design; any other branch would re-enter.
                    let other = f.relocs.iter().any(|(i, r)| {
                        matches!(r, crate::layout::Reloc::Branch { target } if target == f.insts.addr(e))
                            && f.insts.addr(i) >= f.spec.start + 256
                    });
                    if other {
                        skipped.push(Skipped {
                            function: f.spec.name.clone(),
                            addr: f.insts.addr(e),
                            kind: ek,
                            why: "a loop branches back to the kernel's first instruction".into(),
                        });
                    } else {
                        want.push((e, true, Word::Enter(key), entry_landing, ek));
                    }
                }
                Some(e) => want.push((e, true, Word::Enter(key), entry_landing, ek)),
                None => skipped.push(Skipped {
                    function: f.spec.name.clone(),
                    addr: f.spec.start,
                    kind: ek,
                    why: "no instruction at the kernarg-preload entry (entry + 256)".into(),
                }),
            }
            for &(i, e) in &f.exits {
                // A device function can end the wave itself (`__builtin_amdgcn_endpgm()`):
                // its scope closes there as at a return. A kernel that jumps to another
                // function's entry (a Tensile long branch aimed at another kernel) leaves its
                // scope there, as a device function's tail call does: the scope must be closed
                // at every exit (the verifier's balance rule).
                let is_exit = matches!(
                    (kernel, e),
                    (None, Exit::Return | Exit::TailCall(_) | Exit::EndPgm)
                        | (Some(_), Exit::EndPgm | Exit::TailCall(_))
                );
                if is_exit {
                    want.push((i, true, Word::Exit, Landing::Before, xk));
                }
            }
        }
        // In-kernel subroutines: a device function's scope, at their entry and returns.
        let subroutine_scopes = !opts.unscoped_subroutines.contains(&f.spec.start);
        if let (Some(_), FunctionThreshold::Count(n) | FunctionThreshold::Cost(n), true) =
            (kernel, opts.functions, subroutine_scopes)
        {
            for s in crate::subroutines::balanced(f, opts.functions) {
                if s.size < n {
                    continue;
                }
                let key = MarkerKey::Subroutine {
                    func: fi,
                    addr: f.insts.addr(s.entry),
                };
                let entry = SiteKind::FunctionEntry;
                want.push((s.entry, true, Word::Enter(key), Landing::Before, entry));
                for r in s.returns {
                    let exit = SiteKind::FunctionExit;
                    want.push((r, true, Word::Exit, Landing::Before, exit));
                }
            }
        }
        // Barriers.
        if opts.barriers {
            let n = f.insts.len();
            let mut i = 0;
            while i < n {
                match f.insts.get(i).special() {
                    Special::SBarrier => want.push((
                        i,
                        true,
                        Word::Point(MarkerKey::Barrier),
                        Landing::Before,
                        SiteKind::Barrier,
                    )),
                    Special::SBarrierSignal | Special::SBarrierSignalIsFirst => {
                        // Pair: the next barrier instruction in the same block is a wait.
                        let mut j = i + 1;
                        let mut pair = None;
                        while j < n
                            && !f.leaders.contains(&j)
                            && f.insts.flow(j - 1) == amdgpu_isa::Flow::Fallthrough
                        {
                            match f.insts.get(j).special() {
                                Special::SBarrierWait => {
                                    pair = Some(j);
                                    break;
                                }
                                Special::SBarrier
                                | Special::SBarrierSignal
                                | Special::SBarrierSignalIsFirst => break,
                                _ => j += 1,
                            }
                        }
                        match pair {
                            Some(_) => want.push((
                                i + 1,
                                false,
                                Word::Point(MarkerKey::Barrier),
                                Landing::Before,
                                SiteKind::BarrierPair,
                            )),
                            None => want.push((
                                i + 1,
                                false,
                                Word::Point(MarkerKey::BarrierSignal),
                                Landing::Before,
                                SiteKind::BarrierSignal,
                            )),
                        }
                        if let Some(j) = pair {
                            i = j; // the wait is covered by the pair marker
                        }
                    }
                    Special::SBarrierWait => want.push((
                        i,
                        true,
                        Word::Point(MarkerKey::BarrierWait),
                        Landing::Before,
                        SiteKind::BarrierWait,
                    )),
                    _ => {}
                }
                i += 1;
            }
        }
        if let Some(chunking) = opts.memory {
            for (first, is_store) in memory_chunks(f, chunking) {
                let (key, kind) = if is_store {
                    (MarkerKey::VmemStore, SiteKind::MemoryStore)
                } else {
                    (MarkerKey::VmemLoad, SiteKind::MemoryLoad)
                };
                want.push((first, true, Word::Point(key), Landing::Before, kind));
            }
        }
        for (p, earlier, word, landing, kind) in want {
            let addr = f.insts.checked_addr(p).unwrap_or(f.spec.end);
            match settle(f, &forbidden, p, earlier) {
                Some(q) if q < f.insts.len() => sites.push(Site {
                    func: fi,
                    before: q,
                    word,
                    landing,
                    kind,
                    addr,
                }),
                _ => skipped.push(Skipped {
                    function: f.spec.name.clone(),
                    addr,
                    kind,
                    why: "no safe insertion point (s_clause window, address builder or preload prologue up to a branch boundary)".into(),
                }),
            }
        }
    }
    (sites, skipped)
}

/// VMEM class of an instruction for memory-op markers: `Some(true)` for stores and atomics,
/// `Some(false)` for loads (LDS DMA from global memory included), `None` otherwise (prefetches
/// and cache control included, issue 31). Global, flat and buffer operations count; LDS,
/// GDS, scratch, image and scalar memory do not (spec, "Memory operation markers").
pub fn vmem_kind(inst: &Instruction) -> Option<bool> {
    let m = inst.memory()?;
    match m.space {
        MemSpace::Global | MemSpace::Flat | MemSpace::Buffer { .. } => {}
        _ => return None,
    }
    match m.kind {
        MemKind::Load => Some(false),
        MemKind::Store | MemKind::Atomic => Some(true),
        MemKind::Prefetch | MemKind::Other => None,
    }
}

/// Chunks of VMEM operations for `SQTT_INSTRUMENT_MEMORY=N:M`: within one basic block, a
/// sequence continues while the next operation has the same kind (load vs store/atomic) and at
/// most `max_gap` instructions lie between the two; every `ops_per_marker` operations close a
/// chunk and a sequence's remainder is a chunk too. Returns (index of the chunk's first
/// operation, is_store); the marker goes in front of that operation.
pub fn memory_chunks(f: &Func, c: crate::config::MemoryChunking) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    // (first op index, kind, ops in chunk, index of last op)
    let mut cur: Option<(usize, bool, u32, usize)> = None;
    for (i, (_, inst)) in f.insts.iter().enumerate() {
        let block_start = f.leaders.contains(&i)
            || (i > 0 && f.insts.flow(i - 1) != amdgpu_isa::Flow::Fallthrough);
        if block_start {
            cur = None;
        }
        let Some(store) = vmem_kind(&inst) else {
            continue;
        };
        cur = match cur {
            Some((first, kind, n, last))
                if kind == store
                    && (i - last - 1) as u64 <= u64::from(c.max_gap)
                    && n < c.ops_per_marker =>
            {
                Some((first, kind, n + 1, i))
            }
            _ => {
                out.push((i, store));
                Some((i, store, 1, i))
            }
        };
    }
    out
}

/// Marker ids: every key used by a site gets one, compacted by static emission count (most
/// frequent first, so they get the `s_ttracedata_imm` form), ties broken by the spec's category
/// order and then first use; address-trace ids come after all of them, in site order; ids in
/// `reserved` (markers already present in the input) are skipped.
pub fn allocate_ids(sites: &[Site], reserved: &BTreeSet<u32>) -> BTreeMap<MarkerKey, u32> {
    let mut count: BTreeMap<MarkerKey, (u64, usize)> = BTreeMap::new();
    for (n, s) in sites.iter().enumerate() {
        if let Word::Enter(k) | Word::Point(k) = s.word {
            let e = count.entry(k).or_insert((0, n));
            e.0 += 1;
        }
    }
    let mut keys: Vec<(MarkerKey, u64, usize)> = count
        .into_iter()
        .map(|(k, (c, first))| (k, c, first))
        .collect();
    // Address-trace ids always follow every other id, in instruction order ("ID Allocation").
    keys.sort_by_key(|&(k, c, first)| {
        let trace = matches!(k, MarkerKey::AddrTrace { .. });
        (
            trace,
            (!trace).then_some(std::cmp::Reverse(c)),
            k.rank(),
            first,
        )
    });
    let mut ids = BTreeMap::new();
    let mut next = 1u32;
    for (k, _, _) in keys {
        while reserved.contains(&next) {
            next += 1;
        }
        ids.insert(k, next);
        next += 1;
    }
    ids
}

/// The 32-bit marker value of a word.
pub fn encode_word(word: Word, ids: &BTreeMap<MarkerKey, u32>) -> Option<u32> {
    match word {
        Word::Exit => Some(1),
        Word::Enter(k) => ids.get(&k).map(|id| (id << 2) | 2),
        Word::Point(k) => ids.get(&k).map(|id| id << 2),
    }
}

/// How M0 is preserved around a snippet that writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum M0Keep {
    /// M0 is dead here: clobber it.
    Dead,
    /// M0 holds this constant on every path: re-materialise it.
    Constant(u32),
    /// Save to and restore from this SGPR.
    Save(u8),
}

/// Builds the snippet for one marker value. Instruction sequences (spec "Instruction
/// selection"; M0 wait state: ISA manuals' "Manually inserted wait states", SALU write of M0
/// followed by `s_ttracedata` / LDS / `s_sendmsg` / `s_movrel` needs one wait state):
/// - `s_ttracedata_imm v` on gfx10+ when `v <= 0xFF`;
/// - otherwise `[s_mov_b32 sR, m0]`, `s_mov_b32 m0, v`, `s_nop 0`, `s_ttracedata`, then if M0 was
///   live `s_mov_b32 m0, K|sR` and `s_nop 0` (M0 may be read by the next original instruction).
pub fn snippet(t: Target, value: u32, keep: M0Keep) -> Result<Vec<Instruction>, String> {
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    if t.has_ttracedata_imm() && value <= 0xff {
        return Ok(vec![build::s_ttracedata_imm(t, value as u8).map_err(e)?]);
    }
    let marker = vec![
        build::s_mov_b32(t, Operand::M0, Operand::Literal(value)).map_err(e)?,
        build::s_nop(t, 0).map_err(e)?,
        build::s_ttracedata(t).map_err(e)?,
    ];
    keep_m0(t, keep, marker)
}

/// Wraps `body` (code that writes M0) so M0 survives as `keep` says: `s_mov_b32 sR, m0` before
/// and `s_mov_b32 m0, sR` after for [`M0Keep::Save`] (gfx12: `s_wait_alu depctr_sa_sdst(0)`
/// first), `s_mov_b32 m0, K` after for
/// [`M0Keep::Constant`]; each restore is followed by `s_nop 0` (the M0 wait state before a
/// following M0 reader, ISA manuals' "Manually inserted wait states").
pub fn keep_m0(
    t: Target,
    keep: M0Keep,
    body: Vec<Instruction>,
) -> Result<Vec<Instruction>, String> {
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    let mut out = Vec::with_capacity(body.len() + 3);
    if let M0Keep::Save(r) = keep {
        out.push(build::s_mov_b32(t, Operand::Sgpr(r), Operand::M0).map_err(e)?);
    }
    out.extend(body);
    let restore = match keep {
        M0Keep::Dead => None,
        M0Keep::Constant(k) => Some(Operand::Literal(k)),
        M0Keep::Save(r) => Some(Operand::Sgpr(r)),
    };
    if let Some(src) = restore {
        // gfx12: an SGPR written by SALU and read by SALU needs `s_wait_alu depctr_sa_sdst(0)`
        // (LLVM AMDGPUWaitSGPRHazards; `amdgpu_isa::hazard` rule salu-sgpr-read), as in
        // `save_scc`.
        if matches!(keep, M0Keep::Save(_)) && t.family() == amdgpu_isa::Family::Gfx12 {
            out.push(build::s_wait_alu(t, 0xff9e).map_err(e)?);
        }
        out.push(build::s_mov_b32(t, Operand::M0, src).map_err(e)?);
        out.push(build::s_nop(t, 0).map_err(e)?);
    }
    Ok(out)
}

/// Decides how M0 is kept at a site in front of instruction `before` of a function whose
/// [`crate::analysis::M0Facts`] are `facts`: dead, a known constant, or saved in an SGPR taken
/// from `regs` (free at that point); `Err` with the reason when none applies.
pub fn m0_keep_for(
    facts: &crate::analysis::M0Facts,
    before: usize,
    regs: &mut crate::regs::SiteRegs,
) -> Result<M0Keep, String> {
    if !facts.live[before] {
        return Ok(M0Keep::Dead);
    }
    if let Some(k) = facts.constant[before] {
        return Ok(M0Keep::Constant(k));
    }
    regs.one("saving M0 (live with an unknown value)")
        .map(M0Keep::Save)
}

#[cfg(test)]
mod tests {
    use super::SiteKind;

    /// Reports count sites in an array indexed by `kind as usize`.
    #[test]
    fn all_is_in_declaration_order() {
        for (i, k) in SiteKind::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, i, "{k:?}");
        }
    }
}
