//! `F:` scopes of in-kernel subroutines under `--functions` (issue 37, item 3): the bodies
//! reached through a call table ([`crate::calltable`]: `s_swappc_b64 s[r:r+1], s[p:p+1]`
//! calls a label inside the kernel, the body returns with `s_setpc_b64 s[r:r+1]`). Each one
//! is entered at its entry (a marker in front of the label, run by every call) and left in
//! front of each returning `s_setpc_b64`, like a device function (spec "Function
//! instrumentation": enter `(id << 2) | 2` at the entry, exit `0x1` before each return); its
//! `F:` row is named by the local label at the entry (hipBLASLt: `label_Activation_Gelu_VW1`)
//! or, without one, `KERNEL+0xOFFSET` (original offset of the entry in the kernel, bytes).
//!
//! A subroutine gets a scope only when its scope is provably balanced: its entry is reached
//! only by the calls (no branch or fall-through into it, not the kernel's first instruction),
//! and every path from it, stepping over nested in-kernel calls whose subroutines qualify,
//! ends at one of its returns (none ends the program, leaves the kernel or jumps elsewhere).

use crate::analysis::{FnSpec, Func};
use crate::config::FunctionThreshold;
use amdgpu_isa::Flow;
use std::collections::{BTreeMap, BTreeSet};

/// One subroutine whose scope is balanced (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subroutine {
    /// Instruction index of its entry.
    pub entry: usize,
    /// Instruction indices of its returning `s_setpc_b64`s, ascending.
    pub returns: Vec<usize>,
    /// Its body (instructions reached from the entry up to its returns, nested subroutines
    /// excluded), sized as [`crate::plan::function_size`] sizes a function.
    pub size: u64,
}

/// The in-kernel calls of `f` (instruction index → subroutine entries).
fn calls(f: &Func) -> BTreeMap<usize, &[usize]> {
    f.more_succs
        .iter()
        .filter(|(&i, _)| f.insts.flow(i) == Flow::Call)
        .map(|(&i, t)| (i, t.as_slice()))
        .collect()
}

/// What [`body`] finds from one subroutine entry.
struct Body {
    /// The instructions reached (nested subroutines excluded).
    seen: BTreeSet<usize>,
    /// Its returning `s_setpc_b64`s.
    returns: BTreeSet<usize>,
    /// The entries of the subroutines it calls.
    nested: BTreeSet<usize>,
}

/// Walks the body from `entry`; `None` when a path ends elsewhere than at a return.
fn body(f: &Func, calls: &BTreeMap<usize, &[usize]>, entry: usize) -> Option<Body> {
    let (mut seen, mut rets, mut nested) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut stack = vec![entry];
    while let Some(i) = stack.pop() {
        if i >= f.insts.len() || !seen.insert(i) {
            continue;
        }
        if f.sub_returns.contains(&i) {
            rets.insert(i);
            continue;
        }
        let next: Vec<usize> = match calls.get(&i) {
            Some(t) => {
                nested.extend(t.iter().copied());
                vec![i + 1]
            }
            None => f.successors(i).collect(),
        };
        // An exit of the kernel (s_endpgm, an unresolved jump, a call falling off the end).
        if next.is_empty() || next.iter().any(|&s| s >= f.insts.len()) {
            return None;
        }
        stack.extend(next);
    }
    if rets.is_empty() {
        return None;
    }
    Some(Body {
        seen,
        returns: rets,
        nested,
    })
}

/// The subroutines of kernel `f` whose scope is balanced, sized by `mode`.
pub(crate) fn balanced(f: &Func, mode: FunctionThreshold) -> Vec<Subroutine> {
    let calls = calls(f);
    if calls.is_empty() || f.spec.kernel.is_none() {
        return Vec::new();
    }
    // Entries with a predecessor other than a call that targets them.
    let mut entered_otherwise = BTreeSet::new();
    for i in 0..f.insts.len() {
        entered_otherwise.extend(f.succs[i].iter());
        if !calls.contains_key(&i) {
            entered_otherwise.extend(f.more_succs.get(&i).into_iter().flatten().copied());
        }
    }
    let entries: BTreeSet<usize> = calls.values().flat_map(|t| t.iter().copied()).collect();
    let mut found: BTreeMap<usize, Body> = entries
        .iter()
        .filter(|&&e| e != 0 && !entered_otherwise.contains(&e))
        .filter_map(|&e| Some((e, body(f, &calls, e)?)))
        .collect();
    // A body that calls a subroutine without a balanced scope has none either (to a fixpoint).
    loop {
        let drop: Vec<usize> = found
            .iter()
            .filter(|(_, b)| b.nested.iter().any(|n| !found.contains_key(n)))
            .map(|(&e, _)| e)
            .collect();
        if drop.is_empty() {
            break;
        }
        for e in drop {
            found.remove(&e);
        }
    }
    let counted = |i: usize| {
        let inst = f.insts.get(i);
        match mode {
            FunctionThreshold::Off => 0,
            FunctionThreshold::Count(_) => u64::from(!matches!(
                inst.special(),
                amdgpu_isa::Special::Nop | amdgpu_isa::Special::CodeEnd
            )),
            FunctionThreshold::Cost(_) => crate::plan::cost(&inst),
        }
    };
    found
        .into_iter()
        .map(|(entry, b)| Subroutine {
            entry,
            returns: b.returns.into_iter().collect(),
            size: b.seen.iter().map(|&i| counted(i)).sum(),
        })
        .collect()
}

/// The names `F:` rows of in-kernel subroutines take from local labels: for each address, the
/// lexicographically first local label (`STT_NOTYPE` in an executable section) of the code
/// object at it whose name a funcmap row can carry (no `@`, `:` or line break: spec "Funcmap
/// format"). Built once per code object (a Tensile object holds thousands of labels).
pub(crate) struct LabelNames<'a>(BTreeMap<u64, &'a str>);

impl<'a> LabelNames<'a> {
    /// The row-worthy labels of `co`, by address (bytes).
    pub(crate) fn new(co: &'a hsaco::CodeObject) -> Self {
        let mut by_addr: BTreeMap<u64, &'a str> = BTreeMap::new();
        let usable = co
            .symbols
            .iter()
            .filter(|s| s.kind == hsaco::SymbolKind::Label)
            .map(|s| (s.symbol.value, s.symbol.name.as_str()))
            .filter(|(_, n)| !n.is_empty() && !n.contains(['@', ':', '\n', '\r', '\0']));
        for (addr, n) in usable {
            by_addr
                .entry(addr)
                .and_modify(|best| *best = (*best).min(n))
                .or_insert(n);
        }
        LabelNames(by_addr)
    }

    /// The `F:` row name of the subroutine at original address `addr` of kernel `spec`: its
    /// label (as [`LabelNames::new`] chooses), else `KERNEL+0xOFFSET` with the entry's offset
    /// from the kernel's start (bytes).
    pub(crate) fn name(&self, spec: &FnSpec, addr: u64) -> String {
        self.0.get(&addr).map_or_else(
            || format!("{}+{:#x}", spec.name, addr.wrapping_sub(spec.start)),
            |n| n.to_string(),
        )
    }
}
