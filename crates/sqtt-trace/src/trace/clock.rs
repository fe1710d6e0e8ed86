//! gfx12 packed-header clock correction ("GFX12 Shader Clock Packing" of the spec, and
//! `att.py`'s rule): domains, their statistics and the per-header arithmetic.

use crate::markers::ClockLayout;
use foldhash::HashMap;

/// Clock-correction domain: (SE, CU, SIMD, layout).
pub(super) type Domain = (u32, u32, u32, ClockLayout);

/// Per-domain figures of the spec's correction: the coordinate origin (first header seen) and the
/// minimum relative delay.
#[derive(Debug, Clone, Copy)]
pub(super) struct DomainStat {
    pub(super) origin_time: i64,
    pub(super) origin_sampled: i64,
    pub(super) min_relative: i64,
}

pub(super) enum ClockState {
    Off,
    Measure(HashMap<Domain, DomainStat>),
    Apply(HashMap<Domain, DomainStat>),
}

/// `relative` of the spec: the arrival-minus-sample delay of a header against the domain's
/// origin, wrapped into the signed sampled window.
pub fn clock_relative(
    l: ClockLayout,
    time: i64,
    sampled: i64,
    origin_time: i64,
    origin_sampled: i64,
) -> i64 {
    let mask = ((1u64 << (l.bits + l.shift)) - 1) as i64;
    let half = (mask + 1) / 2;
    (((time.wrapping_sub(origin_time))
        .wrapping_sub(sampled.wrapping_sub(origin_sampled))
        .wrapping_add(half))
        & mask)
        - half
}

/// The delay `att.py` (3adae6a5) gives a packed header: `((time & mask) - sampled) & mask`,
/// `mask = (2^bits - 1) << shift`, `sampled` already shifted (cycles).
pub fn att_delay(l: ClockLayout, time: i64, sampled: i64) -> i64 {
    let mask = ((1i64 << l.bits) - 1) << l.shift;
    ((time & mask) - sampled) & mask
}

/// How far the spec moves a header earlier: `max(0, relative - minimum_relative - (bucket - 1))`.
pub fn clock_shift(l: ClockLayout, relative: i64, minimum_relative: i64) -> i64 {
    let bucket = 1i64 << l.shift;
    (relative - minimum_relative - (bucket - 1)).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// att_tool_test.py@0218074 (note §2.6): at layout (12, 4), a second header of the same SIMD
    /// that arrives 0x80 cycles after the first but sampled one 16-cycle bucket later is pulled
    /// back to +0x1F; the first (the minimum delay) stays.
    #[test]
    fn clock_correction_known_answer() {
        let l = ClockLayout { bits: 12, shift: 4 };
        let (t0, s0) = (1000i64, 0x1000i64);
        let (t1, s1) = (1000 + 0x80, 0x1010);
        let r0 = clock_relative(l, t0, s0, t0, s0);
        let r1 = clock_relative(l, t1, s1, t0, s0);
        let min = r0.min(r1);
        assert_eq!(t0 - clock_shift(l, r0, min), 1000);
        assert_eq!(t1 - clock_shift(l, r1, min), 1000 + 0x1F);
        // The window wraps: a sample just past the 16-bit window edge is still one bucket on.
        let r2 = clock_relative(l, t0 + 0x80, 0x0_0005, t0, 0xFFF5);
        assert_eq!(r2, 0x70);
    }
}
