//! `sqtt-patch info` (placeholder until implemented).

/// Arguments of `sqtt-patch info`.
#[derive(clap::Args)]
pub struct InfoArgs {
    /// Input file.
    pub file: std::path::PathBuf,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: InfoArgs) -> anyhow::Result<i32> {
    anyhow::bail!("{}: 'info' is not implemented yet", args.file.display())
}
