//! The main job: `sqtt-patch IN -o OUT [flags]` rewrites one code object with SQTT markers.
//!
//! Options default to the seed spec's `SQTT_*` environment variables; flags win. The output is
//! verified by the independent translation validator before it is written, and written
//! atomically (temporary file in the output directory, renamed when complete).

use anyhow::{Context, Result};
use sqtt_rewrite::config::{self, Options};
use sqtt_rewrite::rewrite::{rewrite, Report, Status};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit code: success (instrumented, or nothing to instrument).
pub const EXIT_OK: i32 = 0;
/// Exit code: the output failed verification (nothing written) — an internal error.
pub const EXIT_VERIFY: i32 = 1;
/// Exit code: bad input or usage.
pub const EXIT_INPUT: i32 = 2;
/// Exit code: `--strict` and some kernel failed closed or some site was skipped.
pub const EXIT_COVERAGE: i32 = 3;

/// Flags of the main job.
#[derive(clap::Args, Debug, Default)]
pub struct PatchArgs {
    /// Input code object (`.co`, `.hsaco`); with `--fatbin`, a bundle or a host executable / shared library.
    pub input: Option<PathBuf>,
    /// Output path.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// What to instrument (shared with `batch`).
    #[command(flatten)]
    pub flags: InstrumentFlags,
    /// Exit with code 3 when any site was skipped or the object failed closed.
    #[arg(long)]
    pub strict: bool,
    /// Print the human report to stderr.
    #[arg(long)]
    pub report: bool,
    /// Write the JSON report to this file (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
}

/// Instrumentation flags, shared by the main job, `--fatbin` and `batch`. Each defaults to its
/// seed-spec environment variable; a given flag wins over the variable.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct InstrumentFlags {
    /// Function entry/exit markers: N (instructions) or cost:N (weighted); 0 = off.
    /// Default: $SQTT_INSTRUMENT_FUNCTIONS.
    #[arg(long, value_name = "N|cost:N")]
    pub functions: Option<String>,
    /// Barrier markers (0/1). Default: $SQTT_INSTRUMENT_BARRIERS.
    #[arg(long, value_name = "0|1")]
    pub barriers: Option<String>,
    /// Enter/exit markers around every kernel (post-link extra, off by default like the pass).
    #[arg(long)]
    pub kernel_scopes: bool,
    /// Memory-op markers N:M. Default: $SQTT_INSTRUMENT_MEMORY.
    #[arg(long, value_name = "N:M")]
    pub memory: Option<String>,
    /// Per-lane address tracing: memory, lds or memory,lds. Default: $SQTT_TRACE_ADDRESSES.
    #[arg(long, value_name = "memory|lds|memory,lds")]
    pub trace_addresses: Option<String>,
    /// Reorder boundary (accepted for compatibility; no effect post-link). Default: $SQTT_MEM_BARRIER.
    #[arg(long, value_name = "none|asm|fence")]
    pub mem_barrier: Option<String>,
    /// gfx12 shader-clock bits. Default: $SQTT_SHADER_CLOCK_BITS.
    #[arg(long)]
    pub shader_clock_bits: Option<u32>,
    /// gfx12 shader-clock shift. Default: $SQTT_SHADER_CLOCK_SHIFT.
    #[arg(long)]
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

/// Builds the options of the main job: environment first, then flags.
pub fn options(args: &PatchArgs) -> Result<Options> {
    flag_options(&args.flags)
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
    if let Some(m) = &args.memory {
        o.memory = config::parse_memory(m).map_err(|e| flag_error("--memory", e))?;
    }
    if let Some(t) = &args.trace_addresses {
        o.trace_addresses =
            config::parse_trace_addresses(t).map_err(|e| flag_error("--trace-addresses", e))?;
    }
    if let Some(m) = &args.mem_barrier {
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
        &args.scope_wave,
        &args.scope_simd,
        &args.scope_cu,
        &args.scope_wg,
    ];
    for ((name, set), value) in config::SCOPE_VARS.iter().zip(flags) {
        if let Some(v) = value {
            let mut m = o.scope.unwrap_or_default();
            set(
                &mut m,
                config::parse_mask(name, v).map_err(|e| flag_error("--scope-*", e))?,
            );
            o.scope = Some(m);
        }
    }
    o.validate()?;
    Ok(o)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, renamed.
/// The file gets mode 0644 (the temporary file's 0600 is not kept).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_like(path, bytes, None)
}

/// [`write_atomic`] giving the new file the permissions of `like` (e.g. the input executable,
/// so a rewritten host program stays executable); 0644 when `like` is `None`.
pub fn write_atomic_like(path: &Path, bytes: &[u8], like: Option<&Path>) -> Result<()> {
    let mut tmp = temp_next_to(path)?;
    tmp.write_all(bytes)?;
    persist_like(tmp, path, like)
}

/// A temporary file in the directory of `path`, so that the final rename stays on one file
/// system.
pub fn temp_next_to(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("{}: cannot create a temporary file", dir.display()))
}

/// Gives `tmp` the permissions of `like` (0644 when `None`; a rewritten host program stays
/// executable), syncs it and renames it to `path`.
pub fn persist_like(tmp: tempfile::NamedTempFile, path: &Path, like: Option<&Path>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = like
        .and_then(|l| std::fs::metadata(l).ok())
        .map_or(0o644, |m| m.permissions().mode() & 0o7777);
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

/// Refuses an output path that names the input file (the original would be lost), and `-`
/// (outputs are binaries written atomically to a file, never to standard output).
pub fn check_distinct(input: &Path, output: &Path) -> Result<()> {
    if output.as_os_str() == "-" {
        anyhow::bail!(
            "-o -: writing the output to standard output is not supported; give a file path"
        );
    }
    let same = match (std::fs::canonicalize(input), std::fs::canonicalize(output)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        anyhow::bail!(
            "{}: the output path is the input file; choose another -o path",
            output.display()
        );
    }
    Ok(())
}

/// Human-readable report.
pub fn render_report(r: &Report) -> String {
    let mut s = format!(
        "target {}: {:?}; .text {} -> {} bytes; {} funcmap rows\n",
        r.target, r.status, r.text_size_before, r.text_size_after, r.funcmap_rows
    );
    for why in &r.reasons {
        s += &format!("  failed closed: {why}\n");
    }
    for l in &r.left_alone {
        s += &format!(
            "  left alone (copied verbatim, not instrumented): {} at {:#x}: {}\n",
            l.name, l.address, l.why
        );
    }
    for f in r.functions.iter().filter(|f| f.inserted_instructions > 0) {
        let sites: Vec<String> = f.sites.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s += &format!(
            "  {} {}: {} (+{} instructions, +{} bytes{})\n",
            if f.kernel { "kernel" } else { "function" },
            f.name,
            sites.join(" "),
            f.inserted_instructions,
            f.inserted_bytes,
            f.scope_id.map(|i| format!(", id {i}")).unwrap_or_default()
        );
    }
    for k in &r.kernels {
        // gfx10+ waves get the full SGPR file: the descriptor has no SGPR allocation to report.
        let sgprs = match (k.sgprs_before, k.sgprs_after) {
            (Some(b), Some(a)) => format!(" sgprs {b}->{a}"),
            _ => String::new(),
        };
        s += &format!(
            "  kernel {}: wave{} vgprs {}{sgprs} occupancy {}->{} waves/SIMD, +{} instructions reachable\n",
            k.name, k.wave_size, k.vgprs, k.occupancy_before, k.occupancy_after, k.inserted_instructions_reachable
        );
    }
    for sk in &r.skipped {
        s += &format!(
            "  skipped {:?} in {} at {:#x}: {}\n",
            sk.kind, sk.function, sk.addr, sk.why
        );
    }
    for m in &r.existing_markers {
        s += &format!("  existing marker kept: {m}\n");
    }
    s
}

/// One code object after rewriting and verification.
#[derive(Debug)]
pub struct Patched {
    /// Bytes to write: the verified rewrite, or the input unchanged.
    pub bytes: Vec<u8>,
    /// What was done (status `failed_closed` with the findings when verification rejected it).
    pub report: Report,
    /// True when the rewrite was produced but rejected by the verifier (an internal error).
    pub verifier_rejected: bool,
}

/// Rewrites one code object and verifies the result with the independent translation validator
/// (crate `sqtt-verify`). Never returns unverified bytes: a rejected rewrite becomes "unchanged,
/// failed closed" with the findings as reasons. Errors: bad input (named by `name`), including
/// an input that does not verify against itself (a rejection caused by the input, not by us).
pub fn patch_code_object(name: &str, input: &[u8], opts: &Options) -> Result<Patched> {
    let outcome = rewrite(input, opts).with_context(|| name.to_string())?;
    let mut report = outcome.report;
    let Some(out) = outcome.bytes else {
        return Ok(Patched {
            bytes: input.to_vec(),
            report,
            verifier_rejected: false,
        });
    };
    let findings: Vec<String> = match sqtt_verify::verify(input, &out) {
        Ok(v) => v.findings.iter().map(|f| f.to_string()).collect(),
        Err(e) => vec![format!("verifier error: {e}")],
    };
    if findings.is_empty() {
        return Ok(Patched {
            bytes: out,
            report,
            verifier_rejected: false,
        });
    }
    // A rejection is our bug unless the input itself is inconsistent: an input whose fields
    // contradict each other (descriptor vs code, symbols vs sections, ...) does not even verify
    // against itself, and is reported as bad input.
    let identity: Vec<String> = match sqtt_verify::verify(input, input) {
        Ok(v) => v.findings.iter().map(|f| f.to_string()).collect(),
        Err(e) => vec![e.to_string()],
    };
    if let Some(first) = identity.first() {
        anyhow::bail!(
            "{name}: inconsistent code object: it does not verify against itself ({} finding(s); first: {first})",
            identity.len()
        );
    }
    report.status = Status::FailedClosed;
    report.reasons = findings
        .into_iter()
        .map(|f| format!("verifier: {f}"))
        .collect();
    Ok(Patched {
        bytes: input.to_vec(),
        report,
        verifier_rejected: true,
    })
}

/// Runs the main job; returns the exit code.
pub fn run(args: PatchArgs) -> Result<i32> {
    let input = args
        .input
        .clone()
        .context("missing input file (usage: sqtt-patch IN -o OUT)")?;
    let output = args.output.clone().context("missing -o OUT")?;
    let opts = options(&args)?;
    if !opts.any_enabled() {
        anyhow::bail!("nothing requested: pass --functions N, --barriers 1, --memory N:M, --trace-addresses memory,lds or --kernel-scopes (or set SQTT_INSTRUMENT_*)");
    }
    check_distinct(&input, &output)?;
    let bytes =
        std::fs::read(&input).with_context(|| format!("{}: cannot read", input.display()))?;
    let name = input.display().to_string();
    let container = bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__")
        || bytes.starts_with(b"CCOB")
        || (bytes.starts_with(b"\x7fELF") && bytes.get(0x12..0x14) != Some(&[224, 0][..]));
    if container {
        anyhow::bail!("{name}: an offload bundle or a host binary, not a code object: pass --fatbin to instrument every code object inside it");
    }
    let patched = patch_code_object(&name, &bytes, &opts)?;
    for n in &patched.report.notes {
        eprintln!("sqtt-patch: {name}: warning: {n}");
    }
    if args.report {
        eprint!("{}", render_report(&patched.report));
    }
    if let Some(p) = &args.report_json {
        let text = serde_json::to_string_pretty(&patched.report)? + "\n";
        if p.as_os_str() == "-" {
            write_stdout(&text)?;
        } else {
            write_atomic(p, text.as_bytes())?;
        }
    }
    if patched.verifier_rejected {
        eprintln!("sqtt-patch: {name}: the rewritten object FAILED verification; nothing written:");
        for r in patched.report.reasons.iter().take(20) {
            eprintln!("  {r}");
        }
        return Ok(EXIT_VERIFY);
    }
    write_atomic_like(&output, &patched.bytes, Some(&input))?;
    let report = &patched.report;
    if report.status == Status::FailedClosed {
        eprintln!(
            "sqtt-patch: {name}: left unchanged (failed closed): {}",
            report.reasons.join("; ")
        );
    }
    let lost = report.status == Status::FailedClosed || !report.skipped.is_empty();
    Ok(if args.strict && lost {
        EXIT_COVERAGE
    } else {
        EXIT_OK
    })
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error.
pub fn write_stdout(s: &str) -> anyhow::Result<i32> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(s.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}
