//! The `.sqtt_funcmap` section: rows, rendering and parsing.
//!
//! Facts from the spec ("Funcmap format") and `docs/background/funcmap-contract.md` (the rules of
//! rocprof-trace-decoder's `parse_funcmap_section`): one-character prefix at column 0 followed by
//! `:`, decimal ids, name and location split at the first `@`, lines split on `\n` or NUL,
//! trailing whitespace stripped, duplicate ids resolved "last wins", unknown prefixes skipped.
//! We render `\n`-separated rows with one trailing NUL, in the pass's emission order.

use std::collections::BTreeMap;

/// One funcmap row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// `F:id:name[@loc]`: a function scope (enter/exit).
    Function {
        id: u32,
        name: String,
        loc: Option<String>,
    },
    /// `K:name[@loc]`: a kernel, for vaddr lookup only.
    Kernel { name: String, loc: Option<String> },
    /// `U:id:name`: a user scope marker.
    User { id: u32, name: String },
    /// `P:id:name[@loc]`: a point marker (barriers, memory ops, address traces).
    Point {
        id: u32,
        name: String,
        loc: Option<String>,
    },
    /// `W:N`: wave size (32 or 64).
    WaveSize(u32),
    /// `R:id:extra_payload_count=N`.
    Payload { id: u32, count: u32 },
    /// `M:...` kept verbatim (after the `M:`).
    Encoding(String),
}

impl Row {
    /// The marker id the row declares, if it declares one.
    pub fn id(&self) -> Option<u32> {
        match self {
            Row::Function { id, .. } | Row::User { id, .. } | Row::Point { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// Renders the row without a line terminator.
    pub fn render(&self) -> String {
        fn with_loc(s: String, loc: &Option<String>) -> String {
            match loc {
                Some(l) => format!("{s}@{l}"),
                None => s,
            }
        }
        match self {
            Row::Function { id, name, loc } => with_loc(format!("F:{id}:{name}"), loc),
            Row::Kernel { name, loc } => with_loc(format!("K:{name}"), loc),
            Row::User { id, name } => format!("U:{id}:{name}"),
            Row::Point { id, name, loc } => with_loc(format!("P:{id}:{name}"), loc),
            Row::WaveSize(n) => format!("W:{n}"),
            Row::Payload { id, count } => format!("R:{id}:extra_payload_count={count}"),
            Row::Encoding(kv) => format!("M:{kv}"),
        }
    }
}

/// Rendering order of the pass: `M:`, `F:` by id, `K:`, `U:`/`P:` (non address-trace) by id, then
/// `W:` and address-trace `P:` rows each followed by its `R:` row.
fn order_key(row: &Row) -> (u8, u64) {
    match row {
        Row::Encoding(_) => (0, 0),
        Row::Function { id, .. } => (1, u64::from(*id)),
        Row::Kernel { .. } => (2, 0),
        Row::User { id, .. } => (3, u64::from(*id)),
        Row::Point { id, name, .. } if !name.starts_with("addr_trace_") => (3, u64::from(*id)),
        Row::WaveSize(_) => (4, 0),
        Row::Point { id, .. } => (5, u64::from(*id) * 2),
        Row::Payload { id, .. } => (5, u64::from(*id) * 2 + 1),
    }
}

/// Renders the section contents: rows in the pass's order, `\n`-separated, one trailing NUL.
/// Rows of equal rank keep their given order (stable sort).
pub fn render(rows: &[Row]) -> Vec<u8> {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| order_key(r));
    let mut text = String::new();
    for r in sorted {
        text.push_str(&r.render());
        text.push('\n');
    }
    let mut bytes = text.into_bytes();
    bytes.push(0);
    bytes
}

/// Result of parsing a funcmap with the consumers' rules.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Every accepted row, in input order.
    pub rows: Vec<Row>,
    /// Lines skipped (unknown prefix, bad id, empty name), with the reason.
    pub warnings: Vec<String>,
}

impl Parsed {
    /// Marker id -> its last declaring row (duplicates: last wins, as the C++ parser does).
    pub fn by_id(&self) -> BTreeMap<u32, &Row> {
        let mut m = BTreeMap::new();
        for r in &self.rows {
            if let Some(id) = r.id() {
                m.insert(id, r);
            }
        }
        m
    }

    /// Extra payload count declared for `id` (0 when no `R:` row names it).
    pub fn payload_count(&self, id: u32) -> u32 {
        self.rows
            .iter()
            .rev()
            .find_map(|r| match r {
                Row::Payload { id: i, count } if *i == id => Some(*count),
                _ => None,
            })
            .unwrap_or(0)
    }
}

fn split_loc(rest: &str) -> (String, Option<String>) {
    match rest.split_once('@') {
        Some((n, l)) => (n.to_string(), Some(l.to_string())),
        None => (rest.to_string(), None),
    }
}

fn parse_id(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Checks the `.sqtt_funcmap` of an input strictly (issue 32: a corrupt funcmap is bad input,
/// not a verifier finding): every row must parse ([`parse`] would warn otherwise) and no marker
/// id may be declared twice. Rows are separated by `\n` or NUL, as [`parse`] reads them. Errors:
/// the first bad row, by number (from 1) and byte offset in the section.
pub fn check_strict(bytes: &[u8]) -> Result<(), String> {
    let mut first_row: BTreeMap<u32, usize> = BTreeMap::new();
    let (mut offset, mut row) = (0usize, 0usize);
    for raw in bytes.split(|b| *b == b'\n' || *b == 0) {
        let at = offset;
        offset += raw.len() + 1;
        let Ok(text) = std::str::from_utf8(raw) else {
            return Err(format!("row at offset {at:#x} is not UTF-8"));
        };
        if text.trim_end_matches(['\r', ' ', '\t']).is_empty() {
            continue;
        }
        row += 1;
        let parsed = parse(raw);
        if let Some(w) = parsed.warnings.first() {
            return Err(format!("row {row} at offset {at:#x}: {w}"));
        }
        for id in parsed.rows.iter().filter_map(Row::id) {
            if let Some(first) = first_row.insert(id, row) {
                return Err(format!(
                    "row {row} at offset {at:#x}: id {id} is declared again (first in row {first})"
                ));
            }
        }
    }
    Ok(())
}

/// Parses section bytes with the rules of the contract note (never fails; bad lines become warnings).
pub fn parse(bytes: &[u8]) -> Parsed {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Parsed::default();
    for raw in text.split(['\n', '\0']) {
        let line = raw.trim_end_matches(['\r', ' ', '\t', '\0']);
        if line.is_empty() {
            continue;
        }
        let b = line.as_bytes();
        if b.len() < 2 || b[1] != b':' {
            out.warnings.push(format!("no prefix: {line:?}"));
            continue;
        }
        let body = &line[2..];
        let row = match b[0] {
            b'F' | b'U' | b'P' => {
                let Some((id_text, rest)) = body.split_once(':') else {
                    out.warnings.push(format!("missing id: {line:?}"));
                    continue;
                };
                let Some(id) = parse_id(id_text) else {
                    out.warnings.push(format!("bad id: {line:?}"));
                    continue;
                };
                let (name, loc) = split_loc(rest);
                if name.is_empty() {
                    out.warnings.push(format!("empty name: {line:?}"));
                    continue;
                }
                match b[0] {
                    b'F' => Row::Function { id, name, loc },
                    b'U' => Row::User { id, name },
                    _ => Row::Point { id, name, loc },
                }
            }
            b'K' => {
                let (name, loc) = split_loc(body);
                if name.is_empty() {
                    out.warnings.push(format!("empty name: {line:?}"));
                    continue;
                }
                Row::Kernel { name, loc }
            }
            b'W' => match parse_id(body) {
                Some(n) => Row::WaveSize(n),
                None => {
                    out.warnings.push(format!("bad wave size: {line:?}"));
                    continue;
                }
            },
            b'R' => {
                let parsed = body.split_once(':').and_then(|(i, kv)| {
                    let id = parse_id(i)?;
                    let count = parse_id(kv.strip_prefix("extra_payload_count=")?)?;
                    Some(Row::Payload { id, count })
                });
                match parsed {
                    Some(r) => r,
                    None => {
                        out.warnings.push(format!("bad R: row: {line:?}"));
                        continue;
                    }
                }
            }
            b'M' => Row::Encoding(body.to_string()),
            _ => {
                out.warnings.push(format!("unknown prefix: {line:?}"));
                continue;
            }
        };
        out.rows.push(row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_follows_pass_order_and_terminates() {
        let rows = vec![
            Row::Point {
                id: 3,
                name: "barrier".into(),
                loc: None,
            },
            Row::Kernel {
                name: "k".into(),
                loc: None,
            },
            Row::Function {
                id: 2,
                name: "_Z1fv".into(),
                loc: Some("a.hip:3".into()),
            },
            Row::Function {
                id: 1,
                name: "_Z1gv".into(),
                loc: None,
            },
        ];
        let bytes = render(&rows);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "F:1:_Z1gv\nF:2:_Z1fv@a.hip:3\nK:k\nP:3:barrier\n\0"
        );
        let back = parse(&bytes);
        assert!(back.warnings.is_empty());
        assert_eq!(back.rows.len(), 4);
    }

    #[test]
    fn parse_applies_consumer_rules() {
        let text = b"F:5:foo@x.c:1 -> y.c:2\r\n P:1:bad\nP:0x3:hex\nQ:1:zzz\nP:7:\nR:9:extra_payload_count=130\0W:64";
        let p = parse(text);
        assert_eq!(p.rows.len(), 3);
        assert_eq!(p.warnings.len(), 4);
        assert_eq!(
            p.rows[0],
            Row::Function {
                id: 5,
                name: "foo".into(),
                loc: Some("x.c:1 -> y.c:2".into())
            }
        );
        assert_eq!(p.payload_count(9), 130);
        assert_eq!(p.payload_count(5), 0);
        assert_eq!(p.rows[2], Row::WaveSize(64));
    }
}
