//! Bundles of a host binary are numbered and named alike by `info` and `--fatbin` (session-22
//! fresh tester). Inputs are `fixtures/hosts/x86_64__fx-app__nopie.elf` (two bundles in
//! `.hip_fatbin`, one `__hip_fatbin_wrapper` each, absolute pointers, no relocations) with one
//! field changed; offsets come from hsaco's ELF reader and are checked with llvm-readelf-22.

mod support;
use std::process::Command;
use support::{fatbin_functions as fatbin, fixture, run};

fn host() -> (Vec<u8>, hsaco::elf::Elf) {
    let b = fixture("hosts/x86_64__fx-app__nopie.elf");
    let e = hsaco::elf::Elf::parse(&b).expect("fixture parses");
    (b, e)
}

/// Both wrappers pointing at the first bundle: `info` listed only that bundle, numbered by
/// wrapper, while `--fatbin` instrumented both, numbered by their order in `.hip_fatbin`. Now
/// `info` lists both bundles of `.hip_fatbin` under the numbers `--fatbin` gives them. In the
/// output both wrappers point at the rewritten first bundle (the one the HIP runtime loads).
#[test]
fn info_and_fatbin_number_bundles_alike() {
    let (mut b, e) = host();
    let seg = e.section_by_name(".hipFatBinSegment").expect("wrappers");
    let ptr0 = seg.offset as usize + 8;
    let first = b[ptr0..ptr0 + 8].to_vec();
    b[ptr0 + 24..ptr0 + 32].copy_from_slice(&first);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("dup.elf");
    std::fs::write(&file, &b).expect("write input");
    let (code, info, err) = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    let listed: Vec<String> = info
        .lines()
        .filter_map(|l| l.strip_prefix("code object "))
        .map(|l| {
            let id = l.split(' ').nth(1).unwrap_or_default();
            let bundle = l.split("(bundle ").nth(1).unwrap_or_default();
            format!(
                "bundle {} {id}",
                bundle.split([',', ' ']).next().unwrap_or_default()
            )
        })
        .collect();
    let out = dir.path().join("out.elf");
    let (code, lines, err) = fatbin(&file, &out);
    assert_eq!(code, Some(0), "{err}");
    let patched: Vec<String> = lines
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect();
    assert_eq!(listed.len(), 4, "{info}");
    assert_eq!(listed, patched, "{info}\n{lines}");
    // The bundle no wrapper points at is named by both (session-24 tester: silently
    // instrumented): its offset is the second bundle's, checked against hsaco's listing.
    let img = hsaco::hostwrite::scan_host(&b[..]).expect("scan");
    let second = &img.bundles[1].location;
    let warning = format!(
        "warning: bundle 1 of .hip_fatbin (file offset {:#x}, {} bytes) is pointed at by no fat binary wrapper, so the HIP runtime never loads it (kept, and instrumented like the others)",
        second.offset, second.extent
    );
    assert!(info.lines().any(|l| l == warning), "{info}");
    let on_stderr = format!("sqtt-patch: {}: {warning}", file.display());
    assert!(err.lines().any(|l| l == on_stderr), "{err}");
    let w = hsaco::hostwrite::scan_host(&std::fs::read(&out).expect("output")[..]).expect("scan");
    assert_eq!(w.wrappers.len(), 2);
    assert!(w.wrappers.iter().all(|w| w.bundle == 0), "{:?}", w.wrappers);
}

/// `.hip_fatbin`'s size cut to half its bundles: `--fatbin` said an entry "extends past the
/// end of the data", `info` that the second wrapper's bundle pointer is outside every
/// file-backed section. Both give the same message now, naming the section and its range.
#[test]
fn a_hip_fatbin_cut_short_is_worded_alike() {
    let (mut b, e) = host();
    let sec = e.section_by_name(".hip_fatbin").expect(".hip_fatbin");
    let size_field = e.header.e_shoff as usize + 64 * sec.index + 32;
    b[size_field..size_field + 8].copy_from_slice(&0x8000u64.to_le_bytes());
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cut.elf");
    std::fs::write(&file, &b).expect("write input");
    if let Ok(r) = Command::new("llvm-readelf-22")
        .arg("-S")
        .arg(&file)
        .output()
    {
        let t = String::from_utf8_lossy(&r.stdout);
        let row = t
            .lines()
            .find(|l| l.contains(".hip_fatbin"))
            .unwrap_or_default();
        assert!(row.contains(&format!("{:06x} 008000", sec.offset)), "{row}");
    }
    let (code, _, info) = run(&["info".as_ref(), file.as_os_str()]);
    assert_eq!(code, Some(2), "{info}");
    let out = dir.path().join("out.elf");
    let (code, _, patch) = fatbin(&file, &out);
    assert_eq!(code, Some(2), "{patch}");
    assert!(!out.exists());
    let msg = format!(
        "malformed host ELF at offset {:#x}: .hip_fatbin (file offsets {:#x}..{:#x}) ends inside a bundle (a section size cut short or a bundle size too large): offload bundle entry ",
        size_field - 32,
        sec.offset,
        sec.offset + 0x8000
    );
    let tail = |s: &str| s.split_once(": malformed").map(|(_, t)| t.to_string());
    assert!(info.contains(&msg), "{info}");
    assert_eq!(tail(&info), tail(&patch), "{info}\n{patch}");
}
