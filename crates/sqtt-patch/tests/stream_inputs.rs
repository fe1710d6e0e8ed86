//! Inputs that are not regular files: a device that never ends (`/dev/zero`, `/dev/urandom`)
//! is read up to a limit and refused with a clear error instead of hanging or filling memory;
//! a FIFO carrying a real code object is read like the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(rel)
}

/// Runs `sqtt-patch ARGS`, killing it after 120 s (a hang fails the test instead of blocking).
fn run_bounded(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("sqtt-patch {args:?} still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Makes a FIFO at `path` (mkfifo(1)) and returns the path.
fn mkfifo(path: &Path) -> PathBuf {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    path.to_path_buf()
}

#[test]
fn endless_devices_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.so");
    let out_s = out.to_str().unwrap();
    for (args, dev) in [
        (vec!["info", "/dev/zero"], "/dev/zero"),
        (vec!["info", "/dev/urandom"], "/dev/urandom"),
        (vec!["dis", "/dev/zero"], "/dev/zero"),
        // --fatbin reads a regular file by offset; a device it reads whole, within the limit
        // (it once read /dev/zero until the kernel's OOM killer stopped it).
        (
            vec!["--fatbin", "/dev/zero", "-o", out_s, "--functions", "1"],
            "/dev/zero",
        ),
    ] {
        let o = run_bounded(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{dev}: cannot read"))
                && err.contains("not a regular file and longer than 256 MiB"),
            "{args:?}: {err}"
        );
    }
    assert!(!out.exists(), "no output after an input error");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "no temp file left"
    );
}

#[test]
fn a_fifo_input_is_read_like_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = mkfifo(&tmp.path().join("co.pipe"));
    let co = fixture("gfx942__calls__O3.co");
    let writer = {
        let (fifo, co) = (fifo.clone(), co.clone());
        std::thread::spawn(move || std::fs::write(fifo, std::fs::read(co).unwrap()).unwrap())
    };
    let from_fifo = run_bounded(&["info", fifo.to_str().unwrap()]);
    writer.join().unwrap();
    let from_file = run_bounded(&["info", co.to_str().unwrap()]);
    assert_eq!(
        from_fifo.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&from_fifo.stderr)
    );
    let strip = |o: &Output, name: &str| String::from_utf8_lossy(&o.stdout).replace(name, "IN");
    assert_eq!(
        strip(&from_fifo, fifo.to_str().unwrap()),
        strip(&from_file, co.to_str().unwrap())
    );
}

/// `-o FIFO` with no process reading it: the run says on stderr that it waits for a reader
/// (it once waited without a word), and a reader that comes later gets the same bytes as a
/// regular output file.
#[test]
fn a_fifo_output_without_a_reader_says_it_waits() {
    use std::io::{BufRead, Read};
    let tmp = tempfile::tempdir().unwrap();
    let fifo = mkfifo(&tmp.path().join("out.pipe"));
    let co = fixture("gfx942__calls__O3.co");
    let file = tmp.path().join("out.co");
    let args = |out: &Path| {
        vec![
            co.to_str().unwrap().to_string(),
            "-o".into(),
            out.to_str().unwrap().to_string(),
            "--functions".into(),
            "1".into(),
        ]
    };
    let plain = run_bounded(&args(&file).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(plain.status.code(), Some(0));
    let mut child = Command::new(BIN)
        .args(args(&fifo))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let said = rx.recv_timeout(Duration::from_secs(120));
    let Ok(said) = said else {
        child.kill().unwrap();
        panic!("no message within 120 s while waiting for a reader");
    };
    assert!(
        said.contains(fifo.to_str().unwrap()) && said.contains("a FIFO with no reader: waiting"),
        "{said}"
    );
    let mut got = Vec::new();
    std::fs::File::open(&fifo)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(
        got == std::fs::read(&file).unwrap(),
        "FIFO bytes differ from the file's"
    );
}
