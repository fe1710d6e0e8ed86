//! Bad input: every class is a typed error whose message names the offset; no panics.

mod common;

use hsaco::bundle;
use hsaco::CodeObject;

fn object() -> Vec<u8> {
    std::fs::read(common::corpus().join("compiled/gfx1100__hip-mini__O3.co")).expect("read")
}

fn err(bytes: &[u8]) -> String {
    CodeObject::parse(bytes).expect_err("must fail").to_string()
}

#[test]
fn truncated_file() {
    let b = object();
    assert_eq!(err(&b[..10]), "truncated input: ELF identification needs 16 bytes at offset 0x0, but the data is 10 bytes long");
    assert_eq!(err(&b[..100]), "program header table at offset 0x40 with size 0x1f8 extends past the end of the data (0x64 bytes)");
    // Every prefix is an error or a valid parse, never a panic.
    for n in (0..b.len()).step_by(97) {
        let _ = CodeObject::parse(&b[..n]);
    }
}

#[test]
fn wrong_machine_elf32_abi0() {
    let mut b = object();
    b[0x12] = 62;
    assert_eq!(err(&b), "wrong e_machine 62 at offset 0x12: expected 224");
    let mut b = object();
    b[4] = 1;
    assert_eq!(
        err(&b),
        "ELF32 is not supported (EI_CLASS=1 at offset 0x4): code objects are ELF64"
    );
    // Five bytes name the class; the same predicate decides for every command.
    assert!(hsaco::elf::is_elf32(&b[..5]));
    assert!(!hsaco::elf::is_elf32(&b[..4]));
    assert!(!hsaco::elf::is_elf32(&object()));
    assert!(!hsaco::elf::is_elf32(b"\x7fELG\x01"));
    let mut b = object();
    b[8] = 0;
    b[0x30..0x34].copy_from_slice(&0u32.to_le_bytes());
    assert!(err(&b)
        .starts_with("legacy HSAIL-era code object (EI_ABIVERSION 0 at offset 0x8, e_flags 0x0)"));
}

#[test]
fn corrupt_descriptor_entry_outside_text() {
    let b = object();
    let co = CodeObject::parse(&b).expect("parse");
    let k = &co.kernels[0];
    let mut b2 = b.clone();
    let o = k.kd_offset as usize + 0x10;
    b2[o..o + 8].copy_from_slice(&0x4000_0000i64.to_le_bytes());
    assert_eq!(
        err(&b2),
        format!(
            "kernel descriptor {}.kd at offset {:#x}: entry address {:#x} (kernel_code_entry_byte_offset 1073741824) is outside every executable section",
            k.name,
            k.kd_offset,
            k.kd_address + 0x4000_0000
        )
    );
}

#[test]
fn overlapping_sections() {
    let b = object();
    let co = CodeObject::parse(&b).expect("parse");
    let rodata = co.section(".rodata").expect("rodata").clone();
    let text = co.section(".text").expect("text").clone();
    let mut b2 = b.clone();
    let sh = co.elf.header.e_shoff as usize + 64 * rodata.index + 24;
    b2[sh..sh + 8].copy_from_slice(&(text.offset - 16).to_le_bytes());
    assert_eq!(
        err(&b2),
        format!(
            "sections .rodata and .text overlap in the file at offset {:#x}",
            text.offset
        )
    );
}

#[test]
fn bundle_entry_past_the_end() {
    let mut b =
        std::fs::read(common::corpus().join("bundles/multi4__hip-mini__O3.hipfb")).expect("read");
    // Entry 1 header: after magic (24), count (8), entry 0 (24 + id length).
    let id0 = u64::from_le_bytes(b[48..56].try_into().expect("8")) as usize;
    let e1 = 56 + id0;
    let len = b.len() as u64;
    b[e1..e1 + 8].copy_from_slice(&len.to_le_bytes());
    let e = bundle::parse_plain(&b, 0)
        .expect_err("past end")
        .to_string();
    assert!(
        e.starts_with("offload bundle entry 1 (hipv4-amdgcn-amd-amdhsa--gfx1100) at offset "),
        "{e}"
    );
    assert!(e.contains("extends past the end of the data"), "{e}");
}

#[test]
fn non_bundle_garbage_after_bundle() {
    let mut b = std::fs::read(common::corpus().join("bundles/multi4__hip-mini__O3.ccob-v2-zlib"))
        .expect("read");
    let n = b.len();
    b.extend_from_slice(b"junk");
    let e = bundle::parse_all(&b, 0, bundle::DEFAULT_DECOMPRESS_LIMIT)
        .expect_err("junk")
        .to_string();
    assert_eq!(e, format!("malformed offload bundle region at offset {n:#x}: non-zero bytes where a bundle or zero padding was expected (right after bundle 0 at offset 0x0, whose size fields give {n} bytes: cut short?)"));
}

/// A CCOB whose stored hash does not match its decompressed bundle (a corrupt payload can still
/// decompress to the declared size) is refused with the offset, as `clang-offload-bundler
/// -verbose` reports "Hashes match: No".
#[test]
fn ccob_hash_mismatch() {
    let mut b = std::fs::read(common::corpus().join("bundles/multi4__hip-mini__O3.ccob-v2-zlib"))
        .expect("read");
    assert!(bundle::parse_all(&b, 0, bundle::DEFAULT_DECOMPRESS_LIMIT).is_ok());
    // v2 header: magic (4), u16 version, u16 method, u32 total, u32 uncompressed, u64 hash.
    b[16] ^= 0x55;
    let e = bundle::parse_all(&b, 0, bundle::DEFAULT_DECOMPRESS_LIMIT)
        .expect_err("hash")
        .to_string();
    assert!(
        e.contains("offset 0x0") && e.contains("does not match") && e.contains("corrupt"),
        "{e}"
    );
}
