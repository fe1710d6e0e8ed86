//! LLVM `OffloadBinary` data: what the new offload driver (`--offload-new-driver`,
//! `clang-offload-packager`) stores in the `.llvm.offloading` section of host objects.
//!
//! Layout (LLVM `Object/OffloadBinary.h`, checked against `clang-offload-packager-22` output),
//! little-endian, offsets relative to the start of each binary:
//! - header (32 bytes): magic `10 FF 10 AD`, u32 version, u64 size of the whole binary,
//!   u64 entry offset, u64 entry size;
//! - entry (40 bytes): u16 image kind, u16 offload kind, u32 flags, u64 string table offset,
//!   u64 number of strings, u64 image offset, u64 image size;
//! - string table: `num strings` pairs of u64 (key offset, value offset) to NUL-terminated
//!   strings (`triple`, `arch`, ...).
//!
//! A section may hold several binaries one after another, each starting 8-byte aligned
//! (the packager writes one binary per `--image`). Nothing is decompressed: every size is
//! checked against the bytes present, so the input length bounds all allocations.

use crate::error::{Error, Result};

/// Magic of an offload binary (`0x10FF10AD` read big-endian).
pub const OFFLOAD_MAGIC: [u8; 4] = [0x10, 0xFF, 0x10, 0xAD];
/// Name of the host ELF section that holds offload binaries.
pub const SECTION: &str = ".llvm.offloading";
/// Size of the binary header (bytes).
const HEADER: u64 = 32;
/// Size of one entry (bytes).
const ENTRY: u64 = 40;
/// Highest header version accepted (LLVM writes 1).
const MAX_VERSION: u32 = 2;

/// One image of an offload binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadImage {
    /// File offset of the binary that holds the image (bytes).
    pub binary_offset: u64,
    /// Header version.
    pub version: u32,
    /// Image kind (0 none, 1 object, 2 bitcode, 3 cubin, 4 fatbinary, 5 PTX, 6 SPIR-V).
    pub image_kind: u16,
    /// Offload kind (bits: 1 OpenMP, 2 CUDA, 4 HIP, 8 SYCL; the LLVM 22 packager writes 4 for
    /// `kind=hip`).
    pub offload_kind: u16,
    /// Entry flags.
    pub flags: u32,
    /// Key/value strings in file order.
    pub strings: Vec<(String, String)>,
    /// File offset of the image (bytes).
    pub image_offset: u64,
    /// The image bytes.
    pub data: Vec<u8>,
}

impl OffloadImage {
    /// Value of string `key`, if present.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.strings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Target triple (`triple` string), or "" when absent.
    pub fn triple(&self) -> &str {
        self.string("triple").unwrap_or("")
    }

    /// Processor (`arch` string), or "" when absent.
    pub fn arch(&self) -> &str {
        self.string("arch").unwrap_or("")
    }

    /// True for an AMDGPU code object: `amdgcn` triple and ELF bytes (bitcode images of
    /// `-foffload-lto` objects are not code objects and are skipped).
    pub fn is_amdgcn_code_object(&self) -> bool {
        self.triple().starts_with("amdgcn") && self.data.starts_with(b"\x7fELF")
    }

    /// Entry id in the style of bundle ids: `offload-<triple>--<arch>`.
    pub fn id(&self) -> String {
        format!("offload-{}--{}", self.triple(), self.arch())
    }
}

/// True when `data` starts with the offload binary magic.
pub fn is_offload_binary(data: &[u8]) -> bool {
    data.starts_with(&OFFLOAD_MAGIC)
}

fn malformed(offset: u64, detail: String) -> Error {
    Error::Malformed {
        what: "offload binary",
        offset,
        detail,
    }
}

/// Little-endian integer of `N` bytes at `rel` inside `d` (a binary at file offset `base`).
fn le<const N: usize>(d: &[u8], base: u64, rel: u64, what: &str) -> Result<u64> {
    let s = rel
        .checked_add(N as u64)
        .filter(|&e| e <= d.len() as u64)
        .map(|e| &d[rel as usize..e as usize])
        .ok_or_else(|| {
            malformed(
                base + rel,
                format!(
                    "{what} needs {N} bytes at offset {rel:#x} of the binary, but it is {:#x} \
                     bytes long",
                    d.len()
                ),
            )
        })?;
    let mut v = 0u64;
    for (i, b) in s.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    Ok(v)
}

/// NUL-terminated string at `rel` of binary `d`.
fn cstr(d: &[u8], base: u64, rel: u64, what: &str) -> Result<String> {
    let tail = d.get(rel as usize..).filter(|_| rel <= d.len() as u64);
    let tail = tail.ok_or_else(|| {
        malformed(
            base + rel,
            format!(
                "{what} offset {rel:#x} is outside the binary ({:#x} bytes)",
                d.len()
            ),
        )
    })?;
    let end = tail.iter().position(|&b| b == 0).ok_or_else(|| {
        malformed(
            base + rel,
            format!("{what} at offset {rel:#x} has no NUL terminator inside the binary"),
        )
    })?;
    Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
}

/// Parses one binary at the start of `data` (file offset `base`); returns its image and its
/// size (bytes). Errors: [`Error::Malformed`] naming the file offset for a bad magic, an
/// unsupported version, or any size or offset outside the binary.
pub fn parse_one(data: &[u8], base: u64) -> Result<(OffloadImage, u64)> {
    if !is_offload_binary(data) {
        return Err(malformed(
            base,
            "magic is not 10 FF 10 AD (LLVM OffloadBinary)".into(),
        ));
    }
    let version = le::<4>(data, base, 4, "version")? as u32;
    if version == 0 || version > MAX_VERSION {
        return Err(malformed(
            base + 4,
            format!("unsupported version {version} (1 to {MAX_VERSION} are read)"),
        ));
    }
    let size = le::<8>(data, base, 8, "size")?;
    if size < HEADER + ENTRY || size > data.len() as u64 {
        return Err(malformed(
            base + 8,
            format!(
                "binary size {size:#x} is below {:#x} or past the end of the data \
                 ({:#x} bytes left)",
                HEADER + ENTRY,
                data.len()
            ),
        ));
    }
    let d = &data[..size as usize];
    let entry = le::<8>(d, base, 16, "entry offset")?;
    let entry_size = le::<8>(d, base, 24, "entry size")?;
    if entry_size < ENTRY || entry.checked_add(entry_size).is_none_or(|e| e > size) {
        return Err(malformed(
            base + 16,
            format!(
                "entry at {entry:#x} of size {entry_size:#x} is not inside the binary \
                 ({size:#x} bytes, entries are {ENTRY} bytes)"
            ),
        ));
    }
    let image_kind = le::<2>(d, base, entry, "image kind")? as u16;
    let offload_kind = le::<2>(d, base, entry + 2, "offload kind")? as u16;
    let flags = le::<4>(d, base, entry + 4, "flags")? as u32;
    let str_off = le::<8>(d, base, entry + 8, "string table offset")?;
    let nstr = le::<8>(d, base, entry + 16, "number of strings")?;
    let img_off = le::<8>(d, base, entry + 24, "image offset")?;
    let img_size = le::<8>(d, base, entry + 32, "image size")?;
    if nstr
        .checked_mul(16)
        .and_then(|n| n.checked_add(str_off))
        .is_none_or(|e| e > size)
    {
        return Err(malformed(
            base + entry + 8,
            format!("{nstr} strings at {str_off:#x} do not fit in the binary ({size:#x} bytes)"),
        ));
    }
    let mut strings = Vec::with_capacity(nstr as usize);
    for i in 0..nstr {
        let k = le::<8>(d, base, str_off + 16 * i, "string key offset")?;
        let v = le::<8>(d, base, str_off + 16 * i + 8, "string value offset")?;
        strings.push((
            cstr(d, base, k, "string key")?,
            cstr(d, base, v, "string value")?,
        ));
    }
    let image = img_off
        .checked_add(img_size)
        .filter(|&e| e <= size)
        .map(|e| &d[img_off as usize..e as usize])
        .ok_or_else(|| {
            malformed(
                base + entry + 24,
                format!(
                    "image at {img_off:#x} of size {img_size:#x} is not inside the binary \
                     ({size:#x} bytes)"
                ),
            )
        })?;
    Ok((
        OffloadImage {
            binary_offset: base,
            version,
            image_kind,
            offload_kind,
            flags,
            strings,
            image_offset: base + img_off,
            data: image.to_vec(),
        },
        size,
    ))
}

/// Parses every binary of `data` (a `.llvm.offloading` section or a file of concatenated
/// binaries at file offset `base`): each starts 8-byte aligned after the previous one; zero
/// padding at the end is ignored. Errors: those of [`parse_one`].
pub fn parse_all(data: &[u8], base: u64) -> Result<Vec<OffloadImage>> {
    let mut out = Vec::new();
    let mut o = 0u64;
    while o < data.len() as u64 {
        let rest = &data[o as usize..];
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let (img, size) = parse_one(rest, base + o)?;
        out.push(img);
        o = o.saturating_add(size.div_ceil(8) * 8);
    }
    Ok(out)
}
