//! [`Check::Dwarf`]: the rewritten `.debug_line` must attribute every original instruction, at
//! its new address, to the same source position (compilation unit, file, line, column) as the
//! original `.debug_line` attributes it at its old address (`docs/background/rewriting.md`, "DWARF
//! follows the code"). Read with `gimli`, independently of the rewriter's `dwarf-remap`.
//!
//! Inserted instructions may carry any position; only original instructions are checked.
use crate::program::{BuildRegsHasher, Program};
use crate::{Check, Finding};
use gimli::{EndianSlice, LittleEndian};
use hsaco::CodeObject;
use rayon::prelude::*;
use std::collections::HashMap;

/// One source position: `(compilation unit index, file index, line, column)` (DWARF 5 §6.2.2;
/// line 0 = no source line, column 0 = whole line).
type Position = (usize, u64, u64, u64);

/// Address-sorted line-table rows of one code object: `(start, end, position)`, bytes, half-open
/// address ranges, one per row (a row covers up to the next row of its sequence); the position
/// as an index into the distinct positions (24 bytes per row, not 48: the two maps of a large
/// object with DWARF were a sixth of the verifier's memory).
struct LineMap {
    rows: Vec<(u64, u64, u32)>,
    positions: Vec<Position>,
}

impl LineMap {
    /// Reads every line program of `.debug_line` reached from `.debug_info` units. `Ok(None)`
    /// when the object has no `.debug_line`; `Err(text)` when gimli cannot read it.
    fn read(co: &CodeObject) -> Result<Option<LineMap>, String> {
        if co.section(".debug_line").is_none() {
            return Ok(None);
        }
        // Compressed sections (`SHF_COMPRESSED`) are read decompressed (issue 39).
        let contents = debug_contents(co)?;
        let data = |name: &str| contents.get(name).map_or(&[][..], |d| d.as_ref());
        let dwarf = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
            Ok(EndianSlice::new(data(id.name()), LittleEndian))
        })
        .map_err(|e| format!("cannot load DWARF: {e}"))?;
        let mut rows = Vec::new();
        let mut positions: Vec<Position> = Vec::new();
        let mut index: HashMap<Position, u32, BuildRegsHasher> = HashMap::default();
        let mut units = dwarf.units();
        let mut cu = 0usize;
        while let Some(header) = units.next().map_err(|e| format!("unit {cu}: {e}"))? {
            let unit = dwarf.unit(header).map_err(|e| format!("unit {cu}: {e}"))?;
            if let Some(program) = unit.line_program.clone() {
                let mut lines = program.rows();
                let mut prev: Option<(u64, Position)> = None;
                while let Some((_, row)) = lines
                    .next_row()
                    .map_err(|e| format!("unit {cu}: line program: {e}"))?
                {
                    let addr = row.address();
                    if let Some((start, pos)) = prev.take() {
                        if addr > start {
                            // At most one position per row: fewer than 2^32 in memory.
                            let p = *index.entry(pos).or_insert_with(|| {
                                positions.push(pos);
                                (positions.len() - 1) as u32
                            });
                            rows.push((start, addr, p));
                        }
                    }
                    if !row.end_sequence() {
                        let column = match row.column() {
                            gimli::ColumnType::LeftEdge => 0,
                            gimli::ColumnType::Column(c) => c.get(),
                        };
                        let line = row.line().map_or(0, |l| l.get());
                        prev = Some((addr, (cu, row.file_index(), line, column)));
                    }
                }
            }
            cu += 1;
        }
        rows.sort_by_key(|r| (r.0, r.1));
        rows.shrink_to_fit();
        Ok(Some(LineMap { rows, positions }))
    }

    /// Position of the last row starting at or before `addr` whose range covers it.
    fn at(&self, addr: u64) -> Option<Position> {
        let i = self.rows.partition_point(|r| r.0 <= addr);
        self.rows[..i]
            .iter()
            .rev()
            .take_while(|r| r.0 == self.rows[i - 1].0)
            .find(|r| addr < r.1)
            .and_then(|r| self.positions.get(r.2 as usize).copied())
    }
}

/// Compares the source position of every original instruction (see the module docs). One
/// finding per function (its first mismatch and the count), so a systematic error stays
/// readable.
pub(crate) fn check_lines(
    orig: &CodeObject,
    new: &CodeObject,
    program: &Program,
    findings: &mut Vec<Finding>,
) {
    // `.text` kept in place: DWARF still describes the original code, which stays at its
    // addresses, so every debug section is the original's, byte for byte (the copies in the
    // new code section have no line information; docs/left-alone.md).
    if program.kept.is_some() {
        for s in orig
            .elf
            .sections
            .iter()
            .filter(|s| s.name.starts_with(".debug"))
        {
            let same = new
                .section(&s.name)
                .is_some_and(|ns| new.section_data(ns) == orig.section_data(s));
            if !same {
                findings.push(global(format!(
                    "{} changed although .text is kept in place (its DWARF describes the kept original code)",
                    s.name
                )));
            }
        }
        return;
    }
    let (o, n) = match rayon::join(|| LineMap::read(orig), || LineMap::read(new)) {
        (Ok(None), Ok(None)) => return,
        (Ok(Some(o)), Ok(Some(n))) => (o, n),
        (Ok(Some(_)), Ok(None)) => {
            findings.push(global("the rewritten object lost .debug_line".into()));
            return;
        }
        (Ok(None), Ok(Some(_))) => {
            findings.push(global(
                "the rewritten object gained a .debug_line the original has not".into(),
            ));
            return;
        }
        (Err(e), _) => {
            findings.push(global(format!("original .debug_line: {e}")));
            return;
        }
        (_, Err(e)) => {
            findings.push(global(format!("rewritten .debug_line: {e}")));
            return;
        }
    };
    // Functions in parallel; findings keep the function order.
    let found: Vec<Option<Finding>> = program
        .funcs
        .par_iter()
        .map(|f| function_lines(f, &o, &n))
        .collect();
    findings.extend(found.into_iter().flatten());
}

/// The finding of one function, if any original instruction of it changed source position.
fn function_lines(f: &crate::program::Func, o: &LineMap, n: &LineMap) -> Option<Finding> {
    let mut first: Option<(u64, u64, String)> = None;
    let mut count = 0usize;
    for oi in &f.orig {
        let Some(na) = f.new_address(oi) else {
            continue;
        };
        let (a, b) = (o.at(oi.addr), n.at(na));
        if a != b {
            count += 1;
            first.get_or_insert((oi.addr, na, format!("{a:?} became {b:?}")));
        }
    }
    let (oa, na, what) = first?;
    Some(Finding {
        check: Check::Dwarf,
        function: Some(f.name.clone()),
        original_address: Some(oa),
        new_address: Some(na),
        message: format!(
            "{count} original instruction(s) moved to another source position in .debug_line; first: (unit, file, line, column) {what}"
        ),
    })
}

fn global(message: String) -> Finding {
    Finding {
        check: Check::Dwarf,
        function: None,
        original_address: None,
        new_address: None,
        message,
    }
}

/// The `.debug_*` sections of `co` by name, decompressed where they are `SHF_COMPRESSED`
/// (issue 39; borrowed otherwise). Errors: a compressed section that does not decompress.
fn debug_contents(co: &CodeObject) -> Result<HashMap<&str, std::borrow::Cow<'_, [u8]>>, String> {
    co.debug_sections(hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT)
        .map_err(|e| e.to_string())
}
