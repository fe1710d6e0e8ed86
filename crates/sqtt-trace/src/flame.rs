//! Flame graphs: cycles per scope stack, folded lines, speedscope JSON and an SVG (`inferno`).
//!
//! Attribution per wave instance (att-format note §2.3, the spec's "Generating flamegraphs"):
//! at each header at time `t`, if the stack is non-empty and `t` is after the previous header,
//! `t - previous` cycles go to the stack; then the header pops and pushes. Points split intervals
//! but push nothing. Time after a wave's last header and scopes still open at its end are not
//! attributed. Frames: `code_object_<id>;<kernel>;<scopes...>`. Each UI directory is its own
//! time domain; the counts are summed over directories.

use crate::names::{NameId, Names};
use crate::trace::{Header, Sink, WaveInfo};
use foldhash::{HashMap, HashMapExt};

/// Folded stacks: frames -> (cycles, intervals).
#[derive(Debug, Default)]
pub struct Flame {
    stacks: HashMap<Vec<NameId>, (u64, u64)>,
}

/// Per-wave state of [`Flame`].
#[derive(Debug, Default)]
pub struct FlameWave {
    key: Vec<NameId>,
    prefix: usize,
    prev: Option<i64>,
}

impl Sink for Flame {
    type Wave = FlameWave;

    fn wave_begin(&mut self, w: &WaveInfo, s: &mut FlameWave, _: &Names) {
        s.key.clear();
        s.key.extend(w.code_object_frame);
        s.key.extend(w.kernel);
        s.prefix = s.key.len();
    }

    fn header(&mut self, _: &WaveInfo, s: &mut FlameWave, h: &Header, stack: &[NameId]) {
        if let Some(p) = s.prev {
            if !stack.is_empty() && h.time > p {
                s.key.truncate(s.prefix);
                s.key.extend_from_slice(stack);
                let dt = h.time.abs_diff(p);
                match self.stacks.get_mut(s.key.as_slice()) {
                    Some(e) => {
                        e.0 += dt;
                        e.1 += 1;
                    }
                    None => {
                        self.stacks.insert(s.key.clone(), (dt, 1));
                    }
                }
            }
        }
        s.prev = Some(h.time);
    }
}

impl Flame {
    /// (frame names, cycles, intervals) per stack, sorted by the joined stack text.
    pub fn stacks(&self, names: &Names, demangle: bool) -> Vec<(Vec<String>, u64, u64)> {
        let mut cache: HashMap<NameId, String> = HashMap::new();
        let mut out: Vec<(Vec<String>, u64, u64)> = self
            .stacks
            .iter()
            .map(|(k, &(c, n))| {
                let frames = k
                    .iter()
                    .map(|id| {
                        cache
                            .entry(*id)
                            .or_insert_with(|| frame_text(&names.display(*id, demangle)))
                            .clone()
                    })
                    .collect();
                (frames, c, n)
            })
            .collect();
        out.sort_by_cached_key(|a| a.0.join(";"));
        out
    }

    /// Folded lines `frame;frame;... cycles`, sorted by stack (the two-column `flamegraph.pl`
    /// input).
    pub fn folded(&self, names: &Names, demangle: bool) -> String {
        let mut s = String::new();
        for (frames, cycles, _) in self.stacks(names, demangle) {
            s.push_str(&frames.join(";"));
            s.push(' ');
            s.push_str(&cycles.to_string());
            s.push('\n');
        }
        s
    }

    /// Total cycles attributed.
    pub fn total(&self) -> u64 {
        self.stacks.values().map(|v| v.0).sum()
    }

    /// speedscope "sampled" profile: one sample per stack, weights in cycles (`"unit":"none"`,
    /// speedscope has no cycle unit).
    pub fn speedscope(&self, names: &Names, demangle: bool, title: &str) -> serde_json::Value {
        let stacks = self.stacks(names, demangle);
        let mut frames: Vec<String> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        for (fs, cycles, _) in &stacks {
            let ids: Vec<usize> = fs
                .iter()
                .map(|f| {
                    *index.entry(f.clone()).or_insert_with(|| {
                        frames.push(f.clone());
                        frames.len() - 1
                    })
                })
                .collect();
            samples.push(ids);
            weights.push(*cycles);
        }
        let total: u64 = weights.iter().sum();
        serde_json::json!({
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": frames.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()},
            "profiles": [{
                "type": "sampled",
                "name": format!("{title} (shader cycles)"),
                "unit": "none",
                "startValue": 0,
                "endValue": total,
                "samples": samples,
                "weights": weights,
            }],
            "name": title,
            "exporter": "sqtt-patch",
        })
    }

    /// An interactive SVG flame graph drawn by `inferno` from the folded lines.
    pub fn svg(&self, names: &Names, demangle: bool, title: &str) -> anyhow::Result<Vec<u8>> {
        let folded = self.folded(names, demangle);
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.count_name = "cycles".to_string();
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .map_err(|e| anyhow::anyhow!("flame graph: {e}"))?;
        Ok(out)
    }
}

/// A frame name safe for folded lines: `;` separates frames and the last space the count, so
/// `;` becomes `:` and line breaks become spaces.
fn frame_text(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}
