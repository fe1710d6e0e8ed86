//! Load: parse the code object, refuse what cannot be rewritten, find `.text` and the functions
//! in it (kernel descriptors and symbols).

use crate::analysis::{FnSpec, KernelSpec};
use crate::config::Options;
use crate::report::{Report, RewriteError, Status, PATCH_SECTION};
use amdgpu_isa::Target;
use hsaco::CodeObject;

/// The input object as every later stage reads it (never changed after load).
pub(crate) struct Source {
    /// The parsed code object.
    pub co: CodeObject,
    /// Section index of `.text` in the ELF section header table.
    pub text_index: usize,
    /// Load address of `.text` (bytes).
    pub text_addr: u64,
    /// End of `.text` (`text_addr` + its size, bytes).
    pub text_end: u64,
}

impl Source {
    /// `.text` contents (borrowed from the code object: never copied).
    pub fn text_bytes(&self) -> &[u8] {
        self.co.section_data(&self.co.elf.sections[self.text_index])
    }
}

/// Output of [`load`].
pub(crate) struct Loaded {
    /// The input object.
    pub src: Source,
    /// The ISA target from the ELF header (`e_flags` machine).
    pub target: Target,
    /// Function ranges from the descriptors and symbols, sorted by start, non-overlapping.
    pub specs: Vec<FnSpec>,
}

/// Parses `input`, returning the report started for it and the loaded object (`None`: the
/// object fails closed as a whole, with the reason in the report: more than one executable
/// section, or a function without a usable name). Fills `target`, `text_size_before`, `notes`
/// (kernels without code, odd input fields: [`CodeObject::input_warnings`]) and `reasons`. Errors: invalid options, not a code object, not linked
/// (`ET_DYN`), already instrumented (without `force_reinstrument`), unsupported target, no
/// `.text`.
pub(crate) fn load(input: &[u8], opts: &Options) -> Result<(Report, Option<Loaded>), RewriteError> {
    opts.validate()?;
    let co = CodeObject::parse(input)?;
    if co.elf.header.e_type != 3 {
        return Err(RewriteError::NotLinked(co.elf.header.e_type));
    }
    if !opts.force_reinstrument {
        if let Some(name) = run_record_section(&co) {
            return Err(RewriteError::AlreadyInstrumented(name));
        }
    }
    let target = Target::from_elf_mach(u32::from(co.target.mach))
        .ok_or_else(|| RewriteError::Target(co.target.processor.clone()))?;
    let text = co
        .text()
        .ok_or_else(|| {
            hsaco::Error::NotFound(format!(
                ".text section (no section of that name among the {} section headers at file offset {:#x})",
                co.elf.sections.len(),
                co.elf.header.e_shoff
            ))
        })?
        .clone();
    if text.sh_type == hsaco::elf::SHT_NOBITS {
        let names: Vec<&str> = co.kernels.iter().map(|k| k.name.as_str()).collect();
        return Err(RewriteError::Malformed(format!(
            "section .text at file offset {:#x} has type SHT_NOBITS: no code is stored in the file, so its {} kernel(s) ({}) have none",
            text.offset,
            names.len(),
            names.join(", ")
        )));
    }
    if let Some(fm) = co.funcmap() {
        sqtt_funcmap::check_strict(fm)
            .map_err(|why| RewriteError::Malformed(format!("section .sqtt_funcmap: {why}")))?;
    }
    let text_size = co.section_data(&text).len() as u64;
    let text_addr = text.addr;
    let text_end = text.addr + text_size;
    let mut report = Report::new(co.target.processor.clone(), text_size);
    // Odd fields nothing depends on (reserved descriptor bytes, unknown e_flags bits, ...): kept
    // as they are, and named.
    report.notes.extend(co.input_warnings());
    if co.exec_sections().count() > 1 {
        report.status = Status::FailedClosed;
        report
            .reasons
            .push("more than one executable section".into());
        return Ok((report, None));
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
    // control characters (spec "Funcmap format").
    let unnamed: Vec<String> = specs
        .iter()
        .filter(|s| s.name.is_empty() || s.name.chars().any(char::is_control))
        .map(|s| format!("function at {:#x} has no usable symbol name ({:?}): its funcmap row would be malformed", s.start, s.name))
        .collect();
    if !unnamed.is_empty() {
        report.status = Status::FailedClosed;
        report.reasons = unnamed;
        return Ok((report, None));
    }
    let src = Source {
        text_index: text.index,
        text_addr,
        text_end,
        co,
    };
    Ok((report, Some(Loaded { src, target, specs })))
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

/// The section holding an sqtt-patch run record: `.sqtt_patch` by name, or any other
/// non-allocated section whose content is our record (one JSON object with `"tool":
/// "sqtt-patch"`), so that renaming the section does not hide an earlier run (issue 32).
fn run_record_section(co: &CodeObject) -> Option<String> {
    if co.section(PATCH_SECTION).is_some() {
        return Some(PATCH_SECTION.to_string());
    }
    co.elf
        .sections
        .iter()
        .filter(|s| !s.is_alloc() && s.sh_type == hsaco::elf::SHT_PROGBITS && s.size < 1 << 16)
        .find(|s| {
            serde_json::from_slice::<serde_json::Value>(co.section_data(s).trim_ascii())
                .is_ok_and(|v| v.get("tool").and_then(|t| t.as_str()) == Some("sqtt-patch"))
        })
        .map(|s| s.name.clone())
}
