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
        for &k in &self.parts {
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

/// Every address builder of `body` (decoded original instructions with their addresses): from
/// each `s_getpc`, the simulated instructions of the next [`WINDOW`] that write its pair or a
/// register computed after it, up to the write of the pair's high half that completes it
/// (`s_addc_u32`-like, or `s_add_nc_u64`). Kept only when the simulation of the original gives
/// an address. Any other write of the pair before that ends the search without a builder.
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
        // SGPRs computed after the getpc (the pair included): a part writes one of them or
        // reads one into the pair.
        let mut tracked: Vec<u16> = vec![dst, dst + 1];
        let mut parts = Vec::new();
        let mut lo_done = false;
        for (j, (_, i)) in body.iter().enumerate().skip(k + 1).take(WINDOW) {
            let (r, w) = i.reads_writes();
            let m = i.mnemonic();
            let writes_pair = w.contains_sgpr(dst) || w.contains_sgpr(dst + 1);
            let Some(d) = i.field("sdst").filter(|_| simulated(m)).map(|d| d as u16) else {
                if writes_pair {
                    break;
                }
                // An unknown write of a computed register makes it unknown again.
                tracked.retain(|&t| !w.contains_sgpr(t));
                continue;
            };
            let reads_tracked = tracked.iter().any(|&t| r.contains_sgpr(t));
            let constant_def = i.literal().is_some() && !writes_pair;
            if !(writes_pair || reads_tracked || constant_def) {
                continue;
            }
            parts.push(j);
            if !tracked.contains(&d) {
                tracked.push(d);
            }
            let whole = m == "s_add_nc_u64";
            if d == dst && !whole {
                lo_done = true;
            }
            let hi_add = matches!(
                m,
                "s_addc_u32" | "s_add_co_ci_u32" | "s_subb_u32" | "s_sub_co_ci_u32"
            );
            if whole || (d == dst + 1 && hi_add && lo_done) {
                let parts = contributing(body, dst, &parts);
                let b = Builder {
                    getpc: k,
                    dst,
                    parts,
                };
                if b.target_with(*g_addr, |p| body.get(p).map(|x| x.1))
                    .is_some()
                {
                    out.push(b);
                }
                break;
            }
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
    let joined = f
        .orig
        .iter()
        .any(|o| f.inst(o).branch_target(o.addr).is_some_and(lands_between))
        || f.builders.iter().any(|o| {
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
