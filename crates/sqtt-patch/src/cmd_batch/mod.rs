//! `sqtt-patch batch PATH... [-o OUTDIR | --check] [--baseline OLD.json]`: instrument every code
//! object, offload bundle and host binary found under files, directories (recursively) and globs
//! with one set of options, in parallel, and summarize the result in one stable, sorted report that
//! can be compared with a stored baseline (CI regression check). See `docs/batch.md`.
//!
//! Exit codes (documented in `docs/batch.md`, the first that applies): [`exit::VERIFY`] 1,
//! [`exit::INPUT`] 2, [`exit::STRICT`] 3, [`exit::REGRESSION`] 4, else [`exit::OK`] 0.

use crate::cmd_patch::{self, CommonArgs};
use crate::exit;
use crate::fatbin::ArchFilter;
use crate::output;
use crate::progress::Progress;
use anyhow::{bail, Result};
use baseline::{compare, option_diff, options_map, read_baseline, without_times};
use discover::discover;
use process::process_file;
use rayon::prelude::*;
use render::{render, render_regressions};
use report::{totals, BatchReport, FileReport, Totals, SCHEMA};
use std::path::{Path, PathBuf};
use std::time::Instant;

mod baseline;
mod discover;
mod process;
mod render;
mod report;
mod tree;

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
    /// With one directory PATH and `-o OUTDIR`: OUTDIR becomes a copy of that directory (no
    /// root-name level): instrumented code objects at their relative paths, every other file
    /// (e.g. `TensileLibrary_*.dat` catalogues, objects not written) copied unchanged, symbolic
    /// links recreated with the same link text.
    #[arg(long, requires = "output", conflicts_with = "follow_links")]
    pub copy_tree: bool,
    /// Follow symbolic links to directories found below a directory argument (each directory
    /// and file is still visited once, by device and inode).
    #[arg(long)]
    pub follow_links: bool,
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

/// Runs the batch; returns the exit code. Errors (exit 2 through `main`): bad usage, unreadable
/// baseline, unwritable report.
pub fn run(args: BatchArgs) -> Result<i32> {
    if args.output.is_none() && !args.check {
        bail!("pass -o OUTDIR or --check");
    }
    if !(args.max_overhead_growth.is_finite() && args.max_overhead_growth >= 0.0) {
        bail!(
            "invalid --max-overhead-growth {}: must be a percentage >= 0",
            args.max_overhead_growth
        );
    }
    if args.copy_tree && !(args.paths.len() == 1 && args.paths[0].is_dir()) {
        bail!("--copy-tree takes exactly one directory PATH (OUTDIR becomes its copy)");
    }
    if let Some(d) = args.output.as_deref().filter(|_| args.copy_tree) {
        // A copy is written into a new or empty directory only: an existing entry (a link
        // especially) would be written through or left stale.
        let occupied = std::fs::symlink_metadata(d).is_ok()
            && std::fs::read_dir(d).map_or(true, |mut e| e.next().is_some());
        if occupied {
            bail!(
                "-o {}: --copy-tree writes a copy into a new or empty directory, and this one exists and is not empty",
                d.display()
            );
        }
    }
    let common = &args.common;
    let opts = cmd_patch::flag_options(&common.flags)?;
    let inputs: Vec<&Path> = args.paths.iter().map(PathBuf::as_path).collect();
    cmd_patch::require_work(&opts, &inputs)?;
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
    let out_dir = if args.check {
        None
    } else {
        args.output.as_deref()
    };
    if let Some(dir) = out_dir {
        refuse_output_inside_inputs(dir, &args.paths)?;
        output::check_out_dir(dir)?;
    }
    let discovered = discover(&args.paths, args.follow_links, args.copy_tree)?;
    // With --copy-tree the links a walk does not follow are recreated in the copy (counted in
    // its summary line), so "not visited (pass --follow-links)" would mislead.
    for line in discovered.not_visited.iter().filter(|_| !args.copy_tree) {
        eprintln!("sqtt-patch: note: not visited: {line}");
    }
    let (found, mut input_errors) = (discovered.found, discovered.errors);
    let inputs: Vec<PathBuf> = found.iter().map(|f| f.path.clone()).collect();
    if let Some(dir) = out_dir {
        for f in &found {
            output::check_not_input("-o", &dir.join(out_rel(&f.rel, args.copy_tree)), &inputs)?;
        }
    }
    // The report must not be one of the inputs either (written over a code object, it would
    // destroy it). A baseline to update that is an input was refused when it was read: a code
    // object is no batch report.
    if let Some(j) = common
        .report_json
        .as_deref()
        .filter(|j| j.as_os_str() != "-")
    {
        output::check_not_input("--report-json", j, &inputs)?;
    }
    let total_bytes = found
        .iter()
        .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
        .sum();
    let progress = Progress::new(total_bytes);
    let outcomes: Vec<Result<FileReport, String>> = found
        .par_iter()
        .map(|f| {
            let r = process_file(f, &opts, &filter, out_dir, common.strict, args.copy_tree);
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
    if let (true, Some(dir)) = (args.copy_tree, out_dir) {
        let c = tree::complete(&args.paths[0], dir)?;
        summary(&format!(
            "copy of {}: {} other file(s) copied unchanged, {} link(s) recreated\n",
            args.paths[0].display(),
            c.files,
            c.links
        ))?;
        for p in &c.special {
            eprintln!("sqtt-patch batch: not copied: {p}: not a regular file, directory or link (a FIFO, socket or device)");
        }
    }
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
    // `--strict` counts every input that lost coverage, with `-o` (those files were not
    // written) and with `--check` (nothing is written; exit 3 all the same).
    let lost = report
        .files
        .iter()
        .filter(|f| f.objects.iter().any(process::lost_coverage))
        .count();
    let code = if rejected {
        exit::VERIFY
    } else if bad_input {
        exit::INPUT
    } else if common.strict && lost > 0 {
        exit::STRICT
    } else if !regressions.is_empty() && !args.update_baseline {
        exit::REGRESSION
    } else {
        exit::OK
    };
    if common.strict && lost > 0 {
        // The lowest exit code wins (docs/batch.md): say 3 only when it is the exit code.
        let outcome = match (out_dir.is_some(), code == exit::STRICT) {
            (true, _) => "their outputs were not written".to_string(),
            (false, true) => "exit 3".to_string(),
            (false, false) => format!("exit {code} takes precedence over 3"),
        };
        eprintln!("sqtt-patch batch: --strict: {lost} input(s) failed closed, could not be read, skipped a site or have unreadable DWARF; {outcome}");
    }
    Ok(code)
}

/// Output path below OUTDIR of a file found at `rel` ([`discover::Found::rel`]): `rel` itself,
/// or with `--copy-tree` without its first component (the root directory's name).
pub(super) fn out_rel(rel: &Path, copy_tree: bool) -> &Path {
    let mut parts = rel.components();
    match parts.next() {
        Some(_) if copy_tree && parts.clone().next().is_some() => parts.as_path(),
        _ => rel,
    }
}

/// Refuses an output directory that is, or lies inside, a directory given as input: the
/// outputs would be read as inputs by the next run (and refused as already instrumented).
/// Paths are compared after resolving symbolic links and `..` (a missing output directory by
/// its nearest existing ancestor). Error (exit 2): names both paths.
fn refuse_output_inside_inputs(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    let o = resolved(out);
    for i in inputs.iter().filter(|i| i.is_dir()) {
        if o.starts_with(resolved(i)) {
            bail!(
                "-o {}: inside input directory {}; the outputs would become inputs of the next run: choose an OUTDIR outside the inputs",
                out.display(),
                i.display()
            );
        }
    }
    Ok(())
}

/// `p` made absolute with symbolic links and `..` resolved; a path that does not exist yet is
/// resolved through its nearest existing ancestor.
fn resolved(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => resolved(parent).join(name),
        (_, Some(name)) => std::env::current_dir().unwrap_or_default().join(name),
        _ => p.to_path_buf(),
    }
}
