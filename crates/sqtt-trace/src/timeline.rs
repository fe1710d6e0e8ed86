//! The per-wave timeline as a static SVG (`sqtt-patch timeline`, issue 31): what the Perfetto
//! export shows in ui.perfetto.dev, drawn by us so that it can be looked at offline and put in a
//! README. One row per wave instance (`SE/CU/SIMD/W#instance` and its kernel), scopes as nested
//! bars (one lane per stack depth, coloured by name as in the flame graph), point markers as
//! ticks, a time axis in cycles and, with a clock rate, microseconds. Each UI directory is its
//! own time domain: its rows are grouped under its name and its time counts from its first
//! header. Scopes still open when a wave ends are drawn to the wave's end (as in the Perfetto
//! export) with a dashed outline.
//!
//! Size bounds (documented in docs/trace.md): at most `max_waves` rows ([`MAX_WAVES`] at most),
//! the first wave instances in the order the capture lists them, and at most [`MAX_ITEMS`] bars
//! and ticks in all; what is left out is counted and said under the picture. With labels and
//! tooltips an item takes under 400 bytes, so the file stays under about 10 MB.

use crate::names::{colour, demangle_name, fit_label, short_name, NameId, Names};
use crate::trace::{wave_name, Header, Sink, TraceDir, WaveInfo};
use std::fmt::Write as _;

/// Most wave rows one picture can have (`--max-waves` is checked against it).
pub const MAX_WAVES: usize = 1000;
/// Most bars and ticks one picture draws.
pub const MAX_ITEMS: usize = 20_000;

/// Narrowest and widest picture, in pixels (`--width` is checked against them).
pub const WIDTHS: std::ops::RangeInclusive<u32> = 600..=4000;
const LABEL_W: f64 = 250.0;
const PLOT_X: f64 = LABEL_W + 10.0;
const LANE_H: f64 = 15.0;
const ROW_GAP: f64 = 5.0;
const GROUP_H: f64 = 22.0;
const TOP: f64 = 86.0;
/// Width of one character of the 11-pixel monospace labels.
const CHAR_PX: f64 = 11.0 * 0.6;

struct Bar {
    start: i64,
    end: i64,
    depth: usize,
    name: NameId,
    unclosed: bool,
}

struct Row {
    dir: usize,
    key: (u32, u32, u32, u32, u32),
    label: String,
    kernel: Option<NameId>,
    start: Option<i64>,
    end: i64,
    lanes: usize,
    bars: Vec<Bar>,
    ticks: Vec<(i64, NameId)>,
}

/// Collects the waves to draw; [`Timeline::svg`] draws them.
pub struct Timeline {
    max_waves: usize,
    rows: Vec<Row>,
    dirs: Vec<(String, Option<f64>)>,
    items: usize,
    /// Wave instances not drawn (beyond `max_waves`).
    pub waves_left_out: u64,
    /// Bars and ticks not drawn (beyond [`MAX_ITEMS`]).
    pub items_left_out: u64,
}

/// Per-wave state of [`Timeline`]: its row (none when left out) and its open scopes.
#[derive(Debug, Default)]
pub struct TimelineWave {
    row: Option<usize>,
    open: Vec<(i64, NameId)>,
}

impl Timeline {
    /// A timeline of at most `max_waves` rows (clamped to 1..=[`MAX_WAVES`]).
    pub fn new(max_waves: usize) -> Timeline {
        Timeline {
            max_waves: max_waves.clamp(1, MAX_WAVES),
            rows: Vec::new(),
            dirs: Vec::new(),
            items: 0,
            waves_left_out: 0,
            items_left_out: 0,
        }
    }

    /// Wave rows with at least one header.
    pub fn waves(&self) -> usize {
        self.rows.iter().filter(|r| r.start.is_some()).count()
    }

    fn take_item(&mut self) -> bool {
        if self.items < MAX_ITEMS {
            self.items += 1;
            true
        } else {
            self.items_left_out += 1;
            false
        }
    }
}

impl Sink for Timeline {
    type Wave = TimelineWave;

    fn begin_dir(&mut self, dir: &TraceDir, _: &Names) -> anyhow::Result<()> {
        self.dirs.push((dir.name(), dir.clock_hz));
        Ok(())
    }

    fn wave_begin(&mut self, w: &WaveInfo, s: &mut TimelineWave, _: &Names) {
        s.open.clear();
        s.row = None;
        if self.rows.len() >= self.max_waves {
            self.waves_left_out += 1;
            return;
        }
        s.row = Some(self.rows.len());
        self.rows.push(Row {
            dir: self.dirs.len().saturating_sub(1),
            key: (w.se, w.cu, w.simd, w.slot, w.instance),
            label: wave_name(w),
            kernel: w.kernel,
            start: None,
            end: i64::MIN,
            lanes: 1,
            bars: Vec::new(),
            ticks: Vec::new(),
        });
    }

    fn header(&mut self, _: &WaveInfo, s: &mut TimelineWave, h: &Header, _: &[NameId]) {
        let Some(r) = s.row else {
            return;
        };
        let t = h.time;
        {
            let row = &mut self.rows[r];
            row.start = Some(row.start.map_or(t, |x| x.min(t)));
            row.end = row.end.max(t);
        }
        if h.popped {
            if let Some((start, name)) = s.open.pop() {
                if self.take_item() {
                    let depth = s.open.len();
                    self.rows[r].bars.push(Bar {
                        start,
                        end: t,
                        depth,
                        name,
                        unclosed: false,
                    });
                }
            }
        }
        if let Some((n, _)) = h.pushed {
            s.open.push((t, n));
            let row = &mut self.rows[r];
            row.lanes = row.lanes.max(s.open.len());
        }
        if let Some(n) = h.point {
            if self.take_item() {
                self.rows[r].ticks.push((t, n));
            }
        }
    }

    fn wave_end(&mut self, _: &WaveInfo, s: &mut TimelineWave, end: i64, _: &[NameId]) {
        let Some(r) = s.row else {
            return;
        };
        self.rows[r].end = self.rows[r].end.max(end);
        while let Some((start, name)) = s.open.pop() {
            if self.take_item() {
                let depth = s.open.len();
                self.rows[r].bars.push(Bar {
                    start,
                    end,
                    depth,
                    name,
                    unclosed: true,
                });
            }
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1234567` -> `1,234,567`.
fn grouped(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A round step (1, 2 or 5 times a power of ten) giving about eight ticks over `span`.
fn tick_step(span: i64) -> i64 {
    let raw = (span.max(1) as f64 / 8.0).max(1.0);
    let p = 10f64.powi(raw.log10().floor() as i32);
    let m = raw / p;
    let f = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    ((f * p) as i64).max(1)
}

/// The axis label at `t` cycles: the cycles, and the microseconds at `ghz` when known.
fn axis_label(t: i64, ghz: Option<f64>, step: i64) -> String {
    let mut label = grouped(t);
    if let Some(g) = ghz {
        let _ = write!(label, " / {} µs", micros(t, g, step));
    }
    label
}

/// [`tick_step`] for `span` cycles over `plot_w` pixels, made coarser (the next 1, 2, 5 step)
/// until the longest [`axis_label`] of a tick fits between two ticks with two characters to
/// spare, so that no two labels overlap.
fn readable_step(span: i64, plot_w: f64, ghz: Option<f64>) -> i64 {
    let mut step = tick_step(span);
    while step < span {
        let last = span / step * step;
        let label_px = (axis_label(last, ghz, step).chars().count() + 2) as f64 * CHAR_PX;
        if step as f64 / span as f64 * plot_w >= label_px {
            break;
        }
        let m = step / 10i64.pow(step.ilog10());
        step = if m == 2 { step / 2 * 5 } else { step * 2 };
    }
    step
}

/// Microseconds of `cycles` at `ghz`, with one decimal more than a tick step of `step` cycles
/// needs to differ from the next.
fn micros(cycles: i64, ghz: f64, step: i64) -> String {
    let us = cycles as f64 / (ghz * 1000.0);
    let step_us = step as f64 / (ghz * 1000.0);
    let decimals = if step_us >= 1.0 {
        0
    } else {
        (-step_us.log10()).ceil() as usize + 1
    };
    format!("{us:.decimals$}")
}

impl Timeline {
    /// The clock in GHz the axis is labelled with: `clock_ghz`, else the one rate every drawn
    /// directory's `realtime.json` gives; `None` when there is none or they differ.
    fn clock(&self, clock_ghz: Option<f64>) -> Option<f64> {
        if clock_ghz.is_some() {
            return clock_ghz;
        }
        let mut rates = self.dirs.iter().map(|d| d.1);
        let first = rates.next()??;
        rates
            .all(|r| r == Some(first))
            .then_some(first / 1e9)
            .filter(|g| *g > 0.0)
    }

    /// Draws the SVG, `width` pixels wide (clamped to [`WIDTHS`]). `title` heads it; `clock_ghz`
    /// (else `realtime.json`) adds microseconds to the axis. Errors: no wave with a header to
    /// draw.
    pub fn svg(
        &mut self,
        names: &Names,
        demangle: bool,
        title: &str,
        clock_ghz: Option<f64>,
        width: u32,
    ) -> anyhow::Result<String> {
        let width = f64::from(width.clamp(*WIDTHS.start(), *WIDTHS.end()));
        let plot_w = width - PLOT_X - 20.0;
        self.rows.retain(|r| r.start.is_some());
        if self.rows.is_empty() {
            anyhow::bail!("no wave with a marker header to draw");
        }
        self.rows.sort_by_key(|r| (r.dir, r.key));
        let ghz = self.clock(clock_ghz);
        // Each directory counts from its first header; the axis spans the longest directory.
        let mut origin = vec![i64::MAX; self.dirs.len().max(1)];
        for r in &self.rows {
            let o = &mut origin[r.dir];
            *o = (*o).min(r.start.unwrap_or(i64::MAX));
        }
        let span = self
            .rows
            .iter()
            .map(|r| r.end.saturating_sub(origin[r.dir]))
            .max()
            .unwrap_or(1)
            .max(1);
        let x = |t: i64, dir: usize| {
            PLOT_X + (t.saturating_sub(origin[dir])) as f64 / span as f64 * plot_w
        };
        let step = readable_step(span, plot_w, ghz);

        let mut body = String::new();
        let mut y = TOP;
        let mut dir_drawn = usize::MAX;
        let mut kernels = std::collections::BTreeSet::new();
        for r in &self.rows {
            if r.dir != dir_drawn {
                dir_drawn = r.dir;
                let name = self.dirs.get(r.dir).map_or("", |d| d.0.as_str());
                let _ = write!(
                    body,
                    r##"<text x="10" y="{:.1}" class="group">{}</text><line x1="10" x2="{}" y1="{:.1}" y2="{:.1}" class="rule"/>"##,
                    y + 15.0,
                    escape(name),
                    width - 20.0,
                    y + GROUP_H - 2.0,
                    y + GROUP_H - 2.0
                );
                y += GROUP_H;
            }
            let h = r.lanes as f64 * LANE_H;
            let kernel = r.kernel.map(|k| names.display(k, demangle));
            if let Some(k) = r.kernel {
                kernels.insert(k);
            }
            let label = match &kernel {
                Some(k) => {
                    let room = ((LABEL_W / CHAR_PX) as usize).saturating_sub(r.label.len() + 1);
                    format!(
                        "{} {}",
                        r.label,
                        fit_label(k, &short_name(&demangle_name(k)), room)
                    )
                }
                None => r.label.clone(),
            };
            let _ = write!(
                body,
                r##"<text x="10" y="{:.1}">{}</text><line x1="{:.2}" x2="{:.2}" y1="{:.1}" y2="{:.1}" class="life"/>"##,
                y + LANE_H - 4.0,
                escape(&label),
                x(r.start.unwrap_or(r.end), r.dir),
                x(r.end, r.dir),
                y + h / 2.0,
                y + h / 2.0
            );
            for b in &r.bars {
                let (x0, x1) = (x(b.start, r.dir), x(b.end, r.dir));
                let w = (x1 - x0).max(0.5);
                let by = y + b.depth as f64 * LANE_H;
                let full = names.display(b.name, demangle);
                let short = short_name(&demangle_name(names.get(b.name)));
                let room = ((w - 4.0) / CHAR_PX).max(0.0) as usize;
                let text = fit_label(&full, &short, room);
                let dur = b.end - b.start;
                let mut tip = format!(
                    "{full}\n{} to {} cycles ({} cycles",
                    grouped(b.start - origin[r.dir]),
                    grouped(b.end - origin[r.dir]),
                    grouped(dur)
                );
                if let Some(g) = ghz {
                    let _ = write!(tip, ", {:.4} µs", dur as f64 / (g * 1000.0));
                }
                tip.push(')');
                if b.unclosed {
                    tip.push_str("\nunclosed: the wave ended inside this scope");
                }
                let class = if b.unclosed {
                    " class=\"unclosed\""
                } else {
                    ""
                };
                let _ = write!(
                    body,
                    r##"<g><title>{}</title><rect x="{x0:.2}" y="{by:.1}" width="{w:.2}" height="{}" fill="{}"{class}/>"##,
                    escape(&tip),
                    LANE_H - 1.0,
                    colour(names.get(b.name))
                );
                if !text.is_empty() {
                    let _ = write!(
                        body,
                        r##"<text x="{:.2}" y="{:.1}">{}</text>"##,
                        x0 + 2.0,
                        by + LANE_H - 4.0,
                        escape(&text)
                    );
                }
                body.push_str("</g>");
            }
            for (t, n) in &r.ticks {
                let tx = x(*t, r.dir);
                let _ = write!(
                    body,
                    r##"<line x1="{tx:.2}" x2="{tx:.2}" y1="{:.1}" y2="{:.1}" class="tick"><title>{} at {} cycles</title></line>"##,
                    y - 1.0,
                    y + h,
                    escape(&names.display(*n, demangle)),
                    grouped(*t - origin[r.dir])
                );
            }
            y += h + ROW_GAP;
        }

        // Axis and grid over the rows.
        let mut axis = String::new();
        let unit = match ghz {
            Some(g) => format!("time: cycles / µs at {g:.3} GHz, from each dispatch's first marker"),
            None => "time: shader cycles from each dispatch's first marker (no clock rate: --clock-rate-ghz adds µs)".to_string(),
        };
        let _ = write!(
            axis,
            r##"<text x="{PLOT_X}" y="{:.1}" class="unit">{}</text>"##,
            TOP - 34.0,
            escape(&unit)
        );
        let mut t = 0;
        while t <= span {
            let tx = PLOT_X + t as f64 / span as f64 * plot_w;
            let label = axis_label(t, ghz, step);
            let _ = write!(
                axis,
                r##"<line x1="{tx:.2}" x2="{tx:.2}" y1="{:.1}" y2="{y:.1}" class="grid"/>"##,
                TOP - 8.0,
            );
            // A label that would run past the right edge is left out (its grid line stays).
            if tx + label.chars().count() as f64 * CHAR_PX / 2.0 <= width - 4.0 {
                let _ = write!(
                    axis,
                    r##"<text x="{tx:.2}" y="{:.1}" class="axis">{}</text>"##,
                    TOP - 12.0,
                    escape(&label)
                );
            }
            t += step;
        }
        let mut notes = Vec::new();
        if self.waves_left_out > 0 {
            notes.push(format!(
                "{} of {} wave instances drawn (the first in capture order; --max-waves, --cu, --simd, --wave choose others)",
                self.rows.len(),
                self.rows.len() as u64 + self.waves_left_out
            ));
        }
        if self.items_left_out > 0 {
            notes.push(format!(
                "{} scopes and markers beyond the limit of {MAX_ITEMS} not drawn",
                self.items_left_out
            ));
        }
        let footer = if notes.is_empty() {
            String::new()
        } else {
            format!(
                r##"<text x="10" y="{:.1}" class="note">{}</text>"##,
                y + 14.0,
                escape(&notes.join("; "))
            )
        };
        let height = y + if notes.is_empty() { 6.0 } else { 24.0 };
        let subtitle = format!(
            "{} wave{}, {} kernel{}; bars: scopes (dashed: still open when the wave ended), ticks: point markers; hover for details",
            self.rows.len(),
            if self.rows.len() == 1 { "" } else { "s" },
            kernels.len(),
            if kernels.len() == 1 { "" } else { "s" }
        );
        Ok(format!(
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0}" viewBox="0 0 {width} {height:.0}">
<style>
text {{ font-family: monospace; font-size: 11px; fill: #000; }}
#title {{ font-size: 16px; text-anchor: middle; }}
#subtitle {{ font-size: 11px; text-anchor: middle; fill: #444; }}
.group {{ font-weight: bold; }}
.axis {{ text-anchor: middle; fill: #444; }}
.unit, .note {{ fill: #444; }}
.grid {{ stroke: #ddd; stroke-width: 1; }}
.rule {{ stroke: #bbb; stroke-width: 1; }}
.life {{ stroke: #999; stroke-width: 1; }}
.tick {{ stroke: #222; stroke-width: 1.5; }}
rect {{ stroke: #fff; stroke-width: 0.5; }}
rect.unclosed {{ stroke: #000; stroke-width: 1; stroke-dasharray: 3 2; }}
g:hover rect {{ stroke: #000; }}
</style>
<rect x="0" y="0" width="{width}" height="{height:.0}" fill="#fafafa" style="stroke:none"/>
<text id="title" x="{:.0}" y="20">{}</text>
<text id="subtitle" x="{:.0}" y="36">{}</text>
{axis}{body}{footer}
</svg>
"##,
            width / 2.0,
            escape(title),
            width / 2.0,
            escape(&subtitle)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markers::Kind;

    fn wave(slot: u32, end: Option<i64>) -> WaveInfo {
        WaveInfo {
            se: 0,
            cu: 1,
            simd: 0,
            slot,
            instance: 0,
            kernel_id: Some(1),
            kernel: None,
            code_object: Some(1),
            code_object_frame: None,
            end,
        }
    }

    fn header(time: i64, popped: bool, pushed: Option<NameId>, point: Option<NameId>) -> Header {
        Header {
            time,
            marker_id: 1,
            popped,
            pushed: pushed.map(|n| (n, Kind::Function)),
            point,
        }
    }

    /// The size bounds: rows beyond `max_waves` and items beyond [`MAX_ITEMS`] are counted, not
    /// drawn, and said under the picture; the file stays under 10 MB.
    #[test]
    fn huge_captures_are_bounded() {
        let mut names = Names::default();
        let f = names.intern("_Z1fv");
        let p = names.intern("barrier");
        let mut tl = Timeline::new(5000);
        assert_eq!(tl.max_waves, MAX_WAVES);
        tl.begin_dir(&TraceDir::default(), &names).unwrap();
        for slot in 0..1200u32 {
            let w = wave(slot, None);
            let mut s = TimelineWave::default();
            tl.wave_begin(&w, &mut s, &names);
            for k in 0..30i64 {
                tl.header(&w, &mut s, &header(100 * k, false, Some(f), None), &[]);
                tl.header(&w, &mut s, &header(100 * k + 50, true, None, None), &[]);
            }
            tl.wave_end(&w, &mut s, 3000, &[]);
        }
        assert_eq!(tl.waves_left_out, 200);
        assert_eq!(tl.items_left_out, 1000 * 30 - MAX_ITEMS as u64);
        let svg = tl.svg(&names, false, "big", None, 1200).unwrap();
        assert!(svg.len() < 10 << 20, "{} bytes", svg.len());
        assert!(svg.contains("1000 of 1200 wave instances drawn"));
        assert!(svg.contains("10000 scopes and markers beyond the limit of 20000 not drawn"));
        assert_eq!(svg.matches("<rect ").count(), 1 + MAX_ITEMS);

        // A scope open at the wave's end is drawn to its occupancy end, dashed; a point is a
        // tick; with a clock rate the axis says microseconds.
        let mut tl = Timeline::new(4);
        tl.begin_dir(&TraceDir::default(), &names).unwrap();
        let w = wave(0, Some(400));
        let mut s = TimelineWave::default();
        tl.wave_begin(&w, &mut s, &names);
        tl.header(&w, &mut s, &header(100, false, Some(f), None), &[]);
        tl.header(&w, &mut s, &header(150, false, None, Some(p)), &[]);
        tl.wave_end(&w, &mut s, crate::trace::close_time(&w, 150, None), &[]);
        let svg = tl.svg(&names, true, "t", Some(2.0), 900).unwrap();
        assert!(
            svg.contains("<title>f()\n0 to 300 cycles (300 cycles, 0.1500 µs)\nunclosed"),
            "{svg}"
        );
        assert!(svg.contains("class=\"unclosed\""));
        assert!(svg.contains("<title>barrier at 50 cycles</title>"));
        assert!(svg.contains(">100 / 0.050 µs</text>"), "{svg}");
        assert!(svg.contains("width=\"900\""));
        assert!(!svg.contains("wave instances drawn"));
    }

    #[test]
    fn axis_steps_and_labels() {
        assert_eq!(tick_step(1000), 200);
        assert_eq!(tick_step(7), 1);
        assert_eq!(tick_step(64_866), 10_000);
        // 32,000 cycles over 620 pixels: 5,000-cycle ticks are 97 pixels apart, too close for
        // "30,000 / 14 µs" and two spare characters (16 x 6.6 = 106 pixels); 10,000 fits.
        assert_eq!(readable_step(32_000, 620.0, Some(2.1)), 10_000);
        assert_eq!(readable_step(32_000, 620.0, None), 5_000);
        assert_eq!(readable_step(32_000, 3000.0, Some(2.1)), 5_000);
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(-1000), "-1,000");
        assert_eq!(micros(2100, 2.1, 2000), "1.00");
        assert_eq!(micros(150, 2.0, 50), "0.075");
        assert_eq!(micros(21_000, 2.1, 21_000), "10");
    }
}
