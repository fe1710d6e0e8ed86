//! An interrupted run leaves nothing unfinished behind: `--fatbin` writes its output into an
//! unnamed temporary file in `-o`'s directory (`O_TMPFILE`) from the start of the work; SIGINT or
//! SIGTERM while it runs must exit with status 130 and leave nothing, and SIGKILL must leave
//! nothing but complete outputs. The report (`--report-json`) and the object are
//! committed together: an interruption keeps both (when it arrives during their commit, and the
//! message says so) or neither.

mod support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::KillOnDrop;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

/// The largest fixture with the slowest flags: about 0.3 s of work on an idle machine, so the
/// temporary file is seen long before the run ends.
fn slow_input() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/objects/gfx942__long-branch__O3.co")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `--fatbin` of the slow input into `dir/out.co` with its report `dir/r.json`.
fn fatbin_run(dir: &Path) -> std::process::Child {
    Command::new(BIN)
        .args(["--fatbin", slow_input().to_str().unwrap(), "-o"])
        .arg(dir.join("out.co"))
        .arg("--report-json")
        .arg(dir.join("r.json"))
        .args(["--functions", "1", "--barriers", "1", "--kernel-scopes"])
        .args(["--trace-addresses", "memory,lds"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One run of `--fatbin` sent `signal` after `delay`. Returns whether the signal arrived during
/// the work (exit 130), after checking what the directory holds either way: nothing, or both
/// outputs whole (the signal came while they were being put in place); never a temporary file
/// (outputs are written into unnamed files until complete).
fn interrupted_once(signal: &str, delay: Duration) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let child = fatbin_run(dir.path());
    std::thread::sleep(delay);
    let pid = child.id().to_string();
    let _ = Command::new("kill").args([signal, &pid]).status().unwrap();
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    let both = vec!["out.co".to_string(), "r.json".to_string()];
    let left = entries(dir.path());
    match done.status.code() {
        Some(130) => {
            if stderr.contains("interrupted; no output written") {
                assert_eq!(left, Vec::<String>::new(), "{signal}: left behind");
            } else {
                // The signal came while the two outputs were being put in place.
                assert!(
                    stderr.contains("interrupted; 2 output(s) finished"),
                    "{stderr}"
                );
                assert_eq!(left, both, "{signal}");
            }
            true
        }
        // The run finished before the signal: only the outputs.
        Some(0) => {
            assert_eq!(left, both, "{signal}");
            false
        }
        // The signal came before the handler was installed (a loaded machine): the default
        // action ended the process before it had created anything.
        None => {
            assert_eq!(left, Vec::<String>::new(), "{signal}: left behind");
            false
        }
        other => panic!("{signal}: exit {other:?}: {stderr}"),
    }
}

#[test]
fn interrupted_fatbin_runs_leave_no_temporary_file() {
    for signal in ["-INT", "-TERM"] {
        let hits = (0..10u64)
            .filter(|&i| interrupted_once(signal, Duration::from_millis(20 + 30 * i)))
            .count();
        assert!(
            hits > 0,
            "{signal}: no run was interrupted during its work in 10 tries"
        );
    }
}

/// Issue 32 item 4: SIGKILL runs no handler. Whenever it arrives, the directory holds only
/// outputs that are complete (the object equal to an uninterrupted run's), never a temporary
/// file: outputs are unnamed files until linked into place.
#[test]
fn a_killed_run_leaves_no_temporary_file() {
    let reference = tempfile::tempdir().unwrap();
    let o = fatbin_run(reference.path()).wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = std::fs::read(reference.path().join("out.co")).unwrap();
    let mut killed = 0;
    for i in 0..12u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fatbin_run(dir.path());
        std::thread::sleep(Duration::from_millis(10 + 40 * i));
        let _ = child.kill();
        let status = child.wait().unwrap();
        killed += usize::from(status.code().is_none());
        for name in entries(dir.path()) {
            match name.as_str() {
                "out.co" => assert_eq!(std::fs::read(dir.path().join(&name)).unwrap(), want),
                "r.json" => {
                    let text = std::fs::read(dir.path().join(&name)).unwrap();
                    serde_json::from_slice::<serde_json::Value>(&text).expect("whole report");
                }
                other => panic!("left behind after SIGKILL at try {i}: {other}"),
            }
        }
    }
    assert!(killed > 0, "no run was killed during its work in 12 tries");
}

/// Issue 32 item 7: `-o FIFO` with no reader used to block in `open(2)` inside the commit, and
/// the signal handler, which waits for running commits, never ended the run. Now SIGINT or
/// SIGTERM ends it with 130 while it waits for a reader, and with a reader the object arrives
/// whole through the FIFO.
#[test]
fn a_fifo_without_reader_does_not_block_signals() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("out.fifo");
    support::mkfifo(&fifo);
    let start = |out: &Path| {
        Command::new(BIN)
            .arg(slow_input())
            .arg("-o")
            .arg(out)
            .args(["--functions", "1", "--barriers", "1"])
            .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
            .env_remove("SQTT_INSTRUMENT_BARRIERS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    for signal in ["-INT", "-TERM"] {
        let mut guard = KillOnDrop(start(&fifo));
        let child = &mut guard.0;
        // Long enough for the work (about 0.3 s idle) to finish and the commit to wait.
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            child.try_wait().unwrap().is_none(),
            "{signal}: ended without a reader"
        );
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "{signal}: still blocked 10 s after the signal"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(130), "{signal}");
        assert_eq!(entries(t.path()), vec!["out.fifo".to_string()], "{signal}");
    }
    // With a reader: the bytes arrive whole, as a regular file gets them.
    let reg = t.path().join("regular.co");
    let o = start(&reg).wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut guard = KillOnDrop(start(&fifo));
    let got = std::fs::read(&fifo).unwrap();
    assert!(guard.0.wait().unwrap().success());
    assert_eq!(got, std::fs::read(&reg).unwrap());
}
