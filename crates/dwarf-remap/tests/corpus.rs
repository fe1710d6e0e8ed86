//! Remaps the DWARF of real `-g` code objects through a synthetic insertion map, re-lays out
//! `.text` accordingly, writes a new ELF with `object`'s builder and checks it against
//! llvm-dwarfdump-22 (`--verify`, line rows, DIE addresses, FDEs). Instruction boundaries come
//! from llvm-objdump-22.
//!
//! Needs LLVM 22 (fails without it unless `SQTT_NO_LLVM=1`) and `<workspace>/fixtures/corpus`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dwarf_remap::{read_debug_sections, remap_dwarf, AddressMap, Error};
use object::build::elf::{Builder, SectionData};
use object::{Object, ObjectSection};

/// `s_nop 0` (SOPP, gfx9..gfx12): `0xbf800000` little endian.
const S_NOP: [u8; 4] = [0x00, 0x00, 0x80, 0xbf];

fn corpus() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let c = root.join("fixtures/corpus");
    assert!(
        c.is_dir(),
        "corpus not found at {} (expected <workspace root>/fixtures/corpus)",
        c.display()
    );
    c
}

/// Path of an LLVM 22 tool, or None when SQTT_NO_LLVM=1 and it is missing.
fn tool(name: &str) -> Option<PathBuf> {
    let p = Path::new("/usr/lib/llvm-22/bin").join(name);
    if p.exists() {
        return Some(p);
    }
    let ok = Command::new(format!("{name}-22"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(PathBuf::from(format!("{name}-22")));
    }
    if std::env::var("SQTT_NO_LLVM").as_deref() == Ok("1") {
        return None;
    }
    panic!("{name} (LLVM 22) not found; set SQTT_NO_LLVM=1 to skip");
}

fn run(tool: &Path, args: &[&str], file: &Path) -> (bool, String) {
    let o = Command::new(tool)
        .args(args)
        .arg(file)
        .output()
        .expect("run LLVM tool");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

fn inputs() -> Vec<PathBuf> {
    let c = corpus();
    let mut v = Vec::new();
    for e in std::fs::read_dir(c.join("compiled")).expect("compiled dir") {
        let p = e.expect("entry").path();
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if n.ends_with(".co") && n.contains("-g") {
            v.push(p);
        }
    }
    for e in std::fs::read_dir(c.join("triton")).expect("triton dir") {
        v.push(e.expect("entry").path());
    }
    v.sort();
    assert!(
        v.len() >= 40,
        "expected the -g and triton corpus, found {}",
        v.len()
    );
    v
}

/// Instruction start addresses of `.text` from llvm-objdump's `// ADDR: ENCODING` comments.
fn boundaries(objdump: &Path, file: &Path) -> Vec<u64> {
    let (ok, out) = run(objdump, &["-d", "--section=.text"], file);
    assert!(ok, "objdump failed on {}", file.display());
    let mut v: Vec<u64> = out
        .lines()
        .filter_map(|l| {
            let c = l.rsplit_once("// ")?.1;
            let (a, _) = c.split_once(':')?;
            u64::from_str_radix(a.trim(), 16).ok()
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

struct TextInfo {
    addr: u64,
    size: u64,
    offset: u64,
    /// Bytes of address space free after `.text` before the next allocated section.
    gap: u64,
    data: Vec<u8>,
}

fn text_info(elf: &[u8]) -> TextInfo {
    let f = object::File::parse(elf).expect("parse ELF");
    let t = f.section_by_name(".text").expect(".text");
    let (addr, size) = (t.address(), t.size());
    let next = f
        .sections()
        .filter(|s| s.address() > addr)
        .map(|s| s.address())
        .min()
        .unwrap_or(u64::MAX);
    TextInfo {
        addr,
        size,
        offset: t.file_range().expect("text range").0,
        gap: next - (addr + size),
        data: t.data().expect("text data").to_vec(),
    }
}

/// Inserts `bytes` before every `stride`-th instruction; returns (pairs, per-instruction insert).
fn plan(starts: &[u64], text: &TextInfo, stride: usize, bytes: u64) -> (Vec<(u64, u64)>, u64) {
    let mut pairs = Vec::with_capacity(starts.len() + 1);
    let mut grown = 0;
    for (i, &s) in starts.iter().enumerate() {
        if i % stride == stride - 1 {
            grown += bytes;
        }
        pairs.push((s, s + grown));
    }
    let end = text.addr + text.size;
    pairs.push((end, end + grown));
    (pairs, grown)
}

/// New `.text`: every old instruction at its mapped position plus its insert, gaps `s_nop 0`.
fn relayout(text: &TextInfo, pairs: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in pairs.windows(2) {
        let ((o0, n0), (o1, n1)) = (w[0], w[1]);
        let insn = &text.data[(o0 - text.addr) as usize..(o1 - text.addr) as usize];
        let ins = (n1 - n0) - (o1 - o0);
        assert_eq!(out.len() as u64, n0 - text.addr);
        for _ in 0..ins / 4 {
            out.extend_from_slice(&S_NOP);
        }
        out.extend_from_slice(insn);
    }
    out
}

/// Writes `orig` with `.text` replaced (grown in place) and the remapped DWARF sections.
fn build_elf(
    orig: &[u8],
    text: &TextInfo,
    new_text: Vec<u8>,
    dwarf: &HashMap<String, Vec<u8>>,
) -> Vec<u8> {
    let growth = new_text.len() as u64 - text.size;
    let shift = growth.div_ceil(0x1000) * 0x1000;
    let text_file_end = text.offset + text.size;
    let mut b = Builder::read(orig).expect("builder read");
    for s in b.sections.iter_mut() {
        let name = String::from_utf8_lossy(s.name.as_slice()).into_owned();
        if name == ".text" {
            s.data = SectionData::Data(new_text.clone().into());
        } else if let Some(d) = dwarf.get(&name) {
            s.data = SectionData::Data(d.clone().into());
        } else if s.sh_flags.contains(object::elf::SHF_ALLOC) && s.sh_offset >= text_file_end {
            s.sh_offset += shift;
        }
    }
    for seg in b.segments.iter_mut() {
        if seg.p_offset >= text_file_end && seg.p_filesz + seg.p_memsz > 0 {
            seg.p_offset += shift;
        } else if seg.p_offset <= text.offset && text_file_end <= seg.p_offset + seg.p_filesz {
            seg.p_filesz += growth;
            seg.p_memsz += growth;
        }
    }
    let mut out = Vec::new();
    b.write(&mut out).expect("builder write");
    out
}

/// Replaces every 16-digit `0x` number inside the code interval with its mapped value.
fn map_hex16(line: &str, map: &AddressMap) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let digits = &rest[i + 2..];
        let n = digits.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        if n == 16 {
            let v = u64::from_str_radix(&digits[..16], 16).unwrap();
            let v = if map.covers(v) {
                map.map(v).unwrap()
            } else {
                v
            };
            out.push_str(&format!("0x{v:016x}"));
        } else {
            out.push_str(&rest[i..i + 2 + n]);
        }
        rest = &digits[n..];
    }
    out.push_str(rest);
    out
}

/// Masks section offsets of lists, which move when lists are re-encoded.
fn mask_offsets(line: &str) -> String {
    let mut s = line.to_string();
    for key in [
        "loclist = 0x",
        "rangelist = 0x",
        "DW_AT_ranges\t(0x",
        "DW_AT_location\t(0x",
    ] {
        if let Some(i) = s.find(key) {
            let start = i + key.len();
            let n = s[start..]
                .chars()
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            if n == 8 {
                s.replace_range(start..start + n, "OFFSET__");
            }
        }
    }
    s
}

fn line_rows(dump: &str) -> Vec<String> {
    dump.lines()
        .filter(|l| l.starts_with("0x") && l.len() > 18)
        .map(str::to_string)
        .collect()
}

/// (FDE pc ranges, CFA "to 0x..." targets) from `--debug-frame`.
fn frame_facts(dump: &str) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for l in dump.lines() {
        if let Some(i) = l.find("pc=") {
            let r = &l[i + 3..];
            if let Some((a, b)) = r.split_once("...") {
                let b: String = b.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
                v.push((
                    u64::from_str_radix(a, 16).unwrap(),
                    u64::from_str_radix(&b, 16).unwrap(),
                ));
            }
        }
        if let Some(i) = l.find(" to 0x") {
            let a: String = l[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            v.push((u64::from_str_radix(&a, 16).unwrap(), u64::MAX));
        }
    }
    v
}

fn tmp_path(file: &Path, tag: &str) -> PathBuf {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("x");
    std::env::temp_dir().join(format!("dwarf-remap-{}-{tag}-{name}", std::process::id()))
}

#[test]
fn remap_corpus_and_verify_with_llvm_dwarfdump() {
    let (Some(objdump), Some(dwarfdump)) = (tool("llvm-objdump"), tool("llvm-dwarfdump")) else {
        return;
    };
    let mut total_pairs = 0usize;
    let mut total_rows = 0usize;
    let mut changed_sections: HashMap<String, usize> = HashMap::new();
    for file in inputs() {
        let orig = std::fs::read(&file).unwrap();
        let text = text_info(&orig);
        let starts = boundaries(&objdump, &file);
        assert!(!starts.is_empty(), "{}: no instructions", file.display());
        assert_eq!(starts[0], text.addr, "{}", file.display());
        // 8 bytes before every 5th instruction, or sparser until it fits the address gap.
        let mut stride = 5;
        let (pairs, grown) = loop {
            let (p, g) = plan(&starts, &text, stride, 8);
            if g <= text.gap {
                break (p, g);
            }
            stride += 1;
        };
        assert!(grown > 0, "{}: nothing inserted", file.display());
        total_pairs += pairs.len();
        let map = AddressMap::new(pairs.clone()).unwrap();
        let sections = read_debug_sections(&orig).unwrap();
        let dwarf = remap_dwarf(&sections, &map)
            .unwrap_or_else(|e| panic!("{}: remap failed: {e}", file.display()));
        for k in dwarf.keys() {
            *changed_sections.entry(k.clone()).or_default() += 1;
        }
        let new_text = relayout(&text, &pairs);
        let out = build_elf(&orig, &text, new_text, &dwarf);
        let out_path = tmp_path(&file, "out");
        std::fs::write(&out_path, &out).unwrap();

        let (ok, v) = run(&dwarfdump, &["--verify"], &out_path);
        assert!(
            ok && v.contains("No errors."),
            "{}: verify failed:\n{v}",
            file.display()
        );

        // Line rows: same rows, mapped addresses.
        let (_, a) = run(&dwarfdump, &["--debug-line"], &file);
        let (_, b) = run(&dwarfdump, &["--debug-line"], &out_path);
        let want: Vec<String> = line_rows(&a).iter().map(|l| map_hex16(l, &map)).collect();
        let got = line_rows(&b);
        assert!(!want.is_empty(), "{}: no line rows", file.display());
        assert_eq!(want.len(), got.len(), "{}: row count", file.display());
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{}: line row", file.display());
        }
        total_rows += got.len();

        // DIEs (with expanded range and location lists): mapped addresses, masked offsets.
        let (_, a) = run(&dwarfdump, &["--debug-info"], &file);
        let (_, b) = run(&dwarfdump, &["--debug-info"], &out_path);
        let want: Vec<String> = a
            .lines()
            .skip(1)
            .map(|l| mask_offsets(&map_hex16(l, &map)))
            .collect();
        let got: Vec<String> = b.lines().skip(1).map(mask_offsets).collect();
        assert_eq!(
            want.len(),
            got.len(),
            "{}: debug-info line count",
            file.display()
        );
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "{}: debug-info", file.display());
        }

        // FDE ranges and CFA locations.
        let (_, a) = run(&dwarfdump, &["--debug-frame"], &file);
        let (_, b) = run(&dwarfdump, &["--debug-frame"], &out_path);
        let want: Vec<(u64, u64)> = frame_facts(&a)
            .into_iter()
            .map(|(x, y)| {
                (
                    map.map(x).unwrap(),
                    if y == u64::MAX {
                        y
                    } else {
                        map.map(y).unwrap()
                    },
                )
            })
            .collect();
        assert_eq!(want, frame_facts(&b), "{}: debug-frame", file.display());
        let _ = std::fs::remove_file(&out_path);
    }
    eprintln!("pairs {total_pairs}, line rows {total_rows}, changed sections {changed_sections:?}");
    for s in [
        ".debug_info",
        ".debug_line",
        ".debug_addr",
        ".debug_frame",
        ".debug_rnglists",
        ".debug_loclists",
        ".debug_ranges",
    ] {
        assert!(changed_sections.contains_key(s), "{s} never changed");
    }
}

#[test]
fn identity_map_leaves_every_section_byte_identical() {
    for file in inputs() {
        let orig = std::fs::read(&file).unwrap();
        let text = text_info(&orig);
        let map = AddressMap::identity(text.addr, text.addr + text.size).unwrap();
        let sections = read_debug_sections(&orig).unwrap();
        let changed = remap_dwarf(&sections, &map).unwrap();
        let names: Vec<_> = changed.keys().collect();
        assert!(changed.is_empty(), "{}: changed {names:?}", file.display());
    }
}

#[test]
fn map_not_covering_text_fails_closed() {
    let file = corpus().join("compiled/gfx1100__hip-mini__O3-g.co");
    let orig = std::fs::read(&file).unwrap();
    let text = text_info(&orig);
    // Covers only the first half of .text.
    let map = AddressMap::identity(text.addr, text.addr + text.size / 2).unwrap();
    let sections = read_debug_sections(&orig).unwrap();
    match remap_dwarf(&sections, &map) {
        Err(Error::Unmapped { address, .. }) => assert!(address > text.addr + text.size / 2),
        other => panic!("expected Unmapped, got {other:?}"),
    }
}

#[test]
fn unknown_debug_section_fails_closed() {
    let mut s = HashMap::new();
    s.insert(".debug_types".to_string(), vec![0u8; 4]);
    let map = AddressMap::identity(0x1000, 0x2000).unwrap();
    assert!(matches!(
        remap_dwarf(&s, &map),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn unknown_range_list_entry_fails_closed() {
    let file = corpus().join("compiled/gfx1100__hip-mini__O3-g.co");
    let orig = std::fs::read(&file).unwrap();
    let text = text_info(&orig);
    let map = AddressMap::identity(text.addr, text.addr + text.size).unwrap();
    let mut sections = read_debug_sections(&orig).unwrap();
    let rng = sections
        .get_mut(".debug_rnglists")
        .expect(".debug_rnglists");
    // DWARF32 header: length 4, version 2, sizes 2, offset_entry_count 4, then the table.
    let count = u32::from_le_bytes([rng[8], rng[9], rng[10], rng[11]]) as usize;
    let first = 12 + 4 * count;
    rng[first] = 0x20;
    match remap_dwarf(&sections, &map) {
        Err(Error::Unsupported {
            section, offset, ..
        }) => {
            assert_eq!(section, ".debug_rnglists");
            assert_eq!(offset, first as u64);
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}
