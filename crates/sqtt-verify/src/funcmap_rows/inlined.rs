//! Names of the functions an original code object's DWARF says were inlined, for the funcmap
//! check of `F:` rows without a symbol (spec "Phase 2": fully inlined functions keep their `F:`
//! rows, without an address). Read with `gimli`, independently of the rewriter's `dwarf-remap`.
//!
//! A `DW_TAG_inlined_subroutine` names its function through `DW_AT_abstract_origin` (DWARF 5
//! section 3.3.8.2), and that origin may in turn name a declaration through
//! `DW_AT_specification` (section 2.13.2) or another origin. Either reference may use a
//! unit-relative form (`DW_FORM_ref1/2/4/8/udata`) or `DW_FORM_ref_addr`, an offset into
//! `.debug_info` that may land in ANOTHER compile unit (section 7.5.4; LLVM emits it for origins
//! of functions inlined across files by LTO, e.g. `-fgpu-rdc` builds). Both attributes are
//! followed in both forms across units; every DIE is visited at most once, so reference cycles
//! end. References into a supplementary object file (`DW_FORM_ref_sup4/8`, `DW_FORM_GNU_ref_alt`)
//! and to type units (`DW_FORM_ref_sig8`) are not followed: the code object has no such file,
//! and type units hold no subprogram definitions.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, LittleEndian, UnitOffset};
use hsaco::CodeObject;

type R<'a> = EndianSlice<'a, LittleEndian>;

/// Names of the functions the ORIGINAL's DWARF says were inlined: for every
/// `DW_TAG_inlined_subroutine`, the `DW_AT_linkage_name` and `DW_AT_name` of every DIE its
/// `DW_AT_abstract_origin` / `DW_AT_specification` chain reaches (see the module
/// documentation). An `F:` row with one of these names and no symbol is an inlined function's
/// scope. Empty when the object has no readable DWARF (the check then fails closed); a reference
/// gimli cannot read ends its chain, with the names found so far kept.
pub(crate) fn inlined_names(co: &CodeObject) -> BTreeSet<String> {
    let Ok(contents) = co.debug_sections(hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT) else {
        return BTreeSet::new();
    };
    names(&contents)
}

/// [`inlined_names`] over `.debug_*` section contents by name.
fn names(contents: &HashMap<&str, Cow<'_, [u8]>>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let data = |name: &str| contents.get(name).map_or(&[][..], |d| d.as_ref());
    let Ok(dwarf) = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
        Ok(EndianSlice::new(data(id.name()), LittleEndian))
    }) else {
        return out;
    };
    let mut units: Vec<gimli::Unit<R<'_>>> = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        units.push(unit);
    }
    // `.debug_info` offsets of the DIEs to read: the inlined subroutines' origins first.
    let mut queue: Vec<u64> = Vec::new();
    for unit in &units {
        let mut entries = unit.entries();
        while let Ok(Some(e)) = entries.next_dfs() {
            if e.tag() == gimli::DW_TAG_inlined_subroutine {
                queue.extend(reference(unit, e.attr_value(gimli::DW_AT_abstract_origin)));
            }
        }
    }
    let mut seen: HashSet<u64> = HashSet::new();
    while let Some(off) = queue.pop() {
        if !seen.insert(off) {
            continue;
        }
        let Some((unit, entry)) = die_at(&units, off) else {
            continue;
        };
        for name in [gimli::DW_AT_linkage_name, gimli::DW_AT_name] {
            if let Some(v) = entry.attr_value(name) {
                if let Ok(s) = dwarf.attr_string(unit, v) {
                    out.insert(String::from_utf8_lossy(s.slice()).into_owned());
                }
            }
        }
        for at in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            queue.extend(reference(unit, entry.attr_value(at)));
        }
    }
    out
}

/// The `.debug_info` offset a DIE reference attribute names: unit-relative forms are rebased on
/// `unit`'s start, `DW_FORM_ref_addr` is already section-relative. `None` for other forms.
fn reference(unit: &gimli::Unit<R<'_>>, value: Option<AttributeValue<R<'_>>>) -> Option<u64> {
    match value? {
        AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header).map(|g| g.0 as u64),
        AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
        _ => None,
    }
}

/// The unit holding `.debug_info` offset `off` and the DIE there; `None` when no unit's
/// entries cover it or gimli cannot read the DIE. `units` are in section order.
fn die_at<'u, 'a>(
    units: &'u [gimli::Unit<R<'a>>],
    off: u64,
) -> Option<(
    &'u gimli::Unit<R<'a>>,
    gimli::DebuggingInformationEntry<R<'a>>,
)> {
    let start = |u: &gimli::Unit<R<'_>>| u.header.debug_info_offset().map(|o| o.0);
    let i = units
        .partition_point(|u| start(u).is_some_and(|s| s as u64 <= off))
        .checked_sub(1)?;
    let unit = units.get(i)?;
    let global = DebugInfoOffset(usize::try_from(off).ok()?);
    let local: UnitOffset = global.to_unit_offset(&unit.header)?;
    let entry = unit.entry(local).ok()?;
    Some((unit, entry))
}

#[cfg(test)]
mod tests;
