//! The tool's own outputs, through the driver that plays ROCr (`support`): the cache (a second
//! run reads every object from it, a corrupt entry is rebuilt), the report lines (one per
//! object, with the input's SHA-256 and its kernels) and the saved copies.

mod support;

use support::{expected, failing_closed, fixture, run};

const FEATURES: [(&str, &str); 2] = [
    ("SQTT_INSTRUMENT_FUNCTIONS", "1"),
    ("SQTT_INSTRUMENT_BARRIERS", "1"),
];

fn sha256(b: &[u8]) -> String {
    sqtt_patch_tool::cache::sha256_hex(b)
}

#[test]
fn the_second_run_reads_the_cache_and_a_corrupt_entry_is_rebuilt() {
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    let objs = [
        fixture("objects/gfx1100__barriers__O3.co"),
        fixture("objects/gfx90a__calls__O3.co"),
        failing_closed(cache.path()),
    ];
    let loads: Vec<String> = objs
        .iter()
        .map(|o| format!("mem:{}", o.display()))
        .collect();
    let mut env = FEATURES.to_vec();
    let c = cache_dir.to_str().unwrap();
    env.push(("SQTT_PATCH_CACHE", c));
    let check = |r: &support::Run| {
        for (l, o) in r.loads.iter().zip(&objs) {
            let input = std::fs::read(o).unwrap();
            let want = expected(&input, &FEATURES);
            assert!(l.bytes == want.bytes, "{}: wrong bytes", l.name);
            assert!(l.valid, "{}", l.name);
        }
    };
    let first = run(&[], &loads, &env);
    check(&first);
    assert!(
        first.stderr.contains(
            "3 code objects seen, 2 instrumented, 1 unchanged (1 failed closed), 0 from the cache"
        ),
        "{}",
        first.stderr
    );
    let entries: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 3, "{entries:?}");
    let second = run(&[], &loads, &env);
    check(&second);
    assert!(
        second.stderr.contains(
            "3 code objects seen, 2 instrumented, 1 unchanged (1 failed closed), 3 from the cache"
        ),
        "{}",
        second.stderr
    );
    // Corrupt every entry: one flipped byte at the end, one truncated, one emptied.
    for (i, p) in entries.iter().enumerate() {
        let mut b = std::fs::read(p).unwrap();
        match i {
            0 => {
                let n = b.len();
                b[n - 1] ^= 0x55;
            }
            1 => b.truncate(b.len() / 2),
            _ => b.clear(),
        }
        std::fs::write(p, b).unwrap();
    }
    let third = run(&[], &loads, &env);
    check(&third);
    assert!(
        third.stderr.contains(", 0 from the cache"),
        "{}",
        third.stderr
    );
    let fourth = run(&[], &loads, &env);
    assert!(
        fourth.stderr.contains(", 3 from the cache"),
        "{}",
        fourth.stderr
    );
    // Other options: another key, no hit.
    let mut other = env.clone();
    other.retain(|(k, _)| *k != "SQTT_INSTRUMENT_FUNCTIONS");
    let fifth = run(&[], &loads, &other);
    assert!(
        fifth.stderr.contains(", 0 from the cache"),
        "{}",
        fifth.stderr
    );
}

#[test]
fn report_lines_and_saved_copies() {
    let out = tempfile::tempdir().unwrap();
    let report = out.path().join("report.jsonl");
    let save = out.path().join("saved");
    let objs = [
        fixture("objects/gfx942__calls__O3.co"),
        failing_closed(out.path()),
    ];
    let loads: Vec<String> = vec![
        format!("slice:{}", objs[0].display()),
        format!("mem:{}", objs[1].display()),
    ];
    let mut env = FEATURES.to_vec();
    env.push(("SQTT_PATCH_REPORT", report.to_str().unwrap()));
    env.push(("SQTT_PATCH_SAVE", save.to_str().unwrap()));
    let r = run(&[], &loads, &env);
    let text = std::fs::read_to_string(&report).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let input0 = std::fs::read(&objs[0]).unwrap();
    let want0 = expected(&input0, &FEATURES);
    let l0 = &lines[0];
    assert_eq!(l0["source"], "file_slice");
    assert_eq!(l0["input_sha256"], sha256(&input0));
    assert_eq!(l0["size"], input0.len());
    assert_eq!(l0["status"], "instrumented");
    assert_eq!(l0["cached"], false);
    assert_eq!(l0["size_after"], want0.bytes.len());
    let kernels: Vec<String> = want0
        .report
        .kernels
        .iter()
        .map(|k| k.name.clone())
        .collect();
    assert!(!kernels.is_empty());
    assert_eq!(l0["kernels"], serde_json::json!(kernels));
    let l1 = &lines[1];
    assert_eq!(l1["source"], "memory");
    assert_eq!(l1["status"], "unchanged");
    assert_eq!(l1["unchanged_because"], "failed closed");
    assert!(
        l1["reasons"][0]
            .as_str()
            .unwrap()
            .contains(".text cannot be kept in place: no PT_GNU_STACK program header"),
        "{l1}"
    );
    // Saved: both originals, one instrumented object, equal to what the loader got.
    let h0 = &sha256(&input0)[..16];
    let h1 = &sha256(&std::fs::read(&objs[1]).unwrap())[..16];
    assert_eq!(
        std::fs::read(save.join(format!("{h0}.orig.co"))).unwrap(),
        input0
    );
    assert_eq!(
        std::fs::read(save.join(format!("{h0}.instr.co"))).unwrap(),
        r.loads[0].bytes
    );
    assert!(save.join(format!("{h1}.orig.co")).exists());
    assert!(!save.join(format!("{h1}.instr.co")).exists());
    assert_eq!(std::fs::read_dir(&save).unwrap().count(), 3);
}

#[test]
fn an_unwritable_report_or_cache_changes_nothing_for_the_application() {
    let out = tempfile::tempdir().unwrap();
    // A file where a directory is expected: nothing can be written under it.
    let blocker = out.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let o = fixture("objects/gfx1100__barriers__O3.co");
    let input = std::fs::read(&o).unwrap();
    let mut env = FEATURES.to_vec();
    let cache = blocker.join("cache");
    let report = blocker.join("r.jsonl");
    env.push(("SQTT_PATCH_CACHE", cache.to_str().unwrap()));
    env.push(("SQTT_PATCH_REPORT", report.to_str().unwrap()));
    let r = run(&[], &[format!("mem:{}", o.display())], &env);
    assert!(r.loads[0].bytes == expected(&input, &FEATURES).bytes);
    assert!(
        r.stderr.contains("1 code objects seen, 1 instrumented"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("output errors: 1 cache write failed, 1 report line not written"),
        "{}",
        r.stderr
    );
}
