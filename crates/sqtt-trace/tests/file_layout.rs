//! The decoded events do not depend on how a shader engine's records are laid out in files: one
//! compact file, or several pretty-printed files (rows of another shape inserted alike in both).
//! This pins the reader's fast slice path, the batching of records across files and the
//! parsing thread to the order-sensitive outputs: Perfetto events (thread ids in order of
//! appearance), folded stacks and memtrace blocks.

use serde_json::{json, Value};
use sqtt_trace::flame::Flame;
use sqtt_trace::memtrace::MemTrace;
use sqtt_trace::perfetto::Perfetto;
use sqtt_trace::{Options, Trace};
use std::path::Path;

/// The 50 values one wave instance sends (the layout of `examples/gen_trace.rs`): scopes,
/// points, a bare exit, one wave32 LDS address block of 34 payload words.
fn pattern() -> Vec<i64> {
    let mut p = vec![(1 << 2) | 2, (2 << 2) | 2, (3 << 2) | 2, 1, 4 << 2, 5 << 2];
    p.extend([0xFFFF_FFFF, 0]);
    p.extend((0..32).map(|l| l * 4));
    p.extend([(3 << 2) | 3, 1, 1]);
    p.extend([4 << 2; 7]);
    p
}

/// Rows per shader engine: 64 slots, wave instances in turn; every 1000th row a PRIV record
/// and every 997th an id absent from the funcmap; above two batches of 64 Ki records.
fn rows(se: i64) -> Vec<Value> {
    let pat = pattern();
    (0..140_000i64)
        .map(|i| {
            let (cu, simd, w) = (i / 16 % 4, i / 4 % 4, i % 4);
            let v = if i % 997 == 0 {
                4000 << 2
            } else {
                pat[(i / 64 % pat.len() as i64) as usize]
            };
            let flags = if i % 1000 == 999 { 2 } else { 0 };
            json!([2 * i + se, v, cu, simd, w, flags])
        })
        .collect()
}

/// Rows of other shapes (a float, a string, a short row), inserted at the same places.
fn odd(i: usize) -> Option<Value> {
    match i % 40_000 {
        5 => Some(json!([1.5, 0, 0, 0, 0, 0])),
        6 => Some(json!("row")),
        7 => Some(json!([1, 2])),
        _ => None,
    }
}

/// Writes a capture with 2 shader engines, each split into `parts` files.
fn capture(root: &Path, parts: usize, pretty: bool) {
    let ui = root.join("ui_output_agent_1_dispatch_1");
    std::fs::create_dir_all(&ui).unwrap();
    let code = json!({"code": [], "sqtt_funcmap": [
        [1, 1, "U", "kernel_scope", "", null],
        [1, 2, "F", "_Z5outerv", "gen.hip:10", null],
        [1, 3, "F", "_Z5innerv", "gen.hip:20", null],
        [1, 4, "P", "barrier", "", null],
        [1, 5, "P", "addr_trace_lds_load", "gen.hip:30", null],
        [1, null, "K", "gen_kernel", "gen.hip:1", 4096]],
        "sqtt_funcmap_payloads": [[1, 5, 34]]});
    std::fs::write(ui.join("code.json"), code.to_string()).unwrap();
    let mut occ = serde_json::Map::new();
    occ.insert("dispatches".into(), json!({"1": "gen_kernel"}));
    let mut listing = serde_json::Map::new();
    for se in 0..2i64 {
        // A new wave instance every 64 * 50 rows of each slot's pattern.
        let launches: Vec<Value> = (0..140_000i64)
            .step_by(64 * 50)
            .flat_map(|start| {
                (0..64).map(move |s| {
                    json!([2 * (start + s) + se - 1, s / 16 % 4, s / 4 % 4, s % 4, 1, 1])
                })
            })
            .collect();
        occ.insert(se.to_string(), Value::Array(launches));
        let mut all = Vec::new();
        for (i, r) in rows(se).into_iter().enumerate() {
            all.extend(odd(i));
            all.push(r);
        }
        let per = all.len().div_ceil(parts);
        let mut files = Vec::new();
        for (idx, chunk) in all.chunks(per).enumerate() {
            let name = format!("shaderdata_{se}_{idx}.json");
            let doc = json!({"type": "shaderdata",
                "records_schema": ["time", "value", "cu", "simd", "wave_id", "flags"],
                "records_count": chunk.len(), "records": chunk});
            let text = if pretty {
                serde_json::to_string_pretty(&doc).unwrap()
            } else {
                doc.to_string()
            };
            std::fs::write(ui.join(&name), text).unwrap();
            files.push(json!([name, 0, 0]));
        }
        listing.insert(se.to_string(), Value::Array(files));
    }
    std::fs::write(ui.join("occupancy.json"), Value::Object(occ).to_string()).unwrap();
    std::fs::write(
        ui.join("filenames.json"),
        json!({"version": "3.0.0", "shaderdata_filenames": listing}).to_string(),
    )
    .unwrap();
}

/// (Perfetto JSON, folded stacks, memtrace JSON, records read, warning counts).
fn outputs(root: &Path) -> (Vec<u8>, String, Vec<u8>, u64, Vec<u64>) {
    let out = tempfile::tempdir().unwrap();
    let mut t = Trace::open(root).unwrap();
    let mut p = Perfetto::new(Some(out.path()), None, false);
    let stats = t.run(&Options::default(), &mut p).unwrap();
    p.commit().unwrap();
    // The header names the source directory: make it the same for both captures.
    let perfetto = std::fs::read_to_string(&p.written[0])
        .unwrap()
        .replace(&root.display().to_string(), "ROOT")
        .into_bytes();
    let mut f = Flame::default();
    let mut t = Trace::open(root).unwrap();
    t.run(&Options::default(), &mut f).unwrap();
    let folded = f.folded(&t.names, false);
    let m_path = out.path().join("m.json");
    let mut m = MemTrace::new(std::fs::File::create(&m_path).unwrap()).unwrap();
    let mut t = Trace::open(root).unwrap();
    t.run(&Options::default(), &mut m).unwrap();
    m.finish(&t.names, false).unwrap();
    let classes = [
        "PRIV (trap handler) records dropped",
        "marker ids absent from the funcmap (dropped)",
        "shaderdata rows malformed (skipped)",
    ];
    let counts = classes.iter().map(|c| t.warnings.count(c)).collect();
    (
        perfetto,
        folded,
        std::fs::read(&m_path).unwrap(),
        stats.records,
        counts,
    )
}

#[test]
fn split_pretty_and_compact_files_give_the_same_events() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    capture(a.path(), 1, false);
    capture(b.path(), 3, true);
    let (pa, fa, ma, ra, wa) = outputs(a.path());
    let (pb, fb, mb, rb, wb) = outputs(b.path());
    assert_eq!(ra, 280_000, "every record read");
    // 140 PRIV rows and 4 x 3 odd rows per shader engine; absent ids outside payloads.
    assert_eq!((wa[0], wa[2]), (280, 24), "PRIV, odd rows");
    assert!(wa[1] > 0);
    assert_eq!((ra, &wa), (rb, &wb));
    assert!(fa.contains("\ngen_kernel;kernel_scope;_Z5outerv "), "{fa}");
    assert_eq!(fa, fb);
    assert!(pa.len() > 1_000_000);
    assert!(pa == pb, "Perfetto events differ");
    assert!(ma == mb, "memtrace blocks differ");
}
