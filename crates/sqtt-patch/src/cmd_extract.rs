//! `sqtt-patch extract FILE -o DIR`: writes every embedded AMDGPU code object of a bundle or host
//! binary (or the bare code object itself) as `DIR/<bundle-index>-<entry id sanitized>.co`.

use anyhow::Context;
use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::container::open;

/// Arguments of `sqtt-patch extract`.
#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Input file: code object, offload bundle (plain or CCOB) or host ELF.
    pub file: std::path::PathBuf,
    /// Output directory (created when missing).
    #[arg(short, long)]
    pub output: std::path::PathBuf,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: ExtractArgs) -> anyhow::Result<i32> {
    let name = args.file.display().to_string();
    let bytes =
        crate::sniff::read_input(&args.file).with_context(|| format!("{name}: cannot read"))?;
    let (_, cos) =
        open(&bytes, DEFAULT_DECOMPRESS_LIMIT).with_context(|| format!("{name}: cannot parse"))?;
    if cos.is_empty() {
        let is = crate::sniff::describe(&bytes).unwrap_or_default();
        anyhow::bail!("{name}: no embedded code object to extract ({is})");
    }
    if args.output.exists() && !args.output.is_dir() {
        anyhow::bail!("-o {}: not a directory", args.output.display());
    }
    let mut report = String::new();
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("-o {}: cannot create the directory", args.output.display()))?;
    for e in &cos {
        let p = args.output.join(e.file_name());
        std::fs::write(&p, &e.data).with_context(|| format!("cannot write {}", p.display()))?;
        report.push_str(&format!("{} ({} bytes)\n", p.display(), e.data.len()));
    }
    crate::cmd_patch::write_stdout(&report)
}
