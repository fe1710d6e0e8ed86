//! gfx940 and gfx941 (`EF_AMDGPU_MACH` 0x40 and 0x4b): MI300 pre-production processors LLVM
//! no longer lists, whose code objects still ship (jax's ROCm 6.0 plugin wheels). They are read
//! with the gfx942 instruction set and named as what they are. Fixtures
//! `fixtures/retired/gfx94{0,1}__barriers__O3.co`: `objects/gfx942__barriers__O3.co` with the
//! mach byte and the metadata's processor name patched (tools/retarget_object.py).

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(dir)
        .join(name)
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `info` names the processor; the object is instrumented like its gfx942 original (same
/// report but for the name, same output but for the two patched bytes) and verified; the
/// function map of the output names the processor.
#[test]
fn gfx940_and_gfx941_are_instrumented_as_gfx942() {
    let dir = tempfile::tempdir().unwrap();
    let orig = fixture("objects", "gfx942__barriers__O3.co");
    let orig_out = dir.path().join("gfx942.co");
    let flags = ["--functions", "1", "--barriers", "1", "--report"];
    let mut args: Vec<&std::ffi::OsStr> =
        vec![orig.as_os_str(), "-o".as_ref(), orig_out.as_os_str()];
    args.extend(flags.iter().map(std::ffi::OsStr::new));
    let (code, orig_report, _) = run(&args);
    assert_eq!(code, 0, "{orig_report}");
    let orig_bytes = std::fs::read(&orig_out).unwrap();
    for (t, mach) in [("gfx940", "0x40"), ("gfx941", "0x4b")] {
        let co = fixture("retired", &format!("{t}__barriers__O3.co"));
        let (code, info, err) = run(&["info".as_ref(), co.as_os_str(), "--json".as_ref()]);
        assert_eq!(code, 0, "{t}: {err}");
        let v: serde_json::Value = serde_json::from_str(&info).expect("info --json");
        let text = v.to_string();
        assert!(
            text.contains(&format!("\"processor\":\"{t}\"")),
            "{t}: {text}"
        );
        assert!(!text.contains("gfx942"), "{t}: {text}");
        let (_, info_text, _) = run(&["info".as_ref(), co.as_os_str()]);
        assert!(info_text.contains(t), "{t}: {info_text}");

        let out = dir.path().join(format!("{t}.co"));
        let mut args: Vec<&std::ffi::OsStr> = vec![co.as_os_str(), "-o".as_ref(), out.as_os_str()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let (code, report, _) = run(&args);
        assert_eq!(code, 0, "{t}: {report}");
        assert!(
            report.contains(&format!("target {t}: instrumented;")),
            "{t}: {report}"
        );
        let norm = |r: &str, i: &Path, o: &Path, name: &str| {
            r.replace(o.to_str().unwrap(), "OUT")
                .replace(i.to_str().unwrap(), "IN")
                .replace(name, "gfx942")
        };
        assert_eq!(
            norm(&report, &co, &out, t),
            norm(&orig_report, &orig, &orig_out, "gfx942"),
            "{t}: the report differs from gfx942's"
        );
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes.len(), orig_bytes.len(), "{t}");
        let differ: Vec<usize> = (0..bytes.len())
            .filter(|&i| bytes[i] != orig_bytes[i])
            .collect();
        assert_eq!(
            differ.len(),
            2,
            "{t}: output differs from gfx942's at {differ:x?}"
        );
        assert_eq!(differ[0], 0x30, "{t}: e_flags");
        assert_eq!(format!("{:#x}", bytes[0x30]), mach);

        let (code, _, err) = run(&["verify".as_ref(), co.as_os_str(), out.as_os_str()]);
        assert_eq!(code, 0, "{t}: verify: {err}");
        let (code, map, err) = run(&["funcmap".as_ref(), out.as_os_str(), "--json".as_ref()]);
        assert_eq!(code, 0, "{t}: funcmap: {err}");
        assert!(!map.contains("gfx942"), "{t}: {map}");
    }
}
