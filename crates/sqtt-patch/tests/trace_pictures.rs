//! `sqtt-patch flamegraph | timeline | perfetto` pictures on synthetic captures of our own
//! instrumented fixtures (issue 31 and issue 32 item 8): the frames, colours and title of the
//! flame graph, scopes still open when their wave ends, the per-wave timeline, and the bound on
//! the stack depth. The captures are written as in `trace.rs` (`trace_capture`).

mod trace_capture;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use trace_capture::*;

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
