//! Instrument: the sites of every requested feature ([`crate::plan`], [`crate::inlined`],
//! [`crate::trace`]), marker ids, the registers each insertion point may use
//! ([`crate::regs`]) and the inserted code of every site ([`crate::snippets`]).

mod registers;
mod site_code;

use super::{kernel_funcs, Analysed, Source};
use crate::analysis::Program;
use crate::config::Options;
use crate::inlined::InlinedNames;
use crate::layout::Landing;
use crate::plan::{self, MarkerKey, Site, SiteKind, Skipped};
use crate::regs::{SgprFacts, Sgprs, SiteRegs};
use crate::report::{coverage, Report, Status};
use crate::snippets::ScopeMasks;
use crate::trace::TraceOp;
use crate::verbatim::Verbatim;
use amdgpu_isa::{Family, Instruction, Target};
use hsaco::CodeObject;
use registers::{allocation_masks, scope_flags, vgpr_budget, ScopeFlag, NO_SCOPE_SGPR};
use site_code::{build_sites, save_scc, site_regs, spilled, SiteEnv};
use sqtt_funcmap::Row;
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
    // A function whose code does not all decode has no instructions to plan on: its sites are
    // found in a copy of its code below (`crate::undecodable`), to be counted as skipped.
    let ok: Vec<bool> = prog.funcs.iter().map(|f| !f.does_not_decode()).collect();
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
    for (fi, _) in prog
        .funcs
        .iter()
        .enumerate()
        .filter(|(_, f)| f.does_not_decode())
    {
        let (s, k) = crate::undecodable::sites_of(&prog, fi, src.text_bytes(), opts, wave);
        sites.extend(s);
        skipped.extend(k);
    }
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
