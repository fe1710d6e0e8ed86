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
    /// Index of the entry in its bundle's header (0 for a bare code object or an offload image).
    pub entry_index: usize,
    /// Offset of the code object from the start of its bundle (the plain bundle: decompressed
    /// for a CCOB) or of its offload binary; 0 for a bare code object (bytes).
    pub entry_offset: u64,
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

    /// Where the code object lies, for messages: `bundle B entry E (ID) at file offset 0x..`
    /// (for a compressed bundle: the offset in the decompressed bundle and the bundle's file
    /// offset); empty for a bare code object.
    pub fn location(&self) -> String {
        if self.id.is_empty() {
            return String::new();
        }
        match &self.storage {
            None => format!(
                "offload binary {} image {} at file offset {:#x}",
                self.bundle_index,
                self.id,
                self.bundle_offset + self.entry_offset
            ),
            Some(st) => entry_location(
                self.bundle_index,
                self.entry_index,
                &self.id,
                self.bundle_offset,
                self.entry_offset,
                st,
            ),
        }
    }
}

/// Why `data`, a bundle entry or offload image whose id names an AMDGPU target, is not an
/// AMDGPU code object at first sight (ELF magic, `ELFCLASS64`, `e_machine` `EM_AMDGPU`); `None`
/// when it may be one (the full checks are [`crate::CodeObject::parse`]'s). An entry offset
/// that points at other bytes of the bundle gives such an entry (session-20 fresh tester:
/// `extract` wrote it out as a `.co` file).
pub fn code_object_problem(data: &[u8]) -> Option<String> {
    if !data.starts_with(b"\x7fELF") {
        let head: Vec<String> = data.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Some(if head.is_empty() {
            "not an ELF file: it is empty".into()
        } else {
            format!(
                "not an ELF file: it starts with {} instead of 7f 45 4c 46 (\\x7fELF)",
                head.join(" ")
            )
        });
    }
    if elf::is_elf32(data) {
        return Some(crate::Error::Elf32.to_string());
    }
    match data.get(4) {
        Some(2) => {}
        Some(v) => return Some(format!("not an ELF64 file (EI_CLASS {v} at offset 0x4)")),
        None => {
            return Some(format!(
                "a truncated ELF file ({} bytes, no EI_CLASS at offset 0x4)",
                data.len()
            ))
        }
    }
    match data.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]])) {
        Some(elf::EM_AMDGPU) => None,
        Some(m) => Some(format!(
            "an ELF file with e_machine {m} (at offset 0x12), not EM_AMDGPU ({})",
            elf::EM_AMDGPU
        )),
        None => Some(format!(
            "an ELF file of {} bytes, too short for its header",
            data.len()
        )),
    }
}

/// `bundle B entry E (ID) at ...`: the file offset of a plain bundle's entry, or the entry's
/// offset in a compressed bundle once decompressed and that bundle's file offset.
fn entry_location(bi: usize, ei: usize, id: &str, bundle: u64, entry: u64, st: &Storage) -> String {
    match st {
        Storage::Plain => format!(
            "bundle {bi} entry {ei} ({id}) at file offset {:#x}",
            bundle + entry
        ),
        Storage::Compressed(_) => format!(
            "bundle {bi} entry {ei} ({id}) at offset {entry:#x} of the compressed bundle at file offset {bundle:#x} (once decompressed)"
        ),
    }
}

/// A bundle entry [`open_listing`] did not return as a code object although it may hold one:
/// its id is malformed, or it is an AMDGPU entry of size 0 ([`bundle::entry_problem`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedEntry {
    /// Index of the bundle in the file.
    pub bundle_index: usize,
    /// Index of the entry in the bundle's header.
    pub entry_index: usize,
    /// The entry's id as stored.
    pub id: String,
    /// File offset of the bundle (bytes).
    pub bundle_offset: u64,
    /// Offset of the entry from the start of the (plain or decompressed) bundle (bytes).
    pub entry_offset: u64,
    /// How the bundle is stored.
    pub storage: Storage,
    /// Size of the entry (bytes).
    pub size: u64,
    /// Why the entry was not read.
    pub why: String,
}

impl MalformedEntry {
    /// Where the entry lies, as [`Embedded::location`].
    pub fn location(&self) -> String {
        entry_location(
            self.bundle_index,
            self.entry_index,
            &self.id,
            self.bundle_offset,
            self.entry_offset,
            &self.storage,
        )
    }
}

/// Everything [`open_listing`] finds in an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Kind of input.
    pub kind: InputKind,
    /// Every embedded AMDGPU code object, as [`open`] returns them.
    pub objects: Vec<Embedded>,
    /// Bundle entries left out because their ids are malformed or they are empty AMDGPU entries
    /// (in file order).
    pub malformed: Vec<MalformedEntry>,
}

/// Opens any supported input and returns its kind and every embedded AMDGPU code object
/// (host entries, entries of other targets and entries with malformed ids are skipped: see
/// [`open_listing`] for the latter). `limit` bounds each decompression (bytes).
/// Errors: [`Error::UnknownFormat`] for unknown formats, and the errors of the readers used.
pub fn open(data: &[u8], limit: u64) -> Result<(InputKind, Vec<Embedded>)> {
    let l = open_listing(data, limit)?;
    Ok((l.kind, l.objects))
}

/// [`open`], also listing the bundle entries left out because their ids are malformed
/// or that are empty AMDGPU entries ([`bundle::entry_problem`]), for the commands that name
/// them. Errors: as [`open`].
pub fn open_listing(data: &[u8], limit: u64) -> Result<Listing> {
    let mut l = Listing {
        kind: InputKind::Bundle,
        objects: Vec::new(),
        malformed: Vec::new(),
    };
    if bundle::is_bundle(data) {
        for (bi, b) in bundle::parse_all(data, 0, limit)?.into_iter().enumerate() {
            push_entries(&mut l, bi, &b, None);
        }
        return Ok(l);
    }
    if offload::is_offload_binary(data) {
        push_offload(&mut l.objects, offload::parse_all(data, 0)?);
        return Ok(l);
    }
    l.kind = InputKind::Host;
    if crate::pe::is_pe(data) {
        for (bi, f) in crate::pe::find_fatbins(data, limit)?
            .into_iter()
            .enumerate()
        {
            push_entries(&mut l, bi, &f.bundle, f.wrapper_offset);
        }
        return Ok(l);
    }
    if !data.starts_with(b"\x7fELF") {
        return Err(Error::UnknownFormat {
            len: data.len() as u64,
        });
    }
    let e = elf::Elf::parse(data)?;
    match e.header.e_machine {
        elf::EM_AMDGPU => {
            l.kind = InputKind::CodeObject;
            l.objects.push(Embedded {
                bundle_index: 0,
                id: String::new(),
                entry_index: 0,
                entry_offset: 0,
                bundle_offset: 0,
                storage: None,
                wrapper_offset: None,
                data: data.to_vec(),
            });
            Ok(l)
        }
        elf::EM_X86_64 => {
            for (bi, f) in crate::host::find_fatbins(data, limit)?
                .into_iter()
                .enumerate()
            {
                push_entries(&mut l, bi, &f.bundle, f.wrapper_offset);
            }
            for s in e.sections.iter().filter(|s| s.name == offload::SECTION) {
                push_offload(
                    &mut l.objects,
                    offload::parse_all(e.section_data(data, s), s.offset)?,
                );
            }
            Ok(l)
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
                entry_index: 0,
                entry_offset: img.image_offset.saturating_sub(img.binary_offset),
                bundle_offset: img.binary_offset,
                storage: None,
                wrapper_offset: None,
                data: img.data,
            });
        }
    }
}

fn push_entries(l: &mut Listing, bi: usize, b: &bundle::Bundle, wrapper: Option<u64>) {
    for (ei, en) in b.entries.iter().enumerate() {
        if let Some(why) = bundle::entry_problem(&en.id, &en.data) {
            l.malformed.push(MalformedEntry {
                bundle_index: bi,
                entry_index: ei,
                id: en.id.clone(),
                bundle_offset: b.offset,
                entry_offset: en.offset,
                storage: b.storage.clone(),
                size: en.data.len() as u64,
                why,
            });
            continue;
        }
        if !en.is_amdgcn() || en.data.is_empty() {
            continue;
        }
        l.objects.push(Embedded {
            bundle_index: bi,
            id: en.id.clone(),
            entry_index: ei,
            entry_offset: en.offset,
            bundle_offset: b.offset,
            storage: Some(b.storage.clone()),
            wrapper_offset: wrapper,
            data: en.data.clone(),
        });
    }
}
