//! Reading a `.kpack` archive held in memory: header, table of contents, and every code object
//! decompressed (format in [`crate::kpack`]). Every structure is bounds-checked; every error
//! names the file offset where the problem is.
//!
//! Decompression is bounded like CCOB bundles ([`crate::bundle::decompress_ccob`]): a frame
//! may produce at most [`ZSTD_MAX_RATIO`] times its length, the archive at most `limit` bytes
//! in all, and a declared `original_size` must be what the frame holds. Frames that may exceed
//! [`SINGLE_PASS_MAX`] are first decompressed into a counter, so a lying frame never allocates
//! more than that before it is refused.

use std::io::Read;

use rmpv::Value;

use super::{Storage, FORMAT_VERSION, HEADER_SIZE, KPAK_MAGIC};
use crate::bundle::{SINGLE_PASS_MAX, ZSTD_MAX_RATIO};
use crate::error::{u32_at, u64_at, Error, Result};

/// One `toc[binary][arch]` entry of an archive.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TocEntry {
    /// Binary key (`lib/librocfft.so#0`: path relative to the install root, `#`, code object
    /// index of the host binary's fat-binary wrapper).
    pub binary: String,
    /// Architecture key (`gfx1100`, `gfx942:xnack-`).
    pub arch: String,
    /// `type` (`hsaco`), when present.
    pub kind: Option<String>,
    /// Index of the code object in [`Archive::blobs`].
    pub ordinal: usize,
    /// `original_size` (bytes), when present; equal to the blob's length (checked).
    pub original_size: Option<u64>,
}

impl TocEntry {
    /// `binary@arch`, the name used in messages and by `sqtt-patch extract`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.binary, self.arch)
    }
}

/// A parsed archive: its TOC as read (kept whole so that the writer preserves every field it
/// does not rewrite) and every code object, decompressed.
#[derive(Debug, Clone, PartialEq)]
pub struct Archive {
    /// Header version (1).
    pub version: u32,
    /// File offset of the TOC (bytes).
    pub toc_offset: u64,
    /// Storage scheme.
    pub storage: Storage,
    /// The TOC map as decoded (map order and unknown keys kept).
    pub toc: Value,
    /// Every `toc[binary][arch]` entry in TOC order.
    pub entries: Vec<TocEntry>,
    /// The code objects by ordinal (decompressed).
    pub blobs: Vec<Vec<u8>>,
    /// Bytes each blob occupies in the file (the zstd frame, or the plain blob).
    pub stored_sizes: Vec<u64>,
}

impl Archive {
    /// A string field of the TOC map.
    pub fn field_str(&self, key: &str) -> Option<&str> {
        map_get(&self.toc, key).and_then(Value::as_str)
    }

    /// `gfx_arches` (empty when absent).
    pub fn gfx_arches(&self) -> Vec<&str> {
        map_get(&self.toc, "gfx_arches")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The entry for a binary key and an architecture key, compared exactly.
    pub fn find(&self, binary: &str, arch: &str) -> Option<&TocEntry> {
        self.entries
            .iter()
            .find(|e| e.binary == binary && e.arch == arch)
    }
}

/// The value of `key` in a msgpack map (`None` for another type or a missing key).
pub(crate) fn map_get<'a>(map: &'a Value, key: &str) -> Option<&'a Value> {
    map.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn bad(what: &'static str, offset: u64, detail: impl Into<String>) -> Error {
    Error::Malformed {
        what,
        offset,
        detail: detail.into(),
    }
}

/// Checks the 16-byte header; returns `(version, toc_offset)`. Errors: [`Error::Truncated`]
/// for fewer than 16 bytes, [`Error::Malformed`] for a bad magic (offset 0), another version
/// (offset 4), or a TOC offset inside the header or at/past the end of the file (offset 8).
pub fn parse_header(data: &[u8]) -> Result<(u32, u64)> {
    if (data.len() as u64) < HEADER_SIZE {
        return Err(Error::Truncated {
            what: "kpack header",
            offset: 0,
            need: HEADER_SIZE,
            len: data.len() as u64,
        });
    }
    if !super::is_kpack(data) {
        return Err(bad(
            "kpack header",
            0,
            format!(
                "magic {:02x?} is not {:?}",
                &data[..4],
                std::str::from_utf8(KPAK_MAGIC).unwrap_or_default()
            ),
        ));
    }
    let version = u32_at(data, 4, "kpack version")?;
    if version != FORMAT_VERSION {
        return Err(bad(
            "kpack header",
            4,
            format!("format version {version} (only {FORMAT_VERSION} is known)"),
        ));
    }
    let toc = u64_at(data, 8, "kpack TOC offset")?;
    if toc < HEADER_SIZE || toc >= data.len() as u64 {
        return Err(bad(
            "kpack header",
            8,
            format!(
                "TOC offset {toc:#x} is not between the header end ({HEADER_SIZE:#x}) and the end of the file ({:#x})",
                data.len()
            ),
        ));
    }
    Ok((version, toc))
}

/// An unsigned integer field of a map, or an error naming `key` at `offset`.
fn uint(map: &Value, key: &str, what: &'static str, offset: u64) -> Result<u64> {
    match map_get(map, key) {
        Some(v) => v.as_u64().ok_or_else(|| {
            bad(
                what,
                offset,
                format!("`{key}` is {v}, not an unsigned integer"),
            )
        }),
        None => Err(bad(what, offset, format!("no `{key}` field"))),
    }
}

/// Parses an archive and decompresses every code object. `limit` bounds the decompressed bytes
/// of the whole archive. Errors ([`Error::Malformed`] / [`Error::Truncated`], with the file
/// offset): a bad header ([`parse_header`]); a TOC that is not a msgpack map, has an unknown
/// `compression_scheme`, entries without an ordinal or with an ordinal past the blobs; blobs or
/// the zstd blob outside `[header end, TOC offset)`; frames running past the zstd blob, bytes
/// after its last frame; a frame that does not decompress, decompresses past the limits, or to
/// a size other than its `original_size`.
pub fn read(data: &[u8], limit: u64) -> Result<Archive> {
    let (version, toc_offset) = parse_header(data)?;
    let mut rd = &data[toc_offset as usize..];
    let toc = rmpv::decode::read_value(&mut rd).map_err(|e| {
        bad(
            "kpack table of contents",
            toc_offset,
            format!("msgpack: {e}"),
        )
    })?;
    if !toc.is_map() {
        return Err(bad(
            "kpack table of contents",
            toc_offset,
            "not a msgpack map",
        ));
    }
    let what = "kpack table of contents";
    let storage = match map_get(&toc, "compression_scheme") {
        None => Storage::None,
        Some(v) => v
            .as_str()
            .and_then(Storage::from_name)
            .ok_or_else(|| bad(what, toc_offset, format!("unknown compression_scheme {v}")))?,
    };
    let mut entries = Vec::new();
    let Some(bins) = map_get(&toc, "toc") else {
        return Err(bad(what, toc_offset, "no `toc` map"));
    };
    let bins = bins
        .as_map()
        .ok_or_else(|| bad(what, toc_offset, "`toc` is not a map"))?;
    for (bk, archs) in bins {
        let binary = bk
            .as_str()
            .ok_or_else(|| bad(what, toc_offset, format!("binary key {bk} is not a string")))?;
        let archs = archs.as_map().ok_or_else(|| {
            bad(
                what,
                toc_offset,
                format!("toc[{binary:?}] is not a map of architectures"),
            )
        })?;
        for (ak, e) in archs {
            let arch = ak.as_str().ok_or_else(|| {
                bad(
                    what,
                    toc_offset,
                    format!("toc[{binary:?}] has a non-string key {ak}"),
                )
            })?;
            let ordinal = uint(e, "ordinal", what, toc_offset).map_err(|_| {
                bad(
                    what,
                    toc_offset,
                    format!("toc[{binary:?}][{arch:?}] has no unsigned `ordinal`"),
                )
            })?;
            let original_size = match map_get(e, "original_size") {
                None => None,
                Some(_) => Some(uint(e, "original_size", what, toc_offset)?),
            };
            entries.push(TocEntry {
                binary: binary.to_string(),
                arch: arch.to_string(),
                kind: map_get(e, "type")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ordinal: usize::try_from(ordinal).unwrap_or(usize::MAX),
                original_size,
            });
        }
    }
    let (blobs, stored_sizes) = match storage {
        Storage::None => plain_blobs(data, &toc, toc_offset)?,
        Storage::ZstdPerKernel => zstd_blobs(data, &toc, toc_offset, &entries, limit)?,
    };
    for e in &entries {
        let Some(blob) = blobs.get(e.ordinal) else {
            return Err(bad(
                what,
                toc_offset,
                format!(
                    "toc[{:?}][{:?}] ordinal {} is past the {} blob(s)",
                    e.binary,
                    e.arch,
                    e.ordinal,
                    blobs.len()
                ),
            ));
        };
        if let Some(s) = e.original_size {
            if s != blob.len() as u64 {
                return Err(bad(
                    what,
                    toc_offset,
                    format!(
                        "toc[{:?}][{:?}] original_size {s} but blob {} holds {} bytes",
                        e.binary,
                        e.arch,
                        e.ordinal,
                        blob.len()
                    ),
                ));
            }
        }
    }
    Ok(Archive {
        version,
        toc_offset,
        storage,
        toc,
        entries,
        blobs,
        stored_sizes,
    })
}

/// `[offset, offset + size)` must lie inside `[HEADER_SIZE, toc_offset)`; the error is at
/// `offset` and its detail starts with `label`.
fn check_range(
    what: &'static str,
    label: &str,
    offset: u64,
    size: u64,
    toc_offset: u64,
) -> Result<()> {
    match offset.checked_add(size) {
        Some(end) if offset >= HEADER_SIZE && end <= toc_offset => Ok(()),
        _ => Err(bad(
            what,
            offset,
            format!(
                "{label}range {offset:#x}+{size:#x} is not between the header end ({HEADER_SIZE:#x}) and the TOC offset ({toc_offset:#x})"
            ),
        )),
    }
}

type Blobs = (Vec<Vec<u8>>, Vec<u64>);

fn plain_blobs(data: &[u8], toc: &Value, toc_offset: u64) -> Result<Blobs> {
    let what = "kpack blob table";
    let list = map_get(toc, "blobs")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(what, toc_offset, "storage `none` without a `blobs` array"))?;
    let mut blobs = Vec::with_capacity(list.len());
    let mut sizes = Vec::with_capacity(list.len());
    for (i, b) in list.iter().enumerate() {
        let offset = uint(b, "offset", what, toc_offset)?;
        let size = uint(b, "size", what, toc_offset)?;
        check_range(
            "kpack blob",
            &format!("blob {i}: "),
            offset,
            size,
            toc_offset,
        )?;
        blobs.push(data[offset as usize..(offset + size) as usize].to_vec());
        sizes.push(size);
    }
    Ok((blobs, sizes))
}

fn zstd_blobs(
    data: &[u8],
    toc: &Value,
    toc_offset: u64,
    entries: &[TocEntry],
    limit: u64,
) -> Result<Blobs> {
    let what = "kpack zstd blob";
    let offset = uint(toc, "zstd_offset", what, toc_offset)?;
    let size = uint(toc, "zstd_size", what, toc_offset)?;
    check_range(what, "", offset, size, toc_offset)?;
    let end = offset + size;
    if size < 4 {
        return Err(bad(what, offset, format!("{size} bytes: no frame count")));
    }
    let count = u64::from(u32_at(data, offset, "kpack frame count")?);
    // Each frame needs at least its 4-byte size: a count that cannot fit is refused before any
    // allocation.
    if count > (size - 4) / 4 {
        return Err(bad(
            what,
            offset,
            format!("{count} frames cannot fit in {size} bytes"),
        ));
    }
    let mut blobs = Vec::with_capacity(count as usize);
    let mut sizes = Vec::with_capacity(count as usize);
    let mut at = offset + 4;
    let mut budget = limit;
    for i in 0..count as usize {
        let fsize = u64::from(u32_at(data, at, "kpack frame size")?);
        let fstart = at + 4;
        if fstart.checked_add(fsize).is_none_or(|e| e > end) {
            return Err(bad(
                "kpack zstd frame",
                at,
                format!("frame {i} of {fsize} bytes runs past the zstd blob end ({end:#x})"),
            ));
        }
        let frame = &data[fstart as usize..(fstart + fsize) as usize];
        let declared = entries
            .iter()
            .find(|e| e.ordinal == i)
            .and_then(|e| e.original_size);
        let out = decompress_frame(frame, fstart, declared, budget)?;
        budget -= out.len() as u64;
        blobs.push(out);
        sizes.push(fsize);
        at = fstart + fsize;
    }
    if at != end {
        return Err(bad(
            what,
            at,
            format!("{} bytes after the last of {count} frames", end - at),
        ));
    }
    Ok((blobs, sizes))
}

/// Decompresses one zstd frame at file offset `at`, refusing output past `budget` bytes or
/// [`ZSTD_MAX_RATIO`] times the frame, and output of another size than `declared`.
fn decompress_frame(frame: &[u8], at: u64, declared: Option<u64>, budget: u64) -> Result<Vec<u8>> {
    let fail = |detail: String| bad("kpack zstd frame", at, detail);
    let most = (frame.len() as u64).saturating_mul(ZSTD_MAX_RATIO);
    let cap = budget.min(most);
    if let Some(d) = declared {
        if d > cap {
            return Err(fail(format!(
                "original_size {d} bytes is more than the {}-byte frame may expand to under the limits ({cap} bytes)",
                frame.len()
            )));
        }
    }
    let cap = declared.unwrap_or(cap);
    let decoder = || {
        ruzstd::decoding::StreamingDecoder::new(frame).map_err(|e| {
            fail(format!(
                "zstd frame header: {}",
                crate::compressed::corrupt_text(&e)
            ))
        })
    };
    let over = || {
        fail(format!(
            "decompresses to more than {cap} bytes ({}; limit {budget} bytes left, {ZSTD_MAX_RATIO}:1 at most)",
            match declared {
                Some(_) => "its original_size",
                None => "the bound",
            }
        ))
    };
    let io = |e: std::io::Error| {
        fail(format!(
            "decompression failed: {}",
            crate::compressed::corrupt_text(&e)
        ))
    };
    if cap > SINGLE_PASS_MAX {
        let n = std::io::copy(&mut decoder()?.take(cap + 1), &mut std::io::sink()).map_err(io)?;
        if n > cap {
            return Err(over());
        }
    }
    let mut out = Vec::with_capacity(cap.min(SINGLE_PASS_MAX) as usize);
    decoder()?.take(cap + 1).read_to_end(&mut out).map_err(io)?;
    if out.len() as u64 > cap {
        return Err(over());
    }
    if let Some(d) = declared {
        if out.len() as u64 != d {
            return Err(fail(format!(
                "original_size {d} but the frame decompresses to {} bytes",
                out.len()
            )));
        }
    }
    Ok(out)
}
