//! `.debug_aranges` (DWARF 5 section 6.1.2, version 2): address/length tuples remapped in place
//! (same sizes). Tuples whose start is a tombstone (0, -1, -2) are kept.

use crate::bytes::{put_uint, Reader};
use crate::{is_not_code, map_code, AddressMap, Error};

pub(crate) const SECTION: &str = ".debug_aranges";

/// Remaps every address range set; returns the new section bytes.
pub(crate) fn remap(old: &[u8], map: &AddressMap) -> Result<Vec<u8>, Error> {
    let mut out = old.to_vec();
    let mut r = Reader::new(old, 0, SECTION);
    while r.pos < old.len() {
        let set = r.pos;
        let (len, osize) = r.initial_length()?;
        let end = r.pos + len;
        let version = r.uint(2)?;
        r.uint(osize)?;
        let asz = usize::from(r.u8()?);
        let seg = r.u8()?;
        if version != 2 || seg != 0 || !(asz == 4 || asz == 8) {
            return Err(Error::Unsupported {
                section: SECTION,
                offset: set as u64,
                what: format!("aranges version {version}, address size {asz}, segment size {seg}"),
            });
        }
        // Tuples start at a multiple of the tuple size from the set start.
        let tuple = 2 * asz;
        r.pos = set + (r.pos - set).div_ceil(tuple) * tuple;
        while r.pos + tuple <= end {
            let at = r.pos;
            let (a, l) = (r.uint(asz)?, r.uint(asz)?);
            if a == 0 && l == 0 {
                break;
            }
            if !map.covers(a) && is_not_code(a) {
                continue;
            }
            let e = a.checked_add(l).ok_or_else(|| Error::Unsupported {
                section: SECTION,
                offset: at as u64,
                what: "range end overflows".into(),
            })?;
            let (na, ne) = (
                map_code(map, a, SECTION, at)?,
                map_code(map, e, SECTION, at)?,
            );
            let nl = ne.checked_sub(na).ok_or(Error::Backwards {
                section: SECTION,
                offset: at as u64,
                address: ne,
            })?;
            put_uint(&mut out, at, asz, na, SECTION)?;
            put_uint(&mut out, at + asz, asz, nl, SECTION)?;
        }
        r.pos = end;
    }
    Ok(out)
}
