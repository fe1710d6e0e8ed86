//! The tool as a user meets it (issue 17): every misuse gets one clear answer, and nothing
//! outside the output is touched. Each case pins the exit code, the first line of the message,
//! and the files left in the working directory afterwards (never a `.tmp*` leftover).
//!
//! Inputs are the bundled fixtures (clang/LLVM 22, `fixtures/README.md`), this test's own executable (an x86-64
//! ELF without device code), and fixtures with one padding word changed (offsets from
//! llvm-readelf-22 on the unmodified object, checked below).

#[path = "support/cli.rs"]
mod cli;
mod support;
use cli::*;
use std::path::Path;

/// One rule for every command: with `--strict`, an input whose code object failed closed (or
/// skipped a site) exits 3 and its output is not written; reports still are.
#[test]
fn strict_writes_no_output_for_lost_coverage_in_every_command() {
    let t = tempfile::tempdir().expect("tempdir");
    // A device function that does not decode: kept in place, its sites skipped.
    std::fs::copy(
        fixture("left-alone/gfx942__stubs__bad-word.co"),
        t.path().join("bad.co"),
    )
    .expect("copy");
    let flags = ["--functions", "1", "--strict"];
    let main = run(
        t.path(),
        &[
            &["bad.co", "-o", "o.co", "--report-json", "r.json"][..],
            &flags[..],
        ]
        .concat(),
    );
    assert_eq!(main.code, 3, "{}", main.stderr);
    assert!(
        main.stderr
            .contains("stub_bad at 0x2300 is kept at its address"),
        "{}",
        main.stderr
    );
    assert_eq!(
        main.stderr.lines().last(),
        Some("sqtt-patch: bad.co: --strict and the object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    assert_eq!(main.files, files(&["bad.co", "r.json"]));
    std::fs::remove_file(t.path().join("r.json")).expect("rm");
    let fat = run(
        t.path(),
        &[&["--fatbin", "bad.co", "-o", "o.co"][..], &flags[..]].concat(),
    );
    assert_eq!(fat.code, 3, "{}", fat.stderr);
    assert_eq!(
        fat.stderr.lines().last(),
        Some("sqtt-patch: bad.co: --strict and some code object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    assert_eq!(fat.files, files(&["bad.co"]));
    std::fs::copy(fixture(BARRIERS), t.path().join("good.co")).expect("copy");
    let batch = run(
        t.path(),
        &[&["batch", "bad.co", "good.co", "-o", "out"][..], &flags[..]].concat(),
    );
    assert_eq!(batch.code, 3, "{}", batch.stderr);
    assert_eq!(
        batch.first_line(),
        "sqtt-patch batch: --strict: 1 input(s) failed closed, could not be read, skipped a site or have unreadable DWARF; their outputs were not written"
    );
    assert!(batch.stdout.contains("bad.co [code_object]"));
    assert!(batch.stdout.contains("(not written: --strict)"));
    assert_eq!(
        batch.files,
        files(&["bad.co", "good.co", "out/", "out/good.co"])
    );
    // `batch --check` writes nothing, and --strict exits 3 all the same (fresh tester, session
    // 10: exited 0).
    std::fs::remove_dir_all(t.path().join("out")).expect("rm out");
    let check = run(
        t.path(),
        &[&["batch", "bad.co", "good.co", "--check"][..], &flags[..]].concat(),
    );
    assert_eq!(check.code, 3, "{}", check.stderr);
    assert_eq!(
        check.first_line(),
        "sqtt-patch batch: --strict: 1 input(s) failed closed, could not be read, skipped a site or have unreadable DWARF; exit 3"
    );
    assert_eq!(check.files, files(&["bad.co", "good.co"]));
    let unstrict = run(
        t.path(),
        &["batch", "bad.co", "good.co", "--check", "--functions", "1"],
    );
    assert_eq!(unstrict.code, 0, "{}", unstrict.stderr);
    // Without --strict the main job writes its output (the rest instrumented) and exits 0.
    let r = run(t.path(), &["bad.co", "-o", "o.co", "--functions", "1"]);
    assert_eq!(r.code, 0);
    let v = run(t.path(), &["verify", "bad.co", "o.co"]);
    assert_eq!(v.code, 0, "{}", v.stderr);
}

/// A DWARF 5 contribution that a unit indexes into (`DW_AT_addr_base`, `DW_AT_str_offsets_base`)
/// whose header was overwritten: gimli reads indexed addresses and names without looking at the
/// header, so this used to drop or rename the inlined functions silently (fresh tester, session
/// 10). Now it is unreadable DWARF: a warning naming the header, and lost coverage for
/// `--strict`. `gfx942__inlined__O3-g.co`: `.debug_str_offsets` at file offset 0x238f (0xac
/// bytes) zeroed, `.debug_addr` at 0x2585 (0x38 bytes) filled with 0x5a (llvm-readelf-22 -S).
#[test]
fn overwritten_dwarf_contribution_headers_are_unreadable_dwarf() {
    let t = tempfile::tempdir().expect("tempdir");
    let orig = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    assert_eq!(
        &orig[0x238f + 4..0x238f + 6],
        &[5, 0],
        ".debug_str_offsets header"
    );
    assert_eq!(
        &orig[0x2585 + 4..0x2585 + 8],
        &[5, 0, 8, 0],
        ".debug_addr header"
    );
    // Session-14 tester: a corrupt `.debug_line` (at 0x2658) was reported at `.debug_info+0x0`.
    assert_eq!(&orig[0x2658 + 4..0x2658 + 6], &[5, 0], ".debug_line header");
    let cases: [(&str, usize, usize, u8, &str); 3] = [
        (
            "line.co",
            0x2658 + 4,
            2,
            0x63,
            ".debug_line+0x0: unknown DWARF version: 25443",
        ),
        (
            "stroff.co",
            0x238f,
            0xac,
            0,
            ".debug_str_offsets+0x0: header version 0, not 5 (contribution of the unit at .debug_info+0x0)",
        ),
        (
            "addr.co",
            0x2585,
            0x38,
            0x5a,
            ".debug_addr+0x0: header version 23130, not 5 (contribution of the unit at .debug_info+0x0)",
        ),
    ];
    for (name, off, len, fill, error) in cases {
        let mut b = orig.clone();
        b[off..off + len].fill(fill);
        std::fs::write(t.path().join(name), b).expect("write");
        unreadable_dwarf(t.path(), name, error);
    }
}

/// Runs `--functions 1` on `name` in `dir`, whose DWARF cannot be read because of `error`:
/// exit 0 with the warning first on stderr and `error` in the JSON report; with `--strict`
/// exit 3 and nothing written. Returns the `--strict` run.
fn unreadable_dwarf(dir: &Path, name: &str, error: &str) -> Run {
    let r = run(
        dir,
        &[
            name,
            "-o",
            "o.co",
            "--functions",
            "1",
            "--report-json",
            "r.json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.first_line(),
        format!("sqtt-patch: {name}: warning: the DWARF cannot be read ({error}): inlined functions are not marked and funcmap rows carry no source locations")
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).expect("r.json")).expect("json");
    assert_eq!(json["inlined"]["dwarf_error"], error);
    let strict = run(dir, &[name, "-o", "s.co", "--functions", "1", "--strict"]);
    assert_eq!(strict.code, 3, "{}", strict.stderr);
    assert_eq!(
        strict.first_line(),
        format!("sqtt-patch: {name}: warning: the DWARF cannot be read ({error}): inlined functions are not marked and funcmap rows carry no source locations")
    );
    assert!(!dir.join("s.co").exists());
    strict
}

/// DWARF that cannot be read is said on stderr and is lost coverage for `--strict` (the
/// inlined functions stay unmarked): `gfx942__inlined__O3-g.co` with the version of its first
/// `.debug_info` unit (file offset 0x1f91 + 4, llvm-readelf-22 -S) changed from 5 to 13.
#[test]
fn unreadable_dwarf_is_a_warning_and_lost_coverage_for_strict() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut b = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    assert_eq!(&b[0x1f95..0x1f97], &[5, 0], "DWARF 5 unit header");
    b[0x1f95] = 13;
    std::fs::write(t.path().join("dw.co"), b).expect("write");
    let strict = unreadable_dwarf(
        t.path(),
        "dw.co",
        ".debug_info+0x0: unknown DWARF version: 13",
    );
    assert_eq!(
        strict.stderr.lines().last(),
        Some("sqtt-patch: dw.co: --strict and the object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    // The same object with readable DWARF: no warning, and --strict writes it.
    std::fs::copy(
        fixture("objects/gfx942__inlined__O3-g.co"),
        t.path().join("ok.co"),
    )
    .expect("copy");
    let ok = run(
        t.path(),
        &["ok.co", "-o", "k.co", "--functions", "1", "--strict"],
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(!ok.stderr.contains("warning"), "{}", ok.stderr);
}

/// Readable DWARF whose inlined instances all lie outside the instrumented functions gets a
/// reason in the report instead of a silent "0 found": `gfx942__inlined__O3-g.co` with every
/// `.debug_addr` entry (file offset 0x2585, 0x38 bytes: an 8-byte header, then 8-byte addresses;
/// llvm-readelf-22 -S) moved 256 MiB up.
#[test]
fn inlined_instances_outside_every_function_are_reported_with_a_reason() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut b = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    for at in (0x2585 + 8..0x2585 + 0x38).step_by(8) {
        let v = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        assert!(v < 0x10000, "a .text address: {v:#x}");
        b[at..at + 8].copy_from_slice(&(v + 0x1000_0000).to_le_bytes());
    }
    std::fs::write(t.path().join("far.co"), b).expect("write");
    let r = run(
        t.path(),
        &["far.co", "-o", "o.co", "--functions", "1", "--report"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("inlined functions not marked: none of the 19 inlined instances in the DWARF starts inside an instrumented function"),
        "{}",
        r.stdout
    );
}

// ------------------------------------------------------------------ items 5-7: consistency

#[test]
fn batch_counts_an_unreadable_object_as_an_input_error() {
    let t = workdir(&[(BARRIERS, "a.co"), (CALLS, "c.co")]);
    let b = std::fs::read(fixture(CALLS)).expect("fixture");
    std::fs::write(t.path().join("b.co"), &b[..b.len() / 2]).expect("truncate");
    let r = run(
        t.path(),
        &[
            "batch",
            "a.co",
            "b.co",
            "c.co",
            "--check",
            "--functions",
            "1",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("total: 3 files (1 with input errors) in ")),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("  code objects: error=1 instrumented=2\n"));
    assert!(r.stdout.contains("  input error 1x b.co: "), "{}", r.stdout);
    assert!(
        r.first_line()
            .starts_with("sqtt-patch batch: input error: b.co: section header table at offset"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("failed closed"), "{}", r.stdout);
    assert_eq!(r.files, files(&["a.co", "b.co", "c.co"]));
}

#[test]
fn verify_accepts_an_unchanged_copy_and_names_swapped_arguments() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "new.co",
            "--functions",
            "1",
            "--barriers",
            "1",
        ],
    );
    assert_eq!(r.code, 0);
    let same = run(t.path(), &["verify", "in.co", "in.co"]);
    assert_eq!(same.code, 0);
    assert_eq!(
        same.stdout,
        "OK: the rewritten file is byte-identical to the original (an empty rewrite: nothing was inserted)\n"
    );
    let ok = run(t.path(), &["verify", "in.co", "new.co"]);
    assert_eq!(ok.code, 0);
    assert_eq!(ok.stdout.lines().last(), Some("OK"));
    let swapped = run(t.path(), &["verify", "new.co", "in.co"]);
    assert_eq!(swapped.code, 2);
    assert_eq!(
        swapped.first_line(),
        "sqtt-patch: error: new.co has a .sqtt_patch section and in.co has none: the arguments look swapped (usage: sqtt-patch verify ORIGINAL REWRITTEN)"
    );
    let missing = run(t.path(), &["verify", "nope.co", "new.co"]);
    assert_eq!(missing.code, 2);
    assert_eq!(
        missing.first_line(),
        "sqtt-patch: error: nope.co: cannot read the original: No such file or directory (os error 2)"
    );
    // Two copies of an unreadable object are an input error naming it, not an empty rewrite
    // (fresh tester, session 12; kept on purpose, README "Limitations").
    let b = std::fs::read(fixture(BARRIERS)).expect("fixture");
    std::fs::write(t.path().join("half.co"), &b[..b.len() / 2]).expect("truncate");
    std::fs::write(t.path().join("half2.co"), &b[..b.len() / 2]).expect("truncate");
    let damaged = run(t.path(), &["verify", "half.co", "half2.co"]);
    assert_eq!(damaged.code, 2);
    assert!(
        damaged.first_line().starts_with(
            "sqtt-patch: error: half.co: the original is not a readable code object: "
        ),
        "{}",
        damaged.stderr
    );
    let host = host_elf();
    let ls = run(t.path(), &["verify", host.as_str(), "new.co"]);
    assert_eq!(ls.code, 2);
    assert!(ls.first_line().starts_with(&format!(
        "sqtt-patch: error: the original: {host}: not a code object: an x86-64 ELF file"
    )));
    assert_eq!(ls.files, files(&["half.co", "half2.co", "in.co", "new.co"]));
}

/// Damaged padding after a function keeps `.text` in place whether or not the word decodes
/// (docs/left-alone.md, "Kept in place"): the word stays where it was, every function is
/// instrumented in the new segment, a warning names the word with its address, and the output
/// verifies. (Before: the object failed closed with that reason.)
#[test]
fn damaged_padding_keeps_text_in_place_whatever_the_word() {
    let t = tempfile::tempdir().expect("tempdir");
    for (name, word, what) in [
        ("undecodable.co", 0xFFFF_FFFFu32, "undecodable word in the gap after _Z9chain_topPKffij at 0x2b70: no encoding format matches word 0xffffffff"),
        ("mov.co", 0xBE80_0080, "damaged padding in the gap after _Z9chain_topPKffij at 0x2b70: s_mov_b32 (padding is s_nop or s_code_end)"),
        ("endpgm.co", 0xBFB0_0000, "damaged padding in the gap after _Z9chain_topPKffij at 0x2b70: s_endpgm (padding is s_nop or s_code_end)"),
    ] {
        damaged_padding(t.path(), name, word);
        let out = format!("{name}.out");
        let r = run(t.path(), &[name, "-o", &out, "--functions", "1"]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert_eq!(
            r.first_line(),
            format!("sqtt-patch: {name}: warning: {what}: kept in place with .text")
        );
        let (a, b) = (
            std::fs::read(t.path().join(name)).expect("in"),
            std::fs::read(t.path().join(&out)).expect("out"),
        );
        assert_ne!(a, b, "{name}: not instrumented");
        // `.text` is the input's, the word still at 0x2b70.
        let text = |bytes: &[u8]| {
            let co = hsaco::CodeObject::parse(bytes).expect("code object");
            let t = co.text().expect(".text").clone();
            (t.addr, co.section_data(&t).to_vec())
        };
        let (addr, kept) = text(&b);
        assert_eq!((addr, kept.clone()), text(&a), "{name}");
        let at = (0x2b70 - addr) as usize;
        assert_eq!(&kept[at..at + 4], &word.to_le_bytes(), "{name}");
        let v = run(t.path(), &["verify", name, &out]);
        assert_eq!(v.code, 0, "{name}: {}", v.stderr);
    }
}

// ------------------------------------------------------------------ item 8: flags

#[test]
fn flags_that_cannot_take_effect_are_refused_or_warned() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let cases: [(&[&str], i32, &str); 11] = [
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--offload-arch", "gfx1100"],
            2,
            "sqtt-patch: error: --offload-arch selects code objects inside a bundle or host binary: it needs --fatbin (or batch)",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "yes"],
            2,
            "sqtt-patch: error: invalid value 'yes' for '--barriers <0|1>'",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "true"],
            2,
            "sqtt-patch: error: invalid value 'true' for '--barriers <0|1>'",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--shader-clock-shift", "3"],
            2,
            "sqtt-patch: error: --shader-clock-shift needs --shader-clock-bits N with N from 1 to 29 (or $SQTT_SHADER_CLOCK_BITS): with 0 clock bits no clock is packed",
        ),
        // Session-28 tester: the value was not named.
        (
            &["batch", "in.co", "--check", "--barriers", "1", "--max-overhead-growth", "nan"],
            2,
            "sqtt-patch: error: invalid --max-overhead-growth NaN: must be a percentage >= 0",
        ),
        // Session-14 tester: a blank value answered "nothing requested".
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--trace-addresses", ""],
            2,
            "sqtt-patch: error: invalid --trace-addresses \"\": expected memory, lds or memory,lds (leave the flag out, or give off, to turn it off)",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--memory", " "],
            2,
            "sqtt-patch: error: invalid --memory \" \": expected N:M (leave the flag out, or give off, to turn it off)",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--mem-barrier", ""],
            2,
            "sqtt-patch: error: invalid --mem-barrier \"\": expected none, asm or fence (leave the flag out, or give off, to turn it off)",
        ),
        // Session-27 tester: the bits' error printed the default shift beside them.
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--shader-clock-bits", "99"],
            2,
            "sqtt-patch: error: invalid --shader-clock-bits \"99\": at most 29 clock bits fit in a marker beside its two flag bits and one marker ID bit",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--shader-clock-bits", "8", "--shader-clock-shift", "30"],
            2,
            "sqtt-patch: error: invalid --shader-clock-shift \"30\": with 8 clock bits the shift is at most 24 (bits + shift <= 32: the clock window [shift, shift + bits) lies in the 32-bit HW_REG_SHADER_CYCLES_LO)",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--scope-cu", "0"],
            0,
            "sqtt-patch: warning: scope mask cu is 0: no wave can match it, so every marker is skipped at run time",
        ),
    ];
    for (args, code, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert_eq!(r.first_line(), first, "{args:?}");
        let left = if code == 0 {
            files(&["in.co", "o.co"])
        } else {
            files(&["in.co"])
        };
        assert_eq!(r.files, left, "{args:?}");
        let _ = std::fs::remove_file(t.path().join("o.co"));
    }
    // --memory N:0 is accepted and documented: only back-to-back operations share a marker.
    let help = run(t.path(), &["--help"]);
    assert!(help
        .stdout
        .contains("M=0: only back-to-back operations share a marker"));
    let r = run(t.path(), &["in.co", "-o", "o.co", "--memory", "2:0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

// ------------------------------------------------------------------ items 9-11: messages

#[test]
fn the_wrong_kind_of_file_is_named() {
    let t = workdir(&[(BUNDLE, "b.hipfb")]);
    std::fs::write(t.path().join("stub"), b"\x7fELF").expect("stub");
    std::fs::write(t.path().join("text.txt"), "hello, world\n".repeat(4)).expect("txt");
    // An ELF32 header (i386 executable, 52 bytes): named as ELF32 by every command (the main
    // job read it as an ELF64 header and named its e_machine; session-26 tester).
    let mut elf32 = b"\x7fELF\x01\x01\x01".to_vec();
    elf32.resize(16, 0);
    for half in [2u16, 3] {
        elf32.extend(half.to_le_bytes()); // e_type ET_EXEC, e_machine EM_386
    }
    elf32.resize(52, 0);
    std::fs::write(t.path().join("elf32"), &elf32).expect("elf32");
    // A code object with EI_CLASS 1: `--fatbin` called it "a corrupt or truncated ELF file".
    let mut amd32 = std::fs::read(fixture(BARRIERS)).expect("fixture");
    amd32[4] = 1;
    std::fs::write(t.path().join("amd32"), &amd32).expect("amd32");
    const ELF32: &str = "ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64";
    let elf32_cases = [
        (vec!["elf32", "-o", "o", "--functions", "1"], format!("sqtt-patch: error: elf32: not a code object: {ELF32}")),
        (vec!["info", "elf32"], format!("sqtt-patch: error: elf32: cannot parse: {ELF32}")),
        (vec!["--fatbin", "elf32", "-o", "o", "--functions", "1"], format!("sqtt-patch: error: elf32: {ELF32}; --fatbin reads offload bundles, kpack archives, x86-64 host binaries and AMDGPU code objects")),
        (vec!["batch", "elf32", "-o", "o", "--functions", "1"], format!("sqtt-patch batch: input error: elf32: {ELF32}")),
        (vec!["--fatbin", "amd32", "-o", "o", "--functions", "1"], format!("sqtt-patch: error: amd32: {ELF32}; --fatbin reads offload bundles, kpack archives, x86-64 host binaries and AMDGPU code objects")),
        // Session-28 tester: `batch` took an AMDGPU ELF32 file for a code object.
        (vec!["batch", "amd32", "-o", "o", "--functions", "1"], format!("sqtt-patch batch: input error: amd32: {ELF32}")),
    ];
    for (args, first) in elf32_cases {
        let r = run(t.path(), &args);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.first_line(), first, "{args:?}");
    }
    std::fs::remove_file(t.path().join("elf32")).expect("rm elf32");
    std::fs::remove_file(t.path().join("amd32")).expect("rm amd32");
    let cases: [(&[&str], &str); 11] = [
        (&["stub", "-o", "o", "--functions", "1"], "sqtt-patch: error: stub: not a code object: a truncated ELF file (4 bytes; an ELF64 header has 64)"),
        // `info` and `extract` word an unknown format as the main job does (session-25 tester).
        (&["info", "text.txt"], "sqtt-patch: error: text.txt: cannot parse: neither an ELF file nor an offload bundle (52 bytes, no ELF or bundle magic)"),
        (&["extract", "text.txt", "-o", "o"], "sqtt-patch: error: text.txt: cannot parse: neither an ELF file nor an offload bundle (52 bytes, no ELF or bundle magic)"),
        (&["--fatbin", "stub", "-o", "o", "--functions", "1"], "sqtt-patch: error: stub: a truncated ELF file (4 bytes; an ELF64 header has 64); --fatbin reads offload bundles, kpack archives, x86-64 host binaries and AMDGPU code objects"),
        (&["text.txt", "-o", "o", "--functions", "1"], "sqtt-patch: error: text.txt: not a code object: neither an ELF file nor an offload bundle (52 bytes, no ELF or bundle magic)"),
        (&["HOST_ELF", "-o", "o", "--functions", "1"], "sqtt-patch: error: HOST_ELF: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
        (&["b.hipfb", "-o", "o", "--functions", "1"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); pass --fatbin to instrument every code object inside it"),
        (&["dis", "b.hipfb"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); extract its code objects with `sqtt-patch extract FILE -o DIR`"),
        (&["funcmap", "b.hipfb"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); extract its code objects with `sqtt-patch extract FILE -o DIR`"),
        (&["dis", "HOST_ELF"], "sqtt-patch: error: HOST_ELF: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
        (&["funcmap", "HOST_ELF"], "sqtt-patch: error: HOST_ELF: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
    ];
    for (args, first) in cases {
        let r = run(t.path(), &with_host_elf(args));
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(
            r.first_line(),
            first.replace("HOST_ELF", &host_elf()),
            "{args:?}"
        );
        assert_eq!(r.files, files(&["b.hipfb", "stub", "text.txt"]), "{args:?}");
    }
    let r = run(
        t.path(),
        &[
            "--fatbin",
            host_elf().as_str(),
            "-o",
            "o",
            "--functions",
            "1",
        ],
    );
    assert_eq!(r.code, 2);
    // Not "malformed": a well-formed x86-64 ELF without `.hip_fatbin` (session-27 tester).
    assert!(r.first_line().starts_with(&format!(
        "sqtt-patch: error: {}: not a HIP host binary: no .hip_fatbin section in the section header table at offset 0x",
        host_elf()
    )));
    // A host ELF cut after its program headers: named as corrupt or truncated, not as
    // "not a bundle or ELF" (fresh-tester finding).
    let ls = std::fs::read(host_elf()).expect("this test's executable");
    std::fs::write(t.path().join("cut"), &ls[..3000]).expect("cut");
    let r = run(
        t.path(),
        &["--fatbin", "cut", "-o", "o", "--functions", "1"],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.first_line()
            .starts_with("sqtt-patch: error: cut: a corrupt or truncated ELF file: section header table at offset 0x"),
        "{}",
        r.first_line()
    );
    assert!(!t.path().join("o").exists());
}

// ------------------------------------------------------------------ items 12-13: reports

#[test]
fn human_reports_name_each_kernel_once_in_user_words() {
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "b.hipfb")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "o.co",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--report",
        ],
    );
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout.lines().next().unwrap_or_default(),
        "in.co: target gfx1100: instrumented; .text 2176 -> 2176 bytes; 5 funcmap rows"
    );
    for k in ["k_bar_reduce", "k_bar_branches", "k_bar_in_call"] {
        let n = r
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("  kernel {k}:")))
            .count();
        assert_eq!(n, 1, "{k}: {}", r.stdout);
    }
    assert!(r.stdout.contains(
        "  kernel k_bar_reduce: barrier=11 (+11 instructions, +44 bytes); wave32 vgprs 8 occupancy 16->16 waves/SIMD, +11 instructions reachable\n"
    ));
    assert!(r.stdout.contains(
        "  function _Z14stage_exchangePfjfj: barrier=2 function_entry=1 function_exit=1 (+4 instructions, +16 bytes, id 2)\n"
    ));
    // --fatbin --report: one block per bundle entry, named.
    let f = run(
        t.path(),
        &[
            "--fatbin",
            "b.hipfb",
            "-o",
            "o.hipfb",
            "--functions",
            "1",
            "--report",
        ],
    );
    assert_eq!(f.code, 0, "{}", f.stderr);
    // The report blocks, then the one-line summary of each code object (also on stdout).
    let heads: Vec<&str> = f
        .stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(": target gfx"))
        .collect();
    assert_eq!(heads.len(), 4, "{}", f.stdout);
    for h in heads {
        assert!(
            h.starts_with("b.hipfb: bundle 0 hipv4-amdgcn-amd-amdhsa--gfx"),
            "{h}"
        );
    }
    // info numbers the code objects of a bundle 1..n.
    let i = run(t.path(), &["info", "b.hipfb"]);
    assert_eq!(i.code, 0);
    let numbers: Vec<&str> = i
        .stdout
        .lines()
        .filter(|l| l.starts_with("code object "))
        .map(|l| l.split(' ').nth(2).unwrap_or_default())
        .collect();
    assert_eq!(numbers, ["1", "2", "3", "4"]);
    // batch: summary on stdout, no SGPR column on gfx10+, progress hidden off a terminal.
    let b = run(
        t.path(),
        &["batch", "in.co", "b.hipfb", "--check", "--functions", "1"],
    );
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert!(b.stdout.contains("total: 2 files (0 with input errors)"));
    assert!(!b.stdout.contains("sgprs -"), "{}", b.stdout);
    assert!(b.stderr.is_empty(), "{}", b.stderr);
    for out in [&f.stderr, &b.stderr] {
        assert!(!out.contains('\r') && !out.contains("code objects ["));
    }
    let h = run(t.path(), &["--help"]);
    assert!(!h.stdout.contains("[`"), "rustdoc link in --help");
}

/// Skipped sites name their kind as in the JSON report (`address_trace`), never a Rust enum
/// name (was `skipped AddressTrace in ...`).
#[test]
fn skipped_sites_use_report_names() {
    // At -O0 the device function `stage_exchange` keeps every SGPR live at some loads (its
    // callers are unknown to liveness: the object has an unresolved call, named in the
    // reason): those address traces are skipped.
    let t = workdir(&[("objects/gfx1030__barriers__O0.co", "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "o.co",
            "--trace-addresses",
            "memory,lds",
            "--report",
            "--strict",
        ],
    );
    // A skipped site is lost coverage: --strict exits 3 and writes nothing.
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.files, files(&["in.co"]));
    assert!(
        r.stdout.contains("  skipped: 15 site(s)\n    15x the object has an unresolved call: no SGPR is provably free here for the address-trace loop (2 SGPRs) [address_trace=15], in 2 functions:\n      _Z14stage_exchangePfjfj (7x, first at 0x40e8)\n"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("AddressTrace"));
}

// ------------------------------------------------------------------ item 15: quick start

/// README quick start command 1 shows functions and barriers.
#[test]
fn quick_start_object_shows_functions_and_barriers() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "calls.instr.co",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--report",
        ],
    );
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("function_entry=1"), "{}", r.stdout);
    assert!(r.stdout.contains("barrier="), "{}", r.stdout);
}

// ------------------------------------------------------------------ campaign findings

/// Found by the bad-input campaign (`tools/cli_campaign.sh`, `docs/cli-campaign.md`).
#[test]
fn campaign_findings_stay_fixed() {
    let t = workdir(&[(BUNDLE, "b.hipfb"), (BARRIERS, "in.co")]);
    std::fs::write(t.path().join("text.txt"), "hello\n").expect("txt");
    let cases: [(&[&str], i32, &str); 5] = [
        // extract on a file without code objects made an empty directory and exited 0.
        (
            &["extract", "HOST_ELF", "-o", "x"],
            2,
            "sqtt-patch: error: HOST_ELF: no embedded code object to extract (an x86-64 ELF file without HIP device code (no readable .hip_fatbin))",
        ),
        (
            &["extract", "b.hipfb", "-o", "in.co"],
            2,
            "sqtt-patch: error: -o in.co: not a directory",
        ),
        // A mistyped subcommand was read as an input file and answered "missing -o OUT".
        (
            &["frobnicate"],
            2,
            "sqtt-patch: error: frobnicate: no such file, and not a subcommand (dis, info, extract, batch, funcmap, verify, exec, flamegraph, timeline, perfetto, memtrace; see --help)",
        ),
        // batch: an explicitly named non-input file was only a report row, no diagnostic.
        (
            &["batch", "text.txt", "--check", "--functions", "1"],
            2,
            "sqtt-patch batch: input error: text.txt: not an AMDGPU code object, offload bundle or x86-64 host ELF",
        ),
        (
            &["dis", "text.txt"],
            2,
            "sqtt-patch: error: text.txt: not a code object: neither an ELF file nor an offload bundle (6 bytes, no ELF or bundle magic)",
        ),
    ];
    for (args, code, first) in cases {
        let r = run(t.path(), &with_host_elf(args));
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert_eq!(
            r.first_line(),
            first.replace("HOST_ELF", &host_elf()),
            "{args:?}"
        );
        assert_eq!(
            r.files,
            files(&["b.hipfb", "in.co", "text.txt"]),
            "{args:?}"
        );
    }
    // info names the file kind in words, not as a Rust enum (`Bundle`, `Host`).
    let r = run(t.path(), &["info", "b.hipfb"]);
    assert_eq!(
        r.stdout.lines().next(),
        Some("b.hipfb: offload bundle, 4 code object(s)")
    );
}

/// Item 16: on a terminal `--fatbin` and `batch` draw an indicatif progress line (code objects
/// done / found, bytes, rate, ETA); off a terminal nothing (checked in
/// `human_reports_name_each_kernel_once_in_user_words`). The terminal is util-linux `script`.
#[test]
fn progress_is_drawn_on_a_terminal() {
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("skipped: util-linux `script` (to run under a pseudo-terminal) is not installed");
        return;
    }
    let t = workdir(&[(BUNDLE, "b.hipfb")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    for cmd in [
        format!(
            "{} --fatbin b.hipfb -o o.hipfb --functions 1",
            bin.display()
        ),
        format!("{} batch b.hipfb --check --functions 1", bin.display()),
    ] {
        // The typescript goes to a file of its own temporary directory, not through /dev.
        let typescript = tempfile::tempdir().expect("tempdir");
        let o = std::process::Command::new("script")
            .args(["-qec", &cmd])
            .arg(typescript.path().join("typescript"))
            .current_dir(t.path())
            .output()
            .expect("script");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{cmd}: {text}");
        assert!(
            text.contains(" code objects [") && text.contains("ETA"),
            "{cmd}: no progress line in {text:?}"
        );
    }
}

/// Issue 32, item 9: more worker threads than CPUs are capped at the CPU count, with a note;
/// the output is the same as with the default pool.
#[test]
fn worker_threads_are_capped_at_the_cpu_count() {
    let t = workdir(&[(CALLS, "in.co")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    let job = |threads: Option<&str>, out: &str| {
        let mut c = std::process::Command::new(&bin);
        c.current_dir(t.path())
            .args(["in.co", "-o", out, "--functions", "1"]);
        match threads {
            Some(n) => c.env("RAYON_NUM_THREADS", n),
            None => c.env_remove("RAYON_NUM_THREADS"),
        };
        c.output().expect("run")
    };
    let capped = job(Some("5000"), "a.co");
    let err = String::from_utf8_lossy(&capped.stderr);
    assert_eq!(capped.status.code(), Some(0), "{err}");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        err.contains(&format!(
            "sqtt-patch: note: RAYON_NUM_THREADS=5000 is more than the {cpus} CPUs; using {cpus} worker threads"
        )),
        "{err}"
    );
    let plain = job(None, "b.co");
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(
        std::fs::read(t.path().join("a.co")).expect("a.co"),
        std::fs::read(t.path().join("b.co")).expect("b.co")
    );
}

/// Issue 32, item 15: the spec's variables take the spec's values only (`0`/`1` for a toggle),
/// and a value that is not UTF-8 is an error naming the variable, never silently ignored.
#[test]
fn environment_variables_take_the_spec_values_only() {
    use std::os::unix::ffi::OsStrExt;
    let t = workdir(&[(BARRIERS, "in.co")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    let job = |k: &str, v: &std::ffi::OsStr| {
        let mut c = std::process::Command::new(&bin);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SQTT_") {
                c.env_remove(name);
            }
        }
        c.current_dir(t.path())
            .args(["in.co", "-o", "o.co"])
            .env(k, v)
            .output()
            .expect("run")
    };
    for (k, v, want) in [
        (
            "SQTT_INSTRUMENT_BARRIERS",
            &b"yes"[..],
            "sqtt-patch: error: invalid SQTT_INSTRUMENT_BARRIERS=\"yes\": expected 0 or 1",
        ),
        (
            "SQTT_INSTRUMENT_FUNCTIONS",
            &b"\xff1"[..],
            "sqtt-patch: error: $SQTT_INSTRUMENT_FUNCTIONS: the value is not valid UTF-8; unset it or give its flag",
        ),
    ] {
        let o = job(k, std::ffi::OsStr::from_bytes(v));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{k}: {err}");
        assert_eq!(err.lines().next(), Some(want), "{k}");
        assert!(!t.path().join("o.co").exists(), "{k}: an output was written");
    }
    let o = job("SQTT_INSTRUMENT_BARRIERS", std::ffi::OsStr::new("1"));
    assert_eq!(o.status.code(), Some(0));
    // A blank variable is absent, whichever it is (session-28 tester: FUNCTIONS, the clock and
    // scope variables rejected it while the others took it as their default): with nothing
    // else requested, the job says so.
    for k in [
        "SQTT_INSTRUMENT_FUNCTIONS",
        "SQTT_SHADER_CLOCK_BITS",
        "SQTT_SHADER_CLOCK_SHIFT",
        "SQTT_SCOPE_CU",
        "SQTT_INSTRUMENT_MEMORY",
    ] {
        let o = job(k, std::ffi::OsStr::new(" "));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{k}: {err}");
        assert!(
            err.starts_with("sqtt-patch: error: nothing requested"),
            "{k}: {err}"
        );
    }
}

/// Issue 32, item 16: `--functions -1` gets our message saying which values are accepted (not
/// clap's tip about `-- -1`), and a missing input is named before "nothing requested".
#[test]
fn negative_thresholds_and_missing_inputs_get_the_right_first_message() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    for (args, first) in [
        (
            &["in.co", "-o", "o.co", "--functions", "-1"][..],
            "sqtt-patch: error: invalid --functions \"-1\": expected N or cost:N with a decimal N",
        ),
        (
            &["in.co", "-o", "o.co", "--memory", "-2:5"][..],
            "sqtt-patch: error: invalid --memory \"-2:5\"",
        ),
        (
            &["missing.co", "-o", "o.co"][..],
            "sqtt-patch: error: missing.co: no such file or directory",
        ),
        (
            &["--fatbin", "missing.hipfb", "-o", "o.hipfb"][..],
            "sqtt-patch: error: missing.hipfb: no such file or directory",
        ),
        (
            &["batch", "missing", "--check"][..],
            "sqtt-patch: error: missing: no such file or directory",
        ),
    ] {
        let r = run(t.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.first_line().starts_with(first), "{args:?}: {}", r.stderr);
        assert_eq!(r.files, files(&["in.co"]), "{args:?}");
    }
}

/// Fresh tester (session 16): a second input, a number too large and a bad scope mask are named
/// as what they are, with exit 2 and nothing written.
#[test]
fn second_inputs_large_numbers_and_scope_masks_are_named() {
    let t = workdir(&[(BARRIERS, "a.co"), (BARRIERS, "b.co")]);
    let r = run(
        t.path(),
        &["a.co", "b.co", "-o", "x.co", "--functions", "1"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.first_line()
            .contains("one input per run (b.co is a second one)"),
        "{}",
        r.stderr
    );
    let r = run(
        t.path(),
        &[
            "a.co",
            "-o",
            "x.co",
            "--functions",
            "99999999999999999999999",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("out of range"), "{}", r.stderr);
    let r = run(t.path(), &["a.co", "-o", "x.co", "--scope-cu", "0xZZ"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("invalid --scope-cu"), "{}", r.stderr);
    assert_eq!(r.files, files(&["a.co", "b.co"]));
}

/// `-o` naming the input, by its path, another spelling of it, a symbolic link or a hard link
/// (session-27 tester: a hard link was replaced by the output): exit 2, the input unchanged.
#[test]
fn the_output_may_not_be_the_input_under_any_name() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let before = std::fs::read(t.path().join("in.co")).expect("input");
    std::os::unix::fs::symlink("in.co", t.path().join("soft.co")).expect("symlink");
    std::fs::hard_link(t.path().join("in.co"), t.path().join("hard.co")).expect("hard link");
    for out in ["in.co", "./in.co", "soft.co", "hard.co"] {
        let r = run(t.path(), &["in.co", "-o", out, "--functions", "1"]);
        assert_eq!(r.code, 2, "-o {out}: {}", r.stderr);
        assert_eq!(
            r.first_line(),
            format!("sqtt-patch: error: {out}: the output path is the input file; choose another -o path"),
            "-o {out}"
        );
        assert_eq!(r.files, files(&["hard.co", "in.co", "soft.co"]), "-o {out}");
        let now = std::fs::read(t.path().join("in.co")).expect("input");
        assert!(now == before, "-o {out}: the input changed");
    }
}
