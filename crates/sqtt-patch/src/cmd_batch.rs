//! `sqtt-patch batch PATH... [-o OUTDIR | --check] [--baseline OLD.json]`: instrument every code
//! object, offload bundle and host binary found under files, directories (recursively) and globs
//! with one set of options, in parallel, and summarize the result in one stable, sorted report that
//! can be compared with a stored baseline (CI regression check). See `docs/batch.md`.
//!
//! Exit codes (documented in `docs/batch.md`, the first that applies): [`exit::VERIFY`] 1,
//! [`exit::INPUT`] 2, [`exit::STRICT`] 3, [`exit::REGRESSION`] 4, else [`exit::OK`] 0.

use crate::cmd_patch::{self, CommonArgs};
use crate::exit;
use crate::fatbin::{self, ArchFilter};
use crate::output;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use hsaco::container::InputKind;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sqtt_rewrite::config::Options;
use sqtt_rewrite::rewrite::{Report, Status};
use sqtt_rewrite::timings::Stage;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Version of the JSON report/baseline layout ([`BatchReport::schema`]).
pub const SCHEMA: u32 = 1;

/// Largest decompressed bundle accepted (bytes), as for the single-file commands.
const DECOMPRESS_LIMIT: u64 = 1 << 32;

/// Directory levels followed below a root (guards against symlink loops).
const MAX_DEPTH: usize = 64;

/// Command line of `sqtt-patch batch`.
#[derive(clap::Args, Debug)]
pub struct BatchArgs {
    /// Files, directories (searched recursively) and globs (`*`, `?`, `[..]`, `**`).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output directory; outputs mirror the input tree (`OUTDIR/<root name>/<relative path>`).
    #[arg(short, long, value_name = "OUTDIR", conflicts_with = "check")]
    pub output: Option<PathBuf>,
    /// Write no output file; only report (and compare).
    #[arg(long)]
    pub check: bool,
    /// Compare with this stored report; regressions exit with code 4.
    #[arg(long, value_name = "OLD.json")]
    pub baseline: Option<PathBuf>,
    /// Write this run's report (without times) to the --baseline file instead of failing on
    /// regressions.
    #[arg(long, requires = "baseline")]
    pub update_baseline: bool,
    /// Largest accepted growth of a kernel's or function's static overhead (inserted bytes or
    /// instructions), in percent of the baseline value.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub max_overhead_growth: f64,
    /// Flags shared with the main job and `--fatbin` (instrumentation, `--strict`,
    /// `--report-json`, `--offload-arch`).
    #[command(flatten)]
    pub common: CommonArgs,
}

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
    /// Requested options that do not apply to this target (omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
    /// Instructions inserted.
    pub inserted_instructions: u64,
    /// Bytes inserted.
    pub inserted_bytes: u64,
    /// Wall time of the whole batch (milliseconds); never compared, absent from baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
}

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

/// A file to process and how it was found.
struct Found {
    path: PathBuf,
    key: String,
    explicit: bool,
}

/// Runs the batch; returns the exit code. Errors (exit 2 through `main`): bad usage, unreadable
/// baseline, unwritable report.
pub fn run(args: BatchArgs) -> Result<i32> {
    if args.output.is_none() && !args.check {
        bail!("pass -o OUTDIR or --check");
    }
    if !(args.max_overhead_growth.is_finite() && args.max_overhead_growth >= 0.0) {
        bail!("--max-overhead-growth must be a percentage >= 0");
    }
    let common = &args.common;
    let opts = cmd_patch::flag_options(&common.flags)?;
    if !opts.any_enabled() {
        bail!("nothing requested: pass --functions N, --barriers 1, --memory N:M, --trace-addresses memory,lds or --kernel-scopes (or set SQTT_INSTRUMENT_*)");
    }
    let filter = ArchFilter::new(&common.offload_arch)?;
    if let Some(d) = args.output.as_deref().filter(|d| d.exists() && !d.is_dir()) {
        bail!(
            "-o {}: not a directory (batch writes one output file per input below OUTDIR)",
            d.display()
        );
    }
    if let Some(j) = common
        .report_json
        .as_deref()
        .filter(|j| j.as_os_str() != "-")
    {
        output::check("--report-json", j)?;
    }
    let baseline = match &args.baseline {
        Some(p) if p.exists() || !args.update_baseline => Some(read_baseline(p)?),
        _ => None,
    };
    let started = Instant::now();
    if common.timings {
        crate::timings::enable(true);
    }
    let (found, mut input_errors) = discover(&args.paths)?;
    let out_dir = if args.check {
        None
    } else {
        args.output.as_deref()
    };
    let total_bytes = found
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
        .sum();
    let progress = Progress::new(total_bytes);
    let outcomes: Vec<Result<FileReport, String>> = found
        .par_iter()
        .map(|f| {
            let r = process_file(f, &opts, &filter, out_dir, common.strict);
            let objects = r.as_ref().map_or(0, |r| r.objects.len() as u64);
            progress.found(objects);
            progress.objects_done(objects);
            progress.bytes_done(std::fs::metadata(&f.path).map_or(0, |m| m.len()));
            r
        })
        .collect();
    progress.finish();
    let (files, not_inputs): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(Result::is_ok);
    let mut files: Vec<FileReport> = files.into_iter().flatten().collect();
    let mut not_inputs: Vec<String> = not_inputs.into_iter().filter_map(Result::err).collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    not_inputs.sort();
    let mut report = BatchReport {
        schema: SCHEMA,
        options: options_map(&opts),
        files,
        totals: Totals::default(),
        not_inputs,
    };
    report.totals = totals(&report.files);
    report.totals.time_ms = Some(started.elapsed().as_millis() as u64);

    // The summary and the regression diff go to stdout, unless stdout carries the JSON report;
    // diagnostics go to stderr.
    let json_on_stdout = common
        .report_json
        .as_deref()
        .is_some_and(|p| p.as_os_str() == "-");
    let summary = |text: &str| -> Result<()> {
        if json_on_stdout {
            eprint!("{text}");
        } else {
            cmd_patch::write_stdout(text)?;
        }
        Ok(())
    };
    summary(&render(&report))?;
    for e in &input_errors {
        eprintln!("sqtt-patch batch: input error: {e}");
    }
    // Files and code objects that could not be read are diagnostics too, not only report rows.
    for f in &report.files {
        let unreadable = f.objects.iter().filter(|o| o.status == "error");
        for why in f.error.iter().chain(unreadable.flat_map(|o| &o.reasons)) {
            // Reasons from the rewriter already start with the path.
            match why.starts_with(&format!("{}: ", f.path)) {
                true => eprintln!("sqtt-patch batch: input error: {why}"),
                false => eprintln!("sqtt-patch batch: input error: {}: {why}", f.path),
            }
        }
    }
    let mut regressions = Vec::new();
    if let (Some(old), Some(p)) = (&baseline, &args.baseline) {
        if old.options != report.options && !args.update_baseline {
            input_errors.push(format!(
                "{}: baseline made with other options: {}",
                p.display(),
                option_diff(&old.options, &report.options)
            ));
            eprintln!(
                "sqtt-patch batch: input error: {}",
                input_errors[input_errors.len() - 1]
            );
        } else {
            regressions = compare(old, &report, args.max_overhead_growth);
            summary(&render_regressions(&p.display().to_string(), &regressions))?;
        }
    }
    if let Some(p) = &common.report_json {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        output::write_report("--report-json", p, &text)?;
    }
    let rejected = report.totals.verifier_rejected > 0;
    let bad_input = !input_errors.is_empty()
        || report.totals.file_errors > 0
        || report.totals.objects.get("error").copied().unwrap_or(0) > 0;
    if args.update_baseline {
        if let Some(p) = &args.baseline {
            if bad_input {
                eprintln!(
                    "sqtt-patch batch: baseline {} NOT updated (input errors above)",
                    p.display()
                );
            } else {
                let text = serde_json::to_string_pretty(&without_times(&report))? + "\n";
                output::write_report("--baseline", p, &text)?;
                eprintln!("sqtt-patch batch: baseline {} updated", p.display());
                if rejected {
                    eprintln!("sqtt-patch batch: warning: it records {} verifier-rejected code object(s) as failed closed", report.totals.verifier_rejected);
                }
            }
        }
    }
    crate::timings::print_sum(&format!("batch ({} files)", report.files.len()), started);
    let withheld = report.files.iter().filter(|f| f.not_written).count();
    if common.strict && withheld > 0 {
        eprintln!("sqtt-patch batch: --strict: {withheld} input(s) failed closed, could not be read or skipped a site; their outputs were not written");
    }
    Ok(if rejected {
        exit::VERIFY
    } else if bad_input {
        exit::INPUT
    } else if common.strict && withheld > 0 {
        exit::STRICT
    } else if !regressions.is_empty() && !args.update_baseline {
        exit::REGRESSION
    } else {
        exit::OK
    })
}

fn read_baseline(p: &Path) -> Result<BatchReport> {
    let text = std::fs::read_to_string(p)
        .with_context(|| format!("{}: cannot read the baseline", p.display()))?;
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

fn options_map(o: &Options) -> BTreeMap<String, String> {
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
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn option_diff(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> String {
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

/// Expands the PATH arguments into files with their report keys. Returns input errors (missing
/// paths, duplicate keys) separately so the rest of the batch still runs.
fn discover(paths: &[PathBuf]) -> Result<(Vec<Found>, Vec<String>)> {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        let text = p.to_string_lossy();
        if p.is_file() {
            let key = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| text.to_string());
            found.push(Found {
                path: p.clone(),
                key,
                explicit: true,
            });
        } else if p.is_dir() {
            let root = root_name(p);
            walk(p, &root, 0, &mut |path, rel| {
                found.push(Found {
                    path,
                    key: rel,
                    explicit: false,
                });
            })
            .with_context(|| format!("{}: cannot list", p.display()))?;
        } else if text.contains(['*', '?', '[']) {
            let before = found.len();
            expand_glob(p, &mut found)?;
            if found.len() == before {
                errors.push(format!("{text}: no file matches"));
            }
        } else {
            errors.push(format!("{text}: no such file or directory"));
        }
    }
    found.sort_by(|a, b| a.key.cmp(&b.key));
    let mut seen = BTreeSet::new();
    found.retain(|f| {
        if seen.insert(f.key.clone()) {
            true
        } else {
            errors.push(format!(
                "{}: report path {} given twice",
                f.path.display(),
                f.key
            ));
            false
        }
    });
    Ok((found, errors))
}

/// The name a root directory contributes to report keys: its last component (of the canonical
/// path for `.` and `..`).
fn root_name(p: &Path) -> String {
    let named = p.file_name().map(|n| n.to_string_lossy().into_owned());
    named
        .or_else(|| {
            std::fs::canonicalize(p)
                .ok()
                .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_else(|| "root".into())
}

/// Visits every regular file below `dir` (following symbolic links, at most [`MAX_DEPTH`] levels)
/// in name order, with its key `<prefix>/<relative path>`.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    visit: &mut dyn FnMut(PathBuf, String),
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for e in entries {
        let name = e
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if e.is_dir() {
            walk(&e, &key, depth + 1, visit)?;
        } else if e.is_file() {
            visit(e, key);
        }
    }
    Ok(())
}

/// Expands a glob: the leading components without wildcards name the root directory, the rest is
/// matched against paths below it (`*` and `?` within one component, `[..]` sets, `**` any number
/// of components).
fn expand_glob(pattern: &Path, found: &mut Vec<Found>) -> Result<()> {
    let comps: Vec<String> = pattern
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let split = comps
        .iter()
        .position(|c| c.contains(['*', '?', '[']))
        .unwrap_or(comps.len());
    let base: PathBuf = if split == 0 {
        PathBuf::from(".")
    } else {
        comps[..split].iter().collect()
    };
    let pat: Vec<&str> = comps[split..].iter().map(String::as_str).collect();
    if !base.is_dir() {
        return Ok(());
    }
    let root = root_name(&base);
    walk(&base, "", 0, &mut |path, rel| {
        let parts: Vec<&str> = rel.split('/').collect();
        if match_components(&pat, &parts) {
            found.push(Found {
                path,
                key: format!("{root}/{rel}"),
                explicit: false,
            });
        }
    })
    .with_context(|| format!("{}: cannot list", base.display()))
}

fn match_components(pat: &[&str], parts: &[&str]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|i| match_components(rest, &parts[i..])),
        Some((p, rest)) => match parts.split_first() {
            Some((first, tail)) => {
                match_name(p.as_bytes(), first.as_bytes()) && match_components(rest, tail)
            }
            None => false,
        },
    }
}

/// Shell-style match of one path component: `*`, `?`, `[abc]`, `[a-z]`, `[!a]`.
fn match_name(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| match_name(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && match_name(rest, &s[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&c| c == b']').map(|i| i + 1) else {
                return s.first() == Some(&b'[') && match_name(rest, &s[1..]);
            };
            let Some(&c) = s.first() else { return false };
            let (negate, set) = match rest[..close].split_first() {
                Some((b'!' | b'^', set)) => (true, set),
                _ => (false, &rest[..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && match_name(&rest[close + 1..], &s[1..])
        }
        Some((&c, rest)) => s.first() == Some(&c) && match_name(rest, &s[1..]),
    }
}

// ---------------------------------------------------------------- processing

/// Processes one file. `Err("<path>: <why>")` for a file found by a directory walk or glob that
/// is not an input (no bundle magic, not an AMDGPU or x86-64 ELF, a host ELF without device
/// code, or a bare code object left out by `--offload-arch`).
fn process_file(
    f: &Found,
    opts: &Options,
    filter: &ArchFilter,
    out_dir: Option<&Path>,
    strict: bool,
) -> Result<FileReport, String> {
    let started = Instant::now();
    let mut rep = FileReport {
        path: f.key.clone(),
        kind: String::new(),
        error: None,
        objects: Vec::new(),
        time_ms: None,
        not_written: false,
    };
    let data = match crate::timings::time(Stage::Load, || std::fs::read(&f.path)) {
        Ok(d) => d,
        Err(e) => {
            rep.error = Some(format!("cannot read: {e}"));
            return Ok(rep);
        }
    };
    let out = match crate::sniff::kind(&data) {
        None if !f.explicit => {
            return Err(format!(
                "{}: not an AMDGPU code object, offload bundle or x86-64 host ELF",
                f.key
            ))
        }
        None => {
            rep.error = Some("not an AMDGPU code object, offload bundle or x86-64 host ELF".into());
            None
        }
        Some(InputKind::Host)
            if !f.explicit
                && hsaco::container::open(&data, DECOMPRESS_LIMIT)
                    .map_or(true, |(_, e)| e.is_empty()) =>
        {
            return Err(format!("{}: host ELF without device code", f.key));
        }
        Some(kind) => {
            rep.kind = kind_name(kind).into();
            let out = process_objects(&f.key, kind, &data, opts, filter, &mut rep);
            if rep.objects.is_empty() && rep.error.is_none() && kind == InputKind::CodeObject {
                return Err(format!(
                    "{}: code object not selected by --offload-arch",
                    f.key
                ));
            }
            out
        }
    };
    let lost = |o: &ObjectReport| {
        matches!(o.status.as_str(), "failed_closed" | "error")
            || o.kernels.iter().any(|k| !k.skipped.is_empty())
            || o.functions.iter().any(|f| !f.skipped.is_empty())
    };
    rep.not_written = strict && out_dir.is_some() && rep.objects.iter().any(lost);
    if rep.not_written {
        rep.time_ms = Some(started.elapsed().as_millis() as u64);
        return Ok(rep);
    }
    if let (Some(bytes), Some(dir)) = (out, out_dir) {
        let dest = dir.join(&f.key);
        let written = dest
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(anyhow::Error::from)
            .and_then(|()| output::check("-o", &dest))
            .and_then(|d| crate::timings::time(Stage::Write, || output::write(&d, &bytes, None)));
        if let Err(e) = written {
            rep.error = Some(format!("{}: {e:#}", dest.display()));
        }
    }
    rep.time_ms = Some(started.elapsed().as_millis() as u64);
    Ok(rep)
}

fn kind_name(k: InputKind) -> &'static str {
    match k {
        InputKind::CodeObject => "code_object",
        InputKind::Bundle => "bundle",
        InputKind::Host => "host",
    }
}

/// Instruments the objects of one file and fills `rep`; returns the output file bytes (`None`
/// when the file could not be processed). Bare code objects go through
/// [`cmd_patch::patch_code_object`] (so an unreadable object is reported as `error`), bundles and
/// host ELFs through [`fatbin::instrument_container`].
fn process_objects(
    name: &str,
    kind: InputKind,
    data: &[u8],
    opts: &Options,
    filter: &ArchFilter,
    rep: &mut FileReport,
) -> Option<Vec<u8>> {
    if kind == InputKind::CodeObject {
        if let Ok(co) = hsaco::CodeObject::parse(data) {
            if !filter.matches(&co.target.target_id()) {
                return Some(data.to_vec());
            }
        }
        return match cmd_patch::patch_code_object(name, data, opts) {
            Ok(p) => {
                rep.objects.push(object_row(
                    String::new(),
                    Some(data),
                    Some(&p.report),
                    p.verifier_rejected,
                ));
                Some(p.bytes)
            }
            Err(e) => {
                let mut row = object_row(String::new(), Some(data), None, false);
                row.reasons.push(format!("{e:#}"));
                rep.objects.push(row);
                None
            }
        };
    }
    let outcome = match fatbin::instrument_container(name, data, opts, filter) {
        Ok(o) => o,
        Err(e) => {
            rep.error = Some(format!("{e:#}"));
            return None;
        }
    };
    // Kernel lists of objects the rewriter reported nothing about (failed closed) come from the
    // embedded objects themselves.
    let need_data = outcome
        .objects
        .iter()
        .any(|o| o.report.status != Status::Instrumented);
    let embedded = if need_data {
        hsaco::container::open(data, DECOMPRESS_LIMIT)
            .map(|(_, e)| e)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    for o in &outcome.objects {
        let bytes = embedded
            .iter()
            .find(|e| e.bundle_index == o.bundle_index && e.id == o.entry_id)
            .map(|e| e.data.as_slice());
        let mut row = object_row(
            format!("{}:{}", o.bundle_index, o.entry_id),
            bytes,
            Some(&o.report),
            o.verifier_rejected,
        );
        row.target.clone_from(&o.target);
        rep.objects.push(row);
    }
    rep.objects.sort_by(|a, b| a.entry.cmp(&b.entry));
    Some(outcome.bytes)
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Instrumented => "instrumented",
        Status::NothingToDo => "nothing_to_do",
        Status::FailedClosed => "failed_closed",
    }
}

/// Builds the row of one code object from the rewriter's report (`None`: it could not be read)
/// and the object itself (kernel list, registers and occupancy of kernels the report omits).
fn object_row(
    entry: String,
    data: Option<&[u8]>,
    report: Option<&Report>,
    rejected: bool,
) -> ObjectReport {
    let co = data.and_then(|d| hsaco::CodeObject::parse(d).ok());
    let status = report.map_or("error", |r| status_name(r.status));
    let mut row = ObjectReport {
        entry,
        target: report
            .map(|r| r.target.clone())
            .or_else(|| co.as_ref().map(|c| c.target.processor.clone()))
            .unwrap_or_default(),
        status: status.into(),
        reasons: report.map(|r| r.reasons.clone()).unwrap_or_default(),
        verifier: match (rejected, report.map(|r| r.status)) {
            (true, _) => "rejected",
            (false, Some(Status::Instrumented)) => "passed",
            _ => "not_run",
        }
        .into(),
        text_bytes_before: report.map_or(0, |r| r.text_size_before),
        text_bytes_after: report.map_or(0, |r| r.text_size_after),
        kernels: Vec::new(),
        functions: Vec::new(),
        notes: report.map(|r| r.notes.clone()).unwrap_or_default(),
    };
    let mut kernels: BTreeMap<String, KernelRow> = BTreeMap::new();
    let mut functions: BTreeMap<String, FunctionRow> = BTreeMap::new();
    if let Some(co) = &co {
        for k in &co.kernels {
            let regs = k.descriptor.registers(&co.target);
            let lds = k.descriptor.group_segment_fixed_size;
            let occ = hsaco::kd::occupancy(
                &co.target,
                regs.wave32,
                regs.vgprs_allocated,
                regs.sgprs.unwrap_or(0),
                lds,
            );
            let mut kr = empty_kernel(&k.name, status);
            kr.wave_size = Some(k.descriptor.wave_size());
            kr.vgprs = Some(regs.vgprs_allocated);
            kr.sgprs_before = regs.sgprs;
            kr.sgprs_after = regs.sgprs;
            kr.occupancy_before = Some(occ.waves_per_simd);
            kr.occupancy_after = Some(occ.waves_per_simd);
            kernels.insert(k.name.clone(), kr);
        }
    }
    if let Some(r) = report {
        for k in &r.kernels {
            let kr = kernels
                .entry(k.name.clone())
                .or_insert_with(|| empty_kernel(&k.name, status));
            kr.wave_size = Some(k.wave_size);
            kr.vgprs = Some(k.vgprs);
            kr.sgprs_before = k.sgprs_before;
            kr.sgprs_after = k.sgprs_after;
            kr.occupancy_before = Some(k.occupancy_before);
            kr.occupancy_after = Some(k.occupancy_after);
            kr.inserted_instructions_reachable = k.inserted_instructions_reachable;
        }
        for f in &r.functions {
            if f.kernel || kernels.contains_key(&f.name) {
                let kr = kernels
                    .entry(f.name.clone())
                    .or_insert_with(|| empty_kernel(&f.name, status));
                kr.sites = f.sites.clone();
                kr.inserted_instructions = f.inserted_instructions;
                kr.inserted_bytes = f.inserted_bytes;
            } else if !f.sites.is_empty() {
                functions.insert(
                    f.name.clone(),
                    function_row(
                        &f.name,
                        f.sites.clone(),
                        f.inserted_instructions,
                        f.inserted_bytes,
                    ),
                );
            }
        }
        for s in &r.skipped {
            let why = format!("{}: {}", cmd_patch::serde_name(&s.kind), s.why);
            let slot = match kernels.get_mut(&s.function) {
                Some(k) => &mut k.skipped,
                None => {
                    &mut functions
                        .entry(s.function.clone())
                        .or_insert_with(|| function_row(&s.function, BTreeMap::new(), 0, 0))
                        .skipped
                }
            };
            *slot.entry(why).or_default() += 1;
        }
    }
    for k in kernels.values_mut() {
        if k.status == "nothing_to_do"
            && (k.inserted_instructions > 0 || k.inserted_instructions_reachable > 0)
        {
            k.status = "instrumented".into();
        } else if k.status == "instrumented"
            && k.inserted_instructions == 0
            && k.inserted_instructions_reachable == 0
        {
            k.status = "nothing_to_do".into();
        }
    }
    row.kernels = kernels.into_values().collect();
    row.functions = functions.into_values().collect();
    row
}

fn empty_kernel(name: &str, status: &str) -> KernelRow {
    KernelRow {
        name: name.into(),
        status: status.into(),
        sites: BTreeMap::new(),
        skipped: BTreeMap::new(),
        inserted_instructions: 0,
        inserted_bytes: 0,
        inserted_instructions_reachable: 0,
        wave_size: None,
        vgprs: None,
        sgprs_before: None,
        sgprs_after: None,
        occupancy_before: None,
        occupancy_after: None,
    }
}

fn function_row(name: &str, sites: BTreeMap<String, u32>, insts: u32, bytes: u32) -> FunctionRow {
    FunctionRow {
        name: name.into(),
        sites,
        skipped: BTreeMap::new(),
        inserted_instructions: insts,
        inserted_bytes: bytes,
    }
}

/// A failed-closed reason without the function name and address prefix (`f at 0x10: why`) and
/// with hexadecimal numbers replaced by `0x_`, so equal causes are counted together.
fn reason_class(r: &str) -> String {
    let core = if let Some(v) = r.strip_prefix("verifier: [") {
        // `verifier: [check] function orig 0x.. new 0x..: message: details`
        let check = v.split(']').next().unwrap_or_default();
        let msg = v.find(": ").map_or("", |i| &v[i + 2..]);
        format!(
            "verifier: [{check}] {}",
            msg.split(": ").next().unwrap_or_default()
        )
    } else {
        match r.find(" at 0x") {
            Some(i) => r[i..].find(": ").map_or(r, |j| &r[i + j + 2..]).to_string(),
            None => r.to_string(),
        }
    };
    let mut out = String::with_capacity(core.len());
    let mut rest = core.as_str();
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        out.push_str("0x_");
        let tail = &rest[i + 2..];
        let n = tail
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(tail.len());
        rest = &tail[n..];
    }
    out.push_str(rest);
    out
}

fn totals(files: &[FileReport]) -> Totals {
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
fn totals_coverage(t: &Totals) -> Vec<sqtt_rewrite::rewrite::Coverage> {
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
            let c = by.entry(f).or_insert_with(|| Coverage::empty(f));
            c.found += u64::from(n);
            if why.starts_with(sqtt_rewrite::verbatim::STUB_SKIP) {
                c.in_stubs += u64::from(n);
            }
        }
    }
    by.into_values().collect()
}

fn map_text(m: &BTreeMap<String, u32>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// How many not-processed files [`render`] lists by name (the JSON report lists all).
const NOT_INPUTS_SHOWN: usize = 10;

/// The human report (stdout): one line per file, object, kernel and device function, then totals.
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
            for why in &o.reasons {
                let _ = writeln!(s, "    reason: {why}");
            }
            for n in &o.notes {
                let _ = writeln!(s, "    note: {n}");
            }
            for k in &o.kernels {
                let _ = writeln!(
                    s,
                    "    kernel {}: {}; sites {}; +{} instructions (+{} reachable), +{} bytes; wave{} vgprs {}{} occupancy {}->{}",
                    k.name,
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
                for (why, n) in &k.skipped {
                    let _ = writeln!(s, "      skipped {n}x {why}");
                }
            }
            for fr in &o.functions {
                let _ = writeln!(
                    s,
                    "    function {}: sites {}; +{} instructions, +{} bytes",
                    fr.name,
                    map_text(&fr.sites),
                    fr.inserted_instructions,
                    fr.inserted_bytes
                );
                for (why, n) in &fr.skipped {
                    let _ = writeln!(s, "      skipped {n}x {why}");
                }
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
    if !cov.is_empty() {
        let _ = writeln!(s, "  coverage: {}", crate::cmd_patch::coverage_text(&cov));
    }
    let _ = writeln!(
        s,
        "  inserted: {} instructions, {} bytes",
        t.inserted_instructions, t.inserted_bytes
    );
    let _ = writeln!(s, "  verifier rejected: {}", t.verifier_rejected);
    for (why, n) in &t.skipped {
        let _ = writeln!(s, "  skipped {n}x {why}");
    }
    for (why, n) in &t.failed_closed_reasons {
        let _ = writeln!(s, "  failed closed {n}x {why}");
    }
    for (why, n) in &t.input_errors {
        let _ = writeln!(s, "  input error {n}x {why}");
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

/// `<path>` or `<path> [<entry>]`.
fn object_location(file: &str, entry: &str) -> String {
    if entry.is_empty() {
        file.to_string()
    } else {
        format!("{file} [{entry}]")
    }
}

/// `<object location>: <kernel|function> <name>`.
fn location(file: &str, entry: &str, what: &str, name: &str) -> String {
    format!("{}: {what} {name}", object_location(file, entry))
}

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
            overhead(
                &mut out,
                &loc,
                "inserted bytes",
                (k.inserted_bytes, nk.inserted_bytes),
                sites,
                max_growth_pct,
            );
            let insts = (k.inserted_instructions, nk.inserted_instructions);
            overhead(
                &mut out,
                &loc,
                "inserted instructions",
                insts,
                sites,
                max_growth_pct,
            );
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
                overhead(
                    &mut out,
                    &loc,
                    "inserted bytes",
                    (f.inserted_bytes, nf.inserted_bytes),
                    sites,
                    max_growth_pct,
                );
                let insts = (f.inserted_instructions, nf.inserted_instructions);
                overhead(
                    &mut out,
                    &loc,
                    "inserted instructions",
                    insts,
                    sites,
                    max_growth_pct,
                );
            }
        }
    }
    out.sort();
    out
}

/// Every object of a report by (file path, entry).
fn index_objects(r: &BatchReport) -> BTreeMap<(&str, &str), &ObjectReport> {
    r.files
        .iter()
        .flat_map(|f| {
            f.objects
                .iter()
                .map(move |o| ((f.path.as_str(), o.entry.as_str()), o))
        })
        .collect()
}

fn coverage(
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

fn total(m: &BTreeMap<String, u32>) -> u32 {
    m.values().sum()
}

/// Static overhead check of one row. `(old, new)` values and `(old, new)` site counts. A row
/// without overhead in the baseline is new coverage, never a regression; when the row gained
/// sites the allowance grows in proportion (same cost per site is not a regression).
fn overhead(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_components() {
        assert!(match_name(b"*.co", b"a.co"));
        assert!(!match_name(b"*.co", b"a.cox"));
        assert!(match_name(b"gfx9[0-4]?__*", b"gfx942__x"));
        assert!(!match_name(b"gfx9[!4]2", b"gfx942"));
        assert!(match_components(&["**", "*.co"], &["a", "b", "c.co"]));
        assert!(match_components(&["**", "*.co"], &["c.co"]));
        assert!(!match_components(&["*", "*.co"], &["c.co"]));
    }

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
