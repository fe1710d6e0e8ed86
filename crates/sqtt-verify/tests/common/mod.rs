//! Shared helpers: corpus location and tiny byte-level editors used to build mutations of real
//! code objects (the rewriter is deliberately not used).
#![allow(dead_code)]

use std::path::PathBuf;

use amdgpu_isa::{decode, Instruction, Target};
use hsaco::CodeObject;

/// `<workspace root>/fixtures/corpus/compiled`; panics with a clear message when absent.
pub fn corpus_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("fixtures/corpus/compiled");
    assert!(
        dir.is_dir(),
        "corpus not found at {} (expected <workspace root>/fixtures/corpus/compiled)",
        dir.display()
    );
    dir
}

/// Every `*.co` of the corpus, sorted.
pub fn corpus_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("read corpus dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "co"))
        .collect();
    v.sort();
    v
}

pub fn load(name: &str) -> Vec<u8> {
    let p = corpus_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

pub fn isa(co: &CodeObject) -> Target {
    Target::from_elf_mach(co.elf.header.e_flags & 0xff).expect("known target")
}

/// File offset of a `.text` address.
pub fn text_off(co: &CodeObject, addr: u64) -> usize {
    let t = co.text().expect(".text");
    (t.offset + (addr - t.addr)) as usize
}

/// Decoded instructions `(address, instruction)` of `[start, end)` of `.text`.
pub fn decode_range(co: &CodeObject, start: u64, end: u64) -> Vec<(u64, Instruction)> {
    let t = isa(co);
    let (s, e) = (text_off(co, start), text_off(co, end));
    let bytes = &co.bytes[s..e];
    let mut out = Vec::new();
    let mut off = 0;
    while off < bytes.len() {
        let i = decode(&bytes[off..], t).expect("decodes");
        out.push((start + off as u64, i));
        off += i.len();
    }
    out
}

/// Kernels fit for insertion by shifting: the body has no `s_getpc` (no PC-relative literals to
/// fix), no branch leaves it, no kernarg preload, and at least `room` bytes of `s_nop 0` padding
/// follow it. Returns (kernel name, entry, body end) in descriptor order.
pub fn shiftable_kernels(co: &CodeObject, room: u64) -> Vec<(String, u64, u64)> {
    let kernels: Vec<(String, u64, u64)> = co
        .kernels
        .iter()
        .filter(|k| k.descriptor.kernarg_preload_length() == 0)
        .filter_map(|k| Some((k.name.clone(), k.entry, k.code_size?)))
        .collect();
    shiftable(co, kernels, room)
}

/// Device functions fit for insertion by shifting (same conditions as [`shiftable_kernels`]).
pub fn shiftable_functions(co: &CodeObject, room: u64) -> Vec<(String, u64, u64)> {
    shiftable(
        co,
        co.functions
            .iter()
            .map(|f| (f.name.clone(), f.address, f.size))
            .collect(),
        room,
    )
}

fn shiftable(
    co: &CodeObject,
    cands: Vec<(String, u64, u64)>,
    room: u64,
) -> Vec<(String, u64, u64)> {
    let Some(text) = co.text() else {
        return Vec::new();
    };
    let mut starts: Vec<u64> = co
        .kernels
        .iter()
        .map(|k| k.entry)
        .chain(co.functions.iter().map(|f| f.address))
        .collect();
    starts.sort_unstable();
    let mut out = Vec::new();
    for (name, entry, size) in cands {
        let end = entry + size;
        let next = starts
            .iter()
            .copied()
            .find(|&s| s > entry)
            .unwrap_or(text.addr + text.size);
        if size == 0 || next < end + room {
            continue;
        }
        let body = decode_range(co, entry, end);
        let pad = decode_range(co, end, end + room);
        let pad_ok = pad
            .iter()
            .all(|(_, i)| i.mnemonic() == "s_nop" && i.field("simm16") == Some(0));
        let self_contained = body.iter().all(|(a, i)| {
            i.mnemonic() != "s_getpc_b64"
                && i.mnemonic() != "s_get_pc_i64"
                && i.branch_target(*a).is_none_or(|t| t >= entry && t < end)
        });
        if pad_ok && self_contained {
            out.push((name, entry, end));
        }
    }
    out
}

/// Inserts `insert` (whole instructions) in front of the instruction at `at` inside a shiftable
/// kernel: the rest of the body moves into the padding that follows, branch displacements inside
/// the kernel are recomputed (a branch to `at` lands at the inserted code), and the kernel's FUNC
/// symbol sizes grow. This is a tiny relayout for tests, not the rewriter.
pub fn insert_before(bytes: &[u8], at: u64, insert: &[u8]) -> Vec<u8> {
    let co = CodeObject::parse(bytes).expect("parse");
    let len = insert.len() as u64;
    let all_kernels = co
        .kernels
        .iter()
        .filter_map(|k| Some((k.name.clone(), k.entry, k.code_size?)))
        .collect();
    let (name, entry, end) = shiftable(&co, all_kernels, len)
        .into_iter()
        .chain(shiftable_functions(&co, len))
        .find(|(_, s, e)| at >= *s && at < *e)
        .expect("instruction inside a shiftable kernel");
    let body = decode_range(&co, entry, end);
    let moved = |a: u64| if a > at { a + len } else { a };
    let mut out = bytes.to_vec();
    let mut cursor = text_off(&co, entry);
    for (a, i) in &body {
        if *a == at {
            out[cursor..cursor + insert.len()].copy_from_slice(insert);
            cursor += insert.len();
        }
        let na = if *a >= at { a + len } else { *a };
        let i = match i.branch_target(*a) {
            Some(tgt) => i
                .with_branch_target(na, moved(tgt))
                .expect("branch re-encodes"),
            None => *i,
        };
        out[cursor..cursor + i.len()].copy_from_slice(i.bytes());
        cursor += i.len();
    }
    for sym in co
        .symbols
        .iter()
        .filter(|x| x.symbol.name == name && x.symbol.st_type == hsaco::elf::STT_FUNC)
    {
        let off = sym.symbol.entry_offset as usize + 16;
        let size = sym.symbol.size + len;
        out[off..off + 8].copy_from_slice(&size.to_le_bytes());
    }
    out
}

/// Entry of the first shiftable kernel with `room` bytes of padding.
pub fn shiftable_entry(bytes: &[u8], room: u64) -> u64 {
    let co = CodeObject::parse(bytes).expect("parse");
    shiftable_kernels(&co, room)
        .first()
        .expect("a shiftable kernel")
        .1
}

/// Concatenated encodings.
pub fn cat(insts: &[Instruction]) -> Vec<u8> {
    insts.iter().flat_map(|i| i.bytes().to_vec()).collect()
}

/// First instruction of the object's functions for which `pred` holds: (address, instruction).
pub fn find_inst(
    co: &CodeObject,
    pred: impl Fn(&Instruction) -> bool,
) -> Option<(u64, Instruction)> {
    let mut regions: Vec<(u64, u64)> = co
        .kernels
        .iter()
        .filter_map(|k| Some((k.entry, k.entry + k.code_size?)))
        .collect();
    regions.extend(co.functions.iter().map(|f| (f.address, f.address + f.size)));
    regions.sort_unstable();
    regions
        .into_iter()
        .flat_map(|(s, e)| decode_range(co, s, e))
        .find(|(_, i)| pred(i))
}

/// Adds a non-alloc `.sqtt_funcmap` section with `rows` (hsaco's editor; not the rewriter).
pub fn with_funcmap(bytes: &[u8], rows: &str) -> Vec<u8> {
    let co = CodeObject::parse(bytes).expect("parse");
    let mut ed = hsaco::CodeObjectEditor::new(&co);
    let mut data = rows.as_bytes().to_vec();
    data.push(0);
    ed.add_or_replace_section(".sqtt_funcmap", 1, 0, 1, data)
        .expect("add section");
    ed.write().expect("write")
}

/// Adds the `.sqtt_patch` run record every rewrite carries (the JSON line the rewriter writes,
/// options elided; hsaco's editor, not the rewriter), unless `bytes` already have one.
pub fn with_record(bytes: &[u8]) -> Vec<u8> {
    let co = CodeObject::parse(bytes).expect("parse");
    if co.section(".sqtt_patch").is_some() {
        return bytes.to_vec();
    }
    let mut ed = hsaco::CodeObjectEditor::new(&co);
    let record = br#"{"options":"test","tool":"sqtt-patch","version":"0.1.0"}"#;
    let mut data = record.to_vec();
    data.push(b'\n');
    ed.add_or_replace_section(".sqtt_patch", 1, 0, 1, data)
        .expect("add section");
    ed.write().expect("write")
}

/// Assembles and links a hand-written kernel with `llvm-mc-22` and `ld.lld-22` (LLVM is an oracle
/// here, never a run-time dependency of the verifier). Returns `None` only when LLVM is missing
/// and `SQTT_NO_LLVM=1`; panics when it is missing otherwise.
pub fn assemble(name: &str, mcpu: &str, src: &str) -> Option<Vec<u8>> {
    let bin = std::path::Path::new("/usr/lib/llvm-22/bin");
    if !bin.join("llvm-mc").exists() {
        assert!(
            std::env::var("SQTT_NO_LLVM").as_deref() == Ok("1"),
            "LLVM 22 not found in {} (set SQTT_NO_LLVM=1 to skip)",
            bin.display()
        );
        return None;
    }
    // One directory per call: tests of one process run in parallel and may reuse a name.
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sqtt-verify-{}-{seq}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (s, o, co) = (dir.join("k.s"), dir.join("k.o"), dir.join("k.co"));
    std::fs::write(&s, src).expect("write asm");
    let ok = std::process::Command::new(bin.join("llvm-mc"))
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-filetype=obj",
        ])
        .arg(&s)
        .arg("-o")
        .arg(&o)
        .status()
        .expect("run llvm-mc")
        .success();
    assert!(ok, "llvm-mc failed on {name}");
    let ok = std::process::Command::new(bin.join("ld.lld"))
        .arg("-shared")
        .arg(&o)
        .arg("-o")
        .arg(&co)
        .status()
        .expect("run ld.lld")
        .success();
    assert!(ok, "ld.lld failed on {name}");
    let bytes = std::fs::read(&co).expect("read linked object");
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

/// Assembles a label-free instruction sequence with `llvm-mc-22 -show-encoding` (the LLVM oracle
/// encodes snippets whose instructions `amdgpu_isa::build` has no constructor for). Returns
/// `None` only when LLVM is missing and `SQTT_NO_LLVM=1`.
pub fn asm_snippet(mcpu: &str, text: &str) -> Option<Vec<u8>> {
    use std::io::Write;
    let mc = std::path::Path::new("/usr/lib/llvm-22/bin/llvm-mc");
    if !mc.exists() {
        assert!(
            std::env::var("SQTT_NO_LLVM").as_deref() == Ok("1"),
            "LLVM 22 not found at {} (set SQTT_NO_LLVM=1 to skip)",
            mc.display()
        );
        return None;
    }
    let mut child = std::process::Command::new(mc)
        .args([
            "-triple=amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-show-encoding",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn llvm-mc");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write llvm-mc stdin");
    let out = child.wait_with_output().expect("llvm-mc output");
    assert!(
        out.status.success(),
        "llvm-mc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bytes = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((_, enc)) = l.split_once("encoding: [") else {
            continue;
        };
        for b in enc.trim_end_matches(']').split(',') {
            let b = b.trim().trim_start_matches("0x");
            bytes.push(u8::from_str_radix(b, 16).expect("hex byte"));
        }
    }
    Some(bytes)
}
