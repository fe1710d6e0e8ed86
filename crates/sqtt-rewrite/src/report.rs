//! The report and errors of one rewrite, and the names of the sections an output carries: the
//! types every stage of [`crate::pipeline`] fills and the driver ([`crate::rewrite`]) returns.
//! They sit below the stages and the driver and import neither.

use crate::plan::{SiteKind, Skipped};
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Name of the non-alloc section that records that (and how) sqtt-patch rewrote an object.
pub const PATCH_SECTION: &str = ".sqtt_patch";
/// Name of the executable section of the new segment that holds the instrumented functions
/// when `.text` is kept in place (a function in it cannot move: docs/left-alone.md).
pub const KEPT_TEXT_SECTION: &str = ".sqtt_text";

/// Errors that stop the run for this input (bad input or an internal inconsistency).
#[derive(Debug, Error)]
pub enum RewriteError {
    /// The input is not a usable code object.
    #[error(transparent)]
    Input(#[from] hsaco::Error),
    /// The processor is not supported by our ISA tables.
    #[error("unsupported target {0}")]
    Target(String),
    /// The input already carries sqtt-patch instrumentation: the named section holds our run
    /// record (`.sqtt_patch`, or a section renamed from it, recognised by its content).
    #[error("already instrumented by sqtt-patch (section {0}); pass --force to instrument again")]
    AlreadyInstrumented(String),
    /// Invalid options.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Not a linked code object: `e_type` is not `ET_DYN` (AMDGPUUsage "ELF Header": code
    /// objects are shared objects; a relocatable `.o` still needs `ld.lld -shared`).
    #[error("e_type {0} is not ET_DYN (3): only linked code objects can be rewritten; link a relocatable .o with ld.lld -shared first")]
    NotLinked(u16),
    /// A code object whose parts contradict each other in a way the container parser does not
    /// check: a `.sqtt_funcmap` with a bad row or an id declared twice, a `.text` without bytes
    /// in the file (`SHT_NOBITS`). The text names the section, the row or kernel, and the offset.
    #[error("malformed code object: {0}")]
    Malformed(String),
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
    /// VGPRs allocated before.
    pub vgprs: u32,
    /// VGPRs allocated after: more than `vgprs` when inserted code needs a spill VGPR beyond
    /// the allocation (the descriptor and the note's `.vgpr_count` grow with it).
    pub vgprs_after: u32,
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
    /// `.text` size after (bytes); when `text_kept_in_place`, the size of the new code section
    /// ([`KEPT_TEXT_SECTION`]) and `.text` keeps `text_size_before`.
    pub text_size_after: u64,
    /// Functions, by address.
    pub functions: Vec<FunctionReport>,
    /// Kernels.
    pub kernels: Vec<KernelReport>,
    /// Sites that could not be instrumented.
    pub skipped: Vec<Skipped>,
    /// Functions not instrumented and copied verbatim (moved as one block), or kept at their
    /// address when `text_kept_in_place`, with the reason.
    pub left_alone: Vec<crate::verbatim::LeftAlone>,
    /// `.text` stays where it is and the instrumented functions are in a new segment
    /// ([`KEPT_TEXT_SECTION`]; docs/left-alone.md). In the JSON report only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub text_kept_in_place: bool,
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
    /// Warnings for the user, one sentence each: requested options that do not apply to this
    /// target and were not used (e.g. shader-clock packing on gfx9-gfx11), DWARF that cannot be
    /// read.
    pub notes: Vec<String>,
    /// Sites instrumented and found per feature (issue 12 item 6), for the features whose sites
    /// were looked for. A code object that failed closed after its sites were found counts them
    /// all as found and none as instrumented; one that failed closed before has none.
    pub coverage: Vec<Coverage>,
    /// Inlined functions as scopes (`--functions`, from DWARF; [`crate::inlined`]).
    pub inlined: crate::inlined::InlinedReport,
    /// Loops as scopes (`--loops`; [`crate::loops`]); absent when not asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loops: Option<crate::inlined::LoopReport>,
    /// User-named regions and points (`--region`, `--point`; [`crate::regions`]); absent when
    /// none was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regions: Option<crate::inlined::RegionReport>,
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
    /// Of the skipped sites, those inside device functions nothing can enter (local or hidden,
    /// never called, address never taken: [`crate::callers::UNREACHABLE`]), count of sites;
    /// also left out of the coverage of code that can run.
    pub in_unreachable: u64,
}

impl Coverage {
    /// No sites of `feature` yet.
    pub fn empty(feature: &'static str) -> Coverage {
        Coverage {
            feature,
            instrumented: 0,
            found: 0,
            in_stubs: 0,
            in_unreachable: 0,
        }
    }

    /// Counts `n` skipped sites whose reason is `why`: found, and in stubs or in unreachable
    /// functions when the reason says so.
    pub fn add_skipped(&mut self, why: &str, n: u64) {
        self.found += n;
        if why.starts_with(crate::verbatim::STUB_SKIP) {
            self.in_stubs += n;
        } else if why.starts_with(crate::callers::UNREACHABLE) {
            self.in_unreachable += n;
        }
    }

    /// Sites that cannot run: in compiled-out stubs or in unreachable functions.
    pub fn cannot_run(&self) -> u64 {
        self.in_stubs + self.in_unreachable
    }

    /// Percent of the sites in code that can run that were instrumented (100 when there are none).
    pub fn percent_runnable(&self) -> f64 {
        let runnable = self.found.saturating_sub(self.cannot_run());
        if runnable == 0 {
            100.0
        } else {
            100.0 * self.instrumented as f64 / runnable as f64
        }
    }
}

impl Report {
    /// The report of a code object for processor `target` whose `.text` has `text_size` bytes,
    /// before any stage ran: nothing to do, nothing found.
    pub fn new(target: String, text_size: u64) -> Report {
        Report {
            target,
            status: Status::NothingToDo,
            reasons: Vec::new(),
            text_size_before: text_size,
            text_size_after: text_size,
            functions: Vec::new(),
            kernels: Vec::new(),
            skipped: Vec::new(),
            left_alone: Vec::new(),
            text_kept_in_place: false,
            existing_markers: Vec::new(),
            funcmap_rows: 0,
            ids: BTreeMap::new(),
            inserted_sgprs: Vec::new(),
            dwarf_sections_remapped: 0,
            relaxed_branches: 0,
            notes: Vec::new(),
            coverage: Vec::new(),
            inlined: Default::default(),
            loops: None,
            regions: None,
        }
    }

    /// Per-feature coverage from the per-function site counts and the skipped sites.
    pub(crate) fn compute_coverage(&self) -> Vec<Coverage> {
        let sites = self
            .functions
            .iter()
            .flat_map(|f| &f.sites)
            .filter_map(|(kind, &n)| Some((SiteKind::feature_of_name(kind)?, u64::from(n))));
        coverage(sites, &self.skipped, true)
    }
}

/// Per-feature coverage of `sites` (feature, count of sites) and the `skipped` sites; `sites`
/// count as instrumented when `instrumented`, else as found only (the sites of an object that
/// failed closed after they were found).
pub(crate) fn coverage(
    sites: impl Iterator<Item = (&'static str, u64)>,
    skipped: &[Skipped],
    instrumented: bool,
) -> Vec<Coverage> {
    let mut by: BTreeMap<&'static str, Coverage> = BTreeMap::new();
    for (feat, n) in sites {
        let c = by.entry(feat).or_insert_with(|| Coverage::empty(feat));
        if instrumented {
            c.instrumented += n;
        }
        c.found += n;
    }
    for sk in skipped {
        if let Some(feat) = sk.kind.feature() {
            by.entry(feat)
                .or_insert_with(|| Coverage::empty(feat))
                .add_skipped(&sk.why, 1);
        }
    }
    by.into_values().collect()
}
