//! Odd input fields nothing depends on (session-20 fresh tester: accepted without a word):
//! non-zero reserved kernel descriptor bytes, `e_flags` bits no code object version defines, a
//! `PT_NOTE` segment whose `p_memsz` differs from its `p_filesz`, a metadata `.symbol`
//! naming no symbol, a note and a descriptor that disagree on the kernarg segment or wave size,
//! a metadata note whose type is not `NT_AMDGPU_METADATA`, an `xnack` setting on gfx1100 and
//! ELF versions other than 1 (session-22 fresh tester), more VGPRs than a wave can have and a
//! fat binary wrapper version other than 1 (session-23 fresh tester). None is refused (AMD ships odd inputs): each is a warning on stderr naming
//! the file, the kernel when there is one and the offset, `info` lists it, and the instrumented
//! output keeps the field as it was.
//!
//! The input is `fixtures/objects/gfx1100__calls__O3.co` (clang/LLVM 22) with one field
//! changed; offsets come from `hsaco` on the unmodified file.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sqtt-patch");

fn object() -> Vec<u8> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/objects/gfx1100__calls__O3.co");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The changed input, the warning expected (after `warning: `), and a check of the output.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    warning: String,
    kept: Box<dyn Fn(&hsaco::CodeObject)>,
}

fn cases() -> Vec<Case> {
    let b = object();
    let co = hsaco::CodeObject::parse(&b).expect("fixture parses");
    let k = co
        .kernels
        .iter()
        .find(|k| k.name == "k_call_chain")
        .expect("k_call_chain")
        .clone();
    let mut out = Vec::new();

    let mut kd = b.clone();
    let at = k.kd_offset as usize + 0x20;
    kd[at] = 0x5a;
    out.push(Case {
        name: "reserved.co",
        bytes: kd,
        warning: format!(
            "kernel k_call_chain: descriptor k_call_chain.kd at offset {:#x}: reserved1 (offset {:#x}, 20 bytes) must be zero but holds 00 00 00 00 00 00 00 00 5a 00 00 00 00 00 00 00 00 00 00 00 (first non-zero byte at offset {at:#x}; kept as they are)",
            k.kd_offset,
            k.kd_offset + 0x18
        ),
        kept: Box::new(|o| {
            let k = o.kernels.iter().find(|k| k.name == "k_call_chain").expect("kernel");
            assert_eq!(k.descriptor.reserved1[8], 0x5a, "reserved byte kept");
        }),
    });

    let mut flags = b.clone();
    let e_flags = co.elf.header.e_flags | 0x1000;
    flags[0x30..0x34].copy_from_slice(&e_flags.to_le_bytes());
    out.push(Case {
        name: "flags.co",
        bytes: flags,
        warning: format!(
            "e_flags {e_flags:#x} at offset 0x30 has bits 0x1000 that no code object version defines (kept as they are)"
        ),
        kept: Box::new(move |o| assert_eq!(o.elf.header.e_flags, e_flags, "e_flags kept")),
    });

    // xnack on a processor without it (session-22 fresh tester): the field must be 0.
    assert_eq!(
        co.elf.header.e_flags & 0x300,
        0,
        "the fixture has no xnack setting"
    );
    let mut xnack = b.clone();
    let e_flags_x = co.elf.header.e_flags | 0x300;
    xnack[0x30..0x34].copy_from_slice(&e_flags_x.to_le_bytes());
    out.push(Case {
        name: "xnack.co",
        bytes: xnack,
        warning: format!(
            "e_flags {e_flags_x:#x} at offset 0x30 sets xnack to 3 (0x300) but gfx1100 has no xnack feature, where the field must be 0 (kept as it is)"
        ),
        kept: Box::new(move |o| assert_eq!(o.elf.header.e_flags, e_flags_x, "e_flags kept")),
    });

    // ELF versions other than EV_CURRENT (session-22 fresh tester).
    let mut ident = b.clone();
    ident[6] = 2;
    out.push(Case {
        name: "ei-version.co",
        bytes: ident,
        warning: "e_ident[EI_VERSION] at offset 0x6 is 2, not 1 (EV_CURRENT) (kept as it is)"
            .into(),
        kept: Box::new(|o| assert_eq!(o.bytes[6], 2, "EI_VERSION kept")),
    });
    let mut version = b.clone();
    version[0x14..0x18].copy_from_slice(&7u32.to_le_bytes());
    out.push(Case {
        name: "e-version.co",
        bytes: version,
        warning: "e_version at offset 0x14 is 7, not 1 (EV_CURRENT) (kept as it is)".into(),
        kept: Box::new(|o| assert_eq!(o.bytes[0x14..0x18], 7u32.to_le_bytes(), "kept")),
    });

    let (i, note) = co
        .elf
        .segments
        .iter()
        .enumerate()
        .find(|(_, p)| p.p_type == hsaco::elf::PT_NOTE)
        .expect("PT_NOTE");
    let mut memsz = b.clone();
    let ph = co.elf.header.e_phoff as usize + 56 * i;
    let (filesz, bigger) = (note.filesz, note.memsz + 8);
    memsz[ph + 40..ph + 48].copy_from_slice(&bigger.to_le_bytes());
    out.push(Case {
        name: "memsz.co",
        bytes: memsz,
        warning: format!(
            "program header [{i}] at offset {ph:#x}: PT_NOTE p_memsz {bigger:#x} differs from p_filesz {filesz:#x} (kept as they are)"
        ),
        kept: Box::new(move |o| {
            let p = o.elf.segments.iter().find(|p| p.p_type == hsaco::elf::PT_NOTE).expect("PT_NOTE");
            assert_eq!((p.memsz, p.filesz), (bigger, filesz), "PT_NOTE sizes kept");
        }),
    });

    let md = &co.metadata[0];
    let mut symbol = b.clone();
    let from = note.offset as usize;
    let at = from
        + b[from..from + note.filesz as usize]
            .windows(15)
            .position(|w| w == b"k_call_chain.kd")
            .expect(".symbol in the note");
    symbol[at + 11] = b'm';
    let index = md.kernel_index("k_call_chain.kd").expect("metadata kernel");
    out.push(Case {
        name: "symbol.co",
        bytes: symbol,
        warning: format!(
            "kernel k_call_chain: metadata note at offset {:#x}: amdhsa.kernels[{index}] .symbol \"k_call_chaim.kd\" names no symbol of the object (kept as it is)",
            md.offset
        ),
        kept: Box::new(move |o| {
            let v = o.metadata[0].kernel_value(index, ".symbol").and_then(|v| v.as_str().map(String::from));
            assert_eq!(v.as_deref(), Some("k_call_chaim.kd"), ".symbol kept");
        }),
    });

    // Note and descriptor disagree (session-22 fresh tester): the kernarg segment size, and the
    // wave size (bit 10 of kernel_code_properties, byte 0x39 bit 2).
    let mut kernarg = b.clone();
    let at = k.kd_offset as usize + 0x08;
    kernarg[at..at + 4].copy_from_slice(&235u32.to_le_bytes());
    let size = md
        .kernel_u64(index, ".kernarg_segment_size")
        .expect(".kernarg_segment_size");
    out.push(Case {
        name: "kernarg.co",
        bytes: kernarg,
        warning: format!(
            "kernel k_call_chain: metadata note at offset {:#x}: .kernarg_segment_size {size} disagrees with descriptor k_call_chain.kd's kernarg_size 235 at offset {at:#x} (both kept as they are)",
            md.offset
        ),
        kept: Box::new(|o| {
            let k = o.kernels.iter().find(|k| k.name == "k_call_chain").expect("kernel");
            assert_eq!(k.descriptor.kernarg_size, 235, "kernarg_size kept");
        }),
    });
    let mut wave = b.clone();
    let at = k.kd_offset as usize + 0x39;
    assert_ne!(wave[at] & 4, 0, "the fixture's kernel is wave32");
    wave[at] ^= 4;
    out.push(Case {
        name: "wave.co",
        bytes: wave,
        warning: format!(
            "kernel k_call_chain: metadata note at offset {:#x}: .wavefront_size 32 disagrees with descriptor k_call_chain.kd's kernel_code_properties (wave size) 64 at offset {:#x} (both kept as they are)",
            md.offset,
            k.kd_offset + 0x38
        ),
        kept: Box::new(|o| {
            let k = o.kernels.iter().find(|k| k.name == "k_call_chain").expect("kernel");
            assert!(!k.descriptor.wave32(), "wave-size bit kept");
        }),
    });
    // The metadata note's type (NT_AMDGPU_METADATA, 32: the word before its name) changed.
    let mut untyped = b.clone();
    let name_at = from
        + b[from..from + note.filesz as usize]
            .windows(7)
            .enumerate()
            .find(|&(j, w)| w == b"AMDGPU\0" && b[from + j - 4..from + j] == 32u32.to_le_bytes())
            .expect("the NT_AMDGPU_METADATA note")
            .0;
    untyped[name_at - 4] = 0xdf;
    out.push(Case {
        name: "untyped.co",
        bytes: untyped,
        warning: format!(
            "no NT_AMDGPU_METADATA note: the loader finds no metadata for the {} kernel(s) (kept as it is)",
            co.kernels.len()
        ),
        kept: Box::new(|o| assert!(o.metadata.is_empty(), "the note's type kept")),
    });
    // `.symtab` `sh_entsize` 7 instead of 24 (session-25 fresh tester: copied without a word).
    let symtab = co
        .elf
        .sections
        .iter()
        .find(|s| s.name == ".symtab")
        .expect(".symtab");
    let header = co.elf.header.e_shoff as usize + 64 * symtab.index;
    let mut entsize = b.clone();
    entsize[header + 56..header + 64].copy_from_slice(&7u64.to_le_bytes());
    out.push(Case {
        name: "entsize.co",
        bytes: entsize,
        warning: format!(
            "section .symtab (section header [{}] at offset {header:#x}): sh_entsize 7 at offset {:#x} is not 24, the size of its entries (kept as it is; llvm-objdump-22 refuses such a table)",
            symtab.index,
            header + 56
        ),
        kept: Box::new(|o| {
            let s = o.elf.sections.iter().find(|s| s.name == ".symtab").expect(".symtab");
            assert_eq!(s.entsize, 7, ".symtab sh_entsize kept");
        }),
    });
    out.extend(vgpr_cases(&b, &k));
    out
}

/// More VGPRs than a wave can have on gfx1100 (256; session-23 fresh tester): the descriptor's
/// `GRANULATED_WORKITEM_VGPR_COUNT` (`compute_pgm_rsrc1` bits 0..5 at descriptor offset 0x30)
/// at its largest, 63 (64 granules of 8 in wave32: 512 VGPRs), and a note `.vgpr_count` of 300
/// (written with our own editor).
fn vgpr_cases(b: &[u8], k: &hsaco::Kernel) -> Vec<Case> {
    let mut kd = b.to_vec();
    let at = k.kd_offset as usize + 0x30;
    kd[at] |= 0x3f;
    let co = hsaco::CodeObject::parse(b).expect("fixture parses");
    let (note, i) = k.metadata_index.expect("kernel in the note");
    let mut m = co.metadata[note].clone();
    m.set_kernel_u64(i, ".vgpr_count", 300)
        .expect("set .vgpr_count");
    let mut ed = hsaco::CodeObjectEditor::new(&co);
    ed.set_metadata(m);
    let note_bytes = ed.write().expect("write");
    let written = hsaco::CodeObject::parse(&note_bytes).expect("edited object parses");
    vec![
        Case {
            name: "vgprs-kd.co",
            bytes: kd,
            warning: format!(
                "kernel k_call_chain: descriptor k_call_chain.kd at offset {:#x}: GRANULATED_WORKITEM_VGPR_COUNT 63 (compute_pgm_rsrc1 at offset {at:#x}) allocates 512 VGPRs, more than the 256 a wave can have on gfx1100 (kept as it is)",
                k.kd_offset
            ),
            kept: Box::new(|o| {
                let k = o.kernels.iter().find(|k| k.name == "k_call_chain").expect("kernel");
                assert_eq!(k.descriptor.granulated_vgpr_count(), 63, "VGPR count kept");
            }),
        },
        Case {
            name: "vgprs-note.co",
            bytes: note_bytes,
            warning: format!(
                "kernel k_call_chain: metadata note at offset {:#x}: .vgpr_count 300 is more than the 256 VGPRs a wave can have on gfx1100 (kept as it is)",
                written.metadata[note].offset
            ),
            kept: Box::new(move |o| {
                let k = o.kernels.iter().find(|k| k.name == "k_call_chain").expect("kernel");
                let (m, i) = o.kernel_metadata(k).expect("kernel in the note");
                assert_eq!(m.kernel_u64(i, ".vgpr_count"), Some(300), ".vgpr_count kept");
            }),
        },
    ]
}

/// A HIP fat binary wrapper whose version (offset 4) is 2, not 1 (session-23 fresh tester:
/// accepted without a word): `--fatbin` warns, naming the file and the wrapper's offsets, and
/// the output keeps the field.
#[test]
fn a_fat_binary_wrapper_version_other_than_1_is_warned_about_and_kept() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/x86_64__fx-app__pie.elf");
    let mut b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let fatbins = hsaco::host::find_fatbins(&b, 1 << 30).expect("host parses");
    let at = fatbins[0].wrapper_offset.expect("a wrapper") as usize;
    assert_eq!(
        b[at + 4..at + 8],
        1u32.to_le_bytes(),
        "the fixture's wrapper is version 1"
    );
    b[at + 4] = 2;
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, out) = (dir.path().join("app.elf"), dir.path().join("out.elf"));
    std::fs::write(&file, &b).expect("write input");
    let o = Command::new(BIN)
        .arg("--fatbin")
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args(["--functions", "1"])
        .output()
        .expect("run sqtt-patch");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let line = format!(
        "sqtt-patch: {}: warning: fat binary wrapper [0] at offset {at:#x}: version 2 at offset {:#x} is not 1; the HIP runtime does not register such a fat binary (kept as it is)",
        file.display(),
        at + 4
    );
    assert!(err.lines().any(|l| l == line), "want {line}\n got {err}");
    let written = std::fs::read(&out).expect("output");
    assert_ne!(written, b, "instrumented");
    let w = hsaco::host::find_fatbins(&written, 1 << 30).expect("output parses");
    let at = w[0].wrapper_offset.expect("a wrapper") as usize;
    assert_eq!(written[at + 4..at + 8], 2u32.to_le_bytes(), "version kept");
    // `info` names it too, in text and JSON (session-24 fresh tester: it did not).
    let info = |json: bool| {
        let o = Command::new(BIN)
            .arg("info")
            .arg(&file)
            .args(json.then_some("--json"))
            .output()
            .expect("run info");
        assert_eq!(o.status.code(), Some(0), "info --json {json}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let warning = line.split_once(": warning: ").expect("warning").1;
    let text = info(false);
    assert!(
        text.lines().any(|l| l == format!("warning: {warning}")),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&info(true)).expect("JSON");
    assert_eq!(v["warnings"], serde_json::json!([warning]), "{v}");
}

#[test]
fn odd_fields_are_warned_about_and_kept() {
    for c in cases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, out) = (dir.path().join(c.name), dir.path().join("out.co"));
        std::fs::write(&file, &c.bytes).expect("write input");
        let o = Command::new(BIN)
            .arg(&file)
            .arg("-o")
            .arg(&out)
            .args(["--functions", "1"])
            .output()
            .expect("run sqtt-patch");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}: {err}", c.name);
        let line = format!("sqtt-patch: {}: warning: {}", file.display(), c.warning);
        assert!(
            err.lines().any(|l| l == line),
            "{}: want {line}\n got {err}",
            c.name
        );
        let written = std::fs::read(&out).expect("output");
        assert_ne!(written, c.bytes, "{}: instrumented", c.name);
        (c.kept)(&hsaco::CodeObject::parse(&written).expect("output parses"));

        let o = Command::new(BIN)
            .arg("info")
            .arg(&file)
            .output()
            .expect("run info");
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{}", c.name);
        assert!(
            text.contains(&format!("  warning: {}\n", c.warning)),
            "{}: {text}",
            c.name
        );
    }
    // The unchanged fixture has none of them.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("in.co");
    std::fs::write(&file, object()).expect("write input");
    let o = Command::new(BIN)
        .arg("info")
        .arg(&file)
        .output()
        .expect("run info");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("warning"));
}
