//! `--keep-text` (docs/left-alone.md, "kept in place"): `.text` stays where it is and the
//! instrumented functions go to a new executable segment, on every bundled real object with
//! every feature that combines (the second CI batch's set): each output verifies, keeps the
//! input's `.text` byte for byte (llvm-objcopy-22) and loads its new section as the last
//! `PT_LOAD`, read + execute (llvm-readelf-22). The rewriter does the same by itself for an
//! object with a function that cannot move (`sqtt-rewrite/tests/kept_in_place.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Bytes of section `name` of `file`, dumped by llvm-objcopy-22.
fn section(file: &Path, name: &str, dir: &Path) -> Vec<u8> {
    let out = dir.join("section.bin");
    let o = Command::new("/usr/lib/llvm-22/bin/llvm-objcopy")
        .arg(format!("--dump-section={name}={}", out.display()))
        .arg(file)
        .arg(dir.join("objcopy-out.co"))
        .output()
        .expect("run llvm-objcopy-22");
    assert!(
        o.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(&out).expect("dumped section")
}

#[test]
fn every_fixture_object_verifies_with_text_kept_in_place() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let objects = workspace().join("fixtures/objects");
    let o = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("batch")
        .arg(&objects)
        .arg("-o")
        .arg(&out)
        .args([
            "--keep-text",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--kernel-scopes",
            "--trace-addresses",
            "memory,lds",
            "--scope",
            "--loops",
            "4",
        ])
        .output()
        .expect("run sqtt-patch batch");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("verifier rejected: 0"), "{stdout}");
    // Every object is instrumented but three with nothing to instrument (their sites skipped
    // for want of a free SGPR): none fails closed.
    assert!(
        stdout.contains("code objects: instrumented=310 nothing_to_do=3\n"),
        "{stdout}"
    );
    let mut checked = 0;
    for e in std::fs::read_dir(&objects).expect("fixtures/objects") {
        let input = e.expect("entry").path();
        if input.extension().is_none_or(|x| x != "co") {
            continue;
        }
        let output = out.join("objects").join(input.file_name().expect("name"));
        let (a, b) = (std::fs::read(&input), std::fs::read(&output));
        if a.as_ref().ok() == b.as_ref().ok() {
            continue; // nothing to do: written as it was
        }
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            section(&input, ".text", dir.path()),
            section(&output, ".text", dir.path()),
            "{}: .text changed",
            input.display()
        );
        let ph = Command::new("/usr/lib/llvm-22/bin/llvm-readelf")
            .args(["-lSW"])
            .arg(&output)
            .output()
            .expect("run llvm-readelf-22");
        let ph = String::from_utf8_lossy(&ph.stdout);
        let last_load = ph
            .lines()
            .rfind(|l| l.trim_start().starts_with("LOAD "))
            .unwrap_or_default();
        let new_addr = ph
            .lines()
            .find(|l| l.contains(" .sqtt_text "))
            .and_then(|l| l.split(".sqtt_text").nth(1))
            .and_then(|r| r.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("{}: no .sqtt_text in\n{ph}", output.display()));
        assert!(
            last_load.contains(&format!("0x{new_addr}")) && last_load.contains("R E 0x1000"),
            "{}: {last_load}",
            output.display()
        );
        checked += 1;
    }
    assert_eq!(checked, 310);
}

/// The human report says that `.text` was kept and how large the new section is (fresh tester,
/// session 18: it showed `.text 2176 -> 1708 bytes`, the new section's size as `.text`'s).
#[test]
fn the_report_says_text_was_kept_in_place() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let input = workspace().join("fixtures/objects/gfx1100__barriers__O3.co");
    let out = tmp.path().join("out.co");
    let o = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .args(["--keep-text", "--barriers", "1", "--report"])
        .output()
        .expect("run sqtt-patch");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let co = hsaco::CodeObject::parse(&std::fs::read(&out).expect("output")).expect("output");
    let new = co.section(".sqtt_text").expect(".sqtt_text");
    let want = format!(
        "instrumented; .text 2176 bytes kept in place, new .sqtt_text {} bytes;",
        new.size
    );
    assert!(stdout.contains(&want), "{stdout}");
}
