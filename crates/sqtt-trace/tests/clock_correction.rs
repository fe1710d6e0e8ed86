//! Issue 38, item 5: the two time corrections of gfx12 packed headers on one capture.
//! Layout `M:shader_clock_bits=12;shader_clock_shift=4` (code.json `sqtt_funcmap_layout`), two
//! point headers on one SIMD: at 1000 with the sampled window 992 (field 62), at 3113 with 3088
//! (field 193).
//!
//! - The spec ("GFX12 Shader Clock Packing"): origin = the first header; relative delays 0 and
//!   (3113 - 1000) - (3088 - 992) = 17; the second moves by 17 - 0 - (16 - 1) = 2: 3111.
//! - `att.py` at 3adae6a5 (`_correct_marker_timestamps`, read for behaviour): delays
//!   ((1000 & 0xFFF0) - 992) & 0xFFF0 = 0 and ((3113 & 0xFFF0) - 3088) & 0xFFF0 = 16; the second
//!   moves by 16 - 0: 3097.

use serde_json::json;
use sqtt_trace::names::NameId;
use sqtt_trace::trace::{Header, Sink, WaveInfo};
use sqtt_trace::{ClockCorrection, Options, PackedMode, Trace};

struct Times(Vec<i64>);
impl Sink for Times {
    type Wave = ();
    fn header(&mut self, _: &WaveInfo, _: &mut (), h: &Header, _: &[NameId]) {
        self.0.push(h.time);
    }
}

fn header_times(correction: ClockCorrection) -> Vec<i64> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("code.json"),
        json!({"code": [], "sqtt_funcmap": [[3, 5, "P", "pt", "", null]],
               "sqtt_funcmap_layout": [[3, 12, 4]]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("occupancy.json"),
        json!({"0": [[0, 0, 0, 0, 1, 1]], "dispatches": {"1": "k"}}).to_string(),
    )
    .unwrap();
    let packed = |field: i64| (field << 20) | (5 << 2);
    std::fs::write(
        dir.join("shaderdata_0_0.json"),
        json!({"type": "shaderdata",
               "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
               "records": [[1000, packed(62), 0, 0, 0, 0], [3113, packed(193), 0, 0, 0, 0]]})
        .to_string(),
    )
    .unwrap();
    let mut t = Trace::open(tmp.path()).unwrap();
    let mut s = Times(Vec::new());
    let opts = Options {
        packed: PackedMode::Raw,
        clock_correction: correction,
        ..Options::default()
    };
    t.run(&opts, &mut s).unwrap();
    s.0
}

#[test]
fn spec_and_att_corrections_on_one_capture() {
    assert_eq!(header_times(ClockCorrection::Spec), [1000, 3111]);
    assert_eq!(header_times(ClockCorrection::Att), [1000, 3097]);
}
