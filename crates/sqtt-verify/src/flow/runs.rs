//! [`Check::M0`], [`Check::Scc`]: every entry into every inserted run (and landing block) is
//! executed or simulated ([`super::effect`]); M0 and SCC are kept where the original reads them,
//! and the run's marker words are checked ([`super::markers`]).

use std::collections::BTreeMap;

use super::cfg::Cfg;
use super::effect::{entry_effect, entry_key, run_from, Code, Effect, Facts};
use super::liveness::{m0_constants, m0_liveness, scc_liveness, Val};
use super::markers::check_marker;
use super::sgprs;
use super::sites::LoopEnter;
use super::{all_legacy, region, MarkerCounts};
use crate::program::insn::reads_m0;
use crate::program::{Func, FuncmapInfo, Program};
use crate::{Check, Finding};

/// What [`check_runs`] found of one function's inserted code, for the whole-function checks
/// that follow it ([`super::markers::check_f_entry`], [`super::balance::check_balance`],
/// [`super::sites::check_loop_enters`]).
pub(super) enum Ran {
    /// The function has no original instruction: nothing to check.
    Empty,
    /// Nothing was inserted: every run is empty.
    NothingInserted,
    /// The runs' effects.
    Runs {
        /// Effects of the entries into runs that emit markers, by (original index, entry).
        effects: BTreeMap<(usize, Option<u64>), Effect>,
        /// Effects of the landing blocks, by start address.
        landed: BTreeMap<u64, Effect>,
        /// Loop-enter markers seen.
        loops: Vec<LoopEnter>,
    },
}

/// Executes or simulates every entry into every inserted run and landing block of `f` and
/// checks each effect ([`check_effect`]). Returns the marker counts and what the
/// whole-function checks need ([`Ran`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn check_runs(
    p: &Program,
    f: &Func,
    legacy: &[bool],
    cfg: &Cfg,
    changeable: &sgprs::Masks,
    fm: &FuncmapInfo,
    env: &region::Env,
    findings: &mut Vec<Finding>,
) -> (MarkerCounts, Ran) {
    let mut counts = MarkerCounts::default();
    let n = f.orig.len();
    if n == 0 {
        return (counts, Ran::Empty);
    }
    if f.inserted.is_empty() {
        return (counts, Ran::NothingInserted);
    }
    let live = m0_liveness(f, cfg);
    let scc_live = scc_liveness(f, cfg);
    let consts = m0_constants(f, cfg);
    // Entries into each run: whole run (entry, fall-through) and each branch landing, as
    // sorted distinct (instruction, landing) pairs (one flat list: a set per instruction cost
    // an allocation per instruction). Only instructions with a run in front have entries to
    // check (the loop below skips the others), so only their edges are listed and sorted.
    let mut entries: Vec<(usize, Option<u64>)> = vec![(0, None)];
    for (s, land) in cfg.edges() {
        if !f.run(s).is_empty() {
            entries.push((s, entry_key(f, s, land)));
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let facts = Facts {
        live: &live,
        scc_live: &scc_live,
        consts: &consts,
        fm,
        layout: env.layout,
    };
    let mut effects: BTreeMap<(usize, Option<u64>), Effect> = BTreeMap::new();
    let mut loops = Vec::new();
    let mut next = 0;
    for k in 0..n {
        let first = next;
        while entries.get(next).is_some_and(|e| e.0 == k) {
            next += 1;
        }
        let es = entries[first..next].iter().map(|e| e.1);
        let o = &f.orig[k];
        // No run in front: every entry executes nothing (`run_from` gives empty code, whose
        // effect changes nothing and emits nothing), so there is nothing to check or record.
        if f.run(k).is_empty() {
            continue;
        }
        // The run as fall-through enters it (a leading long-branch island is not part of it).
        let whole = run_from(p, f, k, None);
        let code = Code::new(
            f,
            whole,
            f.new_address(o),
            legacy.get(k).copied().unwrap_or(true),
            changeable.get(k).unwrap_or(0),
        )
        .with_m0(facts.consts[k]);
        for land in es {
            let e = entry_effect(p, env, f, &code, run_from(p, f, k, land), land.is_none());
            check_effect(
                f,
                k,
                &e,
                land.is_none(),
                code.legacy,
                &facts,
                &mut counts,
                &mut loops,
                findings,
            );
            // Only runs with markers matter to the scope checks (a missing effect is an empty
            // one); one map entry per original instruction cost time and memory.
            if !e.markers.is_empty() {
                effects.insert((k, land), e);
            }
        }
    }
    // Landing blocks: their marker code runs on the branch edge only, before the target's run.
    let mut landed: BTreeMap<u64, Effect> = BTreeMap::new();
    for (&(_, s), &start) in &cfg.via {
        let Some(b) = p
            .landings
            .get(&start)
            .filter(|_| !landed.contains_key(&start))
        else {
            continue;
        };
        let lo = f.inserted.partition_point(|x| x.addr < start);
        let hi = f.inserted.partition_point(|x| x.addr < b.body_end);
        let body = &f.inserted[lo..hi];
        // The landing block runs on one edge into `s`: a constant M0 at `s` (the join over
        // every edge) is that constant on this edge too.
        let code = Code::new(
            f,
            body,
            Some(b.body_end),
            all_legacy(&f.inserted_class[lo..hi]),
            changeable.get(s).unwrap_or(0),
        )
        .with_m0(facts.consts[s]);
        let e = entry_effect(p, env, f, &code, body, true);
        check_effect(
            f,
            s,
            &e,
            true,
            code.legacy,
            &facts,
            &mut counts,
            &mut loops,
            findings,
        );
        landed.insert(start, e);
    }
    (
        counts,
        Ran::Runs {
            effects,
            landed,
            loops,
        },
    )
}

/// Checks the effect of inserted code that runs just before original `k`: SCC and M0 kept where
/// live, no M0 write right before an M0 reader, its problems, and (`whole`: entered whole) its
/// marker words.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_effect(
    f: &Func,
    k: usize,
    e: &Effect,
    whole: bool,
    legacy: bool,
    facts: &Facts,
    counts: &mut MarkerCounts,
    loops: &mut Vec<LoopEnter>,
    findings: &mut Vec<Finding>,
) {
    let o = &f.orig[k];
    let na = f.new_address(o);
    if e.scc_changed && facts.scc_live[k] {
        findings.push(f.finding(
            Check::Scc,
            Some(o.addr),
            na,
            "SCC is live here and the inserted run changes it".into(),
        ));
    }
    let clobbered = match e.m0 {
        Val::Orig => false,
        Val::Const(c) => facts.live[k] && facts.consts[k] != Some(Val::Const(c)),
        Val::Unknown => facts.live[k],
    };
    if clobbered {
        findings.push(f.finding(
            Check::M0,
            Some(o.addr),
            na,
            format!("M0 is live here and the inserted run leaves it {:?}", e.m0),
        ));
    }
    let oi = f.inst(o);
    if e.last_writes_m0 && reads_m0(&oi) {
        findings.push(f.finding(
            Check::M0,
            Some(o.addr),
            na,
            format!(
                "M0 written directly before {}, which reads it (needs s_nop 0)",
                oi.mnemonic()
            ),
        ));
    }
    for (c, a, msg) in &e.problems {
        if whole || *c != Check::Markers || !legacy {
            findings.push(f.finding(*c, Some(o.addr), Some(*a), msg.clone()));
        }
    }
    if whole {
        for &(a, v) in &e.markers {
            check_marker(
                f,
                k,
                (a, facts.layout.strip(v)),
                facts.fm,
                counts,
                loops,
                findings,
            );
        }
    }
}
