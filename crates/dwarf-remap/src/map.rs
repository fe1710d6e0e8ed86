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
    /// Search index over the code interval cut in buckets of `1 << shift` bytes: `starts[k]` =
    /// pairs whose old address is below `old[0] + (k << shift)` (at most one bucket per pair, so
    /// a lookup searches one bucket's pairs instead of all of them).
    starts: Vec<usize>,
    shift: u32,
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
        let (starts, shift) = bucket_starts(&old);
        Ok(AddressMap {
            old,
            new,
            identity_outside: false,
            starts,
            shift,
        })
    }

    /// Pairs whose old address is at most `old` (`self.old.partition_point(|&o| o <= old)`),
    /// searched within the bucket of `old` only.
    fn rank(&self, old: u64) -> usize {
        let Some(&first) = self.old.first() else {
            return 0;
        };
        let k = usize::try_from(old.saturating_sub(first) >> self.shift).unwrap_or(usize::MAX);
        match (
            self.starts.get(k),
            k.checked_add(1).and_then(|j| self.starts.get(j)),
        ) {
            (Some(&lo), Some(&hi)) if old >= first => {
                lo + self.old[lo..hi].partition_point(|&o| o <= old)
            }
            _ => self.old.partition_point(|&o| o <= old),
        }
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
        let i = self.rank(old).checked_sub(1)?;
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
        let i = self.rank(old);
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

/// The bucket index of [`AddressMap::starts`] over sorted old addresses `old`: buckets of
/// `1 << shift` bytes (at least 16, and no more buckets than pairs) from `old[0]` to past the
/// last address.
fn bucket_starts(old: &[u64]) -> (Vec<usize>, u32) {
    let (Some(&first), Some(&last)) = (old.first(), old.last()) else {
        return (Vec::new(), 0);
    };
    let span = u128::from(last - first) + 1;
    let per = (span / old.len() as u128).max(16);
    let shift = (u128::BITS - (per - 1).leading_zeros()).min(63);
    let buckets = (span >> shift) + 2;
    let mut starts = Vec::with_capacity(buckets as usize);
    let mut i = 0;
    for k in 0..buckets {
        let at = u128::from(first) + (k << shift);
        while i < old.len() && u128::from(old[i]) < at {
            i += 1;
        }
        starts.push(i);
    }
    (starts, shift)
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

    /// The bucket search agrees with a search over every pair, at every address near a pair,
    /// for dense pairs and for a far section start (a sparse map).
    #[test]
    fn rank_matches_full_search() {
        let mut pairs: Vec<(u64, u64)> = (0..500u64)
            .map(|i| (0x1000 + i * 4 + (i / 7) * 8, 0))
            .collect();
        pairs.push((0x4000_0000, 0));
        pairs.push((u64::MAX - 3, 0));
        for pairs in [&pairs[..], &pairs[..500], &pairs[..1], &pairs[..501]] {
            let m = AddressMap::new(
                pairs
                    .iter()
                    .enumerate()
                    .map(|(n, &(o, _))| (o, n as u64))
                    .collect(),
            )
            .unwrap();
            for &(o, _) in pairs {
                for a in [
                    o.saturating_sub(5),
                    o.saturating_sub(1),
                    o,
                    o.saturating_add(1),
                    o.saturating_add(3),
                    o.saturating_add(100),
                ] {
                    assert_eq!(m.rank(a), m.old.partition_point(|&x| x <= a), "{a:#x}");
                }
            }
            assert_eq!(m.rank(0), 0);
            assert_eq!(m.rank(u64::MAX), m.old.len());
        }
    }

    #[test]
    fn shrinking_inside_instruction_is_none() {
        let m = AddressMap::new(vec![(0x100, 0x100), (0x108, 0x104)]).unwrap();
        assert_eq!(m.map(0x104), None);
        assert_eq!(m.map(0x102), Some(0x102));
    }
}
