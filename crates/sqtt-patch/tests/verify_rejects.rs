//! Hand-broken outputs that `sqtt-patch verify` must reject: a real fixture is instrumented by
//! the tool, one field of the output is changed at the byte level, and the verdict and finding
//! are pinned (fresh tester, session 11: each of these was accepted before).

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/objects")
        .join(name)
}

/// Instruments fixture `name` with `flags` into `dir`; returns (input path, output bytes).
fn instrument(dir: &Path, name: &str, flags: &[&str]) -> (PathBuf, Vec<u8>) {
    let out = dir.join(format!("{name}.out"));
    Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(fixture(name))
        .arg("-o")
        .arg(&out)
        .args(flags)
        .assert()
        .success();
    (fixture(name), std::fs::read(&out).unwrap())
}

/// Runs `verify ORIG BROKEN` on `broken` (written to `dir`); returns (exit code, stdout).
fn verify(dir: &Path, orig: &Path, broken: &[u8]) -> (i32, String) {
    let p = dir.join("broken.co");
    std::fs::write(&p, broken).unwrap();
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg("verify")
        .arg(orig)
        .arg(&p)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// `bytes` with the first occurrence of `from` replaced by `to` (same length).
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(from)));
    let mut v = bytes.to_vec();
    v[at..at + to.len()].copy_from_slice(to);
    v
}

/// The id of the first `.sqtt_funcmap` row of `kind` whose name starts with `name` (the
/// verifier's own funcmap parser).
fn row_id(bytes: &[u8], kind: char, name: &str) -> u32 {
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    sqtt_verify::funcmap::parse(co.funcmap().expect(".sqtt_funcmap"))
        .rows
        .iter()
        .find(|r| r.kind == kind && r.name.starts_with(name))
        .and_then(|r| r.id)
        .unwrap_or_else(|| panic!("no {kind}: row for {name}"))
}

/// The gfx1100 `s_ttracedata_imm` with marker word `word` (`amdgpu_isa::build`), as bytes.
fn ttracedata_imm(word: u32) -> Vec<u8> {
    let t = amdgpu_isa::Target::from_name("gfx1100").unwrap();
    let word = u8::try_from(word).expect("an 8-bit marker word");
    amdgpu_isa::build::s_ttracedata_imm(t, word)
        .unwrap()
        .bytes()
        .to_vec()
}

fn assert_rejected(dir: &Path, orig: &Path, broken: &[u8], want: &str) {
    let (code, text) = verify(dir, orig, broken);
    assert_eq!(code, 1, "want exit 1 and {want:?}:\n{text}");
    assert!(text.contains(want), "want {want:?}:\n{text}");
}

#[test]
fn funcmap_rows_must_name_what_they_mark() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx1100__barriers__O3.co",
        &["--functions", "1", "--barriers", "1"],
    );
    assert_eq!(
        verify(t.path(), &orig, &out).0,
        0,
        "the output itself verifies"
    );
    let cases: [(&[u8], &[u8], &str); 4] = [
        (
            b"K:k_bar_reduce",
            b"K:k_bar_reducX",
            "K: row \"k_bar_reducX\" does not name a kernel",
        ),
        (
            b"K:k_bar_reduce",
            b"              ",
            "kernel k_bar_reduce has no K: row",
        ),
        (
            b"P:1:barrier",
            b"P:1:barriex",
            "P: row \"barriex\" does not name a barrier",
        ),
        (b"F:2:_Z14", b"U:2:_Z14", "U: row \"_Z14"),
    ];
    for (from, to, want) in cases {
        assert_rejected(t.path(), &orig, &replaced(&out, from, to), want);
    }
    // A point marker turned into a fused exit+enter of the function's own scope keeps the
    // enter/exit balance, but a post-link rewrite never emits the fused form.
    let point = ttracedata_imm(row_id(&out, 'P', "barrier") << 2);
    let fused = ttracedata_imm((row_id(&out, 'F', "_Z14") << 2) | 3);
    assert_rejected(
        t.path(),
        &orig,
        &replaced(&out, &point, &fused),
        "fused exit+enter marker",
    );
}

#[test]
fn an_address_trace_row_keeps_its_name() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx1100__memory__O3.co",
        &["--functions", "1", "--trace-addresses", "memory,lds"],
    );
    let broken = replaced(&out, b":addr_trace_load", b":aXdr_trace_load");
    assert_rejected(
        t.path(),
        &orig,
        &broken,
        "does not name a barrier, memory, address-trace, loop-iteration or user-named point",
    );
}

#[test]
fn a_kernel_scope_enter_must_not_name_a_device_function() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx1100__calls__O3.co",
        &["--functions", "1", "--kernel-scopes"],
    );
    let kernel = row_id(&out, 'U', "k_call_chain");
    let device = row_id(&out, 'F', "_Z6horner");
    let broken = replaced(
        &out,
        &ttracedata_imm((kernel << 2) | 2),
        &ttracedata_imm((device << 2) | 2),
    );
    assert_rejected(t.path(), &orig, &broken, "which is not entered here");
}

/// Program headers grown without a section to cover: file bytes over `.bss`, `p_filesz`
/// beyond `p_memsz`, a note segment longer than its note.
#[test]
fn program_headers_may_not_grow_past_their_sections() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx942__calls__O3.co",
        &["--functions", "1", "--barriers", "1"],
    );
    let co = hsaco::CodeObject::parse(&out).unwrap();
    let phoff = co.elf.header.e_phoff as usize;
    let mut tried = 0;
    for (i, p) in co.elf.segments.iter().enumerate() {
        if !matches!(p.p_type, hsaco::elf::PT_LOAD | hsaco::elf::PT_NOTE) || p.memsz == 0 {
            continue;
        }
        // p_filesz (+32) and p_memsz (+40) of the 56-byte program header grown by 4 bytes.
        let mut broken = out.clone();
        for (off, value) in [(32, p.filesz), (40, p.memsz)] {
            let at = phoff + 56 * i + off;
            broken[at..at + 8].copy_from_slice(&(value + 4).to_le_bytes());
        }
        assert_rejected(t.path(), &orig, &broken, "bytes after its last section");
        tried += 1;
    }
    assert!(tried >= 3, "PT_LOAD/PT_NOTE headers tried: {tried}");
}

/// A metadata `.sgpr_count` grown past what the target can have: gfx10+ descriptors carry no
/// SGPR bound, so the target's ceiling is the guard (106 addressable SGPRs plus VCC = 108, LLVM
/// `AMDGPUBaseInfo`). 108 is accepted, 109 is not.
#[test]
fn sgpr_count_may_not_grow_past_the_target() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx1100__calls__O3.co",
        &["--trace-addresses", "memory,lds", "--scope"],
    );
    // The MessagePack key `.sgpr_count` (fixstr 0xab) and its positive-fixint value.
    let key = b"\xab.sgpr_count";
    let at = out
        .windows(key.len())
        .position(|w| w == key)
        .expect(".sgpr_count in the note")
        + key.len();
    assert!(out[at] < 108, "a fixint value below 108: {:#x}", out[at]);
    let with = |count: u8| {
        let mut v = out.clone();
        v[at] = count;
        v
    };
    let (code, text) = verify(t.path(), &orig, &with(108));
    assert_eq!(code, 0, "{text}");
    assert_rejected(
        t.path(),
        &orig,
        &with(109),
        ".sgpr_count 109 exceeds the 108 SGPRs gfx1100 can have",
    );
}

/// The `.sqtt_patch` run record (fresh tester, session 12: any change to it was accepted): an
/// edited record is rejected, while the output of `--force` re-instrumentation (whose original
/// already has a record, replaced by the new run's) still verifies against its input.
#[test]
fn the_run_record_is_checked_and_force_outputs_verify() {
    let t = tempfile::tempdir().unwrap();
    let flags = ["--functions", "1", "--barriers", "1"];
    let (orig, out) = instrument(t.path(), "gfx1100__barriers__O3.co", &flags);
    assert_eq!(verify(t.path(), &orig, &out).0, 0, "the output verifies");
    assert_rejected(
        t.path(),
        &orig,
        &replaced(&out, b"\"tool\":\"sqtt-patch\"", b"\"tool\":\"sqtt-patcX\""),
        ".sqtt_patch is not the run record a rewrite writes",
    );
    assert_rejected(
        t.path(),
        &orig,
        &replaced(&out, b".sqtt_patch\0", b".sqtt_patcX\0"),
        "the rewritten object has 0 .sqtt_patch sections; a rewrite has exactly one",
    );
    // Re-instrumentation needs --force, and its output verifies against the first output.
    let first = t.path().join("first.co");
    std::fs::write(&first, &out).unwrap();
    let again = t.path().join("again.co");
    let run = |force: &[&str]| {
        Command::cargo_bin("sqtt-patch")
            .unwrap()
            .arg(&first)
            .arg("-o")
            .arg(&again)
            .args(flags)
            .args(force)
            .output()
            .unwrap()
    };
    assert_eq!(run(&[]).status.code(), Some(2), "refused without --force");
    assert_eq!(run(&["--force"]).status.code(), Some(0));
    let second = std::fs::read(&again).unwrap();
    assert_ne!(second, out, "instrumented again");
    let (code, text) = verify(t.path(), &first, &second);
    assert_eq!(code, 0, "{text}");
}

/// Issue 32 item 17: the summary line said "N functions" and listed fewer (only those with
/// inserted code); it now says how many are listed, and the list has exactly that many lines.
#[test]
fn the_summary_counts_what_it_lists() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(t.path(), "gfx1100__calls__O3.co", &["--functions", "1"]);
    let (code, text) = verify(t.path(), &orig, &out);
    assert_eq!(code, 0, "{text}");
    let first = text.lines().next().unwrap_or_default();
    let listed = text.lines().filter(|l| l.starts_with("  ")).count();
    let want = format!(" functions ({listed} with inserted code, listed below), ");
    assert!(
        first.contains(&want),
        "{first:?} vs {listed} listed:\n{text}"
    );
    let total: usize = first
        .split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("function count");
    assert!(listed > 0 && listed < total, "{text}");
}

/// Issue 31 §3: a VGPR allocation grown for the address-trace loops is written back. The
/// report, the descriptor and the metadata note's `.vgpr_count` agree (`k_grow` of the gfx1100
/// spill fixture: 8 VGPRs, the loops need a ninth), and an output whose note still says 8 is
/// rejected by the verifier.
#[test]
fn grown_vgprs_agree_in_the_report_descriptor_and_note() {
    let t = tempfile::tempdir().unwrap();
    let name = "gfx1100__spill__O3.co";
    let out = t.path().join("g.co");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(fixture(name))
        .args(["-o", out.to_str().unwrap(), "--functions", "1"])
        .args(["--trace-addresses", "memory,lds", "--report"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stdout);
    let line = report
        .lines()
        .find(|l| l.contains("kernel k_grow:"))
        .unwrap_or_else(|| panic!("no k_grow line:\n{report}"));
    assert!(line.contains("vgprs 8->16"), "{line}");
    let bytes = std::fs::read(&out).unwrap();
    let co = hsaco::CodeObject::parse(&bytes).unwrap();
    let k = co.kernels.iter().find(|k| k.name == "k_grow").unwrap();
    assert_eq!(k.descriptor.registers(&co.target).vgprs_allocated, 16);
    let (m, i) = k.metadata_index.unwrap();
    let noted = co.metadata[m].kernel_u64(i, ".vgpr_count").unwrap();
    assert!((9..=16).contains(&noted), ".vgpr_count {noted}");
    // The note's `.vgpr_count` of k_grow set back to 8 (fixstr key, positive-fixint value).
    let key = b"\xab.vgpr_count";
    let at = bytes
        .windows(key.len() + 1)
        .position(|w| w[..key.len()] == key[..] && u64::from(w[key.len()]) == noted)
        .expect("k_grow's .vgpr_count in the note")
        + key.len();
    let mut broken = bytes.clone();
    broken[at] = 8;
    assert_rejected(
        t.path(),
        &fixture(name),
        &broken,
        ".vgpr_count Some(8) does not cover the VGPR allocation grown from 8 to 16",
    );
}

/// `bytes` with the `nth` occurrence (from 0) of `from` inside `.text` replaced by `to` (same
/// length); also the rewritten address of the change (bytes).
fn replaced_in_text(bytes: &[u8], from: &[u8], to: &[u8], nth: usize) -> (Vec<u8>, u64) {
    assert_eq!(from.len(), to.len());
    let co = hsaco::CodeObject::parse(bytes).unwrap();
    let text = co.section(".text").expect(".text");
    let (start, size) = (text.offset as usize, text.size as usize);
    let at = bytes[start..start + size]
        .windows(from.len())
        .enumerate()
        .filter(|(i, w)| *w == from && i % 4 == 0)
        .map(|(i, _)| i)
        .nth(nth)
        .unwrap_or_else(|| panic!("occurrence {nth} of {from:x?} not in .text"));
    let mut v = bytes.to_vec();
    v[start + at..start + at + to.len()].copy_from_slice(to);
    (v, text.addr + at as u64)
}

/// The M0 marker snippet `s_mov_b32 m0, word`, `s_nop 0`, `s_ttracedata` of `target` (spec
/// "Instruction selection": every target may use the M0 form), as bytes.
fn m0_marker(target: &str, word: u32) -> Vec<u8> {
    use amdgpu_isa::build::{self, Operand};
    let t = amdgpu_isa::Target::from_name(target).unwrap();
    let mut v = build::s_mov_b32(t, Operand::M0, Operand::Literal(word))
        .unwrap()
        .bytes()
        .to_vec();
    v.extend(build::s_nop(t, 0).unwrap().bytes());
    v.extend(build::s_ttracedata(t).unwrap().bytes());
    v
}

/// The flags of the marker-id tests: every kind of row a rewrite names with a marker word.
const ALL_KINDS: [&str; 8] = [
    "--functions",
    "1",
    "--barriers",
    "1",
    "--memory",
    "1:0",
    "--loops",
    "1:iters",
];

/// Issue 32 item 17: a changed marker payload is rejected, in the `s_ttracedata_imm` form
/// (gfx1100) and in the M0 form (gfx942), with a finding naming the changed marker's address: an
/// id without a row, a point of another kind (a barrier marker naming `vmem_load`, a load's
/// marker naming `vmem_store`), the
/// iteration point of another loop (same function and another function), the scope of another
/// loop of the same function, and a device function's scope entered in another function.
#[test]
fn marker_payloads_must_name_the_row_of_their_site() {
    let t = tempfile::tempdir().unwrap();
    for (name, word_form) in [
        ("gfx1100__memory__O3.co", "imm"),
        ("gfx942__memory__O3.co", "m0"),
    ] {
        let (orig, out) = instrument(t.path(), name, &ALL_KINDS);
        assert_eq!(
            verify(t.path(), &orig, &out).0,
            0,
            "{name}: the output verifies"
        );
        let bytes = |word: u32| match word_form {
            "imm" => ttracedata_imm(word),
            _ => m0_marker("gfx942", word),
        };
        let point = |n: &str| row_id(&out, 'P', n) << 2;
        let enter = |n: &str| (row_id(&out, 'U', n) << 2) | 2;
        // Two loops of k_global_atomics with iteration points.
        let rows =
            sqtt_verify::funcmap::parse(hsaco::CodeObject::parse(&out).unwrap().funcmap().unwrap())
                .rows;
        let loops: Vec<&str> = rows
            .iter()
            .filter(|r| r.kind == 'U' && r.name.starts_with("loop k_global_atomics+"))
            .map(|r| r.name.as_str())
            .filter(|l| rows.iter().any(|r| r.name == format!("iter {l}")))
            .collect();
        assert!(
            loops.len() >= 2,
            "{name}: loops of k_global_atomics {loops:?}"
        );
        let (l0, l1) = (loops[0], loops[1]);
        let iter = |l: &str| point(&format!("iter {l}"));
        // Pairs of words of one encoding size in the M0 form (inline constants up to 64).
        let cases: [(u32, u32, &str); 7] = [
            (
                point("vmem_load"),
                point("vmem_store"),
                "the next global, flat or buffer operation is no store or atomic",
            ),
            (
                point("iter loop k_scratch+"),
                61 << 2,
                "(id 61) has no .sqtt_funcmap row",
            ),
            (
                point("barrier"),
                point("vmem_load"),
                "names the P: row \"vmem_load\", which does not fit here",
            ),
            (iter(l1), iter(l0), "nor at a branch to it"),
            (
                point("iter loop k_lds+"),
                point("iter loop k_scratch+"),
                "k_scratch is not this function",
            ),
            (enter(l1), enter(l0), "not entered here"),
            (
                point("vmem_store"),
                point("barrier"),
                "no s_barrier (or signal/wait pair) follows",
            ),
        ];
        for (from, to, want) in cases {
            let (broken, at) = replaced_in_text(&out, &bytes(from), &bytes(to), 0);
            let (code, text) = verify(t.path(), &orig, &broken);
            assert_eq!(
                code, 1,
                "{name} {from:#x}->{to:#x}: want exit 1, {want:?}:\n{text}"
            );
            // The finding names the marker instruction: the `s_ttracedata` after the M0 set-up
            // and the `s_nop 0` in the M0 form.
            let marker = match word_form {
                "imm" => at,
                _ => at + bytes(from).len() as u64 - 4,
            };
            let line = text
                .lines()
                .find(|l| l.contains(want))
                .unwrap_or_else(|| panic!("{name} {from:#x}->{to:#x}: want {want:?}:\n{text}"));
            assert!(
                line.contains(&format!("new {marker:#x}")),
                "{name}: the finding names {marker:#x}: {line}"
            );
        }
    }
}

/// An address-trace header naming another class's row of the same payload count (a load's
/// block naming an `addr_trace_store` row): the row's class must be the next traced operation's
/// (gfx1100, M0 form: the header goes through M0 with its payload).
#[test]
fn an_address_trace_header_must_name_its_operations_class() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(
        t.path(),
        "gfx1100__memory__O3.co",
        &["--trace-addresses", "memory,lds"],
    );
    let load = row_id(&out, 'P', "addr_trace_load") << 2;
    let store = row_id(&out, 'P', "addr_trace_store") << 2;
    let set = |w: u32| m0_marker("gfx1100", w);
    let (broken, _) = replaced_in_text(&out, &set(load), &set(store), 0);
    assert_rejected(
        t.path(),
        &orig,
        &broken,
        "names the P: row \"addr_trace_store\", which does not fit here: the next traced memory operation is not of that class",
    );
}

/// A device function's enter marker naming another device function's `F:` row (imm form).
#[test]
fn a_function_enter_must_name_its_own_function() {
    let t = tempfile::tempdir().unwrap();
    let (orig, out) = instrument(t.path(), "gfx1100__calls__O3.co", &["--functions", "1"]);
    let own = row_id(&out, 'F', "_Z6horner");
    let other = row_id(&out, 'F', "_Z9big_mixer");
    let (broken, at) = replaced_in_text(
        &out,
        &ttracedata_imm((own << 2) | 2),
        &ttracedata_imm((other << 2) | 2),
        0,
    );
    let (code, text) = verify(t.path(), &orig, &broken);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.lines().any(|l| l
            .contains("names the F: row of _Z9big_mixerjj, which is not entered here")
            && l.contains(&format!("new {at:#x}"))),
        "{text}"
    );
}

/// Session-17 fresh tester: a rewrite without inserted code (here: only the run record added)
/// was summarised as "0 with inserted code, listed below" over an empty list.
#[test]
fn a_summary_with_nothing_to_list_says_so() {
    let t = tempfile::tempdir().unwrap();
    let orig = fixture("gfx1100__calls__O3.co");
    let bytes = std::fs::read(&orig).unwrap();
    let co = hsaco::CodeObject::parse(&bytes).unwrap();
    let mut ed = hsaco::CodeObjectEditor::new(&co);
    let record = b"{\"options\":\"test\",\"tool\":\"sqtt-patch\",\"version\":\"0.1.0\"}\n";
    ed.add_or_replace_section(".sqtt_patch", 1, 0, 1, record.to_vec())
        .unwrap();
    let (code, text) = verify(t.path(), &orig, &ed.write().unwrap());
    assert_eq!(code, 0, "{text}");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(" functions (none with inserted code), ") && !text.contains("listed below"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("  ")), "{text}");
}

/// Session-17 fresh tester: a section whose name is empty (`sh_name` 0) was matched with the
/// null section, so the input "did not verify against itself" with a message naming an empty
/// section ("section  type/flags changed"). It is matched by index now: the input is
/// instrumented and the output verifies; changed flags of that section are named by its index.
#[test]
fn a_section_without_a_name_is_matched_and_named_by_index() {
    let t = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixture("gfx1100__calls__O3.co")).unwrap();
    let co = hsaco::CodeObject::parse(&bytes).unwrap();
    let rodata = co.section(".rodata").expect(".rodata").index;
    let header = co.elf.header.e_shoff as usize + 64 * rodata;
    bytes[header..header + 4].fill(0); // sh_name: the empty string at .shstrtab offset 0
    let orig = t.path().join("unnamed.co");
    std::fs::write(&orig, &bytes).unwrap();
    let out = t.path().join("unnamed.out");
    let o = Command::cargo_bin("sqtt-patch")
        .unwrap()
        .arg(&orig)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = std::fs::read(&out).unwrap();
    let (code, text) = verify(t.path(), &orig, &out);
    assert_eq!(code, 0, "{text}");
    // sh_flags (+8) of the unnamed section in the output: SHF_WRITE added.
    let n = hsaco::CodeObject::parse(&out).unwrap();
    let at = n.elf.header.e_shoff as usize + 64 * rodata + 8;
    let mut broken = out.clone();
    broken[at] |= 1;
    assert_rejected(
        t.path(),
        &orig,
        &broken,
        &format!("section [{rodata}] (empty name) type/flags changed"),
    );
}
