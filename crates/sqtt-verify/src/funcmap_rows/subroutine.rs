//! `F:` rows of in-kernel subroutines (hipBLASLt call tables, issue 37 item 3): a scope the
//! rewrite adds under `--functions` for a body called with `s_swappc_b64` inside a kernel, named
//! by the local label at its entry or `KERNEL+0xOFFSET`. Such a name is neither a function
//! symbol nor an inlined function; this module tells the names the row check accepts, and the
//! flow checks (`flow::subscopes`) prove that the scope is entered at that subroutine's entry.

use std::collections::{BTreeMap, HashMap, HashSet};

use hsaco::CodeObject;

/// Local labels of `co` (`STT_NOTYPE` symbols in an executable section, as `hsaco` classifies
/// them), by address.
pub(super) fn labels(co: &CodeObject) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for s in co
        .symbols
        .iter()
        .filter(|s| s.kind == hsaco::SymbolKind::Label && s.symbol.shndx != hsaco::elf::SHN_UNDEF)
    {
        out.entry(s.symbol.value)
            .or_default()
            .push(s.symbol.name.clone());
    }
    out
}

/// Whether `name` may name an in-kernel subroutine: a label of the original object
/// (`label_names`: the names of [`labels`]) or `KERNEL+0xOFFSET` with a kernel of the object (`symbols`, as
/// `FuncmapInfo::symbols`). Where the scope is entered is checked separately.
pub(super) fn may_name(
    name: &str,
    label_names: &HashSet<&str>,
    symbols: &HashMap<String, (bool, u64)>,
) -> bool {
    let offset = name.rsplit_once("+0x").is_some_and(|(k, off)| {
        symbols.get(k).is_some_and(|s| s.0) && u64::from_str_radix(off, 16).is_ok()
    });
    offset || label_names.contains(name)
}
