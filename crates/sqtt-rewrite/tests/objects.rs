//! End-to-end rewrite of every bare code object in `fixtures/` (and `fixtures/corpus` when
//! present) with function (threshold 1) and barrier markers, checked by LLVM 22 oracles:
//! llvm-objdump-22 disassembles the output with no unknown word and shows the inserted markers,
//! llvm-readelf-22 -a prints no warning, llvm-dwarfdump-22 --verify is clean where DWARF exists.

use sqtt_rewrite::config::{FunctionThreshold, MemoryChunking, Options, TraceAddresses};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn llvm(tool: &str) -> PathBuf {
    let p = PathBuf::from(format!("/usr/lib/llvm-22/bin/{tool}"));
    assert!(
        p.exists() || std::env::var("SQTT_NO_LLVM").is_ok(),
        "LLVM 22 tool {} missing (apt-get install llvm-22)",
        p.display()
    );
    p
}

fn objects() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root().join("fixtures/objects")];
    let corpus = root().join("fixtures/corpus");
    if corpus.exists() {
        dirs.push(corpus.join("compiled"));
        dirs.push(corpus.join("triton"));
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("co" | "hsaco")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn run(tool: &str, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(llvm(tool))
        .args(args)
        .output()
        .expect("run llvm tool");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn option_sets() -> Vec<(&'static str, Options)> {
    let chunk = Some(MemoryChunking {
        ops_per_marker: 2,
        max_gap: 5,
    });
    vec![
        (
            "functions=1 barriers",
            Options {
                functions: FunctionThreshold::Count(1),
                barriers: true,
                ..Options::default()
            },
        ),
        (
            "functions=cost:1",
            Options {
                functions: FunctionThreshold::Cost(1),
                ..Options::default()
            },
        ),
        (
            "memory=2:5",
            Options {
                memory: chunk,
                ..Options::default()
            },
        ),
        (
            "kernel scopes",
            Options {
                kernel_scopes: true,
                ..Options::default()
            },
        ),
        (
            "shader clock 12 bits + barriers",
            Options {
                shader_clock_bits: 12,
                barriers: true,
                functions: FunctionThreshold::Count(1),
                ..Options::default()
            },
        ),
        (
            "scope defaults + functions + barriers",
            Options {
                scope: Some(Default::default()),
                barriers: true,
                functions: FunctionThreshold::Count(1),
                ..Options::default()
            },
        ),
        (
            "trace addresses memory,lds",
            Options {
                trace_addresses: Some(TraceAddresses {
                    memory: true,
                    lds: true,
                }),
                ..Options::default()
            },
        ),
        (
            "all with address tracing (no memory markers, no clock packing: both excluded by the spec)",
            Options {
                functions: FunctionThreshold::Count(1),
                barriers: true,
                kernel_scopes: true,
                trace_addresses: Some(TraceAddresses {
                    memory: true,
                    lds: true,
                }),
                scope: Some(Default::default()),
                ..Options::default()
            },
        ),
        (
            "all",
            Options {
                functions: FunctionThreshold::Count(1),
                barriers: true,
                kernel_scopes: true,
                memory: chunk,
                scope: Some(Default::default()),
                shader_clock_bits: 12,
                ..Options::default()
            },
        ),
    ]
}

#[test]
fn rewrite_every_object_and_check_with_llvm() {
    if std::env::var("SQTT_NO_LLVM").is_ok() {
        return;
    }
    for (label, opts) in option_sets() {
        check_all(label, &opts);
    }
}

fn check_all(label: &str, opts: &Options) {
    let tmp = tempfile::tempdir().unwrap();
    let objs = objects();
    assert!(
        objs.len() >= 290,
        "fixtures missing: found {} objects",
        objs.len()
    );
    let mut failures = Vec::new();
    let (mut instrumented, mut closed, mut nothing) = (0, 0, 0);
    for (n, path) in objs.iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let input = std::fs::read(path).unwrap();
        let out = match rewrite(&input, opts) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{name}: error {e}"));
                continue;
            }
        };
        match out.report.status {
            Status::FailedClosed => {
                closed += 1;
                failures.push(format!("{name}: failed closed: {:?}", out.report.reasons));
                continue;
            }
            Status::NothingToDo => {
                nothing += 1;
                continue;
            }
            Status::Instrumented => instrumented += 1,
        }
        let bytes = out.bytes.unwrap();
        match sqtt_verify::verify(&input, &bytes) {
            Ok(v) if v.findings.is_empty() => {}
            Ok(v) => failures.push(format!(
                "{name}: verifier: {}",
                v.findings
                    .iter()
                    .map(|f| f.to_string())
                    .take(3)
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            Err(e) => failures.push(format!("{name}: verifier error {e}")),
        }
        let file = tmp.path().join(format!("{n}.co"));
        std::fs::write(&file, &bytes).unwrap();
        let f = file.to_str().unwrap();
        let (ok, dis, err) = run("llvm-objdump", &["-d", f]);
        if !ok || dis.contains("<unknown>") || !err.is_empty() {
            failures.push(format!(
                "{name}: llvm-objdump: ok={ok} unknown={} {err}",
                dis.contains("<unknown>")
            ));
        }
        let markers = dis.lines().filter(|l| l.contains("s_ttracedata")).count();
        let orig_dis = run("llvm-objdump", &["-d", path.to_str().unwrap()]).1;
        let orig_markers = orig_dis
            .lines()
            .filter(|l| l.contains("s_ttracedata"))
            .count();
        // Marker sites (the scope-filter flag computation at kernel entry emits no marker).
        let count = |pick: &dyn Fn(&str) -> bool| -> usize {
            out.report
                .functions
                .iter()
                .flat_map(|f| f.sites.iter())
                .filter(|(kind, _)| pick(kind.as_str()))
                .map(|(_, n)| *n as usize)
                .sum()
        };
        let sites = count(&|k| k != "scope_init" && k != "address_trace");
        // An address-trace block holds at least 4 s_ttracedata (header, exec_lo, exec_hi and
        // the per-lane loop body) and at most 7 (buffer: 3 fixed words, 2 loops).
        let traces = count(&|k| k == "address_trace");
        let lo = orig_markers + sites + 4 * traces;
        let hi = orig_markers + sites + 7 * traces;
        if markers < lo || markers > hi {
            failures.push(format!(
                "{name}: {markers} s_ttracedata in output, expected {orig_markers} + {sites} + (4..=7) x {traces}"
            ));
        }
        let (ok, _, err) = run("llvm-readelf", &["-a", f]);
        if !ok || err.contains("warning") || err.contains("error") {
            failures.push(format!("{name}: llvm-readelf -a: {err}"));
        }
        if name.contains("-g") {
            let (ok, o, _) = run("llvm-dwarfdump", &["--verify", f]);
            if !ok {
                failures.push(format!(
                    "{name}: llvm-dwarfdump --verify: {}",
                    o.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                ));
            }
        }
        // The section goes to a file of this test's temporary directory (never through /dev:
        // llvm-objcopy replaces its output path with a renamed temporary file).
        let dump = file.with_extension("funcmap");
        let (ok, _, err) = run(
            "llvm-objcopy",
            &[
                &format!("--dump-section=.sqtt_funcmap={}", dump.display()),
                f,
                file.with_extension("objcopy").to_str().unwrap(),
            ],
        );
        assert!(ok, "{name}: llvm-objcopy --dump-section: {err}");
        let fm = std::fs::read(&dump).expect("dumped .sqtt_funcmap");
        let parsed = sqtt_funcmap::parse(&fm);
        if !parsed.warnings.is_empty() || parsed.rows.is_empty() {
            failures.push(format!("{name}: funcmap {:?}", parsed.warnings));
        }
        // Address traces: one P:addr_trace_* row with an R: row per block, one W: row.
        let trace_rows: Vec<u32> = parsed
            .rows
            .iter()
            .filter_map(|r| match r {
                sqtt_funcmap::Row::Point { id, name, .. } if name.starts_with("addr_trace_") => {
                    Some(*id)
                }
                _ => None,
            })
            .collect();
        let payload_ids: Vec<u32> = parsed
            .rows
            .iter()
            .filter_map(|r| match r {
                sqtt_funcmap::Row::Payload { id, count } if *count > 0 => Some(*id),
                _ => None,
            })
            .collect();
        let w_rows = parsed
            .rows
            .iter()
            .filter(|r| matches!(r, sqtt_funcmap::Row::WaveSize(_)))
            .count();
        if trace_rows.len() != traces
            || trace_rows.iter().any(|id| !payload_ids.contains(id))
            || (traces > 0) != (w_rows == 1)
        {
            failures.push(format!(
                "{name}: {} addr_trace rows for {traces} blocks, {} R: rows, {w_rows} W: rows",
                trace_rows.len(),
                payload_ids.len()
            ));
        }
    }
    eprintln!("[{label}] instrumented {instrumented}, failed closed {closed}, nothing to do {nothing}, failures {}", failures.len());
    assert!(failures.is_empty(), "[{label}] {}", failures.join("\n"));
    assert!(
        instrumented > 200,
        "[{label}] only {instrumented} objects instrumented"
    );
}
