//! One entry point for any input file: a bare code object, a bundle file (plain, CCOB, or several
//! concatenated), a file of LLVM offload binaries, or an x86-64 host ELF with HIP fat binaries
//! or a `.llvm.offloading` section (new offload driver), or a Windows PE32+ image with HIP fat
//! binaries (`.hipFatB` / `.hip_fat`, read only).

use crate::bundle::{self, Storage};
use crate::elf;
use crate::error::{Error, Result};
use crate::offload;

/// Kind of input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum InputKind {
    /// A bare AMDGPU code object.
    CodeObject,
    /// One or more offload bundles, or LLVM offload binaries (`clang-offload-packager`).
    Bundle,
    /// A host ELF, or a Windows PE image with HIP fat binaries.
    Host,
}

/// A code object embedded in the input (for a bare code object: the whole file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedded {
    /// Index of the bundle in the file (0 for a bare code object).
    pub bundle_index: usize,
    /// Entry id (`hipv4-amdgcn-amd-amdhsa--gfx942...`; empty for a bare code object).
    pub id: String,
    /// File offset of the bundle (bytes).
    pub bundle_offset: u64,
    /// How the bundle is stored (`None` for a bare code object).
    pub storage: Option<Storage>,
    /// File offset of the host wrapper, for host ELFs.
    pub wrapper_offset: Option<u64>,
    /// The code object bytes.
    pub data: Vec<u8>,
}

impl Embedded {
    /// File name used by `sqtt-patch extract`: `<bundle-index>-<id sanitized>.co` (characters
    /// outside `[A-Za-z0-9._-]` become `_`).
    pub fn file_name(&self) -> String {
        let id = if self.id.is_empty() {
            "code-object"
        } else {
            &self.id
        };
        let clean: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}-{}.co", self.bundle_index, clean)
    }
}

/// Opens any supported input and returns its kind and every embedded AMDGPU code object
/// (host entries and non-amdgcn entries are skipped). `limit` bounds each decompression (bytes).
/// Errors: [`Error::NotElf`] for unknown formats, and the errors of the readers used.
pub fn open(data: &[u8], limit: u64) -> Result<(InputKind, Vec<Embedded>)> {
    if bundle::is_bundle(data) {
        let mut out = Vec::new();
        for (bi, b) in bundle::parse_all(data, 0, limit)?.into_iter().enumerate() {
            push_entries(&mut out, bi, &b, None);
        }
        return Ok((InputKind::Bundle, out));
    }
    if offload::is_offload_binary(data) {
        let mut out = Vec::new();
        push_offload(&mut out, offload::parse_all(data, 0)?);
        return Ok((InputKind::Bundle, out));
    }
    if crate::pe::is_pe(data) {
        let mut out = Vec::new();
        for (bi, f) in crate::pe::find_fatbins(data, limit)?
            .into_iter()
            .enumerate()
        {
            push_entries(&mut out, bi, &f.bundle, f.wrapper_offset);
        }
        return Ok((InputKind::Host, out));
    }
    let e = elf::Elf::parse(data)?;
    match e.header.e_machine {
        elf::EM_AMDGPU => Ok((
            InputKind::CodeObject,
            vec![Embedded {
                bundle_index: 0,
                id: String::new(),
                bundle_offset: 0,
                storage: None,
                wrapper_offset: None,
                data: data.to_vec(),
            }],
        )),
        elf::EM_X86_64 => {
            let mut out = Vec::new();
            for (bi, f) in crate::host::find_fatbins(data, limit)?
                .into_iter()
                .enumerate()
            {
                push_entries(&mut out, bi, &f.bundle, f.wrapper_offset);
            }
            for s in e.sections.iter().filter(|s| s.name == offload::SECTION) {
                push_offload(
                    &mut out,
                    offload::parse_all(e.section_data(data, s), s.offset)?,
                );
            }
            Ok((InputKind::Host, out))
        }
        m => Err(Error::WrongMachine {
            found: m,
            expected: elf::EM_AMDGPU,
        }),
    }
}

/// Appends the AMDGPU code objects of offload binaries; each binary gets the next index after
/// the last one used (bundles of the same host come first).
fn push_offload(out: &mut Vec<Embedded>, images: Vec<offload::OffloadImage>) {
    let first = out.last().map_or(0, |e| e.bundle_index + 1);
    for (next, img) in (first..).zip(images) {
        if img.is_amdgcn_code_object() {
            out.push(Embedded {
                bundle_index: next,
                id: img.id(),
                bundle_offset: img.binary_offset,
                storage: None,
                wrapper_offset: None,
                data: img.data,
            });
        }
    }
}

fn push_entries(out: &mut Vec<Embedded>, bi: usize, b: &bundle::Bundle, wrapper: Option<u64>) {
    for en in b
        .entries
        .iter()
        .filter(|en| en.is_amdgcn() && !en.data.is_empty())
    {
        out.push(Embedded {
            bundle_index: bi,
            id: en.id.clone(),
            bundle_offset: b.offset,
            storage: Some(b.storage.clone()),
            wrapper_offset: wrapper,
            data: en.data.clone(),
        });
    }
}
