//! The reader: section bytes to rows with the consumers' rules, lenient or strict.

use crate::Row;
use std::collections::BTreeMap;

/// Result of parsing a funcmap with the consumers' rules.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Every accepted row, in input order (an `M:` row is kept verbatim even when it is
    /// malformed; [`parse_encoding`] tells which ones count).
    pub rows: Vec<Row>,
    /// What the lenient reading skipped or overrode (bad rows, duplicate ids, malformed `M:`
    /// and `R:` values), one line each, naming the row by number (from 1, empty lines counted).
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

/// How [`read`] treats a row the consumers would skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The trace tools' reading, the one of rocprof-trace-decoder's `parse_funcmap_section`
    /// (best effort, never fatal): a bad row is skipped with a warning, a duplicate id is won
    /// by its last row with a warning, a malformed `M:` row is ignored with a warning.
    Lenient,
    /// The rewriter's reading of a funcmap in an input (issue 32: a corrupt funcmap is bad
    /// input): the first row the lenient reading would warn about is an error, and so are a
    /// row that is not UTF-8 and an `R:` row that carries anything but one
    /// `extra_payload_count=N` (the rewriter re-renders rows and could not keep it).
    Strict,
}

/// `id:rest` with a decimal id.
fn with_id(body: &str) -> Option<(u32, &str)> {
    body.split_once(':')
        .and_then(|(i, r)| Some((parse_id(i)?, r)))
}

fn split_loc(rest: &str) -> (String, Option<String>) {
    match rest.split_once('@') {
        Some((n, l)) => (n.to_string(), Some(l.to_string())),
        None => (rest.to_string(), None),
    }
}

/// A decimal `u32` (digits only, no sign, no spaces; leading zeros allowed; above `u32::MAX`
/// rejected), as the C++ parser reads ids, counts and `M:` values.
fn parse_id(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The meaning of the text after `M:` (spec "GFX12 Shader Clock Packing"; the validity rules of
/// rocprof-trace-decoder's parser): `;`-separated `key=value` items, only `shader_clock_bits`
/// and `shader_clock_shift` read (others and items without `=` ignored), values decimal `u32`.
/// `Ok(None)`: the row sets no `shader_clock_bits` and changes nothing. `Ok(Some((bits,
/// shift)))`: the layout the row sets (`bits` = 0 is the legacy no-clock layout; `shift` is 0
/// when absent). `Err`: the row is malformed and ignored (a value that is not a decimal `u32`,
/// bits > 0 without a shift, bits > 29, shift > 32, or bits > 32 - shift); an earlier valid
/// `M:` row stays in force.
pub fn parse_encoding(kv: &str) -> Result<Option<(u32, u32)>, String> {
    let (mut bits, mut shift, mut bad) = (None, None, None);
    for item in kv.split(';') {
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        let slot = match key {
            "shader_clock_bits" => &mut bits,
            "shader_clock_shift" => &mut shift,
            _ => continue,
        };
        match parse_id(value) {
            Some(v) => *slot = Some(v),
            None => bad = Some(format!("{key} value {value:?} is not a decimal u32")),
        }
    }
    if let Some(why) = bad {
        return Err(why);
    }
    let Some(b) = bits else {
        return Ok(None);
    };
    let s = shift.unwrap_or(0);
    if b > 0 && shift.is_none() {
        Err(format!("shader_clock_bits={b} without shader_clock_shift"))
    } else if b > 29 {
        Err(format!("shader_clock_bits={b} above 29"))
    } else if s > 32 {
        Err(format!("shader_clock_shift={s} above 32"))
    } else if b > 32 - s {
        Err(format!(
            "shader_clock_bits={b} above 32 - shader_clock_shift ({s})"
        ))
    } else {
        Ok(Some((b, s)))
    }
}

/// Checks the `.sqtt_funcmap` of an input strictly ([`Mode::Strict`]). Errors: the first bad
/// row, by number (from 1, non-empty rows counted) and byte offset in the section.
pub fn check_strict(bytes: &[u8]) -> Result<(), String> {
    read(bytes, Mode::Strict).map(|_| ())
}

/// Parses section bytes leniently ([`Mode::Lenient`]); never fails.
pub fn parse(bytes: &[u8]) -> Parsed {
    read(bytes, Mode::Lenient).unwrap_or_default()
}

/// Reads a funcmap. Lines are split at `\n` and NUL; trailing `\r`, space, tab and NUL are
/// stripped; empty lines are skipped; a row is a one-character prefix and `:`. Rows:
/// `F:`/`U:`/`P:` `id:name[@loc]` (decimal id, non-empty name), `K:name[@loc]`, `W:N`,
/// `M:key=value;...` ([`parse_encoding`]), `R:id:key=value;...` (only `extra_payload_count`
/// read, the last valid one of the row; other keys and items without `=` ignored; a row
/// without one adds nothing). Errors (strict mode only): the first row the lenient mode skips
/// or warns about, by row number and byte offset.
pub fn read(bytes: &[u8], mode: Mode) -> Result<Parsed, String> {
    let strict = mode == Mode::Strict;
    let mut out = Parsed::default();
    let mut declared: BTreeMap<u32, (usize, String)> = BTreeMap::new();
    let (mut offset, mut row) = (0usize, 0usize);
    for raw in bytes.split(|b| *b == b'\n' || *b == 0) {
        let at = offset;
        offset += raw.len() + 1;
        let text = String::from_utf8_lossy(raw);
        let line = text.trim_end_matches(['\r', ' ', '\t', '\0']);
        if line.is_empty() {
            continue;
        }
        row += 1;
        let mut warn = |why: String| -> Result<(), String> {
            // Both modes name the row and its byte offset in the section (session-28 tester).
            let text = format!("row {row} at offset {at:#x}: {why}");
            if strict {
                Err(text)
            } else {
                out.warnings.push(text);
                Ok(())
            }
        };
        // Lenient mode reads such a row with replacement characters, but says so.
        if std::str::from_utf8(raw).is_err() {
            warn("not UTF-8".to_string())?;
        }
        let b = line.as_bytes();
        if b.len() < 2 || b[1] != b':' {
            warn(format!("no prefix: {line:?}"))?;
            continue;
        }
        let body = &line[2..];
        let parsed = match b[0] {
            b'F' | b'U' | b'P' => match with_id(body) {
                None => Err(format!("bad id: {line:?}")),
                Some((id, rest)) => {
                    let (name, loc) = split_loc(rest);
                    if name.is_empty() {
                        Err(format!("empty name: {line:?}"))
                    } else {
                        Ok(match b[0] {
                            b'F' => Row::Function { id, name, loc },
                            b'U' => Row::User { id, name, loc },
                            _ => Row::Point { id, name, loc },
                        })
                    }
                }
            },
            b'K' => match split_loc(body) {
                (name, _) if name.is_empty() => Err(format!("K: row without a name: {line:?}")),
                (name, loc) => Ok(Row::Kernel { name, loc }),
            },
            b'W' => parse_id(body)
                .map(Row::WaveSize)
                .ok_or_else(|| format!("bad wave size: {line:?}")),
            b'M' => match parse_encoding(body) {
                Ok(_) => Ok(Row::Encoding(body.to_string())),
                Err(why) => {
                    // Kept as a row (listed by `funcmap`), ignored by readers.
                    warn(format!("malformed M: row ({why}; ignored): {line:?}"))?;
                    out.rows.push(Row::Encoding(body.to_string()));
                    continue;
                }
            },
            b'R' => {
                let Some((id, attrs)) = with_id(body) else {
                    warn(format!("bad id in R: row: {line:?}"))?;
                    continue;
                };
                let mut count = None;
                for item in attrs.split(';') {
                    if let Some(("extra_payload_count", v)) = item.split_once('=') {
                        match parse_id(v) {
                            Some(n) => count = Some(n),
                            None => warn(format!("bad extra_payload_count in R: row: {line:?}"))?,
                        }
                    }
                }
                if strict
                    && count.map(|n| format!("extra_payload_count={n}")).as_deref() != Some(attrs)
                {
                    warn(format!(
                        "R: row other than one extra_payload_count=N (not kept by the rewriter): {line:?}"
                    ))?;
                }
                match count {
                    Some(count) => Ok(Row::Payload { id, count }),
                    None => continue,
                }
            }
            _ => Err(format!("unknown prefix: {line:?}")),
        };
        let r = match parsed {
            Ok(r) => r,
            Err(why) => {
                warn(why)?;
                continue;
            }
        };
        if let (
            Some(id),
            Row::Function { name, .. } | Row::User { name, .. } | Row::Point { name, .. },
        ) = (r.id(), &r)
        {
            if let Some((first, old)) = declared.insert(id, (row, name.clone())) {
                warn(format!(
                    "id {id} is declared again (first in row {first}): {old:?} replaced by {name:?}"
                ))?;
            }
        }
        out.rows.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
