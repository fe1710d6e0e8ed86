//! `sqtt-patch extract` (placeholder until implemented).

/// Arguments of `sqtt-patch extract`.
#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Input file.
    pub file: std::path::PathBuf,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: ExtractArgs) -> anyhow::Result<i32> {
    anyhow::bail!("{}: 'extract' is not implemented yet", args.file.display())
}
