//! Section headers inconsistent in ways the loader did not check (session-23 fresh tester): the
//! main job ended in exit 1 ("FAILED verification", blaming our rewrite) or read wrong symbol
//! names. Each is now bad input: exit 2, nothing written, and one message naming the file, the
//! section, the field and its file offset, for `info` and the main job alike.
//!
//! Inputs are fixtures (clang/LLVM 22) with one section header field changed; the field's file
//! offset is `e_shoff + 64 * index + field` (gABI "Sections"; `llvm-readelf-22 -S` of the edited
//! copy shows the changed value), and the change is read back with `hsaco::elf::Elf`, which
//! does not run the checks under test.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// Offsets of section header fields (gABI "Sections").
const SH_TYPE: usize = 4;
const SH_FLAGS: usize = 8;
const SH_SIZE: usize = 32;
const SH_LINK: usize = 40;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `bytes` with `field` of section `section`'s header set to `value` (little-endian, as wide
/// as `value`); returns the edited bytes, the section's header offset and the field's offset.
fn edit(bytes: &[u8], section: &str, field: usize, value: &[u8]) -> (Vec<u8>, usize, usize) {
    let e = hsaco::elf::Elf::parse(bytes).expect("fixture parses");
    let s = e.section_by_name(section).expect("section");
    let header = e.header.e_shoff as usize + 64 * s.index;
    let at = header + field;
    let mut d = bytes.to_vec();
    d[at..at + value.len()].copy_from_slice(value);
    (d, header, at)
}

/// Section `name` of `bytes` as the ELF reader sees it (no consistency checks).
fn section(bytes: &[u8], name: &str) -> hsaco::elf::Section {
    let e = hsaco::elf::Elf::parse(bytes).expect("the edited copy still reads as ELF");
    e.section_by_name(name).expect("section").clone()
}

/// Writes `bytes` as `name` into a new temporary directory and runs `sqtt-patch ARGS FILE -o
/// OUT --barriers 1`, which must exit 2. Returns the directory (kept while the caller holds
/// it), the input and output paths, and stderr.
fn bad_input(
    name: &str,
    bytes: &[u8],
    args: &[&str],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    String,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, out) = (dir.path().join(name), dir.path().join("out.bin"));
    std::fs::write(&file, bytes).expect("write input");
    let o = Command::new(BIN)
        .args(args)
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(["--barriers", "1"])
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    (dir, file, out, err)
}

/// Runs `info FILE` and the main job `FILE -o OUT --functions 1 --barriers 1` on `bytes`:
/// both exit 2 with `message` on stderr naming the file, and nothing is written.
fn refused(name: &str, bytes: &[u8], message: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, out) = (dir.path().join(name), dir.path().join("out.co"));
    std::fs::write(&file, bytes).expect("write input");
    let info = Command::new(BIN)
        .arg("info")
        .arg(&file)
        .output()
        .expect("run info");
    let patch = Command::new(BIN)
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1", "--barriers", "1"])
        .output()
        .expect("run sqtt-patch");
    for (what, o) in [("info", info), ("main job", patch)] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name} {what}: {err}");
        assert!(!err.contains("panicked"), "{name} {what}: {err}");
        assert!(
            err.contains(&file.display().to_string()) && err.contains(message),
            "{name} {what}: want {message}\n got {err}"
        );
    }
    assert!(!out.exists(), "{name}: output written");
}

/// `.bss` or `.dynamic` with `sh_size` 0 under a segment that still maps their bytes: the
/// rewrite moved the segment with its empty section and our verifier refused it ("program
/// header 4 maps no section and changed", exit 1).
#[test]
fn an_empty_section_that_is_all_a_segment_maps_is_bad_input() {
    let b = fixture("gfx1100__calls__O3.co");
    let e = hsaco::elf::Elf::parse(&b).expect("fixture parses");
    for (name, at_phdr) in [(".bss", 4usize), (".dynamic", 5)] {
        let (d, header, at) = edit(&b, name, SH_SIZE, &0u64.to_le_bytes());
        let s = section(&d, name);
        assert_eq!(s.size, 0, "{name}: sh_size edited");
        let p = &e.segments[at_phdr];
        let message = format!(
            "malformed section header at offset {at:#x}: `{name}` sh_size is 0, but program header [{at_phdr}] (p_type {:#x}, at file offset {:#x}) maps {:#x} bytes at its address {:#x} that no section accounts for (section header [{}] at file offset {header:#x})",
            p.p_type,
            e.header.e_phoff as usize + 56 * at_phdr,
            p.memsz,
            s.addr,
            s.index
        );
        refused("empty.co", &d, &message);
    }
}

/// `.rodata`, which holds the kernel descriptors, without `SHF_ALLOC` or of another type
/// (`SHT_RELA`): the descriptors' entry offsets were not re-aimed at the moved kernels, or
/// `.rodata` was read as relocations, and our verifier refused the rewrite (exit 1).
#[test]
fn kernel_descriptors_outside_an_allocated_progbits_section_are_bad_input() {
    let b = fixture("gfx942__ocl__O3.co");
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let kd = co
        .symbols
        .iter()
        .map(|s| &s.symbol)
        .filter(|s| s.name.ends_with(".kd"))
        .min_by_key(|s| (s.table != hsaco::elf::SymbolTable::Dynsym, s.index))
        .expect("a descriptor symbol")
        .clone();
    let flags = section(&b, ".rodata").flags;
    let cases = [
        (
            "noalloc.co",
            SH_FLAGS,
            (flags & !hsaco::elf::SHF_ALLOC).to_le_bytes().to_vec(),
            format!(
                "but its sh_flags {:#x} lack SHF_ALLOC (0x2): the loader does not load it",
                flags & !hsaco::elf::SHF_ALLOC
            ),
        ),
        (
            "rela.co",
            SH_TYPE,
            hsaco::elf::SHT_RELA.to_le_bytes().to_vec(),
            "but its sh_type is 0x4, not SHT_PROGBITS (1)".to_string(),
        ),
    ];
    for (name, field, value, why) in cases {
        let (d, header, at) = edit(&b, ".rodata", field, &value);
        let s = section(&d, ".rodata");
        assert!(!s.is_alloc() || s.sh_type == hsaco::elf::SHT_RELA, "{name}");
        let message = format!(
            "malformed section header at offset {at:#x}: `.rodata` holds kernel descriptor {} at {:#x}, {why} (section header [{}] at file offset {header:#x})",
            kd.name, kd.value, s.index
        );
        refused(name, &d, &message);
    }
}

/// `.symtab`'s `sh_link` naming `.dynstr` or `.shstrtab`: its names were read from the wrong
/// table (empty names failed the object closed; names in range reached the funcmap). Also a
/// table whose `sh_size` is not a whole number of symbols.
#[test]
fn a_symbol_table_naming_another_string_table_is_bad_input() {
    let b = fixture("gfx1100__barriers__O3.co");
    let e = hsaco::elf::Elf::parse(&b).expect("fixture parses");
    let symtab = section(&b, ".symtab");
    let index = |name: &str| e.section_by_name(name).expect("section").index as u32;
    for (table, role) in [
        (".dynstr", "the string table of `.dynsym`"),
        (".shstrtab", "the section name table (e_shstrndx)"),
    ] {
        let link = index(table);
        let (d, header, at) = edit(&b, ".symtab", SH_LINK, &link.to_le_bytes());
        assert_eq!(section(&d, ".symtab").link, link);
        let message = format!(
            "malformed section header at offset {at:#x}: `.symtab` sh_link {link} names `{table}`, {role}, not a SHT_STRTAB holding its symbol names (section header [{}] at file offset {header:#x})",
            symtab.index
        );
        refused("link.co", &d, &message);
    }
    let size = symtab.size - 8;
    let (d, header, at) = edit(&b, ".symtab", SH_SIZE, &size.to_le_bytes());
    let message = format!(
        "malformed section header at offset {at:#x}: `.symtab` sh_size {size:#x} is not a whole number of 24-byte symbols (section header [{}] at file offset {header:#x})",
        symtab.index
    );
    refused("size.co", &d, &message);
}

/// A symbol whose `st_name` lies past the end of its string table was read as an empty name.
#[test]
fn a_symbol_name_outside_its_string_table_is_bad_input() {
    let b = fixture("gfx1100__barriers__O3.co");
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let strtab = section(&b, ".strtab");
    let sym = co
        .symbols
        .iter()
        .map(|s| &s.symbol)
        .find(|s| s.table == hsaco::elf::SymbolTable::Symtab)
        .expect("a .symtab symbol");
    let mut d = b.clone();
    let at = sym.entry_offset as usize;
    d[at..at + 4].copy_from_slice(&0xffffu32.to_le_bytes());
    let message = format!(
        "malformed symbol at offset {at:#x}: st_name 0xffff of symbol [{}] of `.symtab` is outside its string table `.strtab` (sh_link {}, {:#x} bytes, or no NUL before its end)",
        sym.index, strtab.index, strtab.size
    );
    refused("name.co", &d, &message);
}

/// A section without a name that overlaps another is named by its index (session-24 fresh
/// tester: "sections .note and  overlap"): `.comment` gets `sh_name` 0 and `.note`'s offset.
#[test]
fn an_overlapping_section_without_a_name_is_named_by_its_index() {
    const SH_NAME: usize = 0;
    const SH_OFFSET: usize = 24;
    let b = fixture("gfx1100__barriers__O3.co");
    let note = section(&b, ".note");
    let comment = section(&b, ".comment");
    assert!(note.index < comment.index, "sorted by offset, then index");
    // Both fields of one header at once (the ELF reader refuses the overlap in between).
    let (d, header, _) = edit(&b, ".comment", SH_OFFSET, &note.offset.to_le_bytes());
    let mut d = d;
    d[header + SH_NAME..header + SH_NAME + 4].copy_from_slice(&0u32.to_le_bytes());
    let message = format!(
        "sections .note and [{}] (no name) overlap in the file at offset {:#x}",
        comment.index, note.offset
    );
    refused("unnamed.co", &d, &message);
}

/// An object without `.text` names where the section headers are (the message had no offset).
#[test]
fn an_object_without_text_names_its_section_headers() {
    let b = fixture("gfx1100__barriers__O3.co");
    let text = section(&b, ".text");
    let e = hsaco::elf::Elf::parse(&b).expect("fixture parses");
    // The name `.text` becomes `.Text` in the section name table.
    let names = section(&b, ".shstrtab");
    let at = (names.offset + u64::from(text.sh_name)) as usize;
    assert_eq!(&b[at..at + 6], b".text\0");
    let mut d = b.clone();
    d[at + 1] = b'T';
    let (_dir, _, out, err) = bad_input("notext.co", &d, &[]);
    assert!(
        err.contains(&format!(
            "not found: .text section (no section of that name among the {} section headers at file offset {:#x})",
            e.sections.len(),
            e.header.e_shoff
        )),
        "{err}"
    );
    assert!(!out.exists());
}

/// Session-24 fresh tester: a host whose `.dynsym` names a symbol outside `.dynstr` was
/// reported as "cannot write the host ELF" (our failure) instead of as the input's fault.
#[test]
fn a_host_dynamic_symbol_name_outside_dynstr_is_named_as_the_inputs_fault() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/x86_64__fx-app__pie.elf");
    let mut b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let dynsym = section(&b, ".dynsym");
    // Symbol [1]'s st_name (the first field of an Elf64_Sym, 24 bytes each).
    let at = dynsym.offset as usize + 24;
    b[at..at + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    let (_dir, file, out, err) = bad_input("app.elf", &b, &["--fatbin"]);
    let want = format!(
        "sqtt-patch: error: {}: malformed host ELF (found while rewriting it): malformed symbol at offset {at:#x}: st_name 0xffffff of symbol [1] of `.dynsym` is outside its string table `.dynstr`",
        file.display()
    );
    assert!(err.starts_with(&want), "want {want}\n got {err}");
    assert!(!out.exists(), "nothing written");
}

/// `.symtab` symbol `name` of `bytes` as the ELF reader sees it.
fn symbol(bytes: &[u8], name: &str) -> hsaco::elf::Symbol {
    let e = hsaco::elf::Elf::parse(bytes).expect("fixture parses");
    e.symbols(bytes)
        .expect("symbols")
        .into_iter()
        .find(|s| s.table == hsaco::elf::SymbolTable::Symtab && s.name == name)
        .expect("symbol")
}

/// Session-25 fresh tester: a function symbol whose `st_value` lies outside the section it
/// names (one byte of the value flipped) reached the rewrite with `.text` kept in place, and our
/// verifier rejected the output (exit 1).
#[test]
fn a_symbol_value_outside_its_section_is_bad_input() {
    let b = fixture("gfx942__calls__O3.co");
    let sym = symbol(&b, "_Z16big_private_sortPKfij");
    let text = section(&b, ".text");
    let at = sym.entry_offset as usize + 8;
    let mut d = b.clone();
    d[at + 6] = 0xff;
    let value = u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    let message = format!(
        "malformed symbol at offset {at:#x}: _Z16big_private_sortPKfij: st_value {value:#x} lies outside section [{}] .text ({:#x}..{:#x}) that its st_shndx names",
        text.index,
        text.addr,
        text.addr + text.size
    );
    refused("value.co", &d, &message);
}

/// Session-25 fresh tester: a Tensile label whose `st_shndx` names `.rodata` while its value is
/// a `.text` address was moved with the code, and our verifier said the symbol changed section
/// (exit 1).
#[test]
fn a_label_naming_another_section_than_its_address_is_bad_input() {
    let b = fixture("../tensile/gfx1201__tensile__O3.co");
    let sym = symbol(&b, "label_NoBranch_0");
    let rodata = section(&b, ".rodata");
    let mut d = b.clone();
    let at = sym.entry_offset as usize + 6;
    d[at..at + 2].copy_from_slice(&(rodata.index as u16).to_le_bytes());
    let message = format!(
        "malformed symbol at offset {:#x}: label_NoBranch_0: st_value {:#x} lies outside section [{}] .rodata ({:#x}..{:#x}) that its st_shndx names",
        at + 2,
        sym.value,
        rodata.index,
        rodata.addr,
        rodata.addr + rodata.size
    );
    refused("label.co", &d, &message);
}

/// Session-25 fresh tester: a `PT_GNU_RELRO` whose `p_memsz` reaches past every loaded segment
/// also covered the code the rewrite appends, and our verifier rejected the output (exit 1).
#[test]
fn a_relro_range_past_the_loaded_segments_is_bad_input() {
    let b = fixture("../tensile/gfx90a__tensile__O3.co");
    let e = hsaco::elf::Elf::parse(&b).expect("fixture parses");
    let (i, relro) = e
        .segments
        .iter()
        .enumerate()
        .find(|(_, p)| p.p_type == hsaco::elf::PT_GNU_RELRO)
        .expect("a PT_GNU_RELRO (lld writes one)");
    let header = e.header.phdr_offset(i) as usize;
    // p_memsz is at byte 40 of an Elf64_Phdr (gABI "Program Header"); its byte 4 set.
    let mut d = b.clone();
    d[header + 40 + 4] = 0xff;
    let memsz = relro.memsz | 0xff << 32;
    let message = format!(
        "malformed program header at offset {header:#x}: [{i}] PT_GNU_RELRO maps {:#x}..{:#x} (p_vaddr {:#x}, p_memsz {memsz:#x}), which no PT_LOAD segment contains",
        relro.vaddr,
        relro.vaddr + memsz,
        relro.vaddr
    );
    refused("relro.co", &d, &message);
}
