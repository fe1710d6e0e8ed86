//! `.debug_addr` (DWARF 5 section 7.27): remapped in place. Every entry that lies in the code
//! interval of the map is a code address and is mapped; other entries (data addresses such as
//! `__device__` variables, tombstones) are left untouched. Code-context references to entries
//! (`DW_AT_low_pc` with `DW_FORM_addrx*`, `DW_RLE_*x*`, `DW_LLE_*x*`) are checked by their users.

use crate::bytes::{put_uint, Reader};
use crate::{AddressMap, Error};

pub(crate) const SECTION: &str = ".debug_addr";

/// Maps every code address of every `.debug_addr` contribution; returns the new section bytes.
pub(crate) fn remap(old: &[u8], map: &AddressMap) -> Result<Vec<u8>, Error> {
    let mut out = old.to_vec();
    let mut r = Reader::new(old, 0, SECTION);
    while r.pos < old.len() {
        let unit = r.pos;
        let (len, _) = r.initial_length()?;
        let end = r.pos + len;
        let version = r.uint(2)?;
        let addr_size = usize::from(r.u8()?);
        let seg_size = r.u8()?;
        if version != 5 || seg_size != 0 || !(addr_size == 4 || addr_size == 8) {
            return Err(Error::Unsupported {
                section: SECTION,
                offset: unit as u64,
                what: format!(
                    "address table version {version}, address size {addr_size}, segment selector size {seg_size}"
                ),
            });
        }
        while r.pos + addr_size <= end {
            let at = r.pos;
            let a = r.uint(addr_size)?;
            if map.covers(a) {
                let n = map.map(a).ok_or(Error::Unmapped {
                    section: SECTION,
                    offset: at as u64,
                    address: a,
                })?;
                put_uint(&mut out, at, addr_size, n, SECTION)?;
            }
        }
        r.pos = end;
    }
    Ok(out)
}

/// Reads entry `index` of the table starting at `addr_base` (bytes into `.debug_addr`).
pub(crate) fn read(old: &[u8], addr_base: u64, index: u64, addr_size: usize) -> Result<u64, Error> {
    let pos = index
        .checked_mul(addr_size as u64)
        .and_then(|o| o.checked_add(addr_base))
        .and_then(|p| usize::try_from(p).ok())
        .ok_or(Error::Truncated {
            section: SECTION,
            offset: addr_base,
        })?;
    Reader::new(old, pos, SECTION).uint(addr_size)
}
