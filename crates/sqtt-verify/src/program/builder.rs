//! `s_getpc_b64`/`s_get_pc_i64` address builders of the original code, recognised by the
//! verifier's own code: a forward, concrete simulation of the scalar arithmetic that follows the
//! `s_getpc` (docs/background/rewriting.md "Layout and relocation"; issue 37 for Tensile's long
//! branch, whose offset is computed in another SGPR: `s_add_i32 sN, LIT, 4`, optionally
//! `s_abs_i32 sN, sN`, then `s_add_u32`/`s_addc_u32` or `s_sub_u32`/`s_subb_u32` into the pair).
//!
//! The rewriter finds the same builders by a backward walk over reaching definitions
//! (`sqtt_rewrite::consteval`); this module shares no code with it. A builder is the list of
//! instructions (its parts) whose execution, from the pair holding `getpc address + 4`, leaves
//! the target in the pair; the target of a rewritten copy is found by simulating the copies of
//! the same parts from the copy of the `s_getpc`. Semantics: ISA manuals, "SOP1"/"SOP2"
//! (32-bit wrapping arithmetic; SCC carries the carry/borrow of `s_add_u32`/`s_sub_u32` into
//! `s_addc_u32`/`s_subb_u32`).

use amdgpu_isa::{Instruction, Special};

use crate::program::regs::writes;
use crate::program::Func;

/// Most instructions after the `s_getpc` that may belong to its builder.
const WINDOW: usize = 8;

/// A recognised address builder: instruction indices of its `s_getpc` and of its parts.
pub(crate) struct Builder {
    pub getpc: usize,
    /// First SGPR of the pair holding the address.
    pub dst: u16,
    /// The instructions after the `s_getpc` that compute the address, in order; any of them may
    /// carry a re-aimed constant (the literal, or the high add's constant).
    pub parts: Vec<usize>,
    /// A branch among the parts that picks one of two ways to the address, when there is one.
    pub fork: Option<Fork>,
}

/// rocBLAS's signed long branch (gfx90a DGEMM kernels): `s_cmp_ge_i32 sN, 0;
/// s_cbranch_scc1 P` among the parts, then one way to the address up to the branch target `P`
/// (`s_abs_i32` and the subtracts, which must end in a jump) and the other from `P` (the adds).
/// The parts before `alt` belong to the fall-through way, the rest to the taken one.
#[derive(Clone, Copy)]
pub(crate) struct Fork {
    /// Index of the conditional branch.
    pub branch: usize,
    /// Index of its target, the first part of the taken way.
    pub alt: usize,
}

/// Scalar state of the simulation: SGPR values known so far and SCC.
struct State {
    regs: Vec<(u16, u32)>,
    scc: bool,
}

impl State {
    fn get(&self, r: u16) -> Option<u32> {
        self.regs
            .iter()
            .rev()
            .find(|(n, _)| *n == r)
            .map(|(_, v)| *v)
    }
    fn set(&mut self, r: u16, v: u32) {
        self.regs.retain(|(n, _)| *n != r);
        self.regs.push((r, v));
    }
    /// Value of scalar source `field`: a known SGPR, an inline integer constant or the literal.
    fn src(&self, i: &Instruction, field: &str) -> Option<u32> {
        match i.field(field)? {
            r @ 0..=105 => self.get(r as u16),
            v @ 128..=192 => Some(v - 128),
            v @ 193..=208 => Some((192 - v as i32) as u32),
            255 => i.literal().map(|l| l as u32),
            _ => None,
        }
    }
}

/// Executes one part; `None` when it is not a supported operation or reads an unknown value.
fn step(s: &mut State, i: &Instruction) -> Option<()> {
    let m = i.mnemonic();
    if m == "s_cmp_ge_i32" {
        s.scc = s.src(i, "ssrc0")? as i32 >= s.src(i, "ssrc1")? as i32;
        return Some(());
    }
    if m == "s_add_nc_u64" {
        let d = i.field("sdst")? as u16;
        let base = (u64::from(s.get(d + 1)?) << 32) | u64::from(s.get(d)?);
        let v = base.wrapping_add(i.literal()?);
        s.set(d, v as u32);
        s.set(d + 1, (v >> 32) as u32);
        return Some(());
    }
    let d = i.field("sdst")? as u16;
    let a = s.src(i, "ssrc0")?;
    let b = || s.src(i, "ssrc1");
    let (v, scc) = match m {
        "s_mov_b32" => (a, s.scc),
        "s_abs_i32" => ((a as i32).unsigned_abs(), a != 0),
        "s_sext_i32_i16" => (a as u16 as i16 as i32 as u32, s.scc),
        "s_add_u32" | "s_add_co_u32" => {
            let (v, c) = a.overflowing_add(b()?);
            (v, c)
        }
        "s_add_i32" | "s_add_co_i32" => (a.wrapping_add(b()?), s.scc),
        "s_sub_u32" | "s_sub_co_u32" => {
            let (v, c) = a.overflowing_sub(b()?);
            (v, c)
        }
        "s_sub_i32" | "s_sub_co_i32" => (a.wrapping_sub(b()?), s.scc),
        "s_addc_u32" | "s_add_co_ci_u32" => {
            let w = u64::from(a) + u64::from(b()?) + u64::from(s.scc);
            (w as u32, w >> 32 != 0)
        }
        "s_subb_u32" | "s_sub_co_ci_u32" => {
            let w = i64::from(a) - i64::from(b()?) - i64::from(s.scc);
            (w as u32, w < 0)
        }
        "s_lshl_b32" => (a << (b()? & 31), s.scc),
        _ => return None,
    };
    s.set(d, v);
    s.scc = scc;
    Some(())
}

/// Whether `m` is a scalar operation the simulation knows.
fn simulated(m: &str) -> bool {
    matches!(
        m,
        "s_mov_b32"
            | "s_abs_i32"
            | "s_sext_i32_i16"
            | "s_add_u32"
            | "s_add_co_u32"
            | "s_add_i32"
            | "s_add_co_i32"
            | "s_sub_u32"
            | "s_sub_co_u32"
            | "s_sub_i32"
            | "s_sub_co_i32"
            | "s_addc_u32"
            | "s_add_co_ci_u32"
            | "s_subb_u32"
            | "s_sub_co_ci_u32"
            | "s_lshl_b32"
            | "s_add_nc_u64"
    )
}

/// Whether `m` ends a builder's address in the pair's high half.
fn high_add(m: &str) -> bool {
    matches!(
        m,
        "s_addc_u32" | "s_add_co_ci_u32" | "s_subb_u32" | "s_sub_co_ci_u32"
    )
}

impl Builder {
    /// The address the builder leaves in its pair when its `s_getpc` is at `getpc_addr`, with
    /// `inst(k)` giving part `k` (original or rewritten copy); `None` when a part is missing or
    /// its arithmetic cannot be simulated.
    pub fn target_with(
        &self,
        getpc_addr: u64,
        inst: impl Fn(usize) -> Option<Instruction>,
    ) -> Option<u64> {
        let pc = getpc_addr.wrapping_add(4);
        let mut s = State {
            regs: vec![(self.dst, pc as u32), (self.dst + 1, (pc >> 32) as u32)],
            scc: false,
        };
        // With a fork: the way the branch takes, from SCC as the simulation left it.
        let (mut skip_below, mut stop_at) = (None, None);
        for &k in &self.parts {
            if let Some(f) = self.fork {
                if k == f.branch {
                    let taken = match inst(k)?.mnemonic() {
                        "s_cbranch_scc1" => s.scc,
                        "s_cbranch_scc0" => !s.scc,
                        _ => return None,
                    };
                    if taken {
                        skip_below = Some(f.alt);
                    } else {
                        stop_at = Some(f.alt);
                    }
                    continue;
                }
                if skip_below.is_some_and(|a| k < a) {
                    continue;
                }
                if stop_at.is_some_and(|a| k >= a) {
                    break;
                }
            }
            step(&mut s, &inst(k)?)?;
        }
        Some((u64::from(s.get(self.dst + 1)?) << 32) | u64::from(s.get(self.dst)?))
    }
}

/// The parts whose results reach the pair (walking back from it through the SGPR sources),
/// so that a constant computed nearby for another purpose is not taken for a part.
fn contributing(body: &[(u64, Instruction)], dst: u16, parts: &[usize]) -> Vec<usize> {
    let mut need: Vec<u16> = vec![dst, dst + 1];
    let mut keep = Vec::new();
    for &p in parts.iter().rev() {
        let i = &body[p].1;
        let Some(d) = i.field("sdst").map(|d| d as u16) else {
            continue;
        };
        if need.contains(&d) {
            keep.push(p);
            for f in ["ssrc0", "ssrc1"] {
                if let Some(r @ 0..=105) = i.field(f) {
                    need.push(r as u16);
                }
            }
        }
    }
    keep.reverse();
    keep
}

/// What the scan of one way to the address found so far.
#[derive(Clone)]
struct Scan {
    /// SGPRs computed after the getpc (the pair included): a part writes one of them or reads one
    /// into the pair.
    tracked: Vec<u16>,
    parts: Vec<usize>,
    lo_done: bool,
}

/// How a scan ended: the index of the part that completes the address, or a fork (branch
/// index and the scan's state there) to follow both ways of.
enum Ended {
    Done(usize),
    Fork(usize, Scan),
}

/// Scans at most [`WINDOW`] instructions of `body` from `from` for the parts of the builder of
/// pair `dst` (see [`find_builders`]); `forks`: whether an `s_cmp_ge_i32` of a tracked register
/// followed by an SCC branch may fork the scan.
fn scan(
    body: &[(u64, Instruction)],
    from: usize,
    dst: u16,
    st: &mut Scan,
    forks: bool,
) -> Option<Ended> {
    for (j, (_, i)) in body.iter().enumerate().skip(from).take(WINDOW) {
        let (r, w) = i.reads_writes();
        let m = i.mnemonic();
        let writes_pair = w.contains_sgpr(dst) || w.contains_sgpr(dst + 1);
        let reads_tracked = st.tracked.iter().any(|&t| r.contains_sgpr(t));
        if forks && m == "s_cmp_ge_i32" && reads_tracked {
            st.parts.push(j);
            continue;
        }
        let after_test = j > 0
            && st.parts.last() == Some(&(j - 1))
            && body[j - 1].1.mnemonic() == "s_cmp_ge_i32";
        if forks && after_test && matches!(m, "s_cbranch_scc1" | "s_cbranch_scc0") {
            st.parts.push(j);
            return Some(Ended::Fork(j, st.clone()));
        }
        let Some(d) = i.field("sdst").filter(|_| simulated(m)).map(|d| d as u16) else {
            if writes_pair {
                return None;
            }
            // An unknown write of a computed register makes it unknown again.
            st.tracked.retain(|&t| !w.contains_sgpr(t));
            continue;
        };
        let constant_def = i.literal().is_some() && !writes_pair;
        if !(writes_pair || reads_tracked || constant_def) {
            continue;
        }
        st.parts.push(j);
        if !st.tracked.contains(&d) {
            st.tracked.push(d);
        }
        let whole = m == "s_add_nc_u64";
        if d == dst && !whole {
            st.lo_done = true;
        }
        if whole || (d == dst + 1 && high_add(m) && st.lo_done) {
            return Some(Ended::Done(j));
        }
    }
    None
}

/// Follows both ways of a fork at branch `br` (state `at_fork`, whose parts end with the test
/// and the branch): the fall-through way must complete the address and then jump (no fall into
/// the branch target), the taken way must complete it from the branch target, and nothing but
/// the branch may enter the instructions after the `s_getpc` up to the end of the taken way.
fn forked(
    body: &[(u64, Instruction)],
    getpc: usize,
    dst: u16,
    br: usize,
    at_fork: Scan,
) -> Option<(Vec<usize>, Fork)> {
    let (b_addr, b) = &body[br];
    let alt_addr = b.branch_target(*b_addr)?;
    let alt = body.binary_search_by_key(&alt_addr, |x| x.0).ok()?;
    let mut fall = at_fork.clone();
    let Ended::Done(end) = scan(body, br + 1, dst, &mut fall, false)? else {
        return None;
    };
    let jumps = body.get(end + 1)?.1.flow() == amdgpu_isa::Flow::IndirectJump;
    if !jumps || alt <= end + 1 {
        return None;
    }
    let mut taken = at_fork.clone();
    let Ended::Done(last) = scan(body, alt, dst, &mut taken, false)? else {
        return None;
    };
    let span = body[getpc].0 + 1..=body[last].0;
    let entered = body
        .iter()
        .enumerate()
        .any(|(k, (a, i))| k != br && i.branch_target(*a).is_some_and(|t| span.contains(&t)));
    if entered {
        return None;
    }
    let mut parts = fall.parts;
    parts.extend(taken.parts.into_iter().filter(|&p| p >= alt));
    Some((parts, Fork { branch: br, alt }))
}

/// Every address builder of `body` (decoded original instructions with their addresses): from
/// each `s_getpc`, the simulated instructions of the next [`WINDOW`] that write its pair or a
/// register computed after it, up to the write of the pair's high half that completes it
/// (`s_addc_u32`-like, or `s_add_nc_u64`); through a [`Fork`], both ways. Kept only when the
/// simulation of the original gives an address. Any other write of the pair before that ends
/// the search without a builder.
pub(crate) fn find_builders(body: &[(u64, Instruction)]) -> Vec<Builder> {
    let mut out = Vec::new();
    for (k, (g_addr, g)) in body.iter().enumerate() {
        if g.special() != Special::GetPc {
            continue;
        }
        let Some(hi_reg) = g.writes().max_sgpr() else {
            continue;
        };
        let dst = hi_reg.saturating_sub(1);
        let mut st = Scan {
            tracked: vec![dst, dst + 1],
            parts: Vec::new(),
            lo_done: false,
        };
        let (parts, fork) = match scan(body, k + 1, dst, &mut st, true) {
            Some(Ended::Done(_)) => (contributing(body, dst, &st.parts), None),
            Some(Ended::Fork(br, at_fork)) => {
                let Some((all, fork)) = forked(body, k, dst, br, at_fork) else {
                    continue;
                };
                // The test and the branch stay parts: they pick the way.
                let mut parts = contributing(body, dst, &all);
                parts.extend([br - 1, br]);
                parts.sort_unstable();
                (parts, Some(fork))
            }
            None => continue,
        };
        let b = Builder {
            getpc: k,
            dst,
            parts,
            fork,
        };
        if b.target_with(*g_addr, |p| body.get(p).map(|x| x.1))
            .is_some()
        {
            out.push(b);
        }
    }
    out
}

/// Original target of the latest address builder before `k` that produces the pair `pair`, when
/// the pair provably still holds it at `k`: the builder and `k` are on one straight-line stretch
/// (no original branch or address-builder target lands after the `s_getpc` up to `k`) and nothing
/// after the builder's last instruction writes either half of the pair (an `-O0` spill/reload
/// through VGPR lanes or a load of a function pointer would). Otherwise `None`: the call is
/// unresolved and liveness treats it as reaching anything.
pub(crate) fn builder_target(f: &Func, k: usize, pair: u16) -> Option<u64> {
    let b = f
        .builders
        .iter()
        .filter(|b| b.getpc < k && b.dst == pair)
        .max_by_key(|b| b.getpc)?;
    let orig = |k: usize| f.orig.get(k).map(|o| f.inst(o));
    let done = b.parts.iter().copied().max()?;
    let written = (done + 1..k).any(|j| {
        let w = writes(f.regs(&f.orig[j]));
        w >> pair & 3 != 0
    });
    let first = f.orig.get(b.getpc + 1)?.addr;
    let last = f.orig.get(k)?.addr;
    let lands_between = |t: u64| t >= first && t <= last;
    // The builder's own fork branch joins nothing: both ways build the same address.
    let joined = f.orig.iter().enumerate().any(|(j, o)| {
        b.fork.is_none_or(|fk| fk.branch != j)
            && f.inst(o).branch_target(o.addr).is_some_and(lands_between)
    }) || f.builders.iter().any(|o| {
        let Some(g) = f.orig.get(o.getpc) else {
            return true;
        };
        o.target_with(g.addr, orig).is_some_and(lands_between)
    });
    if written || joined {
        return None;
    }
    b.target_with(f.orig.get(b.getpc)?.addr, orig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::Target;

    /// rocBLAS's signed long branch at 0x1000 (llvm-mc-22 -mcpu=gfx942 encodings):
    /// `s_getpc_b64 s[34:35]; s_add_i32 s36, LIT, 4; s_cmp_ge_i32 s36, 0; s_cbranch_scc1 4;
    /// s_abs_i32 s36, s36; s_sub_u32 s34, s34, s36; s_subb_u32 s35, s35, 0; s_setpc_b64 s[34:35];
    /// s_add_u32 s34, s34, s36; s_addc_u32 s35, s35, 0; s_setpc_b64 s[34:35]`, then `last`
    /// (index 11) and `s_endpgm`.
    fn signed(lit: u32, last: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0x00, 0x1c, 0xa2, 0xbe, 0xff, 0x84, 0x24, 0x81];
        b.extend_from_slice(&lit.to_le_bytes());
        for w in [
            [0x24, 0x80, 0x03, 0xbf],
            [0x04, 0x00, 0x85, 0xbf],
            [0x24, 0x30, 0xa4, 0xbe],
            [0x22, 0x24, 0xa2, 0x80],
            [0x23, 0x80, 0xa3, 0x82],
            [0x22, 0x1d, 0x80, 0xbe],
            [0x22, 0x24, 0x22, 0x80],
            [0x23, 0x80, 0x23, 0x82],
            [0x22, 0x1d, 0x80, 0xbe],
            last,
            [0x00, 0x00, 0x81, 0xbf],
        ] {
            b.extend_from_slice(&w);
        }
        b
    }

    const BRANCH_TO_END: [u8; 4] = [0x00, 0x00, 0x82, 0xbf]; // s_branch 0
    const BRANCH_TO_ADDS: [u8; 4] = [0xfc, 0xff, 0x82, 0xbf]; // s_branch -4: to index 8

    fn func(bytes: &[u8]) -> Func<'_> {
        let text = crate::program::Text {
            addr: 0x1000,
            offset: 0x1000,
            bytes,
        };
        Func::unaligned(text, Target::from_name("gfx942").expect("gfx942"))
    }

    /// Both `s_setpc_b64` reach `getpc + 4 + sext(LIT + 4)`, for a forward (add path) and a
    /// backward (abs/subtract path) offset.
    #[test]
    fn signed_long_branch_reaches_one_target_by_either_path() {
        for (lit, want) in [(0x100u32, 0x1108u64), ((-0x100i32) as u32, 0xf08)] {
            let b = signed(lit, BRANCH_TO_END);
            let f = func(&b);
            assert_eq!(f.builders.len(), 1, "{lit:#x}");
            let fork = f.builders[0].fork.expect("a fork");
            assert_eq!((fork.branch, fork.alt), (3, 8));
            assert_eq!(
                builder_target(&f, 7, 34),
                Some(want),
                "{lit:#x}: subtract path"
            );
            assert_eq!(builder_target(&f, 10, 34), Some(want), "{lit:#x}: add path");
        }
    }

    /// No builder when another branch enters the add path (it could bring another pair value),
    /// or when the subtract path falls into the add path instead of jumping.
    #[test]
    fn signed_long_branch_needs_a_closed_sequence() {
        let b = signed(0x100, BRANCH_TO_ADDS);
        assert!(func(&b).builders.is_empty());
        let mut b = signed(0x100, BRANCH_TO_END);
        b[0x20..0x24].copy_from_slice(&[0x00, 0x00, 0x80, 0xbf]); // s_nop 0 for the first s_setpc
        assert!(func(&b).builders.is_empty());
    }
}
