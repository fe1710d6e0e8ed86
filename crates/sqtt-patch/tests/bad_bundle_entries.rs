//! Offload bundle entries that cannot be taken for what they say (session-20 fresh tester):
//! an entry whose id is malformed, and an entry whose offset points at bytes that are not a
//! code object. Each is named with its bundle, entry index and file offset; none is dropped
//! silently or written out as if it were a code object.
//!
//! Inputs are `fixtures/bundles/calls-4arch__plain.hipfb` (clang/LLVM 22, entries for gfx90a,
//! gfx942, gfx1100, gfx1201 after the empty host entry) with one header field changed; the
//! entry offsets come from `hsaco` on the unmodified file.

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::fixture;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn plain_bundle() -> Vec<u8> {
    fixture("bundles/calls-4arch__plain.hipfb")
}

/// File offset of the header field of entry `i` (`field`: 0 offset, 8 size, 16 id length, 24
/// id) of the plain bundle `b`.
fn entry_header(b: &[u8], i: usize, field: usize) -> usize {
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes")) as usize;
    let mut p = 32;
    for _ in 0..i {
        p += 24 + u64_at(p + 16);
    }
    p + field
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    let o = Command::new(BIN)
        .args(args)
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    o
}

/// `sqtt-patch extract FILE -o DEST`.
fn extract(file: &Path, dest: &Path) -> Output {
    run(&[
        "extract".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        dest.as_os_str(),
    ])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `--fatbin FILE -o DIR/out.hipfb --functions 1` (exit 0, every entry of the output
/// returned) and the same with `--strict` (exit 3, nothing written).
fn fatbin_keeps(dir: &Path, file: &Path, what: &str) -> (Output, Vec<hsaco::bundle::BundleEntry>) {
    let out = dir.join("out.hipfb");
    let mut args = vec![
        "--fatbin".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
    let written = std::fs::read(&out).expect("output");
    let after = hsaco::bundle::parse_plain(&written, 0).expect("output parses");
    assert_eq!(after.entries.len(), 5, "{what}: every entry kept");
    std::fs::remove_file(&out).expect("remove output");
    args.push("--strict".as_ref());
    let s = run(&args);
    assert_eq!(s.status.code(), Some(3), "{what}: {}", text(&s.stderr));
    assert!(!out.exists(), "{what}: --strict wrote an output");
    (o, after.entries)
}

/// True when `b` holds no control byte but newlines (an id's bytes are never printed raw).
fn no_control_bytes(b: &[u8]) -> bool {
    b.iter().all(|&c| c == b'\n' || !c.is_ascii_control())
}

/// Writes `bytes` as `in.hipfb` in a new temporary directory.
fn input(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("in.hipfb");
    std::fs::write(&file, bytes).expect("write input");
    (dir, file)
}

/// An entry whose id is malformed (one byte of `amdgcn` changed, or a control character) used
/// to be dropped silently: `info` listed one code object less, `--fatbin` exited 0, with
/// `--strict` too. Now `info` lists it with the reason, `--fatbin` keeps it unchanged with a
/// warning naming the entry and its offset, `--strict` refuses the input (exit 3, as for any
/// entry that cannot be read; nothing written), and `extract` names it.
#[test]
fn an_entry_with_a_malformed_id_is_named_and_kept() {
    let good = plain_bundle();
    let bundle = hsaco::bundle::parse_plain(&good, 0).expect("fixture parses");
    let entry = &bundle.entries[2];
    assert_eq!(entry.id, "hipv4-amdgcn-amd-amdhsa--gfx942");
    let id_at = entry_header(&good, 2, 24);
    // The last three used to pass the check because the id holds `amdgcn-amd-amdhsa`
    // (session-21 fresh tester): an unknown offload kind, an escape character in the processor,
    // a processor that is not `gfx...`.
    for (what, at, byte) in [
        ("amdgcn", 9, b'X'),
        ("control", 9, 1u8),
        ("kind", 0, b'z'),
        ("escape", 25, 0x1b),
        ("processor", 25, b'G'),
    ] {
        let mut b = good.clone();
        b[id_at + at] = byte;
        let id = String::from_utf8_lossy(&b[id_at..id_at + entry.id.len()]).into_owned();
        let where_ = format!("bundle 0 entry 2 ({id}) at file offset {:#x}", entry.offset);
        let (dir, file) = input(&b);

        let o = run(&["info".as_ref(), file.as_os_str()]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o.stderr));
        assert!(
            out.contains("3 code object(s), 1 malformed bundle entry (not read)"),
            "{what}: {out}"
        );
        assert!(
            out.contains(&format!(
                "note: {} ({} bytes) was not read as a code object: its id {id:?}",
                where_.escape_debug(),
                entry.data.len()
            )),
            "{what}: {out}"
        );
        assert!(no_control_bytes(&o.stdout), "{what}: {out}");
        let o = run(&["info".as_ref(), file.as_os_str(), "--json".as_ref()]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let m = &v["malformed_entries"][0];
        assert_eq!(
            (m["bundle_index"].as_u64(), m["entry_index"].as_u64()),
            (Some(0), Some(2)),
            "{what}: {v}"
        );
        assert_eq!(m["entry_offset"].as_u64(), Some(entry.offset), "{what}");

        let (o, after) = fatbin_keeps(dir.path(), &file, what);
        let err = text(&o.stderr);
        assert!(
            no_control_bytes(&o.stdout) && no_control_bytes(&o.stderr),
            "{what}: {err}"
        );
        assert!(
            err.contains(&format!(
                "): bundle 0 entry 2 at file offset {:#x} ({} bytes) kept unchanged, not instrumented: its id {id:?}",
                entry.offset,
                entry.data.len()
            )),
            "{what}: {err}"
        );
        assert!(
            text(&o.stdout).contains("left unchanged (failed closed): not read as a code object"),
            "{what}: {}",
            text(&o.stdout)
        );
        assert_eq!(after[2].id, id, "{what}: the id as it was");
        assert_eq!(after[2].data, entry.data, "{what}: its bytes unchanged");
        assert_ne!(after[1].data, bundle.entries[1].data, "others instrumented");

        let dest = dir.path().join("x");
        let o = extract(&file, &dest);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{what}: {err}");
        assert!(
            err.contains(&format!("warning: {} (", where_.escape_debug()))
                && err.contains("not extracted: its id"),
            "{what}: {err}"
        );
        assert_eq!(std::fs::read_dir(&dest).expect("dir").count(), 3, "{what}");
    }
}

/// An entry offset moved by 0x100 bytes (the entry now starts inside the gfx942 code object):
/// `extract` used to write those bytes as `0-hipv4-amdgcn-amd-amdhsa--gfx942.co` and exit 0.
/// It is bad input now (exit 2) naming the entry, its file offset and what the bytes are, and
/// nothing is extracted: the other entries neither (every output of a run is checked before
/// the first is written), and a directory the run would have created is not left behind.
/// `info` names the entry the same way.
#[test]
fn an_entry_that_is_not_a_code_object_is_not_extracted() {
    let good = plain_bundle();
    let bundle = hsaco::bundle::parse_plain(&good, 0).expect("fixture parses");
    let entry = &bundle.entries[2];
    let moved = entry.offset + 0x100;
    let mut b = good.clone();
    let at = entry_header(&good, 2, 0);
    b[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    let head: Vec<String> = good[moved as usize..moved as usize + 8]
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let (dir, file) = input(&b);
    let where_ = format!("bundle 0 entry 2 ({}) at file offset {moved:#x}", entry.id);
    for existing in [false, true] {
        let dest = dir.path().join("x");
        if existing {
            std::fs::create_dir(&dest).expect("mkdir");
        }
        let o = extract(&file, &dest);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "sqtt-patch: error: {}: {where_} ({} bytes) is not an AMDGPU code object: not an ELF file: it starts with {} instead of 7f 45 4c 46 (\\x7fELF); nothing extracted (--skip-bad-entries extracts the 3 code object(s) that load)",
                file.display(),
                entry.data.len(),
                head.join(" ")
            )
        );
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
        match existing {
            false => assert!(!dest.exists(), "the directory was created"),
            true => assert_eq!(std::fs::read_dir(&dest).expect("dir").count(), 0),
        }
    }
    let o = run(&["info".as_ref(), file.as_os_str()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: {where_} ({} bytes) is not an AMDGPU code object: not an ELF file",
            file.display(),
            entry.data.len()
        )),
        "{err}"
    );
}

/// An entry whose ELF identification says ELF32 (byte 4 set to 1): `info` and `extract` named
/// it "not an ELF64 file (EI_CLASS Some(1) at offset 0x4)" (session-27 tester: a Rust value in
/// a message); they say what every command says of an ELF32 file now.
#[test]
fn an_elf32_entry_is_named_as_elf32() {
    let good = plain_bundle();
    let bundle = hsaco::bundle::parse_plain(&good, 0).expect("fixture parses");
    let entry = &bundle.entries[2];
    let mut b = good.clone();
    b[entry.offset as usize + 4] = 1;
    let (dir, file) = input(&b);
    let want = format!(
        "{}: bundle 0 entry 2 ({}) at file offset {:#x} ({} bytes) is not an AMDGPU code object: ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64",
        file.display(),
        entry.id,
        entry.offset,
        entry.data.len()
    );
    let info = run(&["info".as_ref(), file.as_os_str()]);
    let extracted = extract(&file, &dir.path().join("x"));
    for o in [info, extracted] {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&want), "{err}");
        assert!(!err.contains("Some("), "{err}");
    }
}

/// The plain fixture bundle with entry 2's size cut in half (a code object that does not
/// load), the unmodified bundle parsed, and the new size (bytes).
fn half_an_entry() -> (Vec<u8>, hsaco::bundle::Bundle, usize) {
    let good = plain_bundle();
    let bundle = hsaco::bundle::parse_plain(&good, 0).expect("fixture parses");
    let half = bundle.entries[2].data.len() / 2;
    let mut b = good.clone();
    let at = entry_header(&good, 2, 8);
    b[at..at + 8].copy_from_slice(&(half as u64).to_le_bytes());
    (b, bundle, half)
}

/// Asserts that `extract FILE -o DIR` exits 2 with exactly `message` (after the file name) on
/// stderr, and writes nothing: not into a directory that exists, and no directory it would
/// have created.
fn extract_refuses(dir: &Path, file: &Path, message: &str) {
    let base = tempfile::tempdir_in(dir).expect("tempdir");
    for existing in [false, true] {
        let dest = base.path().join(format!("x{existing}"));
        if existing {
            std::fs::create_dir(&dest).expect("mkdir");
        }
        let o = extract(file, &dest);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(
            err.trim_end(),
            format!("sqtt-patch: error: {}: {message}", file.display())
        );
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
        match existing {
            false => assert!(!dest.exists(), "the directory was created"),
            true => assert_eq!(std::fs::read_dir(&dest).expect("dir").count(), 0),
        }
    }
}

/// An entry whose size is cut in half (session-21 fresh tester): `info` exits 2 on it, but
/// `extract` checked only the ELF magic and wrote the truncated code object with exit 0. It
/// loads each entry as the other commands do now: exit 2 naming the bundle, entry, file offset
/// and the loader's reason, nothing written. The same for a bare code object the loader
/// refuses (a descriptor entry offset outside every executable section), which `extract`
/// copied.
#[test]
fn a_code_object_that_does_not_load_is_not_extracted() {
    let (b, bundle, half) = half_an_entry();
    let entry = &bundle.entries[2];
    let why = hsaco::CodeObject::parse(&entry.data[..half])
        .expect_err("half a code object does not load")
        .to_string();
    let (dir, file) = input(&b);
    let o = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    extract_refuses(
        dir.path(),
        &file,
        &format!(
            "bundle 0 entry 2 ({}) at file offset {:#x} ({half} bytes) cannot be loaded (offsets count from the entry's start): {why}; nothing extracted (--skip-bad-entries extracts the 3 code object(s) that load)",
            entry.id, entry.offset
        ),
    );

    let mut co = fixture("objects/gfx1100__calls__O3.co");
    let kd = hsaco::CodeObject::parse(&co)
        .expect("fixture parses")
        .kernels[0]
        .kd_offset as usize;
    co[kd + 0x10..kd + 0x18].copy_from_slice(&0x4000_0000i64.to_le_bytes());
    let why = hsaco::CodeObject::parse(&co)
        .expect_err("the descriptor is refused")
        .to_string();
    let file = dir.path().join("bad-kd.co");
    std::fs::write(&file, &co).expect("write input");
    let o = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    extract_refuses(
        dir.path(),
        &file,
        &format!("the code object cannot be loaded: {why}; nothing extracted"),
    );
}

/// An AMDGPU entry of size 0 was dropped silently everywhere (session-21 fresh tester). `info`
/// lists it with its index and offset, `--fatbin` keeps it with a warning naming the bundle,
/// entry and offset (`--strict` refuses the input, exit 3), `extract` exits 2 and writes
/// nothing.
#[test]
fn an_empty_amdgpu_entry_is_named() {
    let good = plain_bundle();
    let bundle = hsaco::bundle::parse_plain(&good, 0).expect("fixture parses");
    let entry = &bundle.entries[2];
    let mut b = good.clone();
    let at = entry_header(&good, 2, 8);
    b[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let (dir, file) = input(&b);
    let why =
        "it is empty (0 bytes) although its id names an AMDGPU target: it holds no code object";
    let where_ = format!(
        "bundle 0 entry 2 ({}) at file offset {:#x}",
        entry.id, entry.offset
    );

    let o = run(&["info".as_ref(), file.as_os_str()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        out.contains("3 code object(s), 1 malformed bundle entry (not read)")
            && out.contains(&format!(
                "note: {where_} (0 bytes) was not read as a code object: {why}"
            )),
        "{out}"
    );

    let (o, after) = fatbin_keeps(dir.path(), &file, "empty");
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "bundle 0 entry 2 at file offset {:#x} (0 bytes) kept unchanged, not instrumented: {why}",
            entry.offset
        )),
        "{err}"
    );
    assert_eq!(
        (after[2].id.as_str(), after[2].data.len()),
        (entry.id.as_str(), 0)
    );

    extract_refuses(
        dir.path(),
        &file,
        &format!("{where_} (0 bytes): {why}; nothing extracted (--skip-bad-entries extracts the 3 code object(s) that load)"),
    );
}

/// The index and entry of the plain bundle `good` whose id ends in `processor`.
fn entry_for(good: &[u8], processor: &str) -> (usize, hsaco::bundle::BundleEntry) {
    let bundle = hsaco::bundle::parse_plain(good, 0).expect("fixture parses");
    let i = bundle
        .entries
        .iter()
        .position(|e| e.id.ends_with(processor))
        .unwrap_or_else(|| panic!("a {processor} entry"));
    (i, bundle.entries[i].clone())
}

/// An entry whose id names another processor than its code object's ELF header (session-21
/// and session-22 fresh testers: accepted without a word, and `--offload-arch gfx908` then
/// selected a gfx90a object). The gfx90a entry's id is changed to `gfx908` (same length, so the
/// layout stays): `info` and `--fatbin` warn, naming the entry and its offset and both
/// processors; the entry is kept as it is and still selected by its id.
#[test]
fn an_id_naming_another_processor_is_a_warning() {
    let good = plain_bundle();
    let (i, entry) = entry_for(&good, "gfx90a");
    let at = entry_header(&good, i, 24) + entry.id.len() - "gfx90a".len();
    let mut b = good.clone();
    b[at..at + 6].copy_from_slice(b"gfx908");
    let (dir, file) = input(&b);
    let why =
        "its id names processor gfx908 but its code object's ELF header (e_flags) says gfx90a";

    let o = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains(&format!("  warning: {why}")), "{out}");

    let out_file = dir.path().join("out.hipfb");
    let o = run(&[
        "--fatbin".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        out_file.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
        "--offload-arch".as_ref(),
        "gfx908".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "): bundle 0 entry {i} at file offset {:#x}: {why}",
            entry.offset
        )),
        "{err}"
    );
    // Selected by its id, instrumented, and still under that id.
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(&format!(
            "bundle 0 {}",
            entry.id.replace("gfx90a", "gfx908")
        )) && stdout.contains("instrumented"),
        "{stdout}"
    );
    let written = std::fs::read(&out_file).expect("output");
    let after = hsaco::bundle::parse_plain(&written, 0).expect("output parses");
    assert!(after.entries[i].id.ends_with("gfx908"));
    assert_ne!(after.entries[i].data, entry.data, "instrumented");
}

/// A bundle entry that fails closed used to be named on standard output only ("bundle 0
/// hipv4-...: left unchanged (failed closed): ...", offsets in the reason relative to the
/// entry): standard error now says which entry it is, where it starts in the file, and that
/// the reason's offsets count from there (session-22 fresh tester). The gfx1100 entry gets a
/// device function whose `.symtab` name is empty (no funcmap row could name it: failed closed).
#[test]
fn a_failed_entry_is_named_with_its_offset_on_stderr() {
    let good = plain_bundle();
    let (i, entry) = entry_for(&good, "gfx1100");
    let co = hsaco::CodeObject::parse(&entry.data).expect("entry parses");
    let sym = co
        .symbols
        .iter()
        .find(|s| {
            s.symbol.table == hsaco::elf::SymbolTable::Symtab
                && s.symbol.st_type == hsaco::elf::STT_FUNC
                && s.symbol.name.starts_with("_Z")
        })
        .expect("a device function's .symtab entry");
    let at = entry.offset as usize + sym.symbol.entry_offset as usize;
    let mut b = good.clone();
    b[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    let (dir, file) = input(&b);
    let out = dir.path().join("out.hipfb");
    let o = run(&[
        "--fatbin".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let want = format!(
        "): bundle 0 entry {i} at file offset {:#x} left unchanged \
         (failed closed; offsets in the reason count from the entry's start): ",
        entry.offset
    );
    assert!(
        err.contains(&want) && err.contains("has no usable symbol name"),
        "{err}"
    );
    let after = hsaco::bundle::parse_plain(&std::fs::read(&out).expect("output"), 0)
        .expect("output parses");
    assert_eq!(
        after.entries[i].data,
        b[entry.offset as usize..][..entry.data.len()]
    );
}

/// A bundle with one entry that does not load (its size cut in half), session-23 fresh
/// tester: `info` refused the whole bundle (exit 2, nothing listed) and `extract` gave no way
/// to get the others. `info` now lists every entry that loads, names the broken one (bundle,
/// entry, id, file offset, size, the loader's reason) on stdout, in the JSON
/// (`unloadable_entries`) and on stderr, and exits 2. `extract` still extracts nothing
/// without asking (exit 2, saying how to get the others); `--skip-bad-entries` extracts the
/// three that load and names the one it skipped. Checked against clang-offload-bundler-22's
/// own listing of the bundle's targets.
#[test]
fn info_lists_the_entries_that_load_beside_a_broken_one() {
    let (b, bundle, half) = half_an_entry();
    let entry = &bundle.entries[2];
    let why = hsaco::CodeObject::parse(&entry.data[..half])
        .expect_err("half a code object does not load")
        .to_string();
    let named = format!(
        "bundle 0 entry 2 ({}) at file offset {:#x} ({half} bytes) cannot be loaded (offsets count from the entry's start): {why}",
        entry.id, entry.offset
    );
    let (dir, file) = input(&b);

    let o = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with(&format!(
            "{}: offload bundle, 3 code object(s), 1 entry that does not load\nerror: {named}\n",
            file.display()
        )),
        "{out}"
    );
    let listed: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("code object "))
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    let others: Vec<&str> = bundle
        .entries
        .iter()
        .filter(|e| e.is_amdgcn() && e.id != entry.id)
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(listed, others, "{out}");
    // Each listed code object names its entry index (the numbering of the listing skips the
    // broken entry; session-24 fresh tester).
    let indices: Vec<String> = bundle
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.is_amdgcn() && e.id != entry.id)
        .map(|(i, e)| format!("{} (bundle 0 entry {i}, cov", e.id))
        .collect();
    for want in &indices {
        assert!(out.contains(want.as_str()), "{want}: {out}");
    }
    assert_eq!(
        text(&o.stderr).trim_end(),
        format!(
            "sqtt-patch: error: {}: {named}; the code objects that load are listed",
            file.display()
        )
    );
    let j = run(&["info".as_ref(), file.as_os_str(), "--json".as_ref()]);
    assert_eq!(j.status.code(), Some(2), "{}", text(&j.stderr));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).expect("JSON");
    assert_eq!(v["code_objects"].as_array().map(Vec::len), Some(3));
    let json_indices: Vec<u64> = v["code_objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["entry_index"].as_u64())
        .collect();
    let want: Vec<u64> = bundle
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.is_amdgcn() && e.id != entry.id)
        .map(|(i, _)| i as u64)
        .collect();
    assert_eq!(json_indices, want);
    let u = &v["unloadable_entries"][0];
    assert_eq!(u["entry_index"], 2);
    assert_eq!(u["entry_offset"], entry.offset);
    assert_eq!(u["size"], half);
    assert_eq!(u["why"], named.as_str());

    // The oracle: clang-offload-bundler lists the same five targets in the edited header.
    let l = Command::new("clang-offload-bundler-22")
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", file.display()))
        .output()
        .expect("clang-offload-bundler-22 (LLVM 22) is needed: tools/setup.sh");
    let ids = text(&l.stdout);
    for e in &bundle.entries {
        assert!(ids.lines().any(|l| l == e.id), "{ids}");
    }

    let dest = dir.path().join("some");
    let o = run(&[
        "extract".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        dest.as_os_str(),
        "--skip-bad-entries".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr).trim_end(),
        format!(
            "sqtt-patch: {}: warning: not extracted (--skip-bad-entries): {named}",
            file.display()
        )
    );
    let mut written = support::names_in(&dest);
    written.sort();
    let mut want: Vec<String> = others
        .iter()
        .map(|id| format!("0-{}.co", id.replace(':', "_")))
        .collect();
    want.sort();
    assert_eq!(written, want);
    for e in bundle
        .entries
        .iter()
        .filter(|e| e.is_amdgcn() && e.id != entry.id)
    {
        let f = dest.join(format!("0-{}.co", e.id.replace(':', "_")));
        assert_eq!(std::fs::read(f).expect("extracted"), e.data, "{}", e.id);
    }
}
