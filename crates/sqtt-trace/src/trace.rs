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
//! - Malformed input is counted in [`Warnings`]; the rest of the trace is still used.

pub use crate::blocks::{parse_block, BlockParts, BufferComponents};
use crate::discover::{self, Found};
use crate::json::{self, Occupancy, Record, SlotKey, FLAG_PRIV};
use crate::markers::{decode_word, ClockLayout, Kind, Marker, MarkerTable};
use crate::names::{NameId, Names};
use crate::warnings::Warnings;
use foldhash::{HashMap, HashMapExt};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};

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
    /// [`close_time`]; it is never before the instance's last record.
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

fn open(path: &Path) -> std::io::Result<BufReader<std::fs::File>> {
    Ok(BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(path)?,
    ))
}

/// SE and index from `shaderdata_<se>_<idx>.json`.
fn se_idx(name: &str) -> Option<(u32, u32)> {
    let stem = name.strip_prefix("shaderdata_")?.strip_suffix(".json")?;
    let mut it = stem.split('_');
    let se = it.next()?.parse().ok()?;
    let idx = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    Some((se, idx))
}

/// The shaderdata files of `dir`: from `filenames.json` `"shaderdata_filenames"` when it lists
/// any, else every `shaderdata_*.json` (SE from the first number of the name). A listed name
/// that is absolute or has a `..` component, and a file resolving outside `dir` through a
/// symbolic link, are skipped with a warning naming them (issue 32).
fn shaderdata_files(
    dir: &Path,
    filenames: Option<&serde_json::Value>,
    w: &mut Warnings,
) -> Vec<(u32, PathBuf)> {
    let mut list: Vec<(u32, i64, u32, PathBuf)> = Vec::new();
    if let Some(map) = filenames
        .and_then(|f| f.get("shaderdata_filenames"))
        .and_then(|v| v.as_object())
    {
        for (se, entries) in map {
            let Ok(se) = se.parse::<u32>() else {
                w.add("filenames.json: non-numeric shader engine key", || {
                    se.clone()
                });
                continue;
            };
            for (i, e) in entries.as_array().into_iter().flatten().enumerate() {
                let file = e.get(0).and_then(|f| f.as_str());
                let begin = e.get(1).and_then(|b| b.as_i64()).unwrap_or(0);
                let Some(f) = file else {
                    w.add("filenames.json: malformed shaderdata entry", || {
                        e.to_string()
                    });
                    continue;
                };
                // An untrusted name: inside the UI directory, or skipped and named.
                let Some(p) = discover::listed(dir, f) else {
                    w.add(discover::LISTED_OUTSIDE, || {
                        format!("{}: {f:?}", dir.join("filenames.json").display())
                    });
                    continue;
                };
                if !discover::resolves_inside(dir, &p) {
                    w.add(discover::LINK_OUTSIDE, || p.display().to_string());
                } else if p.is_file() {
                    list.push((se, begin, i as u32, p));
                } else if p.exists() {
                    w.add("listed shaderdata file is not a regular file", || {
                        p.display().to_string()
                    });
                } else {
                    w.add("listed shaderdata file missing", || p.display().to_string());
                }
            }
        }
    }
    if list.is_empty() {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if se_idx(&n).is_some() && !discover::resolves_inside(dir, &e.path()) {
                    w.add(discover::LINK_OUTSIDE, || e.path().display().to_string());
                } else if let Some((se, idx)) = se_idx(&n) {
                    list.push((se, 0, idx, e.path()));
                } else if n.starts_with("shaderdata_") && n.ends_with(".json") {
                    w.add("shaderdata file name without a shader engine", || {
                        e.path().display().to_string()
                    });
                }
            }
        }
    }
    list.sort();
    list.into_iter().map(|(se, _, _, p)| (se, p)).collect()
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
            td.clock_hz = json::shader_clock_hz(&rt);
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

/// Clock-correction domain: (SE, CU, SIMD, layout).
type Domain = (u32, u32, u32, ClockLayout);

/// Per-domain figures of the spec's correction: the coordinate origin (first header seen) and the
/// minimum relative delay.
#[derive(Debug, Clone, Copy)]
struct DomainStat {
    origin_time: i64,
    origin_sampled: i64,
    min_relative: i64,
}

enum ClockState {
    Off,
    Measure(HashMap<Domain, DomainStat>),
    Apply(HashMap<Domain, DomainStat>),
}

/// `relative` of the spec: the arrival-minus-sample delay of a header against the domain's
/// origin, wrapped into the signed sampled window.
pub fn clock_relative(
    l: ClockLayout,
    time: i64,
    sampled: i64,
    origin_time: i64,
    origin_sampled: i64,
) -> i64 {
    let mask = ((1u64 << (l.bits + l.shift)) - 1) as i64;
    let half = (mask + 1) / 2;
    (((time.wrapping_sub(origin_time))
        .wrapping_sub(sampled.wrapping_sub(origin_sampled))
        .wrapping_add(half))
        & mask)
        - half
}

/// The delay `att.py` (3adae6a5) gives a packed header: `((time & mask) - sampled) & mask`,
/// `mask = (2^bits - 1) << shift`, `sampled` already shifted (cycles).
pub fn att_delay(l: ClockLayout, time: i64, sampled: i64) -> i64 {
    let mask = ((1i64 << l.bits) - 1) << l.shift;
    ((time & mask) - sampled) & mask
}

/// How far the spec moves a header earlier: `max(0, relative - minimum_relative - (bucket - 1))`.
pub fn clock_shift(l: ClockLayout, relative: i64, minimum_relative: i64) -> i64 {
    let bucket = 1i64 << l.shift;
    (relative - minimum_relative - (bucket - 1)).max(0)
}

enum Pending {
    None,
    Skip(u32),
    Block {
        marker_id: u32,
        time: i64,
        words: Vec<u32>,
        need: u32,
    },
}

struct Slot<W> {
    info: WaveInfo,
    /// Time range in which records belong to this instance.
    from: i64,
    until: i64,
    stack: Vec<NameId>,
    last_time: i64,
    last_header: i64,
    pending: Pending,
    sink: W,
}

/// Deepest scope stack kept per wave; deeper pushes are dropped with a warning.
pub const MAX_DEPTH: usize = 4096;
/// Largest address block kept (payload words); larger `R:` counts are skipped.
const MAX_BLOCK: u32 = 1 << 16;

struct Decoder<'a, S: Sink> {
    dir: &'a TraceDir,
    opts: &'a Options,
    names: &'a Names,
    sink: S,
    normalised: bool,
    clock: ClockState,
    slots: HashMap<SlotKey, Slot<S::Wave>>,
    records: u64,
    headers: u64,
    blocks: u64,
    priv_dropped: u64,
}

impl<'a, S: Sink> Decoder<'a, S> {
    fn new(
        dir: &'a TraceDir,
        opts: &'a Options,
        names: &'a Names,
        sink: S,
        normalised: bool,
        clock: ClockState,
    ) -> Self {
        Decoder {
            dir,
            opts,
            names,
            sink,
            normalised,
            clock,
            slots: HashMap::new(),
            records: 0,
            headers: 0,
            blocks: 0,
            priv_dropped: 0,
        }
    }

    /// Reads the directory's shaderdata files on a second thread ([`parse_files`]) and decodes
    /// their records here, in file order: the records, warnings and sink events are the same as
    /// reading and decoding on one thread, while parsing and decoding overlap.
    fn feed_files(&mut self, pb: &ProgressBar, w: &mut Warnings) {
        let dir = self.dir;
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
            let (back, spare) = std::sync::mpsc::channel::<Vec<Record>>();
            s.spawn(move || parse_files(&dir.shaderdata, pb, &tx, &spare));
            for batch in rx {
                match batch {
                    Batch::Records(se, mut v) => {
                        for r in v.drain(..) {
                            self.record(se, r, w);
                        }
                        // The parser may have finished: then the buffer is simply dropped.
                        let _ = back.send(v);
                    }
                    Batch::Unreadable(path, e) => w.add("shaderdata file unreadable", || {
                        format!("{}: {e}", path.display())
                    }),
                    Batch::Done(path, res) => file_warnings(path, &res, w),
                }
            }
        });
    }

    /// (instance, kernel_id, valid from, valid until) for a record of a slot at `time`.
    /// `guess` is a likely answer for the number of launches at or before `time` (the slot's
    /// next launch, as records arrive in time order); it is used only when it is that number,
    /// which saves a binary search over a long launch list per wave instance.
    fn locate(
        &self,
        key: SlotKey,
        time: i64,
        guess: Option<usize>,
    ) -> (u32, Option<i64>, i64, i64) {
        let Some(l) = self.dir.occupancy.launches.get(&key) else {
            return (0, None, i64::MIN, i64::MAX);
        };
        let is_point = |p: usize| {
            p <= l.len() && (p == 0 || l[p - 1].0 <= time) && l.get(p).is_none_or(|x| x.0 > time)
        };
        let i = match guess {
            Some(p) if is_point(p) => p,
            _ => l.partition_point(|(t, _)| *t <= time),
        };
        let until = l.get(i).map_or(i64::MAX, |x| x.0);
        if i == 0 {
            (0, l.first().map(|x| x.1), i64::MIN, until)
        } else {
            ((i - 1) as u32, Some(l[i - 1].1), l[i - 1].0, until)
        }
    }

    fn new_slot(
        &self,
        key: SlotKey,
        instance: u32,
        kernel_id: Option<i64>,
        from: i64,
        until: i64,
    ) -> WaveInfo {
        let d = self.dir;
        let end = d.occupancy.ends.get(&key).and_then(|e| {
            let i = e.partition_point(|t| *t < from);
            e.get(i).copied().filter(|t| *t < until)
        });
        let mut co = kernel_id.and_then(|k| d.kernel_code_object.get(&k).copied());
        if co.is_none() && d.tables.len() == 1 {
            co = d.tables.keys().next().copied();
        }
        WaveInfo {
            se: key.0,
            cu: key.1,
            simd: key.2,
            slot: key.3,
            instance,
            kernel_id,
            kernel: kernel_id.and_then(|k| d.kernel_names.get(&k).copied()),
            code_object: co,
            code_object_frame: co.and_then(|c| d.code_object_frames.get(&c).copied()),
            end,
        }
    }

    /// Ends a wave instance; `next` is the time of the first record of the slot's next wave
    /// instance, when one follows.
    fn finish(&mut self, mut slot: Slot<S::Wave>, next: Option<i64>, w: &mut Warnings) {
        if !matches!(slot.pending, Pending::None) {
            w.add(
                "payload cut short (wave ended inside a payload block)",
                || wave_name(&slot.info),
            );
        }
        let close = close_time(&slot.info, slot.last_time, next);
        self.sink
            .wave_end(&slot.info, &mut slot.sink, close, &slot.stack);
    }

    fn finish_all(&mut self, w: &mut Warnings) {
        let mut keys: Vec<_> = self.slots.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            if let Some(s) = self.slots.remove(&k) {
                self.finish(s, None, w);
            }
        }
    }

    fn record(&mut self, se: u32, r: Record, w: &mut Warnings) {
        self.records += 1;
        if r.flags & FLAG_PRIV != 0 {
            self.priv_dropped += 1;
            return;
        }
        let o = self.opts;
        if (!o.cu.is_empty() && !o.cu.contains(&r.cu))
            || (!o.simd.is_empty() && !o.simd.contains(&r.simd))
            || (!o.wave.is_empty() && !o.wave.contains(&r.wave))
        {
            return;
        }
        let key = (se, r.cu, r.simd, r.wave);
        let current =
            matches!(self.slots.get(&key), Some(s) if s.from <= r.time && r.time < s.until);
        if !current {
            // The launch after the slot's current instance, when there is one.
            let guess = self.slots.get(&key).map(|s| {
                if s.from == i64::MIN {
                    1
                } else {
                    s.info.instance as usize + 2
                }
            });
            let (instance, kernel_id, from, until) = self.locate(key, r.time, guess);
            let same = matches!(self.slots.get(&key), Some(s) if s.info.instance == instance);
            if same {
                // An earlier record than the slot's range (out of order): keep the instance.
                w.add("records out of time order within a wave", || {
                    wave_name(&self.slots[&key].info)
                });
            } else {
                if let Some(old) = self.slots.remove(&key) {
                    self.finish(old, Some(r.time), w);
                }
                let info = self.new_slot(key, instance, kernel_id, from, until);
                let mut sink = S::Wave::default();
                self.sink.wave_begin(&info, &mut sink, self.names);
                self.slots.insert(
                    key,
                    Slot {
                        info,
                        from,
                        until,
                        stack: Vec::new(),
                        last_time: r.time,
                        last_header: i64::MIN,
                        pending: Pending::None,
                        sink,
                    },
                );
            }
        }
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        if r.time < slot.last_time {
            w.add("records out of time order within a wave", || {
                wave_name(&slot.info)
            });
        }
        slot.last_time = slot.last_time.max(r.time);
        let d = self.dir;
        let table = slot.info.code_object.and_then(|c| d.tables.get(&c));
        // Payload records.
        match &mut slot.pending {
            Pending::None => {}
            Pending::Skip(n) => {
                *n -= 1;
                if *n == 0 {
                    slot.pending = Pending::None;
                }
                return;
            }
            Pending::Block { words, need, .. } => {
                words.push(r.value);
                if words.len() as u32 == *need {
                    if let (
                        Pending::Block {
                            marker_id,
                            time,
                            words,
                            ..
                        },
                        Some(t),
                    ) = (std::mem::replace(&mut slot.pending, Pending::None), table)
                    {
                        if let Some(m) = t.markers.get(&marker_id) {
                            let name = self.names.get(m.name);
                            match parse_block(name, &words, t.wave_size) {
                                Ok((exec, lanes, addresses, components)) => {
                                    self.blocks += 1;
                                    let b = AddressBlock {
                                        marker_id,
                                        name: m.name,
                                        name_text: name,
                                        source: m.loc.as_deref(),
                                        time,
                                        exec,
                                        lanes,
                                        addresses,
                                        components,
                                    };
                                    self.sink.address_block(&slot.info, &mut slot.sink, &b);
                                }
                                Err(e) => w.add("address block not decodable (dropped)", || {
                                    format!("{name} id {marker_id}: {e}")
                                }),
                            }
                        }
                    }
                }
                return;
            }
        }
        let Some(t) = table else {
            w.add(
                "records of waves whose code object has no funcmap (dropped)",
                || match slot.info.kernel_id {
                    Some(k) => format!("{} kernel_id {k}", wave_name(&slot.info)),
                    None => format!("{} (no kernel_id)", wave_name(&slot.info)),
                },
            );
            return;
        };
        let layout = if self.normalised { None } else { t.clock };
        let word = decode_word(r.value, layout, |id| t.markers.contains_key(&id));
        let marker = t.markers.get(&word.id);
        let bare_exit = word.exit_prev && !word.enter && word.id == 0;
        if marker.is_none() && !bare_exit {
            w.add("marker ids absent from the funcmap (dropped)", || {
                format!(
                    "value {:#x} (id {}) in {}",
                    r.value,
                    word.id,
                    wave_name(&slot.info)
                )
            });
            return;
        }
        let mut time = r.time;
        if let (Some(sampled), Some(l)) = (word.sampled, layout) {
            let att = self.opts.clock_correction == ClockCorrection::Att;
            if att || marker.is_none_or(|m| m.payload == 0) {
                // att.py's domain is the SE and the layout; CU and SIMD are not part of it.
                let dom = if att {
                    (se, u32::MAX, u32::MAX, l)
                } else {
                    (se, r.cu, r.simd, l)
                };
                let sampled = sampled as i64;
                let delay = |s: &DomainStat| {
                    if att {
                        att_delay(l, time, sampled)
                    } else {
                        clock_relative(l, time, sampled, s.origin_time, s.origin_sampled)
                    }
                };
                match &mut self.clock {
                    ClockState::Off => {}
                    ClockState::Measure(m) => {
                        let first = DomainStat {
                            origin_time: time,
                            origin_sampled: sampled,
                            min_relative: 0,
                        };
                        let d = delay(&first);
                        let s = m.entry(dom).or_insert(DomainStat {
                            min_relative: d,
                            ..first
                        });
                        s.min_relative = s.min_relative.min(d);
                    }
                    ClockState::Apply(m) => {
                        if let Some(s) = m.get(&dom) {
                            let d = delay(s);
                            time -= if att {
                                d - s.min_relative
                            } else {
                                clock_shift(l, d, s.min_relative)
                            };
                        }
                    }
                }
            }
        }
        time = time.max(slot.last_header);
        slot.last_header = time;
        self.headers += 1;
        let mut h = Header {
            time,
            marker_id: word.id,
            popped: false,
            pushed: None,
            point: None,
        };
        let before = slot.stack.len();
        if word.exit_prev {
            if before > 0 {
                h.popped = true;
            } else {
                w.add("exit on an empty stack (stack underflow)", || {
                    wave_name(&slot.info)
                });
            }
        }
        if let Some(m) = marker {
            let scope = matches!(m.kind, Kind::Function | Kind::User);
            if word.enter && scope {
                if before - usize::from(h.popped) < MAX_DEPTH {
                    h.pushed = Some((m.name, m.kind));
                } else {
                    w.add("scope stack deeper than 4096 (push dropped)", || {
                        wave_name(&slot.info)
                    });
                }
            } else if word.enter || !word.exit_prev {
                h.point = Some(m.name);
            }
        }
        self.sink
            .header(&slot.info, &mut slot.sink, &h, &slot.stack);
        if h.popped {
            slot.stack.pop();
        }
        if let Some((n, _)) = h.pushed {
            slot.stack.push(n);
        }
        if let Some(m) = marker {
            arm_payload(slot, m, word.id, time, self.names, w);
        }
    }
}

/// Records per message from the parsing thread to the decoder (64 Ki x 32 bytes = 2 MiB).
const BATCH: usize = 1 << 16;

/// A message from [`parse_files`] to the decoder, in file order.
enum Batch<'a> {
    /// Records of one file (its shader engine, up to [`BATCH`] records in file order).
    Records(u32, Vec<Record>),
    /// A file that cannot be opened or read, with the error text.
    Unreadable(&'a Path, String),
    /// A file is complete: what reading it gave besides its records.
    Done(&'a Path, json::ShaderdataFile),
}

/// Parses `files` in order and sends their records in batches, then each file's result. Files
/// up to [`json::IN_MEMORY_LIMIT`] bytes are read whole (the fast slice reader), larger ones
/// streamed. Emptied buffers come back through `spare`. Stops when the decoder is gone.
fn parse_files<'a>(
    files: &'a [(u32, PathBuf)],
    pb: &ProgressBar,
    tx: &std::sync::mpsc::SyncSender<Batch<'a>>,
    spare: &std::sync::mpsc::Receiver<Vec<Record>>,
) {
    let fresh = || {
        spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH))
    };
    for (se, path) in files {
        let se = *se;
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                if tx.send(Batch::Unreadable(path, e.to_string())).is_err() {
                    return;
                }
                continue;
            }
        };
        let size = file.metadata().map_or(u64::MAX, |m| m.len());
        let mut buf = fresh();
        let mut gone = false;
        let mut push = |r: Record| {
            buf.push(r);
            if buf.len() == BATCH {
                let full = std::mem::replace(&mut buf, fresh());
                gone |= tx.send(Batch::Records(se, full)).is_err();
            }
        };
        let res = if size <= json::IN_MEMORY_LIMIT {
            let mut bytes = Vec::with_capacity(size as usize);
            if let Err(e) = pb.wrap_read(file).read_to_end(&mut bytes) {
                if tx.send(Batch::Unreadable(path, e.to_string())).is_err() {
                    return;
                }
                continue;
            }
            json::read_shaderdata_slice(&bytes, &mut push)
        } else {
            let reader = BufReader::with_capacity(1 << 20, pb.wrap_read(file));
            json::read_shaderdata(reader, &mut push)
        };
        if gone
            || (!buf.is_empty() && tx.send(Batch::Records(se, buf)).is_err())
            || tx.send(Batch::Done(path, res)).is_err()
        {
            return;
        }
    }
}

/// The warnings of one shaderdata file's result.
fn file_warnings(path: &Path, res: &json::ShaderdataFile, w: &mut Warnings) {
    let p = || path.display().to_string();
    if let Some(e) = &res.error {
        w.add(
            "shaderdata JSON invalid or truncated (records before the error used)",
            || format!("{}: {e}", p()),
        );
    }
    w.add_n("shaderdata rows malformed (skipped)", res.malformed, p);
    if let Some(t) = &res.unexpected_type {
        w.add(
            "shaderdata \"type\" neither \"shaderdata\" nor \"S_TTRACEDATA\"",
            || format!("{}: {t}", p()),
        );
    }
    if let Some(s) = &res.bad_schema {
        w.add(
            "shaderdata records_schema lacks a column (file skipped)",
            || format!("{}: {s}", p()),
        );
    }
    if let Some(c) = res.count_mismatch {
        w.add(
            "shaderdata records_count differs from the rows read",
            || format!("{}: records_count {c}", p()),
        );
    }
}

fn arm_payload<W>(
    slot: &mut Slot<W>,
    m: &Marker,
    id: u32,
    time: i64,
    names: &Names,
    w: &mut Warnings,
) {
    if m.payload == 0 {
        return;
    }
    let name = names.get(m.name);
    if name.starts_with("addr_trace_") && m.payload <= MAX_BLOCK {
        slot.pending = Pending::Block {
            marker_id: id,
            time,
            words: Vec::with_capacity(m.payload as usize),
            need: m.payload,
        };
    } else {
        if name.starts_with("addr_trace_") {
            w.add("address block larger than 65536 words (skipped)", || {
                format!("{name} id {id}")
            });
        }
        slot.pending = Pending::Skip(m.payload);
    }
}

/// `SE<se>/CU<cu>/SIMD<simd>/W<slot>#<instance>`.
pub fn wave_name(w: &WaveInfo) -> String {
    format!(
        "SE{}/CU{}/SIMD{}/W{}#{}",
        w.se, w.cu, w.simd, w.slot, w.instance
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listed shaderdata file that exists but is a directory is named as such, one that does
    /// not exist as missing, and a regular one is kept (fresh-tester finding: both were
    /// "missing").
    #[test]
    fn listed_shaderdata_kinds() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("se0.json")).unwrap();
        std::fs::write(t.path().join("se1.json"), "{}").unwrap();
        let listing = serde_json::json!({"shaderdata_filenames": {
            "0": [["se0.json", 0]], "1": [["se1.json", 0]], "2": [["se2.json", 0]]}});
        let mut w = Warnings::default();
        let files = shaderdata_files(t.path(), Some(&listing), &mut w);
        assert_eq!(files, vec![(1, t.path().join("se1.json"))]);
        assert_eq!(w.count("listed shaderdata file is not a regular file"), 1);
        assert_eq!(w.count("listed shaderdata file missing"), 1);
    }

    /// Listed names leading outside the UI directory are skipped and named (issue 32): `..`,
    /// absolute paths and symbolic links leading out; a subdirectory is fine.
    #[test]
    fn listed_shaderdata_stays_inside() {
        let t = tempfile::tempdir().unwrap();
        let ui = t.path().join("cap/ui");
        std::fs::create_dir_all(ui.join("sub")).unwrap();
        let outside = t.path().join("outside.json");
        std::fs::write(&outside, "{}").unwrap();
        std::fs::write(ui.join("sub/se0.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&outside, ui.join("link.json")).unwrap();
        let abs = outside.to_str().unwrap();
        let listing = serde_json::json!({"shaderdata_filenames": {
            "0": [["sub/se0.json", 0]], "1": [["../../outside.json", 0]], "2": [[abs, 0]],
            "3": [["link.json", 0]]}});
        let mut w = Warnings::default();
        let files = shaderdata_files(&ui, Some(&listing), &mut w);
        assert_eq!(files, vec![(0, ui.join("sub/se0.json"))]);
        assert_eq!(w.count(discover::LISTED_OUTSIDE), 2);
        assert_eq!(w.count(discover::LINK_OUTSIDE), 1);
        assert!(w.to_string().contains("\"../../outside.json\""), "{w}");
        // Found by name (no listing): a link leading out is skipped too.
        std::fs::rename(ui.join("link.json"), ui.join("shaderdata_3_0.json")).unwrap();
        let mut w = Warnings::default();
        assert!(shaderdata_files(&ui, None, &mut w).is_empty());
        assert_eq!(w.count(discover::LINK_OUTSIDE), 1);
    }

    /// att_tool_test.py@0218074 (note §2.6): at layout (12, 4), a second header of the same SIMD
    /// that arrives 0x80 cycles after the first but sampled one 16-cycle bucket later is pulled
    /// back to +0x1F; the first (the minimum delay) stays.
    #[test]
    fn clock_correction_known_answer() {
        let l = ClockLayout { bits: 12, shift: 4 };
        let (t0, s0) = (1000i64, 0x1000i64);
        let (t1, s1) = (1000 + 0x80, 0x1010);
        let r0 = clock_relative(l, t0, s0, t0, s0);
        let r1 = clock_relative(l, t1, s1, t0, s0);
        let min = r0.min(r1);
        assert_eq!(t0 - clock_shift(l, r0, min), 1000);
        assert_eq!(t1 - clock_shift(l, r1, min), 1000 + 0x1F);
        // The window wraps: a sample just past the 16-bit window edge is still one bucket on.
        let r2 = clock_relative(l, t0 + 0x80, 0x0_0005, t0, 0xFFF5);
        assert_eq!(r2, 0x70);
    }
}
