//! Regression inputs found by the cargo-fuzz targets in `crates/hsaco/fuzz` (one file per
//! finding in `tests/fuzz-regressions/`, named `<target>-<what>.bin`). Every file goes through
//! the operations of all three targets; each must return (an error or a value), never panic or
//! allocate without bound, and the findings pin their error messages.

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
#[test]
fn section_offset_disagreeing_with_its_segment_is_an_error() {
    let e = CodeObject::parse(&read("code_object-segment-offset-mismatch.bin")).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "malformed section header at offset 0x1908: section .note at address 0x0 and file offset 0x200 disagrees with its PT_LOAD (address 0x0, file offset 0x0)"
    );
}

/// Found by `code_object`: a section whose file offset lay inside the ELF header was accepted,
/// and the edit-free writer copied its bytes over `EI_DATA`, producing an unreadable file. Now
/// rejected at parse time.
#[test]
fn section_over_the_elf_header_is_an_error() {
    let e = CodeObject::parse(&read("code_object-section-over-header.bin")).expect_err("bad");
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
