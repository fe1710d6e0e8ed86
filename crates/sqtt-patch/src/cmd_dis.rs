//! `sqtt-patch dis` (placeholder until implemented).

/// Arguments of `sqtt-patch dis`.
#[derive(clap::Args)]
pub struct DisArgs {
    /// Input file.
    pub file: std::path::PathBuf,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: DisArgs) -> anyhow::Result<i32> {
    anyhow::bail!("{}: 'dis' is not implemented yet", args.file.display())
}
