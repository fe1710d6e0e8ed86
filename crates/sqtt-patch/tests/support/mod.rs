//! Shared by the CLI tests that write to character devices.

/// Character devices `null` (1, 3) and `full` (1, 7) made with `mknod` in a temporary directory
/// of the test's own, so that no test writes through the machine's `/dev` (issue 30: a test once
/// replaced `/dev/stdout`). `None`, with the reason on stderr, when not run as root (only root
/// may make device nodes; CI runs as root).
#[allow(dead_code)] // not every test file that includes this module makes device nodes
pub fn device_nodes() -> Option<tempfile::TempDir> {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !root {
        eprintln!("not checked: making device nodes (mknod) needs root; CI runs as root");
        return None;
    }
    let d = tempfile::tempdir().expect("tempdir");
    for (name, minor) in [("null", "3"), ("full", "7")] {
        let st = std::process::Command::new("mknod")
            .args(["-m", "666"])
            .arg(d.path().join(name))
            .args(["c", "1", minor])
            .status()
            .expect("mknod");
        assert!(st.success(), "mknod {name}");
    }
    Some(d)
}

/// The names in `dir` (sorted).
#[allow(dead_code)] // not every test file that includes this module lists directories
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A child process killed when the test ends, also when an assertion fails first (a child
/// blocked on a FIFO would otherwise outlive the test).
#[allow(dead_code)] // not every test file that includes this module starts children
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Makes a FIFO at `path` with `mkfifo(1)`; panics when that fails.
#[allow(dead_code)] // not every test file that includes this module makes FIFOs
pub fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", path.display());
}

/// The bytes of `fixtures/REL` (a path relative to the repository's `fixtures/`).
#[allow(dead_code)] // not every test file that includes this module reads fixtures by path
pub fn fixture(rel: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs the `sqtt-patch` binary with `args`: (exit code, stdout, stderr); asserts that
/// nothing panicked.
#[allow(dead_code)] // not every test file that includes this module runs the binary this way
pub fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sqtt-patch"))
        .args(args)
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code(), out, err)
}

/// [`run`] of `sqtt-patch --fatbin INPUT -o OUTPUT --functions 1`.
#[allow(dead_code)] // not every test file that includes this module runs --fatbin
pub fn fatbin_functions(
    input: &std::path::Path,
    output: &std::path::Path,
) -> (Option<i32>, String, String) {
    run(&[
        "--fatbin".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        "--functions".as_ref(),
        "1".as_ref(),
    ])
}
