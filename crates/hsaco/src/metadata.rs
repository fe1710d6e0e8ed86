//! ELF notes and the AMDGPU code object metadata (AMDGPUUsage "Code Object Metadata (V3+)":
//! note name `AMDGPU`, type `NT_AMDGPU_METADATA` = 32, a MessagePack map). Decoded with `rmpv`,
//! which keeps map order and unknown keys so an unchanged tree re-encodes byte-identically.

use crate::error::{Error, Result};
use rmpv::Value;

/// `NT_AMDGPU_METADATA` (AMDGPUUsage "Code Object V3+ Note Records").
pub const NT_AMDGPU_METADATA: u32 = 32;

/// One ELF note record (gABI "Note Section"; name and descriptor padded to 4 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Name without the terminating NUL (e.g. `AMDGPU`).
    pub name: Vec<u8>,
    /// `n_type`.
    pub n_type: u32,
    /// Descriptor bytes.
    pub desc: Vec<u8>,
    /// File offset of the descriptor in the input (bytes); 0 for notes built in memory.
    pub desc_offset: u64,
}

fn align4(x: u64) -> u64 {
    (x + 3) & !3
}

/// Parses every note of a note section whose contents start at file offset `base`.
/// Errors: [`Error::Malformed`] with the offset of the bad record.
pub fn parse_notes(data: &[u8], base: u64) -> Result<Vec<Note>> {
    let mut notes = Vec::new();
    let mut p: u64 = 0;
    let len = data.len() as u64;
    while p < len {
        let bad = |detail: String| Error::Malformed {
            what: "note record",
            offset: base + p,
            detail,
        };
        if len - p < 12 {
            return Err(bad(format!(
                "{} trailing bytes are too few for a note header",
                len - p
            )));
        }
        let namesz = u64::from(crate::error::u32_at(data, p, "n_namesz")?);
        let descsz = u64::from(crate::error::u32_at(data, p + 4, "n_descsz")?);
        let n_type = crate::error::u32_at(data, p + 8, "n_type")?;
        let name_off = p + 12;
        let desc_off = name_off + align4(namesz);
        let end = desc_off.checked_add(align4(descsz)).filter(|&e| e <= len);
        let Some(end) = end else {
            return Err(bad(format!(
                "name size {namesz} / descriptor size {descsz} run past the section end"
            )));
        };
        let mut name = data[name_off as usize..(name_off + namesz) as usize].to_vec();
        if name.last() == Some(&0) {
            name.pop();
        }
        notes.push(Note {
            name,
            n_type,
            desc: data[desc_off as usize..(desc_off + descsz) as usize].to_vec(),
            desc_offset: base + desc_off,
        });
        p = end;
    }
    Ok(notes)
}

/// Encodes notes back into a note section (name NUL-terminated, fields padded to 4 bytes).
pub fn encode_notes(notes: &[Note]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in notes {
        let namesz = n.name.len() + 1;
        out.extend_from_slice(&(namesz as u32).to_le_bytes());
        out.extend_from_slice(&(n.desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&n.n_type.to_le_bytes());
        out.extend_from_slice(&n.name);
        out.push(0);
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out.extend_from_slice(&n.desc);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    }
    out
}

/// The decoded metadata map.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    /// Root value (a map with `amdhsa.version`, `amdhsa.target`, `amdhsa.kernels`, ...).
    pub root: Value,
    /// File offset of the note descriptor in the input (bytes).
    pub offset: u64,
}

fn map_get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Kernel entries of every metadata note of a code object by `.symbol` and `.name`
/// ([`NotesIndex::new`]): Tensile objects carry one note per kernel or two (1,545 notes for
/// 3,090 kernels in a rocBLAS gfx90a library file), so asking each note in turn costs notes x
/// kernels lookups.
#[derive(Debug, Default)]
pub struct NotesIndex<'a> {
    /// First (note, entry) whose `.symbol` is the key, notes in order.
    by_symbol: std::collections::HashMap<&'a str, (usize, usize)>,
    /// First (note, entry) whose `.name` is the key, notes in order.
    by_name: std::collections::HashMap<&'a str, (usize, usize)>,
}

impl<'a> NotesIndex<'a> {
    /// Indexes `notes` (in file order).
    pub fn new(notes: &'a [Metadata]) -> Self {
        let mut out = NotesIndex::default();
        for (ni, m) in notes.iter().enumerate() {
            let ks = map_get(&m.root, "amdhsa.kernels").and_then(Value::as_array);
            for (i, k) in ks.into_iter().flatten().enumerate() {
                if let Some(s) = map_get(k, ".symbol").and_then(Value::as_str) {
                    out.by_symbol.entry(s).or_insert((ni, i));
                }
                if let Some(s) = map_get(k, ".name").and_then(Value::as_str) {
                    out.by_name.entry(s).or_insert((ni, i));
                }
            }
        }
        out
    }

    /// (note index, entry index in its `amdhsa.kernels`) of the kernel called `name`: the first
    /// note, in file order, with an entry whose `.symbol` or `.name` is `name`, and in that
    /// note the first entry by `.symbol`, else by `.name`.
    pub fn get(&self, name: &str) -> Option<(usize, usize)> {
        match (self.by_symbol.get(name), self.by_name.get(name)) {
            (Some(&s), Some(&n)) => Some(if n.0 < s.0 { n } else { s }),
            (s, n) => s.or(n).copied(),
        }
    }
}

impl Metadata {
    /// Decodes a MessagePack descriptor. Errors: [`Error::Metadata`] (bad MessagePack, trailing
    /// bytes, root not a map).
    pub fn decode(desc: &[u8], offset: u64) -> Result<Metadata> {
        let mut cur = desc;
        let root = rmpv::decode::read_value(&mut cur).map_err(|e| Error::Metadata {
            offset,
            detail: format!("MessagePack decode failed: {e}"),
        })?;
        if !cur.is_empty() {
            return Err(Error::Metadata {
                offset,
                detail: format!("{} trailing bytes after the map", cur.len()),
            });
        }
        if root.as_map().is_none() {
            return Err(Error::Metadata {
                offset,
                detail: "root is not a map".into(),
            });
        }
        Ok(Metadata { root, offset })
    }

    /// Encodes the tree (byte-identical to the input when unchanged).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &self.root).map_err(|e| Error::Metadata {
            offset: self.offset,
            detail: format!("MessagePack encode failed: {e}"),
        })?;
        Ok(out)
    }

    /// `amdhsa.target` string, if present.
    pub fn target(&self) -> Option<&str> {
        map_get(&self.root, "amdhsa.target")?.as_str()
    }

    /// Number of entries of `amdhsa.kernels`.
    pub fn kernel_count(&self) -> usize {
        map_get(&self.root, "amdhsa.kernels")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }

    /// Index in `amdhsa.kernels` of the kernel whose `.symbol` (e.g. `k.kd`) or `.name` equals `name`.
    pub fn kernel_index(&self, name: &str) -> Option<usize> {
        let ks = map_get(&self.root, "amdhsa.kernels")?.as_array()?;
        ks.iter()
            .position(|k| map_get(k, ".symbol").and_then(Value::as_str) == Some(name))
            .or_else(|| {
                ks.iter()
                    .position(|k| map_get(k, ".name").and_then(Value::as_str) == Some(name))
            })
    }

    /// Value of `key` (e.g. `.vgpr_count`) in kernel entry `index`.
    pub fn kernel_value(&self, index: usize, key: &str) -> Option<&Value> {
        let k = map_get(&self.root, "amdhsa.kernels")?
            .as_array()?
            .get(index)?;
        map_get(k, key)
    }

    /// Every key and value of kernel entry `index` of `amdhsa.kernels`, in the note's order
    /// (`None` when there is no such entry or it is not a map).
    pub fn kernel_entry(&self, index: usize) -> Option<&[(Value, Value)]> {
        map_get(&self.root, "amdhsa.kernels")?
            .as_array()?
            .get(index)?
            .as_map()
            .map(Vec::as_slice)
    }

    /// Every top-level key and value except `amdhsa.kernels` (`amdhsa.version`,
    /// `amdhsa.target`, `amdhsa.printf`, ...), in the note's order.
    pub fn root_entries(&self) -> Vec<&(Value, Value)> {
        self.root
            .as_map()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != Some("amdhsa.kernels"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Unsigned integer value of `key` in kernel entry `index`.
    pub fn kernel_u64(&self, index: usize, key: &str) -> Option<u64> {
        self.kernel_value(index, key)?.as_u64()
    }

    /// Sets `key` of kernel entry `index` (replacing in place, or appending a new key at the end of
    /// the entry). Errors: [`Error::NotFound`] when the entry does not exist.
    pub fn set_kernel_value(&mut self, index: usize, key: &str, value: Value) -> Result<()> {
        let not_found = || Error::NotFound(format!("amdhsa.kernels[{index}]"));
        let Value::Map(root) = &mut self.root else {
            return Err(not_found());
        };
        let Some((_, Value::Array(ks))) = root
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some("amdhsa.kernels"))
        else {
            return Err(not_found());
        };
        let Some(Value::Map(entry)) = ks.get_mut(index) else {
            return Err(not_found());
        };
        if let Some((_, v)) = entry.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            *v = value;
        } else {
            entry.push((Value::from(key), value));
        }
        Ok(())
    }

    /// Sets an unsigned integer `key` of kernel entry `index` (see [`Metadata::set_kernel_value`]).
    pub fn set_kernel_u64(&mut self, index: usize, key: &str, value: u64) -> Result<()> {
        self.set_kernel_value(index, key, Value::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note whose `amdhsa.kernels` holds one entry per (`.symbol`, `.name`) pair.
    fn note(entries: &[(&str, &str)]) -> Metadata {
        let kernels = entries
            .iter()
            .map(|&(sym, name)| {
                Value::Map(vec![
                    (Value::from(".symbol"), Value::from(sym)),
                    (Value::from(".name"), Value::from(name)),
                ])
            })
            .collect();
        Metadata {
            root: Value::Map(vec![(Value::from("amdhsa.kernels"), Value::Array(kernels))]),
            offset: 0,
        }
    }

    /// The index answers as asking each note in file order would: the first note that names
    /// the kernel by `.symbol` or `.name`, in it `.symbol` before `.name`, first entry first.
    #[test]
    fn notes_index_matches_asking_each_note_in_order() {
        let notes = [
            note(&[("a.kd", "a"), ("b.kd", "x.kd")]),
            note(&[("x.kd", "x"), ("a.kd", "a"), ("c.kd", "c")]),
            note(&[("c.kd", "c2"), ("c.kd", "c3")]),
        ];
        let ix = NotesIndex::new(&notes);
        for name in ["a.kd", "x.kd", "c.kd", "a", "c3", "b.kd", "nope"] {
            let one_by_one = notes
                .iter()
                .enumerate()
                .find_map(|(ni, m)| Some((ni, m.kernel_index(name)?)));
            assert_eq!(ix.get(name), one_by_one, "{name}");
        }
        assert_eq!(
            ix.get("x.kd"),
            Some((0, 1)),
            "a .name in an earlier note wins"
        );
        assert_eq!(ix.get("c.kd"), Some((1, 2)));
        assert_eq!(ix.get("nope"), None);
    }
}
