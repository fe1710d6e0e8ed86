//! Live SGPRs saved in VGPR lanes around inserted code (issue 12 item 3), checked from the
//! rewritten runs and the ORIGINAL program alone, independently of the rewriter's choice.
//!
//! Inserted code may write an SGPR that is live where it runs only when the run provably gives
//! it back before original code resumes:
//! - `v_writelane_b32 vT, sK, L` (L an inline constant below the wave size) saves sK before the
//!   run writes it, and a later `v_readlane_b32 sK, vT, L` restores it; nothing between them
//!   writes lane L of vT (another constant lane of vT may be written: another save), and sK
//!   holds its original value at the end of the run (several snippets at one point may each save
//!   and restore it; a write outside such a pair is not restored). Both ignore EXEC (ISA manuals,
//!   "V_WRITELANE_B32" / "V_READLANE_B32"), so the lane holds the value whatever EXEC is.
//! - Control cannot enter the saved stretch (after the save, up to the restore) from outside it,
//!   neither by a branch of the run nor by an original branch landing in the run, and no branch
//!   inside it leaves it (a path that skips the restore, or re-executes the save with sK changed).
//! - vT is a VGPR that no original instruction of any kernel call graph containing the function
//!   uses ([`unused_vgprs`]); so its lanes carry nothing the original program reads.

use amdgpu_isa::Instruction;

use rayon::prelude::*;

use crate::program::insn::scalar_const;
use crate::program::{Func, NInst, Program, Regs};

/// VGPRs v0..v255 as a bit set (bit n = v<n>).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Vgprs([u128; 2]);

impl Vgprs {
    pub const ALL: Vgprs = Vgprs([u128::MAX; 2]);

    pub fn contains(&self, v: u16) -> bool {
        v < 256 && self.0[usize::from(v / 128)] >> (v % 128) & 1 == 1
    }

    fn add(&mut self, v: u16) {
        if v < 256 {
            self.0[usize::from(v / 128)] |= 1 << (v % 128);
        }
    }

    fn union(self, o: Vgprs) -> Vgprs {
        Vgprs([self.0[0] | o.0[0], self.0[1] | o.0[1]])
    }
}

/// VGPRs the original instructions of `f` read or write (all when it did not decode or
/// indexes VGPRs).
fn used(f: &Func) -> Vgprs {
    if f.orig.is_empty() && f.orig_end > f.orig_start {
        return Vgprs::ALL;
    }
    if f.orig
        .iter()
        .any(|o| f.regs(o).has(crate::program::Regs::INDEXED))
    {
        return Vgprs::ALL;
    }
    // The union of every original instruction's registers, collected when they were decoded.
    let mut u = Vgprs::default();
    for v in 0..256u16 {
        if f.orig_used.contains_vgpr(v) {
            u.add(v);
        }
    }
    u
}

/// Per function: the VGPRs original code uses in some kernel call graph that contains it
/// (`reach[k]`: functions kernel `k` reaches, ascending, `None` for device functions). A function no kernel
/// reaches gets every VGPR (nothing is known about who calls it).
pub(crate) fn used_in_call_graphs(p: &Program, reach: &[Option<Vec<usize>>]) -> Vec<Vgprs> {
    let own: Vec<Vgprs> = p.funcs.par_iter().map(used).collect();
    let mut out: Vec<Option<Vgprs>> = vec![None; p.funcs.len()];
    for r in reach.iter().flatten() {
        let graph = r.iter().fold(Vgprs::default(), |a, &g| a.union(own[g]));
        for &g in r {
            out[g] = Some(out[g].map_or(graph, |x| x.union(graph)));
        }
    }
    out.into_iter().map(|u| u.unwrap_or(Vgprs::ALL)).collect()
}

/// SGPRs a run saves and restores, and why its lane moves are not a valid save/restore.
pub(crate) struct Saves {
    /// Bit n: s<n> is restored before the run ends.
    pub restored: u128,
    /// (address, message) per invalid `v_writelane_b32` / restore.
    pub problems: Vec<(u64, String)>,
}

/// The one SGPR a scalar source field names, if it is one of s0..s105.
fn sgpr_of(i: &Instruction, field: &str) -> Option<u16> {
    let v = i.field(field)?;
    (v < 106).then_some(v as u16)
}

/// The save/restore pairs of `run` (in address order; its end is `end`; `regs`: parallel to it,
/// its registers decoded once). `landings`: addresses
/// inside the run where original branches enter it; `wave`: lanes; `used`: VGPRs original code
/// of the function's call graphs uses. See the module docs for the rules. Several snippets at
/// one point may each save the same SGPR: a save is valid when the SGPR holds its original value
/// there (untouched so far, or restored by an earlier valid pair), and the SGPR counts as
/// restored when it holds its original value at the end of the run.
pub(crate) fn saves(
    run: &[NInst],
    regs: &[Regs],
    end: u64,
    landings: &[u64],
    wave: u32,
    used: Vgprs,
) -> Saves {
    let mut out = Saves {
        restored: 0,
        problems: Vec::new(),
    };
    // Candidate pairs by save index: (SGPR, restore index).
    let mut pairs: Vec<Option<(u16, usize)>> = vec![None; run.len()];
    for (a, w) in run.iter().enumerate() {
        if w.inst.mnemonic() != "v_writelane_b32" {
            continue;
        }
        match pair(run, a, end, landings, wave, used) {
            Ok(p) => pairs[a] = Some(p),
            Err(m) => out.problems.push((w.addr, m)),
        }
    }
    // Which SGPRs hold their original value, in run order (branches inside a pair's stretch
    // cannot leave it, so the order of the run is the order of execution around the pairs).
    let mut original: u128 = u128::MAX;
    let mut restores: Vec<usize> = Vec::new();
    let mut saved_pairs: u128 = 0;
    for (p, (n, r)) in run.iter().zip(regs).enumerate() {
        if let Some((sk, b)) = pairs[p] {
            if original >> sk & 1 == 0 {
                out.problems.push((
                    n.addr,
                    format!("v_writelane_b32 saves s{sk} after inserted code changed it"),
                ));
            } else {
                restores.push(b);
                saved_pairs |= 1u128 << sk;
            }
        }
        if restores.contains(&p) {
            if let Some(sk) = sgpr_of(&n.inst, "vdst") {
                original |= 1u128 << sk;
            }
            continue;
        }
        original &= !r.sgpr_writes;
    }
    out.restored = saved_pairs & original;
    out
}

/// Checks the save `v_writelane_b32` at `run[a]` and finds its restore: (SGPR, restore index).
fn pair(
    run: &[NInst],
    a: usize,
    end: u64,
    landings: &[u64],
    wave: u32,
    used: Vgprs,
) -> Result<(u16, usize), String> {
    let w = &run[a].inst;
    let index_of = |addr: u64| {
        if addr == end {
            Some(run.len())
        } else {
            run.iter().position(|n| n.addr == addr)
        }
    };
    let vt = w.field("vdst").map(|v| v as u16);
    let (Some(vt), Some(sk), Some(lane)) = (vt, sgpr_of(w, "src0"), scalar_const(w, "src1")) else {
        return Err("v_writelane_b32 is not a save of an SGPR into a constant lane".into());
    };
    if lane >= wave {
        return Err(format!(
            "v_writelane_b32 lane {lane} is not a lane of a wave{wave}"
        ));
    }
    if used.contains(vt) {
        return Err(format!(
            "v_writelane_b32 writes v{vt}, which original code of this call graph uses"
        ));
    }
    let b = run[a + 1..]
        .iter()
        .position(|n| {
            n.inst.mnemonic() == "v_readlane_b32"
                && sgpr_of(&n.inst, "vdst") == Some(sk)
                && n.inst.field("src0") == Some(256 + u32::from(vt))
                && scalar_const(&n.inst, "src1") == Some(lane)
        })
        .map(|x| x + a + 1)
        .ok_or_else(|| format!("s{sk} saved in v{vt} lane {lane} is never restored from there"))?;
    // Nothing in between overwrites the saved lane.
    let clobber = run[a + 1..b].iter().find(|n| {
        n.inst.writes().contains_vgpr(vt)
            && !(n.inst.mnemonic() == "v_writelane_b32"
                && scalar_const(&n.inst, "src1").is_some_and(|l| l != lane))
    });
    if let Some(c) = clobber {
        return Err(format!(
            "{} at {:#x} overwrites v{vt} lane {lane} before s{sk} is restored",
            c.inst.mnemonic(),
            c.addr
        ));
    }
    // Control enters (a, b] only through the save and leaves it only through the restore.
    let inside = |q: usize| q > a && q <= b;
    let escapes = run.iter().enumerate().find(|(p, n)| {
        n.inst
            .branch_target(n.addr)
            .map(|t| index_of(t).unwrap_or(usize::MAX))
            .is_some_and(|q| (*p > a && *p < b) != inside(q))
    });
    if let Some((_, n)) = escapes {
        return Err(format!(
            "{} at {:#x} crosses the save/restore of s{sk}",
            n.inst.mnemonic(),
            n.addr
        ));
    }
    if let Some(l) = landings.iter().find(|&&l| index_of(l).is_some_and(inside)) {
        return Err(format!(
            "an original branch lands at {l:#x}, between the save and the restore of s{sk}"
        ));
    }
    Ok((sk, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdgpu_isa::build::{self, Operand};
    use amdgpu_isa::Target;

    /// `code` laid out from 0x100.
    fn run(code: Vec<Instruction>) -> Vec<NInst> {
        let mut addr = 0x100;
        code.into_iter()
            .map(|inst| {
                let n = NInst { addr, inst };
                addr += inst.len() as u64;
                n
            })
            .collect()
    }

    /// The registers of `r`, decoded as the verifier decodes inserted code.
    fn regs(r: &[NInst]) -> Vec<Regs> {
        r.iter().map(|n| Regs::of_inst(&n.inst)).collect()
    }

    fn end(r: &[NInst]) -> u64 {
        r.last().map_or(0x100, |n| n.addr + n.inst.len() as u64)
    }

    fn save(t: Target, s: u8, lane: i32) -> Instruction {
        build::v_writelane_b32(t, 200, Operand::Sgpr(s), Operand::Imm(lane)).expect("save")
    }

    fn restore(t: Target, s: u8, lane: i32) -> Instruction {
        build::v_readlane_b32(t, Operand::Sgpr(s), 200, Operand::Imm(lane)).expect("restore")
    }

    fn clobber(t: Target, s: u8) -> Instruction {
        build::s_mov_b32(t, Operand::Sgpr(s), Operand::Imm(0)).expect("mov")
    }

    /// Two snippets at one point each save and restore s0: both pairs are valid.
    #[test]
    fn consecutive_saves_of_one_sgpr() {
        let t = Target::from_name("gfx1100").expect("target");
        let r = run(vec![
            save(t, 0, 0),
            clobber(t, 0),
            restore(t, 0, 0),
            save(t, 0, 0),
            clobber(t, 0),
            restore(t, 0, 0),
        ]);
        let s = saves(&r, &regs(&r), end(&r), &[], 32, Vgprs::default());
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(s.restored, 1);
    }

    /// A write after the restore, or before the save, leaves the SGPR changed.
    #[test]
    fn writes_outside_the_pair_are_not_restored() {
        let t = Target::from_name("gfx1201").expect("target");
        let after = run(vec![save(t, 3, 1), restore(t, 3, 1), clobber(t, 3)]);
        let s = saves(
            &after,
            &regs(&after),
            end(&after),
            &[],
            32,
            Vgprs::default(),
        );
        assert_eq!(s.restored, 0);
        let before = run(vec![clobber(t, 3), save(t, 3, 1), restore(t, 3, 1)]);
        let s = saves(
            &before,
            &regs(&before),
            end(&before),
            &[],
            32,
            Vgprs::default(),
        );
        assert_eq!(s.restored, 0);
        assert!(s.problems[0].1.contains("after inserted code changed it"));
        // A lane beyond the wave, and a landing between save and restore.
        let r = run(vec![save(t, 3, 40), restore(t, 3, 40)]);
        let s = saves(&r, &regs(&r), end(&r), &[], 32, Vgprs::default());
        assert!(s.problems[0].1.contains("not a lane of a wave32"));
        let r = run(vec![save(t, 3, 1), clobber(t, 3), restore(t, 3, 1)]);
        let s = saves(&r, &regs(&r), end(&r), &[r[1].addr], 32, Vgprs::default());
        assert!(s.problems[0].1.contains("lands at"), "{:?}", s.problems);
        assert_eq!(s.restored, 0);
    }
}
