//! One code object end to end: load → decode → analyse → plan → lay out → write.
//!
//! Fail-closed policy: a function we cannot instrument (undecodable word, unresolved branch or
//! PC-relative sequence, execution falling off its end, indirect jump in a kernel) is left alone
//! and moved verbatim when it is position-independent ([`crate::verbatim`]); when it is not, the
//! WHOLE code object stays byte-identical, because relayout moves every function. The report
//! lists every function left alone and every reason. Individual sites that cannot be
//! instrumented safely are skipped and reported.

use crate::analysis::{analyse, FnSpec, KernelSpec, Program};
use crate::config::Options;
use crate::funcmap::{self, Row};
use crate::layout::{
    lay_out, Landing, Layout, LayoutError, PcRelUse, Piece, Reloc, TextPlan, PAD_WORD,
};
use crate::plan::{self, M0Keep, MarkerKey, Site, SiteKind, Skipped};
use crate::regs::{members, SgprFacts, Sgprs, SiteRegs, ALL_SGPRS};
use crate::timings::{Stage, Timings};
use amdgpu_isa::{Family, Instruction, Special, Target};
use hsaco::{CodeObject, CodeObjectEditor};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use thiserror::Error;

/// Name of the non-alloc section that records that (and how) sqtt-patch rewrote an object.
pub const PATCH_SECTION: &str = ".sqtt_patch";
/// Name of the funcmap section (seed spec, "Funcmap format").
pub const FUNCMAP_SECTION: &str = ".sqtt_funcmap";

/// Errors that stop the run for this input (bad input or an internal inconsistency).
#[derive(Debug, Error)]
pub enum RewriteError {
    /// The input is not a usable code object.
    #[error(transparent)]
    Input(#[from] hsaco::Error),
    /// The processor is not supported by our ISA tables.
    #[error("unsupported target {0}")]
    Target(String),
    /// The input already carries sqtt-patch instrumentation.
    #[error("already instrumented by sqtt-patch (section {PATCH_SECTION}); pass --force to instrument again")]
    AlreadyInstrumented,
    /// Invalid options.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Not a linked code object: `e_type` is not `ET_DYN` (AMDGPUUsage "ELF Header": code
    /// objects are shared objects; a relocatable `.o` still needs `ld.lld -shared`).
    #[error("e_type {0} is not ET_DYN (3): only linked code objects can be rewritten; link a relocatable .o with ld.lld -shared first")]
    NotLinked(u16),
}

/// What happened to the code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Markers inserted.
    Instrumented,
    /// Nothing to instrument with these options; output equals input.
    NothingToDo,
    /// Unsafe to rewrite; output equals input; see `reasons`.
    FailedClosed,
}

/// Per-function line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionReport {
    /// Symbol name.
    pub name: String,
    /// Kernel or device function.
    pub kernel: bool,
    /// Original address (bytes).
    pub address: u64,
    /// Original size (bytes).
    pub size: u64,
    /// New size (bytes), including inserted code.
    pub new_size: u64,
    /// Instrumented sites by kind.
    pub sites: BTreeMap<String, u32>,
    /// Instructions inserted.
    pub inserted_instructions: u32,
    /// Bytes inserted (excluding alignment padding).
    pub inserted_bytes: u32,
    /// Marker id of this function's scope, if it has one.
    pub scope_id: Option<u32>,
}

/// Per-kernel register and occupancy line.
#[derive(Debug, Clone, Serialize)]
pub struct KernelReport {
    /// Kernel name.
    pub name: String,
    /// Wave size.
    pub wave_size: u32,
    /// SGPRs allocated before/after (gfx9 only; gfx10+ waves get the full SGPR file).
    pub sgprs_before: Option<u32>,
    /// See `sgprs_before`.
    pub sgprs_after: Option<u32>,
    /// VGPRs allocated (never changed by markers).
    pub vgprs: u32,
    /// Waves per SIMD before.
    pub occupancy_before: u32,
    /// Waves per SIMD after.
    pub occupancy_after: u32,
    /// Instructions inserted in the kernel and every function it reaches.
    pub inserted_instructions_reachable: u32,
}

/// Report of one code object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Processor.
    pub target: String,
    /// Outcome.
    pub status: Status,
    /// Why the object failed closed (empty otherwise).
    pub reasons: Vec<String>,
    /// `.text` size before (bytes).
    pub text_size_before: u64,
    /// `.text` size after (bytes).
    pub text_size_after: u64,
    /// Functions, by address.
    pub functions: Vec<FunctionReport>,
    /// Kernels.
    pub kernels: Vec<KernelReport>,
    /// Sites that could not be instrumented.
    pub skipped: Vec<Skipped>,
    /// Functions not instrumented and copied verbatim (moved as one block), with the reason.
    pub left_alone: Vec<crate::verbatim::LeftAlone>,
    /// Marker values already present in the input (kept; their ids are never reused).
    pub existing_markers: Vec<String>,
    /// Funcmap rows written.
    pub funcmap_rows: usize,
    /// Marker ids allocated, by name.
    pub ids: BTreeMap<String, u32>,
    /// Every SGPR some inserted code writes (scope flags, scratch, M0 and SCC saves, clock pairs,
    /// long-branch pairs), ascending. Each is dead where it is written, or restored (proven per
    /// insertion point by [`crate::regs`]); scope flags are untouched by their kernels' code.
    pub inserted_sgprs: Vec<u8>,
    /// DWARF sections remapped.
    pub dwarf_sections_remapped: usize,
    /// SOPP branches relaxed into long-branch islands (pushed out of simm16 range by inserted code).
    pub relaxed_branches: usize,
    /// Requested options that do not apply to this target and were not used (e.g.
    /// shader-clock packing on gfx9-gfx11), one sentence each.
    pub notes: Vec<String>,
    /// Sites instrumented and found per feature (issue 12 item 6), for the features whose sites
    /// were looked for (a code object that failed closed as a whole has none).
    pub coverage: Vec<Coverage>,
    /// Inlined functions as scopes (`--functions`, from DWARF; [`crate::inlined`]).
    pub inlined: crate::inlined::InlinedReport,
}

/// Sites of one feature: instrumented / found (found = instrumented + skipped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// `functions`, `kernel_scopes`, `barriers`, `memory` or `address_trace`.
    pub feature: &'static str,
    /// Sites instrumented (count of sites).
    pub instrumented: u64,
    /// Sites found: instrumented plus skipped (count of sites).
    pub found: u64,
    /// Of the skipped sites, those inside compiled-out stubs ([`crate::verbatim::is_stub`]):
    /// code that cannot run (count of sites). `instrumented / (found - in_stubs)` is the coverage
    /// of code that can run.
    pub in_stubs: u64,
}

impl Coverage {
    /// No sites of `feature` yet.
    pub fn empty(feature: &'static str) -> Coverage {
        Coverage {
            feature,
            instrumented: 0,
            found: 0,
            in_stubs: 0,
        }
    }

    /// Percent of the sites in code that can run that were instrumented (100 when there are none).
    pub fn percent_runnable(&self) -> f64 {
        let runnable = self.found.saturating_sub(self.in_stubs);
        if runnable == 0 {
            100.0
        } else {
            100.0 * self.instrumented as f64 / runnable as f64
        }
    }
}

impl Report {
    /// Per-feature coverage from the per-function site counts and the skipped sites.
    fn compute_coverage(&self) -> Vec<Coverage> {
        let mut by: BTreeMap<&'static str, Coverage> = BTreeMap::new();
        for f in &self.functions {
            for (kind, &n) in &f.sites {
                if let Some(feat) = SiteKind::feature_of_name(kind) {
                    let c = by.entry(feat).or_insert_with(|| Coverage::empty(feat));
                    c.instrumented += u64::from(n);
                    c.found += u64::from(n);
                }
            }
        }
        for sk in &self.skipped {
            if let Some(feat) = sk.kind.feature() {
                let c = by.entry(feat).or_insert_with(|| Coverage::empty(feat));
                c.found += 1;
                c.in_stubs += u64::from(sk.why.starts_with(crate::verbatim::STUB_SKIP));
            }
        }
        by.into_values().collect()
    }
}

/// Result of [`rewrite`].
#[derive(Debug)]
pub struct Outcome {
    /// New code object bytes (`None`: output must equal the input).
    pub bytes: Option<Vec<u8>>,
    /// What was done.
    pub report: Report,
}

fn isa_target(co: &CodeObject) -> Result<Target, RewriteError> {
    Target::from_elf_mach(u32::from(co.target.mach))
        .ok_or_else(|| RewriteError::Target(co.target.processor.clone()))
}

/// Raises each kernel's `.sgpr_count` to at least `need[kernel name]`, in whichever metadata note
/// lists it (`-fgpu-rdc` links have one note per translation unit); kernels without an entry in
/// `need` are left alone. Errors (the object fails closed):
/// a kernel without a metadata entry when the object has metadata, or a note that does not
/// re-encode to its input bytes (non-canonical MessagePack would change the note's size and move
/// every section after it).
fn cover_reserved_sgprs(
    co: &CodeObject,
    input: &[u8],
    need: &BTreeMap<String, u32>,
    ed: &mut CodeObjectEditor,
) -> Result<(), String> {
    if co.metadata.is_empty() {
        return Ok(());
    }
    let mut notes: BTreeMap<usize, hsaco::Metadata> = BTreeMap::new();
    for k in &co.kernels {
        let Some(need) = need.get(&k.name).map(|&n| u64::from(n)) else {
            continue;
        };
        let Some((note, i)) = k.metadata_index else {
            return Err(format!(
                "kernel {} has no amdhsa.kernels entry in any metadata note, so its .sgpr_count cannot cover the reserved SGPRs",
                k.name
            ));
        };
        let Some(meta) = co.metadata.get(note) else {
            continue;
        };
        // `.sgpr_count` is required (AMDGPUUsage "Code Object V3+ Metadata"); adding the key
        // would grow the note and move every section after it.
        let Some(have) = meta.kernel_u64(i, ".sgpr_count") else {
            return Err(format!(
                "kernel {} has no .sgpr_count in its metadata (required), so it cannot cover the reserved SGPRs",
                k.name
            ));
        };
        if have >= need {
            continue;
        }
        let m = match notes.entry(note) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let same = meta.encode().ok().is_some_and(|enc| {
                    usize::try_from(meta.offset)
                        .ok()
                        .and_then(|o| input.get(o..o.checked_add(enc.len())?))
                        == Some(&enc[..])
                });
                if !same {
                    return Err(format!(
                        "the metadata note at offset {:#x} is not canonical MessagePack (it does not re-encode to the same bytes), so .sgpr_count cannot be updated in place",
                        meta.offset
                    ));
                }
                v.insert(meta.clone())
            }
        };
        m.set_kernel_u64(i, ".sgpr_count", need)
            .map_err(|e| format!("kernel {}: {e}", k.name))?;
    }
    for m in notes.into_values() {
        ed.set_metadata(m);
    }
    Ok(())
}

/// Function ranges from the descriptors and symbols, sorted, ends clipped to the next start.
fn function_specs(co: &CodeObject, text_addr: u64, text_end: u64) -> Vec<FnSpec> {
    let mut specs: Vec<FnSpec> = Vec::new();
    for k in &co.kernels {
        specs.push(FnSpec {
            name: k.name.clone(),
            start: k.entry,
            end: k.code_size.filter(|&s| s > 0).map_or(0, |s| k.entry + s),
            kernel: Some(KernelSpec {
                preload: k.descriptor.kernarg_preload_length() > 0,
                wave_size: k.descriptor.wave_size(),
            }),
        });
    }
    for f in &co.functions {
        if f.address >= text_addr
            && f.address < text_end
            && !specs.iter().any(|s| s.start == f.address)
        {
            specs.push(FnSpec {
                name: f.name.clone(),
                start: f.address,
                end: if f.size > 0 { f.address + f.size } else { 0 },
                kernel: None,
            });
        }
    }
    specs.retain(|s| s.start >= text_addr && s.start < text_end);
    // Several symbols may share one entry (a kernel without code whose symbol has size 0 sits
    // on the next function, or the linker folded identical kernels): one function per entry,
    // the one with a known size.
    specs.sort_by_key(|s| (s.start, s.end == 0));
    specs.dedup_by_key(|s| s.start);
    for i in 0..specs.len() {
        let next = specs.get(i + 1).map_or(text_end, |s| s.start);
        if specs[i].end == 0 || specs[i].end > next {
            specs[i].end = next;
        }
    }
    specs
}

/// True when `bytes` hold only padding: `s_nop`, `s_code_end` or zero dwords.
fn is_padding(bytes: &[u8], target: Target) -> bool {
    bytes.len().is_multiple_of(4)
        && bytes.chunks_exact(4).all(|w| {
            let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            v == 0
                || v == PAD_WORD
                || amdgpu_isa::decode(w, target)
                    .is_ok_and(|i| matches!(i.special(), Special::Nop | Special::CodeEnd))
        })
}

/// Alignment to keep for a function starting at `addr` (kernels: 256, AMDGPUUsage "Kernel
/// Descriptor": entries 256-byte aligned; others: the largest power of two dividing the original
/// address, between 4 and 256).
fn alignment_of(addr: u64, kernel: bool) -> u64 {
    if kernel {
        return 256;
    }
    let tz = addr.trailing_zeros().min(8);
    (1u64 << tz).max(4)
}

fn marker_name(prog: &Program, inlined: &crate::inlined::InlinedNames, k: MarkerKey) -> String {
    match k {
        MarkerKey::Inlined(n) => inlined.get(n).map(|r| r.0.clone()).unwrap_or_default(),
        MarkerKey::Function(f) | MarkerKey::Kernel(f) => prog.funcs[f].spec.name.clone(),
        MarkerKey::Barrier => "barrier".into(),
        MarkerKey::BarrierSignal => "barrier_signal".into(),
        MarkerKey::BarrierWait => "barrier_wait".into(),
        MarkerKey::VmemLoad => "vmem_load".into(),
        MarkerKey::VmemStore => "vmem_store".into(),
        MarkerKey::AddrTrace { func, inst, part } => {
            let f = &prog.funcs[func];
            let at = f.insts.get(inst).map_or(f.spec.start, |(a, _)| *a) - f.spec.start;
            let p = if part > 0 { "/2" } else { "" };
            format!("addr_trace@{}+{at:#x}{p}", f.spec.name)
        }
    }
}

/// SGPRs usable by code: s0..s101 on gfx9 (s102..s107 hold FLAT_SCRATCH, XNACK_MASK, VCC),
/// s0..s105 on gfx10+ (AMDGPUUsage / ISA manuals "SGPR allocation").
fn sgpr_limit(t: Target) -> u16 {
    match t.family() {
        Family::Gfx9 => 102,
        _ => 106,
    }
}

fn kind_name(k: SiteKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Rewrites one code object. `Ok` with `bytes: None` means the output must equal the input
/// (nothing to do, or failed closed: see the report, which carries per-feature coverage).
pub fn rewrite(input: &[u8], opts: &Options) -> Result<Outcome, RewriteError> {
    rewrite_timed(input, opts, &mut Timings::off())
}

/// [`rewrite`], recording the wall time and peak memory of each stage from load to encode in
/// `t` (`--timings`); the stage running on return is left open for the caller to end.
pub fn rewrite_timed(
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
) -> Result<Outcome, RewriteError> {
    let mut out = rewrite_object(input, opts, t)?;
    out.report.coverage = out.report.compute_coverage();
    Ok(out)
}

fn rewrite_object(input: &[u8], opts: &Options, t: &mut Timings) -> Result<Outcome, RewriteError> {
    t.begin(Stage::Load);
    opts.validate()?;
    let co = CodeObject::parse(input)?;
    if co.elf.header.e_type != 3 {
        return Err(RewriteError::NotLinked(co.elf.header.e_type));
    }
    if co.section(PATCH_SECTION).is_some() && !opts.force_reinstrument {
        return Err(RewriteError::AlreadyInstrumented);
    }
    let mut target = isa_target(&co)?;
    let text = co
        .text()
        .ok_or_else(|| hsaco::Error::NotFound(".text section".into()))?
        .clone();
    let text_bytes = co.section_data(&text).to_vec();
    let text_addr = text.addr;
    let text_end = text.addr + text_bytes.len() as u64;
    let mut report = Report {
        target: co.target.processor.clone(),
        status: Status::NothingToDo,
        reasons: Vec::new(),
        text_size_before: text_bytes.len() as u64,
        text_size_after: text_bytes.len() as u64,
        functions: Vec::new(),
        kernels: Vec::new(),
        skipped: Vec::new(),
        left_alone: Vec::new(),
        existing_markers: Vec::new(),
        funcmap_rows: 0,
        ids: BTreeMap::new(),
        inserted_sgprs: Vec::new(),
        dwarf_sections_remapped: 0,
        relaxed_branches: 0,
        notes: Vec::new(),
        coverage: Vec::new(),
        inlined: Default::default(),
    };
    if co.exec_sections().count() > 1 {
        report.status = Status::FailedClosed;
        report
            .reasons
            .push("more than one executable section".into());
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    let specs = function_specs(&co, text_addr, text_end);
    let codeless: Vec<&str> = co
        .kernels
        .iter()
        .filter(|k| k.entry == text_end)
        .map(|k| k.name.as_str())
        .collect();
    if !codeless.is_empty() {
        report.notes.push(format!(
            "{} kernel(s) have no code (entry at the end of .text, e.g. stubs compiled out for other targets) and are left alone: {}",
            codeless.len(),
            codeless.first().copied().unwrap_or_default()
        ) + if codeless.len() > 1 { ", ..." } else { "" });
    }
    // Funcmap rows are `<kind>:<id>:<name>` lines: a function needs a non-empty name without
    // control characters (seed spec "Funcmap format").
    let unnamed: Vec<String> = specs
        .iter()
        .filter(|s| s.name.is_empty() || s.name.chars().any(char::is_control))
        .map(|s| format!("function at {:#x} has no usable symbol name ({:?}): its funcmap row would be malformed", s.start, s.name))
        .collect();
    if !unnamed.is_empty() {
        report.status = Status::FailedClosed;
        report.reasons = unnamed;
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    t.begin(Stage::Decode);
    let decoded = crate::analysis::decode(target, &text_bytes, text_addr, specs.clone());
    t.begin(Stage::Analyse);
    let mut prog = crate::analysis::analyse_decoded(decoded);
    if matches!(
        target.family(),
        Family::Gfx11 | Family::Gfx12 | Family::Gfx1250
    ) && prog.funcs.iter().any(|f| !f.problems.is_empty())
    {
        let alt = analyse(
            target.with_true16(!target.true16()),
            &text_bytes,
            text_addr,
            specs,
        );
        let bad = |p: &Program| p.funcs.iter().filter(|f| !f.problems.is_empty()).count();
        if bad(&alt) < bad(&prog) {
            target = alt.target;
            prog = alt;
        }
    }
    // Whole-object safety: functions with problems are left alone when they can move verbatim.
    let verbatim = crate::verbatim::decide(&prog, text_end);
    report.reasons.extend(verbatim.fail.iter().cloned());
    report.left_alone = verbatim.left_alone.clone();
    let first_fn = prog.funcs.first().map_or(text_end, |f| f.spec.start);
    if first_fn > text_addr && !is_padding(&text_bytes[..(first_fn - text_addr) as usize], target) {
        report
            .reasons
            .push(format!("code before the first function at {text_addr:#x}"));
    }
    // Gaps between functions are copied verbatim, but the verifier decodes them as part of the
    // preceding function's region: a word that does not decode there fails closed here, with
    // its address, instead of producing an output the verifier must reject.
    for (k, f) in prog.funcs.iter().enumerate() {
        let gap_end = prog.funcs.get(k + 1).map_or(text_end, |n| n.spec.start);
        if verbatim.blocks[k] == Some(gap_end) {
            continue; // copied inside the function's verbatim block
        }
        let (lo, hi) = (
            (f.spec.end - text_addr) as usize,
            (gap_end - text_addr) as usize,
        );
        let Some(gap) = text_bytes.get(lo..hi) else {
            continue;
        };
        match amdgpu_isa::decode_all(gap, target) {
            Err(e) => report.reasons.push(format!(
                "undecodable word in the gap after {} at {:#x}: {}",
                f.spec.name,
                f.spec.end + e.offset as u64,
                e.kind
            )),
            // Damaged padding that decodes fails closed the same way (issue 17 item 7): a gap
            // that is not padding would be copied verbatim, and the verifier accepts only
            // padding after a function's end. Named: the first word that is not padding.
            Ok(insts) if !is_padding(gap, target) => {
                let mut at = f.spec.end;
                for i in &insts {
                    let pad = matches!(i.special(), Special::Nop | Special::CodeEnd)
                        || (0..i.len() / 4).all(|k| i.word(k) == 0);
                    if !pad {
                        report.reasons.push(format!(
                            "damaged padding in the gap after {} at {at:#x}: {} (padding is s_nop or s_code_end)",
                            f.spec.name,
                            i.mnemonic()
                        ));
                        break;
                    }
                    at += i.len() as u64;
                }
            }
            Ok(_) => {}
        }
    }
    if !report.reasons.is_empty() {
        report.status = Status::FailedClosed;
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    // Existing markers and funcmap: keep, never reuse their ids.
    let mut reserved: BTreeSet<u32> = BTreeSet::new();
    let existing_rows = co.funcmap().map(funcmap::parse).unwrap_or_default();
    for r in &existing_rows.rows {
        if let Some(id) = r.id() {
            reserved.insert(id);
        }
    }
    for f in &prog.funcs {
        let facts = crate::analysis::m0_facts(f);
        for (i, (a, inst)) in f.insts.iter().enumerate() {
            match inst.special() {
                Special::TtraceDataImm(v) => {
                    reserved.insert(u32::from(v) >> 2);
                    report.existing_markers.push(format!(
                        "{}+{:#x}: s_ttracedata_imm {v:#x}",
                        f.spec.name,
                        a - f.spec.start
                    ));
                }
                Special::TtraceData => match facts.constant[i] {
                    Some(v) => {
                        reserved.insert(v >> 2);
                        report.existing_markers.push(format!(
                            "{}+{:#x}: s_ttracedata m0={v:#x}",
                            f.spec.name,
                            a - f.spec.start
                        ));
                    }
                    None => report.existing_markers.push(format!(
                        "{}+{:#x}: s_ttracedata with an unknown M0 value",
                        f.spec.name,
                        a - f.spec.start
                    )),
                },
                _ => {}
            }
        }
    }
    t.begin(Stage::Instrument);
    // Sites and ids. A scope (function or kernel enter/exit) is all or nothing: when one of its
    // sites cannot be instrumented, all of them are dropped and reported, so markers stay balanced.
    let ok = vec![true; prog.funcs.len()];
    let (mut sites, mut skipped) = plan::collect_sites(&prog, &ok, opts);
    let inlined = crate::inlined::sites(
        &prog,
        &ok,
        opts,
        co.has_dwarf().then(|| debug_sections(&co)).as_ref(),
    );
    sites.extend(inlined.sites);
    report.inlined = inlined.report;
    // Address tracing: one block per qualifying operation, wave size from the descriptors.
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
    let wave = (waves.len() == 1)
        .then(|| waves.iter().copied().next())
        .flatten();
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
    let mut sgprs = SgprFacts::new(&prog, allocation_masks(&prog, &co));
    let caps: Vec<(usize, u32, u32)> = kernel_funcs(&prog, &co)
        .map(|(fi, k)| {
            let now = k.descriptor.registers(&co.target).arch_vgprs;
            (fi, now, vgpr_budget(&co, k))
        })
        .collect();
    let spill_vgpr = crate::regs::spill_vgprs(&prog, &caps);
    // Per function: VGPRs the lane saves of its snippets need allocated (highest spill VGPR + 1).
    let mut spill_need: Vec<u32> = vec![0; prog.funcs.len()];
    let scope = opts.scope.filter(|m| m.filters(target));
    let flags = match scope {
        Some(_) => scope_flags(&prog, &mut sgprs),
        None => vec![None; prog.funcs.len()],
    };
    // SGPRs inserted code writes, per function (flags, scratch, saves, island pairs).
    let mut used_by_func: Vec<Sgprs> = vec![0; prog.funcs.len()];
    let mut facts = BTreeMap::new();
    let scc_facts: Vec<Vec<bool>> = prog.funcs.iter().map(crate::analysis::scc_live).collect();
    // gfx12 shader-clock packing (seed spec "GFX12 Shader Clock Packing"): active on gfx12 and
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
    let scope_kinds = [
        SiteKind::FunctionEntry,
        SiteKind::FunctionExit,
        SiteKind::KernelEntry,
        SiteKind::KernelExit,
        SiteKind::InlinedEnter,
        SiteKind::InlinedExit,
    ];
    let (ids, snippets) = loop {
        let ids = plan::allocate_ids(&sites, &reserved);
        let mut snippets: Snippets = BTreeMap::new();
        let mut bad_scopes: BTreeSet<usize> = skipped
            .iter()
            .filter(|k| scope_kinds.contains(&k.kind))
            .filter_map(|k| prog.funcs.iter().position(|f| f.spec.name == k.function))
            .collect();
        let mut new_skips = Vec::new();
        for s in &sites {
            let Some(value) = plan::encode_word(s.word, &ids) else {
                continue;
            };
            let trace = match s.word {
                plan::Word::Point(k) => trace_ops.get(&k).copied(),
                _ => None,
            };
            let needs_m0 = packing.is_some()
                || trace.is_some()
                || !(target.has_ttracedata_imm() && value <= 0xff);
            let mut regs = site_regs(&prog, &mut sgprs, s.func, s.before, spill_vgpr[s.func]);
            let keep = if needs_m0 {
                plan::m0_keep_for(&prog, s.func, s.before, &mut regs, &mut facts)
            } else {
                Ok(M0Keep::Dead)
            };
            let scc_live = scc_facts[s.func].get(s.before).copied().unwrap_or(true);
            let guard = scope.map(|_| {
                flags[s.func].ok_or_else(|| {
                    "scope filtering: no SGPR is untouched by every function of this kernel call graph, so it has no scope flag".to_string()
                })
            });
            let code = keep.and_then(|k| {
                let flag = guard.clone().transpose()?;
                match (trace, wave) {
                    (Some(op), Some(w)) => {
                        trace_code(target, w, value, &op, k, flag, scc_live, &mut regs)
                    }
                    _ => site_code(target, value, k, packing, flag, scc_live, &mut regs),
                }
            });
            let code = code.and_then(|c| spilled(target, &regs, c));
            match code {
                Ok(code) => {
                    used_by_func[s.func] |= regs.used;
                    if let (Some(v), true) = (regs.vgpr, regs.spilled != 0) {
                        spill_need[s.func] = spill_need[s.func].max(u32::from(v) + 1);
                    }
                    snippets
                        .entry((s.func, s.before))
                        .or_default()
                        .push((*s, code))
                }
                Err(why) => {
                    if scope_kinds.contains(&s.kind) {
                        bad_scopes.insert(s.func);
                    }
                    new_skips.push(Skipped {
                        function: prog.funcs[s.func].spec.name.clone(),
                        addr: s.addr,
                        kind: s.kind,
                        why,
                    });
                }
            }
        }
        let dropped: Vec<Site> = sites
            .iter()
            .filter(|s| scope_kinds.contains(&s.kind) && bad_scopes.contains(&s.func))
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
                .filter(|k| scope_kinds.contains(&k.kind)),
        );
        sites.retain(|s| !(scope_kinds.contains(&s.kind) && bad_scopes.contains(&s.func)));
    };
    if ids.values().any(|&id| id >= 1 << 30) {
        report.status = Status::FailedClosed;
        report.reasons.push("more than 2^30 marker ids".into());
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    if let Some((bits, _)) = packing {
        if ids.values().any(|&id| u64::from(id) >= 1u64 << (30 - bits)) {
            report.status = Status::FailedClosed;
            report.reasons.push(format!(
                "marker ids do not fit the {}-bit id field left by shader-clock packing",
                30 - bits
            ));
            return Ok(Outcome {
                bytes: None,
                report,
            });
        }
    }
    let mut snippets = snippets;
    // Only ids some inserted snippet emits get funcmap rows (a skipped address-trace site must
    // not leave a P:/R: row behind).
    let mut ids = ids;
    let emitted: BTreeSet<MarkerKey> = snippets
        .values()
        .flatten()
        .filter_map(|(s, _)| match s.word {
            plan::Word::Enter(k) | plan::Word::Point(k) => Some(k),
            plan::Word::Exit => None,
        })
        .collect();
    ids.retain(|k, _| emitted.contains(k));
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
            (_, SiteKind::InlinedEnter | SiteKind::InlinedExit) => 2,
            _ => 3,
        });
    }
    // Scope filtering: every kernel computes the flag once at its entry, before any marker
    // (callees read it too, so kernels without markers of their own compute it as well).
    if let Some(masks) = scope {
        for (fi, f) in prog.funcs.iter().enumerate() {
            let Some(k) = f.spec.kernel.filter(|_| !verbatim.is_left_alone(fi)) else {
                continue;
            };
            let Some(flag) = flags[fi] else { continue };
            let entry = if k.preload {
                f.insts.iter().position(|(a, _)| *a == f.spec.start + 256)
            } else {
                Some(0)
            };
            let init = entry
                .ok_or_else(|| "no instruction at the kernarg-preload entry".to_string())
                .and_then(|e| {
                    let mut regs = site_regs(&prog, &mut sgprs, fi, e, spill_vgpr[fi]);
                    let tmp = regs.one("the scope check's scratch")?;
                    let code = crate::snippets::scope_init(target, &masks, flag, tmp)
                        .map_err(|x| x.to_string())?
                        .code;
                    let scc_live = scc_facts[fi].get(e).copied().unwrap_or(true);
                    let code = save_scc(target, code, scc_live, &mut regs)?;
                    let code = spilled(target, &regs, code)?;
                    if let (Some(v), true) = (regs.vgpr, regs.spilled != 0) {
                        spill_need[fi] = spill_need[fi].max(u32::from(v) + 1);
                    }
                    used_by_func[fi] |= regs.used | 1u128 << flag;
                    Ok((e, code))
                });
            match init {
                Ok((e, code)) => {
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
                        addr: f.insts.get(e).map_or(f.spec.start, |(a, _)| *a),
                    };
                    snippets.entry((fi, e)).or_default().insert(0, (site, code));
                }
                Err(why) => {
                    report.status = Status::FailedClosed;
                    report.reasons.push(format!(
                        "scope filtering: cannot compute the scope flag in kernel {}: {why}",
                        f.spec.name
                    ));
                    return Ok(Outcome {
                        bytes: None,
                        report,
                    });
                }
            }
        }
    }
    report.skipped = skipped;
    if snippets.is_empty() {
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    t.begin(Stage::LayOut);
    // Text plan; branches pushed out of simm16 range are relaxed through long-branch islands and
    // the layout is redone.
    let mut relax: BTreeMap<u64, Relaxed> = BTreeMap::new();
    let (mut tp, layout) = loop {
        let tp = text_plan(
            &prog,
            &snippets,
            &text_bytes,
            text_addr,
            text_end,
            target,
            &relax,
            &verbatim.blocks,
        );
        match lay_out(&tp, text_end) {
            Ok(l) => break (tp, l),
            Err(LayoutError::OutOfRange { at })
                if !relax.contains_key(&at) && relax.len() < 10_000 =>
            {
                match relaxable(&prog, &scc_facts, &mut sgprs, at, target) {
                    Ok(r) => {
                        if let Some(p) = r.pair {
                            used_by_func[r.func] |= 3u128 << p;
                        }
                        relax.insert(at, r);
                    }
                    Err(why) => {
                        report.status = Status::FailedClosed;
                        report.reasons.push(format!("branch at {at:#x} is out of range after insertion and cannot be relaxed: {why}"));
                        return Ok(Outcome {
                            bytes: None,
                            report,
                        });
                    }
                }
            }
            Err(e) => {
                report.status = Status::FailedClosed;
                report.reasons.push(e.to_string());
                return Ok(Outcome {
                    bytes: None,
                    report,
                });
            }
        }
    };
    report.relaxed_branches = relax.len();
    t.begin(Stage::Encode);
    // Edit the ELF.
    let mut ed = CodeObjectEditor::new(&co);
    let fail = |report: &mut Report, why: String| {
        report.status = Status::FailedClosed;
        report.reasons.push(why);
    };
    ed.set_text(layout.bytes.clone())?;
    let mut map: BTreeMap<u64, u64> = layout
        .placed
        .iter()
        .map(|p| (p.old, p.block_start))
        .collect();
    map.extend(crate::verbatim::address_pairs(&prog, &verbatim, |a| {
        layout.map_addr(a)
    }));
    ed.set_text_address_map(map);
    // Kernels without code sit at the end of `.text` (hsaco accepts them there): they stay at
    // its new end.
    let map_code = |a: u64| {
        layout
            .map_addr(a)
            .or_else(|| (a == text_end).then_some(layout.new_end))
    };
    for k in &co.kernels {
        if let Some(n) = map_code(k.entry) {
            ed.set_kernel_entry(&k.name, n)?;
        }
    }
    for s in &co.symbols {
        let sym = &s.symbol;
        // A symbol at the end of `.text` belongs to it only when defined in it (`_DYNAMIC` of the
        // next section can share the address).
        let at_end_of_other = sym.value == text_end && usize::from(sym.shndx) != text.index;
        if sym.value < text_addr
            || sym.value > text_end
            || at_end_of_other
            || sym.shndx == 0
            || sym.shndx >= 0xff00
        {
            continue;
        }
        let Some(nv) = map_code(sym.value) else {
            continue;
        };
        let size = if sym.size > 0 {
            layout
                .map_end(sym.value + sym.size, text_end)
                .map(|e| e - nv)
        } else {
            None
        };
        ed.set_symbol(sym.table, sym.index, Some(nv), size)?;
    }
    // Data targets of address builders move when `.text` outgrows its gap: map them and redo.
    let placement = ed.layout()?;
    if placement.map_address(text_addr) != text_addr {
        fail(
            &mut report,
            "the rewritten metadata note moves .text".into(),
        );
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    let mut layout = layout;
    if tp
        .pcrels
        .iter()
        .any(|p| p.use_kind == PcRelUse::Data && placement.map_address(p.target) != p.target)
    {
        for p in &mut tp.pcrels {
            if p.use_kind == PcRelUse::Data {
                p.target = placement.map_address(p.target);
            }
        }
        layout = match lay_out(&tp, text_end) {
            Ok(l) => l,
            Err(e) => {
                fail(&mut report, e.to_string());
                return Ok(Outcome {
                    bytes: None,
                    report,
                });
            }
        };
        ed.set_text(layout.bytes.clone())?;
    }
    // DWARF (the input's `.debug_*` sections, copied once for the remap and the locations).
    let dwarf = co.has_dwarf().then(|| debug_sections(&co));
    if let Some(sections) = &dwarf {
        let mut pairs: Vec<(u64, u64)> = layout
            .placed
            .iter()
            .map(|p| (p.old, p.block_start))
            .collect();
        for &(o, len, n) in &layout.raws {
            pairs.push((o, n));
            let _ = len;
        }
        // Function ends (DW_AT_high_pc, range ends) may fall on padding that the layout drops:
        // map each to the new end of its function.
        for f in &prog.funcs {
            if let Some(e) = layout.map_end(f.spec.end, text_end) {
                pairs.push((f.spec.end, e));
            }
        }
        pairs.sort();
        pairs.dedup_by_key(|p| p.0);
        pairs.retain(|p| p.0 < text_end);
        pairs.push((text_end, layout.new_end));
        // Alloc sections after .text move when it outgrows its gap: DWARF addresses of data
        // (variables) follow their section, offset preserved from the section start.
        for s in co
            .elf
            .sections
            .iter()
            .filter(|s| s.is_alloc() && s.addr > text_end)
        {
            pairs.push((s.addr, placement.map_address(s.addr)));
        }
        pairs.sort();
        pairs.dedup_by_key(|p| p.0);
        let amap = dwarf_remap::AddressMap::new(pairs)
            .map_err(|e| hsaco::Error::InvalidEdit(e.to_string()))
            .map(|m| m.with_identity_outside());
        let changed = amap.and_then(|m| {
            dwarf_remap::remap_dwarf(sections, &m)
                .map_err(|e| hsaco::Error::InvalidEdit(e.to_string()))
        });
        match changed {
            Ok(changed) => {
                report.dwarf_sections_remapped = changed.len();
                for (name, data) in changed {
                    let idx = ed.section_index(&name)?;
                    ed.set_section_data(idx, data)?;
                }
            }
            Err(e) => {
                fail(&mut report, format!("DWARF cannot be remapped: {e}"));
                return Ok(Outcome {
                    bytes: None,
                    report,
                });
            }
        }
    }
    // Descriptors: gfx11+ instruction prefetch follows the new code size.
    let gen = co.target.generation();
    for (fi, f) in prog.funcs.iter().enumerate() {
        let Some(k) = co.kernels.iter().find(|k| k.entry == f.spec.start) else {
            continue;
        };
        let _ = fi;
        if let Some(old) = k.descriptor.inst_pref_size(gen) {
            let new_start = layout.map_addr(f.spec.start).unwrap_or(f.spec.start);
            let new_end = layout.map_end(f.spec.end, text_end).unwrap_or(new_start);
            let old_lines = (f.spec.end - f.spec.start).div_ceil(128) as u32;
            if old == old_lines.min(old) && old != 0 {
                let mut kd = k.descriptor.clone();
                let max = if gen == hsaco::Generation::Gfx11 {
                    63
                } else {
                    255
                };
                kd.set_inst_pref_size(
                    gen,
                    ((new_end - new_start).div_ceil(128) as u32)
                        .min(max)
                        .max(old),
                );
                ed.set_kernel_descriptor(&k.name, &kd)?;
            }
        }
    }
    // Each kernel's metadata `.sgpr_count` (and on gfx9 its descriptor allocation) must cover
    // the SGPRs inserted code writes in it and every function it reaches; `.sgpr_count` counts
    // VCC, FLAT_SCRATCH and XNACK_MASK on gfx9 (the 6 extras).
    report.inserted_sgprs = members(used_by_func.iter().fold(0, |a, u| a | u)).collect();
    let extra = if target.family() == Family::Gfx9 {
        6
    } else {
        0
    };
    let need = sgprs_needed(&prog, &co, &used_by_func, extra);
    if let Err(why) = cover_reserved_sgprs(&co, input, &need, &mut ed) {
        report.status = Status::FailedClosed;
        report.reasons.push(why);
        return Ok(Outcome {
            bytes: None,
            report,
        });
    }
    // Funcmap and the run record.
    let mut rows = existing_rows.rows.clone();
    let locs = dwarf.as_ref().map(function_locs).unwrap_or_default();
    for k in &co.kernels {
        if !rows
            .iter()
            .any(|r| matches!(r, Row::Kernel { name, .. } if *name == k.name))
        {
            rows.push(Row::Kernel {
                name: k.name.clone(),
                loc: locs.get(&k.name).cloned().filter(|l| !l.contains('@')),
            });
        }
    }
    let traced_ids = ids.keys().any(|k| matches!(k, MarkerKey::AddrTrace { .. }));
    // Inline-chain index of the input's DWARF (`None` when it cannot be parsed: address-trace
    // rows then carry no location, which the funcmap format allows).
    let op_locs = dwarf
        .as_ref()
        .filter(|_| traced_ids)
        .and_then(|d| dwarf_remap::LocationIndex::new(d).ok());
    if let (true, Some(w)) = (traced_ids, wave) {
        rows.retain(|r| !matches!(r, Row::WaveSize(_)));
        rows.push(Row::WaveSize(w));
    }
    for (&k, &id) in &ids {
        let name = marker_name(&prog, &inlined.names, k);
        report.ids.insert(name.clone(), id);
        if let (MarkerKey::AddrTrace { func, inst, .. }, Some(op), Some(w)) =
            (k, trace_ops.get(&k), wave)
        {
            let addr = prog.funcs[func].insts.get(inst).map(|(a, _)| *a);
            let loc = match (&op_locs, addr) {
                (Some(ix), Some(a)) => {
                    let chain = ix.chain(a);
                    (!chain.is_empty()).then(|| dwarf_remap::render_chain(&chain))
                }
                _ => None,
            };
            rows.push(Row::Point {
                id,
                name: crate::snippets::trace_name(op.kind).to_string(),
                loc,
            });
            rows.push(Row::Payload {
                id,
                count: crate::snippets::payload_count(w, &op.src),
            });
            continue;
        }
        rows.push(match k {
            // Kernel scopes are a post-link extra: a user scope named after the kernel (the
            // kernel itself keeps its K: row; F: rows are for device functions).
            MarkerKey::Kernel(_) => Row::User { id, name },
            MarkerKey::Inlined(n) => Row::Function {
                id,
                loc: inlined.names.get(n).and_then(|r| r.1.clone()),
                name,
            },
            MarkerKey::Function(_) => Row::Function {
                id,
                loc: locs.get(&name).cloned().filter(|l| !l.contains('@')),
                name,
            },
            _ => Row::Point {
                id,
                name,
                loc: None,
            },
        });
    }
    if let Some((bits, shift)) = packing {
        rows.retain(|r| !matches!(r, Row::Encoding(_)));
        rows.push(Row::Encoding(format!(
            "shader_clock_bits={bits};shader_clock_shift={shift}"
        )));
    }
    report.funcmap_rows = rows.len();
    ed.add_or_replace_section(FUNCMAP_SECTION, 1, 0, 1, funcmap::render(&rows))?;
    let record = serde_json::json!({
        "tool": "sqtt-patch",
        "version": env!("CARGO_PKG_VERSION"),
        "options": format!("{opts:?}"),
    });
    ed.add_or_replace_section(PATCH_SECTION, 1, 0, 1, format!("{record}\n").into_bytes())?;
    let sgpr_need = if target.family() == Family::Gfx9 {
        need
    } else {
        BTreeMap::new()
    };
    let vgpr_need: BTreeMap<String, u32> = kernel_funcs(&prog, &co)
        .map(|(fi, k)| {
            let v = prog.reachable(fi).iter().map(|&g| spill_need[g]).max();
            (k.name.clone(), v.unwrap_or(0))
        })
        .collect();
    let bumped = bump_registers(&co, &mut ed, &sgpr_need, &vgpr_need)?;
    let bytes = ed.write()?;
    // Report.
    fill_function_reports(&mut report, &prog, &layout, &snippets, &ids, text_end);
    fill_kernel_reports(&mut report, &co, &prog);
    for (name, after, waves) in bumped {
        if let Some(kr) = report.kernels.iter_mut().find(|r| r.name == name) {
            kr.sgprs_after = after;
            kr.occupancy_after = waves;
        }
    }
    report.text_size_after = layout.bytes.len() as u64;
    report.status = Status::Instrumented;
    Ok(Outcome {
        bytes: Some(bytes),
        report,
    })
}

/// The input's `.debug_*` sections by name.
fn debug_sections(co: &CodeObject) -> HashMap<String, Vec<u8>> {
    co.elf
        .sections
        .iter()
        .filter(|s| s.name.starts_with(".debug_"))
        .map(|s| (s.name.clone(), co.section_data(s).to_vec()))
        .collect()
}

/// `file:line` of every function's definition, by name.
fn function_locs(sections: &HashMap<String, Vec<u8>>) -> HashMap<String, String> {
    dwarf_remap::function_locations(sections)
        .map(|m| m.into_iter().map(|(k, v)| (k, v.to_string())).collect())
        .unwrap_or_default()
}

type Snippets = BTreeMap<(usize, usize), Vec<(Site, Vec<amdgpu_isa::Instruction>)>>;

fn fill_function_reports(
    report: &mut Report,
    prog: &Program,
    layout: &Layout,
    snippets: &Snippets,
    ids: &BTreeMap<MarkerKey, u32>,
    text_end: u64,
) {
    for (fi, f) in prog.funcs.iter().enumerate() {
        let mut fr = FunctionReport {
            name: f.spec.name.clone(),
            kernel: f.spec.kernel.is_some(),
            address: f.spec.start,
            size: f.spec.end - f.spec.start,
            new_size: 0,
            sites: BTreeMap::new(),
            inserted_instructions: 0,
            inserted_bytes: 0,
            scope_id: ids
                .get(&MarkerKey::Function(fi))
                .or_else(|| ids.get(&MarkerKey::Kernel(fi)))
                .copied(),
        };
        let ns = layout.map_addr(f.spec.start).unwrap_or(0);
        fr.new_size = layout.map_end(f.spec.end, text_end).unwrap_or(ns) - ns;
        for ((sf, _), list) in snippets.range((fi, 0)..(fi + 1, 0)) {
            let _ = sf;
            for (s, code) in list {
                *fr.sites.entry(kind_name(s.kind)).or_default() += 1;
                fr.inserted_instructions += code.len() as u32;
                fr.inserted_bytes += code.iter().map(|c| c.len() as u32).sum::<u32>();
            }
        }
        report.functions.push(fr);
    }
}

fn fill_kernel_reports(report: &mut Report, co: &CodeObject, prog: &Program) {
    for k in &co.kernels {
        let Some(fi) = prog.funcs.iter().position(|f| f.spec.start == k.entry) else {
            continue;
        };
        let regs = k.descriptor.registers(&co.target);
        let lds = k.descriptor.group_segment_fixed_size;
        let occ = hsaco::kd::occupancy(
            &co.target,
            regs.wave32,
            regs.vgprs_allocated,
            regs.sgprs.unwrap_or(0),
            lds,
        );
        let reach = prog.reachable(fi);
        let inserted = report
            .functions
            .iter()
            .enumerate()
            .filter(|(i, _)| reach.contains(i))
            .map(|(_, f)| f.inserted_instructions)
            .sum();
        report.kernels.push(KernelReport {
            name: k.name.clone(),
            wave_size: k.descriptor.wave_size(),
            sgprs_before: regs.sgprs,
            sgprs_after: regs.sgprs,
            vgprs: regs.vgprs_allocated,
            occupancy_before: occ.waves_per_simd,
            occupancy_after: occ.waves_per_simd,
            inserted_instructions_reachable: inserted,
        });
    }
}

/// Builds the output order of `.text`: each function re-aligned, snippets in front of their
/// instructions, relaxed branches and branches with a landing block followed by their island
/// ([`Piece::Island`]);
/// left-alone functions (`verbatim[fi] = Some(end)`) as one raw block `[start, end)`.
#[allow(clippy::too_many_arguments)]
fn text_plan(
    prog: &Program,
    snippets: &Snippets,
    text_bytes: &[u8],
    text_addr: u64,
    text_end: u64,
    target: Target,
    relax: &BTreeMap<u64, Relaxed>,
    verbatim: &[Option<u64>],
) -> TextPlan {
    let mut tp = TextPlan {
        text_addr,
        pieces: Vec::new(),
        pcrels: prog.pcrels.clone(),
    };
    let mut cursor = text_addr;
    if let Some(first) = prog.funcs.first() {
        if first.spec.start > text_addr {
            // Leading padding (older compilers put `s_code_end` words first): kept verbatim.
            tp.pieces.push(Piece::Raw {
                addr: text_addr,
                bytes: text_bytes[..(first.spec.start - text_addr) as usize].to_vec(),
            });
            cursor = first.spec.start;
        }
    }
    let mut islands = 0usize;
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.spec.start > cursor {
            let gap =
                &text_bytes[(cursor - text_addr) as usize..(f.spec.start - text_addr) as usize];
            if !is_padding(gap, target) {
                tp.pieces.push(Piece::Align(alignment_of(cursor, false)));
                tp.pieces.push(Piece::Raw {
                    addr: cursor,
                    bytes: gap.to_vec(),
                });
            }
        }
        tp.pieces.push(Piece::Align(alignment_of(
            f.spec.start,
            f.spec.kernel.is_some(),
        )));
        if let Some(end) = verbatim.get(fi).copied().flatten() {
            // Left alone: one verbatim block (crate::verbatim).
            tp.pieces.push(Piece::Raw {
                addr: f.spec.start,
                bytes: text_bytes[(f.spec.start - text_addr) as usize..(end - text_addr) as usize]
                    .to_vec(),
            });
            cursor = end;
            continue;
        }
        // Landing blocks: the markers of a branch edge, by branch (the sites of point `k`
        // marked `Landing::Edge(p)` belong to the edge from `p` into `k`).
        let mut edges: BTreeMap<usize, (u64, Vec<Instruction>)> = BTreeMap::new();
        for ((_, k), list) in snippets.range((fi, 0)..(fi + 1, 0)) {
            for (s, code) in list {
                if let Landing::Edge(p) = s.landing {
                    let e = edges.entry(p).or_insert((f.insts[*k].0, Vec::new()));
                    e.1.extend_from_slice(code);
                }
            }
        }
        for (i, (a, inst)) in f.insts.iter().enumerate() {
            if let Some(list) = snippets.get(&(fi, i)) {
                for (s, code) in list {
                    if matches!(s.landing, Landing::Edge(_)) {
                        continue;
                    }
                    for c in code {
                        tp.pieces.push(Piece::Insert {
                            inst: *c,
                            landing: s.landing,
                        });
                    }
                }
            }
            let edge = edges.remove(&i);
            match (relax.get(a), f.relocs[i]) {
                (r, Reloc::Branch { target: t }) if r.is_some() || edge.is_some() => {
                    tp.pieces.push(Piece::Orig {
                        addr: *a,
                        inst: *inst,
                        reloc: Reloc::ToIsland { island: islands },
                    });
                    tp.pieces.push(Piece::Island {
                        from: *a,
                        target: edge.as_ref().map_or(t, |e| e.0),
                        markers: edge.map(|e| e.1).unwrap_or_default(),
                        long: r.is_some(),
                        pair: r.and_then(|r| r.pair).unwrap_or(0),
                        isa: target,
                        skip: matches!(inst.flow(), amdgpu_isa::Flow::Branch { conditional: true }),
                    });
                    islands += 1;
                }
                _ => tp.pieces.push(Piece::Orig {
                    addr: *a,
                    inst: *inst,
                    reloc: f.relocs[i],
                }),
            }
        }
        cursor = f.spec.end;
    }
    if cursor < text_end {
        tp.pieces.push(Piece::Raw {
            addr: cursor,
            bytes: text_bytes[(cursor - text_addr) as usize..].to_vec(),
        });
    }
    tp
}

/// A branch relaxed through a long-branch island.
#[derive(Debug, Clone, Copy)]
struct Relaxed {
    /// Function of the branch (index into [`Program::funcs`]).
    func: usize,
    /// Even-aligned SGPR pair the island clobbers (`None` on gfx1250: `s_add_pc_i64`).
    pair: Option<u8>,
}

/// Whether the branch at original address `at` can be relaxed: an SGPR pair is free at its
/// target, where the island jumps (not needed on gfx1250), and SCC is dead there (the island's
/// adds clobber SCC; gfx1250's `s_add_pc_i64` does not).
fn relaxable(
    prog: &Program,
    scc: &[Vec<bool>],
    sgprs: &mut SgprFacts,
    at: u64,
    target: Target,
) -> Result<Relaxed, String> {
    for (fi, f) in prog.funcs.iter().enumerate() {
        let Some(i) = f.insts.iter().position(|(a, _)| *a == at) else {
            continue;
        };
        let inst = f.insts[i].1;
        let Reloc::Branch { target: t } = f.relocs[i] else {
            return Err(format!("{} is not a SOPP branch", inst.mnemonic()));
        };
        if !crate::layout::may_add_branches(target) {
            return Err("long branches on gfx1010-gfx1013 would need LDS/VMEM hazard waits (not implemented)".into());
        }
        let mut pair = None;
        if target.family() != Family::Gfx1250 {
            let ti = f
                .insts
                .iter()
                .position(|(a, _)| *a == t)
                .ok_or("target is not an instruction")?;
            if scc[fi][ti] {
                return Err(
                    "SCC is live at the branch target (the long branch clobbers it)".into(),
                );
            }
            pair = Some(SiteRegs::new(sgprs.free_at(prog, fi, ti)).pair("a long branch")?);
        }
        return Ok(Relaxed { func: fi, pair });
    }
    Err("not an instruction of any function".into())
}

/// The register allocator of a snippet in front of instruction `i` of function `fi`: the SGPRs
/// free there, and with a spill VGPR `vgpr` the savable live SGPRs ([`SgprFacts::savable_at`])
/// except those instruction `i` reads (a snippet may read the operands of the instruction it
/// traces, so they keep their values throughout).
fn site_regs(
    prog: &Program,
    sgprs: &mut SgprFacts,
    fi: usize,
    i: usize,
    vgpr: Option<u16>,
) -> SiteRegs {
    let free = sgprs.free_at(prog, fi, i);
    let inputs = prog.funcs[fi]
        .insts
        .get(i)
        .map_or(ALL_SGPRS, |(_, x)| crate::regs::sgpr_reads(x));
    SiteRegs::with_spill(free, sgprs.savable_at(prog, fi, i) & !inputs, vgpr)
}

/// `code` with the live SGPRs `regs` handed out saved before it and restored after it
/// ([`crate::snippets::spill_wrap`]); unchanged when none was.
fn spilled(
    t: Target,
    regs: &SiteRegs,
    code: Vec<amdgpu_isa::Instruction>,
) -> Result<Vec<amdgpu_isa::Instruction>, String> {
    match regs.vgpr {
        Some(v) if regs.spilled != 0 => {
            crate::snippets::spill_wrap(t, v, regs.spilled, code).map_err(|x| x.to_string())
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

/// The instructions of one address-trace block (seed spec "Address Tracing", "Framing
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

/// Grows each kernel's granulated SGPR count (gfx9; descriptor) so that its allocation covers
/// `sgprs[kernel]` SGPRs (highest SGPR inserted code writes in its call graph + 1 + 6 extras),
/// and its granulated VGPR count so that it covers `vgprs[kernel]` VGPRs (the VGPR whose lanes
/// hold saved SGPRs + 1). [`allocation_masks`] only hands out SGPRs within
/// [`gfx9_sgpr_budget`] and [`crate::regs::spill_vgprs`] only VGPRs within [`vgpr_budget`], so
/// occupancy never drops. Returns the kernels changed with their new SGPR allocation and waves
/// per SIMD (recomputed from the new descriptor, so the report shows what the hardware will do).
fn bump_registers(
    co: &CodeObject,
    ed: &mut CodeObjectEditor,
    sgprs: &BTreeMap<String, u32>,
    vgprs: &BTreeMap<String, u32>,
) -> Result<Vec<(String, Option<u32>, u32)>, RewriteError> {
    let mut changed = Vec::new();
    for k in &co.kernels {
        let regs = k.descriptor.registers(&co.target);
        let want_s = sgprs.get(&k.name).copied().unwrap_or(0);
        let want_v = vgprs.get(&k.name).copied().unwrap_or(0);
        let grow_s = regs.sgprs.is_some_and(|now| want_s > now);
        let grow_v = want_v > regs.vgprs_allocated;
        if !grow_s && !grow_v {
            continue;
        }
        let mut kd = k.descriptor.clone();
        if grow_s {
            kd.set_granulated_sgpr_count(hsaco::kd::sgprs_to_granules(&co.target, want_s));
        }
        if grow_v {
            kd.set_granulated_vgpr_count(hsaco::kd::vgprs_to_granules(
                &co.target,
                regs.wave32,
                want_v,
            ));
        }
        ed.set_kernel_descriptor(&k.name, &kd)?;
        let regs = kd.registers(&co.target);
        let occ = hsaco::kd::occupancy(
            &co.target,
            regs.wave32,
            regs.vgprs_allocated,
            regs.sgprs.unwrap_or(0),
            kd.group_segment_fixed_size,
        );
        changed.push((k.name.clone(), regs.sgprs, occ.waves_per_simd));
    }
    Ok(changed)
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

/// Every code-object kernel with the index of its function in `prog` (several kernels may share
/// one entry when the linker folded identical code).
fn kernel_funcs<'a>(
    prog: &'a Program,
    co: &'a CodeObject,
) -> impl Iterator<Item = (usize, &'a hsaco::Kernel)> + 'a {
    co.kernels.iter().filter_map(|k| {
        prog.funcs
            .iter()
            .position(|f| f.spec.kernel.is_some() && f.spec.start == k.entry)
            .map(|fi| (fi, k))
    })
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
                let avoid: Sgprs = f
                    .insts
                    .iter()
                    .filter(|(_, i)| vmem_hazard && i.memory().is_some())
                    .fold(0, |a, (_, i)| a | i.reads().sgpr_bits());
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

/// The scope-filter flag SGPR of each function (issue 12 item 4; seed spec "Scope filtering":
/// computed once at kernel entry, read by every marker). Kernels that reach a common function
/// form one call graph and share one flag: the lowest SGPR that no function of the call graph
/// touches and that every one of them may use. Functions no kernel reaches form their own call
/// graph. `None` for the functions of a call graph without such an SGPR. Every flag is then
/// withheld from the scratch registers of every function.
fn scope_flags(prog: &Program, sgprs: &mut SgprFacts) -> Vec<Option<u8>> {
    let n = prog.funcs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for (fi, f) in prog.funcs.iter().enumerate() {
        if f.spec.kernel.is_none() {
            continue;
        }
        for g in prog.reachable(fi) {
            let (a, b) = (root(&mut parent, fi), root(&mut parent, g));
            parent[a] = b;
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
    let flags: Vec<Option<u8>> = (0..n)
        .map(|fi| flag_of.get(&root(&mut parent, fi)).copied())
        .collect();
    sgprs.forbid(flags.iter().flatten().fold(0, |a, &r| a | 1u128 << r));
    flags
}

/// SGPR count each kernel needs: the highest SGPR inserted code writes in the kernel or any
/// function it reaches, plus one, plus `extra` (6 on gfx9: VCC, FLAT_SCRATCH, XNACK_MASK).
/// Kernels whose call graph got no inserted SGPR are absent.
fn sgprs_needed(
    prog: &Program,
    co: &CodeObject,
    used: &[Sgprs],
    extra: u32,
) -> BTreeMap<String, u32> {
    kernel_funcs(prog, co)
        .filter_map(|(fi, k)| {
            let u = prog.reachable(fi).into_iter().fold(0, |a, g| a | used[g]);
            (u != 0).then(|| (k.name.clone(), 128 - u.leading_zeros() + extra))
        })
        .collect()
}
