//! ROCm kpack archives (`.kpack`) and the HIPK host binaries that load from them (ROCm 7
//! multi-architecture packaging). Reader in [`read`], writer in [`write`], the host side (HIPK
//! fat-binary wrappers, their msgpack metadata, archive search) in [`hipk`].
//!
//! Facts (TheRock `docs/rfcs/RFC0008-Multi-Arch-Packaging.md`; ROCm/rocm-kpack
//! `python/rocm_kpack/kpack.py`, `compression.py`, `runtime/src/loader.cpp`,
//! `docs/runtime_api.md`):
//! - a 16-byte header `{b"KPAK", u32 version = 1, u64 toc_offset}` (little-endian), padding to
//!   a 64-byte boundary, the blob area, then a MessagePack table of contents (TOC) from
//!   `toc_offset` to the end of the file;
//! - the TOC is a map: `format_version`, `group_name`, `gfx_arch_family`, `gfx_arches`,
//!   `compression_scheme` (`"none"` or `"zstd-per-kernel"`), and
//!   `toc: {binary key: {arch: {"type", "ordinal", "original_size", ["metadata"]}}}`. A binary
//!   key is `<path relative to the install root>#<code object index>` (`lib/librocfft.so#0`);
//!   `ordinal` indexes the blobs;
//! - storage `"none"`: `blobs: [{offset, size}]` (absolute file offsets) indexed by ordinal;
//! - storage `"zstd-per-kernel"`: `zstd_offset`, `zstd_size` locate one blob
//!   `{u32 count; count x {u32 frame_size; zstd frame}}`, frame `i` being ordinal `i`.

pub mod hipk;
pub mod read;
pub mod write;

pub use read::{read, Archive, TocEntry};

/// Archive magic (offset 0).
pub const KPAK_MAGIC: &[u8; 4] = b"KPAK";
/// Size of the fixed header (bytes): magic, version, TOC offset.
pub const HEADER_SIZE: u64 = 16;
/// The only format version the reference reader and writer know.
pub const FORMAT_VERSION: u32 = 1;
/// Alignment of the blob area (and, in archives this crate writes, of each plain blob) (bytes).
pub const BLOB_ALIGN: u64 = 64;

/// True when `data` starts with the `KPAK` magic.
pub fn is_kpack(data: &[u8]) -> bool {
    data.starts_with(KPAK_MAGIC)
}

/// How the code objects of an archive are stored (`compression_scheme` of the TOC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Storage {
    /// `"none"`: each code object as it is, located by the `blobs` array.
    None,
    /// `"zstd-per-kernel"`: one zstd frame per code object inside the `zstd_offset` blob.
    ZstdPerKernel,
}

impl Storage {
    /// The TOC spelling (`"none"`, `"zstd-per-kernel"`).
    pub fn name(self) -> &'static str {
        match self {
            Storage::None => "none",
            Storage::ZstdPerKernel => "zstd-per-kernel",
        }
    }

    /// The storage a TOC spelling names, `None` for an unknown one.
    pub fn from_name(s: &str) -> Option<Storage> {
        match s {
            "none" => Some(Storage::None),
            "zstd-per-kernel" => Some(Storage::ZstdPerKernel),
            _ => None,
        }
    }
}
