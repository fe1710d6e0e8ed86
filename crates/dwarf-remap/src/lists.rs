//! Range and location lists.
//!
//! - DWARF 5 `.debug_rnglists` / `.debug_loclists` (DWARF 5 sections 2.17.3, 2.6.2, 7.28, 7.29):
//!   entries use ULEB128 offsets and lengths whose size changes with the values, so every
//!   contribution is re-encoded entry by entry (same entry kinds, same order, location
//!   descriptions copied with `DW_OP_addr` remapped). The offset tables used by
//!   `DW_FORM_rnglistx` / `DW_FORM_loclistx` are rebuilt, and maps from old to new list offsets
//!   and table bases are returned to patch `DW_FORM_sec_offset` references and
//!   `DW_AT_rnglists_base` / `DW_AT_loclists_base`.
//! - DWARF 4 `.debug_ranges` / `.debug_loc` (DWARF 4 sections 2.17.3, 2.6.2): entries are pairs
//!   of fixed-size addresses, remapped in place.
//!
//! Offset-pair entries are relative to the current base address (the unit's `DW_AT_low_pc` or the
//! last base-address entry): they are turned into absolute old addresses, mapped, and made
//! relative to the new base again. A base address outside the code interval (such as 0) is kept.

use std::collections::{BTreeMap, HashMap};

use crate::bytes::{push_uint, push_uleb, put_uint, Reader};
use crate::expr::{patch_expr, ExprEnc};
use crate::info::{ListCtx, ListKind, ListRef};
use crate::{addr, map_code, AddressMap, Error};

/// Result of re-encoding a DWARF 5 list section.
pub(crate) struct ListsOut {
    pub bytes: Vec<u8>,
    /// Old list offset -> new list offset (bytes from section start).
    pub lists: BTreeMap<u64, u64>,
    /// Old offset-table start (`DW_AT_*lists_base`) -> new one.
    pub bases: BTreeMap<u64, u64>,
}

fn section_name(kind: ListKind) -> &'static str {
    match kind {
        ListKind::RngLists => ".debug_rnglists",
        ListKind::LocLists => ".debug_loclists",
        ListKind::Ranges => ".debug_ranges",
        ListKind::Loc => ".debug_loc",
    }
}

fn unsupported(section: &'static str, pos: usize, what: String) -> Error {
    Error::Unsupported {
        section,
        offset: pos as u64,
        what,
    }
}

/// Base address rule: code addresses map; anything else (0, data) is kept.
fn map_base(map: &AddressMap, a: u64, section: &'static str, pos: usize) -> Result<u64, Error> {
    if map.covers(a) {
        map_code(map, a, section, pos)
    } else {
        Ok(a)
    }
}

/// Contexts of the references into one section, keyed by old list offset; conflicting contexts
/// for the same list are an error.
fn contexts(
    refs: &[ListRef],
    kind: ListKind,
    section: &'static str,
) -> Result<HashMap<u64, ListCtx>, Error> {
    let mut by_off: HashMap<u64, ListCtx> = HashMap::new();
    for r in refs.iter().filter(|r| r.kind == kind) {
        match by_off.get(&r.offset) {
            Some(c) if *c != r.ctx => {
                return Err(unsupported(
                    section,
                    r.offset as usize,
                    "list shared by units with different base addresses".into(),
                ))
            }
            _ => {
                by_off.insert(r.offset, r.ctx);
            }
        }
    }
    Ok(by_off)
}

struct Cursor<'a> {
    map: &'a AddressMap,
    addr_sec: &'a [u8],
    ctx: ListCtx,
    section: &'static str,
    base: u64,
    new_base: u64,
}

impl Cursor<'_> {
    fn indexed(&self, index: u64, pos: usize) -> Result<u64, Error> {
        let base = self.ctx.addr_base.ok_or_else(|| {
            unsupported(
                self.section,
                pos,
                "indexed address without DW_AT_addr_base".into(),
            )
        })?;
        addr::read(self.addr_sec, base, index, self.ctx.addr_size)
    }

    fn code(&self, a: u64, pos: usize) -> Result<u64, Error> {
        map_code(self.map, a, self.section, pos)
    }

    /// New length of `[start, start + len)`.
    fn length(&self, start: u64, len: u64, pos: usize) -> Result<u64, Error> {
        let end = start
            .checked_add(len)
            .ok_or_else(|| unsupported(self.section, pos, "range end overflows".into()))?;
        let (ns, ne) = (self.code(start, pos)?, self.code(end, pos)?);
        ne.checked_sub(ns).ok_or(Error::Backwards {
            section: self.section,
            offset: pos as u64,
            address: ne,
        })
    }

    /// New offset of base-relative `off`.
    fn offset(&self, off: u64, pos: usize) -> Result<u64, Error> {
        let abs = self
            .base
            .checked_add(off)
            .ok_or_else(|| unsupported(self.section, pos, "base + offset overflows".into()))?;
        let n = self.code(abs, pos)?;
        n.checked_sub(self.new_base).ok_or(Error::Backwards {
            section: self.section,
            offset: pos as u64,
            address: n,
        })
    }

    fn set_base(&mut self, a: u64, pos: usize) -> Result<(), Error> {
        self.base = a;
        self.new_base = map_base(self.map, a, self.section, pos)?;
        Ok(())
    }
}

/// Re-encodes a DWARF 5 `.debug_rnglists` (`kind == RngLists`) or `.debug_loclists`.
pub(crate) fn rewrite5(
    old: &[u8],
    kind: ListKind,
    refs: &[ListRef],
    addr_sec: &[u8],
    map: &AddressMap,
) -> Result<ListsOut, Error> {
    let section = section_name(kind);
    let by_off = contexts(refs, kind, section)?;
    let mut out = ListsOut {
        bytes: Vec::with_capacity(old.len() + old.len() / 8),
        lists: BTreeMap::new(),
        bases: BTreeMap::new(),
    };
    let mut r = Reader::new(old, 0, section);
    while r.pos < old.len() {
        let unit = r.pos;
        let (len, osize) = r.initial_length()?;
        let end = r.pos + len;
        let version = r.uint(2)?;
        let addr_size = r.u8()?;
        let seg = r.u8()?;
        let count = r.uint(4)?;
        if version != 5 || seg != 0 {
            return Err(unsupported(
                section,
                unit,
                format!("list table version {version}, segment selector size {seg}"),
            ));
        }
        let table = r.pos;
        let count = usize::try_from(count).map_err(|_| r.truncated())?;
        let mut rel = Vec::with_capacity(count);
        for _ in 0..count {
            rel.push(r.uint(osize)?);
        }
        let contrib_ctx = by_off
            .iter()
            .filter(|(&o, _)| o >= unit as u64 && o < end as u64)
            .min_by_key(|(&o, _)| o)
            .map(|(_, c)| *c);

        let new_unit = out.bytes.len();
        if osize == 8 {
            out.bytes.extend_from_slice(&[0xff; 4]);
        }
        out.bytes.extend_from_slice(&[0; 8][..osize]);
        out.bytes.extend_from_slice(&5u16.to_le_bytes());
        out.bytes.push(addr_size);
        out.bytes.push(0);
        push_uint(&mut out.bytes, 4, count as u64, section, unit)?;
        let new_table = out.bytes.len();
        out.bytes.resize(new_table + count * osize, 0);
        out.bases.insert(table as u64, new_table as u64);

        while r.pos < end {
            let start = r.pos;
            out.lists.insert(start as u64, out.bytes.len() as u64);
            let ctx = by_off.get(&(start as u64)).copied().or(contrib_ctx);
            let ctx = ctx.ok_or_else(|| {
                unsupported(section, start, "list not referenced by any unit".into())
            })?;
            if usize::from(addr_size) != ctx.addr_size {
                return Err(unsupported(
                    section,
                    start,
                    "list address size differs from its unit".into(),
                ));
            }
            let mut cur = Cursor {
                map,
                addr_sec,
                ctx,
                section,
                base: 0,
                new_base: 0,
            };
            cur.set_base(ctx.base, start)?;
            match kind {
                ListKind::RngLists => rng_list(&mut r, &mut cur, &mut out.bytes)?,
                _ => loc_list(&mut r, &mut cur, &mut out.bytes, osize)?,
            }
            if r.pos > end {
                return Err(Error::Truncated {
                    section,
                    offset: start as u64,
                });
            }
        }
        // Offset table and unit length.
        for (i, &rv) in rel.iter().enumerate() {
            let old_abs = table as u64 + rv;
            let new_abs = *out.lists.get(&old_abs).ok_or_else(|| {
                unsupported(
                    section,
                    table + i * osize,
                    "offset table entry is not a list start".into(),
                )
            })?;
            put_uint(
                &mut out.bytes,
                new_table + i * osize,
                osize,
                new_abs - new_table as u64,
                section,
            )?;
        }
        let hdr = if osize == 8 { 12 } else { 4 };
        let new_len = (out.bytes.len() - new_unit - hdr) as u64;
        put_uint(
            &mut out.bytes,
            new_unit + hdr - osize,
            osize,
            new_len,
            section,
        )?;
        r.pos = end;
    }
    Ok(out)
}

fn rng_list(r: &mut Reader<'_>, cur: &mut Cursor<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
    let asz = cur.ctx.addr_size;
    let sec = cur.section;
    loop {
        let at = r.pos;
        let kind = r.u8()?;
        out.push(kind);
        match kind {
            // DW_RLE_end_of_list
            0 => return Ok(()),
            // DW_RLE_base_addressx
            1 => {
                let i = r.uleb()?;
                let a = cur.indexed(i, at)?;
                cur.set_base(a, at)?;
                push_uleb(out, i);
            }
            // DW_RLE_startx_endx
            2 => {
                let (i, j) = (r.uleb()?, r.uleb()?);
                cur.code(cur.indexed(i, at)?, at)?;
                cur.code(cur.indexed(j, at)?, at)?;
                push_uleb(out, i);
                push_uleb(out, j);
            }
            // DW_RLE_startx_length
            3 => {
                let (i, len) = (r.uleb()?, r.uleb()?);
                let s = cur.indexed(i, at)?;
                push_uleb(out, i);
                push_uleb(out, cur.length(s, len, at)?);
            }
            // DW_RLE_offset_pair
            4 => {
                let (b, e) = (r.uleb()?, r.uleb()?);
                push_uleb(out, cur.offset(b, at)?);
                push_uleb(out, cur.offset(e, at)?);
            }
            // DW_RLE_base_address
            5 => {
                let a = r.uint(asz)?;
                cur.set_base(a, at)?;
                push_uint(out, asz, cur.new_base, sec, at)?;
            }
            // DW_RLE_start_end
            6 => {
                let (b, e) = (r.uint(asz)?, r.uint(asz)?);
                push_uint(out, asz, cur.code(b, at)?, sec, at)?;
                push_uint(out, asz, cur.code(e, at)?, sec, at)?;
            }
            // DW_RLE_start_length
            7 => {
                let (b, len) = (r.uint(asz)?, r.uleb()?);
                push_uint(out, asz, cur.code(b, at)?, sec, at)?;
                push_uleb(out, cur.length(b, len, at)?);
            }
            k => {
                return Err(unsupported(
                    sec,
                    at,
                    format!("range list entry kind {k:#x}"),
                ))
            }
        }
    }
}

fn loc_list(
    r: &mut Reader<'_>,
    cur: &mut Cursor<'_>,
    out: &mut Vec<u8>,
    offset_size: usize,
) -> Result<(), Error> {
    let asz = cur.ctx.addr_size;
    let sec = cur.section;
    loop {
        let at = r.pos;
        let kind = r.u8()?;
        out.push(kind);
        match kind {
            // DW_LLE_end_of_list
            0 => return Ok(()),
            // DW_LLE_base_addressx
            1 => {
                let i = r.uleb()?;
                let a = cur.indexed(i, at)?;
                cur.set_base(a, at)?;
                push_uleb(out, i);
                continue;
            }
            // DW_LLE_startx_endx
            2 => {
                let (i, j) = (r.uleb()?, r.uleb()?);
                cur.code(cur.indexed(i, at)?, at)?;
                cur.code(cur.indexed(j, at)?, at)?;
                push_uleb(out, i);
                push_uleb(out, j);
            }
            // DW_LLE_startx_length
            3 => {
                let (i, len) = (r.uleb()?, r.uleb()?);
                let s = cur.indexed(i, at)?;
                push_uleb(out, i);
                push_uleb(out, cur.length(s, len, at)?);
            }
            // DW_LLE_offset_pair
            4 => {
                let (b, e) = (r.uleb()?, r.uleb()?);
                push_uleb(out, cur.offset(b, at)?);
                push_uleb(out, cur.offset(e, at)?);
            }
            // DW_LLE_default_location
            5 => {}
            // DW_LLE_base_address
            6 => {
                let a = r.uint(asz)?;
                cur.set_base(a, at)?;
                push_uint(out, asz, cur.new_base, sec, at)?;
                continue;
            }
            // DW_LLE_start_end
            7 => {
                let (b, e) = (r.uint(asz)?, r.uint(asz)?);
                push_uint(out, asz, cur.code(b, at)?, sec, at)?;
                push_uint(out, asz, cur.code(e, at)?, sec, at)?;
            }
            // DW_LLE_start_length
            8 => {
                let (b, len) = (r.uint(asz)?, r.uleb()?);
                push_uint(out, asz, cur.code(b, at)?, sec, at)?;
                push_uleb(out, cur.length(b, len, at)?);
            }
            k => {
                return Err(unsupported(
                    sec,
                    at,
                    format!("location list entry kind {k:#x}"),
                ))
            }
        }
        // Counted location description.
        let n = r.uleb()?;
        let n = usize::try_from(n).map_err(|_| r.truncated())?;
        let expr = r.bytes(n)?;
        push_uleb(out, n as u64);
        let start = out.len();
        out.extend_from_slice(expr);
        let enc = ExprEnc {
            addr_size: asz,
            offset_size,
        };
        patch_expr(out, start, n, enc, cur.map, sec)?;
    }
}

/// Remaps DWARF 4 `.debug_ranges` (`kind == Ranges`) or `.debug_loc` in place.
pub(crate) fn patch4(
    old: &[u8],
    kind: ListKind,
    refs: &[ListRef],
    map: &AddressMap,
) -> Result<Vec<u8>, Error> {
    let section = section_name(kind);
    let by_off = contexts(refs, kind, section)?;
    let mut out = old.to_vec();
    let mut offs: Vec<_> = by_off.into_iter().collect();
    offs.sort_by_key(|(o, _)| *o);
    for (off, ctx) in offs {
        let asz = ctx.addr_size;
        let max = if asz == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * asz)) - 1
        };
        let start = usize::try_from(off).map_err(|_| Error::Truncated {
            section,
            offset: off,
        })?;
        let mut r = Reader::new(old, start, section);
        let mut cur = Cursor {
            map,
            addr_sec: &[],
            ctx,
            section,
            base: 0,
            new_base: 0,
        };
        cur.set_base(ctx.base, start)?;
        loop {
            let at = r.pos;
            let (b, e) = (r.uint(asz)?, r.uint(asz)?);
            if b == 0 && e == 0 {
                break;
            }
            if b == max {
                cur.set_base(e, at)?;
                put_uint(&mut out, at + asz, asz, cur.new_base, section)?;
                continue;
            }
            put_uint(&mut out, at, asz, cur.offset(b, at)?, section)?;
            put_uint(&mut out, at + asz, asz, cur.offset(e, at)?, section)?;
            if kind == ListKind::Loc {
                let n = usize::try_from(r.uint(2)?).map_err(|_| r.truncated())?;
                let s = r.pos;
                r.bytes(n)?;
                let enc = ExprEnc {
                    addr_size: asz,
                    offset_size: ctx.offset_size,
                };
                patch_expr(&mut out, s, n, enc, map, section)?;
            }
        }
    }
    Ok(out)
}
