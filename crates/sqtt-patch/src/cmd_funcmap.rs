//! `sqtt-patch funcmap FILE [--demangle] [--json]`: prints the `.sqtt_funcmap` of a code object as
//! a table (id, kind, name, source location, payload words), parsed with the consumers' rules
//! (docs/background/funcmap-contract.md) — the post-link counterpart of the spec's
//! `sqtt_decode_funcmap.py`.

use anyhow::{Context, Result};
use sqtt_funcmap::Row;
use std::path::PathBuf;

/// Arguments of `sqtt-patch funcmap`.
#[derive(clap::Args)]
pub struct FuncmapArgs {
    /// Code object to read.
    pub file: PathBuf,
    /// Demangle C++ names (Itanium ABI).
    #[arg(long)]
    pub demangle: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

/// Runs the subcommand; returns the process exit code (0). Errors (exit 2): unreadable input,
/// no `.sqtt_funcmap` section, or a section with bytes in it but no valid row (garbage: the
/// lenient reader would print an empty table and warnings; issue 32).
pub fn run(args: FuncmapArgs) -> Result<i32> {
    let bytes = crate::sniff::read_input(&args.file)
        .with_context(|| format!("{}: cannot read", args.file.display()))?;
    if let Some(e) =
        crate::sniff::not_a_code_object(&args.file.display().to_string(), &bytes, "funcmap")
    {
        return Err(e);
    }
    let co = hsaco::CodeObject::parse(&bytes).with_context(|| args.file.display().to_string())?;
    let Some(section) = co.funcmap() else {
        anyhow::bail!("{}: no .sqtt_funcmap section", args.file.display());
    };
    let parsed = sqtt_funcmap::parse(section);
    let offset = co.section(sqtt_funcmap::SECTION).map_or(0, |s| s.offset);
    if parsed.rows.is_empty() && section.iter().any(|b| !b.is_ascii_whitespace() && *b != 0) {
        anyhow::bail!(
            "{}: section .sqtt_funcmap at file offset {offset:#x} ({} bytes) holds no valid funcmap row{}",
            args.file.display(),
            section.len(),
            parsed
                .warnings
                .first()
                .map(|w| format!(" (first problem: {w})"))
                .unwrap_or_default()
        );
    }
    let name = |n: &str| {
        if args.demangle {
            demangle(n)
        } else {
            n.to_string()
        }
    };
    // F/K rows are resolved to code by symbol name (funcmap contract); an F row with no symbol is
    // an inlined function's scope (spec "Extracting the funcmap": `(inlined)`).
    let address = |n: &str| {
        co.kernels
            .iter()
            .find(|k| k.name == n)
            .map(|k| k.entry)
            .or_else(|| co.functions.iter().find(|f| f.name == n).map(|f| f.address))
    };
    let mut rows = Vec::new();
    for r in &parsed.rows {
        let (id, kind, n, loc) = match r {
            Row::Function { id, name: n, loc } => (Some(*id), "function", name(n), loc.clone()),
            Row::Kernel { name: n, loc } => (None, "kernel", name(n), loc.clone()),
            Row::User { id, name: n, loc } => (Some(*id), "user", name(n), loc.clone()),
            Row::Point { id, name: n, loc } => (Some(*id), "point", n.clone(), loc.clone()),
            _ => continue,
        };
        let payload = id.map_or(0, |i| parsed.payload_count(i));
        let (raw, addr) = match r {
            Row::Function { name: n, .. } | Row::Kernel { name: n, .. } => (true, address(n)),
            _ => (false, None),
        };
        let inlined = raw && kind == "function" && addr.is_none();
        rows.push((id, kind, n, loc, payload, addr, inlined));
    }
    let extra: Vec<String> = parsed
        .rows
        .iter()
        .filter_map(|r| match r {
            Row::WaveSize(w) => Some(format!("wave size {w}")),
            Row::Encoding(kv) => Some(format!("marker encoding {kv}")),
            _ => None,
        })
        .collect();
    if args.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, kind, n, loc, payload, addr, inlined)| {
                serde_json::json!({"id": id, "kind": kind, "name": n, "location": loc, "extra_payload_count": payload, "address": addr, "inlined": inlined})
            })
            .collect();
        let doc = serde_json::json!({"rows": list, "metadata": extra, "warnings": parsed.warnings});
        return crate::cmd_patch::write_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc)?
        ));
    }
    let mut out = format!(
        "{:>6}  {:<8}  {:>7}  {:>18}  name [@location]\n",
        "id", "kind", "payload", "address"
    );
    for (id, kind, n, loc, payload, addr, inlined) in &rows {
        let id = id.map_or("-".to_string(), |i| i.to_string());
        let loc = loc.as_ref().map(|l| format!("  @{l}")).unwrap_or_default();
        let addr = addr.map_or("-".to_string(), |a| format!("{a:#018x}"));
        let tag = if *inlined { "  (inlined)" } else { "" };
        out.push_str(&format!(
            "{id:>6}  {kind:<8}  {payload:>7}  {addr:>18}  {n}{loc}{tag}\n"
        ));
    }
    for e in &extra {
        out.push_str(&format!("# {e}\n"));
    }
    for w in &parsed.warnings {
        let line = format!(
            "sqtt-patch: {}: warning: .sqtt_funcmap (file offset {offset:#x}) {w}",
            args.file.display()
        );
        eprintln!("{}", crate::output::terminal_safe(&line));
    }
    crate::cmd_patch::write_stdout(&out)
}
