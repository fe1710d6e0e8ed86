//! Compressed DWARF (issue 39): Debian's ROCm builds mark every `.debug_*` section
//! `SHF_COMPRESSED`. A fixture with DWARF is compressed by llvm-objcopy-22 with zlib and with
//! zstd; the instrumented output must keep every compressed section compressed with the same
//! `ch_type`, pass `llvm-dwarfdump-22 --verify`, and, decompressed again by llvm-objcopy-22,
//! hold exactly the DWARF of the same fixture instrumented uncompressed.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const LLVM: &str = "/usr/lib/llvm-22/bin";
const DEBUG: [&str; 6] = [
    ".debug_info",
    ".debug_line",
    ".debug_abbrev",
    ".debug_rnglists",
    ".debug_str",
    ".debug_frame",
];

fn llvm(tool: &str, args: &[&str]) -> std::process::Output {
    let o = Command::new(Path::new(LLVM).join(tool))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(
        o.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The raw bytes of section `name` of `file`, or `None` when it has none.
fn section(dir: &Path, file: &Path, name: &str) -> Option<Vec<u8>> {
    let dump = dir.join(format!("{}{name}", file.file_name()?.to_string_lossy()));
    let junk = dir.join("junk.co");
    let st = Command::new(Path::new(LLVM).join("llvm-objcopy"))
        .arg(format!("--dump-section={name}={}", dump.display()))
        .arg(file)
        .arg(&junk)
        .output()
        .expect("llvm-objcopy-22");
    st.status
        .success()
        .then(|| std::fs::read(&dump).expect("dump"))
}

fn instrument(input: &Path, output: &Path) {
    let o = Command::new(BIN)
        .arg(input)
        .arg("-o")
        .arg(output)
        .args(["--functions", "1", "--barriers", "1"])
        .env_remove("SQTT_INSTRUMENT_MEMORY")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{}: {err}", input.display());
    assert!(!err.contains("DWARF"), "{}: {err}", input.display());
}

#[test]
fn compressed_debug_sections_are_remapped_and_stay_compressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/objects/gfx942__calls__O3-g.co");
    let reference = d.join("ref.co");
    instrument(&src, &reference);
    for (kind, ch_type) in [("zlib", 1u32), ("zstd", 2)] {
        let packed = d.join(format!("{kind}.co"));
        let (p, s) = (packed.to_str().unwrap(), src.to_str().unwrap());
        llvm(
            "llvm-objcopy",
            &[&format!("--compress-debug-sections={kind}"), s, p],
        );
        let out = d.join(format!("{kind}.out.co"));
        instrument(&packed, &out);
        let o = out.to_str().unwrap();
        llvm("llvm-dwarfdump", &["--verify", o]);
        let unpacked = d.join(format!("{kind}.unpacked.co"));
        llvm(
            "llvm-objcopy",
            &["--decompress-debug-sections", o, unpacked.to_str().unwrap()],
        );
        let mut compared = 0;
        for name in DEBUG {
            let (Some(input), Some(raw)) = (section(d, &packed, name), section(d, &out, name))
            else {
                continue;
            };
            let u32_at = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
            assert_eq!(u32_at(&input), ch_type, "{kind} {name}: input compressed");
            assert_eq!(u32_at(&raw), ch_type, "{kind} {name}: output keeps ch_type");
            assert_eq!(
                section(d, &unpacked, name),
                section(d, &reference, name),
                "{kind} {name}: decompressed output differs from the uncompressed run"
            );
            compared += 1;
        }
        assert!(compared >= 4, "{kind}: only {compared} sections compared");
        // Our verifier reads the compressed sections too.
        let v = Command::new(BIN)
            .args(["verify", p, o])
            .output()
            .expect("verify");
        assert_eq!(
            v.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&v.stdout)
        );
    }
}
