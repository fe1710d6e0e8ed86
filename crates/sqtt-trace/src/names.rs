//! String interning for marker, kernel and frame names, so per-record work handles `u32`s.

use std::collections::HashMap;

/// Index of an interned name.
pub type NameId = u32;

/// Interned names (append-only).
#[derive(Debug, Default, Clone)]
pub struct Names {
    list: Vec<String>,
    map: HashMap<String, NameId>,
}

impl Names {
    /// Returns the id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> NameId {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.list.len() as NameId;
        self.list.push(s.to_string());
        self.map.insert(s.to_string(), id);
        id
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when no name was interned.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The name of `id` (empty for an id this table never gave out).
    pub fn get(&self, id: NameId) -> &str {
        self.list.get(id as usize).map_or("", String::as_str)
    }

    /// The name of `id`, demangled (Itanium ABI) when `demangle` and the name is mangled.
    pub fn display(&self, id: NameId, demangle: bool) -> String {
        let n = self.get(id);
        if demangle {
            demangle_name(n)
        } else {
            n.to_string()
        }
    }
}

/// Demangles an Itanium C++ name; other names come back unchanged.
pub fn demangle_name(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}
