//! `.debug_frame` (DWARF 5 section 6.4; CIE versions 1, 3, 4; augmentation empty or LLVM's
//! `[llvm:vX.Y]`): CIEs are copied verbatim (their initial instructions must not move the
//! location); every FDE gets a mapped
//! `initial_location`, a recomputed `address_range`, and re-encoded call frame instructions:
//! `DW_CFA_advance_loc*` deltas (in code alignment units) are recomputed from mapped locations,
//! keeping the original opcode when the new delta fits it, and `DW_CFA_set_loc` is mapped.
//! Entries change size, so the section is rebuilt and FDE CIE pointers follow their CIE.
//! Opcodes: `llvm/BinaryFormat/Dwarf.def` (including `DW_CFA_LLVM_def_aspace_cfa{,_sf}` 0x30,
//! 0x31 from AMDGPUUsage); an unknown opcode is an error.

use std::collections::HashMap;

use crate::bytes::{push_uint, put_uint, Reader};
use crate::expr::{patch_expr, ExprEnc};
use crate::{map_code, AddressMap, Error};

pub(crate) const SECTION: &str = ".debug_frame";

#[derive(Clone, Copy)]
struct Cie {
    new_offset: u64,
    code_align: u64,
    addr_size: usize,
}

fn unsupported(pos: usize, what: String) -> Error {
    Error::Unsupported {
        section: SECTION,
        offset: pos as u64,
        what,
    }
}

/// Whether a CIE augmentation string is LLVM's vendor-extension marker `[llvm:vX.Y]`
/// (AMDGPUUsage, "Call Frame Information": AMDGPU CIEs may carry `[llvm:v0.0]`, naming the
/// version of the LLVM DWARF extensions the CFI uses, such as `DW_CFA_LLVM_def_aspace_cfa`).
/// It has no `z` and so no augmentation data (DWARF 5 section 6.4.1): the CIE's fields after it
/// are read as for an empty augmentation.
fn is_llvm_vendor(aug: &[u8]) -> bool {
    let Some(ver) = aug
        .strip_prefix(b"[llvm:v")
        .and_then(|r| r.strip_suffix(b"]"))
    else {
        return false;
    };
    let mut parts = ver.split(|&b| b == b'.');
    let num =
        |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    num(parts.next()) && num(parts.next()) && parts.next().is_none()
}

/// Rebuilds `.debug_frame`. `default_addr_size` (bytes) applies to CIEs before version 4.
pub(crate) fn rewrite(
    old: &[u8],
    map: &AddressMap,
    default_addr_size: usize,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(old.len() + old.len() / 8);
    let mut cies: HashMap<u64, Cie> = HashMap::new();
    let mut r = Reader::new(old, 0, SECTION);
    while r.pos < old.len() {
        let entry = r.pos;
        let (len, osize) = r.initial_length()?;
        let hdr = r.pos - entry;
        let end = r.pos + len;
        if len == 0 {
            out.extend_from_slice(old.get(entry..end).unwrap_or_default());
            continue;
        }
        let id = r.uint(osize)?;
        let cie_id = if osize == 8 { u64::MAX } else { 0xffff_ffff };
        let new_entry = out.len();
        if id == cie_id {
            let version = r.u8()?;
            if !matches!(version, 1 | 3 | 4) {
                return Err(unsupported(entry, format!("CIE version {version}")));
            }
            let mut aug = Vec::new();
            loop {
                let b = r.u8()?;
                if b == 0 {
                    break;
                }
                aug.push(b);
            }
            if !aug.is_empty() && !is_llvm_vendor(&aug) {
                return Err(unsupported(
                    entry,
                    format!("CIE augmentation {:?}", String::from_utf8_lossy(&aug)),
                ));
            }
            let (addr_size, seg_size) = if version >= 4 {
                (usize::from(r.u8()?), r.u8()?)
            } else {
                (default_addr_size, 0)
            };
            if seg_size != 0 {
                return Err(unsupported(entry, "CIE segment selector".into()));
            }
            let code_align = r.uleb()?;
            r.sleb()?;
            if version == 1 {
                r.u8()?;
            } else {
                r.uleb()?;
            }
            // Initial instructions: validate (no location changes) and copy.
            let mut scratch = Vec::new();
            instructions(&mut r, end, &mut scratch, None, code_align, addr_size, map)?;
            let bytes = old.get(entry..end).ok_or(Error::Truncated {
                section: SECTION,
                offset: entry as u64,
            })?;
            out.extend_from_slice(bytes);
            cies.insert(
                entry as u64,
                Cie {
                    new_offset: new_entry as u64,
                    code_align,
                    addr_size,
                },
            );
        } else {
            let cie = *cies.get(&id).ok_or_else(|| {
                unsupported(
                    entry,
                    format!("FDE refers to CIE at {id:#x} not seen before it"),
                )
            })?;
            let asz = cie.addr_size;
            let loc = r.uint(asz)?;
            let range = r.uint(asz)?;
            let new_loc = map_code(map, loc, SECTION, entry)?;
            let end_addr = loc
                .checked_add(range)
                .ok_or_else(|| unsupported(entry, "FDE range overflows".into()))?;
            let new_end = map_code(map, end_addr, SECTION, entry)?;
            let new_range = new_end.checked_sub(new_loc).ok_or(Error::Backwards {
                section: SECTION,
                offset: entry as u64,
                address: new_end,
            })?;
            if osize == 8 {
                out.extend_from_slice(&[0xff; 4]);
            }
            out.extend_from_slice(&[0; 8][..osize]);
            push_uint(&mut out, osize, cie.new_offset, SECTION, entry)?;
            push_uint(&mut out, asz, new_loc, SECTION, entry)?;
            push_uint(&mut out, asz, new_range, SECTION, entry)?;
            let mut locs = (loc, new_loc);
            instructions(
                &mut r,
                end,
                &mut out,
                Some(&mut locs),
                cie.code_align,
                asz,
                map,
            )?;
            // Keep the producer's padding to a multiple of the address size.
            if (hdr + len) % asz == 0 {
                while (out.len() - new_entry) % asz != 0 {
                    out.push(0);
                }
            }
            let new_len = (out.len() - new_entry - hdr) as u64;
            put_uint(&mut out, new_entry + hdr - osize, osize, new_len, SECTION)?;
        }
        r.pos = end;
    }
    Ok(out)
}

/// Copies call frame instructions from `r` (up to `end`) into `out`. With `locs` (old, new
/// current location) the advance operations are re-encoded; without, they are an error.
fn instructions(
    r: &mut Reader<'_>,
    end: usize,
    out: &mut Vec<u8>,
    mut locs: Option<&mut (u64, u64)>,
    code_align: u64,
    addr_size: usize,
    map: &AddressMap,
) -> Result<(), Error> {
    while r.pos < end {
        let at = r.pos;
        let op = r.u8()?;
        let primary = op & 0xc0;
        let advance = match (primary, op) {
            (0x40, _) => Some((u64::from(op & 0x3f), 0u8)),
            (0, 0x02) => Some((r.uint(1)?, 1)),
            (0, 0x03) => Some((r.uint(2)?, 2)),
            (0, 0x04) => Some((r.uint(4)?, 4)),
            _ => None,
        };
        if let Some((factor, width)) = advance {
            let Some(l) = locs.as_deref_mut() else {
                return Err(unsupported(at, "DW_CFA_advance_loc in a CIE".into()));
            };
            let delta = factor
                .checked_mul(code_align)
                .ok_or_else(|| unsupported(at, "advance overflows".into()))?;
            l.0 =
                l.0.checked_add(delta)
                    .ok_or_else(|| unsupported(at, "location overflows".into()))?;
            let target = map_code(map, l.0, SECTION, at)?;
            let nd = target.checked_sub(l.1).ok_or(Error::Backwards {
                section: SECTION,
                offset: at as u64,
                address: target,
            })?;
            emit_advance(out, nd, code_align, width, target, addr_size, at)?;
            l.1 = target;
            continue;
        }
        if op == 0x01 {
            // DW_CFA_set_loc
            let Some(l) = locs.as_deref_mut() else {
                return Err(unsupported(at, "DW_CFA_set_loc in a CIE".into()));
            };
            let a = r.uint(addr_size)?;
            l.0 = a;
            l.1 = map_code(map, a, SECTION, at)?;
            out.push(0x01);
            push_uint(out, addr_size, l.1, SECTION, at)?;
            continue;
        }
        // Everything else is copied; expressions get DW_OP_addr remapped.
        let mut expr: Option<(usize, usize)> = None;
        match (primary, op) {
            (0x80, _) => {
                r.uleb()?;
            }
            (0xc0, _) | (0, 0x00 | 0x0a | 0x0b) => {}
            (0, 0x06 | 0x07 | 0x08 | 0x0d | 0x0e | 0x2e) => {
                r.uleb()?;
            }
            (0, 0x05 | 0x09 | 0x0c | 0x14 | 0x2f) => {
                r.uleb()?;
                r.uleb()?;
            }
            (0, 0x11 | 0x12 | 0x15) => {
                r.uleb()?;
                r.sleb()?;
            }
            (0, 0x13) => {
                r.sleb()?;
            }
            (0, 0x30) => {
                r.uleb()?;
                r.uleb()?;
                r.uleb()?;
            }
            (0, 0x31) => {
                r.uleb()?;
                r.sleb()?;
                r.uleb()?;
            }
            (0, 0x0f | 0x10 | 0x16) => {
                if op != 0x0f {
                    r.uleb()?;
                }
                let n = usize::try_from(r.uleb()?).map_err(|_| r.truncated())?;
                let s = r.pos;
                r.bytes(n)?;
                expr = Some((s - at, n));
            }
            _ => return Err(unsupported(at, format!("call frame instruction {op:#04x}"))),
        }
        if r.pos > end {
            return Err(Error::Truncated {
                section: SECTION,
                offset: at as u64,
            });
        }
        let base = out.len();
        out.extend_from_slice(r.data.get(at..r.pos).unwrap_or_default());
        if let Some((rel, n)) = expr {
            let enc = ExprEnc {
                addr_size,
                offset_size: 4,
            };
            patch_expr(out, base + rel, n, enc, map, SECTION)?;
        }
    }
    Ok(())
}

/// Emits an advance of `nd` bytes, keeping the original opcode width (`width` 0 = the 6-bit
/// primary form) when the new factor fits, else the smallest fitting form, else `DW_CFA_set_loc`.
fn emit_advance(
    out: &mut Vec<u8>,
    nd: u64,
    code_align: u64,
    width: u8,
    target: u64,
    addr_size: usize,
    at: usize,
) -> Result<(), Error> {
    if code_align == 0 || nd % code_align != 0 {
        out.push(0x01);
        return push_uint(out, addr_size, target, SECTION, at);
    }
    let f = nd / code_align;
    let fits = |w: u8| match w {
        0 => f < 0x40,
        1 => f <= 0xff,
        2 => f <= 0xffff,
        _ => f <= 0xffff_ffff,
    };
    let w = if fits(width) {
        width
    } else {
        match (0u8..=4).find(|&w| w != 3 && fits(w)) {
            Some(w) => w,
            None => {
                out.push(0x01);
                return push_uint(out, addr_size, target, SECTION, at);
            }
        }
    };
    match w {
        0 => out.push(0x40 | f as u8),
        1 => {
            out.push(0x02);
            out.push(f as u8);
        }
        2 => {
            out.push(0x03);
            out.extend_from_slice(&(f as u16).to_le_bytes());
        }
        _ => {
            out.push(0x04);
            out.extend_from_slice(&(f as u32).to_le_bytes());
        }
    }
    Ok(())
}
