//! Chrome Trace Event Format JSON for the Perfetto UI, one file per UI directory, written as the
//! events are decoded (bounded memory).
//!
//! Layout: one process per dispatch (`pid` = occupancy kernel_id, 0 when unknown; named after the
//! kernel), one thread per wave instance (`tid` numbered in order of appearance, named
//! `SE<se>/CU<cu>/SIMD<simd>/W<wave>#<instance>`), `B`/`E` slices for scopes (categories
//! `sqtt.function`, `sqtt.user`), thread-scoped instant events for points (`sqtt.point`); slices
//! still open when a wave ends are closed where [`crate::trace::close_time`] says (occupancy's
//! wave end, else AMD's rule), their `E` event marked `"args":{"unclosed":true}`. `ts` is in microseconds, as the
//! format defines it: cycles / (GHz * 1000) with a clock rate, else raw cycles (then the axis is
//! labelled cycles in `otherData`).

use crate::markers::Kind;
use crate::names::{NameId, Names};
use crate::trace::{wave_name, Header, Sink, TraceDir, WaveInfo};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writer of one Perfetto JSON file per UI directory.
pub struct Perfetto {
    out_dir: Option<PathBuf>,
    root: Option<PathBuf>,
    created: Vec<PathBuf>,
    committed: bool,
    clock_ghz: Option<f64>,
    demangle: bool,
    file: Option<(PathBuf, std::io::BufWriter<tempfile::NamedTempFile>)>,
    done: Vec<(PathBuf, tempfile::NamedTempFile)>,
    scale: Option<f64>,
    first: bool,
    pids: HashSet<i64>,
    next_tid: u64,
    escaped: Vec<String>,
    error: Option<std::io::Error>,
    /// Files written by [`Perfetto::commit`] (final paths).
    pub written: Vec<PathBuf>,
}

/// Per-wave state of [`Perfetto`].
#[derive(Debug, Default)]
pub struct PerfettoWave {
    tid: u64,
    pid: i64,
    depth: usize,
}

impl Perfetto {
    /// Files go to `out_dir`, or next to each UI directory; `clock_ghz` overrides `realtime.json`.
    pub fn new(out_dir: Option<&Path>, clock_ghz: Option<f64>, demangle: bool) -> Perfetto {
        Perfetto {
            out_dir: out_dir.map(Path::to_path_buf),
            root: None,
            created: Vec::new(),
            committed: false,
            clock_ghz,
            demangle,
            file: None,
            done: Vec::new(),
            scale: None,
            first: true,
            pids: HashSet::new(),
            next_tid: 1,
            escaped: Vec::new(),
            error: None,
            written: Vec::new(),
        }
    }

    /// With an output directory, each UI directory's file goes to the same place below it as
    /// the UI directory's parent is below `root` (the path given to the command), so that
    /// UI directories of one name in two runs do not collide.
    pub fn relative_to(mut self, root: &Path) -> Perfetto {
        self.root = Some(root.to_path_buf());
        self
    }

    /// Creates `dir` and its missing parents, remembering each one made, so that a run that
    /// fails removes them again (issue 32: no empty output directory left behind).
    fn make_dir(&mut self, dir: &Path) -> anyhow::Result<()> {
        let mut missing = Vec::new();
        let mut at = dir;
        while !at.as_os_str().is_empty() && std::fs::symlink_metadata(at).is_err() {
            missing.push(at.to_path_buf());
            at = at.parent().unwrap_or(Path::new(""));
        }
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(&d) {
                Ok(()) => self.created.push(d),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => anyhow::bail!("{}: cannot create the directory: {e}", d.display()),
            }
        }
        Ok(())
    }

    fn ts(&self, cycles: i64) -> String {
        match self.scale {
            Some(s) => format!("{:.6}", cycles as f64 * s),
            None => cycles.to_string(),
        }
    }

    fn event(&mut self, text: std::fmt::Arguments) {
        let Some((_, f)) = self.file.as_mut() else {
            return;
        };
        let sep = if self.first { "\n" } else { ",\n" };
        self.first = false;
        if let Err(e) = f.write_all(sep.as_bytes()).and_then(|()| f.write_fmt(text)) {
            self.error.get_or_insert(e);
        }
    }

    /// The JSON string literal of a name (names are escaped once, in `begin_dir`).
    fn name(&self, id: NameId) -> String {
        self.escaped
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| "\"?\"".into())
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

impl Sink for Perfetto {
    type Wave = PerfettoWave;

    fn begin_dir(&mut self, dir: &TraceDir, names: &Names) -> anyhow::Result<()> {
        for id in self.escaped.len()..names.len() {
            self.escaped
                .push(json_str(&names.display(id as NameId, self.demangle)));
        }
        let final_path = output_path(&dir.path, self.out_dir.as_deref(), self.root.as_deref());
        let out = final_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        self.make_dir(&out)?;
        let out = out.as_path();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.perfetto.json.", dir.name()))
            .tempfile_in(out)
            .map_err(|e| {
                anyhow::anyhow!("{}: cannot create a temporary file: {e}", out.display())
            })?;
        let mut f = std::io::BufWriter::new(tmp);
        let hz = self.clock_ghz.map(|g| g * 1e9).or(dir.clock_hz);
        self.scale = hz.filter(|h| *h > 0.0).map(|h| 1e6 / h);
        let unit = match (self.clock_ghz, dir.clock_hz) {
            (Some(g), _) => format!("microseconds (--clock-rate-ghz {g})"),
            (None, Some(h)) => format!("microseconds (realtime.json: {:.4} GHz)", h / 1e9),
            (None, None) => "shader cycles (no clock rate: 1 us on the axis = 1 cycle)".into(),
        };
        write!(
            f,
            "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"source\":{},\"ts_unit\":{}}},\"traceEvents\":[",
            json_str(&dir.path.display().to_string()),
            json_str(&unit)
        )?;
        self.file = Some((final_path, f));
        self.first = true;
        self.pids.clear();
        self.next_tid = 1;
        Ok(())
    }

    fn wave_begin(&mut self, w: &WaveInfo, s: &mut PerfettoWave, names: &Names) {
        s.pid = w.kernel_id.unwrap_or(0);
        s.tid = self.next_tid;
        self.next_tid += 1;
        if self.pids.insert(s.pid) {
            let kernel = match w.kernel {
                Some(k) => names.display(k, self.demangle),
                None => "unknown kernel".into(),
            };
            let label = json_str(&format!("kernel_id {}: {kernel}", s.pid));
            self.event(format_args!(
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":{label}}}}}",
                s.pid
            ));
        }
        let tn = json_str(&wave_name(w));
        self.event(format_args!(
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{tn}}}}}",
            s.pid, s.tid
        ));
    }

    fn header(&mut self, _: &WaveInfo, s: &mut PerfettoWave, h: &Header, _: &[NameId]) {
        let ts = self.ts(h.time);
        if h.popped {
            s.depth -= 1;
            self.event(format_args!(
                "{{\"ph\":\"E\",\"ts\":{ts},\"pid\":{},\"tid\":{}}}",
                s.pid, s.tid
            ));
        }
        if let Some((n, kind)) = h.pushed {
            let cat = if kind == Kind::User {
                "sqtt.user"
            } else {
                "sqtt.function"
            };
            let name = self.name(n);
            s.depth += 1;
            self.event(format_args!(
                "{{\"ph\":\"B\",\"ts\":{ts},\"pid\":{},\"tid\":{},\"name\":{name},\"cat\":\"{cat}\"}}",
                s.pid, s.tid
            ));
        }
        if let Some(n) = h.point {
            let name = self.name(n);
            self.event(format_args!(
                "{{\"ph\":\"i\",\"ts\":{ts},\"pid\":{},\"tid\":{},\"name\":{name},\"cat\":\"sqtt.point\",\"s\":\"t\"}}",
                s.pid, s.tid
            ));
        }
    }

    fn wave_end(&mut self, _: &WaveInfo, s: &mut PerfettoWave, close: i64, _: &[NameId]) {
        let ts = self.ts(close);
        for _ in 0..s.depth {
            self.event(format_args!(
                "{{\"ph\":\"E\",\"ts\":{ts},\"pid\":{},\"tid\":{},\"args\":{{\"unclosed\":true}}}}",
                s.pid, s.tid
            ));
        }
        s.depth = 0;
    }

    fn end_dir(&mut self, _: &TraceDir, _: &Names) -> anyhow::Result<()> {
        let Some((final_path, mut f)) = self.file.take() else {
            return Ok(());
        };
        let cannot =
            |e: std::io::Error| anyhow::anyhow!("{}: cannot write: {e}", final_path.display());
        if let Some(e) = self.error.take() {
            return Err(cannot(e));
        }
        f.write_all(b"\n]}\n").map_err(cannot)?;
        let tmp = f.into_inner().map_err(|e| cannot(e.into_error()))?;
        self.done.push((final_path, tmp));
        Ok(())
    }
}

/// Where the Perfetto file of the UI directory `ui_dir` goes: `<out_dir or the UI directory's
/// parent>/<UI directory name>.perfetto.json`; with `out_dir` and `root` (the path the UI
/// directories were found under), `<out_dir>/<the UI directory's parent below root>/<name>.perfetto.json`.
pub fn output_path(ui_dir: &Path, out_dir: Option<&Path>, root: Option<&Path>) -> PathBuf {
    let name = crate::trace::dir_name(ui_dir);
    let dir = match out_dir {
        Some(d) => match root
            .and_then(|r| ui_dir.strip_prefix(r).ok())
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
        {
            Some(rel) => d.join(rel),
            None => d.to_path_buf(),
        },
        None => ui_dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    dir.join(format!("{name}.perfetto.json"))
}

impl Perfetto {
    /// Moves every complete file into place (mode 0644), once all UI directories were written (a failed run
    /// leaves none: the temporary files are deleted when the writer is dropped). Errors: a
    /// rename failed (the files renamed before it stay).
    pub fn commit(&mut self) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for (path, tmp) in self.done.drain(..) {
            // Temporary files are created 0600; the output gets the usual 0644.
            let cannot =
                |e: std::io::Error| anyhow::anyhow!("{}: cannot write: {e}", path.display());
            let f = tmp.as_file();
            f.set_permissions(std::fs::Permissions::from_mode(0o644))
                .and_then(|()| f.sync_all())
                .map_err(cannot)?;
            tmp.persist(&path).map_err(|e| cannot(e.error))?;
            self.written.push(path);
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Perfetto {
    /// A run that did not commit leaves nothing: the temporary files are deleted, then every
    /// directory the writer made, deepest first (`remove_dir` only removes empty ones).
    fn drop(&mut self) {
        self.file = None;
        self.done.clear();
        if !self.committed {
            for d in self.created.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}
