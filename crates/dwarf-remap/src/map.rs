//! The old-to-new code address map.

use crate::Error;

/// Monotonic piecewise map from old code addresses (bytes, ELF virtual addresses) to new ones.
///
/// Built from instruction boundaries: one `(old, new)` pair per original instruction start, where
/// `new` is the start of the block that now begins with any code inserted *before* that
/// instruction, plus one final pair per executable range for its end (old end -> new end).
/// A line row, `low_pc` or range start at an instruction therefore also covers the code inserted
/// in front of it, and a range end (`high_pc`, end of sequence, return address) stops before it.
///
/// Addresses from the first pair's old address to the last pair's old address (both inclusive)
/// are *code addresses*. Addresses outside that interval are not code: [`AddressMap::map`]
/// returns `None` for them, unless the caller opted into identity mapping with
/// [`AddressMap::with_identity_outside`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMap {
    old: Vec<u64>,
    new: Vec<u64>,
    identity_outside: bool,
}

impl AddressMap {
    /// Builds the map from `pairs` sorted by old address.
    ///
    /// Old addresses must be strictly increasing, new addresses non-decreasing: two old
    /// addresses may map to one new address when the bytes between them (padding the layout
    /// dropped, e.g. between a function's end and the next function) have no new counterpart.
    ///
    /// Errors: [`Error::EmptyMap`] without pairs; [`Error::NotMonotonic`] when the old addresses
    /// are not strictly increasing or the new ones decrease (the pair index is reported).
    pub fn new(pairs: Vec<(u64, u64)>) -> Result<Self, Error> {
        if pairs.is_empty() {
            return Err(Error::EmptyMap);
        }
        let mut old = Vec::with_capacity(pairs.len());
        let mut new = Vec::with_capacity(pairs.len());
        for (index, &(o, n)) in pairs.iter().enumerate() {
            if let (Some(&po), Some(&pn)) = (old.last(), new.last()) {
                if o <= po || n < pn {
                    return Err(Error::NotMonotonic {
                        index,
                        old: o,
                        new: n,
                        prev_old: po,
                        prev_new: pn,
                    });
                }
            }
            old.push(o);
            new.push(n);
        }
        Ok(AddressMap {
            old,
            new,
            identity_outside: false,
        })
    }

    /// The identity map over `[start, end]` (bytes): every code address maps to itself.
    /// Useful to check that a remap round-trips unchanged DWARF.
    pub fn identity(start: u64, end: u64) -> Result<Self, Error> {
        if start == end {
            Self::new(vec![(start, start)])
        } else {
            Self::new(vec![(start, start), (end, end)])
        }
    }

    /// Makes [`AddressMap::map`] return addresses outside the code interval unchanged instead of
    /// `None`. Only correct when nothing outside the code interval moved.
    pub fn with_identity_outside(mut self) -> Self {
        self.identity_outside = true;
        self
    }

    /// Whether `old` lies in the code interval `[first old, last old]` (inclusive).
    pub fn covers(&self, old: u64) -> bool {
        match (self.old.first(), self.old.last()) {
            (Some(&first), Some(&last)) => first <= old && old <= last,
            _ => false,
        }
    }

    /// Maps an old address.
    ///
    /// - exactly a pair's old address: that pair's new address;
    /// - between two pairs (inside an instruction): the same byte offset from the preceding
    ///   pair's new address; `None` if that would reach the next pair's new address (only
    ///   possible when code shrank);
    /// - outside the code interval: `None`, or `Some(old)` with
    ///   [`AddressMap::with_identity_outside`].
    pub fn map(&self, old: u64) -> Option<u64> {
        if !self.covers(old) {
            return self.identity_outside.then_some(old);
        }
        let i = self.old.partition_point(|&o| o <= old).checked_sub(1)?;
        let (o, n) = (*self.old.get(i)?, *self.new.get(i)?);
        if old == o {
            return Some(n);
        }
        let mapped = n.checked_add(old - o)?;
        match self.new.get(i + 1) {
            Some(&next) if mapped >= next => None,
            _ => Some(mapped),
        }
    }

    /// Whether `old` lies strictly inside a segment (between two pairs) whose new length differs
    /// from its old length: code was inserted in front of the instruction that contains `old`,
    /// so the same-offset mapping of [`AddressMap::map`] would land in the inserted code rather
    /// than in that instruction. False at pair addresses, in unchanged segments and outside the
    /// code interval.
    pub fn shifts_inside(&self, old: u64) -> bool {
        let i = self.old.partition_point(|&o| o <= old);
        let (Some(&o0), Some(&o1), Some(&n0), Some(&n1)) = (
            i.checked_sub(1).and_then(|j| self.old.get(j)),
            self.old.get(i),
            i.checked_sub(1).and_then(|j| self.new.get(j)),
            self.new.get(i),
        ) else {
            return false;
        };
        old != o0 && n1 - n0 != o1 - o0
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.old.len()
    }

    /// Always false: a map has at least one pair.
    pub fn is_empty(&self) -> bool {
        self.old.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_boundaries_inside_and_outside() {
        let m = AddressMap::new(vec![(0x100, 0x100), (0x104, 0x10c), (0x10c, 0x114)]).unwrap();
        assert_eq!(m.map(0x100), Some(0x100));
        assert_eq!(m.map(0x104), Some(0x10c));
        assert_eq!(m.map(0x108), Some(0x110));
        assert_eq!(m.map(0x10c), Some(0x114));
        assert_eq!(m.map(0xfc), None);
        assert_eq!(m.map(0x110), None);
        let m = m.with_identity_outside();
        assert_eq!(m.map(0xfc), Some(0xfc));
        assert_eq!(m.map(0x110), Some(0x110));
    }

    #[test]
    fn rejects_non_monotonic() {
        assert!(matches!(
            AddressMap::new(vec![(0x100, 0x100), (0x100, 0x104)]),
            Err(Error::NotMonotonic { index: 1, .. })
        ));
        assert!(matches!(
            AddressMap::new(vec![(0x100, 0x100), (0x104, 0xfc)]),
            Err(Error::NotMonotonic { index: 1, .. })
        ));
        // Dropped padding: two old addresses, one new address; the gap maps nowhere.
        let m = AddressMap::new(vec![(0x100, 0x100), (0x104, 0x100), (0x108, 0x104)]).unwrap();
        assert_eq!(m.map(0x104), Some(0x100));
        assert_eq!(m.map(0x102), None);
        assert!(matches!(AddressMap::new(vec![]), Err(Error::EmptyMap)));
    }

    #[test]
    fn shifts_inside_only_where_code_was_inserted() {
        // 8 bytes inserted in front of the instruction at 0x104 (8 bytes long).
        let m = AddressMap::new(vec![(0x100, 0x100), (0x104, 0x104), (0x10c, 0x114)]).unwrap();
        assert!(!m.shifts_inside(0x102));
        assert!(!m.shifts_inside(0x104));
        assert!(m.shifts_inside(0x108));
        assert!(!m.shifts_inside(0x10c));
        assert!(!AddressMap::identity(0x100, 0x200)
            .unwrap()
            .shifts_inside(0x150));
    }

    #[test]
    fn shrinking_inside_instruction_is_none() {
        let m = AddressMap::new(vec![(0x100, 0x100), (0x108, 0x104)]).unwrap();
        assert_eq!(m.map(0x104), None);
        assert_eq!(m.map(0x102), Some(0x102));
    }
}
