//! The main job: `sqtt-patch IN -o OUT [flags]` rewrites one code object with SQTT markers.
//!
//! Options default to the spec's `SQTT_*` environment variables; flags win. The output is
//! verified by the independent translation validator before it is written, and written by
//! [`crate::output`] (atomically to a file, or streamed into a character device or FIFO).

use crate::exit;
use crate::output::{self, Dest};
use crate::summary;
use anyhow::{Context, Result};
use sqtt_rewrite::config::{self, Options};
use sqtt_rewrite::regions;
use sqtt_rewrite::rewrite::{Report, Status};
use sqtt_rewrite::timings::{Stage, Timings};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Flags of the main job and of `--fatbin` mode.
#[derive(clap::Args, Debug, Default)]
pub struct PatchArgs {
    /// Input code object (`.co`, `.hsaco`); with `--fatbin`, a bundle or a host executable / shared library.
    pub input: Option<PathBuf>,
    /// Output file: a new or regular file (written atomically), or a character device or FIFO
    /// (streamed into, e.g. `-o /dev/null` as a dry run).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Input is an offload bundle file or a host executable / shared library with HIP fat
    /// binaries: instrument every code object inside it.
    #[arg(long)]
    pub fatbin: bool,
    /// With `--fatbin`: write every rebuilt bundle as a zstd CCOB v3 (the format
    /// `clang-offload-bundler -compress` writes), whatever its input format, so a host binary
    /// whose bundles had to move does not grow by a second plain copy of them. Bundles without
    /// an instrumented code object keep their bytes.
    #[arg(long)]
    pub compress_bundles: bool,
    /// Print the human report on standard output.
    #[arg(long)]
    pub report: bool,
    /// Flags shared with `batch`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Flags shared by the main job, `--fatbin` and `batch` (defined once, issue 15).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct CommonArgs {
    /// What to instrument.
    #[command(flatten)]
    pub flags: InstrumentFlags,
    /// Exit with code 3 when any code object failed closed or skipped a requested site; the
    /// output of that input is then not written (reports still are).
    #[arg(long)]
    pub strict: bool,
    /// Write the JSON report to this file (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// With `--fatbin` or `batch`: only instrument code objects for this target (repeatable): a
    /// processor (`gfx942`) or a full target ID (`gfx942:sramecc+:xnack-`); others are copied
    /// unchanged. Default: all.
    #[arg(long = "offload-arch", value_name = "TARGET")]
    pub offload_arch: Vec<String>,
    /// Print the wall time and peak memory of every pipeline stage (load, decode, analyse,
    /// instrument, lay out, encode, verify, write) to stderr when done; with `--fatbin` and
    /// `batch`, summed over the code objects.
    #[arg(long)]
    pub timings: bool,
}

/// True when the outcome lost coverage in the sense of `--strict`: the object failed closed (or
/// could not be read), some requested site was skipped, its DWARF could not be read (inlined
/// functions unmarked), a function left alone does not decode (its sites cannot be seen), or a
/// region or point asked for (`--region`, `--point`) was not instrumented.
pub fn lost_coverage(r: &Report) -> bool {
    r.status == Status::FailedClosed
        || !r.skipped.is_empty()
        || r.inlined.dwarf_error.is_some()
        || r.left_alone.iter().any(|l| l.undecodable)
        || r.regions.as_ref().is_some_and(|g| !g.skipped.is_empty())
}

/// Instrumentation flags, shared by the main job, `--fatbin` and `batch`. Each defaults to its
/// seed-spec environment variable; a given flag wins over the variable.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct InstrumentFlags {
    /// Function entry/exit markers: N (instructions) or cost:N (weighted); 0 = off.
    /// Default: $SQTT_INSTRUMENT_FUNCTIONS.
    #[arg(long, value_name = "N|cost:N", allow_hyphen_values = true)]
    pub functions: Option<String>,
    /// Barrier markers (0 or 1). Default: $SQTT_INSTRUMENT_BARRIERS.
    #[arg(long, value_name = "0|1", value_parser = ["0", "1"])]
    pub barriers: Option<String>,
    /// Enter/exit markers around every kernel (post-link extra, off by default like the pass).
    #[arg(long)]
    pub kernel_scopes: bool,
    /// Natural loops as scopes (`U:` rows `loop FUNCTION+0xOFFSET (FILE:LINE)`), nested at most N
    /// deep (1 = outermost loops only; 0 = off); `N:iters` adds a point marker on every back
    /// edge (one per iteration: costly). Post-link extra, off by default.
    #[arg(long, value_name = "N[:iters]", allow_hyphen_values = true)]
    pub loops: Option<String>,
    /// A user-named region as a scope (`U:` row `region NAME FUNCTION+0xOFFSET (FILE:LINE)`):
    /// the code of lines FILE:LINE-LINE (DWARF line table) or the offsets SYMBOL+0xA..0xB of a
    /// function, where it is single-entry (repeatable). Post-link extra.
    #[arg(long, value_name = "NAME=FILE:LINE-LINE|NAME=SYMBOL+0xA..0xB")]
    pub region: Vec<String>,
    /// A user-named point marker (`P:` row) at the first instruction of FILE:LINE or at the
    /// instruction at SYMBOL+0xA (repeatable). Post-link extra.
    #[arg(long, value_name = "NAME=FILE:LINE|NAME=SYMBOL+0xA")]
    pub point: Vec<String>,
    /// A profile plan: one `region NAME=...` or `point NAME=...` per line, `#` comments
    /// (repeatable).
    #[arg(long, value_name = "FILE")]
    pub regions: Vec<PathBuf>,
    /// Keep .text where it is, byte for byte, and put the instrumented functions in a new
    /// executable segment (done by itself when a function cannot move; docs/left-alone.md).
    #[arg(long)]
    pub keep_text: bool,
    /// Memory-op markers N:M: one marker per chunk of up to N operations of one kind with at
    /// most M other instructions between consecutive ones (M=0: only back-to-back operations
    /// share a marker); off (or 0) = none. Default: $SQTT_INSTRUMENT_MEMORY.
    #[arg(long, value_name = "N:M", allow_hyphen_values = true)]
    pub memory: Option<String>,
    /// Per-lane address tracing: memory, lds or memory,lds; off (or 0) = none.
    /// Default: $SQTT_TRACE_ADDRESSES.
    #[arg(long, value_name = "memory|lds|memory,lds")]
    pub trace_addresses: Option<String>,
    /// Reorder boundary (accepted for compatibility; no effect post-link): none (or off, 0), asm
    /// (or 1) or fence (or 2). Default: $SQTT_MEM_BARRIER.
    #[arg(long, value_name = "none|asm|fence")]
    pub mem_barrier: Option<String>,
    /// gfx12 shader-clock bits packed into each marker header, 0 to 29 (0 = no packing).
    /// Default: $SQTT_SHADER_CLOCK_BITS.
    #[arg(long, allow_hyphen_values = true)]
    pub shader_clock_bits: Option<u32>,
    /// gfx12 shader-clock shift: the clock's lowest bit packed (needs --shader-clock-bits;
    /// bits + shift <= 32). Default: $SQTT_SHADER_CLOCK_SHIFT (4).
    #[arg(long, allow_hyphen_values = true)]
    pub shader_clock_shift: Option<u32>,
    /// HW_ID scope filtering with the spec's default masks (CU/WGP 0-1, SIMD 0xF); also enabled by
    /// any $SQTT_SCOPE_* variable or --scope-* flag.
    #[arg(long)]
    pub scope: bool,
    /// Scope mask of wave ids (decimal, 0x hex, -1 = all). Default: $SQTT_SCOPE_WAVE.
    #[arg(long, value_name = "MASK", allow_hyphen_values = true)]
    pub scope_wave: Option<String>,
    /// Scope mask of SIMDs. Default: $SQTT_SCOPE_SIMD (0xF).
    #[arg(long, value_name = "MASK", allow_hyphen_values = true)]
    pub scope_simd: Option<String>,
    /// Scope mask of CUs (gfx9) / WGPs (gfx10+). Default: $SQTT_SCOPE_CU (0x3).
    #[arg(long, value_name = "MASK", allow_hyphen_values = true)]
    pub scope_cu: Option<String>,
    /// Scope mask of workgroup ids. Default: $SQTT_SCOPE_WG.
    #[arg(long, value_name = "MASK", allow_hyphen_values = true)]
    pub scope_wg: Option<String>,
    /// Instrument an input that sqtt-patch already instrumented.
    #[arg(long)]
    pub force: bool,
}

/// A flag's parse error, naming the flag (the parsers name the environment variable).
fn flag_error(flag: &str, e: config::ConfigError) -> anyhow::Error {
    anyhow::anyhow!("invalid {flag} {:?}: {}", e.value, e.why)
}

/// `text` when it is not blank. A blank variable counts as unset (`Options::from_env`); a
/// blank flag value is a mistake (`--memory "$UNSET"`), not a request: it is named
/// (session-14 tester: `--trace-addresses ''` answered "nothing requested").
fn non_blank<'a>(flag: &str, text: &'a str, expected: &str) -> Result<&'a str> {
    if text.trim().is_empty() {
        anyhow::bail!(
            "invalid {flag} {text:?}: expected {expected} (leave the flag out, or give off, to turn it off)"
        );
    }
    Ok(text)
}

/// The `--region`, `--point` and `--regions FILE` specifications, in that order (`None` when
/// none is given: the environment's stand). Errors name the specification (and the file and line
/// of a plan file); two specifications of one kind may not share a name.
pub fn region_specs(args: &InstrumentFlags) -> Result<Option<Vec<regions::Spec>>> {
    if args.region.is_empty() && args.point.is_empty() && args.regions.is_empty() {
        return Ok(None);
    }
    let mut v = Vec::new();
    for (flag, kind, texts) in [
        ("--region", regions::SpecKind::Region, &args.region),
        ("--point", regions::SpecKind::Point, &args.point),
    ] {
        for t in texts {
            v.push(regions::parse_spec(kind, t).map_err(|e| {
                anyhow::anyhow!("invalid {flag} {:?}: {}", clip(t), clip(&e.to_string()))
            })?);
        }
    }
    for p in &args.regions {
        let text = read_plan(p)?;
        v.extend(
            regions::parse_plan(&p.display().to_string(), &text)
                .map_err(|e| anyhow::anyhow!("invalid --regions plan: {}", clip(&e)))?,
        );
    }
    regions::check_unique(&v)
        .map_err(|e| anyhow::anyhow!("invalid region or point: {}", clip(&e)))?;
    Ok(Some(v))
}

/// Largest `--regions` plan read (bytes): a plan is a few lines a person writes.
pub const MAX_PLAN_BYTES: u64 = 1 << 20;

/// The text of the `--regions` plan `p`. Errors: not a regular file (a FIFO, a device or a
/// directory: nothing to wait for or to read without end), larger than [`MAX_PLAN_BYTES`], not
/// UTF-8, unreadable.
fn read_plan(p: &Path) -> Result<String> {
    use std::io::Read;
    let label = || format!("--regions {}", p.display());
    let meta =
        std::fs::metadata(p).with_context(|| format!("{}: cannot read the plan", label()))?;
    if !meta.is_file() {
        anyhow::bail!("{}: not a regular file; a plan is a text file", label());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(p)
        .and_then(|f| f.take(MAX_PLAN_BYTES + 1).read_to_end(&mut bytes))
        .with_context(|| format!("{}: cannot read the plan", label()))?;
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        anyhow::bail!(
            "{}: larger than {MAX_PLAN_BYTES} bytes; a plan is a few lines",
            label()
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (byte {})",
            label(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// `s` cut to its first 200 characters (an error echoes what the user gave, not megabytes).
fn clip(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Refuses a run with nothing to do: with no instrumentation requested, a missing input path is
/// named first (it is the first thing to fix), then the missing request. Globs (`*`, `?`, `[`)
/// are not checked here (`batch` expands them).
pub fn require_work(opts: &Options, inputs: &[&Path]) -> Result<()> {
    if opts.any_enabled() {
        return Ok(());
    }
    for p in inputs {
        let glob = p.to_string_lossy().contains(['*', '?', '[']);
        if !glob && std::fs::symlink_metadata(p).is_err() {
            anyhow::bail!("{}: no such file or directory", p.display());
        }
    }
    anyhow::bail!("nothing requested: pass --functions N, --barriers 1, --memory N:M, --trace-addresses memory,lds, --kernel-scopes, --loops N, --region or --point (or set SQTT_INSTRUMENT_*)")
}

/// Builds the options from instrumentation flags: environment first, then flags.
pub fn flag_options(args: &InstrumentFlags) -> Result<Options> {
    // A variable whose flag is given is not read at all: the flag wins, even over a malformed value.
    let overridden = |k: &str| match k {
        "SQTT_INSTRUMENT_FUNCTIONS" => args.functions.is_some(),
        "SQTT_INSTRUMENT_BARRIERS" => args.barriers.is_some(),
        "SQTT_INSTRUMENT_MEMORY" => args.memory.is_some(),
        "SQTT_TRACE_ADDRESSES" => args.trace_addresses.is_some(),
        "SQTT_MEM_BARRIER" => args.mem_barrier.is_some(),
        "SQTT_SHADER_CLOCK_BITS" => args.shader_clock_bits.is_some(),
        "SQTT_SHADER_CLOCK_SHIFT" => args.shader_clock_shift.is_some(),
        "SQTT_SCOPE_WAVE" => args.scope_wave.is_some(),
        "SQTT_SCOPE_SIMD" => args.scope_simd.is_some(),
        "SQTT_SCOPE_CU" => args.scope_cu.is_some(),
        "SQTT_SCOPE_WG" => args.scope_wg.is_some(),
        _ => false,
    };
    // A variable of the spec that is not UTF-8 is an error, never silently ignored.
    for (k, v) in std::env::vars_os() {
        let Some(k) = k.to_str().filter(|k| k.starts_with("SQTT_")) else {
            continue;
        };
        if v.to_str().is_none() && !overridden(k) {
            anyhow::bail!("${k}: the value is not valid UTF-8; unset it or give its flag");
        }
    }
    let mut o = Options::from_env(|k| {
        if overridden(k) {
            None
        } else {
            std::env::var(k).ok()
        }
    })?;
    if let Some(f) = &args.functions {
        o.functions = config::parse_functions(f).map_err(|e| flag_error("--functions", e))?;
    }
    if let Some(b) = &args.barriers {
        o.barriers = config::parse_toggle("--barriers", b)?;
    }
    if args.kernel_scopes {
        o.kernel_scopes = true;
    }
    if args.keep_text {
        o.keep_text = true;
    }
    if let Some(l) = &args.loops {
        (o.loops, o.loop_iters) = config::parse_loops("--loops", l, true)?;
    }
    if let Some(specs) = region_specs(args)? {
        o.regions = specs;
    }
    if let Some(m) = &args.memory {
        let m = non_blank("--memory", m, "N:M")?;
        o.memory = config::parse_memory(m).map_err(|e| flag_error("--memory", e))?;
    }
    if let Some(t) = &args.trace_addresses {
        let t = non_blank("--trace-addresses", t, "memory, lds or memory,lds")?;
        o.trace_addresses =
            config::parse_trace_addresses(t).map_err(|e| flag_error("--trace-addresses", e))?;
    }
    if let Some(m) = &args.mem_barrier {
        let m = non_blank("--mem-barrier", m, "none, asm or fence")?;
        o.mem_barrier = config::parse_mem_barrier(m).map_err(|e| flag_error("--mem-barrier", e))?;
    }
    if let Some(b) = args.shader_clock_bits {
        o.shader_clock_bits = b;
    }
    if let Some(s) = args.shader_clock_shift {
        o.shader_clock_shift = s;
    }
    o.force_reinstrument = args.force;
    if args.scope {
        o.scope.get_or_insert_with(Default::default);
    }
    let flags = [
        ("--scope-wave", &args.scope_wave),
        ("--scope-simd", &args.scope_simd),
        ("--scope-cu", &args.scope_cu),
        ("--scope-wg", &args.scope_wg),
    ];
    for ((name, set), (flag, value)) in config::SCOPE_VARS.iter().zip(flags) {
        if let Some(v) = value {
            let mut m = o.scope.unwrap_or_default();
            set(
                &mut m,
                config::parse_mask(name, v).map_err(|e| flag_error(flag, e))?,
            );
            o.scope = Some(m);
        }
    }
    if args.shader_clock_shift.is_some() && o.shader_clock_bits == 0 {
        anyhow::bail!("--shader-clock-shift needs --shader-clock-bits N with N from 1 to 29 (or $SQTT_SHADER_CLOCK_BITS): with 0 clock bits no clock is packed");
    }
    o.validate().map_err(|e| {
        // A value the user gave as a flag is named by the flag, as the flag parsers name it.
        let given = [
            ("SQTT_INSTRUMENT_MEMORY", "--memory", args.memory.is_some()),
            (
                "SQTT_SHADER_CLOCK_BITS",
                "--shader-clock-bits",
                args.shader_clock_bits.is_some(),
            ),
            (
                "SQTT_SHADER_CLOCK_SHIFT",
                "--shader-clock-shift",
                args.shader_clock_shift.is_some(),
            ),
        ];
        match given
            .iter()
            .find(|(var, _, set)| *set && e.name.starts_with(var))
        {
            Some((_, flag, _)) => flag_error(flag, e),
            None => e.into(),
        }
    })?;
    if let Some(m) = &o.scope {
        let masks = [
            ("wave", m.wave),
            ("simd", m.simd),
            ("cu", m.cu),
            ("wg", m.wg),
        ];
        for (name, _) in masks.iter().filter(|(_, v)| *v == Some(0)) {
            eprintln!("sqtt-patch: warning: scope mask {name} is 0: no wave can match it, so every marker is skipped at run time");
        }
    }
    Ok(o)
}

/// Whether `a` and `b` are one file (same device and inode), as two hard links are.
fn same_inode(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses an output path that names the input file (the original would be lost) or a
/// `--regions` plan (`plans`), and `-` (outputs are binaries, never written to standard
/// output); checks the output and `--report-json` paths ([`output::check`]) before any work.
pub fn check_paths(
    input: &Path,
    output: &Path,
    report_json: Option<&Path>,
    plans: &[PathBuf],
) -> Result<Dest> {
    if output.as_os_str() == "-" {
        anyhow::bail!(
            "-o -: writing the output to standard output is not supported; give a file path"
        );
    }
    let dest = output::check("-o", output)?;
    // The same file by path, or by device and inode (a hard link: session-27 tester).
    let same = match (std::fs::canonicalize(input), std::fs::canonicalize(output)) {
        (Ok(a), Ok(b)) => a == b || same_inode(&a, &b),
        _ => false,
    };
    if same {
        anyhow::bail!(
            "{}: the output path is the input file; choose another -o path",
            output.display()
        );
    }
    output::check_not_input("-o", output, plans)?;
    if let Some(j) = report_json.filter(|j| j.as_os_str() != "-") {
        output::check_not_input("--report-json", j, plans)?;
        output::check("--report-json", j)?;
        output::check_distinct("-o", output, "--report-json", j)?;
        output::check_distinct("the input", input, "--report-json", j)?;
    }
    Ok(dest)
}

/// The status as user text.
pub fn status_text(s: Status) -> &'static str {
    match s {
        Status::Instrumented => "instrumented",
        Status::NothingToDo => "nothing to instrument",
        Status::FailedClosed => "failed closed",
    }
}

/// [`status_text`] of the report `r`, except that an object with sites found but none
/// instrumented (every one skipped, e.g. all in a function left alone) reads
/// `nothing instrumented (N site(s) skipped)`, not "nothing to instrument" (session-24 fresh
/// tester).
pub fn report_status_text(r: &Report) -> String {
    if r.status == Status::NothingToDo && !r.skipped.is_empty() {
        format!("nothing instrumented ({} site(s) skipped)", r.skipped.len())
    } else {
        status_text(r.status).to_string()
    }
}

/// A serialized enum's name (`function_entry`), never Rust's `Debug` name.
pub fn serde_name<T: serde::Serialize + std::fmt::Debug>(k: &T) -> String {
    match serde_json::to_value(k) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{k:?}"),
    }
}

/// The `--loops` lines of a report: counts, then the loops left out grouped by reason (three
/// examples each; the JSON report lists all).
fn loops_text(l: &sqtt_rewrite::inlined::LoopReport) -> String {
    let mut s = format!(
        "  loops: {} found, {} instrumented, {} deeper than --loops, {} left out, {} irreducible regions left alone\n",
        l.found,
        l.instrumented,
        l.too_deep,
        l.left_out.len(),
        l.irreducible
    );
    let mut by_why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for x in &l.left_out {
        by_why.entry(&x.why).or_default().push(&x.name);
    }
    for (why, names) in by_why {
        let shown: Vec<String> = names
            .iter()
            .take(3)
            .map(|n| summary::short_name(n))
            .collect();
        s += &format!(
            "  {} loop(s) not marked: {} (e.g. {})\n",
            names.len(),
            summary::readable(why),
            shown.join(", ")
        );
    }
    s
}

/// The report lines of the user-named regions and points: counts, then every instance or
/// specification not instrumented with its reason (the user named each one).
fn regions_text(g: &sqtt_rewrite::inlined::RegionReport) -> String {
    let mut s = format!(
        "  regions: {} given, {} found in functions, {} instrumented; points: {} given, {} found, {} instrumented\n",
        g.regions, g.found, g.instrumented, g.points, g.points_found, g.points_instrumented
    );
    for x in &g.skipped {
        let in_f = x
            .function
            .as_deref()
            .map(|f| format!(" in {}", summary::short_name(f)))
            .unwrap_or_default();
        s += &format!(
            "  {} {}{in_f} not instrumented: {}\n",
            x.kind.word(),
            x.spec,
            summary::readable(&x.why)
        );
    }
    s
}

/// The code's size before and after: `.text 100 -> 120 bytes`, or, when `.text` was kept in
/// place (its size unchanged, the instrumented code in a new section),
/// `.text 100 bytes kept in place, new .sqtt_text 120 bytes`.
pub fn code_size_text(r: &Report) -> String {
    if r.text_kept_in_place && r.status == Status::Instrumented {
        format!(
            ".text {} bytes kept in place, new {} {} bytes",
            r.text_size_before,
            sqtt_rewrite::rewrite::KEPT_TEXT_SECTION,
            r.text_size_after
        )
    } else {
        format!(
            ".text {} -> {} bytes",
            r.text_size_before, r.text_size_after
        )
    }
}

/// Human-readable report of one code object, headed by `what` (the file, or the bundle entry):
/// one line per kernel (its sites and its descriptor figures together) and per instrumented
/// device function, then skipped sites; every line ends with a newline. Failed-closed reasons,
/// functions left alone and skipped sites are grouped by kind with at most three examples,
/// long names shortened ([`crate::summary`]); the JSON report keeps every detail.
pub fn render_report(what: &str, r: &Report) -> String {
    let size = code_size_text(r);
    let mut s = format!(
        "{what}: target {}: {}; {size}; {} funcmap rows\n",
        r.target,
        report_status_text(r),
        r.funcmap_rows
    );
    s += &summary::reasons("  ", "failed closed", &r.reasons, summary::reason_class);
    if !r.coverage.is_empty() {
        s += &format!("  coverage: {}\n", coverage_text(&r.coverage));
    }
    for n in &r.notes {
        s += &format!("  warning: {}\n", summary::readable(n));
    }
    let inl = &r.inlined;
    if let Some(why) = &inl.unavailable {
        s += &format!("  {why}\n");
    }
    if inl.found > 0 {
        s += &format!(
            "  inlined functions: {} found, {} marked, {} gaps merged, {} landing blocks, {} small fragments and {} instances below the threshold, {} left out\n",
            inl.found,
            inl.marked,
            inl.merged_gaps,
            inl.landing_blocks,
            inl.small_fragments,
            inl.below_threshold,
            inl.left_out.len()
        );
        for l in &inl.left_out {
            s += &format!(
                "  inlined {} (called at {}) in {} not marked: {}\n",
                summary::short_name(&l.name),
                l.call,
                summary::short_name(&l.function),
                summary::readable(&l.why)
            );
        }
    }
    if let Some(l) = &r.loops {
        s += &loops_text(l);
    }
    if let Some(g) = &r.regions {
        s += &regions_text(g);
    }
    // Functions left alone and skipped sites: grouped by kind, each function named once
    // (shortened), at most three examples per kind; the JSON report has every detail.
    if !r.left_alone.is_empty() {
        let mut g = summary::Groups::default();
        for l in &r.left_alone {
            let first = l
                .why
                .strip_prefix("at ")
                .and_then(|w| w.split(':').next())
                .map(|a| format!(" (first problem at {a})"))
                .unwrap_or_default();
            g.add(
                &l.why,
                "",
                &l.name,
                format!(" at {:#x}{first}", l.address),
                1,
            );
        }
        let how = if r.text_kept_in_place {
            "kept at its address"
        } else {
            "copied verbatim"
        };
        s += &format!(
            "  left alone ({how}, not instrumented): {} function(s)\n",
            r.left_alone.len()
        );
        s += &g.render("    ", true);
    }
    let sites = |f: &sqtt_rewrite::rewrite::FunctionReport| {
        let list: Vec<String> = f.sites.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(
            "{} (+{} instructions, +{} bytes{})",
            if list.is_empty() {
                "no sites".into()
            } else {
                list.join(" ")
            },
            f.inserted_instructions,
            f.inserted_bytes,
            f.scope_id.map(|i| format!(", id {i}")).unwrap_or_default()
        )
    };
    for k in &r.kernels {
        // gfx10+ waves get the full SGPR file: the descriptor has no SGPR allocation to report.
        let sgprs = match (k.sgprs_before, k.sgprs_after) {
            (Some(b), Some(a)) => format!(" sgprs {b}->{a}"),
            _ => String::new(),
        };
        let own = r
            .functions
            .iter()
            .find(|f| f.kernel && f.name == k.name && f.inserted_instructions > 0)
            .map(|f| format!("{}; ", sites(f)))
            .unwrap_or_default();
        s += &format!(
            "  kernel {}: {own}wave{} vgprs {}{sgprs} occupancy {}->{} waves/SIMD, +{} instructions reachable\n",
            summary::short_name(&k.name), k.wave_size, vgprs_text(k.vgprs, k.vgprs_after), k.occupancy_before, k.occupancy_after, k.inserted_instructions_reachable
        );
    }
    let listed = |f: &&sqtt_rewrite::rewrite::FunctionReport| {
        f.inserted_instructions > 0 && !(f.kernel && r.kernels.iter().any(|k| k.name == f.name))
    };
    for f in r.functions.iter().filter(listed) {
        s += &format!(
            "  {} {}: {}\n",
            if f.kernel { "kernel" } else { "function" },
            summary::short_name(&f.name),
            sites(f)
        );
    }
    if !r.skipped.is_empty() {
        let mut g = summary::Groups::default();
        for sk in &r.skipped {
            g.add(
                &sk.why,
                &serde_name(&sk.kind),
                &sk.function,
                format!(" at {:#x}", sk.addr),
                1,
            );
        }
        s += &format!("  skipped: {} site(s)\n", g.total());
        s += &g.render("    ", true);
    }
    for m in &r.existing_markers {
        s += &format!("  existing marker kept: {m}\n");
    }
    s
}

pub use sqtt_pipeline::Patched;

/// Rewrites one code object and verifies the result with the independent translation validator
/// (crate `sqtt-verify`); the functions a rejection names are left alone and the object is
/// rewritten again ([`sqtt_pipeline::verified`]). Never returns unverified bytes: a rejection that
/// cannot be taken out that way becomes "unchanged, failed closed" with the findings as reasons.
/// Errors: bad input (named by `name`), including an input that does not verify against itself
/// (a rejection caused by the input, not by us).
/// With `--timings` on ([`crate::timings`]), its stages are added into the process-wide sum.
pub fn patch_code_object(name: &str, input: &[u8], opts: &Options) -> Result<Patched> {
    let mut t = crate::timings::object();
    let r = patch_code_object_timed(name, input, opts, &mut t);
    crate::timings::record(t);
    r
}

/// [`patch_code_object`], recording its stages (load to verify) in `t`; no stage is left
/// running on return.
pub fn patch_code_object_timed(
    name: &str,
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
) -> Result<Patched> {
    let r = rewrite_and_verify(name, input, opts, t);
    t.end();
    r
}

fn rewrite_and_verify(
    name: &str,
    input: &[u8],
    opts: &Options,
    t: &mut Timings,
) -> Result<Patched> {
    sqtt_pipeline::rewrite_and_verify(name, input, opts, t)
}

/// Runs the main job; returns the exit code. `--strict` (exit 3) and a verifier rejection
/// (exit 1) write no output; reports are written in every case.
pub fn run(args: PatchArgs) -> Result<i32> {
    let input = args
        .input
        .clone()
        .context("missing input file (usage: sqtt-patch IN -o OUT)")?;
    if args.output.is_none() && !input.exists() {
        anyhow::bail!(
            "{}: no such file, and not a subcommand (dis, info, extract, batch, funcmap, verify, exec, flamegraph, timeline, perfetto, memtrace; see --help)",
            input.display()
        );
    }
    let output = args.output.clone().context("missing -o OUT")?;
    if !args.common.offload_arch.is_empty() {
        anyhow::bail!("--offload-arch selects code objects inside a bundle or host binary: it needs --fatbin (or batch)");
    }
    if args.compress_bundles {
        anyhow::bail!("--compress-bundles rewrites the offload bundles of a bundle or host binary: it needs --fatbin");
    }
    let opts = flag_options(&args.common.flags)?;
    require_work(&opts, &[input.as_path()])?;
    let dest = check_paths(
        &input,
        &output,
        args.common.report_json.as_deref(),
        &args.common.flags.regions,
    )?;
    if args.common.timings {
        crate::timings::enable(false);
    }
    let mut t = crate::timings::object();
    t.begin(Stage::Load);
    let bytes = crate::sniff::read_input(&input)
        .with_context(|| format!("{}: cannot read", input.display()))?;
    let name = input.display().to_string();
    if let Some(e) = crate::sniff::not_a_code_object(&name, &bytes, "instrument") {
        return Err(e);
    }
    let patched = patch_code_object_timed(&name, &bytes, &opts, &mut t)?;
    for n in &patched.report.notes {
        eprintln!("sqtt-patch: {name}: warning: {n}");
    }
    // A region or point the user named that got no markers is said without --report too (a
    // misspelled symbol or a line without code is no silent success).
    if let Some(g) = patched.report.regions.as_ref().filter(|_| !args.report) {
        for x in &g.skipped {
            eprintln!(
                "sqtt-patch: {name}: warning: {} {} not instrumented: {}",
                x.kind.word(),
                x.spec,
                summary::readable(&x.why)
            );
        }
    }
    if args.report {
        crate::output::write_stdout(&render_report(&name, &patched.report))?;
    }
    // The report and the object are committed together: an interruption keeps both or neither,
    // and a report is in place only when the object is (or none is written: rejected, --strict).
    let _committing = crate::interrupt::Committing::begin();
    let json = match &args.common.report_json {
        Some(p) => Some((
            serde_json::to_string_pretty(&patched.report)? + "\n",
            p.as_path(),
        )),
        None => None,
    };
    let json = json.as_ref().map(|(text, p)| (text.as_str(), *p));
    if patched.verifier_rejected {
        output::write_report_if(json)?;
        eprintln!("sqtt-patch: {name}: the rewritten object FAILED verification; nothing written:");
        for r in patched.report.reasons.iter().take(20) {
            eprintln!("  {r}");
        }
        return Ok(exit::VERIFY);
    }
    let report = &patched.report;
    if report.status == Status::FailedClosed {
        eprintln!(
            "sqtt-patch: {name}: left unchanged (failed closed): {}",
            report.reasons.join("; ")
        );
    }
    if args.common.strict && lost_coverage(report) {
        output::write_report_if(json)?;
        eprintln!("sqtt-patch: {name}: --strict and the object failed closed, skipped a site or has unreadable DWARF: nothing written");
        return Ok(exit::STRICT);
    }
    t.begin(Stage::Write);
    output::write_with_report(&dest, &patched.bytes, Some(&input), json)?;
    t.end();
    crate::timings::print_object(&name, &t);
    Ok(exit::OK)
}

/// Writes to stdout and flushes; a closed pipe (e.g. `| head`) is not an error, any other write
/// error is, naming standard output (kept here for the commands that call it by this path).
pub use crate::output::write_stdout;

/// `functions 12/12 (100.0 %), barriers 3/4 (75.0 %)`: sites instrumented / found per feature;
/// with sites in compiled-out stubs (code that cannot run) `trace 90/100 (90.0 %; 10 in stubs,
/// 100.0 % of code that can run)`; sites in functions nothing can enter likewise (`N in
/// unreachable functions`).
pub fn coverage_text(c: &[sqtt_rewrite::rewrite::Coverage]) -> String {
    c.iter()
        .map(|c| {
            let pct = if c.found == 0 {
                100.0
            } else {
                100.0 * c.instrumented as f64 / c.found as f64
            };
            let mut apart = Vec::new();
            if c.in_stubs > 0 {
                apart.push(format!("{} in stubs", c.in_stubs));
            }
            if c.in_unreachable > 0 {
                apart.push(format!("{} in unreachable functions", c.in_unreachable));
            }
            let stubs = if apart.is_empty() {
                String::new()
            } else {
                format!(
                    "; {}, {:.1} % of code that can run",
                    apart.join(", "),
                    c.percent_runnable()
                )
            };
            format!(
                "{} {}/{} sites ({pct:.1} %{stubs})",
                c.feature, c.instrumented, c.found
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `8` when the VGPR allocation is unchanged, `8->16` when inserted code grew it.
fn vgprs_text(before: u32, after: u32) -> String {
    if after == before {
        before.to_string()
    } else {
        format!("{before}->{after}")
    }
}
