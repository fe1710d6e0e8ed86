//! `sqtt-patch info` on every malformed-input class of issue 3 (truncated files, wrong
//! `e_machine`, ELF32, HSAIL-era ABI-0 objects, corrupt descriptors, overlapping sections, bundle
//! offsets past the end, lying CCOB sizes): exit code 2 (`exit::INPUT`), no panic, and a message
//! on stderr naming the file and the offset, pinned here.
//!
//! Inputs are real objects and bundles from `fixtures/` (clang/LLVM 22, see
//! `fixtures/README.md`) with one field changed; offsets of descriptors and section headers come
//! from `hsaco` on the unmodified file.

mod support;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::fixture;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn object() -> Vec<u8> {
    fixture("objects/gfx1100__calls__O3.co")
}

/// Writes `bytes` as `name` in a temporary directory, runs `sqtt-patch info FILE` (and with
/// `--json`), checks exit code 2 and no panic, and returns the stderr line.
fn info_fails(name: &str, bytes: &[u8]) -> (PathBuf, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).expect("write input");
    let mut first = None;
    for json in [false, true] {
        let mut cmd = Command::new(BIN);
        cmd.arg("info").arg(&file);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().expect("run sqtt-patch");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{name}: stderr {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}: output on stdout");
        first.get_or_insert(err);
    }
    let err = first.expect("ran");
    // Keep the directory alive until the caller has compared paths.
    let kept = dir.keep();
    let file = kept.join(name);
    (file, err.trim_end().to_string())
}

/// Asserts the stderr line is exactly `sqtt-patch: error: FILE: CONTEXT: MESSAGE` (without
/// `CONTEXT: ` when `context` is empty).
fn check(name: &str, bytes: &[u8], context: &str, message: &str) {
    let (file, err) = info_fails(name, bytes);
    let context = match context {
        "" => String::new(),
        c => format!("{c}: "),
    };
    assert_eq!(
        err,
        format!("sqtt-patch: error: {}: {context}{message}", file.display())
    );
    let _ = std::fs::remove_dir_all(file.parent().expect("dir"));
}

const PARSE: &str = "cannot parse";
/// A bare code object's own parse errors carry no inner name (session-28 tester: `info` named
/// a "code object 0-code-object.co" that exists nowhere).
const CO: &str = "";

#[test]
fn truncated_files() {
    let b = object();
    check(
        "short.co",
        &b[..10],
        PARSE,
        "truncated input: ELF identification needs 16 bytes at offset 0x0, but the data is 10 bytes long",
    );
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let n = co.elf.header.e_shoff as usize + 100;
    check(
        "cut.co",
        &b[..n],
        PARSE,
        &format!(
            "section header table at offset {:#x} with size {:#x} extends past the end of the data ({n:#x} bytes)",
            co.elf.header.e_shoff,
            64 * co.elf.header.e_shnum
        ),
    );
    let bundle = fixture("bundles/calls-4arch__plain.hipfb");
    check(
        "short.hipfb",
        &bundle[..30],
        PARSE,
        "truncated input: bundle entry count needs 8 bytes at offset 0x18, but the data is 30 bytes long",
    );
}

#[test]
fn wrong_machine_elf32_and_abi0() {
    let mut b = object();
    b[0x12] = 40; // EM_ARM
    check(
        "arm.co",
        &b,
        PARSE,
        "wrong e_machine 40 at offset 0x12: expected 224",
    );
    let mut b = object();
    b[4] = 1;
    check(
        "elf32.co",
        &b,
        PARSE,
        "ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64",
    );
    // Cut before its 16-byte identification, an ELF32 file is still named as ELF32, as the
    // main job names it (session-27 tester: "truncated input").
    check(
        "elf32-short.co",
        b"\x7fELF\x01",
        PARSE,
        "ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64",
    );
    let mut b = object();
    let flags = u32::from_le_bytes(b[0x30..0x34].try_into().expect("4 bytes"));
    b[8] = 0;
    check(
        "abi0.co",
        &b,
        CO,
        &format!("legacy HSAIL-era code object (EI_ABIVERSION 0 at offset 0x8, e_flags {flags:#x}) is not supported: only code object v4, v5 and v6 are"),
    );
}

#[test]
fn corrupt_descriptor() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let k = &co.kernels[0];
    let mut b2 = b.clone();
    let o = k.kd_offset as usize + 0x10; // kernel_code_entry_byte_offset
    b2[o..o + 8].copy_from_slice(&0x4000_0000i64.to_le_bytes());
    check(
        "bad-kd.co",
        &b2,
        CO,
        &format!(
            "kernel descriptor {}.kd at offset {:#x}: entry address {:#x} (kernel_code_entry_byte_offset 1073741824) is outside every executable section",
            k.name,
            k.kd_offset,
            k.kd_address + 0x4000_0000
        ),
    );
}

/// A descriptor whose entry points at a device function while the kernel's own symbol is
/// elsewhere (fresh-tester finding: it was reported as "does not verify against itself").
#[test]
fn descriptor_entry_at_a_device_function() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let k = &co.kernels[0];
    let f = co
        .functions
        .first()
        .expect("the calls fixture has device functions");
    let mut b2 = b.clone();
    let o = k.kd_offset as usize + 0x10; // kernel_code_entry_byte_offset
    let rel = f.address as i64 - k.kd_address as i64;
    b2[o..o + 8].copy_from_slice(&rel.to_le_bytes());
    check(
        "kd-at-function.co",
        &b2,
        CO,
        &format!(
            "malformed kernel descriptor at offset {:#x}: {}.kd: kernel_code_entry_byte_offset {rel:#x} points at {:#x}, the function {}, not at the kernel's own symbol {} ({:#x})",
            k.kd_offset, k.name, f.address, f.name, k.name, k.entry
        ),
    );
}

#[test]
fn overlapping_sections() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let rodata = co.section(".rodata").expect(".rodata");
    let text = co.section(".text").expect(".text");
    let mut b2 = b.clone();
    let sh = co.elf.header.e_shoff as usize + 64 * rodata.index + 24; // sh_offset
    b2[sh..sh + 8].copy_from_slice(&(text.offset - 16).to_le_bytes());
    check(
        "overlap.co",
        &b2,
        PARSE,
        &format!(
            "sections .rodata and .text overlap in the file at offset {:#x}",
            text.offset
        ),
    );
}

#[test]
fn bundle_offset_past_the_end() {
    let mut b = fixture("bundles/calls-4arch__plain.hipfb");
    let id0 = u64::from_le_bytes(b[48..56].try_into().expect("8 bytes")) as usize;
    let e1 = 56 + id0; // entry 1: offset field
    let id1_len = u64::from_le_bytes(b[e1 + 16..e1 + 24].try_into().expect("8")) as usize;
    let id1 = String::from_utf8_lossy(&b[e1 + 24..e1 + 24 + id1_len]).into_owned();
    let size = u64::from_le_bytes(b[e1 + 8..e1 + 16].try_into().expect("8"));
    let len = b.len() as u64;
    b[e1..e1 + 8].copy_from_slice(&len.to_le_bytes());
    check(
        "past-end.hipfb",
        &b,
        PARSE,
        &format!("offload bundle entry 1 ({id1}) at offset {len:#x} with size {size:#x} extends past the end of the data ({len:#x} bytes)"),
    );
}

#[test]
fn lying_ccob_sizes() {
    let ccob = fixture("bundles/calls-4arch__ccob-v3-zstd.hipfb");
    let real = u64::from_le_bytes(ccob[16..24].try_into().expect("8 bytes"));
    let mut small = ccob.clone();
    small[16..24].copy_from_slice(&1000u64.to_le_bytes());
    check(
        "small.hipfb",
        &small,
        PARSE,
        "compressed offload bundle at offset 0x0: declared uncompressed size 1000 but the payload decompresses to more than 1000 bytes",
    );
    let mut big = ccob.clone();
    big[16..24].copy_from_slice(&(real + 1).to_le_bytes());
    check(
        "big.hipfb",
        &big,
        PARSE,
        &format!("compressed offload bundle at offset 0x0: declared uncompressed size {} but the payload decompresses to {real} bytes", real + 1),
    );
    let mut huge = ccob.clone();
    huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    check(
        "huge.hipfb",
        &huge,
        PARSE,
        "compressed offload bundle at offset 0x0: declared uncompressed size 1099511627776 exceeds the limit of 4294967296 bytes",
    );
    let mut long = ccob.clone();
    long[8..16].copy_from_slice(&(ccob.len() as u64 + 1).to_le_bytes());
    check(
        "long.hipfb",
        &long,
        PARSE,
        &format!(
            "compressed offload bundle at offset 0x0: total size {} is outside [32, {}] (bytes available)",
            ccob.len() + 1,
            ccob.len()
        ),
    );
}

/// Runs the main job `sqtt-patch FILE -o OUT --functions 1` on `bytes`; returns (exit code,
/// stderr) and checks that no output file was left behind.
fn patch_fails(name: &str, bytes: &[u8], out: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).expect("write input");
    let o = Command::new(BIN)
        .arg(&file)
        .args(["-o", out, "--functions", "1"])
        .current_dir(dir.path())
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{name}: {err}");
    assert!(
        !dir.path().join(out).exists(),
        "{name}: output {out} was written"
    );
    (o.status.code(), err)
}

#[test]
fn main_job_refuses_relocatable_objects_containers_and_stdout() {
    // ET_REL (e_type at offset 0x10 set to 1): a relocatable object, not a code object.
    let mut rel = object();
    rel[0x10] = 1;
    let (code, err) = patch_fails("rel.co", &rel, "out.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("malformed ELF header at offset 0x10: e_type is ET_REL"),
        "{err}"
    );
    // A bundle given to the single-object job points at --fatbin.
    let bundle = fixture("bundles/calls-4arch__ccob-v1-zlib.hipfb");
    let (code, err) = patch_fails("b.hipfb", &bundle, "out.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("pass --fatbin"), "{err}");
    // `-o -` is refused rather than creating a file named "-".
    let (code, err) = patch_fails("k.co", &object(), "-");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("-o -: writing the output to standard output is not supported"),
        "{err}"
    );
}

/// A function or kernel symbol whose `st_shndx` names a section that is not executable
/// (`.strtab`, `.rodata`): a corrupt section index, named as bad input (exit 2, file, symbol and
/// index on stderr) by `info` and the main job alike. It used to end in a verifier rejection
/// (exit 1) for a device function and in an output for a kernel whose code did not move.
#[test]
fn function_symbol_in_a_non_executable_section_is_an_input_error() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let index = |name: &str| {
        co.elf
            .section_by_name(name)
            .map(|s| s.index as u16)
            .expect("section")
    };
    for (sym, section) in [("_Z9tiny_rotljj", ".strtab"), ("k_call_chain", ".rodata")] {
        let at = function_symbol(&b, sym);
        let shndx = index(section);
        let mut d = b.clone();
        d[at + 6..at + 8].copy_from_slice(&shndx.to_le_bytes());
        let message = format!(
            "malformed symbol at offset {:#x}: {sym}: st_shndx {shndx} names {section}, not an executable section",
            at + 6
        );
        check("shndx.co", &d, CO, &message);
        let (code, err) = patch_fails("shndx.co", &d, "out.co");
        assert_eq!(code, Some(2), "{sym}: {err}");
        assert!(
            err.contains("shndx.co") && err.contains(&message),
            "{sym}: {err}"
        );
    }
}

/// A `.dynamic` address entry pointing outside every allocated section (`DT_HASH` with bit 27
/// set, one flipped bit): bad input (exit 2, the entry's offset, tag and address named) for
/// `info` and the main job alike. The rewrite used to move the pointer as if it lay past
/// `.text` and the verifier rejected the result (exit 1; fresh tester, session 12).
#[test]
fn dynamic_pointer_outside_every_section_is_an_input_error() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let dynamic = co.elf.section_by_name(".dynamic").expect(".dynamic");
    let at = (0..dynamic.size as usize / 16)
        .map(|i| dynamic.offset as usize + 16 * i)
        .find(|&o| b[o..o + 8] == 4u64.to_le_bytes())
        .expect("DT_HASH entry");
    let mut d = b.clone();
    d[at + 11] ^= 0x08;
    let value = u64::from_le_bytes(d[at + 8..at + 16].try_into().expect("8 bytes"));
    let message = format!(
        "malformed .dynamic entry at offset {at:#x}: DT_HASH points at {value:#x}, outside every allocated section"
    );
    check("dyn.co", &d, CO, &message);
    let (code, err) = patch_fails("dyn.co", &d, "out.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("dyn.co") && err.contains(&message), "{err}");
}

/// Runs `sqtt-patch [--fatbin] IN -o OUT --functions 1 --shader-clock-bits 8`; exit code 0
/// asserted; returns stderr.
fn patch_with_clock_bits(fatbin: bool, input: &Path, output: &Path) -> String {
    let mut cmd = Command::new(BIN);
    if fatbin {
        cmd.arg("--fatbin");
    }
    let out = cmd
        .arg(input)
        .arg("-o")
        .arg(output)
        .args(["--functions", "1", "--shader-clock-bits", "8"])
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    err
}

/// An option that does not apply to a target is named on stderr, not dropped silently:
/// shader-clock packing (spec "GFX12 Shader Clock Packing") exists on gfx12/gfx1250 only.
#[test]
fn shader_clock_bits_on_older_targets_is_warned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/bundles/calls-4arch__ccob-v2-zlib.hipfb");
    let err = patch_with_clock_bits(true, &bundle, &dir.path().join("out.hipfb"));
    for t in ["gfx90a", "gfx942", "gfx1100"] {
        assert!(
            err.contains(&format!(
                "warning (1 code object(s): bundle 0 hipv4-amdgcn-amd-amdhsa--{t}): shader_clock_bits=8 not used: shader-clock packing exists on gfx12 and gfx1250 only; {t} markers keep the legacy layout"
            )),
            "{t}: {err}"
        );
    }
    assert!(!err.contains("gfx1201 markers keep"), "{err}");
    let obj = dir.path().join("in.co");
    std::fs::write(&obj, object()).expect("write input");
    let err = patch_with_clock_bits(false, &obj, &dir.path().join("out.co"));
    assert!(
        err.contains("warning: shader_clock_bits=8 not used") && err.contains("gfx1100 markers"),
        "{err}"
    );
}

/// Runs the main job on `bytes` and expects the function holding `reason` to stay in place
/// (docs/left-alone.md, "Kept in place"): exit 0, the reason in the report, and an output that
/// `sqtt-patch verify` accepts. Its builders still reach the other functions' originals.
fn patch_keeps_text_in_place(bytes: &[u8], reason: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, out) = (dir.path().join("in.co"), dir.path().join("out.co"));
    std::fs::write(&file, bytes).expect("write input");
    let o = Command::new(BIN)
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(BASIC)
        .arg("--report")
        .output()
        .expect("run sqtt-patch");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("left alone (kept at its address, not instrumented)")
            && text.contains(reason),
        "{text}"
    );
    let v = Command::new(BIN)
        .arg("verify")
        .arg(&file)
        .arg(&out)
        .output()
        .expect("run sqtt-patch verify");
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

/// Runs the main job on `bytes` (with `args`) and expects it to fail closed: exit 0, the output
/// byte-identical to the input, and `reason` on stderr.
fn patch_fails_closed(bytes: &[u8], args: &[&str], reason: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, out) = (dir.path().join("in.co"), dir.path().join("out.co"));
    std::fs::write(&file, bytes).expect("write input");
    let o = Command::new(BIN)
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("left unchanged (failed closed)") && err.contains(reason),
        "{err}"
    );
    assert!(
        std::fs::read(&out).expect("output") == bytes,
        "output differs from the input"
    );
}

/// Options of the fail-closed cases that need no reserved SGPR.
const BASIC: &[&str] = &["--functions", "1", "--barriers", "1"];

/// Byte offset of the `Elf64_Sym` of device function `name` in `.symtab` (from hsaco).
fn function_symbol(bytes: &[u8], name: &str) -> usize {
    let co = hsaco::CodeObject::parse(bytes).expect("parse");
    co.symbols
        .iter()
        .find(|s| s.symbol.name == name && s.symbol.st_type == hsaco::elf::STT_FUNC)
        .map(|s| s.symbol.entry_offset as usize)
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

/// Fields that contradict each other, found by random bit flips (tester, session 3): each is
/// named and never turned into an output or a verifier rejection (exit 1).
#[test]
fn contradictory_fields_are_input_errors_or_fail_closed() {
    let sym = function_symbol(&object(), "_Z9tiny_rotljj");
    // st_shndx past the section header table.
    let mut d = object();
    d[sym + 6..sym + 8].copy_from_slice(&39u16.to_le_bytes());
    let (code, err) = patch_fails("shndx.co", &d, "out.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "malformed symbol at offset {:#x}: _Z9tiny_rotljj: st_shndx 39 is not a section",
            sym + 6
        )),
        "{err}"
    );
    // A function size reaching far past `.text`: the input does not verify against itself.
    let mut d = object();
    d[sym + 16..sym + 24].copy_from_slice(&0x10_0018u64.to_le_bytes());
    let (code, err) = patch_fails("size.co", &d, "out.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("inconsistent code object: it does not verify against itself"),
        "{err}"
    );
    // An empty symbol name: no funcmap row can name the function.
    let mut d = object();
    d[sym..sym + 4].copy_from_slice(&0u32.to_le_bytes());
    patch_fails_closed(&d, BASIC, "has no usable symbol name (\"\")");
    // `s_getpc_b64 s[0:1]; s_add_u32 s0, s1, K`: not an offset from the PC, not relocated.
    let mut d = object();
    let co = hsaco::CodeObject::parse(&d).expect("parse");
    let text = co.text().expect(".text").clone();
    let t = amdgpu_isa::Target::from_name(&co.target.processor).expect("target");
    let insts = amdgpu_isa::decode_all(co.section_data(&text), t).expect("decode");
    let mut off = 0usize;
    let mut add = None;
    for w in insts.windows(2) {
        if w[0].mnemonic() == "s_getpc_b64" && w[1].mnemonic() == "s_add_u32" {
            add = Some(text.offset as usize + off + w[0].len());
            break;
        }
        off += w[0].len();
    }
    let add = add.expect("an s_getpc_b64 address builder");
    d[add] += 1; // ssrc0: s0 -> s1
    patch_keeps_text_in_place(&d, "s_add_u32 uses the PC register pair");
    // A kernel whose metadata lost its required `.sgpr_count` key (`.sgpr_sount`): adding the
    // key back would grow the note and move the sections after it.
    let mut d = object();
    let at = d
        .windows(11)
        .position(|w| w == b".sgpr_count")
        .expect(".sgpr_count in the note");
    d[at + 7] = b's';
    patch_fails_closed(
        &d,
        &["--trace-addresses", "memory,lds", "--scope"],
        "has no .sgpr_count in its metadata (required)",
    );
}

/// `PT_GNU_STACK` maps nothing: a corrupted `p_memsz` (2^48) that makes its address range cover
/// `.text` is copied as it is, not grown with `.text` past the 48-bit address space into a
/// rewrite the verifier rejects (exit 1; fresh tester, session 13).
#[test]
fn gnu_stack_is_copied_whatever_its_sizes_say() {
    let mut b = fixture("objects/gfx942__ocl__O3-preload8.co");
    let u16_at = |b: &[u8], o: usize| usize::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let stack = (0..u16_at(&b, 0x38))
        .map(|i| phoff + 56 * i)
        .find(|&o| b[o..o + 4] == 0x6474_e551u32.to_le_bytes())
        .expect("PT_GNU_STACK");
    b[stack + 40..stack + 48].copy_from_slice(&(1u64 << 48).to_le_bytes());
    let dir = tempfile::tempdir().expect("tempdir");
    let (input, output) = (dir.path().join("gs.co"), dir.path().join("out.co"));
    std::fs::write(&input, &b).expect("write");
    let r = Command::new(BIN)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .args(["--functions", "1", "--trace-addresses", "memory,lds"])
        .output()
        .expect("run");
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let out = std::fs::read(&output).expect("output");
    let phoff_out = u64::from_le_bytes(out[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let at = phoff_out + (stack - phoff);
    assert_eq!(
        out[at..at + 56],
        b[stack..stack + 56],
        "PT_GNU_STACK copied"
    );
    assert!(out.len() > b.len(), "instrumented");
}

/// Issue 32, item 11: a `.text` of type `SHT_NOBITS` (set by llvm-objcopy-22) holds no code:
/// the object is malformed (exit 2, the section and its file offset named), not "nothing to
/// instrument".
#[test]
fn text_without_bytes_in_the_file_is_malformed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, nobits) = (dir.path().join("c.co"), dir.path().join("n.co"));
    std::fs::write(&src, object()).expect("write");
    let st = Command::new("/usr/lib/llvm-22/bin/llvm-objcopy")
        .arg("--set-section-type=.text=8")
        .arg(&src)
        .arg(&nobits)
        .status()
        .expect("llvm-objcopy-22");
    assert!(st.success());
    let (code, err) = patch_fails("n.co", &std::fs::read(&nobits).expect("read"), "o.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("malformed code object: section .text at file offset 0x1900 has type SHT_NOBITS: no code is stored in the file, so its 4 kernel(s) (")
            && err.contains("k_call_chain"),
        "{err}"
    );
}

/// `object()` instrumented with `--functions 1` into `i.co` of a new temporary directory.
fn instrumented() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, instr) = (dir.path().join("c.co"), dir.path().join("i.co"));
    std::fs::write(&src, object()).expect("write");
    let o = Command::new(BIN)
        .arg(&src)
        .arg("-o")
        .arg(&instr)
        .args(["--functions", "1"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, instr)
}

/// Issue 32, item 10: an input whose `.sqtt_funcmap` declares one id twice is bad input (exit
/// 2, naming the section, the row and its offset), not a verifier rejection (exit 1).
#[test]
fn a_corrupt_funcmap_in_the_input_is_bad_input() {
    let (dir, instr) = instrumented();
    let mut b = std::fs::read(&instr).expect("read");
    let at = b
        .windows(5)
        .position(|w| w == b"\nF:2:")
        .expect("a second F: row");
    b[at + 3] = b'1';
    std::fs::write(&instr, &b).expect("write");
    let o = Command::new(BIN)
        .arg(&instr)
        .args(["-o", "o.co", "--functions", "1", "--force"])
        .current_dir(dir.path())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("malformed code object: section .sqtt_funcmap: row ")
            && err.contains(": id 1 is declared again (first in row "),
        "{err}"
    );
    assert!(!dir.path().join("o.co").exists());
}

/// Issue 32, item 17: our run record is recognised by its content too, so renaming
/// `.sqtt_patch` (llvm-objcopy-22 --rename-section) does not let an instrumented object be
/// instrumented again without `--force`.
#[test]
fn a_renamed_run_record_still_marks_our_output() {
    let (dir, instr) = instrumented();
    let renamed = dir.path().join("r.co");
    let st = Command::new("/usr/lib/llvm-22/bin/llvm-objcopy")
        .arg("--rename-section=.sqtt_patch=.comment_x")
        .arg(&instr)
        .arg(&renamed)
        .status()
        .expect("llvm-objcopy-22");
    assert!(st.success());
    let (code, err) = patch_fails("r.co", &std::fs::read(&renamed).expect("read"), "o.co");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("already instrumented by sqtt-patch (section .comment_x); pass --force"),
        "{err}"
    );
}

/// Session-17 fresh tester: `dis` and `funcmap` on a corrupt bundle said only that it "cannot be
/// read"; they name the cause now, as `info` does.
#[test]
fn dis_and_funcmap_name_why_a_bundle_cannot_be_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("short.hipfb");
    std::fs::write(&file, &fixture("bundles/calls-4arch__plain.hipfb")[..30]).expect("write");
    for cmd in ["dis", "funcmap"] {
        let out = Command::new(BIN).arg(cmd).arg(&file).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("an offload bundle that cannot be read (")
                && err.contains("bundle entry count needs 8 bytes at offset 0x18"),
            "{cmd}: {err}"
        );
    }
}

/// A section name table (`e_shstrndx`) that is not `SHT_STRTAB`: an input error (exit 2,
/// naming the header field's offset), found when the file is read. It used to be read as names,
/// extended with the new sections' names, and the output then failed our verifier (exit 1).
#[test]
fn a_section_name_table_of_another_type_is_malformed() {
    let mut bytes = object();
    let at = |o: usize, n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(&bytes[o..o + n]);
        u64::from_le_bytes(v) as usize
    };
    let (shoff, shentsize, shstrndx) = (at(0x28, 8), at(0x3a, 2), at(0x3e, 2));
    let type_at = shoff + shstrndx * shentsize + 4;
    assert_eq!(at(type_at, 4), 3, "the fixture's name table is SHT_STRTAB");
    bytes[type_at] = 1; // SHT_PROGBITS
    for args in [&["info"][..], &["--functions", "1"][..]] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, out) = (dir.path().join("n.co"), dir.path().join("o.co"));
        std::fs::write(&file, &bytes).expect("write");
        let o = Command::new(BIN)
            .args(args)
            .arg(&file)
            .args(if args[0] == "info" {
                vec![]
            } else {
                vec!["-o".as_ref(), out.as_os_str()]
            })
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "malformed section header table at offset {type_at:#x}: e_shstrndx names section [{shstrndx}], of type 0x1, not SHT_STRTAB (3)"
            )),
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "no output after an input error");
    }
}

/// A damaged `sh_name` (pointing past the section name table) or a `.shstrtab` `sh_size` cut
/// short (its last name then has no NUL): bad input at load time (exit 2, the file and the
/// section header's offset named) for `info` and the main job. The first used to be read as an
/// empty name (exit 0), the second as a cut name, and our verifier then rejected the rewrite
/// (exit 1; session-20 fresh tester).
#[test]
fn a_section_name_outside_the_name_table_is_malformed() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let h = &co.elf.header;
    let header = |i: usize| h.e_shoff as usize + 64 * i;
    let names = co.elf.sections[usize::from(h.e_shstrndx)].clone();
    let last = co
        .elf
        .sections
        .iter()
        .max_by_key(|s| s.sh_name)
        .expect("sections")
        .clone();
    let comment = co.section(".comment").expect(".comment").clone();
    let mut oob = b.clone();
    oob[header(comment.index)..header(comment.index) + 4].copy_from_slice(&0xffffu32.to_le_bytes());
    let mut short = b.clone();
    let size_at = header(names.index) + 32;
    short[size_at..size_at + 8].copy_from_slice(&(names.size - 2).to_le_bytes());
    let table = |len: u64| {
        format!(
            "the section name table [{}] ({len:#x} bytes at file offset {:#x}; its sh_size is at offset {size_at:#x})",
            names.index, names.offset
        )
    };
    let cases = [
        (
            "oob.co",
            oob,
            format!(
                "malformed section header at offset {:#x}: sh_name 0xffff of section [{}] is outside {}",
                header(comment.index),
                comment.index,
                table(names.size)
            ),
        ),
        (
            "short.co",
            short,
            format!(
                "malformed section header at offset {:#x}: sh_name {:#x} of section [{}] names a string without a NUL before the end of {}",
                header(last.index),
                last.sh_name,
                last.index,
                table(names.size - 2)
            ),
        ),
    ];
    for (name, bytes, message) in cases {
        check(name, &bytes, PARSE, &message);
        let (code, err) = patch_fails(name, &bytes, "out.co");
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains(&message),
            "{name}: {err}"
        );
    }
}

/// `dis` printed what it could of objects every other command refuses (session-21 fresh
/// tester: a damaged `sh_name`, a descriptor) and exited 0. It loads the object as the other
/// commands do now: exit 2 with the loader's message naming the offset; a good object still
/// prints.
#[test]
fn dis_refuses_an_object_the_loader_refuses() {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let h = &co.elf.header;
    let comment = co.section(".comment").expect(".comment").index;
    let mut oob = b.clone();
    let at = h.e_shoff as usize + 64 * comment;
    oob[at..at + 4].copy_from_slice(&0xffffu32.to_le_bytes());
    let mut kd = b.clone();
    let o = co.kernels[0].kd_offset as usize + 0x10;
    kd[o..o + 8].copy_from_slice(&0x4000_0000i64.to_le_bytes());
    let dir = tempfile::tempdir().expect("tempdir");
    let dis = |file: &Path| {
        Command::new(BIN)
            .arg("dis")
            .arg(file)
            .output()
            .expect("run sqtt-patch")
    };
    for (name, bytes) in [("oob.co", oob), ("kd.co", kd)] {
        let why = hsaco::CodeObject::parse(&bytes)
            .expect_err("refused by the loader")
            .to_string();
        let file = dir.path().join(name);
        std::fs::write(&file, &bytes).expect("write input");
        let out = dis(&file);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}: printed");
        assert_eq!(
            err.trim_end(),
            format!("sqtt-patch: error: {}: cannot parse: {why}", file.display())
        );
    }
    let file = dir.path().join("good.co");
    std::fs::write(&file, &b).expect("write input");
    let out = dis(&file);
    assert_eq!(out.status.code(), Some(0));
    assert!(!out.stdout.is_empty());
}

/// Bytes after a CCOB's compressed stream (session-22 fresh tester): a v1 bundle extends to
/// the end of its region, so 100 bytes appended to the file are part of it, and `--fatbin`
/// dropped them from the rebuilt bundle without a word. After a zlib stream (which
/// clang-offload-bundler-22 reads past them) they are kept after the new stream now; in a v3
/// bundle whose total size covers them, the new total size covers them too. The outputs list
/// the same entries under clang-offload-bundler-22 and under hsaco. After a zstd frame
/// (clang-offload-bundler-22 refuses the input: "Src size is incorrect") they are left out
/// with a warning naming their file offset and count.
#[test]
fn ccob_bytes_after_the_compressed_stream_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tail = [0xabu8; 100];
    for (name, v3) in [
        ("ccob-v1-zlib", false),
        ("ccob-v3-zlib", true),
        ("ccob-v3-zstd", true),
    ] {
        let mut b = fixture(&format!("bundles/calls-4arch__{name}.hipfb"));
        if v3 {
            let total = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
            b[8..16].copy_from_slice(&(total + tail.len() as u64).to_le_bytes());
        }
        b.extend_from_slice(&tail);
        let input = dir.path().join(format!("{name}.hipfb"));
        let output = dir.path().join(format!("{name}.out.hipfb"));
        std::fs::write(&input, &b).expect("write input");
        let (code, out, err) = support::fatbin_functions(&input, &output);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert!(out.contains("instrumented"), "{name}: {out}");
        let written = std::fs::read(&output).expect("output");
        if name.ends_with("zstd") {
            assert!(
                err.contains(&format!(
                    "warning: bundle 0 at file offset 0x0: the 100 byte(s) after its compressed stream (file offset {:#x}) are not in the output",
                    b.len() - tail.len()
                )),
                "{err}"
            );
            assert!(!written.ends_with(&tail));
            continue;
        }
        assert!(err.is_empty(), "{name}: {err}");
        assert_ne!(written.len(), b.len(), "{name}: the bundle was rebuilt");
        assert!(written.ends_with(&tail), "{name}: trailing bytes dropped");
        if v3 {
            let total = u64::from_le_bytes(written[8..16].try_into().expect("8 bytes"));
            assert_eq!(total, written.len() as u64, "{name}: total size");
        }
        let ids = |f: &[u8]| -> Vec<String> {
            hsaco::bundle::parse_all(f, 0, hsaco::bundle::DEFAULT_DECOMPRESS_LIMIT)
                .expect("parses")
                .into_iter()
                .flat_map(|b| b.entries.into_iter().map(|e| e.id))
                .collect()
        };
        assert_eq!(ids(&written), ids(&b), "{name}");
        if let Ok(l) = Command::new("clang-offload-bundler-22")
            .args(["-list", "-type=o"])
            .arg(format!("-input={}", output.display()))
            .output()
        {
            let listed = String::from_utf8_lossy(&l.stdout);
            assert_eq!(listed.lines().count(), 5, "{name}: {listed}");
        }
    }
}

/// A CCOB v2 whose total size is one byte short (session-22 fresh tester): `info` said the
/// decompression failed, `--fatbin` that non-zero bytes follow the bundle. Both locate the
/// bundles by their size fields first now and give the same message, naming the bundle whose
/// size is cut short.
#[test]
fn a_ccob_total_size_one_byte_short_is_worded_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = fixture("bundles/calls-4arch__ccob-v2-zlib.hipfb");
    let total = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    b[8..12].copy_from_slice(&(total - 1).to_le_bytes());
    let input = dir.path().join("short.hipfb");
    std::fs::write(&input, &b).expect("write input");
    let message = format!(
        "malformed offload bundle region at offset {:#x}: non-zero bytes where a bundle or zero padding was expected (right after bundle 0 at offset 0x0, whose size fields give {} bytes: cut short?)",
        total - 1,
        total - 1
    );
    let (code, _, err) = support::run(&["info".as_ref(), input.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    let file = input.display();
    assert_eq!(
        err.trim_end(),
        format!("sqtt-patch: error: {file}: {PARSE}: {message}")
    );
    let output = dir.path().join("out.hipfb");
    let (code, _, err) = support::fatbin_functions(&input, &output);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!("sqtt-patch: error: {file}: {message}")
    );
    assert!(!output.exists());
}
