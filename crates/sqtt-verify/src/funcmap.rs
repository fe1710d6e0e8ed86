//! `.sqtt_funcmap` parsing with the consumers' rules (`docs/background/funcmap-contract.md`, "Rows":
//! the rocprof-trace-decoder C++ `parse_funcmap_section`): lines split on `\n` or `\0`; trailing
//! `\r`, space, tab and NUL stripped; empty lines skipped; one-character prefix at column 0
//! followed by `:`; decimal ids (<= 0xFFFFFFFF) for `F`/`U`/`P`/`R`; name and location split at the
//! first `@`; rows with an empty name dropped; unknown prefixes skipped; last duplicate id wins.
//!
//! The verifier's own reading, independent of `sqtt-funcmap` (the rewriter's and the trace tools'
//! reader) on purpose: the verifier re-derives what it checks with its own code
//! (docs/workspace.md, "Dependency graph").

use std::collections::BTreeMap;

/// One parsed row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// Prefix character: `F`, `U`, `P`, `K`, `W`, `R`, `M`.
    pub kind: char,
    /// Id of `F`/`U`/`P`/`R` rows.
    pub id: Option<u32>,
    /// Name (`F`/`U`/`P`/`K`), or the payload after `<id>:` for `R`, or the text after `:` for
    /// `W`/`M`.
    pub name: String,
    /// Source location after the first `@`, when present.
    pub location: Option<String>,
}

/// A parsed funcmap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Funcmap {
    /// Rows in file order (dropped rows excluded).
    pub rows: Vec<Row>,
    /// Marker rows (`F`/`U`/`P`) by id; the last row of a duplicated id wins, as in the decoder.
    pub by_id: BTreeMap<u32, Row>,
    /// Ids that occur on more than one `F`/`U`/`P` row.
    pub duplicate_ids: Vec<u32>,
    /// Lines the decoder would skip or drop (unknown prefix, bad id, empty name), 1-based numbers.
    pub rejected_lines: Vec<(usize, String)>,
}

/// Parses section contents. Never fails: malformed lines land in [`Funcmap::rejected_lines`].
pub fn parse(data: &[u8]) -> Funcmap {
    let mut fm = Funcmap::default();
    let text = String::from_utf8_lossy(data);
    for (n, raw) in text.split(['\n', '\0']).enumerate() {
        let line = raw.trim_end_matches(['\r', ' ', '\t', '\0']);
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Some(row) => {
                if let (Some(id), true) = (row.id, matches!(row.kind, 'F' | 'U' | 'P')) {
                    if fm.by_id.insert(id, row.clone()).is_some() && !fm.duplicate_ids.contains(&id)
                    {
                        fm.duplicate_ids.push(id);
                    }
                }
                fm.rows.push(row);
            }
            None => fm.rejected_lines.push((n + 1, line.to_string())),
        }
    }
    fm
}

fn parse_id(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().and_then(|v| u32::try_from(v).ok())
}

fn parse_line(line: &str) -> Option<Row> {
    let mut chars = line.chars();
    let kind = chars.next()?;
    let rest = chars.as_str().strip_prefix(':')?;
    let split_loc = |s: &str| -> (String, Option<String>) {
        match s.split_once('@') {
            Some((n, l)) => (n.to_string(), Some(l.to_string())),
            None => (s.to_string(), None),
        }
    };
    match kind {
        'F' | 'U' | 'P' | 'R' => {
            let (id, body) = rest.split_once(':')?;
            let id = parse_id(id)?;
            let (name, location) = if kind == 'R' {
                (body.to_string(), None)
            } else {
                split_loc(body)
            };
            (!name.is_empty()).then_some(Row {
                kind,
                id: Some(id),
                name,
                location,
            })
        }
        'K' => {
            let (name, location) = split_loc(rest);
            (!name.is_empty()).then_some(Row {
                kind,
                id: None,
                name,
                location,
            })
        }
        'W' | 'M' => Some(Row {
            kind,
            id: None,
            name: rest.to_string(),
            location: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_decoder_rules() {
        let fm = parse(b"M:shader_clock_bits=0\nF:1:foo@a.c:3\r\n K:bad\nP:2:barrier\0U:x:bad\nF:3:\nX:9\nF:1:again\n\0");
        assert_eq!(fm.rows.len(), 4);
        assert_eq!(fm.by_id.get(&1).map(|r| r.name.as_str()), Some("again"));
        assert_eq!(fm.by_id.get(&2).map(|r| r.kind), Some('P'));
        assert_eq!(fm.rows[1].location.as_deref(), Some("a.c:3"));
        assert_eq!(fm.duplicate_ids, vec![1]);
        // leading space, non-decimal id, empty name, unknown prefix
        assert_eq!(fm.rejected_lines.len(), 4);
    }
}
