//! `.debug_info` (DWARF 4 and 5 compile/type/partial units): walks every DIE attribute with
//! gimli's raw entry reader, which reports the byte position of each attribute, and
//!
//! - patches code addresses held in `DW_FORM_addr` in place (same size);
//! - recomputes `DW_AT_high_pc` / `DW_AT_entry_pc` held as constants (offsets from `low_pc`,
//!   DWARF 5 section 2.17.2 and 3.3.3) in place at the same width (`DW_FORM_udata` is padded);
//! - checks that code addresses held in `DW_FORM_addrx*` resolve to mappable `.debug_addr`
//!   entries (the entries themselves are remapped by [`crate::addr`]);
//! - collects references to range and location lists (with the unit's base address), and the
//!   positions of section offsets that must follow resized sections (`DW_AT_stmt_list`,
//!   `DW_AT_ranges`/location lists as `DW_FORM_sec_offset`, `DW_AT_rnglists_base`,
//!   `DW_AT_loclists_base`);
//! - remaps `DW_OP_addr` code addresses inside `DW_FORM_exprloc` expressions.

use gimli::constants as c;
use gimli::{AttributeValue, DebugAbbrev, DebugInfo, DwAt, DwForm, LittleEndian};

use crate::bytes::{put_uint, put_uleb_padded, Reader};
use crate::expr::{patch_expr, ExprEnc};
use crate::{addr, is_not_code, map_code, AddressMap, Error};

pub(crate) const SECTION: &str = ".debug_info";

/// Which list section a reference points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ListKind {
    /// `.debug_rnglists` (DWARF 5).
    RngLists,
    /// `.debug_loclists` (DWARF 5).
    LocLists,
    /// `.debug_ranges` (DWARF 4).
    Ranges,
    /// `.debug_loc` (DWARF 4).
    Loc,
}

/// What a list needs from its unit to be decoded (DWARF 5 section 2.17.3 and 2.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListCtx {
    /// Old base address: the unit's `DW_AT_low_pc`, or 0.
    pub base: u64,
    /// `DW_AT_addr_base` (bytes into `.debug_addr`), if any.
    pub addr_base: Option<u64>,
    /// Address size in bytes.
    pub addr_size: usize,
    /// Offset size in bytes (4 for DWARF32, 8 for DWARF64).
    pub offset_size: usize,
}

/// A reference from a DIE to a list.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListRef {
    pub kind: ListKind,
    /// Old offset of the list from the start of its section (bytes).
    pub offset: u64,
    pub ctx: ListCtx,
}

/// Which offset map an offset patch uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OffsetKind {
    /// `DW_AT_stmt_list`: `.debug_line` unit offset.
    Line,
    /// A list offset in `.debug_rnglists`.
    RngList,
    /// A list offset in `.debug_loclists`.
    LocList,
    /// `DW_AT_rnglists_base`.
    RngBase,
    /// `DW_AT_loclists_base`.
    LocBase,
}

/// A section offset in `.debug_info` to rewrite once the target section is re-laid out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OffsetPatch {
    pub pos: usize,
    pub size: usize,
    pub kind: OffsetKind,
    pub old: u64,
}

/// Result of the DIE walk.
pub(crate) struct InfoOut {
    pub bytes: Vec<u8>,
    pub refs: Vec<ListRef>,
    pub patches: Vec<OffsetPatch>,
    /// Address size of the first unit (bytes); used for DWARF 4 line tables.
    pub addr_size: Option<u8>,
}

/// Inputs of the walk besides `.debug_info`.
pub(crate) struct InfoInputs<'a> {
    pub abbrev: &'a [u8],
    pub addr: &'a [u8],
    pub rnglists: &'a [u8],
    pub loclists: &'a [u8],
}

struct Attr<'a> {
    name: DwAt,
    form: DwForm,
    value: AttributeValue<gimli::EndianSlice<'a, LittleEndian>>,
    /// Position of the attribute's value in `.debug_info` (bytes).
    pos: usize,
    /// Size of the value (bytes).
    len: usize,
}

struct Unit {
    version: u16,
    addr_size: usize,
    offset_size: usize,
    addr_base: Option<u64>,
    rnglists_base: Option<u64>,
    loclists_base: Option<u64>,
    base: u64,
}

fn err_g(offset: usize, source: gimli::Error) -> Error {
    Error::Gimli {
        section: SECTION,
        offset: offset as u64,
        source,
    }
}

fn unsupported(pos: usize, what: String) -> Error {
    Error::Unsupported {
        section: SECTION,
        offset: pos as u64,
        what,
    }
}

/// Attributes of location-list class (DWARF 5 section 7.5.5, class `loclist`).
fn is_loclist_attr(name: DwAt) -> bool {
    matches!(
        name,
        c::DW_AT_location
            | c::DW_AT_string_length
            | c::DW_AT_return_addr
            | c::DW_AT_frame_base
            | c::DW_AT_segment
            | c::DW_AT_static_link
            | c::DW_AT_use_location
            | c::DW_AT_vtable_elem_location
            | c::DW_AT_data_member_location
            | c::DW_AT_call_value
            | c::DW_AT_call_data_value
            | c::DW_AT_call_data_location
            | c::DW_AT_call_target
            | c::DW_AT_call_target_clobbered
            | c::DW_AT_GNU_call_site_value
            | c::DW_AT_GNU_call_site_target
    )
}

/// Attributes whose address is a code address that must be mappable.
fn is_code_addr_attr(name: DwAt) -> bool {
    matches!(
        name,
        c::DW_AT_low_pc
            | c::DW_AT_high_pc
            | c::DW_AT_entry_pc
            | c::DW_AT_call_return_pc
            | c::DW_AT_call_pc
    )
}

/// Walks `.debug_info` and returns it with in-place patches applied.
pub(crate) fn walk(info: &[u8], inp: &InfoInputs<'_>, map: &AddressMap) -> Result<InfoOut, Error> {
    let mut out = InfoOut {
        bytes: info.to_vec(),
        refs: Vec::new(),
        patches: Vec::new(),
        addr_size: None,
    };
    let debug_info = DebugInfo::new(info, LittleEndian);
    let debug_abbrev = DebugAbbrev::new(inp.abbrev, LittleEndian);
    let mut units = debug_info.units();
    let mut last = 0usize;
    while let Some(header) = units.next().map_err(|e| err_g(last, e))? {
        let unit_off = header.debug_info_offset().map_or(last, |o| o.0);
        last = unit_off;
        let enc = header.encoding();
        if !(4..=5).contains(&enc.version) {
            return Err(unsupported(
                unit_off,
                format!("DWARF version {} unit", enc.version),
            ));
        }
        out.addr_size.get_or_insert(enc.address_size);
        let abbrevs = header
            .abbreviations(&debug_abbrev)
            .map_err(|e| err_g(unit_off, e))?;
        let mut unit = Unit {
            version: enc.version,
            addr_size: usize::from(enc.address_size),
            offset_size: usize::from(enc.format.word_size()),
            addr_base: None,
            rnglists_base: None,
            loclists_base: None,
            base: 0,
        };
        // Pass 1: the root DIE fixes the unit's bases (attribute order is free).
        let mut raw = header
            .entries_raw(&abbrevs, None)
            .map_err(|e| err_g(unit_off, e))?;
        let root = read_die(&mut raw, unit_off)?.unwrap_or_default();
        for a in &root {
            match (a.name, a.value) {
                (c::DW_AT_addr_base | c::DW_AT_GNU_addr_base, AttributeValue::SecOffset(o)) => {
                    unit.addr_base = Some(o as u64)
                }
                (c::DW_AT_rnglists_base, AttributeValue::SecOffset(o)) => {
                    unit.rnglists_base = Some(o as u64)
                }
                (c::DW_AT_loclists_base, AttributeValue::SecOffset(o)) => {
                    unit.loclists_base = Some(o as u64)
                }
                _ => {}
            }
        }
        if let Some(low) = root.iter().find(|a| a.name == c::DW_AT_low_pc) {
            unit.base = resolve_addr(low, &unit, inp.addr)?;
        }
        // Pass 2: every DIE.
        let mut raw = header
            .entries_raw(&abbrevs, None)
            .map_err(|e| err_g(unit_off, e))?;
        while !raw.is_empty() {
            if let Some(attrs) = read_die(&mut raw, unit_off)? {
                process_die(&attrs, &unit, inp, map, &mut out)?;
            }
        }
    }
    Ok(out)
}

fn read_die<'a>(
    raw: &mut gimli::EntriesRaw<'_, gimli::EndianSlice<'a, LittleEndian>>,
    unit_off: usize,
) -> Result<Option<Vec<Attr<'a>>>, Error> {
    let at = unit_off + raw.next_offset().0;
    let Some(abbrev) = raw.read_abbreviation().map_err(|e| err_g(at, e))? else {
        return Ok(None);
    };
    let mut attrs = Vec::with_capacity(abbrev.attributes().len());
    for spec in abbrev.attributes() {
        let start = unit_off + raw.next_offset().0;
        if spec.form() == c::DW_FORM_indirect {
            return Err(unsupported(start, "DW_FORM_indirect".into()));
        }
        let attr = raw.read_attribute(*spec).map_err(|e| err_g(start, e))?;
        let end = unit_off + raw.next_offset().0;
        attrs.push(Attr {
            name: attr.name(),
            form: spec.form(),
            value: attr.raw_value(),
            pos: start,
            len: end - start,
        });
    }
    Ok(Some(attrs))
}

/// Old address held by an address-class attribute.
fn resolve_addr(a: &Attr<'_>, unit: &Unit, addr_sec: &[u8]) -> Result<u64, Error> {
    match a.value {
        AttributeValue::Addr(v) => Ok(v),
        AttributeValue::DebugAddrIndex(i) => {
            let base = unit.addr_base.ok_or_else(|| {
                unsupported(a.pos, "DW_FORM_addrx without DW_AT_addr_base".into())
            })?;
            addr::read(addr_sec, base, i.0 as u64, unit.addr_size)
        }
        _ => Err(unsupported(
            a.pos,
            format!("{} with form {}", a.name, a.form),
        )),
    }
}

fn constant(a: &Attr<'_>) -> Option<u64> {
    match a.value {
        AttributeValue::Data1(v) => Some(v.into()),
        AttributeValue::Data2(v) => Some(v.into()),
        AttributeValue::Data4(v) => Some(v.into()),
        AttributeValue::Data8(v) => Some(v),
        AttributeValue::Udata(v) => Some(v),
        _ => None,
    }
}

/// Rewrites a constant attribute in place at its original width.
fn put_constant(bytes: &mut [u8], a: &Attr<'_>, v: u64) -> Result<(), Error> {
    match a.form {
        c::DW_FORM_udata => put_uleb_padded(bytes, a.pos, a.len, v, SECTION),
        c::DW_FORM_data1 | c::DW_FORM_data2 | c::DW_FORM_data4 | c::DW_FORM_data8 => {
            put_uint(bytes, a.pos, a.len, v, SECTION)
        }
        f => Err(unsupported(a.pos, format!("{} with form {f}", a.name))),
    }
}

fn process_die(
    attrs: &[Attr<'_>],
    unit: &Unit,
    inp: &InfoInputs<'_>,
    map: &AddressMap,
    out: &mut InfoOut,
) -> Result<(), Error> {
    let low = match attrs.iter().find(|a| a.name == c::DW_AT_low_pc) {
        Some(a) => Some(resolve_addr(a, unit, inp.addr)?),
        None => None,
    };
    let ctx = ListCtx {
        base: unit.base,
        addr_base: unit.addr_base,
        addr_size: unit.addr_size,
        offset_size: unit.offset_size,
    };
    for a in attrs {
        match a.value {
            AttributeValue::Addr(_) | AttributeValue::DebugAddrIndex(_) => {
                let old = resolve_addr(a, unit, inp.addr)?;
                // Code-context addresses must map (tombstones 0/-1/-2 are kept by map_code);
                // other addresses are mapped only when they lie in the code interval.
                let new = if is_code_addr_attr(a.name) || map.covers(old) {
                    map_code(map, old, SECTION, a.pos)?
                } else {
                    old
                };
                if a.form == c::DW_FORM_addr {
                    put_uint(&mut out.bytes, a.pos, unit.addr_size, new, SECTION)?;
                }
            }
            AttributeValue::Data1(_)
            | AttributeValue::Data2(_)
            | AttributeValue::Data4(_)
            | AttributeValue::Data8(_)
            | AttributeValue::Udata(_)
            | AttributeValue::Sdata(_)
                if a.name == c::DW_AT_high_pc || a.name == c::DW_AT_entry_pc =>
            {
                let off = constant(a).ok_or_else(|| {
                    unsupported(a.pos, format!("{} with form {}", a.name, a.form))
                })?;
                let low = low.ok_or_else(|| {
                    unsupported(a.pos, format!("{} as offset without DW_AT_low_pc", a.name))
                })?;
                if !map.covers(low) && is_not_code(low) {
                    continue;
                }
                let end = low
                    .checked_add(off)
                    .ok_or_else(|| unsupported(a.pos, "low_pc + offset overflows".into()))?;
                let new_low = map_code(map, low, SECTION, a.pos)?;
                let new_end = map_code(map, end, SECTION, a.pos)?;
                let new_off = new_end.checked_sub(new_low).ok_or(Error::Backwards {
                    section: SECTION,
                    offset: a.pos as u64,
                    address: new_end,
                })?;
                put_constant(&mut out.bytes, a, new_off)?;
            }
            AttributeValue::DebugRngListsIndex(i) => {
                let offset = list_index(inp.rnglists, unit.rnglists_base, i.0 as u64, unit, a)?;
                out.refs.push(ListRef {
                    kind: ListKind::RngLists,
                    offset,
                    ctx,
                });
            }
            AttributeValue::DebugLocListsIndex(i) => {
                let offset = list_index(inp.loclists, unit.loclists_base, i.0 as u64, unit, a)?;
                out.refs.push(ListRef {
                    kind: ListKind::LocLists,
                    offset,
                    ctx,
                });
            }
            AttributeValue::SecOffset(o) => {
                let o = o as u64;
                let v5 = unit.version >= 5;
                let mut patch = |kind| {
                    out.patches.push(OffsetPatch {
                        pos: a.pos,
                        size: a.len,
                        kind,
                        old: o,
                    })
                };
                match a.name {
                    c::DW_AT_stmt_list => patch(OffsetKind::Line),
                    c::DW_AT_rnglists_base => patch(OffsetKind::RngBase),
                    c::DW_AT_loclists_base => patch(OffsetKind::LocBase),
                    c::DW_AT_ranges | c::DW_AT_start_scope => {
                        if v5 {
                            patch(OffsetKind::RngList);
                        }
                        out.refs.push(ListRef {
                            kind: if v5 {
                                ListKind::RngLists
                            } else {
                                ListKind::Ranges
                            },
                            offset: o,
                            ctx,
                        });
                    }
                    n if is_loclist_attr(n) => {
                        if v5 {
                            patch(OffsetKind::LocList);
                        }
                        out.refs.push(ListRef {
                            kind: if v5 {
                                ListKind::LocLists
                            } else {
                                ListKind::Loc
                            },
                            offset: o,
                            ctx,
                        });
                    }
                    c::DW_AT_str_offsets_base
                    | c::DW_AT_addr_base
                    | c::DW_AT_GNU_addr_base
                    | c::DW_AT_macros
                    | c::DW_AT_macro_info
                    | c::DW_AT_GNU_macros => {}
                    n => return Err(unsupported(a.pos, format!("{n} as DW_FORM_sec_offset"))),
                }
            }
            AttributeValue::Exprloc(e) => {
                let len = e.0.len();
                let start = a.pos + a.len - len;
                patch_expr(
                    &mut out.bytes,
                    start,
                    len,
                    ExprEnc {
                        addr_size: unit.addr_size,
                        offset_size: unit.offset_size,
                    },
                    map,
                    SECTION,
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Absolute offset of list `index` of the contribution whose offset table starts at `base`.
fn list_index(
    sec: &[u8],
    base: Option<u64>,
    index: u64,
    unit: &Unit,
    a: &Attr<'_>,
) -> Result<u64, Error> {
    let base = base.ok_or_else(|| {
        unsupported(
            a.pos,
            format!("{} list index without DW_AT_*lists_base", a.name),
        )
    })?;
    let pos = index
        .checked_mul(unit.offset_size as u64)
        .and_then(|o| o.checked_add(base))
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| unsupported(a.pos, "list index out of range".into()))?;
    let rel = Reader::new(sec, pos, SECTION).uint(unit.offset_size)?;
    base.checked_add(rel)
        .ok_or_else(|| unsupported(a.pos, "list offset overflows".into()))
}
