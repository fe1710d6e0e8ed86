//! Functions that end in `s_trap 2` or in a call that does not return (issue 29 items 1 and 2),
//! on `fixtures/left-alone/<target>__trap__O3.co` (from `fixtures/src/trap.hip`):
//! - `fx_fail` ends in `s_trap 2` (`llvm.trap`, which aborts the queue): it ends the function
//!   like `s_endpgm`, so the function is instrumented;
//! - `fx_assert_fail` (the shape of `__assert_fail`) ends in a call of `fx_fail`, which never
//!   returns: execution cannot fall off its end, so it is instrumented too, its `s_getpc`
//!   builders (a `.rodata` message, the entry of `fx_fail`) re-aimed;
//! - with `fx_fail`'s `s_trap 2` replaced by a return (the input patched in the test), the call
//!   may return and `fx_assert_fail` could fall off its end: it is left alone, and it moves as
//!   one block with those builder fields re-aimed.
//!
//! Oracles: llvm-objdump-22 (the builders' targets in the output), the input's bytes, and the
//! independent verifier, including its rejection of a changed byte that is no PC-relative field.
use sqtt_rewrite::config::{FunctionThreshold, Options};
use sqtt_rewrite::rewrite::{rewrite, Status};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGETS: [&str; 2] = ["gfx942", "gfx1100"];
const FAIL: &str = "_Z7fx_failPjj";
const ASSERT: &str = "_Z14fx_assert_failPjPKc";

fn fixture(target: &str) -> Vec<u8> {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/left-alone")
        .join(format!("{target}__trap__O3.co"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn opts() -> Options {
    Options {
        functions: FunctionThreshold::Count(1),
        barriers: true,
        ..Options::default()
    }
}

/// Entry address of function `name` (symbol value).
fn entry(co: &hsaco::CodeObject, name: &str) -> u64 {
    co.symbols
        .iter()
        .find(|s| s.symbol.name == name && s.symbol.shndx != 0)
        .map(|s| s.symbol.value)
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

/// `llvm-objdump-22 -d` of the code object `bytes`, written in a temporary directory.
fn objdump(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("co");
    std::fs::write(&f, bytes).expect("write");
    let o = Command::new("/usr/lib/llvm-22/bin/llvm-objdump")
        .arg("-d")
        .arg(&f)
        .output()
        .expect("run llvm-objdump-22");
    assert!(o.status.success(), "llvm-objdump-22 failed");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The lines of function `name` in a disassembly.
fn body<'a>(dis: &'a str, name: &str) -> Vec<&'a str> {
    dis.split(&format!("<{name}>:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{name} not in the disassembly"))
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .collect()
}

/// The address of a disassembly line (llvm-objdump's `// ADDR:` comment).
fn line_addr(l: &str) -> u64 {
    let c = l.split("// ").nth(1).expect("address comment");
    u64::from_str_radix(c.split(':').next().expect("address").trim(), 16).expect("hex")
}

/// The targets of the `s_getpc_b64` address builders in `lines` (getpc + 4 + the 64-bit offset
/// of the low add's literal and the high add's constant), in order.
fn builder_targets(lines: &[&str]) -> Vec<u64> {
    let num = |s: &str| -> u64 {
        let s = s.trim().trim_start_matches("lit(").trim_end_matches(')');
        u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex operand")
    };
    let operand = |l: &str| -> u64 {
        let ops = l.split("//").next().expect("operands");
        num(ops.rsplit(',').next().expect("last operand"))
    };
    let mut out = Vec::new();
    for (k, l) in lines.iter().enumerate() {
        if !l.contains("s_getpc_b64") {
            continue;
        }
        let lo = lines[k + 1..]
            .iter()
            .find(|x| x.contains("s_add_u32") || x.contains("s_add_co_u32"))
            .expect("low add");
        let hi = lines[k + 1..]
            .iter()
            .find(|x| x.contains("s_addc_u32") || x.contains("s_add_co_ci_u32"))
            .expect("high add");
        let off = (operand(hi) << 32) | (operand(lo) & 0xffff_ffff);
        out.push((line_addr(l) + 4).wrapping_add(off));
    }
    out
}

/// `input` with `fx_fail`'s `s_trap 2` replaced by `s_setpc_b64 s[30:31]` (a return; both
/// 4 bytes, encodings from llvm-mc-22): a call of `fx_fail` may return then.
fn fail_returns(input: &[u8], target: &str) -> Vec<u8> {
    let enc = |asm: &str| -> Vec<u8> {
        let mut c = Command::new("/usr/lib/llvm-22/bin/llvm-mc")
            .args(["-arch=amdgcn", &format!("-mcpu={target}"), "-show-encoding"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run llvm-mc-22");
        std::io::Write::write_all(c.stdin.as_mut().expect("stdin"), asm.as_bytes()).expect("write");
        let o = c.wait_with_output().expect("llvm-mc-22");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let list = text
            .split("encoding: [")
            .nth(1)
            .and_then(|r| r.split(']').next())
            .unwrap_or_else(|| panic!("no encoding for {asm}: {text}"));
        list.split(',')
            .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).expect("byte"))
            .collect()
    };
    let (trap, ret) = (enc("s_trap 2\n"), enc("s_setpc_b64 s[30:31]\n"));
    assert_eq!((trap.len(), ret.len()), (4, 4), "{target}");
    let co = hsaco::CodeObject::parse(input).expect("input");
    let text = co.text().expect(".text");
    let start = (text.offset + (entry(&co, FAIL) - text.addr)) as usize;
    let at = input[start..]
        .chunks_exact(4)
        .position(|w| w == trap.as_slice())
        .map(|k| start + 4 * k)
        .expect("s_trap 2 in fx_fail");
    let mut out = input.to_vec();
    out[at..at + 4].copy_from_slice(&ret);
    out
}

/// The bytes of the code object `co` at virtual address `addr` (in the section holding it).
fn bytes_at(co: &hsaco::CodeObject, addr: u64, len: usize) -> Vec<u8> {
    let s = co
        .elf
        .sections
        .iter()
        .find(|s| s.addr <= addr && addr < s.addr + s.size && s.sh_type != hsaco::elf::SHT_NOBITS)
        .expect("a section holds the address");
    co.section_data(s)[(addr - s.addr) as usize..][..len].to_vec()
}

#[test]
fn abort_trap_is_decoded_as_the_end_and_other_traps_continue() {
    // s_trap 2 / s_trap 3 as llvm-mc-22 encodes them (SOPP opcode 0x12 on gfx9, 0x10 on gfx11).
    for (t, op) in [("gfx942", 0x92u8), ("gfx1100", 0x90)] {
        let target = amdgpu_isa::Target::from_name(t).expect("target");
        for (id, aborts) in [(2u8, true), (3, false), (0x82, false)] {
            let i = amdgpu_isa::decode(&[id, 0, op, 0xbf], target).expect("decodes");
            assert_eq!(i.mnemonic(), "s_trap", "{t}");
            assert_eq!(
                sqtt_rewrite::analysis::aborts(&i),
                aborts,
                "{t}: s_trap {id}"
            );
        }
    }
}

#[test]
fn a_function_ending_in_s_trap_2_is_instrumented() {
    for target in TARGETS {
        let input = fixture(target);
        // The oracle: fx_fail holds s_trap 2; on gfx942 as its last instruction, on gfx1100
        // followed by LLVM's fallback ending in a branch to itself.
        let dis_in = objdump(&input);
        let lines_in = body(&dis_in, FAIL);
        let last = *lines_in.last().expect("fx_fail has code");
        if target == "gfx942" {
            assert!(last.contains("s_trap 2"), "{target}: {last}");
        } else {
            assert!(lines_in.iter().any(|l| l.contains("s_trap 2")), "{target}");
            assert!(last.contains("s_branch"), "{target}: {last}");
        }
        let out = rewrite(&input, &opts()).expect("rewrite");
        let r = &out.report;
        assert_eq!(r.status, Status::Instrumented, "{target}: {:?}", r.reasons);
        let f = r
            .functions
            .iter()
            .find(|f| f.name == FAIL)
            .expect("fx_fail in the report");
        assert_eq!(
            f.sites.get("function_entry"),
            Some(&1),
            "{target}: {:?}",
            f.sites
        );
        assert!(r.left_alone.iter().all(|l| l.name != FAIL), "{target}");
        let output = out.bytes.expect("output");
        let v = sqtt_verify::verify(&input, &output).expect("verifier runs");
        assert!(v.is_clean(), "{target}: {:?}", v.findings);
        let dis = objdump(&output);
        let lines = body(&dis, FAIL);
        assert!(lines.iter().any(|l| l.contains("s_ttracedata")), "{target}");
        assert!(lines.iter().any(|l| l.contains("s_trap 2")), "{target}");
    }
}

/// `fx_assert_fail` ends in a call of `fx_fail`, which ends in `s_trap 2`: the call ends it, so
/// it is instrumented (before: left alone as falling off its end), its builders still reach the
/// message and `fx_fail`'s new entry, and the verifier agrees by its own analysis.
#[test]
fn a_call_of_a_function_that_never_returns_ends_the_caller() {
    for target in TARGETS {
        let input = fixture(target);
        let out = rewrite(&input, &opts()).expect("rewrite");
        let r = &out.report;
        assert_eq!(r.status, Status::Instrumented, "{target}: {:?}", r.reasons);
        assert!(r.left_alone.is_empty(), "{target}: {:?}", r.left_alone);
        let f = r
            .functions
            .iter()
            .find(|f| f.name == ASSERT)
            .expect("fx_assert_fail in the report");
        assert_eq!(f.sites.get("function_entry"), Some(&1), "{target}");
        let output = out.bytes.expect("output");
        let b = hsaco::CodeObject::parse(&output).expect("output");
        let t_out = builder_targets(&body(&objdump(&output), ASSERT));
        assert_eq!(t_out.len(), 2, "{target}: {t_out:x?}");
        assert_eq!(t_out[1], entry(&b, FAIL), "{target}");
        let msg = b"index out of range\0";
        assert_eq!(bytes_at(&b, t_out[0], msg.len()), msg, "{target}");
        let v = sqtt_verify::verify(&input, &output).expect("verifier runs");
        assert!(v.is_clean(), "{target}: {:?}", v.findings);
        // Against an original whose fx_fail returns, the same output is wrong: fx_assert_fail
        // could fall off its end there, so it had to stay byte for byte as it was.
        let returning = fail_returns(&input, target);
        let v = sqtt_verify::verify(&returning, &output).expect("verifier runs");
        assert!(
            v.findings
                .iter()
                .any(|f| f.check == sqtt_verify::Check::Verbatim
                    && f.function.as_deref() == Some(ASSERT)),
            "{target}: {:?}",
            v.findings
        );
    }
}

#[test]
fn a_left_alone_function_with_builders_leaving_it_moves_with_them_re_aimed() {
    for target in TARGETS {
        let input = fail_returns(&fixture(target), target);
        let out = rewrite(&input, &opts()).expect("rewrite");
        let r = &out.report;
        assert_eq!(r.status, Status::Instrumented, "{target}: {:?}", r.reasons);
        assert!(r.reasons.is_empty(), "{target}: {:?}", r.reasons);
        let la: Vec<&str> = r.left_alone.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(la, [ASSERT], "{target}");
        let l = &r.left_alone[0];
        assert!(
            l.why
                .ends_with(sqtt_rewrite::analysis::FALLS_OFF_AFTER_CALL),
            "{target}: {}",
            l.why
        );
        // Code that can run, not a compiled-out stub: its site counts as lost coverage
        // (fx_fail, returning now, has an entry and an exit site).
        assert!(!l.stub, "{target}");
        let funcs = r
            .coverage
            .iter()
            .find(|c| c.feature == "functions")
            .expect("coverage");
        assert_eq!(
            (funcs.instrumented, funcs.found, funcs.in_stubs),
            (2, 3, 0),
            "{target}"
        );
        let output = out.bytes.expect("output");
        let (a, b) = (
            hsaco::CodeObject::parse(&input).expect("input"),
            hsaco::CodeObject::parse(&output).expect("output"),
        );
        let (old, new) = (entry(&a, ASSERT), entry(&b, ASSERT));
        assert_ne!(old, new, "{target}: fx_assert_fail did not move");
        // The builders' targets (llvm-objdump-22): the message and fx_fail's entry, before and
        // after.
        let t_in = builder_targets(&body(&objdump(&input), ASSERT));
        let t_out = builder_targets(&body(&objdump(&output), ASSERT));
        assert_eq!(t_in.len(), 2, "{target}: {t_in:x?}");
        assert_eq!(t_in[1], entry(&a, FAIL), "{target}");
        assert_eq!(t_out[1], entry(&b, FAIL), "{target}");
        let msg = b"index out of range\0";
        assert_eq!(bytes_at(&a, t_in[0], msg.len()), msg, "{target}");
        assert_eq!(bytes_at(&b, t_out[0], msg.len()), msg, "{target}");
        // Byte for byte the same function but for those fields: as long, the same mnemonics.
        let (dis_a, dis_b) = (objdump(&input), objdump(&output));
        let mn = |d: &str| -> Vec<String> {
            body(d, ASSERT)
                .iter()
                .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(mn(&dis_a), mn(&dis_b), "{target}");
        let v = sqtt_verify::verify(&input, &output).expect("verifier runs");
        assert!(v.is_clean(), "{target}: {:?}", v.findings);
    }
}

#[test]
fn verifier_rejects_a_changed_byte_of_a_moved_block_that_is_no_pc_relative_field() {
    for target in TARGETS {
        let input = fail_returns(&fixture(target), target);
        let output = rewrite(&input, &opts())
            .expect("rewrite")
            .bytes
            .expect("output");
        let b = hsaco::CodeObject::parse(&output).expect("output");
        let text = b.text().expect(".text");
        let off = |addr: u64| (text.offset + (addr - text.addr)) as usize;
        let dis = objdump(&output);
        let lines = body(&dis, ASSERT);
        // 1. The first instruction (`s_waitcnt`): a plain byte.
        let mut bad = output.clone();
        bad[off(entry(&b, ASSERT))] ^= 0x1;
        let v = sqtt_verify::verify(&input, &bad).expect("verifier runs");
        assert!(
            v.findings
                .iter()
                .any(|f| f.function.as_deref() == Some(ASSERT)),
            "{target}: {:?}",
            v.findings
        );
        // 2. The literal of the message builder's low add: a PC-relative field, now wrong.
        let lo = lines
            .iter()
            .find(|l| l.contains("s_add_u32") || l.contains("s_add_co_u32"))
            .map(|l| line_addr(l))
            .expect("low add");
        let mut bad = output.clone();
        bad[off(lo + 4)] ^= 0x10;
        let v = sqtt_verify::verify(&input, &bad).expect("verifier runs");
        assert!(
            v.findings
                .iter()
                .any(|f| f.check == sqtt_verify::Check::Branch
                    && f.function.as_deref() == Some(ASSERT)),
            "{target}: {:?}",
            v.findings
        );
    }
}
