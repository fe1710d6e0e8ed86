//! Commands that print to standard output report a write error on it (`> /dev/full`) with a
//! message naming standard output and exit code 2, instead of exiting 0 with nothing written.
//! A closed pipe (`| head`) stays a success.

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(rel)
}

#[test]
fn stdout_on_dev_full_is_an_error() {
    let co = fixture("gfx942__calls__O3.co");
    let co = co.to_str().unwrap();
    // funcmap reads an instrumented object.
    let tmp = tempfile::tempdir().unwrap();
    let instr = tmp.path().join("i.co");
    let instr = instr.to_str().unwrap();
    let st = Command::new(BIN)
        .args([co, "-o", instr, "--functions", "1"])
        .env_remove("SQTT_INSTRUMENT_MEMORY")
        .status()
        .unwrap();
    assert!(st.success());
    // A full device of the test's own (root only), never the machine's /dev/full.
    let Some(devs) = support::device_nodes() else {
        return;
    };
    let node = devs.path().join("full");
    for args in [vec!["info", co], vec!["dis", co], vec!["funcmap", instr]] {
        let full = std::fs::OpenOptions::new().write(true).open(&node).unwrap();
        let o = Command::new(BIN).args(&args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("standard output: cannot write") && err.contains("No space left"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn closed_pipe_is_not_an_error() {
    let co = fixture("gfx942__calls__O3.co");
    let mut child = Command::new(BIN)
        .args(["dis", co.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
