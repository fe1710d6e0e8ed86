//! The batch report (also the baseline format): per file, per code object, per kernel and
//! function rows, and the totals over them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON report/baseline layout ([`BatchReport::schema`]).
pub const SCHEMA: u32 = 1;

/// The whole batch report; also the baseline format (written without times).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatchReport {
    /// Layout version ([`SCHEMA`]).
    pub schema: u32,
    /// Effective instrumentation options (environment, then flags), by knob name.
    pub options: BTreeMap<String, String>,
    /// One entry per input file, sorted by `path`.
    pub files: Vec<FileReport>,
    /// Sums over all files.
    pub totals: Totals,
    /// Files found by a directory walk or glob that were not processed, each as
    /// `<path>: <why>` (not device code; a bare code object left out by `--offload-arch`),
    /// sorted. Explicitly named files are never skipped: they are reported as errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_inputs: Vec<String>,
}

/// One input file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileReport {
    /// `<root name>/<path below the root>` with `/` separators (file name for a file argument).
    pub path: String,
    /// `code_object`, `bundle` or `host`.
    pub kind: String,
    /// Why the file could not be processed (an input error), if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Embedded code objects, sorted by `entry`.
    pub objects: Vec<ObjectReport>,
    /// Wall time to process the file (milliseconds); never compared, absent from baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
    /// True when `--strict` kept the output file of this input from being written (some code
    /// object failed closed, could not be read, or skipped a site).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_written: bool,
}

/// One code object (the file itself, or one bundle entry).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ObjectReport {
    /// `""` for a bare code object; `<bundle index>:<entry id>` inside a bundle or host binary.
    pub entry: String,
    /// Processor (`gfx942`); empty when the object could not be read.
    pub target: String,
    /// `instrumented`, `nothing_to_do`, `failed_closed` or `error` (could not be read).
    pub status: String,
    /// Why it failed closed or could not be read (omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Translation validation of the rewrite: `passed`, `rejected` (left unchanged; exit 1) or
    /// `not_run` (nothing was rewritten).
    pub verifier: String,
    /// `.text` size before (bytes).
    pub text_bytes_before: u64,
    /// `.text` size after (bytes).
    pub text_bytes_after: u64,
    /// Kernels, sorted by name.
    pub kernels: Vec<KernelRow>,
    /// Device functions that have sites or skipped sites, sorted by name.
    pub functions: Vec<FunctionRow>,
    /// Warnings: requested options that do not apply to this target, DWARF that cannot be read
    /// (omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The object's DWARF cannot be read (the reader's error): inlined functions unmarked, lost
    /// coverage for `--strict` (omitted when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dwarf_error: Option<String>,
    /// Sites of an object that failed closed (or whose rewrite the verifier rejected) that would
    /// have been instrumented, by feature (`functions`, `barriers`, ...; count of sites): found,
    /// and nothing of them written. Its skipped sites are in the kernel and function rows
    /// (omitted when empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_closed_sites: BTreeMap<String, u32>,
    /// Loops found, instrumented and left out with the reason (`--loops`; omitted without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loops: Option<sqtt_rewrite::inlined::LoopReport>,
    /// User-named regions and points found, instrumented and skipped with the reason
    /// (`--region`, `--point`; omitted without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regions: Option<sqtt_rewrite::inlined::RegionReport>,
}

/// One kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelRow {
    /// Kernel name (descriptor symbol without `.kd`).
    pub name: String,
    /// `instrumented` (markers in the kernel or in a function it reaches), `nothing_to_do`,
    /// `failed_closed` or `error` (the object's status).
    pub status: String,
    /// Instrumented sites in the kernel's own code, by kind (`barrier`, `function_entry`, ...).
    pub sites: BTreeMap<String, u32>,
    /// Requested sites not instrumented, by `<kind>: <reason>` (omitted when empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped: BTreeMap<String, u32>,
    /// Instructions inserted in the kernel's own code.
    pub inserted_instructions: u32,
    /// Bytes inserted in the kernel's own code (excluding alignment padding).
    pub inserted_bytes: u32,
    /// Instructions inserted in the kernel and every function it reaches.
    pub inserted_instructions_reachable: u32,
    /// Wave size (32/64), when the descriptor could be read.
    pub wave_size: Option<u32>,
    /// VGPRs allocated per work-item (unchanged by markers).
    pub vgprs: Option<u32>,
    /// SGPRs allocated per wave before (gfx9 only; `None` on gfx10+).
    pub sgprs_before: Option<u32>,
    /// SGPRs allocated per wave after.
    pub sgprs_after: Option<u32>,
    /// Waves per SIMD before (`hsaco::kd::occupancy`).
    pub occupancy_before: Option<u32>,
    /// Waves per SIMD after.
    pub occupancy_after: Option<u32>,
}

/// One device function (not a kernel).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FunctionRow {
    /// Symbol name.
    pub name: String,
    /// Instrumented sites by kind.
    pub sites: BTreeMap<String, u32>,
    /// Requested sites not instrumented, by `<kind>: <reason>` (omitted when empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped: BTreeMap<String, u32>,
    /// Instructions inserted.
    pub inserted_instructions: u32,
    /// Bytes inserted (excluding alignment padding).
    pub inserted_bytes: u32,
}

/// Sums over the batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    /// Input files.
    pub files: u32,
    /// Files with an input error: the file could not be processed, or one of its code objects
    /// could not be read.
    pub file_errors: u32,
    /// Code objects, by status.
    pub objects: BTreeMap<String, u32>,
    /// Kernels, by status.
    pub kernels: BTreeMap<String, u32>,
    /// Rewrites rejected by the verifier.
    pub verifier_rejected: u32,
    /// Instrumented sites, by kind.
    pub sites: BTreeMap<String, u32>,
    /// Skipped sites, by `<kind>: <reason>`.
    pub skipped: BTreeMap<String, u32>,
    /// Failed-closed reasons, addresses and names removed, by reason.
    pub failed_closed_reasons: BTreeMap<String, u32>,
    /// Input errors (files and code objects that could not be read), addresses and names
    /// removed, by reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_errors: BTreeMap<String, u32>,
    /// Sites of code objects that failed closed, found and not instrumented, by feature
    /// ([`ObjectReport::failed_closed_sites`] summed; omitted when empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_closed_sites: BTreeMap<String, u32>,
    /// Code objects that failed closed before any of their sites was found (more than one
    /// executable section, a function that cannot move, ...): their sites are in no count
    /// (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_closed_uncounted: u32,
    /// Instructions inserted.
    pub inserted_instructions: u64,
    /// Bytes inserted.
    pub inserted_bytes: u64,
    /// Wall time of the whole batch (milliseconds); never compared, absent from baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub(super) use crate::summary::reason_class;

pub(super) fn totals(files: &[FileReport]) -> Totals {
    let mut t = Totals {
        files: files.len() as u32,
        ..Totals::default()
    };
    for f in files {
        let unreadable = f.objects.iter().any(|o| o.status == "error");
        t.file_errors += u32::from(f.error.is_some() || unreadable);
        if let Some(e) = &f.error {
            *t.input_errors.entry(reason_class(e)).or_default() += 1;
        }
        for o in &f.objects {
            *t.objects.entry(o.status.clone()).or_default() += 1;
            for (feat, n) in &o.failed_closed_sites {
                *t.failed_closed_sites.entry(feat.clone()).or_default() += n;
            }
            let skipped_any = o.kernels.iter().any(|k| !k.skipped.is_empty())
                || o.functions.iter().any(|f| !f.skipped.is_empty());
            t.failed_closed_uncounted += u32::from(
                o.status == "failed_closed" && o.failed_closed_sites.is_empty() && !skipped_any,
            );
            t.verifier_rejected += u32::from(o.verifier == "rejected");
            let by_reason = if o.status == "error" {
                &mut t.input_errors
            } else {
                &mut t.failed_closed_reasons
            };
            for r in &o.reasons {
                *by_reason.entry(reason_class(r)).or_default() += 1;
            }
            for k in &o.kernels {
                *t.kernels.entry(k.status.clone()).or_default() += 1;
            }
            let rows = o
                .kernels
                .iter()
                .map(|k| {
                    (
                        &k.sites,
                        &k.skipped,
                        k.inserted_instructions,
                        k.inserted_bytes,
                    )
                })
                .chain(o.functions.iter().map(|f| {
                    (
                        &f.sites,
                        &f.skipped,
                        f.inserted_instructions,
                        f.inserted_bytes,
                    )
                }));
            for (sites, skipped, insts, bytes) in rows {
                for (k, v) in sites {
                    *t.sites.entry(k.clone()).or_default() += v;
                }
                for (k, v) in skipped {
                    *t.skipped.entry(k.clone()).or_default() += v;
                }
                t.inserted_instructions += u64::from(insts);
                t.inserted_bytes += u64::from(bytes);
            }
        }
    }
    t
}

// ---------------------------------------------------------------- rendering

/// Sites instrumented / found per feature over the whole batch (skipped entries are keyed
/// `<kind>: <reason>`).
pub(super) fn totals_coverage(t: &Totals) -> Vec<sqtt_rewrite::rewrite::Coverage> {
    use sqtt_rewrite::plan::SiteKind;
    use sqtt_rewrite::rewrite::Coverage;
    let mut by: BTreeMap<&'static str, Coverage> = BTreeMap::new();
    for (kind, &n) in &t.sites {
        if let Some(f) = SiteKind::feature_of_name(kind) {
            let c = by.entry(f).or_insert_with(|| Coverage::empty(f));
            c.instrumented += u64::from(n);
            c.found += u64::from(n);
        }
    }
    for (key, &n) in &t.skipped {
        let (kind, why) = key.split_once(": ").unwrap_or((key, ""));
        if let Some(f) = SiteKind::feature_of_name(kind) {
            by.entry(f)
                .or_insert_with(|| Coverage::empty(f))
                .add_skipped(why, u64::from(n));
        }
    }
    for (feat, &n) in &t.failed_closed_sites {
        let known = SiteKind::ALL.into_iter().filter_map(SiteKind::feature);
        if let Some(f) = known.into_iter().find(|f| f == feat) {
            by.entry(f).or_insert_with(|| Coverage::empty(f)).found += u64::from(n);
        }
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_classes_drop_names_and_addresses() {
        assert_eq!(
            reason_class("_Z3fooi at 0x1a0: s_setpc_b64 to 0x200 not a return"),
            "s_setpc_b64 to 0x_ not a return"
        );
        assert_eq!(
            reason_class("more than one executable section"),
            "more than one executable section"
        );
        assert_eq!(
            reason_class("verifier: [alignment] k orig 0x10 new 0x14: original instruction changed: expected x"),
            "verifier: [alignment] original instruction changed"
        );
    }
}
