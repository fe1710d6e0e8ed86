//! The process exit codes of every `sqtt-patch` command, defined once (README "Exit codes").

/// Success: instrumented, or nothing to instrument; `batch`: no regression either.
pub const OK: i32 = 0;
/// Internal error: our independent verifier rejected a rewrite. The main job writes nothing;
/// `--fatbin` and `batch` keep that code object unchanged and name it.
pub const VERIFY: i32 = 1;
/// Bad input or usage: a missing path, a file that is not a code object / bundle / host binary,
/// an object the rewriter cannot read, a baseline made with other options; also an output that
/// cannot be written (a read-only location refused before any work, or a write error such as
/// `-o /dev/full`, named with its option, path and OS error).
pub const INPUT: i32 = 2;
/// `--strict` and some code object failed closed, could not be read, skipped a site or has unreadable DWARF: that
/// input's output is not written (reports still are).
pub const STRICT: i32 = 3;
/// `batch`: at least one regression against `--baseline` (and `--update-baseline` not given).
pub const REGRESSION: i32 = 4;
