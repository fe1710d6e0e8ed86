//! LLVM offload binaries (`.llvm.offloading`, issue 32 item 14), built in a temporary directory
//! by `clang-offload-packager-22` from fixture code objects.

use hsaco::container::{open, InputKind};
use hsaco::offload;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name)
}

const A: &str = "gfx10-1-generic__barriers__O0.co";
const B: &str = "gfx11-generic__barriers__O3.co";

/// Runs the packager with `--image` specs; returns the output bytes.
fn pack(dir: &Path, images: &[(&str, &str)]) -> Vec<u8> {
    let out = dir.join("packed.bin");
    let mut c = Command::new("clang-offload-packager-22");
    c.arg("-o").arg(&out);
    for (co, arch) in images {
        c.arg(format!(
            "--image=file={},triple=amdgcn-amd-amdhsa,arch={arch},kind=hip",
            fixture(co).display()
        ));
    }
    let st = c.status().expect("run clang-offload-packager-22");
    assert!(st.success());
    std::fs::read(out).expect("read packed")
}

#[test]
fn one_image() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = pack(dir.path(), &[(A, "gfx1010")]);
    let imgs = offload::parse_all(&bin, 0).expect("parse");
    assert_eq!(imgs.len(), 1);
    let co = std::fs::read(fixture(A)).expect("read");
    assert_eq!(imgs[0].data, co);
    assert_eq!(imgs[0].triple(), "amdgcn-amd-amdhsa");
    assert_eq!(imgs[0].arch(), "gfx1010");
    assert_eq!(imgs[0].version, 1);
    assert_eq!(imgs[0].offload_kind, 4);
    let (kind, cos) = open(&bin, 1 << 30).expect("open");
    assert_eq!(kind, InputKind::Bundle);
    assert_eq!(cos.len(), 1);
    assert_eq!(cos[0].id, "offload-amdgcn-amd-amdhsa--gfx1010");
    assert_eq!(cos[0].data, co);
}

#[test]
fn two_images_and_host_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = pack(dir.path(), &[(A, "gfx1010"), (B, "gfx1100")]);
    let imgs = offload::parse_all(&bin, 0).expect("parse");
    assert_eq!(imgs.len(), 2);
    assert_eq!(imgs[1].binary_offset % 8, 0);
    assert_eq!(imgs[1].arch(), "gfx1100");
    assert_eq!(imgs[1].data, std::fs::read(fixture(B)).expect("read"));

    // Into a host object, as the new offload driver does.
    let c = dir.path().join("e.c");
    std::fs::write(&c, "int x;\n").expect("write");
    let o = dir.path().join("e.o");
    assert!(Command::new("clang-22")
        .args(["-c", "-o"])
        .arg(&o)
        .arg(&c)
        .status()
        .expect("clang-22")
        .success());
    let host = dir.path().join("host.o");
    assert!(Command::new("llvm-objcopy-22")
        .arg(format!(
            "--add-section=.llvm.offloading={}",
            dir.path().join("packed.bin").display()
        ))
        .args(["--set-section-flags", ".llvm.offloading=exclude"])
        .arg(&o)
        .arg(&host)
        .status()
        .expect("llvm-objcopy-22")
        .success());
    let h = std::fs::read(&host).expect("read host");
    let (kind, cos) = open(&h, 1 << 30).expect("open host");
    assert_eq!(kind, InputKind::Host);
    assert_eq!(cos.len(), 2);
    assert_eq!(cos[0].data, imgs[0].data);
    assert_eq!(cos[1].data, imgs[1].data);
    assert_eq!(cos[1].bundle_index, 1);
    assert!(cos[1].bundle_offset > cos[0].bundle_offset);
}

#[test]
fn truncated_and_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = pack(dir.path(), &[(A, "gfx1010")]);
    // Every truncation is an error, never a panic.
    for n in [4, 8, 31, 32, 71, 72, 0x90, bin.len() - 1] {
        let e = open(&bin[..n], 1 << 30).expect_err("truncated").to_string();
        assert!(e.contains("offload binary at offset"), "{n}: {e}");
    }
    // Corrupt fields: version, entry offset, string count, image size.
    for (at, v) in [
        (4usize, 9u64),
        (16, 1 << 40),
        (0x30, u64::MAX),
        (0x40, 1 << 20),
    ] {
        let mut c = bin.clone();
        let w = if at == 4 { 4 } else { 8 };
        c[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
        let e = offload::parse_all(&c, 0).expect_err("corrupt").to_string();
        assert!(
            e.starts_with("malformed offload binary at offset"),
            "{at}: {e}"
        );
    }
    // A string without its NUL terminator inside the binary.
    let mut c = bin.clone();
    c[0x50..0x58].copy_from_slice(&((bin.len() as u64) - 1).to_le_bytes());
    let last = c.len() - 1;
    c[last] = 0xff;
    assert!(offload::parse_all(&c, 0).is_err());
    // Trailing zero padding is ignored; anything else after a binary is an error.
    let mut c = bin.clone();
    c.extend_from_slice(&[0; 16]);
    assert_eq!(offload::parse_all(&c, 0).expect("padding").len(), 1);
    c.extend_from_slice(b"junk");
    let e = offload::parse_all(&c, 0).expect_err("junk").to_string();
    assert!(e.contains("magic is not 10 FF 10 AD"), "{e}");
}
