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
/// file: the writer legitimately places a segment without file contents (`p_filesz` 0) after the
/// last byte, so an edit-free write must parse again with the same kernels.
#[test]
fn empty_segment_past_the_end_round_trips() {
    let data = read("code_object-empty-segment-past-end.bin");
    let co = CodeObject::parse(&data).expect("parses");
    let out = CodeObjectEditor::new(&co).write().expect("writes");
    let again = CodeObject::parse(&out).expect("parses again");
    let names = |c: &CodeObject| c.kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&again), names(&co));
    assert!(!co.kernels.is_empty());
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
        "malformed program header at offset 0xb0: segment file range at offset 0x9d0000000800 with size 0x268 extends past the end of the file (0x1070 bytes)"
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
