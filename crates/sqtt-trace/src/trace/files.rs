//! Shaderdata files of a UI directory: which files (`filenames.json` or by name), and the
//! parsing thread that reads them in order and sends their records to the decoder.

use crate::discover;
use crate::json::{self, Record};
use crate::warnings::Warnings;
use indicatif::ProgressBar;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

pub(super) fn open(path: &Path) -> std::io::Result<BufReader<std::fs::File>> {
    Ok(BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(path)?,
    ))
}

/// SE and index from `shaderdata_<se>_<idx>.json`.
pub(super) fn se_idx(name: &str) -> Option<(u32, u32)> {
    let stem = name.strip_prefix("shaderdata_")?.strip_suffix(".json")?;
    let mut it = stem.split('_');
    let se = it.next()?.parse().ok()?;
    let idx = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    Some((se, idx))
}

/// The shaderdata files of `dir`: from `filenames.json` `"shaderdata_filenames"` when it lists
/// any, else every `shaderdata_*.json` (SE from the first number of the name). A listed name
/// that is absolute or has a `..` component, and a file resolving outside `dir` through a
/// symbolic link, are skipped with a warning naming them (issue 32).
pub(super) fn shaderdata_files(
    dir: &Path,
    filenames: Option<&serde_json::Value>,
    w: &mut Warnings,
) -> Vec<(u32, PathBuf)> {
    let mut list: Vec<(u32, i64, u32, PathBuf)> = Vec::new();
    if let Some(map) = filenames
        .and_then(|f| f.get("shaderdata_filenames"))
        .and_then(|v| v.as_object())
    {
        for (se, entries) in map {
            let Ok(se) = se.parse::<u32>() else {
                w.add("filenames.json: non-numeric shader engine key", || {
                    se.clone()
                });
                continue;
            };
            for (i, e) in entries.as_array().into_iter().flatten().enumerate() {
                let file = e.get(0).and_then(|f| f.as_str());
                let begin = e.get(1).and_then(|b| b.as_i64()).unwrap_or(0);
                let Some(f) = file else {
                    w.add("filenames.json: malformed shaderdata entry", || {
                        e.to_string()
                    });
                    continue;
                };
                // An untrusted name: inside the UI directory, or skipped and named.
                let Some(p) = discover::listed(dir, f) else {
                    w.add(discover::LISTED_OUTSIDE, || {
                        format!("{}: {f:?}", dir.join("filenames.json").display())
                    });
                    continue;
                };
                if !discover::resolves_inside(dir, &p) {
                    w.add(discover::LINK_OUTSIDE, || p.display().to_string());
                } else if p.is_file() {
                    list.push((se, begin, i as u32, p));
                } else if p.exists() {
                    w.add("listed shaderdata file is not a regular file", || {
                        p.display().to_string()
                    });
                } else {
                    w.add("listed shaderdata file missing", || p.display().to_string());
                }
            }
        }
    }
    if list.is_empty() {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if se_idx(&n).is_some() && !discover::resolves_inside(dir, &e.path()) {
                    w.add(discover::LINK_OUTSIDE, || e.path().display().to_string());
                } else if let Some((se, idx)) = se_idx(&n) {
                    list.push((se, 0, idx, e.path()));
                } else if n.starts_with("shaderdata_") && n.ends_with(".json") {
                    w.add("shaderdata file name without a shader engine", || {
                        e.path().display().to_string()
                    });
                }
            }
        }
    }
    list.sort();
    list.into_iter().map(|(se, _, _, p)| (se, p)).collect()
}

/// Records per message from the parsing thread to the decoder (64 Ki x 32 bytes = 2 MiB).
const BATCH: usize = 1 << 16;

/// A message from [`parse_files`] to the decoder, in file order.
pub(super) enum Batch<'a> {
    /// Records of one file (its shader engine, up to [`BATCH`] records in file order).
    Records(u32, Vec<Record>),
    /// A file that cannot be opened or read, with the error text.
    Unreadable(&'a Path, String),
    /// A file is complete: what reading it gave besides its records.
    Done(&'a Path, json::ShaderdataFile),
}

/// Parses `files` in order and sends their records in batches, then each file's result. Files
/// up to [`json::IN_MEMORY_LIMIT`] bytes are read whole (the fast slice reader), larger ones
/// streamed. Emptied buffers come back through `spare`. Stops when the decoder is gone.
pub(super) fn parse_files<'a>(
    files: &'a [(u32, PathBuf)],
    pb: &ProgressBar,
    tx: &std::sync::mpsc::SyncSender<Batch<'a>>,
    spare: &std::sync::mpsc::Receiver<Vec<Record>>,
) {
    let fresh = || {
        spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH))
    };
    for (se, path) in files {
        let se = *se;
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                if tx.send(Batch::Unreadable(path, e.to_string())).is_err() {
                    return;
                }
                continue;
            }
        };
        let size = file.metadata().map_or(u64::MAX, |m| m.len());
        let mut buf = fresh();
        let mut gone = false;
        let mut push = |r: Record| {
            buf.push(r);
            if buf.len() == BATCH {
                let full = std::mem::replace(&mut buf, fresh());
                gone |= tx.send(Batch::Records(se, full)).is_err();
            }
        };
        let res = if size <= json::IN_MEMORY_LIMIT {
            let mut bytes = Vec::with_capacity(size as usize);
            if let Err(e) = pb.wrap_read(file).read_to_end(&mut bytes) {
                if tx.send(Batch::Unreadable(path, e.to_string())).is_err() {
                    return;
                }
                continue;
            }
            json::read_shaderdata_slice(&bytes, &mut push)
        } else {
            let reader = BufReader::with_capacity(1 << 20, pb.wrap_read(file));
            json::read_shaderdata(reader, &mut push)
        };
        if gone
            || (!buf.is_empty() && tx.send(Batch::Records(se, buf)).is_err())
            || tx.send(Batch::Done(path, res)).is_err()
        {
            return;
        }
    }
}

/// The warnings of one shaderdata file's result.
pub(super) fn file_warnings(path: &Path, res: &json::ShaderdataFile, w: &mut Warnings) {
    let p = || path.display().to_string();
    if let Some(e) = &res.error {
        w.add(
            "shaderdata JSON invalid or truncated (records before the error used)",
            || format!("{}: {e}", p()),
        );
    }
    w.add_n("shaderdata rows malformed (skipped)", res.malformed, p);
    if let Some(t) = &res.unexpected_type {
        w.add(
            "shaderdata \"type\" neither \"shaderdata\" nor \"S_TTRACEDATA\"",
            || format!("{}: {t}", p()),
        );
    }
    if let Some(s) = &res.bad_schema {
        w.add(
            "shaderdata records_schema lacks a column (file skipped)",
            || format!("{}: {s}", p()),
        );
    }
    if let Some(c) = res.count_mismatch {
        w.add(
            "shaderdata records_count differs from the rows read",
            || format!("{}: records_count {c}", p()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listed shaderdata file that exists but is a directory is named as such, one that does
    /// not exist as missing, and a regular one is kept (fresh-tester finding: both were
    /// "missing").
    #[test]
    fn listed_shaderdata_kinds() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("se0.json")).unwrap();
        std::fs::write(t.path().join("se1.json"), "{}").unwrap();
        let listing = serde_json::json!({"shaderdata_filenames": {
            "0": [["se0.json", 0]], "1": [["se1.json", 0]], "2": [["se2.json", 0]]}});
        let mut w = Warnings::default();
        let files = shaderdata_files(t.path(), Some(&listing), &mut w);
        assert_eq!(files, vec![(1, t.path().join("se1.json"))]);
        assert_eq!(w.count("listed shaderdata file is not a regular file"), 1);
        assert_eq!(w.count("listed shaderdata file missing"), 1);
    }

    /// Listed names leading outside the UI directory are skipped and named (issue 32): `..`,
    /// absolute paths and symbolic links leading out; a subdirectory is fine.
    #[test]
    fn listed_shaderdata_stays_inside() {
        let t = tempfile::tempdir().unwrap();
        let ui = t.path().join("cap/ui");
        std::fs::create_dir_all(ui.join("sub")).unwrap();
        let outside = t.path().join("outside.json");
        std::fs::write(&outside, "{}").unwrap();
        std::fs::write(ui.join("sub/se0.json"), "{}").unwrap();
        std::os::unix::fs::symlink(&outside, ui.join("link.json")).unwrap();
        let abs = outside.to_str().unwrap();
        let listing = serde_json::json!({"shaderdata_filenames": {
            "0": [["sub/se0.json", 0]], "1": [["../../outside.json", 0]], "2": [[abs, 0]],
            "3": [["link.json", 0]]}});
        let mut w = Warnings::default();
        let files = shaderdata_files(&ui, Some(&listing), &mut w);
        assert_eq!(files, vec![(0, ui.join("sub/se0.json"))]);
        assert_eq!(w.count(discover::LISTED_OUTSIDE), 2);
        assert_eq!(w.count(discover::LINK_OUTSIDE), 1);
        assert!(w.to_string().contains("\"../../outside.json\""), "{w}");
        // Found by name (no listing): a link leading out is skipped too.
        std::fs::rename(ui.join("link.json"), ui.join("shaderdata_3_0.json")).unwrap();
        let mut w = Warnings::default();
        assert!(shaderdata_files(&ui, None, &mut w).is_empty());
        assert_eq!(w.count(discover::LINK_OUTSIDE), 1);
    }
}
