//! The human summary of a batch and of its regressions (stdout).

use super::baseline::Regression;
use super::report::{reason_class, totals_coverage, BatchReport};
use crate::summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub(super) fn map_text(m: &BTreeMap<String, u32>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// How many not-processed files [`render`] lists by name (the JSON report lists all).
pub(super) const NOT_INPUTS_SHOWN: usize = 10;

/// The human report (stdout): one line per file, object, kernel and device function (long names
/// shortened), the object's skipped sites grouped by kind with at most three examples, then
/// totals (skipped sites by kind).
pub fn render(r: &BatchReport) -> String {
    let mut s = String::new();
    for f in &r.files {
        let time = f.time_ms.map(|t| format!(" ({t} ms)")).unwrap_or_default();
        let _ = writeln!(
            s,
            "{} [{}]{time}{}",
            f.path,
            if f.kind.is_empty() { "?" } else { &f.kind },
            if f.not_written {
                " (not written: --strict)"
            } else {
                ""
            }
        );
        if let Some(e) = &f.error {
            let _ = writeln!(s, "  error: {e}");
        }
        for o in &f.objects {
            let entry = if o.entry.is_empty() {
                String::new()
            } else {
                format!("{} ", o.entry)
            };
            let _ = writeln!(
                s,
                "  {entry}{} {}: verifier {}, .text {} -> {} bytes",
                if o.target.is_empty() { "?" } else { &o.target },
                o.status,
                o.verifier,
                o.text_bytes_before,
                o.text_bytes_after
            );
            s += &summary::reasons("    ", "reason", &o.reasons, reason_class);
            for n in &o.notes {
                let _ = writeln!(s, "    note: {}", summary::readable(n));
            }
            if !o.failed_closed_sites.is_empty() {
                let _ = writeln!(
                    s,
                    "    not instrumented (failed closed): {}",
                    map_text(&o.failed_closed_sites)
                );
            }
            for k in &o.kernels {
                let _ = writeln!(
                    s,
                    "    kernel {}: {}; sites {}; +{} instructions (+{} reachable), +{} bytes; wave{} vgprs {}{} occupancy {}->{}",
                    summary::short_name(&k.name),
                    k.status,
                    map_text(&k.sites),
                    k.inserted_instructions,
                    k.inserted_instructions_reachable,
                    k.inserted_bytes,
                    opt(k.wave_size),
                    opt(k.vgprs),
                    // gfx10+ descriptors allocate no SGPRs: nothing to show.
                    match (k.sgprs_before, k.sgprs_after) {
                        (Some(b), Some(a)) => format!(" sgprs {b}->{a}"),
                        _ => String::new(),
                    },
                    opt(k.occupancy_before),
                    opt(k.occupancy_after)
                );
            }
            for fr in &o.functions {
                let _ = writeln!(
                    s,
                    "    function {}: sites {}; +{} instructions, +{} bytes",
                    summary::short_name(&fr.name),
                    map_text(&fr.sites),
                    fr.inserted_instructions,
                    fr.inserted_bytes
                );
            }
            // Skipped sites of the whole object, by kind: each kernel or function named once,
            // at most three examples per kind (the JSON report has every row and reason).
            let mut g = summary::Groups::default();
            let rows = o.kernels.iter().map(|k| (&k.name, &k.skipped));
            for (name, skipped) in rows.chain(o.functions.iter().map(|f| (&f.name, &f.skipped))) {
                for (key, &n) in skipped {
                    let (site, why) = key.split_once(": ").unwrap_or(("", key));
                    g.add(why, site, name, String::new(), u64::from(n));
                }
            }
            if !g.is_empty() {
                let _ = writeln!(s, "    skipped: {} site(s)", g.total());
                s += &g.render("      ", true);
            }
        }
    }
    let t = &r.totals;
    let time = t
        .time_ms
        .map(|ms| format!(" in {:.1} s", ms as f64 / 1000.0))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "total: {} files ({} with input errors){time}",
        t.files, t.file_errors
    );
    if !r.not_inputs.is_empty() {
        let _ = writeln!(
            s,
            "  not inputs: {} file(s) found by the walk were not processed",
            r.not_inputs.len()
        );
        for n in r.not_inputs.iter().take(NOT_INPUTS_SHOWN) {
            let _ = writeln!(s, "    {n}");
        }
        if r.not_inputs.len() > NOT_INPUTS_SHOWN {
            let _ = writeln!(s, "    ... (all of them in --report-json)");
        }
    }
    let _ = writeln!(s, "  code objects: {}", map_text(&t.objects));
    let _ = writeln!(s, "  kernels: {}", map_text(&t.kernels));
    let _ = writeln!(s, "  sites: {}", map_text(&t.sites));
    let cov = totals_coverage(t);
    let uncounted = match t.failed_closed_uncounted {
        0 => String::new(),
        1 => "; not counted: 1 code object that failed closed before its sites were found".into(),
        n => format!(
            "; not counted: {n} code objects that failed closed before their sites were found"
        ),
    };
    if !cov.is_empty() || !uncounted.is_empty() {
        let text = match crate::cmd_patch::coverage_text(&cov) {
            t if t.is_empty() => "-".to_string(),
            t => t,
        };
        let _ = writeln!(s, "  coverage: {text}{uncounted}");
    }
    let _ = writeln!(
        s,
        "  inserted: {} instructions, {} bytes",
        t.inserted_instructions, t.inserted_bytes
    );
    let _ = writeln!(s, "  verifier rejected: {}", t.verifier_rejected);
    let mut g = summary::Groups::default();
    for (key, &n) in &t.skipped {
        let (site, why) = key.split_once(": ").unwrap_or(("", key));
        g.add(why, site, "", String::new(), u64::from(n));
    }
    s += &g
        .render("", false)
        .lines()
        .map(|l| format!("  skipped {l}\n"))
        .collect::<String>();
    for (why, n) in &t.failed_closed_reasons {
        let _ = writeln!(s, "  failed closed {n}x {}", summary::readable(why));
    }
    for (why, n) in &t.input_errors {
        let _ = writeln!(s, "  input error {n}x {}", summary::readable(why));
    }
    s
}

/// The readable diff against a baseline: a header line and one line per regression, sorted.
pub fn render_regressions(baseline: &str, regs: &[Regression]) -> String {
    let mut s = format!("regressions against baseline {baseline}: {}\n", regs.len());
    for r in regs {
        let _ = writeln!(s, "  {r}");
    }
    s
}

// ---------------------------------------------------------------- comparison
