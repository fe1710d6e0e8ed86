//! Positioned reads (`hsaco::source`): a host ELF or a bundle file read by offset from a file
//! (`FileSource`) is located exactly as when it is read whole, errors included; a file cut in the
//! middle of a bundle is an error naming an offset, whether it was cut before it was opened or
//! while it was being read, and never a panic.

mod common;

use std::borrow::Cow;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use hsaco::bundle::{self, DEFAULT_DECOMPRESS_LIMIT};
use hsaco::hostwrite::{locate_bundles, scan_host, BundleLocation, HostWriter};
use hsaco::source::{FileSource, Source};
use hsaco::Error;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every linked host (`.elf`, `.so`) of fixtures/hosts and corpus/hosts and every bundle file
/// of fixtures/bundles.
fn inputs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in [
        fixtures().join("hosts"),
        common::corpus().join("hosts"),
        fixtures().join("bundles"),
    ] {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            if p.extension()
                .is_some_and(|x| x == "elf" || x == "so" || x == "hipfb")
            {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() >= 15, "only {} inputs", v.len());
    v
}

/// Writes `bytes` to a file in `dir` and opens it for positioned reads.
fn file_source(dir: &Path, bytes: &[u8]) -> FileSource {
    let p = dir.join("input");
    std::fs::write(&p, bytes).expect("write");
    FileSource::open(&p).expect("open")
}

/// The bundles of a host or bundle file read from `src`.
fn locate<S: Source + ?Sized>(src: &S, bundle_file: bool) -> hsaco::Result<Vec<BundleLocation>> {
    if bundle_file {
        locate_bundles(src, 0..src.size())
    } else {
        scan_host(src).map(|img| img.bundles.iter().map(|b| b.location).collect())
    }
}

/// Opens (decompressing a CCOB) every located bundle of `src`, as `--fatbin` does: read by
/// offset, then parsed from the bytes read.
fn open_all<S: Source + ?Sized>(src: &S, locs: &[BundleLocation]) -> hsaco::Result<usize> {
    let mut entries = 0;
    for l in locs {
        let raw = src.read_at(l.offset, l.extent, "offload bundle")?;
        entries += bundle::open(&raw, l.offset, DEFAULT_DECOMPRESS_LIMIT)?
            .entries
            .len();
    }
    Ok(entries)
}

/// Whole and cut at several places inside every bundle (its header, its entry table, its
/// middle, its last byte): locating and opening the bundles from a file gives the same value
/// or the same error as from memory, and every cut inside a bundle is an error.
#[test]
fn a_file_read_by_offset_gives_what_memory_gives_whole_and_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cuts_checked = 0;
    for p in inputs() {
        let data = std::fs::read(&p).expect("read");
        let bundle_file = bundle::is_bundle(&data);
        let whole = locate(&data, bundle_file).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut cuts = vec![data.len() as u64];
        for l in &whole {
            for c in [10, 40, l.extent / 2, l.extent - 1] {
                cuts.push(l.offset + c.min(l.extent - 1));
            }
        }
        for cut in cuts {
            let d = &data[..cut as usize];
            let src = file_source(dir.path(), d);
            let what = format!("{} cut at {cut:#x}", p.display());
            let mem = locate(d, bundle_file).and_then(|l| open_all(d, &l));
            let file = locate(&src, bundle_file).and_then(|l| open_all(&src, &l));
            assert_eq!(file, mem, "{what}");
            if cut < data.len() as u64 {
                let e = file.expect_err(&what).to_string();
                assert!(e.contains("offset 0x"), "{what}: {e}");
            }
            cuts_checked += 1;
        }
    }
    assert!(cuts_checked >= 100, "{cuts_checked}");
}

/// A file that shrinks after it was opened and scanned (cut in the middle of its second
/// bundle): reading that bundle, and copying the input to the output, are `Error::Input`
/// naming the offset of the read, not a panic and not a short output.
#[test]
fn a_file_that_shrinks_while_it_is_read_is_an_input_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = std::fs::read(fixtures().join("hosts/x86_64__fx-app__pie.elf")).expect("read");
    let src = file_source(dir.path(), &data);
    let img = scan_host(&src).expect("scan");
    assert_eq!(img, scan_host(&data).expect("scan in memory"));
    let l = img.bundles[1].location;
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("input"))
        .expect("open for writing")
        .set_len(l.offset + l.extent / 2)
        .expect("truncate");
    let e = src
        .read_at(l.offset, l.extent, "offload bundle")
        .expect_err("shrunk");
    assert!(
        matches!(e, Error::Input { offset, .. } if offset == l.offset),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(&format!(
            "input I/O at offset {:#x}: the file ended before the {} bytes read here",
            l.offset, l.extent
        )),
        "{e}"
    );
    // The writer copies the input first: the copy stops with the same kind of error.
    let e = HostWriter::new(&src, &img, Cursor::new(Vec::new()))
        .err()
        .expect("copy of a shrunk input");
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    // Reads within the file that remains still work; past its recorded size they are
    // `Truncated`, as from memory.
    assert_eq!(
        src.read_at(0, 4, "magic").expect("head"),
        Cow::<[u8]>::Borrowed(b"\x7fELF")
    );
    assert_eq!(
        src.read_at(data.len() as u64, 1, "past the end"),
        data.read_at(data.len() as u64, 1, "past the end")
    );
}

/// A pipe cannot be read by offset: `FileSource` refuses it by name (the CLI reads such inputs
/// whole).
#[test]
fn a_pipe_is_not_a_file_source() {
    let f = std::fs::File::open("/dev/null").expect("open /dev/null");
    let e = FileSource::new(f).expect_err("character device");
    assert_eq!(
        e.to_string(),
        "input I/O at offset 0x0: not a regular file: it cannot be read by offset"
    );
}
