//! Source locations for `.sqtt_funcmap` rows (spec, section "Funcmap format"):
//! `F:id:name@source_loc`, `K:name@source_loc` (the definition site of a function or kernel)
//! and `P:id:addr_trace_*@source_loc` (the rocprofiler-sdk inline chain of a memory
//! instruction, innermost first, `file:line` elements joined by `" -> "`).
//!
//! Read side only (gimli). The semantics follow LLVM's `DWARFContext` as used by
//! llvm-symbolizer-22 and llvm-dwarfdump-22, which are the test oracles:
//!
//! * **File rendering** is LLVM's `FileLineInfoKind::AbsoluteFilePath`
//!   (`DWARFDebugLine::Prologue::getFileNameByIndex`): the line table's file entry; an
//!   absolute name is kept as is; a relative name is joined with its include directory, and,
//!   when that directory is itself relative (or absent), with the unit's `DW_AT_comp_dir` first
//!   (except DWARF 5 directory 0, which *is* the compilation directory). Joining follows
//!   `llvm::sys::path::append` (POSIX style): one `/` between components, none added after a
//!   trailing `/`; nothing is normalised (`..` stays). This is the string llvm-dwarfdump prints
//!   for `DW_AT_decl_file` and llvm-symbolizer prints for frames, e.g.
//!   `/corpus/src/kernels.hip` (file `kernels.hip`, directory `src`, comp_dir `/corpus`).
//! * A file path may contain `@`; it is returned unchanged. The funcmap row parser splits name
//!   and location at the **first** `@`, so a location containing `@` is still read back intact,
//!   but the funcmap writer must reject (or drop the location of) any *name* containing `@`.
//!   [`function_locations`] never returns a key containing `@`: such functions are omitted.

use std::collections::HashMap;
use std::fmt;

use gimli::{AttributeValue, DwAt, EndianSlice, LittleEndian, SectionId, UnitSectionOffset};

use crate::inlined::InlinedScope;
use crate::Error;

type R<'a> = EndianSlice<'a, LittleEndian>;

const INFO: &str = ".debug_info";
const LINE: &str = ".debug_line";

/// Upper bound on `DW_AT_specification` / `DW_AT_abstract_origin` DIEs visited when looking up
/// an attribute (LLVM's `DWARFDie::findRecursively` visits each DIE once; this also bounds it).
const MAX_REFS: usize = 64;

/// One source position: a rendered file path (see the module documentation) and a 1-based line
/// number (0 when the compiler attributes the code to no line, as DWARF 5 section 6.2.2
/// allows). `Display` prints `file:line`, the element of a rocprofiler-sdk inline chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceLoc {
    /// File path, rendered like LLVM's `AbsoluteFilePath`.
    pub file: String,
    /// Line number (1-based; 0 = no line).
    pub line: u64,
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Renders an inline chain the way rocprofiler-sdk does (spec, "Funcmap format"):
/// elements as `file:line`, innermost first, joined with `" -> "`. An empty chain renders as
/// the empty string.
pub fn render_chain(chain: &[SourceLoc]) -> String {
    chain
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Definition sites of all functions with code, keyed by linkage name.
///
/// `sections`: `.debug_*` section name -> contents (as from [`crate::read_debug_sections`]).
/// Every `DW_TAG_subprogram` with `DW_AT_low_pc` or `DW_AT_ranges` contributes one entry: the
/// key is `DW_AT_linkage_name` (or `DW_AT_MIPS_linkage_name`), else `DW_AT_name`, and the
/// value `DW_AT_decl_file`:`DW_AT_decl_line`; each attribute is looked up on the DIE and then
/// through `DW_AT_abstract_origin` / `DW_AT_specification` (so a concrete out-of-line instance
/// reports its abstract subprogram's declaration), as LLVM's `DWARFDie::findRecursively` does.
/// Functions without a name or without `DW_AT_decl_file`/`DW_AT_decl_line`, and names
/// containing `@`, are omitted. When two DIEs yield the same key, the first in `.debug_info`
/// order wins. Triton objects (no subprogram DIEs) give an empty map.
///
/// Errors: malformed DWARF ([`Error::Gimli`]); a file index without a line-table entry
/// ([`Error::Unsupported`]); offsets are into `.debug_info` or `.debug_line`.
pub fn function_locations(
    sections: &HashMap<String, Vec<u8>>,
) -> Result<HashMap<String, SourceLoc>, Error> {
    Ok(LocationIndex::new(sections)?.functions)
}

/// The rocprofiler-sdk inline chain of one code address, innermost first; see
/// [`LocationIndex::chain`]. Builds a [`LocationIndex`] on every call: for more than one
/// address build the index once.
pub fn inline_chain(
    sections: &HashMap<String, Vec<u8>>,
    address: u64,
) -> Result<Vec<SourceLoc>, Error> {
    Ok(LocationIndex::new(sections)?.chain(address))
}

/// Line-table row as kept for lookup.
#[derive(Clone, Copy)]
struct Row {
    address: u64,
    file: u64,
    line: u64,
}

/// One line-number sequence: rows in program order over `[start, end)` bytes.
struct Sequence {
    start: u64,
    end: u64,
    rows: Vec<Row>,
}

/// Per compile unit: rendered file names by line-table file index, and sequences.
#[derive(Default)]
struct UnitLines {
    /// `files[i]` = rendered path of file index `i` (DWARF 4 index 0 is `None`).
    files: Vec<Option<String>>,
    /// Sorted by `end`, as LLVM's `LineTable::Sequences`.
    sequences: Vec<Sequence>,
}

/// A `DW_TAG_subprogram` or `DW_TAG_inlined_subroutine` DIE.
struct Node {
    unit: usize,
    /// Nearest enclosing subprogram/inlined-subroutine node (through lexical blocks).
    parent: Option<usize>,
    /// For `DW_TAG_inlined_subroutine`: its call site; `None` for a subprogram.
    call: Option<SourceLoc>,
    /// `.debug_info` offset of the DIE.
    die: u64,
    /// Code ranges `[begin, end)`, sorted.
    code: Vec<(u64, u64)>,
}

/// [`Decl`]s by `.debug_info` offset, sorted by offset (DIEs are read in offset order, so
/// this is a sorted vector rather than a hash map).
#[derive(Default)]
struct Decls(Vec<(u64, Decl)>);

impl Decls {
    /// Sorts by offset (a no-op for DIEs read in order).
    fn sort(&mut self) {
        if !self.0.is_sorted_by_key(|&(o, _)| o) {
            self.0.sort_by_key(|&(o, _)| o);
        }
    }

    /// The attributes of the DIE at `.debug_info` offset `off`.
    fn get(&self, off: &u64) -> Option<&Decl> {
        let i = self.0.binary_search_by_key(off, |&(o, _)| o).ok()?;
        self.0.get(i).map(|(_, d)| d)
    }
}

/// Naming and declaration attributes of a subprogram DIE, by `.debug_info` offset.
#[derive(Default)]
struct Decl {
    unit: usize,
    linkage_name: Option<String>,
    name: Option<String>,
    decl_file: Option<u64>,
    decl_line: Option<u64>,
    refs: Vec<u64>,
}

/// Address -> inline chain index over all compile units of one code object, plus the
/// definition sites of its functions. Build once with [`LocationIndex::new`], then query
/// [`LocationIndex::chain`] per instruction address (binary searches; no DWARF parsing).
pub struct LocationIndex {
    units: Vec<UnitLines>,
    /// `(start, end, unit)` of each unit's `DW_AT_low_pc`/`high_pc`/`ranges`.
    unit_ranges: Vec<(u64, u64, usize)>,
    nodes: Vec<Node>,
    /// Segment boundaries (bytes); segment `i` is `[bounds[i], bounds[i + 1])`.
    bounds: Vec<u64>,
    /// Innermost subroutine node of each segment.
    owner: Vec<Option<usize>>,
    functions: HashMap<String, SourceLoc>,
    inlined: Vec<InlinedScope>,
}

fn gimli_err(section: &'static str, offset: u64) -> impl Fn(gimli::Error) -> Error {
    move |source| Error::Gimli {
        section,
        offset,
        source,
    }
}

/// Checks the DWARF 5 contribution headers in front of a unit's `DW_AT_addr_base` (8 bytes:
/// 32-bit unit length, version 5, address size, segment selector size 0; DWARF 5 section 7.27)
/// and `DW_AT_str_offsets_base` (8 bytes: 32-bit length, version 5, 2 bytes padding; section
/// 7.26), and that the length stays inside the section. gimli indexes from the base without
/// reading the header, so an overwritten or zeroed contribution would silently give wrong
/// addresses and names. Units without the attributes (a base below 8: DWARF 4, or no indexed
/// forms) are not checked. Errors: [`Error::BadContribution`] naming the header's offset and the
/// unit (`.debug_info` offset `unit_off`).
fn check_contributions(
    sections: &HashMap<String, Vec<u8>>,
    unit: &gimli::Unit<R<'_>>,
    unit_off: u64,
) -> Result<(), Error> {
    if unit.header.version() < 5 {
        return Ok(());
    }
    let addr_size = unit.header.address_size();
    let checks = [
        (".debug_addr", unit.addr_base.0, Some(addr_size)),
        (".debug_str_offsets", unit.str_offsets_base.0, None),
    ];
    for (section, base, want_addr_size) in checks {
        if base < 8 {
            continue;
        }
        let data = sections.get(section).map_or(&[][..], |v| v.as_slice());
        let at = base - 8;
        let bad = |what: String| Error::BadContribution {
            section,
            offset: at as u64,
            what: format!("{what} (contribution of the unit at .debug_info+{unit_off:#x})"),
        };
        let Some(h) = data.get(at..base) else {
            return Err(bad(format!(
                "header beyond the section's {} bytes",
                data.len()
            )));
        };
        let length = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let version = u16::from_le_bytes([h[4], h[5]]);
        if version != 5 {
            return Err(bad(format!("header version {version}, not 5")));
        }
        if base - 4 + length > data.len() || length < 4 {
            return Err(bad(format!(
                "header length {length:#x} does not fit the section's {} bytes",
                data.len()
            )));
        }
        match want_addr_size {
            Some(size) if h[6] != size || h[7] != 0 => {
                return Err(bad(format!(
                    "header address size {} / segment selector size {}, not {size} / 0",
                    h[6], h[7]
                )));
            }
            None if h[6] != 0 || h[7] != 0 => {
                return Err(bad("header padding is not zero".into()));
            }
            _ => {}
        }
    }
    Ok(())
}

fn info_offset(o: UnitSectionOffset<usize>) -> u64 {
    o.0 as u64
}

/// `llvm::sys::path::append` for POSIX paths.
fn path_append(path: &mut String, component: &str) {
    if component.is_empty() {
        return;
    }
    if path.ends_with('/') {
        path.push_str(component.trim_start_matches('/'));
        return;
    }
    if !path.is_empty() && !component.starts_with('/') {
        path.push('/');
    }
    path.push_str(component);
}

impl LocationIndex {
    /// Parses `.debug_info`, `.debug_line` (and the string, address and range-list sections
    /// they refer to) of one code object.
    ///
    /// `sections`: `.debug_*` section name -> contents. Missing sections count as empty (an
    /// object without DWARF gives an index where every chain is empty).
    ///
    /// Errors: [`Error::Gimli`] for malformed DWARF, [`Error::Unsupported`] for a file index
    /// (`DW_AT_decl_file`, `DW_AT_call_file`, a line row's file) with no line-table entry.
    pub fn new(sections: &HashMap<String, Vec<u8>>) -> Result<Self, Error> {
        let load = |id: SectionId| -> Result<R<'_>, Error> {
            let data = sections.get(id.name()).map_or(&[][..], |v| v.as_slice());
            Ok(EndianSlice::new(data, LittleEndian))
        };
        let dwarf = gimli::Dwarf::load(load)?;
        let mut ix = LocationIndex {
            units: Vec::new(),
            unit_ranges: Vec::new(),
            nodes: Vec::new(),
            bounds: Vec::new(),
            owner: Vec::new(),
            functions: HashMap::new(),
            inlined: Vec::new(),
        };
        let mut decls = Decls::default();
        // Subprograms with code, in `.debug_info` order.
        let mut code_subprograms: Vec<u64> = Vec::new();
        // (start, end, node) in DIE pre-order.
        let mut painted: Vec<(u64, u64, usize)> = Vec::new();

        let mut headers = dwarf.units();
        while let Some(header) = headers.next().map_err(gimli_err(INFO, 0))? {
            let unit_off = info_offset(header.offset());
            let unit = dwarf
                .unit(header)
                .map_err(|e| unit_error(&dwarf, &header, unit_off, e))?;
            check_contributions(sections, &unit, unit_off)?;
            let unit_index = ix.units.len();
            ix.units.push(unit_lines(&dwarf, &unit)?);
            let mut ranges = dwarf
                .unit_ranges(&unit)
                .map_err(gimli_err(INFO, unit_off))?;
            while let Some(r) = ranges.next().map_err(gimli_err(INFO, unit_off))? {
                if r.begin < r.end {
                    ix.unit_ranges.push((r.begin, r.end, unit_index));
                }
            }

            // Stack of (depth, nearest subroutine node at or above that depth).
            let mut stack: Vec<(isize, Option<usize>)> = Vec::new();
            let mut cursor = unit.entries();
            while let Some(entry) = cursor.next_dfs().map_err(gimli_err(INFO, unit_off))? {
                let die_off = entry
                    .offset()
                    .to_debug_info_offset(&unit.header)
                    .map_or(unit_off, |o| o.0 as u64);
                let depth = entry.depth();
                while stack.last().is_some_and(|&(d, _)| d >= depth) {
                    stack.pop();
                }
                let parent = stack.last().and_then(|&(_, n)| n);
                let tag = entry.tag();
                let is_sub = tag == gimli::DW_TAG_subprogram;
                let is_inl = tag == gimli::DW_TAG_inlined_subroutine;
                if !is_sub && !is_inl {
                    stack.push((depth, parent));
                    continue;
                }
                let err = gimli_err(INFO, die_off);
                let mut code = Vec::new();
                let mut rs = dwarf.die_ranges(&unit, entry).map_err(&err)?;
                while let Some(r) = rs.next().map_err(&err)? {
                    if r.begin < r.end {
                        code.push((r.begin, r.end));
                    }
                }
                let mut d = Decl {
                    unit: unit_index,
                    ..Decl::default()
                };
                for a in entry.attrs() {
                    read_decl_attr(&dwarf, &unit, a.name(), a.value(), &mut d)?;
                }
                decls.0.push((die_off, d));
                let call = if is_inl {
                    // LLVM's `DWARFDie::getCallerFrame`: absent attributes read as 0.
                    let file = udata(entry.attr_value(gimli::DW_AT_call_file));
                    let line = udata(entry.attr_value(gimli::DW_AT_call_line));
                    Some(SourceLoc {
                        file: ix.units[unit_index].file(file.unwrap_or(0), INFO, die_off)?,
                        line: line.unwrap_or(0),
                    })
                } else {
                    if !code.is_empty() {
                        code_subprograms.push(die_off);
                    }
                    None
                };
                let node = ix.nodes.len();
                painted.extend(code.iter().map(|&(b, e)| (b, e, node)));
                code.sort_unstable();
                ix.nodes.push(Node {
                    unit: unit_index,
                    parent,
                    call,
                    die: die_off,
                    code,
                });
                stack.push((depth, Some(node)));
            }
        }

        decls.sort();
        ix.paint(&painted);
        ix.unit_ranges.sort_by_key(|&(b, e, _)| (b, e));
        for off in code_subprograms {
            ix.add_function(&decls, off)?;
        }
        ix.collect_inlined(&decls)?;
        Ok(ix)
    }

    /// Builds [`InlinedScope`]s from the inlined-subroutine nodes (pre-order, so a parent's
    /// index is known before its children).
    fn collect_inlined(&mut self, decls: &Decls) -> Result<(), Error> {
        // By node index: its scope index, and the nearest subprogram node at or above it (a
        // parent always precedes its children in pre-order).
        let mut index: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut subprogram: Vec<Option<usize>> = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            let above = n.parent.and_then(|p| subprogram.get(p).copied().flatten());
            subprogram[i] = if n.call.is_none() { Some(i) } else { above };
            let Some(call) = &n.call else { continue };
            let parent = n.parent.and_then(|p| index.get(p).copied().flatten());
            let function = above
                .and_then(|p| self.nodes.get(p))
                .and_then(|f| f.code.first())
                .map(|&(b, _)| b);
            let name = find(decls, n.die, |d| d.linkage_name.clone())
                .or_else(|| find(decls, n.die, |d| d.name.clone()))
                .unwrap_or_default();
            let file = find(decls, n.die, |d| d.decl_file.map(|f| (d.unit, f)));
            let line = find(decls, n.die, |d| d.decl_line);
            let decl = match (file, line) {
                (Some((unit, file)), Some(line)) => match self.units.get(unit) {
                    Some(u) => Some(SourceLoc {
                        file: u.file(file, INFO, n.die)?,
                        line,
                    }),
                    None => None,
                },
                _ => None,
            };
            index[i] = Some(self.inlined.len());
            self.inlined.push(InlinedScope {
                die: n.die,
                parent,
                function,
                name,
                decl,
                call: call.clone(),
                ranges: n.code.clone(),
            });
        }
        Ok(())
    }

    /// Inlined instances in `.debug_info` pre-order; see [`crate::inlined_scopes`].
    pub fn inlined(&self) -> &[InlinedScope] {
        &self.inlined
    }

    /// Builds the segment map: each address gets the subroutine DIE painted last in DIE
    /// pre-order among those whose ranges cover it (LLVM's `DWARFUnit::updateAddressDieMap`,
    /// where a child's range overrides its parent's).
    fn paint(&mut self, painted: &[(u64, u64, usize)]) {
        let mut bounds: Vec<u64> = painted.iter().flat_map(|&(b, e, _)| [b, e]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let segments = bounds.len().saturating_sub(1);
        let mut owner = vec![None; segments];
        // Painted last wins: walk the ranges backwards and fill only segments still empty.
        // `next[i]`: the first segment at or after `i` that may still be empty (path-halving
        // skips over filled runs, so each segment is filled once).
        let mut next: Vec<usize> = (0..=segments).collect();
        let find = |next: &mut Vec<usize>, mut i: usize| {
            while next[i] != i {
                next[i] = next[next[i]];
                i = next[i];
            }
            i
        };
        for &(b, e, node) in painted.iter().rev() {
            let first = bounds.partition_point(|&x| x < b);
            let last = bounds.partition_point(|&x| x < e);
            let mut i = find(&mut next, first);
            while i < last {
                owner[i] = Some(node);
                next[i] = i + 1;
                i = find(&mut next, i + 1);
            }
        }
        self.bounds = bounds;
        self.owner = owner;
    }

    /// Resolves and records the definition site of one subprogram with code.
    fn add_function(&mut self, decls: &Decls, off: u64) -> Result<(), Error> {
        let name = find(decls, off, |d| d.linkage_name.as_ref().map(|n| (d, n)))
            .or_else(|| find(decls, off, |d| d.name.as_ref().map(|n| (d, n))));
        let file = find(decls, off, |d| d.decl_file.map(|f| (d, f)));
        let line = find(decls, off, |d| d.decl_line);
        let (Some((_, name)), Some((file_die, file)), Some(line)) = (name, file, line) else {
            return Ok(());
        };
        if name.contains('@') || self.functions.contains_key(name.as_str()) {
            return Ok(());
        }
        let units = &self.units;
        let file = units
            .get(file_die.unit)
            .ok_or_else(|| Error::Unsupported {
                section: INFO,
                offset: off,
                what: "DW_AT_decl_file of a unit without a line table".into(),
            })?
            .file(file, INFO, off)?;
        self.functions
            .insert(name.clone(), SourceLoc { file, line });
        Ok(())
    }

    /// Definition sites keyed by linkage name; see [`function_locations`].
    pub fn functions(&self) -> &HashMap<String, SourceLoc> {
        &self.functions
    }

    /// The rocprofiler-sdk inline chain of the instruction at `address` (bytes, the code
    /// object's virtual address as in `.text`), innermost first, as llvm-symbolizer-22
    /// `--inlining` computes it (`DWARFContext::getInliningInfoForAddress`):
    ///
    /// 1. the line-table row covering `address` (the last row at or below it inside a
    ///    sequence `[start, end)`), rendered `file:line` (line 0 is kept);
    /// 2. for each enclosing `DW_TAG_inlined_subroutine`, innermost first, its
    ///    `DW_AT_call_file:DW_AT_call_line`, up to the enclosing `DW_TAG_subprogram`.
    ///
    /// Empty when no line row covers `address` (llvm-symbolizer would print `??:0` there): a
    /// partial chain would be misleading in a funcmap row.
    pub fn chain(&self, address: u64) -> Vec<SourceLoc> {
        let node = self.owner_of(address);
        let unit = match node {
            Some(n) => self.nodes.get(n).map(|n| n.unit),
            None => self
                .unit_ranges
                .iter()
                .find(|&&(b, e, _)| b <= address && address < e)
                .map(|&(_, _, u)| u),
        };
        let Some(lines) = unit.and_then(|u| self.units.get(u)) else {
            return Vec::new();
        };
        let Some(first) = lines.lookup(address) else {
            return Vec::new();
        };
        let mut out = vec![first];
        let mut cur = node;
        while let Some(n) = cur.and_then(|i| self.nodes.get(i)) {
            match &n.call {
                Some(call) => out.push(call.clone()),
                None => break,
            }
            cur = n.parent;
        }
        out
    }

    fn owner_of(&self, address: u64) -> Option<usize> {
        let i = self.bounds.partition_point(|&b| b <= address);
        if i == 0 {
            return None;
        }
        self.owner.get(i - 1).copied().flatten()
    }
}

/// Breadth-first search over a DIE and its `DW_AT_abstract_origin` / `DW_AT_specification`
/// targets (LLVM's `DWARFDie::findRecursively`), returning the first hit.
fn find<'d, T>(decls: &'d Decls, start: u64, get: impl Fn(&'d Decl) -> Option<T>) -> Option<T> {
    // Most lookups are answered by the DIE itself: no queue for those.
    if let Some(v) = decls.get(&start).and_then(&get) {
        return Some(v);
    }
    let mut queue = vec![start];
    // At most MAX_REFS entries: a vector is faster than a hash set.
    let mut seen: Vec<u64> = Vec::new();
    let mut i = 0;
    while let Some(&off) = queue.get(i) {
        i += 1;
        if i > MAX_REFS || seen.contains(&off) {
            continue;
        }
        seen.push(off);
        let Some(d) = decls.get(&off) else { continue };
        if let Some(v) = get(d) {
            return Some(v);
        }
        queue.extend(d.refs.iter().copied());
    }
    None
}

fn udata(v: Option<AttributeValue<R<'_>>>) -> Option<u64> {
    match v? {
        AttributeValue::FileIndex(f) => Some(f),
        other => other.udata_value(),
    }
}

/// Records one attribute of a subprogram or inlined-subroutine DIE relevant to naming and declaration site.
fn read_decl_attr(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    name: DwAt,
    value: AttributeValue<R<'_>>,
    d: &mut Decl,
) -> Result<(), Error> {
    let string = |v: AttributeValue<R<'_>>| -> Result<String, Error> {
        let s = dwarf
            .attr_string(unit, v)
            .map_err(gimli_err(INFO, info_offset(unit.header.offset())))?;
        Ok(String::from_utf8_lossy(s.slice()).into_owned())
    };
    match name {
        gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
            d.linkage_name = Some(string(value)?);
        }
        gimli::DW_AT_name => d.name = Some(string(value)?),
        gimli::DW_AT_decl_file => d.decl_file = udata(Some(value)),
        gimli::DW_AT_decl_line => d.decl_line = udata(Some(value)),
        gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => match value {
            AttributeValue::UnitRef(o) => {
                if let Some(g) = o.to_debug_info_offset(&unit.header) {
                    d.refs.push(g.0 as u64);
                }
            }
            AttributeValue::DebugInfoRef(o) => d.refs.push(o.0 as u64),
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

/// Reads a unit's line program: rendered file names and address-sorted sequences.
/// Where a failure of `gimli::Dwarf::unit` lies. Building a unit also parses the header of its
/// line program (DWARF 5 section 6.2.4), so an error there is `.debug_line`'s, at the unit's
/// `DW_AT_stmt_list`, not `.debug_info`'s (session-14 tester: a corrupt `.debug_line` was
/// reported at `.debug_info+0x0`).
fn unit_error(
    dwarf: &gimli::Dwarf<R<'_>>,
    header: &gimli::UnitHeader<R<'_>>,
    unit_off: u64,
    e: gimli::Error,
) -> Error {
    let stmt_list = || {
        let abbrevs = dwarf.abbreviations(header).ok()?;
        let mut cursor = header.entries(&abbrevs);
        cursor.next_dfs().ok()?;
        match cursor.current()?.attr_value(gimli::DW_AT_stmt_list)? {
            AttributeValue::DebugLineRef(o) => Some(o),
            _ => None,
        }
    };
    match stmt_list() {
        Some(o)
            if dwarf
                .debug_line
                .program(o, header.address_size(), None, None)
                .is_err() =>
        {
            gimli_err(LINE, o.0 as u64)(e)
        }
        _ => gimli_err(INFO, unit_off)(e),
    }
}

fn unit_lines(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>) -> Result<UnitLines, Error> {
    let Some(program) = unit.line_program.clone() else {
        return Ok(UnitLines::default());
    };
    let header = program.header();
    let line_off = header.offset().0 as u64;
    let err = gimli_err(LINE, line_off);
    let version = header.version();
    let comp_dir = unit
        .comp_dir
        .map(|d| String::from_utf8_lossy(d.slice()).into_owned())
        .unwrap_or_default();
    let string = |v: AttributeValue<R<'_>>| -> Result<String, Error> {
        let s = dwarf.attr_string(unit, v).map_err(&err)?;
        Ok(String::from_utf8_lossy(s.slice()).into_owned())
    };
    let dirs = header.include_directories();
    let count = header.file_names().len() as u64 + u64::from(version < 5);
    let mut files = Vec::new();
    for index in 0..count {
        let Some(entry) = header.file(index) else {
            files.push(None);
            continue;
        };
        if version < 5 && index == 0 {
            // gimli synthesises file 0 from DW_AT_name for DWARF <= 4; LLVM has no file 0.
            files.push(None);
            continue;
        }
        let name = string(entry.path_name())?;
        if name.starts_with('/') {
            files.push(Some(name));
            continue;
        }
        let di = entry.directory_index();
        // LLVM `Prologue::getFileNameByIndex` (AbsoluteFilePath): v5 directories are 0-based
        // (0 = compilation directory), v4 ones 1-based (0 = none).
        let dir_value = if version >= 5 {
            dirs.get(di as usize)
        } else {
            di.checked_sub(1).and_then(|i| dirs.get(i as usize))
        };
        let include = match dir_value {
            Some(v) => string(*v)?,
            None => String::new(),
        };
        let mut path = String::new();
        if (version < 5 || di != 0) && !include.starts_with('/') {
            path_append(&mut path, &comp_dir);
        }
        path_append(&mut path, &include);
        path_append(&mut path, &name);
        files.push(Some(path));
    }

    let mut lines = UnitLines {
        files,
        sequences: Vec::new(),
    };
    let mut rows = program.rows();
    let mut current: Vec<Row> = Vec::new();
    while let Some((_, row)) = rows.next_row().map_err(&err)? {
        if row.end_sequence() {
            if let Some(start) = current.first().map(|r| r.address) {
                let end = row.address();
                if start < end {
                    lines.sequences.push(Sequence {
                        start,
                        end,
                        rows: std::mem::take(&mut current),
                    });
                }
            }
            current.clear();
            continue;
        }
        let file = row.file_index();
        lines.check_file(file, LINE, line_off)?;
        current.push(Row {
            address: row.address(),
            file,
            line: row.line().map_or(0, |l| l.get()),
        });
    }
    lines.sequences.sort_by_key(|s| s.end);
    Ok(lines)
}

impl UnitLines {
    /// Rendered path of a line-table file index; a missing entry is [`Error::Unsupported`] at
    /// `section`+`offset` (the referring DIE or line program).
    fn file(&self, index: u64, section: &'static str, offset: u64) -> Result<String, Error> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.files.get(i))
            .and_then(Clone::clone)
            .ok_or_else(|| Error::Unsupported {
                section,
                offset,
                what: format!("file index {index} without a line-table entry"),
            })
    }

    /// Like [`UnitLines::file`] without building the string.
    fn check_file(&self, index: u64, section: &'static str, offset: u64) -> Result<(), Error> {
        let known = usize::try_from(index)
            .ok()
            .and_then(|i| self.files.get(i))
            .is_some_and(Option::is_some);
        if known {
            Ok(())
        } else {
            Err(Error::Unsupported {
                section,
                offset,
                what: format!("file index {index} without a line-table entry"),
            })
        }
    }

    /// LLVM `LineTable::lookupAddress` + `findRowInSeq`: the first sequence (sorted by end)
    /// ending above `address` must start at or below it; the row is the last one whose
    /// address is `<= address`.
    fn lookup(&self, address: u64) -> Option<SourceLoc> {
        let i = self.sequences.partition_point(|s| s.end <= address);
        let seq = self.sequences.get(i)?;
        if address < seq.start {
            return None;
        }
        let k = seq.rows.partition_point(|r| r.address <= address);
        let row = seq.rows.get(k.checked_sub(1)?)?;
        let file = self.files.get(usize::try_from(row.file).ok()?)?.clone()?;
        Some(SourceLoc {
            file,
            line: row.line,
        })
    }
}
