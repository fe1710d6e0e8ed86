//! Reader and analyses of `rocprofv3 --att` output for code objects instrumented with SQTT markers.
//!
//! - [`discover`]: finds UI directories and the loaded code objects under a path;
//! - [`json`]: streaming readers of shaderdata, occupancy, code.json, filenames and realtime JSON;
//! - [`markers`]: per-code-object marker tables and marker-word decoding;
//! - [`blocks`]: address-trace block decoding;
//! - [`trace`]: the per-wave marker decoder feeding a [`trace::Sink`];
//! - [`flame`] (with [`flame_svg`]), [`perfetto`], [`memtrace`], [`timeline`]: the outputs.
//!
//! File formats and the semantics followed are described in `docs/trace.md` and, with sources,
//! in `docs/background/att-format.md`.

pub mod blocks;
pub mod discover;
pub mod flame;
pub mod flame_svg;
pub mod json;
pub mod markers;
pub mod memtrace;
pub mod names;
pub mod perfetto;
pub mod timeline;
pub mod trace;
pub mod warnings;

pub use trace::{ClockCorrection, Options, PackedMode, Trace};
