//! Issue 32 leftovers found by the last fresh tester, each answered by a clear message and the
//! right exit code, with nothing left behind:
//! - an existing output in an append-only directory (`chattr +a`: names can be added, none
//!   renamed over or removed) is refused before anything is created;
//! - `funcmap` on a `.sqtt_funcmap` section of garbage (no valid row) exits 2;
//! - a corrupt zstd payload of a compressed offload bundle is described in plain words naming
//!   the file and offset, not in the decoder's Rust debug form;
//! - `verify` of two unrelated objects is a usage error (2), not a failed verification (1);
//! - `info` on a FIFO that nobody writes to says it waits for a writer, then reads what one
//!   writes.
mod support;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{names_in, KillOnDrop};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .env_remove("SQTT_INSTRUMENT_MEMORY")
        .env_remove("SQTT_TRACE_ADDRESSES")
        .output()
        .expect("sqtt-patch runs")
}

/// Instruments the gfx1100 barriers fixture with `--functions 1` into `out`.
fn instrument_into(out: &Path) {
    let o = run(&[
        fixture("objects/gfx1100__barriers__O3.co").as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Clears `chattr +a` again when the test ends (else the temporary directory cannot be
/// removed).
struct AppendOnly(PathBuf);

impl Drop for AppendOnly {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-a").arg(&self.0).status();
    }
}

#[test]
fn an_append_only_directory_is_refused_and_left_as_it_was() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("ao");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("out.co");
    std::fs::write(&out, b"previous").unwrap();
    let set = Command::new("chattr").arg("+a").arg(&dir).status();
    if !set.is_ok_and(|s| s.success()) {
        eprintln!("not checked: chattr +a is not possible here (needs root and a file system with the attribute)");
        return;
    }
    let _guard = AppendOnly(dir.clone());
    let input = fixture("objects/gfx1100__barriers__O3.co");
    let o = run(&[
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("append-only") && err.contains("out.co"),
        "the message says why: {err}"
    );
    assert_eq!(names_in(&dir), ["out.co"], "no stray file");
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
}

/// An instrumented code object written below `dir`: its bytes and its `.sqtt_funcmap` section.
fn instrumented_with_funcmap(dir: &Path) -> (Vec<u8>, hsaco::elf::Section) {
    let instrumented = dir.join("i.co");
    instrument_into(&instrumented);
    let bytes = std::fs::read(&instrumented).unwrap();
    let co = hsaco::CodeObject::parse(&bytes).unwrap();
    let s = co.section(".sqtt_funcmap").expect("funcmap").clone();
    (bytes, s)
}

#[test]
fn funcmap_of_garbage_is_an_input_error() {
    let t = tempfile::tempdir().unwrap();
    let (mut bytes, s) = instrumented_with_funcmap(t.path());
    for (i, b) in bytes[s.offset as usize..(s.offset + s.size) as usize]
        .iter_mut()
        .enumerate()
    {
        *b = [0x8f, b'~', 0x01, b'#'][i % 4];
    }
    let garbage = t.path().join("g.co");
    std::fs::write(&garbage, &bytes).unwrap();
    let o = run(&["funcmap".as_ref(), garbage.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("g.co")
            && err.contains(".sqtt_funcmap")
            && err.contains(&format!("{:#x}", s.offset))
            && err.contains("no valid funcmap row"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "no table for garbage");
}

/// Session-28 tester: a damaged row's warning named neither the file nor an offset, and a row
/// that is not UTF-8 was read without a word.
#[test]
fn funcmap_warnings_name_the_file_and_the_row_offset() {
    let t = tempfile::tempdir().unwrap();
    let (mut bytes, s) = instrumented_with_funcmap(t.path());
    let body = &mut bytes[s.offset as usize..(s.offset + s.size) as usize];
    // The first row's prefix letter becomes a byte that is not UTF-8.
    assert_eq!(
        body[1], b':',
        "a funcmap row starts with a one-letter prefix"
    );
    body[0] = 0xff;
    let damaged = t.path().join("d.co");
    std::fs::write(&damaged, &bytes).unwrap();
    let o = run(&["funcmap".as_ref(), damaged.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let want = format!(
        "sqtt-patch: {}: warning: .sqtt_funcmap (file offset {:#x}) row 1 at offset 0x0: not UTF-8",
        damaged.display(),
        s.offset
    );
    assert_eq!(err.lines().next(), Some(want.as_str()), "{err}");
    assert!(err.contains("row 1 at offset 0x0: no prefix"), "{err}");
}

#[test]
fn a_corrupt_zstd_bundle_is_described_in_plain_words() {
    let t = tempfile::tempdir().unwrap();
    let mut b = std::fs::read(fixture("bundles/calls-4arch__ccob-v3-zstd.hipfb")).unwrap();
    // Flip bytes inside the first zstd block (its literals): the frame header stays valid.
    for x in &mut b[200..216] {
        *x ^= 0x5a;
    }
    let bad = t.path().join("bad.hipfb");
    std::fs::write(&bad, &b).unwrap();
    let out = t.path().join("out.hipfb");
    let o = run(&[
        "--fatbin".as_ref(),
        bad.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.hipfb") && err.contains("offset 0x0") && err.contains("corrupt"),
        "{err}"
    );
    for debug in ["Error(", " { ", "Mismatch"] {
        assert!(!err.contains(debug), "no Rust debug text ({debug}): {err}");
    }
    assert_eq!(names_in(t.path()), ["bad.hipfb"], "no output");
}

#[test]
fn verify_of_unrelated_objects_is_a_usage_error() {
    let t = tempfile::tempdir().unwrap();
    let rewritten = t.path().join("r.co");
    instrument_into(&rewritten);
    for (other, why) in [
        ("objects/gfx1100__calls__O3.co", "no kernel in common"),
        ("objects/gfx942__barriers__O3.co", "targets differ"),
    ] {
        let o = run(&[
            "verify".as_ref(),
            fixture(other).as_os_str(),
            rewritten.as_os_str(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{other}: {err}");
        assert!(
            err.contains("not an original and its rewrite") && err.contains(why),
            "{other}: {err}"
        );
    }
    // The real pair still verifies.
    let o = run(&[
        "verify".as_ref(),
        fixture("objects/gfx1100__barriers__O3.co").as_os_str(),
        rewritten.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn info_on_a_fifo_without_writer_says_it_waits() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("in.fifo");
    support::mkfifo(&fifo);
    let mut child = KillOnDrop(
        Command::new(BIN)
            .arg("info")
            .arg(&fifo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a message while waiting for a writer");
    assert!(
        line.contains("in.fifo") && line.contains("no writer") && line.contains("waiting"),
        "{line}"
    );
    // A writer comes: the object arrives and is described.
    let co = std::fs::read(fixture("objects/gfx1100__barriers__O3.co")).unwrap();
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    w.write_all(&co).unwrap();
    drop(w);
    let start = Instant::now();
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "info still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.0.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(child.0.try_wait().unwrap().and_then(|s| s.code()), Some(0));
    assert!(out.contains("gfx1100"), "{out}");
}
