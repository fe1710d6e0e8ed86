//! `sqtt-patch exec [instrumentation flags] -- CMD ARGS...`: runs CMD with the tools library
//! (`libsqtt_patch_tool.so`, crate `sqtt-patch-tool`) appended to `HSA_TOOLS_LIB`, so that every
//! code object the application loads through ROCr is instrumented at load time
//! (`docs/exec.md`). The flags become the spec's `SQTT_*` variables, which the library reads.

use crate::cmd_patch::{self, InstrumentFlags};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The library's file name (`cargo build --release` puts it next to `sqtt-patch`).
pub const TOOL_FILE: &str = "libsqtt_patch_tool.so";
/// Overrides where the library is looked for.
pub const TOOL_VAR: &str = "SQTT_PATCH_TOOL";

/// Flags of `exec`.
#[derive(clap::Args, Debug)]
#[command(arg_required_else_help = true)]
pub struct ExecArgs {
    /// What to instrument (each flag is passed as its `SQTT_*` variable).
    #[command(flatten)]
    pub flags: InstrumentFlags,
    /// Print the tools library's absolute path and exit.
    #[arg(long, exclusive = true)]
    pub print_tool_path: bool,
    /// Append one JSON line per code object to FILE (`SQTT_PATCH_REPORT`).
    #[arg(long, value_name = "FILE")]
    pub report_jsonl: Option<PathBuf>,
    /// Write every original and instrumented object into DIR (`SQTT_PATCH_SAVE`).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,
    /// Cache directory (`SQTT_PATCH_CACHE`; default `$XDG_CACHE_HOME/sqtt-patch`).
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache: Option<PathBuf>,
    /// Do not use the cache (`SQTT_PATCH_CACHE=off`).
    #[arg(long)]
    pub no_cache: bool,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// The tools library: `$SQTT_PATCH_TOOL` when set, else next to this executable. Errors: it is
/// not there (the message says how to build it).
pub fn tool_path() -> Result<PathBuf> {
    let p = match std::env::var_os(TOOL_VAR) {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()
            .context("cannot find the sqtt-patch executable's own path")?
            .parent()
            .map(|d| d.join(TOOL_FILE))
            .context("the sqtt-patch executable has no directory")?,
    };
    if !p.is_file() {
        anyhow::bail!(
            "{}: the tools library is missing; build it with `cargo build --release -p sqtt-patch-tool` (it lands next to sqtt-patch) or set ${TOOL_VAR} to its path",
            p.display()
        );
    }
    std::fs::canonicalize(&p).with_context(|| format!("{}: cannot resolve", p.display()))
}

/// The variables `flags` stand for (a flag given wins over the variable already set).
fn flag_vars(f: &InstrumentFlags) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let mut put = |k: &'static str, x: &Option<String>| {
        if let Some(x) = x {
            v.push((k, x.clone()));
        }
    };
    put("SQTT_INSTRUMENT_FUNCTIONS", &f.functions);
    put("SQTT_INSTRUMENT_BARRIERS", &f.barriers);
    put("SQTT_INSTRUMENT_MEMORY", &f.memory);
    put("SQTT_TRACE_ADDRESSES", &f.trace_addresses);
    put("SQTT_MEM_BARRIER", &f.mem_barrier);
    put("SQTT_SCOPE_WAVE", &f.scope_wave);
    put("SQTT_SCOPE_SIMD", &f.scope_simd);
    put("SQTT_SCOPE_CU", &f.scope_cu);
    put("SQTT_SCOPE_WG", &f.scope_wg);
    put(
        "SQTT_SHADER_CLOCK_BITS",
        &f.shader_clock_bits.map(|b| b.to_string()),
    );
    put(
        "SQTT_SHADER_CLOCK_SHIFT",
        &f.shader_clock_shift.map(|b| b.to_string()),
    );
    if f.kernel_scopes {
        v.push((sqtt_pipeline::KERNEL_SCOPES_VAR, "1".into()));
    }
    if let Some(l) = &f.loops {
        v.push((sqtt_pipeline::LOOPS_VAR, l.clone()));
    }
    if f.keep_text {
        v.push((sqtt_pipeline::KEEP_TEXT_VAR, "1".into()));
    }
    // The specifications were checked by `flag_options` before: they travel as a plan's text.
    if let Ok(Some(specs)) = cmd_patch::region_specs(f) {
        let plan: Vec<String> = specs
            .iter()
            .map(|s| format!("{} {s}", s.kind.word()))
            .collect();
        v.push((sqtt_pipeline::REGIONS_VAR, plan.join("\n")));
    }
    if f.force {
        v.push((sqtt_pipeline::FORCE_VAR, "1".into()));
    }
    // `--scope` alone: the spec's default masks, which any SQTT_SCOPE_* variable turns on
    // (-1 for waves is its default, "all").
    let any_scope = v.iter().any(|(k, _)| k.starts_with("SQTT_SCOPE_"))
        || std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("SQTT_SCOPE_"));
    if f.scope && !any_scope {
        v.push(("SQTT_SCOPE_WAVE", "-1".into()));
    }
    v
}

/// `HSA_TOOLS_LIB` with `tool` appended (space-separated, as ROCr reads it); unchanged when it
/// is already listed.
pub fn tools_lib(existing: Option<&str>, tool: &Path) -> String {
    let t = tool.display().to_string();
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) if e.split_whitespace().any(|x| x == t) => e.to_string(),
        Some(e) => format!("{e} {t}"),
        None => t,
    }
}

/// Runs `exec`. With `--print-tool-path`, prints the path. Otherwise checks the flags exactly
/// as the main job does, then replaces this process with CMD (its exit code is CMD's); returns
/// only on error (CMD cannot be started: exit 2).
pub fn run(args: ExecArgs) -> Result<i32> {
    if args.print_tool_path {
        let p = tool_path()?;
        cmd_patch::write_stdout(&format!("{}\n", p.display()))?;
        return Ok(crate::exit::OK);
    }
    let Some((cmd, rest)) = args.command.split_first() else {
        anyhow::bail!("missing command: sqtt-patch exec [flags] -- CMD [ARGS...]");
    };
    // The same checks as the main job (bad values, forbidden combinations, nothing requested),
    // before the application starts.
    let opts = cmd_patch::flag_options(&args.flags)?;
    cmd_patch::require_work(&opts, &[])?;
    if args
        .report_jsonl
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-")
    {
        anyhow::bail!("--report-jsonl -: give a file path (the application owns standard output)");
    }
    let tool = tool_path()?;
    let mut c = std::process::Command::new(cmd);
    c.args(rest);
    let existing = std::env::var("HSA_TOOLS_LIB").ok();
    c.env("HSA_TOOLS_LIB", tools_lib(existing.as_deref(), &tool));
    for (k, v) in flag_vars(&args.flags) {
        c.env(k, v);
    }
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Some(r) = &args.report_jsonl {
        c.env("SQTT_PATCH_REPORT", abs(r));
    }
    if let Some(s) = &args.save {
        c.env("SQTT_PATCH_SAVE", abs(s));
    }
    if let Some(d) = &args.cache {
        c.env("SQTT_PATCH_CACHE", abs(d));
    }
    if args.no_cache {
        c.env("SQTT_PATCH_CACHE", "off");
    }
    use std::os::unix::process::CommandExt;
    let e = c.exec();
    anyhow::bail!("{}: cannot run: {e}", Path::new(cmd).display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsa_tools_lib_is_appended_once() {
        let t = Path::new("/x/libsqtt_patch_tool.so");
        assert_eq!(tools_lib(None, t), "/x/libsqtt_patch_tool.so");
        assert_eq!(tools_lib(Some("  "), t), "/x/libsqtt_patch_tool.so");
        assert_eq!(
            tools_lib(Some("librocprofiler-sdk-tool.so"), t),
            "librocprofiler-sdk-tool.so /x/libsqtt_patch_tool.so"
        );
        assert_eq!(
            tools_lib(Some("a.so /x/libsqtt_patch_tool.so"), t),
            "a.so /x/libsqtt_patch_tool.so"
        );
    }

    /// `exec --region/--point` reach the tools library as `SQTT_PATCH_REGIONS`, which the
    /// library's option reader turns back into the same specifications.
    #[test]
    fn regions_and_points_reach_the_library() {
        let f = InstrumentFlags {
            region: vec!["main=k.hip:10-20".into(), "tail=k+0x40..0x80".into()],
            point: vec!["p=k.hip:12".into()],
            ..Default::default()
        };
        let vars = flag_vars(&f);
        let lookup = |k: &str| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.clone())
        };
        let o = sqtt_pipeline::env_options(lookup).unwrap();
        let got: Vec<String> = o
            .regions
            .iter()
            .map(|s| format!("{} {s}", s.kind.word()))
            .collect();
        assert_eq!(
            got,
            [
                "region main=k.hip:10-20",
                "region tail=k+0x40..0x80",
                "point p=k.hip:12"
            ]
        );
    }

    #[test]
    fn keep_text_reaches_the_library() {
        let lookup_in = |vars: Vec<(&'static str, String)>| {
            move |k: &str| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.clone())
            }
        };
        let on = InstrumentFlags {
            keep_text: true,
            ..Default::default()
        };
        assert!(
            sqtt_pipeline::env_options(lookup_in(flag_vars(&on)))
                .unwrap()
                .keep_text
        );
        let off = InstrumentFlags::default();
        assert!(
            !sqtt_pipeline::env_options(lookup_in(flag_vars(&off)))
                .unwrap()
                .keep_text
        );
    }
}
