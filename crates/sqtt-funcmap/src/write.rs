//! The writer: a section's bytes from rows, in the compile-time pass's emission order.

use crate::Row;

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

/// Renders the section contents: rows in the pass's order (docs/background/funcmap-contract.md,
/// "Rows": consumers do not depend on it, but matching it keeps diffs against compiler output
/// small), `\n`-separated, one trailing NUL. Rows of equal rank keep their given order (stable
/// sort). Never fails; the rows are not checked ([`Row::render`]).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

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
}
