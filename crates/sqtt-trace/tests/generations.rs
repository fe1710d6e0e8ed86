//! Issue 38, item 6: records of a wave slot before its first occupancy launch. AMD's marker
//! stream (`source/marker_stream.cpp` at 0218074, read for behaviour) decodes a record only
//! inside a wave generation opened by a wave start; a record before the slot's first one is
//! dropped, so AMD's `flamegraph.py` folds nothing here. Ours decodes them as wave instance 0
//! with the first launch's kernel (docs/trace.md, "Where we differ from AMD's readers").

use serde_json::json;
use sqtt_trace::flame::Flame;
use sqtt_trace::{Options, Trace};

#[test]
fn records_before_the_first_launch_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("code.json"),
        json!({"code": [], "sqtt_funcmap": [[3, 1, "F", "outer", "", null], [3, 5, "P", "pt", "", null]]})
            .to_string(),
    )
    .unwrap();
    // The slot's only launch is at 50; every record but the exit comes before it.
    std::fs::write(
        dir.join("occupancy.json"),
        json!({"0": [[50, 0, 0, 0, 1, 1], [100, 0, 0, 0, 0, 1]], "dispatches": {"1": "k"}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("shaderdata_0_0.json"),
        json!({"type": "shaderdata",
               "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
               "records": [[10, 6, 0, 0, 0, 0], [20, 5 << 2, 0, 0, 0, 0], [60, 1, 0, 0, 0, 0]]})
        .to_string(),
    )
    .unwrap();
    let mut t = Trace::open(tmp.path()).unwrap();
    let mut f = Flame::default();
    t.run(&Options::default(), &mut f).unwrap();
    let folded: Vec<String> = f
        .stacks(&t.names, false)
        .into_iter()
        .map(|(fr, c, _)| format!("{} {c}", fr.join(";")))
        .collect();
    // AMD's reading: nothing (the enter and the point are outside any generation; the exit at
    // 60 then finds an empty stack).
    assert_eq!(folded, ["k;outer 50"]);
    let amd_folded: [&str; 0] = [];
    assert_ne!(folded, amd_folded, "a deliberate difference");
}
