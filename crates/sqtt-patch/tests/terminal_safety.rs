//! Names, ids and bytes from the input never reach the terminal raw (session-22 fresh tester):
//! a symbol name holding an escape sequence (`\x1b]0;...\x07` retitles a terminal, `\x1b[2J`
//! clears it) printed by `info` and `dis`, a bundle entry id that is not UTF-8 and a section name
//! byte in error messages. Every control character but newline and tab is printed as its Rust
//! escape (`\u{1b}`). Inputs are fixtures with bytes changed in place (same lengths).

mod support;
use std::process::{Command, Output};
use support::fixture;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// Runs `sqtt-patch ARGS FILE` on `bytes` written to a temporary file.
fn run(bytes: &[u8], args: &[&str]) -> Output {
    let t = tempfile::tempdir().expect("tempdir");
    let f = t.path().join("in.co");
    std::fs::write(&f, bytes).expect("write");
    Command::new(BIN)
        .args(args)
        .arg(&f)
        .output()
        .expect("run sqtt-patch")
}

/// Asserts that neither stream holds a control byte other than newline and tab (C0, DEL or
/// the UTF-8 form of a C1 control) and that the escaped form `want` is there.
fn assert_escaped(ctx: &str, o: &Output, want: &str) {
    for (name, s) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let text = String::from_utf8_lossy(s);
        let bad = text
            .chars()
            .find(|&c| c.is_control() && c != '\n' && c != '\t');
        assert_eq!(
            bad, None,
            "{ctx}: a raw control character on {name}:\n{text}"
        );
    }
    let all = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(all.contains(want), "{ctx}: want {want:?} in:\n{all}");
}

/// `bytes` with every occurrence of `from` (string tables, the metadata note) replaced by `to`
/// (same length).
fn replaced(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let ats: Vec<usize> = (0..=bytes.len() - from.len())
        .filter(|&k| &bytes[k..k + from.len()] == from)
        .collect();
    assert!(
        !ats.is_empty(),
        "{} not in the fixture",
        String::from_utf8_lossy(from)
    );
    for at in ats {
        bytes[at..at + to.len()].copy_from_slice(to);
    }
    bytes
}

#[test]
fn symbol_names_with_escape_sequences_are_printed_escaped() {
    let co = fixture("objects/gfx1100__barriers__O3.co");
    // A function's name becomes a terminal-title sequence, a kernel's a screen clear.
    let co = replaced(
        co,
        b"_Z14stage_exchangePfjfj",
        b"\x1b]0;pwn\x07\x1b[31m\x9b2J_xxxxxx",
    );
    let co = replaced(co, b"k_bar_reduce", b"k\x1b[2Jreducex");
    for args in [&["info"][..], &["dis"]] {
        let o = run(&co, args);
        assert_escaped(&format!("{args:?}"), &o, "\\u{1b}");
    }
}

#[test]
fn a_bundle_id_that_is_not_utf8_is_printed_escaped() {
    // Entry 1's id (31 bytes after its length at 0x66) gets a byte that is not UTF-8, an
    // escape and a NUL in place. (Lengthening the id instead runs it into the next entry's
    // header, and the bundle is then refused for the sizes read from there.)
    let mut b = fixture("bundles/calls-4arch__plain.hipfb");
    assert_eq!(b[0x66], 31, "entry 1's id length");
    assert_eq!(&b[0x6e..0x6e + 5], b"hipv4", "entry 1's id");
    b[0x6e + 5..0x6e + 8].copy_from_slice(&[0xff, 0x1b, 0x00]);
    let o = run(&b, &["info"]);
    assert_eq!(o.status.code(), Some(2));
    assert_escaped("info", &o, "is not UTF-8");
}

#[test]
fn a_section_name_byte_in_an_error_is_printed_escaped() {
    // `.shstrtab`'s sh_offset set to 0: section names are read from the ELF header, whose bytes
    // include control characters, and the overlap with the ELF header is an input error.
    let mut co = fixture("objects/gfx1100__barriers__O3.co");
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
    let shoff = u64_at(&co, 0x28) as usize;
    let shstrndx = usize::from(u16::from_le_bytes([co[0x3e], co[0x3f]]));
    let at = shoff + shstrndx * 64 + 0x18;
    co[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let o = run(&co, &["info"]);
    assert_eq!(o.status.code(), Some(2));
    assert_escaped("info", &o, "overlaps the ELF header");
}
