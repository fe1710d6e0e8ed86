//! The inserted code of each site (part of the instrument stage, [`super::instrument`]): the
//! marker or address-trace block, M0 kept, scope guard, SCC save, live SGPRs spilled, and the
//! waits that hazards from the code before the site need.

use super::ScopeFlag;
use crate::analysis::{m0_facts, M0Facts, Program};
use crate::layout::Landing;
use crate::plan::{self, M0Keep, MarkerKey, Site};
use crate::regs::{SgprFacts, Sgprs, SiteRegs, ALL_SGPRS};
use crate::snippets::Decoded;
use crate::trace::TraceOp;
use amdgpu_isa::{Family, Instruction, RegSet, Target};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The register allocator of a snippet in front of instruction `i` of function `fi`: the SGPRs
/// free there, and with a spill VGPR `vgpr` the savable live SGPRs, `(free, savable)` from
/// [`SgprFacts::free_at`] and [`SgprFacts::savable_at`], except those instruction `i` reads (a
/// snippet may read the operands of the instruction it traces, so they keep their values
/// throughout).
pub(super) fn site_regs(
    prog: &Program,
    (free, savable): (Sgprs, Sgprs),
    fi: usize,
    i: usize,
    vgpr: Option<u16>,
) -> SiteRegs {
    let inputs = prog.funcs[fi]
        .reg_use
        .get(i)
        .map_or(ALL_SGPRS, |u| u.sgpr_reads());
    SiteRegs::with_spill(free, savable & !inputs, vgpr)
}

/// What building the inserted code of one site reads besides the site.
pub(super) struct SiteEnv<'a> {
    pub(super) prog: &'a Program,
    /// Marker ids.
    pub(super) ids: &'a BTreeMap<MarkerKey, u32>,
    /// Address-traced operations by marker.
    pub(super) trace_ops: &'a BTreeMap<MarkerKey, TraceOp>,
    /// Wave size of every kernel when they agree.
    pub(super) wave: Option<u32>,
    /// gfx12 shader-clock packing `(bits, shift)` when active.
    pub(super) packing: Option<(u32, u32)>,
    /// Scope filtering is on.
    pub(super) scope: bool,
    /// Scope flag SGPR of each function ([`super::registers::scope_flags`]).
    pub(super) flags: &'a [ScopeFlag],
    /// Per function, per instruction: whether SCC is live in front of it.
    pub(super) scc_live: &'a [Vec<bool>],
    /// SGPR liveness and the SGPRs inserted code may use.
    pub(super) sgprs: &'a SgprFacts,
    /// Per function: the VGPR whose lanes may hold saved live SGPRs.
    pub(super) spill_vgpr: &'a [Option<u16>],
}

/// The inserted code of one site and the registers it took; `None` for a site whose marker
/// has no id; `Err`: why it cannot be instrumented.
type Built = Option<Result<(Arc<[Instruction]>, SiteRegs), String>>;

/// Marker snippets already built, by marker value and M0 rule ([`plan::snippet`] depends on
/// nothing else once the target is fixed).
/// Marker code shared between sites, by (value, M0 rule, scope flag): a plain marker, or one
/// inside the scope guard of that flag (no clock packing, no address trace). The SCC save, whose
/// register is chosen per site, is added around a shared guarded marker per site.
type SnippetMemo = HashMap<(u32, M0Keep, Option<u8>), Result<Arc<[Instruction]>, String>>;

/// [`build_site`] for every site, in the order of `sites`. Functions are built in parallel:
/// a site's code depends only on its own function's facts, never on another site (each site
/// gets a fresh [`SiteRegs`]; what the sites took is merged by the caller in site order).
pub(super) fn build_sites(env: &SiteEnv, sites: &[Site]) -> Vec<Built> {
    use rayon::prelude::*;
    let mut by_func: Vec<Vec<usize>> = vec![Vec::new(); env.prog.funcs.len()];
    for (n, s) in sites.iter().enumerate() {
        by_func[s.func].push(n);
    }
    let per_func: Vec<Vec<(usize, Built)>> = by_func
        .par_iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .map_init(SnippetMemo::new, |memo, (fi, list)| {
            let sets = env.sgprs.function_sets(env.prog, fi);
            let preds = branch_preds(&env.prog.funcs[fi]);
            let mut m0 = None;
            let mut decoded = DecodedFunc::new(&env.prog.funcs[fi]);
            list.iter()
                .map(|&n| {
                    let built = build_site(env, &sites[n], &sets, &mut m0, memo);
                    let site = &sites[n];
                    (
                        n,
                        with_entry_waits(env.prog, site, &preds, &mut decoded, built),
                    )
                })
                .collect()
        })
        .collect();
    let mut out: Vec<Built> = (0..sites.len()).map(|_| None).collect();
    for (n, built) in per_func.into_iter().flatten() {
        out[n] = built;
    }
    out
}

/// The inserted code of site `s`: the marker of its word (or its address-trace block), M0
/// kept, scope guard and SCC save as needed, live SGPRs spilled. `sets`: the (free, savable)
/// SGPRs before each instruction of its function ([`SgprFacts::function_sets`]); `m0`: that
/// function's M0 facts, computed on first need.
fn build_site(
    env: &SiteEnv,
    s: &Site,
    sets: &[(Sgprs, Sgprs)],
    m0: &mut Option<M0Facts>,
    memo: &mut SnippetMemo,
) -> Built {
    let (prog, target) = (env.prog, env.prog.target);
    let value = plan::encode_word(s.word, env.ids)?;
    let trace = match s.word {
        plan::Word::Point(k) => env.trace_ops.get(&k).copied(),
        _ => None,
    };
    let needs_m0 =
        env.packing.is_some() || trace.is_some() || !(target.has_ttracedata_imm() && value <= 0xff);
    let here = sets.get(s.before).copied().unwrap_or((0, 0));
    let mut regs = site_regs(prog, here, s.func, s.before, env.spill_vgpr[s.func]);
    let keep = if needs_m0 {
        let facts = m0.get_or_insert_with(|| m0_facts(&prog.funcs[s.func]));
        plan::m0_keep_for(facts, s.before, &mut regs)
    } else {
        Ok(M0Keep::Dead)
    };
    let scc_live = env.scc_live[s.func].get(s.before).copied().unwrap_or(true);
    let guard = env.scope.then(|| env.flags[s.func].map_err(str::to_string));
    let code = keep.and_then(|k| {
        let flag = guard.transpose()?;
        match (trace, env.wave) {
            (Some(op), Some(w)) => {
                trace_code(target, w, value, &op, k, flag, scc_live, &mut regs).map(Arc::from)
            }
            // A plain marker is the same for every site with its value and M0 rule.
            _ if env.packing.is_none() && flag.is_none() => memo
                .entry((value, k, None))
                .or_insert_with(|| plan::snippet(target, value, k).map(Arc::from))
                .clone(),
            // So is a guarded one for its scope flag; only the SCC save around it is per site.
            _ if env.packing.is_none() => {
                let guarded = memo
                    .entry((value, k, flag))
                    .or_insert_with(|| {
                        scope_guarded(target, flag, plan::snippet(target, value, k)?).map(Arc::from)
                    })
                    .clone()?;
                save_scc(target, guarded.to_vec(), scc_live, &mut regs).map(Arc::from)
            }
            _ => site_code(target, value, k, env.packing, flag, scc_live, &mut regs).map(Arc::from),
        }
    });
    let code = code.and_then(|c| spilled(target, &regs, c));
    Some(code.map(|c| (c, regs)))
}

/// Per instruction index of `f` that a branch jumps to (not by falling through): the indices
/// of those branches.
fn branch_preds(f: &crate::analysis::Func) -> HashMap<usize, Vec<usize>> {
    let mut preds: HashMap<usize, Vec<usize>> = HashMap::new();
    for j in 0..f.succs.len() {
        for s in f.successors(j).filter(|&s| s != j + 1) {
            preds.entry(s).or_default().push(j);
        }
    }
    preds
}

/// `built` with the waits in front that hazards from the original code before site `s` need
/// ([`crate::snippets::entry_waits`]): the code in address order before it (what the verifier
/// walks) and, when branches land on the block, the code before each such branch.
fn with_entry_waits(
    prog: &Program,
    s: &Site,
    preds: &HashMap<usize, Vec<usize>>,
    decoded: &mut DecodedFunc,
    built: Built,
) -> Built {
    let Some(Ok((code, regs))) = built else {
        return built;
    };
    if !crate::snippets::needs_entry_check(prog.target, &code) {
        // No instruction of the block can be the consumer of a hazard from earlier code.
        return Some(Ok((code, regs)));
    }
    let f = &prog.funcs[s.func];
    let mut run = |end: usize| -> Vec<Decoded> {
        let end = end.min(f.insts.len());
        (end.saturating_sub(amdgpu_isa::hazard::LOOKBACK)..end)
            .map(|i| decoded.get(f, i))
            .collect()
    };
    let mut contexts = vec![run(s.before)];
    match s.landing {
        Landing::Before => {
            for &j in preds.get(&s.before).into_iter().flatten() {
                contexts.push(run(j + 1));
            }
        }
        Landing::Edge(j) => contexts.push(run(j + 1)),
        Landing::After => {}
    }
    let refs: Vec<&[Decoded]> = contexts.iter().map(Vec::as_slice).collect();
    let out = crate::snippets::entry_waits(prog.target, &refs, code.to_vec())
        .map(|c| (Arc::from(c), regs))
        .map_err(|e| e.to_string());
    Some(out)
}

/// The instructions of one function with their registers ([`Instruction::reads_writes`]),
/// decoded on first use: the entry waits of every site scan the [`amdgpu_isa::hazard::LOOKBACK`]
/// instructions before it, so most instructions are in many contexts (on RCCL, decoding them
/// again per context was a third of the instrument stage).
struct DecodedFunc {
    regs: Vec<Option<(RegSet, RegSet)>>,
}

impl DecodedFunc {
    /// Nothing decoded yet for the instructions of `f`.
    fn new(f: &crate::analysis::Func) -> DecodedFunc {
        DecodedFunc {
            regs: vec![None; f.insts.len()],
        }
    }

    /// Instruction `i` of `f` (the function given to [`DecodedFunc::new`]) with its registers
    /// read and written.
    fn get(&mut self, f: &crate::analysis::Func, i: usize) -> Decoded {
        let inst = f.insts.get(i);
        let (r, w) = *self.regs[i].get_or_insert_with(|| inst.reads_writes());
        (inst, r, w)
    }
}

/// `code` with the live SGPRs `regs` handed out saved before it and restored after it
/// ([`crate::snippets::spill_wrap`]); unchanged when none was.
pub(super) fn spilled<C>(t: Target, regs: &SiteRegs, code: C) -> Result<C, String>
where
    C: std::ops::Deref<Target = [Instruction]> + From<Vec<Instruction>>,
{
    match regs.vgpr {
        Some(v) if regs.spilled != 0 => {
            crate::snippets::spill_wrap(t, v, regs.spilled, code.to_vec())
                .map(C::from)
                .map_err(|x| x.to_string())
        }
        _ => Ok(code),
    }
}

/// Wraps `code` (which clobbers SCC) in an SCC save/restore when SCC is live there:
/// `s_cselect_b32 sS, 1, 0` before and `s_cmp_lg_u32 sS, 0` after (gfx12: `s_wait_alu
/// depctr_sa_sdst(0)` before the restore reads the saved SGPR).
pub(super) fn save_scc(
    t: Target,
    code: Vec<amdgpu_isa::Instruction>,
    scc_live: bool,
    regs: &mut SiteRegs,
) -> Result<Vec<amdgpu_isa::Instruction>, String> {
    use amdgpu_isa::build::{self, Operand};
    if !scc_live {
        return Ok(code);
    }
    let r = regs.one("saving SCC (live here)")?;
    let e = |x: amdgpu_isa::EncodeError| x.to_string();
    let mut out = vec![
        build::s_cselect_b32(t, Operand::Sgpr(r), Operand::Imm(1), Operand::Imm(0)).map_err(e)?,
    ];
    out.extend(code);
    if t.family() == Family::Gfx12 {
        out.push(build::s_wait_alu(t, 0xff9e).map_err(e)?);
    }
    out.push(build::s_cmp(t, "s_cmp_lg_u32", Operand::Sgpr(r), Operand::Imm(0)).map_err(e)?);
    Ok(out)
}

/// The instructions of one marker site: the marker (plain, or shader-clock packed on gfx12),
/// M0 kept as `keep` says, inside the guard of scope flag `flag` when scope filtering is on,
/// with SCC saved when the packing or the guard would clobber a live SCC. Scratch SGPRs come
/// from `regs` (free at the insertion point).
fn site_code(
    t: Target,
    value: u32,
    keep: M0Keep,
    packing: Option<(u32, u32)>,
    flag: Option<u8>,
    scc_live: bool,
    regs: &mut SiteRegs,
) -> Result<Vec<amdgpu_isa::Instruction>, String> {
    let mut body = match packing {
        None => plan::snippet(t, value, keep)?,
        Some((bits, shift)) => {
            // gfx1200/gfx1201 read the clock into M0 directly; gfx1250 needs a pair.
            let pair = if t.family() == Family::Gfx1250 {
                regs.pair("the shader clock")?
            } else {
                0
            };
            let clock = crate::snippets::clock_marker(t, value, bits, shift, pair)
                .map_err(|x| x.to_string())?;
            plan::keep_m0(t, keep, clock.code)?
        }
    };
    body = scope_guarded(t, flag, body)?;
    if packing.is_some() || flag.is_some() {
        body = save_scc(t, body, scc_live, regs)?;
    }
    Ok(body)
}

/// `body` inside the scope guard of `flag` when scope filtering is on, unchanged otherwise.
fn scope_guarded(
    t: Target,
    flag: Option<u8>,
    body: Vec<amdgpu_isa::Instruction>,
) -> Result<Vec<amdgpu_isa::Instruction>, String> {
    let Some(flag) = flag else {
        return Ok(body);
    };
    Ok(crate::snippets::scope_guard(t, flag, body)
        .map_err(|x| x.to_string())?
        .code)
}

/// The instructions of one address-trace block (spec "Address Tracing", "Framing
/// protocol"): the per-lane loop of [`crate::snippets::address_trace`] with header `value`, M0
/// kept as `keep` says, inside the guard of scope flag `flag` when scope filtering is on, SCC
/// saved when live. Its lane counter and word registers come from `regs`.
#[allow(clippy::too_many_arguments)]
fn trace_code(
    t: Target,
    wave: u32,
    value: u32,
    op: &crate::trace::TraceOp,
    keep: M0Keep,
    flag: Option<u8>,
    scc_live: bool,
    regs: &mut SiteRegs,
) -> Result<Vec<amdgpu_isa::Instruction>, String> {
    let n = crate::snippets::scratch_count(&op.src);
    let role = format!("the address-trace loop ({n} SGPRs)");
    let mut tmp = (0..n)
        .map(|_| regs.one(&role))
        .collect::<Result<Vec<u8>, String>>()?;
    // A third register makes some blocks shorter; they also work without it.
    while tmp.len() < crate::snippets::scratch_wanted(&op.src) {
        match regs.one(&role) {
            Ok(r) => tmp.push(r),
            Err(_) => break,
        }
    }
    let block =
        crate::snippets::address_trace(t, wave, value, &op.src, &tmp).map_err(|x| x.to_string())?;
    let body = scope_guarded(t, flag, plan::keep_m0(t, keep, block.code)?)?;
    save_scc(t, body, scc_live, regs)
}
