//! `--timings` for the main job, `--fatbin` and `batch`: per-stage wall time and peak memory
//! ([`sqtt_rewrite::timings`]) printed to stderr as a table when the run ends.
//!
//! The main job measures its one code object directly. `--fatbin` and `batch` process code
//! objects in parallel: every object's record is added into one process-wide sum, together
//! with the container-level work (reading files, opening and rebuilding bundles, writing), and
//! the sum is printed with the process's own wall time and peak.

use sqtt_rewrite::timings::{peak_rss, Stage, Timings};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// 0: off; 1: on, one object at a time (peaks reset per stage); 2: on, objects in parallel.
static MODE: AtomicU8 = AtomicU8::new(0);
/// Records added by [`record`] and [`time`] (`--fatbin`, `batch`).
static SUM: Mutex<Option<Timings>> = Mutex::new(None);

/// Turns measuring on for this process. `parallel`: code objects are processed in parallel
/// (`--fatbin`, `batch`), so the RSS high-water mark is never reset (see
/// [`sqtt_rewrite::timings`]).
pub fn enable(parallel: bool) {
    MODE.store(if parallel { 2 } else { 1 }, Ordering::Relaxed);
}

/// A new record for one code object: measuring when [`enable`]d, else [`Timings::off`].
pub fn object() -> Timings {
    match MODE.load(Ordering::Relaxed) {
        0 => Timings::off(),
        m => Timings::new(m == 1),
    }
}

/// Ends `t` and adds it into the process-wide sum (nothing when `t` is off).
pub fn record(mut t: Timings) {
    if !t.is_on() {
        return;
    }
    t.end();
    if let Ok(mut s) = SUM.lock() {
        s.get_or_insert_with(Timings::off).add(&t);
    }
}

/// Runs `f` as container-level work of `stage` (not a code object of its own) and adds its
/// time into the process-wide sum.
pub fn time<R>(stage: Stage, f: impl FnOnce() -> R) -> R {
    let mut t = object();
    if !t.is_on() {
        return f();
    }
    t.begin(stage);
    let r = f();
    t.end();
    if let Ok(mut s) = SUM.lock() {
        s.get_or_insert_with(Timings::off).add(&t.without_object());
    }
    r
}

/// Prints one code object's table (the main job) to stderr, headed by `name`.
pub fn print_object(name: &str, t: &Timings) {
    if t.is_on() {
        eprint!(
            "{}",
            t.render(&format!(
                "sqtt-patch: timings of {name} (wall ms per stage; cpu ms: user + system time of the process, all threads, /proc/self/stat; peak MiB: the process's RSS high-water mark during the stage, VmHWM of /proc/self/status, reset per stage)"
            ))
        );
    }
}

/// Prints the process-wide sum (`--fatbin`, `batch`) to stderr: the table, then the process's
/// wall time since `started`, its CPU time and its peak RSS.
pub fn print_sum(what: &str, started: Instant) {
    if MODE.load(Ordering::Relaxed) == 0 {
        return;
    }
    let sum = SUM.lock().ok().and_then(|s| s.clone()).unwrap_or_default();
    eprint!(
        "{}",
        sum.render(&format!(
            "sqtt-patch: timings of {what}: {} code object(s), summed over objects processed in parallel (wall ms per stage, summed; cpu ms not measured per object; peak MiB: the process's RSS high-water mark when the stage ended, VmHWM of /proc/self/status)",
            sum.objects()
        ))
    );
    let peak = peak_rss().map_or("n/a".into(), |b| format!("{:.1}", b as f64 / 1048576.0));
    let cpu = sqtt_rewrite::timings::process_cpu()
        .map_or("n/a".into(), |d| format!("{:.0}", d.as_secs_f64() * 1000.0));
    eprintln!(
        "  {:<12} {:>10.1} {:>6} {:>8} {:>9}",
        "process",
        started.elapsed().as_secs_f64() * 1000.0,
        "",
        cpu,
        peak
    );
}
