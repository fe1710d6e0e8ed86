//! Positioned reads of an input (a host ELF, a bundle file): [`Source`] is implemented by byte
//! slices held in memory and by [`FileSource`], a regular file read with `pread`
//! (`std::os::unix::fs::FileExt::read_exact_at`), so that a 1.3 GB shared library is never held
//! whole: only its ELF headers, wrappers, relocations and one offload bundle at a time are read.
//!
//! Offsets and lengths are in bytes from the start of the input. A read that does not fit in
//! [`Source::size`] is an [`Error::Truncated`] with the same fields as a read from a slice of that
//! length; a read the operating system fails or cuts short (the file shrank after it was opened)
//! is an [`Error::Input`] naming the offset.

use std::borrow::Cow;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};

/// Bytes copied per chunk by [`Source::copy_to`] (bytes): 8 MiB.
const COPY_CHUNK: u64 = 8 << 20;

/// An input read by offset. Implemented by `[u8]` and `Vec<u8>` (reads borrow) and by
/// [`FileSource`] (reads allocate exactly the bytes asked for).
pub trait Source {
    /// Length of the input (bytes).
    fn size(&self) -> u64;

    /// Reads `len` bytes at `offset`: borrowed from memory, or owned when read from a file.
    /// `what` names the structure for the error. Errors: [`Error::Truncated`] when
    /// `offset + len` is past [`Source::size`] (nothing is allocated), [`Error::Input`] when the
    /// read fails or is cut short.
    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>>;

    /// Copies `len` bytes at `offset` of the input to `out` at its current position, without
    /// holding them all in memory (a file is copied in chunks of 8 MiB). `out_offset` is the
    /// output position, for errors.
    /// Errors: [`Error::Truncated`] as [`Source::read_at`]; [`Error::Input`] for a read that
    /// fails or ends early; [`Error::Output`] for a failed write.
    fn copy_to<W: Write + ?Sized>(
        &self,
        offset: u64,
        len: u64,
        out: &mut W,
        out_offset: u64,
    ) -> Result<()> {
        check(self.size(), offset, len, "input range")?;
        let mut done = 0u64;
        while done < len {
            let n = COPY_CHUNK.min(len - done);
            let chunk = self.read_at(offset + done, n, "input range")?;
            out.write_all(&chunk)
                .map_err(output_error(out_offset + done))?;
            done += n;
        }
        Ok(())
    }
}

/// [`Error::Truncated`] unless `[offset, offset + len)` lies in `0..size`.
pub(crate) fn check(size: u64, offset: u64, len: u64, what: &'static str) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::Truncated {
            what,
            offset,
            need: len,
            len: size,
        }),
    }
}

fn output_error(offset: u64) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::Output {
        offset,
        detail: e.to_string(),
    }
}

impl Source for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>> {
        check(self.size(), offset, len, what)?;
        Ok(Cow::Borrowed(
            &self[offset as usize..(offset + len) as usize],
        ))
    }
}

impl Source for Vec<u8> {
    fn size(&self) -> u64 {
        self.as_slice().size()
    }

    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>> {
        self.as_slice().read_at(offset, len, what)
    }
}

/// A regular file read by offset. Its length is taken once, when it is opened: a file that
/// shrinks afterwards gives [`Error::Input`] at the first read past its new end.
#[derive(Debug)]
pub struct FileSource {
    file: std::fs::File,
    size: u64,
}

impl FileSource {
    /// Wraps an open regular file (its length is read now). Errors: [`Error::Input`] at offset 0
    /// when its metadata cannot be read or it is not a regular file (a pipe or a device cannot
    /// be read by offset: read it whole and use a slice).
    pub fn new(file: std::fs::File) -> Result<FileSource> {
        let input = |detail: String| Error::Input { offset: 0, detail };
        let meta = file.metadata().map_err(|e| input(e.to_string()))?;
        if !meta.is_file() {
            return Err(input(
                "not a regular file: it cannot be read by offset".into(),
            ));
        }
        Ok(FileSource {
            file,
            size: meta.len(),
        })
    }

    /// Opens `path` and wraps it ([`FileSource::new`]). Errors: [`Error::Input`].
    pub fn open(path: &std::path::Path) -> Result<FileSource> {
        let file = std::fs::File::open(path).map_err(|e| Error::Input {
            offset: 0,
            detail: e.to_string(),
        })?;
        FileSource::new(file)
    }

    fn short(offset: u64, len: u64, e: &std::io::Error) -> Error {
        let detail = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!(
                "the file ended before the {len} bytes read here (it was shorter than when it \
                 was opened: changed while being read?)"
            )
        } else {
            format!("reading {len} bytes: {e}")
        };
        Error::Input { offset, detail }
    }
}

impl Source for FileSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>> {
        check(self.size, offset, len, what)?;
        let n = usize::try_from(len).map_err(|_| Error::Input {
            offset,
            detail: format!("{len} bytes do not fit in memory"),
        })?;
        let mut buf = vec![0u8; n];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Self::short(offset, len, &e))?;
        Ok(Cow::Owned(buf))
    }
}

/// The first `end` bytes of a source, with offsets unchanged: a read past `end` is an
/// [`Error::Truncated`] whose `len` is `end`, as from a slice cut at `end`. Used to read a
/// region (a `.hip_fatbin` section) of a larger file.
#[derive(Debug)]
pub struct Prefix<'a, S: Source + ?Sized> {
    /// The whole input.
    pub source: &'a S,
    /// End of the region (bytes; at most `source.size()`).
    pub end: u64,
}

impl<S: Source + ?Sized> Source for Prefix<'_, S> {
    fn size(&self) -> u64 {
        self.end
    }

    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>> {
        check(self.end, offset, len, what)?;
        self.source.read_at(offset, len, what)
    }
}

/// Bytes `data` that stand at file offset `base` of a larger file: read by file offset, so
/// that errors name file offsets (a read before `base` or past its end is an
/// [`Error::Truncated`]). Used to locate the bundles of a region held in memory.
#[derive(Debug)]
pub(crate) struct Based<'a> {
    /// The region's bytes.
    pub data: &'a [u8],
    /// File offset of `data[0]` (bytes).
    pub base: u64,
}

impl Source for Based<'_> {
    fn size(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    fn read_at(&self, offset: u64, len: u64, what: &'static str) -> Result<Cow<'_, [u8]>> {
        check(self.size(), offset, len, what)?;
        match offset.checked_sub(self.base) {
            Some(at) => self.data.read_at(at, len, what),
            None => Err(Error::Truncated {
                what,
                offset,
                need: len,
                len: self.size(),
            }),
        }
    }
}

/// Copies `len` input bytes at `offset` to output offset `out_offset` of a seekable output.
/// Errors: as [`Source::copy_to`]; [`Error::Output`] when seeking fails.
pub fn copy_at<S: Source + ?Sized, W: Write + Seek + ?Sized>(
    src: &S,
    offset: u64,
    len: u64,
    out: &mut W,
    out_offset: u64,
) -> Result<()> {
    out.seek(SeekFrom::Start(out_offset))
        .map_err(output_error(out_offset))?;
    src.copy_to(offset, len, out, out_offset)
}
