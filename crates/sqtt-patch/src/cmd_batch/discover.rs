//! The inputs of a batch: files, directories searched recursively and globs (`*`, `?`, `[..]`,
//! `**`), each with the key its report row and output path are named by.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Directory levels followed below a root.
pub(super) const MAX_DEPTH: usize = 64;

/// A file to process and how it was found.
pub(super) struct Found {
    /// Path to read.
    pub path: PathBuf,
    /// Output path below OUTDIR, byte for byte (names that are not UTF-8 kept as they are):
    /// the file name of a file argument, `<root name>/<relative path>` below a directory or
    /// glob.
    pub rel: PathBuf,
    /// Report key: `rel` as text (bytes that are not UTF-8 shown as U+FFFD).
    pub key: String,
    /// Named on the command line (not found by walking a directory or expanding a glob).
    pub explicit: bool,
}

/// What [`discover`] found.
pub(super) struct Discovered {
    /// The files to process, sorted by key.
    pub found: Vec<Found>,
    /// Input errors (missing paths, duplicate keys): the rest of the batch still runs.
    pub errors: Vec<String>,
    /// What a directory walk did not visit, one line each: symbolic links to directories (not
    /// followed without `--follow-links`), directories and files already visited (the same
    /// device and inode reached again through a link).
    pub not_visited: Vec<String>,
}

/// Expands the PATH arguments into files with their report keys. Below a directory argument
/// every directory and file is visited once (by device and inode); symbolic links to
/// directories are followed only with `follow_links`, links to files not at all with
/// `skip_file_links` (`--copy-tree`: the file is processed where it is, the link recreated).
pub(super) fn discover(
    paths: &[PathBuf],
    follow_links: bool,
    skip_file_links: bool,
) -> Result<Discovered> {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let mut walker = Walker::new(follow_links, skip_file_links);
    for p in paths {
        let text = p.to_string_lossy();
        if p.is_file() {
            let rel = PathBuf::from(p.file_name().unwrap_or(p.as_os_str()));
            found.push(Found::new(p.clone(), rel, true));
        } else if p.is_dir() {
            let root = PathBuf::from(root_name(p));
            walker
                .walk(p, &root, 0, &mut |path, rel| {
                    found.push(Found::new(path, rel, false));
                })
                .with_context(|| format!("{}: cannot list", p.display()))?;
        } else if text.contains(['*', '?', '[']) {
            let before = found.len();
            expand_glob(p, &mut walker, &mut found)?;
            if found.len() == before {
                errors.push(format!("{text}: no file matches"));
            }
        } else if std::fs::symlink_metadata(p).is_ok() {
            errors.push(format!(
                "{text}: not a regular file or directory (a FIFO, device, socket or dangling link)"
            ));
        } else {
            errors.push(format!("{text}: no such file or directory"));
        }
    }
    found.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.rel.cmp(&b.rel)));
    let mut seen = BTreeSet::new();
    found.retain(|f| {
        if seen.insert(f.rel.clone()) {
            true
        } else {
            errors.push(format!(
                "{}: report path {} given twice",
                f.path.display(),
                f.key
            ));
            false
        }
    });
    Ok(Discovered {
        found,
        errors,
        not_visited: walker.not_visited.into_iter().map(|n| n.line).collect(),
    })
}

/// The name a root directory contributes to report keys and output paths: its last component
/// (of the canonical path for `.` and `..`), byte for byte.
pub(super) fn root_name(p: &Path) -> OsString {
    let named = p.file_name().map(|n| n.to_os_string());
    named
        .or_else(|| {
            std::fs::canonicalize(p)
                .ok()
                .and_then(|c| c.file_name().map(|n| n.to_os_string()))
        })
        .unwrap_or_else(|| "root".into())
}

impl Found {
    fn new(path: PathBuf, rel: PathBuf, explicit: bool) -> Found {
        let key = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        Found {
            path,
            rel,
            key,
            explicit,
        }
    }
}

/// What directory entry `p`, neither a directory nor a regular file (through links), is.
fn not_a_file(p: &Path) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    match std::fs::metadata(p).map(|m| m.file_type()) {
        Ok(t) if t.is_fifo() => "a FIFO, not a regular file",
        Ok(t) if t.is_socket() => "a socket, not a regular file",
        Ok(t) if t.is_char_device() || t.is_block_device() => "a device, not a regular file",
        Ok(_) => "not a regular file",
        Err(_) if link => "symbolic link to nothing that exists",
        Err(_) => "cannot be read",
    }
}

/// A directory walk that visits every directory and regular file once, by device and inode
/// (issue 32: two links to a directory's own parent made a walk endless, and one file was
/// processed 41 times).
pub(super) struct Walker {
    follow_links: bool,
    /// Symbolic links to files are not inputs (`--copy-tree` recreates them as links).
    skip_file_links: bool,
    seen: std::collections::HashSet<(u64, u64)>,
    not_visited: Vec<NotVisited>,
}

/// One entry a walk did not visit: its path relative to the walk's root (a glob keeps only the
/// entries it could match), whether it is a directory, and the line to print.
struct NotVisited {
    rel: PathBuf,
    dir: bool,
    line: String,
}

impl Walker {
    pub(super) fn new(follow_links: bool, skip_file_links: bool) -> Walker {
        Walker {
            follow_links,
            skip_file_links,
            seen: Default::default(),
            not_visited: Vec::new(),
        }
    }

    /// Whether `p` (followed through links) is visited for the first time; records it.
    fn first_visit(&mut self, p: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(p) {
            Ok(m) => self.seen.insert((m.dev(), m.ino())),
            Err(_) => false,
        }
    }

    /// Records an entry not visited (`rel`: its path below the walk's root).
    fn skip(&mut self, rel: &Path, dir: bool, line: String) {
        self.not_visited.push(NotVisited {
            rel: rel.to_path_buf(),
            dir,
            line,
        });
    }

    /// Visits every regular file below `dir` in name order, with its path `<prefix>/<relative
    /// path>` (names kept byte for byte), at most [`MAX_DEPTH`] levels deep. Symbolic links to files are followed; links to
    /// directories only with `follow_links`. What is not visited is listed in `not_visited`.
    pub(super) fn walk(
        &mut self,
        dir: &Path,
        prefix: &Path,
        depth: usize,
        visit: &mut dyn FnMut(PathBuf, PathBuf),
    ) -> std::io::Result<()> {
        if depth > MAX_DEPTH || !self.first_visit(dir) {
            if depth > 0 {
                self.skip(
                    prefix,
                    true,
                    format!("{}: directory already visited", dir.display()),
                );
            }
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        for e in entries {
            let key = prefix.join(e.file_name().unwrap_or_default());
            let link = std::fs::symlink_metadata(&e).is_ok_and(|m| m.file_type().is_symlink());
            if e.is_dir() {
                if link && !self.follow_links {
                    let line = format!(
                        "{}: symbolic link to a directory (pass --follow-links)",
                        e.display()
                    );
                    self.skip(&key, true, line);
                    continue;
                }
                self.walk(&e, &key, depth + 1, visit)?;
            } else if e.is_file() {
                if link && self.skip_file_links {
                    continue;
                }
                if self.first_visit(&e) {
                    visit(e, key);
                } else {
                    self.skip(
                        &key,
                        false,
                        format!("{}: file already visited", e.display()),
                    );
                }
            } else {
                // Session-25 fresh tester: FIFOs and dangling links were passed over silently.
                let line = format!("{}: {}", e.display(), not_a_file(&e));
                self.skip(&key, false, line);
            }
        }
        Ok(())
    }
}

/// Expands a glob: the leading components without wildcards name the root directory, the rest is
/// matched against paths below it (`*` and `?` within one component, `[..]` sets, `**` any number
/// of components).
pub(super) fn expand_glob(
    pattern: &Path,
    walker: &mut Walker,
    found: &mut Vec<Found>,
) -> Result<()> {
    let comps: Vec<String> = pattern
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let split = comps
        .iter()
        .position(|c| c.contains(['*', '?', '[']))
        .unwrap_or(comps.len());
    let base: PathBuf = if split == 0 {
        PathBuf::from(".")
    } else {
        comps[..split].iter().collect()
    };
    let pat: Vec<&str> = comps[split..].iter().map(String::as_str).collect();
    if !base.is_dir() {
        return Ok(());
    }
    let root = root_name(&base);
    let notes_before = walker.not_visited.len();
    walker
        .walk(&base, Path::new(""), 0, &mut |path, rel| {
            let parts = components(&rel);
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            if match_components(&pat, &parts) {
                found.push(Found::new(path, Path::new(&root).join(rel), false));
            }
        })
        .with_context(|| format!("{}: cannot list", base.display()))?;
    // Only what the pattern could have matched is worth a note (session-27 tester: a glob for
    // `*.co` files named every link to a directory and every FIFO beside them).
    let added = walker.not_visited.split_off(notes_before);
    walker.not_visited.extend(added.into_iter().filter(|n| {
        let parts = components(&n.rel);
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        if n.dir {
            may_match_below(&pat, &parts)
        } else {
            match_components(&pat, &parts)
        }
    }));
    Ok(())
}

/// The components of a relative path as text (bytes that are not UTF-8 shown as U+FFFD).
fn components(rel: &Path) -> Vec<String> {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// Whether some file below the directory `parts` could match the glob components `pat`.
fn may_match_below(pat: &[&str], parts: &[&str]) -> bool {
    match (pat.split_first(), parts.split_first()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((&"**", rest)), Some((_, tail))) => {
            may_match_below(rest, parts) || may_match_below(pat, tail)
        }
        (Some((p, rest)), Some((first, tail))) => {
            match_name(p.as_bytes(), first.as_bytes()) && may_match_below(rest, tail)
        }
    }
}

pub(super) fn match_components(pat: &[&str], parts: &[&str]) -> bool {
    match pat.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|i| match_components(rest, &parts[i..])),
        Some((p, rest)) => match parts.split_first() {
            Some((first, tail)) => {
                match_name(p.as_bytes(), first.as_bytes()) && match_components(rest, tail)
            }
            None => false,
        },
    }
}

/// Shell-style match of one path component: `*`, `?`, `[abc]`, `[a-z]`, `[!a]`.
pub(super) fn match_name(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| match_name(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && match_name(rest, &s[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&c| c == b']').map(|i| i + 1) else {
                return s.first() == Some(&b'[') && match_name(rest, &s[1..]);
            };
            let Some(&c) = s.first() else { return false };
            let (negate, set) = match rest[..close].split_first() {
                Some((b'!' | b'^', set)) => (true, set),
                _ => (false, &rest[..close]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && match_name(&rest[close + 1..], &s[1..])
        }
        Some((&c, rest)) => s.first() == Some(&c) && match_name(rest, &s[1..]),
    }
}

// ---------------------------------------------------------------- processing

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_components() {
        assert!(match_name(b"*.co", b"a.co"));
        assert!(!match_name(b"*.co", b"a.cox"));
        assert!(match_name(b"gfx9[0-4]?__*", b"gfx942__x"));
        assert!(!match_name(b"gfx9[!4]2", b"gfx942"));
        assert!(match_components(&["**", "*.co"], &["a", "b", "c.co"]));
        assert!(match_components(&["**", "*.co"], &["c.co"]));
        assert!(!match_components(&["*", "*.co"], &["c.co"]));
    }
}
