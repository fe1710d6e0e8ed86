//! Per-function fail-closed (issue 12, item 5) on the hand-written stub fixtures
//! (`fixtures/left-alone/<target>__stubs__{g,bad-word}.co`, from `fixtures/src/stubs_*.S`):
//! functions the analysis cannot instrument (execution falls off their end: a rocPRIM-style
//! compiled-out "trampoline" kernel, a device function without a return) are left alone and
//! moved verbatim while everything else is instrumented (a function holding a word that does
//! not decode cannot move: `tests/kept_in_place.rs`). Oracles: llvm-objdump-22 (disassembly of the
//! output), the input bytes, and the independent verifier (`sqtt-verify`, as `sqtt-patch
//! verify` runs it), including rejection of corrupted outputs.
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGETS: [&str; 3] = ["gfx942", "gfx1100", "gfx1250"];
const LEFT_ALONE: [&str; 3] = ["stub_fall", "stub_tramp_a", "stub_tramp_b"];

fn fixture(target: &str, variant: &str) -> Vec<u8> {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/left-alone")
        .join(format!("{target}__stubs__{variant}.co"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn opts() -> Options {
    Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        kernel_scopes: true,
        ..Options::default()
    }
}

/// Entry address of function or kernel `name` (symbol value).
fn entry(co: &hsaco::CodeObject, name: &str) -> u64 {
    co.symbols
        .iter()
        .find(|s| s.symbol.name == name && s.symbol.shndx != 0)
        .map(|s| s.symbol.value)
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

/// Start of the function after `addr` (or the end of `.text`): the extent of a verbatim block
/// of a function execution falls off.
fn next_start(co: &hsaco::CodeObject, addr: u64) -> u64 {
    let text = co.text().expect(".text");
    co.symbols
        .iter()
        .filter(|s| s.symbol.st_type == hsaco::elf::STT_FUNC && s.symbol.value > addr)
        .map(|s| s.symbol.value)
        .min()
        .unwrap_or(text.addr + text.size)
}

fn slice(co: &hsaco::CodeObject, from: u64, to: u64) -> Vec<u8> {
    let text = co.text().expect(".text");
    co.section_data(text)[(from - text.addr) as usize..(to - text.addr) as usize].to_vec()
}

/// The rewrite of one stub fixture, checked; returns (input, output).
fn instrument(target: &str) -> (Vec<u8>, Vec<u8>) {
    let input = fixture(target, "g");
    let out = rewrite(&input, &opts()).expect("rewrite");
    let r = &out.report;
    assert_eq!(r.status, Status::Instrumented, "{target}: {:?}", r.reasons);
    assert!(r.reasons.is_empty(), "{target}: {:?}", r.reasons);
    let names: Vec<&str> = r.left_alone.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, LEFT_ALONE, "{target}");
    for l in &r.left_alone {
        assert!(
            l.why
                .contains("execution falls off the end of the function"),
            "{target}: {l:?}"
        );
        // Every requested site of a left-alone function is reported skipped with its reason.
        let sk: Vec<_> = r.skipped.iter().filter(|s| s.function == l.name).collect();
        assert!(!sk.is_empty(), "{target}: no skipped site for {}", l.name);
        for s in sk {
            assert!(s.why.starts_with("function left alone"), "{target}: {s:?}");
            assert!(s.why.contains(&l.why), "{target}: {s:?}");
        }
        let f = r.functions.iter().find(|f| f.name == l.name).expect("fn");
        assert_eq!(f.inserted_instructions, 0, "{target}: {}", l.name);
    }
    // Everything else is instrumented: the three real kernels and the helper.
    for name in ["stub_main", "stub_other", "stub_last", "stub_helper"] {
        let f = r.functions.iter().find(|f| f.name == name).expect("fn");
        assert!(
            f.inserted_instructions > 0,
            "{target}: {name} not instrumented"
        );
    }
    (input, out.bytes.expect("rewritten bytes"))
}

#[test]
fn stubs_are_left_alone_and_moved_verbatim() {
    for target in TARGETS {
        let (input, output) = instrument(target);
        let (a, b) = (
            hsaco::CodeObject::parse(&input).expect("input"),
            hsaco::CodeObject::parse(&output).expect("output"),
        );
        let mut moved = 0;
        for name in LEFT_ALONE {
            let (old, new) = (entry(&a, name), entry(&b, name));
            moved += usize::from(old != new);
            // The function and the bytes after it (zero padding, or the code it falls into)
            // up to the next function, identical at the new address.
            let end = next_start(&a, old);
            let want = slice(&a, old, end);
            assert_eq!(
                slice(&b, new, new + want.len() as u64),
                want,
                "{target}: {name} {old:#x} -> {new:#x}"
            );
            // ... and the same function follows it.
            let after = |co: &hsaco::CodeObject, at: u64| {
                co.symbols
                    .iter()
                    .filter(|s| s.symbol.st_type == hsaco::elf::STT_FUNC && s.symbol.value > at)
                    .min_by_key(|s| s.symbol.value)
                    .map(|s| s.symbol.name.clone())
            };
            assert_eq!(after(&a, old), after(&b, new), "{target}: after {name}");
            // Kernels: the descriptor's entry offset follows the move.
            if let Some(k) = b.kernels.iter().find(|k| k.name == name) {
                assert_eq!(k.entry, new, "{target}: descriptor entry of {name}");
                assert_eq!(new % 256, 0, "{target}: {name} alignment");
            }
            // Symbol size unchanged.
            let size = |co: &hsaco::CodeObject| {
                co.symbols
                    .iter()
                    .find(|s| s.symbol.name == name)
                    .map(|s| s.symbol.size)
            };
            assert_eq!(size(&a), size(&b), "{target}: size of {name}");
        }
        assert!(moved >= 2, "{target}: the stubs did not move ({moved})");
        // The .data table's R_AMDGPU_RELATIVE64 addends (llvm-readelf-22 -r) follow the moves.
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("out.co");
        std::fs::write(&f, &output).expect("write");
        let llvm = |tool: &str, args: &[&str]| {
            let o = Command::new(format!("/usr/lib/llvm-22/bin/{tool}"))
                .args(args)
                .arg(&f)
                .output()
                .expect("run an LLVM 22 tool");
            assert!(o.status.success(), "{target}: {tool}");
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let addends: Vec<u64> = llvm("llvm-readelf", &["-r"])
            .lines()
            .filter(|l| l.contains("R_AMDGPU_RELATIVE64"))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().last()?, 16).ok())
            .collect();
        let want: Vec<u64> = ["stub_fall", "stub_helper", "stub_tramp_b"]
            .iter()
            .map(|n| entry(&b, n))
            .collect();
        assert_eq!(addends, want, "{target}: relocation addends");
        // DWARF (the fixtures are assembled with -g) stays valid.
        let dd = llvm("llvm-dwarfdump", &["--verify"]);
        assert!(dd.contains("No errors."), "{target}: {dd}");
        let v = sqtt_verify::verify(&input, &output).expect("verifier runs");
        assert!(v.is_clean(), "{target}: {:?}", v.findings);
        // llvm-objdump-22 decodes the output; the instrumented kernels show their markers.
        let dis = llvm("llvm-objdump", &["-d"]);
        assert!(!dis.contains("<unknown>"), "{target}: {dis}");
        for k in ["stub_main", "stub_other", "stub_last", "stub_helper"] {
            let body: String = dis
                .split(&format!("<{k}>:\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{target}: {k} not in the disassembly"))
                .split("\n\n")
                .next()
                .unwrap_or_default()
                .to_string();
            assert!(body.contains("s_ttracedata"), "{target}: {k}: {body}");
        }
        for k in ["stub_tramp_a", "stub_tramp_b"] {
            let body = dis.split(&format!("<{k}>:\n")).nth(1).unwrap_or_default();
            let first = body.lines().next().unwrap_or_default();
            assert!(
                first.contains("s_setreg_imm32_b32"),
                "{target}: {k}: {first}"
            );
        }
    }
}

#[test]
fn verifier_rejects_corrupted_verbatim_copies() {
    for target in TARGETS {
        let (input, output) = instrument(target);
        let b = hsaco::CodeObject::parse(&output).expect("output");
        let text = b.text().expect(".text");
        let off = |addr: u64| (text.offset + (addr - text.addr)) as usize;
        // 1. The stub's own instruction (its literal).
        let tramp = entry(&b, "stub_tramp_a");
        let mut bad = output.clone();
        bad[off(tramp + 4)] ^= 0x2;
        let v = sqtt_verify::verify(&input, &bad).expect("verifier runs");
        assert!(
            v.findings
                .iter()
                .any(|f| f.function.as_deref() == Some("stub_tramp_a")),
            "{target}: {:?}",
            v.findings
        );
        // 2. The zero padding it falls into (outside its symbol: only the verbatim rule
        //    covers it).
        let mut bad = output.clone();
        bad[off(tramp + 16)] = 0x7f;
        let v = sqtt_verify::verify(&input, &bad).expect("verifier runs");
        assert!(
            v.findings
                .iter()
                .any(|f| f.check == sqtt_verify::Check::Verbatim
                    && f.function.as_deref() == Some("stub_tramp_a")),
            "{target}: {:?}",
            v.findings
        );
    }
}
