//! `sqtt-patch flamegraph | perfetto | memtrace` on synthetic captures of our own instrumented
//! fixtures: the fixture is instrumented by the binary, the marker ids are read back with
//! llvm-objcopy-22 (`--dump-section=.sqtt_funcmap`), the marker stream the waves would send is
//! written in rocprofv3's layout (`ui_output_agent_*_dispatch_*/` with shaderdata, occupancy and
//! filenames JSON, the code object as `<gpu>_code_object_id_<n>.out` beside it), and the outputs
//! are checked against what that stream implies. Malformed directories: exit code 2 when nothing
//! is usable, 0 with counted warnings otherwise, never a panic.

mod support;
mod trace_capture;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};
use support::names_in;
use trace_capture::*;

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

    // A CU no wave ran on: the message names the filter that left nothing (session-17 fresh
    // tester: it blamed the capture).
    let none = run(&[
        "flamegraph",
        cap.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--cu",
        "77",
        "--simd",
        "0",
    ]);
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    assert!(
        stderr(&none)
            .contains("no cycles inside a scope marker on the waves --cu 77 --simd 0 selects"),
        "{}",
        stderr(&none)
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
