//! User-named regions and points (issue 34: `--region`, `--point`, `--regions FILE`) on
//! `fixtures/loops` (`fixtures/src/loops.S`, built with `-g`: its line table names `loops.S`, one
//! row per instruction line).
//!
//! Oracles: the source file itself (which lines hold which instruction), llvm-objdump-22 (the
//! instruction at each offset of the input; the instruction right after each marker in the
//! output), the interpreter (`sqtt-interp`: the marker stream of the instrumented kernel run
//! whole) and the independent verifier (accepts every output; rejects one with an exit marker
//! taken out).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

#[path = "support/scopes.rs"]
mod scopes;
use scopes::{
    each_exit_is_needed, fixture, flamegraph, funcmap, instrument, llvm_present, objdump,
    run_kernel, scope_names, stream,
};

/// Line (1-based) of `fixtures/src/loops.S` whose text (trimmed) is `text`.
fn line_with(text: &str) -> usize {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/src/loops.S"),
    )
    .unwrap();
    src.lines()
        .position(|l| l.trim() == text)
        .unwrap_or_else(|| panic!("no line {text:?} in loops.S"))
        + 1
}

/// Offset (bytes) in function `func` of the first instruction `inst` there, by llvm-objdump-22
/// of `input` (`dis`); the symbol's address from the code object.
fn offset_of(input: &Path, dis: &BTreeMap<u64, String>, func: &str, inst: &str) -> u64 {
    let co = hsaco::CodeObject::parse(&std::fs::read(input).unwrap()).unwrap();
    let (start, end) = co
        .kernels
        .iter()
        .find(|k| k.name == func)
        .map(|k| (k.entry, k.entry + 0x10000))
        .or_else(|| {
            co.functions
                .iter()
                .find(|x| x.name == func)
                .map(|x| (x.address, x.address + x.size))
        })
        .unwrap_or_else(|| panic!("no symbol {func}"));
    dis.range(start..end)
        .find(|(_, t)| t.as_str() == inst)
        .map(|(a, _)| a - start)
        .unwrap_or_else(|| panic!("no {inst:?} in {func}"))
}

/// The row name ending in ` (<file>:<line>)` that starts with `prefix`, from `names`.
fn row<'a>(names: &'a BTreeMap<u32, String>, prefix: &str) -> &'a str {
    names
        .values()
        .find(|n| n.starts_with(prefix))
        .unwrap_or_else(|| panic!("no row {prefix}...: {names:?}"))
}

/// Every marker of the output's disassembly (llvm-objdump-22): its value and the original
/// instruction right after it (the next instruction that is no marker). gfx11:
/// `s_ttracedata_imm V`; gfx9: `s_mov_b32 m0, V; s_nop 0; s_ttracedata`.
fn markers(out: &Path) -> Vec<(u32, String)> {
    let insts: Vec<String> = objdump(out).into_values().collect();
    let num = |t: &str| match t.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    };
    // (value or None, text) per instruction; a gfx9 marker's three instructions become one.
    let mut items: Vec<(Option<u32>, &str)> = Vec::new();
    let mut i = 0;
    while i < insts.len() {
        let t = insts[i].as_str();
        if let Some(v) = t.strip_prefix("s_ttracedata_imm ").and_then(num) {
            items.push((Some(v), t));
        } else if let (Some(v), Some("s_nop 0"), Some("s_ttracedata")) = (
            t.strip_prefix("s_mov_b32 m0, ").and_then(num),
            insts.get(i + 1).map(String::as_str),
            insts.get(i + 2).map(String::as_str),
        ) {
            items.push((Some(v), t));
            i += 2;
        } else {
            items.push((None, t));
        }
        i += 1;
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(k, &(v, _))| {
            let next = items[k + 1..].iter().find(|x| x.0.is_none())?.1;
            Some((v?, next.to_string()))
        })
        .collect()
}

/// The id of the row named `name`.
fn id_of(names: &BTreeMap<u32, String>, name: &str) -> u32 {
    *names.iter().find(|(_, n)| n.as_str() == name).unwrap().0
}

/// A multi-line region holding the outer loop, a region of five lines inside it around the call,
/// and a point on a line inside that one: named with their entry's line, placed in front of the
/// instructions of those lines, entered and exited in nested order by the interpreter.
#[test]
fn line_regions_and_a_point_enter_and_exit_in_nested_order() {
    let (b0, b1) = (
        line_with("s_mov_b32 s9, 3"),
        line_with("s_cbranch_scc1 .Louter"),
    );
    let (c0, c1) = (
        line_with("s_getpc_b64 s[4:5]"),
        line_with("s_mov_b32 s9, 2"),
    );
    let body = format!("body=loops.S:{b0}-{b1}");
    let call = format!("call=fixtures/loops.S:{c0}-{c1}");
    let mark = format!("mark=loops.S:{c1}");
    for (target, wave) in [("gfx942", 64), ("gfx1100", 32)] {
        let dir = tempfile::tempdir().unwrap();
        let input = fixture(target);
        let flags = [
            "--kernel-scopes",
            "--functions",
            "1",
            "--region",
            &body,
            "--region",
            &call,
            "--point",
            &mark,
        ];
        let (bytes, report) = instrument(dir.path(), &input, &flags);
        let r = &report["regions"];
        for (k, want) in [
            ("regions", 2),
            ("points", 1),
            ("found", 2),
            ("instrumented", 2),
            ("points_found", 1),
            ("points_instrumented", 1),
        ] {
            assert_eq!(r[k], want, "{target}: {k}: {r}");
        }
        assert_eq!(r["skipped"], Value::Array(vec![]), "{target}");
        let orig = std::fs::read(&input).unwrap();
        let v = sqtt_verify::verify(&orig, &bytes).unwrap();
        assert!(v.findings.is_empty(), "{target}: {:?}", v.findings);

        // Rows: named after the user's name, the function offset of the entry and its line.
        let names = scope_names(&funcmap(&bytes));
        let rb = row(&names, "region body k_loops+").to_string();
        let rc = row(&names, "region call k_loops+").to_string();
        let pm = row(&names, "point mark k_loops+").to_string();
        assert!(rb.ends_with(&format!("/fixtures/loops.S:{b0})")), "{rb}");
        assert!(rc.ends_with(&format!("/fixtures/loops.S:{c0})")), "{rc}");
        assert!(pm.ends_with(&format!("/fixtures/loops.S:{c1})")), "{pm}");
        if llvm_present() {
            let dis = objdump(&input);
            for (name, inst) in [
                (&rb, "s_mov_b32 s9, 3"),
                (&rc, "s_getpc_b64 s[4:5]"),
                (&pm, "s_mov_b32 s9, 2"),
            ] {
                let off = name
                    .split_once('+')
                    .and_then(|(_, r)| r.split_whitespace().next())
                    .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                    .unwrap();
                assert_eq!(off, offset_of(&input, &dis, "k_loops", inst), "{name}");
            }
            // In the output, each marker sits right in front of that instruction.
            let out = dir.path().join("out.co");
            let m = markers(&out);
            for (name, word, inst) in [
                (&rb, 2, "s_mov_b32 s9, 3"),
                (&rc, 2, "s_getpc_b64 s[4:5]"),
                (&pm, 0, "s_mov_b32 s9, 2"),
            ] {
                let v = (id_of(&names, name) << 2) | word;
                let at: Vec<&str> = m
                    .iter()
                    .filter(|x| x.0 == v)
                    .map(|x| x.1.as_str())
                    .collect();
                assert_eq!(at, [inst], "{target}: markers of {name}");
            }
        }

        // The interpreter: the body region once around both outer iterations, the call region
        // around the call (the function's scope inside it) and the point, every iteration.
        let got = stream(&run_kernel(target, wave, &bytes), &names);
        let mut want = vec!["+k_loops".to_string(), format!("+{rb}")];
        for _ in 0..2 {
            want.extend([
                format!("+{rc}"),
                "+f_loop".into(),
                "-".into(),
                format!("*{pm}"),
                "-".into(),
            ]);
        }
        want.extend(["-".to_string(), "-".to_string()]);
        assert_eq!(got, want, "{target}");

        // The trace reader: a capture of that stream folds into region frames under the kernel
        // scope, the function inside the call region, with their names and lines.
        let rows = funcmap(&bytes);
        let folded = flamegraph(dir.path(), &rows, &run_kernel(target, wave, &bytes));
        for frames in [
            format!("k_loops;{rb}"),
            format!("k_loops;{rb};{rc}"),
            format!("k_loops;{rb};{rc};f_loop"),
        ] {
            assert!(
                folded
                    .lines()
                    .any(|l| l.rsplit_once(' ').map(|x| x.0) == Some(frames.as_str())),
                "{target}: no stack {frames} in\n{folded}"
            );
        }
    }
}

/// Regions by address range (one in the kernel around the call, one around the loop body of
/// the called function) and a point by offset: the same placement as by lines, checked by
/// llvm-objdump-22 offsets and by the interpreter.
#[test]
fn address_range_regions_and_an_offset_point() {
    for (target, wave) in [("gfx942", 64), ("gfx1100", 32)] {
        let dir = tempfile::tempdir().unwrap();
        let input = fixture(target);
        if !llvm_present() {
            return;
        }
        let dis = objdump(&input);
        let at = |f: &str, i: &str| offset_of(&input, &dis, f, i);
        let calls = format!(
            "calls=k_loops+{:#x}..{:#x}",
            at("k_loops", "s_getpc_b64 s[4:5]"),
            at("k_loops", "s_mov_b32 s9, 2") + 4
        );
        let fbody = format!(
            "fbody=f_loop+{:#x}..{:#x}",
            at("f_loop", "s_sub_u32 s10, s10, 1"),
            at("f_loop", "s_setpc_b64 s[30:31]")
        );
        let fpt = format!("fpt=f_loop+{:#x}", at("f_loop", "s_cmp_lg_u32 s10, 0"));
        let (bytes, report) = instrument(
            dir.path(),
            &input,
            &["--region", &calls, "--region", &fbody, "--point", &fpt],
        );
        let r = &report["regions"];
        assert_eq!(r["instrumented"], 2, "{target}: {r}");
        assert_eq!(r["points_instrumented"], 1, "{target}: {r}");
        let orig = std::fs::read(&input).unwrap();
        let v = sqtt_verify::verify(&orig, &bytes).unwrap();
        assert!(v.findings.is_empty(), "{target}: {:?}", v.findings);
        let names = scope_names(&funcmap(&bytes));
        let rc = row(&names, "region calls k_loops+").to_string();
        let rf = row(&names, "region fbody f_loop+").to_string();
        let pf = row(&names, "point fpt f_loop+").to_string();
        let m = markers(&dir.path().join("out.co"));
        for (name, word, inst) in [
            (&rc, 2, "s_getpc_b64 s[4:5]"),
            (&rf, 2, "s_sub_u32 s10, s10, 1"),
            (&pf, 0, "s_cmp_lg_u32 s10, 0"),
        ] {
            let v = (id_of(&names, name) << 2) | word;
            let at: Vec<&str> = m
                .iter()
                .filter(|x| x.0 == v)
                .map(|x| x.1.as_str())
                .collect();
            assert_eq!(at, [inst], "{target}: markers of {name}");
        }
        // The function's loop runs twice per call: the point twice inside its region, which
        // nests inside the kernel's region around the call.
        let got = stream(&run_kernel(target, wave, &bytes), &names);
        let mut want = Vec::new();
        for _ in 0..2 {
            want.extend([
                format!("+{rc}"),
                format!("+{rf}"),
                format!("*{pf}"),
                format!("*{pf}"),
                "-".into(),
                "-".into(),
            ]);
        }
        assert_eq!(got, want, "{target}");
    }
}

/// Regions that are not single-entry, that cross a loop, that match no code, and points that
/// cannot be placed are reported with the reason; the rest of the object is instrumented (no
/// whole-object failure) and verifies.
#[test]
fn refused_regions_and_points_are_reported_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gfx1100");
    let (c0, c1) = (
        line_with("s_getpc_b64 s[4:5]"),
        line_with("s_mov_b32 s9, 2"),
    );
    let nop = line_with("s_nop 0");
    let done = line_with("s_sub_u32 s8, s8, 1");
    let irr = (
        line_with("s_sub_u32 s1, s1, 1"),
        line_with("s_cmp_lg_u32 s2, 0"),
    );
    let test = line_with("s_cmp_eq_u32 s9, 0");
    let specs = [
        ("region", format!("ok=loops.S:{c0}-{c1}"), None),
        // `s_nop 0` .. `.Linner_b_done`: entered by the fall-through into the nop and by the
        // branch to .Linner_b_done.
        (
            "region",
            format!("twoentries=loops.S:{nop}-{done}"),
            Some("not single-entry: entered at 2 places"),
        ),
        // The irreducible cycle of k_irreducible: entered at both of its blocks.
        (
            "region",
            format!("irr=loops.S:{}-{}", irr.0, irr.1),
            Some("not single-entry: entered at 2 places"),
        ),
        // From inner loop B's exit test to past its end: single-entry, but only part of loop B.
        (
            "region",
            format!("cross=loops.S:{test}-{}", done + 1),
            Some("crosses the boundary of loop k_loops+"),
        ),
        (
            "region",
            "nowhere=nope.S:1-2".to_string(),
            Some("no instruction of an instrumented function has a line-table row"),
        ),
        (
            "region",
            format!("endonly=loops.S:{}", line_with(".Lend:") + 1),
            Some("ends the function"),
        ),
        (
            "point",
            "ghost=no_such_fn+0x4".to_string(),
            Some("no instrumented function is named no_such_fn"),
        ),
        (
            "point",
            "odd=k_loops+0x2".to_string(),
            Some("offset 0x2 is not the start of an instruction of k_loops"),
        ),
    ];
    let mut flags: Vec<String> = vec!["--loops".into(), "2".into()];
    for (kind, s, _) in &specs {
        flags.push(format!("--{kind}"));
        flags.push(s.clone());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (bytes, report) = instrument(dir.path(), &input, &flags);
    let r = &report["regions"];
    assert_eq!(r["regions"], 6, "{r}");
    assert_eq!(r["points"], 2, "{r}");
    assert_eq!(r["instrumented"], 1, "{r}");
    assert_eq!(report["loops"]["instrumented"], 4, "{report}");
    let skipped = r["skipped"].as_array().unwrap();
    for (kind, spec, why) in &specs {
        let got: Vec<&Value> = skipped.iter().filter(|x| x["spec"] == *spec).collect();
        match why {
            None => assert!(got.is_empty(), "{spec}: {got:?}"),
            Some(why) => {
                assert_eq!(got.len(), 1, "{spec}: {skipped:?}");
                assert_eq!(got[0]["kind"], *kind, "{spec}");
                let text = got[0]["why"].as_str().unwrap();
                assert!(text.contains(why), "{spec}: {text}");
            }
        }
    }
    let orig = std::fs::read(&input).unwrap();
    let v = sqtt_verify::verify(&orig, &bytes).unwrap();
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    // The human report names each one.
    let out = Command::new(BIN)
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("again.co"))
        .args(&flags)
        .arg("--report")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("regions: 6 given, 4 found in functions, 1 instrumented; points: 2 given, 0 found, 0 instrumented"),
        "{text}"
    );
    for (kind, spec, why) in &specs {
        if why.is_some() {
            assert!(text.contains(&format!("{kind} {spec}")), "{spec}: {text}");
        }
    }
    // Without --report each one is a warning on stderr (exit 0: the rest was instrumented).
    let out = Command::new(BIN)
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("quiet.co"))
        .args(&flags)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for (kind, spec, why) in &specs {
        if let Some(why) = why {
            let head = format!("warning: {kind} {spec} not instrumented: ");
            assert!(
                err.lines().any(|l| l.contains(&head) && l.contains(why)),
                "{spec}: {err}"
            );
        }
    }
}

/// The verifier proves region scopes balanced: the output with any one region exit marker
/// replaced by `s_nop 0` is rejected.
#[test]
fn verifier_rejects_a_missing_region_exit() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gfx1100");
    let (c0, c1) = (
        line_with("s_getpc_b64 s[4:5]"),
        line_with("s_mov_b32 s9, 2"),
    );
    let (bytes, _) = instrument(
        dir.path(),
        &input,
        &[
            "--region",
            &format!("call=loops.S:{c0}-{c1}"),
            "--region",
            "fbody=f_loop+0x4..0x10",
        ],
    );
    let orig = std::fs::read(&input).unwrap();
    assert!(sqtt_verify::verify(&orig, &bytes)
        .unwrap()
        .findings
        .is_empty());
    let exits = each_exit_is_needed(&orig, &bytes);
    assert_eq!(exits, 2, "one exit per region");
}

/// `--regions FILE` reads the same specifications as the flags (comments and blank lines
/// ignored): the same output bytes.
#[test]
fn a_plan_file_gives_the_same_output_as_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gfx1100");
    let (c0, c1) = (
        line_with("s_getpc_b64 s[4:5]"),
        line_with("s_mov_b32 s9, 2"),
    );
    let plan = dir.path().join("plan.txt");
    std::fs::write(
        &plan,
        format!(
            "# profile plan for loops.S\n\nregion call=loops.S:{c0}-{c1}   # around the call\n  point mark=loops.S:{c1}\n"
        ),
    )
    .unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (from_file, _) = instrument(&a, &input, &["--regions", plan.to_str().unwrap()]);
    let (from_flags, _) = instrument(
        &b,
        &input,
        &[
            "--region",
            &format!("call=loops.S:{c0}-{c1}"),
            "--point",
            &format!("mark=loops.S:{c1}"),
        ],
    );
    assert!(from_file == from_flags, "plan file and flags differ");
}

/// Bad specifications are usage errors (exit 2) naming the specification (and the plan's file
/// and line), before any work: no output.
#[test]
fn bad_specifications_are_usage_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.txt");
    std::fs::write(
        &plan,
        "region ok=loops.S:31-35\n# comment\nregion broken=loops.S:9-3\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.txt");
    let plan_s = plan.to_str().unwrap();
    let missing_s = missing.to_str().unwrap();
    for (flags, want) in [
        (vec!["--region", "x=loops.S:5-2"], "x=loops.S:5-2"),
        (vec!["--region", "noequals"], "noequals"),
        (vec!["--region", "a b=loops.S:1-2"], "a b=loops.S:1-2"),
        (vec!["--region", "r=k_loops+0x4"], "needs an end"),
        (vec!["--point", "p=k_loops+0x4..0x8"], "one offset"),
        (vec!["--point", "p=loops.S:3-4"], "one line"),
        (
            vec!["--region", "d=loops.S:1-2", "--region", "d=loops.S:3-4"],
            "d=loops.S:3-4",
        ),
        (
            vec!["--regions", plan_s],
            "plan.txt:3: \"region broken=loops.S:9-3\"",
        ),
        (vec!["--regions", missing_s], "missing.txt"),
    ] {
        let out = dir.path().join("out.co");
        let o = Command::new(BIN)
            .arg(fixture("gfx1100"))
            .arg("-o")
            .arg(&out)
            .args(&flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(want), "{flags:?}: {err}");
        assert!(!out.exists(), "{flags:?}: output written");
    }
}

/// A plan is a small regular text file read before any work (fresh tester, session 18: a
/// `/dev/zero` plan was read without end, a FIFO blocked silently, `-o PLAN` overwrote it, a
/// long specification was echoed whole).
#[test]
fn plans_are_small_regular_files_and_never_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = dir.path().join("big.txt");
    std::fs::write(&big, "# x\n".repeat(300_000)).unwrap();
    let binary = dir.path().join("binary.txt");
    std::fs::write(&binary, [0x72, 0xff, 0xfe, 0x0a]).unwrap();
    let plan = dir.path().join("plan.txt");
    std::fs::write(&plan, "point p=k_loops+0x4\n").unwrap();
    let out = dir.path().join("out.co");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let long = format!("x={}", "a".repeat(100_000));
    for (args, want) in [
        (
            vec!["--regions".into(), s(&fifo)],
            "not a regular file".to_string(),
        ),
        (
            vec!["--regions".into(), s(dir.path())],
            "not a regular file".into(),
        ),
        (
            vec!["--regions".into(), s(&big)],
            "larger than 1048576 bytes".into(),
        ),
        (
            vec!["--regions".into(), s(&binary)],
            "not UTF-8 text (byte 1)".into(),
        ),
        (vec!["--region".into(), long.clone()], "…".into()),
    ] {
        let o = Command::new(BIN)
            .arg(fixture("gfx1100"))
            .arg("-o")
            .arg(&out)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&want), "{err}");
        assert!(err.len() < 2_000, "{} bytes of stderr", err.len());
        assert!(!out.exists());
    }
    for target in ["-o", "--report-json"] {
        let mut cmd = Command::new(BIN);
        cmd.arg(fixture("gfx1100"))
            .args(["--regions", plan.to_str().unwrap()]);
        if target == "-o" {
            cmd.arg("-o").arg(&plan);
        } else {
            cmd.arg("-o").arg(&out).arg("--report-json").arg(&plan);
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{target}: {err}");
        assert!(err.contains("is an input of this run"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&plan).unwrap(),
            "point p=k_loops+0x4\n"
        );
    }
}

/// `--strict` counts a region or point that was asked for and not placed as lost coverage.
#[test]
fn strict_exits_3_when_a_region_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.co");
    let run = |region: &str| {
        Command::new(BIN)
            .arg(fixture("gfx1100"))
            .arg("-o")
            .arg(&out)
            .args(["--region", region, "--strict"])
            .output()
            .unwrap()
    };
    let refused = run("nothing=nosuchfile.S:1-2");
    assert_eq!(
        refused.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!out.exists());
    let placed = run("outer=k_loops+0x0..0x4");
    assert_eq!(
        placed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&placed.stderr)
    );
}

/// The verifier checks that a region's enter markers and a point's markers run in the function
/// their row names: the same output with the rows renamed to the kernel (same length, so only
/// the `.sqtt_funcmap` text changes) is rejected with those findings.
#[test]
fn verifier_rejects_region_and_point_rows_naming_another_function() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gfx1100");
    let (bytes, _) = instrument(
        dir.path(),
        &input,
        &[
            "--region",
            "fbody=f_loop+0x4..0x10",
            "--point",
            "fpt=f_loop+0x8",
        ],
    );
    let orig = std::fs::read(&input).unwrap();
    assert!(sqtt_verify::verify(&orig, &bytes)
        .unwrap()
        .findings
        .is_empty());
    for (from, to, want) in [
        (
            "region fbody f_loop+0x4",
            "region fbod k_loops+0x4",
            "which is not entered here",
        ),
        (
            "point fpt f_loop+0x8",
            "point fp k_loops+0x8",
            "which does not fit here: k_loops is not this function",
        ),
    ] {
        assert_eq!(from.len(), to.len());
        let at: Vec<usize> = bytes
            .windows(from.len())
            .enumerate()
            .filter(|(_, w)| *w == from.as_bytes())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 1, "{from}: one funcmap row");
        let mut broken = bytes.clone();
        broken[at[0]..at[0] + to.len()].copy_from_slice(to.as_bytes());
        let v = sqtt_verify::verify(&orig, &broken).unwrap();
        assert!(
            v.findings.iter().any(|f| format!("{f:?}").contains(want)),
            "{to}: {:?}",
            v.findings
        );
    }
}
