//! Findings the input already has: the original verified as its own rewrite (nothing moved,
//! nothing inserted) still breaks a rule — a Tensile long branch whose literal aims into the
//! middle of an instruction, say. Such a function can only be copied as it is; where the
//! rewrite did exactly that (no inserted instruction in it) and the same finding comes back,
//! it is the input's inconsistency, kept as it is, and a warning rather than a violation
//! (issue 37 item 5: "what the input says is the input's business").

use crate::{Finding, Report};

/// Moves every finding of `report` that is inherited from the original into its warnings: the
/// finding is about code ([`crate::Check::is_about_code`]), names a function and an original
/// address, that function has no inserted instruction, and `own` (the
/// original's findings against itself) holds a finding with the same check, function and
/// original address. Messages are not compared: they may name rewritten addresses.
pub(crate) fn move_to_warnings(report: &mut Report, own: &[Finding]) {
    let findings = std::mem::take(&mut report.findings);
    for f in findings {
        if is_inherited(report, own, &f) {
            report.warnings.push(f);
        } else {
            report.findings.push(f);
        }
    }
}

fn is_inherited(report: &Report, own: &[Finding], f: &Finding) -> bool {
    let Some(name) = f.function.as_deref().filter(|_| f.check.is_about_code()) else {
        return false;
    };
    // Only a finding at an original address can be matched to the original's own.
    let Some(at) = f.original_address else {
        return false;
    };
    // The function of that name the finding is in: the last one starting at or before that
    // address (local symbols may repeat a name).
    let func = report
        .functions
        .iter()
        .filter(|g| g.name == name && g.original_address <= at)
        .max_by_key(|g| g.original_address);
    func.is_some_and(|g| g.inserted_instructions == 0)
        && own.iter().any(|g| {
            g.check == f.check
                && g.function == f.function
                && g.original_address == f.original_address
        })
}
