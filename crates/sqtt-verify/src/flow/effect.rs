//! What executing an inserted run (or a landing block) from one entry does: M0 and SCC after it,
//! the marker words it emits and the problems its execution raised, by simulation of simple
//! marker snippets or execution on the `sqtt-interp` model wave ([`super::region`]).

use amdgpu_isa::SpecialReg;

use super::liveness::Val;
use super::region;
use crate::program::insn::{legacy, Allowed, Region};
use crate::program::{Func, FuncmapInfo, Layout, NInst, Program, Regs};
use crate::Check;

/// Effect of executing (a suffix of) an inserted run.
pub(super) struct Effect {
    pub(super) m0: Val,
    /// The last instruction of the run writes M0.
    pub(super) last_writes_m0: bool,
    pub(super) markers: Vec<(u64, u32)>,
    pub(super) problems: Vec<(Check, u64, String)>,
    /// SCC differs after the run in some execution.
    pub(super) scc_changed: bool,
}

/// `regs`, `classes`: parallel to `run`, its registers and whitelist classes (decoded once).
pub(super) fn simulate<'r>(
    run: &[NInst],
    regs: impl Iterator<Item = &'r Regs>,
    classes: &[Option<Region>],
) -> Effect {
    let mut e = Effect {
        m0: Val::Orig,
        last_writes_m0: false,
        markers: Vec::new(),
        problems: Vec::new(),
        scc_changed: false,
    };
    let mut sr = Val::Unknown;
    for ((n, r), class) in run.iter().zip(regs).zip(classes) {
        let mut writes_m0 = false;
        let mut value = None;
        match legacy(*class) {
            Some(Allowed::SetM0(k)) => {
                e.m0 = Val::Const(k);
                writes_m0 = true;
            }
            Some(Allowed::SaveM0(_)) => sr = e.m0,
            Some(Allowed::RestoreM0(r)) => {
                if sr == Val::Unknown {
                    e.problems.push((
                        Check::M0,
                        n.addr,
                        format!("M0 restored from s{r}, which this run did not save"),
                    ));
                }
                e.m0 = sr;
                writes_m0 = true;
            }
            Some(Allowed::Ttrace) => {
                if e.last_writes_m0 {
                    e.problems.push((
                        Check::M0,
                        n.addr,
                        "s_ttracedata directly after an M0 write (needs s_nop 0)".into(),
                    ));
                }
                match e.m0 {
                    Val::Const(k) => value = Some(k),
                    _ => e.problems.push((
                        Check::Markers,
                        n.addr,
                        "s_ttracedata without an M0 constant set in the same run".into(),
                    )),
                }
            }
            Some(Allowed::TtraceImm(v)) => value = Some(u32::from(v)),
            Some(Allowed::Nop0) => {}
            None => {
                if r.has(Regs::M0_WRITE) {
                    e.m0 = Val::Unknown;
                    writes_m0 = true;
                }
            }
        }
        e.last_writes_m0 = writes_m0;
        if let Some(v) = value {
            e.markers.push((n.addr, v));
        }
    }
    e
}

/// Normalised entry into the run of original `k`: `None` when the landing executes the whole run.
pub(super) fn entry_key(f: &Func, k: usize, land: Option<u64>) -> Option<u64> {
    let start = f
        .inserted
        .get(f.run(k))
        .and_then(|r| r.first())
        .map(|x| x.addr);
    match (land, start) {
        (None, _) => None,
        (Some(l), Some(s)) if l == s => None,
        // No run in front: every landing executes the (empty) whole run.
        (Some(_), None) => None,
        (Some(l), _) => Some(l),
    }
}

pub(super) fn run_from<'a>(
    p: &Program,
    f: &'a Func,
    k: usize,
    landing: Option<u64>,
) -> &'a [NInst] {
    let mut run = f.inserted.get(f.run(k)).unwrap_or_default();
    // A run that starts with a long-branch island or a landing block is never entered by
    // fall-through: after an unconditional branch nothing falls into it, and after a conditional
    // branch the fall-through path takes the `s_branch` over it. Execution starts after it.
    let trailer_end = |a: u64| {
        p.landing_containing(a)
            .map(|(_, b)| b.end)
            .or_else(|| p.island_containing(a).map(|isl| isl.end))
    };
    while let Some(first) = run.first() {
        if landing.is_some() {
            break;
        }
        if trailer_end(first.addr).is_some() {
            run = &run[1..];
            continue;
        }
        let skips_island = run.get(1).and_then(|next| {
            let end = trailer_end(next.addr)?;
            let over = first.inst.mnemonic() == "s_branch"
                && first.inst.branch_target(first.addr) == Some(end);
            over.then_some(())
        });
        match skips_island {
            Some(()) => run = &run[1..],
            None => break,
        }
    }
    match landing {
        None => run,
        Some(a) => {
            let skip = run.iter().take_while(|n| n.addr < a).count();
            run.get(skip..).unwrap_or_default()
        }
    }
}

/// Effect of a run that is more than a simple marker snippet, from its execution.
pub(super) fn executed_effect(run: &[NInst], at: u64, x: region::Exec, layout: Layout) -> Effect {
    let mut e = Effect {
        m0: if x.m0_preserved {
            Val::Orig
        } else {
            x.m0_const.map_or(Val::Unknown, Val::Const)
        },
        last_writes_m0: run
            .last()
            .is_some_and(|n| n.inst.writes().contains(SpecialReg::M0)),
        markers: Vec::new(),
        problems: x.problems.into_iter().map(|(c, m)| (c, at, m)).collect(),
        scc_changed: x.scc_changed,
    };
    for w in run.windows(2) {
        if w[1].inst.special() == amdgpu_isa::Special::TtraceData
            && w[0].inst.writes().contains(SpecialReg::M0)
        {
            e.problems.push((
                Check::M0,
                w[1].addr,
                "s_ttracedata directly after an M0 write (needs s_nop 0)".into(),
            ));
        }
    }
    for v in x.headers {
        e.markers.push((at, layout.strip(v)));
    }
    e
}

/// Facts of the original program the effect of inserted code is checked against, by original
/// instruction index.
pub(super) struct Facts<'a> {
    pub(super) live: &'a [bool],
    pub(super) scc_live: &'a [bool],
    pub(super) consts: &'a [Option<Val>],
    pub(super) fm: &'a FuncmapInfo,
    pub(super) layout: Layout,
}

/// Inserted code in front of one original instruction (a run) or of one jump (a landing block),
/// with what every entry into it asks, worked out once for all of them.
pub(super) struct Code<'a> {
    /// The code as fall-through enters it.
    pub(super) whole: &'a [NInst],
    /// Where it ends (new address; the original instruction after a run, a landing block's
    /// jump).
    pub(super) end: Option<u64>,
    /// Every instruction is a simple marker-snippet instruction.
    pub(super) legacy: bool,
    /// SGPRs the code may change (bit n = s<n>).
    pub(super) changeable: u128,
    /// The model can execute it: every instruction is whitelisted and writes only SGPRs, M0
    /// and SCC, or is an M0 save or a lane save.
    pub(super) executable: bool,
    /// Some instruction names a VGPR (most runs name none: then no decode for
    /// [`Code::vgprs`]).
    pub(super) names_vgprs: bool,
    /// VGPRs it reads (randomised by the execution), decoded at the first execution.
    pub(super) vgprs: std::cell::OnceCell<Vec<u16>>,
    /// M0 where the code runs, when the original program has the same constant there on every
    /// path ([`m0_constants`]): the execution starts from it instead of a random value, so a
    /// guarded run that re-materialises that constant on one path only keeps M0.
    pub(super) m0: Option<u32>,
}

impl<'a> Code<'a> {
    /// `whole`: a stretch of `f.inserted`.
    pub(super) fn new(
        f: &Func,
        whole: &'a [NInst],
        end: Option<u64>,
        legacy: bool,
        changeable: u128,
    ) -> Code<'a> {
        let at = span(f, whole);
        let names_vgprs = f.inserted_regs(at.clone()).any(|r| r.vgpr_top != 0);
        let executable = f.inserted_class[at.clone()]
            .iter()
            .zip(f.inserted_regs(at))
            .all(|(class, r)| {
                class.is_some() && r.has(Regs::SCALAR_WRITES)
                    || matches!(
                        class,
                        Some(Region::Legacy(Allowed::SaveM0(_)) | Region::Writelane)
                    )
            });
        Code {
            whole,
            end,
            legacy,
            changeable,
            executable,
            names_vgprs,
            vgprs: std::cell::OnceCell::new(),
            m0: None,
        }
    }

    /// The code with M0's original value where it runs (`Some(Val::Const)` only counts).
    pub(super) fn with_m0(mut self, m0: Option<Val>) -> Code<'a> {
        self.m0 = match m0 {
            Some(Val::Const(c)) => Some(c),
            _ => None,
        };
        self
    }

    pub(super) fn vgprs(&self) -> &[u16] {
        self.vgprs.get_or_init(|| {
            if self.names_vgprs {
                region::vgprs_read(self.whole.iter().map(|x| &x.inst))
            } else {
                Vec::new()
            }
        })
    }
}

/// Indices into `f.inserted` (ascending by address) of `run`, a stretch of it.
pub(super) fn span(f: &Func, run: &[NInst]) -> std::ops::Range<usize> {
    let Some(first) = run.first() else {
        return 0..0;
    };
    let i = f.inserted.partition_point(|x| x.addr < first.addr);
    i..i + run.len()
}

/// Effect of executing `run` (a stretch of `f.inserted` ending where `c` ends, from one entry);
/// `frame`: entered whole.
pub(super) fn entry_effect(
    p: &Program,
    env: &region::Env,
    f: &Func,
    c: &Code,
    run: &[NInst],
    frame: bool,
) -> Effect {
    let idx = span(f, run);
    let simulated = || {
        simulate(
            run,
            f.inserted_regs(idx.clone()),
            &f.inserted_class[idx.clone()],
        )
    };
    if c.whole.is_empty() {
        // Most original instructions have no run: nothing is executed (`run`, a suffix, is
        // empty too).
        return simulated();
    }
    let exec = match (c.whole.first(), c.end) {
        (Some(first), Some(end)) if c.executable && !run.is_empty() => {
            let landing = run.first().map_or(end, |x| x.addr);
            Some((
                landing,
                region::execute(
                    env,
                    &region::Entry {
                        code: p.ntext.slice(first.addr, end),
                        start: first.addr,
                        landing,
                        frame,
                        deterministic: !c.legacy,
                        trials: if c.legacy { 2 } else { 6 },
                        vgprs: c.vgprs(),
                        changeable: c.changeable,
                        m0: c.m0,
                    },
                ),
            ))
        }
        _ => None,
    };
    match exec {
        Some((at, x)) if !c.legacy => executed_effect(run, at, x, env.layout),
        Some((at, x)) => {
            let mut e = simulated();
            e.scc_changed = x.scc_changed;
            e.problems
                .extend(x.problems.into_iter().map(|(c, m)| (c, at, m)));
            e
        }
        None => simulated(),
    }
}
