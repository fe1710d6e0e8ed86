//! `sqtt-verify`: an independent translation validator for the outputs of `sqtt-patch`.
//!
//! [`verify`] compares an ORIGINAL code object with its REWRITTEN (instrumented) version and
//! reports every way the rewrite could change the program's behaviour, following the
//! "Verification of every output" rules of `docs/background/rewriting.md` and the marker rules of the
//! spec ("Marker Encoding", "Funcmap format", "Function entry/exit markers"). It only reads
//! the two files: it does not use the rewriter, so a rewriter bug cannot hide itself.
//!
//! Checks (each [`Finding`] carries its [`Check`]):
//! 1. [`Check::Header`], [`Check::Functions`], [`Check::Sections`]: same target/`e_flags`, same
//!    kernels and device functions, identical non-text sections except the ones a rewrite may edit,
//!    and exactly one non-allocated `.sqtt_patch` run record (unless the files are identical).
//! 2. [`Check::Alignment`], [`Check::Inserted`], [`Check::Decode`], [`Check::Padding`]: every
//!    original instruction appears in order with identical bytes (PC-relative fields excepted);
//!    inserted instructions are whitelisted, touch no memory and write only M0 / the reserved SGPR.
//! 3. [`Check::Branch`]: relocated branches, calls and `s_getpc` address builders reach the mapped
//!    targets.
//! 4. [`Check::M0`], [`Check::Scc`]: M0 and SCC are dead or restored after every inserted run;
//!    wait state before `s_ttracedata`.
//!
//! Inserted runs ("instrumentation regions") may hold, besides the simple marker snippets,
//! SALU instructions, `s_getreg_b32` of HW_ID / HW_ID1 / HW_ID2 / SHADER_CYCLES,
//! `s_get_shader_cycles_u64`, `v_readlane_b32`, hazard waits and branches that stay inside the
//! run (address-trace blocks, scope checks, gfx12 clock packing: spec "Address Tracing",
//! "Scope filtering", "GFX12 Shader Clock Packing"). They may write only SGPRs no original
//! instruction uses, M0 and SCC. Each run is EXECUTED on the `sqtt-interp` model wave from every
//! entry with random register states (and the scope flag 0 and 1): it must fall through to its
//! end within a step bound, leave everything but reserved SGPRs / M0 / SCC unchanged, and emit a
//! shaderdata stream framed by the funcmap (`R:` payload counts, address-trace EXEC words,
//! packed clock field with an `M:` row, nothing when the scope flag is 0).
//! 5. [`Check::Markers`], [`Check::Funcmap`]: marker words have funcmap rows of the kind their
//!    site needs (the row names what stands there: `sites`); F-row functions have balanced
//!    enter/exit markers on every path; `W:` / `R:` / `M:` rows and `addr_trace_*` names are
//!    consistent.
//! 6. [`Check::Descriptor`], [`Check::Metadata`]: kernel descriptors and metadata note (every
//!    key unchanged except `.sgpr_count` / `.vgpr_count`, which may grow within the descriptor's
//!    allocation, and `.sgpr_count` not past the SGPRs the target can have). A segment size in
//!    the note that disagrees with the descriptor is a finding unless the input had the same
//!    disagreement, with the same values: then it is one of the report's `warnings`.
//! 7. [`Check::Symbols`], [`Check::Relocations`]: symbol values/sizes and `R_AMDGPU_RELATIVE64`
//!    addends follow the moved code.
//! 8. [`Check::Dwarf`]: `.debug_line` gives every original instruction the same source position
//!    (unit, file, line, column) at its new address as at its old one.
//! 9. [`Check::Segments`]: every program header loads the same sections the same way
//!    (type, permissions, alignment, the sections in its memory and file images).
//! 10. [`Check::Verbatim`]: a function whose execution can fall off its end (its last
//!    instruction falls through, e.g. a compiled-out "trampoline" stub kernel) is copied
//!    byte for byte with the bytes that followed it, and is followed by the same function.
//!
//! # Module map
//!
//! Data flows one way. [`verify_parsed`] (this file, the driver) builds the shared facts once
//! (`program::Program::build`, which also reports the alignment, decode and padding findings),
//! runs every check on them and collects the findings in a fixed order. Each check module
//! imports `program` (and the `funcmap` parser) and no other check; a check's own helpers are
//! its submodules.
//! Two results pass from one check to another, always through the driver: `funcmap_rows`
//! returns the `FuncmapInfo` (a `program` type) that `flow` reads, and `flow` returns per kernel
//! the highest SGPR inserted code writes, which the driver hands to `metadata` as a number to
//! check `.sgpr_count` against.
//!
//! ```text
//! lib.rs (driver)
//!   |-- calls --> header  sections  segments  symbols  descriptors  metadata
//!   |             funcmap_rows  dwarfcheck  verbatim  hazard  flow/
//!   |             (the checks: none imports another)
//!   |                  |
//!   |                  | read
//!   |                  v
//!   '-- builds --> program/ (shared facts) --> funcmap (public parser)
//! ```
//!
//! | module | holds | imports |
//! |---|---|---|
//! | `program/mod.rs` | `Program` and its `build`: functions of both objects, decoded and aligned; `kernel_pairs` | its submodules |
//! | `program/text.rs` | `Text` (a text section), `KEPT_TEXT_SECTION`, `counterpart` | - |
//! | `program/regs.rs` | `Regs` (registers per instruction, decoded once), SGPR masks, the interning hasher | `insn` |
//! | `program/func.rs` | `Func`, `OInst`, `NInst`, `Slot`: one function and where its instructions went | `builder`, `insn`, `regs`, `text`; `prepare` (tests) |
//! | `program/prepare.rs` | decoding one original function and interning its shapes | `align`, `builder`, `func`, `insn`, `noreturn`, `regs`, `text` |
//! | `program/align.rs` | aligning an original body against its rewritten region | `func`, `insn`, `landing` |
//! | `program/landing.rs` | landing blocks and long-branch islands in inserted code | `func`, `regs`, `mod` |
//! | `program/insn.rs` | whitelist classes of inserted instructions, marker words | `regs` |
//! | `program/builder.rs` | `s_getpc` address builders and their targets | `func`, `regs` |
//! | `program/noreturn.rs` | calls of functions that never return; `falls_off`, `aborts` | `builder`, `func` |
//! | `program/outside.rs` | functions code outside the object may enter | `mod` |
//! | `program/scope_rows.rs` | scope names of `U:` rows | - |
//! | `program/funcmap_facts.rs` | `FuncmapInfo` (what the flow checks read of the funcmap), `Layout` | `funcmap` |
//! | `header.rs` | [`Check::Header`] | - |
//! | `sections.rs` | [`Check::Sections`], the `.sqtt_patch` run record | `program` |
//! | `segments.rs` | [`Check::Segments`] | `program` |
//! | `symbols.rs` | [`Check::Symbols`], [`Check::Relocations`] | `program` |
//! | `descriptors.rs` | [`Check::Descriptor`] (per kernel pair) | `program` |
//! | `metadata.rs` | [`Check::Metadata`] (per kernel pair, and the note's root keys) | - |
//! | `funcmap_rows.rs` (+ `inlined.rs`) | [`Check::Funcmap`] rows; builds `FuncmapInfo` | `program`, `funcmap` |
//! | `dwarfcheck.rs` | [`Check::Dwarf`] | `program` |
//! | `verbatim.rs` | [`Check::Verbatim`] | `program` |
//! | `hazard.rs` | [`Check::Hazard`] | `program` |
//! | `flow/mod.rs` | the per-function flow checks, in order, and their summary (`Analysis`) | its submodules |
//! | `flow/cfg.rs` | the CFG with jump landings; [`Check::Branch`] | `subcalls` |
//! | `flow/liveness.rs` | M0 / SCC liveness, M0 constants of the original | `cfg` |
//! | `flow/effect.rs` | what one entry into an inserted run does | `liveness`, `region` |
//! | `flow/scope.rs` | scope-filter flag SGPRs | `cfg`, `sgprs` |
//! | `flow/inserted.rs` | [`Check::Inserted`] | `cfg`, `sgprs`, `spill` |
//! | `flow/runs.rs` | [`Check::M0`], [`Check::Scc`] per run entry; hands each marker word to `markers` | `cfg`, `effect`, `liveness`, `markers`, `sgprs`, `sites` |
//! | `flow/markers.rs` | [`Check::Markers`] / [`Check::Funcmap`] per marker word; F-row entries | `effect`, `sites` |
//! | `flow/balance.rs` | enter/exit balance on every path | `cfg`, `effect` |
//! | `flow/sgprs.rs` | SGPRs inserted code may change (liveness over the call graph) | `cfg` |
//! | `flow/spill.rs` | VGPR lanes inserted code saves and restores | - |
//! | `flow/sites.rs` | what a marker row's site must hold | - |
//! | `flow/subcalls.rs` | calls of subroutines inside a function | - |
//! | `flow/region.rs` | execution of inserted runs on the `sqtt-interp` model wave | - |
//!
//! Imports are within the module's own directory (`program/`, `flow/`) unless named; every
//! check and every `flow/` module also reads `program`. `-`: nothing of the crate but
//! [`Check`] / [`Finding`].

mod descriptors;
mod dwarfcheck;
mod flow;
pub mod funcmap;
mod funcmap_rows;
mod hazard;
mod header;
mod inherited;
mod metadata;
mod program;
mod sections;
mod segments;
mod symbols;
mod verbatim;

use serde::Serialize;

/// Which verification rule a [`Finding`] violates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// ELF header: `e_flags`, OS ABI, ABI version.
    Header,
    /// Set of kernels and device functions.
    Functions,
    /// Non-text sections and their contents.
    Sections,
    /// Program headers: which sections each segment loads, with which permissions.
    Segments,
    /// Original instructions missing, changed or reordered.
    Alignment,
    /// An inserted instruction that is not allowed.
    Inserted,
    /// Rewritten `.text` does not decode.
    Decode,
    /// Padding between functions and the tail `s_code_end` padding.
    Padding,
    /// Relocated branch, call or address builder does not reach its mapped target.
    Branch,
    /// M0 clobbered while live, or missing wait state.
    M0,
    /// SCC changed by an inserted run where the original reads it later.
    Scc,
    /// Marker words and enter/exit balance.
    Markers,
    /// `.sqtt_funcmap` section format.
    Funcmap,
    /// Kernel descriptor fields.
    Descriptor,
    /// Metadata note (`amdhsa.kernels`).
    Metadata,
    /// Symbol table entries.
    Symbols,
    /// `.rela.dyn` entries.
    Relocations,
    /// `.debug_line` source positions of original instructions.
    Dwarf,
    /// A function that must be copied verbatim (execution falls off its end) was changed.
    Verbatim,
    /// A software hazard (missing wait states or dependency wait) involving inserted code
    /// (`amdgpu_isa::hazard` rules).
    Hazard,
}

impl Check {
    /// Whether the rule is about the instructions of one function (branches, padding, decoding,
    /// M0, SCC, markers, hazards), as opposed to the object's structure (header, sections,
    /// segments, symbols, relocations, descriptors, metadata, funcmap, DWARF). A finding of such
    /// a rule that the input already has in a function copied as it is can be the input's own
    /// (see [`verify_parsed`]); a structural one never is a reason to write an output.
    pub fn is_about_code(self) -> bool {
        matches!(
            self,
            Check::Branch
                | Check::Padding
                | Check::Decode
                | Check::M0
                | Check::Scc
                | Check::Markers
                | Check::Hazard
        )
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Check::Header => "header",
            Check::Functions => "functions",
            Check::Sections => "sections",
            Check::Segments => "segments",
            Check::Alignment => "alignment",
            Check::Inserted => "inserted",
            Check::Decode => "decode",
            Check::Padding => "padding",
            Check::Branch => "branch",
            Check::M0 => "m0",
            Check::Scc => "scc",
            Check::Markers => "markers",
            Check::Funcmap => "funcmap",
            Check::Descriptor => "descriptor",
            Check::Metadata => "metadata",
            Check::Symbols => "symbols",
            Check::Relocations => "relocations",
            Check::Dwarf => "dwarf",
            Check::Verbatim => "verbatim",
            Check::Hazard => "hazard",
        };
        f.write_str(s)
    }
}

/// One violation: the rule, the function (kernel or device function) it is in, the original and
/// rewritten addresses (bytes, ELF virtual addresses) when they apply, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Rule violated.
    pub check: Check,
    /// Kernel or device function name, when the finding is inside one.
    pub function: Option<String>,
    /// Address in the original code object (bytes).
    pub original_address: Option<u64>,
    /// Address in the rewritten code object (bytes).
    pub new_address: Option<u64>,
    /// Human-readable description (stable text; tests pin it).
    pub message: String,
}

impl Finding {
    /// A finding about the whole object (no function, no address).
    pub(crate) fn global(check: Check, message: String) -> Finding {
        Finding {
            check,
            function: None,
            original_address: None,
            new_address: None,
            message,
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}]", self.check)?;
        if let Some(n) = &self.function {
            write!(f, " {n}")?;
        }
        if let Some(a) = self.original_address {
            write!(f, " orig {a:#x}")?;
        }
        if let Some(a) = self.new_address {
            write!(f, " new {a:#x}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Whether a verified function is a kernel (has a descriptor) or a device function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FunctionKind {
    Kernel,
    Function,
}

/// Per-function counts (instructions, not bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionReport {
    /// Symbol name (kernels: the kernel name without `.kd`).
    pub name: String,
    pub kind: FunctionKind,
    /// Entry address in the original (bytes).
    pub original_address: u64,
    /// Entry address in the rewritten object (bytes); `None` when the function was not found.
    pub new_address: Option<u64>,
    /// Original instructions in the function body.
    pub original_instructions: usize,
    /// Instructions inserted by the rewriter (not counting inter-function padding).
    pub inserted_instructions: usize,
    /// Inserted marker instructions (`s_ttracedata_imm` and `s_ttracedata`).
    pub markers: usize,
    /// Of those: enter markers (`(id<<2)|2`).
    pub enter_markers: usize,
    /// Of those: exit markers (`0x1`) and fused exit+enter (`(id<<2)|3`).
    pub exit_markers: usize,
    /// Of those: point markers (`id<<2`).
    pub point_markers: usize,
}

/// Result of a verification run. `findings` is empty when the rewrite is valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Processor name from `e_flags` (e.g. `gfx942`).
    pub target: String,
    /// Every kernel and device function of the original, in address order.
    pub functions: Vec<FunctionReport>,
    /// Every SGPR inserted code writes (M0 and SCC saves, lane counters, payload temporaries,
    /// scope flags, long-branch pairs), ascending; each was checked to be dead where it changes.
    pub inserted_sgprs: Vec<u16>,
    /// The scope-filter flag SGPRs computed at kernel entries (spec "Scope filtering"; one
    /// per kernel call graph), ascending.
    pub scope_flag_sgprs: Vec<u16>,
    /// Violations found.
    pub findings: Vec<Finding>,
    /// Inconsistencies the input already had, unchanged by the rewrite (a metadata-note field
    /// that disagrees with the kernel descriptor with the same values in both files): reported,
    /// not violations. Any disagreement the rewrite made is a finding.
    pub warnings: Vec<Finding>,
}

impl Report {
    /// True when no finding was recorded.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Total inserted instructions over all functions.
    pub fn inserted_instructions(&self) -> usize {
        self.functions.iter().map(|f| f.inserted_instructions).sum()
    }

    /// Total inserted marker instructions over all functions.
    pub fn markers(&self) -> usize {
        self.functions.iter().map(|f| f.markers).sum()
    }
}

/// Inputs the verifier cannot work on at all (as opposed to [`Finding`]s about the rewrite).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A file is not a readable code object (`which` is `original` or `rewritten`).
    #[error("{which}: not a readable code object: {error}")]
    Parse {
        which: &'static str,
        error: hsaco::Error,
    },
    /// The processor in `e_flags` is unknown to the decoder.
    #[error("{which}: processor {processor} (e_flags {e_flags:#x} at offset 0x30) is not supported by the decoder")]
    UnsupportedTarget {
        which: &'static str,
        processor: String,
        e_flags: u32,
    },
    /// A code object has no `.text` section or more than one executable section.
    #[error("{which}: {detail}")]
    Text { which: &'static str, detail: String },
    /// An original instruction does not decode: the original cannot be validated against.
    #[error("original: function {function}: instruction at address {address:#x} (file offset {offset:#x}) does not decode: {detail}")]
    OriginalDecode {
        function: String,
        address: u64,
        offset: u64,
        detail: String,
    },
}

/// Verifies that `rewritten` is a faithful instrumentation of `original` (both whole ELF code
/// objects, as bytes). Returns a [`Report`] whose `findings` list every violation (empty when the
/// rewrite is valid). Errors: [`VerifyError`] when either input cannot be analysed at all.
pub fn verify(original: &[u8], rewritten: &[u8]) -> Result<Report, VerifyError> {
    let orig = hsaco::CodeObject::parse(original).map_err(|error| VerifyError::Parse {
        which: "original",
        error,
    })?;
    let new = hsaco::CodeObject::parse(rewritten).map_err(|error| VerifyError::Parse {
        which: "rewritten",
        error,
    })?;
    verify_parsed(&orig, &new)
}

/// [`verify`] of two code objects the caller has parsed already (with `hsaco::CodeObject::parse`
/// or `parse_owned`: no second parse and no copy of the files). Errors: as [`verify`], except
/// [`VerifyError::Parse`].
///
/// A finding the original already has against itself ([`inherited`]: the same check, function
/// and original address when the original is verified as its own rewrite) in a function with no
/// inserted instruction is the input's inconsistency, kept as it is: it moves to the report's
/// `warnings`. A Tensile long branch whose literal aims into the middle of an instruction is
/// one: the rewriter leaves that kernel alone, and the object is not refused for it
/// (session-22 fresh tester).
pub fn verify_parsed(
    orig: &hsaco::CodeObject,
    new: &hsaco::CodeObject,
) -> Result<Report, VerifyError> {
    let mut report = check_all(orig, new)?;
    // The original against itself is the reference: its findings are all kept.
    if !report.findings.is_empty() && orig.bytes != new.bytes {
        // An original the verifier cannot analyse against itself has nothing to inherit.
        if let Ok(own) = check_all(orig, orig) {
            inherited::move_to_warnings(&mut report, &own.findings);
        }
    }
    Ok(report)
}

/// Every check of [`verify_parsed`], without separating the original's own findings.
fn check_all(orig: &hsaco::CodeObject, new: &hsaco::CodeObject) -> Result<Report, VerifyError> {
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    header::check_header(orig, new, &mut findings);
    let isa = isa_target(orig, "original")?;
    let program = program::Program::build(orig, new, isa, &mut findings)?;
    let kernel_waves: Vec<u32> = orig
        .kernels
        .iter()
        .map(|k| wave_size(isa, &k.descriptor))
        .collect();
    let fm = funcmap_rows::check_funcmap(orig, new, &kernel_waves, &mut findings);
    // Device functions run in their callers' waves: the W: row, else the kernels' common size.
    let fallback =
        fm.wave
            .filter(|w| matches!(w, 32 | 64))
            .unwrap_or_else(|| match kernel_waves.first() {
                Some(&w) if kernel_waves.iter().all(|x| *x == w) => w,
                _ => 64,
            });
    // The first kernel at each entry address (one map, not a search per function).
    let mut kernel_at: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    for (k, &w) in orig.kernels.iter().zip(&kernel_waves) {
        kernel_at.entry(k.entry).or_insert(w);
    }
    let wave_sizes: Vec<u32> = program
        .funcs
        .iter()
        .map(|f| match f.kind {
            FunctionKind::Kernel => kernel_at.get(&f.orig_start).copied().unwrap_or(fallback),
            FunctionKind::Function => fallback,
        })
        .collect();
    let outside = program::outside::entered_from_outside(orig, &program);
    let analysis = flow::analyse(&program, &fm, &wave_sizes, &outside, &mut findings);
    verbatim::check(&program, &mut findings);
    hazard::check(&program, &mut findings);
    sections::check_sections(orig, new, &mut findings);
    sections::check_patch_record(orig, new, &mut findings);
    segments::check_segments(orig, new, &mut findings);
    symbols::check_symbols(orig, new, &program, &mut findings);
    symbols::check_relocations(orig, new, &program, &mut findings);
    dwarfcheck::check_lines(orig, new, &program, &mut findings);
    // Per kernel: its descriptor, then its metadata-note entry.
    let func_use = descriptors::usage_per_function(&program);
    for pair @ (ok, nk, fi) in program::kernel_pairs(orig, new, &program) {
        descriptors::check_descriptor(orig, new, &program, &func_use, pair, &mut findings);
        metadata::check_metadata(
            orig,
            new,
            ok,
            nk,
            analysis.inserted_top.get(&fi).copied(),
            &mut findings,
            &mut warnings,
        );
    }
    metadata::check_metadata_root(orig, new, &mut findings);
    let functions = program
        .funcs
        .iter()
        .zip(&analysis.markers)
        .map(|(f, m)| FunctionReport {
            name: f.name.clone(),
            kind: f.kind,
            original_address: f.orig_start,
            new_address: f.new_start,
            original_instructions: f.orig.len(),
            inserted_instructions: f.inserted.len(),
            markers: m.enter + m.exit + m.point,
            enter_markers: m.enter,
            exit_markers: m.exit,
            point_markers: m.point,
        })
        .collect();
    Ok(Report {
        target: orig.target.processor.clone(),
        functions,
        inserted_sgprs: analysis.inserted_sgprs,
        scope_flag_sgprs: analysis.scope_flags,
        findings,
        warnings,
    })
}

/// One instruction of a rewritten function as the verifier aligned it.
#[derive(Clone, Copy, Debug)]
pub struct LaidOut {
    /// Address in the rewritten code object (bytes).
    pub addr: u64,
    pub inst: amdgpu_isa::Instruction,
    /// Inserted by the rewriter (not a copy of an original instruction).
    pub inserted: bool,
    /// For copies of original instructions: the original address (bytes).
    pub original_address: Option<u64>,
}

/// The rewritten functions of `rewritten` aligned against `original` (the verifier's own
/// alignment, [`verify`] step 2): per function its name and every instruction of its rewritten
/// body in address order, marked original or inserted. For tools and oracles that examine
/// inserted code (the LLVM hazard oracle test). Errors: as [`verify`].
pub fn layout(
    original: &[u8],
    rewritten: &[u8],
) -> Result<Vec<(String, Vec<LaidOut>)>, VerifyError> {
    let orig = hsaco::CodeObject::parse(original).map_err(|error| VerifyError::Parse {
        which: "original",
        error,
    })?;
    let new = hsaco::CodeObject::parse(rewritten).map_err(|error| VerifyError::Parse {
        which: "rewritten",
        error,
    })?;
    let isa = isa_target(&orig, "original")?;
    let program = program::Program::build(&orig, &new, isa, &mut Vec::new())?;
    Ok(program
        .funcs
        .iter()
        .map(|f| (f.name.clone(), f.in_address_order()))
        .collect())
}

/// Lanes of a kernel's waves: 64 on gfx9 (wave64 only), else `ENABLE_WAVEFRONT_SIZE32` of the
/// descriptor (AMDGPUUsage "Kernel Descriptor", `kernel_code_properties` bit 10).
fn wave_size(isa: amdgpu_isa::Target, kd: &hsaco::KernelDescriptor) -> u32 {
    if isa.family() == amdgpu_isa::Family::Gfx9 {
        64
    } else {
        kd.wave_size()
    }
}

/// The decoder's target for a code object's `e_flags` (low byte `EF_AMDGPU_MACH_*`).
fn isa_target(
    co: &hsaco::CodeObject,
    which: &'static str,
) -> Result<amdgpu_isa::Target, VerifyError> {
    let e_flags = co.elf.header.e_flags;
    amdgpu_isa::Target::from_elf_mach(e_flags & 0xff).ok_or_else(|| {
        VerifyError::UnsupportedTarget {
            which,
            processor: co.target.processor.clone(),
            e_flags,
        }
    })
}
