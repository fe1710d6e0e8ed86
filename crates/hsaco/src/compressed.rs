//! Compressed ELF sections (`SHF_COMPRESSED`), as Debian's ROCm builds write their DWARF
//! (issue 39): the section starts with an `Elf64_Chdr` (`ch_type` u32, `ch_reserved` u32,
//! `ch_size` u64 = uncompressed size, `ch_addralign` u64; 24 bytes, ELF gABI "Section
//! Compression"), followed by the compressed stream: `ELFCOMPRESS_ZLIB` (1) a zlib stream,
//! `ELFCOMPRESS_ZSTD` (2) one or more zstd frames.
//!
//! Reading decompresses with the output bounded by the declared `ch_size`, which itself must be
//! below a caller's limit (a compression bomb is an error, not an allocation). Writing
//! compresses again with the same `ch_type` and `ch_addralign`; the bytes may differ from the
//! producer's (another compressor or level), the contents do not.

use crate::error::{Error, Result};
use std::io::Read;

/// `SHF_COMPRESSED` section flag (ELF gABI).
pub const SHF_COMPRESSED: u64 = 0x800;
/// `ch_type` of a zlib stream.
pub const ELFCOMPRESS_ZLIB: u32 = 1;
/// `ch_type` of zstd frames.
pub const ELFCOMPRESS_ZSTD: u32 = 2;
/// Size of `Elf64_Chdr` (bytes).
pub const CHDR_SIZE: usize = 24;

/// The compression header of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chdr {
    /// `ch_type`: [`ELFCOMPRESS_ZLIB`] or [`ELFCOMPRESS_ZSTD`].
    pub ch_type: u32,
    /// Uncompressed size (bytes).
    pub size: u64,
    /// Alignment of the uncompressed data (bytes).
    pub addralign: u64,
}

/// The compression header at the start of a compressed section's contents, `None` when they
/// are shorter than 24 bytes.
pub fn header(data: &[u8]) -> Option<Chdr> {
    let b = data.get(..CHDR_SIZE)?;
    Some(Chdr {
        ch_type: u32::from_le_bytes(b[0..4].try_into().ok()?),
        size: u64::from_le_bytes(b[8..16].try_into().ok()?),
        addralign: u64::from_le_bytes(b[16..24].try_into().ok()?),
    })
}

/// Decompresses the contents `data` of the compressed section `name`, which starts at file
/// offset `offset` (for messages). Errors ([`Error::Malformed`], naming the section and the
/// offset): a header shorter than 24 bytes, an unknown `ch_type`, a `ch_size` above `limit`,
/// a stream that does not decode, or one whose output is not exactly `ch_size` bytes.
pub fn decompress(name: &str, offset: u64, data: &[u8], limit: u64) -> Result<(Chdr, Vec<u8>)> {
    let bad = |detail: String| Error::Malformed {
        what: "compressed section",
        offset,
        detail: format!("{name}: {detail}"),
    };
    if data.len() < CHDR_SIZE {
        return Err(bad(format!(
            "{} bytes cannot hold the 24-byte compression header",
            data.len()
        )));
    }
    let Some(h) = header(data) else {
        return Err(bad("no compression header".into()));
    };
    if h.size > limit {
        return Err(bad(format!(
            "declared uncompressed size {} exceeds the limit of {limit} bytes",
            h.size
        )));
    }
    let payload = &data[CHDR_SIZE..];
    let mut reader: Box<dyn Read> = match h.ch_type {
        ELFCOMPRESS_ZLIB => Box::new(flate2::read::ZlibDecoder::new(payload)),
        ELFCOMPRESS_ZSTD => Box::new(
            ruzstd::decoding::StreamingDecoder::new(payload)
                .map_err(|e| bad(format!("zstd frame header: {}", corrupt_text(&e))))?,
        ),
        t => return Err(bad(format!("unknown compression type {t}"))),
    };
    // One byte more than declared is read, so that a longer stream is seen.
    let mut out = Vec::with_capacity(h.size.min(1 << 26) as usize);
    reader
        .by_ref()
        .take(h.size + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(format!("the stream does not decode: {}", corrupt_text(&e))))?;
    if out.len() as u64 != h.size {
        return Err(bad(format!(
            "the stream holds {} bytes, the header declares {}",
            out.len(),
            h.size
        )));
    }
    Ok((h, out))
}

/// Plain text for a decoder error `e` (issue 32): zstd errors from `ruzstd` carry Rust debug
/// forms (`Failed to parse block header: DecompressLiteralsError(DecodedLiteralCountMismatch {
/// decoded: 7067, expected: 7071 })`). The text up to the first debug form is kept (`failed to
/// parse block header`), behind "the data is corrupt"; the caller names the file and offset.
pub(crate) fn corrupt_text(e: &dyn std::fmt::Display) -> String {
    let full = e.to_string();
    let debug_at = full.find(['(', '{']).unwrap_or(full.len());
    // Back to the end of the last clause before the debug form (`...: Name(` drops `Name`).
    let kept = full[..debug_at]
        .rfind(':')
        .filter(|_| debug_at < full.len())
        .map_or(&full[..debug_at], |c| &full[..c])
        .trim();
    if kept.is_empty() {
        "the data is corrupt".to_string()
    } else {
        let mut c = kept.chars();
        let first = c.next().map(|f| f.to_lowercase().collect::<String>());
        format!(
            "the data is corrupt ({}{})",
            first.unwrap_or_default(),
            c.as_str()
        )
    }
}

/// Compresses `plain` as a section with header `h` (its `ch_type` and `ch_addralign` are kept,
/// `ch_size` becomes `plain.len()`): the 24-byte header followed by the stream.
pub fn compress(h: Chdr, plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHDR_SIZE + plain.len() / 2);
    out.extend_from_slice(&h.ch_type.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(plain.len() as u64).to_le_bytes());
    out.extend_from_slice(&h.addralign.to_le_bytes());
    match h.ch_type {
        ELFCOMPRESS_ZSTD => out.extend_from_slice(&ruzstd::encoding::compress_to_vec(
            plain,
            ruzstd::encoding::CompressionLevel::Fastest,
        )),
        _ => {
            use std::io::Write;
            let mut e = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
            e.write_all(plain).expect("writing to a vector");
            out = e.finish().expect("writing to a vector");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_both_types_and_refuse_bombs() {
        let plain: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for t in [ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD] {
            let h = Chdr {
                ch_type: t,
                size: 0,
                addralign: 1,
            };
            let c = compress(h, &plain);
            let (back_h, back) = decompress(".debug_info", 0x40, &c, 1 << 20).expect("decodes");
            assert_eq!(back, plain);
            assert_eq!(back_h.ch_type, t);
            assert_eq!(back_h.size, plain.len() as u64);
            let e = decompress(".debug_info", 0x40, &c, 100)
                .unwrap_err()
                .to_string();
            assert!(e.contains("exceeds the limit of 100 bytes"), "{e}");
            let mut lying = c.clone();
            lying[8..16].copy_from_slice(&10u64.to_le_bytes());
            let e = decompress(".debug_info", 0x40, &lying, 1 << 20)
                .unwrap_err()
                .to_string();
            assert!(e.contains(".debug_info"), "{e}");
        }
        let e = decompress(".debug_line", 0x80, &[1, 0, 0], 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot hold the 24-byte compression header"),
            "{e}"
        );
    }
}
