//! One code object end to end: load → decode → analyse → instrument → lay out → encode (the
//! stages: [`crate::pipeline`]), and nothing else: the report and errors it returns live in
//! [`crate::report`] (below the stages, which fill them) and are re-exported here.
//!
//! Fail-closed policy: a function we cannot instrument (undecodable word, unresolved branch or
//! PC-relative sequence, execution falling off its end, indirect jump in a kernel) is left alone
//! and moved as one block when it is movable ([`crate::verbatim`]); when it is not (a word that
//! does not decode), `.text` is kept in place, byte for byte, with every left-alone function in
//! it, and the instrumented functions go to a new executable segment. The report lists every
//! function left alone and every reason. Individual sites that cannot be
//! instrumented safely are skipped and reported.

use crate::config::Options;
use crate::pipeline::{analyse, decode, encode, instrument, lay_out, load, NotLaidOut};
use crate::timings::{Stage, Timings};
use std::collections::BTreeMap;

pub use crate::report::{
    Coverage, FunctionReport, KernelReport, Report, RewriteError, Status, KEPT_TEXT_SECTION,
    PATCH_SECTION,
};

/// Result of [`rewrite`].
#[derive(Debug)]
pub struct Outcome {
    /// New code object bytes (`None`: output must equal the input).
    pub bytes: Option<Vec<u8>>,
    /// What was done.
    pub report: Report,
}

/// Rewrites one code object. `Ok` with `bytes: None` means the output must equal the input
/// (nothing to do, or failed closed: see the report, which carries per-feature coverage).
pub fn rewrite(input: &[u8], opts: &Options) -> Result<Outcome, RewriteError> {
    rewrite_timed(input, opts, &mut Timings::off())
}

/// [`rewrite`], recording the wall time and peak memory of each stage from load to encode in
/// `t` (`--timings`); the stage running on return is left open for the caller to end.
pub fn rewrite_timed(
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
) -> Result<Outcome, RewriteError> {
    rewrite_leaving_alone(input, opts, &BTreeMap::new(), t)
}

/// [`rewrite_timed`] that also leaves alone the functions whose original entry addresses
/// (bytes) are keys of `leave`, with the value as their reason (in the report's `left_alone`
/// list and in the reason of each of their skipped sites), as if the analysis had found that
/// problem in them: they are not instrumented and move as one block ([`crate::verbatim`]). The
/// CLI uses it to take out the functions the verifier rejects. An address that is no function
/// entry is ignored.
///
/// A function with a branch that inserted code pushes out of range and that cannot be relaxed
/// (no SGPR pair free, SCC live at its target) is left alone the same way, and the object is
/// rewritten again without it (at most [`MAX_LAYOUT_ROUNDS`] rewrites): one branch costs its
/// function, not the object (issue 29).
pub fn rewrite_leaving_alone(
    input: &[u8],
    opts: &Options,
    leave: &BTreeMap<u64, String>,
    t: &mut Timings,
) -> Result<Outcome, RewriteError> {
    let mut leave = leave.clone();
    let mut round = 1;
    let mut out = loop {
        match rewrite_object(input, opts, &leave, t)? {
            Attempt::Done(out) => break out,
            Attempt::LeaveAlone(mut report, more) => {
                let before = leave.len();
                for (entry, why) in &more {
                    leave.entry(*entry).or_insert_with(|| why.clone());
                }
                if leave.len() == before || round == MAX_LAYOUT_ROUNDS {
                    report.status = Status::FailedClosed;
                    report.reasons.extend(more.into_values());
                    break unchanged(report);
                }
                round += 1;
            }
        }
    };
    // Moving a function left alone can fail where leaving it at its address cannot (a builder
    // whose literal cannot reach the moved target: session-23 fresh tester). Then `.text` stays
    // in place, as `--keep-text` does, and only the instrumented functions move.
    if out.report.status == Status::FailedClosed
        && !opts.keep_text
        && !out.report.left_alone.is_empty()
    {
        let kept = Options {
            keep_text: true,
            ..opts.clone()
        };
        let mut retry = rewrite_leaving_alone(input, &kept, &leave, t)?;
        if retry.report.status != Status::FailedClosed {
            retry.report.notes.push(format!(
                ".text kept in place: with the functions left alone moved, the object failed closed ({})",
                out.report.reasons.join("; ")
            ));
            return Ok(retry);
        }
    }
    // An object that failed closed after its sites were found keeps the coverage the instrument
    // stage recorded: every site found, none instrumented.
    if out.report.status != Status::FailedClosed || out.report.coverage.is_empty() {
        out.report.coverage = out.report.compute_coverage();
    }
    Ok(out)
}

/// Most rewrites of one object by [`rewrite_leaving_alone`]: the first, then one per round of
/// functions left alone for branches that cannot be relaxed.
pub const MAX_LAYOUT_ROUNDS: usize = 8;

/// One rewrite of an object: done, or the functions (entry address, reason) to leave alone in
/// the next one, with this attempt's report.
enum Attempt {
    Done(Outcome),
    LeaveAlone(Report, BTreeMap<u64, String>),
}

/// The output equals the input; `report` says why (status `nothing_to_do` or `failed_closed`).
fn unchanged(report: Report) -> Outcome {
    Outcome {
        bytes: None,
        report,
    }
}

/// The pipeline: each stage consumes the typed output of the one before it and fills its own
/// fields of the report ([`crate::pipeline`]); a stage returning `None` ends the run with the
/// output equal to the input.
fn rewrite_object(
    input: &[u8],
    opts: &Options,
    leave: &BTreeMap<u64, String>,
    t: &mut Timings,
) -> Result<Attempt, RewriteError> {
    t.begin(Stage::Load);
    let (mut report, loaded) = load(input, opts)?;
    let Some(loaded) = loaded else {
        return Ok(Attempt::Done(unchanged(report)));
    };
    t.begin(Stage::Decode);
    let decoded = decode(loaded);
    t.begin(Stage::Analyse);
    let analysed = analyse(decoded, leave, opts.keep_text, &mut report);
    t.begin(Stage::Instrument);
    let Some(instrumented) = instrument(analysed, opts, &mut report) else {
        return Ok(Attempt::Done(unchanged(report)));
    };
    t.begin(Stage::LayOut);
    let laid_out = match lay_out(instrumented, &mut report) {
        Ok(l) => l,
        Err(NotLaidOut::FailedClosed) => return Ok(Attempt::Done(unchanged(report))),
        Err(NotLaidOut::LeaveAlone(more)) => return Ok(Attempt::LeaveAlone(report, more)),
    };
    t.begin(Stage::Encode);
    let Some(encoded) = encode(laid_out, input, opts, &mut report)? else {
        return Ok(Attempt::Done(unchanged(report)));
    };
    report.status = Status::Instrumented;
    Ok(Attempt::Done(Outcome {
        bytes: Some(encoded.bytes),
        report,
    }))
}
