//! Rewrite, verify, and take out what the verifier rejects: a function whose instrumented code
//! the verifier (crate `sqtt-verify`) rejects is left alone in a new rewrite of the object
//! (not instrumented, moved as one block: `sqtt_rewrite::verbatim`), with the verifier's
//! finding as its reason, so one function costs only itself (issue 29 item 3). The object is
//! lost (written unchanged, failed closed) only when a finding names no function, names one
//! already left alone, or the rounds run out; the rewriter's own fail-closed reasons stay as
//! they are. Before the object is lost, when code moved, it is rewritten once more with `.text`
//! kept in place (every function left alone stays at its address). Never is an output the
//! verifier rejects returned.
//!
//! A kernel with `F:` scopes of in-kernel subroutines (issue 37 item 3) is first rewritten
//! again without those scopes (`Options::unscoped_subroutines`, a report note naming the
//! finding), keeping its other markers; only if the verifier rejects it again is it left alone.

use anyhow::{Context, Result};
use sqtt_rewrite::config::Options;
use sqtt_rewrite::rewrite::{rewrite_leaving_alone, Report, Status};
use sqtt_rewrite::timings::{Stage, Timings};
use sqtt_verify::VerifyError;
use std::collections::BTreeMap;

/// Most rewrites of one object: the first, then one per round of functions the verifier named.
pub const MAX_ROUNDS: usize = 4;

/// One code object after rewriting and verification.
#[derive(Debug)]
pub struct Patched {
    /// Bytes to write: the verified rewrite, or the input unchanged.
    pub bytes: Vec<u8>,
    /// What was done (status `failed_closed` with the findings when verification rejected it).
    pub report: Report,
    /// True when the rewrite was produced but rejected by the verifier (an internal error).
    pub verifier_rejected: bool,
}

/// The verifier's answer for (original, rewritten) bytes.
pub type Verify<'a> = &'a dyn Fn(&[u8], &[u8]) -> Result<sqtt_verify::Report, VerifyError>;

/// Rewrites `input` and verifies it with `verify` (the real verifier outside tests), leaving
/// alone the functions the findings name and rewriting again, at most [`MAX_ROUNDS`] times.
/// Errors: bad input (named by `name`), including an input that does not verify against itself
/// (a rejection caused by the input, not by us).
pub fn rewrite_verified(
    name: &str,
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
    verify: Verify,
) -> Result<Patched> {
    let mut leave: BTreeMap<u64, String> = BTreeMap::new();
    let mut opts = opts.clone();
    // Notes on why a round rewrote differently (subroutine scopes dropped, `.text` kept in
    // place), carried into every later report.
    let mut retry_notes = Vec::new();
    let mut input_checked = false;
    for round in 1.. {
        let outcome =
            rewrite_leaving_alone(input, &opts, &leave, t).with_context(|| name.to_string())?;
        let mut report = outcome.report;
        report.notes.extend(retry_notes.iter().cloned());
        let Some(out) = outcome.bytes else {
            return Ok(Patched {
                bytes: input.to_vec(),
                report,
                verifier_rejected: false,
            });
        };
        t.begin(Stage::Verify);
        let (findings, named) = match verify(input, &out) {
            Ok(v) => {
                // Inconsistencies of the input the rewrite kept as they are: warnings, each
                // once (the verifier may meet one on several paths).
                for w in v.warnings.iter().map(input_warning) {
                    if !report.notes.contains(&w) {
                        report.notes.push(w);
                    }
                }
                (
                    v.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
                    attribute(&v, &leave),
                )
            }
            Err(e) => (vec![format!("verifier error: {e}")], None),
        };
        if findings.is_empty() {
            return Ok(Patched {
                bytes: out,
                report,
                verifier_rejected: false,
            });
        }
        // A rejection is our bug unless the input itself is inconsistent: an input whose fields
        // contradict each other (symbols vs sections, ...) does not even verify against itself,
        // and is reported as bad input. An inconsistency in the code of one function (a long
        // branch aimed into the middle of an instruction) costs only that function: it is left
        // alone below, and the verifier keeps its own finding as a warning then.
        if !input_checked {
            input_checked = true;
            let identity: Vec<String> = match verify(input, input) {
                Ok(v) => v
                    .findings
                    .iter()
                    .filter(|f| f.function.is_none() || !f.check.is_about_code())
                    .map(|f| f.to_string())
                    .collect(),
                Err(e) => vec![e.to_string()],
            };
            if let Some(first) = identity.first() {
                anyhow::bail!(
                    "{name}: inconsistent code object: it does not verify against itself ({} finding(s); first: {first})",
                    identity.len()
                );
            }
        }
        match named {
            Some(more) if round < MAX_ROUNDS => {
                for (entry, why) in more {
                    if has_subroutine_scopes(&report, entry)
                        && opts.unscoped_subroutines.insert(entry)
                    {
                        let kernel = report.functions.iter().find(|g| g.address == entry);
                        let kernel = kernel.map(|g| g.name.as_str()).unwrap_or_default();
                        retry_notes.push(format!(
                            "{kernel}: in-kernel subroutines left without F: scopes: {why}"
                        ));
                    } else {
                        leave.insert(entry, why);
                    }
                }
            }
            // The rejection persists in functions left alone (or the rounds ran out) while code
            // moved: rewrite once more with `.text` kept in place, where every function left
            // alone runs from its original address and nothing in it needs re-aiming (BOLT's
            // rule for code it does not understand); the object is lost only if that fails too.
            _ if !opts.keep_text => {
                opts.keep_text = true;
                retry_notes.push(format!(
                    ".text kept in place: with code moved, the verifier rejected the rewrite ({})",
                    findings.first().map_or("", String::as_str)
                ));
            }
            _ => {
                report.status = Status::FailedClosed;
                // Nothing of the rewrite is written: no site counts as instrumented (the sites
                // found stay).
                for c in &mut report.coverage {
                    c.instrumented = 0;
                }
                report.reasons = findings
                    .into_iter()
                    .map(|f| format!("verifier: {f}"))
                    .collect();
                return Ok(Patched {
                    bytes: input.to_vec(),
                    report,
                    verifier_rejected: true,
                });
            }
        }
    }
    unreachable!("the rounds end by returning")
}

/// Whether kernel `entry` (original address, bytes) got `F:` scopes of in-kernel subroutines
/// in the rewrite `report` describes (a kernel's function entry markers are theirs).
fn has_subroutine_scopes(report: &Report, entry: u64) -> bool {
    report.functions.iter().any(|g| {
        g.kernel && g.address == entry && g.sites.get("function_entry").is_some_and(|&n| n > 0)
    })
}

/// The report note for a verifier warning: an inconsistency the input already had (a metadata
/// note field that disagrees with its kernel descriptor), kept exactly as it is.
pub fn input_warning(w: &sqtt_verify::Finding) -> String {
    format!("{INPUT_WARNING}{w}")
}

/// How every [`input_warning`] note starts.
pub const INPUT_WARNING: &str = "the input is inconsistent (kept as it is): ";

/// The functions the findings of `v` name, by original entry address (bytes), each with its
/// first finding as the reason; `None` when some finding names no function of the original, or
/// one already in `leave` (leaving it alone did not help: the rejection is not its own).
fn attribute(
    v: &sqtt_verify::Report,
    leave: &BTreeMap<u64, String>,
) -> Option<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for f in &v.findings {
        let name = f.function.as_deref()?;
        // Of the functions of that name, the last one starting at or before the finding's
        // original address (local symbols may repeat a name), else the first.
        let same: Vec<u64> = v
            .functions
            .iter()
            .filter(|g| g.name == name)
            .map(|g| g.original_address)
            .collect();
        let entry = f
            .original_address
            .and_then(|a| same.iter().copied().filter(|&e| e <= a).max())
            .or_else(|| same.first().copied())?;
        if leave.contains_key(&entry) {
            return None;
        }
        out.entry(entry)
            .or_insert_with(|| format!("the verifier rejected its instrumented code: {f}"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqtt_rewrite::config::FunctionThreshold;

    fn fixture(rel: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(rel);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn opts() -> Options {
        Options {
            functions: FunctionThreshold::Count(1),
            barriers: true,
            ..Options::default()
        }
    }

    /// The real verifier, plus one finding in `victim` whenever the rewrite inserted code there:
    /// a rejection of one function, as the real rules give for a hazard the rewriter missed.
    fn rejecting<'a>(
        victim: &'a str,
    ) -> impl Fn(&[u8], &[u8]) -> Result<sqtt_verify::Report, VerifyError> + 'a {
        move |o, n| {
            let mut r = sqtt_verify::verify(o, n)?;
            let hit = r
                .functions
                .iter()
                .find(|f| f.name == victim && f.inserted_instructions > 0)
                .map(|f| f.original_address);
            if let Some(a) = hit {
                r.findings.push(sqtt_verify::Finding {
                    check: sqtt_verify::Check::Hazard,
                    function: Some(victim.to_string()),
                    original_address: Some(a),
                    new_address: None,
                    message: "test rejection".into(),
                });
            }
            Ok(r)
        }
    }

    #[test]
    fn a_rejected_function_is_left_alone_and_the_rest_is_instrumented() {
        let input = fixture("objects/gfx942__calls__O3.co");
        // Every function that gets code without the test rejection.
        let plain = rewrite_verified("t", &input, &opts(), &mut Timings::off(), &|o, n| {
            sqtt_verify::verify(o, n)
        })
        .unwrap();
        let instrumented: Vec<String> = plain
            .report
            .functions
            .iter()
            .filter(|f| f.inserted_instructions > 0)
            .map(|f| f.name.clone())
            .collect();
        assert!(instrumented.len() >= 3, "{instrumented:?}");
        let victim = instrumented
            .iter()
            .find(|n| {
                plain
                    .report
                    .functions
                    .iter()
                    .any(|f| &f.name == *n && !f.kernel)
            })
            .expect("an instrumented device function")
            .clone();
        let verify = rejecting(&victim);
        let p = rewrite_verified("t", &input, &opts(), &mut Timings::off(), &verify).unwrap();
        assert!(!p.verifier_rejected, "{:?}", p.report.reasons);
        assert_eq!(p.report.status, Status::Instrumented);
        let la: Vec<_> = p.report.left_alone.iter().map(|l| &l.name).collect();
        assert_eq!(la, vec![&victim]);
        let why = &p.report.left_alone[0].why;
        assert!(
            why.contains("the verifier rejected its instrumented code: [hazard]"),
            "{why}"
        );
        assert!(why.contains("test rejection"), "{why}");
        // Every other function keeps its code; the victim has none.
        for f in &p.report.functions {
            let want = f.name != victim && instrumented.contains(&f.name);
            assert_eq!(f.inserted_instructions > 0, want, "{}", f.name);
        }
        // Its sites are skipped with the verifier's reason.
        let sk: Vec<_> = p
            .report
            .skipped
            .iter()
            .filter(|s| s.function == victim)
            .collect();
        assert!(!sk.is_empty());
        assert!(sk.iter().all(|s| s
            .why
            .starts_with("function left alone (copied verbatim): at ")
            && s.why.contains("test rejection")));
        // The output passes the real verifier (and the test one).
        let v = sqtt_verify::verify(&input, &p.bytes).unwrap();
        assert!(v.findings.is_empty(), "{:?}", v.findings);
        assert!(verify(&input, &p.bytes).unwrap().findings.is_empty());
    }

    #[test]
    fn a_rejection_naming_no_function_fails_closed() {
        let input = fixture("objects/gfx942__calls__O3.co");
        let verify = |o: &[u8], n: &[u8]| {
            let mut r = sqtt_verify::verify(o, n)?;
            if o != n {
                r.findings.push(sqtt_verify::Finding {
                    check: sqtt_verify::Check::Sections,
                    function: None,
                    original_address: None,
                    new_address: None,
                    message: "test rejection".into(),
                });
            }
            Ok(r)
        };
        let p = rewrite_verified("t", &input, &opts(), &mut Timings::off(), &verify).unwrap();
        assert!(p.verifier_rejected);
        assert_eq!(p.bytes, input);
        assert_eq!(p.report.status, Status::FailedClosed);
        assert_eq!(
            p.report.reasons,
            vec!["verifier: [sections]: test rejection".to_string()]
        );
    }

    /// A kernel whose in-kernel subroutine scopes the verifier rejects keeps its other markers:
    /// rewritten again without those scopes (a note names the finding), not left alone. The
    /// test verifier rejects `tl_calltable` of the Tensile fixture whenever the funcmap names
    /// one of its subroutine labels (one more occurrence of the label's name than the input has).
    #[test]
    fn rejected_subroutine_scopes_are_dropped_not_the_kernel() {
        let input = fixture("tensile/gfx1201__tensile__O3.co");
        let label = b"label_Activation_None_VW1_0";
        let count = |b: &[u8]| b.windows(label.len()).filter(|w| w == label).count();
        let verify = |o: &[u8], n: &[u8]| {
            let mut r = sqtt_verify::verify(o, n)?;
            if count(n) > count(o) {
                let k = r.functions.iter().find(|f| f.name == "tl_calltable");
                let a = k.expect("tl_calltable").original_address;
                r.findings.push(sqtt_verify::Finding {
                    check: sqtt_verify::Check::Markers,
                    function: Some("tl_calltable".into()),
                    original_address: Some(a),
                    new_address: None,
                    message: "test rejection".into(),
                });
            }
            Ok(r)
        };
        let p = rewrite_verified("t", &input, &opts(), &mut Timings::off(), &verify).unwrap();
        assert!(!p.verifier_rejected, "{:?}", p.report.reasons);
        assert!(p.report.left_alone.is_empty(), "{:?}", p.report.left_alone);
        let k = p.report.functions.iter().find(|f| f.name == "tl_calltable");
        let sites = &k.expect("tl_calltable instrumented").sites;
        assert_eq!(sites.get("function_entry"), None, "{sites:?}");
        assert!(
            sites.get("barrier_pair").is_some_and(|&n| n > 0),
            "{sites:?}"
        );
        assert!(
            p.report.notes.iter().any(|n| n.starts_with(
                "tl_calltable: in-kernel subroutines left without F: scopes: the verifier rejected"
            )),
            "{:?}",
            p.report.notes
        );
        assert!(sqtt_verify::verify(&input, &p.bytes)
            .unwrap()
            .findings
            .is_empty());
    }
}
