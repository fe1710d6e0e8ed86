//! One input file of a batch: every code object in it instrumented and verified, the output
//! written below OUTDIR, and its report rows.

use super::discover::Found;
use super::report::{FileReport, FunctionRow, KernelRow, ObjectReport};
use crate::cmd_patch;
use crate::fatbin::{self, ArchFilter};
use crate::output;
use anyhow::{Context, Result};
use hsaco::container::InputKind;
use sqtt_rewrite::config::Options;
use sqtt_rewrite::rewrite::{Report, Status};
use sqtt_rewrite::timings::Stage;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Largest decompressed bundle accepted (bytes), as for the single-file commands.
pub(super) const DECOMPRESS_LIMIT: u64 = 1 << 32;

/// Processes one file. `Err("<path>: <why>")` for a file found by a directory walk or glob that
/// is not an input (no bundle magic, not an AMDGPU or x86-64 ELF, a host ELF without device
/// code, or a bare code object left out by `--offload-arch`).
pub(super) fn process_file(
    f: &Found,
    opts: &Options,
    filter: &ArchFilter,
    out_dir: Option<&Path>,
    strict: bool,
    copy_tree: bool,
) -> Result<FileReport, String> {
    let started = Instant::now();
    let mut rep = FileReport {
        path: f.key.clone(),
        kind: String::new(),
        error: None,
        objects: Vec::new(),
        time_ms: None,
        not_written: false,
    };
    let data = match crate::timings::time(Stage::Load, || std::fs::read(&f.path)) {
        Ok(d) => d,
        Err(e) => {
            rep.error = Some(format!("cannot read: {e}"));
            return Ok(rep);
        }
    };
    // An ELF file that is not an input says what it is (ELF32, truncated, another machine), as
    // the main job says it (session-27 and session-28 testers).
    let generic = "not an AMDGPU code object, offload bundle or x86-64 host ELF";
    let not_input = if data.starts_with(b"\x7fELF") {
        crate::sniff::describe(&data).unwrap_or_else(|| generic.to_string())
    } else {
        generic.to_string()
    };
    let out = match crate::sniff::kind(&data) {
        None if !f.explicit => return Err(format!("{}: {not_input}", f.key)),
        None => {
            rep.error = Some(not_input);
            None
        }
        Some(InputKind::Host)
            if !f.explicit
                && hsaco::container::open(&data, DECOMPRESS_LIMIT)
                    .map_or(true, |(_, e)| e.is_empty()) =>
        {
            return Err(format!("{}: host ELF without device code", f.key));
        }
        Some(kind) => {
            rep.kind = kind_name(kind).into();
            let out = process_objects(&f.key, kind, &data, opts, filter, &mut rep);
            if rep.objects.is_empty() && rep.error.is_none() && kind == InputKind::CodeObject {
                return Err(format!(
                    "{}: code object not selected by --offload-arch",
                    f.key
                ));
            }
            out
        }
    };
    rep.not_written = strict && out_dir.is_some() && rep.objects.iter().any(lost_coverage);
    if rep.not_written {
        rep.time_ms = Some(started.elapsed().as_millis() as u64);
        return Ok(rep);
    }
    if let (Some(bytes), Some(dir)) = (out, out_dir) {
        let dest = dir.join(super::out_rel(&f.rel, copy_tree));
        // Errors name `-o` and the path (`-o OUT/lib/a.co: cannot write: ...`).
        let written = dest
            .parent()
            .map_or(Ok(()), |d| {
                std::fs::create_dir_all(d).with_context(|| {
                    format!(
                        "-o {}: cannot create directory {}",
                        dest.display(),
                        d.display()
                    )
                })
            })
            .and_then(|()| output::check("-o", &dest))
            .and_then(|d| {
                crate::timings::time(Stage::Write, || output::write(&d, &bytes, Some(&f.path)))
            });
        if let Err(e) = written {
            rep.error = Some(format!("{e:#}"));
        }
    }
    rep.time_ms = Some(started.elapsed().as_millis() as u64);
    Ok(rep)
}

pub(super) fn kind_name(k: InputKind) -> &'static str {
    match k {
        InputKind::CodeObject => "code_object",
        InputKind::Bundle => "bundle",
        InputKind::Host => "host",
    }
}

/// Instruments the objects of one file and fills `rep`; returns the output file bytes (`None`
/// when the file could not be processed). Bare code objects go through
/// [`cmd_patch::patch_code_object`] (so an unreadable object is reported as `error`), bundles and
/// host ELFs through [`fatbin::instrument_container`].
pub(super) fn process_objects(
    name: &str,
    kind: InputKind,
    data: &[u8],
    opts: &Options,
    filter: &ArchFilter,
    rep: &mut FileReport,
) -> Option<Vec<u8>> {
    if kind == InputKind::CodeObject {
        if let Ok(co) = hsaco::CodeObject::parse(data) {
            if !filter.matches(&co.target.target_id()) {
                return Some(data.to_vec());
            }
        }
        return match cmd_patch::patch_code_object(name, data, opts) {
            Ok(p) => {
                rep.objects.push(object_row(
                    String::new(),
                    Some(data),
                    Some(&p.report),
                    p.verifier_rejected,
                ));
                Some(p.bytes)
            }
            Err(e) => {
                let mut row = object_row(String::new(), Some(data), None, false);
                row.reasons.push(format!("{e:#}"));
                rep.objects.push(row);
                None
            }
        };
    }
    let outcome = match fatbin::instrument_container(name, data, opts, filter) {
        Ok(o) => o,
        Err(e) => {
            rep.error = Some(format!("{e:#}"));
            return None;
        }
    };
    // Kernel lists of objects the rewriter reported nothing about (failed closed) come from the
    // embedded objects themselves.
    let need_data = outcome
        .objects
        .iter()
        .any(|o| o.report.status != Status::Instrumented);
    let embedded = if need_data {
        hsaco::container::open(data, DECOMPRESS_LIMIT)
            .map(|(_, e)| e)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    for o in &outcome.objects {
        let bytes = embedded
            .iter()
            .find(|e| e.bundle_index == o.bundle_index && e.id == o.entry_id)
            .map(|e| e.data.as_slice());
        let mut row = object_row(
            format!("{}:{}", o.bundle_index, o.entry_id),
            bytes,
            Some(&o.report),
            o.verifier_rejected,
        );
        row.target.clone_from(&o.target);
        rep.objects.push(row);
    }
    rep.objects.sort_by(|a, b| a.entry.cmp(&b.entry));
    Some(outcome.bytes)
}

pub(super) fn status_name(s: Status) -> &'static str {
    match s {
        Status::Instrumented => "instrumented",
        Status::NothingToDo => "nothing_to_do",
        Status::FailedClosed => "failed_closed",
    }
}

/// Builds the row of one code object from the rewriter's report (`None`: it could not be read)
/// and the object itself (kernel list, registers and occupancy of kernels the report omits).
pub(super) fn object_row(
    entry: String,
    data: Option<&[u8]>,
    report: Option<&Report>,
    rejected: bool,
) -> ObjectReport {
    let co = data.and_then(|d| hsaco::CodeObject::parse(d).ok());
    let status = report.map_or("error", |r| status_name(r.status));
    let mut row = ObjectReport {
        entry,
        target: report
            .map(|r| r.target.clone())
            .or_else(|| co.as_ref().map(|c| c.target.processor.clone()))
            .unwrap_or_default(),
        status: status.into(),
        reasons: report.map(|r| r.reasons.clone()).unwrap_or_default(),
        verifier: match (rejected, report.map(|r| r.status)) {
            (true, _) => "rejected",
            (false, Some(Status::Instrumented)) => "passed",
            _ => "not_run",
        }
        .into(),
        text_bytes_before: report.map_or(0, |r| r.text_size_before),
        text_bytes_after: report.map_or(0, |r| r.text_size_after),
        kernels: Vec::new(),
        functions: Vec::new(),
        notes: report.map(|r| r.notes.clone()).unwrap_or_default(),
        dwarf_error: report.and_then(|r| r.inlined.dwarf_error.clone()),
        failed_closed_sites: report
            .filter(|r| r.status == Status::FailedClosed)
            .map(failed_closed_sites)
            .unwrap_or_default(),
        loops: report.and_then(|r| r.loops.clone()),
        regions: report.and_then(|r| r.regions.clone()),
    };
    let mut kernels: BTreeMap<String, KernelRow> = BTreeMap::new();
    let mut functions: BTreeMap<String, FunctionRow> = BTreeMap::new();
    if let Some(co) = &co {
        for k in &co.kernels {
            let regs = k.descriptor.registers(&co.target);
            let occ = k.descriptor.occupancy(&co.target);
            let mut kr = empty_kernel(&k.name, status);
            kr.wave_size = Some(k.descriptor.wave_size());
            kr.vgprs = Some(regs.vgprs_allocated);
            kr.sgprs_before = regs.sgprs;
            kr.sgprs_after = regs.sgprs;
            kr.occupancy_before = Some(occ.waves_per_simd);
            kr.occupancy_after = Some(occ.waves_per_simd);
            kernels.insert(k.name.clone(), kr);
        }
    }
    if let Some(r) = report {
        for k in &r.kernels {
            let kr = kernels
                .entry(k.name.clone())
                .or_insert_with(|| empty_kernel(&k.name, status));
            kr.wave_size = Some(k.wave_size);
            kr.vgprs = Some(k.vgprs);
            kr.sgprs_before = k.sgprs_before;
            kr.sgprs_after = k.sgprs_after;
            kr.occupancy_before = Some(k.occupancy_before);
            kr.occupancy_after = Some(k.occupancy_after);
            kr.inserted_instructions_reachable = k.inserted_instructions_reachable;
        }
        // A rewrite the verifier rejected was not written: none of its sites is instrumented
        // (they are counted in `failed_closed_sites`).
        let written = r.status != Status::FailedClosed;
        for f in r.functions.iter().filter(|_| written) {
            if f.kernel || kernels.contains_key(&f.name) {
                let kr = kernels
                    .entry(f.name.clone())
                    .or_insert_with(|| empty_kernel(&f.name, status));
                kr.sites = f.sites.clone();
                kr.inserted_instructions = f.inserted_instructions;
                kr.inserted_bytes = f.inserted_bytes;
            } else if !f.sites.is_empty() {
                functions.insert(
                    f.name.clone(),
                    function_row(
                        &f.name,
                        f.sites.clone(),
                        f.inserted_instructions,
                        f.inserted_bytes,
                    ),
                );
            }
        }
        for s in &r.skipped {
            let why = format!("{}: {}", cmd_patch::serde_name(&s.kind), s.why);
            let slot = match kernels.get_mut(&s.function) {
                Some(k) => &mut k.skipped,
                None => {
                    &mut functions
                        .entry(s.function.clone())
                        .or_insert_with(|| function_row(&s.function, BTreeMap::new(), 0, 0))
                        .skipped
                }
            };
            *slot.entry(why).or_default() += 1;
        }
    }
    for k in kernels.values_mut() {
        if k.status == "nothing_to_do"
            && (k.inserted_instructions > 0 || k.inserted_instructions_reachable > 0)
        {
            k.status = "instrumented".into();
        } else if k.status == "instrumented"
            && k.inserted_instructions == 0
            && k.inserted_instructions_reachable == 0
        {
            k.status = "nothing_to_do".into();
        }
    }
    row.kernels = kernels.into_values().collect();
    row.functions = functions.into_values().collect();
    row
}

/// Sites of a failed-closed object that would have been instrumented, by feature: those its
/// report's coverage found, less those it skipped (the rows list those).
fn failed_closed_sites(r: &Report) -> BTreeMap<String, u32> {
    r.coverage
        .iter()
        .filter_map(|c| {
            let skipped = r
                .skipped
                .iter()
                .filter(|s| s.kind.feature() == Some(c.feature))
                .count() as u64;
            let n = u32::try_from(c.found.saturating_sub(skipped)).unwrap_or(u32::MAX);
            (n > 0).then(|| (c.feature.to_string(), n))
        })
        .collect()
}

pub(super) fn empty_kernel(name: &str, status: &str) -> KernelRow {
    KernelRow {
        name: name.into(),
        status: status.into(),
        sites: BTreeMap::new(),
        skipped: BTreeMap::new(),
        inserted_instructions: 0,
        inserted_bytes: 0,
        inserted_instructions_reachable: 0,
        wave_size: None,
        vgprs: None,
        sgprs_before: None,
        sgprs_after: None,
        occupancy_before: None,
        occupancy_after: None,
    }
}

pub(super) fn function_row(
    name: &str,
    sites: BTreeMap<String, u32>,
    insts: u32,
    bytes: u32,
) -> FunctionRow {
    FunctionRow {
        name: name.into(),
        sites,
        skipped: BTreeMap::new(),
        inserted_instructions: insts,
        inserted_bytes: bytes,
    }
}

/// True when a code object lost coverage in the sense of `--strict`: it failed closed or could
/// not be read, a kernel or function skipped a site, or its DWARF is unreadable (the batch
/// counterpart of `cmd_patch::lost_coverage`, read from the report).
pub(crate) fn lost_coverage(o: &ObjectReport) -> bool {
    matches!(o.status.as_str(), "failed_closed" | "error")
        || o.kernels.iter().any(|k| !k.skipped.is_empty())
        || o.functions.iter().any(|f| !f.skipped.is_empty())
        || o.dwarf_error.is_some()
}
