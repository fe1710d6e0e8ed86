//! Writing HIP fat binaries back: rebuilding offload bundles (plain or CCOB) and writing an
//! x86-64 host ELF (executable, PIE or shared library) whose bundles changed.
//!
//! Facts used (see `docs/background/code-objects.md`, "Host executables and shared libraries
//! with HIP fat binaries", clang's `ClangOffloadBundler` documentation and the System V gABI):
//! - `.hip_fatbin` holds one bundle per translation unit, each starting 4096-aligned with zero
//!   padding between (one bundle with the new offload driver and `-fgpu-rdc`).
//! - `.hipFatBinSegment` holds one 24-byte wrapper per translation unit, `{u32 "HIPF", u32 1,
//!   u64 pointer, u64 0}` (several may name one bundle with `-fgpu-rdc`); the pointer is set as
//!   [`crate::hostptr`] describes: an `R_X86_64_RELATIVE` addend, `S + A` of an `R_X86_64_64`,
//!   a `.relr.dyn` word, or absolute bytes in non-PIE executables. The runtime reads the bundle
//!   header from the pointer only.
//! - `llvm-objdump --offloading` reads the contents of every section that starts with a bundle
//!   magic (LLVM `llvm/lib/Object/OffloadBundle.cpp`), not the wrappers.
//!
//! Writing strategy ([`write_host`]): when every rebuilt bundle fits the slot of the bundle it
//! replaces, it is written in place and the rest of the slot zeroed. Otherwise the write is
//! append-only: every original byte is kept, a new read-only `PT_LOAD` is appended at the end of
//! the file holding a new program-header table and every bundle (rebuilt or copied), the
//! `.hip_fatbin` section header is pointed at the new bundles (so the stale originals are in no
//! section and tools see only the new ones), `e_phoff`/`e_phnum`/`PT_PHDR` are updated, and
//! every wrapper pointer, relocation (`R_X86_64_RELATIVE` addend, `R_X86_64_64` addend),
//! `.relr.dyn` word and `.dynsym`/`.symtab` symbol that named an old bundle start follows it.
//! `PT_GNU_STACK` is never touched.
//!
//! Memory: the input is a [`Source`] read by offset ([`scan_host`] reads only the ELF headers,
//! bundle headers, wrappers and relocations; a file is never read whole). [`HostWriter`]
//! streams the output to any [`Output`] (a file, or a `Cursor<Vec<u8>>`), copies unchanged
//! input ranges in chunks, and takes the rebuilt bundles one at a time, so a caller holds at
//! most one rebuilt bundle; [`write_host`] is the same writer from and into memory.

use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::ops::Range;

use crate::bundle::{self, Method, Storage, BUNDLE_ALIGN, BUNDLE_MAGIC, CCOB_MAGIC};
use crate::elf::{self, Elf};
use crate::error::{u64_at, Error, Result};
use crate::host::{PointerKind, HIPF_MAGIC};
use crate::hostptr::{reloc_symbol, Relocations, R_X86_64_64, R_X86_64_RELATIVE};
use crate::source::{check, copy_at, Prefix, Source};

/// `PT_INTERP`: the file is a program run by the kernel (gABI "Program Header").
const PT_INTERP: u32 = 3;
/// `PF_R`.
const PF_R: u32 = 4;
/// Page size assumed for file/address congruence of the appended segment (bytes).
const PAGE: u64 = 4096;
/// Size of one program header (bytes).
const PHDR_SIZE: u64 = 56;
/// Longest CCOB header (v3, bytes): what [`bundle_extent`] reads first.
const CCOB_HEADER_MAX: u64 = 32;
/// Largest zero padding accepted to keep the appended segment's address congruent with the
/// first `PT_LOAD` (older kernels compute `AT_PHDR` that way); beyond it only `PT_PHDR` is
/// relied upon (bytes).
const MAX_CONGRUENCE_PAD: u64 = 64 << 20;

/// Output format of a rebuilt bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BundleFormat {
    /// Same as the input: plain stays plain, a CCOB keeps its version and method.
    #[default]
    Keep,
    /// Uncompressed `__CLANG_OFFLOAD_BUNDLE__`.
    Plain,
    /// CCOB of this header version (1, 2, 3) and method.
    Compressed {
        /// Header version.
        version: u16,
        /// Compression method.
        method: Method,
    },
}

/// Rebuilds a bundle from its entries (id, contents) in the given order: entries at
/// 4096-aligned offsets like clang ([`bundle::write_plain`]); compressed per `format` relative
/// to the `original` storage ([`compress_like`]), with sizes and the MD5-based hash recomputed.
/// Entries may be owned or borrowed. Errors: as [`compress_like`].
pub fn rebuild_bundle<S: AsRef<str>, D: AsRef<[u8]>>(
    entries: &[(S, D)],
    original: &Storage,
    format: BundleFormat,
) -> Result<Vec<u8>> {
    compress_like(bundle::write_plain(entries), original, format)
}

/// Stores the plain bundle `plain` per `format` relative to the `original` storage: returned
/// as is (no copy) when the result is plain, else compressed by [`bundle::write_ccob`] (and
/// `plain` dropped). Errors: [`Error::InvalidEdit`] when the bundle does not fit the CCOB
/// version's size fields.
pub fn compress_like(plain: Vec<u8>, original: &Storage, format: BundleFormat) -> Result<Vec<u8>> {
    match (format, original) {
        (BundleFormat::Keep, Storage::Plain) | (BundleFormat::Plain, _) => Ok(plain),
        (BundleFormat::Keep, Storage::Compressed(h)) => {
            bundle::write_ccob(&plain, h.version, h.method)
        }
        (BundleFormat::Compressed { version, method }, _) => {
            bundle::write_ccob(&plain, version, method)
        }
    }
}

/// A seekable, readable and resizable byte sink the streaming writers ([`HostWriter`],
/// [`push_bundle_file`]) write to: a `std::fs::File` opened for reading AND writing (the
/// writer reads bundles back; `File::create` is write-only), a `Cursor<Vec<u8>>`, or `&mut`
/// either.
pub trait Output: Read + Write + Seek {
    /// Sets the length of the output to `len` bytes (truncating, or extending with zeros).
    fn set_len(&mut self, len: u64) -> std::io::Result<()>;
}

impl Output for std::fs::File {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        std::fs::File::set_len(self, len)
    }
}

impl Output for Cursor<Vec<u8>> {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        self.get_mut().resize(len, 0);
        Ok(())
    }
}

impl<T: Output + ?Sized> Output for &mut T {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        (**self).set_len(len)
    }
}

fn io_error(offset: u64) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::Output {
        offset,
        detail: e.to_string(),
    }
}

/// Writes `bytes` at output offset `off` (zero-filling any gap before it).
fn put<W: Output>(out: &mut W, off: u64, bytes: &[u8]) -> Result<()> {
    out.seek(SeekFrom::Start(off)).map_err(io_error(off))?;
    out.write_all(bytes).map_err(io_error(off))
}

fn put_u64<W: Output>(out: &mut W, off: u64, v: u64) -> Result<()> {
    put(out, off, &v.to_le_bytes())
}

/// Reads `len` bytes back from output offset `off`.
fn get<W: Output>(out: &mut W, off: u64, len: u64) -> Result<Vec<u8>> {
    let mut buf = vec![
        0u8;
        usize::try_from(len).map_err(|_| Error::Output {
            offset: off,
            detail: format!("{len} bytes do not fit in memory"),
        })?
    ];
    out.seek(SeekFrom::Start(off)).map_err(io_error(off))?;
    out.read_exact(&mut buf).map_err(io_error(off))?;
    Ok(buf)
}

/// Where one bundle lies in a region (a `.hip_fatbin` section or a bundle file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleLocation {
    /// File offset of the bundle (bytes).
    pub offset: u64,
    /// Bytes the bundle occupies (plain: end of its header or last entry; CCOB v2/v3:
    /// `total_size`; v1: up to the next 4096-aligned magic or the region end).
    pub extent: u64,
    /// Bytes available in place: up to the next bundle or the region end (>= `extent`).
    pub slot: u64,
}

/// Extent (bytes) of the bundle at offset `at` of `src`, read from its size fields only
/// (nothing is decompressed or copied); the bundle's region ends at `src.size()` (a
/// [`Prefix`] cuts a file at the end of its `.hip_fatbin`).
/// Errors: [`Error::Truncated`], [`Error::OutOfBounds`] (an entry past the end of the region),
/// [`Error::Ccob`], [`Error::Malformed`] (no bundle magic), [`Error::Input`] (a failed read).
pub fn bundle_extent<S: Source + ?Sized>(src: &S, at: u64) -> Result<u64> {
    let avail = src.size().saturating_sub(at);
    let u64_in = |off: u64, what: &'static str| -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(&src.read_at(at + off, 8, what)?);
        Ok(u64::from_le_bytes(b))
    };
    let head = src.read_at(at, avail.min(CCOB_HEADER_MAX), "offload bundle header")?;
    if head.starts_with(CCOB_MAGIC) {
        let h = bundle::parse_ccob_header_in(&head, at, avail)?;
        return Ok(match h.total_size {
            Some(t) => t,
            None => bundle::next_magic(src, at, BUNDLE_ALIGN)?.unwrap_or(avail),
        });
    }
    if !head.starts_with(BUNDLE_MAGIC) {
        return Err(Error::Malformed {
            what: "offload bundle",
            offset: at,
            detail: "no __CLANG_OFFLOAD_BUNDLE__ or CCOB magic".into(),
        });
    }
    let n = u64_in(24, "bundle entry count")?;
    if n > avail / 24 {
        return Err(Error::Malformed {
            what: "offload bundle",
            offset: at + 24,
            detail: format!("entry count {n} cannot fit"),
        });
    }
    let mut p = 32u64;
    let mut end = 32u64;
    for i in 0..n {
        let off = u64_in(p, "bundle entry offset")?;
        let size = u64_in(p + 8, "bundle entry size")?;
        let idlen = u64_in(p + 16, "bundle entry id length")?;
        check(src.size(), at + p + 24, idlen, "bundle entry id")?;
        let id_at = at + p + 24;
        p += 24 + idlen;
        match off.checked_add(size) {
            Some(e) if e <= avail => end = end.max(e),
            _ => {
                // Named with its id, as the bundle parser names it (`info`).
                let id = src.read_at(id_at, idlen, "bundle entry id")?;
                return Err(Error::OutOfBounds {
                    what: format!(
                        "offload bundle entry {i} ({})",
                        String::from_utf8_lossy(&id).escape_debug()
                    ),
                    offset: at.saturating_add(off),
                    size,
                    len: at + avail,
                });
            }
        }
    }
    Ok(end.max(p))
}

/// Locates every bundle of `region` of `src`, a run of concatenated bundles (a `.hip_fatbin`
/// section, or a whole bundle file: `0..src.size()`; each next bundle right after the previous
/// extent or at the next 4096-aligned offset relative to the region start, zero padding
/// between), from size fields only: only bundle headers and padding are read.
/// Errors: those of [`bundle_extent`]; [`Error::Malformed`] for non-zero bytes where a bundle or
/// padding is expected, or a region without any bundle; [`Error::Truncated`] for a region past
/// the end of `src`.
pub fn locate_bundles<S: Source + ?Sized>(
    src: &S,
    region: Range<u64>,
) -> Result<Vec<BundleLocation>> {
    let out = locate_in(src, region.clone())?;
    if out.is_empty() {
        return Err(Error::Malformed {
            what: "offload bundle region",
            offset: region.start,
            detail: "no offload bundle found".into(),
        });
    }
    Ok(out)
}

/// [`locate_bundles`], with a region of zero bytes holding no bundle (an empty result).
pub(crate) fn locate_in<S: Source + ?Sized>(
    src: &S,
    region: Range<u64>,
) -> Result<Vec<BundleLocation>> {
    let base = region.start;
    let len = region.end.saturating_sub(base);
    check(src.size(), base, len, "offload bundle region")?;
    let src = &Prefix {
        source: src,
        end: region.end,
    };
    let mut out: Vec<BundleLocation> = Vec::new();
    let mut p = 0u64;
    while p < len {
        let magic_len = (len - p).min(BUNDLE_MAGIC.len() as u64);
        if bundle::is_bundle(&src.read_at(base + p, magic_len, "offload bundle magic")?) {
            let extent = bundle_extent(src, base + p)?.max(1);
            out.push(BundleLocation {
                offset: base + p,
                extent,
                slot: extent,
            });
            p += extent;
            continue;
        }
        let pad_end = ((p / BUNDLE_ALIGN + 1) * BUNDLE_ALIGN).min(len);
        let pad = src.read_at(base + p, pad_end - p, "offload bundle padding")?;
        if let Some(i) = pad.iter().position(|&b| b != 0) {
            let mut detail =
                "non-zero bytes where a bundle or zero padding was expected".to_string();
            // Right after a bundle: most likely its size field is cut short.
            if let Some(b) = out.last().filter(|b| b.offset + b.extent == base + p) {
                detail += &format!(
                    " (right after bundle {} at offset {:#x}, whose size fields give {} bytes: cut short?)",
                    out.len() - 1,
                    b.offset,
                    b.extent
                );
            }
            return Err(Error::Malformed {
                what: "offload bundle region",
                offset: base + p + i as u64,
                detail,
            });
        }
        p = pad_end;
    }
    let ends: Vec<u64> = out
        .iter()
        .skip(1)
        .map(|b| b.offset)
        .chain(std::iter::once(base + len))
        .collect();
    for (b, end) in out.iter_mut().zip(ends) {
        b.slot = end - b.offset;
    }
    Ok(out)
}

/// Concatenates bundles into a bundle file: each bundle after the first starts at the next
/// 4096-aligned offset, zero padding between (the layout [`locate_bundles`] reads).
pub fn write_bundle_file(bundles: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Cursor::new(Vec::with_capacity(
        bundles
            .iter()
            .map(|b| b.len() + BUNDLE_ALIGN as usize)
            .sum(),
    ));
    for b in bundles {
        // Writing into memory cannot fail.
        let _ = push_bundle_file(&mut out, b);
    }
    out.into_inner()
}

/// Appends `bundle` to the bundle file being written to `out`: at offset 0 when `out` is
/// empty, else at the first 4096-aligned offset at or after its end, zero padding between (the
/// layout of [`write_bundle_file`]). Errors: [`Error::Output`].
pub fn push_bundle_file<W: Output>(out: &mut W, bundle: &[u8]) -> Result<()> {
    let at = pad_bundle_file(out)?;
    put(out, at, bundle)
}

/// [`push_bundle_file`] of the unchanged bundle at `loc` of `src`, copied without holding it in
/// memory. Errors: [`Error::Output`]; [`Error::Truncated`] / [`Error::Input`] from the input.
pub fn copy_bundle_file<S: Source + ?Sized, W: Output>(
    out: &mut W,
    src: &S,
    loc: &BundleLocation,
) -> Result<()> {
    let at = pad_bundle_file(out)?;
    copy_at(src, loc.offset, loc.extent, out, at)
}

/// Zero-pads the bundle file being written to `out` to the next 4096-aligned offset and returns
/// that offset (bytes).
fn pad_bundle_file<W: Output>(out: &mut W) -> Result<u64> {
    let end = out.seek(SeekFrom::End(0)).map_err(io_error(0))?;
    let at = align_up(end, BUNDLE_ALIGN);
    put(out, end, &vec![0u8; (at - end) as usize])?;
    Ok(at)
}

/// One bundle of a host's `.hip_fatbin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostBundle {
    /// Location in the file (offsets in bytes).
    pub location: BundleLocation,
    /// Virtual address of the bundle.
    pub addr: u64,
}

/// One `.hipFatBinSegment` wrapper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostWrapper {
    /// File offset of the 24-byte wrapper.
    pub offset: u64,
    /// How its bundle pointer is stored (`Absolute` or `Relative`).
    pub pointer: PointerKind,
    /// Index into [`HostImage::bundles`] of the bundle it points to.
    pub bundle: usize,
}

impl HostWrapper {
    /// File offset of the `Elf64_Rela` entry that sets the pointer, if a relocation does.
    pub fn pointer_entry(&self) -> Option<u64> {
        match self.pointer {
            PointerKind::Relative { rela_entry_offset }
            | PointerKind::Symbol {
                rela_entry_offset, ..
            } => Some(rela_entry_offset),
            _ => None,
        }
    }
}

/// The fat-binary structure of a host ELF, located without decompressing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostImage {
    /// Parsed ELF headers.
    pub elf: Elf,
    /// Index of the `.hip_fatbin` section.
    pub fatbin_section: usize,
    /// Bundles of `.hip_fatbin` in file order.
    pub bundles: Vec<HostBundle>,
    /// Wrappers in file order (may be empty; several may share a bundle).
    pub wrappers: Vec<HostWrapper>,
    /// Odd wrapper fields kept as they are, one sentence each naming the offset
    /// ([`crate::hostptr::RawWrapper::version_warning`]), and bundles no wrapper points at.
    pub warnings: Vec<String>,
}

/// Locates `.hip_fatbin`, its bundles and the wrappers pointing to them in an x86-64 host ELF.
/// Errors: ELF errors; [`Error::WrongMachine`]; [`Error::Malformed`] for a relocatable object, a
/// missing or empty `.hip_fatbin`, a wrapper with a bad magic, or a wrapper whose pointer is
/// outside the file or not the start of a bundle of `.hip_fatbin` (offsets name the wrapper's
/// pointer field); bundle errors of [`locate_bundles`]; [`Error::Input`] for a failed read.
/// Only the ELF headers, the bundle headers, the wrappers and the relocations are read.
pub fn scan_host<S: Source + ?Sized>(src: &S) -> Result<HostImage> {
    let e = Elf::read(src)?;
    if e.header.e_machine != elf::EM_X86_64 {
        return Err(Error::WrongMachine {
            found: e.header.e_machine,
            expected: elf::EM_X86_64,
        });
    }
    if e.header.e_type == crate::elf::ET_REL {
        let detail = if e.section_by_name(".llvm.offloading").is_some() {
            "relocatable object with .llvm.offloading (new offload driver): writing \
             .llvm.offloading (LLVM offload binaries) is not supported; `sqtt-patch info` and \
             `extract` read the code objects in it; instrument the linked executable or library"
        } else {
            "relocatable object: instrument the linked executable or library"
        };
        return Err(Error::Malformed {
            what: "host ELF",
            offset: 0x10,
            detail: detail.into(),
        });
    }
    let fatbins: Vec<&elf::Section> = e
        .sections
        .iter()
        .filter(|s| s.name == ".hip_fatbin")
        .collect();
    let sec = match fatbins.as_slice() {
        [] if e.section_by_name(crate::offload::SECTION).is_some() => {
            return Err(Error::NotWritableHost {
                offset: e.header.e_shoff,
                lead: "no .hip_fatbin section, only .llvm.offloading,",
                tail: ": writing .llvm.offloading (LLVM offload binaries) is not supported; \
                       `sqtt-patch info` and `extract` read the code objects in it",
            })
        }
        [] => {
            return Err(Error::NotWritableHost {
                offset: e.header.e_shoff,
                lead: "not a HIP host binary: no .hip_fatbin section",
                tail: " (or its section headers were stripped)",
            })
        }
        [s] => *s,
        [_, s, ..] => {
            return Err(Error::Malformed {
                what: "host ELF",
                offset: e.header.e_shoff + 64 * s.index as u64,
                detail: "more than one .hip_fatbin section".into(),
            })
        }
    };
    if sec.file_size() == 0 {
        return Err(Error::Malformed {
            what: "host ELF",
            offset: e.header.e_shoff + 64 * sec.index as u64,
            detail: ".hip_fatbin is empty or SHT_NOBITS (a kpack-split binary, whose wrappers say \
                     HIPK, keeps its code objects in .kpack archives: sqtt-patch --fatbin follows \
                     them)"
                .into(),
        });
    }
    let region = sec.offset..sec.offset + sec.file_size();
    let bundles: Vec<HostBundle> = locate_bundles(src, region.clone())
        .map_err(|err| match err {
            // A bundle that does not fit the section: name the section (session-22 fresh
            // tester: `info` and `--fatbin` worded this fault differently).
            Error::OutOfBounds { .. } | Error::Truncated { .. } => Error::Malformed {
                what: "host ELF",
                offset: e.header.e_shoff + 64 * sec.index as u64,
                detail: format!(
                    ".hip_fatbin (file offsets {:#x}..{:#x}) ends inside a bundle (a section size cut \
                     short or a bundle size too large): {err}",
                    region.start, region.end
                ),
            },
            err => err,
        })?
        .into_iter()
        .map(|l| HostBundle {
            addr: sec.addr + (l.offset - sec.offset),
            location: l,
        })
        .collect();
    let mut wrappers = Vec::new();
    let mut warnings = Vec::new();
    for w in crate::hostptr::read_wrappers(src, &e, &[".hipFatBinSegment"])? {
        warnings.extend(w.version_warning());
        let (o, ptr) = (w.offset, w.pointer);
        if w.magic != HIPF_MAGIC {
            return Err(Error::Malformed {
                what: "fat binary wrapper",
                offset: o,
                detail: format!("magic {:#x} is not HIPF (0x48495046)", w.magic),
            });
        }
        let Some(bi) = bundles.iter().position(|b| b.addr == ptr) else {
            let detail = match e.addr_to_offset(ptr) {
                None => format!(
                    "bundle pointer {ptr:#x} points outside the file (no file-backed \
                     section holds it)"
                ),
                Some(off) => format!(
                    "bundle pointer {ptr:#x} (file offset {off:#x}) is not the start of a \
                     bundle in .hip_fatbin"
                ),
            };
            return Err(Error::Malformed {
                what: "fat binary wrapper",
                offset: o + 8,
                detail,
            });
        };
        wrappers.push(HostWrapper {
            offset: o,
            pointer: w.kind,
            bundle: bi,
        });
    }
    // A bundle no wrapper points at is never registered with the HIP runtime (session-24 fresh
    // tester: instrumented without a word). It is kept, and rewritten like the others.
    for (bi, b) in bundles.iter().enumerate() {
        if !wrappers.is_empty() && !wrappers.iter().any(|w| w.bundle == bi) {
            warnings.push(format!(
                "bundle {bi} of .hip_fatbin (file offset {:#x}, {} bytes) is pointed at by no \
                 fat binary wrapper, so the HIP runtime never loads it (kept, and instrumented \
                 like the others)",
                b.location.offset, b.location.extent
            ));
        }
    }
    Ok(HostImage {
        fatbin_section: sec.index,
        elf: e,
        bundles,
        wrappers,
        warnings,
    })
}

/// How [`write_host`] wrote the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum HostWriteMode {
    /// No bundle changed: the output is the input.
    Unchanged,
    /// Every changed bundle fit its old slot.
    InPlace,
    /// New bundles appended in a new `PT_LOAD`.
    Appended {
        /// File offset of the new segment (new program-header table first; bytes).
        segment_offset: u64,
        /// Virtual address of the new segment.
        segment_vaddr: u64,
        /// File offset of the new `.hip_fatbin` contents (bytes).
        fatbin_offset: u64,
        /// Wrappers repointed.
        wrappers_repointed: usize,
        /// Other `R_X86_64_RELATIVE` addends and symbols that followed a bundle.
        references_moved: usize,
    },
}

/// Writes `data` with bundle `i` of `img` replaced by `new[i]` (`None`: unchanged), in memory
/// ([`HostWriter`] into a `Cursor<Vec<u8>>`). See the module documentation for the strategy.
/// The output keeps every original byte except the ELF header's `e_phoff`/`e_phnum`, the
/// `.hip_fatbin` section header, wrapper pointers, relocation addends, `.relr.dyn` words and symbol values/sizes
/// that named a moved bundle, and (in place) the replaced slots. Errors: [`Error::InvalidEdit`]
/// when `new` has the wrong length or the program header count would overflow.
pub fn write_host(
    data: &[u8],
    img: &HostImage,
    new: Vec<Option<Vec<u8>>>,
) -> Result<(Vec<u8>, HostWriteMode)> {
    if new.len() != img.bundles.len() {
        return Err(Error::InvalidEdit(format!(
            "{} replacement bundles for {} bundles",
            new.len(),
            img.bundles.len()
        )));
    }
    let mut w = HostWriter::new(data, img, Cursor::new(Vec::with_capacity(data.len())))?;
    for n in new {
        w.push(n.as_deref())?;
    }
    let (out, mode) = w.finish()?;
    Ok((out.into_inner(), mode))
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// Placement of the appended `PT_LOAD` (computed from the input only).
#[derive(Debug, Clone, Copy)]
struct AppendPlan {
    /// File offset and address of the new segment (bytes).
    seg_off: u64,
    seg_vaddr: u64,
    /// New program header count and table size (bytes).
    phnum: u64,
    phdr_bytes: u64,
    /// `p_align` of the new segment.
    align: u64,
    /// File offset of the first bundle in the new segment (bytes).
    fatbin_off: u64,
}

impl AppendPlan {
    /// Plans the segment for an input of `input_len` bytes scanned into `img`.
    fn new(input_len: u64, img: &HostImage) -> Result<AppendPlan> {
        let e = &img.elf;
        let loads: Vec<&elf::Segment> = e
            .segments
            .iter()
            .filter(|s| s.p_type == elf::PT_LOAD)
            .collect();
        let align = loads
            .iter()
            .map(|s| s.align)
            .max()
            .unwrap_or(PAGE)
            .max(PAGE);
        if !align.is_power_of_two() {
            return Err(Error::Malformed {
                what: "program header table",
                offset: e.header.e_phoff,
                detail: format!("PT_LOAD alignment {align:#x} is not a power of two"),
            });
        }
        let max_vend = loads
            .iter()
            .map(|s| s.vaddr.saturating_add(s.memsz))
            .max()
            .unwrap_or(0);
        let mut seg_off = align_up(input_len, PAGE);
        let vaddr_for = |off: u64| align_up(max_vend, align) + off % align;
        // Executables: keep vaddr - offset equal to the first PT_LOAD's so that kernels that
        // derive AT_PHDR from e_phoff and the first PT_LOAD find the new table.
        let interp = e.segments.iter().any(|s| s.p_type == PT_INTERP);
        let delta = loads
            .first()
            .and_then(|s| s.vaddr.checked_sub(s.offset))
            .filter(|d| d % align == 0);
        let seg_vaddr = match delta {
            Some(d) if interp => {
                let need = max_vend.saturating_sub(seg_off.saturating_add(d));
                let pad = align_up(need, align);
                if pad <= MAX_CONGRUENCE_PAD {
                    seg_off += pad;
                    seg_off + d
                } else {
                    vaddr_for(seg_off)
                }
            }
            _ => vaddr_for(seg_off),
        };
        let phnum = u64::from(e.header.e_phnum) + 1;
        if phnum >= 0xffff {
            return Err(Error::InvalidEdit(format!(
                "{phnum} program headers do not fit e_phnum"
            )));
        }
        let phdr_bytes = PHDR_SIZE * phnum;
        Ok(AppendPlan {
            seg_off,
            seg_vaddr,
            phnum,
            phdr_bytes,
            align,
            fatbin_off: align_up(seg_off + phdr_bytes, BUNDLE_ALIGN),
        })
    }

    /// Output address of output file offset `off` inside the new segment.
    fn addr_of(&self, off: u64) -> u64 {
        self.seg_vaddr + (off - self.seg_off)
    }

    /// File offsets of bundles of these lengths (bytes), each 4096-aligned, in order.
    fn offsets(&self, lens: &[u64]) -> Vec<u64> {
        let mut cursor = self.fatbin_off;
        lens.iter()
            .map(|&len| {
                let at = align_up(cursor, BUNDLE_ALIGN);
                cursor = at + len;
                at
            })
            .collect()
    }
}

/// Streaming writer of a host ELF whose bundles are replaced one at a time (see the module
/// documentation for the strategy): [`HostWriter::new`] copies the input to the output,
/// [`HostWriter::push`] takes bundle 0, 1, ... in order (`None`: unchanged), and
/// [`HostWriter::finish`] decides the mode and patches the headers.
///
/// A rebuilt bundle is written into its old slot while every rebuilt bundle so far fits its
/// slot; at the first that does not, the earlier ones are moved (read back from the output one
/// at a time) to the appended segment and their slots restored. Unchanged bundles are copied
/// from the input only when appending. The input is a [`Source`]: a slice, or a file read by
/// offset, whose ranges are copied to the output in chunks. Memory: one rebuilt bundle read
/// back at a time, the relocation and symbol tables when appending, and a copy buffer.
pub struct HostWriter<'a, S: Source + ?Sized, W: Output> {
    src: &'a S,
    img: &'a HostImage,
    out: W,
    /// Append placement, computed at the first bundle that does not fit its slot.
    plan: Option<AppendPlan>,
    /// Output length (bytes) of each pushed bundle.
    lens: Vec<u64>,
    /// Whether each pushed bundle was rebuilt.
    changed: Vec<bool>,
}

impl<'a, S: Source + ?Sized, W: Output> HostWriter<'a, S, W> {
    /// Starts the output: copies the input `src` (scanned into `img`) to the start of `out`.
    /// Errors: [`Error::Output`]; [`Error::Input`] for a failed read.
    pub fn new(src: &'a S, img: &'a HostImage, mut out: W) -> Result<Self> {
        copy_at(src, 0, src.size(), &mut out, 0)?;
        Ok(HostWriter {
            src,
            img,
            out,
            plan: None,
            lens: Vec::with_capacity(img.bundles.len()),
            changed: Vec::with_capacity(img.bundles.len()),
        })
    }

    /// Takes the replacement of the next bundle (`None`: unchanged). Errors:
    /// [`Error::InvalidEdit`] when every bundle was already pushed or the program header count
    /// would overflow, [`Error::Malformed`] for a `PT_LOAD` alignment that is not a power of
    /// two (both only when appending), [`Error::Output`].
    pub fn push(&mut self, new: Option<&[u8]>) -> Result<()> {
        let i = self.lens.len();
        let Some(b) = self.img.bundles.get(i) else {
            return Err(Error::InvalidEdit(format!(
                "bundle {i} pushed, but the host has {} bundles",
                self.img.bundles.len()
            )));
        };
        let len = new.map_or(b.location.extent, |n| n.len() as u64);
        if let Some(n) = new {
            if self.plan.is_none() && len <= b.location.slot {
                let start = b.location.offset;
                put(&mut self.out, start, n)?;
                put(
                    &mut self.out,
                    start + len,
                    &vec![0u8; (b.location.slot - len) as usize],
                )?;
            } else {
                let plan = self.leave_slots()?;
                self.lens.push(len);
                let off = plan.offsets(&self.lens)[i];
                self.lens.pop();
                put(&mut self.out, off, n)?;
            }
        }
        self.lens.push(len);
        self.changed.push(new.is_some());
        Ok(())
    }

    /// Switches to appending (once): moves the rebuilt bundles written into their slots so far
    /// to their places in the appended segment and restores the slots' original bytes.
    fn leave_slots(&mut self) -> Result<AppendPlan> {
        if let Some(p) = self.plan {
            return Ok(p);
        }
        let plan = AppendPlan::new(self.src.size(), self.img)?;
        let offsets = plan.offsets(&self.lens);
        for (j, b) in self.img.bundles.iter().enumerate().take(self.lens.len()) {
            if !self.changed[j] {
                continue;
            }
            let l = b.location;
            let moved = get(&mut self.out, l.offset, self.lens[j])?;
            put(&mut self.out, offsets[j], &moved)?;
            copy_at(self.src, l.offset, l.slot, &mut self.out, l.offset)?;
        }
        self.plan = Some(plan);
        Ok(plan)
    }

    /// Completes the output after every bundle was pushed and returns it with the mode used.
    /// Errors: [`Error::InvalidEdit`] when not every bundle was pushed, [`Error::Output`].
    pub fn finish(mut self) -> Result<(W, HostWriteMode)> {
        if self.lens.len() != self.img.bundles.len() {
            return Err(Error::InvalidEdit(format!(
                "{} replacement bundles for {} bundles",
                self.lens.len(),
                self.img.bundles.len()
            )));
        }
        let n = self.src.size();
        let Some(plan) = self.plan else {
            self.out.set_len(n).map_err(io_error(n))?;
            let mode = if self.changed.iter().any(|&c| c) {
                HostWriteMode::InPlace
            } else {
                HostWriteMode::Unchanged
            };
            return Ok((self.out, mode));
        };
        let mode = self.append(&plan)?;
        Ok((self.out, mode))
    }

    /// Writes the unchanged bundles, the new program header table and every pointer update of
    /// the append strategy.
    fn append(&mut self, plan: &AppendPlan) -> Result<HostWriteMode> {
        let (src, img) = (self.src, self.img);
        let e = &img.elf;
        let offsets = plan.offsets(&self.lens);
        let seg_end = offsets
            .last()
            .zip(self.lens.last())
            .map_or(plan.fatbin_off, |(o, l)| o + l);
        let out = &mut self.out;
        for (j, b) in img.bundles.iter().enumerate() {
            if !self.changed[j] {
                let l = b.location;
                copy_at(src, l.offset, l.extent, out, offsets[j])?;
            }
        }
        // Program-header table: the old entries (PT_PHDR updated) plus the new PT_LOAD after
        // the last PT_LOAD (gABI: loadable entries sorted by p_vaddr).
        let last_load = e.segments.iter().rposition(|s| s.p_type == elf::PT_LOAD);
        let mut table = Vec::with_capacity(plan.phdr_bytes as usize);
        let push = |t: &mut Vec<u8>, s: &elf::Segment| {
            t.extend_from_slice(&s.p_type.to_le_bytes());
            t.extend_from_slice(&s.p_flags.to_le_bytes());
            for v in [s.offset, s.vaddr, s.paddr, s.filesz, s.memsz, s.align] {
                t.extend_from_slice(&v.to_le_bytes());
            }
        };
        let new_load = elf::Segment {
            p_type: elf::PT_LOAD,
            p_flags: PF_R,
            offset: plan.seg_off,
            vaddr: plan.seg_vaddr,
            paddr: plan.seg_vaddr,
            filesz: seg_end - plan.seg_off,
            memsz: seg_end - plan.seg_off,
            align: plan.align,
        };
        if last_load.is_none() {
            push(&mut table, &new_load);
        }
        for (i, s) in e.segments.iter().enumerate() {
            if s.p_type == elf::PT_PHDR {
                let p = elf::Segment {
                    offset: plan.seg_off,
                    vaddr: plan.seg_vaddr,
                    paddr: plan.seg_vaddr,
                    filesz: plan.phdr_bytes,
                    memsz: plan.phdr_bytes,
                    ..s.clone()
                };
                push(&mut table, &p);
            } else {
                push(&mut table, s);
            }
            if Some(i) == last_load {
                push(&mut table, &new_load);
            }
        }
        put(out, plan.seg_off, &table)?;
        // ELF header.
        put_u64(out, 0x20, plan.seg_off)?;
        put(out, 0x38, &(plan.phnum as u16).to_le_bytes())?;
        // .hip_fatbin section header: sh_addr, sh_offset, sh_size.
        let sec = &e.sections[img.fatbin_section];
        let sh = e.header.e_shoff + 64 * img.fatbin_section as u64;
        let new_sec_size = seg_end - plan.fatbin_off;
        put_u64(out, sh + 16, plan.addr_of(plan.fatbin_off))?;
        put_u64(out, sh + 24, plan.fatbin_off)?;
        put_u64(out, sh + 32, new_sec_size)?;
        // Symbols naming a bundle start (or the section end) follow it: `-fgpu-rdc` aliases in
        // `.dynsym` and `.symtab`, which `R_X86_64_64` relocations below may name.
        let new_symbol = |value: u64, size: u64, shndx: u16| -> Option<(u64, u64)> {
            if usize::from(shndx) != img.fatbin_section {
                return None;
            }
            if let Some(i) = img.bundles.iter().position(|b| b.addr == value) {
                let size = if value == sec.addr && size == sec.size {
                    new_sec_size
                } else if size == img.bundles[i].location.extent {
                    self.lens[i]
                } else {
                    size
                };
                Some((plan.addr_of(offsets[i]), size))
            } else if value == sec.addr + sec.size {
                Some((plan.addr_of(seg_end), size))
            } else {
                None
            }
        };
        let moved = |addr: u64| -> Option<u64> {
            img.bundles
                .iter()
                .position(|b| b.addr == addr)
                .map(|i| plan.addr_of(offsets[i]))
        };
        let mut references = 0;
        for s in e.symbols(src)? {
            if let Some((value, size)) = new_symbol(s.value, s.size, s.shndx) {
                put_u64(out, s.entry_offset + 8, value)?;
                put_u64(out, s.entry_offset + 16, size)?;
                references += 1;
            }
        }
        // Relocated words naming a bundle start, wrappers first: RELATIVE addends; `S + A` of
        // R_X86_64_64 (the addend is set so that the symbol's new value plus it is the new
        // address); words listed in `.relr.dyn` and absolute words hold the address. A word
        // a relocation also fills keeps the loader's value when the linker stored it in place
        // (`-z apply-dynamic-relocs`).
        let relocs = Relocations::read(src, e)?;
        let mut done = std::collections::HashSet::new();
        let mut words: Vec<(u64, u64)> = Vec::new();
        for r in &relocs.relas {
            let (old, sym) = match r.r_type {
                R_X86_64_RELATIVE => (r.addend as u64, None),
                R_X86_64_64 => {
                    let sym = reloc_symbol(src, e, r)?;
                    if sym.shndx == elf::SHN_UNDEF {
                        continue;
                    }
                    (sym.value.wrapping_add(r.addend as u64), Some(sym))
                }
                _ => continue,
            };
            let Some(new_addr) = moved(old) else { continue };
            let base = sym.map_or(0, |s| {
                new_symbol(s.value, s.size, s.shndx).map_or(s.value, |(v, _)| v)
            });
            put_u64(out, r.entry_offset + 16, new_addr.wrapping_sub(base))?;
            done.insert(r.r_offset);
            if let Some(off) = e.addr_to_offset(r.r_offset) {
                words.push((off, old));
            }
            if img
                .wrappers
                .iter()
                .all(|w| w.pointer_entry() != Some(r.entry_offset))
            {
                references += 1;
            }
        }
        for w in &img.wrappers {
            if matches!(w.pointer, PointerKind::Absolute | PointerKind::Relr) {
                words.push((w.offset + 8, img.bundles[w.bundle].addr));
            }
        }
        let wrapper_words: std::collections::HashSet<u64> =
            img.wrappers.iter().map(|w| w.offset + 8).collect();
        for &a in relocs.relr.iter().filter(|a| !done.contains(a)) {
            let Some(off) = e.addr_to_offset(a) else {
                continue;
            };
            if wrapper_words.contains(&off) {
                continue;
            }
            let stored = u64_at(&src.read_at(off, 8, "SHT_RELR word")?, 0, "SHT_RELR word")?;
            if moved(stored).is_some() {
                words.push((off, stored));
                references += 1;
            }
        }
        for (off, old) in words {
            let stored = u64_at(&src.read_at(off, 8, "relocated word")?, 0, "relocated word")?;
            if let (true, Some(n)) = (stored == old, moved(old)) {
                put_u64(out, off, n)?;
            }
        }
        out.set_len(seg_end).map_err(io_error(seg_end))?;
        Ok(HostWriteMode::Appended {
            segment_offset: plan.seg_off,
            segment_vaddr: plan.seg_vaddr,
            fatbin_offset: plan.fatbin_off,
            wrappers_repointed: img.wrappers.len(),
            references_moved: references,
        })
    }
}
