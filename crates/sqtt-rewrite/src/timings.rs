//! Per-stage wall time and peak memory of the pipeline (`--timings`, issue 15).
//!
//! The stages are the README's arrow line: load → decode → analyse → instrument → lay out →
//! encode → verify → write. A [`Timings`] is handed down the pipeline; each stage boundary calls
//! [`Timings::begin`], which closes the running stage. A disabled `Timings` ([`Timings::off`])
//! records nothing and reads no clock.
//!
//! Memory is the resident set size high-water mark of the process, `VmHWM` of
//! `/proc/self/status` (Linux `proc(5)`), in bytes. With `reset_peak` the mark is reset at every
//! stage start by writing `5` to `/proc/self/clear_refs` (Linux ≥ 4.0, `proc(5)`), so a stage's
//! figure is the peak reached during that stage; without it (objects processed in parallel,
//! where one object's reset would hide another's peak) it is the process's peak so far when the
//! stage ended. Where `/proc` is unavailable, memory is not reported.
//!
//! CPU time (user + system, every thread of the process) comes from `/proc/self/stat` fields 14
//! and 15 (`proc(5)`, clock ticks of 1/100 s): 10 ms resolution. It is recorded only when one
//! code object is processed at a time (`reset_peak`): with objects in parallel the process's
//! CPU time is shared between them. On a loaded machine it is the figure to compare, as wall
//! time includes waiting for a core.

use std::time::{Duration, Instant};

/// One pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Read the input and parse the ELF / code object.
    Load,
    /// Decode every function's instructions.
    Decode,
    /// CFGs, PC-relative sequences, whole-object safety decisions, existing markers.
    Analyse,
    /// Sites, marker ids, register liveness and the inserted snippets.
    Instrument,
    /// The text plan and its layout: new addresses, relocated and relaxed branches, the new
    /// `.text` bytes.
    LayOut,
    /// The ELF rebuilt around the new `.text`: symbols, descriptors, DWARF remap, funcmap,
    /// metadata note, serialised bytes.
    Encode,
    /// The independent translation validator (crate `sqtt-verify`).
    Verify,
    /// The output written (file, bundle rebuild, host binary).
    Write,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 8] = [
        Stage::Load,
        Stage::Decode,
        Stage::Analyse,
        Stage::Instrument,
        Stage::LayOut,
        Stage::Encode,
        Stage::Verify,
        Stage::Write,
    ];

    /// The stage's name as printed (`lay out`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Decode => "decode",
            Stage::Analyse => "analyse",
            Stage::Instrument => "instrument",
            Stage::LayOut => "lay out",
            Stage::Encode => "encode",
            Stage::Verify => "verify",
            Stage::Write => "write",
        }
    }
}

/// Wall time and peak memory per stage, for one code object or summed over many.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    on: bool,
    reset_peak: bool,
    running: Option<(Stage, Instant, Option<Duration>)>,
    /// Wall time per stage, indexed like [`Stage::ALL`].
    wall: [Duration; 8],
    /// CPU time per stage (see the module documentation), indexed like [`Stage::ALL`].
    cpu: [Option<Duration>; 8],
    /// Peak RSS per stage (bytes), indexed like [`Stage::ALL`]; `None`: not measured.
    peak: [Option<u64>; 8],
    /// Code objects summed into this record.
    objects: usize,
}

impl Timings {
    /// A record that measures nothing (the default when `--timings` is not given).
    pub fn off() -> Timings {
        Timings::default()
    }

    /// A record that measures; `reset_peak`: reset the RSS high-water mark at every stage start
    /// (only meaningful when one code object is processed at a time).
    pub fn new(reset_peak: bool) -> Timings {
        Timings {
            on: true,
            reset_peak,
            objects: 1,
            ..Timings::default()
        }
    }

    /// The same record counting no code object (container-level work added into a sum).
    pub fn without_object(mut self) -> Timings {
        self.objects = 0;
        self
    }

    /// True when this record measures.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Ends the running stage (if any) and starts `stage`. A stage entered again accumulates.
    pub fn begin(&mut self, stage: Stage) {
        if !self.on {
            return;
        }
        self.end();
        if self.reset_peak {
            reset_peak_rss();
        }
        let cpu = if self.reset_peak { process_cpu() } else { None };
        self.running = Some((stage, Instant::now(), cpu));
    }

    /// Ends the running stage, if any.
    pub fn end(&mut self) {
        let Some((stage, t0, cpu0)) = self.running.take() else {
            return;
        };
        let i = stage as usize;
        self.wall[i] += t0.elapsed();
        if let (Some(a), Some(b)) = (cpu0, process_cpu()) {
            self.cpu[i] = Some(self.cpu[i].unwrap_or_default() + b.saturating_sub(a));
        }
        if let Some(p) = peak_rss() {
            self.peak[i] = Some(self.peak[i].map_or(p, |q| q.max(p)));
        }
    }

    /// Adds `other` (ended) into this record: wall times summed, peaks the larger, object counts
    /// summed. A sum starts from [`Timings::off`] (no objects).
    pub fn add(&mut self, other: &Timings) {
        self.on |= other.on;
        for i in 0..Stage::ALL.len() {
            self.wall[i] += other.wall[i];
            self.cpu[i] = match (self.cpu[i], other.cpu[i]) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
            self.peak[i] = match (self.peak[i], other.peak[i]) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        self.objects += other.objects;
    }

    /// Wall time of `stage`.
    pub fn wall(&self, stage: Stage) -> Duration {
        self.wall[stage as usize]
    }

    /// CPU time of `stage`, `None` when not measured (see the module documentation).
    pub fn cpu(&self, stage: Stage) -> Option<Duration> {
        self.cpu[stage as usize]
    }

    /// Peak RSS of `stage` in bytes (see the module documentation), `None` when not measured.
    pub fn peak(&self, stage: Stage) -> Option<u64> {
        self.peak[stage as usize]
    }

    /// Code objects summed into this record (1 for a single object).
    pub fn objects(&self) -> usize {
        self.objects
    }

    /// The table printed by `--timings`: one line per stage (wall milliseconds, share of the
    /// summed wall time in percent, CPU milliseconds, peak MiB), then a `total` line (summed
    /// times, largest peak). `title` heads it; every line ends with a newline.
    pub fn render(&self, title: &str) -> String {
        let total: Duration = self.wall.iter().sum();
        let mib = |p: Option<u64>| match p {
            Some(b) => format!("{:.1}", b as f64 / 1048576.0),
            None => "n/a".into(),
        };
        let ms = |d: Option<Duration>| match d {
            Some(d) => format!("{:.0}", d.as_secs_f64() * 1000.0),
            None => "n/a".into(),
        };
        let mut s = format!(
            "{title}\n  {:<12} {:>10} {:>6} {:>8} {:>9}\n",
            "stage", "wall ms", "%", "cpu ms", "peak MiB"
        );
        for st in Stage::ALL {
            let w = self.wall(st);
            let pct = if total.is_zero() {
                0.0
            } else {
                100.0 * w.as_secs_f64() / total.as_secs_f64()
            };
            s += &format!(
                "  {:<12} {:>10.1} {:>6.1} {:>8} {:>9}\n",
                st.name(),
                w.as_secs_f64() * 1000.0,
                pct,
                ms(self.cpu(st)),
                mib(self.peak(st))
            );
        }
        let top = self.peak.iter().flatten().copied().max();
        let cpu_total = self.cpu.iter().flatten().copied().reduce(|a, b| a + b);
        s += &format!(
            "  {:<12} {:>10.1} {:>6.1} {:>8} {:>9}\n",
            "total",
            total.as_secs_f64() * 1000.0,
            100.0,
            ms(cpu_total),
            mib(top)
        );
        s
    }
}

/// The process's resident set size high-water mark in bytes (`VmHWM` of `/proc/self/status`,
/// reported by the kernel in kB = 1024 bytes), `None` where it cannot be read.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time (user + system, all threads) of the process so far: `utime` + `stime` of
/// `/proc/self/stat` (fields 14 and 15, `proc(5)`) in clock ticks of 1/100 s (`USER_HZ`);
/// `None` where it cannot be read.
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Field 2 (the command name) is in parentheses and may hold spaces: count after its end.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Resets the process's RSS high-water mark to its current RSS (`5` into
/// `/proc/self/clear_refs`); silently does nothing where that is not possible.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_accumulate_and_add_up() {
        let mut t = Timings::new(false);
        t.begin(Stage::Load);
        std::thread::sleep(Duration::from_millis(20));
        t.begin(Stage::Verify);
        std::thread::sleep(Duration::from_millis(10));
        t.begin(Stage::Load);
        std::thread::sleep(Duration::from_millis(5));
        t.end();
        assert!(t.wall(Stage::Load) >= Duration::from_millis(25));
        assert!(t.wall(Stage::Verify) >= Duration::from_millis(10));
        assert_eq!(t.wall(Stage::Decode), Duration::ZERO);
        let mut sum = Timings::off();
        sum.add(&t);
        sum.add(&t);
        assert_eq!(sum.objects(), 2);
        assert!(sum.is_on());
        assert_eq!(sum.wall(Stage::Verify), 2 * t.wall(Stage::Verify));
        let text = t.render("timings");
        for st in Stage::ALL {
            assert!(text.contains(&format!("  {:<12} ", st.name())), "{text}");
        }
        assert!(text.contains("  total "), "{text}");
    }

    #[test]
    fn cpu_time_follows_a_busy_loop() {
        if process_cpu().is_none() {
            return; // no /proc: nothing to check
        }
        let mut t = Timings::new(true);
        t.begin(Stage::Analyse);
        let t0 = Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        t.end();
        let cpu = t.cpu(Stage::Analyse).unwrap_or_default();
        // Process CPU time counts every thread, and the test harness runs other tests beside
        // this one: at most the wall time on every core plus two ticks; at least some of the
        // loop's own time (the machine may be shared).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        assert!(
            cpu <= t.wall(Stage::Analyse) * cores + Duration::from_millis(20),
            "{cpu:?} on {cores} cores"
        );
        assert!(cpu >= Duration::from_millis(20), "{cpu:?}");
        assert_eq!(t.cpu(Stage::Load), None);
    }

    #[test]
    fn off_measures_nothing() {
        let mut t = Timings::off();
        t.begin(Stage::Load);
        std::thread::sleep(Duration::from_millis(2));
        t.end();
        assert_eq!(t.wall(Stage::Load), Duration::ZERO);
        assert!(!t.is_on());
    }

    #[test]
    fn peak_rss_is_read_and_covers_a_large_allocation() {
        let Some(before) = peak_rss() else {
            return; // no /proc: nothing to check
        };
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        let after = peak_rss().unwrap_or(0);
        assert!(after >= before.max(64 << 20), "{before} -> {after}");
    }
}
