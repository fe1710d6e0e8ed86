//! `sqtt-patch batch`: regression classes against an edited baseline (pinned diff text), exit
//! codes, stable reports, mirrored outputs, and the project's own CI check on `fixtures/`.
//!
//! Inputs are real code objects from `fixtures/objects` (built by clang/LLVM 22, see
//! `fixtures/README.md`); the fail-closed input is a real object whose `.rodata` section header
//! was given `SHF_EXECINSTR`, which the rewriter must refuse ("more than one executable section").

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const OPTS: [&str; 4] = ["--functions", "1", "--barriers", "1"];
/// Small real inputs: one gfx9 object with barriers and calls, one gfx11 object with calls.
const SMALL: [&str; 2] = ["gfx942__barriers__O3.co", "gfx1100__calls__O3.co"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    workspace().join("fixtures/objects").join(name)
}

/// Runs `sqtt-patch batch ARGS` with a clean environment (no `SQTT_*` defaults) in `cwd`.
fn batch(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("batch")
        .args(args)
        .output()
        .expect("run sqtt-patch")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The human report (stdout).
fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The regression block of the human report (header line and its indented lines).
fn diff_block(o: &Output) -> String {
    let err = stdout(o);
    let start = err
        .find("regressions against baseline")
        .unwrap_or_else(|| panic!("no diff in:\n{err}"));
    err[start..]
        .lines()
        .take_while(|l| !l.starts_with("sqtt-patch"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A temporary tree `root/lib/<files>` holding copies of the small inputs.
fn small_tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(t.path().join("lib")).expect("mkdir");
    for f in SMALL {
        std::fs::copy(fixture(f), t.path().join("lib").join(f)).expect("copy fixture");
    }
    t
}

/// Runs the small tree and returns the JSON report.
fn baseline_of(t: &Path) -> Value {
    let o = batch(
        t,
        &[
            &["lib", "--check", "--report-json", "base.json"][..],
            &OPTS[..],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(t.join("base.json")).expect("report"))
        .expect("json")
}

/// Writes an edited baseline and compares the small tree with it.
fn compare_with(t: &Path, base: &Value, extra: &[&str]) -> Output {
    std::fs::write(
        t.join("edited.json"),
        serde_json::to_string_pretty(base).expect("json"),
    )
    .expect("write");
    batch(
        t,
        &[
            &["lib", "--check", "--baseline", "edited.json"][..],
            &OPTS[..],
            extra,
        ]
        .concat(),
    )
}

/// The kernel row `name` of file `lib/<file>` in a report.
fn kernel<'a>(r: &'a mut Value, file: &str, name: &str) -> &'a mut Value {
    let files = r["files"].as_array_mut().expect("files");
    let f = files
        .iter_mut()
        .find(|f| f["path"] == format!("lib/{file}"))
        .expect("file in report");
    let ks = f["objects"][0]["kernels"].as_array_mut().expect("kernels");
    ks.iter_mut()
        .find(|k| k["name"] == name)
        .expect("kernel in report")
}

#[test]
fn unchanged_inputs_compare_clean_and_reports_are_stable() {
    let t = small_tree();
    let base = baseline_of(t.path());
    // The report is sorted and, without times, identical between runs.
    let o = compare_with(t.path(), &base, &["--report-json", "again.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        diff_block(&o),
        "regressions against baseline edited.json: 0\n"
    );
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("again.json")).expect("read"))
            .expect("json");
    let strip = |v: &Value| {
        let mut v = v.clone();
        v["totals"]
            .as_object_mut()
            .expect("totals")
            .remove("time_ms");
        for f in v["files"].as_array_mut().expect("files") {
            f.as_object_mut().expect("file").remove("time_ms");
        }
        v
    };
    assert_eq!(strip(&base), strip(&again));
    let paths: Vec<&str> = base["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        paths,
        ["lib/gfx1100__calls__O3.co", "lib/gfx942__barriers__O3.co"]
    );
    // Real content: the gfx942 barrier kernel is instrumented and verified.
    let mut b = base.clone();
    let k = kernel(&mut b, SMALL[0], "k_bar_reduce").clone();
    assert_eq!(k["status"], "instrumented");
    assert!(k["sites"]["barrier"].as_u64().expect("barrier sites") > 0);
    assert_eq!(b["files"][1]["objects"][0]["verifier"], "passed");
}

#[test]
fn instrumented_kernel_now_failing_closed_is_a_regression() {
    let t = small_tree();
    let base = baseline_of(t.path());
    // Same file, now with a second executable section: the rewriter must fail closed.
    let p = t.path().join("lib").join(SMALL[0]);
    let mut d = std::fs::read(&p).expect("read");
    mark_rodata_executable(&mut d);
    std::fs::write(&p, d).expect("write");
    let o = compare_with(t.path(), &base, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        diff_block(&o),
        "regressions against baseline edited.json: 3\n\
         \x20 failed-closed lib/gfx942__barriers__O3.co: kernel k_bar_branches: instrumented -> failed_closed (more than one executable section)\n\
         \x20 failed-closed lib/gfx942__barriers__O3.co: kernel k_bar_in_call: instrumented -> failed_closed (more than one executable section)\n\
         \x20 failed-closed lib/gfx942__barriers__O3.co: kernel k_bar_reduce: instrumented -> failed_closed (more than one executable section)\n"
    );
}

/// Sets `SHF_EXECINSTR` (0x4) on the `.rodata` section header (ELF64 little-endian layout:
/// `e_shoff` at 0x28, `e_shentsize/e_shnum/e_shstrndx` at 0x3a; `sh_flags` at +8).
fn mark_rodata_executable(d: &mut [u8]) {
    let u16_at = |d: &[u8], o: usize| u16::from_le_bytes([d[o], d[o + 1]]) as usize;
    let u64_at =
        |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().expect("8 bytes")) as usize;
    let (shoff, size, num, strndx) = (
        u64_at(d, 0x28),
        u16_at(d, 0x3a),
        u16_at(d, 0x3c),
        u16_at(d, 0x3e),
    );
    let strtab = u64_at(d, shoff + strndx * size + 0x18);
    for i in 0..num {
        let h = shoff + i * size;
        let name = strtab + u32::from_le_bytes(d[h..h + 4].try_into().expect("4 bytes")) as usize;
        if d[name..].starts_with(b".rodata\0") {
            d[h + 8] |= 4;
            return;
        }
    }
    panic!("no .rodata section");
}

#[test]
fn lost_kernels_and_files_are_regressions() {
    let t = small_tree();
    let mut base = baseline_of(t.path());
    let mut extra = kernel(&mut base, SMALL[1], "k_call_chain").clone();
    extra["name"] = "k_renamed_away".into();
    base["files"][0]["objects"][0]["kernels"]
        .as_array_mut()
        .expect("kernels")
        .push(extra);
    let mut gone = base["files"][1].clone();
    gone["path"] = "lib/removed.co".into();
    base["files"].as_array_mut().expect("files").push(gone);
    let o = compare_with(t.path(), &base, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        diff_block(&o),
        "regressions against baseline edited.json: 4\n\
         \x20 lost-kernel   lib/gfx1100__calls__O3.co: kernel k_renamed_away: kernel missing\n\
         \x20 lost-kernel   lib/removed.co: kernel k_bar_branches: file missing\n\
         \x20 lost-kernel   lib/removed.co: kernel k_bar_in_call: file missing\n\
         \x20 lost-kernel   lib/removed.co: kernel k_bar_reduce: file missing\n"
    );
}

#[test]
fn fewer_sites_is_a_coverage_regression() {
    let t = small_tree();
    let mut base = baseline_of(t.path());
    let k = kernel(&mut base, SMALL[0], "k_bar_reduce");
    let n = k["sites"]["barrier"].as_u64().expect("barrier sites");
    k["sites"]["barrier"] = (n + 1).into();
    k["sites"]["memory"] = 2.into();
    let o = compare_with(t.path(), &base, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        diff_block(&o),
        format!(
            "regressions against baseline edited.json: 2\n\
             \x20 coverage      lib/gfx942__barriers__O3.co: kernel k_bar_reduce: barrier sites {} -> {n}\n\
             \x20 coverage      lib/gfx942__barriers__O3.co: kernel k_bar_reduce: memory sites 2 -> 0\n",
            n + 1
        )
    );
}

#[test]
fn more_inserted_bytes_is_an_overhead_regression_unless_allowed() {
    let t = small_tree();
    let mut base = baseline_of(t.path());
    let k = kernel(&mut base, SMALL[0], "k_bar_reduce");
    let bytes = k["inserted_bytes"].as_u64().expect("bytes");
    assert!(bytes >= 16, "expected instrumented code, got {bytes} bytes");
    // Baseline 3/4 of today's bytes: today's run grew by 33.3 %.
    let old = bytes * 3 / 4;
    k["inserted_bytes"] = old.into();
    let o = compare_with(t.path(), &base, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let growth = (bytes - old) as f64 * 100.0 / old as f64;
    assert_eq!(
        diff_block(&o),
        format!(
            "regressions against baseline edited.json: 1\n\
             \x20 overhead      lib/gfx942__barriers__O3.co: kernel k_bar_reduce: inserted bytes {old} -> {bytes} (+{growth:.1}% > 0%)\n"
        )
    );
    let allowed = compare_with(t.path(), &base, &["--max-overhead-growth", "40"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let tight = compare_with(t.path(), &base, &["--max-overhead-growth", "30"]);
    assert_eq!(tight.status.code(), Some(4), "{}", stderr(&tight));
}

#[test]
fn lower_occupancy_is_a_regression() {
    let t = small_tree();
    let mut base = baseline_of(t.path());
    let k = kernel(&mut base, SMALL[1], "k_call_chain");
    let occ = k["occupancy_after"].as_u64().expect("occupancy");
    k["occupancy_after"] = (occ + 2).into();
    let o = compare_with(t.path(), &base, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        diff_block(&o),
        format!(
            "regressions against baseline edited.json: 1\n\
             \x20 occupancy     lib/gfx1100__calls__O3.co: kernel k_call_chain: occupancy after {} -> {occ} waves/SIMD\n",
            occ + 2
        )
    );
}

#[test]
fn update_baseline_accepts_and_other_options_are_an_input_error() {
    let t = small_tree();
    let mut base = baseline_of(t.path());
    kernel(&mut base, SMALL[1], "k_call_chain")["occupancy_after"] = 99.into();
    let o = compare_with(t.path(), &base, &["--update-baseline"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("edited.json")).expect("read"))
            .expect("json");
    assert!(
        written["totals"].get("time_ms").is_none(),
        "baselines carry no times"
    );
    let o = batch(
        t.path(),
        &[
            "lib",
            "--check",
            "--baseline",
            "edited.json",
            "--functions",
            "1",
            "--barriers",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = batch(
        t.path(),
        &[
            "lib",
            "--check",
            "--baseline",
            "edited.json",
            "--barriers",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("baseline made with other options: functions Count(1) -> Off"),
        "{}",
        stderr(&o)
    );
    // `--loops` is an option of the run too (it was not compared: a run with loops against a
    // baseline without them reported bogus overhead regressions, exit 4); a baseline that has
    // no `loops` key means loops off.
    let o = batch(
        t.path(),
        &[
            "lib",
            "--check",
            "--baseline",
            "edited.json",
            "--functions",
            "1",
            "--barriers",
            "1",
            "--loops",
            "2:iters",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("baseline made with other options: loops - -> 2:iters"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn outputs_mirror_the_tree_and_input_errors_exit_2() {
    let t = small_tree();
    std::fs::create_dir_all(t.path().join("lib/sub")).expect("mkdir");
    std::fs::rename(
        t.path().join("lib").join(SMALL[1]),
        t.path().join("lib/sub").join(SMALL[1]),
    )
    .expect("mv");
    std::fs::write(t.path().join("lib/README.txt"), "not an input").expect("write");
    let o = batch(t.path(), &[&["lib", "-o", "out"][..], &OPTS[..]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in [
        format!("out/lib/{}", SMALL[0]),
        format!("out/lib/sub/{}", SMALL[1]),
    ] {
        let bytes = std::fs::read(t.path().join(&f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(
            bytes.windows(12).any(|w| w == b".sqtt_patch\0"),
            "{f} is not instrumented"
        );
    }
    assert!(!t.path().join("out/lib/README.txt").exists());
    // The walk's non-input is named, not silently dropped.
    assert!(
        stdout(&o).contains("not inputs: 1 file(s)")
            && stdout(&o).contains(
                "lib/README.txt: not an AMDGPU code object, offload bundle or x86-64 host ELF"
            ),
        "{}",
        stdout(&o)
    );
    // Glob: only the matching file; an explicit non-code-object file and a missing path: exit 2.
    let o = batch(
        t.path(),
        &[
            &["lib/**/gfx1100*.co", "--check", "--report-json", "-"][..],
            &OPTS[..],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).expect("json on stdout");
    assert_eq!(r["files"][0]["path"], format!("lib/sub/{}", SMALL[1]));
    assert_eq!(r["files"].as_array().map(Vec::len), Some(1));
    let o = batch(
        t.path(),
        &[&["lib/README.txt", "missing.co", "--check"][..], &OPTS[..]].concat(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("missing.co: no such file or directory"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("error: not an AMDGPU code object, offload bundle or x86-64 host ELF"),
        "{}",
        stdout(&o)
    );
    // A well-formed x86-64 ELF named explicitly that has no `.hip_fatbin` (this test's own
    // executable) is "not a HIP host binary", not "malformed" (session-27 tester).
    let exe = std::env::current_exe().expect("test executable");
    std::fs::copy(&exe, t.path().join("host.elf")).expect("copy");
    let o = batch(
        t.path(),
        &[&["host.elf", "--check"][..], &OPTS[..]].concat(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("error: host.elf: not a HIP host binary: no .hip_fatbin section"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("malformed"), "{}", stdout(&o));
    // An ELF file cut inside its header is named as truncated, as the main job names it
    // (session-28 tester: "not an AMDGPU code object, offload bundle or x86-64 host ELF").
    let head = std::fs::read(t.path().join("host.elf")).expect("read")[..16].to_vec();
    std::fs::write(t.path().join("t16.co"), head).expect("write");
    let o = batch(t.path(), &[&["t16.co", "--check"][..], &OPTS[..]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("error: a truncated ELF file (16 bytes; an ELF64 header has 64)"),
        "{}",
        stdout(&o)
    );
}

/// The project's own CI check: every fixture against the committed baseline.
#[test]
fn fixtures_match_the_committed_baseline() {
    let ws = workspace();
    let o = batch(
        &ws.join("fixtures"),
        &[
            &[
                "objects",
                "bundles",
                "hosts",
                "--check",
                "--baseline",
                "baseline.json",
            ][..],
            &OPTS[..],
        ]
        .concat(),
    );
    assert_eq!(
        diff_block(&o),
        "regressions against baseline baseline.json: 0\n",
        "{}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// `-o` never writes over an input and never lies inside an input directory: `batch lib -o .`
/// would replace `lib/<file>` by its own output (it once did, exit 0), and `batch lib -o
/// lib/out` would read its own outputs as inputs on the next run. Both are refused before any
/// work (exit 2), and the inputs keep their bytes.
#[test]
fn outputs_never_overwrite_or_nest_in_inputs() {
    let t = small_tree();
    let before = std::fs::read(t.path().join("lib").join(SMALL[0])).expect("read input");
    for (out, want) in [
        (".", "is an input of this run"),
        ("lib/out", "inside input directory lib"),
        ("lib/../lib", "inside input directory lib"),
    ] {
        let o = batch(t.path(), &[&["lib", "-o", out][..], &OPTS[..]].concat());
        assert_eq!(o.status.code(), Some(2), "-o {out}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "-o {out}: {}", stderr(&o));
        assert_eq!(
            std::fs::read(t.path().join("lib").join(SMALL[0])).expect("read input"),
            before,
            "-o {out}: the input is unchanged"
        );
    }
    assert!(!t.path().join("lib/out").exists());
    // Beside the inputs is fine.
    let o = batch(t.path(), &[&["lib", "-o", "out"][..], &OPTS[..]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The line starting with `prefix` (after indentation) in the human report.
fn line_of(o: &Output, prefix: &str) -> String {
    stdout(o)
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{}", stdout(o)))
        .to_string()
}

/// A code object that fails closed counts against the coverage line, never for it: one that
/// failed after its sites were found (here: a kernel's metadata lost its `.sgpr_count` key, so
/// the reserved SGPRs cannot be covered) adds its sites as found and not instrumented; one that
/// failed before they were looked for (a second executable section) is named as not counted.
#[test]
fn coverage_counts_the_sites_of_objects_that_failed_closed() {
    const TRACE: [&str; 4] = ["--trace-addresses", "memory,lds", "--scope", "--check"];
    let t = tempfile::tempdir().expect("tempdir");
    let lib = t.path().join("lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    let good = std::fs::read(fixture(SMALL[1])).expect("read");
    std::fs::write(lib.join("good.co"), &good).expect("write");
    // Runs the batch over `lib` (exit 0 asserted) and returns its report.
    let run = || {
        let o = batch(t.path(), &[&["lib"][..], &TRACE[..]].concat());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    assert_eq!(
        line_of(&run(), "coverage:"),
        "coverage: address_trace 8/8 sites (100.0 %)"
    );
    let mut sount = good.clone();
    let at = sount
        .windows(11)
        .position(|w| w == b".sgpr_count")
        .expect(".sgpr_count in the note");
    sount[at + 7] = b's';
    std::fs::write(lib.join("sount.co"), &sount).expect("write");
    let o = run();
    assert_eq!(
        line_of(&o, "coverage:"),
        "coverage: address_trace 8/16 sites (50.0 %)"
    );
    assert_eq!(
        line_of(&o, "not instrumented (failed closed):"),
        "not instrumented (failed closed): address_trace=8"
    );
    let mut two = good;
    mark_rodata_executable(&mut two);
    std::fs::write(lib.join("two.co"), &two).expect("write");
    assert_eq!(
        line_of(&run(), "coverage:"),
        "coverage: address_trace 8/16 sites (50.0 %); not counted: 1 code object that failed closed before its sites were found"
    );
}

/// Several bundles and host binaries in one batch, written and checked: their containers run
/// on rayon workers at once, each instrumenting its entries on the same pool. The session-12
/// bundle pipeline blocked those workers and this never ended (fresh tester); the run is killed
/// after two minutes so a regression fails instead of hanging CI.
#[test]
fn many_containers_in_one_batch_finish() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(BIN)
        .current_dir(t.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("batch")
        .arg(workspace().join("fixtures/bundles"))
        .arg(workspace().join("fixtures/hosts"))
        .args(["--functions", "1", "--barriers", "1", "-o", "out"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run sqtt-patch");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("batch over fixtures/bundles and fixtures/hosts did not finish in 2 minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let written = std::fs::read_dir(t.path().join("out"))
        .expect("out")
        .count();
    assert!(written >= 2, "{written} outputs");
}

/// `batch LIBDIR -o OUTDIR --copy-tree` (issue 37, a rocBLAS/hipBLASLt library directory):
/// OUTDIR is the copy of LIBDIR — the catalogue, an unrelated file and a file in a subdirectory
/// byte-identical, a symbolic link recreated with its link text, every code object instrumented
/// (it has a `.sqtt_funcmap`) with its kernel names, `.kd` symbols and kernel argument layouts
/// (`.args` of the metadata note) unchanged.
#[test]
fn copy_tree_makes_outdir_a_copy_of_the_library_directory() {
    let t = tempfile::tempdir().expect("tempdir");
    let lib = t.path().join("library");
    std::fs::create_dir_all(lib.join("gfx90a")).expect("mkdir");
    let tensile = workspace().join("fixtures/tensile");
    std::fs::copy(
        tensile.join("gfx908__tensile__O3.co"),
        lib.join("TensileLibrary_gfx908.co"),
    )
    .expect("copy");
    std::fs::copy(
        tensile.join("gfx90a__tensile__O3.co"),
        lib.join("gfx90a/TensileLibrary_gfx90a.co"),
    )
    .expect("copy");
    std::fs::write(
        lib.join("TensileLibrary_gfx908.dat"),
        b"\x82\xa4name\xa3gemm",
    )
    .expect("dat");
    std::fs::write(lib.join("gfx90a/notes.txt"), b"not code\n").expect("txt");
    std::os::unix::fs::symlink("TensileLibrary_gfx908.co", lib.join("current.co")).expect("ln");
    // A link that sorts before the file it names: the file is still instrumented where it is
    // and the link stays a link (found by the fresh tester: the link was processed instead).
    std::os::unix::fs::symlink("gfx90a/TensileLibrary_gfx90a.co", lib.join("a_first.co"))
        .expect("ln");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::Permissions::from_mode(0o750);
    std::fs::set_permissions(lib.join("TensileLibrary_gfx908.co"), mode).expect("chmod");
    let out = t.path().join("copy");
    let o = batch(
        t.path(),
        &[
            "library",
            "-o",
            "copy",
            "--copy-tree",
            "--barriers",
            "1",
            "--kernel-scopes",
        ],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("2 other file(s) copied unchanged, 2 link(s) recreated"),
        "{}",
        stdout(&o)
    );
    for f in ["TensileLibrary_gfx908.dat", "gfx90a/notes.txt"] {
        assert_eq!(
            std::fs::read(lib.join(f)).expect("in"),
            std::fs::read(out.join(f)).expect("out"),
            "{f} differs"
        );
    }
    assert_eq!(
        std::fs::read_link(out.join("current.co")).expect("link"),
        Path::new("TensileLibrary_gfx908.co")
    );
    assert_eq!(
        std::fs::read_link(out.join("a_first.co")).expect("link"),
        Path::new("gfx90a/TensileLibrary_gfx90a.co")
    );
    assert!(
        !out.join("library").exists(),
        "no root-name level with --copy-tree"
    );
    let out_mode = std::fs::metadata(out.join("TensileLibrary_gfx908.co"))
        .expect("output")
        .permissions()
        .mode();
    assert_eq!(out_mode & 0o777, 0o750, "an output keeps its input's mode");
    // A second run into the same, now non-empty, OUTDIR is refused before anything is written
    // (an entry there, a link especially, would be written through or left stale).
    let again = batch(
        t.path(),
        &["library", "-o", "copy", "--copy-tree", "--barriers", "1"],
    );
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("new or empty directory"),
        "{}",
        stderr(&again)
    );
    for f in [
        "TensileLibrary_gfx908.co",
        "gfx90a/TensileLibrary_gfx90a.co",
    ] {
        let (a, b) = (
            std::fs::read(lib.join(f)).expect("in"),
            std::fs::read(out.join(f)).expect("out"),
        );
        let (ca, cb) = (
            hsaco::CodeObject::parse(&a).expect("input parses"),
            hsaco::CodeObject::parse(&b).expect("output parses"),
        );
        assert!(
            ca.funcmap().is_none() && cb.funcmap().is_some(),
            "{f}: not instrumented"
        );
        let names =
            |c: &hsaco::CodeObject| c.kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&ca), names(&cb), "{f}: kernel names");
        let kd = |path: &Path| -> Vec<String> {
            let o = Command::new("llvm-readelf-22")
                .args(["--dyn-syms", "-W"])
                .arg(path)
                .output()
                .expect("llvm-readelf-22 (tools/setup.sh installs it)");
            let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.ends_with(".kd"))
                .map(|l| l.split_whitespace().skip(2).collect::<Vec<_>>().join(" "))
                .collect();
            v.sort();
            v
        };
        let (ka, kb) = (kd(&lib.join(f)), kd(&out.join(f)));
        assert!(!ka.is_empty(), "{f}: no .kd symbols read");
        assert_eq!(ka, kb, "{f}: .kd symbols (size, type, binding, name)");
        // `.name` and `.args` of every kernel in the metadata note (AMDGPUUsage, code object V5
        // metadata).
        let args = |c: &hsaco::CodeObject| -> Vec<String> {
            let get = |v: &rmpv::Value, key: &str| -> Option<rmpv::Value> {
                v.as_map()?
                    .iter()
                    .find(|(k, _)| k.as_str() == Some(key))
                    .map(|(_, v)| v.clone())
            };
            let mut out = Vec::new();
            for m in &c.metadata {
                let kernels = get(&m.root, "amdhsa.kernels").expect("amdhsa.kernels");
                for k in kernels.as_array().expect("kernel list") {
                    out.push(format!("{:?} {:?}", get(k, ".name"), get(k, ".args")));
                }
            }
            out
        };
        assert!(!args(&ca).is_empty(), "{f}: no kernels in the note");
        assert_eq!(args(&ca), args(&cb), "{f}: kernel argument layouts");
    }
}

/// Issue 32 item 13: file names that are not UTF-8 keep their bytes in `batch -o` (before, both
/// names below became `k\u{FFFD}.co`: one output, the other refused as "given twice"), and
/// `--copy-tree` keeps them too.
#[test]
fn names_that_are_not_utf8_keep_their_bytes_in_outputs() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("in");
    std::fs::create_dir(&src).unwrap();
    let names = [
        OsStr::from_bytes(b"k\xff.co"),
        OsStr::from_bytes(b"k\xfe.co"),
    ];
    for n in names {
        std::fs::copy(fixture(SMALL[0]), src.join(n)).unwrap();
    }
    for (out, copy_tree) in [("out", false), ("tree", true)] {
        let mut args = vec!["in", "-o", out];
        if copy_tree {
            args.push("--copy-tree");
        }
        args.extend(OPTS);
        let o = batch(t.path(), &args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let dir = if copy_tree {
            t.path().join(out)
        } else {
            t.path().join(out).join("in")
        };
        for n in names {
            let got = std::fs::read(dir.join(n)).unwrap_or_else(|e| panic!("{n:?}: {e}"));
            assert_ne!(
                got,
                std::fs::read(fixture(SMALL[0])).unwrap(),
                "{n:?} instrumented"
            );
        }
        let listed = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(listed, 2, "exactly the two names in {}", dir.display());
    }
}

/// A FIFO named as an input is refused as what it is (it was reported as missing).
#[test]
fn a_fifo_input_is_named_as_not_a_regular_file() {
    let t = tempfile::tempdir().unwrap();
    let ok = Command::new("mkfifo")
        .arg(t.path().join("f"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    let mut args = vec!["f", "--check"];
    args.extend(OPTS);
    let o = batch(t.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("f: not a regular file or directory"),
        "{}",
        stderr(&o)
    );
}

/// `--copy-tree` names what it cannot copy (a FIFO) instead of leaving it out silently, and
/// keeps directory modes (fresh tester: a mode-0700 directory came out 0755).
#[test]
fn copy_tree_names_special_files_and_keeps_directory_modes() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let lib = t.path().join("lib");
    std::fs::create_dir_all(lib.join("private")).unwrap();
    std::fs::copy(fixture(SMALL[0]), lib.join("a.co")).unwrap();
    std::fs::write(lib.join("private/notes.txt"), b"x").unwrap();
    std::fs::set_permissions(lib.join("private"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let ok = Command::new("mkfifo")
        .arg(lib.join("pipe"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    let mut args = vec!["lib", "-o", "out", "--copy-tree"];
    args.extend(OPTS);
    let o = batch(t.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not copied: lib/pipe: not a regular file"),
        "{}",
        stderr(&o)
    );
    let mode = std::fs::metadata(t.path().join("out/private"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(
        std::fs::read(t.path().join("out/private/notes.txt")).unwrap(),
        b"x"
    );
    assert!(!t.path().join("out/pipe").exists());
}
