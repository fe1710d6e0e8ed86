//! One funcmap row: its type, the id it declares and its text.

/// One funcmap row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// `F:id:name[@loc]`: a function scope (enter/exit).
    Function {
        /// Marker id (decimal in the text, from 1; ids are per code object, 0 is reserved).
        id: u32,
        /// Name (mangled as in the symbol table for `F:`; never empty, no `@`, no newline or NUL).
        name: String,
        /// Source location after the first `@` (`file:line`, or an inline chain
        /// `inner:line -> outer:line -> ...`), when the row has one.
        loc: Option<String>,
    },
    /// `K:name[@loc]`: a kernel, for vaddr lookup only.
    Kernel {
        /// Name (the kernel's symbol name; never empty, no `@`, no newline or NUL).
        name: String,
        /// Source location after the first `@` (`file:line`, or an inline chain
        /// `inner:line -> outer:line -> ...`), when the row has one.
        loc: Option<String>,
    },
    /// `U:id:name[@loc]`: a user scope marker (kernel scopes carry no location; loop scopes
    /// carry their header's `file:line`; the decoder splits every `F:`/`U:`/`P:` row at the
    /// first `@`, `docs/background/funcmap-contract.md`).
    User {
        /// Marker id (decimal in the text, from 1; ids are per code object, 0 is reserved).
        id: u32,
        /// Name (mangled as in the symbol table for `F:`; never empty, no `@`, no newline or NUL).
        name: String,
        /// Source location after the first `@` (`file:line`, or an inline chain
        /// `inner:line -> outer:line -> ...`), when the row has one.
        loc: Option<String>,
    },
    /// `P:id:name[@loc]`: a point marker (barriers, memory ops, address traces).
    Point {
        /// Marker id (decimal in the text, from 1; ids are per code object, 0 is reserved).
        id: u32,
        /// Name (mangled as in the symbol table for `F:`; never empty, no `@`, no newline or NUL).
        name: String,
        /// Source location after the first `@` (`file:line`, or an inline chain
        /// `inner:line -> outer:line -> ...`), when the row has one.
        loc: Option<String>,
    },
    /// `W:N`: wave size in lanes (32 or 64; the reader accepts any decimal `u32`).
    WaveSize(u32),
    /// `R:id:extra_payload_count=N`: after a header marker with this id, the next `count`
    /// shaderdata records of the same wave are payload (spec, "Funcmap format").
    Payload {
        /// Id of the header marker the count applies to.
        id: u32,
        /// Number of 32-bit payload records that follow the header.
        count: u32,
    },
    /// `M:key=value;...` kept verbatim (the text after `M:`); [`crate::parse_encoding`] gives
    /// its meaning (spec, "GFX12 Shader Clock Packing").
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

    /// The row's text without a line terminator (`F:5:foo@a.hip:3`). Does not check the
    /// fields: the caller keeps `@`, `\n` and NUL out of names (docs/background/
    /// funcmap-contract.md, "Checklist for our producer").
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
            Row::User { id, name, loc } => with_loc(format!("U:{id}:{name}"), loc),
            Row::Point { id, name, loc } => with_loc(format!("P:{id}:{name}"), loc),
            Row::WaveSize(n) => format!("W:{n}"),
            Row::Payload { id, count } => format!("R:{id}:extra_payload_count={count}"),
            Row::Encoding(kv) => format!("M:{kv}"),
        }
    }
}
