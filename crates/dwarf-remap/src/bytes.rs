//! Little-endian DWARF primitives: a bounds-checked reader and in-place / appending writers.
//! Encodings follow DWARF 5 section 7 (LEB128: 7.6; initial length: 7.4).

use crate::Error;

/// Bounds-checked reader over one section; every error carries the section offset.
pub(crate) struct Reader<'a> {
    pub data: &'a [u8],
    pub pos: usize,
    pub section: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8], pos: usize, section: &'static str) -> Self {
        Reader { data, pos, section }
    }

    pub fn truncated(&self) -> Error {
        Error::Truncated {
            section: self.section,
            offset: self.pos as u64,
        }
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let s = self
            .data
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }

    pub fn uint(&mut self, size: usize) -> Result<u64, Error> {
        if size > 8 {
            return Err(Error::Unsupported {
                section: self.section,
                offset: self.pos as u64,
                what: format!("{size}-byte integer"),
            });
        }
        let b = self.bytes(size)?;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            v |= u64::from(x) << (8 * i);
        }
        Ok(v)
    }

    pub fn uleb(&mut self) -> Result<u64, Error> {
        let start = self.pos;
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            } else if b & 0x7f != 0 {
                return Err(Error::Unsupported {
                    section: self.section,
                    offset: start as u64,
                    what: "LEB128 wider than 64 bits".into(),
                });
            }
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    }

    pub fn sleb(&mut self) -> Result<i64, Error> {
        let mut v = 0i64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift < 64 {
                v |= i64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    v |= -1i64 << shift;
                }
                return Ok(v);
            }
        }
    }

    /// Reads an initial length (DWARF 5 section 7.4): returns (unit length in bytes, offset size
    /// 4 or 8).
    pub fn initial_length(&mut self) -> Result<(usize, usize), Error> {
        let at = self.pos;
        let l = self.uint(4)?;
        let (len, osize) = if l == 0xffff_ffff {
            (self.uint(8)?, 8)
        } else if l >= 0xffff_fff0 {
            return Err(Error::Unsupported {
                section: self.section,
                offset: at as u64,
                what: format!("reserved initial length {l:#x}"),
            });
        } else {
            (l, 4)
        };
        let len = usize::try_from(len).map_err(|_| self.truncated())?;
        if self
            .pos
            .checked_add(len)
            .is_none_or(|e| e > self.data.len())
        {
            return Err(Error::Truncated {
                section: self.section,
                offset: at as u64,
            });
        }
        Ok((len, osize))
    }
}

/// Appends an unsigned LEB128.
pub(crate) fn push_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends a signed LEB128.
pub(crate) fn push_sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        if done {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Appends a `size`-byte little-endian integer; errors if `v` does not fit.
pub(crate) fn push_uint(
    out: &mut Vec<u8>,
    size: usize,
    v: u64,
    section: &'static str,
    offset: usize,
) -> Result<(), Error> {
    check_fits(size, v, section, offset)?;
    for i in 0..size {
        out.push((v >> (8 * i)) as u8);
    }
    Ok(())
}

fn check_fits(size: usize, v: u64, section: &'static str, offset: usize) -> Result<(), Error> {
    if size == 0 || size > 8 || (size < 8 && v >> (8 * size) != 0) {
        return Err(Error::Overflow {
            section,
            offset: offset as u64,
            value: v,
            size,
        });
    }
    Ok(())
}

/// Overwrites `size` bytes at `pos` with `v` (little endian); errors if `v` does not fit.
pub(crate) fn put_uint(
    data: &mut [u8],
    pos: usize,
    size: usize,
    v: u64,
    section: &'static str,
) -> Result<(), Error> {
    check_fits(size, v, section, pos)?;
    let dst = data
        .get_mut(pos..pos.saturating_add(size))
        .filter(|d| d.len() == size)
        .ok_or(Error::Truncated {
            section,
            offset: pos as u64,
        })?;
    for (i, b) in dst.iter_mut().enumerate() {
        *b = (v >> (8 * i)) as u8;
    }
    Ok(())
}

/// Overwrites the `len`-byte ULEB128 at `pos` with `v`, padded with continuation bytes to
/// exactly `len` bytes (a valid, redundant encoding); errors if `v` needs more than `len` bytes.
pub(crate) fn put_uleb_padded(
    data: &mut [u8],
    pos: usize,
    len: usize,
    v: u64,
    section: &'static str,
) -> Result<(), Error> {
    if len == 0 || (len < 10 && v >> (7 * len) != 0) {
        return Err(Error::Overflow {
            section,
            offset: pos as u64,
            value: v,
            size: len,
        });
    }
    let dst = data
        .get_mut(pos..pos.saturating_add(len))
        .filter(|d| d.len() == len)
        .ok_or(Error::Truncated {
            section,
            offset: pos as u64,
        })?;
    let last = len - 1;
    for (i, b) in dst.iter_mut().enumerate() {
        let shift = 7 * i as u32;
        let bits = if shift < 64 { (v >> shift) & 0x7f } else { 0 };
        *b = bits as u8 | if i < last { 0x80 } else { 0 };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb_round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 40, u64::MAX] {
            let mut b = Vec::new();
            push_uleb(&mut b, v);
            assert_eq!(Reader::new(&b, 0, "t").uleb().unwrap(), v);
        }
        for v in [0i64, -1, 63, -64, 64, -65, i64::MIN, i64::MAX] {
            let mut b = Vec::new();
            push_sleb(&mut b, v);
            assert_eq!(Reader::new(&b, 0, "t").sleb().unwrap(), v);
        }
    }

    #[test]
    fn padded_uleb() {
        let mut b = vec![0u8; 3];
        put_uleb_padded(&mut b, 0, 3, 300, "t").unwrap();
        assert_eq!(b, [0xac, 0x82, 0x00]);
        assert_eq!(Reader::new(&b, 0, "t").uleb().unwrap(), 300);
        assert!(put_uleb_padded(&mut b, 0, 1, 300, "t").is_err());
    }
}
