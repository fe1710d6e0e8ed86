//! Writing code objects back: identity rewrite of every bare corpus object (byte-equal), and a
//! 64 KiB `.text` growth checked with llvm-readelf-22 / llvm-objdump-22 and by re-parsing.

mod common;

use hsaco::{CodeObject, CodeObjectEditor};

#[test]
fn identity_rewrite_is_byte_equal_for_every_bare_object() {
    let mut n = 0;
    for path in common::bare_objects() {
        let bytes = std::fs::read(&path).expect("read");
        let co = CodeObject::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let out = CodeObjectEditor::new(&co).write().expect("write");
        assert!(out == bytes, "{}: identity rewrite differs", path.display());
        // Re-encoding an unchanged metadata tree is byte-identical too.
        let mut ed = CodeObjectEditor::new(&co);
        for m in &co.metadata {
            ed.set_metadata(m.clone());
        }
        assert!(
            ed.write().expect("write") == bytes,
            "{}: metadata re-encode differs",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 100, "only {n} objects");
}

fn symbols(tool_out: &str) -> Vec<(String, String, String)> {
    // llvm-readelf --syms rows: Num: Value Size Type Bind Vis Ndx Name
    tool_out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[0].ends_with(':') && f[1].len() == 16)
                .then(|| (f[7].to_string(), f[1].to_string(), f[3].to_string()))
        })
        .collect()
}

fn grow(path: &std::path::Path, extra: usize) {
    let bytes = std::fs::read(path).expect("read");
    let co = CodeObject::parse(&bytes).expect("parse");
    let text = co.text().expect(".text").clone();
    let mut new_text = co.section_data(&text).to_vec();
    for _ in 0..extra / 4 {
        new_text.extend_from_slice(&0xbf80_0000u32.to_le_bytes()); // s_nop 0
    }
    let mut ed = CodeObjectEditor::new(&co);
    ed.set_text(new_text).expect("set text");
    let layout = ed.layout().expect("layout");
    let out = ed.write().expect("write");
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("grown.co");
    std::fs::write(&p, &out).expect("write file");

    // Our own reader accepts it; kernels keep entries; data symbols move with their sections.
    let co2 = CodeObject::parse(&out).expect("re-parse");
    assert_eq!(co2.kernels.len(), co.kernels.len());
    for (a, b) in co.kernels.iter().zip(&co2.kernels) {
        assert_eq!(a.entry, b.entry, "{} entry", a.name);
        assert_eq!(b.kd_address, layout.map_address(a.kd_address));
    }
    assert_eq!(co2.text().expect("text").size, text.size + extra as u64);

    if common::no_llvm() {
        return;
    }
    let (ok, ra, err) = common::run("llvm-readelf", &["-a".as_ref(), p.as_os_str()]);
    assert!(
        ok && !err.contains("warning") && !err.contains("error"),
        "{}: readelf: {err}",
        path.display()
    );
    let (_, orig_ra, _) = common::run("llvm-readelf", &["-a".as_ref(), path.as_os_str()]);
    // Same symbol names and types; values equal for symbols before .text's end, shifted after.
    let (s1, s2) = (symbols(&orig_ra), symbols(&ra));
    assert_eq!(s1.len(), s2.len());
    for (a, b) in s1.iter().zip(&s2) {
        assert_eq!((&a.0, &a.2), (&b.0, &b.2));
        let va = u64::from_str_radix(&a.1, 16).expect("hex");
        let vb = u64::from_str_radix(&b.1, 16).expect("hex");
        if va != 0 {
            assert_eq!(vb, layout.map_address(va), "symbol {}", a.0);
        }
    }
    let (ok, dis, err) = common::run("llvm-objdump", &["-d".as_ref(), p.as_os_str()]);
    assert!(
        ok && !err.contains("warning"),
        "{}: objdump: {err}",
        path.display()
    );
    let nops = dis
        .lines()
        .filter(|l| l.trim_start().starts_with("s_nop 0"))
        .count();
    assert!(
        nops >= extra / 4,
        "{}: only {nops} s_nop in disassembly",
        path.display()
    );
    for k in &co.kernels {
        assert!(
            dis.contains(&format!("<{}>:", k.name)),
            "kernel {} label missing",
            k.name
        );
    }
    let (ok, _, err) = common::run(
        "llvm-readelf",
        &["-d".as_ref(), "-r".as_ref(), "-l".as_ref(), p.as_os_str()],
    );
    assert!(ok && err.is_empty(), "{err}");
}

#[test]
fn grow_text_by_64k_of_s_nop() {
    let c = common::corpus();
    for f in [
        "compiled/gfx1100__hip-mini__O3.co",
        "compiled/gfx942__hip-mini__O3-g.co",
        "compiled/gfx90a__ocl-deb52-devlibs__O3-cov5.co",
        "compiled/gfx1250__hip-mini__O0.co",
        "triton/gfx950__triton-3.9.0__matmul.hsaco",
    ] {
        grow(&c.join(f), 64 * 1024);
        grow(&c.join(f), 256); // fits in the address gap
    }
}

#[test]
fn grown_metadata_note_and_new_funcmap_section() {
    let c = common::corpus();
    let path = c.join("compiled/gfx1100__hip-mini__O3.co");
    let bytes = std::fs::read(&path).expect("read");
    let co = CodeObject::parse(&bytes).expect("parse");
    let mut md = co.metadata.first().cloned().expect("metadata");
    let k = md.kernel_index("vadd.kd").expect("vadd in metadata");
    md.set_kernel_u64(k, ".vgpr_count", 77).expect("set");
    md.set_kernel_u64(k, ".sqtt_test_key_with_a_long_name_to_grow_the_note", 1)
        .expect("set");
    let mut ed = CodeObjectEditor::new(&co);
    ed.set_metadata(md);
    ed.add_or_replace_section(".sqtt_funcmap", 1, 0, 1, b"F:1:foo\n\0".to_vec())
        .expect("add");
    let out = ed.write().expect("write");
    let co2 = CodeObject::parse(&out).expect("re-parse");
    let md2 = co2.metadata.first().expect("metadata");
    assert_eq!(
        md2.kernel_u64(md2.kernel_index("vadd.kd").expect("vadd"), ".vgpr_count"),
        Some(77)
    );
    assert_eq!(co2.funcmap(), Some(&b"F:1:foo\n\0"[..]));
    for (a, b) in co.kernels.iter().zip(&co2.kernels) {
        assert_eq!(a.entry, b.entry);
    }
    if common::no_llvm() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("md.co");
    std::fs::write(&p, &out).expect("write");
    let (ok, ra, err) = common::run(
        "llvm-readelf",
        &["-a".as_ref(), "--notes".as_ref(), p.as_os_str()],
    );
    assert!(ok && err.is_empty(), "{err}");
    assert!(
        ra.contains(".vgpr_count:     77"),
        "readelf does not show the new vgpr count"
    );
    assert!(ra.contains(".sqtt_funcmap"));
    let (ok, _, err) = common::run("llvm-objdump", &["-d".as_ref(), p.as_os_str()]);
    assert!(ok && err.is_empty(), "{err}");
}
