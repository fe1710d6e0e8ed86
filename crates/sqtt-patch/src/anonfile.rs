//! Unnamed temporary files for outputs (issue 32 item 4): a run killed with SIGKILL cannot clean
//! up, so an output is written into a file that has no name until it is complete. Linux
//! `open(2)` with `O_TMPFILE` makes such a file in the destination's directory (same file
//! system, so it can be linked there); `linkat(2)` through `/proc/self/fd/N` with
//! `AT_SYMLINK_FOLLOW` gives it its name. The kernel frees it if the process dies first.
//!
//! A destination that already exists cannot be replaced by `linkat` (it fails with EEXIST): the
//! file is then linked under a unique temporary name beside it and renamed over it; only that
//! window of two system calls can leave a name behind, and it is registered for deletion on
//! SIGINT/SIGTERM like every temporary file ([`crate::interrupt`]).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An unnamed file in directory `dir`, open for reading and writing, mode 0600 until linked.
/// Errors: the kernel or file system has no `O_TMPFILE` (EOPNOTSUPP, EISDIR on old kernels), or
/// the directory is not writable.
pub fn create_in(dir: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// `linkat(AT_FDCWD, /proc/self/fd/N, AT_FDCWD, to, AT_SYMLINK_FOLLOW)`: names the unnamed
/// file `f` `to`. Errors: `to` exists (AlreadyExists), `/proc` is not mounted (NotFound), and
/// every other `linkat(2)` error.
fn link(f: &File, to: &Path) -> io::Result<()> {
    let from = c_path(Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())))?;
    let to = c_path(to)?;
    // SAFETY: both arguments are valid NUL-terminated strings that live across the call;
    // `linkat` reads them and touches no memory of ours.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `FS_APPEND_FL` of `FS_IOC_GETFLAGS` (Linux `include/uapi/linux/fs.h`: "writes to file may
/// only append"; `chattr +a`). In such a directory names can be added but none removed or
/// renamed over.
const FS_APPEND_FL: libc::c_long = 0x20;

/// Whether directory `dir` is append-only ([`FS_APPEND_FL`]): an existing file there cannot be
/// replaced, and a temporary name made beside it could never be removed again. `false` when
/// the flags cannot be read (a file system without `FS_IOC_GETFLAGS`).
pub fn append_only(dir: &Path) -> bool {
    let Ok(d) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
    else {
        return false;
    };
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one integer (at most a `long`) into `flags`, which lives
    // across the call; the descriptor is open.
    let r = unsafe { libc::ioctl(d.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
    r == 0 && flags & FS_APPEND_FL != 0
}

/// The error when `dest` exists in an append-only directory ([`append_only`]).
pub fn append_only_error(dest: &Path) -> io::Error {
    let dir = dest.parent().filter(|d| !d.as_os_str().is_empty());
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} already exists and its directory {} is append-only (chattr +a): a file there cannot be replaced; remove the attribute or write to a new name",
            dest.display(),
            dir.unwrap_or(Path::new(".")).display()
        ),
    )
}

/// Gives the complete unnamed file `f` the name `dest`, replacing a file there (see the module
/// docs). Errors: as [`link`] and `rename(2)`, and [`append_only_error`] (checked before any
/// temporary name is made); nothing is left under a temporary name.
pub fn link_into_place(f: &File, dest: &Path) -> io::Result<()> {
    match link(f, dest) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        other => return other,
    }
    let dir = dest.parent().filter(|d| !d.as_os_str().is_empty());
    if append_only(dir.unwrap_or(Path::new("."))) {
        return Err(append_only_error(dest));
    }
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    for attempt in 0..64u32 {
        let tmp: PathBuf = dir.unwrap_or(Path::new(".")).join(format!(
            ".{name}.sqtt-patch-{}-{attempt}",
            std::process::id()
        ));
        let named = crate::interrupt::Registered::make_at(tmp.clone(), |p| link(f, p));
        match named {
            Ok(_registered) => {
                let renamed = std::fs::rename(&tmp, dest);
                if renamed.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                return renamed;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name beside the output",
    ))
}
