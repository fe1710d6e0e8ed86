//! Flame graphs: cycles per scope stack, folded lines, speedscope JSON and an SVG (`inferno`).
//!
//! Attribution per wave instance (att-format note §2.3, the spec's "Generating flamegraphs"):
//! at each header at time `t`, if the stack is non-empty and `t` is after the previous header,
//! `t - previous` cycles go to the stack; then the header pops and pushes. Points split intervals
//! but push nothing. Scopes still open when a wave instance ends keep their stack up to the time
//! [`crate::trace::close_time`] gives (issue 38, item 3: occupancy's wave end, else the next wave
//! instance's first record on the slot, else the last record), the rule of the timeline and the
//! Perfetto export; those cycles are counted ([`Flame::unclosed_note`]). AMD's
//! `samples/markers/flamegraph.py` (0218074) drops them: a deliberate difference. Time after a
//! wave's last header with no scope open is not attributed. Each UI directory is its own time
//! domain; the counts are summed over directories.
//!
//! Frames (issue 31): a stack starts at its kernel, as in AMD's markers samples (no code-object
//! prefix, no root frame). The kernel's own scope (`--kernel-scopes`, a user scope named after
//! the kernel) is that kernel frame, not a second one. A `code_object_<id>` frame is put under a
//! kernel only where kernels of that name ran from two code objects (it tells them apart).
//!
//! Depth bound (issue 32): a stack keeps at most `max_depth` scope frames ([`DEFAULT_MAX_DEPTH`],
//! the kernel's own scope counted); cycles of deeper stacks go to the stack cut at that depth,
//! and the frames cut (scope entries deeper than the bound) are counted ([`Flame::depth_note`]).
//! So a folded line has at most `max_depth + 1` frames (a code-object frame may come first)
//! and the SVG at most that many rows, whatever the capture: a wave that enters 100,000 scopes
//! and never leaves them no longer gives a gigantic file.

use crate::flame_svg::{finish, Style};
use crate::names::{colour, demangle_name, short_name, NameId, Names};
use crate::trace::{Header, Sink, TraceDir, WaveInfo};
use foldhash::{HashMap, HashMapExt, HashSet};

/// An empty slot in a stack key (no code-object frame, or no kernel frame).
const NONE: NameId = NameId::MAX;

/// Scope frames kept per stack unless told otherwise (`flamegraph --max-depth`).
pub const DEFAULT_MAX_DEPTH: usize = 256;
/// The largest depth bound: the decoder's own stack limit ([`crate::trace::MAX_DEPTH`]).
pub const MAX_DEPTH_LIMIT: usize = crate::trace::MAX_DEPTH;

/// Folded stacks: `[code-object frame, kernel, scopes...]` (the first two may be [`NONE`]) ->
/// (cycles, intervals). The frame rules are applied when the stacks are read ([`Flame::stacks`]).
#[derive(Debug)]
pub struct Flame {
    stacks: HashMap<Vec<NameId>, (u64, u64)>,
    dir: u32,
    dispatches: HashSet<(u32, Option<i64>)>,
    max_depth: usize,
    /// Scope entries deeper than the depth bound (frames not drawn).
    pub cut_frames: u64,
    /// Cycles of stacks deeper than the bound (drawn in the frame at the bound).
    pub cut_cycles: u64,
    /// Wave instances that ended with a scope open, and the cycles from their last header to
    /// the close time attributed to the open stack.
    pub unclosed: (u64, u64),
}

impl Default for Flame {
    fn default() -> Flame {
        Flame::with_max_depth(DEFAULT_MAX_DEPTH)
    }
}

/// One stack's frames (id and text), cycles and intervals.
type NamedStack = (Vec<(NameId, String)>, u64, u64);

/// Per-wave state of [`Flame`].
#[derive(Debug, Default)]
pub struct FlameWave {
    key: Vec<NameId>,
    prev: Option<i64>,
}

impl Sink for Flame {
    type Wave = FlameWave;

    fn begin_dir(&mut self, _: &TraceDir, _: &Names) -> anyhow::Result<()> {
        self.dir += 1;
        Ok(())
    }

    fn wave_begin(&mut self, w: &WaveInfo, s: &mut FlameWave, _: &Names) {
        s.key.clear();
        s.key.push(w.code_object_frame.unwrap_or(NONE));
        s.key.push(w.kernel.unwrap_or(NONE));
        self.dispatches.insert((self.dir, w.kernel_id));
    }

    fn header(&mut self, _: &WaveInfo, s: &mut FlameWave, h: &Header, stack: &[NameId]) {
        if h.pushed.is_some() && stack.len() - usize::from(h.popped) >= self.max_depth {
            self.cut_frames += 1;
        }
        if let Some(p) = s.prev {
            if h.time > p {
                self.attribute(s, stack, h.time.abs_diff(p));
            }
        }
        s.prev = Some(h.time);
    }

    fn wave_end(&mut self, _: &WaveInfo, s: &mut FlameWave, close: i64, open: &[NameId]) {
        if let Some(p) = s.prev.filter(|p| close > *p && !open.is_empty()) {
            let dt = close.abs_diff(p);
            self.unclosed.0 += 1;
            self.unclosed.1 += dt;
            self.attribute(s, open, dt);
        }
    }
}

impl Flame {
    /// Adds `dt` cycles to the wave's `stack` (nothing when it is empty), cut at the depth bound.
    fn attribute(&mut self, s: &mut FlameWave, stack: &[NameId], dt: u64) {
        if stack.is_empty() {
            return;
        }
        s.key.truncate(2);
        s.key
            .extend_from_slice(&stack[..stack.len().min(self.max_depth)]);
        if stack.len() > self.max_depth {
            self.cut_cycles += dt;
        }
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

    /// What was attributed to scopes still open at their wave's end, for stderr and the SVG's
    /// details line; `None` when no wave ended inside a scope.
    pub fn unclosed_note(&self) -> Option<String> {
        let (waves, cycles) = self.unclosed;
        (waves > 0).then(|| {
            format!(
                "{waves} wave instances ended inside a scope: their last {cycles} cycles are in the open stacks, up to the wave's end (AMD's flamegraph.py leaves them out)"
            )
        })
    }
}

/// A kernel name as the two sources spell it may differ: occupancy may give the demangled name
/// or the descriptor symbol (`.kd`), the funcmap the symbol.
fn kernel_key(name: &str) -> String {
    demangle_name(name.strip_suffix(".kd").unwrap_or(name))
}

impl Flame {
    /// An empty flame graph keeping at most `max_depth` scope frames per stack (at least 1).
    pub fn with_max_depth(max_depth: usize) -> Flame {
        Flame {
            stacks: HashMap::new(),
            dir: 0,
            dispatches: HashSet::default(),
            max_depth: max_depth.max(1),
            cut_frames: 0,
            cut_cycles: 0,
            unclosed: (0, 0),
        }
    }

    /// What the depth bound cut, for stderr and the SVG's details line; `None` when nothing.
    pub fn depth_note(&self) -> Option<String> {
        (self.cut_frames > 0 || self.cut_cycles > 0).then(|| {
            format!(
                "{} scope frames deeper than --max-depth {} cut (their {} cycles are in the frame at depth {})",
                self.cut_frames, self.max_depth, self.cut_cycles, self.max_depth
            )
        })
    }

    /// The stacks with the frame rules applied (module documentation), merged: frame ids ->
    /// (cycles, intervals), in no particular order.
    fn frames(&self, names: &Names) -> HashMap<Vec<NameId>, (u64, u64)> {
        let mut objects: HashMap<NameId, HashSet<NameId>> = HashMap::new();
        for k in self.stacks.keys() {
            if k[0] != NONE && k[1] != NONE {
                objects.entry(k[1]).or_default().insert(k[0]);
            }
        }
        let mut same: HashMap<(NameId, NameId), bool> = HashMap::new();
        let mut out: HashMap<Vec<NameId>, (u64, u64)> = HashMap::new();
        for (k, &(c, n)) in &self.stacks {
            let (co, kernel, mut scopes) = (k[0], k[1], &k[2..]);
            let mut f = Vec::with_capacity(k.len());
            if kernel != NONE {
                if co != NONE && objects.get(&kernel).is_some_and(|s| s.len() > 1) {
                    f.push(co);
                }
                f.push(kernel);
                if let Some(&first) = scopes.first() {
                    let is_kernel = first == kernel
                        || *same.entry((kernel, first)).or_insert_with(|| {
                            kernel_key(names.get(kernel)) == kernel_key(names.get(first))
                        });
                    if is_kernel {
                        scopes = &scopes[1..];
                    }
                }
            }
            f.extend_from_slice(scopes);
            let e = out.entry(f).or_default();
            e.0 += c;
            e.1 += n;
        }
        out
    }

    /// (frame ids and names, cycles, intervals) per stack, sorted by the joined stack text.
    fn frames_sorted(&self, names: &Names, demangle: bool) -> Vec<NamedStack> {
        let mut cache: HashMap<NameId, String> = HashMap::new();
        let mut out: Vec<NamedStack> = self
            .frames(names)
            .into_iter()
            .map(|(k, (c, n))| {
                let frames = k
                    .iter()
                    .map(|id| {
                        let text = cache
                            .entry(*id)
                            .or_insert_with(|| frame_text(&names.display(*id, demangle)));
                        (*id, text.clone())
                    })
                    .collect();
                (frames, c, n)
            })
            .collect();
        out.sort_by_cached_key(|a| {
            a.0.iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(";")
        });
        out
    }

    /// (frame names, cycles, intervals) per stack, sorted by the joined stack text.
    pub fn stacks(&self, names: &Names, demangle: bool) -> Vec<(Vec<String>, u64, u64)> {
        self.frames_sorted(names, demangle)
            .into_iter()
            .map(|(f, c, n)| (f.into_iter().map(|(_, t)| t).collect(), c, n))
            .collect()
    }

    /// Kernels (distinct kernel frames with cycles) and dispatches (wave launches' kernel ids per
    /// UI directory) of the run, for titles.
    pub fn counts(&self) -> (usize, usize) {
        let kernels: HashSet<NameId> = self
            .stacks
            .keys()
            .filter(|k| k[1] != NONE)
            .map(|k| k[1])
            .collect();
        (kernels.len(), self.dispatches.len())
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

    /// An interactive SVG flame graph: drawn by `inferno` from the folded lines and finished by
    /// [`crate::flame_svg::finish`] (no root frame, one colour per name, labels that show the
    /// start of the name). `title` heads the picture, `subtitle` goes below it. Errors: inferno
    /// failed, or its output is not shaped as expected.
    pub fn svg(
        &self,
        names: &Names,
        demangle: bool,
        title: &str,
        subtitle: &str,
    ) -> anyhow::Result<Vec<u8>> {
        let mut styles: std::collections::HashMap<String, Style> = std::collections::HashMap::new();
        let mut folded = String::new();
        for (ids, cycles, _) in self.frames_sorted(names, demangle) {
            for (k, (id, text)) in ids.iter().enumerate() {
                if k > 0 {
                    folded.push(';');
                }
                folded.push_str(text);
                if !styles.contains_key(text) {
                    let raw = names.get(*id);
                    styles.insert(
                        text.clone(),
                        Style {
                            short: frame_text(&short_name(&demangle_name(raw))),
                            colour: colour(raw),
                        },
                    );
                }
            }
            folded.push(' ');
            folded.push_str(&cycles.to_string());
            folded.push('\n');
        }
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.subtitle = Some(subtitle.to_string());
        opts.count_name = "cycles".to_string();
        opts.name_type = "Scope:".to_string();
        opts.text_truncate_direction = inferno::flamegraph::TextTruncateDirection::Right;
        opts.deterministic = true;
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .map_err(|e| anyhow::anyhow!("flame graph: {e}"))?;
        let raw = String::from_utf8(out).map_err(|e| anyhow::anyhow!("flame graph: {e}"))?;
        Ok(finish(&raw, &styles)?.into_bytes())
    }
}

/// A frame name safe for folded lines: `;` separates frames and the last space the count, so
/// `;` becomes `:` and line breaks become spaces.
fn frame_text(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flame(names: &mut Names, stacks: &[(&[&str], u64)]) -> Flame {
        let mut f = Flame::default();
        for (frames, cycles) in stacks {
            let key = frames
                .iter()
                .map(|n| if n.is_empty() { NONE } else { names.intern(n) })
                .collect();
            f.stacks.insert(key, (*cycles, 1));
        }
        f
    }

    fn folded(f: &Flame, names: &Names) -> Vec<String> {
        f.folded(names, false).lines().map(str::to_string).collect()
    }

    #[test]
    fn stacks_start_at_the_kernel() {
        let mut n = Names::default();
        // The kernel scope of --kernel-scopes is the kernel frame; one code object per kernel
        // name: no code-object frame; a wave without a known kernel starts at its first scope.
        let f = flame(
            &mut n,
            &[
                (&["code_object_1", "k", "k"], 10),
                (&["code_object_1", "k", "k", "f"], 20),
                (&["code_object_1", "k", "f"], 5),
                (&["code_object_1", "", "k", "f"], 7),
                (&["", "_Z3kerv", "ker()", "g"], 3),
                (&["code_object_1", "m.kd", "m"], 4),
            ],
        );
        assert_eq!(folded(&f, &n), ["_Z3kerv;g 3", "k 10", "k;f 32", "m.kd 4"]);
        assert_eq!(f.counts().0, 3);
    }

    /// The depth bound: deeper stacks go to the stack cut at the bound; entries beyond it and
    /// their cycles are counted.
    #[test]
    fn deep_stacks_are_cut_and_counted() {
        use crate::markers::Kind;
        let mut n = Names::default();
        let (k, f) = (n.intern("k"), n.intern("f"));
        let mut fl = Flame::with_max_depth(2);
        let w = WaveInfo {
            se: 0,
            cu: 0,
            simd: 0,
            slot: 0,
            instance: 0,
            kernel_id: None,
            kernel: Some(k),
            code_object: None,
            code_object_frame: None,
            end: None,
        };
        let mut s = FlameWave::default();
        fl.wave_begin(&w, &mut s, &n);
        let mut stack = Vec::new();
        for (i, name) in [k, f, f, f, f].into_iter().enumerate() {
            let h = Header {
                time: i as i64 * 10,
                marker_id: 1,
                popped: false,
                pushed: Some((name, Kind::Function)),
                point: None,
            };
            fl.header(&w, &mut s, &h, &stack);
            stack.push(name);
        }
        let h = Header {
            time: 50,
            marker_id: 0,
            popped: true,
            pushed: None,
            point: None,
        };
        fl.header(&w, &mut s, &h, &stack);
        assert_eq!(folded(&fl, &n), ["k 10", "k;f 40"]);
        assert_eq!((fl.cut_frames, fl.cut_cycles), (3, 30));
        assert!(fl
            .depth_note()
            .unwrap()
            .starts_with("3 scope frames deeper than --max-depth 2 cut"));
    }

    #[test]
    fn code_object_frame_only_where_two_share_a_kernel_name() {
        let mut n = Names::default();
        let f = flame(
            &mut n,
            &[
                (&["code_object_1", "k", "k", "f"], 1),
                (&["code_object_2", "k", "k", "f"], 2),
                (&["code_object_2", "solo", "solo", "g"], 3),
            ],
        );
        assert_eq!(
            folded(&f, &n),
            ["code_object_1;k;f 1", "code_object_2;k;f 2", "solo;g 3"]
        );
    }

    #[test]
    fn svg_has_no_root_and_one_colour_per_name() {
        let mut n = Names::default();
        let long = "_ZN9rocsparse12csrmv_kernelILj256ELj64EifffEEvT1_S1_PKS1_S3_PKT2_PKT3_S9_PT4_21rocsparse_index_base_b";
        let f = flame(
            &mut n,
            &[
                (&["", "k_a", "k_a", "_Z6hornerPKfif"], 300),
                (&["", "k_b", "k_b", "_Z6hornerPKfif"], 100),
                (&["", "k_b", "k_b", long], 5),
                (&["", "k_b", "k_b"], 600),
            ],
        );
        let svg = String::from_utf8(f.svg(&n, true, "cap: 2 kernels", "sub").unwrap()).unwrap();
        assert!(!svg.contains("<title>all ("), "root frame left");
        // 5 frames: k_a, horner, k_b, horner, csrmv_kernel; one colour per name.
        let mut fills: std::collections::HashMap<String, String> = Default::default();
        let mut count = 0;
        for g in svg.split("<g><title>").skip(1) {
            let name = &g[..g.find(" (").unwrap()];
            let fill = g.split(" fill=\"").nth(1).unwrap();
            let fill = &fill[..fill.find('"').unwrap()];
            let raw = if name.starts_with("horner") {
                "_Z6hornerPKfif"
            } else if name.starts_with("void rocsparse") {
                long
            } else {
                name
            };
            assert_eq!(fill, colour(raw), "{name}");
            if let Some(old) = fills.insert(name.to_string(), fill.to_string()) {
                assert_eq!(old, fill);
            }
            count += 1;
        }
        assert_eq!(count, 5);
        // A long demangled name: the tooltip keeps it whole; the static label starts with the
        // short name (the frame is 5/1005 of the width, 5 px: no room, so an empty label) and
        // horner's label starts with `horner`.
        assert!(svg.contains("<title>void rocsparse::csrmv_kernel&lt;(unsigned int)256, "));
        assert!(svg.contains("\"void rocsparse::csrmv_kernel\\u003c(unsigned int)256, "));
        assert!(svg.contains(":\"csrmv_kernel\""));
        assert!(svg.contains(">horner(float const*, int, float)</text>"));
        // One frame row less than inferno's drawing: 3 rows (kernel, scope) -> height
        // ypad1 (36 + 24 subtitle) + 2 rows * 16 + ypad2 34.
        assert!(svg.contains("height=\"126\""), "{}", &svg[..400]);
        // Deterministic: the same stacks give the same bytes.
        let again = f.svg(&n, true, "cap: 2 kernels", "sub").unwrap();
        assert!(svg.as_bytes() == again, "two drawings differ");
    }
}
