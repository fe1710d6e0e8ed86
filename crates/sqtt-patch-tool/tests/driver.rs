//! The tools library as ROCr would load it, played by a C++ driver built against AMD's own
//! `hsa/hsa_api_trace.h` (`support`): every entry gets instrumented bytes that the independent
//! verifier accepts and that are exactly what the command line writes; everything that cannot be
//! instrumented reaches the runtime's own entry unchanged (fail open).
//!
//! Oracles: AMD's header (the layout, checked at compile time by the driver), the translation
//! validator `sqtt-verify` (which the rewriter's authors did not write in the same crate), the
//! original bytes themselves, and SHA-256 of the input for the report.

mod support;

use support::{expected, failing_closed, fixture, run, Load};

const FEATURES: [(&str, &str); 2] = [
    ("SQTT_INSTRUMENT_FUNCTIONS", "1"),
    ("SQTT_INSTRUMENT_BARRIERS", "1"),
];

fn objects() -> Vec<std::path::PathBuf> {
    vec![
        fixture("objects/gfx1100__barriers__O3.co"),
        fixture("objects/gfx942__calls__O3.co"),
        fixture("objects/gfx1201__memory__O3-g.co"),
    ]
}

fn spec(mode: &str, p: &std::path::Path) -> String {
    format!("{mode}:{}", p.display())
}

/// The load got the instrumented bytes of `input` through the runtime's memory entry.
fn assert_instrumented(l: &Load, input: &[u8], want_kind: &str) {
    assert_eq!(l.status, 0, "{}: create status", l.name);
    assert_eq!(l.destroy, 0, "{}: destroy status", l.name);
    assert_eq!(l.kind, want_kind, "{}: entry reached", l.name);
    assert!(l.valid, "{}: memory changed before destroy", l.name);
    assert!(l.offset_kept, "{}: the file offset moved", l.name);
    let want = expected(input, &FEATURES);
    assert_eq!(
        want.report.status,
        sqtt_rewrite::rewrite::Status::Instrumented
    );
    assert!(
        l.bytes == want.bytes,
        "{}: not the command line's bytes",
        l.name
    );
    assert_ne!(l.bytes, input, "{}", l.name);
    let v = sqtt_verify::verify(input, &l.bytes).expect("verifier runs");
    assert!(v.findings.is_empty(), "{}: {:?}", l.name, v.findings);
}

/// The load got exactly `input` through the runtime's own entry `kind`.
fn assert_original(l: &Load, input: &[u8], kind: &str) {
    assert_eq!(l.status, 0, "{}", l.name);
    assert_eq!(l.kind, kind, "{}: entry reached", l.name);
    assert!(
        l.bytes == input,
        "{}: the loader did not get the original bytes",
        l.name
    );
    assert!(l.valid && l.offset_kept, "{}", l.name);
}

#[test]
fn every_entry_hands_the_loader_verified_instrumented_bytes() {
    let objs = objects();
    let mut loads = Vec::new();
    for o in &objs {
        for mode in ["mem", "file", "slice", "ext", "deser"] {
            loads.push(spec(mode, o));
        }
    }
    let r = run(&[], &loads, &FEATURES);
    assert_eq!(r.onload, Some(true), "{}", r.stderr);
    assert_eq!(r.loads.len(), loads.len());
    for (l, s) in r.loads.iter().zip(&loads) {
        let (mode, path) = s.split_once(':').unwrap();
        let input = std::fs::read(path).unwrap();
        let kind = if mode == "deser" { "deser" } else { "memory" };
        assert_instrumented(l, &input, kind);
    }
    let n = loads.len();
    assert!(
        r.stderr.contains(&format!(
            "sqtt-patch-tool: {n} code objects seen, {n} instrumented, 0 unchanged, 0 from the cache; sites: barriers "
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn garbage_failed_closed_and_already_instrumented_objects_reach_the_loader_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(
        &garbage,
        (0..5000u32).map(|i| (i * 7 + 3) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let truncated = dir.path().join("truncated.co");
    let whole = std::fs::read(fixture("objects/gfx942__calls__O3.co")).unwrap();
    std::fs::write(&truncated, &whole[..whole.len() / 3]).unwrap();
    let closed = failing_closed(dir.path());
    let again = dir.path().join("again.co");
    let first = expected(
        &std::fs::read(fixture("objects/gfx1100__barriers__O3.co")).unwrap(),
        &FEATURES,
    );
    std::fs::write(&again, &first.bytes).unwrap();
    let inputs = [&garbage, &truncated, &closed, &again];
    let mut loads = Vec::new();
    for p in inputs {
        for mode in ["mem", "file", "slice"] {
            loads.push(spec(mode, p));
        }
    }
    let r = run(&[], &loads, &FEATURES);
    for (l, s) in r.loads.iter().zip(&loads) {
        let (mode, path) = s.split_once(':').unwrap();
        let kind = match mode {
            "mem" => "memory",
            m => m,
        };
        assert_original(l, &std::fs::read(path).unwrap(), kind);
    }
    assert!(
        r.stderr.contains("12 code objects seen, 0 instrumented, 12 unchanged (6 bad input, 3 failed closed, 3 not an ELF code object)"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_tool_installed_before_ours_gets_every_load() {
    let objs = objects();
    let loads: Vec<String> = objs
        .iter()
        .flat_map(|o| [spec("mem", o), spec("file", o)])
        .collect();
    let r = run(&["--pre-tool"], &loads, &FEATURES);
    // Ours turns file loads into memory loads of the instrumented bytes, through the previous
    // tool's entry.
    assert_eq!(r.pre_a, (loads.len() as u32, 0));
    for (l, s) in r.loads.iter().zip(&loads) {
        let input = std::fs::read(s.split_once(':').unwrap().1).unwrap();
        assert_instrumented(l, &input, "memory");
    }
}

#[test]
fn the_tool_declines_unknown_tables_and_empty_requests_and_touches_nothing() {
    let o = fixture("objects/gfx1100__barriers__O3.co");
    let input = std::fs::read(&o).unwrap();
    let loads = [spec("mem", &o), spec("file", &o), spec("slice", &o)];
    let r = run(&["--bad-version"], &loads, &FEATURES);
    assert_eq!(r.onload, Some(false));
    assert!(
        r.stderr.contains("unknown HsaApiTable major version 99"),
        "{}",
        r.stderr
    );
    for (l, k) in r.loads.iter().zip(["memory", "file", "slice"]) {
        assert_original(l, &input, k);
    }
    let r = run(&[], &loads, &[]);
    assert_eq!(r.onload, Some(false));
    assert!(r.stderr.contains("nothing requested"), "{}", r.stderr);
    for (l, k) in r.loads.iter().zip(["memory", "file", "slice"]) {
        assert_original(l, &input, k);
    }
    let r = run(&[], &loads, &[("SQTT_INSTRUMENT_MEMORY", "x")]);
    assert_eq!(r.onload, Some(false));
    assert!(r.stderr.contains("SQTT_INSTRUMENT_MEMORY"), "{}", r.stderr);
}

#[test]
fn the_loader_refusing_the_instrumented_bytes_gets_the_original_file() {
    let o = fixture("objects/gfx942__calls__O3.co");
    let input = std::fs::read(&o).unwrap();
    let loads = [spec("file", &o), spec("slice", &o)];
    let r = run(&["--refuse-memory"], &loads, &FEATURES);
    assert_original(&r.loads[0], &input, "file");
    assert_original(&r.loads[1], &input, "slice");
    assert!(
        r.stderr
            .contains("2 unchanged (2 the loader refused the instrumented object)"),
        "{}",
        r.stderr
    );
}

#[test]
fn many_threads_load_at_once() {
    let objs = objects();
    let loads: Vec<String> = objs
        .iter()
        .flat_map(|o| [spec("mem", o), spec("file", o), spec("slice", o)])
        .collect();
    let r = run(&["--threads", "8"], &loads, &FEATURES);
    assert_eq!(r.loads.len(), 8 * loads.len());
    for l in &r.loads {
        let i: usize = l.name.split('-').nth(1).unwrap().parse().unwrap();
        let input = std::fs::read(loads[i].split_once(':').unwrap().1).unwrap();
        assert_instrumented(l, &input, "memory");
    }
    let n = 8 * loads.len();
    assert!(
        r.stderr
            .contains(&format!("{n} code objects seen, {n} instrumented")),
        "{}",
        r.stderr
    );
}

#[test]
fn a_panic_inside_the_tool_is_caught_and_the_loader_gets_the_original() {
    let o = fixture("objects/gfx1100__barriers__O3.co");
    let input = std::fs::read(&o).unwrap();
    let loads = [
        spec("mem", &o),
        spec("file", &o),
        spec("slice", &o),
        spec("deser", &o),
    ];
    let mut env = FEATURES.to_vec();
    env.push(("SQTT_PATCH_TEST_PANIC", "1"));
    let r = run(&[], &loads, &env);
    assert_eq!(r.onload, Some(true));
    for (l, k) in r.loads.iter().zip(["memory", "file", "slice", "deser"]) {
        assert_original(l, &input, k);
    }
    assert!(
        r.stderr
            .contains("4 code objects seen, 0 instrumented, 4 unchanged (4 panic caught)"),
        "{}",
        r.stderr
    );
}
