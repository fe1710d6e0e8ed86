//! `--timings` (issue 15): the table on stderr lists every pipeline stage, the stage times add
//! up to the total and fit in the process's wall time as measured from outside, every stage
//! that ran took time, and `--fatbin` / `batch` sum over the right number of code objects.
//! Inputs are fixtures built by LLVM 22 (`fixtures/README.md`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const STAGES: [&str; 8] = [
    "load",
    "decode",
    "analyse",
    "instrument",
    "lay out",
    "encode",
    "verify",
    "write",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the binary with a clean environment; returns the output and the wall time (ms).
fn run(args: &[&str]) -> (Output, f64) {
    let t0 = Instant::now();
    let out = Command::new(BIN)
        .current_dir(workspace())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(args)
        .output()
        .expect("run sqtt-patch");
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (out, ms)
}

/// One table row: (wall ms, peak MiB); `None` when the row is missing.
fn row(table: &str, name: &str) -> Option<(f64, f64)> {
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name} ")))?;
    let rest = line.trim_start().strip_prefix(name)?;
    let cols: Vec<&str> = rest.split_whitespace().collect();
    let wall = cols.first()?.parse().ok()?;
    let peak = cols.last()?.parse().ok()?;
    Some((wall, peak))
}

/// Checks the table in `stderr`: every stage listed, total = sum of the stages, total at most
/// `wall_ms`; returns the rows.
fn check_table(stderr: &str, wall_ms: f64) -> Vec<(f64, f64)> {
    let rows: Vec<(f64, f64)> = STAGES
        .iter()
        .map(|s| row(stderr, s).unwrap_or_else(|| panic!("no {s:?} row in:\n{stderr}")))
        .collect();
    let (total, top) = row(stderr, "total").unwrap_or_else(|| panic!("no total in:\n{stderr}"));
    let sum: f64 = rows.iter().map(|r| r.0).sum();
    // Rows are printed to 0.1 ms.
    assert!((sum - total).abs() <= 0.1 * STAGES.len() as f64, "{stderr}");
    let max_peak = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    assert_eq!(top, max_peak, "{stderr}");
    // A process's RSS: more than the program's own pages, far less than 4 GiB here.
    assert!(max_peak > 1.0 && max_peak < 4096.0, "{stderr}");
    assert!(
        total <= wall_ms,
        "stages {total} ms > process {wall_ms} ms:\n{stderr}"
    );
    rows
}

#[test]
fn main_job_times_every_stage() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("out.co");
    let out_s = out.to_string_lossy().into_owned();
    let (o, wall) = run(&[
        "fixtures/objects/gfx942__long-branch__O3.co",
        "-o",
        &out_s,
        "--functions",
        "1",
        "--barriers",
        "1",
        "--timings",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("timings of fixtures/objects/gfx942__long-branch__O3.co"),
        "{err}"
    );
    let rows = check_table(&err, wall);
    // Every stage runs for an instrumented object, and the clock has microsecond resolution:
    // a stage that is not hooked up shows 0.0.
    for (s, r) in STAGES.iter().zip(&rows) {
        assert!(r.0 > 0.0, "stage {s} has no time:\n{err}");
    }
    // The stages cover the process's work: start-up and argument parsing are what is left.
    let total: f64 = rows.iter().map(|r| r.0).sum();
    assert!(
        total >= 0.3 * wall,
        "stages {total} ms of a {wall} ms process:\n{err}"
    );
    // Without the flag: no table.
    let (o, _) = run(&[
        "fixtures/objects/gfx942__long-branch__O3.co",
        "-o",
        &out_s,
        "--functions",
        "1",
        "--barriers",
        "1",
    ]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("timings"));
}

#[test]
fn fatbin_and_batch_sum_over_code_objects() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let out = tmp.path().join("out.hipfb");
    let out_s = out.to_string_lossy().into_owned();
    let (o, wall) = run(&[
        "--fatbin",
        "fixtures/bundles/calls-4arch__plain.hipfb",
        "-o",
        &out_s,
        "--functions",
        "1",
        "--timings",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    // The bundle holds four code objects (fixtures/README.md, "Bundles").
    assert!(err.contains(": 4 code object(s), summed"), "{err}");
    assert!(err.contains("  process "), "{err}");
    // Stages summed over objects processed in parallel: at most the process's wall time per
    // thread (rayon uses one per core).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    check_table(&err, wall * threads);
    let dir = tmp.path().join("batch");
    let dir_s = dir.to_string_lossy().into_owned();
    let (o, wall) = run(&[
        "batch",
        "fixtures/objects/gfx942__calls__O3.co",
        "fixtures/objects/gfx1100__calls__O3.co",
        "fixtures/bundles/calls-4arch__plain.hipfb",
        "-o",
        &dir_s,
        "--functions",
        "1",
        "--timings",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("batch (3 files): 6 code object(s), summed"),
        "{err}"
    );
    check_table(&err, wall * threads);
}
