//! HIP fat binaries inside x86-64 host ELFs (executables, PIE, shared libraries): the
//! `.hipFatBinSegment` wrappers `{u32 magic 0x48495046 "HIPF", u32 version, u64 bundle pointer,
//! u64 0}` (24 bytes each), or `.fatbin_wrapper`/`.fatbin_image` of the new offload driver.
//! In PIE and shared objects the pointer bytes are zero and the value is the addend of an
//! `R_X86_64_RELATIVE` relocation at wrapper+8; otherwise the absolute address is in the bytes.

use crate::bundle::{parse_one, Bundle};
use crate::elf::{self, Elf};
use crate::error::{u32_at, u64_at, Error, Result};

/// Wrapper magic `HIPF`.
pub const HIPF_MAGIC: u32 = 0x4849_5046;
/// `R_X86_64_RELATIVE`.
pub const R_X86_64_RELATIVE: u32 = 8;

/// How a wrapper's bundle pointer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PointerKind {
    /// Absolute address in the wrapper bytes (non-PIE).
    Absolute,
    /// Addend of an `R_X86_64_RELATIVE` relocation (entry at this file offset).
    Relative {
        /// File offset of the `Elf64_Rela` entry.
        rela_entry_offset: u64,
    },
    /// No wrapper: the whole `.hip_fatbin` / `.fatbin_image` was read (new offload driver).
    Section,
}

/// One fat binary found in a host ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFatbin {
    /// File offset of the wrapper (bytes); `None` when found without a wrapper.
    pub wrapper_offset: Option<u64>,
    /// Pointer storage.
    pub pointer: PointerKind,
    /// Virtual address of the bundle.
    pub bundle_addr: u64,
    /// File offset of the bundle.
    pub bundle_offset: u64,
    /// The parsed bundle.
    pub bundle: Bundle,
}

/// Finds every bundle of a host ELF (EM_X86_64). Errors: ELF errors, [`Error::WrongMachine`],
/// [`Error::Malformed`] (wrapper with bad magic, pointer outside the file), bundle errors.
pub fn find_fatbins(data: &[u8], limit: u64) -> Result<Vec<HostFatbin>> {
    let e = Elf::parse(data)?;
    if e.header.e_machine != elf::EM_X86_64 {
        return Err(Error::WrongMachine {
            found: e.header.e_machine,
            expected: elf::EM_X86_64,
        });
    }
    let relas = e.relas(data)?;
    let mut out = Vec::new();
    let wrappers = e
        .sections
        .iter()
        .filter(|s| s.name == ".hipFatBinSegment" || s.name == ".nvFatBinSegment");
    for ws in wrappers {
        for i in 0..ws.size / 24 {
            let o = ws.offset + 24 * i;
            let magic = u32_at(data, o, "fat binary wrapper magic")?;
            if magic != HIPF_MAGIC {
                return Err(Error::Malformed {
                    what: "fat binary wrapper",
                    offset: o,
                    detail: match magic {
                        crate::kpack::hipk::HIPK_MAGIC => format!(
                            "magic {magic:#x} is HIPK, not HIPF: a kpack-split binary, its code \
                             objects are in .kpack archives (sqtt-patch info lists them)"
                        ),
                        _ => format!("magic {magic:#x} is not HIPF"),
                    },
                });
            }
            let addr_field = ws.addr + 24 * i + 8;
            let (ptr, kind) = match relas
                .iter()
                .find(|r| r.r_offset == addr_field && r.r_type == R_X86_64_RELATIVE)
            {
                Some(r) => (
                    r.addend as u64,
                    PointerKind::Relative {
                        rela_entry_offset: r.entry_offset,
                    },
                ),
                None => (
                    u64_at(data, o + 8, "fat binary wrapper pointer")?,
                    PointerKind::Absolute,
                ),
            };
            let off = e.addr_to_offset(ptr).ok_or_else(|| Error::Malformed {
                what: "fat binary wrapper",
                offset: o + 8,
                detail: format!("bundle pointer {ptr:#x} is not inside a file-backed section"),
            })?;
            let bundle = parse_one(&data[off as usize..], off, limit)?;
            out.push(HostFatbin {
                wrapper_offset: Some(o),
                pointer: kind,
                bundle_addr: ptr,
                bundle_offset: off,
                bundle,
            });
        }
    }
    if out.is_empty() {
        // New offload driver: `.fatbin_wrapper` is a different struct; read the image section.
        for s in e
            .sections
            .iter()
            .filter(|s| s.name == ".hip_fatbin" || s.name == ".fatbin_image")
        {
            let d = e.section_data(data, s);
            for b in crate::bundle::parse_all(d, s.offset, limit)? {
                let off = b.offset;
                out.push(HostFatbin {
                    wrapper_offset: None,
                    pointer: PointerKind::Section,
                    bundle_addr: s.addr + (off - s.offset),
                    bundle_offset: off,
                    bundle: b,
                });
            }
        }
    }
    Ok(out)
}
