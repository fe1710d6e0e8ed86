//! Regression inputs found by the cargo-fuzz targets in `crates/hsaco/fuzz` (one file per
//! finding in `tests/fuzz-regressions/`, named `<target>-<what>.bin`). Every file goes through
//! the operations of all three targets; each must return (an error or a value), never panic or
//! allocate without bound, and the findings pin their error messages.

mod common;

use std::path::PathBuf;

use hsaco::{bundle, CodeObject, CodeObjectEditor};

/// Decompression cap used by the fuzz targets (bytes).
const LIMIT: u64 = 64 << 20;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).expect("regression input")
}

/// The operations of the three fuzz targets.
fn exercise(data: &[u8]) {
    if let Ok(co) = CodeObject::parse(data) {
        for k in &co.kernels {
            let _ = k.descriptor.registers(&co.target);
            let _ = k.descriptor.directives(&co.target, co.version);
        }
        if let Ok(out) = CodeObjectEditor::new(&co).write() {
            CodeObject::parse(&out).expect("edit-free write parses again");
        }
    }
    let _ = bundle::parse_all(data, 0, LIMIT);
    let _ = bundle::parse_one(data, 0, LIMIT);
    let _ = hsaco::host::find_fatbins(data, LIMIT);
    let _ = hsaco::container::open(data, LIMIT);
}

#[test]
fn every_regression_input_is_handled() {
    let mut n = 0;
    for e in std::fs::read_dir(dir()).expect("tests/fuzz-regressions") {
        let p = e.expect("entry").path();
        exercise(&std::fs::read(&p).expect("read"));
        n += 1;
    }
    assert!(n >= 1, "no regression inputs found");
}

/// Found by `code_object` after 899 runs: an object whose mutated section addresses made the
/// edit-free writer lay out a 1 TiB output and allocate it (AddressSanitizer: allocation size
/// exceeds the maximum). Now a typed error naming the section header.
#[test]
fn huge_layout_is_an_error() {
    let data = read("code_object-huge-layout.bin");
    let co = CodeObject::parse(&data).expect("parses");
    let e = CodeObjectEditor::new(&co)
        .write()
        .expect_err("inconsistent layout");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1488: section addresses and alignments would place the output at 1099511626672 bytes (input 5896 bytes): inconsistent layout"
    );
}

/// Found by `code_object`: a program header whose offset disagrees with its sections made the
/// writer compute `filesz` as a negative difference (arithmetic overflow panic). The writer now
/// saturates, and the reader rejects the segment (its file range lies past the end) first.
#[test]
fn segment_underflow_is_an_error() {
    let e = CodeObject::parse(&read("code_object-segment-underflow.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed program header at offset 0x200: segment file range at offset 0x2000038 with size 0x2f2c extends past the end of the file (0x6f08 bytes)"
    );
}

/// Found by `code_object` while the reader also refused empty segments past the end of the
/// file (the writer legitimately places a segment without file contents after the last byte;
/// such segments are now exempt). The input itself is now refused by the later PT_LOAD
/// consistency check.
#[test]
fn empty_segment_input_is_an_error() {
    let e = CodeObject::parse(&read("code_object-empty-segment-past-end.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1f48: section .dynamic at address 0x35a0 and file offset 0x15a0 disagrees with its PT_LOAD (address 0x2000, file offset 0x1000)"
    );
}

/// Found by `code_object` while the overlap check also refused empty sections (an empty section
/// inside the section header table is harmless; now exempt). The input itself is refused by the
/// later PT_LOAD consistency check, which covers empty and SHT_NOBITS sections.
#[test]
fn empty_section_input_is_an_error() {
    let e = CodeObject::parse(&read("code_object-empty-section-in-shdrs.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x5400: section  at address 0x71b0 and file offset 0x41b0 disagrees with its PT_LOAD (address 0x6140, file offset 0x4140)"
    );
}

/// Found by `code_object` after 298,085 runs: `.note` at address 0 but file offset 0x200 inside a
/// PT_LOAD mapping offset 0 at address 0; the writer kept the segment and produced a file range
/// past the end. Sections must sit in their PT_LOAD at the offset their address implies.
/// (The input also has `.rodata` at 0x600 with `sh_addralign` 4 MiB, refused first since the
/// alignment check; the test restores a valid alignment to reach the PT_LOAD check.)
#[test]
fn section_offset_disagreeing_with_its_segment_is_an_error() {
    let mut data = read("code_object-segment-offset-mismatch.bin");
    let e = CodeObject::parse(&data).expect_err("misaligned .rodata");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1a48: section .rodata at address 0x600 is not a multiple of its sh_addralign 0x400000"
    );
    data[0x1a78..0x1a80].copy_from_slice(&64u64.to_le_bytes());
    let e = CodeObject::parse(&data).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1908: section .note at address 0x0 and file offset 0x200 disagrees with its PT_LOAD (address 0x0, file offset 0x0)"
    );
}

/// Found by `code_object`: a section whose file offset lay inside the ELF header was accepted,
/// and the edit-free writer copied its bytes over `EI_DATA`, producing an unreadable file. Now
/// rejected at parse time. (Section [6] of the input also has an `sh_name` outside the section
/// name table, refused first since session 21; the test gives it the empty name it was read as
/// before, to reach the header check.)
#[test]
fn section_over_the_elf_header_is_an_error() {
    let mut data = read("code_object-section-over-header.bin");
    let e = CodeObject::parse(&data).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1348: sh_name 0x2000027 of section [6] is outside the section name table [19] (0xd2 bytes at file offset 0x1078; its sh_size is at offset 0x16a8)"
    );
    data[0x1348..0x134c].copy_from_slice(&0u32.to_le_bytes());
    let e = CodeObject::parse(&data).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x12c8: section .hash at file offset 0x5 with size 0x20 overlaps the ELF header"
    );
}

/// Found by `code_object`: a `PT_LOAD` whose `p_offset` (0x9d0000000800) lay far past the end of
/// the file was accepted; the writer then produced a segment the reader refuses. Now rejected at
/// parse time.
#[test]
fn segment_past_the_file_is_an_error() {
    let e = CodeObject::parse(&read("code_object-segment-past-file.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0xeb0: section .text at address 0x1800 and file offset 0x800 disagrees with its PT_LOAD (address 0x1800, file offset 0x9d0000000800)"
    );
}

/// Found by `code_object` after 141,455 runs: section addresses below their file offsets made
/// the writer's layout wrap (`k_seg`) and then overflow an addition (arithmetic overflow panic).
/// The layout arithmetic is now checked (typed error), and since the overlap check added later
/// the reader already refuses this input (`.relro_padding` moved over `.note` in memory).
#[test]
fn layout_overflow_input_is_an_error() {
    let e = CodeObject::parse(&read("code_object-layout-overflow.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1208: section .note at address 0x200 overlaps section .relro_padding (0x2d..0x2bd) in memory"
    );
}

/// Found by `code_object` after 176,402 runs: `.hash` moved to an address inside `.text`; the
/// writer's address map then sent a kernel entry into `.hash`, and the written object failed to
/// parse (entry outside every executable section). Overlapping alloc sections are now rejected.
#[test]
fn alloc_sections_overlapping_in_memory_are_an_error() {
    let e = CodeObject::parse(&read("code_object-alloc-overlap.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x2fb8: section .hash at address 0x2420 overlaps section .text (0x1f00..0x3808) in memory"
    );
}

/// Found by `code_object` (from its saved corpus): `.AMDGPU.gpr_maximums` turned into an empty
/// SHF_ALLOC section at address 0 but file offset 0x2520; the writer placed it first and shifted
/// every file offset, leaving `.note` outside its PT_LOAD. The PT_LOAD consistency check now
/// covers empty sections too.
#[test]
fn empty_alloc_section_disagreeing_with_its_segment_is_an_error() {
    let e = CodeObject::parse(&read("code_object-empty-alloc-section.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x30d8: section .AMDGPU.gpr_maximums at address 0x0 and file offset 0x2520 disagrees with its PT_LOAD (address 0x0, file offset 0x0)"
    );
}

/// Found by `code_object` after 182,148 runs: `.bss` (SHT_NOBITS) with `sh_offset` 0x3650 in a
/// PT_LOAD at file offset 0x3850; the writer shifted the segment by the section's offset change
/// and emitted a PT_LOAD whose address and offset were not congruent modulo `p_align`. The
/// PT_LOAD consistency check now covers SHT_NOBITS sections too.
#[test]
fn nobits_offset_disagreeing_with_its_segment_is_an_error() {
    let e = CodeObject::parse(&read("code_object-nobits-offset.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x4208: section .bss at address 0x6850 and file offset 0x3650 disagrees with its PT_LOAD (address 0x6850, file offset 0x3850)"
    );
}

/// Found by `code_object` after 1,070,792 runs: `.dynamic` moved to address 0x2000 (outside every
/// PT_LOAD) while keeping file offset 0x1a78, after `.text` (0x1200) in the file. The layout, which
/// walks alloc sections in address order, then pushed `.text` and `.relro_padding` one page
/// (0x1000) later in the file at unchanged addresses, but the writer kept the RW PT_LOAD's
/// `p_offset` because its address had not moved: `.relro_padding` at offset 0x2ae8 / address
/// 0x3ae8 in a PT_LOAD at offset 0x1a78 / address 0x3a78, refused by the reader. Program headers
/// now move with their first section's address and file offset. Oracle: llvm-readelf-22 maps
/// `.relro_padding` into the RW PT_LOAD of the written object and reports no warning about it.
#[test]
fn segment_moves_with_its_first_sections_file_offset() {
    let data = read("code_object-segment-head-offset.bin");
    let co = CodeObject::parse(&data).expect("the input parses");
    let out = CodeObjectEditor::new(&co).write().expect("edit-free write");
    let again = CodeObject::parse(&out).expect("edit-free write parses again");
    let relro = again.section(".relro_padding").expect(".relro_padding");
    let seg = again
        .elf
        .segments
        .iter()
        .find(|p| {
            p.p_type == hsaco::elf::PT_LOAD
                && p.vaddr <= relro.addr
                && relro.addr < p.vaddr + p.memsz
        })
        .expect("a PT_LOAD holds .relro_padding");
    assert_eq!(
        (relro.addr, relro.offset, seg.vaddr, seg.offset),
        (0x3ae8, 0x2ae8, 0x3a78, 0x2a78)
    );
    if common::no_llvm() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("out.co");
    std::fs::write(&path, &out).expect("write output");
    let (ok, text, err) = common::run("llvm-readelf", &["-l".as_ref(), path.as_os_str()]);
    assert!(ok, "llvm-readelf-22 -l failed: {err}");
    assert!(
        !err.contains("relro_padding"),
        "llvm-readelf-22 warns: {err}"
    );
    // Section-to-segment mapping row of the RW PT_LOAD (the 4th program header, "03").
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("03 "))
        .expect("segment 03 in the section-to-segment mapping");
    assert!(row.contains(".relro_padding"), "mapping row: {row}");
}

/// Found by `code_object` after 219,262 runs: `.rodata` at address 0x600 with `sh_addralign`
/// 4 MiB, and `.text` (holding the kernel entry) stripped of `SHF_ALLOC`. The edit-free write
/// aligned `.rodata` to 0x400000 and mapped the kernel entry through it (the nearest alloc
/// section below the entry), so the written descriptor pointed outside `.text`. The reader now
/// refuses kernel entries outside loaded (`SHF_ALLOC`) executable sections and alloc sections
/// whose address is not a multiple of their alignment (gABI `sh_addralign`).
#[test]
fn kernel_entry_outside_loaded_code_is_an_error() {
    let mut data = read("code_object-entry-in-non-alloc-text.bin");
    let e = CodeObject::parse(&data).expect_err("misaligned .rodata");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1a48: section .rodata at address 0x600 is not a multiple of its sh_addralign 0x400000"
    );
    // Give `.rodata` (section header 6 at 0x1a48; sh_addralign at +48) a valid alignment of 64:
    // the kernel entry in the non-alloc `.text` is then the error.
    data[0x1a78..0x1a80].copy_from_slice(&64u64.to_le_bytes());
    let e = CodeObject::parse(&data).expect_err("entry in non-alloc .text");
    assert_eq!(
        e.to_string(),
        "kernel descriptor softmax_kernel.kd at offset 0x600: entry address 0x1700 (kernel_code_entry_byte_offset 4352) is outside every executable section"
    );
}

/// Found by `code_object` after 56,706 runs: `.dynstr` moved to address 0x28000e40 (outside every
/// PT_LOAD, file offset 0xe40) and PT_DYNAMIC given `p_memsz` 0x3d0000000070, so `.dynstr` lay
/// inside PT_DYNAMIC by address but not by file offset. The writer stretched PT_DYNAMIC's
/// `p_filesz` to cover `.dynstr`'s new file offset (0xc60 bytes, past the end of the file).
/// Only sections inside a segment's input file range now count for its `p_filesz`.
#[test]
fn section_outside_a_segments_file_range_does_not_stretch_it() {
    let mut data = read("code_object-filesz-foreign-section.bin");
    // The fuzzer also broke `_DYNAMIC`'s st_shndx (at 0x1cee), which the reader now refuses;
    // make it SHN_UNDEF so the writer case this test pins is reached.
    assert_eq!(
        CodeObject::parse(&data).expect_err("bad st_shndx").to_string(),
        "malformed symbol at offset 0x1cee: _DYNAMIC: st_shndx 15624 is not a section (16 sections)"
    );
    data[0x1cee..0x1cf0].copy_from_slice(&0u16.to_le_bytes());
    let co = CodeObject::parse(&data).expect("the input parses");
    let out = CodeObjectEditor::new(&co).write().expect("edit-free write");
    let again = CodeObject::parse(&out).expect("edit-free write parses again");
    let dynamic = again
        .elf
        .segments
        .iter()
        .find(|p| p.p_type == 2)
        .expect("PT_DYNAMIC");
    assert_eq!((dynamic.offset, dynamic.filesz), (0x19c0, 0x70));
    if common::no_llvm() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("out.co");
    std::fs::write(&path, &out).expect("write output");
    let (ok, _, err) = common::run("llvm-readelf", &["-l".as_ref(), path.as_os_str()]);
    assert!(ok, "llvm-readelf-22 -l failed: {err}");
    // The input's own warnings (`.dynamic` outside PT_DYNAMIC) stay; the write adds none.
    let input = dir().join("code_object-filesz-foreign-section.bin");
    let (_, _, err_in) = common::run("llvm-readelf", &["-l".as_ref(), input.as_os_str()]);
    let strip = |e: &str, p: &std::path::Path| e.replace(&p.display().to_string(), "FILE");
    assert_eq!(strip(&err, &path), strip(&err_in, &input));
}

/// Found by `code_object` after 393,086 runs: an object without section headers (`e_shnum` 0)
/// whose first program header (mutated type 0xf016) maps file offset 0x4140. The writer kept
/// only the bytes before the first section and up to the section header table (0x11b0 bytes),
/// so the segment pointed past the end of the output. The verbatim head (everything before the
/// first file-backed section: the whole input here) is now always part of the output, and a
/// segment that holds no section must map the same bytes in the output as in the input, else
/// the write is an error instead of a broken file.
#[test]
fn segment_without_sections_keeps_its_bytes() {
    let data = read("code_object-segment-without-sections.bin");
    let co = CodeObject::parse(&data).expect("the input parses");
    assert!(co.elf.sections.is_empty());
    let out = CodeObjectEditor::new(&co).write().expect("edit-free write");
    assert_eq!(out, data, "nothing to lay out: the output is the input");
    // With a section after the headers, the same segment lies outside the verbatim head.
    let mut with_section = data.clone();
    with_section.truncate(0x11b0);
    let shdrs = [[0u8; 64], {
        let mut s = [0u8; 64];
        s[4..8].copy_from_slice(&1u32.to_le_bytes()); // SHT_PROGBITS, not alloc
        s[24..32].copy_from_slice(&0x400u64.to_le_bytes()); // sh_offset
        s[32..40].copy_from_slice(&0x10u64.to_le_bytes()); // sh_size
        s
    }];
    for s in shdrs {
        with_section.extend_from_slice(&s);
    }
    with_section[0x3a..0x3e].copy_from_slice(&[64, 0, 2, 0]); // e_shentsize 64, e_shnum 2
                                                              // Program header 0 (at 0x40): p_offset 0x800, past the section at 0x400.
    with_section[0x48..0x50].copy_from_slice(&0x800u64.to_le_bytes());
    let co = CodeObject::parse(&with_section).expect("parses");
    let e = CodeObjectEditor::new(&co)
        .write()
        .expect_err("segment outside the head");
    assert_eq!(
        e.to_string(),
        "malformed program header at offset 0x40: segment at file offset 0x800 with size 0x1c0 holds no section and the writer does not keep the bytes it maps"
    );
}
