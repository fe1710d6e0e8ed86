//! Shared helpers of the oracle tests: LLVM 22 tool location, corpus discovery, objdump parsing.
#![allow(dead_code)] // each test binary uses a subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// A xorshift64 generator of 32-bit words from `seed` (non-zero): reproducible random
/// operand bits for the tests over every opcode.
pub fn xorshift(seed: u64) -> impl FnMut() -> u32 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    }
}

/// Directory of LLVM 22 tools.
pub const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

/// True when the LLVM-dependent tests must be skipped (`SQTT_NO_LLVM=1`). Otherwise a missing
/// LLVM 22 is a test failure.
pub fn no_llvm() -> bool {
    if std::env::var("SQTT_NO_LLVM").is_ok_and(|v| v == "1") {
        return true;
    }
    assert!(
        Path::new(LLVM_BIN).join("llvm-mc").exists(),
        "LLVM 22 not found in {LLVM_BIN} (set SQTT_NO_LLVM=1 to skip)"
    );
    false
}

/// `<workspace root>/fixtures/corpus`.
pub fn corpus_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    assert!(
        d.is_dir(),
        "corpus not found at {} (fixtures/corpus is part of the repository)",
        d.display()
    );
    d
}

/// Every code object of `fixtures/` and the corpus: bare objects, and each code object inside
/// the bundles and host binaries there, as `(name, bytes)` (`<file>` or `<file>#<entry id>`).
pub fn all_code_objects() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = corpus_files();
    for d in [
        corpus_dir().join("bundles"),
        corpus_dir().join("hosts"),
        root.join("fixtures/objects"),
        root.join("fixtures/bundles"),
        root.join("fixtures/hosts"),
    ] {
        files.extend(files_in(&d));
    }
    let mut out = Vec::new();
    for f in files {
        let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let Ok((_, entries)) = hsaco::container::open(&data, 1 << 30) else {
            continue; // READMEs and sources beside the inputs
        };
        for e in entries.into_iter().filter(|e| !e.data.is_empty()) {
            let name = if e.id.is_empty() {
                f.display().to_string()
            } else {
                format!("{}#{}", f.display(), e.id)
            };
            out.push((name, e.data));
        }
    }
    out
}

/// Every code object of corpus/compiled and corpus/triton.
pub fn corpus_files() -> Vec<PathBuf> {
    ["compiled", "triton"]
        .iter()
        .flat_map(|sub| files_in(&corpus_dir().join(sub)))
        .collect()
}

/// The files (not directories) of `d`, sorted.
fn files_in(d: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// One instruction line of `llvm-objdump -d`.
#[derive(Debug, Clone)]
pub struct ObjdumpInst {
    pub addr: u64,
    pub len: usize,
    pub text: String,
}

/// Runs `llvm-objdump-22 -d --mcpu=<mcpu> [extra] file` and parses its instruction lines.
pub fn objdump(file: &Path, mcpu: &str, extra: &[&str]) -> Vec<ObjdumpInst> {
    let out = Command::new(Path::new(LLVM_BIN).join("llvm-objdump"))
        .arg("-d")
        .arg(format!("--mcpu={mcpu}"))
        .args(extra)
        .arg(file)
        .output()
        .expect("run llvm-objdump");
    assert!(
        out.status.success(),
        "llvm-objdump failed on {}",
        file.display()
    );
    parse_objdump(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_objdump(s: &str) -> Vec<ObjdumpInst> {
    let mut v = Vec::new();
    for line in s.lines() {
        if !line.starts_with('\t') {
            continue;
        }
        let Some(p) = line.rfind("// ") else { continue };
        let rest = &line[p + 3..];
        let Some((addr, words)) = rest.split_once(": ") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let words = words.split(" <").next().unwrap_or("");
        let len = words.split_whitespace().count() * 4;
        v.push(ObjdumpInst {
            addr,
            len,
            text: line[..p].trim().to_string(),
        });
    }
    v
}

/// An executable section of an ELF code object: (address, bytes).
pub fn exec_sections(data: &[u8]) -> (u32, Vec<(u64, Vec<u8>)>) {
    use object::{Object, ObjectSection, SectionFlags};
    let f = object::File::parse(data).expect("parse ELF");
    let flags = match f.flags() {
        object::FileFlags::Elf { e_flags, .. } => e_flags.0,
        _ => 0,
    };
    let mut v = Vec::new();
    for s in f.sections() {
        if let SectionFlags::Elf { sh_flags, .. } = s.flags() {
            if sh_flags.0 & object::elf::SHF_EXECINSTR.0 != 0 {
                v.push((s.address(), s.data().expect("section data").to_vec()));
            }
        }
    }
    (flags, v)
}

/// Writes `input` to the standard input of `child` (spawned with all three streams piped) and
/// collects its standard output and error, killing it after 60 s. `None` when it was killed
/// or ended by a signal (llvm-mc-22 crashes or hangs on some invalid words); the caller then
/// splits the batch.
pub fn feed_with_deadline(
    mut child: std::process::Child,
    input: String,
) -> Option<(Vec<u8>, Vec<u8>)> {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out_r = std::thread::spawn(move || {
        let mut s = Vec::new();
        stdout.read_to_end(&mut s).map(|_| s)
    });
    let err_r = std::thread::spawn(move || {
        let mut s = Vec::new();
        stderr.read_to_end(&mut s).map(|_| s)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            break Some(s);
        }
        if Instant::now() > deadline {
            // Our own child, by its handle.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let out = out_r.join().expect("stdout reader").unwrap_or_default();
    let err = err_r.join().expect("stderr reader").unwrap_or_default();
    status?.code()?;
    Some((out, err))
}
