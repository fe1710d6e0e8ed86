//! The marker decoder over UI directories: loads a directory's metadata (occupancy, shaderdata
//! file list, funcmaps), streams its shaderdata records per wave and hands decoded events to a
//! [`Sink`].
//!
//! Rules (att-format note §2.3, the C++ `MarkerStream` that rocprofv3 links, and the spec):
//! - PRIV records (`flags & 2`, trap handler) are dropped before anything else.
//! - Records are split per wave slot (SE, CU, SIMD, slot) and per wave instance: the instance is
//!   the index of the latest occupancy launch at or before the record's time (0 before the first).
//! - The funcmap is the one of the code object holding the wave's kernel.
//! - After a header whose id has `R:extra_payload_count = N`, the next N records of the same wave
//!   instance are payload, whatever their value; `addr_trace_*` payloads become address blocks.
//! - An unknown id is dropped, except a bare exit (`0x1`), which pops; `exit_prev` pops; enter
//!   pushes for `F`/`U` ids only; everything else that is not a pop is a point.
//! - gfx12 packed headers (`M:` row) are decoded with the packed layout and their times corrected
//!   with the spec's algorithm ("GFX12 Shader Clock Packing"), unless the directory comes from
//!   `att_tool.py`, which already rewrote them (see [`PackedMode`]).
//! - A packet loss (an `occupancy.json` `"events"` entry of type
//!   [`json::EVENT_PACKET_LOSS`]) at time T on a shader engine ends, as AMD's marker stream
//!   does, every wave instance of that engine launched before T (or before any launch): its
//!   records from T on are dropped, a payload block it was reading is dropped, and the scopes
//!   open on it end at its last record before T. A slot's next launch at or after T decodes
//!   normally (see [`loss_after`]).
//! - Malformed input is counted in [`Warnings`]; the rest of the trace is still used.

pub use crate::blocks::{parse_block, BlockParts, BufferComponents};
use crate::discover::{self, Found};
use crate::json::{self, Occupancy};
use crate::markers::{Kind, MarkerTable};
use crate::names::{NameId, Names};
use crate::warnings::Warnings;
use foldhash::{HashMap, HashMapExt};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

mod clock;
mod decoder;
mod files;

use clock::ClockState;
pub use clock::{att_delay, clock_relative, clock_shift};
use decoder::Decoder;
pub use decoder::MAX_DEPTH;
use files::{open, se_idx, shaderdata_files};

/// How to read gfx12 packed marker headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PackedMode {
    /// `Normalised` for `att_tool.py` directories (11-column occupancy or `code.json` with a
    /// `kernels` table), `Raw` otherwise.
    #[default]
    Auto,
    /// Values are as the hardware wrote them (rocprofv3's C++ writer, `att_tool.py
    /// --no-decode-markers`): decode packed headers and correct their times.
    Raw,
    /// Headers were already rewritten to `(id << 2) | flags` and their times corrected.
    Normalised,
}

/// How the times of gfx12 packed headers are corrected (issue 38, item 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockCorrection {
    /// The spec's algorithm ("GFX12 Shader Clock Packing"): per (SE, CU, SIMD, layout), the
    /// arrival-minus-sample delay against the domain's first header, wrapped into the signed
    /// half window; a header moves earlier by its delay above the domain's minimum less
    /// `2^shift - 1` (the sampling bucket); headers that own payload records stay.
    #[default]
    Spec,
    /// rocprof-trace-decoder's `att.py` at 3adae6a5 (`_correct_marker_timestamps`, read for
    /// behaviour): per (SE, layout), the delay is `((time & mask) - sampled) & mask` with
    /// `mask = (2^bits - 1) << shift` (no wrap into a signed window), and every packed header,
    /// payload owners included, moves earlier by its delay minus the domain's minimum.
    Att,
}

/// Decoding options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Packed-header handling.
    pub packed: PackedMode,
    /// Packed-header time correction.
    pub clock_correction: ClockCorrection,
    /// Keep only these CUs (all when empty).
    pub cu: Vec<u32>,
    /// Keep only these SIMDs (all when empty).
    pub simd: Vec<u32>,
    /// Keep only these wave slots (all when empty).
    pub wave: Vec<u32>,
    /// Draw a progress bar on stderr when it is a terminal.
    pub progress: bool,
}

/// Identity of one wave instance and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveInfo {
    /// Shader engine.
    pub se: u32,
    /// CU (gfx9) or WGP with the SA at bit 7 (gfx10+).
    pub cu: u32,
    /// SIMD.
    pub simd: u32,
    /// Wave slot.
    pub slot: u32,
    /// Launch index of this slot in occupancy (0 before the first launch).
    pub instance: u32,
    /// Occupancy kernel_id, when a launch covers the record.
    pub kernel_id: Option<i64>,
    /// Kernel name from occupancy `"dispatches"`, unless empty or the `"0 /"` placeholder.
    pub kernel: Option<NameId>,
    /// Code object whose funcmap decodes this wave.
    pub code_object: Option<u32>,
    /// The frame name `code_object_<id>`.
    pub code_object_frame: Option<NameId>,
    /// The wave's end from occupancy (the first wave-end row of the slot at or after its launch
    /// and before the next launch), in shader cycles, when occupancy has one.
    pub end: Option<i64>,
}

/// One decoded marker header (not a payload record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Time in shader cycles (corrected for packed headers).
    pub time: i64,
    /// Marker id (0 for a bare exit).
    pub marker_id: u32,
    /// A scope was popped (exit_prev on a non-empty stack).
    pub popped: bool,
    /// A scope was pushed: its name and kind (`Function` or `User`).
    pub pushed: Option<(NameId, Kind)>,
    /// The header is a point event with this name.
    pub point: Option<NameId>,
}

/// One address-trace block (spec "Address Tracing"), filtered by EXEC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressBlock<'a> {
    /// Header marker id.
    pub marker_id: u32,
    /// `addr_trace_*` name (interned).
    pub name: NameId,
    /// The same name as text.
    pub name_text: &'a str,
    /// Source location of the operation (funcmap `@` part).
    pub source: Option<&'a str>,
    /// Header time in shader cycles.
    pub time: i64,
    /// EXEC mask (`exec_hi << 32 | exec_lo`).
    pub exec: u64,
    /// Active lanes, ascending.
    pub lanes: Vec<u32>,
    /// Address of each active lane (bytes): 64-bit flat/global, 32-bit LDS offsets and permute
    /// indices, raw buffer `base + soffset + voffset`; empty for a struct-buffer block (see
    /// [`BufferComponents`]).
    pub addresses: Vec<u64>,
    /// The components of a struct-buffer block, which has no address here.
    pub components: Option<BufferComponents>,
}

/// Receiver of decoded events. Per-wave state lives in `Self::Wave`, owned by the decoder.
pub trait Sink {
    /// Per-wave-instance state.
    type Wave: Default;
    /// A UI directory starts.
    fn begin_dir(&mut self, _dir: &TraceDir, _names: &Names) -> anyhow::Result<()> {
        Ok(())
    }
    /// A wave instance appears (its first record).
    fn wave_begin(&mut self, _w: &WaveInfo, _s: &mut Self::Wave, _names: &Names) {}
    /// A header; `stack` is the scope stack before the header's pop and push.
    fn header(&mut self, w: &WaveInfo, s: &mut Self::Wave, h: &Header, stack: &[NameId]);
    /// A complete address-trace block.
    fn address_block(&mut self, _w: &WaveInfo, _s: &mut Self::Wave, _b: &AddressBlock) {}
    /// The wave instance ended (a later instance started, or the directory ended): `close` is
    /// where the scopes still open on its stack (`open`, outermost first) end, by
    /// [`close_time`], or the instance's last record before a packet loss that cut it
    /// ([`loss_after`]); it is never before the instance's last record.
    fn wave_end(&mut self, _w: &WaveInfo, _s: &mut Self::Wave, _close: i64, _open: &[NameId]) {}
    /// The UI directory ended.
    fn end_dir(&mut self, _dir: &TraceDir, _names: &Names) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Where the scopes still open at the end of a wave instance are closed (issue 38, item 3), the
/// one rule of the flame graph, the timeline and the Perfetto export:
/// - the wave's end recorded by occupancy ([`WaveInfo::end`]): the truth, which AMD's readers do
///   not use;
/// - otherwise AMD's rule (rocprof-trace-decoder `samples/markers/perfetto.py` at 0218074, read
///   for behaviour): the first record of the next wave instance on the slot (`next`), or, for
///   the slot's last instance, its last record (`last_record`).
///
/// Never before `last_record` (a capture whose occupancy end precedes the wave's own records
/// would otherwise give slices ending before they start). Units: shader cycles.
pub fn close_time(w: &WaveInfo, last_record: i64, next: Option<i64>) -> i64 {
    w.end.or(next).map_or(last_record, |t| t.max(last_record))
}

/// The packet loss that ends a wave instance launched at `from` (`i64::MIN` before the slot's
/// first launch) and followed by the slot's next launch at `until`: the first loss time T of
/// its shader engine (`losses`, sorted) with `from < T < until`. AMD's marker stream
/// (rocprof-trace-decoder `source/marker_stream.cpp` at 0218074, read for behaviour) marks
/// every wave generation open at a loss unreliable and decodes nothing more of it; a wave
/// start after the loss opens a new, reliable generation. The decoder handles the loss before
/// the token it precedes (`source/gfx10/rdna_sqtt.cpp` at 0218074), so a launch at T itself
/// is after the loss. Units: shader cycles.
pub fn loss_after(losses: &[i64], from: i64, until: i64) -> Option<i64> {
    let i = losses.partition_point(|t| *t <= from);
    losses.get(i).copied().filter(|t| *t < until)
}

/// A sink that ignores everything (used for the clock-measuring pass).
struct NullSink;
impl Sink for NullSink {
    type Wave = ();
    fn header(&mut self, _: &WaveInfo, _: &mut (), _: &Header, _: &[NameId]) {}
}

/// The metadata of one UI directory.
#[derive(Debug, Default)]
pub struct TraceDir {
    /// Directory path.
    pub path: PathBuf,
    /// Shaderdata files with their shader engine, in processing order (SE, begin time, index).
    pub shaderdata: Vec<(u32, PathBuf)>,
    /// Wave launches and kernel names.
    pub occupancy: Occupancy,
    /// Marker tables by code-object id.
    pub tables: HashMap<u32, MarkerTable>,
    /// kernel_id -> code object.
    pub kernel_code_object: HashMap<i64, u32>,
    /// kernel_id -> interned kernel name (placeholder names left out).
    pub kernel_names: HashMap<i64, NameId>,
    /// Code-object id -> interned `code_object_<id>`.
    pub code_object_frames: HashMap<u32, NameId>,
    /// The directory was written by `att_tool.py`.
    pub att_tool_style: bool,
    /// Shader clock (Hz) from `realtime.json`.
    pub clock_hz: Option<f64>,
}

impl TraceDir {
    /// The directory's base name.
    pub fn name(&self) -> String {
        dir_name(&self.path)
    }
}

/// The base name of a UI directory (`trace` when the path has none).
pub fn dir_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned())
}

/// A whole capture: the UI directories under a path and the code objects beside them.
pub struct Trace {
    /// Interned names (marker, kernel and frame names).
    pub names: Names,
    /// Everything skipped, with counts.
    pub warnings: Warnings,
    found: Found,
    tables: HashMap<PathBuf, Option<MarkerTable>>,
}

/// Counts of one run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    /// UI directories processed.
    pub dirs: u64,
    /// Shaderdata records read (all passes counted once).
    pub records: u64,
    /// Marker headers decoded.
    pub headers: u64,
    /// Address blocks completed.
    pub blocks: u64,
}

impl Trace {
    /// Finds the UI directories and code objects under `root`. Error: no UI directory.
    pub fn open(root: &Path) -> anyhow::Result<Trace> {
        if !root.exists() {
            anyhow::bail!("{}: no such file or directory", root.display());
        }
        let found = crate::discover::walk(root);
        if found.ui_dirs.is_empty() {
            anyhow::bail!(
                "{}: no UI directory (ui_output_* or a directory with shaderdata_*.json / occupancy.json) found",
                root.display()
            );
        }
        let mut warnings = Warnings::default();
        for p in &found.outside {
            warnings.add(discover::LINK_OUTSIDE, || p.display().to_string());
        }
        Ok(Trace {
            names: Names::default(),
            warnings,
            found,
            tables: HashMap::new(),
        })
    }

    /// The UI directories found, sorted.
    pub fn ui_dirs(&self) -> &[PathBuf] {
        &self.found.ui_dirs
    }

    /// Every file a run may read, for callers that must not write over one: the entries of each
    /// UI directory, the shaderdata files its `filenames.json` lists (in subdirectories of it:
    /// names leading outside are not read) and the code objects found.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self
            .found
            .code_objects
            .values()
            .flatten()
            .cloned()
            .collect();
        for dir in &self.found.ui_dirs {
            let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
            v.extend(entries.map(|e| e.path()));
            let listing = open(&dir.join("filenames.json"))
                .ok()
                .and_then(|r| json::read_value(r).ok());
            let files = shaderdata_files(dir, listing.as_ref(), &mut Warnings::default());
            v.extend(files.into_iter().map(|(_, p)| p));
        }
        v
    }

    /// The marker table of a code-object file (parsed once per path).
    fn table_of(&mut self, path: &Path) -> Option<MarkerTable> {
        if let Some(t) = self.tables.get(path) {
            return t.clone();
        }
        let t = match std::fs::read(path) {
            Err(e) => {
                self.warnings.add("code object unreadable", || {
                    format!("{}: {e}", path.display())
                });
                None
            }
            Ok(bytes) => match hsaco::CodeObject::parse(&bytes) {
                Err(e) => {
                    self.warnings.add("code object not parsable", || {
                        format!("{}: {e}", path.display())
                    });
                    None
                }
                Ok(co) => match co.funcmap() {
                    None => {
                        self.warnings.add("code object without .sqtt_funcmap", || {
                            path.display().to_string()
                        });
                        None
                    }
                    Some(s) => {
                        let t = MarkerTable::from_section(s, &mut self.names);
                        let n = t.warnings.len() as u64;
                        let first = t.warnings.first().cloned().unwrap_or_default();
                        self.warnings.add_n("funcmap rows skipped or overridden (read as rocprof-trace-decoder does)", n, || {
                            format!("{}: {first}", path.display())
                        });
                        Some(t)
                    }
                },
            },
        };
        self.tables.insert(path.to_path_buf(), t.clone());
        t
    }

    /// Loads the metadata of one UI directory. Missing or broken files become warnings.
    pub fn load_dir(&mut self, dir: &Path) -> TraceDir {
        let mut td = TraceDir {
            path: dir.to_path_buf(),
            ..TraceDir::default()
        };
        let w = &mut self.warnings;
        let read_small = |name: &str, w: &mut Warnings| -> Option<serde_json::Value> {
            let p = dir.join(name);
            if !p.exists() {
                return None;
            }
            if !discover::resolves_inside(dir, &p) {
                w.add(discover::LINK_OUTSIDE, || p.display().to_string());
                return None;
            }
            match open(&p)
                .map_err(|e| e.to_string())
                .and_then(json::read_value)
            {
                Ok(v) => Some(v),
                Err(e) => {
                    w.add("unreadable JSON file skipped", || {
                        format!("{}: {e}", p.display())
                    });
                    None
                }
            }
        };
        let filenames = read_small("filenames.json", w);
        td.shaderdata = shaderdata_files(dir, filenames.as_ref(), w);
        if td.shaderdata.is_empty() {
            w.add("UI directory without shaderdata", || {
                dir.display().to_string()
            });
        }
        if filenames
            .as_ref()
            .and_then(|f| f.get("version"))
            .and_then(|v| v.as_str())
            == Some("3.1.0")
        {
            td.att_tool_style = true;
        }
        if let Some(rt) = read_small("realtime.json", w) {
            td.clock_hz = json::shader_clock_hz(&rt).unwrap_or_else(|why| {
                w.add(
                    "realtime.json gives no usable shader clock rate (cycles are used)",
                    || format!("{}: {why}", dir.join("realtime.json").display()),
                );
                None
            });
        }
        let occ_path = dir.join("occupancy.json");
        let occ_file = if discover::resolves_inside(dir, &occ_path) {
            open(&occ_path)
        } else {
            w.add(discover::LINK_OUTSIDE, || occ_path.display().to_string());
            Err(std::io::ErrorKind::NotFound.into())
        };
        match occ_file {
            Err(_) => w.add(
                "occupancy.json missing (one wave instance per slot, kernel unknown)",
                || dir.display().to_string(),
            ),
            Ok(r) => {
                let (occ, err) = json::read_occupancy(r);
                if let Some(e) = err {
                    w.add(
                        "occupancy.json invalid (rows before the error kept)",
                        || format!("{}: {e}", occ_path.display()),
                    );
                }
                w.add_n(
                    "occupancy rows with fewer than 6 integers",
                    occ.malformed,
                    || occ_path.display().to_string(),
                );
                w.add_n(
                    "occupancy.json packet-loss events without a time or shader engine (ignored)",
                    occ.malformed_losses,
                    || occ_path.display().to_string(),
                );
                td.att_tool_style |= occ.att_tool_style;
                td.occupancy = occ;
            }
        }
        // code.json: funcmap rows, kernels table.
        let code_path = dir.join("code.json");
        let mut code_rows = HashMap::new();
        let mut kernels_json: Vec<(String, u32)> = Vec::new();
        if code_path.exists() && !discover::resolves_inside(dir, &code_path) {
            w.add(discover::LINK_OUTSIDE, || code_path.display().to_string());
        } else if code_path.exists() {
            match open(&code_path)
                .map_err(|e| e.to_string())
                .and_then(json::read_code_json)
            {
                Err(e) => w.add("unreadable JSON file skipped", || {
                    format!("{}: {e}", code_path.display())
                }),
                Ok(cj) => {
                    let (rows, bad) = crate::markers::rows_from_code_json(
                        cj.sqtt_funcmap.as_ref(),
                        cj.sqtt_funcmap_layout.as_ref(),
                        cj.sqtt_funcmap_payloads.as_ref(),
                    );
                    w.add_n("code.json funcmap rows skipped", bad, || {
                        code_path.display().to_string()
                    });
                    code_rows = rows;
                    if let Some(k) = cj.kernels.as_ref().and_then(|k| k.as_array()) {
                        td.att_tool_style = true;
                        for e in k {
                            let name = e.get("name").and_then(|n| n.as_str());
                            let co = e
                                .get("codeobj")
                                .and_then(|c| c.as_u64())
                                .and_then(|c| u32::try_from(c).ok());
                            if let (Some(n), Some(c)) = (name, co) {
                                kernels_json.push((n.to_string(), c));
                            }
                        }
                    }
                }
            }
        }
        // Code objects: a file in this directory or its parent wins over one elsewhere.
        let local =
            |p: &Path| p.parent() == Some(dir) || Some(p.parent().unwrap_or(p)) == dir.parent();
        let candidates: Vec<(u32, PathBuf, usize)> = self
            .found
            .code_objects
            .iter()
            .map(|(id, paths)| {
                let pick = paths.iter().find(|p| local(p)).unwrap_or(&paths[0]);
                (*id, pick.clone(), paths.len())
            })
            .collect();
        for (id, path, n) in candidates {
            if n > 1 && !local(&path) {
                self.warnings.add(
                    "several files claim one code-object id (first by path used)",
                    || format!("id {id}: {}", path.display()),
                );
            }
            if let Some(t) = self.table_of(&path) {
                td.tables.insert(id, t);
            }
        }
        for (id, rows) in code_rows {
            td.tables
                .entry(id)
                .or_insert_with(|| MarkerTable::from_rows(&rows, &mut self.names));
        }
        for id in td.tables.keys() {
            td.code_object_frames
                .insert(*id, self.names.intern(&format!("code_object_{id}")));
        }
        // kernel_id -> name and code object.
        for (&k, name) in &td.occupancy.dispatches {
            let co = td
                .occupancy
                .kernel_code_object
                .get(&k)
                .copied()
                .or_else(|| {
                    kernels_json
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, c)| *c)
                })
                .or_else(|| {
                    let mut hits = td
                        .tables
                        .iter()
                        .filter(|(_, t)| t.kernels.iter().any(|kn| kn == name));
                    match (hits.next(), hits.next()) {
                        (Some((id, _)), None) => Some(*id),
                        _ => None,
                    }
                })
                .or_else(|| {
                    name.split_once(" / ")
                        .and_then(|(c, _)| c.trim().parse().ok())
                        .filter(|c| *c != 0)
                });
            if let Some(co) = co {
                td.kernel_code_object.insert(k, co);
            }
            if !name.is_empty() && !name.starts_with("0 /") {
                td.kernel_names.insert(k, self.names.intern(name));
            }
        }
        td
    }

    /// Runs every UI directory through `sink` (each directory is its own time domain).
    pub fn run<S: Sink>(&mut self, opts: &Options, sink: &mut S) -> anyhow::Result<RunStats> {
        let mut stats = RunStats::default();
        let dirs = self.found.ui_dirs.clone();
        let total: u64 = dirs
            .iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .filter(|e| se_idx(&e.file_name().to_string_lossy()).is_some())
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        let pb = if opts.progress && std::io::stderr().is_terminal() {
            let pb = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({eta})",
            ) {
                pb.set_style(style);
            }
            pb
        } else {
            ProgressBar::hidden()
        };
        for d in &dirs {
            let td = self.load_dir(d);
            pb.set_message(td.name());
            let normalised = match opts.packed {
                PackedMode::Auto => td.att_tool_style,
                PackedMode::Raw => false,
                PackedMode::Normalised => true,
            };
            let packing = !normalised && td.tables.values().any(|t| t.clock.is_some());
            let mut clock = ClockState::Off;
            if packing {
                pb.inc_length(
                    td.shaderdata
                        .iter()
                        .filter_map(|(_, p)| p.metadata().ok())
                        .map(|m| m.len())
                        .sum(),
                );
                let mut measure = Decoder::new(
                    &td,
                    opts,
                    &self.names,
                    NullSink,
                    normalised,
                    ClockState::Measure(HashMap::new()),
                );
                let mut scratch = Warnings::default();
                measure.feed_files(&pb, &mut scratch);
                measure.finish_all(&mut scratch);
                if let ClockState::Measure(m) = measure.clock {
                    clock = ClockState::Apply(m);
                }
            }
            sink.begin_dir(&td, &self.names)?;
            let mut dec = Decoder::new(&td, opts, &self.names, &mut *sink, normalised, clock);
            dec.feed_files(&pb, &mut self.warnings);
            dec.finish_all(&mut self.warnings);
            stats.dirs += 1;
            stats.records += dec.records;
            stats.headers += dec.headers;
            stats.blocks += dec.blocks;
            self.warnings.add_n(
                "PRIV (trap handler) records dropped",
                dec.priv_dropped,
                || td.name(),
            );
            sink.end_dir(&td, &self.names)?;
        }
        pb.finish_and_clear();
        Ok(stats)
    }
}

impl<S: Sink> Sink for &mut S {
    type Wave = S::Wave;
    fn begin_dir(&mut self, d: &TraceDir, n: &Names) -> anyhow::Result<()> {
        (**self).begin_dir(d, n)
    }
    fn wave_begin(&mut self, w: &WaveInfo, s: &mut Self::Wave, n: &Names) {
        (**self).wave_begin(w, s, n)
    }
    fn header(&mut self, w: &WaveInfo, s: &mut Self::Wave, h: &Header, st: &[NameId]) {
        (**self).header(w, s, h, st)
    }
    fn address_block(&mut self, w: &WaveInfo, s: &mut Self::Wave, b: &AddressBlock) {
        (**self).address_block(w, s, b)
    }
    fn wave_end(&mut self, w: &WaveInfo, s: &mut Self::Wave, t: i64, o: &[NameId]) {
        (**self).wave_end(w, s, t, o)
    }
    fn end_dir(&mut self, d: &TraceDir, n: &Names) -> anyhow::Result<()> {
        (**self).end_dir(d, n)
    }
}

/// `SE<se>/CU<cu>/SIMD<simd>/W<slot>#<instance>`.
pub fn wave_name(w: &WaveInfo) -> String {
    format!(
        "SE{}/CU{}/SIMD{}/W{}#{}",
        w.se, w.cu, w.simd, w.slot, w.instance
    )
}
