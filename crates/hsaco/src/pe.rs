//! HIP fat binaries inside Windows PE32+ images (DLLs, `.pyd` Python extensions, executables)
//! built with the HIP SDK for Windows. Read only: writing PE images is not supported.
//!
//! Facts (checked on the `win_amd64` wheel of PyPI's `hip-quant` 2.2.4.post215, whose DLLs and
//! `.pyd` `llvm-objdump-22 -h` lists; Microsoft PE format: "Section Table", "The .reloc
//! Section"): the 24-byte wrappers `{u32 "HIPF", u32 1, u64 pointer, u64 0}` are in section
//! `.hipFatB` and the bundles in `.hip_fat`. A wrapper's pointer is the bundle's absolute
//! virtual address at the preferred `ImageBase` of the optional header; an
//! `IMAGE_REL_BASED_DIR64` base relocation moves it when the image loads elsewhere. The file
//! offset is therefore that of RVA `pointer - ImageBase` in the section holding it.

use object::read::pe::PeFile64;
use object::LittleEndian as LE;

use crate::bundle::parse_one;
use crate::error::{u32_at, u64_at, Error, Result};
use crate::host::{HostFatbin, PointerKind, HIPF_MAGIC};
use crate::hostptr::WRAPPER_SIZE;

/// Name of the wrapper section of PE images.
pub const WRAPPER_SECTION: &[u8] = b".hipFatB";

/// Whether `data` starts like a PE image (`MZ` header whose `e_lfanew` leads to `PE\0\0`,
/// 32- or 64-bit), by `object::FileKind`.
pub fn is_pe(data: &[u8]) -> bool {
    matches!(
        object::FileKind::parse(data),
        Ok(object::FileKind::Pe32 | object::FileKind::Pe64)
    )
}

fn bad(offset: u64, detail: String) -> Error {
    Error::Malformed {
        what: "PE image",
        offset,
        detail,
    }
}

/// Finds every bundle of a PE32+ image through the wrappers of its `.hipFatB` sections, once
/// each (wrappers naming a bundle already found are skipped). `limit` bounds each
/// decompression (bytes). Errors: [`Error::Malformed`] for a PE32 (32-bit) image, headers
/// `object` rejects, a wrapper outside the file or with a bad magic, a pointer below the image
/// base or outside every section's file data (offsets name the wrapper or its pointer field);
/// bundle errors.
pub fn find_fatbins(data: &[u8], limit: u64) -> Result<Vec<HostFatbin>> {
    if matches!(object::FileKind::parse(data), Ok(object::FileKind::Pe32)) {
        return Err(bad(
            0,
            "a 32-bit PE image (PE32): HIP hosts are PE32+ (x64)".into(),
        ));
    }
    let pe = PeFile64::parse(data).map_err(|e| bad(0, format!("cannot parse: {e}")))?;
    let base = pe.nt_headers().optional_header.image_base.get(LE);
    let table = pe.section_table();
    let mut out: Vec<HostFatbin> = Vec::new();
    for ws in table.iter().filter(|s| s.raw_name() == WRAPPER_SECTION) {
        let (start, len) = ws.pe_file_range();
        let (start, len) = (u64::from(start), u64::from(len));
        for i in 0..len / WRAPPER_SIZE {
            let o = start + WRAPPER_SIZE * i;
            let magic = u32_at(data, o, "fat binary wrapper magic")?;
            if magic != HIPF_MAGIC {
                return Err(Error::Malformed {
                    what: "fat binary wrapper",
                    offset: o,
                    detail: format!("magic {magic:#x} is not HIPF"),
                });
            }
            let ptr = u64_at(data, o + 8, "fat binary wrapper pointer")?;
            if out.iter().any(|f| f.bundle_addr == ptr) {
                continue;
            }
            let at = |detail: String| Error::Malformed {
                what: "fat binary wrapper",
                offset: o + 8,
                detail,
            };
            let rva = ptr
                .checked_sub(base)
                .and_then(|r| u32::try_from(r).ok())
                .ok_or_else(|| {
                    at(format!(
                        "bundle pointer {ptr:#x} is not an address of the image (ImageBase \
                         {base:#x})"
                    ))
                })?;
            let (off, avail) = table.pe_file_range_at(rva).ok_or_else(|| {
                at(format!(
                    "bundle pointer {ptr:#x} (RVA {rva:#x}) is not inside a section's file data"
                ))
            })?;
            let (off, avail) = (u64::from(off), u64::from(avail));
            let bytes = data
                .get(off as usize..(off + avail) as usize)
                .ok_or_else(|| at(format!("bundle at file offset {off:#x} is past the end")))?;
            out.push(HostFatbin {
                wrapper_offset: Some(o),
                pointer: PointerKind::ImageVirtualAddress,
                bundle_addr: ptr,
                bundle_offset: off,
                bundle: parse_one(bytes, off, limit)?,
            });
        }
    }
    Ok(out)
}
