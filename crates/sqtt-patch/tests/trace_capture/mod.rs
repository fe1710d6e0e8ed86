//! Shared by the trace-command tests (`trace.rs`, `trace_pictures.rs`): running the binary,
//! instrumenting a fixture and reading its marker ids back, and writing synthetic captures in
//! rocprofv3's layout.
#![allow(dead_code)] // not every test file that includes this module uses every helper

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

pub const OBJCOPY: &str = "/usr/lib/llvm-22/bin/llvm-objcopy";

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(rel)
}

pub fn run(args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    // The instrumentation defaults come from SQTT_* variables: the tests pass every flag.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SQTT_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.args(args).output().expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "panic: {err}");
    out
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Instruments `fixture` into `out` and returns its funcmap as name -> id (LLVM's objcopy reads
/// the section).
pub fn instrument(fixture_name: &str, out: &Path, flags: &[&str]) -> BTreeMap<String, u32> {
    let src = fixture(fixture_name);
    let mut args = vec![src.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(flags);
    let o = run(&args);
    assert!(o.status.success(), "instrument: {}", stderr(&o));
    let dump = out.with_extension("funcmap");
    let st = Command::new(OBJCOPY)
        .arg(format!("--dump-section=.sqtt_funcmap={}", dump.display()))
        .arg(out)
        .arg(out.with_extension("objcopy"))
        .status()
        .expect("llvm-objcopy-22");
    assert!(st.success());
    let text = std::fs::read_to_string(&dump).unwrap();
    let mut ids = BTreeMap::new();
    for line in text.split(['\n', '\0']) {
        let mut parts = line.splitn(3, ':');
        if let (Some("F" | "U" | "P"), Some(id), Some(name)) =
            (parts.next(), parts.next(), parts.next())
        {
            let name = name.split('@').next().unwrap();
            // Address-trace names repeat: keep the first id of each kind.
            ids.entry(name.to_string()).or_insert(id.parse().unwrap());
        }
    }
    ids
}

/// Writes a UI directory: shaderdata per SE (records sorted by time), occupancy and filenames.
pub fn write_ui(ui: &Path, per_se: &BTreeMap<u32, Vec<[i64; 6]>>, occupancy: &Value) {
    std::fs::create_dir_all(ui).unwrap();
    let mut listing = serde_json::Map::new();
    for (se, recs) in per_se {
        let mut recs = recs.clone();
        recs.sort_by_key(|r| r[0]);
        let name = format!("shaderdata_{se}_0.json");
        let doc = json!({"type": "shaderdata", "begin_time": recs[0][0], "end_time": recs[recs.len() - 1][0],
            "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
            "records_count": recs.len(), "records": recs});
        std::fs::write(ui.join(&name), doc.to_string()).unwrap();
        listing.insert(
            se.to_string(),
            json!([[name, recs[0][0], recs[recs.len() - 1][0]]]),
        );
    }
    std::fs::write(ui.join("occupancy.json"), occupancy.to_string()).unwrap();
    let names = json!({"global_begin_time": 0, "gfxv": "vega", "gfxip": 9, "version": "3.0.0", "counter_names": [],
        "wave_filenames": {}, "other_simd_filenames": {}, "shaderdata_filenames": listing});
    std::fs::write(ui.join("filenames.json"), names.to_string()).unwrap();
}

/// The wave pattern of the gfx942 `calls` capture: (offset, value) with the folded cycles it
/// implies under `k_call_chain`'s own scope.
pub fn calls_pattern(id: &BTreeMap<String, u32>) -> Vec<(i64, u32)> {
    let enter = |n: &str| (id[n] << 2) | 2;
    vec![
        (0, enter("k_call_chain")),
        (10, enter("_Z9chain_topPKffij")),
        (30, enter("_Z9chain_midPKffi")),
        (35, enter("_Z6hornerPKfif")),
        (50, 1),
        (70, (id["_Z11tiny_affinef"] << 2) | 3),
        (90, 1),
        (100, 1),
        (130, 1),
    ]
}

/// 2 SEs x 2 CUs x 2 slots x 2 instances = 16 waves, interleaved in time, with a PRIV record and
/// a record of an id absent from the funcmap in each.
pub fn calls_capture(
    root: &Path,
    co: &Path,
    coid: u32,
    pattern: &[(i64, u32)],
    cu_bias: i64,
) -> usize {
    std::fs::copy(co, root.join(format!("gfx942_code_object_id_{coid}.out"))).unwrap();
    let mut per_se: BTreeMap<u32, Vec<[i64; 6]>> = BTreeMap::new();
    let mut occ = serde_json::Map::new();
    let mut waves = 0;
    for se in 0..2u32 {
        let mut rows = Vec::new();
        for cu in 0..2i64 {
            for slot in [0i64, 3] {
                for inst in 0..2i64 {
                    let base = inst * 1000 + 1 + (cu * 2 + slot) * 3;
                    rows.push(json!([base - 1, cu + cu_bias, 0, slot, 1, 1]));
                    rows.push(json!([base + 200, cu + cu_bias, 0, slot, 0, 1]));
                    let recs = per_se.entry(se).or_default();
                    for (dt, v) in pattern {
                        recs.push([base + dt, i64::from(*v), cu + cu_bias, 0, slot, 0]);
                    }
                    recs.push([base + 5, 6, cu + cu_bias, 0, slot, 2]);
                    recs.push([base + 60, (4000 << 2) | 2, cu + cu_bias, 0, slot, 0]);
                    waves += 1;
                }
            }
        }
        occ.insert(se.to_string(), Value::Array(rows));
    }
    occ.insert("dispatches".into(), json!({"1": "k_call_chain"}));
    occ.insert("version".into(), json!("3.0.0"));
    write_ui(
        &root.join("ui_output_agent_1_dispatch_7"),
        &per_se,
        &Value::Object(occ),
    );
    waves
}

/// Instruments gfx942 `calls` (functions, kernel scopes) into `tmp` and writes its capture as
/// `tmp/cap` (code object id 5); returns the capture directory and its wave count.
pub fn calls_in(tmp: &Path) -> (PathBuf, usize) {
    let (cap, ids) = calls_code_object_in(tmp, 5);
    let waves = calls_capture(&cap, &tmp.join("calls.co"), 5, &calls_pattern(&ids), 0);
    (cap, waves)
}

/// Instruments gfx942 `calls` (functions, kernel scopes) into `tmp/calls.co` and puts it into a
/// new capture directory `tmp/cap` as code object `id`, without any UI directory yet; returns
/// the capture and the funcmap ids.
pub fn calls_code_object_in(tmp: &Path, id: u32) -> (PathBuf, BTreeMap<String, u32>) {
    let co = tmp.join("calls.co");
    let ids = instrument(
        "gfx942__calls__O3.co",
        &co,
        &["--functions", "1", "--kernel-scopes"],
    );
    let cap = tmp.join("cap");
    std::fs::create_dir_all(&cap).unwrap();
    std::fs::copy(&co, cap.join(format!("gfx942_code_object_id_{id}.out"))).unwrap();
    (cap, ids)
}

/// Writes one shader engine's records as dispatch 7 under `cap`.
pub fn write_one_se(cap: &Path, recs: Vec<[i64; 6]>, occ: &Value) {
    write_ui(
        &cap.join("ui_output_agent_1_dispatch_7"),
        &BTreeMap::from([(0, recs)]),
        occ,
    );
}

/// Asserts that `path` is still the character device `1, minor`; when a run replaced it with a
/// regular file (as root it can), the device is made again before failing, so that one failed
/// run does not break the machine.
pub fn assert_char_device(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::symlink_metadata(path).expect("device node");
    assert!(
        m.file_type().is_char_device(),
        "{} was replaced",
        path.display()
    );
}

/// Runs `sqtt-patch CMD CAP -o OUT EXTRA...`.
pub fn run_to(cmd: &str, cap: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![cmd, cap.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args)
}

/// Runs `sqtt-patch ARGS` with `dir` as the working directory.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SQTT_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.current_dir(dir).args(args).output().expect("run");
    assert!(
        !stderr(&out).contains("panicked"),
        "panic: {}",
        stderr(&out)
    );
    out
}

pub fn perfetto_events(dir: &Path) -> Vec<Value> {
    let f = dir.join("ui_output_agent_1_dispatch_7.perfetto.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}
