//! One test per construct the rewriter refuses to instrument: each kernel is assembled with
//! clang-22 and linked with ld.lld-22 (real code objects), run through `sqtt-patch`, and the
//! diagnostic is pinned. A failed-closed object is written byte-identical to the input (exit 0),
//! or not written with `--strict` (exit 3). A kernel that can move verbatim (position-independent)
//! is left alone instead, and the rest of the object is instrumented and verified.

use assert_cmd::Command;

#[path = "support/asm.rs"]
mod asm;
use std::path::{Path, PathBuf};

const TEMPLATE: &str = r#".amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl k
.p2align 8
.type k,@function
k:
BODY
  s_endpgm
.Lk_end:
.size k, .Lk_end-k
.globl f
.p2align 2
.type f,@function
f:
  s_setpc_b64 s[30:31]
.Lf_end:
.size f, .Lf_end-f
EXTRA
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 16
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: 0
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .kernarg_segment_align: 4
    .wavefront_size: 32
    .sgpr_count: 16
    .vgpr_count: 8
    .max_flat_workgroup_size: 256
...
.end_amdgpu_metadata
"#;

/// Assembles and links a gfx1100 code object whose kernel `k` has `body` before `s_endpgm`.
fn build(dir: &Path, name: &str, body: &str, extra: &str) -> PathBuf {
    let source = TEMPLATE.replace("BODY", body).replace("EXTRA", extra);
    build_source(dir, name, &source)
}

/// Assembles and links gfx1100 assembly `source` into `dir/{name}.co`.
fn build_source(dir: &Path, name: &str, source: &str) -> PathBuf {
    asm::assemble(dir, name, "gfx1100", source)
}

/// Runs the main job and returns (exit code, stderr); asserts the output equals the input.
fn run_closed(co: &Path, strict: bool) -> (i32, String) {
    let out = co.with_extension("out.co");
    let mut cmd = Command::cargo_bin("sqtt-patch").unwrap();
    cmd.arg(co)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1", "--barriers", "1"]);
    cmd.env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS");
    if strict {
        cmd.arg("--strict");
    }
    let o = cmd.output().unwrap();
    let code = o.status.code().unwrap_or(-1);
    if code == 0 {
        assert_eq!(
            std::fs::read(co).unwrap(),
            std::fs::read(&out).unwrap(),
            "failed-closed output must be byte-identical"
        );
    }
    (code, String::from_utf8_lossy(&o.stderr).into_owned())
}

fn expect(name: &str, body: &str, extra: &str, diagnostic: &str) {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let co = build(dir.path(), name, body, extra);
    let (code, err) = run_closed(&co, false);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("left unchanged (failed closed)") && err.contains(diagnostic),
        "{name}: got {err:?}, want {diagnostic:?}"
    );
    let (code, _) = run_closed(&co, true);
    assert_eq!(code, 3, "--strict must exit 3 on lost coverage");
}

#[test]
fn control_kernel_is_instrumented() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let co = build(dir.path(), "ok", "  s_barrier", "");
    let out = dir.path().join("ok.out.co");
    Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(&out)
        .args(["--barriers", "1"])
        .assert()
        .success();
    assert_ne!(std::fs::read(&co).unwrap(), std::fs::read(&out).unwrap());
    // Our own output is recognised and refused unless --force.
    let again = dir.path().join("again.co");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&out)
        .arg("-o")
        .arg(&again)
        .args(["--barriers", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("already instrumented by sqtt-patch (section .sqtt_patch); pass --force"));
    // Deterministic: the same input and flags give the same bytes.
    let twice = dir.path().join("twice.co");
    Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(&twice)
        .args(["--barriers", "1"])
        .assert()
        .success();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&twice).unwrap());
}

#[test]
fn undecodable_word() {
    expect_kept(
        "undecodable",
        "  .long 0xd7ffffff\n  s_barrier",
        "at 0x1400: cannot decode: unknown VOP3 opcode 1023 (word 0x_)",
    );
}

/// A kernel whose code does not all decode still has its sites counted: as many barriers as
/// llvm-objdump-22 shows in it (it prints the undecodable word as `.long` and decodes on), all
/// skipped with the kernel's reason, so coverage is not 100 %. Before, such a kernel had no
/// sites at all and coverage said 100 %.
#[test]
fn sites_of_an_undecodable_kernel_are_counted() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let body = "  s_barrier\n  .long 0xd7ffffff\n  s_barrier\n  s_barrier";
    let co = build(dir.path(), "undecodable_sites", body, "");
    let dis = std::process::Command::new("llvm-objdump-22")
        .args(["-d", "--mcpu=gfx1100"])
        .arg(&co)
        .output()
        .unwrap();
    assert!(dis.status.success());
    let dis = String::from_utf8_lossy(&dis.stdout);
    let in_k = dis
        .split("<k>:")
        .nth(1)
        .unwrap()
        .split("<f>:")
        .next()
        .unwrap();
    let barriers = in_k.lines().filter(|l| l.contains("s_barrier")).count();
    assert!(in_k.contains(".long"), "{in_k}");
    assert_eq!(barriers, 3, "{in_k}");
    let out = dir.path().join("out.co");
    // `--functions 1` instruments `f`, so that the object is instrumented.
    let args = ["--functions", "1", "--barriers", "1", "--kernel-scopes"];
    let r = asm::rewrite(&co, &out, &args);
    let cov = |feature: &str| {
        let c = r["coverage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["feature"] == feature)
            .unwrap_or_else(|| panic!("no {feature} coverage in {r}"));
        (
            c["instrumented"].as_u64().unwrap(),
            c["found"].as_u64().unwrap(),
        )
    };
    assert_eq!(cov("barriers"), (0, barriers as u64));
    // Its entry and its one exit (s_endpgm after the barriers).
    assert_eq!(cov("kernel_scopes"), (0, 2));
    let skipped = r["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), barriers + 2);
    for s in skipped {
        assert_eq!(s["function"], "k");
        let why = s["why"].as_str().unwrap();
        assert!(
            why.starts_with("function left alone (kept at its address): at 0x1404: cannot decode"),
            "{why}"
        );
    }
    assert_verifies(&co, &out);
    // Without `--functions` nothing is instrumented: the report says so, and how many sites
    // were skipped, not "nothing to instrument" (session-24 fresh tester).
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(dir.path().join("none.co"))
        .args(["--barriers", "1", "--kernel-scopes", "--report"])
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains(&format!(
            "target gfx1100: nothing instrumented ({} site(s) skipped)",
            barriers + 2
        )),
        "{report}"
    );
}

#[test]
fn undecodable_word_between_functions() {
    // Padding is copied verbatim only when it is padding: otherwise `.text` stays in place
    // with the word, every function is instrumented, and a warning names it.
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let co = build(dir.path(), "gap", "  s_barrier", "  .long 0xd7ffffff");
    let out = dir.path().join("gap.out.co");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1", "--barriers", "1", "--strict"])
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "nothing lost: {err}");
    assert!(
        err.contains("warning: undecodable word in the gap after f at 0x")
            && err.contains(": kept in place with .text"),
        "{err}"
    );
    assert_verifies(&co, &out);
}

/// The kernel is left alone (reported with `diagnostic`), the device function is instrumented,
/// `sqtt-patch verify` accepts the output, and `--strict` exits 3 (the kernel's barrier is lost).
fn expect_left_alone(name: &str, body: &str, diagnostic: &str) {
    expect_left_alone_as(name, body, diagnostic, "copied verbatim")
}

/// [`expect_left_alone`] for a kernel that cannot move: it stays at its address with the whole
/// `.text` (docs/left-alone.md, "Kept in place").
fn expect_kept(name: &str, body: &str, diagnostic: &str) {
    expect_left_alone_as(name, body, diagnostic, "kept at its address")
}

/// [`expect_left_alone`], the report's group heading saying `how` the kernel was left alone.
fn expect_left_alone_as(name: &str, body: &str, diagnostic: &str, how: &str) {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let co = build(dir.path(), name, body, "");
    let out = dir.path().join(format!("{name}.out.co"));
    let run = |strict: bool| {
        let mut cmd = Command::cargo_bin("sqtt-patch").unwrap();
        cmd.arg(&co)
            .arg("-o")
            .arg(&out)
            .args(["--functions", "1", "--barriers", "1", "--report"])
            .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
            .env_remove("SQTT_INSTRUMENT_BARRIERS");
        if strict {
            cmd.arg("--strict");
        }
        cmd.output().unwrap()
    };
    let o = run(false);
    // The report is on standard output.
    let err = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // Grouped by kind (the reason without its address), the function named below it with its
    // address and the first problem's.
    let (at, why) = diagnostic
        .strip_prefix("at ")
        .and_then(|d| d.split_once(": "))
        .expect("diagnostic `at 0x..: why`");
    let heading = format!("  left alone ({how}, not instrumented): 1 function(s)\n    1x {why}");
    let named = format!(", in 1 function:\n      k at 0x1400 (first problem at {at})\n");
    assert!(
        err.contains(&heading),
        "{name}: got {err:?}, want {heading:?}"
    );
    assert!(err.contains(&named), "{name}: got {err:?}, want {named:?}");
    assert!(err.contains(": instrumented;"), "{err}");
    assert_ne!(std::fs::read(&co).unwrap(), std::fs::read(&out).unwrap());
    assert_verifies(&co, &out);
    assert_eq!(run(true).status.code(), Some(3), "--strict: lost coverage");
}

#[test]
fn indirect_jump_in_kernel() {
    expect_left_alone(
        "indirect",
        "  s_barrier\n  s_setpc_b64 s[4:5]",
        "at 0x1404: indirect jump through a register in a kernel (the address pair is not set on every path from the function's entry)",
    );
}

#[test]
fn branch_leaving_the_function() {
    expect_kept(
        "leave",
        "  s_barrier\n  s_cbranch_scc0 .Lf_end",
        "at 0x1404: branch leaves the function (target 0x_)",
    );
}

#[test]
fn unrecognised_getpc_use() {
    expect_kept(
        "getpc",
        "  s_barrier\n  s_getpc_b64 s[0:1]\n  s_mov_b32 s2, s0",
        "at 0x1408: unrecognised PC-relative sequence from s_getpc: s_mov_b32 uses the PC register pair",
    );
}

#[test]
fn getpc_sequence_running_into_a_branch() {
    expect_kept(
        "getpc_branch",
        "  s_barrier\n  s_getpc_b64 s[0:1]\n  s_branch 0\n  s_add_u32 s0, s0, 0x10",
        "at 0x1408: unrecognised PC-relative sequence from s_getpc: control flow before the adds complete",
    );
}

#[test]
fn return_from_exception() {
    expect_left_alone(
        "rfe",
        "  s_barrier\n  s_rfe_b64 s[0:1]",
        "at 0x1404: s_rfe_b64 is not supported",
    );
}

/// `--scope` with a kernel left alone that calls a device function `g`: the kernel's
/// entry computes no scope flag, so the function's scope-filtered markers are skipped with that
/// reason (a guard there would read whatever the SGPR holds) and the output verifies. Before,
/// the function was guarded, the verifier rejected the kernel ("kernel entry does not compute
/// the scope flag"), and the object was lost.
#[test]
fn scope_filtering_with_a_left_alone_kernel_that_calls() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let body = "  s_call_b64 s[30:31], g\n  s_barrier\n  s_rfe_b64 s[0:1]";
    // A local device function (a global one would need a run-time relocation).
    let g = ".p2align 2\n.type g,@function\ng:\n  s_nop 0\n  s_setpc_b64 s[30:31]\n.Lg_end:\n.size g, .Lg_end-g\n";
    let co = build(dir.path(), "scope_rfe", body, g);
    let out = dir.path().join("scope_rfe.out.co");
    let json = dir.path().join("scope_rfe.json");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(&out)
        .args([
            "--functions",
            "1",
            "--barriers",
            "1",
            "--scope",
            "--report-json",
        ])
        .arg(&json)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["status"], "instrumented", "{r}");
    assert_eq!(r["left_alone"][0]["name"], "k", "{r}");
    let skipped = r["skipped"].as_array().expect("skipped");
    let why = "a kernel left alone (its entry computes no scope flag) may call this function";
    let f_sites: Vec<_> = skipped
        .iter()
        .filter(|s| s["why"].as_str().is_some_and(|w| w.contains(why)))
        .collect();
    assert_eq!(f_sites.len(), 2, "g's entry and exit: {skipped:?}");
    assert!(f_sites.iter().all(|s| s["function"] == "g"), "{f_sites:?}");
    assert_verifies(&co, &out);
}

#[test]
fn second_executable_section() {
    expect(
        "twosections",
        "  s_barrier",
        ".section .other_code,\"ax\",@progbits\n  s_nop 0\n",
        "more than one executable section",
    );
}

/// The stub fixtures of issue 12 (`fixtures/left-alone`): `sqtt-patch` instruments them with
/// every marker kind, reports the stubs left alone, and `sqtt-patch verify` accepts the output.
#[test]
fn stub_fixtures_are_instrumented_around_left_alone_functions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/left-alone");
    let dir = tempfile::tempdir().unwrap();
    for t in ["gfx942", "gfx1100", "gfx1250"] {
        let co = root.join(format!("{t}__stubs__g.co"));
        let out = dir.path().join(format!("{t}.out.co"));
        let o = Command::cargo_bin("sqtt-patch")
            .unwrap()
            .arg(&co)
            .arg("-o")
            .arg(&out)
            .args([
                "--functions",
                "1",
                "--barriers",
                "1",
                "--kernel-scopes",
                "--report",
            ])
            .output()
            .unwrap();
        // The report is on standard output.
        let err = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{t}: {err}");
        assert!(
            err.contains(&format!("target {t}: instrumented;")),
            "{t}: {err}"
        );
        for f in ["stub_fall", "stub_tramp_a", "stub_tramp_b"] {
            assert!(
                err.contains(&format!("\n      {f} at 0x")),
                "{t}: {f}: {err}"
            );
        }
        Command::cargo_bin("sqtt-patch")
            .unwrap()
            .arg("verify")
            .arg(&co)
            .arg(&out)
            .assert()
            .success();
    }
}

/// Issue 37 item B: a left-alone kernel with a 300-character (Tensile-like) name and several
/// problems. The human reports (single object and `batch`) group the reasons by kind, name the
/// kernel once per kind, shortened, and keep every line short; the JSON keeps the full name.
#[test]
fn long_names_are_grouped_and_shortened_in_human_reports() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let long = format!(
        "Cijk_Ailk_Bljk_{}WG16_2_1",
        "HHS_BH_Bias_S_AuxH_".repeat(15)
    );
    assert!(long.len() > 290);
    let short = format!("{}…{}", &long[..48], &long[long.len() - 12..]);
    let body = "  s_barrier\n  s_setpc_b64 s[4:5]\n  s_barrier\n  s_setpc_b64 s[6:7]";
    let source = TEMPLATE
        .replace("BODY", body)
        .replace("EXTRA", "")
        .replace(".globl k\n", &format!(".globl {long}\n"))
        .replace(".type k,", &format!(".type {long},"))
        .replace("\nk:\n", &format!("\n{long}:\n"))
        .replace(
            ".size k, .Lk_end-k",
            &format!(".size {long}, .Lk_end-{long}"),
        )
        .replace(".amdhsa_kernel k\n", &format!(".amdhsa_kernel {long}\n"))
        .replace(".name: k\n", &format!(".name: {long}\n"))
        .replace(".symbol: k.kd", &format!(".symbol: {long}.kd"));
    let dir = tempfile::tempdir().unwrap();
    // (the long symbol names move `.text` to 0x1900)
    let co = build_source(dir.path(), "long", &source);
    let json = dir.path().join("long.json");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(dir.path().join("long.out.co"))
        .args([
            "--functions",
            "1",
            "--barriers",
            "1",
            "--report",
            "--report-json",
        ])
        .arg(&json)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{report}");
    // Grouped by kind (the reason text after the address: why the pair is not resolved), the
    // kernel named once below it.
    let has_all = |text: &str, parts: &[String]| parts.iter().all(|p| text.contains(p.as_str()));
    let jump =
        "indirect jump through a register in a kernel (the address pair is not set on every path";
    let want = [
        format!("  left alone (copied verbatim, not instrumented): 1 function(s)\n    1x {jump}"),
        format!("in 1 function:\n      {short} at 0x1900 (first problem at 0x1904)\n"),
        format!("  skipped: 2 site(s)\n    2x function left alone (copied verbatim): {jump}"),
        format!("[barrier=2], in 1 function:\n      {short} (2x, first at 0x1900)\n"),
    ];
    assert!(has_all(&report, &want), "got:\n{report}\nwant:\n{want:#?}");
    short_lines(&report, &long);
    // The JSON report keeps the full name and every problem's address.
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains(&format!("\"name\": \"{long}\"")), "{j}");
    assert!(j.contains("at 0x1904: indirect jump") && j.contains("at 0x190c: indirect jump"));

    // `batch`: the object's skipped sites by kind, the kernel named once, and the totals.
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg("batch")
        .arg(&co)
        .arg("-o")
        .arg(dir.path().join("batch"))
        .args(["--functions", "1", "--barriers", "1"])
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{summary}");
    let want = [
        format!("    skipped: 2 site(s)\n      2x function left alone (copied verbatim): {jump}"),
        format!("[barrier=2], in 1 function:\n        {short} (2x)\n"),
        format!("\n  skipped 2x function left alone (copied verbatim): {jump}"),
    ];
    assert!(
        has_all(&summary, &want),
        "got:\n{summary}\nwant:\n{want:#?}"
    );
    assert!(
        summary.contains(&format!("    kernel {short}: ")),
        "{summary}"
    );
    short_lines(&summary, &long);
}

/// No line of a human report is longer than 200 characters or holds the full `long` name.
fn short_lines(report: &str, long: &str) {
    for l in report.lines() {
        assert!(
            l.chars().count() <= 200,
            "{} characters: {l}",
            l.chars().count()
        );
        assert!(!l.contains(long), "full name in {l}");
    }
}

/// Issue 39 item 5: a kernel that does work and then traps (`__builtin_trap()`: `s_trap 2`, no
/// `s_endpgm`, as in Debian's HSA runtime test kernels) is not a compiled-out stub: its barrier
/// and store are marked, nothing is left alone, and the verifier accepts the output.
#[test]
fn kernel_that_works_then_traps_is_instrumented() {
    let dir = tempfile::tempdir().unwrap();
    let body = "  v_mov_b32 v0, 0\n  v_mov_b32 v1, 7\n  s_barrier\n  global_store_b32 v0, v1, s[0:1]\n  s_trap 2";
    let source = TEMPLATE
        .replace("BODY", body)
        .replace("  s_endpgm\n", "")
        .replace("EXTRA", "");
    let co = build_source(dir.path(), "traps", &source);
    let out = dir.path().join("traps.instr.co");
    let json = dir.path().join("traps.json");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&co)
        .arg("-o")
        .arg(&out)
        .args([
            "--barriers",
            "1",
            "--memory",
            "1:0",
            "--kernel-scopes",
            "--report",
            "--report-json",
        ])
        .arg(&json)
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .env_remove("SQTT_INSTRUMENT_MEMORY")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{report}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["status"], "instrumented", "{j}");
    assert!(
        j["left_alone"].as_array().is_none_or(|a| a.is_empty()),
        "nothing left alone: {}",
        j["left_alone"]
    );
    for c in j["coverage"].as_array().expect("coverage") {
        assert_eq!(c["in_stubs"], 0, "not counted as a stub: {c}");
        assert_eq!(c["found"], c["instrumented"], "{c}");
    }
    assert!(report.contains("barriers 1/1 sites (100.0 %)"), "{report}");
    assert!(report.contains("memory 1/1 sites (100.0 %)"), "{report}");
    assert_verifies(&co, &out);
}

/// `sqtt-patch verify ORIG NEW` accepts the rewrite.
fn assert_verifies(orig: &Path, new: &Path) {
    let (code, text) = asm::verify(orig, new);
    assert_eq!(code, 0, "{text}");
}

/// `--fatbin` on a bundle whose gfx1100 entry has a kernel kept at its address (a word that
/// does not decode): the warning names the entry, and the summary line gives `.text`'s size as
/// kept and the new code section's apart (session-23 fresh tester: the warning named no entry
/// and the line read `.text A -> B` with B the new section's size).
#[test]
fn fatbin_names_the_entry_of_a_kept_in_place_kernel() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let co = build(dir.path(), "kept", "  .long 0xd7ffffff\n  s_barrier", "");
    let id = "hipv4-amdgcn-amd-amdhsa--gfx1100";
    let entries: [(&str, Vec<u8>); 2] = [
        ("host-x86_64-unknown-linux-gnu-", Vec::new()),
        (id, std::fs::read(&co).unwrap()),
    ];
    let bundle = dir.path().join("kept.hipfb");
    std::fs::write(&bundle, hsaco::bundle::write_plain(&entries)).unwrap();
    let out = dir.path().join("kept.out.hipfb");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg("--fatbin")
        .arg(&bundle)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1", "--barriers", "1"])
        .env_remove("SQTT_INSTRUMENT_FUNCTIONS")
        .env_remove("SQTT_INSTRUMENT_BARRIERS")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // The function's address and the first word that does not decode are named.
    assert!(
        stderr.contains(&format!(
            "warning (1 code object(s): bundle 0 {id}): k at 0x"
        )) && stderr.contains(" is kept at its address and does not decode at 0x"),
        "{stderr}"
    );
    let input = std::fs::read(&co).unwrap();
    let text = hsaco::CodeObject::parse(&input)
        .unwrap()
        .text()
        .unwrap()
        .size;
    assert!(
        stdout.contains(&format!(
            "bundle 0 {id}: instrumented: .text {text} bytes kept in place, new .sqtt_text "
        )),
        "{stdout}"
    );
    // The rewritten bundle is one clang-offload-bundler-22 lists.
    let list = std::process::Command::new("clang-offload-bundler-22")
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", out.display()))
        .output()
        .unwrap();
    assert!(list.status.success(), "{list:?}");
    assert!(String::from_utf8_lossy(&list.stdout).contains(id));
}
