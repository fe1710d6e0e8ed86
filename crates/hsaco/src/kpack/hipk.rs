//! The host side of kpack: x86-64 executables and shared libraries whose device code was moved
//! into `.kpack` archives.
//!
//! Facts (ROCm/rocm-kpack `python/rocm_kpack/elf/kpack_transform.py`, `runtime/src/loader.cpp`,
//! `runtime/src/isa_target_match.h`; CLR `ExtractKpackBinary`, ROCm/rocm-systems PR 2622 and
//! PR 6943):
//! - `.hip_fatbin` is left `SHT_NOBITS`; every 24-byte wrapper of `.hipFatBinSegment` gets the
//!   magic `HIPK` (0x4B504948), its binary pointer (offset 8; an `R_X86_64_RELATIVE` addend in
//!   PIC) points at a msgpack map `{"kernel_name": str, "kpack_search_paths": [str]}` (in a
//!   `.rocm_kpack_ref` section), and its reserved field (offset 16, low 32 bits) holds the
//!   wrapper's index in the table: the code object index;
//! - the loader looks up TOC key `kernel_name#index` under the device's architecture. Archives
//!   it tries: `ROCM_KPACK_PATH` (`:`-separated archive paths) alone when set; else the
//!   `ROCM_KPACK_PATH_PREFIX` paths, then each search path resolved against the binary's
//!   directory (absolute paths as they are), `@GFXARCH@` replaced by the device's target ID and
//!   each of its feature-subset forms, most specific first (`gfx942:sramecc+:xnack-`,
//!   `gfx942:sramecc+`, `gfx942:xnack-`, `gfx942`). Missing files are skipped.

use std::path::{Component, Path, PathBuf};

use rmpv::Value;

use super::read::map_get;
use crate::elf::{self, Elf, SHT_NOBITS};
use crate::error::{Error, Result};
use crate::host::{PointerKind, HIPF_MAGIC};
use crate::source::Source;

/// Wrapper magic of a kpack-split binary (`HIPK`, little-endian).
pub const HIPK_MAGIC: u32 = 0x4B50_4948;
/// Placeholder of search paths replaced by a target ID.
pub const GFXARCH: &str = "@GFXARCH@";
/// Most bytes of metadata read at a wrapper's pointer (the reference loader's bound, bytes).
pub const MAX_METADATA: u64 = 64 * 1024;

/// One HIPK wrapper and its metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HipkWrapper {
    /// Index of the wrapper in `.hipFatBinSegment`.
    pub index: usize,
    /// File offset of the wrapper (bytes).
    pub wrapper_offset: u64,
    /// Code object index (reserved field, offset 16).
    pub co_index: u32,
    /// How the metadata pointer is stored.
    pub pointer: PointerKind,
    /// Virtual address of the metadata.
    pub metadata_addr: u64,
    /// File offset of the metadata (bytes).
    pub metadata_offset: u64,
    /// `kernel_name` (binary key without the index).
    pub kernel_name: String,
    /// `kpack_search_paths`, as written.
    pub search_paths: Vec<String>,
}

impl HipkWrapper {
    /// TOC binary key the loader looks up: `kernel_name#co_index`.
    pub fn lookup_key(&self) -> String {
        format!("{}#{}", self.kernel_name, self.co_index)
    }
}

fn bad(what: &'static str, offset: u64, detail: impl Into<String>) -> Error {
    Error::Malformed {
        what,
        offset,
        detail: detail.into(),
    }
}

/// File offset of `addr`: in a file-backed section containing it, else in a `PT_LOAD`'s file
/// part; with the bytes available from there to the end of that section or segment.
fn locate(e: &Elf, addr: u64) -> Option<(u64, u64)> {
    for s in &e.sections {
        if s.sh_type != SHT_NOBITS && s.sh_type != 0 && s.contains_addr(addr) {
            return Some((s.offset + (addr - s.addr), s.size - (addr - s.addr)));
        }
    }
    e.segments
        .iter()
        .find(|p| p.p_type == elf::PT_LOAD && addr >= p.vaddr && addr - p.vaddr < p.filesz)
        .map(|p| (p.offset + (addr - p.vaddr), p.filesz - (addr - p.vaddr)))
}

/// Every HIPK wrapper of an x86-64 host ELF; empty when its wrappers are `HIPF` (or it has
/// none). Errors: ELF errors; [`Error::Malformed`] naming the offset for a table mixing `HIPF`
/// and `HIPK` wrappers, a metadata pointer outside the file, or metadata that is not the
/// documented msgpack map.
pub fn scan<S: Source + ?Sized>(src: &S) -> Result<Vec<HipkWrapper>> {
    let e = Elf::read(src)?;
    let mut out = Vec::new();
    let mut hipf = None;
    for w in crate::hostptr::read_wrappers(src, &e, &[".hipFatBinSegment"])? {
        let (o, ptr) = (w.offset, w.pointer);
        if w.magic == HIPF_MAGIC {
            hipf.get_or_insert(o);
            continue;
        }
        if w.magic != HIPK_MAGIC {
            continue;
        }
        let (moff, avail) = locate(&e, ptr).ok_or_else(|| {
            bad(
                "HIPK wrapper",
                o + 8,
                format!("metadata pointer {ptr:#x} is not inside the file"),
            )
        })?;
        let bytes = src.read_at(moff, avail.min(MAX_METADATA), "HIPK metadata")?;
        let (kernel_name, search_paths) = parse_metadata(&bytes, moff)?;
        out.push(HipkWrapper {
            index: w.index,
            wrapper_offset: o,
            co_index: w.reserved as u32,
            pointer: w.kind,
            metadata_addr: ptr,
            metadata_offset: moff,
            kernel_name,
            search_paths,
        });
    }
    if let (Some(f), Some(k)) = (hipf, out.first()) {
        return Err(bad(
            "fat binary wrapper",
            f,
            format!(
                "HIPF wrapper in a table whose wrapper at {:#x} is HIPK: mixed tables are not supported",
                k.wrapper_offset
            ),
        ));
    }
    Ok(out)
}

/// Parses HIPK metadata at file offset `at`: `(kernel_name, kpack_search_paths)`. Errors:
/// [`Error::Malformed`] for something other than a map with a string `kernel_name` and a
/// non-empty array of strings `kpack_search_paths`.
pub fn parse_metadata(bytes: &[u8], at: u64) -> Result<(String, Vec<String>)> {
    let what = "HIPK metadata";
    let mut rd = bytes;
    let v =
        rmpv::decode::read_value(&mut rd).map_err(|e| bad(what, at, format!("msgpack: {e}")))?;
    let name = map_get(&v, "kernel_name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(what, at, format!("no string `kernel_name` in {v}")))?;
    let paths = map_get(&v, "kpack_search_paths")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(what, at, "no `kpack_search_paths` array"))?;
    let paths: Vec<String> = paths
        .iter()
        .map(|p| p.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| bad(what, at, "a `kpack_search_paths` item is not a string"))?;
    if paths.is_empty() {
        return Err(bad(what, at, "`kpack_search_paths` is empty"));
    }
    Ok((name.to_string(), paths))
}

/// The target IDs a device of `target` loads, most specific first: the target itself, then
/// every subset of its feature settings dropping from the right first (`gfx942:sramecc+:xnack-`
/// gives itself, `gfx942:sramecc+`, `gfx942:xnack-`, `gfx942`). An `amdgcn-amd-amdhsa--` prefix
/// is ignored.
pub fn compatible_targets(target: &str) -> Vec<String> {
    let t = target.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(target);
    let mut parts = t.split(':').filter(|p| !p.is_empty());
    let proc = parts.next().unwrap_or_default();
    let feats: Vec<&str> = parts.collect();
    let n = feats.len().min(16);
    (0..1u32 << n)
        .rev()
        .map(|mask| {
            let mut s = proc.to_string();
            for (i, f) in feats.iter().take(n).enumerate() {
                if mask & (1 << (n - 1 - i)) != 0 {
                    s.push(':');
                    s.push_str(f);
                }
            }
            s
        })
        .collect()
}

/// A search path resolved as the loader does: absolute as written, else against the directory
/// of `binary`, then `.` and `..` removed lexically (the loader also resolves symbolic links of
/// the part that exists; the result is the same file).
pub fn resolve(binary: &Path, search_path: &str) -> PathBuf {
    let p = Path::new(search_path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        binary.parent().unwrap_or(Path::new("")).join(p)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            c => out.push(c),
        }
    }
    out
}
