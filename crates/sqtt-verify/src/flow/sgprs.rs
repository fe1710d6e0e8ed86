//! Which SGPRs inserted code may change, from the ORIGINAL program alone (written independently
//! of the rewriter's register choice; the rules are the ones its module docs state, issue 12):
//! an SGPR may be changed before original instruction `k` only when it is dead there and no SMEM
//! result can still arrive in it.
//!
//! - Liveness is backward over the original CFG. A call uses every SGPR read by any function its
//!   callee can reach (an unresolved call: all of them) and kills only what the call instruction
//!   itself writes. At `s_endpgm` nothing is live; after a device function's return, with an
//!   unresolved call anywhere everything; otherwise what is live after each of its call sites
//!   (joined), plus s30..s105 ([`PRESERVED`], the SGPRs the AMDGPU function calling convention
//!   keeps across a call) when no call or tail call reaches it or code outside the object may
//!   enter it ([`crate::program::outside`]); at a tail call, the callee's reads plus the caller's return
//!   liveness; after an `s_trap 2` that ends the function, nothing; anywhere else control leaves,
//!   everything.
//!   `s_movrels*` reads every SGPR; `s_cmov*` / `s_movreld*` kill nothing.
//! - An SMEM load (or `s_sendmsg_rtn`) leaves its destination pending until `s_waitcnt` with
//!   LGKM_CNT 0, `s_waitcnt_lgkmcnt null, 0` or `s_wait_kmcnt 0`; device functions start with
//!   every SMEM destination of the object pending (every SGPR when no call reaches them or code
//!   outside the object may enter them), and a call adds those of every function the callee can
//!   reach.

use rayon::prelude::*;
use std::collections::BTreeMap;

use amdgpu_isa::{Flow, Special};

use super::cfg::FactSuccs;
use crate::program::regs::{reads, writes, Mask, EVERY};
use crate::program::{builder_target, Func, Program, Regs};

/// s30..s105: what a caller following the AMDGPU function calling convention may still read
/// after a call returns (LLVM `AMDGPUCallingConv.td` `CSR_AMDGPU_SGPRs`, s30..s105 or, in newer
/// releases, stripes of it; this is their union). s0..s29 carry arguments and implicit inputs
/// in and are the callee's to clobber (AMDGPUUsage "Calling Conventions").
pub(crate) const PRESERVED: Mask = EVERY & !((1u128 << 30) - 1);

/// One [`Mask`] per original instruction of a function, stored as distinct values (16 bytes
/// each) and a 4-byte index per instruction: instructions mostly share their sets with others
/// of the function (one value in twelve is distinct on cupy's cub gfx1201 object), so this takes
/// about a third of a `Vec<Mask>`.
#[derive(Clone, Default)]
pub(crate) struct Masks {
    /// Distinct values, in order of first use.
    table: Vec<Mask>,
    /// Per instruction: index into `table`.
    of: Vec<u32>,
}

impl Masks {
    /// The masks of `values`, in order. A value equal to one in its slot of a small
    /// direct-mapped table (1,024 slots by a multiplicative hash) shares that entry; a value
    /// whose slot holds another is stored again (a repeated entry, never a wrong one).
    fn of(values: impl ExactSizeIterator<Item = Mask>) -> Masks {
        const SLOTS: usize = 1 << 10;
        let mut m = Masks {
            table: Vec::new(),
            of: Vec::with_capacity(values.len()),
        };
        let mut slot = [u32::MAX; SLOTS];
        for v in values {
            let h =
                ((v as u64 ^ (v >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize;
            let k = match slot[h] {
                k if k != u32::MAX && m.table[k as usize] == v => k,
                _ => {
                    let k = m.table.len() as u32;
                    m.table.push(v);
                    slot[h] = k;
                    k
                }
            };
            m.of.push(k);
        }
        m.table.shrink_to_fit();
        m
    }

    /// The mask of instruction `k`, `None` past the end.
    pub fn get(&self, k: usize) -> Option<Mask> {
        self.of.get(k).map(|&i| self.table[i as usize])
    }

    /// Adds `bits` to the mask of instruction `k` (nothing past the end).
    pub fn add(&mut self, k: usize, bits: Mask) {
        if let Some(v) = self.get(k) {
            self.of[k] = self.table.len() as u32;
            self.table.push(v | bits);
        }
    }
}

/// How control leaves a function at one of its original instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leave {
    EndPgm,
    Return,
    Tail(usize),
    Unknown,
}

/// Call graph of the original program.
pub(crate) struct CallGraph {
    /// Per function: (instruction index, callee or `None` when unresolved).
    pub calls: Vec<Vec<(usize, Option<usize>)>>,
    /// Per function: instructions where control leaves it, and how.
    leaves: Vec<BTreeMap<usize, Leave>>,
    /// Per function: it is a kernel (never the target of a call).
    kernel: Vec<bool>,
    /// Per function: its calls of subroutines inside it ([`super::subcalls`]).
    intra: Vec<Vec<usize>>,
}

// The two facts below (and `reads` / `writes` of [`crate::program::regs`]) take the registers decoded once per original instruction
// (`Func::regs`).

fn kills(r: &Regs) -> Mask {
    if r.has(Regs::CMOV) || r.has(Regs::MOVRELD) {
        0
    } else {
        r.sgpr_writes
    }
}

fn smem_result(r: &Regs) -> Mask {
    if r.has(Regs::ASYNC_RESULT) {
        r.sgpr_writes
    } else {
        0
    }
}

impl CallGraph {
    /// `exits[f]`: the instructions where the verifier's CFG of `f` leaves the function.
    /// Functions are looked at in parallel.
    /// `intra[f]`: its calls of subroutines inside it ([`super::subcalls`]), not calls of
    /// unknown code.
    pub fn new(p: &Program, exits: &[Vec<usize>], intra: &[Vec<usize>]) -> CallGraph {
        let per: Vec<_> = p
            .funcs
            .par_iter()
            .enumerate()
            .map(|(fi, f)| {
                let mut c = Vec::new();
                for (k, o) in f.orig.iter().enumerate() {
                    if !f.regs(o).has(Regs::CALL) {
                        continue;
                    }
                    let oi = f.inst(o);
                    if oi.flow() != Flow::Call || intra.get(fi).is_some_and(|c| c.contains(&k)) {
                        continue;
                    }
                    let t = match oi.branch_target(o.addr) {
                        Some(t) => Some(t),
                        None => oi
                            .reads()
                            .max_sgpr()
                            .and_then(|r| builder_target(f, k, r.saturating_sub(1))),
                    };
                    c.push((k, t.and_then(|t| p.func_at(t))));
                }
                let mut l = BTreeMap::new();
                for &k in exits.get(fi).map(Vec::as_slice).unwrap_or_default() {
                    let oi = f.inst(&f.orig[k]);
                    let how = match oi.flow() {
                        Flow::EndProgram => Leave::EndPgm,
                        Flow::IndirectJump if oi.special() != Special::AddPcI64 => {
                            let pair = oi.reads().max_sgpr().map(|r| r.saturating_sub(1));
                            match pair.and_then(|r| builder_target(f, k, r)) {
                                Some(t) => match p.func_at(t) {
                                    Some(g) if g != fi => Leave::Tail(g),
                                    _ => Leave::Unknown,
                                },
                                None if f.kind == crate::FunctionKind::Function => Leave::Return,
                                None => Leave::Unknown,
                            }
                        }
                        _ => Leave::Unknown,
                    };
                    l.insert(k, how);
                }
                (c, l)
            })
            .collect();
        let (calls, leaves) = per.into_iter().unzip();
        let kernel = p
            .funcs
            .iter()
            .map(|f| f.kind == crate::FunctionKind::Kernel)
            .collect();
        CallGraph {
            calls,
            leaves,
            kernel,
            intra: intra.to_vec(),
        }
    }

    /// Joins into each function's mask the masks of every function it calls or tail-calls
    /// (every SGPR for an unresolved call), until nothing changes (the fixed point over the
    /// call graph). `m`: one mask per function.
    fn close_over_callees(&self, m: &mut [Mask]) {
        loop {
            let mut again = false;
            for fi in 0..m.len() {
                let mut v = m[fi];
                for &(_, c) in &self.calls[fi] {
                    v |= c.map_or(EVERY, |g| m[g]);
                }
                for g in self.tails(fi) {
                    v |= m[g];
                }
                again |= v != m[fi];
                m[fi] = v;
            }
            if !again {
                break;
            }
        }
    }

    fn tails(&self, fi: usize) -> impl Iterator<Item = usize> + '_ {
        self.leaves[fi].values().filter_map(|l| match l {
            Leave::Tail(g) => Some(*g),
            _ => None,
        })
    }

    /// Function indices reachable from `root` through calls and tail calls, `root` included
    /// (every function when an unresolved call is reached), ascending. A list, not a flag per
    /// function: thousands of kernels times thousands of functions was quadratic.
    pub fn reachable(&self, root: usize) -> Vec<usize> {
        let n = self.calls.len();
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![root];
        while let Some(f) = stack.pop() {
            if !seen.insert(f) {
                continue;
            }
            for &(_, c) in &self.calls[f] {
                match c {
                    Some(g) => stack.push(g),
                    // An unresolved call reaches any device function; kernels are never called.
                    None => return (0..n).filter(|&g| g == root || !self.kernel[g]).collect(),
                }
            }
            stack.extend(self.tails(f));
        }
        seen.into_iter().collect()
    }
}

/// Per function, per original instruction: the SGPRs inserted code in front of it may change.
/// `outside[f]`: code outside the object may enter function `f`.
pub(crate) fn changeable(
    p: &Program,
    cg: &CallGraph,
    succs: &[FactSuccs],
    outside: &[bool],
) -> Vec<Masks> {
    let n = p.funcs.len();
    let opaque = |f: &Func| f.orig.is_empty() && f.orig_end > f.orig_start;
    let unresolved =
        p.funcs.iter().any(opaque) || cg.calls.iter().flatten().any(|(_, c)| c.is_none());
    // Per function: the union of `fact` over its original instructions (every SGPR for a
    // function that did not decode).
    let per_function = |fact: fn(&Regs) -> Mask| -> Vec<Mask> {
        p.funcs
            .iter()
            .map(|f| {
                if opaque(f) {
                    EVERY
                } else {
                    f.orig.iter().fold(0, |a, o| a | fact(f.regs(o)))
                }
            })
            .collect()
    };
    // Transitive reads.
    let mut deep = per_function(reads);
    cg.close_over_callees(&mut deep);
    // Return liveness: joined over known call sites until stable.
    let mut reached = vec![false; n];
    for fi in 0..n {
        for &(_, c) in &cg.calls[fi] {
            if let Some(g) = c {
                reached[g] = true;
            }
        }
        for g in cg.tails(fi) {
            reached[g] = true;
        }
    }
    let foreign = |g: usize| !reached[g] || outside.get(g).copied().unwrap_or(true);
    let mut after_return: Vec<Mask> = (0..n)
        .map(|g| match (unresolved, foreign(g)) {
            (true, _) => EVERY,
            (false, true) => PRESERVED,
            (false, false) => 0,
        })
        .collect();
    // Rounds: every function's liveness from the current return liveness (in parallel), then
    // the return liveness joined from every call site. The equations are monotone and the
    // values only grow from the same start, so this reaches the same least fixed point as
    // updating function by function (chaotic iteration), in parallel.
    // A function's liveness depends on the return liveness only through its own entry
    // (`live_in`): a round recomputes only the functions whose entry changed since their last
    // computation (the others would give the same vectors again).
    let mut live: Vec<Masks> = vec![Masks::default(); n];
    let mut computed_with: Vec<Option<Mask>> = vec![None; n];
    loop {
        let mut again = false;
        live.par_iter_mut()
            .zip(computed_with.par_iter_mut())
            .enumerate()
            .filter(|(fi, (_, w))| **w != Some(after_return[*fi]))
            .for_each(|(fi, (l, w))| {
                *l = live_in(p, cg, &succs[fi], fi, &deep, &after_return);
                *w = Some(after_return[fi]);
            });
        for fi in 0..n {
            for &(k, c) in &cg.calls[fi] {
                let Some(g) = c else { continue };
                let out = succs[fi]
                    .each(k)
                    .fold(0, |a, s| a | live[fi].get(s).unwrap_or(0));
                if after_return[g] | out != after_return[g] {
                    after_return[g] |= out;
                    again = true;
                }
            }
            for g in cg.tails(fi) {
                if after_return[g] | after_return[fi] != after_return[g] {
                    after_return[g] |= after_return[fi];
                    again = true;
                }
            }
        }
        if !again {
            break;
        }
    }
    // SMEM destinations: of the whole object, and of what each function reaches.
    let mut smem = per_function(smem_result);
    let smem_all = smem.iter().fold(0, |a, m| a | m);
    cg.close_over_callees(&mut smem);
    // Independent per function: in parallel (the order of the result is kept), each function's
    // liveness and pending SMEM results turned into its changeable sets.
    live.into_par_iter()
        .enumerate()
        .map(|(fi, l)| {
            let entry = if foreign(fi) { EVERY } else { smem_all };
            let pend = pending(p, cg, &succs[fi], fi, (&smem, entry));
            Masks::of(
                pend.iter()
                    .enumerate()
                    .map(|(k, q)| EVERY & !l.get(k).unwrap_or(0) & !q),
            )
        })
        .collect()
}

fn live_in(
    p: &Program,
    cg: &CallGraph,
    succs: &FactSuccs,
    fi: usize,
    deep: &[Mask],
    after_return: &[Mask],
) -> Masks {
    let f = &p.funcs[fi];
    let n = f.orig.len();
    let mut gen: Vec<Mask> = f.orig.iter().map(|o| reads(f.regs(o))).collect();
    // The last call recorded at an instruction counts (as a map built from the list would).
    let mut called: Vec<Option<Mask>> = Vec::new();
    for &(k, c) in &cg.calls[fi] {
        if called.is_empty() {
            called = vec![None; n];
        }
        if let Some(x) = called.get_mut(k) {
            *x = Some(c.map_or(EVERY, |g| deep[g]));
        }
    }
    for (g, c) in gen.iter_mut().zip(&called) {
        *g |= c.unwrap_or(0);
    }
    // Where control leaves: by how it leaves at the function's exits (one walk along them, not
    // a map lookup per instruction), everything after any other instruction without a
    // successor.
    // `s_trap 2` with nothing after it halts the wave for good (AMDGPUUsage "Trap Handler ABI":
    // the queue is put into the error state): nothing is live after it.
    let mut end: Vec<Mask> = (0..n)
        .map(|k| {
            if succs.none(k) && !crate::program::aborts(&f.inst(&f.orig[k])) {
                EVERY
            } else {
                0
            }
        })
        .collect();
    for (&k, how) in &cg.leaves[fi] {
        if let Some(e) = end.get_mut(k) {
            *e = match how {
                Leave::EndPgm => 0,
                Leave::Return => after_return[fi],
                Leave::Tail(g) => deep[*g] | after_return[fi],
                Leave::Unknown => EVERY,
            };
        }
    }
    // Decoded once, not once per iteration of the fixed point.
    let kill: Vec<Mask> = f.orig.iter().map(|o| kills(f.regs(o))).collect();
    let mut live = vec![0; n];
    loop {
        let mut again = false;
        for k in (0..n).rev() {
            let out = succs.each(k).fold(end[k], |a, s| a | live[s]);
            let v = gen[k] | (out & !kill[k]);
            again |= v != live[k];
            live[k] = v;
        }
        if !again {
            return Masks::of(live.into_iter());
        }
    }
}

/// `smem`: per function, the SMEM destinations of what it reaches; and those pending at the
/// entry of a device function.
fn pending(
    p: &Program,
    cg: &CallGraph,
    succs: &FactSuccs,
    fi: usize,
    (smem, smem_all): (&[Mask], Mask),
) -> Vec<Mask> {
    let f = &p.funcs[fi];
    let n = f.orig.len();
    let mut at: Vec<Option<Mask>> = vec![None; n];
    if n == 0 {
        return Vec::new();
    }
    let calls: BTreeMap<usize, Option<usize>> = cg.calls[fi].iter().copied().collect();
    at[0] = Some(if f.kind == crate::FunctionKind::Kernel {
        0
    } else {
        smem_all
    });
    // Per instruction, decoded once (not once per iteration of the fixed point): whether it
    // drains the SMEM results, the results it starts, and what a call adds.
    let facts: Vec<(bool, Mask, Mask)> = f
        .orig
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let r = f.regs(o);
            let call = if r.has(Regs::CALL) {
                match calls.get(&k) {
                    Some(Some(g)) => smem[*g],
                    // A subroutine inside the function: its loads are on the CFG's edges.
                    None if cg.intra[fi].contains(&k) => 0,
                    _ => EVERY,
                }
            } else {
                0
            };
            (r.has(Regs::SMEM_DRAINED), smem_result(r), call)
        })
        .collect();
    loop {
        let mut again = false;
        for k in 0..n {
            let Some(v) = at[k] else { continue };
            let (drained, result, call) = facts[k];
            let mut out = if drained { result } else { v | result };
            out |= call;
            for s in succs.each(k) {
                let m = at[s].unwrap_or(0) | out;
                if at[s] != Some(m) {
                    at[s] = Some(m);
                    again = true;
                }
            }
        }
        if !again {
            return at.into_iter().map(|v| v.unwrap_or(EVERY)).collect();
        }
    }
}

/// SGPRs any original instruction of the function reads or may write.
pub(crate) fn touched(f: &Func) -> Mask {
    f.orig
        .iter()
        .fold(0, |a, o| a | reads(f.regs(o)) | writes(f.regs(o)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::Target;

    /// A function from gfx942 words (llvm-mc-22 encodings) at address 0x1000.
    fn func(bytes: &[u8]) -> Func<'_> {
        let t = Target::from_name("gfx942").expect("gfx942");
        let text = crate::program::Text {
            addr: 0x1000,
            offset: 0x1000,
            bytes,
        };
        Func::unaligned(text, t)
    }

    /// `s_getpc_b64 s[0:1]; s_add_u32 s0, s0, 0x100; s_addc_u32 s1, s1, 0`, then `between`, then
    /// `s_swappc_b64 s[30:31], s[0:1]` (llvm-mc-22 -mcpu=gfx942 encodings).
    fn call_after(between: &[u8]) -> Vec<u8> {
        let mut b = vec![
            0x00, 0x1c, 0x80, 0xbe, 0x00, 0xff, 0x00, 0x80, 0x00, 0x01, 0x00, 0x00, 0x01, 0x80,
            0x01, 0x82,
        ];
        b.extend_from_slice(between);
        b.extend_from_slice(&[0x00, 0x1e, 0x9e, 0xbe, 0x00, 0x00, 0x81, 0xbf]);
        b
    }

    /// A call through a builder's pair resolves to the builder's target only while the pair
    /// provably holds it (session-6 finding: the latest builder was taken even when the pair was
    /// overwritten before the call, e.g. by an `-O0` reload from VGPR lanes).
    #[test]
    fn call_targets_need_an_untouched_pair_on_a_straight_line() {
        // Target: getpc address + 4 + 0x100.
        let b = call_after(&[]);
        let f = func(&b);
        assert_eq!(builder_target(&f, 3, 0), Some(0x1104));
        // `s_mov_b32 s2, s5` touches another pair: still resolved.
        let b = call_after(&[0x05, 0x00, 0x82, 0xbe]);
        let f = func(&b);
        assert_eq!(builder_target(&f, 4, 0), Some(0x1104));
        // `s_mov_b32 s0, s5` overwrites the low half: unresolved.
        let b = call_after(&[0x05, 0x00, 0x80, 0xbe]);
        let f = func(&b);
        assert_eq!(builder_target(&f, 4, 0), None);
        // `s_cbranch_scc0 -2` (back to the s_addc_u32's successor region): a branch lands
        // between the builder and the call, so another path may reach the call: unresolved.
        let b = call_after(&[0x00, 0x00, 0x84, 0xbf, 0xfe, 0xff, 0x84, 0xbf]);
        let f = func(&b);
        assert_eq!(f.inst(&f.orig[4]).mnemonic(), "s_cbranch_scc0");
        assert_eq!(builder_target(&f, 5, 0), None);
    }

    #[test]
    fn masks_give_back_every_value_and_add_changes_one_position() {
        // Many distinct values (more than the 1,024 slots: colliding slots store repeats),
        // repeated in another order, with equal neighbours.
        let values: Vec<Mask> = (0..5000u128)
            .map(|i| (i * 0x1_0000_0001 % 3001) << (i % 60))
            .chain((0..5000u128).rev().map(|i| i % 7))
            .collect();
        let mut m = Masks::of(values.iter().copied());
        assert!(
            m.table.len() < values.len(),
            "repeated values share entries"
        );
        for (k, v) in values.iter().enumerate() {
            assert_eq!(m.get(k), Some(*v), "position {k}");
        }
        assert_eq!(m.get(values.len()), None);
        // Position 5001 holds 4998 % 7 = 0, like many others: only it changes.
        m.add(5001, 1 << 100);
        assert_eq!(m.get(5001), Some(values[5001] | 1 << 100));
        for (k, v) in values.iter().enumerate().filter(|&(k, _)| k != 5001) {
            assert_eq!(m.get(k), Some(*v), "position {k} after add");
        }
        m.add(values.len(), 1);
        assert_eq!(m.get(values.len()), None);
    }
}
