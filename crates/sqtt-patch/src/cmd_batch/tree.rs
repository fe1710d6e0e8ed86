//! `batch DIR -o OUTDIR --copy-tree`: OUTDIR becomes a copy of DIR (issue 37: a rocBLAS or
//! hipBLASLt library directory, whose catalogues `TensileLibrary_*.dat` sit beside the code
//! objects the library loads by name). The batch writes the instrumented code objects at their
//! relative paths; [`complete`] then copies everything else byte for byte: files the batch did
//! not write (catalogues, other data, code objects whose output was not written), symbolic links
//! as links with the same link text, and empty directories.

use anyhow::{Context, Result};
use std::path::Path;

/// What [`complete`] copied.
#[derive(Debug, Default)]
pub(super) struct Copied {
    /// Regular files copied unchanged.
    pub files: u64,
    /// Symbolic links recreated.
    pub links: u64,
    /// Entries that are neither files, directories nor links (FIFOs, sockets, devices): not
    /// copied, named here.
    pub special: Vec<String>,
}

/// Copies below `out` every entry of `src` that is not there yet (see the module docs); at most
/// [`super::discover::MAX_DEPTH`] directory levels, and symbolic links are never followed.
/// Errors name the path that could not be read or written.
pub(super) fn complete(src: &Path, out: &Path) -> Result<Copied> {
    let mut copied = Copied::default();
    walk(src, out, 0, &mut copied)?;
    Ok(copied)
}

fn walk(src: &Path, out: &Path, depth: usize, copied: &mut Copied) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("-o {}: cannot create directory", out.display()))?;
    if depth > super::discover::MAX_DEPTH {
        anyhow::bail!(
            "{}: more than {} directory levels",
            src.display(),
            super::discover::MAX_DEPTH
        );
    }
    let entries = std::fs::read_dir(src)
        .with_context(|| format!("{}: cannot read directory", src.display()))?;
    for e in entries {
        let e = e.with_context(|| format!("{}: cannot read directory", src.display()))?;
        let (from, to) = (e.path(), out.join(e.file_name()));
        let meta = std::fs::symlink_metadata(&from)
            .with_context(|| format!("{}: cannot read", from.display()))?;
        if meta.file_type().is_symlink() {
            if std::fs::symlink_metadata(&to).is_err() {
                let target = std::fs::read_link(&from)
                    .with_context(|| format!("{}: cannot read link", from.display()))?;
                std::os::unix::fs::symlink(&target, &to)
                    .with_context(|| format!("-o {}: cannot create link", to.display()))?;
                copied.links += 1;
            }
        } else if meta.is_dir() {
            walk(&from, &to, depth + 1, copied)?;
        } else if meta.is_file() {
            if std::fs::symlink_metadata(&to).is_err() {
                std::fs::copy(&from, &to).with_context(|| {
                    format!("-o {}: cannot copy {}", to.display(), from.display())
                })?;
                copied.files += 1;
            }
        } else {
            copied.special.push(from.display().to_string());
        }
    }
    // The directory's own mode, after its entries are written (a read-only directory would
    // refuse them otherwise).
    let mode = std::fs::metadata(src)
        .with_context(|| format!("{}: cannot read", src.display()))?
        .permissions();
    std::fs::set_permissions(out, mode)
        .with_context(|| format!("-o {}: cannot set the mode", out.display()))?;
    Ok(())
}
