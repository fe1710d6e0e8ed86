//! `sqtt-patch info` text: values a target does not have print as `-`, never as JSON `null`
//! (tester finding, session 3: gfx10+ descriptors have no SGPR field).

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

#[test]
fn absent_values_print_as_a_dash() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/objects");
    for (file, sgprs) in [
        ("gfx1100__calls__O3.co", "sgprs - [note: sgpr 36"),
        ("gfx942__asm__O3.co", "sgprs 40 [note: sgpr 38"),
    ] {
        let out = std::process::Command::new(BIN)
            .arg("info")
            .arg(dir.join(file))
            .output()
            .expect("run sqtt-patch info");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{file}");
        assert!(!text.contains("null"), "{file}: {text}");
        assert!(text.contains(sgprs), "{file}: {text}");
    }
}
