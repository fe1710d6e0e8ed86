//! Marker tables: one per code object, indexed by marker id, built from `.sqtt_funcmap` rows
//! parsed by `sqtt_funcmap` (the consumers' rules, docs/background/funcmap-contract.md) or
//! from the six-column `sqtt_funcmap` rows of a UI directory's `code.json` (att-format note §1.6).
//! Also the marker-word decoding of the spec ("Marker Encoding", "GFX12 Shader Clock
//! Packing").

use crate::names::{NameId, Names};
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;
use sqtt_funcmap::Row;

/// What a marker id means, from its funcmap prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `F:` function scope (enter/exit).
    Function,
    /// `U:` user scope (enter/exit).
    User,
    /// `P:` point (barriers, memory ops, address-trace headers); never pushes.
    Point,
}

/// One marker id of one code object.
#[derive(Debug, Clone)]
pub struct Marker {
    /// Prefix kind.
    pub kind: Kind,
    /// Interned name (mangled, as in the row).
    pub name: NameId,
    /// Source location (inline chain, innermost first), when the row has one.
    pub loc: Option<String>,
    /// `R:` extra payload count: shaderdata records of the same wave that follow the header.
    pub payload: u32,
}

/// gfx12 shader-clock packing layout from the `M:` row (spec "GFX12 Shader Clock Packing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClockLayout {
    /// Clock bits stored in marker bits 31..32-bits.
    pub bits: u32,
    /// Shift of the sampled window in the source clock (cycles = field << shift).
    pub shift: u32,
}

impl ClockLayout {
    /// The packed layout an `M:` body sets, by [`sqtt_funcmap::parse_encoding`] (AMD's validity
    /// rules): `None` for the legacy no-clock layout (bits = 0), for a body that sets no
    /// `shader_clock_bits`, and for a malformed body.
    pub fn parse(kv: &str) -> Option<ClockLayout> {
        match sqtt_funcmap::parse_encoding(kv) {
            Ok(Some((bits, shift))) if bits > 0 => Some(ClockLayout { bits, shift }),
            _ => None,
        }
    }

    /// Mask of the packed marker id after `>> 2` (30 - bits wide).
    pub fn id_mask(self) -> u32 {
        (1u32 << (30 - self.bits)) - 1
    }
}

/// A decoded 32-bit marker word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    /// Bit 0: pop the top scope.
    pub exit_prev: bool,
    /// Bit 1: push the id.
    pub enter: bool,
    /// Marker id.
    pub id: u32,
    /// Sampled shader-clock window in cycles (`field << shift`) for a packed header.
    pub sampled: Option<u64>,
}

/// Decodes a marker word. Without a layout: `id = value >> 2`. With one, the packed form is used
/// for ids known to the table and for bare exits; other values stay legacy (spec, "C++
/// decoder marker encoding": `decode_marker_value(raw, funcmap)`).
pub fn decode_word(value: u32, layout: Option<ClockLayout>, known: impl Fn(u32) -> bool) -> Word {
    let exit_prev = value & 1 != 0;
    let enter = value & 2 != 0;
    if let Some(l) = layout {
        let id = (value >> 2) & l.id_mask();
        let bare_exit = exit_prev && !enter && id == 0;
        if bare_exit || known(id) {
            let field = u64::from(value >> (32 - l.bits));
            return Word {
                exit_prev,
                enter,
                id,
                sampled: Some(field << l.shift),
            };
        }
    }
    Word {
        exit_prev,
        enter,
        id: value >> 2,
        sampled: None,
    }
}

/// The markers of one code object.
#[derive(Debug, Default, Clone)]
pub struct MarkerTable {
    /// Marker id -> marker (duplicates: last row wins, as the C++ parser).
    pub markers: HashMap<u32, Marker>,
    /// `K:` kernel names.
    pub kernels: Vec<String>,
    /// `W:` wave size, when present.
    pub wave_size: Option<u32>,
    /// `M:` packing layout, when valid and non-zero.
    pub clock: Option<ClockLayout>,
    /// Rows the parser skipped, with the reason.
    pub warnings: Vec<String>,
}

impl MarkerTable {
    /// Builds the table from `.sqtt_funcmap` section bytes.
    pub fn from_section(bytes: &[u8], names: &mut Names) -> MarkerTable {
        let parsed = sqtt_funcmap::parse(bytes);
        let mut t = Self::from_rows(&parsed.rows, names);
        t.warnings = parsed.warnings;
        t
    }

    /// Builds the table from parsed rows, as AMD's parser does: duplicate ids go to the last
    /// row; `R:` counts apply after all rows to the ids a row declares (order-independent; an
    /// `R:` row for an id no row declares is ignored); the last valid `M:` row sets the layout.
    pub fn from_rows(rows: &[Row], names: &mut Names) -> MarkerTable {
        let mut t = MarkerTable::default();
        let mut payloads = HashMap::new();
        for r in rows {
            let (id, kind, name, loc) = match r {
                Row::Function { id, name, loc } => (*id, Kind::Function, name, loc.clone()),
                // AMD's parser keeps no location for a user scope (the spec: `U:` rows are
                // source-loc-less); loop scopes carry their line in the name instead.
                Row::User { id, name, .. } => (*id, Kind::User, name, None),
                Row::Point { id, name, loc } => (*id, Kind::Point, name, loc.clone()),
                Row::Kernel { name, .. } => {
                    t.kernels.push(name.clone());
                    continue;
                }
                Row::WaveSize(n) => {
                    t.wave_size = Some(*n);
                    continue;
                }
                Row::Payload { id, count } => {
                    payloads.insert(*id, *count);
                    continue;
                }
                Row::Encoding(kv) => {
                    // A malformed row, or one without `shader_clock_bits`, leaves the layout
                    // in force; a valid one replaces it (bits = 0: back to no clock).
                    if let Ok(Some((bits, shift))) = sqtt_funcmap::parse_encoding(kv) {
                        t.clock = (bits > 0).then_some(ClockLayout { bits, shift });
                    }
                    continue;
                }
            };
            let name = names.intern(name);
            t.markers.insert(
                id,
                Marker {
                    kind,
                    name,
                    loc,
                    payload: 0,
                },
            );
        }
        for (id, count) in payloads {
            if let Some(m) = t.markers.get_mut(&id) {
                m.payload = count;
            }
        }
        t
    }
}

fn as_u32(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|x| u32::try_from(x).ok())
}

/// Converts `code.json` tables into funcmap rows per code object id. `funcmap` rows are
/// `[codeobj_id, marker_id, kind, name, source_loc, vaddr]`; `layout` rows
/// `[codeobj_id, shader_clock_bits, shader_clock_shift]`; `payloads` rows
/// `[codeobj_id, marker_id, extra_payload_count]` (spec "code.json marker metadata").
/// Returns the rows and the number of rows that did not have that shape.
pub fn rows_from_code_json(
    funcmap: Option<&Value>,
    layout: Option<&Value>,
    payloads: Option<&Value>,
) -> (HashMap<u32, Vec<Row>>, u64) {
    let mut out: HashMap<u32, Vec<Row>> = HashMap::new();
    let mut bad = 0u64;
    let rows = |v: Option<&Value>| -> Vec<Vec<Value>> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|r| r.as_array().cloned().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    };
    for r in rows(funcmap) {
        let parsed = (|| {
            let co = as_u32(r.first()?)?;
            let kind = r.get(2)?.as_str()?;
            let name = r.get(3)?.as_str()?.to_string();
            if name.is_empty() {
                return None;
            }
            let loc = r
                .get(4)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let id = r.get(1).and_then(as_u32);
            let row = match kind {
                "F" => Row::Function { id: id?, name, loc },
                "U" => Row::User { id: id?, name, loc },
                "P" => Row::Point { id: id?, name, loc },
                "K" => Row::Kernel { name, loc },
                _ => return None,
            };
            Some((co, row))
        })();
        match parsed {
            Some((co, row)) => out.entry(co).or_default().push(row),
            None => bad += 1,
        }
    }
    for r in rows(layout) {
        match (
            r.first().and_then(as_u32),
            r.get(1).and_then(as_u32),
            r.get(2).and_then(as_u32),
        ) {
            (Some(co), Some(bits), Some(shift)) => out.entry(co).or_default().push(Row::Encoding(
                format!("shader_clock_bits={bits};shader_clock_shift={shift}"),
            )),
            _ => bad += 1,
        }
    }
    for r in rows(payloads) {
        match (
            r.first().and_then(as_u32),
            r.get(1).and_then(as_u32),
            r.get(2).and_then(as_u32),
        ) {
            (Some(co), Some(id), Some(count)) => {
                out.entry(co).or_default().push(Row::Payload { id, count })
            }
            _ => bad += 1,
        }
    }
    (out, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_words_follow_the_bit_layout() {
        let w = decode_word(6, None, |_| true);
        assert_eq!(
            (w.exit_prev, w.enter, w.id, w.sampled),
            (false, true, 1, None)
        );
        let w = decode_word(1, None, |_| true);
        assert_eq!((w.exit_prev, w.enter, w.id), (true, false, 0));
        let w = decode_word((7 << 2) | 3, None, |_| true);
        assert_eq!((w.exit_prev, w.enter, w.id), (true, true, 7));
    }

    /// att_tool_test.py@0218074 (note §2.6): at layout (12,4), `(0x100<<20)|(3<<2)` is the packed
    /// header of id 3 = legacy value 12, sampled window 0x1000.
    #[test]
    fn packed_header_known_answer() {
        let l = ClockLayout::parse("shader_clock_bits=12;shader_clock_shift=4");
        assert_eq!(l, Some(ClockLayout { bits: 12, shift: 4 }));
        let w = decode_word((0x100 << 20) | (3 << 2), l, |id| id == 3);
        assert_eq!(
            (w.id << 2) | u32::from(w.enter) << 1 | u32::from(w.exit_prev),
            12
        );
        assert_eq!(w.sampled, Some(0x1000));
        // An id unknown to the funcmap stays legacy (spec: unregistered values remain legacy).
        let w = decode_word((0x100 << 20) | (3 << 2), l, |_| false);
        assert_eq!((w.id, w.sampled), (((0x100 << 20) | (3 << 2)) >> 2, None));
        // A packed bare exit keeps its clock.
        let w = decode_word((0xABC << 20) | 1, l, |_| false);
        assert_eq!((w.id, w.exit_prev, w.sampled), (0, true, Some(0xABC0)));
    }

    #[test]
    fn malformed_layouts_are_legacy() {
        assert_eq!(ClockLayout::parse("shader_clock_bits=12"), None);
        assert_eq!(
            ClockLayout::parse("shader_clock_bits=0;shader_clock_shift=4"),
            None
        );
        assert_eq!(
            ClockLayout::parse("shader_clock_bits=30;shader_clock_shift=0"),
            None
        );
        assert_eq!(
            ClockLayout::parse("shader_clock_bits=20;shader_clock_shift=16"),
            None
        );
        assert_eq!(
            ClockLayout::parse("shader_clock_shift=2;shader_clock_bits=8"),
            Some(ClockLayout { bits: 8, shift: 2 })
        );
    }

    #[test]
    fn code_json_rows_become_tables() {
        let fm: Value = serde_json::json!([
            [7, 1, "U", "outer", "", null],
            [7, 2, "P", "addr_trace_lds_load", "k.hip:3", null],
            [7, null, "K", "kernel", "k.hip:1", 4096],
            [7, 3, "X", "bad", "", null],
            "garbage"
        ]);
        let pl: Value = serde_json::json!([[7, 2, 34]]);
        let (rows, bad) = rows_from_code_json(Some(&fm), None, Some(&pl));
        assert_eq!(bad, 2);
        let mut names = Names::default();
        let t = MarkerTable::from_rows(&rows[&7], &mut names);
        assert_eq!(t.kernels, vec!["kernel".to_string()]);
        assert_eq!(t.markers[&2].payload, 34);
        assert_eq!(t.markers[&2].loc.as_deref(), Some("k.hip:3"));
        assert_eq!(t.markers[&1].kind, Kind::User);
        assert_eq!(names.get(t.markers[&1].name), "outer");
    }
}
