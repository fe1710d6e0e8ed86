//! `sqtt-patch extract FILE -o DIR` writes each code object as every other output is written
//! (issue 32 item 5, `output.rs`): every destination is checked before the first is written,
//! and each file goes through a temporary file renamed when complete, so a write error leaves
//! no truncated `.co` and no temporary file.

#[allow(dead_code)] // device_nodes is not used here
mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::names_in;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sqtt-patch extract IN -o OUT` through `sh`, with `limit` (`ulimit -f`, in the shell's
/// blocks) as the largest file the run may write and SIGXFSZ ignored, so that a write past it
/// fails with EFBIG ("File too large") instead of killing the process.
fn extract(input: &Path, out: &Path, limit: Option<u32>) -> Output {
    let limit = limit.map_or(String::new(), |n| format!("ulimit -f {n}; "));
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("trap '' XFSZ; {limit}exec \"$0\" \"$@\""))
        .arg(BIN)
        .args([
            "extract",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .expect("run sh");
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    o
}

#[test]
fn a_failed_extract_leaves_no_partial_file() {
    let t = tempfile::tempdir().unwrap();
    let bundle = fixture("bundles/calls-4arch__plain.hipfb");
    let ok = t.path().join("ok");
    let o = extract(&bundle, &ok, None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let names = names_in(&ok);
    assert_eq!(names.len(), 4, "{names:?}");

    // A write error in the middle of a file (the file-size limit, 4 KiB or 8 KiB depending on
    // the shell, is below every object's ~15 KB): no truncated file, no temporary file.
    let lim = t.path().join("lim");
    let o = extract(&bundle, &lim, Some(8));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("-o {}/", lim.display()))
            && err.contains(".co: cannot write: File too large"),
        "{err}"
    );
    // Nothing was written: no truncated file, and the directory the run made is gone.
    assert!(!lim.exists(), "{:?}", names_in(&lim));
    // The same into an existing directory: the directory stays, empty.
    std::fs::create_dir_all(&lim).unwrap();
    let o = extract(&bundle, &lim, Some(8));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(names_in(&lim).is_empty(), "{:?}", names_in(&lim));

    // One output name is already a non-empty directory: refused before anything is written,
    // naming it; the directory is kept as it was.
    let dir = t.path().join("dir");
    let taken = dir.join(&names[2]);
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("keep"), b"x").unwrap();
    let o = extract(&bundle, &dir, None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("-o {}: is a directory", taken.display())),
        "{}",
        stderr(&o)
    );
    assert_eq!(names_in(&dir), [names[2].clone()]);
    assert_eq!(names_in(&taken), ["keep"]);
}
