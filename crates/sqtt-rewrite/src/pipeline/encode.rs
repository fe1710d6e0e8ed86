//! Encode: the ELF rebuilt around the new `.text` (symbols, kernel entries and descriptors,
//! DWARF remapped, metadata `.sgpr_count`, funcmap and run record sections) and serialised; the
//! per-function and per-kernel report lines.

use super::instrument::Snippets;
use super::{first_index, kernel_funcs, LaidOut};
use crate::analysis::Program;
use crate::config::Options;
use crate::layout::{Layout, PcRelUse};
use crate::plan::{MarkerKey, SiteKind};
use crate::regs::{members, Sgprs};
use crate::report::{
    FunctionReport, KernelReport, Report, RewriteError, Status, KEPT_TEXT_SECTION, PATCH_SECTION,
};
use amdgpu_isa::Family;
use hsaco::kd::KernelDescriptor;
use hsaco::{CodeObject, CodeObjectEditor};
use sqtt_funcmap::Row;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Output of [`encode`].
pub(crate) struct Encoded {
    /// The rewritten code object.
    pub bytes: Vec<u8>,
}

/// Rebuilds the code object `input` around the laid-out `.text`. `None`: the object fails
/// closed (the rewritten metadata note would move `.text`, the relayout after data moved fails,
/// DWARF cannot be remapped, a kernel's `.sgpr_count` cannot be raised). Fills
/// `inserted_sgprs`, `dwarf_sections_remapped`, `ids`, `funcmap_rows`, `functions`,
/// `kernels`, `text_size_after` and `reasons`. Errors: an edit the ELF editor rejects.
pub(crate) fn encode(
    l: LaidOut,
    input: &[u8],
    opts: &Options,
    report: &mut Report,
) -> Result<Option<Encoded>, RewriteError> {
    let LaidOut {
        ins,
        mut layout,
        verbatim_pairs,
        trace_addrs,
    } = l;
    let (co, prog, text_addr, text_end) =
        (&ins.src.co, &ins.prog, ins.src.text_addr, ins.src.text_end);
    let target = prog.target;
    let mut ed = CodeObjectEditor::new(co);
    let fail = |report: &mut Report, why: String| {
        report.status = Status::FailedClosed;
        report.reasons.push(why);
    };
    // The new `.text` moves into the editor (its size stays in the report); when `.text` is
    // kept in place, the new code is a new segment after everything the input loads.
    let text_size = layout.bytes.len() as u64;
    let keep = layout.keeps_text();
    let new_code = std::mem::take(&mut layout.bytes);
    let code_section = if keep {
        Some(ed.add_code_segment(KEPT_TEXT_SECTION, layout.out_addr(), new_code)?)
    } else {
        ed.set_text(new_code)?;
        None
    };
    // Kernels without code sit at the end of `.text` (hsaco accepts them there): they stay at
    // its new end (or where they are when `.text` is kept).
    let text_end_to = if keep { text_end } else { layout.new_end };
    let map_code = |a: u64| {
        layout
            .map_addr(a)
            .or_else(|| (a == text_end).then_some(text_end_to))
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
        let at_end_of_other = sym.value == text_end && usize::from(sym.shndx) != ins.src.text_index;
        if sym.value < text_addr
            || sym.value > text_end
            || at_end_of_other
            || sym.shndx == 0
            || sym.shndx >= 0xff00
        {
            continue;
        }
        // Kept in place, `.text`'s section symbol still names `.text`.
        if keep && sym.st_type == hsaco::elf::STT_SECTION {
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
        // A function copied to the new segment: its symbol names the new section.
        if let Some(sec) = code_section.filter(|_| nv >= layout.out_addr()) {
            let ndx = u16::try_from(sec).map_err(|_| {
                hsaco::Error::InvalidEdit(format!("section index {sec} needs extended indices"))
            })?;
            ed.set_symbol_section(sym.table, sym.index, ndx)?;
        }
    }
    // Data targets of address builders move when `.text` outgrows its gap: map them and
    // recompute the adds that carry their offsets (nothing else depends on them).
    let placement = ed.layout()?;
    if placement.map_address(text_addr) != text_addr {
        fail(report, "the rewritten metadata note moves .text".into());
        return Ok(None);
    }
    let mut pcrels = prog.pcrels.clone();
    if pcrels
        .iter()
        .any(|p| p.use_kind == PcRelUse::Data && placement.map_address(p.target) != p.target)
    {
        if keep {
            fail(report, "data moved although .text is kept in place".into());
            return Ok(None);
        }
        for p in &mut pcrels {
            if p.use_kind == PcRelUse::Data {
                p.target = placement.map_address(p.target);
            }
        }
        let mut text = ed.section_contents(ins.src.text_index)?.to_vec();
        if let Err(e) = layout.retarget_data(&mut text, &pcrels) {
            fail(report, e.to_string());
            return Ok(None);
        }
        ed.set_text(text)?;
    }
    // The exact map of instruction starts (symbols, entries and relocation addends that are
    // not set explicitly): every original instruction to its block start, and the instructions
    // of left-alone functions to their place in the verbatim block.
    let verbatim_pairs: BTreeMap<u64, u64> = verbatim_pairs.into_iter().collect();
    let lay = &layout;
    // A symbol at a function's end (Tensile's `label_ASM_End` after the last `s_endpgm`, where
    // the padding that followed is dropped) maps to the function's new end.
    let ends: BTreeMap<u64, u64> = prog
        .funcs
        .iter()
        .filter_map(|f| Some((f.spec.end, layout.map_end(f.spec.end, text_end)?)))
        .collect();
    ed.set_text_address_map(Box::new(move |a| {
        verbatim_pairs
            .get(&a)
            .copied()
            .or_else(|| lay.map_inst_start(a))
            .or_else(|| ends.get(&a).copied())
    }));
    // DWARF (the input's `.debug_*` sections, copied once for the remap and the locations).
    // Kept in place: DWARF still describes the original code, which stays at its addresses
    // (the copies in the new segment have no line information; docs/left-alone.md).
    let dwarf = ins.dwarf.as_ref().filter(|_| !keep);
    if keep && ins.dwarf.is_some() {
        report.notes.push(
            "DWARF describes the original code kept in place; the instrumented copies have no line information".into(),
        );
    }
    if let Some(sections) = dwarf {
        let mut pairs: Vec<(u64, u64)> = layout.block_starts().collect();
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
            dwarf_remap::remap_dwarf_or_drop(sections, &m)
                .map_err(|e| hsaco::Error::InvalidEdit(e.to_string()))
        });
        match changed {
            Ok(changed) => {
                for (name, why) in &changed.dropped {
                    report.notes.push(format!(
                        "DWARF section {name} cannot be remapped ({why}): emptied, the code is instrumented"
                    ));
                }
                let changed = changed.sections;
                report.dwarf_sections_remapped = changed.len();
                for (name, data) in changed {
                    let idx = ed.section_index(&name)?;
                    // A compressed input section is written compressed again, with its
                    // compression type and alignment (hsaco::compressed).
                    let header = co
                        .section(&name)
                        .filter(|s| s.flags & hsaco::compressed::SHF_COMPRESSED != 0)
                        .and_then(|s| hsaco::compressed::header(co.section_data(s)));
                    let data = match header {
                        Some(h) => hsaco::compressed::compress(h, &data),
                        None => data,
                    };
                    ed.set_section_data(idx, data)?;
                }
            }
            Err(e) => {
                fail(report, format!("DWARF cannot be remapped: {e}"));
                return Ok(None);
            }
        }
    }
    let prefetched = set_prefetch(co, prog, &layout, text_end, &mut ed)?;
    // Each kernel's metadata `.sgpr_count` (and on gfx9 its descriptor allocation) must cover
    // the SGPRs inserted code writes in it and every function it reaches; `.sgpr_count` counts
    // VCC, FLAT_SCRATCH and XNACK_MASK on gfx9 (the 6 extras).
    report.inserted_sgprs = members(ins.used_by_func.iter().fold(0, |a, u| a | u)).collect();
    let extra = if target.family() == Family::Gfx9 {
        6
    } else {
        0
    };
    let need = sgprs_needed(prog, co, &ins.used_by_func, extra);
    let vgpr_need: BTreeMap<String, u32> = kernel_funcs(prog, co)
        .map(|(fi, k)| {
            let v = prog.reachable(fi).iter().map(|&g| ins.spill_need[g]).max();
            (k.name.clone(), v.unwrap_or(0))
        })
        .collect();
    // A kernel whose VGPR allocation grows (a spill VGPR of inserted code) says so in its note's
    // `.vgpr_count` too, so that note, descriptor and report agree (issue 31).
    let vgpr_note: BTreeMap<String, u32> = co
        .kernels
        .iter()
        .filter_map(|k| {
            let want = vgpr_need.get(&k.name).copied().unwrap_or(0);
            (want > k.descriptor.registers(&co.target).vgprs_allocated)
                .then(|| (k.name.clone(), want))
        })
        .collect();
    let counts = [(".sgpr_count", &need), (".vgpr_count", &vgpr_note)];
    if let Err(why) = cover_register_counts(co, input, &counts, &mut ed) {
        report.status = Status::FailedClosed;
        report.reasons.push(why);
        return Ok(None);
    }
    // Funcmap and the run record.
    let rows = funcmap_rows(&ins, &trace_addrs, report);
    report.funcmap_rows = rows.len();
    ed.add_or_replace_section(sqtt_funcmap::SECTION, 1, 0, 1, sqtt_funcmap::render(&rows))?;
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
    let bumped = bump_registers(co, &mut ed, &prefetched, &sgpr_need, &vgpr_need)?;
    let bytes = ed.write()?;
    // Report.
    fill_function_reports(report, prog, &layout, &ins.snippets, &ins.ids, text_end);
    fill_kernel_reports(report, co, prog);
    let by_name = first_index(
        report
            .kernels
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i)),
    );
    for (name, after, waves, vgprs) in bumped {
        if let Some(kr) = by_name.get(&name).map(|&i| &mut report.kernels[i]) {
            kr.sgprs_after = after;
            kr.occupancy_after = waves;
            kr.vgprs_after = vgprs;
        }
    }
    report.text_size_after = text_size;
    Ok(Some(Encoded { bytes }))
}

/// Descriptors: gfx11+ instruction prefetch (`inst_pref_size`, 128-byte lines) follows the new
/// code size of each kernel whose prefetch covered its whole code (capped at the field's
/// maximum, never lowered). Returns the descriptors written, by kernel name.
fn set_prefetch(
    co: &CodeObject,
    prog: &Program,
    layout: &Layout,
    text_end: u64,
    ed: &mut CodeObjectEditor,
) -> Result<BTreeMap<String, KernelDescriptor>, RewriteError> {
    let gen = co.target.generation();
    let mut set = BTreeMap::new();
    let kernel_at = first_index(co.kernels.iter().map(|k| (k.entry, k)));
    for f in &prog.funcs {
        let Some(k) = kernel_at.get(&f.spec.start) else {
            continue;
        };
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
                set.insert(k.name.clone(), kd);
            }
        }
    }
    Ok(set)
}

/// The output's funcmap rows (spec "Funcmap format"): the input's rows, a `K:` row for
/// every kernel without one, the wave size when addresses are traced, one row per marker id
/// (`F:`, `U:`, `P:`, and `R:` payload rows for address traces), the shader-clock encoding when
/// packing. Fills `report.ids`.
fn funcmap_rows(
    ins: &super::Instrumented,
    trace_addrs: &BTreeMap<(usize, usize), u64>,
    report: &mut Report,
) -> Vec<Row> {
    let (co, prog, wave) = (&ins.src.co, &ins.prog, ins.wave);
    let mut rows = ins.existing_rows.clone();
    let dwarf_index = ins.dwarf_index.as_ref().and_then(|r| r.as_ref().ok());
    let locs = dwarf_index.map(function_locs).unwrap_or_default();
    let mut with_row: HashSet<String> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Kernel { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    for k in &co.kernels {
        if with_row.insert(k.name.clone()) {
            rows.push(Row::Kernel {
                name: k.name.clone(),
                loc: locs.get(&k.name).cloned().filter(|l| !l.contains('@')),
            });
        }
    }
    let traced_ids = ins
        .ids
        .keys()
        .any(|k| matches!(k, MarkerKey::AddrTrace { .. }));
    // Inline-chain index of the input's DWARF (`None` when it cannot be parsed: address-trace
    // rows then carry no location, which the funcmap format allows).
    let op_locs = dwarf_index.filter(|_| traced_ids);
    if let (true, Some(w)) = (traced_ids, wave) {
        rows.retain(|r| !matches!(r, Row::WaveSize(_)));
        rows.push(Row::WaveSize(w));
    }
    let labels = crate::subroutines::LabelNames::new(co);
    for (&k, &id) in &ins.ids {
        let name = marker_name(prog, ins, &labels, trace_addrs, k);
        report.ids.insert(name.clone(), id);
        if let (MarkerKey::AddrTrace { func, inst, .. }, Some(op), Some(w)) =
            (k, ins.trace_ops.get(&k), wave)
        {
            let addr = trace_addrs.get(&(func, inst)).copied();
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
            MarkerKey::Kernel(_) => Row::User {
                id,
                name,
                loc: None,
            },
            MarkerKey::Loop(n) => Row::User {
                id,
                loc: ins.loop_names.get(n).and_then(|r| r.1.clone()),
                name,
            },
            // User-named regions: `U:` rows whose name carries the location, as loops'.
            MarkerKey::Region(_) => Row::User {
                id,
                name,
                loc: None,
            },
            MarkerKey::LoopIter(n) => Row::Point {
                id,
                loc: ins.loop_names.get(n).and_then(|r| r.1.clone()),
                name,
            },
            MarkerKey::Inlined(n) => Row::Function {
                id,
                loc: ins.inlined_names.get(n).and_then(|r| r.1.clone()),
                name,
            },
            MarkerKey::Subroutine { .. } => Row::Function {
                id,
                name,
                loc: None,
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
    if let Some((bits, shift)) = ins.packing {
        rows.retain(|r| !matches!(r, Row::Encoding(_)));
        rows.push(Row::Encoding(format!(
            "shader_clock_bits={bits};shader_clock_shift={shift}"
        )));
    }
    rows
}

/// Raises each kernel's register counts in its metadata note — for every `(key, need)` of
/// `counts` (`.sgpr_count`, `.vgpr_count`), `key` to at least `need[kernel name]` — in whichever
/// metadata note lists it (`-fgpu-rdc` links have one note per translation unit); kernels without
/// an entry in `need` are left alone. Errors (the object fails closed): a kernel without a
/// metadata entry or without the key when the object has metadata, or a note that does not
/// re-encode to its input bytes (non-canonical MessagePack would change the note's size and move
/// every section after it).
fn cover_register_counts(
    co: &CodeObject,
    input: &[u8],
    counts: &[(&str, &BTreeMap<String, u32>)],
    ed: &mut CodeObjectEditor,
) -> Result<(), String> {
    if co.metadata.is_empty() {
        return Ok(());
    }
    let mut notes: BTreeMap<usize, hsaco::Metadata> = BTreeMap::new();
    for &(key, need) in counts {
        for k in &co.kernels {
            let Some(need) = need.get(&k.name).map(|&n| u64::from(n)) else {
                continue;
            };
            let Some((note, i)) = k.metadata_index else {
                return Err(format!(
                    "kernel {} has no amdhsa.kernels entry in any metadata note, so its {key} cannot cover the registers inserted code uses",
                    k.name
                ));
            };
            let Some(meta) = co.metadata.get(note) else {
                continue;
            };
            // `.sgpr_count` and `.vgpr_count` are required (AMDGPUUsage "Code Object V3+
            // Metadata"); adding a key would grow the note and move every section after it.
            let Some(have) = meta.kernel_u64(i, key) else {
                return Err(format!(
                    "kernel {} has no {key} in its metadata (required), so it cannot cover the registers inserted code uses",
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
                            "the metadata note at offset {:#x} is not canonical MessagePack (it does not re-encode to the same bytes), so {key} cannot be updated in place",
                            meta.offset
                        ));
                    }
                    v.insert(meta.clone())
                }
            };
            m.set_kernel_u64(i, key, need)
                .map_err(|e| format!("kernel {}: {e}", k.name))?;
        }
    }
    for m in notes.into_values() {
        ed.set_metadata(m);
    }
    Ok(())
}

/// `file:line` of every function's definition, by name.
fn function_locs(index: &dwarf_remap::LocationIndex) -> HashMap<String, String> {
    index
        .functions()
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

/// The funcmap name of marker `k`; `labels`: the input's local labels (subroutine names);
/// `trace_addrs`: original address of each address-traced instruction, by (function index,
/// instruction index).
fn marker_name(
    prog: &Program,
    ins: &super::Instrumented,
    labels: &crate::subroutines::LabelNames,
    trace_addrs: &BTreeMap<(usize, usize), u64>,
    k: MarkerKey,
) -> String {
    match k {
        MarkerKey::Inlined(n) => ins
            .inlined_names
            .get(n)
            .map(|r| r.0.clone())
            .unwrap_or_default(),
        MarkerKey::Loop(n) => ins
            .loop_names
            .get(n)
            .map(|r| r.0.clone())
            .unwrap_or_default(),
        MarkerKey::LoopIter(n) => ins
            .loop_names
            .get(n)
            .map(|r| format!("iter {}", r.0))
            .unwrap_or_default(),
        MarkerKey::Region(n) => ins
            .region_names
            .get(n)
            .map(|r| r.0.clone())
            .unwrap_or_default(),
        MarkerKey::UserPoint(n) => ins
            .point_names
            .get(n)
            .map(|r| r.0.clone())
            .unwrap_or_default(),
        MarkerKey::Function(f) | MarkerKey::Kernel(f) => prog.funcs[f].spec.name.clone(),
        MarkerKey::Subroutine { func, addr } => labels.name(&prog.funcs[func].spec, addr),
        MarkerKey::Barrier => "barrier".into(),
        MarkerKey::BarrierSignal => "barrier_signal".into(),
        MarkerKey::BarrierWait => "barrier_wait".into(),
        MarkerKey::VmemLoad => "vmem_load".into(),
        MarkerKey::VmemStore => "vmem_store".into(),
        MarkerKey::AddrTrace { func, inst, part } => {
            let f = &prog.funcs[func];
            let at = trace_addrs
                .get(&(func, inst))
                .copied()
                .unwrap_or(f.spec.start)
                - f.spec.start;
            let p = if part > 0 { "/2" } else { "" };
            format!("addr_trace@{}+{at:#x}{p}", f.spec.name)
        }
    }
}

fn kind_name(k: SiteKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

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
        // Counted by kind first; the names (serde's) are looked up once per kind.
        let mut by_kind = [0u32; SiteKind::ALL.len()];
        for list in snippets.range((fi, 0)..(fi + 1, 0)).map(|(_, l)| l) {
            for (s, code) in list {
                by_kind[s.kind as usize] += 1;
                fr.inserted_instructions += code.len() as u32;
                fr.inserted_bytes += code.iter().map(|c| c.len() as u32).sum::<u32>();
            }
        }
        for (k, n) in SiteKind::ALL.into_iter().zip(by_kind) {
            if n > 0 {
                *fr.sites.entry(kind_name(k)).or_default() += n;
            }
        }
        report.functions.push(fr);
    }
}

fn fill_kernel_reports(report: &mut Report, co: &CodeObject, prog: &Program) {
    let func_at = first_index(
        prog.funcs
            .iter()
            .enumerate()
            .map(|(fi, f)| (f.spec.start, fi)),
    );
    for k in &co.kernels {
        let Some(&fi) = func_at.get(&k.entry) else {
            continue;
        };
        let regs = k.descriptor.registers(&co.target);
        let occ = k.descriptor.occupancy(&co.target);
        let reach = prog.reachable(fi);
        let inserted = reach
            .iter()
            .filter_map(|&i| report.functions.get(i))
            .map(|f| f.inserted_instructions)
            .sum();
        report.kernels.push(KernelReport {
            name: k.name.clone(),
            wave_size: k.descriptor.wave_size(),
            sgprs_before: regs.sgprs,
            sgprs_after: regs.sgprs,
            vgprs: regs.vgprs_allocated,
            vgprs_after: regs.vgprs_allocated,
            occupancy_before: occ.waves_per_simd,
            occupancy_after: occ.waves_per_simd,
            inserted_instructions_reachable: inserted,
        });
    }
}

/// A kernel whose descriptor `bump_registers` changed: name, SGPRs allocated after (`None` on
/// gfx10+), waves per SIMD after, VGPRs allocated after.
type Bumped = (String, Option<u32>, u32, u32);

/// Grows each kernel's granulated SGPR count (gfx9; descriptor) so that its allocation covers
/// `sgprs[kernel]` SGPRs (highest SGPR inserted code writes in its call graph + 1 + 6 extras),
/// and its granulated VGPR count so that it covers `vgprs[kernel]` VGPRs (the VGPR whose lanes
/// hold saved SGPRs + 1). The instrument stage only hands out SGPRs within each kernel's gfx9
/// SGPR budget and [`crate::regs::spill_vgprs`] only VGPRs within its VGPR budget, so
/// occupancy never drops. Returns the kernels changed with their new SGPR allocation, waves
/// per SIMD and VGPR allocation (recomputed from the new descriptor, so the report shows what
/// the hardware will do).
/// A kernel in `prefetched` starts from that descriptor (its new `inst_pref_size`), not the
/// input's.
fn bump_registers(
    co: &CodeObject,
    ed: &mut CodeObjectEditor,
    prefetched: &BTreeMap<String, KernelDescriptor>,
    sgprs: &BTreeMap<String, u32>,
    vgprs: &BTreeMap<String, u32>,
) -> Result<Vec<Bumped>, RewriteError> {
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
        // Start from the descriptor `set_prefetch` wrote, if any, so both updates survive.
        let mut kd = prefetched.get(&k.name).unwrap_or(&k.descriptor).clone();
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
        let occ = kd.occupancy(&co.target);
        let after = kd.registers(&co.target);
        changed.push((
            k.name.clone(),
            after.sgprs,
            occ.waves_per_simd,
            after.vgprs_allocated,
        ));
    }
    Ok(changed)
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
