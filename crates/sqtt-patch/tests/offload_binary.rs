//! `info`, `extract` and `--fatbin` on LLVM offload binaries and `.llvm.offloading` host
//! objects (issue 32 item 14), built in a temporary directory with `clang-offload-packager-22`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name)
}

const A: &str = "gfx10-1-generic__barriers__O0.co";
const B: &str = "gfx11-generic__barriers__O3.co";

fn ok(c: &mut Command) {
    assert!(c.status().expect("run tool").success(), "{c:?}");
}

/// `packed.bin` (two images) and `host.o` (an x86-64 object with it in `.llvm.offloading`).
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = dir.join("packed.bin");
    ok(Command::new("clang-offload-packager-22")
        .arg("-o")
        .arg(&bin)
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx1010,kind=hip",
            fixture(A).display()
        ))
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx1100,kind=hip",
            fixture(B).display()
        )));
    std::fs::write(dir.join("e.c"), "int x;\n").expect("write");
    ok(Command::new("clang-22")
        .current_dir(dir)
        .args(["-c", "e.c", "-o", "e.o"]));
    ok(Command::new("llvm-objcopy-22").current_dir(dir).args([
        "--add-section=.llvm.offloading=packed.bin",
        "--set-section-flags",
        ".llvm.offloading=exclude",
        "e.o",
        "host.o",
    ]));
    (bin, dir.join("host.o"))
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run sqtt-patch")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn info_and_extract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (bin, host) = build(dir.path());
    for (f, kind) in [(&host, "x86-64 host binary"), (&bin, "LLVM offload binary")] {
        let o = run(&["info".as_ref(), f.as_os_str()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains(&format!("{kind}, 2 code object(s)")), "{out}");
        assert!(
            out.contains(
                "offload-amdgcn-amd-amdhsa--gfx1010 (bundle 0 entry 0, cov6, target gfx10-1-generic"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "offload-amdgcn-amd-amdhsa--gfx1100 (bundle 1 entry 0, cov6, target gfx11-generic"
            ),
            "{out}"
        );
        let x = dir
            .path()
            .join(format!("x-{}", f.file_name().unwrap().to_string_lossy()));
        let o = run(&[
            "extract".as_ref(),
            f.as_os_str(),
            "-o".as_ref(),
            x.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        for (name, src) in [
            ("0-offload-amdgcn-amd-amdhsa--gfx1010.co", A),
            ("1-offload-amdgcn-amd-amdhsa--gfx1100.co", B),
        ] {
            let got = std::fs::read(x.join(name)).expect("extracted");
            assert!(
                got == std::fs::read(fixture(src)).expect("fixture"),
                "{name}"
            );
        }
    }
}

#[test]
fn corrupt_and_fatbin_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (bin, host) = build(dir.path());
    let bytes = std::fs::read(&bin).expect("read");
    let t = dir.path().join("trunc.bin");
    std::fs::write(&t, &bytes[..100]).expect("write");
    for cmd in ["info", "extract"] {
        let x = dir.path().join("xt");
        let o = run(&[cmd.as_ref(), t.as_os_str(), "-o".as_ref(), x.as_os_str()]
            [..if cmd == "info" { 2 } else { 4 }]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let e = text(&o.stderr);
        assert!(
            e.contains(
                "trunc.bin: cannot parse: malformed offload binary at offset 0x8: binary size"
            ),
            "{e}"
        );
        assert!(!e.contains("panicked"), "{e}");
        assert!(!x.exists());
    }
    for f in [&host, &bin] {
        let out = dir.path().join("out");
        let o = run(&[
            "--fatbin".as_ref(),
            "--barriers".as_ref(),
            "1".as_ref(),
            f.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2));
        let e = text(&o.stderr);
        assert!(
            e.contains("writing .llvm.offloading (LLVM offload binaries) is not supported")
                || e.contains("writing LLVM offload binaries is not supported"),
            "{e}"
        );
        assert!(!out.exists());
    }
}

/// An `-fgpu-rdc` object of the new driver holds LLVM IR, not code objects: `info` says so.
#[test]
fn llvm_ir_images_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ll = dir.path().join("k.bc");
    std::fs::write(&ll, b"BC\xc0\xde not really bitcode").expect("write");
    let bin = dir.path().join("ir.bin");
    ok(Command::new("clang-offload-packager-22")
        .arg("-o")
        .arg(&bin)
        .arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx1100,kind=hip",
            ll.display()
        )));
    let o = run(&["info".as_ref(), bin.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("LLVM offload binary, 0 code object(s)"),
        "{out}"
    );
    assert!(
        out.contains("note: 1 offload image(s) that are not AMDGPU code objects"),
        "{out}"
    );
}
