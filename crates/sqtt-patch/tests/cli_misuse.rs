//! The tool as a user meets it (issue 17): every misuse gets one clear answer, and nothing
//! outside the output is touched. Each case pins the exit code, the first line of the message,
//! and the files left in the working directory afterwards (never a `.tmp*` leftover).
//!
//! Inputs are the bundled fixtures (clang/LLVM 22, `fixtures/README.md`), `/bin/ls` (an x86-64
//! ELF without device code), and fixtures with one padding word changed (offsets from
//! llvm-readelf-22 on the unmodified object, checked below).

mod support;
use assert_cmd::Command;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// A fixture with functions and barriers (the README's quick-start object).
const BARRIERS: &str = "objects/gfx1100__barriers__O3.co";
/// A fixture with device functions.
const CALLS: &str = "objects/gfx1100__calls__O3.co";
/// A plain offload bundle with four gfx targets.
const BUNDLE: &str = "bundles/calls-4arch__plain.hipfb";

/// One run: exit code, stdout, stderr, and the files left in the directory (sorted, relative,
/// directories with a trailing `/`).
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    files: Vec<String>,
}

impl Run {
    fn first_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or_default()
    }
}

fn listing(dir: &Path, prefix: &str, out: &mut Vec<String>) {
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
fn run(dir: &Path, args: &[&str]) -> Run {
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
fn workdir(inputs: &[(&str, &str)]) -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    for (rel, name) in inputs {
        std::fs::copy(fixture(rel), t.path().join(name)).expect("copy fixture");
    }
    t
}

fn files(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Whether `p` is still a character device.
fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

/// `gfx1100__calls__O3.co` with the padding word at 0x2b70 (after `_Z9chain_topPKffij`, which
/// ends at 0x2b68; llvm-objdump-22 shows `s_nop 0` there) replaced by `word`.
fn damaged_padding(dir: &Path, name: &str, word: u32) {
    let mut b = std::fs::read(fixture(CALLS)).expect("fixture");
    // .text: address 0x2900 at file offset 0x1900 (llvm-readelf-22 -S).
    let off = 0x1900 + (0x2b70 - 0x2900);
    assert_eq!(&b[off..off + 4], &0xBF80_0000u32.to_le_bytes(), "s_nop 0");
    b[off..off + 4].copy_from_slice(&word.to_le_bytes());
    std::fs::write(dir.join(name), b).expect("write");
}

// ------------------------------------------------------------------ items 1-3: outputs

#[test]
fn dev_null_stays_a_character_device() {
    let Some(devs) = support::device_nodes() else {
        return;
    };
    let null = devs.path().join("null");
    let null_s = null.to_str().expect("utf-8 path");
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "in.hipfb")]);
    for args in [
        &["in.co", "-o", null_s, "--functions", "1"][..],
        &["--fatbin", "in.hipfb", "-o", null_s, "--functions", "1"][..],
        &[
            "in.co",
            "-o",
            null_s,
            "--functions",
            "1",
            "--report-json",
            null_s,
        ][..],
    ] {
        let r = run(t.path(), args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(is_char_device(&null), "{args:?} replaced the null device");
        assert_eq!(r.files, files(&["in.co", "in.hipfb"]), "{args:?}");
    }
    // As an unprivileged user (it used to fail: no right to rename over a device node).
    use std::os::unix::fs::PermissionsExt;
    for d in [t.path(), devs.path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // A copy inside the (world-readable) temporary directory: the checkout itself may sit in a
    // directory `nobody` cannot enter (a `mktemp -d` clone is mode 0700).
    let bin = t.path().join("sqtt-patch");
    std::fs::copy(assert_cmd::cargo::cargo_bin("sqtt-patch"), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let o = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&bin)
        .args(["in.co", "-o", null_s, "--functions", "1"])
        .current_dir(t.path())
        .output()
        .expect("runuser (util-linux) runs the binary as nobody");
    assert_eq!(
        o.status.code(),
        Some(0),
        "as nobody: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(is_char_device(&null));
}

#[test]
fn a_fifo_is_streamed_into_not_replaced() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let fifo = t.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read fifo"))
    };
    let r = run(
        t.path(),
        &["in.co", "-o", "pipe", "--functions", "1", "--barriers", "1"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let streamed = reader.join().expect("reader");
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "out.co",
            "--functions",
            "1",
            "--barriers",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        streamed,
        std::fs::read(t.path().join("out.co")).expect("out")
    );
    let m = std::fs::metadata(&fifo).expect("fifo");
    assert!(m.file_type().is_fifo(), "the FIFO was replaced");
}

#[test]
fn a_directory_as_output_is_refused_before_any_work() {
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "in.hipfb")]);
    std::fs::create_dir(t.path().join("d")).expect("mkdir");
    let cases: [(&[&str], &str); 5] = [
        (
            &["in.co", "-o", "d", "--functions", "1"],
            "sqtt-patch: error: -o d: is a directory; give a file path",
        ),
        (
            &["in.co", "-o", "d/", "--functions", "1"],
            "sqtt-patch: error: -o d/: is a directory; give a file path",
        ),
        (
            &["in.co", "-o", "new/", "--functions", "1"],
            "sqtt-patch: error: -o new/: ends in '/', so it names a directory; give a file path",
        ),
        (
            &["--fatbin", "in.hipfb", "-o", "d", "--functions", "1"],
            "sqtt-patch: error: -o d: is a directory; give a file path",
        ),
        (
            &[
                "in.co",
                "-o",
                "o.co",
                "--functions",
                "1",
                "--report-json",
                "d",
            ],
            "sqtt-patch: error: --report-json d: is a directory; give a file path",
        ),
    ];
    for (args, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.first_line(), first, "{args:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert_eq!(r.files, files(&["d/", "in.co", "in.hipfb"]), "{args:?}");
    }
}

#[test]
fn report_json_on_the_output_or_the_input_or_in_a_missing_directory_is_refused() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let cases: [(&[&str], &str); 4] = [
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--report-json", "o.co"],
            "sqtt-patch: error: --report-json o.co: the same file as -o o.co; choose another path",
        ),
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--report-json", "./o.co"],
            "sqtt-patch: error: --report-json ./o.co: the same file as -o o.co; choose another path",
        ),
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--report-json", "in.co"],
            "sqtt-patch: error: --report-json in.co: the same file as the input in.co; choose another path",
        ),
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--report-json", "nodir/r.json"],
            "sqtt-patch: error: --report-json nodir/r.json: directory nodir does not exist",
        ),
    ];
    for (args, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.first_line(), first, "{args:?}");
        assert_eq!(r.files, files(&["in.co"]), "{args:?}");
    }
    let r = run(t.path(), &["in.co", "-o", "nodir/o.co", "--functions", "1"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.first_line(),
        "sqtt-patch: error: -o nodir/o.co: directory nodir does not exist"
    );
    assert_eq!(r.files, files(&["in.co"]));
}

/// A directory in which no file can be created, as seen by this process: a `chmod 555`
/// directory in `dir` for a user, `/sys` for root (whom permissions do not stop; sysfs refuses
/// new files to everyone). `None` when neither refuses (then the case is skipped).
fn unwritable_dir(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let refuses = |d: &Path| d.is_dir() && tempfile::tempfile_in(d).is_err();
    if refuses(&ro) {
        return Some(PathBuf::from("ro"));
    }
    std::fs::remove_dir(&ro).expect("rmdir");
    let sys = PathBuf::from("/sys");
    refuses(&sys).then_some(sys)
}

/// Fresh tester, session 12: `batch -o OUTDIR` into a location where nothing can be written
/// processed every input and counted each as an input error; the main job found out only when
/// writing. Both refuse the location before any work (exit 2, nothing on stdout), naming `-o`,
/// the directory and the OS error.
#[test]
fn an_unwritable_output_location_is_refused_before_any_work() {
    let t = workdir(&[(BARRIERS, "a.co"), (CALLS, "c.co")]);
    std::fs::write(t.path().join("file"), "x\n").expect("file");
    let mut cases: Vec<(Vec<String>, String)> = vec![(
        [
            "batch",
            "a.co",
            "c.co",
            "-o",
            "file/out",
            "--functions",
            "1",
        ]
        .map(String::from)
        .to_vec(),
        "sqtt-patch: error: -o file/out: file is not a directory".into(),
    )];
    if let Some(ro) = unwritable_dir(t.path()) {
        let ro = ro.display().to_string();
        for out in [ro.clone(), format!("{ro}/new/dir")] {
            cases.push((
                ["batch", "a.co", "c.co", "--functions", "1", "-o", &out]
                    .map(String::from)
                    .to_vec(),
                format!("sqtt-patch: error: -o {out}: cannot create files in directory {ro}: "),
            ));
        }
        let out = format!("{ro}/o.co");
        cases.push((
            ["a.co", "--functions", "1", "-o", &out]
                .map(String::from)
                .to_vec(),
            format!("sqtt-patch: error: -o {out}: cannot create files in directory {ro}: "),
        ));
        cases.push((
            [
                "a.co",
                "-o",
                "o.co",
                "--functions",
                "1",
                "--report-json",
                &out,
            ]
            .map(String::from)
            .to_vec(),
            format!(
                "sqtt-patch: error: --report-json {out}: cannot create files in directory {ro}: "
            ),
        ));
    }
    for (args, first) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run(t.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.first_line().starts_with(first.as_str()),
            "{args:?}: {}",
            r.stderr
        );
        if first.contains("cannot create files") {
            assert!(r.first_line().ends_with(')'), "the OS error: {}", r.stderr);
        }
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{args:?}: no work, no summary");
        assert!(!r.files.contains(&"o.co".to_string()), "{args:?}");
    }
}

/// Fresh tester, session 12: a write error (`-o /dev/full`) named the path but not the option.
/// It is exit 2, like every output problem, and the message names the option, the path and the
/// OS error.
#[test]
fn a_write_error_names_the_output_and_the_os_error() {
    let Some(devs) = support::device_nodes() else {
        return;
    };
    let full = devs.path().join("full");
    let full = full.to_str().expect("utf-8 path");
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "in.hipfb")]);
    let cases = [
        ("in.co -o FULL", "-o"),
        ("--fatbin in.hipfb -o FULL", "-o"),
        ("in.co -o o.co --report-json FULL", "--report-json"),
        ("batch in.co --check --report-json FULL", "--report-json"),
    ];
    for (line, flag) in cases {
        let line = line.replace("FULL", full);
        let args: Vec<&str> = line.split(' ').chain(["--functions", "1"]).collect();
        let r = run(t.path(), &args);
        let last = format!(
            "sqtt-patch: error: {flag} {full}: cannot write: No space left on device (os error 28)"
        );
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().last(), Some(last.as_str()), "{args:?}");
    }
}

// ------------------------------------------------------------------ item 4: --strict

/// One rule for every command: with `--strict`, an input whose code object failed closed (or
/// skipped a site) exits 3 and its output is not written; reports still are.
#[test]
fn strict_writes_no_output_for_lost_coverage_in_every_command() {
    let t = tempfile::tempdir().expect("tempdir");
    // A device function that does not decode: kept in place, its sites skipped.
    std::fs::copy(
        fixture("left-alone/gfx942__stubs__bad-word.co"),
        t.path().join("bad.co"),
    )
    .expect("copy");
    let flags = ["--functions", "1", "--strict"];
    let main = run(
        t.path(),
        &[
            &["bad.co", "-o", "o.co", "--report-json", "r.json"][..],
            &flags[..],
        ]
        .concat(),
    );
    assert_eq!(main.code, 3, "{}", main.stderr);
    assert!(
        main.stderr.contains("stub_bad is kept at its address"),
        "{}",
        main.stderr
    );
    assert_eq!(
        main.stderr.lines().last(),
        Some("sqtt-patch: bad.co: --strict and the object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    assert_eq!(main.files, files(&["bad.co", "r.json"]));
    std::fs::remove_file(t.path().join("r.json")).expect("rm");
    let fat = run(
        t.path(),
        &[&["--fatbin", "bad.co", "-o", "o.co"][..], &flags[..]].concat(),
    );
    assert_eq!(fat.code, 3, "{}", fat.stderr);
    assert_eq!(
        fat.stderr.lines().last(),
        Some("sqtt-patch: bad.co: --strict and some code object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    assert_eq!(fat.files, files(&["bad.co"]));
    std::fs::copy(fixture(BARRIERS), t.path().join("good.co")).expect("copy");
    let batch = run(
        t.path(),
        &[&["batch", "bad.co", "good.co", "-o", "out"][..], &flags[..]].concat(),
    );
    assert_eq!(batch.code, 3, "{}", batch.stderr);
    assert_eq!(
        batch.first_line(),
        "sqtt-patch batch: --strict: 1 input(s) failed closed, could not be read, skipped a site or have unreadable DWARF; their outputs were not written"
    );
    assert!(batch.stdout.contains("bad.co [code_object]"));
    assert!(batch.stdout.contains("(not written: --strict)"));
    assert_eq!(
        batch.files,
        files(&["bad.co", "good.co", "out/", "out/good.co"])
    );
    // `batch --check` writes nothing, and --strict exits 3 all the same (fresh tester, session
    // 10: exited 0).
    std::fs::remove_dir_all(t.path().join("out")).expect("rm out");
    let check = run(
        t.path(),
        &[&["batch", "bad.co", "good.co", "--check"][..], &flags[..]].concat(),
    );
    assert_eq!(check.code, 3, "{}", check.stderr);
    assert_eq!(
        check.first_line(),
        "sqtt-patch batch: --strict: 1 input(s) failed closed, could not be read, skipped a site or have unreadable DWARF; exit 3"
    );
    assert_eq!(check.files, files(&["bad.co", "good.co"]));
    let unstrict = run(
        t.path(),
        &["batch", "bad.co", "good.co", "--check", "--functions", "1"],
    );
    assert_eq!(unstrict.code, 0, "{}", unstrict.stderr);
    // Without --strict the main job writes its output (the rest instrumented) and exits 0.
    let r = run(t.path(), &["bad.co", "-o", "o.co", "--functions", "1"]);
    assert_eq!(r.code, 0);
    let v = run(t.path(), &["verify", "bad.co", "o.co"]);
    assert_eq!(v.code, 0, "{}", v.stderr);
}

/// A DWARF 5 contribution that a unit indexes into (`DW_AT_addr_base`, `DW_AT_str_offsets_base`)
/// whose header was overwritten: gimli reads indexed addresses and names without looking at the
/// header, so this used to drop or rename the inlined functions silently (fresh tester, session
/// 10). Now it is unreadable DWARF: a warning naming the header, and lost coverage for
/// `--strict`. `gfx942__inlined__O3-g.co`: `.debug_str_offsets` at file offset 0x238f (0xac
/// bytes) zeroed, `.debug_addr` at 0x2585 (0x38 bytes) filled with 0x5a (llvm-readelf-22 -S).
#[test]
fn overwritten_dwarf_contribution_headers_are_unreadable_dwarf() {
    let t = tempfile::tempdir().expect("tempdir");
    let orig = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    assert_eq!(
        &orig[0x238f + 4..0x238f + 6],
        &[5, 0],
        ".debug_str_offsets header"
    );
    assert_eq!(
        &orig[0x2585 + 4..0x2585 + 8],
        &[5, 0, 8, 0],
        ".debug_addr header"
    );
    let cases: [(&str, usize, usize, u8, &str); 2] = [
        (
            "stroff.co",
            0x238f,
            0xac,
            0,
            ".debug_str_offsets+0x0: header version 0, not 5 (contribution of the unit at .debug_info+0x0)",
        ),
        (
            "addr.co",
            0x2585,
            0x38,
            0x5a,
            ".debug_addr+0x0: header version 23130, not 5 (contribution of the unit at .debug_info+0x0)",
        ),
    ];
    for (name, off, len, fill, error) in cases {
        let mut b = orig.clone();
        b[off..off + len].fill(fill);
        std::fs::write(t.path().join(name), b).expect("write");
        unreadable_dwarf(t.path(), name, error);
    }
}

/// Runs `--functions 1` on `name` in `dir`, whose DWARF cannot be read because of `error`:
/// exit 0 with the warning first on stderr and `error` in the JSON report; with `--strict`
/// exit 3 and nothing written. Returns the `--strict` run.
fn unreadable_dwarf(dir: &Path, name: &str, error: &str) -> Run {
    let r = run(
        dir,
        &[
            name,
            "-o",
            "o.co",
            "--functions",
            "1",
            "--report-json",
            "r.json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.first_line(),
        format!("sqtt-patch: {name}: warning: the DWARF cannot be read ({error}): inlined functions are not marked and funcmap rows carry no source locations")
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).expect("r.json")).expect("json");
    assert_eq!(json["inlined"]["dwarf_error"], error);
    let strict = run(dir, &[name, "-o", "s.co", "--functions", "1", "--strict"]);
    assert_eq!(strict.code, 3, "{}", strict.stderr);
    assert_eq!(
        strict.first_line(),
        format!("sqtt-patch: {name}: warning: the DWARF cannot be read ({error}): inlined functions are not marked and funcmap rows carry no source locations")
    );
    assert!(!dir.join("s.co").exists());
    strict
}

/// DWARF that cannot be read is said on stderr and is lost coverage for `--strict` (the
/// inlined functions stay unmarked): `gfx942__inlined__O3-g.co` with the version of its first
/// `.debug_info` unit (file offset 0x1f91 + 4, llvm-readelf-22 -S) changed from 5 to 13.
#[test]
fn unreadable_dwarf_is_a_warning_and_lost_coverage_for_strict() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut b = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    assert_eq!(&b[0x1f95..0x1f97], &[5, 0], "DWARF 5 unit header");
    b[0x1f95] = 13;
    std::fs::write(t.path().join("dw.co"), b).expect("write");
    let strict = unreadable_dwarf(
        t.path(),
        "dw.co",
        ".debug_info+0x0: unknown DWARF version: 13",
    );
    assert_eq!(
        strict.stderr.lines().last(),
        Some("sqtt-patch: dw.co: --strict and the object failed closed, skipped a site or has unreadable DWARF: nothing written")
    );
    // The same object with readable DWARF: no warning, and --strict writes it.
    std::fs::copy(
        fixture("objects/gfx942__inlined__O3-g.co"),
        t.path().join("ok.co"),
    )
    .expect("copy");
    let ok = run(
        t.path(),
        &["ok.co", "-o", "k.co", "--functions", "1", "--strict"],
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(!ok.stderr.contains("warning"), "{}", ok.stderr);
}

/// Readable DWARF whose inlined instances all lie outside the instrumented functions gets a
/// reason in the report instead of a silent "0 found": `gfx942__inlined__O3-g.co` with every
/// `.debug_addr` entry (file offset 0x2585, 0x38 bytes: an 8-byte header, then 8-byte addresses;
/// llvm-readelf-22 -S) moved 256 MiB up.
#[test]
fn inlined_instances_outside_every_function_are_reported_with_a_reason() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut b = std::fs::read(fixture("objects/gfx942__inlined__O3-g.co")).expect("fixture");
    for at in (0x2585 + 8..0x2585 + 0x38).step_by(8) {
        let v = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        assert!(v < 0x10000, "a .text address: {v:#x}");
        b[at..at + 8].copy_from_slice(&(v + 0x1000_0000).to_le_bytes());
    }
    std::fs::write(t.path().join("far.co"), b).expect("write");
    let r = run(
        t.path(),
        &["far.co", "-o", "o.co", "--functions", "1", "--report"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("inlined functions not marked: none of the 19 inlined instances in the DWARF starts inside an instrumented function"),
        "{}",
        r.stdout
    );
}

// ------------------------------------------------------------------ items 5-7: consistency

#[test]
fn batch_counts_an_unreadable_object_as_an_input_error() {
    let t = workdir(&[(BARRIERS, "a.co"), (CALLS, "c.co")]);
    let b = std::fs::read(fixture(CALLS)).expect("fixture");
    std::fs::write(t.path().join("b.co"), &b[..b.len() / 2]).expect("truncate");
    let r = run(
        t.path(),
        &[
            "batch",
            "a.co",
            "b.co",
            "c.co",
            "--check",
            "--functions",
            "1",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("total: 3 files (1 with input errors) in ")),
        "{}",
        r.stdout
    );
    assert!(r
        .stdout
        .contains("  code objects: error=1 instrumented=2\n"));
    assert!(r.stdout.contains("  input error 1x b.co: "), "{}", r.stdout);
    assert!(
        r.first_line()
            .starts_with("sqtt-patch batch: input error: b.co: section header table at offset"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("failed closed"), "{}", r.stdout);
    assert_eq!(r.files, files(&["a.co", "b.co", "c.co"]));
}

#[test]
fn verify_accepts_an_unchanged_copy_and_names_swapped_arguments() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "new.co",
            "--functions",
            "1",
            "--barriers",
            "1",
        ],
    );
    assert_eq!(r.code, 0);
    let same = run(t.path(), &["verify", "in.co", "in.co"]);
    assert_eq!(same.code, 0);
    assert_eq!(
        same.stdout,
        "OK: the rewritten file is byte-identical to the original (an empty rewrite: nothing was inserted)\n"
    );
    let ok = run(t.path(), &["verify", "in.co", "new.co"]);
    assert_eq!(ok.code, 0);
    assert_eq!(ok.stdout.lines().last(), Some("OK"));
    let swapped = run(t.path(), &["verify", "new.co", "in.co"]);
    assert_eq!(swapped.code, 2);
    assert_eq!(
        swapped.first_line(),
        "sqtt-patch: error: new.co has a .sqtt_patch section and in.co has none: the arguments look swapped (usage: sqtt-patch verify ORIGINAL REWRITTEN)"
    );
    let missing = run(t.path(), &["verify", "nope.co", "new.co"]);
    assert_eq!(missing.code, 2);
    assert_eq!(
        missing.first_line(),
        "sqtt-patch: error: nope.co: cannot read the original: No such file or directory (os error 2)"
    );
    // Two copies of an unreadable object are an input error naming it, not an empty rewrite
    // (fresh tester, session 12; kept on purpose, README "Limitations").
    let b = std::fs::read(fixture(BARRIERS)).expect("fixture");
    std::fs::write(t.path().join("half.co"), &b[..b.len() / 2]).expect("truncate");
    std::fs::write(t.path().join("half2.co"), &b[..b.len() / 2]).expect("truncate");
    let damaged = run(t.path(), &["verify", "half.co", "half2.co"]);
    assert_eq!(damaged.code, 2);
    assert!(
        damaged.first_line().starts_with(
            "sqtt-patch: error: half.co: the original is not a readable code object: "
        ),
        "{}",
        damaged.stderr
    );
    let ls = run(t.path(), &["verify", "/bin/ls", "new.co"]);
    assert_eq!(ls.code, 2);
    assert!(ls.first_line().starts_with(
        "sqtt-patch: error: the original: /bin/ls: not a code object: an x86-64 ELF file"
    ));
    assert_eq!(ls.files, files(&["half.co", "half2.co", "in.co", "new.co"]));
}

/// Damaged padding after a function keeps `.text` in place whether or not the word decodes
/// (docs/left-alone.md, "Kept in place"): the word stays where it was, every function is
/// instrumented in the new segment, a warning names the word with its address, and the output
/// verifies. (Before: the object failed closed with that reason.)
#[test]
fn damaged_padding_keeps_text_in_place_whatever_the_word() {
    let t = tempfile::tempdir().expect("tempdir");
    for (name, word, what) in [
        ("undecodable.co", 0xFFFF_FFFFu32, "undecodable word in the gap after _Z9chain_topPKffij at 0x2b70: no encoding format matches word 0xffffffff"),
        ("mov.co", 0xBE80_0080, "damaged padding in the gap after _Z9chain_topPKffij at 0x2b70: s_mov_b32 (padding is s_nop or s_code_end)"),
        ("endpgm.co", 0xBFB0_0000, "damaged padding in the gap after _Z9chain_topPKffij at 0x2b70: s_endpgm (padding is s_nop or s_code_end)"),
    ] {
        damaged_padding(t.path(), name, word);
        let out = format!("{name}.out");
        let r = run(t.path(), &[name, "-o", &out, "--functions", "1"]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert_eq!(
            r.first_line(),
            format!("sqtt-patch: {name}: warning: {what}: kept in place with .text")
        );
        let (a, b) = (
            std::fs::read(t.path().join(name)).expect("in"),
            std::fs::read(t.path().join(&out)).expect("out"),
        );
        assert_ne!(a, b, "{name}: not instrumented");
        // `.text` is the input's, the word still at 0x2b70.
        let text = |bytes: &[u8]| {
            let co = hsaco::CodeObject::parse(bytes).expect("code object");
            let t = co.text().expect(".text").clone();
            (t.addr, co.section_data(&t).to_vec())
        };
        let (addr, kept) = text(&b);
        assert_eq!((addr, kept.clone()), text(&a), "{name}");
        let at = (0x2b70 - addr) as usize;
        assert_eq!(&kept[at..at + 4], &word.to_le_bytes(), "{name}");
        let v = run(t.path(), &["verify", name, &out]);
        assert_eq!(v.code, 0, "{name}: {}", v.stderr);
    }
}

// ------------------------------------------------------------------ item 8: flags

#[test]
fn flags_that_cannot_take_effect_are_refused_or_warned() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["in.co", "-o", "o.co", "--functions", "1", "--offload-arch", "gfx1100"],
            2,
            "sqtt-patch: error: --offload-arch selects code objects inside a bundle or host binary: it needs --fatbin (or batch)",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "yes"],
            2,
            "error: invalid value 'yes' for '--barriers <0|1>'",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "true"],
            2,
            "error: invalid value 'true' for '--barriers <0|1>'",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--shader-clock-shift", "3"],
            2,
            "sqtt-patch: error: --shader-clock-shift needs --shader-clock-bits N (or $SQTT_SHADER_CLOCK_BITS): without clock bits no clock is packed",
        ),
        (
            &["in.co", "-o", "o.co", "--barriers", "1", "--scope-cu", "0"],
            0,
            "sqtt-patch: warning: scope mask cu is 0: no wave can match it, so every marker is skipped at run time",
        ),
    ];
    for (args, code, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert_eq!(r.first_line(), first, "{args:?}");
        let left = if code == 0 {
            files(&["in.co", "o.co"])
        } else {
            files(&["in.co"])
        };
        assert_eq!(r.files, left, "{args:?}");
        let _ = std::fs::remove_file(t.path().join("o.co"));
    }
    // --memory N:0 is accepted and documented: only back-to-back operations share a marker.
    let help = run(t.path(), &["--help"]);
    assert!(help
        .stdout
        .contains("M=0: only back-to-back operations share a marker"));
    let r = run(t.path(), &["in.co", "-o", "o.co", "--memory", "2:0"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

// ------------------------------------------------------------------ items 9-11: messages

#[test]
fn the_wrong_kind_of_file_is_named() {
    let t = workdir(&[(BUNDLE, "b.hipfb")]);
    std::fs::write(t.path().join("stub"), b"\x7fELF").expect("stub");
    std::fs::write(t.path().join("text.txt"), "hello, world\n".repeat(4)).expect("txt");
    let cases: [(&[&str], &str); 9] = [
        (&["stub", "-o", "o", "--functions", "1"], "sqtt-patch: error: stub: not a code object: a truncated ELF file (4 bytes; an ELF64 header has 64)"),
        (&["--fatbin", "stub", "-o", "o", "--functions", "1"], "sqtt-patch: error: stub: a truncated ELF file (4 bytes; an ELF64 header has 64); --fatbin reads offload bundles, kpack archives, x86-64 host binaries and AMDGPU code objects"),
        (&["text.txt", "-o", "o", "--functions", "1"], "sqtt-patch: error: text.txt: not a code object: neither an ELF file nor an offload bundle (52 bytes, no ELF or bundle magic)"),
        (&["/bin/ls", "-o", "o", "--functions", "1"], "sqtt-patch: error: /bin/ls: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
        (&["b.hipfb", "-o", "o", "--functions", "1"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); pass --fatbin to instrument every code object inside it"),
        (&["dis", "b.hipfb"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); extract its code objects with `sqtt-patch extract FILE -o DIR`"),
        (&["funcmap", "b.hipfb"], "sqtt-patch: error: b.hipfb: not a code object: an offload bundle with 4 code object(s); extract its code objects with `sqtt-patch extract FILE -o DIR`"),
        (&["dis", "/bin/ls"], "sqtt-patch: error: /bin/ls: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
        (&["funcmap", "/bin/ls"], "sqtt-patch: error: /bin/ls: not a code object: an x86-64 ELF file without HIP device code (no readable .hip_fatbin)"),
    ];
    for (args, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.first_line(), first, "{args:?}");
        assert_eq!(r.files, files(&["b.hipfb", "stub", "text.txt"]), "{args:?}");
    }
    let r = run(
        t.path(),
        &["--fatbin", "/bin/ls", "-o", "o", "--functions", "1"],
    );
    assert_eq!(r.code, 2);
    assert!(r
        .first_line()
        .starts_with("sqtt-patch: error: /bin/ls: malformed host ELF at offset 0x"));
    assert!(r.first_line().contains("not a HIP host binary"));
    // A host ELF cut after its program headers: named as corrupt or truncated, not as
    // "not a bundle or ELF" (fresh-tester finding).
    let ls = std::fs::read("/bin/ls").expect("/bin/ls");
    std::fs::write(t.path().join("cut"), &ls[..3000]).expect("cut");
    let r = run(
        t.path(),
        &["--fatbin", "cut", "-o", "o", "--functions", "1"],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.first_line()
            .starts_with("sqtt-patch: error: cut: a corrupt or truncated ELF file: section header table at offset 0x"),
        "{}",
        r.first_line()
    );
    assert!(!t.path().join("o").exists());
}

// ------------------------------------------------------------------ items 12-13: reports

#[test]
fn human_reports_name_each_kernel_once_in_user_words() {
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "b.hipfb")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "o.co",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--report",
        ],
    );
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout.lines().next().unwrap_or_default(),
        "in.co: target gfx1100: instrumented; .text 2176 -> 2176 bytes; 5 funcmap rows"
    );
    for k in ["k_bar_reduce", "k_bar_branches", "k_bar_in_call"] {
        let n = r
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("  kernel {k}:")))
            .count();
        assert_eq!(n, 1, "{k}: {}", r.stdout);
    }
    assert!(r.stdout.contains(
        "  kernel k_bar_reduce: barrier=11 (+11 instructions, +44 bytes); wave32 vgprs 8 occupancy 16->16 waves/SIMD, +11 instructions reachable\n"
    ));
    assert!(r.stdout.contains(
        "  function _Z14stage_exchangePfjfj: barrier=2 function_entry=1 function_exit=1 (+4 instructions, +16 bytes, id 2)\n"
    ));
    // --fatbin --report: one block per bundle entry, named.
    let f = run(
        t.path(),
        &[
            "--fatbin",
            "b.hipfb",
            "-o",
            "o.hipfb",
            "--functions",
            "1",
            "--report",
        ],
    );
    assert_eq!(f.code, 0, "{}", f.stderr);
    // The report blocks, then the one-line summary of each code object (also on stdout).
    let heads: Vec<&str> = f
        .stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(": target gfx"))
        .collect();
    assert_eq!(heads.len(), 4, "{}", f.stdout);
    for h in heads {
        assert!(
            h.starts_with("b.hipfb: bundle 0 hipv4-amdgcn-amd-amdhsa--gfx"),
            "{h}"
        );
    }
    // info numbers the code objects of a bundle 1..n.
    let i = run(t.path(), &["info", "b.hipfb"]);
    assert_eq!(i.code, 0);
    let numbers: Vec<&str> = i
        .stdout
        .lines()
        .filter(|l| l.starts_with("code object "))
        .map(|l| l.split(' ').nth(2).unwrap_or_default())
        .collect();
    assert_eq!(numbers, ["1", "2", "3", "4"]);
    // batch: summary on stdout, no SGPR column on gfx10+, progress hidden off a terminal.
    let b = run(
        t.path(),
        &["batch", "in.co", "b.hipfb", "--check", "--functions", "1"],
    );
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert!(b.stdout.contains("total: 2 files (0 with input errors)"));
    assert!(!b.stdout.contains("sgprs -"), "{}", b.stdout);
    assert!(b.stderr.is_empty(), "{}", b.stderr);
    for out in [&f.stderr, &b.stderr] {
        assert!(!out.contains('\r') && !out.contains("code objects ["));
    }
    let h = run(t.path(), &["--help"]);
    assert!(!h.stdout.contains("[`"), "rustdoc link in --help");
}

/// Skipped sites name their kind as in the JSON report (`address_trace`), never a Rust enum
/// name (was `skipped AddressTrace in ...`).
#[test]
fn skipped_sites_use_report_names() {
    // At -O0 the device function `stage_exchange` keeps every SGPR live at some loads (its
    // callers are unknown to liveness: the object has an unresolved call, named in the
    // reason): those address traces are skipped.
    let t = workdir(&[("objects/gfx1030__barriers__O0.co", "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "o.co",
            "--trace-addresses",
            "memory,lds",
            "--report",
            "--strict",
        ],
    );
    // A skipped site is lost coverage: --strict exits 3 and writes nothing.
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.files, files(&["in.co"]));
    assert!(
        r.stdout.contains("  skipped: 15 site(s)\n    15x the object has an unresolved call: no SGPR is provably free here for the address-trace loop (2 SGPRs) [address_trace=15], in 2 functions:\n      _Z14stage_exchangePfjfj (7x, first at 0x40e8)\n"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("AddressTrace"));
}

// ------------------------------------------------------------------ item 15: quick start

/// README quick start command 1 shows functions and barriers.
#[test]
fn quick_start_object_shows_functions_and_barriers() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let r = run(
        t.path(),
        &[
            "in.co",
            "-o",
            "calls.instr.co",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--report",
        ],
    );
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("function_entry=1"), "{}", r.stdout);
    assert!(r.stdout.contains("barrier="), "{}", r.stdout);
}

// ------------------------------------------------------------------ campaign findings

/// Found by the bad-input campaign (`tools/cli_campaign.sh`, `docs/cli-campaign.md`).
#[test]
fn campaign_findings_stay_fixed() {
    let t = workdir(&[(BUNDLE, "b.hipfb"), (BARRIERS, "in.co")]);
    std::fs::write(t.path().join("text.txt"), "hello\n").expect("txt");
    let cases: [(&[&str], i32, &str); 5] = [
        // extract on a file without code objects made an empty directory and exited 0.
        (
            &["extract", "/bin/ls", "-o", "x"],
            2,
            "sqtt-patch: error: /bin/ls: no embedded code object to extract (an x86-64 ELF file without HIP device code (no readable .hip_fatbin))",
        ),
        (
            &["extract", "b.hipfb", "-o", "in.co"],
            2,
            "sqtt-patch: error: -o in.co: not a directory",
        ),
        // A mistyped subcommand was read as an input file and answered "missing -o OUT".
        (
            &["frobnicate"],
            2,
            "sqtt-patch: error: frobnicate: no such file, and not a subcommand (dis, info, extract, batch, funcmap, verify, exec, flamegraph, timeline, perfetto, memtrace; see --help)",
        ),
        // batch: an explicitly named non-input file was only a report row, no diagnostic.
        (
            &["batch", "text.txt", "--check", "--functions", "1"],
            2,
            "sqtt-patch batch: input error: text.txt: not an AMDGPU code object, offload bundle or x86-64 host ELF",
        ),
        (
            &["dis", "text.txt"],
            2,
            "sqtt-patch: error: text.txt: not a code object: neither an ELF file nor an offload bundle (6 bytes, no ELF or bundle magic)",
        ),
    ];
    for (args, code, first) in cases {
        let r = run(t.path(), args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert_eq!(r.first_line(), first, "{args:?}");
        assert_eq!(
            r.files,
            files(&["b.hipfb", "in.co", "text.txt"]),
            "{args:?}"
        );
    }
    // info names the file kind in words, not as a Rust enum (`Bundle`, `Host`).
    let r = run(t.path(), &["info", "b.hipfb"]);
    assert_eq!(
        r.stdout.lines().next(),
        Some("b.hipfb: offload bundle, 4 code object(s)")
    );
}

/// Item 16: on a terminal `--fatbin` and `batch` draw an indicatif progress line (code objects
/// done / found, bytes, rate, ETA); off a terminal nothing (checked in
/// `human_reports_name_each_kernel_once_in_user_words`). The terminal is util-linux `script`.
#[test]
fn progress_is_drawn_on_a_terminal() {
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("skipped: util-linux `script` (to run under a pseudo-terminal) is not installed");
        return;
    }
    let t = workdir(&[(BUNDLE, "b.hipfb")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    for cmd in [
        format!(
            "{} --fatbin b.hipfb -o o.hipfb --functions 1",
            bin.display()
        ),
        format!("{} batch b.hipfb --check --functions 1", bin.display()),
    ] {
        // The typescript goes to a file of its own temporary directory, not through /dev.
        let typescript = tempfile::tempdir().expect("tempdir");
        let o = std::process::Command::new("script")
            .args(["-qec", &cmd])
            .arg(typescript.path().join("typescript"))
            .current_dir(t.path())
            .output()
            .expect("script");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{cmd}: {text}");
        assert!(
            text.contains(" code objects [") && text.contains("ETA"),
            "{cmd}: no progress line in {text:?}"
        );
    }
}

/// A report is in place only together with its output: an `-o` that cannot be written leaves
/// no `--report-json` behind (fresh tester, session 13: the report said "instrumented").
#[test]
fn an_output_that_cannot_be_written_leaves_no_report() {
    let Some(devs) = support::device_nodes() else {
        return;
    };
    let full = devs.path().join("full");
    let full = full.to_str().expect("utf-8 path");
    let t = workdir(&[(BARRIERS, "in.co"), (BUNDLE, "in.hipfb")]);
    for line in [
        "in.co -o FULL --report-json r.json",
        "--fatbin in.hipfb -o FULL --report-json r.json",
    ] {
        let line = line.replace("FULL", full);
        let args: Vec<&str> = line.split(' ').chain(["--functions", "1"]).collect();
        let r = run(t.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.files, files(&["in.co", "in.hipfb"]), "{args:?}");
    }
}

/// `batch` refuses, before any work, a `--report-json` or an updated `--baseline` that names
/// one of its inputs (fresh tester, session 13: the report replaced the code object), and reads
/// a baseline that is a device with the input limit (`/dev/zero` never ends).
#[test]
fn batch_writes_no_report_or_baseline_over_an_input_and_bounds_the_baseline() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    let before = std::fs::read(t.path().join("in.co")).expect("read");
    // A baseline to update that is an input is read first and refused as no report.
    for (extra, last) in [
        (
            &["--report-json", "in.co"][..],
            "sqtt-patch: error: --report-json in.co: is an input of this run (in.co); choose another path",
        ),
        (
            &["--baseline", "in.co", "--update-baseline"][..],
            "sqtt-patch: error: in.co: not a sqtt-patch batch report (not UTF-8 text)",
        ),
    ] {
        let args = [&["batch", "in.co", "--check", "--functions", "1"][..], extra].concat();
        let r = run(t.path(), &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().last(), Some(last), "{args:?}");
        assert_eq!(std::fs::read(t.path().join("in.co")).expect("read"), before);
    }
    let r = run(
        t.path(),
        &[
            "batch",
            "in.co",
            "--check",
            "--functions",
            "1",
            "--baseline",
            "/dev/zero",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "/dev/zero: cannot read the baseline: not a regular file and longer than 256 MiB"
        ),
        "{}",
        r.stderr
    );
}

/// Issue 32, item 1: `-o LINK` writes through a symbolic link and never replaces it (as `cp`
/// does); a dangling link is refused before any work, and nothing is written.
#[test]
fn a_symbolic_link_output_is_written_through_not_replaced() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    std::fs::create_dir(t.path().join("real")).expect("mkdir");
    std::fs::write(t.path().join("real/o.co"), b"old").expect("write");
    std::os::unix::fs::symlink("real/o.co", t.path().join("link.co")).expect("symlink");
    std::os::unix::fs::symlink("real/none.co", t.path().join("dangling.co")).expect("symlink");
    let r = run(t.path(), &["in.co", "-o", "link.co", "--functions", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let link = std::fs::symlink_metadata(t.path().join("link.co")).expect("link");
    assert!(link.file_type().is_symlink(), "the link was replaced");
    let written = std::fs::read(t.path().join("real/o.co")).expect("target");
    assert!(
        written.starts_with(b"\x7fELF"),
        "the target holds the output"
    );
    assert_eq!(
        r.files,
        files(&["dangling.co", "in.co", "link.co", "real/", "real/o.co"])
    );
    let r = run(
        t.path(),
        &["in.co", "-o", "dangling.co", "--functions", "1"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.first_line().starts_with(
            "sqtt-patch: error: -o dangling.co: a symbolic link that leads to no file"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.files,
        files(&["dangling.co", "in.co", "link.co", "real/", "real/o.co"])
    );
}

/// Issue 32, item 6: a directory holding links to itself and to one of its files ends, visits
/// each file once (by device and inode), does not follow directory links without
/// `--follow-links`, and names what it did not visit.
#[test]
fn batch_visits_each_file_once_through_links() {
    let t = workdir(&[]);
    std::fs::create_dir(t.path().join("lib")).expect("mkdir");
    std::fs::copy(fixture(BARRIERS), t.path().join("lib/a.co")).expect("copy");
    for (target, link) in [
        (".", "lib/self1"),
        ("..", "lib/self2"),
        ("a.co", "lib/b.co"),
    ] {
        std::os::unix::fs::symlink(target, t.path().join(link)).expect("symlink");
    }
    let r = run(t.path(), &["batch", "lib", "--check", "--barriers", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("total: 1 files"), "{}", r.stdout);
    for line in [
        "sqtt-patch: note: not visited: lib/b.co: file already visited",
        "sqtt-patch: note: not visited: lib/self1: symbolic link to a directory (pass --follow-links)",
        "sqtt-patch: note: not visited: lib/self2: symbolic link to a directory (pass --follow-links)",
    ] {
        assert!(r.stderr.lines().any(|l| l == line), "{line}: {}", r.stderr);
    }
    // Followed: every directory is still visited once, so the walk ends with the same file.
    let r = run(
        t.path(),
        &[
            "batch",
            "lib",
            "--check",
            "--barriers",
            "1",
            "--follow-links",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("total: 1 files"), "{}", r.stdout);
    assert!(
        r.stderr.contains("lib/self1: directory already visited"),
        "{}",
        r.stderr
    );
}

/// Issue 32, item 9: more worker threads than CPUs are capped at the CPU count, with a note;
/// the output is the same as with the default pool.
#[test]
fn worker_threads_are_capped_at_the_cpu_count() {
    let t = workdir(&[(CALLS, "in.co")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    let job = |threads: Option<&str>, out: &str| {
        let mut c = std::process::Command::new(&bin);
        c.current_dir(t.path())
            .args(["in.co", "-o", out, "--functions", "1"]);
        match threads {
            Some(n) => c.env("RAYON_NUM_THREADS", n),
            None => c.env_remove("RAYON_NUM_THREADS"),
        };
        c.output().expect("run")
    };
    let capped = job(Some("5000"), "a.co");
    let err = String::from_utf8_lossy(&capped.stderr);
    assert_eq!(capped.status.code(), Some(0), "{err}");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        err.contains(&format!(
            "sqtt-patch: note: RAYON_NUM_THREADS=5000 is more than the {cpus} CPUs; using {cpus} worker threads"
        )),
        "{err}"
    );
    let plain = job(None, "b.co");
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(
        std::fs::read(t.path().join("a.co")).expect("a.co"),
        std::fs::read(t.path().join("b.co")).expect("b.co")
    );
}

/// Issue 32, item 15: the spec's variables take the spec's values only (`0`/`1` for a toggle),
/// and a value that is not UTF-8 is an error naming the variable, never silently ignored.
#[test]
fn environment_variables_take_the_spec_values_only() {
    use std::os::unix::ffi::OsStrExt;
    let t = workdir(&[(BARRIERS, "in.co")]);
    let bin = assert_cmd::cargo::cargo_bin("sqtt-patch");
    let job = |k: &str, v: &std::ffi::OsStr| {
        let mut c = std::process::Command::new(&bin);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SQTT_") {
                c.env_remove(name);
            }
        }
        c.current_dir(t.path())
            .args(["in.co", "-o", "o.co"])
            .env(k, v)
            .output()
            .expect("run")
    };
    for (k, v, want) in [
        (
            "SQTT_INSTRUMENT_BARRIERS",
            &b"yes"[..],
            "sqtt-patch: error: invalid SQTT_INSTRUMENT_BARRIERS=\"yes\": expected 0 or 1",
        ),
        (
            "SQTT_INSTRUMENT_FUNCTIONS",
            &b"\xff1"[..],
            "sqtt-patch: error: $SQTT_INSTRUMENT_FUNCTIONS: the value is not valid UTF-8; unset it or give its flag",
        ),
    ] {
        let o = job(k, std::ffi::OsStr::from_bytes(v));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{k}: {err}");
        assert_eq!(err.lines().next(), Some(want), "{k}");
        assert!(!t.path().join("o.co").exists(), "{k}: an output was written");
    }
    let o = job("SQTT_INSTRUMENT_BARRIERS", std::ffi::OsStr::new("1"));
    assert_eq!(o.status.code(), Some(0));
}

/// Issue 32, item 16: `--functions -1` gets our message saying which values are accepted (not
/// clap's tip about `-- -1`), and a missing input is named before "nothing requested".
#[test]
fn negative_thresholds_and_missing_inputs_get_the_right_first_message() {
    let t = workdir(&[(BARRIERS, "in.co")]);
    for (args, first) in [
        (
            &["in.co", "-o", "o.co", "--functions", "-1"][..],
            "sqtt-patch: error: invalid --functions \"-1\": expected N or cost:N with a decimal N",
        ),
        (
            &["in.co", "-o", "o.co", "--memory", "-2:5"][..],
            "sqtt-patch: error: invalid --memory \"-2:5\"",
        ),
        (
            &["missing.co", "-o", "o.co"][..],
            "sqtt-patch: error: missing.co: no such file or directory",
        ),
        (
            &["--fatbin", "missing.hipfb", "-o", "o.hipfb"][..],
            "sqtt-patch: error: missing.hipfb: no such file or directory",
        ),
        (
            &["batch", "missing", "--check"][..],
            "sqtt-patch: error: missing: no such file or directory",
        ),
    ] {
        let r = run(t.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.first_line().starts_with(first), "{args:?}: {}", r.stderr);
        assert_eq!(r.files, files(&["in.co"]), "{args:?}");
    }
}

/// Fresh tester (session 16): a second input, a number too large and a bad scope mask are named
/// as what they are, with exit 2 and nothing written.
#[test]
fn second_inputs_large_numbers_and_scope_masks_are_named() {
    let t = workdir(&[(BARRIERS, "a.co"), (BARRIERS, "b.co")]);
    let r = run(
        t.path(),
        &["a.co", "b.co", "-o", "x.co", "--functions", "1"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.first_line()
            .contains("one input per run (b.co is a second one)"),
        "{}",
        r.stderr
    );
    let r = run(
        t.path(),
        &[
            "a.co",
            "-o",
            "x.co",
            "--functions",
            "99999999999999999999999",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("out of range"), "{}", r.stderr);
    let r = run(t.path(), &["a.co", "-o", "x.co", "--scope-cu", "0xZZ"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("invalid --scope-cu"), "{}", r.stderr);
    assert_eq!(r.files, files(&["a.co", "b.co"]));
}
