//! The `.sqtt_funcmap` section format: its rows ([`Row`]), the reader with the consumers' rules
//! ([`read`], [`parse`], [`check_strict`], [`parse_encoding`]) and the writer ([`render`]).
//!
//! Source of the facts: the SQTT Instrument Pass specification (`docs/markers/SPEC.md` of
//! rocprof-trace-decoder in ROCm/rocm-systems, "Funcmap format" and "GFX12 Shader Clock
//! Packing") and `docs/background/funcmap-contract.md` (the rules of rocprof-trace-decoder's
//! `parse_funcmap_section`, `include/rocprof_trace_decoder/cxx/funcmap.hpp` in ROCm/rocm-systems
//! at b44343df, read for behaviour, no code reproduced): one-character prefix at column 0
//! followed by `:`, decimal ids, name and location split at the first `@`, lines split on `\n`
//! or NUL, trailing whitespace stripped, duplicate ids resolved "last wins", unknown prefixes
//! skipped, `R:` and `M:` bodies read as `;`-separated `key=value` lists. One reader, two modes
//! ([`Mode`]): lenient for the trace tools (as AMD's reader), strict for a rewriter input. The
//! writer renders `\n`-separated rows with one trailing NUL, in the pass's emission order.
//!
//! Users: the rewriter (`sqtt-rewrite`: reads an input's funcmap strictly, writes the output's),
//! the `sqtt-patch funcmap` command and the trace tools (`sqtt-trace`: reads leniently). The
//! crate depends on nothing but `std`, so the trace tools need not depend on the rewriter.
//!
//! Not used by the verifier: `sqtt-verify` has its own funcmap parser (`sqtt-verify/src/funcmap.rs`)
//! on purpose, because the verifier re-derives every fact it checks with its own code,
//! independently of the rewriter it checks (docs/workspace.md). Do not make it use this crate.

mod read;
mod row;
mod write;

pub use read::{check_strict, parse, parse_encoding, read, Mode, Parsed};
pub use row::Row;
pub use write::render;

/// Name of the funcmap section (spec, "Funcmap format"; the consumers find the section by this
/// name, and only the first section of that name: docs/background/funcmap-contract.md,
/// "Section").
pub const SECTION: &str = ".sqtt_funcmap";
