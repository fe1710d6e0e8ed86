//! The runtime's side for the tests: builds the tools library when missing, compiles the C++
//! driver (`driver/rocr_driver.cpp`) against AMD's header with the layout this crate expects,
//! and runs it.

#![allow(dead_code)]

use sqtt_patch_tool::ffi;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A bundled real object.
pub fn fixture(rel: &str) -> PathBuf {
    let p = root().join("fixtures").join(rel);
    assert!(p.exists(), "{} missing", p.display());
    p
}

/// A code object that fails closed, written into `dir`: the undecodable-word stub fixture
/// (gfx1100) with its `PT_GNU_STACK` program header turned into `PT_NULL`, so its undecodable
/// function can neither move nor stay in place (no slot for the new segment's header).
pub fn failing_closed(dir: &Path) -> PathBuf {
    let mut b = std::fs::read(fixture("left-alone/gfx1100__stubs__bad-word.co")).unwrap();
    let word = |b: &[u8], at: usize, n: usize| {
        b[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |a, &x| a << 8 | u64::from(x))
    };
    let (phoff, phnum) = (word(&b, 0x20, 8) as usize, word(&b, 0x38, 2) as usize);
    let slot = (0..phnum)
        .map(|i| phoff + 56 * i)
        .find(|&o| word(&b, o, 4) == 0x6474_e551)
        .expect("PT_GNU_STACK");
    b[slot..slot + 4].copy_from_slice(&0u32.to_le_bytes());
    let p = dir.join("no-segment-slot.co");
    std::fs::write(&p, &b).unwrap();
    p
}

/// `libsqtt_patch_tool.so` of this build (the profile of the test), built when missing.
pub fn tool() -> &'static Path {
    static TOOL: OnceLock<PathBuf> = OnceLock::new();
    TOOL.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        // <target>/<profile>/deps/<test> -> <target>/<profile>/libsqtt_patch_tool.so
        let profile_dir = exe.parent().and_then(Path::parent).expect("target layout");
        let so = profile_dir.join("libsqtt_patch_tool.so");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-p", "sqtt-patch-tool"]);
        if release {
            c.arg("--release");
        }
        if let Some(t) = profile_dir.parent() {
            c.env("CARGO_TARGET_DIR", t);
        }
        let st = c.status().expect("run cargo build -p sqtt-patch-tool");
        assert!(st.success(), "cargo build -p sqtt-patch-tool failed");
        assert!(
            so.exists(),
            "{} is missing after building sqtt-patch-tool",
            so.display()
        );
        so
    })
}

/// The driver executable, compiled once per test process into a temporary directory kept for
/// the run.
pub fn driver() -> &'static Path {
    static DRIVER: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DRIVER.get_or_init(|| compile(false)).1
}

/// The driver as a shared library exporting `driver_main` (for `driver/app.py`).
pub fn driver_library() -> &'static Path {
    static DRIVER: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DRIVER.get_or_init(|| compile(true)).1
}

fn compile(shared: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join(if shared {
        "librocr_driver.so"
    } else {
        "rocr_driver"
    });
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/driver/rocr_driver.cpp");
    let defs = [
        ("ROOT_CORE", ffi::ROOT_CORE),
        ("CORE_GET_EXTENSION_TABLE", ffi::CORE_GET_EXTENSION_TABLE),
        ("CORE_DESERIALIZE", ffi::CORE_DESERIALIZE),
        ("CORE_CODE_OBJECT_DESTROY", ffi::CORE_CODE_OBJECT_DESTROY),
        (
            "CORE_GET_MAJOR_EXTENSION_TABLE",
            ffi::CORE_GET_MAJOR_EXTENSION_TABLE,
        ),
        ("CORE_READER_FROM_FILE", ffi::CORE_READER_FROM_FILE),
        ("CORE_READER_FROM_MEMORY", ffi::CORE_READER_FROM_MEMORY),
        ("CORE_READER_DESTROY", ffi::CORE_READER_DESTROY),
        ("CORE_MIN_SIZE", ffi::CORE_MIN_SIZE),
        ("LOADER_FROM_FILE_SLICE", ffi::LOADER_FROM_FILE_SLICE),
    ];
    let mut c = Command::new("c++");
    c.args([
        "-std=c++17",
        "-O1",
        "-Wall",
        "-Werror",
        "-DAMD_INTERNAL_BUILD",
    ]);
    if shared {
        c.args(["-DDRIVER_SHARED", "-shared", "-fPIC"]);
    }
    for (k, v) in defs {
        c.arg(format!("-DEXPECT_{k}={v}"));
    }
    c.arg(&src).arg("-o").arg(&out).args(["-ldl", "-pthread"]);
    let o = c.output().unwrap_or_else(|e| {
        panic!("cannot run c++ ({e}): install a C++ compiler (g++) and libhsa-runtime-dev (bash tools/setup.sh)")
    });
    assert!(
        o.status.success(),
        "compiling the driver against AMD's hsa/hsa_api_trace.h failed (is libhsa-runtime-dev installed? bash tools/setup.sh); a static_assert naming a field means our layout differs from the header:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (dir, out)
}

/// `sqtt-patch` of this build (the profile of the test), built (or brought up to date) once.
pub fn sqtt_patch() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let so = tool();
        let bin = so.with_file_name("sqtt-patch");
        let profile_dir = so.parent().expect("profile dir");
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-p", "sqtt-patch"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        if let Some(t) = profile_dir.parent() {
            c.env("CARGO_TARGET_DIR", t);
        }
        assert!(c.status().expect("run cargo build -p sqtt-patch").success());
        assert!(
            bin.exists(),
            "{} missing after building sqtt-patch",
            bin.display()
        );
        bin
    })
}

/// One load reported by the driver.
#[derive(Debug)]
pub struct Load {
    /// `t<T>-<I>`.
    pub name: String,
    /// The entry of the runtime that got the object: memory, file, slice or deser.
    pub kind: String,
    /// The create call's status.
    pub status: u32,
    /// The destroy call's status.
    pub destroy: u32,
    /// The memory the runtime got was intact when destroy was called.
    pub valid: bool,
    /// The file offset was unchanged.
    pub offset_kept: bool,
    /// The bytes the runtime's entry received.
    pub bytes: Vec<u8>,
}

/// What one driver run printed.
#[derive(Debug)]
pub struct Run {
    /// OnLoad's answer of the last tool loaded (`None`: no tool was loaded).
    pub onload: Option<bool>,
    /// Tools of `HSA_TOOLS_LIB` that could not be opened.
    pub onload_failed: Vec<String>,
    /// Every load, in name order.
    pub loads: Vec<Load>,
    /// Calls seen by the tool installed before ours: (memory, file).
    pub pre_a: (u32, u32),
    /// Standard error (the tool's messages and summary).
    pub stderr: String,
}

/// Runs the driver with `flags` and `loads` (`mem:PATH`, ...) and the environment `env` (the
/// `SQTT_*` variables are cleared first, and the cache is off unless `env` sets it).
pub fn run(flags: &[&str], loads: &[String], env: &[(&str, &str)]) -> Run {
    run_as(
        &[driver().as_os_str()],
        tool().as_os_str(),
        flags,
        loads,
        env,
    )
}

/// [`run`] through `launcher` (its first element is the program; the driver's own arguments
/// follow), with `tool` as the driver's TOOL argument (`-`: the libraries of `HSA_TOOLS_LIB`).
pub fn run_as(
    launcher: &[&std::ffi::OsStr],
    tool: &std::ffi::OsStr,
    flags: &[&str],
    loads: &[String],
    env: &[(&str, &str)],
) -> Run {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut c = Command::new(launcher[0]);
    c.args(&launcher[1..]);
    c.arg(tool).arg(out_dir.path()).args(flags).args(loads);
    for (k, _) in std::env::vars() {
        if k.starts_with("SQTT_") {
            c.env_remove(k);
        }
    }
    c.env_remove("HSA_TOOLS_LIB");
    c.env("SQTT_PATCH_CACHE", "off");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run the driver");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "driver failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let mut r = Run {
        onload: None,
        onload_failed: Vec::new(),
        loads: Vec::new(),
        pre_a: (0, 0),
        stderr,
    };
    for line in stdout.lines() {
        let mut w = line.split_whitespace();
        let field = |s: &str, k: &str| s.strip_prefix(k).map(str::to_string);
        match w.next() {
            Some("ONLOAD") => r.onload = Some(w.next() == Some("1")),
            Some("ONLOAD_FAILED") => r.onload_failed.extend(w.next().map(str::to_string)),
            Some("PRE_A") => {
                let m: Vec<u32> = w
                    .map(|f| f.split('=').nth(1).unwrap().parse().unwrap())
                    .collect();
                r.pre_a = (m[0], m[1]);
            }
            Some("LOAD") => {
                let name = w.next().unwrap().to_string();
                let f: Vec<&str> = w.collect();
                let get = |k: &str| f.iter().find_map(|s| field(s, k)).unwrap();
                let bytes = std::fs::read(out_dir.path().join(format!("{name}.co"))).unwrap();
                r.loads.push(Load {
                    kind: get("kind="),
                    status: u32::from_str_radix(&get("status="), 16).unwrap(),
                    destroy: u32::from_str_radix(&get("destroy="), 16).unwrap(),
                    valid: get("valid=") == "1",
                    offset_kept: get("offset_kept=") == "1",
                    name,
                    bytes,
                });
            }
            _ => {}
        }
    }
    // By thread, then by position in the list.
    let key = |l: &Load| -> (usize, usize) {
        let (t, i) = l.name[1..].split_once('-').unwrap();
        (t.parse().unwrap(), i.parse().unwrap())
    };
    r.loads.sort_by_key(key);
    r
}

/// What `sqtt-patch IN -o OUT` writes for `input` with the options of `env` (the same
/// pipeline, called as the command line calls it).
pub fn expected(input: &[u8], env: &[(&str, &str)]) -> sqtt_pipeline::Patched {
    let opts = sqtt_pipeline::env_options(|k| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("options");
    sqtt_pipeline::rewrite_and_verify(
        "expected",
        input,
        &opts,
        &mut sqtt_rewrite::timings::Timings::off(),
    )
    .expect("rewrite")
}
