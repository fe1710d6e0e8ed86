//! `sqtt-patch flamegraph | perfetto | memtrace` on synthetic captures of our own instrumented
//! fixtures: the fixture is instrumented by the binary, the marker ids are read back with
//! llvm-objcopy-22 (`--dump-section=.sqtt_funcmap`), the marker stream the waves would send is
//! written in rocprofv3's layout (`ui_output_agent_*_dispatch_*/` with shaderdata, occupancy and
//! filenames JSON, the code object as `<gpu>_code_object_id_<n>.out` beside it), and the outputs
//! are checked against what that stream implies. Malformed directories: exit code 2 when nothing
//! is usable, 0 with counted warnings otherwise, never a panic.

mod support;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::names_in;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");
const OBJCOPY: &str = "/usr/lib/llvm-22/bin/llvm-objcopy";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(rel)
}

fn run(args: &[&str]) -> Output {
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Instruments `fixture` into `out` and returns its funcmap as name -> id (LLVM's objcopy reads
/// the section).
fn instrument(fixture_name: &str, out: &Path, flags: &[&str]) -> BTreeMap<String, u32> {
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
fn write_ui(ui: &Path, per_se: &BTreeMap<u32, Vec<[i64; 6]>>, occupancy: &Value) {
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
fn calls_pattern(id: &BTreeMap<String, u32>) -> Vec<(i64, u32)> {
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
fn calls_capture(root: &Path, co: &Path, coid: u32, pattern: &[(i64, u32)], cu_bias: i64) -> usize {
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
fn calls_in(tmp: &Path) -> (PathBuf, usize) {
    let (cap, ids) = calls_code_object_in(tmp, 5);
    let waves = calls_capture(&cap, &tmp.join("calls.co"), 5, &calls_pattern(&ids), 0);
    (cap, waves)
}

/// Instruments gfx942 `calls` (functions, kernel scopes) into `tmp/calls.co` and puts it into a
/// new capture directory `tmp/cap` as code object `id`, without any UI directory yet; returns
/// the capture and the funcmap ids.
fn calls_code_object_in(tmp: &Path, id: u32) -> (PathBuf, BTreeMap<String, u32>) {
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
fn write_one_se(cap: &Path, recs: Vec<[i64; 6]>, occ: &Value) {
    write_ui(
        &cap.join("ui_output_agent_1_dispatch_7"),
        &BTreeMap::from([(0, recs)]),
        occ,
    );
}

/// Asserts that `path` is still the character device `1, minor`; when a run replaced it with a
/// regular file (as root it can), the device is made again before failing, so that one failed
/// run does not break the machine.
fn assert_char_device(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::symlink_metadata(path).expect("device node");
    assert!(
        m.file_type().is_char_device(),
        "{} was replaced",
        path.display()
    );
}

/// Runs `sqtt-patch CMD CAP -o OUT EXTRA...`.
fn run_to(cmd: &str, cap: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![cmd, cap.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args)
}

/// Runs `sqtt-patch ARGS` with `dir` as the working directory.
fn run_in(dir: &Path, args: &[&str]) -> Output {
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

fn perfetto_events(dir: &Path) -> Vec<Value> {
    let f = dir.join("ui_output_agent_1_dispatch_7.perfetto.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

#[test]
fn gfx942_calls_capture_flamegraph_and_perfetto() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, waves) = calls_in(tmp.path());
    let waves = waves as u64;
    let svg = tmp.path().join("f.svg");
    let folded = tmp.path().join("f.txt");
    let speed = tmp.path().join("f.speedscope.json");
    let o = run(&[
        "flamegraph",
        cap.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
        "--speedscope",
        speed.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = "k_call_chain";
    let expect = format!(
        "{p} {}\n{p};_Z9chain_topPKffij {}\n{p};_Z9chain_topPKffij;_Z11tiny_affinef {}\n{p};_Z9chain_topPKffij;_Z9chain_midPKffi {}\n{p};_Z9chain_topPKffij;_Z9chain_midPKffi;_Z6hornerPKfif {}\n",
        40 * waves, 30 * waves, 20 * waves, 25 * waves, 15 * waves
    );
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), expect);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("PRIV (trap handler) records dropped: {waves}")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "marker ids absent from the funcmap (dropped): {waves}"
        )),
        "{err}"
    );
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<?xml") && svg_text.contains("_Z6hornerPKfif"));
    let sp: Value = serde_json::from_slice(&std::fs::read(&speed).unwrap()).unwrap();
    let total: u64 = sp["profiles"][0]["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .sum();
    assert_eq!(total, 130 * waves);
    let demangled = run(&[
        "flamegraph",
        cap.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        "-",
        "--demangle",
        "--cu",
        "1",
    ]);
    let text = String::from_utf8_lossy(&demangled.stdout);
    assert!(
        text.contains(&format!(
            ";chain_top(float const*, float, int, unsigned int) {}\n",
            30 * waves / 2
        )),
        "{text}"
    );

    // Perfetto, microseconds at 2 GHz.
    let out = tmp.path().join("pf");
    let o = run_to("perfetto", &cap, &out, &["--clock-rate-ghz", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ev = perfetto_events(&out);
    let count = |ph: &str| ev.iter().filter(|e| e["ph"] == ph).count() as u64;
    assert_eq!(
        (count("B"), count("E"), count("i")),
        (5 * waves, 5 * waves, 0)
    );
    let threads: Vec<&str> = ev
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(threads.len() as u64, waves);
    assert!(threads.contains(&"SE1/CU1/SIMD0/W3#1"), "{threads:?}");
    let procs: Vec<&Value> = ev.iter().filter(|e| e["name"] == "process_name").collect();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0]["args"]["name"], "kernel_id 1: k_call_chain");
    // SE0/CU0/W0#0 starts at cycle 1: its first B is at 1/2000 us; horner's B at 36 cycles.
    let first_tid = ev
        .iter()
        .find(|e| e["args"]["name"] == "SE0/CU0/SIMD0/W0#0")
        .unwrap()["tid"]
        .clone();
    let mine: Vec<&Value> = ev
        .iter()
        .filter(|e| e["tid"] == first_tid && e["ph"] != "M")
        .collect();
    assert_eq!(mine[0]["ts"].as_f64().unwrap(), 1.0 / 2000.0);
    let horner = mine.iter().find(|e| e["name"] == "_Z6hornerPKfif").unwrap();
    assert_eq!(horner["ts"].as_f64().unwrap(), 36.0 / 2000.0);
    assert_eq!(horner["cat"], "sqtt.function");
    assert_eq!(mine[0]["cat"], "sqtt.user");
}

/// gfx1201 with 12-bit shader-clock packing: headers carry `(T >> 4) & 0xFFF` in bits 31..20 and
/// arrive 40 cycles after issue, one 140 cycles after. The spec's correction puts it back inside
/// its 16-cycle bucket: T + 40 + 15. `--packed normalised` (att_tool.py's view) cannot decode them.
#[test]
fn gfx1201_packed_headers_are_corrected() {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("calls1201.co");
    let ids = instrument(
        "gfx1201__calls__O3.co",
        &co,
        &[
            "--functions",
            "1",
            "--kernel-scopes",
            "--shader-clock-bits",
            "12",
        ],
    );
    let cap = tmp.path().join("cap");
    std::fs::create_dir_all(&cap).unwrap();
    std::fs::copy(&co, cap.join("gfx1201_code_object_id_3.out")).unwrap();
    let enter = |n: &str| (ids[n] << 2) | 2;
    // (issue time, legacy value, extra delay)
    let stream = [
        (160i64, enter("k_call_chain"), 0i64),
        (320, enter("_Z9chain_topPKffij"), 0),
        (480, enter("_Z6hornerPKfif"), 100),
        (640, 1, 0),
        (800, 1, 0),
        (960, 1, 0),
    ];
    let cu = 128 + 2; // WGP 2 of shader array 1
    let recs: Vec<[i64; 6]> = stream
        .iter()
        .map(|(t, v, d)| {
            let packed = (((*t as u32 >> 4) & 0xFFF) << 20) | v;
            [t + 40 + d, i64::from(packed), cu, 1, 4, 0]
        })
        .collect();
    let occ = json!({"0": [[100, cu, 1, 4, 1, 1]], "dispatches": {"1": "k_call_chain"}});
    write_one_se(&cap, recs, &occ);
    let out = tmp.path().join("pf");
    let o = run_to("perfetto", &cap, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ts: Vec<(String, i64)> = perfetto_events(&out)
        .iter()
        .filter(|e| e["ph"] == "B" || e["ph"] == "E")
        .map(|e| {
            (
                e["ph"].as_str().unwrap().to_string(),
                e["ts"].as_i64().unwrap(),
            )
        })
        .collect();
    let expect: Vec<(String, i64)> = [
        ("B", 200),
        ("B", 360),
        ("B", 535),
        ("E", 680),
        ("E", 840),
        ("E", 1000),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), *t))
    .collect();
    assert_eq!(ts, expect);
    let o = run_to("perfetto", &cap, &out, &["--packed", "normalised"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("marker ids absent from the funcmap (dropped): 6"),
        "{}",
        stderr(&o)
    );
}

/// gfx942 `memory` with `--trace-addresses memory,lds`: one wave sends a global load block (lanes
/// 4..7), an LDS block (all 64 lanes) and a raw buffer block (lanes 0 and 63).
#[test]
fn gfx942_memory_capture_memtrace() {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("mem.co");
    let ids = instrument(
        "gfx942__memory__O3.co",
        &co,
        &["--trace-addresses", "memory,lds"],
    );
    let cap = tmp.path().join("cap");
    std::fs::create_dir_all(&cap).unwrap();
    std::fs::copy(&co, cap.join("gfx942_code_object_id_2.out")).unwrap();
    let mut words: Vec<(u32, u32)> = Vec::new(); // (value, flags)
    let mut block = |id: u32, payload: Vec<u32>| {
        words.push((id << 2, 0));
        words.push((6, 2)); // a PRIV record inside the block is not payload
        words.extend(payload.into_iter().map(|v| (v, 0)));
    };
    let mut load = vec![0xF0, 0];
    load.extend((0..64u32).flat_map(|l| [0x1000 + 4 * l, 0x7f]));
    block(ids["addr_trace_load"], load);
    let mut lds = vec![u32::MAX, u32::MAX];
    lds.extend((0..64u32).map(|l| 8 * l));
    block(ids["addr_trace_lds_load"], lds);
    let mut buf = vec![1, 1 << 31, 0x2000, 1, 0x10];
    buf.extend((0..64u32).map(|l| 16 * l));
    block(ids["addr_trace_buffer_load"], buf);
    let recs: Vec<[i64; 6]> = words
        .iter()
        .enumerate()
        .map(|(i, (v, f))| [10 + i as i64, i64::from(*v), 1, 2, 3, i64::from(*f)])
        .collect();
    let occ = json!({"0": [[0, 1, 2, 3, 1, 1]], "dispatches": {"1": "k_global_rw"}});
    write_one_se(&cap, recs, &occ);
    let out = tmp.path().join("m.json");
    let o = run_to("memtrace", &cap, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Streams are written into (never replaced); a failing one is an error naming it; an input
    // of the run is refused before anything is read.
    // Device nodes of this test's own (root makes them; never the machine's /dev).
    if let Some(devs) = support::device_nodes() {
        let (null, full) = (devs.path().join("null"), devs.path().join("full"));
        let o = run_to("memtrace", &cap, &null, &[]);
        assert_char_device(&null);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let o = run_to("memtrace", &cap, &full, &[]);
        assert_char_device(&full);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains(&format!("{}: cannot write", full.display())),
            "{}",
            stderr(&o)
        );
    }
    let occ_file = cap.join("ui_output_agent_1_dispatch_7/occupancy.json");
    let before = std::fs::read(&occ_file).unwrap();
    let o = run_to("memtrace", &cap, &occ_file, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is an input of this run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&occ_file).unwrap(), before);
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    let keys: Vec<&String> = blocks[0].as_object().unwrap().keys().collect();
    let mut want = [
        "marker_id",
        "name",
        "source",
        "se",
        "cu",
        "simd",
        "wave",
        "instance",
        "time",
        "exec",
        "addresses",
    ];
    want.sort();
    assert_eq!(keys, want);
    let addrs = |b: &Value| -> Vec<u64> {
        b["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        addrs(&blocks[0]),
        (4..8u64)
            .map(|l| 0x7f_0000_0000 + 0x1000 + 4 * l)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        (blocks[0]["exec"].as_u64(), blocks[0]["time"].as_i64()),
        (Some(0xF0), Some(10))
    );
    assert_eq!(
        (
            blocks[0]["se"].as_u64(),
            blocks[0]["cu"].as_u64(),
            blocks[0]["simd"].as_u64(),
            blocks[0]["wave"].as_u64()
        ),
        (Some(0), Some(1), Some(2), Some(3))
    );
    assert_eq!(
        addrs(&blocks[1]),
        (0..64u64).map(|l| 8 * l).collect::<Vec<_>>()
    );
    assert_eq!(
        addrs(&blocks[2]),
        vec![0x1_0000_2000 + 0x10, 0x1_0000_2000 + 0x10 + 63 * 16]
    );
    assert_eq!(blocks[2]["name"], "addr_trace_buffer_load");
    let sites = v["sites"].as_array().unwrap();
    let site = |name: &str| sites.iter().find(|s| s["name"] == name).unwrap().clone();
    assert_eq!(site("addr_trace_load")["lines_64"]["max"], 1);
    assert_eq!(site("addr_trace_load")["stride"]["most_common"], 4);
    assert_eq!(site("addr_trace_lds_load")["lines_64"]["max"], 8);
    assert_eq!(site("addr_trace_lds_load")["lines_128"]["max"], 4);
    assert_eq!(site("addr_trace_lds_load")["active_lanes"]["max"], 64);
    assert_eq!(site("addr_trace_buffer_load")["stride"]["most_common"], 16);
    assert_eq!(site("addr_trace_buffer_load")["code_object"], 2);
}

#[test]
fn malformed_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("x.svg");
    let fg = |dir: &Path| {
        run(&[
            "flamegraph",
            dir.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
            "--folded",
            "-",
        ])
    };
    // Missing path and a directory without UI directories.
    let o = fg(&tmp.path().join("nope"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no such file or directory"));
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = fg(&empty);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no UI directory"));
    assert!(!svg.exists());

    let co = tmp.path().join("calls.co");
    let ids = instrument(
        "gfx942__calls__O3.co",
        &co,
        &["--functions", "1", "--kernel-scopes"],
    );
    let fresh = |name: &str| {
        let cap = tmp.path().join(name);
        std::fs::create_dir_all(&cap).unwrap();
        calls_capture(&cap, &co, 5, &calls_pattern(&ids), 0);
        let ui = cap.join("ui_output_agent_1_dispatch_7");
        (cap, ui)
    };
    // Truncated shaderdata of SE 1: SE 0 is still drawn.
    let (cap, ui) = fresh("trunc");
    let f = ui.join("shaderdata_1_0.json");
    let text = std::fs::read(&f).unwrap();
    std::fs::write(&f, &text[..text.len() / 2]).unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o)
        .contains("shaderdata JSON invalid or truncated (records before the error used): 1"));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("k_call_chain "));
    // Wrong schema everywhere: nothing to draw.
    let (cap, ui) = fresh("schema");
    std::fs::write(ui.join("shaderdata_0_0.json"), "[[1,2,3,4,5,6]]").unwrap();
    std::fs::write(
        ui.join("shaderdata_1_0.json"),
        r#"{"records_schema":["t"],"records":[[1,6,0,0,0,0]]}"#,
    )
    .unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("records_schema lacks a column") && e.contains("nothing to draw"),
        "{e}"
    );
    // Missing and truncated occupancy: one instance per slot, kernel unknown; still drawn.
    let (cap, ui) = fresh("occ");
    std::fs::remove_file(ui.join("occupancy.json")).unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("occupancy.json missing"));
    std::fs::write(ui.join("occupancy.json"), r#"{"0":[[0,0,0,0,1,1],[5"#).unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("occupancy.json invalid"));
    // No code object: every record is unusable.
    let (cap, _) = fresh("noco");
    std::fs::remove_file(cap.join("gfx942_code_object_id_5.out")).unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("records of waves whose code object has no funcmap"));
    // A code object that is not an ELF.
    std::fs::write(cap.join("gfx942_code_object_id_5.out"), b"junk").unwrap();
    let o = fg(&cap);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("code object not parsable"));
    // Memtrace on a capture without address blocks: `[]` and success, as AMD's reader; perfetto
    // with a bad clock rate.
    let (cap, _) = fresh("nomem");
    let m = tmp.path().join("m.json");
    let o = run(&["memtrace", cap.to_str().unwrap(), "-o", m.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&m).unwrap(), "[]\n");
    assert!(
        stderr(&o).contains("the capture has no address blocks (instrument with --trace-addresses"),
        "{}",
        stderr(&o)
    );
    // A capture of which nothing can be read is bad input, not an empty trace (fresh tester).
    let junk = tmp.path().join("junk/ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("occupancy.json"), "{garbage").unwrap();
    std::fs::write(junk.join("shaderdata_0.json"), "[1,2").unwrap();
    let cap = tmp.path().join("junk");
    let o = run(&["memtrace", cap.to_str().unwrap(), "-o", m.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no trace record could be read"));
    for bad in ["-1", "1e-300", "2100"] {
        let flag = format!("--clock-rate-ghz={bad}");
        let o = run(&["perfetto", cap.to_str().unwrap(), &flag]);
        assert_eq!(o.status.code(), Some(2), "--clock-rate-ghz {bad}");
        assert!(stderr(&o).contains("between 0.1 and 10"), "{}", stderr(&o));
    }
}

/// Fresh-tester findings on the outputs of the trace commands: write errors, outputs that are
/// inputs, a directory as `-o`, a second output failing after the first, `perfetto -o FILE`.
/// Each case checks the exit code, the message and what is left on disk.
#[test]
fn outputs_fail_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, _) = calls_in(tmp.path());
    let ui = cap.join("ui_output_agent_1_dispatch_7");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let w = |n: &str| work.join(n).to_str().unwrap().to_string();
    let capture = cap.to_str().unwrap();
    let fg = |extra: &[&str]| {
        let mut args = vec!["flamegraph", capture];
        args.extend_from_slice(extra);
        run(&args)
    };
    let fails = |o: &Output, needle: &str| {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        assert!(stderr(o).contains(needle), "want {needle:?}: {}", stderr(o));
    };

    // Streams (device nodes of the test's own, root only): null takes every output and stays a
    // device; full is an error naming it.
    if let Some(devs) = support::device_nodes() {
        let (null, full) = (devs.path().join("null"), devs.path().join("full"));
        let (null_s, full_s) = (null.to_str().unwrap(), full.to_str().unwrap());
        let o = fg(&["-o", null_s, "--folded", null_s, "--speedscope", null_s]);
        assert_char_device(&null);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let o = fg(&["-o", full_s]);
        assert_char_device(&full);
        fails(&o, &format!("{full_s}: cannot write"));
        // Standard output on the full device (`--folded -`): an error naming it, and no SVG.
        let stdout = std::fs::OpenOptions::new().write(true).open(&full).unwrap();
        let o = Command::new(BIN)
            .args(["flamegraph", capture, "-o", &w("a.svg"), "--folded", "-"])
            .stdout(stdout)
            .output()
            .unwrap();
        fails(&o, "standard output: cannot write");
        assert!(names_in(&work).is_empty(), "{:?}", names_in(&work));
        // A second output failing after the first was complete: neither is written.
        let o = fg(&[
            "-o",
            &w("b.svg"),
            "--folded",
            &w("b.folded"),
            "--speedscope",
            full_s,
        ]);
        fails(&o, &format!("{full_s}: cannot write"));
        assert!(names_in(&work).is_empty(), "{:?}", names_in(&work));
    }

    // Inputs of the run are never written over, whichever flag names them.
    let inputs = [
        ui.join("occupancy.json"),
        ui.join("shaderdata_0_0.json"),
        cap.join("gfx942_code_object_id_5.out"),
    ];
    for flag in ["-o", "--folded", "--speedscope"] {
        for input in &inputs {
            let before = std::fs::read(input).unwrap();
            let mut args = vec![flag, input.to_str().unwrap()];
            let svg = w("c.svg");
            if flag != "-o" {
                args.extend(["-o", &svg]);
            }
            let o = fg(&args);
            fails(&o, "is an input of this run");
            assert_eq!(std::fs::read(input).unwrap(), before, "{flag} {input:?}");
        }
    }
    assert!(names_in(&work).is_empty(), "{:?}", names_in(&work));
    // Two flags naming one file.
    let o = fg(&["-o", &w("d.svg"), "--folded", &w("d.svg")]);
    fails(&o, "the same file as -o");

    // A directory as -o: refused up front, no temporary file beside it.
    let sub = work.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let o = fg(&["-o", sub.to_str().unwrap()]);
    fails(&o, "is a directory");
    let o = run(&["memtrace", capture, "-o", sub.to_str().unwrap()]);
    fails(&o, "is a directory");
    assert_eq!(names_in(&work), ["sub"]);
    assert!(names_in(&sub).is_empty());

    // perfetto -o FILE: the message names the path; nothing is written.
    let file = work.join("not_a_dir");
    std::fs::write(&file, b"x").unwrap();
    let o = run(&["perfetto", capture, "-o", file.to_str().unwrap()]);
    fails(
        &o,
        &format!("-o {}: exists and is not a directory", file.display()),
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    // perfetto into -o DIR: no temporary file left when it succeeds, and the file has the usual
    // mode (not the temporary file's 0600).
    let pf = work.join("pf");
    let o = run(&["perfetto", capture, "-o", pf.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = std::fs::metadata(pf.join("ui_output_agent_1_dispatch_7.perfetto.json"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o644
    );
    assert_eq!(
        names_in(&pf),
        ["ui_output_agent_1_dispatch_7.perfetto.json"]
    );
    assert_eq!(
        names_in(&cap),
        [
            "gfx942_code_object_id_5.out",
            "ui_output_agent_1_dispatch_7"
        ]
    );
}

/// `(name, fill)` of every frame of a flame-graph SVG, from its `<title>` and `<rect>`.
fn svg_frames(svg: &str) -> Vec<(String, String)> {
    svg.split("<g><title>")
        .skip(1)
        .map(|g| {
            let fill = g.split(" fill=\"").nth(1).unwrap();
            (
                g[..g.find(" (").unwrap()].to_string(),
                fill[..fill.find('"').unwrap()].to_string(),
            )
        })
        .collect()
}

/// Issue 31: stacks start at the kernel (no root, no code-object frame, the kernel scope is the
/// kernel frame) in the SVG, the folded lines and speedscope; one colour per name, the same in
/// every run; a title with the capture's name and no absolute path; `--title` overrides. Two code
/// objects with a kernel of one name: the code-object frame tells them apart.
#[test]
fn flamegraph_frames_colours_and_title() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, _) = calls_in(tmp.path());
    let svg = tmp.path().join("f.svg");
    let speed = tmp.path().join("s.json");
    let fg = |extra: &[&str]| {
        let mut args = vec![
            "flamegraph",
            cap.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        (o, std::fs::read_to_string(&svg).unwrap())
    };
    let (o, text) = fg(&["--folded", "-", "--speedscope", speed.to_str().unwrap()]);
    let folded = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        folded.lines().all(|l| l.starts_with("k_call_chain")),
        "{folded}"
    );
    assert!(!folded.contains("k_call_chain;k_call_chain") && !folded.contains("code_object"));
    let sp: Value = serde_json::from_slice(&std::fs::read(&speed).unwrap()).unwrap();
    let frames: Vec<&str> = sp["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(frames.iter().filter(|f| **f == "k_call_chain").count(), 1);
    assert!(!frames.iter().any(|f| f.starts_with("code_object")));
    for p in sp["profiles"][0]["samples"].as_array().unwrap() {
        assert_eq!(frames[p[0].as_u64().unwrap() as usize], "k_call_chain");
    }
    // The SVG: kernel at the bottom, no `all` root, colours by name, title without a path.
    let drawn = svg_frames(&text);
    let names: Vec<&str> = drawn.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "k_call_chain").count(),
        1,
        "{names:?}"
    );
    assert!(!names.contains(&"all"), "{names:?}");
    assert_eq!(drawn.len(), 5);
    for (name, fill) in &drawn {
        assert_eq!(*fill, sqtt_trace::names::colour(name), "{name}");
    }
    assert!(text.contains(">cap: 1 kernel, 1 dispatch (shader cycles)</text>"));
    let tmp_text = tmp.path().to_str().unwrap();
    assert!(
        !text.contains(tmp_text) && !text.contains("/tmp"),
        "a path in the SVG"
    );
    // 4 frame rows (kernel, chain_top, chain_mid, horner) and nothing else: the pads above
    // (title and subtitle, 60) and below (34), and 4 * 16.
    assert!(text.contains(" height=\"158\""), "{}", &text[..300]);
    let (_, again) = fg(&["--folded", "-"]);
    assert_eq!(again, text, "two runs differ");
    // Demangled: the tooltip has the whole name, the label its start.
    let (_, dm) = fg(&["--demangle", "--title", "my title"]);
    assert!(dm.contains(">my title</text>"));
    assert!(dm.contains("<title>chain_top(float const*, float, int, unsigned int) ("));
    let drawn = svg_frames(&dm);
    let top = drawn.iter().find(|d| d.0.starts_with("chain_top")).unwrap();
    assert_eq!(top.1, sqtt_trace::names::colour("_Z9chain_topPKffij"));
    assert!(dm.contains(">chain_top(float const*, float, int, unsigned int)</text>"));

    // Two code objects with `k_call_chain`, one dispatch each (att_tool.py dispatch events name
    // the code object): the code-object frame appears, under the kernel's name it tells apart.
    let two = tmp.path().join("two");
    std::fs::create_dir_all(&two).unwrap();
    let ids = instrument(
        "gfx942__calls__O3.co",
        &tmp.path().join("calls6.co"),
        &["--functions", "1", "--kernel-scopes"],
    );
    for (coid, dispatch) in [(5u32, 1u32), (6, 2)] {
        let co = tmp
            .path()
            .join(if coid == 5 { "calls.co" } else { "calls6.co" });
        std::fs::copy(&co, two.join(format!("gfx942_code_object_id_{coid}.out"))).unwrap();
        let enter = |n: &str| i64::from((ids[n] << 2) | 2);
        let recs = vec![
            [10, enter("k_call_chain"), 0, 0, 0, 0],
            [20, enter("_Z9chain_topPKffij"), 0, 0, 0, 0],
            [50, 1, 0, 0, 0, 0],
            [60, 1, 0, 0, 0, 0],
        ];
        let occ = json!({"0": [[0, 0, 0, 0, 1, 1]], "dispatches": {"1": "k_call_chain"},
            "events": {"0": [{"kind": "dispatch", "kernel_id": 1, "entry_point": {"code_object_id": coid}}]}});
        write_ui(
            &two.join(format!("ui_output_agent_1_dispatch_{dispatch}")),
            &BTreeMap::from([(0, recs)]),
            &occ,
        );
    }
    let o = run(&[
        "flamegraph",
        two.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "code_object_5;k_call_chain 20\ncode_object_5;k_call_chain;_Z9chain_topPKffij 30\n\
         code_object_6;k_call_chain 20\ncode_object_6;k_call_chain;_Z9chain_topPKffij 30\n"
    );
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains(">two: 1 kernel, 2 dispatches (shader cycles)</text>"));
}

/// A wave that exits inside scopes: Perfetto closes them at the wave's occupancy end (wave A)
/// or its last record (wave B, no end row), never at their own start, with `args.unclosed`;
/// the timeline draws them to the same end, dashed.
#[test]
fn unclosed_scopes_end_at_the_wave_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, ids) = calls_code_object_in(tmp.path(), 1);
    let enter = |n: &str| i64::from((ids[n] << 2) | 2);
    let recs = vec![
        // wave A (slot 0): kernel scope, chain_top, horner; the wave ends at 100 (occupancy).
        [0, enter("k_call_chain"), 0, 0, 0, 0],
        [10, enter("_Z9chain_topPKffij"), 0, 0, 0, 0],
        [20, enter("_Z6hornerPKfif"), 0, 0, 0, 0],
        // wave B (slot 1): kernel scope, chain_top; its last record (an id absent from the
        // funcmap) at 60, no wave-end row.
        [5, enter("k_call_chain"), 0, 0, 1, 0],
        [15, enter("_Z9chain_topPKffij"), 0, 0, 1, 0],
        [60, 4000 << 2, 0, 0, 1, 0],
    ];
    let occ = json!({"0": [[0, 0, 0, 0, 1, 1], [100, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1]],
        "dispatches": {"1": "k_call_chain"}});
    write_one_se(&cap, recs, &occ);
    let out = tmp.path().join("pf");
    let o = run_to("perfetto", &cap, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ev = perfetto_events(&out);
    let tid = |w: &str| ev.iter().find(|e| e["args"]["name"] == w).unwrap()["tid"].clone();
    for (wave, begins, end) in [
        ("SE0/CU0/SIMD0/W0#0", vec![0, 10, 20], 100),
        ("SE0/CU0/SIMD0/W1#0", vec![5, 15], 60),
    ] {
        let t = tid(wave);
        let mine: Vec<&Value> = ev
            .iter()
            .filter(|e| e["tid"] == t && e["ph"] != "M")
            .collect();
        let b: Vec<i64> = mine
            .iter()
            .filter(|e| e["ph"] == "B")
            .map(|e| e["ts"].as_i64().unwrap())
            .collect();
        assert_eq!(b, begins, "{wave}");
        let ends: Vec<&&Value> = mine.iter().filter(|e| e["ph"] == "E").collect();
        assert_eq!(ends.len(), begins.len(), "{wave}");
        for e in ends {
            assert_eq!(e["ts"].as_i64(), Some(end), "{wave}");
            assert_eq!(e["args"]["unclosed"], true, "{wave}");
        }
    }
    let svg = tmp.path().join("t.svg");
    let o = run_to("timeline", &cap, &svg, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(text.matches("class=\"unclosed\"").count(), 5);
    assert!(text.contains("<title>_Z6hornerPKfif\n20 to 100 cycles (80 cycles)\nunclosed"));
    assert!(text.contains("<title>_Z9chain_topPKffij\n15 to 60 cycles (45 cycles)\nunclosed"));
}

/// `sqtt-patch timeline`: one row per wave instance, one bar per scope at its times (from the
/// dispatch's first marker), microseconds with a clock rate, no absolute path; `--max-waves`
/// bounds the rows and says so; bad limits are refused.
#[test]
fn timeline_draws_waves_scopes_and_axis() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, waves) = calls_in(tmp.path());
    let svg = tmp.path().join("t.svg");
    let o = run_to("timeline", &cap, &svg, &["--clock-rate-ghz", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{waves} waves drawn")),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains(">cap: wave timeline</text>"));
    assert_eq!(text.matches(" k_call_chain</text>").count(), waves);
    assert!(text.contains(">SE1/CU1/SIMD0/W3#1 k_call_chain</text>"));
    assert_eq!(text.matches("<g><title>").count(), 5 * waves);
    // SE0/CU0/W0#0 starts the dispatch (cycle 1): its horner runs 36..51.
    let at = text.find("<title>_Z6hornerPKfif").unwrap();
    assert!(
        text.contains("<title>_Z6hornerPKfif\n35 to 50 cycles (15 cycles, 0.0075 µs)</title>"),
        "{}",
        &text[at..at + 80]
    );
    assert!(text.contains(">1,000 / 0.500 µs</text>") || text.contains(">1,000 / 0.50 µs</text>"));
    assert!(!text.contains(tmp.path().to_str().unwrap()) && !text.contains("/tmp"));
    assert!(!text.contains("unclosed\""));
    let o = run_to(
        "timeline",
        &cap,
        &svg,
        &["--max-waves", "3", "--width", "900"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("timeline limited: 13 wave instances beyond --max-waves 3"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(text.matches(" k_call_chain</text>").count(), 3);
    assert!(text.contains("3 of 16 wave instances drawn"));
    assert!(text.contains("width=\"900\""));
    for bad in [
        ["--max-waves", "0"],
        ["--max-waves", "1001"],
        ["--width", "100"],
    ] {
        let o = run_to("timeline", &cap, &svg, &bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}

/// Issue 32 item 2: a capture is untrusted input. `filenames.json` entries leading outside their
/// UI directory (`../../`, absolute paths) and symbolic links leading out of the capture are not
/// read: each is skipped with a warning naming it, and the rest is drawn as if it were absent.
#[test]
fn capture_paths_stay_inside_the_capture() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, _) = calls_in(tmp.path());
    let ui = cap.join("ui_output_agent_1_dispatch_7");
    let svg = tmp.path().join("x.svg");
    let folded = || {
        let o = run_to("flamegraph", &cap, &svg, &["--folded", "-"]);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        (o.status.code(), out, stderr(&o))
    };
    let listing = ui.join("filenames.json");
    let names: Value = serde_json::from_slice(&std::fs::read(&listing).unwrap()).unwrap();
    // Reference: SE 0 alone.
    let mut only0 = names.clone();
    only0["shaderdata_filenames"]
        .as_object_mut()
        .unwrap()
        .remove("1");
    std::fs::write(&listing, only0.to_string()).unwrap();
    let (code, want, err) = folded();
    assert_eq!(code, Some(0), "{err}");
    assert!(want.starts_with("k_call_chain"), "{want}");

    // SE 1's file moved out of the capture and listed by `../../` and by its absolute path.
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let moved = outside.join("shaderdata_1_0.json");
    std::fs::rename(ui.join("shaderdata_1_0.json"), &moved).unwrap();
    let mut bad = names.clone();
    bad["shaderdata_filenames"]["1"][0][0] = json!("../../outside/shaderdata_1_0.json");
    bad["shaderdata_filenames"]["2"] = json!([[moved.to_str().unwrap(), 0, 0]]);
    std::fs::write(&listing, bad.to_string()).unwrap();
    let (code, got, err) = folded();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(got, want, "{err}");
    assert!(
        err.contains(
            "warning: filenames.json entry naming a path outside its UI directory (absolute or with ..; skipped): 2 (first: "
        ) && err.contains("\"../../outside/shaderdata_1_0.json\""),
        "{err}"
    );

    // The same file through a symbolic link in the UI directory, listed by its usual name.
    std::os::unix::fs::symlink(&moved, ui.join("shaderdata_1_0.json")).unwrap();
    std::fs::write(&listing, names.to_string()).unwrap();
    let (code, got, err) = folded();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(got, want, "{err}");
    let link = ui.join("shaderdata_1_0.json");
    assert!(
        err.contains(&format!(
            "warning: file leading outside the capture (symbolic link; skipped): 1 (first: {})",
            link.display()
        )),
        "{err}"
    );

    // The code object as a link to a file outside the capture: not read, so nothing decodes.
    std::fs::remove_file(ui.join("shaderdata_1_0.json")).unwrap();
    std::fs::write(&listing, only0.to_string()).unwrap();
    let co = cap.join("gfx942_code_object_id_5.out");
    std::fs::remove_file(&co).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("calls.co"), &co).unwrap();
    let (code, _, err) = folded();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "file leading outside the capture (symbolic link; skipped): 1 (first: {})",
            co.display()
        )),
        "{err}"
    );
}

/// Issue 32 item 3: `perfetto` without `-o` writes `./<capture name>.perfetto/` in the working
/// directory, never into the capture; a working directory inside the capture is refused; a
/// failed run leaves no directory it created (default or `-o`).
#[test]
fn perfetto_default_output_is_in_the_working_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, _) = calls_in(tmp.path());
    let ui = cap.join("ui_output_agent_1_dispatch_7");
    let capture = cap.to_str().unwrap();
    let before = names_in(&cap);
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let o = run_in(&work, &["perfetto", capture]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(names_in(&cap), before);
    assert_eq!(names_in(&work), ["cap.perfetto"]);
    let out = work.join("cap.perfetto");
    assert_eq!(
        names_in(&out),
        ["ui_output_agent_1_dispatch_7.perfetto.json"]
    );
    let mode = std::fs::metadata(out.join("ui_output_agent_1_dispatch_7.perfetto.json"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o644
    );
    assert!(
        stderr(&o).contains("wrote cap.perfetto/ui_output_agent_1_dispatch_7.perfetto.json"),
        "{}",
        stderr(&o)
    );
    // Two UI directories of one name under different runs keep their places below the output.
    let two = tmp.path().join("two");
    for run_dir in ["run1", "run2"] {
        let dst = two.join(run_dir).join("ui_output_agent_1_dispatch_7");
        std::fs::create_dir_all(&dst).unwrap();
        for n in names_in(&ui) {
            std::fs::copy(ui.join(&n), dst.join(&n)).unwrap();
        }
        std::fs::copy(
            cap.join("gfx942_code_object_id_5.out"),
            two.join(run_dir).join("gfx942_code_object_id_5.out"),
        )
        .unwrap();
    }
    let o = run_in(&work, &["perfetto", two.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for run_dir in ["run1", "run2"] {
        assert_eq!(
            names_in(&work.join("two.perfetto").join(run_dir)),
            ["ui_output_agent_1_dispatch_7.perfetto.json"]
        );
    }
    assert_eq!(names_in(&two), ["run1", "run2"]);
    // A working directory inside the capture: the default would be inside it; refused.
    let o = run_in(&ui, &["perfetto", capture]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("would be inside the capture"),
        "{}",
        stderr(&o)
    );
    assert_eq!(names_in(&cap), before);
    // A failed run (no marker header decodes without the code object) leaves nothing behind.
    std::fs::remove_file(cap.join("gfx942_code_object_id_5.out")).unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = run_in(&empty, &["perfetto", capture]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(names_in(&empty).is_empty(), "{:?}", names_in(&empty));
    let o = run_in(&empty, &["perfetto", capture, "-o", "new/deeper"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no marker header decoded"),
        "{}",
        stderr(&o)
    );
    assert!(names_in(&empty).is_empty(), "{:?}", names_in(&empty));
}

/// Issue 32 item 8: a wave that enters 100,000 scopes and never leaves them. The flame graph
/// keeps at most `--max-depth` (256) scope frames per stack: the run is quick, the outputs stay
/// small, and the frames cut are counted on stderr and in the SVG's details line.
#[test]
fn flamegraph_bounds_the_stack_depth() {
    let tmp = tempfile::tempdir().unwrap();
    let (cap, ids) = calls_code_object_in(tmp.path(), 1);
    let enter = |n: &str| i64::from((ids[n] << 2) | 2);
    let mut recs = vec![[0, enter("k_call_chain"), 0, 0, 0, 0]];
    for i in 1..=100_000 {
        recs.push([i * 10, enter("_Z9chain_topPKffij"), 0, 0, 0, 0]);
    }
    recs.push([1_000_010, 1, 0, 0, 0, 0]);
    let occ = json!({"0": [[0, 0, 0, 0, 1, 1]], "dispatches": {"1": "k_call_chain"}});
    write_one_se(&cap, recs, &occ);
    let (svg, folded, speed) = (
        tmp.path().join("f.svg"),
        tmp.path().join("f.folded"),
        tmp.path().join("f.json"),
    );
    let start = std::time::Instant::now();
    let o = run_to(
        "flamegraph",
        &cap,
        &svg,
        &[
            "--folded",
            folded.to_str().unwrap(),
            "--speedscope",
            speed.to_str().unwrap(),
        ],
    );
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(took.as_secs() < 60, "took {took:?}");
    // The decoder keeps 4096 levels (the rest is its own warning); of those, levels 257..=4096
    // (3840 frames) are cut from the flame graph.
    let err = stderr(&o);
    // Cut cycles: the 99,745 intervals from the 257th enter on, 10 cycles each.
    let note = "3840 scope frames deeper than --max-depth 256 cut (their 997450 cycles are in the frame at depth 256)";
    assert!(err.contains(note), "{err}");
    assert!(
        err.contains("scope stack deeper than 4096 (push dropped): 95905"),
        "{err}"
    );
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains(note), "{}", &svg_text[..2000]);
    for (f, bound) in [(&svg, 1 << 20), (&folded, 1 << 20), (&speed, 1 << 20)] {
        let n = std::fs::metadata(f).unwrap().len();
        assert!(n < bound, "{}: {n} bytes", f.display());
    }
    let text = std::fs::read_to_string(&folded).unwrap();
    let deepest = text.lines().map(|l| l.matches(';').count()).max().unwrap();
    // The kernel frame (its own scope merged into it) and 255 more scope frames.
    assert_eq!(deepest, 255, "deepest folded stack");
    // A smaller limit, and limits out of range.
    let o = run_to(
        "flamegraph",
        &cap,
        &svg,
        &["--folded", "-", "--max-depth", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("4093 scope frames deeper than --max-depth 3 cut"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 3, "{out}");
    for bad in ["0", "5000"] {
        let o = run_to("flamegraph", &cap, &svg, &["--max-depth", bad]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("--max-depth"), "{}", stderr(&o));
    }
}
