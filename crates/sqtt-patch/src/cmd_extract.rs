//! `sqtt-patch extract FILE -o DIR`: writes every embedded AMDGPU code object of a bundle or host
//! binary (or the bare code object itself) as `DIR/<bundle-index>-<entry id sanitized>.co`, and
//! every TOC entry of a kpack archive as `DIR/<ordinal>-<binary@arch sanitized>.co`.

use anyhow::Context;
use hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT;
use hsaco::container::open;

/// Arguments of `sqtt-patch extract`.
#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Input file: code object, offload bundle (plain or CCOB), kpack archive or host ELF.
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
    if hsaco::kpack::is_kpack(&bytes) {
        return extract_archive(&name, &bytes, &args.output);
    }
    let hipk = crate::kpack::wrappers_of(&name, &bytes[..])?;
    if !hipk.is_empty() {
        let l = crate::kpack::find_archives(
            &args.file,
            &hipk,
            &[],
            &crate::kpack::KpackEnv::from_env(),
        );
        let found: Vec<String> = l
            .found
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        anyhow::bail!(
            "{name}: kpack-split (HIPK) host binary: its code objects are in .kpack archives ({}); extract those",
            match found.is_empty() {
                true => "none found: see `sqtt-patch info`".to_string(),
                false => found.join(", "),
            }
        );
    }
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

/// Writes every TOC entry of a kpack archive (its blob, decompressed) to `dir`.
fn extract_archive(name: &str, bytes: &[u8], dir: &std::path::Path) -> anyhow::Result<i32> {
    let a = hsaco::kpack::read(bytes, DEFAULT_DECOMPRESS_LIMIT)
        .with_context(|| format!("{name}: cannot parse"))?;
    if a.entries.is_empty() {
        anyhow::bail!("{name}: no entry to extract (an empty kpack table of contents)");
    }
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("-o {}: not a directory", dir.display());
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("-o {}: cannot create the directory", dir.display()))?;
    let mut report = String::new();
    for e in &a.entries {
        let data = &a.blobs[e.ordinal];
        let id = hsaco::container::Embedded {
            bundle_index: e.ordinal,
            id: e.label(),
            bundle_offset: 0,
            storage: None,
            wrapper_offset: None,
            data: Vec::new(),
        };
        let p = dir.join(id.file_name());
        std::fs::write(&p, data).with_context(|| format!("cannot write {}", p.display()))?;
        report.push_str(&format!("{} ({} bytes)\n", p.display(), data.len()));
    }
    crate::cmd_patch::write_stdout(&report)
}
