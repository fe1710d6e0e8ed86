//! Writing a `.kpack` archive (format in [`crate::kpack`]): the header, the blob area in the
//! archive's storage, and its table of contents with the storage fields (`blobs`, or
//! `zstd_offset`/`zstd_size`) and each entry's `original_size` rewritten for the new blobs.
//! Every other TOC field (group, architectures, ordinals, entry metadata, unknown keys) is
//! written as it was read, in the same order.
//!
//! Plain blobs start on [`BLOB_ALIGN`] boundaries; zstd frames are written with ruzstd's
//! "fastest" level (the only one it implements; the reference writer uses zstd level 3: the
//! format does not record the level).

use rmpv::Value;

use super::read::Archive;
use super::{Storage, BLOB_ALIGN, FORMAT_VERSION, HEADER_SIZE, KPAK_MAGIC};
use crate::error::{Error, Result};

fn pad_to(out: &mut Vec<u8>, align: u64) {
    let len = out.len() as u64;
    out.resize(len.next_multiple_of(align) as usize, 0);
}

/// Sets `key` of a msgpack map (appended when missing).
fn set(map: &mut Value, key: &str, v: Value) {
    if let Value::Map(m) = map {
        match m.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            Some((_, old)) => *old = v,
            None => m.push((Value::from(key), v)),
        }
    }
}

/// Writes `archive` with its code objects replaced by `blobs` (by ordinal; same count as
/// [`Archive::blobs`]), in the archive's storage. Errors: [`Error::InvalidEdit`] for another
/// blob count, a blob or a frame too large for the format's 32-bit fields, or a TOC that does
/// not encode.
pub fn write<B: AsRef<[u8]>>(archive: &Archive, blobs: &[B]) -> Result<Vec<u8>> {
    if blobs.len() != archive.blobs.len() {
        return Err(Error::InvalidEdit(format!(
            "kpack: {} blobs given for an archive of {}",
            blobs.len(),
            archive.blobs.len()
        )));
    }
    write_toc(&archive.toc, archive.storage, blobs)
}

/// Writes an archive from a TOC map (as read, or from [`new_toc`]) and its code objects by
/// ordinal, in `storage`. Errors: as [`write`].
pub fn write_toc<B: AsRef<[u8]>>(toc: &Value, storage: Storage, blobs: &[B]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(KPAK_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    debug_assert_eq!(out.len() as u64, HEADER_SIZE);
    pad_to(&mut out, BLOB_ALIGN);
    let mut toc = toc.clone();
    let u32_len = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| {
            Error::InvalidEdit(format!("kpack: {what} of {n} bytes does not fit 32 bits"))
        })
    };
    match storage {
        Storage::None => {
            let mut table = Vec::with_capacity(blobs.len());
            for b in blobs {
                pad_to(&mut out, BLOB_ALIGN);
                let b = b.as_ref();
                table.push(Value::Map(vec![
                    (Value::from("offset"), Value::from(out.len() as u64)),
                    (Value::from("size"), Value::from(b.len() as u64)),
                ]));
                out.extend_from_slice(b);
            }
            set(&mut toc, "blobs", Value::Array(table));
        }
        Storage::ZstdPerKernel => {
            let start = out.len() as u64;
            out.extend_from_slice(&u32_len(blobs.len(), "frame count")?.to_le_bytes());
            for b in blobs {
                let frame = ruzstd::encoding::compress_to_vec(
                    b.as_ref(),
                    ruzstd::encoding::CompressionLevel::Fastest,
                );
                out.extend_from_slice(&u32_len(frame.len(), "zstd frame")?.to_le_bytes());
                out.extend_from_slice(&frame);
            }
            set(&mut toc, "zstd_offset", Value::from(start));
            set(&mut toc, "zstd_size", Value::from(out.len() as u64 - start));
        }
    }
    set(&mut toc, "compression_scheme", Value::from(storage.name()));
    if let Some(Value::Map(bins)) = map_get_mut(&mut toc, "toc") {
        for (_, archs) in bins.iter_mut() {
            let Value::Map(archs) = archs else { continue };
            for (_, e) in archs.iter_mut() {
                let ord = super::read::map_get(e, "ordinal").and_then(Value::as_u64);
                if let Some(b) = ord.and_then(|o| blobs.get(usize::try_from(o).ok()?)) {
                    set(e, "original_size", Value::from(b.as_ref().len() as u64));
                }
            }
        }
    }
    let toc_offset = out.len() as u64;
    rmpv::encode::write_value(&mut out, &toc)
        .map_err(|e| Error::InvalidEdit(format!("kpack TOC does not encode: {e}")))?;
    out[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    Ok(out)
}

fn map_get_mut<'a>(map: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match map {
        Value::Map(m) => m
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// Builds the TOC map of a new archive, as the reference writer lays it out, for tests and
/// tools that make archives: `format_version`, `group_name`, `gfx_arch_family`, `gfx_arches`,
/// `toc` (each `(binary key, arch, ordinal)` as a `{type: "hsaco", ordinal}` entry); the
/// storage fields and `original_size` are added by [`write_toc`].
pub fn new_toc(
    group: &str,
    family: &str,
    arches: &[&str],
    entries: &[(&str, &str, usize)],
) -> Value {
    let mut bins: Vec<(Value, Value)> = Vec::new();
    for (bin, arch, ord) in entries {
        let e = Value::Map(vec![
            (Value::from("type"), Value::from("hsaco")),
            (Value::from("ordinal"), Value::from(*ord as u64)),
        ]);
        match bins.iter_mut().find(|(k, _)| k.as_str() == Some(bin)) {
            Some((_, Value::Map(a))) => a.push((Value::from(*arch), e)),
            _ => bins.push((Value::from(*bin), Value::Map(vec![(Value::from(*arch), e)]))),
        }
    }
    Value::Map(vec![
        (Value::from("format_version"), Value::from(FORMAT_VERSION)),
        (Value::from("group_name"), Value::from(group)),
        (Value::from("gfx_arch_family"), Value::from(family)),
        (
            Value::from("gfx_arches"),
            Value::Array(arches.iter().map(|a| Value::from(*a)).collect()),
        ),
        (Value::from("toc"), Value::Map(bins)),
    ])
}
