//! Inlined function instances (`DW_TAG_inlined_subroutine`, DWARF 5 section 3.3.8.2): where the
//! code of a function the compiler inlined lives in its caller, for scopes without a symbol
//! (issue 16; spec "Phase 1" / "Phase 2": the compile-time pass marks inlined copies as
//! `F:` rows without an address).
//!
//! clang 22 emits these entries with `-g` and also with `-gline-tables-only` (there the abstract
//! origin carries only `DW_AT_name`: no linkage name, no declaration site). They are read by
//! [`crate::LocationIndex::new`] in the same walk as the inline chains.

use std::collections::HashMap;

use crate::locations::SourceLoc;

/// One inlined instance, as DWARF nests it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedScope {
    /// `.debug_info` offset (bytes) of the `DW_TAG_inlined_subroutine` DIE.
    pub die: u64,
    /// Index (into the same vector) of the enclosing inlined instance; `None` when it is inlined
    /// directly into the concrete function (lexical blocks in between are skipped).
    pub parent: Option<usize>,
    /// Lowest code address (bytes) of the enclosing concrete `DW_TAG_subprogram`; `None` when
    /// that subprogram has no code ranges.
    pub function: Option<u64>,
    /// Name of the inlined function: `DW_AT_linkage_name` of its abstract origin (followed
    /// through `DW_AT_abstract_origin` / `DW_AT_specification`), else `DW_AT_name`; empty when
    /// neither exists.
    pub name: String,
    /// Definition site of the inlined function (`DW_AT_decl_file`:`DW_AT_decl_line` of the
    /// origin); `None` with `-gline-tables-only`.
    pub decl: Option<SourceLoc>,
    /// Call site (`DW_AT_call_file`:`DW_AT_call_line`; absent attributes read as 0, as LLVM's
    /// `DWARFDie::getCallerFrame`).
    pub call: SourceLoc,
    /// Code ranges `[begin, end)` (bytes) from `DW_AT_low_pc`/`DW_AT_high_pc` or `DW_AT_ranges`,
    /// sorted, empty ranges dropped.
    pub ranges: Vec<(u64, u64)>,
}

impl InlinedScope {
    /// Size of the code in bytes (sum over `ranges`).
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(b, e)| e - b).sum()
    }

    /// Whether `address` (bytes) lies in one of the ranges.
    pub fn contains(&self, address: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(b, e)| b <= address && address < e)
    }

    /// Nesting depth: 0 for an instance inlined directly into the concrete function.
    pub fn depth(&self, all: &[InlinedScope]) -> usize {
        let mut d = 0;
        let mut p = self.parent;
        while let Some(i) = p {
            d += 1;
            p = all.get(i).and_then(|s| s.parent);
        }
        d
    }
}

/// Inlined instances of all functions of one code object, in `.debug_info` pre-order (a parent
/// before its children). `sections`: as [`crate::read_debug_sections`] returns them. Errors:
/// as [`crate::LocationIndex::new`].
pub fn inlined_scopes(
    sections: &HashMap<String, Vec<u8>>,
) -> Result<Vec<InlinedScope>, crate::Error> {
    Ok(crate::LocationIndex::new(sections)?.inlined().to_vec())
}
