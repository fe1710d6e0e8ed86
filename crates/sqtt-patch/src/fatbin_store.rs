//! How `--fatbin` stores a rebuilt bundle: compressed like its input (or as
//! `--compress-bundles` asks), keeping the bytes a compressed input held after its compressed
//! stream where a decompressor ignores them, else naming them in a warning (session-22 fresh
//! tester: a CCOB v1 bundle's trailing bytes were dropped without a word).

use anyhow::{Context, Result};
use hsaco::bundle::{self, Storage};
use hsaco::hostwrite::{self, BundleFormat};

/// A rebuilt plain bundle with what [`store`] needs of its input.
pub(crate) struct Rebuilt {
    /// The new plain bundle.
    pub plain: Vec<u8>,
    /// How the input bundle was stored.
    pub storage: Storage,
    /// File offset of the input bundle (bytes).
    pub offset: u64,
    /// Offset of the first trailing byte from the input bundle's start (bytes).
    pub trailing_at: u64,
    /// The input's bytes after its compressed stream up to its stored size
    /// ([`bundle::OpenBundle::contents_end`]); empty for a plain bundle.
    pub trailing: Vec<u8>,
}

impl Rebuilt {
    /// The plain bundle `plain` of the input bundle `b` whose stored bytes are `raw` (read from
    /// its file offset).
    pub fn new(plain: Vec<u8>, b: &bundle::OpenBundle, raw: &[u8]) -> Rebuilt {
        let trailing = raw
            .get(b.contents_end as usize..b.stored_size as usize)
            .unwrap_or_default()
            .to_vec();
        Rebuilt {
            plain,
            storage: b.storage.clone(),
            offset: b.offset,
            trailing_at: b.contents_end,
            trailing,
        }
    }
}

/// Stores `r` per `format` relative to its input's storage ([`hostwrite::compress_like`]) and
/// appends the input's trailing bytes to a zlib-compressed result
/// ([`bundle::append_trailing`]): zlib, as clang-offload-bundler-22 decompresses it, ignores
/// bytes after its stream. A zstd result cannot hold them (after a zstd frame
/// clang-offload-bundler-22 refuses a bundle: "Src size is incorrect"), nor can a plain one
/// (bytes after a plain bundle are read as the next bundle or padding): then a warning on
/// stderr names bundle `bi` of `name`, their file offset and count. Errors: a bundle too large
/// for the CCOB version's size fields, naming bundle `bi`.
pub(crate) fn store(name: &str, bi: usize, r: Rebuilt, format: BundleFormat) -> Result<Vec<u8>> {
    let cannot = || format!("{name}: bundle {bi}: cannot rebuild");
    let mut out = hostwrite::compress_like(r.plain, &r.storage, format).with_context(cannot)?;
    if r.trailing.is_empty() {
        return Ok(out);
    }
    let why = match bundle::parse_ccob_header(&out, 0).map(|h| h.method) {
        Ok(bundle::Method::Zlib) => {
            bundle::append_trailing(&mut out, &r.trailing).with_context(cannot)?;
            return Ok(out);
        }
        Ok(bundle::Method::Zstd) => {
            "clang-offload-bundler refuses bytes after a zstd frame (\"Src size is incorrect\")"
        }
        Err(_) => "a plain bundle cannot hold them",
    };
    eprintln!(
        "sqtt-patch: {name}: warning: bundle {bi} at file offset {:#x}: the {} byte(s) after its compressed stream (file offset {:#x}) are not in the output: {why}",
        r.offset,
        r.trailing.len(),
        r.offset + r.trailing_at
    );
    Ok(out)
}
