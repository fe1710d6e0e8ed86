//! "What the input says is the input's business" (issue 37 item A): a code object whose
//! metadata note disagrees with its kernel descriptor (hipBLASLt's `extop_gfx1201.co` Softmax
//! kernels: `.group_segment_fixed_size: 1024` in the note, 0 in the descriptor) is instrumented
//! with both values kept exactly as they are, and the disagreement is a warning in the reports;
//! a disagreement only the output has is still rejected by `sqtt-patch verify`.
//!
//! The inconsistent object is built at run time from a fixture, with our own `hsaco` editor:
//! the note of the first kernel says 512 bytes more LDS than its descriptor.

use assert_cmd::Command;

#[path = "support/asm.rs"]
mod asm;
use asm::verify;
use std::path::{Path, PathBuf};

const KEY: &str = ".group_segment_fixed_size";
const FIXTURE: &str = "gfx1100__barriers__O3.co";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(FIXTURE)
}

/// (note value, descriptor value) of `KEY` for kernel `name`.
fn values(bytes: &[u8], name: &str) -> (Option<u64>, u32) {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let k = co.kernels.iter().find(|k| k.name == name).unwrap();
    let (m, i) = co.kernel_metadata(k).expect("kernel in the note");
    (m.kernel_u64(i, KEY), k.descriptor.group_segment_fixed_size)
}

/// `bytes` with `KEY` of the first kernel's note entry set to `value` (the descriptor and
/// everything else as they were); returns the bytes and that kernel's name.
fn with_note_value(bytes: &[u8], value: impl Fn(u32) -> u64) -> (Vec<u8>, String) {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let k = &co.kernels[0];
    let (note, i) = k.metadata_index.expect("kernel in the note");
    let mut m = co.metadata[note].clone();
    m.set_kernel_u64(i, KEY, value(k.descriptor.group_segment_fixed_size))
        .unwrap();
    let mut ed = hsaco::CodeObjectEditor::new(&co);
    ed.set_metadata(m);
    (ed.write().unwrap(), k.name.clone())
}

/// The fixture with its first kernel's note saying 512 bytes more LDS than its descriptor,
/// written to `dir/inconsistent.co`.
fn inconsistent(dir: &Path) -> (PathBuf, String) {
    let (bytes, name) = with_note_value(&std::fs::read(fixture()).unwrap(), |d| u64::from(d) + 512);
    let (note, desc) = values(&bytes, &name);
    assert_eq!(note, Some(u64::from(desc) + 512));
    let p = dir.join("inconsistent.co");
    std::fs::write(&p, &bytes).unwrap();
    (p, name)
}

/// `input` instrumented with `--barriers 1` into `out`; returns the output's bytes.
fn barriers(input: &Path, out: &Path) -> Vec<u8> {
    Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(input)
        .arg("-o")
        .arg(out)
        .args(["--barriers", "1"])
        .assert()
        .success();
    std::fs::read(out).unwrap()
}

#[test]
fn an_inconsistency_of_the_input_is_kept_and_reported_as_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (input, name) = inconsistent(dir.path());
    let before = std::fs::read(&input).unwrap();
    // The verifier's own view: the input against itself has a warning, no finding.
    let v = sqtt_verify::verify(&before, &before).unwrap();
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);

    let out = dir.path().join("out.co");
    let json = dir.path().join("report.json");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .args([
            "--barriers",
            "1",
            "--functions",
            "1",
            "--report",
            "--report-json",
        ])
        .arg(&json)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(": instrumented;"), "{stdout}");
    let (note, desc) = values(&before, &name);
    let want = format!(
        "[metadata] {name}: {KEY} {} in the metadata note disagrees with the descriptor ({desc}), as in the input",
        note.unwrap()
    );
    // The human report (stdout) and the warning on stderr.
    assert!(
        stdout.contains(&format!(
            "  warning: the input is inconsistent (kept as it is): {want}"
        )),
        "{stdout}"
    );
    assert!(stderr.contains(&want), "{stderr}");
    // The JSON report.
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(notes.iter().any(|n| n.ends_with(&want)), "{notes:?}");
    // Both values exactly as they were: nothing repaired.
    let after = std::fs::read(&out).unwrap();
    assert_ne!(after, before);
    assert_eq!(values(&after, &name), (note, desc));
    // `verify` accepts the output and repeats the warning.
    let (code, text) = verify(&input, &out);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("warning: {want}")), "{text}");
}

#[test]
fn a_disagreement_only_the_output_has_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // A consistent input, instrumented; then the OUTPUT's note is made to disagree.
    let out = barriers(&fixture(), &dir.path().join("out.co"));
    let (broken, name) = with_note_value(&out, |d| u64::from(d) + 512);
    let bad = dir.path().join("broken.co");
    std::fs::write(&bad, &broken).unwrap();
    let (code, text) = verify(&fixture(), &bad);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("[metadata] {name}: {KEY} changed from")),
        "{text}"
    );
    assert!(text.contains("disagrees with the descriptor"), "{text}");
    assert!(!text.contains("as in the input"), "{text}");

    // An inconsistent input whose output disagrees differently (another note value), or was
    // "repaired" (the note made to agree): both are changes the rewrite made, rejected.
    let (input, _) = inconsistent(dir.path());
    let instrumented = barriers(&input, &dir.path().join("out2.co"));
    for (what, value) in [("other value", 2048u64), ("repaired", 0)] {
        let (bytes, _) =
            with_note_value(
                &instrumented,
                |d| if value == 0 { u64::from(d) } else { value },
            );
        std::fs::write(&bad, &bytes).unwrap();
        let (code, text) = verify(&input, &bad);
        assert_eq!(code, 1, "{what}: {text}");
        assert!(
            text.contains(&format!("[metadata] {name}: {KEY} changed from")),
            "{what}: {text}"
        );
    }
}
