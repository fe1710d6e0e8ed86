//! Remaps the DWARF of an AMDGPU code object (ELF64 `EM_AMDGPU`, little endian, 8-byte
//! addresses; DWARF 5 from clang 22, DWARF 4 from older producers such as Triton) after its
//! `.text` was re-laid out by inserting instructions, so that every code address moves.
//!
//! # Strategy
//!
//! Patch in place wherever the encoded size cannot change, regenerate only what must grow, and
//! keep everything else byte for byte (abbreviations, strings, DIE layout and therefore every DIE
//! reference, `.debug_names`, `.debug_str_offsets`):
//!
//! | section | treatment |
//! |---|---|
//! | `.debug_addr` | every entry inside the code interval mapped in place |
//! | `.debug_info` | `DW_FORM_addr` values mapped in place; `DW_AT_high_pc`/`DW_AT_entry_pc` constants recomputed as `new(low + len) - new(low)` in place at the same width (`DW_FORM_udata` padded); `DW_FORM_addrx*` code addresses checked; section offsets into resized sections (`DW_AT_stmt_list`, list `DW_FORM_sec_offset`, `DW_AT_rnglists_base`, `DW_AT_loclists_base`) rewritten; `DW_OP_addr` in `DW_FORM_exprloc` mapped |
//! | `.debug_line` | programs decoded to rows (gimli) and re-encoded row by row; headers copied |
//! | `.debug_rnglists`, `.debug_loclists` | re-encoded entry by entry (ULEB offsets grow); offset tables rebuilt |
//! | `.debug_ranges`, `.debug_loc` | fixed-size pairs mapped in place |
//! | `.debug_frame` | rebuilt: FDE location/range mapped, `DW_CFA_advance_loc*` re-encoded |
//! | `.debug_aranges` | tuples mapped in place |
//!
//! gimli's writer (`write::Dwarf::from`) was not used: it re-encodes all of `.debug_info`, does
//! not apply the address callback to offsets (high_pc lengths, offset pairs), and rejects the
//! AMDGPU `DW_OP_LLVM_user` expressions clang emits.
//!
//! # Address rules
//!
//! Code addresses are those inside the [`AddressMap`]'s interval. An address in a code context
//! (`low_pc`, `high_pc`, `entry_pc`, `call_return_pc`, `call_pc`, range/location list bounds,
//! line rows, FDEs, aranges) that cannot be mapped is an [`Error::Unmapped`], except the
//! tombstones 0, -1 and -2 (32- and 64-bit), which are kept. Base addresses outside the code
//! interval (a compile unit's `DW_AT_low_pc` of 0 next to `DW_AT_ranges`) are kept; offsets from
//! them are mapped as absolute addresses. Addresses in non-code contexts (`.debug_addr` entries
//! of `__device__` variables, `DW_OP_addr` of data) are mapped only when they are inside the code
//! interval.
//!
//! Everything not understood (DWARF 2/3 units, split/`.dwo` sections, `.debug_types`, unknown
//! forms, opcodes, list entry kinds, augmentations) is a typed [`Error`]: the caller must then
//! leave the object unchanged.

mod addr;
mod aranges;
mod bytes;
mod expr;
mod frame;
mod info;
pub mod inlined;
mod line;
mod lists;
pub mod locations;
mod map;

use std::collections::HashMap;

pub use inlined::{inlined_scopes, InlinedScope};
pub use locations::{function_locations, inline_chain, render_chain, LocationIndex, SourceLoc};
pub use map::AddressMap;

/// Errors; `offset` is a byte offset into the named section of the *original* object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// [`AddressMap::new`] without pairs.
    #[error("address map has no pairs")]
    EmptyMap,
    /// [`AddressMap::new`] pairs not strictly increasing.
    #[error("address map pair {index} ({old:#x} -> {new:#x}) does not follow ({prev_old:#x} -> {prev_new:#x}) strictly increasing")]
    NotMonotonic {
        /// Index of the offending pair.
        index: usize,
        /// Its old address.
        old: u64,
        /// Its new address.
        new: u64,
        /// Previous old address.
        prev_old: u64,
        /// Previous new address.
        prev_new: u64,
    },
    /// A section ends inside a structure.
    #[error("{section}+{offset:#x}: truncated")]
    Truncated {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
    },
    /// gimli could not parse a structure.
    #[error("{section}+{offset:#x}: {source}")]
    Gimli {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
        /// gimli's error.
        source: gimli::Error,
    },
    /// A code address the map does not cover.
    #[error("{section}+{offset:#x}: code address {address:#x} is not covered by the address map")]
    Unmapped {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
        /// The old address.
        address: u64,
    },
    /// A DWARF 5 contribution header (`.debug_addr`, `.debug_str_offsets`) that a unit's
    /// `DW_AT_addr_base` / `DW_AT_str_offsets_base` points behind is not a valid header for that
    /// unit (DWARF 5 sections 7.27 and 7.26): its indexed addresses or names would be garbage.
    #[error("{section}+{offset:#x}: {what}")]
    BadContribution {
        /// Section name.
        section: &'static str,
        /// Byte offset of the header.
        offset: u64,
        /// What is wrong, naming the unit.
        what: String,
    },
    /// A construct this crate does not remap.
    #[error("{section}+{offset:#x}: unsupported {what}")]
    Unsupported {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
        /// What was found.
        what: String,
    },
    /// A recomputed value does not fit its fixed-size field.
    #[error("{section}+{offset:#x}: value {value:#x} does not fit in {size} bytes")]
    Overflow {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
        /// The value.
        value: u64,
        /// Field size in bytes.
        size: usize,
    },
    /// Mapped addresses that should increase decrease (range end before start).
    #[error("{section}+{offset:#x}: mapped address {address:#x} goes backwards")]
    Backwards {
        /// Section name.
        section: &'static str,
        /// Byte offset.
        offset: u64,
        /// The new address.
        address: u64,
    },
    /// A section offset that does not point at a unit or list start of a re-laid-out section.
    #[error(
        "{section}+{offset:#x}: offset {target:#x} does not point at the start of a unit or list"
    )]
    DanglingOffset {
        /// Section name.
        section: &'static str,
        /// Byte offset of the reference.
        offset: u64,
        /// The old target offset.
        target: u64,
    },
    /// The ELF file could not be read.
    #[error("ELF: {0}")]
    Elf(#[from] object::read::Error),
}

/// Tombstone values linkers write for discarded code (0, -1, -2 in 32 or 64 bits).
pub(crate) fn is_not_code(a: u64) -> bool {
    matches!(
        a,
        0 | 0xffff_fffe | 0xffff_ffff | 0xffff_ffff_ffff_fffe | 0xffff_ffff_ffff_ffff
    )
}

/// Maps a code address; tombstones are kept; anything else unmapped is an error.
pub(crate) fn map_code(
    map: &AddressMap,
    a: u64,
    section: &'static str,
    offset: usize,
) -> Result<u64, Error> {
    match map.map(a) {
        Some(n) => Ok(n),
        None if is_not_code(a) => Ok(a),
        None => Err(Error::Unmapped {
            section,
            offset: offset as u64,
            address: a,
        }),
    }
}

/// Sections without code addresses or offsets into resized sections.
const PASSIVE: &[&str] = &[
    ".debug_abbrev",
    ".debug_str",
    ".debug_line_str",
    ".debug_str_offsets",
    ".debug_names",
    ".debug_pubnames",
    ".debug_pubtypes",
    ".debug_gnu_pubnames",
    ".debug_gnu_pubtypes",
    ".debug_macinfo",
    ".debug_macro",
];

/// Handled sections.
const ACTIVE: &[&str] = &[
    ".debug_info",
    ".debug_addr",
    ".debug_line",
    ".debug_rnglists",
    ".debug_loclists",
    ".debug_ranges",
    ".debug_loc",
    ".debug_frame",
    ".debug_aranges",
];

/// Rewrites every DWARF section that holds code addresses.
///
/// `sections`: section name (e.g. `.debug_info`) -> contents, for all `.debug_*` sections of the
/// original object (uncompressed). Returns new contents for each section that changed; a
/// section not in the result keeps its bytes. Any `.debug_*` section not known to be free of
/// code addresses and not handled here is an [`Error::Unsupported`].
pub fn remap_dwarf(
    sections: &HashMap<String, Vec<u8>>,
    map: &AddressMap,
) -> Result<HashMap<String, Vec<u8>>, Error> {
    remap(sections, map, false).map(|r| r.sections)
}

/// What [`remap_dwarf_or_drop`] did.
#[derive(Debug, Default)]
pub struct Remapped {
    /// New contents of each section that changed (an emptied section among them).
    pub sections: HashMap<String, Vec<u8>>,
    /// The sections emptied because they could not be remapped, each with the error.
    pub dropped: Vec<(String, Error)>,
}

/// [`remap_dwarf`], except that a section nothing else refers to by offset (`.debug_frame`,
/// `.debug_aranges`: DWARF 5 sections 6.4 and 6.1.2; `.debug_info` does not point into them)
/// that cannot be remapped is emptied (its contents become zero bytes: no entries, nothing
/// stale) and listed in [`Remapped::dropped`] instead of failing the whole remap. Errors in the
/// other sections are still errors (they refer to each other: dropping one would leave
/// dangling offsets in the rest).
pub fn remap_dwarf_or_drop(
    sections: &HashMap<String, Vec<u8>>,
    map: &AddressMap,
) -> Result<Remapped, Error> {
    remap(sections, map, true)
}

/// [`remap_dwarf`] / [`remap_dwarf_or_drop`] (`drop`).
fn remap(
    sections: &HashMap<String, Vec<u8>>,
    map: &AddressMap,
    drop: bool,
) -> Result<Remapped, Error> {
    for name in sections.keys() {
        if name.starts_with(".debug")
            && !PASSIVE.contains(&name.as_str())
            && !ACTIVE.contains(&name.as_str())
        {
            return Err(Error::Unsupported {
                section: "(section list)",
                offset: 0,
                what: format!("DWARF section {name}"),
            });
        }
    }
    let get = |n: &str| sections.get(n).map_or(&[][..], |v| v.as_slice());
    let addr_old = get(".debug_addr");
    let inputs = info::InfoInputs {
        abbrev: get(".debug_abbrev"),
        addr: addr_old,
        rnglists: get(".debug_rnglists"),
        loclists: get(".debug_loclists"),
    };
    let mut info_out = info::walk(get(".debug_info"), &inputs, map)?;
    let addr_size = info_out.addr_size.unwrap_or(8);
    // The sections below read only the input and `.debug_info`'s list references: they are
    // rewritten in parallel, and their errors reported in this fixed order (the first wins).
    let refs = &info_out.refs;
    let ((rng, loc), (line, (addr, rest))) = rayon::join(
        || {
            rayon::join(
                || {
                    lists::rewrite5(
                        get(".debug_rnglists"),
                        info::ListKind::RngLists,
                        refs,
                        addr_old,
                        map,
                    )
                },
                || {
                    lists::rewrite5(
                        get(".debug_loclists"),
                        info::ListKind::LocLists,
                        refs,
                        addr_old,
                        map,
                    )
                },
            )
        },
        || {
            rayon::join(
                || line::rewrite(get(".debug_line"), map, addr_size),
                || {
                    let addr = (!addr_old.is_empty()).then(|| addr::remap(addr_old, map));
                    let rest = [
                        (".debug_ranges", info::ListKind::Ranges),
                        (".debug_loc", info::ListKind::Loc),
                    ]
                    .map(|(name, kind)| lists::patch4(get(name), kind, refs, map));
                    let frame = frame::rewrite(get(".debug_frame"), map, usize::from(addr_size));
                    let aranges = aranges::remap(get(".debug_aranges"), map);
                    (addr, (rest, frame, aranges))
                },
            )
        },
    );
    let mut new: HashMap<&'static str, Vec<u8>> = HashMap::new();
    if let Some(addr) = addr {
        new.insert(addr::SECTION, addr?);
    }
    let (line, rng, loc) = (line?, rng?, loc?);
    for p in &info_out.patches {
        let target_map = match p.kind {
            info::OffsetKind::Line => &line.offsets,
            info::OffsetKind::RngList => &rng.lists,
            info::OffsetKind::LocList => &loc.lists,
            info::OffsetKind::RngBase => &rng.bases,
            info::OffsetKind::LocBase => &loc.bases,
        };
        let v = *target_map.get(&p.old).ok_or(Error::DanglingOffset {
            section: info::SECTION,
            offset: p.pos as u64,
            target: p.old,
        })?;
        bytes::put_uint(&mut info_out.bytes, p.pos, p.size, v, info::SECTION)?;
    }
    new.insert(info::SECTION, info_out.bytes);
    new.insert(line::SECTION, line.bytes);
    new.insert(".debug_rnglists", rng.bytes);
    new.insert(".debug_loclists", loc.bytes);
    let ([ranges, loc4], frame, aranges) = rest;
    new.insert(".debug_ranges", ranges?);
    new.insert(".debug_loc", loc4?);
    let mut dropped = Vec::new();
    for (name, r) in [(frame::SECTION, frame), (aranges::SECTION, aranges)] {
        match r {
            Ok(bytes) => {
                new.insert(name, bytes);
            }
            Err(e) if drop => {
                new.insert(name, Vec::new());
                dropped.push((name.to_string(), e));
            }
            Err(e) => return Err(e),
        }
    }

    Ok(Remapped {
        sections: new
            .into_iter()
            .filter(|(name, bytes)| get(name) != bytes.as_slice())
            .map(|(name, bytes)| (name.to_string(), bytes))
            .collect(),
        dropped,
    })
}

/// Collects the `.debug_*` sections of an ELF file (name -> contents), the input of
/// [`remap_dwarf`]. Compressed sections (`SHF_COMPRESSED`) are an [`Error::Elf`] (the
/// workspace builds `object` without decompression support).
pub fn read_debug_sections(elf: &[u8]) -> Result<HashMap<String, Vec<u8>>, Error> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(elf)?;
    let mut out = HashMap::new();
    for s in file.sections() {
        let name = s.name()?;
        if name.starts_with(".debug") {
            let data = s.uncompressed_data()?;
            out.insert(name.to_string(), data.into_owned());
        }
    }
    Ok(out)
}
