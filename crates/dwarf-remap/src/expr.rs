//! DWARF expressions: walks every operation (DWARF 5 section 2.5 and 7.7.1, GNU extensions,
//! LLVM's `DW_OP_LLVM_user` sub-operations from `llvm/BinaryFormat/Dwarf.def` and
//! AMDGPUUsage "DWARF Extensions For Heterogeneous Debugging") and remaps the operand of each
//! `DW_OP_addr` that is a code address. An unknown operation is an error.

use crate::bytes::{put_uint, Reader};
use crate::{AddressMap, Error};

/// Sizes needed to decode operands.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExprEnc {
    pub addr_size: usize,
    pub offset_size: usize,
}

/// Remaps `DW_OP_addr` operands inside `data[start..start + len]` in place.
pub(crate) fn patch_expr(
    data: &mut [u8],
    start: usize,
    len: usize,
    enc: ExprEnc,
    map: &AddressMap,
    section: &'static str,
) -> Result<(), Error> {
    let end = start.checked_add(len).ok_or(Error::Truncated {
        section,
        offset: start as u64,
    })?;
    let mut patches = Vec::new();
    {
        let view = data.get(..end).ok_or(Error::Truncated {
            section,
            offset: start as u64,
        })?;
        scan(view, start, end, enc, section, &mut patches)?;
    }
    for (pos, old) in patches {
        if map.covers(old) {
            let new = map.map(old).ok_or(Error::Unmapped {
                section,
                offset: pos as u64,
                address: old,
            })?;
            put_uint(data, pos, enc.addr_size, new, section)?;
        }
    }
    Ok(())
}

fn unsupported(section: &'static str, pos: usize, what: String) -> Error {
    Error::Unsupported {
        section,
        offset: pos as u64,
        what,
    }
}

/// Collects (position, value) of every `DW_OP_addr` operand in `data[start..end]`.
fn scan(
    data: &[u8],
    start: usize,
    end: usize,
    enc: ExprEnc,
    section: &'static str,
    out: &mut Vec<(usize, u64)>,
) -> Result<(), Error> {
    let mut r = Reader::new(data, start, section);
    while r.pos < end {
        let at = r.pos;
        let op = r.u8()?;
        match op {
            // DW_OP_addr
            0x03 => {
                let p = r.pos;
                out.push((p, r.uint(enc.addr_size)?));
            }
            // no operands: deref, dup..over, swap..xor (minus skip/bra), eq..ne, lit*, reg*,
            // nop, push_object_address, form_tls_address, call_frame_cfa, stack_value,
            // GNU_push_tls_address
            0x06
            | 0x12..=0x14
            | 0x16..=0x22
            | 0x24..=0x27
            | 0x29..=0x2e
            | 0x30..=0x6f
            | 0x96
            | 0x97
            | 0x9b
            | 0x9c
            | 0x9f
            | 0xe0 => {}
            // 1-byte operand: const1u/s, pick, deref_size, xderef_size
            0x08 | 0x09 | 0x15 | 0x94 | 0x95 => {
                r.bytes(1)?;
            }
            // 2-byte: const2u/s, bra, skip, call2
            0x0a | 0x0b | 0x28 | 0x2f | 0x98 => {
                r.bytes(2)?;
            }
            // 4-byte: const4u/s, call4
            0x0c | 0x0d | 0x99 => {
                r.bytes(4)?;
            }
            // 8-byte: const8u/s
            0x0e | 0x0f => {
                r.bytes(8)?;
            }
            // one ULEB: constu, plus_uconst, regx, piece, addrx, constx, convert, reinterpret,
            // GNU_addr_index, GNU_const_index
            0x10 | 0x23 | 0x90 | 0x93 | 0xa1 | 0xa2 | 0xa8 | 0xa9 | 0xfb | 0xfc => {
                r.uleb()?;
            }
            // one SLEB: consts, breg0..31, fbreg
            0x11 | 0x70..=0x8f | 0x91 => {
                r.sleb()?;
            }
            // bregx: ULEB register, SLEB offset
            0x92 => {
                r.uleb()?;
                r.sleb()?;
            }
            // bit_piece, regval_type: two ULEB
            0x9d | 0xa5 => {
                r.uleb()?;
                r.uleb()?;
            }
            // call_ref: section offset
            0x9a => {
                r.bytes(enc.offset_size)?;
            }
            // implicit_value: ULEB length + bytes
            0x9e => {
                let n = r.uleb()?;
                r.bytes(usize::try_from(n).map_err(|_| r.truncated())?)?;
            }
            // implicit_pointer, GNU_implicit_pointer: DIE reference, SLEB offset
            0xa0 | 0xf2 => {
                r.bytes(enc.offset_size)?;
                r.sleb()?;
            }
            // entry_value, GNU_entry_value: ULEB length + nested expression
            0xa3 | 0xf3 => {
                let n = r.uleb()?;
                let n = usize::try_from(n).map_err(|_| r.truncated())?;
                let s = r.pos;
                let e = s.checked_add(n).ok_or_else(|| r.truncated())?;
                if e > end {
                    return Err(r.truncated());
                }
                scan(data, s, e, enc, section, out)?;
                r.pos = e;
            }
            // const_type: ULEB type, 1-byte size, bytes
            0xa4 => {
                r.uleb()?;
                let n = r.u8()?;
                r.bytes(usize::from(n))?;
            }
            // deref_type, xderef_type: 1-byte size, ULEB type
            0xa6 | 0xa7 => {
                r.bytes(1)?;
                r.uleb()?;
            }
            // DW_OP_LLVM_user: ULEB sub-operation
            0xe9 => {
                let sub = r.uleb()?;
                match sub {
                    // nop, form_aspace_address, push_lane, offset, bit_offset, undefined,
                    // piece_end
                    0x01..=0x04 | 0x06 | 0x08 | 0x0a => {}
                    // offset_uconst, call_frame_entry_reg
                    0x05 | 0x07 => {
                        r.uleb()?;
                    }
                    // aspace_bregx
                    0x09 => {
                        r.uleb()?;
                        r.sleb()?;
                    }
                    // extend, select_bit_piece
                    0x0b | 0x0c => {
                        r.uleb()?;
                        r.uleb()?;
                    }
                    _ => {
                        return Err(unsupported(
                            section,
                            at,
                            format!("DW_OP_LLVM_user sub-operation {sub:#x}"),
                        ))
                    }
                }
            }
            _ => {
                return Err(unsupported(
                    section,
                    at,
                    format!("DWARF expression operation {op:#04x}"),
                ))
            }
        }
        if r.pos > end {
            return Err(Error::Truncated {
                section,
                offset: at as u64,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_addr_and_walks_llvm_user() {
        let map = AddressMap::new(vec![(0x1000, 0x1000), (0x1004, 0x100c)]).unwrap();
        let mut e = vec![0xe9, 0x02, 0x03];
        e.extend_from_slice(&0x1004u64.to_le_bytes());
        e.extend_from_slice(&[0x92, 0x81, 0x0c, 0x00, 0x9f]);
        let enc = ExprEnc {
            addr_size: 8,
            offset_size: 4,
        };
        let n = e.len();
        patch_expr(&mut e, 0, n, enc, &map, "t").unwrap();
        assert_eq!(&e[3..11], &0x100cu64.to_le_bytes());
        let mut bad = vec![0xff];
        assert!(matches!(
            patch_expr(&mut bad, 0, 1, enc, &map, "t"),
            Err(Error::Unsupported { .. })
        ));
    }
}
