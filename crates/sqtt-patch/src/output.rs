//! Where outputs go (issue 17, items 1-3 and 11). Every output path (`-o`, `--report-json`,
//! a batch output file) is checked before any work is done:
//!
//! - a regular file, or a path that does not exist yet in an existing directory, is written
//!   atomically: a temporary file in the same directory, renamed over the path when complete
//!   (nothing is left behind on error);
//! - a character device or a FIFO (`-o /dev/null` as a dry run, a pipe) is streamed into in
//!   place, never replaced;
//! - a symbolic link is written through, never replaced (issue 32): a link to a regular file
//!   names that file, a link to a device or FIFO (`/dev/stdout`) is streamed into; a dangling
//!   link is refused;
//! - a directory (or a path ending in `/`), a socket, a block device, a path whose directory
//!   does not exist, or a directory in which no file can be created (read-only file system,
//!   missing permission) is refused with a message naming the option.
//!
//! Errors name the option and the path (`-o out.co: cannot write: No space left on device (os
//! error 28)`); `main` turns them into exit code 2 (README "Exit codes").

use anyhow::{bail, Context, Result};
use std::io::{Seek, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A checked output path.
#[derive(Debug, Clone)]
pub struct Dest {
    /// The path as given (`-` for standard output, see [`stdout`]).
    pub path: PathBuf,
    /// True for a character device, a FIFO or standard output: written in place, never
    /// renamed over.
    pub stream: bool,
    /// The destination in messages: the option and the path (`-o out.co`), or `standard
    /// output`.
    pub label: String,
}

/// Standard output as a destination (the `-` of `--folded -`).
pub fn stdout() -> Dest {
    Dest {
        path: PathBuf::from("-"),
        stream: true,
        label: "standard output".into(),
    }
}

/// True for the [`stdout`] destination.
fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes all of `s` to standard output and flushes it, its control characters escaped
/// ([`terminal_safe`]). A closed pipe (`| head`) is not an error (exit 0); any other write error
/// is, naming standard output (`> /dev/full`).
pub fn write_stdout(s: &str) -> Result<i32> {
    write_stdout_bytes(terminal_safe(s).as_bytes())
}

/// `s` with every control character but newline and tab written as its Rust escape (`\u{1b}`,
/// `\0`): names and ids come from the input, and an escape sequence in a symbol name or a
/// bundle entry id must not reach the user's terminal (it could retitle it, clear it or move
/// the cursor). C1 controls (U+0080..U+009F, e.g. the one-byte CSI U+009B) count too.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`write_stdout`] for bytes.
fn write_stdout_bytes(b: &[u8]) -> Result<i32> {
    let mut out = std::io::stdout().lock();
    match out.write_all(b).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("standard output: cannot write")
        }
        _ => Ok(0),
    }
}

/// Refuses an output path (named by `flag`) that is one of `inputs` (the same file by device
/// and inode, so through links too): a run never writes over what it reads.
pub fn check_not_input(flag: &str, path: &Path, inputs: &[PathBuf]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return Ok(());
    };
    if !m.is_file() {
        return Ok(());
    }
    for i in inputs {
        if std::fs::metadata(i).is_ok_and(|n| (n.dev(), n.ino()) == (m.dev(), m.ino())) {
            bail!(
                "{flag} {}: is an input of this run ({}); choose another path",
                path.display(),
                i.display()
            );
        }
    }
    Ok(())
}

/// Checks `path`, named by `flag` (`-o`, `--report-json`) in messages, before any work.
/// Errors: a directory or a path ending in `/`, a socket or block device, a missing directory,
/// a directory in which no file can be created ([`check_writable`]; a regular file is written
/// through a temporary file there), an existing file in an append-only directory (it cannot be
/// replaced: [`crate::anonfile::append_only`]).
pub fn check(flag: &str, path: &Path) -> Result<Dest> {
    let shown = path.display();
    let label = format!("{flag} {shown}");
    if path.is_dir() {
        bail!("{flag} {shown}: is a directory; give a file path");
    }
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        bail!("{flag} {shown}: ends in '/', so it names a directory; give a file path");
    }
    let through = through_link(flag, path)?;
    let path = through.as_deref().unwrap_or(path);
    match std::fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            let stream = t.is_char_device() || t.is_fifo();
            if !t.is_file() && !stream {
                let kind = if t.is_socket() {
                    "a socket"
                } else if t.is_block_device() {
                    "a block device"
                } else {
                    "not a regular file"
                };
                bail!("{flag} {shown}: {kind}; refusing to write over it");
            }
            if !stream {
                check_writable(&label, parent(path))?;
                if crate::anonfile::append_only(parent(path)) {
                    return Err(crate::anonfile::append_only_error(path))
                        .with_context(|| format!("{label}: cannot write"));
                }
            }
            Ok(Dest {
                path: path.to_path_buf(),
                stream,
                label,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent(path);
            if !dir.is_dir() {
                bail!("{label}: directory {} does not exist", dir.display());
            }
            check_writable(&label, dir)?;
            Ok(Dest {
                path: path.to_path_buf(),
                stream: false,
                label,
            })
        }
        Err(e) => Err(e).with_context(|| format!("{flag} {shown}: cannot inspect")),
    }
}

/// A symbolic link is never replaced: the output is written through it, as `cp` does. For a
/// link to a regular file this is the file the link resolves to (so the atomic rename happens
/// beside the real file and the link stays); a link to a device or FIFO (`/dev/stdout`) is
/// streamed into through the link. `None` when `path` is not a link or when it leads to a
/// stream. Errors: a link that leads nowhere (dangling, or a loop), named with the option.
fn through_link(flag: &str, path: &Path) -> Result<Option<PathBuf>> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(None);
    }
    let target = std::fs::metadata(path).map_err(|e| {
        anyhow::anyhow!(
            "{flag} {}: a symbolic link that leads to no file ({e}); give the target path",
            path.display()
        )
    })?;
    let t = target.file_type();
    if t.is_char_device() || t.is_fifo() {
        return Ok(None);
    }
    std::fs::canonicalize(path).map(Some).with_context(|| {
        format!(
            "{flag} {}: cannot resolve the symbolic link",
            path.display()
        )
    })
}

/// Refuses directory `dir` when no file can be created in it (a read-only file system such as
/// `/sys`, a directory without write permission, a path that is not a directory), found by
/// creating an unnamed temporary file there, which leaves nothing behind. `label` names the
/// output in the message (`-o out/a.co`); the message names the directory and the OS error.
pub fn check_writable(label: &str, dir: &Path) -> Result<()> {
    match tempfile::tempfile_in(dir) {
        Ok(_) => Ok(()),
        Err(e) => bail!(
            "{label}: cannot create files in directory {}: {e}",
            dir.display()
        ),
    }
}

/// Checks the output directory `dir` of `batch -o` before any work: it need not exist yet, but
/// its nearest existing ancestor (itself when it exists) must be a directory in which files can
/// be created ([`check_writable`]), so that a read-only location is refused once (exit 2) rather
/// than failing every input. Errors name `-o`, the directory and the OS error.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    let label = format!("-o {}", dir.display());
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => return check_writable(&label, at),
            Ok(_) => bail!("{label}: {} is not a directory", at.display()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) && parent(at) != at =>
            {
                at = parent(at);
            }
            Err(e) => {
                return Err(e).with_context(|| format!("{label}: cannot inspect {}", at.display()))
            }
        }
    }
}

/// The directory a path lives in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The path's identity for "same file" checks: the canonical path, or for a file that does not
/// exist yet the canonical directory joined with the file name.
fn identity(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok().or_else(|| {
        let dir = std::fs::canonicalize(parent(path)).ok()?;
        Some(dir.join(path.file_name()?))
    })
}

/// Refuses two paths (named by their flags) that are the same file, unless it is a character
/// device (`/dev/null` may take both).
pub fn check_distinct(a_flag: &str, a: &Path, b_flag: &str, b: &Path) -> Result<()> {
    let device = std::fs::metadata(a).is_ok_and(|m| m.file_type().is_char_device());
    if !device && identity(a).is_some_and(|x| Some(x) == identity(b)) {
        bail!(
            "{b_flag} {}: the same file as {a_flag} {}; choose another path",
            b.display(),
            a.display()
        );
    }
    Ok(())
}

/// An output being written: a temporary file next to a regular destination, or an unnamed
/// temporary file for a stream destination (copied into it on [`Sink::commit`]).
pub struct Sink {
    dest: Dest,
    tmp: Tmp,
}

enum Tmp {
    /// The file and its registration for deletion if the run is interrupted; the registration
    /// is dropped after the file (fields drop in order), so no moment leaves the file unlisted.
    Named(tempfile::NamedTempFile, crate::interrupt::Registered),
    /// A file without a name in the destination's directory ([`crate::anonfile`]): nothing is
    /// visible until it is complete, even if the process is killed.
    Anon(std::fs::File),
    Unnamed(std::fs::File),
}

impl Sink {
    /// Opens the temporary file. Errors: the directory is not writable.
    pub fn new(dest: &Dest) -> Result<Sink> {
        let tmp = if dest.stream {
            Tmp::Unnamed(tempfile::tempfile().context("cannot create a temporary file")?)
        } else if let Ok(f) = crate::anonfile::create_in(parent(&dest.path)) {
            Tmp::Anon(f)
        } else {
            // No O_TMPFILE here (an old kernel, a file system without it): a named temporary
            // file, deleted on SIGINT/SIGTERM but not on SIGKILL.
            let dir = parent(&dest.path);
            let (t, registered) = crate::interrupt::Registered::create(|| {
                tempfile::NamedTempFile::new_in(dir).with_context(|| {
                    format!(
                        "{}: cannot create a temporary file in {}",
                        dest.label,
                        dir.display()
                    )
                })
            })?;
            Tmp::Named(t, registered)
        };
        Ok(Sink {
            dest: dest.clone(),
            tmp,
        })
    }

    /// The temporary file to write to.
    pub fn file(&mut self) -> &mut std::fs::File {
        match &mut self.tmp {
            Tmp::Named(t, _) => t.as_file_mut(),
            Tmp::Anon(f) | Tmp::Unnamed(f) => f,
        }
    }

    /// Finishes the output: gives a regular file the permissions of `like` (0644 when `None`),
    /// syncs and renames it over the destination; copies into a stream destination. On error
    /// the temporary file is deleted.
    pub fn commit(self, like: Option<&Path>) -> Result<()> {
        let _committing = crate::interrupt::Committing::begin();
        self.commit_now(like)?;
        crate::interrupt::kept();
        Ok(())
    }

    /// [`Sink::commit`] without the interrupt bookkeeping.
    fn commit_now(self, like: Option<&Path>) -> Result<()> {
        let path = &self.dest.path;
        let cannot = || format!("{}: cannot write", self.dest.label);
        match self.tmp {
            Tmp::Unnamed(mut f) if is_stdout(path) => {
                f.rewind().with_context(cannot)?;
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut bytes).with_context(cannot)?;
                write_stdout_bytes(&bytes).map(drop)
            }
            Tmp::Unnamed(mut f) => {
                f.rewind().with_context(cannot)?;
                let mut out = open_stream(path).with_context(cannot)?;
                copy_to_stream(&mut f, &mut out).with_context(cannot)?;
                out.flush().with_context(cannot)
            }
            Tmp::Anon(f) => {
                finish_file(&f, like).with_context(cannot)?;
                crate::anonfile::link_into_place(&f, path).with_context(cannot)
            }
            Tmp::Named(t, _registered) => {
                finish_file(t.as_file(), like).with_context(cannot)?;
                // The error carries the temporary file: drop it here (deleting it) and keep
                // only the I/O error, whose text the persist error would otherwise repeat.
                t.persist(path).map_err(|e| e.error).with_context(cannot)?;
                Ok(())
            }
        }
    }
}

/// Gives a complete output file the permissions of `like` (0644 when `None` or unreadable) and
/// syncs it, before it is put in place.
fn finish_file(f: &std::fs::File, like: Option<&Path>) -> std::io::Result<()> {
    let mode = like
        .and_then(|l| std::fs::metadata(l).ok())
        .map_or(0o644, |m| m.permissions().mode() & 0o7777);
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.sync_all()
}

/// Polling interval while a FIFO has no reader or a full pipe (milliseconds).
const STREAM_WAIT_MS: u64 = 10;

/// The error when a signal arrives while a stream destination waits.
fn interrupted_wait() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "interrupted while waiting for the reader",
    )
}

/// Opens a stream destination (a FIFO or character device) for writing without blocking: a
/// FIFO with no reader (`open(2)`: ENXIO with `O_NONBLOCK`) is retried until one comes or a
/// signal arrives (issue 32 item 7: a blocking `open` kept Ctrl-C from ending the run); the
/// first such wait is announced on stderr, naming the FIFO, as FIFO inputs are.
fn open_stream(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut announced = false;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if !announced {
                    eprintln!(
                        "sqtt-patch: {}: a FIFO with no reader: waiting for one (Ctrl-C stops)",
                        path.display()
                    );
                    announced = true;
                }
                if crate::interrupt::stopping() {
                    return Err(interrupted_wait());
                }
                std::thread::sleep(std::time::Duration::from_millis(STREAM_WAIT_MS));
            }
            other => return other,
        }
    }
}

/// Copies `src` into a non-blocking stream ([`write_to_stream`]).
fn copy_to_stream(src: &mut std::fs::File, out: &mut std::fs::File) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match std::io::Read::read(src, &mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => write_to_stream(&buf[..n], out)?,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes `bytes` into a non-blocking stream, waiting while it is full (a pipe whose reader is
/// slow) and giving up when a signal arrives.
fn write_to_stream(mut rest: &[u8], out: &mut std::fs::File) -> std::io::Result<()> {
    while !rest.is_empty() {
        match out.write(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(k) => rest = &rest[k..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if crate::interrupt::stopping() {
                    return Err(interrupted_wait());
                }
                std::thread::sleep(std::time::Duration::from_millis(STREAM_WAIT_MS));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Commits outputs of one run together: streams first (a failure there leaves no regular file
/// renamed), then the regular files. Every sink not committed when an error is returned is
/// dropped, deleting its temporary file.
pub fn commit_all(sinks: Vec<Sink>) -> Result<()> {
    let _committing = crate::interrupt::Committing::begin();
    let (streams, files): (Vec<Sink>, Vec<Sink>) = sinks.into_iter().partition(|s| s.dest.stream);
    for s in streams.into_iter().chain(files) {
        s.commit(None)?;
    }
    Ok(())
}

/// Writes the JSON report `report` (its text and the `--report-json` path, `-` for standard
/// output), if there is one.
pub fn write_report_if(report: Option<(&str, &Path)>) -> Result<()> {
    match report {
        Some((text, path)) => write_report("--report-json", path, text),
        None => Ok(()),
    }
}

/// Commits an output (`out`, given the mode of `like` when it is a regular file) and its JSON
/// report ([`write_report_if`]) so that neither is in place without the other: a stream output
/// (a device or FIFO, written in place) is written first, so its write error leaves no report;
/// then the report; then the regular output's rename, the last step that can fail (its
/// temporary file is deleted when an earlier one does).
pub fn commit_with_report(
    out: Sink,
    like: Option<&Path>,
    report: Option<(&str, &Path)>,
) -> Result<()> {
    let _committing = crate::interrupt::Committing::begin();
    if out.dest.stream {
        out.commit(like)?;
        return write_report_if(report);
    }
    write_report_if(report)?;
    out.commit(like)
}

/// [`write`] of `bytes` to `dest` together with the JSON report, in the order of
/// [`commit_with_report`]: a stream destination is written in place first, a regular file goes
/// through a temporary file renamed after the report is written.
pub fn write_with_report(
    dest: &Dest,
    bytes: &[u8],
    like: Option<&Path>,
    report: Option<(&str, &Path)>,
) -> Result<()> {
    if dest.stream {
        let _committing = crate::interrupt::Committing::begin();
        write(dest, bytes, like)?;
        return write_report_if(report);
    }
    let mut sink = Sink::new(dest)?;
    sink.file()
        .write_all(bytes)
        .with_context(|| format!("{}: cannot write", dest.label))?;
    commit_with_report(sink, like, report)
}

/// Writes `bytes` to a checked destination: atomically for a regular file (mode of `like`, or
/// 0644), in place for a stream.
pub fn write(dest: &Dest, bytes: &[u8], like: Option<&Path>) -> Result<()> {
    let cannot = || format!("{}: cannot write", dest.label);
    if dest.stream {
        let mut out = open_stream(&dest.path).with_context(cannot)?;
        return write_to_stream(bytes, &mut out).with_context(cannot);
    }
    let mut sink = Sink::new(dest)?;
    sink.file().write_all(bytes).with_context(cannot)?;
    sink.commit(like)
}

/// Checks `path` (named by `flag`) and writes `bytes` to it; `-` is standard output.
pub fn write_report(flag: &str, path: &Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        crate::cmd_patch::write_stdout(text)?;
        return Ok(());
    }
    write(&check(flag, path)?, text.as_bytes(), None)
}
