//! Instrument: the sites of every requested feature ([`crate::plan`], [`crate::inlined`],
//! [`crate::trace`]), marker ids, the registers each insertion point may use
//! ([`crate::regs`]) and the inserted code of every site ([`crate::snippets`]).

use super::{kernel_funcs, Analysed, Source};
use crate::analysis::{m0_facts, M0Facts, Program};
use crate::config::Options;
use crate::funcmap::Row;
use crate::inlined::InlinedNames;
use crate::layout::Landing;
use crate::plan::{self, M0Keep, MarkerKey, Site, SiteKind, Skipped};
use crate::regs::{SgprFacts, Sgprs, SiteRegs, ALL_SGPRS};
use crate::report::{coverage, Report, Status};
use crate::snippets::{Decoded, ScopeMasks};
use crate::trace::TraceOp;
use crate::verbatim::Verbatim;
use amdgpu_isa::{Family, Instruction, RegSet, Target};
use hsaco::CodeObject;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Inserted code by insertion point `(function index, instruction index)`: each site with its
/// instructions, in the order they are inserted. Sites with the same marker code share one
/// allocation.
pub(crate) type Snippets = BTreeMap<(usize, usize), Vec<(Site, Arc<[Instruction]>)>>;

/// Output of [`instrument`].
pub(crate) struct Instrumented {
    /// The input object.
    pub src: Source,
    /// Every function analysed.
    pub prog: Program,
    /// Functions left alone and moved verbatim.
    pub verbatim: Verbatim,
    /// The input's funcmap rows.
    pub existing_rows: Vec<Row>,
    /// The input's `.debug_*` sections by name (`None` without DWARF).
    pub dwarf: Option<HashMap<String, Vec<u8>>>,
    /// Index of that DWARF (inline chains, function definition sites, inlined instances), built
    /// once; `Err`: why it cannot be read.
    pub dwarf_index: Option<Result<dwarf_remap::LocationIndex, String>>,
    /// Marker ids some inserted snippet emits, by marker.
    pub ids: BTreeMap<MarkerKey, u32>,
    /// Inserted code by insertion point (never empty).
    pub snippets: Snippets,
    /// SGPR liveness and the SGPRs inserted code may use (long-branch islands take theirs from
    /// it at lay-out).
    pub sgprs: SgprFacts,
    /// Per function, per instruction: whether SCC is live in front of it.
    pub scc_live: Vec<Vec<bool>>,
    /// SGPRs inserted code writes, per function.
    pub used_by_func: Vec<Sgprs>,
    /// Per function: VGPRs the lane saves of its snippets need allocated (highest spill VGPR
    /// + 1; 0 when nothing is spilled).
    pub spill_need: Vec<u32>,
    /// The wave size of every kernel when they all agree (address tracing needs it).
    pub wave: Option<u32>,
    /// Address-traced operations by marker.
    pub trace_ops: BTreeMap<MarkerKey, TraceOp>,
    /// gfx12 shader-clock packing `(bits, shift)` when active.
    pub packing: Option<(u32, u32)>,
    /// Names and locations of the inlined-function scopes.
    pub inlined_names: InlinedNames,
    /// Names and header locations of the loop scopes.
    pub loop_names: InlinedNames,
    /// Names of the user-named region scopes (`--region`).
    pub region_names: InlinedNames,
    /// Names of the user-named points (`--point`).
    pub point_names: InlinedNames,
}

/// Sites kinds that open or close a scope: a scope is all or nothing.
const SCOPE_KINDS: [SiteKind; 10] = [
    SiteKind::FunctionEntry,
    SiteKind::FunctionExit,
    SiteKind::KernelEntry,
    SiteKind::KernelExit,
    SiteKind::InlinedEnter,
    SiteKind::InlinedExit,
    SiteKind::LoopEnter,
    SiteKind::LoopExit,
    SiteKind::RegionEnter,
    SiteKind::RegionExit,
];

/// Finds the sites of the features `opts` asks for, allocates marker ids (never one in
/// `a.reserved`) and builds each site's inserted code. `None`: nothing to instrument (status
/// stays `nothing_to_do`) or the object fails closed (more than 2^30 ids, ids too wide for
/// shader-clock packing, a kernel whose scope flag cannot be computed). Fills `inlined`,
/// `skipped`, `notes` (options that do not apply to the target) and `reasons`.
pub(crate) fn instrument(a: Analysed, opts: &Options, report: &mut Report) -> Option<Instrumented> {
    let Analysed {
        src,
        prog,
        verbatim,
        reserved,
        existing_rows,
    } = a;
    let co = &src.co;
    let target = prog.target;
    // Sites and ids. A scope (function or kernel enter/exit) is all or nothing: when one of its
    // sites cannot be instrumented, all of them are dropped and reported, so markers stay balanced.
    let ok = vec![true; prog.funcs.len()];
    // Any `.debug_*` section, not only `.debug_info`: a `.debug_frame` alone holds code
    // addresses too and must follow the code (or be dropped), never be left stale.
    let dwarf = match co
        .elf
        .sections
        .iter()
        .any(|s| s.name.starts_with(".debug_"))
        .then(|| debug_sections(co))
        .transpose()
    {
        Ok(d) => d,
        Err(why) => {
            report.status = Status::FailedClosed;
            report.reasons.push(format!("DWARF cannot be read: {why}"));
            return None;
        }
    };
    // The DWARF is indexed while the other features' sites and SCC liveness are found.
    let (dwarf_index, ((mut sites, mut skipped), scc_facts)) = rayon::join(
        || {
            dwarf
                .as_ref()
                .map(|d| dwarf_remap::LocationIndex::new(d).map_err(|e| e.to_string()))
        },
        || {
            use rayon::prelude::*;
            rayon::join(
                || plan::collect_sites(&prog, &ok, opts),
                || {
                    prog.funcs
                        .par_iter()
                        .map(crate::analysis::scc_live)
                        .collect::<Vec<Vec<bool>>>()
                },
            )
        },
    );
    let inlined = crate::inlined::sites(&prog, &ok, opts, dwarf_index.as_ref());
    sites.extend(inlined.sites);
    report.inlined = inlined.report;
    report.loops = inlined.loops;
    report.regions = inlined.regions;
    skipped.extend(inlined.skipped);
    if let Some(e) = &report.inlined.dwarf_error {
        report.notes.push(format!(
            "the DWARF cannot be read ({e}): inlined functions are not marked and funcmap rows carry no source locations"
        ));
    }
    // Address tracing: one block per qualifying operation, wave size from the descriptors.
    let wave = wave_size(co, target);
    let trace_ops = match opts.trace_addresses {
        Some(want) => {
            let (t_sites, t_skipped, ops) = crate::trace::trace_sites(&prog, want, wave);
            sites.extend(t_sites);
            skipped.extend(t_skipped);
            ops
        }
        None => BTreeMap::new(),
    };
    crate::verbatim::skip_left_alone(&prog, &verbatim, &mut sites, &mut skipped);
    let callers = crate::callers::callers(&prog, co);
    let mut sgprs = SgprFacts::new(&prog, allocation_masks(&prog, co), &callers.outside);
    let caps: Vec<(usize, u32, u32)> = kernel_funcs(&prog, co)
        .map(|(fi, k)| {
            let now = k.descriptor.registers(&co.target).arch_vgprs;
            (fi, now, vgpr_budget(co, k))
        })
        .collect();
    let scope = opts.scope.filter(|m| m.filters(target));
    let flags = match scope {
        Some(_) => scope_flags(&prog, &verbatim, &mut sgprs),
        None => vec![Err(NO_SCOPE_SGPR); prog.funcs.len()],
    };
    let mut alloc = Alloc {
        sgprs,
        spill_vgpr: crate::regs::spill_vgprs(&prog, &caps),
        used_by_func: vec![0; prog.funcs.len()],
        spill_need: vec![0; prog.funcs.len()],
    };
    // gfx12 shader-clock packing (spec "GFX12 Shader Clock Packing"): active on gfx12 and
    // gfx1250 only; other targets keep the legacy layout.
    let packing = (opts.shader_clock_bits > 0
        && matches!(target.family(), Family::Gfx12 | Family::Gfx1250))
    .then_some((opts.shader_clock_bits, opts.shader_clock_shift));
    if opts.shader_clock_bits > 0 && packing.is_none() {
        report.notes.push(format!(
            "shader_clock_bits={} not used: shader-clock packing exists on gfx12 and gfx1250 only; {} markers keep the legacy layout",
            opts.shader_clock_bits,
            target.name()
        ));
    }
    let func_by_name = super::first_index(
        prog.funcs
            .iter()
            .enumerate()
            .map(|(fi, f)| (f.spec.name.as_str(), fi)),
    );
    let (ids, snippets) = loop {
        let ids = plan::allocate_ids(&sites, &reserved);
        let mut snippets: Snippets = BTreeMap::new();
        let mut bad_scopes: BTreeSet<usize> = skipped
            .iter()
            .filter(|k| SCOPE_KINDS.contains(&k.kind))
            .filter_map(|k| func_by_name.get(k.function.as_str()).copied())
            .collect();
        let mut new_skips = Vec::new();
        let env = SiteEnv {
            prog: &prog,
            ids: &ids,
            trace_ops: &trace_ops,
            wave,
            packing,
            scope: scope.is_some(),
            flags: &flags,
            scc_live: &scc_facts,
            sgprs: &alloc.sgprs,
            spill_vgpr: &alloc.spill_vgpr,
        };
        let built = build_sites(&env, &sites);
        for (s, code) in sites.iter().zip(built) {
            match code {
                None => {}
                Some(Ok((code, regs))) => {
                    alloc.take(s.func, &regs);
                    snippets
                        .entry((s.func, s.before))
                        .or_default()
                        .push((*s, code))
                }
                Some(Err(why)) => {
                    if SCOPE_KINDS.contains(&s.kind) {
                        bad_scopes.insert(s.func);
                    }
                    new_skips.push(Skipped {
                        function: prog.funcs[s.func].spec.name.clone(),
                        addr: s.addr,
                        kind: s.kind,
                        why: crate::callers::skip_cause(&callers, &alloc.sgprs, s.func, why),
                    });
                }
            }
        }
        let dropped: Vec<Site> = sites
            .iter()
            .filter(|s| SCOPE_KINDS.contains(&s.kind) && bad_scopes.contains(&s.func))
            .copied()
            .collect();
        let dropped_ok: Vec<&Site> = dropped
            .iter()
            .filter(|d| {
                !new_skips.iter().any(|k| {
                    k.addr == d.addr
                        && k.kind == d.kind
                        && k.function == prog.funcs[d.func].spec.name
                })
            })
            .collect();
        if dropped.is_empty() {
            skipped.extend(new_skips);
            break (ids, snippets);
        }
        for d in dropped_ok {
            skipped.push(Skipped {
                function: prog.funcs[d.func].spec.name.clone(),
                addr: d.addr,
                kind: d.kind,
                why: "scope dropped: another enter/exit site of this scope cannot be instrumented"
                    .into(),
            });
        }
        skipped.extend(
            new_skips
                .into_iter()
                .filter(|k| SCOPE_KINDS.contains(&k.kind)),
        );
        sites.retain(|s| !(SCOPE_KINDS.contains(&s.kind) && bad_scopes.contains(&s.func)));
    };
    // The sites are found: should this or a later stage fail closed, they count as found and
    // not instrumented (the driver replaces this coverage when the rewrite succeeds).
    report.skipped = skipped;
    let found = snippets.values().flatten();
    report.coverage = coverage(
        found.filter_map(|(s, _)| Some((s.kind.feature()?, 1))),
        &report.skipped,
        false,
    );
    if ids.values().any(|&id| id >= 1 << 30) {
        report.status = Status::FailedClosed;
        report.reasons.push("more than 2^30 marker ids".into());
        return None;
    }
    if let Some((bits, _)) = packing {
        if ids.values().any(|&id| u64::from(id) >= 1u64 << (30 - bits)) {
            report.status = Status::FailedClosed;
            report.reasons.push(format!(
                "marker ids do not fit the {}-bit id field left by shader-clock packing",
                30 - bits
            ));
            return None;
        }
    }
    let mut snippets = snippets;
    // Only ids some inserted snippet emits get funcmap rows (a skipped address-trace site must
    // not leave a P:/R: row behind).
    let mut ids = ids;
    // (Inserted one by one: hundreds of thousands of sites share a few hundred keys.)
    let mut emitted: BTreeSet<MarkerKey> = BTreeSet::new();
    for (s, _) in snippets.values().flatten() {
        if let plan::Word::Enter(k) | plan::Word::Point(k) = s.word {
            emitted.insert(k);
        }
    }
    ids.retain(|k, _| emitted.contains(k));
    if let Some(l) = report.loops.as_mut() {
        l.instrumented = ids
            .keys()
            .filter(|k| matches!(k, MarkerKey::Loop(_)))
            .count();
    }
    if let Some(r) = report.regions.as_mut() {
        r.instrumented = ids
            .keys()
            .filter(|k| matches!(k, MarkerKey::Region(_)))
            .count();
        r.points_instrumented = ids
            .keys()
            .filter(|k| matches!(k, MarkerKey::UserPoint(_)))
            .count();
    }
    // Entry snippets first at a shared point (they are skipped by branches). Of the rest, scope
    // entries and the markers describing the previous instruction (after a barrier signal) come
    // first, then the
    // inlined-scope markers (a scope changes on the edge into an instruction), then the markers
    // describing the instruction (barrier, memory, function and kernel exits), directly in front
    // of it.
    for v in snippets.values_mut() {
        v.sort_by_key(|(s, _)| match (s.landing, s.kind) {
            (Landing::After, _) => 0,
            (
                _,
                SiteKind::FunctionEntry
                | SiteKind::KernelEntry
                | SiteKind::BarrierPair
                | SiteKind::BarrierSignal,
            ) => 1,
            (
                _,
                SiteKind::InlinedEnter
                | SiteKind::InlinedExit
                | SiteKind::LoopEnter
                | SiteKind::LoopExit
                | SiteKind::RegionEnter
                | SiteKind::RegionExit
                | SiteKind::UserPoint,
            ) => 2,
            _ => 3,
        });
    }
    // Scope filtering: every kernel computes the flag once at its entry, before any marker
    // (callees read it too, so kernels without markers of their own compute it as well).
    if let Some(masks) = scope {
        let init = scope_inits(&prog, &verbatim, &masks, &flags, &scc_facts, &mut alloc);
        match init {
            Ok(inits) => {
                for (site, code) in inits {
                    snippets
                        .entry((site.func, site.before))
                        .or_default()
                        .insert(0, (site, Arc::from(code)));
                }
            }
            Err(why) => {
                report.status = Status::FailedClosed;
                report.reasons.push(why);
                return None;
            }
        }
    }
    if snippets.is_empty() {
        return None;
    }
    Some(Instrumented {
        src,
        prog,
        verbatim,
        existing_rows,
        dwarf,
        dwarf_index,
        ids,
        snippets,
        sgprs: alloc.sgprs,
        scc_live: scc_facts,
        used_by_func: alloc.used_by_func,
        spill_need: alloc.spill_need,
        wave,
        trace_ops,
        packing,
        inlined_names: inlined.names,
        loop_names: inlined.loop_names,
        region_names: inlined.region_names,
        point_names: inlined.point_names,
    })
}

/// The registers of inserted code: what each insertion point may use, and what the snippets
/// built so far took, per function.
struct Alloc {
    /// SGPR liveness and the SGPRs inserted code may use.
    sgprs: SgprFacts,
    /// Per function: the VGPR whose lanes may hold saved live SGPRs ([`crate::regs::spill_vgprs`]).
    spill_vgpr: Vec<Option<u16>>,
    /// Per function: SGPRs inserted code writes (flags, scratch, saves).
    used_by_func: Vec<Sgprs>,
    /// Per function: VGPRs the lane saves of its snippets need allocated (highest spill VGPR +
    /// 1; 0 when nothing is spilled).
    spill_need: Vec<u32>,
}

impl Alloc {
    /// The allocator of a snippet in front of instruction `i` of function `fi` ([`site_regs`]).
    fn at(&mut self, prog: &Program, fi: usize, i: usize) -> SiteRegs {
        let sets = (
            self.sgprs.free_at(prog, fi, i),
            self.sgprs.savable_at(prog, fi, i),
        );
        site_regs(prog, sets, fi, i, self.spill_vgpr[fi])
    }

    /// Records the registers a snippet of function `fi` took from `regs`.
    fn take(&mut self, fi: usize, regs: &SiteRegs) {
        self.used_by_func[fi] |= regs.used;
        if let (Some(v), true) = (regs.vgpr, regs.spilled != 0) {
            self.spill_need[fi] = self.spill_need[fi].max(u32::from(v) + 1);
        }
    }
}

/// The wave size of every kernel when they all agree (64 on gfx9; 32 without kernels on
/// gfx10+), `None` when kernels of both sizes exist.
fn wave_size(co: &CodeObject, target: Target) -> Option<u32> {
    let mut waves: BTreeSet<u32> = co
        .kernels
        .iter()
        .map(|k| k.descriptor.wave_size())
        .collect();
    if target.family() == Family::Gfx9 || waves.is_empty() {
        waves = BTreeSet::from([if target.family() == Family::Gfx9 {
            64
        } else {
            32
        }]);
    }
    (waves.len() == 1)
        .then(|| waves.iter().copied().next())
        .flatten()
}

/// The scope-flag computation of every kernel not left alone that has a flag, with its site:
/// at its entry (after the kernarg-preload header when it has one), with its site. Errors: the
/// report reason for a kernel whose flag cannot be computed (no instruction at the preload
/// entry, no scratch SGPR, SCC live without a free SGPR to save it).
fn scope_inits(
    prog: &Program,
    verbatim: &Verbatim,
    masks: &ScopeMasks,
    flags: &[ScopeFlag],
    scc: &[Vec<bool>],
    alloc: &mut Alloc,
) -> Result<Vec<(Site, Vec<Instruction>)>, String> {
    let target = prog.target;
    let mut out = Vec::new();
    for (fi, f) in prog.funcs.iter().enumerate() {
        let Some(k) = f.spec.kernel.filter(|_| !verbatim.is_left_alone(fi)) else {
            continue;
        };
        let Ok(flag) = flags[fi] else { continue };
        let entry = if k.preload {
            f.insts.index_of(f.spec.start + 256)
        } else {
            Some(0)
        };
        let init = entry
            .ok_or_else(|| "no instruction at the kernarg-preload entry".to_string())
            .and_then(|e| {
                let mut regs = alloc.at(prog, fi, e);
                let tmp = regs.one("the scope check's scratch")?;
                let code = crate::snippets::scope_init(target, masks, flag, tmp)
                    .map_err(|x| x.to_string())?
                    .code;
                let scc_live = scc[fi].get(e).copied().unwrap_or(true);
                let code = save_scc(target, code, scc_live, &mut regs)?;
                let code = spilled(target, &regs, code)?;
                alloc.take(fi, &regs);
                alloc.used_by_func[fi] |= 1u128 << flag;
                Ok((e, code))
            })
            .map_err(|why| {
                format!(
                    "scope filtering: cannot compute the scope flag in kernel {}: {why}",
                    f.spec.name
                )
            })?;
        let (e, code) = init;
        let site = Site {
            func: fi,
            before: e,
            word: plan::Word::Exit,
            landing: if k.preload {
                Landing::Before
            } else {
                Landing::After
            },
            kind: SiteKind::ScopeInit,
            addr: f.insts.checked_addr(e).unwrap_or(f.spec.start),
        };
        out.push((site, code));
    }
    Ok(out)
}

/// The input's `.debug_*` sections by name, decompressed where they are `SHF_COMPRESSED`
/// (issue 39: Debian's ROCm builds compress every one with zlib). Errors: a compressed section
/// that does not decompress (named, with its file offset).
fn debug_sections(co: &CodeObject) -> Result<HashMap<String, Vec<u8>>, String> {
    let sections = co
        .debug_sections(hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT)
        .map_err(|e| e.to_string())?;
    Ok(sections
        .into_iter()
        .map(|(name, data)| (name.to_string(), data.into_owned()))
        .collect())
}

/// The register allocator of a snippet in front of instruction `i` of function `fi`: the SGPRs
/// free there, and with a spill VGPR `vgpr` the savable live SGPRs, `(free, savable)` from
/// [`SgprFacts::free_at`] and [`SgprFacts::savable_at`], except those instruction `i` reads (a
/// snippet may read the operands of the instruction it traces, so they keep their values
/// throughout).
fn site_regs(
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
struct SiteEnv<'a> {
    prog: &'a Program,
    /// Marker ids.
    ids: &'a BTreeMap<MarkerKey, u32>,
    /// Address-traced operations by marker.
    trace_ops: &'a BTreeMap<MarkerKey, TraceOp>,
    /// Wave size of every kernel when they agree.
    wave: Option<u32>,
    /// gfx12 shader-clock packing `(bits, shift)` when active.
    packing: Option<(u32, u32)>,
    /// Scope filtering is on.
    scope: bool,
    /// Scope flag SGPR of each function ([`scope_flags`]).
    flags: &'a [ScopeFlag],
    /// Per function, per instruction: whether SCC is live in front of it.
    scc_live: &'a [Vec<bool>],
    /// SGPR liveness and the SGPRs inserted code may use.
    sgprs: &'a SgprFacts,
    /// Per function: the VGPR whose lanes may hold saved live SGPRs.
    spill_vgpr: &'a [Option<u16>],
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
fn build_sites(env: &SiteEnv, sites: &[Site]) -> Vec<Built> {
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
fn spilled<C>(t: Target, regs: &SiteRegs, code: C) -> Result<C, String>
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
fn save_scc(
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

/// SGPRs usable by code: s0..s101 on gfx9 (s102..s107 hold FLAT_SCRATCH, XNACK_MASK, VCC),
/// s0..s105 on gfx10+ (AMDGPUUsage / ISA manuals "SGPR allocation").
fn sgpr_limit(t: Target) -> u16 {
    match t.family() {
        Family::Gfx9 => 102,
        _ => 106,
    }
}

/// Largest SGPR allocation (including the 6 SGPRs of VCC, FLAT_SCRATCH and XNACK_MASK) kernel
/// `k` can have on gfx9 with the same waves per SIMD (hsaco `occupancy`, LLVM
/// `getOccupancyWithNumSGPRs`); at most 112, the gfx9 addressable maximum plus extras.
fn gfx9_sgpr_budget(co: &CodeObject, k: &hsaco::Kernel) -> u32 {
    let regs = k.descriptor.registers(&co.target);
    let now = regs.sgprs.unwrap_or(0);
    let lds = k.descriptor.group_segment_fixed_size;
    let occ = |s: u32| {
        hsaco::kd::occupancy(&co.target, regs.wave32, regs.vgprs_allocated, s, lds).waves_per_simd
    };
    let base = occ(now);
    let mut best = now;
    let mut s = now;
    while s + 8 <= 112 {
        s += 8;
        if occ(s) == base {
            best = s;
        } else {
            break;
        }
    }
    best
}

/// Most architected VGPRs kernel `k` can be given with the same waves per SIMD (hsaco
/// `occupancy`, LLVM `getOccupancyWithNumVGPRs`), at most 256 (the VGPRs `v_writelane_b32`
/// addresses). The gfx90a family keeps its allocation: its granule also covers the AGPRs that
/// follow `accum_offset`, so growing it adds no architected VGPR.
fn vgpr_budget(co: &CodeObject, k: &hsaco::Kernel) -> u32 {
    let regs = k.descriptor.registers(&co.target);
    if co.target.has_gfx90a_insts() {
        return regs.arch_vgprs;
    }
    let lds = k.descriptor.group_segment_fixed_size;
    let sgprs = regs.sgprs.unwrap_or(0);
    let occ = |v: u32| hsaco::kd::occupancy(&co.target, regs.wave32, v, sgprs, lds).waves_per_simd;
    let step = hsaco::kd::vgpr_encoding_granule(&co.target, regs.wave32);
    let base = occ(regs.vgprs_allocated);
    let mut best = regs.vgprs_allocated;
    while best + step <= 256 && occ(best + step) == base {
        best += step;
    }
    best
}

/// SGPRs inserted code may use in each function at all (issue 12 item 2): s0..s101 on gfx9 and
/// s0..s105 on gfx10+ ([`sgpr_limit`]: every gfx10+ wave has the full SGPR file); on gfx9 also
/// below every reaching kernel's [`gfx9_sgpr_budget`] minus the 6 SGPRs of VCC, FLAT_SCRATCH and
/// XNACK_MASK, so no kernel loses waves per SIMD (functions no kernel reaches: every kernel's).
fn allocation_masks(prog: &Program, co: &CodeObject) -> Vec<Sgprs> {
    let n = prog.funcs.len();
    let limit = u32::from(sgpr_limit(prog.target));
    let mask = |top: u32| -> Sgprs { (1u128 << top.min(limit)) - 1 };
    if prog.target.family() != Family::Gfx9 {
        // gfx1010-gfx1013: a SALU write of an SGPR that a VMEM/DS/FLAT instruction still reads
        // needs `s_waitcnt_depctr` (LLVM `GCNHazardRecognizer::fixVMEMtoScalarWriteHazards`,
        // `amdgpu_isa::hazard` rule vmem-sgpr-salu-write): scratch never takes an SGPR that a
        // memory instruction of the function reads.
        let vmem_hazard = matches!(
            prog.target.name(),
            "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
        );
        // gfx12 (rule valu-sgpr-read): an SGPR a VALU wrote may be scratch; the address-trace
        // loop, the only snippet with a VALU reading scratch, waits `depctr_va_sdst(0)` first
        // (`snippets::Emitter`).
        return prog
            .funcs
            .iter()
            .map(|f| {
                let avoid: Sgprs = if vmem_hazard {
                    f.insts
                        .iter()
                        .zip(&f.reg_use)
                        .filter(|((_, i), _)| i.memory().is_some())
                        .fold(0, |a, (_, u)| a | u.operand_reads())
                } else {
                    0
                };
                mask(limit) & !avoid
            })
            .collect();
    }
    let mut top: Vec<Option<u32>> = vec![None; n];
    let mut lowest = limit;
    for (fi, k) in kernel_funcs(prog, co) {
        let b = gfx9_sgpr_budget(co, k).saturating_sub(6);
        lowest = lowest.min(b);
        for g in prog.reachable(fi) {
            top[g] = Some(top[g].map_or(b, |t| t.min(b)));
        }
    }
    top.into_iter().map(|t| mask(t.unwrap_or(lowest))).collect()
}

/// The scope-filter flag SGPR of a function, or why it has none (the skip reason of its
/// scope-filtered sites).
type ScopeFlag = Result<u8, &'static str>;

/// Why a function has no scope flag: no SGPR is free in its call graph.
const NO_SCOPE_SGPR: &str =
    "scope filtering: no SGPR is untouched by every function of this kernel call graph, so it has no scope flag";

/// Why a function has no scope flag: a kernel left alone reaches it.
const FLAGLESS_CALLER: &str = "scope filtering: a kernel left alone (its entry computes no scope flag) may call this function, so the flag is not set on every call";

/// The scope-filter flag SGPR of each function (issue 12 item 4; spec "Scope filtering":
/// computed once at kernel entry, read by every marker). Kernels that reach a common function
/// form one call graph and share one flag: the lowest SGPR that no function of the call graph
/// touches and that every one of them may use. Functions no kernel reaches form their own call
/// graph. A function without a flag gets the reason instead: its call graph has no such SGPR,
/// or a kernel left alone reaches it (that kernel's entry computes no flag, so a guard there
/// would read whatever the SGPR holds). Every flag is then withheld from the scratch registers
/// of every function.
fn scope_flags(prog: &Program, verbatim: &Verbatim, sgprs: &mut SgprFacts) -> Vec<ScopeFlag> {
    let n = prog.funcs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut flagless = vec![false; n];
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.spec.kernel.is_none() {
            continue;
        }
        let left_alone = verbatim.is_left_alone(fi);
        for g in prog.reachable(fi) {
            let (a, b) = (root(&mut parent, fi), root(&mut parent, g));
            parent[a] = b;
            flagless[g] |= left_alone && g != fi;
        }
    }
    let mut untouched: BTreeMap<usize, Sgprs> = BTreeMap::new();
    for fi in 0..n {
        let r = root(&mut parent, fi);
        let e = untouched.entry(r).or_insert(ALL_SGPRS);
        *e &= sgprs.allowed(fi) & !sgprs.touched(fi);
    }
    let flag_of: BTreeMap<usize, u8> = untouched
        .into_iter()
        .filter(|(_, free)| *free != 0)
        .map(|(r, free)| (r, free.trailing_zeros() as u8))
        .collect();
    let flags: Vec<ScopeFlag> = (0..n)
        .map(|fi| match flag_of.get(&root(&mut parent, fi)) {
            _ if flagless[fi] => Err(FLAGLESS_CALLER),
            Some(&r) => Ok(r),
            None => Err(NO_SCOPE_SGPR),
        })
        .collect();
    sgprs.forbid(flags.iter().flatten().fold(0, |a, &r| a | 1u128 << r));
    flags
}
