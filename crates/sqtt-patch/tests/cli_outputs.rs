//! Where the tool writes, as a user meets it (issue 17, items 1-3; split from `cli_misuse.rs`):
//! character devices and FIFOs are written into, never replaced; directories, unwritable
//! locations and reports on an input are refused before any work; a write error names the
//! output; links are written through; nothing but the named outputs is left behind (never a
//! `.tmp*` leftover). Each case pins the exit code, the first line of the message and the files
//! left in the working directory.

#[path = "support/cli.rs"]
mod cli;
mod support;
use cli::*;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

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

/// Session-25 fresh tester: a FIFO and a dangling link in a walked directory were passed over
/// without a word; each is named as not visited, and the walk goes on.
#[test]
fn batch_names_a_fifo_and_a_dangling_link_it_passes_over() {
    let t = workdir(&[]);
    std::fs::create_dir(t.path().join("lib")).expect("mkdir");
    std::fs::copy(fixture(BARRIERS), t.path().join("lib/a.co")).expect("copy");
    support::mkfifo(&t.path().join("lib/pipe"));
    std::os::unix::fs::symlink("gone.co", t.path().join("lib/dangling")).expect("symlink");
    let r = run(t.path(), &["batch", "lib", "--check", "--barriers", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("total: 1 files"), "{}", r.stdout);
    for line in [
        "sqtt-patch: note: not visited: lib/dangling: symbolic link to nothing that exists",
        "sqtt-patch: note: not visited: lib/pipe: a FIFO, not a regular file",
    ] {
        assert!(r.stderr.lines().any(|l| l == line), "{line}: {}", r.stderr);
    }
}

/// Session-27 tester: a glob printed "not visited" notes for links and FIFOs it could never
/// have matched. Only what the pattern could match is named.
#[test]
fn a_glob_names_only_what_it_could_have_matched() {
    let t = workdir(&[]);
    std::fs::create_dir(t.path().join("lib")).expect("mkdir");
    std::fs::copy(fixture(BARRIERS), t.path().join("lib/a.co")).expect("copy");
    support::mkfifo(&t.path().join("lib/pipe"));
    support::mkfifo(&t.path().join("lib/pipe.co"));
    std::os::unix::fs::symlink(".", t.path().join("lib/dirlink")).expect("symlink");
    let notes = |r: &Run| -> Vec<String> {
        r.stderr
            .lines()
            .filter(|l| l.starts_with("sqtt-patch: note: not visited: "))
            .map(str::to_string)
            .collect()
    };
    let r = run(
        t.path(),
        &["batch", "lib/*.co", "--check", "--barriers", "1"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("total: 1 files"), "{}", r.stdout);
    assert_eq!(
        notes(&r),
        ["sqtt-patch: note: not visited: lib/pipe.co: a FIFO, not a regular file"],
        "{}",
        r.stderr
    );
    // `**` can reach below the directory link: that one is named too.
    let r = run(
        t.path(),
        &["batch", "lib/**/*.co", "--check", "--barriers", "1"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        notes(&r),
        [
            "sqtt-patch: note: not visited: lib/dirlink: symbolic link to a directory (pass --follow-links)",
            "sqtt-patch: note: not visited: lib/pipe.co: a FIFO, not a regular file",
        ],
        "{}",
        r.stderr
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

/// The argument parser's errors start with the program's name like every other message
/// (session-25 fresh tester), keep its exit status 2 and write nothing; `--help` still goes to
/// stdout with exit 0.
#[test]
fn parser_errors_carry_the_program_name() {
    let dir = workdir(&[(BARRIERS, "a.co")]);
    for args in [
        &["a.co", "--no-such-flag"][..],
        &["a.co", "-o", "b.co", "--barriers"],
        &["verify"],
        &["batch", "--functions", "1"],
    ] {
        let r = run(dir.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.first_line().starts_with("sqtt-patch: error: "),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        assert_eq!(r.files, files(&["a.co"]), "{args:?}");
    }
    let help = run(dir.path(), &["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(help.stdout.contains("Usage:") && help.stderr.is_empty());
    // A subcommand given nothing prints clap's help to stderr (exit 2), not an error line
    // (the session-26 fresh tester found it prefixed).
    let bare = run(dir.path(), &["exec"]);
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(!bare.stderr.starts_with("sqtt-patch: "), "{}", bare.stderr);
    assert!(bare.stderr.contains("Usage:"), "{}", bare.stderr);
}
