//! `sqtt-patch exec`, end to end: the command sets `HSA_TOOLS_LIB` and the `SQTT_*` variables,
//! and the driver that plays ROCr loads the tools listed there in order, as ROCr does; once as
//! a program, once inside a Python application that loads it with ctypes (as Python frameworks
//! load the ROCm runtime).

mod support;

use std::ffi::OsStr;
use support::{expected, fixture, run_as, sqtt_patch};

const FEATURES: [(&str, &str); 2] = [
    ("SQTT_INSTRUMENT_FUNCTIONS", "1"),
    ("SQTT_INSTRUMENT_BARRIERS", "1"),
];

fn loads() -> (Vec<std::path::PathBuf>, Vec<String>) {
    let objs = vec![
        fixture("objects/gfx1100__barriers__O3.co"),
        fixture("objects/gfx950__calls__O3.co"),
    ];
    let loads = vec![
        format!("mem:{}", objs[0].display()),
        format!("slice:{}", objs[1].display()),
    ];
    (objs, loads)
}

fn check(r: &support::Run, objs: &[std::path::PathBuf]) {
    assert_eq!(r.onload, Some(true), "{}", r.stderr);
    assert_eq!(r.loads.len(), objs.len());
    for (l, o) in r.loads.iter().zip(objs) {
        let input = std::fs::read(o).unwrap();
        let want = expected(&input, &FEATURES);
        assert_eq!(l.kind, "memory");
        assert!(
            l.bytes == want.bytes,
            "{}: not the command line's bytes",
            l.name
        );
        let v = sqtt_verify::verify(&input, &l.bytes).unwrap();
        assert!(v.findings.is_empty(), "{:?}", v.findings);
    }
    assert!(
        r.stderr
            .contains("sqtt-patch-tool: 2 code objects seen, 2 instrumented"),
        "{}",
        r.stderr
    );
}

#[test]
fn exec_runs_the_application_with_the_tool_appended_to_other_tools() {
    let (objs, loads) = loads();
    let bin = sqtt_patch();
    let saved = tempfile::tempdir().unwrap();
    let launcher = [
        bin.as_os_str(),
        OsStr::new("exec"),
        OsStr::new("--functions"),
        OsStr::new("1"),
        OsStr::new("--barriers"),
        OsStr::new("1"),
        OsStr::new("--save"),
        saved.path().as_os_str(),
        OsStr::new("--"),
        support::driver().as_os_str(),
    ];
    // Another tool listed first (absent here: ROCr skips it and names it to the next tools).
    let r = run_as(
        &launcher,
        OsStr::new("-"),
        &[],
        &loads,
        &[("HSA_TOOLS_LIB", "libabsent-other-tool.so")],
    );
    assert_eq!(r.onload_failed, vec!["libabsent-other-tool.so".to_string()]);
    check(&r, &objs);
    // The saved pairs pass `sqtt-patch verify`, the command users run on them.
    for (l, o) in r.loads.iter().zip(&objs) {
        let h = &sqtt_patch_tool::cache::sha256_hex(&std::fs::read(o).unwrap())[..16];
        let orig = saved.path().join(format!("{h}.orig.co"));
        let instr = saved.path().join(format!("{h}.instr.co"));
        assert_eq!(std::fs::read(&instr).unwrap(), l.bytes);
        let out = std::process::Command::new(bin)
            .arg("verify")
            .arg(&orig)
            .arg(&instr)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sqtt-patch verify {}: {}",
            instr.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn a_python_application_loading_the_runtime_with_ctypes_is_instrumented() {
    let (objs, loads) = loads();
    let bin = sqtt_patch();
    let app = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/driver/app.py");
    let launcher = [
        bin.as_os_str(),
        OsStr::new("exec"),
        OsStr::new("--functions"),
        OsStr::new("1"),
        OsStr::new("--barriers"),
        OsStr::new("1"),
        OsStr::new("--"),
        OsStr::new("python3"),
        app.as_os_str(),
        support::driver_library().as_os_str(),
    ];
    let r = run_as(&launcher, OsStr::new("-"), &[], &loads, &[]);
    check(&r, &objs);
}

#[test]
fn exec_returns_the_command_exit_code_and_prints_the_tool_path() {
    let bin = sqtt_patch();
    let out = std::process::Command::new(bin)
        .args(["exec", "--print-tool-path"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        std::path::Path::new(printed.trim()),
        std::fs::canonicalize(support::tool()).unwrap()
    );
    let st = std::process::Command::new(bin)
        .args(["exec", "--barriers", "1", "--", "sh", "-c", "exit 7"])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(7));
    let out = std::process::Command::new(bin)
        .args(["exec", "--print-tool-path"])
        .env("SQTT_PATCH_TOOL", "no-such-dir/libsqtt_patch_tool.so")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the tools library is missing"), "{err}");
}
