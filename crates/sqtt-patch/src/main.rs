//! `sqtt-patch`: post-link SQTT marker instrumentation of AMDGPU code objects.
//!
//! Each subcommand lives in its own module; `main` only parses the command line and maps the
//! outcome to a documented exit code (see `README.md`, "Exit codes").

mod anonfile;
mod cmd_batch;
mod cmd_dis;
mod cmd_exec;
mod cmd_extract;
mod cmd_funcmap;
mod cmd_info;
mod cmd_patch;
mod cmd_trace;
mod cmd_verify;
mod exit;
mod fatbin;
mod fatbin_store;
mod interrupt;
mod kpack;
mod output;
mod progress;
mod sniff;
mod summary;
mod threads;
mod timings;

use clap::{Parser, Subcommand};

/// Command line of `sqtt-patch`.
#[derive(Parser)]
#[command(
    name = "sqtt-patch",
    version,
    about = "Insert SQTT markers into finished AMDGPU code objects",
    after_help = "Exit codes: 0 success (instrumented, nothing to instrument, or failed closed: \
                  the object written unchanged, saying why); 1 a rewrite failed verification; \
                  2 bad input or usage; 3 --strict and some coverage was lost. \
                  Details: docs/commands.md."
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    patch: cmd_patch::PatchArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Disassemble every kernel and function of a code object (LLVM syntax).
    Dis(cmd_dis::DisArgs),
    /// Describe code objects, bundles and host binaries: targets, kernels, descriptors.
    Info(cmd_info::InfoArgs),
    /// Write every embedded code object of a bundle or host binary to a directory.
    Extract(cmd_extract::ExtractArgs),
    /// Instrument every code object, bundle and host binary under PATHs; compare with a baseline.
    Batch(Box<cmd_batch::BatchArgs>),
    /// Print the `.sqtt_funcmap` of a code object (marker ids, kinds, names, locations).
    Funcmap(cmd_funcmap::FuncmapArgs),
    /// Run a command with every code object it loads instrumented at load time (HSA tools library).
    Exec(Box<cmd_exec::ExecArgs>),
    /// Check a rewritten code object against its original (translation validation).
    Verify(cmd_verify::VerifyArgs),
    /// Flame graph (SVG, folded stacks, speedscope) of the marker scopes in a rocprofv3 --att capture.
    Flamegraph(Box<cmd_trace::FlamegraphArgs>),
    /// Perfetto (Chrome trace JSON) timelines of the markers, one file per UI directory.
    Perfetto(Box<cmd_trace::PerfettoArgs>),
    /// Per-lane addresses of the address-trace blocks, with per-site summaries (JSON).
    Memtrace(Box<cmd_trace::MemtraceArgs>),
    /// Per-wave timeline of the marker scopes as a static SVG (waves as rows, scopes as bars).
    Timeline(Box<cmd_trace::TimelineArgs>),
}

/// clap takes a second input path for a subcommand name ("the subcommand 'b.co' cannot be used
/// with '[INPUT]'"): when the rejected word is an existing file, say what is wrong instead.
/// clap's other errors are printed as clap words them, after `sqtt-patch: `, with clap's exit
/// status (2).
fn parse_cli() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::{ContextKind, ContextValue, ErrorKind};
            let word = match e.get(ContextKind::InvalidSubcommand) {
                Some(ContextValue::String(w)) => Some(w.clone()),
                _ => None,
            };
            let second_input = matches!(
                e.kind(),
                ErrorKind::InvalidSubcommand | ErrorKind::ArgumentConflict
            ) && word
                .as_deref()
                .is_some_and(|w| std::path::Path::new(w).exists());
            if second_input {
                eprintln!(
                    "sqtt-patch: error: one input per run ({} is a second one); for many inputs use `sqtt-patch batch PATH... -o DIR`",
                    word.unwrap_or_default()
                );
                std::process::exit(exit::INPUT);
            }
            if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // --help and --version (stdout, exit 0), and the help a subcommand given
                // nothing prints (stderr, exit 2): clap's own text, not an error line.
                e.exit()
            }
            // Every other message of ours starts with the program's name; so do clap's.
            eprint!("sqtt-patch: {}", e.render());
            std::process::exit(e.exit_code())
        }
    }
}

fn main() {
    let cli = parse_cli();
    interrupt::install();
    threads::init();
    let outcome = match cli.command {
        None if cli.patch.fatbin || kpack::is_archive(cli.patch.input.as_deref()) => {
            fatbin::run(&cli.patch)
        }
        None => cmd_patch::run(cli.patch),
        Some(Command::Verify(a)) => cmd_verify::run(a),
        Some(Command::Exec(a)) => cmd_exec::run(*a),
        Some(Command::Batch(a)) => cmd_batch::run(*a),
        Some(Command::Funcmap(a)) => cmd_funcmap::run(a),
        Some(Command::Dis(a)) => cmd_dis::run(a),
        Some(Command::Info(a)) => cmd_info::run(a),
        Some(Command::Extract(a)) => cmd_extract::run(a),
        Some(Command::Flamegraph(a)) => cmd_trace::run_flamegraph(*a),
        Some(Command::Perfetto(a)) => cmd_trace::run_perfetto(*a),
        Some(Command::Memtrace(a)) => cmd_trace::run_memtrace(*a),
        Some(Command::Timeline(a)) => cmd_trace::run_timeline(*a),
    };
    // The error is dropped before exiting: it may own a temporary file that its drop deletes.
    let code = match outcome {
        Ok(code) => code,
        // A wait given up because a signal arrived: the handler ends the run (130, its message)
        // once the commits this error unwound are gone.
        Err(_) if interrupt::stopping() => interrupt::wait_for_handler(),
        Err(e) => {
            let message = format!("{e:#}");
            eprintln!("sqtt-patch: error: {}", output::terminal_safe(&message));
            exit::INPUT
        }
    };
    std::process::exit(code);
}
