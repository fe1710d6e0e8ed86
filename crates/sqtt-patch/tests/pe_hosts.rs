//! Windows PE images of the HIP SDK (issue 39 item 8): wrappers in `.hipFatB` whose pointers
//! are absolute virtual addresses at the image base (moved by DIR64 base relocations), bundles
//! in `.hip_fat`. `info` and `extract` read them; `--fatbin` refuses them (exit 2, nothing
//! written). Before this change every command said "neither an ELF file nor an offload bundle".
//!
//! The DLL is built here in a temporary directory: `clang-22 --target=x86_64-pc-windows-msvc -c`
//! and `lld-link-22 /dll /noentry`, at a non-default `/base`, from
//! `fixtures/bundles/calls-4arch__plain.hipfb` and `calls-4arch__ccob-v3-zstd.hipfb`. Oracles:
//! `llvm-objdump-22 -h` (section layout), `llvm-readobj-22 --coff-basereloc` (each wrapper
//! pointer is a DIR64 base relocation), `llvm-objcopy-22 --dump-section` and
//! `clang-offload-bundler-22 --list/--unbundle`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
/// Image base given to the linker (not the DLL default 0x180000000).
const BASE: u64 = 0x1_2340_0000;

/// Three wrappers: two name the plain bundle, one the compressed one.
const WRAPPERS_C: &str = r#"
struct hip_fatbin_wrapper { unsigned magic, version; const void *bundle; void *reserved; };
extern const char fx_bundle0[], fx_bundle1[];
__attribute__((used, section(".hipFatB"), aligned(8)))
const struct hip_fatbin_wrapper fx_wrappers[3] = {
  {0x48495046, 1, fx_bundle0, 0},
  {0x48495046, 1, fx_bundle0, 0},
  {0x48495046, 1, fx_bundle1, 0},
};
"#;

const BUNDLES_S: &str = r#"
  .section .hip_fat,"dr"
  .p2align 12
  .globl fx_bundle0
fx_bundle0:
  .incbin "b0.hipfb"
  .p2align 12
  .globl fx_bundle1
fx_bundle1:
  .incbin "b1.hipfb"
"#;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn run(c: &mut Command) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

fn sqtt(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run sqtt-patch")
}

/// Builds `fx.dll` in `d`.
fn build(d: &Path) -> PathBuf {
    std::fs::copy(
        fixture("bundles/calls-4arch__plain.hipfb"),
        d.join("b0.hipfb"),
    )
    .expect("copy");
    std::fs::copy(
        fixture("bundles/calls-4arch__ccob-v3-zstd.hipfb"),
        d.join("b1.hipfb"),
    )
    .expect("copy");
    std::fs::write(d.join("w.c"), WRAPPERS_C).expect("write");
    std::fs::write(d.join("b.s"), BUNDLES_S).expect("write");
    for (src, obj) in [("w.c", "w.obj"), ("b.s", "b.obj")] {
        run(Command::new("clang-22").current_dir(d).args([
            "--target=x86_64-pc-windows-msvc",
            "-c",
            src,
            "-o",
            obj,
        ]));
    }
    run(Command::new("lld-link-22").current_dir(d).args([
        "/dll",
        "/noentry",
        "/nodefaultlib",
        "/opt:noref",
        &format!("/base:{BASE:#x}"),
        "/out:fx.dll",
        "w.obj",
        "b.obj",
    ]));
    d.join("fx.dll")
}

/// Virtual address of section `name` (`llvm-objdump-22 -h`).
fn section_vma(dll: &Path, name: &str) -> u64 {
    let h = text(&run(Command::new("llvm-objdump-22").arg("-h").arg(dll)).stdout);
    let line = h
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {h}"));
    let vma = line.split_whitespace().nth(3).expect("vma");
    u64::from_str_radix(vma, 16).expect("hex")
}

/// Ids listed and the object unbundled for `id` by `clang-offload-bundler-22` from `bundle`.
fn unbundle(d: &Path, bundle: &Path, id: &str) -> (Vec<String>, Vec<u8>) {
    let list = run(Command::new("clang-offload-bundler-22")
        .args(["--list", "--type=o"])
        .arg(format!("--input={}", bundle.display())));
    let out = d.join(format!("{}.{id}.co", bundle.display()));
    run(Command::new("clang-offload-bundler-22")
        .args(["--unbundle", "--type=o", &format!("--targets={id}")])
        .arg(format!("--input={}", bundle.display()))
        .arg(format!("--output={}", out.display())));
    let ids = text(&list.stdout).lines().map(String::from).collect();
    (ids, std::fs::read(out).expect("unbundled"))
}

#[test]
fn pe_dll_is_read_by_info_and_extract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let dll = build(d);
    // The fixture is laid out as the HIP SDK's: wrappers at .hipFatB, their pointer words
    // DIR64 base relocations, the bundles in .hip_fat.
    let wrappers = section_vma(&dll, ".hipFatB");
    assert!(section_vma(&dll, ".hip_fat") > BASE);
    let relocs = text(
        &run(Command::new("llvm-readobj-22")
            .arg("--coff-basereloc")
            .arg(&dll))
        .stdout,
    );
    for i in 0..3 {
        let rva = wrappers + 24 * i + 8 - BASE;
        assert!(
            relocs.contains(&format!("Address: 0x{rva:X}\n")),
            "DIR64 at {rva:#x}: {relocs}"
        );
    }

    let info = sqtt(&["info".as_ref(), dll.as_os_str()]);
    assert!(info.status.success(), "{}", text(&info.stderr));
    let t = text(&info.stdout);
    assert!(
        t.contains("Windows PE (x64) host binary, 8 code object(s)"),
        "{t}"
    );

    let x = d.join("x");
    let e = sqtt(&[
        "extract".as_ref(),
        dll.as_os_str(),
        "-o".as_ref(),
        x.as_os_str(),
    ]);
    assert!(e.status.success(), "{}", text(&e.stderr));
    // Bundle 0 from the linked image's .hip_fat (its first bundle), bundle 1 from its input.
    let dump = d.join("hip_fat.bin");
    run(Command::new("llvm-objcopy-22")
        .arg(format!("--dump-section=.hip_fat={}", dump.display()))
        .arg(&dll)
        .arg(d.join("copy.dll")));
    for (bi, bundle) in [(0, dump), (1, d.join("b1.hipfb"))] {
        for t in ["gfx90a", "gfx942", "gfx1100", "gfx1201"] {
            let id = format!("hipv4-amdgcn-amd-amdhsa--{t}");
            let (ids, co) = unbundle(d, &bundle, &id);
            assert_eq!(ids.len(), 5, "{ids:?}");
            let ours = std::fs::read(x.join(format!("{bi}-{id}.co"))).expect("extracted");
            assert_eq!(ours, co, "bundle {bi} {id}");
        }
    }
}

#[test]
fn pe_dll_fatbin_is_refused_and_bad_pointers_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let dll = build(d);
    let out = d.join("out.dll");
    let p = sqtt(&[
        "--fatbin".as_ref(),
        dll.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(p.status.code(), Some(2), "{}", text(&p.stderr));
    assert!(
        text(&p.stderr).contains("writing PE is not supported"),
        "{}",
        text(&p.stderr)
    );
    assert!(!out.exists() && p.stdout.is_empty());

    // A wrapper pointer below the image base: the pointer field's file offset is named.
    let mut bytes = std::fs::read(&dll).expect("read");
    let at = bytes
        .windows(8)
        .position(|w| w == b"FPIH\x01\0\0\0")
        .expect("wrapper");
    bytes[at + 8..at + 16].copy_from_slice(&0x1000u64.to_le_bytes());
    let bad = d.join("bad.dll");
    std::fs::write(&bad, bytes).expect("write");
    let o = sqtt(&["info".as_ref(), bad.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("{:#x}", at + 8)) && err.contains("ImageBase"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn truncated_pe_dll_never_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let bytes = std::fs::read(build(d)).expect("read");
    // lld-link-22 puts .hipFatB at file offset 0x400 and .hip_fat at 0x600 (bundle 1 from
    // 0x10600 to 0x12d9c): cut inside the DOS and PE headers, the section table, the wrappers,
    // bundle 0 and bundle 1.
    let sections = text(
        &run(Command::new("llvm-readobj-22")
            .arg("--sections")
            .arg(d.join("fx.dll")))
        .stdout,
    );
    assert!(
        sections.contains("PointerToRawData: 0x600") && bytes.len() > 0x12e00,
        "{sections}"
    );
    for len in [2, 64, 0x100, 0x300, 0x410, 0x700, 0x11000] {
        let f = d.join(format!("cut{len}.dll"));
        std::fs::write(&f, &bytes[..len]).expect("write");
        let x = d.join(format!("x{len}"));
        let runs: [&[&std::ffi::OsStr]; 2] = [
            &["info".as_ref(), f.as_os_str()],
            &[
                "extract".as_ref(),
                f.as_os_str(),
                "-o".as_ref(),
                x.as_os_str(),
            ],
        ];
        for args in runs {
            let cmd = args[0].to_string_lossy();
            let o = sqtt(args);
            let err = text(&o.stderr);
            assert!(!err.contains("panicked"), "{cmd} {len}: {err}");
            assert_eq!(o.status.code(), Some(2), "{cmd} {len}: {err}");
        }
    }
}
