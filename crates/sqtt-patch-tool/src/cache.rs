//! The content-addressed cache: one file per (input, options, tool build), written atomically
//! (a temporary file in the same directory, then renamed), read back only when its own checksum
//! holds; anything else is ignored and rebuilt.
//!
//! Entry layout: `SQTTPC1\n`, the record's JSON length (u64, little endian), the JSON of
//! [`Entry`], then the instrumented bytes (none when unchanged).

use crate::record::Record;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"SQTTPC1\n";

/// The JSON part of an entry.
#[derive(Serialize, Deserialize)]
struct Entry {
    record: Record,
    /// SHA-256 of the payload (hex).
    payload_sha256: String,
    /// The key the entry was written for (guards against a renamed file).
    key: String,
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The key of an input: SHA-256 over the tool build, the options and the input's hash.
pub fn key(tool_build: &str, options: &str, input_sha256: &str) -> String {
    sha256_hex(format!("{tool_build}\n{options}\n{input_sha256}").as_bytes())
}

fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.sqttpc"))
}

/// The entry for `key`, or `None` when absent, unreadable, of another key or corrupt.
pub fn load(dir: &Path, key: &str) -> Option<(Record, Vec<u8>)> {
    let bytes = std::fs::read(path(dir, key)).ok()?;
    let rest = bytes.strip_prefix(MAGIC)?;
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let json = rest.get(8..8usize.checked_add(len)?)?;
    let payload = &rest[8 + len..];
    let e: Entry = serde_json::from_slice(json).ok()?;
    if e.key != key || e.payload_sha256 != sha256_hex(payload) {
        return None;
    }
    let consistent = if e.record.instrumented() {
        !payload.is_empty() && payload.len() == e.record.size_after
    } else {
        payload.is_empty()
    };
    if !consistent {
        return None;
    }
    Some((e.record, payload.to_vec()))
}

/// Writes the entry for `key` atomically. Errors: the directory cannot be made or written (a
/// full disk included); nothing is left behind but possibly an older entry.
pub fn store(dir: &Path, key: &str, record: &Record, payload: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let e = Entry {
        record: record.clone(),
        payload_sha256: sha256_hex(payload),
        key: key.to_string(),
    };
    let json = serde_json::to_vec(&e)?;
    let mut f = tempfile::NamedTempFile::new_in(dir)?;
    f.write_all(MAGIC)?;
    f.write_all(&(json.len() as u64).to_le_bytes())?;
    f.write_all(&json)?;
    f.write_all(payload)?;
    f.as_file().sync_data()?;
    f.persist(path(dir, key)).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(instrumented: bool, size: usize) -> Record {
        let mut r = Record::unchanged("x", "y".into(), size);
        if instrumented {
            r.status = crate::record::INSTRUMENTED.into();
            r.unchanged_because = None;
        }
        r
    }

    #[test]
    fn round_trip_and_corruption_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let k = key("b", "o", &sha256_hex(b"in"));
        assert!(load(d.path(), &k).is_none());
        store(d.path(), &k, &rec(true, 3), b"abc").unwrap();
        assert_eq!(load(d.path(), &k).unwrap().1, b"abc");
        // One flipped payload byte: ignored.
        let p = path(d.path(), &k);
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 1] ^= 1;
        std::fs::write(&p, &b).unwrap();
        assert!(load(d.path(), &k).is_none());
        // Truncated: ignored.
        std::fs::write(&p, &b[..n / 2]).unwrap();
        assert!(load(d.path(), &k).is_none());
        // Rebuilt.
        store(d.path(), &k, &rec(false, 3), b"").unwrap();
        let (r, p2) = load(d.path(), &k).unwrap();
        assert!(!r.instrumented());
        assert!(p2.is_empty());
        // Another key's file under this name: ignored.
        let k2 = key("b", "o2", &sha256_hex(b"in"));
        std::fs::copy(&p, path(d.path(), &k2)).unwrap();
        assert!(load(d.path(), &k2).is_none());
    }
}
