//! Container-level checks: ELF header, sections, symbols, `.rela.dyn`, kernel descriptors, the
//! metadata note, the `.sqtt_funcmap` section and the `.sqtt_patch` run record.

use rayon::prelude::*;
use rmpv::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use amdgpu_isa::Flow;
use hsaco::elf::{self, Section};
use hsaco::CodeObject;

use crate::funcmap::{self, Funcmap, Row};
use crate::program::scope_rows;
use crate::program::{counterpart, Program, Regs, KEPT_TEXT_SECTION};
use crate::region::Layout;
use crate::{Check, Finding};

/// `R_AMDGPU_RELATIVE64` (AMDGPUUsage "Relocation Records").
const R_AMDGPU_RELATIVE64: u32 = 13;
/// `SHT_STRTAB`.
const SHT_STRTAB: u32 = 3;
/// `SHT_PROGBITS`.
const SHT_PROGBITS: u32 = 1;

/// The rewritten funcmap and what the checks need of it (rows the original already had are not
/// re-checked).
pub(crate) struct FuncmapInfo {
    pub new: Option<Funcmap>,
    /// `R:id:extra_payload_count=N` by id (well-formed rows only).
    pub payload: BTreeMap<u32, u32>,
    /// Marker row names (`F`/`U`/`P`) by id.
    pub names: BTreeMap<u32, String>,
    /// Marker word layout from the `M:` row.
    pub layout: Layout,
    /// Wave size of the `W:` row.
    pub wave: Option<u32>,
    /// Ids of the `F` rows the rewrite added (not among `orig_rows`), by function name, in row
    /// order.
    pub added_f: HashMap<String, Vec<u32>>,
    /// Kernels (`true`) and device functions (`false`) of the rewritten object by symbol name,
    /// with their entry address there (bytes): where an `F:`/`U:` enter marker naming one of
    /// them may stand (aliased kernels share one entry).
    pub symbols: HashMap<String, (bool, u64)>,
}

/// The 14 address-trace row names of the spec ("Address Tracing", funcmap name prefix table).
pub(crate) const ADDR_TRACE_NAMES: [&str; 14] = [
    "addr_trace_load",
    "addr_trace_store",
    "addr_trace_atomic",
    "addr_trace_lds_load",
    "addr_trace_lds_store",
    "addr_trace_lds_atomic",
    "addr_trace_buffer_load",
    "addr_trace_buffer_store",
    "addr_trace_buffer_atomic",
    "addr_trace_struct_buffer_load",
    "addr_trace_struct_buffer_store",
    "addr_trace_struct_buffer_atomic",
    "addr_trace_ds_permute",
    "addr_trace_ds_bpermute",
];

/// `shader_clock_bits=N;shader_clock_shift=S` (spec "GFX12 Shader Clock Packing"); `None`
/// when malformed.
fn parse_m(text: &str) -> Option<(u32, u32)> {
    let (b, s) = text.split_once(';')?;
    let bits = b.strip_prefix("shader_clock_bits=")?.parse().ok()?;
    let shift = s.strip_prefix("shader_clock_shift=")?.parse().ok()?;
    Some((bits, shift))
}

/// What [`interpret`] reads from a funcmap's rows (the fields of [`FuncmapInfo`] of the same
/// names).
struct Interpreted {
    payload: BTreeMap<u32, u32>,
    names: BTreeMap<u32, String>,
    layout: Layout,
    wave: Option<u32>,
}

/// Layout, payload counts, names and wave size of a parsed funcmap, with the consistency rules
/// of the spec ("Funcmap format", "Address Tracing", "GFX12 Shader Clock Packing") checked
/// when `check` is set (the funcmap was written by the rewrite).
fn interpret(
    fm: &Funcmap,
    kernel_waves: &[u32],
    check: bool,
    findings: &mut Vec<Finding>,
) -> Interpreted {
    let mut push = |m: String| {
        if check {
            findings.push(glob(Check::Funcmap, m));
        }
    };
    let names: BTreeMap<u32, String> = fm.by_id.iter().map(|(k, r)| (*k, r.name.clone())).collect();
    let mut payload = BTreeMap::new();
    for r in fm.rows.iter().filter(|r| r.kind == 'R') {
        let Some(id) = r.id else { continue };
        match r
            .name
            .strip_prefix("extra_payload_count=")
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(n) => {
                if payload.insert(id, n).is_some() {
                    push(format!("id {id} has more than one R: row"));
                }
                if !fm.by_id.contains_key(&id) {
                    push(format!("R: row for id {id}, which has no F/U/P row"));
                }
            }
            None => push(format!("malformed R: row {id}:{}", r.name)),
        }
    }
    let mut layout = Layout::Legacy;
    let ms: Vec<&Row> = fm.rows.iter().filter(|r| r.kind == 'M').collect();
    if ms.len() > 1 {
        push(format!("{} M: rows", ms.len()));
    }
    if let Some(m) = ms.first() {
        match parse_m(&m.name) {
            Some((0, _)) => {}
            Some((bits, shift)) if bits < 30 && bits + shift <= 64 => {
                layout = Layout::Packed { bits, shift };
            }
            _ => push(format!("malformed M: row {:?}", m.name)),
        }
    }
    if layout != Layout::Legacy && payload.values().any(|n| *n > 0) {
        push("M: clock packing together with R: payload rows (payload markers need shader_clock_bits=0)".into());
    }
    let ws: Vec<&Row> = fm.rows.iter().filter(|r| r.kind == 'W').collect();
    let wave = ws.first().and_then(|w| w.name.parse::<u32>().ok());
    if ws.len() > 1 {
        push(format!("{} W: rows", ws.len()));
    }
    if let Some(w) = ws.first() {
        match wave {
            Some(32 | 64) => {}
            _ => push(format!("malformed W: row {:?}", w.name)),
        }
    }
    let addr_rows: Vec<&Row> = fm
        .rows
        .iter()
        .filter(|r| r.name.starts_with("addr_trace_") && r.kind != 'R')
        .collect();
    for r in &addr_rows {
        if r.kind != 'P' {
            push(format!("address-trace row {:?} must be a P: row", r.name));
        }
        if !ADDR_TRACE_NAMES.contains(&r.name.as_str()) {
            push(format!("unknown address-trace name {:?}", r.name));
        }
    }
    if !addr_rows.is_empty() {
        match wave {
            None if ws.is_empty() => push("address-trace rows without a W: row".into()),
            Some(w) => {
                if let Some(k) = kernel_waves.iter().find(|k| **k != w) {
                    push(format!("W:{w} disagrees with a kernel's wave size {k}"));
                }
            }
            None => {}
        }
    }
    Interpreted {
        payload,
        names,
        layout,
        wave,
    }
}

fn glob(check: Check, message: String) -> Finding {
    Finding {
        check,
        function: None,
        original_address: None,
        new_address: None,
        message,
    }
}

pub(crate) fn check_header(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    let (a, b) = (&o.elf.header, &n.elf.header);
    let pairs = [
        ("e_flags", u64::from(a.e_flags), u64::from(b.e_flags)),
        ("EI_OSABI", u64::from(a.os_abi), u64::from(b.os_abi)),
        (
            "EI_ABIVERSION",
            u64::from(a.abi_version),
            u64::from(b.abi_version),
        ),
        ("e_type", u64::from(a.e_type), u64::from(b.e_type)),
        ("e_machine", u64::from(a.e_machine), u64::from(b.e_machine)),
    ];
    for (name, x, y) in pairs {
        if x != y {
            findings.push(glob(
                Check::Header,
                format!("{name} changed from {x:#x} to {y:#x}"),
            ));
        }
    }
}

pub(crate) fn check_funcmap(
    o: &CodeObject,
    n: &CodeObject,
    kernel_waves: &[u32],
    findings: &mut Vec<Finding>,
) -> FuncmapInfo {
    let changed = o.funcmap() != n.funcmap();
    // A name that is both a device function and a kernel is a kernel (kernels come last).
    let symbols: HashMap<String, (bool, u64)> = n
        .functions
        .iter()
        .map(|f| (f.name.clone(), (false, f.address)))
        .chain(n.kernels.iter().map(|k| (k.name.clone(), (true, k.entry))))
        .collect();
    let (new, added_f) = check_rows(o, n, &symbols, findings);
    let read = new
        .as_ref()
        .map(|fm| interpret(fm, kernel_waves, changed, findings));
    let (payload, names, layout, wave) = match read {
        Some(i) => (i.payload, i.names, i.layout, i.wave),
        None => (BTreeMap::new(), BTreeMap::new(), Layout::Legacy, None),
    };
    FuncmapInfo {
        new,
        payload,
        names,
        layout,
        wave,
        added_f,
        symbols,
    }
}

/// Checks the rewritten funcmap's rows against the original's and the object's functions and
/// kernels (`symbols`, as [`FuncmapInfo::symbols`]); returns the parsed rewritten funcmap and
/// the ids of the `F` rows it added, by function name, in row order.
fn check_rows(
    o: &CodeObject,
    n: &CodeObject,
    symbols: &HashMap<String, (bool, u64)>,
    findings: &mut Vec<Finding>,
) -> (Option<Funcmap>, HashMap<String, Vec<u32>>) {
    let info = |new: Option<Funcmap>, orig_rows: Vec<Row>| {
        let mut added_f: HashMap<String, Vec<u32>> = HashMap::new();
        if let Some(fm) = &new {
            let old: HashSet<&Row> = orig_rows.iter().collect();
            for r in fm.rows.iter().filter(|r| r.kind == 'F' && !old.contains(r)) {
                if let Some(id) = r.id {
                    added_f.entry(r.name.clone()).or_default().push(id);
                }
            }
        }
        (new, added_f)
    };
    let count = n
        .elf
        .sections
        .iter()
        .filter(|s| s.name == ".sqtt_funcmap")
        .count();
    if count > 1 {
        findings.push(glob(
            Check::Funcmap,
            format!("{count} sections named .sqtt_funcmap (consumers read only the first)"),
        ));
    }
    let (od, nd) = (o.funcmap(), n.funcmap());
    let orig_rows = od.map(|d| funcmap::parse(d).rows).unwrap_or_default();
    let new = nd.map(funcmap::parse);
    if od == nd {
        return info(new, orig_rows);
    }
    let (Some(data), Some(fm)) = (nd, new.as_ref()) else {
        findings.push(glob(
            Check::Funcmap,
            "the original .sqtt_funcmap was removed".into(),
        ));
        return info(new, orig_rows);
    };
    let nuls = data.iter().rev().take_while(|b| **b == 0).count();
    if nuls != 1 {
        findings.push(glob(
            Check::Funcmap,
            format!("section must end with exactly one NUL, found {nuls}"),
        ));
    }
    if data.iter().rev().skip(nuls).any(|b| *b == 0) {
        findings.push(glob(
            Check::Funcmap,
            "NUL inside the rows (rows must be separated by \\n)".into(),
        ));
    }
    for id in &fm.duplicate_ids {
        findings.push(glob(
            Check::Funcmap,
            format!("id {id} is used by more than one row"),
        ));
    }
    for (line, text) in &fm.rejected_lines {
        findings.push(glob(
            Check::Funcmap,
            format!("line {line} is not a valid row: {text:?}"),
        ));
    }
    if fm.by_id.contains_key(&0) {
        findings.push(glob(Check::Funcmap, "id 0 is reserved".into()));
    }
    let rows: HashSet<&Row> = fm.rows.iter().collect();
    let old_rows: HashSet<&Row> = orig_rows.iter().collect();
    for r in &orig_rows {
        if !rows.contains(r) {
            findings.push(glob(
                Check::Funcmap,
                format!(
                    "original row {}:{:?}:{} lost in the merge",
                    r.kind, r.id, r.name
                ),
            ));
        }
    }
    let added_f = fm
        .rows
        .iter()
        .filter(|r| r.kind == 'F' && !old_rows.contains(r));
    let functions: HashSet<&str> = n.functions.iter().map(|f| f.name.as_str()).collect();
    let unnamed: Vec<&Row> = added_f
        .filter(|r| !functions.contains(r.name.as_str()))
        .collect();
    // Rows of inlined functions (no symbol) must name a function the DWARF says was inlined.
    let inlined = if unnamed.is_empty() {
        Default::default()
    } else {
        crate::inlined::inlined_names(o)
    };
    for r in unnamed {
        if !inlined.contains(&r.name) {
            findings.push(glob(
                Check::Funcmap,
                format!(
                    "F row {:?} names no device function of the code object and no inlined function of its DWARF",
                    r.name
                ),
            ));
        }
    }
    check_added_names(n, fm, symbols, &old_rows, findings);
    info(new, orig_rows)
}

/// Point-marker names a post-link rewrite gives `P:` rows (spec "Barrier marker
/// placement", "Memory operation markers"); address-trace rows carry one of
/// [`ADDR_TRACE_NAMES`] ("Address Tracing": the prefix makes the decoder parse the block).
const POINT_NAMES: [&str; 5] = [
    "barrier",
    "barrier_signal",
    "barrier_wait",
    "vmem_load",
    "vmem_store",
];

/// Names of the `K:`, `U:` and `P:` rows the rewrite added (rows not in the original's
/// funcmap): a `K:` row names a kernel of the object (the decoder lists kernels from them),
/// and once one kernel has a row every kernel has one; a `U:` row is a kernel scope, named
/// after a kernel, or a loop or region scope naming a function symbol ([`scope_rows::loop_scope_symbol`]); a `P:` row carries one of [`POINT_NAMES`] or [`ADDR_TRACE_NAMES`], or names a function symbol as a loop-iteration or user-named point ([`scope_rows::point_symbol`]).
/// `symbols` tells kernels from device functions (as [`FuncmapInfo::symbols`]).
fn check_added_names(
    n: &CodeObject,
    fm: &Funcmap,
    symbols: &HashMap<String, (bool, u64)>,
    old_rows: &HashSet<&Row>,
    findings: &mut Vec<Finding>,
) {
    let is_kernel = |name: &str| symbols.get(name).is_some_and(|&(kernel, _)| kernel);
    for r in fm.rows.iter().filter(|r| !old_rows.contains(r)) {
        let bad = match r.kind {
            'U' => match scope_rows::loop_scope_symbol(&r.name) {
                Some(s) => !symbols.contains_key(s),
                None => !is_kernel(&r.name),
            },
            'K' => !is_kernel(&r.name),
            'P' => {
                let name = r.name.as_str();
                let iter = name
                    .strip_prefix("iter ")
                    .and_then(scope_rows::loop_scope_symbol)
                    .or_else(|| scope_rows::point_symbol(name))
                    .is_some_and(|s| symbols.contains_key(s));
                !iter && !POINT_NAMES.contains(&name) && !ADDR_TRACE_NAMES.contains(&name)
            }
            _ => false,
        };
        if bad {
            let want = match r.kind {
                'K' => "a kernel of the code object",
                'U' => "a kernel of the code object (kernel scope), a loop or a user-named region of one of its functions (loop SYMBOL+0xOFFSET, region NAME SYMBOL+0xOFFSET)",
                _ => "a barrier, memory, address-trace, loop-iteration or user-named point (iter loop SYMBOL+0xOFFSET, point NAME SYMBOL+0xOFFSET)",
            };
            findings.push(glob(
                Check::Funcmap,
                format!("{}: row {:?} does not name {want}", r.kind, r.name),
            ));
        }
    }
    // A funcmap that lists kernels lists them all (the rewrite adds a K: row for every kernel):
    // a blanked or merged row would drop a kernel from the decoder's list.
    let listed: HashSet<&str> = fm
        .rows
        .iter()
        .filter(|r| r.kind == 'K')
        .map(|r| r.name.as_str())
        .collect();
    if !listed.is_empty() {
        for k in n
            .kernels
            .iter()
            .filter(|k| !listed.contains(k.name.as_str()))
        {
            findings.push(glob(
                Check::Funcmap,
                format!(
                    "kernel {} has no K: row although the funcmap lists kernels",
                    k.name
                ),
            ));
        }
    }
}

fn is_skipped_content(s: &Section) -> bool {
    s.is_exec()
        || matches!(
            s.sh_type,
            elf::SHT_SYMTAB | elf::SHT_DYNSYM | elf::SHT_RELA | SHT_STRTAB
        )
        || s.name.starts_with(".debug_")
        || s.name == ".sqtt_funcmap"
        || s.name == PATCH_SECTION
}

/// Name of the section recording a sqtt-patch run.
const PATCH_SECTION: &str = ".sqtt_patch";

/// The `.sqtt_patch` section of a rewrite (written by `sqtt-rewrite`'s encode stage): exactly
/// one, `SHT_PROGBITS` without `SHF_ALLOC` (never loaded), holding one JSON line with exactly the
/// keys `tool` (`"sqtt-patch"`), `version` and `options` (strings; `options` is the rewriter's
/// `Debug` text, which has no stable format, so only its kind is checked). The original may have
/// one too (re-instrumentation with `--force` replaces it). A rewritten file byte-identical to the
/// original (an empty rewrite) is not checked.
pub(crate) fn check_patch_record(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    if o.bytes == n.bytes {
        return;
    }
    let records: Vec<&Section> = n
        .elf
        .sections
        .iter()
        .skip(1)
        .filter(|s| s.name == PATCH_SECTION)
        .collect();
    let [s] = records[..] else {
        findings.push(glob(
            Check::Sections,
            format!(
                "the rewritten object has {} {PATCH_SECTION} sections; a rewrite has exactly one",
                records.len()
            ),
        ));
        return;
    };
    if s.sh_type != SHT_PROGBITS || s.flags != 0 {
        findings.push(glob(
            Check::Sections,
            format!(
                "{PATCH_SECTION} has type {:#x} and flags {:#x}; a rewrite writes a non-allocated SHT_PROGBITS section without flags",
                s.sh_type, s.flags
            ),
        ));
    }
    if !is_patch_record(n.section_data(s)) {
        findings.push(glob(
            Check::Sections,
            format!(
                "{PATCH_SECTION} is not the run record a rewrite writes (one JSON line with the strings tool \"sqtt-patch\", version and options)"
            ),
        ));
    }
}

/// `data` is one line (ending in a newline) holding a JSON object with exactly the string keys
/// `tool` (`"sqtt-patch"`), `version` and `options`.
fn is_patch_record(data: &[u8]) -> bool {
    let Some(line) = data.strip_suffix(b"\n").filter(|l| !l.contains(&b'\n')) else {
        return false;
    };
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice(line) else {
        return false;
    };
    m.len() == 3
        && m.get("tool").and_then(|v| v.as_str()) == Some("sqtt-patch")
        && m.get("version").is_some_and(|v| v.is_string())
        && m.get("options").is_some_and(|v| v.is_string())
}

/// How messages name section `s`: its name, or its index when the name is empty (session-17
/// fresh tester: "section  type/flags changed").
fn shown(s: &Section) -> String {
    match s.name.as_str() {
        "" => format!("[{}] (empty name)", s.index),
        name => name.to_string(),
    }
}

pub(crate) fn check_sections(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    for s in o.elf.sections.iter().skip(1) {
        let Some(ns) = counterpart(n, s) else {
            findings.push(glob(
                Check::Sections,
                format!("section {} is missing", shown(s)),
            ));
            continue;
        };
        if s.sh_type != ns.sh_type || s.flags != ns.flags {
            findings.push(glob(
                Check::Sections,
                format!("section {} type/flags changed", shown(s)),
            ));
        }
        if is_skipped_content(s) {
            continue;
        }
        if s.sh_type == elf::SHT_NOBITS {
            if s.size != ns.size {
                findings.push(glob(
                    Check::Sections,
                    format!(
                        "section {} size changed from {:#x} to {:#x}",
                        shown(s),
                        s.size,
                        ns.size
                    ),
                ));
            }
            continue;
        }
        let (a, b) = (o.section_data(s), n.section_data(ns));
        if s.sh_type == elf::SHT_NOTE {
            let notes = |co: &CodeObject, sec: &Section| {
                hsaco::metadata::parse_notes(co.section_data(sec), sec.offset).map(|v| {
                    v.into_iter()
                        .filter(|x| x.n_type != hsaco::metadata::NT_AMDGPU_METADATA)
                        .map(|x| (x.name, x.n_type, x.desc))
                        .collect::<Vec<_>>()
                })
            };
            if notes(o, s).ok() != notes(n, ns).ok() {
                findings.push(glob(
                    Check::Sections,
                    format!(
                        "notes other than the AMDGPU metadata changed in {}",
                        shown(s)
                    ),
                ));
            }
            continue;
        }
        // Kernel descriptors inside this section are checked field by field.
        let kd_ranges: Vec<(usize, usize)> = o
            .kernels
            .iter()
            .filter(|k| k.kd_offset >= s.offset && k.kd_offset < s.offset + s.size)
            .map(|k| {
                (
                    (k.kd_offset - s.offset) as usize,
                    (k.kd_offset - s.offset) as usize + 64,
                )
            })
            .collect();
        let in_kd = |i: usize| kd_ranges.iter().any(|(x, y)| i >= *x && i < *y);
        if a.len() != b.len() {
            findings.push(glob(
                Check::Sections,
                format!(
                    "section {} size changed from {:#x} to {:#x}",
                    shown(s),
                    a.len(),
                    b.len()
                ),
            ));
        } else if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i] && !in_kd(i)) {
            findings.push(glob(
                Check::Sections,
                format!("section {} contents changed at offset {i:#x}", shown(s)),
            ));
        }
    }
    for s in n.elf.sections.iter().skip(1) {
        // `.text` kept in place: the instrumented functions' section (docs/left-alone.md).
        if s.name == KEPT_TEXT_SECTION && counterpart(o, s).is_none() {
            if s.sh_type != SHT_PROGBITS || s.flags != elf::SHF_ALLOC | elf::SHF_EXECINSTR {
                findings.push(glob(
                    Check::Sections,
                    format!(
                        "{KEPT_TEXT_SECTION} has type {:#x} and flags {:#x}; a rewrite that keeps .text in place writes SHT_PROGBITS with SHF_ALLOC | SHF_EXECINSTR",
                        s.sh_type, s.flags
                    ),
                ));
            }
            continue;
        }
        if counterpart(o, s).is_none() && s.name != ".sqtt_funcmap" && s.name != PATCH_SECTION {
            findings.push(glob(
                Check::Sections,
                format!("unexpected new section {}", shown(s)),
            ));
        }
    }
}

fn section_name(co: &CodeObject, idx: u16) -> Option<&str> {
    co.elf
        .sections
        .get(usize::from(idx))
        .map(|s| s.name.as_str())
}

/// Maps an original code address: function entries to the rewritten entry (so the entry run
/// executes), other instructions to their allowed landings, the end of a body to the new end.
fn code_targets(p: &Program, a: u64) -> Option<Vec<u64>> {
    // The end of `.text` (kernels without code sit there) stays its end; kept in place, it
    // stays where it is.
    if a == p.otext.end() {
        return Some(vec![p.kept.map_or(p.ntext.end(), |k| k.end())]);
    }
    if p.opaque_at(a).is_some() {
        return Some(vec![a]);
    }
    if let Some(f) = p.func_at(a).and_then(|fi| p.funcs.get(fi)) {
        return f.new_start.map(|s| vec![s]);
    }
    if let Some((_, _, v)) = p.landing(a) {
        return Some(v);
    }
    // Bodies ascend and do not overlap, so their ends ascend too: the first function ending at
    // or after `a` is the only one that can end there (a binary search, not a scan per symbol).
    let i = p.funcs.partition_point(|f| f.orig_end < a);
    p.funcs
        .get(i)
        .filter(|f| f.orig_end == a)
        .and_then(|f| f.new_body_end())
        .map(|e| vec![e])
}

pub(crate) fn check_symbols(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    findings: &mut Vec<Finding>,
) {
    for table in [elf::SymbolTable::Symtab, elf::SymbolTable::Dynsym] {
        let os: Vec<_> = o.table_symbols(table).map(|s| &s.symbol).collect();
        let ns: Vec<_> = n.table_symbols(table).map(|s| &s.symbol).collect();
        if os.len() != ns.len() {
            findings.push(glob(
                Check::Symbols,
                format!(
                    "{table:?} has {} symbols, the original {}",
                    ns.len(),
                    os.len()
                ),
            ));
            continue;
        }
        for (a, b) in os.iter().zip(&ns) {
            let sym = |message: String| Finding {
                check: Check::Symbols,
                function: Some(a.name.clone()),
                original_address: Some(a.value),
                new_address: Some(b.value),
                message,
            };
            // Kept in place, a function copied to the new code section names it.
            let moved_to_kept_text = p.kept.is_some()
                && section_name(o, a.shndx) == Some(".text")
                && section_name(n, b.shndx) == Some(KEPT_TEXT_SECTION)
                && p.ntext.contains(b.value);
            if a.name != b.name
                || a.st_type != b.st_type
                || a.bind != b.bind
                || a.other != b.other
                || (section_name(o, a.shndx) != section_name(n, b.shndx) && !moved_to_kept_text)
            {
                findings.push(sym(format!(
                    "{table:?} entry {} changed name, type, binding, visibility or section",
                    a.index
                )));
                continue;
            }
            if a.shndx == elf::SHN_ABS || a.shndx == elf::SHN_UNDEF {
                continue;
            }
            // Kept in place, a symbol's value lies in the code section it names: `.text` (kept)
            // or the new section.
            if let Some(kept) = p.kept {
                let named = section_name(n, b.shndx);
                let inside = |t: &crate::program::Text| t.contains(b.value) || b.value == t.end();
                let wrong =
                    (named == Some(".text") && !inside(&kept) && a.st_type != elf::STT_SECTION)
                        || (named == Some(KEPT_TEXT_SECTION) && !inside(&p.ntext));
                if wrong {
                    findings.push(sym(format!(
                        "value {:#x} lies outside the section it names ({})",
                        b.value,
                        named.unwrap_or_default()
                    )));
                    continue;
                }
            }
            let in_text = p.otext.contains(a.value) || (a.value == p.otext.end() && a.value > 0);
            let in_exec = o
                .elf
                .sections
                .get(usize::from(a.shndx))
                .is_some_and(Section::is_exec);
            if !in_exec {
                if b.value != p.map_data(a.value) || a.size != b.size {
                    findings.push(sym(format!(
                        "data symbol should be at {:#x} size {:#x}, is size {:#x}",
                        p.map_data(a.value),
                        a.size,
                        b.size
                    )));
                }
                continue;
            }
            if a.st_type == elf::STT_SECTION {
                if b.value != p.kept.map_or(p.ntext.addr, |k| k.addr) {
                    findings.push(sym("section symbol does not point at .text".into()));
                }
                continue;
            }
            if !in_text {
                continue;
            }
            match code_targets(p, a.value) {
                Some(v) if v.contains(&b.value) => {}
                Some(v) => findings.push(sym(format!(
                    "value should be {:#x}",
                    v.first().copied().unwrap_or_default()
                ))),
                None => findings.push(sym("value is not an original instruction address".into())),
            }
            if a.st_type == elf::STT_FUNC && a.size > 0 {
                if let Some(f) = p.func_at(a.value).map(|fi| &p.funcs[fi]) {
                    let (Some(start), Some(end)) = (f.new_start, f.new_body_end()) else {
                        continue;
                    };
                    if b.value.saturating_add(b.size) < end
                        || start.saturating_add(b.size) > f.new_region_end
                    {
                        findings.push(sym(format!(
                            "size {:#x} does not cover the rewritten body {:#x}..{end:#x}",
                            b.size, start
                        )));
                    }
                }
            }
        }
    }
}

pub(crate) fn check_relocations(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    findings: &mut Vec<Finding>,
) {
    let (Ok(or), Ok(nr)) = (o.elf.relas(&o.bytes), n.elf.relas(&n.bytes)) else {
        findings.push(glob(
            Check::Relocations,
            "relocation sections do not parse".into(),
        ));
        return;
    };
    if or.len() != nr.len() {
        findings.push(glob(
            Check::Relocations,
            format!("{} relocations, the original has {}", nr.len(), or.len()),
        ));
        return;
    }
    for (a, b) in or.iter().zip(&nr) {
        let rel = |message: String| Finding {
            check: Check::Relocations,
            function: None,
            original_address: Some(a.r_offset),
            new_address: Some(b.r_offset),
            message,
        };
        if a.r_type != b.r_type || a.r_sym != b.r_sym || b.r_offset != p.map_data(a.r_offset) {
            findings.push(rel(format!(
                "relocation at file offset {:#x} changed type, symbol or offset",
                b.entry_offset
            )));
            continue;
        }
        if a.r_type != R_AMDGPU_RELATIVE64 {
            if a.addend != b.addend {
                findings.push(rel("addend changed".into()));
            }
            continue;
        }
        let (x, y) = (a.addend as u64, b.addend as u64);
        let ok = if p.otext.contains(x) {
            code_targets(p, x).is_some_and(|v| v.first() == Some(&y))
        } else {
            y == p.map_data(x)
        };
        if !ok {
            findings.push(rel(format!(
                "R_AMDGPU_RELATIVE64 addend {x:#x} not mapped: found {y:#x}"
            )));
        }
    }
}

/// Highest (SGPR, VGPR, AGPR) numbers + 1 used by some code.
type Usage = (u32, u32, u32);

/// The larger of two usages, per register file.
fn max_usage(a: Usage, b: Usage) -> Usage {
    (a.0.max(b.0), a.1.max(b.1), a.2.max(b.2))
}

/// Highest (SGPR, VGPR, AGPR) numbers + 1 used by a set of instructions, from their registers.
fn usage(regs: impl Iterator<Item = Regs>) -> Usage {
    let mut m = (0u32, 0u32, 0u32);
    for r in regs {
        m.0 = m.0.max(u32::from(r.sgpr_top()));
        m.1 = m.1.max(u32::from(r.vgpr_top));
        m.2 = m.2.max(u32::from(r.agpr_top));
    }
    m
}

/// Functions reachable from `root` through calls (any unresolved call: every function).
fn callees(p: &Program, root: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::from([root]);
    let mut stack = vec![root];
    while let Some(fi) = stack.pop() {
        let f = &p.funcs[fi];
        let mut next = Vec::new();
        for b in &f.builders {
            let Some(g) = f.orig.get(b.getpc) else {
                continue;
            };
            if let Some(t) = b.target_with(g.addr, |k| f.orig.get(k).map(|o| f.inst(o))) {
                next.extend(p.func_at(t));
            }
        }
        for o in f.orig.iter().filter(|o| f.regs(o).has(Regs::CALL)) {
            let i = f.inst(o);
            if i.flow() == Flow::Call {
                match i.branch_target(o.addr) {
                    Some(t) => next.extend(p.func_at(t)),
                    None if f.builders.is_empty() => next.extend(0..p.funcs.len()),
                    None => {}
                }
            }
        }
        for x in next {
            if seen.insert(x) {
                stack.push(x);
            }
        }
    }
    seen
}

pub(crate) fn check_descriptors(
    o: &CodeObject,
    n: &CodeObject,
    p: &Program,
    inserted_top: &BTreeMap<usize, u16>,
    findings: &mut Vec<Finding>,
    warnings: &mut Vec<Finding>,
) {
    let gen = n.target.generation();
    // The first rewritten kernel of each name (a linear search per kernel was quadratic).
    let mut by_name: HashMap<&str, &hsaco::Kernel> = HashMap::new();
    for k in &n.kernels {
        by_name.entry(k.name.as_str()).or_insert(k);
    }
    // Register usage (original, rewritten) per function, computed once (kernels share
    // callees), in parallel.
    let func_use: Vec<(Usage, Usage)> = p
        .funcs
        .par_iter()
        .map(|g| {
            let a = usage(g.orig.iter().map(|x| *g.regs(x)));
            // A copy with the original's bytes has the original's registers (decoded once);
            // any other copy (a relocated branch, a changed instruction) is decoded.
            let b = usage(
                g.orig
                    .iter()
                    .filter_map(|x| {
                        if x.copied_verbatim() {
                            Some(*g.regs(x))
                        } else {
                            g.copy(x).map(|n| Regs::of_inst(&n.inst))
                        }
                    })
                    .chain(g.inserted_regs(0..g.inserted.len()).copied()),
            );
            (a, b)
        })
        .collect();
    for ok in &o.kernels {
        let Some(&nk) = by_name.get(ok.name.as_str()) else {
            continue;
        };
        let Some(fi) = p.func_at(ok.entry) else {
            continue;
        };
        let f = &p.funcs[fi];
        let kf = |message: String| Finding {
            check: Check::Descriptor,
            function: Some(ok.name.clone()),
            original_address: Some(ok.entry),
            new_address: Some(nk.entry),
            message,
        };
        if Some(nk.entry) != f.new_start {
            findings.push(kf(format!(
                "kernel_code_entry_byte_offset points at {:#x}, the kernel starts at {:#x}",
                nk.entry,
                f.new_start.unwrap_or_default()
            )));
        }
        if nk.entry % 256 != 0 {
            findings.push(kf("kernel entry is not 256-byte aligned".into()));
        }
        // Every field except entry offset, SGPR granule, a grown VGPR granule (VGPR lanes that
        // hold saved SGPRs, issue 12; not on the gfx90a family, whose granule also counts
        // AGPRs) and gfx11+ INST_PREF_SIZE is unchanged. Waves per SIMD are checked below.
        let mut want = ok.descriptor.clone();
        want.kernel_code_entry_byte_offset = nk.descriptor.kernel_code_entry_byte_offset;
        want.set_granulated_sgpr_count(nk.descriptor.granulated_sgpr_count());
        let vgpr_granule = nk.descriptor.granulated_vgpr_count();
        if !n.target.has_gfx90a_insts() && vgpr_granule > ok.descriptor.granulated_vgpr_count() {
            want.set_granulated_vgpr_count(vgpr_granule);
        }
        if let Some(v) = nk.descriptor.inst_pref_size(gen) {
            want.set_inst_pref_size(gen, v);
        }
        if want.encode() != nk.descriptor.encode() {
            let (a, b) = (want.encode(), nk.descriptor.encode());
            let at = a
                .iter()
                .zip(b.iter())
                .position(|(x, y)| x != y)
                .unwrap_or_default();
            findings.push(kf(format!("descriptor byte {at:#x} changed (only the entry offset, SGPR granule, a grown VGPR granule and INST_PREF_SIZE may change)")));
        }
        // Kernarg preload (AMDGPUUsage "Preloaded Kernel Arguments"): firmware may enter at
        // entry + 256, so the kernel's first 256 bytes keep their layout: no insertion there and
        // every original instruction at its original offset. Bytes are compared by the alignment
        // check (relocated PC-relative fields may differ); bytes past a shorter body belong to
        // other functions.
        // Only kernels that carry the prologue: an `s_branch` inside the first 256 bytes to
        // entry + 256 (gfx90a/gfx942/gfx950 emit it; gfx1250 preloads without one).
        // `f.orig` ascends by address: only the instructions of those 256 bytes are looked at,
        // and only for kernels that preload.
        let has_prologue = || {
            let first = f.orig.partition_point(|x| x.addr < ok.entry);
            f.orig[first..]
                .iter()
                .take_while(|x| x.addr - ok.entry < 256)
                .any(|x| {
                    let i = f.inst(x);
                    matches!(i.flow(), Flow::Branch { conditional: false })
                        && i.branch_target(x.addr) == Some(ok.entry + 256)
                })
        };
        if ok.descriptor.kernarg_preload_length() > 0 && has_prologue() {
            let moved = f
                .orig
                .iter()
                .take_while(|x| x.addr - ok.entry < 256)
                .find(|x| {
                    f.copy(x)
                        .is_none_or(|n| n.addr.wrapping_sub(nk.entry) != x.addr - ok.entry)
                });
            if let Some(x) = moved {
                let at = f.copy(x).map_or("nowhere".to_string(), |n| {
                    format!("+{:#x}", n.addr.wrapping_sub(nk.entry))
                });
                findings.push(kf(format!("kernarg-preload kernel: instruction at +{:#x} of the first 256 bytes moved to {at}", x.addr - ok.entry)));
            }
        }
        // Register coverage of the kernel and its callees.
        let (mut orig_use, mut new_use) = ((0, 0, 0), (0, 0, 0));
        for i in callees(p, fi) {
            let (a, b) = func_use[i];
            orig_use = max_usage(orig_use, a);
            new_use = max_usage(new_use, b);
        }
        let waves =
            |co: &CodeObject, k: &hsaco::Kernel| k.descriptor.occupancy(&co.target).waves_per_simd;
        let (wo, wn) = (waves(o, ok), waves(n, nk));
        if wn < wo {
            findings.push(kf(format!(
                "waves per SIMD drop from {wo} to {wn} (occupancy must not be lowered)"
            )));
        }
        let regs = nk.descriptor.registers(&n.target);
        let vgpr_cap = if n.target.has_gfx90a_insts() {
            regs.arch_vgprs
        } else {
            regs.vgprs_allocated
        };
        let agpr_cap = if n.target.has_gfx90a_insts() {
            regs.agprs
        } else {
            regs.vgprs_allocated
        };
        if new_use.1 > vgpr_cap && new_use.1 > orig_use.1 {
            findings.push(kf(format!(
                "descriptor allocates {vgpr_cap} VGPRs, code uses {}",
                new_use.1
            )));
        }
        if new_use.2 > agpr_cap && new_use.2 > orig_use.2 {
            findings.push(kf(format!(
                "descriptor allocates {agpr_cap} AGPRs, code uses {}",
                new_use.2
            )));
        }
        if let Some(s) = regs.sgprs {
            if new_use.0 > s && new_use.0 > orig_use.0 {
                findings.push(kf(format!(
                    "descriptor allocates {s} SGPRs, code uses {}",
                    new_use.0
                )));
            }
        }
        check_metadata(
            o,
            n,
            ok,
            nk,
            inserted_top.get(&fi).copied(),
            findings,
            warnings,
        );
    }
}

/// The metadata notes outside `amdhsa.kernels` (`amdhsa.version`, `amdhsa.target`,
/// `amdhsa.printf`, ...) must be unchanged: no rewrite edits them.
pub(crate) fn check_metadata_root(o: &CodeObject, n: &CodeObject, findings: &mut Vec<Finding>) {
    let mut report = |message: String| {
        findings.push(Finding {
            check: Check::Metadata,
            function: None,
            original_address: None,
            new_address: None,
            message,
        })
    };
    for (om, nm) in o.metadata.iter().zip(&n.metadata) {
        compare_entries(
            om.root_entries().into_iter(),
            nm.root_entries().into_iter(),
            &[],
            &mut report,
        );
    }
    if o.metadata.len() != n.metadata.len() {
        report(format!(
            "{} metadata notes became {}",
            o.metadata.len(),
            n.metadata.len()
        ));
    }
}

/// Reports (through `report`) every key of two msgpack maps (metadata note entries) that is
/// missing from the new map, added to it, repeated more often than in the old one, or whose
/// value differs; keys in `own_rules` are checked for presence only (their values have rules of
/// their own).
fn compare_entries<'a>(
    old: impl Iterator<Item = &'a (Value, Value)>,
    new: impl Iterator<Item = &'a (Value, Value)>,
    own_rules: &[&str],
    report: &mut dyn FnMut(String),
) {
    let name = |k: &Value| k.as_str().map_or_else(|| k.to_string(), str::to_string);
    let value_checked = |k: &Value| !k.as_str().is_some_and(|k| own_rules.contains(&k));
    let old: Vec<&(Value, Value)> = old.collect();
    let new: Vec<&(Value, Value)> = new.collect();
    let count = |m: &[&(Value, Value)], k: &Value| m.iter().filter(|(x, _)| x == k).count();
    for (i, (k, _)) in new.iter().enumerate() {
        let (a, b) = (count(&old, k), count(&new, k));
        if b > 1 && b != a && !new[..i].iter().any(|(x, _)| x == k) {
            report(format!("{} appears {b} times (was {a})", name(k)));
        }
    }
    for (k, v) in &old {
        match new.iter().find(|(nk, _)| nk == k) {
            Some((_, nv)) if value_checked(k) && nv != v => {
                let (path, a, b) = first_difference(name(k), v, nv);
                report(format!("{path} changed from {a} to {b}"))
            }
            Some(_) => {}
            None => report(format!("{} ({v}) removed", name(k))),
        }
    }
    for (k, v) in &new {
        if !old.iter().any(|(ok, _)| ok == k) {
            report(format!("{} ({v}) added", name(k)));
        }
    }
}

/// The innermost place where two msgpack values differ, as (path, old part, new part): arrays of
/// the same length descend into their first differing element (`.args[3]`), maps with the same
/// keys in the same order into their first differing value (`.args[3].size`); anything else is
/// the difference itself. `path` names `old` and `new`.
fn first_difference<'a>(
    mut path: String,
    mut old: &'a Value,
    mut new: &'a Value,
) -> (String, &'a Value, &'a Value) {
    loop {
        let inner = match (old, new) {
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find(|(_, (x, y))| x != y)
                .map(|(i, (x, y))| (format!("{path}[{i}]"), x, y)),
            (Value::Map(a), Value::Map(b))
                if a.len() == b.len() && a.iter().zip(b).all(|((x, _), (y, _))| x == y) =>
            {
                a.iter()
                    .zip(b)
                    .find(|((_, x), (_, y))| x != y)
                    .map(|((k, x), (_, y))| {
                        let key = k.as_str().map_or_else(|| format!("[{k}]"), str::to_string);
                        (format!("{path}{key}"), x, y)
                    })
            }
            _ => None,
        };
        match inner {
            Some((p, a, b)) => (path, old, new) = (p, a, b),
            None => return (path, old, new),
        }
    }
}

fn check_metadata(
    o: &CodeObject,
    n: &CodeObject,
    ok: &hsaco::Kernel,
    nk: &hsaco::Kernel,
    reserved: Option<u16>,
    findings: &mut Vec<Finding>,
    warnings: &mut Vec<Finding>,
) {
    let (Some((om, oi)), Some((nm, ni))) = (o.kernel_metadata(ok), n.kernel_metadata(nk)) else {
        if ok.metadata_index.is_some() {
            findings.push(Finding {
                check: Check::Metadata,
                function: Some(ok.name.clone()),
                original_address: None,
                new_address: None,
                message: "kernel missing from the metadata note".into(),
            });
        }
        return;
    };
    let mf = |message: String| Finding {
        check: Check::Metadata,
        function: Some(ok.name.clone()),
        original_address: None,
        new_address: None,
        message,
    };
    // Every other key is the compiler's and no rewrite changes it (`.kernarg_segment_size`,
    // `.wavefront_size`, `.args`, ...): the rewriter edits `.sgpr_count` only, and the register
    // counts and segment sizes have their own value rules below (but must stay present, once).
    let own_rules = [
        ".sgpr_count",
        ".vgpr_count",
        ".group_segment_fixed_size",
        ".private_segment_fixed_size",
    ];
    if let (Some(oe), Some(ne)) = (om.kernel_entry(oi), nm.kernel_entry(ni)) {
        compare_entries(oe.iter(), ne.iter(), &own_rules, &mut |m| {
            findings.push(mf(m))
        });
    }
    let (od, d) = (&ok.descriptor, &nk.descriptor);
    for (key, old_desc, desc) in [
        (
            ".group_segment_fixed_size",
            od.group_segment_fixed_size,
            d.group_segment_fixed_size,
        ),
        (
            ".private_segment_fixed_size",
            od.private_segment_fixed_size,
            d.private_segment_fixed_size,
        ),
    ] {
        let (a, b) = (om.kernel_u64(oi, key), nm.kernel_u64(ni, key));
        if a != b {
            findings.push(mf(format!("{key} changed from {a:?} to {b:?}")));
        }
        let Some(b) = b.filter(|&b| b != u64::from(desc)) else {
            continue;
        };
        // What the input says is the input's business: a disagreement the input already had,
        // with the same two values, is kept as it is and only warned about; any other
        // disagreement is one the rewrite made.
        if a == Some(b) && old_desc == desc {
            warnings.push(mf(format!(
                "{key} {b} in the metadata note disagrees with the descriptor ({desc}), as in the input"
            )));
        } else {
            findings.push(mf(format!(
                "{key} Some({b}) disagrees with the descriptor ({desc})"
            )));
        }
    }
    let regs = d.registers(&n.target);
    // A grown VGPR allocation is for VGPRs inserted code uses beyond the input's allocation:
    // the note's `.vgpr_count` must say so too (issue 31: note, report and descriptor agree).
    let old_alloc = od.registers(&o.target).vgprs_allocated;
    if regs.vgprs_allocated > old_alloc {
        match nm.kernel_u64(ni, ".vgpr_count") {
            Some(v) if v > u64::from(old_alloc) => {}
            v => findings.push(mf(format!(
                ".vgpr_count {v:?} does not cover the VGPR allocation grown from {old_alloc} to {}",
                regs.vgprs_allocated
            ))),
        }
    }
    for (key, cap) in [
        (".sgpr_count", regs.sgprs),
        (".vgpr_count", Some(regs.vgprs_allocated)),
    ] {
        let (a, b) = (om.kernel_u64(oi, key), nm.kernel_u64(ni, key));
        if let (Some(a), Some(b)) = (a, b) {
            if b < a {
                findings.push(mf(format!("{key} decreased from {a} to {b}")));
            }
            if let Some(c) = cap.filter(|&c| b > u64::from(c) && b != a) {
                findings.push(mf(format!(
                    "{key} {b} exceeds the descriptor allocation {c}"
                )));
            }
            if key == ".sgpr_count" {
                // gfx10+ descriptors carry no SGPR bound: the target's ceiling is the guard.
                let most = n.target.max_sgpr_count();
                if b > u64::from(most) && b > a {
                    findings.push(mf(format!(
                        ".sgpr_count {b} exceeds the {most} SGPRs {} can have",
                        n.target.processor
                    )));
                }
                if let Some(r) = reserved.filter(|r| b < u64::from(*r) + 1) {
                    findings.push(mf(format!(
                        ".sgpr_count {b} does not cover s{r}, which inserted code writes"
                    )));
                }
            }
        }
    }
}
