//! Helpers of the CLI tests (`cli_misuse.rs`, `cli_outputs.rs`): run the binary in a
//! temporary working directory and list what it left there.

#![allow(dead_code)] // each test file that includes this module uses some of the helpers

use assert_cmd::Command;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// A fixture with functions and barriers (the README's quick-start object).
pub const BARRIERS: &str = "objects/gfx1100__barriers__O3.co";
/// A fixture with device functions.
pub const CALLS: &str = "objects/gfx1100__calls__O3.co";
/// A plain offload bundle with four gfx targets.
pub const BUNDLE: &str = "bundles/calls-4arch__plain.hipfb";

/// One run: exit code, stdout, stderr, and the files left in the directory (sorted, relative,
/// directories with a trailing `/`).
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub files: Vec<String>,
}

impl Run {
    pub fn first_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or_default()
    }
}

pub fn listing(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().expect("name").to_string_lossy());
        // Symbolic links are listed, never followed (a link to a parent would never end).
        let link = std::fs::symlink_metadata(&e).is_ok_and(|m| m.file_type().is_symlink());
        if e.is_dir() && !link {
            out.push(format!("{name}/"));
            listing(&e, &format!("{name}/"), out);
        } else {
            out.push(name);
        }
    }
}

/// Runs `sqtt-patch ARGS` in `dir` without any `SQTT_*` variable; asserts no panic and that
/// every non-empty output ends with a newline.
pub fn run<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(dir: &Path, args: &[S]) -> Run {
    let mut cmd = Command::cargo_bin("sqtt-patch").expect("binary");
    cmd.current_dir(dir).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("SQTT_") {
            cmd.env_remove(k);
        }
    }
    let o = cmd.output().expect("run");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    for (what, s) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            s.is_empty() || s.ends_with('\n'),
            "{args:?}: {what} has no final newline: {s:?}"
        );
    }
    let mut files = Vec::new();
    listing(dir, "", &mut files);
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout,
        stderr,
        files,
    }
}

/// A temporary working directory holding a copy of the fixture `rel` as `name`.
pub fn workdir(inputs: &[(&str, &str)]) -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    for (rel, name) in inputs {
        std::fs::copy(fixture(rel), t.path().join(name)).expect("copy fixture");
    }
    t
}

pub fn files(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Whether `p` is still a character device.
pub fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

/// `gfx1100__calls__O3.co` with the padding word at 0x2b70 (after `_Z9chain_topPKffij`, which
/// ends at 0x2b68; llvm-objdump-22 shows `s_nop 0` there) replaced by `word`.
pub fn damaged_padding(dir: &Path, name: &str, word: u32) {
    let mut b = std::fs::read(fixture(CALLS)).expect("fixture");
    // .text: address 0x2900 at file offset 0x1900 (llvm-readelf-22 -S).
    let off = 0x1900 + (0x2b70 - 0x2900);
    assert_eq!(&b[off..off + 4], &0xBF80_0000u32.to_le_bytes(), "s_nop 0");
    b[off..off + 4].copy_from_slice(&word.to_le_bytes());
    std::fs::write(dir.join(name), b).expect("write");
}

/// An x86-64 ELF file without device code inside the clone: the running test's own
/// executable (under `target/`), whose path stands for `HOST_ELF` in the case tables.
pub fn host_elf() -> String {
    std::env::current_exe()
        .expect("the test's executable")
        .display()
        .to_string()
}

/// `args` with every `HOST_ELF` replaced by [`host_elf`].
pub fn with_host_elf(args: &[&str]) -> Vec<String> {
    args.iter()
        .map(|a| a.replace("HOST_ELF", &host_elf()))
        .collect()
}
