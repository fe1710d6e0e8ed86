//! Issue 38, item 1, end to end: a capture whose code object's funcmap carries `R:` rows with an
//! attribute list (`R:<id>:extra_payload_count=N;other=1`). rocprof-trace-decoder's funcmap
//! parser (`funcmap.hpp` at b44343df, read for behaviour) reads the count N and ignores the
//! other key, so the block's N payload records are payload. Before, our reader rejected the row
//! ("bad R: row"), took 0, dropped the payload records as unknown marker ids and wrote no block.

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(rel)
}

fn run(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SQTT_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.args(args).output().expect("run sqtt-patch");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    out
}

#[test]
fn r_rows_with_an_attribute_list_keep_their_payload() {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("mem.co");
    let o = run(&[
        fixture("gfx942__memory__O3.co").to_str().unwrap(),
        "-o",
        co.to_str().unwrap(),
        "--trace-addresses",
        "lds",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Rewrite the funcmap: every R: row gets a second attribute.
    let bytes = std::fs::read(&co).unwrap();
    let parsed = hsaco::CodeObject::parse(&bytes).unwrap();
    let text = String::from_utf8(parsed.funcmap().unwrap().to_vec()).unwrap();
    let mut lds_id = None;
    let mut rows = Vec::new();
    for line in text.split('\n') {
        if let Some(rest) = line.strip_prefix("P:") {
            let (id, name) = rest.split_once(':').unwrap();
            if name.starts_with("addr_trace_lds_load") && lds_id.is_none() {
                lds_id = Some(id.parse::<u32>().unwrap());
            }
        }
        if line.starts_with("R:") {
            rows.push(format!("{line};other=1"));
        } else {
            rows.push(line.to_string());
        }
    }
    let new_text = rows.join("\n");
    assert!(
        new_text.contains("extra_payload_count=66;other=1"),
        "{new_text}"
    );
    let mut ed = hsaco::CodeObjectEditor::new(&parsed);
    let idx = ed.section_index(".sqtt_funcmap").unwrap();
    ed.set_section_data(idx, new_text.into_bytes()).unwrap();
    let edited = ed.write().unwrap();

    let cap = tmp.path().join("cap");
    let ui = cap.join("ui_output_agent_1_dispatch_7");
    std::fs::create_dir_all(&ui).unwrap();
    std::fs::write(cap.join("gfx942_code_object_id_2.out"), edited).unwrap();
    // One LDS block: header, exec (lanes 0..3), 64 per-lane offsets.
    let id = lds_id.expect("an addr_trace_lds_load row");
    let mut words = vec![i64::from(id << 2), 0xF, 0];
    words.extend((0..64i64).map(|l| 4 * l));
    let recs: Vec<Value> = words
        .iter()
        .enumerate()
        .map(|(i, v)| json!([10 + i as i64, v, 1, 2, 3, 0]))
        .collect();
    std::fs::write(
        ui.join("shaderdata_0_0.json"),
        json!({"type": "shaderdata",
               "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
               "records": recs})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        ui.join("occupancy.json"),
        json!({"0": [[0, 1, 2, 3, 1, 1]], "dispatches": {"1": "k"}}).to_string(),
    )
    .unwrap();
    let out = tmp.path().join("m.json");
    let o = run(&[
        "memtrace",
        cap.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("marker ids absent"), "{err}");
    assert!(!err.contains("funcmap rows skipped"), "{err}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 1, "{v}");
    assert_eq!(blocks[0]["addresses"], json!([0, 4, 8, 12]));
    assert_eq!(v["blocks_without_addresses"], 0);

    // `--clock-correction` takes `spec` (default) or `att`; anything else is refused (exit 2).
    for (value, code) in [("att", 0), ("spec", 0), ("bogus", 2)] {
        let o = run(&[
            "memtrace",
            cap.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--clock-correction",
            value,
        ]);
        assert_eq!(o.status.code(), Some(code), "{value}");
    }
}
