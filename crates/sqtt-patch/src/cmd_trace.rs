//! `sqtt-patch flamegraph | perfetto | memtrace TRACE_DIR`: pictures and tables from a
//! `rocprofv3 --att` capture of instrumented code objects. The work is in the `sqtt-trace` crate;
//! this module parses flags, writes files and prints the warning summary (docs/trace.md).
//!
//! Exit codes: 0 = output written (warnings about skipped input are printed on stderr);
//! 2 = nothing usable (no UI directory, no record decoded to anything the output needs) or an
//! output file cannot be written; no output file is left behind then.

use anyhow::{bail, Context, Result};
use sqtt_trace::flame::Flame;
use sqtt_trace::memtrace::MemTrace;
use sqtt_trace::perfetto::Perfetto;
use sqtt_trace::trace::RunStats;
use sqtt_trace::{Options, PackedMode, Trace};
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

/// Flags shared by the three trace commands.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// A rocprofv3 --att output directory (searched recursively for ui_output_* directories).
    pub trace_dir: PathBuf,
    /// Packed gfx12 marker headers.
    #[arg(long, value_enum, default_value_t = Packed::Auto)]
    pub packed: Packed,
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
}

/// `sqtt-patch perfetto`.
#[derive(clap::Args, Debug)]
pub struct PerfettoArgs {
    #[command(flatten)]
    pub common: TraceArgs,
    /// Output directory (default: next to each UI directory).
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

fn options(a: &TraceArgs) -> Options {
    Options {
        packed: match a.packed {
            Packed::Auto => PackedMode::Auto,
            Packed::Raw => PackedMode::Raw,
            Packed::Normalised => PackedMode::Normalised,
        },
        cu: a.cu.clone(),
        simd: a.simd.clone(),
        wave: a.wave.clone(),
        progress: true,
    }
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

/// Writes `bytes` to `path` through a temporary file beside it (no partial output). An existing
/// path that is not a regular file (`/dev/null`, a FIFO) is written into, never replaced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return std::fs::write(path, bytes)
            .with_context(|| format!("{}: cannot write", path.display()));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map_or("out".into(), |n| n.to_string_lossy())
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))
}

/// Runs `sqtt-patch flamegraph`.
pub fn run_flamegraph(a: FlamegraphArgs) -> Result<i32> {
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let mut flame = Flame::default();
    let stats = trace.run(&options(&a.common), &mut flame)?;
    summary(&trace, &stats);
    if flame.total() == 0 {
        bail!(
            "{}: no cycles inside a scope marker (no function/user scope decoded); nothing to draw",
            a.common.trace_dir.display()
        );
    }
    let d = a.common.demangle;
    let title = format!("SQTT markers: {}", a.common.trace_dir.display());
    let svg = flame.svg(&trace.names, d, &title)?;
    let folded = flame.folded(&trace.names, d);
    let speedscope = a
        .speedscope
        .as_ref()
        .map(|_| serde_json::to_vec(&flame.speedscope(&trace.names, d, &title)))
        .transpose()?;
    write_atomic(&a.output, &svg)?;
    match a.folded.as_deref() {
        Some(p) if p == Path::new("-") => {
            crate::cmd_patch::write_stdout(&folded)?;
        }
        Some(p) => write_atomic(p, folded.as_bytes())?,
        None => {}
    }
    if let (Some(p), Some(s)) = (&a.speedscope, speedscope) {
        write_atomic(p, &s)?;
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
    if let Some(g) = a.clock_rate_ghz {
        if !(g.is_finite() && g > 0.0) {
            bail!("--clock-rate-ghz {g}: must be a positive number");
        }
    }
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let mut sink = Perfetto::new(a.output.as_deref(), a.clock_rate_ghz, a.common.demangle);
    let stats = trace.run(&options(&a.common), &mut sink)?;
    summary(&trace, &stats);
    if stats.headers == 0 {
        for p in &sink.written {
            let _ = std::fs::remove_file(p);
        }
        bail!(
            "{}: no marker header decoded; no trace written",
            a.common.trace_dir.display()
        );
    }
    for p in &sink.written {
        eprintln!("sqtt-patch: wrote {}", p.display());
    }
    Ok(0)
}

/// Runs `sqtt-patch memtrace`.
pub fn run_memtrace(a: MemtraceArgs) -> Result<i32> {
    let mut trace = Trace::open(&a.common.trace_dir)?;
    let mut sink = MemTrace::create(&a.output)
        .with_context(|| format!("{}: cannot write", a.output.display()))?;
    let stats = match trace.run(&options(&a.common), &mut sink) {
        Ok(s) => s,
        Err(e) => {
            sink.abandon();
            return Err(e);
        }
    };
    summary(&trace, &stats);
    if sink.blocks == 0 {
        sink.abandon();
        bail!(
            "{}: no address-trace block decoded; nothing written",
            a.common.trace_dir.display()
        );
    }
    let n = sink.blocks;
    let path = sink.finish(&trace.names, a.common.demangle)?;
    eprintln!("sqtt-patch: {n} address blocks; wrote {}", path.display());
    Ok(0)
}
