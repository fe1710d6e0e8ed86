//! `sqtt-patch flamegraph | perfetto | memtrace | timeline TRACE_DIR`: pictures and tables from a
//! `rocprofv3 --att` capture of instrumented code objects. The work is in the `sqtt-trace` crate;
//! this module parses flags, writes files and prints the warning summary (docs/trace.md).
//!
//! Exit codes: 0 = output written (warnings about skipped input are printed on stderr; `memtrace`
//! on a capture without address blocks writes `[]`, as AMD's reader does); 2 = nothing usable
//! (no UI directory, no record decoded to anything the output needs) or an output cannot be
//! written; no output and no temporary file is left behind then. Outputs are
//! checked before the trace is read (a directory, a missing directory, an input of the run,
//! two flags naming one file are refused) and committed together at the end (`output.rs`).

use crate::output;
use anyhow::{bail, Context, Result};
use sqtt_trace::flame::Flame;
use sqtt_trace::memtrace::MemTrace;
use sqtt_trace::perfetto::Perfetto;
use sqtt_trace::timeline::Timeline;
use sqtt_trace::trace::RunStats;
use sqtt_trace::{ClockCorrection, Options, PackedMode, Trace};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How packed gfx12 headers are read.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum Packed {
    /// `normalised` for att_tool.py directories, `raw` otherwise.
    #[default]
    Auto,
    /// As the hardware wrote them (rocprofv3): decode and correct times.
    Raw,
    /// Already rewritten to (id << 2) | flags by att_tool.py.
    Normalised,
}

/// How gfx12 packed header times are corrected.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum Correction {
    /// The spec's algorithm (docs/markers/SPEC.md, "GFX12 Shader Clock Packing").
    #[default]
    Spec,
    /// As rocprof-trace-decoder's att.py at 3adae6a5 (_correct_marker_timestamps).
    Att,
}

/// Flags shared by the three trace commands.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// A rocprofv3 --att output directory (searched recursively for ui_output_* directories).
    pub trace_dir: PathBuf,
    /// Packed gfx12 marker headers.
    #[arg(long, value_enum, default_value_t = Packed::Auto)]
    pub packed: Packed,
    /// Time correction of gfx12 packed headers: the spec's (default) or att.py's at 3adae6a5.
    #[arg(long, value_enum, default_value_t = Correction::Spec)]
    pub clock_correction: Correction,
    /// Demangle C++ names.
    #[arg(long)]
    pub demangle: bool,
    /// Only these CUs (WGPs on gfx10+), comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    pub cu: Vec<u32>,
    /// Only these SIMDs.
    #[arg(long, value_delimiter = ',')]
    pub simd: Vec<u32>,
    /// Only these wave slots.
    #[arg(long, value_delimiter = ',')]
    pub wave: Vec<u32>,
}

/// `sqtt-patch flamegraph`.
#[derive(clap::Args, Debug)]
pub struct FlamegraphArgs {
    #[command(flatten)]
    pub common: TraceArgs,
    /// SVG output.
    #[arg(short, long, default_value = "sqtt_flamegraph.svg")]
    pub output: PathBuf,
    /// Also write folded stacks (`frame;frame cycles`); `-` for stdout.
    #[arg(long)]
    pub folded: Option<PathBuf>,
    /// Also write speedscope JSON.
    #[arg(long)]
    pub speedscope: Option<PathBuf>,
    /// Title of the SVG and the speedscope profile (default: the capture's name, its kernels and
    /// dispatches, and the unit).
    #[arg(long)]
    pub title: Option<String>,
    /// Most scope frames per stack (1 to 4096); deeper frames are cut and counted, their cycles
    /// drawn in the frame at this depth.
    #[arg(long, default_value_t = sqtt_trace::flame::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
}

/// `sqtt-patch perfetto`.
#[derive(clap::Args, Debug)]
pub struct PerfettoArgs {
    #[command(flatten)]
    pub common: TraceArgs,
    /// Output directory (default: `./<capture name>.perfetto/` in the working directory).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Shader clock in GHz for `ts` in microseconds (default: realtime.json, else cycles).
    #[arg(long)]
    pub clock_rate_ghz: Option<f64>,
}

/// `sqtt-patch memtrace`.
#[derive(clap::Args, Debug)]
pub struct MemtraceArgs {
    #[command(flatten)]
    pub common: TraceArgs,
    /// JSON output.
    #[arg(short, long, default_value = "sqtt_memtrace.json")]
    pub output: PathBuf,
}

/// `sqtt-patch timeline`.
#[derive(clap::Args, Debug)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub common: TraceArgs,
    /// SVG output.
    #[arg(short, long, default_value = "sqtt_timeline.svg")]
    pub output: PathBuf,
    /// Shader clock in GHz for the microsecond labels (default: realtime.json, else cycles only).
    #[arg(long)]
    pub clock_rate_ghz: Option<f64>,
    /// Most wave rows drawn (the first wave instances in capture order; at most 1000).
    #[arg(long, default_value_t = 64)]
    pub max_waves: usize,
    /// Width of the picture in pixels (600 to 4000).
    #[arg(long, default_value_t = 1200)]
    pub width: u32,
    /// Title of the picture (default: the capture's name).
    #[arg(long)]
    pub title: Option<String>,
}

/// Refuses a shader clock outside 0.1 ..= 10 GHz.
fn check_clock(ghz: Option<f64>) -> Result<()> {
    if let Some(g) = ghz {
        // Shader clocks of every AMD GPU lie well inside this range (100 MHz .. 10 GHz); a value
        // outside it is a unit mistake (MHz or Hz given) and would scale the timeline absurdly.
        if !(0.1..=10.0).contains(&g) {
            bail!("--clock-rate-ghz {g:?}: must be a shader clock in GHz between 0.1 and 10");
        }
    }
    Ok(())
}

fn options(a: &TraceArgs) -> Options {
    Options {
        packed: match a.packed {
            Packed::Auto => PackedMode::Auto,
            Packed::Raw => PackedMode::Raw,
            Packed::Normalised => PackedMode::Normalised,
        },
        clock_correction: match a.clock_correction {
            Correction::Spec => ClockCorrection::Spec,
            Correction::Att => ClockCorrection::Att,
        },
        cu: a.cu.clone(),
        simd: a.simd.clone(),
        wave: a.wave.clone(),
        progress: true,
    }
}

/// The wave filter flags given (`--cu 1,2 --simd 0`), or `None` when every wave is drawn.
fn selection(a: &TraceArgs) -> Option<String> {
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let given: Vec<String> = [("--cu", &a.cu), ("--simd", &a.simd), ("--wave", &a.wave)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(flag, v)| format!("{flag} {}", list(v)))
        .collect();
    (!given.is_empty()).then(|| given.join(" "))
}

fn summary(trace: &Trace, stats: &RunStats) {
    eprint!("{}", trace.warnings);
    eprintln!(
        "sqtt-patch: {} UI director{}, {} records, {} marker headers, {} address blocks",
        stats.dirs,
        if stats.dirs == 1 { "y" } else { "ies" },
        stats.records,
        stats.headers,
        stats.blocks
    );
}

/// The checked destination of one output flag: standard output for `-` when `dash` allows it,
/// else [`output::check`]; refused when it is one of the run's `inputs`.
fn dest(flag: &str, path: &Path, inputs: &[PathBuf], dash: bool) -> Result<output::Dest> {
    if dash && path.as_os_str() == "-" {
        return Ok(output::stdout());
    }
    let d = output::check(flag, path)?;
    output::check_not_input(flag, path, inputs)?;
    Ok(d)
}

/// Writes every output to its temporary file first and moves them into place only when all are
/// complete: a failure leaves no output and no temporary file.
fn write_outputs(outs: Vec<(output::Dest, Vec<u8>)>) -> Result<()> {
    let mut sinks = Vec::new();
    for (d, bytes) in &outs {
        let mut s = output::Sink::new(d)?;
        s.file()
            .write_all(bytes)
            .with_context(|| format!("{}: cannot write", d.label))?;
        sinks.push(s);
    }
    output::commit_all(sinks)
}

/// The name of a capture for titles: the last component of its path (of the absolute path for
/// `.` or `..`), never the whole path.
fn capture_name(p: &Path) -> String {
    let last = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    last(p)
        .or_else(|| std::fs::canonicalize(p).ok().and_then(|c| last(&c)))
        .unwrap_or_else(|| "capture".to_string())
}

/// `n` with the singular or plural noun.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Runs `sqtt-patch flamegraph`.
pub fn run_flamegraph(a: FlamegraphArgs) -> Result<i32> {
    let limit = sqtt_trace::flame::MAX_DEPTH_LIMIT;
    if !(1..=limit).contains(&a.max_depth) {
        bail!("--max-depth {}: must be between 1 and {limit}", a.max_depth);
    }
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let inputs = trace.inputs();
    let svg_dest = dest("-o", &a.output, &inputs, false)?;
    let folded_dest = (a.folded.as_deref())
        .map(|p| dest("--folded", p, &inputs, true))
        .transpose()?;
    let speedscope_dest = (a.speedscope.as_deref())
        .map(|p| dest("--speedscope", p, &inputs, false))
        .transpose()?;
    let folded_file = a.folded.as_deref().filter(|p| p.as_os_str() != "-");
    let named = [
        Some(("-o", a.output.as_path())),
        folded_file.map(|p| ("--folded", p)),
        a.speedscope.as_deref().map(|p| ("--speedscope", p)),
    ];
    let named: Vec<(&str, &Path)> = named.into_iter().flatten().collect();
    for (i, (fa, pa)) in named.iter().enumerate() {
        for (fb, pb) in &named[i + 1..] {
            output::check_distinct(fa, pa, fb, pb)?;
        }
    }
    let mut flame = Flame::with_max_depth(a.max_depth);
    let stats = trace.run(&options(&a.common), &mut flame)?;
    summary(&trace, &stats);
    if flame.total() == 0 {
        // Name the filter when one was given: it, not the capture, may have left nothing
        // (session-17 fresh tester).
        let why = match selection(&a.common) {
            Some(f) => format!("on the waves {f} selects"),
            None => "(no function/user scope decoded)".to_string(),
        };
        bail!(
            "{}: no cycles inside a scope marker {why}; nothing to draw",
            a.common.trace_dir.display()
        );
    }
    let d = a.common.demangle;
    let (kernels, dispatches) = flame.counts();
    let title = a.title.clone().unwrap_or_else(|| {
        format!(
            "{}: {}, {} (shader cycles)",
            capture_name(&a.common.trace_dir),
            plural(kernels, "kernel", "kernels"),
            plural(dispatches, "dispatch", "dispatches")
        )
    });
    let mut subtitle = format!(
        "width: {} shader cycles inside scope markers; hover for the whole name, click to zoom",
        flame.total()
    );
    let note = flame.depth_note();
    let unclosed = flame.unclosed_note();
    for n in note.iter().chain(&unclosed) {
        subtitle.push_str("; ");
        subtitle.push_str(n);
    }
    let mut outs = vec![(svg_dest, flame.svg(&trace.names, d, &title, &subtitle)?)];
    if let Some(f) = folded_dest {
        outs.push((f, flame.folded(&trace.names, d).into_bytes()));
    }
    if let Some(s) = speedscope_dest {
        outs.push((
            s,
            serde_json::to_vec(&flame.speedscope(&trace.names, d, &title))?,
        ));
    }
    write_outputs(outs)?;
    if let Some(n) = note {
        eprintln!("sqtt-patch: flame graph limited: {n}");
    }
    if let Some(n) = unclosed {
        eprintln!("sqtt-patch: note: {n}");
    }
    eprintln!(
        "sqtt-patch: {} cycles in scopes; wrote {}",
        flame.total(),
        a.output.display()
    );
    Ok(0)
}

/// Runs `sqtt-patch perfetto`.
pub fn run_perfetto(a: PerfettoArgs) -> Result<i32> {
    check_clock(a.clock_rate_ghz)?;
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let (out_dir, label) = match &a.output {
        Some(o) => (o.clone(), format!("-o {}", o.display())),
        None => default_perfetto_dir(&a.common.trace_dir)?,
    };
    if std::fs::metadata(&out_dir).is_ok_and(|m| !m.is_dir()) {
        bail!(
            "{label}: exists and is not a directory (perfetto writes one file per UI directory into -o DIR)"
        );
    }
    let root = a.common.trace_dir.as_path();
    let inputs = trace.inputs();
    for d in trace.ui_dirs() {
        let p = sqtt_trace::perfetto::output_path(d, Some(&out_dir), Some(root));
        if std::fs::metadata(&p).is_ok_and(|m| !m.is_file()) {
            bail!(
                "{}: exists and is not a regular file; refusing to replace it",
                p.display()
            );
        }
        output::check_not_input("the Perfetto output", &p, &inputs)?;
    }
    // Files are committed only when every UI directory was written: on any error below the
    // writer is dropped with its temporary files.
    // Directories it made are removed again when the run fails.
    let mut sink =
        Perfetto::new(Some(&out_dir), a.clock_rate_ghz, a.common.demangle).relative_to(root);
    let stats = trace.run(&options(&a.common), &mut sink)?;
    summary(&trace, &stats);
    if stats.headers == 0 {
        bail!(
            "{}: no marker header decoded; no trace written",
            a.common.trace_dir.display()
        );
    }
    sink.commit()?;
    for p in &sink.written {
        eprintln!("sqtt-patch: wrote {}", p.display());
    }
    Ok(0)
}

/// `perfetto`'s output directory without `-o`: `./<capture name>.perfetto` in the working
/// directory, never inside the capture (issue 32): refused when the working directory is inside
/// it. Returns the directory and its label for messages.
fn default_perfetto_dir(capture: &Path) -> Result<(PathBuf, String)> {
    let dir = PathBuf::from(format!("{}.perfetto", capture_name(capture)));
    let label = format!("the default output ./{}/", dir.display());
    let cwd = std::fs::canonicalize(".").context("the working directory: cannot resolve it")?;
    if std::fs::canonicalize(capture).is_ok_and(|c| cwd.starts_with(c)) {
        bail!(
            "{label} would be inside the capture {} (the working directory is inside it); give -o DIR outside the capture",
            capture.display()
        );
    }
    Ok((dir, label))
}

/// Runs `sqtt-patch memtrace`.
pub fn run_memtrace(a: MemtraceArgs) -> Result<i32> {
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let d = dest("-o", &a.output, &trace.inputs(), false)?;
    let cannot = || format!("{}: cannot write", d.label);
    let mut out = output::Sink::new(&d)?;
    let file = out.file().try_clone().with_context(cannot)?;
    let mut sink = MemTrace::new(file).with_context(cannot)?;
    let stats = trace.run(&options(&a.common), &mut sink)?;
    summary(&trace, &stats);
    if stats.records == 0 {
        // Nothing could be read: bad input (as flamegraph says), not an empty trace.
        bail!(
            "{}: no trace record could be read; nothing written",
            a.common.trace_dir.display()
        );
    }
    if sink.blocks == 0 {
        // As AMD's reader does: an empty list, and success.
        drop(sink);
        out.file().write_all(b"[]\n").with_context(cannot)?;
        output::commit_all(vec![out])?;
        eprintln!(
            "sqtt-patch: {}: the capture has no address blocks (instrument with --trace-addresses to \
             record them); wrote [] to {}",
            a.common.trace_dir.display(),
            a.output.display()
        );
        return Ok(0);
    }
    let (n, bare) = (sink.blocks, sink.without_addresses);
    sink.finish(&trace.names, a.common.demangle)
        .with_context(cannot)?;
    output::commit_all(vec![out])?;
    eprintln!(
        "sqtt-patch: {n} address blocks ({bare} struct-buffer blocks with components and no address); wrote {}",
        a.output.display()
    );
    Ok(0)
}

/// Runs `sqtt-patch timeline`.
pub fn run_timeline(a: TimelineArgs) -> Result<i32> {
    check_clock(a.clock_rate_ghz)?;
    if !(1..=sqtt_trace::timeline::MAX_WAVES).contains(&a.max_waves) {
        bail!(
            "--max-waves {}: must be between 1 and {}",
            a.max_waves,
            sqtt_trace::timeline::MAX_WAVES
        );
    }
    if !sqtt_trace::timeline::WIDTHS.contains(&a.width) {
        bail!("--width {}: must be between 600 and 4000 pixels", a.width);
    }
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let d = dest("-o", &a.output, &trace.inputs(), false)?;
    let mut tl = Timeline::new(a.max_waves);
    let stats = trace.run(&options(&a.common), &mut tl)?;
    summary(&trace, &stats);
    let title = a
        .title
        .clone()
        .unwrap_or_else(|| format!("{}: wave timeline", capture_name(&a.common.trace_dir)));
    let svg = tl
        .svg(
            &trace.names,
            a.common.demangle,
            &title,
            a.clock_rate_ghz,
            a.width,
        )
        .with_context(|| format!("{}", a.common.trace_dir.display()))?;
    write_outputs(vec![(d, svg.into_bytes())])?;
    if tl.waves_left_out > 0 || tl.items_left_out > 0 {
        eprintln!(
            "sqtt-patch: timeline limited: {} wave instances beyond --max-waves {}, {} scopes and markers beyond {} left out",
            tl.waves_left_out,
            a.max_waves,
            tl.items_left_out,
            sqtt_trace::timeline::MAX_ITEMS
        );
    }
    eprintln!(
        "sqtt-patch: {} waves drawn; wrote {}",
        tl.waves(),
        a.output.display()
    );
    Ok(0)
}
