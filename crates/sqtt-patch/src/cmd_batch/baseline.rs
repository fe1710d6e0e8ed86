//! The baseline: a stored batch report without times, and the regressions of a run against it
//! (lost coverage, new failures, static overhead grown beyond `--max-overhead-growth`).

use super::report::{BatchReport, ObjectReport, SCHEMA};
use anyhow::{bail, Context, Result};
use sqtt_rewrite::config::Options;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A regression class ([`Regression::class`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// A kernel instrumented in the baseline now fails closed (or cannot be read).
    FailedClosed,
    /// A kernel of the baseline is missing.
    LostKernel,
    /// Fewer instrumented sites of some kind.
    Coverage,
    /// Inserted bytes or instructions grew beyond the allowed percentage.
    Overhead,
    /// Fewer waves per SIMD after instrumentation.
    Occupancy,
}

impl Class {
    fn label(self) -> &'static str {
        match self {
            Class::FailedClosed => "failed-closed",
            Class::LostKernel => "lost-kernel",
            Class::Coverage => "coverage",
            Class::Overhead => "overhead",
            Class::Occupancy => "occupancy",
        }
    }
}

/// One difference that makes the batch fail against its baseline.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Regression {
    /// `<path>[ [<entry>]]: kernel|function <name>`.
    pub location: String,
    /// What regressed.
    pub class: Class,
    /// Old and new values, human readable.
    pub detail: String,
}

impl std::fmt::Display for Regression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<13} {}: {}",
            self.class.label(),
            self.location,
            self.detail
        )
    }
}

pub(super) fn read_baseline(p: &Path) -> Result<BatchReport> {
    // Read like an input: a device or pipe is bounded (`/dev/zero` never ends).
    let bytes = crate::sniff::read_input(p)
        .with_context(|| format!("{}: cannot read the baseline", p.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "{}: not a sqtt-patch batch report (not UTF-8 text)",
            p.display()
        )
    })?;
    let b: BatchReport = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a sqtt-patch batch report", p.display()))?;
    if b.schema != SCHEMA {
        bail!(
            "{}: baseline schema {} (this sqtt-patch reads {SCHEMA})",
            p.display(),
            b.schema
        );
    }
    Ok(b)
}

/// The report as stored in a baseline: identical, with every time removed.
pub fn without_times(r: &BatchReport) -> BatchReport {
    let mut r = r.clone();
    r.totals.time_ms = None;
    for f in &mut r.files {
        f.time_ms = None;
    }
    r
}

pub(super) fn options_map(o: &Options) -> BTreeMap<String, String> {
    // `loops` (issue 34) is recorded only when on: a baseline written before the option existed
    // (no key) reads as loops off, and so still matches runs without `--loops`.
    let loops = o.loops.map(|n| {
        (
            "loops",
            format!("{n}{}", if o.loop_iters { ":iters" } else { "" }),
        )
    });
    // `regions` (issue 34) likewise: recorded only when some region or point is given.
    let regions = (!o.regions.is_empty()).then(|| {
        let specs: Vec<String> = o
            .regions
            .iter()
            .map(|s| format!("{} {s}", s.kind.word()))
            .collect();
        ("regions", specs.join("; "))
    });
    [
        ("functions", format!("{:?}", o.functions)),
        ("barriers", o.barriers.to_string()),
        ("kernel_scopes", o.kernel_scopes.to_string()),
        ("memory", format!("{:?}", o.memory)),
        ("trace_addresses", format!("{:?}", o.trace_addresses)),
        ("scope", format!("{:?}", o.scope)),
        ("mem_barrier", format!("{:?}", o.mem_barrier)),
        ("shader_clock_bits", o.shader_clock_bits.to_string()),
        ("shader_clock_shift", o.shader_clock_shift.to_string()),
        ("force", o.force_reinstrument.to_string()),
    ]
    .into_iter()
    .chain(loops)
    .chain(regions)
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

pub(super) fn option_diff(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> String {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            let v = |m: &BTreeMap<String, String>| m.get(k).cloned().unwrap_or_else(|| "-".into());
            format!("{k} {} -> {}", v(old), v(new))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------- discovery

/// Compares a run with its baseline. Times are ignored. Classes: a baseline kernel that was
/// instrumented and is now failed closed or unreadable; a baseline kernel missing (its file,
/// object or name); fewer sites of a kind in a kernel or device function; inserted bytes or
/// instructions of a kernel's or function's own code above `old * (1 + max_growth_pct / 100)`
/// (scaled by new/old sites when the row gained sites; rows without overhead in the baseline are
/// exempt); lower occupancy after instrumentation. Sorted by location, then class.
pub fn compare(old: &BatchReport, new: &BatchReport, max_growth_pct: f64) -> Vec<Regression> {
    let (old_objs, new_objs) = (index_objects(old), index_objects(new));
    let mut out = Vec::new();
    for (&(file, entry), o) in &old_objs {
        let n = new_objs.get(&(file, entry));
        for k in &o.kernels {
            let loc = location(file, entry, "kernel", &k.name);
            let Some(nk) = n.and_then(|n| n.kernels.iter().find(|x| x.name == k.name)) else {
                let why = match n {
                    None if new.files.iter().any(|f| f.path == file) => "code object missing",
                    None => "file missing",
                    Some(_) => "kernel missing",
                };
                out.push(Regression {
                    location: loc,
                    class: Class::LostKernel,
                    detail: why.into(),
                });
                continue;
            };
            if k.status == "instrumented" && matches!(nk.status.as_str(), "failed_closed" | "error")
            {
                let reasons = n.map(|n| n.reasons.join("; ")).unwrap_or_default();
                out.push(Regression {
                    location: loc,
                    class: Class::FailedClosed,
                    detail: format!("{} -> {} ({reasons})", k.status, nk.status),
                });
                continue;
            }
            coverage(&mut out, &loc, &k.sites, &nk.sites);
            let sites = (total(&k.sites), total(&nk.sites));
            let bytes = (k.inserted_bytes, nk.inserted_bytes);
            let insts = (k.inserted_instructions, nk.inserted_instructions);
            overheads(&mut out, &loc, bytes, insts, sites, max_growth_pct);
            if let (Some(a), Some(b)) = (k.occupancy_after, nk.occupancy_after) {
                if b < a {
                    out.push(Regression {
                        location: loc.clone(),
                        class: Class::Occupancy,
                        detail: format!("occupancy after {a} -> {b} waves/SIMD"),
                    });
                }
            }
        }
        let Some(n) = n else { continue };
        if o.status == "instrumented" && matches!(n.status.as_str(), "failed_closed" | "error") {
            // The object as a whole regressed: its kernels say so; function rows would only repeat it.
            if !out.iter().any(|r| {
                r.class == Class::FailedClosed
                    && r.location.starts_with(&location(file, entry, "kernel", ""))
            }) {
                out.push(Regression {
                    location: object_location(file, entry),
                    class: Class::FailedClosed,
                    detail: format!("{} -> {} ({})", o.status, n.status, n.reasons.join("; ")),
                });
            }
            continue;
        }
        for f in &o.functions {
            let loc = location(file, entry, "function", &f.name);
            let empty = BTreeMap::new();
            let nf = n.functions.iter().find(|x| x.name == f.name);
            coverage(&mut out, &loc, &f.sites, nf.map_or(&empty, |x| &x.sites));
            if let Some(nf) = nf {
                let sites = (total(&f.sites), total(&nf.sites));
                let bytes = (f.inserted_bytes, nf.inserted_bytes);
                let insts = (f.inserted_instructions, nf.inserted_instructions);
                overheads(&mut out, &loc, bytes, insts, sites, max_growth_pct);
            }
        }
    }
    out.sort();
    out
}

/// `<path>` or `<path> [<entry>]`.
pub(super) fn object_location(file: &str, entry: &str) -> String {
    if entry.is_empty() {
        file.to_string()
    } else {
        format!("{file} [{entry}]")
    }
}

/// `<object location>: <kernel|function> <name>`.
pub(super) fn location(file: &str, entry: &str, what: &str, name: &str) -> String {
    format!("{}: {what} {name}", object_location(file, entry))
}

/// Every object of a report by (file path, entry).
pub(super) fn index_objects(r: &BatchReport) -> BTreeMap<(&str, &str), &ObjectReport> {
    r.files
        .iter()
        .flat_map(|f| {
            f.objects
                .iter()
                .map(move |o| ((f.path.as_str(), o.entry.as_str()), o))
        })
        .collect()
}

pub(super) fn coverage(
    out: &mut Vec<Regression>,
    loc: &str,
    old: &BTreeMap<String, u32>,
    new: &BTreeMap<String, u32>,
) {
    for (kind, &a) in old {
        let b = new.get(kind).copied().unwrap_or(0);
        if b < a {
            out.push(Regression {
                location: loc.into(),
                class: Class::Coverage,
                detail: format!("{kind} sites {a} -> {b}"),
            });
        }
    }
}

pub(super) fn total(m: &BTreeMap<String, u32>) -> u32 {
    m.values().sum()
}

/// [`overhead`] of one row's inserted bytes and inserted instructions, `(old, new)` each.
fn overheads(
    out: &mut Vec<Regression>,
    loc: &str,
    bytes: (u32, u32),
    insts: (u32, u32),
    sites: (u32, u32),
    max_pct: f64,
) {
    overhead(out, loc, "inserted bytes", bytes, sites, max_pct);
    overhead(out, loc, "inserted instructions", insts, sites, max_pct);
}

/// Static overhead check of one row. `(old, new)` values and `(old, new)` site counts. A row
/// without overhead in the baseline is new coverage, never a regression; when the row gained
/// sites the allowance grows in proportion (same cost per site is not a regression).
pub(super) fn overhead(
    out: &mut Vec<Regression>,
    loc: &str,
    what: &str,
    (old, new): (u32, u32),
    sites: (u32, u32),
    max_pct: f64,
) {
    if old == 0 || new <= old {
        return;
    }
    let scale = if sites.1 > sites.0 && sites.0 > 0 {
        f64::from(sites.1) / f64::from(sites.0)
    } else {
        1.0
    };
    let expected = f64::from(old) * scale;
    let growth = (f64::from(new) - expected) * 100.0 / expected;
    if growth > max_pct {
        let per_site = if scale > 1.0 {
            format!(" for {} -> {} sites", sites.0, sites.1)
        } else {
            String::new()
        };
        out.push(Regression {
            location: loc.into(),
            class: Class::Overhead,
            detail: format!("{what} {old} -> {new}{per_site} (+{growth:.1}% > {max_pct}%)"),
        });
    }
}
