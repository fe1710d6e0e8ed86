//! Calls to device functions that never return (issue 29): a function whose last instruction
//! is a call falls off its end only if the callee returns. Compilers end code that way when the
//! callee cannot return: ggml's compiled-out kernels call `no_device_code` (which prints and
//! ends in `s_trap 2`) and end there, `__assert_fail` callers likewise. Such a call ends the
//! function like `s_endpgm`, so the function is instrumented instead of left alone.
//!
//! A device function never returns when no path from its entry reaches a return: it has no
//! return (`s_setpc_b64` through the return address), every tail call goes to a function that
//! never returns, and when execution would fall off its end after a last call, that callee never
//! returns either. Anything else the analysis could not explain (any other problem) counts as
//! "may return". Computed as the greatest fixed point over the call graph (functions that only
//! call each other in a cycle never return: the recursion never ends). Kernels are never callees
//! (they are entered by a dispatch), so they are not candidates.

use crate::analysis::{Callee, Exit, Func, FALLS_OFF_AFTER_CALL};

/// The callee of `f`'s last instruction when `f` has the [`FALLS_OFF_AFTER_CALL`] problem:
/// `Some(Some(g))` for a direct call of function `g`, `Some(None)` for an indirect one, `None`
/// when `f` does not end that way.
fn last_callee(f: &Func) -> Option<Option<usize>> {
    if !f.problems.iter().any(|p| p.why == FALLS_OFF_AFTER_CALL) {
        return None;
    }
    let last = f.insts.len().checked_sub(1)?;
    let callee = f.calls.iter().find(|(i, _)| *i == last).map(|(_, c)| *c);
    Some(match callee {
        Some(Callee::Direct(g)) => Some(g),
        _ => None,
    })
}

/// Per function: whether it provably never returns to its caller (see the module docs).
pub(crate) fn never_returns(funcs: &[Func]) -> Vec<bool> {
    let mut never: Vec<bool> = funcs
        .iter()
        .map(|f| {
            f.spec.kernel.is_none()
                && f.exits.iter().all(|(_, e)| !matches!(e, Exit::Return))
                && f.problems.iter().all(|p| p.why == FALLS_OFF_AFTER_CALL)
        })
        .collect();
    loop {
        let mut changed = false;
        for (fi, f) in funcs.iter().enumerate() {
            if !never[fi] {
                continue;
            }
            let tails = f.exits.iter().all(|(_, e)| match e {
                Exit::TailCall(g) => never[*g],
                Exit::Return => false,
                Exit::EndPgm => true,
            });
            let last = match last_callee(f) {
                None => true,
                Some(Some(g)) => never[g],
                Some(None) => false,
            };
            if !(tails && last) {
                never[fi] = false;
                changed = true;
            }
        }
        if !changed {
            return never;
        }
    }
}

/// Drops the [`FALLS_OFF_AFTER_CALL`] problem of every function whose last call goes to a
/// function that never returns ([`never_returns`]): execution cannot reach its end.
pub(crate) fn accept_calls_that_never_return(funcs: &mut [Func]) {
    let never = never_returns(funcs);
    for f in funcs.iter_mut() {
        if let Some(Some(g)) = last_callee(f) {
            if never[g] {
                f.problems.retain(|p| p.why != FALLS_OFF_AFTER_CALL);
            }
        }
    }
}
