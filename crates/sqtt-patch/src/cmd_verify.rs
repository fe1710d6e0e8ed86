//! `sqtt-patch verify ORIGINAL REWRITTEN [--json]`: independent translation validation of a
//! rewritten code object against its original (crate `sqtt-verify`). Exit codes: 0 clean,
//! 1 findings, 2 input error (unreadable file, not a code object, original does not decode,
//! two objects that are not an original and its rewrite).

use crate::exit;
use std::fmt::Write as _;

use anyhow::Context;

/// Arguments of `sqtt-patch verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// The original (uninstrumented) bare code object.
    pub original: std::path::PathBuf,
    /// The rewritten code object produced from it.
    pub rewritten: std::path::PathBuf,
    /// Print the whole report as JSON (functions, counts, findings) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Name of the section recording a sqtt-patch run (present in every rewritten object).
const PATCH_SECTION: &str = ".sqtt_patch";

/// Reads and parses one side; errors name the file and its role.
fn load(role: &str, path: &std::path::Path) -> anyhow::Result<(hsaco::CodeObject, bool)> {
    let name = path.display();
    let bytes = crate::sniff::read_input(path)
        .with_context(|| format!("{name}: cannot read the {role}"))?;
    if let Some(e) = crate::sniff::not_a_code_object(&name.to_string(), &bytes, "verify") {
        return Err(e.context(format!("the {role}")));
    }
    // Parsed once, for the check below and for the verifier, and owning the file's bytes.
    let co = hsaco::CodeObject::parse_owned(bytes)
        .with_context(|| format!("{name}: the {role} is not a readable code object"))?;
    let patched = co.section(PATCH_SECTION).is_some();
    Ok((co, patched))
}

/// Why `new` cannot be a rewrite of `orig` at all (a usage error, exit 2, not a verification
/// finding): a rewrite keeps the target processor (`e_flags`) and the kernels, so two objects
/// for different processors, or whose kernels have no name in common, are unrelated files.
/// `None` when they may be an original and its rewrite (the verifier then names every change).
fn unrelated(orig: &hsaco::CodeObject, new: &hsaco::CodeObject) -> Option<String> {
    if orig.target.processor != new.target.processor {
        return Some(format!(
            "their targets differ ({} and {})",
            orig.target.processor, new.target.processor
        ));
    }
    let names: std::collections::BTreeSet<&str> =
        orig.kernels.iter().map(|k| k.name.as_str()).collect();
    let shared = new.kernels.iter().any(|k| names.contains(k.name.as_str()));
    (!orig.kernels.is_empty() && !new.kernels.is_empty() && !shared).then(|| {
        format!(
            "no kernel in common ({} kernel(s), e.g. {}, and {}, e.g. {})",
            orig.kernels.len(),
            orig.kernels[0].name,
            new.kernels.len(),
            new.kernels[0].name
        )
    })
}

/// Runs the verifier; returns the process exit code (0 clean, 1 findings). A rewritten file
/// byte-identical to the original (a failed-closed or nothing-to-do output) is a valid, empty
/// rewrite: exit 0 without running the checks, but only once both files have been read as code
/// objects (two copies of an unreadable file are an input error naming it, not "OK": the main
/// job writes nothing for such an object, `--fatbin` reports it failed closed). Input errors
/// are returned as `Err` (the caller maps them to exit code 2): an unreadable or unparsable file
/// (named), swapped arguments (the original carries `.sqtt_patch` and the rewritten file
/// does not), and two unrelated objects ([`unrelated`]).
pub fn run(args: VerifyArgs) -> anyhow::Result<i32> {
    let (orig, orig_patched) = load("original", &args.original)?;
    let (new, new_patched) = load("rewritten file", &args.rewritten)?;
    if orig.bytes == new.bytes {
        let msg = "OK: the rewritten file is byte-identical to the original (an empty rewrite: nothing was inserted)\n";
        let out = if args.json {
            format!(
                "{}\n",
                serde_json::json!({"identical": true, "clean": true, "findings": []})
            )
        } else {
            msg.to_string()
        };
        return crate::cmd_patch::write_stdout(&out);
    }
    if orig_patched && !new_patched {
        anyhow::bail!(
            "{} has a {PATCH_SECTION} section and {} has none: the arguments look swapped (usage: sqtt-patch verify ORIGINAL REWRITTEN)",
            args.original.display(),
            args.rewritten.display()
        );
    }
    if let Some(why) = unrelated(&orig, &new) {
        anyhow::bail!(
            "{} and {} are not an original and its rewrite: {why} (usage: sqtt-patch verify ORIGINAL REWRITTEN)",
            args.original.display(),
            args.rewritten.display()
        );
    }
    let report = sqtt_verify::verify_parsed(&orig, &new).context("verification could not run")?;
    let mut out = String::new();
    if args.json {
        out = serde_json::to_string_pretty(&report)?;
        out.push('\n');
    } else {
        let with_code = report
            .functions
            .iter()
            .filter(|f| f.inserted_instructions > 0)
            .count();
        // Only functions with inserted code are listed (issue 32 item 17); "listed below" only
        // when there is a list (session-17 fresh tester).
        let listed = match with_code {
            0 => "none with inserted code".to_string(),
            n => format!("{n} with inserted code, listed below"),
        };
        writeln!(
            out,
            "{}: {} functions ({listed}), {} inserted instructions, {} markers, SGPRs written by inserted code {}",
            report.target,
            report.functions.len(),
            report.inserted_instructions(),
            report.markers(),
            sgpr_list(&report.inserted_sgprs)
        )?;
        for f in report
            .functions
            .iter()
            .filter(|f| f.inserted_instructions > 0)
        {
            writeln!(
                out,
                "  {} {:#x} -> {}: {} inserted, markers enter {} exit {} point {}",
                f.name,
                f.original_address,
                f.new_address
                    .map_or("missing".to_string(), |a| format!("{a:#x}")),
                f.inserted_instructions,
                f.enter_markers,
                f.exit_markers,
                f.point_markers
            )?;
        }
        for finding in &report.findings {
            writeln!(out, "{finding}")?;
        }
        // Inconsistencies the input already had, unchanged: not findings.
        for w in &report.warnings {
            writeln!(out, "warning: {w}")?;
        }
        let verdict = if report.is_clean() {
            "OK".to_string()
        } else {
            format!("FAILED: {} findings", report.findings.len())
        };
        writeln!(out, "{verdict}")?;
    }
    // A closed stdout (e.g. piped into `head`) is not an error of the verification.
    crate::output::write_stdout(&out)?;
    Ok(if report.is_clean() {
        exit::OK
    } else {
        exit::VERIFY
    })
}

/// `s1,s5,s7` or `none`.
fn sgpr_list(regs: &[u16]) -> String {
    if regs.is_empty() {
        return "none".into();
    }
    regs.iter()
        .map(|r| format!("s{r}"))
        .collect::<Vec<_>>()
        .join(",")
}
