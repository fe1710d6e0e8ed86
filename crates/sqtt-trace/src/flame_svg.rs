//! The flame-graph SVG: `inferno` draws it from the folded lines, then this module finishes it
//! (issue 31):
//! - the `all` root frame is taken out and the image made one frame row shorter (stacks start at
//!   their kernel); the search's "Matched" figure stays a share of all cycles;
//! - every frame gets the colour of its name ([`crate::names::colour`]);
//! - labels show the start of the name: the whole name when it fits, else the short name
//!   ([`crate::names::short_name`]), cut on the right ([`crate::names::fit_label`]); the whole
//!   name stays in the tooltip (`<title>`), which is what the search matches. The static labels
//!   are fitted to inferno's 1200-pixel drawing; a small script of ours refits them in the
//!   browser whenever inferno would (load, resize, zoom).
//!
//! The finishing reads inferno's output as written by the pinned version (one `<g>` per frame:
//! `<title>`, `<rect .../>`, `<text>`); output of another shape is an error, never a wrong
//! picture (`tests`).

use crate::names::fit_label;
use anyhow::{bail, Context};
use std::collections::{BTreeMap, HashMap};

/// inferno's drawing width in pixels when the width is fluid (`DEFAULT_IMAGE_WIDTH`), less its
/// two 10-pixel side pads: the width the static labels are fitted to.
const FRAMES_WIDTH: f64 = 1180.0;
/// One frame row in pixels (inferno's default frame height).
pub const FRAME_HEIGHT: usize = 16;
/// Width of one label character in pixels: inferno's monospace font at 12 px with its default
/// font-width factor 0.59.
const CHAR_PX: f64 = 12.0 * 0.59;
/// Half of inferno's bottom pad (`font_size * 2 + 10`) at 12 px: the baseline of the details
/// and "Matched" lines above the image's bottom edge.
const BOTTOM_TEXT: usize = 17;

/// What a frame's name looks like: its short name and its colour (`#rrggbb`).
#[derive(Debug, Clone)]
pub struct Style {
    /// [`crate::names::short_name`] of the demangled name.
    pub short: String,
    /// [`crate::names::colour`] of the name.
    pub colour: String,
}

/// One frame of inferno's output: its text and where the parts to change are.
struct Frame<'a> {
    text: &'a str,
    name: String,
    y: usize,
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let a = s.find(open)? + open.len();
    let b = s[a..].find(close)? + a;
    Some(&s[a..b])
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn frames(body: &str) -> anyhow::Result<Vec<Frame<'_>>> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find("<g>") {
        let len = rest[start..]
            .find("</g>")
            .context("flame graph: a frame without its end")?
            + 4;
        let text = &rest[start..start + len];
        let title = between(text, "<title>", "</title>").context("flame graph: untitled frame")?;
        let title = unescape(title);
        // inferno's tooltip is `name (N cycles, P%)`.
        let name = title.rfind(" (").map_or(title.as_str(), |i| &title[..i]);
        let rect = between(text, "<rect ", "/>").context("flame graph: frame without a box")?;
        let y = between(rect, " y=\"", "\"")
            .and_then(|y| y.parse().ok())
            .context("flame graph: frame box without y")?;
        out.push(Frame {
            text,
            name: name.to_string(),
            y,
        });
        rest = &rest[start + len..];
    }
    Ok(out)
}

/// One frame with our colour and label.
fn restyle(f: &Frame, style: Option<&Style>) -> anyhow::Result<String> {
    let mut t = f.text.to_string();
    if let Some(s) = style {
        let fill = between(&t, " fill=\"", "\"").context("flame graph: frame without fill")?;
        t = t.replacen(
            &format!(" fill=\"{fill}\""),
            &format!(" fill=\"{}\"", s.colour),
            1,
        );
    }
    let rect = between(&t, "<rect ", "/>").context("flame graph: frame without a box")?;
    let width: f64 = between(rect, " width=\"", "%\"")
        .and_then(|w| w.parse().ok())
        .context("flame graph: frame box without width")?;
    let room = ((width * FRAMES_WIDTH / 100.0 - 3.0) / CHAR_PX).max(0.0) as usize;
    let short = style.map_or(f.name.as_str(), |s| s.short.as_str());
    let label = escape(&fit_label(&f.name, short, room));
    let open = t
        .find("<text ")
        .context("flame graph: frame without a label")?;
    let gt = t[open..].find('>').context("flame graph: bad label")? + open + 1;
    let close = t[gt..].find("</text>").context("flame graph: bad label")? + gt;
    t.replace_range(gt..close, &label);
    Ok(t)
}

/// The script that fits labels in the browser (replacing inferno's two fitting functions, same
/// rule as [`fit_label`]) and keeps the search's share of all cycles without the root frame.
/// `short` maps whole names to short names (only those that differ), in name order so that
/// the same stacks give the same bytes.
fn script(short: &BTreeMap<&str, &str>) -> anyhow::Result<String> {
    // `<`, `>` and `&` escaped inside the JSON strings: nothing can end the CDATA section.
    let map = serde_json::to_string(short)?
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    Ok(format!(
        r##"<script type="text/ecmascript"><![CDATA[
var sqtt_short = {map};
function sqtt_fit(e, cw) {{
    var r = find_child(e, "rect"), t = find_child(e, "text");
    var room = parseFloat(r.attributes.width.value) * frames.attributes.width.value / 100 - 3;
    t.attributes.x.value = format_percent(parseFloat(r.attributes.x.value) + 300 / frames.attributes.width.value);
    var title = find_child(e, "title").textContent;
    var cut = title.lastIndexOf(" (");
    var full = cut < 0 ? title : title.substring(0, cut);
    var brief = Object.prototype.hasOwnProperty.call(sqtt_short, full) ? sqtt_short[full] : full;
    var fits = function (s) {{
        if (cw > 0) return s.length * cw <= room;
        t.textContent = s;
        return t.getComputedTextLength() <= room;
    }};
    if (fits(full)) {{ t.textContent = full; return; }}
    if (fits(brief)) {{ t.textContent = brief; return; }}
    for (var n = brief.length - 1; n >= 1; n--) {{
        var s = brief.substring(0, n) + "..";
        if (fits(s)) {{ t.textContent = s; return; }}
    }}
    t.textContent = "";
}}
function update_text(e) {{ sqtt_fit(e, known_font_width); }}
function update_text_for_elements(el) {{
    for (var i = 0; i < el.length; i++) sqtt_fit(el[i], known_font_width);
}}
var sqtt_inferno_search = search;
search = function (term) {{
    sqtt_inferno_search(term);
    if (!searching || !unzoombtn.classList.contains("hide")) return;
    var hits = [];
    var rects = document.querySelectorAll("#frames rect");
    for (var i = 0; i < rects.length; i++) {{
        var a = rects[i].attributes;
        if (a["fg:orig_fill"] != undefined)
            hits.push([parseInt(a["fg:x"].value), parseInt(a["fg:w"].value)]);
    }}
    hits.sort(function (p, q) {{ return p[0] - q[0] || q[1] - p[1]; }});
    var covered = 0, end = -1;
    for (var k = 0; k < hits.length; k++) {{
        var lo = Math.max(hits[k][0], end), hi = hits[k][0] + hits[k][1];
        if (hi > lo) {{ covered += hi - lo; end = hi; }}
    }}
    var pct = 100 * covered / total_samples;
    matchedtxt.firstChild.nodeValue = "Matched: " + (pct == 100 ? "100" : pct.toFixed(1)) + "%";
}};
]]></script>"##
    ))
}

/// Finishes inferno's SVG `raw` (module documentation); `styles` maps frame names (as in the
/// folded lines) to their style. Errors: `raw` is not shaped as inferno 0.12 writes it.
pub fn finish(raw: &str, styles: &HashMap<String, Style>) -> anyhow::Result<String> {
    let open = raw
        .find("<svg id=\"frames\"")
        .context("flame graph: no frames element")?;
    let body_start = raw[open..]
        .find('>')
        .context("flame graph: bad frames element")?
        + open
        + 1;
    let body_end = raw
        .rfind("</svg></svg>")
        .filter(|e| *e >= body_start)
        .context("flame graph: no end of the frames element")?;
    let list = frames(&raw[body_start..body_end])?;
    let bottom = list.iter().map(|f| f.y).max().unwrap_or(0);
    let roots: Vec<usize> = (0..list.len()).filter(|&i| list[i].y == bottom).collect();
    let root = match roots.as_slice() {
        [r] if list[*r].name == "all" => *r,
        _ => bail!("flame graph: no single root frame"),
    };
    let mut header = raw[..open].to_string();
    let height: usize = between(&header, " height=\"", "\"")
        .and_then(|h| h.parse().ok())
        .context("flame graph: no image height")?;
    let new_height = height.saturating_sub(FRAME_HEIGHT);
    for (old, new) in [
        (
            format!(" height=\"{height}\""),
            format!(" height=\"{new_height}\""),
        ),
        (format!(" {height}\""), format!(" {new_height}\"")),
        (
            format!(" y=\"{}.00\"", height.saturating_sub(BOTTOM_TEXT)),
            format!(" y=\"{}.00\"", new_height.saturating_sub(BOTTOM_TEXT)),
        ),
    ] {
        if !header.contains(&old) {
            bail!("flame graph: image height {height} not found as expected ({old})");
        }
        header = header.replace(&old, &new);
    }
    let end_script = header
        .find("]]></script>")
        .context("flame graph: no script")?
        + "]]></script>".len();
    let short: BTreeMap<&str, &str> = styles
        .iter()
        .filter(|(n, s)| **n != s.short)
        .map(|(n, s)| (n.as_str(), s.short.as_str()))
        .collect();
    header.insert_str(end_script, &script(&short)?);
    let mut out = String::with_capacity(raw.len() + 1024);
    out.push_str(&header);
    out.push_str(&raw[open..body_start]);
    for (i, f) in list.iter().enumerate() {
        if i != root {
            out.push_str(&restyle(f, styles.get(&f.name))?);
        }
    }
    out.push_str(&raw[body_end..]);
    Ok(out)
}
