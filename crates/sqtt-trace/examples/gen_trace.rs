//! Writes a synthetic rocprofv3-style UI directory with N shaderdata records, for measuring the
//! reader on large traces (docs/trace.md, "Measurements").
//!
//! Usage: `cargo run --release -p sqtt-trace --example gen_trace -- N OUT_DIR`
//!
//! Layout: 4 shader engines, 16 CUs x 4 SIMDs x 8 slots each; every wave instance sends the same
//! 50 records (scopes, points, one wave32 LDS address block of 34 payload words); the marker
//! names come from `code.json` `sqtt_funcmap` rows of code object 1. Shaderdata files hold at most
//! 1 M records (about 50 MB) each. Times increase by 2 cycles per record within a shader engine.

use std::io::Write;

const SE: u64 = 4;
const SLOTS: u64 = 16 * 4 * 8;
const FILE_RECORDS: u64 = 1_000_000;

/// The 50 values one wave instance sends.
fn pattern() -> Vec<u32> {
    let mut p = vec![(1 << 2) | 2, (2 << 2) | 2, (3 << 2) | 2, 1, 4 << 2, 5 << 2];
    p.push(0xFFFF_FFFF);
    p.push(0);
    p.extend((0..32).map(|l| l * 4));
    p.extend([(3 << 2) | 3, 1, 1]);
    p.extend([4 << 2; 7]);
    p
}

fn slot(i: u64) -> (u64, u64, u64) {
    (i / 32, (i / 8) % 4, i % 8)
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(n), Some(out)) = (args.get(1).and_then(|s| s.parse::<u64>().ok()), args.get(2))
    else {
        eprintln!("usage: gen_trace N OUT_DIR");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(out).join("ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&dir)?;
    let pat = pattern();
    let plen = pat.len() as u64;
    let code = serde_json::json!({
        "code": [],
        "sqtt_funcmap": [
            [1, 1, "U", "kernel_scope", "", null],
            [1, 2, "F", "_Z5outerv", "gen.hip:10", null],
            [1, 3, "F", "_Z5innerv", "gen.hip:20", null],
            [1, 4, "P", "barrier", "", null],
            [1, 5, "P", "addr_trace_lds_load", "gen.hip:30", null],
            [1, null, "K", "gen_kernel", "gen.hip:1", 4096]
        ],
        "sqtt_funcmap_payloads": [[1, 5, 34]],
    });
    std::fs::write(dir.join("code.json"), code.to_string())?;
    let per_se = n / SE;
    let mut occ = std::io::BufWriter::new(std::fs::File::create(dir.join("occupancy.json"))?);
    write!(
        occ,
        "{{\"version\":\"3.0.0\",\"dispatches\":{{\"1\":\"gen_kernel\"}}"
    )?;
    let mut listing = serde_json::Map::new();
    for se in 0..SE {
        // Occupancy: a launch one cycle before each instance's first record.
        write!(occ, ",\"{se}\":[")?;
        let mut first = true;
        let mut i = 0;
        while i < per_se {
            let (cu, simd, w) = slot(i % SLOTS);
            if (i / SLOTS).is_multiple_of(plen) {
                let t = 2 * i as i64 - 1;
                write!(
                    occ,
                    "{}[{t},{cu},{simd},{w},1,1]",
                    if first { "" } else { "," }
                )?;
                first = false;
            }
            i += 1;
        }
        write!(occ, "]")?;
        let mut files = Vec::new();
        let mut start = 0;
        let mut idx = 0;
        while start < per_se {
            let end = (start + FILE_RECORDS).min(per_se);
            let name = format!("shaderdata_{se}_{idx}.json");
            let mut f =
                std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join(&name))?);
            write!(
                f,
                "{{\"type\":\"shaderdata\",\"begin_time\":{},\"end_time\":{},\"records_schema\":[\"time\",\"value\",\"cu\",\"simd\",\"wave_id\",\"flags\"],\"records_count\":{},\"records\":[",
                2 * start,
                2 * (end - 1),
                end - start
            )?;
            for i in start..end {
                let (cu, simd, w) = slot(i % SLOTS);
                let v = pat[((i / SLOTS) % plen) as usize];
                let sep = if i == start { "" } else { "," };
                write!(f, "{sep}[{},{v},{cu},{simd},{w},0]", 2 * i)?;
            }
            write!(f, "]}}")?;
            files.push(serde_json::json!([name, 2 * start, 2 * (end - 1)]));
            start = end;
            idx += 1;
        }
        listing.insert(se.to_string(), serde_json::Value::Array(files));
    }
    write!(occ, "}}")?;
    occ.flush()?;
    let names = serde_json::json!({"global_begin_time": 0, "gfxv": "vega", "gfxip": 9, "version": "3.0.0",
        "counter_names": [], "wave_filenames": {}, "other_simd_filenames": {}, "shaderdata_filenames": listing});
    std::fs::write(dir.join("filenames.json"), names.to_string())?;
    Ok(())
}
