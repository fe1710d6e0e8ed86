//! [`Check::Funcmap`]: the rewritten `.sqtt_funcmap` section (spec "Funcmap format", "Address
//! Tracing", "GFX12 Shader Clock Packing"): its rows are well formed and consistent, rows the
//! original had are kept, and added rows name what they may name. Its result
//! ([`FuncmapInfo`]) is what the flow checks read of the funcmap.

mod inlined;
mod subroutine;

use std::collections::{BTreeMap, HashMap, HashSet};

use hsaco::CodeObject;

use crate::funcmap::{self, Funcmap, Row};
use crate::program::scope_rows;
use crate::program::{FuncmapInfo, Layout, ADDR_TRACE_NAMES};
use crate::{Check, Finding};

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
            findings.push(Finding::global(Check::Funcmap, m));
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

/// Checks the rewritten `.sqtt_funcmap` against the original's (`kernel_waves`: lanes of each
/// original kernel's waves, for the `W:` row) and returns what the flow checks read of it.
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
    let labels = subroutine::labels(o);
    let label_names: HashSet<&str> = labels.values().flatten().map(String::as_str).collect();
    let (new, added_f) = check_rows(o, n, &symbols, &label_names, findings);
    let functions: HashSet<&str> = n.functions.iter().map(|f| f.name.as_str()).collect();
    let sub_rows = added_f
        .iter()
        .filter(|(name, _)| {
            !functions.contains(name.as_str()) && subroutine::may_name(name, &label_names, &symbols)
        })
        .flat_map(|(name, ids)| ids.iter().map(|&id| (id, name.clone())))
        .collect();
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
        labels,
        sub_rows,
    }
}

/// Checks the rewritten funcmap's rows against the original's and the object's functions and
/// kernels (`symbols`, as [`FuncmapInfo::symbols`]); returns the parsed rewritten funcmap and
/// the ids of the `F` rows it added, by function name, in row order.
fn check_rows(
    o: &CodeObject,
    n: &CodeObject,
    symbols: &HashMap<String, (bool, u64)>,
    label_names: &HashSet<&str>,
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
        findings.push(Finding::global(
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
        findings.push(Finding::global(
            Check::Funcmap,
            "the original .sqtt_funcmap was removed".into(),
        ));
        return info(new, orig_rows);
    };
    let nuls = data.iter().rev().take_while(|b| **b == 0).count();
    if nuls != 1 {
        findings.push(Finding::global(
            Check::Funcmap,
            format!("section must end with exactly one NUL, found {nuls}"),
        ));
    }
    if data.iter().rev().skip(nuls).any(|b| *b == 0) {
        findings.push(Finding::global(
            Check::Funcmap,
            "NUL inside the rows (rows must be separated by \\n)".into(),
        ));
    }
    for id in &fm.duplicate_ids {
        findings.push(Finding::global(
            Check::Funcmap,
            format!("id {id} is used by more than one row"),
        ));
    }
    for (line, text) in &fm.rejected_lines {
        findings.push(Finding::global(
            Check::Funcmap,
            format!("line {line} is not a valid row: {text:?}"),
        ));
    }
    if fm.by_id.contains_key(&0) {
        findings.push(Finding::global(Check::Funcmap, "id 0 is reserved".into()));
    }
    let rows: HashSet<&Row> = fm.rows.iter().collect();
    let old_rows: HashSet<&Row> = orig_rows.iter().collect();
    for r in &orig_rows {
        if !rows.contains(r) {
            findings.push(Finding::global(
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
    // Rows of inlined functions (no symbol) must name a function the DWARF says was inlined;
    // rows of in-kernel subroutines name a label or an offset in a kernel.
    let unnamed: Vec<&Row> = unnamed
        .into_iter()
        .filter(|r| !subroutine::may_name(&r.name, label_names, symbols))
        .collect();
    let inlined = if unnamed.is_empty() {
        Default::default()
    } else {
        inlined::inlined_names(o)
    };
    for r in unnamed {
        if !inlined.contains(&r.name) {
            findings.push(Finding::global(
                Check::Funcmap,
                format!(
                    "F row {:?} names no device function of the code object, no inlined function of its DWARF and no in-kernel subroutine (a local label or KERNEL+0xOFFSET)",
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
            findings.push(Finding::global(
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
            findings.push(Finding::global(
                Check::Funcmap,
                format!(
                    "kernel {} has no K: row although the funcmap lists kernels",
                    k.name
                ),
            ));
        }
    }
}
